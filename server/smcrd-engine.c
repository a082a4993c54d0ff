/* SPDX-License-Identifier: BSD-3-Clause */
/* smcrd: the io_uring engine (API in smcrd-engine.h): the worker threads
 * and their loop; the rooms below are listed in smcrd-engine-int.h. */
#include <config.h>

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/sockios.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>
#include <sys/un.h>

#include "smcrd-engine-int.h"

#if defined(__has_include)
#if __has_include(<valgrind/valgrind.h>)
#include <valgrind/valgrind.h>
#endif
#endif
#ifndef RUNNING_ON_VALGRIND
#define RUNNING_ON_VALGRIND 0
#endif

static void arm_timer(struct worker *w);

/* Frees c and what it holds, after its last SQE completed. */
static void conn_destroy(struct conn *c)
{
	struct worker *w = c->w;
	struct engine *e = w->e;
	void *owner;

	while (c->tx_head) {
		struct req *q = c->tx_head;

		c->tx_head = q->next;
		req_free(q);
	}
	if (c->rx_req)
		req_free(c->rx_req);
	if (c->skip_req)
		req_free(c->skip_req);
	conn_mem_unlink(c);
	conn_share_put(c);
	if (c->prev)
		c->prev->next = c->next;
	else
		w->conns = c->next;
	if (c->next)
		c->next->prev = c->prev;
	log_rated(LOGRATE_SESSION, c->t->peer, SMCR_LOG_INFO,
		  "client %s: export '%s' closed (%llu requests, %llu bytes read, "
		  "%llu bytes written)", c->t->peer, c->exp->spec.name,
		  (unsigned long long)c->nreq, (unsigned long long)c->rbytes,
		  (unsigned long long)c->wbytes);
	iostat_conn(c->st_exp, -1);
	iostat_conn(c->st_cli, -1);
	owner = c->owner;
	bd_close(c->t);
	export_put(c->exp);
	free(c->pins);
	free(c->rbuf);
	free(c);
	__atomic_sub_fetch(&w->nconns, 1, __ATOMIC_RELAXED);
	__atomic_sub_fetch(&e->conns, 1, __ATOMIC_RELAXED);
	if (e->p.closed)
		e->p.closed(e->p.closed_arg, owner);
}

/* At a safe point: a closing connection goes once nothing refers to it. */
static void conn_maybe_destroy(struct conn *c)
{
	if (c->closing && c->io_pending == 0 && !c->kicked && !c->dirty)
		conn_destroy(c);
}

static void conn_start(struct worker *w, struct conn *c)
{
	c->w = w;
	c->next = w->conns;
	if (w->conns)
		w->conns->prev = c;
	w->conns = c;
	if (conn_share_get(c) < 0) {
		log_warn("client %s: out of memory: closing", c->t->peer);
		conn_destroy(c);
		return;
	}
	if (w->draining)
		c->drain = true;
	c->rx_progress_ms = now_ms();
	c->tx_seen_ms = c->rx_progress_ms;
	c->tx_seen_outq = -1;
	if (w->e->p.request_timeout_ms || w->e->p.idle_timeout_ms)
		arm_timer(w);
	if (c->rx_ops->poll)
		conn_arm_poll_in(c);
	/* Requests may have arrived with the handshake. */
	conn_kick(c);
}

static void arm_timer(struct worker *w)
{
	struct io_uring_sqe *sqe;

	if (w->timer_armed)
		return;
	sqe = conn_get_sqe(w);
	w->tick.tv_sec = 0;
	w->tick.tv_nsec = DRAIN_TICK_MS * 1000000L;
	io_uring_prep_timeout(sqe, &w->tick, 0, 0);
	io_uring_sqe_set_data64(sqe, ud(w, TAG_TIMER));
	w->timer_armed = true;
}

