/* SPDX-License-Identifier: BSD-3-Clause */
/* smcrbd tests: an in-memory wire between two link ends. */
#include <config.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "memwire.h"

struct memwire_op {
	struct memwire_op *next;
	bool is_write;
	bool signaled;			/* completes into the CQ */
	bool report;			/* the owner wants the completion */
	unsigned int flags;		/* smcr_link_wr_flags() */
	int status;			/* of a completion in cq */
	uint64_t seq;			/* its send queue slot's */
	uint64_t wr_id;
	uint64_t raddr;
	uint32_t rkey;
	uint32_t len;
	uint8_t data[];
};

static struct memwire_end *end_of(struct smcr_link *link)
{
	return (struct memwire_end *)link;	/* link is the first member */
}

/* A doorbell rings for what was posted since the last: its work
 * requests are kept as the last chain. */
static void doorbell(struct memwire_end *e)
{
	unsigned int n = e->batch_n;

	e->link.doorbells++;
	memcpy(e->chain, e->batch_log, sizeof(e->chain));
	e->chain_n = n;
	if (n && e->batch_last_write)
		e->chains_write_last++;
	e->batch_n = 0;
}

static unsigned int sq_used(const struct memwire_end *e)
{
	return (unsigned int)(e->sq_head - e->sq_tail);
}

/* A completion of the work request in slot seq (signaled or flushed):
 * its slot and those of the unsignaled ones before it are free. */
static void sq_done(struct memwire_end *e, uint64_t seq)
{
	if (seq + 1 > e->sq_tail)
		e->sq_tail = seq + 1;
}

/* The slots of delivered work requests that no completion freed yet. */
static void sq_note_held(struct memwire_end *e)
{
	unsigned int held = sq_used(e) - e->queued;

	if (held > e->sq_done_held_max)
		e->sq_done_held_max = held;
}

static int enqueue(struct memwire_end *e, struct memwire_op *op, bool want_done)
{
	struct memwire_wr *w;

	if (e->failed || e->refuse_posts || e->link.state == SMCR_LINK_FAILED) {
		free(op);
		return -ENOTCONN;
	}
	if (sq_used(e) >= e->sq_depth) {
		e->sq_refused++;
		free(op);
		return -EAGAIN;
	}
	op->flags = smcr_link_wr_flags(&e->link, !op->is_write, op->len, want_done);
	op->signaled = op->flags & SMCR_WR_SIGNALED;
	op->report = want_done;
	op->seq = e->sq_head++;
	if (sq_used(e) > e->sq_max_used)
		e->sq_max_used = sq_used(e);
	op->next = NULL;
	if (e->tail)
		e->tail->next = op;
	else
		e->head = op;
	e->tail = op;
	e->queued++;
	if (e->batch_n < MEMWIRE_CHAIN_LOG) {
		w = &e->batch_log[e->batch_n];
		w->is_write = op->is_write;
		w->flags = op->flags;
		w->len = op->len;
	}
	e->batch_n++;
	e->batch_last_write = op->is_write;
	if (e->batch)
		e->batch_ops++;
	else
		doorbell(e);
	return 0;
}

static void mw_post_begin(struct smcr_link *link)
{
	end_of(link)->batch++;
}

static void mw_post_end(struct smcr_link *link)
{
	struct memwire_end *e = end_of(link);

	if (!e->batch) {
		fprintf(stderr, "memwire: post_end without post_begin\n");
		abort();
	}
	if (--e->batch == 0 && e->batch_ops) {
		doorbell(e);
		e->batch_ops = 0;
	}
}

/* The wire moves only what a doorbell rang for. */
static void batch_closed(const struct memwire_end *e)
{
	if (e->batch) {
		fprintf(stderr, "memwire: link %u delivers inside a post batch\n",
			e->link.link_id);
		abort();
	}
}

static int mw_post_write(struct smcr_link *link, const struct smcr_sge *sge,
			 unsigned int nsge, uint64_t raddr, uint32_t rkey,
			 uint64_t wr_id, bool signaled)
{
	uint32_t len = 0, off = 0;
	struct memwire_op *op;
	unsigned int i;

	for (i = 0; i < nsge; i++)
		len += sge[i].len;
	op = malloc(sizeof(*op) + len);
	if (!op)
		return -ENOMEM;
	for (i = 0; i < nsge; i++) {
		memcpy(op->data + off, sge[i].addr, sge[i].len);
		off += sge[i].len;
	}
	op->is_write = true;
	op->wr_id = wr_id;
	op->raddr = raddr;
	op->rkey = rkey;
	op->len = len;
	return enqueue(end_of(link), op, signaled);
}

