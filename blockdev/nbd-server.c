/* SPDX-License-Identifier: BSD-3-Clause */
/* smcrbd: NBD server half: handshake, request checks, reply bytes. */
#include <config.h>

#include <endian.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "applog.h"
#include "lograte.h"
#include "monotime.h"
#include "nbd-server.h"

struct hs {
	struct bd_transport *t;
	const struct nbd_server_ops *ops;
	void *ctx;
	const struct nbd_handshake_limits *lim;
	struct nbd_server_session *s;
	uint8_t *data;			/* current option's data */
	uint32_t len;
	int64_t deadline;		/* ms, CLOCK_MONOTONIC; 0: none */
	char meta_export[NBD_MAX_STRING + 1];	/* of the last SET_META_CONTEXT */
	bool meta_alloc;		/* ... which selected base:allocation */
	bool refusal_logged;		/* an unknown export or a policy refusal */
};

/* The wait allowed for one step (TLS setup): the per-step timeout, cut
 * to what is left of the whole handshake. */
static int hs_timeout(struct hs *h)
{
	int64_t left;

	if (!h->deadline)
		return h->lim->timeout_ms;
	left = h->deadline - now_ms();
	if (left < 0)
		left = 0;
	if (h->lim->timeout_ms >= 0 && left > h->lim->timeout_ms)
		left = h->lim->timeout_ms;
	return (int)left;
}

static int hs_write(struct hs *h, const struct iovec *iov, int n)
{
	return bd_writev_full_by(h->t, iov, n, h->lim->timeout_ms, h->deadline,
				 h->lim->cancel_fd);
}

static int hs_reply(struct hs *h, uint32_t option, uint32_t type, const void *data,
		    uint32_t len)
{
	struct nbd_opt_reply r = { .option = option, .type = type, .len = len };
	struct nbd_opt_reply_wire w;
	struct iovec iov[2] = {
		{ .iov_base = &w, .iov_len = sizeof(w) },
		{ .iov_base = (void *)data, .iov_len = len },
	};

	nbd_opt_reply_encode(&r, &w);
	return hs_write(h, iov, 2);
}