static void drain_check(struct worker *w)
{
	uint64_t now = now_ms();
	bool force = now >= w->drain_deadline;
	struct conn *c, *next;

	for (c = w->conns; c; c = next) {
		next = c->next;
		if (c->closing)
			continue;
		if (force) {
			conn_close(c, "drain timeout: closing");
			conn_maybe_destroy(c);
			continue;
		}
		if (!c->last_rx_ms)
			c->last_rx_ms = now;
		if (!c->inflight && !c->tx_head && !c->rx_req && !c->skip_req &&
		    now - c->last_rx_ms >= w->e->p.drain_idle_ms) {
			conn_close(c, "drained: closing");
			conn_maybe_destroy(c);
		}
	}
}

/* Whether c's replies stood still since the last look: nothing handed to
 * the transport and, on a socket, its send queue unchanged (the client
 * reads nothing).  No replies waiting counts as moving. */
static bool tx_stalled(struct conn *c, uint64_t now, uint64_t limit)
{
	int outq = -1;

	/* Nothing waits to go, or the disk has yet to fill a linked READ. */
	if ((!c->tx_head && !c->tx_busy) ||
	    (c->tx_link && !(c->tx_link->lk_done & LK_READ))) {
		c->tx_seen_ms = now;
		return false;
	}
	if (c->tx_ops->sqe || bd_info(c->t).kernel_tcp)
		if (ioctl(c->pfd, SIOCOUTQ, &outq) < 0)
			outq = -1;
	if (c->tx_bytes != c->tx_seen || outq != c->tx_seen_outq) {
		c->tx_seen = c->tx_bytes;
		c->tx_seen_outq = outq;
		c->tx_seen_ms = now;
		return false;
	}
	return now - c->tx_seen_ms >= limit;
}

/* Connections in the middle of a request's payload that sent nothing for
 * request_timeout_ms, or whose replies the client did not read for as
 * long: closed, their buffers freed (a client that announces a large WRITE
 * and stops, or asks for large READs and reads nothing, must not hold
 * memory others wait for). */
static void stall_check(struct worker *w)
{
	uint64_t now = now_ms(), limit = w->e->p.request_timeout_ms;
	struct conn *c, *next;

	for (c = w->conns; c; c = next) {
		bool tx;

		next = c->next;
		if (c->closing)
			continue;
		tx = tx_stalled(c, now, limit);
		if (!tx && (!(c->rx_req || c->skip_req) || now - c->rx_progress_ms < limit))
			continue;
		__atomic_add_fetch(&w->stats.request_timeouts, 1, __ATOMIC_RELAXED);
		log_every_warn(&w->stall_log, 10000,
			       "client %s: %s for %llu ms (request-timeout): closing", c->t->peer,
			       tx ? "replies not read" : "request payload stalled",
			       (unsigned long long)(now - (tx ? c->tx_seen_ms : c->rx_progress_ms)));
		conn_close(c, tx ? "reply timeout: closing" : "request timeout: closing");
		conn_maybe_destroy(c);
	}
}

/* Connections with nothing in flight, nothing to send, in no request's
 * payload, and nothing received or sent for idle_timeout_ms: closed (a
 * client slot held by a session that does nothing). */
static void idle_check(struct worker *w)
{
	uint64_t now = now_ms(), limit = w->e->p.idle_timeout_ms, last;
	struct conn *c, *next;
	char why[80];

	for (c = w->conns; c; c = next) {
		next = c->next;
		if (c->closing)
			continue;
		if (c->inflight || c->tx_head || c->tx_busy || c->rx_req || c->skip_req) {
			c->busy_seen_ms = now;
			continue;
		}
		last = c->rx_progress_ms > c->busy_seen_ms ? c->rx_progress_ms : c->busy_seen_ms;
		if (now - last < limit)
			continue;
		__atomic_add_fetch(&w->stats.idle_timeouts, 1, __ATOMIC_RELAXED);
		snprintf(why, sizeof(why), "idle for %llu ms (idle-timeout): closing",
			 (unsigned long long)(now - last));
		conn_close(c, why);
		conn_maybe_destroy(c);
	}
}

