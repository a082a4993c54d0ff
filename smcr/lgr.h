/* SPDX-License-Identifier: BSD-3-Clause */
/* smcrbd: SMC-R link groups (RFC 7609 §2.2, §3.5.5) and their LLC flows.
 *
 * A link group joins two peers with up to SMCR_LINK_SLOTS links.  It owns
 * the connections between them (by alert token), its RMBs (never shared
 * with another group) and send buffers, and the RKeys the peer announced
 * for each of its RMBs on each link.  lgr.c holds the group: links coming
 * and going, routing of received messages, failover of connections when a
 * link dies.  llc.c holds the LLC exchanges: CONFIRM LINK, ADD LINK (+CONT),
 * DELETE LINK, CONFIRM RKEY (+CONT), DELETE RKEY, TEST LINK, serialised
 * with the collision rules of §3.5.5.3 and the timeouts of Appendix C.7.
 *
 * The group never calls verbs: it asks its owner for links and memory
 * registrations through struct smcr_lgr_ops, so the same code runs over
 * rxe, real RNICs and the unit tests' in-memory wire.
 *
 * Not thread safe: the owner serialises every call (one engine thread).
 * Functions return 0 or -errno.
 */
#ifndef SMCR_LGR_H
#define SMCR_LGR_H

#include <stdbool.h>
#include <stdint.h>

#include "conn.h"
#include "link.h"
#include "msg.h"
#include "rmb.h"

enum smcr_role {
	SMCR_ROLE_CLIENT = 0,
	SMCR_ROLE_SERVER = 1,
};

/* One end of a QP, as CLC, ADD LINK and CONFIRM LINK carry it. */
struct smcr_link_info {
	uint8_t mac[SMCR_MAC_LEN];
	uint8_t gid[SMCR_GID_LEN];
	uint32_t qpn;
	uint32_t psn;
	uint8_t mtu;			/* enum ibv_mtu / CLC encoding */
};

enum smcr_lgr_event {
	SMCR_LGR_LINK_UP,		/* a link was confirmed */
	SMCR_LGR_LINK_DOWN,		/* a link failed; connections moved */
	SMCR_LGR_LINK_DELETED,		/* DELETE LINK done, resources freed */
	SMCR_LGR_RMB_CONFIRMED,		/* our new RMB may be used (status 0) or not */
	SMCR_LGR_TERMINATED,		/* no link left: the group is dead */
};

struct smcr_lgr;

struct smcr_lgr_ops {
	/* A local link end for a new link.  peer is the other side's QP when
	 * known (client answering ADD LINK), NULL otherwise.  The owner picks
	 * a port: one the group does not use yet, or (asym) any.  Fills local.
	 * -ENODEV when there is no suitable port. */
	int (*link_create)(struct smcr_lgr *lgr, const struct smcr_link_info *peer,
			   bool asym, struct smcr_link **linkp,
			   struct smcr_link_info *local);
	/* Connect a created link to the peer's QP (RTR, RTS). */
	int (*link_connect)(struct smcr_lgr *lgr, struct smcr_link *link,
			    const struct smcr_link_info *peer);
	/* Tear a link down; no upcall for it may follow. */
	void (*link_destroy)(struct smcr_lgr *lgr, struct smcr_link *link);
	/* Register one of our buffers on the link's device: rkey and vaddr
	 * as the peer must use them on that link. */
	int (*rmb_reg)(struct smcr_lgr *lgr, struct smcr_rmb *rmb,
		       struct smcr_link *link, uint32_t *rkey, uint64_t *vaddr);
	/* Something the owner may want to know (wake-ups, counters). */
	void (*event)(struct smcr_lgr *lgr, enum smcr_lgr_event ev,
		      struct smcr_link *link, int status);
	/* Milliseconds on a monotonic clock. */
	uint64_t (*now_ms)(struct smcr_lgr *lgr);
	/* Optional: true when the peer's process is known to be gone (a
	 * connection's TCP socket ended without an SMC close: its kernel
	 * closed it).  A silent peer that is only stopped keeps its TCP
	 * sockets open. */
	bool (*peer_gone)(struct smcr_lgr *lgr);
};

