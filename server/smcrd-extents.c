/* SPDX-License-Identifier: BSD-3-Clause */
/* smcrd: base:allocation of a file from SEEK_DATA/SEEK_HOLE. */
#include <config.h>

#include <errno.h>
#include <unistd.h>

#include "smcrd-extents.h"

static uint64_t align_down(uint64_t v, uint64_t a)
{
	return v - v % a;
}

static uint64_t align_up(uint64_t v, uint64_t a)
{
	return v % a ? v + (a - v % a) : v;
}

/* Appends [*pos, end) with flags, merged into the last one when equal. */
static void emit(struct nbd_extent *out, unsigned *n, uint64_t *pos, uint64_t end,
		 uint32_t flags)
{
	uint32_t len = (uint32_t)(end - *pos);

	if (*n && out[*n - 1].flags == flags)
		out[*n - 1].length += len;
	else
		out[(*n)++] = (struct nbd_extent){ .length = len, .flags = flags };
	*pos = end;
}

/* Where the data at or after pos starts (end if none before it), or -1
 * when the file cannot tell. */
static int64_t next_data(int fd, uint64_t pos, uint64_t end)
{
	off_t d = lseek(fd, (off_t)pos, SEEK_DATA);

	if (d < 0)
		return errno == ENXIO ? (int64_t)end : -1;
	return (uint64_t)d < end ? d : (int64_t)end;
}

/* Where the hole at or after pos starts (end if none before it), or -1. */
static int64_t next_hole(int fd, uint64_t pos, uint64_t end)
{
	off_t h = lseek(fd, (off_t)pos, SEEK_HOLE);

	if (h < 0)
		return errno == ENXIO ? (int64_t)end : -1;
	return (uint64_t)h < end ? h : (int64_t)end;
}

unsigned extents_scan(int fd, bool seekable, uint64_t offset, uint32_t length,
		      uint32_t align, bool one, struct nbd_extent *out, unsigned max)
{
	uint64_t pos = offset, end = offset + length;
	unsigned n = 0, steps = 0;

	if (!align)
		align = 1;
	if (one)
		max = 1;
	while (pos < end && seekable) {
		int64_t d, h;
		uint64_t stop;

		if (++steps > EXTENTS_SCAN_STEPS)
			return n;	/* n >= 1: every step emits or stops */

		d = next_data(fd, pos, end);
		if (d < 0)
			break;
		if ((uint64_t)d > pos) {
			/* A hole, cut to whole blocks (a partial block is data). */
			stop = (uint64_t)d == end ? end : align_down((uint64_t)d, align);
			if (stop > pos) {
				if (n == max && out[n - 1].flags != (NBD_STATE_HOLE | NBD_STATE_ZERO))
					break;
				emit(out, &n, &pos, stop, NBD_STATE_HOLE | NBD_STATE_ZERO);
				continue;
			}
			d = (int64_t)pos;
		}
		/* Data from pos, grown to whole blocks. */
		h = next_hole(fd, (uint64_t)d, end);
		if (h < 0)
			break;
		stop = align_up((uint64_t)h, align);
		if (stop > end || stop <= pos)
			stop = end;
		if (n == max && out[n - 1].flags != 0)
			break;
		emit(out, &n, &pos, stop, 0);
	}
	/* What the file could not tell: data (status 0 is always safe).
	 * With every slot used, the reply covers less than the request. */
	if (pos < end && n < max)
		emit(out, &n, &pos, end, 0);
	return n;
}
