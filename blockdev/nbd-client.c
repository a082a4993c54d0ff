/* SPDX-License-Identifier: BSD-3-Clause */
/* smcrbd: NBD client half (blocking). */
#include <config.h>

#include <endian.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "nbd-client.h"

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

struct nbd_client {
	struct bd_transport *t;
	int timeout_ms;
	uint16_t hflags;
	bool structured;
	bool meta_alloc;		/* base:allocation selected, as meta_id */
	uint32_t meta_id;
	bool transmission;
	bool broken;
	struct nbd_export_info info;
	uint32_t last_rep;
	char last_msg[256];
	struct slot *slots;
	unsigned inflight;		/* SLOT_INFLIGHT + SLOT_DONE */
	uint64_t generation;
};

/* Cookies: slot index in the low 16 bits, a generation above. */
#define COOKIE_SLOT(c)	((unsigned)((c) & 0xffff))

static int broken(struct nbd_client *c, int err)
{
	c->broken = true;
	return err;
}

static int rd(struct nbd_client *c, void *buf, size_t len)
{
	int r = bd_read_full(c->t, buf, len, c->timeout_ms, -1);

	return r < 0 ? broken(c, r) : 0;
}

static int wr(struct nbd_client *c, const struct iovec *iov, int n)
{
	int r = bd_writev_full(c->t, iov, n, c->timeout_ms, -1);

	return r < 0 ? broken(c, r) : 0;
}

int nbd_client_open(struct bd_transport *t, int timeout_ms, struct nbd_client **out)
{
	struct nbd_greeting_wire gw;
	struct nbd_client_flags_wire cw;
	struct iovec iov;
	struct nbd_client *c;
	uint32_t cflags = NBD_FLAG_C_FIXED_NEWSTYLE;
	int r;

	c = calloc(1, sizeof(*c));
	if (!c) {
		bd_close(t);
		return -ENOMEM;
	}
	c->t = t;
	c->timeout_ms = timeout_ms;
	c->slots = calloc(NBD_CLIENT_MAX_INFLIGHT, sizeof(*c->slots));
	if (!c->slots) {
		r = -ENOMEM;
		goto out_close;
	}
	r = rd(c, &gw, sizeof(gw));
	if (r < 0)
		goto out_close;
	r = nbd_greeting_decode(&gw, &c->hflags);
	if (r < 0)
		goto out_close;
	if (!(c->hflags & NBD_FLAG_FIXED_NEWSTYLE))
		cflags = 0;
	if (c->hflags & NBD_FLAG_NO_ZEROES)
		cflags |= NBD_FLAG_C_NO_ZEROES;
	nbd_client_flags_encode(cflags, &cw);
	iov.iov_base = &cw;
	iov.iov_len = sizeof(cw);
	r = wr(c, &iov, 1);
	if (r < 0)
		goto out_close;
	*out = c;
	return 0;
out_close:
	nbd_client_close(c);
	return r;
}

void nbd_client_close(struct nbd_client *c)
{
	if (!c)
		return;
	bd_close(c->t);
	free(c->slots);
	free(c);
}

struct bd_transport *nbd_client_detach(struct nbd_client *c)
{
	struct bd_transport *t = c->t;

	c->t = NULL;
	nbd_client_close(c);
	return t;
}

struct bd_transport *nbd_client_transport(struct nbd_client *c)
{
	return c->t;
}

uint16_t nbd_client_handshake_flags(struct nbd_client *c)
{
	return c->hflags;
}

uint32_t nbd_client_last_reply(struct nbd_client *c, const char **msg)
{
	if (msg)
		*msg = c->last_msg;
	return c->last_rep;
}

const struct nbd_export_info *nbd_client_export(struct nbd_client *c)
{
	return &c->info;
}

bool nbd_client_is_structured(struct nbd_client *c)
{
	return c->structured;
}

unsigned nbd_client_inflight(struct nbd_client *c)
{
	return c->inflight;
}

/* --- options ------------------------------------------------------------ */

static int send_option(struct nbd_client *c, uint32_t option, const struct iovec *data,
		       int n)
{
	struct nbd_opt o = { .option = option, .len = 0 };
	struct nbd_opt_wire w;
	struct iovec iov[8];
	int i;

	if (c->broken)
		return -EPIPE;
	if (c->transmission || n > 7)
		return -EINVAL;
	for (i = 0; i < n; i++) {
		o.len += (uint32_t)data[i].iov_len;
		iov[i + 1] = data[i];
	}
	nbd_opt_encode(&o, &w);
	iov[0].iov_base = &w;
	iov[0].iov_len = sizeof(w);
	return wr(c, iov, n + 1);
}

