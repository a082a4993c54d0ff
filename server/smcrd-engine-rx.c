/* SPDX-License-Identifier: BSD-3-Clause */
/* smcrd engine: receive.  Request headers and WRITE payloads read from
 * the transport in one of three ways, a connection's rx_ops: in place
 * (rx_peek), by recv on the ring, or copied by readv (smcrd-engine-int.h);
 * a header decoded, checked, admitted and started (rx_parse_hdr). */
#include <config.h>

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <sys/syscall.h>

#include "smcrd-engine-int.h"
#include "memcheck.h"

#ifndef SYS_CACHESTAT
#define SYS_CACHESTAT 451		/* Linux 6.5, all architectures */
#endif

enum { RX_AGAIN, RX_STOP, RX_RETRY, RX_ZC };

static void rx_eof(struct conn *c)
{
	c->rx_stop = true;
	if (c->rx_req) {
		req_free(c->rx_req);
		c->rx_req = NULL;
	}
	if (c->skip_req) {
		req_free(c->skip_req);
		c->skip_req = NULL;
	}
	log_dbg("client %s: end of stream", c->t->peer);
	conn_maybe_finish(c);
}

/* buf holds the current chunk of q's payload: the last one starts the
 * request; an earlier one is written while receiving waits. */
static void chunk_received(struct conn *c, struct req *q)
{
	c->rx_req = NULL;
	q->done = 0;
	if (q->part + req_chunk_len(q) == q->r.length) {
		req_start(q);
		return;
	}
	c->rx_chunk = q;
	q->phase = PH_WRITE;
	req_submit(q);
}

/* Reads into up to two places; handles EOF and errors. */
static ssize_t rx_read(struct conn *c, struct iovec *iov, int cnt)
{
	size_t want = 0;
	ssize_t n;
	int i;

	for (i = 0; i < cnt; i++)
		want += iov[i].iov_len;
	n = bd_readv(c->t, iov, cnt);
	if (n == -EAGAIN) {
		c->rx_short = true;
		return 0;
	}
	if (n == 0) {
		rx_eof(c);
		return -1;
	}
	if (n < 0) {
		char why[96];

		snprintf(why, sizeof(why), "receive failed: %s", strerror((int)-n));
		conn_close(c, n == -ECONNRESET ? "connection reset by client" : why);
		return -1;
	}
	if ((size_t)n < want)
		c->rx_short = true;
	c->last_rx_ms = c->drain ? now_ms() : 0;
	c->rx_progress_ms = now_ms();
	return n;
}

/* Large READs of cached data on a transport that can send file data
 * directly: no buffer, no copy.  Uncached data goes through io_uring (a
 * sendfile would block this thread on the disk). */
static bool read_by_send_file(struct conn *c, const struct nbd_request *r)
{
	struct {
		uint64_t off, len;
	} range;
	struct {
		uint64_t nr_cache, nr_dirty, nr_writeback, nr_evicted, nr_recently_evicted;
	} cs;
	struct engine *e = c->w->e;
	uint64_t first, last;

	if (r->length < SENDFILE_MIN || !bd_has(c->t, BD_HAS_SEND_FILE) || c->exp->dfd >= 0 ||
	    c->exp->rbd ||
	    e->read_reply != RR_SENDFILE ||
	    __atomic_load_n(&e->no_cachestat, __ATOMIC_RELAXED))
		return false;
	range.off = r->offset;
	range.len = r->length;
	if (syscall(SYS_CACHESTAT, c->exp->fd, &range, &cs, 0) < 0) {
		if (errno == ENOSYS || errno == EPERM)
			__atomic_store_n(&e->no_cachestat, true, __ATOMIC_RELAXED);
		return false;
	}
	first = r->offset / 4096;
	last = (r->offset + r->length - 1) / 4096;
	return cs.nr_cache >= last - first + 1;
}

/* A request header, decoded and checked. */
struct rx_hdr {
	struct nbd_request r;
	uint64_t payload;		/* bytes that follow it on the wire */
	uint32_t err;			/* NBD error it is answered with, or 0 */
	const char *msg;		/* why */
};

/* Header bytes to the host struct; -EBADMSG (bad magic): the connection
 * is dropped. */
