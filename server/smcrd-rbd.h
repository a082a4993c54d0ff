/* SPDX-License-Identifier: BSD-3-Clause */
/* smcrd: exports backed by a Ceph RBD image (librbd). */
#ifndef SMCRD_RBD_H
#define SMCRD_RBD_H

#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>
#include <sys/uio.h>

#include "nbd-wire.h"

#define RBD_PATH_PREFIX "rbd:"
/* How long a client waits for an exclusive export's lock (lock-timeout). */
#define RBD_LOCK_TIMEOUT_MS 15000

struct smcrd_rbd;

enum rbd_io {
	RBD_IO_READ,
	RBD_IO_WRITE,			/* FUA: flushed before completing */
	RBD_IO_FLUSH,
	RBD_IO_DISCARD,
	RBD_IO_ZEROES,
};

/* Called once per submitted operation, in a librbd thread: res is the
 * length for READ/WRITE, 0 for the others, or -errno. */
typedef void rbd_done_fn(void *arg, int res);

/* Whether path names an RBD image ("rbd:POOL/IMAGE[@SNAP]"). */
static inline bool rbd_path(const char *path)
{
	return !strncmp(path, RBD_PATH_PREFIX, strlen(RBD_PATH_PREFIX));
}

#ifdef HAVE_LIBRBD
/* Connects as client id (NULL: admin) with config file conf (NULL: Ceph's
 * default search) and opens the image; a snapshot opens read-only.
 * exclusive (read-write only): the lock is taken by smcrd_rbd_activate(). */
int smcrd_rbd_open(const char *path, const char *conf, const char *id, bool read_only,
		   bool exclusive, struct smcrd_rbd **out, uint64_t *size, bool *ro_out, char *err,
		   size_t errlen);
/* Drops a reference: the last closes the image and the connection. */
void smcrd_rbd_close(struct smcrd_rbd *r);
/* One more reference (an export of a reloaded table keeps the handle,
 * its lock and its cluster connection). */
struct smcrd_rbd *smcrd_rbd_get(struct smcrd_rbd *r);
/* The image's size now. */
int smcrd_rbd_size(struct smcrd_rbd *r, uint64_t *size);
/* A client arrived (blocks, at most timeout_ms): for an exclusive export,
 * takes the image's exclusive lock and keeps it, breaking (and
 * blocklisting) any other owner, after reconnecting to the cluster if this
 * gateway was fenced.  0 when this gateway may serve the image, or -errno
 * (-ETIMEDOUT: no answer in time; the attempt goes on without the client,
 * and a lock it takes late is released: the gateway stays passive). */
int smcrd_rbd_activate(struct smcrd_rbd *r, unsigned timeout_ms);
/* Starts one operation (iov for READ/WRITE, len for the others); done
 * runs once when it is over, also when this fails (then with -errno;
 * -ENOLCK: an exclusive export was fenced, the request is not to be
 * answered). */
void smcrd_rbd_submit(struct smcrd_rbd *r, enum rbd_io op, uint64_t off, uint64_t len,
		      const struct iovec *iov, int iovcnt, bool fua, rbd_done_fn *done,
		      void *arg);
/* base:allocation of [offset, offset + length), as extents_scan() does
 * for files (blocks the caller: the image's object map, or one RADOS
 * request per object without it). */
unsigned smcrd_rbd_extents(struct smcrd_rbd *r, uint64_t offset, uint32_t length,
			   uint32_t align, bool one, struct nbd_extent *out, unsigned max);
#else
static inline int smcrd_rbd_open(const char *path, const char *conf, const char *id,
				 bool read_only, bool exclusive, struct smcrd_rbd **out, uint64_t *size,
				 bool *ro_out, char *err, size_t errlen)
{
	(void)path; (void)conf; (void)id; (void)read_only; (void)exclusive; (void)out; (void)size;
	(void)ro_out; (void)err; (void)errlen;
	return -EPROTONOSUPPORT;
}
static inline void smcrd_rbd_close(struct smcrd_rbd *r) { (void)r; }
static inline struct smcrd_rbd *smcrd_rbd_get(struct smcrd_rbd *r) { return r; }
static inline int smcrd_rbd_size(struct smcrd_rbd *r, uint64_t *size)
{
	(void)r; (void)size;
	return -EPROTONOSUPPORT;
}
static inline int smcrd_rbd_activate(struct smcrd_rbd *r, unsigned timeout_ms)
{
	(void)r; (void)timeout_ms;
	return 0;
}
static inline void smcrd_rbd_submit(struct smcrd_rbd *r, enum rbd_io op, uint64_t off,
				    uint64_t len, const struct iovec *iov, int iovcnt,
				    bool fua, rbd_done_fn *done, void *arg)
{
	(void)r; (void)op; (void)off; (void)len; (void)iov; (void)iovcnt; (void)fua;
	done(arg, -EPROTONOSUPPORT);
}
static inline unsigned smcrd_rbd_extents(struct smcrd_rbd *r, uint64_t offset,
					 uint32_t length, uint32_t align, bool one,
					 struct nbd_extent *out, unsigned max)
{
	(void)r; (void)offset; (void)align; (void)one; (void)max;
	out[0].length = length;
	out[0].flags = 0;
	return 1;
}
#endif

#endif
