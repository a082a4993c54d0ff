/* SPDX-License-Identifier: BSD-3-Clause */
/* smcrbd client engine: sending.  Queued requests onto the transport,
 * many in one writev; NBD_CMD_DISC at close (nbd-conn-int.h). */
#include <config.h>

#include <errno.h>

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

int nbdc_tx(struct nbdc_conn *c, bool *progress)
{
	struct iovec iov[NBDC_TX_IOV];
	struct nbdc_req *r;
	int cnt, rounds;
	ssize_t n;

	if (!c->meta_alloc && c->e->block_status)
		tx_drop_block_status(c);

	for (rounds = 0; rounds < 16 && c->txq.head; rounds++) {
		cnt = 0;
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
		if (!cnt)
			break;
		n = bd_writev(c->t, iov, cnt);
		if (n == -EAGAIN)
			break;
		if (n < 0)
			return (int)n;
		if (n == 0)
			break;
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
