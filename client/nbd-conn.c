/* SPDX-License-Identifier: BSD-3-Clause */
/* smcrbd: an NBD export from the client's side: several connections, one
 * thread each, asynchronous requests with callbacks, reconnect with
 * backoff and resend of the requests that were out (see nbd-conn.h).
 *
 * Ownership: a request belongs to exactly one connection at a time.
 * Other threads hand requests to a connection through its submission
 * queue (subq, under its lock, woken by its eventfd); everything else of
 * a connection (transport, send queue, in-flight table, reply parser,
 * waiting queue) is private to its thread.  When a connection is lost,
 * its thread takes back every request it had (sent or not), and gives
 * them to a connection that is up, or keeps them while it reconnects.
 *
 * Thread loop of a connection that is up: send what is queued (one
 * writev for many requests), read replies until nothing is left, then
 * sleep in poll(2) on the transport and the eventfd.  An SMC-R socket's
 * descriptor is an eventfd that means "look again" for both directions,
 * so before sleeping the thread asks smcr_sock_events(), which clears it
 * first and then reports what is ready (no lost wake-up). */
#include <config.h>

#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/eventfd.h>

#include "applog.h"
#include "nbd-client.h"
#include "nbd-conn.h"
#include "nbd-wire.h"
#include "smcr.h"
#include "transport-smcr.h"
#include "transport-tls.h"
#include "transport.h"
#include "jsonw.h"
#include "strbuf.h"

#define NBDC_MAX_CONNS		16
#define NBDC_SLOTS		1024		/* in flight per connection */
#define NBDC_RBUF		65536
#define NBDC_DRAIN_MS		5000
#define NBDC_MAX_RESENDS	64
#define NBDC_TX_IOV		64
#define REQ_HDR			sizeof(struct nbd_request_wire)

enum { C_DOWN = 0, C_UP = 1 };

struct nbdc_req {
	struct nbdc_req *next;
	uint16_t type, flags;
	uint32_t len;
	uint64_t offset;
	void *buf;
	nbdc_done_fn done;
	void *arg;
	/* Owned by the connection thread that holds the request. */
	struct nbd_request_wire w;
	size_t sent;			/* bytes of w + payload written */
	int slot;			/* in-flight slot, -1: none */
	uint64_t cookie;
	int result;
	uint64_t data_seen;
	bool status_seen;		/* BLOCK_STATUS: its chunk came */
	int64_t lost_ms;		/* waiting for a connection since */
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

	/* Private to the thread. */
	struct bd_transport *t;
	struct smcr_sock *smc;		/* real SMC-R socket (eventfd), or NULL */
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
	int64_t next_attempt_ms, last_progress_ms;
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
};

/* nbdc_plug(): connections of e this thread has yet to wake. */
static __thread struct {
	struct nbdc *e;
	uint32_t wake;
} plug;

/* --- small helpers ------------------------------------------------------ */

static int64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

#define ALOAD(p)	__atomic_load_n((p), __ATOMIC_ACQUIRE)
#define ASTORE(p, v)	__atomic_store_n((p), (v), __ATOMIC_RELEASE)
#define AADD(p, v)	__atomic_add_fetch((p), (v), __ATOMIC_RELAXED)
#define ASUB(p, v)	__atomic_sub_fetch((p), (v), __ATOMIC_RELAXED)

static void rq_push(struct rq *q, struct nbdc_req *r)
{
	r->next = NULL;
	if (q->tail)
		q->tail->next = r;
	else
		q->head = r;
	q->tail = r;
	q->n++;
}

static void rq_push_front(struct rq *q, struct nbdc_req *r)
{
	r->next = q->head;
	q->head = r;
	if (!q->tail)
		q->tail = r;
	q->n++;
}

static struct nbdc_req *rq_pop(struct rq *q)
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
static void rq_splice(struct rq *dst, struct rq *src)
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

/* --- completions --------------------------------------------------------- */

/* Forgets what a reply had delivered, before the request goes out again. */
static void req_rewind(struct nbdc_req *r)
{
	r->result = 0;
	r->data_seen = 0;
	r->status_seen = false;
	if (r->type == NBD_CMD_BLOCK_STATUS)
		((struct nbdc_extents *)r->buf)->n = 0;
}

static void req_complete(struct nbdc_conn *c, struct nbdc_req *r, int result)
{
	struct nbdc *e = c->e;

	ASUB(&c->load, 1);
	AADD(&e->st_completed, 1);
	if (result) {
		AADD(&e->st_errors, 1);
	} else if (r->type == NBD_CMD_READ) {
		AADD(&e->st_read, r->len);
	} else if (r->type == NBD_CMD_WRITE) {
		AADD(&e->st_written, r->len);
	}
	ASUB(&e->st_inflight, 1);
	c->completed = true;
	r->done(r->arg, result);
	free(r);
}

static void turn_end(struct nbdc_conn *c)
{
	if (c->completed && c->e->turn_end)
		c->e->turn_end(c->e->turn_arg);
	c->completed = false;
}

static void conn_wake(struct nbdc_conn *c)
{
	uint64_t one = 1;

	if (write(c->evfd, &one, sizeof(one)) < 0 && errno != EAGAIN)
		log_warn("nbd: eventfd: %s", strerror(errno));
}

/* Hands requests to connection c (any thread). */
static void conn_give(struct nbdc_conn *c, struct rq *q, bool front)
{
	bool wake;
	unsigned n = q->n;

	if (!n)
		return;
	AADD(&c->load, n);
	pthread_mutex_lock(&c->lock);
	if (front) {
		rq_splice(q, &c->subq);
		c->subq = *q;
	} else {
		rq_splice(&c->subq, q);
	}
	*q = (struct rq){ 0 };
	wake = !c->wake_pending;
	c->wake_pending = true;
	pthread_mutex_unlock(&c->lock);
	if (wake && plug.e == c->e)
		plug.wake |= 1u << c->idx;
	else if (wake)
		conn_wake(c);
}

void nbdc_plug(struct nbdc *e)
{
	plug.e = e;
	plug.wake = 0;
}

void nbdc_unplug(struct nbdc *e)
{
	unsigned i;

	plug.e = NULL;
	for (i = 0; i < e->nconns; i++)
		if (plug.wake & (1u << i))
			conn_wake(&e->conns[i]);
	plug.wake = 0;
}

/* The connection that is up with the least load (not 'except'), or NULL. */
static struct nbdc_conn *pick_up(struct nbdc *e, struct nbdc_conn *except)
{
	struct nbdc_conn *best = NULL;
	unsigned i, start = AADD(&e->rr, 1), bload = 0;

	for (i = 0; i < e->nconns; i++) {
		struct nbdc_conn *c = &e->conns[(start + i) % e->nconns];
		unsigned l;

		if (c == except || ALOAD(&c->state) != C_UP)
			continue;
		l = ALOAD(&c->load);
		if (!best || l < bload) {
			best = c;
			bload = l;
		}
	}
	return best;
}

/* --- connecting ------------------------------------------------------------ */

