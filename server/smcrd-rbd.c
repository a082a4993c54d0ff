/* SPDX-License-Identifier: BSD-3-Clause */
/* smcrd: exports backed by a Ceph RBD image, through librbd's AIO API.
 * One image handle per export, shared by the workers: librbd's calls are
 * thread-safe, and one handle is one owner of the image's exclusive lock
 * (one handle per worker would pass the lock around on every write).
 *
 * exclusive: the image opens without the lock (a passive gateway), and
 * the first client to arrive makes this gateway take it, breaking (and so
 * blocklisting) the old owner.  A gateway whose operations fail because it
 * was blocklisted is fenced: its connections close unanswered, and the
 * next client to arrive makes it reconnect to the cluster (a new client
 * instance, not blocklisted) and take the lock again.  Taking the lock
 * runs in a thread of its own that arriving clients wait for with a time
 * limit: a cluster that does not answer holds that one thread, never the
 * handshake threads. */
#include <config.h>

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <dlfcn.h>
#include <sys/stat.h>
#include <rados/librados.h>
#include <rbd/librbd.h>

#include "smcrd-rbd.h"
#include "nbd-proto.h"
#include "applog.h"
#include "dlsyms.h"

/* librados and librbd are loaded at the first RBD export (dlopen), so a
 * daemon without one never maps Ceph's libraries: its start and exit (and a
 * leak checker's scan at exit) do not pay for them, and the package needs
 * them only where RBD is served.  The table is filled once, never unloaded. */
#define CEPH_RADOS_FNS(X) \
	X(rados_shutdown) \
	X(rados_ioctx_destroy) \
	X(rados_conf_set) \
	X(rados_ioctx_create) \
	X(rados_create) \
	X(rados_connect) \
	X(rados_conf_read_file)
#define CEPH_RBD_FNS(X) \
	X(rbd_aio_release) \
	X(rbd_aio_flush) \
	X(rbd_aio_create_completion) \
	X(rbd_open_read_only) \
	X(rbd_open) \
	X(rbd_lock_release) \
	X(rbd_lock_get_owners_cleanup) \
	X(rbd_lock_get_owners) \
	X(rbd_lock_break) \
	X(rbd_lock_acquire) \
	X(rbd_is_exclusive_lock_owner) \
	X(rbd_get_size) \
	X(rbd_diff_iterate2) \
	X(rbd_close) \
	X(rbd_aio_writev) \
	X(rbd_aio_write_zeroes) \
	X(rbd_aio_readv) \
	X(rbd_aio_get_return_value) \
	X(rbd_aio_discard)

static struct {
#define CEPH_FN_PTR(f) __typeof__(f) *f;
	CEPH_RADOS_FNS(CEPH_FN_PTR)
	CEPH_RBD_FNS(CEPH_FN_PTR)
#undef CEPH_FN_PTR
} ceph;

static pthread_once_t ceph_once = PTHREAD_ONCE_INIT;
static char ceph_err[320] = "not loaded";	/* empty once loaded */

static void ceph_load_once(void)
{
	const struct dl_sym rados[] = {
#define CEPH_FN_SYM(f) { #f, (void **)&ceph.f },
		CEPH_RADOS_FNS(CEPH_FN_SYM)
	}, rbd[] = {
		CEPH_RBD_FNS(CEPH_FN_SYM)
#undef CEPH_FN_SYM
	};
	char why[200];
	int r;

	r = dl_load(LIBRADOS_SONAME, RTLD_NOW | RTLD_GLOBAL, rados, sizeof(rados) / sizeof(rados[0]),
		    why, sizeof(why));
	if (r == 0)
		r = dl_load(LIBRBD_SONAME, RTLD_NOW | RTLD_GLOBAL, rbd, sizeof(rbd) / sizeof(rbd[0]),
			    why, sizeof(why));
	if (r == -ELIBACC)
		snprintf(ceph_err, sizeof(ceph_err), "RBD exports need %s and %s (Debian: librbd1): %s",
			 LIBRBD_SONAME, LIBRADOS_SONAME, why);
	else if (r < 0)
		snprintf(ceph_err, sizeof(ceph_err), "%s", why);
	else
		ceph_err[0] = '\0';
}

/* 0, or -ENOSYS with the reason in err. */
static int ceph_load(char *err, size_t errlen)
{
	pthread_once(&ceph_once, ceph_load_once);
	if (!ceph_err[0])
		return 0;
	snprintf(err, errlen, "%s", ceph_err);
	return -ENOSYS;
}

