/* SPDX-License-Identifier: BSD-3-Clause */
/* smcrbd: the engine under the context (ctx.c): devices, link groups over
 * verbs links, the progress thread (completion channels, async events,
 * timers). */
#include <config.h>

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <linux/neighbour.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <sys/socket.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/random.h>
#include <sys/timerfd.h>

#include "engine.h"
#include "monotime.h"
#include "synopt.h"
#include "log.h"

enum { SRC_WAKE = 1, SRC_TIMER, SRC_CHAN, SRC_ASYNC, SRC_LINK };

uint64_t smcr_now_ms(void)
{
	return (uint64_t)now_ms();
}

static struct smcr_ctx *lgr_ctx(struct smcr_lgr *lgr)
{
	return lgr->owner;
}

static void wake_thread(struct smcr_ctx *ctx)
{
	uint64_t one = 1;

	if (write(ctx->wakefd, &one, sizeof(one)) < 0 && errno != EAGAIN)
		smcr_warn("engine: cannot wake the progress thread: %s", strerror(errno));
}

/* ---- devices ------------------------------------------------------------- */

static bool dev_polled(struct smcr_ctx *ctx, struct smcr_dev *dev, int *count)
{
	int i;

	*count = 0;
	for (i = 0; i < ctx->nports; i++) {
		if (ctx->ports[i].dev == dev)
			(*count)++;
	}
	return *count > 1;
}

static void ep_del(struct smcr_ctx *ctx, int fd)
{
	if (epoll_ctl(ctx->epfd, EPOLL_CTL_DEL, fd, NULL) && errno != ENOENT)
		smcr_dbg("engine: epoll_ctl DEL: %s", strerror(errno));
}

/* A verbs link's own completion channel (caller-driven progress).  Not
 * watched is out of the set: with events 0 (EPOLL_CTL_MOD) epoll still
 * wakes the thread for every event on the channel (it adds EPOLLERR and
 * EPOLLHUP, and the channel's wake-up names no events), only to find
 * nothing to report: one sleep per completion event for nothing. */
static void link_chan_watch(int fd, uint64_t id, int op, void *arg)
{
	struct smcr_ctx *ctx = arg;
	struct epoll_event ev = { .events = EPOLLIN, .data.u64 = id << 3 | SRC_LINK };
	int ret;

	if (op == SMCR_CHAN_DEL || op == SMCR_CHAN_OFF) {
		ret = epoll_ctl(ctx->epfd, EPOLL_CTL_DEL, fd, NULL);
		if (ret && errno == ENOENT)
			ret = 0;
	} else {
		ret = epoll_ctl(ctx->epfd, EPOLL_CTL_ADD, fd, &ev);
		if (ret && errno == EEXIST)
			ret = 0;
	}
	if (ret)
		smcr_warn("engine: epoll_ctl on a link's channel: %s", strerror(errno));
}

/* Caller-driven progress: send completions raise events only when asked
 * for; ask for the links whose connections wait for one. */
static void links_want_send_done(struct smcr_ctx *ctx)
{
	struct smcr_lgr *lgr;
	unsigned int i;

	for (lgr = ctx->lgrs; lgr; lgr = lgr->next)
		for (i = 0; i < lgr->conns_end; i++) {
			struct smcr_conn *c = lgr->conns[i];

			if (c && c->link && c->link->ops->want_send_done &&
			    smcr_conn_wants_tx_done(c))
				c->link->ops->want_send_done(c->link);
		}
}

static int ep_add(struct smcr_ctx *ctx, int fd, uint32_t kind, void *ptr)
{
	struct epoll_event ev = { .events = EPOLLIN };
	int fl = fcntl(fd, F_GETFL);

	if (fl >= 0)
		fcntl(fd, F_SETFL, fl | O_NONBLOCK);
	/* Tag in the low bits of an aligned pointer (or the kind alone). */
	ev.data.u64 = (uint64_t)(uintptr_t)ptr | kind;
	if (epoll_ctl(ctx->epfd, EPOLL_CTL_ADD, fd, &ev) && errno != EEXIST)
		return -errno;
	return 0;
}

/* Ports keep their slot for life (a handshake in progress may hold a
 * pointer to one); a port whose device went away leaves a free slot
 * (dev NULL) that a new port takes. */
static int port_add(struct smcr_ctx *ctx, const struct smcr_port_ref *ref,
		    struct smcr_port_ref **slotp)
{
	int n, i, ret;

	for (i = 0; i < ctx->nports; i++)
		if (!ctx->ports[i].dev)
			break;
	if (i == ctx->nports) {
		if (ctx->nports >= SMCR_MAX_PORTS)
			return -ENOSPC;
		ctx->nports++;
	}
	ctx->ports[i] = *ref;
	if (slotp)
		*slotp = &ctx->ports[i];
	if (dev_polled(ctx, ref->dev, &n))
		return 0;
	ret = ep_add(ctx, ref->dev->chan->fd, SRC_CHAN, ref->dev);
	if (!ret)
		ret = ep_add(ctx, ref->dev->ctx->async_fd, SRC_ASYNC, ref->dev);
	if (ret)
		smcr_warn("engine: cannot watch device %s: %s", ref->dev->name,
			  strerror(-ret));
	smcr_info("engine: RDMA port %s:%u (%s) available", ref->dev->name,
		  ref->port, ref->netdev[0] ? ref->netdev : "no netdev");
	return ret;
}

static bool port_known(struct smcr_ctx *ctx, const struct smcr_port_ref *ref)
{
	int i;

	/* A port with several addresses may have an entry per GID in use
	 * (smcr_engine_port_for()). */
	for (i = 0; i < ctx->nports; i++)
		if (ctx->ports[i].dev && ctx->ports[i].dev == ref->dev &&
		    ctx->ports[i].port == ref->port &&
		    !memcmp(ctx->ports[i].gid, ref->gid, SMCR_GID_LEN))
			return true;
	return false;
}

/* A port of ours on the device "name[:port]" that is still there. */
static bool dev_of_port_named(struct smcr_ctx *ctx, const char *spec)
{
	size_t len = strcspn(spec, ":");
	int i;

	for (i = 0; i < ctx->nports; i++)
		if (ctx->ports[i].dev && !ctx->ports[i].dev->gone &&
		    strlen(ctx->ports[i].dev->name) == len &&
		    !strncmp(ctx->ports[i].dev->name, spec, len))
			return true;
	return false;
}

