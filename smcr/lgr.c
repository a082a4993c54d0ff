/* SPDX-License-Identifier: BSD-3-Clause */
/* smcrbd: SMC-R link groups: links, connections, buffers, failover. */
#include <config.h>

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "dev.h"
#include "lgr.h"
#include "log.h"

const struct smcr_lgr_config smcr_lgr_config_default = {
	.max_links = SMCR_LGR_MAX_LINKS_DEFAULT,
	.link_policy = SMCR_LINKS_LEAST_LOADED,
	.rebalance = SMCR_LGR_REBALANCE_DEFAULT,
	.llc_timeout_ms = SMCR_LGR_LLC_TIMEOUT_MS_DEFAULT,
	.llc_retries = 2,
	.test_link_idle_ms = SMCR_LGR_TEST_LINK_MS_DEFAULT,
	.test_link_timeout_ms = SMCR_LGR_TEST_LINK_TIMEOUT_MS_DEFAULT,
	.stall_ms = SMCR_LGR_STALL_MS_DEFAULT,
	.conn_stall_ms = SMCR_LGR_CONN_STALL_MS_DEFAULT,
	.acking_keep_ms = 60000,
	.delete_hold_ms = SMCR_LGR_DELETE_HOLD_MS_DEFAULT,
	.max_rmb_bytes = SMCR_LGR_MAX_RMB_BYTES,
	.link_tx_bytes = SMCR_LGR_LINK_TX_BYTES,
	.rmbe_auto_max = SMCR_LGR_RMBE_AUTO_MAX,
};

static uint64_t lgr_now(struct smcr_lgr *lgr)
{
	return lgr->ops->now_ms(lgr);
}

static void lgr_event(struct smcr_lgr *lgr, enum smcr_lgr_event ev,
		      struct smcr_link *link, int status)
{
	if (lgr->ops->event)
		lgr->ops->event(lgr, ev, link, status);
}

int smcr_lgr_create(enum smcr_role role, const struct smcr_lgr_ops *ops,
		    void *owner, const struct smcr_lgr_config *cfg,
		    struct smcr_lgr **lgrp)
{
	struct smcr_lgr *lgr = calloc(1, sizeof(*lgr));

	if (!lgr)
		return -ENOMEM;
	lgr->role = role;
	lgr->ops = ops;
	lgr->owner = owner;
	lgr->cfg = cfg ? *cfg : smcr_lgr_config_default;
	if (lgr->cfg.max_links < 2)
		lgr->cfg.max_links = 2;
	if (lgr->cfg.max_links > SMCR_MAX_LINKS)
		lgr->cfg.max_links = SMCR_MAX_LINKS;
	lgr->max_links = lgr->cfg.max_links;
	lgr->max_conns = SMCR_LGR_MAX_CONNS;
	lgr->version = 1;
	lgr->next_token = 1;
	/* Until the first CONFIRM LINK, the layout we would like. */
	lgr->rmbe_eye = lgr->cfg.rmbe_eyecatcher ? SMCR_RMBE_EYE_LEN : 0;
	smcr_rmb_pool_init(&lgr->rmbs, lgr->cfg.max_rmb_bytes);
	smcr_rmb_pool_init(&lgr->sndbufs, lgr->cfg.max_rmb_bytes);
	lgr->sndbufs.local_only = true;
	lgr->rmbs.shared = lgr->sndbufs.shared = lgr->cfg.pinned;
	smcr_rmb_pool_set_layout(&lgr->rmbs, lgr->rmbe_eye);
	smcr_rmb_pool_set_layout(&lgr->sndbufs, lgr->rmbe_eye);
	*lgrp = lgr;
	return 0;
}

/* Send buffers parked on link whose wait is over: the CDC (token, seq)
 * completed, or (token 0) the link is going. */
static void lgr_unpark(struct smcr_lgr *lgr, const struct smcr_link *link, uint32_t token,
		       uint16_t seq)
{
	unsigned int i;

	for (i = 0; i < SMCR_LGR_PARKED; i++) {
		struct smcr_lgr_parked *p = &lgr->parked[i];

		if (!p->buf.rmb || p->link != link)
			continue;
		if (token && (p->token != token || smcr_seq_before(seq, p->seq)))
			continue;
		smcr_rmbe_free(&lgr->sndbufs, &p->buf);
	}
}