static void set_error(struct nbdc_conn *c, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

static void set_error(struct nbdc_conn *c, const char *fmt, ...)
{
	va_list ap;

	pthread_mutex_lock(&c->lock);
	va_start(ap, fmt);
	vsnprintf(c->last_error, sizeof(c->last_error), fmt, ap);
	va_end(ap);
	pthread_mutex_unlock(&c->lock);
}

/* One connection attempt, handshake included: 0 and c->t set, or -errno
 * (with c->last_error).  first: learn the export's info. */
static int conn_connect(struct nbdc_conn *c, bool first)
{
	struct nbdc *e = c->e;
	struct bd_transport *t = NULL;
	struct nbd_export_info info;
	struct nbd_client *nc;
	struct smcr_sock_info si;
	const struct nbdc_server *s = &e->srv[c->srv];
	int r;

	if (e->transport == NBDC_SMCR)
		r = bd_smcr_connect(e->ctx, s->host, s->port, (int)e->connect_timeout_ms, &t);
	else
		r = bd_tcp_connect(s->host, s->port, (int)e->connect_timeout_ms, &t);
	if (r < 0) {
		set_error(c, "connect: %s", strerror(-r));
		return r;
	}
	r = nbd_client_open(t, (int)e->connect_timeout_ms, &nc);
	if (r < 0) {
		set_error(c, "handshake: %s", strerror(-r));
		return r;
	}
	if (e->tls != NBDC_TLS_OFF) {
		char why[200];
		bool refused;

		r = nbd_client_starttls(nc);
		/* An error reply (the stream goes on), not a broken stream. */
		refused = r == -ENOTSUP || r == -EINVAL || r == -EACCES || r == -EPERM ||
			  r == -ENOENT || r == -EIO;
		if (refused && e->tls == NBDC_TLS_ALLOW) {
			r = 0;		/* no TLS offered: in the clear */
		} else if (r < 0) {
			set_error(c, "STARTTLS: %s", strerror(-r));
			if (refused)
				r = -ENOPROTOOPT;
			goto out_close;
		} else {
			r = bd_tls_client_upgrade(nbd_client_transport(nc), e->tls_cred,
						  (int)e->connect_timeout_ms, -1, why, sizeof(why));
			if (r < 0) {
				set_error(c, "%s", why);
				goto out_close;
			}
		}
	}
	r = nbd_client_structured(nc);
	if (r < 0 && r != -ENOTSUP && r != -EINVAL && r != -EPERM && r != -EIO) {
		set_error(c, "structured replies: %s", strerror(-r));
		goto out_close;
	}
	c->meta_alloc = false;
	if (nbd_client_is_structured(nc)) {
		r = nbd_client_set_meta_context(nc, e->export_name, NBD_META_BASE_ALLOCATION,
						&c->meta_id);
		if (r < 0 && r != -ENOTSUP && r != -EINVAL && r != -EPERM && r != -EIO) {
			set_error(c, "metadata context: %s", strerror(-r));
			if (r == -ENOENT)
				r = -ENXIO;	/* NBD_REP_ERR_UNKNOWN: no such export */
			goto out_close;
		}
		if (r == -EPERM) {	/* NBD_REP_ERR_TLS_REQD */
			set_error(c, "the server requires TLS");
			goto out_close;
		}
		c->meta_alloc = r == 0;
	}
	r = nbd_client_go(nc, e->export_name, &info);
	if (r < 0) {
		const char *msg = NULL;

		nbd_client_last_reply(nc, &msg);
		set_error(c, "export '%s': %s%s%s", e->export_name, strerror(-r),
			  msg && *msg ? ": " : "", msg ? msg : "");
		if (r == -ENOENT)
			r = -ENXIO;
		goto out_close;
	}
	if (first) {
		e->info = info;
		e->block_status = c->meta_alloc;
	} else if (info.size != e->info.size) {
		log_warn("nbd: export '%s' is now %" PRIu64 " bytes (was %" PRIu64 ")",
			 e->export_name, info.size, e->info.size);
	}
	c->structured = nbd_client_is_structured(nc);
	c->t = nbd_client_detach(nc);
	c->smc = bd_smcr_sock(c->t);
	if (c->smc && (smcr_sock_info(c->smc, &si) || !si.smc))
		c->smc = NULL;
	pthread_mutex_lock(&c->lock);
	/* Over smcr:// a connection that fell back to TCP says so. */
	snprintf(c->tname, sizeof(c->tname), "%s",
		 e->transport == NBDC_SMCR && strcmp(c->t->ops->name, "smcr") ?
		 "tcp-fallback" : c->t->ops->name);
	snprintf(c->peer, sizeof(c->peer), "%.63s", c->t->peer[0] ? c->t->peer : s->host);
	c->last_error[0] = '\0';
	pthread_mutex_unlock(&c->lock);
	return 0;
out_close:
	nbd_client_close(nc);
	return r;
}

static void rx_reset(struct rx *rx)
{
	rx->step = RX_HDR;
	rx->dst = rx->hdr;
	rx->need = 16;
	rx->got = 0;
	rx->req = NULL;
	rx->rpos = rx->rend = 0;
}

static void slots_reset(struct nbdc_conn *c)
{
	unsigned i;

	for (i = 0; i < NBDC_SLOTS; i++) {
		c->slots[i] = NULL;
		c->free_slots[i] = (int)(NBDC_SLOTS - 1 - i);
	}
	c->nfree = NBDC_SLOTS;
	c->inflight = 0;
}

static void mark_up(struct nbdc_conn *c)
{
	struct nbdc *e = c->e;

	rx_reset(&c->rx);
	slots_reset(c);
	c->shut = false;
	c->spins = 0;
	c->backoff_ms = e->backoff_min_ms;
	c->last_progress_ms = now_ms();
	pthread_mutex_lock(&e->lock);
	e->nup++;
	pthread_mutex_unlock(&e->lock);
	ASTORE(&c->state, C_UP);
}

/* Takes back every request of a lost connection. */
static void conn_lost(struct nbdc_conn *c, int err)
{
	struct nbdc *e = c->e;
	int64_t now = now_ms();
	struct rq all = { 0 };
	struct nbdc_req *r;
	unsigned i, n = 0;

	log_warn("nbd: connection %u to %s:%s lost (%s); %u request(s) out, reconnecting%s",
		 c->idx, e->srv[c->srv].host, e->srv[c->srv].port, strerror(-err),
		 c->inflight + c->txq.n, e->nsrv > 1 ? " to the next server" : "");
	set_error(c, "lost: %s", strerror(-err));
	ASTORE(&c->state, C_DOWN);
	pthread_mutex_lock(&e->lock);
	if (--e->nup == 0)
		e->all_down_since = now;
	/* Next: where another connection went already, else the next one;
	 * only servers reached from now on redirect it later. */
	c->srv = e->good_srv != c->srv ? e->good_srv : (c->srv + 1) % e->nsrv;
	c->good_gen = e->good_gen;
	pthread_mutex_unlock(&e->lock);
	pthread_mutex_lock(&c->lock);
	c->down_since = now;
	pthread_mutex_unlock(&c->lock);
	AADD(&c->st_lost, 1);
	/* No lingering for a peer that is gone. */
	bd_smcr_abort(c->t);
	c->t = NULL;
	c->smc = NULL;

	/* Unsent first (they keep their order), then what was out. */
	for (r = c->txq.head; r; r = r->next)
		if (r->slot >= 0)
			c->slots[r->slot] = NULL;
	rq_splice(&all, &c->txq);
	for (i = 0; i < NBDC_SLOTS; i++) {
		if (!c->slots[i])
			continue;
		rq_push(&all, c->slots[i]);
		c->slots[i] = NULL;
	}
	slots_reset(c);
	rx_reset(&c->rx);
	for (r = all.head; r; r = r->next) {
		if (r->sent) {
			r->was_sent = true;
			r->resends++;
		}
		r->sent = 0;
		r->slot = -1;
		req_rewind(r);
		if (!r->lost_ms)
			r->lost_ms = now;
		n++;
	}
	rq_splice(&c->waitq, &all);
	c->next_attempt_ms = now;
	c->backoff_ms = e->backoff_min_ms;
	(void)n;
}

/* --- sending --------------------------------------------------------------- */

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
		req_complete(c, r, -ENOTSUP);
}

static int tx(struct nbdc_conn *c, bool *progress)
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
			if (r->was_sent) {
				r->was_sent = false;
				AADD(&c->st_resent, 1);
			}
			r->lost_ms = 0;
		}
	}
	return 0;
}

/* --- receiving --------------------------------------------------------- */

/* Fills rx->dst up to rx->need: 1 done, 0 would block, -errno. */
static int rx_fill(struct nbdc_conn *c)
{
	struct rx *rx = &c->rx;

	while (rx->got < rx->need) {
		size_t want = rx->need - rx->got;
		struct iovec iov;
		ssize_t n;

		if (rx->rpos < rx->rend) {
			size_t k = rx->rend - rx->rpos;

			if (k > want)
				k = want;
			memcpy(rx->dst + rx->got, rx->rbuf + rx->rpos, k);
			rx->rpos += k;
			rx->got += k;
			continue;
		}
		if (want >= NBDC_RBUF / 2) {
			iov.iov_base = rx->dst + rx->got;
			iov.iov_len = want;
		} else {
			iov.iov_base = rx->rbuf;
			iov.iov_len = NBDC_RBUF;
		}
		n = bd_readv(c->t, &iov, 1);
		if (n == -EAGAIN)
			return 0;
		if (n == 0)
			return -ECONNRESET;
		if (n < 0)
			return (int)n;
		c->last_progress_ms = now_ms();
		if (iov.iov_base == rx->rbuf) {
			rx->rpos = 0;
			rx->rend = (size_t)n;
		} else {
			rx->got += (size_t)n;
		}
	}
	return 1;
}

