/* SPDX-License-Identifier: BSD-3-Clause */
/* smcrbd: link groups of two peers driven against each other through the
 * in-memory wire: CONFIRM LINK, ADD LINK (+CONT), CONFIRM/DELETE RKEY,
 * DELETE LINK, TEST LINK, failover and re-add, asymmetric groups, LLC
 * collisions and timeouts. */
#include <config.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "unit.h"
#include "smcr-suites.h"
#include "lgr.h"
#include "log.h"
#include "memwire.h"

#define MAX_ENDS 32
#define NCONN 4

struct host {
	const char *name;
	unsigned int id, nports;
	struct smcr_lgr *lgr;
	struct memwire_end *ends[MAX_ENDS];
	unsigned int port_of[MAX_ENDS];
	unsigned int nends;
	unsigned int events[SMCR_LGR_TERMINATED + 1];
	int last_rmb_status;
	struct smcr_conn conn[NCONN];
	uint64_t sent[NCONN], rcvd[NCONN];
	unsigned int bad;
};

static struct host S, C;		/* server, client */
static uint64_t clock_ms;
static uint32_t seed = 99;

static uint32_t rnd(void)
{
	seed = seed * 1103515245u + 12345u;
	return seed >> 8;
}

static struct host *host_of(struct smcr_lgr *lgr)
{
	return lgr->owner;
}

static struct memwire_end *end_of(struct smcr_link *l)
{
	return (struct memwire_end *)l;
}

static int end_index(struct host *h, struct smcr_link *l)
{
	unsigned int i;

	for (i = 0; i < h->nends; i++)
		if (&h->ends[i]->link == l)
			return (int)i;
	return -1;
}

/* The peer end with this QPN on the port with this GID.  Like rxe, every
 * port numbers its QPs from 0x11, so a QPN alone names nothing. */
static struct memwire_end *end_by_qp(uint32_t qpn, const uint8_t *gid)
{
	struct host *hs[2] = { &S, &C };
	unsigned int k, i;

	for (k = 0; k < 2; k++)
		for (i = 0; i < hs[k]->nends; i++)
			if (hs[k]->ends[i] && hs[k]->ends[i]->link.priv ==
			    (void *)(uintptr_t)qpn &&
			    gid[15] == hs[k]->id * 16 + hs[k]->port_of[i])
				return hs[k]->ends[i];
	return NULL;
}

static unsigned int qps_on_port(const struct host *h, unsigned int port)
{
	unsigned int i, n = 0;

	for (i = 0; i < h->nends; i++)
		n += h->port_of[i] == port;
	return n;
}

static bool port_used(struct host *h, unsigned int port)
{
	unsigned int i;

	for (i = 0; i < SMCR_LINK_SLOTS; i++) {
		struct smcr_link *l = h->lgr->links[i].link;
		int e = l ? end_index(h, l) : -1;

		if (e >= 0 && h->port_of[e] == port)
			return true;
	}
	return false;
}

static int op_link_create(struct smcr_lgr *lgr, const struct smcr_link_info *peer,
			  bool asym, struct smcr_link **linkp,
			  struct smcr_link_info *local)
{
	struct host *h = host_of(lgr);
	struct memwire_end *e;
	unsigned int port;

	(void)peer;
	for (port = 0; port < h->nports; port++)
		if (!port_used(h, port))
			break;
	if (port == h->nports) {
		if (!asym || h->nports == 0)
			return -ENODEV;
		port = 0;
	}
	e = calloc(1, sizeof(*e));
	memwire_init(e, 64, &smcr_lgr_link_handler, lgr);
	memset(local, 0, sizeof(*local));
	local->qpn = 0x11 + qps_on_port(h, port);
	h->port_of[h->nends] = port;
	h->ends[h->nends++] = e;
	local->psn = 100 + h->nends;
	local->mtu = 3;
	local->gid[15] = (uint8_t)(h->id * 16 + port);
	local->mac[5] = (uint8_t)(h->id * 16 + port);
	e->link.priv = (void *)(uintptr_t)local->qpn;
	*linkp = &e->link;
	return 0;
}

/* How many more times the client's links after the first find no path
 * (-EAGAIN: the engine's peer address not resolved yet), and how often. */
static unsigned int client_no_path, client_no_path_seen;

static int op_link_connect(struct smcr_lgr *lgr, struct smcr_link *link,
			   const struct smcr_link_info *peer)
{
	struct memwire_end *p = end_by_qp(peer->qpn, peer->gid);

	if (lgr == C.lgr && lgr->links[0].link && link != lgr->links[0].link &&
	    client_no_path) {
		client_no_path--;
		client_no_path_seen++;
		return -EAGAIN;
	}
	if (!p)
		return -ENOENT;
	memwire_connect(end_of(link), p);
	return 0;
}

static void op_link_destroy(struct smcr_lgr *lgr, struct smcr_link *link)
{
	struct host *h = host_of(lgr);
	int i = end_index(h, link);

	/* Keep the end allocated (its peer may still point at it) but make
	 * it deliver nothing more. */
	if (i >= 0) {
		memwire_free(h->ends[i]);
		h->ends[i]->fault = MEMWIRE_BLACKHOLE;
		h->ends[i]->link.state = SMCR_LINK_FAILED;
		h->ends[i]->failed = true;
		h->ends[i]->link.priv = NULL;
	}
}

static int op_rmb_reg(struct smcr_lgr *lgr, struct smcr_rmb *rmb,
		      struct smcr_link *link, uint32_t *rkey, uint64_t *vaddr)
{
	struct host *h = host_of(lgr);
	int i = end_index(h, link);

	if (i < 0)
		return -ENOENT;
	/* One key per RMB and device (port), as with verbs. */
	*rkey = h->id << 24 | rmb->id << 8 | h->port_of[i];
	*vaddr = (uintptr_t)rmb->buf;
	memwire_add_mr(h->ends[i], rmb->buf, rmb->len, *rkey);
	/* Other links on the same port share the registration. */
	for (unsigned int k = 0; k < h->nends; k++)
		if (h->port_of[k] == h->port_of[i] && k != (unsigned int)i)
			memwire_add_mr(h->ends[k], rmb->buf, rmb->len, *rkey);
	return 0;
}

static void op_event(struct smcr_lgr *lgr, enum smcr_lgr_event ev,
		     struct smcr_link *link, int status)
{
	struct host *h = host_of(lgr);

	(void)link;
	h->events[ev]++;
	if (ev == SMCR_LGR_RMB_CONFIRMED)
		h->last_rmb_status = status;
}

static uint64_t op_now(struct smcr_lgr *lgr)
{
	(void)lgr;
	return clock_ms;
}

/* What op_peer_gone answers (the engine: a TCP socket ended). */
static bool peer_gone;

static bool op_peer_gone(struct smcr_lgr *lgr)
{
	(void)lgr;
	return peer_gone;
}

static const struct smcr_lgr_ops ops = {
	.link_create = op_link_create,
	.link_connect = op_link_connect,
	.link_destroy = op_link_destroy,
	.rmb_reg = op_rmb_reg,
	.event = op_event,
	.now_ms = op_now,
	.peer_gone = op_peer_gone,
};

static bool wire_busy(struct memwire_end **all, unsigned int n)
{
	unsigned int i;

	for (i = 0; i < n; i++)
		if (all[i]->head)
			return true;
	return false;
}

/* Deliver everything, in random interleaving.  (Random picks alone may
 * miss the one end that still has work: run until every end is empty.) */
static void run(void)
{
	struct memwire_end *all[2 * MAX_ENDS];
	unsigned int n = 0, i, idle = 0;

	for (i = 0; i < S.nends; i++)
		all[n++] = S.ends[i];
	for (i = 0; i < C.nends; i++)
		all[n++] = C.ends[i];
	while (idle < 4 * n || wire_busy(all, n)) {
		if (memwire_step(all[rnd() % n]))
			idle = 0;
		else
			idle++;
		/* New links may have appeared. */
		if (n != S.nends + C.nends) {
			n = 0;
			for (i = 0; i < S.nends; i++)
				all[n++] = S.ends[i];
			for (i = 0; i < C.nends; i++)
				all[n++] = C.ends[i];
		}
	}
}

/* Advance time by ms in ticks, delivering as we go. */
static void wait_ms(unsigned int ms)
{
	unsigned int t;

	for (t = 0; t < ms; t += SMCR_LGR_TICK_MS) {
		clock_ms += SMCR_LGR_TICK_MS;
		if (S.lgr)
			smcr_lgr_tick(S.lgr);
		if (C.lgr)
			smcr_lgr_tick(C.lgr);
		run();
	}
}

/* First contact as CLC would do it: one RMBE each, the first link, each
 * side learns the other's RMB on link 1.  Then CONFIRM LINK and the
 * server's ADD LINK run. */
/* The SMC-R version both groups speak (CLC's outcome): 1, or 2. */
static uint8_t lgr_version = 1;
/* SMC-Rv2: the release of the first contact and its limits on each side
 * (CLC echoes them, so they agree but for a misbehaving peer). */
static uint8_t lgr_release, lgr_max_conns, s_max_links, c_max_links;

static void group_up2(unsigned int sports, unsigned int cports,
		      const struct smcr_lgr_config *cfg, const struct smcr_lgr_config *ccfg)
{
	struct smcr_link *sl, *cl;
	struct smcr_link_info si, ci;
	struct smcr_rmbe se, ce;
	uint32_t rk;
	uint64_t va;
	bool pend;

	memset(&S, 0, sizeof(S));
	memset(&C, 0, sizeof(C));
	S.name = "server";
	S.id = 1;
	S.nports = sports;
	C.name = "client";
	C.id = 2;
	C.nports = cports;
	clock_ms = 1000;
	CU_ASSERT_EQUAL_FATAL(smcr_lgr_create(SMCR_ROLE_SERVER, &ops, &S, cfg, &S.lgr), 0);
	CU_ASSERT_EQUAL_FATAL(smcr_lgr_create(SMCR_ROLE_CLIENT, &ops, &C, ccfg, &C.lgr), 0);
	S.lgr->version = C.lgr->version = lgr_version;	/* as CLC negotiated */
	if (lgr_version == 2) {
		smcr_lgr_set_v21(S.lgr, lgr_release, lgr_max_conns, s_max_links);
		smcr_lgr_set_v21(C.lgr, lgr_release, lgr_max_conns, c_max_links);
	}
	CU_ASSERT_EQUAL_FATAL(op_link_create(S.lgr, NULL, false, &sl, &si), 0);
	CU_ASSERT_EQUAL_FATAL(op_link_create(C.lgr, &si, false, &cl, &ci), 0);
	CU_ASSERT_EQUAL_FATAL(op_link_connect(S.lgr, sl, &ci), 0);
	CU_ASSERT_EQUAL_FATAL(op_link_connect(C.lgr, cl, &si), 0);
	/* Server: CONFIRM LINK starts here, after the CLC Confirm. */
	CU_ASSERT_EQUAL_FATAL(smcr_lgr_first_link(C.lgr, cl, &ci, &si), 0);
	CU_ASSERT_EQUAL_FATAL(smcr_lgr_rmbe_alloc(S.lgr, 1000, &se, &pend), 0);
	CU_ASSERT_FALSE(pend);
	CU_ASSERT_EQUAL_FATAL(smcr_lgr_rmbe_alloc(C.lgr, 1000, &ce, &pend), 0);
	CU_ASSERT_FALSE(pend);
	CU_ASSERT_EQUAL_FATAL(smcr_lgr_first_link(S.lgr, sl, &si, &ci), 0);
	/* CLC carried each side's RMB rkey on link 1. */
	CU_ASSERT_EQUAL(smcr_lgr_rmb_token(S.lgr, se.rmb, 0, &rk, &va), 0);
	CU_ASSERT_PTR_NOT_NULL(smcr_lgr_peer_rmb_add(C.lgr, 0, rk, va));
	CU_ASSERT_EQUAL(smcr_lgr_rmb_token(C.lgr, ce.rmb, 0, &rk, &va), 0);
	CU_ASSERT_PTR_NOT_NULL(smcr_lgr_peer_rmb_add(S.lgr, 0, rk, va));
	/* Keep the elements for connection 0. */
	S.conn[0].rmbe = se;
	C.conn[0].rmbe = ce;
	run();
}

static void group_up(unsigned int sports, unsigned int cports,
		     const struct smcr_lgr_config *cfg)
{
	group_up2(sports, cports, cfg, cfg);
}

static void group_down(void)
{
	unsigned int i;

	smcr_lgr_destroy(S.lgr);
	smcr_lgr_destroy(C.lgr);
	for (i = 0; i < S.nends; i++) {
		memwire_free(S.ends[i]);
		free(S.ends[i]);
	}
	for (i = 0; i < C.nends; i++) {
		memwire_free(C.ends[i]);
		free(C.ends[i]);
	}
	S.lgr = C.lgr = NULL;
}

/* The send buffer for a peer's RMBE of any code up to the group's limit:
 * 1..16 MiB (Linux 6.11+ offers up to 512 MiB); one beyond the group's
 * send buffer memory is refused (the connection is declined, out of
 * memory), never made smaller than the peer's element. */
static void test_sndbuf_large_peer_rmbe(void)
{
	struct smcr_lgr_config cfg = smcr_lgr_config_default;
	struct smcr_rmbe b;
	unsigned int c;

	cfg.max_rmb_bytes = 32u << 20;
	group_up(1, 1, &cfg);
	for (c = 6; c <= 10; c++) {
		uint32_t size = smcr_rmb_size_decompress(c);

		CU_ASSERT_EQUAL_FATAL(smcr_lgr_sndbuf_alloc(C.lgr, size, &b), 0);
		CU_ASSERT_EQUAL(b.rmb->elem_size, size);
		CU_ASSERT_EQUAL(b.rmb->size_code, c);
		CU_ASSERT(b.rmb->local_only);
		smcr_rmbe_free(&C.lgr->sndbufs, &b);
	}
	CU_ASSERT_EQUAL(smcr_lgr_sndbuf_alloc(C.lgr, 64u << 20, &b), -ENOBUFS);
	smcr_rmb_pool_trim(&C.lgr->sndbufs, NULL, NULL);
	group_down();
}

