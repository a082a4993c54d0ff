/* SPDX-License-Identifier: BSD-3-Clause */
/* smcrbd: unit tests for libsmcr. */
#include <config.h>

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "unit.h"
#include "smcr-suites.h"
#include "abi.h"
#include "engine.h"
#include "log.h"
#include "smcr.h"
#include "synopt.h"

static void test_log_level_env(void)
{
	smcr_log_set_level(SMCR_LOG_WARN);
	CU_ASSERT_EQUAL(smcr_log_get_level(), SMCR_LOG_WARN);
	smcr_log_set_level(SMCR_LOG_DEBUG);
	CU_ASSERT_EQUAL(smcr_log_get_level(), SMCR_LOG_DEBUG);
	smcr_log_set_level(SMCR_LOG_INFO);
}

static CU_TestInfo log_tests[] = {
	{ "level", test_log_level_env },
	CU_TEST_INFO_NULL,
};

static void test_synopt_parse(void)
{
	static const char *const names[] = { "auto", "bpf", "off" };
	enum smcr_syn_option m = SMCR_SYN_OPTION_OFF;
	unsigned int i;

	for (i = 0; i < 3; i++) {
		CU_ASSERT_EQUAL(smcr_syn_option_parse(names[i], &m), 0);
		CU_ASSERT_EQUAL((unsigned int)m, i);
		CU_ASSERT_STRING_EQUAL(smcr_syn_option_str(m), names[i]);
	}
	m = SMCR_SYN_OPTION_OFF;
	CU_ASSERT_EQUAL(smcr_syn_option_parse(NULL, &m), 0);
	CU_ASSERT_EQUAL(m, SMCR_SYN_OPTION_AUTO);
	m = SMCR_SYN_OPTION_OFF;
	CU_ASSERT_EQUAL(smcr_syn_option_parse("", &m), 0);
	CU_ASSERT_EQUAL(m, SMCR_SYN_OPTION_AUTO);
	m = SMCR_SYN_OPTION_OFF;
	CU_ASSERT_EQUAL(smcr_syn_option_parse("on", &m), -EINVAL);
	CU_ASSERT_EQUAL(smcr_syn_option_parse("BPF", &m), -EINVAL);
	CU_ASSERT_EQUAL(smcr_syn_option_parse("off ", &m), -EINVAL);
	CU_ASSERT_EQUAL(m, SMCR_SYN_OPTION_OFF);	/* untouched */
}

/* Which mode a context ends up in: the option, the environment, no_smc. */
static int ctx_mode(enum smcr_syn_option opt, const char *env, bool no_smc,
		    enum smcr_syn_option *mode, char *dump, size_t len)
{
	struct smcr_ctx_opts o = { .syn_option = opt, .no_smc = no_smc };
	struct smcr_ctx *ctx;
	int ret;

	if (env)
		setenv("SMCR_SYN_OPTION", env, 1);
	else
		unsetenv("SMCR_SYN_OPTION");
	ret = smcr_ctx_create(&o, &ctx);
	unsetenv("SMCR_SYN_OPTION");
	if (ret)
		return ret;
	*mode = smcr_ctx_syn_option(ctx);
	CU_ASSERT(smcr_ctx_dump(ctx, dump, len, false) > 0);
	smcr_ctx_destroy(ctx);
	return 0;
}

