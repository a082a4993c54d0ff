/* SPDX-License-Identifier: BSD-3-Clause */
/* smcrbd: the context half of the public API: create and destroy (the
 * settings, then the engine), counters, fault injection, the status dump.
 * It calls down into engine.c and sock.c; nothing there calls it. */
#include <config.h>

#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "abi.h"
#include "clc.h"
#include "engine.h"
#include "log.h"
#include "synopt.h"
#include "strbuf.h"

/* ---- settings -------------------------------------------------------------- */

/* libsmcr's knobs, listed once (as Linux net/smc/smc_sysctl.c smc_table[],
 * with the defaults beside it as in smc_sysctl_net_init()): the name in
 * smcr_ctx_opts.settings, the environment variable (NULL: none), the
 * type, the range, the default (the macro that smcr_lgr_config_default
 * (lgr.c) or smcr_qp_timing_default (dev.c) is made of, where the engine
 * has one), the field of struct smcr_ctx it lands in, the field of
 * smcr_ctx_opts that wins when it is not zero, and what it is.  The
 * order: that field, then opts.settings, then the environment, then the
 * default.  libsmcr(3) ENVIRONMENT says more of each. */
enum knob_type {
	KNOB_UINT,	/* a number (strtoull base 0) in min..max */
	KNOB_BOOL,	/* a number: 0 false, else true */
	KNOB_STR,	/* a string (not ""), kept as given */
	KNOB_ENUM,	/* a word, parse() gives its value */
};

struct knob {
	const char *name, *env;
	enum knob_type type;
	uint64_t min, max, dflt;
	size_t off, size;		/* where it lands in struct smcr_ctx */
	size_t opt_off, opt_size;	/* the smcr_ctx_opts field; size 0: none */
	int (*parse)(const char *s, uint64_t *v);
	const char *what;		/* KNOB_ENUM: the words it takes */
	const char *help;
};

#define FIELD(f) offsetof(struct smcr_ctx, f), sizeof(((struct smcr_ctx *)0)->f)
#define OPT(f) offsetof(struct smcr_ctx_opts, f), sizeof(((struct smcr_ctx_opts *)0)->f)
#define NOOPT 0, 0
#define UINT(n, env, min, max, dflt, f, opt, help) \
	{ n, env, KNOB_UINT, min, max, dflt, FIELD(f), opt, NULL, NULL, help }
#define BOOL(n, env, dflt, f, opt, help) \
	{ n, env, KNOB_BOOL, 0, UINT32_MAX, dflt, FIELD(f), opt, NULL, NULL, help }
#define STR(n, env, f, opt, help) { n, env, KNOB_STR, 0, 0, 0, FIELD(f), opt, NULL, NULL, help }
#define ENUM(n, env, dflt, f, opt, parse, what, help) \
	{ n, env, KNOB_ENUM, 0, 0, dflt, FIELD(f), opt, parse, what, help }

/* Anything but "round-robin" is the default, least-loaded (as always). */
static int parse_link_policy(const char *s, uint64_t *v)
{
	*v = strcmp(s, "round-robin") ? SMCR_LINKS_LEAST_LOADED : SMCR_LINKS_ROUND_ROBIN;
	return 0;
}

static int parse_syn_option(const char *s, uint64_t *v)
{
	enum smcr_syn_option m;
	int ret = smcr_syn_option_parse(s, &m);

	*v = m;
	return ret;
}

