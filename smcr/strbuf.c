/* SPDX-License-Identifier: BSD-3-Clause */
/* smcrbd: appending text and JSON strings to a fixed buffer (strbuf.h). */
#include <config.h>

#include <stdarg.h>
#include <stdio.h>

#include "strbuf.h"

size_t smcr_out(char *buf, size_t len, size_t off, const char *fmt, ...)
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

size_t smcr_out_json_str(char *buf, size_t len, size_t off, const char *s)
{
	off = smcr_out(buf, len, off, "\"");
	for (; s && *s; s++) {
		unsigned char c = (unsigned char)*s;

		if (c == '"' || c == '\\')
			off = smcr_out(buf, len, off, "\\%c", c);
		else if (c < 0x20)
			off = smcr_out(buf, len, off, "\\u%04x", c);
		else
			off = smcr_out(buf, len, off, "%c", c);
	}
	return smcr_out(buf, len, off, "\"");
}
