/* SPDX-License-Identifier: BSD-3-Clause */
/* smcrbd: cursor and sequence-number arithmetic for SMC-R connections
 * (RFC 7609 §4.5 and A.4), and the 4-bit RMB size notation (A.2.3).
 *
 * A cursor is (wrap, count): count is an offset into an RMBE data area of
 * `size` bytes (0 <= count < size) and wrap counts, modulo 2^16, how often
 * the producer has wrapped around that area.  Positions therefore compare
 * correctly as long as two cursors are less than 2^15 wraps apart, which
 * always holds for the producer and consumer of one connection (they are at
 * most one RMBE apart).
 *
 * The RFC's RMBE begins with a 4-byte eyecatcher and wire cursors start and
 * wrap at 4; Linux puts no eyecatcher in its RMBEs (CONFIRM LINK flag 0x03)
 * and its cursors start at 0.  A link group uses one of the two (smcr/rmb.h).
 * These helpers work on the data area only; smcr/conn.c adds the eyecatcher's
 * length (4 or 0) to count on the wire.
 *
 * All helpers are pure inline functions, host byte order.
 */
#ifndef SMCR_CURSOR_H
#define SMCR_CURSOR_H

#include <stdbool.h>
#include <stdint.h>

#include "msg.h"	/* struct smcr_cdc_cursor */

/* ---- cursors ----------------------------------------------------------- */

/* Is c a possible cursor for an area of size bytes? */
static inline bool smcr_cursor_valid(uint32_t size, const struct smcr_cdc_cursor *c)
{
	return size > 0 && c->count < size;
}

/* Signed distance in bytes from `from` to `to`: positive when `to` is
 * ahead.  Both cursors must be valid for size. */
static inline int64_t smcr_cursor_dist(uint32_t size, const struct smcr_cdc_cursor *from,
				       const struct smcr_cdc_cursor *to)
{
	int16_t wraps = (int16_t)(uint16_t)(to->wrap - from->wrap);

	return (int64_t)wraps * size + (int64_t)to->count - (int64_t)from->count;
}

/* -1, 0 or 1 as a is behind, equal to or ahead of b. */
static inline int smcr_cursor_cmp(uint32_t size, const struct smcr_cdc_cursor *a,
				  const struct smcr_cdc_cursor *b)
{
	int64_t d = smcr_cursor_dist(size, b, a);

	return (d > 0) - (d < 0);
}

/* Bytes from old to new, 0 if new is not ahead of old (e.g. a stale CDC). */
static inline uint64_t smcr_cursor_diff(uint32_t size, const struct smcr_cdc_cursor *old,
					const struct smcr_cdc_cursor *new_)
{
	int64_t d = smcr_cursor_dist(size, old, new_);

	return d > 0 ? (uint64_t)d : 0;
}

/* Moves c forward by n bytes, wrapping at size and counting wraps.
 * c must be valid for size. */
static inline void smcr_cursor_advance(uint32_t size, struct smcr_cdc_cursor *c, uint64_t n)
{
	uint64_t pos = (uint64_t)c->count + n;

	c->wrap = (uint16_t)(c->wrap + pos / size);
	c->count = (uint32_t)(pos % size);
}

/* ---- 16-bit sequence numbers (CDC seqno, A.4) ---------------------------- */

/* Serial-number comparison modulo 2^16: a is before b when b - a, as a
 * signed 16-bit value, is positive.  Exactly 2^15 apart is "before" both
 * ways; a sender never gets that far ahead of what its peer acknowledged. */
static inline bool smcr_seq_before(uint16_t a, uint16_t b)
{
	return (int16_t)(uint16_t)(a - b) < 0;
}

static inline bool smcr_seq_after(uint16_t a, uint16_t b)
{
	return smcr_seq_before(b, a);
}

/* -1, 0 or 1 as a is before, equal to or after b. */
static inline int smcr_seq_cmp(uint16_t a, uint16_t b)
{
	int16_t d = (int16_t)(uint16_t)(a - b);

	return (d > 0) - (d < 0);
}

/* ---- RMB element size, 4-bit compressed notation ------------------------- */

#define SMCR_RMB_SIZE_MIN (16u * 1024)		/* c = 0 */
#define SMCR_RMB_SIZE_COMPRESSED_MAX 15		/* 4 bits: 512 MiB */
/* RFC 7609 stops at 512 KiB, c = 5 ("largest size supported by this
 * architecture"); recent Linux kernels use the whole 4 bits for SMC-R. */
#define SMCR_RMB_SIZE_COMPRESSED_RFC_MAX 5

/* size = 2^(c + 14) bytes, c = 0..15 (16 KiB .. 512 MiB); 0 if c > 15. */
static inline uint32_t smcr_rmb_size_decompress(unsigned int c)
{
	return c <= SMCR_RMB_SIZE_COMPRESSED_MAX ? 1u << (c + 14) : 0;
}

/* The smallest c whose size holds `size` bytes (rounding up, so a buffer of
 * the announced size is never smaller than asked for; at least 0), or
 * -ERANGE if size is above 512 MiB. */
static inline int smcr_rmb_size_compress(uint64_t size)
{
	int c = 0;

	if (size > smcr_rmb_size_decompress(SMCR_RMB_SIZE_COMPRESSED_MAX))
		return -ERANGE;
	while (smcr_rmb_size_decompress((unsigned int)c) < size)
		c++;
	return c;
}

#endif
