/* SPDX-License-Identifier: BSD-3-Clause */
/* smcrbd: libFuzzer target for the TCP option parsers
 * (smcr_tcpopt_find, smcr_tcpopt_find_in_tcphdr). */
#include <config.h>

#include "fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	int rc;

	rc = smcr_tcpopt_find(data, size);
	FUZZ_REQUIRE(rc == 0 || rc == 1 || rc == SMCR_E_TRUNC || rc == SMCR_E_LENGTH);
	rc = smcr_tcpopt_find_in_tcphdr(data, size);
	FUZZ_REQUIRE(rc == 0 || rc == 1 || rc == SMCR_E_TRUNC || rc == SMCR_E_LENGTH);
	return 0;
}
