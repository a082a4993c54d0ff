/* SPDX-License-Identifier: BSD-3-Clause */
/* smcrd: the handshake thread.  One per accepted client: the SMC-R
 * rendezvous (CLC) if any, the NBD handshake with its export lookups,
 * then the connection goes to the engine; clients counted per peer
 * address (smcrd-int.h). */
#include <config.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/socket.h>

#include "smcrd-int.h"
#include "smcrd-rbd.h"
#include "lograte.h"
#include "nbd-server.h"
#include "transport-smcr.h"
#include "monotime.h"

/* --- handshake callbacks ------------------------------------------------ */

static void fill_export(const struct export *e, struct nbd_server_export *out)
{
	out->name = e->spec.name;
	out->description = e->spec.description;
	out->size = e->size;
	out->tflags = e->tflags;
	out->min_block = e->min_block;
	out->pref_block = e->pref_block;
	out->max_payload = NBD_MAX_PAYLOAD;
}

static int cb_lookup(void *arg, const char *name, struct nbd_server_export *out,
		     void **handle)
{
	struct hs_ctx *h = arg;
	struct server *s = h->srv;
	struct export *e;
	int r = 0;

	pthread_mutex_lock(&s->lock);
	e = s->table ? export_table_find(s->table, name) : NULL;
	if (!e)
		r = -ENOENT;
	else if (!export_allows(e, (struct sockaddr *)&h->peer))
		r = -EACCES;
	else if (!tls_allow_match(e->spec.tls_allow, e->spec.ntls_allow,
				  bd_tls_peer_name(h->t)))
		r = -ETXTBSY;
	else {
		fill_export(e, out);
		*handle = export_get(e);
	}
	pthread_mutex_unlock(&s->lock);
	if (r == -EACCES)
		log_rated(LOGRATE_HANDSHAKE, h->t->peer, SMCR_LOG_INFO,
			  "client %s: export '%s' not allowed for this address", h->t->peer, name);
	if (r == -ETXTBSY) {
		const char *who = bd_tls_peer_name(h->t);

		log_rated(LOGRATE_HANDSHAKE, h->t->peer, SMCR_LOG_INFO,
			  "client %s: export '%s' not allowed for %s%s%s (tls-allow)", h->t->peer,
			  name, who ? "TLS name '" : "a client without a TLS name",
			  who ? who : "", who ? "'" : "");
		r = -EACCES;
	}
	return r;
}

static void cb_release(void *arg, void *handle)
{
	export_put(handle);
}

static int cb_list(void *arg, int (*cb)(void *, const char *, const char *), void *cbarg)
{
	struct hs_ctx *h = arg;
	struct server *s = h->srv;
	struct export **v;
	unsigned i, n = 0;
	int r = 0;

	/* References, so that the (slow) client is served without the lock. */
	pthread_mutex_lock(&s->lock);
	v = calloc(s->table->n ? s->table->n : 1, sizeof(*v));
	if (v)
		for (i = 0; i < s->table->n; i++)
			if (export_allows(s->table->v[i], (struct sockaddr *)&h->peer) &&
			    tls_allow_match(s->table->v[i]->spec.tls_allow,
					    s->table->v[i]->spec.ntls_allow, bd_tls_peer_name(h->t)))
				v[n++] = export_get(s->table->v[i]);
	pthread_mutex_unlock(&s->lock);
	if (!v)
		return -ENOMEM;
	for (i = 0; i < n; i++) {
		if (r >= 0)
			r = cb(cbarg, v[i]->spec.name, v[i]->spec.description);
		export_put(v[i]);
	}
	free(v);
	return r;
}

static bool cb_shutting_down(void *arg)
{
	struct hs_ctx *h = arg;
	bool r;

	pthread_mutex_lock(&h->srv->lock);
	r = h->srv->stopping;
	pthread_mutex_unlock(&h->srv->lock);
	return r;
}

static const char *cb_refusal(void *arg)
{
	struct hs_ctx *h = arg;

	return h->refusal[0] ? h->refusal : NULL;
}

/* TLS is for NBD/TCP: not offered on the SMC-R port (its connections
 * that fell back to TCP included). */
static int cb_tls_mode(void *arg)
{
	struct hs_ctx *h = arg;

	return h->smcr_fd >= 0 || bd_info(h->t).tcp_fd < 0 ? NBD_TLS_OFF
								   : h->srv->tls_mode;
}

static int cb_starttls(void *arg, struct bd_transport *t, int timeout_ms, int cancel_fd)
{
	struct hs_ctx *h = arg;

	return bd_tls_upgrade(t, h->srv->tls, timeout_ms, cancel_fd);
}

