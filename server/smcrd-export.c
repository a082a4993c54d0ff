/* SPDX-License-Identifier: BSD-3-Clause */
/* smcrd: exports. */
#include <config.h>

#include <errno.h>
#include <fcntl.h>
#include <linux/fs.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "smcrd-export.h"
#include "smcrd-rbd.h"
#include "applog.h"
#include "nbd-proto.h"

static int spec_copy(const struct export_spec *src, struct export_spec *dst)
{
	unsigned i;

	memset(dst, 0, sizeof(*dst));
	dst->read_only = src->read_only;
	dst->direct = src->direct;
	dst->block_size = src->block_size;
	dst->rbd_exclusive = src->rbd_exclusive;
	dst->lock_timeout_ms = src->lock_timeout_ms;
	dst->name = strdup(src->name);
	dst->path = strdup(src->path);
	if (src->description)
		dst->description = strdup(src->description);
	if (src->ceph_conf)
		dst->ceph_conf = strdup(src->ceph_conf);
	if (src->ceph_id)
		dst->ceph_id = strdup(src->ceph_id);
	if (src->nallow) {
		dst->allow = malloc(src->nallow * sizeof(*dst->allow));
		if (dst->allow) {
			memcpy(dst->allow, src->allow, src->nallow * sizeof(*dst->allow));
			dst->nallow = src->nallow;
		}
	}
	if (src->ntls_allow) {
		dst->tls_allow = calloc(src->ntls_allow, sizeof(*dst->tls_allow));
		for (i = 0; dst->tls_allow && i < src->ntls_allow; i++) {
			dst->tls_allow[i] = strdup(src->tls_allow[i]);
			if (!dst->tls_allow[i])
				break;
			dst->ntls_allow++;
		}
	}
	if (!dst->name || !dst->path || (src->description && !dst->description) ||
	    (src->ceph_conf && !dst->ceph_conf) || (src->ceph_id && !dst->ceph_id) ||
	    (src->nallow && !dst->allow) || dst->ntls_allow != src->ntls_allow) {
		export_spec_free(dst);
		return -ENOMEM;
	}
	return 0;
}

static uint32_t dio_alignment(int fd, bool blockdev)
{
	int ss = 0;

	if (blockdev && ioctl(fd, BLKSSZGET, &ss) == 0 && ss >= 512 && ss <= 65536)
		return (uint32_t)ss;
	/* Safe for every file system this runs on. */
	return 4096;
}

/* Opens path without ever blocking (a FIFO would, until a writer comes),
 * refuses anything but a regular file or a block device (-ENOTBLK), and
 * gives back a descriptor in blocking mode (io_uring would otherwise
 * answer -EAGAIN instead of waiting). */
static int open_export_file(const char *path, int flags, struct stat *st)
{
	int fd = open(path, flags | O_NONBLOCK | O_NOCTTY), fl;

	if (fd < 0)
		return -errno;
	if (fstat(fd, st) < 0)
		goto out_errno;
	if (!S_ISREG(st->st_mode) && !S_ISBLK(st->st_mode)) {
		close(fd);
		return -ENOTBLK;
	}
	fl = fcntl(fd, F_GETFL);
	if (fl < 0 || fcntl(fd, F_SETFL, fl & ~O_NONBLOCK) < 0)
		goto out_errno;
	return fd;
out_errno:
	fl = -errno;
	close(fd);
	return fl;
}

static bool str_same(const char *a, const char *b)
{
	return a == b || (a && b && !strcmp(a, b));
}

/* The ceph-conf file's identity and age (zeros when there is none or it
 * cannot be read): a file edited in place is a changed setting. */
static void conf_stamp(const char *conf, struct stat *st)
{
	memset(st, 0, sizeof(*st));
	if (conf && stat(conf, st) < 0)
		memset(st, 0, sizeof(*st));
}

/* Whether keep's RBD handle serves spec as a new open would: the same
 * image, cluster config (path and file), client id, read-only asked and
 * exclusive. */
