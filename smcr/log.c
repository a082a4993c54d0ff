/* smcrbd: logging to stderr, one line per call, safe across threads. */
#include <config.h>

#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "log.h"

static int log_level = -1;
static const char *log_ident = "smcr";

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

void smcr_vlog(enum smcr_log_level level, const char *fmt, va_list ap)
{
	char line[1024];
	struct timespec ts;
	int n;

	if (level > smcr_log_get_level())
		return;
	clock_gettime(CLOCK_REALTIME, &ts);
	n = snprintf(line, sizeof(line), "%s[%ld.%03ld] %s: ", log_ident,
		     (long)ts.tv_sec, ts.tv_nsec / 1000000L, level_names[level]);
	if (n < 0 || (size_t)n >= sizeof(line))
		return;
	vsnprintf(line + n, sizeof(line) - (size_t)n, fmt, ap);
	/* One fputs per line keeps lines whole when threads log at once. */
	fprintf(stderr, "%s\n", line);
}

void smcr_log(enum smcr_log_level level, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	smcr_vlog(level, fmt, ap);
	va_end(ap);
}
