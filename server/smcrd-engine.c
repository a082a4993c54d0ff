/* SPDX-License-Identifier: BSD-3-Clause */
/* smcrd: the io_uring engine (API in smcrd-engine.h). */
#include <config.h>

#include <errno.h>
#include <fcntl.h>
#include <liburing.h>
#include <poll.h>
#include <linux/falloc.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/sockios.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <sys/un.h>

#include "smcrd-engine.h"
#include "smcrd-extents.h"
#include "smcrd-rbd.h"
#include "applog.h"
#include "lograte.h"
#include "nbd-wire.h"
#include "monotime.h"

#if defined(__has_include)
#if __has_include(<valgrind/valgrind.h>)
#include <valgrind/valgrind.h>
#endif
#endif
#ifndef SYS_CACHESTAT
#define SYS_CACHESTAT 451		/* Linux 6.5, all architectures */
#endif
#ifndef RUNNING_ON_VALGRIND
#define RUNNING_ON_VALGRIND 0
#endif

/* user_data: a pointer with a tag in its low 3 bits. */
enum tag {
	TAG_REQ = 0,		/* struct req: file I/O */
	TAG_POLL_IN = 1,	/* struct conn: multishot poll, readable */
	TAG_POLL_OUT = 2,	/* struct conn: one-shot poll, writable */
	TAG_WAKE = 3,		/* struct worker: eventfd readable */
	TAG_TIMER = 4,		/* struct worker: drain tick */
	TAG_IGNORE = 5,		/* cancellations */
	TAG_RECV = 6,		/* struct conn: recv on the ring (plain TCP) */
	TAG_SEND = 7,		/* struct conn: sendmsg on the ring (plain TCP) */
};
#define TAG_MASK	UINT64_C(7)

#define RING_ENTRIES	512
#define CQ_ENTRIES	8192
#define RBUF_SIZE	(256u << 10)
#define IOV_BATCH	64
#define ZERO_BUF_SIZE	(1u << 20)
#define POOL_MIN_SHIFT	12
#define POOL_MAX_SHIFT	25
#define POOL_CLASSES	(POOL_MAX_SHIFT - POOL_MIN_SHIFT + 1)
#define POOL_MMAP_SHIFT	18		/* >= 256 KiB: mmap'ed */
#define POOL_CACHE_MAX	(64u << 20)	/* bytes kept for reuse per worker */
#define FIXED_SLOTS	1024		/* io_uring fixed buffer slots per worker */
#define SENDFILE_MIN	(64u << 10)	/* READs this large: sendfile */
#define BS_BUF_SIZE	(NBD_BS_MAX_EXTENTS * sizeof(struct nbd_block_descriptor_wire))
/* BLOCK_STATUS scans per loop pass: started within this time (each is
 * bounded to EXTENTS_SCAN_STEPS steps). */
#define BS_SLICE_NS	2000000
#define INLINE_WRITE_MAX (64u << 10)	/* larger WRITEs: io_uring, in parallel */
/* A WRITE payload is received into a buffer of at most this much, which
 * goes to the file whenever it is full: memory is charged as the payload
 * comes, a chunk ahead, not the whole announced length at the header (32
 * clients announcing 32 MiB and sending a byte starved everyone). */
#define WRITE_CHUNK	(1u << 20)
#define LOWAT_MIN	(64u << 10)	/* payload left to wait for in one wake-up */
#define LOWAT_MAX	(256u << 10)	/* ... at most this much of it */
#define IO_LIMIT	(CQ_ENTRIES - 1024)	/* file ops in flight per worker:
						 * the CQ never overflows */
#define LAZY_WAIT_NS	1000000L
#define LAZY_MAX	(64u << 10)	/* sends this large: not lazy */
#define DRAIN_TICK_MS	100
#define DRAIN_IDLE_MS	200

struct worker;
struct conn;

/* Phases of a request's I/O. */
enum phase {
	PH_NONE,
	PH_READ,
	PH_WRITE,
	PH_SYNC,		/* FLUSH, or FUA after TRIM/WRITE_ZEROES */
	PH_PUNCH,		/* TRIM, WRITE_ZEROES without NO_HOLE */
	PH_ZERO_RANGE,		/* WRITE_ZEROES */
	PH_ZERO_WRITE,		/* WRITE_ZEROES fallback: write zero buffers */
	PH_CACHE,
};

struct req {
	struct conn *c;
	struct req *next;		/* tx queue or free list */
	struct nbd_request r;
	void *buf;
	unsigned buf_class;
	int buf_slot;			/* its io_uring fixed buffer, or -1 */
	bool from_file;			/* READ data goes out by send_file */
	bool zc_tx;			/* READ reply reserved in the transport's send
					 * buffer (tx_reserve); the file is read into it */
	bool tx_ready;			/* zc_tx: filled, may be committed */
	struct iovec tx_win[2];		/* zc_tx: the reserved reply */
	bool zc;			/* WRITE payload in the transport (rx_peek) */
	unsigned pin;			/* its slot in the connection's pins */
	struct iovec zc_iov[2];		/* the payload, in place */
	struct iovec zc_cur[2];		/* what is left to write */
	uint64_t part;			/* WRITE in chunks: payload bytes before buf's */
	enum phase phase;
	uint64_t done;			/* bytes done of the current phase */
	uint32_t error;			/* NBD error */
	uint64_t err_off;
	const char *msg;
	struct nbd_reply_buf rb;
	/* Ring socket: a READ whose reply send is linked to it. */
	bool linked;
	unsigned lk_done;		/* LK_READ | LK_SEND: CQEs seen */
	int lk_rres, lk_sres;
	/* RBD export: the result of its operation, handed to the worker. */
	struct req *rbd_next;
	int rbd_res;
};

#define LK_READ		1u
#define LK_SEND		2u

/* A worker's request memory held by the connections of one peer address
 * (all Unix-socket clients are one, "local"); only that worker touches
 * it. */
struct addr_share {
	struct addr_share *next;
	unsigned refs;
	uint64_t used;
	uint64_t logged_ms;		/* limit last logged */
	char key[INET6_ADDRSTRLEN];
};

#define ADDR_BUCKETS	64

struct conn {
	void *owner;			/* engine_add()'s, for p.closed */
	struct worker *w;
	struct conn *next, *prev;	/* worker's list */
	struct conn *kick_next;		/* worker's kick list */
	struct conn *dirty_next;	/* worker's dirty list */
	struct conn *mem_next;		/* worker's memory wait list */
	struct bd_transport *t;
	int pfd;
	struct export *exp;
	struct nbd_tx_params tp;
	/* receive */
	uint8_t *rbuf;
	uint32_t rstart, rend;
	struct req *rx_req;		/* WRITE whose payload is arriving */
	struct req *rx_chunk;		/* WRITE whose full chunk is being written:
					 * receiving waits for it */
	uint64_t skip;			/* payload bytes to drop */
	struct req *skip_req;		/* refused WRITE: answered once its
					 * payload is gone (clients do not
					 * expect replies earlier) */
	bool rx_short;			/* last read drained the transport */
	bool rx_stop;			/* EOF, DISC or error: read no more */
	bool rx_blocked;		/* queue depth reached */
	bool mem_blocked;
	/* transmit */
	struct req *tx_head, *tx_tail;
	size_t tx_off;
	bool poll_out;
	bool kicked, dirty;
	/* life */
	unsigned inflight;		/* requests not yet fully answered */
	unsigned io_pending;		/* SQEs whose CQE is outstanding, and
					 * queued BLOCK_STATUS requests */
	bool poll_in;
	bool closing;
	bool drain;
	uint64_t last_rx_ms;
	uint64_t rx_progress_ms;	/* last byte received (request timeout) */
	uint64_t tx_bytes;		/* reply bytes handed to the transport */
	uint64_t tx_seen;		/* ... at tx_seen_ms */
	int tx_seen_outq;		/* socket send queue then (SIOCOUTQ), or -1 */
	uint64_t tx_seen_ms;		/* replies last moved (reply timeout) */
	uint64_t mem_used;		/* request buffers held */
	char akey[INET6_ADDRSTRLEN];	/* peer address, no port */
	struct addr_share *as;		/* its share on this worker */
	/* Zero-copy receive (transports with rx_peek): the stream is read in
	 * place; WRITE payloads stay there (pinned) until on disk, and bytes
	 * are consumed in order up to the oldest pin. */
	bool zc;
	uint64_t rx_pos;		/* stream bytes parsed */
	uint64_t rx_cons;		/* stream bytes consumed */
	struct pin {
		uint64_t start;
		bool done;
	} *pins;			/* ring of queue-depth entries */
	unsigned pin_head, pin_cnt;
	/* Ring socket (plain TCP): recv and sendmsg go through the worker's
	 * ring instead of poll + recv(2)/sendmsg(2).  One of each at most. */
	bool ring;
	bool rx_armed;			/* recv SQE outstanding */
	bool rx_into_req;		/* it receives into rx_req's buffer */
	bool tx_busy;			/* sendmsg SQE outstanding */
	struct req *tx_link;		/* its READ, if linked to one */
	bool tx_zc;			/* it is a SENDMSG_ZC */
	int tx_zc_res;			/* its result, before the notification */
	struct msghdr tx_msg;
	struct iovec tx_iov[IOV_BATCH];
	/* statistics */
	uint64_t nreq, rbytes, wbytes;
};

