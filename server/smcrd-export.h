/* SPDX-License-Identifier: BSD-3-Clause */
/* smcrd: opened exports and the export table (swapped on SIGHUP). */
#ifndef SMCRD_EXPORT_H
#define SMCRD_EXPORT_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include "smcrd-conf.h"

struct export {
	int refs;			/* atomic */
	struct export_spec spec;
	int fd;				/* buffered (-1: rbd) */
	struct smcrd_rbd *rbd;		/* an RBD image (librbd), or NULL */
	bool ro_asked;			/* rbd: read-only asked (a snapshot is,
					 * asked or not) */
	struct stat conf_st;		/* rbd: its ceph-conf when opened */
	int dfd;			/* O_DIRECT, or -1 */
	uint32_t dio_align;		/* offset/length/memory alignment for dfd */
	uint64_t size;
	bool blockdev;
	uint32_t sector;		/* block device: logical sector size, the
					 * alignment fallocate wants; else 1 */
	uint32_t min_block;
	uint32_t pref_block;
	uint16_t tflags;		/* NBD transmission flags (without DF) */
	/* Learned at run time (atomic): fallocate modes the file lacks. */
	int no_punch;
	int no_zero_range;
	int nowait_write;		/* RWF_NOWAIT buffered writes: NOWAIT_* */
};

enum { NOWAIT_UNKNOWN, NOWAIT_NO, NOWAIT_YES };

/* Opens spec's path (copied).  direct: open an O_DIRECT descriptor too.
 * keep (or NULL): the export of that name in the table in use, whose RBD
 * image is shared instead of opened again when its settings are the
 * same. */
int export_open(const struct export_spec *spec, bool direct, const struct export *keep,
		struct export **out);
struct export *export_get(struct export *e);
void export_put(struct export *e);
bool export_allows(const struct export *e, const struct sockaddr *sa);

struct export_table {
	struct export **v;
	unsigned n;
};

/* Opens every spec of the lists (in order, names unique); keep (or NULL):
 * the table in use (export_open()).  On failure nothing new stays open and
 * err says why. */
int export_table_open(const struct export_list *a, const struct export_list *b,
		      bool direct, const struct export_table *keep, struct export_table **out,
		      char *err, size_t errlen);
void export_table_free(struct export_table *t);
/* "" selects the first export. */
struct export *export_table_find(const struct export_table *t, const char *name);

#endif