static bool rbd_same(const struct export *keep, const struct export_spec *spec,
		     const struct stat *conf_st)
{
	return keep->rbd && !strcmp(keep->spec.path, spec->path) &&
	       str_same(keep->spec.ceph_conf, spec->ceph_conf) &&
	       str_same(keep->spec.ceph_id, spec->ceph_id) &&
	       keep->ro_asked == spec->read_only &&
	       keep->spec.rbd_exclusive == spec->rbd_exclusive &&
	       keep->conf_st.st_dev == conf_st->st_dev &&
	       keep->conf_st.st_ino == conf_st->st_ino &&
	       keep->conf_st.st_size == conf_st->st_size &&
	       keep->conf_st.st_mtim.tv_sec == conf_st->st_mtim.tv_sec &&
	       keep->conf_st.st_mtim.tv_nsec == conf_st->st_mtim.tv_nsec;
}

int export_open(const struct export_spec *spec, bool direct, const struct export *keep,
		struct export **out)
{
	struct export *e;
	struct stat st;
	int flags = (spec->read_only ? O_RDONLY : O_RDWR) | O_CLOEXEC;
	int r;

	e = calloc(1, sizeof(*e));
	if (!e)
		return -ENOMEM;
	e->refs = 1;
	e->fd = -1;
	e->dfd = -1;
	r = spec_copy(spec, &e->spec);
	if (r < 0)
		goto out_free;
	if (rbd_path(spec->path)) {
		char why[256];
		bool ro;

		e->ro_asked = spec->read_only;
		conf_stamp(spec->ceph_conf, &e->conf_st);
		if (keep && rbd_same(keep, spec, &e->conf_st)) {
			/* Its cluster connection, lock and state stay. */
			e->rbd = smcrd_rbd_get(keep->rbd);
			if (smcrd_rbd_size(e->rbd, &e->size) < 0)
				e->size = keep->size;
			e->spec.read_only = keep->spec.read_only;
			e->sector = 1;
			log_info("export '%s': %s: the open image kept (its settings did not "
				 "change)", spec->name, spec->path);
			goto flags;
		}
		r = smcrd_rbd_open(spec->path, spec->ceph_conf, spec->ceph_id, spec->read_only,
				   spec->rbd_exclusive, &e->rbd, &e->size, &ro, why, sizeof(why));
		if (r < 0) {
			log_err("export '%s': %s: %s", spec->name, spec->path,
				r == -EPROTONOSUPPORT ? "smcrd was built without librbd" : why);
			goto out_spec;
		}
		e->spec.read_only = ro;
		e->sector = 1;
		goto flags;
	}
	e->fd = open_export_file(spec->path, flags, &st);
	if (e->fd < 0) {
		r = e->fd;
		goto out_spec;
	}
	if (S_ISBLK(st.st_mode)) {
		uint64_t size;

		if (ioctl(e->fd, BLKGETSIZE64, &size) < 0) {
			r = -errno;
			goto out_close;
		}
		e->size = size;
		e->blockdev = true;
		e->sector = dio_alignment(e->fd, true);
	} else {
		e->size = (uint64_t)st.st_size;
		e->sector = 1;
	}
	if (direct) {
		struct stat dst;

		e->dfd = open_export_file(spec->path, flags | O_DIRECT, &dst);
		if (e->dfd >= 0 && (dst.st_dev != st.st_dev || dst.st_ino != st.st_ino)) {
			close(e->dfd);
			e->dfd = -ESTALE;	/* replaced between the two opens */
		}
		if (e->dfd < 0) {
			r = e->dfd;
			e->dfd = -1;
			log_err("export '%s': %s: O_DIRECT: %s", spec->name, spec->path,
				strerror(-r));
			goto out_close;
		}
		e->dio_align = dio_alignment(e->dfd, e->blockdev);
	}
flags:
	e->min_block = spec->block_size ? spec->block_size : 1;
	e->pref_block = e->min_block > 4096 ? e->min_block : 4096;
	e->tflags = NBD_FLAG_HAS_FLAGS | NBD_FLAG_SEND_FLUSH | NBD_FLAG_SEND_FUA |
		    NBD_FLAG_CAN_MULTI_CONN | NBD_FLAG_SEND_CACHE;
	if (e->spec.read_only)
		e->tflags |= NBD_FLAG_READ_ONLY;
	else
		e->tflags |= NBD_FLAG_SEND_TRIM | NBD_FLAG_SEND_WRITE_ZEROES |
			     NBD_FLAG_SEND_FAST_ZERO;
	*out = e;
	return 0;
out_close:
	close(e->fd);
out_spec:
	export_spec_free(&e->spec);
out_free:
	free(e);
	return r;
}

