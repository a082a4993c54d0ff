/* SPDX-License-Identifier: BSD-3-Clause */
/* smcrbd: libsmcr's logging (internal; the programs use common/applog.h). */
#ifndef SMCR_LOG_H
#define SMCR_LOG_H

#include <stdarg.h>

#include "smcr.h"	/* enum smcr_log_level, smcr_log_set_fn/_level/_get_level */

/* Names the stderr sink's lines (default "smcr"; the programs of this tree
 * route libsmcr's lines through their own logger, common/applog.h). */
void smcr_log_set_ident(const char *ident);

/* Names the peer of the connection the calling thread works for from now
 * (a formatted address; NULL: none): its lines start with "PEER: ". */
void smcr_log_set_peer(const char *peer);

void smcr_vlog(enum smcr_log_level level, const char *fmt, va_list ap)
	__attribute__((format(printf, 2, 0)));
void smcr_log(enum smcr_log_level level, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

#define smcr_err(...)   smcr_log(SMCR_LOG_ERR, __VA_ARGS__)
#define smcr_warn(...)  smcr_log(SMCR_LOG_WARN, __VA_ARGS__)
#define smcr_info(...)  smcr_log(SMCR_LOG_INFO, __VA_ARGS__)
#define smcr_dbg(...)   smcr_log(SMCR_LOG_DEBUG, __VA_ARGS__)

#endif
