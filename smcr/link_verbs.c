/* SPDX-License-Identifier: BSD-3-Clause */
/* smcrbd: struct smcr_link_ops over one RC QP (libibverbs). */
#include <config.h>

#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/random.h>

#include "link_verbs.h"
#include "monotime.h"
#include "log.h"

#define VL_SLOT		64u		/* bytes per message buffer */
/* The rest of an SMC-Rv2 LLC message longer than 44 bytes lands in one
 * overflow area that every receive shares (as in Linux: LLC flows run
 * one at a time, and only the first 44 bytes are read). */
#define VL_OVERFLOW	(SMCR_LLC_V2_MAX_LEN - SMCR_MSG_LEN)
#define VL_RECV_BIT	(1ull << 63)	/* in a receive's wr_id */
#define VL_ACK_RECVS	4u		/* zero-length receives of a late acker */
#define VL_DEF_SQ	128u
#define VL_DEF_RQ	64u

enum { SQ_WRITE = 1, SQ_SEND = 2 };

/* One posted send queue work request. */
struct sq_ent {
	uint64_t wr_id;			/* the caller's */
	uint8_t kind;
	bool user_signaled;		/* the caller wants an upcall */
	uint32_t rkey, len;		/* an RDMA write's, for its error */
	uint64_t raddr;
};

/* A link's verbs objects and the memory the RNIC may still write into.
 * They outlive the link's hold on them: a QP destroy may sleep until the
 * device has sent what it had queued (seconds, on a port that is down),
 * so the owner may have them freed elsewhere (set->reaper).  The CQ's
 * context is this, not the link: a CQ event read while it is being
 * destroyed finds vl NULL. */
struct smcr_vlink_res {
	struct smcr_vlink *vl;		/* NULL once the link let go */
	struct ibv_qp *qp;
	struct ibv_cq *cq, *scq;	/* scq: NULL when it is cq */
	struct ibv_comp_channel *chan;	/* the link's own, or NULL */
	struct ibv_mr *mr;
	uint8_t *bufs;
	struct smcr_dev *dev;
	struct smcr_pd *pd;		/* a reference, put after the QP is gone */
	char devname[IBV_SYSFS_NAME_MAX];
};

/* A work request held back by an injected fault (smcr_vlink_fault()). */
struct held {
	struct ibv_send_wr wr;
	struct ibv_sge sge[2];
	uint64_t due_ms;
};

struct smcr_vlink {
	struct smcr_link link;		/* first: a link is its vlink */
	struct smcr_vlink_res *res;	/* NULL once released */
	struct smcr_vlink_set *set;
	struct smcr_vlink *next;
	struct smcr_port_ref ref;	/* ref.dev NULL once released */
	char devname[IBV_SYSFS_NAME_MAX];
	uint32_t qpn;
	struct smcr_qp_timing timing;
	struct ibv_cq *cq;		/* receive completions (all without own_chan) */
	struct ibv_cq *scq;		/* send completions: cq without own_chan */
	/* set->own_chan: the link's channel, a dup of its fd to sleep on
	 * (it outlives the channel for a waiter), the thread sleeping on it. */
	struct ibv_comp_channel *chan;
	int wait_fd;
	struct smcr_link_waiter *waiter;
	/* Sockets that hold the channel (smcr_vlink_hold),
	 * and whether the owner's loop watches it now. */
	unsigned int fd_holders;
	bool watched;
	uint64_t id;
	struct ibv_qp *qp;
	struct ibv_mr *mr;
	uint8_t *bufs;			/* rq_depth receive slots, then sq_depth send slots */
	size_t bufs_len;
	unsigned int sq_depth, rq_depth;
	/* Send queue: sequence numbers [sq_tail, sq_head) are outstanding;
	 * entry seq lives at sq[seq % sq_depth] and is the verbs wr_id. */
	struct sq_ent *sq;
	uint64_t sq_head, sq_tail;
	/* Every work request waits in held[seq % sq_depth] until it goes to
	 * the QP: [sq_posted, sq_head) are not posted yet.  They wait for
	 * the end of a batch (ops->post_begin/post_end: one doorbell for
	 * them all), behind an injected fault, or behind a refused post
	 * (post_err: the link goes down at its next poll). */
	enum smcr_vlink_fault_kind fault;
	uint32_t fault_ms;		/* delay */
	uint64_t fault_until_ms;	/* 0: until cleared */
	struct held *held;		/* sq_depth entries */
	uint64_t sq_posted;
	unsigned int batch;		/* post_begin depth */
	int post_err;			/* -errno of a refused ibv_post_send */
	/* Receive buffers whose messages a drop holds back, in order:
	 * [rx_head, rx_tail) in rx_held (rq_depth entries). */
	unsigned int *rx_held;
	uint64_t rx_head, rx_tail;
	uint64_t rx_held_ms;		/* when the oldest of them came */
	/* The one long (SMC-Rv2 LLC) send in flight: sequence number long_seq
	 * until the send queue's tail passes it. */
	bool long_busy;
	uint64_t long_seq;
	uint32_t psn;
	struct smcr_qp_peer peer;	/* as connected (connected true) */
	bool connected;
	/* After the link went down, its QP acknowledges the peer's retries
	 * (acker_arm()): ack_wait until the send queue has flushed, then
	 * acker until it is destroyed. */
	bool ack_wait, acker;
	uint8_t ack_fails;		/* re-arming failed (3: given up) */
	bool down;
	bool released;			/* QP, CQ, MR let go of (res) */
	bool drained;			/* CQ polled once more before that */
	bool polling;			/* inside poll_cq(): no nesting */
	bool rcq_armed, scq_armed;	/* own_chan: no event taken since */
	struct smcr_vlink_stats stats;
};

static struct smcr_vlink *vl_of(const struct smcr_link *link)
{
	return (struct smcr_vlink *)link->priv;
}

/* How long RC retries last before a completion error (the QP's ACK
 * timeout, 4.096 us << timeout, times 1 + retry_cnt). */
static uint64_t retry_budget_ms(const struct smcr_vlink *vl)
{
	return ((4096ull << vl->timing.timeout) / 1000000u + 1) *
	       (1u + vl->timing.retry_cnt);
}

static int wc_errno(enum ibv_wc_status st)
{
	switch (st) {
	case IBV_WC_SUCCESS:
		return 0;
	case IBV_WC_WR_FLUSH_ERR:
		return -ECANCELED;
	case IBV_WC_RETRY_EXC_ERR:
	case IBV_WC_RNR_RETRY_EXC_ERR:
		return -ETIMEDOUT;
	case IBV_WC_LOC_PROT_ERR:
	case IBV_WC_REM_ACCESS_ERR:
		return -EACCES;
	case IBV_WC_REM_INV_REQ_ERR:
	case IBV_WC_LOC_LEN_ERR:
		return -EPROTO;
	default:
		return -EIO;
	}
}

static void deliver_held_rx(struct smcr_vlink *vl);
static void complete(struct smcr_vlink *vl, const struct ibv_wc *wc);

/* Post held [sq_posted, upto) as one chain: one doorbell.  On a refusal
 * what the device took (before its bad_wr) counts as posted.  Returns 0
 * or -errno. */
static int post_held(struct smcr_vlink *vl, uint64_t upto)
{
	struct ibv_send_wr *bad = NULL;
	uint64_t s, from = vl->sq_posted;
	int ret;

	if (upto == from)
		return 0;
	for (s = from; s + 1 < upto; s++)
		vl->held[s % vl->sq_depth].wr.next = &vl->held[(s + 1) % vl->sq_depth].wr;
	vl->held[(upto - 1) % vl->sq_depth].wr.next = NULL;
	vl->link.doorbells++;
	ret = ibv_post_send(vl->qp, &vl->held[from % vl->sq_depth].wr, &bad);
	if (ret == 0) {
		vl->sq_posted = upto;
	} else {
		/* A bad_wr outside the chain: assume nothing was taken. */
		for (s = from; s < upto; s++)
			if (&vl->held[s % vl->sq_depth].wr == bad)
				break;
		vl->sq_posted = s < upto ? s : from;
		ret = ret > 0 ? -ret : ret ? ret : -EIO;
	}
	vl->stats.posted += vl->sq_posted - from;
	for (s = from; s < upto; s++)
		vl->held[s % vl->sq_depth].wr.next = NULL;
	return ret;
}

