/* SPDX-License-Identifier: BSD-3-Clause */
/* smcrbd: libFuzzer target for the CDC decoder (smcr_cdc_decode) and the
 * cursor helpers applied to what it decodes. */
#include <config.h>

#include <string.h>

#include "cursor.h"
#include "fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct smcr_cdc_msg m1, m2;
	uint8_t out1[SMCR_CDC_LEN], out2[SMCR_CDC_LEN];
	int rc;

	rc = smcr_cdc_decode(data, size, &m1);
	FUZZ_REQUIRE(rc == SMCR_CDC_LEN || fuzz_known_error(rc));
	if (rc < 0)
		return 0;
	FUZZ_REQUIRE(smcr_wr_is_cdc(data, size));
	FUZZ_REQUIRE(smcr_cdc_encode(&m1, out1, sizeof(out1)) == SMCR_CDC_LEN);
	/* type .. token, and both cursors' wrap and count, come back as sent
	 * (the rest is flags and reserved bits) */
	FUZZ_REQUIRE(memcmp(out1, data, 8) == 0);
	FUZZ_REQUIRE(memcmp(out1 + 10, data + 10, 6) == 0);
	FUZZ_REQUIRE(memcmp(out1 + 18, data + 18, 6) == 0);
	FUZZ_REQUIRE(smcr_cdc_decode(out1, sizeof(out1), &m2) == SMCR_CDC_LEN);
	FUZZ_REQUIRE(smcr_cdc_encode(&m2, out2, sizeof(out2)) == SMCR_CDC_LEN);
	FUZZ_REQUIRE(memcmp(out1, out2, sizeof(out1)) == 0);

	/* cursor arithmetic on peer-supplied cursors: consistent, no UB */
	{
		uint32_t sz = smcr_rmb_size_decompress(m1.seqno & 0x0F);
		struct smcr_cdc_cursor a = m1.prod, b = m1.cons;

		a.count %= sz;
		b.count %= sz;
		/* antisymmetric, except exactly half the wrap space apart */
		if ((uint16_t)(b.wrap - a.wrap) != 0x8000) {
			FUZZ_REQUIRE(smcr_cursor_dist(sz, &a, &b) == -smcr_cursor_dist(sz, &b, &a));
			FUZZ_REQUIRE(smcr_cursor_cmp(sz, &a, &b) == -smcr_cursor_cmp(sz, &b, &a));
		}
		{
			struct smcr_cdc_cursor c = a;
			uint64_t n = m1.token % (4ull * sz);

			smcr_cursor_advance(sz, &c, n);
			FUZZ_REQUIRE(smcr_cursor_valid(sz, &c));
			FUZZ_REQUIRE(smcr_cursor_diff(sz, &a, &c) == n);
		}
		FUZZ_REQUIRE(smcr_seq_cmp(m1.prod.wrap, m1.cons.wrap) ==
			     -smcr_seq_cmp(m1.cons.wrap, m1.prod.wrap) ||
			     (uint16_t)(m1.prod.wrap - m1.cons.wrap) == 0x8000);
	}
	return 0;
}
