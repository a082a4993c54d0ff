/* SPDX-License-Identifier: BSD-3-Clause */
/* smcrbd: unit tests for blockdev (NBD codecs, request checks, replies,
 * handshake, client); smcrd's engine and config: test-smcrd.c. */
#include <config.h>

#include <arpa/inet.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "unit.h"
#include "bd-unit.h"
#include "nbd-client.h"
#include "nbd-server.h"
#include "nbd-wire.h"
#include "transport.h"
#include "monotime.h"

#define ASSERT_BYTES(buf, ...)						\
	do {								\
		static const uint8_t exp_[] = { __VA_ARGS__ };		\
		CU_ASSERT_EQUAL(memcmp((buf), exp_, sizeof(exp_)), 0);	\
	} while (0)

/* --- codecs ----------------------------------------------------------------- */

static void test_request_bytes(void)
{
	struct nbd_request r = {
		.flags = NBD_CMD_FLAG_FUA, .type = NBD_CMD_WRITE,
		.cookie = UINT64_C(0x0102030405060708),
		.offset = UINT64_C(0x1122334455667788), .length = 0x1000,
	}, back;
	struct nbd_request_wire w;

	nbd_request_encode(&r, &w);
	CU_ASSERT_EQUAL(sizeof(w), 28);
	ASSERT_BYTES(&w, 0x25, 0x60, 0x95, 0x13, 0x00, 0x01, 0x00, 0x01,
		     0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08,
		     0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x88,
		     0x00, 0x00, 0x10, 0x00);
	CU_ASSERT_EQUAL(nbd_request_decode(&w, &back), 0);
	CU_ASSERT_EQUAL(back.flags, r.flags);
	CU_ASSERT_EQUAL(back.type, r.type);
	CU_ASSERT_EQUAL(back.cookie, r.cookie);
	CU_ASSERT_EQUAL(back.offset, r.offset);
	CU_ASSERT_EQUAL(back.length, r.length);
	((uint8_t *)&w)[0] = 0x26;
	CU_ASSERT_EQUAL(nbd_request_decode(&w, &back), -EPROTO);
}

static void test_ext_request_bytes(void)
{
	struct nbd_request r = {
		.flags = NBD_CMD_FLAG_PAYLOAD_LEN, .type = NBD_CMD_WRITE,
		.cookie = UINT64_C(0x0102030405060708),
		.offset = UINT64_C(0x1122334455667788), .length = UINT64_C(0x123456789a),
	}, back;
	struct nbd_ext_request_wire w;

	nbd_ext_request_encode(&r, &w);
	CU_ASSERT_EQUAL(sizeof(w), 32);
	ASSERT_BYTES(&w, 0x21, 0xe4, 0x1c, 0x71, 0x00, 0x20, 0x00, 0x01,
		     0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08,
		     0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x88,
		     0x00, 0x00, 0x00, 0x12, 0x34, 0x56, 0x78, 0x9a);
	CU_ASSERT_EQUAL(nbd_request_decode_any(&w, 1, &back), 0);
	CU_ASSERT_EQUAL(back.flags, r.flags);
	CU_ASSERT_EQUAL(back.type, r.type);
	CU_ASSERT_EQUAL(back.cookie, r.cookie);
	CU_ASSERT_EQUAL(back.offset, r.offset);
	CU_ASSERT_EQUAL(back.length, r.length);
	/* A compact magic where an extended one is due, and the reverse. */
	CU_ASSERT_EQUAL(nbd_request_decode_any(&w, 0, &back), -EPROTO);
	((uint8_t *)&w)[0] = 0x25;
	CU_ASSERT_EQUAL(nbd_request_decode_any(&w, 1, &back), -EPROTO);
}

static void test_handshake_bytes(void)
{
	struct nbd_greeting_wire g;
	struct nbd_client_flags_wire cf;
	struct nbd_opt o = { .option = NBD_OPT_GO, .len = 0x0a }, ob;
	struct nbd_opt_wire ow;
	struct nbd_opt_reply rep = { .option = NBD_OPT_LIST, .type = NBD_REP_ERR_UNKNOWN,
				     .len = 3 }, repb;
	struct nbd_opt_reply_wire rw;
	struct nbd_export_name_reply_wire en;
	uint16_t flags;
	uint64_t size;

	nbd_greeting_encode(NBD_FLAG_FIXED_NEWSTYLE | NBD_FLAG_NO_ZEROES, &g);
	ASSERT_BYTES(&g, 'N', 'B', 'D', 'M', 'A', 'G', 'I', 'C',
		     'I', 'H', 'A', 'V', 'E', 'O', 'P', 'T', 0x00, 0x03);
	CU_ASSERT_EQUAL(nbd_greeting_decode(&g, &flags), 0);
	CU_ASSERT_EQUAL(flags, 3);

	nbd_client_flags_encode(NBD_FLAG_C_FIXED_NEWSTYLE, &cf);
	ASSERT_BYTES(&cf, 0, 0, 0, 1);

	nbd_opt_encode(&o, &ow);
	ASSERT_BYTES(&ow, 'I', 'H', 'A', 'V', 'E', 'O', 'P', 'T', 0, 0, 0, 7, 0, 0, 0, 0x0a);
	CU_ASSERT_EQUAL(nbd_opt_decode(&ow, &ob), 0);
	CU_ASSERT_EQUAL(ob.option, NBD_OPT_GO);
	CU_ASSERT_EQUAL(ob.len, 10);

	nbd_opt_reply_encode(&rep, &rw);
	ASSERT_BYTES(&rw, 0x00, 0x03, 0xe8, 0x89, 0x04, 0x55, 0x65, 0xa9,
		     0, 0, 0, 3, 0x80, 0, 0, 6, 0, 0, 0, 3);
	CU_ASSERT_EQUAL(nbd_opt_reply_decode(&rw, &repb), 0);
	CU_ASSERT_EQUAL(repb.type, NBD_REP_ERR_UNKNOWN);
	((uint8_t *)&rw)[7] = 0;
	CU_ASSERT_EQUAL(nbd_opt_reply_decode(&rw, &repb), -EPROTO);

	nbd_export_name_reply_encode(0x100000, 0x0105, &en);
	ASSERT_BYTES(&en, 0, 0, 0, 0, 0, 0x10, 0, 0, 0x01, 0x05);
	nbd_export_name_reply_decode(&en, &size, &flags);
	CU_ASSERT_EQUAL(size, 0x100000);
	CU_ASSERT_EQUAL(flags, 0x0105);
}

static void test_info_bytes(void)
{
	struct nbd_info_export_wire ie;
	struct nbd_info_block_size_wire ib;
	struct nbd_export_info info;
	uint16_t type;
	uint8_t odd[5] = { 0, 0, 1, 2, 3 };
	uint8_t unknown[4] = { 0x12, 0x34, 1, 2 };

	memset(&info, 0, sizeof(info));
	nbd_info_export_encode(UINT64_C(0x123456789a), 0x0d, &ie);
	ASSERT_BYTES(&ie, 0, 0, 0, 0, 0, 0x12, 0x34, 0x56, 0x78, 0x9a, 0, 0x0d);
	nbd_info_block_size_encode(1, 4096, 32 << 20, &ib);
	ASSERT_BYTES(&ib, 0, 3, 0, 0, 0, 1, 0, 0, 0x10, 0, 0x02, 0, 0, 0);
	CU_ASSERT_EQUAL(nbd_info_decode(&ie, sizeof(ie), &type, &info), 0);
	CU_ASSERT_EQUAL(type, NBD_INFO_EXPORT);
	CU_ASSERT_EQUAL(info.size, UINT64_C(0x123456789a));
	CU_ASSERT_EQUAL(info.flags, 0x0d);
	CU_ASSERT_EQUAL(nbd_info_decode(&ib, sizeof(ib), &type, &info), 0);
	CU_ASSERT_EQUAL(info.min_block, 1);
	CU_ASSERT_EQUAL(info.pref_block, 4096);
	CU_ASSERT_EQUAL(info.max_payload, 32u << 20);
	/* An INFO_EXPORT of the wrong length is a protocol error. */
	CU_ASSERT_EQUAL(nbd_info_decode(odd, sizeof(odd), &type, &info), -EPROTO);
	/* Unknown types are ignored. */
	CU_ASSERT_EQUAL(nbd_info_decode(unknown, sizeof(unknown), &type, &info), 0);
	CU_ASSERT_EQUAL(type, 0x1234);
	CU_ASSERT_EQUAL(nbd_info_decode(unknown, 1, &type, &info), -EPROTO);
}

