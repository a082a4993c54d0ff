/* SPDX-License-Identifier: BSD-3-Clause */
/* smcrd: the smcrbd target daemon.  Exports files and block devices over
 * NBD (plain TCP now; SMC-R once libsmcr provides connections). */
#include <config.h>

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <grp.h>
#include <limits.h>
#include <netdb.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <syslog.h>
#include <time.h>
#include <unistd.h>

#include "smcrd-conf.h"
#include "smcrd-engine.h"
#include "smcrd-export.h"
#include "smcrd-rbd.h"
#include "applog.h"
#include "jsonw.h"
#include "strbuf.h"
#include "smcrd-systemd.h"
#include "transport-tls.h"
#include "lograte.h"
#include "nbd-server.h"
#include "transport.h"
#include "transport-smcr.h"
#include "monotime.h"

#define EXIT_USAGE		2
#define HANDSHAKE_TIMEOUT_MS	30000
#define HANDSHAKE_MAX_OPTIONS	128
#define MAX_REFUSING		16
#define LISTEN_MAX		8
/* Out of descriptors: stop accepting this long, then try again. */
#define ACCEPT_PAUSE_MS		100
/* A refusal at a limit is logged once per this interval, with a count. */
#define LIMIT_LOG_MS		10000

/* Rate-limited logging of one kind of refusal. */
struct ratelog {
	pthread_mutex_t lock;
	int64_t next_ms;
	unsigned long suppressed;
};

#define RATELOG_INIT { PTHREAD_MUTEX_INITIALIZER, 0, 0 }

/* True when this event may be logged; *suppressed: how many were not since
 * the last one that was. */
static bool ratelog_ok(struct ratelog *rl, unsigned long *suppressed)
{
	int64_t now = now_ms();
	bool ok = false;

	pthread_mutex_lock(&rl->lock);
	if (now >= rl->next_ms) {
		ok = true;
		*suppressed = rl->suppressed;
		rl->suppressed = 0;
		rl->next_ms = now + LIMIT_LOG_MS;
	} else {
		rl->suppressed++;
	}
	pthread_mutex_unlock(&rl->lock);
	return ok;
}

#define limit_warn(rl, fmt, ...) do {						\
		unsigned long sup_;						\
		if (ratelog_ok(rl, &sup_))					\
			log_warn(fmt " (%lu more like this not logged)",	\
				 ##__VA_ARGS__, sup_);				\
	} while (0)

struct server {
	struct smcrd_config cfg;
	pthread_mutex_t lock;		/* table, counters */
	pthread_cond_t cond;
	struct export_table *table;
	struct engine *engine;
	unsigned clients;		/* handshaking + connected */
	unsigned handshakes;		/* threads running */
	unsigned refusing;
	/* Limits reached (smcrctl status smcrd). */
	uint64_t refused_max_clients, refused_handshakes, handshake_timeouts, accept_paused;
	uint64_t refused_per_address, refused_hs_per_address;
	/* Clients per peer address (max-clients-per-address). */
	struct addr_count *addrs;
	unsigned naddrs, caddrs;
	bool stopping;
	int cancel_fd;			/* pipe read end: readable when stopping */
	int cancel_wr;
	int lfd[LISTEN_MAX];
	unsigned nlfd;
	char *unix_made;		/* the Unix socket smcrd created, or NULL */
	ino_t unix_ino;
	struct smcr_ctx *smcr;		/* SMC-R: the stack, NULL if off */
	struct smcr_sock *smcr_ls;	/* its listener */
	struct smcr_ctl *ctl;		/* control socket (smcrctl), or NULL */
	gid_t ctl_gid;			/* --ctl-group, or (gid_t)-1 */
	char cwd[PATH_MAX];
	int tls_mode;			/* NBD_TLS_*, from cfg.tls */
	struct bd_tls *tls;		/* TLS credentials on NBD/TCP */
};

struct addr_count {
	char addr[INET6_ADDRSTRLEN];
	unsigned n;			/* clients */
	unsigned hs;			/* of them in the handshake (<= n) */
};

struct hs_ctx {
	char addr[INET6_ADDRSTRLEN];	/* the peer's address, counted if set */
	bool hs_counted;		/* in its address's handshakes */
	int64_t accepted;		/* now_ms() at accept */
	struct server *srv;
	struct bd_transport *t;
	int smcr_fd;			/* SMC-R: TCP socket before CLC, else -1 */
	struct sockaddr_storage peer;
	char refusal[96];
};

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

	return h->smcr_fd >= 0 || strcmp(h->t->ops->name, "tcp") ? NBD_TLS_OFF
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

/* The peer's address without the port, the key of max-clients-per-address
 * (every Unix-socket client is "local"). */
static void addr_key(const struct sockaddr_storage *ss, char *out, size_t len)
{
	const void *a;

	if (ss->ss_family == AF_UNIX) {
		snprintf(out, len, "local");
		return;
	}
	a = ss->ss_family == AF_INET6 ?
			(const void *)&((const struct sockaddr_in6 *)ss)->sin6_addr :
			(const void *)&((const struct sockaddr_in *)ss)->sin_addr;

	if (!inet_ntop(ss->ss_family, a, out, (socklen_t)len))
		snprintf(out, len, "?");
}

static struct addr_count *addr_find(struct server *s, const char *addr)
{
	unsigned i;

	for (i = 0; i < s->naddrs; i++)
		if (!strcmp(s->addrs[i].addr, addr))
			return &s->addrs[i];
	return NULL;
}

/* Request memory one address may hold: never the whole pool (0: no
 * limit). */
static uint64_t mem_per_address(const struct server *s)
{
	if (s->cfg.max_mem_per_address == UINT64_MAX)
		return s->cfg.max_memory / 2;
	if (s->cfg.max_mem_per_address >= s->cfg.max_memory)
		return 0;
	return s->cfg.max_mem_per_address;
}

/* Handshakes one address may hold at once: never the whole pool. */
static unsigned hs_per_address(const struct server *s)
{
	if (s->cfg.max_hs_per_address >= 0)
		return (unsigned)s->cfg.max_hs_per_address;
	return s->cfg.max_handshakes > 1 ? s->cfg.max_handshakes / 2 : 1;
}

/* One more client from addr, in the handshake (s->lock held): -EBUSY at
 * the limit. */
static int addr_get(struct server *s, const char *addr)
{
	struct addr_count *v, *a = addr_find(s, addr);

	if (a) {
		if (s->cfg.max_per_address && a->n >= s->cfg.max_per_address)
			return -EBUSY;
		a->n++;
		a->hs++;
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
	return 0;
}

/* addr's client left the handshake (s->lock held). */
static void addr_hs_done(struct server *s, const char *addr)
{
	struct addr_count *a = addr_find(s, addr);

	if (a && a->hs)
		a->hs--;
}

static void addr_put(struct server *s, const char *addr)
{
	unsigned i;

	for (i = 0; i < s->naddrs; i++)
		if (!strcmp(s->addrs[i].addr, addr)) {
			if (!--s->addrs[i].n)
				s->addrs[i] = s->addrs[--s->naddrs];
			return;
		}
}

static void client_gone(void *arg, void *owner)
{
	struct server *s = arg;

	pthread_mutex_lock(&s->lock);
	s->clients--;
	if (owner)
		addr_put(s, owner);
	pthread_mutex_unlock(&s->lock);
	free(owner);
}

static struct ratelog rl_accept = RATELOG_INIT, rl_max_clients = RATELOG_INIT,
		      rl_handshakes = RATELOG_INIT, rl_hs_timeout = RATELOG_INIT,
		      rl_per_address = RATELOG_INIT, rl_hs_per_address = RATELOG_INIT;

static void *handshake_main(void *arg)
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
	if (h->hs_counted) {
		pthread_mutex_lock(&s->lock);
		addr_hs_done(s, h->addr);
		h->hs_counted = false;
		pthread_mutex_unlock(&s->lock);
	}
	if (r == 0) {
		/* The engine owns the transport and the export reference now,
		 * and reports the end through client_gone(). */
		char *owner = h->addr[0] ? strdup(h->addr) : NULL;

		if (engine_add(s->engine, h->t, sess.handle, &sess, owner) == 0)
			counted = false;
		else
			free(owner);
		if (!counted && h->addr[0] && !owner) {
			/* No memory for the key: uncounted from now on. */
			pthread_mutex_lock(&s->lock);
			addr_put(s, h->addr);
			pthread_mutex_unlock(&s->lock);
		}
		h->t = NULL;
	} else if (!h->t) {
		/* The SMC-R rendezvous failed: logged above. */
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
			addr_put(s, h->addr);
	}
	if (h->refusal[0])
		s->refusing--;
	s->handshakes--;
	pthread_cond_broadcast(&s->cond);
	pthread_mutex_unlock(&s->lock);
	free(h);
	return NULL;
}