static void rx_expect(struct rx *rx, enum rx_step step, void *dst, size_t need)
{
	rx->step = step;
	rx->dst = dst;
	rx->need = need;
	rx->got = 0;
}

static struct nbdc_req *find_req(struct nbdc_conn *c, uint64_t cookie)
{
	unsigned slot = (unsigned)(cookie & 0xffff);
	struct nbdc_req *r;

	if (slot >= NBDC_SLOTS)
		return NULL;
	r = c->slots[slot];
	if (!r || r->cookie != cookie || r->sent < REQ_HDR)
		return NULL;
	return r;
}

/* A request's reply is complete. */
static void reply_done(struct nbdc_conn *c, struct nbdc_req *r)
{
	c->slots[r->slot] = NULL;
	c->free_slots[c->nfree++] = r->slot;
	c->inflight--;
	r->slot = -1;
	if (r->result == -ESHUTDOWN) {
		/* The server is going away: send it again elsewhere/later. */
		c->shut = true;
		r->sent = 0;
		r->was_sent = true;
		req_rewind(r);
		rq_push_front(&c->txq, r);
		return;
	}
	if (!r->result && r->type == NBD_CMD_READ && c->structured && r->data_seen != r->len)
		r->result = -EIO;
	if (!r->result && r->type == NBD_CMD_BLOCK_STATUS && !r->status_seen)
		r->result = -EIO;
	req_complete(c, r, r->result);
}

static int chunk_done(struct nbdc_conn *c)
{
	struct rx *rx = &c->rx;
	struct nbdc_req *r = rx->req;

	rx_expect(rx, RX_HDR, rx->hdr, 16);
	rx->req = NULL;
	if (rx->ch.flags & NBD_REPLY_FLAG_DONE)
		reply_done(c, r);
	return 0;
}

/* One step of the reply parser: 1 progress, 0 would block, -errno. */
static int rx_step(struct nbdc_conn *c)
{
	struct rx *rx = &c->rx;
	struct nbdc_req *r;
	int ret = rx_fill(c);

	if (ret <= 0)
		return ret;
	switch (rx->step) {
	case RX_HDR: {
		uint32_t magic = nbd_reply_magic(rx->hdr);

		if (magic == NBD_STRUCTURED_REPLY_MAGIC && c->structured) {
			rx_expect(rx, RX_CHUNK, rx->hdr + 16, 4);
			return 1;
		}
		if (magic == NBD_SIMPLE_REPLY_MAGIC) {
			struct nbd_simple_reply rep;

			nbd_simple_reply_decode((const struct nbd_simple_reply_wire *)rx->hdr, &rep);
			r = find_req(c, rep.cookie);
			if (!r || (c->structured && r->type == NBD_CMD_READ && !rep.error) ||
			    (r->type == NBD_CMD_BLOCK_STATUS && !rep.error))
				return -EPROTO;
			r->result = rep.error ? nbd_wire_to_errno(rep.error) : 0;
			if (!rep.error && r->type == NBD_CMD_READ && r->len) {
				rx->req = r;
				rx_expect(rx, RX_SIMPLE_DATA, r->buf, r->len);
				return 1;
			}
			rx_expect(rx, RX_HDR, rx->hdr, 16);
			reply_done(c, r);
			return 1;
		}
		return -EPROTO;
	}
	case RX_SIMPLE_DATA:
		r = rx->req;
		rx->req = NULL;
		rx_expect(rx, RX_HDR, rx->hdr, 16);
		reply_done(c, r);
		return 1;
	case RX_CHUNK:
		if (nbd_chunk_decode((const struct nbd_chunk_wire *)rx->hdr, &rx->ch) < 0)
			return -EPROTO;
		r = find_req(c, rx->ch.cookie);
		if (!r)
			return -EPROTO;
		rx->req = r;
		switch (rx->ch.type) {
		case NBD_REPLY_TYPE_NONE:
			if (rx->ch.length || !(rx->ch.flags & NBD_REPLY_FLAG_DONE))
				return -EPROTO;
			return chunk_done(c) ? -EPROTO : 1;
		case NBD_REPLY_TYPE_OFFSET_DATA:
			if (r->type != NBD_CMD_READ || rx->ch.length <= 8)
				return -EPROTO;
			rx_expect(rx, RX_OFFSET, rx->small, 8);
			return 1;
		case NBD_REPLY_TYPE_OFFSET_HOLE:
			if (r->type != NBD_CMD_READ || rx->ch.length != 12)
				return -EPROTO;
			rx_expect(rx, RX_HOLE, rx->small, 12);
			return 1;
		case NBD_REPLY_TYPE_BLOCK_STATUS:
			/* One chunk of 4 + 8n bytes (n >= 1), for our context. */
			if (r->type != NBD_CMD_BLOCK_STATUS || !c->meta_alloc || r->status_seen ||
			    rx->ch.length < 12 || (rx->ch.length - 4) % 8)
				return -EPROTO;
			rx->bs_left = (rx->ch.length - 4) / 8;
			rx->bs_sum = 0;
			rx_expect(rx, RX_BS_ID, rx->small, 4);
			return 1;
		default:
			if (!NBD_REPLY_TYPE_IS_ERR(rx->ch.type) ||
			    rx->ch.length > sizeof(rx->err))
				return -EPROTO;
			rx_expect(rx, RX_ERROR, rx->err, rx->ch.length);
			return 1;
		}
	case RX_OFFSET: {
		uint64_t off = nbd_offset_decode((const struct nbd_chunk_offset_data_wire *)rx->small);
		uint32_t n = rx->ch.length - 8;

		r = rx->req;
		if (off < r->offset || off - r->offset > r->len ||
		    n > r->len - (off - r->offset))
			return -EPROTO;
		rx_expect(rx, RX_DATA, (uint8_t *)r->buf + (off - r->offset), n);
		return 1;
	}
	case RX_DATA:
		rx->req->data_seen += rx->need;
		chunk_done(c);
		return 1;
	case RX_HOLE: {
		uint64_t off;
		uint32_t n;

		r = rx->req;
		nbd_hole_decode((const struct nbd_chunk_offset_hole_wire *)rx->small, &off, &n);
		if (off < r->offset || off - r->offset > r->len ||
		    n > r->len - (off - r->offset))
			return -EPROTO;
		memset((uint8_t *)r->buf + (off - r->offset), 0, n);
		r->data_seen += n;
		chunk_done(c);
		return 1;
	}
	case RX_BS_ID:
		if (nbd_block_status_id_decode(
			    (const struct nbd_chunk_block_status_wire *)rx->small) != c->meta_id)
			return -EPROTO;
		rx_expect(rx, RX_BS_DESC, rx->small, 8);
		return 1;
	case RX_BS_DESC: {
		struct nbdc_extents *x;
		struct nbd_extent d;

		r = rx->req;
		x = r->buf;
		nbd_extents_decode(rx->small, 1, &d);
		if (!d.length)
			return -EPROTO;
		/* Kept up to the room given and the length asked for. */
		if (x->n < x->max && rx->bs_sum < r->len) {
			if (d.length > r->len - rx->bs_sum)
				d.length = (uint32_t)(r->len - rx->bs_sum);
			x->ext[x->n++] = d;
			rx->bs_sum += d.length;
		}
		if (--rx->bs_left) {
			rx_expect(rx, RX_BS_DESC, rx->small, 8);
			return 1;
		}
		r->status_seen = true;
		chunk_done(c);
		return 1;
	}
	case RX_ERROR: {
		uint32_t err = 0;
		uint64_t eoff;

		r = rx->req;
		if (nbd_error_chunk_parse(rx->err, rx->ch.length, rx->ch.type, &err, NULL, 0,
					  &eoff) < 0)
			return -EPROTO;
		if (!r->result)
			r->result = nbd_wire_to_errno(err);
		chunk_done(c);
		return 1;
	}
	}
	return -EPROTO;
}

