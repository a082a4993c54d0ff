/* SPDX-License-Identifier: BSD-3-Clause */
/* smcrd: the I/O engine (smcrd-engine*.c; its rooms are listed in
 * smcrd-engine-int.h).
 *
 * N worker threads (smcrd-ioN), each with one io_uring that drives the
 * connections it owns; engine_add() gives a connection to the worker with
 * the fewest.  A connection is read and written by its transport:
 *   - a plain socket (TCP or unix; unless SMCRD_RING_SOCKET=0): requests
 *     received by IORING_OP_RECV and replies sent by IORING_OP_SENDMSG on
 *     the ring; with nothing else in flight a READ's or WRITE's reply is
 *     a sendmsg linked to its file I/O;
 *   - SMC-R and TLS (and every socket with SMCRD_RING_SOCKET=0): a
 *     multishot poll on the transport's poll fd (and a one-shot one while
 *     a send waits for room); SMC-R WRITE payloads are used where they
 *     lie in the receive buffer, and READ data is read straight into the
 *     reserved send buffer the RDMA writes go from.
 * Requests are parsed as they arrive and run concurrently, up to the queue
 * depth per connection: file I/O (read, write, fsync, fallocate, fadvise)
 * on the ring, a small buffered WRITE done by the worker itself when the
 * ring would hand it to a kernel thread, RBD exports through librbd,
 * BLOCK_STATUS in bounded slices of the worker's time.  Replies are queued
 * per connection in completion order and leave by writev, sendfile (large
 * READs; SMCRD_READ_REPLY=copy|zc), the reserved send buffer or a sendmsg
 * on the ring.  An eventfd brings new connections and the drain; a timer
 * runs the drain and the request and idle timeouts. */
#ifndef SMCRD_SMCRD_ENGINE_H
#define SMCRD_SMCRD_ENGINE_H

#include <stdint.h>

#include "smcrd-export.h"
#include "smcrd-iostat.h"
#include "nbd-server.h"
#include "transport.h"

struct engine_params {
	unsigned threads;		/* worker threads (>= 1) */
	unsigned queue_depth;		/* requests in flight per connection */
	uint64_t max_memory;		/* request buffers, all workers */
	/* Of them, what the connections of one peer address may hold (each
	 * worker its part); 0: no limit. */
	uint64_t max_memory_per_address;
	unsigned drain_timeout_ms;	/* SIGTERM: give up after this */
	unsigned drain_idle_ms;		/* draining: close connections idle
					 * this long (0: 200 ms) */
	/* A request whose payload stops coming (no byte for this long) closes
	 * its connection and frees its buffer; 0: never. */
	unsigned request_timeout_ms;
	/* A connection with no request in flight and nothing received or
	 * sent for this long is closed (a session that holds a client slot
	 * and does nothing); 0: never. */
	unsigned idle_timeout_ms;
	bool fixed_buffers;		/* register request buffers with
					 * io_uring (READ_FIXED/WRITE_FIXED) */
	/* Called (from a worker thread) when a connection is gone, with the
	 * owner given to engine_add(). */
	void (*closed)(void *arg, void *owner);
	void *closed_arg;
	/* Counters per export and per client (smcrctl status, metrics), or
	 * NULL; outlives the engine. */
	struct iostat_table *iostat;
};

struct engine;

int engine_start(const struct engine_params *p, struct engine **out);
/* Hands a connection in the transmission phase to a worker.  Takes
 * ownership of t and of the reference on exp, also on failure. */
int engine_add(struct engine *e, struct bd_transport *t, struct export *exp,
	       const struct nbd_server_session *s, void *owner);
/* Starts draining: requests already received are finished and answered,
 * later ones get NBD_ESHUTDOWN, idle connections are closed.  Returns at
 * once. */
void engine_drain(struct engine *e);
/* Waits until every worker has ended (drain first), then frees. */
void engine_stop(struct engine *e);
unsigned engine_connections(struct engine *e);

/* Counters since the start (all workers). */
struct engine_stats {
	uint64_t requests;
	uint64_t zc_writes;		/* WRITEs written from the transport's memory */
	uint64_t zc_reads;		/* READs read into the transport's memory */
	uint64_t file_reads;		/* READs sent by send_file */
	uint64_t inline_writes;		/* buffered WRITEs done by the worker */
	uint64_t request_timeouts;	/* connections closed: payload stalled */
	uint64_t idle_timeouts;		/* connections closed: idle */
};
void engine_get_stats(struct engine *e, struct engine_stats *st);

#endif