static int rx_decode(struct conn *c, const void *wire, struct nbd_request *r)
{
	if (nbd_request_parse(&c->tp, wire, r) == 0)
		return 0;
	log_rated(LOGRATE_PROTOCOL, c->t->peer, SMCR_LOG_WARN,
		  "client %s: bad request magic: dropping the connection", c->t->peer);
	conn_close(c, NULL);
	return -EBADMSG;
}

/* Validates h->r: RX_AGAIN, with h->err set for a request answered with an
 * error (its payload dropped first), or RX_STOP: DISC, or a request whose
 * payload cannot be skipped (the connection dropped, the reason logged). */
static int rx_check(struct conn *c, struct rx_hdr *h)
{
	const struct nbd_request *r = &h->r;

	h->msg = NULL;
	if (nbd_request_hangup(&c->tp, r, &h->msg)) {
		log_rated(LOGRATE_PROTOCOL, c->t->peer, SMCR_LOG_WARN,
			  "client %s: %s with a payload of %llu bytes: dropping the connection",
			  c->t->peer, nbd_cmd_name(r->type), (unsigned long long)r->length);
		conn_close(c, NULL);
		return RX_STOP;
	}
	h->payload = nbd_request_payload(&c->tp, r);
	h->err = nbd_request_check(&c->tp, r, &h->msg);
	if (r->type == NBD_CMD_DISC) {
		c->rx_stop = true;
		log_dbg("client %s: NBD_CMD_DISC", c->t->peer);
		conn_maybe_finish(c);
		return RX_STOP;
	}
	if (c->drain && !h->err) {
		h->err = NBD_ESHUTDOWN;
		h->msg = "server is shutting down";
	}
	return RX_AGAIN;
}

/* Admits a checked request within the worker's limits: *out, with the way
 * its data goes (sent from the file, read into a reserved reply, written
 * from the transport's memory in place, or a pool buffer: req_admit).
 * inplace: the bytes after the header the transport holds in place
 * (rx_peek; 0 when copying).  RX_AGAIN, RX_RETRY (a limit reached: the
 * header is read again once the connection is woken) or RX_STOP. */
static int rx_admit(struct conn *c, struct rx_hdr *h, uint64_t inplace, struct req **out)
{
	const struct nbd_request *r = &h->r;
	bool zc_ready = r->length && inplace >= r->length &&
			c->pin_cnt < c->w->e->p.queue_depth;
	struct req *q;

	if (c->w->io_inflight >= IO_LIMIT) {
		conn_mem_wait(c, "I/O");
		return RX_RETRY;
	}
	q = req_new(c);
	if (!q) {
		conn_close(c, "out of memory");
		return RX_STOP;
	}
	q->r = *r;
	*out = q;
	if (h->err)
		return RX_AGAIN;
	if (r->type == NBD_CMD_READ && read_by_send_file(c, r)) {
		q->from_file = true;
		__atomic_add_fetch(&c->w->stats.file_reads, 1, __ATOMIC_RELAXED);
	} else if (r->type == NBD_CMD_READ && tx_reserve_read(c, q)) {
		__atomic_add_fetch(&c->w->stats.zc_reads, 1, __ATOMIC_RELAXED);
	} else if (r->type == NBD_CMD_WRITE && zc_ready) {
		q->zc = true;
	} else if ((r->length && (r->type == NBD_CMD_READ || r->type == NBD_CMD_WRITE)) ||
		   r->type == NBD_CMD_BLOCK_STATUS) {
		int a = req_admit(q);

		if (a == -EAGAIN)
			return RX_RETRY;
		if (a < 0) {
			h->err = NBD_ENOMEM;
			h->msg = "out of memory";
		}
	}
	return RX_AGAIN;
}

/* Starts admitted q: an error answered (once its payload is dropped), a
 * WRITE's payload awaited (rx_req), or the request started.  RX_AGAIN, or
 * RX_ZC: *zq is a WRITE to be started from the transport's memory. */