void smcr_lgr_sndbuf_release(struct smcr_lgr *lgr, struct smcr_conn *conn)
{
	unsigned int i, last;

	if (!conn->sndbuf.rmb)
		return;
	if (conn->inflight_n && conn->link) {
		last = (conn->inflight_head + conn->inflight_n - 1) % SMCR_CONN_INFLIGHT;
		for (i = 0; i < SMCR_LGR_PARKED; i++) {
			struct smcr_lgr_parked *p = &lgr->parked[i];

			if (p->buf.rmb)
				continue;
			p->buf = conn->sndbuf;
			p->link = conn->link;
			p->token = conn->token;
			p->seq = conn->inflight[last].seq;
			conn->sndbuf.rmb = NULL;
			conn->sndbuf.data = NULL;
			return;
		}
		/* No room to park: the buffer stays taken until the group goes. */
		smcr_warn("conn %08x: send buffer still read by posted writes, kept",
			  conn->token);
		conn->sndbuf.rmb = NULL;
		return;
	}
	smcr_rmbe_free(&lgr->sndbufs, &conn->sndbuf);
}

void smcr_lgr_link_destroy(struct smcr_lgr *lgr, struct smcr_link *link)
{
	/* It gets no completion from now on: what waited for one is over
	 * (the QP is in error or going). */
	lgr_unpark(lgr, link, 0, 0);
	lgr->ops->link_destroy(lgr, link);
}

static void link_release(struct smcr_lgr *lgr, uint8_t slot)
{
	struct smcr_lgr_link *ll = &lgr->links[slot];
	struct smcr_link *link = ll->link;

	if (!link)
		return;
	if (lgr->bye_link == link)
		lgr->bye_link = NULL;
	memset(ll, 0, sizeof(*ll));
	smcr_lgr_link_destroy(lgr, link);
}

void smcr_lgr_destroy(struct smcr_lgr *lgr)
{
	unsigned int i;

	for (i = 0; i < lgr->conns_end; i++)
		if (lgr->conns[i] && !lgr->conns[i]->error)
			smcr_conn_abort(lgr->conns[i], -ECONNRESET);
	for (i = 0; i < SMCR_LINK_SLOTS; i++)
		link_release(lgr, (uint8_t)i);
	/* MRs first, then the PDs (the last link's QP may still hold one
	 * until the owner has destroyed it). */
	smcr_rmb_pool_fini(&lgr->rmbs);
	smcr_rmb_pool_fini(&lgr->sndbufs);
	for (i = 0; i < SMCR_RMB_MAX_DEVS; i++)
		smcr_pd_put(lgr->pds[i]);
	free(lgr);
}

int smcr_lgr_slot(const struct smcr_lgr *lgr, const struct smcr_link *link)
{
	unsigned int i;

	for (i = 0; i < SMCR_LINK_SLOTS; i++)
		if (link && lgr->links[i].link == link)
			return (int)i;
	return -1;
}

unsigned int smcr_lgr_active_links(const struct smcr_lgr *lgr)
{
	unsigned int i, n = 0;

	for (i = 0; i < SMCR_LINK_SLOTS; i++)
		if (lgr->links[i].link &&
		    lgr->links[i].link->state == SMCR_LINK_ACTIVE)
			n++;
	return n;
}

/* Whether conn's writes could go on the link in slot: we hold an RKey
 * there for its peer's RMB (or it has none yet). */
static bool conn_rkey_on(const struct smcr_conn *conn, unsigned int slot)
{
	return !conn->peer_rmb || conn->peer_rmb->rkey[slot];
}

struct smcr_link *smcr_lgr_least_loaded_for(struct smcr_lgr *lgr,
					     const struct smcr_conn *conn)
{
	struct smcr_link *best = NULL;
	unsigned int i;

	for (i = 0; i < SMCR_LINK_SLOTS; i++) {
		struct smcr_link *l = lgr->links[i].link;

		if (!l || l->state != SMCR_LINK_ACTIVE || lgr->links[i].down)
			continue;
		if (conn && !conn_rkey_on(conn, i))
			continue;
		if (!best || l->nconns < best->nconns)
			best = l;
	}
	return best;
}

struct smcr_link *smcr_lgr_least_loaded(struct smcr_lgr *lgr)
{
	return smcr_lgr_least_loaded_for(lgr, NULL);
}

struct smcr_link *smcr_lgr_pick_link(struct smcr_lgr *lgr)
{
	unsigned int i;

	if (lgr->cfg.link_policy != SMCR_LINKS_ROUND_ROBIN)
		return smcr_lgr_least_loaded(lgr);
	for (i = 0; i < SMCR_LINK_SLOTS; i++) {
		unsigned int slot = (lgr->rr_next + i) % SMCR_LINK_SLOTS;
		struct smcr_link *l = lgr->links[slot].link;

		if (l && l->state == SMCR_LINK_ACTIVE && !lgr->links[slot].down) {
			lgr->rr_next = slot + 1;
			return l;
		}
	}
	return NULL;
}

