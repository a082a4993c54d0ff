/* SPDX-License-Identifier: BSD-3-Clause */
/* smcrbd: connection setup of the public API: TCP connect/accept, then the
 * CLC exchange (clc.c) whose callbacks find or create the link group, the
 * RMBE and the connection; TCP fallback when SMC-R is not possible. */
#include <config.h>

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <stdio.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

#include "clc.h"
#include "engine.h"
#include "log.h"
#include "sock.h"
#include "synopt.h"
#include "wire.h"

/* What one CLC exchange set up so far (for undo). */
struct setup {
	struct smcr_ctx *ctx;
	struct smcr_sock *s;
	struct smcr_port_ref *port;
	struct smcr_lgr *lgr;
	bool new_lgr;
	struct smcr_link *link;		/* first contact: the new link */
	struct smcr_link_info local;
	int slot;
	bool conn_added;
	const struct smcr_clc_result *res;	/* res->version: the exchange's */
};

static void peer_id_bytes(const struct smcr_peer_id *id, uint8_t out[8])
{
	out[0] = (uint8_t)(id->instance >> 8);
	out[1] = (uint8_t)id->instance;
	memcpy(out + 2, id->mac, SMCR_MAC_LEN);
}

static void our_peer_id(const struct smcr_ctx *ctx, struct smcr_peer_id *id)
{
	id->instance = (uint16_t)(ctx->peer_id[0] << 8 | ctx->peer_id[1]);
	memcpy(id->mac, ctx->peer_id + 2, SMCR_MAC_LEN);
}

static struct smcr_port_ref *port_of_fd(struct smcr_ctx *ctx, int fd)
{
	struct sockaddr_storage ss;
	socklen_t len = sizeof(ss);

	if (getsockname(fd, (struct sockaddr *)&ss, &len))
		return NULL;
	return smcr_engine_port_for(ctx, (struct sockaddr *)&ss);
}

struct rmb_wait {
	const struct smcr_rmbe *e;
	const struct smcr_lgr *lgr;
};

/* The new RMB is announced, or its group has ended. */
static bool rmb_announced(void *arg)
{
	const struct rmb_wait *w = arg;

	return w->e->rmb->announced || w->lgr->terminated;
}

struct link_wait {
	struct smcr_lgr *lgr;
	int slot;
};

static bool link_settled(void *arg)
{
	struct link_wait *w = arg;
	struct smcr_link *l = w->lgr->links[w->slot].link;

	return !l || l->state != SMCR_LINK_INACTIVE || w->lgr->terminated;
}

/* Our RMBE, waiting for CONFIRM RKEY when it comes from a new RMB. */
/* A new RMB is announced (CONFIRM RKEY) before our Accept or Confirm goes
 * out; the flow may queue behind another (ADD LINK) and be resent. */
static unsigned int rkey_wait_ms(const struct smcr_ctx *ctx)
{
	return ctx->lgr_cfg.llc_timeout_ms * (ctx->lgr_cfg.llc_retries + 2);
}

/* The receive buffer of a new connection when none is set. */
static uint32_t rmbe_auto_size(const struct smcr_lgr *lgr)
{
	return smcr_rmbe_auto_size(&lgr->rmbs, lgr->cfg.max_rmb_bytes ? lgr->cfg.max_rmb_bytes :
				   SMCR_LGR_MAX_RMB_BYTES, lgr->cfg.rmbe_auto_max ?
				   lgr->cfg.rmbe_auto_max : SMCR_LGR_RMBE_AUTO_MAX);
}

static uint32_t rmbe_get(struct setup *st, struct smcr_rmbe *e)
{
	struct smcr_ctx *ctx = st->ctx;
	uint32_t size = ctx->opts.rmbe_size ? ctx->opts.rmbe_size :
			rmbe_auto_size(st->lgr);
	bool pending;
	int ret;

	/* size is the whole element: its class is picked as if with an
	 * eye catcher (the layout is fixed later, by CONFIRM LINK). */
	ret = smcr_lgr_rmbe_alloc(st->lgr, size > SMCR_RMBE_EYE_LEN ?
				  size - SMCR_RMBE_EYE_LEN : 1, e, &pending);
	if (ret) {
		smcr_warn("connect: no RMBE: %s", strerror(-ret));
		return SMCR_DECL_MEM;
	}
	if (pending) {
		struct rmb_wait w = { .e = e, .lgr = st->lgr };

		if (smcr_engine_wait(ctx, rmb_announced, &w, rkey_wait_ms(ctx)) ||
		    st->lgr->terminated) {
			smcr_rmbe_free(&st->lgr->rmbs, e);
			return SMCR_DECL_ERR_RTOK;
		}
	}
	return 0;
}

