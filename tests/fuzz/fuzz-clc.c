/* SPDX-License-Identifier: BSD-3-Clause */
/* smcrbd: libFuzzer target for the CLC decoder (smcr_clc_hdr_decode,
 * smcr_clc_decode) and its v2 twin (smcr_clc_v2_decode). */
#include <config.h>

#include <string.h>

#include "fuzz.h"

static uint8_t out1[65536], out2[65536];
static struct smcr_clc_v2_msg v2a, v2b;

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct smcr_clc_hdr hdr;
	struct smcr_clc_msg m1, m2;
	int rc, n1, n2;

	rc = smcr_clc_hdr_decode(data, size, &hdr);
	FUZZ_REQUIRE(rc > 0 || fuzz_known_error(rc));
	if (rc == SMCR_E_VERSION)
		FUZZ_REQUIRE(hdr.version != 1 && hdr.length >= 8);

	/* v2: what decodes and is ours to send re-encodes to a fixed point */
	rc = smcr_clc_v2_decode(data, size, &v2a);
	FUZZ_REQUIRE(rc > 0 || fuzz_known_error(rc));
	if (rc > 0) {
		FUZZ_REQUIRE((size_t)rc <= size && rc == v2a.hdr.length && v2a.hdr.version >= 2);
		n1 = smcr_clc_v2_encode(&v2a, out1, sizeof(out1));
		FUZZ_REQUIRE(n1 > 0 || n1 == SMCR_E_INVAL);	/* e.g. an SMC-D offer */
		if (n1 > 0) {
			FUZZ_REQUIRE(smcr_clc_v2_decode(out1, (size_t)n1, &v2b) == n1);
			n2 = smcr_clc_v2_encode(&v2b, out2, sizeof(out2));
			FUZZ_REQUIRE(n2 == n1 && memcmp(out1, out2, (size_t)n1) == 0);
		}
	}

	rc = smcr_clc_decode(data, size, &m1);
	FUZZ_REQUIRE(rc > 0 || fuzz_known_error(rc));
	if (rc < 0)
		return 0;
	FUZZ_REQUIRE((size_t)rc <= size && rc == m1.hdr.length);
	FUZZ_REQUIRE(smcr_clc_decode_type(data, size, m1.hdr.type, &m2) == rc);

	n1 = smcr_clc_encode(&m1, out1, sizeof(out1));
	FUZZ_REQUIRE(n1 == rc);
	/* what we send differs from what we got in reserved bits and the
	 * growth area only: same type, same length */
	FUZZ_REQUIRE(out1[4] == data[4]);
	FUZZ_REQUIRE(smcr_clc_decode(out1, (size_t)n1, &m2) == n1);
	n2 = smcr_clc_encode(&m2, out2, sizeof(out2));
	FUZZ_REQUIRE(n2 == n1 && memcmp(out1, out2, (size_t)n1) == 0);
	return 0;
}