/* Move connections from the busiest link to the least busy one, a few per
 * tick, until they differ by one at most.  An idle connection moves at
 * once; a busy one stops posting on the old link and moves when what it
 * has there completed (smcr_conn_move): nothing needs validating or
 * replaying, and its next CDC (cumulative cursors) goes on the new link.
 * The next round waits for the moves of this one. */
/* Counts the moves done (rebalanced); true while one is still pending. */
static bool lgr_moves(struct smcr_lgr *lgr)
{
	bool pending = false;
	unsigned int i;

	for (i = 0; i < lgr->conns_end; i++) {
		struct smcr_conn *conn = lgr->conns[i];

		if (!conn)
			continue;
		lgr->stats.rebalanced += conn->moves;
		conn->moves = 0;
		pending = pending || conn->move_to;
	}
	return pending;
}

static void lgr_rebalance(struct smcr_lgr *lgr)
{
	struct smcr_link *hi = NULL, *lo = NULL;
	unsigned int i, nhi, nlo, moved = 0, now = 0;

	if (lgr_moves(lgr))
		return;
	for (i = 0; i < SMCR_LINK_SLOTS; i++) {
		struct smcr_link *l = lgr->links[i].link;

		if (!l || l->state != SMCR_LINK_ACTIVE || lgr->links[i].down)
			continue;
		if (!hi || l->nconns > hi->nconns)
			hi = l;
		if (!lo || l->nconns < lo->nconns)
			lo = l;
	}
	if (!hi || hi == lo || hi->nconns < lo->nconns + 2)
		return;
	nhi = hi->nconns;
	nlo = lo->nconns;
	for (i = 0; i < lgr->conns_end && nhi >= nlo + 2 && moved < 8; i++) {
		struct smcr_conn *conn = lgr->conns[i];

		if (!conn || conn->link != hi || conn->error ||
		    conn->abort_sent || conn->peer_aborted)
			continue;
		/* not to a link where we hold no RKey for its peer's RMB */
		if (!conn_rkey_on(conn, lo->slot))
			continue;
		if (!smcr_conn_move(conn, lo) && !conn->move_to)
			continue;	/* not now (failover validation due) */
		now += !conn->move_to;
		nhi--;
		nlo++;
		moved++;
	}
	lgr_moves(lgr);
	if (moved)
		smcr_dbg("link group: moving %u connection(s) from link %u to link %u (%u at once)",
			 moved, hi->link_id, lo->link_id, now);
}

/* Register every RMB of ours on a new link's device. */
static int lgr_reg_all(struct smcr_lgr *lgr, struct smcr_link *link)
{
	struct smcr_rmb *rmb;
	unsigned int code;
	uint32_t rkey;
	uint64_t vaddr;
	int ret;

	smcr_rmb_pool_for_each(&lgr->rmbs, code, rmb) {
		ret = lgr->ops->rmb_reg(lgr, rmb, link, &rkey, &vaddr);
		if (ret)
			return ret;
	}
	smcr_rmb_pool_for_each(&lgr->sndbufs, code, rmb) {
		ret = lgr->ops->rmb_reg(lgr, rmb, link, &rkey, &vaddr);
		if (ret)
			return ret;
	}
	return 0;
}

int smcr_lgr_first_link(struct smcr_lgr *lgr, struct smcr_link *link,
			const struct smcr_link_info *local,
			const struct smcr_link_info *peer)
{
	struct smcr_lgr_link *ll = &lgr->links[0];
	int ret;

	if (ll->link)
		return -EBUSY;
	ll->link = link;
	ll->local = *local;
	ll->peer = *peer;
	ll->connected = true;
	ll->last_rx_ms = lgr_now(lgr);
	link->slot = 0;
	link->tx_cap = lgr->cfg.link_tx_bytes;
	/* The server numbers the link; the client takes the number from
	 * CONFIRM LINK (as Linux does). */
	link->link_id = lgr->role == SMCR_ROLE_SERVER && lgr->cfg.first_link_id ?
			lgr->cfg.first_link_id : 1;
	lgr->last_link_id = link->link_id;
	link->handler = &smcr_lgr_link_handler;
	link->handler_arg = lgr;
	link->state = SMCR_LINK_INACTIVE;
	ret = lgr_reg_all(lgr, link);
	if (ret)
		return ret;
	if (lgr->role == SMCR_ROLE_SERVER)
		return smcr_llc_start(lgr, SMCR_FLOW_CONFIRM_LINK, 0, 0, NULL);
	return 0;
}

