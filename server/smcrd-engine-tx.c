/* SPDX-License-Identifier: BSD-3-Clause */
/* smcrd engine: send.  The replies queued per connection in completion
 * order, sent by a reserved send buffer, send_file, or the connection's
 * tx_ops (writev, or a sendmsg on the ring), and freed once sent
 * (smcrd-engine-int.h). */
#include <config.h>

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "smcrd-engine-int.h"

/* Reserves the whole reply of READ q in the transport's send buffer, for
 * the file data to be read straight into it (SMC-R: registered memory the
 * RDMA writes go from).  Only behind other reserved replies: bytes given
 * to writev may not pass a reservation.  False: take the copy path. */
bool tx_reserve_read(struct conn *c, struct req *q)
{
	const struct req *p;

	if (!bd_has(c->t, BD_HAS_ZC_TX) || c->closing || !q->r.length)
		return false;
	for (p = c->tx_head; p; p = p->next)
		if (!p->zc_tx)
			return false;
	nbd_reply_build_read_stream(&c->tp, &q->r, &q->rb);
	if (bd_tx_reserve(c->t, q->rb.head_len + q->r.length + q->rb.tail_len,
				  q->tx_win) < 0)
		return false;
	conn_win_put(q->tx_win, 0, q->rb.head, q->rb.head_len);
	q->zc_tx = true;
	conn_tx_push(c, q);
	return true;
}

/* n bytes of the tx queue went out: frees the replies sent completely. */
void tx_retire(struct conn *c, size_t n)
{
	struct req *q;

	c->tx_off += n;
	c->tx_bytes += n;
	while ((q = c->tx_head) && !q->zc_tx) {
		size_t len = q->rb.head_len + q->rb.data_len + q->rb.tail_len;

		if (c->tx_off < len)
			break;
		c->tx_off -= len;
		c->tx_head = q->next;
		if (!c->tx_head)
			c->tx_tail = NULL;
		req_free(q);
	}
}

/* A send of total bytes returned n: the replies sent retired.  False:
 * stop (the rest waits for POLL_OUT, or the connection closes). */
static bool tx_sent(struct conn *c, ssize_t n, size_t total)
{
	if (n == -EAGAIN) {
		conn_arm_poll_out(c);
		return false;
	}
	if (n < 0) {
		char why[96];

		snprintf(why, sizeof(why), "send failed: %s", strerror((int)-n));
		conn_close(c, n == -EPIPE || n == -ECONNRESET ? "client went away" : why);
		return false;
	}
	tx_retire(c, (size_t)n);
	if ((size_t)n < total) {
		conn_arm_poll_out(c);
		return false;
	}
	return true;
}

/* Gathered replies (total bytes in iov[cnt]) by writev. */
static bool tx_send_writev(struct conn *c, const struct iovec *iov, int cnt, size_t total,
			   bool all)
{
	(void)all;
	return tx_sent(c, bd_writev(c->t, iov, cnt), total);
}

/* Ring socket: gathered replies by one sendmsg SQE, whose CQE retires them
 * and flushes again; all: they are all the connection owes. */
static bool tx_send_ring(struct conn *c, const struct iovec *iov, int cnt, size_t total,
			 bool all)
{
	conn_arm_send(c, iov, cnt, c->w->e->read_reply == RR_ZC && total >= SENDFILE_MIN);
	/* All the connection owes: its CQE is bookkeeping.  Small sends
	 * only: a large one waits for socket space, and with DEFER_TASKRUN
	 * its retry runs only once the wait ends. */
	if (all && total < LAZY_MAX)
		c->w->lazy++;
	return false;
}

const struct tx_ops tx_ops_writev = { .send = tx_send_writev };
const struct tx_ops tx_ops_ring = { .send = tx_send_ring, .sqe = true };

void tx_flush(struct conn *c)
{
	if (c->tx_busy)
		return;		/* its completion flushes again */
	while (c->tx_head && !c->closing) {
		struct iovec iov[IOV_BATCH];
		size_t skip = c->tx_off, total = 0, flen = 0;
		struct req *q;
		ssize_t n;
		int cnt = 0;
		unsigned nq = 0;
		bool file_next = false;
		off_t foff = 0;

		if ((q = c->tx_head)->zc_tx) {
			/* Reserved replies go in order, once filled. */
			int r;

			if (!q->tx_ready)
				break;
			r = bd_tx_commit(c->t, q->rb.head_len + q->r.length + q->rb.tail_len);
			if (r < 0) {
				char why[96];

				snprintf(why, sizeof(why), "send failed: %s", strerror(-r));
				conn_close(c, why);
				return;
			}
			c->tx_bytes += q->rb.head_len + q->r.length + q->rb.tail_len;
			c->tx_head = q->next;
			if (!c->tx_head)
				c->tx_tail = NULL;
			req_free(q);
			continue;
		}
		for (q = c->tx_head; q && !q->zc_tx && cnt <= IOV_BATCH - 3 && !file_next;
		     q = q->next, nq++) {
			struct iovec parts[3] = {
				{ q->rb.head, q->rb.head_len },
				{ q->buf, q->rb.data_len },
				{ q->rb.tail, q->rb.tail_len },
			};
			int i;

			for (i = 0; i < 3; i++) {
				if (!parts[i].iov_len)
					continue;
				if (skip >= parts[i].iov_len) {
					skip -= parts[i].iov_len;
					continue;
				}
				if (i == 1 && q->from_file) {
					/* File data: after what is gathered. */
					foff = (off_t)(q->r.offset + skip);
					flen = parts[i].iov_len - skip;
					file_next = true;
					break;
				}
				iov[cnt].iov_base = (uint8_t *)parts[i].iov_base + skip;
				iov[cnt].iov_len = parts[i].iov_len - skip;
				skip = 0;
				total += iov[cnt].iov_len;
				cnt++;
			}
		}
		if (file_next) {
			n = bd_send_file(c->t, iov, cnt, c->exp->fd, &foff, flen);
			if (n == 0)
				n = -EIO;	/* the file shrank under us */
			if (!tx_sent(c, n, total + flen))
				return;
		} else if (!c->tx_ops->send(c, iov, cnt, total, !q && nq == c->inflight)) {
			return;
		}
	}
	conn_maybe_finish(c);
}