static int rx_start(struct conn *c, const struct rx_hdr *h, struct req *q, struct req **zq)
{
	const struct nbd_request *r = &h->r;

	if (h->err) {
		log_dbg("client %s: %s off=%llu len=%llu flags=0x%x: error %u: %s",
			c->t->peer, nbd_cmd_name(r->type), (unsigned long long)r->offset,
			(unsigned long long)r->length, r->flags, h->err, h->msg);
		q->msg = h->msg;
		if (h->payload) {
			c->skip = h->payload;
			c->skip_req = q;
			q->error = h->err;
			return RX_AGAIN;
		}
		req_reply(q, h->err, 0);
		return RX_AGAIN;
	}
	if (q->zc) {
		__atomic_add_fetch(&c->w->stats.zc_writes, 1, __ATOMIC_RELAXED);
		*zq = q;
		return RX_ZC;
	}
	if (r->type == NBD_CMD_WRITE && r->length) {
		c->rx_req = q;
		return RX_AGAIN;
	}
	req_start(q);
	return RX_AGAIN;
}

/* One request header: decoded, checked, admitted, started.  inplace: see
 * rx_admit.  Returns RX_AGAIN (header used, go on), RX_STOP (header used,
 * stop), RX_RETRY (header not used: try again later) or RX_ZC (header
 * used, *zq is a WRITE to be started from the transport's memory). */
static int rx_parse_hdr(struct conn *c, const void *wire, uint64_t inplace, struct req **zq)
{
	struct rx_hdr h;
	struct req *q;
	int r;

	if (rx_decode(c, wire, &h.r) < 0)
		return RX_STOP;
	r = rx_check(c, &h);
	if (r == RX_AGAIN)
		r = rx_admit(c, &h, inplace, &q);
	if (r == RX_AGAIN)
		r = rx_start(c, &h, q, zq);
	return r;
}

static int rx_parse(struct conn *c)
{
	int r = rx_parse_hdr(c, c->rbuf + c->rstart, 0, NULL);

	if (r != RX_RETRY)
		c->rstart += (uint32_t)nbd_request_hdr_len(&c->tp);
	return r == RX_AGAIN ? RX_AGAIN : RX_STOP;
}

/* Receiving in place (see struct conn).  One peek, then as many requests
 * as the window holds, then the parsed bytes go back; again while that
 * made progress. */
static void rx_pump_zc(struct conn *c)
{
	unsigned qd = c->w->e->p.queue_depth;

	while (!c->closing && !c->rx_stop && !c->mem_blocked && !c->rx_chunk) {
		struct iovec win[2];
		uint64_t start = c->rx_pos, base = c->rx_cons, avail, off;
		ssize_t n = bd_rx_peek(c->t, win);

		if (n == -EAGAIN)
			return;
		if (n < 0) {
			char why[96];

			snprintf(why, sizeof(why), "receive failed: %s", strerror((int)-n));
			conn_close(c, n == -ECONNRESET ? "connection reset by client" : why);
			return;
		}
		if (n == 0) {
			rx_eof(c);
			return;
		}
		c->last_rx_ms = c->drain ? now_ms() : 0;
		c->rx_progress_ms = now_ms();
		while (!c->closing && !c->rx_stop && !c->mem_blocked && !c->rx_chunk) {
			/* win[] starts where consumption stood at the peek
			 * (a completed write may consume meanwhile). */
			off = c->rx_pos - base;
			avail = (uint64_t)n - off;
			if (c->rx_req) {
				struct req *q = c->rx_req;
				uint64_t need = req_chunk_len(q) - q->done;
				uint64_t take = avail < need ? avail : need;

				conn_win_copy(win, off, (uint8_t *)q->buf + q->done, take);
				q->done += take;
				c->rx_pos += take;
				if (take < need)
					break;
				chunk_received(c, q);
				continue;
			}
			if (c->skip) {
				uint64_t take = avail < c->skip ? avail : c->skip;

				c->rx_pos += take;
				c->skip -= take;
				if (c->skip)
					break;
				if (c->skip_req) {
					struct req *q = c->skip_req;

					c->skip_req = NULL;
					req_reply(q, q->error, 0);
				}
				continue;
			}
			if (avail < nbd_request_hdr_len(&c->tp))
				break;
			if (c->inflight >= qd) {
				c->rx_blocked = true;
				break;
			}
			{
				uint8_t w[sizeof(struct nbd_ext_request_wire)];
				size_t hlen = nbd_request_hdr_len(&c->tp);
				struct req *q = NULL;
				int r;

				conn_win_copy(win, off, w, hlen);
				r = rx_parse_hdr(c, w, avail - hlen, &q);
				if (r == RX_RETRY)
					break;
				c->rx_pos += hlen;
				if (r == RX_STOP)
					break;
				if (r == RX_ZC) {
					unsigned slot = (c->pin_head + c->pin_cnt) % qd;

					conn_win_slice(win, off + hlen, q->r.length, q->zc_iov);
					c->pins[slot].start = c->rx_pos;
					c->pins[slot].done = false;
					c->pin_cnt++;
					q->pin = slot;
					c->rx_pos += q->r.length;
					req_start(q);
				}
			}
		}
		conn_zc_release(c);
		if (c->rx_pos == start)
			return;		/* nothing new: wait for the poll */
	}
}