/* Look for ports that appeared (a device added, a port up). */
static void ports_rescan(struct smcr_ctx *ctx)
{
	struct smcr_port_ref found[SMCR_MAX_PORTS];
	int i, n;

	uint64_t t0 = smcr_now_ms();

	if (ctx->opts.no_smc)
		return;
	ctx->last_rescan_ms = t0;
	if (ctx->opts.devices) {
		/* Named devices: those that went away may be back. */
		char buf[256], *tok, *save = NULL;

		snprintf(buf, sizeof(buf), "%s", ctx->opts.devices);
		for (tok = strtok_r(buf, ",", &save); tok;
		     tok = strtok_r(NULL, ",", &save)) {
			struct smcr_port_ref ref;

			if (dev_of_port_named(ctx, tok) ||
			    smcr_dev_resolve_name(&ctx->devs, tok, &ref))
				continue;
			if (port_add(ctx, &ref, NULL))
				smcr_dev_put(&ctx->devs, &ref);
		}
	} else {
		/* Only devices we have no port of are looked at closely: a
		 * GID table walk costs (rxe's has 1024 entries). */
		struct ibv_device **list = ibv_get_device_list(&n);
		int d;

		for (d = 0; list && d < n; d++) {
			const char *name = ibv_get_device_name(list[d]);
			int k;

			if (dev_of_port_named(ctx, name))
				continue;
			k = smcr_dev_list_ports_of(&ctx->devs, name, found,
						   SMCR_MAX_PORTS);
			for (i = 0; i < k; i++) {
				if (port_known(ctx, &found[i]) ||
				    port_add(ctx, &found[i], NULL))
					smcr_dev_put(&ctx->devs, &found[i]);
			}
		}
		if (list)
			ibv_free_device_list(list);
	}
	for (i = 0; i < ctx->nports; i++)
		if (ctx->ports[i].dev)
			smcr_port_refresh(&ctx->ports[i]);
	ctx->last_rescan_ms = smcr_now_ms();
	if (ctx->last_rescan_ms - t0 >= 100)
		smcr_info("engine: looking for RDMA ports took %llu ms",
			  (unsigned long long)(ctx->last_rescan_ms - t0));
}

/* A device is gone (removed, or a fatal error): its links go down and
 * their connections move, then everything of ours on it is given back so
 * that the device can close (a removal may wait for that, see
 * smcr_dev_present()).  A device added again under the same name is a new
 * device to us (ports_rescan). */
static void dev_lost(struct smcr_ctx *ctx, struct smcr_dev *dev)
{
	struct smcr_lgr *lgr;
	char name[sizeof(dev->name)];
	int i, n;

	snprintf(name, sizeof(name), "%s", dev->name);
	smcr_warn("engine: RDMA device %s is gone", name);
	dev->gone = true;
	ctx->devices_lost++;
	/* No new link may pick it while its links fail over. */
	for (i = 0; i < ctx->nports; i++)
		if (ctx->ports[i].dev == dev)
			ctx->ports[i].up = false;
	ep_del(ctx, dev->chan->fd);
	ep_del(ctx, dev->ctx->async_fd);
	n = smcr_vlink_dev_gone(&ctx->vlinks, dev);
	for (lgr = ctx->lgrs; lgr; lgr = lgr->next) {
		for (i = 0; i < SMCR_RMB_MAX_DEVS; i++) {
			struct smcr_pd *pd = lgr->pds[i];

			if (!pd || pd->dev != dev)
				continue;
			smcr_rmb_pool_dereg(&lgr->rmbs, pd);
			smcr_rmb_pool_dereg(&lgr->sndbufs, pd);
			lgr->pds[i] = NULL;
			smcr_pd_put(pd);
		}
	}
	for (i = 0; i < ctx->nports; i++)
		if (ctx->ports[i].dev == dev)
			smcr_dev_put(&ctx->devs, &ctx->ports[i]);
	/* dev may be closed now. */
	smcr_info("engine: released %s (%d link(s))", name, n);
}

/* Devices that disappeared (checked every tick: a removal may not raise
 * any event), or that reported a fatal error. */
static void devs_check(struct smcr_ctx *ctx)
{
	int i;

	for (i = 0; i < ctx->nports; i++) {
		struct smcr_dev *dev = ctx->ports[i].dev;

		if (dev && !smcr_dev_present(dev)) {
			dev_lost(ctx, dev);
			i = -1;		/* the port table changed */
		}
	}
}

struct smcr_port_ref *smcr_engine_port_for(struct smcr_ctx *ctx,
					   const struct sockaddr *local)
{
	uint8_t gid[SMCR_GID_LEN];
	struct smcr_port_ref ref;
	int i;

	if (smcr_gid_from_addr(local, gid))
		return NULL;
	struct smcr_port_ref *slot;

	for (i = 0; i < ctx->nports; i++)
		if (ctx->ports[i].dev && ctx->ports[i].up &&
		    memcmp(ctx->ports[i].gid, gid, SMCR_GID_LEN) == 0)
			return &ctx->ports[i];
	/* A port we have not seen yet (e.g. rxe added after start). */
	if (ctx->opts.devices || smcr_dev_resolve_addr(&ctx->devs, local, &ref))
		return NULL;
	if (port_known(ctx, &ref) || port_add(ctx, &ref, &slot)) {
		smcr_dev_put(&ctx->devs, &ref);
		return NULL;
	}
	return slot;
}

/* ---- link group ops over verbs links -------------------------------------- */

/* A link that failed is on its way out: its port is free again. */
static bool port_in_lgr(struct smcr_lgr *lgr, const struct smcr_port_ref *p)
{
	unsigned int i;

	for (i = 0; i < SMCR_LINK_SLOTS; i++)
		if (lgr->links[i].link && !lgr->links[i].down &&
		    lgr->links[i].link->state != SMCR_LINK_FAILED &&
		    memcmp(lgr->links[i].local.gid, p->gid, SMCR_GID_LEN) == 0)
			return true;
	return false;
}

/* Same IPv4 /24 (or IPv6 /64) as the peer's GID: likely the same LAN. */
static bool same_lan(const uint8_t *a, const uint8_t *b)
{
	static const uint8_t v4[12] = { [10] = 0xff, [11] = 0xff };

	if (memcmp(a, v4, 12) == 0 && memcmp(b, v4, 12) == 0)
		return memcmp(a + 12, b + 12, 3) == 0;
	return memcmp(a, b, 8) == 0;
}

