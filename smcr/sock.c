/* SPDX-License-Identifier: BSD-3-Clause */
/* smcrbd: the socket half of the public API: data calls, close, events,
 * status.  Connection setup (CLC) is in sock_clc.c, the context calls in
 * ctx.c. */
#include <config.h>

#include <errno.h>
#include <sched.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>

#include "abi.h"
#include "clc.h"
#include "engine.h"
#include "log.h"
#include "monotime.h"
#include "sock.h"
#include "synopt.h"
#include "strbuf.h"

/* How long a closed connection may wait for the peer's close. */
#define SMCR_LINGER_MS 10000

static void sock_notify(struct smcr_conn *conn, void *arg)
{
	struct smcr_sock *s = arg;
	uint64_t one = 1;

	(void)conn;
	pthread_cond_broadcast(&s->cond);
	if (s->cp_sleeping && write(s->cpfd, &one, sizeof(one)) < 0 && errno != EAGAIN)
		smcr_dbg("sock: eventfd: %s", strerror(errno));
	if (s->evfd >= 0 && write(s->evfd, &one, sizeof(one)) < 0 && errno != EAGAIN)
		smcr_dbg("sock: eventfd: %s", strerror(errno));
}

struct smcr_sock *smcr_sock_new(struct smcr_ctx *ctx, int fd)
{
	struct smcr_sock *s = calloc(1, sizeof(*s));
	pthread_condattr_t ca;

	if (!s)
		return NULL;
	s->ctx = ctx;
	s->fd = fd;
	s->cpfd = -1;
	s->pollfd = s->chan_fd = -1;
	s->evfd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (s->evfd < 0) {
		free(s);
		return NULL;
	}
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&s->cond, &ca);
	pthread_condattr_destroy(&ca);
	return s;
}

/* ctx->lock held. */
void smcr_sock_link(struct smcr_sock *s)
{
	s->conn.notify = sock_notify;
	s->conn.notify_arg = s;
	s->next = s->ctx->socks;
	s->ctx->socks = s;
}

/* Let go of the channel s holds (ctx->lock held). */
static void sock_chan_drop(struct smcr_sock *s)
{
	if (s->chan_fd >= 0) {
		if (epoll_ctl(s->pollfd, EPOLL_CTL_DEL, s->chan_fd, NULL))
			smcr_dbg("sock: epoll_ctl DEL: %s", strerror(errno));
		close(s->chan_fd);
		s->chan_fd = -1;
	}
	if (s->chan_held)
		smcr_vlink_unhold(&s->ctx->vlinks, s->chan_link);
	s->chan_held = false;
	s->chan_link = 0;
}

/* s's thread takes its link's completions itself: s holds the channel of
 * its link now, in s->pollfd if the application polls that (ctx->lock
 * held; after a failover, the new link's). */
static void sock_chan_sync(struct smcr_sock *s)
{
	struct epoll_event ev = { .events = EPOLLIN };
	struct smcr_link *l = s->conn.error ? NULL : s->conn.link;
	uint64_t id = l && l->dev ? smcr_vlink_id(l) : 0;
	int fd;

	if ((s->pollfd < 0 && !s->chan_sticky) || id == s->chan_link)
		return;
	sock_chan_drop(s);
	if (!id)
		return;
	s->chan_link = id;	/* tried: not again while on this link */
	fd = smcr_vlink_hold(l, &id, s->pollfd >= 0);
	if (fd < 0)
		return;
	s->chan_held = true;
	if (s->pollfd < 0)
		return;
	if (epoll_ctl(s->pollfd, EPOLL_CTL_ADD, fd, &ev)) {
		smcr_dbg("sock: epoll_ctl ADD: %s", strerror(errno));
		close(fd);
		return;		/* held without the fd: served at the tick */
	}
	s->chan_fd = fd;
}

