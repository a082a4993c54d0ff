/* SPDX-License-Identifier: BSD-3-Clause */
/* smcrbd: unit tests of the SMC-R wire formats (smcr/wire.h, smcr/msg.h,
 * smcr/cursor.h) against RFC 7609 Appendix A.
 *
 * Every message is checked the same way: a byte vector is built field by
 * field at the offsets of the RFC's figures (independently of wire.h), then
 *   - decoding it yields every field,
 *   - encoding the host struct reproduces the vector byte for byte,
 *   - every truncation of the vector is rejected (each decode runs on an
 *     exact-size heap copy, so ASan/valgrind catch any read past the end),
 *   - each kind of malformation is rejected with its own error. */
#include <config.h>

#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "unit.h"
#include "cursor.h"
#include "logline.h"
#include "msg.h"
#include "wire.h"

/* ---- field offsets, pinned at compile time ------------------------------ */

#define PIN(type, field, off) \
	_Static_assert(offsetof(struct type, field) == (off), #type "." #field " at " #off)

PIN(smcr_wire_tcpopt, kind, 0);
PIN(smcr_wire_tcpopt, len, 1);
PIN(smcr_wire_tcpopt, exid, 2);

/* CLC v2 (Linux net/smc/smc_clc.h) */
PIN(smcr_wire_clc_smcd_area, ism_gid, 0);
PIN(smcr_wire_clc_smcd_area, ism_chid, 8);
PIN(smcr_wire_clc_smcd_area, v2_ext_offset, 10);
PIN(smcr_wire_clc_smcd_area, reserved, 12);
PIN(smcr_wire_clc_v2_ext, eid_count, 0);
PIN(smcr_wire_clc_v2_ext, ism_gid_count, 1);
PIN(smcr_wire_clc_v2_ext, release_seid, 3);
PIN(smcr_wire_clc_v2_ext, smcd_v2_ext_offset, 6);
PIN(smcr_wire_clc_v2_ext, roce_gid, 8);
PIN(smcr_wire_clc_v2_ext, max_conns, 24);		/* SMC-Rv2.1 */
PIN(smcr_wire_clc_v2_ext, max_links, 25);
PIN(smcr_wire_clc_v2_ext, feature_mask, 26);
PIN(smcr_wire_clc_v2_ext, reserved3, 28);
PIN(smcr_wire_clc_accept_confirm_v2, qpn, 38);
PIN(smcr_wire_clc_accept_confirm_v2, rmb_vaddr, 52);
PIN(smcr_wire_clc_accept_confirm_v2, psn, 61);
PIN(smcr_wire_clc_accept_confirm_v2, eid, 64);
PIN(smcr_wire_clc_accept_confirm_v2, reserved3, 96);
PIN(smcr_wire_clc_fce, direct, 0);
PIN(smcr_wire_clc_fce, os_release, 1);
PIN(smcr_wire_clc_fce, hostname, 4);
/* smc_clc_first_contact_ext_v2x after its 36-byte v2.0 base */
PIN(smcr_wire_clc_fce_v2x, max_conns, 36 - 36);
PIN(smcr_wire_clc_fce_v2x, max_links, 37 - 36);
PIN(smcr_wire_clc_fce_v2x, feature_mask, 38 - 36);
PIN(smcr_wire_clc_fce_v2x, vendor_exp_options, 40 - 36);
PIN(smcr_wire_clc_fce_v2x, reserved, 44 - 36);
PIN(smcr_wire_clc_gid_list, gid_count, 52 - 52);
PIN(smcr_wire_clc_gid_list, reserved, 53 - 52);
PIN(smcr_wire_clc_decline_v2, diagnosis, 16);
PIN(smcr_wire_clc_decline_v2, os_type, 20);
PIN(smcr_wire_clc_decline_v2, diagnosis_v2, 24);
PIN(smcr_wire_clc_decline_v2, trailer, 40);

PIN(smcr_wire_clc_hdr, eyecatcher, 0);
PIN(smcr_wire_clc_hdr, type, 4);
PIN(smcr_wire_clc_hdr, length, 5);
PIN(smcr_wire_clc_hdr, version_flags, 7);
PIN(smcr_wire_peer_id, instance, 0);
PIN(smcr_wire_peer_id, mac, 2);

PIN(smcr_wire_clc_proposal_head, hdr, 0);
PIN(smcr_wire_clc_proposal_head, peer_id, 8);
PIN(smcr_wire_clc_proposal_head, gid, 16);
PIN(smcr_wire_clc_proposal_head, mac, 32);
PIN(smcr_wire_clc_proposal_head, ip_area_offset, 38);
PIN(smcr_wire_clc_ip_area, ipv4_subnet, 0);
PIN(smcr_wire_clc_ip_area, ipv4_mask_len, 4);
PIN(smcr_wire_clc_ip_area, reserved, 5);
PIN(smcr_wire_clc_ip_area, ipv6_prefix_count, 7);
PIN(smcr_wire_ipv6_prefix, prefix, 0);
PIN(smcr_wire_ipv6_prefix, prefix_len, 16);
PIN(smcr_wire_clc_proposal, head, 0);
PIN(smcr_wire_clc_proposal, ip, 40);
PIN(smcr_wire_clc_proposal, trailer, 48);

PIN(smcr_wire_clc_accept_confirm, hdr, 0);
PIN(smcr_wire_clc_accept_confirm, peer_id, 8);
PIN(smcr_wire_clc_accept_confirm, gid, 16);
PIN(smcr_wire_clc_accept_confirm, mac, 32);
PIN(smcr_wire_clc_accept_confirm, qpn, 38);
PIN(smcr_wire_clc_accept_confirm, rmb_rkey, 41);
PIN(smcr_wire_clc_accept_confirm, rmbe_idx, 45);
PIN(smcr_wire_clc_accept_confirm, rmbe_alert_token, 46);
PIN(smcr_wire_clc_accept_confirm, rmbe_size_mtu, 50);
PIN(smcr_wire_clc_accept_confirm, reserved1, 51);
PIN(smcr_wire_clc_accept_confirm, rmb_vaddr, 52);
PIN(smcr_wire_clc_accept_confirm, reserved2, 60);
PIN(smcr_wire_clc_accept_confirm, psn, 61);
PIN(smcr_wire_clc_accept_confirm, trailer, 64);

PIN(smcr_wire_clc_decline, hdr, 0);
PIN(smcr_wire_clc_decline, peer_id, 8);
PIN(smcr_wire_clc_decline, diagnosis, 16);
PIN(smcr_wire_clc_decline, reserved, 20);
PIN(smcr_wire_clc_decline, trailer, 24);

PIN(smcr_wire_llc_hdr, type, 0);
PIN(smcr_wire_llc_hdr, length, 1);
PIN(smcr_wire_llc_hdr, reserved, 2);
PIN(smcr_wire_llc_hdr, flags, 3);

PIN(smcr_wire_llc_confirm_link, mac, 4);
PIN(smcr_wire_llc_confirm_link, gid, 10);
PIN(smcr_wire_llc_confirm_link, qpn, 26);
PIN(smcr_wire_llc_confirm_link, link_num, 29);
PIN(smcr_wire_llc_confirm_link, link_uid, 30);
PIN(smcr_wire_llc_confirm_link, max_links, 34);
PIN(smcr_wire_llc_confirm_link, max_conns, 35);
PIN(smcr_wire_llc_confirm_link, reserved, 36);
PIN(smcr_wire_llc_confirm_link, impl, 42);

/* deployed layout, see the INTEROP note in wire.h */
PIN(smcr_wire_llc_add_link, mac, 4);
PIN(smcr_wire_llc_add_link, reserved1, 10);
PIN(smcr_wire_llc_add_link, gid, 12);
PIN(smcr_wire_llc_add_link, qpn, 28);
PIN(smcr_wire_llc_add_link, link_num, 31);
PIN(smcr_wire_llc_add_link, mtu, 32);
PIN(smcr_wire_llc_add_link, psn, 33);
PIN(smcr_wire_llc_add_link, reserved2, 36);

PIN(smcr_wire_llc_rtoken_pair, ref_rkey, 0);
PIN(smcr_wire_llc_rtoken_pair, new_rkey, 4);
PIN(smcr_wire_llc_rtoken_pair, new_vaddr, 8);
PIN(smcr_wire_llc_add_link_cont, link_num, 4);
PIN(smcr_wire_llc_add_link_cont, num_rtokens, 5);
PIN(smcr_wire_llc_add_link_cont, reserved1, 6);
PIN(smcr_wire_llc_add_link_cont, pair, 8);
PIN(smcr_wire_llc_add_link_cont, pair[1], 24);
PIN(smcr_wire_llc_add_link_cont, reserved2, 40);

PIN(smcr_wire_llc_delete_link, link_num, 4);
PIN(smcr_wire_llc_delete_link, reason, 5);
PIN(smcr_wire_llc_delete_link, reserved, 9);

PIN(smcr_wire_llc_rkey_spec, link_num, 0);
PIN(smcr_wire_llc_rkey_spec, rkey, 1);
PIN(smcr_wire_llc_rkey_spec, vaddr, 5);
PIN(smcr_wire_llc_confirm_rkey, num_tokens, 4);
PIN(smcr_wire_llc_confirm_rkey, rkey, 5);
PIN(smcr_wire_llc_confirm_rkey, vaddr, 9);
PIN(smcr_wire_llc_confirm_rkey, other, 17);
PIN(smcr_wire_llc_confirm_rkey, other[1], 30);
PIN(smcr_wire_llc_confirm_rkey, reserved, 43);
PIN(smcr_wire_llc_confirm_rkey_cont, num_left, 4);
PIN(smcr_wire_llc_confirm_rkey_cont, spec, 5);
PIN(smcr_wire_llc_confirm_rkey_cont, spec[1], 18);
PIN(smcr_wire_llc_confirm_rkey_cont, spec[2], 31);

PIN(smcr_wire_llc_delete_rkey, count, 4);
PIN(smcr_wire_llc_delete_rkey, err_mask, 5);
PIN(smcr_wire_llc_delete_rkey, reserved1, 6);
PIN(smcr_wire_llc_delete_rkey, rkey, 8);
PIN(smcr_wire_llc_delete_rkey, rkey[7], 36);
PIN(smcr_wire_llc_delete_rkey, reserved2, 40);

PIN(smcr_wire_llc_test_link, user_data, 4);
PIN(smcr_wire_llc_test_link, reserved, 20);

PIN(smcr_wire_cdc_cursor, reserved, 0);
PIN(smcr_wire_cdc_cursor, wrap, 2);
PIN(smcr_wire_cdc_cursor, count, 4);
PIN(smcr_wire_cdc, type, 0);
PIN(smcr_wire_cdc, length, 1);
PIN(smcr_wire_cdc, seqno, 2);
PIN(smcr_wire_cdc, token, 4);
PIN(smcr_wire_cdc, prod, 8);
PIN(smcr_wire_cdc, prod.wrap, 10);
PIN(smcr_wire_cdc, prod.count, 12);
PIN(smcr_wire_cdc, cons, 16);
PIN(smcr_wire_cdc, cons.wrap, 18);
PIN(smcr_wire_cdc, cons.count, 20);
PIN(smcr_wire_cdc, prod_flags, 24);
PIN(smcr_wire_cdc, conn_state, 25);
PIN(smcr_wire_cdc, reserved, 26);

/* ---- vector building ------------------------------------------------------ */

static void put8(uint8_t *v, size_t off, unsigned int x) { v[off] = (uint8_t)x; }
static void put16(uint8_t *v, size_t off, unsigned int x)
{
	v[off] = (uint8_t)(x >> 8);
	v[off + 1] = (uint8_t)x;
}
static void put24(uint8_t *v, size_t off, uint32_t x)
{
	v[off] = (uint8_t)(x >> 16);
	v[off + 1] = (uint8_t)(x >> 8);
	v[off + 2] = (uint8_t)x;
}
static void put32(uint8_t *v, size_t off, uint32_t x)
{
	put16(v, off, x >> 16);
	put16(v, off + 2, x & 0xFFFF);
}
static void put64(uint8_t *v, size_t off, uint64_t x)
{
	put32(v, off, (uint32_t)(x >> 32));
	put32(v, off + 4, (uint32_t)x);
}
static void putbytes(uint8_t *v, size_t off, const uint8_t *b, size_t n)
{
	memcpy(v + off, b, n);
}
static void put_eyecatcher(uint8_t *v, size_t off)
{
	put32(v, off, 0xE2D4C3D9);
}

static const uint8_t gid_a[16] = {
	0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0x02, 0x11, 0x22, 0xff, 0xfe, 0x33, 0x44, 0x55,
};
static const uint8_t gid_b[16] = {
	0x20, 0x01, 0x0d, 0xb8, 0x00, 0x0a, 0x0b, 0x0c, 0x10, 0x21, 0x32, 0x43, 0x54, 0x65, 0x76, 0x87,
};
static const uint8_t mac_a[6] = { 0x02, 0x11, 0x22, 0x33, 0x44, 0x55 };
static const uint8_t mac_b[6] = { 0x52, 0x54, 0x00, 0xab, 0xcd, 0xef };

/* Decoders run on an exact-size heap copy so a read past len is caught. */
typedef int (*decode_fn)(const void *buf, size_t len, void *msg);

static int run_decode(decode_fn fn, const uint8_t *v, size_t n, void *msg)
{
	uint8_t *b = malloc(n ? n : 1);
	int rc;

	CU_ASSERT_FATAL(b != NULL);
	if (n)
		memcpy(b, v, n);
	rc = fn(n ? b : NULL, n, msg);
	free(b);
	return rc;
}

static int clc_decode(const void *b, size_t n, void *m) { return smcr_clc_decode(b, n, m); }
static int llc_decode(const void *b, size_t n, void *m) { return smcr_llc_decode(b, n, m); }
static int cdc_decode(const void *b, size_t n, void *m) { return smcr_cdc_decode(b, n, m); }

static int clc_dec(const uint8_t *v, size_t n, struct smcr_clc_msg *m)
{
	return run_decode(clc_decode, v, n, m);
}
static int llc_dec(const uint8_t *v, size_t n, struct smcr_llc_msg *m)
{
	return run_decode(llc_decode, v, n, m);
}
static int cdc_dec(const uint8_t *v, size_t n, struct smcr_cdc_msg *m)
{
	return run_decode(cdc_decode, v, n, m);
}

/* Every proper prefix of v must be rejected as truncated. */
static void check_truncations(decode_fn fn, const uint8_t *v, size_t len, size_t msgsize)
{
	void *msg = malloc(msgsize);
	size_t n;
	int bad = 0;

	CU_ASSERT_FATAL(msg != NULL);
	for (n = 0; n < len; n++)
		if (run_decode(fn, v, n, msg) != SMCR_E_TRUNC)
			bad++;
	CU_ASSERT_EQUAL(bad, 0);
	free(msg);
}

/* Decode a copy of v with byte off replaced by x; returns the result. */
static int clc_dec_patched(const uint8_t *v, size_t len, size_t off, uint8_t x)
{
	uint8_t tmp[512];
	struct smcr_clc_msg m;

	CU_ASSERT_FATAL(len <= sizeof(tmp));
	memcpy(tmp, v, len);
	tmp[off] = x;
	return clc_dec(tmp, len, &m);
}

static int llc_dec_patched(const uint8_t *v, size_t off, uint8_t x)
{
	uint8_t tmp[SMCR_LLC_LEN];
	struct smcr_llc_msg m;

	memcpy(tmp, v, sizeof(tmp));
	tmp[off] = x;
	return llc_dec(tmp, sizeof(tmp), &m);
}

/* Encode into a buffer with guard bytes; check length, bytes and guards. */
static void check_clc_encode(const struct smcr_clc_msg *m, const uint8_t *want, size_t len)
{
	uint8_t out[600];

	memset(out, 0xA5, sizeof(out));
	CU_ASSERT_EQUAL(smcr_clc_encoded_len(m), (int)len);
	CU_ASSERT_EQUAL(smcr_clc_encode(m, out, len), (int)len);
	CU_ASSERT_EQUAL(memcmp(out, want, len), 0);
	CU_ASSERT_EQUAL(out[len], 0xA5);
	CU_ASSERT_EQUAL(smcr_clc_encode(m, out, len - 1), SMCR_E_NOSPC);
}

static void check_llc_encode(const struct smcr_llc_msg *m, const uint8_t *want)
{
	uint8_t out[SMCR_LLC_LEN + 4];

	memset(out, 0xA5, sizeof(out));
	CU_ASSERT_EQUAL(smcr_llc_encode(m, out, sizeof(out)), SMCR_LLC_LEN);
	CU_ASSERT_EQUAL(memcmp(out, want, SMCR_LLC_LEN), 0);
	CU_ASSERT_EQUAL(out[SMCR_LLC_LEN], 0xA5);
	CU_ASSERT_EQUAL(smcr_llc_encode(m, out, SMCR_LLC_LEN - 1), SMCR_E_NOSPC);
}

/* ---- errors ------------------------------------------------------------- */

static void test_errors_distinct(void)
{
	const int errs[] = {
		SMCR_E_TRUNC, SMCR_E_EYECATCHER, SMCR_E_TRAILER, SMCR_E_LENGTH,
		SMCR_E_TYPE, SMCR_E_OPTIONAL, SMCR_E_NOTTYPE, SMCR_E_VERSION,
		SMCR_E_RANGE, SMCR_E_PREFIXES, SMCR_E_NOSPC, SMCR_E_INVAL,
	};
	size_t i, j, n = sizeof(errs) / sizeof(errs[0]);

	for (i = 0; i < n; i++) {
		CU_ASSERT(errs[i] < 0);
		CU_ASSERT_STRING_NOT_EQUAL(smcr_msg_strerror(errs[i]), "unknown error");
		for (j = i + 1; j < n; j++)
			CU_ASSERT_NOT_EQUAL(errs[i], errs[j]);
	}
	CU_ASSERT_STRING_EQUAL(smcr_msg_strerror(-12345), "unknown error");
}

/* ---- A.1 TCP option ------------------------------------------------------ */

static void test_tcpopt_encode(void)
{
	/* A.1 Figure 24: kind 254, length 6, ExID E2 D4 C3 D9 */
	const uint8_t want[6] = { 254, 6, 0xE2, 0xD4, 0xC3, 0xD9 };
	uint8_t out[8];

	memset(out, 0, sizeof(out));
	CU_ASSERT_EQUAL(smcr_tcpopt_encode(out, sizeof(out)), 6);
	CU_ASSERT_EQUAL(memcmp(out, want, 6), 0);
	CU_ASSERT_EQUAL(smcr_tcpopt_encode(out, 5), SMCR_E_NOSPC);
}

static void test_tcpopt_find(void)
{
	/* a SYN's options: MSS, SACK permitted, timestamps, NOP, wscale,
	 * then ours */
	const uint8_t syn[] = {
		2, 4, 0x05, 0xb4,		/* MSS 1460 */
		4, 2,				/* SACK permitted */
		8, 10, 1, 2, 3, 4, 0, 0, 0, 0,	/* timestamps */
		1,				/* NOP */
		3, 3, 7,			/* window scale */
		254, 6, 0xE2, 0xD4, 0xC3, 0xD9,	/* SMC-R */
		0, 0,				/* EOL, padding */
	};
	const uint8_t other_exp[] = { 254, 4, 0x12, 0x34, 254, 8, 0xE2, 0xD4, 0xC3, 0xC4, 0, 0 };
	const uint8_t after_eol[] = { 0, 254, 6, 0xE2, 0xD4, 0xC3, 0xD9 };
	const uint8_t bad_len[] = { 254, 8, 0xE2, 0xD4, 0xC3, 0xD9, 0, 0 };
	const uint8_t zero_len[] = { 1, 5, 0 };
	size_t n, smc_at = 20;

	CU_ASSERT_EQUAL(smcr_tcpopt_find(syn, sizeof(syn)), 1);
	CU_ASSERT_EQUAL(smcr_tcpopt_find(syn, smc_at), 0);		/* before ours */
	for (n = smc_at + 1; n < smc_at + 6; n++)			/* ours cut */
		CU_ASSERT_EQUAL(smcr_tcpopt_find(syn, n), SMCR_E_TRUNC);
	CU_ASSERT_EQUAL(smcr_tcpopt_find(syn, 3), SMCR_E_TRUNC);	/* MSS cut */
	CU_ASSERT_EQUAL(smcr_tcpopt_find(syn, 1), SMCR_E_TRUNC);	/* kind only */
	CU_ASSERT_EQUAL(smcr_tcpopt_find(syn, 0), 0);
	CU_ASSERT_EQUAL(smcr_tcpopt_find(other_exp, sizeof(other_exp)), 0);
	CU_ASSERT_EQUAL(smcr_tcpopt_find(after_eol, sizeof(after_eol)), 0);
	CU_ASSERT_EQUAL(smcr_tcpopt_find(bad_len, sizeof(bad_len)), SMCR_E_LENGTH);
	CU_ASSERT_EQUAL(smcr_tcpopt_find(zero_len, sizeof(zero_len)), SMCR_E_LENGTH);
}

static void test_tcpopt_tcphdr(void)
{
	uint8_t hdr[32];

	memset(hdr, 0, sizeof(hdr));
	put16(hdr, 0, 40000);		/* source port */
	put16(hdr, 2, 8080);		/* destination port */
	put8(hdr, 12, 8 << 4);		/* data offset: 8 words */
	put8(hdr, 13, 0x02);		/* SYN */
	put8(hdr, 20, 1);
	put8(hdr, 21, 1);
	smcr_tcpopt_encode(hdr + 22, 6);
	put8(hdr, 28, 1);
	put8(hdr, 29, 1);
	put8(hdr, 30, 1);
	put8(hdr, 31, 0);
	CU_ASSERT_EQUAL(smcr_tcpopt_find_in_tcphdr(hdr, sizeof(hdr)), 1);
	CU_ASSERT_EQUAL(smcr_tcpopt_find_in_tcphdr(hdr, 31), SMCR_E_TRUNC);
	CU_ASSERT_EQUAL(smcr_tcpopt_find_in_tcphdr(hdr, 19), SMCR_E_TRUNC);
	put8(hdr, 12, 5 << 4);		/* no options */
	CU_ASSERT_EQUAL(smcr_tcpopt_find_in_tcphdr(hdr, sizeof(hdr)), 0);
	put8(hdr, 12, 4 << 4);
	CU_ASSERT_EQUAL(smcr_tcpopt_find_in_tcphdr(hdr, sizeof(hdr)), SMCR_E_LENGTH);
}

/* ---- A.2 CLC -------------------------------------------------------------- */

/* A.2 common header (Figure 26 ff.): eyecatcher, type, length, version. */
static void clc_hdr(uint8_t *v, unsigned int type, unsigned int len, unsigned int flags)
{
	put_eyecatcher(v, 0);
	put8(v, 4, type);
	put16(v, 5, len);
	put8(v, 7, 1 << 4 | flags);
	put_eyecatcher(v, len - 4);
}

/* A.2.1 Figure 25 peer ID */
static void peer_id(uint8_t *v, size_t off, unsigned int instance, const uint8_t mac[6])
{
	put16(v, off, instance);
	putbytes(v, off + 2, mac, 6);
}

static void check_peer_id(const struct smcr_peer_id *p, unsigned int instance, const uint8_t mac[6])
{
	CU_ASSERT_EQUAL(p->instance, instance);
	CU_ASSERT_EQUAL(memcmp(p->mac, mac, 6), 0);
}

/* A.2.2 Figure 26, IPv4 flow: 52 bytes. */
static size_t proposal_v4_vec(uint8_t *v)
{
	memset(v, 0, 52);
	clc_hdr(v, 1, 52, 0);
	peer_id(v, 8, 0x1234, mac_a);
	putbytes(v, 16, gid_a, 16);		/* client's preferred GID */
	putbytes(v, 32, mac_a, 6);		/* client's preferred MAC */
	put16(v, 38, 0);			/* offset to mask/prefix area */
	put32(v, 40, 0xFFFFFF00);		/* IPv4 subnet mask */
	put8(v, 44, 24);			/* IPv4 mask length */
	put16(v, 45, 0);			/* reserved */
	put8(v, 47, 0);				/* number of IPv6 prefixes */
	return 52;				/* trailer at 48 */
}

static void test_clc_proposal_v4(void)
{
	uint8_t v[52];
	size_t len = proposal_v4_vec(v);
	struct smcr_clc_msg m;

	CU_ASSERT_EQUAL(len, SMCR_CLC_PROPOSAL_MIN_LEN);
	CU_ASSERT_EQUAL(clc_dec(v, len, &m), 52);
	CU_ASSERT_EQUAL(m.hdr.type, SMCR_CLC_PROPOSAL);
	CU_ASSERT_EQUAL(m.hdr.length, 52);
	CU_ASSERT_EQUAL(m.hdr.version, 1);
	CU_ASSERT_EQUAL(m.hdr.flags, 0);
	check_peer_id(&m.proposal.peer_id, 0x1234, mac_a);
	CU_ASSERT_EQUAL(memcmp(m.proposal.gid, gid_a, 16), 0);
	CU_ASSERT_EQUAL(memcmp(m.proposal.mac, mac_a, 6), 0);
	CU_ASSERT_EQUAL(m.proposal.ip_area_offset, 0);
	CU_ASSERT_EQUAL(m.proposal.ipv4_subnet, 0xFFFFFF00);
	CU_ASSERT_EQUAL(m.proposal.ipv4_mask_len, 24);
	CU_ASSERT_EQUAL(m.proposal.ipv6_prefix_count, 0);

	check_clc_encode(&m, v, len);
	check_truncations(clc_decode, v, len, sizeof(m));
	CU_ASSERT_EQUAL(smcr_clc_decode_type(v, len, SMCR_CLC_PROPOSAL, &m), 52);
	CU_ASSERT_EQUAL(smcr_clc_decode_type(v, len, SMCR_CLC_ACCEPT, &m), SMCR_E_NOTTYPE);
}

/* A.2.2, IPv6 flow with two prefixes (Figure 27 elements at 48). */
static size_t proposal_v6_vec(uint8_t *v)
{
	static const uint8_t p1[16] = { 0x20, 0x01, 0x0d, 0xb8, 0, 1 };
	static const uint8_t p2[16] = { 0xfd, 0x00, 0x12, 0x34, 0x56, 0x78 };
	size_t len = 52 + 2 * 17;

	memset(v, 0, len);
	clc_hdr(v, 1, (unsigned int)len, 0);
	peer_id(v, 8, 0xBEEF, mac_b);
	putbytes(v, 16, gid_b, 16);
	putbytes(v, 32, mac_b, 6);
	put16(v, 38, 0);
	put32(v, 40, 0);			/* IPv6 flow: mask all zeros */
	put8(v, 44, 0);
	put8(v, 47, 2);
	putbytes(v, 48, p1, 16);
	put8(v, 64, 48);
	putbytes(v, 65, p2, 16);
	put8(v, 81, 64);
	return len;				/* trailer at 82 */
}

static void test_clc_proposal_v6(void)
{
	uint8_t v[86];
	size_t len = proposal_v6_vec(v);
	struct smcr_clc_msg m;

	CU_ASSERT_EQUAL(clc_dec(v, len, &m), (int)len);
	check_peer_id(&m.proposal.peer_id, 0xBEEF, mac_b);
	CU_ASSERT_EQUAL(memcmp(m.proposal.gid, gid_b, 16), 0);
	CU_ASSERT_EQUAL(memcmp(m.proposal.mac, mac_b, 6), 0);
	CU_ASSERT_EQUAL(m.proposal.ipv4_subnet, 0);
	CU_ASSERT_EQUAL(m.proposal.ipv4_mask_len, 0);
	CU_ASSERT_EQUAL(m.proposal.ipv6_prefix_count, 2);
	CU_ASSERT_EQUAL(memcmp(m.proposal.ipv6_prefix[0].prefix, v + 48, 16), 0);
	CU_ASSERT_EQUAL(m.proposal.ipv6_prefix[0].len, 48);
	CU_ASSERT_EQUAL(memcmp(m.proposal.ipv6_prefix[1].prefix, v + 65, 16), 0);
	CU_ASSERT_EQUAL(m.proposal.ipv6_prefix[1].len, 64);
	check_clc_encode(&m, v, len);
	check_truncations(clc_decode, v, len, sizeof(m));

	/* the count says three, two fit: "IPv6 prefix count does not fit" */
	CU_ASSERT_EQUAL(clc_dec_patched(v, len, 47, 3), SMCR_E_PREFIXES);
	CU_ASSERT_EQUAL(clc_dec_patched(v, len, 47, 255), SMCR_E_RANGE);
	CU_ASSERT_EQUAL(clc_dec_patched(v, len, 47, 9), SMCR_E_RANGE);
	/* one announced, room for two: bytes left over */
	CU_ASSERT_EQUAL(clc_dec_patched(v, len, 47, 1), SMCR_E_LENGTH);
	CU_ASSERT_EQUAL(clc_dec_patched(v, len, 64, 129), SMCR_E_RANGE);
	CU_ASSERT_EQUAL(clc_dec_patched(v, len, 64, 128), (int)len);
}

/* Eight prefixes, the most A.2.2 allows. */
static void test_clc_proposal_max(void)
{
	uint8_t v[52 + 8 * 17];
	struct smcr_clc_msg m;
	size_t len = sizeof(v);
	unsigned int i;

	memset(v, 0, len);
	clc_hdr(v, 1, (unsigned int)len, 0);
	peer_id(v, 8, 1, mac_a);
	put8(v, 47, 8);
	for (i = 0; i < 8; i++) {
		put8(v, 48 + 17 * i, 0xfd);
		put8(v, 48 + 17 * i + 1, i);
		put8(v, 48 + 17 * i + 16, 56 + i);
	}
	CU_ASSERT_EQUAL(clc_dec(v, len, &m), 188);
	CU_ASSERT_EQUAL(m.proposal.ipv6_prefix_count, 8);
	for (i = 0; i < 8; i++) {
		CU_ASSERT_EQUAL(m.proposal.ipv6_prefix[i].prefix[1], i);
		CU_ASSERT_EQUAL(m.proposal.ipv6_prefix[i].len, 56 + i);
	}
	check_clc_encode(&m, v, len);
	m.proposal.ipv6_prefix_count = 9;
	CU_ASSERT_EQUAL(smcr_clc_encode(&m, v, len), SMCR_E_INVAL);
	/* with Linux's growth area, the longest message a v1 peer sends */
	m.proposal.ipv6_prefix_count = 8;
	m.proposal.ip_area_offset = SMCR_CLC_IP_AREA_OFFSET_LINUX;
	CU_ASSERT_EQUAL(smcr_clc_encoded_len(&m), SMCR_CLC_MAX_V1_LEN);
	CU_ASSERT_EQUAL(SMCR_CLC_MAX_V1_LEN, 228);
}

/* A.2.2 "Offset to mask/prefix area": a future growth area is skipped. */
static void test_clc_proposal_growth(void)
{
	uint8_t v[60];
	struct smcr_clc_msg m;
	size_t len = 60;		/* 40 + 8 + 8 + 4 */

	memset(v, 0, len);
	clc_hdr(v, 1, (unsigned int)len, 0);
	peer_id(v, 8, 7, mac_b);
	put16(v, 38, 8);			/* 8 bytes of growth area at 40 */
	put32(v, 48, 0xFFFF0000);		/* IP area at 48 */
	put8(v, 52, 16);
	put8(v, 55, 0);
	CU_ASSERT_EQUAL(clc_dec(v, len, &m), 60);
	CU_ASSERT_EQUAL(m.proposal.ip_area_offset, 8);
	CU_ASSERT_EQUAL(m.proposal.ipv4_subnet, 0xFFFF0000);
	CU_ASSERT_EQUAL(m.proposal.ipv4_mask_len, 16);
	check_clc_encode(&m, v, len);
	/* whatever a future version puts there is skipped */
	CU_ASSERT_EQUAL(clc_dec_patched(v, len, 41, 0x77), 60);
	/* an offset reaching past the trailer */
	CU_ASSERT_EQUAL(clc_dec_patched(v, len, 39, 9), SMCR_E_LENGTH);
	CU_ASSERT_EQUAL(clc_dec_patched(v, len, 38, 0xFF), SMCR_E_LENGTH);
	/* a mask longer than 32 bits */
	CU_ASSERT_EQUAL(clc_dec_patched(v, len, 52, 33), SMCR_E_RANGE);
}

/* What Linux (5.11 and later) sends: a 40-byte growth area, its SMC-D
 * information, zeros for SMC-R. */
static void test_clc_proposal_linux(void)
{
	uint8_t v[92];
	struct smcr_clc_msg m;
	size_t len = sizeof(v);			/* 40 + 40 + 8 + 4 */

	memset(v, 0, len);
	clc_hdr(v, 1, (unsigned int)len, 0);
	peer_id(v, 8, 0x0bad, mac_a);
	putbytes(v, 16, gid_a, 16);
	putbytes(v, 32, mac_a, 6);
	put16(v, 38, 40);			/* offset: Linux's SMC-D area at 40 */
	put32(v, 80, 0xFFFFF000);		/* IP area at 80 */
	put8(v, 84, 20);
	put8(v, 87, 0);
	CU_ASSERT_EQUAL(clc_dec(v, len, &m), 92);
	CU_ASSERT_EQUAL(m.proposal.ip_area_offset, SMCR_CLC_IP_AREA_OFFSET_LINUX);
	CU_ASSERT_EQUAL(m.proposal.ipv4_subnet, 0xFFFFF000);
	CU_ASSERT_EQUAL(m.proposal.ipv4_mask_len, 20);
	check_peer_id(&m.proposal.peer_id, 0x0bad, mac_a);
	check_clc_encode(&m, v, len);
	check_truncations(clc_decode, v, len, sizeof(m));
}

/* A.2.3 Figure 28 SMC Accept, 68 bytes. */
static size_t accept_vec(uint8_t *v, unsigned int type, unsigned int flags)
{
	memset(v, 0, 68);
	clc_hdr(v, type, 68, flags);
	peer_id(v, 8, 0xA55A, mac_b);
	putbytes(v, 16, gid_b, 16);		/* RoCE GID */
	putbytes(v, 32, mac_b, 6);		/* RoCE MAC */
	put24(v, 38, 0x00ABCDEF);		/* QP number, bytes 1-3 */
	put32(v, 41, 0x11223344);		/* RMB rkey, bytes 1-4 */
	put8(v, 45, 3);				/* RMB element index */
	put32(v, 46, 0xCAFEF00D);		/* RMBE alert token */
	put8(v, 50, 5 << 4 | 4);		/* Bsize 5 (512K), MTU 4 (2048) */
	put8(v, 51, 0);				/* reserved */
	put64(v, 52, 0x00007F1234567000ull);	/* RMB virtual address */
	put8(v, 60, 0);				/* reserved */
	put24(v, 61, 0x00654321);		/* initial PSN */
	return 68;				/* trailer at 64 */
}

static void check_acc_conf(const struct smcr_clc_accept_confirm *a)
{
	check_peer_id(&a->peer_id, 0xA55A, mac_b);
	CU_ASSERT_EQUAL(memcmp(a->gid, gid_b, 16), 0);
	CU_ASSERT_EQUAL(memcmp(a->mac, mac_b, 6), 0);
	CU_ASSERT_EQUAL(a->qpn, 0xABCDEF);
	CU_ASSERT_EQUAL(a->rmb_rkey, 0x11223344);
	CU_ASSERT_EQUAL(a->rmbe_idx, 3);
	CU_ASSERT_EQUAL(a->rmbe_alert_token, 0xCAFEF00D);
	CU_ASSERT_EQUAL(a->rmbe_size, 5);
	CU_ASSERT_EQUAL(smcr_rmb_size_decompress(a->rmbe_size), 512 * 1024);
	CU_ASSERT_EQUAL(a->qp_mtu, SMCR_MTU_2048);
	CU_ASSERT_EQUAL(a->rmb_vaddr, 0x00007F1234567000ull);
	CU_ASSERT_EQUAL(a->psn, 0x654321);
}

static void test_clc_accept(void)
{
	uint8_t v[68];
	size_t len = accept_vec(v, 2, 0x08);	/* F: first contact */
	struct smcr_clc_msg m;

	CU_ASSERT_EQUAL(clc_dec(v, len, &m), 68);
	CU_ASSERT_EQUAL(m.hdr.type, SMCR_CLC_ACCEPT);
	CU_ASSERT_EQUAL(m.hdr.flags, 0x08);
	CU_ASSERT(m.accept.first_contact);
	check_acc_conf(&m.accept);
	check_clc_encode(&m, v, len);
	check_truncations(clc_decode, v, len, sizeof(m));

	/* MTU is validated on first contact only */
	CU_ASSERT_EQUAL(clc_dec_patched(v, len, 50, 5 << 4 | 0), SMCR_E_RANGE);
	CU_ASSERT_EQUAL(clc_dec_patched(v, len, 50, 5 << 4 | 6), SMCR_E_RANGE);
	CU_ASSERT_EQUAL(clc_dec_patched(v, len, 50, 15 << 4 | 5), 68);
	accept_vec(v, 2, 0);
	CU_ASSERT_EQUAL(clc_dec_patched(v, len, 50, 5 << 4 | 0), 68);
	CU_ASSERT_EQUAL(clc_dec(v, len, &m), 68);
	CU_ASSERT(!m.accept.first_contact);
	check_clc_encode(&m, v, len);

	/* reserved bytes are not validated */
	CU_ASSERT_EQUAL(clc_dec_patched(v, len, 51, 0xFF), 68);
	CU_ASSERT_EQUAL(clc_dec_patched(v, len, 60, 0xFF), 68);
	CU_ASSERT_EQUAL(clc_dec_patched(v, len, 7, 0x17), 68);

	/* encoder range checks */
	m.accept.qpn = 0x1000000;
	CU_ASSERT_EQUAL(smcr_clc_encode(&m, v, len), SMCR_E_INVAL);
	m.accept.qpn = 1;
	m.accept.psn = 0x1000000;
	CU_ASSERT_EQUAL(smcr_clc_encode(&m, v, len), SMCR_E_INVAL);
	m.accept.psn = 1;
	m.accept.rmbe_size = 16;
	CU_ASSERT_EQUAL(smcr_clc_encode(&m, v, len), SMCR_E_INVAL);
	m.accept.rmbe_size = 0;
	m.accept.qp_mtu = 16;
	CU_ASSERT_EQUAL(smcr_clc_encoded_len(&m), SMCR_E_INVAL);
}

/* A.2.4 Figure 29 SMC Confirm: the Accept layout, client's values. */
static void test_clc_confirm(void)
{
	uint8_t v[68];
	size_t len = accept_vec(v, 3, 0);
	struct smcr_clc_msg m;

	CU_ASSERT_EQUAL(clc_dec(v, len, &m), 68);
	CU_ASSERT_EQUAL(m.hdr.type, SMCR_CLC_CONFIRM);
	CU_ASSERT(!m.confirm.first_contact);
	check_acc_conf(&m.confirm);
	check_clc_encode(&m, v, len);
	check_truncations(clc_decode, v, len, sizeof(m));
	/* Confirm has no F bit: a set 0x08 is reserved and ignored, and
	 * the encoder never sets it */
	CU_ASSERT_EQUAL(clc_dec_patched(v, len, 7, 0x18), 68);
	m.confirm.first_contact = true;
	check_clc_encode(&m, v, len);
	/* the MTU is the caller's to check (first contact unknown here) */
	CU_ASSERT_EQUAL(clc_dec_patched(v, len, 50, 0x50), 68);
	CU_ASSERT_EQUAL(smcr_clc_decode_type(v, len, SMCR_CLC_CONFIRM, &m), 68);
	CU_ASSERT_EQUAL(smcr_clc_decode_type(v, len, SMCR_CLC_ACCEPT, &m), SMCR_E_NOTTYPE);
}

/* A.2.5 Figure 30 SMC Decline, 28 bytes. */
static size_t decline_vec(uint8_t *v, unsigned int flags)
{
	memset(v, 0, 28);
	clc_hdr(v, 4, 28, flags);
	peer_id(v, 8, 0x0102, mac_a);		/* sender's peer ID */
	put32(v, 16, SMCR_DECL_NOSMCRDEV);	/* peer diagnosis information */
	put32(v, 20, 0);			/* reserved */
	return 28;				/* trailer at 24 */
}

static void test_clc_decline(void)
{
	uint8_t v[28];
	size_t len = decline_vec(v, 0x08);	/* S: out of sync */
	struct smcr_clc_msg m;

	CU_ASSERT_EQUAL(clc_dec(v, len, &m), 28);
	CU_ASSERT_EQUAL(m.hdr.type, SMCR_CLC_DECLINE);
	CU_ASSERT(m.decline.out_of_sync);
	check_peer_id(&m.decline.peer_id, 0x0102, mac_a);
	CU_ASSERT_EQUAL(m.decline.diagnosis, 0x03030002);
	check_clc_encode(&m, v, len);
	check_truncations(clc_decode, v, len, sizeof(m));

	decline_vec(v, 0);
	CU_ASSERT_EQUAL(clc_dec(v, len, &m), 28);
	CU_ASSERT(!m.decline.out_of_sync);
	check_clc_encode(&m, v, len);
	CU_ASSERT_EQUAL(clc_dec_patched(v, len, 21, 0x99), 28);	/* reserved */

	CU_ASSERT_STRING_EQUAL(smcr_decline_str(SMCR_DECL_VERSMISMAT), "SMC version mismatch");
	CU_ASSERT_STRING_EQUAL(smcr_decline_str(0x12345678), "unknown");
	CU_ASSERT_EQUAL(SMCR_DECL_MEM, 0x01010000);
	CU_ASSERT_EQUAL(SMCR_DECL_SYNCERR, 0x04000000);
	CU_ASSERT_EQUAL(SMCR_DECL_INTERR, 0x09990000);
}

/* Every malformation of the common header and trailer. */
static void test_clc_malformed(void)
{
	uint8_t v[68], big[80];
	size_t len = accept_vec(v, 2, 0x08), i;
	struct smcr_clc_msg m;
	struct smcr_clc_hdr h;

	for (i = 0; i < 4; i++) {
		CU_ASSERT_EQUAL(clc_dec_patched(v, len, i, 0x00), SMCR_E_EYECATCHER);
		CU_ASSERT_EQUAL(clc_dec_patched(v, len, 64 + i, 0x00), SMCR_E_TRAILER);
	}
	/* "SMCD", Linux's SMC-D eyecatcher, is not ours */
	CU_ASSERT_EQUAL(clc_dec_patched(v, len, 3, 0xC4), SMCR_E_EYECATCHER);
	CU_ASSERT_EQUAL(clc_dec_patched(v, len, 4, 0), SMCR_E_TYPE);
	CU_ASSERT_EQUAL(clc_dec_patched(v, len, 4, 5), SMCR_E_TYPE);
	CU_ASSERT_EQUAL(clc_dec_patched(v, len, 4, 0xFF), SMCR_E_TYPE);
	/* Accept must be 68: both shorter and longer lengths are wrong */
	CU_ASSERT_EQUAL(clc_dec_patched(v, len, 6, 67), SMCR_E_LENGTH);
	CU_ASSERT_EQUAL(clc_dec_patched(v, len, 6, 28), SMCR_E_LENGTH);
	memset(big, 0, sizeof(big));
	memcpy(big, v, len);
	put16(big, 5, 72);
	put_eyecatcher(big, 68);
	CU_ASSERT_EQUAL(clc_dec(big, 72, &m), SMCR_E_LENGTH);
	/* the length field claims more than the buffer holds */
	put16(big, 5, 69);
	CU_ASSERT_EQUAL(clc_dec(big, 68, &m), SMCR_E_TRUNC);
	/* bytes after the message (the next one in the stream) are not
	 * looked at */
	memcpy(big, v, len);
	memset(big + len, 0xEE, sizeof(big) - len);
	CU_ASSERT_EQUAL(clc_dec(big, sizeof(big), &m), 68);
	/* a Decline of Proposal length, a Proposal too short */
	decline_vec(v, 0);
	CU_ASSERT_EQUAL(clc_dec_patched(v, 28, 6, 52), SMCR_E_TRUNC);
	proposal_v4_vec(v);
	CU_ASSERT_EQUAL(clc_dec_patched(v, 52, 6, 51), SMCR_E_LENGTH);
	CU_ASSERT_EQUAL(smcr_clc_hdr_decode(v, 8, &h), 52);
	CU_ASSERT_EQUAL(smcr_clc_hdr_decode(v, 7, &h), SMCR_E_TRUNC);
}

/* A v2 peer (Linux since 5.11) may send a v2 Proposal: recognise the
 * header, report its length, and let the caller Decline. */
static void test_clc_version2(void)
{
	uint8_t v[120];
	struct smcr_clc_msg m;
	struct smcr_clc_hdr h;

	memset(v, 0, sizeof(v));
	put_eyecatcher(v, 0);
	put8(v, 4, 1);				/* Proposal */
	put16(v, 5, 120);
	put8(v, 7, 2 << 4 | 0x01);		/* version 2, Linux typev1 SMC-D */
	put_eyecatcher(v, 116);
	CU_ASSERT_EQUAL(smcr_clc_hdr_decode(v, sizeof(v), &h), SMCR_E_VERSION);
	CU_ASSERT_EQUAL(h.type, SMCR_CLC_PROPOSAL);
	CU_ASSERT_EQUAL(h.length, 120);
	CU_ASSERT_EQUAL(h.version, 2);
	CU_ASSERT_EQUAL(h.flags, 0x01);
	/* the header alone is enough to learn that */
	CU_ASSERT_EQUAL(smcr_clc_hdr_decode(v, 8, &h), SMCR_E_VERSION);
	CU_ASSERT_EQUAL(h.length, 120);
	CU_ASSERT_EQUAL(clc_dec(v, sizeof(v), &m), SMCR_E_VERSION);
	CU_ASSERT_EQUAL(m.hdr.length, 120);
	CU_ASSERT_EQUAL(m.hdr.version, 2);
	/* version 0 and 15 are just as foreign */
	CU_ASSERT_EQUAL(clc_dec_patched(v, sizeof(v), 7, 0x00), SMCR_E_VERSION);
	CU_ASSERT_EQUAL(clc_dec_patched(v, sizeof(v), 7, 0xF0), SMCR_E_VERSION);
	/* a foreign version with an impossible length */
	CU_ASSERT_EQUAL(clc_dec_patched(v, sizeof(v), 6, 3), SMCR_E_LENGTH);
}


/* ---- CLC v2: the kernel's own messages (tests/vectors/kernel-smcr-v2.txt,
 * Linux 6.1 over rxe; frame numbers of that capture) ------------------------ */

/* frame 9 */
static const char k_prop[] =
	"e2d4c3d901009c22000000000000000000000000000000000000000000000000"
	"000000000000000000000000000000000000001c000000000000000000000000"
	"0000000000000000000000000000000001000000000000000000000000000000"
	"0000ffff0a01010100000000000000000000000000000000534d435242442e4b"
	"504545522020202020202020202020202020202020202020e2d4c3d9";
/* frame 11 */
static const char k_acc_fc[] =
	"e2d4c3d90200a0286a885254005c020100000000000000000000ffff0a010102"
	"5254005c0201000011000003cd01000000012300ffff8880082d000000c677bf"
	"534d435242442e4b504545522020202020202020202020202020202020202020"
	"000000000000000080200000736d63722d422020202020202020202020202020"
	"20202020202020202020202000000000000000000000000000000000e2d4c3d9";
/* frame 13 */
static const char k_conf_fc[] =
	"e2d4c3d90300b42867a55254005c010100000000000000000000ffff0a010101"
	"5254005c01010000110000034c01000000012300ffff8880070f0000008d585a"
	"534d435242442e4b504545522020202020202020202020202020202020202020"
	"000000000000000080200000736d63722d412020202020202020202020202020"
	"2020202020202020202020200000000000000000000000000000000001000000"
	"00000000000000000000ffff0a010101e2d4c3d9";
/* frame 35 */
static const char k_acc[] =
	"e2d4c3d902006c206a885254005c020100000000000000000000ffff0a010102"
	"5254005c02010000110000062901000000022300ffff88800831000000c677bf"
	"534d435242442e4b504545522020202020202020202020202020202020202020"
	"0000000000000000e2d4c3d9";
/* frame 42 */
static const char k_conf[] =
	"e2d4c3d903006c2067a55254005c010100000000000000000000ffff0a010101"
	"5254005c0101000011000004a201000000022300ffff888007110000008d585a"
	"534d435242442e4b504545522020202020202020202020202020202020202020"
	"0000000000000000e2d4c3d9";

static const uint8_t k_gid_a[16] = { [10] = 0xff, [11] = 0xff, 10, 1, 1, 1 };
static const uint8_t k_gid_b[16] = { [10] = 0xff, [11] = 0xff, 10, 1, 1, 2 };
static const char k_eid[] = "SMCRBD.KPEER                    ";	/* 32, blank-padded */

static size_t unhex(const char *h, uint8_t *out, size_t cap)
{
	size_t n = 0;
	unsigned int b;

	while (h[0] && h[1] && n < cap && sscanf(h, "%2x", &b) == 1) {
		out[n++] = (uint8_t)b;
		h += 2;
	}
	return n;
}

static int clc2_decode(const void *b, size_t n, void *m) { return smcr_clc_v2_decode(b, n, m); }

static int clc2_dec(const uint8_t *v, size_t n, struct smcr_clc_v2_msg *m)
{
	return run_decode(clc2_decode, v, n, m);
}

static int clc2_dec_patched(const uint8_t *v, size_t len, size_t off, uint8_t x)
{
	uint8_t tmp[512];
	struct smcr_clc_v2_msg m;

	CU_ASSERT_FATAL(len <= sizeof(tmp));
	memcpy(tmp, v, len);
	tmp[off] = x;
	return clc2_dec(tmp, len, &m);
}

/* Decodes v, checks its truncations, re-encodes it equal. */
static void clc2_roundtrip(const uint8_t *v, size_t n, struct smcr_clc_v2_msg *m)
{
	uint8_t out[512];

	CU_ASSERT_EQUAL_FATAL(clc2_dec(v, n, m), (int)n);
	check_truncations(clc2_decode, v, n, sizeof(*m));
	CU_ASSERT_EQUAL(smcr_clc_v2_encoded_len(m), (int)n);
	CU_ASSERT_EQUAL_FATAL(smcr_clc_v2_encode(m, out, sizeof(out)), (int)n);
	CU_ASSERT_EQUAL(memcmp(out, v, n), 0);
	CU_ASSERT_EQUAL(smcr_clc_v2_encode(m, out, n - 1), SMCR_E_NOSPC);
	/* and the v1 decoder sees only a foreign version */
	{
		struct smcr_clc_msg m1;

		CU_ASSERT_EQUAL(clc_dec(v, n, &m1), SMCR_E_VERSION);
	}
}

static void test_clc_v2_kernel_proposal(void)
{
	uint8_t v[300];
	struct smcr_clc_v2_msg m;
	size_t n = unhex(k_prop, v, sizeof(v));

	CU_ASSERT_EQUAL_FATAL(n, 156);
	clc2_roundtrip(v, n, &m);
	CU_ASSERT_EQUAL(m.hdr.type, SMCR_CLC_PROPOSAL);
	CU_ASSERT_EQUAL(m.hdr.version, 2);
	CU_ASSERT_EQUAL(m.proposal.typev1, SMCR_CLC_TYPE_N);	/* no RoCE v1 GID on rxe */
	CU_ASSERT_EQUAL(m.proposal.typev2, SMCR_CLC_TYPE_R);
	CU_ASSERT_EQUAL(m.proposal.v1.ip_area_offset, 0);
	CU_ASSERT_EQUAL(m.proposal.release, 0);
	CU_ASSERT_FALSE(m.proposal.seid);
	CU_ASSERT_EQUAL(memcmp(m.proposal.roce_gid, k_gid_a, 16), 0);
	CU_ASSERT_EQUAL(m.proposal.eid_count, 1);
	CU_ASSERT_EQUAL(memcmp(m.proposal.eids[0], k_eid, SMCR_EID_LEN), 0);
	/* malformed: 9 EIDs, EIDs past the trailer, the extension before the
	 * SMC-D area's end or past the trailer, an IP area offset over 40 */
	CU_ASSERT_EQUAL(clc2_dec_patched(v, n, 80, 9), SMCR_E_RANGE);
	CU_ASSERT_EQUAL(clc2_dec_patched(v, n, 80, 2), SMCR_E_LENGTH);
	CU_ASSERT_EQUAL(clc2_dec_patched(v, n, 51, 0x1b), SMCR_E_LENGTH);
	CU_ASSERT_EQUAL(clc2_dec_patched(v, n, 51, 0x5d), SMCR_E_LENGTH);
	CU_ASSERT_EQUAL(clc2_dec_patched(v, n, 50, 0xff), SMCR_E_LENGTH);
	CU_ASSERT_EQUAL(clc2_dec_patched(v, n, 155, 0), SMCR_E_TRAILER);
	/* offering v1 too (typev1 R): the IP area must then be there */
	CU_ASSERT_EQUAL(clc2_dec_patched(v, n, 7, 0x20), 156);
	CU_ASSERT_EQUAL(clc2_dec_patched(v, n, 39, 41), 156);	/* typev1 N: not read */
}

static void test_clc_v2_proposal_v1_too(void)
{
	struct smcr_clc_v2_msg m, d;
	uint8_t out[512];
	int n;

	memset(&m, 0, sizeof(m));
	m.hdr.type = SMCR_CLC_PROPOSAL;
	m.proposal.typev1 = SMCR_CLC_TYPE_R;
	m.proposal.typev2 = SMCR_CLC_TYPE_R;
	m.proposal.v1.peer_id.instance = 0x1234;
	memcpy(m.proposal.v1.peer_id.mac, mac_a, 6);
	memcpy(m.proposal.v1.gid, k_gid_a, 16);
	memcpy(m.proposal.v1.mac, mac_a, 6);
	m.proposal.v1.ipv4_subnet = 0xffffff00;
	m.proposal.v1.ipv4_mask_len = 24;
	m.proposal.v1.ipv6_prefix_count = 1;
	m.proposal.v1.ipv6_prefix[0].len = 64;
	memcpy(m.proposal.roce_gid, k_gid_a, 16);
	m.proposal.eid_count = 2;
	memcpy(m.proposal.eids[0], k_eid, SMCR_EID_LEN);
	memset(m.proposal.eids[1], 'X', SMCR_EID_LEN);
	/* head 40, SMC-D area 40, IP area 8, 1 prefix 17, v2 ext 40, 2 EIDs, trailer */
	n = smcr_clc_v2_encode(&m, out, sizeof(out));
	CU_ASSERT_EQUAL_FATAL(n, 40 + 40 + 8 + 17 + 40 + 64 + 4);
	CU_ASSERT_EQUAL(out[7], 0x20);
	CU_ASSERT_EQUAL(out[38] << 8 | out[39], 40);		/* IP area after the SMC-D area */
	CU_ASSERT_EQUAL(out[50] << 8 | out[51], 28 + 8 + 17);	/* v2 extension after the prefix */
	CU_ASSERT_EQUAL(out[80 + 4], 24);				/* mask length */
	CU_ASSERT_EQUAL(out[105], 2);					/* EIDs */
	CU_ASSERT_EQUAL(clc2_dec(out, (size_t)n, &d), n);
	CU_ASSERT_EQUAL(d.proposal.v1.ipv4_subnet, 0xffffff00);
	CU_ASSERT_EQUAL(d.proposal.v1.ipv6_prefix_count, 1);
	CU_ASSERT_EQUAL(d.proposal.eid_count, 2);
	CU_ASSERT_EQUAL(memcmp(d.proposal.eids[1], m.proposal.eids[1], SMCR_EID_LEN), 0);
	/* what older code reads of it: the v1 part */
	CU_ASSERT_EQUAL(smcr_clc_proposal_v2_decode(out, (size_t)n, &d.proposal.v1), 0);
	CU_ASSERT_EQUAL(d.proposal.v1.ipv4_mask_len, 24);
	/* SMC-D offers are not ours to make; nine EIDs do not fit */
	m.proposal.typev2 = SMCR_CLC_TYPE_B;
	CU_ASSERT_EQUAL(smcr_clc_v2_encode(&m, out, sizeof(out)), SMCR_E_INVAL);
	m.proposal.typev2 = SMCR_CLC_TYPE_R;
	m.proposal.eid_count = 9;
	CU_ASSERT_EQUAL(smcr_clc_v2_encode(&m, out, sizeof(out)), SMCR_E_INVAL);
}

static void test_clc_v2_kernel_accept_confirm(void)
{
	uint8_t v[300];
	struct smcr_clc_v2_msg m;
	size_t n;

	/* Accept, first contact: EID, first-contact extension, 16 reserved */
	n = unhex(k_acc_fc, v, sizeof(v));
	CU_ASSERT_EQUAL_FATAL(n, 160);
	clc2_roundtrip(v, n, &m);
	CU_ASSERT_EQUAL(m.hdr.type, SMCR_CLC_ACCEPT);
	CU_ASSERT_TRUE(m.accept.r.first_contact);
	CU_ASSERT_EQUAL(m.accept.r.peer_id.instance, 0x6a88);
	CU_ASSERT_EQUAL(memcmp(m.accept.r.gid, k_gid_b, 16), 0);
	CU_ASSERT_EQUAL(m.accept.r.qpn, 0x11);
	CU_ASSERT_EQUAL(m.accept.r.rmb_rkey, 0x3cd);
	CU_ASSERT_EQUAL(m.accept.r.rmbe_idx, 1);
	CU_ASSERT_EQUAL(m.accept.r.rmbe_alert_token, 1);
	CU_ASSERT_EQUAL(m.accept.r.rmbe_size, 2);
	CU_ASSERT_EQUAL(m.accept.r.qp_mtu, 3);
	CU_ASSERT_EQUAL(m.accept.r.rmb_vaddr, 0xffff8880082d0000ull);
	CU_ASSERT_EQUAL(m.accept.r.psn, 0xc677bf);
	CU_ASSERT_EQUAL(memcmp(m.accept.eid, k_eid, SMCR_EID_LEN), 0);
	CU_ASSERT_TRUE(m.accept.direct);
	CU_ASSERT_EQUAL(m.accept.os_type, SMCR_CLC_OS_LINUX);
	CU_ASSERT_EQUAL(memcmp(m.accept.hostname, "smcr-B ", 7), 0);
	CU_ASSERT_EQUAL(m.accept.gid_count, 0);
	CU_ASSERT_EQUAL(clc2_dec_patched(v, n, 7, 0x29), SMCR_E_RANGE);	/* SMC-D */
	CU_ASSERT_EQUAL(clc2_dec_patched(v, n, 50, 0x27), SMCR_E_RANGE);	/* MTU 7 */

	/* Confirm, first contact: the GID list (the client's one GID) */
	n = unhex(k_conf_fc, v, sizeof(v));
	CU_ASSERT_EQUAL_FATAL(n, 180);
	clc2_roundtrip(v, n, &m);
	CU_ASSERT_EQUAL(m.hdr.type, SMCR_CLC_CONFIRM);
	CU_ASSERT_TRUE(m.confirm.r.first_contact);
	CU_ASSERT_EQUAL(m.confirm.r.qpn, 0x11);
	CU_ASSERT_EQUAL(m.confirm.r.rmb_rkey, 0x34c);
	CU_ASSERT_EQUAL(memcmp(m.confirm.hostname, "smcr-A ", 7), 0);
	CU_ASSERT_EQUAL(m.confirm.gid_count, 1);
	CU_ASSERT_EQUAL(memcmp(m.confirm.gids[0], k_gid_a, 16), 0);
	CU_ASSERT_EQUAL(clc2_dec_patched(v, n, 156, 9), SMCR_E_RANGE);	/* 9 GIDs */
	CU_ASSERT_EQUAL(clc2_dec_patched(v, n, 156, 2), SMCR_E_LENGTH);	/* past the trailer */

	/* subsequent contact: 108 bytes, no extensions */
	n = unhex(k_acc, v, sizeof(v));
	CU_ASSERT_EQUAL_FATAL(n, 108);
	clc2_roundtrip(v, n, &m);
	CU_ASSERT_FALSE(m.accept.r.first_contact);
	CU_ASSERT_EQUAL(m.accept.r.rmb_rkey, 0x629);
	CU_ASSERT_EQUAL(m.accept.r.rmbe_alert_token, 2);
	n = unhex(k_conf, v, sizeof(v));
	CU_ASSERT_EQUAL_FATAL(n, 108);
	clc2_roundtrip(v, n, &m);
	CU_ASSERT_EQUAL(m.confirm.r.rmb_rkey, 0x4a2);
	/* under 108 bytes */
	put16(v, 5, 104);
	put_eyecatcher(v, 100);
	CU_ASSERT_EQUAL(clc2_dec(v, 104, &m), SMCR_E_LENGTH);
}

/* SMC-Rv2.1 as Linux 6.6+ writes it (smc_clc_send_proposal,
 * smc_clc_fill_fce_v2x): release 1 in the v2 extension's byte 3 and the
 * first-contact extension's byte 1, max_conns and max_links and the
 * feature mask after the RoCE GID, and after the host name. */
static void test_clc_v21_fields(void)
{
	uint8_t v[300], out[300];
	struct smcr_clc_v2_msg m;
	size_t n;

	/* Proposal: the 6.1 one with 6.12's release and limits */
	n = unhex(k_prop, v, sizeof(v));
	CU_ASSERT_EQUAL_FATAL(n, 156);
	CU_ASSERT_EQUAL(clc2_dec(v, n, &m), 156);	/* 6.1: all zero */
	CU_ASSERT_EQUAL(m.proposal.release, 0);
	CU_ASSERT_EQUAL(m.proposal.max_conns, 0);
	CU_ASSERT_EQUAL(m.proposal.max_links, 0);
	CU_ASSERT_EQUAL(m.proposal.feature_mask, 0);
	put8(v, 80 + 3, 0x10);			/* release 1, no SEID */
	put8(v, 80 + 24, 255);			/* max_conns */
	put8(v, 80 + 25, 2);			/* max_links */
	put16(v, 80 + 26, 0x0001);		/* feature mask: emulated ISM */
	clc2_roundtrip(v, n, &m);
	CU_ASSERT_EQUAL(m.proposal.release, SMCR_CLC_RELEASE_1);
	CU_ASSERT_EQUAL(m.proposal.max_conns, 255);
	CU_ASSERT_EQUAL(m.proposal.max_links, 2);
	CU_ASSERT_EQUAL(m.proposal.feature_mask, 1);
	CU_ASSERT_EQUAL(m.proposal.eid_count, 1);	/* EIDs still at 120 */
	CU_ASSERT_EQUAL(memcmp(m.proposal.eids[0], k_eid, SMCR_EID_LEN), 0);
	/* an encoder's fields land at those bytes */
	m.proposal.max_conns = 0x21;
	m.proposal.max_links = 1;
	m.proposal.feature_mask = 0xa55a;
	CU_ASSERT_EQUAL_FATAL(smcr_clc_v2_encode(&m, out, sizeof(out)), 156);
	CU_ASSERT_EQUAL(out[83], 0x10);
	CU_ASSERT_EQUAL(out[104], 0x21);
	CU_ASSERT_EQUAL(out[105], 1);
	CU_ASSERT_EQUAL(out[106], 0xa5);
	CU_ASSERT_EQUAL(out[107], 0x5a);

	/* Accept, first contact: fce at 104, its v2.1 part at 140..155 */
	n = unhex(k_acc_fc, v, sizeof(v));
	CU_ASSERT_EQUAL_FATAL(n, 160);
	CU_ASSERT_EQUAL(clc2_dec(v, n, &m), 160);
	CU_ASSERT_EQUAL(m.accept.release, 0);
	CU_ASSERT_EQUAL(m.accept.max_conns, 0);
	CU_ASSERT_EQUAL(m.accept.max_links, 0);
	put8(v, 105, 0x21);			/* Linux, release 1 */
	put8(v, 140, 200);			/* max_conns */
	put8(v, 141, 1);			/* max_links */
	put16(v, 142, 0x0001);			/* feature mask */
	put32(v, 144, 0x11223344);		/* vendor options */
	put8(v, 148, 0xee);			/* reserved: not read */
	CU_ASSERT_EQUAL(clc2_dec(v, n, &m), 160);
	CU_ASSERT_EQUAL(m.accept.os_type, SMCR_CLC_OS_LINUX);
	CU_ASSERT_EQUAL(m.accept.release, SMCR_CLC_RELEASE_1);
	CU_ASSERT_EQUAL(m.accept.max_conns, 200);
	CU_ASSERT_EQUAL(m.accept.max_links, 1);
	CU_ASSERT_EQUAL(m.accept.feature_mask, 1);
	CU_ASSERT_EQUAL(m.accept.vendor_options, 0x11223344);
	put8(v, 148, 0);
	clc2_roundtrip(v, n, &m);

	/* Confirm, first contact: the same 16 bytes, then the GID list at 156 */
	n = unhex(k_conf_fc, v, sizeof(v));
	CU_ASSERT_EQUAL_FATAL(n, 180);
	put8(v, 105, 0x21);
	put8(v, 140, 16);
	put8(v, 141, 2);
	clc2_roundtrip(v, n, &m);
	CU_ASSERT_EQUAL(m.confirm.release, 1);
	CU_ASSERT_EQUAL(m.confirm.max_conns, 16);
	CU_ASSERT_EQUAL(m.confirm.max_links, 2);
	CU_ASSERT_EQUAL(m.confirm.feature_mask, 0);
	CU_ASSERT_EQUAL(m.confirm.vendor_options, 0);
	CU_ASSERT_EQUAL(m.confirm.gid_count, 1);
	CU_ASSERT_EQUAL(memcmp(m.confirm.gids[0], k_gid_a, 16), 0);
	/* an Accept built from scratch: 104 + 36 + 16 + trailer */
	memset(&m, 0, sizeof(m));
	m.hdr.type = SMCR_CLC_ACCEPT;
	m.accept.r.first_contact = true;
	m.accept.r.qp_mtu = SMCR_MTU_1024;
	m.accept.r.rmbe_size = 1;
	m.accept.release = 1;
	m.accept.max_conns = 255;
	m.accept.max_links = 2;
	CU_ASSERT_EQUAL_FATAL(smcr_clc_v2_encode(&m, out, sizeof(out)), 160);
	CU_ASSERT_EQUAL(out[105] & 0x0f, 1);
	CU_ASSERT_EQUAL(out[140], 255);
	CU_ASSERT_EQUAL(out[141], 2);
	CU_ASSERT_EQUAL(out[142] | out[143] | out[144] | out[145] | out[146] | out[147], 0);
	CU_ASSERT_EQUAL(memcmp(out + 156, "\xe2\xd4\xc3\xd9", 4), 0);
}

/* ---- CLC v2.1: Linux 6.12's own (tests/vectors/kernel-6.12-smcr-v21.txt,
 * kernel-v2.sh part (a): the kernel's client, libsmcr's server) ---------- */

/* frame 4: the kernel's Proposal, release 1, 255, 2, feature mask 1 */
static const char k612_prop[] =
	"e2d4c3d901009c22000000000000000000000000000000000000000000000000"
	"000000000000000000000000000000000000001c000000000000000000000000"
	"0000000000000000000000000000000001000010000000000000000000000000"
	"0000ffff0a010101ff020001000000000000000000000000534d435242442e4b"
	"504545522020202020202020202020202020202020202020e2d4c3d9";
/* frame 6: libsmcr's Accept, release 1, 255, 2 */
static const char k612_acc_fc[] =
	"e2d4c3d90200a0282f6b5254005c020100000000000000000000ffff0a010102"
	"5254005c0201000011000003d30100000001530000007f8a155f0000001a1529"
	"534d435242442e4b504545522020202020202020202020202020202020202020"
	"000000000000000080210000736d63722d422020202020202020202020202020"
	"202020202020202020202020ff020000000000000000000000000000e2d4c3d9";
/* frame 8: the kernel's Confirm, echoing them, two GIDs */
static const char k612_conf_fc[] =
	"e2d4c3d90300c4285c555254005c010100000000000000000000ffff0a010101"
	"5254005c0101000011000003bc01000000012300ffff8880066900000057d687"
	"534d435242442e4b504545522020202020202020202020202020202020202020"
	"000000000000000080210000736d63722d412020202020202020202020202020"
	"202020202020202020202020ff02000000000000000000000000000002000000"
	"00000000000000000000ffff0a01010100000000000000000000ffff0a010111"
	"e2d4c3d9";
/* frame 11: the kernel's CONFIRM LINK reply, max_links 2 (34), max_conns 255 (35) */
static const char k612_llc_conf[] =
	"212c00835254005c010100000000000000000000ffff0a010101000011010000"
	"010102ff0000000000000000";

static void test_clc_v21_kernel(void)
{
	static const uint8_t gid2[16] = { [10] = 0xff, [11] = 0xff, 10, 1, 1, 17 };
	uint8_t v[300];
	struct smcr_clc_v2_msg m;
	struct smcr_llc_msg l;
	size_t n;

	n = unhex(k612_prop, v, sizeof(v));
	CU_ASSERT_EQUAL_FATAL(n, 156);
	clc2_roundtrip(v, n, &m);
	CU_ASSERT_EQUAL(m.proposal.typev2, SMCR_CLC_TYPE_R);
	CU_ASSERT_EQUAL(m.proposal.release, SMCR_CLC_RELEASE_1);
	CU_ASSERT_EQUAL(m.proposal.max_conns, 255);
	CU_ASSERT_EQUAL(m.proposal.max_links, 2);
	CU_ASSERT_EQUAL(m.proposal.feature_mask, 0x0001);	/* emulated ISM */
	CU_ASSERT_EQUAL(memcmp(m.proposal.roce_gid, k_gid_a, 16), 0);
	CU_ASSERT_EQUAL(memcmp(m.proposal.eids[0], k_eid, SMCR_EID_LEN), 0);

	n = unhex(k612_acc_fc, v, sizeof(v));
	CU_ASSERT_EQUAL_FATAL(n, 160);
	clc2_roundtrip(v, n, &m);
	CU_ASSERT(m.accept.r.first_contact);
	CU_ASSERT_EQUAL(m.accept.release, 1);
	CU_ASSERT_EQUAL(m.accept.max_conns, 255);
	CU_ASSERT_EQUAL(m.accept.max_links, 2);
	CU_ASSERT_EQUAL(m.accept.feature_mask, 0);
	CU_ASSERT_EQUAL(m.accept.vendor_options, 0);

	n = unhex(k612_conf_fc, v, sizeof(v));
	CU_ASSERT_EQUAL_FATAL(n, 196);
	clc2_roundtrip(v, n, &m);
	CU_ASSERT(m.confirm.r.first_contact);
	CU_ASSERT_EQUAL(m.confirm.os_type, SMCR_CLC_OS_LINUX);
	CU_ASSERT_EQUAL(m.confirm.release, 1);
	CU_ASSERT_EQUAL(m.confirm.max_conns, 255);
	CU_ASSERT_EQUAL(m.confirm.max_links, 2);
	CU_ASSERT_EQUAL(m.confirm.feature_mask, 0);	/* ours AND its own */
	CU_ASSERT_EQUAL(m.confirm.vendor_options, 0);
	CU_ASSERT_EQUAL(m.confirm.gid_count, 2);
	CU_ASSERT_EQUAL(memcmp(m.confirm.gids[0], k_gid_a, 16), 0);
	CU_ASSERT_EQUAL(memcmp(m.confirm.gids[1], gid2, 16), 0);

	n = unhex(k612_llc_conf, v, sizeof(v));
	CU_ASSERT_EQUAL_FATAL(n, 44);
	CU_ASSERT_EQUAL_FATAL(smcr_llc_decode(v, n, &l), 44);
	CU_ASSERT_EQUAL(l.type, SMCR_LLC_CONFIRM_LINK);
	CU_ASSERT(l.reply);
	CU_ASSERT_EQUAL(l.confirm_link.max_links, 2);
	CU_ASSERT_EQUAL(l.confirm_link.max_conns, 255);
	CU_ASSERT(!l.confirm_link.libsmcr);
}

static void test_clc_v2_decline(void)
{
	uint8_t v[44];
	struct smcr_clc_v2_msg m;

	memset(v, 0, sizeof(v));
	put_eyecatcher(v, 0);
	put8(v, 4, 4);
	put16(v, 5, 44);
	put8(v, 7, 0x20);
	put16(v, 8, 0x6a88);
	memcpy(v + 10, mac_b, 6);
	put32(v, 16, 0x030e0000);		/* no route (SMC-Rv2) */
	put8(v, 20, SMCR_CLC_OS_LINUX << 4);
	put32(v, 24, 0x03030002);
	put_eyecatcher(v, 40);
	clc2_roundtrip(v, sizeof(v), &m);
	CU_ASSERT_EQUAL(m.decline.d.diagnosis, 0x030e0000);
	CU_ASSERT_EQUAL(m.decline.d.peer_id.instance, 0x6a88);
	CU_ASSERT_FALSE(m.decline.d.out_of_sync);
	CU_ASSERT_EQUAL(m.decline.os_type, SMCR_CLC_OS_LINUX);
	CU_ASSERT_EQUAL(m.decline.diagnosis_v2[0], 0x03030002);
	/* S: typev2's first bit, as in v1 */
	put8(v, 7, 0x28);
	clc2_roundtrip(v, sizeof(v), &m);
	CU_ASSERT_TRUE(m.decline.d.out_of_sync);
	/* exactly 44 bytes, as Linux checks */
	put16(v, 5, 28);
	put_eyecatcher(v, 24);
	CU_ASSERT_EQUAL(clc2_dec(v, 28, &m), SMCR_E_LENGTH);
}

static void test_clc_encode_errors(void)
{
	struct smcr_clc_msg m;
	uint8_t out[100];

	memset(&m, 0, sizeof(m));
	m.hdr.type = 9;
	CU_ASSERT_EQUAL(smcr_clc_encode(&m, out, sizeof(out)), SMCR_E_TYPE);
	m.hdr.type = SMCR_CLC_PROPOSAL;
	m.proposal.ipv4_mask_len = 33;
	CU_ASSERT_EQUAL(smcr_clc_encode(&m, out, sizeof(out)), SMCR_E_INVAL);
	m.proposal.ipv4_mask_len = 0;
	m.proposal.ipv6_prefix_count = 1;
	m.proposal.ipv6_prefix[0].len = 129;
	CU_ASSERT_EQUAL(smcr_clc_encode(&m, out, sizeof(out)), SMCR_E_INVAL);
	m.proposal.ipv6_prefix_count = 0;
	m.proposal.ip_area_offset = 65535;
	CU_ASSERT_EQUAL(smcr_clc_encoded_len(&m), SMCR_E_INVAL);
	m.proposal.ip_area_offset = 48;		/* 100 bytes in all */
	CU_ASSERT_EQUAL(smcr_clc_encode(&m, out, sizeof(out)), 100);
	CU_ASSERT_EQUAL(smcr_clc_encode(&m, out, 99), SMCR_E_NOSPC);
}

/* ---- A.3 LLC --------------------------------------------------------------- */

static void llc_hdr(uint8_t *v, unsigned int type, unsigned int byte2, unsigned int flags)
{
	memset(v, 0, SMCR_LLC_LEN);
	put8(v, 0, type);
	put8(v, 1, 44);
	put8(v, 2, byte2);
	put8(v, 3, flags);
}

static void llc_roundtrip(const uint8_t *v, struct smcr_llc_msg *m, unsigned int type, bool reply)
{
	CU_ASSERT_EQUAL(llc_dec(v, SMCR_LLC_LEN, m), SMCR_LLC_LEN);
	CU_ASSERT_EQUAL(m->type, type);
	CU_ASSERT_EQUAL(m->reply, reply);
	check_llc_encode(m, v);
	check_truncations(llc_decode, v, SMCR_LLC_LEN, sizeof(*m));
}

/* A.3.1 Figure 31 CONFIRM LINK */
static void test_llc_confirm_link(void)
{
	uint8_t v[44];
	struct smcr_llc_msg m;

	llc_hdr(v, 1, 0, 0x80 | 0x03);		/* reply; Linux's no-eyecatcher bits */
	putbytes(v, 4, mac_a, 6);		/* sender's RoCE MAC */
	putbytes(v, 10, gid_a, 16);		/* sender's RoCE GID */
	put24(v, 26, 0x000123);			/* sender's QP number */
	put8(v, 29, 1);				/* link number */
	put32(v, 30, 0xDEADBEEF);		/* link user ID */
	put8(v, 34, 3);				/* max links */
	llc_roundtrip(v, &m, SMCR_LLC_CONFIRM_LINK, true);
	CU_ASSERT_EQUAL(memcmp(m.confirm_link.mac, mac_a, 6), 0);
	CU_ASSERT_EQUAL(memcmp(m.confirm_link.gid, gid_a, 16), 0);
	CU_ASSERT_EQUAL(m.confirm_link.qpn, 0x123);
	CU_ASSERT_EQUAL(m.confirm_link.link_num, 1);
	CU_ASSERT_EQUAL(m.confirm_link.link_uid, 0xDEADBEEF);
	CU_ASSERT_EQUAL(m.confirm_link.max_links, 3);
	CU_ASSERT_EQUAL(m.confirm_link.max_conns, 0);
	CU_ASSERT(m.confirm_link.no_rmbe_eyec);
	/* SMC-Rv2.1 (Linux 6.6+): max_conns in byte 35 */
	put8(v, 35, 32);
	llc_roundtrip(v, &m, SMCR_LLC_CONFIRM_LINK, true);
	CU_ASSERT_EQUAL(m.confirm_link.max_conns, 32);
	put8(v, 35, 0);

	llc_hdr(v, 1, 0, 0);			/* request, RFC style */
	putbytes(v, 4, mac_b, 6);
	putbytes(v, 10, gid_b, 16);
	put24(v, 26, 0xFFFFFF);
	put8(v, 29, 0xFE);
	put32(v, 30, 1);
	put8(v, 34, 8);
	llc_roundtrip(v, &m, SMCR_LLC_CONFIRM_LINK, false);
	CU_ASSERT_EQUAL(m.confirm_link.qpn, 0xFFFFFF);
	CU_ASSERT_EQUAL(m.confirm_link.link_num, 0xFE);
	CU_ASSERT(!m.confirm_link.no_rmbe_eyec);
	CU_ASSERT(!m.confirm_link.libsmcr);
	CU_ASSERT_EQUAL(llc_dec_patched(v, 40, 0xFF), 44);	/* reserved */
	/* libsmcr's mark in the last two reserved bytes; anything else
	 * there is no mark */
	put16(v, 42, SMCR_LLC_CONFIRM_LIBSMCR);
	llc_roundtrip(v, &m, SMCR_LLC_CONFIRM_LINK, false);
	CU_ASSERT(m.confirm_link.libsmcr);
	put16(v, 42, 0x6c72);
	CU_ASSERT_EQUAL(llc_dec(v, SMCR_LLC_LEN, &m), SMCR_LLC_LEN);
	CU_ASSERT(!m.confirm_link.libsmcr);
	put16(v, 42, 0);
	m.confirm_link.qpn = 0x1000000;
	CU_ASSERT_EQUAL(smcr_llc_encode(&m, v, sizeof(v)), SMCR_E_INVAL);
}

/* A.3.2 Figure 32 ADD LINK, at the deployed offsets (INTEROP in wire.h):
 * two reserved bytes after the MAC move GID to 12, QP 28, link 31, MTU 32,
 * PSN 33. */
static void test_llc_add_link(void)
{
	uint8_t v[44];
	struct smcr_llc_msg m;

	llc_hdr(v, 2, 0, 0);
	putbytes(v, 4, mac_b, 6);		/* sender's RoCE MAC */
	put16(v, 10, 0);			/* reserved */
	putbytes(v, 12, gid_b, 16);		/* sender's RoCE GID */
	put24(v, 28, 0x00ABCD);			/* sender's QP number */
	put8(v, 31, 2);				/* link number */
	put8(v, 32, 0x05);			/* reserved nibble, MTU 4096 */
	put24(v, 33, 0x00FEDC);			/* initial PSN */
	llc_roundtrip(v, &m, SMCR_LLC_ADD_LINK, false);
	CU_ASSERT(!m.add_link.reject);
	CU_ASSERT_EQUAL(m.add_link.reason, 0);
	CU_ASSERT_EQUAL(memcmp(m.add_link.mac, mac_b, 6), 0);
	CU_ASSERT_EQUAL(memcmp(m.add_link.gid, gid_b, 16), 0);
	CU_ASSERT_EQUAL(m.add_link.qpn, 0xABCD);
	CU_ASSERT_EQUAL(m.add_link.link_num, 2);
	CU_ASSERT_EQUAL(m.add_link.qp_mtu, SMCR_MTU_4096);
	CU_ASSERT_EQUAL(m.add_link.psn, 0xFEDC);

	/* a rejected reply: R, Z, reason "no alternate path" in byte 2 */
	llc_hdr(v, 2, 0x01, 0x80 | 0x40);
	putbytes(v, 4, mac_a, 6);
	putbytes(v, 12, gid_a, 16);
	llc_roundtrip(v, &m, SMCR_LLC_ADD_LINK, true);
	CU_ASSERT(m.add_link.reject);
	CU_ASSERT_EQUAL(m.add_link.reason, SMCR_LLC_ADD_REJ_NO_ALT_PATH);
	CU_ASSERT_EQUAL(m.add_link.qp_mtu, 0);	/* not checked in a reject */
	CU_ASSERT_EQUAL(llc_dec_patched(v, 2, 0xF2), 44);	/* high nibble reserved */
	m.add_link.reason = 16;
	CU_ASSERT_EQUAL(smcr_llc_encode(&m, v, sizeof(v)), SMCR_E_INVAL);
	m.add_link.reason = 2;
	m.add_link.psn = 0x1000000;
	CU_ASSERT_EQUAL(smcr_llc_encode(&m, v, sizeof(v)), SMCR_E_INVAL);
}

/* A.3.3 Figure 33/34 ADD LINK CONTINUATION */
static void test_llc_add_link_cont(void)
{
	uint8_t v[44];
	struct smcr_llc_msg m;

	llc_hdr(v, 3, 0, 0);
	put8(v, 4, 2);				/* link number */
	put8(v, 5, 5);				/* RTokens remaining, these included */
	put32(v, 8, 0x00001111);		/* pair 1: reference rkey */
	put32(v, 12, 0x00002222);		/*         new rkey */
	put64(v, 16, 0x1000200030004000ull);	/*         new virtual address */
	put32(v, 24, 0x00003333);		/* pair 2 */
	put32(v, 28, 0x00004444);
	put64(v, 32, 0x5000600070008000ull);
	llc_roundtrip(v, &m, SMCR_LLC_ADD_LINK_CONT, false);
	CU_ASSERT_EQUAL(m.add_link_cont.link_num, 2);
	CU_ASSERT_EQUAL(m.add_link_cont.num_rtokens, 5);
	CU_ASSERT_EQUAL(m.add_link_cont.pair[0].ref_rkey, 0x1111);
	CU_ASSERT_EQUAL(m.add_link_cont.pair[0].new_rkey, 0x2222);
	CU_ASSERT_EQUAL(m.add_link_cont.pair[0].new_vaddr, 0x1000200030004000ull);
	CU_ASSERT_EQUAL(m.add_link_cont.pair[1].ref_rkey, 0x3333);
	CU_ASSERT_EQUAL(m.add_link_cont.pair[1].new_rkey, 0x4444);
	CU_ASSERT_EQUAL(m.add_link_cont.pair[1].new_vaddr, 0x5000600070008000ull);

	/* the last message with one pair: the second slot is zeros */
	llc_hdr(v, 3, 0, 0x80);
	put8(v, 4, 2);
	put8(v, 5, 1);
	put32(v, 8, 0xAAAA);
	put32(v, 12, 0xBBBB);
	put64(v, 16, 0xCCCC);
	llc_roundtrip(v, &m, SMCR_LLC_ADD_LINK_CONT, true);
	CU_ASSERT_EQUAL(m.add_link_cont.num_rtokens, 1);
	CU_ASSERT_EQUAL(m.add_link_cont.pair[0].new_vaddr, 0xCCCC);
	CU_ASSERT_EQUAL(m.add_link_cont.pair[1].ref_rkey, 0);
	/* the encoder writes zeros there whatever the host struct holds */
	m.add_link_cont.pair[1].ref_rkey = 0x77;
	check_llc_encode(&m, v);
	/* an empty reply (A.3.3: "number of RTokens ... = 0") */
	llc_hdr(v, 3, 0, 0x80);
	put8(v, 4, 2);
	llc_roundtrip(v, &m, SMCR_LLC_ADD_LINK_CONT, true);
	CU_ASSERT_EQUAL(m.add_link_cont.num_rtokens, 0);
}

/* A.3.4 Figure 35 DELETE LINK */
static void test_llc_delete_link(void)
{
	uint8_t v[44];
	struct smcr_llc_msg m;

	llc_hdr(v, 4, 0, 0x20);			/* orderly */
	put8(v, 4, 3);				/* link number */
	put32(v, 5, 0x00020000);		/* operator initiated termination */
	llc_roundtrip(v, &m, SMCR_LLC_DELETE_LINK, false);
	CU_ASSERT(!m.delete_link.all);
	CU_ASSERT(m.delete_link.orderly);
	CU_ASSERT_EQUAL(m.delete_link.link_num, 3);
	CU_ASSERT_EQUAL(m.delete_link.reason, SMCR_LLC_DEL_OP_INIT_TERM);

	llc_hdr(v, 4, 0, 0x80 | 0x40);		/* reply, all */
	put8(v, 4, 0);
	put32(v, 5, 0x00100000);		/* unknown link ID */
	llc_roundtrip(v, &m, SMCR_LLC_DELETE_LINK, true);
	CU_ASSERT(m.delete_link.all);
	CU_ASSERT(!m.delete_link.orderly);
	CU_ASSERT_EQUAL(m.delete_link.reason, SMCR_LLC_DEL_NO_LINK);
	CU_ASSERT_EQUAL(SMCR_LLC_DEL_LOST_PATH, 0x00010000);
	CU_ASSERT_EQUAL(SMCR_LLC_DEL_PROG_INIT_TERM, 0x00030000);
	CU_ASSERT_EQUAL(SMCR_LLC_DEL_PROT_VIOL, 0x00040000);
	CU_ASSERT_EQUAL(SMCR_LLC_DEL_NOT_NEEDED, 0x00050000);
}

/* A.3.5 Figure 36/37 CONFIRM RKEY */
static void test_llc_confirm_rkey(void)
{
	uint8_t v[44];
	struct smcr_llc_msg m;

	llc_hdr(v, 6, 0, 0);
	put8(v, 4, 2);				/* other links' tokens */
	put32(v, 5, 0x0A0B0C0D);		/* new RMB rkey for this link */
	put64(v, 9, 0x00007FAA00000000ull);	/* its virtual address */
	put8(v, 17, 2);				/* other link 1: link number */
	put32(v, 18, 0x11111111);		/*   rkey */
	put64(v, 22, 0x00007FBB00000000ull);	/*   virtual address */
	put8(v, 30, 3);				/* other link 2 */
	put32(v, 31, 0x22222222);
	put64(v, 35, 0x00007FCC00000000ull);
	put8(v, 43, 0);				/* reserved */
	llc_roundtrip(v, &m, SMCR_LLC_CONFIRM_RKEY, false);
	CU_ASSERT(!m.confirm_rkey.negative);
	CU_ASSERT(!m.confirm_rkey.retry);
	CU_ASSERT_EQUAL(m.confirm_rkey.num_tokens, 2);
	CU_ASSERT_EQUAL(m.confirm_rkey.rkey, 0x0A0B0C0D);
	CU_ASSERT_EQUAL(m.confirm_rkey.vaddr, 0x00007FAA00000000ull);
	CU_ASSERT_EQUAL(m.confirm_rkey.other[0].link_num, 2);
	CU_ASSERT_EQUAL(m.confirm_rkey.other[0].rkey, 0x11111111);
	CU_ASSERT_EQUAL(m.confirm_rkey.other[0].vaddr, 0x00007FBB00000000ull);
	CU_ASSERT_EQUAL(m.confirm_rkey.other[1].link_num, 3);
	CU_ASSERT_EQUAL(m.confirm_rkey.other[1].rkey, 0x22222222);
	CU_ASSERT_EQUAL(m.confirm_rkey.other[1].vaddr, 0x00007FCC00000000ull);

	/* negative reply with "retry" (R, Z, C); 0x40 is the reserved "0" */
	llc_hdr(v, 6, 0, 0x80 | 0x20 | 0x10);
	put32(v, 5, 0x0A0B0C0D);
	llc_roundtrip(v, &m, SMCR_LLC_CONFIRM_RKEY, true);
	CU_ASSERT(m.confirm_rkey.negative);
	CU_ASSERT(m.confirm_rkey.retry);
	CU_ASSERT_EQUAL(m.confirm_rkey.num_tokens, 0);
	CU_ASSERT_EQUAL(llc_dec_patched(v, 3, 0x80 | 0x40), 44);
	/* seven other links is the most a group of eight can have */
	CU_ASSERT_EQUAL(llc_dec_patched(v, 4, 7), 44);
	CU_ASSERT_EQUAL(llc_dec_patched(v, 4, 8), SMCR_E_RANGE);
	m.confirm_rkey.num_tokens = 8;
	CU_ASSERT_EQUAL(smcr_llc_encode(&m, v, sizeof(v)), SMCR_E_INVAL);
}

/* A.3.6 Figure 38 CONFIRM RKEY CONTINUATION: three specifications at 5,
 * 18 and 31 fill the 44 bytes. */
static void test_llc_confirm_rkey_cont(void)
{
	uint8_t v[44];
	struct smcr_llc_msg m;
	unsigned int i;

	llc_hdr(v, 8, 0, 0);
	put8(v, 4, 4);				/* tokens left, these included */
	for (i = 0; i < 3; i++) {
		put8(v, 5 + 13 * i, 4 + i);
		put32(v, 6 + 13 * i, 0x0100 + i);
		put64(v, 10 + 13 * i, 0x7F0000000000ull + i);
	}
	llc_roundtrip(v, &m, SMCR_LLC_CONFIRM_RKEY_CONT, false);
	CU_ASSERT(!m.confirm_rkey_cont.negative);
	CU_ASSERT_EQUAL(m.confirm_rkey_cont.num_left, 4);
	for (i = 0; i < 3; i++) {
		CU_ASSERT_EQUAL(m.confirm_rkey_cont.spec[i].link_num, 4 + i);
		CU_ASSERT_EQUAL(m.confirm_rkey_cont.spec[i].rkey, 0x0100 + i);
		CU_ASSERT_EQUAL(m.confirm_rkey_cont.spec[i].vaddr, 0x7F0000000000ull + i);
	}

	llc_hdr(v, 8, 0, 0x80 | 0x20);		/* negative reply, one left */
	put8(v, 4, 1);
	put8(v, 5, 7);
	put32(v, 6, 0xFFFFFFFF);
	put64(v, 10, 0xFFFFFFFFFFFFFFFFull);
	llc_roundtrip(v, &m, SMCR_LLC_CONFIRM_RKEY_CONT, true);
	CU_ASSERT(m.confirm_rkey_cont.negative);
	CU_ASSERT_EQUAL(m.confirm_rkey_cont.spec[0].rkey, 0xFFFFFFFF);
	CU_ASSERT_EQUAL(m.confirm_rkey_cont.spec[0].vaddr, 0xFFFFFFFFFFFFFFFFull);
	CU_ASSERT_EQUAL(m.confirm_rkey_cont.spec[1].link_num, 0);
	CU_ASSERT_EQUAL(llc_dec_patched(v, 4, 8), SMCR_E_RANGE);
}

/* A.3.7 Figure 39 DELETE RKEY */
static void test_llc_delete_rkey(void)
{
	uint8_t v[44];
	struct smcr_llc_msg m;
	unsigned int i;

	llc_hdr(v, 9, 0, 0);
	put8(v, 4, 8);				/* count */
	put8(v, 5, 0);				/* error mask */
	for (i = 0; i < 8; i++)
		put32(v, 8 + 4 * i, 0x10000 + i);	/* deleted rkeys */
	llc_roundtrip(v, &m, SMCR_LLC_DELETE_RKEY, false);
	CU_ASSERT_EQUAL(m.delete_rkey.count, 8);
	CU_ASSERT_EQUAL(m.delete_rkey.err_mask, 0);
	for (i = 0; i < 8; i++)
		CU_ASSERT_EQUAL(m.delete_rkey.rkey[i], 0x10000 + i);

	/* A.3.7: b'01010000' says the 2nd and 4th failed */
	llc_hdr(v, 9, 0, 0x80 | 0x20);
	put8(v, 4, 4);
	put8(v, 5, 0x50);
	for (i = 0; i < 4; i++)
		put32(v, 8 + 4 * i, 0x20 + i);
	llc_roundtrip(v, &m, SMCR_LLC_DELETE_RKEY, true);
	CU_ASSERT(m.delete_rkey.negative);
	CU_ASSERT_EQUAL(m.delete_rkey.count, 4);
	CU_ASSERT_EQUAL(m.delete_rkey.err_mask, 0x50);
	CU_ASSERT_EQUAL(m.delete_rkey.rkey[3], 0x23);
	CU_ASSERT_EQUAL(m.delete_rkey.rkey[4], 0);
	/* counts beyond 1..8, and mask bits beyond the count */
	CU_ASSERT_EQUAL(llc_dec_patched(v, 4, 0), SMCR_E_RANGE);
	CU_ASSERT_EQUAL(llc_dec_patched(v, 4, 9), SMCR_E_RANGE);
	CU_ASSERT_EQUAL(llc_dec_patched(v, 5, 0x58), SMCR_E_RANGE);
	CU_ASSERT_EQUAL(llc_dec_patched(v, 5, 0xF0), 44);
	m.delete_rkey.count = 0;
	CU_ASSERT_EQUAL(smcr_llc_encode(&m, v, sizeof(v)), SMCR_E_INVAL);
	m.delete_rkey.count = 2;
	m.delete_rkey.err_mask = 0x20;
	CU_ASSERT_EQUAL(smcr_llc_encode(&m, v, sizeof(v)), SMCR_E_INVAL);
}

/* A.3.8 Figure 40 TEST LINK */
static void test_llc_test_link(void)
{
	uint8_t v[44];
	struct smcr_llc_msg m;
	unsigned int i;

	llc_hdr(v, 7, 0, 0);
	for (i = 0; i < 16; i++)
		put8(v, 4 + i, 0xF0 + i);	/* user data */
	llc_roundtrip(v, &m, SMCR_LLC_TEST_LINK, false);
	for (i = 0; i < 16; i++)
		CU_ASSERT_EQUAL(m.test_link.user_data[i], 0xF0 + i);
	/* the reply echoes the data with R set */
	m.reply = true;
	put8(v, 3, 0x80);
	check_llc_encode(&m, v);
}

static void test_llc_malformed(void)
{
	uint8_t v[44];
	struct smcr_llc_msg m;

	llc_hdr(v, 7, 0, 0);
	CU_ASSERT_EQUAL(llc_dec_patched(v, 1, 43), SMCR_E_LENGTH);
	CU_ASSERT_EQUAL(llc_dec_patched(v, 1, 45), SMCR_E_LENGTH);
	/* b'00' opcodes must be known: 0x00, 0x05, 0x0A, 0x3F */
	CU_ASSERT_EQUAL(llc_dec_patched(v, 0, 0x00), SMCR_E_TYPE);
	CU_ASSERT_EQUAL(llc_dec_patched(v, 0, 0x05), SMCR_E_TYPE);	/* v2 only */
	CU_ASSERT_EQUAL(llc_dec_patched(v, 0, 0x0A), SMCR_E_TYPE);
	CU_ASSERT_EQUAL(llc_dec_patched(v, 0, 0x3F), SMCR_E_TYPE);
	CU_ASSERT_EQUAL(llc_dec_patched(v, 0, 0x40), SMCR_E_TYPE);
	/* b'10' opcodes may be dropped silently */
	CU_ASSERT_EQUAL(llc_dec_patched(v, 0, 0x80), SMCR_E_OPTIONAL);
	CU_ASSERT_EQUAL(llc_dec_patched(v, 0, 0x8A), SMCR_E_OPTIONAL);
	/* b'11' is CDC */
	CU_ASSERT_EQUAL(llc_dec_patched(v, 0, 0xFE), SMCR_E_NOTTYPE);
	CU_ASSERT(smcr_wr_is_cdc((const uint8_t[]){ 0xFE }, 1));
	CU_ASSERT(!smcr_wr_is_cdc((const uint8_t[]){ 0x07 }, 1));
	CU_ASSERT(!smcr_wr_is_cdc(v, 0));
	/* a longer buffer is fine, only 44 bytes are read */
	{
		uint8_t big[64];

		memset(big, 0xEE, sizeof(big));
		memcpy(big, v, 44);
		CU_ASSERT_EQUAL(llc_dec(big, sizeof(big), &m), 44);
	}
	memset(&m, 0, sizeof(m));
	m.type = 5;
	CU_ASSERT_EQUAL(smcr_llc_encode(&m, v, sizeof(v)), SMCR_E_TYPE);
	CU_ASSERT_STRING_EQUAL(smcr_llc_type_str(SMCR_LLC_ADD_LINK_CONT), "ADD LINK CONTINUATION");
	CU_ASSERT_STRING_EQUAL(smcr_llc_type_str(5), "REQ ADD LINK");
	CU_ASSERT_STRING_EQUAL(smcr_llc_type_str(0x0A), "unknown");
}

/* ---- LLC v2: the kernel's own messages (tests/vectors/kernel-smcr-v2.txt) -- */

static const struct {
	unsigned int frame;
	const char *hex;
} k_llc[] = {
	{ 14, "212c00035254005c020100000000000000000000ffff0a010102000011010000010102000000000000000000" },
	{ 16, "212c00835254005c010100000000000000000000ffff0a010101000011010000010102000000000000000000" },
	{ 18, "225800005254005c0201000000000000000000000000ffff0a0101020000120203cb63f80000000000000000"
	      "800000000000000000000000ffff0a01010200000000000000000100000003cd000005c5ffff8880082d0000" },
	{ 20, "222c00c05254005c0201000000000000000000000000ffff0a0101020000120203cb63f80000000000000000" },
	{ 31, "262c00000000000629ffff888008310000000000000000000000000000000000000000000000000000000000" },
	{ 33, "262c00800000000629ffff888008310000000000000000000000000000000000000000000000000000000000" },
	{ 3529, "292c0000010000000000034c0000000000000000000000000000000000000000000000000000000000000000" },
	{ 3531, "292c008001000000000000000000000000000000000000000000000000000000000000000000000000000000" },
};

static void test_llc_v2_kernel(void)
{
	uint8_t v[128], out[44];
	struct smcr_llc_msg m;
	unsigned int i;

	for (i = 0; i < sizeof(k_llc) / sizeof(k_llc[0]); i++) {
		size_t n = unhex(k_llc[i].hex, v, sizeof(v));

		CU_ASSERT_EQUAL_FATAL(smcr_llc_decode(v, n, &m), 44);
		CU_ASSERT_EQUAL(m.version, SMCR_LLC_VERSION_2);
		CU_ASSERT_EQUAL(m.type, v[0] & 0x0F);
		CU_ASSERT_EQUAL(m.length, n);
		CU_ASSERT_EQUAL(m.reply, (v[3] & 0x80) != 0);
		if (n != 44)
			continue;
		/* every 44-byte one re-encodes byte for byte */
		CU_ASSERT_EQUAL(smcr_llc_encode(&m, out, sizeof(out)), 44);
		if (memcmp(out, v, 44) != 0)
			fprintf(stderr, "LLC v2 frame %u does not re-encode\n", k_llc[i].frame);
		CU_ASSERT(memcmp(out, v, 44) == 0);
	}
	/* frame 14: CONFIRM LINK v2 from the server, no RMBE eyecatcher */
	unhex(k_llc[0].hex, v, sizeof(v));
	CU_ASSERT_EQUAL(smcr_llc_decode(v, 44, &m), 44);
	CU_ASSERT_EQUAL(m.type, SMCR_LLC_CONFIRM_LINK);
	CU_ASSERT(m.confirm_link.no_rmbe_eyec);
	CU_ASSERT(memcmp(m.confirm_link.gid, k_gid_b, 16) == 0);
	CU_ASSERT_EQUAL(m.confirm_link.qpn, 0x11);
	CU_ASSERT_EQUAL(m.confirm_link.link_num, 1);
	CU_ASSERT_EQUAL(m.confirm_link.link_uid, 0x00000101);
	CU_ASSERT_EQUAL(m.confirm_link.max_links, 2);
	/* frame 18: ADD LINK v2, 88 bytes (RKey list after 44): head read */
	unhex(k_llc[2].hex, v, sizeof(v));
	CU_ASSERT_EQUAL(smcr_llc_decode(v, 88, &m), 44);
	CU_ASSERT_EQUAL(m.type, SMCR_LLC_ADD_LINK);
	CU_ASSERT_EQUAL(m.length, 88);
	CU_ASSERT(!m.reply && !m.add_link.reject);
	CU_ASSERT_EQUAL(m.add_link.qpn, 0x12);
	CU_ASSERT_EQUAL(m.add_link.link_num, 2);
	/* ...and its extension: the server's new link GID, one RKey pair */
	{
		struct smcr_llc_add_link_v2_ext ext;
		struct smcr_llc_rtoken_pair pairs[2];
		uint8_t again[128];

		CU_ASSERT_EQUAL(smcr_llc_add_link_v2_ext_decode(v, 88, &ext, pairs, 2), 1);
		CU_ASSERT(ext.direct);
		CU_ASSERT(memcmp(ext.target_gid, k_gid_b, 16) == 0);
		CU_ASSERT_EQUAL(ext.num_rkeys, 1);
		CU_ASSERT_EQUAL(pairs[0].ref_rkey, 0x3cd);
		CU_ASSERT_EQUAL(pairs[0].new_rkey, 0x5c5);
		CU_ASSERT_EQUAL(pairs[0].new_vaddr, 0xffff8880082d0000ull);
		/* re-encoded byte for byte, 88 bytes */
		CU_ASSERT_EQUAL(smcr_llc_add_link_v2_encode(&m, &ext, pairs, again, sizeof(again)), 88);
		CU_ASSERT(memcmp(again, v, 88) == 0);
		CU_ASSERT_EQUAL(smcr_llc_add_link_v2_encode(&m, &ext, pairs, again, 87), SMCR_E_NOSPC);
		/* cut short: no room for the pair it announces, or no extension */
		CU_ASSERT_EQUAL(smcr_llc_add_link_v2_ext_decode(v, 87, &ext, pairs, 2), SMCR_E_TRUNC);
		CU_ASSERT_EQUAL(smcr_llc_add_link_v2_ext_decode(v, 71, &ext, pairs, 2), SMCR_E_TRUNC);
		/* more than 255 RKeys */
		memcpy(again, v, 88);
		again[70] = 0x00; again[71] = 0x01;	/* 256 */
		CU_ASSERT_EQUAL(smcr_llc_add_link_v2_ext_decode(again, 88, &ext, pairs, 2), SMCR_E_RANGE);
	}
	/* frame 20: the client's reject (Z), the request echoed */
	unhex(k_llc[3].hex, v, sizeof(v));
	CU_ASSERT_EQUAL(smcr_llc_decode(v, 44, &m), 44);
	CU_ASSERT(m.reply && m.add_link.reject);
	/* frame 31: CONFIRM RKEY v2 */
	unhex(k_llc[4].hex, v, sizeof(v));
	CU_ASSERT_EQUAL(smcr_llc_decode(v, 44, &m), 44);
	CU_ASSERT_EQUAL(m.confirm_rkey.rkey, 0x629);
	CU_ASSERT_EQUAL(m.confirm_rkey.vaddr, 0xffff888008310000ull);
	CU_ASSERT_EQUAL(m.confirm_rkey.num_tokens, 0);
	/* frame 3529: DELETE RKEY v2 */
	unhex(k_llc[6].hex, v, sizeof(v));
	CU_ASSERT_EQUAL(smcr_llc_decode(v, 44, &m), 44);
	CU_ASSERT_EQUAL(m.delete_rkey.count, 1);
	CU_ASSERT_EQUAL(m.delete_rkey.rkey[0], 0x34c);

	/* lengths: v2 takes 44..8192 (little-endian), v1 only 44 */
	unhex(k_llc[0].hex, v, sizeof(v));
	v[1] = 43;
	CU_ASSERT_EQUAL(smcr_llc_decode(v, 44, &m), SMCR_E_LENGTH);
	v[1] = 0x00; v[2] = 0x20;		/* 8192 */
	CU_ASSERT_EQUAL(smcr_llc_decode(v, 44, &m), 44);
	v[1] = 0x01;				/* 8193 */
	CU_ASSERT_EQUAL(smcr_llc_decode(v, 44, &m), SMCR_E_LENGTH);
	/* REQ ADD LINK v2 (0x25): GID count and the first GID */
	memset(v, 0, 60);
	v[0] = 0x25; v[1] = 60; v[24] = 2;
	memcpy(v + 28, k_gid_a, 16);
	CU_ASSERT_EQUAL(smcr_llc_decode(v, 44, &m), 44);
	CU_ASSERT_EQUAL(m.type, SMCR_LLC_REQ_ADD_LINK);
	CU_ASSERT_EQUAL(m.req_add_link.gid_count, 2);
	CU_ASSERT(memcmp(m.req_add_link.gid, k_gid_a, 16) == 0);
	/* its response, as Linux sends it: type, length, R, nothing else */
	memset(&m, 0, sizeof(m));
	m.type = SMCR_LLC_REQ_ADD_LINK;
	m.reply = true;
	CU_ASSERT_EQUAL(smcr_llc_encode(&m, out, sizeof(out)), SMCR_E_TYPE);	/* v1 */
	m.version = SMCR_LLC_VERSION_2;
	CU_ASSERT_EQUAL(smcr_llc_encode(&m, out, sizeof(out)), 44);
	CU_ASSERT(out[0] == 0x25 && out[1] == 44 && out[2] == 0 && out[3] == 0x80);
	/* our request: one GID (all the 44 bytes hold), no R; decodes back */
	m.reply = false;
	m.req_add_link.gid_count = 3;
	memcpy(m.req_add_link.gid, k_gid_a, 16);
	CU_ASSERT_EQUAL(smcr_llc_encode(&m, out, sizeof(out)), 44);
	CU_ASSERT(out[0] == 0x25 && out[1] == 44 && out[3] == 0 && out[24] == 1);
	CU_ASSERT(memcmp(out + 28, k_gid_a, 16) == 0);
	memset(&m, 0, sizeof(m));
	CU_ASSERT_EQUAL(smcr_llc_decode(out, 44, &m), 44);
	CU_ASSERT_EQUAL(m.req_add_link.gid_count, 1);
	CU_ASSERT(memcmp(m.req_add_link.gid, k_gid_a, 16) == 0);
	/* a v2 TEST LINK */
	memset(&m, 0, sizeof(m));
	m.type = SMCR_LLC_TEST_LINK;
	m.version = SMCR_LLC_VERSION_2;
	CU_ASSERT_EQUAL(smcr_llc_encode(&m, out, sizeof(out)), 44);
	CU_ASSERT(out[0] == 0x27 && out[1] == 44 && out[2] == 0 && out[3] == 0);
}

/* ---- A.4 CDC ------------------------------------------------------------- */

static void cdc_vec(uint8_t *v)
{
	memset(v, 0, 44);
	put8(v, 0, 0xFE);			/* type */
	put8(v, 1, 44);				/* length */
	put16(v, 2, 0xFFFF);			/* sequence number */
	put32(v, 4, 0x89ABCDEF);		/* alert token */
	put16(v, 8, 0);				/* reserved */
	put16(v, 10, 0x1234);			/* producer cursor wrap seqno */
	put32(v, 12, 0x0007FFFF);		/* producer cursor */
	put16(v, 16, 0);			/* reserved */
	put16(v, 18, 0x1233);			/* consumer cursor wrap seqno */
	put32(v, 20, 0x00000004);		/* consumer cursor */
	put8(v, 24, 0x80 | 0x10);		/* B, R */
	put8(v, 25, 0x80);			/* D */
}

static void test_cdc(void)
{
	uint8_t v[44], out[48];
	struct smcr_cdc_msg m;

	cdc_vec(v);
	CU_ASSERT_EQUAL(cdc_dec(v, 44, &m), 44);
	CU_ASSERT_EQUAL(m.seqno, 0xFFFF);
	CU_ASSERT_EQUAL(m.token, 0x89ABCDEF);
	CU_ASSERT_EQUAL(m.prod.wrap, 0x1234);
	CU_ASSERT_EQUAL(m.prod.count, 0x7FFFF);
	CU_ASSERT_EQUAL(m.cons.wrap, 0x1233);
	CU_ASSERT_EQUAL(m.cons.count, 4);
	CU_ASSERT(m.writer_blocked);
	CU_ASSERT(!m.urg_pending);
	CU_ASSERT(!m.urg_present);
	CU_ASSERT(m.cons_update_req);
	CU_ASSERT(!m.failover_validation);
	CU_ASSERT(m.peer_done_writing);
	CU_ASSERT(!m.peer_conn_closed);
	CU_ASSERT(!m.peer_abort);
	memset(out, 0xA5, sizeof(out));
	CU_ASSERT_EQUAL(smcr_cdc_encode(&m, out, sizeof(out)), 44);
	CU_ASSERT_EQUAL(memcmp(out, v, 44), 0);
	CU_ASSERT_EQUAL(out[44], 0xA5);
	CU_ASSERT_EQUAL(smcr_cdc_encode(&m, out, 43), SMCR_E_NOSPC);
	check_truncations(cdc_decode, v, 44, sizeof(m));
}

/* Each flag bit of bytes 24 and 25 alone maps to its own field. */
static void test_cdc_flags(void)
{
	static const struct {
		size_t byte;
		uint8_t bit;
		size_t field;
	} flags[] = {
		{ 24, 0x80, offsetof(struct smcr_cdc_msg, writer_blocked) },
		{ 24, 0x40, offsetof(struct smcr_cdc_msg, urg_pending) },
		{ 24, 0x20, offsetof(struct smcr_cdc_msg, urg_present) },
		{ 24, 0x10, offsetof(struct smcr_cdc_msg, cons_update_req) },
		{ 24, 0x08, offsetof(struct smcr_cdc_msg, failover_validation) },
		{ 25, 0x80, offsetof(struct smcr_cdc_msg, peer_done_writing) },
		{ 25, 0x40, offsetof(struct smcr_cdc_msg, peer_conn_closed) },
		{ 25, 0x20, offsetof(struct smcr_cdc_msg, peer_abort) },
	};
	size_t i, j, nflags = sizeof(flags) / sizeof(flags[0]);
	uint8_t v[44], out[44];
	struct smcr_cdc_msg m;

	for (i = 0; i < nflags; i++) {
		cdc_vec(v);
		v[24] = v[25] = 0;
		v[flags[i].byte] = flags[i].bit;
		CU_ASSERT_EQUAL(cdc_dec(v, 44, &m), 44);
		for (j = 0; j < nflags; j++) {
			bool set = *(const bool *)((const char *)&m + flags[j].field);

			CU_ASSERT_EQUAL(set, i == j);
		}
		CU_ASSERT_EQUAL(smcr_cdc_encode(&m, out, sizeof(out)), 44);
		CU_ASSERT_EQUAL(memcmp(out, v, 44), 0);
	}
	/* reserved bits are ignored and never sent */
	cdc_vec(v);
	v[24] = 0x07;
	v[25] = 0x1F;
	v[8] = 0xFF;
	v[43] = 0xFF;
	CU_ASSERT_EQUAL(cdc_dec(v, 44, &m), 44);
	CU_ASSERT(!m.writer_blocked && !m.failover_validation && !m.peer_abort);
	CU_ASSERT_EQUAL(smcr_cdc_encode(&m, out, sizeof(out)), 44);
	CU_ASSERT_EQUAL(out[24], 0);
	CU_ASSERT_EQUAL(out[25], 0);
	CU_ASSERT_EQUAL(out[8], 0);
	CU_ASSERT_EQUAL(out[43], 0);
}

static void test_cdc_malformed(void)
{
	uint8_t v[44];
	struct smcr_cdc_msg m;

	cdc_vec(v);
	v[0] = 0x07;				/* an LLC message */
	CU_ASSERT_EQUAL(cdc_dec(v, 44, &m), SMCR_E_NOTTYPE);
	v[0] = 0xFF;
	CU_ASSERT_EQUAL(cdc_dec(v, 44, &m), SMCR_E_NOTTYPE);
	cdc_vec(v);
	v[1] = 40;
	CU_ASSERT_EQUAL(cdc_dec(v, 44, &m), SMCR_E_LENGTH);
}

/* ---- cursors, sequence numbers, sizes -------------------------------------- */

static struct smcr_cdc_cursor cur(uint16_t wrap, uint32_t count)
{
	struct smcr_cdc_cursor c = { .wrap = wrap, .count = count };

	return c;
}

static void test_cursor_advance(void)
{
	const uint32_t size = 1000;
	struct smcr_cdc_cursor c = cur(5, 990);

	smcr_cursor_advance(size, &c, 9);		/* up to the last byte */
	CU_ASSERT_EQUAL(c.wrap, 5);
	CU_ASSERT_EQUAL(c.count, 999);
	smcr_cursor_advance(size, &c, 1);		/* exactly onto the wrap */
	CU_ASSERT_EQUAL(c.wrap, 6);
	CU_ASSERT_EQUAL(c.count, 0);
	smcr_cursor_advance(size, &c, 0);
	CU_ASSERT_EQUAL(c.wrap, 6);
	CU_ASSERT_EQUAL(c.count, 0);
	c = cur(5, 990);
	smcr_cursor_advance(size, &c, 20);		/* across the wrap */
	CU_ASSERT_EQUAL(c.wrap, 6);
	CU_ASSERT_EQUAL(c.count, 10);
	c = cur(5, 990);
	smcr_cursor_advance(size, &c, size);		/* a whole window */
	CU_ASSERT_EQUAL(c.wrap, 6);
	CU_ASSERT_EQUAL(c.count, 990);
	c = cur(0xFFFF, 999);				/* the wrap counter wraps too */
	smcr_cursor_advance(size, &c, 2);
	CU_ASSERT_EQUAL(c.wrap, 0);
	CU_ASSERT_EQUAL(c.count, 1);
	c = cur(0, 0);					/* 512 MiB RMB, 4 GiB moved */
	smcr_cursor_advance(1u << 29, &c, 1ull << 32);
	CU_ASSERT_EQUAL(c.wrap, 8);
	CU_ASSERT_EQUAL(c.count, 0);
	CU_ASSERT(smcr_cursor_valid(size, &c));
	c.count = size;
	CU_ASSERT(!smcr_cursor_valid(size, &c));
	CU_ASSERT(!smcr_cursor_valid(0, &c));
}

static void test_cursor_compare(void)
{
	const uint32_t size = 1000;
	struct smcr_cdc_cursor a, b;

	a = cur(7, 100);
	b = cur(7, 300);
	CU_ASSERT_EQUAL(smcr_cursor_dist(size, &a, &b), 200);
	CU_ASSERT_EQUAL(smcr_cursor_dist(size, &b, &a), -200);
	CU_ASSERT_EQUAL(smcr_cursor_diff(size, &a, &b), 200);
	CU_ASSERT_EQUAL(smcr_cursor_diff(size, &b, &a), 0);	/* stale: not ahead */
	CU_ASSERT_EQUAL(smcr_cursor_cmp(size, &a, &b), -1);
	CU_ASSERT_EQUAL(smcr_cursor_cmp(size, &b, &a), 1);
	CU_ASSERT_EQUAL(smcr_cursor_cmp(size, &a, &a), 0);

	/* across a wrap: the new count is smaller, the wrap one higher */
	a = cur(7, 900);
	b = cur(8, 100);
	CU_ASSERT_EQUAL(smcr_cursor_dist(size, &a, &b), 200);
	CU_ASSERT_EQUAL(smcr_cursor_diff(size, &a, &b), 200);
	CU_ASSERT_EQUAL(smcr_cursor_cmp(size, &b, &a), 1);

	/* a full window: same count, one wrap apart (A.4, the case the
	 * wrap sequence numbers exist for) */
	a = cur(7, 500);
	b = cur(8, 500);
	CU_ASSERT_EQUAL(smcr_cursor_diff(size, &a, &b), size);
	CU_ASSERT_EQUAL(smcr_cursor_cmp(size, &a, &b), -1);

	/* across the 16-bit wrap counter's own wrap */
	a = cur(0xFFFF, 900);
	b = cur(0, 100);
	CU_ASSERT_EQUAL(smcr_cursor_dist(size, &a, &b), 200);
	CU_ASSERT_EQUAL(smcr_cursor_cmp(size, &b, &a), 1);
	CU_ASSERT_EQUAL(smcr_cursor_diff(size, &b, &a), 0);

	/* advancing and measuring agree */
	a = cur(0xFFFE, 123);
	b = a;
	smcr_cursor_advance(size, &b, 2345);
	CU_ASSERT_EQUAL(smcr_cursor_diff(size, &a, &b), 2345);
}

static void test_seq(void)
{
	CU_ASSERT(smcr_seq_before(1, 2));
	CU_ASSERT(!smcr_seq_before(2, 1));
	CU_ASSERT(!smcr_seq_before(5, 5));
	CU_ASSERT(smcr_seq_after(2, 1));
	/* "The initial value is 1, and this value can wrap to 0." */
	CU_ASSERT(smcr_seq_before(0xFFFF, 0));
	CU_ASSERT(smcr_seq_after(0, 0xFFFF));
	CU_ASSERT(smcr_seq_after(1, 0xFFFF));
	CU_ASSERT(smcr_seq_before(0xFFF0, 0x0010));
	CU_ASSERT_EQUAL(smcr_seq_cmp(0, 0xFFFF), 1);
	CU_ASSERT_EQUAL(smcr_seq_cmp(0xFFFF, 0), -1);
	CU_ASSERT_EQUAL(smcr_seq_cmp(7, 7), 0);
	/* the far edge of the window */
	CU_ASSERT(smcr_seq_after(0x7FFF, 0));
	CU_ASSERT(smcr_seq_before(0x8001, 0));
	CU_ASSERT_EQUAL(smcr_seq_cmp(0x7FFF, 0), 1);
	CU_ASSERT_EQUAL(smcr_seq_cmp(0x8001, 0), -1);
}

/* Linux's net/smc/smc_core.c, 6.1 and 6.12 alike but for max (5 in 6.1,
 * 15 in 6.11+), written out for SMC-R RMBs. */
static int linux_compress_bufsize(int size, int max)
{
	int ilog = -1, v;

	if (size <= 16384)
		return 0;
	v = (size - 1) >> 14;
	while (v) {
		ilog++;
		v >>= 1;
	}
	return ilog + 1 < max ? ilog + 1 : max;
}

static uint32_t linux_uncompress_bufsize(uint8_t compressed)
{
	return 0x00000001u << ((int)compressed + 14);
}

static void test_rmb_size(void)
{
	unsigned int c;

	/* A.2.3: (2^(x+4)) * 1K, 16K .. 512K in the RFC */
	CU_ASSERT_EQUAL(smcr_rmb_size_decompress(0), 16 * 1024);
	CU_ASSERT_EQUAL(smcr_rmb_size_decompress(1), 32 * 1024);
	CU_ASSERT_EQUAL(smcr_rmb_size_decompress(SMCR_RMB_SIZE_COMPRESSED_RFC_MAX), 512 * 1024);
	CU_ASSERT_EQUAL(smcr_rmb_size_decompress(15), 512u * 1024 * 1024);
	CU_ASSERT_EQUAL(smcr_rmb_size_decompress(16), 0);
	for (c = 0; c <= 15; c++) {
		uint32_t s = smcr_rmb_size_decompress(c);

		CU_ASSERT_EQUAL(s, (1u << (c + 4)) * 1024);
		CU_ASSERT_EQUAL(smcr_rmb_size_compress(s), (int)c);
		if (c > 0)	/* one byte more than the size below */
			CU_ASSERT_EQUAL(smcr_rmb_size_compress(s / 2 + 1), (int)c);
	}
	CU_ASSERT_EQUAL(smcr_rmb_size_compress(0), 0);
	CU_ASSERT_EQUAL(smcr_rmb_size_compress(1), 0);
	CU_ASSERT_EQUAL(smcr_rmb_size_compress(16384), 0);
	CU_ASSERT_EQUAL(smcr_rmb_size_compress(16385), 1);
	CU_ASSERT_EQUAL(smcr_rmb_size_compress(524288), 5);
	CU_ASSERT_EQUAL(smcr_rmb_size_compress(524289), 6);
	CU_ASSERT_EQUAL(smcr_rmb_size_compress((512ull << 20) + 1), -ERANGE);
	/* Every code against Linux's smc_compress_bufsize() (6.11+: up to
	 * 15) and smc_uncompress_bufsize(), at the size, one byte above and
	 * one below: what either end announces, the other reads the same. */
	for (c = 0; c <= 15; c++) {
		uint32_t s = smcr_rmb_size_decompress(c);
		uint32_t sizes[3] = { s - 1, s, s + 1 };
		unsigned int i;

		CU_ASSERT_EQUAL(s, linux_uncompress_bufsize((uint8_t)c));
		for (i = 0; i < 3; i++) {
			if (sizes[i] > (512u << 20))
				continue;	/* Linux clamps, we refuse */
			CU_ASSERT_EQUAL(smcr_rmb_size_compress(sizes[i]),
					linux_compress_bufsize((int)sizes[i], 15));
		}
		/* Linux 6.1 stops at 512 KiB (code 5). */
		CU_ASSERT_EQUAL(linux_compress_bufsize((int)s, 5), c < 5 ? (int)c : 5);
	}

	CU_ASSERT(!smcr_mtu_valid(0));
	CU_ASSERT(smcr_mtu_valid(1));
	CU_ASSERT(smcr_mtu_valid(5));
	CU_ASSERT(!smcr_mtu_valid(6));
	CU_ASSERT_EQUAL(smcr_mtu_bytes(SMCR_MTU_256), 256);
	CU_ASSERT_EQUAL(smcr_mtu_bytes(SMCR_MTU_1024), 1024);
	CU_ASSERT_EQUAL(smcr_mtu_bytes(SMCR_MTU_4096), 4096);
	CU_ASSERT_EQUAL(smcr_mtu_bytes(0), 0);
	CU_ASSERT_EQUAL(smcr_mtu_bytes(15), 0);
}

/* ---- suites ---------------------------------------------------------------- */

static CU_TestInfo tcpopt_tests[] = {
	{ "encode", test_tcpopt_encode },
	{ "find", test_tcpopt_find },
	{ "tcp header", test_tcpopt_tcphdr },
	CU_TEST_INFO_NULL,
};

static CU_TestInfo clc_tests[] = {
	{ "errors distinct", test_errors_distinct },
	{ "proposal ipv4", test_clc_proposal_v4 },
	{ "proposal ipv6", test_clc_proposal_v6 },
	{ "proposal 8 prefixes", test_clc_proposal_max },
	{ "proposal growth area", test_clc_proposal_growth },
	{ "proposal linux layout", test_clc_proposal_linux },
	{ "accept", test_clc_accept },
	{ "confirm", test_clc_confirm },
	{ "decline", test_clc_decline },
	{ "malformed", test_clc_malformed },
	{ "version 2", test_clc_version2 },
	{ "encode errors", test_clc_encode_errors },
	{ "v2 proposal (Linux 6.1)", test_clc_v2_kernel_proposal },
	{ "v2 proposal offering v1", test_clc_v2_proposal_v1_too },
	{ "v2 accept/confirm (Linux 6.1)", test_clc_v2_kernel_accept_confirm },
	{ "v2.1 fields (Linux 6.6+)", test_clc_v21_fields },
	{ "v2.1 kernel vectors (Linux 6.12)", test_clc_v21_kernel },
	{ "v2 decline", test_clc_v2_decline },
	CU_TEST_INFO_NULL,
};

static CU_TestInfo llc_tests[] = {
	{ "confirm link", test_llc_confirm_link },
	{ "add link", test_llc_add_link },
	{ "add link cont", test_llc_add_link_cont },
	{ "delete link", test_llc_delete_link },
	{ "confirm rkey", test_llc_confirm_rkey },
	{ "confirm rkey cont", test_llc_confirm_rkey_cont },
	{ "delete rkey", test_llc_delete_rkey },
	{ "test link", test_llc_test_link },
	{ "malformed", test_llc_malformed },
	{ "v2 kernel vectors", test_llc_v2_kernel },
	CU_TEST_INFO_NULL,
};

static CU_TestInfo cdc_tests[] = {
	{ "message", test_cdc },
	{ "flags", test_cdc_flags },
	{ "malformed", test_cdc_malformed },
	CU_TEST_INFO_NULL,
};

static CU_TestInfo cursor_tests[] = {
	{ "advance", test_cursor_advance },
	{ "compare", test_cursor_compare },
	{ "sequence numbers", test_seq },
	{ "rmb size and mtu", test_rmb_size },
	CU_TEST_INFO_NULL,
};

/* ---- log lines ------------------------------------------------------------ */

/* A UTF-8 character at p, decoded from its lead byte's pattern: its
 * length if it may be logged as is (minimal, no surrogate, at most
 * U+10FFFF, not U+0080..U+009F nor U+2028/U+2029), else 0. */
static size_t utf8_ref(const unsigned char *p)
{
	static const unsigned int min[] = { 0, 0, 0x80, 0x800, 0x10000 };
	unsigned int n, cp, i;

	if ((p[0] & 0xe0) == 0xc0)
		n = 2;
	else if ((p[0] & 0xf0) == 0xe0)
		n = 3;
	else if ((p[0] & 0xf8) == 0xf0)
		n = 4;
	else
		return 0;
	cp = p[0] & (0x7fu >> n);
	for (i = 1; i < n; i++) {
		if ((p[i] & 0xc0) != 0x80)
			return 0;
		cp = (cp << 6) | (p[i] & 0x3fu);
	}
	if (cp < min[n] || cp > 0x10ffff || (cp >= 0xd800 && cp < 0xe000) ||
	    (cp >= 0x80 && cp < 0xa0) || cp == 0x2028 || cp == 0x2029)
		return 0;
	return n;
}

/* logline_escape a byte (or a character) at a time: the reference. */
static void escape_ref(char *out, size_t len, const char *in)
{
	const unsigned char *p = (const unsigned char *)in;
	size_t o = 0, n;

	while (*p && o + 1 < len) {
		if (*p >= 0x20 && *p != 0x7f && *p < 0x80) {
			out[o++] = (char)*p++;
		} else if ((n = utf8_ref(p))) {
			if (o + n > len - 1)
				break;
			memcpy(out + o, p, n);
			o += n;
			p += n;
		} else if (o + 5 < len) {
			snprintf(out + o, len - o, "\\x%02x", *p++);
			o += 4;
		} else {
			break;
		}
	}
	out[o] = '\0';
}

/* Every string of up to 5 bytes over plain, control, DEL and the bytes
 * of valid and broken UTF-8 (NEL C2 85, U+2028 E2 80 A8, é C3 A9), into
 * every buffer size up to 30: the same line as the reference; then the
 * cases by name. */
static void test_logline_escape(void)
{
	static const char alpha[] = { 'a', '\n', 0x7f, (char)0x80, 0x1f, ' ',
				      (char)0xc2, (char)0x85, (char)0xe2, (char)0xa8,
				      (char)0xc3, (char)0xa9 };
	char in[8], out[32], ref[32];
	unsigned int n, k, code, total = 1;
	/* Every string of up to 5 of alpha; under valgrind (make
	 * check-valgrind) up to 4, which holds every sequence whole and took
	 * 5 minutes less. */
	unsigned int nmax = getenv("SMCR_VALGRIND") ? 4 : 5;
	size_t len;

	for (n = 0; n <= nmax; n++, total *= sizeof(alpha)) {
		for (code = 0; code < total; code++) {
			unsigned int c = code;

			for (k = 0; k < n; k++, c /= sizeof(alpha))
				in[k] = alpha[c % sizeof(alpha)];
			in[n] = '\0';
			for (len = 1; len <= 30; len++) {
				memset(out, 'X', sizeof(out));
				memset(ref, 'X', sizeof(ref));
				logline_escape(out, len, in);
				escape_ref(ref, len, in);
				if (memcmp(out, ref, sizeof(out)) != 0) {
					CU_FAIL("logline_escape differs from the reference");
					return;
				}
			}
		}
	}
	logline_escape(out, sizeof(out), "a\nb\x7f");
	CU_ASSERT_STRING_EQUAL(out, "a\\x0ab\\x7f");
	logline_escape(out, 6, "\n");
	CU_ASSERT_STRING_EQUAL(out, "\\x0a");
	logline_escape(out, 5, "\n");	/* \x0a whole or not at all */
	CU_ASSERT_STRING_EQUAL(out, "");
	logline_escape(out, sizeof(out), "x\xc2\x85y");		/* NEL */
	CU_ASSERT_STRING_EQUAL(out, "x\\xc2\\x85y");
	logline_escape(out, sizeof(out), "\xe2\x80\xa8\xe2\x80\xa9");	/* U+2028, U+2029 */
	CU_ASSERT_STRING_EQUAL(out, "\\xe2\\x80\\xa8\\xe2\\x80\\xa9");
	logline_escape(out, sizeof(out), "caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80");
	CU_ASSERT_STRING_EQUAL(out, "caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80");
	logline_escape(out, sizeof(out), "\xc0\xaf\xed\xa0\x80");	/* overlong, surrogate */
	CU_ASSERT_STRING_EQUAL(out, "\\xc0\\xaf\\xed\\xa0\\x80");
	logline_escape(out, sizeof(out), "\xe2\x82");		/* cut short */
	CU_ASSERT_STRING_EQUAL(out, "\\xe2\\x82");
	logline_escape(out, sizeof(out), "\xff\xf4\x90\x80\x80");	/* not UTF-8, > U+10FFFF */
	CU_ASSERT_STRING_EQUAL(out, "\\xff\\xf4\\x90\\x80\\x80");
	logline_escape(out, 4, "ab\xc3\xa9");			/* é whole or not at all */
	CU_ASSERT_STRING_EQUAL(out, "ab");
}

static CU_TestInfo logline_tests[] = {
	{ "escape", test_logline_escape },
	CU_TEST_INFO_NULL,
};

static const struct unit_suite suites[] = {
	{ .name = "tcpopt", .tests = tcpopt_tests },
	{ .name = "clc", .tests = clc_tests },
	{ .name = "llc", .tests = llc_tests },
	{ .name = "cdc", .tests = cdc_tests },
	{ .name = "cursor", .tests = cursor_tests },
	{ .name = "logline", .tests = logline_tests },
	{ .name = NULL },
};

int main(int argc, char **argv)
{
	return unit_main(argc, argv, suites);
}
