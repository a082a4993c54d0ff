/* SPDX-License-Identifier: BSD-3-Clause */
/* smcrbd: the engine behind the public API: devices, link groups over
 * verbs links, the progress thread and its timers.  Internal; the context
 * calls of smcr.h are in ctx.c. */
#ifndef SMCR_ENGINE_H
#define SMCR_ENGINE_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "dev.h"
#include "lgr.h"
#include "link_verbs.h"
#include "msg.h"
#include "smcr.h"

#define SMCR_MAX_PORTS 16
/* Default of SMCR_BUSY_POLL_US: off (on rxe in a one-CPU guest polling
 * delays the completion it waits for; tests/bench/README.md). */
#define SMCR_BUSY_POLL_US_DEFAULT 0
/* Small sends behind a CDC in flight wait for its completion and go as
 * one write and one CDC (Linux: net.smc.autocorking_size, 64 KiB). */
#define SMCR_AUTOCORK_BYTES_DEFAULT (64u << 10)
/* Default of SMCR_CALLER_POLL: on (see smcr/link_verbs.c's caller-driven
 * progress, sock.c's sock_wait_link() and sock_chan_sync()). */
#define SMCR_CALLER_POLL_DEFAULT 1

struct smcr_sock {
	struct smcr_ctx *ctx;
	int fd;				/* the TCP socket */
	int evfd;			/* eventfd for smcr_sock_fd() */
	/* Caller-driven progress: an eventfd (made at the first wait) that
	 * notify writes while a thread sleeps on the link's channel. */
	int cpfd;
	bool cp_sleeping;
	/* Caller-driven progress: s holds the channel of the link with id
	 * chan_link (chan_held, smcr_vlink_hold) once its thread blocked in
	 * a data call (chan_sticky) or its application polls smcr_sock_fd():
	 * that fd is then pollfd, an epoll set of evfd and chan_fd (the
	 * channel), so that the thread wakes for the link's completions and
	 * takes them in smcr_sock_events(). */
	int pollfd, chan_fd;
	uint64_t chan_link;
	bool chan_held, chan_sticky;
	bool pollfd_failed;
	bool listener;
	uint16_t synopt_port;		/* listener: in the SYN option's port map */
	bool smc;			/* false: plain TCP (fallback) */
	bool first_contact;
	uint32_t fallback_reason;
	bool fallback_by_peer;
	struct smcr_lgr *lgr;
	struct smcr_conn conn;
	struct smcr_lgr_peer_rmb *peer_rmb;
	size_t tx_reserved;		/* smcr_reserve_len(), not yet committed */
	pthread_cond_t cond;		/* state changed (ctx->lock) */
	/* The peer ended fd (FIN, RST) with no SMC close or abort: when we
	 * saw it (0: not seen); judged: kept, or reset as its process is
	 * gone (peer_gone).  smcr_engine_tcp_ends(). */
	uint64_t tcp_end_ms;
	bool tcp_end_judged;
	bool peer_gone;
	struct smcr_sock *next;
};

struct smcr_ctx {
	pthread_mutex_t lock;
	pthread_t thread;
	bool thread_running, stop;
	int epfd, wakefd, timerfd;
	struct smcr_ctx_opts opts;
	bool synopt;			/* the SYN option program is ours (BPF) */
	char synopt_why[160];		/* why not, when it is off */
	struct smcr_devs devs;
	struct smcr_port_ref ports[SMCR_MAX_PORTS];
	int nports;
	struct smcr_vlink_set vlinks;
	struct smcr_link *graveyard[64];	/* links to destroy after upcalls */
	unsigned int ngrave;
	struct smcr_lgr *lgrs;
	struct smcr_sock *socks;
	uint8_t peer_id[8];
	/* User EIDs (SMC-Rv2; none: v1 only), blank-padded. */
	uint8_t eids[SMCR_CLC_MAX_EIDS][SMCR_EID_LEN];
	uint8_t eid_count;
	struct smcr_lgr_config lgr_cfg;
	/* Every group's RMBs and send buffers (SMCR_MAX_PINNED_BYTES). */
	struct smcr_rmb_budget pinned;
	/* A blocked receive polls its link's CQ this long before it sleeps
	 * (SMCR_BUSY_POLL_US; 0: it sleeps at once). */
	unsigned int busy_poll_us;
	/* Autocork limit of new connections (SMCR_AUTOCORK_BYTES; 0: off). */
	uint32_t autocork_bytes;
	/* Caller-driven progress (SMCR_CALLER_POLL): a thread blocked in a
	 * data call polls and waits on its link's CQ itself. */
	bool caller_poll;
	struct smcr_stats stats;
	uint64_t last_rescan_ms;
	pthread_cond_t lgr_cond;	/* link or RKEY state changed */
	struct smcr_qp_timing qp_timing;	/* of every new link's QP */
	bool dev_check_due;		/* a device reported a fatal error */
	uint64_t devices_lost;
	/* Scheduled fault injection (smcr_fault "...,after=", SMCR_FAULT). */
	struct smcr_fault_sched {
		uint8_t action;		/* enum smcr_fault_action */
		uint8_t link_id;	/* 0: every link on dev */
		uint32_t ms, for_ms;	/* delay; how long a drop/delay lasts */
		char dev[IBV_SYSFS_NAME_MAX];
		uint64_t next_ms;
		uint32_t every_ms;	/* 0: once */
		unsigned int left;	/* with every: 0 is forever */
	} faults[8];
	unsigned int nfaults;
	uint32_t tick_ms;		/* the timer's period now */
	/* Verbs objects of dead links, destroyed by their own thread (a QP
	 * destroy may sleep for seconds on rxe); each holds a device ref. */
	struct smcr_reap_item {
		struct smcr_vlink_res *res;
		struct smcr_port_ref ref;
		struct smcr_reap_item *next;
	} *reap_head;
	pthread_t reaper;
	bool reaper_running, reaper_stop;
	pthread_cond_t reap_cond;
	/* max_lgrs_per_address in effect (0: none); its refusals are logged
	 * once per SMCR_LIMIT_LOG_MS, with how many were not. */
	unsigned int max_lgrs_per_address;
	/* SMC-Rv2 release offered (SMCR_V2_RELEASE: 1, or 0 as Linux 6.1)
	 * and, at release 1, the connections a new group takes
	 * (SMCR_MAX_CONNS, 16..255). */
	uint8_t v2_release, max_conns;
	uint64_t lgr_limit_logged_ms;
	unsigned long lgr_limit_unlogged;
	/* ctx.c's settings table: which were given (a bit per row), the
	 * SMCR_FAULT specs, and copies of strings from opts.settings. */
	uint32_t knobs_set;
	const char *fault_spec;
	char *knob_strs[4];
	unsigned int nknob_strs;
};

