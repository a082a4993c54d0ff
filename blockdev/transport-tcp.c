/* SPDX-License-Identifier: BSD-3-Clause */
/* smcrbd: the TCP transport (any connected stream socket). */
#include <config.h>

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/sendfile.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "transport.h"

struct tcp_transport {
	struct bd_transport base;
	int fd;
	bool inet;			/* TCP (not a socketpair) */
	int lowat;			/* SO_RCVLOWAT set, 0: never set */
};

static struct tcp_transport *tcp_of(struct bd_transport *t)
{
	return (struct tcp_transport *)t;
}

static ssize_t tcp_readv(struct bd_transport *t, const struct iovec *iov, int iovcnt)
{
	ssize_t n;

	do {
		if (iovcnt == 1)
			n = recv(tcp_of(t)->fd, iov[0].iov_base, iov[0].iov_len, 0);
		else
			n = readv(tcp_of(t)->fd, iov, iovcnt);
	} while (n < 0 && errno == EINTR);
	if (n < 0)
		return errno == EWOULDBLOCK ? -EAGAIN : -errno;
	return n;
}

static ssize_t tcp_writev(struct bd_transport *t, const struct iovec *iov, int iovcnt)
{
	struct msghdr msg = {
		.msg_iov = (struct iovec *)iov,
		.msg_iovlen = (size_t)iovcnt,
	};
	ssize_t n;

	do {
		n = sendmsg(tcp_of(t)->fd, &msg, MSG_NOSIGNAL);
	} while (n < 0 && errno == EINTR);
	if (n < 0)
		return errno == EWOULDBLOCK ? -EAGAIN : -errno;
	return n;
}

/* The header goes with MSG_MORE: it leaves in the same segment as the
 * start of the file data. */
static ssize_t tcp_send_file(struct bd_transport *t, const struct iovec *hdr, int hdr_cnt,
			     int fd, off_t *off, size_t len)
{
	struct msghdr msg = { .msg_iov = (struct iovec *)hdr, .msg_iovlen = (size_t)hdr_cnt };
	size_t hlen = 0;
	ssize_t n;
	int i;

	for (i = 0; i < hdr_cnt; i++)
		hlen += hdr[i].iov_len;
	if (hlen) {
		do {
			n = sendmsg(tcp_of(t)->fd, &msg, MSG_NOSIGNAL | MSG_MORE);
		} while (n < 0 && errno == EINTR);
		if (n < 0)
			return errno == EWOULDBLOCK ? -EAGAIN : -errno;
		if ((size_t)n < hlen)
			return n;
	}
	do {
		n = sendfile(tcp_of(t)->fd, fd, off, len);
	} while (n < 0 && errno == EINTR);
	if (n < 0) {
		if (hlen)
			return (ssize_t)hlen;	/* the error shows again next time */
		return errno == EWOULDBLOCK ? -EAGAIN : -errno;
	}
	return (ssize_t)hlen + n;
}

/* The kernel caps it at half the largest receive buffer and grows the
 * buffer to hold it; a FIN or an error still wakes the reader. */
static int tcp_rx_lowat(struct bd_transport *t, size_t len)
{
	struct tcp_transport *tt = tcp_of(t);
	int v = len > INT_MAX ? INT_MAX : len ? (int)len : 1;

	if (!tt->inet || v == tt->lowat || (v == 1 && !tt->lowat))
		return 0;
	if (setsockopt(tt->fd, SOL_SOCKET, SO_RCVLOWAT, &v, sizeof(v)) < 0)
		return -errno;
	tt->lowat = v;
	return 0;
}

static int tcp_poll_fd(struct bd_transport *t)
{
	return tcp_of(t)->fd;
}

static short tcp_poll_events(struct bd_transport *t, unsigned want)
{
	short ev = 0;

	if (want & BD_WANT_READ)
		ev |= POLLIN | POLLRDHUP;
	if (want & BD_WANT_WRITE)
		ev |= POLLOUT;
	return ev;
}

static int tcp_peer_addr(struct bd_transport *t, struct sockaddr_storage *ss, socklen_t *len)
{
	*len = sizeof(*ss);
	if (getpeername(tcp_of(t)->fd, (struct sockaddr *)ss, len) < 0)
		return -errno;
	return 0;
}

static int tcp_shutdown(struct bd_transport *t)
{
	if (shutdown(tcp_of(t)->fd, SHUT_WR) < 0)
		return -errno;
	return 0;
}

static void tcp_close(struct bd_transport *t)
{
	close(tcp_of(t)->fd);
	free(t);
}

static void tcp_info(struct bd_transport *t, struct bd_transport_info *info)
{
	info->kernel_tcp = true;
	info->tcp_fd = tcp_of(t)->fd;
}