static void test_first_contact_two_links(void)
{
	struct smcr_lgr_peer_rmb *p;
	unsigned int i, n = 0;

	group_up(2, 2, NULL);
	/* Each group has its own buffers; send buffers are local only. */
	CU_ASSERT_FALSE(S.lgr->rmbs.local_only);
	CU_ASSERT_TRUE(S.lgr->sndbufs.local_only);
	CU_ASSERT_PTR_NOT_EQUAL(S.conn[0].rmbe.rmb, C.conn[0].rmbe.rmb);
	CU_ASSERT_EQUAL(smcr_lgr_active_links(S.lgr), 2);
	CU_ASSERT_EQUAL(smcr_lgr_active_links(C.lgr), 2);
	CU_ASSERT_EQUAL(S.events[SMCR_LGR_LINK_UP], 2);
	CU_ASSERT_EQUAL(C.events[SMCR_LGR_LINK_UP], 2);
	CU_ASSERT_EQUAL(S.lgr->flow.kind, SMCR_FLOW_NONE);
	CU_ASSERT_EQUAL(C.lgr->flow.kind, SMCR_FLOW_NONE);
	/* Symmetric: the two links use different ports on both sides. */
	CU_ASSERT_FALSE(S.lgr->links[1].asym);
	CU_ASSERT_FALSE(C.lgr->links[1].asym);
	CU_ASSERT_EQUAL(S.lgr->links[1].link->link_id, C.lgr->links[1].link->link_id);
	/* ADD LINK CONT gave each side the other's RMB on link 2. */
	for (i = 0; i < SMCR_LGR_MAX_PEER_RMBS; i++) {
		p = &S.lgr->peer_rmbs[i];
		if (!p->used)
			continue;
		n++;
		CU_ASSERT(p->r.rkey[0] != 0);
		CU_ASSERT(p->r.rkey[1] != 0);
		CU_ASSERT(p->r.rkey[0] != p->r.rkey[1]);
	}
	CU_ASSERT_EQUAL(n, 1);
	p = NULL;
	for (i = 0; i < SMCR_LGR_MAX_PEER_RMBS; i++)
		if (C.lgr->peer_rmbs[i].used)
			p = &C.lgr->peer_rmbs[i];
	CU_ASSERT_PTR_NOT_NULL_FATAL(p);
	CU_ASSERT(p->r.rkey[1] != 0);
	CU_ASSERT_EQUAL(S.lgr->stats.llc_bad + C.lgr->stats.llc_bad, 0);
	/* LLC messages of 44 bytes went inline, each signaled. */
	for (i = 0; i < 2; i++) {
		const struct smcr_link *ls = S.lgr->links[i].link, *lc = C.lgr->links[i].link;

		CU_ASSERT(ls->sends > 0 && lc->sends > 0);
		if (lgr_version == 1) {
			CU_ASSERT_EQUAL(ls->inline_sends, ls->sends);
			CU_ASSERT_EQUAL(lc->inline_sends, lc->sends);
		}
		CU_ASSERT_EQUAL(ls->unsignaled + lc->unsignaled, 0);
	}
	group_down();
}

/* The client's path for the server's new link is not there at first (its
 * peer's address unresolved on that netdev): the ADD LINK waits, tried
 * again at the ticks, and is answered once connected, or refused after
 * SMCR_LGR_ADD_LINK_PATH_WAIT_MS, before the server's own timeout; from
 * an RNIC the server already uses it is refused at once, and a v2 client
 * asks for a link again later (REQ ADD LINK). */
static void test_add_link_path_wait(void)
{
	uint8_t v;

	for (v = 1; v <= 2; v++) {
		lgr_version = v;
		client_no_path = 3;
		client_no_path_seen = 0;
		group_up(2, 2, NULL);
		CU_ASSERT_EQUAL(C.lgr->flow.kind, SMCR_FLOW_ADD_LINK);
		CU_ASSERT_EQUAL(C.lgr->flow.step, 1);
		CU_ASSERT_EQUAL(smcr_lgr_active_links(S.lgr), 1);
		wait_ms(1000);
		CU_ASSERT_EQUAL(client_no_path_seen, 3);
		CU_ASSERT_EQUAL(smcr_lgr_active_links(S.lgr), 2);
		CU_ASSERT_EQUAL(smcr_lgr_active_links(C.lgr), 2);
		CU_ASSERT_EQUAL(S.lgr->flow.kind, SMCR_FLOW_NONE);
		CU_ASSERT_EQUAL(C.lgr->flow.kind, SMCR_FLOW_NONE);
		CU_ASSERT_EQUAL(S.lgr->stats.llc_timeouts + C.lgr->stats.llc_timeouts, 0);
		CU_ASSERT_EQUAL(S.lgr->stats.llc_bad + C.lgr->stats.llc_bad, 0);
		group_down();

		client_no_path = 1000;
		group_up(2, 2, NULL);
		wait_ms(SMCR_LGR_ADD_LINK_PATH_WAIT_MS - 2 * SMCR_LGR_TICK_MS);
		CU_ASSERT_EQUAL(C.lgr->flow.kind, SMCR_FLOW_ADD_LINK);
		CU_ASSERT_PTR_NOT_NULL(C.lgr->links[1].link);
		wait_ms(4 * SMCR_LGR_TICK_MS);
		CU_ASSERT_EQUAL(C.lgr->flow.kind, SMCR_FLOW_NONE);
		CU_ASSERT_PTR_NULL(C.lgr->links[1].link);
		CU_ASSERT_EQUAL(S.lgr->flow.kind, SMCR_FLOW_NONE);
		CU_ASSERT_PTR_NULL(S.lgr->links[1].link);
		CU_ASSERT_EQUAL(smcr_lgr_active_links(S.lgr), 1);
		CU_ASSERT_EQUAL(S.lgr->stats.llc_timeouts, 0);	/* refused, not silent */
		client_no_path = 0;
		group_down();

		/* The server's new link from the RNIC it already uses
		 * (asymmetric on its side): refused at once. */
		client_no_path = 1000;
		client_no_path_seen = 0;
		group_up(1, 2, NULL);
		CU_ASSERT_EQUAL(client_no_path_seen, 1);
		CU_ASSERT_EQUAL(C.lgr->flow.kind, SMCR_FLOW_NONE);
		CU_ASSERT_EQUAL(S.lgr->flow.kind, SMCR_FLOW_NONE);
		CU_ASSERT_PTR_NULL(C.lgr->links[1].link);
		CU_ASSERT_EQUAL(smcr_lgr_active_links(S.lgr), 1);
		/* A v2 client then asks for a link (REQ ADD LINK with the
		 * refused link's GID), once, after the retry time; v1 has no
		 * such request. */
		client_no_path = 0;
		wait_ms(SMCR_LGR_V2_ADD_LINK_RETRY_MS - 2 * SMCR_LGR_TICK_MS);
		CU_ASSERT_EQUAL(smcr_lgr_active_links(S.lgr), 1);
		wait_ms(4 * SMCR_LGR_TICK_MS);
		CU_ASSERT_EQUAL(smcr_lgr_active_links(S.lgr), v == 2 ? 2 : 1);
		CU_ASSERT_EQUAL(smcr_lgr_active_links(C.lgr), v == 2 ? 2 : 1);
		CU_ASSERT_EQUAL(C.lgr->req_add_link_ms, 0);
		CU_ASSERT_EQUAL(S.lgr->stats.llc_bad + C.lgr->stats.llc_bad, 0);
		group_down();
	}
	lgr_version = 1;
}

static void test_asymmetric(void)
{
	/* The client has one RNIC: the second link reuses its port. */
	group_up(2, 1, NULL);
	CU_ASSERT_EQUAL(smcr_lgr_active_links(S.lgr), 2);
	CU_ASSERT_EQUAL(smcr_lgr_active_links(C.lgr), 2);
	CU_ASSERT_TRUE(C.lgr->links[1].asym);
	CU_ASSERT_FALSE(S.lgr->links[1].asym);
	group_down();
	/* Both have one: the server tries an asymmetric link, the client
	 * would make it parallel and rejects; one link stays. */
	group_up(1, 1, NULL);
	CU_ASSERT_EQUAL(smcr_lgr_active_links(S.lgr), 1);
	CU_ASSERT_EQUAL(smcr_lgr_active_links(C.lgr), 1);
	CU_ASSERT_EQUAL(S.lgr->flow.kind, SMCR_FLOW_NONE);
	CU_ASSERT_PTR_NULL(S.lgr->links[1].link);
	CU_ASSERT_PTR_NULL(C.lgr->links[1].link);
	group_down();
}

static void test_confirm_delete_rkey(void)
{
	struct smcr_rmbe e[20];
	bool pend;
	unsigned int i, fresh = 0, peers = 0;

	group_up(2, 2, NULL);
	/* 16 KiB elements come 16 to an RMB: the 16th element of the client
	 * needs a new RMB, announced on both links with CONFIRM RKEY. */
	for (i = 0; i < 20; i++) {
		CU_ASSERT_EQUAL_FATAL(smcr_lgr_rmbe_alloc(C.lgr, 1000, &e[i], &pend), 0);
		fresh += pend;
	}
	CU_ASSERT_EQUAL(fresh, 5);	/* 4 more from the pending RMB */
	run();
	CU_ASSERT_EQUAL(C.events[SMCR_LGR_RMB_CONFIRMED], 1);
	CU_ASSERT_EQUAL(C.last_rmb_status, 0);
	CU_ASSERT_TRUE(e[19].rmb->announced);
	CU_ASSERT_EQUAL(C.lgr->stats.rkeys_confirmed, 1);
	for (i = 0; i < SMCR_LGR_MAX_PEER_RMBS; i++) {
		struct smcr_lgr_peer_rmb *p = &S.lgr->peer_rmbs[i];

		if (!p->used)
			continue;
		peers++;
		CU_ASSERT(p->r.rkey[0] && p->r.rkey[1]);
	}
	CU_ASSERT_EQUAL(peers, 2);
	/* Free the new RMB's elements and trim: DELETE RKEY, peer forgets. */
	for (i = 15; i < 20; i++)
		smcr_rmbe_free(&C.lgr->rmbs, &e[i]);
	CU_ASSERT_EQUAL(smcr_lgr_rmb_trim(C.lgr), 0);
	run();
	CU_ASSERT_EQUAL(C.lgr->stats.rkeys_deleted, 1);
	CU_ASSERT_EQUAL(C.lgr->rmbs.nrmbs, 1);
	peers = 0;
	for (i = 0; i < SMCR_LGR_MAX_PEER_RMBS; i++)
		peers += S.lgr->peer_rmbs[i].used;
	CU_ASSERT_EQUAL(peers, 1);
	group_down();
}

/* Connections over the group, streaming both ways. */
static uint8_t sbyte(const struct host *from, unsigned int c, uint64_t i)
{
	uint64_t x = (i + 1) * 0x9E3779B97F4A7C15ull + c * 31 + from->id;

	return (uint8_t)(x ^ (x >> 23));
}

/* Connection i as CLC sets it up: the server takes the token for its
 * Accept, the client adds its connection before it sends its Confirm,
 * the server adds its own when the Confirm arrives.  early runs in
 * between: the client may write as soon as its Confirm is out. */
static void conn_up(unsigned int i, void (*early)(unsigned int i))
{
	struct smcr_conn_params sp, cp;
	struct smcr_rmbe se = S.conn[i].rmbe, ce = C.conn[i].rmbe, sb, cb;
	struct smcr_lgr_peer_rmb *sp_rmb, *cp_rmb;
	uint8_t slot = S.lgr->links[0].link ? 0 : 1;	/* CLC's link */
	uint32_t rk;
	uint64_t va;
	bool pend;

	if (i > 0) {
		CU_ASSERT_EQUAL_FATAL(smcr_lgr_rmbe_alloc(S.lgr, 1000, &se, &pend), 0);
		CU_ASSERT_EQUAL_FATAL(smcr_lgr_rmbe_alloc(C.lgr, 1000, &ce, &pend), 0);
	}
	CU_ASSERT_EQUAL_FATAL(smcr_lgr_sndbuf_alloc(S.lgr, ce.rmb->elem_size, &sb), 0);
	CU_ASSERT_EQUAL_FATAL(smcr_lgr_sndbuf_alloc(C.lgr, se.rmb->elem_size, &cb), 0);
	smcr_lgr_rmb_token(S.lgr, se.rmb, slot, &rk, &va);
	cp_rmb = smcr_lgr_peer_rmb_find(C.lgr, slot, rk);
	smcr_lgr_rmb_token(C.lgr, ce.rmb, slot, &rk, &va);
	sp_rmb = smcr_lgr_peer_rmb_find(S.lgr, slot, rk);
	CU_ASSERT_PTR_NOT_NULL_FATAL(sp_rmb);
	CU_ASSERT_PTR_NOT_NULL_FATAL(cp_rmb);
	sp = (struct smcr_conn_params){
		.token = smcr_lgr_conn_token(S.lgr), .peer_token = 0,
		.rmbe = se, .sndbuf = sb, .peer_rmb = &sp_rmb->r,
		.peer_index = ce.index, .peer_elem_size = ce.rmb->elem_size,
		.link = smcr_lgr_pick_link(S.lgr),
	};
	cp = (struct smcr_conn_params){
		.token = smcr_lgr_conn_token(C.lgr), .peer_token = sp.token,
		.rmbe = ce, .sndbuf = cb, .peer_rmb = &cp_rmb->r,
		.peer_index = se.index, .peer_elem_size = se.rmb->elem_size,
		.link = smcr_lgr_pick_link(C.lgr),
	};
	sp.peer_token = cp.token;
	CU_ASSERT_EQUAL_FATAL(smcr_conn_init(&C.conn[i], &cp), 0);
	CU_ASSERT_EQUAL(smcr_lgr_conn_add(C.lgr, &C.conn[i]), 0);
	if (early) {
		early(i);
		sp.link = smcr_lgr_pick_link(S.lgr);	/* links may have failed */
	}
	CU_ASSERT_EQUAL_FATAL(smcr_conn_init(&S.conn[i], &sp), 0);
	CU_ASSERT_EQUAL(smcr_lgr_conn_add(S.lgr, &S.conn[i]), 0);
}

static void conns_up(void)
{
	unsigned int i;

	for (i = 0; i < NCONN; i++)
		conn_up(i, NULL);
	run();
}