/* Work requests an injected fault still holds, on a link that went down:
 * posted to the QP, which is in the error state now (qp_err), they
 * complete with a flush error behind what was posted before them, as on
 * any failed link.  Returns how many it could not post. */
static uint64_t flush_held(struct smcr_vlink *vl, bool qp_err)
{
	uint64_t n = vl->sq_head - vl->sq_posted;

	vl->stats.fault_discarded += n;
	vl->set->fault_discarded += n;
	if (qp_err)
		post_held(vl, vl->sq_head);
	return vl->sq_head - vl->sq_posted;
}

/* The rest of flush_held(): flush completions made up here (after the
 * down upcall; the QP's own flushes of earlier requests, if any come,
 * are then out of order and ignored). */
static void flush_held_sw(struct smcr_vlink *vl)
{
	if (vl->sq_posted != vl->sq_head)
		smcr_warn("link %u (%s): %llu held work requests flushed without the QP",
			  vl->link.link_id, vl->devname,
			  (unsigned long long)(vl->sq_head - vl->sq_posted));
	while (vl->sq_posted != vl->sq_head && !vl->released) {
		struct ibv_wc wc = {
			.wr_id = vl->sq_posted++,
			.status = IBV_WC_WR_FLUSH_ERR,
		};

		complete(vl, &wc);
	}
}

/* own_chan: the send CQ raises an event at its next completion (once). */
static void scq_arm(struct smcr_vlink *vl)
{
	if (!vl->chan || vl->released || vl->scq_armed)
		return;
	if (ibv_req_notify_cq(vl->scq, 0))
		smcr_warn("link %u: cannot arm the send CQ", vl->link.link_id);
	else
		vl->scq_armed = true;
}

static void rcq_arm(struct smcr_vlink *vl)
{
	if (!vl->chan || vl->released || vl->rcq_armed)
		return;
	if (ibv_req_notify_cq(vl->cq, 0))
		smcr_warn("link %u: cannot arm the CQ", vl->link.link_id);
	else
		vl->rcq_armed = true;
}

/* Send completions matter while the send queue is half full (slots come
 * back with them) and once the link is down (its flushes); otherwise only
 * when someone asks (ops->want_send_done). */
static bool scq_needed(const struct smcr_vlink *vl)
{
	return vl->down || vl->sq_head - vl->sq_tail >= vl->sq_depth / 2;
}

/* The link is unusable: QP to error (nothing it still carries may be
 * placed once the owner has replayed it elsewhere), tell the owner once. */
static void link_down(struct smcr_vlink *vl, int reason, enum ibv_wc_status st)
{
	uint64_t unposted;
	int ret;

	if (vl->down)
		return;
	/* What a drop held back was acknowledged to the peer: the owner
	 * gets it before it validates the failover (and what it sends in
	 * answer is held, then flushed, as well). */
	deliver_held_rx(vl);
	if (vl->down)
		return;
	vl->fault = SMCR_VLINK_FAULT_NONE;
	vl->down = true;
	vl->link.state = SMCR_LINK_FAILED;
	vl->link.errors++;
	vl->stats.down_reason = reason;
	vl->stats.down_wc_status = st;
	ret = vl->qp ? smcr_qp_to_err(vl->qp) : 0;
	if (ret)
		smcr_warn("link %u (%s): QP to error: %s", vl->link.link_id,
			  vl->devname, strerror(-ret));
	/* Not while the QP may still send: the owner replays elsewhere. */
	unposted = flush_held(vl, vl->qp && ret == 0);
	vl->ack_wait = vl->qp && ret == 0 && vl->connected;
	smcr_info("link %u (%s, QP 0x%06x) down: %s", vl->link.link_id,
		  vl->devname, vl->qpn, strerror(-reason));
	scq_arm(vl);
	if (vl->link.handler && vl->link.handler->down)
		vl->link.handler->down(&vl->link, reason);
	if (unposted)
		flush_held_sw(vl);
}

/* ---- posting ------------------------------------------------------------ */

static unsigned int sq_used(const struct smcr_vlink *vl)
{
	return (unsigned int)(vl->sq_head - vl->sq_tail);
}

/* Everything waiting goes to the QP now, unless a fault holds it.  A
 * refusal leaves the rest waiting and the QP in error; the link goes
 * down at its next poll (poll_cq), not from inside a post. */
static void post_pending(struct smcr_vlink *vl)
{
	int ret;

	if (vl->fault != SMCR_VLINK_FAULT_NONE || vl->down || vl->post_err ||
	    vl->sq_posted == vl->sq_head)
		return;
	ret = post_held(vl, vl->sq_head);
	if (ret == 0)
		return;
	vl->post_err = ret;
	smcr_warn("link %u (%s): the QP refused %llu work request(s): %s",
		  vl->link.link_id, vl->devname,
		  (unsigned long long)(vl->sq_head - vl->sq_posted), strerror(-ret));
	/* Its receives flush: the next poll takes the link down. */
	ret = smcr_qp_to_err(vl->qp);
	if (ret)
		smcr_warn("link %u (%s): QP to error: %s", vl->link.link_id,
			  vl->devname, strerror(-ret));
}

static int sq_post(struct smcr_vlink *vl, struct ibv_send_wr *wr, uint8_t kind,
		   uint64_t wr_id, bool user_signaled)
{
	struct held *h = &vl->held[vl->sq_head % vl->sq_depth];
	struct sq_ent *e;
	unsigned int f;
	uint32_t len = 0;
	int i;

	for (i = 0; i < wr->num_sge; i++)
		len += wr->sg_list[i].length;
	/* A 44-byte CDC or LLC message goes inline: the device copies it
	 * at the post, no DMA read of the slot. */
	f = smcr_link_wr_flags(&vl->link, kind == SQ_SEND, len, user_signaled);
	wr->wr_id = vl->sq_head;
	wr->send_flags = (f & SMCR_WR_SIGNALED ? IBV_SEND_SIGNALED : 0) |
			 (f & SMCR_WR_INLINE ? IBV_SEND_INLINE : 0);
	h->wr = *wr;
	h->wr.next = NULL;
	for (i = 0; i < wr->num_sge; i++)
		h->sge[i] = wr->sg_list[i];
	h->wr.sg_list = h->sge;
	h->due_ms = 0;
	if (vl->fault != SMCR_VLINK_FAULT_NONE) {
		h->due_ms = now_ms() + (vl->fault == SMCR_VLINK_FAULT_DROP ?
					retry_budget_ms(vl) : vl->fault_ms);
		vl->stats.fault_held++;
		vl->set->fault_held++;
	}
	e = &vl->sq[vl->sq_head % vl->sq_depth];
	e->wr_id = wr_id;
	e->kind = kind;
	e->user_signaled = user_signaled;
	if (kind == SQ_WRITE) {
		e->rkey = wr->wr.rdma.rkey;
		e->raddr = wr->wr.rdma.remote_addr;
		e->len = len;
	}
	vl->sq_head++;
	if (!vl->batch)
		post_pending(vl);
	if (scq_needed(vl))
		scq_arm(vl);
	return 0;
}

