/* SPDX-License-Identifier: BSD-3-Clause */
/* smcrbd: appending text to a fixed buffer, for the status dumps of
 * libsmcr and of the programs.  Header only (as nbdkit's common/include):
 * libsmcr and the programs each compile their own copy, so nothing outside
 * smcr/ needs libsmcr's internals and libsmcr exports nothing more. */
#ifndef SMCRBD_COMMON_STRBUF_H
#define SMCRBD_COMMON_STRBUF_H

#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>

/* Appends at buf + off what printf would write and returns off plus its
 * length, even when it did not fit (the caller sees off >= len and asks
 * again with a larger buffer); once off >= len nothing is written. */
static inline size_t strbuf_out(char *buf, size_t len, size_t off, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
static inline size_t strbuf_out(char *buf, size_t len, size_t off, const char *fmt, ...)
{
	va_list ap;
	int n;

	if (off >= len)
		return off;
	va_start(ap, fmt);
	n = vsnprintf(buf + off, len - off, fmt, ap);
	va_end(ap);
	return n < 0 ? off : off + (size_t)n;
}

#endif
