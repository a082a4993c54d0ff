/* SPDX-License-Identifier: BSD-3-Clause */
/* smcr-attach -F: the forwarder between the kernel's nbd driver and the
 * client engine (nbd-conn.h), for kernels whose driver does not take an
 * AF_SMC socket on SMC-R. */
#include <config.h>

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <pthread.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <linux/nbd-netlink.h>
#include <linux/netlink.h>
#include <sys/socket.h>

#include "applog.h"
#include "nbd-client.h"
#include "nbd-conn.h"
#include "smcr-attach-int.h"

#define FWD_SOCKBUF	(4 << 20)	/* SO_SNDBUF of the socket pairs */
#define FWD_RXBUF	(256 << 10)	/* requests read ahead, per pair */

/* The driver gets one end of a socketpair(AF_UNIX) per connection of the
 * client engine (nbd-conn.c: SMC-R or TCP, reconnect and resend).  The
 * engine's connection thread i watches pair i (nbdc_watch): it reads the
 * driver's requests, puts them in its own send queue, sends them, takes
 * the replies and writes them to the pair in one writev per turn, so a
 * request wakes one thread of ours.  While connection i is down, what
 * pair i brings goes to another connection (or waits), as any request.
 * SMCR_ATTACH_THREADS=1: a reader thread per pair submits instead (every
 * request that one read() brought before it wakes the engine). */
struct fwd;
struct fwd_req;

struct fwd_conn {
	struct fwd *f;
	int fd;				/* our end */
	int kfd;			/* the driver's end, until handed over */
	pthread_t thread;
	bool started;
	pthread_mutex_t wlock;		/* out, and writing to fd */
	struct fwd_req *out, **out_tail;	/* replies to write */
	/* Requests read ahead: one read() takes several of them. */
	char *rx;
	size_t rx_off, rx_len;
};

struct fwd {
	struct nbdc *e;
	unsigned n;
	struct fwd_conn c[MAX_CONNS];
	pthread_mutex_t lock;
	pthread_cond_t idle;
	unsigned inflight;
	bool threads;			/* SMCR_ATTACH_THREADS=1 */
	uint64_t requests, errors, bad, writes, reads;
};

/* One request of the driver, in parts of at most the engine's maximum. */
struct fwd_req {
	struct fwd_conn *c;
	struct fwd_req *next;		/* in c->out */
	uint64_t cookie;
	uint16_t type;
	uint32_t len;
	unsigned parts;			/* still out, under f->lock */
	int err;			/* first error, under f->lock */
	char *buf;			/* READ, WRITE payload */
	struct nbd_simple_reply_wire w;	/* the reply's header */
};

#define FWD_IOV		64		/* replies per writev: 2 iovecs each */

/* Some of len bytes from fd: the count, or -errno (-ECONNRESET at the
 * end of the stream). */
static ssize_t read_some(int fd, void *buf, size_t len)
{
	ssize_t got;

	do
		got = read(fd, buf, len);
	while (got < 0 && errno == EINTR);
	if (got < 0)
		return -errno;
	return got ? got : -ECONNRESET;
}

static int full_read(int fd, void *buf, size_t len)
{
	char *p = buf;

	while (len) {
		ssize_t got = read_some(fd, p, len);

		if (got < 0)
			return (int)got;
		p += got;
		len -= (size_t)got;
	}
	return 0;
}

/* At least n (<= FWD_RXBUF) bytes of the driver's stream in c->rx. */
static int rx_fill(struct fwd_conn *c, size_t n)
{
	if (c->rx_len >= n)
		return 0;
	if (c->rx_off + n > FWD_RXBUF) {
		memmove(c->rx, c->rx + c->rx_off, c->rx_len);
		c->rx_off = 0;
	}
	while (c->rx_len < n) {
		char *end = c->rx + c->rx_off + c->rx_len;
		ssize_t got = read_some(c->fd, end, FWD_RXBUF - c->rx_off - c->rx_len);

		if (got < 0)
			return (int)got;
		c->rx_len += (size_t)got;
		__atomic_add_fetch(&c->f->reads, 1, __ATOMIC_RELAXED);
	}
	return 0;
}

