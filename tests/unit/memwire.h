/* SPDX-License-Identifier: BSD-3-Clause */
/* smcrbd tests: an in-memory wire between two struct smcr_link ends, with
 * fault injection.  Work requests queue up per link and are delivered, in
 * order, by memwire_step()/memwire_run(), like an RC QP would. */
#ifndef SMCR_TESTS_MEMWIRE_H
#define SMCR_TESTS_MEMWIRE_H

#include <stdbool.h>
#include <stdint.h>

#include "link.h"

enum memwire_fault {
	MEMWIRE_OK = 0,
	/* Work requests are lost and flushed with errors: a cut cable. */
	MEMWIRE_CUT,
	/* Writes and sends complete at the sender but are never placed:
	 * the RNIC acked data the host never got (RFC 7609 §4.6.1). */
	MEMWIRE_ACK_NO_PLACE,
	/* Traffic vanishes without any completion: silent loss with the
	 * port still up (only TEST LINK notices). */
	MEMWIRE_BLACKHOLE,
};

/* A work request as the wire took it. */
struct memwire_wr {
	bool is_write;
	unsigned int flags;		/* SMCR_WR_SIGNALED, SMCR_WR_INLINE */
	uint32_t len;
};

#define MEMWIRE_CHAIN_LOG 8

struct memwire_mr {
	uint8_t *base;
	uint64_t len;
	uint32_t rkey;
};

struct memwire_end {
	struct smcr_link link;
	struct memwire_end *peer;
	struct memwire_op *head, *tail;	/* posted, not yet delivered */
	unsigned int queued;
	/* Scheduled mode (memwire_sched_*): a delivered message waits in the
	 * receiver's rx queue and a completion in the sender's cq queue until
	 * the scheduler hands each to its handler, as two CQs polled by
	 * threads that run when they are scheduled. */
	bool sched;
	struct memwire_op *rx_head, *rx_tail;	/* arrived, not yet polled */
	struct memwire_op *cq_head, *cq_tail;	/* completed, not yet polled */
	unsigned int nrx, ncq;
	bool polling;			/* inside its link's poll op */
	/* Scheduled mode, as libsmcr's caller-driven progress: completions
	 * are polled only when armed (ops->want_send_done, until the queue
	 * is empty; and while the send queue is half full, as a verbs link
	 * arms it then), with a received message (a poll takes both CQs),
	 * or once the link failed. */
	bool lazy_cq, cq_armed;
	unsigned int sq_depth;
	/* ops->post_begin depth, and what was queued since the outermost
	 * begin: at its post_end that is one doorbell (link.doorbells; a
	 * post outside a batch is one).  Nothing is delivered while a
	 * batch is open (a batch left open aborts the test). */
	unsigned int batch, batch_ops;
	/* Send queue slots, as a QP's: work requests [sq_tail, sq_head)
	 * hold one each, delivered or not, until a completion frees it and
	 * those before it: a signaled one's (in scheduled mode when it is
	 * polled), or a flush, which completes unsignaled ones too.  Work
	 * requests are flagged by smcr_link_wr_flags() (link.max_inline: 64,
	 * link.signal_every: sq_depth / 4, as on rxe; a test may change
	 * them).  Kept: the most slots held at once, the most held by work
	 * requests already delivered, posts refused for a full queue,
	 * flushes (of unsignaled ones). */
	uint64_t sq_head, sq_tail;
	unsigned int sq_max_used, sq_done_held_max;
	uint64_t sq_refused, flushed, flushed_unsignaled;
	/* The work requests of the last doorbell, in order (chain_n of
	 * them, the first MEMWIRE_CHAIN_LOG kept), and how many doorbells
	 * rang for a chain that ends with an RDMA WRITE (a message's data
	 * without its CDC). */
	struct memwire_wr chain[MEMWIRE_CHAIN_LOG];
	unsigned int chain_n;
	uint64_t chains_write_last;
	struct memwire_wr batch_log[MEMWIRE_CHAIN_LOG];
	unsigned int batch_n;
	bool batch_last_write;
	enum memwire_fault fault;
	bool failed;			/* down already reported */
	/* New work requests refused (-ENOTCONN) with the owner not told:
	 * link_verbs' QP that refused a post, down at its next poll. */
	bool refuse_posts;
	bool acking;			/* failed, it says it still acknowledges */
	unsigned int ack_offs;		/* its owner turned the acker off */
	/* Memory the peer may write into (our RMBs). */
	struct memwire_mr mrs[64];
	unsigned int nmrs;
	uint64_t delivered, bad_rkey;
};