static void pump(struct host *h, struct host *o, uint64_t total)
{
	uint8_t buf[8192];
	unsigned int c;
	size_t k;

	for (c = 0; c < NCONN; c++) {
		size_t want = 1 + rnd() % sizeof(buf);
		ssize_t n;

		if (h->conn[c].error)
			continue;
		if (want > total - h->sent[c])
			want = (size_t)(total - h->sent[c]);
		for (k = 0; k < want; k++)
			buf[k] = sbyte(h, c, h->sent[c] + k);
		n = want ? smcr_conn_send(&h->conn[c], buf, want) : 0;
		if (n > 0)
			h->sent[c] += (uint64_t)n;
		n = smcr_conn_recv(&h->conn[c], buf, sizeof(buf));
		for (k = 0; n > 0 && k < (size_t)n; k++)
			if (buf[k] != sbyte(o, c, h->rcvd[c] + k))
				h->bad++;
		if (n > 0)
			h->rcvd[c] += (uint64_t)n;
	}
}

static bool streamed(uint64_t total)
{
	unsigned int c;

	for (c = 0; c < NCONN; c++)
		if (S.rcvd[c] < total || C.rcvd[c] < total)
			return false;
	return true;
}

/* Called after each tick of stream_with (then with writes in flight). */
static void (*after_tick)(void);

static void stream_with(uint64_t total, void (*at)(unsigned int round))
{
	unsigned int round;

	for (round = 0; round < 20000 && !streamed(total); round++) {
		if (at)
			at(round);
		pump(&S, &C, total);
		pump(&C, &S, total);
		clock_ms += 10;
		if (round % 10 == 0) {
			smcr_lgr_tick(S.lgr);
			smcr_lgr_tick(C.lgr);
			if (after_tick)
				after_tick();
		}
		run();
	}
}

static void check_stream(uint64_t total)
{
	unsigned int c;

	CU_ASSERT_EQUAL(S.bad, 0);
	CU_ASSERT_EQUAL(C.bad, 0);
	for (c = 0; c < NCONN; c++) {
		CU_ASSERT_EQUAL(S.conn[c].error, 0);
		CU_ASSERT_EQUAL(C.conn[c].error, 0);
		CU_ASSERT_EQUAL(S.rcvd[c], total);
		CU_ASSERT_EQUAL(C.rcvd[c], total);
	}
}

static void cut_link1(unsigned int round)
{
	if (round == 30)
		memwire_fault(end_of(S.lgr->links[0].link), MEMWIRE_CUT);
}

/* Link 1's QP refuses posts for 10 rounds before it goes down (a refused
 * post: link_verbs takes the link down at its next poll). */
static void refuse_then_cut_link1(unsigned int round)
{
	struct memwire_end *e = S.lgr->links[0].link ? end_of(S.lgr->links[0].link) : NULL;

	if (e && round == 30)
		e->refuse_posts = true;
	if (e && round == 40) {
		e->refuse_posts = false;
		memwire_fault(e, MEMWIRE_CUT);
	}
}

/* What a send accepted while its link refused posts is sent once, after
 * the failover: the caller is told it went (no error it would send
 * again), and every byte arrives once, in order. */
static void test_failover_refused_posts(void)
{
	const uint64_t total = 256 * 1024;

	group_up(2, 2, NULL);
	conns_up();
	CU_ASSERT(S.lgr->links[0].link->nconns > 0);
	stream_with(total, refuse_then_cut_link1);
	check_stream(total);
	CU_ASSERT_EQUAL(S.lgr->stats.link_failures, 1);
	group_down();
}

/* For the next stream_with()/check_stream(). */
static void stream_counts_clear(void)
{
	memset(S.sent, 0, sizeof(S.sent));
	memset(S.rcvd, 0, sizeof(S.rcvd));
	memset(C.sent, 0, sizeof(C.sent));
	memset(C.rcvd, 0, sizeof(C.rcvd));
}

/* A group whose link 1 was cut under a stream of total bytes each way
 * (every connection on link 2 then) and added again by the server. */
static void link1_cut_and_back(uint64_t total)
{
	group_up(2, 2, NULL);
	conns_up();
	stream_with(total, cut_link1);
	check_stream(total);
	CU_ASSERT_EQUAL(smcr_lgr_add_link(S.lgr), 0);
	run();
	CU_ASSERT_EQUAL_FATAL(smcr_lgr_active_links(S.lgr), 2);
	CU_ASSERT_EQUAL_FATAL(smcr_lgr_active_links(C.lgr), 2);
}

static void test_failover_and_readd(void)
{
	const uint64_t total = 512 * 1024;

	group_up(2, 2, NULL);
	conns_up();
	/* Connections are spread over both links. */
	CU_ASSERT(S.lgr->links[0].link->nconns > 0);
	CU_ASSERT(S.lgr->links[1].link->nconns > 0);
	stream_with(total, cut_link1);
	check_stream(total);
	/* The dead link was deleted on both sides; data kept flowing. */
	CU_ASSERT_EQUAL(S.lgr->stats.link_failures, 1);
	CU_ASSERT(S.lgr->stats.failovers + C.lgr->stats.failovers >= 2);
	CU_ASSERT_EQUAL(S.lgr->stats.links_deleted, 1);
	CU_ASSERT_EQUAL(C.lgr->stats.links_deleted, 1);
	CU_ASSERT_EQUAL(smcr_lgr_active_links(S.lgr), 1);
	CU_ASSERT_PTR_NULL(S.lgr->links[0].link);
	CU_ASSERT_PTR_NULL(C.lgr->links[0].link);
	/* The port comes back: the server adds a link again. */
	CU_ASSERT_EQUAL(smcr_lgr_add_link(S.lgr), 0);
	run();
	CU_ASSERT_EQUAL(smcr_lgr_active_links(S.lgr), 2);
	CU_ASSERT_EQUAL(smcr_lgr_active_links(C.lgr), 2);
	CU_ASSERT_EQUAL(S.lgr->stats.links_added, 3);
	/* It has a new number (Linux's smcr_next_link_id), not the dead
	 * link's 1: a DELETE LINK for that one still queued at the peer
	 * must not take it. */
	CU_ASSERT_PTR_NOT_NULL_FATAL(S.lgr->links[0].link);
	CU_ASSERT_PTR_NOT_NULL_FATAL(C.lgr->links[0].link);
	CU_ASSERT_EQUAL(S.lgr->links[0].link->link_id, 3);
	CU_ASSERT_EQUAL(C.lgr->links[0].link->link_id, 3);
	/* And the re-added link carries data: cut the other one now. */
	stream_counts_clear();
	memwire_fault(end_of(S.lgr->links[1].link), MEMWIRE_CUT);
	stream_with(total, NULL);
	check_stream(total);
	CU_ASSERT_EQUAL(S.lgr->stats.link_failures, 2);
	group_down();
}

static bool sndbuf_taken(const struct smcr_rmbe *b)
{
	return (b->rmb->used >> (b->index - 1u)) & 1u;
}

/* An aborted connection's send buffer stays taken while the RDMA writes it
 * posted may still read it (a QP reads a write's source when it gets to
 * it; rxe does), and goes back when its last CDC completes, or when the
 * link goes. */
static void test_sndbuf_parked(void)
{
	struct smcr_link *l0, *l1;
	struct smcr_conn *c0 = NULL, *c1 = NULL;
	struct smcr_rmbe b0, b1;
	uint8_t buf[4096];
	unsigned int k;

	group_up(2, 2, NULL);
	conns_up();
	l0 = C.lgr->links[0].link;
	l1 = C.lgr->links[1].link;
	for (k = 0; k < NCONN; k++) {
		if (C.conn[k].link == l0 && !c0)
			c0 = &C.conn[k];
		if (C.conn[k].link == l1 && !c1)
			c1 = &C.conn[k];
	}
	CU_ASSERT_PTR_NOT_NULL_FATAL(c0);
	CU_ASSERT_PTR_NOT_NULL_FATAL(c1);
	memset(buf, 0x5a, sizeof(buf));
	/* Link 1 loses what is posted on it from now on, silently. */
	memwire_fault(end_of(l1), MEMWIRE_BLACKHOLE);
	CU_ASSERT_EQUAL(smcr_conn_send(c0, buf, sizeof(buf)), (ssize_t)sizeof(buf));
	CU_ASSERT_EQUAL(smcr_conn_send(c1, buf, sizeof(buf)), (ssize_t)sizeof(buf));
	CU_ASSERT(c0->inflight_n > 0 && c1->inflight_n > 0);
	b0 = c0->sndbuf;
	b1 = c1->sndbuf;
	smcr_conn_abort(c0, -ECONNABORTED);
	smcr_conn_abort(c1, -ECONNABORTED);
	smcr_lgr_sndbuf_release(C.lgr, c0);
	smcr_lgr_conn_remove(C.lgr, c0);
	smcr_lgr_sndbuf_release(C.lgr, c1);
	smcr_lgr_conn_remove(C.lgr, c1);
	CU_ASSERT(sndbuf_taken(&b0));
	CU_ASSERT(sndbuf_taken(&b1));
	/* c0's CDC completes: its buffer goes back; c1's never does. */
	run();
	CU_ASSERT_FALSE(sndbuf_taken(&b0));
	CU_ASSERT(sndbuf_taken(&b1));
	/* Link 1 is found dead and deleted: c1's buffer goes back with it. */
	smcr_lgr_link_fail(C.lgr, l1, -ETIMEDOUT, true);
	for (k = 0; k < 20; k++) {
		clock_ms += 5000;
		smcr_lgr_tick(C.lgr);
		smcr_lgr_tick(S.lgr);
		run();
	}
	CU_ASSERT_FALSE(sndbuf_taken(&b1));
	group_down();
}

/* SMC-Rv2.1 max_links 1 (CLC): one link, two ports or not; neither side
 * adds one, the ticks try none, and max_conns bounds the server group.
 * At release 0 the same numbers mean nothing: two links. */
static void v21_up(uint8_t rel, uint8_t conns, uint8_t s_links, uint8_t c_links)
{
	lgr_version = 2;
	lgr_release = rel;
	lgr_max_conns = conns;
	s_max_links = s_links;
	c_max_links = c_links;
	group_up(2, 2, NULL);
	lgr_version = 1;
	lgr_release = lgr_max_conns = s_max_links = c_max_links = 0;
}

static void test_v21_max_links_one(void)
{
	uint64_t added;

	v21_up(1, 32, 1, 1);
	CU_ASSERT_EQUAL(S.lgr->release, 1);
	CU_ASSERT_EQUAL(S.lgr->max_links, 1);
	CU_ASSERT_EQUAL(C.lgr->max_links, 1);
	CU_ASSERT_EQUAL(smcr_lgr_active_links(S.lgr), 1);
	CU_ASSERT_EQUAL(smcr_lgr_active_links(C.lgr), 1);
	added = S.lgr->stats.links_added + C.lgr->stats.links_added;
	CU_ASSERT_EQUAL(C.lgr->stats.add_links_refused_max, 0);	/* none was sent */
	CU_ASSERT_EQUAL(S.lgr->stats.llc_timeouts, 0);
	CU_ASSERT_EQUAL(smcr_lgr_add_link(S.lgr), -EBUSY);
	CU_ASSERT_EQUAL(smcr_lgr_add_link(C.lgr), -EBUSY);
	wait_ms(20000);
	CU_ASSERT_EQUAL(smcr_lgr_active_links(S.lgr), 1);
	CU_ASSERT_EQUAL(smcr_lgr_active_links(C.lgr), 1);
	CU_ASSERT_EQUAL(S.lgr->flow.kind, SMCR_FLOW_NONE);
	CU_ASSERT_EQUAL(S.lgr->stats.links_added + C.lgr->stats.links_added, added);
	CU_ASSERT_EQUAL(C.lgr->stats.add_links_refused_max, 0);
	CU_ASSERT_PTR_NULL(S.lgr->links[1].link);
	CU_ASSERT_PTR_NULL(C.lgr->links[1].link);
	/* max_conns: full once its connections and handshakes reach it */
	CU_ASSERT_EQUAL(S.lgr->max_conns, 32);
	CU_ASSERT_FALSE(smcr_lgr_full(S.lgr));
	S.lgr->setups = 31;
	CU_ASSERT_FALSE(smcr_lgr_full(S.lgr));
	S.lgr->setups = 32;
	CU_ASSERT_TRUE(smcr_lgr_full(S.lgr));
	S.lgr->setups = 0;
	CU_ASSERT_EQUAL(S.lgr->stats.llc_bad + C.lgr->stats.llc_bad, 0);
	group_down();

	/* release 0: not negotiated, two links, 255 connections */
	v21_up(0, 32, 1, 1);
	CU_ASSERT_EQUAL(S.lgr->release, 0);
	CU_ASSERT_EQUAL(S.lgr->max_links, 2);
	CU_ASSERT_EQUAL(S.lgr->max_conns, SMCR_LGR_MAX_CONNS);
	CU_ASSERT_EQUAL(smcr_lgr_active_links(S.lgr), 2);
	CU_ASSERT_EQUAL(smcr_lgr_active_links(C.lgr), 2);
	group_down();

	/* release 1 with 2 links: as before */
	v21_up(1, 255, 2, 2);
	CU_ASSERT_EQUAL(smcr_lgr_active_links(S.lgr), 2);
	CU_ASSERT_EQUAL(smcr_lgr_active_links(C.lgr), 2);
	group_down();
}

/* A server that sends ADD LINK although max_links 1 was agreed: the
 * client refuses it (Linux's smc_llc_cli_add_link does), one link stays. */
static void test_v21_client_refuses_add_link(void)
{
	v21_up(1, 255, 2, 1);
	CU_ASSERT_EQUAL(C.lgr->max_links, 1);
	CU_ASSERT(C.lgr->stats.add_links_refused_max >= 1);
	CU_ASSERT_EQUAL(smcr_lgr_active_links(S.lgr), 1);
	CU_ASSERT_EQUAL(smcr_lgr_active_links(C.lgr), 1);
	CU_ASSERT_PTR_NULL(C.lgr->links[1].link);
	group_down();
}

/* SMC-Rv2 between two of ours: ADD LINK carries the RKeys (no ADD LINK
 * CONTINUATION), the second link comes up and carries a failover. */