/* What the driver has written, without waiting: 1 when it filled c->rx
 * (there may be more), 0, or -errno (-ECONNRESET: the driver closed). */
static int rx_more(struct fwd_conn *c)
{
	size_t room;
	ssize_t got;

	if (c->rx_off + c->rx_len == FWD_RXBUF && c->rx_off) {
		memmove(c->rx, c->rx + c->rx_off, c->rx_len);
		c->rx_off = 0;
	}
	room = FWD_RXBUF - c->rx_off - c->rx_len;
	if (!room)
		return 1;
	do
		got = recv(c->fd, c->rx + c->rx_off + c->rx_len, room, MSG_DONTWAIT);
	while (got < 0 && errno == EINTR);
	if (got < 0)
		return errno == EAGAIN || errno == EWOULDBLOCK ? 0 : -errno;
	if (got == 0)
		return -ECONNRESET;
	c->rx_len += (size_t)got;
	__atomic_add_fetch(&c->f->reads, 1, __ATOMIC_RELAXED);
	return (size_t)got == room;
}

/* n bytes of the stream into buf: what was read ahead, then the rest
 * straight from the socket (a large WRITE's payload). */
static int rx_take(struct fwd_conn *c, void *buf, size_t n)
{
	size_t k = n < c->rx_len ? n : c->rx_len;

	memcpy(buf, c->rx + c->rx_off, k);
	c->rx_off += k;
	c->rx_len -= k;
	if (!c->rx_len)
		c->rx_off = 0;
	return k < n ? full_read(c->fd, (char *)buf + k, n - k) : 0;
}

