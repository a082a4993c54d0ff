/* SPDX-License-Identifier: BSD-3-Clause */
/* smcrbd: logging for the programs (smcrd, the clients, the nbdkit plugin)
 * and blockdev/ underneath them.  One line per call, at libsmcr's level
 * (smcr_log_set_level(), SMCR_DEBUG), to stderr stamped or to the sink the
 * program sets; libsmcr's own lines are routed through the same sink, so
 * a program's log reads as one. */
#ifndef SMCRBD_COMMON_APPLOG_H
#define SMCRBD_COMMON_APPLOG_H

#include <stdarg.h>
#include <stdbool.h>

#include "smcr.h"	/* enum smcr_log_level, smcr_log_fn */

/* How stderr lines are stamped (logline.h): local time and pid, as a
 * log file's (default), or epoch seconds (to compare with libsmcr's own
 * lines).  On journald's stream (JOURNAL_STREAM) lines carry a "<N>"
 * priority instead of a stamp, unless a stamp was set here. */
enum applog_stamp { APPLOG_STAMP_EPOCH, APPLOG_STAMP_LOCAL };
void applog_set_stamp(enum applog_stamp stamp);

/* Names the program on every line (default "smcr") and routes libsmcr's
 * lines through this logger. */
void applog_set_ident(const char *ident);

/* Sends every line, libsmcr's too, to fn instead of stderr (syslog,
 * nbdkit's log); fn NULL restores stderr.  As smcr_log_set_fn(): one call
 * at a time, already escaped, no stamp. */
void applog_set_fn(smcr_log_fn fn, void *opaque);

/* on: libsmcr's lines about one connection (smcr_log_peer()) pass the
 * handshake kind's per-peer rate limit (lograte.h), as the program's own
 * lines about a client do (a server: its peers are anyone). */
void applog_rate_peer_lines(bool on);

void applog_v(enum smcr_log_level level, const char *fmt, va_list ap)
	__attribute__((format(printf, 2, 0)));
void applog(enum smcr_log_level level, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

#define log_err(...)   applog(SMCR_LOG_ERR, __VA_ARGS__)
#define log_warn(...)  applog(SMCR_LOG_WARN, __VA_ARGS__)
#define log_info(...)  applog(SMCR_LOG_INFO, __VA_ARGS__)
#define log_dbg(...)   applog(SMCR_LOG_DEBUG, __VA_ARGS__)

#endif
