/* SPDX-License-Identifier: BSD-3-Clause */
/* smcrbd tests: an in-memory wire between two link ends. */
#include <config.h>

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "memwire.h"

struct memwire_op {
	struct memwire_op *next;
	bool is_write;
	bool signaled;
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

static int enqueue(struct memwire_end *e, struct memwire_op *op)
{
	if (e->failed || e->link.state == SMCR_LINK_FAILED) {
		free(op);
		return -ENOTCONN;
	}
	if (e->queued >= e->sq_depth) {
		free(op);
		return -EAGAIN;
	}
	op->next = NULL;
	if (e->tail)
		e->tail->next = op;
	else
		e->head = op;
	e->tail = op;
	e->queued++;
	return 0;
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
	op->signaled = signaled;
	op->wr_id = wr_id;
	op->raddr = raddr;
	op->rkey = rkey;
	op->len = len;
	return enqueue(end_of(link), op);
}

static int mw_post_send(struct smcr_link *link, const void *msg, uint64_t wr_id)
{
	struct memwire_op *op = malloc(sizeof(*op) + SMCR_MSG_LEN);

	if (!op)
		return -ENOMEM;
	memcpy(op->data, msg, SMCR_MSG_LEN);
	op->is_write = false;
	op->signaled = true;
	op->wr_id = wr_id;
	op->len = SMCR_MSG_LEN;
	return enqueue(end_of(link), op);
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
	op->signaled = true;
	op->wr_id = wr_id;
	op->len = len;
	return enqueue(end_of(link), op);
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

static void flush_all(struct memwire_end *e)
{
	struct memwire_op *op;

	while ((op = e->head)) {
		e->head = op->next;
		e->queued--;
		if (op->signaled) {
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

	return e->queued >= e->sq_depth ? 0 : e->sq_depth - e->queued;
}

static const struct smcr_link_ops memwire_ops = {
	.post_write = mw_post_write,
	.post_send = mw_post_send,
	.fail = mw_fail,
	.sq_free = mw_sq_free,
	.post_send_long = mw_post_send_long,
};

void memwire_init(struct memwire_end *e, unsigned int sq_depth,
		  const struct smcr_link_handler *h, void *arg)
{
	memset(e, 0, sizeof(*e));
	e->sq_depth = sq_depth;
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

int memwire_step(struct memwire_end *e)
{
	struct memwire_op *op = e->head;
	const struct smcr_link_handler *h = e->link.handler;
	bool place = true;

	if (!op)
		return 0;
	if (e->fault == MEMWIRE_BLACKHOLE || !e->peer) {
		e->head = op->next;
		if (!e->head)
			e->tail = NULL;
		e->queued--;
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
	if (op->is_write) {
		uint8_t *dst = remote_mem(e->peer, op->raddr, op->len, op->rkey);

		if (!dst) {
			/* A remote access error kills the QP, as in RC. */
			e->bad_rkey++;
			free(op);
			memwire_fault(e, MEMWIRE_CUT);
			return memwire_step(e) + 1;
		}
		if (place)
			memcpy(dst, op->data, op->len);
		if (op->signaled && h->write_done)
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
}
