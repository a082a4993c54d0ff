/* SPDX-License-Identifier: BSD-3-Clause */
/* smcrbd: LLC exchanges of a link group (RFC 7609 §3.5.1.5-6, §3.5.5,
 * Appendix A.3, C.7).  One configuration exchange runs at a time; what
 * starts meanwhile waits in a queue.  TEST LINK, a client's ADD LINK hint
 * and a client's DELETE LINK request are independent messages. */
#include <config.h>

#include <errno.h>
#include <string.h>

#include "lgr.h"
#include "log.h"

const char *smcr_llc_flow_name(enum smcr_llc_flow_kind k)
{
	switch (k) {
	case SMCR_FLOW_CONFIRM_LINK: return "CONFIRM LINK";
	case SMCR_FLOW_ADD_LINK: return "ADD LINK";
	case SMCR_FLOW_DELETE_LINK: return "DELETE LINK";
	case SMCR_FLOW_CONFIRM_RKEY: return "CONFIRM RKEY";
	case SMCR_FLOW_DELETE_RKEY: return "DELETE RKEY";
	default: return "none";
	}
}

static uint64_t now(struct smcr_lgr *lgr)
{
	return lgr->ops->now_ms(lgr);
}

static int slot_of_id(const struct smcr_lgr *lgr, uint8_t id)
{
	unsigned int i;

	for (i = 0; i < SMCR_LINK_SLOTS; i++)
		if (lgr->links[i].link && lgr->links[i].link->link_id == id)
			return (int)i;
	return -1;
}

static bool slot_usable(const struct smcr_lgr *lgr, unsigned int slot)
{
	const struct smcr_link *l = lgr->links[slot].link;

	return l && l->state == SMCR_LINK_ACTIVE;
}

/* An active link other than `avoid` to carry a message, or -1. */
static int pick_via(const struct smcr_lgr *lgr, int avoid)
{
	unsigned int i;

	for (i = 0; i < SMCR_LINK_SLOTS; i++)
		if ((int)i != avoid && slot_usable(lgr, i))
			return (int)i;
	return -1;
}

static int llc_send(struct smcr_lgr *lgr, unsigned int slot,
		    const struct smcr_llc_msg *m, uint8_t *copy)
{
	uint8_t buf[SMCR_LLC_LEN];
	struct smcr_link *link = lgr->links[slot].link;
	struct smcr_llc_msg mv = *m;
	int ret;

	if (!link || link->state == SMCR_LINK_FAILED)
		return -ENOTCONN;
	mv.version = lgr->version;
	ret = smcr_llc_encode(&mv, buf, sizeof(buf));
	if (ret < 0)
		return ret;
	if (copy)
		memcpy(copy, buf, sizeof(buf));
	ret = smcr_link_send(link, buf, smcr_wr_id(0, SMCR_WR_TAG_LLC, m->type));
	if (ret == 0)
		lgr->stats.llc_sent++;
	smcr_dbg("llc: sent %s %s on link %u (%d)", smcr_llc_type_str(m->type),
		 m->reply ? "reply" : "request", link->link_id, ret);
	return ret;
}

/* Send a request of the running exchange: kept for resends. */
static int flow_send(struct smcr_lgr *lgr, unsigned int slot,
		     const struct smcr_llc_msg *m)
{
	struct smcr_llc_flow *f = &lgr->flow;
	int ret;

	f->via = (uint8_t)slot;
	f->deadline_ms = now(lgr) + lgr->cfg.llc_timeout_ms;
	ret = llc_send(lgr, slot, m, f->req);
	if (ret == -EAGAIN) {
		/* The send queue is full of data: try again at the tick. */
		f->resend = true;
		f->resend_ms = now(lgr);
		return 0;
	}
	return ret;
}

/* A request that found the send queue full. */
static void flow_resend(struct smcr_lgr *lgr, uint64_t t)
{
	struct smcr_llc_flow *f = &lgr->flow;
	struct smcr_link *link = lgr->links[f->via].link;
	int ret = -ENOTCONN;

	if (link && link->state != SMCR_LINK_FAILED)
		ret = smcr_link_send(link, f->req,
				     smcr_wr_id(0, SMCR_WR_TAG_LLC, f->req[0]));
	if (ret == -EAGAIN && t - f->resend_ms < lgr->cfg.llc_timeout_ms)
		return;
	f->resend = false;
	if (ret == 0) {
		lgr->stats.llc_sent++;
		f->deadline_ms = t + lgr->cfg.llc_timeout_ms;
	} else {
		f->deadline_ms = t;	/* a timeout now */
	}
}

static void flow_next(struct smcr_lgr *lgr);

static void flow_end(struct smcr_lgr *lgr)
{
	memset(&lgr->flow, 0, sizeof(lgr->flow));
	flow_next(lgr);
}

static void link_info_from_confirm(struct smcr_link_info *i,
				   const struct smcr_llc_confirm_link *c)
{
	memcpy(i->mac, c->mac, SMCR_MAC_LEN);
	memcpy(i->gid, c->gid, SMCR_GID_LEN);
	i->qpn = c->qpn;
}

static void confirm_link_fill(struct smcr_lgr *lgr, unsigned int slot,
			      struct smcr_llc_msg *m, bool reply)
{
	struct smcr_lgr_link *ll = &lgr->links[slot];

	memset(m, 0, sizeof(*m));
	m->type = SMCR_LLC_CONFIRM_LINK;
	m->reply = reply;
	memcpy(m->confirm_link.mac, ll->local.mac, SMCR_MAC_LEN);
	memcpy(m->confirm_link.gid, ll->local.gid, SMCR_GID_LEN);
	m->confirm_link.qpn = ll->local.qpn;
	m->confirm_link.link_num = ll->link->link_id;
	m->confirm_link.link_uid = ll->local.qpn ^ 0x5c300000u;
	m->confirm_link.max_links = lgr->max_links;
	if (lgr->release >= SMCR_CLC_RELEASE_1)
		m->confirm_link.max_conns = lgr->max_conns;
	m->confirm_link.no_rmbe_eyec = lgr->rmbe_eye == 0;
	m->confirm_link.libsmcr = !lgr->cfg.no_impl_mark;
}

static void link_activate(struct smcr_lgr *lgr, unsigned int slot)
{
	struct smcr_link *link = lgr->links[slot].link;

	link->state = SMCR_LINK_ACTIVE;
	lgr->links[slot].confirmed = true;
	lgr->links[slot].last_rx_ms = now(lgr);
	lgr->stats.links_added++;
	smcr_info("link group: link %u up (%u active)", link->link_id,
		  smcr_lgr_active_links(lgr));
	if (lgr->ops->event)
		lgr->ops->event(lgr, SMCR_LGR_LINK_UP, link, 0);
}

/* Drop a link's resources after DELETE LINK (or its failure). */
static void link_delete(struct smcr_lgr *lgr, unsigned int slot)
{
	struct smcr_lgr_link *ll = &lgr->links[slot];
	struct smcr_link *link = ll->link;
	unsigned int i;

	if (!link)
		return;
	/* Messages it has received (and the peer has seen acknowledged) go
	 * to their connections before it goes away. */
	if (link->ops->poll)
		link->ops->poll(link);
	if (lgr->links[slot].link != link)
		return;		/* deleted from inside the poll */
	/* Anyone still on it moves first (orderly delete). */
	for (i = 0; i < lgr->conns_end; i++) {
		struct smcr_conn *conn = lgr->conns[i];
		struct smcr_link *to;

		if (conn)
			smcr_conn_link_gone(conn, link);
		if (!conn || conn->link != link)
			continue;
		link->state = SMCR_LINK_DELETING;
		to = smcr_lgr_least_loaded_for(lgr, conn);
		if (!to)
			smcr_warn("conn %08x: its link is deleted and no other has an RKey for its peer's RMB",
				  conn->token);
		if (!to || smcr_conn_failover(conn, to))
			smcr_conn_abort(conn, -ECONNRESET);
		else
			lgr->stats.failovers++;
	}
	for (i = 0; i < lgr->npeer_rmbs; i++) {
		lgr->peer_rmbs[i].r.rkey[slot] = 0;
		lgr->peer_rmbs[i].r.vaddr[slot] = 0;
	}
	lgr->stats.links_deleted++;
	smcr_info("link group: link %u deleted", link->link_id);
	if (lgr->ops->event)
		lgr->ops->event(lgr, SMCR_LGR_LINK_DELETED, link, 0);
	memset(ll, 0, sizeof(*ll));
	smcr_lgr_link_destroy(lgr, link);
}

/* ---- ADD LINK ------------------------------------------------------------ */

static int free_slot(const struct smcr_lgr *lgr)
{
	unsigned int i;

	for (i = 0; i < SMCR_LINK_SLOTS; i++)
		if (!lgr->links[i].link)
			return (int)i;
	return -1;
}

/* The next number after the last one given out (1-255, none in use), as
 * Linux's smcr_next_link_id: a number freed now is not given again soon,
 * so a DELETE LINK for the old link that the peer still has queued (a
 * retransmission) cannot take the new one. */
static uint8_t free_link_id(struct smcr_lgr *lgr)
{
	unsigned int k, id;

	for (k = 1; k < 256; k++) {
		id = (lgr->last_link_id + k - 1) % 255 + 1;
		if (slot_of_id(lgr, (uint8_t)id) < 0) {
			lgr->last_link_id = (uint8_t)id;
			return (uint8_t)id;
		}
	}
	return 0;
}