/* One unconnected end: ops set, handler given, state INACTIVE. */
void memwire_init(struct memwire_end *e, unsigned int sq_depth,
		  const struct smcr_link_handler *h, void *arg);
/* Point e's work requests at peer (each side connects its own end). */
void memwire_connect(struct memwire_end *e, struct memwire_end *peer);
/* Connect two ends: link id and group slot are set on both. */
void memwire_pair(struct memwire_end *a, struct memwire_end *b,
		  uint8_t link_id, uint8_t slot, unsigned int sq_depth,
		  const struct smcr_link_handler *ha, void *arga,
		  const struct smcr_link_handler *hb, void *argb);
/* Expose [base, base+len) to the peer under rkey (once per rkey). */
void memwire_add_mr(struct memwire_end *e, void *base, uint64_t len, uint32_t rkey);
/* Deliver one queued work request of e (0 if none was queued). */
int memwire_step(struct memwire_end *e);
/* Deliver everything queued on all given ends until all are idle; returns
 * how many were delivered. */
unsigned long memwire_run(struct memwire_end **ends, unsigned int n);
/* Inject a fault on e's link; MEMWIRE_CUT reports the link down to both
 * ends when the next work request would be delivered. */
void memwire_fault(struct memwire_end *e, enum memwire_fault f);
void memwire_free(struct memwire_end *e);

/* A seeded scheduler over a set of ends in scheduled mode.  Each step picks
 * one of what could happen next, at random: an end's next work request
 * reaches the peer (a write is placed, a send waits in the peer's rx
 * queue, a signaled request's completion waits in the sender's cq queue),
 * an end polls its next received message, or its next completion, or the
 * test's hook runs (an application thread, a fault).  RC order is kept
 * per queue; between the queues anything goes: a send's completion before
 * the peer sees the message, a CDC seen before the completion of the one
 * sent before it, a reader that runs late.  The same seed gives the same
 * run. */
enum memwire_ev {
	MEMWIRE_EV_DELIVER,	/* an end's next work request reaches the peer */
	MEMWIRE_EV_RX,		/* an end polls its next received message */
	MEMWIRE_EV_CQ,		/* an end polls its next completion */
	MEMWIRE_EV_HOOK,	/* the test's hook: an application step */
};

struct memwire_sched {
	struct memwire_end **ends;
	unsigned int n;
	uint64_t rng;
	/* Relative weights of the kinds of event (0: never while another
	 * kind can happen). */
	unsigned int w_deliver, w_rx, w_cq, w_hook;
	/* An application step: returns true if it did something or may do
	 * something later when its turn comes again without any wire event
	 * (false: it waits for a wake-up). */
	bool (*hook)(struct memwire_sched *ms, void *arg);
	void *hook_arg;
	uint64_t steps, counts[4];
};

void memwire_sched_init(struct memwire_sched *ms, struct memwire_end **ends,
			unsigned int n, uint64_t seed);
/* A random number from the scheduler's generator (for hooks). */
uint32_t memwire_sched_rand(struct memwire_sched *ms);
/* One event; returns the kind run, or -1 when nothing can happen (every
 * queue empty and the hook waits): a stall, unless the test is done. */
int memwire_sched_step(struct memwire_sched *ms);
/* Runs wire events only (no hook) until every queue is empty. */
void memwire_sched_drain(struct memwire_sched *ms);
/* Wire events (deliveries, polls) still to happen on e. */
unsigned int memwire_pending(const struct memwire_end *e);

#endif
