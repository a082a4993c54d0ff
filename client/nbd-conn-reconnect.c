/* SPDX-License-Identifier: BSD-3-Clause */
/* smcrbd client engine: connecting.  One attempt with its handshake, a
 * connection that comes up or is lost, and a connection that is down:
 * its requests handed over or expired, reconnect with backoff over the
 * server list (nbd-conn-int.h). */
#include <config.h>

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "applog.h"
#include "nbd-client.h"
#include "nbd-conn-int.h"
#include "smcr.h"
#include "transport-smcr.h"
#include "transport-tls.h"
#include "transport.h"

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

/* One connection attempt, handshake included, within budget_ms in all
 * (connect, greeting, options, TLS): 0 and c->t set, or -errno (with
 * c->last_error).  first: learn the export's info. */
int nbdc_conn_connect(struct nbdc_conn *c, bool first, unsigned budget_ms)
{
	struct nbdc *e = c->e;
	struct bd_transport *t = NULL;
	struct nbd_export_info info;
	struct nbd_client *nc;
	struct smcr_sock_info si;
	struct bd_transport_info ti;
	const struct nbdc_server *s = &e->srv[c->srv];
	int64_t deadline = now_ms() + budget_ms, left;
	int r;

	ASTORE(&c->t_attempt_ms, now_ms());
	ASTORE(&c->t_transport_ms, 0);
	ASTORE(&c->t_handshake_ms, 0);
	if (e->transport == NBDC_SMCR)
		r = bd_smcr_connect(e->ctx, s->host, s->port, (int)budget_ms, &t);
	else if (e->transport == NBDC_UNIX)
		r = bd_unix_connect(s->host, (int)budget_ms, &t);
	else
		r = bd_tcp_connect(s->host, s->port, (int)budget_ms, &t);
	if (r < 0) {
		set_error(c, "connect: %s", strerror(-r));
		return r;
	}
	ASTORE(&c->t_transport_ms, now_ms());
	left = deadline - now_ms();
	r = nbd_client_open(t, left > 0 ? (int)left : 1, &nc);
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
			int tl = nbd_client_left_ms(nc);

			r = bd_tls_client_upgrade(nbd_client_transport(nc), e->tls_cred,
						  tl > 0 ? tl : 1, -1, why, sizeof(why));
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
	ASTORE(&c->t_handshake_ms, now_ms());
	c->structured = nbd_client_is_structured(nc);
	c->t = nbd_client_detach(nc);
	ti = bd_info(c->t);
	c->smc = ti.smcr;
	if (c->smc && (smcr_sock_info(c->smc, &si) || !si.smc))
		c->smc = NULL;
	/* Half the send buffer at most: a WRITE waits for that much room
	 * whole (a writev would stream it), so two at a time fit. */
	c->zc_tx_max = c->smc ? si.peer_rmbe_size / 2 : 0;
	pthread_mutex_lock(&c->lock);
	/* Over smcr:// a connection that fell back to TCP says so. */
	snprintf(c->tname, sizeof(c->tname), "%s",
		 e->transport == NBDC_SMCR && strcmp(ti.name, "smcr") ?
		 "tcp-fallback" : ti.name);
	snprintf(c->peer, sizeof(c->peer), "%.63s", c->t->peer[0] ? c->t->peer : s->host);
	c->last_error[0] = '\0';
	pthread_mutex_unlock(&c->lock);
	return 0;
out_close:
	nbd_client_close(nc);
	return r;
}

void nbdc_mark_up(struct nbdc_conn *c)
{
	struct nbdc *e = c->e;

	nbdc_rx_reset(&c->rx);
	nbdc_slots_reset(c);
	c->shut = false;
	c->spins = 0;
	c->last_progress_ms = c->up_ms = now_ms();
	ASTORE(&c->t_up_ms, c->up_ms);
	pthread_mutex_lock(&e->lock);
	e->nup++;
	pthread_mutex_unlock(&e->lock);
	ASTORE(&c->state, C_UP);
}