/* The connection on top of the link group; the peer's side is in acc. */
static uint32_t conn_make(struct setup *st, const struct smcr_clc_accept_confirm *peer,
			  const struct smcr_rmbe *rmbe, uint32_t token)
{
	struct smcr_sock *s = st->s;
	struct smcr_lgr_peer_rmb *prmb;
	struct smcr_conn_params p;
	struct smcr_rmbe sb;
	uint32_t psize = smcr_rmb_size_decompress(peer->rmbe_size);
	int ret;

	prmb = smcr_lgr_peer_rmb_add(st->lgr, (uint8_t)st->slot, peer->rmb_rkey,
				     peer->rmb_vaddr);
	if (!prmb)
		goto out_drop_token;
	if (!prmb->r.vaddr[st->slot])
		prmb->r.vaddr[st->slot] = peer->rmb_vaddr;
	ret = smcr_lgr_sndbuf_alloc(st->lgr, psize, &sb);
	if (ret)
		goto out_drop_token;
	p = (struct smcr_conn_params){
		.token = token,
		.peer_token = peer->rmbe_alert_token,
		.rmbe = *rmbe,
		.sndbuf = sb,
		.peer_rmb = &prmb->r,
		.peer_index = peer->rmbe_idx,
		.peer_elem_size = psize,
		.link = st->lgr->links[st->slot].link,
	};
	ret = smcr_conn_init(&s->conn, &p);
	s->conn.tx_cork = s->ctx->autocork_bytes;
	if (!ret)
		ret = smcr_lgr_conn_add(st->lgr, &s->conn);
	if (ret)
		goto out_free_sndbuf;
	s->lgr = st->lgr;
	s->peer_rmb = prmb;
	prmb->refs++;
	st->conn_added = true;
	return 0;

out_free_sndbuf:
	smcr_rmbe_free(&st->lgr->sndbufs, &sb);
out_drop_token:
	smcr_lgr_conn_token_drop(st->lgr, token);
	return SMCR_DECL_MEM;
}

static void fill_ours(struct setup *st, const struct smcr_rmbe *rmbe,
		      struct smcr_clc_accept_confirm *m)
{
	struct smcr_lgr_link *ll = &st->lgr->links[st->slot];
	const struct smcr_link_info *li = ll->link ? &ll->local : &st->local;
	uint32_t rkey = 0;
	uint64_t va = 0;

	our_peer_id(st->ctx, &m->peer_id);
	memcpy(m->gid, li->gid, SMCR_GID_LEN);
	memcpy(m->mac, li->mac, SMCR_MAC_LEN);
	m->qpn = li->qpn;
	m->psn = li->psn;
	m->qp_mtu = li->mtu;
	smcr_engine_lgr_ops.rmb_reg(st->lgr, rmbe->rmb,
				    ll->link ? ll->link : st->link, &rkey, &va);
	m->rmb_rkey = rkey;
	m->rmb_vaddr = va;
	m->rmbe_idx = rmbe->index;
	m->rmbe_alert_token = st->s->conn.token;
	m->rmbe_size = rmbe->rmb->size_code;
}

/* One group per peer is set up at a time, as in Linux (its
 * smc_server_lgr_pending and smc_client_lgr_pending): a connection that
 * finds the peer's group still confirming its first link waits for it,
 * then joins it, instead of making a group of its own (a client's four
 * connections after a server restart made four). */
struct pending {
	struct smcr_ctx *ctx;
	enum smcr_role role;
	const uint8_t *pid;
	uint8_t version;
};

static bool lgr_pending(void *arg)
{
	const struct pending *w = arg;
	const struct smcr_lgr *lgr;

	for (lgr = w->ctx->lgrs; lgr; lgr = lgr->next)
		if (lgr->role == w->role && !lgr->terminated && lgr->version == w->version &&
		    memcmp(lgr->peer_id, w->pid, 8) == 0 && smcr_lgr_active_links(lgr) == 0)
			return true;
	return false;
}

static bool none_pending(void *arg)
{
	return !lgr_pending(arg);
}

/* A group of the peer's that speaks the exchange's version (a v1 and a
 * v2 group of one peer are different groups, as in Linux).  v2 names a
 * link by GID and QP alone: a Linux v2-only Proposal has no MAC (nor a
 * peer ID: zeros, the same on every connection). */