void smcr_lgr_set_layout(struct smcr_lgr *lgr, uint8_t eye)
{
	unsigned int i;

	lgr->layout_fixed = true;
	smcr_info("link group: RMBE layout %s", eye ? "with eye catcher (RFC 7609)" :
		  "without eye catcher (Linux)");
	if (eye == lgr->rmbe_eye)
		return;
	lgr->rmbe_eye = eye;
	smcr_rmb_pool_set_layout(&lgr->rmbs, eye);
	smcr_rmb_pool_set_layout(&lgr->sndbufs, eye);
	for (i = 0; i < lgr->conns_end; i++) {
		struct smcr_conn *conn = lgr->conns[i];

		if (conn && smcr_conn_relayout(conn)) {
			smcr_warn("conn %08x: data before CONFIRM LINK: aborted", conn->token);
			smcr_conn_abort(conn, -EPROTO);
		}
	}
}

void smcr_lgr_set_v21(struct smcr_lgr *lgr, uint8_t release, uint8_t max_conns,
		      uint8_t max_links)
{
	lgr->release = release;
	if (release < SMCR_CLC_RELEASE_1)
		return;
	if (max_conns >= SMCR_CLC_MIN_CONNS)
		lgr->max_conns = max_conns;
	if (max_links >= SMCR_CLC_MIN_LINKS && max_links < lgr->max_links)
		lgr->max_links = max_links;
}

bool smcr_lgr_full(const struct smcr_lgr *lgr)
{
	return lgr->nconns + lgr->setups >= lgr->max_conns;
}

int smcr_lgr_add_link(struct smcr_lgr *lgr)
{
	unsigned int i, n = 0;

	for (i = 0; i < SMCR_LINK_SLOTS; i++)
		if (lgr->links[i].link && !lgr->links[i].asym)
			n++;
	if (n >= lgr->max_links)
		return -EBUSY;
	return smcr_llc_start(lgr, SMCR_FLOW_ADD_LINK, 0, 0, NULL);
}

int smcr_lgr_delete_link(struct smcr_lgr *lgr, uint8_t slot, uint32_t reason)
{
	if (slot >= SMCR_LINK_SLOTS || !lgr->links[slot].link)
		return -ENOENT;
	return smcr_llc_start(lgr, SMCR_FLOW_DELETE_LINK, slot, reason, NULL);
}

void smcr_lgr_terminate(struct smcr_lgr *lgr, int error)
{
	unsigned int i;

	if (lgr->terminated)
		return;
	lgr->terminated = true;
	smcr_warn("link group ended (%d): resetting %u connection(s)", error,
		  lgr->nconns);
	for (i = 0; i < lgr->conns_end; i++)
		if (lgr->conns[i] && !lgr->conns[i]->error)
			smcr_conn_abort(lgr->conns[i], error);
	for (i = 0; i < SMCR_LINK_SLOTS; i++)
		if (lgr->links[i].link)
			lgr->links[i].link->state = SMCR_LINK_FAILED;
	lgr_event(lgr, SMCR_LGR_TERMINATED, NULL, error);
}

void smcr_lgr_link_down(struct smcr_lgr *lgr, struct smcr_link *link, int reason)
{
	smcr_lgr_link_fail(lgr, link, reason, true);
}

void smcr_lgr_link_fail(struct smcr_lgr *lgr, struct smcr_link *link, int reason,
			bool start_delete)
{
	int slot = smcr_lgr_slot(lgr, link);
	struct smcr_lgr_link *ll;
	struct smcr_link *to;
	bool was_active;
	unsigned int i;

	if (slot < 0 || lgr->links[slot].down)
		return;
	ll = &lgr->links[slot];
	ll->down = true;
	ll->down_ms = lgr_now(lgr);
	ll->test_sent_ms = 0;
	/* The link layer marks a link FAILED before its down upcall; a link
	 * the group gives up on itself (TEST LINK, the peer's DELETE LINK)
	 * is stopped here: nothing it still carries may be placed after the
	 * connections have replayed it elsewhere.  (fail() calls back into
	 * this function, which returns at once now.) */
	was_active = ll->confirmed;
	if (link->state != SMCR_LINK_FAILED) {
		link->state = SMCR_LINK_FAILED;
		if (link->ops->fail)
			link->ops->fail(link);
	}
	/* Only a client keeps a late acker (a server may wait for its sends
	 * on the link, as Linux 6.1's does); a server deletes the link. */
	if (lgr->role == SMCR_ROLE_SERVER && link->ops->ack_off)
		link->ops->ack_off(link);
	lgr->stats.link_failures++;
	smcr_warn("link group: link %u failed (%d), moving %u connection(s)",
		  link->link_id, reason, link->nconns);
	/* Move every connection to a surviving link (§4.6). */
	for (i = 0; i < lgr->conns_end; i++) {
		struct smcr_conn *conn = lgr->conns[i];

		if (conn)
			smcr_conn_link_gone(conn, link);
		if (!conn || conn->link != link)
			continue;
		/* not to a link where its peer's RMB has no RKey: its writes
		 * would fail that link too */
		to = smcr_lgr_least_loaded_for(lgr, conn);
		if (!to) {
			if (!smcr_lgr_least_loaded(lgr))
				break;
			smcr_warn("connection %08x: no other link has an RKey for its peer's RMB",
				  conn->token);
			smcr_conn_abort(conn, -ECONNRESET);
			continue;
		}
		lgr->stats.failovers++;
		if (smcr_conn_failover(conn, to))
			smcr_conn_abort(conn, -ECONNRESET);
	}
	smcr_llc_link_gone(lgr, (uint8_t)slot);
	lgr_event(lgr, SMCR_LGR_LINK_DOWN, link, reason);
	if (!smcr_lgr_active_links(lgr)) {
		smcr_lgr_terminate(lgr, -ECONNRESET);
		return;
	}
	/* A link still being added is dropped by its ADD LINK exchange
	 * (smcr_llc_link_gone above). */
	if (!was_active || !lgr->links[slot].link || !start_delete)
		return;
	/* The server deletes the link; the client asks it to (disorderly),
	 * not yet while its QP acknowledges the server (cfg.delete_hold_ms),
	 * unless the server is libsmcr: only Linux's needs the wait, and ours
	 * would fail over only when the hold ends (or its RC retries run
	 * out), its data on the link stuck that long. */
	if (lgr->role == SMCR_ROLE_CLIENT && lgr->cfg.delete_hold_ms && !lgr->peer_libsmcr &&
	    link->ops->acking && link->ops->acking(link)) {
		lgr->links[slot].delete_held = true;
		return;
	}
	smcr_llc_start(lgr, SMCR_FLOW_DELETE_LINK, (uint8_t)slot,
		       SMCR_LLC_DEL_LOST_PATH, NULL);
}