static int rx(struct nbdc_conn *c, bool *progress)
{
	int i, r;

	for (i = 0; i < 256; i++) {
		r = rx_step(c);
		if (r < 0)
			return r;
		if (r == 0)
			return 0;
		*progress = true;
	}
	return 0;
}

/* --- the connection thread ------------------------------------------------- */

/* (The eventfd is drained in sleep_on, when poll says so: no system call
 * here on every turn of the loop.) */
static void take_submissions(struct nbdc_conn *c)
{
	struct rq q;

	pthread_mutex_lock(&c->lock);
	q = c->subq;
	c->subq = (struct rq){ 0 };
	c->wake_pending = false;
	pthread_mutex_unlock(&c->lock);
	if (ALOAD(&c->state) == C_UP) {
		rq_splice(&c->txq, &q);
	} else {
		int64_t now = now_ms();
		struct nbdc_req *r;

		for (r = q.head; r; r = r->next)
			if (!r->lost_ms)
				r->lost_ms = now;
		rq_splice(&c->waitq, &q);
	}
}

static void sleep_on(struct nbdc_conn *c, struct pollfd *extra, int timeout_ms)
{
	struct pollfd p[2];
	nfds_t n = 0;

	if (extra)
		p[n++] = *extra;
	p[n].fd = c->evfd;
	p[n].events = POLLIN;
	n++;
	if (poll(p, n, timeout_ms) < 0 && errno != EINTR)
		log_warn("nbd: poll: %s", strerror(errno));
	else if (p[n - 1].revents & POLLIN) {
		uint64_t junk;

		if (read(c->evfd, &junk, sizeof(junk)) < 0)
			junk = 0;
	}
}

/* A connection that is down: hand its requests over, expire them, and
 * reconnect when the backoff allows. */
static void down_step(struct nbdc_conn *c)
{
	struct nbdc *e = c->e;
	int64_t now = now_ms(), wake;
	struct nbdc_conn *o;
	struct nbdc_req *r, **pp;
	struct rq expired = { 0 };
	int ret;

	if (c->waitq.n && !ALOAD(&e->stopping) && (o = pick_up(e, c))) {
		unsigned n = c->waitq.n;

		conn_give(o, &c->waitq, true);
		ASUB(&c->load, n);
	}
	for (pp = &c->waitq.head; (r = *pp);) {
		if (now - r->lost_ms >= (int64_t)e->timeout_ms || r->resends > NBDC_MAX_RESENDS) {
			*pp = r->next;
			c->waitq.n--;
			rq_push(&expired, r);
			continue;
		}
		pp = &r->next;
	}
	c->waitq.tail = NULL;
	for (r = c->waitq.head; r; r = r->next)
		c->waitq.tail = r;
	if (expired.n)
		log_warn("nbd: connection %u: %u request(s) failed after %u ms without a connection",
			 c->idx, expired.n, e->timeout_ms);
	while ((r = rq_pop(&expired))) {
		AADD(&e->st_timed_out, 1);
		req_complete(c, r, -EIO);
	}
	if (ALOAD(&e->stopping))
		return;
	if (now >= c->next_attempt_ms) {
		char which[32] = "";

		/* Another connection reached a server: that one first. */
		pthread_mutex_lock(&e->lock);
		if (c->good_gen != e->good_gen) {
			c->good_gen = e->good_gen;
			c->srv = e->good_srv;
		}
		pthread_mutex_unlock(&e->lock);
		ret = conn_connect(c, false);
		if (ret == 0) {
			pthread_mutex_lock(&e->lock);
			e->good_srv = c->srv;
			c->good_gen = ++e->good_gen;
			pthread_mutex_unlock(&e->lock);
			mark_up(c);
			AADD(&c->st_reconnects, 1);
			if (e->nsrv > 1)
				snprintf(which, sizeof(which), "server %u of %u, ", c->srv + 1,
					 e->nsrv);
			log_info("nbd: connection %u to %s:%s is back (%s%s), resending %u request(s)",
				 c->idx, e->srv[c->srv].host, e->srv[c->srv].port, which, c->tname,
				 c->waitq.n);
			rq_splice(&c->txq, &c->waitq);
			return;
		}
		log_dbg("nbd: connection %u: %s:%s: %s", c->idx, e->srv[c->srv].host,
			e->srv[c->srv].port, strerror(-ret));
		c->srv = (c->srv + 1) % e->nsrv;
		AADD(&c->st_failed, 1);
		c->backoff_ms = c->backoff_ms ? c->backoff_ms * 2 : e->backoff_min_ms;
		if (c->backoff_ms > e->backoff_max_ms)
			c->backoff_ms = e->backoff_max_ms;
		/* Jitter: 75..100% of the backoff, so connections spread out. */
		c->next_attempt_ms = now_ms() + c->backoff_ms - (rand() % (c->backoff_ms / 4 + 1));
		log_dbg("nbd: connection %u: reconnect failed (%s), next in %u ms", c->idx,
			strerror(-ret), c->backoff_ms);
		return;
	}
	wake = c->next_attempt_ms;
	for (r = c->waitq.head; r; r = r->next)
		if (r->lost_ms + (int64_t)e->timeout_ms < wake)
			wake = r->lost_ms + (int64_t)e->timeout_ms;
	if (c->waitq.n && wake > now + 100)
		wake = now + 100;	/* look for a connection that came up */
	sleep_on(c, NULL, wake > now ? (int)(wake - now) : 0);
}

static void up_step(struct nbdc_conn *c)
{
	struct nbdc *e = c->e;
	bool progress = false;
	struct pollfd p;
	int64_t now;
	int ret, timeout;

	ret = tx(c, &progress);
	if (ret == 0)
		ret = rx(c, &progress);
	if (ret == 0 && c->shut)
		ret = -ESHUTDOWN;
	if (ret == 0 && ALOAD(&c->drop)) {
		ASTORE(&c->drop, 0);
		ret = -ECONNABORTED;
	}
	if (ret < 0) {
		conn_lost(c, ret);
		return;
	}
	if (progress) {
		c->spins = 0;
		return;
	}
	now = now_ms();
	timeout = 1000;
	if ((c->inflight || c->txq.n) && e->io_timeout_ms != UINT32_MAX) {
		int64_t left = c->last_progress_ms + e->io_timeout_ms - now;

		if (left <= 0) {
			conn_lost(c, -ETIMEDOUT);
			return;
		}
		if (left < timeout)
			timeout = (int)left;
	}
	if (c->smc) {
		unsigned ev = smcr_sock_events(c->smc);

		if ((ev & (SMCR_EV_IN | SMCR_EV_ERR | SMCR_EV_HUP)) ||
		    ((ev & SMCR_EV_OUT) && c->txq.n && c->nfree)) {
			/* Something to do after all (or a state readv and
			 * writev do not move on: do not spin on it). */
			if (++c->spins < 64)
				return;
			timeout = 1;
		}
	}
	p.fd = bd_poll_fd(c->t);
	p.events = bd_poll_events(c->t, BD_WANT_READ |
				  (c->txq.n && c->nfree ? BD_WANT_WRITE : 0));
	p.revents = 0;
	sleep_on(c, &p, timeout);
}

static void send_disc(struct nbdc_conn *c)
{
	struct nbd_request h = { .type = NBD_CMD_DISC, .cookie = 0xffff };
	struct nbd_request_wire w;

	nbd_request_encode(&h, &w);
	if (bd_write_full(c->t, &w, sizeof(w), 1000, -1) == 0)
		bd_shutdown(c->t);
}

