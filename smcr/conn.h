/* SPDX-License-Identifier: BSD-3-Clause */
/* smcrbd: one SMC-R connection's data path (RFC 7609 §4): cursors, RDMA
 * writes into the peer's RMBE followed by a CDC message, window updates
 * (§4.5.1), close and abort (§4.8), failover validation and replay (§4.6).
 *
 * The receive side is our RMBE, which the peer writes into.  The send side
 * is a local send buffer laid out exactly like the peer's RMBE: data sits at
 * the offset it will have in the peer's RMBE, so the bytes of every write the
 * peer has not confirmed are still at hand for a replay on another link.
 *
 * Cursors here are offsets into RMBE data areas; on the wire they are
 * offsets into the whole RMBE (A.4): 4 more in the RFC's layout (the eye
 * catcher), the same in Linux's (no eye catcher).  The layout is the link
 * group's (smcr/rmb.h), the same for both RMBEs of a connection.
 *
 * Not thread safe: the link group's owner serialises all calls.  Functions
 * return 0 (or a byte count) on success and -errno on failure.
 */
#ifndef SMCR_CONN_H
#define SMCR_CONN_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/uio.h>

#include "cursor.h"
#include "link.h"
#include "msg.h"
#include "rmb.h"

/* Where one RMB of the peer is on each link of the group. */
struct smcr_peer_rmb {
	uint64_t vaddr[SMCR_LINK_SLOTS];
	uint32_t rkey[SMCR_LINK_SLOTS];
};

/* Send queue slots of a link that connections leave to LLC messages. */
#define SMCR_CONN_SQ_RESERVE 4

/* CDC messages posted but not yet completed, per connection. */
#define SMCR_CONN_INFLIGHT 32

/* The peer's last CDCs applied, kept to read its failover validation by:
 * twice the 16 sends Linux 6.1 keeps in flight on a link. */
#define SMCR_CONN_RX_HIST 32

/* Work request ids of CDC sends: the alert token, a tag, the seqno. */
#define SMCR_WR_TAG_CDC		0x1u
#define SMCR_WR_TAG_CDC_UNTRACKED 0x2u	/* failover validation, abort */
#define SMCR_WR_TAG_LLC		0x3u
#define SMCR_WR_TAG_WRITE	0x4u	/* RDMA write of data */
static inline uint64_t smcr_wr_id(uint32_t token, unsigned int tag, uint16_t seq)
{
	return (uint64_t)token << 32 | (uint64_t)tag << 16 | seq;
}
static inline uint32_t smcr_wr_token(uint64_t id) { return (uint32_t)(id >> 32); }
static inline unsigned int smcr_wr_tag(uint64_t id) { return (id >> 16) & 0xffff; }
static inline uint16_t smcr_wr_seq(uint64_t id) { return (uint16_t)id; }

/* smcr_conn_poll() bits. */
#define SMCR_POLLIN	0x1u	/* data to read, or end of stream */
#define SMCR_POLLOUT	0x2u	/* room to write */
#define SMCR_POLLHUP	0x4u	/* the peer is done writing */
#define SMCR_POLLERR	0x8u	/* aborted: calls return conn->error */

struct smcr_conn_stats {
	uint64_t bytes_sent, bytes_recv;
	uint64_t cdc_sent, cdc_recv, cdc_stale;
	uint64_t writes;
	uint64_t window_updates;	/* CDCs sent only to move the window */
	uint64_t blocked;		/* times we ran out of peer window */
	uint64_t corked;		/* sends held for a CDC in flight */
	uint64_t failovers, replayed_bytes;
	uint64_t prod_rewinds;		/* producer cursor behind one taken (Linux after a failover) */
	uint64_t cons_held;		/* consumer cursor held at the peer's rewound producer */
};

struct smcr_conn {
	struct smcr_link *link;		/* the link we send on */
	uint32_t token;			/* ours: the peer puts it in its CDCs */
	uint32_t peer_token;
	int error;			/* set once aborted (-ECONNRESET ...) */
	/* Called on every change the application may wait for. */
	void (*notify)(struct smcr_conn *conn, void *arg);
	void *notify_arg;

