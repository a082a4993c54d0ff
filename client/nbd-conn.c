/* SPDX-License-Identifier: BSD-3-Clause */
/* smcrbd: an NBD export from the client's side: several connections, one
 * thread each, asynchronous requests with callbacks, reconnect with
 * backoff and resend of the requests that were out (see nbd-conn.h).
 *
 * Ownership: a request belongs to exactly one connection at a time.
 * Other threads hand requests to a connection through its submission
 * queue (subq, under its lock, woken by its eventfd); requests its own
 * thread submits from watch_ready (nbdc_watch) go straight into its send
 * queue.  Everything else of a connection (transport, send queue,
 * in-flight table, reply parser, waiting queue) is private to its thread.  When a connection is lost,
 * its thread takes back every request it had (sent or not), and gives
 * them to a connection that is up, or keeps them while it reconnects.
 *
 * Thread loop of a connection that is up: send what is queued (one
 * writev for many requests), read replies until nothing is left, then
 * sleep in poll(2) on the transport and the eventfd.  An SMC-R socket's
 * descriptor is an eventfd that means "look again" for both directions,
 * so before sleeping the thread asks smcr_sock_events(), which clears it
 * first and then reports what is ready (no lost wake-up).
 *
 * This file is the top of the engine's rooms (nbd-conn-int.h lists them). */
#include <config.h>

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/eventfd.h>

#include "applog.h"
#include "nbd-conn-int.h"
#include "smcr.h"
#include "transport-tls.h"
#include "transport.h"

/* --- the connection thread ------------------------------------------------- */

/* (The eventfd is drained in nbdc_sleep_on, when poll says so: no system call
 * here on every turn of the loop.) */
static void take_submissions(struct nbdc_conn *c)
{
	struct rq q;

	pthread_mutex_lock(&c->lock);
	q = c->subq;
	c->subq = (struct rq){ 0 };
	c->wake_pending = false;
	pthread_mutex_unlock(&c->lock);
	if (ALOAD(&c->state) == C_UP)
		rq_splice(&c->txq, &q);
	else
		rq_splice(&c->waitq, &q);
}

