/* SPDX-License-Identifier: BSD-3-Clause */
/* smcrd: I/O counters per export and per client (peer address), for
 * smcrctl status and metrics.  Entries are made on a connection's first
 * use and live until exit, so their counters only grow (Prometheus
 * counters); a reload keeps an export's by its name.  The engine's workers
 * add with relaxed atomics; readers copy with atomic loads. */
#ifndef SMCRD_SMCRD_IOSTAT_H
#define SMCRD_SMCRD_IOSTAT_H

#include <pthread.h>
#include <stdint.h>
#include <time.h>

#include "monotime.h"

static inline uint64_t mono_us(void)
{
	return (uint64_t)now_us();
}

/* Latency histogram: request received to reply queued.  Upper bounds in
 * microseconds; the last bucket is +Inf. */
#define IOSTAT_BUCKETS	15
extern const uint32_t iostat_bound_us[IOSTAT_BUCKETS - 1];

/* Clients beyond this many addresses are counted under "other". */
#define IOSTAT_MAX_CLIENTS	256

enum iostat_kind { IOSTAT_EXPORT, IOSTAT_CLIENT };

struct iostat {
	uint64_t requests;		/* answered */
	uint64_t reads, writes;		/* of them READ, WRITE */
	uint64_t bytes_read, bytes_written;
	uint64_t errors;		/* answered with an NBD error */
	uint64_t connections;		/* gauge: open now */
	uint64_t connections_total;
	uint64_t lat_sum_us;
	uint64_t lat[IOSTAT_BUCKETS];	/* per bucket, not cumulative */
};

struct iostat_entry {
	struct iostat_entry *next;
	enum iostat_kind kind;
	struct iostat st;
	char name[];
};

struct iostat_table {
	pthread_mutex_t lock;
	struct iostat_entry *head, *tail;	/* in order of creation */
	unsigned nclients;
};

void iostat_init(struct iostat_table *t);
void iostat_fini(struct iostat_table *t);
/* The entry of (kind, name), made if new; NULL when out of memory. */
struct iostat *iostat_get(struct iostat_table *t, enum iostat_kind kind, const char *name);
/* One answered request: type (NBD_CMD_*), payload bytes moved, NBD error,
 * latency. */
void iostat_add(struct iostat *s, uint16_t type, uint64_t bytes, uint32_t error,
		uint64_t lat_us);
void iostat_conn(struct iostat *s, int delta);
/* A consistent-enough copy (each field read atomically). */
void iostat_read(const struct iostat *s, struct iostat *out);

#endif