/* The group's protection domain on dev, allocated on first use.  One per
 * group and device, not per link as in Linux: the peer is the boundary (a
 * group's links all lead to it and share its RMBs anyway), an RMB is
 * registered once per device instead of once per link, and a link added
 * again on a device after a failover finds the RMBs registered and their
 * rkeys unchanged. */
static int lgr_pd(struct smcr_lgr *lgr, struct smcr_dev *dev,
		  struct smcr_pd **pdp)
{
	int i, free_slot = -1, ret;

	for (i = 0; i < SMCR_RMB_MAX_DEVS; i++) {
		if (lgr->pds[i] && lgr->pds[i]->dev == dev) {
			*pdp = lgr->pds[i];
			return 0;
		}
		if (!lgr->pds[i] && free_slot < 0)
			free_slot = i;
	}
	if (free_slot < 0)
		return -ENOSPC;
	ret = smcr_pd_alloc(dev, &lgr->pds[free_slot]);
	if (ret)
		return ret;
	*pdp = lgr->pds[free_slot];
	return 0;
}

int smcr_engine_link_on(struct smcr_ctx *ctx, struct smcr_lgr *lgr,
			struct smcr_port_ref *port, struct smcr_link **linkp,
			struct smcr_link_info *local)
{
	struct smcr_vlink_attr attr = { .sq_depth = 256, .rq_depth = 128,
					.timing = &ctx->qp_timing };
	struct smcr_qp_peer q;
	struct smcr_pd *pd;
	int ret;

	ret = lgr_pd(lgr, port->dev, &pd);
	if (ret)
		return ret;
	ret = smcr_vlink_create(&ctx->vlinks, port, pd, &attr,
				&smcr_lgr_link_handler, lgr, linkp);
	if (ret)
		return ret;
	smcr_vlink_local(*linkp, &q);
	memset(local, 0, sizeof(*local));
	memcpy(local->gid, q.gid, SMCR_GID_LEN);
	memcpy(local->mac, port->mac, SMCR_MAC_LEN);
	local->qpn = q.qpn;
	local->psn = q.psn;
	local->mtu = (uint8_t)q.mtu;
	return 0;
}

/* The client learns the server's end (peer) and only takes a port on the
 * same subnet (SMC-R does not route).  The server picks first (peer NULL):
 * a port the group does not use yet; for an asymmetric link one it does,
 * with another of its addresses if it has one. */
static int op_link_create(struct smcr_lgr *lgr, const struct smcr_link_info *peer,
			  bool asym, struct smcr_link **linkp,
			  struct smcr_link_info *local)
{
	struct smcr_ctx *ctx = lgr_ctx(lgr);
	struct smcr_port_ref *pick = NULL, alt;
	uint8_t used[SMCR_LINK_SLOTS * SMCR_GID_LEN];
	bool rescanned = false;
	unsigned int n = 0;
	int i;

again:
	for (i = 0; i < ctx->nports; i++) {
		struct smcr_port_ref *p = &ctx->ports[i];

		if (!p->dev || !p->up || port_in_lgr(lgr, p))
			continue;
		if (peer && !smcr_port_reaches(p, peer->gid))
			continue;
		if (!pick || (peer && same_lan(p->gid, peer->gid)))
			pick = p;
	}
	/* A device added since the last look (e.g. re-added after a removal)
	 * makes a symmetric link: look before settling for less. */
	if (!pick && !rescanned && !asym &&
	    smcr_now_ms() - ctx->last_rescan_ms >= 200) {
		rescanned = true;
		ports_rescan(ctx);
		goto again;
	}
	if (!pick && asym) {
		for (i = 0; i < ctx->nports && !pick; i++) {
			struct smcr_port_ref *p = &ctx->ports[i];

			if (p->dev && p->up && (!peer || smcr_port_reaches(p, peer->gid)))
				pick = p;
		}
		if (pick) {
			for (i = 0; i < SMCR_LINK_SLOTS; i++)
				if (lgr->links[i].link && !lgr->links[i].down)
					memcpy(used + SMCR_GID_LEN * n++,
					       lgr->links[i].local.gid, SMCR_GID_LEN);
			if (smcr_port_other_gid(pick, used, n, &alt) == 0)
				pick = &alt;
		}
	}
	if (!pick)
		return -ENODEV;
	return smcr_engine_link_on(ctx, lgr, pick, linkp, local);
}

/* Is the peer's address in gid (IPv4-mapped or IPv6) a resolved
 * neighbour on ifindex, the netdev of the link's local GID (with two NICs
 * on one subnet the route's first one is not it)?  If not, a datagram to
 * it out of that netdev starts the resolution.  (modify_qp
 * to RTR resolves the peer's MAC itself, waiting up to a second, under our
 * lock: seen on rxe when a link was re-added while the peer's end was still
 * down.)  A peer that answers does so within NEIGH_WAIT_MS: we wait that
 * long (a v2 ADD LINK that fails here is not retried for a minute, and
 * Linux's server retries only on a port event); otherwise the exchange
 * that wanted the link is retried.  Link-local IPv6 (no scope known here)
 * and no netlink: true. */
#define NEIGH_WAIT_MS 200
static bool neigh_ready(const uint8_t gid[SMCR_GID_LEN], unsigned int ifindex)
{
	static const uint8_t v4[12] = { [10] = 0xff, [11] = 0xff };
	char want[INET6_ADDRSTRLEN];
	int i;

	if (smcr_gid_resolved(gid, ifindex, true))
		return true;
	if (!memcmp(gid, v4, sizeof(v4)))
		inet_ntop(AF_INET, gid + 12, want, sizeof(want));
	else
		inet_ntop(AF_INET6, gid, want, sizeof(want));
	for (i = 0; i < NEIGH_WAIT_MS / 5; i++) {
		usleep(5000);
		if (smcr_gid_resolved(gid, ifindex, false)) {
			smcr_dbg("engine: %s resolved after %d ms", want, 5 * (i + 1));
			return true;
		}
	}
	smcr_info("engine: %s is not resolved after %d ms: link not connected now",
		  want, NEIGH_WAIT_MS);
	return false;
}

