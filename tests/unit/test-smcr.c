/* SPDX-License-Identifier: BSD-3-Clause */
/* smcrbd: unit tests for libsmcr. */
#include <config.h>

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "unit.h"
#include "smcr-suites.h"
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

static const struct unit_suite suites[] = {
	{ "log", log_tests },
	{ "synopt", synopt_tests },
	{ "rmb", smcr_rmb_tests },
	{ "conn", smcr_conn_tests },
	{ "lgr", smcr_lgr_tests },
	{ "clc", smcr_clc_tests },
	{ "hostile", smcr_hostile_tests },
	{ NULL, NULL },
};

int main(int argc, char **argv)
{
	return unit_main(argc, argv, suites);
}