struct worker {
	struct engine *e;
	unsigned idx;
	pthread_t thread;
	bool started;
	struct io_uring ring;
	int evfd;
	uint64_t evbuf;
	pthread_mutex_t lock;
	struct conn *incoming;		/* handed over, under lock */
	struct req *rbd_done;		/* RBD operations over, under lock */
	bool drain_req;			/* under lock */
	unsigned nconns;		/* atomic: for placement */
	struct conn *conns;
	struct conn *kick_head;
	struct conn *dirty_head;
	struct conn *mem_head, *mem_tail;
	struct req *req_free;
	void *pool[POOL_CLASSES];
	size_t pool_cached;
	/* Pool buffers registered with the ring (READ_FIXED/WRITE_FIXED):
	 * a sparse table, its free slots on a stack. */
	bool fixed;
	unsigned nslot_free;
	uint16_t slot_free[FIXED_SLOTS];
	uint64_t mem_used, mem_limit;
	/* What one address may hold here: its part of max_mem_per_address
	 * (0: no limit). */
	uint64_t addr_limit;
	struct addr_share *addr_tab[ADDR_BUCKETS];
	/* BLOCK_STATUS requests waiting for their lseeks, run BS_SLICE_NS
	 * per loop pass so the worker's other requests go between. */
	struct req *bs_head, *bs_tail;
	unsigned io_inflight;		/* TAG_REQ SQEs */
	struct engine_stats stats;	/* written here, read with atomics */
	uint64_t limit_logged_ms;
	bool draining;
	bool timer_armed;
	uint64_t stall_logged_ms;	/* request timeouts: logged at */
	unsigned long stall_unlogged;
	uint64_t drain_deadline;
	struct __kernel_timespec tick;
	/* CQEs of this batch that only free buffers (ring-socket sends that
	 * leave nothing owed, linked file I/O): the next wait waits for
	 * them and one more event, up to LAZY_WAIT_NS. */
	unsigned lazy;
};

struct engine {
	struct engine_params p;
	struct worker *w;
	unsigned nw;
	void *zero_buf;
	unsigned conns;			/* atomic */
	bool draining;			/* atomic */
	pthread_mutex_t start_lock;
	pthread_cond_t start_cond;
	unsigned start_count;
	int start_err;
	bool valgrind;
	bool no_cachestat;		/* atomic */
	bool ring_sock;			/* plain TCP sockets on the ring */
	enum read_reply {
		RR_SENDFILE,		/* large cached READs: sendfile(2) */
		RR_COPY,		/* read into a buffer, send a copy */
		RR_ZC,			/* ring sockets: large sends zero-copy */
	} read_reply;
};

static uint64_t ud(void *p, enum tag tag)
{
	return (uint64_t)(uintptr_t)p | (uint64_t)tag;
}

/* --- buffer pool ---------------------------------------------------------- */

static unsigned size_class(uint64_t len)
{
	unsigned shift = POOL_MIN_SHIFT;

	while ((UINT64_C(1) << shift) < len)
		shift++;
	return shift - POOL_MIN_SHIFT;
}

/* A buffer in the pool's free list. */
struct pool_buf {
	void *next;
	int slot;
};

static void *buf_alloc_fresh(unsigned cls)
{
	size_t size = (size_t)1 << (cls + POOL_MIN_SHIFT);
	void *p;

	if (cls + POOL_MIN_SHIFT >= POOL_MMAP_SHIFT) {
		p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
			 -1, 0);
		return p == MAP_FAILED ? NULL : p;
	}
	if (posix_memalign(&p, 4096, size))
		return NULL;
	/* Defined contents: io_uring fills buffers behind valgrind's back. */
	memset(p, 0, size);
	return p;
}

static void buf_release(unsigned cls, void *p)
{
	size_t size = (size_t)1 << (cls + POOL_MIN_SHIFT);

	if (cls + POOL_MIN_SHIFT >= POOL_MMAP_SHIFT)
		munmap(p, size);
	else
		free(p);
}

/* Registers a new pool buffer with the ring; -1 when there is no slot or
 * the kernel refuses (RLIMIT_MEMLOCK): the buffer is used unregistered. */
static int fixed_add(struct worker *w, void *p, size_t size)
{
	struct iovec iov = { .iov_base = p, .iov_len = size };
	int slot, r;

	if (!w->fixed || !w->nslot_free)
		return -1;
	slot = w->slot_free[--w->nslot_free];
	r = io_uring_register_buffers_update_tag(&w->ring, (unsigned)slot, &iov, NULL, 1);
	if (r < 0) {
		w->slot_free[w->nslot_free++] = (uint16_t)slot;
		if (r == -ENOMEM || r == -EPERM) {
			/* Pinned memory is over the limit: stop trying. */
			log_info("worker %u: io_uring fixed buffers: %s: using plain buffers",
				 w->idx, strerror(-r));
			w->fixed = false;
		}
		return -1;
	}
	return slot;
}

/* Before the buffer goes back to the system. */
static void fixed_del(struct worker *w, int slot)
{
	struct iovec iov = { .iov_base = NULL, .iov_len = 0 };

	if (slot < 0)
		return;
	io_uring_register_buffers_update_tag(&w->ring, (unsigned)slot, &iov, NULL, 1);
	w->slot_free[w->nslot_free++] = (uint16_t)slot;
}

/* NULL with *blocked set: over the memory limit, try again later. */
static void *buf_get(struct worker *w, uint64_t len, unsigned *cls_out, int *slot_out,
		     bool *blocked)
{
	unsigned cls = size_class(len);
	size_t size = (size_t)1 << (cls + POOL_MIN_SHIFT);
	struct pool_buf *b;
	void *p;

	*blocked = false;
	if (w->mem_used && w->mem_used + size > w->mem_limit) {
		*blocked = true;
		return NULL;
	}
	p = w->pool[cls];
	if (p) {
		b = p;
		w->pool[cls] = b->next;
		w->pool_cached -= size;
		*slot_out = b->slot;
	} else {
		p = buf_alloc_fresh(cls);
		if (!p)
			return NULL;
		*slot_out = fixed_add(w, p, size);
	}
	w->mem_used += size;
	*cls_out = cls;
	return p;
}

static void buf_put(struct worker *w, unsigned cls, void *p, int slot)
{
	size_t size = (size_t)1 << (cls + POOL_MIN_SHIFT);
	struct pool_buf *b = p;

	w->mem_used -= size;
	if (w->pool_cached + size <= POOL_CACHE_MAX) {
		b->next = w->pool[cls];
		b->slot = slot;
		w->pool[cls] = p;
		w->pool_cached += size;
	} else {
		fixed_del(w, slot);
		buf_release(cls, p);
	}
}

/* After the ring is gone (it dropped its registrations). */
static void pool_free_all(struct worker *w)
{
	unsigned cls;

	for (cls = 0; cls < POOL_CLASSES; cls++) {
		while (w->pool[cls]) {
			struct pool_buf *b = w->pool[cls];

			w->pool[cls] = b->next;
			buf_release(cls, b);
		}
	}
	w->pool_cached = 0;
}

/* --- lists ------------------------------------------------------------------ */

static void conn_kick(struct conn *c)
{
	if (c->kicked || c->closing)
		return;
	c->kicked = true;
	c->kick_next = c->w->kick_head;
	c->w->kick_head = c;
}

static void conn_dirty(struct conn *c)
{
	if (c->dirty || c->closing)
		return;
	c->dirty = true;
	c->dirty_next = c->w->dirty_head;
	c->w->dirty_head = c;
}

/* The share of c's address on its worker, created at the first
 * connection; -ENOMEM. */
static int addr_share_get(struct conn *c)
{
	struct worker *w = c->w;
	unsigned h = 5381;
	const char *k;
	struct addr_share *a;

	for (k = c->akey; *k; k++)
		h = h * 33 + (unsigned char)*k;
	h %= ADDR_BUCKETS;
	for (a = w->addr_tab[h]; a; a = a->next)
		if (!strcmp(a->key, c->akey))
			break;
	if (!a) {
		a = calloc(1, sizeof(*a));
		if (!a)
			return -ENOMEM;
		memcpy(a->key, c->akey, sizeof(a->key));
		a->next = w->addr_tab[h];
		w->addr_tab[h] = a;
	}
	a->refs++;
	c->as = a;
	return 0;
}

/* After the connection's buffers are back. */
static void addr_share_put(struct conn *c)
{
	struct worker *w = c->w;
	struct addr_share *a = c->as, **pp;
	unsigned h;

	if (!a || --a->refs)
		return;
	for (h = 0; h < ADDR_BUCKETS; h++)
		for (pp = &w->addr_tab[h]; *pp; pp = &(*pp)->next)
			if (*pp == a) {
				*pp = a->next;
				free(a);
				return;
			}
}

/* Once per 10 s per address and worker. */
static void addr_limit_log(struct conn *c)
{
	uint64_t now = now_ms();

	if (c->as->logged_ms && now - c->as->logged_ms < 10000)
		return;
	c->as->logged_ms = now;
	log_info("client %s: %s holds %llu bytes of worker %u's request memory "
		 "(max-memory-per-address): its clients wait", c->t->peer, c->akey,
		 (unsigned long long)c->as->used, c->w->idx);
}

/* The connection reads no more requests until buffers (or io_uring
 * slots) of this worker are free again. */
