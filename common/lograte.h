/* SPDX-License-Identifier: BSD-3-Clause */
/* smcrbd: rate limits for the log lines clients can cause (a client that
 * reconnects with garbage must not write gigabytes of log), on one token
 * bucket:
 *  - lograte_ok: two buckets per line, one per kind of line (all clients)
 *    and one per client address; a line passes when both have a token.
 *    The lines held back are counted per kind and reported by one
 *    "suppressed N" line before the next line of that kind that passes.
 *  - lograte_every_ok: one line of a kind (a refusal at a limit) per
 *    interval, the lines held back counted into the next one.
 * Thread-safe. */
#ifndef SMCRBD_COMMON_LOGRATE_H
#define SMCRBD_COMMON_LOGRATE_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "applog.h"

enum lograte_kind {
	LOGRATE_HANDSHAKE,		/* a handshake that failed or was refused */
	LOGRATE_TLS,			/* TLS sessions and their failures */
	LOGRATE_SESSION,		/* a client's export opened and closed */
	LOGRATE_PROTOCOL,		/* protocol errors in transmission */
	LOGRATE_KINDS
};

/* Per kind: LOGRATE_KIND_BURST lines at once, LOGRATE_KIND_RATE a second
 * after; per client address: LOGRATE_CLIENT_BURST, LOGRATE_CLIENT_RATE. */
#define LOGRATE_KIND_BURST	100
#define LOGRATE_KIND_RATE	20
#define LOGRATE_CLIENT_BURST	40
#define LOGRATE_CLIENT_RATE	5

/* Whether a line of kind about client (a peer as bd_format_addr() writes
 * it, "host:port" or "[v6]:port"; the port is ignored; NULL: none) may
 * be logged now.  When it may and lines of this kind were held back, logs
 * the "suppressed" line first. */
bool lograte_ok(enum lograte_kind kind, const char *client);

/* A token bucket: tokens at at_ms (0: never used, full). */
struct lograte_bucket {
	double tokens;
	int64_t at_ms;
};

/* At most one line per interval_ms; *held: the lines held back before it. */
struct lograte_every {
	pthread_mutex_t lock;
	struct lograte_bucket b;
	unsigned long held;
};

#define LOGRATE_EVERY_INIT { PTHREAD_MUTEX_INITIALIZER, { 0, 0 }, 0 }

bool lograte_every_ok(struct lograte_every *e, unsigned interval_ms, unsigned long *held);

/* A warning at most once per interval_ms of e, with the count of those
 * held back since: "... (N more like this not logged)". */
#define log_every_warn(e, interval_ms, fmt, ...) do {				\
		unsigned long held_;						\
		if (lograte_every_ok(e, interval_ms, &held_))			\
			log_warn(fmt " (%lu more like this not logged)",	\
				 ##__VA_ARGS__, held_);				\
	} while (0)

#define log_rated(kind, client, level, ...) do {				\
		if (lograte_ok(kind, client))					\
			applog(level, __VA_ARGS__);				\
	} while (0)

#endif