/* Accepts on lfd; smcr: the SMC-R listener (CLC runs in the handshake
 * thread, which then wraps the socket in an SMC-R transport). */
static void hs_free(struct hs_ctx *h)
{
	if (h->smcr_fd >= 0)
		close(h->smcr_fd);
	bd_close(h->t);
	free(h);
}


/* Returns -EMFILE when out of descriptors (the caller pauses), else 0. */
static int accept_one(struct server *s, int lfd, bool smcr)
{
	struct sockaddr_storage ss;
	socklen_t len = sizeof(ss);
	struct hs_ctx *h;
	pthread_attr_t attr;
	pthread_t th;
	bool refuse = false;
	char peer[64], addr[INET6_ADDRSTRLEN];
	struct addr_count *a;
	int fd, r;

	fd = accept4(lfd, (struct sockaddr *)&ss, &len, SOCK_CLOEXEC);
	if (fd < 0) {
		r = errno;
		if (r == EAGAIN || r == EINTR || r == ECONNABORTED)
			return 0;
		pthread_mutex_lock(&s->lock);
		s->accept_paused++;
		pthread_mutex_unlock(&s->lock);
		limit_warn(&rl_accept, "accept: %s: not accepting for %d ms", strerror(r),
			   ACCEPT_PAUSE_MS);
		return r == EMFILE || r == ENFILE || r == ENOBUFS || r == ENOMEM ?
		       -EMFILE : 0;
	}
	h = calloc(1, sizeof(*h));
	if (!h) {
		close(fd);
		return 0;
	}
	h->srv = s;
	h->peer = ss;
	h->smcr_fd = -1;
	h->accepted = now_ms();
	if (smcr) {
		h->smcr_fd = fd;
	} else {
		r = bd_tcp_transport_new(fd, &h->t);
		if (r < 0) {
			close(fd);
			free(h);
			return 0;
		}
	}
	bd_format_addr((struct sockaddr *)&ss, len, peer, sizeof(peer));
	addr_key(&ss, addr, sizeof(addr));
	pthread_mutex_lock(&s->lock);
	/* Per address first: one address never takes a whole global pool. */
	a = addr_find(s, addr);
	if (a && s->cfg.max_per_address && a->n >= s->cfg.max_per_address)
		goto refuse_per_address;
	if (a && hs_per_address(s) && a->hs >= hs_per_address(s)) {
		s->refused_hs_per_address++;
		pthread_mutex_unlock(&s->lock);
		limit_warn(&rl_hs_per_address, "client %s: %u clients from %s in the handshake "
			   "(max-handshakes-per-address): closing", peer, hs_per_address(s), addr);
		hs_free(h);
		return 0;
	}
	if (s->handshakes >= s->cfg.max_handshakes) {
		/* Half-open (CLC or NBD options): no thread, no reply. */
		s->refused_handshakes++;
		pthread_mutex_unlock(&s->lock);
		limit_warn(&rl_handshakes, "client %s: %u clients in the handshake "
			   "(max-handshakes): closing", peer, s->cfg.max_handshakes);
		hs_free(h);
		return 0;
	}
	if (s->clients >= s->cfg.max_clients) {
		s->refused_max_clients++;
		if (s->refusing >= MAX_REFUSING) {
			pthread_mutex_unlock(&s->lock);
			limit_warn(&rl_max_clients,
				   "client %s: too many clients (max-clients %u): closing",
				   peer, s->cfg.max_clients);
			/* An SMC-R socket is still h->smcr_fd (no transport yet). */
			hs_free(h);
			return 0;
		}
		refuse = true;
		s->refusing++;
		snprintf(h->refusal, sizeof(h->refusal),
			 "server has too many clients (max-clients %u)", s->cfg.max_clients);
	} else {
		r = addr_get(s, addr);
		if (r == -EBUSY)
			goto refuse_per_address;
		if (r == 0) {
			memcpy(h->addr, addr, sizeof(addr));
			h->hs_counted = true;
		}
		s->clients++;
	}
	s->handshakes++;
	pthread_mutex_unlock(&s->lock);
	if (refuse)
		limit_warn(&rl_max_clients,
			   "client %s: too many clients (max-clients %u): refusing",
			   peer, s->cfg.max_clients);
	else
		log_dbg("client %s: connected", peer);

	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	pthread_attr_setstacksize(&attr, 256 << 10);
	r = pthread_create(&th, &attr, handshake_main, h);
	pthread_attr_destroy(&attr);
	if (r) {
		log_err("client %s: cannot start a thread: %s", peer, strerror(r));
		pthread_mutex_lock(&s->lock);
		if (!refuse) {
			s->clients--;
			if (h->addr[0]) {
				addr_hs_done(s, h->addr);
				addr_put(s, h->addr);
			}
		} else {
			s->refusing--;
		}
		s->handshakes--;
		pthread_mutex_unlock(&s->lock);
		hs_free(h);
	}
	return 0;

refuse_per_address:	/* under s->lock */
	s->refused_per_address++;
	pthread_mutex_unlock(&s->lock);
	limit_warn(&rl_per_address, "client %s: %u clients from %s "
		   "(max-clients-per-address): closing", peer, s->cfg.max_per_address, addr);
	hs_free(h);
	return 0;
}

/* --- listening ------------------------------------------------------------ */

static int listen_on(struct server *s, const char *host, const char *port)
{
	struct addrinfo hints = {
		.ai_family = AF_UNSPEC,
		.ai_socktype = SOCK_STREAM,
		.ai_flags = AI_PASSIVE,
	};
	struct addrinfo *res, *ai;
	unsigned first;
	int r, one = 1;

	r = getaddrinfo(host, port, &hints, &res);
	if (r) {
		log_err("listen %s port %s: %s", host ? host : "*", port, gai_strerror(r));
		return -EINVAL;
	}
	/* Every address or none: a client of one address family must never
	 * find smcrd "ready" but not listening (e.g. 0.0.0.0 taken, [::] free).
	 * Only a wildcard IPv6 address that this host does not have is left
	 * out. */
	first = s->nlfd;
	for (ai = res; ai && s->nlfd < LISTEN_MAX; ai = ai->ai_next) {
		char addr[80];
		int fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK,
				ai->ai_protocol);
		bool optional = !host && ai->ai_family == AF_INET6;

		bd_format_addr(ai->ai_addr, ai->ai_addrlen, addr, sizeof(addr));
		if (fd < 0) {
			r = -errno;
			if (optional && r == -EAFNOSUPPORT)
				continue;
			log_err("listen on %s: %s", addr, strerror(-r));
			goto close_fds;
		}
		setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
		if (ai->ai_family == AF_INET6)
			setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof(one));
		if (bind(fd, ai->ai_addr, ai->ai_addrlen) < 0 || listen(fd, 128) < 0) {
			r = -errno;
			close(fd);
			if (optional && r == -EADDRNOTAVAIL) {
				log_info("no IPv6 here: not listening on %s", addr);
				continue;
			}
			log_err("listen on %s: %s", addr, strerror(-r));
			goto close_fds;
		}
		log_info("listening for NBD over TCP on %s", addr);
		s->lfd[s->nlfd++] = fd;
	}
	freeaddrinfo(res);
	return s->nlfd > first ? 0 : -EADDRNOTAVAIL;

