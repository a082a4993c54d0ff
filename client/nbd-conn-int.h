/* SPDX-License-Identifier: BSD-3-Clause */
/* smcrbd: the client engine's private header.  Its rooms call one way,
 * each the ones below it:
 *   nbd-conn.c            the connection thread and the API: open, close,
 *                         requests, the blocking calls
 *   nbd-conn-status.c     counters, the status dump, the control socket
 *   nbd-conn-reconnect.c  connect and handshake, a lost connection,
 *                         reconnect with backoff over the server list
 *   nbd-conn-tx.c         sending: requests onto the transport
 *   nbd-conn-rx.c         receiving: the reply parser
 *   nbd-conn-core.c       ground floor: completions, handing requests to
 *                         a connection, the request table, waiting */
#ifndef SMCRBD_NBD_CONN_INT_H
#define SMCRBD_NBD_CONN_INT_H

#include <poll.h>
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "monotime.h"
#include "nbd-conn.h"
#include "nbd-wire.h"

struct bd_transport;
struct bd_tls_client;
struct smcr_sock;

#define NBDC_MAX_CONNS		16
#define NBDC_SLOTS		1024		/* in flight per connection */
#define NBDC_RBUF		65536
#define NBDC_DRAIN_MS		5000
#define NBDC_MAX_RESENDS	64
#define NBDC_REFUSED_RETRY_MS	250		/* a refused reconnect: again in */
#define NBDC_STABLE_MS		1000		/* up this long: lost, back at once */
#define NBDC_MIN_ATTEMPT_MS	100		/* shortest reconnect attempt */
#define NBDC_ATTEMPT_FLOOR_MS	1000		/* an attempt may take the timeout, or this */
#define NBDC_TX_IOV		64
#define REQ_HDR			sizeof(struct nbd_request_wire)
#define NBDC_SPANS_INLINE	4		/* READ ranges kept in the request */
#define NBDC_SPANS_MAX		1024		/* disjoint ranges one READ may get */

enum { C_DOWN = 0, C_UP = 1 };

/* A byte range [start, end) of a READ, relative to its offset. */
struct nbdc_span {
	uint32_t start, end;
};

struct nbdc_req {
	struct nbdc_req *next;
	uint16_t type, flags;
	uint32_t len;
	uint64_t offset;
	void *buf;
	nbdc_done_fn done;
	void *arg;
	nbdc_sink_fn sink;		/* nbdc_submit_read's, or NULL */
	nbdc_source_fn source;		/* nbdc_submit_write's, or NULL */
	/* Owned by the connection thread that holds the request. */
	struct nbd_request_wire w;
	size_t sent;			/* bytes of w + payload written */
	int slot;			/* in-flight slot, -1: none */
	uint64_t cookie;
	int result;
	uint64_t data_seen;
	int sink_err;			/* the first error its sink gave */
	bool filled;			/* its source filled buf (no ZC send) */
	/* The disjoint ranges a structured READ's chunks have filled, sorted
	 * and merged where they touch; spans is inl or a heap array. */
	struct nbdc_span *spans, inl[NBDC_SPANS_INLINE];
	unsigned nspans, cap_spans;
	bool status_seen;		/* BLOCK_STATUS: its chunk came */
	int64_t submit_ms;		/* its timeout counts from here */
	bool was_sent;			/* went out on a connection since lost */
	unsigned resends;
};

struct rq {
	struct nbdc_req *head, *tail;
	unsigned n;
};

enum rx_step {
	RX_HDR,			/* 16 bytes: simple reply, or start of a chunk */
	RX_CHUNK,		/* the other 4 bytes of a chunk header */
	RX_SIMPLE_DATA,		/* READ data after a simple reply */
	RX_OFFSET,		/* OFFSET_DATA: the offset */
	RX_DATA,		/* OFFSET_DATA: the data */
	RX_HOLE,		/* OFFSET_HOLE payload */
	RX_ERROR,		/* error chunk payload */
	RX_BS_ID,		/* BLOCK_STATUS: the context ID */
	RX_BS_DESC,		/* BLOCK_STATUS: one descriptor */
};

struct rx {
	enum rx_step step;
	uint8_t hdr[20];
	uint8_t small[16];
	uint8_t *dst;
	size_t need, got;
	struct nbd_chunk ch;
	struct nbdc_req *req;
	struct nbdc_req *sink;		/* dst is this READ's, which has a sink */
	uint32_t bs_left;		/* descriptors still to read */
	uint64_t bs_sum;		/* bytes they covered so far */
	uint8_t err[NBD_MAX_STRING + 64];
	uint8_t *rbuf;
	size_t rpos, rend;
};

struct nbdc_conn {
	struct nbdc *e;
	unsigned idx;
	pthread_t thread;
	bool thread_running;
	int evfd;
	int watch_fd;			/* nbdc_watch(), atomic; -1: none */
	bool watch_ready;		/* poll saw it readable (thread) */

	pthread_mutex_t lock;
	struct rq subq;			/* lock */
	bool wake_pending;		/* lock */
	bool completed;			/* done called this turn (thread) */
	char tname[24], peer[64];	/* lock: for status */
	char last_error[256];		/* lock */
	int64_t down_since;		/* lock */

	/* Read by other threads (atomics). */
	int state;
	unsigned load;			/* requests this connection holds */
	int drop;
	uint64_t st_reconnects, st_failed, st_lost, st_resent, st_sent;
	uint64_t st_in_place;		/* sourced WRITEs sent from the send buffer */