/* One connection to the cluster and the image opened through it. */
struct rbd_conn {
	rados_t cluster;
	rados_ioctx_t io;
	rbd_image_t img;
	struct rbd_conn *older;		/* fenced ones, closed with the export */
};

struct smcrd_rbd {
	int refs;			/* atomic: exports that share it (reload) */
	struct rbd_conn *cur;		/* read atomically by the workers */
	char *path, *conf, *id;		/* to reconnect */
	bool exclusive;			/* read-write with the 'exclusive' option */
	bool fenced;			/* an operation of cur's was refused */
	/* Activation: one attempt at a time, by the attempt thread (which
	 * alone changes cur and active); under lock, the rest. */
	pthread_mutex_t lock;
	pthread_cond_t cond;		/* an attempt ended */
	bool active;			/* took the lock through cur */
	bool busy;			/* the attempt thread runs */
	bool again;			/* a client came during the attempt */
	bool orphan;			/* closed while busy: the thread frees r */
	unsigned waiters;		/* clients waiting for an attempt */
	uint64_t started, finished;	/* attempts */
	int result;			/* the last attempt's */
};

/* Ceph's EBLOCKLISTED is ESHUTDOWN. */
static bool fence_err(ssize_t v)
{
	return v == -ESHUTDOWN || v == -EROFS;
}

/* An operation in flight. */
struct rbd_op {
	struct smcrd_rbd *r;
	rbd_image_t img;
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
	ssize_t v = ceph.rbd_aio_get_return_value(c);
	int r;