static const struct nbd_server_ops hs_ops = {
	.lookup = cb_lookup,
	.release = cb_release,
	.list = cb_list,
	.shutting_down = cb_shutting_down,
	.refusal = cb_refusal,
	.tls_mode = cb_tls_mode,
	.starttls = cb_starttls,
};

/* The key of max-clients-per-address (addr_key_of_fd()). */
void hs_addr_key(int fd, const struct sockaddr_storage *ss, char *out, size_t len)
{
	addr_key_of_fd(fd, (const struct sockaddr *)ss, out, len);
}

struct addr_count *hs_addr_find(struct server *s, const char *addr)
{
	unsigned i;

	for (i = 0; i < s->naddrs; i++)
		if (!strcmp(s->addrs[i].addr, addr))
			return &s->addrs[i];
	return NULL;
}

/* Request memory one address may hold: never the whole pool (0: no
 * limit). */
uint64_t hs_mem_per_address(const struct server *s)
{
	if (s->cfg.max_mem_per_address == UINT64_MAX)
		return s->cfg.max_memory / 2;
	if (s->cfg.max_mem_per_address >= s->cfg.max_memory)
		return 0;
	return s->cfg.max_mem_per_address;
}

/* Handshakes one address may hold at once: never the whole pool. */
unsigned hs_per_address(const struct server *s)
{
	if (s->cfg.max_hs_per_address >= 0)
		return (unsigned)s->cfg.max_hs_per_address;
	return s->cfg.max_handshakes > 1 ? s->cfg.max_handshakes / 2 : 1;
}

/* Whether address a (NULL: none yet) may have one more client slot:
 * max-clients-per-address, and its share of max-clients among the
 * addresses that hold some (share_allows()); with no per-address limit
 * (0), no share either.  s->lock held. */
bool hs_addr_may_connect(const struct server *s, const struct addr_count *a)
{
	if (!s->cfg.max_per_address)
		return true;	/* 0: no per-address limit, no share */
	if (a && a->n >= s->cfg.max_per_address)
		return false;
	return share_allows(s->cfg.max_clients, s->clients, a ? a->n : 0, s->naddrs,
			    s->cfg.max_per_address, 1);
}

/* The same for a handshake slot (max-handshakes-per-address, and the
 * share of max-handshakes); when the pool is full, as if the handshake
 * hs_evict() would end were gone (an address over its share evicts
 * none).  s->lock held. */
bool hs_addr_may_handshake(const struct server *s, const struct addr_count *a)
{
	unsigned cap = hs_per_address(s);
	unsigned live = s->handshakes - s->hs_dying;

	if (live >= s->cfg.max_handshakes)
		live = s->cfg.max_handshakes ? s->cfg.max_handshakes - 1 : 0;

	if (!cap)
		return true;
	if (a && a->hs >= cap)
		return false;
	return share_allows(s->cfg.max_handshakes, live, a ? a->hs : 0, s->hs_addrs, cap, 1);
}

/* One more client from addr, in the handshake (s->lock held): -EBUSY at
 * the limit. */
int hs_addr_get(struct server *s, const char *addr)
{
	struct addr_count *v, *a = hs_addr_find(s, addr);

	if (a) {
		if (s->cfg.max_per_address && a->n >= s->cfg.max_per_address)
			return -EBUSY;
		a->n++;
		if (!a->hs++)
			s->hs_addrs++;
		return 0;
	}
	if (s->naddrs == s->caddrs) {
		v = realloc(s->addrs, (s->caddrs ? s->caddrs * 2 : 16) * sizeof(*v));
		if (!v)
			return -ENOMEM;
		s->addrs = v;
		s->caddrs = s->caddrs ? s->caddrs * 2 : 16;
	}
	snprintf(s->addrs[s->naddrs].addr, sizeof(s->addrs[0].addr), "%s", addr);
	s->addrs[s->naddrs].hs = 1;
	s->addrs[s->naddrs++].n = 1;
	s->hs_addrs++;
	return 0;
}

/* addr's client left the handshake (s->lock held). */
void hs_addr_done(struct server *s, const char *addr)
{
	struct addr_count *a = hs_addr_find(s, addr);

	if (a && a->hs && !--a->hs)
		s->hs_addrs--;
}

/* The handshake list, oldest first (s->lock held). */
void hs_list_add(struct server *s, struct hs_ctx *h)
{
	h->hs_next = NULL;
	h->hs_prev = s->hs_tail;
	if (s->hs_tail)
		s->hs_tail->hs_next = h;
	else
		s->hs_head = h;
	s->hs_tail = h;
	h->listed = true;
}

