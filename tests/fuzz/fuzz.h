/* SPDX-License-Identifier: BSD-3-Clause */
/* smcrbd: shared bits of the libFuzzer targets (one per decoder).
 *
 * Each target checks, besides "no crash, no sanitizer report", that
 *   - a decoder returns either the message length (never more than the
 *     input) or one of the documented SMCR_E_* errors, and
 *   - whatever decodes re-encodes, and the re-encoding decodes and encodes
 *     to the same bytes again (encode . decode is a fixed point). */
#ifndef SMCR_FUZZ_H
#define SMCR_FUZZ_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "applog.h"
#include "msg.h"

#define FUZZ_REQUIRE(cond)                                                      \
	do {                                                                    \
		if (!(cond)) {                                                  \
			fprintf(stderr, "%s:%d: property failed: %s\n",        \
				__FILE__, __LINE__, #cond);                     \
			abort();                                                \
		}                                                               \
	} while (0)

static inline int fuzz_known_error(int rc)
{
	switch (rc) {
	case SMCR_E_TRUNC: case SMCR_E_EYECATCHER: case SMCR_E_TRAILER:
	case SMCR_E_LENGTH: case SMCR_E_TYPE: case SMCR_E_OPTIONAL:
	case SMCR_E_NOTTYPE: case SMCR_E_VERSION: case SMCR_E_RANGE:
	case SMCR_E_PREFIXES:
		return 1;
	default:
		return 0;
	}
}

/* Log lines are formatted (hostile text goes through the format) but not
 * written: stderr would slow every run down. */
static void fuzz_log_sink(void *opaque, enum smcr_log_level level, const char *msg)
{
	(void)opaque;
	(void)level;
	(void)msg;
}

static inline void fuzz_quiet_log(void)
{
	/* FUZZ_LOG=1: to stderr, to see what an input does.  (libsmcr's lines
	 * and the programs', applog.h.) */
	if (!getenv("FUZZ_LOG"))
		applog_set_fn(fuzz_log_sink, NULL);
	smcr_log_set_level(SMCR_LOG_DEBUG);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#endif