static bool have_asym(const struct smcr_lgr *lgr)
{
	unsigned int i;

	for (i = 0; i < SMCR_LINK_SLOTS; i++)
		if (lgr->links[i].link && lgr->links[i].asym)
			return true;
	return false;
}

/* Create a local link end in a free slot; an asymmetric one (a port the
 * group already uses) only if allowed and there is none yet. */
static int link_new(struct smcr_lgr *lgr, const struct smcr_link_info *peer,
		    uint8_t id, bool allow_asym, int *slotp)
{
	int slot = free_slot(lgr);
	struct smcr_lgr_link *ll;
	struct smcr_link *link;
	bool asym = false;
	int ret;

	if (slot < 0 || !id)
		return -ENOSPC;
	ll = &lgr->links[slot];
	ret = lgr->ops->link_create(lgr, peer, false, &link, &ll->local);
	if (ret == -ENODEV && allow_asym && !have_asym(lgr)) {
		asym = true;
		ret = lgr->ops->link_create(lgr, peer, true, &link, &ll->local);
	}
	if (ret)
		return ret;
	ll->link = link;
	ll->asym = asym;
	link->slot = (uint8_t)slot;
	link->tx_cap = lgr->cfg.link_tx_bytes;
	link->link_id = id;
	link->state = SMCR_LINK_INACTIVE;
	link->handler = &smcr_lgr_link_handler;
	link->handler_arg = lgr;
	*slotp = slot;
	return 0;
}

static void add_link_fill(struct smcr_lgr *lgr, unsigned int slot,
			  struct smcr_llc_msg *m, bool reply)
{
	struct smcr_lgr_link *ll = &lgr->links[slot];

	memset(m, 0, sizeof(*m));
	m->type = SMCR_LLC_ADD_LINK;
	m->reply = reply;
	memcpy(m->add_link.mac, ll->local.mac, SMCR_MAC_LEN);
	memcpy(m->add_link.gid, ll->local.gid, SMCR_GID_LEN);
	m->add_link.qpn = ll->local.qpn;
	m->add_link.psn = ll->local.psn;
	m->add_link.qp_mtu = ll->local.mtu;
	m->add_link.link_num = ll->link->link_id;
}

static void info_from_add_link(struct smcr_link_info *i,
			       const struct smcr_llc_add_link *a)
{
	smcr_dbg("llc: ADD LINK %u from GID ...%02x%02x%02x%02x, QP %06x", a->link_num,
		 a->gid[12], a->gid[13], a->gid[14], a->gid[15], a->qpn);
	memcpy(i->mac, a->mac, SMCR_MAC_LEN);
	memcpy(i->gid, a->gid, SMCR_GID_LEN);
	i->qpn = a->qpn;
	i->psn = a->psn;
	i->mtu = a->qp_mtu;
}

/* Connect a new link and register our buffers on it. */
static int link_bringup(struct smcr_lgr *lgr, unsigned int slot,
			const struct smcr_link_info *peer)
{
	struct smcr_lgr_link *ll = &lgr->links[slot];
	struct smcr_rmb *rmb;
	unsigned int code;
	uint32_t rkey;
	uint64_t vaddr;
	int ret;

	ll->peer = *peer;
	ret = lgr->ops->link_connect(lgr, ll->link, peer);
	if (ret)
		return ret;
	ll->connected = true;
	smcr_rmb_pool_for_each(&lgr->rmbs, code, rmb) {
		ret = lgr->ops->rmb_reg(lgr, rmb, ll->link, &rkey, &vaddr);
		if (ret)
			return ret;
	}
	smcr_rmb_pool_for_each(&lgr->sndbufs, code, rmb) {
		ret = lgr->ops->rmb_reg(lgr, rmb, ll->link, &rkey, &vaddr);
		if (ret)
			return ret;
	}
	return 0;
}

static unsigned int announced_rmbs(struct smcr_lgr *lgr)
{
	struct smcr_rmb *rmb;
	unsigned int code, n = 0;

	smcr_rmb_pool_for_each(&lgr->rmbs, code, rmb)
		n += rmb->announced;
	return n;
}

static struct smcr_rmb *nth_announced(struct smcr_lgr *lgr, unsigned int n)
{
	struct smcr_rmb *rmb;
	unsigned int code;

	smcr_rmb_pool_for_each(&lgr->rmbs, code, rmb)
		if (rmb->announced && n-- == 0)
			return rmb;
	return NULL;
}

/* One ADD LINK CONTINUATION with our next (up to) two RToken pairs. */
static int add_link_cont_send(struct smcr_lgr *lgr, bool reply)
{
	struct smcr_llc_flow *f = &lgr->flow;
	struct smcr_llc_msg m;
	unsigned int k;

	memset(&m, 0, sizeof(m));
	m.type = SMCR_LLC_ADD_LINK_CONT;
	m.reply = reply;
	m.add_link_cont.link_num = lgr->links[f->slot].link->link_id;
	m.add_link_cont.num_rtokens = (uint8_t)(f->cont_total - f->cont_sent);
	for (k = 0; k < 2 && f->cont_sent < f->cont_total; k++, f->cont_sent++) {
		struct smcr_rmb *rmb = nth_announced(lgr, f->cont_sent);
		struct smcr_llc_rtoken_pair *p = &m.add_link_cont.pair[k];
		uint64_t va;

		if (!rmb)
			break;
		lgr->ops->rmb_reg(lgr, rmb, lgr->links[f->via].link, &p->ref_rkey, &va);
		lgr->ops->rmb_reg(lgr, rmb, lgr->links[f->slot].link, &p->new_rkey,
				  &p->new_vaddr);
	}
	return reply ? llc_send(lgr, f->via, &m, NULL) : flow_send(lgr, f->via, &m);
}

/* ---- SMC-Rv2 ADD LINK: the RKeys travel in the ADD LINK itself ---------- */

/* Our RMBs' RTokens on the new link in slot (ref: on the link via). */
static unsigned int v2_pairs_ours(struct smcr_lgr *lgr, unsigned int via, unsigned int slot,
				  struct smcr_llc_rtoken_pair *pairs, unsigned int max)
{
	unsigned int n = 0;
	struct smcr_rmb *rmb;
	unsigned int code;
	uint64_t va;

	smcr_rmb_pool_for_each(&lgr->rmbs, code, rmb) {
		if (!rmb->announced || n >= max)
			continue;
		lgr->ops->rmb_reg(lgr, rmb, lgr->links[via].link, &pairs[n].ref_rkey, &va);
		lgr->ops->rmb_reg(lgr, rmb, lgr->links[slot].link, &pairs[n].new_rkey,
				  &pairs[n].new_vaddr);
		n++;
	}
	return n;
}

/* The peer's RTokens on the new link in slot, named by their rkeys on via.
 * Returns how many of the peer's RMBs in use are left without one there. */
static int v2_pairs_theirs(struct smcr_lgr *lgr, unsigned int via, unsigned int slot,
			   const uint8_t *msg, uint32_t len)
{
	static struct smcr_llc_rtoken_pair pairs[SMCR_LLC_V2_MAX_RKEYS];
	struct smcr_llc_add_link_v2_ext ext;
	int n, k, missing = 0;

	n = smcr_llc_add_link_v2_ext_decode(msg, len, &ext, pairs, SMCR_LLC_V2_MAX_RKEYS);
	if (n < 0) {
		smcr_warn("link group: ADD LINK v2 without its RKeys (%s)", smcr_msg_strerror(n));
		n = 0;
	}
	for (k = 0; k < n; k++) {
		struct smcr_lgr_peer_rmb *p =
			smcr_lgr_peer_rmb_find(lgr, (uint8_t)via, pairs[k].ref_rkey);

		if (!p) {
			smcr_warn("link group: ADD LINK names unknown rkey %08x", pairs[k].ref_rkey);
			continue;
		}
		p->r.rkey[slot] = pairs[k].new_rkey;
		p->r.vaddr[slot] = pairs[k].new_vaddr;
		smcr_dbg("link group: ADD LINK v2 RKey %08x on link %u: %08x at %llx on link %u",
			 pairs[k].ref_rkey, lgr->links[via].link->link_id, pairs[k].new_rkey,
			 (unsigned long long)pairs[k].new_vaddr, lgr->links[slot].link->link_id);
	}
	/* An RMB of the peer's in use that the list left out (Linux 6.1
	 * lists lgr->conns_num of them, seen one short): no write of its
	 * connections could go on the new link. */
	for (k = 0; k < (int)lgr->npeer_rmbs; k++) {
		const struct smcr_lgr_peer_rmb *p = &lgr->peer_rmbs[k];

		if (!p->used || !p->refs || p->r.rkey[slot])
			continue;
		missing++;
		smcr_warn("link group: ADD LINK v2 (%d RKeys) gave none for the peer's RMB %08x (on link %u) on link %u",
			  n, p->r.rkey[via], lgr->links[via].link->link_id,
			  lgr->links[slot].link->link_id);
	}
	return missing;
}