static const struct knob knobs[] = {
	STR("devices", "SMCR_DEVICES", opts.devices, OPT(devices),
	    "RDMA ports, dev[:port],...; none: every active RoCE v2 port with an IP address"),
	STR("eids", "SMCR_EIDS", opts.eids, OPT(eids),
	    "user EIDs for SMC-Rv2, comma-separated; none: v1 only"),
	UINT("rmbe_size", "SMCR_RMBE_SIZE", 0, 512u << 20, 0, opts.rmbe_size, OPT(rmbe_size),
	     "receive buffer per connection; 0: rmbe_auto_max, smaller as the group fills"),
	UINT("max_pinned_bytes", "SMCR_MAX_PINNED_BYTES", 0, (uint64_t)1 << 48, 0, pinned.max,
	     NOOPT, "RMBs and send buffers of all link groups together; 0: no limit"),
	UINT("max_rmb_bytes", "SMCR_MAX_RMB_BYTES", 0, UINT32_MAX, SMCR_LGR_MAX_RMB_BYTES,
	     lgr_cfg.max_rmb_bytes, OPT(max_rmb_bytes),
	     "RMB memory per link group, as much for send buffers; 0: unlimited"),
	UINT("max_lgrs_per_address", "SMCR_MAX_LGRS_PER_ADDRESS", 0, UINT32_MAX, 0,
	     max_lgrs_per_address, OPT(max_lgrs_per_address),
	     "link groups a server keeps for one peer address; 0: no limit"),
	UINT("max_links", NULL, 2, SMCR_MAX_LINKS, SMCR_LGR_MAX_LINKS_DEFAULT, lgr_cfg.max_links,
	     OPT(max_links), "links per link group"),
	UINT("clc_timeout_ms", NULL, 1, UINT32_MAX, 2000, opts.clc_timeout_ms,
	     OPT(clc_timeout_ms), "wait for each CLC message"),
	UINT("link_wait_ms", NULL, 1, UINT32_MAX, 5000, opts.link_wait_ms, OPT(link_wait_ms),
	     "wait for the first link's confirmation"),
	BOOL("no_smc", NULL, false, opts.no_smc, OPT(no_smc),
	     "never propose or accept SMC-R (TCP only)"),
	UINT("v2_release", "SMCR_V2_RELEASE", 0, 1, 1, v2_release, NOOPT,
	     "SMC-Rv2 release proposed and accepted (0: v2.0, 1: v2.1)"),
	UINT("max_conns", "SMCR_MAX_CONNS", 16, 255, 255, max_conns, NOOPT,
	     "SMC-Rv2.1 connections per link group"),
	UINT("llc_timeout_ms", "SMCR_LLC_TIMEOUT_MS", 0, UINT32_MAX,
	     SMCR_LGR_LLC_TIMEOUT_MS_DEFAULT, lgr_cfg.llc_timeout_ms, OPT(llc_timeout_ms),
	     "wait for each LLC reply"),
	UINT("test_link_ms", "SMCR_TEST_LINK_MS", 0, UINT32_MAX, SMCR_LGR_TEST_LINK_MS_DEFAULT,
	     lgr_cfg.test_link_idle_ms, OPT(test_link_ms),
	     "TEST LINK after a link is idle this long; 0: never"),
	UINT("test_link_timeout_ms", "SMCR_TEST_LINK_TIMEOUT_MS", 0, UINT32_MAX,
	     SMCR_LGR_TEST_LINK_TIMEOUT_MS_DEFAULT, lgr_cfg.test_link_timeout_ms,
	     OPT(test_link_timeout_ms), "no TEST LINK reply this long: the link is down"),
	UINT("last_link_timeout_ms", "SMCR_LAST_LINK_TIMEOUT_MS", 0, UINT32_MAX, 0,
	     lgr_cfg.last_link_timeout_ms, NOOPT,
	     "the same for a group's last link; 0: 3 * test_link_timeout_ms (at least the RC retry budget)"),
	UINT("stall_ms", "SMCR_STALL_MS", 0, UINT32_MAX, SMCR_LGR_STALL_MS_DEFAULT,
	     lgr_cfg.stall_ms, NOOPT, "a tick this much late is our own stall; 0: off"),
	UINT("conn_stall_ms", "SMCR_CONN_STALL_MS", 0, UINT32_MAX, SMCR_LGR_CONN_STALL_MS_DEFAULT,
	     lgr_cfg.conn_stall_ms, NOOPT,
	     "a connection that waits this long with nothing moving is logged once with its cursors; 0: off"),
	UINT("delete_hold_ms", "SMCR_DELETE_HOLD_MS", 0, UINT32_MAX,
	     SMCR_LGR_DELETE_HOLD_MS_DEFAULT, lgr_cfg.delete_hold_ms, NOOPT,
	     "a client's failed link that still acknowledges: DELETE LINK this much later"),
	UINT("qp_timeout", "SMCR_QP_TIMEOUT", 1, 31, SMCR_QP_TIMEOUT_DEFAULT, qp_timing.timeout,
	     NOOPT, "RC ACK timeout, 4.096 us * 2^N"),
	UINT("qp_retry", "SMCR_QP_RETRY", 0, UINT8_MAX, SMCR_QP_RETRY_DEFAULT,
	     qp_timing.retry_cnt, NOOPT, "RC retries (above 6: 6)"),
	ENUM("link_policy", "SMCR_LINK_POLICY", SMCR_LINKS_LEAST_LOADED, lgr_cfg.link_policy,
	     NOOPT, parse_link_policy, "least-loaded or round-robin",
	     "the link a new connection takes"),
	BOOL("rebalance", "SMCR_REBALANCE", SMCR_LGR_REBALANCE_DEFAULT, lgr_cfg.rebalance, NOOPT,
	     "move connections to a less busy link"),
	UINT("link_tx_bytes", "SMCR_LINK_TX_BYTES", 0, UINT32_MAX, SMCR_LGR_LINK_TX_BYTES,
	     lgr_cfg.link_tx_bytes, NOOPT, "written, unconfirmed bytes per link; 0: no limit"),
	UINT("rmbe_auto_max", "SMCR_RMBE_AUTO_MAX", SMCR_RMBE_AUTO_MIN, 512u << 20,
	     SMCR_LGR_RMBE_AUTO_MAX, lgr_cfg.rmbe_auto_max, NOOPT,
	     "the largest receive buffer rmbe_size 0 gives (a group takes as many as of 512 KiB)"),
	UINT("busy_poll_us", "SMCR_BUSY_POLL_US", 0, UINT32_MAX, SMCR_BUSY_POLL_US_DEFAULT,
	     busy_poll_us, NOOPT, "poll the completion queue this long before sleeping"),
	UINT("autocork_bytes", "SMCR_AUTOCORK_BYTES", 0, UINT32_MAX, SMCR_AUTOCORK_BYTES_DEFAULT,
	     autocork_bytes, NOOPT, "small sends behind a CDC in flight wait up to this many bytes"),
	BOOL("caller_poll", "SMCR_CALLER_POLL", SMCR_CALLER_POLL_DEFAULT, caller_poll, NOOPT,
	     "a waiting caller polls the completion queue itself"),
	BOOL("rmbe_eyecatcher", "SMCR_RMBE_EYECATCHER", false, lgr_cfg.rmbe_eyecatcher, NOOPT,
	     "the RFC's RMBE layout only, not Linux's"),
	STR("fault", "SMCR_FAULT", fault_spec, NOOPT, "faults to inject (smcr_fault())"),
	ENUM("syn_option", "SMCR_SYN_OPTION", SMCR_SYN_OPTION_AUTO, opts.syn_option,
	     OPT(syn_option), parse_syn_option, "auto, bpf or off",
	     "the SMC TCP option on SYNs"),
};

