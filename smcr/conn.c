/* SPDX-License-Identifier: BSD-3-Clause */
/* smcrbd: one SMC-R connection's data path (RFC 7609 §4). */
#include <config.h>

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "conn.h"
#include "log.h"

static inline uint32_t rx_len(const struct smcr_conn *conn)
{
	return conn->rmbe.data_len;
}

uint32_t smcr_conn_rx_avail(const struct smcr_conn *conn)
{
	return (uint32_t)smcr_cursor_diff(rx_len(conn), &conn->rx_cons,
					  &conn->rx_prod);
}

uint32_t smcr_conn_tx_space(const struct smcr_conn *conn)
{
	uint64_t used = smcr_cursor_diff(conn->tx_len, &conn->tx_peer_cons,
					 &conn->tx_fill);

	return used >= conn->tx_len ? 0 : conn->tx_len - (uint32_t)used;
}

static void conn_notify(struct smcr_conn *conn)
{
	if (conn->notify)
		conn->notify(conn, conn->notify_arg);
}

/* The consumer cursor our CDCs carry: never past the peer's producer
 * cursor (struct smcr_conn, rx_peer_prod). */
static struct smcr_cdc_cursor cons_out(const struct smcr_conn *conn)
{
	if (smcr_cursor_cmp(rx_len(conn), &conn->rx_cons, &conn->rx_peer_prod) > 0)
		return conn->rx_peer_prod;
	return conn->rx_cons;
}

static void peer_prod_lower(struct smcr_conn *conn, const struct smcr_cdc_cursor *c)
{
	if (smcr_cursor_cmp(rx_len(conn), c, &conn->rx_peer_prod) >= 0)
		return;
	conn->rx_peer_prod = *c;
	/* A cursor sent beyond it may be lost: the next one that passes
	 * this goes out (cons_news). */
	if (smcr_cursor_cmp(rx_len(conn), &conn->rx_cons_sent, c) > 0)
		conn->rx_cons_sent = *c;
	if (smcr_cursor_cmp(rx_len(conn), &conn->rx_cons, c) > 0) {
		conn->stats.cons_held++;
		smcr_dbg("conn %08x: consumer cursor held at %u:%u (consumed %u:%u)",
			 conn->token, c->wrap, c->count, conn->rx_cons.wrap, conn->rx_cons.count);
	}
}

/* Has our consumer cursor moved past the one last sent? */
static bool cons_news(const struct smcr_conn *conn)
{
	struct smcr_cdc_cursor c = cons_out(conn);

	return smcr_cursor_cmp(rx_len(conn), &c, &conn->rx_cons_sent) > 0;
}

int smcr_conn_init(struct smcr_conn *conn, const struct smcr_conn_params *p)
{
	struct smcr_rmbe rx, tx;
	uint8_t tx_eye;

	/* The elements as their RMBs' layout has them now (it may have been
	 * fixed since they were taken). */
	if (!p->rmbe.rmb || !p->sndbuf.rmb ||
	    smcr_rmbe_get(p->rmbe.rmb, p->rmbe.index, &rx) ||
	    smcr_rmbe_get(p->sndbuf.rmb, p->sndbuf.index, &tx))
		return -EINVAL;
	tx_eye = tx.rmb->eye_len;
	if (p->peer_elem_size <= tx_eye || tx.data_len != p->peer_elem_size - tx_eye ||
	    p->peer_index < 1 || !p->link || !p->peer_rmb)
		return -EINVAL;
	/* The element's end must be addressable in 32 bits: an index beyond
	 * one large element (a 512 MiB element is alone in its RMB in Linux)
	 * would wrap the offset of our RDMA writes. */
	if ((uint64_t)p->peer_index * p->peer_elem_size > UINT32_MAX)
		return -EINVAL;
	memset(conn, 0, sizeof(*conn));
	conn->token = p->token;
	conn->peer_token = p->peer_token;
	conn->rmbe = rx;
	conn->sndbuf = tx;
	conn->peer_rmb = p->peer_rmb;
	conn->peer_base = (uint32_t)(p->peer_index - 1) * p->peer_elem_size;
	conn->rx_eye = rx.rmb->eye_len;
	conn->tx_eye = tx_eye;
	conn->peer_offset = conn->peer_base + tx_eye;
	conn->tx_len = tx.data_len;
	conn->link = p->link;
	conn->link->nconns++;
	/* The first CDC carries seqno 1 (A.4); nothing is confirmed yet. */
	conn->tx_seq = 0;
	conn->ss = 0;
	conn->rx_seq = 0;
	return 0;
}

int smcr_conn_relayout(struct smcr_conn *conn)
{
	static const struct smcr_cdc_cursor zero;
	struct smcr_rmbe rx, tx;

	if (memcmp(&conn->rx_prod, &zero, sizeof(zero)) ||
	    memcmp(&conn->tx_fill, &zero, sizeof(zero)) || conn->tx_seq || conn->rx_seq)
		return -EBUSY;
	if (smcr_rmbe_get(conn->rmbe.rmb, conn->rmbe.index, &rx) ||
	    smcr_rmbe_get(conn->sndbuf.rmb, conn->sndbuf.index, &tx))
		return -EINVAL;
	conn->rmbe = rx;
	conn->sndbuf = tx;
	conn->rx_eye = rx.rmb->eye_len;
	conn->tx_eye = tx.rmb->eye_len;
	conn->tx_len = tx.data_len;
	conn->peer_offset = conn->peer_base + conn->tx_eye;
	return 0;
}