close_fds:
	while (s->nlfd > first)
		close(s->lfd[--s->nlfd]);
	freeaddrinfo(res);
	return r;
}

/* Listens on the Unix socket path (mode 0666 less the umask).  A stale
 * socket there is replaced; a live one (it accepts) or anything else is an
 * error. */
static int listen_unix(struct server *s, const char *path)
{
	struct sockaddr_un sun = { .sun_family = AF_UNIX };
	struct stat st;
	int fd, r;

	if (s->nlfd >= LISTEN_MAX)
		return -EMFILE;
	if (strlen(path) >= sizeof(sun.sun_path)) {
		log_err("unix socket %s: path longer than %zu bytes", path,
			sizeof(sun.sun_path) - 1);
		return -ENAMETOOLONG;
	}
	memcpy(sun.sun_path, path, strlen(path) + 1);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0) {
		r = -errno;
		log_err("unix socket %s: %s", path, strerror(-r));
		return r;
	}
	if (lstat(path, &st) == 0) {
		int probe;

		if (!S_ISSOCK(st.st_mode)) {
			log_err("unix socket %s: exists and is not a socket", path);
			r = -EEXIST;
			goto out_close;
		}
		probe = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
		r = probe >= 0 && connect(probe, (struct sockaddr *)&sun, sizeof(sun)) == 0;
		if (probe >= 0)
			close(probe);
		if (r) {
			log_err("unix socket %s: in use by another server", path);
			r = -EADDRINUSE;
			goto out_close;
		}
		unlink(path);	/* stale: nobody accepts on it */
	}
	if (bind(fd, (struct sockaddr *)&sun, sizeof(sun)) < 0 || listen(fd, SOMAXCONN) < 0 ||
	    stat(path, &st) < 0) {
		r = -errno;
		log_err("unix socket %s: %s", path, strerror(-r));
		goto out_close;
	}
	s->unix_made = strdup(path);
	s->unix_ino = st.st_ino;
	log_info("listening for NBD on Unix socket %s", path);
	s->lfd[s->nlfd++] = fd;
	return 0;
out_close:
	close(fd);
	return r;
}

/* Removes the Unix socket smcrd made, if it is still that one. */
static void unix_remove(struct server *s)
{
	struct stat st;

	if (!s->unix_made)
		return;
	if (lstat(s->unix_made, &st) == 0 && S_ISSOCK(st.st_mode) && st.st_ino == s->unix_ino)
		unlink(s->unix_made);
	free(s->unix_made);
	s->unix_made = NULL;
}

/* Listeners from systemd (socket activation) instead of -l/-p: 1 when
 * there were some, 0 when none, -1 on error (logged). */
static int listen_activated(struct server *s)
{
	char err[128];
	int i, n = sysd_listen_fds(s->lfd, LISTEN_MAX, err, sizeof(err));

	if (n < 0) {
		log_err("socket activation: %s", err);
		return -1;
	}
	for (i = 0; i < n; i++) {
		struct sockaddr_storage ss;
		socklen_t len = sizeof(ss);
		char addr[80] = "?";

		if (getsockname(s->lfd[i], (struct sockaddr *)&ss, &len) == 0) {
			if (ss.ss_family == AF_UNIX) {
				const struct sockaddr_un *un = (const struct sockaddr_un *)&ss;

				log_info("listening for NBD on Unix socket %.*s (socket activation)",
					 (int)(len - offsetof(struct sockaddr_un, sun_path)),
					 un->sun_path[0] ? un->sun_path : "(abstract)");
				continue;
			}
			bd_format_addr((struct sockaddr *)&ss, len, addr, sizeof(addr));
		}
		log_info("listening for NBD over TCP on %s (socket activation)", addr);
	}
	s->nlfd = (unsigned)n;
	if (n && (s->cfg.listen || strcmp(s->cfg.port, "10809")))
		log_info("socket activation: the listen address and port are systemd's");
	return n > 0;
}

/* --- configuration ------------------------------------------------------ */

static char *abs_path(const char *cwd, const char *p)
{
	char *r;

	if (p[0] == '/')
		return strdup(p);
	if (asprintf(&r, "%s/%s", cwd, p) < 0)
		return NULL;
	return r;
}

/* Relative export paths are relative to the directory smcrd started in. */
static int absolutize(struct server *s, struct export_list *l)
{
	unsigned i;

	for (i = 0; i < l->n; i++) {
		/* rbd:POOL/IMAGE is no path; its ceph-conf is. */
		char **f = rbd_path(l->v[i].path) ? &l->v[i].ceph_conf : &l->v[i].path;
		char *p;

		if (!*f)
			continue;
		p = abs_path(s->cwd, *f);
		if (!p)
			return -ENOMEM;
		free(*f);
		*f = p;
	}
	return 0;
}

static int build_table(struct server *s, bool apply_globals, struct export_table **out)
{
	struct export_list file = { NULL, 0 };
	char err[512] = "";
	int r;

	if (s->cfg.config_file) {
		r = config_load_file(s->cfg.config_file, &s->cfg, apply_globals, &file, err,
				     sizeof(err));
		if (r < 0) {
			log_err("%s", err);
			goto out_free;
		}
		r = absolutize(s, &file);
		if (r < 0)
			goto out_free;
	}
	r = export_table_open(&s->cfg.cli_exports, &file, s->cfg.direct, out, err,
			      sizeof(err));
	if (r < 0)
		log_err("%s", err);
out_free:
	export_list_free(&file);
	return r;
}

/* After fork: librados's threads stayed with the parent, so RBD images
 * are opened again.  The parent's handles are dropped, not closed (closing
 * would wait for those threads); the files it opened are left open. */
static int reopen_rbd(struct server *s)
{
	struct export_table *t;
	unsigned i;

	for (i = 0; i < s->table->n && !s->table->v[i]->rbd; i++)
		;
	if (i == s->table->n)
		return 0;
	if (build_table(s, false, &t) < 0)
		return -EIO;
	s->table = t;
	return 0;
}

static void log_table(const struct export_table *t, const char *config)
{
	unsigned i;

	for (i = 0; i < t->n; i++) {
		const struct export *e = t->v[i];

		log_info("export '%s': %s, %llu bytes%s%s%s", e->spec.name, e->spec.path,
			 (unsigned long long)e->size, e->spec.read_only ? ", read-only" : "",
			 e->dfd >= 0 ? ", O_DIRECT" : "",
			 e->spec.nallow ? ", address-restricted" : "");
	}
	if (!t->n)
		log_warn("no exports configured: add an [export NAME] section to %s and "
			 "reload (SIGHUP)", config ? config : "a config file (--config)");
}

static void reload(struct server *s)
{
	struct export_table *t, *old;

	if (!s->cfg.config_file) {
		log_info("SIGHUP: no config file: nothing to reload");
		return;
	}
	log_info("SIGHUP: reloading exports from %s", s->cfg.config_file);
	if (build_table(s, false, &t) < 0) {
		log_err("reload failed: keeping the current exports");
		return;
	}
	pthread_mutex_lock(&s->lock);
	old = s->table;
	s->table = t;
	pthread_mutex_unlock(&s->lock);
	/* Connected clients keep their own references. */
	export_table_free(old);
	log_table(t, s->cfg.config_file);
}

/* --- daemon ----------------------------------------------------------------- */

/* Not through a symbolic link (a local user could point it at a file of
 * root's), and only a regular file; mode 0644. */
