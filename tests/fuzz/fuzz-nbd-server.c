/* SPDX-License-Identifier: BSD-3-Clause */
/* smcrbd: libFuzzer target for NBD as smcrd sees it from a client: the
 * input is the client's byte stream.  The fixed newstyle handshake
 * (nbd_server_handshake: option haggling, export lookup, INFO/GO,
 * EXPORT_NAME, LIST, STRUCTURED_REPLY, EXTENDED_HEADERS) runs over it;
 * once in transmission, every request header (compact, or extended when
 * negotiated) goes through nbd_request_parse, nbd_request_hangup and
 * nbd_request_check, the reply is built (nbd_reply_build) and a payload
 * skipped, as the engine does.  The first input byte sets how many bytes each read
 * returns (a stream splits anywhere) and the server's mode: TLS required
 * (the upgrade itself stubbed: the stream stays plain), refusing, or
 * shutting down. */
#include <config.h>

#include <errno.h>
#include <string.h>

#include "fuzz.h"
#include "fuzz-transport.h"
#include "nbd-server.h"

struct fexport {
	const char *name, *desc;
	uint64_t size;
	uint16_t tflags;
	uint32_t min_block;
	int deny;
};

static const struct fexport exports[] = {
	{ "disk", "a disk", 1 << 20, NBD_FLAG_HAS_FLAGS | NBD_FLAG_SEND_FLUSH |
	  NBD_FLAG_SEND_FUA | NBD_FLAG_SEND_TRIM | NBD_FLAG_SEND_WRITE_ZEROES |
	  NBD_FLAG_CAN_MULTI_CONN | NBD_FLAG_SEND_CACHE, 512, 0 },
	{ "ro", NULL, 4096 * 3 + 7, NBD_FLAG_HAS_FLAGS | NBD_FLAG_READ_ONLY, 1, 0 },
	{ "big", "", INT64_MAX - 4095, NBD_FLAG_HAS_FLAGS | NBD_FLAG_SEND_TRIM, 4096, 0 },
	{ "secret", "not for you", 4096, NBD_FLAG_HAS_FLAGS, 512, 1 },
};
#define NEXPORTS (sizeof(exports) / sizeof(exports[0]))

struct fctx {
	unsigned mode;
	int held;
};

static int f_lookup(void *ctx, const char *name, struct nbd_server_export *out,
		    void **handle)
{
	struct fctx *c = ctx;
	unsigned i;

	/* The default export ("") is the first one. */
	for (i = 0; i < NEXPORTS; i++)
		if (!strcmp(name, exports[i].name) || (!*name && i == 0))
			break;
	if (i == NEXPORTS)
		return -ENOENT;
	if (exports[i].deny)
		return -EACCES;
	out->name = exports[i].name;
	out->description = exports[i].desc;
	out->size = exports[i].size;
	out->tflags = exports[i].tflags;
	out->min_block = exports[i].min_block;
	out->pref_block = 4096;
	out->max_payload = 32u << 20;
	*handle = (void *)&exports[i];
	c->held++;
	return 0;
}

static void f_release(void *ctx, void *handle)
{
	struct fctx *c = ctx;

	FUZZ_REQUIRE(handle);
	c->held--;
}

static int f_list(void *ctx, int (*cb)(void *arg, const char *name, const char *desc),
		  void *arg)
{
	unsigned i;
	int r;

	(void)ctx;
	for (i = 0; i < NEXPORTS; i++)
		if (!exports[i].deny && (r = cb(arg, exports[i].name, exports[i].desc)) < 0)
			return r;
	return 0;
}

static bool f_shutting_down(void *ctx)
{
	return ((struct fctx *)ctx)->mode == 3;
}

static const char *f_refusal(void *ctx)
{
	return ((struct fctx *)ctx)->mode == 2 ? "too many clients" : NULL;
}

static int f_tls_mode(void *ctx)
{
	return ((struct fctx *)ctx)->mode == 1 ? NBD_TLS_REQUIRE : NBD_TLS_OFF;
}

static int f_starttls(void *ctx, struct bd_transport *t, int timeout_ms, int cancel_fd)
{
	(void)t;
	(void)timeout_ms;
	(void)cancel_fd;
	FUZZ_REQUIRE(((struct fctx *)ctx)->mode == 1);
	return 0;
}

static struct nbd_server_ops ops = {
	.lookup = f_lookup,
	.release = f_release,
	.list = f_list,
	.shutting_down = f_shutting_down,
	.refusal = f_refusal,
	.tls_mode = f_tls_mode,
	.starttls = f_starttls,
};