/* ---- connections ---------------------------------------------------------- */

static struct smcr_lgr_early *early_find(struct smcr_lgr *lgr, uint32_t token)
{
	unsigned int i;

	for (i = 0; token && i < SMCR_LGR_EARLY; i++)
		if (lgr->early[i].token == token)
			return &lgr->early[i];
	return NULL;
}

/* A free slot, or the oldest (a handshake that never ended). */
static void early_reserve(struct smcr_lgr *lgr, uint32_t token)
{
	struct smcr_lgr_early *e = &lgr->early[0];
	unsigned int i;

	for (i = 0; i < SMCR_LGR_EARLY && e->token; i++)
		if (!lgr->early[i].token || lgr->early[i].order < e->order)
			e = &lgr->early[i];
	memset(e, 0, sizeof(*e));
	e->token = token;
	e->order = ++lgr->early_order;
}

/* A CDC for a token whose connection is not there yet. */
static void early_keep(struct smcr_lgr_early *e, const struct smcr_cdc_msg *m)
{
	if (m->peer_abort) {
		e->aborted = true;
	} else if (m->failover_validation) {
		if (!e->validation || smcr_seq_after(m->seqno, e->fo_seq))
			e->fo_seq = m->seqno;
		e->validation = true;
	} else {
		e->cons_req = e->cons_req || m->cons_update_req;
		if (!e->have || smcr_seq_after(m->seqno, e->msg.seqno)) {
			e->msg = *m;
			e->have = true;
		}
	}
}

/* What came for conn's token before it was added, in the order the peer
 * sent it. */
static void early_apply(struct smcr_lgr *lgr, struct smcr_conn *conn)
{
	struct smcr_lgr_early *e = early_find(lgr, conn->token);
	struct smcr_lgr_early k;
	struct smcr_cdc_msg m;

	if (!e)
		return;
	k = *e;
	memset(e, 0, sizeof(*e));
	if (k.have) {
		smcr_dbg("conn %08x: CDC %u came before the connection: applied now",
			 conn->token, k.msg.seqno);
		k.msg.cons_update_req = k.cons_req;
		if (smcr_conn_rx_cdc(conn, &k.msg))
			return;
	}
	if (k.validation) {
		m = (struct smcr_cdc_msg){ .seqno = k.fo_seq, .token = conn->token,
					   .failover_validation = true };
		if (smcr_conn_rx_cdc(conn, &m))
			return;
	}
	if (k.aborted) {
		m = (struct smcr_cdc_msg){ .token = conn->token, .peer_abort = true };
		smcr_conn_rx_cdc(conn, &m);
	}
}

uint32_t smcr_lgr_conn_token(struct smcr_lgr *lgr)
{
	uint32_t t;

	do {
		t = lgr->next_token++;
		if (!t)
			t = lgr->next_token++;
	} while (smcr_lgr_conn_find(lgr, t) || early_find(lgr, t));
	early_reserve(lgr, t);
	return t;
}