_Static_assert(sizeof(knobs) / sizeof(knobs[0]) <= 32, "more knobs than bits in knobs_set");

static uint64_t get_uint(const void *p, size_t size)
{
	switch (size) {
	case 1: return *(const uint8_t *)p;
	case 2: return *(const uint16_t *)p;
	case 4: return *(const uint32_t *)p;
	default: return *(const uint64_t *)p;
	}
}

/* v into a field of size bytes: a value larger than the field holds is its
 * largest (an opts field wider than where it lands: max_links 256 is 255,
 * which smcr_lgr_create() makes 8, not 0). */
static void put_uint(void *p, size_t size, uint64_t v)
{
	switch (size) {
	case 1: *(uint8_t *)p = v > UINT8_MAX ? UINT8_MAX : (uint8_t)v; break;
	case 2: *(uint16_t *)p = v > UINT16_MAX ? UINT16_MAX : (uint16_t)v; break;
	case 4: *(uint32_t *)p = v > UINT32_MAX ? UINT32_MAX : (uint32_t)v; break;
	default: *(uint64_t *)p = v; break;
	}
}

/* s into k's field; a string is copied (a program's may not live as
 * long as the context; the environment's does).  -EINVAL if it is not
 * one of k's values, -ENOMEM. */
static int knob_set(struct smcr_ctx *ctx, const struct knob *k, const char *s, bool copy)
{
	void *f = (char *)ctx + k->off;
	uint64_t v;
	char *end;

	switch (k->type) {
	case KNOB_STR:
		if (copy) {
			unsigned int n = ctx->nknob_strs;

			if (n >= sizeof(ctx->knob_strs) / sizeof(ctx->knob_strs[0]) ||
			    !(ctx->knob_strs[n] = strdup(s)))
				return -ENOMEM;
			ctx->nknob_strs++;
			s = ctx->knob_strs[n];
		}
		*(const char **)f = s;
		return 0;
	case KNOB_ENUM:
		if (k->parse(s, &v))
			return -EINVAL;
		break;
	default:
		errno = 0;
		v = strtoull(s, &end, 0);
		if (errno || *end || end == s || *s == '-' || v < k->min || v > k->max)
			return -EINVAL;
		if (k->type == KNOB_BOOL)
			v = v != 0;
	}
	put_uint(f, k->size, v);
	return 0;
}

