/* SPDX-License-Identifier: BSD-3-Clause */
/* smcrd: exports backed by a Ceph RBD image, through librbd's AIO API.
 * One image handle per export, shared by the workers: librbd's calls are
 * thread-safe, and one handle is one owner of the image's exclusive lock
 * (one handle per worker would pass the lock around on every write). */
#include <config.h>

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <rados/librados.h>
#include <rbd/librbd.h>

#include "smcrd-rbd.h"
#include "nbd-proto.h"
#include "applog.h"

struct smcrd_rbd {
	rados_t cluster;
	rados_ioctx_t io;
	rbd_image_t img;
};

/* An operation in flight. */
struct rbd_op {
	struct smcrd_rbd *r;
	enum rbd_io op;
	bool fua;			/* a WRITE whose flush is still to come */
	uint64_t len;
	rbd_done_fn *done;
	void *arg;
};

static void op_end(struct rbd_op *o, int res)
{
	rbd_done_fn *done = o->done;
	void *arg = o->arg;

	free(o);
	done(arg, res);
}

static void op_complete(rbd_completion_t c, void *arg)
{
	struct rbd_op *o = arg;
	ssize_t v = rbd_aio_get_return_value(c);
	int r;

	rbd_aio_release(c);
	if (v < 0) {
		op_end(o, v < -4095 ? -EIO : (int)v);
		return;
	}
	if (o->fua) {
		/* FUA: the write is acknowledged once flushed (librbd's
		 * cache may hold it until then). */
		o->fua = false;
		r = rbd_aio_create_completion(o, op_complete, &c);
		if (r == 0) {
			r = rbd_aio_flush(o->r->img, c);
			if (r < 0)
				rbd_aio_release(c);
		}
		if (r < 0)
			op_end(o, r);
		return;
	}
	op_end(o, o->op == RBD_IO_READ || o->op == RBD_IO_WRITE ? (int)o->len : 0);
}

void smcrd_rbd_submit(struct smcrd_rbd *r, enum rbd_io op, uint64_t off, uint64_t len,
		      const struct iovec *iov, int iovcnt, bool fua, rbd_done_fn *done,
		      void *arg)
{
	struct rbd_op *o = calloc(1, sizeof(*o));
	rbd_completion_t c;
	int i, ret;

	if (!o) {
		done(arg, -ENOMEM);
		return;
	}
	o->r = r;
	o->op = op;
	o->fua = op == RBD_IO_WRITE && fua;
	o->done = done;
	o->arg = arg;
	if (op == RBD_IO_READ || op == RBD_IO_WRITE)
		for (i = 0, len = 0; i < iovcnt; i++)
			len += iov[i].iov_len;
	o->len = len;
	ret = rbd_aio_create_completion(o, op_complete, &c);
	if (ret < 0) {
		op_end(o, ret);
		return;
	}
	switch (op) {
	case RBD_IO_READ:
		ret = rbd_aio_readv(r->img, iov, iovcnt, off, c);
		break;
	case RBD_IO_WRITE:
		ret = rbd_aio_writev(r->img, iov, iovcnt, off, c);
		break;
	case RBD_IO_FLUSH:
		ret = rbd_aio_flush(r->img, c);
		break;
	case RBD_IO_DISCARD:
		ret = rbd_aio_discard(r->img, off, len, c);
		break;
	case RBD_IO_ZEROES:
		ret = rbd_aio_write_zeroes(r->img, off, len, c, 0, 0);
		break;
	default:
		ret = -EINVAL;
	}
	if (ret < 0) {
		rbd_aio_release(c);
		op_end(o, ret);
	}
}

/* "POOL/IMAGE[@SNAP]" after the prefix, into a copy cut in three. */
static int parse_path(const char *path, char **copy, char **pool, char **image, char **snap)
{
	char *s, *slash, *at;

	if (!rbd_path(path))
		return -EINVAL;
	s = strdup(path + strlen(RBD_PATH_PREFIX));
	if (!s)
		return -ENOMEM;
	slash = strchr(s, '/');
	if (!slash || slash == s || !slash[1] || strchr(slash + 1, '/')) {
		free(s);
		return -EINVAL;
	}
	*slash = '\0';
	at = strchr(slash + 1, '@');
	if (at) {
		*at = '\0';
		if (!at[1] || at == slash + 1) {
			free(s);
			return -EINVAL;
		}
	}
	*copy = s;
	*pool = s;
	*image = slash + 1;
	*snap = at ? at + 1 : NULL;
	return 0;
}

/* Takes image's exclusive lock for good (librbd hands it to no other
 * client on request), first breaking any other owner's: Ceph blocklists
 * that client, so a gateway that lost the image can write to it no more,
 * whether it died or not. */
static int take_lock(rbd_image_t img, const char *image)
{
	char *owners[8];
	size_t n = 8, i;
	rbd_lock_mode_t mode;
	int ret;

	ret = rbd_lock_get_owners(img, &mode, owners, &n);
	if (ret == -ENOENT)
		n = 0;
	else if (ret < 0)
		return ret;
	for (i = 0; i < n; i++) {
		ret = rbd_lock_break(img, RBD_LOCK_MODE_EXCLUSIVE, owners[i]);
		log_warn("image %s: broke the exclusive lock of %s (blocklisted)%s%s", image,
			 owners[i], ret < 0 ? ": " : "", ret < 0 ? strerror(-ret) : "");
	}
	if (n)
		rbd_lock_get_owners_cleanup(owners, n);
	return rbd_lock_acquire(img, RBD_LOCK_MODE_EXCLUSIVE);
}

