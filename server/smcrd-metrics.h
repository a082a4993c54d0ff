/* SPDX-License-Identifier: BSD-3-Clause */
/* smcrd --metrics-listen: the Prometheus text of smcrctl metrics over HTTP
 * (GET /metrics), served by one small thread of its own. */
#ifndef SMCRD_METRICS_H
#define SMCRD_METRICS_H

#include <stddef.h>

/* Connections served at once; a new one beyond them replaces the one that
 * has waited longest for its request (a slow or silent client). */
#define METRICS_CONNS		8
/* A request's line and headers, at most (more: 431). */
#define METRICS_REQ_MAX		4096
/* A connection's whole life, request and reply, at most. */
#define METRICS_TIMEOUT_MS	5000

/* The body of a 200 reply: malloc'ed text and its length, or NULL (503).
 * Called on the metrics thread. */
typedef char *(*metrics_body_fn)(void *arg, size_t *len);

struct metrics;

/* Binds a listening TCP socket to spec: PORT (127.0.0.1), ADDR:PORT or
 * [V6]:PORT; -EINVAL for a malformed spec (why in the log), else the
 * socket or -errno. */
int metrics_listen(const char *spec);
/* Serves GET /metrics on lfd (taken over) from a thread of its own. */
int metrics_start(int lfd, metrics_body_fn body, void *arg, struct metrics **out);
/* Stops the thread, closes everything; NULL is allowed. */
void metrics_stop(struct metrics *m);

#endif
