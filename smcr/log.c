/* SPDX-License-Identifier: BSD-3-Clause */
/* smcrbd: logging, one line per call, safe across threads: to the
 * application's callback if it set one, else to stderr. */
#include <config.h>

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "log.h"

static int log_level = -1;
static const char *log_ident = "smcr";
static int log_stamp = SMCR_LOG_STAMP_EPOCH;

/* The sink: set while no other thread logs (before contexts start), or
 * swapped under the lock; a line is passed to the sink under it too, so a
 * caller that clears its callback knows it is no longer called. */
static pthread_mutex_t sink_lock = PTHREAD_MUTEX_INITIALIZER;
static smcr_log_fn sink_fn;
static void *sink_opaque;

static const char *const level_names[] = {
	[SMCR_LOG_ERR] = "error",
	[SMCR_LOG_WARN] = "warning",
	[SMCR_LOG_INFO] = "info",
	[SMCR_LOG_DEBUG] = "debug",
};

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

void smcr_log_set_stamp(enum smcr_log_stamp stamp)
{
	__atomic_store_n(&log_stamp, (int)stamp, __ATOMIC_RELAXED);
}

void smcr_log_set_fn(smcr_log_fn fn, void *opaque)
{
	pthread_mutex_lock(&sink_lock);
	sink_fn = fn;
	sink_opaque = opaque;
	pthread_mutex_unlock(&sink_lock);
}

static int stamp(char *buf, size_t len, enum smcr_log_level level)
{
	struct timespec ts;
	struct tm tm;
	size_t n;

	clock_gettime(CLOCK_REALTIME, &ts);
	if (__atomic_load_n(&log_stamp, __ATOMIC_RELAXED) == SMCR_LOG_STAMP_EPOCH)
		return snprintf(buf, len, "%s[%ld.%03ld] %s: ", log_ident, (long)ts.tv_sec,
				ts.tv_nsec / 1000000L, level_names[level]);
	localtime_r(&ts.tv_sec, &tm);
	n = strftime(buf, len, "%Y-%m-%d %H:%M:%S", &tm);
	if (!n)
		return -1;
	return (int)n + snprintf(buf + n, len - n, ".%03ld %s[%ld] %s: ",
				 ts.tv_nsec / 1000000L, log_ident, (long)getpid(),
				 level_names[level]);
}

/* Copies a message with its control characters as \xNN: what a peer
 * sends (an export name) can neither end a log line nor forge the next. */
static void escape_controls(char *out, size_t len, const char *in)
{
	size_t o = 0;

	for (; *in && o + 1 < len; in++) {
		unsigned char c = (unsigned char)*in;

		if (c >= 0x20 && c != 0x7f) {
			out[o++] = (char)c;
		} else if (o + 5 < len) {
			snprintf(out + o, len - o, "\\x%02x", c);
			o += 4;
		} else {
			break;
		}
	}
	out[o] = '\0';
}

void smcr_vlog(enum smcr_log_level level, const char *fmt, va_list ap)
{
	char msg[1024], line[1024];
	int n;

	if (level > smcr_log_get_level())
		return;
	vsnprintf(msg, sizeof(msg), fmt, ap);
	pthread_mutex_lock(&sink_lock);
	if (sink_fn) {
		escape_controls(line, sizeof(line), msg);
		sink_fn(sink_opaque, level, line);
		pthread_mutex_unlock(&sink_lock);
		return;
	}
	pthread_mutex_unlock(&sink_lock);
	n = stamp(line, sizeof(line), level);
	if (n < 0 || (size_t)n >= sizeof(line))
		return;
	escape_controls(line + n, sizeof(line) - (size_t)n, msg);
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