static int full_writev(int fd, struct iovec *iov, int n)
{
	struct msghdr m = { .msg_iov = iov, .msg_iovlen = (size_t)n };

	while (m.msg_iovlen) {
		ssize_t sent = sendmsg(fd, &m, MSG_NOSIGNAL);

		if (sent < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		while (m.msg_iovlen && (size_t)sent >= m.msg_iov->iov_len) {
			sent -= (ssize_t)m.msg_iov->iov_len;
			m.msg_iov++;
			m.msg_iovlen--;
		}
		if (m.msg_iovlen) {
			m.msg_iov->iov_base = (char *)m.msg_iov->iov_base + sent;
			m.msg_iov->iov_len -= (size_t)sent;
		}
	}
	return 0;
}

static void fwd_put(struct fwd *f, unsigned n)
{
	pthread_mutex_lock(&f->lock);
	f->inflight -= n;
	if (f->inflight == 0)
		pthread_cond_broadcast(&f->idle);
	pthread_mutex_unlock(&f->lock);
}

/* Queues q's simple reply (with the data of a READ that succeeded) on
 * its pair; fwd_flush() writes it. */
static void fwd_queue(struct fwd_req *q, int err)
{
	struct nbd_simple_reply h = { .error = err ? nbd_errno_to_wire(-err) : 0,
				      .cookie = q->cookie };
	struct fwd_conn *c = q->c;

	nbd_simple_reply_encode(&h, &q->w);
	q->err = err;
	q->next = NULL;
	pthread_mutex_lock(&c->wlock);
	*c->out_tail = q;
	c->out_tail = &q->next;
	pthread_mutex_unlock(&c->wlock);
}

/* Writes the replies queued on c, FWD_IOV / 2 to a writev, and frees
 * their requests.  The lock keeps replies whole and in queue order. */
static void fwd_flush_conn(struct fwd_conn *c)
{
	struct iovec iov[FWD_IOV];
	struct fwd_req *q, *batch;
	unsigned n;
	int cnt;

	pthread_mutex_lock(&c->wlock);
	while ((batch = c->out)) {
		cnt = 0;
		n = 0;
		for (q = batch; q && cnt <= FWD_IOV - 2; q = q->next, n++) {
			iov[cnt].iov_base = &q->w;
			iov[cnt++].iov_len = sizeof(q->w);
			if (q->type == NBD_CMD_READ && !q->err && q->len) {
				iov[cnt].iov_base = q->buf;
				iov[cnt++].iov_len = q->len;
			}
		}
		c->out = q;
		if (!q)
			c->out_tail = &c->out;
		/* A driver that went away reads no more replies: nothing to do. */
		(void)full_writev(c->fd, iov, cnt);
		__atomic_add_fetch(&c->f->writes, 1, __ATOMIC_RELAXED);
		while (batch != q) {
			struct fwd_req *next = batch->next;

			free(batch->buf);
			free(batch);
			batch = next;
		}
		fwd_put(c->f, n);
	}
	pthread_mutex_unlock(&c->wlock);
}

/* The engine's turn_end: every pair's queued replies. */
static void fwd_flush(void *arg)
{
	struct fwd *f = arg;
	unsigned i;

	for (i = 0; i < f->n; i++)
		fwd_flush_conn(&f->c[i]);
}

/* A reply that is not a request's completion (refusals in the thread). */
static void fwd_reply_now(struct fwd_conn *c, uint64_t cookie, int err)
{
	struct fwd_req *q = calloc(1, sizeof(*q));

	if (!q)
		return;		/* the driver times the request out */
	q->c = c;
	q->cookie = cookie;
	pthread_mutex_lock(&c->f->lock);
	c->f->inflight++;
	pthread_mutex_unlock(&c->f->lock);
	fwd_queue(q, err);
	fwd_flush_conn(c);
}

static void fwd_done(void *arg, int result)
{
	struct fwd_req *q = arg;
	struct fwd *f = q->c->f;
	bool last;
	int err;

	pthread_mutex_lock(&f->lock);
	if (result < 0 && !q->err)
		q->err = result;
	last = --q->parts == 0;
	err = q->err;
	if (last && err)
		f->errors++;
	pthread_mutex_unlock(&f->lock);
	if (last)
		fwd_queue(q, err);
}

/* Submits q (whose parts count is 1 here) in parts; q may be done and
 * queued when this returns. */
static void fwd_submit(struct fwd *f, struct fwd_req *q, uint16_t flags, uint64_t off)
{
	/* q's fields are copied first: the last part's completion may queue
	 * q, and a flush free it, before nbdc_submit() returns. */
	const uint32_t len = q->len;
	const uint16_t type = q->type;
	char *const buf = q->buf;
	uint32_t max = nbdc_max_request(f->e), done = 0;
	bool data = type == NBD_CMD_READ || type == NBD_CMD_WRITE;
	int r;

	if (!data || !max || max > len)
		max = len ? len : 1;
	do {
		uint32_t part = len - done < max ? len - done : max;
		bool more = done + part < len;

		if (more) {
			pthread_mutex_lock(&f->lock);
			q->parts++;
			pthread_mutex_unlock(&f->lock);
		}
		r = nbdc_submit(f->e, type, flags, off + done, part,
				data ? buf + done : NULL, fwd_done, q);
		if (r < 0)
			fwd_done(q, r);
		done += part;
	} while (done < len);
}

/* One request from c->rx (its header there): 0, or -errno to stop. */
static int fwd_one(struct fwd_conn *c)
{
	struct fwd *f = c->f;
	struct nbd_request_wire w;
	struct nbd_request h;
	struct fwd_req *q;
	uint16_t flags;

	rx_take(c, &w, sizeof(w));
	if (nbd_request_decode(&w, &h) < 0) {
		log_err("forwarder %d: a request with a bad magic from the driver",
			(int)(c - f->c));
		f->bad++;
		return -EPROTO;
	}
	if (h.type == NBD_CMD_DISC)
		return -ECONNRESET;
	q = calloc(1, sizeof(*q));
	if (!q) {
		if (h.type == NBD_CMD_WRITE && h.length) {
			f->bad++;	/* its payload is still unread */
			return -ENOMEM;
		}
		fwd_reply_now(c, h.cookie, -ENOMEM);
		return 0;
	}
	q->c = c;
	q->cookie = h.cookie;
	q->type = h.type;
	q->len = h.length;
	q->parts = 1;
	if (h.type == NBD_CMD_READ || h.type == NBD_CMD_WRITE) {
		if (h.length > NBD_MAX_PAYLOAD) {
			/* A WRITE's payload this large is not read: stop. */
			log_err("forwarder %d: a request of %llu bytes", (int)(c - f->c),
				(unsigned long long)h.length);
			f->bad++;
			free(q);
			return -EPROTO;
		}
		if (!h.length || !(q->buf = malloc(h.length))) {
			free(q);
			if (h.type == NBD_CMD_WRITE && h.length) {
				f->bad++;	/* its payload is still unread */
				return -ENOMEM;
			}
			fwd_reply_now(c, h.cookie, h.length ? -ENOMEM : -EINVAL);
			return 0;
		}
		if (h.type == NBD_CMD_WRITE) {
			/* The rest of a large payload comes by blocking reads
			 * (the driver writes it at once): first wake the
			 * engine for what is queued. */
			if (f->threads && h.length > c->rx_len) {
				nbdc_unplug(f->e);
				nbdc_plug(f->e);
			}
			if (rx_take(c, q->buf, h.length) < 0) {
				free(q->buf);
				free(q);
				return -ECONNRESET;
			}
		}
	}
	pthread_mutex_lock(&f->lock);
	f->inflight++;
	f->requests++;
	pthread_mutex_unlock(&f->lock);
	/* The flags the engine takes for each command. */
	switch (h.type) {
	case NBD_CMD_WRITE:
	case NBD_CMD_TRIM:
		flags = h.flags & NBD_CMD_FLAG_FUA;
		break;
	case NBD_CMD_WRITE_ZEROES:
		flags = h.flags & (NBD_CMD_FLAG_FUA | NBD_CMD_FLAG_NO_HOLE);
		break;
	default:
		flags = 0;
	}
	fwd_submit(f, q, flags, h.offset);
	return 0;
}

static void *fwd_thread(void *arg)
{
	struct fwd_conn *c = arg;
	struct fwd *f = c->f;
	int r = 0;

	while (r == 0 && rx_fill(c, sizeof(struct nbd_request_wire)) == 0) {
		/* Every request read so far, then one wake-up per connection. */
		nbdc_plug(f->e);
		do
			r = fwd_one(c);
		while (r == 0 && c->rx_len >= sizeof(struct nbd_request_wire));
		nbdc_unplug(f->e);
		fwd_flush_conn(c);	/* replies of requests refused at once */
	}
	/* No more requests (the driver closed its end, or sent NBD_CMD_DISC):
	 * the driver reads no replies either. */
	shutdown(c->fd, SHUT_RD);
	return NULL;
}

/* The engine's watch_ready: connection i's thread takes pair i's
 * requests. */
static int fwd_ready(void *arg, unsigned i)
{
	struct fwd *f = arg;
	struct fwd_conn *c = &f->c[i];
	int more = rx_more(c), r = 0;

	while (more >= 0 && r == 0 && c->rx_len >= sizeof(struct nbd_request_wire))
		r = fwd_one(c);
	fwd_flush_conn(c);	/* replies of requests refused at once */
	if (more < 0 || r < 0) {
		/* The driver closed its end, or sent NBD_CMD_DISC: it reads
		 * no replies either. */
		shutdown(c->fd, SHUT_RD);
		return -1;
	}
	return more;
}

/* The engine on the export, and n socket pairs. */
static int fwd_open(const struct opts *o, struct fwd *f)
{
	struct nbdc_opts no;
	const char *thr = getenv("SMCR_ATTACH_THREADS");
	char msg[512];
	int sbuf = FWD_SOCKBUF, r, sv[2];
	unsigned i;

	attach_engine_opts(o, &no);
	no.turn_end = fwd_flush;
	no.turn_arg = f;
	no.watch_ready = fwd_ready;
	memset(f, 0, sizeof(*f));
	f->threads = thr && !strcmp(thr, "1");
	pthread_mutex_init(&f->lock, NULL);
	pthread_cond_init(&f->idle, NULL);
	r = nbdc_open(&no, &f->e);
	if (r < 0) {
		nbdc_strerror(&no, r, msg, sizeof(msg));
		log_err("%s", msg);
		return r;
	}
	/* As many pairs as the engine has connections: the driver spreads
	 * requests over them as the engine does over its own. */
	f->n = nbdc_connections(f->e);
	for (i = 0; i < f->n; i++) {
		struct fwd_conn *c = &f->c[i];

		if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0) {
			r = -errno;
			goto close_pairs;
		}
		/* Replies are written from the engine's threads: room for a
		 * queue of them, so those threads seldom wait for the driver. */
		setsockopt(sv[0], SOL_SOCKET, SO_SNDBUF, &sbuf, sizeof(sbuf));
		setsockopt(sv[1], SOL_SOCKET, SO_SNDBUF, &sbuf, sizeof(sbuf));
		c->rx = malloc(FWD_RXBUF);
		if (!c->rx) {
			close(sv[0]);
			close(sv[1]);
			r = -ENOMEM;
			goto close_pairs;
		}
		c->f = f;
		c->fd = sv[0];
		c->kfd = sv[1];
		c->out_tail = &c->out;
		pthread_mutex_init(&c->wlock, NULL);
	}
	return 0;
close_pairs:
	while (i--) {
		close(f->c[i].fd);
		close(f->c[i].kfd);
		free(f->c[i].rx);
	}
	nbdc_close(f->e);
	return r;
}