	/* receive side: our RMBE */
	struct smcr_rmbe rmbe;
	struct smcr_cdc_cursor rx_prod;		/* what the peer has written */
	struct smcr_cdc_cursor rx_cons;		/* what we have consumed */
	struct smcr_cdc_cursor rx_cons_sent;	/* consumer cursor last sent */
	uint16_t rx_seq;			/* last CDC applied: also SR */
	/* Linux 6.1 rewinds its producer cursor at a failover (to its last
	 * completed CDC, smc_switch_cursor) and, told of a consumer cursor
	 * beyond it, writes past the end of our RMBE (smc_tx_rdma_writes).
	 * So the consumer cursor we send never passes rx_peer_prod: the
	 * peer's producer cursor as far as we know it, lowered when it
	 * rewinds or may have. */
	struct smcr_cdc_cursor rx_peer_prod;
	struct smcr_cdc_cursor rx_cons_acked;	/* in our last CDC that completed */
	const struct smcr_link *rx_link;	/* the peer's CDCs come on it */
	struct {
		uint16_t seq;
		struct smcr_cdc_cursor prod;
	} rx_hist[SMCR_CONN_RX_HIST];		/* ring of the last CDCs applied */
	unsigned int rx_hist_next, rx_hist_n;
	bool peer_blocked;			/* B seen: update on every consume */
	bool peer_cons_req;			/* R seen */
	bool cons_req_out;			/* R on our next CDC */
	bool peer_done;				/* D seen: end of stream */
	bool peer_closed;			/* C seen */
	bool peer_aborted;			/* A seen */
	bool urg_pending, urg_present;		/* P, U seen (data stays in order) */

	/* send side: the peer's RMBE, mirrored by sndbuf */
	struct smcr_rmbe sndbuf;
	const struct smcr_peer_rmb *peer_rmb;
	uint32_t peer_offset;			/* of the element's data area in the RMB */
	uint32_t tx_len;			/* peer's RMBE data area */
	uint32_t peer_base;			/* of the element in the peer's RMB */
	uint8_t rx_eye, tx_eye;			/* eye catcher bytes: ours, the peer's */
	struct smcr_cdc_cursor tx_fill;		/* accepted from the application */
	struct smcr_cdc_cursor tx_prod;		/* RDMA-written */
	struct smcr_cdc_cursor tx_prod_sent;	/* announced in a CDC */
	struct smcr_cdc_cursor tx_peer_cons;	/* peer's consumer cursor */
	uint16_t tx_seq;			/* last seqno sent */
	uint16_t ss;				/* Sequence Sent (§4.6.1) */
	struct smcr_cdc_cursor ss_prod;		/* producer cursor of SS */
	struct {
		uint16_t seq;
		struct smcr_cdc_cursor prod;
		struct smcr_cdc_cursor cons;	/* our consumer cursor in it */
		uint32_t bytes;			/* written before it (link->tx_unacked) */
	} inflight[SMCR_CONN_INFLIGHT];
	uint32_t tx_unannounced;		/* written since the last CDC */
	unsigned int inflight_head, inflight_n;
	bool blocked;				/* we are out of window (B) */
	bool cdc_due;				/* a CDC must go out */
	bool want_done, done_sent;		/* D */
	bool want_close, closed_sent;		/* C */
	bool abort_sent;			/* A */
	bool fo_pending;			/* failover validation CDC due */
	/* Autocork: while a CDC of ours is in flight, data below this (and
	 * half the peer's RMBE) waits for its completion (0: off; the
	 * owner sets it after smcr_conn_init). */
	uint32_t tx_cork;
	/* Rebalancing: the link to send on once nothing of ours is
	 * outstanding on the current one (smcr_conn_move). */
	struct smcr_link *move_to;
	unsigned int moves;		/* done, not yet counted by the group */

	/* Stall detector (smcr_conn_stall_check): what the cursors and
	 * seqnos were when they last moved, since when, and whether this
	 * stall has been reported. */
	uint64_t stall_sig, stall_since_ms;
	bool stall_logged;

	struct smcr_conn_stats stats;
};

struct smcr_conn_params {
	uint32_t token, peer_token;
	struct smcr_rmbe rmbe;			/* ours, allocated and registered */
	struct smcr_rmbe sndbuf;		/* data_len must equal the peer's */
	const struct smcr_peer_rmb *peer_rmb;
	uint8_t peer_index;			/* 1-based, from CLC */
	uint32_t peer_elem_size;		/* from CLC, the whole element */
	struct smcr_link *link;
};

/* Set up a connection in the ACTIVE state.  -EINVAL if the send buffer does
 * not match the peer's RMBE. */
int smcr_conn_init(struct smcr_conn *conn, const struct smcr_conn_params *p);

/* The link group's layout was fixed (first CONFIRM LINK) after the
 * connection was set up: take the RMBE and send buffer layout from their
 * RMBs again (smcr_rmb_pool_set_layout).  -EBUSY once data has moved. */
int smcr_conn_relayout(struct smcr_conn *conn);