extern const struct smcr_lgr_ops smcr_engine_lgr_ops;

uint64_t smcr_now_ms(void);
/* The port carrying a local address, or NULL. */
struct smcr_port_ref *smcr_engine_port_for(struct smcr_ctx *ctx,
					   const struct sockaddr *local);
/* Our group with this peer (peer ID, role, and an active link to gid and
 * mac (NULL: any, as SMC-Rv2 matches); a client also checks the server's
 * qpn), or NULL. */
struct smcr_lgr *smcr_engine_lgr_find(struct smcr_ctx *ctx, enum smcr_role role,
				      const uint8_t peer_id[8], const uint8_t *gid,
				      const uint8_t *mac, uint32_t qpn);
/* Server, before a first contact makes a group (ctx->lock held): 0 when
 * the TCP peer of fd has fewer than max_lgrs_per_address groups, else
 * SMCR_DECL_MEM (counted, logged once per SMCR_LIMIT_LOG_MS).  addr: the
 * peer's address for the new group's peer_addr (all zero if unknown). */
#define SMCR_LIMIT_LOG_MS 10000
uint32_t smcr_engine_lgr_admit(struct smcr_ctx *ctx, int fd, uint8_t addr[16]);
/* Create a verbs link on a port for a group. */
int smcr_engine_link_on(struct smcr_ctx *ctx, struct smcr_lgr *lgr,
			struct smcr_port_ref *port, struct smcr_link **linkp,
			struct smcr_link_info *local);
/* Wait (ctx->lock held) on ctx->lgr_cond until pred(arg) or timeout. */
int smcr_engine_wait(struct smcr_ctx *ctx, bool (*pred)(void *arg), void *arg,
		     unsigned int timeout_ms);
/* smcr_fault() with ctx->lock held (the spec is in smcr.h): now, the
 * number of links acted on or -ENOENT if none; scheduled (",after=MS",
 * ",every=MS", ",count=C"), 0; -EINVAL for a bad spec. */
int smcr_engine_fault(struct smcr_ctx *ctx, const char *spec);
/* The scheduled faults due at now, each applied (fault.c); one whose link
 * does not exist (yet) waits for it.  Every tick. */
void smcr_engine_faults_tick(struct smcr_ctx *ctx, uint64_t now);
/* The progress thread's timer to ms (SMCR_LGR_TICK_MS, or faster while a
 * link holds work requests back under a fault). */
void smcr_engine_set_tick(struct smcr_ctx *ctx, uint32_t ms);
/* Sum the counters of every group and connection into ctx->stats. */
void smcr_engine_collect(struct smcr_ctx *ctx, struct smcr_stats *st);
/* Add one connection's counters to st (a live one's, or a freed one's to
 * ctx->stats). */
void smcr_engine_conn_stats_add(struct smcr_stats *st, const struct smcr_conn_stats *cs);

/* The context's life (ctx.c), with ctx->opts settled: open sets up the
 * lock, the devices and ports, the progress thread's fds and the peer ID
 * (on failure it undoes itself); start runs the reaper and progress
 * threads; stop ends them and destroys every group (sockets gone);
 * close releases what open set up. */
/* A connection whose TCP socket the peer's kernel ended (FIN or RST)
 * with no SMC close or abort from the peer gets its group's links probed
 * (TEST LINK); with no probe sent since answered within
 * SMCR_TCP_END_GRACE_MS, the peer's process is gone and the connection
 * is reset.  Every tick. */
#define SMCR_TCP_END_GRACE_MS 1000
void smcr_engine_tcp_ends(struct smcr_ctx *ctx, uint64_t now);

int smcr_engine_open(struct smcr_ctx *ctx);
int smcr_engine_start(struct smcr_ctx *ctx);
void smcr_engine_stop(struct smcr_ctx *ctx);
void smcr_engine_close(struct smcr_ctx *ctx);

#endif
