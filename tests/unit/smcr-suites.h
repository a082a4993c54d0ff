/* SPDX-License-Identifier: BSD-3-Clause */
/* smcrbd: the test arrays of the libsmcr unit test program. */
#ifndef SMCR_TESTS_SMCR_SUITES_H
#define SMCR_TESTS_SMCR_SUITES_H

#include <CUnit/CUnit.h>

extern CU_TestInfo smcr_rmb_tests[];
extern CU_TestInfo smcr_conn_tests[];
extern CU_TestInfo smcr_lgr_tests[];
extern CU_TestInfo smcr_clc_tests[];
int smcr_clc_suite_init(void);
int smcr_clc_suite_cleanup(void);
extern CU_TestInfo smcr_hostile_tests[];
extern CU_TestInfo smcr_dev_tests[];

#endif
