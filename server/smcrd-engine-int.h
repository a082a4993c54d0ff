/* SPDX-License-Identifier: BSD-3-Clause */
/* smcrd: the engine's private header.  Its rooms call one way, each the
 * ones below it:
 *   smcrd-engine.c       the workers (io_uring loop, timers), a
 *                        connection's start and end, and the API
 *   smcrd-engine-rx.c    receive: request headers and payloads read from
 *                        the transport
 *   smcrd-engine-tx.c    send: the reply queue written to the transport,
 *                        replies freed once sent
 *   smcrd-engine-req.c   a request's life: made, admitted, started,
 *                        completed, answered, freed
 *   smcrd-engine-conn.c  ground floor: buffer pool, lists, submission,
 *                        closing, the zero-copy window */
#ifndef SMCRD_SMCRD_ENGINE_INT_H
#define SMCRD_SMCRD_ENGINE_INT_H

#include <liburing.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <arpa/inet.h>
#include <sys/uio.h>

#include "smcrd-engine.h"
#include "smcrd-conf.h"
#include "applog.h"
#include "lograte.h"
#include "nbd-wire.h"
#include "monotime.h"


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
#define BS_BUF_SIZE	(NBD_BS_MAX_EXTENTS * sizeof(struct nbd_block_descriptor_ext_wire))
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
	uint64_t t0_us;			/* received at (iostat latency) */
};

#define LK_READ		1u
#define LK_SEND		2u

/* A worker's request memory held by the connections of one peer address
 * (addr_key_of_fd(): Unix-socket clients by uid); only that worker touches
 * it. */
struct addr_share {
	struct addr_share *next;
	unsigned refs;
	unsigned holders;		/* connections that hold some */
	uint64_t used;
	uint64_t logged_ms;		/* limit last logged */
	char key[INET6_ADDRSTRLEN];
};

#define ADDR_BUCKETS	64

/* How a connection's bytes move, chosen once at its setup (engine_add):
 * received in place (rx_peek), by recv SQEs on the worker's ring (plain
 * TCP) or by readv after a poll; sent by sendmsg SQEs on the ring or by
 * writev after a poll.  (READ data by send_file and replies reserved in
 * the transport's send buffer are chosen per request.) */
struct rx_ops {
	/* Reads what there is and parses the requests in it. */
	void (*pump)(struct conn *c);
	/* Receiving through rbuf: the rest of a payload, need bytes, not in
	 * rbuf (RX_PL_*); more bytes into rbuf (false: wait for them). */
	int (*payload)(struct conn *c, struct req *q, uint64_t need);
	bool (*fill)(struct conn *c);
	bool poll;			/* woken by a multishot POLL_IN */
};

struct tx_ops {
	/* Sends gathered replies, total bytes in iov[cnt]; all: they are
	 * all the connection owes.  False: stop flushing (a CQE, POLL_OUT or
	 * the close comes next). */
	bool (*send)(struct conn *c, const struct iovec *iov, int cnt, size_t total, bool all);
	bool sqe;			/* sends are SQEs on the worker's ring: a
					 * reply may be linked to its file I/O */
};

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
	const struct rx_ops *rx_ops;	/* chosen in engine_add */
	const struct tx_ops *tx_ops;
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
	uint64_t busy_seen_ms;		/* idle_check(): last seen with work */
	uint64_t rx_progress_ms;	/* last byte received (request timeout) */
	uint64_t tx_bytes;		/* reply bytes handed to the transport */
	uint64_t tx_seen;		/* ... at tx_seen_ms */
	int tx_seen_outq;		/* socket send queue then (SIOCOUTQ), or -1 */
	uint64_t tx_seen_ms;		/* replies last moved (reply timeout) */
	uint64_t mem_used;		/* request buffers held */
	char akey[INET6_ADDRSTRLEN];	/* peer address, no port */
	struct addr_share *as;		/* its share on this worker */
	/* Zero-copy receive (rx_ops_inplace: transports with rx_peek): the
	 * stream is read in place; WRITE payloads stay there (pinned) until
	 * on disk, and bytes are consumed in order up to the oldest pin. */
	uint64_t rx_pos;		/* stream bytes parsed */
	uint64_t rx_cons;		/* stream bytes consumed */
	struct pin {
		uint64_t start;
		bool done;
	} *pins;			/* ring of queue-depth entries */
	unsigned pin_head, pin_cnt;
	/* Ring socket (plain TCP: rx_ops_ring, tx_ops_ring): recv and
	 * sendmsg go through the worker's ring instead of poll +
	 * recv(2)/sendmsg(2).  One of each at most. */
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
	struct iostat *st_exp, *st_cli;	/* its export's and address's, or NULL */
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
	unsigned addr_holders;		/* addresses that hold some */
	struct addr_share *addr_tab[ADDR_BUCKETS];
	/* BLOCK_STATUS requests waiting for their lseeks, run BS_SLICE_NS
	 * per loop pass so the worker's other requests go between. */
	struct req *bs_head, *bs_tail;
	unsigned io_inflight;		/* TAG_REQ SQEs */
	struct engine_stats stats;	/* written here, read with atomics */
	uint64_t limit_logged_ms;
	bool draining;
	bool timer_armed;
	struct lograte_every stall_log;	/* request timeouts' lines */
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