static int vl_post_write(struct smcr_link *link, const struct smcr_sge *sge,
			 unsigned int nsge, uint64_t raddr, uint32_t rkey,
			 uint64_t wr_id, bool signaled)
{
	struct smcr_vlink *vl = vl_of(link);
	struct ibv_sge isge[2];
	struct ibv_send_wr wr;
	unsigned int i;

	if (vl->down || vl->post_err)
		return -ENOTCONN;
	if (nsge == 0 || nsge > 2)
		return -EINVAL;
	if (sq_used(vl) >= vl->sq_depth)
		return -EAGAIN;
	for (i = 0; i < nsge; i++) {
		isge[i].addr = (uintptr_t)sge[i].addr;
		isge[i].length = sge[i].len;
		isge[i].lkey = sge[i].lkey;
	}
	memset(&wr, 0, sizeof(wr));
	wr.sg_list = isge;
	wr.num_sge = (int)nsge;
	wr.opcode = IBV_WR_RDMA_WRITE;
	wr.wr.rdma.remote_addr = raddr;
	wr.wr.rdma.rkey = rkey;
	return sq_post(vl, &wr, SQ_WRITE, wr_id, signaled);
}

static uint8_t *overflow(struct smcr_vlink *vl)
{
	return vl->bufs + (size_t)(vl->rq_depth + vl->sq_depth) * VL_SLOT;
}

static uint8_t *long_tx(struct smcr_vlink *vl)
{
	return overflow(vl) + VL_OVERFLOW;
}

static uint8_t *long_rx(struct smcr_vlink *vl)
{
	return long_tx(vl) + SMCR_LLC_V2_MAX_LEN;
}

static uint8_t *send_slot(struct smcr_vlink *vl, uint64_t seq)
{
	return vl->bufs + (size_t)(vl->rq_depth + seq % vl->sq_depth) * VL_SLOT;
}

/* SEND len bytes of our registered buffer at buf, signaled. */
static int post_send_buf(struct smcr_vlink *vl, uint8_t *buf, uint32_t len, uint64_t wr_id)
{
	struct ibv_send_wr wr;
	struct ibv_sge sge = { .addr = (uintptr_t)buf, .length = len, .lkey = vl->mr->lkey };

	memset(&wr, 0, sizeof(wr));
	wr.sg_list = &sge;
	wr.num_sge = 1;
	wr.opcode = IBV_WR_SEND;
	return sq_post(vl, &wr, SQ_SEND, wr_id, true);
}

static int vl_post_send(struct smcr_link *link, const void *msg, uint64_t wr_id)
{
	struct smcr_vlink *vl = vl_of(link);
	uint8_t *slot;

	if (vl->down || vl->post_err)
		return -ENOTCONN;
	if (sq_used(vl) >= vl->sq_depth)
		return -EAGAIN;
	/* The slot of this sequence number is free until it completes. */
	slot = send_slot(vl, vl->sq_head);
	memcpy(slot, msg, SMCR_MSG_LEN);
	return post_send_buf(vl, slot, SMCR_MSG_LEN, wr_id);
}

static int vl_post_send_long(struct smcr_link *link, const void *msg, uint32_t len,
			     uint64_t wr_id)
{
	struct smcr_vlink *vl = vl_of(link);
	int ret;

	if (vl->down || vl->post_err)
		return -ENOTCONN;
	if (len <= SMCR_MSG_LEN || len > SMCR_LLC_V2_MAX_LEN)
		return -EINVAL;
	if (sq_used(vl) >= vl->sq_depth || (vl->long_busy && vl->long_seq >= vl->sq_tail))
		return -EAGAIN;
	memcpy(long_tx(vl), msg, len);
	vl->long_seq = vl->sq_head;
	ret = post_send_buf(vl, long_tx(vl), len, wr_id);
	if (ret == 0)
		vl->long_busy = true;
	return ret;
}

static void vl_fail(struct smcr_link *link)
{
	link_down(vl_of(link), -ECONNABORTED, IBV_WC_SUCCESS);
}

static void acker_arm(struct smcr_vlink *vl);

/* Armed, or to be (tried now); an acker that refused a request is in
 * error. */
static bool vl_acking(struct smcr_link *link)
{
	struct smcr_vlink *vl = vl_of(link);
	struct ibv_qp_init_attr ia;
	struct ibv_qp_attr qa;

	if (vl->released || !vl->qp)
		return false;
	acker_arm(vl);
	if (vl->ack_wait)
		return true;
	return vl->acker && !ibv_query_qp(vl->qp, &qa, IBV_QP_STATE, &ia) &&
	       qa.qp_state == IBV_QPS_RTS;
}

static bool vl_acks_late(const struct smcr_link *link)
{
	const struct smcr_vlink *vl = vl_of(link);

	return !vl->released && vl->qp && (vl->acker || vl->ack_wait);
}

static void vl_ack_off(struct smcr_link *link)
{
	struct smcr_vlink *vl = vl_of(link);

	vl->ack_wait = false;
	if (vl->acker && vl->qp && !vl->released) {
		smcr_qp_to_err(vl->qp);
		smcr_info("link %u (%s): late acker off", vl->link.link_id, vl->devname);
	}
}

static unsigned int vl_sq_free(struct smcr_link *link)
{
	struct smcr_vlink *vl = vl_of(link);

	if (vl->down || vl->post_err)
		return 0;
	return vl->sq_depth - sq_used(vl);
}

static void vl_post_begin(struct smcr_link *link)
{
	vl_of(link)->batch++;
}

static void vl_post_end(struct smcr_link *link)
{
	struct smcr_vlink *vl = vl_of(link);

	if (vl->batch && --vl->batch == 0)
		post_pending(vl);
}

static int vl_wait_begin(struct smcr_link *link, struct smcr_link_waiter *w,
			 bool want_send);
static void vl_wait_end(struct smcr_link_waiter *w);
static void vl_want_send_done(struct smcr_link *link);

const struct smcr_link_ops smcr_vlink_ops = {
	.post_write = vl_post_write,
	.post_send = vl_post_send,
	.fail = vl_fail,
	.sq_free = vl_sq_free,
	.poll = smcr_vlink_poll,
	.post_send_long = vl_post_send_long,
	.acking = vl_acking,
	.acks_late = vl_acks_late,
	.ack_off = vl_ack_off,
	.wait_begin = vl_wait_begin,
	.wait_end = vl_wait_end,
	.want_send_done = vl_want_send_done,
	.post_begin = vl_post_begin,
	.post_end = vl_post_end,
};

static int post_recv(struct smcr_vlink *vl, unsigned int idx)
{
	struct ibv_sge sge[2] = {
		{ .addr = (uintptr_t)(vl->bufs + (size_t)idx * VL_SLOT),
		  .length = SMCR_MSG_LEN, .lkey = vl->mr->lkey },
		{ .addr = (uintptr_t)overflow(vl), .length = VL_OVERFLOW,
		  .lkey = vl->mr->lkey },
	};
	struct ibv_recv_wr wr = {
		.wr_id = VL_RECV_BIT | idx,
		.sg_list = sge,
		.num_sge = 2,
	};
	struct ibv_recv_wr *bad;

	return -ibv_post_recv(vl->qp, &wr, &bad);
}

/* ---- completions -------------------------------------------------------- */

/* Hand the message in receive buffer idx to the owner, post it again. */
static void deliver(struct smcr_vlink *vl, unsigned int idx, uint32_t len)
{
	const struct smcr_link_handler *h = vl->link.handler;
	int ret;

	if (len < SMCR_MSG_LEN || len > SMCR_LLC_V2_MAX_LEN) {
		vl->stats.bad_recvs++;
		smcr_warn("link %u: dropped a %u-byte message", vl->link.link_id, len);
	} else if (len > SMCR_MSG_LEN && h && h->recv_long) {
		/* the head from the slot, the rest from the overflow area */
		vl->link.recvs++;
		memcpy(long_rx(vl), vl->bufs + (size_t)idx * VL_SLOT, SMCR_MSG_LEN);
		memcpy(long_rx(vl) + SMCR_MSG_LEN, overflow(vl), len - SMCR_MSG_LEN);
		h->recv_long(&vl->link, long_rx(vl), len);
	} else {
		vl->link.recvs++;
		if (h && h->recv)
			h->recv(&vl->link, vl->bufs + (size_t)idx * VL_SLOT);
	}
	if (vl->down)
		return;
	ret = post_recv(vl, idx);
	if (ret) {
		smcr_warn("link %u: cannot repost a receive buffer: %s",
			  vl->link.link_id, strerror(-ret));
		link_down(vl, ret, IBV_WC_SUCCESS);
	}
}