/* ---- sending ------------------------------------------------------------ */

/* A data-area offset as a wire cursor count (A.4). */
static uint32_t wire_count(uint8_t eye, uint32_t count)
{
	return count + eye;
}

static void cdc_fill(const struct smcr_conn *conn, struct smcr_cdc_msg *m)
{
	struct smcr_cdc_cursor cons = cons_out(conn);

	memset(m, 0, sizeof(*m));
	m->token = conn->peer_token;
	m->prod.wrap = conn->tx_prod.wrap;
	m->prod.count = wire_count(conn->tx_eye, conn->tx_prod.count);
	m->cons.wrap = cons.wrap;
	m->cons.count = wire_count(conn->rx_eye, cons.count);
	m->writer_blocked = conn->blocked;
	m->peer_done_writing = conn->done_sent;
	m->peer_conn_closed = conn->closed_sent;
	m->peer_abort = conn->abort_sent;
	m->cons_update_req = conn->cons_req_out;
}

/* Post one CDC with the current state; the caller has checked for room. */
static int cdc_post(struct smcr_conn *conn)
{
	uint8_t buf[SMCR_CDC_LEN];
	struct smcr_cdc_msg m;
	unsigned int slot;
	uint16_t seq = (uint16_t)(conn->tx_seq + 1);
	int ret;

	if (conn->inflight_n >= SMCR_CONN_INFLIGHT)
		return -EAGAIN;
	cdc_fill(conn, &m);
	m.seqno = seq;
	smcr_cdc_encode(&m, buf, sizeof(buf));
	ret = smcr_link_send(conn->link, buf,
			     smcr_wr_id(conn->token, SMCR_WR_TAG_CDC, seq));
	if (ret)
		return ret;
	conn->tx_seq = seq;
	slot = (conn->inflight_head + conn->inflight_n) % SMCR_CONN_INFLIGHT;
	conn->inflight[slot].seq = seq;
	conn->inflight[slot].prod = conn->tx_prod;
	conn->inflight[slot].cons = cons_out(conn);
	conn->inflight[slot].bytes = conn->tx_unannounced;
	conn->tx_unannounced = 0;
	conn->inflight_n++;
	conn->tx_prod_sent = conn->tx_prod;
	conn->rx_cons_sent = conn->inflight[slot].cons;
	conn->peer_cons_req = false;
	conn->cons_req_out = false;
	conn->cdc_due = false;
	conn->stats.cdc_sent++;
	return 0;
}

/* RDMA-write [tx_prod, tx_fill) into the peer's RMBE: one write, or two
 * when the range wraps. */
static int data_post(struct smcr_conn *conn, unsigned int *nposted)
{
	uint64_t n = smcr_cursor_diff(conn->tx_len, &conn->tx_prod, &conn->tx_fill);
	struct smcr_link *link = conn->link;
	uint32_t slot = link->slot;
	uint32_t lkey, off = conn->tx_prod.count;
	unsigned int i = 0;
	int ret;

	*nposted = 0;
	if (n == 0)
		return 0;
	lkey = link->pd ? smcr_rmb_lkey(conn->sndbuf.rmb, link->pd) : 0;
	while (n > 0) {
		uint32_t chunk = conn->tx_len - off;
		struct smcr_sge sge;

		if (chunk > n)
			chunk = (uint32_t)n;
		smcr_dbg("conn %08x: write %u bytes at %u, link %u rkey %08x raddr %llx",
			 conn->token, chunk, off, link->link_id,
			 conn->peer_rmb->rkey[slot],
			 (unsigned long long)(conn->peer_rmb->vaddr[slot] + conn->peer_offset + off));
		sge.addr = conn->sndbuf.data + off;
		sge.len = chunk;
		sge.lkey = lkey;
		ret = smcr_link_write(link, &sge, 1,
				      conn->peer_rmb->vaddr[slot] + conn->peer_offset + off,
				      conn->peer_rmb->rkey[slot],
				      smcr_wr_id(conn->token, SMCR_WR_TAG_WRITE, 0), false);
		if (ret)
			return ret;
		smcr_cursor_advance(conn->tx_len, &conn->tx_prod, chunk);
		conn->tx_unannounced += chunk;
		link->tx_unacked += chunk;
		conn->stats.writes++;
		conn->stats.bytes_sent += chunk;
		n -= chunk;
		off = 0;
		i++;
	}
	*nposted = i;
	return 0;
}

/* The failover validation CDC: "I saw seqno SS acknowledged" (§4.6.1). */
static int fo_post(struct smcr_conn *conn)
{
	uint8_t buf[SMCR_CDC_LEN];
	struct smcr_cdc_msg m;
	int ret;

	memset(&m, 0, sizeof(m));
	m.token = conn->peer_token;
	m.seqno = conn->ss;
	m.failover_validation = true;
	smcr_cdc_encode(&m, buf, sizeof(buf));
	ret = smcr_link_send(conn->link, buf,
			     smcr_wr_id(conn->token, SMCR_WR_TAG_CDC_UNTRACKED, conn->ss));
	if (ret == 0)
		conn->fo_pending = false;
	return ret;
}

/* All data accepted from the application has been written and announced. */
static bool tx_drained(const struct smcr_conn *conn)
{
	return smcr_cursor_cmp(conn->tx_len, &conn->tx_prod, &conn->tx_fill) == 0;
}

