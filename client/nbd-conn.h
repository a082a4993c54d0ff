/* SPDX-License-Identifier: BSD-3-Clause */
/* smcrbd: an NBD export as the clients use it (nbdkit plugin, smcr-fuse).
 *
 * nbdc_open() connects to an export over SMC-R (CLC first, TCP fallback
 * when RDMA is not possible) or plain TCP, with several connections when
 * the server sets the multi-conn flag.  Requests are spread over the
 * connections (the least loaded one that is up); each connection has its
 * own thread, which sends requests, reads replies and calls the
 * completion callbacks.
 *
 * Losing a connection (or the whole link group, or the server) does not
 * fail the requests on it (the RTRS model): they move to another
 * connection that is up, or wait while their connection reconnects with
 * exponential backoff (a refused connect, a server restarting, is tried
 * again within 250 ms instead), and are sent again (reads and writes at the same
 * offset are idempotent; so are FLUSH, TRIM and WRITE_ZEROES).  A request
 * that waits for a connection fails with -EIO once the timeout has passed
 * since it was submitted, however often it went out and came back
 * (lost connections, NBD_ESHUTDOWN replies, reconnects whose handshake
 * fails or never ends: an attempt, connect and handshake, takes at most
 * connect_timeout and at most the timeout, or 1 s if that is less, and
 * ends by the first deadline of the requests waiting for it).  While no
 * connection has been up for longer than the timeout, new requests fail
 * at once, and succeed again once one is back.  A reply with
 * NBD_ESHUTDOWN (server shutting down) counts as a lost connection.  A
 * connection that has requests out and receives nothing for io_timeout
 * is declared dead as well (a request out on a connection that is up
 * waits for that).  A connection lost within 1 s of coming up, or shut
 * with ESHUTDOWN, reconnects after the backoff, which keeps growing
 * while that goes on (a server that answers everything with ESHUTDOWN
 * gets a few connections a second, not thousands).
 *
 * Servers: given more than one (host:port, then servers[]), the first
 * connection goes to the first that answers.  A connection that loses
 * its server reconnects to the next one in the list (or to the one
 * another connection reached last, if that is another), and each failed
 * attempt moves on to the next again (round robin, with the backoff); a
 * connection that comes back tells the others, which try that server
 * next.  So the connections gather on one server.  The servers must serve the same data (e.g. smcrd gateways on
 * one RBD image).  TLS checks each certificate against tls_hostname,
 * else the first host.
 *
 * Errors are -errno. */
#ifndef SMCRBD_NBD_CONN_H
#define SMCRBD_NBD_CONN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

#include "nbd-proto.h"
#include "nbd-wire.h"
#include "nbdc-uri.h"

struct nbdc;
struct smcr_ctx;
struct smcr_ctl;

struct nbdc_opts {
	const char *host;			/* NBDC_UNIX: the socket's path */
	const char *port;			/* NULL: the transport's default */
	/* More servers of the same export (gateways in front of one
	 * storage), after host:port: see "Servers" above. */
	const struct nbdc_server *servers;
	unsigned nservers;			/* at most NBDC_MAX_SERVERS - 1 */
	const char *export;			/* NULL: "" */
	enum nbdc_transport transport;
	unsigned connections;			/* 0: 1; 1 if no multi-conn */
	unsigned timeout_ms;			/* 0: 30 s (see above) */
	unsigned io_timeout_ms;			/* 0: 60 s; UINT32_MAX: never */
	unsigned connect_timeout_ms;		/* each attempt, handshake
						 * included; 0: 5 s */
	/* Between failed reconnects, doubling; not for refused ones. */
	unsigned backoff_min_ms, backoff_max_ms;	/* 0: 100 ms, 5 s */
	bool read_only;				/* refuse writes here */
	/* nbdc_open returns once the first connection is up; the others
	 * connect meanwhile, each in its own thread and all at once (one
	 * whose attempt fails tries again as a lost one does, with the
	 * backoff; nbdc_open does not fail for it).  Requests go to the
	 * connections that are up. */
	bool first_up;
	/* SMC-R context to use; NULL: nbdc creates its own for SMC-R. */
	struct smcr_ctx *ctx;
	/* Status on a control socket: an existing one (ctl), or open one
	 * named ctl_name (smcr_ctl_open); neither: none. */
	struct smcr_ctl *ctl;
	const char *ctl_name;
	/* TLS (NBD_OPT_STARTTLS), on NBD over TCP or a Unix socket only:
	 * NBDC_TLS_REQUIRE fails without it, _ALLOW goes on in the clear
	 * when the server offers none.  Credentials as libnbd names them (see
	 * transport-tls.h); hostname NULL: host ("localhost" over a Unix
	 * socket). */
	int tls;
	const char *tls_certificates;
	const char *tls_psk_file;
	const char *tls_username;
	const char *tls_hostname;
	bool tls_no_verify_peer;
	/* SMC-R receive buffer per connection (with its own ctx); 0:
	 * libsmcr's choice (smcr_ctx_opts.rmbe_size). */
	uint32_t rmbe_size;
	/* Called by a connection thread at the end of each turn of its loop
	 * in which it called done callbacks (and once more after the last
	 * of them): a caller that queues what its callbacks produce can
	 * send it in one go.  Same rules as done. */
	void (*turn_end)(void *arg);
	void *turn_arg;
	/* Called by connection i's thread when the descriptor nbdc_watch()
	 * gave it is readable: requests it submits go to connection i while
	 * that is up, into its send queue (no other thread, no wake-up).
	 * Returns 0 when it read all there was, 1 when there may be more,
	 * -1 to stop watching.  Same rules as done, with turn_arg. */
	int (*watch_ready)(void *arg, unsigned conn);
	/* Traces (optional): called by connection conn's thread when a
	 * request has gone out whole, with nbdc_submit's arg; turn_arg as
	 * above. */
	void (*sent)(void *arg, void *req_arg, unsigned conn);
};
enum { NBDC_TLS_OFF = 0, NBDC_TLS_ALLOW, NBDC_TLS_REQUIRE };

