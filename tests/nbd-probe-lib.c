/* SPDX-License-Identifier: BSD-3-Clause */
/* smcrbd tests: NBD's transmission phase as blocking calls (see
 * nbd-probe-lib.h). */
#include <config.h>

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "nbd-probe-lib.h"

enum slot_state { SLOT_FREE = 0, SLOT_INFLIGHT, SLOT_DONE };

struct slot {
	enum slot_state state;
	uint16_t type;
	uint32_t len;
	uint64_t offset;
	void *buf;
	uint64_t cookie;
	int result;
	uint64_t err_offset;
	uint64_t data_seen;
	/* BLOCK_STATUS: buf holds ext_max struct nbd_extent. */
	unsigned ext_max, ext_n;
	bool status_seen;
};

struct nbdp {
	struct bd_transport *t;
	int timeout_ms;
	bool structured;
	bool has_meta;			/* base:allocation selected, as meta_id */
	uint32_t meta_id;
	bool broken;
	struct slot *slots;
	unsigned inflight;		/* SLOT_INFLIGHT + SLOT_DONE */
	uint64_t generation;
};

/* Cookies: slot index in the low 16 bits, a generation above. */
#define COOKIE_SLOT(c)	((unsigned)((c) & 0xffff))

/* err; an error breaks the stream for good. */
static int broken(struct nbdp *p, int err)
{
	if (err < 0)
		p->broken = true;
	return err;
}

static int rd(struct nbdp *p, void *buf, size_t len)
{
	return broken(p, bd_read_full(p->t, buf, len, p->timeout_ms, -1));
}

static int wr(struct nbdp *p, const struct iovec *iov, int n)
{
	return broken(p, bd_writev_full(p->t, iov, n, p->timeout_ms, -1));
}

int nbdp_start(struct nbd_client *c, int timeout_ms, const uint32_t *meta_id,
	       struct nbdp **out)
{
	struct nbdp *p = calloc(1, sizeof(*p));

	if (p)
		p->slots = calloc(NBDP_MAX_INFLIGHT, sizeof(*p->slots));
	if (!p || !p->slots) {
		free(p);
		nbd_client_close(c);
		return -ENOMEM;
	}
	p->timeout_ms = timeout_ms;
	p->structured = nbd_client_is_structured(c);
	if (meta_id) {
		p->has_meta = true;
		p->meta_id = *meta_id;
	}
	p->t = nbd_client_detach(c);
	*out = p;
	return 0;
}

void nbdp_close(struct nbdp *p)
{
	if (!p)
		return;
	bd_close(p->t);
	free(p->slots);
	free(p);
}

struct bd_transport *nbdp_transport(struct nbdp *p)
{
	return p->t;
}

unsigned nbdp_inflight(struct nbdp *p)
{
	return p->inflight;
}

static struct slot *find_slot(struct nbdp *p, uint64_t cookie)
{
	struct slot *s = &p->slots[COOKIE_SLOT(cookie) % NBDP_MAX_INFLIGHT];

	if (s->state != SLOT_INFLIGHT || s->cookie != cookie)
		return NULL;
	return s;
}

int nbdp_submit(struct nbdp *p, uint16_t type, uint16_t flags, uint64_t offset,
		uint32_t len, void *buf, uint64_t *cookie)
{
	struct nbd_request req = {
		.flags = flags, .type = type, .offset = offset, .length = len,
	};
	struct nbd_request_wire w;
	struct iovec iov[2];
	struct slot *s = NULL;
	unsigned i;
	int r;

	if (p->broken)
		return -EPIPE;
	if (type != NBD_CMD_DISC) {
		for (i = 0; i < NBDP_MAX_INFLIGHT; i++)
			if (p->slots[i].state == SLOT_FREE) {
				s = &p->slots[i];
				break;
			}
		if (!s)
			return -EBUSY;
		p->generation++;
		req.cookie = (p->generation << 16) | i;
	} else {
		req.cookie = 0xffff;
	}
	nbd_request_encode(&req, &w);
	iov[0].iov_base = &w;
	iov[0].iov_len = sizeof(w);
	iov[1].iov_base = buf;
	iov[1].iov_len = type == NBD_CMD_WRITE ? len : 0;
	r = wr(p, iov, 2);
	if (r < 0)
		return r;
	if (s) {
		*s = (struct slot){ .state = SLOT_INFLIGHT, .type = type, .len = len,
				    .offset = offset, .buf = buf, .cookie = req.cookie,
				    .err_offset = NBDP_NO_OFFSET };
		p->inflight++;
	}
	if (cookie)
		*cookie = req.cookie;
	return 0;
}

