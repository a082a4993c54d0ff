/* SPDX-License-Identifier: BSD-3-Clause */
/* smcrd engine: a request's life, top to bottom.  Made for a header
 * (req_new) and its buffer admitted within the worker's memory limits
 * (req_admit); started (req_start) as file (io_uring) or RBD operations
 * (req_submit), completed phase by phase (req_complete); answered
 * (req_reply: the reply queued for tx) and freed once sent or dropped
 * (req_free), its buffer back in the pool (smcrd-engine-int.h). */
#include <config.h>

#include <errno.h>
#include <fcntl.h>
#include <linux/falloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "smcrd-engine-int.h"
#include "memcheck.h"
#include "smcrd-extents.h"
#include "smcrd-rbd.h"

/* --- birth: a request for a header, its buffer admitted ------------------- */

/* The bytes of a copied WRITE payload that buf holds at a time: from part
 * on, one chunk or the rest (a payload in place: all of it). */
uint64_t req_chunk_len(const struct req *q)
{
	uint64_t left = q->r.length - q->part;

	if (q->zc)
		return q->r.length;
	return left < WRITE_CHUNK ? left : WRITE_CHUNK;
}

/* A request of c, counted in flight until req_free; NULL: no memory. */
struct req *req_new(struct conn *c)
{
	struct worker *w = c->w;
	struct req *q = w->req_free;

	if (q)
		w->req_free = q->next;
	else if (!(q = malloc(sizeof(*q))))
		return NULL;
	q->c = c;
	q->next = NULL;
	q->buf = NULL;
	q->buf_slot = -1;
	q->from_file = false;
	q->zc_tx = false;
	q->tx_ready = false;
	q->zc = false;
	q->linked = false;
	q->phase = PH_NONE;
	q->part = 0;
	q->done = 0;
	q->error = 0;
	q->err_off = NBD_NO_OFFSET;
	q->msg = NULL;
	q->t0_us = mono_us();
	c->inflight++;
	c->nreq++;
	__atomic_add_fetch(&w->stats.requests, 1, __ATOMIC_RELAXED);
	return q;
}

/* Once per 10 s per address and worker; what: the share reached
 * ("connection": the connection's of its address's, "address": the
 * address's of the worker's). */
static void share_log(struct conn *c, const char *what)
{
	uint64_t now = now_ms();

	if (c->as->logged_ms && now - c->as->logged_ms < 10000)
		return;
	c->as->logged_ms = now;
	log_info("client %s: %s holds %llu bytes of worker %u's request memory in %u "
		 "connections, %llu of it this one: the %s's share reached "
		 "(max-memory-per-address; %u addresses hold some): it waits", c->t->peer,
		 c->akey, (unsigned long long)c->as->used, c->w->idx, c->as->holders,
		 (unsigned long long)c->mem_used, what, c->w->addr_holders);
}

/* q never started: gone as if its header had not been read (it is read
 * again when the connection is woken, and counted then). */
static void req_drop(struct req *q)
{
	struct conn *c = q->c;

	req_free(q);
	c->nreq--;
	__atomic_sub_fetch(&c->w->stats.requests, 1, __ATOMIC_RELAXED);
}

/* The buffer for q's data (a WRITE payload or a chunk of it, READ data,
 * BLOCK_STATUS descriptors) from the worker's pool, charged to the
 * connection and its address.  Shares (share_allows()): a connection of
 * its address's memory on this worker, the address of the worker's.  A
 * connection that does not read its replies stalls only itself once it
 * holds its share, and one address however many connections it opens;
 * what they leave serves the next connection and the next address.
 * Their buffers come back on this worker (req_free), which then wakes
 * them.  Returns 0; -EAGAIN: over a share or the memory limit, q dropped
 * and the connection waiting; -ENOMEM: no buffer, q kept to be answered
 * with the error. */