bool smcr_conn_tx_pending(const struct smcr_conn *conn)
{
	if (conn->abort_sent || conn->peer_aborted || conn->error)
		return false;
	/* D and C count too: a close that found the send queue full set
	 * neither cdc_due nor left data, and the next completion must still
	 * send it. */
	return conn->fo_pending || conn->cdc_due || !tx_drained(conn) ||
	       (conn->want_done && !conn->done_sent) ||
	       (conn->want_close && !conn->closed_sent);
}

bool smcr_conn_wants_tx_done(const struct smcr_conn *conn)
{
	return conn->inflight_n && (smcr_conn_tx_pending(conn) || conn->move_to ||
				    conn->want_close || conn->want_done);
}

uint64_t smcr_conn_unacked(const struct smcr_conn *conn)
{
	uint64_t n = conn->tx_unannounced;
	unsigned int i;

	for (i = 0; i < conn->inflight_n; i++)
		n += conn->inflight[(conn->inflight_head + i) % SMCR_CONN_INFLIGHT].bytes;
	return n;
}

/* The connection leaves its link: its unconfirmed writes no longer count
 * there (a failover replays them; a move has none). */
static void conn_unacked_drop(struct smcr_conn *conn)
{
	uint64_t n = smcr_conn_unacked(conn);

	if (conn->link)
		conn->link->tx_unacked -= n < conn->link->tx_unacked ?
					  n : conn->link->tx_unacked;
	conn->tx_unannounced = 0;
	for (unsigned int i = 0; i < SMCR_CONN_INFLIGHT; i++)
		conn->inflight[i].bytes = 0;
}

static void conn_move_now(struct smcr_conn *conn)
{
	struct smcr_link *to = conn->move_to;

	conn->move_to = NULL;
	conn_unacked_drop(conn);
	if (conn->link)
		conn->link->nconns--;
	conn->link = to;
	to->nconns++;
	conn->moves++;
}

bool smcr_conn_move(struct smcr_conn *conn, struct smcr_link *to)
{
	/* (Not before a failover's validation CDC has gone out.) */
	if (conn->error || conn->abort_sent || conn->peer_aborted ||
	    conn->fo_pending || to == conn->link)
		return false;
	conn->move_to = to;
	if (conn->inflight_n)
		return false;	/* smcr_conn_cdc_done moves it */
	conn_move_now(conn);
	if (smcr_conn_tx_pending(conn))
		smcr_conn_flush(conn);
	return true;
}

void smcr_conn_link_gone(struct smcr_conn *conn, const struct smcr_link *link)
{
	if (conn->move_to == link)
		conn->move_to = NULL;
	/* The peer may have rewound already and our next CDC cross its
	 * validation: hold to a cursor it has seen (so its own, at least). */
	if (conn->rx_link == link) {
		conn->rx_link = NULL;
		peer_prod_lower(conn, &conn->rx_cons_acked);
	}
}

static int flush_post(struct smcr_conn *conn, bool data);

int smcr_conn_flush(struct smcr_conn *conn)
{
	struct smcr_link *link;
	bool data;
	int ret;

	if (conn->abort_sent || conn->peer_aborted || conn->error)
		return 0;
	if (conn->closed_sent && !conn->cdc_due)
		return 0;
	data = !tx_drained(conn);
	if (conn->move_to) {
		/* Moving: nothing more on the old link until what is on it
		 * has completed (not -EAGAIN: that would stop the group
		 * kicking the link's other connections). */
		if (conn->inflight_n) {
			conn->cdc_due = conn->cdc_due || data;
			return 0;
		}
		conn_move_now(conn);
	}
	link = conn->link;
	/* Two writes at most plus the CDC (after a failover, the validation
	 * CDC first), posted as one batch; a few slots stay free for LLC
	 * messages, which must not wait behind data. */
	if (link->ops->sq_free &&
	    link->ops->sq_free(link) < (data ? 3u : 1u) + conn->fo_pending +
				       SMCR_CONN_SQ_RESERVE) {
		if (data)
			conn->cdc_due = true;
		/* The slots come back with send completions (an unsignaled
		 * write's with the CDC after it): someone must take them. */
		if (link->ops->want_send_done)
			link->ops->want_send_done(link);
		return -EAGAIN;
	}
	if (conn->inflight_n >= SMCR_CONN_INFLIGHT) {
		conn->cdc_due = conn->cdc_due || data;
		return -EAGAIN;
	}
	/* Enough data queued on the link already: an LLC reply posted now
	 * would wait behind it all.  The next CDC completion kicks us. */
	if (data && link->tx_cap && link->tx_unacked >= link->tx_cap) {
		conn->cdc_due = true;
		return -EAGAIN;
	}
	/* The validation, the writes and the CDC: one doorbell. */
	smcr_link_post_begin(link);
	ret = flush_post(conn, data);
	smcr_link_post_end(link);
	return ret;
}

