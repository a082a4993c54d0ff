/* SPDX-License-Identifier: BSD-3-Clause */
/* smcrbd: the SMC-R transport: an NBD byte stream over a libsmcr socket.
 *
 * Data moves through the connection's own buffers: readv copies out of the
 * receive RMBE (peek + consume), writev copies into the send buffer that
 * mirrors the peer's RMBE (reserve + commit: one RDMA write and one CDC per
 * call, however many iovecs).  The zero-copy hooks hand those same buffers
 * to the caller.  A socket that fell back to TCP becomes a plain TCP
 * transport on the same connection. */
#include <config.h>

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <netdb.h>
#include <unistd.h>

#include "smcr.h"
#include "transport.h"
#include "transport-smcr.h"

struct smcr_transport {
	struct bd_transport base;
	struct smcr_sock *s;
};

static struct smcr_transport *st_of(struct bd_transport *t)
{
	return (struct smcr_transport *)t;
}

/* Copy between an iovec array and up to two buffer pieces. */
static size_t iov_copy(const struct iovec *iov, int iovcnt, const struct iovec piece[2],
		       size_t max, bool to_pieces)
{
	size_t done = 0, pi = 0, poff = 0;
	int i;

	for (i = 0; i < iovcnt && done < max; i++) {
		size_t ioff = 0;

		while (ioff < iov[i].iov_len && done < max && pi < 2) {
			size_t n = iov[i].iov_len - ioff;

			if (n > piece[pi].iov_len - poff)
				n = piece[pi].iov_len - poff;
			if (n > max - done)
				n = max - done;
			if (to_pieces)
				memcpy((uint8_t *)piece[pi].iov_base + poff,
				       (const uint8_t *)iov[i].iov_base + ioff, n);
			else
				memcpy((uint8_t *)iov[i].iov_base + ioff,
				       (const uint8_t *)piece[pi].iov_base + poff, n);
			ioff += n;
			poff += n;
			done += n;
			if (poff == piece[pi].iov_len) {
				pi++;
				poff = 0;
			}
		}
	}
	return done;
}

static size_t iov_total(const struct iovec *iov, int iovcnt)
{
	size_t n = 0;
	int i;

	for (i = 0; i < iovcnt; i++)
		n += iov[i].iov_len;
	return n;
}

/* Nothing moved: clear the wake-up fd, then look again, so that a change
 * racing with us leaves the fd readable. */
static bool still_blocked(struct smcr_transport *st, unsigned int ev)
{
	return !(smcr_sock_events(st->s) & (ev | SMCR_EV_ERR | SMCR_EV_HUP));
}

static ssize_t smcr_t_readv(struct bd_transport *t, const struct iovec *iov, int iovcnt)
{
	struct smcr_transport *st = st_of(t);
	struct iovec piece[2];
	ssize_t avail;
	size_t n;
	int tries;

	for (tries = 0; tries < 2; tries++) {
		avail = smcr_peek(st->s, piece, SMCR_DONTWAIT);
		if (avail > 0) {
			n = iov_copy(iov, iovcnt, piece, (size_t)avail, false);
			avail = smcr_consume(st->s, n);
			return avail ? avail : (ssize_t)n;
		}
		/* End of stream, or an error. */
		if (avail != -EAGAIN)
			return avail;
		if (still_blocked(st, SMCR_EV_IN))
			return -EAGAIN;
	}
	return -EAGAIN;
}

static ssize_t smcr_t_writev(struct bd_transport *t, const struct iovec *iov, int iovcnt)
{
	struct smcr_transport *st = st_of(t);
	struct iovec piece[2];
	size_t want = iov_total(iov, iovcnt), n;
	ssize_t space;
	int tries, ret;

	for (tries = 0; tries < 2; tries++) {
		space = smcr_reserve(st->s, piece, SMCR_DONTWAIT);
		if (space > 0) {
			n = iov_copy(iov, iovcnt, piece, (size_t)space < want ?
				     (size_t)space : want, true);
			ret = smcr_commit(st->s, n);
			return ret ? ret : (ssize_t)n;
		}
		if (space != -EAGAIN)
			return space;
		if (still_blocked(st, SMCR_EV_OUT))
			return -EAGAIN;
	}
	return -EAGAIN;
}

static int smcr_t_poll_fd(struct bd_transport *t)
{
	return smcr_sock_fd(st_of(t)->s);
}

static short smcr_t_poll_events(struct bd_transport *t, unsigned want)
{
	/* The fd is an eventfd: readable means "look again", whichever
	 * direction is wanted. */
	(void)t;
	(void)want;
	return POLLIN;
}

static int smcr_t_peer_addr(struct bd_transport *t, struct sockaddr_storage *ss,
			    socklen_t *len)
{
	*len = sizeof(*ss);
	return smcr_getpeername(st_of(t)->s, (struct sockaddr *)ss, len);
}