static struct smcr_lgr *lgr_find_version(struct smcr_ctx *ctx, enum smcr_role role,
					 const uint8_t pid[8], const uint8_t *gid,
					 const uint8_t *mac, uint32_t qpn, uint8_t version)
{
	struct smcr_lgr *lgr = smcr_engine_lgr_find(ctx, role, pid, gid,
						    version == SMCR_CLC_VERSION_2 ? NULL : mac, qpn);

	return lgr && lgr->version == version ? lgr : NULL;
}

static struct smcr_lgr *lgr_find_settled(struct setup *st, enum smcr_role role,
					 const uint8_t pid[8], const uint8_t *gid,
					 const uint8_t *mac, uint32_t qpn)
{
	struct smcr_ctx *ctx = st->ctx;
	uint8_t v = st->res->version;
	struct smcr_lgr *lgr = lgr_find_version(ctx, role, pid, gid, mac, qpn, v);
	struct pending w = { .ctx = ctx, .role = role, .pid = pid, .version = v };

	if (lgr || !lgr_pending(&w))
		return lgr;
	smcr_engine_wait(ctx, none_pending, &w, ctx->opts.link_wait_ms);
	return lgr_find_version(ctx, role, pid, gid, mac, qpn, v);
}

/* The handshake holds the group it works on until it ends (the engine
 * lock is released while it waits for the peer or for an RKey). */
static void st_hold(struct setup *st, struct smcr_lgr *lgr)
{
	if (st->lgr == lgr)
		return;
	if (st->lgr)
		st->lgr->setups--;
	st->lgr = lgr;
	if (lgr)
		lgr->setups++;
}

static int lgr_new(struct setup *st, enum smcr_role role, const struct smcr_peer_id *peer)
{
	struct smcr_lgr *lgr;
	int ret = smcr_lgr_create(role, &smcr_engine_lgr_ops, st->ctx,
				  &st->ctx->lgr_cfg, &lgr);

	if (ret)
		return ret;
	st_hold(st, lgr);
	peer_id_bytes(peer, st->lgr->peer_id);
	st->lgr->version = st->res->version;
	if (st->res->version == SMCR_CLC_VERSION_2)
		smcr_lgr_set_v21(st->lgr, st->res->release, st->res->max_conns,
				 st->res->max_links);
	st->lgr->next = st->ctx->lgrs;
	st->ctx->lgrs = st->lgr;
	st->new_lgr = true;
	return 0;
}

/* The link the peer named by its end: QPNs are per device (every rxe
 * device starts at 0x11), so the GID is part of the name. */
static int slot_by_peer(struct smcr_lgr *lgr, uint32_t qpn, const uint8_t *gid)
{
	unsigned int i;

	for (i = 0; i < SMCR_LINK_SLOTS; i++)
		if (lgr->links[i].link && lgr->links[i].peer.qpn == qpn &&
		    memcmp(lgr->links[i].peer.gid, gid, SMCR_GID_LEN) == 0 &&
		    lgr->links[i].link->state == SMCR_LINK_ACTIVE)
			return (int)i;
	return -1;
}

/* ---- client ------------------------------------------------------------ */

static uint32_t cl_propose(void *arg, int fd, struct smcr_clc_proposal *prop)
{
	struct setup *st = arg;
	uint32_t code = 0;

	pthread_mutex_lock(&st->ctx->lock);
	st->port = port_of_fd(st->ctx, fd);
	if (!st->port) {
		code = SMCR_DECL_NOSMCRDEV;
		goto out_unlock;
	}
	our_peer_id(st->ctx, &prop->peer_id);
	memcpy(prop->gid, st->port->gid, SMCR_GID_LEN);
	memcpy(prop->mac, st->port->mac, SMCR_MAC_LEN);
	prop->ip_area_offset = SMCR_CLC_IP_AREA_OFFSET_LINUX;
	if (smcr_clc_local_prefixes(fd, prop))
		code = SMCR_DECL_CNFERR;
out_unlock:
	pthread_mutex_unlock(&st->ctx->lock);
	return code;
}

static uint32_t cl_accept(void *arg, int fd, const struct smcr_clc_proposal *prop,
			  const struct smcr_clc_accept_confirm *acc,
			  struct smcr_clc_accept_confirm *conf)
{
	struct setup *st = arg;
	struct smcr_ctx *ctx = st->ctx;
	struct smcr_rmbe rmbe;
	uint8_t pid[8];
	uint32_t code = 0;
	int ret;

