/* SPDX-License-Identifier: BSD-3-Clause */
/* smcrbd: a size as smcrd's settings and the clients' take it ("4096",
 * "4k", "64M", "1GiB", "2TB": powers of 1024).  Header only, as strbuf.h. */
#ifndef SMCRBD_COMMON_SIZEARG_H
#define SMCRBD_COMMON_SIZEARG_H

#include <ctype.h>
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>

/* 0 with *out, -EINVAL for no such size, -ERANGE beyond 64 bits. */
static inline int parse_size(const char *s, uint64_t *out)
{
	char *end;
	unsigned long long v;
	unsigned shift = 0;

	if (!s || !isdigit((unsigned char)*s))
		return -EINVAL;
	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno)
		return -EINVAL;
	switch (tolower((unsigned char)*end)) {
	case '\0': break;
	case 'k': shift = 10; end++; break;
	case 'm': shift = 20; end++; break;
	case 'g': shift = 30; end++; break;
	case 't': shift = 40; end++; break;
	default: return -EINVAL;
	}
	if (*end == 'i' || *end == 'I')
		end++;
	if (*end == 'b' || *end == 'B')
		end++;
	if (*end)
		return -EINVAL;
	if (shift && v > (UINT64_MAX >> shift))
		return -ERANGE;
	*out = (uint64_t)v << shift;
	return 0;
}

#endif
