/* SPDX-License-Identifier: BSD-3-Clause */
/* smcrbd: one SMC-R link as the protocol layers see it.
 *
 * The CDC, LLC and link-group logic never call verbs directly: they post
 * RDMA writes and 44-byte SENDs through struct smcr_link_ops and are told of
 * completions and received messages through the smcr_link_*() callbacks
 * below.  The product's implementation is verbs (link_verbs.c); the unit
 * tests plug in an in-memory wire with fault injection.
 *
 * Functions return 0 or -errno.
 */
#ifndef SMCR_LINK_H
#define SMCR_LINK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define SMCR_MSG_LEN 44		/* every LLC and CDC message */
/* Link slots of a group: 8 symmetric links (RFC 7609 §2.2.2) plus the one
 * asymmetric link the RFC allows. */
#define SMCR_LINK_SLOTS 9

struct smcr_link;
struct smcr_link_waiter;
struct smcr_dev;
struct smcr_pd;

/* A piece of local memory to RDMA-write from. */
struct smcr_sge {
	const void *addr;
	uint32_t len;
	uint32_t lkey;
};

enum smcr_link_state {
	SMCR_LINK_INACTIVE = 0,	/* being set up */
	SMCR_LINK_ACTIVE,	/* CONFIRM LINK done: usable for data */
	SMCR_LINK_DELETING,
	SMCR_LINK_FAILED,	/* QP in error: connections must move */
};

struct smcr_link_ops {
	/* RDMA WRITE the gathered local pieces to raddr/rkey.  When signaled,
	 * smcr_link_write_done() reports its completion with wr_id. */
	int (*post_write)(struct smcr_link *link, const struct smcr_sge *sge,
			  unsigned int nsge, uint64_t raddr, uint32_t rkey,
			  uint64_t wr_id, bool signaled);
	/* SEND one 44-byte message; smcr_link_send_done() reports it. */
	int (*post_send)(struct smcr_link *link, const void *msg, uint64_t wr_id);
	/* Force the link into the error state (fault injection, shutdown). */
	void (*fail)(struct smcr_link *link);
	/* Free send queue slots: a caller posting n work requests at once
	 * checks for n first, so that a batch is never half posted. */
	unsigned int (*sq_free)(struct smcr_link *link);
	/* Optional: deliver what has already completed on this link now
	 * (the owner drains other links before it validates a failover). */
	int (*poll)(struct smcr_link *link);
	/* Optional: SEND one SMC-Rv2 LLC message of 45..8192 bytes (one at a
	 * time: -EAGAIN while the last is in flight). */
	int (*post_send_long)(struct smcr_link *link, const void *msg, uint32_t len,
			      uint64_t wr_id);
	/* Optional, asked at every tick while the link is down: its QP
	 * still acknowledges the peer's retries, or will (a peer may wait
	 * for them before it deletes the link). */
	bool (*acking)(struct smcr_link *link);
	/* Optional, no side effects: acking() without trying anything
	 * (what the link still delivers, the peer has seen acknowledged). */
	bool (*acks_late)(const struct smcr_link *link);
	/* Optional: this down link needs no late acker (its QP stays in
	 * error; one armed goes back to error).  A server's: a Linux
	 * client clears its QP without waiting for its sends, and ACKs
	 * after it has switched its connections would complete stale CDCs
	 * and set its cursors back. */
	void (*ack_off)(struct smcr_link *link);
	/* Optional, caller-driven progress (the owner's lock held): a thread
	 * about to sleep for this link takes its completion channel from the
	 * owner's loop.  wait_begin arms the receive CQ (and the send CQ
	 * when want_send), then polls (arm, then poll: nothing completes
	 * unseen) and returns what completed (> 0: do not sleep), or
	 * -EBUSY/-EOPNOTSUPP (another thread has it; sleep as before).
	 * After it, the thread sleeps on w->fd without the lock and calls
	 * wait_end, which takes the channel's events, arms again, polls, and
	 * gives the channel back.  want_send_done arms the send CQ once: a
	 * send completion matters to someone (send completions raise no
	 * event otherwise). */
	int (*wait_begin)(struct smcr_link *link, struct smcr_link_waiter *w,
			  bool want_send);
	void (*wait_end)(struct smcr_link_waiter *w);
	void (*want_send_done)(struct smcr_link *link);
	/* Optional: one doorbell for several work requests.  Between
	 * post_begin and the matching post_end (pairs nest; only the
	 * outermost end counts), what post_write, post_send and
	 * post_send_long accept waits, in order, and post_end hands it to
	 * the device as one chain (verbs: one ibv_post_send).  Accepted is
	 * posted: should the device refuse the chain, the link goes down
	 * later, from the owner's polling (never inside post_end), and
	 * what it refused completes with a flush error. */
	void (*post_begin)(struct smcr_link *link);
	void (*post_end)(struct smcr_link *link);
};

