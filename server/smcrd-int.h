/* SPDX-License-Identifier: BSD-3-Clause */
/* smcrd: the daemon's private header.  Its files call one way:
 *   smcrd.c            options, main's steps, the serve loop
 *   smcrd-status.c     the status dump (smcrctl status) and the metrics page
 *   smcrd-listen.c     listeners and accept (limits at accept)
 *   smcrd-handshake.c  the handshake thread, per-address accounting
 *   smcrd-daemon.c     exports (re)loaded, pid file, fork, syslog */
#ifndef SMCRD_SMCRD_INT_H
#define SMCRD_SMCRD_INT_H

#include <limits.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <arpa/inet.h>

#include "lograte.h"
#include "smcrd-conf.h"
#include "smcrd-engine.h"
#include "smcrd-iostat.h"
#include "smcrd-export.h"
#include "applog.h"
#include "transport.h"
#include "transport-tls.h"
#include "smcr.h"

#define EXIT_USAGE		2
#define HANDSHAKE_TIMEOUT_MS	30000
#define HANDSHAKE_MAX_OPTIONS	128
#define MAX_REFUSING		16
#define LISTEN_MAX		8
/* Out of descriptors: stop accepting this long, then try again. */
#define ACCEPT_PAUSE_MS		100
/* A refusal at a limit is logged once per this interval, with a count. */
#define LIMIT_LOG_MS		10000

/* A refusal at a limit, logged once per LIMIT_LOG_MS with a count
 * (common/lograte.h). */
#define limit_warn(e, fmt, ...) log_every_warn(e, LIMIT_LOG_MS, fmt, ##__VA_ARGS__)

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
	uint64_t refused_per_address, refused_hs_per_address, handshakes_evicted;
	/* Clients per peer address (max-clients-per-address); hs_addrs: of
	 * them, those with a client in the handshake. */
	struct addr_count *addrs;
	unsigned naddrs, caddrs, hs_addrs;
	/* Handshake threads, oldest first; hs_dying: of them, those evicted
	 * and not ended yet (not counted against max-handshakes). */
	struct hs_ctx *hs_head, *hs_tail;
	unsigned hs_dying;
	bool stopping;
	/* SIGHUP: the reload thread (under lock); again: one more asked
	 * while it ran; joinable: started and not joined yet. */
	pthread_t reload_tid;
	bool reload_running, reload_again, reload_joinable;
	int cancel_fd;			/* pipe read end: readable when stopping */
	int cancel_wr;
	int lfd[LISTEN_MAX];
	unsigned nlfd;
	char *unix_made;		/* the Unix socket smcrd created, or NULL */
	ino_t unix_ino;
	struct smcr_ctx *smcr;		/* SMC-R: the stack, NULL if off */
	struct smcr_sock *smcr_ls;	/* its listener */
	struct smcr_ctl *ctl;		/* control socket (smcrctl), or NULL */
	struct metrics *metrics;	/* --metrics-listen's thread, or NULL */
	int metrics_fd;			/* its socket until the thread takes it */
	gid_t ctl_gid;			/* --ctl-group, or (gid_t)-1 */
	char cwd[PATH_MAX];
	int tls_mode;			/* NBD_TLS_*, from cfg.tls */
	struct bd_tls *tls;		/* TLS credentials on NBD/TCP */
	struct iostat_table iostat;	/* per export and client (engine) */
};

struct addr_count {
	char addr[INET6_ADDRSTRLEN];
	unsigned n;			/* clients */
	unsigned hs;			/* of them in the handshake (<= n) */
};

struct hs_ctx {
	char addr[INET6_ADDRSTRLEN];	/* the peer's address, counted if set */
	bool hs_counted;		/* in its address's handshakes */
	/* In the server's handshake list (under its lock); kill_fd: the
	 * kernel socket, shut down to evict it (-1: SMC-R, not evicted). */
	struct hs_ctx *hs_prev, *hs_next;
	bool listed, evicted;
	int kill_fd;
	int64_t accepted;		/* now_ms() at accept */
	struct server *srv;
	struct bd_transport *t;
	int smcr_fd;			/* SMC-R: TCP socket before CLC, else -1 */
	struct sockaddr_storage peer;
	char refusal[96];
};

/* smcrd-handshake.c */
void hs_addr_key(int fd, const struct sockaddr_storage *ss, char *out, size_t len);
struct addr_count *hs_addr_find(struct server *s, const char *addr);
bool hs_addr_may_connect(const struct server *s, const struct addr_count *a);
bool hs_addr_may_handshake(const struct server *s, const struct addr_count *a);
void hs_list_add(struct server *s, struct hs_ctx *h);
void hs_list_del(struct server *s, struct hs_ctx *h);
const char *hs_evict(struct server *s, const char *addr, char *victim, size_t len);
uint64_t hs_mem_per_address(const struct server *s);
unsigned hs_per_address(const struct server *s);
int hs_addr_get(struct server *s, const char *addr);
void hs_addr_done(struct server *s, const char *addr);
void hs_addr_put(struct server *s, const char *addr);
void hs_client_gone(void *arg, void *owner);
void *hs_main(void *arg);
void hs_free(struct hs_ctx *h);

/* smcrd-listen.c */
int listen_accept(struct server *s, int lfd, bool smcr);
int listen_on(struct server *s, const char *host, const char *port);
int listen_unix(struct server *s, const char *path);
void listen_unix_remove(struct server *s);
int listen_activated(struct server *s);

/* smcrd-daemon.c */
int daemon_absolutize(struct server *s, struct export_list *l);
int daemon_build_table(struct server *s, bool apply_globals,
		       const struct export_table *keep, struct export_table **out);
int daemon_reopen_rbd(struct server *s);
void daemon_log_table(const struct export_table *t, const char *config);
void daemon_reload_start(struct server *s);
bool daemon_reload_stop(struct server *s, unsigned wait_ms);
/* A pid file made by daemon_write_pidfile(): its directory (opened once), its
 * name in it and the file itself, to remove it only if it is still ours. */
struct pidfile {
	int dirfd;			/* -1: none */
	const char *path;		/* as given (for the log) */
	char base[256];
	dev_t dev;
	ino_t ino;
};
int daemon_write_pidfile(const char *path, struct pidfile *pf);
void daemon_remove_pidfile(struct pidfile *pf);
int daemon_fork(void);
void daemon_syslog(void *opaque, enum smcr_log_level level, const char *msg);
void daemon_detach_stdio(const char *log_file);

/* smcrd-status.c: the control socket's "smcrd" section (smcrctl status),
 * and --metrics-listen's thread on the socket s->metrics_fd; each logs
 * why it is absent and smcrd goes on without it. */
void status_ctl_open(struct server *s);
void status_metrics_serve(struct server *s);

#endif
