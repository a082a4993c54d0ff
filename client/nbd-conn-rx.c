/* SPDX-License-Identifier: BSD-3-Clause */
/* smcrbd client engine: receiving.  The reply parser: simple replies and
 * structured chunks read from the transport into the requests' buffers
 * (nbd-conn-int.h). */
#include <config.h>

#include <errno.h>
#include <string.h>

#include "applog.h"
#include "nbd-conn-int.h"
#include "transport.h"

/* What a read of the transport gave: 1 bytes (progress noted), 0 none
 * yet, -errno (the stream's end: -ECONNRESET). */
static int rx_result(struct nbdc_conn *c, ssize_t n)
{
	if (n == -EAGAIN)
		return 0;
	if (n == 0)
		return -ECONNRESET;
	if (n < 0)
		return (int)n;
	c->last_progress_ms = now_ms();
	return 1;
}

/* Hands [at, at + the iovecs' total) of r to its sink; its first error
 * fails r when its reply is over. */
static void sink_put(struct nbdc_req *r, uint8_t *at, const struct iovec *iov, int n)
{
	int ret;

	if (r->sink_err)
		return;
	ret = r->sink(r->arg, at, iov, n);
	if (ret < 0)
		r->sink_err = ret;
}

/* At most want bytes of iov[0..1] (n > 0 in all): how many iovecs. */
static int iov_trim(struct iovec iov[2], size_t n, size_t want)
{
	if (n <= want)
		return iov[1].iov_len && n > iov[0].iov_len ? 2 : 1;
	if (iov[0].iov_len >= want) {
		iov[0].iov_len = want;
		return 1;
	}
	iov[1].iov_len = want - iov[0].iov_len;
	return 2;
}

/* rx_fill for the data of a READ with a sink: what was read ahead, then
 * in place where the transport allows, else read into dst first. */
static int rx_fill_sink(struct nbdc_conn *c)
{
	struct rx *rx = &c->rx;
	struct nbdc_req *r = rx->sink;
	bool in_place = bd_has(c->t, BD_HAS_ZC_RX);

	while (rx->got < rx->need) {
		uint8_t *at = rx->dst + rx->got;
		size_t want = rx->need - rx->got;
		struct iovec iov[2] = { { 0 } };
		int niov = 1, ret;
		ssize_t n;

		if (rx->rpos < rx->rend) {
			n = (ssize_t)(rx->rend - rx->rpos < want ? rx->rend - rx->rpos : want);
			iov[0] = (struct iovec){ rx->rbuf + rx->rpos, (size_t)n };
			sink_put(r, at, iov, 1);
			rx->rpos += (size_t)n;
			rx->got += (size_t)n;
			continue;
		}
		if (in_place) {
			n = bd_rx_peek(c->t, iov);
		} else {
			iov[0] = (struct iovec){ at, want };
			n = bd_readv(c->t, iov, 1);
		}
		ret = rx_result(c, n);
		if (ret <= 0)
			return ret;
		if (in_place) {
			niov = iov_trim(iov, (size_t)n, want);
			n = (ssize_t)(iov[0].iov_len + (niov > 1 ? iov[1].iov_len : 0));
		} else {
			iov[0].iov_len = (size_t)n;
		}
		sink_put(r, at, iov, niov);
		if (in_place && (ret = bd_rx_consume(c->t, (size_t)n)) < 0)
			return ret;
		rx->got += (size_t)n;
	}
	return 1;
}

/* Fills rx->dst up to rx->need: 1 done, 0 would block, -errno. */
static int rx_fill(struct nbdc_conn *c)
{
	struct rx *rx = &c->rx;

	if (rx->sink)
		return rx_fill_sink(c);
	while (rx->got < rx->need) {
		size_t want = rx->need - rx->got;
		struct iovec iov;
		ssize_t n;
		int ret;

		if (rx->rpos < rx->rend) {
			size_t k = rx->rend - rx->rpos;

			if (k > want)
				k = want;
			memcpy(rx->dst + rx->got, rx->rbuf + rx->rpos, k);
			rx->rpos += k;
			rx->got += k;
			continue;
		}
		if (want >= NBDC_RBUF / 2) {
			iov.iov_base = rx->dst + rx->got;
			iov.iov_len = want;
		} else {
			iov.iov_base = rx->rbuf;
			iov.iov_len = NBDC_RBUF;
		}
		n = bd_readv(c->t, &iov, 1);
		ret = rx_result(c, n);
		if (ret <= 0)
			return ret;
		if (iov.iov_base == rx->rbuf) {
			rx->rpos = 0;
			rx->rend = (size_t)n;
		} else {
			rx->got += (size_t)n;
		}
	}
	return 1;
}

static void rx_expect(struct rx *rx, enum rx_step step, void *dst, size_t need)
{
	rx->sink = NULL;
	rx->step = step;
	rx->dst = dst;
	rx->need = need;
	rx->got = 0;
}