static int op_link_connect(struct smcr_lgr *lgr, struct smcr_link *link,
			   const struct smcr_link_info *peer)
{
	struct smcr_qp_peer q = {
		.qpn = peer->qpn,
		.psn = peer->psn,
		.mtu = (enum ibv_mtu)peer->mtu,
	};

	memcpy(q.gid, peer->gid, SMCR_GID_LEN);
	if (!smcr_mtu_valid(peer->mtu))
		q.mtu = IBV_MTU_1024;
	/* Links added by LLC (in a slot already); the first one follows a
	 * TCP connection to the same address. */
	if (smcr_lgr_slot(lgr, link) >= 0 && !neigh_ready(peer->gid, smcr_vlink_ifindex(link)))
		return -EAGAIN;
	return smcr_vlink_connect(link, &q);
}

static void op_link_destroy(struct smcr_lgr *lgr, struct smcr_link *link)
{
	struct smcr_ctx *ctx = lgr_ctx(lgr);

	/* Never from inside an upcall: the progress thread reaps it.  Until
	 * then it gets no upcall: a port error or a completion for it would
	 * reach a group that let it go (lgr_down() with no group: SIGSEGV in
	 * the soak, a port error right after a failed ADD LINK). */
	link->handler = NULL;
	link->handler_arg = NULL;
	if (ctx->ngrave < sizeof(ctx->graveyard) / sizeof(ctx->graveyard[0])) {
		ctx->graveyard[ctx->ngrave++] = link;
		wake_thread(ctx);
	} else {
		smcr_err("engine: too many links to reap; leaking one");
	}
}

static int op_rmb_reg(struct smcr_lgr *lgr, struct smcr_rmb *rmb,
		      struct smcr_link *link, uint32_t *rkey, uint64_t *vaddr)
{
	int ret;

	(void)lgr;
	if (!link->dev || !link->pd)
		return -ENODEV;
	ret = smcr_rmb_reg(rmb, link->pd);
	if (ret)
		return ret;
	*rkey = smcr_rmb_rkey(rmb, link->pd);
	*vaddr = (uint64_t)(uintptr_t)rmb->buf;
	smcr_dbg("engine: %s %u on %s: rkey %08x vaddr %llx len %zu",
		 rmb->local_only ? "send buffer" : "RMB", rmb->id,
		 link->dev->name, *rkey, (unsigned long long)*vaddr, rmb->len);
	return 0;
}

static void op_event(struct smcr_lgr *lgr, enum smcr_lgr_event ev,
		     struct smcr_link *link, int status)
{
	struct smcr_ctx *ctx = lgr_ctx(lgr);
	struct smcr_sock *s;

	(void)link;
	(void)status;
	pthread_cond_broadcast(&ctx->lgr_cond);
	if (ev == SMCR_LGR_TERMINATED || ev == SMCR_LGR_LINK_DOWN) {
		for (s = ctx->socks; s; s = s->next) {
			if (s->lgr != lgr)
				continue;
			pthread_cond_broadcast(&s->cond);
			if (s->evfd >= 0) {
				uint64_t one = 1;

				if (write(s->evfd, &one, sizeof(one)) < 0)
					smcr_dbg("engine: eventfd: %s", strerror(errno));
			}
		}
	}
}

static uint64_t op_now(struct smcr_lgr *lgr)
{
	(void)lgr;
	return smcr_now_ms();
}

/* An SMC connection whose TCP socket the peer could end without telling
 * SMC first: Linux shuts its CLC socket down only after its close, abort
 * or shutdown CDC; libsmcr closes it after the close exchange. */
static bool tcp_watched(const struct smcr_sock *s)
{
	return s->smc && !s->listener && s->fd >= 0 && s->lgr && !s->lgr->terminated &&
	       s->conn.link && !s->conn.peer_done && !s->conn.peer_closed && !s->conn.peer_aborted &&
	       !s->conn.error;
}

/* A connection of the group whose TCP socket the peer's kernel ended
 * (FIN or RST) while SMC had no close or abort from the peer: its
 * process died.  A stopped or cut-off peer leaves TCP silent. */
static bool op_peer_gone(struct smcr_lgr *lgr)
{
	struct smcr_ctx *ctx = lgr_ctx(lgr);
	struct smcr_sock *s;

	for (s = ctx->socks; s; s = s->next) {
		struct pollfd p = { .events = POLLRDHUP };

		if (s->lgr != lgr)
			continue;
		if (s->peer_gone)
			return true;
		if (s->tcp_end_judged || !tcp_watched(s))
			continue;
		if (s->tcp_end_ms)
			return true;
		p.fd = s->fd;
		if (poll(&p, 1, 0) == 1 && (p.revents & (POLLRDHUP | POLLHUP | POLLERR))) {
			smcr_info("engine: TCP of a connection ended by the peer: its process is gone");
			return true;
		}
	}
	return false;
}

/* A watched connection whose TCP ended at s->tcp_end_ms: kept once the
 * peer answers a TEST LINK sent since, reset when the grace is over
 * without.  Anything else read on the links says nothing: a killed
 * peer's last CDCs may be taken from the CQ after its FIN.  A link whose
 * probe from before the FIN is still out is probed again once that one
 * is answered. */
static void tcp_end_judge(struct smcr_sock *s, uint64_t now)
{
	uint64_t waited = now > s->tcp_end_ms ? now - s->tcp_end_ms : 0;

	if (smcr_lgr_answered_since(s->lgr, s->tcp_end_ms)) {
		s->tcp_end_judged = true;
		smcr_info("connection %u: the peer ended its TCP connection, but answers on its links: kept",
			  s->conn.token);
		return;
	}
	if (waited >= SMCR_TCP_END_GRACE_MS) {
		s->tcp_end_judged = true;
		s->peer_gone = true;
		smcr_warn("connection %u: the peer ended its TCP connection %llu ms ago with no SMC close and has answered no TEST LINK since: its process is gone, connection reset",
			  s->conn.token, (unsigned long long)waited);
		smcr_conn_abort(&s->conn, -ECONNRESET);
		return;
	}
	smcr_llc_probe_links(s->lgr);
}

#define TCP_ENDS_BATCH 32