void smcr_lgr_conn_token_drop(struct smcr_lgr *lgr, uint32_t token)
{
	struct smcr_lgr_early *e = early_find(lgr, token);

	if (e)
		memset(e, 0, sizeof(*e));
}

int smcr_lgr_conn_add(struct smcr_lgr *lgr, struct smcr_conn *conn)
{
	unsigned int i;

	for (i = 0; i < SMCR_LGR_MAX_CONNS; i++) {
		if (!lgr->conns[i]) {
			lgr->conns[i] = conn;
			lgr->nconns++;
			if (i >= lgr->conns_end)
				lgr->conns_end = i + 1;
			early_apply(lgr, conn);
			return 0;
		}
	}
	return -ENOSPC;
}

void smcr_lgr_conn_remove(struct smcr_lgr *lgr, struct smcr_conn *conn)
{
	unsigned int i;

	for (i = 0; i < lgr->conns_end; i++) {
		if (lgr->conns[i] == conn) {
			lgr->conns[i] = NULL;
			lgr->nconns--;
			while (lgr->conns_end && !lgr->conns[lgr->conns_end - 1])
				lgr->conns_end--;
			if (conn->link)
				conn->link->nconns--;
			conn->link = NULL;
			return;
		}
	}
}

struct smcr_conn *smcr_lgr_conn_find(struct smcr_lgr *lgr, uint32_t token)
{
	unsigned int i;

	for (i = 0; i < lgr->conns_end; i++)
		if (lgr->conns[i] && lgr->conns[i]->token == token)
			return lgr->conns[i];
	return NULL;
}

/* ---- buffers ---------------------------------------------------------------- */

int smcr_lgr_rmb_token(struct smcr_lgr *lgr, struct smcr_rmb *rmb,
		       uint8_t slot, uint32_t *rkey, uint64_t *vaddr)
{
	if (slot >= SMCR_LINK_SLOTS || !lgr->links[slot].link)
		return -ENOENT;
	/* Registration is idempotent: this only reads the keys. */
	return lgr->ops->rmb_reg(lgr, rmb, lgr->links[slot].link, rkey, vaddr);
}

static int buf_reg_all_links(struct smcr_lgr *lgr, struct smcr_rmb *rmb)
{
	unsigned int i;
	uint32_t rkey;
	uint64_t vaddr;
	int ret;

	for (i = 0; i < SMCR_LINK_SLOTS; i++) {
		struct smcr_link *l = lgr->links[i].link;

		if (!l || l->state == SMCR_LINK_FAILED)
			continue;
		ret = lgr->ops->rmb_reg(lgr, rmb, l, &rkey, &vaddr);
		if (ret)
			return ret;
	}
	return 0;
}

int smcr_lgr_rmbe_alloc(struct smcr_lgr *lgr, size_t want,
			struct smcr_rmbe *rmbe, bool *pending)
{
	bool fresh;
	int ret;

	*pending = false;
	ret = smcr_rmbe_alloc(&lgr->rmbs, want, rmbe, &fresh);
	if (ret)
		return ret;
	if (!fresh) {
		/* An RMB still being announced is not usable yet either. */
		*pending = !rmbe->rmb->announced;
		return 0;
	}
	ret = buf_reg_all_links(lgr, rmbe->rmb);
	if (ret)
		goto out_free;
	/* On first contact the CLC message itself announces the RMB (one
	 * link only); later ones go through CONFIRM RKEY. */
	if (smcr_lgr_active_links(lgr) == 0 && lgr->nconns == 0) {
		rmbe->rmb->announced = true;
		return 0;
	}
	ret = smcr_llc_start(lgr, SMCR_FLOW_CONFIRM_RKEY, 0, 0, rmbe->rmb);
	if (ret)
		goto out_free;
	*pending = true;
	return 0;

out_free:
	smcr_rmbe_free(&lgr->rmbs, rmbe);
	return ret;
}

int smcr_lgr_sndbuf_alloc(struct smcr_lgr *lgr, uint32_t elem_size,
			  struct smcr_rmbe *buf)
{
	bool fresh;
	int ret;

	if (elem_size <= SMCR_RMBE_EYE_LEN)
		return -EINVAL;
	/* The class is picked as if with an eye catcher in either layout. */
	ret = smcr_rmbe_alloc(&lgr->sndbufs, elem_size - SMCR_RMBE_EYE_LEN,
			      buf, &fresh);
	if (ret)
		return ret;
	if (buf->rmb->elem_size != elem_size) {
		/* The peer's element size is not one of our classes. */
		smcr_rmbe_free(&lgr->sndbufs, buf);
		return -EINVAL;
	}
	if (fresh) {
		ret = buf_reg_all_links(lgr, buf->rmb);
		if (ret) {
			smcr_rmbe_free(&lgr->sndbufs, buf);
			return ret;
		}
	}
	return 0;
}