static int smcr_t_shutdown(struct bd_transport *t)
{
	return smcr_shutdown(st_of(t)->s, SHUT_WR);
}

static void smcr_t_close(struct bd_transport *t)
{
	smcr_close(st_of(t)->s);
	free(t);
}

static ssize_t smcr_t_rx_peek(struct bd_transport *t, struct iovec iov[2])
{
	struct smcr_transport *st = st_of(t);
	ssize_t n = smcr_peek(st->s, iov, SMCR_DONTWAIT);

	if (n == -EAGAIN && !still_blocked(st, SMCR_EV_IN))
		n = smcr_peek(st->s, iov, SMCR_DONTWAIT);
	return n;
}

static int smcr_t_rx_consume(struct bd_transport *t, size_t len)
{
	return smcr_consume(st_of(t)->s, len);
}

static int smcr_t_tx_reserve(struct bd_transport *t, size_t len, struct iovec iov[2])
{
	struct smcr_transport *st = st_of(t);
	int ret = smcr_reserve_len(st->s, len, iov, SMCR_DONTWAIT);

	if (ret == -EAGAIN)
		still_blocked(st, SMCR_EV_OUT);
	return ret;
}

static int smcr_t_tx_commit(struct bd_transport *t, size_t len)
{
	return smcr_commit(st_of(t)->s, len);
}

static int smcr_t_tx_unreserve(struct bd_transport *t, size_t len)
{
	return smcr_unreserve(st_of(t)->s, len);
}

static int smcr_t_rx_waiting(struct bd_transport *t, bool request)
{
	return smcr_cursor_update(st_of(t)->s, request ? SMCR_CURSOR_REQUEST : 0);
}

static void smcr_t_woken(struct bd_transport *t)
{
	(void)smcr_sock_events(st_of(t)->s);
}

static void smcr_t_info(struct bd_transport *t, struct bd_transport_info *info)
{
	info->smcr = st_of(t)->s;
}

/* A connection given up as lost: no waiting for the peer's close. */
static void smcr_t_abort(struct bd_transport *t)
{
	smcr_abort(st_of(t)->s);
	free(t);
}

static const struct bd_transport_ops smcr_ops = {
	.name = "smcr",
	.readv = smcr_t_readv,
	.writev = smcr_t_writev,
	.poll_fd = smcr_t_poll_fd,
	.poll_events = smcr_t_poll_events,
	.peer_addr = smcr_t_peer_addr,
	.shutdown = smcr_t_shutdown,
	.close = smcr_t_close,
	.rx_peek = smcr_t_rx_peek,
	.rx_consume = smcr_t_rx_consume,
	.tx_reserve = smcr_t_tx_reserve,
	.tx_commit = smcr_t_tx_commit,
	.tx_unreserve = smcr_t_tx_unreserve,
	.rx_waiting = smcr_t_rx_waiting,
	.woken = smcr_t_woken,
	.info = smcr_t_info,
	.abort = smcr_t_abort,
};

int bd_smcr_transport_new(struct smcr_sock *s, struct bd_transport **out)
{
	struct smcr_transport *st;
	struct smcr_sock_info info;
	struct sockaddr_storage ss;
	socklen_t len = sizeof(ss);
	int fd, ret;

	ret = smcr_sock_info(s, &info);
	if (ret)
		return ret;
	if (!info.smc) {
		/* Fallen back: the same connection as a TCP transport. */
		fd = dup(smcr_sock_tcp_fd(s));
		if (fd < 0)
			return -errno;
		ret = bd_tcp_transport_new(fd, out);
		if (ret) {
			close(fd);
			return ret;
		}
		smcr_close(s);
		return 0;
	}
	st = calloc(1, sizeof(*st));
	if (!st)
		return -ENOMEM;
	st->base.ops = &smcr_ops;
	st->s = s;
	if (smcr_getpeername(s, (struct sockaddr *)&ss, &len) == 0)
		bd_format_addr((struct sockaddr *)&ss, len, st->base.peer,
			       sizeof(st->base.peer));
	*out = &st->base;
	return 0;
}

int bd_smcr_connect(struct smcr_ctx *ctx, const char *host, const char *port,
		    int timeout_ms, struct bd_transport **out)
{
	struct addrinfo hints = { .ai_socktype = SOCK_STREAM }, *ai, *a;
	struct smcr_sock *s = NULL;
	int ret;

	ret = getaddrinfo(host, port, &hints, &ai);
	if (ret)
		return ret == EAI_NONAME ? -ENOENT : -EINVAL;
	ret = -ECONNREFUSED;
	for (a = ai; a; a = a->ai_next) {
		ret = smcr_connect_timeout(ctx, a->ai_addr, a->ai_addrlen, timeout_ms, &s);
		if (ret == 0)
			break;
	}
	freeaddrinfo(ai);
	if (ret)
		return ret;
	ret = bd_smcr_transport_new(s, out);
	if (ret)
		smcr_close(s);
	return ret;
}
