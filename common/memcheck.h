/* SPDX-License-Identifier: BSD-3-Clause */
/* Memory the kernel filled behind valgrind's back: an io_uring read or
 * recv writes its buffer when the request runs, not in the system call
 * memcheck watched, so the bytes stay "uninitialised" to it.  A completion
 * tells memcheck what it filled; without valgrind's header (or outside
 * valgrind) this is nothing. */
#ifndef SMCRBD_COMMON_MEMCHECK_H
#define SMCRBD_COMMON_MEMCHECK_H

#include <stddef.h>
#include <sys/uio.h>
#ifdef HAVE_VALGRIND_MEMCHECK_H
#include <valgrind/memcheck.h>
#endif

static inline void mem_filled(const void *p, size_t n)
{
#ifdef HAVE_VALGRIND_MEMCHECK_H
	(void)VALGRIND_MAKE_MEM_DEFINED(p, n);
#else
	(void)p;
	(void)n;
#endif
}

/* The first n bytes of an iovec array of cnt entries. */
static inline void mem_filled_iov(const struct iovec *iov, int cnt, size_t n)
{
	int i;

	for (i = 0; i < cnt && n; i++) {
		size_t l = iov[i].iov_len < n ? iov[i].iov_len : n;

		mem_filled(iov[i].iov_base, l);
		n -= l;
	}
}

#endif