static int read_chunk(struct nbdp *p, const uint8_t *hdr16)
{
	struct nbd_chunk_wire w;
	struct nbd_chunk ch;
	struct slot *s;
	int r;

	memcpy(&w, hdr16, 16);
	r = rd(p, (uint8_t *)&w + 16, sizeof(w) - 16);
	if (r < 0)
		return r;
	if (nbd_chunk_decode(&w, &ch) < 0)
		return broken(p, -EPROTO);
	s = find_slot(p, ch.cookie);
	if (!s)
		return broken(p, -EPROTO);

	switch (ch.type) {
	case NBD_REPLY_TYPE_NONE:
		if (ch.length || !(ch.flags & NBD_REPLY_FLAG_DONE))
			return broken(p, -EPROTO);
		break;
	case NBD_REPLY_TYPE_OFFSET_DATA: {
		struct nbd_chunk_offset_data_wire ow;
		uint64_t off;
		uint32_t n;

		if (s->type != NBD_CMD_READ || ch.length <= sizeof(ow))
			return broken(p, -EPROTO);
		r = rd(p, &ow, sizeof(ow));
		if (r < 0)
			return r;
		off = nbd_offset_decode(&ow);
		n = ch.length - (uint32_t)sizeof(ow);
		if (off < s->offset || off - s->offset > s->len || n > s->len - (off - s->offset))
			return broken(p, -EPROTO);
		r = rd(p, (uint8_t *)s->buf + (off - s->offset), n);
		if (r < 0)
			return r;
		s->data_seen += n;
		break;
	}
	case NBD_REPLY_TYPE_OFFSET_HOLE: {
		struct nbd_chunk_offset_hole_wire hw;
		uint64_t off;
		uint32_t n;

		if (s->type != NBD_CMD_READ || ch.length != sizeof(hw))
			return broken(p, -EPROTO);
		r = rd(p, &hw, sizeof(hw));
		if (r < 0)
			return r;
		nbd_hole_decode(&hw, &off, &n);
		if (off < s->offset || off - s->offset > s->len || n > s->len - (off - s->offset))
			return broken(p, -EPROTO);
		memset((uint8_t *)s->buf + (off - s->offset), 0, n);
		s->data_seen += n;
		break;
	}
	case NBD_REPLY_TYPE_BLOCK_STATUS: {
		struct nbd_chunk_block_status_wire idw;
		struct nbd_block_descriptor_wire dw;
		struct nbd_extent *ext = s->buf;
		uint64_t sum = 0;
		uint32_t i, n;

		if (s->type != NBD_CMD_BLOCK_STATUS || !p->has_meta || s->status_seen ||
		    ch.length < sizeof(idw) + sizeof(dw) ||
		    (ch.length - sizeof(idw)) % sizeof(dw))
			return broken(p, -EPROTO);
		r = rd(p, &idw, sizeof(idw));
		if (r < 0)
			return r;
		if (nbd_block_status_id_decode(&idw) != p->meta_id)
			return broken(p, -EPROTO);
		n = (ch.length - (uint32_t)sizeof(idw)) / (uint32_t)sizeof(dw);
		for (i = 0; i < n; i++) {
			struct nbd_extent e;

			r = rd(p, &dw, sizeof(dw));
			if (r < 0)
				return r;
			nbd_extents_decode(&dw, 1, &e);
			if (!e.length)
				return broken(p, -EPROTO);
			/* Kept up to the room given and the length asked for. */
			if (s->ext_n < s->ext_max && sum < s->len) {
				if (e.length > s->len - sum)
					e.length = (uint32_t)(s->len - sum);
				ext[s->ext_n++] = e;
				sum += e.length;
			}
		}
		s->status_seen = true;
		break;
	}
	default: {
		uint8_t *msg;
		uint32_t err;
		uint64_t eoff;

		if (!NBD_REPLY_TYPE_IS_ERR(ch.type) || ch.length > NBD_MAX_STRING + 64)
			return broken(p, -EPROTO);
		msg = malloc(ch.length ? ch.length : 1);
		if (!msg)
			return broken(p, -ENOMEM);
		r = rd(p, msg, ch.length);
		if (r == 0 && nbd_error_chunk_parse(msg, ch.length, ch.type, &err, NULL, 0,
						    &eoff) < 0)
			r = broken(p, -EPROTO);
		free(msg);
		if (r < 0)
			return r;
		if (s->result == 0)
			s->result = nbd_wire_to_errno(err);
		if (ch.type == NBD_REPLY_TYPE_ERROR_OFFSET &&
		    s->err_offset == NBDP_NO_OFFSET)
			s->err_offset = eoff;
		break;
	}
	}
	if (ch.flags & NBD_REPLY_FLAG_DONE) {
		if (s->result == 0 && s->type == NBD_CMD_READ && s->data_seen != s->len)
			s->result = -EIO;
		if (s->result == 0 && s->type == NBD_CMD_BLOCK_STATUS && !s->status_seen)
			s->result = -EIO;
		s->state = SLOT_DONE;
	}
	return 0;
}