/* ADD LINK v2 (request or reply) for the new link in slot, over via. */
static int add_link_send_v2(struct smcr_lgr *lgr, unsigned int via, unsigned int slot,
			    bool reply)
{
	static struct smcr_llc_rtoken_pair pairs[SMCR_LLC_V2_MAX_RKEYS];
	static uint8_t buf[SMCR_LLC_V2_MAX_LEN];
	struct smcr_link *link = lgr->links[via].link;
	struct smcr_llc_add_link_v2_ext ext = { .direct = true };
	struct smcr_llc_msg m;
	int n, ret;

	if (!link || link->state == SMCR_LINK_FAILED)
		return -ENOTCONN;
	if (!link->ops->post_send_long)
		return -EOPNOTSUPP;
	add_link_fill(lgr, slot, &m, reply);
	memcpy(ext.target_gid, lgr->links[slot].local.gid, SMCR_GID_LEN);
	ext.num_rkeys = (uint16_t)v2_pairs_ours(lgr, via, slot, pairs, SMCR_LLC_V2_MAX_RKEYS);
	n = smcr_llc_add_link_v2_encode(&m, &ext, pairs, buf, sizeof(buf));
	if (n < 0)
		return n;
	link->sends++;
	ret = link->ops->post_send_long(link, buf, (uint32_t)n,
					smcr_wr_id(0, SMCR_WR_TAG_LLC, m.type));
	if (ret == 0)
		lgr->stats.llc_sent++;
	smcr_dbg("llc: sent ADD LINK v2 %s (%d bytes, %u RKeys) on link %u (%d)",
		 reply ? "reply" : "request", n, ext.num_rkeys, link->link_id, ret);
	return ret;
}

/* A v2 peer that refused or did not answer is asked again after the
 * backoff (or when it invites us with REQ ADD LINK); a failure on our side
 * (a path not there yet: an address not resolved, a QP not connected) is
 * retried soon, as Linux invites only once per port event. */
static void add_link_fail_as(struct smcr_lgr *lgr, const char *why, bool peer)
{
	struct smcr_llc_flow *f = &lgr->flow;

	smcr_warn("link group: ADD LINK failed: %s", why);
	if (lgr->version == SMCR_LLC_VERSION_2)
		lgr->add_link_after_ms = now(lgr) + (peer ? SMCR_LGR_V2_ADD_LINK_BACKOFF_MS :
						     SMCR_LGR_V2_ADD_LINK_RETRY_MS);
	if (lgr->links[f->slot].link &&
	    lgr->links[f->slot].link->state != SMCR_LINK_ACTIVE) {
		memset(&lgr->links[f->slot].peer, 0, sizeof(lgr->links[f->slot].peer));
		smcr_lgr_link_destroy(lgr, lgr->links[f->slot].link);
		memset(&lgr->links[f->slot], 0, sizeof(lgr->links[f->slot]));
	}
	flow_end(lgr);
}

static void add_link_fail(struct smcr_lgr *lgr, const char *why)
{
	add_link_fail_as(lgr, why, false);
}

/* Server: start adding a link. */
static int add_link_start(struct smcr_lgr *lgr)
{
	struct smcr_llc_msg m;
	int via = pick_via(lgr, -1), slot, ret;

	if (via < 0)
		return -ENOTCONN;
	ret = link_new(lgr, NULL, free_link_id(lgr), true, &slot);
	if (ret) {
		smcr_dbg("link group: no port for another link (%d)", ret);
		return ret;
	}
	lgr->flow.slot = (uint8_t)slot;
	lgr->flow.step = 1;
	if (lgr->version == SMCR_LLC_VERSION_2) {
		/* our RKeys on the new link go in the request */
		lgr->flow.via = (uint8_t)via;
		lgr->flow.deadline_ms = now(lgr) + lgr->cfg.llc_timeout_ms;
		ret = add_link_send_v2(lgr, (unsigned int)via, (unsigned int)slot, false);
		if (ret) {
			smcr_lgr_link_destroy(lgr, lgr->links[slot].link);
			memset(&lgr->links[slot], 0, sizeof(lgr->links[slot]));
		}
		return ret;
	}
	add_link_fill(lgr, (unsigned int)slot, &m, false);
	return flow_send(lgr, (unsigned int)via, &m);
}

/* Both sides: the RToken pair exchange is over when each side has sent
 * all its pairs and heard the peer's last. */
static bool cont_done(const struct smcr_llc_flow *f)
{
	return f->cont_sent >= f->cont_total && f->cont_peer_done;
}

static void add_link_cont_rx(struct smcr_lgr *lgr, unsigned int via,
			     const struct smcr_llc_add_link_cont *c)
{
	struct smcr_llc_flow *f = &lgr->flow;
	unsigned int k, n = c->num_rtokens < 2 ? c->num_rtokens : 2;
	struct smcr_llc_msg m;

	for (k = 0; k < n; k++) {
		struct smcr_lgr_peer_rmb *p =
			smcr_lgr_peer_rmb_find(lgr, (uint8_t)via, c->pair[k].ref_rkey);

		if (!p) {
			smcr_warn("link group: ADD LINK CONT names unknown rkey %08x",
				  c->pair[k].ref_rkey);
			continue;
		}
		p->r.rkey[f->slot] = c->pair[k].new_rkey;
		p->r.vaddr[f->slot] = c->pair[k].new_vaddr;
	}
	if (c->num_rtokens <= 2)
		f->cont_peer_done = true;
	if (lgr->role == SMCR_ROLE_CLIENT) {
		/* Answer every request with our next pairs (possibly none). */
		add_link_cont_send(lgr, true);
		f->deadline_ms = now(lgr) + lgr->cfg.llc_timeout_ms;
		return;
	}
	if (!cont_done(f)) {
		add_link_cont_send(lgr, false);
		return;
	}
	/* Pairs exchanged: confirm the new link over itself. */
	f->step = 3;
	confirm_link_fill(lgr, f->slot, &m, false);
	lgr->flow.deadline_ms = now(lgr) + lgr->cfg.llc_timeout_ms;
	if (llc_send(lgr, f->slot, &m, lgr->flow.req))
		add_link_fail(lgr, "cannot send CONFIRM LINK on the new link");
}

/* Client: no alternate path for the server's new link. */
static void add_link_reject(struct smcr_lgr *lgr, unsigned int via, uint8_t link_num)
{
	struct smcr_llc_msg m;

	memset(&m, 0, sizeof(m));
	m.type = SMCR_LLC_ADD_LINK;
	m.reply = true;
	m.add_link.reject = true;
	m.add_link.reason = SMCR_LLC_ADD_REJ_NO_ALT_PATH;
	m.add_link.link_num = link_num;
	llc_send(lgr, via, &m, NULL);
}

/* Client: answer the server's ADD LINK link_num, whose new link is in
 * slot (ret: how connecting it went). */
static void add_link_req_go(struct smcr_lgr *lgr, unsigned int via, uint8_t link_num,
			    int slot, int ret)
{
	struct smcr_llc_msg m;

	if (ret) {
		int held = slot_of_id(lgr, link_num);	/* link_num's slot, if any */

		smcr_info("link group: rejecting ADD LINK %u (%d)", link_num, ret);
		if ((ret == -EAGAIN || ret == -ENOKEY) && lgr->version == SMCR_LLC_VERSION_2 &&
		    held >= 0) {
			/* no path from the port we took, or an RKey list
			 * short of an RMB: ask again for a link to it once the
			 * server's ports (or its count) had time to settle */
			memcpy(lgr->req_add_link_gid, lgr->links[held].local.gid, SMCR_GID_LEN);
			lgr->req_add_link_ms = now(lgr) + SMCR_LGR_V2_ADD_LINK_RETRY_MS;
		}
		if (ret != -EEXIST && ret != -ENOSPC && held >= 0) {
			slot = held;
			smcr_lgr_link_destroy(lgr, lgr->links[slot].link);
			memset(&lgr->links[slot], 0, sizeof(lgr->links[slot]));
		}
		add_link_reject(lgr, via, link_num);
		flow_next(lgr);
		return;
	}
	lgr->flow.kind = SMCR_FLOW_ADD_LINK;
	lgr->flow.local = false;
	lgr->flow.slot = (uint8_t)slot;
	lgr->flow.via = (uint8_t)via;
	lgr->flow.step = 2;
	if (lgr->version == SMCR_LLC_VERSION_2) {
		/* theirs came with the request, ours in the reply; then the
		 * server's CONFIRM LINK over the new link */
		lgr->flow.step = 3;
		lgr->flow.deadline_ms = now(lgr) + lgr->cfg.llc_timeout_ms;
		if (add_link_send_v2(lgr, via, (unsigned int)slot, true))
			add_link_fail(lgr, "cannot send the ADD LINK v2 reply");
		return;
	}
	lgr->flow.cont_total = announced_rmbs(lgr);
	lgr->flow.deadline_ms = now(lgr) + lgr->cfg.llc_timeout_ms;
	add_link_fill(lgr, (unsigned int)slot, &m, true);
	llc_send(lgr, via, &m, NULL);
}

