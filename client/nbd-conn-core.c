/* SPDX-License-Identifier: BSD-3-Clause */
/* smcrbd client engine: the ground floor.  Completions, handing requests
 * to a connection (and nbdc_plug), the least loaded connection, the
 * request table and the reply parser's reset, the wait in poll(2)
 * (nbd-conn-int.h). */
#include <config.h>

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "applog.h"
#include "nbd-conn-int.h"

/* nbdc_plug(): connections of e this thread has yet to wake. */
static __thread struct {
	struct nbdc *e;
	uint32_t wake;
} plug;

/* Forgets what a reply had delivered, before the request goes out again. */
void nbdc_req_rewind(struct nbdc_req *r)
{
	r->result = 0;
	r->data_seen = 0;
	r->nspans = 0;
	r->status_seen = false;
	if (r->type == NBD_CMD_BLOCK_STATUS)
		((struct nbdc_extents *)r->buf)->n = 0;
}

/* Notes that a READ's chunk filled [start, start + len) of its buffer
 * (len > 0, the range inside the request): 0, or -EPROTO when the range
 * overlaps one a chunk filled before (the NBD protocol forbids it: the
 * first chunk's bytes would be lost, or a range left unread look read),
 * or -ENOMEM.  The first chunk that leaves part of the buffer unfilled
 * zeroes the buffer, so that a byte no chunk filled reads as zero and
 * never as what the buffer held before. */
int nbdc_req_span_add(struct nbdc_req *r, uint32_t start, uint32_t len)
{
	uint32_t end = start + len;
	unsigned lo = 0, hi = r->nspans, i;
	struct nbdc_span *s;
	bool left, right;

	if (!r->spans) {
		r->spans = r->inl;
		r->cap_spans = NBDC_SPANS_INLINE;
	}
	if (!r->nspans && (start || end != r->len))
		memset(r->buf, 0, r->len);
	s = r->spans;
	/* i: the first range that starts at or after start */
	while (lo < hi) {
		unsigned mid = lo + (hi - lo) / 2;

		if (s[mid].start < start)
			lo = mid + 1;
		else
			hi = mid;
	}
	i = lo;
	if ((i < r->nspans && s[i].start < end) || (i > 0 && s[i - 1].end > start))
		return -EPROTO;
	left = i > 0 && s[i - 1].end == start;
	right = i < r->nspans && s[i].start == end;
	if (left && right) {
		s[i - 1].end = s[i].end;
		memmove(&s[i], &s[i + 1], (r->nspans - i - 1) * sizeof(*s));
		r->nspans--;
	} else if (left) {
		s[i - 1].end = end;
	} else if (right) {
		s[i].start = start;
	} else {
		if (r->nspans == r->cap_spans) {
			unsigned cap = r->cap_spans * 4;
			struct nbdc_span *n;

			if (r->cap_spans >= NBDC_SPANS_MAX)
				return -EPROTO;
			if (cap > NBDC_SPANS_MAX)
				cap = NBDC_SPANS_MAX;
			n = malloc(cap * sizeof(*n));
			if (!n)
				return -ENOMEM;
			memcpy(n, s, r->nspans * sizeof(*n));
			if (s != r->inl)
				free(s);
			r->spans = s = n;
			r->cap_spans = cap;
		}
		memmove(&s[i + 1], &s[i], (r->nspans - i) * sizeof(*s));
		s[i].start = start;
		s[i].end = end;
		r->nspans++;
	}
	r->data_seen += len;
	return 0;
}

void nbdc_slot_release(struct nbdc_conn *c, struct nbdc_req *r)
{
	c->slots[r->slot] = NULL;
	c->free_slots[c->nfree++] = r->slot;
	c->inflight--;
	r->slot = -1;
}

void nbdc_req_complete(struct nbdc_conn *c, struct nbdc_req *r, int result)
{
	struct nbdc *e = c->e;

	ASUB(&c->load, 1);
	AADD(&e->st_completed, 1);
	if (result) {
		AADD(&e->st_errors, 1);
	} else if (r->type == NBD_CMD_READ) {
		AADD(&e->st_read, r->len);
	} else if (r->type == NBD_CMD_WRITE) {
		AADD(&e->st_written, r->len);
	}
	ASUB(&e->st_inflight, 1);
	c->completed = true;
	/* A failed READ shows zeros, never what its buffer held before. */
	if (result && r->type == NBD_CMD_READ && r->buf && r->len)
		memset(r->buf, 0, r->len);
	r->done(r->arg, result);
	if (r->spans != r->inl)
		free(r->spans);
	free(r);
}