int req_admit(struct req *q)
{
	struct conn *c = q->c;
	struct worker *wk = c->w;
	const struct nbd_request *r = &q->r;
	uint64_t need = r->type == NBD_CMD_BLOCK_STATUS ? BS_BUF_SIZE :
			r->type == NBD_CMD_WRITE && r->length > WRITE_CHUNK ? WRITE_CHUNK :
			r->length;
	uint64_t size = (uint64_t)1 << (pool_class(need) + POOL_MIN_SHIFT);
	uint64_t apool = wk->addr_limit ? wk->addr_limit : wk->mem_limit;
	bool by_conn = !share_allows(apool, c->as->used, c->mem_used, c->as->holders, 0, size);
	bool by_addr = !by_conn && wk->addr_limit &&
		       !share_allows(wk->mem_limit, wk->mem_used, c->as->used,
				     wk->addr_holders, wk->addr_limit, size);
	bool blocked;

	if (by_conn && c->mem_used) {
		/* Woken when one of its own buffers comes back. */
		req_drop(q);
		c->rx_blocked = true;
		share_log(c, "connection");
		return -EAGAIN;
	}
	blocked = by_conn || by_addr;
	q->buf = blocked ? NULL : pool_get(wk, need, &q->buf_class, &q->buf_slot, &blocked);
	if (!q->buf) {
		if (!blocked)
			return -ENOMEM;
		req_drop(q);
		if (by_conn || by_addr)
			share_log(c, by_conn ? "connection" : "address");
		conn_mem_wait(c, by_conn || by_addr ? "per-address memory" : "memory");
		return -EAGAIN;
	}
	if (!c->mem_used)
		c->as->holders++;
	if (!c->as->used)
		wk->addr_holders++;
	c->mem_used += size;
	c->as->used += size;
	return 0;
}

/* --- start: the request's first operation --------------------------------- */

static int io_fd(const struct export *e, uint64_t off, uint64_t len, const void *buf)
{
	uint64_t m;

	if (e->dfd < 0)
		return e->fd;
	m = e->dio_align - 1;
	if (((off | len | (uint64_t)(uintptr_t)buf) & m) == 0)
		return e->dfd;
	return e->fd;
}

static void prep(struct req *q, struct io_uring_sqe *sqe)
{
	io_uring_sqe_set_data64(sqe, ud(q, TAG_REQ));
	q->c->io_pending++;
	q->c->w->io_inflight++;
}

/* A block device takes fallocate only on whole sectors (EINVAL else). */
static bool sector_unaligned(const struct req *q)
{
	uint32_t s = q->c->exp->sector;

	return s > 1 && ((q->r.offset | q->r.length) & (s - 1));
}

static void start_zeroes(struct req *q)
{
	struct export *e = q->c->exp;
	bool unaligned = sector_unaligned(q);
	bool no_punch = unaligned || __atomic_load_n(&e->no_punch, __ATOMIC_RELAXED);
	bool no_zr = unaligned || __atomic_load_n(&e->no_zero_range, __ATOMIC_RELAXED);

	/* Unaligned on a block device: zero buffers written (through the
	 * page cache, which takes any offset). */
	if (!(q->r.flags & NBD_CMD_FLAG_NO_HOLE) && !no_punch)
		q->phase = PH_PUNCH;
	else if (!no_zr)
		q->phase = PH_ZERO_RANGE;
	else if (q->r.flags & NBD_CMD_FLAG_FAST_ZERO) {
		q->msg = "zeroing is not faster than writing";
		q->phase = PH_NONE;
		req_reply(q, NBD_ENOTSUP, 0);
		return;
	} else
		q->phase = PH_ZERO_WRITE;
	req_submit(q);
}

/* A small buffered write is a copy into the page cache: done right here
 * it costs one syscall.  File systems with non-blocking buffered writes
 * take RWF_NOWAIT (and say EAGAIN when the write would block: then
 * io_uring does it); on the others (ext4) io_uring would punt every write
 * to a worker thread, so the copy is done here, blocking.  Large writes
 * go to io_uring when the worker has other connections: its workers copy
 * (and wait for dirty page throttling) on other CPUs while this thread
 * serves the others.  A worker with one connection copies a large write
 * here too when its payload is whole in buf or in place (not the last
 * chunk of a payload over WRITE_CHUNK: buf holds that chunk only):
 * io_uring runs the buffered writes of one file one after the other in
 * one worker thread anyway, and handing each over (a wake-up, the payload
 * read again from another CPU's cache, a completion) cost more than
 * overlapping the copy with receiving gained (1489048).
 * Returns true when the request is done. */
