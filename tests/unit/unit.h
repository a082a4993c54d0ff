/* SPDX-License-Identifier: BSD-3-Clause */
/* smcrbd: a small CUnit front end shared by the unit test programs. */
#ifndef SMCR_TESTS_UNIT_H
#define SMCR_TESTS_UNIT_H

#include <CUnit/CUnit.h>

struct unit_suite {
	const char *name;
	CU_TestInfo *tests;
	/* Fixtures: run before the suite's first test and after its last
	 * (NULL: none); non-zero from init fails the suite. */
	CU_InitializeFunc init;
	CU_CleanupFunc cleanup;
};

/* Runs every suite (basic runner, verbose), prints the summary and returns
 * the process exit status: 0 if all assertions passed, 1 otherwise.
 * argv[1], if given, runs only the suite of that name. */
int unit_main(int argc, char **argv, const struct unit_suite *suites);

#endif
