/* SPDX-License-Identifier: BSD-3-Clause */
/* smcrbd: the sized structs of smcr.h (smcr_ctx_opts, smcr_stats,
 * smcr_sock_info): the caller passes its sizeof, older or newer than ours;
 * and their sizes as LIBSMCR_0.1 knew them (compat.c).  Internal. */
#ifndef SMCR_ABI_H
#define SMCR_ABI_H

#include <errno.h>
#include <stddef.h>
#include <string.h>

#include "smcr.h"

/* The end of each struct's last field in LIBSMCR_0.1. */
#define SMCR_CTX_OPTS_SIZE_0_1 \
	(offsetof(struct smcr_ctx_opts, eids) + sizeof(const char *))
#define SMCR_STATS_SIZE_0_1 \
	(offsetof(struct smcr_stats, cursor_requests) + sizeof(uint64_t))
#define SMCR_SOCK_INFO_SIZE_0_1 \
	(offsetof(struct smcr_sock_info, peer_rmbe_data) + sizeof(uint32_t))

/* In: the caller's size bytes into our struct (len bytes), the fields it
 * does not know zero.  -EINVAL when the caller's struct is longer and sets
 * a byte beyond ours (a field of a newer libsmcr: we cannot do what it
 * asks; as Linux's copy_struct_from_user()). */
static inline int smcr_abi_in(void *ours, size_t len, const void *theirs, size_t size)
{
	size_t i;

	for (i = len; i < size; i++)
		if (((const unsigned char *)theirs)[i])
			return -EINVAL;
	memset(ours, 0, len);
	memcpy(ours, theirs, size < len ? size : len);
	return 0;
}

/* Out: our struct (len bytes) into the caller's size bytes, the fields we
 * do not know zero. */
static inline void smcr_abi_out(void *theirs, size_t size, const void *ours, size_t len)
{
	memcpy(theirs, ours, size < len ? size : len);
	if (size > len)
		memset((char *)theirs + len, 0, size - len);
}

#endif