enum smcr_link_policy {
	SMCR_LINKS_LEAST_LOADED = 0,	/* the active link with fewest connections */
	SMCR_LINKS_ROUND_ROBIN,		/* the active links in turn */
};

struct smcr_lgr_config {
	uint8_t max_links;		/* 2..8 symmetric links we accept */
	enum smcr_link_policy link_policy;	/* for new connections */
	/* Move connections from a busy link to a less busy one (e.g.
	 * back to a link that has returned). */
	bool rebalance;
	uint32_t llc_timeout_ms;	/* reply to an LLC request (C.7) */
	unsigned int llc_retries;	/* resends before giving up */
	uint32_t test_link_idle_ms;	/* TEST LINK after this idle time; 0: off */
	uint32_t test_link_timeout_ms;	/* no reply: the link is down */
	/* The same for the group's last link (it takes every connection
	 * with it); 0: 3 * test_link_timeout_ms.  The engine makes it at
	 * least the QPs' RC retry budget, so that a peer that stops (a VM
	 * paused) is not given up before its QP would be. */
	uint32_t last_link_timeout_ms;
	/* A tick this much later than SMCR_LGR_TICK_MS after the last is a
	 * stall of our own (host busy, VM paused): the reply deadlines move
	 * by it and links are probed again.  0: off. */
	uint32_t stall_ms;
	/* A connection that waits on something while nothing of it moves
	 * for this long is logged once with its cursors
	 * (smcr_conn_stall_check).  0: off. */
	uint32_t conn_stall_ms;
	/* A client's failed link that still acknowledges the peer (link
	 * ops->acking) waits this long, not the LLC timeouts, for the
	 * server's DELETE LINK: Linux 6.1's server deletes it only once its
	 * sends on it have completed, after the path is back. */
	uint32_t acking_keep_ms;
	/* A client's failed link whose QP still acknowledges the server
	 * (ops->acking) gets its DELETE LINK request this long after the
	 * failure, not at once: Linux 6.1's server, taking one for a link it
	 * still thinks active, switches its connections, then waits for the
	 * link's sends, and completions that come after the switch (our late
	 * acker's ACKs of its retries) set its cursors back and corrupt its
	 * stream.  Held, the acker answers first: the server's QP fails and
	 * the server deletes the link itself.  0: at once. */
	uint32_t delete_hold_ms;
	/* Leave our CONFIRM LINK without SMCR_LLC_CONFIRM_LIBSMCR: the peer
	 * takes us for Linux (tests of what only Linux peers get). */
	bool no_impl_mark;
	size_t max_rmb_bytes;		/* per pool (RMBs, send buffers); 0: unlimited */
	/* Both pools also draw on this (the context's, for every group);
	 * NULL: no limit but max_rmb_bytes. */
	struct smcr_rmb_budget *pinned;
	uint32_t link_tx_bytes;		/* written, unconfirmed per link; 0: no limit */
	/* The largest receive buffer a connection gets when none is set
	 * (sock_clc.c rmbe_auto_size). */
	uint32_t rmbe_auto_max;
	/* RMBE layout.  By default we speak Linux's (no eye catcher) and say
	 * so with CONFIRM LINK flag 0x03; the server offers it in its
	 * request, the client takes it by setting the flag in its response,
	 * and a peer that does not set it (older smcrbd, RFC-only) gets the
	 * RFC's eye catcher layout.  true: the RFC layout only, flag never
	 * set (what smcrbd did before; Linux declines 0x03050000). */
	bool rmbe_eyecatcher;
	uint8_t first_link_id;		/* server: our first link's number; 0: 1 */
};

/* Data queued on a link ahead of an LLC message: 512 KiB is ~4 ms at
 * 1 Gb/s, and on rxe under TCG with 16 streams (~1 MB/s a link each way)
 * keeps an LLC round trip near 1 s: with 2 MiB a v1 ADD LINK's steps took
 * 1.8-2 s each and the flow timed out. */