void nbdc_turn_end(struct nbdc_conn *c)
{
	if (c->completed && c->e->turn_end)
		c->e->turn_end(c->e->turn_arg);
	c->completed = false;
}

void nbdc_conn_wake(struct nbdc_conn *c)
{
	uint64_t one = 1;

	if (write(c->evfd, &one, sizeof(one)) < 0 && errno != EAGAIN)
		log_warn("nbd: eventfd: %s", strerror(errno));
}

/* Hands requests to connection c (any thread). */
void nbdc_conn_give(struct nbdc_conn *c, struct rq *q, bool front)
{
	bool wake;
	unsigned n = q->n;

	if (!n)
		return;
	AADD(&c->load, n);
	pthread_mutex_lock(&c->lock);
	if (front) {
		rq_splice(q, &c->subq);
		c->subq = *q;
	} else {
		rq_splice(&c->subq, q);
	}
	*q = (struct rq){ 0 };
	wake = !c->wake_pending;
	c->wake_pending = true;
	pthread_mutex_unlock(&c->lock);
	if (wake && plug.e == c->e)
		plug.wake |= 1u << c->idx;
	else if (wake)
		nbdc_conn_wake(c);
}

/* The connection whose thread is in watch_ready, or NULL. */
static __thread struct nbdc_conn *watching;

struct nbdc_conn *nbdc_watching(struct nbdc *e)
{
	return watching && watching->e == e ? watching : NULL;
}

/* Calls watch_ready when poll saw the watched descriptor readable. */
void nbdc_watch_turn(struct nbdc_conn *c)
{
	int r;

	if (!c->watch_ready || ALOAD(&c->watch_fd) < 0)
		return;
	watching = c;
	r = c->e->watch_ready(c->e->turn_arg, c->idx);
	watching = NULL;
	c->watch_ready = r > 0;
	if (r < 0)
		ASTORE(&c->watch_fd, -1);
}

void nbdc_plug(struct nbdc *e)
{
	plug.e = e;
	plug.wake = 0;
}

void nbdc_unplug(struct nbdc *e)
{
	unsigned i;

	plug.e = NULL;
	for (i = 0; i < e->nconns; i++)
		if (plug.wake & (1u << i))
			nbdc_conn_wake(&e->conns[i]);
	plug.wake = 0;
}

/* The connection that is up with the least load (not 'except'), or NULL. */
struct nbdc_conn *nbdc_pick_up(struct nbdc *e, struct nbdc_conn *except)
{
	struct nbdc_conn *best = NULL;
	unsigned i, start = AADD(&e->rr, 1), bload = 0;

	for (i = 0; i < e->nconns; i++) {
		struct nbdc_conn *c = &e->conns[(start + i) % e->nconns];
		unsigned l;

		if (c == except || ALOAD(&c->state) != C_UP)
			continue;
		l = ALOAD(&c->load);
		if (!best || l < bload) {
			best = c;
			bload = l;
		}
	}
	return best;
}

void nbdc_rx_reset(struct rx *rx)
{
	rx->step = RX_HDR;
	rx->dst = rx->hdr;
	rx->need = 16;
	rx->got = 0;
	rx->req = NULL;
	rx->rpos = rx->rend = 0;
}

void nbdc_slots_reset(struct nbdc_conn *c)
{
	unsigned i;

	for (i = 0; i < NBDC_SLOTS; i++) {
		c->slots[i] = NULL;
		c->free_slots[i] = (int)(NBDC_SLOTS - 1 - i);
	}
	c->nfree = NBDC_SLOTS;
	c->inflight = 0;
}

void nbdc_sleep_on(struct nbdc_conn *c, struct pollfd *extra, int timeout_ms)
{
	struct pollfd p[3];
	nfds_t n = 0, w = 0;
	int wfd = ALOAD(&c->watch_fd);

	if (extra)
		p[n++] = *extra;
	if (wfd >= 0) {
		w = n;
		p[n].fd = wfd;
		p[n++].events = POLLIN;
	}
	p[n].fd = c->evfd;
	p[n].events = POLLIN;
	n++;
	if (poll(p, n, timeout_ms) < 0 && errno != EINTR) {
		log_warn("nbd: poll: %s", strerror(errno));
		return;
	}
	if (wfd >= 0 && p[w].revents)
		c->watch_ready = true;
	if (p[n - 1].revents & POLLIN) {
		uint64_t junk;

		if (read(c->evfd, &junk, sizeof(junk)) < 0)
			junk = 0;
	}
}