static void *conn_thread(void *arg)
{
	struct nbdc_conn *c = arg;
	struct nbdc *e = c->e;
	struct rq left = { 0 };
	struct nbdc_req *r;
	unsigned i;

	for (;;) {
		take_submissions(c);
		if (ALOAD(&e->stopping)) {
			if (ALOAD(&c->state) != C_UP || (!c->inflight && !c->txq.n) ||
			    now_ms() > e->drain_deadline)
				break;
		}
		if (ALOAD(&c->state) == C_UP)
			up_step(c);
		else
			down_step(c);
		turn_end(c);
	}
	/* Closing: fail what is left. */
	ASTORE(&c->state, C_DOWN);
	for (r = c->txq.head; r; r = r->next)
		if (r->slot >= 0)
			c->slots[r->slot] = NULL;
	rq_splice(&left, &c->txq);
	rq_splice(&left, &c->waitq);
	for (i = 0; i < NBDC_SLOTS; i++)
		if (c->slots[i]) {
			rq_push(&left, c->slots[i]);
			c->slots[i] = NULL;
		}
	while ((r = rq_pop(&left)))
		req_complete(c, r, -ESHUTDOWN);
	turn_end(c);
	if (c->t) {
		if (ALOAD(&c->state) == C_UP)
			send_disc(c);
		bd_close(c->t);
		c->t = NULL;
	}
	return NULL;
}

/* --- status ------------------------------------------------------------------ */

void nbdc_get_stats(struct nbdc *e, struct nbdc_stats *st)
{
	unsigned i;

	memset(st, 0, sizeof(*st));
	st->requests = ALOAD(&e->st_requests);
	st->completed = ALOAD(&e->st_completed);
	st->errors = ALOAD(&e->st_errors);
	st->bytes_read = ALOAD(&e->st_read);
	st->bytes_written = ALOAD(&e->st_written);
	st->timed_out = ALOAD(&e->st_timed_out);
	st->inflight = ALOAD(&e->st_inflight);
	for (i = 0; i < e->nconns; i++) {
		struct nbdc_conn *c = &e->conns[i];

		st->reconnects += ALOAD(&c->st_reconnects);
		st->reconnect_failures += ALOAD(&c->st_failed);
		st->connections_lost += ALOAD(&c->st_lost);
		st->resent += ALOAD(&c->st_resent);
		st->connections_up += ALOAD(&c->state) == C_UP;
	}
}

/* One connection's state, copied under its lock. */
struct conn_view {
	char tname[24], peer[64], err[96];
	bool up;
	int64_t down;
};

static void conn_view(struct nbdc_conn *c, int64_t now, struct conn_view *v)
{
	v->up = ALOAD(&c->state) == C_UP;
	pthread_mutex_lock(&c->lock);
	memcpy(v->tname, c->tname, sizeof(v->tname));
	memcpy(v->peer, c->peer, sizeof(v->peer));
	memcpy(v->err, c->last_error, sizeof(v->err));
	v->down = v->up ? 0 : now - c->down_since;
	pthread_mutex_unlock(&c->lock);
}

/* HOST:PORT, [V6]:PORT. */
static void server_name(const struct nbdc_server *s, char *buf, size_t len)
{
	bool v6 = strchr(s->host, ':') != NULL;

	snprintf(buf, len, "%s%s%s:%s", v6 ? "[" : "", s->host, v6 ? "]" : "", s->port);
}

static int dump_json(struct nbdc *e, const struct nbdc_stats *st, char *buf, size_t len)
{
	struct json_object *o = json_object_new_object(), *s, *conns;
	int64_t now = now_ms();
	unsigned i;

	if (!o)
		return -ENOMEM;
	jsonw_str(o, "export", e->export_name);
	jsonw_str(o, "server", e->host);
	/* a number when it is one (the port of an nbd:// address) */
	if (e->port[0] && strspn(e->port, "0123456789") == strlen(e->port))
		jsonw_u64(o, "port", strtoull(e->port, NULL, 10));
	else
		jsonw_str(o, "port", e->port);
	jsonw_str(o, "transport", nbdc_transport_name(e->transport));
	if (e->nsrv > 1) {
		struct json_object *a = json_object_new_array();
		char hp[300];

		for (i = 0; a && i < e->nsrv; i++) {
			server_name(&e->srv[i], hp, sizeof(hp));
			json_object_array_add(a, json_object_new_string(hp));
		}
		jsonw_add(o, "servers", a);
	}
	jsonw_u64(o, "size", e->info.size);
	jsonw_u64(o, "flags", e->info.flags);
	jsonw_bool(o, "read_only", e->ro);
	jsonw_bool(o, "multi_conn", e->info.flags & NBD_FLAG_CAN_MULTI_CONN);
	jsonw_u64(o, "timeout_ms", e->timeout_ms);
	jsonw_u64(o, "connections_up", st->connections_up);
	s = json_object_new_object();
	jsonw_u64(s, "requests", st->requests);
	jsonw_u64(s, "completed", st->completed);
	jsonw_u64(s, "errors", st->errors);
	jsonw_u64(s, "inflight", st->inflight);
	jsonw_u64(s, "bytes_read", st->bytes_read);
	jsonw_u64(s, "bytes_written", st->bytes_written);
	jsonw_u64(s, "reconnects", st->reconnects);
	jsonw_u64(s, "reconnect_failures", st->reconnect_failures);
	jsonw_u64(s, "connections_lost", st->connections_lost);
	jsonw_u64(s, "resent", st->resent);
	jsonw_u64(s, "timed_out", st->timed_out);
	jsonw_add(o, "stats", s);
	conns = json_object_new_array();
	jsonw_add(o, "connections", conns);
	for (i = 0; conns && i < e->nconns; i++) {
		struct nbdc_conn *c = &e->conns[i];
		struct json_object *j = json_object_new_object();
		struct conn_view v;

		if (!j)
			break;
		conn_view(c, now, &v);
		jsonw_u64(j, "id", i);
		jsonw_str(j, "state", v.up ? "up" : "down");
		jsonw_str(j, "transport", v.tname);
		jsonw_str(j, "peer", v.peer);
		jsonw_u64(j, "load", ALOAD(&c->load));
		jsonw_add(j, "down_ms", json_object_new_int64(v.down));
		jsonw_u64(j, "sent", ALOAD(&c->st_sent));
		jsonw_u64(j, "reconnects", ALOAD(&c->st_reconnects));
		jsonw_u64(j, "reconnect_failures", ALOAD(&c->st_failed));
		jsonw_u64(j, "lost", ALOAD(&c->st_lost));
		jsonw_u64(j, "resent", ALOAD(&c->st_resent));
		jsonw_str(j, "error", v.err);
		json_object_array_add(conns, j);
	}
	return jsonw_dump(o, buf, len);
}

int nbdc_dump(struct nbdc *e, char *buf, size_t len, bool json)
{
	struct nbdc_stats st;
	size_t off = 0;
	int64_t now = now_ms();
	unsigned i;

	nbdc_get_stats(e, &st);
	if (json)
		return dump_json(e, &st, buf, len);
	off = strbuf_out(buf, len, off,
		  "export '%s' at %s://%s:%s: %" PRIu64 " bytes, %s%s, %u of %u connection(s) up, timeout %u ms\n"
		  "  requests %" PRIu64 ", completed %" PRIu64 ", errors %" PRIu64
		  ", in flight %u, read %" PRIu64 " B, written %" PRIu64 " B\n"
		  "  reconnects %" PRIu64 ", reconnect failures %" PRIu64
		  ", connections lost %" PRIu64 ", resent %" PRIu64 ", timed out %" PRIu64 "\n",
		  e->export_name, nbdc_transport_name(e->transport), e->host, e->port,
		  e->info.size, e->ro ? "read-only" : "read-write",
		  (e->info.flags & NBD_FLAG_CAN_MULTI_CONN) ? ", multi-conn" : "",
		  st.connections_up, e->nconns, e->timeout_ms, st.requests,
		  st.completed, st.errors, st.inflight, st.bytes_read,
		  st.bytes_written, st.reconnects, st.reconnect_failures,
		  st.connections_lost, st.resent, st.timed_out);
	for (i = 0; e->nsrv > 1 && i < e->nsrv; i++) {
		char hp[300];

		server_name(&e->srv[i], hp, sizeof(hp));
		off = strbuf_out(buf, len, off, "%s%s%s", i ? ", " : "  servers (in turn): ",
				 hp, i + 1 == e->nsrv ? "\n" : "");
	}
	for (i = 0; i < e->nconns; i++) {
		struct nbdc_conn *c = &e->conns[i];
		struct conn_view v;

		conn_view(c, now, &v);
		off = strbuf_out(buf, len, off, "  connection %u: %s", i, v.up ? "up" : "down");
		if (!v.up)
			off = strbuf_out(buf, len, off, " for %" PRId64 ".%01" PRId64 " s",
					 v.down / 1000, (v.down % 1000) / 100);
		off = strbuf_out(buf, len, off,
			  ", %s %s, %u request(s), sent %" PRIu64 ", reconnects %" PRIu64
			  ", lost %" PRIu64 ", resent %" PRIu64 "%s%s\n",
			  v.tname, v.peer, ALOAD(&c->load), ALOAD(&c->st_sent),
			  ALOAD(&c->st_reconnects), ALOAD(&c->st_lost),
			  ALOAD(&c->st_resent), v.err[0] ? ", last error: " : "", v.err);
	}
	return off >= len ? -ENOSPC : (int)off;
}