static void test_v2_add_link(void)
{
	lgr_version = 2;
	test_first_contact_two_links();
	lgr_version = 1;
}

static void test_v2_failover_and_readd(void)
{
	lgr_version = 2;
	test_failover_and_readd();
	lgr_version = 1;
}

static void test_test_link_silent_loss(void)
{
	struct smcr_lgr_config cfg = smcr_lgr_config_default;
	uint64_t cut_at;

	cfg.test_link_idle_ms = 300;
	cfg.test_link_timeout_ms = 600;
	group_up(2, 2, &cfg);
	conns_up();
	/* Traffic on link 1 vanishes, the port stays up. */
	memwire_fault(end_of(S.lgr->links[0].link), MEMWIRE_BLACKHOLE);
	cut_at = clock_ms;
	while (S.lgr->stats.link_failures == 0 && clock_ms - cut_at < 5000)
		wait_ms(SMCR_LGR_TICK_MS);
	CU_ASSERT_EQUAL(S.lgr->stats.link_failures, 1);
	/* Idle time plus reply timeout, give or take a tick. */
	CU_ASSERT(clock_ms - cut_at <= cfg.test_link_idle_ms +
				       cfg.test_link_timeout_ms + 2 * SMCR_LGR_TICK_MS);
	CU_ASSERT(S.lgr->stats.test_links > 0);
	wait_ms(3000);
	CU_ASSERT_EQUAL(smcr_lgr_active_links(S.lgr), 1);
	group_down();
}

/* The server's only link blackholed: ms until its group ended (10 s at
 * the most). */
static uint64_t server_link_cut_until_end(void)
{
	uint64_t cut_at = clock_ms;

	memwire_fault(end_of(S.lgr->links[0].link), MEMWIRE_BLACKHOLE);
	while (!S.lgr->terminated && clock_ms - cut_at < 10000)
		wait_ms(SMCR_LGR_TICK_MS);
	CU_ASSERT_TRUE(S.lgr->terminated);
	return clock_ms - cut_at;
}

/* The last link waits cfg.last_link_timeout_ms for its TEST LINK reply
 * (0: three reply timeouts), then the group ends. */
static void test_last_link_timeout(void)
{
	struct smcr_lgr_config cfg = smcr_lgr_config_default;
	uint32_t last[] = { 0, 2400 };
	unsigned int i;
	uint64_t took;

	for (i = 0; i < 2; i++) {
		cfg.test_link_idle_ms = 300;
		cfg.test_link_timeout_ms = 600;
		cfg.last_link_timeout_ms = last[i];
		group_up(1, 1, &cfg);
		conns_up();
		took = server_link_cut_until_end();
		CU_ASSERT(took >= (last[i] ? last[i] : 3 * cfg.test_link_timeout_ms));
		CU_ASSERT(took <= cfg.test_link_idle_ms + (last[i] ? last[i] : 1800) +
				  2 * SMCR_LGR_TICK_MS);
		group_down();
	}
}

/* A probe stamped after the tick read the clock (stall_absorb() sends one
 * within the tick, and the clock may move a ms meanwhile) is fresh, not
 * 2^64 ms old: in a VM run the last link was declared dead at once. */
static void test_test_link_stamp_after_tick(void)
{
	struct smcr_lgr_config cfg = smcr_lgr_config_default;

	group_up(2, 2, &cfg);
	conns_up();
	S.lgr->links[0].test_sent_ms = clock_ms + 1;
	S.lgr->links[1].down_ms = clock_ms + 1;
	smcr_lgr_tick(S.lgr);
	CU_ASSERT_EQUAL(S.lgr->stats.link_failures, 0);
	CU_ASSERT_EQUAL(smcr_lgr_active_links(S.lgr), 2);
	group_down();
}

/* Tick until the server has a TEST LINK on link 1 in flight, unanswered. */
static void test_link_outstanding(void)
{
	unsigned int n;

	for (n = 0; n < 100 && !S.lgr->links[0].test_sent_ms; n++) {
		clock_ms += SMCR_LGR_TICK_MS;
		smcr_lgr_tick(S.lgr);
		if (S.lgr->links[0].test_sent_ms)
			break;
		smcr_lgr_tick(C.lgr);
		run();
	}
	CU_ASSERT_FATAL(S.lgr->links[0].test_sent_ms != 0);
}

/* A peer whose process is known gone does not get the last link's long
 * limit: the group ends after the plain TEST LINK timeout. */
static void test_last_link_peer_gone(void)
{
	struct smcr_lgr_config cfg = smcr_lgr_config_default;
	uint64_t cut_at, took;

	cfg.test_link_idle_ms = 300;
	cfg.test_link_timeout_ms = 600;
	cfg.last_link_timeout_ms = 5000;
	group_up(1, 1, &cfg);
	conns_up();
	memwire_fault(end_of(S.lgr->links[0].link), MEMWIRE_BLACKHOLE);
	peer_gone = true;
	cut_at = clock_ms;
	while (!S.lgr->terminated && clock_ms - cut_at < 10000)
		wait_ms(SMCR_LGR_TICK_MS);
	took = clock_ms - cut_at;
	peer_gone = false;
	CU_ASSERT_TRUE(S.lgr->terminated);
	CU_ASSERT(took >= cfg.test_link_timeout_ms);
	CU_ASSERT(took <= cfg.test_link_idle_ms + cfg.test_link_timeout_ms +
			  2 * SMCR_LGR_TICK_MS);
	group_down();
}

/* A group with no connection and no CLC handshake (the peer's daemon
 * ended them all and went) gets the plain TEST LINK limit on its last
 * link; a handshake still holding it, the long one. */
static void test_last_link_empty_group(void)
{
	struct smcr_lgr_config cfg = smcr_lgr_config_default;
	uint64_t took;
	unsigned int setups;

	for (setups = 0; setups < 2; setups++) {
		cfg.test_link_idle_ms = 300;
		cfg.test_link_timeout_ms = 600;
		cfg.last_link_timeout_ms = 5000;
		group_up(1, 1, &cfg);
		CU_ASSERT_EQUAL(S.lgr->nconns, 0);
		S.lgr->setups = setups;
		took = server_link_cut_until_end();
		CU_ASSERT(took >= (setups ? cfg.last_link_timeout_ms : cfg.test_link_timeout_ms));
		CU_ASSERT(took <= cfg.test_link_idle_ms +
				  (setups ? cfg.last_link_timeout_ms : cfg.test_link_timeout_ms) +
				  2 * SMCR_LGR_TICK_MS);
		S.lgr->setups = 0;
		group_down();
	}
}

/* A side that ends on purpose sends DELETE LINK (all, orderly): the
 * peer's group ends at once, with or without connections (they are
 * reset), not after its TEST LINK limit; the sender sees the send
 * complete.  Either role may send it. */
static void test_delete_all_on_exit(void)
{
	struct smcr_lgr_config cfg = smcr_lgr_config_default;
	unsigned int k, i;

	cfg.test_link_idle_ms = 300;
	cfg.test_link_timeout_ms = 600;
	cfg.last_link_timeout_ms = 5000;
	for (k = 0; k < 4; k++) {
		struct host *from = k & 1 ? &S : &C, *to = k & 1 ? &C : &S;
		uint64_t t0;

		group_up(2, 2, &cfg);
		if (k & 2)
			conns_up();
		CU_ASSERT_EQUAL(smcr_lgr_active_links(to->lgr), 2);
		t0 = clock_ms;
		CU_ASSERT_EQUAL(smcr_llc_delete_all(from->lgr, SMCR_LLC_DEL_PROG_INIT_TERM), 0);
		CU_ASSERT_PTR_NOT_NULL(from->lgr->bye_link);
		run();
		CU_ASSERT_PTR_NULL(from->lgr->bye_link);
		CU_ASSERT_TRUE(to->lgr->terminated);
		CU_ASSERT_EQUAL(to->events[SMCR_LGR_TERMINATED], 1);
		CU_ASSERT_EQUAL(clock_ms, t0);
		for (i = 0; k & 2 && i < NCONN; i++)
			CU_ASSERT_EQUAL(to->conn[i].error, -ECONNRESET);
		CU_ASSERT_EQUAL(to->lgr->stats.llc_bad, 0);
		/* An ended group sends nothing. */
		CU_ASSERT_EQUAL(smcr_llc_delete_all(to->lgr, SMCR_LLC_DEL_PROG_INIT_TERM),
				-ENOTCONN);
		group_down();
	}
}

/* Half way through its timeout an unanswered probe goes once more with
 * the same data and deadline; the reply to either one answers it. */
static void test_test_link_resent(void)
{
	struct smcr_lgr_config cfg = smcr_lgr_config_default;
	struct smcr_lgr_link *ll;
	uint8_t data[16];
	uint64_t sent;

	cfg.test_link_idle_ms = 300;
	cfg.test_link_timeout_ms = 600;
	group_up(2, 2, &cfg);
	conns_up();
	test_link_outstanding();
	ll = &S.lgr->links[0];
	sent = ll->test_sent_ms;
	memcpy(data, ll->test_data, sizeof(data));
	clock_ms += cfg.test_link_timeout_ms / 2 - SMCR_LGR_TICK_MS;
	smcr_lgr_tick(S.lgr);
	CU_ASSERT_FALSE(ll->test_resent);
	clock_ms += SMCR_LGR_TICK_MS;
	smcr_lgr_tick(S.lgr);
	CU_ASSERT_TRUE(ll->test_resent);
	CU_ASSERT_EQUAL(ll->test_sent_ms, sent);
	CU_ASSERT_EQUAL(memcmp(ll->test_data, data, sizeof(data)), 0);
	run();
	CU_ASSERT_EQUAL(ll->test_sent_ms, 0);
	CU_ASSERT_EQUAL(S.lgr->stats.link_failures, 0);
	group_down();
}

/* A peer that sends on the link but leaves our probe unanswered (Linux's
 * LLC worker waits for a send slot its CDCs keep taking) is alive: no link
 * fails while its messages come, however long the reply takes.  Once
 * nothing comes, the link fails a reply timeout after the last message. */
static void test_test_link_busy_peer(void)
{
	struct smcr_lgr_config cfg = smcr_lgr_config_default;
	struct smcr_lgr_link *ll;
	uint64_t t0, cut_at;
	unsigned int i, on0 = 0;

	cfg.test_link_idle_ms = 300;
	cfg.test_link_timeout_ms = 600;
	group_up(2, 2, &cfg);
	conns_up();
	for (i = 0; i < NCONN; i++)
		on0 += S.conn[i].link == S.lgr->links[0].link;
	CU_ASSERT_FATAL(on0 > 0);
	test_link_outstanding();
	ll = &S.lgr->links[0];
	/* the peer's replies no longer match the probe: never answered */
	ll->test_data[0] ^= 0xff;
	t0 = clock_ms;
	while (clock_ms - t0 < 4 * (cfg.test_link_idle_ms + cfg.test_link_timeout_ms)) {
		pump(&C, &S, UINT64_MAX / 2);
		pump(&S, &C, UINT64_MAX / 2);
		wait_ms(SMCR_LGR_TICK_MS);
	}
	CU_ASSERT_EQUAL(S.lgr->stats.link_failures, 0);
	CU_ASSERT_NOT_EQUAL(ll->test_sent_ms, 0);
	CU_ASSERT_EQUAL(S.bad + C.bad, 0);
	/* now nothing arrives on it */
	memwire_fault(end_of(ll->link), MEMWIRE_BLACKHOLE);
	cut_at = clock_ms;
	while (S.lgr->stats.link_failures == 0 && clock_ms - cut_at < 5000)
		wait_ms(SMCR_LGR_TICK_MS);
	CU_ASSERT_EQUAL(S.lgr->stats.link_failures, 1);
	CU_ASSERT(clock_ms - cut_at <= cfg.test_link_timeout_ms + 2 * SMCR_LGR_TICK_MS);
	group_down();
}

/* A peer whose RC end acknowledges our probe but whose software answers
 * nothing on the link (a starved TCG guest) gets three reply timeouts,
 * not one; a path that acknowledges nothing (blackholed) still fails
 * after one (test_test_link_silent_loss). */
static void test_test_link_acked_probe(void)
{
	struct smcr_lgr_config cfg = smcr_lgr_config_default;
	struct memwire_end *e;
	uint64_t cut_at, took;

	cfg.test_link_idle_ms = 300;
	cfg.test_link_timeout_ms = 600;
	group_up(2, 2, &cfg);
	e = end_of(S.lgr->links[0].link);
	/* both ways: sends complete at the sender, nothing is placed */
	memwire_fault(e, MEMWIRE_ACK_NO_PLACE);
	memwire_fault(e->peer, MEMWIRE_ACK_NO_PLACE);
	cut_at = clock_ms;
	while (S.lgr->stats.link_failures == 0 && clock_ms - cut_at < 5000)
		wait_ms(SMCR_LGR_TICK_MS);
	took = clock_ms - cut_at;
	CU_ASSERT_EQUAL(S.lgr->stats.link_failures, 1);
	CU_ASSERT(took >= 3 * cfg.test_link_timeout_ms);
	CU_ASSERT(took <= cfg.test_link_idle_ms + 3 * cfg.test_link_timeout_ms +
			  2 * SMCR_LGR_TICK_MS);
	group_down();
}

/* Both sides stop running for 3 s (a busy host, a paused VM) while a
 * TEST LINK waits for its reply, then tick before anything is delivered,
 * as a progress thread whose timer fires first does. */
static void stall_3s(void)
{
	clock_ms += 3000;
	smcr_lgr_tick(S.lgr);
	smcr_lgr_tick(C.lgr);
	run();
}

/* The stall detector: a connection out of window whose peer reads nothing
 * is logged once, with its cursors, after cfg.conn_stall_ms; again only
 * after it has moved.  Idle connections, and the reader with unread data
 * and nothing to send, are not logged. */
static char stall_line[1024];
static unsigned int stall_lines;

static void stall_log(void *opaque, enum smcr_log_level level, const char *msg)
{
	(void)opaque;
	(void)level;
	if (strstr(msg, "no progress")) {
		stall_lines++;
		snprintf(stall_line, sizeof(stall_line), "%s", msg);
	}
}