int smcr_lgr_rmb_trim(struct smcr_lgr *lgr)
{
	struct smcr_rmb *rmb;
	unsigned int code;

	/* Unused RMBs the peer knows of are deleted through DELETE RKEY
	 * first; the exchange frees them when the peer has answered. */
	smcr_rmb_pool_for_each(&lgr->rmbs, code, rmb) {
		if (!rmb->used && rmb->announced) {
			rmb->announced = false;
			smcr_llc_start(lgr, SMCR_FLOW_DELETE_RKEY, 0, 0, rmb);
		}
	}
	smcr_rmb_pool_trim(&lgr->sndbufs, NULL, NULL);
	return 0;
}

struct smcr_lgr_peer_rmb *smcr_lgr_peer_rmb_find(struct smcr_lgr *lgr,
						 uint8_t slot, uint32_t rkey)
{
	unsigned int i;

	if (slot >= SMCR_LINK_SLOTS)
		return NULL;
	for (i = 0; i < lgr->npeer_rmbs; i++)
		if (lgr->peer_rmbs[i].used && lgr->peer_rmbs[i].r.rkey[slot] == rkey)
			return &lgr->peer_rmbs[i];
	return NULL;
}

struct smcr_lgr_peer_rmb *smcr_lgr_peer_rmb_add(struct smcr_lgr *lgr,
						uint8_t slot, uint32_t rkey,
						uint64_t vaddr)
{
	struct smcr_lgr_peer_rmb *p = smcr_lgr_peer_rmb_find(lgr, slot, rkey);

	if (p)
		return p;
	if (slot >= SMCR_LINK_SLOTS)
		return NULL;
	if (lgr->npeer_rmbs == SMCR_LGR_MAX_PEER_RMBS)
		return NULL;
	p = &lgr->peer_rmbs[lgr->npeer_rmbs++];
	memset(p, 0, sizeof(*p));
	p->used = true;
	p->r.rkey[slot] = rkey;
	p->r.vaddr[slot] = vaddr;
	return p;
}

/* ---- link upcalls ------------------------------------------------------------ */

static struct smcr_lgr *link_lgr(struct smcr_link *link)
{
	return link->handler_arg;
}

/* Lets the link's connections post what waits (behind one doorbell).
 * One that cannot (send queue or the link's unconfirmed bytes at their
 * limit) goes first next time; the others still get to send their CDCs. */
void smcr_lgr_kick(struct smcr_lgr *lgr, struct smcr_link *link)
{
	unsigned int i, n = lgr->conns_end, start, first_busy = n;

	if (!n)
		return;
	start = lgr->kick_next < n ? lgr->kick_next : 0;
	smcr_link_post_begin(link);
	for (i = 0; i < n; i++) {
		unsigned int k = (start + i) % n;
		struct smcr_conn *conn = lgr->conns[k];

		if (conn && conn->link == link && smcr_conn_tx_pending(conn) &&
		    smcr_conn_flush(conn) == -EAGAIN && first_busy == n)
			first_busy = k;
	}
	smcr_link_post_end(link);
	if (first_busy < n)
		lgr->kick_next = first_busy;
}

/* Recounts each link's unconfirmed bytes from its connections (those of
 * connections gone since do not hold the link back), then kicks it. */
static void lgr_tx_recount(struct smcr_lgr *lgr)
{
	unsigned int s, i;

	for (s = 0; s < SMCR_LINK_SLOTS; s++) {
		struct smcr_link *l = lgr->links[s].link;
		uint64_t n = 0;

		if (!l)
			continue;
		for (i = 0; i < lgr->conns_end; i++)
			if (lgr->conns[i] && lgr->conns[i]->link == l)
				n += smcr_conn_unacked(lgr->conns[i]);
		if (n != l->tx_unacked) {
			l->tx_unacked = n;
			if (l->state == SMCR_LINK_ACTIVE)
				smcr_lgr_kick(lgr, l);
		}
	}
}

/* The peer's RC end acknowledged a request of ours on LINK (smcr_llc_tick
 * gives its TEST LINK reply longer). */
static void lgr_tx_ok(struct smcr_lgr *lgr, struct smcr_link *link)
{
	int slot = smcr_lgr_slot(lgr, link);

	if (slot >= 0)
		lgr->links[slot].tx_ok_ms = lgr_now(lgr);
}

