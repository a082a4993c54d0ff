/* SPDX-License-Identifier: BSD-3-Clause */
/* smcrd: the I/O engine.
 *
 * N worker threads, each with one io_uring that drives everything of the
 * connections it owns: a multishot poll on each transport's poll fd, the
 * file I/O (read/write/fsync/fallocate/fadvise) and a wakeup eventfd.
 * Requests are parsed from the transport as they arrive, executed
 * concurrently (up to the queue depth per connection), and answered in
 * completion order; replies of one loop iteration leave in one writev. */
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