#define SMCR_LGR_LINK_TX_BYTES	(512u << 10)

/* RFC 7609's largest receive buffer, what a connection gets by default. */
#define SMCR_LGR_RMBE_AUTO_MAX	(512u << 10)

/* A peer must not make one group take all our memory. */
#define SMCR_LGR_MAX_RMB_BYTES	((size_t)256 << 20)

/* The defaults of smcr_lgr_config_default that libsmcr's settings table
 * (smcr/ctx.c knobs[]) names too. */
#define SMCR_LGR_MAX_LINKS_DEFAULT		2
#define SMCR_LGR_REBALANCE_DEFAULT		true
#define SMCR_LGR_LLC_TIMEOUT_MS_DEFAULT		2000
#define SMCR_LGR_TEST_LINK_MS_DEFAULT		1000
#define SMCR_LGR_TEST_LINK_TIMEOUT_MS_DEFAULT	2000
#define SMCR_LGR_STALL_MS_DEFAULT		500
#define SMCR_LGR_CONN_STALL_MS_DEFAULT		10000
#define SMCR_LGR_DELETE_HOLD_MS_DEFAULT		2000

extern const struct smcr_lgr_config smcr_lgr_config_default;

/* A closed connection's send buffer that writes posted on a link may still
 * read: kept until its last CDC completes there (or the link goes). */
#define SMCR_LGR_PARKED 32
struct smcr_lgr_parked {
	struct smcr_rmbe buf;		/* buf.rmb NULL: slot free */
	struct smcr_link *link;
	uint32_t token;
	uint16_t seq;			/* the last CDC posted */
};

/* A token our CLC Accept announced whose connection the peer's Confirm
 * has not made yet: the client writes as soon as its Confirm is out, and
 * its CDCs (RDMA) may arrive before the Confirm (TCP).  What they said is
 * kept for the connection (CDCs are cumulative: the newest, with any
 * consumer update request, validation or abort among them). */
#define SMCR_LGR_EARLY 16
struct smcr_lgr_early {
	uint32_t token;			/* 0: slot free */
	uint64_t order;			/* when full, the oldest goes */
	bool have;			/* msg: the newest CDC */
	bool cons_req;			/* R on any */
	bool validation;		/* F: the newest one's seqno in fo_seq */
	uint16_t fo_seq;
	bool aborted;			/* A */
	struct smcr_cdc_msg msg;
};

/* A peer's RMB, as its RKeys on our links. */
struct smcr_lgr_peer_rmb {
	bool used;
	unsigned int refs;		/* connections using it */
	struct smcr_peer_rmb r;		/* by link slot */
};

#define SMCR_LGR_MAX_PEER_RMBS 255
#define SMCR_LGR_MAX_CONNS 255

struct smcr_lgr_link {
	struct smcr_link *link;
	struct smcr_link_info local, peer;
	bool connected;			/* QP is RTS */
	bool asym;			/* reuses a port of another link */
	bool confirmed;			/* CONFIRM LINK done (it was ACTIVE) */
	uint64_t last_rx_ms;		/* anything received on it */
	uint64_t test_sent_ms;		/* TEST LINK outstanding since (0: none) */
	uint64_t test_answered_ms;	/* sent when, the last TEST LINK answered */
	/* a send or RDMA write of ours on it last completed: the peer's RC
	 * end acknowledged it (the path works, the peer's host runs) */
	uint64_t tx_ok_ms;
	uint8_t test_data[16];
	bool test_resent;		/* the probe went again at half its timeout */
	bool test_longer;		/* it waits three timeouts (smcr_llc_tick) */
	/* The group has handled this link's failure (connections moved, its
	 * DELETE LINK started) since; the link layer may have marked it
	 * FAILED before telling us, so its state alone does not say this. */
	bool down;
	uint64_t down_ms;
	bool delete_held;		/* our DELETE LINK waits (cfg.delete_hold_ms) */
};