/* smcr_conn_flush's posts, in a batch on conn->link. */
static int flush_post(struct smcr_conn *conn, bool data)
{
	unsigned int n;
	int ret;

	if (conn->fo_pending) {
		ret = fo_post(conn);
		if (ret)
			return ret;
	}
	if (data) {
		ret = data_post(conn, &n);
		if (ret) {
			smcr_warn("conn %08x: RDMA write failed: %s", conn->token,
				  strerror(-ret));
			return ret;
		}
		conn->cdc_due = true;
	}
	if (tx_drained(conn)) {
		if (conn->want_done && !conn->done_sent) {
			conn->done_sent = true;
			conn->cdc_due = true;
		}
		if (conn->want_close && !conn->closed_sent) {
			conn->closed_sent = true;
			conn->done_sent = true;
			conn->cdc_due = true;
		}
	}
	if (!conn->cdc_due)
		return 0;
	return cdc_post(conn);
}

static int conn_usable_for_send(const struct smcr_conn *conn)
{
	if (conn->error)
		return conn->error;
	if (conn->want_done || conn->want_close)
		return -EPIPE;
	if (conn->peer_closed)
		return -EPIPE;
	return 0;
}

ssize_t smcr_conn_reserve(struct smcr_conn *conn, struct iovec iov[2])
{
	uint32_t space, off, first;
	int ret = conn_usable_for_send(conn);

	if (ret)
		return ret;
	space = smcr_conn_tx_space(conn);
	if (space == 0 && !conn->blocked) {
		/* Tell the peer once that we wait for window (B bit). */
		conn->blocked = true;
		conn->cdc_due = true;
		conn->stats.blocked++;
		smcr_conn_flush(conn);
	}
	off = conn->tx_fill.count;
	first = conn->tx_len - off;
	if (first > space)
		first = space;
	iov[0].iov_base = conn->sndbuf.data + off;
	iov[0].iov_len = first;
	iov[1].iov_base = conn->sndbuf.data;
	iov[1].iov_len = space - first;
	return space;
}

/* Autocork: a CDC of ours is in flight and what waits to be written is
 * small (under tx_cork and half the peer's RMBE): leave it; that CDC's
 * completion flushes it (smcr_conn_cdc_done), so a run of small sends
 * becomes one write and one CDC.  Anything else due goes now. */
static bool conn_corked(const struct smcr_conn *conn)
{
	uint32_t lim = conn->tx_cork < conn->tx_len / 2 ? conn->tx_cork : conn->tx_len / 2;

	if (!conn->tx_cork || !conn->inflight_n || conn->cdc_due || conn->fo_pending ||
	    conn->move_to || conn->want_done || conn->want_close)
		return false;
	return smcr_cursor_diff(conn->tx_len, &conn->tx_prod, &conn->tx_fill) < lim;
}

int smcr_conn_commit(struct smcr_conn *conn, size_t n)
{
	int ret = conn_usable_for_send(conn);

	if (ret)
		return ret;
	if (n > smcr_conn_tx_space(conn))
		return -EINVAL;
	if (n == 0)
		return 0;
	smcr_cursor_advance(conn->tx_len, &conn->tx_fill, n);
	if (conn_corked(conn)) {
		conn->stats.corked++;
		return 0;
	}
	/* The data is accepted: a full send queue only delays it, and a
	 * link that refuses posts (down, or going down at its next poll)
	 * is the group's to fail over, which replays it (a write that
	 * failed otherwise is logged by flush_post).  Only the
	 * connection's own end is the caller's error. */
	smcr_conn_flush(conn);
	return conn->error;
}

ssize_t smcr_conn_send(struct smcr_conn *conn, const void *buf, size_t len)
{
	struct iovec iov[2];
	ssize_t space = smcr_conn_reserve(conn, iov);
	size_t n, first;
	int ret;

	if (space < 0)
		return space;
	if (len == 0)
		return 0;
	if (space == 0)
		return -EAGAIN;
	n = len < (size_t)space ? len : (size_t)space;
	first = n < iov[0].iov_len ? n : iov[0].iov_len;
	memcpy(iov[0].iov_base, buf, first);
	memcpy(iov[1].iov_base, (const uint8_t *)buf + first, n - first);
	if (conn->blocked) {
		conn->blocked = false;
		conn->cdc_due = true;
	}
	ret = smcr_conn_commit(conn, n);
	return ret ? ret : (ssize_t)n;
}

int smcr_conn_shutdown(struct smcr_conn *conn)
{
	if (conn->error)
		return conn->error;
	conn->want_done = true;
	conn->blocked = false;
	smcr_conn_flush(conn);
	return 0;
}

int smcr_conn_close(struct smcr_conn *conn)
{
	if (conn->error)
		return 0;
	conn->want_done = true;
	conn->want_close = true;
	conn->blocked = false;
	smcr_conn_flush(conn);
	return 0;
}

void smcr_conn_abort(struct smcr_conn *conn, int error)
{
	uint8_t buf[SMCR_CDC_LEN];
	struct smcr_cdc_msg m;

	if (!conn->error)
		conn->error = error ? error : -ECONNABORTED;
	if (!conn->abort_sent && !conn->peer_aborted && !conn->closed_sent) {
		/* Best effort: tell the peer we will not touch its RMBE again. */
		conn->abort_sent = true;
		cdc_fill(conn, &m);
		m.seqno = (uint16_t)(conn->tx_seq + 1);
		smcr_cdc_encode(&m, buf, sizeof(buf));
		if (smcr_link_send(conn->link, buf,
				   smcr_wr_id(conn->token, SMCR_WR_TAG_CDC_UNTRACKED, m.seqno)) == 0)
			conn->tx_seq = m.seqno;
	}
	conn->abort_sent = true;
	conn_notify(conn);
}