static int mw_post_send(struct smcr_link *link, const void *msg, uint64_t wr_id)
{
	struct memwire_op *op = malloc(sizeof(*op) + SMCR_MSG_LEN);

	if (!op)
		return -ENOMEM;
	memcpy(op->data, msg, SMCR_MSG_LEN);
	op->is_write = false;
	op->wr_id = wr_id;
	op->len = SMCR_MSG_LEN;
	return enqueue(end_of(link), op, true);
}

/* SMC-Rv2: one LLC message of 45..8192 bytes, delivered whole. */
static int mw_post_send_long(struct smcr_link *link, const void *msg, uint32_t len,
			     uint64_t wr_id)
{
	struct memwire_op *op;

	if (len <= SMCR_MSG_LEN || len > 8192)
		return -EINVAL;
	op = malloc(sizeof(*op) + len);
	if (!op)
		return -ENOMEM;
	memcpy(op->data, msg, len);
	op->is_write = false;
	op->wr_id = wr_id;
	op->len = len;
	return enqueue(end_of(link), op, true);
}

static void report_down(struct memwire_end *e)
{
	if (e->failed)
		return;
	e->failed = true;
	/* Like link_verbs: the link is FAILED before the owner hears of it. */
	e->link.state = SMCR_LINK_FAILED;
	if (e->link.handler->down)
		e->link.handler->down(&e->link, -EIO);
}

static void cq_add(struct memwire_end *e, struct memwire_op *op, int status);

/* Everything queued completes with a flush error, unsignaled work
 * requests too (as on a QP in error); the owner hears of what it asked
 * for. */
static void flush_all(struct memwire_end *e)
{
	struct memwire_op *op;

	while ((op = e->head)) {
		e->head = op->next;
		e->queued--;
		e->flushed++;
		if (!op->signaled)
			e->flushed_unsignaled++;
		if (e->sched) {
			/* Behind the completions already in the cq. */
			cq_add(e, op, -EIO);
			continue;
		}
		sq_done(e, op->seq);
		if (op->report) {
			if (op->is_write && e->link.handler->write_done)
				e->link.handler->write_done(&e->link, op->wr_id, -EIO);
			else if (!op->is_write && e->link.handler->send_done)
				e->link.handler->send_done(&e->link, op->wr_id, -EIO);
		}
		free(op);
	}
	e->tail = NULL;
}

static void mw_fail(struct smcr_link *link)
{
	memwire_fault(end_of(link), MEMWIRE_CUT);
}

static unsigned int mw_sq_free(struct smcr_link *link)
{
	struct memwire_end *e = end_of(link);

	return sq_used(e) >= e->sq_depth ? 0 : e->sq_depth - sq_used(e);
}

static void poll_rx(struct memwire_end *e);
static void poll_cq(struct memwire_end *e);

/* Scheduled mode: what an RNIC's CQ holds for this end is handled now (as
 * the link group does before a failover validation). */
static int mw_poll(struct smcr_link *link)
{
	struct memwire_end *e = end_of(link);
	int n = 0;

	if (e->polling)
		return 0;
	e->polling = true;
	while (e->rx_head || e->cq_head) {
		if (e->rx_head)
			poll_rx(e);
		else
			poll_cq(e);
		n++;
	}
	e->polling = false;
	return n;
}

/* A failed end whose QP would still acknowledge the peer (e->acking). */
static bool mw_acking(struct smcr_link *link)
{
	struct memwire_end *e = end_of(link);

	return e->acking && e->failed;
}

static bool mw_acks_late(const struct smcr_link *link)
{
	const struct memwire_end *e = (const struct memwire_end *)link;

	return e->acking && e->failed;
}

static void mw_ack_off(struct smcr_link *link)
{
	struct memwire_end *e = end_of(link);

	e->acking = false;
	e->ack_offs++;
}

static void mw_want_send_done(struct smcr_link *link)
{
	end_of(link)->cq_armed = true;
}

static const struct smcr_link_ops memwire_ops = {
	.want_send_done = mw_want_send_done,
	.acking = mw_acking,
	.acks_late = mw_acks_late,
	.ack_off = mw_ack_off,
	.poll = mw_poll,
	.post_write = mw_post_write,
	.post_send = mw_post_send,
	.fail = mw_fail,
	.sq_free = mw_sq_free,
	.post_send_long = mw_post_send_long,
	.post_begin = mw_post_begin,
	.post_end = mw_post_end,
};