static void test_reply_bytes(void)
{
	struct nbd_simple_reply s = { .error = NBD_EPERM, .cookie = 0xabcd }, sb;
	struct nbd_simple_reply_wire sw;
	struct nbd_chunk c = { .flags = NBD_REPLY_FLAG_DONE, .type = NBD_REPLY_TYPE_OFFSET_DATA,
			       .cookie = 7, .length = 8 + 512 }, cb;
	struct nbd_chunk_wire cw;

	nbd_simple_reply_encode(&s, &sw);
	ASSERT_BYTES(&sw, 0x67, 0x44, 0x66, 0x98, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0xab, 0xcd);
	CU_ASSERT_EQUAL(nbd_reply_magic(&sw), NBD_SIMPLE_REPLY_MAGIC);
	CU_ASSERT_EQUAL(nbd_simple_reply_decode(&sw, &sb), 0);
	CU_ASSERT_EQUAL(sb.error, NBD_EPERM);
	CU_ASSERT_EQUAL(sb.cookie, 0xabcd);

	nbd_chunk_encode(&c, &cw);
	ASSERT_BYTES(&cw, 0x66, 0x8e, 0x33, 0xef, 0, 1, 0, 1, 0, 0, 0, 0, 0, 0, 0, 7,
		     0, 0, 0x02, 0x08);
	CU_ASSERT_EQUAL(nbd_reply_magic(&cw), NBD_STRUCTURED_REPLY_MAGIC);
	CU_ASSERT_EQUAL(nbd_chunk_decode(&cw, &cb), 0);
	CU_ASSERT_EQUAL(cb.type, NBD_REPLY_TYPE_OFFSET_DATA);
	CU_ASSERT_EQUAL(cb.length, 520);
	CU_ASSERT_EQUAL(nbd_simple_reply_decode((struct nbd_simple_reply_wire *)&cw, &sb),
			-EPROTO);
}

static void test_error_chunk(void)
{
	uint8_t buf[128];
	char msg[16];
	uint32_t err;
	uint64_t off;
	int n;

	n = nbd_error_chunk_build(buf, sizeof(buf), 9, NBD_REPLY_FLAG_DONE, NBD_EIO, "bad",
				  1, 0x2000);
	CU_ASSERT_EQUAL(n, 20 + 6 + 3 + 8);
	ASSERT_BYTES(buf, 0x66, 0x8e, 0x33, 0xef, 0, 1, 0x80, 2, 0, 0, 0, 0, 0, 0, 0, 9,
		     0, 0, 0, 17, 0, 0, 0, 5, 0, 3, 'b', 'a', 'd',
		     0, 0, 0, 0, 0, 0, 0x20, 0);
	CU_ASSERT_EQUAL(nbd_error_chunk_parse(buf + 20, 17, NBD_REPLY_TYPE_ERROR_OFFSET, &err,
					      msg, sizeof(msg), &off), 0);
	CU_ASSERT_EQUAL(err, NBD_EIO);
	CU_ASSERT_STRING_EQUAL(msg, "bad");
	CU_ASSERT_EQUAL(off, 0x2000);
	/* Message longer than the payload: inconsistent. */
	buf[25] = 20;
	CU_ASSERT_EQUAL(nbd_error_chunk_parse(buf + 20, 17, NBD_REPLY_TYPE_ERROR_OFFSET, &err,
					      NULL, 0, &off), -EPROTO);
	/* Plain error chunk, message truncated to the buffer. */
	n = nbd_error_chunk_build(buf, 30, 1, NBD_REPLY_FLAG_DONE, NBD_EINVAL,
				  "a long message", 0, 0);
	CU_ASSERT_EQUAL(n, 30);
	CU_ASSERT_EQUAL(nbd_error_chunk_build(buf, 10, 1, 0, NBD_EINVAL, NULL, 0, 0), -ENOSPC);
}

static void test_errno_map(void)
{
	CU_ASSERT_EQUAL(nbd_errno_to_wire(0), 0);
	CU_ASSERT_EQUAL(nbd_errno_to_wire(EROFS), NBD_EPERM);
	CU_ASSERT_EQUAL(nbd_errno_to_wire(EDQUOT), NBD_ENOSPC);
	CU_ASSERT_EQUAL(nbd_errno_to_wire(EFBIG), NBD_ENOSPC);
	CU_ASSERT_EQUAL(nbd_errno_to_wire(ENOTSUP), NBD_ENOTSUP);
	CU_ASSERT_EQUAL(nbd_errno_to_wire(EBADF), NBD_EIO);
	/* and back: every defined value round-trips, anything else is EINVAL */
	{
		static const int defined[] = { EPERM, EIO, ENOMEM, EINVAL, ENOSPC,
					       EOVERFLOW, ENOTSUP, ESHUTDOWN };
		unsigned i;

		for (i = 0; i < sizeof(defined) / sizeof(defined[0]); i++)
			CU_ASSERT_EQUAL(nbd_wire_to_errno(nbd_errno_to_wire(defined[i])),
					-defined[i]);
		CU_ASSERT_EQUAL(nbd_wire_to_errno(9999), -EINVAL);
		CU_ASSERT_EQUAL(nbd_wire_to_errno(EBADF), -EINVAL);
		CU_ASSERT_EQUAL(nbd_wire_to_errno(0), -EINVAL);	/* an error chunk without one */
	}
	CU_ASSERT_STRING_EQUAL(nbd_cmd_name(NBD_CMD_WRITE_ZEROES), "WRITE_ZEROES");
	CU_ASSERT_STRING_EQUAL(nbd_rep_name(NBD_REP_ERR_UNKNOWN), "ERR_UNKNOWN");
}

static CU_TestInfo codec_tests[] = {
	{ "request bytes", test_request_bytes },
	{ "extended request bytes", test_ext_request_bytes },
	{ "handshake bytes", test_handshake_bytes },
	{ "info bytes", test_info_bytes },
	{ "reply bytes", test_reply_bytes },
	{ "error chunk", test_error_chunk },
	{ "errno map", test_errno_map },
	CU_TEST_INFO_NULL,
};

/* --- request checks -------------------------------------------------------- */

static struct nbd_tx_params tp_rw = {
	.size = 1 << 20,
	.tflags = NBD_FLAG_HAS_FLAGS | NBD_FLAG_SEND_FLUSH | NBD_FLAG_SEND_FUA |
		  NBD_FLAG_SEND_TRIM | NBD_FLAG_SEND_WRITE_ZEROES | NBD_FLAG_SEND_DF,
	.structured = true,
	.min_block = 1,
	.max_payload = NBD_MAX_PAYLOAD,
};

static uint32_t check(const struct nbd_tx_params *p, uint16_t type, uint16_t flags,
		      uint64_t off, uint32_t len)
{
	struct nbd_request r = { .flags = flags, .type = type, .offset = off, .length = len };
	const char *msg = NULL;
	uint32_t e = nbd_request_check(p, &r, &msg);

	if (e)
		CU_ASSERT_PTR_NOT_NULL(msg);
	return e;
}

static void test_check_bounds(void)
{
	CU_ASSERT_EQUAL(check(&tp_rw, NBD_CMD_READ, 0, 0, 4096), 0);
	CU_ASSERT_EQUAL(check(&tp_rw, NBD_CMD_READ, 0, (1 << 20) - 4096, 4096), 0);
	CU_ASSERT_EQUAL(check(&tp_rw, NBD_CMD_READ, 0, (1 << 20) - 4095, 4096), NBD_EINVAL);
	CU_ASSERT_EQUAL(check(&tp_rw, NBD_CMD_READ, 0, 1 << 20, 0), 0);
	CU_ASSERT_EQUAL(check(&tp_rw, NBD_CMD_READ, 0, (1 << 20) + 1, 0), NBD_EINVAL);
	/* offset + length overflows 64 bits */
	CU_ASSERT_EQUAL(check(&tp_rw, NBD_CMD_READ, 0, UINT64_MAX - 100, 4096), NBD_EINVAL);
	CU_ASSERT_EQUAL(check(&tp_rw, NBD_CMD_WRITE, 0, (1 << 20) - 1, 2), NBD_ENOSPC);
	CU_ASSERT_EQUAL(check(&tp_rw, NBD_CMD_WRITE_ZEROES, 0, 1 << 20, 1), NBD_ENOSPC);
	CU_ASSERT_EQUAL(check(&tp_rw, NBD_CMD_TRIM, 0, 1 << 20, 1), NBD_EINVAL);
	CU_ASSERT_EQUAL(check(&tp_rw, NBD_CMD_CACHE, 0, 1 << 20, 1), NBD_EINVAL);
}

