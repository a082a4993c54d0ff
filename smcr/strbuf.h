/* SPDX-License-Identifier: BSD-3-Clause */
/* smcrbd: appending text and JSON strings to a fixed buffer, for the status
 * dumps of libsmcr and of the programs (one home for what each had). */
#ifndef SMCR_STRBUF_H
#define SMCR_STRBUF_H

#include <stddef.h>

/* Appends at buf + off what printf would write and returns off plus its
 * length, even when it did not fit (the caller sees off >= len and asks
 * again with a larger buffer); once off >= len nothing is written. */
size_t smcr_out(char *buf, size_t len, size_t off, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

/* Appends s as a JSON string ("..." with ", \ and control characters
 * escaped; NULL as ""), with smcr_out()'s convention. */
size_t smcr_out_json_str(char *buf, size_t len, size_t off, const char *s);

#endif
