/* smcrbd: unit tests for libsmcr. */
#include <config.h>

#include <stdlib.h>

#include "unit.h"
#include "smcr-suites.h"
#include "log.h"

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

static const struct unit_suite suites[] = {
	{ "log", log_tests },
	{ "rmb", smcr_rmb_tests },
	{ "conn", smcr_conn_tests },
	{ "lgr", smcr_lgr_tests },
	{ "clc", smcr_clc_tests },
	{ NULL, NULL },
};

int main(int argc, char **argv)
{
	return unit_main(argc, argv, suites);
}