static void fill_window(struct smcr_conn *c)
{
	static const uint8_t junk[4096];

	while (smcr_conn_send(c, junk, sizeof(junk)) > 0)
		run();
	run();
}

static void drain(struct smcr_conn *c)
{
	uint8_t buf[4096];

	while (smcr_conn_recv(c, buf, sizeof(buf)) > 0)
		run();
	run();
}

static void test_conn_stall_logged(void)
{
	struct smcr_lgr_config cfg = smcr_lgr_config_default;
	char want[64];

	cfg.conn_stall_ms = 1000;
	group_up(2, 2, &cfg);
	conns_up();
	smcr_log_set_fn(stall_log, NULL);
	stall_lines = 0;
	fill_window(&C.conn[0]);
	CU_ASSERT_EQUAL(smcr_conn_tx_space(&C.conn[0]), 0);
	wait_ms(800);
	CU_ASSERT_EQUAL(C.lgr->stats.conn_stalls, 0);
	wait_ms(700);
	CU_ASSERT_EQUAL(C.lgr->stats.conn_stalls, 1);
	CU_ASSERT_EQUAL(S.lgr->stats.conn_stalls, 0);
	CU_ASSERT_EQUAL(stall_lines, 1);
	snprintf(want, sizeof(want), "conn %08x: no progress for ", C.conn[0].token);
	CU_ASSERT_PTR_NOT_NULL(strstr(stall_line, want));
	CU_ASSERT_PTR_NOT_NULL(strstr(stall_line, "with no window"));
	CU_ASSERT_PTR_NOT_NULL(strstr(stall_line, "peer cons 0:0"));
	snprintf(want, sizeof(want), "space 0 of %u", C.conn[0].tx_len);
	CU_ASSERT_PTR_NOT_NULL(strstr(stall_line, want));
	/* once */
	wait_ms(3000);
	CU_ASSERT_EQUAL(C.lgr->stats.conn_stalls, 1);
	CU_ASSERT_EQUAL(stall_lines, 1);
	/* the peer reads: moving again, idle, not logged */
	drain(&S.conn[0]);
	CU_ASSERT(smcr_conn_tx_space(&C.conn[0]) > 0);
	wait_ms(3000);
	CU_ASSERT_EQUAL(C.lgr->stats.conn_stalls, 1);
	/* stuck again: logged again */
	fill_window(&C.conn[0]);
	wait_ms(1500);
	CU_ASSERT_EQUAL(C.lgr->stats.conn_stalls, 2);
	CU_ASSERT_EQUAL(S.lgr->stats.conn_stalls, 0);
	CU_ASSERT_EQUAL(stall_lines, 2);
	smcr_log_set_fn(NULL, NULL);
	group_down();
}

static void test_local_stall(void)
{
	struct smcr_lgr_config cfg = smcr_lgr_config_default;
	uint64_t cut_at;

	cfg.test_link_idle_ms = 300;
	cfg.test_link_timeout_ms = 600;
	group_up(2, 2, &cfg);
	conns_up();
	test_link_outstanding();
	stall_3s();
	wait_ms(2000);
	/* Our own stall blamed nobody: links probed again, all answered. */
	CU_ASSERT_EQUAL(S.lgr->stats.link_failures + C.lgr->stats.link_failures, 0);
	CU_ASSERT_EQUAL(S.lgr->stats.stalls, 1);
	CU_ASSERT_EQUAL(C.lgr->stats.stalls, 1);
	CU_ASSERT_EQUAL(S.lgr->stats.stall_ms, 3000 - SMCR_LGR_TICK_MS);
	CU_ASSERT_EQUAL(smcr_lgr_active_links(S.lgr), 2);
	CU_ASSERT_EQUAL(smcr_lgr_active_links(C.lgr), 2);
	/* A peer that is really gone is still found, a stall or not: a
	 * fresh probe, then a full timeout. */
	memwire_fault(end_of(S.lgr->links[0].link), MEMWIRE_BLACKHOLE);
	test_link_outstanding();
	cut_at = clock_ms;
	stall_3s();
	while (S.lgr->stats.link_failures == 0 && clock_ms - cut_at < 10000)
		wait_ms(SMCR_LGR_TICK_MS);
	CU_ASSERT_EQUAL(S.lgr->stats.link_failures, 1);
	CU_ASSERT(clock_ms - cut_at <= 3000 + cfg.test_link_timeout_ms +
				       2 * SMCR_LGR_TICK_MS);
	CU_ASSERT(clock_ms - cut_at >= 3000 + cfg.test_link_timeout_ms);
	wait_ms(3000);
	CU_ASSERT_EQUAL(smcr_lgr_active_links(S.lgr), 1);
	CU_ASSERT_EQUAL(smcr_lgr_active_links(C.lgr), 1);
	group_down();

	/* Without the stall check the same stall takes the links down (both:
	 * the group ends, as in a busy CI run of vm/smcr-tshark.sh). */
	cfg.stall_ms = 0;
	group_up(2, 2, &cfg);
	conns_up();
	test_link_outstanding();
	stall_3s();
	CU_ASSERT(S.lgr->stats.link_failures >= 1);
	CU_ASSERT_EQUAL(S.lgr->stats.stalls, 0);
	group_down();
}

/* An LLC exchange in flight when we stall is not timed out by it. */
static void test_local_stall_llc(void)
{
	struct smcr_lgr_config cfg = smcr_lgr_config_default;
	struct smcr_rmbe e[16];
	bool pend = false;
	unsigned int i;

	cfg.test_link_idle_ms = 0;
	group_up(2, 2, &cfg);
	wait_ms(200);
	/* The 16th element needs a new RMB: CONFIRM RKEY starts, and we
	 * stall for two reply timeouts before anything is delivered. */
	for (i = 0; i < 16; i++)
		CU_ASSERT_EQUAL_FATAL(smcr_lgr_rmbe_alloc(C.lgr, 1000, &e[i], &pend), 0);
	CU_ASSERT_TRUE(pend);
	CU_ASSERT_EQUAL(C.lgr->flow.kind, SMCR_FLOW_CONFIRM_RKEY);
	clock_ms += 2 * cfg.llc_timeout_ms;
	smcr_lgr_tick(S.lgr);
	smcr_lgr_tick(C.lgr);
	run();
	CU_ASSERT_EQUAL(C.lgr->stats.llc_timeouts, 0);
	CU_ASSERT_EQUAL(C.lgr->stats.stalls, 1);
	CU_ASSERT_EQUAL(C.events[SMCR_LGR_RMB_CONFIRMED], 1);
	CU_ASSERT_EQUAL(C.last_rmb_status, 0);
	CU_ASSERT_EQUAL(C.lgr->flow.kind, SMCR_FLOW_NONE);
	group_down();
}

static void test_both_links_down(void)
{
	unsigned int c;

	group_up(2, 2, NULL);
	conns_up();
	memwire_fault(end_of(S.lgr->links[0].link), MEMWIRE_CUT);
	memwire_fault(end_of(S.lgr->links[1].link), MEMWIRE_CUT);
	CU_ASSERT_EQUAL(smcr_conn_send(&S.conn[0], "x", 1), 1);
	CU_ASSERT_EQUAL(smcr_conn_send(&S.conn[1], "y", 1), 1);
	CU_ASSERT_EQUAL(smcr_conn_send(&C.conn[0], "x", 1), 1);
	CU_ASSERT_EQUAL(smcr_conn_send(&C.conn[1], "y", 1), 1);
	run();
	CU_ASSERT_TRUE(S.lgr->terminated);
	CU_ASSERT_TRUE(C.lgr->terminated);
	CU_ASSERT_EQUAL(S.events[SMCR_LGR_TERMINATED], 1);
	for (c = 0; c < NCONN; c++) {
		char b[4];

		CU_ASSERT_EQUAL(smcr_conn_recv(&S.conn[c], b, sizeof(b)), -ECONNRESET);
		CU_ASSERT_EQUAL(smcr_conn_recv(&C.conn[c], b, sizeof(b)), -ECONNRESET);
		CU_ASSERT(smcr_conn_finished(&S.conn[c]));
	}
	group_down();
}

static void test_collision_rkey_vs_add_link(void)
{
	struct smcr_rmbe e[17];
	bool pend = false;
	unsigned int i;

	/* One RNIC each: a single link.  Then both get a second one. */
	seed = 3;	/* an interleaving where the two requests cross */
	group_up(1, 1, NULL);
	CU_ASSERT_EQUAL(smcr_lgr_active_links(S.lgr), 1);
	S.nports = 2;
	C.nports = 2;
	/* The client needs a new RMB (CONFIRM RKEY) exactly while the server
	 * starts ADD LINK: both requests cross on the wire. */
	for (i = 0; i < 16; i++)
		CU_ASSERT_EQUAL_FATAL(smcr_lgr_rmbe_alloc(C.lgr, 1000, &e[i], &pend), 0);
	CU_ASSERT_TRUE(pend);
	CU_ASSERT_EQUAL(C.lgr->flow.kind, SMCR_FLOW_CONFIRM_RKEY);
	CU_ASSERT_EQUAL(smcr_lgr_add_link(S.lgr), 0);
	CU_ASSERT_EQUAL(S.lgr->flow.kind, SMCR_FLOW_ADD_LINK);
	run();
	/* §3.5.5.3.3: the client processed ADD LINK, got a negative
	 * CONFIRM RKEY, and announced the RMB again at the next tick, now
	 * with both links' keys. */
	CU_ASSERT_FALSE(e[15].rmb->announced);
	wait_ms(2 * SMCR_LGR_TICK_MS);
	CU_ASSERT_EQUAL(smcr_lgr_active_links(S.lgr), 2);
	CU_ASSERT_EQUAL(smcr_lgr_active_links(C.lgr), 2);
	CU_ASSERT_EQUAL(S.lgr->stats.rkey_rejects + C.lgr->stats.rkey_rejects, 1);
	CU_ASSERT_TRUE(e[15].rmb->announced);
	CU_ASSERT_EQUAL(C.last_rmb_status, 0);
	for (i = 0; i < SMCR_LGR_MAX_PEER_RMBS; i++) {
		struct smcr_lgr_peer_rmb *p = &S.lgr->peer_rmbs[i];

		if (p->used)
			CU_ASSERT(p->r.rkey[0] && p->r.rkey[1]);
	}
	group_down();
}

static void test_collision_delete_during_add(void)
{
	/* A client's disorderly DELETE LINK request arriving while the
	 * server's ADD LINK runs is queued and handled after it. */
	group_up(1, 1, NULL);
	S.nports = 2;
	C.nports = 2;
	CU_ASSERT_EQUAL(smcr_lgr_add_link(S.lgr), 0);
	CU_ASSERT_EQUAL(smcr_llc_start(C.lgr, SMCR_FLOW_DELETE_LINK, 0,
				       SMCR_LLC_DEL_OP_INIT_TERM, NULL), 0);
	run();
	CU_ASSERT_EQUAL(S.lgr->stats.links_added, 2);
	CU_ASSERT_EQUAL(S.lgr->stats.links_deleted, 1);
	CU_ASSERT_EQUAL(C.lgr->stats.links_deleted, 1);
	CU_ASSERT_EQUAL(smcr_lgr_active_links(S.lgr), 1);
	CU_ASSERT_EQUAL(smcr_lgr_active_links(C.lgr), 1);
	CU_ASSERT_PTR_NULL(S.lgr->links[0].link);
	CU_ASSERT_EQUAL(S.lgr->flow.kind, SMCR_FLOW_NONE);
	group_down();
}

static void test_collision_add_link_both(void)
{
	/* A second RNIC appears on both hosts at once: the client hints ADD
	 * LINK while the server starts it; one new link results. */
	group_up(1, 1, NULL);
	S.nports = 2;
	C.nports = 2;
	CU_ASSERT_EQUAL(smcr_lgr_add_link(C.lgr), 0);
	CU_ASSERT_EQUAL(smcr_lgr_add_link(S.lgr), 0);
	run();
	wait_ms(500);
	CU_ASSERT_EQUAL(smcr_lgr_active_links(S.lgr), 2);
	CU_ASSERT_EQUAL(smcr_lgr_active_links(C.lgr), 2);
	CU_ASSERT_EQUAL(S.lgr->stats.links_added, 2);
	CU_ASSERT_EQUAL(C.lgr->stats.links_added, 2);
	CU_ASSERT_EQUAL(S.lgr->flow.kind, SMCR_FLOW_NONE);
	CU_ASSERT_EQUAL(C.lgr->flow.kind, SMCR_FLOW_NONE);
	CU_ASSERT_EQUAL(S.lgr->nqueue + C.lgr->nqueue, 0);
	group_down();
}

static void test_collision_delete_link_both(void)
{
	/* Both ask to delete link 2 at once (orderly): the server's exchange
	 * deletes it once, the client's request is absorbed. */
	group_up(2, 2, NULL);
	CU_ASSERT_EQUAL(smcr_lgr_delete_link(C.lgr, 1, SMCR_LLC_DEL_OP_INIT_TERM), 0);
	CU_ASSERT_EQUAL(smcr_lgr_delete_link(S.lgr, 1, SMCR_LLC_DEL_OP_INIT_TERM), 0);
	run();
	wait_ms(500);
	CU_ASSERT_EQUAL(smcr_lgr_active_links(S.lgr), 1);
	CU_ASSERT_EQUAL(smcr_lgr_active_links(C.lgr), 1);
	CU_ASSERT_EQUAL(S.lgr->stats.links_deleted, 1);
	CU_ASSERT_EQUAL(C.lgr->stats.links_deleted, 1);
	CU_ASSERT_PTR_NULL(S.lgr->links[1].link);
	CU_ASSERT_PTR_NULL(C.lgr->links[1].link);
	CU_ASSERT_EQUAL(S.lgr->flow.kind, SMCR_FLOW_NONE);
	CU_ASSERT_EQUAL(S.lgr->nqueue + C.lgr->nqueue, 0);
	CU_ASSERT_FALSE(S.lgr->terminated);
	group_down();
}