void memwire_init(struct memwire_end *e, unsigned int sq_depth,
		  const struct smcr_link_handler *h, void *arg)
{
	memset(e, 0, sizeof(*e));
	e->sq_depth = sq_depth;
	/* As a verbs link on rxe. */
	e->link.max_inline = 64;
	e->link.signal_every = sq_depth / 4 ? sq_depth / 4 : 1;
	e->link.ops = &memwire_ops;
	e->link.handler = h;
	e->link.handler_arg = arg;
	e->link.state = SMCR_LINK_INACTIVE;
}

void memwire_connect(struct memwire_end *e, struct memwire_end *peer)
{
	e->peer = peer;
}

void memwire_pair(struct memwire_end *a, struct memwire_end *b,
		  uint8_t link_id, uint8_t slot, unsigned int sq_depth,
		  const struct smcr_link_handler *ha, void *arga,
		  const struct smcr_link_handler *hb, void *argb)
{
	memwire_init(a, sq_depth, ha, arga);
	memwire_init(b, sq_depth, hb, argb);
	a->peer = b;
	b->peer = a;
	a->link.link_id = b->link.link_id = link_id;
	a->link.slot = b->link.slot = slot;
	a->link.state = b->link.state = SMCR_LINK_ACTIVE;
}

void memwire_add_mr(struct memwire_end *e, void *base, uint64_t len, uint32_t rkey)
{
	struct memwire_mr *mr;
	unsigned int i;

	for (i = 0; i < e->nmrs; i++)
		if (e->mrs[i].rkey == rkey)
			return;
	if (e->nmrs >= sizeof(e->mrs) / sizeof(e->mrs[0]))
		abort();
	mr = &e->mrs[e->nmrs++];

	mr->base = base;
	mr->len = len;
	mr->rkey = rkey;
}

/* The peer's memory at raddr/len under rkey, or NULL. */
static uint8_t *remote_mem(struct memwire_end *peer, uint64_t raddr,
			   uint32_t len, uint32_t rkey)
{
	unsigned int i;

	for (i = 0; i < peer->nmrs; i++) {
		struct memwire_mr *mr = &peer->mrs[i];
		uint64_t base = (uint64_t)(uintptr_t)mr->base;

		if (mr->rkey == rkey && raddr >= base && raddr + len <= base + mr->len)
			return (uint8_t *)(uintptr_t)raddr;
	}
	return NULL;
}

/* Queue helpers of scheduled mode. */
static void q_add(struct memwire_op **head, struct memwire_op **tail,
		  struct memwire_op *op)
{
	op->next = NULL;
	if (*tail)
		(*tail)->next = op;
	else
		*head = op;
	*tail = op;
}

static struct memwire_op *q_take(struct memwire_op **head, struct memwire_op **tail)
{
	struct memwire_op *op = *head;

	if (op) {
		*head = op->next;
		if (!*head)
			*tail = NULL;
	}
	return op;
}

/* op's completion waits in e's cq (op itself is reused or freed). */
static void cq_add(struct memwire_end *e, struct memwire_op *op, int status)
{
	op->status = status;
	q_add(&e->cq_head, &e->cq_tail, op);
	e->ncq++;
}

static uint8_t *remote_mem(struct memwire_end *peer, uint64_t raddr,
			   uint32_t len, uint32_t rkey);

/* A WRITE reaches the peer's memory (unless place is false).  A remote
 * access error kills the QP, as in RC: op is freed, the end cut, -EFAULT. */
static int place_write(struct memwire_end *e, struct memwire_op *op, bool place)
{
	uint8_t *dst = remote_mem(e->peer, op->raddr, op->len, op->rkey);

	if (!dst) {
		e->bad_rkey++;
		sq_done(e, op->seq);
		free(op);
		memwire_fault(e, MEMWIRE_CUT);
		return -EFAULT;
	}
	if (place)
		memcpy(dst, op->data, op->len);
	return 0;
}