static void test_synopt_mode(void)
{
	enum smcr_syn_option m;
	char dump[4096];
	int ret;

	/* off: by option, by environment; the option wins over the
	 * environment; a context without SMC-R needs no option. */
	CU_ASSERT_EQUAL(ctx_mode(SMCR_SYN_OPTION_OFF, NULL, false, &m, dump, sizeof(dump)), 0);
	CU_ASSERT_EQUAL(m, SMCR_SYN_OPTION_OFF);
	CU_ASSERT_PTR_NOT_NULL(strstr(dump, "SYN option: off, CLC always (syn-option=off)"));
	CU_ASSERT_EQUAL(ctx_mode(SMCR_SYN_OPTION_AUTO, "off", false, &m, dump, sizeof(dump)), 0);
	CU_ASSERT_EQUAL(m, SMCR_SYN_OPTION_OFF);
	CU_ASSERT_EQUAL(ctx_mode(SMCR_SYN_OPTION_OFF, "bpf", false, &m, dump, sizeof(dump)), 0);
	CU_ASSERT_EQUAL(m, SMCR_SYN_OPTION_OFF);
	CU_ASSERT_EQUAL(ctx_mode(SMCR_SYN_OPTION_AUTO, "auto", true, &m, dump, sizeof(dump)), 0);
	CU_ASSERT_EQUAL(m, SMCR_SYN_OPTION_OFF);
	CU_ASSERT_PTR_NOT_NULL(strstr(dump, "(no SMC-R (TCP only))"));
	/* A bad environment value is an error, not a silent default. */
	CU_ASSERT_EQUAL(ctx_mode(SMCR_SYN_OPTION_AUTO, "yes", false, &m, dump, sizeof(dump)),
			-EINVAL);
	/* auto never fails; bpf is on or fails, as auto decided. */
	CU_ASSERT_EQUAL(ctx_mode(SMCR_SYN_OPTION_AUTO, NULL, false, &m, dump, sizeof(dump)), 0);
	if (m == SMCR_SYN_OPTION_BPF) {
		CU_ASSERT_PTR_NOT_NULL(strstr(dump, "SYN option: bpf"));
		CU_ASSERT_EQUAL(ctx_mode(SMCR_SYN_OPTION_BPF, NULL, false, &m, dump,
					 sizeof(dump)), 0);
		CU_ASSERT_EQUAL(m, SMCR_SYN_OPTION_BPF);
	} else {
		CU_ASSERT_EQUAL(m, SMCR_SYN_OPTION_OFF);
		ret = ctx_mode(SMCR_SYN_OPTION_BPF, NULL, false, &m, dump, sizeof(dump));
		CU_ASSERT(ret < 0);
	}
}

static CU_TestInfo synopt_tests[] = {
	{ "parse", test_synopt_parse },
	{ "mode", test_synopt_mode },
	CU_TEST_INFO_NULL,
};

/* ctx.c's settings table: a field of the opts wins, then opts.settings,
 * then the environment, then the default. */
static void test_settings_order(void)
{
	struct smcr_setting set[] = {
		{ "qp_timeout", "14" }, { "llc_timeout_ms", "4000" },
		{ "link_policy", "round-robin" }, { "rebalance", "0" },
		{ "devices", "nosuchdev" }, { NULL, NULL },
	};
	struct smcr_ctx_opts o = { .no_smc = true, .settings = set };
	struct smcr_ctx *ctx;

	setenv("SMCR_QP_TIMEOUT", "12", 1);
	setenv("SMCR_LINK_TX_BYTES", "65536", 1);
	setenv("SMCR_LLC_TIMEOUT_MS", "5000", 1);
	o.llc_timeout_ms = 3000;
	CU_ASSERT_FATAL(smcr_ctx_create(&o, &ctx) == 0);
	CU_ASSERT_EQUAL(ctx->qp_timing.timeout, 14);		/* settings over env */
	CU_ASSERT_EQUAL(ctx->lgr_cfg.link_tx_bytes, 65536);	/* env */
	CU_ASSERT_EQUAL(ctx->lgr_cfg.llc_timeout_ms, 3000);	/* the opts field */
	CU_ASSERT_EQUAL(ctx->lgr_cfg.link_policy, SMCR_LINKS_ROUND_ROBIN);
	CU_ASSERT_FALSE(ctx->lgr_cfg.rebalance);
	CU_ASSERT_EQUAL(ctx->qp_timing.retry_cnt, smcr_qp_timing_default.retry_cnt);
	/* A copy: the program's array may go. */
	CU_ASSERT_STRING_EQUAL(ctx->opts.devices, "nosuchdev");
	CU_ASSERT_PTR_NOT_EQUAL(ctx->opts.devices, set[4].value);
	smcr_ctx_destroy(ctx);
	o.llc_timeout_ms = 0;
	o.settings = NULL;
	CU_ASSERT_FATAL(smcr_ctx_create(&o, &ctx) == 0);
	CU_ASSERT_EQUAL(ctx->qp_timing.timeout, 12);
	CU_ASSERT_EQUAL(ctx->lgr_cfg.llc_timeout_ms, 5000);
	CU_ASSERT_EQUAL(ctx->lgr_cfg.link_policy, SMCR_LINKS_LEAST_LOADED);
	CU_ASSERT_TRUE(ctx->lgr_cfg.rebalance);
	smcr_ctx_destroy(ctx);
	/* An environment value out of range is the default, as before. */
	setenv("SMCR_QP_TIMEOUT", "40", 1);
	CU_ASSERT_FATAL(smcr_ctx_create(&o, &ctx) == 0);
	CU_ASSERT_EQUAL(ctx->qp_timing.timeout, smcr_qp_timing_default.timeout);
	CU_ASSERT_EQUAL(ctx->lgr_cfg.llc_timeout_ms, 5000);
	smcr_ctx_destroy(ctx);
	unsetenv("SMCR_QP_TIMEOUT");
	unsetenv("SMCR_LINK_TX_BYTES");
	unsetenv("SMCR_LLC_TIMEOUT_MS");
}

