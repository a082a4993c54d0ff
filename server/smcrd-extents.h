/* SPDX-License-Identifier: BSD-3-Clause */
/* smcrd: the base:allocation metadata context of an export. */
#ifndef SMCRD_EXTENTS_H
#define SMCRD_EXTENTS_H

#include <stdbool.h>
#include <stdint.h>

#include "nbd-wire.h"

/* Describes [offset, offset + length) of fd in at most max extents (1 if
 * one, for NBD_CMD_FLAG_REQ_ONE): holes as NBD_STATE_HOLE|NBD_STATE_ZERO,
 * data as 0, consecutive extents of equal status merged, boundaries
 * inside the range on multiples of align (a partial block counts as
 * data).  The extents start at offset and never go past the range; they
 * may cover less of it when max is reached.  Where SEEK_DATA/SEEK_HOLE
 * fail (or !seekable: block devices) the range is data.  Returns the
 * number of extents, at least 1 for length > 0.  Blocks the caller for
 * at most two lseek(2) per step and EXTENTS_SCAN_STEPS steps (a step is
 * a hole and the data after it): on a fragmented file the extents then
 * cover less of the range (the client asks again), so one request cannot
 * hold a worker for long. */
#define EXTENTS_SCAN_STEPS	256
unsigned extents_scan(int fd, bool seekable, uint64_t offset, uint32_t length,
		      uint32_t align, bool one, struct nbd_extent *out, unsigned max);

#endif
