/* SPDX-License-Identifier: BSD-3-Clause */
/* smcrbd: the shape of a log line on stderr, shared by libsmcr's default
 * sink (smcr/log.c) and the programs' logger (applog.c).  Header only, as
 * strbuf.h. */
#ifndef SMCRBD_COMMON_LOGLINE_H
#define SMCRBD_COMMON_LOGLINE_H

#include <stdbool.h>
#include <stdio.h>
#include <time.h>
#include <unistd.h>

#include "smcr.h"	/* enum smcr_log_level */

static inline const char *logline_level_name(enum smcr_log_level level)
{
	static const char *const names[] = {
		[SMCR_LOG_ERR] = "error",
		[SMCR_LOG_WARN] = "warning",
		[SMCR_LOG_INFO] = "info",
		[SMCR_LOG_DEBUG] = "debug",
	};

	return (unsigned)level < sizeof(names) / sizeof(names[0]) ? names[level] : "?";
}

/* Writes the stamp of a line: "ident[EPOCH.mmm] level: " (tests compare
 * these stamps across programs) or, local, "YYYY-MM-DD HH:MM:SS.mmm
 * ident[PID] level: " in local time (log files).  Returns its length or
 * -1. */
static inline int logline_stamp(char *buf, size_t len, const char *ident, bool local,
				enum smcr_log_level level)
{
	struct timespec ts;
	struct tm tm;
	size_t n;

	clock_gettime(CLOCK_REALTIME, &ts);
	if (!local)
		return snprintf(buf, len, "%s[%ld.%03ld] %s: ", ident, (long)ts.tv_sec,
				ts.tv_nsec / 1000000L, logline_level_name(level));
	localtime_r(&ts.tv_sec, &tm);
	n = strftime(buf, len, "%Y-%m-%d %H:%M:%S", &tm);
	if (!n)
		return -1;
	return (int)n + snprintf(buf + n, len - n, ".%03ld %s[%ld] %s: ",
				 ts.tv_nsec / 1000000L, ident, (long)getpid(),
				 logline_level_name(level));
}

/* Copies a message with its control characters as \xNN: what a peer
 * sends (an export name) can neither end a log line nor forge the next. */
static inline void logline_escape(char *out, size_t len, const char *in)
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

#endif