/* Reads one option reply; its payload (at most NBD_MAX_OPTION_LEN) goes
 * to a malloc'ed *payload. */
static int read_reply(struct nbd_client *c, uint32_t option, struct nbd_opt_reply *rep,
		      uint8_t **payload)
{
	struct nbd_opt_reply_wire w;
	int r;

	*payload = NULL;
	r = rd(c, &w, sizeof(w));
	if (r < 0)
		return r;
	if (nbd_opt_reply_decode(&w, rep) < 0 || rep->option != option ||
	    rep->len > NBD_MAX_OPTION_LEN)
		return broken(c, -EPROTO);
	*payload = malloc(rep->len + 1);
	if (!*payload)
		return broken(c, -ENOMEM);
	r = rd(c, *payload, rep->len);
	if (r < 0) {
		free(*payload);
		*payload = NULL;
		return r;
	}
	(*payload)[rep->len] = '\0';
	return 0;
}

static int rep_error(struct nbd_client *c, const struct nbd_opt_reply *rep,
		     const uint8_t *payload)
{
	size_t n = rep->len < sizeof(c->last_msg) - 1 ? rep->len : sizeof(c->last_msg) - 1;

	c->last_rep = rep->type;
	memcpy(c->last_msg, payload, n);
	c->last_msg[n] = '\0';
	switch (rep->type) {
	case NBD_REP_ERR_UNKNOWN: return -ENOENT;
	case NBD_REP_ERR_POLICY: return -EACCES;
	case NBD_REP_ERR_UNSUP: return -ENOTSUP;
	case NBD_REP_ERR_INVALID: return -EINVAL;
	case NBD_REP_ERR_SHUTDOWN: return -ESHUTDOWN;
	case NBD_REP_ERR_TLS_REQD: return -EPERM;
	case NBD_REP_ERR_TOO_BIG: return -E2BIG;
	default: return -EIO;
	}
}

int nbd_client_option(struct nbd_client *c, uint32_t option, const void *data,
		      uint32_t len, uint32_t *reply)
{
	struct iovec iov = { .iov_base = (void *)data, .iov_len = len };
	struct nbd_opt_reply rep;
	uint8_t *payload;
	int r;

	r = send_option(c, option, &iov, 1);
	if (r < 0)
		return r;
	for (;;) {
		r = read_reply(c, option, &rep, &payload);
		if (r < 0)
			return r;
		*reply = rep.type;
		if (rep.type == NBD_REP_ACK || (rep.type & NBD_REP_FLAG_ERROR)) {
			if (rep.type != NBD_REP_ACK)
				rep_error(c, &rep, payload);
			free(payload);
			return 0;
		}
		free(payload);
	}
}

int nbd_client_starttls(struct nbd_client *c)
{
	struct nbd_opt_reply rep;
	uint8_t *payload;
	int r;

	r = send_option(c, NBD_OPT_STARTTLS, NULL, 0);
	if (r < 0)
		return r;
	r = read_reply(c, NBD_OPT_STARTTLS, &rep, &payload);
	if (r < 0)
		return r;
	if (rep.type == NBD_REP_ACK && rep.len == 0)
		r = 0;
	else if (rep.type & NBD_REP_FLAG_ERROR)
		r = rep_error(c, &rep, payload);
	else
		r = broken(c, -EPROTO);
	free(payload);
	return r;
}

int nbd_client_structured(struct nbd_client *c)
{
	struct nbd_opt_reply rep;
	uint8_t *payload;
	int r;

	r = send_option(c, NBD_OPT_STRUCTURED_REPLY, NULL, 0);
	if (r < 0)
		return r;
	r = read_reply(c, NBD_OPT_STRUCTURED_REPLY, &rep, &payload);
	if (r < 0)
		return r;
	if (rep.type == NBD_REP_ACK)
		c->structured = true;
	else if (rep.type & NBD_REP_FLAG_ERROR)
		r = rep_error(c, &rep, payload);
	else
		r = broken(c, -EPROTO);
	free(payload);
	return r;
}