	(void)fd;
	(void)prop;
	pthread_mutex_lock(&ctx->lock);
	peer_id_bytes(&acc->peer_id, pid);
	if (acc->first_contact) {
		struct smcr_link_info peer = { .qpn = acc->qpn, .psn = acc->psn,
					       .mtu = acc->qp_mtu };

		memcpy(peer.gid, acc->gid, SMCR_GID_LEN);
		memcpy(peer.mac, acc->mac, SMCR_MAC_LEN);
		if (lgr_new(st, SMCR_ROLE_CLIENT, &acc->peer_id)) {
			code = SMCR_DECL_MEM;
			goto out_unlock;
		}
		ret = smcr_engine_link_on(ctx, st->lgr, st->port, &st->link, &st->local);
		if (!ret)
			ret = smcr_engine_lgr_ops.link_connect(st->lgr, st->link, &peer);
		if (!ret)
			ret = smcr_lgr_first_link(st->lgr, st->link, &st->local, &peer);
		if (ret) {
			smcr_warn("connect: first link: %s", strerror(-ret));
			code = SMCR_DECL_ERR_RDYLNK;
			goto out_unlock;
		}
		st->link = NULL;	/* the group owns it now */
		st->slot = 0;
	} else {
		st_hold(st, lgr_find_settled(st, SMCR_ROLE_CLIENT, pid, acc->gid, acc->mac,
					     acc->qpn));
		st->slot = st->lgr ? slot_by_peer(st->lgr, acc->qpn, acc->gid) : -1;
		if (st->slot < 0) {
			/* The server believes in a group we do not have. */
			code = SMCR_DECL_SYNCERR;
			goto out_unlock;
		}
	}
	code = rmbe_get(st, &rmbe);
	if (code)
		goto out_unlock;
	code = conn_make(st, acc, &rmbe, smcr_lgr_conn_token(st->lgr));
	if (code) {
		smcr_rmbe_free(&st->lgr->rmbs, &rmbe);
		goto out_unlock;
	}
	fill_ours(st, &rmbe, conf);
out_unlock:
	pthread_mutex_unlock(&ctx->lock);
	return code;
}

/* ---- server ------------------------------------------------------------ */

static uint32_t sv_accept_proposal(void *arg, int fd, const struct smcr_clc_proposal *prop,
				   struct smcr_clc_accept_confirm *acc)
{
	struct setup *st = arg;
	struct smcr_ctx *ctx = st->ctx;
	struct smcr_rmbe rmbe;
	uint8_t pid[8], addr[16];
	uint32_t code = 0;
	int ret;

	pthread_mutex_lock(&ctx->lock);
	st->port = port_of_fd(ctx, fd);
	if (!st->port) {
		code = SMCR_DECL_NOSMCRDEV;
		goto out_unlock;
	}
	peer_id_bytes(&prop->peer_id, pid);
	st_hold(st, lgr_find_settled(st, SMCR_ROLE_SERVER, pid, prop->gid, prop->mac, 0));
	if (st->lgr) {
		struct smcr_link *l = smcr_lgr_pick_link(st->lgr);

		st->slot = smcr_lgr_slot(st->lgr, l);
		acc->first_contact = false;
	} else {
		/* v2 is routable: no subnet to share */
		if (st->res->version != SMCR_CLC_VERSION_2 &&
		    smcr_clc_prefix_match(fd, prop) != 1) {
			code = SMCR_DECL_DIFFPREFIX;
			goto out_unlock;
		}
		code = smcr_engine_lgr_admit(ctx, fd, addr);
		if (code)
			goto out_unlock;
		if (lgr_new(st, SMCR_ROLE_SERVER, &prop->peer_id)) {
			code = SMCR_DECL_MEM;
			goto out_unlock;
		}
		memcpy(st->lgr->peer_addr, addr, sizeof(addr));
		ret = smcr_engine_link_on(ctx, st->lgr, st->port, &st->link, &st->local);
		if (ret) {
			code = SMCR_DECL_ERR_RDYLNK;
			goto out_unlock;
		}
		st->slot = 0;
		acc->first_contact = true;
	}
	code = rmbe_get(st, &rmbe);
	if (code)
		goto out_unlock;
	st->s->conn.rmbe = rmbe;
	st->s->conn.token = smcr_lgr_conn_token(st->lgr);
	fill_ours(st, &rmbe, acc);
	acc->first_contact = st->new_lgr;
out_unlock:
	pthread_mutex_unlock(&ctx->lock);
	return code;
}