static void deliver_held_rx(struct smcr_vlink *vl)
{
	while (vl->rx_head != vl->rx_tail && !vl->released) {
		unsigned int idx = vl->rx_held[vl->rx_head % vl->rq_depth];

		vl->rx_head++;
		deliver(vl, idx, SMCR_MSG_LEN);
	}
}

static void recv_done(struct smcr_vlink *vl, const struct ibv_wc *wc)
{
	unsigned int idx = (unsigned int)(wc->wr_id & ~VL_RECV_BIT);

	if (idx >= vl->rq_depth) {
		smcr_warn("link %u: receive completion for unknown buffer %u",
			  vl->link.link_id, idx);
		return;
	}
	if (wc->status != IBV_WC_SUCCESS)
		return;		/* flushed, or the link went down already */
	if (wc->byte_len >= SMCR_MSG_LEN &&
	    (vl->fault == SMCR_VLINK_FAULT_DROP || vl->rx_head != vl->rx_tail)) {
		/* Silent for now; the buffer stays out of the queue. */
		if (vl->rx_head == vl->rx_tail)
			vl->rx_held_ms = now_ms();
		vl->rx_held[vl->rx_tail++ % vl->rq_depth] = idx;
		vl->stats.fault_held_recvs++;
		vl->set->fault_held_recvs++;
		return;
	}
	deliver(vl, idx, wc->byte_len);
}

static void send_done(struct smcr_vlink *vl, const struct ibv_wc *wc, int status)
{
	const struct smcr_link_handler *h = vl->link.handler;
	uint64_t seq = wc->wr_id;
	struct sq_ent e;

	if (seq < vl->sq_tail || seq >= vl->sq_head) {
		smcr_warn("link %u: completion for unknown work request %llu",
			  vl->link.link_id, (unsigned long long)seq);
		return;
	}
	/* Unsignaled requests before this one are done as well. */
	e = vl->sq[seq % vl->sq_depth];
	vl->sq_tail = seq + 1;
	if (!e.user_signaled || !h)
		return;
	if (e.kind == SQ_WRITE && h->write_done)
		h->write_done(&vl->link, e.wr_id, status);
	else if (e.kind == SQ_SEND && h->send_done)
		h->send_done(&vl->link, e.wr_id, status);
}

static void complete(struct smcr_vlink *vl, const struct ibv_wc *wc)
{
	int status = wc_errno(wc->status);

	vl->stats.completions++;
	if (wc->status == IBV_WC_WR_FLUSH_ERR) {
		vl->stats.flushed++;
	} else if (vl->acker && (wc->wr_id & VL_RECV_BIT) && wc->status != IBV_WC_SUCCESS) {
		/* a new SEND on a late acker: refused, the QP is in error (a
		 * success is a message received before, delivered below) */
		vl->stats.acker_refused++;
		vl->set->acker_refused++;
		smcr_info("link %u (%s): refused a late request of the peer (%s)",
			  vl->link.link_id, vl->devname, ibv_wc_status_str(wc->status));
		return;
	} else if (wc->status != IBV_WC_SUCCESS) {
		const struct sq_ent *e = &vl->sq[wc->wr_id % vl->sq_depth];
		bool rq = wc->wr_id & VL_RECV_BIT;

		smcr_info("link %u (%s): %s %016llx failed: %s (vendor error 0x%x)",
			  vl->link.link_id, vl->devname,
			  rq ? "receive" : e->kind == SQ_WRITE ? "RDMA write" : "send",
			  (unsigned long long)(rq ? wc->wr_id : e->wr_id),
			  ibv_wc_status_str(wc->status), wc->vendor_err);
		if (!rq && e->kind == SQ_WRITE)
			smcr_info("link %u (%s): that write: rkey %08x raddr %llx, %u bytes",
				  vl->link.link_id, vl->devname, e->rkey,
				  (unsigned long long)e->raddr, e->len);
		link_down(vl, status, wc->status);
	}
	if (wc->wr_id & VL_RECV_BIT)
		recv_done(vl, wc);
	else
		send_done(vl, wc, status);
}

/* A link that went down keeps its QP, back in RTS, as a late acker: a
 * peer whose requests on this path are unacknowledged may wait for them
 * with no bound (Linux 6.1's server, on a client's DELETE LINK for a link
 * it still thinks active, waits for the link's pending sends; rxe retries
 * forever at its retry count 7).  Re-armed with the receive PSN it had,
 * the QP acknowledges what it received before (duplicates) and refuses
 * anything new: no remote access for RDMA WRITEs, zero-length receives
 * for SENDs, so nothing is placed and the peer's QP gets an error
 * completion.  Our own requests flushed before (the send queue is empty):
 * none of them is resent.  The QP stays so until the link is destroyed. */
static void acker_arm(struct smcr_vlink *vl)
{
	struct ibv_qp_attr qa, reset = { .qp_state = IBV_QPS_RESET };
	struct ibv_qp_attr init = {
		.qp_state = IBV_QPS_INIT,
		.port_num = vl->ref.port,
		.qp_access_flags = 0,
	};
	struct ibv_qp_init_attr ia;
	struct ibv_port_attr pa;
	struct smcr_qp_peer p = vl->peer;
	const char *step;
	unsigned int i;
	int ret;

	/* modify_qp to RTR resolves the peer's MAC and waits up to a second
	 * for it: not on a port that is down, nor before the peer's address
	 * is resolved (prodded here; tried again on the port's PORT_ACTIVE
	 * and at the owner's ticks, smcr_link_ops.acking). */
	if (!vl->ack_wait || vl->released || vl->sq_tail != vl->sq_head)
		return;
	if (ibv_query_port(vl->ref.dev->ctx, vl->ref.port, &pa) ||
	    pa.state != IBV_PORT_ACTIVE ||
	    !smcr_gid_resolved(vl->peer.gid, vl->ref.ifindex, true))
		return;
	vl->ack_wait = false;
	step = "query";
	ret = ibv_query_qp(vl->qp, &qa, IBV_QP_RQ_PSN | IBV_QP_SQ_PSN, &ia);
	if (!ret) {
		step = "reset";
		ret = ibv_modify_qp(vl->qp, &reset, IBV_QP_STATE);
	}
	if (!ret) {
		step = "init";
		ret = ibv_modify_qp(vl->qp, &init, IBV_QP_STATE | IBV_QP_PKEY_INDEX |
				    IBV_QP_PORT | IBV_QP_ACCESS_FLAGS);
	}
	if (!ret) {
		step = "rtr";
		p.psn = qa.rq_psn;
		ret = -smcr_qp_to_rtr(vl->qp, &vl->ref, &p);
	}
	if (!ret) {
		step = "rts";
		ret = -smcr_qp_to_rts(vl->qp, qa.sq_psn, &vl->timing);
	}
	for (i = 0; !ret && i < VL_ACK_RECVS; i++) {
		struct ibv_recv_wr wr = { .wr_id = VL_RECV_BIT | i }, *bad;

		step = "recv";
		ret = ibv_post_recv(vl->qp, &wr, &bad);
	}
	if (ret) {
		/* tried again later, twice at most (each try may block) */
		smcr_info("link %u (%s): no late acker now (%s: %s)", vl->link.link_id,
			  vl->devname, step, strerror(ret));
		smcr_qp_to_err(vl->qp);
		vl->ack_wait = ++vl->ack_fails < 3;
		return;
	}
	vl->acker = true;
	vl->stats.acker = true;
	vl->set->ackers++;
	smcr_info("link %u (%s, QP 0x%06x): acknowledging the peer's retries (receive PSN 0x%06x)",
		  vl->link.link_id, vl->devname, vl->qpn, qa.rq_psn);
}