/* Nothing more to read now; need bytes must come before anything can be
 * done with them.  For the rest of a large WRITE payload the transport
 * wakes us every 256 KiB instead of once per segment (64 KiB over
 * loopback); not only at its end, so that copying what came overlaps the
 * arrival of the rest. */
static void rx_wait(struct conn *c, uint64_t need)
{
	if (!bd_has(c->t, BD_HAS_RX_LOWAT))
		return;
	if (need < LOWAT_MIN)
		need = 1;
	else if (need > LOWAT_MAX)
		need = LOWAT_MAX;
	bd_rx_lowat(c->t, (size_t)need);
}

/* Ring socket: one recv of up to len bytes into p (rx_req's buffer or
 * rbuf); rx_done takes its result. */
static void rx_arm(struct conn *c, void *p, size_t len, bool into_req)
{
	struct io_uring_sqe *sqe = conn_get_sqe(c->w);

	io_uring_prep_recv(sqe, c->pfd, p, len, 0);
	/* A large payload: wait for the low-water mark (rx_wait) instead of
	 * taking the first segments now. */
	if (into_req && len >= LOWAT_MIN)
		sqe->ioprio |= IORING_RECVSEND_POLL_FIRST;
	io_uring_sqe_set_data64(sqe, ud(c, TAG_RECV));
	c->rx_armed = true;
	c->rx_into_req = into_req;
	c->io_pending++;
}

void rx_done(struct conn *c, int res)
{
	if (res == -EINTR || res == -EAGAIN) {
		conn_kick(c);
		return;
	}
	if (c->rx_stop)
		return;		/* after DISC: dropped */
	if (res == 0) {
		rx_eof(c);
		return;
	}
	if (res < 0) {
		char why[96];

		snprintf(why, sizeof(why), "receive failed: %s", strerror(-res));
		conn_close(c, res == -ECONNRESET ? "connection reset by client" : why);
		return;
	}
	if (c->rx_into_req) {
		mem_filled((uint8_t *)c->rx_req->buf + c->rx_req->done, (size_t)res);
		c->rx_req->done += (uint64_t)res;
	} else {
		mem_filled(c->rbuf + c->rend, (size_t)res);
		c->rend += (uint32_t)res;
	}
	c->last_rx_ms = c->drain ? now_ms() : 0;
	c->rx_progress_ms = now_ms();
	conn_kick(c);
}

/* What a payload step did (rx_ops.payload). */
enum { RX_PL_WAIT, RX_PL_MORE, RX_PL_DONE };

/* Ring socket: the rest of q's payload (rbuf is empty) by a recv straight
 * into its buffer; its CQE (rx_done) wakes the pump again. */
static int rx_payload_ring(struct conn *c, struct req *q, uint64_t need)
{
	if (!c->rx_armed) {
		rx_wait(c, need);
		rx_arm(c, (uint8_t *)q->buf + q->done, need, true);
	}
	return RX_PL_WAIT;
}

/* Copying: the rest of q's payload (rbuf is empty) and what follows, in
 * one readv. */
