/* SPDX-License-Identifier: BSD-3-Clause */
/* smcrd --metrics-listen: GET /metrics over HTTP/1.0 and 1.1, one request
 * per connection (Connection: close), from one thread with a poll loop.
 *
 * What a scraper can cost: METRICS_CONNS connections at once, each with at
 * most METRICS_REQ_MAX bytes of request and METRICS_TIMEOUT_MS from accept
 * to the last byte of the reply; beyond that it is closed.  A new
 * connection when all are taken replaces the one that has waited longest
 * for its request, so silent or trickling clients (slow loris) do not lock
 * a scraper out.  Nothing here takes a lock of the daemon but the body
 * callback's (the status dump's, as for smcrctl). */
#include <config.h>

#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/socket.h>

#include "applog.h"
#include "monotime.h"
#include "smcrd-metrics.h"

struct mconn {
	int fd;				/* -1: free */
	int64_t born, deadline;		/* ms */
	char req[METRICS_REQ_MAX];
	size_t rlen;
	char *out;			/* the reply, once the request is in */
	size_t olen, off;
};

struct metrics {
	int lfd;
	int stop[2];			/* pipe: a byte stops the thread */
	pthread_t thread;
	metrics_body_fn body;
	void *arg;
	struct mconn c[METRICS_CONNS];
};

/* "PORT", "ADDR:PORT", "[V6]:PORT" into host and port. */
static int split_spec(const char *spec, char *host, size_t hlen, char *port, size_t plen)
{
	const char *colon, *h = spec;
	size_t n;

	if (!*spec)
		return -EINVAL;
	if (*spec == '[') {
		const char *end = strchr(spec, ']');

		if (!end || end[1] != ':')
			return -EINVAL;
		h = spec + 1;
		n = (size_t)(end - h);
		colon = end + 1;
	} else {
		colon = strrchr(spec, ':');
		if (colon && memchr(spec, ':', (size_t)(colon - spec)))
			return -EINVAL;		/* bare IPv6: use brackets */
		n = colon ? (size_t)(colon - spec) : 0;
	}
	if (colon && n == 0)
		return -EINVAL;
	if (n >= hlen)
		return -ENAMETOOLONG;
	if (colon) {
		memcpy(host, h, n);
		host[n] = '\0';
	} else {
		snprintf(host, hlen, "127.0.0.1");	/* a port alone: loopback */
	}
	snprintf(port, plen, "%s", colon ? colon + 1 : spec);
	n = strspn(port, "0123456789");
	if (!*port || port[n] || n > 5 || atoi(port) < 1 || atoi(port) > 65535)
		return -EINVAL;
	return 0;
}

int metrics_listen(const char *spec)
{
	struct addrinfo hints = {
		.ai_family = AF_UNSPEC,
		.ai_socktype = SOCK_STREAM,
		.ai_flags = AI_PASSIVE | AI_NUMERICSERV,
	};
	struct addrinfo *res, *ai;
	char host[256], port[16];
	int fd = -EADDRNOTAVAIL, one = 1, r;

	if (split_spec(spec, host, sizeof(host), port, sizeof(port)) < 0) {
		log_err("metrics-listen %s: not PORT, ADDR:PORT or [IPV6]:PORT", spec);
		return -EINVAL;
	}
	r = getaddrinfo(host, port, &hints, &res);
	if (r) {
		log_err("metrics-listen %s: %s", spec, gai_strerror(r));
		return -EADDRNOTAVAIL;
	}
	for (ai = res; ai; ai = ai->ai_next) {
		fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
		if (fd < 0) {
			fd = -errno;
			continue;
		}
		setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
		if (bind(fd, ai->ai_addr, ai->ai_addrlen) == 0 && listen(fd, 16) == 0)
			break;
		r = -errno;
		close(fd);
		fd = r;
	}
	freeaddrinfo(res);
	if (fd < 0)
		log_err("metrics-listen %s: %s", spec, strerror(-fd));
	else
		log_info("serving metrics over HTTP on %s (GET /metrics)", spec);
	return fd;
}

static void conn_close(struct mconn *c)
{
	if (c->fd < 0)
		return;
	close(c->fd);
	c->fd = -1;
	free(c->out);
	c->out = NULL;
	c->rlen = c->olen = c->off = 0;
}

static void set_reply(struct mconn *c, const char *status, const char *type, const char *extra,
		      const char *body, size_t blen)
{
	char head[256];
	int n;

	n = snprintf(head, sizeof(head),
		     "HTTP/1.1 %s\r\nContent-Type: %s\r\nContent-Length: %zu\r\n%s"
		     "Connection: close\r\n\r\n", status, type, blen, extra);
	c->out = malloc((size_t)n + blen);
	if (!c->out) {
		conn_close(c);
		return;
	}
	memcpy(c->out, head, (size_t)n);
	memcpy(c->out + n, body, blen);
	c->olen = (size_t)n + blen;
	c->off = 0;
}

static void set_error(struct mconn *c, const char *status)
{
	char body[80];
	int n = snprintf(body, sizeof(body), "%s\n", status);

	set_reply(c, status, "text/plain; charset=utf-8",
		  !strncmp(status, "405", 3) ? "Allow: GET, HEAD\r\n" : "", body, (size_t)n);
}