void smcr_engine_tcp_ends(struct smcr_ctx *ctx, uint64_t now)
{
	struct smcr_sock *s, *batch[TCP_ENDS_BATCH];
	struct pollfd p[TCP_ENDS_BATCH];
	unsigned int n = 0, i;

	if (!now)
		now = 1;
	for (s = ctx->socks; s || n; s = s ? s->next : NULL) {
		if (s && !s->tcp_end_judged && tcp_watched(s)) {
			if (s->tcp_end_ms) {
				tcp_end_judge(s, now);
				continue;
			}
			batch[n] = s;
			p[n] = (struct pollfd){ .fd = s->fd, .events = POLLRDHUP };
			n++;
		}
		if (n < TCP_ENDS_BATCH && s)
			continue;
		if (n && poll(p, n, 0) > 0)
			for (i = 0; i < n; i++) {
				if (!(p[i].revents & (POLLRDHUP | POLLHUP | POLLERR)))
					continue;
				batch[i]->tcp_end_ms = now;
				smcr_info("connection %u: the peer ended its TCP connection with no SMC close: probing its links",
					  batch[i]->conn.token);
				smcr_llc_probe_links(batch[i]->lgr);
			}
		n = 0;
		if (!s)
			break;
	}
}

const struct smcr_lgr_ops smcr_engine_lgr_ops = {
	.link_create = op_link_create,
	.link_connect = op_link_connect,
	.link_destroy = op_link_destroy,
	.rmb_reg = op_rmb_reg,
	.event = op_event,
	.now_ms = op_now,
	.peer_gone = op_peer_gone,
};

/* As Linux's smcr_lgr_match(): the peer ID and our role, and an active
 * link whose peer has this GID and MAC (and, for a client, the server's
 * QP of the Accept).  A peer ID alone is the peer's to choose. */
struct smcr_lgr *smcr_engine_lgr_find(struct smcr_ctx *ctx, enum smcr_role role,
				      const uint8_t peer_id[8], const uint8_t *gid,
				      const uint8_t *mac, uint32_t qpn)
{
	struct smcr_lgr *lgr;
	unsigned int i;

	for (lgr = ctx->lgrs; lgr; lgr = lgr->next) {
		if (lgr->role != role || lgr->terminated ||
		    memcmp(lgr->peer_id, peer_id, 8) != 0)
			continue;
		/* SMC-Rv2.1: a full server group takes no more (Linux's
		 * smc_conn_create: conns_num < max_conns); a new one is made */
		if (role == SMCR_ROLE_SERVER && smcr_lgr_full(lgr))
			continue;
		for (i = 0; i < SMCR_LINK_SLOTS; i++) {
			const struct smcr_lgr_link *l = &lgr->links[i];

			if (l->link && l->link->state == SMCR_LINK_ACTIVE &&
			    memcmp(l->peer.gid, gid, SMCR_GID_LEN) == 0 &&
			    (!mac || memcmp(l->peer.mac, mac, SMCR_MAC_LEN) == 0) &&
			    (role == SMCR_ROLE_SERVER || l->peer.qpn == qpn))
				return lgr;
		}
	}
	return NULL;
}

/* The TCP peer of fd as 16 bytes, IPv4 mapped into IPv6; false if unknown. */
static bool peer_addr16(int fd, uint8_t out[16])
{
	struct sockaddr_storage ss;
	socklen_t len = sizeof(ss);

	memset(out, 0, 16);
	if (getpeername(fd, (struct sockaddr *)&ss, &len))
		return false;
	if (ss.ss_family == AF_INET6) {
		memcpy(out, &((struct sockaddr_in6 *)&ss)->sin6_addr, 16);
		return true;
	}
	if (ss.ss_family != AF_INET)
		return false;
	out[10] = out[11] = 0xff;
	memcpy(out + 12, &((struct sockaddr_in *)&ss)->sin_addr, 4);
	return true;
}

uint32_t smcr_engine_lgr_admit(struct smcr_ctx *ctx, int fd, uint8_t addr[16])
{
	char text[INET6_ADDRSTRLEN];
	const struct smcr_lgr *lgr;
	unsigned int n = 0;
	uint64_t now;

	if (!peer_addr16(fd, addr) || !ctx->max_lgrs_per_address)
		return 0;
	for (lgr = ctx->lgrs; lgr; lgr = lgr->next)
		if (lgr->role == SMCR_ROLE_SERVER && !lgr->terminated &&
		    memcmp(lgr->peer_addr, addr, 16) == 0)
			n++;
	if (n < ctx->max_lgrs_per_address)
		return 0;
	ctx->stats.lgrs_refused_per_address++;
	now = smcr_now_ms();
	if (ctx->lgr_limit_logged_ms && now - ctx->lgr_limit_logged_ms < SMCR_LIMIT_LOG_MS) {
		ctx->lgr_limit_unlogged++;
		return SMCR_DECL_MEM;
	}
	if (!inet_ntop(AF_INET6, addr, text, sizeof(text)))
		snprintf(text, sizeof(text), "?");
	smcr_warn("accept: %u link groups from %s (limit per address): declined, TCP "
		  "(%lu more like this not logged)", n, text, ctx->lgr_limit_unlogged);
	ctx->lgr_limit_logged_ms = now;
	ctx->lgr_limit_unlogged = 0;
	return SMCR_DECL_MEM;
}

int smcr_engine_wait(struct smcr_ctx *ctx, bool (*pred)(void *arg), void *arg,
		     unsigned int timeout_ms)
{
	struct timespec ts;
	int ret = 0;

	deadline_after_ms(CLOCK_MONOTONIC, timeout_ms, &ts);
	while (!pred(arg) && ret == 0)
		ret = pthread_cond_timedwait(&ctx->lgr_cond, &ctx->lock, &ts);
	return pred(arg) ? 0 : -ETIMEDOUT;
}

/* ---- the reaper thread ----------------------------------------------------- */

/* ctx->lock held (smcr_vlink_destroy or a released link). */
static void vlink_reaper(struct smcr_vlink_res *res, void *arg)
{
	struct smcr_ctx *ctx = arg;
	struct smcr_reap_item *it, **pp;

	it = ctx->reaper_running && !ctx->reaper_stop ? calloc(1, sizeof(*it)) : NULL;
	if (!it) {
		smcr_vlink_res_free(res);
		return;
	}
	it->res = res;
	it->ref.dev = smcr_vlink_res_dev(res);
	smcr_dev_get(&it->ref);
	for (pp = &ctx->reap_head; *pp; pp = &(*pp)->next)
		;
	*pp = it;
	pthread_cond_signal(&ctx->reap_cond);
}