static int rx_payload_copy(struct conn *c, struct req *q, uint64_t need)
{
	struct iovec iov[2];
	ssize_t n;

	if (c->rx_short) {
		rx_wait(c, need);
		return RX_PL_WAIT;
	}
	c->rstart = c->rend = 0;
	iov[0].iov_base = (uint8_t *)q->buf + q->done;
	iov[0].iov_len = need;
	iov[1].iov_base = c->rbuf;
	iov[1].iov_len = RBUF_SIZE;
	n = rx_read(c, iov, 2);
	if (n <= 0)
		return RX_PL_WAIT;
	if ((uint64_t)n <= need) {
		q->done += (uint64_t)n;
		return RX_PL_MORE;
	}
	q->done += need;
	c->rend = (uint32_t)((uint64_t)n - need);
	return RX_PL_DONE;
}

/* Room at rbuf's end for what comes next. */
static void rx_compact(struct conn *c)
{
	if (c->rstart == c->rend) {
		c->rstart = c->rend = 0;
	} else if (c->rstart > RBUF_SIZE / 2) {
		memmove(c->rbuf, c->rbuf + c->rstart, c->rend - c->rstart);
		c->rend -= c->rstart;
		c->rstart = 0;
	}
}

/* Ring socket: more bytes into rbuf by a recv; false: wait for its CQE. */
static bool rx_fill_ring(struct conn *c)
{
	if (c->rx_armed)
		return false;
	rx_compact(c);
	rx_wait(c, 1);
	rx_arm(c, c->rbuf + c->rend, RBUF_SIZE - c->rend, false);
	return false;
}

/* Copying: more bytes into rbuf by a readv; false: wait for the poll. */
static bool rx_fill_copy(struct conn *c)
{
	struct iovec iov;
	ssize_t n;

	if (c->rx_short) {
		rx_wait(c, 1);
		return false;
	}
	rx_compact(c);
	iov.iov_base = c->rbuf + c->rend;
	iov.iov_len = RBUF_SIZE - c->rend;
	n = rx_read(c, &iov, 1);
	if (n <= 0)
		return false;
	c->rend += (uint32_t)n;
	return true;
}

/* Receiving through rbuf: headers parsed from it, payloads copied out of
 * it, and what rbuf lacks received by the connection's rx_ops (its
 * payload and fill steps). */
static void rx_pump_buf(struct conn *c)
{
	const struct rx_ops *ops = c->rx_ops;
	unsigned qd = c->w->e->p.queue_depth;

	while (!c->closing && !c->rx_stop && !c->mem_blocked && !c->rx_chunk) {
		uint32_t avail = c->rend - c->rstart;

		if (c->rx_req) {
			struct req *q = c->rx_req;
			uint64_t need = req_chunk_len(q) - q->done;
			uint32_t take = avail < need ? avail : (uint32_t)need;

			memcpy((uint8_t *)q->buf + q->done, c->rbuf + c->rstart, take);
			c->rstart += take;
			q->done += take;
			need -= take;
			if (need) {
				int r = ops->payload(c, q, need);

				if (r == RX_PL_WAIT)
					return;
				if (r == RX_PL_MORE)
					continue;
			}
			chunk_received(c, q);
			continue;
		}
		if (c->skip) {
			uint32_t take = avail < c->skip ? avail : (uint32_t)c->skip;

			c->rstart += take;
			c->skip -= take;
			if (!c->skip) {
				struct req *q = c->skip_req;

				c->skip_req = NULL;
				if (q)
					req_reply(q, q->error, 0);
				continue;
			}
		} else if (avail >= nbd_request_hdr_len(&c->tp)) {
			if (c->inflight >= qd) {
				c->rx_blocked = true;
				return;
			}
			if (rx_parse(c) == RX_STOP)
				return;
			continue;
		}
		/* Need more bytes. */
		if (!ops->fill(c))
			return;
	}
}

/* In place (transports with rx_peek: SMC-R). */
const struct rx_ops rx_ops_inplace = { .pump = rx_pump_zc, .poll = true };
/* Plain TCP on the worker's ring: recv SQEs, no poll. */
const struct rx_ops rx_ops_ring = {
	.pump = rx_pump_buf, .payload = rx_payload_ring, .fill = rx_fill_ring,
};
/* The other transports: a multishot poll, then readv. */
const struct rx_ops rx_ops_copy = {
	.pump = rx_pump_buf, .payload = rx_payload_copy, .fill = rx_fill_copy, .poll = true,
};