static void test_settings_bad(void)
{
	struct smcr_setting unknown[] = { { "qp_timeoutt", "14" }, { NULL, NULL } };
	struct smcr_setting range[] = { { "qp_timeout", "40" }, { NULL, NULL } };
	struct smcr_setting word[] = { { "syn_option", "yes" }, { NULL, NULL } };
	struct smcr_setting num[] = { { "link_tx_bytes", "64k" }, { NULL, NULL } };
	struct smcr_ctx_opts o = { .no_smc = true };
	struct smcr_ctx *ctx = NULL;

	o.settings = unknown;
	CU_ASSERT_EQUAL(smcr_ctx_create(&o, &ctx), -EINVAL);
	o.settings = range;
	CU_ASSERT_EQUAL(smcr_ctx_create(&o, &ctx), -EINVAL);
	o.settings = word;
	CU_ASSERT_EQUAL(smcr_ctx_create(&o, &ctx), -EINVAL);
	o.settings = num;
	CU_ASSERT_EQUAL(smcr_ctx_create(&o, &ctx), -EINVAL);
	CU_ASSERT_PTR_NULL(ctx);
}

/* The last link's limit: 3 TEST LINK timeouts unless given, never below
 * the RC retry budget (19, 6 retries: 7 * 2148 ms + 1 s). */
static void test_settings_last_link(void)
{
	struct smcr_setting set[] = { { "last_link_timeout_ms", "0" }, { NULL, NULL } };
	struct smcr_setting big[] = { { "last_link_timeout_ms", "60000" }, { NULL, NULL } };
	struct smcr_ctx_opts o = { .no_smc = true, .test_link_timeout_ms = 9000 };
	struct smcr_ctx *ctx;

	CU_ASSERT_FATAL(smcr_ctx_create(&o, &ctx) == 0);
	CU_ASSERT_EQUAL(ctx->lgr_cfg.last_link_timeout_ms, 27000);
	smcr_ctx_destroy(ctx);
	o.settings = set;
	CU_ASSERT_FATAL(smcr_ctx_create(&o, &ctx) == 0);
	CU_ASSERT_EQUAL(ctx->lgr_cfg.last_link_timeout_ms, 7 * 2148 + 1000);
	smcr_ctx_destroy(ctx);
	o.settings = big;
	CU_ASSERT_FATAL(smcr_ctx_create(&o, &ctx) == 0);
	CU_ASSERT_EQUAL(ctx->lgr_cfg.last_link_timeout_ms, 60000);
	smcr_ctx_destroy(ctx);
}

/* max_links, clc_timeout_ms, link_wait_ms and no_smc: by opts field or by
 * name, else their defaults; an opts max_links wider than the config's
 * byte is its largest, which a link group makes 8 (256 was 0, then 2). */