/* Give back everything; ctx->lock held, s unlinked from ctx->socks. */
static void sock_free_locked(struct smcr_sock *s)
{
	struct smcr_ctx *ctx = s->ctx;

	sock_chan_drop(s);
	if (s->pollfd >= 0)
		close(s->pollfd);

	if (s->smc && s->lgr) {
		struct smcr_lgr *lgr = s->lgr;

		smcr_engine_conn_stats_add(&ctx->stats, &s->conn.stats);
		/* Freed, or parked while posted writes may still read it (an
		 * abort does not wait for them). */
		smcr_lgr_sndbuf_release(lgr, &s->conn);
		smcr_lgr_conn_remove(lgr, &s->conn);
		if (s->conn.rmbe.rmb)
			smcr_rmbe_free(&lgr->rmbs, &s->conn.rmbe);
		if (s->peer_rmb && s->peer_rmb->refs)
			s->peer_rmb->refs--;
	}
	if (s->synopt_port)
		smcr_synopt_unlisten(s->synopt_port);
	if (s->fd >= 0)
		close(s->fd);
	if (s->evfd >= 0)
		close(s->evfd);
	if (s->cpfd >= 0)
		close(s->cpfd);
	pthread_cond_destroy(&s->cond);
	free(s);
}

void smcr_sock_destroy_locked(struct smcr_sock *s)
{
	struct smcr_sock **pp;

	for (pp = &s->ctx->socks; *pp; pp = &(*pp)->next) {
		if (*pp == s) {
			*pp = s->next;
			break;
		}
	}
	sock_free_locked(s);
}

/* Wait on s->cond for up to ms (ctx->lock held). */
static void sock_wait(struct smcr_sock *s, unsigned int ms)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	ts.tv_nsec += (long)ms * 1000000L;
	ts.tv_sec += ts.tv_nsec / 1000000000L;
	ts.tv_nsec %= 1000000000L;
	pthread_cond_timedwait(&s->cond, &s->ctx->lock, &ts);
}

/* Caller-driven progress: send completions raise events only when asked
 * for; ask when ours matter (ctx->lock held, after a data call). */
static void sock_want_tx_done(struct smcr_sock *s)
{
	struct smcr_link *l = s->conn.link;

	if (s->ctx->caller_poll && s->smc && l && l->ops->want_send_done &&
	    smcr_conn_wants_tx_done(&s->conn)) {
		l->ops->want_send_done(l);
		/* A thread that returns from here may not block in a call
		 * again soon: the progress thread takes that completion (and
		 * sends what it frees) instead of the tick. */
		if (s->chan_held && s->chan_fd < 0)
			sock_chan_drop(s);
	}
}

/* Wait for s's state to change, up to ms (ctx->lock held, dropped while
 * asleep).  With caller-driven progress (ctx->caller_poll) this thread
 * polls its link's CQs and sleeps on the link's completion channel and on
 * s->cpfd (notify writes it while we sleep), so what arrives for s is
 * taken here instead of by the progress thread, which then had to wake
 * us.  Send completions wake us only with want_send (room to send, a
 * close).  Another thread on the same link, or a link without it, sleeps
 * on s->cond as before (woken by notify). */
static void sock_wait_link(struct smcr_sock *s, unsigned int ms, bool want_send)
{
	struct smcr_link *l = s->conn.link;
	const struct smcr_link_ops *ops;
	struct smcr_link_waiter w = { .fd = -1, .wake_fd = -1 };
	struct pollfd p[2];
	uint64_t junk;
	int n;

	if (!s->ctx->caller_poll || !l || !l->ops->wait_begin || s->conn.error) {
		if (s->chan_held && s->chan_fd < 0)
			sock_chan_drop(s);	/* nothing to take here now */
		sock_wait(s, ms);
		return;
	}
	if (s->cpfd < 0)
		s->cpfd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (s->cpfd < 0) {
		sock_wait(s, ms);
		return;
	}
	/* From now on this thread takes the link's completions when it
	 * blocks: the progress thread no longer watches the link between
	 * our calls (what comes meanwhile waits for the next call or the
	 * tick, as a reader's data would anyway). */
	s->chan_sticky = true;
	sock_chan_sync(s);
	ops = l->ops;		/* l may be gone when we wake */
	w.wake_fd = s->cpfd;
	n = ops->wait_begin(l, &w, want_send || smcr_conn_wants_tx_done(&s->conn));
	if (n < 0) {
		sock_wait(s, ms);
		return;
	}
	if (n == 0) {
		/* Nothing completed since the caller looked: sleep. */
		p[0] = (struct pollfd){ .fd = w.fd, .events = POLLIN };
		p[1] = (struct pollfd){ .fd = s->cpfd, .events = POLLIN };
		s->cp_sleeping = true;
		pthread_mutex_unlock(&s->ctx->lock);
		n = poll(p, 2, (int)ms);
		pthread_mutex_lock(&s->ctx->lock);
		s->cp_sleeping = false;
		if (n > 0 && (p[1].revents & POLLIN) &&
		    read(s->cpfd, &junk, sizeof(junk)) < 0)
			junk = 0;
	}
	ops->wait_end(&w);
}