/* Counters, as smcrctl shows them. */
struct smcr_lgr_stats {
	uint64_t llc_sent, llc_recv, llc_bad, llc_timeouts, llc_retries;
	uint64_t links_added, links_deleted, link_failures;
	uint64_t failovers;		/* connections moved to another link */
	uint64_t rkeys_confirmed, rkeys_deleted, rkey_rejects;
	uint64_t test_links;
	uint64_t rebalanced;		/* connections moved to a less busy link */
	uint64_t stalls, stall_ms;	/* our own stalls (cfg.stall_ms), their time */
	uint64_t conn_stalls;		/* connections logged by cfg.conn_stall_ms */
	uint64_t add_links_refused_max;	/* ADD LINKs refused at max_links 1 (v2.1) */
};

enum smcr_llc_flow_kind {
	SMCR_FLOW_NONE = 0,
	SMCR_FLOW_CONFIRM_LINK,		/* first link */
	SMCR_FLOW_ADD_LINK,		/* incl. CONT and CONFIRM LINK on the new link */
	SMCR_FLOW_DELETE_LINK,
	SMCR_FLOW_CONFIRM_RKEY,
	SMCR_FLOW_DELETE_RKEY,
};

/* The one configuration exchange in progress (§3.5.5.3). */
struct smcr_llc_flow {
	enum smcr_llc_flow_kind kind;
	bool local;			/* we started it */
	uint8_t slot;			/* the link it is about */
	uint8_t via;			/* the link it runs over */
	uint8_t step;
	uint64_t deadline_ms;
	unsigned int tries;
	uint8_t req[SMCR_LLC_LEN];	/* last request, for resends */
	/* The last request found the link's send queue full: it goes out
	 * from the tick (since resend_ms), without counting as a timeout. */
	bool resend;
	uint64_t resend_ms;
	/* CONFIRM RKEY answered negative (the peer was changing links): built
	 * and sent again at the tick from redo_ms, rejects times at most. */
	bool redo;
	uint64_t redo_ms;
	unsigned int rejects;
	struct smcr_rmb *rmb;		/* CONFIRM/DELETE RKEY */
	/* ADD LINK CONT bookkeeping: RMBs of ours still to announce. */
	unsigned int cont_sent, cont_total, cont_peer_left;
	bool cont_peer_done;
};

/* SMC-Rv2: how long after a failed ADD LINK the periodic retry waits: the
 * peer refused it or did not answer, or it failed on our side. */
#define SMCR_LGR_V2_ADD_LINK_BACKOFF_MS 60000
#define SMCR_LGR_V2_ADD_LINK_RETRY_MS 2000
/* Client: how long the server's ADD LINK may wait for its path (the
 * peer's address resolved on the new link's netdev); Linux waits 2 s for
 * the answer (SMC_LLC_WAIT_TIME). */
#define SMCR_LGR_ADD_LINK_PATH_WAIT_MS 1500

/* Requests waiting for the current exchange to end. */
#define SMCR_LLC_QUEUE 16
struct smcr_llc_pending {
	enum smcr_llc_flow_kind kind;
	uint8_t slot;
	uint8_t link_id;		/* DELETE LINK: the link in slot then */
	uint32_t reason;
	struct smcr_rmb *rmb;
};

