/* SPDX-License-Identifier: BSD-3-Clause */
/* smcrbd client engine: sending.  Queued requests onto the transport,
 * many in one writev; NBD_CMD_DISC at close (nbd-conn-int.h). */
#include <config.h>

#include <errno.h>
#include <string.h>

#include "nbd-conn-int.h"
#include "transport.h"

/* A connection that came back without base:allocation (the server
 * changed) answers BLOCK_STATUS itself: -ENOTSUP, the caller says data. */
static void tx_drop_block_status(struct nbdc_conn *c)
{
	struct nbdc_req *r, **pp;
	struct rq gone = { 0 };

	for (pp = &c->txq.head; (r = *pp);) {
		if (r->type == NBD_CMD_BLOCK_STATUS && r->slot < 0) {
			*pp = r->next;
			c->txq.n--;
			rq_push(&gone, r);
			continue;
		}
		pp = &r->next;
	}
	c->txq.tail = NULL;
	for (r = c->txq.head; r; r = r->next)
		c->txq.tail = r;
	while ((r = rq_pop(&gone)))
		nbdc_req_complete(c, r, -ENOTSUP);
}

/* The request at the head of txq leaves before any of it went out: its
 * slot is free again and done gets result. */
static void tx_fail_head(struct nbdc_conn *c, struct nbdc_req *r, int result)
{
	rq_pop(&c->txq);
	nbdc_slot_release(c, r);
	nbdc_req_complete(c, r, result);
}

/* The pieces of iov[0..1] from byte off on, in out: how many. */
static int iov_from(const struct iovec iov[2], size_t off, struct iovec out[2])
{
	int i, n = 0;

	for (i = 0; i < 2; i++) {
		size_t skip = off < iov[i].iov_len ? off : iov[i].iov_len;

		off -= skip;
		if (iov[i].iov_len > skip)
			out[n++] = (struct iovec){ (uint8_t *)iov[i].iov_base + skip,
						   iov[i].iov_len - skip };
	}
	return n;
}

/* A WRITE with a source, before any of it went out (header encoded): its
 * header and payload straight into the transport's send buffer where it
 * lends one (SMC-R) and the WRITE takes half of it at most, else the
 * payload into r->buf for writev.  1: sent
 * whole; 0: no room yet; 2: in r->buf now; -errno: the connection's
 * error, or the source's in *src_err (nothing of it was sent). */
static int tx_sourced(struct nbdc_conn *c, struct nbdc_req *r, int *src_err)
{
	size_t total = REQ_HDR + r->len, first;
	struct iovec iov[2], pay[2];
	int ret;

	*src_err = 0;
	if (total <= c->zc_tx_max && bd_has(c->t, BD_HAS_ZC_TX | BD_HAS_TX_UNRESERVE)) {
		ret = bd_tx_reserve(c->t, total, iov);
		if (ret == -EAGAIN)
			return 0;
		if (ret == 0) {
			first = iov[0].iov_len < REQ_HDR ? iov[0].iov_len : REQ_HDR;
			memcpy(iov[0].iov_base, &r->w, first);
			memcpy(iov[1].iov_base, (uint8_t *)&r->w + first, REQ_HDR - first);
			*src_err = r->source(r->arg, r->buf, pay, iov_from(iov, REQ_HDR, pay));
			if (*src_err) {
				ret = bd_tx_unreserve(c->t, total);
				return ret ? ret : *src_err;
			}
			ret = bd_tx_commit(c->t, total);
			if (ret)
				return ret;
			AADD(&c->st_in_place, 1);
			return 1;
		}
		/* the transport cannot lend it after all: buf instead */
		if (ret != -EMSGSIZE && ret != -EOPNOTSUPP)
			return ret;
	}
	pay[0] = (struct iovec){ r->buf, r->len };
	*src_err = r->source(r->arg, r->buf, pay, 1);
	if (*src_err)
		return *src_err;
	r->filled = true;
	return 2;
}

int nbdc_tx(struct nbdc_conn *c, bool *progress)
{
	struct iovec iov[NBDC_TX_IOV];
	struct nbdc_req *r;
	int cnt, rounds, src_err, ret;
	bool whole, failed, stop = false;
	ssize_t n;

	if (!c->meta_alloc && c->e->block_status)
		tx_drop_block_status(c);

	for (rounds = 0; rounds < 16 && c->txq.head && !stop; rounds++) {
		cnt = 0;
		whole = failed = false;
		for (r = c->txq.head; r && cnt <= NBDC_TX_IOV - 2; r = r->next) {
			size_t pay;

			if (r->slot < 0) {
				struct nbd_request h = {
					.flags = r->flags, .type = r->type,
					.offset = r->offset, .length = r->len,
				};

				if (!c->nfree)
					break;
				r->slot = c->free_slots[--c->nfree];
				c->slots[r->slot] = r;
				c->inflight++;
				c->gen++;
				r->cookie = (c->gen << 16) | (uint64_t)r->slot;
				h.cookie = r->cookie;
				nbd_request_encode(&h, &r->w);
			}
			if (r->source && !r->sent && !r->filled) {
				if (cnt)
					break;	/* what is gathered goes first */
				ret = tx_sourced(c, r, &src_err);
				if (ret == 1) {
					whole = true;
					break;
				}
				if (ret == 0) {
					stop = true;
					break;
				}
				if (ret < 0 && !src_err)
					return ret;
				if (ret < 0) {
					tx_fail_head(c, r, src_err);
					*progress = failed = true;
					break;
				}
			}
			if (r->sent < REQ_HDR) {
				iov[cnt].iov_base = (uint8_t *)&r->w + r->sent;
				iov[cnt].iov_len = REQ_HDR - r->sent;
				cnt++;
			}
			if (r->type == NBD_CMD_WRITE && r->len) {
				pay = r->sent > REQ_HDR ? r->sent - REQ_HDR : 0;
				iov[cnt].iov_base = (uint8_t *)r->buf + pay;
				iov[cnt].iov_len = r->len - pay;
				cnt++;
			}
		}
		if (whole) {
			n = (ssize_t)(REQ_HDR + c->txq.head->len);
			goto sent;
		}
		if (!cnt && failed)
			continue;
		if (!cnt)
			break;
		n = bd_writev(c->t, iov, cnt);
		if (n == -EAGAIN)
			break;
		if (n < 0)
			return (int)n;
		if (n == 0)
			break;
sent:
		*progress = true;
		c->last_progress_ms = now_ms();
		while (n > 0 && (r = c->txq.head)) {
			size_t total = REQ_HDR + (r->type == NBD_CMD_WRITE ? r->len : 0);
			size_t take = total - r->sent;

			if ((size_t)n < take)
				take = (size_t)n;
			r->sent += take;
			n -= (ssize_t)take;
			if (r->sent < total)
				break;
			rq_pop(&c->txq);
			AADD(&c->st_sent, 1);
			if (c->e->sent)
				c->e->sent(c->e->turn_arg, r->arg, c->idx);
			if (r->was_sent) {
				r->was_sent = false;
				AADD(&c->st_resent, 1);
			}
		}
	}
	return 0;
}

void nbdc_send_disc(struct nbdc_conn *c)
{
	struct nbd_request h = { .type = NBD_CMD_DISC, .cookie = 0xffff };
	struct nbd_request_wire w;

	nbd_request_encode(&h, &w);
	if (bd_write_full(c->t, &w, sizeof(w), 1000, -1) == 0)
		bd_shutdown(c->t);
}