static uint32_t sv_confirm(void *arg, int fd, const struct smcr_clc_accept_confirm *acc,
			   const struct smcr_clc_accept_confirm *conf)
{
	struct setup *st = arg;
	struct smcr_ctx *ctx = st->ctx;
	struct smcr_rmbe rmbe = st->s->conn.rmbe;
	uint32_t token = st->s->conn.token;
	uint32_t code = 0;
	int ret;

	(void)fd;
	(void)acc;
	pthread_mutex_lock(&ctx->lock);
	if (st->link) {
		struct smcr_link_info peer = { .qpn = conf->qpn, .psn = conf->psn,
					       .mtu = conf->qp_mtu };

		memcpy(peer.gid, conf->gid, SMCR_GID_LEN);
		memcpy(peer.mac, conf->mac, SMCR_MAC_LEN);
		ret = smcr_engine_lgr_ops.link_connect(st->lgr, st->link, &peer);
		if (!ret)
			ret = smcr_lgr_first_link(st->lgr, st->link, &st->local, &peer);
		if (ret) {
			code = SMCR_DECL_ERR_RDYLNK;
			goto out_unlock;
		}
		st->link = NULL;
	} else if (st->lgr->links[st->slot].peer.qpn != conf->qpn ||
		   memcmp(st->lgr->links[st->slot].peer.gid, conf->gid, SMCR_GID_LEN)) {
		code = SMCR_DECL_SYNCERR;
		goto out_unlock;
	}
	/* The token is the one our Accept announced. */
	code = conn_make(st, conf, &rmbe, token);
out_unlock:
	pthread_mutex_unlock(&ctx->lock);
	return code;
}

static void undo(void *arg, const struct smcr_clc_result *res)
{
	struct setup *st = arg;
	struct smcr_sock *s = st->s;

	(void)res;
	pthread_mutex_lock(&st->ctx->lock);
	if (st->conn_added) {
		smcr_lgr_conn_remove(st->lgr, &s->conn);
		smcr_rmbe_free(&st->lgr->sndbufs, &s->conn.sndbuf);
		if (s->peer_rmb && s->peer_rmb->refs)
			s->peer_rmb->refs--;
		st->conn_added = false;
	} else if (st->lgr && s->conn.token) {
		/* announced in our Accept, never made */
		smcr_lgr_conn_token_drop(st->lgr, s->conn.token);
	}
	if (s->conn.rmbe.rmb)
		smcr_rmbe_free(&st->lgr->rmbs, &s->conn.rmbe);
	memset(&s->conn, 0, sizeof(s->conn));
	s->lgr = NULL;
	s->peer_rmb = NULL;
	if (st->link) {
		smcr_engine_lgr_ops.link_destroy(st->lgr, st->link);
		st->link = NULL;
	}
	if (st->new_lgr)
		smcr_lgr_terminate(st->lgr, -ECONNABORTED);
	pthread_mutex_unlock(&st->ctx->lock);
}

static const struct smcr_clc_ops clc_ops = {
	.propose = cl_propose,
	.accept = cl_accept,
	.accept_proposal = sv_accept_proposal,
	.confirm = sv_confirm,
	.undo = undo,
};

/* ---- connect / accept ------------------------------------------------------ */

/* A server that runs CLC without the SYN option's word (syn-option off, or a
 * socket the program did not see): a client that speaks first and not CLC
 * (it saw no option on our SYN-ACK, or is plain TCP) gets TCP at once, its
 * bytes unread.  Waits up to timeout_ms for a first byte; *waited: how long. */
#define CLC_WAIT_SLICE_MS 100
#define CLC_WAIT_SLACK_MS 200
static bool client_speaks_tcp(int fd, int timeout_ms, int *waited)
{
	static const uint8_t eye[4] = { SMCR_EYECATCHER_0, SMCR_EYECATCHER_1,
					SMCR_EYECATCHER_2, SMCR_EYECATCHER_3 };
	struct pollfd p = { .fd = fd, .events = POLLIN };
	uint8_t b[4];
	ssize_t n;
	int r;

	/* In slices, counting a late one as its length plus a little: time
	 * we could not run (host busy, VM paused) is not the client's. */
	*waited = 0;
	do {
		int slice = timeout_ms - *waited < CLC_WAIT_SLICE_MS ?
			    timeout_ms - *waited : CLC_WAIT_SLICE_MS;
		uint64_t t0 = smcr_now_ms(), dt;

		r = poll(&p, 1, slice);
		if (r < 0 && errno != EINTR)
			break;
		dt = smcr_now_ms() - t0;
		if (dt > (uint64_t)slice + CLC_WAIT_SLACK_MS) {
			smcr_info("accept: %llu ms stall of our own while waiting for the "
				  "client's first bytes: not counted",
				  (unsigned long long)(dt - (uint64_t)slice));
			dt = (uint64_t)slice;
		}
		*waited += (int)dt;
	} while (r <= 0 && *waited < timeout_ms);
	if (r <= 0)
		return false;
	n = recv(fd, b, sizeof(b), MSG_PEEK | MSG_DONTWAIT);
	return n > 0 && memcmp(b, eye, (size_t)n) != 0;
}