static void lgr_send_done(struct smcr_link *link, uint64_t wr_id, int status)
{
	struct smcr_lgr *lgr = link_lgr(link);
	struct smcr_conn *conn;

	/* Our DELETE LINK (all) is out, or will never be. */
	if (link == lgr->bye_link && smcr_wr_tag(wr_id) == SMCR_WR_TAG_LLC &&
	    smcr_wr_seq(wr_id) == SMCR_LLC_DELETE_LINK)
		lgr->bye_link = NULL;
	if (smcr_wr_tag(wr_id) == SMCR_WR_TAG_CDC) {
		conn = smcr_lgr_conn_find(lgr, smcr_wr_token(wr_id));
		if (conn)
			smcr_conn_cdc_done(conn, smcr_wr_seq(wr_id), status);
		else
			lgr_unpark(lgr, link, smcr_wr_token(wr_id), smcr_wr_seq(wr_id));
	}
	if (status == 0) {
		lgr_tx_ok(lgr, link);
		smcr_lgr_kick(lgr, link);
	}
}

static void lgr_write_done(struct smcr_link *link, uint64_t wr_id, int status)
{
	(void)wr_id;
	if (status == 0) {
		lgr_tx_ok(link_lgr(link), link);
		smcr_lgr_kick(link_lgr(link), link);
	}
}

static void lgr_recv(struct smcr_link *link, const uint8_t msg[SMCR_MSG_LEN])
{
	struct smcr_lgr *lgr = link_lgr(link);
	int slot = smcr_lgr_slot(lgr, link);
	struct smcr_cdc_msg m;
	struct smcr_conn *conn;

	if (slot < 0)
		return;
	lgr->links[slot].last_rx_ms = lgr_now(lgr);
	if (!smcr_wr_is_cdc(msg, SMCR_MSG_LEN)) {
		smcr_llc_rx(lgr, link, msg);
		return;
	}
	if (smcr_cdc_decode(msg, SMCR_MSG_LEN, &m) < 0) {
		smcr_warn("link %u: malformed CDC message dropped", link->link_id);
		return;
	}
	if (m.failover_validation) {
		/* CDCs the peer sent before it switched links may still wait
		 * in the other links' queues: take them in first, or our SR
		 * would lag its SS and we would reset for nothing (§4.6.1). */
		unsigned int i;

		for (i = 0; i < SMCR_LINK_SLOTS; i++) {
			struct smcr_link *l = lgr->links[i].link;

			if (l && l != link && l->ops->poll)
				l->ops->poll(l);
		}
	}
	conn = smcr_lgr_conn_find(lgr, m.token);
	if (!conn) {
		struct smcr_lgr_early *e = early_find(lgr, m.token);

		if (e) {
			early_keep(e, &m);
			return;
		}
		/* Late messages of a closed connection are harmless. */
		smcr_dbg("link %u: CDC for unknown token %08x", link->link_id, m.token);
		return;
	}
	smcr_conn_rx_cdc_on(conn, &m, link);
}

static void lgr_recv_long(struct smcr_link *link, const uint8_t *msg, uint32_t len)
{
	struct smcr_lgr *lgr = link_lgr(link);
	int slot = smcr_lgr_slot(lgr, link);

	if (slot < 0)
		return;
	lgr->links[slot].last_rx_ms = lgr_now(lgr);
	smcr_llc_rx_long(lgr, link, msg, len);
}

static void lgr_down(struct smcr_link *link, int reason)
{
	struct smcr_lgr *lgr = link_lgr(link);

	if (lgr->bye_link == link)
		lgr->bye_link = NULL;
	smcr_lgr_link_down(lgr, link, reason);
}

const struct smcr_link_handler smcr_lgr_link_handler = {
	.write_done = lgr_write_done,
	.send_done = lgr_send_done,
	.recv = lgr_recv,
	.recv_long = lgr_recv_long,
	.down = lgr_down,
};

/* Connections that wait while nothing moves: logged once each, with the
 * group's exchange in progress. */
static void lgr_stall_check(struct smcr_lgr *lgr)
{
	uint64_t now = lgr_now(lgr);
	unsigned int i;

	for (i = 0; i < lgr->conns_end; i++) {
		if (!lgr->conns[i] ||
		    !smcr_conn_stall_check(lgr->conns[i], now, lgr->cfg.conn_stall_ms))
			continue;
		lgr->stats.conn_stalls++;
		smcr_info("link group: %u link(s) active, LLC exchange %s (step %u), %u queued",
			  smcr_lgr_active_links(lgr), smcr_llc_flow_name(lgr->flow.kind),
			  lgr->flow.step, lgr->nqueue);
	}
}

void smcr_lgr_tick(struct smcr_lgr *lgr)
{
	if (lgr->terminated)
		return;
	smcr_llc_tick(lgr, lgr_now(lgr));
	if (!lgr->terminated)
		lgr_tx_recount(lgr);
	if (!lgr->terminated)
		lgr_stall_check(lgr);
	if (lgr->cfg.rebalance && !lgr->terminated)
		lgr_rebalance(lgr);
}
