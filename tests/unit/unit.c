/* SPDX-License-Identifier: BSD-3-Clause */
/* smcrbd: a small CUnit front end shared by the unit test programs.
 * Arguments: [SUITE [TEXT]]: that suite only, and of it the tests whose
 * names contain TEXT. */
#include <config.h>

#include <stdio.h>
#include <string.h>

#include <CUnit/Basic.h>

#include "unit.h"

int unit_main(int argc, char **argv, const struct unit_suite *suites)
{
	unsigned int failures, ran;
	int rc = 1;

	if (CU_initialize_registry() != CUE_SUCCESS) {
		fprintf(stderr, "CUnit: %s\n", CU_get_error_msg());
		return 1;
	}
	for (; suites->name; suites++) {
		CU_pSuite s;
		CU_TestInfo *t;

		if (argc > 1 && strcmp(argv[1], suites->name) != 0)
			continue;
		s = CU_add_suite(suites->name, suites->init, suites->cleanup);
		if (!s)
			goto out_cleanup;
		for (t = suites->tests; t->pName; t++)
			if ((argc <= 2 || strstr(t->pName, argv[2])) &&
			    !CU_add_test(s, t->pName, t->pTestFunc))
				goto out_cleanup;
	}
	CU_basic_set_mode(CU_BRM_VERBOSE);
	if (CU_basic_run_tests() != CUE_SUCCESS)
		goto out_cleanup;
	failures = CU_get_number_of_failures() + CU_get_number_of_tests_failed();
	ran = CU_get_number_of_tests_run();
	printf("\n%u tests run, %u assertions, %u failed\n", ran,
	       CU_get_number_of_asserts(), CU_get_number_of_failures());
	/* A program that ran no test passes nothing. */
	rc = (failures == 0 && ran > 0) ? 0 : 1;
out_cleanup:
	if (CU_get_error() != CUE_SUCCESS)
		fprintf(stderr, "CUnit: %s\n", CU_get_error_msg());
	CU_cleanup_registry();
	return rc;
}