static int poll_one(struct smcr_vlink *vl, struct ibv_cq *cq)
{
	struct ibv_wc wc[16];
	int n, i, total = 0;

	/* released by an upcall (smcr_vlink_dev_gone is not one, but a
	 * down upcall may end the group's use of it) */
	while (cq && !vl->released) {
		n = ibv_poll_cq(cq, 16, wc);
		if (n < 0) {
			smcr_warn("link %u: polling the CQ failed", vl->link.link_id);
			link_down(vl, -EIO, IBV_WC_GENERAL_ERR);
			return -EIO;
		}
		if (n == 0)
			break;
		for (i = 0; i < n; i++)
			complete(vl, &wc[i]);
		total += n;
	}
	return total;
}

/* The send CQ first (when it is apart): a send's error comes before the
 * flushes of the receives it causes. */
static int poll_cq(struct smcr_vlink *vl)
{
	int total = 0, n;

	/* An upcall may drain other links (smcr_vlink_poll); polling this
	 * CQ again from inside would hand out completions out of order. */
	if (vl->polling || vl->released)
		return 0;
	vl->polling = true;
	/* A refused post (post_pending) takes the link down here. */
	if (vl->post_err && !vl->down)
		link_down(vl, vl->post_err, IBV_WC_SUCCESS);
	if (vl->scq != vl->cq) {
		total = poll_one(vl, vl->scq);
		if (total < 0)
			goto out;
	}
	n = poll_one(vl, vl->cq);
	total = n < 0 ? n : total + n;
out:
	vl->polling = false;
	acker_arm(vl);
	return total;
}

/* ---- injected faults ------------------------------------------------------ */

int smcr_vlink_fault(struct smcr_link *link, enum smcr_vlink_fault_kind kind,
		     uint32_t delay_ms, uint32_t for_ms)
{
	struct smcr_vlink *vl = vl_of(link);

	if (vl->down)
		return -ENOTCONN;
	if (kind != SMCR_VLINK_FAULT_NONE && !vl->rx_held) {
		vl->rx_held = calloc(vl->rq_depth, sizeof(*vl->rx_held));
		if (!vl->rx_held)
			return -ENOMEM;
	}
	vl->fault = kind;
	vl->fault_ms = delay_ms;
	vl->fault_until_ms = kind != SMCR_VLINK_FAULT_NONE && for_ms ? now_ms() + for_ms : 0;
	smcr_vlink_fault_tick(link);
	return 0;
}

bool smcr_vlink_fault_tick(struct smcr_link *link)
{
	struct smcr_vlink *vl = vl_of(link);
	uint64_t now;

	if (vl->down || (vl->fault == SMCR_VLINK_FAULT_NONE && vl->sq_posted == vl->sq_head &&
			 vl->rx_head == vl->rx_tail))
		return false;
	now = now_ms();
	if (vl->fault_until_ms && now >= vl->fault_until_ms) {
		smcr_info("link %u (%s): injected fault ends", vl->link.link_id, vl->devname);
		vl->fault = SMCR_VLINK_FAULT_NONE;
		vl->fault_until_ms = 0;
	}
	if (vl->fault == SMCR_VLINK_FAULT_DROP) {
		/* What RC does on a silent wire: retry, then fail the oldest
		 * request.  A held receive stands for a request of the peer,
		 * which would fail the same way over there (and does once
		 * our QP is in error): on an idle link nothing else would. */
		if ((vl->sq_posted != vl->sq_head &&
		     now >= vl->held[vl->sq_posted % vl->sq_depth].due_ms) ||
		    (vl->rx_head != vl->rx_tail &&
		     now >= vl->rx_held_ms + retry_budget_ms(vl)))
			link_down(vl, -ETIMEDOUT, IBV_WC_RETRY_EXC_ERR);
		return !vl->down;
	}
	deliver_held_rx(vl);
	if (vl->down)
		return false;
	if (vl->sq_posted != vl->sq_head && !vl->batch) {
		uint64_t upto = vl->sq_posted;
		int ret;

		while (upto != vl->sq_head &&
		       (vl->fault != SMCR_VLINK_FAULT_DELAY ||
			now >= vl->held[upto % vl->sq_depth].due_ms))
			upto++;
		ret = vl->post_err ? vl->post_err : post_held(vl, upto);
		if (ret)
			link_down(vl, ret, IBV_WC_SUCCESS);
	}
	return !vl->down && (vl->fault != SMCR_VLINK_FAULT_NONE || vl->sq_posted != vl->sq_head);
}

enum smcr_vlink_fault_kind smcr_vlink_fault_get(const struct smcr_link *link)
{
	const struct smcr_vlink *vl = vl_of(link);

	return vl->down ? SMCR_VLINK_FAULT_NONE : vl->fault;
}

int smcr_vlink_poll(struct smcr_link *link)
{
	return poll_cq(vl_of(link));
}

int smcr_vlink_cq_event(struct smcr_dev *dev)
{
	struct ibv_cq *cq;
	void *ctx;
	int total = 0, ret;

	while (ibv_get_cq_event(dev->chan, &cq, &ctx) == 0) {
		struct smcr_vlink_res *res = ctx;
		/* Before the ack: a CQ being destroyed elsewhere stays until
		 * its events are acknowledged. */
		struct smcr_vlink *vl = res->vl;

		ibv_ack_cq_events(cq, 1);
		if (!vl)
			continue;	/* the link let go of it */
		vl->stats.cq_events++;
		/* Arm before polling: a completion that arrives after the
		 * last poll raises a new event. */
		if (ibv_req_notify_cq(cq, 0)) {
			smcr_warn("link %u: cannot arm the CQ", vl->link.link_id);
			link_down(vl, -EIO, IBV_WC_GENERAL_ERR);
		}
		ret = poll_cq(vl);
		if (ret > 0)
			total += ret;
	}
	if (errno != EAGAIN && errno != EWOULDBLOCK)
		return -errno;
	return total;
}

/* ---- caller-driven progress (set->own_chan) ------------------------------- *
 *
 * Each link has a completion channel of its own with two CQs on it:
 * receives (always armed) and sends (armed only while completions matter:
 * scq_needed(), ops->want_send_done, a waiter's want_send).  The owner's
 * loop watches the channel (smcr_vlink_chan_event) except while a thread
 * blocked for this link has it (wait_begin .. wait_end, one thread at a
 * time; others sleep as before and are woken by the upcalls' notify).
 * Both hand-overs happen under the owner's lock with the CQs armed and
 * then polled, so a completion either is polled or raises an event that
 * the new holder sees; the loop also skips a link that a waiter holds.
 * An application that polls a socket's fd holds the channel too
 * (smcr_vlink_hold: a dup of it in the socket's epoll set), and so does a
 * socket whose thread blocked in a data call once: while one does, the
 * loop does not watch it; the application's thread takes the completions
 * (smcr_vlink_serve) when its fd turns readable or it blocks again.
 * LLC messages, failover validations and other connections' traffic on
 * the link are dispatched by whichever thread polls. */

static void chan_drain(struct smcr_vlink *vl)
{
	struct ibv_cq *cq;
	void *ctx;

	while (vl->chan && ibv_get_cq_event(vl->chan, &cq, &ctx) == 0) {
		ibv_ack_cq_events(cq, 1);
		vl->stats.cq_events++;
		if (cq == vl->scq)
			vl->scq_armed = false;
		else
			vl->rcq_armed = false;
	}
}