/* Before a receive sleeps: poll the connection's link for up to
 * ctx->busy_poll_us (ctx->lock held, dropped between polls).  A message
 * that comes within it is handled on this thread: no wake-up of the
 * progress thread and of this one.  True when something completed. */
static bool sock_busy_poll(struct smcr_sock *s)
{
	unsigned int us = s->ctx->busy_poll_us;
	int64_t end;

	if (!us || s->conn.error)
		return false;
	end = now_us() + us;
	for (;;) {
		struct smcr_link *l = s->conn.link;

		if (!l || !l->ops->poll || s->conn.error)
			return false;
		if (l->ops->poll(l) > 0)
			return true;
		if (now_us() >= end)
			return false;
		pthread_mutex_unlock(&s->ctx->lock);
		sched_yield();
		pthread_mutex_lock(&s->ctx->lock);
	}
}

static ssize_t tcp_io(struct smcr_sock *s, void *buf, size_t len, int flags,
		      bool out)
{
	int f = MSG_NOSIGNAL | ((flags & SMCR_DONTWAIT) ? MSG_DONTWAIT : 0);
	ssize_t n;

	do {
		n = out ? send(s->fd, buf, len, f) : recv(s->fd, buf, len, f);
	} while (n < 0 && errno == EINTR);
	if (n < 0)
		return errno == EWOULDBLOCK ? -EAGAIN : -errno;
	return n;
}

ssize_t smcr_send(struct smcr_sock *s, const void *buf, size_t len, int flags)
{
	ssize_t n;

	if (flags & ~SMCR_DONTWAIT)
		return -EINVAL;
	if (!s->smc)
		return tcp_io(s, (void *)buf, len, flags, true);
	pthread_mutex_lock(&s->ctx->lock);
	for (;;) {
		n = smcr_conn_send(&s->conn, buf, len);
		if (n != -EAGAIN || (flags & SMCR_DONTWAIT))
			break;
		sock_wait_link(s, 1000, true);
	}
	sock_want_tx_done(s);
	pthread_mutex_unlock(&s->ctx->lock);
	return n;
}

ssize_t smcr_recv(struct smcr_sock *s, void *buf, size_t len, int flags)
{
	ssize_t n;

	if (flags & ~SMCR_DONTWAIT)
		return -EINVAL;
	if (!s->smc)
		return tcp_io(s, buf, len, flags, false);
	pthread_mutex_lock(&s->ctx->lock);
	for (;;) {
		n = smcr_conn_recv(&s->conn, buf, len);
		if (n != -EAGAIN || (flags & SMCR_DONTWAIT))
			break;
		if (!sock_busy_poll(s))
			sock_wait_link(s, 1000, false);
	}
	pthread_mutex_unlock(&s->ctx->lock);
	return n;
}