struct smcr_lgr {
	enum smcr_role role;
	const struct smcr_lgr_ops *ops;
	void *owner;			/* the owner's context */
	struct smcr_lgr_config cfg;
	uint8_t peer_id[8];
	/* The owner's: a server group's TCP peer at first contact (IPv4
	 * mapped into IPv6; all zero: not known), for its per-address limit. */
	uint8_t peer_addr[16];
	uint8_t max_links;		/* negotiated in CONFIRM LINK (v2.1: CLC) */
	/* SMC-Rv2: the release of the CLC first contact (0: v2.0 or v1)
	 * and, at release 1, the connections the group takes as server
	 * (SMCR_LGR_MAX_CONNS otherwise): smcr_lgr_set_v21(). */
	uint8_t release;
	uint8_t max_conns;
	uint8_t version;		/* SMC-R version (CLC): 1, or 2 (SMC-Rv2:
					 * v2 LLC headers, RKeys in ADD LINK) */
	/* SMC-Rv2: no periodic ADD LINK before this (a Linux peer takes a
	 * second link only on its TCP source's subnet: a refused or silent
	 * ADD LINK is not tried again every second; a port event still is). */
	uint64_t add_link_after_ms;
	/* v2 client: when to ask the server for a link (REQ ADD LINK with
	 * this local GID), 0 for never; set when we refused its ADD LINK
	 * for want of a path (Linux adds links on its port events only). */
	uint64_t req_add_link_ms;
	uint8_t req_add_link_gid[SMCR_GID_LEN];
	uint64_t last_tick_ms;		/* smcr_llc_tick's last (0: none yet) */
	uint8_t rmbe_eye;		/* RMBE eye catcher bytes: 0 (Linux) or 4 (RFC) */
	/* The peer's CONFIRM LINK carried SMCR_LLC_CONFIRM_LIBSMCR: not Linux,
	 * so no delete_hold_ms. */
	bool peer_libsmcr;
	bool layout_fixed;		/* by the first CONFIRM LINK */
	bool terminated;
	/* The link our DELETE LINK (all) went on, until its send completes
	 * (smcr_llc_delete_all). */
	struct smcr_link *bye_link;
	struct smcr_lgr_link links[SMCR_LINK_SLOTS];
	struct smcr_rmb_pool rmbs;	/* ours, announced to the peer */
	struct smcr_rmb_pool sndbufs;	/* ours, local only */
	struct smcr_lgr_parked parked[SMCR_LGR_PARKED];
	/* The owner's protection domains, one per device the group has had
	 * links on (NULL for the test double): the group's QPs and buffers
	 * live there and nowhere else.  Put by smcr_lgr_destroy(). */
	struct smcr_pd *pds[SMCR_RMB_MAX_DEVS];
	/* Never freed: the used ones are peer_rmbs[0..npeer_rmbs). */
	struct smcr_lgr_peer_rmb peer_rmbs[SMCR_LGR_MAX_PEER_RMBS];
	unsigned int npeer_rmbs;
	/* Loops over conns stop at conns_end (one past the last used slot):
	 * they run on every completion. */
	struct smcr_conn *conns[SMCR_LGR_MAX_CONNS];
	unsigned int nconns, conns_end;
	unsigned int kick_next;		/* smcr_lgr_kick starts there */
	/* CLC handshakes that hold this group (and may wait with the engine
	 * lock released): the engine frees a terminated group only when
	 * neither these nor connections remain. */
	unsigned int setups;
	uint32_t next_token;
	struct smcr_lgr_early early[SMCR_LGR_EARLY];
	uint64_t early_order;
	struct smcr_llc_flow flow;
	struct smcr_llc_pending queue[SMCR_LLC_QUEUE];
	unsigned int nqueue;
	struct smcr_lgr_stats stats;
	unsigned int rr_next;		/* round robin: the slot after the last */
	uint8_t last_link_id;		/* the newest link number given out */
	struct smcr_lgr *next;		/* the owner's list */
};

/* The handler to give every link of a group (handler_arg = the group). */
extern const struct smcr_link_handler smcr_lgr_link_handler;

int smcr_lgr_create(enum smcr_role role, const struct smcr_lgr_ops *ops,
		    void *owner, const struct smcr_lgr_config *cfg,
		    struct smcr_lgr **lgrp);
/* Aborts every connection, destroys every link, frees every buffer. */
void smcr_lgr_destroy(struct smcr_lgr *lgr);

/* First contact: put the first link (created and connected by the owner
 * during CLC) in slot 0.  The server then starts CONFIRM LINK on it. */
int smcr_lgr_first_link(struct smcr_lgr *lgr, struct smcr_link *link,
			const struct smcr_link_info *local,
			const struct smcr_link_info *peer);