static void *reaper(void *arg)
{
	struct smcr_ctx *ctx = arg;

	pthread_mutex_lock(&ctx->lock);
	for (;;) {
		struct smcr_reap_item *it;
		uint64_t t0;

		while (!ctx->reap_head && !ctx->reaper_stop)
			pthread_cond_wait(&ctx->reap_cond, &ctx->lock);
		it = ctx->reap_head;
		if (!it)
			break;
		ctx->reap_head = it->next;
		pthread_mutex_unlock(&ctx->lock);
		t0 = smcr_now_ms();
		smcr_vlink_res_free(it->res);
		if (smcr_now_ms() - t0 >= 500)
			smcr_dbg("engine: destroying a link's QP took %llu ms",
				 (unsigned long long)(smcr_now_ms() - t0));
		pthread_mutex_lock(&ctx->lock);
		/* The last reference of a device that is gone closes it. */
		smcr_dev_put(&ctx->devs, &it->ref);
		free(it);
	}
	pthread_mutex_unlock(&ctx->lock);
	return NULL;
}

/* ---- the progress thread -------------------------------------------------- */

static void port_event(struct smcr_dev *dev, uint8_t port,
		       enum ibv_event_type event, void *arg)
{
	struct smcr_ctx *ctx = arg;
	struct smcr_lgr *lgr;
	int i;

	if (event == IBV_EVENT_DEVICE_FATAL) {
		/* Its links are down already; the device is released once
		 * its event queue has been drained (devs_check()). */
		dev->gone = true;
		ctx->dev_check_due = true;
		return;
	}
	for (i = 0; i < ctx->nports; i++)
		if (ctx->ports[i].dev == dev && ctx->ports[i].port == port)
			smcr_port_refresh(&ctx->ports[i]);
	if (event != IBV_EVENT_PORT_ACTIVE)
		return;
	smcr_info("engine: %s:%u is active again", dev->name, port);
	for (lgr = ctx->lgrs; lgr; lgr = lgr->next)
		if (!lgr->terminated && smcr_lgr_active_links(lgr) < lgr->max_links)
			smcr_lgr_add_link(lgr);
}

static void lgr_stats_add(struct smcr_stats *st, const struct smcr_lgr *lgr)
{
	st->links_added += lgr->stats.links_added;
	st->links_deleted += lgr->stats.links_deleted;
	st->link_failures += lgr->stats.link_failures;
	st->failovers += lgr->stats.failovers;
	st->llc_sent += lgr->stats.llc_sent;
	st->llc_recv += lgr->stats.llc_recv;
	st->rkeys_confirmed += lgr->stats.rkeys_confirmed;
	st->test_links += lgr->stats.test_links;
	st->rebalanced += lgr->stats.rebalanced;
	st->local_stalls += lgr->stats.stalls;
	st->local_stall_ms += lgr->stats.stall_ms;
	st->add_links_refused_max += lgr->stats.add_links_refused_max;
}

/* ---- the progress thread: reaping, the timer tick, the loop -------------- */

void smcr_engine_set_tick(struct smcr_ctx *ctx, uint32_t ms)
{
	struct itimerspec its = {
		.it_interval = { .tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000L },
		.it_value = { .tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000L },
	};

	if (ctx->tick_ms == ms || ctx->timerfd < 0)
		return;
	if (timerfd_settime(ctx->timerfd, 0, &its, NULL) == 0)
		ctx->tick_ms = ms;
}

static void reap(struct smcr_ctx *ctx)
{
	struct smcr_lgr **pp;

	while (ctx->ngrave)
		smcr_vlink_destroy(ctx->graveyard[--ctx->ngrave]);
	/* Dead groups nobody uses any more. */
	for (pp = &ctx->lgrs; *pp;) {
		struct smcr_lgr *lgr = *pp;

		if (lgr->terminated && lgr->nconns == 0 && lgr->setups == 0) {
			*pp = lgr->next;
			lgr_stats_add(&ctx->stats, lgr);
			smcr_lgr_destroy(lgr);
			while (ctx->ngrave)
				smcr_vlink_destroy(ctx->graveyard[--ctx->ngrave]);
			continue;
		}
		pp = &lgr->next;
	}
}

/* How often a group short of links looks for ports. */
#define SMCR_RESCAN_MS 1000

static void tick(struct smcr_ctx *ctx)
{
	struct smcr_lgr *lgr;
	uint64_t now = smcr_now_ms();
	bool short_of_links = false;
	unsigned int i;

	for (lgr = ctx->lgrs; lgr; lgr = lgr->next) {
		if (lgr->terminated)
			continue;
		smcr_lgr_tick(lgr);
		if (smcr_lgr_active_links(lgr) < lgr->max_links)
			short_of_links = true;
	}
	/* A group without all its links looks for ports every second (a
	 * device re-added, a cable back) and the server tries to add one. */
	if (short_of_links && now - ctx->last_rescan_ms >= SMCR_RESCAN_MS) {
		ports_rescan(ctx);
		for (lgr = ctx->lgrs; lgr; lgr = lgr->next)
			if (!lgr->terminated && lgr->role == SMCR_ROLE_SERVER &&
			    smcr_lgr_active_links(lgr) > 0 &&
			    smcr_lgr_active_links(lgr) < lgr->max_links &&
			    lgr->flow.kind == SMCR_FLOW_NONE &&
			    now >= lgr->add_link_after_ms)
				smcr_lgr_add_link(lgr);
	}
	smcr_engine_tcp_ends(ctx, now);
	if (ctx->nfaults)
		smcr_engine_faults_tick(ctx, now);
	/* Caller-driven progress: send completions nobody asked an event
	 * for are taken at least this often, and so is what waits on a
	 * channel that applications hold (smcr_sock_fd) but none reads. */
	if (ctx->caller_poll)
		for (lgr = ctx->lgrs; lgr; lgr = lgr->next)
			for (i = 0; i < SMCR_LINK_SLOTS; i++) {
				struct smcr_link *l = lgr->links[i].link;

				if (!l || !l->dev)
					continue;
				if (smcr_vlink_fd_held(l))
					smcr_vlink_serve(l, false);
				else
					smcr_vlink_poll(l);
			}
	/* Links under a drop or delay fault post what is due. */
	if (ctx->tick_ms != SMCR_LGR_TICK_MS) {
		bool held = false;

		for (lgr = ctx->lgrs; lgr; lgr = lgr->next)
			for (i = 0; i < SMCR_LINK_SLOTS; i++)
				if (lgr->links[i].link && lgr->links[i].link->dev &&
				    smcr_vlink_fault_tick(lgr->links[i].link))
					held = true;
		if (!held)
			smcr_engine_set_tick(ctx, SMCR_LGR_TICK_MS);
	}
}