static int ctl_dump(void *arg, char *buf, size_t len, bool json)
{
	return nbdc_dump(arg, buf, len, json);
}

static int ctl_command(void *arg, const char *line, char *reply, size_t len)
{
	struct nbdc *e = arg;

	if (!strcmp(line, "nbd drop")) {
		nbdc_drop_connections(e);
		return snprintf(reply, len, "ok: dropped %u connection(s)\n", e->nconns);
	}
	if (!strncmp(line, "nbd ", 4))
		return -EINVAL;
	return -ENOSYS;
}

void nbdc_drop_connections(struct nbdc *e)
{
	unsigned i;

	for (i = 0; i < e->nconns; i++) {
		ASTORE(&e->conns[i].drop, 1);
		conn_wake(&e->conns[i]);
	}
}

/* --- open / close -------------------------------------------------------- */

static void conn_free(struct nbdc_conn *c)
{
	bd_close(c->t);
	c->t = NULL;
	if (c->evfd >= 0)
		close(c->evfd);
	free(c->slots);
	free(c->free_slots);
	free(c->rx.rbuf);
	pthread_mutex_destroy(&c->lock);
}

static void nbdc_free(struct nbdc *e)
{
	unsigned i;

	if (e->ctl) {
		smcr_ctl_remove_section(e->ctl, e->section);
		if (e->own_ctl)
			smcr_ctl_close(e->ctl);
	}
	for (i = 0; i < e->nconns; i++)
		conn_free(&e->conns[i]);
	if (e->own_ctx)
		smcr_ctx_destroy(e->ctx);
	bd_tls_client_free(e->tls_cred);
	pthread_mutex_destroy(&e->lock);
	free(e);
}

static int conn_init(struct nbdc *e, unsigned idx)
{
	struct nbdc_conn *c = &e->conns[idx];

	c->e = e;
	c->idx = idx;
	c->evfd = -1;
	pthread_mutex_init(&c->lock, NULL);
	snprintf(c->tname, sizeof(c->tname), "-");
	snprintf(c->peer, sizeof(c->peer), "-");
	c->evfd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	c->slots = calloc(NBDC_SLOTS, sizeof(*c->slots));
	c->free_slots = calloc(NBDC_SLOTS, sizeof(*c->free_slots));
	c->rx.rbuf = malloc(NBDC_RBUF);
	if (c->evfd < 0 || !c->slots || !c->free_slots || !c->rx.rbuf)
		return -ENOMEM;
	slots_reset(c);
	rx_reset(&c->rx);
	return 0;
}

int nbdc_open(const struct nbdc_opts *o, struct nbdc **out)
{
	struct nbdc *e;
	unsigned i, want;
	int r, r0 = -EHOSTUNREACH;

	if (!o || !o->host || o->nservers >= NBDC_MAX_SERVERS)
		return -EINVAL;
	e = calloc(1, sizeof(*e));
	if (!e)
		return -ENOMEM;
	pthread_mutex_init(&e->lock, NULL);
	e->transport = o->transport;
	snprintf(e->host, sizeof(e->host), "%s", o->host);
	if (o->port && *o->port)
		snprintf(e->port, sizeof(e->port), "%s", o->port);
	else
		snprintf(e->port, sizeof(e->port), "%u",
			 o->transport == NBDC_TCP ? NBD_DEFAULT_PORT : NBDC_SMCR_PORT);
	snprintf(e->export_name, sizeof(e->export_name), "%s", o->export ? o->export : "");
	snprintf(e->srv[0].host, sizeof(e->srv[0].host), "%s", e->host);
	snprintf(e->srv[0].port, sizeof(e->srv[0].port), "%s", e->port);
	for (i = 0; i < o->nservers; i++) {
		struct nbdc_server *sv = &e->srv[i + 1];

		*sv = o->servers[i];
		if (!sv->port[0])
			snprintf(sv->port, sizeof(sv->port), "%s", e->port);
	}
	e->nsrv = o->nservers + 1;
	e->timeout_ms = o->timeout_ms ? o->timeout_ms : 30000;
	e->io_timeout_ms = o->io_timeout_ms ? o->io_timeout_ms : 60000;
	e->connect_timeout_ms = o->connect_timeout_ms ? o->connect_timeout_ms : 5000;
	e->backoff_min_ms = o->backoff_min_ms ? o->backoff_min_ms : 100;
	e->backoff_max_ms = o->backoff_max_ms ? o->backoff_max_ms : 5000;
	if (e->backoff_max_ms < e->backoff_min_ms)
		e->backoff_max_ms = e->backoff_min_ms;
	e->want_ro = o->read_only;
	e->turn_end = o->turn_end;
	e->turn_arg = o->turn_arg;
	want = o->connections ? o->connections : 1;
	if (want > NBDC_MAX_CONNS)
		want = NBDC_MAX_CONNS;

	e->tls = o->tls;
	if (e->tls != NBDC_TLS_OFF) {
		struct bd_tls_client_opts to = {
			.certificates = o->tls_certificates,
			.psk_file = o->tls_psk_file,
			.username = o->tls_username,
			.hostname = o->tls_hostname ? o->tls_hostname : o->host,
			.verify_peer = !o->tls_no_verify_peer,
		};
		char why[256];

		/* smcrd offers no STARTTLS on its SMC-R port. */
		if (e->transport != NBDC_TCP) {
			r = -EPROTONOSUPPORT;
			goto out_free;
		}
		r = bd_tls_client_new(&to, &e->tls_cred, why, sizeof(why));
		if (r < 0) {
			log_err("nbd: TLS: %s", why);
			goto out_free;
		}
	}
	if (e->transport == NBDC_SMCR) {
		e->ctx = o->ctx;
		if (!e->ctx) {
			r = smcr_ctx_create(NULL, &e->ctx);
			if (r < 0) {
				log_err("nbd: SMC-R context: %s", strerror(-r));
				goto out_free;
			}
			e->own_ctx = true;
		}
	}
	/* The first connection tells whether more are allowed; it takes
	 * the first server that answers. */
	r = conn_init(e, 0);
	e->nconns = 1;
	for (i = 0; r == 0 && i < e->nsrv; i++) {
		int ri;

		e->conns[0].srv = i;
		ri = conn_connect(&e->conns[0], true);
		if (ri == 0) {
			r0 = 0;
			break;
		}
		if (i == 0)
			r0 = ri;
		/* The caller reports a missing export in one line (nbdc_strerror);
		 * a TLS failure too, with this line's detail. */
		applog(e->nsrv == 1 && (ri == -ENXIO || ri == -EPERM || ri == -ENOPROTOOPT ||
		       ri == -EKEYREJECTED || ri == -ENOKEY) ? SMCR_LOG_DEBUG :
		       i + 1 < e->nsrv ? SMCR_LOG_WARN : SMCR_LOG_ERR,
		       "nbd: %s://%s%s%s:%s/%s: %s%s",
		       e->tls == NBDC_TLS_REQUIRE ? "nbds" : nbdc_transport_name(e->transport),
		       strchr(e->srv[i].host, ':') ? "[" : "", e->srv[i].host,
		       strchr(e->srv[i].host, ':') ? "]" : "", e->srv[i].port, e->export_name,
		       e->conns[0].last_error, i + 1 < e->nsrv ? "; trying the next server" : "");
	}
	if (r == 0)
		r = r0;
	if (r < 0)
		goto out_free;
	e->good_srv = e->conns[0].srv;
	if (!(e->info.flags & NBD_FLAG_CAN_MULTI_CONN) && want > 1) {
		log_info("nbd: the server does not allow multi-conn: one connection");
		want = 1;
	}
	for (i = 1; i < want; i++) {
		r = conn_init(e, i);
		e->nconns = i + 1;
		e->conns[i].srv = e->good_srv;
		if (r == 0)
			r = conn_connect(&e->conns[i], false);
		if (r < 0) {
			log_err("nbd: connection %u: %s", i, e->conns[i].last_error);
			goto out_free;
		}
	}
	e->ro = e->want_ro || (e->info.flags & NBD_FLAG_READ_ONLY);
	e->max_req = e->info.max_payload ? e->info.max_payload : NBD_MAX_PAYLOAD;
	if (e->max_req > NBD_MAX_PAYLOAD)
		e->max_req = NBD_MAX_PAYLOAD;
	for (i = 0; i < e->nconns; i++) {
		struct nbdc_conn *c = &e->conns[i];

		mark_up(c);
		c->ever_up = true;
		r = -pthread_create(&c->thread, NULL, conn_thread, c);
		if (r) {
			ASTORE(&e->stopping, 1);
			goto out_stop;
		}
		c->thread_running = true;
	}
	/* Status on the control socket. */
	e->ctl = o->ctl;
	if (!e->ctl && o->ctl_name) {
		r = smcr_ctl_open(e->ctx, o->ctl_name, &e->ctl);
		if (r < 0)
			log_warn("nbd: no control socket: %s", strerror(-r));
		e->own_ctl = e->ctl != NULL;
	}
	if (e->ctl) {
		struct smcr_ctl_section sec = {
			.name = e->section, .dump = ctl_dump, .command = ctl_command, .arg = e,
		};

		snprintf(e->section, sizeof(e->section), "nbd");
		if (smcr_ctl_add_section(e->ctl, &sec) == -EEXIST) {
			snprintf(e->section, sizeof(e->section), "nbd:%.26s", e->export_name);
			smcr_ctl_add_section(e->ctl, &sec);
		}
	}
	log_info("nbd: %s://%s:%s/%s: %" PRIu64 " bytes, %u connection(s) (%s)%s",
		 nbdc_transport_name(e->transport), e->srv[e->good_srv].host,
		 e->srv[e->good_srv].port, e->export_name,
		 e->info.size, e->nconns, e->conns[0].tname, e->ro ? ", read-only" : "");
	*out = e;
	return 0;

out_stop:
	for (i = 0; i < e->nconns; i++) {
		conn_wake(&e->conns[i]);
		if (e->conns[i].thread_running)
			pthread_join(e->conns[i].thread, NULL);
	}
out_free:
	nbdc_free(e);
	return r;
}