/* Connects every connection once (failing if any does not come up;
 * first_up: the first) and starts their threads.  Call it in the process that does the I/O (after
 * any fork).  -ENXIO: the server has no such export; TLS: -EPERM the
 * server requires it, -ENOPROTOOPT the server offers none, -EKEYREJECTED
 * its certificate is not trusted, -ENOKEY it refused our credentials,
 * -EPROTONOSUPPORT TLS asked for over SMC-R. */
int nbdc_open(const struct nbdc_opts *opts, struct nbdc **out);
/* Same, from a URI; opts (may be NULL) give the other settings (TLS
 * ones too; the URI's nbds:// and query string win). */
int nbdc_open_uri(const char *uri, const struct nbdc_opts *opts, struct nbdc **out);
/* The one-line message every client prints for nbdc_open's err, e.g.
 * "smcrd at HOST:PORT has no export 'NAME'". */
void nbdc_strerror(const struct nbdc_opts *opts, int err, char *buf, size_t len);
/* The URI's address, export and TLS settings into o (they point into u). */
void nbdc_opts_from_uri(struct nbdc_opts *o, const struct nbdc_uri *u);
/* Lets requests still out finish (a few seconds at most), fails what is
 * left with -ESHUTDOWN, sends NBD_CMD_DISC and frees everything.  No
 * other call may run at the same time or later. */
void nbdc_close(struct nbdc *e);

uint64_t nbdc_size(struct nbdc *e);
uint16_t nbdc_flags(struct nbdc *e);		/* transmission flags */
bool nbdc_read_only(struct nbdc *e);
unsigned nbdc_connections(struct nbdc *e);
/* Largest READ/WRITE payload of one request (nbdc_submit). */
uint32_t nbdc_max_request(struct nbdc *e);
/* Block sizes the server advertised (0: none). */
void nbdc_block_size(struct nbdc *e, uint32_t *min, uint32_t *pref, uint32_t *max);
/* The SMC-R context in use (NULL over TCP). */
struct smcr_ctx *nbdc_smcr_ctx(struct nbdc *e);

/* Asynchronous requests.  type is NBD_CMD_READ, WRITE, FLUSH, TRIM,
 * WRITE_ZEROES, CACHE or BLOCK_STATUS; flags are NBD_CMD_FLAG_*; buf
 * (READ, WRITE; a struct nbdc_extents for BLOCK_STATUS) must stay valid
 * until done is called.  On success (0) done is called
 * exactly once, on a connection thread, with 0 or -errno; it must not
 * block for long nor call nbdc_close, and may submit more requests.
 * Errors returned at once: -EINVAL, -EROFS (read-only), -ENOTSUP (the
 * server does not offer the command), -EIO (no connection for longer
 * than the timeout), -ESHUTDOWN (closing). */
typedef void (*nbdc_done_fn)(void *arg, int result);
int nbdc_submit(struct nbdc *e, uint16_t type, uint16_t flags, uint64_t offset,
		uint32_t len, void *buf, nbdc_done_fn done, void *arg);

/* A READ whose data is handed over where it landed: sink(arg, at, iov, n)
 * is called on the connection thread with the bytes that belong at at
 * (inside buf) as they arrive: in place in the transport's receive buffer
 * where it has one (SMC-R's RMBE), else from buf, which must be len
 * bytes as for nbdc_submit.  The iovecs are valid during the call only.
 * The same bytes may come again (the READ sent again after a lost
 * connection), and a hole comes as zeros.  A sink returns 0, or -errno to
 * fail the READ (done gets that error).  Otherwise as nbdc_submit. */