/* ---- receiving ---------------------------------------------------------- */

ssize_t smcr_conn_peek(struct smcr_conn *conn, struct iovec iov[2])
{
	uint32_t avail = smcr_conn_rx_avail(conn);
	uint32_t off = conn->rx_cons.count, first;

	if (conn->error)
		return conn->error;
	if (avail == 0)
		return conn->peer_done ? 0 : -EAGAIN;
	first = rx_len(conn) - off;
	if (first > avail)
		first = avail;
	iov[0].iov_base = conn->rmbe.data + off;
	iov[0].iov_len = first;
	iov[1].iov_base = conn->rmbe.data;
	iov[1].iov_len = avail - first;
	return avail;
}

/* Should consuming lead to a CDC now? (§4.5.1) */
static bool window_update_due(const struct smcr_conn *conn)
{
	uint32_t len = rx_len(conn);
	struct smcr_cdc_cursor cons = cons_out(conn);
	uint64_t sender_used, gain;

	if (!cons_news(conn))
		return false;
	if (conn->peer_blocked || conn->peer_cons_req)
		return true;
	/* The window the sender sees is below half the buffer, and this
	 * update opens it by at least a tenth. */
	sender_used = smcr_cursor_diff(len, &conn->rx_cons_sent, &conn->rx_prod);
	gain = smcr_cursor_diff(len, &conn->rx_cons_sent, &cons);
	return (len - sender_used) * 2 < len && gain * 10 >= len;
}

int smcr_conn_consume(struct smcr_conn *conn, size_t n)
{
	if (conn->error)
		return conn->error;
	if (n > smcr_conn_rx_avail(conn))
		return -EINVAL;
	if (n == 0)
		return 0;
	smcr_cursor_advance(rx_len(conn), &conn->rx_cons, n);
	conn->stats.bytes_recv += n;
	if (window_update_due(conn)) {
		conn->cdc_due = true;
		conn->stats.window_updates++;
		smcr_conn_flush(conn);
	}
	return 0;
}

int smcr_conn_cursor_update(struct smcr_conn *conn, bool request)
{
	int ret;

	if (conn->error)
		return conn->error;
	if (conn->abort_sent || conn->peer_aborted || conn->closed_sent)
		return 0;
	if (!request && !cons_news(conn))
		return 0;
	conn->cons_req_out = conn->cons_req_out || request;
	conn->cdc_due = true;
	ret = smcr_conn_flush(conn);
	/* A full send queue only delays it (the next completion sends it),
	 * and a link that refuses posts fails over, which sends it. */
	return ret == -EAGAIN || ret == -ENOTCONN || ret == 0 ? 1 : ret;
}

ssize_t smcr_conn_recv(struct smcr_conn *conn, void *buf, size_t len)
{
	struct iovec iov[2];
	ssize_t avail = smcr_conn_peek(conn, iov);
	size_t n, first;
	int ret;

	if (avail <= 0)
		return avail;
	n = len < (size_t)avail ? len : (size_t)avail;
	first = n < iov[0].iov_len ? n : iov[0].iov_len;
	memcpy(buf, iov[0].iov_base, first);
	memcpy((uint8_t *)buf + first, iov[1].iov_base, n - first);
	ret = smcr_conn_consume(conn, n);
	return ret ? ret : (ssize_t)n;
}

/* A wire cursor into an RMBE of eye + data_len bytes, as a data-area
 * cursor. */
static bool cursor_from_wire(uint8_t eye, uint32_t data_len,
			     const struct smcr_cdc_cursor *w, struct smcr_cdc_cursor *c)
{
	if (w->count < eye || w->count - eye >= data_len)
		return false;
	c->wrap = w->wrap;
	c->count = w->count - eye;
	return true;
}

static int cdc_reject(struct smcr_conn *conn, const char *why)
{
	smcr_warn("conn %08x: bad CDC from peer (%s): aborting the connection",
		  conn->token, why);
	smcr_conn_abort(conn, -EPROTO);
	return -EPROTO;
}

/* Where the peer's producer cursor went at its failover: 6.1 rewinds to
 * the cursor its last completed CDC carried, and its validation CDC
 * names that CDC's seqno less one (smc_cdc_add_pending_send keeps the
 * seqno before the increment); ours names it exactly and replays from
 * there or later.  So: the cursor of the last CDC applied up to that
 * seqno plus one, and never below what the peer has surely seen. */
static struct smcr_cdc_cursor peer_fin(const struct smcr_conn *conn, uint16_t seq)
{
	struct smcr_cdc_cursor fin = conn->rx_cons_acked;
	uint16_t upto = (uint16_t)(seq + 1);
	int best = -1;
	unsigned int i;

	for (i = 0; i < conn->rx_hist_n; i++) {
		uint16_t s = conn->rx_hist[i].seq;

		if (!smcr_seq_after(s, upto) &&
		    (best < 0 || smcr_seq_after(s, conn->rx_hist[best].seq)))
			best = (int)i;
	}
	if (best >= 0 && smcr_cursor_cmp(rx_len(conn), &conn->rx_hist[best].prod, &fin) > 0)
		fin = conn->rx_hist[best].prod;
	return fin;
}

int smcr_conn_rx_cdc(struct smcr_conn *conn, const struct smcr_cdc_msg *m)
{
	return smcr_conn_rx_cdc_on(conn, m, conn->link);
}