static int write_pidfile(const char *path)
{
	struct stat st;
	char buf[32];
	int fd, n, r;

	/* O_NONBLOCK: a FIFO without a reader fails (ENXIO), never blocks. */
	fd = open(path, O_WRONLY | O_CREAT | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC,
		  0644);
	if (fd < 0) {
		r = -errno;
		log_err("pid file %s: %s", path, r == -ELOOP ? "is a symbolic link" :
			r == -ENXIO ? "not a regular file" : strerror(-r));
		return r;
	}
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
		log_err("pid file %s: not a regular file", path);
		r = -EINVAL;
		goto out_close;
	}
	if (st.st_nlink > 1) {
		/* A hard link to another file (of root's, say) is no pid file. */
		log_err("pid file %s: has %lu hard links (another file's name)", path,
			(unsigned long)st.st_nlink);
		r = -EMLINK;
		goto out_close;
	}
	n = snprintf(buf, sizeof(buf), "%ld\n", (long)getpid());
	if (ftruncate(fd, 0) < 0 || write(fd, buf, (size_t)n) != n) {
		r = -EIO;
		log_err("pid file %s: %s", path, strerror(-r));
		goto out_close;
	}
	r = 0;
out_close:
	if (close(fd) < 0 && !r)
		r = -EIO;
	return r;
}

/* Forks; the parent waits until the child reports readiness and exits
 * with its status.  Returns the pipe to report on (child). */
static int daemonize(void)
{
	int p[2];
	pid_t pid;
	char st = 1;

	if (pipe2(p, O_CLOEXEC) < 0)
		return -errno;
	pid = fork();
	if (pid < 0)
		return -errno;
	if (pid > 0) {
		close(p[1]);
		if (read(p[0], &st, 1) != 1)
			st = 1;
		_exit(st);
	}
	close(p[0]);
	if (setsid() < 0)
		return -errno;
	return p[1];
}

static void log_to_syslog(void *opaque, enum smcr_log_level level, const char *msg)
{
	static const int prio[] = { LOG_ERR, LOG_WARNING, LOG_INFO, LOG_DEBUG };

	syslog(prio[level], "%s", msg);
}

static void detach_stdio(const char *log_file)
{
	int fd = open("/dev/null", O_RDWR | O_CLOEXEC);

	if (fd >= 0) {
		dup2(fd, STDIN_FILENO);
		dup2(fd, STDOUT_FILENO);
		if (!log_file)
			dup2(fd, STDERR_FILENO);
		if (fd > STDERR_FILENO)
			close(fd);
	}
}

/* --- command line ------------------------------------------------------- */

static void usage(FILE *f)
{
	fprintf(f,
"Usage: smcrd [OPTION]... [--export NAME=PATH[,ro][,allow=PREFIX]...]...\n"
"Exports files and block devices over NBD, on TCP and SMC-R.\n"
"\n"
"  -e, --export SPEC        export NAME=PATH with options, comma-separated:\n"
"                             ro, allow=PREFIX (repeatable, e.g. 10.0.0.0/8),\n"
"                             blocksize=N, direct, desc=TEXT\n"
"  -c, --config FILE        read settings and exports from FILE (SIGHUP\n"
"                             re-reads its exports)\n"
"  -l, --listen ADDR        listen on ADDR (default: all addresses)\n"
"  -p, --port PORT          NBD over TCP port (default 10809)\n"
"  -U, --unix PATH          NBD on a Unix socket at PATH (then no TCP unless\n"
"                             --listen or --port is given)\n"
"      --smcr-port PORT     also serve NBD over SMC-R on PORT (CLC rendezvous;\n"
"                             TCP fallback when SMC-R is not possible)\n"
"  -q, --queue-depth N      requests in flight per connection (default 128)\n"
"  -t, --threads N          I/O worker threads (default: online CPUs)\n"
"  -m, --max-clients N      simultaneous clients (default 128)\n"
"      --max-clients-per-address N  of them from one address (default 64;\n"
"                             0: no limit)\n"
"      --max-link-groups-per-address N  SMC-R link groups for one address;\n"
"                             a first contact beyond it gets TCP (default 16;\n"
"                             0: no limit)\n"
"      --max-handshakes N   clients in the handshake (CLC, NBD options) at once;\n"
"                             more are closed at once (default 32)\n"
"      --max-handshakes-per-address N  of them from one address (default:\n"
"                             half of max-handshakes; 0: no limit)\n"
"      --handshake-timeout S  whole handshake, however the client trickles\n"
"                             (default 60)\n"
"      --request-timeout S  a request's payload that stops coming, or replies\n"
"                             not read, for S seconds close the client\n"
"                             (default 30)\n"
"      --max-rmb-memory SIZE  SMC-R receive buffers per link group, and as\n"
"                             much for send buffers (default 256M)\n"
"  -M, --max-memory SIZE    request buffer memory (default 1G)\n"
"      --max-memory-per-address SIZE  of it, what the clients of one address\n"
"                             may hold (default: half of max-memory; 0: no\n"
"                             limit)\n"
"  -d, --direct             O_DIRECT on every export\n"
"      --no-fixed-buffers   plain request buffers, not registered with io_uring\n"
"      --syn-option MODE    the SMC TCP option on SMC-R port SYN-ACKs: auto\n"
"                             (default), bpf (required) or off (CLC always)\n"
"      --eids LIST          user EIDs for SMC-Rv2 (Linux AF_SMC peers over RoCE\n"
"                             v2), comma-separated (default: $SMCR_EIDS; none:\n"
"                             SMC-R v1 only)\n"
"  -f, --foreground         stay in the foreground, log to stderr\n"
"  -P, --pidfile FILE       write the process id to FILE\n"
"  -L, --log-file FILE      append log lines to FILE\n"
"      --tls MODE           TLS on NBD/TCP (NBD_OPT_STARTTLS): off (default),\n"
"                             on (at the client's choice) or require\n"
"      --tls-certificates DIR  server-cert.pem, server-key.pem (and\n"
"                             ca-cert.pem) in DIR (default /etc/pki/smcrd)\n"
"      --tls-psk FILE       pre-shared keys (psktool's username:hexkey) instead\n"
"      --tls-verify-peer on|off  require a client certificate signed by\n"
"                             ca-cert.pem (default: on when DIR has one)\n"
"      --ctl-group GROUP    members of GROUP may inject faults and run commands\n"
"                             on the control socket (smcrctl), as root may\n"
"  -v, --verbose            debug logging\n"
"  -h, --help               this text\n"
"  -V, --version            version\n"
"\n"
"Signals: SIGTERM/SIGINT drain in-flight requests and exit; SIGHUP reloads\n"
"the exports of the config file, connected clients stay.\n""Under systemd: sockets passed with LISTEN_FDS/LISTEN_PID serve NBD/TCP\n"
"instead of --listen/--port; READY=1 goes to NOTIFY_SOCKET when set.\n"
"See smcrd(8).\n");
}

enum { OPT_SMCR_PORT = 256, OPT_NO_FIXED_BUFFERS, OPT_SYN_OPTION, OPT_EIDS, OPT_TLS,
       OPT_TLS_CERTIFICATES, OPT_TLS_PSK, OPT_MAX_HANDSHAKES, OPT_HS_TIMEOUT,
       OPT_MAX_RMB, OPT_REQ_TIMEOUT, OPT_PER_ADDRESS, OPT_CTL_GROUP,
       OPT_LGRS_PER_ADDRESS, OPT_TLS_VERIFY, OPT_HS_PER_ADDRESS,
       OPT_MEM_PER_ADDRESS };

