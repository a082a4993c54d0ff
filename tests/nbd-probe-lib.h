/* SPDX-License-Identifier: BSD-3-Clause */
/* smcrbd tests: NBD's transmission phase as blocking calls, for the unit
 * tests, nbd-probe and the fuzz target of blockdev's client half.  The
 * product's one reply reader is client/nbd-conn-rx.c; this one takes a
 * connection that blockdev/nbd-client.c brought through the handshake.
 *
 * Commands run one at a time (nbdp_cmd(), nbdp_pread() ...) or pipelined:
 * nbdp_submit() many, then nbdp_wait() for them in whatever order the
 * server answers.  Errors are -errno; a command the server failed gives
 * the matching -errno (NBD errors are errno values).  A broken stream
 * (protocol violation, hangup) makes every later call fail with -EPIPE. */
#ifndef SMCRBD_NBD_PROBE_LIB_H
#define SMCRBD_NBD_PROBE_LIB_H

#include <stdint.h>

#include "nbd-client.h"

struct nbdp;

/* Takes over c after a successful nbd_client_go() or
 * nbd_client_export_name(): its transport and whether it negotiated
 * structured replies; c is freed in every case.  meta_id: the ID of
 * base:allocation from nbd_client_set_meta_context(), or NULL when it
 * was not selected (then a BLOCK_STATUS chunk breaks the stream).  Every
 * read and write waits at most timeout_ms. */
int nbdp_start(struct nbd_client *c, int timeout_ms, const uint32_t *meta_id,
	       struct nbdp **out);
/* Closes the transport (without NBD_CMD_DISC) and frees everything. */
void nbdp_close(struct nbdp *p);
struct bd_transport *nbdp_transport(struct nbdp *p);

/* One command, submitted and waited for (buf as for nbdp_submit()). */
int nbdp_cmd(struct nbdp *p, uint16_t type, uint16_t flags, uint64_t offset, uint32_t len,
	     void *buf);
int nbdp_pread(struct nbdp *p, void *buf, uint32_t len, uint64_t offset, uint16_t flags);
int nbdp_pwrite(struct nbdp *p, const void *buf, uint32_t len, uint64_t offset,
		uint16_t flags);
/* NBD_CMD_BLOCK_STATUS (base:allocation): up to max extents from offset
 * into ext, *n of them (cut to len in all). */
int nbdp_block_status(struct nbdp *p, uint32_t len, uint64_t offset, uint16_t flags,
		      struct nbd_extent *ext, unsigned max, unsigned *n);
/* Sends NBD_CMD_DISC (after collecting nothing: wait for your commands
 * first).  The transport stays open until nbdp_close(). */
int nbdp_disconnect(struct nbdp *p);

/* Pipelining.  buf is the read destination (READ) or the payload (WRITE)
 * and must stay valid until the command completes.  Up to
 * NBDP_MAX_INFLIGHT commands may be outstanding. */
#define NBDP_MAX_INFLIGHT	1024
int nbdp_submit(struct nbdp *p, uint16_t type, uint16_t flags, uint64_t offset,
		uint32_t len, void *buf, uint64_t *cookie);
/* Waits for the next completed command: its cookie, its result (0 or
 * -errno from the server) and, for errors with an offset, that offset
 * (else NBDP_NO_OFFSET). */
#define NBDP_NO_OFFSET	UINT64_MAX
int nbdp_wait(struct nbdp *p, uint64_t *cookie, int *result, uint64_t *err_offset);
/* Waits for one particular command. */
int nbdp_wait_cookie(struct nbdp *p, uint64_t cookie, int *result, uint64_t *err_offset);
unsigned nbdp_inflight(struct nbdp *p);

#endif
