/* SPDX-License-Identifier: BSD-3-Clause */
/* smcrbd: the context half of the public API: create and destroy (the
 * settings, then the engine), counters, fault injection, the status dump.
 * It calls down into engine.c and sock.c; nothing there calls it. */
#include <config.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "abi.h"
#include "clc.h"
#include "engine.h"
#include "log.h"
#include "synopt.h"
#include "strbuf.h"

/* ---- create and destroy ---------------------------------------------------- */

static unsigned int env_uint(const char *name, unsigned int dflt)
{
	const char *v = getenv(name);
	char *end;
	unsigned long x;

	if (!v || !*v)
		return dflt;
	x = strtoul(v, &end, 0);
	return *end ? dflt : (unsigned int)x;
}

/* User EIDs (smcr.h): checked as Linux checks them, blank-padded. */
static int eids_from_spec(struct smcr_ctx *ctx, const char *spec)
{
	const char *p = spec;

	ctx->eid_count = 0;
	while (*p) {
		size_t n = strcspn(p, ","), i;
		uint8_t *e;

		if (n == 0 || n > SMCR_EID_LEN) {
			smcr_err("engine: EID '%.*s': 1 to %d characters", (int)n, p, SMCR_EID_LEN);
			return -EINVAL;
		}
		if (ctx->eid_count >= SMCR_CLC_MAX_EIDS) {
			smcr_err("engine: more than %d EIDs", SMCR_CLC_MAX_EIDS);
			return -EINVAL;
		}
		for (i = 0; i < n; i++) {
			char c = p[i];
			bool alnum = (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');

			if (!alnum && (i == 0 || (c != '.' && c != '-'))) {
				smcr_err("engine: EID '%.*s': A-Z, 0-9, '.' and '-' only, "
					 "starting with a letter or digit", (int)n, p);
				return -EINVAL;
			}
		}
		e = ctx->eids[ctx->eid_count++];
		memset(e, ' ', SMCR_EID_LEN);
		memcpy(e, p, n);
		p += n;
		if (*p == ',')
			p++;
	}
	return 0;
}

/* The SYN option (smcr.h): the BPF program, or why not. */
static int synopt_start(struct smcr_ctx *ctx)
{
	static bool warned;
	enum smcr_syn_option mode = ctx->opts.syn_option;
	char *c;
	int ret;

	if (mode == SMCR_SYN_OPTION_AUTO &&
	    smcr_syn_option_parse(getenv("SMCR_SYN_OPTION"), &mode)) {
		smcr_err("engine: SMCR_SYN_OPTION: '%s' is not auto, bpf or off",
			 getenv("SMCR_SYN_OPTION"));
		return -EINVAL;
	}
	if (mode == SMCR_SYN_OPTION_OFF) {
		snprintf(ctx->synopt_why, sizeof(ctx->synopt_why), "syn-option=off");
		return 0;
	}
	if (ctx->opts.no_smc) {
		snprintf(ctx->synopt_why, sizeof(ctx->synopt_why), "no SMC-R (TCP only)");
		return 0;
	}
	ret = smcr_synopt_get(ctx->synopt_why, sizeof(ctx->synopt_why));
	if (ret == 0) {
		ctx->synopt = true;
		return 0;
	}
	/* It goes into smcr_ctx_dump()'s JSON as is (a cgroup path may
	 * hold anything). */
	for (c = ctx->synopt_why; *c; c++)
		if (*c == '"' || *c == '\\' || (unsigned char)*c < 0x20)
			*c = '?';
	if (mode == SMCR_SYN_OPTION_BPF) {
		smcr_err("engine: syn-option=bpf: %s", ctx->synopt_why);
		return ret;
	}
	if (!__atomic_exchange_n(&warned, true, __ATOMIC_RELAXED))
		smcr_warn("engine: no SMC TCP option on SYNs (%s): CLC on every "
			  "connection, as with syn-option=off", ctx->synopt_why);
	return 0;
}

enum smcr_syn_option smcr_ctx_syn_option(struct smcr_ctx *ctx)
{
	return ctx->synopt ? SMCR_SYN_OPTION_BPF : SMCR_SYN_OPTION_OFF;
}

int smcr_ctx_create_size(const struct smcr_ctx_opts *opts, size_t opts_size,
			 struct smcr_ctx **ctxp)
{
	struct smcr_ctx *ctx;
	const char *env;
	int ret;

	ctx = calloc(1, sizeof(*ctx));
	if (!ctx)
		return -ENOMEM;
	if (opts)
		smcr_abi_in(&ctx->opts, sizeof(ctx->opts), opts, opts_size);
	if (ctx->opts.log_fn)
		smcr_log_set_fn(ctx->opts.log_fn, ctx->opts.log_opaque);
	env = getenv("SMCR_DEVICES");
	if (!ctx->opts.devices && env && *env)
		ctx->opts.devices = env;
	env = ctx->opts.eids ? ctx->opts.eids : getenv("SMCR_EIDS");
	ret = eids_from_spec(ctx, env ? env : "");
	if (ret) {
		free(ctx);
		return ret;
	}
	/* SMCR_RMBE_SIZE if set, else 0: sized per connection (rmbe_auto_size) */
	if (!ctx->opts.rmbe_size)
		ctx->opts.rmbe_size = env_uint("SMCR_RMBE_SIZE", 0);
	if (!ctx->opts.clc_timeout_ms)
		ctx->opts.clc_timeout_ms = 2000;
	if (!ctx->opts.link_wait_ms)
		ctx->opts.link_wait_ms = 5000;
	ctx->lgr_cfg = smcr_lgr_config_default;
	ctx->max_lgrs_per_address = ctx->opts.max_lgrs_per_address ?
		ctx->opts.max_lgrs_per_address : env_uint("SMCR_MAX_LGRS_PER_ADDRESS", 0);
	ctx->lgr_cfg.max_rmb_bytes = ctx->opts.max_rmb_bytes ? ctx->opts.max_rmb_bytes :
		env_uint("SMCR_MAX_RMB_BYTES", (unsigned int)smcr_lgr_config_default.max_rmb_bytes);
	if (ctx->opts.max_links)
		ctx->lgr_cfg.max_links = (uint8_t)ctx->opts.max_links;
	ctx->lgr_cfg.llc_timeout_ms = ctx->opts.llc_timeout_ms ? ctx->opts.llc_timeout_ms :
		env_uint("SMCR_LLC_TIMEOUT_MS", ctx->lgr_cfg.llc_timeout_ms);
	ctx->busy_poll_us = env_uint("SMCR_BUSY_POLL_US", SMCR_BUSY_POLL_US_DEFAULT);
	ctx->autocork_bytes = env_uint("SMCR_AUTOCORK_BYTES", SMCR_AUTOCORK_BYTES_DEFAULT);
	ctx->lgr_cfg.test_link_idle_ms = ctx->opts.test_link_ms ? ctx->opts.test_link_ms :
		env_uint("SMCR_TEST_LINK_MS", ctx->lgr_cfg.test_link_idle_ms);
	ctx->lgr_cfg.test_link_timeout_ms = ctx->opts.test_link_timeout_ms ?
		ctx->opts.test_link_timeout_ms :
		env_uint("SMCR_TEST_LINK_TIMEOUT_MS", ctx->lgr_cfg.test_link_timeout_ms);
	ctx->lgr_cfg.stall_ms = env_uint("SMCR_STALL_MS", ctx->lgr_cfg.stall_ms);
	{
		const char *pol = getenv("SMCR_LINK_POLICY");

		if (pol && !strcmp(pol, "round-robin"))
			ctx->lgr_cfg.link_policy = SMCR_LINKS_ROUND_ROBIN;
		ctx->lgr_cfg.rebalance = env_uint("SMCR_REBALANCE", 1) != 0;
		ctx->lgr_cfg.link_tx_bytes = env_uint("SMCR_LINK_TX_BYTES",
						      ctx->lgr_cfg.link_tx_bytes);
		/* 1: the RFC's RMBE layout only, as older smcrbd spoke. */
		ctx->lgr_cfg.rmbe_eyecatcher = env_uint("SMCR_RMBE_EYECATCHER", 0) != 0;
	}
	/* The QPs' ACK timeout (4.096 us << SMCR_QP_TIMEOUT) and retries
	 * bound how soon a dead path shows as a completion error. */
	ctx->qp_timing = smcr_qp_timing_default;
	ctx->qp_timing.timeout = (uint8_t)env_uint("SMCR_QP_TIMEOUT", ctx->qp_timing.timeout);
	ctx->qp_timing.retry_cnt = (uint8_t)env_uint("SMCR_QP_RETRY", ctx->qp_timing.retry_cnt);
	if (ctx->qp_timing.timeout < 1 || ctx->qp_timing.timeout > 31)
		ctx->qp_timing.timeout = smcr_qp_timing_default.timeout;
	/* The last link's TEST LINK limit: SMCR_LAST_LINK_TIMEOUT_MS, else
	 * three TEST LINK timeouts; never below the RC retry budget (a
	 * peer whose QP still retries may only be stopped). */
	{
		uint64_t budget = ((4096ull << ctx->qp_timing.timeout) / 1000000u + 1) *
				  (1u + (ctx->qp_timing.retry_cnt > 6 ? 6 : ctx->qp_timing.retry_cnt));
		uint64_t last = env_uint("SMCR_LAST_LINK_TIMEOUT_MS",
					 3 * ctx->lgr_cfg.test_link_timeout_ms);

		if (last < budget + 1000)
			last = budget + 1000;
		ctx->lgr_cfg.last_link_timeout_ms = (uint32_t)(last > UINT32_MAX ? UINT32_MAX : last);
	}
	ret = smcr_engine_open(ctx);
	if (ret) {
		free(ctx);
		return ret;
	}
	env = getenv("SMCR_FAULT");
	if (env && *env) {
		/* "SPEC[;SPEC...]": a fault without a time waits for its link. */
		char buf[256], *tok, *save = NULL;

		snprintf(buf, sizeof(buf), "%s", env);
		for (tok = strtok_r(buf, ";", &save); tok; tok = strtok_r(NULL, ";", &save)) {
			char spec[160];

			snprintf(spec, sizeof(spec), "%s%s", tok,
				 strstr(tok, "after=") || strstr(tok, "every=") ? "" : ",after=0");
			if (smcr_engine_fault(ctx, spec) < 0)
				smcr_warn("engine: SMCR_FAULT: cannot use '%s'", tok);
		}
	}
	ret = synopt_start(ctx);
	if (ret)
		goto out_close;
	ret = smcr_engine_start(ctx);
	if (ret)
		goto out_put_synopt;
	*ctxp = ctx;
	return 0;

out_put_synopt:
	if (ctx->synopt)
		smcr_synopt_put();
out_close:
	smcr_engine_close(ctx);
	free(ctx);
	return ret;
}

void smcr_ctx_destroy(struct smcr_ctx *ctx)
{
	if (!ctx)
		return;
	while (ctx->socks)
		smcr_abort(ctx->socks);
	smcr_engine_stop(ctx);
	if (ctx->synopt)
		smcr_synopt_put();
	smcr_engine_close(ctx);
	free(ctx);
}

/* ---- counters, faults, status ----------------------------------------------- */

/* Elements in use and RMBs of one pool. */
static void pool_usage(const struct smcr_rmb_pool *pool, uint64_t *used, uint64_t *rmbs)
{
	const struct smcr_rmb *rmb;
	unsigned int code;

	smcr_rmb_pool_for_each(pool, code, rmb) {
		*used += (uint64_t)__builtin_popcountll(rmb->used);
		(*rmbs)++;
	}
}

static void ctx_stats(struct smcr_ctx *ctx, struct smcr_stats *st)
{
	const struct smcr_lgr *lgr;
	const struct smcr_sock *s;
	uint64_t sndbuf_rmbs = 0;
	unsigned int i;

	pthread_mutex_lock(&ctx->lock);
	smcr_engine_collect(ctx, st);
	st->open_connections = st->rmbes_in_use = st->sndbufs_in_use = st->rmbs = 0;
	for (s = ctx->socks; s; s = s->next)
		if (!s->listener)
			st->open_connections++;
	for (lgr = ctx->lgrs; lgr; lgr = lgr->next) {
		pool_usage(&lgr->rmbs, &st->rmbes_in_use, &st->rmbs);
		pool_usage(&lgr->sndbufs, &st->sndbufs_in_use, &sndbuf_rmbs);
		/* Not those parked for their last writes (no connection's). */
		for (i = 0; i < SMCR_LGR_PARKED; i++)
			if (lgr->parked[i].buf.rmb && st->sndbufs_in_use)
				st->sndbufs_in_use--;
	}
	pthread_mutex_unlock(&ctx->lock);
}

int smcr_ctx_stats_size(struct smcr_ctx *ctx, struct smcr_stats *st, size_t size)
{
	struct smcr_stats ours;

	ctx_stats(ctx, &ours);
	smcr_abi_out(st, size, &ours, sizeof(ours));
	return 0;
}

uint32_t smcr_stats_reason(unsigned int i)
{
	return smcr_clc_reason_code(i);
}

const char *smcr_reason_str(uint32_t code)
{
	return smcr_clc_decline_str(code);
}

int smcr_fault(struct smcr_ctx *ctx, const char *spec)
{
	int ret;

	pthread_mutex_lock(&ctx->lock);
	ret = smcr_engine_fault(ctx, spec);
	pthread_mutex_unlock(&ctx->lock);
	return ret;
}

static const char *link_state_str(enum smcr_link_state st)
{
	switch (st) {
	case SMCR_LINK_INACTIVE: return "inactive";
	case SMCR_LINK_ACTIVE: return "active";
	case SMCR_LINK_DELETING: return "deleting";
	case SMCR_LINK_FAILED: return "failed";
	}
	return "?";
}

static void gid_str(const uint8_t *gid, char *out, size_t len)
{
	static const uint8_t v4[12] = { [10] = 0xff, [11] = 0xff };

	if (memcmp(gid, v4, 12) == 0)
		snprintf(out, len, "%u.%u.%u.%u", gid[12], gid[13], gid[14], gid[15]);
	else
		snprintf(out, len, "%02x%02x:%02x%02x:...:%02x%02x", gid[0], gid[1],
			 gid[2], gid[3], gid[14], gid[15]);
}

int smcr_ctx_dump(struct smcr_ctx *ctx, char *buf, size_t len, bool json)
{
	struct smcr_lgr *lgr;
	struct smcr_sock *s;
	size_t off = 0;
	unsigned int i, g = 0;

	pthread_mutex_lock(&ctx->lock);
	off = json ? strbuf_out(buf, len, off, "{\"syn_option\":\"%s\",\"syn_option_off_why\":\"%s\",",
			 ctx->synopt ? "bpf" : "off", ctx->synopt ? "" : ctx->synopt_why) :
		     ctx->synopt ? strbuf_out(buf, len, off, "SYN option: bpf (CLC only when both SYNs carry it)\n") :
		     strbuf_out(buf, len, off, "SYN option: off, CLC always (%s)\n", ctx->synopt_why);
	/* SMC-Rv2 user EIDs (A-Z, 0-9, '.', '-': nothing to escape) */
	off = strbuf_out(buf, len, off, json ? "\"eids\":[" : "SMC-Rv2 EIDs:");
	for (i = 0; i < ctx->eid_count; i++) {
		int n = SMCR_EID_LEN;

		while (n > 0 && ctx->eids[i][n - 1] == ' ')
			n--;
		off = strbuf_out(buf, len, off, json ? "%s\"%.*s\"" : "%s %.*s",
			       json ? (i ? "," : "") : (i ? "," : ""), n, (const char *)ctx->eids[i]);
	}
	off = strbuf_out(buf, len, off, json ? "],\"link_groups\":[" :
		       ctx->eid_count ? "\n" : " none (SMC-R v1 only)\n");
	for (lgr = ctx->lgrs; lgr; lgr = lgr->next, g++) {
		uint64_t rmbes, rmbs, sndbufs, sndbuf_rmbs;
		unsigned int nl = 0;

		/* RMBE layout: "linux" (no eye catcher), "rfc", or "pending"
		 * until the first CONFIRM LINK. */
		const char *layout = !lgr->layout_fixed ? "pending" :
				     lgr->rmbe_eye ? "rfc" : "linux";

		off = json ? strbuf_out(buf, len, off, "%s{\"role\":\"%s\",\"version\":%u,\"terminated\":%s,\"connections\":%u,\"rmbe_layout\":\"%s\",\"links\":[",
				 g ? "," : "", lgr->role == SMCR_ROLE_SERVER ? "server" : "client",
				 lgr->version, lgr->terminated ? "true" : "false", lgr->nconns, layout) :
			     strbuf_out(buf, len, off, "link group %u: %s, %u connection(s)%s, RMBE layout %s, SMC-R%s\n", g,
				 lgr->role == SMCR_ROLE_SERVER ? "server" : "client",
				 lgr->nconns, lgr->terminated ? ", terminated" : "", layout,
				 lgr->version == 2 ? "v2" : "v1");
		for (i = 0; i < SMCR_LINK_SLOTS; i++) {
			struct smcr_lgr_link *ll = &lgr->links[i];
			char lg[48], pg[48];

			if (!ll->link)
				continue;
			gid_str(ll->local.gid, lg, sizeof(lg));
			gid_str(ll->peer.gid, pg, sizeof(pg));
			off = json ? strbuf_out(buf, len, off,
					 "%s{\"id\":%u,\"state\":\"%s\",\"device\":\"%s\",\"local_gid\":\"%s\",\"peer_gid\":\"%s\",\"qpn\":%u,\"peer_qpn\":%u,\"asym\":%s,\"connections\":%u,\"writes\":%llu,\"sends\":%llu,\"recvs\":%llu}",
					 nl++ ? "," : "", ll->link->link_id,
					 link_state_str(ll->link->state),
					 ll->link->dev ? ll->link->dev->name : "-", lg, pg,
					 ll->local.qpn, ll->peer.qpn, ll->asym ? "true" : "false",
					 ll->link->nconns,
					 (unsigned long long)ll->link->writes,
					 (unsigned long long)ll->link->sends,
					 (unsigned long long)ll->link->recvs) :
				     strbuf_out(buf, len, off,
					 "  link %u %-8s %s %s -> %s qpn %u -> %u%s, %u conn(s), %llu writes, %llu sends, %llu recvs\n",
					 ll->link->link_id, link_state_str(ll->link->state),
					 ll->link->dev ? ll->link->dev->name : "-", lg, pg,
					 ll->local.qpn, ll->peer.qpn, ll->asym ? " (asym)" : "",
					 ll->link->nconns,
					 (unsigned long long)ll->link->writes,
					 (unsigned long long)ll->link->sends,
					 (unsigned long long)ll->link->recvs);
		}
		rmbes = rmbs = sndbufs = sndbuf_rmbs = 0;
		pool_usage(&lgr->rmbs, &rmbes, &rmbs);
		pool_usage(&lgr->sndbufs, &sndbufs, &sndbuf_rmbs);
		off = strbuf_out(buf, len, off, json ? "],\"stats\":{\"failovers\":%llu,\"links_added\":%llu,\"links_deleted\":%llu,\"link_failures\":%llu,\"llc_sent\":%llu,\"llc_recv\":%llu,\"rmbs\":%llu,\"rmbes_in_use\":%llu,\"sndbufs_in_use\":%llu}}" :
			  "  failovers %llu, links added %llu, deleted %llu, failed %llu, LLC sent %llu, received %llu\n"
			  "  %llu RMB(s), %llu RMB element(s) and %llu send buffer(s) in use\n",
			  (unsigned long long)lgr->stats.failovers,
			  (unsigned long long)lgr->stats.links_added,
			  (unsigned long long)lgr->stats.links_deleted,
			  (unsigned long long)lgr->stats.link_failures,
			  (unsigned long long)lgr->stats.llc_sent,
			  (unsigned long long)lgr->stats.llc_recv,
			  (unsigned long long)rmbs, (unsigned long long)rmbes,
			  (unsigned long long)sndbufs);
	}
	off = strbuf_out(buf, len, off, json ? "],\"connections\":[" : "");
	g = 0;
	for (s = ctx->socks; s; s = s->next) {
		if (s->listener)
			continue;
		if (!s->smc) {
			off = json ? strbuf_out(buf, len, off, "%s{\"smc\":false,\"fallback_reason\":%u}",
					 g++ ? "," : "", s->fallback_reason) :
				     strbuf_out(buf, len, off, "connection: TCP fallback (reason 0x%08x%s)\n",
					 s->fallback_reason, s->fallback_by_peer ? ", by peer" : "");
			continue;
		}
		off = json ? strbuf_out(buf, len, off,
				 "%s{\"smc\":true,\"token\":%u,\"link\":%u,\"rmbe\":%u,\"peer_rmbe\":%u,\"rx_prod\":[%u,%u],\"rx_cons\":[%u,%u],\"tx_prod\":[%u,%u],\"tx_peer_cons\":[%u,%u],\"bytes_sent\":%llu,\"bytes_recv\":%llu,\"failovers\":%llu}",
				 g++ ? "," : "", s->conn.token,
				 s->conn.link ? s->conn.link->link_id : 0,
				 s->conn.rmbe.data_len + s->conn.rx_eye,
				 s->conn.tx_len + s->conn.tx_eye,
				 s->conn.rx_prod.wrap, s->conn.rx_prod.count,
				 s->conn.rx_cons.wrap, s->conn.rx_cons.count,
				 s->conn.tx_prod.wrap, s->conn.tx_prod.count,
				 s->conn.tx_peer_cons.wrap, s->conn.tx_peer_cons.count,
				 (unsigned long long)s->conn.stats.bytes_sent,
				 (unsigned long long)s->conn.stats.bytes_recv,
				 (unsigned long long)s->conn.stats.failovers) :
			     strbuf_out(buf, len, off,
				 "connection %08x: link %u, RMBE %u, peer RMBE %u, rx prod %u:%u cons %u:%u, tx prod %u:%u peer cons %u:%u, sent %llu, received %llu, failovers %llu\n",
				 s->conn.token, s->conn.link ? s->conn.link->link_id : 0,
				 s->conn.rmbe.data_len + s->conn.rx_eye,
				 s->conn.tx_len + s->conn.tx_eye,
				 s->conn.rx_prod.wrap, s->conn.rx_prod.count,
				 s->conn.rx_cons.wrap, s->conn.rx_cons.count,
				 s->conn.tx_prod.wrap, s->conn.tx_prod.count,
				 s->conn.tx_peer_cons.wrap, s->conn.tx_peer_cons.count,
				 (unsigned long long)s->conn.stats.bytes_sent,
				 (unsigned long long)s->conn.stats.bytes_recv,
				 (unsigned long long)s->conn.stats.failovers);
	}
	off = strbuf_out(buf, len, off, json ? "]}\n" : "");
	pthread_mutex_unlock(&ctx->lock);
	return off >= len ? -ENOSPC : (int)off;
}
