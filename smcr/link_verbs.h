/* SPDX-License-Identifier: BSD-3-Clause */
/* smcrbd: the product's struct smcr_link_ops over one RC QP (libibverbs).
 *
 * Per link: one CQ bound to the device's completion channel (dev->chan), an
 * RC QP, a ring of registered 44-byte receive buffers that is always posted
 * (each buffer is posted again as soon as its message has been handed to the
 * owner), a ring of registered 44-byte send slots, and per-work-request
 * accounting of the send queue: an unsignaled RDMA write keeps its slot until
 * a later signaled work request completes, so sq_free() counts exactly what
 * the QP can still take; every signal_every-th work request is signaled even
 * when the caller did not ask for it, so that slots always come back
 * (smcr_link_wr_flags() flags each one; a CDC or LLC SEND is signaled and,
 * up to the QP's max_inline_data, inline).
 *
 * Completions are dispatched to the owner's struct smcr_link_handler:
 * recv() with the 44 bytes; send_done()/write_done() with 0 or -errno
 * (write_done only for writes posted signaled).  A completion error other
 * than a flush, an async QP error, a port error on the link's port, a fatal
 * device error, or smcr_link_ops.fail() make the link FAILED: its QP goes to
 * the error state at once (so that nothing it still carries is placed after
 * the owner has replayed it elsewhere), handler->down() is called exactly
 * once, and everything outstanding then completes with flush errors.  A
 * completion in error comes for unsignaled work requests too (IBTA; rxe
 * flushes every WQE): it frees their slots and makes no upcall.  A device
 * that flushed signaled ones only would lose nothing either: every
 * unsignaled write of a connection is followed by its signaled CDC, and
 * what the owner replays it counts from the CDCs that completed.
 *
 * Independent of link groups: the owner (a link group, or a test program)
 * supplies the handler, drives the state, and calls the event functions from
 * its event loop; nothing here busy-waits.  Not thread safe: the owner
 * serialises all calls.  Upcalls run inside smcr_vlink_cq_event() /
 * smcr_vlink_async_event() / ops->fail(); a handler may post on any link and
 * fail any link, but must not destroy a link from inside an upcall.
 *
 * The owner keeps the device (struct smcr_port_ref's dev) open for as long as
 * the link exists.  Functions return 0 or -errno.
 */
#ifndef SMCR_LINK_VERBS_H
#define SMCR_LINK_VERBS_H

#include <stdbool.h>
#include <stdint.h>

#include <infiniband/verbs.h>

#include "dev.h"
#include "link.h"

struct smcr_vlink;
struct smcr_vlink_res;

/* Every verbs link of one owner: what the async event dispatcher searches
 * for the links of a port or device. */
struct smcr_vlink_set {
	struct smcr_vlink *head;
	/* Port and device events, after the links they take down are down
	 * (IBV_EVENT_PORT_ACTIVE so that a link group can re-add links,
	 * PORT_ERR, DEVICE_FATAL with port 0, GID or LID changes, ...);
	 * NULL to ignore them. */
	void (*port_event)(struct smcr_dev *dev, uint8_t port,
			   enum ibv_event_type event, void *arg);
	void *port_event_arg;
	/* Optional: takes over the verbs objects of a destroyed (or released)
	 * link and calls smcr_vlink_res_free() on them later, from any thread
	 * and without the owner's lock: destroying a QP may sleep until the
	 * device has sent what it had queued, seconds on a port that is down.
	 * The device must stay open until then.  NULL: freed at once. */
	void (*reaper)(struct smcr_vlink_res *res, void *arg);
	void *reaper_arg;
	/* Totals of every link's fault_* counters (struct smcr_vlink_stats). */
	uint64_t fault_held, fault_discarded, fault_held_recvs;
	/* Links kept as late ackers, the peer's requests they refused. */
	uint64_t ackers, acker_refused;
	/* Caller-driven progress (set before the first link): every link
	 * gets a completion channel of its own and a send CQ apart from its
	 * receive CQ (struct smcr_link_ops' wait_begin).  chan_watch tells
	 * the owner's loop to add a link's channel fd (tagged with id for
	 * smcr_vlink_chan_event()), to stop or resume watching it while a
	 * caller has it, and to forget it. */
	bool own_chan;
	void (*chan_watch)(int fd, uint64_t id, int op, void *arg);
	void *chan_watch_arg;
	uint64_t next_id;
};