static void test_lost_link_both_sides(void)
{
	const uint64_t total = 256 * 1024;

	/* Both hosts see link 1 die at once (e.g. both ports down): the
	 * server's DELETE LINK and the client's request cross; both move
	 * their connections, the link goes once, nothing is reset. */
	group_up(2, 2, NULL);
	conns_up();
	smcr_lgr_link_down(S.lgr, S.lgr->links[0].link, -ENETDOWN);
	smcr_lgr_link_down(C.lgr, C.lgr->links[0].link, -ENETDOWN);
	stream_with(total, NULL);
	check_stream(total);
	CU_ASSERT_EQUAL(S.lgr->stats.link_failures, 1);
	CU_ASSERT_EQUAL(C.lgr->stats.link_failures, 1);
	CU_ASSERT_EQUAL(S.lgr->stats.links_deleted, 1);
	CU_ASSERT_EQUAL(C.lgr->stats.links_deleted, 1);
	CU_ASSERT_EQUAL(smcr_lgr_active_links(S.lgr), 1);
	CU_ASSERT_EQUAL(smcr_lgr_active_links(C.lgr), 1);
	group_down();
}

/* The client's link 1 fails on its side alone and (unless ask) its
 * request to delete it goes nowhere (as with a server that waits for its
 * sends on the link first: Linux 6.1); acking says whether its QP still
 * acknowledges the server.  The server never notices by itself (no TEST
 * LINK, no data). */
static struct memwire_end *client_link1_fails2(bool acking, bool ask)
{
	struct memwire_end *ce = end_of(C.lgr->links[0].link);

	ce->failed = true;
	ce->acking = acking;
	ce->link.state = SMCR_LINK_FAILED;
	ce->fault = MEMWIRE_BLACKHOLE;	/* this end only */
	smcr_lgr_link_fail(C.lgr, &ce->link, -ENETDOWN, ask);
	return ce;
}

/* The server's link 1 fails on its side alone (its QP would still
 * acknowledge the client, as a late acker's would). */
static struct memwire_end *server_link1_fails(int reason)
{
	struct memwire_end *se = end_of(S.lgr->links[0].link);

	se->failed = true;
	se->acking = true;
	se->link.state = SMCR_LINK_FAILED;
	se->fault = MEMWIRE_BLACKHOLE;
	smcr_lgr_link_fail(S.lgr, &se->link, reason, true);
	return se;
}

static struct memwire_end *client_link1_fails(bool acking)
{
	return client_link1_fails2(acking, false);
}

/* A DELETE LINK request for link 1 as Linux sends one for a lost path
 * (smcr_link_down: reason LOST_PATH, the orderly flag set), arriving at
 * h over its link 2. */
static void linux_lost_path_delete(struct host *h)
{
	struct smcr_llc_msg m;
	uint8_t buf[SMCR_LLC_LEN];

	memset(&m, 0, sizeof(m));
	m.type = SMCR_LLC_DELETE_LINK;
	m.delete_link.link_num = h->lgr->links[0].link->link_id;
	m.delete_link.reason = SMCR_LLC_DEL_LOST_PATH;
	m.delete_link.orderly = true;
	CU_ASSERT_FATAL(smcr_llc_encode(&m, buf, sizeof(buf)) == SMCR_LLC_LEN);
	smcr_llc_rx(h->lgr, h->lgr->links[1].link, buf);
}

static void lost_path_at_server(unsigned int round)
{
	if (round != 30)
		return;
	/* Linux's client: its end of link 1 failed, it asks the server */
	memwire_fault(end_of(C.lgr->links[0].link), MEMWIRE_BLACKHOLE);
	linux_lost_path_delete(&S);
}

static void lost_path_at_client(unsigned int round)
{
	if (round != 30)
		return;
	/* Linux's server: its end of link 1 failed, it tells the client
	 * (and runs its own deletion, as ours does) */
	server_link1_fails(-ENETDOWN);
	linux_lost_path_delete(&C);
}

/* A stream over a group whose link 1 loses its path at round 30 (cut):
 * the receiver of the DELETE LINK (rx) fails the link over, both sides
 * delete it once, nothing is lost. */
static void lost_path_stream(void (*cut)(unsigned int round), struct host *rx)
{
	const uint64_t total = 256 * 1024;

	stream_counts_clear();
	group_up(2, 2, NULL);
	conns_up();
	stream_with(total, cut);
	check_stream(total);
	CU_ASSERT_EQUAL(rx->lgr->stats.link_failures, 1);
	CU_ASSERT_EQUAL(S.lgr->stats.links_deleted, 1);
	CU_ASSERT_EQUAL(C.lgr->stats.links_deleted, 1);
	CU_ASSERT_EQUAL(smcr_lgr_active_links(S.lgr), 1);
	CU_ASSERT_EQUAL(smcr_lgr_active_links(C.lgr), 1);
	group_down();
}

/* A DELETE LINK for a lost path fails the link over at once, orderly flag
 * or not (Linux sets it): the receiver neither queues an orderly exchange
 * behind the link's sends nor waits for them, and nothing is lost. */
static void test_lost_path_marked_orderly(void)
{
	lost_path_stream(lost_path_at_server, &S);
	lost_path_stream(lost_path_at_client, &C);
}

/* A group up with connections, the client's link 1 failed (acking or
 * not): how long, up to limit ms, until the client dropped that link. */
static uint64_t client_link1_gone_after(bool acking, const struct smcr_lgr_config *cfg,
					uint64_t limit)
{
	uint64_t t0;

	group_up(2, 2, cfg);
	conns_up();
	client_link1_fails(acking);
	t0 = clock_ms;
	while (C.lgr->links[0].link && clock_ms - t0 < limit)
		wait_ms(SMCR_LGR_TICK_MS);
	CU_ASSERT_PTR_NULL(C.lgr->links[0].link);
	return clock_ms - t0;
}

/* A client's failed link that still acknowledges the server waits for the
 * server's DELETE LINK up to cfg.acking_keep_ms, not the LLC timeouts; one
 * that does not (or no longer) is dropped after them as before. */
static void test_acking_link_kept(void)
{
	struct smcr_lgr_config cfg = smcr_lgr_config_default;
	uint64_t llc_limit = (uint64_t)cfg.llc_timeout_ms * (cfg.llc_retries + 2);
	struct memwire_end *ce;
	uint64_t t;

	cfg.test_link_idle_ms = 0;
	cfg.acking_keep_ms = 20000;
	/* not acking: dropped after the LLC timeouts */
	t = client_link1_gone_after(false, &cfg, 30000);
	CU_ASSERT(t >= llc_limit && t <= llc_limit + 2 * SMCR_LGR_TICK_MS);
	CU_ASSERT_EQUAL(C.lgr->stats.links_deleted, 1);
	group_down();

	/* acking: kept past them; the server's DELETE LINK takes it */
	group_up(2, 2, &cfg);
	conns_up();
	client_link1_fails(true);
	wait_ms((unsigned int)llc_limit + 2000);
	CU_ASSERT_PTR_NOT_NULL(C.lgr->links[0].link);
	CU_ASSERT_EQUAL(C.lgr->stats.links_deleted, 0);
	CU_ASSERT_EQUAL(smcr_lgr_active_links(C.lgr), 1);
	CU_ASSERT_EQUAL(smcr_lgr_delete_link(S.lgr, 0, SMCR_LLC_DEL_LOST_PATH), 0);
	run();
	CU_ASSERT_PTR_NULL(C.lgr->links[0].link);
	CU_ASSERT_PTR_NULL(S.lgr->links[0].link);
	CU_ASSERT_EQUAL(C.lgr->stats.links_deleted, 1);
	CU_ASSERT_EQUAL(S.lgr->stats.links_deleted, 1);
	CU_ASSERT_EQUAL(C.lgr->stats.link_failures, 1);
	/* nothing was reset */
	for (unsigned int c = 0; c < NCONN; c++)
		CU_ASSERT_EQUAL(C.conn[c].error, 0);
	group_down();

	/* acking, no DELETE LINK: dropped at cfg.acking_keep_ms */
	t = client_link1_gone_after(true, &cfg, 40000);
	CU_ASSERT(t >= cfg.acking_keep_ms && t <= cfg.acking_keep_ms + 2 * SMCR_LGR_TICK_MS);
	group_down();

	/* acking until its QP refused a request: dropped at the next tick */
	group_up(2, 2, &cfg);
	conns_up();
	ce = client_link1_fails(true);
	wait_ms((unsigned int)llc_limit + 1000);
	CU_ASSERT_PTR_NOT_NULL(C.lgr->links[0].link);
	ce->acking = false;
	wait_ms(2 * SMCR_LGR_TICK_MS);
	CU_ASSERT_PTR_NULL(C.lgr->links[0].link);
	group_down();
}

/* A client's failed link whose QP still acknowledges the server (a late
 * acker) holds its DELETE LINK request for cfg.delete_hold_ms: Linux 6.1's
 * server, taking it while its own end is still active, switches its
 * connections and then waits for the link's sends, and the acker's late
 * ACKs of its retries complete them after the switch (its cursors go
 * back, its stream is corrupted).  Held, the server sees the failure
 * first; one that does not gets the request after the hold.  A link that
 * does not acknowledge asks at once, as before, and a server deletes at
 * once.  Only a server without libsmcr's mark in its CONFIRM LINK (Linux)
 * gets the hold: ours fails over when the request comes, at once. */
static void test_acking_link_holds_delete(void)
{
	struct smcr_lgr_config cfg = smcr_lgr_config_default, linux_cfg;
	const uint64_t total = 128 * 1024;
	unsigned int c;
	uint64_t t0;

	cfg.test_link_idle_ms = 0;
	linux_cfg = cfg;
	linux_cfg.no_impl_mark = true;
	CU_ASSERT(cfg.delete_hold_ms >= 1000);
	/* acking: nothing reaches the server during the hold, the
	 * connections move at once and stream; the request comes after it */
	group_up2(2, 2, &linux_cfg, &cfg);
	CU_ASSERT_FALSE(C.lgr->peer_libsmcr);
	conns_up();
	t0 = clock_ms;
	client_link1_fails2(true, true);
	stream_with(total, NULL);
	check_stream(total);
	CU_ASSERT_FATAL(clock_ms - t0 < cfg.delete_hold_ms / 2);
	wait_ms((unsigned int)(cfg.delete_hold_ms - (clock_ms - t0)) - 2 * SMCR_LGR_TICK_MS);
	CU_ASSERT_PTR_NOT_NULL(S.lgr->links[0].link);
	CU_ASSERT_EQUAL(S.lgr->stats.links_deleted, 0);
	CU_ASSERT_EQUAL(smcr_lgr_active_links(C.lgr), 1);
	wait_ms(5 * SMCR_LGR_TICK_MS);
	CU_ASSERT_PTR_NULL(S.lgr->links[0].link);
	CU_ASSERT_PTR_NULL(C.lgr->links[0].link);
	CU_ASSERT_EQUAL(S.lgr->stats.links_deleted, 1);
	CU_ASSERT_EQUAL(C.lgr->stats.links_deleted, 1);
	for (c = 0; c < NCONN; c++) {
		CU_ASSERT_EQUAL(C.conn[c].error, 0);
		CU_ASSERT_EQUAL(S.conn[c].error, 0);
	}
	group_down();

	/* acking, and the server deletes the link within the hold: the
	 * held request is dropped with the link, nothing more is sent */
	group_up2(2, 2, &linux_cfg, &cfg);
	conns_up();
	client_link1_fails2(true, true);
	wait_ms(500);
	CU_ASSERT_EQUAL(smcr_lgr_delete_link(S.lgr, 0, SMCR_LLC_DEL_LOST_PATH), 0);
	run();
	CU_ASSERT_PTR_NULL(C.lgr->links[0].link);
	CU_ASSERT_PTR_NULL(S.lgr->links[0].link);
	wait_ms(cfg.delete_hold_ms + 1000);
	CU_ASSERT_EQUAL(S.lgr->stats.links_deleted, 1);
	CU_ASSERT_EQUAL(C.lgr->stats.links_deleted, 1);
	CU_ASSERT_EQUAL(S.lgr->stats.llc_timeouts + C.lgr->stats.llc_timeouts, 0);
	group_down();

	/* not acking: the request goes at once */
	group_up2(2, 2, &linux_cfg, &cfg);
	conns_up();
	client_link1_fails2(false, true);
	run();
	CU_ASSERT_PTR_NULL(S.lgr->links[0].link);
	CU_ASSERT_EQUAL(S.lgr->stats.links_deleted, 1);
	group_down();

	/* acking, our own server: the request goes at once, and both
	 * sides stream on link 2 */
	group_up(2, 2, &cfg);
	CU_ASSERT_TRUE(C.lgr->peer_libsmcr);
	CU_ASSERT_TRUE(S.lgr->peer_libsmcr);
	conns_up();
	client_link1_fails2(true, true);
	CU_ASSERT_FALSE(C.lgr->links[0].delete_held);
	run();
	CU_ASSERT_PTR_NULL(S.lgr->links[0].link);
	CU_ASSERT_PTR_NULL(C.lgr->links[0].link);
	CU_ASSERT_EQUAL(S.lgr->stats.link_failures, 1);
	stream_counts_clear();
	stream_with(total, NULL);
	check_stream(total);
	group_down();

	/* the server's failed link, acking or not: it deletes at once */
	group_up(2, 2, &cfg);
	conns_up();
	server_link1_fails(-ENETDOWN);
	run();
	CU_ASSERT_PTR_NULL(C.lgr->links[0].link);
	CU_ASSERT_PTR_NULL(S.lgr->links[0].link);
	group_down();
}

/* A server keeps no late acker on a failed link: Linux's client clears
 * its QP on the server's DELETE LINK without waiting for its sends, and
 * late ACKs of its retries, after it has switched its connections, would
 * complete stale CDCs there (6.1 then sets its cursors back: a corrupt
 * stream, kernel-v2.sh part (c)).  The client keeps its own. */