static void up_step(struct nbdc_conn *c)
{
	struct nbdc *e = c->e;
	bool progress = false;
	struct pollfd p;
	int64_t now;
	int ret, timeout;

	ret = nbdc_tx(c, &progress);
	if (ret == 0)
		ret = nbdc_rx(c, &progress);
	if (ret == 0 && c->shut)
		ret = -ESHUTDOWN;
	if (ret == 0 && ALOAD(&c->drop)) {
		ASTORE(&c->drop, 0);
		ret = -ECONNABORTED;
	}
	if (ret < 0) {
		nbdc_conn_lost(c, ret);
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
			nbdc_conn_lost(c, -ETIMEDOUT);
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
	nbdc_sleep_on(c, &p, timeout);
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
		nbdc_watch_turn(c);
		if (ALOAD(&c->state) == C_UP)
			up_step(c);
		else
			nbdc_down_step(c);
		nbdc_turn_end(c);
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
		nbdc_req_complete(c, r, -ESHUTDOWN);
	nbdc_turn_end(c);
	if (c->t) {
		if (ALOAD(&c->state) == C_UP)
			nbdc_send_disc(c);
		bd_close(c->t);
		c->t = NULL;
	}
	return NULL;
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
	c->watch_fd = -1;
	pthread_mutex_init(&c->lock, NULL);
	snprintf(c->tname, sizeof(c->tname), "-");
	snprintf(c->peer, sizeof(c->peer), "-");
	c->evfd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	c->slots = calloc(NBDC_SLOTS, sizeof(*c->slots));
	c->free_slots = calloc(NBDC_SLOTS, sizeof(*c->free_slots));
	c->rx.rbuf = malloc(NBDC_RBUF);
	if (c->evfd < 0 || !c->slots || !c->free_slots || !c->rx.rbuf)
		return -ENOMEM;
	nbdc_slots_reset(c);
	nbdc_rx_reset(&c->rx);
	return 0;
}

int nbdc_open(const struct nbdc_opts *o, struct nbdc **out)
{
	char where[400];
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
	else if (o->transport != NBDC_UNIX)
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
	e->first_up = o->first_up;
	e->turn_end = o->turn_end;
	e->turn_arg = o->turn_arg;
	e->watch_ready = o->watch_ready;
	e->sent = o->sent;
	want = o->connections ? o->connections : 1;
	if (want > NBDC_MAX_CONNS)
		want = NBDC_MAX_CONNS;

	e->tls = o->tls;
	if (e->tls != NBDC_TLS_OFF) {
		struct bd_tls_client_opts to = {
			.certificates = o->tls_certificates,
			.psk_file = o->tls_psk_file,
			.username = o->tls_username,
			/* A socket's path is no host name: "localhost" */
			.hostname = o->tls_hostname ? o->tls_hostname :
				    o->transport == NBDC_UNIX ? "localhost" : o->host,
			.verify_peer = !o->tls_no_verify_peer,
		};
		char why[256];

		/* smcrd offers no STARTTLS on its SMC-R port. */
		if (e->transport == NBDC_SMCR) {
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
			struct smcr_ctx_opts co = { .rmbe_size = o->rmbe_size };

			r = smcr_ctx_create(&co, &e->ctx);
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
		ri = nbdc_conn_connect(&e->conns[0], true, e->connect_timeout_ms);
		if (ri == 0) {
			r0 = 0;
			break;
		}
		if (i == 0)
			r0 = ri;
		/* The caller reports a missing export in one line (nbdc_strerror);
		 * a TLS failure too, with this line's detail. */
		nbdc_uri_format(e->transport, e->tls == NBDC_TLS_REQUIRE, e->srv[i].host,
				e->srv[i].port, e->export_name, where, sizeof(where));
		applog(e->nsrv == 1 && (ri == -ENXIO || ri == -EPERM || ri == -ENOPROTOOPT ||
		       ri == -EKEYREJECTED || ri == -ENOKEY) ? SMCR_LOG_DEBUG :
		       i + 1 < e->nsrv ? SMCR_LOG_WARN : SMCR_LOG_ERR,
		       "nbd: %s: %s%s", where,
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
		if (r == 0 && e->first_up) {
			/* Its thread connects it (nbdc_down_step), at once. */
			struct nbdc_conn *c = &e->conns[i];

			c->good_gen = e->good_gen;
			c->down_since = now_ms();
			c->next_attempt_ms = 0;
			snprintf(c->last_error, sizeof(c->last_error), "connecting");
			continue;
		}
		if (r == 0)
			r = nbdc_conn_connect(&e->conns[i], false, e->connect_timeout_ms);
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

		if (i == 0 || !e->first_up) {
			nbdc_mark_up(c);
			c->ever_up = true;
		}
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
			.name = e->section, .dump = nbdc_ctl_dump, .command = nbdc_ctl_command,
			.arg = e,
		};

		snprintf(e->section, sizeof(e->section), "nbd");
		if (smcr_ctl_add_section(e->ctl, &sec) == -EEXIST) {
			snprintf(e->section, sizeof(e->section), "nbd:%.26s", e->export_name);
			smcr_ctl_add_section(e->ctl, &sec);
		}
	}
	nbdc_uri_format(e->transport, e->tls == NBDC_TLS_REQUIRE, e->srv[e->good_srv].host,
			e->srv[e->good_srv].port, e->export_name, where, sizeof(where));
	log_info("nbd: %s: %" PRIu64 " bytes, %u connection(s) (%s)%s", where,
		 e->info.size, e->nconns, e->conns[0].tname, e->ro ? ", read-only" : "");
	*out = e;
	return 0;

out_stop:
	for (i = 0; i < e->nconns; i++) {
		nbdc_conn_wake(&e->conns[i]);
		if (e->conns[i].thread_running)
			pthread_join(e->conns[i].thread, NULL);
	}
out_free:
	nbdc_free(e);
	return r;
}

void nbdc_strerror(const struct nbdc_opts *o, int err, char *buf, size_t len)
{
	char port[16] = "", where[400];
	const char *host = o->host ? o->host : "";
	const char *why;
	bool v6 = strchr(host, ':') != NULL;

	if (o->port && *o->port)
		snprintf(port, sizeof(port), "%s", o->port);
	else if (o->transport != NBDC_UNIX)
		snprintf(port, sizeof(port), "%u",
			 o->transport == NBDC_TCP ? NBD_DEFAULT_PORT : NBDC_SMCR_PORT);
	if (err == -ENXIO) {
		snprintf(buf, len, "smcrd at %s%s%s%s%s has no export '%s'", v6 ? "[" : "", host,
			 v6 ? "]" : "", *port ? ":" : "", port, o->export ? o->export : "");
		return;
	}
	nbdc_uri_format(o->transport, o->tls == NBDC_TLS_REQUIRE, host, port, o->export,
			where, sizeof(where));
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
		nbdc_conn_wake(&e->conns[i]);
	for (i = 0; i < e->nconns; i++)
		if (e->conns[i].thread_running)
			pthread_join(e->conns[i].thread, NULL);
	/* Requests handed to a connection after its thread ended. */
	for (i = 0; i < e->nconns; i++) {
		struct nbdc_conn *c = &e->conns[i];
		struct nbdc_req *r;

		while ((r = rq_pop(&c->subq)))
			nbdc_req_complete(c, r, -ESHUTDOWN);
		nbdc_turn_end(c);
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

static int submit(struct nbdc *e, uint16_t type, uint16_t flags, uint64_t offset, uint32_t len,
		  void *buf, nbdc_sink_fn sink, nbdc_source_fn source, nbdc_done_fn done,
		  void *arg)
{
	uint16_t need = 0;
	struct nbdc_conn *c, *own;
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
	/* From watch_ready: its own connection if that is up (its state
	 * changes only in this thread). */
	own = nbdc_watching(e);
	if (own && ALOAD(&own->state) != C_UP)
		own = NULL;
	c = own ? own : nbdc_pick_up(e, NULL);
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
	r->sink = sink;
	r->source = source;
	r->slot = -1;
	r->submit_ms = now;
	AADD(&e->st_requests, 1);
	AADD(&e->st_inflight, 1);
	if (c == own) {
		/* Its own thread, before it sends: straight into txq. */
		AADD(&c->load, 1);
		rq_push(&c->txq, r);
		return 0;
	}
	rq_push(&q, r);
	nbdc_conn_give(c, &q, false);
	return 0;
}

int nbdc_submit(struct nbdc *e, uint16_t type, uint16_t flags, uint64_t offset,
		uint32_t len, void *buf, nbdc_done_fn done, void *arg)
{
	return submit(e, type, flags, offset, len, buf, NULL, NULL, done, arg);
}

int nbdc_submit_read(struct nbdc *e, uint64_t offset, uint32_t len, void *buf,
		     nbdc_sink_fn sink, nbdc_done_fn done, void *arg)
{
	if (!sink)
		return -EINVAL;
	return submit(e, NBD_CMD_READ, 0, offset, len, buf, sink, NULL, done, arg);
}

int nbdc_submit_write(struct nbdc *e, uint16_t flags, uint64_t offset, uint32_t len,
		      void *buf, nbdc_source_fn source, nbdc_done_fn done, void *arg)
{
	if (!source || !len)
		return -EINVAL;
	return submit(e, NBD_CMD_WRITE, flags, offset, len, buf, NULL, source, done, arg);
}

int nbdc_watch(struct nbdc *e, unsigned conn, int fd)
{
	if (!e->watch_ready || conn >= e->nconns || fd < 0)
		return -EINVAL;
	ASTORE(&e->conns[conn].watch_fd, fd);
	nbdc_conn_wake(&e->conns[conn]);
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