static void chan_watch(struct smcr_vlink *vl, int op)
{
	if (vl->chan && vl->set->chan_watch)
		vl->set->chan_watch(vl->chan->fd, vl->id, op, vl->set->chan_watch_arg);
}

/* The owner's loop watches the channel while no thread does: no waiter
 * sleeps on it and no application polls it. */
static void chan_rewatch(struct smcr_vlink *vl)
{
	bool want = !vl->waiter && !vl->fd_holders;

	if (!vl->chan || vl->released || want == vl->watched)
		return;
	vl->watched = want;
	chan_watch(vl, want ? SMCR_CHAN_ON : SMCR_CHAN_OFF);
}

/* Take the events, arm, then poll. */
static int chan_serve(struct smcr_vlink *vl, bool want_send)
{
	chan_drain(vl);
	rcq_arm(vl);
	if (want_send || scq_needed(vl))
		scq_arm(vl);
	return poll_cq(vl);
}

int smcr_vlink_chan_event(struct smcr_vlink_set *set, uint64_t id)
{
	struct smcr_vlink *vl;

	for (vl = set->head; vl; vl = vl->next)
		if (vl->id == id && vl->chan && !vl->released)
			break;
	/* gone, or a waiter has it (it will see the fd readable) */
	if (!vl || vl->waiter)
		return 0;
	return chan_serve(vl, false);
}

static int vl_wait_begin(struct smcr_link *link, struct smcr_link_waiter *w,
			 bool want_send)
{
	struct smcr_vlink *vl = vl_of(link);

	if (!vl->chan || vl->released)
		return -EOPNOTSUPP;
	if (vl->waiter)
		return -EBUSY;
	vl->waiter = w;
	w->link = link;
	w->fd = vl->wait_fd;
	w->fd_owned = false;
	chan_rewatch(vl);
	return chan_serve(vl, want_send);
}

static void vl_wait_end(struct smcr_link_waiter *w)
{
	struct smcr_vlink *vl;

	if (!w->link) {
		/* the link let go of its channel meanwhile */
		if (w->fd_owned && w->fd >= 0)
			close(w->fd);
		w->fd = -1;
		return;
	}
	vl = vl_of(w->link);
	w->link = NULL;
	vl->waiter = NULL;
	chan_serve(vl, false);
	chan_rewatch(vl);
}

int smcr_vlink_hold(struct smcr_link *link, uint64_t *id, bool want_fd)
{
	struct smcr_vlink *vl = vl_of(link);
	int fd = 0;

	if (!vl->chan || vl->released || vl->wait_fd < 0)
		return -EOPNOTSUPP;
	if (want_fd) {
		fd = fcntl(vl->wait_fd, F_DUPFD_CLOEXEC, 0);
		if (fd < 0)
			return -errno;
	}
	vl->fd_holders++;
	*id = vl->id;
	chan_rewatch(vl);
	return fd;
}

void smcr_vlink_unhold(struct smcr_vlink_set *set, uint64_t id)
{
	struct smcr_vlink *vl;

	for (vl = set->head; vl; vl = vl->next)
		if (vl->id == id && vl->chan && !vl->released)
			break;
	if (!vl || !vl->fd_holders)
		return;
	vl->fd_holders--;
	chan_rewatch(vl);
}

uint64_t smcr_vlink_id(const struct smcr_link *link)
{
	const struct smcr_vlink *vl = vl_of(link);

	return vl->chan && !vl->released ? vl->id : 0;
}

bool smcr_vlink_fd_held(const struct smcr_link *link)
{
	const struct smcr_vlink *vl = vl_of(link);

	return vl->chan && !vl->released && vl->fd_holders;
}

int smcr_vlink_serve(struct smcr_link *link, bool want_send)
{
	struct smcr_vlink *vl = vl_of(link);

	if (!vl->chan || vl->released)
		return 0;
	return chan_serve(vl, want_send);
}

static void vl_want_send_done(struct smcr_link *link)
{
	scq_arm(vl_of(link));
}

/* ---- async events ------------------------------------------------------- */

/* The link of set whose QP or CQ this is (events may name QPs and CQs of
 * the device that are not links of ours). */
static struct smcr_vlink *find_link(struct smcr_vlink_set *set,
				    const struct ibv_qp *qp, const struct ibv_cq *cq)
{
	struct smcr_vlink *vl;

	for (vl = set->head; vl; vl = vl->next)
		if ((qp && vl->qp == qp) || (cq && (vl->cq == cq || vl->scq == cq)))
			return vl;
	return NULL;
}

static void down_matching(struct smcr_vlink_set *set, struct smcr_dev *dev,
			  int port, int reason)
{
	struct smcr_vlink *vl;

	for (vl = set->head; vl; vl = vl->next)
		if (!vl->released && vl->ref.dev == dev &&
		    (port == 0 || vl->ref.port == port))
			link_down(vl, reason, IBV_WC_SUCCESS);
}

/* Down links on a port that came back whose late ackers wait for it. */
static void ackers_arm(struct smcr_vlink_set *set, struct smcr_dev *dev, int port)
{
	struct smcr_vlink *vl;

	for (vl = set->head; vl; vl = vl->next)
		if (!vl->released && vl->ref.dev == dev && vl->ref.port == port)
			acker_arm(vl);
}

int smcr_vlink_async_event(struct smcr_vlink_set *set, struct smcr_dev *dev)
{
	struct ibv_async_event ev;
	int n = 0;

	while (ibv_get_async_event(dev->ctx, &ev) == 0) {
		enum ibv_event_type type = ev.event_type;
		struct smcr_vlink *vl = NULL;
		int port = 0;

		switch (type) {
		case IBV_EVENT_QP_FATAL:
		case IBV_EVENT_QP_REQ_ERR:
		case IBV_EVENT_QP_ACCESS_ERR:
		case IBV_EVENT_COMM_EST:
		case IBV_EVENT_SQ_DRAINED:
		case IBV_EVENT_PATH_MIG:
		case IBV_EVENT_PATH_MIG_ERR:
		case IBV_EVENT_QP_LAST_WQE_REACHED:
			vl = find_link(set, ev.element.qp, NULL);
			break;
		case IBV_EVENT_CQ_ERR:
			vl = find_link(set, NULL, ev.element.cq);
			break;
		case IBV_EVENT_PORT_ACTIVE:
		case IBV_EVENT_PORT_ERR:
		case IBV_EVENT_LID_CHANGE:
		case IBV_EVENT_PKEY_CHANGE:
		case IBV_EVENT_GID_CHANGE:
		case IBV_EVENT_SM_CHANGE:
		case IBV_EVENT_CLIENT_REREGISTER:
			port = ev.element.port_num;
			break;
		default:
			break;
		}
		/* Ack first: the handler may tear things down later on. */
		ibv_ack_async_event(&ev);
		n++;
		smcr_dbg("%s: async event %s", dev->name, ibv_event_type_str(type));

		switch (type) {
		case IBV_EVENT_QP_FATAL:
		case IBV_EVENT_QP_REQ_ERR:
		case IBV_EVENT_QP_ACCESS_ERR:
		case IBV_EVENT_CQ_ERR:
			if (vl) {
				smcr_info("link %u (%s): %s", vl->link.link_id,
					  dev->name, ibv_event_type_str(type));
				link_down(vl, type == IBV_EVENT_QP_ACCESS_ERR ?
					  -EACCES : -EIO, IBV_WC_SUCCESS);
			}
			break;
		case IBV_EVENT_PORT_ERR:
			smcr_info("%s port %d: port error", dev->name, port);
			down_matching(set, dev, port, -ENETDOWN);
			if (set->port_event)
				set->port_event(dev, (uint8_t)port, type,
						set->port_event_arg);
			break;
		case IBV_EVENT_DEVICE_FATAL:
			smcr_warn("%s: fatal device error", dev->name);
			down_matching(set, dev, 0, -ENODEV);
			if (set->port_event)
				set->port_event(dev, 0, type, set->port_event_arg);
			break;
		case IBV_EVENT_PORT_ACTIVE:
		case IBV_EVENT_LID_CHANGE:
		case IBV_EVENT_PKEY_CHANGE:
		case IBV_EVENT_GID_CHANGE:
		case IBV_EVENT_SM_CHANGE:
		case IBV_EVENT_CLIENT_REREGISTER:
			if (type == IBV_EVENT_PORT_ACTIVE) {
				smcr_info("%s port %d: active", dev->name, port);
				ackers_arm(set, dev, port);
			}
			if (set->port_event)
				set->port_event(dev, (uint8_t)port, type,
						set->port_event_arg);
			break;
		default:
			break;
		}
	}
	if (errno != EAGAIN && errno != EWOULDBLOCK)
		return -errno;
	return n;
}