int nbd_client_set_meta_context(struct nbd_client *c, const char *name, const char *query,
				uint32_t *id)
{
	uint32_t nlen = (uint32_t)strlen(name), qlen = (uint32_t)strlen(query);
	uint32_t be_nlen = htobe32(nlen), be_one = htobe32(1), be_qlen = htobe32(qlen);
	struct iovec iov[5] = {
		{ .iov_base = &be_nlen, .iov_len = 4 },
		{ .iov_base = (void *)name, .iov_len = nlen },
		{ .iov_base = &be_one, .iov_len = 4 },
		{ .iov_base = &be_qlen, .iov_len = 4 },
		{ .iov_base = (void *)query, .iov_len = qlen },
	};
	struct nbd_opt_reply rep;
	bool found = false;
	uint8_t *payload;
	uint32_t got = 0;
	int r;

	c->meta_alloc = false;
	r = send_option(c, NBD_OPT_SET_META_CONTEXT, iov, 5);
	if (r < 0)
		return r;
	for (;;) {
		r = read_reply(c, NBD_OPT_SET_META_CONTEXT, &rep, &payload);
		if (r < 0)
			return r;
		if (rep.type == NBD_REP_META_CONTEXT) {
			/* Only what was asked for, once. */
			if (rep.len != 4 + qlen || memcmp(payload + 4, query, qlen) || found) {
				free(payload);
				return broken(c, -EPROTO);
			}
			got = nbd_block_status_id_decode(
				(const struct nbd_chunk_block_status_wire *)payload);
			found = true;
			free(payload);
			continue;
		}
		if (rep.type == NBD_REP_ACK) {
			free(payload);
			if (!found)
				return -ENOTSUP;
			if (!strcmp(query, NBD_META_BASE_ALLOCATION)) {
				c->meta_alloc = true;
				c->meta_id = got;
			}
			if (id)
				*id = got;
			return 0;
		}
		if (rep.type & NBD_REP_FLAG_ERROR) {
			r = rep_error(c, &rep, payload);
			free(payload);
			return r;
		}
		free(payload);
		return broken(c, -EPROTO);
	}
}

int nbd_client_list(struct nbd_client *c,
		    int (*cb)(void *arg, const char *name, const char *desc), void *arg)
{
	struct nbd_opt_reply rep;
	uint8_t *payload;
	int r;

	r = send_option(c, NBD_OPT_LIST, NULL, 0);
	if (r < 0)
		return r;
	for (;;) {
		uint32_t nlen;
		char *name;

		r = read_reply(c, NBD_OPT_LIST, &rep, &payload);
		if (r < 0)
			return r;
		if (rep.type == NBD_REP_ACK) {
			free(payload);
			return 0;
		}
		if (rep.type & NBD_REP_FLAG_ERROR) {
			r = rep_error(c, &rep, payload);
			free(payload);
			return r;
		}
		if (rep.type != NBD_REP_SERVER || rep.len < 4) {
			free(payload);
			return broken(c, -EPROTO);
		}
		memcpy(&nlen, payload, 4);
		nlen = be32toh(nlen);
		if (nlen > rep.len - 4) {
			free(payload);
			return broken(c, -EPROTO);
		}
		name = strndup((char *)payload + 4, nlen);
		r = name ? 0 : -ENOMEM;
		if (name && cb)
			r = cb(arg, name, (char *)payload + 4 + nlen);
		free(name);
		free(payload);
		if (r < 0)
			return r;
	}
}

static int info_go(struct nbd_client *c, uint32_t option, const char *name,
		   struct nbd_export_info *info)
{
	uint32_t nlen = (uint32_t)strlen(name), be_nlen = htobe32(nlen);
	uint16_t reqs[3] = {
		htobe16(2), htobe16(NBD_INFO_BLOCK_SIZE), htobe16(NBD_INFO_NAME),
	};
	struct iovec iov[3] = {
		{ .iov_base = &be_nlen, .iov_len = 4 },
		{ .iov_base = (void *)name, .iov_len = nlen },
		{ .iov_base = reqs, .iov_len = sizeof(reqs) },
	};
	struct nbd_export_info tmp;
	struct nbd_opt_reply rep;
	bool have_export = false;
	uint8_t *payload;
	int r;

	memset(&tmp, 0, sizeof(tmp));
	r = send_option(c, option, iov, 3);
	if (r < 0)
		return r;
	for (;;) {
		r = read_reply(c, option, &rep, &payload);
		if (r < 0)
			return r;
		if (rep.type == NBD_REP_INFO) {
			uint16_t type;

			r = nbd_info_decode(payload, rep.len, &type, &tmp);
			free(payload);
			if (r < 0)
				return broken(c, r);
			if (type == NBD_INFO_EXPORT)
				have_export = true;
			continue;
		}
		if (rep.type == NBD_REP_ACK) {
			free(payload);
			if (!have_export)
				return broken(c, -EPROTO);
			c->info = tmp;
			if (info)
				*info = tmp;
			if (option == NBD_OPT_GO)
				c->transmission = true;
			return 0;
		}
		if (rep.type & NBD_REP_FLAG_ERROR) {
			r = rep_error(c, &rep, payload);
			free(payload);
			return r;
		}
		free(payload);
		return broken(c, -EPROTO);
	}
}