/* The transmission phase as smcrd-engine-rx.c's rx_parse_hdr sees it. */
static void transmission(struct fuzz_transport *ft, const struct nbd_server_session *s)
{
	struct nbd_tx_params p;
	unsigned n;

	nbd_tx_params_from_session(s, &p);
	FUZZ_REQUIRE(p.size == s->exp.size);
	for (n = 0; n < 4096; n++) {
		uint8_t w[sizeof(struct nbd_ext_request_wire)];
		struct nbd_request r;
		struct nbd_reply_buf rb;
		const char *msg = NULL;
		uint64_t payload;
		uint32_t err, data_len = 0;

		if (bd_read_full(&ft->t, w, nbd_request_hdr_len(&p), 0, -1) < 0)
			return;
		if (nbd_request_parse(&p, w, &r) < 0)
			return;
		if (nbd_request_hangup(&p, &r, &msg)) {
			FUZZ_REQUIRE(p.extended && msg && r.length > p.max_payload);
			return;
		}
		payload = nbd_request_payload(&p, &r);
		/* Never more payload than a buffer holds. */
		FUZZ_REQUIRE(!p.extended || payload <= p.max_payload);
		FUZZ_REQUIRE(p.extended || r.length <= UINT32_MAX);
		err = nbd_request_check(&p, &r, &msg);
		FUZZ_REQUIRE(!err || msg);
		if (r.type == NBD_CMD_DISC)
			return;
		if (!err && r.type != NBD_CMD_FLUSH) {
			/* What the engine may touch: inside the export. */
			FUZZ_REQUIRE(r.offset <= p.size && r.length <= p.size - r.offset);
			if (r.type == NBD_CMD_READ || r.type == NBD_CMD_WRITE)
				FUZZ_REQUIRE(r.length <= p.max_payload);
			if (r.type == NBD_CMD_WRITE)
				FUZZ_REQUIRE(!(p.tflags & NBD_FLAG_READ_ONLY) &&
					     payload == r.length);
			else
				FUZZ_REQUIRE(payload == 0);
		}
		if (payload && bd_skip_full(&ft->t, payload, 0, -1) < 0)
			return;
		if (r.type == NBD_CMD_READ && !err)
			data_len = (uint32_t)r.length;
		else if (r.type == NBD_CMD_READ && p.structured)
			data_len = (uint32_t)(r.length / 2);
		else if (r.type == NBD_CMD_BLOCK_STATUS && !err)
			data_len = (r.flags & NBD_CMD_FLAG_REQ_ONE ? 1 : 3) *
				   (uint32_t)(p.extended ? sizeof(struct nbd_block_descriptor_ext_wire) :
						sizeof(struct nbd_block_descriptor_wire));
		nbd_reply_build(&p, &r, err, data_len,
				err && r.type == NBD_CMD_READ ? r.offset + data_len : NBD_NO_OFFSET,
				msg, &rb);
		FUZZ_REQUIRE(rb.head_len <= sizeof(rb.head) && rb.tail_len <= sizeof(rb.tail));
		FUZZ_REQUIRE(rb.data_len == data_len || (!p.structured && err && !rb.data_len) ||
			     (r.type != NBD_CMD_READ && !rb.data_len && !err));
		/* Extended headers: every reply is an extended chunk. */
		if (p.extended) {
			struct nbd_ext_chunk_wire cw;
			struct nbd_chunk ch;

			FUZZ_REQUIRE(rb.head_len >= sizeof(cw));
			memcpy(&cw, rb.head, sizeof(cw));
			FUZZ_REQUIRE(nbd_ext_chunk_decode(&cw, &ch) == 0);
			FUZZ_REQUIRE(ch.cookie == r.cookie && ch.offset == r.offset);
			FUZZ_REQUIRE(ch.length == rb.head_len - sizeof(cw) + rb.data_len ||
				     (rb.tail_len && ch.type == NBD_REPLY_TYPE_OFFSET_DATA));
		}
		if (!err && r.type == NBD_CMD_READ) {
			nbd_reply_build_read_stream(&p, &r, &rb);
			FUZZ_REQUIRE(rb.head_len <= sizeof(rb.head) &&
				     rb.tail_len <= sizeof(rb.tail));
		}
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static int once;
	struct nbd_handshake_limits lim = {
		.timeout_ms = 0, .total_ms = 0, .cancel_fd = -1, .max_options = 64,
	};
	struct nbd_server_session s;
	struct fuzz_transport ft;
	struct fctx c = { 0 };
	int r;

	if (!once++)
		fuzz_quiet_log();
	if (size < 1)
		return 0;
	c.mode = data[0] >> 6;
	fuzz_transport_init(&ft, data + 1, size - 1, data[0] & 0x3f);
	r = nbd_server_handshake(&ft.t, &ops, &c, &lim, &s);
	FUZZ_REQUIRE(r <= 0);
	if (r < 0) {
		FUZZ_REQUIRE(c.held == 0);
		return 0;
	}
	FUZZ_REQUIRE(c.held == 1 && s.handle);
	FUZZ_REQUIRE(c.mode != 2 && c.mode != 3);
	/* No way into transmission around a required TLS. */
	FUZZ_REQUIRE(c.mode != 1 || s.tls);
	FUZZ_REQUIRE(!s.base_allocation || s.structured);
	FUZZ_REQUIRE(!s.extended || s.structured);
	transmission(&ft, &s);
	f_release(&c, s.handle);
	return 0;
}