/* Client: the server asks to add a link. */
static void add_link_req_rx(struct smcr_lgr *lgr, unsigned int via,
			    const struct smcr_llc_add_link *a, const uint8_t *msg, uint32_t len)
{
	struct smcr_link_info peer;
	bool same_rnic = false;
	unsigned int i;
	int slot, ret;

	if (lgr->version == SMCR_LLC_VERSION_2 &&
	    (!msg || !lgr->links[via].link->ops->post_send_long)) {
		/* A v2 ADD LINK brings its RKeys along: without them (or a
		 * way to send ours) no link. */
		smcr_info("link group: rejecting SMC-Rv2 ADD LINK %u (no RKeys)", a->link_num);
		add_link_reject(lgr, via, a->link_num);
		return;
	}
	if (lgr->max_links <= 1 && smcr_lgr_active_links(lgr) >= 1) {
		/* SMC-Rv2.1 max_links 1: one link only (Linux's
		 * smc_llc_cli_add_link rejects likewise) */
		smcr_info("link group: rejecting ADD LINK %u (max_links 1)", a->link_num);
		lgr->stats.add_links_refused_max++;
		add_link_reject(lgr, via, a->link_num);
		return;
	}
	info_from_add_link(&peer, a);
	/* The server on an RNIC it already uses: only a second RNIC of ours
	 * makes that a link; otherwise it would be parallel (§3.5.1.6.1). */
	for (i = 0; i < SMCR_LINK_SLOTS; i++)
		if (lgr->links[i].link && !lgr->links[i].down &&
		    memcmp(lgr->links[i].peer.gid, peer.gid, SMCR_GID_LEN) == 0)
			same_rnic = true;
	/* The server reuses the id of a failed link we still hold (its
	 * DELETE LINK did not reach us): that link is gone. */
	slot = slot_of_id(lgr, a->link_num);
	if (slot >= 0 && lgr->links[slot].down)
		link_delete(lgr, (unsigned int)slot);
	if (lgr->flow.kind != SMCR_FLOW_NONE) {
		struct smcr_llc_flow *f = &lgr->flow;

		/* Our own CONFIRM/DELETE RKEY yields (§3.5.5.3.3): redone after. */
		if (f->local && lgr->nqueue < SMCR_LLC_QUEUE) {
			lgr->queue[lgr->nqueue++] = (struct smcr_llc_pending){
				.kind = f->kind, .rmb = f->rmb };
		}
		/* An earlier ADD LINK the server gave up on (its new link never
		 * got confirmed): that half-made link goes. */
		if (f->kind == SMCR_FLOW_ADD_LINK && !f->local &&
		    lgr->links[f->slot].link &&
		    lgr->links[f->slot].link->state != SMCR_LINK_ACTIVE) {
			smcr_info("link group: ADD LINK %u abandoned by the server",
				  lgr->links[f->slot].link->link_id);
			smcr_lgr_link_destroy(lgr, lgr->links[f->slot].link);
			memset(&lgr->links[f->slot], 0, sizeof(lgr->links[f->slot]));
		}
		memset(f, 0, sizeof(*f));
	}
	ret = slot_of_id(lgr, a->link_num) >= 0 ? -EEXIST :
	      link_new(lgr, &peer, a->link_num, !same_rnic, &slot);
	/* A list that leaves out an RMB in use: refused, asked again */
	if (ret == 0 && lgr->version == SMCR_LLC_VERSION_2 &&
	    v2_pairs_theirs(lgr, via, (unsigned int)slot, msg, len) > 0)
		ret = -ENOKEY;
	if (ret == 0)
		ret = link_bringup(lgr, (unsigned int)slot, &peer);
	if (ret == -EAGAIN && !same_rnic) {
		/* The path is not there yet (the peer's address unresolved
		 * on the new link's netdev, just after its port came back):
		 * tried again at the ticks while the server still waits.  Not
		 * from an RNIC the server already uses: our other port may
		 * never reach that address (one subnet, the peer's ARP only
		 * on its own NIC), and Linux drops the ADD LINK of its next
		 * port event while this one waits: refused at once. */
		lgr->flow.kind = SMCR_FLOW_ADD_LINK;
		lgr->flow.local = false;
		lgr->flow.slot = (uint8_t)slot;
		lgr->flow.via = (uint8_t)via;
		lgr->flow.step = 1;
		lgr->flow.deadline_ms = now(lgr) + SMCR_LGR_ADD_LINK_PATH_WAIT_MS;
		smcr_info("link group: ADD LINK %u waits for its path", a->link_num);
		return;
	}
	add_link_req_go(lgr, via, a->link_num, slot, ret);
}

/* Client: an ADD LINK waiting for its path (step 1), at a tick: connect
 * again; answered once connected, refused at the deadline. */
static void add_link_path_tick(struct smcr_lgr *lgr, uint64_t t)
{
	struct smcr_llc_flow *f = &lgr->flow;
	struct smcr_lgr_link *ll = &lgr->links[f->slot];
	struct smcr_link_info peer = ll->peer;
	unsigned int via = f->via;
	int slot = f->slot, ret;
	uint8_t id;

	if (!ll->link) {
		flow_end(lgr);
		return;
	}
	id = ll->link->link_id;
	ret = link_bringup(lgr, f->slot, &peer);
	if (ret == -EAGAIN && t < f->deadline_ms)
		return;
	memset(f, 0, sizeof(*f));
	add_link_req_go(lgr, via, id, slot, ret);
}

/* v2 client: ask the server for a link to req_add_link_gid (once). */
static void req_add_link_send(struct smcr_lgr *lgr)
{
	struct smcr_llc_msg m = { .type = SMCR_LLC_REQ_ADD_LINK };
	int via = pick_via(lgr, -1);

	lgr->req_add_link_ms = 0;
	if (via < 0 || smcr_lgr_active_links(lgr) >= lgr->max_links)
		return;
	m.req_add_link.gid_count = 1;
	memcpy(m.req_add_link.gid, lgr->req_add_link_gid, SMCR_GID_LEN);
	smcr_info("link group: asking the server for a link (REQ ADD LINK): %d",
		  llc_send(lgr, (unsigned int)via, &m, NULL));
}

/* Server: the client answered our ADD LINK. */
static void add_link_reply_rx(struct smcr_lgr *lgr, const struct smcr_llc_add_link *a,
			      const uint8_t *msg, uint32_t len)
{
	struct smcr_llc_flow *f = &lgr->flow;
	struct smcr_link_info peer;

	if (f->kind != SMCR_FLOW_ADD_LINK || !f->local || f->step != 1 ||
	    a->link_num != lgr->links[f->slot].link->link_id) {
		lgr->stats.llc_bad++;
		return;
	}
	if (a->reject) {
		add_link_fail_as(lgr, "the peer rejected it (no alternate path)", true);
		return;
	}
	info_from_add_link(&peer, a);
	if (link_bringup(lgr, f->slot, &peer)) {
		add_link_fail(lgr, "cannot connect the new QP");
		return;
	}
	if (lgr->version == SMCR_LLC_VERSION_2) {
		struct smcr_llc_msg m;

		if (!msg) {
			add_link_fail(lgr, "an ADD LINK v2 reply without RKeys");
			return;
		}
		v2_pairs_theirs(lgr, f->via, f->slot, msg, len);
		f->step = 3;
		confirm_link_fill(lgr, f->slot, &m, false);
		f->deadline_ms = now(lgr) + lgr->cfg.llc_timeout_ms;
		if (llc_send(lgr, f->slot, &m, f->req))
			add_link_fail(lgr, "cannot send CONFIRM LINK on the new link");
		return;
	}
	f->step = 2;
	f->cont_total = announced_rmbs(lgr);
	add_link_cont_send(lgr, false);
}

/* ---- CONFIRM LINK ---------------------------------------------------------- */

static void confirm_link_rx(struct smcr_lgr *lgr, unsigned int slot,
			    const struct smcr_llc_msg *m)
{
	const struct smcr_llc_confirm_link *c = &m->confirm_link;
	struct smcr_llc_flow *f = &lgr->flow;
	struct smcr_llc_msg r;
	int other;

	if (!m->reply && lgr->role == SMCR_ROLE_CLIENT && slot == 0 &&
	    !lgr->layout_fixed) {
		/* The first link: the server numbers it (Linux does not start
		 * at 1), and offers its RMBE layout, which we take unless we
		 * speak the RFC's only (our response tells it which). */
		other = slot_of_id(lgr, c->link_num);
		if (c->link_num == 0 || (other >= 0 && other != (int)slot)) {
			lgr->stats.llc_bad++;
			return;
		}
		lgr->links[slot].link->link_id = c->link_num;
		smcr_lgr_set_layout(lgr, c->no_rmbe_eyec && !lgr->cfg.rmbe_eyecatcher ?
				    0 : SMCR_RMBE_EYE_LEN);
	}
	if (c->link_num != lgr->links[slot].link->link_id) {
		lgr->stats.llc_bad++;
		return;
	}
	if (c->libsmcr && !lgr->peer_libsmcr) {
		lgr->peer_libsmcr = true;
		smcr_dbg("link group: the peer is libsmcr (CONFIRM LINK)");
	}
	if (!m->reply) {
		/* Client: the server confirms a link over itself. */
		if (lgr->role != SMCR_ROLE_CLIENT) {
			lgr->stats.llc_bad++;
			return;
		}
		if (c->max_links >= 2 && c->max_links < lgr->max_links)
			lgr->max_links = c->max_links;
		link_info_from_confirm(&lgr->links[slot].peer, c);
		confirm_link_fill(lgr, slot, &r, true);
		if (llc_send(lgr, slot, &r, NULL) == 0 &&
		    lgr->links[slot].link->state != SMCR_LINK_ACTIVE)
			link_activate(lgr, slot);
		if (f->kind == SMCR_FLOW_ADD_LINK && !f->local && f->slot == slot)
			flow_end(lgr);
		return;
	}
	/* Server: the client's answer. */
	if ((f->kind != SMCR_FLOW_CONFIRM_LINK && f->kind != SMCR_FLOW_ADD_LINK) ||
	    f->slot != slot) {
		lgr->stats.llc_bad++;
		return;
	}
	if (c->max_links >= 2 && c->max_links < lgr->max_links)
		lgr->max_links = c->max_links;
	/* The first link fixes the layout: ours without eye catcher if the
	 * client took it (flag set), else the RFC's (an older peer). */
	if (f->kind == SMCR_FLOW_CONFIRM_LINK && !lgr->layout_fixed)
		smcr_lgr_set_layout(lgr, c->no_rmbe_eyec && lgr->rmbe_eye == 0 ?
				    0 : SMCR_RMBE_EYE_LEN);
	link_activate(lgr, slot);
	flow_end(lgr);
	/* Redundancy: try a second link right away (§3.5.1.6). */
	if (lgr->role == SMCR_ROLE_SERVER && smcr_lgr_active_links(lgr) < 2)
		smcr_lgr_add_link(lgr);
}