static struct nbdc_req *find_req(struct nbdc_conn *c, uint64_t cookie)
{
	unsigned slot = (unsigned)(cookie & 0xffff);
	struct nbdc_req *r;

	if (slot >= NBDC_SLOTS)
		return NULL;
	r = c->slots[slot];
	if (!r || r->cookie != cookie || r->sent < REQ_HDR)
		return NULL;
	return r;
}

/* A request's reply is complete: 0, or -EPROTO when a structured READ's
 * chunks left a gap (the request fails with EIO, the connection goes). */
static int reply_done(struct nbdc_conn *c, struct nbdc_req *r)
{
	int ret = 0;

	nbdc_slot_release(c, r);
	if (r->result == -ESHUTDOWN) {
		/* The server is going away: send it again elsewhere/later. */
		c->shut = true;
		r->sent = 0;
		r->was_sent = true;
		nbdc_req_rewind(r);
		rq_push_front(&c->txq, r);
		return 0;
	}
	if (!r->result && r->type == NBD_CMD_READ && c->structured && r->data_seen != r->len) {
		log_warn("nbd: connection %u: the server's reply to a READ of %u bytes at %llu "
			 "left %llu bytes unsent; the READ fails",
			 c->idx, r->len, (unsigned long long)r->offset,
			 (unsigned long long)(r->len - r->data_seen));
		r->result = -EIO;
		ret = -EPROTO;
	}
	if (!r->result && r->type == NBD_CMD_BLOCK_STATUS && !r->status_seen)
		r->result = -EIO;
	if (!r->result && r->sink_err)
		r->result = r->sink_err;
	nbdc_req_complete(c, r, r->result);
	return ret;
}

/* A chunk for r broke the protocol: r fails with EIO (resending to the
 * same server would not make its answer right) and the connection goes. */
static int reply_bad(struct nbdc_conn *c, struct nbdc_req *r, const char *what, uint64_t off,
		     uint32_t len)
{
	log_warn("nbd: connection %u: the server sent %s for %u bytes at %llu, inside a READ "
		 "of %u bytes at %llu that a chunk already filled; the READ fails",
		 c->idx, what, len, (unsigned long long)off, r->len,
		 (unsigned long long)r->offset);
	c->rx.req = NULL;
	nbdc_slot_release(c, r);
	nbdc_req_complete(c, r, -EIO);
	return -EPROTO;
}

static int chunk_done(struct nbdc_conn *c)
{
	struct rx *rx = &c->rx;
	struct nbdc_req *r = rx->req;

	rx_expect(rx, RX_HDR, rx->hdr, 16);
	rx->req = NULL;
	if (rx->ch.flags & NBD_REPLY_FLAG_DONE)
		return reply_done(c, r);
	return 0;
}