static bool link_ok(const struct conn *c, const struct req *q);

static bool write_inline(struct req *q)
{
	struct export *e = q->c->exp;
	struct iovec one = { .iov_base = q->buf, .iov_len = q->r.length };
	const struct iovec *iov = q->zc ? q->zc_iov : &one;
	int cnt = q->zc ? (q->zc_iov[1].iov_len ? 2 : 1) : 1;
	bool whole = q->zc || (!q->part && req_chunk_len(q) == q->r.length);
	bool alone = __atomic_load_n(&q->c->w->nconns, __ATOMIC_RELAXED) == 1;
	bool small = !(q->r.flags & NBD_CMD_FLAG_FUA) && whole &&
		     (q->r.length <= INLINE_WRITE_MAX || alone) &&
		     (q->zc ? e->dfd < 0 : io_fd(e, q->r.offset, q->r.length, q->buf) == e->fd);
	int nw = __atomic_load_n(&e->nowait_write, __ATOMIC_RELAXED);
	ssize_t n;

	/* Ring socket, nothing else in flight: the write and its reply go
	 * linked in one io_uring_enter instead (pwritev2 + a send SQE),
	 * unless io_uring would punt the write to a worker (no RWF_NOWAIT:
	 * two more context switches per write than the copy done here). */
	q->phase = PH_WRITE;
	if (e->rbd || !small || (nw == NOWAIT_YES && link_ok(q->c, q)))
		return false;
	if (nw != NOWAIT_NO) {
		n = pwritev2(e->fd, iov, cnt, (off_t)q->r.offset, RWF_NOWAIT);
		if (n >= 0 || errno != EOPNOTSUPP) {
			__atomic_store_n(&e->nowait_write, NOWAIT_YES, __ATOMIC_RELAXED);
			if (n == (ssize_t)q->r.length)
				goto out_done;
			return false;	/* io_uring finishes it */
		}
		__atomic_store_n(&e->nowait_write, NOWAIT_NO, __ATOMIC_RELAXED);
	}
	n = pwritev(e->fd, iov, cnt, (off_t)q->r.offset);
	if (n != (ssize_t)q->r.length)
		return false;		/* io_uring retries and reports */
out_done:
	__atomic_add_fetch(&q->c->w->stats.inline_writes, 1, __ATOMIC_RELAXED);
	req_reply(q, 0, 0);
	return true;
}

/* NBD_CMD_BLOCK_STATUS: base:allocation of the range, into q->buf (room
 * for NBD_BS_MAX_EXTENTS descriptors, compact or extended).  The lseeks
 * are done by the worker (file systems answer them from their extent
 * maps), in bs_run's slices.  An extended request's effect length beyond
 * 32 bits is cut (NBD_BS_MAX_LENGTH). */
void req_block_status(struct req *q)
{
	struct export *e = q->c->exp;
	struct nbd_extent ext[NBD_BS_MAX_EXTENTS];
	uint32_t min_block = q->c->tp.min_block;
	uint32_t len = q->r.length > NBD_BS_MAX_LENGTH(min_block) ?
		       (uint32_t)NBD_BS_MAX_LENGTH(min_block) : (uint32_t)q->r.length;
	unsigned n;

	if (e->rbd)
		n = smcrd_rbd_extents(e->rbd, q->r.offset, len, min_block,
				      q->r.flags & NBD_CMD_FLAG_REQ_ONE, ext, NBD_BS_MAX_EXTENTS);
	else
		n = extents_scan(e->fd, !e->blockdev, q->r.offset, len, min_block,
				 q->r.flags & NBD_CMD_FLAG_REQ_ONE, ext, NBD_BS_MAX_EXTENTS);
	if (q->c->tp.extended) {
		nbd_extents_ext_encode(ext, n, q->buf);
		req_reply(q, 0, n * (uint32_t)sizeof(struct nbd_block_descriptor_ext_wire));
	} else {
		nbd_extents_encode(ext, n, q->buf);
		req_reply(q, 0, n * (uint32_t)sizeof(struct nbd_block_descriptor_wire));
	}
}