/* ---- life cycle --------------------------------------------------------- */

void smcr_vlink_set_init(struct smcr_vlink_set *set)
{
	memset(set, 0, sizeof(*set));
}

static int set_nonblock(int fd)
{
	int flags = fcntl(fd, F_GETFL);

	if (flags < 0)
		return -errno;
	if (flags & O_NONBLOCK)
		return 0;
	return fcntl(fd, F_SETFL, flags | O_NONBLOCK) ? -errno : 0;
}

/* A random initial PSN; early after boot the entropy pool may not be
 * ready, then the clock, the pid and the link's address have to do. */
static uint32_t random_psn(const void *salt)
{
	struct timespec ts;
	uint64_t x;
	uint32_t v;

	if (getrandom(&v, sizeof(v), GRND_NONBLOCK) == (ssize_t)sizeof(v))
		return v & 0xffffff;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	x = (uint64_t)ts.tv_nsec ^ (uint64_t)ts.tv_sec << 30 ^
	    (uint64_t)getpid() << 20 ^ (uint64_t)(uintptr_t)salt;
	x ^= x >> 33;
	x *= 0xff51afd7ed558ccdull;
	x ^= x >> 33;
	return (uint32_t)x & 0xffffff;
}

int smcr_vlink_create(struct smcr_vlink_set *set, const struct smcr_port_ref *ref,
		      struct smcr_pd *pd, const struct smcr_vlink_attr *attr,
		      const struct smcr_link_handler *handler, void *handler_arg,
		      struct smcr_link **linkp)
{
	struct smcr_dev *dev = ref->dev;
	struct smcr_vlink *vl;
	unsigned int i;
	int ret;

	if (!dev || !dev->chan || !pd || pd->dev != dev)
		return -EINVAL;
	vl = calloc(1, sizeof(*vl));
	if (!vl)
		return -ENOMEM;
	vl->wait_fd = -1;
	vl->set = set;
	vl->ref = *ref;
	snprintf(vl->devname, sizeof(vl->devname), "%s", dev->name);
	vl->sq_depth = attr && attr->sq_depth ? attr->sq_depth : VL_DEF_SQ;
	vl->rq_depth = attr && attr->rq_depth ? attr->rq_depth : VL_DEF_RQ;
	vl->link.signal_every = attr && attr->signal_every ? attr->signal_every :
				vl->sq_depth / 4;
	if (vl->link.signal_every < 1)
		vl->link.signal_every = 1;
	if (vl->link.signal_every > vl->sq_depth)
		vl->link.signal_every = vl->sq_depth;
	vl->timing = attr && attr->timing ? *attr->timing : smcr_qp_timing_default;
	/* rxe takes a transport retry count of 7 for "retry forever" (as the
	 * IBTA does only for the RNR retry count): a silently dead path would
	 * never complete with an error.  6 bounds it everywhere. */
	if (vl->timing.retry_cnt > 6)
		vl->timing.retry_cnt = 6;
	vl->psn = random_psn(vl);

	ret = set_nonblock(dev->chan->fd);
	if (!ret)
		ret = set_nonblock(dev->ctx->async_fd);
	if (ret)
		goto err_free_vl;
	vl->res = calloc(1, sizeof(*vl->res));
	if (!vl->res) {
		ret = -ENOMEM;
		goto err_free_vl;
	}
	vl->res->vl = vl;
	vl->res->dev = dev;
	vl->res->pd = smcr_pd_get(pd);
	snprintf(vl->res->devname, sizeof(vl->res->devname), "%s", dev->name);
	vl->sq = calloc(vl->sq_depth, sizeof(*vl->sq));
	vl->held = calloc(vl->sq_depth, sizeof(*vl->held));
	if (!vl->sq || !vl->held) {
		ret = -ENOMEM;
		goto err_free_sq;
	}
	/* slots, the receive overflow area, one long send, its receive copy */
	vl->bufs_len = (size_t)(vl->rq_depth + vl->sq_depth) * VL_SLOT + VL_OVERFLOW +
		       2 * SMCR_LLC_V2_MAX_LEN;
	vl->bufs = calloc(1, vl->bufs_len);
	if (!vl->bufs) {
		ret = -ENOMEM;
		goto err_free_sq;
	}
	vl->mr = ibv_reg_mr(pd->pd, vl->bufs, vl->bufs_len, IBV_ACCESS_LOCAL_WRITE);
	if (!vl->mr) {
		ret = errno ? -errno : -ENOMEM;
		smcr_err("%s: cannot register link buffers: %s", dev->name,
			 strerror(-ret));
		goto err_free_bufs;
	}
	if (set->own_chan) {
		vl->chan = ibv_create_comp_channel(dev->ctx);
		if (!vl->chan) {
			ret = errno ? -errno : -ENOMEM;
			smcr_err("%s: cannot create a completion channel: %s",
				 dev->name, strerror(-ret));
			goto err_dereg_mr;
		}
		ret = set_nonblock(vl->chan->fd);
		if (!ret) {
			vl->wait_fd = fcntl(vl->chan->fd, F_DUPFD_CLOEXEC, 0);
			if (vl->wait_fd < 0)
				ret = -errno;
		}
		if (ret)
			goto err_destroy_chan;
	}
	vl->cq = ibv_create_cq(dev->ctx, (int)(vl->sq_depth + vl->rq_depth), vl->res,
			       vl->chan ? vl->chan : dev->chan, 0);
	if (!vl->cq) {
		ret = errno ? -errno : -ENOMEM;
		smcr_err("%s: cannot create a CQ: %s", dev->name, strerror(-ret));
		goto err_destroy_chan;
	}
	vl->scq = vl->cq;
	if (vl->chan) {
		vl->scq = ibv_create_cq(dev->ctx, (int)vl->sq_depth, vl->res, vl->chan, 0);
		if (!vl->scq) {
			ret = errno ? -errno : -ENOMEM;
			vl->scq = vl->cq;
			smcr_err("%s: cannot create a CQ: %s", dev->name, strerror(-ret));
			goto err_destroy_cq;
		}
	}
	ret = -ibv_req_notify_cq(vl->cq, 0);
	if (ret)
		goto err_destroy_cq;
	vl->rcq_armed = true;
	ret = smcr_qp_create(&vl->ref, pd, vl->scq, vl->cq, vl->sq_depth, vl->rq_depth,
			     &vl->qp, &vl->link.max_inline);
	if (ret)
		goto err_destroy_cq;
	vl->qp->qp_context = vl;
	vl->qpn = vl->qp->qp_num;
	ret = smcr_qp_to_init(vl->qp, &vl->ref);
	if (ret) {
		smcr_err("%s: QP to INIT: %s", dev->name, strerror(-ret));
		goto err_destroy_qp;
	}
	for (i = 0; i < vl->rq_depth; i++) {
		ret = post_recv(vl, i);
		if (ret) {
			smcr_err("%s: cannot post receive buffers: %s", dev->name,
				 strerror(-ret));
			goto err_destroy_qp;
		}
	}