enum { SMCR_CHAN_ADD, SMCR_CHAN_ON, SMCR_CHAN_OFF, SMCR_CHAN_DEL };

/* The verbs objects of one link (QP, CQ, buffers), see set->reaper. */
void smcr_vlink_res_free(struct smcr_vlink_res *res);
struct smcr_dev *smcr_vlink_res_dev(const struct smcr_vlink_res *res);

struct smcr_vlink_attr {
	unsigned int sq_depth;		/* send queue slots; 0: 128 */
	unsigned int rq_depth;		/* receive buffers; 0: 64 */
	unsigned int signal_every;	/* 0: sq_depth / 4 */
	/* NULL: smcr_qp_timing_default.  A retry count above 6 is taken as 6:
	 * rxe retries forever at 7. */
	const struct smcr_qp_timing *timing;
};

/* Link counters beyond those of struct smcr_link. */
struct smcr_vlink_stats {
	uint64_t cq_events, completions;
	/* Work requests the QP took (link.doorbells: in how many posts;
	 * link.inline_sends, link.forced_signals: how they were flagged). */
	uint64_t posted;
	uint64_t flushed;		/* completions with a flush error */
	uint64_t bad_recvs;		/* messages that were not 44 bytes */
	/* Injected faults: work requests held back (delayed or dropped),
	 * held ones never sent because the link went down (they complete
	 * with a flush error), messages received and delivered late. */
	uint64_t fault_held, fault_discarded, fault_held_recvs;
	/* Down, its QP back in RTS to acknowledge the peer's retries
	 * (refusing what is new: acker_refused SENDs seen). */
	bool acker;
	uint64_t acker_refused;
	int down_reason;		/* -errno given to handler->down, or 0 */
	enum ibv_wc_status down_wc_status;	/* when a completion took it down */
};

void smcr_vlink_set_init(struct smcr_vlink_set *set);

/* Create a link on ref's device and port: CQ on dev->chan (armed), RC QP in
 * INIT in pd (a PD on ref's device; the link takes a reference, kept until
 * its QP is destroyed) with all receive buffers, registered in pd too,
 * posted, a random initial send PSN.  The
 * link is INACTIVE; link_id, slot and state are the owner's to set (ACTIVE
 * once it has confirmed the link, e.g. after CONFIRM LINK).  The completion channel's and the async event fd are made
 * non-blocking.  *linkp is the link the protocol layers use. */
int smcr_vlink_create(struct smcr_vlink_set *set, const struct smcr_port_ref *ref,
		      struct smcr_pd *pd, const struct smcr_vlink_attr *attr,
		      const struct smcr_link_handler *handler, void *handler_arg,
		      struct smcr_link **linkp);

/* What the peer needs to connect to this link: QPN, initial PSN, GID, MTU. */
void smcr_vlink_local(const struct smcr_link *link, struct smcr_qp_peer *out);
/* The ifindex of the local GID's netdev (0 if none): where the peer's
 * address must be resolved for RTR. */
unsigned int smcr_vlink_ifindex(const struct smcr_link *link);

/* INIT -> RTR -> RTS towards the peer (the state is left to the owner). */
int smcr_vlink_connect(struct smcr_link *link, const struct smcr_qp_peer *peer);

/* Destroy the QP, CQ and buffers (no upcalls; outstanding work is simply
 * dropped; through set->reaper if there is one) and unlink it from its
 * set.  NULL is a no-op. */
void smcr_vlink_destroy(struct smcr_link *link);

/* The device is gone (removed, or a fatal error): every link on it goes
 * down (handler->down() as for any failure, once), then its QP, CQ and
 * buffers are let go of at once (set->reaper) so that the device can be
 * closed.  The
 * struct smcr_link stays valid until smcr_vlink_destroy(): FAILED, posting
 * fails with -ENOTCONN, link->dev is NULL, and no upcall follows (the
 * flushes of what was outstanding are never reported).  Call it from the
 * event loop, not from an upcall.  Returns the number of links released. */
int smcr_vlink_dev_gone(struct smcr_vlink_set *set, struct smcr_dev *dev);

/* Drain the device's completion channel: for every CQ event, ack, re-arm
 * and poll its CQ until empty, dispatching upcalls.  Call when dev->chan->fd
 * is readable.  Every CQ on dev->chan must be a link's (smcr_vlink_create).
 * Returns the number of completions processed. */
