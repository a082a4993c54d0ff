/* SPDX-License-Identifier: BSD-3-Clause */
/* libsmcr: Shared Memory Communications over RDMA (RFC 7609) in userspace.
 *
 * A context owns the RDMA devices, the link groups to peers and a progress
 * thread.  Sockets look like TCP sockets: a connection starts as a TCP
 * connection, the CLC handshake on it sets up (or reuses) a link group, and
 * from then on data moves by RDMA writes into the peer's memory.  When
 * SMC-R is not possible both ends carry on over the TCP connection, which
 * the application does not notice except through smcr_sock_info().
 *
 * Conventions (like liburing): functions return 0 or a non-negative count
 * on success and -errno on failure; errno is not used.
 *
 * Structs that grow (smcr_ctx_opts, smcr_stats, smcr_sock_info; as
 * rdma-core's verbs.h): the calls that take one are inlines that pass
 * sizeof of the program's struct to a *_size call.  New fields only ever
 * go at the end.  A library newer than the program reads only the bytes
 * the program knows (the rest as zero: defaults) and writes only those; an
 * older library zeroes the fields it does not know in what it gives back,
 * and fails with -EINVAL a struct handed in that sets a field it does not
 * know.  Zero-initialise the opts (= { 0 } or designated fields) and never
 * pass a size of your own.  Unknown bits in a call's flags are -EINVAL too.
 * Each release's new calls get their own node in the symbol map
 * (LIBSMCR_0.2: the *_size calls; LIBSMCR_0.3: the version calls);
 * LIBSMCR_0.1's calls stay.  smcr_check_version() tells at run time
 * whether the library loaded is as new as the header built against.
 *
 * Thread safety: all functions may be called from any thread.  A context
 * serialises its state with one lock; calls on one socket from several
 * threads at once are safe but their data interleaves arbitrarily (as with
 * TCP).  Blocking calls sleep on a condition variable, never spin, and are
 * woken by the progress thread.
 */
#ifndef SMCR_SMCR_H
#define SMCR_SMCR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/uio.h>