static void mem_wait(struct conn *c, const char *what)
{
	struct worker *w = c->w;
	uint64_t now;

	if (c->mem_blocked)
		return;
	now = now_ms();
	if (now - w->limit_logged_ms > 10000) {
		w->limit_logged_ms = now;
		log_info("worker %u: %s limit reached: clients wait (%llu bytes in use, "
			 "%u I/Os in flight)", w->idx, what, (unsigned long long)w->mem_used,
			 w->io_inflight);
	}
	c->mem_blocked = true;
	c->mem_next = NULL;
	if (w->mem_tail)
		w->mem_tail->mem_next = c;
	else
		w->mem_head = c;
	w->mem_tail = c;
}

static void mem_wake(struct worker *w)
{
	struct conn *c = w->mem_head;

	w->mem_head = w->mem_tail = NULL;
	while (c) {
		struct conn *next = c->mem_next;

		c->mem_blocked = false;
		conn_kick(c);
		c = next;
	}
}

static void mem_unlink(struct conn *c)
{
	struct worker *w = c->w;
	struct conn **pp, *prev = NULL;

	if (!c->mem_blocked)
		return;
	for (pp = &w->mem_head; *pp; prev = *pp, pp = &(*pp)->mem_next) {
		if (*pp == c) {
			*pp = c->mem_next;
			if (w->mem_tail == c)
				w->mem_tail = prev;
			break;
		}
	}
	c->mem_blocked = false;
}

/* --- submission ------------------------------------------------------------ */

static struct io_uring_sqe *get_sqe(struct worker *w)
{
	struct io_uring_sqe *sqe;

	while (!(sqe = io_uring_get_sqe(&w->ring))) {
		int r = io_uring_submit(&w->ring);

		if (r < 0 && r != -EINTR && r != -EAGAIN && r != -EBUSY) {
			log_err("worker %u: io_uring_submit: %s", w->idx, strerror(-r));
			abort();
		}
	}
	return sqe;
}

static void arm_poll_in(struct conn *c)
{
	struct io_uring_sqe *sqe = get_sqe(c->w);

	io_uring_prep_poll_multishot(sqe, c->pfd, (unsigned)bd_poll_events(c->t, BD_WANT_READ));
	io_uring_sqe_set_data64(sqe, ud(c, TAG_POLL_IN));
	c->poll_in = true;
	c->io_pending++;
}

static void arm_poll_out(struct conn *c)
{
	struct io_uring_sqe *sqe;

	if (c->poll_out || c->closing)
		return;
	sqe = get_sqe(c->w);
	io_uring_prep_poll_add(sqe, c->pfd, (unsigned)bd_poll_events(c->t, BD_WANT_WRITE));
	io_uring_sqe_set_data64(sqe, ud(c, TAG_POLL_OUT));
	c->poll_out = true;
	c->io_pending++;
}

static void cancel_ud(struct worker *w, uint64_t data)
{
	struct io_uring_sqe *sqe = get_sqe(w);

	io_uring_prep_cancel64(sqe, data, 0);
	io_uring_sqe_set_data64(sqe, ud(w, TAG_IGNORE));
}

/* --- connection life ----------------------------------------------------- */

static void req_free(struct req *q);

static void conn_destroy(struct conn *c)
{
	struct worker *w = c->w;
	struct engine *e = w->e;
	void *owner;

	while (c->tx_head) {
		struct req *q = c->tx_head;

		c->tx_head = q->next;
		req_free(q);
	}
	if (c->rx_req)
		req_free(c->rx_req);
	if (c->skip_req)
		req_free(c->skip_req);
	mem_unlink(c);
	addr_share_put(c);
	if (c->prev)
		c->prev->next = c->next;
	else
		w->conns = c->next;
	if (c->next)
		c->next->prev = c->prev;
	log_rated(LOGRATE_SESSION, c->t->peer, SMCR_LOG_INFO,
		  "client %s: export '%s' closed (%llu requests, %llu bytes read, "
		  "%llu bytes written)", c->t->peer, c->exp->spec.name,
		  (unsigned long long)c->nreq, (unsigned long long)c->rbytes,
		  (unsigned long long)c->wbytes);
	owner = c->owner;
	bd_close(c->t);
	export_put(c->exp);
	free(c->pins);
	free(c->rbuf);
	free(c);
	__atomic_sub_fetch(&w->nconns, 1, __ATOMIC_RELAXED);
	__atomic_sub_fetch(&e->conns, 1, __ATOMIC_RELAXED);
	if (e->p.closed)
		e->p.closed(e->p.closed_arg, owner);
}

static void conn_maybe_destroy(struct conn *c)
{
	if (c->closing && c->io_pending == 0 && !c->kicked && !c->dirty)
		conn_destroy(c);
}

/* Stops everything; the connection goes once its SQEs have completed. */
static void conn_close(struct conn *c, const char *why)
{
	if (c->closing)
		return;
	if (why)
		log_rated(LOGRATE_SESSION, c->t->peer, SMCR_LOG_INFO, "client %s: %s",
			  c->t->peer, why);
	c->closing = true;
	c->rx_stop = true;
	if (c->poll_in)
		cancel_ud(c->w, ud(c, TAG_POLL_IN));
	if (c->poll_out)
		cancel_ud(c->w, ud(c, TAG_POLL_OUT));
	if (c->rx_armed)
		cancel_ud(c->w, ud(c, TAG_RECV));
	if (c->tx_busy)
		cancel_ud(c->w, ud(c, TAG_SEND));
	/* Destroyed at a safe point (conn_maybe_destroy callers). */
}

/* Closes once nothing is left to do (after DISC, EOF, or when draining). */
static void conn_maybe_finish(struct conn *c)
{
	if (c->closing || c->inflight || c->tx_head)
		return;
	if (c->rx_stop)
		conn_close(c, NULL);
}

/* --- zero-copy receive -------------------------------------------------- */

/* Gives the transport back what is parsed and not pinned. */
static void zc_release(struct conn *c)
{
	unsigned cap = c->w->e->p.queue_depth;
	uint64_t target;
	int r;

	while (c->pin_cnt && c->pins[c->pin_head].done) {
		c->pin_head = (c->pin_head + 1) % cap;
		c->pin_cnt--;
	}
	target = c->pin_cnt ? c->pins[c->pin_head].start : c->rx_pos;
	if (target <= c->rx_cons || c->closing)
		return;
	r = c->t->ops->rx_consume(c->t, (size_t)(target - c->rx_cons));
	if (r < 0) {
		char why[96];

		snprintf(why, sizeof(why), "consume failed: %s", strerror(-r));
		conn_close(c, why);
		return;
	}
	c->rx_cons = target;
}

/* The payload of q is on disk (or failed): its bytes may go. */
static void zc_unpin(struct req *q)
{
	struct conn *c = q->c;

	if (!q->zc)
		return;
	q->zc = false;
	c->pins[q->pin].done = true;
	zc_release(c);
	/* Window space came free: there may be more to read. */
	conn_kick(c);
}

/* Copies len bytes at off of a two-piece window. */
static void win_copy(const struct iovec win[2], uint64_t off, void *dst, size_t len)
{
	uint8_t *d = dst;
	int i;

	for (i = 0; i < 2 && len; i++) {
		size_t n;

		if (off >= win[i].iov_len) {
			off -= win[i].iov_len;
			continue;
		}
		n = win[i].iov_len - off;
		if (n > len)
			n = len;
		memcpy(d, (uint8_t *)win[i].iov_base + off, n);
		d += n;
		len -= n;
		off = 0;
	}
}

/* Copies len bytes into a two-piece window at off. */
static void win_put(const struct iovec win[2], uint64_t off, const void *src, size_t len)
{
	const uint8_t *p = src;
	int i;

	for (i = 0; i < 2 && len; i++) {
		size_t n;

		if (off >= win[i].iov_len) {
			off -= win[i].iov_len;
			continue;
		}
		n = win[i].iov_len - off;
		if (n > len)
			n = len;
		memcpy((uint8_t *)win[i].iov_base + off, p, n);
		p += n;
		len -= n;
		off = 0;
	}
}

/* The window pieces covering [off, off + len). */
static int win_slice(const struct iovec win[2], uint64_t off, size_t len, struct iovec out[2])
{
	int i, cnt = 0;

	for (i = 0; i < 2 && len; i++) {
		size_t n;

		if (off >= win[i].iov_len) {
			off -= win[i].iov_len;
			continue;
		}
		n = win[i].iov_len - off;
		if (n > len)
			n = len;
		out[cnt].iov_base = (uint8_t *)win[i].iov_base + off;
		out[cnt].iov_len = n;
		cnt++;
		len -= n;
		off = 0;
	}
	if (cnt < 2) {
		out[cnt].iov_base = NULL;
		out[cnt].iov_len = 0;
	}
	return cnt;
}

/* The remaining pieces of a zero-copy WRITE after done bytes. */
static int zc_remaining(struct req *q)
{
	uint64_t skip = q->done;
	int i, cnt = 0;

	for (i = 0; i < 2; i++) {
		if (skip >= q->zc_iov[i].iov_len) {
			skip -= q->zc_iov[i].iov_len;
			continue;
		}
		q->zc_cur[cnt].iov_base = (uint8_t *)q->zc_iov[i].iov_base + skip;
		q->zc_cur[cnt].iov_len = q->zc_iov[i].iov_len - skip;
		skip = 0;
		cnt++;
	}
	return cnt;
}

/* --- replies ------------------------------------------------------------ */

/* The bytes of a copied WRITE payload that buf holds at a time: from part
 * on, one chunk or the rest (a payload in place: all of it). */