static const struct smcr_setting *setting_of(const struct smcr_setting *set, const char *name)
{
	for (; set && set->name; set++)
		if (!strcmp(set->name, name))
			return set;
	return NULL;
}

/* Every knob into its field (the order above); which were given goes
 * into ctx->knobs_set.  -EINVAL for an unknown name in opts.settings, a
 * value out of its range there, or a word a KNOB_ENUM does not know. */
static int knobs_apply(struct smcr_ctx *ctx)
{
	const struct smcr_setting *set = ctx->opts.settings, *st;
	unsigned int i;

	for (st = set; st && st->name; st++) {
		for (i = 0; i < sizeof(knobs) / sizeof(knobs[0]); i++)
			if (!strcmp(knobs[i].name, st->name))
				break;
		if (i == sizeof(knobs) / sizeof(knobs[0]) || !st->value) {
			smcr_err("engine: setting '%s': %s", st->name,
				 st->value ? "no such setting" : "no value");
			return -EINVAL;
		}
	}
	for (i = 0; i < sizeof(knobs) / sizeof(knobs[0]); i++) {
		const struct knob *k = &knobs[i];
		void *f = (char *)ctx + k->off;
		const char *opt = (const char *)&ctx->opts + k->opt_off, *s;
		size_t j;

		for (j = 0; j < k->opt_size && !opt[j]; j++)
			;
		if (j < k->opt_size) {
			/* The opts field wins (it may be the field itself). */
			if (k->off != offsetof(struct smcr_ctx, opts) + k->opt_off)
				put_uint(f, k->size, get_uint(opt, k->opt_size));
			ctx->knobs_set |= 1u << i;
			continue;
		}
		st = setting_of(set, k->name);
		if (st) {
			int ret = knob_set(ctx, k, st->value, true);

			if (ret == -ENOMEM)
				return ret;
			if (ret && k->what) {
				smcr_err("engine: setting %s: '%s' is not %s", k->name, st->value,
					 k->what);
				return -EINVAL;
			}
			if (ret) {
				smcr_err("engine: setting %s: '%s' is not a number in %llu..%llu",
					 k->name, st->value, (unsigned long long)k->min,
					 (unsigned long long)k->max);
				return -EINVAL;
			}
			ctx->knobs_set |= 1u << i;
			continue;
		}
		s = k->env ? getenv(k->env) : NULL;
		if (s && *s) {
			if (!knob_set(ctx, k, s, false)) {
				ctx->knobs_set |= 1u << i;
				continue;
			}
			if (k->type == KNOB_ENUM) {
				smcr_err("engine: %s: '%s' is not %s", k->env, s, k->what);
				return -EINVAL;
			}
			/* As before the table: a number that is not one is
			 * the default. */
			smcr_warn("engine: %s: '%s' is not a number in %llu..%llu, using the default",
				  k->env, s, (unsigned long long)k->min, (unsigned long long)k->max);
		}
		put_uint(f, k->size, k->dflt);
	}
	return 0;
}

/* Whether the knob of that name was given (opts, settings or environment). */
static bool knob_given(const struct smcr_ctx *ctx, const char *name)
{
	unsigned int i;

	for (i = 0; i < sizeof(knobs) / sizeof(knobs[0]); i++)
		if (!strcmp(knobs[i].name, name))
			return ctx->knobs_set & (1u << i);
	return false;
}

/* ---- version ----------------------------------------------------------------- */

/* The interface this library is (its newest node in libsmcr.syms), as
 * liburing's io_uring_major_version()/io_uring_check_version(). */
int smcr_version_major(void)
{
	return SMCR_VERSION_MAJOR;
}

int smcr_version_minor(void)
{
	return SMCR_VERSION_MINOR;
}

int smcr_check_version(int major, int minor)
{
	return major == SMCR_VERSION_MAJOR && minor >= 0 && minor <= SMCR_VERSION_MINOR ?
	       0 : -ENOTSUP;
}

/* ---- create and destroy ---------------------------------------------------- */

