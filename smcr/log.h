/* SPDX-License-Identifier: BSD-3-Clause */
/* smcrbd: logging shared by the library and the programs. */
#ifndef SMCR_LOG_H
#define SMCR_LOG_H

#include <stdarg.h>

#include "smcr.h"	/* enum smcr_log_level, smcr_log_set_fn/_level */

enum smcr_log_level smcr_log_get_level(void);

/* How the stderr sink stamps a line: "ident[EPOCH.mmm] level: " (default;
 * tests compare these stamps across programs) or
 * "YYYY-MM-DD HH:MM:SS.mmm ident[PID] level: " in local time (log files). */
enum smcr_log_stamp { SMCR_LOG_STAMP_EPOCH, SMCR_LOG_STAMP_LOCAL };
void smcr_log_set_stamp(enum smcr_log_stamp stamp);

/* Prefix every line with this program name (default "smcr"). */
void smcr_log_set_ident(const char *ident);

void smcr_vlog(enum smcr_log_level level, const char *fmt, va_list ap)
	__attribute__((format(printf, 2, 0)));
void smcr_log(enum smcr_log_level level, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

#define smcr_err(...)   smcr_log(SMCR_LOG_ERR, __VA_ARGS__)
#define smcr_warn(...)  smcr_log(SMCR_LOG_WARN, __VA_ARGS__)
#define smcr_info(...)  smcr_log(SMCR_LOG_INFO, __VA_ARGS__)
#define smcr_dbg(...)   smcr_log(SMCR_LOG_DEBUG, __VA_ARGS__)

#endif