static void take_incoming(struct worker *w)
{
	struct conn *list;
	struct req *done, *rev = NULL;
	bool drain;

	pthread_mutex_lock(&w->lock);
	list = w->incoming;
	w->incoming = NULL;
	done = w->rbd_done;
	w->rbd_done = NULL;
	drain = w->drain_req;
	pthread_mutex_unlock(&w->lock);
	/* RBD completions, oldest first. */
	while (done) {
		struct req *q = done;

		done = q->rbd_next;
		q->rbd_next = rev;
		rev = q;
	}
	while (rev) {
		struct req *q = rev;

		rev = q->rbd_next;
		req_complete(q, q->rbd_res);
	}
	while (list) {
		struct conn *c = list;

		list = c->next;
		c->next = c->prev = NULL;
		conn_start(w, c);
	}
	if (drain && !w->draining) {
		struct conn *c;

		w->draining = true;
		w->drain_deadline = now_ms() + w->e->p.drain_timeout_ms;
		for (c = w->conns; c; c = c->next) {
			c->drain = true;
			c->last_rx_ms = now_ms();
		}
		arm_timer(w);
	}
}

static void arm_wake(struct worker *w)
{
	struct io_uring_sqe *sqe = conn_get_sqe(w);

	io_uring_prep_read(sqe, w->evfd, &w->evbuf, sizeof(w->evbuf), 0);
	io_uring_sqe_set_data64(sqe, ud(w, TAG_WAKE));
}

static void handle_cqe(struct worker *w, struct io_uring_cqe *cqe)
{
	uint64_t data = io_uring_cqe_get_data64(cqe);
	void *p = (void *)(uintptr_t)(data & ~TAG_MASK);
	struct conn *c;
	int cqe_res = cqe->res;

	switch ((enum tag)(data & TAG_MASK)) {
	case TAG_REQ:
		c = ((struct req *)p)->c;
		req_complete(p, cqe->res);
		conn_maybe_destroy(c);
		break;
	case TAG_POLL_IN:
		c = p;
		if (!(cqe->flags & IORING_CQE_F_MORE)) {
			c->poll_in = false;
			c->io_pending--;
			if (!c->closing && cqe->res >= 0)
				conn_arm_poll_in(c);
		}
		if (c->closing) {
			conn_maybe_destroy(c);
			break;
		}
		c->rx_short = false;
		if (cqe->res < 0 && cqe->res != -ECANCELED) {
			log_warn("client %s: poll: %s", c->t->peer, strerror(-cqe->res));
			conn_close(c, NULL);
			conn_maybe_destroy(c);
			break;
		}
		/* SMC-R: the link's completions that woke us, taken now
		 * (whether or not the read path looks: a reply corked for
		 * a send completion goes out). */
		bd_woken(c->t);
		conn_kick(c);
		/* One fd for both directions (SMC-R's eventfd): the read
		 * path's look-again may have drained the wake-up meant for a
		 * POLL_OUT armed after it, which then never fires.  Every
		 * wake-up reaches this multishot poll: retry the send too. */
		if (c->poll_out && bd_poll_events(c->t, BD_WANT_READ) ==
		    bd_poll_events(c->t, BD_WANT_WRITE))
			conn_dirty(c);
		break;
	case TAG_POLL_OUT:
		c = p;
		c->poll_out = false;
		c->io_pending--;
		if (c->closing) {
			conn_maybe_destroy(c);
			break;
		}
		conn_dirty(c);
		break;
	case TAG_RECV:
		c = p;
		c->rx_armed = false;
		c->io_pending--;
		if (!c->closing)
			rx_done(c, cqe->res);
		conn_maybe_destroy(c);
		break;
	case TAG_SEND:
		c = p;
		if (c->tx_zc && (cqe->flags & IORING_CQE_F_MORE)) {
			/* Zero-copy: the buffers are the kernel's until the
			 * notification, which ends the send. */
			c->tx_zc_res = cqe->res;
			break;
		}
		c->io_pending--;
		if (c->tx_zc && (cqe->flags & IORING_CQE_F_NOTIF))
			cqe_res = c->tx_zc_res;
		if (c->tx_link) {
			struct req *q = c->tx_link;

			q->lk_sres = cqe_res;
			q->lk_done |= LK_SEND;
			if (q->lk_done & LK_READ)
				req_link_resolve(q);
			conn_maybe_destroy(c);
			break;
		}
		c->tx_busy = false;
		if (c->closing) {
			conn_maybe_destroy(c);
			break;
		}
		if (cqe_res < 0 && cqe_res != -EINTR && cqe_res != -EAGAIN) {
			char why[96];

			snprintf(why, sizeof(why), "send failed: %s", strerror(-cqe_res));
			conn_close(c, cqe_res == -EPIPE || cqe_res == -ECONNRESET ?
				   "client went away" : why);
			conn_maybe_destroy(c);
			break;
		}
		if (cqe_res > 0)
			tx_retire(c, (size_t)cqe_res);
		conn_dirty(c);
		break;
	case TAG_WAKE:
		take_incoming(w);
		arm_wake(w);
		break;
	case TAG_TIMER:
		w->timer_armed = false;
		if (w->draining)
			drain_check(w);
		if (w->e->p.request_timeout_ms)
			stall_check(w);
		if (w->e->p.idle_timeout_ms)
			idle_check(w);
		if (w->conns && (w->draining || w->e->p.request_timeout_ms ||
				 w->e->p.idle_timeout_ms))
			arm_timer(w);
		break;
	case TAG_IGNORE:
		break;
	}
}

