/* SPDX-License-Identifier: BSD-3-Clause */
/* smcrbd tests: a small NBD server in memory (one thread per connection)
 * over TCP or libsmcr (CLC; TCP fallback on a host without RDMA), with
 * fault knobs for the client tests: stop answering, answer ESHUTDOWN,
 * drop connections, go away and come back on the same port, handshakes
 * that trickle or never end. */
#ifndef SMCRBD_TESTS_MEMSERVER_H
#define SMCRBD_TESTS_MEMSERVER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct memsrv;

struct memsrv_opts {
	bool smcr;			/* listen with libsmcr (CLC first) */
	unsigned port;			/* 0: any free port on 127.0.0.1 */
	uint64_t size;			/* 0: 16 MiB */
	const char *name;		/* NULL: "mem" */
	bool no_multi_conn;
	bool read_only;
	unsigned delay_us;		/* before each reply */
};

int memsrv_start(const struct memsrv_opts *o, struct memsrv **out);
void memsrv_stop(struct memsrv *s);
unsigned memsrv_port(struct memsrv *s);
uint8_t *memsrv_data(struct memsrv *s);

/* Server "crash": close the listener and every connection (requests in
 * flight get no reply).  resume listens again on the same port. */
void memsrv_pause(struct memsrv *s);
int memsrv_resume(struct memsrv *s);

/* Knobs (take effect at the next request). */
void memsrv_hang(struct memsrv *s, bool on);	/* read requests, never reply */
void memsrv_eshutdown(struct memsrv *s, unsigned n);	/* next n replies ESHUTDOWN */
/* Close the connection instead of answering the n-th request from now. */
void memsrv_drop_after(struct memsrv *s, unsigned n);

/* How a structured READ's data goes out (a hostile server's shapes and
 * legal ones the client must take). */
enum memsrv_read_shape {
	MEMSRV_READ_ONE,		/* one OFFSET_DATA chunk */
	MEMSRV_READ_REVERSE,		/* 512-byte OFFSET_DATA chunks, last first */
	MEMSRV_READ_HOLES,		/* the first half as OFFSET_HOLE (zeros
					 * stored there), then the second half */
	MEMSRV_READ_OVERLAP,		/* the first half twice, the second never */
	MEMSRV_READ_HOLE_TWICE,		/* the first half as a hole twice */
	MEMSRV_READ_GAP,		/* the first half only, then done */
	MEMSRV_READ_SHAPES
};
const char *memsrv_read_shape_name(enum memsrv_read_shape shape);
int memsrv_read_shape_parse(const char *name);	/* -EINVAL if unknown */
void memsrv_read_shape(struct memsrv *s, enum memsrv_read_shape shape);

/* Handshakes of connections accepted from now on (MEMSRV_HS_NORMAL: the
 * real one).  GREETING: the greeting one byte every ms, then nothing.
 * ENDLESS_INFO: a good greeting, ACK to structured replies, ERR_UNSUP to
 * the rest, and to NBD_OPT_GO or INFO an NBD_REP_INFO (NBD_INFO_EXPORT)
 * every ms (0: as fast as it can) that never ends. */
enum { MEMSRV_HS_NORMAL, MEMSRV_HS_GREETING, MEMSRV_HS_ENDLESS_INFO };
void memsrv_handshake_mode(struct memsrv *s, int mode, unsigned ms);

unsigned memsrv_connections(struct memsrv *s);	/* TCP connections accepted */
unsigned memsrv_requests(struct memsrv *s);	/* executed */
unsigned memsrv_accepted(struct memsrv *s);	/* connections, handshake done */
unsigned memsrv_open_conns(struct memsrv *s);

#endif