/* SMC-Rv2 first contact: the release and, at release 1, the limits the
 * CLC exchange settled on (max_conns 16..255, max_links 1..2): the group
 * never holds more links than max_links (at 1: no ADD LINK sent, and the
 * peer's refused), a server group takes no more than max_conns
 * connections (a new group is made for more: smcr_lgr_full()), and CONFIRM
 * LINK carries both, as Linux 6.6+ sends them. */
void smcr_lgr_set_v21(struct smcr_lgr *lgr, uint8_t release, uint8_t max_conns,
		      uint8_t max_links);

/* Server: the group takes no more connections (its max_conns reached by
 * its connections and the handshakes under way on it). */
bool smcr_lgr_full(const struct smcr_lgr *lgr);

/* Fix the group's RMBE layout (eye: 0 or SMCR_RMBE_EYE_LEN) at the first
 * CONFIRM LINK: the pools and the connections CLC set up follow it (one
 * that has already moved data is aborted). */
void smcr_lgr_set_layout(struct smcr_lgr *lgr, uint8_t eye);

/* Server: try to add a link on a port the group does not use yet (or an
 * asymmetric one); client: tell the server a new port is there.  Queued
 * behind a running exchange.  -EBUSY at the maximum number of links. */
int smcr_lgr_add_link(struct smcr_lgr *lgr);
/* Orderly removal of a link (operator command, port going away). */
int smcr_lgr_delete_link(struct smcr_lgr *lgr, uint8_t slot, uint32_t reason);

/* The group is dead: every connection is reset with error. */
void smcr_lgr_terminate(struct smcr_lgr *lgr, int error);

/* A link reported down (also called by the link handler's down upcall). */
void smcr_lgr_link_down(struct smcr_lgr *lgr, struct smcr_link *link, int reason);
/* The same; start_delete false when a DELETE LINK already runs for it. */
void smcr_lgr_link_fail(struct smcr_lgr *lgr, struct smcr_link *link, int reason,
			bool start_delete);

/* Count of links usable for data. */
unsigned int smcr_lgr_active_links(const struct smcr_lgr *lgr);
/* The link for a new connection (cfg.link_policy), or NULL. */
struct smcr_link *smcr_lgr_pick_link(struct smcr_lgr *lgr);
/* The active link with the fewest connections, or NULL. */
struct smcr_link *smcr_lgr_least_loaded(struct smcr_lgr *lgr);
/* The same among the links where conn's peer RMB has an RKey. */
struct smcr_link *smcr_lgr_least_loaded_for(struct smcr_lgr *lgr,
					     const struct smcr_conn *conn);
/* Hands a link the group let go to the owner (ops->link_destroy). */
void smcr_lgr_link_destroy(struct smcr_lgr *lgr, struct smcr_link *link);
/* Slot of a link of this group, or -1. */
int smcr_lgr_slot(const struct smcr_lgr *lgr, const struct smcr_link *link);

/* Connections.  smcr_lgr_conn_token() reserves a fresh alert token:
 * CDCs for it are kept (struct smcr_lgr_early) until smcr_lgr_conn_add()
 * adds its connection and applies them there, or
 * smcr_lgr_conn_token_drop() gives it up (the handshake failed). */
uint32_t smcr_lgr_conn_token(struct smcr_lgr *lgr);
void smcr_lgr_conn_token_drop(struct smcr_lgr *lgr, uint32_t token);
int smcr_lgr_conn_add(struct smcr_lgr *lgr, struct smcr_conn *conn);
void smcr_lgr_conn_remove(struct smcr_lgr *lgr, struct smcr_conn *conn);
struct smcr_conn *smcr_lgr_conn_find(struct smcr_lgr *lgr, uint32_t token);
/* Frees a leaving connection's send buffer, or, while CDCs it posted (and
 * the RDMA writes before them) are still on their link, parks it until
 * they complete: the QP reads a write's source when it gets to it.  Call
 * before smcr_lgr_conn_remove(). */
void smcr_lgr_sndbuf_release(struct smcr_lgr *lgr, struct smcr_conn *conn);