static void test_server_acker_off(void)
{
	struct smcr_lgr_config cfg = smcr_lgr_config_default, linux_cfg;
	struct memwire_end *se, *ce;

	cfg.test_link_idle_ms = 0;
	/* the server's link fails on its side (a QP error): acker off before
	 * the DELETE LINK goes, the connections stream on link 2 */
	group_up(2, 2, &cfg);
	conns_up();
	ce = end_of(C.lgr->links[0].link);
	se = server_link1_fails(-ECONNABORTED);
	CU_ASSERT_EQUAL(se->ack_offs, 1);
	CU_ASSERT_FALSE(se->acking);
	run();
	CU_ASSERT_EQUAL(ce->ack_offs, 0);
	CU_ASSERT_PTR_NULL(S.lgr->links[0].link);
	CU_ASSERT_PTR_NULL(C.lgr->links[0].link);
	stream_with(64 * 1024, NULL);
	check_stream(64 * 1024);
	group_down();

	/* the server gives up on a link itself (no TEST LINK reply): off too */
	group_up(2, 2, &cfg);
	conns_up();
	se = end_of(S.lgr->links[1].link);
	smcr_lgr_link_down(S.lgr, &se->link, -ETIMEDOUT);
	CU_ASSERT_EQUAL(se->ack_offs, 1);
	run();
	CU_ASSERT_PTR_NULL(S.lgr->links[1].link);
	group_down();

	/* a client's failed link keeps acking (its DELETE LINK held, for
	 * a server that is not libsmcr) */
	linux_cfg = cfg;
	linux_cfg.no_impl_mark = true;
	group_up2(2, 2, &linux_cfg, &cfg);
	conns_up();
	ce = client_link1_fails2(true, true);
	CU_ASSERT_EQUAL(ce->ack_offs, 0);
	CU_ASSERT_TRUE(ce->acking);
	CU_ASSERT_TRUE(C.lgr->links[0].delete_held);
	group_down();
}

/* Active links that carry connections. */
static unsigned int links_in_use(struct smcr_lgr *lgr)
{
	unsigned int i, n = 0;

	for (i = 0; i < SMCR_LINK_SLOTS; i++)
		if (lgr->links[i].link && lgr->links[i].link->state == SMCR_LINK_ACTIVE &&
		    lgr->links[i].link->nconns > 0)
			n++;
	return n;
}

static void test_rebalance(void)
{
	const uint64_t total = 512 * 1024;
	struct smcr_link *l0, *l1;

	/* All connections end up on link 2 after link 1 fails; when a link
	 * is back, idle connections move over until both carry some. */
	group_up(2, 2, NULL);
	conns_up();
	stream_with(total, cut_link1);
	check_stream(total);
	CU_ASSERT_EQUAL(smcr_lgr_active_links(S.lgr), 1);
	CU_ASSERT_EQUAL(smcr_lgr_add_link(S.lgr), 0);
	run();
	CU_ASSERT_EQUAL_FATAL(smcr_lgr_active_links(S.lgr), 2);
	l0 = S.lgr->links[0].link;
	l1 = S.lgr->links[1].link;
	CU_ASSERT_EQUAL(l0->nconns + l1->nconns, NCONN);
	CU_ASSERT(l0->nconns == 0 || l1->nconns == 0);
	stream_counts_clear();
	stream_with(total, NULL);
	check_stream(total);
	CU_ASSERT(S.lgr->stats.rebalanced > 0);
	CU_ASSERT(C.lgr->stats.rebalanced > 0);
	CU_ASSERT(l0->nconns >= NCONN / 2 - 1 && l1->nconns >= NCONN / 2 - 1);
	CU_ASSERT_EQUAL(links_in_use(C.lgr), 2);
	/* And the moved ones keep working when the other link fails. */
	stream_counts_clear();
	memwire_fault(end_of(S.lgr->links[1].link), MEMWIRE_CUT);
	stream_with(total, NULL);
	check_stream(total);
	group_down();
}

/* The client's peer RMB entry that conn writes into. */
static struct smcr_lgr_peer_rmb *client_peer_rmb(const struct smcr_conn *conn)
{
	unsigned int i;

	for (i = 0; i < C.lgr->npeer_rmbs; i++)
		if (&C.lgr->peer_rmbs[i].r == conn->peer_rmb)
			return &C.lgr->peer_rmbs[i];
	return NULL;
}

/* A connection whose peer RMB has no RKey on the returned link (an ADD
 * LINK list that left it out) is not moved there: its writes would meet a
 * remote access error and fail the link.  The others move. */
static void test_rebalance_no_rkey(void)
{
	const uint64_t total = 256 * 1024;
	struct smcr_lgr_peer_rmb *p;
	struct smcr_link *fresh = NULL;
	unsigned int i, c, others = 0;

	link1_cut_and_back(total);
	for (i = 0; i < SMCR_LINK_SLOTS; i++)
		if (C.lgr->links[i].link && C.lgr->links[i].link->nconns == 0)
			fresh = C.lgr->links[i].link;
	p = client_peer_rmb(&C.conn[0]);
	CU_ASSERT_PTR_NOT_NULL_FATAL(fresh);
	CU_ASSERT_PTR_NOT_NULL_FATAL(p);
	p->r.rkey[fresh->slot] = 0;
	stream_counts_clear();
	stream_with(total, NULL);
	check_stream(total);
	for (c = 0; c < NCONN; c++) {
		CU_ASSERT_EQUAL(C.conn[c].error, 0);
		if (C.conn[c].peer_rmb == &p->r) {
			CU_ASSERT_PTR_NOT_EQUAL(C.conn[c].link, fresh);
		} else {
			others++;
		}
	}
	if (others)
		CU_ASSERT(fresh->nconns > 0);
	CU_ASSERT_EQUAL(C.lgr->links[fresh->slot].link, fresh);
	group_down();
}

/* When the last link a connection could move to has no RKey for its
 * peer's RMB, that connection alone is reset: its writes would fail the
 * link and end the group for all (kernel-v2 (d): the link group ended). */
static void test_failover_no_rkey(void)
{
	const uint64_t total = 128 * 1024;
	struct smcr_lgr_peer_rmb *p;
	struct smcr_link *fresh = NULL, *old = NULL;
	unsigned int i, c;

	link1_cut_and_back(total);
	for (i = 0; i < SMCR_LINK_SLOTS; i++)
		if (C.lgr->links[i].link && C.lgr->links[i].link->nconns == 0)
			fresh = C.lgr->links[i].link;
		else if (C.lgr->links[i].link)
			old = C.lgr->links[i].link;
	p = client_peer_rmb(&C.conn[0]);
	CU_ASSERT_PTR_NOT_NULL_FATAL(fresh);
	CU_ASSERT_PTR_NOT_NULL_FATAL(old);
	CU_ASSERT_PTR_NOT_NULL_FATAL(p);
	p->r.rkey[fresh->slot] = 0;
	memwire_fault(end_of(old), MEMWIRE_CUT);
	run();
	wait_ms(1000);
	CU_ASSERT_FALSE(C.lgr->terminated);
	CU_ASSERT_EQUAL(C.lgr->links[fresh->slot].link, fresh);
	CU_ASSERT_EQUAL(fresh->state, SMCR_LINK_ACTIVE);
	for (c = 0; c < NCONN; c++) {
		if (C.conn[c].peer_rmb == &p->r) {
			CU_ASSERT_EQUAL(C.conn[c].error, -ECONNRESET);
		} else {
			CU_ASSERT_EQUAL(C.conn[c].error, 0);
			CU_ASSERT_EQUAL(C.conn[c].link, fresh);
		}
	}
	group_down();
}

/* n more bytes of the stream from the client on connection i. */
static void client_write(unsigned int i, size_t n)
{
	uint8_t buf[1000];
	size_t k;

	CU_ASSERT_FATAL(n <= sizeof(buf));
	for (k = 0; k < n; k++)
		buf[k] = sbyte(&C, i, C.sent[i] + k);
	CU_ASSERT_EQUAL(smcr_conn_send(&C.conn[i], buf, n), (ssize_t)n);
	C.sent[i] += n;
}

/* The client's first write, sent before the server has its connection:
 * its CDC overtakes the CLC Confirm (TCP) and reaches the server first. */
static void write_before_confirm(unsigned int i)
{
	client_write(i, 1000);
	run();
	CU_ASSERT_EQUAL(C.conn[i].stats.cdc_sent, 1);
}

/* The group and its connections, early(0) run before the server adds
 * connection 0: it has avail bytes to read then, and nothing was reset. */
static void conns_up_early(void (*early)(unsigned int i), uint32_t avail)
{
	unsigned int i;

	group_up(2, 2, NULL);
	stream_counts_clear();
	for (i = 0; i < NCONN; i++)
		conn_up(i, i == 0 ? early : NULL);
	run();
	CU_ASSERT_EQUAL(smcr_conn_rx_avail(&S.conn[0]), avail);
	CU_ASSERT_EQUAL(S.conn[0].error, 0);
	CU_ASSERT_EQUAL(C.conn[0].error, 0);
}

/* That CDC is kept for the connection the Confirm makes: its data is
 * there to read, and a failover right after (the client's validation
 * names the CDC its RNIC saw acknowledged) resets nothing.  Dropped, the
 * data waited for the next CDC, and the validation reset the connection
 * ("failover lost data (received 0, peer sent 1)", smcr-failover.sh). */
static void test_cdc_before_confirm(void)
{
	const uint64_t total = 64 * 1024;
	struct smcr_link *l;

	conns_up_early(write_before_confirm, 1000);
	CU_ASSERT_EQUAL(S.conn[0].rx_seq, 1);
	l = C.conn[0].link;
	CU_ASSERT_PTR_NOT_NULL_FATAL(l);
	memwire_fault(end_of(l), MEMWIRE_CUT);
	run();
	wait_ms(1000);
	CU_ASSERT_EQUAL(S.conn[0].error, 0);
	CU_ASSERT_EQUAL(C.conn[0].error, 0);
	CU_ASSERT_NOT_EQUAL(C.conn[0].link, l);
	stream_with(total, NULL);
	check_stream(total);
	group_down();
}

/* The same, and the client's link fails under its second write before
 * the Confirm is in: its failover validation (naming the first CDC) and
 * the write replayed on the other link come early too. */
static void write_cut_before_confirm(unsigned int i)
{
	struct smcr_link *l;

	write_before_confirm(i);
	l = C.conn[i].link;
	memwire_fault(end_of(l), MEMWIRE_CUT);
	client_write(i, 500);
	run();
	CU_ASSERT_NOT_EQUAL(C.conn[i].link, l);
	CU_ASSERT_EQUAL(C.conn[i].stats.failovers, 1);
}

static void test_cdc_validation_before_confirm(void)
{
	const uint64_t total = 64 * 1024;

	conns_up_early(write_cut_before_confirm, 1500);
	stream_with(total, NULL);
	check_stream(total);
	group_down();
}

/* SMC-Rv2: an ADD LINK whose RKey list leaves out an RMB in use (Linux
 * 6.1 lists conns_num of them, seen one short) is refused and asked for
 * again (REQ ADD LINK); the next, whole, list makes the link. */
static void test_v2_add_link_short_list(void)
{
	struct smcr_rmb *rmb;
	unsigned int i, c;

	lgr_version = 2;
	group_up(2, 2, NULL);
	conns_up();
	stream_with(256 * 1024, cut_link1);
	check_stream(256 * 1024);
	CU_ASSERT_EQUAL_FATAL(smcr_lgr_active_links(C.lgr), 1);
	/* as the engine counts them (conns_up does not) */
	for (i = 0; i < C.lgr->npeer_rmbs; i++)
		for (c = 0; c < NCONN; c++)
			C.lgr->peer_rmbs[i].refs += C.conn[c].peer_rmb == &C.lgr->peer_rmbs[i].r;
	rmb = S.conn[0].rmbe.rmb;
	CU_ASSERT_TRUE_FATAL(rmb->announced);
	rmb->announced = false;		/* left out of the server's list */
	CU_ASSERT_EQUAL(smcr_lgr_add_link(S.lgr), 0);
	run();
	CU_ASSERT_EQUAL(smcr_lgr_active_links(C.lgr), 1);
	CU_ASSERT_EQUAL(smcr_lgr_active_links(S.lgr), 1);
	CU_ASSERT(C.lgr->req_add_link_ms > 0);
	rmb->announced = true;
	wait_ms(SMCR_LGR_V2_ADD_LINK_RETRY_MS + 1000);
	CU_ASSERT_EQUAL(smcr_lgr_active_links(C.lgr), 2);
	CU_ASSERT_EQUAL(smcr_lgr_active_links(S.lgr), 2);
	stream_counts_clear();
	stream_with(64 * 1024, NULL);
	check_stream(64 * 1024);
	group_down();
	lgr_version = 1;
}

static unsigned int deferred;	/* moves waiting for writes in flight */

static void count_deferred(void)
{
	unsigned int c;

	for (c = 0; c < NCONN; c++)
		deferred += S.conn[c].move_to != NULL;
}

/* Busy connections move too: the tick comes while every connection has
 * writes and CDCs in flight, so each stops posting on its old link and
 * moves when they complete (the stream never pauses for it). */
static void test_rebalance_busy(void)
{
	const uint64_t total = 512 * 1024;
	struct smcr_link *l0, *l1;
	uint64_t fo_s, fo_c;
	unsigned int c;

	link1_cut_and_back(total);
	l0 = S.lgr->links[0].link;
	l1 = S.lgr->links[1].link;
	CU_ASSERT(l0->nconns == 0 || l1->nconns == 0);
	fo_s = S.lgr->stats.failovers;
	fo_c = C.lgr->stats.failovers;
	stream_counts_clear();
	deferred = 0;
	after_tick = count_deferred;
	stream_with(total, NULL);
	after_tick = NULL;
	check_stream(total);
	CU_ASSERT(deferred > 0);
	CU_ASSERT(S.lgr->stats.rebalanced > 0);
	CU_ASSERT(C.lgr->stats.rebalanced > 0);
	CU_ASSERT(l0->nconns >= NCONN / 2 - 1 && l1->nconns >= NCONN / 2 - 1);
	CU_ASSERT_EQUAL(links_in_use(S.lgr), 2);
	CU_ASSERT_EQUAL(links_in_use(C.lgr), 2);
	for (c = 0; c < NCONN; c++) {
		CU_ASSERT_PTR_NULL(S.conn[c].move_to);
		CU_ASSERT_PTR_NULL(C.conn[c].move_to);
	}
	/* Moved, not failed over: nothing was replayed. */
	CU_ASSERT_EQUAL(S.lgr->stats.failovers, fo_s);
	CU_ASSERT_EQUAL(C.lgr->stats.failovers, fo_c);
	/* A link that fails while moves onto it are pending: they are called
	 * off, and the connections carry on where they are. */
	stream_counts_clear();
	pump(&S, &C, total);
	pump(&C, &S, total);
	for (c = 0; c < NCONN; c++)
		if (S.conn[c].link == l1)
			smcr_conn_move(&S.conn[c], l0);
	smcr_lgr_link_down(S.lgr, l0, -ENETDOWN);
	for (c = 0; c < NCONN; c++)
		CU_ASSERT_PTR_NULL(S.conn[c].move_to);
	memwire_fault(end_of(l0), MEMWIRE_CUT);
	stream_with(total, NULL);
	check_stream(total);
	group_down();
}