typedef int (*nbdc_sink_fn)(void *arg, uint8_t *at, const struct iovec *iov, int n);
int nbdc_submit_read(struct nbdc *e, uint64_t offset, uint32_t len, void *buf,
		     nbdc_sink_fn sink, nbdc_done_fn done, void *arg);

/* A WRITE whose data is fetched where it goes: source(arg, at, iov, n) is
 * called on the connection thread, as the request goes out, to fill the
 * iovecs with the bytes that belong at at (inside buf): in place in the
 * transport's send buffer where it lends one (SMC-R), else in buf, which
 * must be len bytes as for nbdc_submit.  It may be called again for the
 * same bytes (the WRITE sent again after a lost connection) and must give
 * the same data.  A source returns 0, or -errno to fail the WRITE before
 * any of it is sent (done gets that error).  Otherwise as nbdc_submit. */
typedef int (*nbdc_source_fn)(void *arg, uint8_t *at, const struct iovec *iov, int n);
int nbdc_submit_write(struct nbdc *e, uint16_t flags, uint64_t offset, uint32_t len,
		      void *buf, nbdc_source_fn source, nbdc_done_fn done, void *arg);

/* Has connection conn's thread poll fd (readable) beside its transport
 * and call watch_ready (nbdc_opts) when it is: a caller with one stream
 * per connection reads it in that connection's thread.  The caller keeps
 * fd open until nbdc_close().  -EINVAL without watch_ready. */
int nbdc_watch(struct nbdc *e, unsigned conn, int fd);

/* Between nbdc_plug() and nbdc_unplug(), nbdc_submit() in this thread
 * queues requests without waking their connections; nbdc_unplug() wakes
 * each of them once, so it sends them together.  Not in done. */
void nbdc_plug(struct nbdc *e);
void nbdc_unplug(struct nbdc *e);

/* BLOCK_STATUS's buf: room for max extents, n of them filled (starting
 * at the request's offset, never past its length) when done gets 0. */
struct nbdc_extents {
	struct nbd_extent *ext;
	unsigned max, n;
};
/* Whether the server gave base:allocation (NBD_CMD_BLOCK_STATUS). */
bool nbdc_can_block_status(struct nbdc *e);
/* Blocking BLOCK_STATUS of [offset, offset + len): *n extents into ext
 * (at most max; they may cover less than len).  -ENOTSUP: the server (or
 * the connection it went to, after a reconnect) has no base:allocation. */
int nbdc_block_status(struct nbdc *e, uint32_t len, uint64_t offset, uint16_t flags,
		      struct nbd_extent *ext, unsigned max, unsigned *n);

/* Blocking calls of any length (split into requests sent in parallel). */
int nbdc_pread(struct nbdc *e, void *buf, size_t len, uint64_t offset, uint16_t flags);
int nbdc_pwrite(struct nbdc *e, const void *buf, size_t len, uint64_t offset,
		uint16_t flags);
int nbdc_flush(struct nbdc *e, uint16_t flags);
int nbdc_trim(struct nbdc *e, uint64_t len, uint64_t offset, uint16_t flags);
int nbdc_zero(struct nbdc *e, uint64_t len, uint64_t offset, uint16_t flags);
int nbdc_cache(struct nbdc *e, uint64_t len, uint64_t offset, uint16_t flags);

struct nbdc_stats {
	uint64_t requests;		/* submitted */
	uint64_t completed;		/* done called (with any result) */
	uint64_t errors;		/* ... with an error */
	uint64_t bytes_read, bytes_written;
	uint64_t reconnects;		/* connections that came back */
	uint64_t reconnect_failures;	/* attempts that failed */
	uint64_t connections_lost;
	uint64_t resent;		/* requests sent again after a loss */
	uint64_t timed_out;		/* failed after the timeout */
	uint64_t writes_in_place;	/* sourced WRITEs put in the send buffer */
	unsigned inflight;		/* submitted, not yet done */
	unsigned connections_up;
};
void nbdc_get_stats(struct nbdc *e, struct nbdc_stats *st);

/* Connection conn's last connect, on now_ms()'s clock (0: not yet): the
 * attempt began, the transport was connected (SMC-R: CLC and the link
 * done), the NBD handshake was done, the connection was up. */
struct nbdc_conn_times {
	int64_t attempt_ms, transport_ms, handshake_ms, up_ms;
};
int nbdc_conn_times(struct nbdc *e, unsigned conn, struct nbdc_conn_times *t);
/* Status text or JSON, like smcr_ctx_dump(): length or -ENOSPC. */
int nbdc_dump(struct nbdc *e, char *buf, size_t len, bool json);

/* Fault injection (tests, "nbd drop" on the control socket): drops
 * every connection as if the server had gone away; they reconnect. */
void nbdc_drop_connections(struct nbdc *e);

#endif