static const struct bd_transport_ops tcp_ops = {
	.name = "tcp",
	.readv = tcp_readv,
	.writev = tcp_writev,
	.poll_fd = tcp_poll_fd,
	.poll_events = tcp_poll_events,
	.peer_addr = tcp_peer_addr,
	.shutdown = tcp_shutdown,
	.close = tcp_close,
	.send_file = tcp_send_file,
	.rx_lowat = tcp_rx_lowat,
	.info = tcp_info,
};

void bd_format_addr(const struct sockaddr *sa, socklen_t len, char *buf, size_t size)
{
	char host[INET6_ADDRSTRLEN] = "?";

	if (sa->sa_family == AF_INET && len >= (socklen_t)sizeof(struct sockaddr_in)) {
		const struct sockaddr_in *in = (const struct sockaddr_in *)sa;

		inet_ntop(AF_INET, &in->sin_addr, host, sizeof(host));
		snprintf(buf, size, "%s:%u", host, ntohs(in->sin_port));
	} else if (sa->sa_family == AF_INET6 &&
		   len >= (socklen_t)sizeof(struct sockaddr_in6)) {
		const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)sa;

		inet_ntop(AF_INET6, &in6->sin6_addr, host, sizeof(host));
		snprintf(buf, size, "[%s]:%u", host, ntohs(in6->sin6_port));
	} else if (sa->sa_family == AF_UNIX) {
		snprintf(buf, size, "local");
	} else {
		snprintf(buf, size, "family-%d", sa->sa_family);
	}
}

int bd_tcp_transport_new(int fd, struct bd_transport **out)
{
	struct tcp_transport *tt;
	struct sockaddr_storage ss;
	socklen_t len = sizeof(ss);
	int one = 1, fl;

	fl = fcntl(fd, F_GETFL);
	if (fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0)
		return -errno;
	tt = calloc(1, sizeof(*tt));
	if (!tt)
		return -ENOMEM;
	tt->base.ops = &tcp_ops;
	tt->fd = fd;
	if (getpeername(fd, (struct sockaddr *)&ss, &len) == 0) {
		if (ss.ss_family == AF_INET || ss.ss_family == AF_INET6) {
			setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
			tt->inet = true;
		}
		bd_format_addr((struct sockaddr *)&ss, len, tt->base.peer,
			       sizeof(tt->base.peer));
	} else {
		snprintf(tt->base.peer, sizeof(tt->base.peer), "fd-%d", fd);
	}
	*out = &tt->base;
	return 0;
}

static int connect_one(const struct addrinfo *ai, int timeout_ms)
{
	struct pollfd pfd;
	socklen_t elen = sizeof(int);
	int fd, err = 0, r;

	fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK,
		    ai->ai_protocol);
	if (fd < 0)
		return -errno;
	if (connect(fd, ai->ai_addr, ai->ai_addrlen) == 0)
		return fd;
	if (errno != EINPROGRESS) {
		err = -errno;
		goto out_close;
	}
	pfd.fd = fd;
	pfd.events = POLLOUT;
	do {
		r = poll(&pfd, 1, timeout_ms);
	} while (r < 0 && errno == EINTR);
	if (r == 0) {
		err = -ETIMEDOUT;
		goto out_close;
	}
	if (r < 0 || getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &elen) < 0) {
		err = -errno;
		goto out_close;
	}
	if (err) {
		err = -err;
		goto out_close;
	}
	return fd;
out_close:
	close(fd);
	return err;
}

/* The transport of a connect's result FD (-errno passes through). */
static int connected(int fd, struct bd_transport **out)
{
	int r;

	if (fd < 0)
		return fd;
	r = bd_tcp_transport_new(fd, out);
	if (r < 0)
		close(fd);
	return r;
}

int bd_tcp_connect(const char *host, const char *port, int timeout_ms,
		   struct bd_transport **out)
{
	struct addrinfo hints = {
		.ai_family = AF_UNSPEC,
		.ai_socktype = SOCK_STREAM,
	};
	struct addrinfo *res, *ai;
	int fd = -ECONNREFUSED, r;

	r = getaddrinfo(host, port, &hints, &res);
	if (r != 0)
		return r == EAI_SYSTEM ? -errno : -EHOSTUNREACH;
	for (ai = res; ai; ai = ai->ai_next) {
		fd = connect_one(ai, timeout_ms);
		if (fd >= 0)
			break;
	}
	freeaddrinfo(res);
	return connected(fd, out);
}

int bd_unix_connect(const char *path, int timeout_ms, struct bd_transport **out)
{
	struct sockaddr_un sun = { .sun_family = AF_UNIX };
	struct addrinfo ai = {
		.ai_family = AF_UNIX,
		.ai_socktype = SOCK_STREAM,
		.ai_addr = (struct sockaddr *)&sun,
		.ai_addrlen = sizeof(sun),
	};
	int fd;

	if (!*path)
		return -EINVAL;
	if (strlen(path) >= sizeof(sun.sun_path))
		return -ENAMETOOLONG;
	memcpy(sun.sun_path, path, strlen(path) + 1);
	fd = connect_one(&ai, timeout_ms);
	return connected(fd, out);
}