/* Takes back every request of a lost connection. */
void nbdc_conn_lost(struct nbdc_conn *c, int err)
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
	bd_abort(c->t);
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
	nbdc_slots_reset(c);
	nbdc_rx_reset(&c->rx);
	for (r = all.head; r; r = r->next) {
		if (r->sent) {
			r->was_sent = true;
			r->resends++;
		}
		r->sent = 0;
		r->slot = -1;
		nbdc_req_rewind(r);
		n++;
	}
	rq_splice(&c->waitq, &all);
	/* A connection that was up for a while: back at once.  One the
	 * server shut (ESHUTDOWN) or that was lost soon after it came up:
	 * after the backoff, which grows while that goes on, so a server
	 * that answers every request with ESHUTDOWN, or drops every
	 * connection, gets a few connections a second at most. */
	if (now - c->up_ms >= NBDC_STABLE_MS)
		c->backoff_ms = e->backoff_min_ms;
	if (err == -ESHUTDOWN || now - c->up_ms < NBDC_STABLE_MS) {
		unsigned wait_ms = c->backoff_ms ? c->backoff_ms : e->backoff_min_ms;

		c->next_attempt_ms = now + wait_ms - (rand() % (wait_ms / 4 + 1));
		c->backoff_ms = wait_ms * 2 > e->backoff_max_ms ? e->backoff_max_ms : wait_ms * 2;
	} else {
		c->next_attempt_ms = now;
	}
	(void)n;
}

/* A connection that is down: expire its requests, hand the others over,
 * and reconnect when the backoff allows.  A request's timeout counts from
 * its submission, however often it went out and came back (ESHUTDOWN,
 * lost connections, handshakes that fail), so it is checked here, before
 * the request moves on. */
