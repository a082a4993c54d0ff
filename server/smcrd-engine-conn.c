/* SPDX-License-Identifier: BSD-3-Clause */
/* smcrd engine, ground floor: the buffer pool, the worker's lists, SQE
 * submission (polls, the ring socket's send), a connection's closing, the
 * zero-copy window.  Calls nothing of the rooms above
 * (smcrd-engine-int.h). */
#include <config.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/mman.h>

#include "smcrd-engine-int.h"

/* --- buffer pool ---------------------------------------------------------- */

unsigned pool_class(uint64_t len)
{
	unsigned shift = POOL_MIN_SHIFT;

	while ((UINT64_C(1) << shift) < len)
		shift++;
	return shift - POOL_MIN_SHIFT;
}

/* A buffer in the pool's free list. */
struct pool_buf {
	void *next;
	int slot;
};

static void *buf_alloc_fresh(unsigned cls)
{
	size_t size = (size_t)1 << (cls + POOL_MIN_SHIFT);
	void *p;

	if (cls + POOL_MIN_SHIFT >= POOL_MMAP_SHIFT) {
		p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
			 -1, 0);
		return p == MAP_FAILED ? NULL : p;
	}
	if (posix_memalign(&p, 4096, size))
		return NULL;
	/* Defined contents: io_uring fills buffers behind valgrind's back. */
	memset(p, 0, size);
	return p;
}

static void buf_release(unsigned cls, void *p)
{
	size_t size = (size_t)1 << (cls + POOL_MIN_SHIFT);

	if (cls + POOL_MIN_SHIFT >= POOL_MMAP_SHIFT)
		munmap(p, size);
	else
		free(p);
}

/* Registers a new pool buffer with the ring; -1 when there is no slot or
 * the kernel refuses (RLIMIT_MEMLOCK): the buffer is used unregistered. */
static int fixed_add(struct worker *w, void *p, size_t size)
{
	struct iovec iov = { .iov_base = p, .iov_len = size };
	int slot, r;

	if (!w->fixed || !w->nslot_free)
		return -1;
	slot = w->slot_free[--w->nslot_free];
	r = io_uring_register_buffers_update_tag(&w->ring, (unsigned)slot, &iov, NULL, 1);
	if (r < 0) {
		w->slot_free[w->nslot_free++] = (uint16_t)slot;
		if (r == -ENOMEM || r == -EPERM) {
			/* Pinned memory is over the limit: stop trying. */
			log_info("worker %u: io_uring fixed buffers: %s: using plain buffers",
				 w->idx, strerror(-r));
			w->fixed = false;
		}
		return -1;
	}
	return slot;
}

/* Before the buffer goes back to the system. */
static void fixed_del(struct worker *w, int slot)
{
	struct iovec iov = { .iov_base = NULL, .iov_len = 0 };

	if (slot < 0)
		return;
	io_uring_register_buffers_update_tag(&w->ring, (unsigned)slot, &iov, NULL, 1);
	w->slot_free[w->nslot_free++] = (uint16_t)slot;
}

/* NULL with *blocked set: over the memory limit, try again later. */
void *pool_get(struct worker *w, uint64_t len, unsigned *cls_out, int *slot_out,
	       bool *blocked)
{
	unsigned cls = pool_class(len);
	size_t size = (size_t)1 << (cls + POOL_MIN_SHIFT);
	struct pool_buf *b;
	void *p;

	*blocked = false;
	if (w->mem_used && w->mem_used + size > w->mem_limit) {
		*blocked = true;
		return NULL;
	}
	p = w->pool[cls];
	if (p) {
		b = p;
		w->pool[cls] = b->next;
		w->pool_cached -= size;
		*slot_out = b->slot;
	} else {
		p = buf_alloc_fresh(cls);
		if (!p)
			return NULL;
		*slot_out = fixed_add(w, p, size);
	}
	w->mem_used += size;
	*cls_out = cls;
	return p;
}