static void test_check_limits(void)
{
	struct nbd_tx_params big = tp_rw, simple = tp_rw;

	big.size = UINT64_C(1) << 40;
	CU_ASSERT_EQUAL(check(&big, NBD_CMD_READ, 0, 0, NBD_MAX_PAYLOAD), 0);
	CU_ASSERT_EQUAL(check(&big, NBD_CMD_READ, 0, 0, NBD_MAX_PAYLOAD + 1), NBD_EOVERFLOW);
	simple.size = big.size;
	simple.structured = false;
	CU_ASSERT_EQUAL(check(&simple, NBD_CMD_READ, 0, 0, NBD_MAX_PAYLOAD + 1), NBD_EINVAL);
	CU_ASSERT_EQUAL(check(&big, NBD_CMD_WRITE, 0, 0, NBD_MAX_PAYLOAD + 1), NBD_EINVAL);
	/* No payload: TRIM and WRITE_ZEROES may be longer. */
	CU_ASSERT_EQUAL(check(&big, NBD_CMD_TRIM, 0, 0, UINT32_MAX), 0);
	CU_ASSERT_EQUAL(check(&big, NBD_CMD_WRITE_ZEROES, 0, 0, UINT32_MAX), 0);
}

static void test_check_commands(void)
{
	struct nbd_tx_params ro = tp_rw, nodf = tp_rw, fz = tp_rw, aligned = tp_rw;

	CU_ASSERT_EQUAL(check(&tp_rw, 42, 0, 0, 0), NBD_EINVAL);
	CU_ASSERT_EQUAL(check(&tp_rw, NBD_CMD_BLOCK_STATUS, 0, 0, 512), NBD_EINVAL);
	CU_ASSERT_EQUAL(check(&tp_rw, NBD_CMD_READ, 1u << 9, 0, 512), NBD_EINVAL);
	CU_ASSERT_EQUAL(check(&tp_rw, NBD_CMD_READ, NBD_CMD_FLAG_NO_HOLE, 0, 512), NBD_EINVAL);
	CU_ASSERT_EQUAL(check(&tp_rw, NBD_CMD_READ, NBD_CMD_FLAG_DF, 0, 512), 0);
	CU_ASSERT_EQUAL(check(&tp_rw, NBD_CMD_READ, NBD_CMD_FLAG_FUA, 0, 512), 0);
	CU_ASSERT_EQUAL(check(&tp_rw, NBD_CMD_WRITE_ZEROES, NBD_CMD_FLAG_NO_HOLE, 0, 512), 0);
	CU_ASSERT_EQUAL(check(&tp_rw, NBD_CMD_WRITE_ZEROES, NBD_CMD_FLAG_FAST_ZERO, 0, 512),
			NBD_EINVAL);
	fz.tflags |= NBD_FLAG_SEND_FAST_ZERO;
	CU_ASSERT_EQUAL(check(&fz, NBD_CMD_WRITE_ZEROES, NBD_CMD_FLAG_FAST_ZERO, 0, 512), 0);
	nodf.tflags &= (uint16_t)~NBD_FLAG_SEND_DF;
	CU_ASSERT_EQUAL(check(&nodf, NBD_CMD_READ, NBD_CMD_FLAG_DF, 0, 512), NBD_EINVAL);
	CU_ASSERT_EQUAL(check(&tp_rw, NBD_CMD_FLUSH, 0, 0, 0), 0);
	CU_ASSERT_EQUAL(check(&tp_rw, NBD_CMD_FLUSH, 0, 512, 0), NBD_EINVAL);
	CU_ASSERT_EQUAL(check(&tp_rw, NBD_CMD_DISC, 0, 0, 0), 0);

	ro.tflags |= NBD_FLAG_READ_ONLY;
	CU_ASSERT_EQUAL(check(&ro, NBD_CMD_WRITE, 0, 0, 512), NBD_EPERM);
	CU_ASSERT_EQUAL(check(&ro, NBD_CMD_WRITE, NBD_CMD_FLAG_FUA, 0, 512), NBD_EPERM);
	CU_ASSERT_EQUAL(check(&ro, NBD_CMD_TRIM, 0, 0, 512), NBD_EPERM);
	CU_ASSERT_EQUAL(check(&ro, NBD_CMD_WRITE_ZEROES, 0, 0, 512), NBD_EPERM);
	CU_ASSERT_EQUAL(check(&ro, NBD_CMD_READ, 0, 0, 512), 0);
	CU_ASSERT_EQUAL(check(&ro, NBD_CMD_FLUSH, 0, 0, 0), 0);

	aligned.min_block = 512;
	CU_ASSERT_EQUAL(check(&aligned, NBD_CMD_READ, 0, 512, 1024), 0);
	CU_ASSERT_EQUAL(check(&aligned, NBD_CMD_READ, 0, 511, 1024), NBD_EINVAL);
	CU_ASSERT_EQUAL(check(&aligned, NBD_CMD_WRITE, 0, 512, 1000), NBD_EINVAL);
}

static void test_check_extended(void)
{
	struct nbd_tx_params x = tp_rw, c = tp_rw;
	struct nbd_request r = { .flags = NBD_CMD_FLAG_PAYLOAD_LEN, .type = NBD_CMD_WRITE,
				 .length = 512 };
	const char *msg = NULL;

	x.extended = true;
	x.size = c.size = UINT64_C(6) << 30;
	x.base_allocation = true;
	CU_ASSERT_EQUAL(nbd_request_hdr_len(&x), 32);
	CU_ASSERT_EQUAL(nbd_request_hdr_len(&c), 28);
	/* WRITE needs the payload flag; nothing else takes it. */
	CU_ASSERT_EQUAL(check(&x, NBD_CMD_WRITE, NBD_CMD_FLAG_PAYLOAD_LEN, 0, 512), 0);
	CU_ASSERT_EQUAL(check(&x, NBD_CMD_WRITE, NBD_CMD_FLAG_PAYLOAD_LEN | NBD_CMD_FLAG_FUA,
			      0, 512), 0);
	CU_ASSERT_EQUAL(check(&x, NBD_CMD_WRITE, 0, 0, 512), NBD_EINVAL);
	CU_ASSERT_EQUAL(check(&x, NBD_CMD_READ, NBD_CMD_FLAG_PAYLOAD_LEN, 0, 512), NBD_EINVAL);
	CU_ASSERT_EQUAL(check(&c, NBD_CMD_WRITE, NBD_CMD_FLAG_PAYLOAD_LEN, 0, 512), NBD_EINVAL);
	CU_ASSERT_EQUAL(nbd_request_payload(&x, &r), 512);
	r.type = NBD_CMD_READ;
	CU_ASSERT_EQUAL(nbd_request_payload(&x, &r), 512);	/* skipped after EINVAL */
	r.flags = 0;
	CU_ASSERT_EQUAL(nbd_request_payload(&x, &r), 0);
	CU_ASSERT_EQUAL(nbd_request_payload(&c, &r), 0);
	r.type = NBD_CMD_WRITE;
	CU_ASSERT_EQUAL(nbd_request_payload(&x, &r), 0);	/* EINVAL, nothing to skip */
	CU_ASSERT_EQUAL(nbd_request_payload(&c, &r), 512);
	/* Payloads above the maximum: hang up (extended only). */
	CU_ASSERT(!nbd_request_hangup(&x, &r, &msg));
	r.flags = NBD_CMD_FLAG_PAYLOAD_LEN;
	r.length = (uint64_t)NBD_MAX_PAYLOAD + 1;
	CU_ASSERT(nbd_request_hangup(&x, &r, &msg));
	CU_ASSERT_PTR_NOT_NULL(msg);
	CU_ASSERT(!nbd_request_hangup(&c, &r, &msg));
	r.length = NBD_MAX_PAYLOAD;
	CU_ASSERT(!nbd_request_hangup(&x, &r, &msg));
	/* 64-bit effect lengths against the export size. */
	{
		struct nbd_request q = { .type = NBD_CMD_TRIM, .length = UINT64_C(5) << 30 };

		CU_ASSERT_EQUAL(nbd_request_check(&x, &q, &msg), 0);
		q.type = NBD_CMD_WRITE_ZEROES;
		CU_ASSERT_EQUAL(nbd_request_check(&x, &q, &msg), 0);
		q.type = NBD_CMD_BLOCK_STATUS;
		CU_ASSERT_EQUAL(nbd_request_check(&x, &q, &msg), 0);
		q.type = NBD_CMD_CACHE;
		CU_ASSERT_EQUAL(nbd_request_check(&x, &q, &msg), 0);
		q.type = NBD_CMD_READ;
		CU_ASSERT_EQUAL(nbd_request_check(&x, &q, &msg), NBD_EOVERFLOW);
		q.offset = UINT64_C(2) << 30;
		q.type = NBD_CMD_TRIM;
		CU_ASSERT_EQUAL(nbd_request_check(&x, &q, &msg), NBD_EINVAL);
		q.type = NBD_CMD_WRITE_ZEROES;
		CU_ASSERT_EQUAL(nbd_request_check(&x, &q, &msg), NBD_ENOSPC);
		q.type = NBD_CMD_BLOCK_STATUS;
		CU_ASSERT_EQUAL(nbd_request_check(&x, &q, &msg), NBD_EINVAL);
		q.offset = 0;
		q.length = UINT64_MAX;
		CU_ASSERT_EQUAL(nbd_request_check(&x, &q, &msg), NBD_EINVAL);
	}
}