/* ---- DELETE LINK ------------------------------------------------------------ */

static int delete_link_start(struct smcr_lgr *lgr, uint8_t slot, uint32_t reason)
{
	struct smcr_llc_msg m;
	int via = pick_via(lgr, slot);

	if (!lgr->links[slot].link)
		return -ENOENT;
	/* A link that still works may carry the request about itself. */
	if (via < 0 && slot_usable(lgr, slot))
		via = slot;
	memset(&m, 0, sizeof(m));
	m.type = SMCR_LLC_DELETE_LINK;
	m.delete_link.link_num = lgr->links[slot].link->link_id;
	m.delete_link.reason = reason;
	m.delete_link.orderly = reason != SMCR_LLC_DEL_LOST_PATH;
	if (lgr->role == SMCR_ROLE_CLIENT) {
		/* A request for the server to run the exchange: no reply. */
		if (via >= 0)
			llc_send(lgr, (unsigned int)via, &m, NULL);
		return 1;	/* not a flow */
	}
	if (via < 0) {
		link_delete(lgr, slot);
		return 1;
	}
	lgr->flow.slot = slot;
	return flow_send(lgr, (unsigned int)via, &m);
}

static void delete_link_rx(struct smcr_lgr *lgr, unsigned int via,
			   const struct smcr_llc_msg *m)
{
	const struct smcr_llc_delete_link *d = &m->delete_link;
	int slot = slot_of_id(lgr, d->link_num);
	/* A lost path fails over at once: Linux marks its DELETE LINK for
	 * one orderly (smcr_link_down), libsmcr does not. */
	bool lost = !d->orderly || d->reason == SMCR_LLC_DEL_LOST_PATH;
	struct smcr_llc_msg r;

	if (d->all) {
		smcr_warn("link group: the peer deletes the whole group");
		smcr_lgr_terminate(lgr, -ECONNRESET);
		return;
	}
	if (m->reply) {
		if (lgr->flow.kind == SMCR_FLOW_DELETE_LINK && lgr->flow.local &&
		    slot == lgr->flow.slot) {
			link_delete(lgr, (unsigned int)slot);
			flow_end(lgr);
		} else {
			lgr->stats.llc_bad++;
		}
		return;
	}
	if (lgr->role == SMCR_ROLE_SERVER) {
		/* The client asks us to delete: run the exchange (queued
		 * behind a running one, §3.5.5.3). */
		if (slot >= 0) {
			if (lgr->links[slot].link->state == SMCR_LINK_ACTIVE && lost)
				smcr_lgr_link_down(lgr, lgr->links[slot].link, -ECONNRESET);
			else
				smcr_llc_start(lgr, SMCR_FLOW_DELETE_LINK,
					       (uint8_t)slot, d->reason, NULL);
		}
		return;
	}
	/* Client: the server deletes a link; we must agree. */
	memset(&r, 0, sizeof(r));
	r.type = SMCR_LLC_DELETE_LINK;
	r.reply = true;
	r.delete_link.link_num = d->link_num;
	r.delete_link.reason = slot < 0 ? SMCR_LLC_DEL_NO_LINK : d->reason;
	if (slot >= 0) {
		struct smcr_link *l = lgr->links[slot].link;

		/* A lost path (the server's end failed): a failure here too,
		 * with failover semantics; the server runs the deletion. */
		if (lost && !lgr->links[slot].down && l->state == SMCR_LINK_ACTIVE)
			smcr_lgr_link_fail(lgr, l, -ECONNRESET, false);
		if (l->state == SMCR_LINK_ACTIVE)
			l->state = SMCR_LINK_DELETING;
		if (lgr->links[slot].link == l)
			link_delete(lgr, (unsigned int)slot);
	}
	if (!lgr->terminated)
		llc_send(lgr, via, &r, NULL);
}

int smcr_llc_delete_all(struct smcr_lgr *lgr, uint32_t reason)
{
	struct smcr_llc_msg m;
	unsigned int i;

	if (lgr->terminated)
		return -ENOTCONN;
	memset(&m, 0, sizeof(m));
	m.type = SMCR_LLC_DELETE_LINK;
	m.delete_link.all = true;
	m.delete_link.orderly = true;
	m.delete_link.reason = reason;
	for (i = 0; i < SMCR_LINK_SLOTS; i++) {
		if (!slot_usable(lgr, i) || llc_send(lgr, i, &m, NULL))
			continue;
		lgr->bye_link = lgr->links[i].link;
		/* its completion is waited for (send completions may raise
		 * no event otherwise) */
		if (lgr->bye_link->ops->want_send_done)
			lgr->bye_link->ops->want_send_done(lgr->bye_link);
		smcr_info("link group: DELETE LINK (all) sent on link %u",
			  lgr->bye_link->link_id);
		return 0;
	}
	return -ENOTCONN;
}

/* ---- CONFIRM RKEY / DELETE RKEY ------------------------------------------- */

static int confirm_rkey_start(struct smcr_lgr *lgr, struct smcr_rmb *rmb)
{
	struct smcr_llc_msg m;
	int via = pick_via(lgr, -1);
	unsigned int i, n = 0;

	if (via < 0)
		return -ENOTCONN;
	memset(&m, 0, sizeof(m));
	m.type = SMCR_LLC_CONFIRM_RKEY;
	lgr->ops->rmb_reg(lgr, rmb, lgr->links[via].link, &m.confirm_rkey.rkey,
			  &m.confirm_rkey.vaddr);
	for (i = 0; i < SMCR_LINK_SLOTS; i++) {
		struct smcr_llc_rkey_spec *s;

		if ((int)i == via || !slot_usable(lgr, i))
			continue;
		if (n >= 2)
			break;	/* more links than one message holds: CONT below */
		s = &m.confirm_rkey.other[n++];
		s->link_num = lgr->links[i].link->link_id;
		lgr->ops->rmb_reg(lgr, rmb, lgr->links[i].link, &s->rkey, &s->vaddr);
	}
	m.confirm_rkey.num_tokens = (uint8_t)n;
	lgr->flow.rmb = rmb;
	return flow_send(lgr, (unsigned int)via, &m);
}

/* Negative replies a CONFIRM RKEY takes, one a tick: as long as the
 * request itself may take with its resends. */
static unsigned int confirm_rkey_max_rejects(const struct smcr_lgr *lgr)
{
	return lgr->cfg.llc_timeout_ms * (lgr->cfg.llc_retries + 1) / SMCR_LGR_TICK_MS + 1;
}

static bool config_exchange_running(const struct smcr_lgr *lgr)
{
	return lgr->flow.kind == SMCR_FLOW_ADD_LINK ||
	       lgr->flow.kind == SMCR_FLOW_DELETE_LINK ||
	       lgr->flow.kind == SMCR_FLOW_CONFIRM_LINK;
}

static void confirm_rkey_rx(struct smcr_lgr *lgr, unsigned int via,
			    const struct smcr_llc_msg *m)
{
	const struct smcr_llc_confirm_rkey *c = &m->confirm_rkey;
	struct smcr_lgr_peer_rmb *p;
	struct smcr_llc_msg r;
	unsigned int k;

	if (m->reply) {
		struct smcr_rmb *rmb = lgr->flow.rmb;

		if (lgr->flow.kind != SMCR_FLOW_CONFIRM_RKEY || !rmb) {
			lgr->stats.llc_bad++;
			return;
		}
		if (c->negative) {
			/* The peer was busy changing links: announce again
			 * from the tick, not at once (a peer that answers
			 * at once again would make that a storm), and not
			 * for ever. */
			lgr->stats.rkey_rejects++;
			if (++lgr->flow.rejects > confirm_rkey_max_rejects(lgr)) {
				smcr_warn("llc: CONFIRM RKEY refused %u times: giving up",
					  lgr->flow.rejects);
				if (lgr->ops->event)
					lgr->ops->event(lgr, SMCR_LGR_RMB_CONFIRMED, NULL,
							-ETIMEDOUT);
				flow_end(lgr);
				return;
			}
			lgr->flow.redo = true;
			lgr->flow.redo_ms = now(lgr) + SMCR_LGR_TICK_MS;
			lgr->flow.deadline_ms = UINT64_MAX;
			return;
		}
		rmb->announced = true;
		lgr->stats.rkeys_confirmed++;
		flow_end(lgr);
		if (lgr->ops->event)
			lgr->ops->event(lgr, SMCR_LGR_RMB_CONFIRMED, NULL, 0);
		return;
	}
	r = *m;
	r.reply = true;
	if (config_exchange_running(lgr)) {
		r.confirm_rkey.negative = true;
		llc_send(lgr, via, &r, NULL);
		return;
	}
	smcr_dbg("llc: CONFIRM RKEY via slot %u: rkey %08x vaddr %llx, %u other(s): link %u rkey %08x",
		 via, c->rkey, (unsigned long long)c->vaddr, c->num_tokens,
		 c->other[0].link_num, c->other[0].rkey);
	p = smcr_lgr_peer_rmb_add(lgr, (uint8_t)via, c->rkey, c->vaddr);
	if (!p) {
		r.confirm_rkey.negative = true;
		llc_send(lgr, via, &r, NULL);
		return;
	}
	for (k = 0; k < c->num_tokens && k < 2; k++) {
		int s = slot_of_id(lgr, c->other[k].link_num);

		if (s < 0)
			continue;
		p->r.rkey[s] = c->other[k].rkey;
		p->r.vaddr[s] = c->other[k].vaddr;
	}
	llc_send(lgr, via, &r, NULL);
}

