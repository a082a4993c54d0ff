/* SPDX-License-Identifier: BSD-3-Clause */
/* smcrbd: libFuzzer target for the LLC decoder (smcr_llc_decode), and the
 * SMC-Rv2 ADD LINK extension (RKeys) of a whole v2 message. */
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
	if (m1.type == SMCR_LLC_ADD_LINK && m1.version == SMCR_LLC_VERSION_2) {
		static struct smcr_llc_rtoken_pair p1[SMCR_LLC_V2_MAX_RKEYS], p2[SMCR_LLC_V2_MAX_RKEYS];
		static uint8_t buf[SMCR_LLC_V2_MAX_LEN];
		struct smcr_llc_add_link_v2_ext e1, e2;
		int n;

		rc = smcr_llc_add_link_v2_ext_decode(data, size, &e1, p1, SMCR_LLC_V2_MAX_RKEYS);
		FUZZ_REQUIRE(rc == e1.num_rkeys || fuzz_known_error(rc));
		if (rc < 0)
			return 0;
		n = smcr_llc_add_link_v2_encode(&m1, &e1, p1, buf, sizeof(buf));
		FUZZ_REQUIRE(n == SMCR_LLC_LEN + SMCR_LLC_ADD_LINK_V2_EXT_LEN + 16 * rc);
		FUZZ_REQUIRE(smcr_llc_decode(buf, (size_t)n, &m2) == SMCR_LLC_LEN && m2.length == n);
		FUZZ_REQUIRE(smcr_llc_add_link_v2_ext_decode(buf, (size_t)n, &e2, p2,
							     SMCR_LLC_V2_MAX_RKEYS) == rc);
		FUZZ_REQUIRE(memcmp(&e1, &e2, sizeof(e1)) == 0 &&
			     memcmp(p1, p2, sizeof(p1[0]) * (size_t)rc) == 0);
	}
	return 0;
}