static uint64_t thread_cpu_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

static void *progress(void *arg)
{
	struct smcr_ctx *ctx = arg;
	struct epoll_event evs[16];
	uint64_t t0, t1, cpu0, spent[5];
	bool ticked;
	int n, i;

	for (;;) {
		n = epoll_wait(ctx->epfd, evs, 16, -1);
		if (n < 0 && errno != EINTR) {
			smcr_err("engine: epoll_wait: %s", strerror(errno));
			break;
		}
		pthread_mutex_lock(&ctx->lock);
		if (ctx->stop) {
			pthread_mutex_unlock(&ctx->lock);
			break;
		}
		ticked = false;
		memset(spent, 0, sizeof(spent));
		t0 = smcr_now_ms();
		cpu0 = thread_cpu_ms();
		for (i = 0; i < n; i++) {
			uint64_t v = evs[i].data.u64, junk;
			struct smcr_dev *dev = (struct smcr_dev *)(uintptr_t)(v & ~7ull);

			t1 = smcr_now_ms();
			switch (v & 7) {
			case SRC_WAKE:
				ctx->stats.wake_kick++;
				if (read(ctx->wakefd, &junk, sizeof(junk)) < 0)
					junk = 0;
				break;
			case SRC_TIMER:
				ctx->stats.wake_timer++;
				/* After the completions of this batch: a
				 * reply waiting there beats its deadline. */
				if (read(ctx->timerfd, &junk, sizeof(junk)) > 0)
					ticked = true;
				break;
			case SRC_CHAN:
				ctx->stats.wake_devcq++;
				smcr_vlink_cq_event(dev);
				break;
			case SRC_ASYNC:
				ctx->stats.wake_async++;
				smcr_vlink_async_event(&ctx->vlinks, dev);
				break;
			case SRC_LINK:
				ctx->stats.wake_link++;
				smcr_vlink_chan_event(&ctx->vlinks, v >> 3);
				break;
			}
			spent[v & 3] += smcr_now_ms() - t1;
		}
		if (ticked) {
			t1 = smcr_now_ms();
			tick(ctx);
			spent[SRC_TIMER] += smcr_now_ms() - t1;
		}
		/* After the batch: a device released here may be named by an
		 * event later in the same batch. */
		t1 = smcr_now_ms();
		if (ticked || ctx->dev_check_due) {
			ctx->dev_check_due = false;
			devs_check(ctx);
		}
		reap(ctx);
		if (ctx->caller_poll)
			links_want_send_done(ctx);
		spent[4] = smcr_now_ms() - t1;
		t1 = smcr_now_ms();
		if (t1 - t0 >= 500)
			smcr_warn("engine: progress thread busy for %llu ms, %llu ms on the CPU (timer %llu, completions %llu, async events %llu, devices and reaping %llu)",
				  (unsigned long long)(t1 - t0),
				  (unsigned long long)(thread_cpu_ms() - cpu0),
				  (unsigned long long)spent[SRC_TIMER],
				  (unsigned long long)spent[SRC_CHAN],
				  (unsigned long long)spent[SRC_ASYNC & 3],
				  (unsigned long long)spent[4]);
		pthread_mutex_unlock(&ctx->lock);
	}
	return NULL;
}

void smcr_engine_collect(struct smcr_ctx *ctx, struct smcr_stats *st)
{
	struct smcr_lgr *lgr;
	struct smcr_sock *s;

	*st = ctx->stats;
	st->devices_lost = ctx->devices_lost;
	st->fault_held = ctx->vlinks.fault_held;
	st->fault_discarded = ctx->vlinks.fault_discarded;
	st->fault_held_recvs = ctx->vlinks.fault_held_recvs;
	for (lgr = ctx->lgrs; lgr; lgr = lgr->next) {
		lgr_stats_add(st, lgr);
		st->link_groups++;
		if (lgr->version == SMCR_CLC_VERSION_2 && lgr->release >= SMCR_CLC_RELEASE_1)
			st->link_groups_v21++;
		if (!lgr->terminated)
			st->links_active += smcr_lgr_active_links(lgr);
	}
	for (s = ctx->socks; s; s = s->next) {
		if (!s->smc || s->listener)
			continue;
		smcr_engine_conn_stats_add(st, &s->conn.stats);
	}
}

void smcr_engine_conn_stats_add(struct smcr_stats *st, const struct smcr_conn_stats *cs)
{
	st->cdc_sent += cs->cdc_sent;
	st->cdc_recv += cs->cdc_recv;
	st->rdma_writes += cs->writes;
	st->bytes_sent += cs->bytes_sent;
	st->bytes_recv += cs->bytes_recv;
	st->corked += cs->corked;
	st->prod_rewinds += cs->prod_rewinds;
	st->cons_held += cs->cons_held;
}

/* ---- start and stop ------------------------------------------------------ */

static int ports_from_spec(struct smcr_ctx *ctx, const char *spec)
{
	char buf[256], *tok, *save = NULL;
	int ret;

	snprintf(buf, sizeof(buf), "%s", spec);
	for (tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		struct smcr_port_ref ref;

		ret = smcr_dev_resolve_name(&ctx->devs, tok, &ref);
		if (ret) {
			smcr_err("engine: RDMA port %s: %s", tok, strerror(-ret));
			return ret;
		}
		ret = port_add(ctx, &ref, NULL);
		if (ret) {
			smcr_dev_put(&ctx->devs, &ref);
			return ret;
		}
	}
	return 0;
}