static int handshake_run(struct smcr_ctx *ctx, int fd, bool server, struct smcr_sock **sockp,
			 bool *not_clc)
{
	struct smcr_clc_cfg cfg = {
		.proposal_timeout_ms = (int)ctx->opts.clc_timeout_ms,
		/* The peer may be announcing a new RMB before it replies. */
		.reply_timeout_ms = (int)(ctx->opts.clc_timeout_ms + rkey_wait_ms(ctx)),
		.send_timeout_ms = (int)ctx->opts.clc_timeout_ms,
		/* A client that never speaks (plain NBD on an SMC-R port)
		 * gets TCP once the Proposal wait ends with nothing read. */
		.fallback_on_silence = server,
	};
	struct smcr_clc_result res;
	struct setup st = { .ctx = ctx, .res = &res };
	struct smcr_sock *s;
	int one = 1, ret, synopt, waited = 0;

	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	s = smcr_sock_new(ctx, fd);
	if (!s) {
		close(fd);
		return -ENOMEM;
	}
	st.s = s;
	our_peer_id(ctx, &cfg.peer_id);
	cfg.eid_count = ctx->eid_count;
	memcpy(cfg.eids, ctx->eids, sizeof(cfg.eids));
	cfg.v2_release0 = ctx->v2_release == 0;
	cfg.max_conns = ctx->max_conns;
	cfg.max_links = ctx->lgr_cfg.max_links;
	if (ctx->opts.no_smc) {
		ret = SMCR_CLC_FALLBACK;
		memset(&res, 0, sizeof(res));
		res.reason = SMCR_DECL_NOSMCDEV;
		res.side = SMCR_CLC_SIDE_LOCAL;
	} else if ((synopt = ctx->synopt ? smcr_synopt_peer(fd) : -ENOENT) == 0 ||
		   (server && synopt < 0 &&
		    client_speaks_tcp(fd, cfg.proposal_timeout_ms, &waited))) {
		/* RFC 7609 §3.1: no CLC unless the SYN and the SYN-ACK both
		 * carried the option.  (TCP_NODELAY above locked the socket:
		 * an accepted one has seen its established callback.) */
		ret = SMCR_CLC_FALLBACK;
		memset(&res, 0, sizeof(res));
		res.reason = SMCR_DECL_PEERNOSMC;
		res.side = SMCR_CLC_SIDE_PEER;
	} else {
		cfg.proposal_timeout_ms = waited < cfg.proposal_timeout_ms ?
					  cfg.proposal_timeout_ms - waited : 1;
		ret = server ? smcr_clc_server(fd, &clc_ops, &st, &cfg, &res) :
			       smcr_clc_client(fd, &clc_ops, &st, &cfg, &res);
	}
	pthread_mutex_lock(&ctx->lock);
	st_hold(&st, NULL);	/* a connection made counts in the group now */
	ctx->stats.connections++;
	if (ret < 0) {
		if (not_clc)
			*not_clc = ret == -EPROTO && res.peer_not_clc;
		smcr_warn("%s: CLC handshake failed: %s", server ? "accept" : "connect",
			  strerror(-ret));
		if (!server && !ctx->synopt && ret == -EPROTO)
			smcr_warn("connect: the server answered without CLC: if it runs "
				  "with the SYN option (syn-option bpf), this side needs it "
				  "too (root), or the server syn-option=off");
		goto out_free;
	}
	if (ret == SMCR_CLC_FALLBACK) {
		s->smc = false;
		s->fallback_reason = res.reason;
		s->fallback_by_peer = res.side == SMCR_CLC_SIDE_PEER;
		ctx->stats.fallbacks++;
		ctx->stats.fallback_by_reason[smcr_clc_reason_index(res.reason) %
					      SMCR_STATS_REASONS]++;
		smcr_info("%s: TCP fallback: %s (%s, 0x%08x)", server ? "accept" : "connect",
			  smcr_clc_decline_str(res.reason),
			  s->fallback_by_peer ? "peer" : "local", res.reason);
		smcr_sock_link(s);
		*sockp = s;
		pthread_mutex_unlock(&ctx->lock);
		return 0;
	}
	s->smc = true;
	s->first_contact = res.first_contact;
	smcr_sock_link(s);
	/* What arrived before there was anyone to tell (CDCs that came
	 * before the Confirm are applied as the connection is made). */
	if (smcr_conn_poll(&s->conn) & (SMCR_POLLIN | SMCR_POLLHUP | SMCR_POLLERR))
		s->conn.notify(&s->conn, s->conn.notify_arg);
	if (res.first_contact) {
		/* CONFIRM LINK must finish before data flows (§3.5.1.5). */
		struct link_wait w = { .lgr = s->lgr, .slot = 0 };

		smcr_engine_wait(ctx, link_settled, &w, ctx->opts.link_wait_ms);
		if (!s->lgr->links[0].link ||
		    s->lgr->links[0].link->state != SMCR_LINK_ACTIVE) {
			smcr_warn("%s: first link not confirmed in %u ms",
				  server ? "accept" : "connect", ctx->opts.link_wait_ms);
			smcr_lgr_terminate(s->lgr, -ETIMEDOUT);
			ret = -ETIMEDOUT;
			smcr_sock_destroy_locked(s);
			pthread_mutex_unlock(&ctx->lock);
			return ret;
		}
	}
	ctx->stats.smc_connections++;
	*sockp = s;
	pthread_mutex_unlock(&ctx->lock);
	return 0;

out_free:
	/* undo() released whatever SMC-R state the exchange had set up. */
	s->smc = false;
	smcr_sock_destroy_locked(s);
	pthread_mutex_unlock(&ctx->lock);
	return ret;
}