/* Scheduled mode: op (taken off e's send queue) reaches the peer. */
static int deliver_sched(struct memwire_end *e, struct memwire_op *op, bool place)
{
	struct memwire_op *c;

	if (op->is_write) {
		if (place_write(e, op, place) < 0)
			return memwire_step(e) + 1;
		e->delivered++;
		if (op->signaled)
			cq_add(e, op, 0);
		else
			free(op);
		sq_note_held(e);
		return 1;
	}
	/* A send: the message waits in the peer's rx queue, its completion
	 * (a copy without the payload) in ours. */
	c = malloc(sizeof(*c));
	if (!c)
		abort();
	*c = *op;
	c->len = 0;
	cq_add(e, c, 0);
	e->delivered++;
	sq_note_held(e);
	if (place) {
		q_add(&e->peer->rx_head, &e->peer->rx_tail, op);
		e->peer->nrx++;
	} else {
		free(op);
	}
	return 1;
}

int memwire_step(struct memwire_end *e)
{
	struct memwire_op *op = e->head;
	const struct smcr_link_handler *h = e->link.handler;
	bool place = true;

	if (!op)
		return 0;
	batch_closed(e);
	if (e->fault == MEMWIRE_BLACKHOLE || !e->peer) {
		e->head = op->next;
		if (!e->head)
			e->tail = NULL;
		e->queued--;
		sq_done(e, op->seq);	/* gone without a trace */
		free(op);
		return 1;
	}
	if (e->fault == MEMWIRE_CUT) {
		report_down(e);
		flush_all(e);
		if (e->peer->peer == e) {
			e->peer->fault = MEMWIRE_CUT;
			report_down(e->peer);
			flush_all(e->peer);
		}
		return 1;
	}
	e->head = op->next;
	if (!e->head)
		e->tail = NULL;
	e->queued--;
	if (e->fault == MEMWIRE_ACK_NO_PLACE)
		place = false;
	if (e->sched)
		return deliver_sched(e, op, place);
	if (op->is_write) {
		if (place_write(e, op, place) < 0)
			return memwire_step(e) + 1;
		if (op->signaled)
			sq_done(e, op->seq);
		else
			sq_note_held(e);
		if (op->report && h->write_done)
			h->write_done(&e->link, op->wr_id, 0);
	} else {
		const struct smcr_link_handler *ph = e->peer->link.handler;

		if (place && op->len > SMCR_MSG_LEN && ph->recv_long) {
			e->peer->link.recvs++;
			ph->recv_long(&e->peer->link, op->data, op->len);
		} else if (place && ph->recv) {
			e->peer->link.recvs++;
			ph->recv(&e->peer->link, op->data);
		}
		sq_done(e, op->seq);
		if (h->send_done)
			h->send_done(&e->link, op->wr_id, 0);
	}
	e->delivered++;
	free(op);
	return 1;
}

void memwire_fault(struct memwire_end *e, enum memwire_fault f)
{
	e->fault = f;
	if ((f == MEMWIRE_CUT || f == MEMWIRE_BLACKHOLE) && e->peer)
		e->peer->fault = f;
}

unsigned long memwire_run(struct memwire_end **ends, unsigned int n)
{
	unsigned long total = 0, progress;
	unsigned int i;

	do {
		progress = 0;
		for (i = 0; i < n; i++)
			progress += (unsigned long)memwire_step(ends[i]);
		total += progress;
	} while (progress);
	return total;
}

void memwire_free(struct memwire_end *e)
{
	struct memwire_op *op;

	while ((op = e->head)) {
		e->head = op->next;
		free(op);
	}
	e->tail = NULL;
	e->queued = 0;
	e->sq_tail = e->sq_head;
	while ((op = q_take(&e->rx_head, &e->rx_tail)))
		free(op);
	while ((op = q_take(&e->cq_head, &e->cq_tail)))
		free(op);
	e->nrx = e->ncq = 0;
}

/* ---- the scheduler ------------------------------------------------------ */

void memwire_sched_init(struct memwire_sched *ms, struct memwire_end **ends,
			unsigned int n, uint64_t seed)
{
	unsigned int i;

	memset(ms, 0, sizeof(*ms));
	ms->ends = ends;
	ms->n = n;
	ms->rng = seed * 0x9E3779B97F4A7C15ull + 1;
	ms->w_deliver = ms->w_rx = ms->w_cq = ms->w_hook = 1;
	for (i = 0; i < n; i++)
		ends[i]->sched = true;
}

uint32_t memwire_sched_rand(struct memwire_sched *ms)
{
	/* xorshift64* */
	ms->rng ^= ms->rng >> 12;
	ms->rng ^= ms->rng << 25;
	ms->rng ^= ms->rng >> 27;
	return (uint32_t)((ms->rng * 0x2545F4914F6CDD1Dull) >> 32);
}