int smcr_conn_rx_cdc_on(struct smcr_conn *conn, const struct smcr_cdc_msg *m,
			struct smcr_link *via)
{
	struct smcr_cdc_cursor prod, cons, peer_prod;
	uint32_t len = rx_len(conn);
	/* What a link we gave up on still had queued (not a late acker's,
	 * whose ACKs the peer sees) may be ahead of where the peer rewinds
	 * to: such a cursor only lowers rx_peer_prod. */
	bool live = !via || (via->state != SMCR_LINK_FAILED &&
			     via->state != SMCR_LINK_DELETING) ||
		    (via->ops->acks_late && via->ops->acks_late(via));
	int64_t back;

	if (m->token != conn->token)
		return cdc_reject(conn, "alert token");
	if (conn->abort_sent || conn->peer_aborted)
		return 0;
	conn->stats.cdc_recv++;
	if (m->failover_validation) {
		struct smcr_cdc_cursor fin;

		/* §4.6.1: the sender saw seqno m->seqno acknowledged; if we
		 * have not processed it, data was lost. */
		if (smcr_seq_before(conn->rx_seq, m->seqno)) {
			smcr_warn("conn %08x: failover lost data (received %u, peer sent %u)",
				  conn->token, conn->rx_seq, m->seqno);
			smcr_conn_abort(conn, -ECONNRESET);
			return -ECONNRESET;
		}
		fin = peer_fin(conn, m->seqno);
		/* The peer's producer cursor is at fin now: it rewound to it
		 * (Linux, smc_switch_cursor) or replays from there or later
		 * (ours).  Below what we held it at (smcr_conn_link_gone) it
		 * lowers the hold; above, it lifts it: Linux 6.12 that filled
		 * our RMBE before the switch waits for window and sends
		 * nothing more, and a cursor held below fin would leave both
		 * ends waiting for good (vm/kernel-v2-6.12 (b) under load,
		 * our link 1 failed by TEST LINK). */
		if (smcr_cursor_cmp(len, &fin, &conn->rx_peer_prod) > 0)
			conn->rx_peer_prod = fin;
		else
			peer_prod_lower(conn, &fin);
		if (live)
			conn->rx_link = via;
		/* 6.1 sends nothing after its switch while it has no window:
		 * what we may announce now goes out now. */
		if (cons_news(conn)) {
			conn->cdc_due = true;
			smcr_conn_flush(conn);
		}
		return 0;
	}
	if (m->peer_abort) {
		if (!conn->error) {
			smcr_info("conn %08x: the peer aborted the connection", conn->token);
			conn->error = -ECONNRESET;
		}
		conn->peer_aborted = true;
		conn_notify(conn);
		return 0;
	}
	/* Old messages may be lost, never applied after newer ones. */
	if (!smcr_seq_after(m->seqno, conn->rx_seq)) {
		conn->stats.cdc_stale++;
		return 0;
	}
	if (!cursor_from_wire(conn->rx_eye, len, &m->prod, &prod))
		return cdc_reject(conn, "producer cursor outside the RMBE");
	if (!cursor_from_wire(conn->tx_eye, conn->tx_len, &m->cons, &cons))
		return cdc_reject(conn, "consumer cursor outside the RMBE");
	peer_prod = prod;
	/* After a failover Linux rewinds its producer cursor to its last
	 * completed CDC and writes again from there (smc_switch_cursor), so a
	 * CDC may carry a cursor behind one we took: no new data.  More than
	 * an RMBE back is no rewind. */
	back = smcr_cursor_dist(len, &conn->rx_prod, &prod);
	if (back < -(int64_t)len)
		return cdc_reject(conn, "producer cursor moved backwards");
	if (back < 0) {
		smcr_dbg("conn %08x: producer cursor %lld bytes back: no new data",
			 conn->token, (long long)-back);
		conn->stats.prod_rewinds++;
		prod = conn->rx_prod;
	}
	if (smcr_cursor_dist(len, &conn->rx_cons, &prod) > (int64_t)len)
		return cdc_reject(conn, "producer cursor overruns unread data");
	/* Our own consumer cursor after a failover may be behind one we sent
	 * (rx_peer_prod): keep ours.  More than an RMBE back is no such. */
	back = smcr_cursor_dist(conn->tx_len, &conn->tx_peer_cons, &cons);
	if (back < -(int64_t)conn->tx_len)
		return cdc_reject(conn, "consumer cursor moved backwards");
	if (back < 0)
		cons = conn->tx_peer_cons;
	/* After a failover tx_prod went back to the last confirmed write;
	 * the peer may have consumed beyond it (its CDC was on its way), but
	 * never beyond what the application gave us. */
	if (smcr_cursor_dist(conn->tx_len, &cons, &conn->tx_fill) < 0)
		return cdc_reject(conn, "consumer cursor beyond what was written");
	if (!smcr_rmbe_intact(&conn->rmbe))
		return cdc_reject(conn, "RMBE eye catcher overwritten");