int smcrd_rbd_open(const char *path, const char *conf, const char *id, bool read_only,
		   bool exclusive, struct smcrd_rbd **out, uint64_t *size, bool *ro_out, char *err,
		   size_t errlen)
{
	struct smcrd_rbd *r;
	char *copy, *pool, *image, *snap;
	sigset_t all, old;
	const char *what;
	int ret;

	ret = parse_path(path, &copy, &pool, &image, &snap);
	if (ret < 0) {
		snprintf(err, errlen, "%s", ret == -EINVAL ? "expected rbd:POOL/IMAGE[@SNAP]" :
			 strerror(-ret));
		return ret;
	}
	r = calloc(1, sizeof(*r));
	if (!r) {
		free(copy);
		return -ENOMEM;
	}
	/* librados's and librbd's threads start here: with every signal
	 * blocked, which they inherit (smcrd takes its signals by signalfd
	 * in the main thread; a SIGTERM to one of them would kill it). */
	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, &old);
	what = "rados_create";
	ret = rados_create(&r->cluster, id);
	if (ret < 0)
		goto out_free;
	what = conf ? conf : "the Ceph config file";
	ret = rados_conf_read_file(r->cluster, conf);
	if (ret < 0)
		goto out_shutdown;
	/* No librbd cache: a write is acknowledged once the cluster has it,
	 * so a client that fails over to another gateway resends exactly
	 * what was not acknowledged (with a write-back cache, what a killed
	 * gateway had acknowledged but not flushed would be lost; Ceph's
	 * iSCSI gateway turns the cache off too). */
	rados_conf_set(r->cluster, "rbd_cache", "false");
	what = "connecting to the cluster";
	ret = rados_connect(r->cluster);
	if (ret < 0)
		goto out_shutdown;
	what = pool;
	ret = rados_ioctx_create(r->cluster, pool, &r->io);
	if (ret < 0)
		goto out_shutdown;
	what = image;
	if (read_only || snap)
		ret = rbd_open_read_only(r->io, image, &r->img, snap);
	else
		ret = rbd_open(r->io, image, &r->img, NULL);
	if (ret < 0)
		goto out_ioctx;
	if (exclusive && !(read_only || snap)) {
		what = "taking the exclusive lock";
		ret = take_lock(r->img, image);
		if (ret < 0) {
			rbd_close(r->img);
			goto out_ioctx;
		}
	}
	ret = rbd_get_size(r->img, size);
	if (ret < 0) {
		what = "image size";
		rbd_close(r->img);
		goto out_ioctx;
	}
	*ro_out = read_only || snap;
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	free(copy);
	*out = r;
	return 0;
out_ioctx:
	rados_ioctx_destroy(r->io);
out_shutdown:
	rados_shutdown(r->cluster);
out_free:
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	snprintf(err, errlen, "%s: %s", what, strerror(-ret));
	free(copy);
	free(r);
	return ret;
}

void smcrd_rbd_close(struct smcrd_rbd *r)
{
	if (!r)
		return;
	rbd_close(r->img);
	rados_ioctx_destroy(r->io);
	rados_shutdown(r->cluster);
	free(r);
}

/* --- base:allocation --------------------------------------------------------- */

struct ext_state {
	uint64_t start, end;		/* the range */
	uint64_t pos;			/* described up to here */
	uint32_t align;
	struct nbd_extent *out;
	unsigned n, max;
	bool full;
};

#define HOLE (NBD_STATE_HOLE | NBD_STATE_ZERO)

/* [st->pos, to) is of status flags: merged into the last extent, or a new
 * one (none once max are there: full). */
static void ext_add(struct ext_state *st, uint64_t to, uint32_t flags)
{
	if (to <= st->pos || st->full)
		return;
	if (st->n && st->out[st->n - 1].flags == flags) {
		st->out[st->n - 1].length += (uint32_t)(to - st->pos);
	} else if (st->n == st->max) {
		st->full = true;
		return;
	} else {
		st->out[st->n].length = (uint32_t)(to - st->pos);
		st->out[st->n].flags = flags;
		st->n++;
	}
	st->pos = to;
}

/* A hole [st->pos, to): only its whole blocks count as a hole (boundaries
 * inside the range on multiples of align). */
static void ext_hole(struct ext_state *st, uint64_t to)
{
	uint64_t a = st->align, first, last;

	first = (st->pos + a - 1) / a * a;
	last = to == st->end ? to : to / a * a;
	if (first >= last) {
		ext_add(st, to, 0);
		return;
	}
	ext_add(st, first, 0);
	ext_add(st, last, HOLE);
	ext_add(st, to, 0);
}

static int ext_cb(uint64_t off, size_t len, int exists, void *arg)
{
	struct ext_state *st = arg;
	uint64_t end = off + len;

	if (off < st->pos)
		off = st->pos;
	if (end > st->end)
		end = st->end;
	if (end <= off)
		return 0;
	ext_hole(st, off);
	if (exists)
		ext_add(st, end, 0);
	else
		ext_hole(st, end);
	return st->full ? -ECANCELED : 0;
}

unsigned smcrd_rbd_extents(struct smcrd_rbd *r, uint64_t offset, uint32_t length,
			   uint32_t align, bool one, struct nbd_extent *out, unsigned max)
{
	struct ext_state st = {
		.start = offset, .end = offset + length, .pos = offset,
		.align = align ? align : 1, .out = out, .max = one ? 1 : max,
	};
	int ret;

	if (!length)
		return 0;
	ret = rbd_diff_iterate2(r->img, NULL, offset, length, 1, 0, ext_cb, &st);
	if (ret < 0 && !st.full) {
		/* Unknown: all data. */
		out[0].length = length;
		out[0].flags = 0;
		return 1;
	}
	ext_hole(&st, st.end);
	return st.n;
}