/* A thread sleeping for a link (ops->wait_begin).  link turns NULL when
 * the link lets go of its verbs objects meanwhile; the thread then closes
 * fd if fd_owned (wait_end does).  wake_fd (an eventfd, or -1) is written
 * then. */
struct smcr_link_waiter {
	struct smcr_link *link;
	int fd;
	bool fd_owned;
	int wake_fd;
};

/* Completion and receive upcalls, driven by whoever owns the link. */
struct smcr_link_handler {
	void (*write_done)(struct smcr_link *link, uint64_t wr_id, int status);
	void (*send_done)(struct smcr_link *link, uint64_t wr_id, int status);
	void (*recv)(struct smcr_link *link, const uint8_t msg[SMCR_MSG_LEN]);
	/* Optional: an SMC-Rv2 LLC message longer than 44 bytes, whole
	 * (without it such a message goes to recv, its first 44 bytes). */
	void (*recv_long)(struct smcr_link *link, const uint8_t *msg, uint32_t len);
	/* The link is unusable (completion error, port down, fault). */
	void (*down)(struct smcr_link *link, int reason);
};

struct smcr_link {
	const struct smcr_link_ops *ops;
	const struct smcr_link_handler *handler;
	void *handler_arg;		/* owner's context (the link group) */
	void *priv;			/* the implementation's own state */
	struct smcr_dev *dev;		/* NULL for the test double */
	struct smcr_pd *pd;		/* the QP's; NULL likewise */
	enum smcr_link_state state;
	uint8_t link_id;		/* on the wire, unique in the group */
	uint8_t slot;			/* index in the group's link array */
	/* Counters; doorbells: times work requests went to the device
	 * (ibv_post_send calls, a chain of them counting once). */
	uint64_t writes, write_bytes, sends, recvs, errors;
	uint64_t doorbells;
	/* How work requests are flagged (smcr_link_wr_flags()), set by the
	 * implementation: SENDs of at most max_inline bytes (the QP's
	 * max_inline_data) go inline; a work request is signaled when its
	 * completion is wanted, and at least every signal_every-th (0: none
	 * forced), since an unsignaled one's send queue slot frees only when
	 * a later signaled one completes; unsignaled_run: posted since the
	 * last signaled one.  Counted: inline SENDs, unsignaled work
	 * requests, signals forced for slots. */
	uint32_t max_inline;
	unsigned int signal_every, unsignaled_run;
	uint64_t inline_sends, unsignaled, forced_signals;
	unsigned int nconns;		/* connections using this link */
	/* RDMA-written bytes whose CDC has not completed, and the most the
	 * group lets be (0: no limit): what is queued ahead of an LLC
	 * message (TEST LINK's reply) on the QP. */
	uint64_t tx_unacked;
	uint32_t tx_cap;
};

/* Flags of one work request (smcr_link_wr_flags()). */
#define SMCR_WR_SIGNALED	0x1u	/* completes into the CQ */
#define SMCR_WR_INLINE		0x2u	/* the payload is copied at the post */

/* The flags of the work request an implementation posts now (one that the
 * send queue takes: the counters and the run of unsignaled ones move):
 * a SEND (send) or an RDMA WRITE of len bytes whose completion the owner
 * wants or not (want_done).  Every implementation decides here. */
static inline unsigned int smcr_link_wr_flags(struct smcr_link *link, bool send,
					      uint32_t len, bool want_done)
{
	unsigned int f = 0;

	if (want_done || (link->signal_every &&
			  link->unsignaled_run + 1 >= link->signal_every)) {
		f |= SMCR_WR_SIGNALED;
		if (!want_done)
			link->forced_signals++;
		link->unsignaled_run = 0;
	} else {
		link->unsignaled_run++;
		link->unsignaled++;
	}
	if (send && len <= link->max_inline) {
		f |= SMCR_WR_INLINE;
		link->inline_sends++;
	}
	return f;
}

static inline int smcr_link_write(struct smcr_link *link,
				  const struct smcr_sge *sge, unsigned int nsge,
				  uint64_t raddr, uint32_t rkey, uint64_t wr_id,
				  bool signaled)
{
	unsigned int i;

	link->writes++;
	for (i = 0; i < nsge; i++)
		link->write_bytes += sge[i].len;
	return link->ops->post_write(link, sge, nsge, raddr, rkey, wr_id,
				     signaled);
}

static inline int smcr_link_send(struct smcr_link *link, const void *msg,
				 uint64_t wr_id)
{
	link->sends++;
	return link->ops->post_send(link, msg, wr_id);
}

static inline void smcr_link_post_begin(struct smcr_link *link)
{
	if (link->ops->post_begin)
		link->ops->post_begin(link);
}

static inline void smcr_link_post_end(struct smcr_link *link)
{
	if (link->ops->post_end)
		link->ops->post_end(link);
}

#endif