int nbd_client_info(struct nbd_client *c, const char *name, struct nbd_export_info *info)
{
	return info_go(c, NBD_OPT_INFO, name, info);
}

int nbd_client_go(struct nbd_client *c, const char *name, struct nbd_export_info *info)
{
	return info_go(c, NBD_OPT_GO, name, info);
}

int nbd_client_export_name(struct nbd_client *c, const char *name,
			   struct nbd_export_info *info)
{
	struct iovec iov = { .iov_base = (void *)name, .iov_len = strlen(name) };
	struct nbd_export_name_reply_wire w;
	uint8_t zeroes[NBD_EXPORT_NAME_ZEROES];
	int r;

	r = send_option(c, NBD_OPT_EXPORT_NAME, &iov, 1);
	if (r < 0)
		return r;
	r = rd(c, &w, sizeof(w));
	if (r < 0)
		return r;
	if (!(c->hflags & NBD_FLAG_NO_ZEROES)) {
		r = rd(c, zeroes, sizeof(zeroes));
		if (r < 0)
			return r;
	}
	memset(&c->info, 0, sizeof(c->info));
	nbd_export_name_reply_decode(&w, &c->info.size, &c->info.flags);
	if (info)
		*info = c->info;
	c->transmission = true;
	return 0;
}

int nbd_client_abort(struct nbd_client *c)
{
	struct nbd_opt_reply rep;
	uint8_t *payload;
	int r;

	r = send_option(c, NBD_OPT_ABORT, NULL, 0);
	if (r < 0)
		return r;
	/* The server may hang up without a reply. */
	r = read_reply(c, NBD_OPT_ABORT, &rep, &payload);
	free(payload);
	c->broken = true;
	return r == -ECONNRESET ? 0 : r;
}

/* --- transmission ------------------------------------------------------- */

static struct slot *find_slot(struct nbd_client *c, uint64_t cookie)
{
	struct slot *s = &c->slots[COOKIE_SLOT(cookie) % NBD_CLIENT_MAX_INFLIGHT];

	if (s->state != SLOT_INFLIGHT || s->cookie != cookie)
		return NULL;
	return s;
}

int nbd_client_submit(struct nbd_client *c, uint16_t type, uint16_t flags,
		      uint64_t offset, uint32_t len, void *buf, uint64_t *cookie)
{
	struct nbd_request req = {
		.flags = flags, .type = type, .offset = offset, .length = len,
	};
	struct nbd_request_wire w;
	struct iovec iov[2];
	struct slot *s = NULL;
	unsigned i;
	int r;

	if (c->broken)
		return -EPIPE;
	if (!c->transmission)
		return -EINVAL;
	if (type != NBD_CMD_DISC) {
		for (i = 0; i < NBD_CLIENT_MAX_INFLIGHT; i++)
			if (c->slots[i].state == SLOT_FREE) {
				s = &c->slots[i];
				break;
			}
		if (!s)
			return -EBUSY;
		c->generation++;
		req.cookie = (c->generation << 16) | i;
	} else {
		req.cookie = 0xffff;
	}
	nbd_request_encode(&req, &w);
	iov[0].iov_base = &w;
	iov[0].iov_len = sizeof(w);
	iov[1].iov_base = buf;
	iov[1].iov_len = type == NBD_CMD_WRITE ? len : 0;
	r = wr(c, iov, 2);
	if (r < 0)
		return r;
	if (s) {
		memset(s, 0, sizeof(*s));
		s->state = SLOT_INFLIGHT;
		s->type = type;
		s->len = len;
		s->offset = offset;
		s->buf = buf;
		s->cookie = req.cookie;
		s->err_offset = NBD_CLIENT_NO_OFFSET;
		c->inflight++;
	}
	if (cookie)
		*cookie = req.cookie;
	return 0;
}