/* The request line and headers are in: the reply. */
static void answer(struct metrics *m, struct mconn *c)
{
	char method[8], target[256], version[16];
	size_t blen = 0;
	char *body, *q;
	bool head;

	c->req[c->rlen] = '\0';
	if (sscanf(c->req, "%7s %255s %15s", method, target, version) != 3 ||
	    strncmp(version, "HTTP/1.", 7)) {
		set_error(c, "400 Bad Request");
		return;
	}
	head = !strcmp(method, "HEAD");
	if (strcmp(method, "GET") && !head) {
		set_error(c, "405 Method Not Allowed");
		return;
	}
	q = strchr(target, '?');
	if (q)
		*q = '\0';
	if (strcmp(target, "/metrics")) {
		set_error(c, "404 Not Found");
		return;
	}
	body = m->body(m->arg, &blen);
	if (!body) {
		set_error(c, "503 Service Unavailable");
		return;
	}
	set_reply(c, "200 OK", "text/plain; version=0.0.4; charset=utf-8", "", body, blen);
	if (head && c->out)
		c->olen -= blen;
	free(body);
}

/* Reads what the client sent; the reply once the headers are complete. */
static void on_read(struct metrics *m, struct mconn *c)
{
	ssize_t n = recv(c->fd, c->req + c->rlen, sizeof(c->req) - 1 - c->rlen, 0);

	if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) {
		conn_close(c);
		return;
	}
	if (n < 0)
		return;
	c->rlen += (size_t)n;
	c->req[c->rlen] = '\0';
	if (strstr(c->req, "\r\n\r\n") || strstr(c->req, "\n\n"))
		answer(m, c);
	else if (c->rlen >= sizeof(c->req) - 1)
		set_error(c, "431 Request Header Fields Too Large");
}

static void on_write(struct mconn *c)
{
	ssize_t n = send(c->fd, c->out + c->off, c->olen - c->off, MSG_NOSIGNAL);
	char junk[512];

	if (n < 0 && (errno == EAGAIN || errno == EINTR))
		return;
	if (n < 0) {
		conn_close(c);
		return;
	}
	c->off += (size_t)n;
	if (c->off < c->olen)
		return;
	/* All sent: what the client sent beyond its request would turn the
	 * close into a reset, which may cost it the reply. */
	shutdown(c->fd, SHUT_WR);
	while (recv(c->fd, junk, sizeof(junk), 0) > 0)
		;
	conn_close(c);
}

/* A free slot, else the one waiting longest for its request. */
static struct mconn *slot(struct metrics *m)
{
	struct mconn *old = NULL;
	unsigned i;

	for (i = 0; i < METRICS_CONNS; i++) {
		if (m->c[i].fd < 0)
			return &m->c[i];
		if (!m->c[i].out && (!old || m->c[i].born < old->born))
			old = &m->c[i];
	}
	if (old)
		conn_close(old);
	return old;
}

static void on_accept(struct metrics *m)
{
	struct mconn *c;
	int fd = accept4(m->lfd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);

	if (fd < 0)
		return;
	c = slot(m);
	if (!c) {		/* every one is sending its reply */
		close(fd);
		return;
	}
	c->fd = fd;
	c->born = now_ms();
	c->deadline = c->born + METRICS_TIMEOUT_MS;
}

static void *metrics_thread(void *arg)
{
	struct metrics *m = arg;
	struct pollfd p[2 + METRICS_CONNS];
	struct mconn *who[METRICS_CONNS];

	for (;;) {
		int64_t now = now_ms(), wait = METRICS_TIMEOUT_MS;
		unsigned i, n = 2;

		p[0] = (struct pollfd){ .fd = m->stop[0], .events = POLLIN };
		p[1] = (struct pollfd){ .fd = m->lfd, .events = POLLIN };
		for (i = 0; i < METRICS_CONNS; i++) {
			struct mconn *c = &m->c[i];

			if (c->fd < 0)
				continue;
			if (now >= c->deadline) {
				conn_close(c);
				continue;
			}
			if (c->deadline - now < wait)
				wait = c->deadline - now;
			who[n - 2] = c;
			p[n++] = (struct pollfd){ .fd = c->fd, .events = c->out ? POLLOUT : POLLIN };
		}
		if (poll(p, n, (int)wait) < 0 && errno != EINTR)
			break;
		if (p[0].revents)
			break;
		for (i = 2; i < n; i++) {
			struct mconn *c = who[i - 2];

			if (!p[i].revents)
				continue;
			if (!c->out)
				on_read(m, c);
			if (c->fd >= 0 && c->out)
				on_write(c);	/* at once: most replies fit the socket */
		}
		if (p[1].revents & POLLIN)
			on_accept(m);
	}
	return NULL;
}

int metrics_start(int lfd, metrics_body_fn body, void *arg, struct metrics **out)
{
	struct metrics *m = calloc(1, sizeof(*m));
	unsigned i;
	int r;

	if (!m) {
		close(lfd);
		return -ENOMEM;
	}
	m->lfd = lfd;
	m->body = body;
	m->arg = arg;
	for (i = 0; i < METRICS_CONNS; i++)
		m->c[i].fd = -1;
	if (pipe2(m->stop, O_CLOEXEC) < 0) {
		r = -errno;
		goto out_free;
	}
	r = -pthread_create(&m->thread, NULL, metrics_thread, m);
	if (r < 0)
		goto out_pipe;
	*out = m;
	return 0;
out_pipe:
	close(m->stop[0]);
	close(m->stop[1]);
out_free:
	close(lfd);
	free(m);
	return r;
}

void metrics_stop(struct metrics *m)
{
	unsigned i;

	if (!m)
		return;
	if (write(m->stop[1], "x", 1) < 0)
		log_warn("metrics: cannot stop its thread: %s", strerror(errno));
	pthread_join(m->thread, NULL);
	for (i = 0; i < METRICS_CONNS; i++)
		conn_close(&m->c[i]);
	close(m->stop[0]);
	close(m->stop[1]);
	close(m->lfd);
	free(m);
}
