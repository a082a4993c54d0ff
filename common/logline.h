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

/* The length of the UTF-8 sequence at p when it is valid and safe to log
 * as it is, else 0: not overlong, no surrogate, at most U+10FFFF, and
 * neither a C1 control (NEL, U+0085, among them) nor U+2028/U+2029, which
 * some log readers take as line ends. */
static inline size_t logline_utf8_len(const unsigned char *p)
{
	unsigned int cp, n, i;

	if (p[0] >= 0xc2 && p[0] <= 0xdf) {
		n = 2;
		cp = p[0] & 0x1fu;
	} else if (p[0] >= 0xe0 && p[0] <= 0xef) {
		n = 3;
		cp = p[0] & 0x0fu;
	} else if (p[0] >= 0xf0 && p[0] <= 0xf4) {
		n = 4;
		cp = p[0] & 0x07u;
	} else {
		return 0;
	}
	for (i = 1; i < n; i++) {
		if ((p[i] & 0xc0) != 0x80)	/* the string's NUL ends it too */
			return 0;
		cp = cp << 6 | (p[i] & 0x3fu);
	}
	if ((n == 3 && cp < 0x800) || (n == 4 && (cp < 0x10000 || cp > 0x10ffff)) ||
	    (cp >= 0xd800 && cp <= 0xdfff) || cp <= 0x9f || cp == 0x2028 || cp == 0x2029)
		return 0;
	return n;
}

/* Copies a message with its control characters as \xNN, and the bytes of
 * invalid UTF-8, C1 controls and U+2028/U+2029 as \xNN each: what a peer
 * sends (an export name) can neither end a log line nor forge the next.
 * The runs of printable ASCII go whole (memcpy): every debug line passes
 * here.  Output is cut before an escape or a character that does not fit
 * whole. */
static inline void logline_escape(char *out, size_t len, const char *in)
{
	const unsigned char *p = (const unsigned char *)in;
	size_t o = 0;

	while (*p && o + 1 < len) {
		size_t n = 0;

		while (p[n] >= 0x20 && p[n] < 0x7f)
			n++;
		if (n) {
			if (n > len - 1 - o)
				n = len - 1 - o;
			memcpy(out + o, p, n);
			o += n;
			p += n;
		} else if (*p >= 0x80 && (n = logline_utf8_len(p))) {
			if (o + n >= len)
				break;
			memcpy(out + o, p, n);
			o += n;
			p += n;
		} else if (o + 5 < len) {
			snprintf(out + o, len - o, "\\x%02x", *p++);
			o += 4;
		} else {
			break;
		}
	}
	out[o] = '\0';
}

#endif
