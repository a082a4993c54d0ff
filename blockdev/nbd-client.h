/* SPDX-License-Identifier: BSD-3-Clause */
/* smcrbd: the client half of NBD over a transport.
 *
 * Blocking calls (each waits on the transport with the client's timeout).
 * After the handshake, commands can be issued one at a time (nbd_client_
 * pread() ...) or pipelined: nbd_client_submit() many, then collect them
 * with nbd_client_wait() in whatever order the server answers.
 *
 * Errors are -errno.  An error reported by the server for a command is
 * the matching -errno (NBD errors are errno values); a failed option gives
 * -ENOENT (NBD_REP_ERR_UNKNOWN), -EACCES (ERR_POLICY), -ENOTSUP
 * (ERR_UNSUP), -EINVAL (ERR_INVALID), -ESHUTDOWN (ERR_SHUTDOWN) or -EIO,
 * with the reply type and message kept for nbd_client_last_reply().  A
 * broken stream (protocol violation, hangup) makes every later call fail
 * with -EPIPE. */
#ifndef SMCRBD_NBD_CLIENT_H
#define SMCRBD_NBD_CLIENT_H

#include <stdbool.h>
#include <stdint.h>

#include "nbd-wire.h"
#include "transport.h"

struct nbd_client;

/* Reads the greeting and sends the client flags (fixed newstyle, no
 * zeroes).  Takes ownership of t in every case. */
int nbd_client_open(struct bd_transport *t, int timeout_ms, struct nbd_client **out);
/* Closes the transport (without NBD_CMD_DISC) and frees everything. */
void nbd_client_close(struct nbd_client *c);
/* Frees the client but hands its transport back (after NBD_OPT_GO, for a
 * caller that runs the transmission phase itself, e.g. client/nbd-conn.c). */
struct bd_transport *nbd_client_detach(struct nbd_client *c);

struct bd_transport *nbd_client_transport(struct nbd_client *c);
/* Server handshake flags from the greeting. */
uint16_t nbd_client_handshake_flags(struct nbd_client *c);
/* Reply type and message of the last failed option. */
uint32_t nbd_client_last_reply(struct nbd_client *c, const char **msg);

/* --- options ------------------------------------------------------------ */
int nbd_client_structured(struct nbd_client *c);
/* NBD_OPT_SET_META_CONTEXT with one query for export name: 0 and the
 * context's ID when the server selected it, -ENOTSUP when it has no such
 * context.  base:allocation selected this way makes
 * nbd_client_block_status() possible after NBD_OPT_GO. */
int nbd_client_set_meta_context(struct nbd_client *c, const char *name, const char *query,
				uint32_t *id);
int nbd_client_list(struct nbd_client *c,
		    int (*cb)(void *arg, const char *name, const char *desc), void *arg);
int nbd_client_info(struct nbd_client *c, const char *name, struct nbd_export_info *info);
/* Enters the transmission phase. */
int nbd_client_go(struct nbd_client *c, const char *name, struct nbd_export_info *info);
int nbd_client_export_name(struct nbd_client *c, const char *name,
			   struct nbd_export_info *info);
int nbd_client_abort(struct nbd_client *c);
/* NBD_OPT_STARTTLS: 0 when the server acknowledged it; the caller then
 * runs the TLS handshake on nbd_client_transport(c) (upgraded in place).
 * -ENOTSUP etc. when refused (the stream stays usable in the clear). */
int nbd_client_starttls(struct nbd_client *c);
/* Sends any option and reads replies up to the final one, whose type is
 * stored in *reply (for tests and probing). */
int nbd_client_option(struct nbd_client *c, uint32_t option, const void *data,
		      uint32_t len, uint32_t *reply);

/* Info from the last successful NBD_OPT_GO/INFO/EXPORT_NAME. */
const struct nbd_export_info *nbd_client_export(struct nbd_client *c);
bool nbd_client_is_structured(struct nbd_client *c);

/* --- transmission ------------------------------------------------------- */
int nbd_client_pread(struct nbd_client *c, void *buf, uint32_t len, uint64_t offset,
		     uint16_t flags);
int nbd_client_pwrite(struct nbd_client *c, const void *buf, uint32_t len,
		      uint64_t offset, uint16_t flags);
int nbd_client_flush(struct nbd_client *c, uint16_t flags);
int nbd_client_trim(struct nbd_client *c, uint32_t len, uint64_t offset, uint16_t flags);
int nbd_client_zero(struct nbd_client *c, uint32_t len, uint64_t offset, uint16_t flags);
int nbd_client_cache(struct nbd_client *c, uint32_t len, uint64_t offset, uint16_t flags);
/* NBD_CMD_BLOCK_STATUS (base:allocation): up to max extents from offset
 * into ext, *n of them (cut to len in all). */
int nbd_client_block_status(struct nbd_client *c, uint32_t len, uint64_t offset,
			    uint16_t flags, struct nbd_extent *ext, unsigned max, unsigned *n);
/* Sends NBD_CMD_DISC (after collecting nothing: wait for your commands
 * first).  The transport stays open until nbd_client_close(). */
int nbd_client_disconnect(struct nbd_client *c);

/* Pipelining.  buf is the read destination (READ) or the payload (WRITE)
 * and must stay valid until the command completes.  Up to
 * NBD_CLIENT_MAX_INFLIGHT commands may be outstanding. */
#define NBD_CLIENT_MAX_INFLIGHT	1024
int nbd_client_submit(struct nbd_client *c, uint16_t type, uint16_t flags,
		      uint64_t offset, uint32_t len, void *buf, uint64_t *cookie);
/* Waits for the next completed command: its cookie, its result (0 or
 * -errno from the server) and, for errors with an offset, that offset
 * (else NBD_CLIENT_NO_OFFSET). */
#define NBD_CLIENT_NO_OFFSET	UINT64_MAX
int nbd_client_wait(struct nbd_client *c, uint64_t *cookie, int *result,
		    uint64_t *err_offset);
/* Waits for one particular command. */
int nbd_client_wait_cookie(struct nbd_client *c, uint64_t cookie, int *result,
			   uint64_t *err_offset);
unsigned nbd_client_inflight(struct nbd_client *c);

#endif