static int fwd_start(struct fwd *f)
{
	unsigned i;
	int r;

	for (i = 0; i < f->n; i++) {
		struct fwd_conn *c = &f->c[i];

		if (c->kfd >= 0) {
			close(c->kfd);
			c->kfd = -1;
		}
		if (!f->threads) {
			r = nbdc_watch(f->e, i, c->fd);
			if (r < 0)
				return r;
			continue;
		}
		r = pthread_create(&c->thread, NULL, fwd_thread, c);
		if (r)
			return -r;
		c->started = true;
	}
	return 0;
}

/* Joins the threads (their ends closed by the driver: call it after
 * the device is disconnected), lets requests out finish and closes. */
static void fwd_close(struct fwd *f)
{
	struct nbdc_stats st;
	struct timespec until;
	unsigned i;

	for (i = 0; i < f->n; i++) {
		struct fwd_conn *c = &f->c[i];

		if (c->kfd >= 0)
			close(c->kfd);
		/* The engine's threads see the end of a watched pair. */
		shutdown(c->fd, SHUT_RDWR);
		if (c->started)
			pthread_join(c->thread, NULL);
	}
	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_sec += 10;
	pthread_mutex_lock(&f->lock);
	while (f->inflight && pthread_cond_timedwait(&f->idle, &f->lock, &until) == 0)
		;
	pthread_mutex_unlock(&f->lock);
	nbdc_get_stats(f->e, &st);
	log_info("forwarded %llu request(s), %llu failed, %llu bad, read in %llu read(s), "
		 "replies in %llu write(s); engine: %llu reconnect(s), %llu resent, %llu bytes "
		 "read, %llu written",
		 (unsigned long long)f->requests, (unsigned long long)f->errors,
		 (unsigned long long)f->bad, (unsigned long long)f->reads,
		 (unsigned long long)f->writes,
		 (unsigned long long)st.reconnects,
		 (unsigned long long)st.resent, (unsigned long long)st.bytes_read,
		 (unsigned long long)st.bytes_written);
	nbdc_close(f->e);
	for (i = 0; i < f->n; i++) {
		close(f->c[i].fd);
		free(f->c[i].rx);
	}
}