	vl->res->qp = vl->qp;
	vl->res->cq = vl->cq;
	vl->res->scq = vl->scq != vl->cq ? vl->scq : NULL;
	vl->res->chan = vl->chan;
	vl->res->mr = vl->mr;
	vl->res->bufs = vl->bufs;
	vl->link.ops = &smcr_vlink_ops;
	vl->link.handler = handler;
	vl->link.handler_arg = handler_arg;
	vl->link.priv = vl;
	vl->link.dev = dev;
	vl->link.pd = pd;
	vl->link.state = SMCR_LINK_INACTIVE;
	vl->next = set->head;
	set->head = vl;
	if (vl->chan) {
		vl->id = ++set->next_id;
		vl->watched = true;
		chan_watch(vl, SMCR_CHAN_ADD);
	}
	*linkp = &vl->link;
	return 0;

err_destroy_qp:
	ibv_destroy_qp(vl->qp);
err_destroy_cq:
	if (vl->scq != vl->cq)
		ibv_destroy_cq(vl->scq);
	ibv_destroy_cq(vl->cq);
err_destroy_chan:
	if (vl->wait_fd >= 0)
		close(vl->wait_fd);
	if (vl->chan)
		ibv_destroy_comp_channel(vl->chan);
err_dereg_mr:
	ibv_dereg_mr(vl->mr);
err_free_bufs:
	free(vl->bufs);
err_free_sq:
	free(vl->held);
	free(vl->sq);
err_free_vl:
	if (vl->res)
		smcr_pd_put(vl->res->pd);
	free(vl->res);
	free(vl);
	return ret;
}

void smcr_vlink_local(const struct smcr_link *link, struct smcr_qp_peer *out)
{
	const struct smcr_vlink *vl = vl_of(link);

	memset(out, 0, sizeof(*out));
	out->qpn = vl->qpn;
	out->psn = vl->psn;
	memcpy(out->gid, vl->ref.gid, SMCR_GID_LEN);
	out->mtu = vl->ref.mtu;
}

unsigned int smcr_vlink_ifindex(const struct smcr_link *link)
{
	return vl_of(link)->ref.ifindex;
}

int smcr_vlink_connect(struct smcr_link *link, const struct smcr_qp_peer *peer)
{
	struct smcr_vlink *vl = vl_of(link);
	int ret;

	if (vl->down)
		return -ENOTCONN;
	ret = smcr_qp_to_rtr(vl->qp, &vl->ref, peer);
	if (ret) {
		smcr_err("%s: QP 0x%06x to RTR: %s", vl->devname,
			 vl->qpn, strerror(-ret));
		return ret;
	}
	ret = smcr_qp_to_rts(vl->qp, vl->psn, &vl->timing);
	if (ret) {
		smcr_err("%s: QP 0x%06x to RTS: %s", vl->devname,
			 vl->qpn, strerror(-ret));
		return ret;
	}
	vl->peer = *peer;
	vl->connected = true;
	return 0;
}

void smcr_vlink_res_free(struct smcr_vlink_res *res)
{
	int ret;

	if (!res)
		return;
	if (res->qp) {
		ret = ibv_destroy_qp(res->qp);
		if (ret)
			smcr_warn("%s: destroying QP: %s", res->devname, strerror(ret));
	}
	if (res->chan) {
		/* Nobody watches the channel now, and a CQ's destroy waits
		 * until its events are acknowledged: take them (no new ones
		 * once the QP is gone). */
		struct ibv_cq *cq;
		void *c;

		while (ibv_get_cq_event(res->chan, &cq, &c) == 0)
			ibv_ack_cq_events(cq, 1);
	}
	if (res->scq) {
		ret = ibv_destroy_cq(res->scq);
		if (ret)
			smcr_warn("%s: destroying CQ: %s", res->devname, strerror(ret));
	}
	if (res->cq) {
		ret = ibv_destroy_cq(res->cq);
		if (ret)
			smcr_warn("%s: destroying CQ: %s", res->devname, strerror(ret));
	}
	if (res->chan) {
		ret = ibv_destroy_comp_channel(res->chan);
		if (ret)
			smcr_warn("%s: destroying a completion channel: %s",
				  res->devname, strerror(ret));
	}
	if (res->mr)
		ibv_dereg_mr(res->mr);
	smcr_pd_put(res->pd);	/* deallocated if nothing else is in it */
	free(res->bufs);
	free(res);
}

struct smcr_dev *smcr_vlink_res_dev(const struct smcr_vlink_res *res)
{
	return res->dev;
}

/* Let go of the verbs objects (to the owner's reaper, or freed now); the
 * link struct stays.  No upcall follows. */
static void release(struct smcr_vlink *vl)
{
	struct smcr_vlink_res *res = vl->res;

	if (vl->released)
		return;
	if (vl->chan) {
		chan_watch(vl, SMCR_CHAN_DEL);
		chan_drain(vl);
		if (vl->waiter) {
			/* it sleeps on wait_fd: the fd is its to close */
			struct smcr_link_waiter *w = vl->waiter;
			uint64_t one = 1;

			w->link = NULL;
			w->fd_owned = true;
			if (w->wake_fd >= 0 && write(w->wake_fd, &one, sizeof(one)) < 0)
				smcr_dbg("link %u: waking a waiter: %s",
					 vl->link.link_id, strerror(errno));
			vl->waiter = NULL;
		} else {
			close(vl->wait_fd);
		}
		vl->wait_fd = -1;
		vl->chan = NULL;
	}
	vl->released = true;
	vl->down = true;
	vl->link.state = SMCR_LINK_FAILED;
	vl->res = NULL;
	vl->qp = NULL;
	vl->cq = NULL;
	vl->scq = NULL;
	vl->mr = NULL;
	vl->bufs = NULL;
	vl->ref.dev = NULL;
	vl->link.dev = NULL;
	vl->link.pd = NULL;
	if (!res)
		return;
	res->vl = NULL;
	if (vl->set->reaper)
		vl->set->reaper(res, vl->set->reaper_arg);
	else
		smcr_vlink_res_free(res);
}

void smcr_vlink_destroy(struct smcr_link *link)
{
	struct smcr_vlink *vl, **pp;

	if (!link)
		return;
	vl = vl_of(link);
	for (pp = &vl->set->head; *pp; pp = &(*pp)->next) {
		if (*pp == vl) {
			*pp = vl->next;
			break;
		}
	}
	release(vl);
	free(vl->held);
	free(vl->rx_held);
	free(vl->sq);
	free(vl);
}

int smcr_vlink_dev_gone(struct smcr_vlink_set *set, struct smcr_dev *dev)
{
	struct smcr_vlink *vl;
	int n = 0;

again:
	/* Down upcalls may create links elsewhere: rescan after each. */
	for (vl = set->head; vl; vl = vl->next) {
		if (vl->released || vl->ref.dev != dev)
			continue;
		if (!vl->down) {
			link_down(vl, -ENODEV, IBV_WC_SUCCESS);
			goto again;
		}
	}
	/* What the links received before their QPs stopped was acknowledged
	 * to the peer: hand it to the owner before the CQs go (the peer's
	 * failover validation counts on it). */
again_poll:
	for (vl = set->head; vl; vl = vl->next) {
		if (vl->released || vl->ref.dev != dev || vl->drained)
			continue;
		vl->drained = true;
		poll_cq(vl);
		goto again_poll;
	}
	for (vl = set->head; vl; vl = vl->next) {
		if (vl->released || vl->ref.dev != dev)
			continue;
		release(vl);
		n++;
	}
	return n;
}

const struct smcr_vlink_stats *smcr_vlink_stats(const struct smcr_link *link)
{
	return &vl_of(link)->stats;
}

struct ibv_qp *smcr_vlink_qp(const struct smcr_link *link)
{
	return vl_of(link)->qp;
}
