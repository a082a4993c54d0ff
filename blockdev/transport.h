/* SPDX-License-Identifier: BSD-3-Clause */
/* smcrbd: the one byte-stream interface the NBD code runs on.
 *
 * A transport is a connected, reliable, ordered byte stream in non-blocking
 * mode: a TCP socket (transport-tcp.c), TLS over one (transport-tls.c) or
 * an SMC-R connection (transport-smcr.c, on libsmcr).  Code above it
 * (handshake, client, the smcrd engine) moves bytes with readv/writev and
 * sleeps in poll(2) (or an io_uring poll) on poll_fd() until progress may
 * be possible.  It calls the ops through the bd_* wrappers below only (an
 * optional op that is absent gives -EOPNOTSUPP; bd_has() says which are
 * there), and asks what lies underneath in one way, bd_info(): the name
 * (logs; smcrd offers TLS on plain TCP only), the kernel TCP socket of a
 * plain TCP transport (smcrd's engine receives from it with io_uring) and
 * the libsmcr socket of an SMC-R one (the client engine's link status).
 *
 * Required ops: readv, writev, poll_fd, poll_events, close.
 *
 * Optional zero-copy ops, for transports whose bytes already sit in memory
 * the engine can hand to io_uring (SMC-R: the receive RMBE and the send
 * buffer, both registered memory):
 *
 *   rx_peek/rx_consume: look at received bytes in place (at most two
 *     pieces when the ring buffer wraps) and release them later, in
 *     order.  An NBD WRITE payload is written to disk straight out of the
 *     RMBE, and consumed (window given back to the peer) when the disk
 *     write completes.
 *   tx_reserve/tx_commit: reserve the next len bytes of the send stream
 *     (at most two pieces), fill them (e.g. io_uring reads file data
 *     into them), and commit reservations in the order they were made.
 *     While reservations are outstanding the caller must not call writev.
 *     tx_unreserve gives the newest back when it cannot be filled.
 *   send_file: put file data on the stream straight from the page cache
 *     (TCP: sendfile(2)), for large READ replies.
 *
 * Optional rx_lowat: how much must arrive before a wake-up is worth it.
 *
 * All functions return -errno on failure; none of them blocks. */
#ifndef SMCRBD_TRANSPORT_H
#define SMCRBD_TRANSPORT_H

#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/uio.h>

struct bd_transport;
struct bd_transport_info;
struct smcr_sock;

/* What the caller waits for; poll_events maps it to poll(2) events. */
#define BD_WANT_READ	1u
#define BD_WANT_WRITE	2u

struct bd_transport_ops {
	const char *name;			/* "tcp", "smcr" */

	/* Moves bytes.  Returns the count (> 0), 0 at the end of the
	 * stream (readv only), -EAGAIN if nothing can move now, or -errno. */
	ssize_t (*readv)(struct bd_transport *t, const struct iovec *iov, int iovcnt);
	ssize_t (*writev)(struct bd_transport *t, const struct iovec *iov, int iovcnt);

	/* The descriptor to poll, and the poll(2) events that mean the
	 * wanted direction(s) may progress.  The descriptor stays the same
	 * for the life of the transport. */
	int (*poll_fd)(struct bd_transport *t);
	short (*poll_events)(struct bd_transport *t, unsigned want);

	/* Address of the peer (for export ACLs and logs).  Optional. */
	int (*peer_addr)(struct bd_transport *t, struct sockaddr_storage *ss,
			 socklen_t *len);
	/* Ends the sending direction after queued bytes (orderly close).
	 * Optional. */
	int (*shutdown)(struct bd_transport *t);
	/* Closes and frees the transport. */
	void (*close)(struct bd_transport *t);

	/* --- optional zero-copy receive ---------------------------------
	 * Fills up to two iovecs with the received, unconsumed bytes from
	 * the oldest on; returns their total (> 0), 0 at the end of the
	 * stream, -EAGAIN if none, or -errno.  The memory stays valid and
	 * unchanged until consumed. */
	ssize_t (*rx_peek)(struct bd_transport *t, struct iovec iov[2]);
	/* Releases the oldest len bytes. */
	int (*rx_consume)(struct bd_transport *t, size_t len);

	/* --- optional zero-copy send ------------------------------------
	 * Reserves the next len bytes of the stream in up to two iovecs.
	 * -EAGAIN: no room now (poll for BD_WANT_WRITE); -EMSGSIZE: len can
	 * never fit (use writev). */
	int (*tx_reserve)(struct bd_transport *t, size_t len, struct iovec iov[2]);
	/* Sends the oldest outstanding reservation, which must be len
	 * bytes long. */
	int (*tx_commit)(struct bd_transport *t, size_t len);
	/* Gives back the newest reservation, len bytes, unsent. */
	int (*tx_unreserve)(struct bd_transport *t, size_t len);

