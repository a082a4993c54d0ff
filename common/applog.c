/* SPDX-License-Identifier: BSD-3-Clause */
/* smcrbd: the programs' logger (applog.h). */
#include <config.h>

#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
#include <sys/stat.h>

#include "applog.h"
#include "logline.h"
#include "lograte.h"

static const char *log_ident = "smcr";
static int log_stamp = APPLOG_STAMP_LOCAL;
static pthread_once_t journal_once = PTHREAD_ONCE_INIT;
static bool to_journal, stamp_set;	/* stamp_set: applog_set_stamp() called */
static bool rate_peer_lines;

/* stderr is journald's stream when JOURNAL_STREAM names its device and
 * inode (systemd.exec(5)): then lines carry "<N>" priorities and no stamp
 * (journald keeps the time and the pid). */
static void journal_check(void)
{
	const char *e = getenv("JOURNAL_STREAM");
	unsigned long long dev, ino;
	struct stat st;

	to_journal = e && sscanf(e, "%llu:%llu", &dev, &ino) == 2 &&
		     !fstat(STDERR_FILENO, &st) && (unsigned long long)st.st_dev == dev &&
		     (unsigned long long)st.st_ino == ino;
}

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
	pthread_once(&journal_once, journal_check);
	if (to_journal && !__atomic_load_n(&stamp_set, __ATOMIC_RELAXED)) {
		/* syslog priorities: err 3, warning 4, info 6, debug 7 */
		static const int prio[] = { 3, 4, 6, 7 };

		fprintf(stderr, "<%d>%s: %s\n", prio[(unsigned)level < 4 ? level : 3],
			logline_level_name(level), msg);
		return;
	}
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
	const char *peer;

	(void)opaque;
	if (__atomic_load_n(&rate_peer_lines, __ATOMIC_RELAXED) && (peer = smcr_log_peer()) &&
	    !lograte_ok(LOGRATE_HANDSHAKE, peer))
		return;
	emit(level, msg);
}

void applog_rate_peer_lines(bool on)
{
	__atomic_store_n(&rate_peer_lines, on, __ATOMIC_RELAXED);
}

void applog_set_stamp(enum applog_stamp stamp)
{
	__atomic_store_n(&log_stamp, (int)stamp, __ATOMIC_RELAXED);
	__atomic_store_n(&stamp_set, true, __ATOMIC_RELAXED);
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