static void test_settings_links_clc(void)
{
	static const struct smcr_lgr_ops no_ops;
	struct smcr_setting set[] = {
		{ "max_links", "3" }, { "clc_timeout_ms", "700" }, { "link_wait_ms", "900" },
		{ NULL, NULL },
	};
	struct smcr_setting bad[] = { { "max_links", "9" }, { NULL, NULL } };
	struct smcr_setting nosmc[] = { { "no_smc", "1" }, { NULL, NULL } };
	static const struct { unsigned int opt; uint8_t cfg, lgr; } links[] = {
		{ 0, 2, 2 }, { 1, 1, 2 }, { 5, 5, 5 }, { 9, 9, 8 }, { 256, 255, 8 },
		{ 257, 255, 8 }, { UINT32_MAX, 255, 8 },
	};
	struct smcr_ctx_opts o = { .no_smc = true };
	struct smcr_ctx *ctx;
	struct smcr_lgr *lgr;
	unsigned int i;

	CU_ASSERT_FATAL(smcr_ctx_create(&o, &ctx) == 0);
	CU_ASSERT_EQUAL(ctx->lgr_cfg.max_links, 2);
	CU_ASSERT_EQUAL(ctx->opts.clc_timeout_ms, 2000);
	CU_ASSERT_EQUAL(ctx->opts.link_wait_ms, 5000);
	smcr_ctx_destroy(ctx);
	for (i = 0; i < sizeof(links) / sizeof(links[0]); i++) {
		o.max_links = links[i].opt;
		CU_ASSERT_FATAL(smcr_ctx_create(&o, &ctx) == 0);
		CU_ASSERT_EQUAL(ctx->lgr_cfg.max_links, links[i].cfg);
		CU_ASSERT_FATAL(smcr_lgr_create(SMCR_ROLE_SERVER, &no_ops, NULL,
						&ctx->lgr_cfg, &lgr) == 0);
		CU_ASSERT_EQUAL(lgr->max_links, links[i].lgr);
		smcr_lgr_destroy(lgr);
		smcr_ctx_destroy(ctx);
	}
	o.max_links = 0;
	o.settings = set;
	CU_ASSERT_FATAL(smcr_ctx_create(&o, &ctx) == 0);
	CU_ASSERT_EQUAL(ctx->lgr_cfg.max_links, 3);
	CU_ASSERT_EQUAL(ctx->opts.clc_timeout_ms, 700);
	CU_ASSERT_EQUAL(ctx->opts.link_wait_ms, 900);
	smcr_ctx_destroy(ctx);
	o.max_links = 4;	/* the field wins */
	o.clc_timeout_ms = 300;
	CU_ASSERT_FATAL(smcr_ctx_create(&o, &ctx) == 0);
	CU_ASSERT_EQUAL(ctx->lgr_cfg.max_links, 4);
	CU_ASSERT_EQUAL(ctx->opts.clc_timeout_ms, 300);
	CU_ASSERT_EQUAL(ctx->opts.link_wait_ms, 900);
	smcr_ctx_destroy(ctx);
	o.max_links = 0;
	o.settings = bad;	/* by name: 2..8 only */
	CU_ASSERT_EQUAL(smcr_ctx_create(&o, &ctx), -EINVAL);
	o = (struct smcr_ctx_opts){ .settings = nosmc };
	CU_ASSERT_FATAL(smcr_ctx_create(&o, &ctx) == 0);
	CU_ASSERT_TRUE(ctx->opts.no_smc);
	smcr_ctx_destroy(ctx);
}

/* A program of LIBSMCR_0.1 passes the smaller opts: what follows them in
 * its memory is not read as settings. */
static void test_settings_old_size(void)
{
	union {
		struct smcr_ctx_opts o;
		unsigned char b[sizeof(struct smcr_ctx_opts)];
	} u;
	struct smcr_ctx *ctx;

	memset(u.b, 0xa5, sizeof(u.b));
	memset(&u.o, 0, SMCR_CTX_OPTS_SIZE_0_1);
	u.o.no_smc = true;
	CU_ASSERT_FATAL(smcr_ctx_create_size(&u.o, SMCR_CTX_OPTS_SIZE_0_1, &ctx) == 0);
	CU_ASSERT_PTR_NULL(ctx->opts.settings);
	smcr_ctx_destroy(ctx);
}

static CU_TestInfo settings_tests[] = {
	{ "order", test_settings_order },
	{ "bad values", test_settings_bad },
	{ "last link", test_settings_last_link },
	{ "links and CLC", test_settings_links_clc },
	{ "old opts size", test_settings_old_size },
	CU_TEST_INFO_NULL,
};

/* A newer program's longer opts: zero beyond ours is fine, a byte set
 * there (a field this library does not know) is -EINVAL. */