/* Hands the driver's ends to /dev/nbdN. */
static int fwd_attach(struct nl *n, const struct opts *o, struct fwd *f)
{
	int fds[MAX_CONNS], r;
	uint32_t min, pref, max;
	uint16_t flags = nbdc_flags(f->e);
	unsigned i;

	for (i = 0; i < f->n; i++)
		fds[i] = f->c[i].kfd;
	if (o->readonly || nbdc_read_only(f->e))
		flags |= NBD_FLAG_READ_ONLY;
	nbdc_block_size(f->e, &min, &pref, &max);
	nl_msg_begin(n, n->family, NBD_CMD_CONNECT);
	nl_put_u32(n, NBD_ATTR_INDEX, (uint32_t)o->index);
	nl_put_u64(n, NBD_ATTR_SIZE_BYTES, nbdc_size(f->e));
	nl_put_u64(n, NBD_ATTR_BLOCK_SIZE_BYTES,
		 o->block ? o->block : pref >= 512 && pref <= 4096 ? pref : 4096);
	nl_put_u64(n, NBD_ATTR_SERVER_FLAGS, flags);
	nl_put_u64(n, NBD_ATTR_TIMEOUT, o->timeout_s);
	r = nl_socks(n, fds, f->n);
	if (r == 0)
		r = nl_send(n, NULL, NULL);
	if (r < 0) {
		log_err("/dev/nbd%d: the nbd driver refused the connection: %s", o->index,
			strerror(-r));
		return r;
	}
	log_info("/dev/nbd%d: %s:%s export '%s', %llu bytes, %u connection(s) over %s, "
		 "forwarded", o->index, o->srv[0].host, o->srv[0].port, o->export,
		 (unsigned long long)nbdc_size(f->e), f->n, o->unix_sock ? "a Unix socket" :
		 o->tcp ? "TCP" : "SMC-R");
	return 0;
}