void pool_put(struct worker *w, unsigned cls, void *p, int slot)
{
	size_t size = (size_t)1 << (cls + POOL_MIN_SHIFT);
	struct pool_buf *b = p;

	w->mem_used -= size;
	if (w->pool_cached + size <= POOL_CACHE_MAX) {
		b->next = w->pool[cls];
		b->slot = slot;
		w->pool[cls] = p;
		w->pool_cached += size;
	} else {
		fixed_del(w, slot);
		buf_release(cls, p);
	}
}

/* After the ring is gone (it dropped its registrations). */
void pool_free_all(struct worker *w)
{
	unsigned cls;

	for (cls = 0; cls < POOL_CLASSES; cls++) {
		while (w->pool[cls]) {
			struct pool_buf *b = w->pool[cls];

			w->pool[cls] = b->next;
			buf_release(cls, b);
		}
	}
	w->pool_cached = 0;
}

/* --- lists ------------------------------------------------------------------ */

void conn_kick(struct conn *c)
{
	if (c->kicked || c->closing)
		return;
	c->kicked = true;
	c->kick_next = c->w->kick_head;
	c->w->kick_head = c;
}

void conn_dirty(struct conn *c)
{
	if (c->dirty || c->closing)
		return;
	c->dirty = true;
	c->dirty_next = c->w->dirty_head;
	c->w->dirty_head = c;
}

/* The share of c's address on its worker, created at the first
 * connection; -ENOMEM. */
int conn_share_get(struct conn *c)
{
	struct worker *w = c->w;
	unsigned h = 5381;
	const char *k;
	struct addr_share *a;

	for (k = c->akey; *k; k++)
		h = h * 33 + (unsigned char)*k;
	h %= ADDR_BUCKETS;
	for (a = w->addr_tab[h]; a; a = a->next)
		if (!strcmp(a->key, c->akey))
			break;
	if (!a) {
		a = calloc(1, sizeof(*a));
		if (!a)
			return -ENOMEM;
		memcpy(a->key, c->akey, sizeof(a->key));
		a->next = w->addr_tab[h];
		w->addr_tab[h] = a;
	}
	a->refs++;
	c->as = a;
	return 0;
}

/* After the connection's buffers are back. */
void conn_share_put(struct conn *c)
{
	struct worker *w = c->w;
	struct addr_share *a = c->as, **pp;
	unsigned h;

	if (!a || --a->refs)
		return;
	for (h = 0; h < ADDR_BUCKETS; h++)
		for (pp = &w->addr_tab[h]; *pp; pp = &(*pp)->next)
			if (*pp == a) {
				*pp = a->next;
				free(a);
				return;
			}
}

/* The connection reads no more requests until buffers (or io_uring
 * slots) of this worker are free again. */
void conn_mem_wait(struct conn *c, const char *what)
{
	struct worker *w = c->w;
	uint64_t now;

	if (c->mem_blocked)
		return;
	now = now_ms();
	if (now - w->limit_logged_ms > 10000) {
		w->limit_logged_ms = now;
		log_info("worker %u: %s limit reached: clients wait (%llu bytes in use, "
			 "%u I/Os in flight)", w->idx, what, (unsigned long long)w->mem_used,
			 w->io_inflight);
	}
	c->mem_blocked = true;
	c->mem_next = NULL;
	if (w->mem_tail)
		w->mem_tail->mem_next = c;
	else
		w->mem_head = c;
	w->mem_tail = c;
}

void conn_mem_wake(struct worker *w)
{
	struct conn *c = w->mem_head;

	w->mem_head = w->mem_tail = NULL;
	while (c) {
		struct conn *next = c->mem_next;

		c->mem_blocked = false;
		conn_kick(c);
		c = next;
	}
}

/* Off the memory wait list (the connection goes). */
void conn_mem_unlink(struct conn *c)
{
	struct worker *w = c->w;
	struct conn **pp, *prev = NULL;

	if (!c->mem_blocked)
		return;
	for (pp = &w->mem_head; *pp; prev = *pp, pp = &(*pp)->mem_next) {
		if (*pp == c) {
			*pp = c->mem_next;
			if (w->mem_tail == c)
				w->mem_tail = prev;
			break;
		}
	}
	c->mem_blocked = false;
}