static const struct option long_opts[] = {
	{ "export", required_argument, NULL, 'e' },
	{ "config", required_argument, NULL, 'c' },
	{ "listen", required_argument, NULL, 'l' },
	{ "port", required_argument, NULL, 'p' },
	{ "unix", required_argument, NULL, 'U' },
	{ "smcr-port", required_argument, NULL, OPT_SMCR_PORT },
	{ "queue-depth", required_argument, NULL, 'q' },
	{ "threads", required_argument, NULL, 't' },
	{ "max-clients", required_argument, NULL, 'm' },
	{ "max-memory", required_argument, NULL, 'M' },
	{ "max-memory-per-address", required_argument, NULL, OPT_MEM_PER_ADDRESS },
	{ "direct", no_argument, NULL, 'd' },
	{ "no-fixed-buffers", no_argument, NULL, OPT_NO_FIXED_BUFFERS },
	{ "max-handshakes", required_argument, NULL, OPT_MAX_HANDSHAKES },
	{ "handshake-timeout", required_argument, NULL, OPT_HS_TIMEOUT },
	{ "max-rmb-memory", required_argument, NULL, OPT_MAX_RMB },
	{ "request-timeout", required_argument, NULL, OPT_REQ_TIMEOUT },
	{ "max-clients-per-address", required_argument, NULL, OPT_PER_ADDRESS },
	{ "max-link-groups-per-address", required_argument, NULL, OPT_LGRS_PER_ADDRESS },
	{ "max-handshakes-per-address", required_argument, NULL, OPT_HS_PER_ADDRESS },
	{ "syn-option", required_argument, NULL, OPT_SYN_OPTION },
	{ "eids", required_argument, NULL, OPT_EIDS },
	{ "tls", required_argument, NULL, OPT_TLS },
	{ "tls-certificates", required_argument, NULL, OPT_TLS_CERTIFICATES },
	{ "tls-psk", required_argument, NULL, OPT_TLS_PSK },
	{ "tls-verify-peer", required_argument, NULL, OPT_TLS_VERIFY },
	{ "ctl-group", required_argument, NULL, OPT_CTL_GROUP },
	{ "foreground", no_argument, NULL, 'f' },
	{ "pidfile", required_argument, NULL, 'P' },
	{ "log-file", required_argument, NULL, 'L' },
	{ "verbose", no_argument, NULL, 'v' },
	{ "help", no_argument, NULL, 'h' },
	{ "version", no_argument, NULL, 'V' },
	{ NULL, 0, NULL, 0 },
};

static int set_arg(char **dst, const char *v)
{
	free(*dst);
	*dst = strdup(v);
	return *dst ? 0 : -ENOMEM;
}

static const char *long_name(int c)
{
	const struct option *o;

	for (o = long_opts; o->name; o++)
		if (o->val == c)
			return o->name;
	return "?";
}

/* 0, 1 (--help or --version done) or -EINVAL (one line printed). */
static int parse_args(struct server *s, int argc, char **argv)
{
	struct smcrd_config *cfg = &s->cfg;
	char err[256];
	int c;

	while ((c = getopt_long(argc, argv, "e:c:l:p:U:q:t:m:M:dfP:L:vhV", long_opts, NULL)) != -1) {
		struct export_spec spec;
		unsigned v;
		uint64_t sz;

		switch (c) {
		case 'e':
			if (config_parse_export_arg(optarg, &spec, err, sizeof(err)) < 0) {
				fprintf(stderr, "smcrd: --export %s: %s\n", optarg, err);
				return -EINVAL;
			}
			if (export_list_add(&cfg->cli_exports, &spec) < 0) {
				fprintf(stderr, "smcrd: export '%s' given twice\n", spec.name);
				export_spec_free(&spec);
				return -EINVAL;
			}
			break;
		case 'c':
			free(cfg->config_file);
			cfg->config_file = abs_path(s->cwd, optarg);
			break;
		case 'l':
			set_arg(&cfg->listen, optarg);
			cfg->set_mask |= CFG_SET_LISTEN;
			break;
		case 'p':
			if (parse_uint(optarg, 1, 65535, &v) < 0)
				goto bad;
			set_arg(&cfg->port, optarg);
			cfg->set_mask |= CFG_SET_PORT;
			break;
		case OPT_SMCR_PORT:
			if (parse_uint(optarg, 1, 65535, &v) < 0) {
				fprintf(stderr, "smcrd: bad value '%s' for --smcr-port\n", optarg);
				return -EINVAL;
			}
			set_arg(&cfg->smcr_port, optarg);
			cfg->set_mask |= CFG_SET_SMCR_PORT;
			break;
		case 'q':
			if (parse_uint(optarg, 1, 4096, &cfg->queue_depth) < 0)
				goto bad;
			cfg->set_mask |= CFG_SET_QUEUE_DEPTH;
			break;
		case 't':
			if (parse_uint(optarg, 1, 256, &cfg->threads) < 0)
				goto bad;
			cfg->set_mask |= CFG_SET_THREADS;
			break;
		case 'm':
			if (parse_uint(optarg, 1, 65536, &cfg->max_clients) < 0)
				goto bad;
			cfg->set_mask |= CFG_SET_MAX_CLIENTS;
			break;
		case OPT_MAX_HANDSHAKES:
			if (parse_uint(optarg, 1, 65536, &cfg->max_handshakes) < 0)
				goto bad;
			cfg->set_mask |= CFG_SET_MAX_HANDSHAKES;
			break;
		case OPT_MAX_RMB:
			if (parse_size(optarg, &sz) < 0 || sz < (1u << 20) ||
			    sz > (UINT64_C(1) << 32) - 1)
				goto bad;
			cfg->max_rmb_memory = sz;
			cfg->set_mask |= CFG_SET_MAX_RMB;
			break;
		case OPT_PER_ADDRESS:
			if (parse_uint(optarg, 0, 65536, &cfg->max_per_address) < 0)
				goto bad;
			cfg->set_mask |= CFG_SET_PER_ADDRESS;
			break;
		case OPT_HS_PER_ADDRESS: {
			unsigned n;

			if (parse_uint(optarg, 0, 65536, &n) < 0)
				goto bad;
			cfg->max_hs_per_address = (int)n;
			cfg->set_mask |= CFG_SET_HS_PER_ADDRESS;
			break;
		}
		case OPT_LGRS_PER_ADDRESS:
			if (parse_uint(optarg, 0, 65536, &cfg->max_lgrs_per_address) < 0)
				goto bad;
			cfg->set_mask |= CFG_SET_LGRS_PER_ADDRESS;
			break;
		case OPT_REQ_TIMEOUT:
			if (parse_uint(optarg, 1, 3600, &cfg->request_timeout) < 0)
				goto bad;
			cfg->set_mask |= CFG_SET_REQ_TIMEOUT;
			break;
		case OPT_HS_TIMEOUT:
			if (parse_uint(optarg, 1, 3600, &cfg->handshake_timeout) < 0)
				goto bad;
			cfg->set_mask |= CFG_SET_HS_TIMEOUT;
			break;
		case 'M':
			if (parse_size(optarg, &sz) < 0 || sz < (64u << 20))
				goto bad;
			cfg->max_memory = sz;
			cfg->set_mask |= CFG_SET_MAX_MEMORY;
			break;
		case OPT_MEM_PER_ADDRESS:
			if (parse_size(optarg, &sz) < 0 || sz == UINT64_MAX)
				goto bad;
			cfg->max_mem_per_address = sz;
			cfg->set_mask |= CFG_SET_MEM_PER_ADDRESS;
			break;
		case 'd':
			cfg->direct = true;
			cfg->set_mask |= CFG_SET_DIRECT;
			break;
		case OPT_NO_FIXED_BUFFERS:
			cfg->fixed_buffers = false;
			cfg->set_mask |= CFG_SET_FIXED_BUFFERS;
			break;
		case OPT_EIDS:
			free(cfg->eids);
			cfg->eids = strdup(optarg);
			cfg->set_mask |= CFG_SET_EIDS;
			break;
		case OPT_SYN_OPTION: {
			enum smcr_syn_option m;

			if (smcr_syn_option_parse(optarg, &m) < 0) {
				fprintf(stderr, "smcrd: --syn-option %s: not auto, bpf or off\n",
					optarg);
				return -EINVAL;
			}
			cfg->syn_option = (int)m;
			cfg->set_mask |= CFG_SET_SYN_OPTION;
			break;
		}
		case OPT_TLS:
			cfg->tls = config_parse_tls(optarg);
			if (cfg->tls < 0) {
				fprintf(stderr, "smcrd: --tls %s: not off, on or require\n", optarg);
				return -EINVAL;
			}
			cfg->set_mask |= CFG_SET_TLS;
			break;
		case OPT_TLS_CERTIFICATES:
			free(cfg->tls_certificates);
			cfg->tls_certificates = abs_path(s->cwd, optarg);
			cfg->set_mask |= CFG_SET_TLS_CERTS;
			break;
		case OPT_TLS_PSK:
			free(cfg->tls_psk);
			cfg->tls_psk = abs_path(s->cwd, optarg);
			cfg->set_mask |= CFG_SET_TLS_PSK;
			break;
		case OPT_TLS_VERIFY:
			cfg->tls_verify_peer = config_parse_verify(optarg);
			if (cfg->tls_verify_peer < 0) {
				fprintf(stderr, "smcrd: --tls-verify-peer %s: not on or off\n",
					optarg);
				return -EINVAL;
			}
			cfg->set_mask |= CFG_SET_TLS_VERIFY;
			break;
		case OPT_CTL_GROUP:
			free(cfg->ctl_group);
			cfg->ctl_group = strdup(optarg);
			cfg->set_mask |= CFG_SET_CTL_GROUP;
			break;
		case 'f':
			cfg->foreground = true;
			break;
		case 'U':
			free(cfg->unix_path);
			cfg->unix_path = abs_path(s->cwd, optarg);
			cfg->set_mask |= CFG_SET_UNIX;
			break;
		case 'P':
			free(cfg->pidfile);
			cfg->pidfile = abs_path(s->cwd, optarg);
			cfg->set_mask |= CFG_SET_PIDFILE;
			break;
		case 'L':
			free(cfg->log_file);
			cfg->log_file = abs_path(s->cwd, optarg);
			cfg->set_mask |= CFG_SET_LOG_FILE;
			break;
		case 'v':
			cfg->verbose = true;
			break;
		case 'h':
			usage(stdout);
			return 1;
		case 'V':
			printf("smcrd (%s) %s\n", PACKAGE_NAME, PACKAGE_VERSION);
			return 1;
		default:
			return -EINVAL;	/* getopt named the problem */
		}
		continue;
bad:
		fprintf(stderr, "smcrd: bad value '%s' for --%s\n", optarg, long_name(c));
		return -EINVAL;
	}
	if (optind < argc) {
		fprintf(stderr, "smcrd: unexpected argument '%s'\n", argv[optind]);
		return -EINVAL;
	}
	if (!cfg->config_file && !cfg->cli_exports.n) {
		fprintf(stderr, "smcrd: nothing to export (use --export or --config)\n");
		return -EINVAL;
	}
	return 0;
}