/* Starts a request that passed the checks. */
void req_start(struct req *q)
{
	switch (q->r.type) {
	case NBD_CMD_BLOCK_STATUS: {
		struct worker *w = q->c->w;

		/* Queued: a fragmented file makes each scan milliseconds. */
		q->c->io_pending++;
		q->next = NULL;
		if (w->bs_tail)
			w->bs_tail->next = q;
		else
			w->bs_head = q;
		w->bs_tail = q;
		return;
	}
	case NBD_CMD_READ:
		if (q->from_file) {
			struct conn *c = q->c;

			nbd_reply_build_read_stream(&c->tp, &q->r, &q->rb);
			req_account(q, 0, q->r.length);
			conn_tx_push(c, q);
			conn_dirty(c);
			return;
		}
		q->phase = PH_READ;
		break;
	case NBD_CMD_WRITE:
		q->phase = PH_WRITE;
		if (write_inline(q))
			return;
		break;
	case NBD_CMD_FLUSH:
		q->phase = PH_SYNC;
		break;
	case NBD_CMD_TRIM:
		if (__atomic_load_n(&q->c->exp->no_punch, __ATOMIC_RELAXED)) {
			req_reply(q, 0, 0);	/* a hint only */
			return;
		}
		if (sector_unaligned(q)) {
			/* A hint: the whole sectors inside the range only. */
			uint64_t s = q->c->exp->sector, end = q->r.offset + q->r.length;
			uint64_t first = (q->r.offset + s - 1) & ~(s - 1);

			end &= ~(s - 1);
			if (first >= end) {
				req_reply(q, 0, 0);
				return;
			}
			q->r.offset = first;
			q->r.length = end - first;
		}
		q->phase = PH_PUNCH;
		break;
	case NBD_CMD_WRITE_ZEROES:
		start_zeroes(q);
		return;
	case NBD_CMD_CACHE:
		q->phase = PH_CACHE;
		break;
	default:
		req_reply(q, NBD_EINVAL, 0);
		return;
	}
	if (q->r.length == 0 && q->phase != PH_SYNC) {
		req_reply(q, 0, 0);
		return;
	}
	req_submit(q);
}

/* --- submission: a phase as file or RBD operations ------------------------ */

/* Ring socket: the reply to a READ or WRITE q may be sent by a sendmsg
 * linked to its file I/O when nothing else is in flight on the connection
 * (the reply is then the next bytes of the stream; the link breaks, and
 * the send is cancelled, if the I/O fails or comes short). */
static bool link_ok(const struct conn *c, const struct req *q)
{
	if (!c->tx_ops->sqe || c->exp->rbd || c->closing || c->tx_busy || c->tx_head ||
	    c->inflight != 1 ||
	    q->done || !q->buf || !q->r.length ||
	    io_uring_sq_space_left((struct io_uring *)&c->w->ring) < 2)
		return false;
	if (q->phase == PH_READ)
		return !q->zc_tx;
	return q->phase == PH_WRITE && !q->zc && !q->part && req_chunk_len(q) == q->r.length;
}

static void link_send(struct req *q)
{
	struct conn *c = q->c;
	struct iovec iov[3];
	int cnt = 0;

	nbd_reply_build(&c->tp, &q->r, 0, q->phase == PH_READ ? q->r.length : 0, q->err_off,
			NULL, &q->rb);
	if (q->rb.head_len)
		iov[cnt++] = (struct iovec){ q->rb.head, q->rb.head_len };
	if (q->rb.data_len)
		iov[cnt++] = (struct iovec){ q->buf, q->rb.data_len };
	if (q->rb.tail_len)
		iov[cnt++] = (struct iovec){ q->rb.tail, q->rb.tail_len };
	conn_arm_send(c, iov, cnt, false);
	if (q->rb.head_len + q->rb.data_len + q->rb.tail_len < LAZY_MAX)
		c->w->lazy += 2;	/* the file I/O's CQE and the send's */
	c->tx_link = q;
	q->linked = true;
	q->lk_done = 0;
}

