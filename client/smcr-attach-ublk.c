/* SPDX-License-Identifier: BSD-3-Clause */
/* smcr-attach --ublk: an smcrd export as a ublk device, /dev/ublkbN.
 *
 * Linux's ublk driver (ublk_drv, Linux >= 6.0) hands a block device's
 * requests to a server in user space through io_uring: the server sends
 * UBLK_U_IO_FETCH_REQ for every tag of a queue on /dev/ublkcN
 * (IORING_OP_URING_CMD); a request's arrival completes its tag's command,
 * its description is in the queue's array mmap'd from /dev/ublkcN, and
 * UBLK_U_IO_COMMIT_AND_FETCH_REQ gives the result and waits for the
 * tag's next request.  Control commands (ADD_DEV, SET_PARAMS, START_DEV
 * with the server's pid, STOP_DEV, DEL_DEV, START/END_USER_RECOVERY) go
 * through /dev/ublk-control on a ring with 128-byte SQEs.
 *
 * Here the server is the client engine (nbd-conn.h): one ublk queue per
 * engine connection, each queue's io_uring watched by that connection's
 * own thread (nbdc_watch), so the thread that takes a request from the
 * kernel sends it, reads its reply and commits it.  A reply that comes
 * on another connection (its own was lost and its requests moved) is
 * queued for the queue's thread, which an eventfd polled on its ring
 * wakes.  Data: with UBLK_F_USER_COPY (Linux >= 6.5) a WRITE's payload
 * is preadv()n from /dev/ublkcN at the tag's offset by the engine's
 * source (nbdc_submit_write) straight to where it goes (SMC-R: the send
 * buffer), and a READ's data is pwritev()n there by the engine's sink
 * (nbdc_submit_read) straight from where it landed (SMC-R: the RMBE);
 * without it the kernel copies to and from a buffer per tag that the
 * commands name (addr).
 *
 * Recovery: the device is created with UBLK_F_USER_RECOVERY and
 * _REISSUE, so when smcr-attach dies (SIGKILL, a crash) /dev/ublkbN stays
 * and its requests wait; smcr-attach --ublk=N --recover takes it over
 * (START_USER_RECOVERY once the old server's /dev/ublkcN is closed, the
 * queues' FETCH_REQs, END_USER_RECOVERY), and the requests the old one
 * had are issued again.  A signal (SIGINT, SIGTERM) removes the device.
 * --standby does the same steps in another order: its engine connects
 * while the device's server still serves it, then it waits on a pidfd of
 * that server (and of any that takes the device over meanwhile) and, once
 * the device is quiesced, takes it over at once.  --recover=auto (a
 * service's restarts) makes the device when there is none, else does
 * what --standby does.  Under systemd (NOTIFY_SOCKET) it says READY=1 once
 * it serves the device or stands by.
 *
 * SMCR_UBLK_TRACE=1: after the device is started or taken over, the
 * times of its steps and of the first TRACE_REQS requests (arrival,
 * sent, reply, commit) on stderr, in ms from START_DEV's or
 * END_USER_RECOVERY's return.
 *
 * Errors are -errno inside. */
#include <config.h>

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>

#include <liburing.h>

#include "applog.h"
#include "monotime.h"
#include "nbd-proto.h"
#include "smcr-attach-ublk.h"
#include "sysd.h"
#include "ublk-compat.h"

#define UBLK_QD		128		/* tags per queue, unless -Q */
#define UBLK_IO_MAX	(512u << 10)	/* largest request, unless the export's is less */
#define UBLK_MAX_QUEUES	16		/* as smcr-attach's connections */
#define POLL_TAG	0xffffffffu	/* user_data of the eventfd's poll */
#define RECOVER_WAIT_MS	30000		/* for the old server to be gone */
#define TRACE_REQS	64		/* requests SMCR_UBLK_TRACE=1 follows */
#define TRACE_EVENTS	64
#define TRACE_WAIT_MS	10000		/* it prints then at the latest */

extern char **environ;

struct uq;

/* A tag's request while the engine has it. */
struct utag {
	struct uq *q;
	struct utag *next;		/* in q->done */
	char *buf;			/* the tag's buffer */
	uint32_t len;
	uint8_t op;
	unsigned parts;			/* still out (atomic) */
	int err;			/* first error (atomic) */
	int tr;				/* its trace.req[] slot; -1: none */
};

struct ub;

struct uq {
	struct ub *u;
	unsigned id;
	struct io_uring ring;
	bool ring_ok;
	int efd;			/* another thread queued a completion */
	struct ublksrv_io_desc *iods;
	size_t iods_len;
	struct utag *tags;
	pthread_mutex_t lock;		/* done */
	struct utag *done;		/* replies to commit, newest first */
	bool started;			/* FETCH_REQs sent (its thread) */
	bool released;			/* its thread let go of it (under u->lock) */
	unsigned aborted;		/* tags the kernel aborted (its thread) */
	uint64_t requests, errors;	/* its thread */
};

struct ub {
	struct nbdc *e;
	int ctrl;			/* /dev/ublk-control */
	struct io_uring cring;		/* 128-byte SQEs, for ctrl */
	bool legacy;			/* the kernel has no ioctl-encoded opcodes */
	int cdev;			/* /dev/ublkcN */
	struct ublksrv_ctrl_dev_info info;
	bool user_copy;
	unsigned nq, qd;
	uint32_t io_max;
	char *bufs;
	size_t bufs_len;
	struct uq q[UBLK_MAX_QUEUES];
	pthread_mutex_t lock;		/* released */
	pthread_cond_t cond;
	int closing;			/* atomic */
	int64_t gone_ms;		/* --recover: when the old server was seen gone (atomic) */
	unsigned queues_gone;		/* queues whose tags are all aborted (atomic) */
	int64_t sb_dead, sb_quiesced;	/* --standby: when its server was seen exited,
					 * the device seen quiesced (0: not seen) */
};

/* The queue whose engine thread this is (set on its first watch_ready). */
static __thread struct uq *my_q;

/* --- SMCR_UBLK_TRACE=1 ------------------------------------------------------- */

/* Times in us (now_us(), monotime.h); 0: not yet. */
struct trace_req {
	uint64_t off;
	uint32_t len;
	uint8_t op;
	uint16_t q, tag;
	unsigned conn;			/* that sent it (its first part) */
	int64_t arrive, sent, reply, commit;
};

static struct {
	bool on, printed;
	int64_t ref;			/* START_DEV or END_USER_RECOVERY returned */
	const char *ref_what;
	unsigned nreq;			/* slots taken (atomic) */
	struct trace_req req[TRACE_REQS];
	unsigned nev;			/* atomic */
	struct {
		int64_t us;
		char what[96];
	} ev[TRACE_EVENTS];
} trace;

