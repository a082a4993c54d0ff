/* SPDX-License-Identifier: BSD-3-Clause */
/* smcrbd: the shape of a log line on stderr, shared by libsmcr's default
 * sink (smcr/log.c) and the programs' logger (applog.c).  Header only, as
 * strbuf.h. */
#ifndef SMCRBD_COMMON_LOGLINE_H
#define SMCRBD_COMMON_LOGLINE_H

#include <stdbool.h>
#include <stdio.h>
#include <string.h>
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
 * sends (an export name) can neither end a log line nor forge the next.
 * The runs between control characters go whole (strcspn, memcpy): every
 * debug line passes here. */
static inline void logline_escape(char *out, size_t len, const char *in)
{
	static const char ctl[] = "\x01\x02\x03\x04\x05\x06\x07\x08\x09\x0a"
		"\x0b\x0c\x0d\x0e\x0f\x10\x11\x12\x13\x14\x15\x16\x17\x18\x19"
		"\x1a\x1b\x1c\x1d\x1e\x1f\x7f";
	size_t o = 0;

	while (*in && o + 1 < len) {
		size_t n = strcspn(in, ctl);

		if (n) {
			if (n > len - 1 - o)
				n = len - 1 - o;
			memcpy(out + o, in, n);
			o += n;
			in += n;
		} else if (o + 5 < len) {
			snprintf(out + o, len - o, "\\x%02x", (unsigned char)*in++);
			o += 4;
		} else {
			break;
		}
	}
	out[o] = '\0';
}

#endif