/* An RBD operation of q is over (in a librbd thread): to q's worker. */
static void rbd_done(void *arg, int res)
{
	struct req *q = arg;
	struct worker *w = q->c->w;
	bool first;

	q->rbd_res = res;
	pthread_mutex_lock(&w->lock);
	first = !w->rbd_done;
	q->rbd_next = w->rbd_done;
	w->rbd_done = q;
	pthread_mutex_unlock(&w->lock);
	/* One wake-up for the list: the worker takes it whole. */
	if (first)
		conn_worker_wake(w);
}

/* req_submit for an RBD export: the phase as a librbd operation, which
 * ends in rbd_done (and req_complete on the worker). */
static void rbd_submit(struct req *q)
{
	struct conn *c = q->c;
	uint64_t off = q->r.offset + q->part + q->done;
	uint64_t left = (q->phase == PH_WRITE ? req_chunk_len(q) : q->r.length) - q->done;
	struct iovec one = { NULL, left };
	const struct iovec *iov = &one;
	int cnt = 1;
	enum rbd_io op;

	if (q->buf && (q->phase == PH_READ || q->phase == PH_WRITE))
		one.iov_base = (uint8_t *)q->buf + q->done;
	switch (q->phase) {
	case PH_READ:
		op = RBD_IO_READ;
		if (q->zc_tx) {
			cnt = conn_win_slice(q->tx_win, q->rb.head_len + q->done, left, q->zc_cur);
			iov = q->zc_cur;
		}
		break;
	case PH_WRITE:
		op = RBD_IO_WRITE;
		if (q->zc) {
			iov = q->zc_cur;
			cnt = (int)conn_zc_remaining(q);
		}
		break;
	case PH_SYNC:
		op = RBD_IO_FLUSH;
		break;
	case PH_PUNCH:
		/* librbd skips partial objects on discard: only TRIM, a
		 * hint, discards; WRITE_ZEROES writes zeroes. */
		op = q->r.type == NBD_CMD_TRIM ? RBD_IO_DISCARD : RBD_IO_ZEROES;
		break;
	case PH_ZERO_RANGE:
		op = RBD_IO_ZEROES;
		break;
	case PH_ZERO_WRITE:
		/* Zeroing not supported: zero buffers written, as for files. */
		op = RBD_IO_WRITE;
		one.iov_base = c->w->e->zero_buf;
		one.iov_len = left > ZERO_BUF_SIZE ? ZERO_BUF_SIZE : left;
		break;
	case PH_CACHE:
		req_reply(q, 0, 0);	/* advisory */
		return;
	default:
		abort();
	}
	if (op != RBD_IO_READ && op != RBD_IO_WRITE) {
		off = q->r.offset;
		left = q->r.length;
	}
	c->io_pending++;
	c->w->io_inflight++;
	smcrd_rbd_submit(c->exp->rbd, op, off, left, iov, cnt,
			 (q->r.flags & NBD_CMD_FLAG_FUA) && q->phase == PH_WRITE, rbd_done, q);
}