/* The bytes written and not yet confirmed on each link, as the links count
 * them and as their connections do; the most seen against the limit. */
static uint64_t tx_seen_max;
static unsigned int tx_miscounts;

static void check_tx_unacked(struct host *h)
{
	unsigned int s, c;

	for (s = 0; s < SMCR_LINK_SLOTS; s++) {
		struct smcr_link *l = h->lgr->links[s].link;
		uint64_t n = 0;

		if (!l)
			continue;
		for (c = 0; c < NCONN; c++)
			if (h->conn[c].link == l)
				n += smcr_conn_unacked(&h->conn[c]);
		tx_miscounts += n != l->tx_unacked;
		if (l->tx_unacked > tx_seen_max)
			tx_seen_max = l->tx_unacked;
	}
}

static void tx_round(unsigned int round)
{
	(void)round;
	check_tx_unacked(&S);
	check_tx_unacked(&C);
}

/* A link holds at most link_tx_bytes (plus one connection's last batch)
 * written and unconfirmed, so an LLC reply never waits behind more; the
 * links count it exactly, and every connection still gets its turn. */
static void test_link_tx_cap(void)
{
	const uint64_t total = 256 * 1024;
	struct smcr_lgr_config cfg = smcr_lgr_config_default;
	uint32_t elem = 0;
	unsigned int c, s;

	cfg.link_tx_bytes = 4096;
	group_up(1, 1, &cfg);
	conns_up();
	for (c = 0; c < NCONN; c++)
		if (S.conn[c].tx_len > elem)
			elem = S.conn[c].tx_len;
	tx_seen_max = 0;
	tx_miscounts = 0;
	for (s = 0; s < 20000 && !streamed(total); s++) {
		pump(&S, &C, total);
		pump(&C, &S, total);
		tx_round(s);		/* all posted, nothing completed yet */
		clock_ms += 10;
		if (s % 10 == 0) {
			smcr_lgr_tick(S.lgr);
			smcr_lgr_tick(C.lgr);
		}
		run();
		tx_round(s);
	}
	check_stream(total);
	CU_ASSERT_EQUAL(tx_miscounts, 0);
	CU_ASSERT(tx_seen_max >= cfg.link_tx_bytes);
	CU_ASSERT(tx_seen_max <= cfg.link_tx_bytes + elem);
	run();
	for (s = 0; s < SMCR_LINK_SLOTS; s++)
		if (S.lgr->links[s].link)
			CU_ASSERT_EQUAL(S.lgr->links[s].link->tx_unacked, 0);
	group_down();
}

static void test_llc_timeout(void)
{
	struct smcr_rmbe e[17];
	bool pend = false;
	unsigned int i;

	group_up(2, 2, NULL);
	/* The peer goes silent on every link: CONFIRM RKEY is resent
	 * llc_retries times, then fails with a clear outcome. */
	memwire_fault(end_of(C.lgr->links[0].link), MEMWIRE_BLACKHOLE);
	memwire_fault(end_of(C.lgr->links[1].link), MEMWIRE_BLACKHOLE);
	C.lgr->cfg.test_link_idle_ms = 0;
	S.lgr->cfg.test_link_idle_ms = 0;
	for (i = 0; i < 16; i++)
		CU_ASSERT_EQUAL_FATAL(smcr_lgr_rmbe_alloc(C.lgr, 1000, &e[i], &pend), 0);
	CU_ASSERT_TRUE(pend);
	wait_ms((C.lgr->cfg.llc_retries + 2) * C.lgr->cfg.llc_timeout_ms);
	CU_ASSERT_EQUAL(C.lgr->stats.llc_retries, C.lgr->cfg.llc_retries);
	CU_ASSERT_EQUAL(C.lgr->stats.llc_timeouts, C.lgr->cfg.llc_retries + 1);
	CU_ASSERT_EQUAL(C.last_rmb_status, -ETIMEDOUT);
	CU_ASSERT_EQUAL(C.lgr->flow.kind, SMCR_FLOW_NONE);
	group_down();
}

/* Delivers at most max work requests; how many. */
static unsigned long run_bounded(unsigned long max)
{
	unsigned long n = 0;
	unsigned int i;
	bool progress = true;

	while (progress && n < max) {
		progress = false;
		for (i = 0; i < S.nends + C.nends && n < max; i++)
			if (memwire_step(i < S.nends ? S.ends[i] : C.ends[i - S.nends])) {
				progress = true;
				n++;
			}
	}
	return n;
}

static void test_rkey_refused_no_storm(void)
{
	struct smcr_rmbe e[17];
	bool pend = false;
	unsigned int i;

	/* Found by fuzz-lgr-llc: link 1 is cut, the client needs a new RMB
	 * and the server starts a DELETE LINK that waits for its timeout.
	 * Every CONFIRM RKEY meanwhile is refused (the server is changing
	 * links); the client asked again at once, and the two sent each
	 * other request and refusal without end (a livelock: 100,000 LLC
	 * messages in the fuzzer without the clock moving).  Now it asks
	 * again at the next tick, and the RMB is announced once the
	 * DELETE LINK is over. */
	group_up(2, 2, NULL);
	S.lgr->cfg.test_link_idle_ms = 0;
	C.lgr->cfg.test_link_idle_ms = 0;
	memwire_fault(end_of(S.lgr->links[0].link), MEMWIRE_CUT);
	for (i = 0; i < 16; i++)
		CU_ASSERT_EQUAL_FATAL(smcr_lgr_rmbe_alloc(C.lgr, 1000, &e[i], &pend), 0);
	CU_ASSERT_TRUE(pend);
	CU_ASSERT_EQUAL(smcr_lgr_delete_link(S.lgr, 1, 0), 0);
	CU_ASSERT(run_bounded(10000) < 100);
	CU_ASSERT(C.lgr->stats.rkey_rejects <= 1);
	wait_ms((S.lgr->cfg.llc_retries + 2) * S.lgr->cfg.llc_timeout_ms);
	/* The DELETE LINK timed out and took link 2; link 1 was cut: no
	 * link is left, and the RMB gets a clear outcome. */
	CU_ASSERT_EQUAL(C.lgr->stats.rkey_rejects, 1);
	CU_ASSERT_EQUAL(C.lgr->flow.kind, SMCR_FLOW_NONE);
	CU_ASSERT_EQUAL(S.lgr->flow.kind, SMCR_FLOW_NONE);
	CU_ASSERT_EQUAL(C.last_rmb_status, -ETIMEDOUT);
	group_down();
}

/* CONFIRM LINK flag 0x03: the server offers Linux's layout, the client's
 * response settles it; an older peer (the RFC layout only) gets that. */
static void layout_case(bool s_rfc, bool c_rfc, uint8_t want_eye)
{
	struct smcr_lgr_config scfg = smcr_lgr_config_default, ccfg = smcr_lgr_config_default;
	struct smcr_rmbe e;

	scfg.rmbe_eyecatcher = s_rfc;
	ccfg.rmbe_eyecatcher = c_rfc;
	group_up2(2, 2, &scfg, &ccfg);
	CU_ASSERT_EQUAL(smcr_lgr_active_links(S.lgr), 2);
	CU_ASSERT_EQUAL(smcr_lgr_active_links(C.lgr), 2);
	CU_ASSERT(S.lgr->layout_fixed && C.lgr->layout_fixed);
	CU_ASSERT_EQUAL(S.lgr->rmbe_eye, want_eye);
	CU_ASSERT_EQUAL(C.lgr->rmbe_eye, want_eye);
	/* The elements CLC took before CONFIRM LINK follow the layout. */
	CU_ASSERT_EQUAL(smcr_rmbe_get(S.conn[0].rmbe.rmb, S.conn[0].rmbe.index, &e), 0);
	CU_ASSERT_EQUAL(e.data_len, e.rmb->elem_size - want_eye);
	CU_ASSERT_EQUAL(e.rmb->buf[(e.index - 1) * e.rmb->elem_size],
			want_eye ? 0xd9 : 0);
	CU_ASSERT(smcr_rmbe_intact(&e));
	CU_ASSERT_EQUAL(S.lgr->sndbufs.eye_len, want_eye);
	CU_ASSERT_EQUAL(C.lgr->sndbufs.eye_len, want_eye);
	CU_ASSERT_EQUAL(S.lgr->stats.llc_bad + C.lgr->stats.llc_bad, 0);
	group_down();
}

static void test_layout_flag(void)
{
	layout_case(false, false, 0);			/* both new */
	layout_case(false, true, SMCR_RMBE_EYE_LEN);	/* an older client */
	layout_case(true, false, SMCR_RMBE_EYE_LEN);	/* an older server */
	layout_case(true, true, SMCR_RMBE_EYE_LEN);
}

/* Linux numbers links from its own counter: the client takes the number
 * the server's CONFIRM LINK carries. */
static void test_link_number_adopted(void)
{
	struct smcr_lgr_config scfg = smcr_lgr_config_default;

	scfg.first_link_id = 3;
	group_up2(2, 2, &scfg, NULL);
	CU_ASSERT_EQUAL(S.lgr->links[0].link->link_id, 3);
	CU_ASSERT_EQUAL(C.lgr->links[0].link->link_id, 3);
	CU_ASSERT_EQUAL(smcr_lgr_active_links(S.lgr), 2);
	CU_ASSERT_EQUAL(smcr_lgr_active_links(C.lgr), 2);
	/* The second link gets another number, the same on both sides. */
	CU_ASSERT_NOT_EQUAL(S.lgr->links[1].link->link_id, 3);
	CU_ASSERT_EQUAL(S.lgr->links[1].link->link_id, C.lgr->links[1].link->link_id);
	CU_ASSERT_EQUAL(S.lgr->stats.llc_bad + C.lgr->stats.llc_bad, 0);
	group_down();
}

CU_TestInfo smcr_lgr_tests[] = {
	{ "CONFIRM LINK flag 0x03: RMBE layout, old and new peers", test_layout_flag },
	{ "CONFIRM LINK: the client adopts link number 3", test_link_number_adopted },
	{ "first contact: CONFIRM LINK + ADD LINK", test_first_contact_two_links },
	{ "asymmetric and single-RNIC groups", test_asymmetric },
	{ "CONFIRM RKEY and DELETE RKEY", test_confirm_delete_rkey },
	{ "failover under load, DELETE LINK, re-add", test_failover_and_readd },
	{ "failover: sends accepted while the link refused posts go once, after it", test_failover_refused_posts },
	{ "an aborted connection's send buffer waits for its writes", test_sndbuf_parked },
	{ "send buffer for a peer's RMBE beyond 512 KiB", test_sndbuf_large_peer_rmbe },
	{ "SMC-Rv2: ADD LINK with its RKeys", test_v2_add_link },
	{ "SMC-Rv2.1: max_links 1, max_conns", test_v21_max_links_one },
	{ "SMC-Rv2.1: ADD LINK refused at max_links 1", test_v21_client_refuses_add_link },
	{ "ADD LINK waits for the client's path", test_add_link_path_wait },
	{ "SMC-Rv2: failover under load, re-add", test_v2_failover_and_readd },
	{ "TEST LINK detects silent loss", test_test_link_silent_loss },
	{ "the last link's TEST LINK limit", test_last_link_timeout },
	{ "a TEST LINK stamped after the tick's clock", test_test_link_stamp_after_tick },
	{ "the last link when the peer's process is gone", test_last_link_peer_gone },
	{ "the last link of a group that carries nothing", test_last_link_empty_group },
	{ "DELETE LINK (all) when a side ends on purpose", test_delete_all_on_exit },
	{ "an unanswered TEST LINK goes again once", test_test_link_resent },
	{ "a probe unanswered while the peer sends: no link fails", test_test_link_busy_peer },
	{ "a probe acknowledged, unanswered: three timeouts", test_test_link_acked_probe },
	{ "a stalled connection is logged once with its cursors", test_conn_stall_logged },
	{ "our own stall: no link blamed, a dead one still found", test_local_stall },
	{ "our own stall: an LLC exchange not timed out", test_local_stall_llc },
	{ "both links down: connections reset", test_both_links_down },
	{ "collision: CONFIRM RKEY vs ADD LINK", test_collision_rkey_vs_add_link },
	{ "collision: DELETE LINK during ADD LINK", test_collision_delete_during_add },
	{ "collision: both start ADD LINK", test_collision_add_link_both },
	{ "collision: both DELETE LINK", test_collision_delete_link_both },
	{ "lost link seen by both sides at once", test_lost_link_both_sides },
	{ "a lost path's DELETE LINK marked orderly fails over at once", test_lost_path_marked_orderly },
	{ "a failed link that still acknowledges waits for DELETE LINK", test_acking_link_kept },
	{ "a failed link that still acknowledges holds its DELETE LINK", test_acking_link_holds_delete },
	{ "a server keeps no late acker on a failed link", test_server_acker_off },
	{ "rebalancing onto a returned link", test_rebalance },
	{ "rebalancing connections that are busy", test_rebalance_busy },
	{ "rebalancing leaves a connection off a link without its peer's RKey", test_rebalance_no_rkey },
	{ "failover resets only a connection no link has an RKey for", test_failover_no_rkey },
	{ "a CDC that overtakes the CLC Confirm is kept for its connection", test_cdc_before_confirm },
	{ "a failover validation before the CLC Confirm is checked against it", test_cdc_validation_before_confirm },
	{ "SMC-Rv2 ADD LINK with an RKey list short of an RMB: refused, asked again", test_v2_add_link_short_list },
	{ "unconfirmed bytes per link at their limit", test_link_tx_cap },
	{ "LLC timeout: retries, then an outcome", test_llc_timeout },
	{ "CONFIRM RKEY refused: asked again at the tick", test_rkey_refused_no_storm },
	CU_TEST_INFO_NULL,
};