/* Stall detector, called from the group's tick at now_ms: a connection
 * that waits on something (data or a CDC not yet out, CDCs posted and not
 * completed, no window) while neither its cursors nor its seqnos move for
 * limit_ms gets one line in the log with both directions' cursors and
 * what is pending; again only after it has moved.  true when it logged. */
bool smcr_conn_stall_check(struct smcr_conn *conn, uint64_t now_ms, uint32_t limit_ms);

/* Application side. */
ssize_t smcr_conn_send(struct smcr_conn *conn, const void *buf, size_t len);
/* Zero copy: up to two pieces of free send space at the fill cursor (the
 * second when it wraps); returns their total size, or -errno. */
ssize_t smcr_conn_reserve(struct smcr_conn *conn, struct iovec iov[2]);
/* Hand n bytes of the reserved space to the peer. */
int smcr_conn_commit(struct smcr_conn *conn, size_t n);
/* Copy out and consume; 0 at end of stream, -EAGAIN when nothing is there. */
ssize_t smcr_conn_recv(struct smcr_conn *conn, void *buf, size_t len);
/* Zero copy: up to two pieces of received data; returns their total size
 * (0 at end of stream), -EAGAIN when nothing is there, or -errno. */
ssize_t smcr_conn_peek(struct smcr_conn *conn, struct iovec iov[2]);
int smcr_conn_consume(struct smcr_conn *conn, size_t n);
/* The reader waits for more: a CDC with our consumer cursor now if it
 * moved since the last one; with request, one in any case, asking for
 * the peer's cursor (R).  1: a CDC went out (or is queued), 0: none due. */
int smcr_conn_cursor_update(struct smcr_conn *conn, bool request);
/* No more data from us (SHUT_WR): D goes out once all data is written. */
int smcr_conn_shutdown(struct smcr_conn *conn);
/* Done with the connection: C goes out once all data is written. */
int smcr_conn_close(struct smcr_conn *conn);
/* Abnormal close: A goes out, everything pending is dropped. */
void smcr_conn_abort(struct smcr_conn *conn, int error);
unsigned int smcr_conn_poll(const struct smcr_conn *conn);
/* Both sides are done with the RMBEs: the owner may free them. */
bool smcr_conn_finished(const struct smcr_conn *conn);

/* Link group side. */
/* Post what is pending: data, then a CDC if one is due.  -EAGAIN when the
 * link's send queue is full (call again after a completion). */
int smcr_conn_flush(struct smcr_conn *conn);
/* Something is waiting to be posted (data, a CDC, failover validation):
 * the link group calls smcr_conn_flush() again when its link has room. */
bool smcr_conn_tx_pending(const struct smcr_conn *conn);
/* A CDC of ours is in flight and its completion would move something on
 * (data or a close waiting to go, a move): the link's send completions
 * matter (struct smcr_link_ops' want_send_done). */
bool smcr_conn_wants_tx_done(const struct smcr_conn *conn);
/* A CDC for this connection arrived on link via (NULL: not known).  A
 * message that fails validation aborts the connection (and only it) and
 * returns -EPROTO. */
int smcr_conn_rx_cdc_on(struct smcr_conn *conn, const struct smcr_cdc_msg *m,
			struct smcr_link *via);
/* The same, on the connection's own link. */
int smcr_conn_rx_cdc(struct smcr_conn *conn, const struct smcr_cdc_msg *m);
/* A CDC send of ours completed (status 0) or failed. */
void smcr_conn_cdc_done(struct smcr_conn *conn, uint16_t seq, int status);
/* Move the connection to another link: send the failover validation CDC
 * and replay every write the peer has not confirmed. */
int smcr_conn_failover(struct smcr_conn *conn, struct smcr_link *link);

/* Move the connection to another active link without a failover: at once
 * when none of its writes and CDCs is outstanding, else it posts nothing
 * more on the old link and moves when the last of them completes (its
 * next CDC, with cumulative cursors, goes on the new link); each move
 * done adds one to conn->moves.  Not while a failover's validation is
 * due.  Returns true if it moved at once. */
bool smcr_conn_move(struct smcr_conn *conn, struct smcr_link *to);
/* The link is going away: a move onto it is called off, and if the peer
 * sent on it, our consumer cursor is held to what it has surely seen until
 * its failover validation (or a CDC on a live link) says where it is. */
void smcr_conn_link_gone(struct smcr_conn *conn, const struct smcr_link *link);

/* Bytes RDMA-written on conn->link whose CDC has not completed. */
uint64_t smcr_conn_unacked(const struct smcr_conn *conn);

/* Bytes readable now / free send space now. */
uint32_t smcr_conn_rx_avail(const struct smcr_conn *conn);
uint32_t smcr_conn_tx_space(const struct smcr_conn *conn);

#endif
