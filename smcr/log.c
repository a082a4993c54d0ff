/* SPDX-License-Identifier: BSD-3-Clause */
/* smcrbd: libsmcr's logging, one line per call, safe across threads: to
 * the application's callback if it set one, else to stderr, stamped as
 * logline.h says. */
#include <config.h>

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#include "log.h"
#include "logline.h"

static int log_level = -1;
static const char *log_ident = "smcr";

/* The sink: set while no other thread logs (before contexts start), or
 * swapped under the lock; a line is passed to the sink under it too, so a
 * caller that clears its callback knows it is no longer called. */
static pthread_mutex_t sink_lock = PTHREAD_MUTEX_INITIALIZER;
static smcr_log_fn sink_fn;
static void *sink_opaque;

/* The peer of the connection this thread works for ("host:port"), while
 * it does (a handshake): its lines start with it, and a sink may ask for
 * it to rate them (smcr_log_peer()). */
static __thread char log_peer[64];

void smcr_log_set_level(enum smcr_log_level level)
{
	__atomic_store_n(&log_level, (int)level, __ATOMIC_RELAXED);
}

enum smcr_log_level smcr_log_get_level(void)
{
	int level = __atomic_load_n(&log_level, __ATOMIC_RELAXED);
	const char *env;

	if (level >= 0)
		return (enum smcr_log_level)level;
	level = SMCR_LOG_INFO;
	env = getenv("SMCR_DEBUG");
	if (env && *env) {
		level = atoi(env);
		if (level < SMCR_LOG_ERR)
			level = SMCR_LOG_ERR;
		if (level > SMCR_LOG_DEBUG)
			level = SMCR_LOG_DEBUG;
	}
	__atomic_store_n(&log_level, level, __ATOMIC_RELAXED);
	return (enum smcr_log_level)level;
}

void smcr_log_set_ident(const char *ident)
{
	log_ident = ident;
}

void smcr_log_set_fn(smcr_log_fn fn, void *opaque)
{
	pthread_mutex_lock(&sink_lock);
	sink_fn = fn;
	sink_opaque = opaque;
	pthread_mutex_unlock(&sink_lock);
}

void smcr_log_set_peer(const char *peer)
{
	snprintf(log_peer, sizeof(log_peer), "%s", peer ? peer : "");
}

const char *smcr_log_peer(void)
{
	return log_peer[0] ? log_peer : NULL;
}

void smcr_vlog(enum smcr_log_level level, const char *fmt, va_list ap)
{
	char msg[1024], line[1024];
	int n = 0;

	if (level > smcr_log_get_level())
		return;
	if (log_peer[0])
		n = snprintf(msg, sizeof(msg), "%s: ", log_peer);
	vsnprintf(msg + n, sizeof(msg) - (size_t)n, fmt, ap);
	pthread_mutex_lock(&sink_lock);
	if (sink_fn) {
		logline_escape(line, sizeof(line), msg);
		sink_fn(sink_opaque, level, line);
		pthread_mutex_unlock(&sink_lock);
		return;
	}
	pthread_mutex_unlock(&sink_lock);
	n = logline_stamp(line, sizeof(line), log_ident, false, level);
	if (n < 0 || (size_t)n >= sizeof(line))
		return;
	logline_escape(line + n, sizeof(line) - (size_t)n, msg);
	/* One fprintf per line keeps lines whole when threads log at once. */
	fprintf(stderr, "%s\n", line);
}

void smcr_log(enum smcr_log_level level, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	smcr_vlog(level, fmt, ap);
	va_end(ap);
}
