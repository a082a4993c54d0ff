/* SPDX-License-Identifier: BSD-3-Clause */
/* smcrbd: rate limits for the log lines clients can cause (a client that
 * reconnects with garbage must not write gigabytes of log).  Two token
 * buckets per line: one per kind of line (all clients), one per client
 * address; a line passes when both have a token.  The lines held back
 * are counted per kind and reported by one "suppressed N" line before the
 * next line of that kind that passes.  Thread-safe. */
#ifndef SMCRBD_COMMON_LOGRATE_H
#define SMCRBD_COMMON_LOGRATE_H

#include <stdbool.h>

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

#define log_rated(kind, client, level, ...) do {				\
		if (lograte_ok(kind, client))					\
			applog(level, __VA_ARGS__);				\
	} while (0)

#endif