	/* --- optional: file data without a copy -------------------------
	 * Sends the hdr_cnt iovecs of hdr (may be none), then up to len
	 * bytes of file fd from *off (advanced), like writev: the count of
	 * bytes sent (header ones included), -EAGAIN, or -errno; 0 if the
	 * file ends before anything was sent. */
	ssize_t (*send_file)(struct bd_transport *t, const struct iovec *hdr, int hdr_cnt,
			     int fd, off_t *off, size_t len);

	/* --- optional: wake-up threshold ---------------------------------
	 * The caller can do nothing useful before len more bytes have
	 * arrived (the rest of a large WRITE payload): poll_fd may stay
	 * quiet until then, or until the stream ends (TCP: SO_RCVLOWAT),
	 * instead of waking up for every segment.  len 1 resets it. */
	int (*rx_lowat)(struct bd_transport *t, size_t len);
	/* --- optional: the reader is about to wait ----------------------
	 * Tell the peer how far we have read if that moved since we last
	 * said (SMC-R: a CDC with the consumer cursor); with request, say
	 * it anyway and ask for the peer's (a sender holding corked bytes,
	 * Linux's AF_SMC, sends them on either).  Returns 1 if something
	 * went out, 0 if nothing was due, or -errno. */
	int (*rx_waiting)(struct bd_transport *t, bool request);
	/* --- optional: poll_fd turned readable ---------------------------
	 * Take in this thread what woke it (SMC-R with caller-driven
	 * progress: the link's completions), whatever the caller does next. */
	void (*woken)(struct bd_transport *t);

	/* --- optional: what lies underneath (bd_info() fills the rest) --- */
	void (*info)(struct bd_transport *t, struct bd_transport_info *info);
	/* --- optional: reset instead of an orderly close ----------------
	 * Frees the transport like close, without waiting for the peer
	 * (SMC-R: smcr_abort()).  Absent: bd_abort() closes. */
	void (*abort)(struct bd_transport *t);
};

/* What a transport is (bd_info()); the one way the code above asks. */
struct bd_transport_info {
	const char *name;		/* "tcp", "tls", "smcr" */
	/* poll_fd() is a kernel TCP socket (tcp, tls): SIOCOUTQ works. */
	bool kernel_tcp;
	int tcp_fd;			/* plain TCP's socket, else -1 */
	struct smcr_sock *smcr;		/* SMC-R's libsmcr socket, else NULL */
};

struct bd_transport {
	const struct bd_transport_ops *ops;
	char peer[64];				/* printable peer, for logs */
	void *tls;				/* TLS state (transport-tls.c) */
};

static inline ssize_t bd_readv(struct bd_transport *t, const struct iovec *iov, int n)
{
	return t->ops->readv(t, iov, n);
}

static inline ssize_t bd_writev(struct bd_transport *t, const struct iovec *iov, int n)
{
	return t->ops->writev(t, iov, n);
}

static inline int bd_poll_fd(struct bd_transport *t)
{
	return t->ops->poll_fd(t);
}

static inline short bd_poll_events(struct bd_transport *t, unsigned want)
{
	return t->ops->poll_events(t, want);
}

static inline void bd_close(struct bd_transport *t)
{
	if (t)
		t->ops->close(t);
}

int bd_peer_addr(struct bd_transport *t, struct sockaddr_storage *ss, socklen_t *len);
int bd_shutdown(struct bd_transport *t);
struct bd_transport_info bd_info(struct bd_transport *t);
/* Resets and frees t (the abort op), or closes it; NULL is allowed. */
void bd_abort(struct bd_transport *t);

/* --- the optional ops: -EOPNOTSUPP when absent -------------------------- */
#define BD_HAS_ZC_RX		0x1u	/* rx_peek and rx_consume */
#define BD_HAS_ZC_TX		0x2u	/* tx_reserve and tx_commit */
#define BD_HAS_SEND_FILE	0x4u
#define BD_HAS_RX_LOWAT		0x8u
#define BD_HAS_RX_WAITING	0x10u
#define BD_HAS_TX_UNRESERVE	0x20u

