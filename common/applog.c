/* SPDX-License-Identifier: BSD-3-Clause */
/* smcrbd: the programs' logger (applog.h). */
#include <config.h>

#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>

#include "applog.h"
#include "logline.h"

static const char *log_ident = "smcr";
static int log_stamp = APPLOG_STAMP_EPOCH;

/* The sink, swapped under the lock; a line is passed to it under the lock
 * too, so a caller that clears it knows it is no longer called. */
static pthread_mutex_t sink_lock = PTHREAD_MUTEX_INITIALIZER;
static smcr_log_fn sink_fn;
static void *sink_opaque;

/* msg is escaped already. */
static void emit(enum smcr_log_level level, const char *msg)
{
	char stamp[128];
	int n;

	pthread_mutex_lock(&sink_lock);
	if (sink_fn) {
		sink_fn(sink_opaque, level, msg);
		pthread_mutex_unlock(&sink_lock);
		return;
	}
	pthread_mutex_unlock(&sink_lock);
	n = logline_stamp(stamp, sizeof(stamp), log_ident,
			  __atomic_load_n(&log_stamp, __ATOMIC_RELAXED) == APPLOG_STAMP_LOCAL,
			  level);
	if (n < 0 || (size_t)n >= sizeof(stamp))
		return;
	/* One fprintf per line keeps lines whole when threads log at once. */
	fprintf(stderr, "%s%s\n", stamp, msg);
}

/* libsmcr's callback: its lines come filtered and escaped. */
static void from_libsmcr(void *opaque, enum smcr_log_level level, const char *msg)
{
	(void)opaque;
	emit(level, msg);
}

void applog_set_stamp(enum applog_stamp stamp)
{
	__atomic_store_n(&log_stamp, (int)stamp, __ATOMIC_RELAXED);
}

void applog_set_ident(const char *ident)
{
	log_ident = ident;
	smcr_log_set_fn(from_libsmcr, NULL);
}

void applog_set_fn(smcr_log_fn fn, void *opaque)
{
	pthread_mutex_lock(&sink_lock);
	sink_fn = fn;
	sink_opaque = opaque;
	pthread_mutex_unlock(&sink_lock);
	smcr_log_set_fn(from_libsmcr, NULL);
}

void applog_v(enum smcr_log_level level, const char *fmt, va_list ap)
{
	char msg[1024], line[1024];

	if (level > smcr_log_get_level())
		return;
	vsnprintf(msg, sizeof(msg), fmt, ap);
	logline_escape(line, sizeof(line), msg);
	emit(level, line);
}

void applog(enum smcr_log_level level, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	applog_v(level, fmt, ap);
	va_end(ap);
}