/* --- main ----------------------------------------------------------------- */

static void serve(struct server *s, int sfd)
{
	struct pollfd pfd[LISTEN_MAX + 2];
	bool paused = false;
	unsigned i;

	for (i = 0; i < s->nlfd; i++) {
		pfd[i].fd = s->lfd[i];
		pfd[i].events = POLLIN;
	}
	pfd[s->nlfd].fd = sfd;
	pfd[s->nlfd].events = POLLIN;
	pfd[s->nlfd + 1].fd = s->smcr_ls ? smcr_listen_fd(s->smcr_ls) : -1;
	pfd[s->nlfd + 1].events = POLLIN;
	for (;;) {
		int r;

		/* Out of descriptors: the listeners wait (poll ignores fd -1). */
		for (i = 0; i < s->nlfd; i++)
			pfd[i].fd = paused ? -1 : s->lfd[i];
		pfd[s->nlfd + 1].fd = s->smcr_ls && !paused ? smcr_listen_fd(s->smcr_ls) : -1;
		r = poll(pfd, s->nlfd + 2, paused ? ACCEPT_PAUSE_MS : -1);
		paused = false;

		if (r < 0) {
			if (errno == EINTR)
				continue;
			log_err("poll: %s", strerror(errno));
			return;
		}
		if (pfd[s->nlfd].revents) {
			struct signalfd_siginfo si;

			if (read(sfd, &si, sizeof(si)) == sizeof(si)) {
				if (si.ssi_signo == SIGHUP) {
					reload(s);
				} else {
					log_info("%s: draining and exiting",
						 strsignal((int)si.ssi_signo));
					return;
				}
			}
		}
		for (i = 0; i < s->nlfd; i++)
			if (pfd[i].revents && accept_one(s, s->lfd[i], false) == -EMFILE)
				paused = true;
		if (s->smcr_ls && pfd[s->nlfd + 1].revents &&
		    accept_one(s, smcr_listen_fd(s->smcr_ls), true) == -EMFILE)
			paused = true;
	}
}

/* The SMC-R listener on the configured port, on every address. */
static int smcr_start(struct server *s)
{
	struct smcr_ctx_opts o = { .syn_option = (enum smcr_syn_option)s->cfg.syn_option,
				   .max_rmb_bytes = (size_t)s->cfg.max_rmb_memory,
				   .eids = s->cfg.eids,
				   /* libsmcr's 0 is "from the environment" */
				   .max_lgrs_per_address = s->cfg.max_lgrs_per_address ?
							   s->cfg.max_lgrs_per_address : UINT_MAX };
	struct sockaddr_in sin = { .sin_family = AF_INET };
	char *end;
	unsigned long port = strtoul(s->cfg.smcr_port, &end, 10);
	int r;

	if (*end || port == 0 || port > 65535) {
		log_err("--smcr-port %s: not a port number", s->cfg.smcr_port);
		return -EINVAL;
	}
	r = smcr_ctx_create(&o, &s->smcr);
	if (r < 0) {
		log_err("SMC-R: cannot start the stack: %s", strerror(-r));
		return r;
	}
	sin.sin_port = htons((uint16_t)port);
	if (s->cfg.listen && inet_pton(AF_INET, s->cfg.listen, &sin.sin_addr) != 1) {
		log_err("SMC-R listens on IPv4 addresses only: %s", s->cfg.listen);
		return -EINVAL;
	}
	r = smcr_listen(s->smcr, (struct sockaddr *)&sin, sizeof(sin), 128, &s->smcr_ls);
	if (r < 0) {
		log_err("SMC-R: listen on port %lu: %s", port, strerror(-r));
		return r;
	}
	log_info("listening for NBD over SMC-R on port %lu (TCP fallback when "
		 "SMC-R is not possible; SYN option: %s)", port,
		 smcr_ctx_syn_option(s->smcr) == SMCR_SYN_OPTION_BPF ? "bpf" :
		 "off, CLC always");
	return 0;
}

/* The "smcrd" section of the control socket (smcrctl status): exports,
 * clients, engine counters, as JSON. */
static int ctl_dump_json(struct server *s, const struct engine_stats *st,
			 const struct smcr_stats *sst, unsigned clients, unsigned conns,
			 char *buf, size_t len)
{
	struct json_object *o = json_object_new_object(), *lim, *exps;
	unsigned i;

	if (!o)
		return -ENOMEM;
	lim = json_object_new_object();
	jsonw_u64(lim, "max_handshakes", s->cfg.max_handshakes);
	jsonw_u64(lim, "handshake_timeout", s->cfg.handshake_timeout);
	jsonw_u64(lim, "refused_max_clients", s->refused_max_clients);
	jsonw_u64(lim, "refused_handshakes", s->refused_handshakes);
	jsonw_u64(lim, "handshake_timeouts", s->handshake_timeouts);
	jsonw_u64(lim, "accept_paused", s->accept_paused);
	jsonw_u64(lim, "request_timeout", s->cfg.request_timeout);
	jsonw_u64(lim, "request_timeouts", st->request_timeouts);
	jsonw_u64(lim, "max_clients_per_address", s->cfg.max_per_address);
	jsonw_u64(lim, "refused_per_address", s->refused_per_address);
	jsonw_u64(lim, "max_handshakes_per_address", hs_per_address(s));
	jsonw_u64(lim, "refused_handshakes_per_address", s->refused_hs_per_address);
	jsonw_u64(lim, "max_link_groups_per_address", s->cfg.max_lgrs_per_address);
	jsonw_u64(lim, "max_memory_per_address", mem_per_address(s));
	jsonw_u64(lim, "refused_link_groups_per_address", sst->lgrs_refused_per_address);
	jsonw_add(o, "limits", lim);
	jsonw_u64(o, "clients", clients);
	jsonw_u64(o, "connections", conns);
	jsonw_u64(o, "max_clients", s->cfg.max_clients);
	jsonw_u64(o, "requests", st->requests);
	jsonw_u64(o, "zc_writes", st->zc_writes);
	jsonw_u64(o, "zc_reads", st->zc_reads);
	jsonw_u64(o, "file_reads", st->file_reads);
	jsonw_u64(o, "inline_writes", st->inline_writes);
	exps = json_object_new_array();
	jsonw_add(o, "exports", exps);
	for (i = 0; exps && s->table && i < s->table->n; i++) {
		const struct export *e = s->table->v[i];
		struct json_object *j = json_object_new_object();

		if (!j)
			break;
		jsonw_str(j, "name", e->spec.name);
		jsonw_str(j, "path", e->spec.path);
		jsonw_u64(j, "size", e->size);
		jsonw_bool(j, "read_only", e->spec.read_only);
		json_object_array_add(exps, j);
	}
	return jsonw_dump(o, buf, len);
}