	conn->rx_seq = m->seqno;
	conn->rx_prod = prod;
	conn->rx_hist[conn->rx_hist_next].seq = m->seqno;
	conn->rx_hist[conn->rx_hist_next].prod = peer_prod;
	conn->rx_hist_next = (conn->rx_hist_next + 1) % SMCR_CONN_RX_HIST;
	if (conn->rx_hist_n < SMCR_CONN_RX_HIST)
		conn->rx_hist_n++;
	if (live) {
		conn->rx_link = via;
		conn->rx_peer_prod = peer_prod;
	} else {
		peer_prod_lower(conn, &peer_prod);
	}
	conn->tx_peer_cons = cons;
	if (smcr_cursor_cmp(conn->tx_len, &cons, &conn->tx_prod) > 0) {
		/* What the peer consumed needs no replay. */
		uint64_t skip = smcr_cursor_diff(conn->tx_len, &conn->tx_prod, &cons);

		conn->stats.replayed_bytes -= skip < conn->stats.replayed_bytes ?
					      skip : conn->stats.replayed_bytes;
		conn->stats.bytes_sent += skip;
		conn->tx_prod = cons;
	}
	conn->peer_blocked = m->writer_blocked;
	conn->peer_cons_req = conn->peer_cons_req || m->cons_update_req;
	conn->urg_pending = m->urg_pending;
	conn->urg_present = m->urg_present;
	if (m->peer_done_writing)
		conn->peer_done = true;
	if (m->peer_conn_closed) {
		conn->peer_done = true;
		conn->peer_closed = true;
	}
	/* A blocked writer, or a request, wants our cursor at once. */
	if (window_update_due(conn) || (conn->peer_cons_req && cons_news(conn)))
		conn->cdc_due = true;
	/* Window opened for a blocked writer of ours, or data is pending. */
	if (conn->blocked && smcr_conn_tx_space(conn) > 0) {
		conn->blocked = false;
		conn->cdc_due = true;
	}
	smcr_conn_flush(conn);
	conn_notify(conn);
	return 0;
}

void smcr_conn_cdc_done(struct smcr_conn *conn, uint16_t seq, int status)
{
	unsigned int i;

	if (status)
		return;		/* the link group fails the link over */
	/* Completions arrive in order; drop everything up to seq. */
	for (i = 0; i < conn->inflight_n; i++) {
		unsigned int slot = (conn->inflight_head + i) % SMCR_CONN_INFLIGHT;
		unsigned int j;

		if (conn->inflight[slot].seq != seq)
			continue;
		for (j = 0; j <= i; j++) {
			uint32_t b = conn->inflight[(conn->inflight_head + j) %
						    SMCR_CONN_INFLIGHT].bytes;

			conn->link->tx_unacked -= b < conn->link->tx_unacked ?
						  b : conn->link->tx_unacked;
		}
		conn->ss = seq;
		conn->ss_prod = conn->inflight[slot].prod;
		conn->rx_cons_acked = conn->inflight[slot].cons;
		conn->inflight_head = (slot + 1) % SMCR_CONN_INFLIGHT;
		conn->inflight_n -= i + 1;
		break;
	}
	if (conn->cdc_due || !tx_drained(conn) ||
	    (conn->move_to && !conn->inflight_n))
		smcr_conn_flush(conn);
	conn_notify(conn);
}

int smcr_conn_failover(struct smcr_conn *conn, struct smcr_link *link)
{
	struct smcr_cdc_cursor from;
	uint64_t replay;
	int ret;

	conn_unacked_drop(conn);
	if (conn->link)
		conn->link->nconns--;
	conn->link = link;
	link->nconns++;
	conn->move_to = NULL;
	/* The old link's QP is in error: what was posted on it is flushed. */
	conn->inflight_n = 0;
	if (conn->abort_sent || conn->peer_aborted)
		return 0;
	conn->stats.failovers++;
	/* Replay from the last confirmed write (or from what the peer has
	 * already consumed, if that is further) under a new seqno (§4.6.2). */
	from = conn->ss_prod;
	if (smcr_cursor_cmp(conn->tx_len, &conn->tx_peer_cons, &from) > 0)
		from = conn->tx_peer_cons;
	if (smcr_cursor_cmp(conn->tx_len, &from, &conn->tx_prod) < 0) {
		replay = smcr_cursor_diff(conn->tx_len, &from, &conn->tx_prod);
		conn->stats.replayed_bytes += replay;
		conn->stats.bytes_sent -= replay;
		conn->tx_prod = from;
	}
	conn->fo_pending = true;
	/* The flags already sent go out again with the replayed state. */
	conn->cdc_due = true;
	ret = smcr_conn_flush(conn);
	/* A link that refuses posts goes down at its next poll and the
	 * connection moves on again from there. */
	if (ret == -EAGAIN || ret == -ENOTCONN)
		return 0;
	if (ret)
		smcr_warn("conn %08x: failover to link %u failed: %s", conn->token,
			  link->link_id, strerror(-ret));
	return ret;
}

unsigned int smcr_conn_poll(const struct smcr_conn *conn)
{
	unsigned int ev = 0;

	if (conn->error)
		return SMCR_POLLERR | SMCR_POLLIN | SMCR_POLLOUT;
	if (smcr_conn_rx_avail(conn) > 0 || conn->peer_done)
		ev |= SMCR_POLLIN;
	if (conn->peer_done)
		ev |= SMCR_POLLHUP;
	if (!conn->want_done && smcr_conn_tx_space(conn) > 0)
		ev |= SMCR_POLLOUT;
	return ev;
}

bool smcr_conn_finished(const struct smcr_conn *conn)
{
	/* After an abort, from either side, neither touches the RMBEs again. */
	if (conn->abort_sent || conn->peer_aborted)
		return true;
	return conn->closed_sent && conn->inflight_n == 0 && conn->peer_closed;
}