void hs_list_del(struct server *s, struct hs_ctx *h)
{
	if (!h->listed)
		return;
	if (h->hs_prev)
		h->hs_prev->hs_next = h->hs_next;
	else
		s->hs_head = h->hs_next;
	if (h->hs_next)
		h->hs_next->hs_prev = h->hs_prev;
	else
		s->hs_tail = h->hs_prev;
	h->listed = false;
}

/* max-handshakes is full and a client from addr comes: the oldest
 * handshake of the address that holds the most (addr's newcomer
 * counted; a refused client's, with no address, if none) is shut down,
 * so that slow or silent clients cannot keep newer ones out.  Its thread
 * ends it (and counts it against no limit meanwhile).  Returns the
 * victim's address key (copied to victim), or NULL when none can go
 * (SMC-R handshakes are not evicted; at most max-handshakes end at
 * once).  s->lock held. */
const char *hs_evict(struct server *s, const char *addr, char *victim, size_t len)
{
	const struct addr_count *big = NULL;
	struct hs_ctx *h, *any = NULL;
	unsigned i, most = 0;

	if (s->hs_dying >= s->cfg.max_handshakes)
		return NULL;
	for (i = 0; i < s->naddrs; i++) {
		unsigned n = s->addrs[i].hs + !strcmp(s->addrs[i].addr, addr);

		if (n > most) {
			most = n;
			big = &s->addrs[i];
		}
	}
	for (h = s->hs_head; h; h = h->hs_next) {
		if (h->evicted || h->kill_fd < 0)
			continue;
		if (!any)
			any = h;
		if (big && h->hs_counted && !strcmp(h->addr, big->addr))
			break;
	}
	if (!h)
		h = any;
	if (!h)
		return NULL;
	h->evicted = true;
	s->hs_dying++;
	s->handshakes_evicted++;
	shutdown(h->kill_fd, SHUT_RDWR);
	snprintf(victim, len, "%s", h->addr[0] ? h->addr : "a refused client");
	return victim;
}

void hs_addr_put(struct server *s, const char *addr)
{
	unsigned i;

	for (i = 0; i < s->naddrs; i++)
		if (!strcmp(s->addrs[i].addr, addr)) {
			if (!--s->addrs[i].n)
				s->addrs[i] = s->addrs[--s->naddrs];
			return;
		}
}

void hs_client_gone(void *arg, void *owner)
{
	struct server *s = arg;

	pthread_mutex_lock(&s->lock);
	s->clients--;
	if (owner)
		hs_addr_put(s, owner);
	pthread_mutex_unlock(&s->lock);
	free(owner);
}

static struct lograte_every rl_hs_timeout = LOGRATE_EVERY_INIT;