static void knob_strs_free(struct smcr_ctx *ctx)
{
	while (ctx->nknob_strs)
		free(ctx->knob_strs[--ctx->nknob_strs]);
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
	if (opts) {
		ret = smcr_abi_in(&ctx->opts, sizeof(ctx->opts), opts, opts_size);
		if (ret) {
			smcr_err("engine: smcr_ctx_opts of %zu bytes sets fields after our %zu",
				 opts_size, sizeof(ctx->opts));
			free(ctx);
			return ret;
		}
	}
	if (ctx->opts.log_fn)
		smcr_log_set_fn(ctx->opts.log_fn, ctx->opts.log_opaque);
	ctx->lgr_cfg = smcr_lgr_config_default;
	ctx->qp_timing = smcr_qp_timing_default;
	ret = knobs_apply(ctx);
	if (!ret)
		ret = eids_from_spec(ctx, ctx->opts.eids ? ctx->opts.eids : "");
	if (ret) {
		knob_strs_free(ctx);
		free(ctx);
		return ret;
	}
	ctx->lgr_cfg.pinned = &ctx->pinned;
	/* The last link's TEST LINK limit: last_link_timeout_ms, else
	 * three TEST LINK timeouts; never below the RC retry budget (a
	 * peer whose QP still retries may only be stopped). */
	{
		uint64_t budget = ((4096ull << ctx->qp_timing.timeout) / 1000000u + 1) *
				  (1u + (ctx->qp_timing.retry_cnt > 6 ? 6 : ctx->qp_timing.retry_cnt));
		uint64_t last = knob_given(ctx, "last_link_timeout_ms") ?
				ctx->lgr_cfg.last_link_timeout_ms :
				3ull * ctx->lgr_cfg.test_link_timeout_ms;

		if (last < budget + 1000)
			last = budget + 1000;
		ctx->lgr_cfg.last_link_timeout_ms = (uint32_t)(last > UINT32_MAX ? UINT32_MAX : last);
	}
	ret = smcr_engine_open(ctx);
	if (ret) {
		knob_strs_free(ctx);
		free(ctx);
		return ret;
	}
	env = ctx->fault_spec;
	if (env) {
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
	knob_strs_free(ctx);
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
	knob_strs_free(ctx);
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
	st->pinned_bytes = ctx->pinned.bytes;
	st->max_pinned_bytes = ctx->pinned.max;
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

		bool v21 = lgr->version == 2 && lgr->release >= SMCR_CLC_RELEASE_1;

		off = json ? strbuf_out(buf, len, off, "%s{\"role\":\"%s\",\"version\":%u,\"release\":%u,\"max_conns\":%u,\"max_links\":%u,\"terminated\":%s,\"connections\":%u,\"rmbe_layout\":\"%s\",\"links\":[",
				 g ? "," : "", lgr->role == SMCR_ROLE_SERVER ? "server" : "client",
				 lgr->version, lgr->release, lgr->max_conns, lgr->max_links,
				 lgr->terminated ? "true" : "false", lgr->nconns, layout) :
			     strbuf_out(buf, len, off, "link group %u: %s, %u connection(s)%s, RMBE layout %s, SMC-R%s (max_conns %u, max_links %u)\n", g,
				 lgr->role == SMCR_ROLE_SERVER ? "server" : "client",
				 lgr->nconns, lgr->terminated ? ", terminated" : "", layout,
				 v21 ? "v2.1" : lgr->version == 2 ? "v2" : "v1",
				 lgr->max_conns, lgr->max_links);
		for (i = 0; i < SMCR_LINK_SLOTS; i++) {
			struct smcr_lgr_link *ll = &lgr->links[i];
			char lg[48], pg[48];

			if (!ll->link)
				continue;
			gid_str(ll->local.gid, lg, sizeof(lg));
			gid_str(ll->peer.gid, pg, sizeof(pg));
			off = json ? strbuf_out(buf, len, off,
					 "%s{\"id\":%u,\"state\":\"%s\",\"device\":\"%s\",\"local_gid\":\"%s\",\"peer_gid\":\"%s\",\"qpn\":%u,\"peer_qpn\":%u,\"asym\":%s,\"connections\":%u,\"writes\":%llu,\"sends\":%llu,\"recvs\":%llu,\"doorbells\":%llu}",
					 nl++ ? "," : "", ll->link->link_id,
					 link_state_str(ll->link->state),
					 ll->link->dev ? ll->link->dev->name : "-", lg, pg,
					 ll->local.qpn, ll->peer.qpn, ll->asym ? "true" : "false",
					 ll->link->nconns,
					 (unsigned long long)ll->link->writes,
					 (unsigned long long)ll->link->sends,
					 (unsigned long long)ll->link->recvs,
					 (unsigned long long)ll->link->doorbells) :
				     strbuf_out(buf, len, off,
					 "  link %u %-8s %s %s -> %s qpn %u -> %u%s, %u conn(s), %llu writes, %llu sends, %llu recvs, %llu doorbells\n",
					 ll->link->link_id, link_state_str(ll->link->state),
					 ll->link->dev ? ll->link->dev->name : "-", lg, pg,
					 ll->local.qpn, ll->peer.qpn, ll->asym ? " (asym)" : "",
					 ll->link->nconns,
					 (unsigned long long)ll->link->writes,
					 (unsigned long long)ll->link->sends,
					 (unsigned long long)ll->link->recvs,
					 (unsigned long long)ll->link->doorbells);
		}
		rmbes = rmbs = sndbufs = sndbuf_rmbs = 0;
		pool_usage(&lgr->rmbs, &rmbes, &rmbs);
		pool_usage(&lgr->sndbufs, &sndbufs, &sndbuf_rmbs);
		off = strbuf_out(buf, len, off, json ? "],\"stats\":{\"failovers\":%llu,\"links_added\":%llu,\"links_deleted\":%llu,\"link_failures\":%llu,\"llc_sent\":%llu,\"llc_recv\":%llu,\"rmbs\":%llu,\"rmbes_in_use\":%llu,\"sndbufs_in_use\":%llu,\"pinned\":%llu}}" :
			  "  failovers %llu, links added %llu, deleted %llu, failed %llu, LLC sent %llu, received %llu\n"
			  "  %llu RMB(s), %llu RMB element(s) and %llu send buffer(s) in use, %llu bytes pinned\n",
			  (unsigned long long)lgr->stats.failovers,
			  (unsigned long long)lgr->stats.links_added,
			  (unsigned long long)lgr->stats.links_deleted,
			  (unsigned long long)lgr->stats.link_failures,
			  (unsigned long long)lgr->stats.llc_sent,
			  (unsigned long long)lgr->stats.llc_recv,
			  (unsigned long long)rmbs, (unsigned long long)rmbes,
			  (unsigned long long)sndbufs,
			  (unsigned long long)(lgr->rmbs.bytes + lgr->sndbufs.bytes));
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
		/* The same values either way: JSON, or a line of text.
		 * pinned: our RMBE and our send buffer (as large as the
		 * peer's RMBE), whole elements. */
		off = strbuf_out(buf, len, off, json ?
				 "%s{\"smc\":true,\"token\":%u,\"link\":%u,\"rmbe\":%u,\"peer_rmbe\":%u,\"pinned\":%llu,\"rx_prod\":[%u,%u],\"rx_cons\":[%u,%u],\"tx_prod\":[%u,%u],\"tx_peer_cons\":[%u,%u],\"bytes_sent\":%llu,\"bytes_recv\":%llu,\"failovers\":%llu}" :
				 "%sconnection %08x: link %u, RMBE %u, peer RMBE %u, pinned %llu, rx prod %u:%u cons %u:%u, tx prod %u:%u peer cons %u:%u, sent %llu, received %llu, failovers %llu\n",
				 json && g++ ? "," : "", s->conn.token,
				 s->conn.link ? s->conn.link->link_id : 0,
				 s->conn.rmbe.data_len + s->conn.rx_eye,
				 s->conn.tx_len + s->conn.tx_eye,
				 (unsigned long long)s->conn.rmbe.data_len + s->conn.rx_eye +
				 s->conn.tx_len + s->conn.tx_eye,
				 s->conn.rx_prod.wrap, s->conn.rx_prod.count,
				 s->conn.rx_cons.wrap, s->conn.rx_cons.count,
				 s->conn.tx_prod.wrap, s->conn.tx_prod.count,
				 s->conn.tx_peer_cons.wrap, s->conn.tx_peer_cons.count,
				 (unsigned long long)s->conn.stats.bytes_sent,
				 (unsigned long long)s->conn.stats.bytes_recv,
				 (unsigned long long)s->conn.stats.failovers);
	}
	off = json ? strbuf_out(buf, len, off, "],\"pinned_bytes\":%llu,\"max_pinned_bytes\":%llu}\n",
				(unsigned long long)ctx->pinned.bytes,
				(unsigned long long)ctx->pinned.max) :
		     strbuf_out(buf, len, off, "pinned memory: %llu bytes (limit %llu; 0: none)\n",
				(unsigned long long)ctx->pinned.bytes,
				(unsigned long long)ctx->pinned.max);
	pthread_mutex_unlock(&ctx->lock);
	return off >= len ? -ENOSPC : (int)off;
}