static CU_TestInfo check_tests[] = {
	{ "extended headers", test_check_extended },
	{ "bounds", test_check_bounds },
	{ "limits", test_check_limits },
	{ "commands and flags", test_check_commands },
	CU_TEST_INFO_NULL,
};

/* --- reply builder ------------------------------------------------------------ */

static void test_reply_simple(void)
{
	struct nbd_tx_params p = tp_rw;
	struct nbd_request r = { .type = NBD_CMD_READ, .cookie = 5, .offset = 512, .length = 1024 };
	struct nbd_reply_buf rb;

	p.structured = false;
	nbd_reply_build(&p, &r, 0, 1024, NBD_NO_OFFSET, NULL, &rb);
	CU_ASSERT_EQUAL(rb.head_len, 16);
	CU_ASSERT_EQUAL(rb.data_len, 1024);
	CU_ASSERT_EQUAL(rb.tail_len, 0);
	ASSERT_BYTES(rb.head, 0x67, 0x44, 0x66, 0x98, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 5);
	/* Errors carry no data in simple replies. */
	nbd_reply_build(&p, &r, NBD_EIO, 512, 1024, "x", &rb);
	CU_ASSERT_EQUAL(rb.head_len, 16);
	CU_ASSERT_EQUAL(rb.data_len, 0);
	ASSERT_BYTES(rb.head, 0x67, 0x44, 0x66, 0x98, 0, 0, 0, 5);
}

static void test_reply_structured(void)
{
	struct nbd_request r = { .type = NBD_CMD_READ, .cookie = 5, .offset = 512, .length = 1024 };
	struct nbd_request z = { .type = NBD_CMD_READ, .cookie = 6, .offset = 0, .length = 0 };
	struct nbd_request w = { .type = NBD_CMD_WRITE, .cookie = 7, .offset = 0, .length = 8 };
	struct nbd_reply_buf rb;
	struct nbd_chunk c;
	uint32_t err;
	uint64_t off;

	nbd_reply_build(&tp_rw, &r, 0, 1024, NBD_NO_OFFSET, NULL, &rb);
	CU_ASSERT_EQUAL(rb.head_len, 28);
	CU_ASSERT_EQUAL(rb.data_len, 1024);
	ASSERT_BYTES(rb.head, 0x66, 0x8e, 0x33, 0xef, 0, 1, 0, 1, 0, 0, 0, 0, 0, 0, 0, 5,
		     0, 0, 0x04, 0x08, 0, 0, 0, 0, 0, 0, 0x02, 0x00);

	/* Zero-length read: a lone NONE chunk. */
	nbd_reply_build(&tp_rw, &z, 0, 0, NBD_NO_OFFSET, NULL, &rb);
	CU_ASSERT_EQUAL(rb.head_len, 20);
	CU_ASSERT_EQUAL(rb.data_len, 0);
	ASSERT_BYTES(rb.head, 0x66, 0x8e, 0x33, 0xef, 0, 1, 0, 0);

	/* Partial read: data chunk (not final), then an error at the end of it. */
	nbd_reply_build(&tp_rw, &r, NBD_EIO, 512, NBD_NO_OFFSET, "disk", &rb);
	CU_ASSERT_EQUAL(rb.data_len, 512);
	CU_ASSERT_EQUAL(nbd_chunk_decode((struct nbd_chunk_wire *)rb.head, &c), 0);
	CU_ASSERT_EQUAL(c.flags, 0);
	CU_ASSERT_EQUAL(c.type, NBD_REPLY_TYPE_OFFSET_DATA);
	CU_ASSERT_EQUAL(c.length, 8 + 512);
	CU_ASSERT_EQUAL(nbd_chunk_decode((struct nbd_chunk_wire *)rb.tail, &c), 0);
	CU_ASSERT_EQUAL(c.flags, NBD_REPLY_FLAG_DONE);
	CU_ASSERT_EQUAL(c.type, NBD_REPLY_TYPE_ERROR_OFFSET);
	CU_ASSERT_EQUAL(nbd_error_chunk_parse(rb.tail + 20, c.length, c.type, &err, NULL, 0,
					      &off), 0);
	CU_ASSERT_EQUAL(err, NBD_EIO);
	CU_ASSERT_EQUAL(off, 1024);

	/* Validation error on a read: a plain error chunk with the message. */
	nbd_reply_build(&tp_rw, &r, NBD_EINVAL, 0, NBD_NO_OFFSET, "beyond the end", &rb);
	CU_ASSERT_EQUAL(rb.data_len, 0);
	CU_ASSERT_EQUAL(rb.tail_len, 0);
	CU_ASSERT_EQUAL(nbd_chunk_decode((struct nbd_chunk_wire *)rb.head, &c), 0);
	CU_ASSERT_EQUAL(c.type, NBD_REPLY_TYPE_ERROR);
	CU_ASSERT_EQUAL(c.flags, NBD_REPLY_FLAG_DONE);
	CU_ASSERT_EQUAL(c.length, 6 + strlen("beyond the end"));

	/* Other commands: simple reply on success, error chunk with offset. */
	nbd_reply_build(&tp_rw, &w, 0, 0, NBD_NO_OFFSET, NULL, &rb);
	CU_ASSERT_EQUAL(rb.head_len, 16);
	nbd_reply_build(&tp_rw, &w, NBD_ENOSPC, 0, 4, "full", &rb);
	CU_ASSERT_EQUAL(nbd_chunk_decode((struct nbd_chunk_wire *)rb.head, &c), 0);
	CU_ASSERT_EQUAL(c.type, NBD_REPLY_TYPE_ERROR_OFFSET);
}

static CU_TestInfo reply_tests[] = {
	{ "simple", test_reply_simple },
	{ "structured", test_reply_structured },
	CU_TEST_INFO_NULL,
};

/* --- handshake over a socketpair ------------------------------------------- */

struct fake_srv {
	struct bd_transport *t;
	bool shutdown;
	int result;
	struct nbd_server_session sess;
	int lookups, releases;
};

static const struct nbd_server_export fake_exports[] = {
	{ .name = "disk", .description = "the disk", .size = 1 << 20,
	  .tflags = NBD_FLAG_HAS_FLAGS | NBD_FLAG_SEND_FLUSH, .min_block = 1,
	  .pref_block = 4096, .max_payload = NBD_MAX_PAYLOAD },
	{ .name = "secret", .size = 4096, .tflags = NBD_FLAG_HAS_FLAGS,
	  .min_block = 512, .pref_block = 4096, .max_payload = NBD_MAX_PAYLOAD },
};

static int fake_lookup(void *ctx, const char *name, struct nbd_server_export *out,
		       void **handle)
{
	struct fake_srv *s = ctx;

	if (!*name)
		name = "disk";
	if (!strcmp(name, "secret"))
		return -EACCES;
	if (strcmp(name, "disk"))
		return -ENOENT;
	*out = fake_exports[0];
	*handle = s;
	s->lookups++;
	return 0;
}