/* An event at us (0: now). */
static void trace_ev_at(int64_t us, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void trace_ev_at(int64_t us, const char *fmt, ...)
{
	unsigned i;
	va_list ap;

	if (!trace.on)
		return;
	if (!us)
		us = now_us();
	i = __atomic_fetch_add(&trace.nev, 1, __ATOMIC_RELAXED);
	if (i >= TRACE_EVENTS)
		return;
	va_start(ap, fmt);
	vsnprintf(trace.ev[i].what, sizeof(trace.ev[i].what), fmt, ap);
	va_end(ap);
	__atomic_store_n(&trace.ev[i].us, us, __ATOMIC_RELEASE);
}
#define trace_ev(...)	trace_ev_at(0, __VA_ARGS__)

static void trace_set(int64_t *field)
{
	if (!__atomic_load_n(field, __ATOMIC_RELAXED))
		__atomic_store_n(field, now_us(), __ATOMIC_RELEASE);
}

/* Engine callback (nbdc_opts.sent): a part of a request went out. */
static void trace_sent(void *arg, void *req_arg, unsigned conn)
{
	struct utag *t = req_arg;

	(void)arg;
	if (t->tr >= 0 && !__atomic_load_n(&trace.req[t->tr].sent, __ATOMIC_RELAXED)) {
		trace.req[t->tr].conn = conn;
		trace_set(&trace.req[t->tr].sent);
	}
}

static const char *op_name(uint8_t op)
{
	switch (op) {
	case UBLK_IO_OP_READ: return "READ";
	case UBLK_IO_OP_WRITE: return "WRITE";
	case UBLK_IO_OP_FLUSH: return "FLUSH";
	case UBLK_IO_OP_DISCARD: return "DISCARD";
	case UBLK_IO_OP_WRITE_ZEROES: return "WRITE_ZEROES";
	default: return "?";
	}
}

/* ms from the reference, "-" for not yet. */
static const char *trace_ms(int64_t us, char *buf, size_t len)
{
	if (!us)
		return "-";
	snprintf(buf, len, "%.1f", (double)(us - trace.ref) / 1000.0);
	return buf;
}

static int cmp_i64(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;

	return x < y ? -1 : x > y;
}

static int cmp_ev(const void *a, const void *b)
{
	/* ev[]'s entries start with their time */
	return cmp_i64(a, b);
}

/* "min/median/max" of n values (us), sorted in place. */
static void trace_mmm(int64_t *v, unsigned n, char *buf, size_t len)
{
	if (!n) {
		snprintf(buf, len, "none");
		return;
	}
	qsort(v, n, sizeof(*v), cmp_i64);
	snprintf(buf, len, "%.1f/%.1f/%.1f", (double)v[0] / 1000.0,
		 (double)v[(n - 1) / 2] / 1000.0, (double)v[n - 1] / 1000.0);
}

/* Prints the trace once every followed request is committed, or
 * TRACE_WAIT_MS after the reference (the main thread, every 200 ms). */
static void trace_print(struct ub *u, bool force)
{
	unsigned n = __atomic_load_n(&trace.nreq, __ATOMIC_ACQUIRE), i, k, ns = 0, nr = 0, na = 0,
		 nc = 0;
	int64_t s[TRACE_REQS], rp[TRACE_REQS], ar[TRACE_REQS], cm[TRACE_REQS];
	char b5[24];
	char b1[24], b2[24], b3[24], b4[24];

	if (!trace.on || trace.printed || !trace.ref)
		return;
	if (n > TRACE_REQS)
		n = TRACE_REQS;
	if (!force && now_us() - trace.ref < TRACE_WAIT_MS * 1000) {
		if (n < TRACE_REQS)
			return;
		for (i = 0; i < n; i++)
			if (!__atomic_load_n(&trace.req[i].commit, __ATOMIC_ACQUIRE))
				return;
	}
	trace.printed = true;
	log_info("ublk trace: reference (0 ms): %s returned, CLOCK_MONOTONIC %" PRId64 ".%06" PRId64
		 " s", trace.ref_what, trace.ref / 1000000, trace.ref % 1000000);
	k = __atomic_load_n(&trace.nev, __ATOMIC_ACQUIRE);
	if (k > TRACE_EVENTS)
		k = TRACE_EVENTS;
	qsort(trace.ev, k, sizeof(trace.ev[0]), cmp_ev);
	for (i = 0; i < k; i++)
		log_info("ublk trace: %9s ms  %s", trace_ms(trace.ev[i].us, b1, sizeof(b1)),
			 trace.ev[i].what);
	for (i = 0; i < nbdc_connections(u->e); i++) {
		struct nbdc_conn_times ct;

		if (nbdc_conn_times(u->e, i, &ct) < 0)
			continue;
		log_info("ublk trace: engine connection %u: attempt %s, transport %s, handshake %s, "
			 "up %s ms", i, trace_ms(ct.attempt_ms * 1000, b1, sizeof(b1)),
			 trace_ms(ct.transport_ms * 1000, b2, sizeof(b2)),
			 trace_ms(ct.handshake_ms * 1000, b3, sizeof(b3)),
			 trace_ms(ct.up_ms * 1000, b4, sizeof(b4)));
	}
	for (i = 0; i < n; i++) {
		struct trace_req *q = &trace.req[i];
		int64_t a = __atomic_load_n(&q->arrive, __ATOMIC_ACQUIRE);
		int64_t se = __atomic_load_n(&q->sent, __ATOMIC_ACQUIRE);
		int64_t re = __atomic_load_n(&q->reply, __ATOMIC_ACQUIRE);
		int64_t co = __atomic_load_n(&q->commit, __ATOMIC_ACQUIRE);

		log_info("ublk trace: request %2u: queue %u tag %3u %s %" PRIu64 "+%u: arrived %s, "
			 "sent %s (connection %u), reply %s, committed %s ms%s", i, q->q, q->tag,
			 op_name(q->op), q->off, q->len, trace_ms(a, b1, sizeof(b1)),
			 trace_ms(se, b2, sizeof(b2)), q->conn, trace_ms(re, b3, sizeof(b3)),
			 trace_ms(co, b4, sizeof(b4)),
			 se && re ? (snprintf(b5, sizeof(b5), "; out %.1f ms",
					      (double)(re - se) / 1000.0), b5) : "");
		if (a)
			ar[na++] = a - trace.ref;
		if (a && se)
			s[ns++] = se - a;
		if (se && re)
			rp[nr++] = re - se;
		if (co)
			cm[nc++] = co - trace.ref;
	}
	trace_mmm(ar, na, b1, sizeof(b1));
	trace_mmm(s, ns, b2, sizeof(b2));
	trace_mmm(rp, nr, b3, sizeof(b3));
	trace_mmm(cm, nc, b5, sizeof(b5));
	log_info("ublk trace: %u request(s) followed: arrived %s ms after the reference, sent %s "
		 "ms after arriving, replied %s ms after being sent, committed %s ms after the "
		 "reference (min/median/max)", n, b1, b2, b3, b5);
}

static uint64_t io_pos(const struct uq *q, unsigned tag)
{
	return UBLKSRV_IO_BUF_OFFSET + ((uint64_t)q->id << UBLK_QID_OFF) +
	       ((uint64_t)tag << UBLK_TAG_OFF);
}

/* --- control commands -------------------------------------------------------- */

static int ctrl_cmd(struct ub *u, unsigned legacy_op, unsigned op, uint32_t dev_id,
		    void *buf, uint16_t len, uint64_t data)
{
	struct ublksrv_ctrl_cmd c = {
		.dev_id = dev_id, .queue_id = (uint16_t)-1, .len = len,
		.addr = (uint64_t)(uintptr_t)buf,
	};
	struct io_uring_sqe *sqe = io_uring_get_sqe(&u->cring);
	struct io_uring_cqe *cqe;
	int r;

	c.data[0] = data;
	if (!sqe)
		return -EBUSY;
	memset(sqe, 0, 2 * sizeof(*sqe));	/* SQE128 */
	sqe->opcode = IORING_OP_URING_CMD;
	sqe->fd = u->ctrl;
	sqe->cmd_op = u->legacy ? legacy_op : op;
	memcpy(sqe->cmd, &c, sizeof(c));
	r = io_uring_submit(&u->cring);
	if (r < 0)
		return r;
	do
		r = io_uring_wait_cqe(&u->cring, &cqe);
	while (r == -EINTR);
	if (r < 0)
		return r;
	r = cqe->res;
	io_uring_cqe_seen(&u->cring, cqe);
	return r;
}

#define CTRL(u, name, id, buf, len, data) \
	ctrl_cmd((u), UBLK_CMD_##name, UBLK_U_CMD_##name, (id), (buf), (len), (data))

/* modprobe ublk_drv, quietly (root only; its absence is reported by the
 * caller). */
static void try_modprobe(void)
{
	char *argv[] = { "modprobe", "-q", "ublk_drv", NULL };
	pid_t pid;
	int st;

	if (geteuid() != 0)
		return;
	if (posix_spawnp(&pid, "modprobe", NULL, NULL, argv, environ) == 0)
		waitpid(pid, &st, 0);
}

static const char NO_UBLK[] =
	"the kernel needs the ublk driver (ublk_drv: CONFIG_BLK_DEV_UBLK, Linux >= 6.0; "
	"on Debian 12, linux-image-6.12-amd64)";

/* /dev/ublk-control and its ring; the kernel's features in *features. */
static int ctrl_open(struct ub *u, uint64_t *features)
{
	int r;

	u->ctrl = open("/dev/ublk-control", O_RDWR | O_CLOEXEC);
	if (u->ctrl < 0 && errno == ENOENT) {
		try_modprobe();
		u->ctrl = open("/dev/ublk-control", O_RDWR | O_CLOEXEC);
	}
	if (u->ctrl < 0) {
		r = -errno;
		if (r == -ENOENT || r == -ENODEV || r == -ENXIO)
			log_err("ublk: no /dev/ublk-control: %s", NO_UBLK);
		else if (r == -EACCES || r == -EPERM)
			log_err("ublk: /dev/ublk-control: permission denied (ublk devices "
				"with recovery need root, CAP_SYS_ADMIN)");
		else
			log_err("ublk: /dev/ublk-control: %s", strerror(-r));
		return r;
	}
	r = io_uring_queue_init(4, &u->cring, IORING_SETUP_SQE128);
	if (r < 0) {
		log_err("ublk: io_uring with 128-byte entries: %s (Linux >= 5.19)",
			strerror(-r));
		close(u->ctrl);
		return r;
	}
	*features = 0;
	r = ctrl_cmd(u, 0, UBLK_U_CMD_GET_FEATURES, 0, features, UBLK_FEATURES_LEN, 0);
	if (r < 0) {
		/* Linux 6.0 to 6.4: the old opcodes, and no USER_COPY. */
		u->legacy = true;
		*features = UBLK_F_USER_RECOVERY | UBLK_F_USER_RECOVERY_REISSUE;
	}
	return 0;
}

static void ctrl_close(struct ub *u)
{
	io_uring_queue_exit(&u->cring);
	close(u->ctrl);
}

/* --- a queue, in its engine thread --------------------------------------------- */

static struct io_uring_sqe *get_sqe(struct uq *q)
{
	struct io_uring_sqe *sqe = io_uring_get_sqe(&q->ring);

	if (!sqe) {
		io_uring_submit(&q->ring);
		sqe = io_uring_get_sqe(&q->ring);
	}
	return sqe;
}

/* FETCH_REQ (res: unused) or COMMIT_AND_FETCH_REQ of tag. */
static void io_cmd(struct uq *q, unsigned tag, bool commit, int res)
{
	struct ub *u = q->u;
	struct io_uring_sqe *sqe = get_sqe(q);
	struct ublksrv_io_cmd c = {
		.q_id = (uint16_t)q->id, .tag = (uint16_t)tag, .result = res,
		.addr = u->user_copy ? 0 : (uint64_t)(uintptr_t)q->tags[tag].buf,
	};
	bool ioctl_op = u->info.flags & UBLK_F_CMD_IOCTL_ENCODE;

	if (!sqe) {
		log_err("ublk queue %u: no room in its ring", q->id);
		return;
	}
	memset(sqe, 0, sizeof(*sqe));
	sqe->opcode = IORING_OP_URING_CMD;
	sqe->fd = u->cdev;
	if (commit)
		sqe->cmd_op = ioctl_op ? UBLK_U_IO_COMMIT_AND_FETCH_REQ :
			      UBLK_IO_COMMIT_AND_FETCH_REQ;
	else
		sqe->cmd_op = ioctl_op ? UBLK_U_IO_FETCH_REQ : UBLK_IO_FETCH_REQ;
	memcpy(sqe->cmd, &c, sizeof(c));
	io_uring_sqe_set_data64(sqe, tag);
}

static int arm_poll(struct uq *q)
{
	struct io_uring_sqe *sqe = get_sqe(q);

	if (!sqe)
		return -EBUSY;
	io_uring_prep_poll_add(sqe, q->efd, POLLIN);
	io_uring_sqe_set_data64(sqe, POLL_TAG);
	return 0;
}

/* Engine callback: one part of a tag's request is done (any thread). */
static void tag_done(void *arg, int result)
{
	struct utag *t = arg;
	struct uq *q = t->q;
	uint64_t one = 1;
	int zero = 0;

	if (result < 0)
		__atomic_compare_exchange_n(&t->err, &zero, result, false, __ATOMIC_RELAXED,
					    __ATOMIC_RELAXED);
	if (__atomic_sub_fetch(&t->parts, 1, __ATOMIC_ACQ_REL))
		return;
	if (t->tr >= 0)
		trace_set(&trace.req[t->tr].reply);
	pthread_mutex_lock(&q->lock);
	t->next = q->done;
	q->done = t;
	pthread_mutex_unlock(&q->lock);
	/* Its own thread commits it at the end of this turn (turn_end). */
	if (my_q != q && write(q->efd, &one, sizeof(one)) < 0)
		log_warn("ublk queue %u: eventfd: %s", q->id, strerror(errno));
}

/* Commits what is done, in one submission. */
static void commit_done(struct uq *q)
{
	struct utag *t, *list;
	bool any = false;

	pthread_mutex_lock(&q->lock);
	list = q->done;
	q->done = NULL;
	pthread_mutex_unlock(&q->lock);
	for (t = list; t; t = t->next) {
		unsigned tag = (unsigned)(t - q->tags);
		int res = __atomic_load_n(&t->err, __ATOMIC_RELAXED);

		if (!res && (t->op == UBLK_IO_OP_READ || t->op == UBLK_IO_OP_WRITE))
			res = (int)t->len;
		if (res < 0)
			q->errors++;
		io_cmd(q, tag, true, res);
		any = true;
	}
	if (any)
		io_uring_submit(&q->ring);
	for (t = list; trace.on && t; t = t->next)
		if (t->tr >= 0) {
			trace_set(&trace.req[t->tr].commit);
			t->tr = -1;
		}
}

/* USER_COPY: a request's bytes at their place inside the tag's buffer
 * (at) moved between /dev/ublkcN and iov, where the engine has them
 * (SMC-R: the RMBE a READ's reply landed in, the send buffer a WRITE
 * goes out of). */
static int tag_copy(struct utag *t, uint8_t *at, const struct iovec *iov, int n, bool to_dev)
{
	struct uq *q = t->q;
	size_t len = iov[0].iov_len + (n > 1 ? iov[1].iov_len : 0);
	off_t pos = (off_t)(io_pos(q, (unsigned)(t - q->tags)) + (uint64_t)(at - (uint8_t *)t->buf));
	ssize_t r = to_dev ? pwritev(q->u->cdev, iov, n, pos) : preadv(q->u->cdev, iov, n, pos);

	if (r == (ssize_t)len)
		return 0;
	log_warn("ublk queue %u tag %u: %s: %s", q->id, (unsigned)(t - q->tags),
		 to_dev ? "pwrite of a READ's data" : "pread of a WRITE's data",
		 r < 0 ? strerror(errno) : "short");
	return -EIO;
}

/* The engine's sink of a READ: its bytes into the device's request. */
static int tag_sink(void *arg, uint8_t *at, const struct iovec *iov, int n)
{
	return tag_copy(arg, at, iov, n, true);
}

/* The engine's source of a WRITE: the device's request's bytes. */
static int tag_source(void *arg, uint8_t *at, const struct iovec *iov, int n)
{
	return tag_copy(arg, at, iov, n, false);
}

static int nbd_type(uint8_t op, uint32_t flags, uint16_t *type, uint16_t *nflags)
{
	*nflags = 0;
	switch (op) {
	case UBLK_IO_OP_READ:
		*type = NBD_CMD_READ;
		return 0;
	case UBLK_IO_OP_WRITE:
		*type = NBD_CMD_WRITE;
		break;
	case UBLK_IO_OP_FLUSH:
		*type = NBD_CMD_FLUSH;
		return 0;
	case UBLK_IO_OP_DISCARD:
		*type = NBD_CMD_TRIM;
		return 0;
	case UBLK_IO_OP_WRITE_ZEROES:
		*type = NBD_CMD_WRITE_ZEROES;
		if (flags & UBLK_IO_F_NOUNMAP)
			*nflags = NBD_CMD_FLAG_NO_HOLE;
		break;
	default:
		return -EOPNOTSUPP;
	}
	if (flags & UBLK_IO_F_FUA)
		*nflags |= NBD_CMD_FLAG_FUA;
	return 0;
}

/* A request the kernel gave tag: to the engine (its parts no longer than
 * the engine takes). */
static void tag_start(struct uq *q, unsigned tag)
{
	struct ub *u = q->u;
	const struct ublksrv_io_desc *iod = &q->iods[tag];
	struct utag *t = &q->tags[tag];
	uint8_t op = (uint8_t)(iod->op_flags & 0xff);
	uint64_t off = iod->start_sector << 9;
	uint64_t len64 = (uint64_t)iod->nr_sectors << 9;
	uint16_t type, flags;
	uint32_t max, done = 0;
	bool data;
	int r;

	q->requests++;
	t->op = op;
	t->next = NULL;
	t->tr = -1;
	if (trace.on && __atomic_load_n(&trace.nreq, __ATOMIC_RELAXED) < TRACE_REQS) {
		unsigned k = __atomic_fetch_add(&trace.nreq, 1, __ATOMIC_RELAXED);

		if (k < TRACE_REQS) {
			struct trace_req *tq = &trace.req[k];

			tq->off = off;
			tq->len = (uint32_t)len64;
			tq->op = op;
			tq->q = (uint16_t)q->id;
			tq->tag = (uint16_t)tag;
			__atomic_store_n(&tq->arrive, now_us(), __ATOMIC_RELEASE);
			t->tr = (int)k;
		}
	}
	__atomic_store_n(&t->err, 0, __ATOMIC_RELAXED);
	r = nbd_type(op, iod->op_flags >> 8, &type, &flags);
	data = op == UBLK_IO_OP_READ || op == UBLK_IO_OP_WRITE;
	if (r == 0 && (len64 > UINT32_MAX || (data && len64 > u->io_max)))
		r = -EINVAL;
	t->len = (uint32_t)len64;
	if (op == UBLK_IO_OP_FLUSH) {
		/* The block layer's flush may carry any sector; NBD's has none. */
		off = 0;
		t->len = 0;
	}
	if (r < 0) {
		__atomic_store_n(&t->parts, 1, __ATOMIC_RELAXED);
		tag_done(t, r);
		return;
	}
	max = data ? nbdc_max_request(u->e) : 0;
	if (!max || max > t->len)
		max = t->len ? t->len : 1;
	__atomic_store_n(&t->parts, 1, __ATOMIC_RELAXED);
	do {
		uint32_t part = t->len - done < max ? t->len - done : max;
		bool more = done + part < t->len;

		if (more)
			__atomic_add_fetch(&t->parts, 1, __ATOMIC_RELAXED);
		if (op == UBLK_IO_OP_READ && u->user_copy)	/* into the device by tag_sink */
			r = nbdc_submit_read(u->e, off + done, part, t->buf + done, tag_sink,
					     tag_done, t);
		else if (op == UBLK_IO_OP_WRITE && u->user_copy)	/* from it by tag_source */
			r = nbdc_submit_write(u->e, flags, off + done, part, t->buf + done,
					      tag_source, tag_done, t);
		else
			r = nbdc_submit(u->e, type, flags, off + done, part,
					data ? t->buf + done : NULL, tag_done, t);
		if (r < 0)
			tag_done(t, r);
		done += part;
	} while (done < t->len);
}

/* The engine's watch_ready for connection i: queue i's ring is readable. */
static int q_ready(void *arg, unsigned i)
{
	struct ub *u = arg;
	struct uq *q = &u->q[i];
	struct io_uring_cqe *cqe;
	unsigned head, n = 0;
	bool rearm = false;

	if (i >= u->nq)
		return -1;
	my_q = q;
	if (__atomic_load_n(&u->closing, __ATOMIC_ACQUIRE)) {
		pthread_mutex_lock(&u->lock);
		q->released = true;
		pthread_cond_broadcast(&u->cond);
		pthread_mutex_unlock(&u->lock);
		return -1;
	}
	nbdc_plug(u->e);
	io_uring_for_each_cqe(&q->ring, head, cqe) {
		uint64_t tag = io_uring_cqe_get_data64(cqe);

		n++;
		if (tag == POLL_TAG) {
			uint64_t v;

			if (read(q->efd, &v, sizeof(v)) < 0 && errno != EAGAIN)
				log_warn("ublk queue %u: eventfd: %s", q->id, strerror(errno));
			rearm = true;
			continue;
		}
		if (tag >= u->qd)
			continue;
		if (cqe->res == UBLK_IO_RES_OK) {
			tag_start(q, (unsigned)tag);
		} else if (cqe->res == UBLK_IO_RES_ABORT) {
			/* The device is going (or its queue is): no refetch. */
			if (++q->aborted == u->qd)
				__atomic_add_fetch(&u->queues_gone, 1, __ATOMIC_RELEASE);
		} else {
			log_warn("ublk queue %u tag %u: %s", q->id, (unsigned)tag,
				 strerror(cqe->res < 0 ? -cqe->res : EPROTO));
		}
	}
	io_uring_cq_advance(&q->ring, n);
	nbdc_unplug(u->e);
	if (!q->started) {
		/* The first turn: every tag waits for a request. */
		unsigned tag;

		for (tag = 0; tag < u->qd; tag++)
			io_cmd(q, tag, false, 0);
		q->started = true;
		trace_ev("queue %u: %u FETCH_REQ(s) queued (its connection's thread)", q->id,
			 u->qd);
		io_uring_submit(&q->ring);
		trace_ev("queue %u: FETCH_REQs submitted", q->id);
	}
	if (rearm)
		arm_poll(q);
	commit_done(q);		/* submits what is queued, if anything */
	if (rearm || io_uring_sq_ready(&q->ring))
		io_uring_submit(&q->ring);
	return 0;
}

/* The engine's turn_end: the replies that came in this turn. */
static void q_turn_end(void *arg)
{
	(void)arg;
	if (my_q && !__atomic_load_n(&my_q->u->closing, __ATOMIC_ACQUIRE))
		commit_done(my_q);
}

/* --- set-up and tear-down ------------------------------------------------------ */

static int q_open(struct ub *u, unsigned i)
{
	struct uq *q = &u->q[i];
	long page = sysconf(_SC_PAGESIZE);
	size_t max_cmd = ((size_t)UBLK_MAX_QUEUE_DEPTH * sizeof(struct ublksrv_io_desc) +
			  (size_t)page - 1) & ~((size_t)page - 1);
	unsigned tag, entries = 1;
	uint64_t one = 1;
	int r;

	q->u = u;
	q->id = i;
	q->efd = -1;
	pthread_mutex_init(&q->lock, NULL);
	q->iods_len = ((size_t)u->qd * sizeof(struct ublksrv_io_desc) + (size_t)page - 1) &
		      ~((size_t)page - 1);
	q->iods = mmap(NULL, q->iods_len, PROT_READ, MAP_SHARED | MAP_POPULATE, u->cdev,
		       (off_t)(UBLKSRV_CMD_BUF_OFFSET + i * max_cmd));
	if (q->iods == MAP_FAILED) {
		q->iods = NULL;
		return -errno;
	}
	q->tags = calloc(u->qd, sizeof(*q->tags));
	if (!q->tags)
		return -ENOMEM;
	for (tag = 0; tag < u->qd; tag++) {
		q->tags[tag].q = q;
		q->tags[tag].tr = -1;
		q->tags[tag].buf = u->bufs + ((size_t)i * u->qd + tag) * u->io_max;
	}
	while (entries < u->qd + 2)
		entries <<= 1;
	r = io_uring_queue_init(entries, &q->ring, 0);
	if (r < 0)
		return r;
	q->ring_ok = true;
	q->efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (q->efd < 0)
		return -errno;
	/* The eventfd is ready before its poll is armed: the poll completes
	 * at once, and the connection's thread, seeing the ring readable,
	 * sends the FETCH_REQs (they must come from the thread that serves
	 * the queue) and arms the poll again, as its own. */
	if (write(q->efd, &one, sizeof(one)) < 0)
		return -errno;
	r = arm_poll(q);
	if (r == 0)
		r = io_uring_submit(&q->ring);
	if (r < 0)
		return r;
	return nbdc_watch(u->e, i, q->ring.ring_fd);
}

static void q_free(struct uq *q)
{
	if (q->ring_ok)
		io_uring_queue_exit(&q->ring);
	if (q->efd >= 0)
		close(q->efd);
	if (q->iods)
		munmap(q->iods, q->iods_len);
	free(q->tags);
	pthread_mutex_destroy(&q->lock);
}

/* Asks the queues' threads to let go of them (they stop watching). */
static void q_release_all(struct ub *u, unsigned n)
{
	struct timespec until;
	uint64_t one = 1;
	unsigned i;
	bool all;

	__atomic_store_n(&u->closing, 1, __ATOMIC_RELEASE);
	for (i = 0; i < n; i++)
		if (u->q[i].efd >= 0 && write(u->q[i].efd, &one, sizeof(one)) < 0)
			log_warn("ublk queue %u: eventfd: %s", i, strerror(errno));
	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_sec += 10;
	pthread_mutex_lock(&u->lock);
	for (;;) {
		all = true;
		for (i = 0; i < n; i++)
			if (u->q[i].efd >= 0 && !u->q[i].released)
				all = false;
		if (all || pthread_cond_timedwait(&u->cond, &u->lock, &until))
			break;
	}
	pthread_mutex_unlock(&u->lock);
	if (!all)
		log_warn("ublk: a queue's thread did not let go of it");
}

/* /dev/ublkcN, as udev may still be creating it. */
static int cdev_open(struct ub *u)
{
	char path[32];
	int64_t until = now_ms() + 3000;

	snprintf(path, sizeof(path), "/dev/ublkc%u", u->info.dev_id);
	for (;;) {
		u->cdev = open(path, O_RDWR | O_CLOEXEC);
		if (u->cdev >= 0)
			return 0;
		if (errno != ENOENT || now_ms() > until)
			break;
		poll(NULL, 0, 20);
	}
	if (errno == EBUSY)
		log_err("ublk: %s is busy: another server has it open", path);
	else
		log_err("ublk: %s: %s", path, strerror(errno));
	return -errno;
}

static void block_sizes(const struct ublk_args *a, struct nbdc *e, unsigned *lbs,
			unsigned *pbs)
{
	uint32_t min, pref, max;

	nbdc_block_size(e, &min, &pref, &max);
	if (a->block)
		*lbs = a->block;
	else if (min >= 512 && min <= 4096 && !(min & (min - 1)))
		*lbs = min;
	else
		*lbs = 512;
	if (pref >= *lbs && pref <= 65536 && !(pref & (pref - 1)))
		*pbs = pref;
	else
		*pbs = *lbs < 4096 ? 4096 : *lbs;
}

static unsigned ilog2u(unsigned v)
{
	unsigned s = 0;

	while ((1u << (s + 1)) <= v)
		s++;
	return s;
}

static int set_params(struct ub *u, const struct ublk_args *a)
{
	struct ublk_params p;
	uint16_t fl = nbdc_flags(u->e);
	unsigned lbs, pbs;
	int r;

	block_sizes(a, u->e, &lbs, &pbs);
	memset(&p, 0, sizeof(p));
	p.len = sizeof(p);
	p.types = UBLK_PARAM_TYPE_BASIC;
	p.basic.logical_bs_shift = (uint8_t)ilog2u(lbs);
	p.basic.physical_bs_shift = (uint8_t)ilog2u(pbs);
	p.basic.io_min_shift = (uint8_t)ilog2u(pbs);
	p.basic.io_opt_shift = (uint8_t)ilog2u(pbs);
	p.basic.max_sectors = u->io_max >> 9;
	p.basic.dev_sectors = nbdc_size(u->e) >> 9;
	if (a->readonly || nbdc_read_only(u->e))
		p.basic.attrs |= UBLK_ATTR_READ_ONLY;
	if (fl & NBD_FLAG_SEND_FLUSH)
		p.basic.attrs |= UBLK_ATTR_VOLATILE_CACHE;
	if (fl & NBD_FLAG_SEND_FUA)
		p.basic.attrs |= UBLK_ATTR_FUA;
	if (fl & (NBD_FLAG_SEND_TRIM | NBD_FLAG_SEND_WRITE_ZEROES)) {
		p.types |= UBLK_PARAM_TYPE_DISCARD;
		p.discard.discard_granularity = pbs;
		if (fl & NBD_FLAG_SEND_TRIM) {
			p.discard.max_discard_sectors = (1u << 31) >> 9;
			p.discard.max_discard_segments = 1;
		}
		if (fl & NBD_FLAG_SEND_WRITE_ZEROES)
			p.discard.max_write_zeroes_sectors = (1u << 31) >> 9;
	}
	r = CTRL(u, SET_PARAMS, u->info.dev_id, &p, sizeof(p), 0);
	if (r < 0)
		log_err("ublk: /dev/ublkb%u: SET_PARAMS (%u-byte blocks, %u physical): %s",
			u->info.dev_id, lbs, pbs, strerror(-r));
	return r;
}

static int add_dev(struct ub *u, const struct ublk_args *a, uint64_t features)
{
	struct ublksrv_ctrl_dev_info *in = &u->info;
	uint32_t id = a->dev_id < 0 ? UINT32_MAX : (uint32_t)a->dev_id;
	int r;

	memset(in, 0, sizeof(*in));
	in->nr_hw_queues = (uint16_t)nbdc_connections(u->e);
	in->queue_depth = (uint16_t)u->qd;
	in->max_io_buf_bytes = u->io_max;
	in->dev_id = id;
	in->ublksrv_pid = getpid();
	in->flags = UBLK_F_USER_RECOVERY | UBLK_F_USER_RECOVERY_REISSUE;
	if (features & UBLK_F_USER_COPY && !getenv("SMCR_UBLK_NO_USER_COPY"))
		in->flags |= UBLK_F_USER_COPY;
	r = CTRL(u, ADD_DEV, id, in, sizeof(*in), 0);
	if (r == -EEXIST)
		log_err("ublk: /dev/ublkb%d is busy: it exists (its server gone? take it over "
			"with --ublk=%d --recover, or remove it with -d)", a->dev_id, a->dev_id);
	else if (r == -EPERM || r == -EACCES)
		log_err("ublk: adding a device: permission denied (ublk devices with recovery "
			"need root, CAP_SYS_ADMIN)");
	else if (r < 0)
		log_err("ublk: adding a device: %s", strerror(-r));
	return r;
}

/* Whether pid is a live process other than us, after a moment for one
 * that is exiting (its files are closed, then it is gone). */
static bool server_alive(pid_t pid)
{
	int64_t until = now_ms() + 5000;

	if (pid <= 0 || pid == getpid())
		return false;
	while (kill(pid, 0) == 0 || errno == EPERM) {
		if (now_ms() > until)
			return true;
		poll(NULL, 0, 20);
	}
	return false;
}

/* The existing device's info; checks it fits the export. */
static int recover_info(struct ub *u, const struct ublk_args *a)
{
	int r = CTRL(u, GET_DEV_INFO, (uint32_t)a->dev_id, &u->info, sizeof(u->info), 0);

	if (r == -ENODEV)
		log_err("ublk: --recover: there is no /dev/ublkb%d", a->dev_id);
	else if (r == -EPERM || r == -EACCES)
		log_err("ublk: /dev/ublkb%d: permission denied", a->dev_id);
	else if (r < 0)
		log_err("ublk: /dev/ublkb%d: GET_DEV_INFO: %s", a->dev_id, strerror(-r));
	if (r < 0)
		return r;
	if (!a->standby && server_alive(u->info.ublksrv_pid)) {
		log_err("ublk: /dev/ublkb%d is busy: its server (pid %d) is running", a->dev_id,
			u->info.ublksrv_pid);
		return -EBUSY;
	}
	if (!(u->info.flags & UBLK_F_USER_RECOVERY)) {
		log_err("ublk: /dev/ublkb%d cannot be recovered (made without "
			"UBLK_F_USER_RECOVERY)", a->dev_id);
		return -EINVAL;
	}
	if (!u->info.nr_hw_queues || u->info.nr_hw_queues > UBLK_MAX_QUEUES ||
	    !u->info.queue_depth || !u->info.max_io_buf_bytes) {
		log_err("ublk: /dev/ublkb%d: %u queue(s) of %u", a->dev_id,
			u->info.nr_hw_queues, u->info.queue_depth);
		return -EINVAL;
	}
	return 0;
}

/* Milliseconds since this process started (its exec and dynamic linking
 * included): /proc/self/stat's starttime against CLOCK_BOOTTIME; -1 if
 * unknown. */
static long long proc_age_ms(void)
{
	char buf[1024], *p;
	unsigned long long start;
	struct timespec ts;
	long hz = sysconf(_SC_CLK_TCK);
	ssize_t n;
	int fd, i;

	fd = open("/proc/self/stat", O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0 || hz <= 0)
		return -1;
	buf[n] = '\0';
	p = strrchr(buf, ')');		/* after comm, which may hold spaces */
	for (i = 2; p && i < 22; i++)	/* starttime is field 22 */
		p = strchr(p + 1, ' ');
	if (!p || sscanf(p, " %llu", &start) != 1)
		return -1;
	clock_gettime(CLOCK_BOOTTIME, &ts);
	return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000 -
	       (long long)(start * 1000 / (unsigned long long)hz);
}

/* Whether /dev/ublkcN is closed (the old server's end): an open of ours
 * succeeds, and is closed again at once. */
static bool cdev_free(const struct ub *u)
{
	char path[32];
	int fd;

	snprintf(path, sizeof(path), "/dev/ublkc%u", u->info.dev_id);
	fd = open(path, O_RDWR | O_CLOEXEC);
	if (fd < 0)
		return errno != EBUSY;	/* another error: START_USER_RECOVERY says it */
	close(fd);
	return true;
}

/* Whether the old server has let go of the device: its /dev/ublkcN is
 * closed (an open of ours succeeds; closed again at once, as
 * START_USER_RECOVERY needs it closed) and the kernel has quiesced the
 * device (every request of the old server requeued). */
static bool old_server_gone(struct ub *u)
{
	struct ublksrv_ctrl_dev_info in;

	return CTRL(u, GET_DEV_INFO, u->info.dev_id, &in, sizeof(in), 0) == 0 &&
	       in.state == UBLK_S_DEV_QUIESCED && cdev_free(u);
}

/* The waiter: until the old server is gone, while the engine connects
 * (it has the control ring to itself until it is joined). */
static void *recover_wait(void *arg)
{
	struct ub *u = arg;
	int64_t until = now_ms() + RECOVER_WAIT_MS;

	while (!old_server_gone(u) && now_ms() < until &&
	       !__atomic_load_n(&u->closing, __ATOMIC_ACQUIRE))
		poll(NULL, 0, 5);
	__atomic_store_n(&u->gone_ms, now_ms(), __ATOMIC_RELEASE);
	return NULL;
}

/* --standby: until the device's server (and any that takes it over
 * meanwhile) is gone and the device quiesced, waiting on a pidfd of the
 * server while it lives.  0: take it over; 1: the device was removed;
 * -EINTR: a signal; another -errno: GET_DEV_INFO failed (said). */
static int standby_wait(struct ub *u, volatile sig_atomic_t *stop)
{
	struct ublksrv_ctrl_dev_info in;
	pid_t pid = 0;			/* the server waited for */
	int pfd = -1, r;
	bool dead = false;

	for (;;) {
		if (*stop) {
			r = -EINTR;
			break;
		}
		r = CTRL(u, GET_DEV_INFO, u->info.dev_id, &in, sizeof(in), 0);
		if (r == -ENODEV) {
			r = 1;
			break;
		}
		if (r < 0) {
			log_err("ublk: /dev/ublkb%u: GET_DEV_INFO: %s", u->info.dev_id,
				strerror(-r));
			break;
		}
		if (in.state == UBLK_S_DEV_QUIESCED && !u->sb_quiesced)
			u->sb_quiesced = now_ms();
		if (in.state == UBLK_S_DEV_QUIESCED && cdev_free(u)) {
			r = 0;
			break;
		}
		if (in.ublksrv_pid != pid) {
			/* The first server, or a new one (another took the
			 * device over): wait for that one. */
			if (pfd >= 0)
				close(pfd);
			if (pid)
				log_info("/dev/ublkb%u: standing by for its new server (pid %d)",
					 u->info.dev_id, in.ublksrv_pid);
			pid = in.ublksrv_pid;
			pfd = (int)syscall(SYS_pidfd_open, pid, 0);
			dead = pfd < 0 && errno == ESRCH;
			u->sb_dead = dead ? now_ms() : 0;
		}
		if (!dead && pfd >= 0) {
			struct pollfd p = { .fd = pfd, .events = POLLIN };

			/* 200 ms at most: a signal, or the device removed */
			if (poll(&p, 1, 200) > 0) {
				dead = true;
				u->sb_dead = now_ms();
			}
			continue;
		}
		if (!dead && pfd < 0 && kill(pid, 0) < 0 && errno == ESRCH) {
			dead = true;
			u->sb_dead = now_ms();
		}
		/* gone (or no pidfd): the kernel quiesces the device (a
		 * stopped one, being removed, is not) */
		poll(NULL, 0, !dead ? 5 : in.state == UBLK_S_DEV_DEAD ? 200 : 2);
	}
	if (pfd >= 0)
		close(pfd);
	return r;
}

static int recover_start(struct ub *u)
{
	int64_t until = now_ms() + RECOVER_WAIT_MS;
	bool said = false;
	unsigned busy = 0;
	int r;

	trace_ev("START_USER_RECOVERY sent");
	for (;;) {
		r = CTRL(u, START_USER_RECOVERY, u->info.dev_id, NULL, 0, 0);
		if (r == -EBUSY)
			busy++;
		if (r != -EBUSY || now_ms() > until)
			break;
		if (!said) {
			log_info("ublk: /dev/ublkb%u: waiting for its old server to be gone",
				 u->info.dev_id);
			said = true;
		}
		poll(NULL, 0, 5);
	}
	trace_ev("START_USER_RECOVERY returned %d (after %u -EBUSY)", r, busy);
	if (r == -EBUSY)
		log_err("ublk: /dev/ublkb%u is busy: its server (pid %d) still serves it",
			u->info.dev_id, u->info.ublksrv_pid);
	else if (r < 0)
		log_err("ublk: /dev/ublkb%u: START_USER_RECOVERY: %s", u->info.dev_id,
			strerror(-r));
	return r;
}

static int check_size(struct ub *u)
{
	struct ublk_params p;
	int r;

	memset(&p, 0, sizeof(p));
	p.len = sizeof(p);
	r = CTRL(u, GET_PARAMS, u->info.dev_id, &p, sizeof(p), 0);
	if (r < 0) {
		log_err("ublk: /dev/ublkb%u: GET_PARAMS: %s", u->info.dev_id, strerror(-r));
		return r;
	}
	if (p.basic.dev_sectors != nbdc_size(u->e) >> 9) {
		log_err("ublk: /dev/ublkb%u has %llu bytes, the export %llu: not taking it over",
			u->info.dev_id, (unsigned long long)p.basic.dev_sectors << 9,
			(unsigned long long)nbdc_size(u->e));
		return -EINVAL;
	}
	return 0;
}

static void del_dev(struct ub *u)
{
	int r = CTRL(u, DEL_DEV, u->info.dev_id, NULL, 0, 0);

	if (r < 0)
		log_warn("ublk: /dev/ublkb%u: DEL_DEV: %s", u->info.dev_id, strerror(-r));
}

int ublk_run(const struct ublk_args *in, volatile sig_atomic_t *stop)
{
	struct ublk_args args = *in;
	const struct ublk_args *a = &args;
	struct nbdc_opts no = a->no;
	const char *tr_env = getenv("SMCR_UBLK_TRACE");
	struct ub *u;
	uint64_t features = 0;
	int64_t t0, t_eng = 0, t_rec = 0, t_gone = 0;
	long long age = -1;
	pthread_t waiter;
	bool waiting = false;
	char msg[512];
	unsigned i, nq = 0;
	bool added = false, started = false;
	int r;

	u = calloc(1, sizeof(*u));
	if (!u)
		return 1;
	u->cdev = -1;
	pthread_mutex_init(&u->lock, NULL);
	pthread_cond_init(&u->cond, NULL);
	trace.on = tr_env && *tr_env && strcmp(tr_env, "0");
	if (trace.on) {
		long long pa = proc_age_ms();

		if (pa >= 0)
			trace_ev_at((now_ms() - pa) * 1000, "the process started (exec)");
		if (a->main_ms)
			trace_ev_at(a->main_ms * 1000, "main()");
		trace_ev("ublk set-up");
	}
	r = ctrl_open(u, &features);
	if (r < 0)
		goto free_u;
	t0 = now_ms();
	if (a->recover_auto) {
		/* A service's restart: make the device, or stand by for (or
		 * take over at once from) its server. */
		r = CTRL(u, GET_DEV_INFO, (uint32_t)a->dev_id, &u->info, sizeof(u->info), 0);
		if (r == 0) {
			args.recover = args.standby = true;
			log_info("/dev/ublkb%d exists (its server, pid %d, %s): --recover=auto takes "
				 "it over once it is gone", a->dev_id, u->info.ublksrv_pid,
				 kill(u->info.ublksrv_pid, 0) == 0 || errno == EPERM ? "runs" :
				 "is gone");
		} else if (r != -ENODEV) {
			log_err("ublk: /dev/ublkb%d: GET_DEV_INFO: %s", a->dev_id, strerror(-r));
			goto close_ctrl;
		}
	}
	if (a->recover) {
		age = proc_age_ms();
		r = recover_info(u, a);
		if (r < 0)
			goto close_ctrl;
		if (no.connections < u->info.nr_hw_queues)
			no.connections = u->info.nr_hw_queues;
		/* The old server's end is waited for while the engine
		 * connects (--standby: after it is up). */
		if (!a->standby)
			waiting = pthread_create(&waiter, NULL, recover_wait, u) == 0;
	}
	if (!a->recover && a->dev_id >= 0 &&
	    CTRL(u, GET_DEV_INFO, (uint32_t)a->dev_id, &u->info, sizeof(u->info), 0) == 0) {
		log_err("ublk: /dev/ublkb%d is busy: it exists (%s; take it over with --ublk=%d "
			"--recover, or remove it with -d)", a->dev_id,
			server_alive(u->info.ublksrv_pid) ? "served" : "its server is gone",
			a->dev_id);
		r = -EEXIST;
		goto close_ctrl;
	}
	/* The device is served once the first connection is up (the
	 * others come up meanwhile, their queues' requests on it). */
	no.first_up = true;
	no.turn_end = q_turn_end;
	no.turn_arg = u;
	no.watch_ready = q_ready;
	if (trace.on)
		no.sent = trace_sent;
	trace_ev("engine: connecting");
	r = nbdc_open(&no, &u->e);
	t_eng = now_ms();
	trace_ev("engine: first connection up (nbdc_open returned %d)", r);
	if (waiting) {
		if (r < 0)
			__atomic_store_n(&u->closing, 1, __ATOMIC_RELEASE);
		pthread_join(waiter, NULL);
	}
	if (r < 0) {
		nbdc_strerror(&no, r, msg, sizeof(msg));
		log_err("%s", msg);
		goto close_ctrl;
	}
	if (a->recover) {
		u->qd = u->info.queue_depth;
		u->io_max = u->info.max_io_buf_bytes;
		if (nbdc_connections(u->e) < u->info.nr_hw_queues) {
			log_err("ublk: /dev/ublkb%d has %u queues, the export allows %u "
				"connection(s)", a->dev_id, u->info.nr_hw_queues,
				nbdc_connections(u->e));
			r = -EINVAL;
			goto close_engine;
		}
		r = check_size(u);
		if (r == 0 && a->standby) {
			log_info("/dev/ublkb%d: standing by for its server (pid %d): engine up in "
				 "%lld ms (the process had run %lld ms before)", a->dev_id,
				 u->info.ublksrv_pid, (long long)(t_eng - t0), age);
			snprintf(msg, sizeof(msg), "READY=1\nSTATUS=standing by for the server "
				 "of /dev/ublkb%d (pid %d)", a->dev_id, u->info.ublksrv_pid);
			sysd_notify(msg);
			r = standby_wait(u, stop);
			if (r == 1) {
				log_info("/dev/ublkb%d was removed: not standing by any more",
					 a->dev_id);
				r = 0;
				goto close_engine;
			}
			if (r == -EINTR) {
				log_info("/dev/ublkb%d: signal: not standing by any more "
					 "(the device is left as it is)", a->dev_id);
				r = 0;
				goto close_engine;
			}
			t_gone = now_ms();
			trace_ev("standby: the server seen gone and the device quiesced");
		}
		if (r == 0 && waiting)
			trace_ev_at(__atomic_load_n(&u->gone_ms, __ATOMIC_ACQUIRE) * 1000,
				    "the old server seen gone (device quiesced, /dev/ublkc%u "
				    "closed)", u->info.dev_id);
		if (r == 0)
			r = recover_start(u);
		if (r < 0)
			goto close_engine;
		t_rec = now_ms();
	} else {
		uint32_t m = nbdc_max_request(u->e);

		u->qd = a->queue_depth ? a->queue_depth : UBLK_QD;
		u->io_max = m && m < UBLK_IO_MAX ? m & ~4095u : UBLK_IO_MAX;
		if (u->io_max < 4096) {
			log_err("ublk: the export takes requests of %u bytes at most", m);
			r = -EINVAL;
			goto close_engine;
		}
		r = add_dev(u, a, features);
		if (r < 0)
			goto close_engine;
		added = true;
		u->qd = u->info.queue_depth;
		u->io_max = u->info.max_io_buf_bytes;
		r = set_params(u, a);
		if (r < 0)
			goto close_engine;
	}
	u->user_copy = u->info.flags & UBLK_F_USER_COPY;
	if (!u->user_copy)
		log_info("ublk: %s: the kernel copies through a buffer per request (the "
			 "older copy mode)", features & UBLK_F_USER_COPY ?
			 "without USER_COPY" : "this kernel has no UBLK_F_USER_COPY (Linux >= 6.5)");
	u->nq = u->info.nr_hw_queues;
	if (u->nq > UBLK_MAX_QUEUES || u->nq > nbdc_connections(u->e)) {
		log_err("ublk: %u queues for %u connection(s)", u->nq, nbdc_connections(u->e));
		r = -EINVAL;
		goto close_engine;
	}
	r = cdev_open(u);
	if (r < 0)
		goto close_engine;
	u->bufs_len = (size_t)u->nq * u->qd * u->io_max;
	u->bufs = mmap(NULL, u->bufs_len, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (u->bufs == MAP_FAILED) {
		u->bufs = NULL;
		r = -errno;
		goto close_engine;
	}
	for (nq = 0; nq < u->nq; nq++) {
		r = q_open(u, nq);
		if (r < 0) {
			log_err("ublk: /dev/ublkc%u queue %u: %s", u->info.dev_id, nq,
				strerror(-r));
			nq++;
			goto release;
		}
	}
	/* Both wait until every queue's thread has sent its FETCH_REQs. */
	trace.ref_what = a->recover ? "END_USER_RECOVERY" : "START_DEV";
	trace_ev("%s sent", trace.ref_what);
	if (a->recover)
		r = CTRL(u, END_USER_RECOVERY, u->info.dev_id, NULL, 0, (uint64_t)getpid());
	else
		r = CTRL(u, START_DEV, u->info.dev_id, NULL, 0, (uint64_t)getpid());
	trace.ref = now_us();
	if (r < 0) {
		log_err("ublk: /dev/ublkb%u: %s: %s", u->info.dev_id,
			a->recover ? "END_USER_RECOVERY" : "START_DEV", strerror(-r));
		goto release;
	}
	started = true;
	snprintf(msg, sizeof(msg), "READY=1\nSTATUS=serving /dev/ublkb%u", u->info.dev_id);
	sysd_notify(msg);
	if (a->standby)
		log_info("/dev/ublkb%u: taken over %lld ms after its server (pid %d) was seen "
			 "gone (%u queue(s) of %u, %s): its exit seen %lld ms before, the "
			 "device quiesced %lld ms before; START_USER_RECOVERY done at %lld ms, "
			 "END_USER_RECOVERY at %lld ms; standing by %lld ms, the engine up "
			 "%lld ms after main()", u->info.dev_id,
			 (long long)(now_ms() - t_gone), u->info.ublksrv_pid, u->nq, u->qd,
			 u->user_copy ? "USER_COPY" : "copy mode",
			 u->sb_dead ? (long long)(t_gone - u->sb_dead) : -1LL,
			 u->sb_quiesced ? (long long)(t_gone - u->sb_quiesced) : -1LL, (long long)(t_rec - t_gone),
			 (long long)(now_ms() - t_gone), (long long)(t_gone - t_eng),
			 a->main_ms ? (long long)(t_eng - a->main_ms) : -1LL);
	else if (a->recover)
		log_info("/dev/ublkb%u: taken over in %lld ms (%u queue(s) of %u, %s): "
			 "engine up at %lld ms, old server seen gone at %lld ms, "
			 "START_USER_RECOVERY done at %lld ms, END_USER_RECOVERY at %lld ms; "
			 "the process had run %lld ms before (exec, libraries, set-up; main() "
			 "%lld ms before)", u->info.dev_id,
			 (long long)(now_ms() - t0), u->nq, u->qd,
			 u->user_copy ? "USER_COPY" : "copy mode", (long long)(t_eng - t0),
			 waiting ? (long long)(__atomic_load_n(&u->gone_ms, __ATOMIC_ACQUIRE) -
					       t0) : -1LL,
			 (long long)(t_rec - t0), (long long)(now_ms() - t0), age,
			 a->main_ms ? (long long)(t0 - a->main_ms) : -1LL);
	else
		log_info("/dev/ublkb%u: %s:%s export '%s', %llu bytes, %u queue(s) of %u on "
			 "%u connection(s) over %s, %s", u->info.dev_id, a->no.host,
			 a->no.port ? a->no.port : "-", a->no.export ? a->no.export : "",
			 (unsigned long long)nbdc_size(u->e), u->nq, u->qd,
			 nbdc_connections(u->e), a->no.transport == NBDC_TCP ? "TCP" : "SMC-R",
			 u->user_copy ? "USER_COPY" : "copy mode");
	while (!*stop && __atomic_load_n(&u->queues_gone, __ATOMIC_ACQUIRE) < u->nq) {
		poll(NULL, 0, 200);
		trace_print(u, false);
	}
	trace_print(u, true);
	if (*stop) {
		sysd_notify("STOPPING=1");
		log_info("/dev/ublkb%u: signal: removing it", u->info.dev_id);
		r = CTRL(u, STOP_DEV, u->info.dev_id, NULL, 0, 0);
		if (r < 0)
			log_warn("ublk: /dev/ublkb%u: STOP_DEV: %s", u->info.dev_id,
				 strerror(-r));
	} else {
		log_info("/dev/ublkb%u was stopped", u->info.dev_id);
		added = false;		/* by whoever stopped it */
	}
	r = 0;
release:
	q_release_all(u, nq);
close_engine:
	if (u->e) {
		struct nbdc_stats st;
		uint64_t req = 0, err = 0;

		nbdc_get_stats(u->e, &st);
		nbdc_close(u->e);
		for (i = 0; i < nq; i++) {
			req += u->q[i].requests;
			err += u->q[i].errors;
		}
		if (started)
			log_info("ublk: %" PRIu64 " request(s), %" PRIu64 " failed; engine: %"
				 PRIu64 " reconnect(s), %" PRIu64 " resent, %" PRIu64
				 " WRITE(s) from the send buffer", req, err,
				 st.reconnects, st.resent, st.writes_in_place);
	}
	for (i = 0; i < nq; i++)
		q_free(&u->q[i]);
	if (u->bufs)
		munmap(u->bufs, u->bufs_len);
	if (u->cdev >= 0)
		close(u->cdev);
	/* A device we made and did not start, or one we served (made or
	 * taken over) and stopped on a signal. */
	if ((added && !started) || (started && *stop))
		del_dev(u);
close_ctrl:
	ctrl_close(u);
free_u:
	pthread_cond_destroy(&u->cond);
	pthread_mutex_destroy(&u->lock);
	free(u);
	return r < 0 ? 1 : 0;
}

int ublk_detach(int dev_id)
{
	struct ub u = { .cdev = -1 };
	uint64_t features;
	int r = ctrl_open(&u, &features);

	if (r < 0)
		return r;
	r = CTRL(&u, STOP_DEV, (uint32_t)dev_id, NULL, 0, 0);
	if (r == 0 || r == -EINVAL)
		r = CTRL(&u, DEL_DEV, (uint32_t)dev_id, NULL, 0, 0);
	ctrl_close(&u);
	return r;
}