/* The peer of fd as "host:port" or "[v6]:port" ("?" if it has none). */
static void peer_name(int fd, char *out, size_t len)
{
	struct sockaddr_storage ss;
	socklen_t sl = sizeof(ss);
	char host[INET6_ADDRSTRLEN];

	if (getpeername(fd, (struct sockaddr *)&ss, &sl)) {
		snprintf(out, len, "?");
	} else if (ss.ss_family == AF_INET) {
		struct sockaddr_in *a = (struct sockaddr_in *)&ss;

		inet_ntop(AF_INET, &a->sin_addr, host, sizeof(host));
		snprintf(out, len, "%s:%u", host, ntohs(a->sin_port));
	} else if (ss.ss_family == AF_INET6) {
		struct sockaddr_in6 *a = (struct sockaddr_in6 *)&ss;

		inet_ntop(AF_INET6, &a->sin6_addr, host, sizeof(host));
		snprintf(out, len, "[%s]:%u", host, ntohs(a->sin6_port));
	} else {
		snprintf(out, len, "?");
	}
}

/* The handshake's lines name the peer (smcr_log_peer()): a peer that
 * reconnects with a bad Proposal can be rated per address. */
static int handshake(struct smcr_ctx *ctx, int fd, bool server, struct smcr_sock **sockp,
		     bool *not_clc)
{
	char peer[64];
	int ret;

	peer_name(fd, peer, sizeof(peer));
	smcr_log_set_peer(peer);
	ret = handshake_run(ctx, fd, server, sockp, not_clc);
	smcr_log_set_peer(NULL);
	return ret;
}

int smcr_connect_fd(struct smcr_ctx *ctx, int fd, struct smcr_sock **sockp)
{
	return handshake(ctx, fd, false, sockp, NULL);
}

int smcr_accept_fd(struct smcr_ctx *ctx, int fd, struct smcr_sock **sockp)
{
	return handshake(ctx, fd, true, sockp, NULL);
}

/* connect() on a non-blocking fd, bounded by timeout_ms. */
static int connect_bounded(int fd, const struct sockaddr *addr, socklen_t addrlen,
			   int timeout_ms)
{
	struct pollfd pfd = { .fd = fd, .events = POLLOUT };
	uint64_t end = smcr_now_ms() + (uint64_t)timeout_ms, now;
	socklen_t elen = sizeof(int);
	int err = 0, r;

	if (connect(fd, addr, addrlen) == 0)
		return 0;
	if (errno != EINPROGRESS)
		return -errno;
	do {
		now = smcr_now_ms();
		r = now >= end ? 0 : poll(&pfd, 1, (int)(end - now));
	} while (r < 0 && errno == EINTR);
	if (r == 0)
		return -ETIMEDOUT;
	if (r < 0 || getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &elen) < 0)
		return -errno;
	return -err;
}