static void fake_release(void *ctx, void *handle)
{
	struct fake_srv *s = ctx;

	CU_ASSERT_PTR_EQUAL(handle, s);
	s->releases++;
}

static int fake_list(void *ctx, int (*cb)(void *, const char *, const char *), void *arg)
{
	return cb(arg, fake_exports[0].name, fake_exports[0].description);
}

static bool fake_shutting_down(void *ctx)
{
	return ((struct fake_srv *)ctx)->shutdown;
}

static const struct nbd_server_ops fake_ops = {
	.lookup = fake_lookup,
	.release = fake_release,
	.list = fake_list,
	.shutting_down = fake_shutting_down,
};

static void *fake_server_main(void *arg)
{
	struct fake_srv *s = arg;
	struct nbd_handshake_limits lim = { .timeout_ms = 5000, .cancel_fd = -1,
					    .max_options = 32 };

	s->result = nbd_server_handshake(s->t, &fake_ops, s, &lim, &s->sess);
	if (s->result < 0) {
		/* As smcrd does: a failed handshake ends the connection. */
		bd_close(s->t);
		s->t = NULL;
	}
	return NULL;
}

struct listed {
	int n;
	char names[4][32];
};

static int list_cb(void *arg, const char *name, const char *desc)
{
	struct listed *l = arg;

	if (l->n < 4)
		snprintf(l->names[l->n++], sizeof(l->names[0]), "%s:%s", name, desc);
	return 0;
}

static void test_handshake_go(void)
{
	struct fake_srv s = { 0 };
	struct bd_transport *ct;
	struct nbd_client *c;
	struct nbd_export_info info;
	struct listed l = { 0 };
	const char *msg;
	uint32_t rep;
	pthread_t th;

	pair(&ct, &s.t);
	CU_ASSERT_FATAL(pthread_create(&th, NULL, fake_server_main, &s) == 0);
	CU_ASSERT_FATAL(nbd_client_open(ct, 5000, &c) == 0);
	CU_ASSERT_EQUAL(nbd_client_handshake_flags(c),
			NBD_FLAG_FIXED_NEWSTYLE | NBD_FLAG_NO_ZEROES);

	CU_ASSERT_EQUAL(nbd_client_list(c, list_cb, &l), 0);
	CU_ASSERT_EQUAL(l.n, 1);
	CU_ASSERT_STRING_EQUAL(l.names[0], "disk:the disk");

	CU_ASSERT_EQUAL(nbd_client_info(c, "nope", &info), -ENOENT);
	CU_ASSERT_EQUAL(nbd_client_last_reply(c, &msg), NBD_REP_ERR_UNKNOWN);
	CU_ASSERT_PTR_NOT_NULL(strstr(msg, "nope"));
	CU_ASSERT_EQUAL(nbd_client_info(c, "secret", &info), -EACCES);
	CU_ASSERT_EQUAL(nbd_client_last_reply(c, NULL), NBD_REP_ERR_POLICY);

	CU_ASSERT_EQUAL(nbd_client_option(c, 99, "xyz", 3, &rep), 0);
	CU_ASSERT_EQUAL(rep, NBD_REP_ERR_UNSUP);
	CU_ASSERT_EQUAL(nbd_client_option(c, NBD_OPT_LIST, "x", 1, &rep), 0);
	CU_ASSERT_EQUAL(rep, NBD_REP_ERR_INVALID);
	/* INFO with an information list not matching the option length */
	CU_ASSERT_EQUAL(nbd_client_option(c, NBD_OPT_INFO, "\0\0\0\0\0\1", 6, &rep), 0);
	CU_ASSERT_EQUAL(rep, NBD_REP_ERR_INVALID);
	CU_ASSERT_EQUAL(nbd_client_option(c, NBD_OPT_STARTTLS, NULL, 0, &rep), 0);
	CU_ASSERT_EQUAL(rep, NBD_REP_ERR_UNSUP);

	CU_ASSERT_EQUAL(nbd_client_info(c, "", &info), 0);
	CU_ASSERT_EQUAL(info.size, 1 << 20);
	CU_ASSERT_EQUAL(info.pref_block, 4096);
	CU_ASSERT_EQUAL(info.flags & NBD_FLAG_SEND_DF, 0);

	CU_ASSERT_EQUAL(nbd_client_structured(c), 0);
	CU_ASSERT_EQUAL(nbd_client_structured(c), -EINVAL);
	CU_ASSERT_EQUAL(nbd_client_go(c, "disk", &info), 0);
	CU_ASSERT_EQUAL(info.flags, NBD_FLAG_HAS_FLAGS | NBD_FLAG_SEND_FLUSH | NBD_FLAG_SEND_DF);
	CU_ASSERT_EQUAL(info.max_payload, NBD_MAX_PAYLOAD);
	pthread_join(th, NULL);
	CU_ASSERT_EQUAL(s.result, 0);
	CU_ASSERT(s.sess.structured);
	CU_ASSERT(s.sess.block_size_ack);
	CU_ASSERT_EQUAL(s.sess.exp.size, 1 << 20);
	/* INFO "" released its handle; GO keeps its own. */
	CU_ASSERT_EQUAL(s.lookups, 2);
	CU_ASSERT_EQUAL(s.releases, 1);
	nbd_client_close(c);
	bd_close(s.t);
}

static void test_handshake_export_name(void)
{
	struct fake_srv s = { 0 };
	struct bd_transport *ct;
	struct nbd_client *c;
	struct nbd_export_info info;
	pthread_t th;

	pair(&ct, &s.t);
	CU_ASSERT_FATAL(pthread_create(&th, NULL, fake_server_main, &s) == 0);
	CU_ASSERT_FATAL(nbd_client_open(ct, 5000, &c) == 0);
	CU_ASSERT_EQUAL(nbd_client_export_name(c, "disk", &info), 0);
	CU_ASSERT_EQUAL(info.size, 1 << 20);
	pthread_join(th, NULL);
	CU_ASSERT_EQUAL(s.result, 0);
	CU_ASSERT(!s.sess.structured);
	nbd_client_close(c);
	bd_close(s.t);

	/* An unknown name can only be answered by hanging up. */
	memset(&s, 0, sizeof(s));
	pair(&ct, &s.t);
	CU_ASSERT_FATAL(pthread_create(&th, NULL, fake_server_main, &s) == 0);
	CU_ASSERT_FATAL(nbd_client_open(ct, 5000, &c) == 0);
	/* The server hangs up: the reply is never complete. */
	CU_ASSERT_EQUAL(nbd_client_export_name(c, "nope", &info), -ECONNRESET);
	pthread_join(th, NULL);
	bd_close(s.t);
	CU_ASSERT_EQUAL(s.result, -ENOENT);
	nbd_client_close(c);
}

static void test_handshake_abort_and_garbage(void)
{
	struct fake_srv s = { 0 };
	struct bd_transport *ct;
	struct nbd_client *c;
	uint8_t buf[18];
	uint32_t bad_flags = htonl(0x80);
	pthread_t th;

	pair(&ct, &s.t);
	CU_ASSERT_FATAL(pthread_create(&th, NULL, fake_server_main, &s) == 0);
	CU_ASSERT_FATAL(nbd_client_open(ct, 5000, &c) == 0);
	CU_ASSERT_EQUAL(nbd_client_abort(c), 0);
	pthread_join(th, NULL);
	CU_ASSERT_EQUAL(s.result, -ECONNABORTED);
	nbd_client_close(c);
	bd_close(s.t);

	/* Unknown client flags: the server hangs up. */
	memset(&s, 0, sizeof(s));
	pair(&ct, &s.t);
	CU_ASSERT_FATAL(pthread_create(&th, NULL, fake_server_main, &s) == 0);
	CU_ASSERT_EQUAL(bd_read_full(ct, buf, sizeof(buf), 5000, -1), 0);
	CU_ASSERT_EQUAL(bd_write_full(ct, &bad_flags, 4, 5000, -1), 0);
	pthread_join(th, NULL);
	CU_ASSERT_EQUAL(s.result, -EPROTO);
	bd_close(ct);
	bd_close(s.t);

	/* Garbage instead of an option. */
	memset(&s, 0, sizeof(s));
	pair(&ct, &s.t);
	CU_ASSERT_FATAL(pthread_create(&th, NULL, fake_server_main, &s) == 0);
	CU_ASSERT_FATAL(nbd_client_open(ct, 5000, &c) == 0);
	CU_ASSERT_EQUAL(bd_write_full(ct, "GET / HTTP/1.0\r\n\r\n", 18, 5000, -1), 0);
	pthread_join(th, NULL);
	CU_ASSERT_EQUAL(s.result, -EPROTO);
	nbd_client_close(c);
	bd_close(s.t);

	/* Shutting down: options are refused with ERR_SHUTDOWN. */
	memset(&s, 0, sizeof(s));
	s.shutdown = true;
	pair(&ct, &s.t);
	CU_ASSERT_FATAL(pthread_create(&th, NULL, fake_server_main, &s) == 0);
	CU_ASSERT_FATAL(nbd_client_open(ct, 5000, &c) == 0);
	CU_ASSERT_EQUAL(nbd_client_go(c, "disk", NULL), -ESHUTDOWN);
	CU_ASSERT_EQUAL(nbd_client_abort(c), 0);
	pthread_join(th, NULL);
	CU_ASSERT_EQUAL(s.result, -ECONNABORTED);
	nbd_client_close(c);
	bd_close(s.t);
}