/* The "smcrd" section of the control socket (smcrctl status): exports,
 * clients, engine counters.  Runs on the control thread. */
static int ctl_dump(void *arg, char *buf, size_t len, bool json)
{
	struct server *s = arg;
	struct engine_stats st = { 0 };
	struct smcr_stats sst = { 0 };
	size_t off = 0;
	unsigned i, clients, conns = s->engine ? engine_connections(s->engine) : 0;
	int r;

	if (s->engine)
		engine_get_stats(s->engine, &st);
	if (s->smcr)
		smcr_ctx_stats(s->smcr, &sst);
	pthread_mutex_lock(&s->lock);
	clients = s->clients;
	if (json) {
		r = ctl_dump_json(s, &st, &sst, clients, conns, buf, len);
		pthread_mutex_unlock(&s->lock);
		return r;
	}
	off = strbuf_out(buf, len, off,
			 "limits: max-handshakes %u, handshake-timeout %u s; refused at "
			 "max-clients %llu, at max-handshakes %llu, handshake timeouts %llu, "
			 "accept paused %llu; request-timeout %u s, request timeouts %llu; "
			 "max-clients-per-address %u, refused %llu; "
			 "max-link-groups-per-address %u, refused %llu\n",
			 s->cfg.max_handshakes, s->cfg.handshake_timeout,
			 (unsigned long long)s->refused_max_clients,
			 (unsigned long long)s->refused_handshakes,
			 (unsigned long long)s->handshake_timeouts,
			 (unsigned long long)s->accept_paused, s->cfg.request_timeout,
			 (unsigned long long)st.request_timeouts, s->cfg.max_per_address,
			 (unsigned long long)s->refused_per_address, s->cfg.max_lgrs_per_address,
			 (unsigned long long)sst.lgrs_refused_per_address);
	off = strbuf_out(buf, len, off,
			 "clients %u (in transmission %u, max %u), requests %llu, zero-copy writes %llu, "
			 "zero-copy reads %llu, sendfile reads %llu, inline writes %llu\n",
			 clients, conns, s->cfg.max_clients, (unsigned long long)st.requests,
			 (unsigned long long)st.zc_writes, (unsigned long long)st.zc_reads,
			 (unsigned long long)st.file_reads,
			 (unsigned long long)st.inline_writes);
	for (i = 0; s->table && i < s->table->n; i++) {
		const struct export *e = s->table->v[i];

		off = strbuf_out(buf, len, off, "export %s: %s, %llu bytes%s\n", e->spec.name,
				 e->spec.path, (unsigned long long)e->size,
				 e->spec.read_only ? ", read-only" : "");
	}
	pthread_mutex_unlock(&s->lock);
	return off >= len ? -ENOSPC : (int)off;
}

static void ctl_start(struct server *s)
{
	struct smcr_ctl_section sec = { .name = "smcrd", .dump = ctl_dump, .arg = s };
	int r = smcr_ctl_open(s->smcr, "smcrd", &s->ctl);

	if (r < 0) {
		log_warn("no control socket (smcrctl): %s", strerror(-r));
		return;
	}
	if (!s->ctl)
		return;
	smcr_ctl_add_section(s->ctl, &sec);
	if (s->ctl_gid != (gid_t)-1) {
		r = smcr_ctl_set_group(s->ctl, s->ctl_gid);
		if (r < 0)
			log_warn("ctl-group %s: %s (root and uid %u only)", s->cfg.ctl_group,
				 strerror(-r), (unsigned int)geteuid());
	}
}

/* --ctl-group: a group name or number; -ENOENT when there is none. */
static int resolve_group(const char *name, gid_t *gid)
{
	struct group gr, *res = NULL;
	char buf[4096], *end;
	unsigned long v;

	errno = 0;
	v = strtoul(name, &end, 10);
	if (*name && !*end && !errno && v < (gid_t)-1) {
		*gid = (gid_t)v;
		return 0;
	}
	if (getgrnam_r(name, &gr, buf, sizeof(buf), &res) || !res)
		return -ENOENT;
	*gid = res->gr_gid;
	return 0;
}

static void shutdown_server(struct server *s)
{
	unsigned i;
	char b = 1;

	for (i = 0; i < s->nlfd; i++)
		close(s->lfd[i]);
	s->nlfd = 0;
	if (s->smcr_ls) {
		smcr_close(s->smcr_ls);
		s->smcr_ls = NULL;
	}
	pthread_mutex_lock(&s->lock);
	s->stopping = true;
	pthread_mutex_unlock(&s->lock);
	/* Handshakes in progress: wake them up, they end with an error. */
	if (write(s->cancel_wr, &b, 1) < 0)
		log_warn("cancel pipe: %s", strerror(errno));
	engine_drain(s->engine);
	pthread_mutex_lock(&s->lock);
	while (s->handshakes)
		pthread_cond_wait(&s->cond, &s->lock);
	pthread_mutex_unlock(&s->lock);
	engine_stop(s->engine);
	s->engine = NULL;
}