void req_submit(struct req *q)
{
	struct conn *c = q->c;
	struct export *e = c->exp;
	bool link;
	struct io_uring_sqe *sqe;
	uint64_t off = q->r.offset + q->part + q->done;
	uint64_t left = (q->phase == PH_WRITE ? req_chunk_len(q) : q->r.length) - q->done;
	uint8_t *p = (uint8_t *)q->buf + q->done;

	if (e->rbd) {
		rbd_submit(q);
		return;
	}
	link = link_ok(c, q);
	sqe = conn_get_sqe(c->w);
	switch (q->phase) {
	case PH_READ:
		if (q->zc_tx) {
			/* Into the reserved reply, after its header; that
			 * memory need not suit O_DIRECT: the buffered fd. */
			int cnt = conn_win_slice(q->tx_win, q->rb.head_len + q->done, left,
						 q->zc_cur);

			io_uring_prep_readv(sqe, e->fd, q->zc_cur, (unsigned)cnt, off);
			break;
		}
		if (q->buf_slot >= 0)
			io_uring_prep_read_fixed(sqe, io_fd(e, off, left, p), p, (unsigned)left,
						 off, q->buf_slot);
		else
			io_uring_prep_read(sqe, io_fd(e, off, left, p), p, (unsigned)left, off);
		break;
	case PH_WRITE:
		if (q->zc) {
			/* Straight from the transport's receive buffer; its
			 * memory need not suit O_DIRECT: the buffered fd. */
			io_uring_prep_writev(sqe, e->fd, q->zc_cur, (unsigned)conn_zc_remaining(q),
					     off);
		} else if (q->buf_slot >= 0) {
			io_uring_prep_write_fixed(sqe, io_fd(e, off, left, p), p, (unsigned)left,
						  off, q->buf_slot);
		} else {
			io_uring_prep_write(sqe, io_fd(e, off, left, p), p, (unsigned)left, off);
		}
		if (q->r.flags & NBD_CMD_FLAG_FUA)
			sqe->rw_flags = RWF_DSYNC;
		break;
	case PH_SYNC:
		io_uring_prep_fsync(sqe, e->fd, IORING_FSYNC_DATASYNC);
		break;
	case PH_PUNCH:
		io_uring_prep_fallocate(sqe, e->fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
					(off_t)q->r.offset, (off_t)q->r.length);
		break;
	case PH_ZERO_RANGE:
		io_uring_prep_fallocate(sqe, e->fd, FALLOC_FL_ZERO_RANGE | FALLOC_FL_KEEP_SIZE,
					(off_t)q->r.offset, (off_t)q->r.length);
		break;
	case PH_ZERO_WRITE:
		if (left > ZERO_BUF_SIZE)
			left = ZERO_BUF_SIZE;
		io_uring_prep_write(sqe, e->fd, c->w->e->zero_buf, (unsigned)left, off);
		break;
	case PH_CACHE:
		io_uring_prep_fadvise(sqe, e->fd, q->r.offset, (off_t)q->r.length,
				      POSIX_FADV_WILLNEED);
		break;
	default:
		abort();
	}
	prep(q, sqe);
	if (link) {
		sqe->flags |= IOSQE_IO_LINK;
		link_send(q);
	}
}

/* --- completion: the next phase, or the reply ----------------------------- */

static bool not_supported(int res)
{
	return res == -EOPNOTSUPP || res == -ENOTSUP || res == -ENOSYS || res == -ENOTTY;
}

/* After TRIM / WRITE_ZEROES succeeded: FUA wants the data on disk. */
static void zeroes_done(struct req *q)
{
	if ((q->r.flags & NBD_CMD_FLAG_FUA) && q->phase != PH_SYNC) {
		q->phase = PH_SYNC;
		q->done = 0;
		req_submit(q);
		return;
	}
	req_reply(q, 0, 0);
}

static void req_fail(struct req *q, int res, uint64_t good)
{
	q->err_off = q->r.offset + good;
	q->msg = strerror(-res);
	req_reply(q, nbd_errno_to_wire(-res), (uint32_t)good);
}

/* A chunk of q (not its last) is written, or its write failed (res):
 * receive the next one into buf, or drop the rest of the payload and
 * answer the error once it is gone. */
static void chunk_written(struct req *q, int res)
{
	struct conn *c = q->c;
	uint64_t next = q->part + req_chunk_len(q);

	c->rx_chunk = NULL;
	q->done = 0;
	if (c->rx_stop) {
		/* The client went away in the middle of the payload. */
		req_free(q);
		conn_maybe_finish(c);
		return;
	}
	if (res) {
		q->error = nbd_errno_to_wire(-res);
		q->msg = strerror(-res);
		q->err_off = q->r.offset + q->part;
		c->skip = q->r.length - next;
		c->skip_req = q;
	} else {
		q->part = next;
		c->rx_req = q;
	}
	c->rx_progress_ms = now_ms();
	conn_kick(c);
}