/* Our RMBE for a new connection.  When it comes from a new RMB, that RMB
 * is registered on every link and announced with CONFIRM RKEY: *pending is
 * set and SMCR_LGR_RMB_CONFIRMED follows; otherwise it is usable now. */
int smcr_lgr_rmbe_alloc(struct smcr_lgr *lgr, size_t want,
			struct smcr_rmbe *rmbe, bool *pending);
/* A send buffer matching a peer RMBE of elem_size bytes. */
int smcr_lgr_sndbuf_alloc(struct smcr_lgr *lgr, uint32_t elem_size,
			  struct smcr_rmbe *buf);
/* rkey/vaddr of one of our RMBs on a link (for CLC). */
int smcr_lgr_rmb_token(struct smcr_lgr *lgr, struct smcr_rmb *rmb,
		       uint8_t slot, uint32_t *rkey, uint64_t *vaddr);
/* Free RMBs no connection uses: DELETE RKEY, then free. */
int smcr_lgr_rmb_trim(struct smcr_lgr *lgr);

/* The peer's RMB announced by rkey on link slot (in CLC the first time:
 * smcr_lgr_peer_rmb_add; later via CONFIRM RKEY).  NULL if unknown. */
struct smcr_lgr_peer_rmb *smcr_lgr_peer_rmb_find(struct smcr_lgr *lgr,
						 uint8_t slot, uint32_t rkey);
struct smcr_lgr_peer_rmb *smcr_lgr_peer_rmb_add(struct smcr_lgr *lgr,
						uint8_t slot, uint32_t rkey,
						uint64_t vaddr);

/* Timers: TEST LINK on idle links, LLC reply timeouts.  Call every
 * SMCR_LGR_TICK_MS or so. */
#define SMCR_LGR_TICK_MS 100
void smcr_lgr_tick(struct smcr_lgr *lgr);

/* Send buffered work on a link that has room again (send completions). */
void smcr_lgr_kick(struct smcr_lgr *lgr, struct smcr_link *link);

/* ---- llc.c ----------------------------------------------------------- */

/* An LLC message arrived on link. */
void smcr_llc_rx(struct smcr_lgr *lgr, struct smcr_link *link,
		 const uint8_t msg[SMCR_LLC_LEN]);
/* Start or queue an exchange. */
int smcr_llc_start(struct smcr_lgr *lgr, enum smcr_llc_flow_kind kind,
		   uint8_t slot, uint32_t reason, struct smcr_rmb *rmb);
/* Deadline check of the running exchange and of TEST LINK. */
void smcr_llc_tick(struct smcr_lgr *lgr, uint64_t now);
/* "CONFIRM LINK", ..., "none": for the log. */
const char *smcr_llc_flow_name(enum smcr_llc_flow_kind k);
/* A link in slot is gone: end any exchange that depends on it. */
/* An SMC-Rv2 LLC message longer than 44 bytes (ADD LINK with RKeys). */
void smcr_llc_rx_long(struct smcr_lgr *lgr, struct smcr_link *link,
		      const uint8_t *msg, uint32_t len);
void smcr_llc_link_gone(struct smcr_lgr *lgr, uint8_t slot);
/* Send a TEST LINK request on slot. */
int smcr_llc_test_link(struct smcr_lgr *lgr, uint8_t slot);
/* TEST LINK now on every active link without one outstanding. */
void smcr_llc_probe_links(struct smcr_lgr *lgr);
/* Whether the peer answered a TEST LINK we sent at ms or later on an
 * active link of the group. */
bool smcr_lgr_answered_since(const struct smcr_lgr *lgr, uint64_t ms);
/* Our side ends the group on purpose (its process exits): DELETE LINK
 * with the all and orderly flags on the first link that takes it, so
 * that the peer ends its side at once, not after its TEST LINK limit.
 * No reply comes; lgr->bye_link is set until the send completes.
 * 0, or -ENOTCONN: no link took it. */
int smcr_llc_delete_all(struct smcr_lgr *lgr, uint32_t reason);

#endif
