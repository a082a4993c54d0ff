/* SPDX-License-Identifier: BSD-3-Clause */
/* smcrd: listeners (TCP, Unix socket, systemd's) and accept, where the
 * limits on clients and handshakes refuse (smcrd-int.h). */
#include <config.h>

#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "smcrd-int.h"
#include "sysd.h"
#include "monotime.h"

static struct lograte_every rl_accept = LOGRATE_EVERY_INIT, rl_max_clients = LOGRATE_EVERY_INIT,
		      rl_handshakes = LOGRATE_EVERY_INIT, rl_per_address = LOGRATE_EVERY_INIT,
		      rl_hs_per_address = LOGRATE_EVERY_INIT, rl_hs_evict = LOGRATE_EVERY_INIT;

/* Accepts on lfd; smcr: the SMC-R listener (CLC runs in the handshake
 * thread, which then wraps the socket in an SMC-R transport).  Returns
 * -EMFILE when out of descriptors (the caller pauses), else 0. */
int listen_accept(struct server *s, int lfd, bool smcr)
{
	struct sockaddr_storage ss;
	socklen_t len = sizeof(ss);
	struct hs_ctx *h;
	pthread_attr_t attr;
	pthread_t th;
	bool refuse = false;
	char peer[64], addr[INET6_ADDRSTRLEN];
	struct addr_count *a;
	unsigned an, na;
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
	hs_addr_key(fd, &ss, addr, sizeof(addr));
	/* SMC-R's socket goes to libsmcr, which may close it: not evicted. */
	h->kill_fd = smcr ? -1 : fd;
	pthread_mutex_lock(&s->lock);
	/* Per address first: one address never takes a whole global pool;
	 * its share (share_allows()) leaves room for the others. */
	a = hs_addr_find(s, addr);
	if (s->clients < s->cfg.max_clients && !hs_addr_may_connect(s, a))
		goto refuse_per_address;
	if (a && s->cfg.max_per_address && a->n >= s->cfg.max_per_address)
		goto refuse_per_address;
	if (!hs_addr_may_handshake(s, a)) {
		unsigned ahs = a ? a->hs : 0, nhs = s->hs_addrs;

		s->refused_hs_per_address++;
		pthread_mutex_unlock(&s->lock);
		limit_warn(&rl_hs_per_address, "client %s: %s has %u clients in the handshake, "
			   "its share (max-handshakes-per-address %u; %u addresses have some): "
			   "closing", peer, addr, ahs, hs_per_address(s), nhs);
		hs_free(h);
		return 0;
	}
	if (s->handshakes - s->hs_dying >= s->cfg.max_handshakes) {
		char victim[INET6_ADDRSTRLEN + 32];

		/* Half-open (CLC or NBD options): the oldest handshake of
		 * the address with the most goes, or else this one, with no
		 * thread and no reply. */
		if (hs_evict(s, addr, victim, sizeof(victim))) {
			pthread_mutex_unlock(&s->lock);
			limit_warn(&rl_hs_evict, "client %s: %u clients in the handshake "
				   "(max-handshakes): the oldest handshake of %s evicted", peer,
				   s->cfg.max_handshakes, victim);
			pthread_mutex_lock(&s->lock);
		} else {
			s->refused_handshakes++;
			pthread_mutex_unlock(&s->lock);
			limit_warn(&rl_handshakes, "client %s: %u clients in the handshake "
				   "(max-handshakes): closing", peer, s->cfg.max_handshakes);
			hs_free(h);
			return 0;
		}
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
		r = hs_addr_get(s, addr);
		if (r == -EBUSY)
			goto refuse_per_address;
		if (r == 0) {
			memcpy(h->addr, addr, sizeof(addr));
			h->hs_counted = true;
		}
		s->clients++;
	}
	s->handshakes++;
	hs_list_add(s, h);
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
	r = pthread_create(&th, &attr, hs_main, h);
	pthread_attr_destroy(&attr);
	if (r) {
		log_err("client %s: cannot start a thread: %s", peer, strerror(r));
		pthread_mutex_lock(&s->lock);
		if (!refuse) {
			s->clients--;
			if (h->addr[0]) {
				hs_addr_done(s, h->addr);
				hs_addr_put(s, h->addr);
			}
		} else {
			s->refusing--;
		}
		hs_list_del(s, h);
		s->handshakes--;
		pthread_mutex_unlock(&s->lock);
		hs_free(h);
	}
	return 0;

refuse_per_address:	/* under s->lock */
	s->refused_per_address++;
	an = a ? a->n : 0;
	na = s->naddrs;
	pthread_mutex_unlock(&s->lock);
	limit_warn(&rl_per_address, "client %s: %s has %u clients, its share "
		   "(max-clients-per-address %u; %u addresses have some): closing", peer, addr,
		   an, s->cfg.max_per_address, na);
	hs_free(h);
	return 0;
}

/* --- listening ------------------------------------------------------------ */

int listen_on(struct server *s, const char *host, const char *port)
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
		if (bind(fd, ai->ai_addr, ai->ai_addrlen) < 0 || listen(fd, SOMAXCONN) < 0) {
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

/* Listens on the Unix socket path (mode 0777 less the umask: bind(2)).  A stale
 * socket there is replaced; a live one (it accepts) or anything else is an
 * error. */
int listen_unix(struct server *s, const char *path)
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
void listen_unix_remove(struct server *s)
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
int listen_activated(struct server *s)
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