/* One step of the reply parser: 1 progress, 0 would block, -errno. */
static int rx_step(struct nbdc_conn *c)
{
	struct rx *rx = &c->rx;
	struct nbdc_req *r;
	int ret = rx_fill(c);

	if (ret <= 0)
		return ret;
	switch (rx->step) {
	case RX_HDR: {
		uint32_t magic = nbd_reply_magic(rx->hdr);

		if (magic == NBD_STRUCTURED_REPLY_MAGIC && c->structured) {
			rx_expect(rx, RX_CHUNK, rx->hdr + 16, 4);
			return 1;
		}
		if (magic == NBD_SIMPLE_REPLY_MAGIC) {
			struct nbd_simple_reply rep;

			nbd_simple_reply_decode((const struct nbd_simple_reply_wire *)rx->hdr, &rep);
			r = find_req(c, rep.cookie);
			if (!r || (c->structured && r->type == NBD_CMD_READ && !rep.error) ||
			    (r->type == NBD_CMD_BLOCK_STATUS && !rep.error))
				return -EPROTO;
			r->result = rep.error ? nbd_wire_to_errno(rep.error) : 0;
			if (!rep.error && r->type == NBD_CMD_READ && r->len) {
				rx->req = r;
				rx_expect(rx, RX_SIMPLE_DATA, r->buf, r->len);
				rx->sink = r->sink ? r : NULL;
				return 1;
			}
			rx_expect(rx, RX_HDR, rx->hdr, 16);
			return reply_done(c, r) ? -EPROTO : 1;
		}
		return -EPROTO;
	}
	case RX_SIMPLE_DATA:
		r = rx->req;
		rx->req = NULL;
		rx_expect(rx, RX_HDR, rx->hdr, 16);
		return reply_done(c, r) ? -EPROTO : 1;
	case RX_CHUNK:
		if (nbd_chunk_decode((const struct nbd_chunk_wire *)rx->hdr, &rx->ch) < 0)
			return -EPROTO;
		r = find_req(c, rx->ch.cookie);
		if (!r)
			return -EPROTO;
		rx->req = r;
		switch (rx->ch.type) {
		case NBD_REPLY_TYPE_NONE:
			if (rx->ch.length || !(rx->ch.flags & NBD_REPLY_FLAG_DONE))
				return -EPROTO;
			return chunk_done(c) ? -EPROTO : 1;
		case NBD_REPLY_TYPE_OFFSET_DATA:
			if (r->type != NBD_CMD_READ || rx->ch.length <= 8)
				return -EPROTO;
			rx_expect(rx, RX_OFFSET, rx->small, 8);
			return 1;
		case NBD_REPLY_TYPE_OFFSET_HOLE:
			if (r->type != NBD_CMD_READ || rx->ch.length != 12)
				return -EPROTO;
			rx_expect(rx, RX_HOLE, rx->small, 12);
			return 1;
		case NBD_REPLY_TYPE_BLOCK_STATUS:
			/* One chunk of 4 + 8n bytes (n >= 1), for our context. */
			if (r->type != NBD_CMD_BLOCK_STATUS || !c->meta_alloc || r->status_seen ||
			    rx->ch.length < 12 || (rx->ch.length - 4) % 8)
				return -EPROTO;
			rx->bs_left = (rx->ch.length - 4) / 8;
			rx->bs_sum = 0;
			rx_expect(rx, RX_BS_ID, rx->small, 4);
			return 1;
		default:
			if (!NBD_REPLY_TYPE_IS_ERR(rx->ch.type) ||
			    rx->ch.length > sizeof(rx->err))
				return -EPROTO;
			rx_expect(rx, RX_ERROR, rx->err, rx->ch.length);
			return 1;
		}
	case RX_OFFSET: {
		uint64_t off = nbd_offset_decode((const struct nbd_chunk_offset_data_wire *)rx->small);
		uint32_t n = rx->ch.length - 8;

		r = rx->req;
		if (off < r->offset || off - r->offset > r->len ||
		    n > r->len - (off - r->offset))
			return -EPROTO;
		ret = nbdc_req_span_add(r, (uint32_t)(off - r->offset), n);
		if (ret == -EPROTO)
			return reply_bad(c, r, "data", off, n);
		if (ret < 0)
			return ret;
		rx_expect(rx, RX_DATA, (uint8_t *)r->buf + (off - r->offset), n);
		rx->sink = r->sink ? r : NULL;
		return 1;
	}
	case RX_DATA:
		return chunk_done(c) ? -EPROTO : 1;
	case RX_HOLE: {
		uint64_t off;
		uint32_t n;

		r = rx->req;
		nbd_hole_decode((const struct nbd_chunk_offset_hole_wire *)rx->small, &off, &n);
		if (!n || off < r->offset || off - r->offset > r->len ||
		    n > r->len - (off - r->offset))
			return -EPROTO;
		ret = nbdc_req_span_add(r, (uint32_t)(off - r->offset), n);
		if (ret == -EPROTO)
			return reply_bad(c, r, "a hole", off, n);
		if (ret < 0)
			return ret;
		memset((uint8_t *)r->buf + (off - r->offset), 0, n);
		if (r->sink) {
			struct iovec z = { (uint8_t *)r->buf + (off - r->offset), n };

			sink_put(r, z.iov_base, &z, 1);
		}
		return chunk_done(c) ? -EPROTO : 1;
	}
	case RX_BS_ID:
		if (nbd_block_status_id_decode(
			    (const struct nbd_chunk_block_status_wire *)rx->small) != c->meta_id)
			return -EPROTO;
		rx_expect(rx, RX_BS_DESC, rx->small, 8);
		return 1;
	case RX_BS_DESC: {
		struct nbdc_extents *x;
		struct nbd_extent d;

		r = rx->req;
		x = r->buf;
		nbd_extents_decode(rx->small, 1, &d);
		if (!d.length)
			return -EPROTO;
		/* Kept up to the room given and the length asked for. */
		if (x->n < x->max && rx->bs_sum < r->len) {
			if (d.length > r->len - rx->bs_sum)
				d.length = (uint32_t)(r->len - rx->bs_sum);
			x->ext[x->n++] = d;
			rx->bs_sum += d.length;
		}
		if (--rx->bs_left) {
			rx_expect(rx, RX_BS_DESC, rx->small, 8);
			return 1;
		}
		r->status_seen = true;
		return chunk_done(c) ? -EPROTO : 1;
	}
	case RX_ERROR: {
		uint32_t err = 0;
		uint64_t eoff;

		r = rx->req;
		if (nbd_error_chunk_parse(rx->err, rx->ch.length, rx->ch.type, &err, NULL, 0,
					  &eoff) < 0)
			return -EPROTO;
		if (!r->result)
			r->result = nbd_wire_to_errno(err);
		return chunk_done(c) ? -EPROTO : 1;
	}
	}
	return -EPROTO;
}

int nbdc_rx(struct nbdc_conn *c, bool *progress)
{
	int i, r;

	for (i = 0; i < 256; i++) {
		r = rx_step(c);
		if (r < 0)
			return r;
		if (r == 0)
			return 0;
		*progress = true;
	}
	return 0;
}