/* --- submission ------------------------------------------------------------ */

struct io_uring_sqe *conn_get_sqe(struct worker *w)
{
	struct io_uring_sqe *sqe;

	while (!(sqe = io_uring_get_sqe(&w->ring))) {
		int r = io_uring_submit(&w->ring);

		if (r < 0 && r != -EINTR && r != -EAGAIN && r != -EBUSY) {
			log_err("worker %u: io_uring_submit: %s", w->idx, strerror(-r));
			abort();
		}
	}
	return sqe;
}

void conn_arm_poll_in(struct conn *c)
{
	struct io_uring_sqe *sqe = conn_get_sqe(c->w);

	io_uring_prep_poll_multishot(sqe, c->pfd, (unsigned)bd_poll_events(c->t, BD_WANT_READ));
	io_uring_sqe_set_data64(sqe, ud(c, TAG_POLL_IN));
	c->poll_in = true;
	c->io_pending++;
}

void conn_arm_poll_out(struct conn *c)
{
	struct io_uring_sqe *sqe;

	if (c->poll_out || c->closing)
		return;
	sqe = conn_get_sqe(c->w);
	io_uring_prep_poll_add(sqe, c->pfd, (unsigned)bd_poll_events(c->t, BD_WANT_WRITE));
	io_uring_sqe_set_data64(sqe, ud(c, TAG_POLL_OUT));
	c->poll_out = true;
	c->io_pending++;
}

/* Ring socket: sendmsg of iov[cnt] (copied) as one SQE; zero-copy (the
 * buffers are held until the kernel's notification) if zc. */
void conn_arm_send(struct conn *c, const struct iovec *iov, int cnt, bool zc)
{
	struct io_uring_sqe *sqe = conn_get_sqe(c->w);

	memcpy(c->tx_iov, iov, (size_t)cnt * sizeof(*iov));
	memset(&c->tx_msg, 0, sizeof(c->tx_msg));
	c->tx_msg.msg_iov = c->tx_iov;
	c->tx_msg.msg_iovlen = (size_t)cnt;
	if (zc)
		io_uring_prep_sendmsg_zc(sqe, c->pfd, &c->tx_msg, MSG_NOSIGNAL | MSG_WAITALL);
	else
		io_uring_prep_sendmsg(sqe, c->pfd, &c->tx_msg, MSG_NOSIGNAL | MSG_WAITALL);
	c->tx_zc = zc;
	c->tx_zc_res = 0;
	io_uring_sqe_set_data64(sqe, ud(c, TAG_SEND));
	c->tx_busy = true;
	c->io_pending++;
}

/* Wakes w's loop (its eventfd): work handed over by another thread. */
void conn_worker_wake(struct worker *w)
{
	uint64_t one = 1;

	if (write(w->evfd, &one, sizeof(one)) < 0)
		log_warn("worker %u: eventfd: %s", w->idx, strerror(errno));
}

static void cancel_ud(struct worker *w, uint64_t data)
{
	struct io_uring_sqe *sqe = conn_get_sqe(w);

	io_uring_prep_cancel64(sqe, data, 0);
	io_uring_sqe_set_data64(sqe, ud(w, TAG_IGNORE));
}

/* --- connection life ----------------------------------------------------- */

/* Stops everything; the connection goes once its SQEs have completed. */
void conn_close(struct conn *c, const char *why)
{
	if (c->closing)
		return;
	if (why)
		log_rated(LOGRATE_SESSION, c->t->peer, SMCR_LOG_INFO, "client %s: %s",
			  c->t->peer, why);
	c->closing = true;
	c->rx_stop = true;
	if (c->poll_in)
		cancel_ud(c->w, ud(c, TAG_POLL_IN));
	if (c->poll_out)
		cancel_ud(c->w, ud(c, TAG_POLL_OUT));
	if (c->rx_armed)
		cancel_ud(c->w, ud(c, TAG_RECV));
	if (c->tx_busy)
		cancel_ud(c->w, ud(c, TAG_SEND));
	/* Destroyed at a safe point (smcrd-engine.c's conn_maybe_destroy). */
}