void nbdc_down_step(struct nbdc_conn *c)
{
	struct nbdc *e = c->e;
	int64_t now = now_ms(), wake, first_due = INT64_MAX;
	unsigned budget = e->connect_timeout_ms;
	bool cut = false;
	struct nbdc_conn *o;
	struct nbdc_req *r, **pp;
	struct rq expired = { 0 };
	unsigned wait_ms;
	int ret;

	for (pp = &c->waitq.head; (r = *pp);) {
		if (now - r->submit_ms >= (int64_t)e->timeout_ms || r->resends > NBDC_MAX_RESENDS) {
			*pp = r->next;
			c->waitq.n--;
			rq_push(&expired, r);
			continue;
		}
		pp = &r->next;
	}
	c->waitq.tail = NULL;
	for (r = c->waitq.head; r; r = r->next) {
		c->waitq.tail = r;
		if (r->submit_ms + (int64_t)e->timeout_ms < first_due)
			first_due = r->submit_ms + (int64_t)e->timeout_ms;
	}
	if (expired.n)
		log_warn("nbd: connection %u: %u request(s) failed: %u ms since submitted, no connection",
			 c->idx, expired.n, e->timeout_ms);
	while ((r = rq_pop(&expired))) {
		AADD(&e->st_timed_out, 1);
		nbdc_req_complete(c, r, -EIO);
	}
	if (c->waitq.n && !ALOAD(&e->stopping) && (o = nbdc_pick_up(e, c))) {
		unsigned n = c->waitq.n;

		nbdc_conn_give(o, &c->waitq, true);
		ASUB(&c->load, n);
		first_due = INT64_MAX;
	}
	if (ALOAD(&e->stopping))
		return;
	/* An attempt (connect and handshake) takes at most the timeout (or
	 * NBDC_ATTEMPT_FLOOR_MS if that is less), so a request submitted
	 * meanwhile does not wait past its own, and it ends by the first
	 * deadline of the requests waiting for it: a handshake that never
	 * ends holds none of them past their timeout.  An attempt with too
	 * little time left waits for that request to fail first. */
	if (budget > e->timeout_ms)
		budget = e->timeout_ms > NBDC_ATTEMPT_FLOOR_MS ? e->timeout_ms : NBDC_ATTEMPT_FLOOR_MS;
	if (budget > e->connect_timeout_ms)
		budget = e->connect_timeout_ms;
	if (first_due - now < budget) {
		budget = (unsigned)(first_due - now);
		cut = true;
	}
	if (now >= c->next_attempt_ms && (!cut || budget >= NBDC_MIN_ATTEMPT_MS)) {
		char which[32] = "";

		/* Another connection reached a server: that one first. */
		pthread_mutex_lock(&e->lock);
		if (c->good_gen != e->good_gen) {
			c->good_gen = e->good_gen;
			c->srv = e->good_srv;
		}
		pthread_mutex_unlock(&e->lock);
		ret = nbdc_conn_connect(c, false, budget);
		if (ret == 0) {
			pthread_mutex_lock(&e->lock);
			e->good_srv = c->srv;
			c->good_gen = ++e->good_gen;
			pthread_mutex_unlock(&e->lock);
			nbdc_mark_up(c);
			if (e->nsrv > 1)
				snprintf(which, sizeof(which), "server %u of %u, ", c->srv + 1,
					 e->nsrv);
			if (!c->ever_up) {
				/* Its first connect (first_up), not a reconnect. */
				c->ever_up = true;
				log_info("nbd: connection %u to %s:%s is up (%s%s)", c->idx,
					 e->srv[c->srv].host, e->srv[c->srv].port, which,
					 c->tname);
				rq_splice(&c->txq, &c->waitq);
				return;
			}
			AADD(&c->st_reconnects, 1);
			log_info("nbd: connection %u to %s:%s is back (%s%s), resending %u request(s)",
				 c->idx, e->srv[c->srv].host, e->srv[c->srv].port, which, c->tname,
				 c->waitq.n);
			rq_splice(&c->txq, &c->waitq);
			return;
		}
		log_dbg("nbd: connection %u: %s:%s: %s", c->idx, e->srv[c->srv].host,
			e->srv[c->srv].port, strerror(-ret));
		if (!c->ever_up && !ALOAD(&c->st_failed))
			log_warn("nbd: connection %u to %s:%s: %s; trying again", c->idx,
				 e->srv[c->srv].host, e->srv[c->srv].port, c->last_error);
		c->srv = (c->srv + 1) % e->nsrv;
		AADD(&c->st_failed, 1);
		/* Refused: the host answered with no listener (a server that
		 * restarts); a refused connect costs it a RST, so try again
		 * soon, without growing the backoff.  Timeouts and failed
		 * handshakes back off. */
		if (ret == -ECONNREFUSED) {
			wait_ms = NBDC_REFUSED_RETRY_MS;
		} else {
			c->backoff_ms = c->backoff_ms ? c->backoff_ms * 2 : e->backoff_min_ms;
			if (c->backoff_ms > e->backoff_max_ms)
				c->backoff_ms = e->backoff_max_ms;
			wait_ms = c->backoff_ms;
		}
		/* Jitter: 75..100% of the wait, so connections spread out. */
		c->next_attempt_ms = now_ms() + wait_ms - (rand() % (wait_ms / 4 + 1));
		log_dbg("nbd: connection %u: reconnect failed (%s), next in %u ms", c->idx,
			strerror(-ret), wait_ms);
		return;
	}
	wake = c->next_attempt_ms > now ? c->next_attempt_ms : now + NBDC_MIN_ATTEMPT_MS;
	if (first_due < wake)
		wake = first_due;
	if (c->waitq.n && wake > now + 100)
		wake = now + 100;	/* look for a connection that came up */
	nbdc_sleep_on(c, NULL, wake > now ? (int)(wake - now) : 0);
}