/* Reads one reply message (a simple reply or one chunk). */
static int read_one(struct nbdp *p)
{
	uint8_t hdr[16];
	uint32_t magic;
	int r;

	r = rd(p, hdr, sizeof(hdr));
	if (r < 0)
		return r;
	magic = nbd_reply_magic(hdr);
	if (magic == NBD_STRUCTURED_REPLY_MAGIC) {
		if (!p->structured)
			return broken(p, -EPROTO);
		return read_chunk(p, hdr);
	}
	if (magic == NBD_SIMPLE_REPLY_MAGIC) {
		struct nbd_simple_reply rep;
		struct slot *s;

		nbd_simple_reply_decode((const struct nbd_simple_reply_wire *)hdr, &rep);
		s = find_slot(p, rep.cookie);
		if (!s)
			return broken(p, -EPROTO);
		/* Structured replies forbid simple replies to READ; a
		 * successful BLOCK_STATUS needs a chunk. */
		if ((p->structured && s->type == NBD_CMD_READ) ||
		    (s->type == NBD_CMD_BLOCK_STATUS && !rep.error))
			return broken(p, -EPROTO);
		if (rep.error)
			s->result = nbd_wire_to_errno(rep.error);
		else if (s->type == NBD_CMD_READ) {
			r = rd(p, s->buf, s->len);
			if (r < 0)
				return r;
		}
		s->state = SLOT_DONE;
		return 0;
	}
	return broken(p, -EPROTO);
}

static void reap(struct nbdp *p, struct slot *s, uint64_t *cookie, int *result,
		 uint64_t *err_offset)
{
	if (cookie)
		*cookie = s->cookie;
	if (result)
		*result = s->result;
	if (err_offset)
		*err_offset = s->err_offset;
	s->state = SLOT_FREE;
	p->inflight--;
}

int nbdp_wait(struct nbdp *p, uint64_t *cookie, int *result, uint64_t *err_offset)
{
	unsigned i;
	int r;

	if (!p->inflight)
		return -ENOENT;
	for (;;) {
		for (i = 0; i < NBDP_MAX_INFLIGHT; i++)
			if (p->slots[i].state == SLOT_DONE) {
				reap(p, &p->slots[i], cookie, result, err_offset);
				return 0;
			}
		if (p->broken)
			return -EPIPE;
		r = read_one(p);
		if (r < 0)
			return r;
	}
}

int nbdp_wait_cookie(struct nbdp *p, uint64_t cookie, int *result, uint64_t *err_offset)
{
	struct slot *s = &p->slots[COOKIE_SLOT(cookie) % NBDP_MAX_INFLIGHT];
	int r;

	if (s->state == SLOT_FREE || s->cookie != cookie)
		return -ENOENT;
	while (s->state != SLOT_DONE) {
		if (p->broken)
			return -EPIPE;
		r = read_one(p);
		if (r < 0)
			return r;
	}
	reap(p, s, NULL, result, err_offset);
	return 0;
}

int nbdp_cmd(struct nbdp *p, uint16_t type, uint16_t flags, uint64_t offset, uint32_t len,
	     void *buf)
{
	uint64_t cookie;
	int r, result;

	r = nbdp_submit(p, type, flags, offset, len, buf, &cookie);
	if (r < 0)
		return r;
	r = nbdp_wait_cookie(p, cookie, &result, NULL);
	return r < 0 ? r : result;
}

int nbdp_pread(struct nbdp *p, void *buf, uint32_t len, uint64_t offset, uint16_t flags)
{
	return nbdp_cmd(p, NBD_CMD_READ, flags, offset, len, buf);
}

int nbdp_pwrite(struct nbdp *p, const void *buf, uint32_t len, uint64_t offset,
		uint16_t flags)
{
	return nbdp_cmd(p, NBD_CMD_WRITE, flags, offset, len, (void *)buf);
}

int nbdp_block_status(struct nbdp *p, uint32_t len, uint64_t offset, uint16_t flags,
		      struct nbd_extent *ext, unsigned max, unsigned *n)
{
	struct slot *s;
	uint64_t cookie;
	int r, result;

	*n = 0;
	r = nbdp_submit(p, NBD_CMD_BLOCK_STATUS, flags, offset, len, ext, &cookie);
	if (r < 0)
		return r;
	s = find_slot(p, cookie);
	s->ext_max = max;
	r = nbdp_wait_cookie(p, cookie, &result, NULL);
	if (r < 0)
		return r;
	/* A reaped slot keeps its count until its next command. */
	*n = s->ext_n;
	return result;
}

int nbdp_disconnect(struct nbdp *p)
{
	int r = nbdp_submit(p, NBD_CMD_DISC, 0, 0, 0, NULL, NULL);

	p->broken = true;
	return r;
}