	/* Private to the thread. */
	struct bd_transport *t;
	struct smcr_sock *smc;		/* real SMC-R socket (eventfd), or NULL */
	size_t zc_tx_max;		/* largest WRITE put in its send buffer */
	bool structured;
	bool meta_alloc;		/* base:allocation selected, as meta_id */
	uint32_t meta_id;
	bool ever_up;
	bool shut;			/* server said ESHUTDOWN */
	struct rq txq, waitq;
	struct nbdc_req **slots;
	int *free_slots;
	unsigned nfree, inflight;
	uint64_t gen;
	int64_t next_attempt_ms, last_progress_ms, up_ms;
	/* The last connect's steps (nbdc_conn_times; atomic). */
	int64_t t_attempt_ms, t_transport_ms, t_handshake_ms, t_up_ms;
	unsigned backoff_ms, spins;
	unsigned srv;			/* e->srv[]: connected to, or tries next */
	unsigned good_gen;		/* e->good_gen when it last looked */
	struct rx rx;
};

struct nbdc {
	char host[256], port[16], export_name[NBD_MAX_STRING + 1];	/* srv[0] */
	struct nbdc_server srv[NBDC_MAX_SERVERS];
	unsigned nsrv;
	enum nbdc_transport transport;
	unsigned timeout_ms, io_timeout_ms, connect_timeout_ms;
	unsigned backoff_min_ms, backoff_max_ms;
	bool want_ro;
	bool first_up;			/* the others connect in their threads */
	struct smcr_ctx *ctx;
	bool own_ctx;
	struct smcr_ctl *ctl;
	bool own_ctl;
	char section[32];
	int tls;			/* NBDC_TLS_* */
	struct bd_tls_client *tls_cred;

	struct nbd_export_info info;
	bool block_status;		/* the first connection had base:allocation */
	bool ro;
	uint32_t max_req;
	unsigned nconns;
	struct nbdc_conn conns[NBDC_MAX_CONNS];

	int stopping;
	int64_t drain_deadline;
	unsigned rr;
	pthread_mutex_t lock;		/* nup, all_down_since, good_* */
	unsigned nup;
	int64_t all_down_since;
	/* The server a connection last reached, and how many times one did:
	 * connections that are down try it next. */
	unsigned good_srv, good_gen;

	uint64_t st_requests, st_completed, st_errors, st_read, st_written, st_timed_out;
	unsigned st_inflight;
	void (*turn_end)(void *arg);
	void *turn_arg;
	int (*watch_ready)(void *arg, unsigned conn);
	void (*sent)(void *arg, void *req_arg, unsigned conn);
};

#define ALOAD(p)	__atomic_load_n((p), __ATOMIC_ACQUIRE)
#define ASTORE(p, v)	__atomic_store_n((p), (v), __ATOMIC_RELEASE)
#define AADD(p, v)	__atomic_add_fetch((p), (v), __ATOMIC_RELAXED)
#define ASUB(p, v)	__atomic_sub_fetch((p), (v), __ATOMIC_RELAXED)

static inline void rq_push(struct rq *q, struct nbdc_req *r)
{
	r->next = NULL;
	if (q->tail)
		q->tail->next = r;
	else
		q->head = r;
	q->tail = r;
	q->n++;
}

static inline void rq_push_front(struct rq *q, struct nbdc_req *r)
{
	r->next = q->head;
	q->head = r;
	if (!q->tail)
		q->tail = r;
	q->n++;
}

static inline struct nbdc_req *rq_pop(struct rq *q)
{
	struct nbdc_req *r = q->head;

	if (!r)
		return NULL;
	q->head = r->next;
	if (!q->head)
		q->tail = NULL;
	q->n--;
	r->next = NULL;
	return r;
}

/* Appends all of src to dst; src becomes empty. */
static inline void rq_splice(struct rq *dst, struct rq *src)
{
	if (!src->head)
		return;
	if (dst->tail)
		dst->tail->next = src->head;
	else
		dst->head = src->head;
	dst->tail = src->tail;
	dst->n += src->n;
	*src = (struct rq){ 0 };
}

/* nbd-conn-status.c: status */
int nbdc_ctl_dump(void *arg, char *buf, size_t len, bool json);
int nbdc_ctl_command(void *arg, const char *line, char *reply, size_t len);

/* nbd-conn-reconnect.c: connecting */
int nbdc_conn_connect(struct nbdc_conn *c, bool first, unsigned budget_ms);
void nbdc_mark_up(struct nbdc_conn *c);
void nbdc_conn_lost(struct nbdc_conn *c, int err);
void nbdc_down_step(struct nbdc_conn *c);

/* nbd-conn-tx.c: sending */
int nbdc_tx(struct nbdc_conn *c, bool *progress);
void nbdc_send_disc(struct nbdc_conn *c);

/* nbd-conn-rx.c: receiving */
int nbdc_rx(struct nbdc_conn *c, bool *progress);

/* nbd-conn-core.c: ground floor */
void nbdc_req_rewind(struct nbdc_req *r);
int nbdc_req_span_add(struct nbdc_req *r, uint32_t start, uint32_t len);
/* r leaves its in-flight slot (its reply is over, or it never went out). */
void nbdc_slot_release(struct nbdc_conn *c, struct nbdc_req *r);
void nbdc_req_complete(struct nbdc_conn *c, struct nbdc_req *r, int result);
void nbdc_turn_end(struct nbdc_conn *c);
void nbdc_conn_wake(struct nbdc_conn *c);
void nbdc_conn_give(struct nbdc_conn *c, struct rq *q, bool front);
void nbdc_watch_turn(struct nbdc_conn *c);
struct nbdc_conn *nbdc_watching(struct nbdc *e);
struct nbdc_conn *nbdc_pick_up(struct nbdc *e, struct nbdc_conn *except);
void nbdc_rx_reset(struct rx *rx);
void nbdc_slots_reset(struct nbdc_conn *c);
void nbdc_sleep_on(struct nbdc_conn *c, struct pollfd *extra, int timeout_ms);

#endif