void nbdc_strerror(const struct nbdc_opts *o, int err, char *buf, size_t len)
{
	char port[16], where[400];
	const char *host = o->host ? o->host : "";
	const char *scheme = o->tls == NBDC_TLS_REQUIRE && o->transport == NBDC_TCP ? "nbds" :
			     nbdc_transport_name(o->transport);
	const char *why;
	bool v6 = strchr(host, ':') != NULL;

	if (o->port && *o->port)
		snprintf(port, sizeof(port), "%s", o->port);
	else
		snprintf(port, sizeof(port), "%u",
			 o->transport == NBDC_TCP ? NBD_DEFAULT_PORT : NBDC_SMCR_PORT);
	if (err == -ENXIO) {
		snprintf(buf, len, "smcrd at %s%s%s:%s has no export '%s'", v6 ? "[" : "", host,
			 v6 ? "]" : "", port, o->export ? o->export : "");
		return;
	}
	snprintf(where, sizeof(where), "%s://%s%s%s:%s/%s", scheme, v6 ? "[" : "", host,
		 v6 ? "]" : "", port, o->export ? o->export : "");
	if (o->nservers)
		snprintf(where + strlen(where), sizeof(where) - strlen(where),
			 " (nor %u other server%s)", o->nservers, o->nservers > 1 ? "s" : "");
	switch (err) {
	case -EPERM:
		why = "the server requires TLS (use nbds://, see tls-certificates)";
		break;
	case -ENOPROTOOPT:
		why = "the server offers no TLS";
		break;
	case -EKEYREJECTED:
		why = "the server's TLS certificate is not trusted (is the CA that signed it "
		      "in tls-certificates=DIR/ca-cert.pem, and does it name the host?)";
		break;
	case -ENOKEY:
		why = "the server refused the TLS handshake (a wrong pre-shared key, or "
		      "a client certificate it does not trust?)";
		break;
	case -EPROTONOSUPPORT:
		why = o->tls ? "TLS is for NBD over TCP (nbds://): smcrd offers none on "
			       "its SMC-R port" : strerror(-err);
		break;
	default:
		why = strerror(-err);
	}
	snprintf(buf, len, "cannot attach %s: %s", where, why);
}

void nbdc_opts_from_uri(struct nbdc_opts *o, const struct nbdc_uri *u)
{
	o->host = u->host;
	o->port = u->port;
	o->export = u->export;
	o->transport = u->transport;
	if (u->tls)
		o->tls = NBDC_TLS_REQUIRE;
	if (u->tls_certificates[0])
		o->tls_certificates = u->tls_certificates;
	if (u->tls_psk_file[0])
		o->tls_psk_file = u->tls_psk_file;
	if (u->tls_username[0])
		o->tls_username = u->tls_username;
	if (u->tls_hostname[0])
		o->tls_hostname = u->tls_hostname;
	if (u->tls_verify_peer >= 0)
		o->tls_no_verify_peer = !u->tls_verify_peer;
}

void nbdc_uri_strerror(const char *uri, int err, char *buf, size_t len)
{
	struct nbdc_opts o = { 0 };
	struct nbdc_uri u;

	if (nbdc_uri_parse(uri, &u) < 0) {
		snprintf(buf, len, "%s: use smcr://HOST[:PORT]/EXPORT, nbd://... or nbds://...",
			 uri);
		return;
	}
	nbdc_opts_from_uri(&o, &u);
	nbdc_strerror(&o, err, buf, len);
}

int nbdc_open_uri(const char *uri, const struct nbdc_opts *opts, struct nbdc **out)
{
	struct nbdc_opts o = { 0 };
	struct nbdc_uri u;
	int r = nbdc_uri_parse(uri, &u);

	if (r < 0)
		return r;
	if (opts)
		o = *opts;
	nbdc_opts_from_uri(&o, &u);
	return nbdc_open(&o, out);
}

void nbdc_close(struct nbdc *e)
{
	unsigned i;

	if (!e)
		return;
	/* Status first: its callbacks read the connections. */
	if (e->ctl) {
		smcr_ctl_remove_section(e->ctl, e->section);
		if (e->own_ctl)
			smcr_ctl_close(e->ctl);
		e->ctl = NULL;
	}
	e->drain_deadline = now_ms() + NBDC_DRAIN_MS;
	ASTORE(&e->stopping, 1);
	for (i = 0; i < e->nconns; i++)
		conn_wake(&e->conns[i]);
	for (i = 0; i < e->nconns; i++)
		if (e->conns[i].thread_running)
			pthread_join(e->conns[i].thread, NULL);
	/* Requests handed to a connection after its thread ended. */
	for (i = 0; i < e->nconns; i++) {
		struct nbdc_conn *c = &e->conns[i];
		struct nbdc_req *r;

		while ((r = rq_pop(&c->subq)))
			req_complete(c, r, -ESHUTDOWN);
		turn_end(c);
	}
	nbdc_free(e);
}

uint64_t nbdc_size(struct nbdc *e)
{
	return e->info.size;
}