void *hs_main(void *arg)
{
	struct hs_ctx *h = arg;
	struct server *s = h->srv;
	struct nbd_handshake_limits lim = {
		.timeout_ms = HANDSHAKE_TIMEOUT_MS,
		.total_ms = (int)s->cfg.handshake_timeout * 1000,
		.cancel_fd = s->cancel_fd,
		.max_options = HANDSHAKE_MAX_OPTIONS,
	};
	struct nbd_server_session sess;
	bool counted = !h->refusal[0];
	int64_t spent = now_ms() - h->accepted;
	int r = 0;

	/* The deadline counts from accept (a thread slow to start included). */
	lim.total_ms = spent < lim.total_ms ? lim.total_ms - (int)spent : 1;

	if (h->smcr_fd >= 0) {
		/* SMC-R: the CLC exchange first (or TCP fallback), here so
		 * that a slow peer never holds up the accept loop. */
		struct smcr_sock *sk;

		r = smcr_accept_fd(s->smcr, h->smcr_fd, &sk);
		h->smcr_fd = -1;
		if (r == 0) {
			r = bd_smcr_transport_new(sk, &h->t);
			if (r)
				smcr_close(sk);
		}
		if (r) {
			char peer[64];

			bd_format_addr((struct sockaddr *)&h->peer, sizeof(h->peer), peer,
				       sizeof(peer));
			log_rated(LOGRATE_HANDSHAKE, peer, SMCR_LOG_INFO,
				  "SMC-R client %s: rendezvous failed: %s", peer, strerror(-r));
		}
	}
	if (r == 0)
		r = nbd_server_handshake(h->t, &hs_ops, h, &lim, &sess);
	if (r == 0 && ((struct export *)sess.handle)->rbd) {
		/* An exclusive RBD export becomes this gateway's on a
		 * client's arrival (it fences the old owner); if it cannot,
		 * the client is closed and tries its next server. */
		struct export *e = sess.handle;
		unsigned wait_ms = e->spec.lock_timeout_ms ? e->spec.lock_timeout_ms :
				   RBD_LOCK_TIMEOUT_MS;
		int64_t left = (int64_t)s->cfg.handshake_timeout * 1000 - (now_ms() - h->accepted);

		/* Within the handshake's own limit too. */
		if (s->cfg.handshake_timeout && left < (int64_t)wait_ms)
			wait_ms = left > 0 ? (unsigned)left : 1;
		r = smcrd_rbd_activate(e->rbd, wait_ms);
		if (r == -ETIMEDOUT) {
			log_warn("client %s: export '%s' not served: the cluster did not hand "
				 "this gateway the image's lock within %u ms (lock-timeout): "
				 "closed, the gateway stays passive", h->t->peer, e->spec.name,
				 wait_ms);
			export_put(e);
			r = -ENOLCK;
		} else if (r < 0) {
			log_warn("client %s: export '%s' not served: %s", h->t->peer,
				 e->spec.name, strerror(-r));
			export_put(e);
			r = -ENOLCK;
		}
	}
	pthread_mutex_lock(&s->lock);
	/* Out of the list before its socket goes (engine or close). */
	hs_list_del(s, h);
	if (h->hs_counted) {
		hs_addr_done(s, h->addr);
		h->hs_counted = false;
	}
	pthread_mutex_unlock(&s->lock);
	if (h->evicted && r) {
		log_rated(LOGRATE_HANDSHAKE, h->t ? h->t->peer : "?", SMCR_LOG_INFO,
			  "client %s: evicted from the handshake (max-handshakes full; the "
			  "oldest of its address)", h->t ? h->t->peer : "?");
		r = -ECONNABORTED;
	}
	if (r == 0) {
		/* The engine owns the transport and the export reference now,
		 * and reports the end through hs_client_gone(). */
		char *owner = h->addr[0] ? strdup(h->addr) : NULL;

		if (engine_add(s->engine, h->t, sess.handle, &sess, owner) == 0)
			counted = false;
		else
			free(owner);
		if (!counted && h->addr[0] && !owner) {
			/* No memory for the key: uncounted from now on. */
			pthread_mutex_lock(&s->lock);
			hs_addr_put(s, h->addr);
			pthread_mutex_unlock(&s->lock);
		}
		h->t = NULL;
	} else if (!h->t) {
		/* The SMC-R rendezvous failed: logged above. */
	} else if (r == -ENOLCK) {
		/* Logged above. */
	} else if (r == -ECONNABORTED) {
		log_dbg("client %s: left during the handshake", h->t->peer);
	} else if (r == -ETIMEDOUT) {
		pthread_mutex_lock(&s->lock);
		s->handshake_timeouts++;
		pthread_mutex_unlock(&s->lock);
		/* Two limits end a handshake: the whole (handshake-timeout)
		 * and each wait for the client's next bytes: name the one. */
		if (s->cfg.handshake_timeout &&
		    now_ms() - h->accepted >= (int64_t)s->cfg.handshake_timeout * 1000)
			limit_warn(&rl_hs_timeout, "client %s: handshake not done in time "
				   "(handshake-timeout %u s): closed", h->t->peer,
				   s->cfg.handshake_timeout);
		else
			limit_warn(&rl_hs_timeout, "client %s: no bytes from it for %d s during "
				   "the handshake (the read wait): closed", h->t->peer,
				   HANDSHAKE_TIMEOUT_MS / 1000);
	} else {
		log_rated(LOGRATE_HANDSHAKE, h->t->peer, SMCR_LOG_INFO,
			  "client %s: handshake ended: %s", h->t->peer, strerror(-r));
	}
	bd_close(h->t);
	pthread_mutex_lock(&s->lock);
	if (counted) {
		s->clients--;
		if (h->addr[0])
			hs_addr_put(s, h->addr);
	}
	if (h->refusal[0])
		s->refusing--;
	if (h->evicted)
		s->hs_dying--;
	s->handshakes--;
	pthread_cond_broadcast(&s->cond);
	pthread_mutex_unlock(&s->lock);
	free(h);
	return NULL;
}

void hs_free(struct hs_ctx *h)
{
	if (h->smcr_fd >= 0)
		close(h->smcr_fd);
	bd_close(h->t);
	free(h);
}