/* A read that waits on a transport with rx_waiting: the bytes read so
 * far acknowledged at once, then a request after a short silence, on
 * which the fake peer sends the rest (as Linux's AF_SMC sends corked
 * MSG_MORE bytes on such a CDC); the read wait counts from the last
 * bytes. */
struct waiting_t {
	struct bd_transport base;
	struct bd_transport *in;
	int peer, updates, requests;
	const char *rest;
};

static struct waiting_t *waiting_of(struct bd_transport *t)
{
	return (struct waiting_t *)t;
}

static ssize_t waiting_readv(struct bd_transport *t, const struct iovec *iov, int n)
{
	return bd_readv(waiting_of(t)->in, iov, n);
}

static ssize_t waiting_writev(struct bd_transport *t, const struct iovec *iov, int n)
{
	return bd_writev(waiting_of(t)->in, iov, n);
}

static int waiting_poll_fd(struct bd_transport *t)
{
	return bd_poll_fd(waiting_of(t)->in);
}

static short waiting_poll_events(struct bd_transport *t, unsigned want)
{
	return bd_poll_events(waiting_of(t)->in, want);
}

static void waiting_close(struct bd_transport *t)
{
	bd_close(waiting_of(t)->in);
	free(t);
}

static int waiting_rx_waiting(struct bd_transport *t, bool request)
{
	struct waiting_t *w = waiting_of(t);

	if (!request) {
		w->updates++;
		return 1;
	}
	w->requests++;
	if (w->rest) {
		CU_ASSERT_EQUAL(write(w->peer, w->rest, strlen(w->rest)), (ssize_t)strlen(w->rest));
		w->rest = NULL;
	}
	return 1;
}

static const struct bd_transport_ops waiting_ops = {
	.name = "test-waiting",
	.readv = waiting_readv,
	.writev = waiting_writev,
	.poll_fd = waiting_poll_fd,
	.poll_events = waiting_poll_events,
	.close = waiting_close,
	.rx_waiting = waiting_rx_waiting,
};

static void test_read_waiting(void)
{
	struct waiting_t *w = calloc(1, sizeof(*w));
	char buf[9] = { 0 };
	int64_t t0;
	int sv[2];

	CU_ASSERT_FATAL(w != NULL);
	CU_ASSERT_FATAL(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) == 0);
	CU_ASSERT_FATAL(bd_tcp_transport_new(sv[0], &w->in) == 0);
	w->base.ops = &waiting_ops;
	w->peer = sv[1];
	/* Half a message now, the rest only when asked for. */
	w->rest = "5678";
	CU_ASSERT_EQUAL(write(sv[1], "1234", 4), 4);
	CU_ASSERT_EQUAL(bd_read_full_by(&w->base, buf, 8, 10000, 0, -1), 0);
	CU_ASSERT_STRING_EQUAL(buf, "12345678");
	CU_ASSERT_EQUAL(w->updates, 1);
	CU_ASSERT_EQUAL(w->requests, 1);
	/* Nothing comes: requests at growing intervals, then -ETIMEDOUT
	 * after the read wait (200 ms) from the last bytes. */
	w->updates = w->requests = 0;
	t0 = now_ms();
	CU_ASSERT_EQUAL(bd_read_full_by(&w->base, buf, 8, 200, 0, -1), -ETIMEDOUT);
	CU_ASSERT(now_ms() - t0 >= 200);
	CU_ASSERT_EQUAL(w->updates, 1);
	CU_ASSERT(w->requests >= 1 && w->requests <= 3);
	bd_close(&w->base);
	close(sv[1]);
}

static CU_TestInfo handshake_tests[] = {
	{ "list, info, go", test_handshake_go },
	{ "export name", test_handshake_export_name },
	{ "abort and garbage", test_handshake_abort_and_garbage },
	{ "read wait: cursor update and request", test_read_waiting },
	CU_TEST_INFO_NULL,
};
/* --- base:allocation ---------------------------------------------------------- */

static void test_bs_check_and_reply(void)
{
	struct nbd_tx_params p = tp_rw;
	struct nbd_request r = { .type = NBD_CMD_BLOCK_STATUS, .cookie = 0x1122,
				 .offset = 4096, .length = 8192 };
	struct nbd_extent ext[2] = { { 4096, NBD_STATE_HOLE | NBD_STATE_ZERO }, { 4096, 0 } };
	struct nbd_extent back[2];
	struct nbd_reply_buf rb;
	uint8_t wire[16];

	/* Not negotiated, then negotiated: flags, length, bounds. */
	CU_ASSERT_EQUAL(check(&p, NBD_CMD_BLOCK_STATUS, 0, 0, 4096), NBD_EINVAL);
	p.base_allocation = true;
	CU_ASSERT_EQUAL(check(&p, NBD_CMD_BLOCK_STATUS, 0, 0, 4096), 0);
	CU_ASSERT_EQUAL(check(&p, NBD_CMD_BLOCK_STATUS, NBD_CMD_FLAG_REQ_ONE, 0, 1 << 20), 0);
	CU_ASSERT_EQUAL(check(&p, NBD_CMD_BLOCK_STATUS, NBD_CMD_FLAG_NO_HOLE, 0, 4096),
			NBD_EINVAL);
	CU_ASSERT_EQUAL(check(&p, NBD_CMD_BLOCK_STATUS, 0, 0, 0), NBD_EINVAL);
	CU_ASSERT_EQUAL(check(&p, NBD_CMD_BLOCK_STATUS, 0, 4096, 1 << 20), NBD_EINVAL);
	CU_ASSERT_EQUAL(check(&p, NBD_CMD_BLOCK_STATUS, 0, 1 << 20, 1), NBD_EINVAL);

	nbd_extents_encode(ext, 2, wire);
	ASSERT_BYTES(wire, 0, 0, 0x10, 0, 0, 0, 0, 3, 0, 0, 0x10, 0, 0, 0, 0, 0);
	nbd_extents_decode(wire, 2, back);
	CU_ASSERT_EQUAL(memcmp(back, ext, sizeof(ext)), 0);
	nbd_reply_build(&p, &r, 0, sizeof(wire), NBD_NO_OFFSET, NULL, &rb);
	CU_ASSERT_EQUAL(rb.head_len, 24);
	CU_ASSERT_EQUAL(rb.data_len, 16);
	CU_ASSERT_EQUAL(rb.tail_len, 0);
	ASSERT_BYTES(rb.head, 0x66, 0x8e, 0x33, 0xef, 0, 1, 0, 5,
		     0, 0, 0, 0, 0, 0, 0x11, 0x22, 0, 0, 0, 20, 0, 0, 0, 1);
	/* An error is an error chunk with the offset. */
	nbd_reply_build(&p, &r, NBD_EIO, 0, 8192, "x", &rb);
	ASSERT_BYTES(rb.head, 0x66, 0x8e, 0x33, 0xef, 0, 1, 0x80, 2);
	CU_ASSERT_EQUAL(rb.data_len, 0);
}