static void confirm_rkey_cont_rx(struct smcr_lgr *lgr, unsigned int via,
				 const struct smcr_llc_msg *m)
{
	/* We never send more than one message's worth (up to three links);
	 * a peer with more links gets its tokens accepted link by link. */
	const struct smcr_llc_confirm_rkey_cont *c = &m->confirm_rkey_cont;
	unsigned int k;

	(void)via;
	for (k = 0; k < c->num_left && k < 3; k++) {
		int s = slot_of_id(lgr, c->spec[k].link_num);
		unsigned int i;

		if (s < 0)
			continue;
		for (i = 0; i < lgr->npeer_rmbs; i++) {
			struct smcr_lgr_peer_rmb *p = &lgr->peer_rmbs[i];

			if (p->used && p->r.rkey[s] == 0) {
				p->r.rkey[s] = c->spec[k].rkey;
				p->r.vaddr[s] = c->spec[k].vaddr;
				break;
			}
		}
	}
}

static int delete_rkey_start(struct smcr_lgr *lgr, struct smcr_rmb *rmb)
{
	struct smcr_llc_msg m;
	uint64_t va;
	int via = pick_via(lgr, -1);

	if (via < 0) {
		smcr_rmb_destroy(&lgr->rmbs, rmb);
		return 1;
	}
	memset(&m, 0, sizeof(m));
	m.type = SMCR_LLC_DELETE_RKEY;
	m.delete_rkey.count = 1;
	lgr->ops->rmb_reg(lgr, rmb, lgr->links[via].link, &m.delete_rkey.rkey[0], &va);
	lgr->flow.rmb = rmb;
	return flow_send(lgr, (unsigned int)via, &m);
}

static void delete_rkey_rx(struct smcr_lgr *lgr, unsigned int via,
			   const struct smcr_llc_msg *m)
{
	const struct smcr_llc_delete_rkey *d = &m->delete_rkey;
	struct smcr_llc_msg r;
	unsigned int k;

	if (m->reply) {
		struct smcr_rmb *rmb = lgr->flow.rmb;

		if (lgr->flow.kind != SMCR_FLOW_DELETE_RKEY || !rmb) {
			lgr->stats.llc_bad++;
			return;
		}
		/* Reused meanwhile?  Then it stays, announced again. */
		if (smcr_rmb_destroy(&lgr->rmbs, rmb) == 0)
			lgr->stats.rkeys_deleted++;
		else
			smcr_llc_start(lgr, SMCR_FLOW_CONFIRM_RKEY, 0, 0, rmb);
		flow_end(lgr);
		return;
	}
	r = *m;
	r.reply = true;
	r.delete_rkey.err_mask = 0;
	for (k = 0; k < d->count; k++) {
		struct smcr_lgr_peer_rmb *p =
			smcr_lgr_peer_rmb_find(lgr, (uint8_t)via, d->rkey[k]);

		if (!p || p->refs) {
			r.delete_rkey.err_mask |= (uint8_t)(0x80u >> k);
			continue;
		}
		memset(p, 0, sizeof(*p));
	}
	r.delete_rkey.negative = r.delete_rkey.err_mask != 0;
	llc_send(lgr, via, &r, NULL);
}

/* ---- TEST LINK -------------------------------------------------------------- */

/* The probe in ll->test_data, to be echoed back. */
static int test_link_send(struct smcr_lgr *lgr, uint8_t slot)
{
	struct smcr_llc_msg m;

	memset(&m, 0, sizeof(m));
	m.type = SMCR_LLC_TEST_LINK;
	memcpy(m.test_link.user_data, lgr->links[slot].test_data,
	       sizeof(m.test_link.user_data));
	lgr->stats.test_links++;
	return llc_send(lgr, slot, &m, NULL);
}

int smcr_llc_test_link(struct smcr_lgr *lgr, uint8_t slot)
{
	struct smcr_lgr_link *ll = &lgr->links[slot];
	uint64_t t = now(lgr);

	memset(ll->test_data, 0, sizeof(ll->test_data));
	memcpy(ll->test_data, &t, sizeof(t));
	ll->test_sent_ms = t ? t : 1;
	ll->test_resent = false;
	ll->test_longer = false;
	return test_link_send(lgr, slot);
}

void smcr_llc_probe_links(struct smcr_lgr *lgr)
{
	unsigned int i;

	for (i = 0; i < SMCR_LINK_SLOTS; i++) {
		struct smcr_lgr_link *ll = &lgr->links[i];

		if (slot_usable(lgr, i) && !ll->down && !ll->test_sent_ms)
			smcr_llc_test_link(lgr, (uint8_t)i);
	}
}

bool smcr_lgr_answered_since(const struct smcr_lgr *lgr, uint64_t ms)
{
	unsigned int i;

	for (i = 0; i < SMCR_LINK_SLOTS; i++) {
		const struct smcr_lgr_link *ll = &lgr->links[i];

		if (slot_usable(lgr, i) && !ll->down && ll->test_answered_ms >= ms)
			return true;
	}
	return false;
}

/* The same probe again, deadline kept: a request or reply lost last on
 * its QP waits for the RC ACK timeout (2.1 s by default, longer than the
 * TEST LINK timeout); a later message on the QP makes the receiver NAK
 * the gap, so the lost one goes again at once. */
static void test_link_resend(struct smcr_lgr *lgr, uint8_t slot)
{
	lgr->links[slot].test_resent = true;
	test_link_send(lgr, slot);
}

static void test_link_rx(struct smcr_lgr *lgr, unsigned int slot,
			 const struct smcr_llc_msg *m)
{
	struct smcr_lgr_link *ll = &lgr->links[slot];
	struct smcr_llc_msg r;

	if (m->reply) {
		if (ll->test_sent_ms && memcmp(m->test_link.user_data, ll->test_data,
					       sizeof(ll->test_data)) == 0) {
			ll->test_answered_ms = ll->test_sent_ms;
			ll->test_sent_ms = 0;
		}
		return;
	}
	r = *m;
	r.reply = true;
	llc_send(lgr, slot, &r, NULL);
}

/* ---- dispatch, queue, timers ------------------------------------------------ */

static int flow_begin(struct smcr_lgr *lgr, enum smcr_llc_flow_kind kind,
		      uint8_t slot, uint32_t reason, struct smcr_rmb *rmb)
{
	struct smcr_llc_msg m;
	int ret;

	memset(&lgr->flow, 0, sizeof(lgr->flow));
	lgr->flow.kind = kind;
	lgr->flow.local = true;
	lgr->flow.slot = slot;
	switch (kind) {
	case SMCR_FLOW_CONFIRM_LINK:
		confirm_link_fill(lgr, slot, &m, false);
		ret = flow_send(lgr, slot, &m);
		break;
	case SMCR_FLOW_ADD_LINK:
		if (lgr->version == SMCR_LLC_VERSION_2 && lgr->role == SMCR_ROLE_CLIENT) {
			/* v2 has no hint of ours: the server adds links */
			ret = -EOPNOTSUPP;
			break;
		}
		if (lgr->role == SMCR_ROLE_CLIENT) {
			/* A hint to the server, not an exchange. */
			int via = pick_via(lgr, -1);

			memset(&m, 0, sizeof(m));
			m.type = SMCR_LLC_ADD_LINK;
			ret = via < 0 ? -ENOTCONN :
			      llc_send(lgr, (unsigned int)via, &m, NULL);
			ret = ret ? ret : 1;
			break;
		}
		ret = add_link_start(lgr);
		break;
	case SMCR_FLOW_DELETE_LINK:
		ret = delete_link_start(lgr, slot, reason);
		break;
	case SMCR_FLOW_CONFIRM_RKEY:
		ret = confirm_rkey_start(lgr, rmb);
		break;
	case SMCR_FLOW_DELETE_RKEY:
		ret = delete_rkey_start(lgr, rmb);
		break;
	default:
		ret = -EINVAL;
	}
	if (ret) {
		/* Done at once (1), or could not start (< 0). */
		if (ret < 0)
			smcr_dbg("llc: %s not started: %d", smcr_llc_flow_name(kind), ret);
		if (ret < 0 && kind == SMCR_FLOW_CONFIRM_RKEY && lgr->ops->event)
			lgr->ops->event(lgr, SMCR_LGR_RMB_CONFIRMED, NULL, ret);
		memset(&lgr->flow, 0, sizeof(lgr->flow));
		return ret < 0 ? ret : 0;
	}
	return 0;
}