/* ---- stall detector ----------------------------------------------------- */

static uint64_t mix(uint64_t h, uint64_t v)
{
	return (h ^ v) * 0x100000001b3ull;
}

static uint64_t cursor_mix(uint64_t h, const struct smcr_cdc_cursor *c)
{
	return mix(h, (uint64_t)c->wrap << 32 | c->count);
}

/* What moves when the connection makes progress either way. */
static uint64_t stall_sig(const struct smcr_conn *conn)
{
	uint64_t h = 0xcbf29ce484222325ull;

	h = cursor_mix(h, &conn->tx_fill);
	h = cursor_mix(h, &conn->tx_prod);
	h = cursor_mix(h, &conn->tx_peer_cons);
	h = cursor_mix(h, &conn->rx_prod);
	h = cursor_mix(h, &conn->rx_cons);
	h = mix(h, (uint64_t)conn->tx_seq << 16 | conn->rx_seq);
	h = mix(h, (uint64_t)conn->ss << 8 | conn->inflight_n);
	return mix(h, (uintptr_t)conn->link);
}

static const char *link_state_name(const struct smcr_link *l)
{
	if (!l)
		return "none";
	switch (l->state) {
	case SMCR_LINK_INACTIVE: return "inactive";
	case SMCR_LINK_ACTIVE: return "active";
	case SMCR_LINK_DELETING: return "deleting";
	case SMCR_LINK_FAILED: return "failed";
	}
	return "?";
}

bool smcr_conn_stall_check(struct smcr_conn *conn, uint64_t now_ms, uint32_t limit_ms)
{
	uint64_t sig = stall_sig(conn);
	bool unsent = !tx_drained(conn) || conn->cdc_due || conn->fo_pending ||
		      conn->move_to;
	bool no_window = smcr_conn_tx_space(conn) == 0;
	struct smcr_cdc_cursor out = cons_out(conn);
	const struct smcr_link *l = conn->link;
	char why[96];

	if (sig != conn->stall_sig || !conn->stall_since_ms) {
		conn->stall_sig = sig;
		conn->stall_since_ms = now_ms ? now_ms : 1;
		conn->stall_logged = false;
		return false;
	}
	if (!limit_ms || conn->stall_logged || conn->error || conn->abort_sent ||
	    conn->peer_aborted || now_ms - conn->stall_since_ms < limit_ms)
		return false;
	/* Idle both ways, or only our reader behind: not a stall. */
	if (!unsent && !conn->inflight_n && !no_window && !conn->blocked)
		return false;
	conn->stall_logged = true;
	snprintf(why, sizeof(why), "%s%s%s%s%s",
		 unsent ? "data or a CDC unsent" : "",
		 unsent && (conn->inflight_n || no_window) ? ", " : "",
		 conn->inflight_n ? "CDCs not completed" : "",
		 conn->inflight_n && no_window ? ", " : "",
		 no_window || (!unsent && !conn->inflight_n) ? "no window" : "");
	smcr_info("conn %08x: no progress for %llu ms with %s: link %u (%s, %u conns, sq free %d, "
		  "unconfirmed %llu); tx fill %u:%u prod %u:%u announced %u:%u peer cons %u:%u, "
		  "space %u of %u, seq %u ss %u ss prod %u:%u, %u CDC(s) in flight%s%s%s%s; "
		  "rx prod %u:%u cons %u:%u sent %u:%u out %u:%u acked %u:%u peer prod %u:%u, "
		  "seq %u, peer link %u%s%s%s",
		  conn->token, (unsigned long long)(now_ms - conn->stall_since_ms), why,
		  l ? l->link_id : 0, link_state_name(l), l ? l->nconns : 0,
		  l && l->ops && l->ops->sq_free ? (int)l->ops->sq_free((struct smcr_link *)l) : -1,
		  l ? (unsigned long long)l->tx_unacked : 0ull,
		  conn->tx_fill.wrap, conn->tx_fill.count, conn->tx_prod.wrap, conn->tx_prod.count,
		  conn->tx_prod_sent.wrap, conn->tx_prod_sent.count,
		  conn->tx_peer_cons.wrap, conn->tx_peer_cons.count,
		  smcr_conn_tx_space(conn), conn->tx_len, conn->tx_seq, conn->ss,
		  conn->ss_prod.wrap, conn->ss_prod.count, conn->inflight_n,
		  conn->blocked ? ", blocked (B sent)" : "",
		  conn->cdc_due ? ", CDC due" : "",
		  conn->fo_pending ? ", validation due" : "",
		  conn->move_to ? ", moving" : "",
		  conn->rx_prod.wrap, conn->rx_prod.count, conn->rx_cons.wrap, conn->rx_cons.count,
		  conn->rx_cons_sent.wrap, conn->rx_cons_sent.count, out.wrap, out.count,
		  conn->rx_cons_acked.wrap, conn->rx_cons_acked.count,
		  conn->rx_peer_prod.wrap, conn->rx_peer_prod.count, conn->rx_seq,
		  conn->rx_link ? conn->rx_link->link_id : 0,
		  conn->peer_blocked ? ", peer blocked" : "",
		  conn->peer_cons_req ? ", peer asks for our cursor" : "",
		  conn->peer_done ? ", peer done" : "");
	return true;
}
