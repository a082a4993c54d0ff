/* SPDX-License-Identifier: BSD-3-Clause */
/* smcrbd: the client half of NBD over a transport: the handshake.
 *
 * Blocking calls.  The timeout given to nbd_client_open() bounds the whole
 * handshake, from the greeting to the last option (one deadline, not one
 * per read: a server that sends a byte at a time runs out of it), and an
 * option gets at most 64 replies before its final one (4096 for
 * NBD_OPT_LIST): more break the stream with -EPROTO.
 * After NBD_OPT_GO the caller takes the transport (nbd_client_detach())
 * and runs the transmission phase itself: client/nbd-conn*.c do (the
 * tests' blocking calls for it are in tests/nbd-probe-lib.h).
 *
 * Errors are -errno.  A failed option gives -ENOENT
 * (NBD_REP_ERR_UNKNOWN), -EACCES (ERR_POLICY), -ENOTSUP (ERR_UNSUP),
 * -EINVAL (ERR_INVALID), -ESHUTDOWN (ERR_SHUTDOWN) or -EIO, with the
 * reply type and message kept for nbd_client_last_reply().  A broken
 * stream (protocol violation, hangup) makes every later call fail with
 * -EPIPE. */
#ifndef SMCRBD_NBD_CLIENT_H
#define SMCRBD_NBD_CLIENT_H

#include <stdbool.h>
#include <stdint.h>

#include "nbd-wire.h"
#include "transport.h"

struct nbd_client;

/* Reads the greeting and sends the client flags (fixed newstyle, no
 * zeroes).  Takes ownership of t in every case.  timeout_ms: for all the
 * calls on c from now on, together (-1: none); -ETIMEDOUT after it. */
int nbd_client_open(struct bd_transport *t, int timeout_ms, struct nbd_client **out);
/* What is left of that timeout (0 when it is over; -1: none), e.g. for a
 * TLS handshake in between. */
int nbd_client_left_ms(struct nbd_client *c);
/* Closes the transport (without NBD_CMD_DISC) and frees everything. */
void nbd_client_close(struct nbd_client *c);
/* Frees the client but hands its transport back (after NBD_OPT_GO). */
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
 * context. */
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
/* Whether the server acknowledged NBD_OPT_STRUCTURED_REPLY. */
bool nbd_client_is_structured(struct nbd_client *c);

#endif