static int hs_error(struct hs *h, uint32_t option, uint32_t type, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

static int hs_error(struct hs *h, uint32_t option, uint32_t type, const char *fmt, ...)
{
	char msg[256];
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	if (n < 0)
		n = 0;
	if ((size_t)n >= sizeof(msg))
		n = sizeof(msg) - 1;
	/* A client asking for an export it cannot have: once per connection
	 * at the default level (the admin's first question), within the
	 * client's rate (one per connection of a client that reconnects
	 * as fast as it can is a flood), the rest with -v. */
	if ((type == NBD_REP_ERR_UNKNOWN || type == NBD_REP_ERR_POLICY) && !h->refusal_logged) {
		h->refusal_logged = true;
		log_rated(LOGRATE_HANDSHAKE, h->t->peer, SMCR_LOG_INFO, "nbd: %s: %s",
			  h->t->peer, msg);
	} else {
		log_dbg("nbd: %s: option %s: %s: %s", h->t->peer, nbd_opt_name(option),
			nbd_rep_name(type), msg);
	}
	return hs_reply(h, option, type, msg, (uint32_t)n);
}

/* Export names: at most NBD_MAX_STRING bytes, no NUL. */
static int name_ok(const uint8_t *p, uint32_t len)
{
	return len <= NBD_MAX_STRING && !memchr(p, '\0', len);
}

static int list_one(void *arg, const char *name, const char *desc)
{
	struct hs *h = arg;
	size_t nlen = strlen(name), dlen = desc ? strlen(desc) : 0;
	uint32_t be = htobe32((uint32_t)nlen);
	struct nbd_opt_reply r = {
		.option = NBD_OPT_LIST, .type = NBD_REP_SERVER,
		.len = (uint32_t)(4 + nlen + dlen),
	};
	struct nbd_opt_reply_wire w;
	struct iovec iov[4] = {
		{ .iov_base = &w, .iov_len = sizeof(w) },
		{ .iov_base = &be, .iov_len = 4 },
		{ .iov_base = (void *)name, .iov_len = nlen },
		{ .iov_base = (void *)desc, .iov_len = dlen },
	};

	if (nlen > NBD_MAX_STRING || dlen > NBD_MAX_STRING)
		return 0;
	nbd_opt_reply_encode(&r, &w);
	return hs_write(h, iov, 4);
}

static int do_list(struct hs *h)
{
	int r;

	if (h->len)
		return hs_error(h, NBD_OPT_LIST, NBD_REP_ERR_INVALID,
				"NBD_OPT_LIST takes no data");
	if (h->ops->refusal && h->ops->refusal(h->ctx))
		return hs_error(h, NBD_OPT_LIST, NBD_REP_ERR_POLICY, "%s",
				h->ops->refusal(h->ctx));
	r = h->ops->list(h->ctx, list_one, h);
	if (r < 0)
		return r;
	return hs_reply(h, NBD_OPT_LIST, NBD_REP_ACK, NULL, 0);
}

static int send_info(struct hs *h, uint32_t option, const void *p, uint32_t len)
{
	return hs_reply(h, option, NBD_REP_INFO, p, len);
}

static int send_info_string(struct hs *h, uint32_t option, uint16_t type, const char *s)
{
	size_t n = strlen(s);
	uint8_t buf[2 + NBD_MAX_STRING];
	uint16_t be = htobe16(type);

	if (n > NBD_MAX_STRING)
		n = NBD_MAX_STRING;
	memcpy(buf, &be, 2);
	memcpy(buf + 2, s, n);
	return send_info(h, option, buf, (uint32_t)(2 + n));
}

static int lookup(struct hs *h, uint32_t option, const char *name,
		  struct nbd_server_export *exp, void **handle)
{
	const char *refusal = h->ops->refusal ? h->ops->refusal(h->ctx) : NULL;
	int r;

	if (refusal)
		return -EBUSY;
	r = h->ops->lookup(h->ctx, name, exp, handle);
	if (r == 0)
		log_dbg("nbd: %s: option %s: export '%s'", h->t->peer,
			nbd_opt_name(option), exp->name);
	return r;
}

static uint32_t get_be32(const uint8_t *p)
{
	uint32_t v;

	memcpy(&v, p, 4);
	return be32toh(v);
}

static bool str_is(const uint8_t *p, uint32_t len, const char *s)
{
	return len == strlen(s) && memcmp(p, s, len) == 0;
}

/* NBD_OPT_LIST_META_CONTEXT and NBD_OPT_SET_META_CONTEXT.  The one context
 * is base:allocation, for every export: LIST finds it for no query,
 * "base:" or its name; SET selects it by its name only. */
static int do_meta_context(struct hs *h, uint32_t option)
{
	bool set = option == NBD_OPT_SET_META_CONTEXT, found = false;
	uint32_t nlen, nq, i, pos;
	struct nbd_server_export exp;
	void *handle = NULL;
	char *name;
	int r;

	if (set && !h->s->structured)
		return hs_error(h, option, NBD_REP_ERR_INVALID,
				"structured replies must be negotiated first");
	if (h->len < 8)
		return hs_error(h, option, NBD_REP_ERR_INVALID, "option data too short");
	nlen = get_be32(h->data);
	if (nlen > h->len - 8)
		return hs_error(h, option, NBD_REP_ERR_INVALID, "export name length too large");
	if (!name_ok(h->data + 4, nlen))
		return hs_error(h, option, NBD_REP_ERR_INVALID, "bad export name");
	nq = get_be32(h->data + 4 + nlen);
	pos = 8 + nlen;
	/* Every query takes at least 4 bytes: the loop ends with the data. */
	for (i = 0; i < nq; i++) {
		uint32_t qlen;

		if (h->len - pos < 4)
			return hs_error(h, option, NBD_REP_ERR_INVALID,
					"query list does not match the length");
		qlen = get_be32(h->data + pos);
		pos += 4;
		if (qlen > h->len - pos || !name_ok(h->data + pos, qlen))
			return hs_error(h, option, NBD_REP_ERR_INVALID, "bad query");
		if (str_is(h->data + pos, qlen, NBD_META_BASE_ALLOCATION) ||
		    (!set && str_is(h->data + pos, qlen, "base:")))
			found = true;
		pos += qlen;
	}
	if (pos != h->len)
		return hs_error(h, option, NBD_REP_ERR_INVALID,
				"query list does not match the length");
	if (!set && nq == 0)
		found = true;

	name = malloc(nlen + 1);
	if (!name)
		return -ENOMEM;
	memcpy(name, h->data + 4, nlen);
	name[nlen] = '\0';
	r = lookup(h, option, name, &exp, &handle);
	if (r == 0) {
		h->ops->release(h->ctx, handle);
	} else {
		if (r == -ENOENT)
			r = hs_error(h, option, NBD_REP_ERR_UNKNOWN, "unknown export '%s'", name);
		else if (r == -EACCES)
			r = hs_error(h, option, NBD_REP_ERR_POLICY,
				     "export '%s' is not available to %s", name, h->t->peer);
		else if (r == -EBUSY)
			r = hs_error(h, option, NBD_REP_ERR_POLICY, "%s",
				     h->ops->refusal(h->ctx));
		else
			r = hs_error(h, option, NBD_REP_ERR_PLATFORM, "export '%s': %s", name,
				     strerror(-r));
		goto out_free_name;
	}
	if (found) {
		uint8_t rep[4 + sizeof(NBD_META_BASE_ALLOCATION) - 1];
		struct nbd_chunk_block_status_wire idw;

		/* LIST replies carry ID 0 (reserved there). */
		nbd_block_status_id_encode(set ? NBD_META_ID_BASE_ALLOCATION : 0, &idw);
		memcpy(rep, &idw, 4);
		memcpy(rep + 4, NBD_META_BASE_ALLOCATION, sizeof(rep) - 4);
		r = hs_reply(h, option, NBD_REP_META_CONTEXT, rep, sizeof(rep));
		if (r < 0)
			goto out_free_name;
	}
	r = hs_reply(h, option, NBD_REP_ACK, NULL, 0);
	if (r < 0 || !set)
		goto out_free_name;
	log_dbg("nbd: %s: export '%s': base:allocation %s", h->t->peer, name,
		found ? "selected" : "not selected");
	memcpy(h->meta_export, name, nlen + 1);
	h->meta_alloc = found;
out_free_name:
	free(name);
	return r;
}

/* Whether SET_META_CONTEXT selected base:allocation for this export. */
static bool meta_for(const struct hs *h, const char *name)
{
	return h->meta_alloc && strcmp(h->meta_export, name) == 0;
}

/* NBD_OPT_INFO and NBD_OPT_GO.  Returns 1 when GO succeeded. */
static int do_info_go(struct hs *h, uint32_t option)
{
	struct nbd_server_export exp;
	struct nbd_info_export_wire ie;
	struct nbd_info_block_size_wire ib;
	uint32_t nlen;
	uint16_t nreq, i;
	bool want_name = false, want_desc = false, want_bs = false;
	char *name;
	void *handle = NULL;
	int r;

	if (h->len < 6)
		return hs_error(h, option, NBD_REP_ERR_INVALID, "option data too short");
	memcpy(&nlen, h->data, 4);
	nlen = be32toh(nlen);
	if (nlen > h->len - 6)
		return hs_error(h, option, NBD_REP_ERR_INVALID, "export name length too large");
	if (!name_ok(h->data + 4, nlen))
		return hs_error(h, option, NBD_REP_ERR_INVALID, "bad export name");
	memcpy(&nreq, h->data + 4 + nlen, 2);
	nreq = be16toh(nreq);
	if ((uint32_t)nreq * 2 != h->len - 6 - nlen)
		return hs_error(h, option, NBD_REP_ERR_INVALID,
				"information request list does not match the length");
	for (i = 0; i < nreq; i++) {
		uint16_t type;

		memcpy(&type, h->data + 6 + nlen + 2u * i, 2);
		switch (be16toh(type)) {
		case NBD_INFO_NAME: want_name = true; break;
		case NBD_INFO_DESCRIPTION: want_desc = true; break;
		case NBD_INFO_BLOCK_SIZE: want_bs = true; break;
		default: break;		/* ignore what we do not know */
		}
	}
	/* The name is copied out to be NUL-terminated. */
	name = malloc(nlen + 1);
	if (!name)
		return -ENOMEM;
	memcpy(name, h->data + 4, nlen);
	name[nlen] = '\0';
	if (option == NBD_OPT_GO && h->meta_alloc && !meta_for(h, name)) {
		r = hs_error(h, option, NBD_REP_ERR_INVALID,
			     "export '%s' is not the one metadata contexts were set for ('%s')",
			     name, h->meta_export);
		goto out_free_name;
	}

	r = lookup(h, option, name, &exp, &handle);
	if (r == -ENOENT) {
		r = hs_error(h, option, NBD_REP_ERR_UNKNOWN, "unknown export '%s'", name);
		goto out_free_name;
	}
	if (r == -EACCES) {
		r = hs_error(h, option, NBD_REP_ERR_POLICY,
			     "export '%s' is not available to %s", name, h->t->peer);
		goto out_free_name;
	}
	if (r == -EBUSY) {
		r = hs_error(h, option, NBD_REP_ERR_POLICY, "%s", h->ops->refusal(h->ctx));
		goto out_free_name;
	}
	if (r < 0) {
		r = hs_error(h, option, NBD_REP_ERR_PLATFORM, "export '%s': %s", name,
			     strerror(-r));
		goto out_free_name;
	}

	{
		uint16_t tflags = exp.tflags | NBD_FLAG_HAS_FLAGS;

		if (h->s->structured)
			tflags |= NBD_FLAG_SEND_DF;
		nbd_info_export_encode(exp.size, tflags, &ie);
		r = send_info(h, option, &ie, sizeof(ie));
		if (r < 0)
			goto out_release;
		/* Block sizes are always sent: harmless for clients that did not
		 * ask, and the constraints are enforced either way. */
		nbd_info_block_size_encode(exp.min_block, exp.pref_block, exp.max_payload, &ib);
		r = send_info(h, option, &ib, sizeof(ib));
		if (r < 0)
			goto out_release;
		if (want_name || strcmp(name, exp.name) != 0) {
			r = send_info_string(h, option, NBD_INFO_NAME, exp.name);
			if (r < 0)
				goto out_release;
		}
		if (want_desc && exp.description && *exp.description) {
			r = send_info_string(h, option, NBD_INFO_DESCRIPTION, exp.description);
			if (r < 0)
				goto out_release;
		}
		r = hs_reply(h, option, NBD_REP_ACK, NULL, 0);
		if (r < 0)
			goto out_release;
		if (option == NBD_OPT_GO) {
			h->s->handle = handle;
			h->s->exp = exp;
			h->s->tflags = tflags;
			h->s->block_size_ack = want_bs;
			h->s->base_allocation = meta_for(h, name);
			free(name);
			return 1;
		}
	}
out_release:
	h->ops->release(h->ctx, handle);
out_free_name:
	free(name);
	return r;
}

static int tls_mode(const struct hs *h)
{
	return h->ops->tls_mode && h->ops->starttls ? h->ops->tls_mode(h->ctx) : NBD_TLS_OFF;
}

/* NBD_OPT_STARTTLS: ACK, then the TLS handshake on the same stream.
 * What was negotiated before is forgotten (it was in the clear). */
static int do_starttls(struct hs *h)
{
	int r;

	if (tls_mode(h) == NBD_TLS_OFF)
		return hs_error(h, NBD_OPT_STARTTLS, NBD_REP_ERR_UNSUP, "TLS is not offered here");
	if (h->s->tls)
		return hs_error(h, NBD_OPT_STARTTLS, NBD_REP_ERR_INVALID, "TLS is already on");
	if (h->len)
		return hs_error(h, NBD_OPT_STARTTLS, NBD_REP_ERR_INVALID,
				"NBD_OPT_STARTTLS takes no data");
	r = hs_reply(h, NBD_OPT_STARTTLS, NBD_REP_ACK, NULL, 0);
	if (r < 0)
		return r;
	r = h->ops->starttls(h->ctx, h->t, hs_timeout(h), h->lim->cancel_fd);
	if (r < 0)
		return r == -ECONNRESET ? -ECONNABORTED : r;
	h->s->tls = true;
	h->s->structured = false;
	h->s->extended = false;
	h->meta_alloc = false;
	return 0;
}

/* NBD_OPT_EXPORT_NAME: no way to report an error but hanging up. */
static int do_export_name(struct hs *h)
{
	struct nbd_server_export exp;
	struct nbd_export_name_reply_wire w;
	static const uint8_t zeroes[NBD_EXPORT_NAME_ZEROES];
	struct iovec iov[2];
	void *handle = NULL;
	char *name;
	int r;

	if (!name_ok(h->data, h->len))
		return -EPROTO;
	if (h->s->extended) {
		/* Forbidden after extended headers, and no way to say so. */
		log_rated(LOGRATE_HANDSHAKE, h->t->peer, SMCR_LOG_INFO,
			  "nbd: %s: NBD_OPT_EXPORT_NAME after NBD_OPT_EXTENDED_HEADERS: "
			  "hanging up", h->t->peer);
		return -EPROTO;
	}
	name = malloc(h->len + 1);
	if (!name)
		return -ENOMEM;
	memcpy(name, h->data, h->len);
	name[h->len] = '\0';
	/* No way to refuse a mismatch: just no contexts then. */
	h->s->base_allocation = meta_for(h, name);
	r = lookup(h, NBD_OPT_EXPORT_NAME, name, &exp, &handle);
	if (r < 0) {
		log_rated(LOGRATE_HANDSHAKE, h->t->peer, SMCR_LOG_INFO,
			  "nbd: %s: NBD_OPT_EXPORT_NAME '%s' refused (%s): hanging up",
			  h->t->peer, name, r == -EBUSY ? h->ops->refusal(h->ctx) : strerror(-r));
		free(name);
		return r == -EBUSY ? -EACCES : r;
	}
	free(name);
	/* No structured replies unless negotiated before; no DF without them. */
	h->s->tflags = exp.tflags | NBD_FLAG_HAS_FLAGS;
	if (h->s->structured)
		h->s->tflags |= NBD_FLAG_SEND_DF;
	nbd_export_name_reply_encode(exp.size, h->s->tflags, &w);
	iov[0].iov_base = &w;
	iov[0].iov_len = sizeof(w);
	iov[1].iov_base = (void *)zeroes;
	iov[1].iov_len = h->s->no_zeroes ? 0 : sizeof(zeroes);
	r = hs_write(h, iov, 2);
	if (r < 0) {
		h->ops->release(h->ctx, handle);
		return r;
	}
	h->s->handle = handle;
	h->s->exp = exp;
	return 1;
}

int nbd_server_handshake(struct bd_transport *t, const struct nbd_server_ops *ops,
			 void *ctx, const struct nbd_handshake_limits *lim,
			 struct nbd_server_session *out)
{
	struct nbd_greeting_wire gw;
	struct nbd_client_flags_wire cw;
	struct hs h = { .t = t, .ops = ops, .ctx = ctx, .lim = lim, .s = out };
	uint32_t cflags;
	unsigned count;
	int r;

	memset(out, 0, sizeof(*out));
	nbd_greeting_encode(NBD_FLAG_FIXED_NEWSTYLE | NBD_FLAG_NO_ZEROES, &gw);
	if (lim->total_ms > 0)
		h.deadline = now_ms() + lim->total_ms;
	{
		struct iovec iov = { .iov_base = &gw, .iov_len = sizeof(gw) };

		r = hs_write(&h, &iov, 1);
	}
	if (r < 0)
		return r == -EPIPE || r == -ECONNRESET ? -ECONNABORTED : r;
	r = bd_read_full_by(t, &cw, sizeof(cw), lim->timeout_ms, h.deadline, lim->cancel_fd);
	if (r < 0)
		return r == -ECONNRESET ? -ECONNABORTED : r;
	cflags = nbd_client_flags_decode(&cw);
	if (cflags & ~(uint32_t)(NBD_FLAG_C_FIXED_NEWSTYLE | NBD_FLAG_C_NO_ZEROES)) {
		if (cflags == 0xE2D4C3D9u)	/* CLC's eyecatcher */
			log_rated(LOGRATE_HANDSHAKE, t->peer, SMCR_LOG_INFO,
				  "nbd: %s: a CLC message after the TCP fallback (the "
				  "client's Proposal came late): hanging up", t->peer);
		else
			log_rated(LOGRATE_HANDSHAKE, t->peer, SMCR_LOG_INFO,
				  "nbd: %s: unknown client flags 0x%x: hanging up",
				  t->peer, cflags);
		return -EPROTO;
	}
	out->fixed_newstyle = cflags & NBD_FLAG_C_FIXED_NEWSTYLE;
	out->no_zeroes = cflags & NBD_FLAG_C_NO_ZEROES;

	for (count = 0; count < lim->max_options; count++) {
		struct nbd_opt_wire ow;
		struct nbd_opt opt;

		r = bd_read_full_by(t, &ow, sizeof(ow), lim->timeout_ms, h.deadline, lim->cancel_fd);
		if (r < 0)
			return r == -ECONNRESET ? -ECONNABORTED : r;
		if (nbd_opt_decode(&ow, &opt) < 0) {
			log_rated(LOGRATE_HANDSHAKE, t->peer, SMCR_LOG_INFO,
				  "nbd: %s: bad option magic: hanging up", t->peer);
			return -EPROTO;
		}
		if (opt.len > NBD_MAX_OPTION_LEN) {
			log_rated(LOGRATE_HANDSHAKE, t->peer, SMCR_LOG_INFO,
				  "nbd: %s: option %u with %u bytes of data: hanging up",
				  t->peer, opt.option, opt.len);
			return -EPROTO;
		}
		h.len = opt.len;
		h.data = malloc(opt.len ? opt.len : 1);
		if (!h.data)
			return -ENOMEM;
		r = bd_read_full_by(t, h.data, opt.len, lim->timeout_ms, h.deadline, lim->cancel_fd);
		if (r < 0) {
			free(h.data);
			return r == -ECONNRESET ? -ECONNABORTED : r;
		}
		if (ops->shutting_down(ctx) && opt.option != NBD_OPT_ABORT) {
			if (opt.option == NBD_OPT_EXPORT_NAME)
				r = -ESHUTDOWN;
			else
				r = hs_error(&h, opt.option, NBD_REP_ERR_SHUTDOWN,
					     "server is shutting down");
			free(h.data);
			if (r < 0)
				return r;
			continue;
		}
		if (tls_mode(&h) == NBD_TLS_REQUIRE && !out->tls &&
		    opt.option != NBD_OPT_STARTTLS && opt.option != NBD_OPT_ABORT) {
			if (opt.option == NBD_OPT_EXPORT_NAME) {
				log_rated(LOGRATE_HANDSHAKE, t->peer, SMCR_LOG_INFO,
					  "nbd: %s: NBD_OPT_EXPORT_NAME without TLS: hanging up",
					  t->peer);
				r = -EACCES;
			} else {
				r = hs_error(&h, opt.option, NBD_REP_ERR_TLS_REQD,
					     "TLS is required: send NBD_OPT_STARTTLS first");
			}
			free(h.data);
			h.data = NULL;
			if (r < 0)
				return r;
			continue;
		}
		switch (opt.option) {
		case NBD_OPT_EXPORT_NAME:
			r = do_export_name(&h);
			break;
		case NBD_OPT_ABORT:
			/* The client may already be gone: ignore errors. */
			hs_reply(&h, opt.option, NBD_REP_ACK, NULL, 0);
			r = -ECONNABORTED;
			break;
		case NBD_OPT_LIST:
			r = do_list(&h);
			break;
		case NBD_OPT_INFO:
		case NBD_OPT_GO:
			r = do_info_go(&h, opt.option);
			break;
		case NBD_OPT_STRUCTURED_REPLY:
			if (opt.len)
				r = hs_error(&h, opt.option, NBD_REP_ERR_INVALID,
					     "NBD_OPT_STRUCTURED_REPLY takes no data");
			else if (out->extended)
				r = hs_error(&h, opt.option, NBD_REP_ERR_EXT_HEADER_REQD,
					     "extended headers already negotiated");
			else if (out->structured)
				r = hs_error(&h, opt.option, NBD_REP_ERR_INVALID,
					     "structured replies already negotiated");
			else {
				out->structured = true;
				r = hs_reply(&h, opt.option, NBD_REP_ACK, NULL, 0);
			}
			break;
		case NBD_OPT_EXTENDED_HEADERS:
			/* After structured replies too: an upgrade. */
			if (opt.len)
				r = hs_error(&h, opt.option, NBD_REP_ERR_INVALID,
					     "NBD_OPT_EXTENDED_HEADERS takes no data");
			else if (out->extended)
				r = hs_error(&h, opt.option, NBD_REP_ERR_INVALID,
					     "extended headers already negotiated");
			else {
				out->extended = true;
				out->structured = true;
				r = hs_reply(&h, opt.option, NBD_REP_ACK, NULL, 0);
			}
			break;
		case NBD_OPT_LIST_META_CONTEXT:
		case NBD_OPT_SET_META_CONTEXT:
			r = do_meta_context(&h, opt.option);
			break;
		case NBD_OPT_STARTTLS:
			r = do_starttls(&h);
			break;
		default:
			r = hs_error(&h, opt.option, NBD_REP_ERR_UNSUP,
				     "option %u is not supported", opt.option);
			break;
		}
		free(h.data);
		h.data = NULL;
		if (r == 1)
			return 0;
		if (r < 0)
			return r;
	}
	log_rated(LOGRATE_HANDSHAKE, t->peer, SMCR_LOG_INFO,
		  "nbd: %s: more than %u options: hanging up", t->peer, lim->max_options);
	return -EPROTO;
}

/* --- transmission phase ------------------------------------------------ */

void nbd_tx_params_from_session(const struct nbd_server_session *s, struct nbd_tx_params *p)
{
	p->size = s->exp.size;
	p->tflags = s->tflags;
	p->structured = s->structured || s->extended;
	p->extended = s->extended;
	p->base_allocation = s->base_allocation;
	p->min_block = s->exp.min_block ? s->exp.min_block : 1;
	p->max_payload = s->exp.max_payload ? s->exp.max_payload : NBD_MAX_PAYLOAD;
}

static bool in_bounds(const struct nbd_tx_params *p, const struct nbd_request *r)
{
	return r->offset <= p->size && r->length <= p->size - r->offset;
}

static bool aligned(const struct nbd_tx_params *p, const struct nbd_request *r)
{
	uint64_t m = p->min_block - 1;

	return ((r->offset | r->length) & m) == 0;
}

uint32_t nbd_request_check(const struct nbd_tx_params *p, const struct nbd_request *r,
			   const char **msg)
{
	uint16_t allowed = NBD_CMD_FLAG_FUA;
	bool ro = p->tflags & NBD_FLAG_READ_ONLY;

	if (p->extended) {
		/* The payload flag: a WRITE's must, nothing else may (no
		 * command here has a payload form). */
		if (r->type == NBD_CMD_WRITE && !(r->flags & NBD_CMD_FLAG_PAYLOAD_LEN)) {
			*msg = "write without NBD_CMD_FLAG_PAYLOAD_LEN";
			return NBD_EINVAL;
		}
		if (r->type != NBD_CMD_WRITE && (r->flags & NBD_CMD_FLAG_PAYLOAD_LEN)) {
			*msg = "this command takes no payload";
			return NBD_EINVAL;
		}
		if (r->type == NBD_CMD_WRITE)
			allowed |= NBD_CMD_FLAG_PAYLOAD_LEN;
	}

	switch (r->type) {
	case NBD_CMD_READ:
		if (p->tflags & NBD_FLAG_SEND_DF)
			allowed |= NBD_CMD_FLAG_DF;
		break;
	case NBD_CMD_BLOCK_STATUS:
		allowed |= NBD_CMD_FLAG_REQ_ONE;
		break;
	case NBD_CMD_WRITE_ZEROES:
		allowed |= NBD_CMD_FLAG_NO_HOLE;
		if (p->tflags & NBD_FLAG_SEND_FAST_ZERO)
			allowed |= NBD_CMD_FLAG_FAST_ZERO;
		break;
	case NBD_CMD_WRITE:
	case NBD_CMD_DISC:
	case NBD_CMD_FLUSH:
	case NBD_CMD_TRIM:
	case NBD_CMD_CACHE:
		break;
	default:
		*msg = "unknown command";
		return NBD_EINVAL;
	}
	if (r->flags & ~allowed) {
		*msg = "command flags not valid for this command";
		return NBD_EINVAL;
	}

	switch (r->type) {
	case NBD_CMD_DISC:
		return 0;
	case NBD_CMD_FLUSH:
		if (r->offset || r->length) {
			*msg = "flush with nonzero offset or length";
			return NBD_EINVAL;
		}
		return 0;
	case NBD_CMD_READ:
		if (r->length > p->max_payload) {
			*msg = "read longer than the maximum payload";
			return p->structured ? NBD_EOVERFLOW : NBD_EINVAL;
		}
		if (!in_bounds(p, r)) {
			*msg = "read beyond the end of the export";
			return NBD_EINVAL;
		}
		break;
	case NBD_CMD_WRITE:
		if (ro) {
			*msg = "export is read-only";
			return NBD_EPERM;
		}
		if (r->length > p->max_payload) {
			*msg = "write longer than the maximum payload";
			return NBD_EINVAL;
		}
		if (!in_bounds(p, r)) {
			*msg = "write beyond the end of the export";
			return NBD_ENOSPC;
		}
		break;
	case NBD_CMD_TRIM:
		if (ro) {
			*msg = "export is read-only";
			return NBD_EPERM;
		}
		if (!in_bounds(p, r)) {
			*msg = "trim beyond the end of the export";
			return NBD_EINVAL;
		}
		break;
	case NBD_CMD_WRITE_ZEROES:
		if (ro) {
			*msg = "export is read-only";
			return NBD_EPERM;
		}
		if (!in_bounds(p, r)) {
			*msg = "write zeroes beyond the end of the export";
			return NBD_ENOSPC;
		}
		break;
	case NBD_CMD_CACHE:
		if (!in_bounds(p, r)) {
			*msg = "cache beyond the end of the export";
			return NBD_EINVAL;
		}
		break;
	case NBD_CMD_BLOCK_STATUS:
		if (!p->base_allocation) {
			*msg = "no metadata context was negotiated";
			return NBD_EINVAL;
		}
		if (r->length == 0) {
			*msg = "block status of zero bytes";
			return NBD_EINVAL;
		}
		if (!in_bounds(p, r)) {
			*msg = "block status beyond the end of the export";
			return NBD_EINVAL;
		}
		break;
	}
	if (!aligned(p, r)) {
		*msg = "offset or length not a multiple of the minimum block size";
		return NBD_EINVAL;
	}
	return 0;
}

size_t nbd_request_hdr_len(const struct nbd_tx_params *p)
{
	return p->extended ? sizeof(struct nbd_ext_request_wire) : sizeof(struct nbd_request_wire);
}

int nbd_request_parse(const struct nbd_tx_params *p, const void *buf, struct nbd_request *r)
{
	return nbd_request_decode_any(buf, p->extended, r);
}

uint64_t nbd_request_payload(const struct nbd_tx_params *p, const struct nbd_request *r)
{
	if (p->extended)
		return r->flags & NBD_CMD_FLAG_PAYLOAD_LEN ? r->length : 0;
	return r->type == NBD_CMD_WRITE ? r->length : 0;
}

bool nbd_request_hangup(const struct nbd_tx_params *p, const struct nbd_request *r,
			const char **msg)
{
	if (p->extended && (r->flags & NBD_CMD_FLAG_PAYLOAD_LEN) && r->length > p->max_payload) {
		*msg = "payload longer than the maximum payload";
		return true;
	}
	return false;
}

/* A chunk header (compact or extended, as negotiated) for r. */
static uint16_t put_chunk(const struct nbd_tx_params *p, uint8_t *buf, uint16_t flags,
			  uint16_t type, const struct nbd_request *r, uint32_t len)
{
	struct nbd_chunk c = { .flags = flags, .type = type, .cookie = r->cookie,
			       .offset = r->offset, .length = len };

	if (p->extended) {
		nbd_ext_chunk_encode(&c, (struct nbd_ext_chunk_wire *)buf);
		return sizeof(struct nbd_ext_chunk_wire);
	}
	nbd_chunk_encode(&c, (struct nbd_chunk_wire *)buf);
	return sizeof(struct nbd_chunk_wire);
}

/* A success without data: a simple reply, or with extended headers
 * (which allow no simple replies) a NONE chunk. */
static uint16_t put_simple(const struct nbd_tx_params *p, uint8_t *buf, uint32_t error,
			   const struct nbd_request *r)
{
	struct nbd_simple_reply s = { .error = error, .cookie = r->cookie };

	if (p->extended)
		return put_chunk(p, buf, NBD_REPLY_FLAG_DONE, NBD_REPLY_TYPE_NONE, r, 0);
	nbd_simple_reply_encode(&s, (struct nbd_simple_reply_wire *)buf);
	return sizeof(struct nbd_simple_reply_wire);
}

static uint16_t put_error(const struct nbd_tx_params *p, uint8_t *buf,
			  const struct nbd_request *r, uint32_t error, const char *msg,
			  bool has_offset, uint64_t offset)
{
	char m[NBD_REPLY_MSG_MAX + 1];

	snprintf(m, sizeof(m), "%s", msg ? msg : "");
	if (p->extended)
		return (uint16_t)nbd_ext_error_chunk_build(buf, NBD_REPLY_PART_MAX, r->cookie,
							   r->offset, NBD_REPLY_FLAG_DONE,
							   error, m, has_offset, offset);
	return (uint16_t)nbd_error_chunk_build(buf, NBD_REPLY_PART_MAX, r->cookie,
					       NBD_REPLY_FLAG_DONE, error, m,
					       has_offset, offset);
}

static bool error_offset_allowed(uint16_t type)
{
	return type == NBD_CMD_READ || type == NBD_CMD_WRITE || type == NBD_CMD_TRIM ||
	       type == NBD_CMD_CACHE || type == NBD_CMD_WRITE_ZEROES ||
	       type == NBD_CMD_BLOCK_STATUS;
}

void nbd_reply_build(const struct nbd_tx_params *p, const struct nbd_request *r,
		     uint32_t error, uint32_t data_len, uint64_t err_offset,
		     const char *msg, struct nbd_reply_buf *out)
{
	bool has_off = err_offset != NBD_NO_OFFSET && error_offset_allowed(r->type);

	out->head_len = 0;
	out->tail_len = 0;
	out->data_len = 0;

	if (!p->structured) {
		/* Simple replies: data only on success of a READ. */
		out->head_len = put_simple(p, out->head, error, r);
		if (!error && r->type == NBD_CMD_READ)
			out->data_len = (uint32_t)r->length;
		return;
	}
	if (r->type == NBD_CMD_BLOCK_STATUS && !error && p->extended) {
		struct nbd_chunk_block_status_ext_wire bw;

		out->head_len = put_chunk(p, out->head, NBD_REPLY_FLAG_DONE,
					  NBD_REPLY_TYPE_BLOCK_STATUS_EXT, r,
					  (uint32_t)sizeof(bw) + data_len);
		nbd_block_status_ext_encode(NBD_META_ID_BASE_ALLOCATION,
					    data_len / (uint32_t)sizeof(struct nbd_block_descriptor_ext_wire),
					    &bw);
		memcpy(out->head + out->head_len, &bw, sizeof(bw));
		out->head_len += sizeof(bw);
		out->data_len = data_len;
		return;
	}
	if (r->type == NBD_CMD_BLOCK_STATUS && !error) {
		struct nbd_chunk_block_status_wire idw;

		out->head_len = put_chunk(p, out->head, NBD_REPLY_FLAG_DONE,
					  NBD_REPLY_TYPE_BLOCK_STATUS, r,
					  (uint32_t)sizeof(idw) + data_len);
		nbd_block_status_id_encode(NBD_META_ID_BASE_ALLOCATION, &idw);
		memcpy(out->head + out->head_len, &idw, sizeof(idw));
		out->head_len += sizeof(idw);
		out->data_len = data_len;
		return;
	}
	if (r->type != NBD_CMD_READ) {
		if (!error)
			out->head_len = put_simple(p, out->head, 0, r);
		else
			out->head_len = put_error(p, out->head, r, error, msg, has_off,
						  err_offset);
		return;
	}
	/* Structured READ. */
	if (!error) {
		if (r->length == 0) {
			out->head_len = put_chunk(p, out->head, NBD_REPLY_FLAG_DONE,
						  NBD_REPLY_TYPE_NONE, r, 0);
			return;
		}
		data_len = (uint32_t)r->length;
	} else if (data_len > r->length) {
		data_len = (uint32_t)r->length;
	}
	if (data_len) {
		struct nbd_chunk_offset_data_wire ow;

		out->head_len = put_chunk(p, out->head, error ? 0 : NBD_REPLY_FLAG_DONE,
					  NBD_REPLY_TYPE_OFFSET_DATA, r,
					  (uint32_t)sizeof(ow) + data_len);
		nbd_offset_encode(r->offset, &ow);
		memcpy(out->head + out->head_len, &ow, sizeof(ow));
		out->head_len += sizeof(ow);
		out->data_len = data_len;
	}
	if (error) {
		uint8_t *dst = data_len ? out->tail : out->head;
		uint16_t n;

		if (data_len && !has_off) {
			/* Data before an error must say where the error is. */
			has_off = true;
			err_offset = r->offset + data_len;
		}
		n = put_error(p, dst, r, error, msg, has_off, err_offset);
		if (data_len)
			out->tail_len = n;
		else
			out->head_len = n;
	}
}

void nbd_reply_build_read_stream(const struct nbd_tx_params *p, const struct nbd_request *r,
				 struct nbd_reply_buf *out)
{
	struct nbd_chunk_offset_data_wire ow;

	nbd_reply_build(p, r, 0, r->length, NBD_NO_OFFSET, NULL, out);
	if (!p->structured || r->length == 0)
		return;
	out->head_len = put_chunk(p, out->head, 0, NBD_REPLY_TYPE_OFFSET_DATA, r,
				  (uint32_t)(sizeof(ow) + r->length));
	nbd_offset_encode(r->offset, &ow);
	memcpy(out->head + out->head_len, &ow, sizeof(ow));
	out->head_len += sizeof(ow);
	out->tail_len = put_chunk(p, out->tail, NBD_REPLY_FLAG_DONE, NBD_REPLY_TYPE_NONE,
				  r, 0);
}