/* True when t has every op of what (BD_HAS_*). */
static inline bool bd_has(struct bd_transport *t, unsigned what)
{
	const struct bd_transport_ops *o = t->ops;
	unsigned has = (o->rx_peek && o->rx_consume ? BD_HAS_ZC_RX : 0) |
		       (o->tx_reserve && o->tx_commit ? BD_HAS_ZC_TX : 0) |
		       (o->send_file ? BD_HAS_SEND_FILE : 0) |
		       (o->rx_lowat ? BD_HAS_RX_LOWAT : 0) |
		       (o->rx_waiting ? BD_HAS_RX_WAITING : 0) |
		       (o->tx_unreserve ? BD_HAS_TX_UNRESERVE : 0);

	return (has & what) == what;
}

static inline ssize_t bd_rx_peek(struct bd_transport *t, struct iovec iov[2])
{
	return t->ops->rx_peek ? t->ops->rx_peek(t, iov) : -EOPNOTSUPP;
}

static inline int bd_rx_consume(struct bd_transport *t, size_t len)
{
	return t->ops->rx_consume ? t->ops->rx_consume(t, len) : -EOPNOTSUPP;
}

static inline int bd_tx_reserve(struct bd_transport *t, size_t len, struct iovec iov[2])
{
	return t->ops->tx_reserve ? t->ops->tx_reserve(t, len, iov) : -EOPNOTSUPP;
}

static inline int bd_tx_commit(struct bd_transport *t, size_t len)
{
	return t->ops->tx_commit ? t->ops->tx_commit(t, len) : -EOPNOTSUPP;
}

static inline int bd_tx_unreserve(struct bd_transport *t, size_t len)
{
	return t->ops->tx_unreserve ? t->ops->tx_unreserve(t, len) : -EOPNOTSUPP;
}

static inline ssize_t bd_send_file(struct bd_transport *t, const struct iovec *hdr,
				   int hdr_cnt, int fd, off_t *off, size_t len)
{
	return t->ops->send_file ? t->ops->send_file(t, hdr, hdr_cnt, fd, off, len)
				 : -EOPNOTSUPP;
}

static inline int bd_rx_lowat(struct bd_transport *t, size_t len)
{
	return t->ops->rx_lowat ? t->ops->rx_lowat(t, len) : -EOPNOTSUPP;
}

static inline int bd_rx_waiting(struct bd_transport *t, bool request)
{
	return t->ops->rx_waiting ? t->ops->rx_waiting(t, request) : -EOPNOTSUPP;
}

static inline void bd_woken(struct bd_transport *t)
{
	if (t->ops->woken)
		t->ops->woken(t);
}

/* --- blocking helpers (handshakes, the client half) ---------------------
 * timeout_ms < 0 waits forever; cancel_fd >= 0 aborts the wait with
 * -ECANCELED when it becomes readable.  -ETIMEDOUT on timeout. */
int bd_wait(struct bd_transport *t, unsigned want, int timeout_ms, int cancel_fd);
/* Reads exactly len bytes; -ECONNRESET if the stream ends first. */
int bd_read_full(struct bd_transport *t, void *buf, size_t len, int timeout_ms,
		 int cancel_fd);
/* The same, with an overall deadline as well (a time on
 * CLOCK_MONOTONIC in ms; 0: none): each wait is cut to what is left of it, so a peer
 * that trickles a byte now and then cannot stretch the read past it. */
int bd_read_full_by(struct bd_transport *t, void *buf, size_t len, int timeout_ms,
		    int64_t deadline, int cancel_fd);
/* Reads and drops len bytes. */
int bd_skip_full(struct bd_transport *t, size_t len, int timeout_ms, int cancel_fd);
/* Writes all of iov (the array is not modified). */
int bd_writev_full(struct bd_transport *t, const struct iovec *iov, int iovcnt,
		   int timeout_ms, int cancel_fd);
int bd_write_full(struct bd_transport *t, const void *buf, size_t len, int timeout_ms,
		  int cancel_fd);
int bd_writev_full_by(struct bd_transport *t, const struct iovec *iov, int iovcnt,
		      int timeout_ms, int64_t deadline, int cancel_fd);

/* --- TCP ---------------------------------------------------------------- */

/* Wraps a connected stream socket (TCP, or a socketpair in tests): sets it
 * non-blocking and TCP_NODELAY (where applicable).  Takes ownership of fd
 * on success. */
int bd_tcp_transport_new(int fd, struct bd_transport **out);
/* Connects to host:port (numeric or name) and wraps the socket. */
int bd_tcp_connect(const char *host, const char *port, int timeout_ms,
		   struct bd_transport **out);
/* Connects to the Unix stream socket at path and wraps it (the same
 * transport as TCP's). */
int bd_unix_connect(const char *path, int timeout_ms, struct bd_transport **out);

/* Formats a socket address as "1.2.3.4:5" / "[::1]:5". */
void bd_format_addr(const struct sockaddr *sa, socklen_t len, char *buf, size_t size);

#endif