static void flow_next(struct smcr_lgr *lgr)
{
	while (lgr->flow.kind == SMCR_FLOW_NONE && lgr->nqueue > 0 &&
	       !lgr->terminated) {
		struct smcr_llc_pending p = lgr->queue[0];

		memmove(&lgr->queue[0], &lgr->queue[1],
			--lgr->nqueue * sizeof(lgr->queue[0]));
		/* A DELETE LINK whose link is gone (deleted meanwhile, the
		 * slot maybe taken by a new one) has nothing left to do. */
		if (p.kind == SMCR_FLOW_DELETE_LINK &&
		    (!lgr->links[p.slot].link ||
		     lgr->links[p.slot].link->link_id != p.link_id))
			continue;
		flow_begin(lgr, p.kind, p.slot, p.reason, p.rmb);
	}
}

/* The same DELETE LINK running or waiting already. */
static bool delete_pending(const struct smcr_lgr *lgr, uint8_t slot)
{
	unsigned int i;

	if (lgr->flow.kind == SMCR_FLOW_DELETE_LINK && lgr->flow.slot == slot)
		return true;
	for (i = 0; i < lgr->nqueue; i++)
		if (lgr->queue[i].kind == SMCR_FLOW_DELETE_LINK &&
		    lgr->queue[i].slot == slot)
			return true;
	return false;
}

int smcr_llc_start(struct smcr_lgr *lgr, enum smcr_llc_flow_kind kind,
		   uint8_t slot, uint32_t reason, struct smcr_rmb *rmb)
{
	if (lgr->terminated)
		return -ENOTCONN;
	if (kind == SMCR_FLOW_DELETE_LINK &&
	    (slot >= SMCR_LINK_SLOTS || !lgr->links[slot].link))
		return -ENOENT;
	if (kind == SMCR_FLOW_DELETE_LINK && delete_pending(lgr, slot))
		return 0;
	if (lgr->flow.kind != SMCR_FLOW_NONE) {
		if (lgr->nqueue >= SMCR_LLC_QUEUE)
			return -EBUSY;
		lgr->queue[lgr->nqueue++] = (struct smcr_llc_pending){
			.kind = kind, .slot = slot, .reason = reason, .rmb = rmb,
			.link_id = kind == SMCR_FLOW_DELETE_LINK ?
				   lgr->links[slot].link->link_id : 0 };
		return 0;
	}
	return flow_begin(lgr, kind, slot, reason, rmb);
}

static void llc_rx(struct smcr_lgr *lgr, struct smcr_link *link,
		   const uint8_t *msg, uint32_t len);

void smcr_llc_rx(struct smcr_lgr *lgr, struct smcr_link *link,
		 const uint8_t msg[SMCR_LLC_LEN])
{
	llc_rx(lgr, link, msg, SMCR_LLC_LEN);
}

void smcr_llc_rx_long(struct smcr_lgr *lgr, struct smcr_link *link,
		      const uint8_t *msg, uint32_t len)
{
	llc_rx(lgr, link, msg, len);
}

/* msg holds len bytes: 44, or all of a longer v2 message. */
static void llc_rx(struct smcr_lgr *lgr, struct smcr_link *link,
		   const uint8_t *msg, uint32_t len)
{
	int slot = smcr_lgr_slot(lgr, link);
	struct smcr_llc_msg m;
	int ret;

	if (slot < 0 || lgr->terminated)
		return;
	ret = smcr_llc_decode(msg, len, &m);
	if (ret == SMCR_E_OPTIONAL)
		return;		/* unknown optional type: ignore (A.3) */
	if (ret < 0) {
		/* A peer that speaks garbage on a link loses that link. */
		lgr->stats.llc_bad++;
		smcr_warn("link %u: malformed LLC message (%s): link down",
			  link->link_id, smcr_msg_strerror(ret));
		smcr_lgr_link_down(lgr, link, -EPROTO);
		return;
	}
	lgr->stats.llc_recv++;
	smcr_dbg("llc: got %s %s on link %u", smcr_llc_type_str(m.type),
		 m.reply ? "reply" : "request", link->link_id);
	switch (m.type) {
	case SMCR_LLC_CONFIRM_LINK:
		confirm_link_rx(lgr, (unsigned int)slot, &m);
		break;
	case SMCR_LLC_ADD_LINK:
		if (lgr->role == SMCR_ROLE_CLIENT && !m.reply)
			add_link_req_rx(lgr, (unsigned int)slot, &m.add_link,
					m.length == len && len > SMCR_LLC_LEN ? msg : NULL, len);
		else if (lgr->role == SMCR_ROLE_SERVER && m.reply)
			add_link_reply_rx(lgr, &m.add_link,
					  m.length == len && len >= SMCR_LLC_LEN ? msg : NULL, len);
		else if (lgr->role == SMCR_ROLE_SERVER && !config_exchange_running(lgr))
			smcr_llc_start(lgr, SMCR_FLOW_ADD_LINK, 0, 0, NULL);
		break;
	case SMCR_LLC_ADD_LINK_CONT:
		if (lgr->flow.kind == SMCR_FLOW_ADD_LINK && lgr->flow.step >= 2)
			add_link_cont_rx(lgr, (unsigned int)slot, &m.add_link_cont);
		else
			lgr->stats.llc_bad++;
		break;
	case SMCR_LLC_DELETE_LINK:
		delete_link_rx(lgr, (unsigned int)slot, &m);
		break;
	case SMCR_LLC_CONFIRM_RKEY:
		confirm_rkey_rx(lgr, (unsigned int)slot, &m);
		break;
	case SMCR_LLC_CONFIRM_RKEY_CONT:
		confirm_rkey_cont_rx(lgr, (unsigned int)slot, &m);
		break;
	case SMCR_LLC_DELETE_RKEY:
		delete_rkey_rx(lgr, (unsigned int)slot, &m);
		break;
	case SMCR_LLC_TEST_LINK:
		test_link_rx(lgr, (unsigned int)slot, &m);
		break;
	case SMCR_LLC_REQ_ADD_LINK:
		/* A v2 client's invitation (Linux sends it when a port of its
		 * comes up): a server short of links starts ADD LINK now, even
		 * in its backoff after a failed one, and the client takes that
		 * ADD LINK as the answer; a server that adds no link answers
		 * with the request's type, R set and nothing else, as Linux
		 * does (smc_llc_send_req_add_link_response). */
		if (lgr->role == SMCR_ROLE_SERVER && !m.reply) {
			struct smcr_llc_msg r = { .type = SMCR_LLC_REQ_ADD_LINK, .reply = true };

			if (lgr->flow.kind == SMCR_FLOW_NONE &&
			    smcr_lgr_active_links(lgr) < lgr->max_links &&
			    smcr_lgr_add_link(lgr) == 0 && lgr->flow.kind == SMCR_FLOW_ADD_LINK) {
				break;
			}
			llc_send(lgr, (unsigned int)slot, &r, NULL);
		}
		break;
	default:
		lgr->stats.llc_bad++;
	}
}

void smcr_llc_link_gone(struct smcr_lgr *lgr, uint8_t slot)
{
	struct smcr_llc_flow *f = &lgr->flow;

	if (f->kind == SMCR_FLOW_NONE)
		return;
	if (f->kind == SMCR_FLOW_ADD_LINK && f->slot == slot) {
		add_link_fail(lgr, "the new link failed");
		return;
	}
	if (f->via == slot && f->local &&
	    (f->kind == SMCR_FLOW_CONFIRM_RKEY || f->kind == SMCR_FLOW_DELETE_RKEY)) {
		/* Their first rkey is the one on the carrying link: build the
		 * request anew for another link. */
		enum smcr_llc_flow_kind kind = f->kind;
		struct smcr_rmb *rmb = f->rmb;

		memset(f, 0, sizeof(*f));
		flow_begin(lgr, kind, 0, 0, rmb);
		return;
	}
	if (f->via == slot && f->local) {
		/* Resend over a surviving link at the next tick. */
		int via = pick_via(lgr, slot);

		if (via >= 0 && f->kind != SMCR_FLOW_ADD_LINK) {
			f->via = (uint8_t)via;
			f->deadline_ms = 0;
		} else if (f->kind == SMCR_FLOW_ADD_LINK) {
			add_link_fail(lgr, "the link carrying it failed");
		}
	}
}

static void flow_timeout(struct smcr_lgr *lgr)
{
	struct smcr_llc_flow *f = &lgr->flow;
	struct smcr_rmb *rmb = f->rmb;
	enum smcr_llc_flow_kind kind = f->kind;

	lgr->stats.llc_timeouts++;
	/* Requests whose repetition is harmless are resent (C.7). */
	if (f->local && kind != SMCR_FLOW_ADD_LINK && f->tries < lgr->cfg.llc_retries &&
	    lgr->links[f->via].link && lgr->links[f->via].link->state != SMCR_LINK_FAILED) {
		struct smcr_link *link = lgr->links[f->via].link;

		f->tries++;
		lgr->stats.llc_retries++;
		f->deadline_ms = now(lgr) + lgr->cfg.llc_timeout_ms;
		if (smcr_link_send(link, f->req, smcr_wr_id(0, SMCR_WR_TAG_LLC, f->req[0])) == 0)
			return;
	}
	smcr_warn("llc: %s timed out", smcr_llc_flow_name(kind));
	switch (kind) {
	case SMCR_FLOW_CONFIRM_LINK:
		/* The first link never came up: the group is unusable. */
		smcr_lgr_link_down(lgr, lgr->links[f->slot].link, -ETIMEDOUT);
		memset(f, 0, sizeof(*f));
		return;
	case SMCR_FLOW_ADD_LINK:
		add_link_fail_as(lgr, "timeout", true);
		return;
	case SMCR_FLOW_DELETE_LINK:
		link_delete(lgr, f->slot);
		break;
	case SMCR_FLOW_CONFIRM_RKEY:
		if (lgr->ops->event)
			lgr->ops->event(lgr, SMCR_LGR_RMB_CONFIRMED, NULL, -ETIMEDOUT);
		break;
	case SMCR_FLOW_DELETE_RKEY:
		if (rmb)
			smcr_rmb_destroy(&lgr->rmbs, rmb);
		break;
	default:
		break;
	}
	flow_end(lgr);
}