unsigned int memwire_pending(const struct memwire_end *e)
{
	return e->queued + e->nrx + e->ncq;
}

/* Hands e's next received message to its handler. */
static void poll_rx(struct memwire_end *e)
{
	struct memwire_op *op = q_take(&e->rx_head, &e->rx_tail);
	const struct smcr_link_handler *h = e->link.handler;

	e->nrx--;
	if (op->len > SMCR_MSG_LEN && h->recv_long) {
		e->link.recvs++;
		h->recv_long(&e->link, op->data, op->len);
	} else if (h->recv) {
		e->link.recvs++;
		h->recv(&e->link, op->data);
	}
	free(op);
}

/* Hands e's next completion to its handler. */
static void poll_cq(struct memwire_end *e)
{
	struct memwire_op *op = q_take(&e->cq_head, &e->cq_tail);
	const struct smcr_link_handler *h = e->link.handler;

	e->ncq--;
	sq_done(e, op->seq);
	if (!op->report)
		;		/* a forced signal, or an unsignaled one's flush */
	else if (op->is_write && h->write_done)
		h->write_done(&e->link, op->wr_id, op->status);
	else if (!op->is_write && h->send_done)
		h->send_done(&e->link, op->wr_id, op->status);
	free(op);
}

static bool has(const struct memwire_end *e, int kind)
{
	switch (kind) {
	case MEMWIRE_EV_DELIVER: return e->head != NULL;
	case MEMWIRE_EV_RX: return e->rx_head != NULL;
	case MEMWIRE_EV_CQ:
		/* a verbs link arms its send CQ while the queue is half full */
		return e->cq_head != NULL && (!e->lazy_cq || e->cq_armed || e->failed ||
					      sq_used(e) >= e->sq_depth / 2);
	}
	return false;
}

static int sched_pick(struct memwire_sched *ms, bool hook)
{
	unsigned int w[4] = { ms->w_deliver, ms->w_rx, ms->w_cq, hook ? ms->w_hook : 0 };
	unsigned int avail[4] = { 0 }, total = 0, i, k, r;

	for (i = 0; i < ms->n; i++)
		for (k = 0; k < 3; k++)
			avail[k] += has(ms->ends[i], (int)k);
	if (hook && ms->hook)
		avail[MEMWIRE_EV_HOOK] = 1;
	for (k = 0; k < 4; k++)
		if (avail[k])
			total += w[k] ? w[k] : 0;
	if (total == 0) {
		/* Only kinds of weight 0 can happen: take the first. */
		for (k = 0; k < 4; k++)
			if (avail[k])
				return (int)k;
		return -1;
	}
	r = memwire_sched_rand(ms) % total;
	for (k = 0; k < 4; k++) {
		if (!avail[k] || !w[k])
			continue;
		if (r < w[k])
			return (int)k;
		r -= w[k];
	}
	return -1;
}

static void sched_run(struct memwire_sched *ms, int kind)
{
	unsigned int i, cnt = 0, pick;

	for (i = 0; i < ms->n; i++)
		cnt += has(ms->ends[i], kind);
	pick = memwire_sched_rand(ms) % cnt;
	for (i = 0; i < ms->n; i++) {
		struct memwire_end *e = ms->ends[i];

		if (!has(e, kind) || pick--)
			continue;
		if (kind == MEMWIRE_EV_DELIVER) {
			memwire_step(e);
		} else if (kind == MEMWIRE_EV_RX) {
			/* a lazy end's poller takes the send CQ first */
			while (e->lazy_cq && e->cq_head)
				poll_cq(e);
			poll_rx(e);
		} else {
			poll_cq(e);
			if (!e->cq_head)
				e->cq_armed = false;
		}
		return;
	}
}

int memwire_sched_step(struct memwire_sched *ms)
{
	int kind = sched_pick(ms, true);

	if (kind < 0)
		return -1;
	ms->steps++;
	ms->counts[kind]++;
	if (kind == MEMWIRE_EV_HOOK) {
		if (ms->hook(ms, ms->hook_arg))
			return kind;
		/* The application waits: some wire event must come. */
		kind = sched_pick(ms, false);
		if (kind < 0)
			return -1;
		ms->counts[kind]++;
	}
	sched_run(ms, kind);
	return kind;
}

void memwire_sched_drain(struct memwire_sched *ms)
{
	int kind;

	while ((kind = sched_pick(ms, false)) >= 0)
		sched_run(ms, kind);
}