static inline uint64_t ud(void *p, enum tag tag)
{
	return (uint64_t)(uintptr_t)p | (uint64_t)tag;
}

/* smcrd-engine-conn.c: ground floor */
unsigned pool_class(uint64_t len);
void *pool_get(struct worker *w, uint64_t len, unsigned *cls_out, int *slot_out,
	       bool *blocked);
void pool_put(struct worker *w, unsigned cls, void *p, int slot);
void pool_free_all(struct worker *w);
void conn_kick(struct conn *c);
void conn_dirty(struct conn *c);
int conn_share_get(struct conn *c);
void conn_share_put(struct conn *c);
void conn_mem_wait(struct conn *c, const char *what);
void conn_mem_wake(struct worker *w);
void conn_mem_unlink(struct conn *c);
struct io_uring_sqe *conn_get_sqe(struct worker *w);
void conn_arm_poll_in(struct conn *c);
void conn_arm_poll_out(struct conn *c);
void conn_arm_send(struct conn *c, const struct iovec *iov, int cnt, bool zc);
void conn_worker_wake(struct worker *w);
void conn_close(struct conn *c, const char *why);
void conn_maybe_finish(struct conn *c);
void conn_zc_release(struct conn *c);
void conn_zc_unpin(struct req *q);
void conn_win_copy(const struct iovec win[2], uint64_t off, void *dst, size_t len);
void conn_win_put(const struct iovec win[2], uint64_t off, const void *src, size_t len);
int conn_win_slice(const struct iovec win[2], uint64_t off, size_t len, struct iovec out[2]);
int conn_zc_remaining(struct req *q);

/* Appends q to c's reply queue. */
static inline void conn_tx_push(struct conn *c, struct req *q)
{
	q->next = NULL;
	if (c->tx_tail)
		c->tx_tail->next = q;
	else
		c->tx_head = q;
	c->tx_tail = q;
}

/* smcrd-engine-req.c: a request's life */
uint64_t req_chunk_len(const struct req *q);
struct req *req_new(struct conn *c);
int req_admit(struct req *q);
void req_block_status(struct req *q);
void req_start(struct req *q);
void req_submit(struct req *q);
void req_complete(struct req *q, int res);
void req_link_resolve(struct req *q);
/* One request answered (its reply queued): the connection's and the
 * iostat counters.  bytes: READ data sent, WRITE data written. */
void req_account(struct req *q, uint32_t error, uint64_t bytes);
void req_reply(struct req *q, uint32_t error, uint32_t data_len);
void req_free(struct req *q);

/* smcrd-engine-tx.c: send */
bool tx_reserve_read(struct conn *c, struct req *q);
void tx_retire(struct conn *c, size_t n);
void tx_flush(struct conn *c);
extern const struct tx_ops tx_ops_writev, tx_ops_ring;

/* smcrd-engine-rx.c: receive */
void rx_done(struct conn *c, int res);
extern const struct rx_ops rx_ops_inplace, rx_ops_ring, rx_ops_copy;

#endif