/* The tick came d ms later than due: we did not run (host busy, VM
 * paused, clock jump), so the peer had no chance to be late.  Deadlines
 * move by d and a link waiting for a TEST LINK reply gets a fresh probe
 * with a full timeout (its reply may wait unread in our queues). */
static void stall_absorb(struct smcr_lgr *lgr, uint64_t d)
{
	struct smcr_llc_flow *f = &lgr->flow;
	unsigned int i;

	lgr->stats.stalls++;
	lgr->stats.stall_ms += d;
	smcr_warn("link group: local stall of %llu ms: deadlines moved, links probed again",
		  (unsigned long long)d);
	if (f->kind != SMCR_FLOW_NONE) {
		if (f->deadline_ms && f->deadline_ms != UINT64_MAX)
			f->deadline_ms += d;
		if (f->resend)
			f->resend_ms += d;
	}
	for (i = 0; i < SMCR_LINK_SLOTS; i++) {
		struct smcr_lgr_link *ll = &lgr->links[i];

		if (!ll->link)
			continue;
		if (ll->down)
			ll->down_ms += d;
		if (ll->test_sent_ms && ll->link->state == SMCR_LINK_ACTIVE)
			smcr_llc_test_link(lgr, (uint8_t)i);
	}
}

/* ms from THEN to T, 0 if THEN is later: a stamp taken with the clock
 * after T was read (a probe sent or a link failed during this tick, a
 * deadline moved by a stall) is not "long ago". */
static uint64_t since(uint64_t t, uint64_t then)
{
	return t > then ? t - then : 0;
}

void smcr_llc_tick(struct smcr_lgr *lgr, uint64_t t)
{
	unsigned int i;

	if (lgr->cfg.stall_ms && lgr->last_tick_ms && t > lgr->last_tick_ms &&
	    t - lgr->last_tick_ms > (uint64_t)SMCR_LGR_TICK_MS + lgr->cfg.stall_ms)
		stall_absorb(lgr, t - lgr->last_tick_ms - SMCR_LGR_TICK_MS);
	lgr->last_tick_ms = t;
	if (lgr->flow.kind == SMCR_FLOW_CONFIRM_RKEY && lgr->flow.redo && t >= lgr->flow.redo_ms) {
		lgr->flow.redo = false;
		if (confirm_rkey_start(lgr, lgr->flow.rmb) < 0) {
			if (lgr->ops->event)
				lgr->ops->event(lgr, SMCR_LGR_RMB_CONFIRMED, NULL, -ENOTCONN);
			flow_end(lgr);
		}
	}
	if (lgr->flow.kind == SMCR_FLOW_ADD_LINK && !lgr->flow.local && lgr->flow.step == 1)
		add_link_path_tick(lgr, t);
	if (lgr->req_add_link_ms && t >= lgr->req_add_link_ms &&
	    lgr->flow.kind == SMCR_FLOW_NONE)
		req_add_link_send(lgr);
	if (lgr->flow.kind != SMCR_FLOW_NONE && lgr->flow.resend)
		flow_resend(lgr, t);
	if (lgr->flow.kind != SMCR_FLOW_NONE && !lgr->flow.resend &&
	    t >= lgr->flow.deadline_ms)
		flow_timeout(lgr);
	/* Requests queued while an exchange ended without looking at the
	 * queue (a collision, a start that failed) go now. */
	if (lgr->flow.kind == SMCR_FLOW_NONE && lgr->nqueue)
		flow_next(lgr);
	/* DELETE LINKs held while the failed link acknowledged the peer. */
	for (i = 0; i < SMCR_LINK_SLOTS && !lgr->terminated; i++) {
		struct smcr_lgr_link *ll = &lgr->links[i];

		if (!ll->link || !ll->delete_held ||
		    since(t, ll->down_ms) < lgr->cfg.delete_hold_ms)
			continue;
		ll->delete_held = false;
		smcr_llc_start(lgr, SMCR_FLOW_DELETE_LINK, (uint8_t)i,
			       SMCR_LLC_DEL_LOST_PATH, NULL);
	}
	/* A failed link the DELETE LINK exchange did not take away in time
	 * (the client's request or the server's lost, its queue full): drop
	 * it here, so that its port can carry a new link.  A client's link
	 * that still acknowledges the server waits longer for it. */
	for (i = 0; i < SMCR_LINK_SLOTS && !lgr->terminated; i++) {
		struct smcr_lgr_link *ll = &lgr->links[i];
		uint64_t limit = (uint64_t)lgr->cfg.llc_timeout_ms *
				 (lgr->cfg.llc_retries + 2);

		bool acking;

		if (!ll->link || !ll->down ||
		    (lgr->flow.kind == SMCR_FLOW_DELETE_LINK && lgr->flow.slot == i))
			continue;
		acking = ll->link->ops->acking && ll->link->ops->acking(ll->link);
		if (since(t, ll->down_ms) < limit ||
		    (acking && lgr->role == SMCR_ROLE_CLIENT &&
		     since(t, ll->down_ms) < lgr->cfg.acking_keep_ms))
			continue;
		smcr_info("link group: link %u failed %llu ms ago and was not deleted: dropping it",
			  ll->link->link_id, (unsigned long long)since(t, ll->down_ms));
		link_delete(lgr, i);
	}
	for (i = 0; i < SMCR_LINK_SLOTS && !lgr->terminated; i++) {
		struct smcr_lgr_link *ll = &lgr->links[i];

		if (!ll->link || ll->link->state != SMCR_LINK_ACTIVE ||
		    !lgr->cfg.test_link_idle_ms)
			continue;
		if (ll->test_sent_ms) {
			/* The last link takes every connection with it: give a
			 * peer that is only slow or stopped (its RC ACKs come,
			 * or its QP is still within its retries) longer
			 * (cfg.last_link_timeout_ms), unless its process is
			 * known to be gone.  A group that carries nothing (no
			 * connection, no CLC handshake) loses nothing: it
			 * gets the plain limit.  A dead path fails by RC
			 * retries no later. */
			/* Whatever the peer sent on the link since the probe
			 * (CDCs, its own requests) shows the path and the
			 * peer alive: the wait counts from the last of it.
			 * Linux answers a TEST LINK from its LLC worker once
			 * it gets a free send slot, and its CDCs, sent from
			 * the completion handler, take each freed slot first:
			 * under load the reply may come late while the CDCs
			 * flow (6.12 under TCG: links failed with no reply in
			 * 2 s).  A dead path delivers nothing (or fails our
			 * probe by RC retries). */
			uint64_t from = ll->last_rx_ms > ll->test_sent_ms ?
					ll->last_rx_ms : ll->test_sent_ms;
			uint64_t waited = since(t, from);
			uint64_t limit = lgr->cfg.test_link_timeout_ms;

			if (waited >= limit && smcr_lgr_active_links(lgr) <= 1 &&
			    (lgr->nconns > 0 || lgr->setups > 0) &&
			    !(lgr->ops->peer_gone && lgr->ops->peer_gone(lgr)))
				limit = lgr->cfg.last_link_timeout_ms ?
					lgr->cfg.last_link_timeout_ms : 3 * limit;
			/* The probe (or a later request) was acknowledged by
			 * the peer's RC end within the last timeout: the path
			 * works both ways and the peer's host runs, only its
			 * SMC software is late (a TCG guest starved by its
			 * host: 6.12's LLC worker left a probe over 2 s
			 * unanswered while it set up connections, nothing
			 * else on the link).  It gets three timeouts, as a
			 * last link does.  A lost path acknowledges nothing. */
			if (waited >= limit && !ll->test_longer &&
			    ll->tx_ok_ms >= ll->test_sent_ms &&
			    since(t, ll->tx_ok_ms) < lgr->cfg.test_link_timeout_ms)
				ll->test_longer = true;
			if (ll->test_longer && limit < 3ull * lgr->cfg.test_link_timeout_ms)
				limit = 3ull * lgr->cfg.test_link_timeout_ms;

			if (waited < limit && !ll->test_resent &&
			    waited >= lgr->cfg.test_link_timeout_ms / 2)
				test_link_resend(lgr, (uint8_t)i);
			if (waited >= limit) {
				smcr_warn("link %u: no TEST LINK reply in %llu ms: link down",
					  ll->link->link_id, (unsigned long long)limit);
				ll->test_sent_ms = 0;
				smcr_lgr_link_down(lgr, ll->link, -ETIMEDOUT);
			}
			continue;
		}
		if (since(t, ll->last_rx_ms) >= lgr->cfg.test_link_idle_ms)
			smcr_llc_test_link(lgr, (uint8_t)i);
	}
}
