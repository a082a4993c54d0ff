/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * link-stream: SMC-R connections streaming over two real RC links
 * (smcr/link_verbs.c) with the CDC data path (smcr/conn.c) on top, and
 * failover of every connection of a dead link to the surviving one.
 *
 *   link-stream server|client LOCAL1 LOCAL2 PEER1 PEER2 [options]
 *
 * LOCALn/PEERn are the two hosts' IPv4 addresses on link n; each side finds
 * the RDMA device whose RoCE v2 GID is LOCALn and builds link n on it.  The
 * two sides exchange QPN, PSN, GID and MTU of both links and, for every
 * connection, its token, RMB element and the RMB's address and rkey on both
 * devices over a TCP connection between the addresses of the control link
 * (--ctl-link, 1 by default; the client retries until the server listens).
 * Then --conns connections (half on each link) each stream --mib MiB in both
 * directions: a deterministic pattern (every 8-byte word derives from the
 * connection, the direction and its offset) written zero-copy into the send
 * buffer, checked word by word at the far end, and SHA-256 over each
 * direction compared at the end over TCP.  The event loop waits in epoll on
 * both devices' completion channels and async event fds: no busy-waiting.
 *
 * When a link goes down (a completion error, a port error, or
 * --fail-link-after=BYTES: this side forces link 1's QP into the error state
 * once it has received that many bytes in all), every connection on it moves
 * to the other link with smcr_conn_failover().  --drop-link-after=BYTES
 * makes link 1 silent instead (smcr_vlink_fault() DROP): it goes down when
 * its RC retry time has passed, and what it held must complete as flushed.
 * The program prints the failovers, the detection time (last good
 * completion on the link -> down, and cut -> down when this side cut it),
 * the replayed bytes and how many of each link's SENDs completed.
 *
 * Exit status 0 only if every connection delivered every byte intact in
 * both directions, without a reset.  Output lines are meant for the test
 * script (tests/vm/link-stream.sh) to grep.
 */
#include <config.h>

#include <arpa/inet.h>
#include <endian.h>
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <openssl/evp.h>

#include "conn.h"
#include "dev.h"
#include "link_verbs.h"
#include "log.h"
#include "rmb.h"

#define MAX_CONNS	32
#define NLINKS		2
#define MAGIC		0x4c535452u	/* "LSTR" */
#define TCP_TIMEOUT_S	60
#define GID_TIMEOUT_S	10

struct opts {
	bool server;
	const char *local[NLINKS], *peer[NLINKS];
	uint16_t port;
	unsigned int conns;
	uint64_t total;			/* bytes per connection and direction */
	unsigned int rmbe_kib;
	unsigned int chunk;
	unsigned int ctl_link;		/* 1-based */
	uint64_t fail_after;		/* 0: never */
	uint64_t drop_after;		/* 0: never */
	bool sha;
	unsigned int stall_s;
};

struct cst {
	struct smcr_conn conn;
	unsigned int idx;
	struct smcr_rmbe rmbe, sndbuf;
	struct smcr_peer_rmb peer_rmb;
	uint64_t sent, rcvd;
	uint64_t tx_key, rx_key;
	bool shut, eof;
	uint64_t bad_at;		/* 1 + offset of the first bad byte */
	int error;			/* first error the application saw */
	EVP_MD_CTX *tx_sha, *rx_sha;
	uint8_t tx_digest[32], rx_digest[32];
};

struct side {
	struct opts *o;
	struct smcr_devs devs;
	struct smcr_port_ref ref[NLINKS];
	struct smcr_pd *pd[NLINKS];	/* one per link, as Linux */
	struct smcr_vlink_set set;
	struct smcr_link *link[NLINKS];
	struct smcr_rmb_pool rmbs, sndbufs;
	struct cst c[MAX_CONNS];
	uint32_t token_base, peer_token_base;
	/* per link */
	double last_ok[NLINKS];		/* last good completion or receive */
	double cut_at[NLINKS];		/* when this side cut it, or 0 */
	double down_at[NLINKS];
	double detect_ms[NLINKS];
	int down_reason[NLINKS];
	unsigned int moved[NLINKS];
	/* stream */
	double t_start, t_done;
	uint64_t rx_total, tx_total;
	unsigned int progress_pct;
	unsigned int bad_cdcs;
	unsigned int fo_cdcs;		/* failover validations received */
	unsigned int fo_drained;	/* completions processed before them */
	double t_fail;
	bool fault_ticking;		/* smcr_vlink_fault_tick() wanted */
	uint64_t sends_done[NLINKS], sends_failed[NLINKS];
};

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* ---- the data pattern ---------------------------------------------------- */

static inline uint64_t mix64(uint64_t x)
{
	x += 0x9E3779B97F4A7C15ull;
	x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
	x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
	return x ^ (x >> 31);
}

static inline uint64_t pattern_word(uint64_t key, uint64_t k)
{
	return htole64(mix64(key ^ k));
}

static void pattern_fill(uint8_t *p, size_t len, uint64_t key, uint64_t off)
{
	while (len) {
		uint64_t w = pattern_word(key, off >> 3);
		unsigned int b = (unsigned int)(off & 7);
		size_t n = 8 - b;

		if (n > len)
			n = len;
		memcpy(p, (uint8_t *)&w + b, n);
		p += n;
		off += n;
		len -= n;
	}
}

/* Offset (relative to p) of the first byte that differs, or -1. */
static long pattern_check(const uint8_t *p, size_t len, uint64_t key, uint64_t off)
{
	size_t done = 0;

	while (done < len) {
		uint64_t w = pattern_word(key, off >> 3);
		unsigned int b = (unsigned int)(off & 7);
		size_t n = 8 - b, i;

		if (n > len - done)
			n = len - done;
		if (memcmp(p + done, (uint8_t *)&w + b, n)) {
			for (i = 0; i < n; i++)
				if (p[done + i] != ((uint8_t *)&w)[b + i])
					return (long)(done + i);
		}
		done += n;
		off += n;
	}
	return -1;
}