/* The file operation of q ended with res: next phase, or the reply. */
static void req_finish(struct req *q, int res)
{
	struct conn *c = q->c;
	struct export *e = c->exp;

	if (res == -ENOLCK && e->rbd && !c->closing)
		/* Fenced: not answered; the client resends elsewhere. */
		conn_close(c, "the image was taken over by another gateway (fenced): closing");
	if (c->closing) {
		if (c->rx_chunk == q)
			c->rx_chunk = NULL;
		if (!q->zc_tx)		/* else freed with the tx queue */
			req_free(q);
		return;
	}
	if (res == -EINTR || res == -EAGAIN) {
		req_submit(q);
		return;
	}
	if (q->zc_tx) {
		/* Its header already sits in the send stream: a reply that
		 * cannot carry the data cannot be taken back. */
		if (res <= 0) {
			char why[128];

			snprintf(why, sizeof(why), "READ at %llu failed (%s): closing the connection",
				 (unsigned long long)(q->r.offset + q->done),
				 res ? strerror(-res) : "unexpected end of file");
			conn_close(c, why);
			return;
		}
		mem_filled_iov(q->zc_cur, (int)(sizeof(q->zc_cur) / sizeof(q->zc_cur[0])), (size_t)res);
		q->done += (uint64_t)res;
		if (q->done < q->r.length) {
			req_submit(q);
			return;
		}
		conn_win_put(q->tx_win, q->rb.head_len + q->r.length, q->rb.tail, q->rb.tail_len);
		q->tx_ready = true;
		req_account(q, 0, q->r.length);
		conn_dirty(c);
		return;
	}
	if (c->rx_chunk == q) {
		/* A chunk of a payload still coming. */
		if (res > 0 && (q->done += (uint64_t)res) < req_chunk_len(q)) {
			req_submit(q);
			return;
		}
		chunk_written(q, res > 0 ? 0 : res ? res : -EIO);
		return;
	}
	switch (q->phase) {
	case PH_READ:
	case PH_WRITE:
		if (res < 0) {
			req_fail(q, res, q->phase == PH_READ ? q->done : 0);
			return;
		}
		if (res == 0) {
			q->msg = q->phase == PH_READ ? "unexpected end of file"
						     : "no progress writing";
			q->err_off = q->r.offset + q->done;
			req_reply(q, NBD_EIO, q->phase == PH_READ ? (uint32_t)q->done : 0);
			return;
		}
		if (q->phase == PH_READ)
			mem_filled((uint8_t *)q->buf + q->done, (size_t)res);
		q->done += (uint64_t)res;
		if (q->done < (q->phase == PH_WRITE ? req_chunk_len(q) : q->r.length)) {
			req_submit(q);
			return;
		}
		req_reply(q, 0, q->phase == PH_READ ? q->r.length : 0);
		return;
	case PH_SYNC:
		if (res < 0) {
			req_fail(q, res, 0);
			return;
		}
		req_reply(q, 0, 0);
		return;
	case PH_PUNCH:
		if (res == 0) {
			zeroes_done(q);
			return;
		}
		if (not_supported(res)) {
			__atomic_store_n(&e->no_punch, 1, __ATOMIC_RELAXED);
			if (q->r.type == NBD_CMD_TRIM) {
				req_reply(q, 0, 0);
				return;
			}
			start_zeroes(q);
			return;
		}
		req_fail(q, res, 0);
		return;
	case PH_ZERO_RANGE:
		if (res == 0) {
			zeroes_done(q);
			return;
		}
		if (not_supported(res)) {
			__atomic_store_n(&e->no_zero_range, 1, __ATOMIC_RELAXED);
			if (q->r.flags & NBD_CMD_FLAG_FAST_ZERO) {
				q->msg = "zeroing is not faster than writing";
				req_reply(q, NBD_ENOTSUP, 0);
				return;
			}
			q->phase = PH_ZERO_WRITE;
			q->done = 0;
			req_submit(q);
			return;
		}
		req_fail(q, res, 0);
		return;
	case PH_ZERO_WRITE:
		if (res <= 0) {
			req_fail(q, res ? res : -EIO, 0);
			return;
		}
		q->done += (uint64_t)res;
		if (q->done < q->r.length) {
			req_submit(q);
			return;
		}
		zeroes_done(q);
		return;
	case PH_CACHE:
		req_reply(q, 0, 0);	/* advisory */
		return;
	default:
		abort();
	}
}