static void test_abi_tail(void)
{
	union {
		struct smcr_ctx_opts o;
		unsigned char b[sizeof(struct smcr_ctx_opts) + 16];
	} u;
	unsigned char ours[8];
	const unsigned char theirs[12] = { 1, 2, 3, 4, 5, 6, 7, 8, 0, 0, 0, 9 };
	struct smcr_ctx *ctx = NULL;

	CU_ASSERT_EQUAL(smcr_abi_in(ours, sizeof(ours), theirs, 8), 0);
	CU_ASSERT_EQUAL(ours[7], 8);
	CU_ASSERT_EQUAL(smcr_abi_in(ours, sizeof(ours), theirs, 11), 0);
	CU_ASSERT_EQUAL(smcr_abi_in(ours, sizeof(ours), theirs, 12), -EINVAL);
	CU_ASSERT_EQUAL(smcr_abi_in(ours, sizeof(ours), theirs, 4), 0);
	CU_ASSERT_EQUAL(ours[3], 4);
	CU_ASSERT_EQUAL(ours[4], 0);	/* what the caller does not know: zero */
	memset(u.b, 0, sizeof(u.b));
	u.o.no_smc = true;
	CU_ASSERT_FATAL(smcr_ctx_create_size(&u.o, sizeof(u.b), &ctx) == 0);
	CU_ASSERT_TRUE(ctx->opts.no_smc);
	smcr_ctx_destroy(ctx);
	ctx = NULL;
	u.b[sizeof(u.b) - 1] = 1;
	CU_ASSERT_EQUAL(smcr_ctx_create_size(&u.o, sizeof(u.b), &ctx), -EINVAL);
	CU_ASSERT_PTR_NULL(ctx);
}

/* A flag bit the call does not know is -EINVAL before anything else
 * (the socket is not looked at). */
static void test_abi_flags(void)
{
	struct smcr_sock *s = (struct smcr_sock *)1;
	struct iovec iov[2];
	char c = 0;

	CU_ASSERT_EQUAL(smcr_send(s, &c, 1, 0x2), -EINVAL);
	CU_ASSERT_EQUAL(smcr_recv(s, &c, 1, SMCR_DONTWAIT | 0x100), -EINVAL);
	CU_ASSERT_EQUAL(smcr_reserve(s, iov, 0x80000000), -EINVAL);
	CU_ASSERT_EQUAL(smcr_reserve_len(s, 1, iov, 0x4), -EINVAL);
	CU_ASSERT_EQUAL(smcr_peek(s, iov, -1), -EINVAL);
	CU_ASSERT_EQUAL(smcr_cursor_update(s, 0x2), -EINVAL);
}

static void test_abi_version(void)
{
	CU_ASSERT_EQUAL(smcr_version_major(), SMCR_VERSION_MAJOR);
	CU_ASSERT_EQUAL(smcr_version_minor(), SMCR_VERSION_MINOR);
	CU_ASSERT_EQUAL(smcr_check_version(SMCR_VERSION_MAJOR, SMCR_VERSION_MINOR), 0);
	CU_ASSERT_EQUAL(smcr_check_version(0, 1), 0);
	CU_ASSERT_EQUAL(smcr_check_version(0, 0), 0);
	CU_ASSERT_EQUAL(smcr_check_version(SMCR_VERSION_MAJOR, SMCR_VERSION_MINOR + 1), -ENOTSUP);
	CU_ASSERT_EQUAL(smcr_check_version(SMCR_VERSION_MAJOR + 1, 0), -ENOTSUP);
	CU_ASSERT_EQUAL(smcr_check_version(0, -1), -ENOTSUP);
}

static CU_TestInfo abi_tests[] = {
	{ "opts tail", test_abi_tail },
	{ "unknown flags", test_abi_flags },
	{ "version", test_abi_version },
	CU_TEST_INFO_NULL,
};

static const struct unit_suite suites[] = {
	{ .name = "log", .tests = log_tests },
	{ .name = "synopt", .tests = synopt_tests },
	{ .name = "settings", .tests = settings_tests },
	{ .name = "abi", .tests = abi_tests },
	{ .name = "rmb", .tests = smcr_rmb_tests },
	{ .name = "conn", .tests = smcr_conn_tests },
	{ .name = "lgr", .tests = smcr_lgr_tests },
	{ .name = "clc", .tests = smcr_clc_tests, .init = smcr_clc_suite_init,
	  .cleanup = smcr_clc_suite_cleanup },
	{ .name = "hostile", .tests = smcr_hostile_tests },
	{ .name = "dev", .tests = smcr_dev_tests },
	{ .name = NULL },
};

int main(int argc, char **argv)
{
	return unit_main(argc, argv, suites);
}