#ifdef __cplusplus
extern "C" {
#endif

struct smcr_ctx;
struct smcr_sock;

/* Logging.  The stack logs one line per event (no trailing newline) at
 * these levels; by default to stderr, stamped, at SMCR_DEBUG (0..3) from
 * the environment or info.  Both settings are process-wide: the stack's
 * log is not per context.  A callback runs on whichever thread logs, one
 * call at a time, and must not call back into libsmcr (but for
 * smcr_log_peer()); fn NULL restores stderr.  Set them before creating contexts (or through the opts). */
enum smcr_log_level {
	SMCR_LOG_ERR = 0,
	SMCR_LOG_WARN,
	SMCR_LOG_INFO,
	SMCR_LOG_DEBUG,
};
typedef void (*smcr_log_fn)(void *opaque, enum smcr_log_level level, const char *msg);
void smcr_log_set_fn(smcr_log_fn fn, void *opaque);
void smcr_log_set_level(enum smcr_log_level level);
/* The level in force (what smcr_log_set_level() set, else SMCR_DEBUG's). */
enum smcr_log_level smcr_log_get_level(void);
/* Inside a callback: the peer ("host:port", "[v6]:port") of the
 * connection the line is about, or NULL when it is about none.  Lines
 * about a connection start with that peer; a callback can rate them per
 * peer (one peer that reconnects with garbage writes one line after
 * another). */
const char *smcr_log_peer(void);

/* RFC 7609 §3.1: SMC is tried (CLC) only when the SYN and the SYN-ACK both
 * carried TCP option 254 with ExID 0xE2D4C3D9.  Userspace can write and read
 * it only through a cgroup BPF program (needs CAP_BPF/CAP_NET_ADMIN, i.e.
 * root, and cgroup v2). */
enum smcr_syn_option {
	SMCR_SYN_OPTION_AUTO = 0,	/* BPF if it loads, else as OFF (logged once) */
	SMCR_SYN_OPTION_BPF,		/* BPF, or smcr_ctx_create() fails */
	SMCR_SYN_OPTION_OFF,		/* no option: CLC on every connection (a
					 * peer that does not do SMC sees the
					 * Proposal in its stream) */
};

/* One setting by name, its value as the environment would give it. */
struct smcr_setting {
	const char *name;
	const char *value;
};

struct smcr_ctx_opts {
	/* RDMA ports to use, "dev[:port],dev[:port]"; NULL: every active
	 * port with a RoCE v2 GID that carries an IP address. */
	const char *devices;
	/* Receive buffer per connection, rounded up to a power of two from
	 * 16 KiB to 512 MiB (the wire's 4-bit size; a peer's send buffer for
	 * it is as large); 0: SMCR_RMBE_SIZE if set, else chosen per
	 * connection: rmbe_auto_max (setting by name, SMCR_RMBE_AUTO_MAX;
	 * default 512 KiB) while the group's RMBs are within a sixty-fourth
	 * of max_rmb_bytes times rmbe_auto_max / 512 KiB, then smaller,
	 * down to 64 KiB. */
	uint32_t rmbe_size;
	unsigned int max_links;		/* links per group, 2..8; 0: 2 */
	unsigned int clc_timeout_ms;	/* each CLC message; 0: 2000 (an Accept or
					 * Confirm also gets the LLC budget of a
					 * CONFIRM RKEY: llc_timeout_ms * 4) */
	unsigned int llc_timeout_ms;	/* each LLC reply; 0: 2000 */
	unsigned int test_link_ms;	/* TEST LINK after idle; 0: 1000 */
	unsigned int test_link_timeout_ms;	/* 0: 2000 */
	unsigned int link_wait_ms;	/* first link confirmation; 0: 5000 */
	/* Memory for RMBs, and as much for send buffers, per link group;
	 * a connection beyond it gets TCP (Decline 0x01010000, out of
	 * memory).  0: SMCR_MAX_RMB_BYTES from the environment, else 256 MiB. */
	size_t max_rmb_bytes;
	/* Link groups a server keeps for one peer IP address (a peer that
	 * makes up peer IDs gets a group for each, each with its QPs and
	 * buffers); a first contact beyond it is declined (0x01010000, out of
	 * memory: the peer goes on over TCP), counted in
	 * lgrs_refused_per_address and logged once per 10 s.  0:
	 * SMCR_MAX_LGRS_PER_ADDRESS from the environment, else no limit. */
	unsigned int max_lgrs_per_address;
	bool no_smc;			/* never propose/accept SMC-R (TCP only) */
	smcr_log_fn log_fn;		/* if set: smcr_log_set_fn(log_fn, log_opaque) */
	void *log_opaque;
	/* With BPF, a connection whose peer sent no option is plain TCP at
	 * once (no CLC byte), counted as fallback 0x03010000 (peer has no
	 * SMC).  Sockets handed in by
	 * smcr_connect_fd()/smcr_accept_fd() that libsmcr did not create run
	 * CLC as with OFF.  AUTO (0) takes SMCR_SYN_OPTION from the
	 * environment ("auto", "bpf", "off"). */
	enum smcr_syn_option syn_option;
	/* User EIDs for SMC-Rv2, comma-separated, each 1..32 characters of
	 * A-Z, 0-9, '.' and '-' starting with a letter or digit (as Linux's
	 * smc_pnet ueid): with one, SMC-Rv2 (Linux's SMC-R over RoCE v2) is
	 * proposed and accepted when the peer names one of them, v1
	 * otherwise.  NULL: SMCR_EIDS from the environment; "": v1 only. */
	const char *eids;
	/* (LIBSMCR_0.2) Settings by name, ending at a NULL name: any
	 * variable of libsmcr(3) ENVIRONMENT that smcr_ctx_create() reads, by
	 * its name without SMCR_ in lower case ("qp_timeout", "devices"),
	 * with a value as that variable takes, and max_links (2..8),
	 * clc_timeout_ms, link_wait_ms and no_smc (0 or 1), which have no
	 * variable.  Order: a field above that is
	 * not 0 or NULL, then this, then the environment, then the default.
	 * An unknown name or a value the setting does not take (a number
	 * out of its range) fails smcr_ctx_create() with -EINVAL; strings
	 * are copied. */
	const struct smcr_setting *settings;
};

/* The interface of smcr.h: LIBSMCR_<major>.<minor>, the newest node of the
 * library's symbol map (LIBSMCR_0.3). */
#define SMCR_VERSION_MAJOR 0
#define SMCR_VERSION_MINOR 3

/* (LIBSMCR_0.3) The interface of the library loaded.  smcr_check_version:
 * 0 when it has every call and field of major.minor (the same major, a
 * minor up to its own), else -ENOTSUP; e.g.
 * smcr_check_version(SMCR_VERSION_MAJOR, SMCR_VERSION_MINOR) at start. */
int smcr_version_major(void);
int smcr_version_minor(void);
int smcr_check_version(int major, int minor);

/* Where a field above is 0 or NULL, the setting comes from opts->settings,
 * else from the environment (libsmcr(3) ENVIRONMENT says what each does;
 * smcr/ctx.c lists them once, with their ranges): SMCR_DEVICES,
 * SMCR_EIDS, SMCR_RMBE_SIZE, SMCR_MAX_RMB_BYTES, SMCR_MAX_PINNED_BYTES,
 * SMCR_MAX_LGRS_PER_ADDRESS,
 * SMCR_V2_RELEASE, SMCR_MAX_CONNS,
 * SMCR_LLC_TIMEOUT_MS, SMCR_TEST_LINK_MS, SMCR_TEST_LINK_TIMEOUT_MS,
 * SMCR_LAST_LINK_TIMEOUT_MS, SMCR_STALL_MS, SMCR_CONN_STALL_MS,
 * SMCR_DELETE_HOLD_MS,
 * SMCR_QP_TIMEOUT, SMCR_QP_RETRY, SMCR_LINK_POLICY, SMCR_REBALANCE,
 * SMCR_LINK_TX_BYTES, SMCR_BUSY_POLL_US, SMCR_AUTOCORK_BYTES,
 * SMCR_CALLER_POLL, SMCR_RMBE_EYECATCHER, SMCR_FAULT (see smcr_fault())
 * and SMCR_SYN_OPTION. */
int smcr_ctx_create_size(const struct smcr_ctx_opts *opts, size_t opts_size,
			 struct smcr_ctx **ctxp);
static inline int smcr_ctx_create(const struct smcr_ctx_opts *opts, struct smcr_ctx **ctxp)
{
	return smcr_ctx_create_size(opts, sizeof(*opts), ctxp);
}
/* The SYN option mode in effect (SMCR_SYN_OPTION_BPF or _OFF), and its
 * name ("auto", "bpf", "off"). */
enum smcr_syn_option smcr_ctx_syn_option(struct smcr_ctx *ctx);
const char *smcr_syn_option_str(enum smcr_syn_option mode);
/* "auto", "bpf" or "off" (NULL or "": auto) into *mode; else -EINVAL. */
int smcr_syn_option_parse(const char *s, enum smcr_syn_option *mode);
/* Closes every socket and link group, stops the progress thread. */
void smcr_ctx_destroy(struct smcr_ctx *ctx);

/* Sockets.  addr is an IPv4 or IPv6 TCP address. */
int smcr_listen(struct smcr_ctx *ctx, const struct sockaddr *addr,
		socklen_t addrlen, int backlog, struct smcr_sock **sockp);
/* Accept one connection and run the CLC handshake (blocking). */
int smcr_accept(struct smcr_sock *listener, struct smcr_sock **sockp);
/* The listening TCP socket, readable when smcr_accept() will not block. */
int smcr_listen_fd(struct smcr_sock *listener);
/* Connect and run the CLC handshake (blocking). */
int smcr_connect(struct smcr_ctx *ctx, const struct sockaddr *addr,
		 socklen_t addrlen, struct smcr_sock **sockp);
/* The same with the TCP connect bounded: -ETIMEDOUT after timeout_ms (< 0:
 * no bound but the kernel's SYN retries, ~2 min).  The handshake after it
 * has its own (clc_timeout_ms, link_wait_ms). */
int smcr_connect_timeout(struct smcr_ctx *ctx, const struct sockaddr *addr,
			 socklen_t addrlen, int timeout_ms, struct smcr_sock **sockp);
/* Wrap a TCP socket that is already connected (fd is taken over). */
int smcr_connect_fd(struct smcr_ctx *ctx, int fd, struct smcr_sock **sockp);
int smcr_accept_fd(struct smcr_ctx *ctx, int fd, struct smcr_sock **sockp);

#define SMCR_DONTWAIT 0x1		/* -EAGAIN instead of blocking */

ssize_t smcr_send(struct smcr_sock *s, const void *buf, size_t len, int flags);
ssize_t smcr_recv(struct smcr_sock *s, void *buf, size_t len, int flags);
/* Send and receive exactly len bytes (blocking); -EPIPE/-ECONNRESET... */
int smcr_send_all(struct smcr_sock *s, const void *buf, size_t len);
int smcr_recv_all(struct smcr_sock *s, void *buf, size_t len);

/* Zero copy (SMC-R only; -EOPNOTSUPP on a fallback socket).  reserve:
 * up to two pieces of the send buffer (which mirrors the peer's receive
 * buffer); fill them, then commit n bytes.  peek: up to two pieces of
 * received data in our receive buffer; consume n bytes when done. */
ssize_t smcr_reserve(struct smcr_sock *s, struct iovec iov[2], int flags);
/* Reservations held over time: the next len bytes after those reserved
 * and not yet committed (libsmcr counts them), in iov; 0, -EAGAIN (not
 * that much free space yet, with SMCR_DONTWAIT), -EMSGSIZE (more than the
 * peer's RMBE holds).  smcr_commit() hands them over in order; while any
 * are outstanding smcr_reserve() says -EBUSY. */
int smcr_reserve_len(struct smcr_sock *s, size_t len, struct iovec iov[2], int flags);
int smcr_commit(struct smcr_sock *s, size_t n);
/* Gives back the newest n bytes that smcr_reserve_len() reserved and
 * nothing committed (the data to fill them could not be had): 0, or
 * -EINVAL if fewer are outstanding. */
int smcr_unreserve(struct smcr_sock *s, size_t n);
ssize_t smcr_peek(struct smcr_sock *s, struct iovec iov[2], int flags);
int smcr_consume(struct smcr_sock *s, size_t n);
/* The caller waits for more bytes: send the peer a CDC with our consumer
 * cursor now if it moved since the last one (a sender that holds bytes
 * back, as Linux's AF_SMC does with MSG_MORE, sends them when our cursor
 * moves).  SMCR_CURSOR_REQUEST: send one even if it did not move, with
 * the "consumer cursor update requested" flag, on which Linux sends what
 * it holds too.  1: sent, 0: none due (or a fallback socket), -errno. */
#define SMCR_CURSOR_REQUEST 0x1
int smcr_cursor_update(struct smcr_sock *s, int flags);

int smcr_shutdown(struct smcr_sock *s, int how);	/* SHUT_WR */
/* Orderly close; the socket is freed.  abort: reset instead. */
int smcr_close(struct smcr_sock *s);
void smcr_abort(struct smcr_sock *s);

/* A file descriptor that polls readable when the socket may have changed
 * state; then smcr_sock_events() says what is ready (SMCR_EV_*).  For a
 * fallback socket it is the TCP socket itself. */
int smcr_sock_fd(struct smcr_sock *s);
#define SMCR_EV_IN	0x1
#define SMCR_EV_OUT	0x2
#define SMCR_EV_HUP	0x4
#define SMCR_EV_ERR	0x8
unsigned int smcr_sock_events(struct smcr_sock *s);

/* The TCP socket underneath: for a fallback socket, the whole connection
 * (a caller may dup() it and carry on with plain socket calls, then
 * smcr_close() the smcr_sock); for SMC-R, the CLC socket.  Never -1. */
int smcr_sock_tcp_fd(struct smcr_sock *s);

/* Addresses of the TCP connection underneath (as getpeername/getsockname). */
int smcr_getpeername(struct smcr_sock *s, struct sockaddr *addr, socklen_t *len);
int smcr_getsockname(struct smcr_sock *s, struct sockaddr *addr, socklen_t *len);

struct smcr_sock_info {
	bool smc;			/* false: fell back to TCP */
	bool first_contact;
	uint32_t fallback_reason;	/* CLC decline code when !smc */
	bool fallback_by_peer;
	uint8_t link_id;		/* link the connection sends on */
	uint32_t token, peer_token;
	uint32_t rmbe_size, peer_rmbe_size;	/* whole elements */
	uint64_t bytes_sent, bytes_recv;
	uint64_t failovers;
	/* The link group's RMBE layout: the RFC's, with a 4-byte eye catcher
	 * at the start of each element, or Linux's (none); and the data
	 * bytes of the peer's element (the most one write can hold). */
	bool rmbe_eyecatcher;
	uint32_t peer_rmbe_data;
};
int smcr_sock_info_size(struct smcr_sock *s, struct smcr_sock_info *info, size_t size);
static inline int smcr_sock_info(struct smcr_sock *s, struct smcr_sock_info *info)
{
	return smcr_sock_info_size(s, info, sizeof(*info));
}

/* Context-wide counters. */
#define SMCR_STATS_REASONS 32
struct smcr_stats {
	uint64_t connections, smc_connections, fallbacks;
	/* Fallbacks by CLC decline code: slot i counts smcr_stats_reason(i). */
	uint64_t fallback_by_reason[SMCR_STATS_REASONS];
	uint64_t link_groups, links_added, links_deleted, link_failures;
	uint64_t failovers, cdc_sent, cdc_recv, rdma_writes, bytes_sent, bytes_recv;
	uint64_t llc_sent, llc_recv, rkeys_confirmed, test_links;
	/* What is held right now (gauges, not totals): sockets not yet
	 * closed (listeners excluded), RMB elements (receive buffers) and
	 * send buffers in use, RMBs allocated in all link groups.  After
	 * every socket is closed or aborted, open_connections, rmbes_in_use
	 * and sndbufs_in_use are 0 (nothing leaked). */
	uint64_t open_connections, rmbes_in_use, sndbufs_in_use, rmbs;
	/* Links usable now (gauge); connections moved to a less busy link
	 * (rebalancing, not failover); RDMA devices that went away. */
	uint64_t links_active, rebalanced, devices_lost;
	/* Injected faults (smcr_fault() drop/delay): work requests held
	 * back, held ones never sent because their link failed (they
	 * complete as flushed), messages received and delivered late. */
	uint64_t fault_held, fault_discarded, fault_held_recvs;
	/* First contacts declined at max_lgrs_per_address. */
	uint64_t lgrs_refused_per_address;
	/* Link group ticks that came late by more than the stall limit
	 * (host busy, VM paused): how often, and their time in ms. */
	uint64_t local_stalls, local_stall_ms;
	/* Connects made again because the server spoke first without CLC
	 * (it fell back to TCP on silence before our Proposal came). */
	uint64_t clc_retries;
	/* CDCs sent by smcr_cursor_update(): the cursor moved; requests. */
	uint64_t cursor_updates, cursor_requests;
	/* Sends held by autocork (SMCR_AUTOCORK_BYTES) for a CDC in flight. */
	uint64_t corked;
	/* Wake-ups of the progress thread by source: its eventfd (a kick
	 * from the API), its timer, a device's shared completion channel, a
	 * link's own channel (SMCR_CALLER_POLL: completions no caller took),
	 * async events.  caller_serves: smcr_sock_events() calls that took
	 * completions in the caller's thread (SMCR_CALLER_POLL). */
	uint64_t wake_kick, wake_timer, wake_devcq, wake_link, wake_async;
	uint64_t caller_serves;
	/* Failover with a peer that rewinds its producer cursor (Linux):
	 * CDCs that carried one behind data already taken (prod_rewinds),
	 * and times our consumer cursor was held back to it (cons_held). */
	uint64_t prod_rewinds, cons_held;
	/* SMC-Rv2.1 (release 1, Linux 6.6+): link groups at release 1 now
	 * (a gauge, within link_groups); ADD LINKs refused because the group
	 * negotiated max_links 1.  The status dump shows each group's
	 * release, max_conns and max_links. */
	uint64_t link_groups_v21, add_links_refused_max;
	/* Pinned memory now (a gauge): the RMBs and send buffers allocated
	 * in every link group, used or not, in bytes, and the limit on them
	 * (SMCR_MAX_PINNED_BYTES; 0: none). */
	uint64_t pinned_bytes, max_pinned_bytes;
};
int smcr_ctx_stats_size(struct smcr_ctx *ctx, struct smcr_stats *st, size_t size);
static inline int smcr_ctx_stats(struct smcr_ctx *ctx, struct smcr_stats *st)
{
	return smcr_ctx_stats_size(ctx, st, sizeof(*st));
}
/* The decline code counted in fallback_by_reason[i] (0: other), and its
 * description. */
uint32_t smcr_stats_reason(unsigned int i);
const char *smcr_reason_str(uint32_t code);
/* Printable status: link groups, links, connections (for tools). */
int smcr_ctx_dump(struct smcr_ctx *ctx, char *buf, size_t len, bool json);

/* Fault injection, "ACTION-link=N" (link id N in every group) or
 * "ACTION-dev=NAME" (every link on RDMA device NAME), options after commas:
 *   fail     the link's QP goes into the error state now
 *   drop     the link goes silent (port up): nothing it sends leaves,
 *            what it receives waits (it was acknowledged: it is delivered
 *            when the drop ends or the link fails); after the QP's RC retry
 *            time it fails as a silent path does under load, or earlier
 *            by TEST LINK, and what it held completes as flushed;
 *            ",for=MS" lifts the drop by itself
 *   delay    ",ms=D" (required): everything the link sends leaves D ms
 *            late, in order; ",for=MS" ends it
 *   clear    ends a drop or delay now (what was held is sent, in order)
 *   undrop, undelay   the same on the links under that fault only
 * Returns how many links, -ENOENT if none, -EINVAL for a bad spec.  With
 * ",after=MS", ",every=MS" and ",count=C" it is scheduled (returns 0).
 * SMCR_FAULT at smcr_ctx_create() takes "SPEC[;SPEC]"; a spec there
 * without a time waits for its link. */
int smcr_fault(struct smcr_ctx *ctx, const char *spec);

/* Control socket (smcr/ctl.c), read by smcrctl(1): a unix stream socket
 * DIR/NAME.PID.sock served by its own thread.  A client sends one command
 * line and reads the answer up to the end of the stream; an answer that
 * starts with "error:" failed.  Commands:
 *   status         smcr_ctx_dump() text, then every section's text
 *   status-json    {"name","pid","smcr":{dump},"stats":{counters},
 *                   "sections":{NAME:{...}}}
 *   stats, stats-json   the smcr_ctx_stats() counters
 *   fault SPEC     smcr_fault(), e.g. "fault fail-link=2"
 *   anything else  offered to the sections' command hooks
 * DIR is $SMCR_CTL_DIR, else /run/smcr for root, else
 * $XDG_RUNTIME_DIR/smcr or /tmp/smcr-UID.  SMCR_CTL=0 in the environment
 * disables it (smcr_ctl_open() then gives *ctlp = NULL and 0).  ctx may be
 * NULL (a program without SMC-R still shows its sections). */
struct smcr_ctl;
int smcr_ctl_open(struct smcr_ctx *ctx, const char *name, struct smcr_ctl **ctlp);
/* Stops the thread and removes the socket.  NULL is allowed. */
void smcr_ctl_close(struct smcr_ctl *ctl);
/* Members of group gid (primary or supplementary) may change state too;
 * the socket is handed to that group (mode 0660).  0 or -errno (chown). */
int smcr_ctl_set_group(struct smcr_ctl *ctl, gid_t gid);
/* The socket's path ("" for NULL). */
const char *smcr_ctl_path(struct smcr_ctl *ctl);
/* The directory of control sockets (as above); returns buf. */
char *smcr_ctl_dir(char *buf, size_t len);
/* 0 when dir may be trusted with control sockets: a directory (not a
 * link) owned by root or by us, not writable by group or others; else
 * -EPERM (another owner, or writable), -ENOTDIR or -errno, with the
 * reason in *why (may be NULL).  smcr_ctl_open() refuses any other. */
int smcr_ctl_dir_check(const char *dir, const char **why);

/* A program's own part of the status (exports, clients, NBD connections).
 * dump writes text or one JSON value into buf, like smcr_ctx_dump(): the
 * length, or -ENOSPC when buf is too small (it is called again with a
 * larger one).  command (optional) gets command lines the control socket
 * does not know; it returns -ENOSYS if the line is not its own, else
 * writes its answer into reply and returns its length or -errno.  The
 * callbacks run on the control thread.  At most 8 sections. */
struct smcr_ctl_section {
	const char *name;
	int (*dump)(void *arg, char *buf, size_t len, bool json);
	int (*command)(void *arg, const char *line, char *reply, size_t len);
	void *arg;
};
int smcr_ctl_add_section(struct smcr_ctl *ctl, const struct smcr_ctl_section *sec);
/* Waits until no callback of that section runs. */
int smcr_ctl_remove_section(struct smcr_ctl *ctl, const char *name);

#ifdef __cplusplus
}
#endif

#endif