int smcr_vlink_cq_event(struct smcr_dev *dev);

/* set->own_chan: the channel of link id is readable (the owner's loop);
 * as smcr_vlink_cq_event() for that link.  An id no longer there: 0. */
int smcr_vlink_chan_event(struct smcr_vlink_set *set, uint64_t id);
/* An application thread takes the link's completions itself from now on
 * (set->own_chan): *id is the link's id; with want_fd the return is a new
 * fd of the channel to poll (the caller's to close), else 0; -EOPNOTSUPP
 * without a channel.  While anyone holds it, the owner's loop stops
 * watching it.  unhold gives one hold back (a link no longer there:
 * nothing).
 * held: someone holds it; id: the link's id (0: no channel of its own
 * now).  serve takes the channel's events, arms the
 * CQs (the send CQ too with want_send) and polls them: the completions
 * taken, as smcr_vlink_chan_event(). */
int smcr_vlink_hold(struct smcr_link *link, uint64_t *id, bool want_fd);
void smcr_vlink_unhold(struct smcr_vlink_set *set, uint64_t id);
bool smcr_vlink_fd_held(const struct smcr_link *link);
uint64_t smcr_vlink_id(const struct smcr_link *link);
int smcr_vlink_serve(struct smcr_link *link, bool want_send);

/* Drain the device's async events (dev->ctx->async_fd readable): QP and CQ
 * errors take their link down, IBV_EVENT_PORT_ERR every link of set on that
 * port, IBV_EVENT_DEVICE_FATAL every link of set on the device; then every
 * port and device event (PORT_ACTIVE, PORT_ERR, DEVICE_FATAL with port 0,
 * GID_CHANGE, ...) goes to set->port_event.  Events of QPs and CQs that are
 * not links of set are ignored.  Returns the number of events processed. */
int smcr_vlink_async_event(struct smcr_vlink_set *set, struct smcr_dev *dev);

/* Fault injection on a live link.  DROP: the link goes silent as a cut
 * wire with the port up would: nothing posted reaches the QP, received
 * messages are held back (the RNIC acknowledged them, so they are given to
 * the owner, in order, when the drop ends or before the link goes down),
 * and once the oldest held request, or received message (the peer's
 * request, which would fail over there), has waited as long as the QP's
 * RC retries last, the link goes down with a retry error (a real silent
 * loss under load).  DELAY: every work request is
 * posted delay_ms late, in order.  NONE: back to normal; what is held is
 * posted now.  for_ms > 0 ends the fault by itself.  When the link goes
 * down, held requests complete with a flush error after those posted
 * before them, as a real QP's would (they go to the QP in the error
 * state).  -ENOTCONN on a link that is down. */
enum smcr_vlink_fault_kind {
	SMCR_VLINK_FAULT_NONE = 0,
	SMCR_VLINK_FAULT_DROP,
	SMCR_VLINK_FAULT_DELAY,
};
int smcr_vlink_fault(struct smcr_link *link, enum smcr_vlink_fault_kind kind,
		     uint32_t delay_ms, uint32_t for_ms);
/* Post what is due, end an expired fault; the owner calls it every few
 * milliseconds while it returns true. */
bool smcr_vlink_fault_tick(struct smcr_link *link);
/* The fault the link is under (NONE once it has ended or the link is down). */
enum smcr_vlink_fault_kind smcr_vlink_fault_get(const struct smcr_link *link);

/* Poll one link's CQ until empty without waiting for an event, dispatching
 * upcalls.  May be called from an upcall of another link; on a link whose
 * CQ is being polled already it returns 0 (completions stay in order).
 *
 * A link group needs this before it hands a failover validation CDC
 * (RFC 7609 §4.6.1) to smcr_conn_rx_cdc(): the peer saw its messages on the
 * old link acknowledged, so they are in that link's CQ here, but maybe not
 * yet processed when the validation CDC arrives on another link first.
 * Drain the group's other links, then validate; otherwise Sequence
 * Received < Sequence Sent and the connection is reset although nothing was
 * lost (seen on rxe: reset after a forced QP error). */
int smcr_vlink_poll(struct smcr_link *link);

const struct smcr_vlink_stats *smcr_vlink_stats(const struct smcr_link *link);
/* The link's QP (for diagnostics and tests). */
struct ibv_qp *smcr_vlink_qp(const struct smcr_link *link);

extern const struct smcr_link_ops smcr_vlink_ops;

#endif