/* Until the device is disconnected (or a signal: then it disconnects
 * it, as nothing would serve it any more). */
static int fwd_watch(const struct opts *o)
{
	struct nl n;
	int r = nl_open(&n);

	if (r < 0)
		return r;
	while (!attach_stop) {
		r = nl_connected(&n, o->index);
		if (r <= 0)
			break;
		poll(NULL, 0, 200);
	}
	if (attach_stop) {
		log_info("/dev/nbd%d: signal: disconnecting it", o->index);
		r = nl_disconnect(&n, o->index);
	} else if (r == 0 || r == -ENODEV) {
		log_info("/dev/nbd%d was disconnected", o->index);
		r = 0;
	}
	close(n.fd);
	return r;
}

/* --exec: CMD plays the driver (tests): the driver's ends are its file
 * descriptors, listed in SMCR_ATTACH_FDS; the export's size is in
 * SMCR_ATTACH_SIZE.  Returns CMD's exit status, or -errno. */
static int fwd_exec(struct fwd *f, const char *cmd)
{
	char fds[MAX_CONNS * 12] = "", size[24];
	unsigned i;
	pid_t pid;
	int st;

	for (i = 0; i < f->n; i++)
		snprintf(fds + strlen(fds), sizeof(fds) - strlen(fds), "%s%d", i ? " " : "",
			 f->c[i].kfd);
	snprintf(size, sizeof(size), "%llu", (unsigned long long)nbdc_size(f->e));
	pid = fork();
	if (pid < 0)
		return -errno;
	if (pid == 0) {
		for (i = 0; i < f->n; i++)
			fcntl(f->c[i].kfd, F_SETFD, 0);
		setenv("SMCR_ATTACH_FDS", fds, 1);
		setenv("SMCR_ATTACH_SIZE", size, 1);
		execl("/bin/sh", "sh", "-c", cmd, (char *)NULL);
		_exit(127);
	}
	st = fwd_start(f);
	if (st < 0) {
		kill(pid, SIGTERM);
		waitpid(pid, NULL, 0);
		return st;
	}
	while (waitpid(pid, &st, 0) < 0) {
		if (errno != EINTR)
			return -errno;
		if (attach_stop)
			kill(pid, SIGTERM);
	}
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

int fwd_run(const struct opts *o)
{
	struct fwd f;
	struct nl n;
	int r;

	if (!o->exec) {
		r = nl_open(&n);
		if (r < 0) {
			log_err("the kernel's nbd driver: %s%s", strerror(-r),
				r == -ENOENT ? " (modprobe nbd)" : "");
			return 1;
		}
	}
	r = fwd_open(o, &f);
	if (r < 0)
		goto close_nl;
	if (o->exec) {
		r = fwd_exec(&f, o->exec);
		fwd_close(&f);
		if (r < 0)
			log_err("--exec: %s", strerror(-r));
		return r < 0 ? 1 : r;
	}
	/* The driver's requests wait in the pairs until the threads run. */
	r = fwd_attach(&n, o, &f);
	if (r == 0)
		r = fwd_start(&f);
	if (r == 0)
		r = fwd_watch(o);
	fwd_close(&f);
	if (r < 0)
		log_err("/dev/nbd%d: %s", o->index, strerror(-r));
close_nl:
	if (!o->exec)
		close(n.fd);
	return r < 0 ? 1 : 0;
}