/* ---- TCP control connection --------------------------------------------- */

static int send_all(int fd, const void *buf, size_t len)
{
	const uint8_t *p = buf;

	while (len) {
		ssize_t n = send(fd, p, len, MSG_NOSIGNAL);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return n < 0 ? -errno : -EPIPE;
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

static int recv_all(int fd, void *buf, size_t len)
{
	uint8_t *p = buf;

	while (len) {
		ssize_t n = recv(fd, p, len, 0);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return n < 0 ? -errno : -ECONNRESET;
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

static int sockaddr_of(const char *ip, uint16_t port, struct sockaddr_in *sa)
{
	memset(sa, 0, sizeof(*sa));
	sa->sin_family = AF_INET;
	sa->sin_port = htons(port);
	return inet_pton(AF_INET, ip, &sa->sin_addr) == 1 ? 0 : -EINVAL;
}

static int tcp_accept_one(const char *ip, uint16_t port)
{
	struct sockaddr_in sa;
	int lfd, fd, one = 1, ret;

	ret = sockaddr_of(ip, port, &sa);
	if (ret)
		return ret;
	lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (lfd < 0)
		return -errno;
	setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(lfd, (struct sockaddr *)&sa, sizeof(sa)) || listen(lfd, 1)) {
		ret = -errno;
		goto err_close_listener;
	}
	fd = accept(lfd, NULL, NULL);
	if (fd < 0) {
		ret = -errno;
		goto err_close_listener;
	}
	close(lfd);
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	return fd;

err_close_listener:
	close(lfd);
	return ret;
}

static int tcp_connect_retry(const char *local_ip, const char *peer_ip,
			     uint16_t port)
{
	struct sockaddr_in local, peer;
	time_t deadline = time(NULL) + TCP_TIMEOUT_S;
	int fd, one = 1, ret;

	ret = sockaddr_of(local_ip, 0, &local);
	if (ret)
		return ret;
	ret = sockaddr_of(peer_ip, port, &peer);
	if (ret)
		return ret;
	for (;;) {
		fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
		if (fd < 0)
			return -errno;
		if (bind(fd, (struct sockaddr *)&local, sizeof(local))) {
			ret = -errno;
			close(fd);
			return ret;
		}
		if (!connect(fd, (struct sockaddr *)&peer, sizeof(peer))) {
			setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
			return fd;
		}
		ret = -errno;
		close(fd);
		if (time(NULL) >= deadline)
			return ret;
		usleep(100 * 1000);
	}
}

/* A tiny big-endian serializer for the control messages. */
struct wbuf {
	uint8_t b[4096];
	size_t n;
};

static void put32(struct wbuf *w, uint32_t v)
{
	v = htonl(v);
	memcpy(w->b + w->n, &v, 4);
	w->n += 4;
}

static void put64(struct wbuf *w, uint64_t v)
{
	v = htobe64(v);
	memcpy(w->b + w->n, &v, 8);
	w->n += 8;
}

static void putb(struct wbuf *w, const void *p, size_t len)
{
	memcpy(w->b + w->n, p, len);
	w->n += len;
}

static uint32_t get32(const uint8_t **p)
{
	uint32_t v;

	memcpy(&v, *p, 4);
	*p += 4;
	return ntohl(v);
}

static uint64_t get64(const uint8_t **p)
{
	uint64_t v;

	memcpy(&v, *p, 8);
	*p += 8;
	return be64toh(v);
}

static void getb(const uint8_t **p, void *out, size_t len)
{
	memcpy(out, *p, len);
	*p += len;
}

/* hello: magic, conns, total, element size; per link QPN, PSN, MTU, GID;
 * per connection token, element index, RMB address, rkey per link. */
static size_t hello_len(unsigned int conns)
{
	return 4 + 4 + 8 + 4 + NLINKS * (4 + 4 + 4 + 16) +
	       conns * (4 + 4 + 8 + 4 * NLINKS);
}

static int send_hello(int fd, struct side *s)
{
	struct wbuf w = { .n = 0 };
	unsigned int i, l;

	put32(&w, MAGIC);
	put32(&w, s->o->conns);
	put64(&w, s->o->total);
	put32(&w, s->c[0].rmbe.rmb->elem_size);
	for (l = 0; l < NLINKS; l++) {
		struct smcr_qp_peer me;

		smcr_vlink_local(s->link[l], &me);
		put32(&w, me.qpn);
		put32(&w, me.psn);
		put32(&w, (uint32_t)me.mtu);
		putb(&w, me.gid, 16);
	}
	for (i = 0; i < s->o->conns; i++) {
		struct cst *c = &s->c[i];

		put32(&w, s->token_base + i);
		put32(&w, c->rmbe.index);
		put64(&w, (uint64_t)(uintptr_t)c->rmbe.rmb->buf);
		for (l = 0; l < NLINKS; l++)
			put32(&w, smcr_rmb_rkey(c->rmbe.rmb, s->pd[l]));
	}
	return send_all(fd, w.b, w.n);
}

struct peer_hello {
	struct smcr_qp_peer qp[NLINKS];
	uint32_t elem_size;
	uint32_t token[MAX_CONNS];
	uint8_t index[MAX_CONNS];
};

static int recv_hello(int fd, struct side *s, struct peer_hello *ph)
{
	uint8_t buf[4096];
	const uint8_t *p = buf;
	size_t len = hello_len(s->o->conns);
	unsigned int i, l;
	uint32_t conns;
	uint64_t total;
	int ret;

	ret = recv_all(fd, buf, 4 + 4 + 8);
	if (ret)
		return ret;
	if (get32(&p) != MAGIC)
		return -EPROTO;
	conns = get32(&p);
	total = get64(&p);
	if (conns != s->o->conns || total != s->o->total) {
		fprintf(stderr, "peer streams %u x %" PRIu64 " bytes, we %u x %" PRIu64 "\n",
			conns, total, s->o->conns, s->o->total);
		return -EPROTO;
	}
	ret = recv_all(fd, buf + 16, len - 16);
	if (ret)
		return ret;
	ph->elem_size = get32(&p);
	for (l = 0; l < NLINKS; l++) {
		ph->qp[l].qpn = get32(&p);
		ph->qp[l].psn = get32(&p);
		ph->qp[l].mtu = (enum ibv_mtu)get32(&p);
		getb(&p, ph->qp[l].gid, 16);
	}
	for (i = 0; i < conns; i++) {
		struct cst *c = &s->c[i];

		ph->token[i] = get32(&p);
		ph->index[i] = (uint8_t)get32(&p);
		/* One address on every link (the same buffer), one rkey per
		 * device it is registered on. */
		c->peer_rmb.vaddr[0] = get64(&p);
		for (l = 1; l < NLINKS; l++)
			c->peer_rmb.vaddr[l] = c->peer_rmb.vaddr[0];
		for (l = 0; l < NLINKS; l++)
			c->peer_rmb.rkey[l] = get32(&p);
	}
	return 0;
}

/* result: per connection tx digest, rx digest, bytes received, first bad
 * byte, error. */
#define RESULT_LEN(conns) (4 + (conns) * (32 + 32 + 8 + 8 + 4))

static int send_result(int fd, struct side *s)
{
	struct wbuf w = { .n = 0 };
	unsigned int i;

	put32(&w, MAGIC);
	for (i = 0; i < s->o->conns; i++) {
		struct cst *c = &s->c[i];

		putb(&w, c->tx_digest, 32);
		putb(&w, c->rx_digest, 32);
		put64(&w, c->rcvd);
		put64(&w, c->bad_at);
		put32(&w, (uint32_t)c->error);
	}
	return send_all(fd, w.b, w.n);
}

struct peer_result {
	uint8_t tx_digest[MAX_CONNS][32], rx_digest[MAX_CONNS][32];
	uint64_t rcvd[MAX_CONNS], bad_at[MAX_CONNS];
	int error[MAX_CONNS];
};

static int recv_result(int fd, struct side *s, struct peer_result *pr)
{
	uint8_t buf[4096];
	const uint8_t *p = buf;
	unsigned int i;
	int ret;

	ret = recv_all(fd, buf, RESULT_LEN(s->o->conns));
	if (ret)
		return ret;
	if (get32(&p) != MAGIC)
		return -EPROTO;
	for (i = 0; i < s->o->conns; i++) {
		getb(&p, pr->tx_digest[i], 32);
		getb(&p, pr->rx_digest[i], 32);
		pr->rcvd[i] = get64(&p);
		pr->bad_at[i] = get64(&p);
		pr->error[i] = (int)get32(&p);
	}
	return 0;
}

/* ---- link upcalls (what a link group does) ------------------------------- */

static struct cst *conn_by_token(struct side *s, uint32_t token)
{
	uint32_t i = token - s->token_base;

	return i < s->o->conns ? &s->c[i] : NULL;
}

static void h_recv(struct smcr_link *link, const uint8_t msg[SMCR_MSG_LEN])
{
	struct side *s = link->handler_arg;
	struct smcr_cdc_msg m;
	struct cst *c;

	s->last_ok[link->slot] = now_s();
	if (smcr_cdc_decode(msg, SMCR_MSG_LEN, &m) != SMCR_CDC_LEN) {
		s->bad_cdcs++;
		return;
	}
	c = conn_by_token(s, m.token);
	if (!c) {
		s->bad_cdcs++;
		return;
	}
	if (m.failover_validation) {
		/* What the peer saw acknowledged on another link may still
		 * wait in that link's CQ: process it before validating. */
		unsigned int l;

		int n;

		for (l = 0; l < NLINKS; l++)
			if (s->link[l] != link &&
			    (n = smcr_vlink_poll(s->link[l])) > 0)
				s->fo_drained += (unsigned int)n;
		s->fo_cdcs++;
	}
	smcr_conn_rx_cdc(&c->conn, &m);
}

static void h_send_done(struct smcr_link *link, uint64_t wr_id, int status)
{
	struct side *s = link->handler_arg;
	struct cst *c = conn_by_token(s, smcr_wr_token(wr_id));
	unsigned int i;

	s->sends_done[link->slot]++;
	if (status == 0)
		s->last_ok[link->slot] = now_s();
	else
		s->sends_failed[link->slot]++;
	if (c && smcr_wr_tag(wr_id) == SMCR_WR_TAG_CDC)
		smcr_conn_cdc_done(&c->conn, smcr_wr_seq(wr_id), status);
	/* Room on the link: retry whoever waits for it. */
	for (i = 0; i < s->o->conns; i++)
		if (s->c[i].conn.link == link && smcr_conn_tx_pending(&s->c[i].conn))
			smcr_conn_flush(&s->c[i].conn);
}

static void h_write_done(struct smcr_link *link, uint64_t wr_id, int status)
{
	struct side *s = link->handler_arg;

	(void)wr_id;
	if (status == 0)
		s->last_ok[link->slot] = now_s();
}

static void h_down(struct smcr_link *link, int reason)
{
	struct side *s = link->handler_arg;
	unsigned int l = link->slot, i, other = 1 - l;
	struct smcr_link *to = s->link[other];
	double t = now_s();

	s->down_at[l] = t;
	s->down_reason[l] = reason;
	s->detect_ms[l] = (t - s->last_ok[l]) * 1e3;
	for (i = 0; i < s->o->conns; i++) {
		struct cst *c = &s->c[i];
		int ret;

		if (c->conn.link != link)
			continue;
		if (to && to->state == SMCR_LINK_ACTIVE) {
			ret = smcr_conn_failover(&c->conn, to);
			if (ret)
				fprintf(stderr, "conn %u: failover to link %u: %s\n",
					i, other + 1, strerror(-ret));
			s->moved[l]++;
		} else {
			smcr_conn_abort(&c->conn, -ECONNRESET);
		}
	}
	printf("link %u down: %s; detect %.0f ms (last good completion -> down)",
	       l + 1, strerror(-reason), s->detect_ms[l]);
	if (s->cut_at[l] > 0)
		printf(", %.1f ms (cut -> down)", (t - s->cut_at[l]) * 1e3);
	printf("; moved %u connections to link %u after %.2f MiB received\n",
	       s->moved[l], other + 1, (double)s->rx_total / (1 << 20));
}

/* Port events that do not take links down: a link group would re-add a
 * link on a port that became active again; we report it. */
static void h_port_event(struct smcr_dev *dev, uint8_t port,
			 enum ibv_event_type event, void *arg)
{
	struct side *s = arg;
	unsigned int l;

	if (event != IBV_EVENT_PORT_ACTIVE)
		return;
	for (l = 0; l < NLINKS; l++) {
		if (s->ref[l].dev != dev || s->ref[l].port != port)
			continue;
		printf("port active: %s port %u (link %u) %.0f ms after it went down\n",
		       dev->name, port, l + 1,
		       s->down_at[l] > 0 ? (now_s() - s->down_at[l]) * 1e3 : 0.0);
	}
}

static const struct smcr_link_handler handler = {
	.write_done = h_write_done,
	.send_done = h_send_done,
	.recv = h_recv,
	.down = h_down,
};

/* ---- setup ---------------------------------------------------------------- */

static int resolve_retry(struct side *s, unsigned int l)
{
	struct sockaddr_in sa;
	time_t deadline = time(NULL) + GID_TIMEOUT_S;
	int ret;

	ret = sockaddr_of(s->o->local[l], 0, &sa);
	if (ret)
		return ret;
	while ((ret = smcr_dev_resolve_addr(&s->devs, (struct sockaddr *)&sa,
					    &s->ref[l])) == -ENODEV &&
	       time(NULL) < deadline)
		usleep(100 * 1000);
	return ret;
}

static int setup_links(struct side *s)
{
	unsigned int l;
	int ret;

	for (l = 0; l < NLINKS; l++) {
		ret = resolve_retry(s, l);
		if (ret) {
			fprintf(stderr, "link %u: no RDMA device with a RoCE v2 GID for %s: %s\n",
				l + 1, s->o->local[l], strerror(-ret));
			return ret;
		}
		ret = smcr_pd_alloc(s->ref[l].dev, &s->pd[l]);
		if (!ret)
			ret = smcr_vlink_create(&s->set, &s->ref[l], s->pd[l], NULL,
						&handler, s, &s->link[l]);
		if (ret) {
			fprintf(stderr, "link %u: %s\n", l + 1, strerror(-ret));
			return ret;
		}
		s->link[l]->link_id = (uint8_t)(l + 1);
		s->link[l]->slot = (uint8_t)l;
	}
	return 0;
}

static int setup_buffers(struct side *s)
{
	size_t want = (size_t)s->o->rmbe_kib * 1024 - SMCR_RMBE_EYE_LEN;
	unsigned int i, l;
	bool fresh;
	int ret;

	smcr_rmb_pool_init(&s->rmbs, 0);
	smcr_rmb_pool_init(&s->sndbufs, 0);
	s->sndbufs.local_only = true;
	for (i = 0; i < s->o->conns; i++) {
		ret = smcr_rmbe_alloc(&s->rmbs, want, &s->c[i].rmbe, &fresh);
		if (ret)
			return ret;
		ret = smcr_rmbe_alloc(&s->sndbufs, want, &s->c[i].sndbuf, &fresh);
		if (ret)
			return ret;
	}
	for (l = 0; l < NLINKS; l++) {
		ret = smcr_rmb_pool_reg(&s->rmbs, s->pd[l]);
		if (!ret)
			ret = smcr_rmb_pool_reg(&s->sndbufs, s->pd[l]);
		if (ret) {
			fprintf(stderr, "registering buffers on %s: %s\n",
				s->ref[l].dev->name, strerror(-ret));
			return ret;
		}
	}
	return 0;
}

static int setup_conns(struct side *s, const struct peer_hello *ph)
{
	unsigned int i;
	int ret;

	for (i = 0; i < s->o->conns; i++) {
		struct cst *c = &s->c[i];
		struct smcr_conn_params p = {
			.token = s->token_base + i,
			.peer_token = ph->token[i],
			.rmbe = c->rmbe,
			.sndbuf = c->sndbuf,
			.peer_rmb = &c->peer_rmb,
			.peer_index = ph->index[i],
			.peer_elem_size = ph->elem_size,
			.link = s->link[i % NLINKS],
		};

		c->idx = i;
		ret = smcr_conn_init(&c->conn, &p);
		if (ret) {
			fprintf(stderr, "conn %u: init: %s\n", i, strerror(-ret));
			return ret;
		}
		c->tx_key = ((uint64_t)i << 48) | ((uint64_t)(s->o->server ? 2 : 1) << 40);
		c->rx_key = ((uint64_t)i << 48) | ((uint64_t)(s->o->server ? 1 : 2) << 40);
		if (s->o->sha) {
			c->tx_sha = EVP_MD_CTX_new();
			c->rx_sha = EVP_MD_CTX_new();
			if (!c->tx_sha || !c->rx_sha ||
			    !EVP_DigestInit_ex(c->tx_sha, EVP_sha256(), NULL) ||
			    !EVP_DigestInit_ex(c->rx_sha, EVP_sha256(), NULL))
				return -ENOMEM;
		}
	}
	return 0;
}

/* ---- streaming ------------------------------------------------------------ */

static void conn_error(struct cst *c, int err, const char *what)
{
	if (c->error)
		return;
	c->error = err;
	fprintf(stderr, "conn %u: %s: %s\n", c->idx, what, strerror(-err));
}

static void pump_tx(struct side *s, struct cst *c)
{
	struct smcr_conn *conn = &c->conn;

	while (c->sent < s->o->total && !c->error) {
		struct iovec iov[2];
		ssize_t space = smcr_conn_reserve(conn, iov);
		size_t want, done = 0, n;
		unsigned int j;
		int ret;

		if (space < 0) {
			conn_error(c, (int)space, "reserve");
			return;
		}
		if (space == 0)
			break;
		want = (size_t)space;
		if (want > s->o->chunk)
			want = s->o->chunk;
		if (want > s->o->total - c->sent)
			want = (size_t)(s->o->total - c->sent);
		for (j = 0; j < 2 && done < want; j++) {
			n = iov[j].iov_len;
			if (n > want - done)
				n = want - done;
			pattern_fill(iov[j].iov_base, n, c->tx_key, c->sent + done);
			if (c->tx_sha)
				EVP_DigestUpdate(c->tx_sha, iov[j].iov_base, n);
			done += n;
		}
		ret = smcr_conn_commit(conn, want);
		if (ret) {
			conn_error(c, ret, "commit");
			return;
		}
		c->sent += want;
		s->tx_total += want;
	}
	if (c->sent == s->o->total && !c->shut && !c->error) {
		int ret = smcr_conn_shutdown(conn);

		if (ret)
			conn_error(c, ret, "shutdown");
		c->shut = true;
	}
}

static void pump_rx(struct side *s, struct cst *c)
{
	struct smcr_conn *conn = &c->conn;

	while (!c->eof && !c->error) {
		struct iovec iov[2];
		ssize_t avail = smcr_conn_peek(conn, iov);
		uint64_t off = c->rcvd;
		unsigned int j;
		int ret;

		if (avail == 0) {
			c->eof = true;
			break;
		}
		if (avail == -EAGAIN)
			break;
		if (avail < 0) {
			conn_error(c, (int)avail, "receive");
			break;
		}
		if (c->rcvd + (uint64_t)avail > s->o->total) {
			conn_error(c, -EOVERFLOW, "more data than was sent");
			break;
		}
		for (j = 0; j < 2; j++) {
			long bad;

			if (!iov[j].iov_len)
				continue;
			bad = pattern_check(iov[j].iov_base, iov[j].iov_len,
					    c->rx_key, off);
			if (bad >= 0 && !c->bad_at) {
				c->bad_at = off + (uint64_t)bad + 1;
				fprintf(stderr, "conn %u: byte %" PRIu64 " differs from the pattern\n",
					c->idx, off + (uint64_t)bad);
			}
			if (c->rx_sha)
				EVP_DigestUpdate(c->rx_sha, iov[j].iov_base, iov[j].iov_len);
			off += iov[j].iov_len;
		}
		ret = smcr_conn_consume(conn, (size_t)avail);
		if (ret) {
			conn_error(c, ret, "consume");
			break;
		}
		c->rcvd += (uint64_t)avail;
		s->rx_total += (uint64_t)avail;
	}
}

static bool conn_done(const struct side *s, const struct cst *c)
{
	return c->error || (c->shut && c->eof && c->rcvd == s->o->total);
}

static void pump(struct side *s)
{
	uint64_t expect = s->o->total * s->o->conns;
	unsigned int i;

	for (i = 0; i < s->o->conns; i++) {
		struct cst *c = &s->c[i];

		if (c->conn.error && !c->error)
			conn_error(c, c->conn.error, "connection reset");
		pump_tx(s, c);
		pump_rx(s, c);
	}
	while (s->progress_pct < 75 &&
	       s->rx_total * 100 >= expect * (s->progress_pct + 25)) {
		s->progress_pct += 25;
		printf("progress %u%%: %.1f MiB received in %.2f s\n", s->progress_pct,
		       (double)s->rx_total / (1 << 20), now_s() - s->t_start);
	}
	if (s->o->fail_after && !s->t_fail && s->rx_total >= s->o->fail_after) {
		s->t_fail = now_s();
		s->cut_at[0] = s->t_fail;
		printf("forcing link 1's QP into the error state after %.2f MiB received\n",
		       (double)s->rx_total / (1 << 20));
		s->link[0]->ops->fail(s->link[0]);
	}
	if (s->o->drop_after && !s->t_fail && s->rx_total >= s->o->drop_after) {
		int ret = smcr_vlink_fault(s->link[0], SMCR_VLINK_FAULT_DROP, 0, 0);

		s->t_fail = now_s();
		s->cut_at[0] = s->t_fail;
		printf("dropping link 1's traffic after %.2f MiB received: %s\n",
		       (double)s->rx_total / (1 << 20), strerror(-ret));
		s->fault_ticking = ret == 0;
	}
}

static bool all_done(const struct side *s)
{
	unsigned int i;

	for (i = 0; i < s->o->conns; i++)
		if (!conn_done(s, &s->c[i]))
			return false;
	return true;
}

static void dump_state(const struct side *s)
{
	unsigned int i, l;

	for (l = 0; l < NLINKS; l++) {
		const struct smcr_link *k = s->link[l];
		const struct smcr_vlink_stats *vs = smcr_vlink_stats(k);

		fprintf(stderr, "link %u: state %d writes %" PRIu64 " sends %" PRIu64
			" recvs %" PRIu64 " sq_free %u cq events %" PRIu64
			" completions %" PRIu64 " flushed %" PRIu64 "\n",
			l + 1, k->state, k->writes, k->sends, k->recvs,
			k->ops->sq_free((struct smcr_link *)k), vs->cq_events,
			vs->completions, vs->flushed);
	}
	for (i = 0; i < s->o->conns; i++) {
		const struct cst *c = &s->c[i];
		const struct smcr_conn *k = &c->conn;

		fprintf(stderr, "conn %u: link %u sent %" PRIu64 " rcvd %" PRIu64
			" shut %d eof %d err %d | tx_fill %u:%u prod %u:%u peer_cons %u:%u"
			" seq %u ss %u inflight %u blocked %d cdc_due %d | rx_prod %u:%u"
			" cons %u:%u seq %u\n",
			i, k->link->link_id, c->sent, c->rcvd, c->shut, c->eof, k->error,
			k->tx_fill.wrap, k->tx_fill.count, k->tx_prod.wrap,
			k->tx_prod.count, k->tx_peer_cons.wrap, k->tx_peer_cons.count,
			k->tx_seq, k->ss, k->inflight_n, k->blocked, k->cdc_due,
			k->rx_prod.wrap, k->rx_prod.count, k->rx_cons.wrap,
			k->rx_cons.count, k->rx_seq);
	}
}

enum { EV_CHAN = 0, EV_ASYNC = NLINKS, EV_CTL = 2 * NLINKS };

static int epoll_add(int ep, int fd, uint32_t tag)
{
	struct epoll_event ev = { .events = EPOLLIN, .data.u32 = tag };

	return epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev) ? -errno : 0;
}

/* The event loop: stream until both sides are done and have told each
 * other their results. */
static int run_loop(struct side *s, int ctl, struct peer_result *pr)
{
	bool result_sent = false, result_got = false;
	double last_progress = now_s();
	uint64_t last_bytes = 0;
	unsigned int l;
	int ep, ret = 0;

	ep = epoll_create1(EPOLL_CLOEXEC);
	if (ep < 0)
		return -errno;
	for (l = 0; l < NLINKS && !ret; l++) {
		/* Two links on one device would share a channel. */
		if (l > 0 && s->ref[l].dev == s->ref[0].dev)
			continue;
		ret = epoll_add(ep, s->ref[l].dev->chan->fd, EV_CHAN + l);
		if (!ret)
			ret = epoll_add(ep, s->ref[l].dev->ctx->async_fd, EV_ASYNC + l);
	}
	if (!ret)
		ret = epoll_add(ep, ctl, EV_CTL);
	if (ret)
		goto out_close_ep;

	s->t_start = now_s();
	for (l = 0; l < NLINKS; l++)
		s->last_ok[l] = s->t_start;
	while (!(result_sent && result_got)) {
		struct epoll_event evs[8];
		int n, i;

		pump(s);
		if (!s->t_done && all_done(s)) {
			unsigned int i2;

			s->t_done = now_s();
			for (i2 = 0; i2 < s->o->conns; i2++) {
				struct cst *c = &s->c[i2];

				if (c->tx_sha)
					EVP_DigestFinal_ex(c->tx_sha, c->tx_digest, NULL);
				if (c->rx_sha)
					EVP_DigestFinal_ex(c->rx_sha, c->rx_digest, NULL);
			}
			ret = send_result(ctl, s);
			if (ret) {
				fprintf(stderr, "sending the result: %s\n", strerror(-ret));
				goto out_close_ep;
			}
			result_sent = true;
			continue;
		}
		if (s->tx_total + s->rx_total != last_bytes) {
			last_bytes = s->tx_total + s->rx_total;
			last_progress = now_s();
		} else if (!s->t_done && now_s() - last_progress > s->o->stall_s) {
			fprintf(stderr, "no progress for %u s: giving up\n", s->o->stall_s);
			ret = -ETIMEDOUT;
			goto out_close_ep;
		}
		n = epoll_wait(ep, evs, 8, s->fault_ticking ? 5 : 1000);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			ret = -errno;
			goto out_close_ep;
		}
		for (i = 0; i < n; i++) {
			uint32_t tag = evs[i].data.u32;

			if (tag < EV_CHAN + NLINKS) {
				ret = smcr_vlink_cq_event(s->ref[tag - EV_CHAN].dev);
			} else if (tag >= EV_ASYNC && tag < EV_ASYNC + NLINKS) {
				ret = smcr_vlink_async_event(&s->set,
							     s->ref[tag - EV_ASYNC].dev);
			} else {
				if (result_got) {
					/* peer closed early: an error */
					ret = -ECONNRESET;
					fprintf(stderr, "control connection: unexpected data or EOF\n");
					goto out_close_ep;
				}
				ret = recv_result(ctl, s, pr);
				if (ret) {
					fprintf(stderr, "receiving the peer's result: %s\n",
						strerror(-ret));
					goto out_close_ep;
				}
				result_got = true;
				epoll_ctl(ep, EPOLL_CTL_DEL, ctl, NULL);
			}
			if (ret < 0) {
				fprintf(stderr, "event processing: %s\n", strerror(-ret));
				goto out_close_ep;
			}
			ret = 0;
		}
		if (s->fault_ticking)
			s->fault_ticking = smcr_vlink_fault_tick(s->link[0]);
	}

out_close_ep:
	close(ep);
	return ret;
}

static const char *hex(const uint8_t *d, char *out)
{
	unsigned int i;

	for (i = 0; i < 8; i++)
		sprintf(out + 2 * i, "%02x", d[i]);
	return out;
}

/* Compare with the peer's result; print the summary.  0 when all good. */
static int report(struct side *s, const struct peer_result *pr)
{
	unsigned int i, l, sha_ok = 0, pat_ok = 0, resets = 0;
	uint64_t failovers = 0, replayed = 0, peer_rcvd = 0;
	double secs = s->t_done - s->t_start;
	char h1[17], h2[17];
	bool ok = true;

	for (i = 0; i < s->o->conns; i++) {
		struct cst *c = &s->c[i];

		failovers += c->conn.stats.failovers;
		replayed += c->conn.stats.replayed_bytes;
		peer_rcvd += pr->rcvd[i];
		if (c->error || c->conn.error || pr->error[i])
			resets++;
		if (!c->bad_at && c->rcvd == s->o->total)
			pat_ok++;
		if (s->o->sha) {
			if (!memcmp(c->rx_digest, pr->tx_digest[i], 32) &&
			    !memcmp(c->tx_digest, pr->rx_digest[i], 32))
				sha_ok++;
			else
				fprintf(stderr, "conn %u: sha256 differs: we received %s.., peer sent %s..\n",
					i, hex(c->rx_digest, h1), hex(pr->tx_digest[i], h2));
		}
		if (pr->bad_at[i] || pr->rcvd[i] != s->o->total)
			ok = false;
	}
	if (resets || pat_ok != s->o->conns ||
	    (s->o->sha && sha_ok != s->o->conns))
		ok = false;

	printf("received %.1f MiB in %.2f s: %.2f MB/s in, %.2f MB/s both directions\n",
	       (double)s->rx_total / (1 << 20), secs,
	       (double)s->rx_total / secs / 1e6,
	       (double)(s->rx_total + s->tx_total) / secs / 1e6);
	for (l = 0; l < NLINKS; l++) {
		const struct smcr_link *k = s->link[l];
		const struct smcr_vlink_stats *vs = smcr_vlink_stats(k);

		printf("link %u (%s): %s, %" PRIu64 " writes %.1f MiB, %" PRIu64
		       " sends, %" PRIu64 " recvs, %" PRIu64 " cq events, %" PRIu64
		       " completions (%" PRIu64 " flushed, %" PRIu64 " forced signals)\n",
		       l + 1, s->ref[l].dev->name,
		       k->state == SMCR_LINK_FAILED ? "FAILED" : "active",
		       k->writes, (double)k->write_bytes / (1 << 20), k->sends,
		       k->recvs, vs->cq_events, vs->completions, vs->flushed,
		       k->forced_signals);
		printf("link %u posts: %" PRIu64 " work requests in %" PRIu64
		       " ibv_post_send calls, %" PRIu64 " sends inline (max_inline_data %u)\n",
		       l + 1, vs->posted, k->doorbells, k->inline_sends, k->max_inline);
		if (s->down_at[l] > 0)
			printf("link %u failover: %u connections moved, detect %.0f ms\n",
			       l + 1, s->moved[l], s->detect_ms[l]);
		printf("link %u sends completed: %" PRIu64 " of %" PRIu64 " (%" PRIu64
		       " with an error); fault: held %" PRIu64 ", never sent %" PRIu64
		       ", received late %" PRIu64 "\n", l + 1, s->sends_done[l], k->sends,
		       s->sends_failed[l], vs->fault_held, vs->fault_discarded,
		       vs->fault_held_recvs);
	}
	if (s->bad_cdcs)
		printf("bad CDC messages: %u\n", s->bad_cdcs);
	if (s->fo_cdcs)
		printf("failover validations received: %u (other links drained first: %u completions)\n",
		       s->fo_cdcs, s->fo_drained);
	printf("verified: %u/%u connections x %" PRIu64 " bytes each way: pattern ok %u/%u, "
	       "sha256 equal %s%u/%u, peer received %" PRIu64 " bytes\n",
	       pat_ok, s->o->conns, s->o->total, pat_ok, s->o->conns,
	       s->o->sha ? "" : "(off) ", sha_ok, s->o->conns, peer_rcvd);
	printf("result: %s resets %u failovers %" PRIu64 " replayed %" PRIu64 " bytes\n",
	       ok ? "PASS" : "FAIL", resets, failovers, replayed);
	return ok ? 0 : -EIO;
}

static void teardown(struct side *s)
{
	unsigned int i, l;

	for (i = 0; i < s->o->conns; i++) {
		EVP_MD_CTX_free(s->c[i].tx_sha);
		EVP_MD_CTX_free(s->c[i].rx_sha);
	}
	for (l = 0; l < NLINKS; l++)
		smcr_vlink_destroy(s->link[l]);
	smcr_rmb_pool_fini(&s->rmbs);
	smcr_rmb_pool_fini(&s->sndbufs);
	for (l = 0; l < NLINKS; l++) {
		smcr_pd_put(s->pd[l]);
		smcr_dev_put(&s->devs, &s->ref[l]);
	}
	smcr_devs_fini(&s->devs);
}

/* ---- main ------------------------------------------------------------------ */

static void usage(void)
{
	fprintf(stderr,
		"usage: link-stream server|client LOCAL1 LOCAL2 PEER1 PEER2 [options]\n"
		"  --port=N             TCP control port (18600)\n"
		"  --conns=N            connections, half on each link (8, at most %d)\n"
		"  --mib=N              MiB per connection and direction (8)\n"
		"  --rmbe-kib=N         RMBE size (64)\n"
		"  --chunk=N            bytes per commit (16384)\n"
		"  --ctl-link=1|2       link whose addresses carry the TCP exchange (1)\n"
		"  --fail-link-after=B  force link 1's QP to error after B bytes received\n"
		"  --drop-link-after=B  make link 1 silent (injected drop) after B bytes\n"
		"  --no-sha             skip the SHA-256 comparison (pattern check only)\n"
		"  --stall-timeout=S    give up after S s without progress (60)\n",
		MAX_CONNS);
}

static int parse(int argc, char **argv, struct opts *o)
{
	static const struct option lopts[] = {
		{ "port", required_argument, NULL, 'p' },
		{ "conns", required_argument, NULL, 'n' },
		{ "mib", required_argument, NULL, 'm' },
		{ "rmbe-kib", required_argument, NULL, 'r' },
		{ "chunk", required_argument, NULL, 'k' },
		{ "ctl-link", required_argument, NULL, 'c' },
		{ "fail-link-after", required_argument, NULL, 'f' },
		{ "drop-link-after", required_argument, NULL, 'D' },
		{ "no-sha", no_argument, NULL, 'S' },
		{ "stall-timeout", required_argument, NULL, 's' },
		{ NULL, 0, NULL, 0 },
	};
	int opt;

	*o = (struct opts){
		.port = 18600, .conns = 8, .total = 8u << 20, .rmbe_kib = 64,
		.chunk = 16384, .ctl_link = 1, .sha = true, .stall_s = 60,
	};
	while ((opt = getopt_long(argc, argv, "", lopts, NULL)) != -1) {
		unsigned long long v = optarg ? strtoull(optarg, NULL, 0) : 0;

		switch (opt) {
		case 'p': o->port = (uint16_t)v; break;
		case 'n': o->conns = (unsigned int)v; break;
		case 'm': o->total = v << 20; break;
		case 'r': o->rmbe_kib = (unsigned int)v; break;
		case 'k': o->chunk = (unsigned int)v; break;
		case 'c': o->ctl_link = (unsigned int)v; break;
		case 'f': o->fail_after = v; break;
		case 'D': o->drop_after = v; break;
		case 'S': o->sha = false; break;
		case 's': o->stall_s = (unsigned int)v; break;
		default: return -EINVAL;
		}
	}
	if (argc - optind != 5)
		return -EINVAL;
	if (!strcmp(argv[optind], "server"))
		o->server = true;
	else if (strcmp(argv[optind], "client"))
		return -EINVAL;
	o->local[0] = argv[optind + 1];
	o->local[1] = argv[optind + 2];
	o->peer[0] = argv[optind + 3];
	o->peer[1] = argv[optind + 4];
	if (!o->conns || o->conns > MAX_CONNS || !o->total || !o->chunk ||
	    o->ctl_link < 1 || o->ctl_link > NLINKS || !o->port ||
	    o->rmbe_kib < 16 || o->rmbe_kib > 512)
		return -EINVAL;
	return 0;
}

int main(int argc, char **argv)
{
	static struct side s;
	struct opts o;
	struct peer_hello ph;
	struct peer_result pr;
	const char *role;
	unsigned int l, cl;
	uint8_t go = 1;
	int ctl, ret;

	if (parse(argc, argv, &o)) {
		usage();
		return 2;
	}
	setvbuf(stdout, NULL, _IOLBF, 0);
	smcr_log_set_ident("link-stream");
	role = o.server ? "server" : "client";
	cl = o.ctl_link - 1;
	s.o = &o;
	s.token_base = o.server ? 0x5e000100u : 0xc1000100u;
	smcr_devs_init(&s.devs);
	smcr_vlink_set_init(&s.set);
	s.set.port_event = h_port_event;
	s.set.port_event_arg = &s;

	ret = setup_links(&s);
	if (ret)
		goto out_teardown;
	ret = setup_buffers(&s);
	if (ret) {
		fprintf(stderr, "buffers: %s\n", strerror(-ret));
		goto out_teardown;
	}
	for (l = 0; l < NLINKS; l++) {
		struct smcr_qp_peer me;
		char g[INET6_ADDRSTRLEN];

		smcr_vlink_local(s.link[l], &me);
		inet_ntop(AF_INET6, me.gid, g, sizeof(g));
		printf("%s link %u: %s port %u gid %s qpn 0x%06x psn 0x%06x mtu %d\n",
		       role, l + 1, s.ref[l].dev->name, s.ref[l].port, g, me.qpn,
		       me.psn, 128 << me.mtu);
	}

	if (o.server)
		ctl = tcp_accept_one(o.local[cl], o.port);
	else
		ctl = tcp_connect_retry(o.local[cl], o.peer[cl], o.port);
	if (ctl < 0) {
		ret = ctl;
		fprintf(stderr, "control connection on link %u: %s\n", cl + 1,
			strerror(-ret));
		goto out_teardown;
	}
	ret = send_hello(ctl, &s);
	if (!ret)
		ret = recv_hello(ctl, &s, &ph);
	if (ret) {
		fprintf(stderr, "exchanging link and RMB info: %s\n", strerror(-ret));
		goto out_close_ctl;
	}
	for (l = 0; l < NLINKS; l++) {
		ret = smcr_vlink_connect(s.link[l], &ph.qp[l]);
		if (ret) {
			fprintf(stderr, "link %u: connect: %s\n", l + 1, strerror(-ret));
			goto out_close_ctl;
		}
		s.link[l]->state = SMCR_LINK_ACTIVE;
	}
	ret = setup_conns(&s, &ph);
	if (ret)
		goto out_close_ctl;
	/* Both QPs are in RTS on both sides before anything is sent. */
	ret = send_all(ctl, &go, 1);
	if (!ret)
		ret = recv_all(ctl, &go, 1);
	if (ret) {
		fprintf(stderr, "start barrier: %s\n", strerror(-ret));
		goto out_close_ctl;
	}
	printf("%s: %u connections x %.1f MiB each way, RMBE %u KiB, links up\n",
	       role, o.conns, (double)o.total / (1 << 20), o.rmbe_kib);

	ret = run_loop(&s, ctl, &pr);
	if (ret) {
		dump_state(&s);
		goto out_close_ctl;
	}
	ret = report(&s, &pr);

out_close_ctl:
	close(ctl);
out_teardown:
	teardown(&s);
	return ret ? 1 : 0;
}