/* Runs kicked connections (reading) and dirty ones (sending) until both
 * lists are empty. */
static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000 + (uint64_t)ts.tv_nsec;
}

/* Queued BLOCK_STATUS requests for up to BS_SLICE_NS (one at least). */
static void bs_run(struct worker *w)
{
	uint64_t end = now_ns() + BS_SLICE_NS;
	struct req *q;

	while ((q = w->bs_head)) {
		struct conn *c = q->c;

		w->bs_head = q->next;
		if (!w->bs_head)
			w->bs_tail = NULL;
		c->io_pending--;
		if (c->closing) {
			req_free(q);
			conn_maybe_destroy(c);
		} else {
			req_block_status(q);
		}
		if (now_ns() >= end)
			break;
	}
}

static void run_lists(struct worker *w)
{
	unsigned rounds;

	for (rounds = 0; rounds < 64 && (w->kick_head || w->dirty_head); rounds++) {
		struct conn *c;

		while ((c = w->kick_head)) {
			w->kick_head = c->kick_next;
			c->kicked = false;
			c->rx_ops->pump(c);
			conn_maybe_destroy(c);
		}
		while ((c = w->dirty_head)) {
			w->dirty_head = c->dirty_next;
			c->dirty = false;
			tx_flush(c);
			conn_maybe_destroy(c);
		}
	}
}

static int ring_setup(struct worker *w)
{
	static const unsigned tries[] = {
		IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_DEFER_TASKRUN,
		IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_COOP_TASKRUN,
		0,
	};
	struct io_uring_params params;
	unsigned i = 0;
	int r = -EINVAL;

	/* Valgrind (3.19) holds its big lock across io_uring_enter: the
	 * worker then waits in poll(2) on the ring (see worker_wait), which
	 * needs task work to wake the thread: plain ring flags. */
	if (w->e->valgrind)
		i = sizeof(tries) / sizeof(tries[0]) - 1;
	/* The newest flags this kernel takes; SINGLE_ISSUER binds the ring
	 * to this (the worker) thread. */
	for (; i < sizeof(tries) / sizeof(tries[0]); i++) {
		memset(&params, 0, sizeof(params));
		params.flags = IORING_SETUP_CQSIZE | tries[i];
		params.cq_entries = CQ_ENTRIES;
		r = io_uring_queue_init_params(RING_ENTRIES, &w->ring, &params);
		if (r != -EINVAL)
			break;
	}
	if (r < 0 || !w->e->p.fixed_buffers || w->e->valgrind)
		return r;
	/* Pool buffers are registered as they are made (fixed_add). */
	if (io_uring_register_buffers_sparse(&w->ring, FIXED_SLOTS) == 0) {
		w->fixed = true;
		for (i = 0; i < FIXED_SLOTS; i++)
			w->slot_free[i] = (uint16_t)(FIXED_SLOTS - 1 - i);
		w->nslot_free = FIXED_SLOTS;
	}
	return r;
}

