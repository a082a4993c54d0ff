/* smcrbd: logging shared by the library and the programs. */
#ifndef SMCR_LOG_H
#define SMCR_LOG_H

#include <stdarg.h>

enum smcr_log_level {
	SMCR_LOG_ERR = 0,
	SMCR_LOG_WARN,
	SMCR_LOG_INFO,
	SMCR_LOG_DEBUG,
};

/* Messages above this level are dropped.  Initialised from the environment
 * variable SMCR_DEBUG (0..3) on first use; smcr_log_set_level overrides. */
void smcr_log_set_level(enum smcr_log_level level);
enum smcr_log_level smcr_log_get_level(void);

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
