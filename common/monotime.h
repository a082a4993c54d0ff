/* SPDX-License-Identifier: BSD-3-Clause */
/* smcrbd: CLOCK_MONOTONIC in milliseconds (and microseconds), for
 * deadlines, timeouts and rates.  Header only: libsmcr, blockdev, the programs and the tests use
 * this one. */
#ifndef SMCRBD_MONOTIME_H
#define SMCRBD_MONOTIME_H

#include <stdint.h>
#include <time.h>

static inline int64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static inline int64_t now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

/* The absolute time ms from now on clock, for pthread's timed waits. */
static inline void deadline_after_ms(clockid_t clock, unsigned int ms, struct timespec *ts)
{
	clock_gettime(clock, ts);
	ts->tv_sec += ms / 1000;
	ts->tv_nsec += (long)(ms % 1000) * 1000000L;
	if (ts->tv_nsec >= 1000000000L) {
		ts->tv_sec++;
		ts->tv_nsec -= 1000000000L;
	}
}

#endif