	ceph.rbd_aio_release(c);
	if (v < 0 && o->r->exclusive && fence_err(v)) {
		/* Blocklisted, or the lock is gone: another gateway took the
		 * image over.  Nothing more is written through this handle
		 * (an older handle's late failures leave the current one be). */
		if (o->img == __atomic_load_n(&o->r->cur, __ATOMIC_ACQUIRE)->img &&
		    !__atomic_exchange_n(&o->r->fenced, true, __ATOMIC_ACQ_REL))
			log_warn("%s: fenced (%s): another gateway took the image; closing its "
				 "connections", o->r->path, strerror((int)-v));
		op_end(o, -ENOLCK);
		return;
	}
	if (v < 0) {
		op_end(o, v < -4095 ? -EIO : (int)v);
		return;
	}
	if (o->fua) {
		/* FUA: the write is acknowledged once flushed (librbd's
		 * cache may hold it until then). */
		o->fua = false;
		r = ceph.rbd_aio_create_completion(o, op_complete, &c);
		if (r == 0) {
			r = ceph.rbd_aio_flush(o->img, c);
			if (r < 0)
				ceph.rbd_aio_release(c);
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
	o->img = __atomic_load_n(&r->cur, __ATOMIC_ACQUIRE)->img;
	o->op = op;
	o->fua = op == RBD_IO_WRITE && fua;
	o->done = done;
	o->arg = arg;
	if (op == RBD_IO_READ || op == RBD_IO_WRITE)
		for (i = 0, len = 0; i < iovcnt; i++)
			len += iov[i].iov_len;
	o->len = len;
	ret = ceph.rbd_aio_create_completion(o, op_complete, &c);
	if (ret < 0) {
		op_end(o, ret);
		return;
	}
	switch (op) {
	case RBD_IO_READ:
		ret = ceph.rbd_aio_readv(o->img, iov, iovcnt, off, c);
		break;
	case RBD_IO_WRITE:
		ret = ceph.rbd_aio_writev(o->img, iov, iovcnt, off, c);
		break;
	case RBD_IO_FLUSH:
		ret = ceph.rbd_aio_flush(o->img, c);
		break;
	case RBD_IO_DISCARD:
		ret = ceph.rbd_aio_discard(o->img, off, len, c);
		break;
	case RBD_IO_ZEROES:
		ret = ceph.rbd_aio_write_zeroes(o->img, off, len, c, 0, 0);
		break;
	default:
		ret = -EINVAL;
	}
	if (ret < 0) {
		ceph.rbd_aio_release(c);
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

/* Takes the image's exclusive lock for good (librbd hands it to no other
 * client on request), first breaking any other owner's: Ceph blocklists
 * that client, so a gateway that lost the image can write to it no more,
 * whether it died or not. */
static int take_lock(rbd_image_t img, const char *path)
{
	char *owners[8];
	size_t n = 8, i;
	rbd_lock_mode_t mode;
	int ret;

	ret = ceph.rbd_lock_get_owners(img, &mode, owners, &n);
	if (ret == -ENOENT)
		n = 0;
	else if (ret < 0)
		return ret;
	for (i = 0; i < n; i++) {
		ret = ceph.rbd_lock_break(img, RBD_LOCK_MODE_EXCLUSIVE, owners[i]);
		if (ret == -ENOENT) {
			/* Released or broken meanwhile. */
			log_info("%s: the exclusive lock of %s was gone already", path, owners[i]);
			continue;
		}
		if (ret < 0) {
			/* Not fenced: no lock taken over it. */
			log_warn("%s: breaking the exclusive lock of %s: %s", path, owners[i],
				 strerror(-ret));
			break;
		}
		log_warn("%s: broke the exclusive lock of %s (blocklisted)", path, owners[i]);
	}
	if (n)
		ceph.rbd_lock_get_owners_cleanup(owners, n);
	if (i < n)
		return ret;
	return ceph.rbd_lock_acquire(img, RBD_LOCK_MODE_EXCLUSIVE);
}

static void conn_free(struct rbd_conn *k)
{
	ceph.rbd_close(k->img);
	ceph.rados_ioctx_destroy(k->io);
	ceph.rados_shutdown(k->cluster);
	free(k);
}

/* Opens the named Ceph config file without blocking and only if it is a
 * regular file: librados opens it by name and would block in open() on a
 * FIFO, with every signal blocked.  Returns the fd or -errno (err set). */
static int conf_open(const char *conf, char *err, size_t errlen)
{
	struct stat st;
	int fd, ret;

	fd = open(conf, O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
	if (fd < 0) {
		ret = -errno;
		snprintf(err, errlen, "%s: %s", conf, strerror(-ret));
		return ret;
	}
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
		close(fd);
		snprintf(err, errlen, "%s: not a regular file (a FIFO, socket, directory or "
			 "device)", conf);
		return -EINVAL;
	}
	return fd;
}

/* Connects to the cluster and opens r's image (read-only: ro). */
static int conn_open(struct smcrd_rbd *r, bool ro, struct rbd_conn **out, char *err,
		     size_t errlen)
{
	struct rbd_conn *k;
	char *copy, *pool, *image, *snap;
	char conf_path[32];
	sigset_t all, old;
	const char *what;
	int conf_fd = -1, ret;

	ret = parse_path(r->path, &copy, &pool, &image, &snap);
	if (ret < 0) {
		snprintf(err, errlen, "%s", ret == -EINVAL ? "expected rbd:POOL/IMAGE[@SNAP]" :
			 strerror(-ret));
		return ret;
	}
	if (r->conf) {
		conf_fd = conf_open(r->conf, err, errlen);
		if (conf_fd < 0) {
			free(copy);
			return conf_fd;
		}
		/* librados reads the file opened and checked here, not
		 * whatever the name points to by then. */
		snprintf(conf_path, sizeof(conf_path), "/proc/self/fd/%d", conf_fd);
	}
	k = calloc(1, sizeof(*k));
	if (!k) {
		if (conf_fd >= 0)
			close(conf_fd);
		free(copy);
		snprintf(err, errlen, "%s", strerror(ENOMEM));
		return -ENOMEM;
	}
	/* librados's and librbd's threads start here: with every signal
	 * blocked, which they inherit (smcrd takes its signals by signalfd
	 * in the main thread; a SIGTERM to one of them would kill it). */
	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, &old);
	what = "rados_create";
	ret = ceph.rados_create(&k->cluster, r->id);
	if (ret < 0)
		goto out_free;
	what = r->conf ? r->conf : "the Ceph config file";
	ret = ceph.rados_conf_read_file(k->cluster, r->conf ? conf_path : NULL);
	if (conf_fd >= 0)
		close(conf_fd);
	conf_fd = -1;
	if (ret < 0)
		goto out_shutdown;
	/* No librbd cache: a write is acknowledged once the cluster has it,
	 * so a client that fails over to another gateway resends exactly
	 * what was not acknowledged (with a write-back cache, what a killed
	 * gateway had acknowledged but not flushed would be lost; Ceph's
	 * iSCSI gateway turns the cache off too). */
	ceph.rados_conf_set(k->cluster, "rbd_cache", "false");
	/* A broken lock's owner is blocklisted whatever the config file
	 * says: without it, a live old owner would still write after a
	 * takeover (two writers). */
	what = "rbd_blocklist_on_break_lock";
	ret = ceph.rados_conf_set(k->cluster, "rbd_blocklist_on_break_lock", "true");
	if (ret < 0)
		goto out_shutdown;
	what = "connecting to the cluster";
	ret = ceph.rados_connect(k->cluster);
	if (ret < 0)
		goto out_shutdown;
	what = pool;
	ret = ceph.rados_ioctx_create(k->cluster, pool, &k->io);
	if (ret < 0)
		goto out_shutdown;
	what = image;
	if (ro || snap)
		ret = ceph.rbd_open_read_only(k->io, image, &k->img, snap);
	else
		ret = ceph.rbd_open(k->io, image, &k->img, NULL);
	if (ret < 0)
		goto out_ioctx;
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	free(copy);
	*out = k;
	return 0;
out_ioctx:
	ceph.rados_ioctx_destroy(k->io);
out_shutdown:
	ceph.rados_shutdown(k->cluster);
out_free:
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (conf_fd >= 0)
		close(conf_fd);
	snprintf(err, errlen, "%s: %s", what, strerror(-ret));
	free(copy);
	free(k);
	return ret;
}

static void rbd_free(struct smcrd_rbd *r)
{
	pthread_cond_destroy(&r->cond);
	pthread_mutex_destroy(&r->lock);
	free(r->path);
	free(r->conf);
	free(r->id);
	free(r);
}

int smcrd_rbd_open(const char *path, const char *conf, const char *id, bool read_only,
		   bool exclusive, struct smcrd_rbd **out, uint64_t *size, bool *ro_out, char *err,
		   size_t errlen)
{
	struct smcrd_rbd *r;
	char *copy, *pool, *image, *snap_name;
	bool snap;
	int ret;

	ret = parse_path(path, &copy, &pool, &image, &snap_name);
	if (ret < 0) {
		snprintf(err, errlen, "%s", ret == -EINVAL ? "expected rbd:POOL/IMAGE[@SNAP]" :
			 strerror(-ret));
		return ret;
	}
	snap = snap_name != NULL;
	free(copy);
	ret = ceph_load(err, errlen);
	if (ret < 0)
		return ret;
	r = calloc(1, sizeof(*r));
	if (!r)
		return -ENOMEM;
	pthread_condattr_t ca;

	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&r->cond, &ca);
	pthread_condattr_destroy(&ca);
	pthread_mutex_init(&r->lock, NULL);
	r->refs = 1;
	r->path = strdup(path);
	r->conf = conf ? strdup(conf) : NULL;
	r->id = id ? strdup(id) : NULL;
	if (!r->path || (conf && !r->conf) || (id && !r->id)) {
		rbd_free(r);
		return -ENOMEM;
	}
	r->exclusive = exclusive && !read_only && !snap;
	ret = conn_open(r, read_only, &r->cur, err, errlen);
	if (ret < 0) {
		rbd_free(r);
		return ret;
	}
	ret = ceph.rbd_get_size(r->cur->img, size);
	if (ret < 0) {
		snprintf(err, errlen, "image size: %s", strerror(-ret));
		conn_free(r->cur);
		rbd_free(r);
		return ret;
	}
	*ro_out = read_only || snap;
	*out = r;
	return 0;
}

/* One attempt at making this gateway the active one (the attempt thread:
 * may block as long as the cluster does not answer).  *took: the lock was
 * taken now (not held already). */
static int attempt(struct smcrd_rbd *r, bool *took)
{
	struct rbd_conn *k;
	char err[256];
	int owner = 0, ret;

	*took = false;
	if (__atomic_load_n(&r->fenced, __ATOMIC_ACQUIRE)) {
		/* This client instance is blocklisted: a new one. */
		ret = conn_open(r, false, &k, err, sizeof(err));
		if (ret < 0) {
			log_warn("%s: reconnecting after the fence: %s", r->path, err);
			return ret;
		}
		k->older = r->cur;
		__atomic_store_n(&r->cur, k, __ATOMIC_RELEASE);
		__atomic_store_n(&r->fenced, false, __ATOMIC_RELEASE);
		r->active = false;
		log_info("%s: reconnected to the cluster after the fence", r->path);
	}
	if (r->active && ceph.rbd_is_exclusive_lock_owner(r->cur->img, &owner) == 0 && owner)
		return 0;
	r->active = false;
	ret = take_lock(r->cur->img, r->path);
	if (ret < 0) {
		log_warn("%s: taking the exclusive lock: %s", r->path, strerror(-ret));
		return ret;
	}
	r->active = true;
	*took = true;
	return 0;
}

static void *attempt_main(void *arg)
{
	struct smcrd_rbd *r = arg;
	bool took, orphan;
	int ret;

	for (;;) {
		ret = attempt(r, &took);
		pthread_mutex_lock(&r->lock);
		if (took && !r->waiters && !r->orphan) {
			/* Every client gave up (their time limit): the lock
			 * goes back, and the gateway stays passive. */
			pthread_mutex_unlock(&r->lock);
			log_warn("%s: the exclusive lock came after its clients gave up: "
				 "released it, still passive", r->path);
			ceph.rbd_lock_release(r->cur->img);
			r->active = false;
			ret = -ETIMEDOUT;
			pthread_mutex_lock(&r->lock);
		} else if (took) {
			log_info("%s: took the exclusive lock: this gateway is the active one",
				 r->path);
		}
		r->result = ret;
		r->finished = r->started;
		pthread_cond_broadcast(&r->cond);
		if (!r->again || !r->waiters || r->orphan)
			break;
		r->again = false;
		r->started++;
		pthread_mutex_unlock(&r->lock);
	}
	r->busy = false;
	r->again = false;
	orphan = r->orphan;
	pthread_mutex_unlock(&r->lock);
	if (orphan) {
		r->orphan = false;
		smcrd_rbd_close(r);
	}
	return NULL;
}

int smcrd_rbd_activate(struct smcrd_rbd *r, unsigned timeout_ms)
{
	struct timespec until;
	sigset_t all, old;
	pthread_t t;
	pthread_attr_t ta;
	uint64_t mine;
	int ret = 0;

	if (!r->exclusive)
		return 0;
	clock_gettime(CLOCK_MONOTONIC, &until);
	until.tv_sec += timeout_ms / 1000;
	until.tv_nsec += (long)(timeout_ms % 1000) * 1000000;
	if (until.tv_nsec >= 1000000000) {
		until.tv_sec++;
		until.tv_nsec -= 1000000000;
	}
	pthread_mutex_lock(&r->lock);
	if (r->busy) {
		/* The attempt under way may have begun before what this
		 * client comes after (a fence): the next one. */
		r->again = true;
		mine = r->started + 1;
	} else {
		pthread_attr_init(&ta);
		pthread_attr_setdetachstate(&ta, PTHREAD_CREATE_DETACHED);
		sigfillset(&all);
		pthread_sigmask(SIG_BLOCK, &all, &old);
		ret = pthread_create(&t, &ta, attempt_main, r);
		pthread_sigmask(SIG_SETMASK, &old, NULL);
		pthread_attr_destroy(&ta);
		if (ret) {
			pthread_mutex_unlock(&r->lock);
			return -ret;
		}
		r->busy = true;
		mine = ++r->started;
	}
	r->waiters++;
	ret = 0;
	while (r->finished < mine && ret != ETIMEDOUT)
		ret = pthread_cond_timedwait(&r->cond, &r->lock, &until);
	r->waiters--;
	ret = r->finished >= mine ? r->result : -ETIMEDOUT;
	pthread_mutex_unlock(&r->lock);
	return ret;
}

struct smcrd_rbd *smcrd_rbd_get(struct smcrd_rbd *r)
{
	__atomic_add_fetch(&r->refs, 1, __ATOMIC_RELAXED);
	return r;
}

int smcrd_rbd_size(struct smcrd_rbd *r, uint64_t *size)
{
	struct rbd_conn *k = __atomic_load_n(&r->cur, __ATOMIC_ACQUIRE);

	return ceph.rbd_get_size(k->img, size);
}

void smcrd_rbd_close(struct smcrd_rbd *r)
{
	struct rbd_conn *k, *older;

	if (!r || __atomic_sub_fetch(&r->refs, 1, __ATOMIC_ACQ_REL))
		return;
	pthread_mutex_lock(&r->lock);
	if (r->busy) {
		/* An attempt waits on the cluster: it closes r when done. */
		r->orphan = true;
		pthread_mutex_unlock(&r->lock);
		return;
	}
	pthread_mutex_unlock(&r->lock);
	for (k = r->cur; k; k = older) {
		older = k->older;
		conn_free(k);
	}
	rbd_free(r);
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
	ret = ceph.rbd_diff_iterate2(__atomic_load_n(&r->cur, __ATOMIC_ACQUIRE)->img, NULL,
				     offset, length, 1, 0, ext_cb, &st);
	if (ret < 0 && !st.full) {
		/* Unknown: all data. */
		out[0].length = length;
		out[0].flags = 0;
		return 1;
	}
	ext_hole(&st, st.end);
	return st.n;
}