static int connect_once(struct smcr_ctx *ctx, const struct sockaddr *addr,
			socklen_t addrlen, int timeout_ms, struct smcr_sock **sockp,
			bool *not_clc)
{
	int fd = socket(addr->sa_family, SOCK_STREAM | SOCK_CLOEXEC |
			(timeout_ms >= 0 ? SOCK_NONBLOCK : 0), 0);
	int ret;

	if (fd < 0)
		return -errno;
	if (ctx->synopt) {
		ret = smcr_synopt_mark(fd);
		if (ret) {
			smcr_warn("connect: cannot mark the socket for the SYN option: %s",
				  strerror(-ret));
			goto out_close;
		}
	}
	if (timeout_ms < 0) {
		ret = connect(fd, addr, addrlen) ? -errno : 0;
	} else {
		ret = connect_bounded(fd, addr, addrlen, timeout_ms);
		/* The handshake and the socket's users expect it blocking. */
		if (!ret && fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK))
			ret = -errno;
	}
	if (ret)
		goto out_close;
	return handshake(ctx, fd, false, sockp, not_clc);

out_close:
	close(fd);
	return ret;
}

int smcr_connect_timeout(struct smcr_ctx *ctx, const struct sockaddr *addr,
			 socklen_t addrlen, int timeout_ms, struct smcr_sock **sockp)
{
	bool not_clc = false;
	int ret = connect_once(ctx, addr, addrlen, timeout_ms, sockp, &not_clc);

	/* A server that runs CLC without the SYN option falls back to TCP
	 * when our Proposal is late (either side stalled) and speaks its
	 * protocol first; it hangs up on our Proposal.  A new connection
	 * most likely makes it in time: once. */
	if (ret == -EPROTO && not_clc) {
		smcr_warn("connect: the server spoke first, without CLC (it fell back "
			  "to TCP before our Proposal came?): connecting again");
		pthread_mutex_lock(&ctx->lock);
		ctx->stats.clc_retries++;
		pthread_mutex_unlock(&ctx->lock);
		ret = connect_once(ctx, addr, addrlen, timeout_ms, sockp, NULL);
	}
	return ret;
}

int smcr_connect(struct smcr_ctx *ctx, const struct sockaddr *addr,
		 socklen_t addrlen, struct smcr_sock **sockp)
{
	return smcr_connect_timeout(ctx, addr, addrlen, -1, sockp);
}

/* Mark a bound listener for the SYN option; *port: its port. */
static int synopt_listen(int fd, uint16_t *port)
{
	struct sockaddr_storage ss;
	socklen_t len = sizeof(ss);
	int ret;

	if (getsockname(fd, (struct sockaddr *)&ss, &len))
		return -errno;
	*port = ntohs(ss.ss_family == AF_INET6 ?
		      ((struct sockaddr_in6 *)&ss)->sin6_port :
		      ((struct sockaddr_in *)&ss)->sin_port);
	ret = smcr_synopt_listen(fd, *port);
	if (ret) {
		smcr_warn("listen: cannot mark the socket for the SYN option: %s",
			  strerror(-ret));
		*port = 0;
	}
	return ret;
}

int smcr_listen(struct smcr_ctx *ctx, const struct sockaddr *addr,
		socklen_t addrlen, int backlog, struct smcr_sock **sockp)
{
	struct smcr_sock *s;
	uint16_t port = 0;
	int fd, one = 1, ret;

	fd = socket(addr->sa_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(fd, addr, addrlen)) {
		ret = -errno;
		goto out_close;
	}
	if (ctx->synopt) {
		ret = synopt_listen(fd, &port);
		if (ret)
			goto out_close;
	}
	if (listen(fd, backlog)) {
		ret = -errno;
		goto out_unlisten;
	}
	s = smcr_sock_new(ctx, fd);
	if (!s) {
		ret = -ENOMEM;
		goto out_unlisten;
	}
	s->listener = true;
	s->synopt_port = port;
	pthread_mutex_lock(&ctx->lock);
	smcr_sock_link(s);
	pthread_mutex_unlock(&ctx->lock);
	*sockp = s;
	return 0;

out_unlisten:
	if (port)
		smcr_synopt_unlisten(port);
out_close:
	close(fd);
	return ret;
}

int smcr_accept(struct smcr_sock *listener, struct smcr_sock **sockp)
{
	int fd;

	do {
		fd = accept4(listener->fd, NULL, NULL, SOCK_CLOEXEC);
	} while (fd < 0 && errno == EINTR);
	if (fd < 0)
		return -errno;
	return smcr_accept_fd(listener->ctx, fd, sockp);
}

int smcr_listen_fd(struct smcr_sock *listener)
{
	return listener->fd;
}