/* Submits what is queued and waits for wait_nr completions. */
static int worker_wait(struct worker *w, unsigned wait_nr)
{
	struct pollfd pfd = { .fd = w->ring.ring_fd, .events = POLLIN };
	int r;

	if (!w->e->valgrind) {
		if (wait_nr && w->lazy) {
			/* One io_uring_enter per request, not a second one
			 * for the send's completion. */
			struct __kernel_timespec ts = { .tv_nsec = LAZY_WAIT_NS };
			struct io_uring_cqe *cqe;
			unsigned n = wait_nr + w->lazy;

			w->lazy = 0;
			return io_uring_submit_and_wait_timeout(&w->ring, &cqe, n, &ts, NULL);
		}
		w->lazy = 0;
		return io_uring_submit_and_wait(&w->ring, wait_nr);
	}
	w->lazy = 0;
	r = io_uring_submit(&w->ring);
	if (r < 0 || !wait_nr || io_uring_cq_ready(&w->ring))
		return r;
	if (poll(&pfd, 1, -1) < 0 && errno != EINTR)
		return -errno;
	return 0;
}

static void *worker_main(void *arg)
{
	struct worker *w = arg;
	char name[16];
	int r;

	snprintf(name, sizeof(name), "smcrd-io%u", w->idx);
	pthread_setname_np(pthread_self(), name);
	r = ring_setup(w);
	pthread_mutex_lock(&w->e->start_lock);
	if (r < 0 && !w->e->start_err)
		w->e->start_err = r;
	w->e->start_count++;
	pthread_cond_signal(&w->e->start_cond);
	pthread_mutex_unlock(&w->e->start_lock);
	if (r < 0)
		return NULL;
	arm_wake(w);
	for (;;) {
		struct io_uring_cqe *cqe;
		unsigned head, n = 0;

		run_lists(w);
		if (w->bs_head) {
			bs_run(w);
			run_lists(w);
		}
		if (w->draining && !w->conns && !w->kick_head && !w->dirty_head)
			break;
		r = worker_wait(w, (w->kick_head || w->dirty_head || w->bs_head) ? 0 : 1);
		/* Not waiting: with DEFER_TASKRUN the completions meanwhile
		 * (other clients' polls) are only posted when asked for. */
		if (w->bs_head && !w->e->valgrind)
			io_uring_get_events(&w->ring);
		if (r < 0 && r != -EINTR && r != -EAGAIN && r != -EBUSY && r != -ETIME) {
			log_err("worker %u: io_uring_enter: %s", w->idx, strerror(-r));
			abort();
		}
		io_uring_for_each_cqe(&w->ring, head, cqe) {
			handle_cqe(w, cqe);
			n++;
		}
		io_uring_cq_advance(&w->ring, n);
	}
	io_uring_queue_exit(&w->ring);
	return NULL;
}

static int worker_init(struct engine *e, struct worker *w, unsigned idx)
{
	w->e = e;
	w->idx = idx;
	w->mem_limit = e->p.max_memory / e->nw;
	w->addr_limit = e->p.max_memory_per_address / e->nw;
	w->evfd = eventfd(0, EFD_CLOEXEC);
	if (w->evfd < 0)
		return -errno;
	pthread_mutex_init(&w->lock, NULL);
	pthread_mutex_init(&w->stall_log.lock, NULL);
	return 0;
}

static void worker_fini(struct worker *w)
{
	struct req *q;

	close(w->evfd);
	while ((q = w->req_free)) {
		w->req_free = q->next;
		free(q);
	}
	pool_free_all(w);
	pthread_mutex_destroy(&w->stall_log.lock);
	pthread_mutex_destroy(&w->lock);
}