static uint64_t chunk_len(const struct req *q)
{
	uint64_t left = q->r.length - q->part;

	if (q->zc)
		return q->r.length;
	return left < WRITE_CHUNK ? left : WRITE_CHUNK;
}

static struct req *req_new(struct conn *c)
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
	c->inflight++;
	c->nreq++;
	__atomic_add_fetch(&w->stats.requests, 1, __ATOMIC_RELAXED);
	return q;
}

static void req_free(struct req *q)
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
		buf_put(w, q->buf_class, q->buf, q->buf_slot);
		q->buf = NULL;
		if (w->mem_head)
			mem_wake(w);
	}
	c->inflight--;
	if (c->rx_blocked) {
		c->rx_blocked = false;
		conn_kick(c);
	}
	q->next = w->req_free;
	w->req_free = q;
}

/* Reserves the whole reply of READ q in the transport's send buffer, for
 * the file data to be read straight into it (SMC-R: registered memory the
 * RDMA writes go from).  Only behind other reserved replies: bytes given
 * to writev may not pass a reservation.  False: take the copy path. */
static bool tx_reserve_read(struct conn *c, struct req *q)
{
	const struct req *p;

	if (!c->t->ops->tx_reserve || c->closing || !q->r.length)
		return false;
	for (p = c->tx_head; p; p = p->next)
		if (!p->zc_tx)
			return false;
	nbd_reply_build_read_stream(&c->tp, &q->r, &q->rb);
	if (c->t->ops->tx_reserve(c->t, q->rb.head_len + q->r.length + q->rb.tail_len,
				  q->tx_win) < 0)
		return false;
	win_put(q->tx_win, 0, q->rb.head, q->rb.head_len);
	q->zc_tx = true;
	q->next = NULL;
	if (c->tx_tail)
		c->tx_tail->next = q;
	else
		c->tx_head = q;
	c->tx_tail = q;
	return true;
}

/* Queues the reply of q (data_len bytes of q->buf for READ). */
static void req_reply(struct req *q, uint32_t error, uint32_t data_len)
{
	struct conn *c = q->c;

	if (c->closing) {
		req_free(q);
		return;
	}
	zc_unpin(q);
	q->error = error;
	nbd_reply_build(&c->tp, &q->r, error, data_len, q->err_off, q->msg, &q->rb);
	if (q->r.type == NBD_CMD_READ)
		c->rbytes += q->rb.data_len;
	else if (q->r.type == NBD_CMD_WRITE && !error)
		c->wbytes += q->r.length;
	q->next = NULL;
	if (c->tx_tail)
		c->tx_tail->next = q;
	else
		c->tx_head = q;
	c->tx_tail = q;
	conn_dirty(c);
}

/* n bytes of the tx queue went out: frees the replies sent completely. */
static void tx_retire(struct conn *c, size_t n)
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

/* Ring socket: sendmsg of iov[cnt] (copied) as one SQE; zero-copy (the
 * buffers are held until the kernel's notification) if zc. */
static void tx_submit(struct conn *c, const struct iovec *iov, int cnt, bool zc)
{
	struct io_uring_sqe *sqe = get_sqe(c->w);

	memcpy(c->tx_iov, iov, (size_t)cnt * sizeof(*iov));
	memset(&c->tx_msg, 0, sizeof(c->tx_msg));
	c->tx_msg.msg_iov = c->tx_iov;
	c->tx_msg.msg_iovlen = (size_t)cnt;
	if (zc)
		io_uring_prep_sendmsg_zc(sqe, c->pfd, &c->tx_msg, MSG_NOSIGNAL | MSG_WAITALL);
	else
		io_uring_prep_sendmsg(sqe, c->pfd, &c->tx_msg, MSG_NOSIGNAL | MSG_WAITALL);
	c->tx_zc = zc;
	c->tx_zc_res = 0;
	io_uring_sqe_set_data64(sqe, ud(c, TAG_SEND));
	c->tx_busy = true;
	c->io_pending++;
}

static void conn_flush(struct conn *c)
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
			r = c->t->ops->tx_commit(c->t, q->rb.head_len + q->r.length +
						 q->rb.tail_len);
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
		if (!file_next && c->ring) {
			tx_submit(c, iov, cnt, c->w->e->read_reply == RR_ZC &&
				  total >= SENDFILE_MIN);
			/* All the connection owes: its CQE is bookkeeping.
			 * Small sends only: a large one waits for socket
			 * space, and with DEFER_TASKRUN its retry runs only
			 * once the wait ends. */
			if (!q && nq == c->inflight && total < LAZY_MAX)
				c->w->lazy++;
			return;
		}
		if (!file_next) {
			n = bd_writev(c->t, iov, cnt);
		} else {
			total += flen;
			n = c->t->ops->send_file(c->t, iov, cnt, c->exp->fd, &foff, flen);
			if (n == 0)
				n = -EIO;	/* the file shrank under us */
		}
		if (n == -EAGAIN) {
			arm_poll_out(c);
			return;
		}
		if (n < 0) {
			char why[96];

			snprintf(why, sizeof(why), "send failed: %s", strerror((int)-n));
			conn_close(c, n == -EPIPE || n == -ECONNRESET ? "client went away" : why);
			return;
		}
		tx_retire(c, (size_t)n);
		if ((size_t)n < total) {
			arm_poll_out(c);
			return;
		}
	}
	conn_maybe_finish(c);
}

/* --- request execution ---------------------------------------------------- */

static void req_submit(struct req *q);
static void chunk_written(struct req *q, int res);

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
	bool whole = q->zc || (!q->part && chunk_len(q) == q->r.length);
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
 * for NBD_BS_MAX_EXTENTS descriptors).  The lseeks are done by the worker
 * (file systems answer them from their extent maps), in bs_run's slices. */
static void block_status(struct req *q)
{
	struct export *e = q->c->exp;
	struct nbd_extent ext[NBD_BS_MAX_EXTENTS];
	unsigned n;

	if (e->rbd)
		n = smcrd_rbd_extents(e->rbd, q->r.offset, q->r.length, q->c->tp.min_block,
				      q->r.flags & NBD_CMD_FLAG_REQ_ONE, ext, NBD_BS_MAX_EXTENTS);
	else
		n = extents_scan(e->fd, !e->blockdev, q->r.offset, q->r.length,
				 q->c->tp.min_block, q->r.flags & NBD_CMD_FLAG_REQ_ONE, ext,
				 NBD_BS_MAX_EXTENTS);
	nbd_extents_encode(ext, n, q->buf);
	req_reply(q, 0, n * (uint32_t)sizeof(struct nbd_block_descriptor_wire));
}

/* Starts a request that passed the checks. */
static void req_start(struct req *q)
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
			c->rbytes += q->r.length;
			q->next = NULL;
			if (c->tx_tail)
				c->tx_tail->next = q;
			else
				c->tx_head = q;
			c->tx_tail = q;
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
			q->r.length = (uint32_t)(end - first);
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

/* Ring socket: the reply to a READ or WRITE q may be sent by a sendmsg
 * linked to its file I/O when nothing else is in flight on the connection
 * (the reply is then the next bytes of the stream; the link breaks, and
 * the send is cancelled, if the I/O fails or comes short). */
static bool link_ok(const struct conn *c, const struct req *q)
{
	if (!c->ring || c->exp->rbd || c->closing || c->tx_busy || c->tx_head ||
	    c->inflight != 1 ||
	    q->done || !q->buf || !q->r.length ||
	    io_uring_sq_space_left((struct io_uring *)&c->w->ring) < 2)
		return false;
	if (q->phase == PH_READ)
		return !q->zc_tx;
	return q->phase == PH_WRITE && !q->zc && !q->part && chunk_len(q) == q->r.length;
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
	tx_submit(c, iov, cnt, false);
	if (q->rb.head_len + q->rb.data_len + q->rb.tail_len < LAZY_MAX)
		c->w->lazy += 2;	/* the file I/O's CQE and the send's */
	c->tx_link = q;
	q->linked = true;
	q->lk_done = 0;
}

static void worker_wake(struct worker *w);

/* An RBD operation of q is over (in a librbd thread): to q's worker. */
static void rbd_done(void *arg, int res)
{
	struct req *q = arg;
	struct worker *w = q->c->w;

	q->rbd_res = res;
	pthread_mutex_lock(&w->lock);
	q->rbd_next = w->rbd_done;
	w->rbd_done = q;
	pthread_mutex_unlock(&w->lock);
	worker_wake(w);
}

/* req_submit for an RBD export: the phase as a librbd operation, which
 * ends in rbd_done (and req_complete on the worker). */