void req_complete(struct req *q, int res)
{
	struct conn *c = q->c;
	struct worker *w = c->w;

	c->io_pending--;
	if (w->io_inflight-- == IO_LIMIT && w->mem_head)
		conn_mem_wake(w);
	if (q->linked) {
		q->lk_rres = res;
		q->lk_done |= LK_READ;
		if (q->lk_done & LK_SEND)
			req_link_resolve(q);
		return;
	}
	req_finish(q, res);
}

/* Both CQEs of a linked READ + reply send are in. */
void req_link_resolve(struct req *q)
{
	struct conn *c = q->c;
	size_t full = (size_t)q->rb.head_len + q->rb.data_len + q->rb.tail_len;
	int s = q->lk_sres;

	if (s > 0)
		c->tx_bytes += (uint64_t)s;
	q->linked = false;
	c->tx_link = NULL;
	c->tx_busy = false;
	if (c->closing) {
		req_free(q);
		return;
	}
	conn_dirty(c);		/* replies queued meanwhile */
	if (q->lk_rres != (int)q->r.length) {
		/* I/O failed or short: the send was cancelled. */
		req_finish(q, q->lk_rres);
		return;
	}
	req_account(q, 0, q->r.length);
	if (s >= 0 && (size_t)s == full) {
		req_free(q);
		return;
	}
	if (s < 0 && s != -EINTR && s != -EAGAIN) {
		char why[96];

		snprintf(why, sizeof(why), "send failed: %s", strerror(-s));
		req_free(q);
		conn_close(c, s == -EPIPE || s == -ECONNRESET ? "client went away" : why);
		return;
	}
	/* Sent in part: the rest first, by the queue (nothing else was sent). */
	q->next = c->tx_head;
	c->tx_head = q;
	if (!c->tx_tail)
		c->tx_tail = q;
	c->tx_off = s > 0 ? (size_t)s : 0;
}

/* --- end: accounted, answered, freed -------------------------------------- */

/* One request answered (its reply queued): the connection's and the
 * iostat counters.  bytes: READ data sent, WRITE data written. */
void req_account(struct req *q, uint32_t error, uint64_t bytes)
{
	struct conn *c = q->c;
	uint64_t now = mono_us(), lat = now > q->t0_us ? now - q->t0_us : 0;

	if (q->r.type == NBD_CMD_READ)
		c->rbytes += bytes;
	else if (q->r.type == NBD_CMD_WRITE)
		c->wbytes += bytes;
	iostat_add(c->st_exp, q->r.type, bytes, error, lat);
	iostat_add(c->st_cli, q->r.type, bytes, error, lat);
}

/* Queues the reply of q (data_len bytes of q->buf for READ). */
void req_reply(struct req *q, uint32_t error, uint32_t data_len)
{
	struct conn *c = q->c;

	if (c->closing) {
		req_free(q);
		return;
	}
	conn_zc_unpin(q);
	q->error = error;
	nbd_reply_build(&c->tp, &q->r, error, data_len, q->err_off, q->msg, &q->rb);
	req_account(q, error, q->r.type == NBD_CMD_READ ? q->rb.data_len :
			q->r.type == NBD_CMD_WRITE && !error ? q->r.length : 0);
	conn_tx_push(c, q);
	conn_dirty(c);
}

/* Once its reply is sent, or the connection goes: the buffer back to the
 * pool (waking who waits for memory), the slot in the queue depth free
 * (waking a connection that waits for it). */
void req_free(struct req *q)
{
	struct conn *c = q->c;
	struct worker *w = c->w;

	if (q->zc) {
		/* Closing: nothing to give back. */
		q->zc = false;
		c->pins[q->pin].done = true;
	}
	if (q->buf) {
		c->mem_used -= (uint64_t)1 << (q->buf_class + POOL_MIN_SHIFT);
		c->as->used -= (uint64_t)1 << (q->buf_class + POOL_MIN_SHIFT);
		if (!c->mem_used)
			c->as->holders--;
		if (!c->as->used)
			w->addr_holders--;
		pool_put(w, q->buf_class, q->buf, q->buf_slot);
		q->buf = NULL;
		if (w->mem_head)
			conn_mem_wake(w);
	}
	c->inflight--;
	if (c->rx_blocked) {
		c->rx_blocked = false;
		conn_kick(c);
	}
	q->next = w->req_free;
	w->req_free = q;
}