/* Closes once nothing is left to do (after DISC, EOF, or when draining). */
void conn_maybe_finish(struct conn *c)
{
	if (c->closing || c->inflight || c->tx_head)
		return;
	if (c->rx_stop)
		conn_close(c, NULL);
}

/* --- zero-copy receive -------------------------------------------------- */

/* Gives the transport back what is parsed and not pinned. */
void conn_zc_release(struct conn *c)
{
	unsigned cap = c->w->e->p.queue_depth;
	uint64_t target;
	int r;

	while (c->pin_cnt && c->pins[c->pin_head].done) {
		c->pin_head = (c->pin_head + 1) % cap;
		c->pin_cnt--;
	}
	target = c->pin_cnt ? c->pins[c->pin_head].start : c->rx_pos;
	if (target <= c->rx_cons || c->closing)
		return;
	r = bd_rx_consume(c->t, (size_t)(target - c->rx_cons));
	if (r < 0) {
		char why[96];

		snprintf(why, sizeof(why), "consume failed: %s", strerror(-r));
		conn_close(c, why);
		return;
	}
	c->rx_cons = target;
}

/* The payload of q is on disk (or failed): its bytes may go. */
void conn_zc_unpin(struct req *q)
{
	struct conn *c = q->c;

	if (!q->zc)
		return;
	q->zc = false;
	c->pins[q->pin].done = true;
	conn_zc_release(c);
	/* Window space came free: there may be more to read. */
	conn_kick(c);
}

/* Copies len bytes between buf and a two-piece window at off: into the
 * window when put, out of it otherwise. */
static void win_xfer(const struct iovec win[2], uint64_t off, uint8_t *buf, size_t len,
		     bool put)
{
	int i;

	for (i = 0; i < 2 && len; i++) {
		uint8_t *w;
		size_t n;

		if (off >= win[i].iov_len) {
			off -= win[i].iov_len;
			continue;
		}
		n = win[i].iov_len - off;
		if (n > len)
			n = len;
		w = (uint8_t *)win[i].iov_base + off;
		memcpy(put ? w : buf, put ? buf : w, n);
		buf += n;
		len -= n;
		off = 0;
	}
}

/* Copies len bytes at off of a two-piece window. */
void conn_win_copy(const struct iovec win[2], uint64_t off, void *dst, size_t len)
{
	win_xfer(win, off, dst, len, false);
}

/* Copies len bytes into a two-piece window at off. */
void conn_win_put(const struct iovec win[2], uint64_t off, const void *src, size_t len)
{
	win_xfer(win, off, (uint8_t *)src, len, true);
}

/* The window pieces covering [off, off + len). */
int conn_win_slice(const struct iovec win[2], uint64_t off, size_t len, struct iovec out[2])
{
	int i, cnt = 0;

	for (i = 0; i < 2 && len; i++) {
		size_t n;

		if (off >= win[i].iov_len) {
			off -= win[i].iov_len;
			continue;
		}
		n = win[i].iov_len - off;
		if (n > len)
			n = len;
		out[cnt].iov_base = (uint8_t *)win[i].iov_base + off;
		out[cnt].iov_len = n;
		cnt++;
		len -= n;
		off = 0;
	}
	if (cnt < 2) {
		out[cnt].iov_base = NULL;
		out[cnt].iov_len = 0;
	}
	return cnt;
}

/* The remaining pieces of a zero-copy WRITE after done bytes. */
int conn_zc_remaining(struct req *q)
{
	uint64_t skip = q->done;
	int i, cnt = 0;

	for (i = 0; i < 2; i++) {
		if (skip >= q->zc_iov[i].iov_len) {
			skip -= q->zc_iov[i].iov_len;
			continue;
		}
		q->zc_cur[cnt].iov_base = (uint8_t *)q->zc_iov[i].iov_base + skip;
		q->zc_cur[cnt].iov_len = q->zc_iov[i].iov_len - skip;
		skip = 0;
		cnt++;
	}
	return cnt;
}