static void test_reply_extended(void)
{
	struct nbd_tx_params p = tp_rw;
	struct nbd_request w = { .flags = NBD_CMD_FLAG_PAYLOAD_LEN, .type = NBD_CMD_WRITE,
				 .cookie = 7, .offset = UINT64_C(5) << 30, .length = 512 };
	struct nbd_request rd = { .type = NBD_CMD_READ, .cookie = 8, .offset = 4096,
				  .length = 1024 };
	struct nbd_request bs = { .type = NBD_CMD_BLOCK_STATUS, .cookie = 9, .offset = 0,
				  .length = UINT64_C(6) << 30 };
	struct nbd_extent ext[2] = { { 4096, NBD_STATE_HOLE | NBD_STATE_ZERO }, { 8192, 0 } };
	struct nbd_ext_chunk_wire cw;
	struct nbd_reply_buf rb;
	struct nbd_chunk ch;
	uint8_t wire[32];

	p.extended = true;
	p.base_allocation = true;
	/* A WRITE's success: a NONE chunk, never a simple reply. */
	nbd_reply_build(&p, &w, 0, 0, NBD_NO_OFFSET, NULL, &rb);
	CU_ASSERT_EQUAL(rb.head_len, 32);
	CU_ASSERT_EQUAL(rb.data_len + rb.tail_len, 0);
	ASSERT_BYTES(rb.head, 0x6e, 0x8a, 0x27, 0x8c, 0, 1, 0, 0,
		     0, 0, 0, 0, 0, 0, 0, 7, 0, 0, 0, 1, 0x40, 0, 0, 0,
		     0, 0, 0, 0, 0, 0, 0, 0);
	/* An error: an error chunk behind an extended header. */
	nbd_reply_build(&p, &w, NBD_ENOSPC, 0, NBD_NO_OFFSET, "x", &rb);
	CU_ASSERT_EQUAL(rb.head_len, 32 + 6 + 1);
	memcpy(&cw, rb.head, sizeof(cw));
	CU_ASSERT_EQUAL(nbd_ext_chunk_decode(&cw, &ch), 0);
	CU_ASSERT_EQUAL(ch.type, NBD_REPLY_TYPE_ERROR);
	CU_ASSERT_EQUAL(ch.flags, NBD_REPLY_FLAG_DONE);
	CU_ASSERT_EQUAL(ch.offset, w.offset);
	CU_ASSERT_EQUAL(ch.length, 7);
	ASSERT_BYTES(rb.head + 32, 0, 0, 0, 28, 0, 1, 'x');
	/* READ: one data chunk, offset in the header and in the payload. */
	nbd_reply_build(&p, &rd, 0, 1024, NBD_NO_OFFSET, NULL, &rb);
	CU_ASSERT_EQUAL(rb.head_len, 40);
	CU_ASSERT_EQUAL(rb.data_len, 1024);
	ASSERT_BYTES(rb.head, 0x6e, 0x8a, 0x27, 0x8c, 0, 1, 0, 1,
		     0, 0, 0, 0, 0, 0, 0, 8, 0, 0, 0, 0, 0, 0, 0x10, 0,
		     0, 0, 0, 0, 0, 0, 4, 8, 0, 0, 0, 0, 0, 0, 0x10, 0);
	nbd_reply_build_read_stream(&p, &rd, &rb);
	CU_ASSERT_EQUAL(rb.head_len, 40);
	CU_ASSERT_EQUAL(rb.tail_len, 32);
	memcpy(&cw, rb.tail, sizeof(cw));
	CU_ASSERT_EQUAL(nbd_ext_chunk_decode(&cw, &ch), 0);
	CU_ASSERT_EQUAL(ch.type, NBD_REPLY_TYPE_NONE);
	CU_ASSERT_EQUAL(ch.offset, rd.offset);
	/* BLOCK_STATUS_EXT: ID, count, 16-byte descriptors. */
	nbd_extents_ext_encode(ext, 2, wire);
	ASSERT_BYTES(wire, 0, 0, 0, 0, 0, 0, 0x10, 0, 0, 0, 0, 0, 0, 0, 0, 3,
		     0, 0, 0, 0, 0, 0, 0x20, 0, 0, 0, 0, 0, 0, 0, 0, 0);
	nbd_reply_build(&p, &bs, 0, sizeof(wire), NBD_NO_OFFSET, NULL, &rb);
	CU_ASSERT_EQUAL(rb.head_len, 40);
	CU_ASSERT_EQUAL(rb.data_len, 32);
	ASSERT_BYTES(rb.head, 0x6e, 0x8a, 0x27, 0x8c, 0, 1, 0, 6,
		     0, 0, 0, 0, 0, 0, 0, 9, 0, 0, 0, 0, 0, 0, 0, 0,
		     0, 0, 0, 0, 0, 0, 0, 40, 0, 0, 0, 1, 0, 0, 0, 2);
	CU_ASSERT_EQUAL(NBD_BS_MAX_LENGTH(512), UINT64_C(0xfffffe00));
}

/* NBD_OPT_EXTENDED_HEADERS in the handshake: refusals, then the session. */
static void test_ext_handshake(void)
{
	struct fake_srv s = { 0 };
	struct bd_transport *ct;
	struct nbd_client *c;
	struct nbd_export_info info;
	uint32_t id = 0, rep;
	pthread_t th;

	pair(&ct, &s.t);
	CU_ASSERT_FATAL(pthread_create(&th, NULL, fake_server_main, &s) == 0);
	CU_ASSERT_FATAL(nbd_client_open(ct, 5000, &c) == 0);
	CU_ASSERT_EQUAL(nbd_client_option(c, NBD_OPT_EXTENDED_HEADERS, "x", 1, &rep), 0);
	CU_ASSERT_EQUAL(rep, NBD_REP_ERR_INVALID);
	CU_ASSERT_EQUAL(nbd_client_structured(c), 0);
	CU_ASSERT_EQUAL(nbd_client_option(c, NBD_OPT_EXTENDED_HEADERS, NULL, 0, &rep), 0);
	CU_ASSERT_EQUAL(rep, NBD_REP_ACK);
	CU_ASSERT_EQUAL(nbd_client_option(c, NBD_OPT_EXTENDED_HEADERS, NULL, 0, &rep), 0);
	CU_ASSERT_EQUAL(rep, NBD_REP_ERR_INVALID);
	CU_ASSERT_EQUAL(nbd_client_option(c, NBD_OPT_STRUCTURED_REPLY, NULL, 0, &rep), 0);
	CU_ASSERT_EQUAL(rep, NBD_REP_ERR_EXT_HEADER_REQD);
	CU_ASSERT_EQUAL(nbd_client_set_meta_context(c, "disk", NBD_META_BASE_ALLOCATION, &id),
			0);
	CU_ASSERT_EQUAL(nbd_client_go(c, "disk", &info), 0);
	CU_ASSERT(info.flags & NBD_FLAG_SEND_DF);
	pthread_join(th, NULL);
	CU_ASSERT_EQUAL(s.result, 0);
	CU_ASSERT(s.sess.extended && s.sess.structured && s.sess.base_allocation);
	nbd_client_close(c);
	bd_close(s.t);
}

