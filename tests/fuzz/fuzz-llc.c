/* SPDX-License-Identifier: BSD-3-Clause */
/* smcrbd: libFuzzer target for the LLC decoder (smcr_llc_decode). */
#include <config.h>

#include <string.h>

#include "fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct smcr_llc_msg m1, m2;
	uint8_t out1[SMCR_LLC_LEN], out2[SMCR_LLC_LEN];
	int rc;

	rc = smcr_llc_decode(data, size, &m1);
	FUZZ_REQUIRE(rc == SMCR_LLC_LEN || fuzz_known_error(rc));
	if (rc < 0)
		return 0;
	FUZZ_REQUIRE(!smcr_wr_is_cdc(data, size));
	FUZZ_REQUIRE(smcr_llc_encode(&m1, out1, sizeof(out1)) == SMCR_LLC_LEN);
	FUZZ_REQUIRE(out1[0] == data[0] && out1[1] == SMCR_LLC_LEN);
	FUZZ_REQUIRE(smcr_llc_decode(out1, sizeof(out1), &m2) == SMCR_LLC_LEN);
	FUZZ_REQUIRE(smcr_llc_encode(&m2, out2, sizeof(out2)) == SMCR_LLC_LEN);
	FUZZ_REQUIRE(memcmp(out1, out2, sizeof(out1)) == 0);
	return 0;
}