static int read_chunk(struct nbd_client *c, const uint8_t *hdr16)
{
	struct nbd_chunk_wire w;
	struct nbd_chunk ch;
	struct slot *s;
	int r;

	memcpy(&w, hdr16, 16);
	r = rd(c, (uint8_t *)&w + 16, sizeof(w) - 16);
	if (r < 0)
		return r;
	if (nbd_chunk_decode(&w, &ch) < 0)
		return broken(c, -EPROTO);
	s = find_slot(c, ch.cookie);
	if (!s)
		return broken(c, -EPROTO);

	switch (ch.type) {
	case NBD_REPLY_TYPE_NONE:
		if (ch.length || !(ch.flags & NBD_REPLY_FLAG_DONE))
			return broken(c, -EPROTO);
		break;
	case NBD_REPLY_TYPE_OFFSET_DATA: {
		struct nbd_chunk_offset_data_wire ow;
		uint64_t off;
		uint32_t n;

		if (s->type != NBD_CMD_READ || ch.length <= sizeof(ow))
			return broken(c, -EPROTO);
		r = rd(c, &ow, sizeof(ow));
		if (r < 0)
			return r;
		off = nbd_offset_decode(&ow);
		n = ch.length - (uint32_t)sizeof(ow);
		if (off < s->offset || off - s->offset > s->len || n > s->len - (off - s->offset))
			return broken(c, -EPROTO);
		r = rd(c, (uint8_t *)s->buf + (off - s->offset), n);
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
			return broken(c, -EPROTO);
		r = rd(c, &hw, sizeof(hw));
		if (r < 0)
			return r;
		nbd_hole_decode(&hw, &off, &n);
		if (off < s->offset || off - s->offset > s->len || n > s->len - (off - s->offset))
			return broken(c, -EPROTO);
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

		if (s->type != NBD_CMD_BLOCK_STATUS || !c->meta_alloc || s->status_seen ||
		    ch.length < sizeof(idw) + sizeof(dw) ||
		    (ch.length - sizeof(idw)) % sizeof(dw))
			return broken(c, -EPROTO);
		r = rd(c, &idw, sizeof(idw));
		if (r < 0)
			return r;
		if (nbd_block_status_id_decode(&idw) != c->meta_id)
			return broken(c, -EPROTO);
		n = (ch.length - (uint32_t)sizeof(idw)) / (uint32_t)sizeof(dw);
		for (i = 0; i < n; i++) {
			struct nbd_extent e;

			r = rd(c, &dw, sizeof(dw));
			if (r < 0)
				return r;
			nbd_extents_decode(&dw, 1, &e);
			if (!e.length)
				return broken(c, -EPROTO);
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
		uint8_t *p;
		uint32_t err;
		uint64_t eoff;

		if (!NBD_REPLY_TYPE_IS_ERR(ch.type) || ch.length > NBD_MAX_STRING + 64)
			return broken(c, -EPROTO);
		p = malloc(ch.length ? ch.length : 1);
		if (!p)
			return broken(c, -ENOMEM);
		r = rd(c, p, ch.length);
		if (r == 0 && nbd_error_chunk_parse(p, ch.length, ch.type, &err, NULL, 0,
						    &eoff) < 0)
			r = broken(c, -EPROTO);
		free(p);
		if (r < 0)
			return r;
		if (s->result == 0)
			s->result = nbd_wire_to_errno(err);
		if (ch.type == NBD_REPLY_TYPE_ERROR_OFFSET &&
		    s->err_offset == NBD_CLIENT_NO_OFFSET)
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
static int read_one(struct nbd_client *c)
{
	uint8_t hdr[16];
	uint32_t magic;
	int r;

	r = rd(c, hdr, sizeof(hdr));
	if (r < 0)
		return r;
	magic = nbd_reply_magic(hdr);
	if (magic == NBD_STRUCTURED_REPLY_MAGIC) {
		if (!c->structured)
			return broken(c, -EPROTO);
		return read_chunk(c, hdr);
	}
	if (magic == NBD_SIMPLE_REPLY_MAGIC) {
		struct nbd_simple_reply rep;
		struct slot *s;

		nbd_simple_reply_decode((const struct nbd_simple_reply_wire *)hdr, &rep);
		s = find_slot(c, rep.cookie);
		if (!s)
			return broken(c, -EPROTO);
		/* Structured replies forbid simple replies to READ; a
		 * successful BLOCK_STATUS needs a chunk. */
		if ((c->structured && s->type == NBD_CMD_READ) ||
		    (s->type == NBD_CMD_BLOCK_STATUS && !rep.error))
			return broken(c, -EPROTO);
		if (rep.error)
			s->result = nbd_wire_to_errno(rep.error);
		else if (s->type == NBD_CMD_READ) {
			r = rd(c, s->buf, s->len);
			if (r < 0)
				return r;
		}
		s->state = SLOT_DONE;
		return 0;
	}
	return broken(c, -EPROTO);
}

static void reap(struct nbd_client *c, struct slot *s, uint64_t *cookie, int *result,
		 uint64_t *err_offset)
{
	if (cookie)
		*cookie = s->cookie;
	if (result)
		*result = s->result;
	if (err_offset)
		*err_offset = s->err_offset;
	s->state = SLOT_FREE;
	c->inflight--;
}

int nbd_client_wait(struct nbd_client *c, uint64_t *cookie, int *result,
		    uint64_t *err_offset)
{
	unsigned i;
	int r;

	if (!c->inflight)
		return -ENOENT;
	for (;;) {
		for (i = 0; i < NBD_CLIENT_MAX_INFLIGHT; i++)
			if (c->slots[i].state == SLOT_DONE) {
				reap(c, &c->slots[i], cookie, result, err_offset);
				return 0;
			}
		if (c->broken)
			return -EPIPE;
		r = read_one(c);
		if (r < 0)
			return r;
	}
}

int nbd_client_wait_cookie(struct nbd_client *c, uint64_t cookie, int *result,
			   uint64_t *err_offset)
{
	struct slot *s = &c->slots[COOKIE_SLOT(cookie) % NBD_CLIENT_MAX_INFLIGHT];
	int r;

	if (s->state == SLOT_FREE || s->cookie != cookie)
		return -ENOENT;
	while (s->state != SLOT_DONE) {
		if (c->broken)
			return -EPIPE;
		r = read_one(c);
		if (r < 0)
			return r;
	}
	reap(c, s, NULL, result, err_offset);
	return 0;
}

static int sync_cmd(struct nbd_client *c, uint16_t type, uint16_t flags, uint64_t offset,
		    uint32_t len, void *buf)
{
	uint64_t cookie;
	int r, result;

	r = nbd_client_submit(c, type, flags, offset, len, buf, &cookie);
	if (r < 0)
		return r;
	r = nbd_client_wait_cookie(c, cookie, &result, NULL);
	return r < 0 ? r : result;
}

int nbd_client_pread(struct nbd_client *c, void *buf, uint32_t len, uint64_t offset,
		     uint16_t flags)
{
	return sync_cmd(c, NBD_CMD_READ, flags, offset, len, buf);
}

int nbd_client_pwrite(struct nbd_client *c, const void *buf, uint32_t len,
		      uint64_t offset, uint16_t flags)
{
	return sync_cmd(c, NBD_CMD_WRITE, flags, offset, len, (void *)buf);
}

int nbd_client_flush(struct nbd_client *c, uint16_t flags)
{
	return sync_cmd(c, NBD_CMD_FLUSH, flags, 0, 0, NULL);
}

int nbd_client_trim(struct nbd_client *c, uint32_t len, uint64_t offset, uint16_t flags)
{
	return sync_cmd(c, NBD_CMD_TRIM, flags, offset, len, NULL);
}

int nbd_client_zero(struct nbd_client *c, uint32_t len, uint64_t offset, uint16_t flags)
{
	return sync_cmd(c, NBD_CMD_WRITE_ZEROES, flags, offset, len, NULL);
}

int nbd_client_cache(struct nbd_client *c, uint32_t len, uint64_t offset, uint16_t flags)
{
	return sync_cmd(c, NBD_CMD_CACHE, flags, offset, len, NULL);
}

int nbd_client_block_status(struct nbd_client *c, uint32_t len, uint64_t offset,
			    uint16_t flags, struct nbd_extent *ext, unsigned max, unsigned *n)
{
	struct slot *s;
	uint64_t cookie;
	int r, result;

	*n = 0;
	r = nbd_client_submit(c, NBD_CMD_BLOCK_STATUS, flags, offset, len, ext, &cookie);
	if (r < 0)
		return r;
	s = find_slot(c, cookie);
	s->ext_max = max;
	while (s->state != SLOT_DONE) {
		if (c->broken)
			return -EPIPE;
		r = read_one(c);
		if (r < 0)
			return r;
	}
	*n = s->ext_n;
	r = nbd_client_wait_cookie(c, cookie, &result, NULL);
	return r < 0 ? r : result;
}

int nbd_client_disconnect(struct nbd_client *c)
{
	int r = nbd_client_submit(c, NBD_CMD_DISC, 0, 0, 0, NULL, NULL);

	c->transmission = false;
	c->broken = true;
	return r;
}