static void test_bs_handshake(void)
{
	struct fake_srv s = { 0 };
	struct bd_transport *ct;
	struct nbd_client *c;
	struct nbd_export_info info;
	uint32_t id = 0, rep;
	pthread_t th;
	/* LIST, export "disk", no queries; then a query list one byte short. */
	static const uint8_t list_all[] = { 0, 0, 0, 4, 'd', 'i', 's', 'k', 0, 0, 0, 0 };
	static const uint8_t short_q[] = { 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 5, 'b', 'a', 's', 'e' };

	pair(&ct, &s.t);
	CU_ASSERT_FATAL(pthread_create(&th, NULL, fake_server_main, &s) == 0);
	CU_ASSERT_FATAL(nbd_client_open(ct, 5000, &c) == 0);
	/* SET needs structured replies; LIST does not. */
	CU_ASSERT_EQUAL(nbd_client_set_meta_context(c, "disk", NBD_META_BASE_ALLOCATION, &id),
			-EINVAL);
	CU_ASSERT_EQUAL(nbd_client_option(c, NBD_OPT_LIST_META_CONTEXT, list_all,
					  sizeof(list_all), &rep), 0);
	CU_ASSERT_EQUAL(rep, NBD_REP_ACK);
	CU_ASSERT_EQUAL(nbd_client_option(c, NBD_OPT_LIST_META_CONTEXT, short_q,
					  sizeof(short_q), &rep), 0);
	CU_ASSERT_EQUAL(rep, NBD_REP_ERR_INVALID);
	CU_ASSERT_EQUAL(nbd_client_option(c, NBD_OPT_SET_META_CONTEXT, "\0\0", 2, &rep), 0);
	CU_ASSERT_EQUAL(rep, NBD_REP_ERR_INVALID);
	CU_ASSERT_EQUAL(nbd_client_structured(c), 0);
	/* Unknown context, unknown and forbidden exports. */
	CU_ASSERT_EQUAL(nbd_client_set_meta_context(c, "disk", "base:other", &id), -ENOTSUP);
	CU_ASSERT_EQUAL(nbd_client_set_meta_context(c, "disk", "base:", &id), -ENOTSUP);
	CU_ASSERT_EQUAL(nbd_client_set_meta_context(c, "nope", NBD_META_BASE_ALLOCATION, &id),
			-ENOENT);
	CU_ASSERT_EQUAL(nbd_client_set_meta_context(c, "secret", NBD_META_BASE_ALLOCATION,
						    &id), -EACCES);
	CU_ASSERT_EQUAL(nbd_client_set_meta_context(c, "disk", NBD_META_BASE_ALLOCATION, &id),
			0);
	CU_ASSERT_EQUAL(id, NBD_META_ID_BASE_ALLOCATION);
	/* GO for another export than the contexts were set for. */
	CU_ASSERT_EQUAL(nbd_client_go(c, "", &info), -EINVAL);
	CU_ASSERT_EQUAL(nbd_client_go(c, "disk", &info), 0);
	pthread_join(th, NULL);
	CU_ASSERT_EQUAL(s.result, 0);
	CU_ASSERT(s.sess.base_allocation);
	/* Every lookup of SET and LIST gave its handle back. */
	CU_ASSERT_EQUAL(s.lookups, s.releases + 1);
	nbd_client_close(c);
	bd_close(s.t);

	/* Selected, then deselected by an empty SET: none in the session. */
	memset(&s, 0, sizeof(s));
	pair(&ct, &s.t);
	CU_ASSERT_FATAL(pthread_create(&th, NULL, fake_server_main, &s) == 0);
	CU_ASSERT_FATAL(nbd_client_open(ct, 5000, &c) == 0);
	CU_ASSERT_EQUAL(nbd_client_structured(c), 0);
	CU_ASSERT_EQUAL(nbd_client_set_meta_context(c, "", NBD_META_BASE_ALLOCATION, &id), 0);
	CU_ASSERT_EQUAL(nbd_client_set_meta_context(c, "", "x-none:", &id), -ENOTSUP);
	CU_ASSERT_EQUAL(nbd_client_go(c, "disk", &info), 0);
	pthread_join(th, NULL);
	CU_ASSERT_EQUAL(s.result, 0);
	CU_ASSERT(!s.sess.base_allocation);
	nbd_client_close(c);
	bd_close(s.t);
}

/* --- STARTTLS in the handshake (the upgrade itself stubbed) ---------------------- */

static int tls_stub_calls;

static int stub_tls_mode(void *ctx)
{
	return NBD_TLS_REQUIRE;
}

static int stub_starttls(void *ctx, struct bd_transport *t, int timeout_ms, int cancel_fd)
{
	tls_stub_calls++;
	return 0;		/* the stream stays plain: only the state machine */
}

static const struct nbd_server_ops fake_tls_ops = {
	.lookup = fake_lookup, .release = fake_release, .list = fake_list,
	.shutting_down = fake_shutting_down,
	.tls_mode = stub_tls_mode, .starttls = stub_starttls,
};

static void *fake_tls_server_main(void *arg)
{
	struct fake_srv *s = arg;
	struct nbd_handshake_limits lim = { .timeout_ms = 5000, .cancel_fd = -1,
					    .max_options = 32 };

	s->result = nbd_server_handshake(s->t, &fake_tls_ops, s, &lim, &s->sess);
	if (s->result < 0) {
		bd_close(s->t);
		s->t = NULL;
	}
	return NULL;
}

static void test_tls_required(void)
{
	struct fake_srv s = { 0 };
	struct bd_transport *ct;
	struct nbd_client *c;
	struct nbd_export_info info;
	uint32_t rep;
	pthread_t th;

	tls_stub_calls = 0;
	pair(&ct, &s.t);
	CU_ASSERT_FATAL(pthread_create(&th, NULL, fake_tls_server_main, &s) == 0);
	CU_ASSERT_FATAL(nbd_client_open(ct, 5000, &c) == 0);
	/* Before the upgrade: everything but STARTTLS and ABORT refused. */
	CU_ASSERT_EQUAL(nbd_client_structured(c), -EPERM);
	CU_ASSERT_EQUAL(nbd_client_last_reply(c, NULL), NBD_REP_ERR_TLS_REQD);
	CU_ASSERT_EQUAL(nbd_client_info(c, "disk", &info), -EPERM);
	CU_ASSERT_EQUAL(nbd_client_list(c, NULL, NULL), -EPERM);
	CU_ASSERT_EQUAL(s.lookups, 0);
	CU_ASSERT_EQUAL(nbd_client_option(c, NBD_OPT_STARTTLS, "x", 1, &rep), 0);
	CU_ASSERT_EQUAL(rep, NBD_REP_ERR_INVALID);
	CU_ASSERT_EQUAL(tls_stub_calls, 0);
	CU_ASSERT_EQUAL(nbd_client_option(c, NBD_OPT_STARTTLS, NULL, 0, &rep), 0);
	CU_ASSERT_EQUAL(rep, NBD_REP_ACK);
	/* Once only (the answer also says the upgrade ran); then the options
	 * work. */
	CU_ASSERT_EQUAL(nbd_client_option(c, NBD_OPT_STARTTLS, NULL, 0, &rep), 0);
	CU_ASSERT_EQUAL(rep, NBD_REP_ERR_INVALID);
	CU_ASSERT_EQUAL(tls_stub_calls, 1);
	CU_ASSERT_EQUAL(nbd_client_structured(c), 0);
	CU_ASSERT_EQUAL(nbd_client_go(c, "disk", &info), 0);
	pthread_join(th, NULL);
	CU_ASSERT_EQUAL(s.result, 0);
	CU_ASSERT(s.sess.tls);
	CU_ASSERT(s.sess.structured);
	nbd_client_close(c);
	bd_close(s.t);

	/* Structured replies negotiated in the clear are forgotten. */
	memset(&s, 0, sizeof(s));
	pair(&ct, &s.t);
	CU_ASSERT_FATAL(pthread_create(&th, NULL, fake_tls_server_main, &s) == 0);
	CU_ASSERT_FATAL(nbd_client_open(ct, 5000, &c) == 0);
	CU_ASSERT_EQUAL(nbd_client_option(c, NBD_OPT_STARTTLS, NULL, 0, &rep), 0);
	CU_ASSERT_EQUAL(nbd_client_go(c, "disk", &info), 0);
	pthread_join(th, NULL);
	CU_ASSERT_EQUAL(s.result, 0);
	CU_ASSERT(!s.sess.structured);
	nbd_client_close(c);
	bd_close(s.t);

	/* NBD_OPT_EXPORT_NAME without TLS: hung up on. */
	memset(&s, 0, sizeof(s));
	pair(&ct, &s.t);
	CU_ASSERT_FATAL(pthread_create(&th, NULL, fake_tls_server_main, &s) == 0);
	CU_ASSERT_FATAL(nbd_client_open(ct, 5000, &c) == 0);
	CU_ASSERT_EQUAL(nbd_client_export_name(c, "disk", &info), -ECONNRESET);
	pthread_join(th, NULL);
	CU_ASSERT_EQUAL(s.result, -EACCES);
	CU_ASSERT_EQUAL(s.lookups, 0);
	nbd_client_close(c);
}

static CU_TestInfo bs_tests[] = {
	{ "request check and reply bytes", test_bs_check_and_reply },
	{ "extended reply bytes", test_reply_extended },
	{ "extended headers negotiation", test_ext_handshake },
	{ "meta context negotiation", test_bs_handshake },
	{ "STARTTLS required", test_tls_required },
	CU_TEST_INFO_NULL,
};

static const struct unit_suite suites[] = {
	{ .name = "codec", .tests = codec_tests },
	{ .name = "check", .tests = check_tests },
	{ .name = "reply", .tests = reply_tests },
	{ .name = "handshake", .tests = handshake_tests },
	{ .name = "base:allocation and TLS", .tests = bs_tests },
	{ .name = NULL },
};

int main(int argc, char **argv)
{
	return unit_main(argc, argv, suites);
}