int smcr_engine_open(struct smcr_ctx *ctx)
{
	struct itimerspec its = {
		.it_interval = { .tv_nsec = SMCR_LGR_TICK_MS * 1000000L },
		.it_value = { .tv_nsec = SMCR_LGR_TICK_MS * 1000000L },
	};
	pthread_condattr_t ca;
	int ret;

	pthread_mutex_init(&ctx->lock, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&ctx->lgr_cond, &ca);
	pthread_cond_init(&ctx->reap_cond, &ca);
	pthread_condattr_destroy(&ca);
	smcr_devs_init(&ctx->devs);
	smcr_vlink_set_init(&ctx->vlinks);
	ctx->vlinks.port_event = port_event;
	ctx->vlinks.port_event_arg = ctx;
	ctx->vlinks.reaper = vlink_reaper;
	ctx->vlinks.reaper_arg = ctx;
	ctx->vlinks.own_chan = ctx->caller_poll;
	if (!ctx->caller_poll)
		smcr_info("engine: the progress thread takes every completion (SMCR_CALLER_POLL=0)");
	ctx->vlinks.chan_watch = link_chan_watch;
	ctx->vlinks.chan_watch_arg = ctx;
	ctx->wakefd = ctx->timerfd = -1;
	ctx->epfd = epoll_create1(EPOLL_CLOEXEC);
	if (ctx->epfd < 0) {
		ret = -errno;
		goto out;
	}
	ctx->wakefd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	ctx->timerfd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
	if (ctx->wakefd < 0 || ctx->timerfd < 0 ||
	    timerfd_settime(ctx->timerfd, 0, &its, NULL)) {
		ret = -errno;
		goto out;
	}
	ctx->tick_ms = SMCR_LGR_TICK_MS;
	ret = ep_add(ctx, ctx->wakefd, SRC_WAKE, NULL);
	if (!ret)
		ret = ep_add(ctx, ctx->timerfd, SRC_TIMER, NULL);
	if (ret)
		goto out;
	if (!ctx->opts.no_smc) {
		if (ctx->opts.devices) {
			ret = ports_from_spec(ctx, ctx->opts.devices);
			if (ret)
				goto out;
		} else {
			ports_rescan(ctx);
		}
	}
	/* Peer ID (A.2.1): a random instance and the first RNIC's MAC (or
	 * random bytes); from getrandom(), not guessable from the pid. */
	if (getrandom(ctx->peer_id, sizeof(ctx->peer_id), 0) != sizeof(ctx->peer_id)) {
		ret = -EIO;
		goto out;
	}
	if (ctx->nports)
		memcpy(ctx->peer_id + 2, ctx->ports[0].mac, SMCR_MAC_LEN);
	ctx->last_rescan_ms = smcr_now_ms();
	return 0;

out:
	smcr_engine_close(ctx);
	return ret;
}

int smcr_engine_start(struct smcr_ctx *ctx)
{
	int ret;

	ret = pthread_create(&ctx->reaper, NULL, reaper, ctx);
	if (ret)
		return -ret;
	ctx->reaper_running = true;
	ret = pthread_create(&ctx->thread, NULL, progress, ctx);
	if (ret) {
		smcr_engine_stop(ctx);
		return -ret;
	}
	ctx->thread_running = true;
	/* Names for top and perf (best effort). */
	pthread_setname_np(ctx->reaper, "smcr-reaper");
	pthread_setname_np(ctx->thread, "smcr-progress");
	return 0;
}

/* How long an exiting context waits for its DELETE LINK (all) sends. */
#define SMCR_BYE_WAIT_MS 1000

static bool byes_sent(void *arg)
{
	struct smcr_ctx *ctx = arg;
	struct smcr_lgr *lgr;

	for (lgr = ctx->lgrs; lgr; lgr = lgr->next)
		if (lgr->bye_link)
			return false;
	return true;
}

/* Every live group tells its peer that it ends (as Linux does when it
 * ends a group on purpose): the peer's group goes at once instead of
 * lingering for its last link's TEST LINK limit.  The progress thread
 * reaps the completions; the QPs must not go before them. */
static void lgrs_delete_all(struct smcr_ctx *ctx)
{
	struct smcr_lgr *lgr;
	uint64_t until;

	pthread_mutex_lock(&ctx->lock);
	for (lgr = ctx->lgrs; lgr; lgr = lgr->next)
		smcr_llc_delete_all(lgr, SMCR_LLC_DEL_PROG_INIT_TERM);
	until = smcr_now_ms() + SMCR_BYE_WAIT_MS;
	/* Nothing signals a send completion: look every 10 ms. */
	while (!byes_sent(ctx) && smcr_now_ms() < until)
		smcr_engine_wait(ctx, byes_sent, ctx, 10);
	if (!byes_sent(ctx))
		smcr_warn("engine: DELETE LINK (all) not completed in %u ms",
			  SMCR_BYE_WAIT_MS);
	pthread_mutex_unlock(&ctx->lock);
}

void smcr_engine_stop(struct smcr_ctx *ctx)
{
	struct smcr_lgr *lgr;

	if (ctx->thread_running)
		lgrs_delete_all(ctx);
	pthread_mutex_lock(&ctx->lock);
	ctx->stop = true;
	wake_thread(ctx);
	pthread_mutex_unlock(&ctx->lock);
	if (ctx->thread_running)
		pthread_join(ctx->thread, NULL);
	ctx->thread_running = false;
	/* The reaper thread still runs: its queue is ctx->lock's. */
	pthread_mutex_lock(&ctx->lock);
	while ((lgr = ctx->lgrs)) {
		ctx->lgrs = lgr->next;
		smcr_lgr_destroy(lgr);
	}
	while (ctx->ngrave)
		smcr_vlink_destroy(ctx->graveyard[--ctx->ngrave]);
	pthread_mutex_unlock(&ctx->lock);
	if (ctx->reaper_running) {
		/* It destroys what is queued first. */
		pthread_mutex_lock(&ctx->lock);
		ctx->reaper_stop = true;
		pthread_cond_signal(&ctx->reap_cond);
		pthread_mutex_unlock(&ctx->lock);
		pthread_join(ctx->reaper, NULL);
	}
	ctx->reaper_running = false;
}

void smcr_engine_close(struct smcr_ctx *ctx)
{
	int i;

	for (i = 0; i < ctx->nports; i++)
		smcr_dev_put(&ctx->devs, &ctx->ports[i]);
	ctx->nports = 0;
	smcr_devs_fini(&ctx->devs);
	if (ctx->timerfd >= 0)
		close(ctx->timerfd);
	if (ctx->wakefd >= 0)
		close(ctx->wakefd);
	if (ctx->epfd >= 0)
		close(ctx->epfd);
	ctx->timerfd = ctx->wakefd = ctx->epfd = -1;
	pthread_cond_destroy(&ctx->reap_cond);
	pthread_cond_destroy(&ctx->lgr_cond);
	pthread_mutex_destroy(&ctx->lock);
}