int engine_start(const struct engine_params *p, struct engine **out)
{
	struct engine *e;
	unsigned i, n;
	int r = 0;

	e = calloc(1, sizeof(*e));
	if (!e)
		return -ENOMEM;
	e->p = *p;
	if (!e->p.drain_idle_ms)
		e->p.drain_idle_ms = DRAIN_IDLE_MS;
	e->nw = p->threads ? p->threads : 1;
	e->valgrind = RUNNING_ON_VALGRIND;
	/* Unknown to valgrind 3.19: it would warn about each call. */
	e->no_cachestat = e->valgrind;
	/* SMCRD_RING_SOCKET=0: plain TCP by poll + recv(2)/sendmsg(2), as
	 * the other transports. */
	{
		const char *v = getenv("SMCRD_RING_SOCKET");

		e->ring_sock = !v || strcmp(v, "0") != 0;
		/* SMCRD_READ_REPLY=copy|zc: how large READ replies go out
		 * (default sendfile; zc on ring sockets only). */
		v = getenv("SMCRD_READ_REPLY");
		e->read_reply = !v ? RR_SENDFILE : !strcmp(v, "copy") ? RR_COPY :
				!strcmp(v, "zc") ? RR_ZC : RR_SENDFILE;
	}
	pthread_mutex_init(&e->start_lock, NULL);
	pthread_cond_init(&e->start_cond, NULL);
	e->w = calloc(e->nw, sizeof(*e->w));
	if (!e->w) {
		r = -ENOMEM;
		goto out_free;
	}
	e->zero_buf = mmap(NULL, ZERO_BUF_SIZE, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (e->zero_buf == MAP_FAILED) {
		r = -errno;
		goto out_free_w;
	}
	for (i = 0; i < e->nw; i++) {
		r = worker_init(e, &e->w[i], i);
		if (r < 0)
			goto out_fini;
	}
	for (n = 0; n < e->nw; n++) {
		r = -pthread_create(&e->w[n].thread, NULL, worker_main, &e->w[n]);
		if (r < 0)
			break;
		e->w[n].started = true;
	}
	/* Wait for every started worker to set up its ring. */
	pthread_mutex_lock(&e->start_lock);
	while (e->start_count < n)
		pthread_cond_wait(&e->start_cond, &e->start_lock);
	if (r == 0)
		r = e->start_err;
	pthread_mutex_unlock(&e->start_lock);
	if (r < 0) {
		log_err("io_uring setup: %s", strerror(-r));
		engine_drain(e);
		engine_stop(e);
		return r;
	}
	*out = e;
	return 0;
out_fini:
	while (i--)
		worker_fini(&e->w[i]);
	munmap(e->zero_buf, ZERO_BUF_SIZE);
out_free_w:
	free(e->w);
out_free:
	pthread_cond_destroy(&e->start_cond);
	pthread_mutex_destroy(&e->start_lock);
	free(e);
	return r;
}

/* The key of max_memory_per_address (addr_key_of_fd(); "?": not known). */
static void peer_key(struct bd_transport *t, char *out, size_t len)
{
	struct sockaddr_storage ss;
	socklen_t sl = sizeof(ss);

	if (bd_peer_addr(t, &ss, &sl) < 0) {
		snprintf(out, len, "?");
		return;
	}
	addr_key_of_fd(bd_poll_fd(t), (const struct sockaddr *)&ss, out, len);
}

int engine_add(struct engine *e, struct bd_transport *t, struct export *exp,
	       const struct nbd_server_session *s, void *owner)
{
	struct worker *w = &e->w[0];
	struct conn *c;
	unsigned i, best = UINT32_MAX;

	if (__atomic_load_n(&e->draining, __ATOMIC_ACQUIRE))
		goto out_refuse;
	c = calloc(1, sizeof(*c));
	if (!c)
		goto out_refuse;
	c->rbuf = malloc(RBUF_SIZE);
	if (!c->rbuf) {
		free(c);
		goto out_refuse;
	}
	c->t = t;
	c->owner = owner;
	peer_key(t, c->akey, sizeof(c->akey));
	c->pfd = bd_poll_fd(t);
	c->exp = exp;
	if (e->p.iostat) {
		c->st_exp = iostat_get(e->p.iostat, IOSTAT_EXPORT, exp->spec.name);
		c->st_cli = iostat_get(e->p.iostat, IOSTAT_CLIENT, c->akey);
	}
	if (bd_has(t, BD_HAS_ZC_RX)) {
		c->pins = calloc(e->p.queue_depth, sizeof(*c->pins));
		if (!c->pins) {
			free(c->rbuf);
			free(c);
			goto out_refuse;
		}
		c->rx_ops = &rx_ops_inplace;
		c->tx_ops = &tx_ops_writev;
	} else if (e->ring_sock && bd_info(t).tcp_fd >= 0) {
		c->rx_ops = &rx_ops_ring;
		c->tx_ops = &tx_ops_ring;
	} else {
		c->rx_ops = &rx_ops_copy;
		c->tx_ops = &tx_ops_writev;
	}
	nbd_tx_params_from_session(s, &c->tp);
	for (i = 0; i < e->nw; i++) {
		unsigned n = __atomic_load_n(&e->w[i].nconns, __ATOMIC_RELAXED);

		if (n < best) {
			best = n;
			w = &e->w[i];
		}
	}
	__atomic_add_fetch(&w->nconns, 1, __ATOMIC_RELAXED);
	__atomic_add_fetch(&e->conns, 1, __ATOMIC_RELAXED);
	iostat_conn(c->st_exp, 1);
	iostat_conn(c->st_cli, 1);
	log_rated(LOGRATE_SESSION, t->peer, SMCR_LOG_INFO,
		  "client %s: export '%s' (%s replies%s, worker %u)", t->peer,
		  exp->spec.name,
		  s->extended ? "extended" : s->structured ? "structured" : "simple",
		  s->base_allocation ? ", base:allocation" : "", w->idx);
	pthread_mutex_lock(&w->lock);
	if (w->drain_req) {
		pthread_mutex_unlock(&w->lock);
		__atomic_sub_fetch(&w->nconns, 1, __ATOMIC_RELAXED);
		__atomic_sub_fetch(&e->conns, 1, __ATOMIC_RELAXED);
		iostat_conn(c->st_exp, -1);
		iostat_conn(c->st_cli, -1);
		free(c->pins);
		free(c->rbuf);
		free(c);
		goto out_refuse;
	}
	c->next = w->incoming;
	w->incoming = c;
	pthread_mutex_unlock(&w->lock);
	conn_worker_wake(w);
	return 0;
out_refuse:
	bd_close(t);
	export_put(exp);
	return -ESHUTDOWN;
}

void engine_drain(struct engine *e)
{
	unsigned i;

	__atomic_store_n(&e->draining, true, __ATOMIC_RELEASE);
	for (i = 0; i < e->nw; i++) {
		pthread_mutex_lock(&e->w[i].lock);
		e->w[i].drain_req = true;
		pthread_mutex_unlock(&e->w[i].lock);
		conn_worker_wake(&e->w[i]);
	}
}

void engine_stop(struct engine *e)
{
	unsigned i;

	for (i = 0; i < e->nw; i++) {
		if (e->w[i].started)
			pthread_join(e->w[i].thread, NULL);
		worker_fini(&e->w[i]);
	}
	munmap(e->zero_buf, ZERO_BUF_SIZE);
	free(e->w);
	pthread_cond_destroy(&e->start_cond);
	pthread_mutex_destroy(&e->start_lock);
	free(e);
}

void engine_get_stats(struct engine *e, struct engine_stats *st)
{
	unsigned i;

	memset(st, 0, sizeof(*st));
	for (i = 0; i < e->nw; i++) {
		struct engine_stats *w = &e->w[i].stats;

		st->requests += __atomic_load_n(&w->requests, __ATOMIC_RELAXED);
		st->zc_writes += __atomic_load_n(&w->zc_writes, __ATOMIC_RELAXED);
		st->zc_reads += __atomic_load_n(&w->zc_reads, __ATOMIC_RELAXED);
		st->file_reads += __atomic_load_n(&w->file_reads, __ATOMIC_RELAXED);
		st->inline_writes += __atomic_load_n(&w->inline_writes, __ATOMIC_RELAXED);
		st->request_timeouts += __atomic_load_n(&w->request_timeouts, __ATOMIC_RELAXED);
		st->idle_timeouts += __atomic_load_n(&w->idle_timeouts, __ATOMIC_RELAXED);
	}
}

unsigned engine_connections(struct engine *e)
{
	return __atomic_load_n(&e->conns, __ATOMIC_RELAXED);
}