uint16_t nbdc_flags(struct nbdc *e)
{
	return e->info.flags;
}

bool nbdc_read_only(struct nbdc *e)
{
	return e->ro;
}

unsigned nbdc_connections(struct nbdc *e)
{
	return e->nconns;
}

uint32_t nbdc_max_request(struct nbdc *e)
{
	return e->max_req;
}

void nbdc_block_size(struct nbdc *e, uint32_t *min, uint32_t *pref, uint32_t *max)
{
	*min = e->info.min_block;
	*pref = e->info.pref_block;
	*max = e->info.max_payload;
}

struct smcr_ctx *nbdc_smcr_ctx(struct nbdc *e)
{
	return e->ctx;
}

/* --- requests ------------------------------------------------------------- */

int nbdc_submit(struct nbdc *e, uint16_t type, uint16_t flags, uint64_t offset,
		uint32_t len, void *buf, nbdc_done_fn done, void *arg)
{
	uint16_t need = 0;
	struct nbdc_conn *c;
	struct nbdc_req *r;
	struct rq q = { 0 };
	int64_t now;

	if (!done)
		return -EINVAL;
	switch (type) {
	case NBD_CMD_READ:
		if (len > e->max_req || (len && !buf) || (flags & ~NBD_CMD_FLAG_DF))
			return -EINVAL;
		flags &= (uint16_t)~NBD_CMD_FLAG_DF;
		break;
	case NBD_CMD_WRITE:
		if (len > e->max_req || (len && !buf) || (flags & ~NBD_CMD_FLAG_FUA))
			return -EINVAL;
		break;
	case NBD_CMD_FLUSH:
		need = NBD_FLAG_SEND_FLUSH;
		if (len || offset || flags)
			return -EINVAL;
		break;
	case NBD_CMD_TRIM:
		need = NBD_FLAG_SEND_TRIM;
		if (flags & ~NBD_CMD_FLAG_FUA)
			return -EINVAL;
		break;
	case NBD_CMD_WRITE_ZEROES:
		need = NBD_FLAG_SEND_WRITE_ZEROES;
		if (flags & ~(NBD_CMD_FLAG_FUA | NBD_CMD_FLAG_NO_HOLE | NBD_CMD_FLAG_FAST_ZERO))
			return -EINVAL;
		break;
	case NBD_CMD_CACHE:
		need = NBD_FLAG_SEND_CACHE;
		if (flags)
			return -EINVAL;
		break;
	case NBD_CMD_BLOCK_STATUS:
		if (!buf || !len || (flags & ~NBD_CMD_FLAG_REQ_ONE))
			return -EINVAL;
		if (!e->block_status)
			return -ENOTSUP;
		((struct nbdc_extents *)buf)->n = 0;
		break;
	default:
		return -EINVAL;
	}
	if ((flags & NBD_CMD_FLAG_FUA) && !(e->info.flags & NBD_FLAG_SEND_FUA))
		flags &= (uint16_t)~NBD_CMD_FLAG_FUA;	/* no FUA: flush does it */
	if (need && !(e->info.flags & need))
		return -ENOTSUP;
	if (e->ro && (type == NBD_CMD_WRITE || type == NBD_CMD_TRIM ||
		      type == NBD_CMD_WRITE_ZEROES))
		return -EROFS;
	if (type != NBD_CMD_FLUSH && (offset > e->info.size || len > e->info.size - offset))
		return -EINVAL;
	if (ALOAD(&e->stopping))
		return -ESHUTDOWN;

	now = now_ms();
	c = pick_up(e, NULL);
	if (!c) {
		int64_t since;

		pthread_mutex_lock(&e->lock);
		since = e->nup ? now : e->all_down_since;
		pthread_mutex_unlock(&e->lock);
		if (now - since >= (int64_t)e->timeout_ms) {
			AADD(&e->st_timed_out, 1);
			return -EIO;
		}
		c = &e->conns[AADD(&e->rr, 1) % e->nconns];
	}
	r = calloc(1, sizeof(*r));
	if (!r)
		return -ENOMEM;
	r->type = type;
	r->flags = flags;
	r->offset = offset;
	r->len = len;
	r->buf = buf;
	r->done = done;
	r->arg = arg;
	r->slot = -1;
	if (ALOAD(&c->state) != C_UP)
		r->lost_ms = now;
	AADD(&e->st_requests, 1);
	AADD(&e->st_inflight, 1);
	rq_push(&q, r);
	conn_give(c, &q, false);
	return 0;
}

/* Blocking calls: many requests, one waiter. */
struct waiter {
	pthread_mutex_t m;
	pthread_cond_t cv;
	unsigned pending;
	int result;
};

static void waiter_done(void *arg, int result)
{
	struct waiter *w = arg;

	pthread_mutex_lock(&w->m);
	if (result && !w->result)
		w->result = result;
	if (--w->pending == 0)
		pthread_cond_signal(&w->cv);
	pthread_mutex_unlock(&w->m);
}

static int run_split(struct nbdc *e, uint16_t type, uint16_t flags, uint8_t *buf,
		     uint64_t len, uint64_t offset, uint64_t chunk)
{
	struct waiter w = { .pending = 1 };
	uint64_t done = 0;
	int r = 0;

	if (!len && (type == NBD_CMD_READ || type == NBD_CMD_WRITE))
		return 0;

	pthread_mutex_init(&w.m, NULL);
	pthread_cond_init(&w.cv, NULL);
	do {
		uint64_t n = len - done < chunk ? len - done : chunk;

		pthread_mutex_lock(&w.m);
		w.pending++;
		pthread_mutex_unlock(&w.m);
		r = nbdc_submit(e, type, flags, offset + done, (uint32_t)n, buf ? buf + done : NULL,
				waiter_done, &w);
		if (r < 0) {
			waiter_done(&w, r);
			break;
		}
		done += n;
	} while (done < len);
	pthread_mutex_lock(&w.m);
	if (--w.pending)
		while (w.pending)
			pthread_cond_wait(&w.cv, &w.m);
	r = w.result;
	pthread_mutex_unlock(&w.m);
	pthread_cond_destroy(&w.cv);
	pthread_mutex_destroy(&w.m);
	return r;
}

int nbdc_pread(struct nbdc *e, void *buf, size_t len, uint64_t offset, uint16_t flags)
{
	return run_split(e, NBD_CMD_READ, flags, buf, len, offset, e->max_req);
}

int nbdc_pwrite(struct nbdc *e, const void *buf, size_t len, uint64_t offset,
		uint16_t flags)
{
	return run_split(e, NBD_CMD_WRITE, flags, (uint8_t *)buf, len, offset, e->max_req);
}

int nbdc_flush(struct nbdc *e, uint16_t flags)
{
	return run_split(e, NBD_CMD_FLUSH, flags, NULL, 0, 0, 1);
}

#define BIG_CHUNK	(1u << 30)

int nbdc_trim(struct nbdc *e, uint64_t len, uint64_t offset, uint16_t flags)
{
	return run_split(e, NBD_CMD_TRIM, flags, NULL, len, offset, BIG_CHUNK);
}

int nbdc_zero(struct nbdc *e, uint64_t len, uint64_t offset, uint16_t flags)
{
	return run_split(e, NBD_CMD_WRITE_ZEROES, flags, NULL, len, offset, BIG_CHUNK);
}

int nbdc_cache(struct nbdc *e, uint64_t len, uint64_t offset, uint16_t flags)
{
	return run_split(e, NBD_CMD_CACHE, flags, NULL, len, offset, BIG_CHUNK);
}

bool nbdc_can_block_status(struct nbdc *e)
{
	return e->block_status;
}

int nbdc_block_status(struct nbdc *e, uint32_t len, uint64_t offset, uint16_t flags,
		      struct nbd_extent *ext, unsigned max, unsigned *n)
{
	struct nbdc_extents x = { .ext = ext, .max = max };
	int r;

	*n = 0;
	if (!max)
		return -EINVAL;
	r = run_split(e, NBD_CMD_BLOCK_STATUS, flags, (uint8_t *)&x, len, offset, len);
	*n = r ? 0 : x.n;
	return r;
}