int main(int argc, char **argv)
{
	struct server s;
	struct engine_params ep;
	sigset_t sigs;
	int sfd = -1, notify = -1, r, status = EXIT_FAILURE;
	long ncpu;
	bool tcp_default;

	memset(&s, 0, sizeof(s));
	config_defaults(&s.cfg);
	applog_set_ident("smcrd");
	pthread_mutex_init(&s.lock, NULL);
	pthread_cond_init(&s.cond, NULL);
	s.cancel_fd = s.cancel_wr = -1;
	if (!getcwd(s.cwd, sizeof(s.cwd)))
		strcpy(s.cwd, "/");

	r = parse_args(&s, argc, argv);
	if (r < 0)
		fputs("Try 'smcrd --help' for more information.\n", stderr);
	if (r) {
		status = r > 0 ? EXIT_SUCCESS : EXIT_USAGE;
		goto out_config;
	}
	if (s.cfg.verbose)
		smcr_log_set_level(SMCR_LOG_DEBUG);
	if (absolutize(&s, &s.cfg.cli_exports) < 0)
		goto out_config;
	if (build_table(&s, true, &s.table) < 0) {
		status = EXIT_USAGE;
		goto out_config;
	}
	s.ctl_gid = (gid_t)-1;
	if (s.cfg.ctl_group && resolve_group(s.cfg.ctl_group, &s.ctl_gid) < 0) {
		log_err("ctl-group %s: no such group", s.cfg.ctl_group);
		status = EXIT_USAGE;
		goto out_table;
	}
	s.tls_mode = s.cfg.tls;
	if ((s.cfg.tls_certificates || s.cfg.tls_psk) && s.tls_mode == NBD_TLS_OFF) {
		log_err("TLS certificates or keys given, but TLS is off (--tls=on|require)");
		status = EXIT_USAGE;
		goto out_table;
	}
	if (s.cfg.tls_certificates && s.cfg.tls_psk) {
		log_err("give TLS certificates or a PSK file, not both");
		status = EXIT_USAGE;
		goto out_table;
	}
	if (s.tls_mode != NBD_TLS_OFF) {
		char err[256], *dir = NULL, *psk = NULL;

		if (s.tls_mode == NBD_TLS_REQUIRE && s.cfg.smcr_port) {
			log_err("--tls=require cannot cover the SMC-R port (its data goes by RDMA, "
				"not through TLS): use --tls=on, or no SMC-R port");
			status = EXIT_USAGE;
			goto out_table;
		}
		/* Relative paths of the config file: from smcrd's start directory. */
		if (s.cfg.tls_certificates)
			dir = abs_path(s.cwd, s.cfg.tls_certificates);
		if (s.cfg.tls_psk)
			psk = abs_path(s.cwd, s.cfg.tls_psk);
		if (s.cfg.tls_psk && s.cfg.tls_verify_peer == BD_TLS_VERIFY_ON) {
			log_err("tls-verify-peer is for certificates (PSK clients are always "
				"checked)");
			free(dir);
			free(psk);
			status = EXIT_USAGE;
			goto out_table;
		}
		r = bd_tls_server_new(dir, psk, s.cfg.tls_verify_peer, &s.tls, err, sizeof(err));
		free(dir);
		free(psk);
		if (r < 0) {
			log_err("TLS: %s", err);
			status = EXIT_USAGE;
			goto out_table;
		}
		log_info("TLS %s on NBD/TCP (%s%s)",
			 s.tls_mode == NBD_TLS_REQUIRE ? "required" : "offered",
			 s.cfg.tls_psk ? "pre-shared keys" : "X.509 certificates",
			 s.cfg.tls_psk ? "" : bd_tls_verifies_peer(s.tls) ?
			 ", client certificates verified" : ", client certificates not verified");
	}
	if (s.cfg.log_file) {
		/* Not through a symbolic link or a hard link, never blocking
		 * on a FIFO; mode 0640. */
		int fd = open(s.cfg.log_file, O_WRONLY | O_CREAT | O_APPEND | O_NOFOLLOW |
			      O_NONBLOCK | O_NOCTTY | O_CLOEXEC, 0640);
		const char *bad = NULL;
		struct stat lst;

		if (fd < 0) {
			log_err("log file %s: %s", s.cfg.log_file,
				errno == ELOOP ? "is a symbolic link" :
				errno == ENXIO ? "a FIFO or socket" : strerror(errno));
			goto out_table;
		}
		if (fstat(fd, &lst) < 0)
			bad = strerror(errno);
		else if (!S_ISREG(lst.st_mode) && !S_ISCHR(lst.st_mode))
			bad = "not a regular file (a FIFO, socket or directory)";
		else if (S_ISREG(lst.st_mode) && lst.st_nlink > 1)
			bad = "has other hard links (another file's name)";
		else if (fcntl(fd, F_SETFL, O_APPEND) < 0)
			bad = strerror(errno);
		if (bad) {
			log_err("log file %s: %s", s.cfg.log_file, bad);
			close(fd);
			goto out_table;
		}
		dup2(fd, STDERR_FILENO);
		close(fd);
		applog_set_stamp(APPLOG_STAMP_LOCAL);
	}
	tcp_default = !s.cfg.port && !s.cfg.listen;
	if (!s.cfg.port)
		s.cfg.port = strdup("10809");
	if (!s.cfg.threads) {
		ncpu = sysconf(_SC_NPROCESSORS_ONLN);
		s.cfg.threads = ncpu > 0 ? (unsigned)(ncpu > 64 ? 64 : ncpu) : 1;
	}
	r = listen_activated(&s);
	if (r < 0)
		goto out_table;
	if (r == 0 && s.cfg.unix_path && listen_unix(&s, s.cfg.unix_path) < 0)
		goto out_listen;
	/* With a Unix socket, TCP only when a port or address was given. */
	if (r == 0 && (!s.cfg.unix_path || !tcp_default) &&
	    listen_on(&s, s.cfg.listen, s.cfg.port) < 0)
		goto out_listen;
	log_table(s.table, s.cfg.config_file);

	/* Signals are taken synchronously by the main thread only. */
	sigemptyset(&sigs);
	sigaddset(&sigs, SIGTERM);
	sigaddset(&sigs, SIGINT);
	sigaddset(&sigs, SIGHUP);
	pthread_sigmask(SIG_BLOCK, &sigs, NULL);
	signal(SIGPIPE, SIG_IGN);

	if (!s.cfg.foreground) {
		notify = daemonize();
		if (notify < 0) {
			log_err("daemonize: %s", strerror(-notify));
			goto out_listen;
		}
		if (reopen_rbd(&s) < 0)
			goto out_listen;
	}
	sfd = signalfd(-1, &sigs, SFD_CLOEXEC);
	if (sfd < 0) {
		log_err("signalfd: %s", strerror(errno));
		goto out_listen;
	}
	{
		int p[2];

		if (pipe2(p, O_CLOEXEC) < 0) {
			log_err("pipe: %s", strerror(errno));
			goto out_sfd;
		}
		s.cancel_fd = p[0];
		s.cancel_wr = p[1];
	}
	if (s.cfg.pidfile && write_pidfile(s.cfg.pidfile) < 0)
		goto out_pipe;

	memset(&ep, 0, sizeof(ep));
	ep.threads = s.cfg.threads;
	ep.queue_depth = s.cfg.queue_depth;
	ep.max_memory = s.cfg.max_memory;
	ep.max_memory_per_address = mem_per_address(&s);
	ep.fixed_buffers = s.cfg.fixed_buffers;
	ep.drain_timeout_ms = 30000;
	ep.request_timeout_ms = s.cfg.request_timeout * 1000;
	ep.closed = client_gone;
	ep.closed_arg = &s;
	/* SMC-R after daemonizing: the stack runs its own thread. */
	if (s.cfg.smcr_port && smcr_start(&s) < 0)
		goto out_pidfile;
	r = engine_start(&ep, &s.engine);
	if (r < 0) {
		log_err("cannot start the I/O engine: %s", strerror(-r));
		goto out_pidfile;
	}
	log_info("smcrd %s ready: %u I/O threads, queue depth %u, max %u clients",
		 PACKAGE_VERSION, s.cfg.threads, s.cfg.queue_depth, s.cfg.max_clients);
	if (notify >= 0) {
		char ok = 0;

		if (!s.cfg.log_file) {
			/* In the background without a log file: syslog. */
			openlog("smcrd", LOG_PID | LOG_NDELAY, LOG_DAEMON);
			applog_set_fn(log_to_syslog, NULL);
		}
		detach_stdio(s.cfg.log_file);
		if (write(notify, &ok, 1) < 0)
			log_warn("cannot notify the parent: %s", strerror(errno));
		close(notify);
		notify = -1;
	}
	{
		char st[64];

		snprintf(st, sizeof(st), "READY=1\nMAINPID=%ld", (long)getpid());
		r = sysd_notify(st);
		if (r < 0)
			log_warn("cannot notify systemd: %s", strerror(-r));
	}

	ctl_start(&s);
	serve(&s, sfd);
	sysd_notify("STOPPING=1");
	smcr_ctl_close(s.ctl);
	s.ctl = NULL;
	shutdown_server(&s);
	log_info("exiting");
	status = EXIT_SUCCESS;

out_pidfile:
	if (s.smcr_ls)
		smcr_close(s.smcr_ls);
	smcr_ctx_destroy(s.smcr);
	if (s.cfg.pidfile)
		unlink(s.cfg.pidfile);
out_pipe:
	close(s.cancel_fd);
	close(s.cancel_wr);
out_sfd:
	close(sfd);
out_listen:
	for (r = 0; r < (int)s.nlfd; r++)
		close(s.lfd[r]);
	unix_remove(&s);
	if (notify >= 0)
		close(notify);		/* the parent reads EOF: failure */
out_table:
	bd_tls_free(s.tls);
	export_table_free(s.table);
out_config:
	free(s.addrs);
	config_free(&s.cfg);
	pthread_cond_destroy(&s.cond);
	pthread_mutex_destroy(&s.lock);
	return status;
}