struct export *export_get(struct export *e)
{
	__atomic_add_fetch(&e->refs, 1, __ATOMIC_RELAXED);
	return e;
}

void export_put(struct export *e)
{
	if (!e || __atomic_sub_fetch(&e->refs, 1, __ATOMIC_ACQ_REL) != 0)
		return;
	if (e->dfd >= 0)
		close(e->dfd);
	if (e->fd >= 0)
		close(e->fd);
	smcrd_rbd_close(e->rbd);
	export_spec_free(&e->spec);
	free(e);
}

bool export_allows(const struct export *e, const struct sockaddr *sa)
{
	return acl_match(e->spec.allow, e->spec.nallow, sa);
}

void export_table_free(struct export_table *t)
{
	unsigned i;

	if (!t)
		return;
	for (i = 0; i < t->n; i++)
		export_put(t->v[i]);
	free(t->v);
	free(t);
}

static int open_list(struct export_table *t, const struct export_list *l, bool direct,
		     const struct export_table *keep, char *err, size_t errlen)
{
	unsigned i;
	int r;

	for (i = 0; l && i < l->n; i++) {
		const struct export_spec *s = &l->v[i];
		struct export *e;

		if (*s->name && export_table_find(t, s->name)) {
			snprintf(err, errlen, "export '%s' defined twice", s->name);
			return -EEXIST;
		}
		r = export_open(s, s->direct >= 0 ? s->direct : direct,
				keep && *s->name ? export_table_find(keep, s->name) : NULL, &e);
		if (r < 0) {
			snprintf(err, errlen, "export '%s': %s: %s%s", s->name, s->path,
				 r == -ENOTBLK ? "not a regular file or block device "
				 "(a FIFO, socket, directory or character device)" : strerror(-r),
				 /* smcrd.service has ProtectSystem=strict: every path
				  * outside its ReadWritePaths= is read-only. */
				 r == -EROFS ? " (under systemd, add its directory to "
				 "ReadWritePaths=: systemctl edit smcrd; or export it read-only)" :
				 "");
			return r;
		}
		t->v[t->n++] = e;
	}
	return 0;
}

int export_table_open(const struct export_list *a, const struct export_list *b,
		      bool direct, const struct export_table *keep, struct export_table **out,
		      char *err, size_t errlen)
{
	struct export_table *t;
	unsigned n = (a ? a->n : 0) + (b ? b->n : 0);
	int r;

	t = calloc(1, sizeof(*t));
	if (!t)
		return -ENOMEM;
	t->v = calloc(n ? n : 1, sizeof(*t->v));
	if (!t->v) {
		free(t);
		return -ENOMEM;
	}
	r = open_list(t, a, direct, keep, err, errlen);
	if (r == 0)
		r = open_list(t, b, direct, keep, err, errlen);
	if (r < 0) {
		export_table_free(t);
		return r;
	}
	*out = t;
	return 0;
}

struct export *export_table_find(const struct export_table *t, const char *name)
{
	unsigned i;

	if (!*name)
		return t->n ? t->v[0] : NULL;
	for (i = 0; i < t->n; i++)
		if (!strcmp(t->v[i]->spec.name, name))
			return t->v[i];
	return NULL;
}