static void rbd_submit(struct req *q)
{
	struct conn *c = q->c;
	uint64_t off = q->r.offset + q->part + q->done;
	uint64_t left = (q->phase == PH_WRITE ? chunk_len(q) : q->r.length) - q->done;
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
			cnt = win_slice(q->tx_win, q->rb.head_len + q->done, left, q->zc_cur);
			iov = q->zc_cur;
		}
		break;
	case PH_WRITE:
		op = RBD_IO_WRITE;
		if (q->zc) {
			iov = q->zc_cur;
			cnt = (int)zc_remaining(q);
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

static void req_submit(struct req *q)
{
	struct conn *c = q->c;
	struct export *e = c->exp;
	bool link;
	struct io_uring_sqe *sqe;
	uint64_t off = q->r.offset + q->part + q->done;
	uint64_t left = (q->phase == PH_WRITE ? chunk_len(q) : q->r.length) - q->done;
	uint8_t *p = (uint8_t *)q->buf + q->done;

	if (e->rbd) {
		rbd_submit(q);
		return;
	}
	link = link_ok(c, q);
	sqe = get_sqe(c->w);
	switch (q->phase) {
	case PH_READ:
		if (q->zc_tx) {
			/* Into the reserved reply, after its header; that
			 * memory need not suit O_DIRECT: the buffered fd. */
			int cnt = win_slice(q->tx_win, q->rb.head_len + q->done, left, q->zc_cur);

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
			io_uring_prep_writev(sqe, e->fd, q->zc_cur, (unsigned)zc_remaining(q), off);
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

static void link_resolve(struct req *q);

/* The file operation of q ended with res: next phase, or the reply. */
static void req_finish(struct req *q, int res)
{
	struct conn *c = q->c;
	struct export *e = c->exp;

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
		q->done += (uint64_t)res;
		if (q->done < q->r.length) {
			req_submit(q);
			return;
		}
		win_put(q->tx_win, q->rb.head_len + q->r.length, q->rb.tail, q->rb.tail_len);
		q->tx_ready = true;
		c->rbytes += q->r.length;
		conn_dirty(c);
		return;
	}
	if (c->rx_chunk == q) {
		/* A chunk of a payload still coming. */
		if (res > 0 && (q->done += (uint64_t)res) < chunk_len(q)) {
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
		q->done += (uint64_t)res;
		if (q->done < (q->phase == PH_WRITE ? chunk_len(q) : q->r.length)) {
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

static void req_complete(struct req *q, int res)
{
	struct conn *c = q->c;
	struct worker *w = c->w;

	c->io_pending--;
	if (w->io_inflight-- == IO_LIMIT && w->mem_head)
		mem_wake(w);
	if (q->linked) {
		q->lk_rres = res;
		q->lk_done |= LK_READ;
		if (q->lk_done & LK_SEND)
			link_resolve(q);
		return;
	}
	req_finish(q, res);
}

/* Both CQEs of a linked READ + reply send are in. */
static void link_resolve(struct req *q)
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
	if (q->phase == PH_READ)
		c->rbytes += q->r.length;
	else
		c->wbytes += q->r.length;
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

/* --- receive ---------------------------------------------------------------- */

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
	if (q->part + chunk_len(q) == q->r.length) {
		req_start(q);
		return;
	}
	c->rx_chunk = q;
	q->phase = PH_WRITE;
	req_submit(q);
}

/* A chunk of q (not its last) is written, or its write failed (res):
 * receive the next one into buf, or drop the rest of the payload and
 * answer the error once it is gone. */
static void chunk_written(struct req *q, int res)
{
	struct conn *c = q->c;
	uint64_t next = q->part + chunk_len(q);

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

	if (r->length < SENDFILE_MIN || !c->t->ops->send_file || c->exp->dfd >= 0 ||
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

/* Handles one request header.  zc_ready: the transport holds the whole
 * WRITE payload in place (rx_peek) and it can be written from there.
 * Returns RX_AGAIN (header used, go on), RX_STOP (header used, stop),
 * RX_RETRY (header not used: try again later) or RX_ZC (header used, *zq
 * is a WRITE to be started from the transport's memory). */
static int rx_parse_hdr(struct conn *c, const struct nbd_request_wire *w, bool zc_ready,
			struct req **zq)
{
	struct nbd_request r;
	const char *msg = NULL;
	uint32_t err;
	struct req *q;

	if (nbd_request_decode(w, &r) < 0) {
		log_rated(LOGRATE_PROTOCOL, c->t->peer, SMCR_LOG_WARN,
			  "client %s: bad request magic: dropping the connection", c->t->peer);
		conn_close(c, NULL);
		return RX_STOP;
	}
	err = nbd_request_check(&c->tp, &r, &msg);
	if (r.type == NBD_CMD_DISC) {
		c->rx_stop = true;
		log_dbg("client %s: NBD_CMD_DISC", c->t->peer);
		conn_maybe_finish(c);
		return RX_STOP;
	}
	if (c->drain && !err) {
		err = NBD_ESHUTDOWN;
		msg = "server is shutting down";
	}
	if (c->w->io_inflight >= IO_LIMIT) {
		mem_wait(c, "I/O");
		return RX_RETRY;
	}
	q = req_new(c);
	if (!q) {
		conn_close(c, "out of memory");
		return RX_STOP;
	}
	q->r = r;
	if (!err && r.type == NBD_CMD_READ && read_by_send_file(c, &r)) {
		q->from_file = true;
		__atomic_add_fetch(&c->w->stats.file_reads, 1, __ATOMIC_RELAXED);
	} else if (!err && r.type == NBD_CMD_READ && tx_reserve_read(c, q)) {
		__atomic_add_fetch(&c->w->stats.zc_reads, 1, __ATOMIC_RELAXED);
	} else if (!err && r.type == NBD_CMD_WRITE && r.length && zc_ready) {
		q->zc = true;
	} else if (!err && ((r.length && (r.type == NBD_CMD_READ || r.type == NBD_CMD_WRITE)) ||
			    r.type == NBD_CMD_BLOCK_STATUS)) {
		uint64_t need = r.type == NBD_CMD_BLOCK_STATUS ? BS_BUF_SIZE :
				r.type == NBD_CMD_WRITE && r.length > WRITE_CHUNK ? WRITE_CHUNK :
				r.length;
		uint64_t size = (uint64_t)1 << (size_class(need) + POOL_MIN_SHIFT);
		bool blocked;

		/* One client may hold a quarter of the worker's memory: a client
		 * that does not read its replies stalls only itself. */
		if (c->mem_used && c->mem_used + size > c->w->mem_limit / 4) {
			req_free(q);
			c->nreq--;
			c->rx_blocked = true;
			return RX_RETRY;
		}
		/* One address may hold its share of the worker's memory, however
		 * many connections it opens: the others keep the rest.  Its
		 * buffers come back on this worker, which then wakes it. */
		bool by_addr = c->as->used && c->w->addr_limit &&
			       c->as->used + size > c->w->addr_limit;

		blocked = by_addr;
		q->buf = blocked ? NULL :
			 buf_get(c->w, need, &q->buf_class, &q->buf_slot, &blocked);
		if (q->buf) {
			c->mem_used += size;
			c->as->used += size;
		}
		if (!q->buf) {
			req_free(q);
			c->nreq--;
			if (blocked) {
				if (by_addr)
					addr_limit_log(c);
				mem_wait(c, by_addr ? "per-address memory" : "memory");
				return RX_RETRY;
			}
			err = NBD_ENOMEM;
			msg = "out of memory";
			q = req_new(c);
			if (!q) {
				conn_close(c, "out of memory");
				return RX_STOP;
			}
			q->r = r;
		}
	}
	if (err) {
		log_dbg("client %s: %s off=%llu len=%u flags=0x%x: error %u: %s",
			c->t->peer, nbd_cmd_name(r.type), (unsigned long long)r.offset,
			r.length, r.flags, err, msg);
		q->msg = msg;
		if (r.type == NBD_CMD_WRITE && r.length) {
			c->skip = r.length;
			c->skip_req = q;
			q->error = err;
			return RX_AGAIN;
		}
		req_reply(q, err, 0);
		return RX_AGAIN;
	}
	if (q->zc) {
		__atomic_add_fetch(&c->w->stats.zc_writes, 1, __ATOMIC_RELAXED);
		*zq = q;
		return RX_ZC;
	}
	if (r.type == NBD_CMD_WRITE && r.length) {
		c->rx_req = q;
		return RX_AGAIN;
	}
	req_start(q);
	return RX_AGAIN;
}

static int rx_parse(struct conn *c)
{
	int r = rx_parse_hdr(c, (const struct nbd_request_wire *)(c->rbuf + c->rstart), false,
			     NULL);

	if (r != RX_RETRY)
		c->rstart += sizeof(struct nbd_request_wire);
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
		ssize_t n = c->t->ops->rx_peek(c->t, win);

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
				uint64_t need = chunk_len(q) - q->done;
				uint64_t take = avail < need ? avail : need;

				win_copy(win, off, (uint8_t *)q->buf + q->done, take);
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
			if (avail < sizeof(struct nbd_request_wire))
				break;
			if (c->inflight >= qd) {
				c->rx_blocked = true;
				break;
			}
			{
				struct nbd_request_wire w;
				struct nbd_request peek;
				struct req *q = NULL;
				bool ready = false;
				int r;

				win_copy(win, off, &w, sizeof(w));
				if (nbd_request_decode(&w, &peek) == 0 &&
				    peek.type == NBD_CMD_WRITE &&
				    avail - sizeof(w) >= peek.length &&
				    c->pin_cnt < qd)
					ready = true;
				r = rx_parse_hdr(c, &w, ready, &q);
				if (r == RX_RETRY)
					break;
				c->rx_pos += sizeof(w);
				if (r == RX_STOP)
					break;
				if (r == RX_ZC) {
					unsigned slot = (c->pin_head + c->pin_cnt) % qd;

					win_slice(win, off + sizeof(w), q->r.length, q->zc_iov);
					c->pins[slot].start = c->rx_pos;
					c->pins[slot].done = false;
					c->pin_cnt++;
					q->pin = slot;
					c->rx_pos += q->r.length;
					req_start(q);
				}
			}
		}
		zc_release(c);
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
	if (!c->t->ops->rx_lowat)
		return;
	if (need < LOWAT_MIN)
		need = 1;
	else if (need > LOWAT_MAX)
		need = LOWAT_MAX;
	c->t->ops->rx_lowat(c->t, (size_t)need);
}

/* Ring socket: one recv of up to len bytes into p (rx_req's buffer or
 * rbuf); rx_done takes its result. */
static void rx_arm(struct conn *c, void *p, size_t len, bool into_req)
{
	struct io_uring_sqe *sqe = get_sqe(c->w);

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

static void rx_done(struct conn *c, int res)
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
	if (c->rx_into_req)
		c->rx_req->done += (uint64_t)res;
	else
		c->rend += (uint32_t)res;
	c->last_rx_ms = c->drain ? now_ms() : 0;
	c->rx_progress_ms = now_ms();
	conn_kick(c);
}

static void rx_pump(struct conn *c)
{
	struct worker *w = c->w;
	unsigned qd = w->e->p.queue_depth;

	if (c->zc) {
		rx_pump_zc(c);
		return;
	}
	while (!c->closing && !c->rx_stop && !c->mem_blocked && !c->rx_chunk) {
		uint32_t avail = c->rend - c->rstart;
		struct iovec iov[2];
		ssize_t n;

		if (c->rx_req) {
			struct req *q = c->rx_req;
			uint64_t need = chunk_len(q) - q->done;
			uint32_t take = avail < need ? avail : (uint32_t)need;

			memcpy((uint8_t *)q->buf + q->done, c->rbuf + c->rstart, take);
			c->rstart += take;
			q->done += take;
			need -= take;
			if (need && c->ring) {
				/* rbuf is empty: the payload goes straight in. */
				if (!c->rx_armed) {
					rx_wait(c, need);
					rx_arm(c, (uint8_t *)q->buf + q->done, need, true);
				}
				return;
			}
			if (need) {
				if (c->rx_short) {
					rx_wait(c, need);
					return;
				}
				/* The rest of the payload, and what follows. */
				c->rstart = c->rend = 0;
				iov[0].iov_base = (uint8_t *)q->buf + q->done;
				iov[0].iov_len = need;
				iov[1].iov_base = c->rbuf;
				iov[1].iov_len = RBUF_SIZE;
				n = rx_read(c, iov, 2);
				if (n <= 0)
					return;
				if ((uint64_t)n <= need) {
					q->done += (uint64_t)n;
					continue;
				}
				q->done += need;
				c->rend = (uint32_t)((uint64_t)n - need);
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
		} else if (avail >= sizeof(struct nbd_request_wire)) {
			if (c->inflight >= qd) {
				c->rx_blocked = true;
				return;
			}
			if (rx_parse(c) == RX_STOP)
				return;
			continue;
		}
		/* Need more bytes. */
		if (c->ring && c->rx_armed)
			return;
		if (c->rx_short && !c->ring) {
			rx_wait(c, 1);
			return;
		}
		if (c->rstart == c->rend) {
			c->rstart = c->rend = 0;
		} else if (c->rstart > RBUF_SIZE / 2) {
			memmove(c->rbuf, c->rbuf + c->rstart, c->rend - c->rstart);
			c->rend -= c->rstart;
			c->rstart = 0;
		}
		if (c->ring) {
			rx_wait(c, 1);
			rx_arm(c, c->rbuf + c->rend, RBUF_SIZE - c->rend, false);
			return;
		}
		iov[0].iov_base = c->rbuf + c->rend;
		iov[0].iov_len = RBUF_SIZE - c->rend;
		n = rx_read(c, iov, 1);
		if (n <= 0)
			return;
		c->rend += (uint32_t)n;
	}
}

/* --- worker ------------------------------------------------------------- */

static void arm_timer(struct worker *w);

static void conn_start(struct worker *w, struct conn *c)
{
	c->w = w;
	c->next = w->conns;
	if (w->conns)
		w->conns->prev = c;
	w->conns = c;
	if (addr_share_get(c) < 0) {
		log_warn("client %s: out of memory: closing", c->t->peer);
		conn_destroy(c);
		return;
	}
	if (w->draining)
		c->drain = true;
	c->rx_progress_ms = now_ms();
	c->tx_seen_ms = c->rx_progress_ms;
	c->tx_seen_outq = -1;
	if (w->e->p.request_timeout_ms)
		arm_timer(w);
	if (!c->ring)
		arm_poll_in(c);
	/* Requests may have arrived with the handshake. */
	conn_kick(c);
}

static void arm_timer(struct worker *w)
{
	struct io_uring_sqe *sqe;

	if (w->timer_armed)
		return;
	sqe = get_sqe(w);
	w->tick.tv_sec = 0;
	w->tick.tv_nsec = DRAIN_TICK_MS * 1000000L;
	io_uring_prep_timeout(sqe, &w->tick, 0, 0);
	io_uring_sqe_set_data64(sqe, ud(w, TAG_TIMER));
	w->timer_armed = true;
}

static void drain_check(struct worker *w)
{
	uint64_t now = now_ms();
	bool force = now >= w->drain_deadline;
	struct conn *c, *next;

	for (c = w->conns; c; c = next) {
		next = c->next;
		if (c->closing)
			continue;
		if (force) {
			conn_close(c, "drain timeout: closing");
			conn_maybe_destroy(c);
			continue;
		}
		if (!c->last_rx_ms)
			c->last_rx_ms = now;
		if (!c->inflight && !c->tx_head && !c->rx_req && !c->skip_req &&
		    now - c->last_rx_ms >= w->e->p.drain_idle_ms) {
			conn_close(c, "drained: closing");
			conn_maybe_destroy(c);
		}
	}
}

/* Whether c's replies stood still since the last look: nothing handed to
 * the transport and, on a socket, its send queue unchanged (the client
 * reads nothing).  No replies waiting counts as moving. */
static bool tx_stalled(struct conn *c, uint64_t now, uint64_t limit)
{
	int outq = -1;

	/* Nothing waits to go, or the disk has yet to fill a linked READ. */
	if ((!c->tx_head && !c->tx_busy) ||
	    (c->tx_link && !(c->tx_link->lk_done & LK_READ))) {
		c->tx_seen_ms = now;
		return false;
	}
	if (c->ring || !strcmp(c->t->ops->name, "tcp") || !strcmp(c->t->ops->name, "tls"))
		if (ioctl(c->pfd, SIOCOUTQ, &outq) < 0)
			outq = -1;
	if (c->tx_bytes != c->tx_seen || outq != c->tx_seen_outq) {
		c->tx_seen = c->tx_bytes;
		c->tx_seen_outq = outq;
		c->tx_seen_ms = now;
		return false;
	}
	return now - c->tx_seen_ms >= limit;
}

/* Connections in the middle of a request's payload that sent nothing for
 * request_timeout_ms, or whose replies the client did not read for as
 * long: closed, their buffers freed (a client that announces a large WRITE
 * and stops, or asks for large READs and reads nothing, must not hold
 * memory others wait for). */
static void stall_check(struct worker *w)
{
	uint64_t now = now_ms(), limit = w->e->p.request_timeout_ms;
	struct conn *c, *next;

	for (c = w->conns; c; c = next) {
		bool tx;

		next = c->next;
		if (c->closing)
			continue;
		tx = tx_stalled(c, now, limit);
		if (!tx && (!(c->rx_req || c->skip_req) || now - c->rx_progress_ms < limit))
			continue;
		__atomic_add_fetch(&w->stats.request_timeouts, 1, __ATOMIC_RELAXED);
		if (now - w->stall_logged_ms >= 10000) {
			log_warn("client %s: %s for %llu ms (request-timeout): closing "
				 "(%lu more like this not logged)", c->t->peer,
				 tx ? "replies not read" : "request payload stalled",
				 (unsigned long long)(now - (tx ? c->tx_seen_ms : c->rx_progress_ms)),
				 w->stall_unlogged);
			w->stall_logged_ms = now;
			w->stall_unlogged = 0;
		} else {
			w->stall_unlogged++;
		}
		conn_close(c, tx ? "reply timeout: closing" : "request timeout: closing");
		conn_maybe_destroy(c);
	}
}

static void take_incoming(struct worker *w)
{
	struct conn *list;
	struct req *done, *rev = NULL;
	bool drain;

	pthread_mutex_lock(&w->lock);
	list = w->incoming;
	w->incoming = NULL;
	done = w->rbd_done;
	w->rbd_done = NULL;
	drain = w->drain_req;
	pthread_mutex_unlock(&w->lock);
	/* RBD completions, oldest first. */
	while (done) {
		struct req *q = done;

		done = q->rbd_next;
		q->rbd_next = rev;
		rev = q;
	}
	while (rev) {
		struct req *q = rev;

		rev = q->rbd_next;
		req_complete(q, q->rbd_res);
	}
	while (list) {
		struct conn *c = list;

		list = c->next;
		c->next = c->prev = NULL;
		conn_start(w, c);
	}
	if (drain && !w->draining) {
		struct conn *c;

		w->draining = true;
		w->drain_deadline = now_ms() + w->e->p.drain_timeout_ms;
		for (c = w->conns; c; c = c->next) {
			c->drain = true;
			c->last_rx_ms = now_ms();
		}
		arm_timer(w);
	}
}

static void arm_wake(struct worker *w)
{
	struct io_uring_sqe *sqe = get_sqe(w);

	io_uring_prep_read(sqe, w->evfd, &w->evbuf, sizeof(w->evbuf), 0);
	io_uring_sqe_set_data64(sqe, ud(w, TAG_WAKE));
}

static void handle_cqe(struct worker *w, struct io_uring_cqe *cqe)
{
	uint64_t data = io_uring_cqe_get_data64(cqe);
	void *p = (void *)(uintptr_t)(data & ~TAG_MASK);
	struct conn *c;
	int cqe_res = cqe->res;

	switch ((enum tag)(data & TAG_MASK)) {
	case TAG_REQ:
		c = ((struct req *)p)->c;
		req_complete(p, cqe->res);
		conn_maybe_destroy(c);
		break;
	case TAG_POLL_IN:
		c = p;
		if (!(cqe->flags & IORING_CQE_F_MORE)) {
			c->poll_in = false;
			c->io_pending--;
			if (!c->closing && cqe->res >= 0)
				arm_poll_in(c);
		}
		if (c->closing) {
			conn_maybe_destroy(c);
			break;
		}
		c->rx_short = false;
		if (cqe->res < 0 && cqe->res != -ECANCELED) {
			log_warn("client %s: poll: %s", c->t->peer, strerror(-cqe->res));
			conn_close(c, NULL);
			conn_maybe_destroy(c);
			break;
		}
		conn_kick(c);
		/* One fd for both directions (SMC-R's eventfd): the read
		 * path's look-again may have drained the wake-up meant for a
		 * POLL_OUT armed after it, which then never fires.  Every
		 * wake-up reaches this multishot poll: retry the send too. */
		if (c->poll_out && bd_poll_events(c->t, BD_WANT_READ) ==
		    bd_poll_events(c->t, BD_WANT_WRITE))
			conn_dirty(c);
		break;
	case TAG_POLL_OUT:
		c = p;
		c->poll_out = false;
		c->io_pending--;
		if (c->closing) {
			conn_maybe_destroy(c);
			break;
		}
		conn_dirty(c);
		break;
	case TAG_RECV:
		c = p;
		c->rx_armed = false;
		c->io_pending--;
		if (!c->closing)
			rx_done(c, cqe->res);
		conn_maybe_destroy(c);
		break;
	case TAG_SEND:
		c = p;
		if (c->tx_zc && (cqe->flags & IORING_CQE_F_MORE)) {
			/* Zero-copy: the buffers are the kernel's until the
			 * notification, which ends the send. */
			c->tx_zc_res = cqe->res;
			break;
		}
		c->io_pending--;
		if (c->tx_zc && (cqe->flags & IORING_CQE_F_NOTIF))
			cqe_res = c->tx_zc_res;
		if (c->tx_link) {
			struct req *q = c->tx_link;

			q->lk_sres = cqe_res;
			q->lk_done |= LK_SEND;
			if (q->lk_done & LK_READ)
				link_resolve(q);
			conn_maybe_destroy(c);
			break;
		}
		c->tx_busy = false;
		if (c->closing) {
			conn_maybe_destroy(c);
			break;
		}
		if (cqe_res < 0 && cqe_res != -EINTR && cqe_res != -EAGAIN) {
			char why[96];

			snprintf(why, sizeof(why), "send failed: %s", strerror(-cqe_res));
			conn_close(c, cqe_res == -EPIPE || cqe_res == -ECONNRESET ?
				   "client went away" : why);
			conn_maybe_destroy(c);
			break;
		}
		if (cqe_res > 0)
			tx_retire(c, (size_t)cqe_res);
		conn_dirty(c);
		break;
	case TAG_WAKE:
		take_incoming(w);
		arm_wake(w);
		break;
	case TAG_TIMER:
		w->timer_armed = false;
		if (w->draining)
			drain_check(w);
		if (w->e->p.request_timeout_ms)
			stall_check(w);
		if (w->conns && (w->draining || w->e->p.request_timeout_ms))
			arm_timer(w);
		break;
	case TAG_IGNORE:
		break;
	}
}

/* Runs kicked connections (reading) and dirty ones (sending) until both
 * lists are empty. */
static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000 + (uint64_t)ts.tv_nsec;
}

/* Queued BLOCK_STATUS requests for up to BS_SLICE_NS (one at least). */
static void bs_run(struct worker *w)
{
	uint64_t end = now_ns() + BS_SLICE_NS;
	struct req *q;

	while ((q = w->bs_head)) {
		struct conn *c = q->c;

		w->bs_head = q->next;
		if (!w->bs_head)
			w->bs_tail = NULL;
		c->io_pending--;
		if (c->closing) {
			req_free(q);
			conn_maybe_destroy(c);
		} else {
			block_status(q);
		}
		if (now_ns() >= end)
			break;
	}
}

static void run_lists(struct worker *w)
{
	unsigned rounds;

	for (rounds = 0; rounds < 64 && (w->kick_head || w->dirty_head); rounds++) {
		struct conn *c;

		while ((c = w->kick_head)) {
			w->kick_head = c->kick_next;
			c->kicked = false;
			rx_pump(c);
			conn_maybe_destroy(c);
		}
		while ((c = w->dirty_head)) {
			w->dirty_head = c->dirty_next;
			c->dirty = false;
			conn_flush(c);
			conn_maybe_destroy(c);
		}
	}
}

static int ring_setup(struct worker *w)
{
	static const unsigned tries[] = {
		IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_DEFER_TASKRUN,
		IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_COOP_TASKRUN,
		0,
	};
	struct io_uring_params params;
	unsigned i = 0;
	int r = -EINVAL;

	/* Valgrind (3.19) holds its big lock across io_uring_enter: the
	 * worker then waits in poll(2) on the ring (see worker_wait), which
	 * needs task work to wake the thread: plain ring flags. */
	if (w->e->valgrind)
		i = sizeof(tries) / sizeof(tries[0]) - 1;
	/* The newest flags this kernel takes; SINGLE_ISSUER binds the ring
	 * to this (the worker) thread. */
	for (; i < sizeof(tries) / sizeof(tries[0]); i++) {
		memset(&params, 0, sizeof(params));
		params.flags = IORING_SETUP_CQSIZE | tries[i];
		params.cq_entries = CQ_ENTRIES;
		r = io_uring_queue_init_params(RING_ENTRIES, &w->ring, &params);
		if (r != -EINVAL)
			break;
	}
	if (r < 0 || !w->e->p.fixed_buffers || w->e->valgrind)
		return r;
	/* Pool buffers are registered as they are made (fixed_add). */
	if (io_uring_register_buffers_sparse(&w->ring, FIXED_SLOTS) == 0) {
		w->fixed = true;
		for (i = 0; i < FIXED_SLOTS; i++)
			w->slot_free[i] = (uint16_t)(FIXED_SLOTS - 1 - i);
		w->nslot_free = FIXED_SLOTS;
	}
	return r;
}

/* Submits what is queued and waits for wait_nr completions. */
static int worker_wait(struct worker *w, unsigned wait_nr)
{
	struct pollfd pfd = { .fd = w->ring.ring_fd, .events = POLLIN };
	int r;

	if (!w->e->valgrind) {
		if (wait_nr && w->lazy) {
			/* One io_uring_enter per request, not a second one
			 * for the send's completion. */
			struct __kernel_timespec ts = { .tv_nsec = LAZY_WAIT_NS };
			struct io_uring_cqe *cqe;
			unsigned n = wait_nr + w->lazy;

			w->lazy = 0;
			return io_uring_submit_and_wait_timeout(&w->ring, &cqe, n, &ts, NULL);
		}
		w->lazy = 0;
		return io_uring_submit_and_wait(&w->ring, wait_nr);
	}
	w->lazy = 0;
	r = io_uring_submit(&w->ring);
	if (r < 0 || !wait_nr || io_uring_cq_ready(&w->ring))
		return r;
	if (poll(&pfd, 1, -1) < 0 && errno != EINTR)
		return -errno;
	return 0;
}

static void *worker_main(void *arg)
{
	struct worker *w = arg;
	char name[16];
	int r;

	snprintf(name, sizeof(name), "smcrd-io%u", w->idx);
	pthread_setname_np(pthread_self(), name);
	r = ring_setup(w);
	pthread_mutex_lock(&w->e->start_lock);
	if (r < 0 && !w->e->start_err)
		w->e->start_err = r;
	w->e->start_count++;
	pthread_cond_signal(&w->e->start_cond);
	pthread_mutex_unlock(&w->e->start_lock);
	if (r < 0)
		return NULL;
	arm_wake(w);
	for (;;) {
		struct io_uring_cqe *cqe;
		unsigned head, n = 0;

		run_lists(w);
		if (w->bs_head) {
			bs_run(w);
			run_lists(w);
		}
		if (w->draining && !w->conns && !w->kick_head && !w->dirty_head)
			break;
		r = worker_wait(w, (w->kick_head || w->dirty_head || w->bs_head) ? 0 : 1);
		/* Not waiting: with DEFER_TASKRUN the completions meanwhile
		 * (other clients' polls) are only posted when asked for. */
		if (w->bs_head && !w->e->valgrind)
			io_uring_get_events(&w->ring);
		if (r < 0 && r != -EINTR && r != -EAGAIN && r != -EBUSY && r != -ETIME) {
			log_err("worker %u: io_uring_enter: %s", w->idx, strerror(-r));
			abort();
		}
		io_uring_for_each_cqe(&w->ring, head, cqe) {
			handle_cqe(w, cqe);
			n++;
		}
		io_uring_cq_advance(&w->ring, n);
	}
	io_uring_queue_exit(&w->ring);
	return NULL;
}

static int worker_init(struct engine *e, struct worker *w, unsigned idx)
{
	w->e = e;
	w->idx = idx;
	w->mem_limit = e->p.max_memory / e->nw;
	w->addr_limit = e->p.max_memory_per_address / e->nw;
	w->evfd = eventfd(0, EFD_CLOEXEC);
	if (w->evfd < 0)
		return -errno;
	pthread_mutex_init(&w->lock, NULL);
	return 0;
}

static void worker_fini(struct worker *w)
{
	struct req *q;

	close(w->evfd);
	while ((q = w->req_free)) {
		w->req_free = q->next;
		free(q);
	}
	pool_free_all(w);
	pthread_mutex_destroy(&w->lock);
}

int engine_start(const struct engine_params *p, struct engine **out)
{
	struct engine *e;
	unsigned i, n;
	int r = 0;

	e = calloc(1, sizeof(*e));
	if (!e)
		return -ENOMEM;
	e->p = *p;
	if (!e->p.drain_idle_ms)
		e->p.drain_idle_ms = DRAIN_IDLE_MS;
	e->nw = p->threads ? p->threads : 1;
	e->valgrind = RUNNING_ON_VALGRIND;
	/* Unknown to valgrind 3.19: it would warn about each call. */
	e->no_cachestat = e->valgrind;
	/* SMCRD_RING_SOCKET=0: plain TCP by poll + recv(2)/sendmsg(2), as
	 * the other transports. */
	{
		const char *v = getenv("SMCRD_RING_SOCKET");

		e->ring_sock = !v || strcmp(v, "0") != 0;
		/* SMCRD_READ_REPLY=copy|zc: how large READ replies go out
		 * (default sendfile; zc on ring sockets only). */
		v = getenv("SMCRD_READ_REPLY");
		e->read_reply = !v ? RR_SENDFILE : !strcmp(v, "copy") ? RR_COPY :
				!strcmp(v, "zc") ? RR_ZC : RR_SENDFILE;
	}
	pthread_mutex_init(&e->start_lock, NULL);
	pthread_cond_init(&e->start_cond, NULL);
	e->w = calloc(e->nw, sizeof(*e->w));
	if (!e->w) {
		r = -ENOMEM;
		goto out_free;
	}
	e->zero_buf = mmap(NULL, ZERO_BUF_SIZE, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (e->zero_buf == MAP_FAILED) {
		r = -errno;
		goto out_free_w;
	}
	for (i = 0; i < e->nw; i++) {
		r = worker_init(e, &e->w[i], i);
		if (r < 0)
			goto out_fini;
	}
	for (n = 0; n < e->nw; n++) {
		r = -pthread_create(&e->w[n].thread, NULL, worker_main, &e->w[n]);
		if (r < 0)
			break;
		e->w[n].started = true;
	}
	/* Wait for every started worker to set up its ring. */
	pthread_mutex_lock(&e->start_lock);
	while (e->start_count < n)
		pthread_cond_wait(&e->start_cond, &e->start_lock);
	if (r == 0)
		r = e->start_err;
	pthread_mutex_unlock(&e->start_lock);
	if (r < 0) {
		log_err("io_uring setup: %s", strerror(-r));
		engine_drain(e);
		engine_stop(e);
		return r;
	}
	*out = e;
	return 0;
out_fini:
	while (i--)
		worker_fini(&e->w[i]);
	munmap(e->zero_buf, ZERO_BUF_SIZE);
out_free_w:
	free(e->w);
out_free:
	pthread_cond_destroy(&e->start_cond);
	pthread_mutex_destroy(&e->start_lock);
	free(e);
	return r;
}

static void worker_wake(struct worker *w)
{
	uint64_t one = 1;

	if (write(w->evfd, &one, sizeof(one)) < 0)
		log_warn("worker %u: eventfd: %s", w->idx, strerror(errno));
}

/* The peer's address without the port ("local": Unix sockets, "?": not
 * known), the key of max_memory_per_address. */
static void peer_key(struct bd_transport *t, char *out, size_t len)
{
	struct sockaddr_storage ss;
	socklen_t sl = sizeof(ss);
	const void *a;

	if (bd_peer_addr(t, &ss, &sl) < 0 ||
	    (ss.ss_family != AF_INET && ss.ss_family != AF_INET6 && ss.ss_family != AF_UNIX)) {
		snprintf(out, len, "?");
		return;
	}
	if (ss.ss_family == AF_UNIX) {
		snprintf(out, len, "local");
		return;
	}
	a = ss.ss_family == AF_INET6 ?
		(const void *)&((const struct sockaddr_in6 *)&ss)->sin6_addr :
		(const void *)&((const struct sockaddr_in *)&ss)->sin_addr;
	if (!inet_ntop(ss.ss_family, a, out, (socklen_t)len))
		snprintf(out, len, "?");
}

int engine_add(struct engine *e, struct bd_transport *t, struct export *exp,
	       const struct nbd_server_session *s, void *owner)
{
	struct worker *w = &e->w[0];
	struct conn *c;
	unsigned i, best = UINT32_MAX;

	if (__atomic_load_n(&e->draining, __ATOMIC_ACQUIRE))
		goto out_refuse;
	c = calloc(1, sizeof(*c));
	if (!c)
		goto out_refuse;
	c->rbuf = malloc(RBUF_SIZE);
	if (!c->rbuf) {
		free(c);
		goto out_refuse;
	}
	c->t = t;
	c->owner = owner;
	peer_key(t, c->akey, sizeof(c->akey));
	c->pfd = bd_poll_fd(t);
	c->exp = exp;
	if (t->ops->rx_peek && t->ops->rx_consume) {
		c->pins = calloc(e->p.queue_depth, sizeof(*c->pins));
		if (!c->pins) {
			free(c->rbuf);
			free(c);
			goto out_refuse;
		}
		c->zc = true;
	}
	c->ring = e->ring_sock && !c->zc && bd_tcp_fd(t) >= 0;
	nbd_tx_params_from_session(s, &c->tp);
	for (i = 0; i < e->nw; i++) {
		unsigned n = __atomic_load_n(&e->w[i].nconns, __ATOMIC_RELAXED);

		if (n < best) {
			best = n;
			w = &e->w[i];
		}
	}
	__atomic_add_fetch(&w->nconns, 1, __ATOMIC_RELAXED);
	__atomic_add_fetch(&e->conns, 1, __ATOMIC_RELAXED);
	log_rated(LOGRATE_SESSION, t->peer, SMCR_LOG_INFO,
		  "client %s: export '%s' (%s replies%s, worker %u)", t->peer,
		  exp->spec.name, s->structured ? "structured" : "simple",
		  s->base_allocation ? ", base:allocation" : "", w->idx);
	pthread_mutex_lock(&w->lock);
	if (w->drain_req) {
		pthread_mutex_unlock(&w->lock);
		__atomic_sub_fetch(&w->nconns, 1, __ATOMIC_RELAXED);
		__atomic_sub_fetch(&e->conns, 1, __ATOMIC_RELAXED);
		free(c->pins);
		free(c->rbuf);
		free(c);
		goto out_refuse;
	}
	c->next = w->incoming;
	w->incoming = c;
	pthread_mutex_unlock(&w->lock);
	worker_wake(w);
	return 0;
out_refuse:
	bd_close(t);
	export_put(exp);
	return -ESHUTDOWN;
}

void engine_drain(struct engine *e)
{
	unsigned i;

	__atomic_store_n(&e->draining, true, __ATOMIC_RELEASE);
	for (i = 0; i < e->nw; i++) {
		pthread_mutex_lock(&e->w[i].lock);
		e->w[i].drain_req = true;
		pthread_mutex_unlock(&e->w[i].lock);
		worker_wake(&e->w[i]);
	}
}

void engine_stop(struct engine *e)
{
	unsigned i;

	for (i = 0; i < e->nw; i++) {
		if (e->w[i].started)
			pthread_join(e->w[i].thread, NULL);
		worker_fini(&e->w[i]);
	}
	munmap(e->zero_buf, ZERO_BUF_SIZE);
	free(e->w);
	pthread_cond_destroy(&e->start_cond);
	pthread_mutex_destroy(&e->start_lock);
	free(e);
}

void engine_get_stats(struct engine *e, struct engine_stats *st)
{
	unsigned i;

	memset(st, 0, sizeof(*st));
	for (i = 0; i < e->nw; i++) {
		struct engine_stats *w = &e->w[i].stats;

		st->requests += __atomic_load_n(&w->requests, __ATOMIC_RELAXED);
		st->zc_writes += __atomic_load_n(&w->zc_writes, __ATOMIC_RELAXED);
		st->zc_reads += __atomic_load_n(&w->zc_reads, __ATOMIC_RELAXED);
		st->file_reads += __atomic_load_n(&w->file_reads, __ATOMIC_RELAXED);
		st->inline_writes += __atomic_load_n(&w->inline_writes, __ATOMIC_RELAXED);
		st->request_timeouts += __atomic_load_n(&w->request_timeouts, __ATOMIC_RELAXED);
	}
}

unsigned engine_connections(struct engine *e)
{
	return __atomic_load_n(&e->conns, __ATOMIC_RELAXED);
}