int smcr_send_all(struct smcr_sock *s, const void *buf, size_t len)
{
	const uint8_t *p = buf;

	while (len) {
		ssize_t n = smcr_send(s, p, len, 0);

		if (n < 0)
			return (int)n;
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

int smcr_recv_all(struct smcr_sock *s, void *buf, size_t len)
{
	uint8_t *p = buf;

	while (len) {
		ssize_t n = smcr_recv(s, p, len, 0);

		if (n < 0)
			return (int)n;
		if (n == 0)
			return -ECONNRESET;	/* end of stream mid-message */
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

ssize_t smcr_reserve(struct smcr_sock *s, struct iovec iov[2], int flags)
{
	ssize_t n;

	if (flags & ~SMCR_DONTWAIT)
		return -EINVAL;
	if (!s->smc)
		return -EOPNOTSUPP;
	pthread_mutex_lock(&s->ctx->lock);
	if (s->tx_reserved) {
		pthread_mutex_unlock(&s->ctx->lock);
		return -EBUSY;
	}
	for (;;) {
		n = smcr_conn_reserve(&s->conn, iov);
		if (n != 0 || (flags & SMCR_DONTWAIT))
			break;
		sock_wait_link(s, 1000, true);
	}
	pthread_mutex_unlock(&s->ctx->lock);
	return n == 0 ? -EAGAIN : n;
}

int smcr_reserve_len(struct smcr_sock *s, size_t len, struct iovec iov[2], int flags)
{
	struct iovec piece[2];
	size_t skip, k;
	ssize_t n;

	if (flags & ~SMCR_DONTWAIT)
		return -EINVAL;
	if (!s->smc)
		return -EOPNOTSUPP;
	pthread_mutex_lock(&s->ctx->lock);
	if (len + s->tx_reserved > s->conn.tx_len) {
		pthread_mutex_unlock(&s->ctx->lock);
		return -EMSGSIZE;
	}
	for (;;) {
		n = smcr_conn_reserve(&s->conn, piece);
		if (n < 0 || (size_t)n >= s->tx_reserved + len)
			break;
		if (flags & SMCR_DONTWAIT) {
			n = -EAGAIN;
			break;
		}
		sock_wait_link(s, 1000, true);
	}
	if (n < 0) {
		pthread_mutex_unlock(&s->ctx->lock);
		return (int)n;
	}
	/* Skip what earlier reservations took, then take len bytes. */
	skip = s->tx_reserved;
	for (k = 0; k < 2; k++) {
		size_t off = skip < piece[k].iov_len ? skip : piece[k].iov_len;

		skip -= off;
		piece[k].iov_base = (uint8_t *)piece[k].iov_base + off;
		piece[k].iov_len -= off;
	}
	if (piece[0].iov_len == 0) {
		piece[0] = piece[1];
		piece[1].iov_len = 0;
	}
	iov[0].iov_base = piece[0].iov_base;
	iov[0].iov_len = len < piece[0].iov_len ? len : piece[0].iov_len;
	iov[1].iov_base = piece[1].iov_base;
	iov[1].iov_len = len - iov[0].iov_len;
	s->tx_reserved += len;
	pthread_mutex_unlock(&s->ctx->lock);
	return 0;
}

int smcr_commit(struct smcr_sock *s, size_t n)
{
	int ret;

	if (!s->smc)
		return -EOPNOTSUPP;
	pthread_mutex_lock(&s->ctx->lock);
	if (s->tx_reserved && n > s->tx_reserved) {
		ret = -EINVAL;		/* more than smcr_reserve_len() gave */
	} else {
		ret = smcr_conn_commit(&s->conn, n);
		if (ret == 0)
			s->tx_reserved -= s->tx_reserved ? n : 0;
	}
	sock_want_tx_done(s);
	pthread_mutex_unlock(&s->ctx->lock);
	return ret;
}

int smcr_unreserve(struct smcr_sock *s, size_t n)
{
	int ret = 0;

	if (!s->smc)
		return -EOPNOTSUPP;
	pthread_mutex_lock(&s->ctx->lock);
	if (n > s->tx_reserved)
		ret = -EINVAL;
	else
		s->tx_reserved -= n;
	pthread_mutex_unlock(&s->ctx->lock);
	return ret;
}

ssize_t smcr_peek(struct smcr_sock *s, struct iovec iov[2], int flags)
{
	ssize_t n;

	if (flags & ~SMCR_DONTWAIT)
		return -EINVAL;
	if (!s->smc)
		return -EOPNOTSUPP;
	pthread_mutex_lock(&s->ctx->lock);
	for (;;) {
		n = smcr_conn_peek(&s->conn, iov);
		if (n != -EAGAIN || (flags & SMCR_DONTWAIT))
			break;
		if (!sock_busy_poll(s))
			sock_wait_link(s, 1000, false);
	}
	pthread_mutex_unlock(&s->ctx->lock);
	return n;
}

int smcr_consume(struct smcr_sock *s, size_t n)
{
	int ret;

	if (!s->smc)
		return -EOPNOTSUPP;
	pthread_mutex_lock(&s->ctx->lock);
	ret = smcr_conn_consume(&s->conn, n);
	pthread_mutex_unlock(&s->ctx->lock);
	return ret;
}

int smcr_cursor_update(struct smcr_sock *s, int flags)
{
	int ret;

	if (flags & ~SMCR_CURSOR_REQUEST)
		return -EINVAL;
	if (!s->smc)
		return 0;
	pthread_mutex_lock(&s->ctx->lock);
	ret = smcr_conn_cursor_update(&s->conn, flags & SMCR_CURSOR_REQUEST);
	if (ret > 0) {
		if (flags & SMCR_CURSOR_REQUEST)
			s->ctx->stats.cursor_requests++;
		else
			s->ctx->stats.cursor_updates++;
	}
	pthread_mutex_unlock(&s->ctx->lock);
	return ret;
}

int smcr_shutdown(struct smcr_sock *s, int how)
{
	int ret;

	if (!s->smc)
		return shutdown(s->fd, how) ? -errno : 0;
	if (how != SHUT_WR && how != SHUT_RDWR)
		return 0;
	pthread_mutex_lock(&s->ctx->lock);
	ret = smcr_conn_shutdown(&s->conn);
	sock_want_tx_done(s);
	pthread_mutex_unlock(&s->ctx->lock);
	return ret;
}

int smcr_close(struct smcr_sock *s)
{
	struct smcr_ctx *ctx = s->ctx;
	uint64_t until = smcr_now_ms() + SMCR_LINGER_MS;

	pthread_mutex_lock(&ctx->lock);
	if (s->smc && !s->listener) {
		smcr_conn_close(&s->conn);
		/* The RMBEs are reused only when both sides are done with
		 * them (§4.4.2): wait for the peer's close, bounded. */
		while (!smcr_conn_finished(&s->conn) && smcr_now_ms() < until &&
		       !(s->lgr && s->lgr->terminated))
			sock_wait_link(s, 200, true);
		if (!smcr_conn_finished(&s->conn))
			smcr_conn_abort(&s->conn, -ETIMEDOUT);
	}
	smcr_sock_destroy_locked(s);
	pthread_mutex_unlock(&ctx->lock);
	return 0;
}

void smcr_abort(struct smcr_sock *s)
{
	struct smcr_ctx *ctx = s->ctx;

	pthread_mutex_lock(&ctx->lock);
	if (s->smc && !s->listener)
		smcr_conn_abort(&s->conn, -ECONNABORTED);
	else if (s->fd >= 0 && !s->listener) {
		struct linger l = { .l_onoff = 1, .l_linger = 0 };

		setsockopt(s->fd, SOL_SOCKET, SO_LINGER, &l, sizeof(l));
	}
	smcr_sock_destroy_locked(s);
	pthread_mutex_unlock(&ctx->lock);
}

/* With caller-driven progress the fd is an epoll set of the eventfd and
 * of the channel of s's link (sock_chan_sync), made at the first call and
 * the same after that; on failure, the eventfd for good. */
int smcr_sock_fd(struct smcr_sock *s)
{
	struct epoll_event ev = { .events = EPOLLIN };
	int fd;

	if (!s->smc)
		return s->fd;
	if (!s->ctx->caller_poll || s->listener)
		return s->evfd;
	pthread_mutex_lock(&s->ctx->lock);
	if (s->pollfd < 0 && !s->pollfd_failed) {
		s->pollfd = epoll_create1(EPOLL_CLOEXEC);
		if (s->pollfd >= 0 && epoll_ctl(s->pollfd, EPOLL_CTL_ADD, s->evfd, &ev)) {
			close(s->pollfd);
			s->pollfd = -1;
		}
		s->pollfd_failed = s->pollfd < 0;
		if (s->pollfd_failed)
			smcr_warn("sock: no epoll set for caller-driven progress: %s",
				  strerror(errno));
	}
	sock_chan_sync(s);
	fd = s->pollfd >= 0 ? s->pollfd : s->evfd;
	pthread_mutex_unlock(&s->ctx->lock);
	return fd;
}

unsigned int smcr_sock_events(struct smcr_sock *s)
{
	unsigned int ev = 0, c;
	uint64_t junk;

	if (!s->smc) {
		struct pollfd p = { .fd = s->fd, .events = POLLIN | POLLOUT };

		if (poll(&p, 1, 0) > 0) {
			ev |= (p.revents & POLLIN) ? SMCR_EV_IN : 0;
			ev |= (p.revents & POLLOUT) ? SMCR_EV_OUT : 0;
			ev |= (p.revents & POLLHUP) ? SMCR_EV_HUP : 0;
			ev |= (p.revents & POLLERR) ? SMCR_EV_ERR : 0;
		}
		return ev;
	}
	pthread_mutex_lock(&s->ctx->lock);
	if (s->pollfd >= 0) {
		/* The completions the fd woke us for, taken here: the
		 * progress thread no longer watches the link. */
		sock_chan_sync(s);
		if (s->chan_fd >= 0 && s->conn.link &&
		    smcr_vlink_serve(s->conn.link, smcr_conn_wants_tx_done(&s->conn)) > 0)
			s->ctx->stats.caller_serves++;
	}
	/* Cleared after what that told us and under the lock (every write
	 * is): a change after it writes the eventfd again, and a poller of
	 * the epoll set is not woken for what we return here. */
	if (read(s->evfd, &junk, sizeof(junk)) < 0)
		junk = 0;
	c = smcr_conn_poll(&s->conn);
	sock_want_tx_done(s);
	pthread_mutex_unlock(&s->ctx->lock);
	ev |= (c & SMCR_POLLIN) ? SMCR_EV_IN : 0;
	ev |= (c & SMCR_POLLOUT) ? SMCR_EV_OUT : 0;
	ev |= (c & SMCR_POLLHUP) ? SMCR_EV_HUP : 0;
	ev |= (c & SMCR_POLLERR) ? SMCR_EV_ERR : 0;
	return ev;
}

int smcr_sock_tcp_fd(struct smcr_sock *s)
{
	return s->fd;
}

int smcr_getpeername(struct smcr_sock *s, struct sockaddr *addr, socklen_t *len)
{
	return getpeername(s->fd, addr, len) ? -errno : 0;
}

int smcr_getsockname(struct smcr_sock *s, struct sockaddr *addr, socklen_t *len)
{
	return getsockname(s->fd, addr, len) ? -errno : 0;
}

int smcr_sock_info_size(struct smcr_sock *s, struct smcr_sock_info *theirs, size_t size)
{
	struct smcr_sock_info ours, *info = &ours;

	memset(info, 0, sizeof(*info));
	pthread_mutex_lock(&s->ctx->lock);
	info->smc = s->smc;
	info->first_contact = s->first_contact;
	info->fallback_reason = s->fallback_reason;
	info->fallback_by_peer = s->fallback_by_peer;
	if (s->smc) {
		info->link_id = s->conn.link ? s->conn.link->link_id : 0;
		info->token = s->conn.token;
		info->peer_token = s->conn.peer_token;
		info->rmbe_size = s->conn.rmbe.data_len + s->conn.rx_eye;
		info->peer_rmbe_size = s->conn.tx_len + s->conn.tx_eye;
		info->peer_rmbe_data = s->conn.tx_len;
		info->rmbe_eyecatcher = s->conn.rx_eye != 0;
		info->bytes_sent = s->conn.stats.bytes_sent;
		info->bytes_recv = s->conn.stats.bytes_recv;
		info->failovers = s->conn.stats.failovers;
	}
	pthread_mutex_unlock(&s->ctx->lock);
	smcr_abi_out(theirs, size, &ours, sizeof(ours));
	return 0;
}
