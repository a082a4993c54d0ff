/* SPDX-License-Identifier: BSD-3-Clause */
/* smcrbd: NBD client half: the handshake (blocking). */
#include <config.h>

#include <endian.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "monotime.h"
#include "nbd-client.h"

/* Replies to one option before its final one: a server that keeps
 * sending them (NBD_REP_INFO without end) breaks the handshake.  Ours
 * send at most 4 INFO, or one META_CONTEXT, or a SERVER per export. */
#define NBD_CLIENT_MAX_REPLIES		64
#define NBD_CLIENT_MAX_LIST_REPLIES	4096

struct nbd_client {
	struct bd_transport *t;
	int timeout_ms;
	int64_t deadline;		/* of the whole handshake (now_ms()) */
	uint16_t hflags;
	bool structured;
	bool transmission;		/* after GO or EXPORT_NAME: no options */
	bool broken;
	uint32_t last_rep;
	char last_msg[256];
};

static int broken(struct nbd_client *c, int err)
{
	c->broken = true;
	return err;
}

static int rd(struct nbd_client *c, void *buf, size_t len)
{
	int r = bd_read_full_by(c->t, buf, len, c->timeout_ms, c->deadline, -1);

	return r < 0 ? broken(c, r) : 0;
}

static int wr(struct nbd_client *c, const struct iovec *iov, int n)
{
	int r = bd_writev_full_by(c->t, iov, n, c->timeout_ms, c->deadline, -1);

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
	/* One deadline for all of it, however the bytes trickle in. */
	c->deadline = timeout_ms >= 0 ? now_ms() + (timeout_ms ? timeout_ms : 1) : 0;
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

int nbd_client_left_ms(struct nbd_client *c)
{
	int64_t left;

	if (!c->deadline)
		return -1;
	left = c->deadline - now_ms();
	return left > 0 ? (int)left : 0;
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

bool nbd_client_is_structured(struct nbd_client *c)
{
	return c->structured;
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
	unsigned n;
	int r;

	r = send_option(c, option, &iov, 1);
	if (r < 0)
		return r;
	for (n = 0;; n++) {
		if (n > NBD_CLIENT_MAX_REPLIES)
			return broken(c, -EPROTO);
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
	unsigned n;
	int r;

	r = send_option(c, NBD_OPT_LIST, NULL, 0);
	if (r < 0)
		return r;
	for (n = 0;; n++) {
		uint32_t nlen;
		char *name;

		if (n > NBD_CLIENT_MAX_LIST_REPLIES)
			return broken(c, -EPROTO);
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
	unsigned n;
	int r;

	memset(&tmp, 0, sizeof(tmp));
	r = send_option(c, option, iov, 3);
	if (r < 0)
		return r;
	for (n = 0;; n++) {
		if (n > NBD_CLIENT_MAX_REPLIES)
			return broken(c, -EPROTO);
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
	struct nbd_export_info tmp;
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
	memset(&tmp, 0, sizeof(tmp));
	nbd_export_name_reply_decode(&w, &tmp.size, &tmp.flags);
	if (info)
		*info = tmp;
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
