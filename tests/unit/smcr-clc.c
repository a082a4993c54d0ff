/* SPDX-License-Identifier: BSD-3-Clause */
/* smcrbd: the CLC rendezvous flows (smcr/clc.c) between two threads over a
 * loopback TCP connection: first and subsequent contact, Declines from
 * either side at every step, TCP fallback with the stream exactly at the
 * first application byte, v2 peers, garbage, silence, truncation. */
#include <config.h>

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "unit.h"
#include "smcr-suites.h"
#include "clc.h"
#include "log.h"
#include "monotime.h"

/* ---- plumbing ------------------------------------------------------------ */

static void tcp_pair(int *cfd, int *sfd)
{
	struct sockaddr_in sa = { .sin_family = AF_INET };
	socklen_t sl = sizeof(sa);
	struct timeval tv = { .tv_sec = 5 };
	int lfd, one = 1;

	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	lfd = socket(AF_INET, SOCK_STREAM, 0);
	CU_ASSERT_FATAL(lfd >= 0);
	CU_ASSERT_FATAL(bind(lfd, (struct sockaddr *)&sa, sizeof(sa)) == 0);
	CU_ASSERT_FATAL(listen(lfd, 1) == 0);
	CU_ASSERT_FATAL(getsockname(lfd, (struct sockaddr *)&sa, &sl) == 0);
	*cfd = socket(AF_INET, SOCK_STREAM, 0);
	CU_ASSERT_FATAL(*cfd >= 0);
	CU_ASSERT_FATAL(connect(*cfd, (struct sockaddr *)&sa, sizeof(sa)) == 0);
	*sfd = accept(lfd, NULL, NULL);
	CU_ASSERT_FATAL(*sfd >= 0);
	close(lfd);
	/* The test's own blocking reads never hang (the library's reads
	 * have their own deadlines and ignore these). */
	setsockopt(*cfd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	setsockopt(*sfd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	setsockopt(*cfd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	setsockopt(*sfd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

static int write_all(int fd, const void *buf, size_t len)
{
	const char *p = buf;

	while (len > 0) {
		ssize_t n = send(fd, p, len, MSG_NOSIGNAL);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return -1;
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

/* Reads until end of stream (or error, or cap bytes); returns the count. */
static size_t read_to_eof(int fd, void *buf, size_t cap)
{
	size_t got = 0;

	while (got < cap) {
		ssize_t n = recv(fd, (char *)buf + got, cap - got, 0);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		got += (size_t)n;
	}
	return got;
}

static int read_exact(int fd, void *buf, size_t len)
{
	size_t got = 0;

	while (got < len) {
		ssize_t n = recv(fd, (char *)buf + got, len - got, 0);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return -1;
		got += (size_t)n;
	}
	return 0;
}

/* A side of the test connection running in a thread. */
struct side {
	pthread_t thread;
	int fd;
	void *(*fn)(void *);
};

static void side_start(struct side *s, void *(*fn)(void *), void *arg)
{
	CU_ASSERT_FATAL(pthread_create(&s->thread, NULL, fn, arg) == 0);
}

static void side_join(struct side *s)
{
	pthread_join(s->thread, NULL);
}

/* Both ends write their application message and shut down writing, then
 * read to the end: each must see exactly the other's message, proving the
 * stream stood at the first application byte. */
static const char app_c2s[] = "application data from the client\n";
static const char app_s2c[] = "NBDMAGIC-like greeting from the server";

struct app_xfer {
	int fd;
	const char *out;
	size_t outlen;
	char in[256];
	size_t inlen;
	int wrc;
};

static void *app_thread(void *p)
{
	struct app_xfer *x = p;

	x->wrc = write_all(x->fd, x->out, x->outlen);
	shutdown(x->fd, SHUT_WR);
	x->inlen = read_to_eof(x->fd, x->in, sizeof(x->in));
	return NULL;
}

static void check_app_stream(int cfd, int sfd)
{
	struct app_xfer c = { .fd = cfd, .out = app_c2s, .outlen = sizeof(app_c2s) - 1 };
	struct app_xfer s = { .fd = sfd, .out = app_s2c, .outlen = sizeof(app_s2c) - 1 };
	struct side t;

	side_start(&t, app_thread, &s);
	app_thread(&c);
	side_join(&t);
	CU_ASSERT_EQUAL(c.wrc, 0);
	CU_ASSERT_EQUAL(s.wrc, 0);
	CU_ASSERT_EQUAL(s.inlen, sizeof(app_c2s) - 1);
	CU_ASSERT(memcmp(s.in, app_c2s, sizeof(app_c2s) - 1) == 0);
	CU_ASSERT_EQUAL(c.inlen, sizeof(app_s2c) - 1);
	CU_ASSERT(memcmp(c.in, app_s2c, sizeof(app_s2c) - 1) == 0);
}

/* ---- stub callbacks ------------------------------------------------------ */

struct stub {
	/* what to answer */
	uint32_t propose_code, accept_code, accept_proposal_code, confirm_code;
	bool first_contact;
	struct smcr_clc_proposal prop_out;
	struct smcr_clc_accept_confirm acc_out, conf_out;
	/* what was seen */
	unsigned int n_propose, n_accept, n_accept_proposal, n_confirm, n_undo;
	struct smcr_clc_proposal prop_in;
	struct smcr_clc_accept_confirm acc_in, conf_in;
	enum smcr_clc_outcome undo_outcome;
};

static uint32_t st_propose(void *arg, int fd, struct smcr_clc_proposal *prop)
{
	struct stub *st = arg;

	(void)fd;
	st->n_propose++;
	*prop = st->prop_out;
	return st->propose_code;
}

static uint32_t st_accept(void *arg, int fd, const struct smcr_clc_proposal *prop,
			  const struct smcr_clc_accept_confirm *acc,
			  struct smcr_clc_accept_confirm *conf)
{
	struct stub *st = arg;

	(void)fd;
	(void)prop;
	st->n_accept++;
	st->acc_in = *acc;
	*conf = st->conf_out;
	return st->accept_code;
}

static uint32_t st_accept_proposal(void *arg, int fd, const struct smcr_clc_proposal *prop,
				   struct smcr_clc_accept_confirm *acc)
{
	struct stub *st = arg;

	(void)fd;
	st->n_accept_proposal++;
	st->prop_in = *prop;
	*acc = st->acc_out;
	acc->first_contact = st->first_contact;
	return st->accept_proposal_code;
}

static uint32_t st_confirm(void *arg, int fd, const struct smcr_clc_accept_confirm *acc,
			   const struct smcr_clc_accept_confirm *conf)
{
	struct stub *st = arg;

	(void)fd;
	(void)acc;
	st->n_confirm++;
	st->conf_in = *conf;
	return st->confirm_code;
}

static void st_undo(void *arg, const struct smcr_clc_result *res)
{
	struct stub *st = arg;

	st->n_undo++;
	st->undo_outcome = res->outcome;
}

static const struct smcr_clc_ops stub_ops = {
	.propose = st_propose,
	.accept = st_accept,
	.accept_proposal = st_accept_proposal,
	.confirm = st_confirm,
	.undo = st_undo,
};

static void fill_bytes(uint8_t *p, size_t n, uint8_t seed)
{
	size_t i;

	for (i = 0; i < n; i++)
		p[i] = (uint8_t)(seed + 17 * i);
}

/* Distinct, non-trivial values in every field. */
static void stub_init(struct stub *st, bool first_contact)
{
	memset(st, 0, sizeof(*st));
	st->first_contact = first_contact;

	st->prop_out.peer_id.instance = 0x1234;
	fill_bytes(st->prop_out.peer_id.mac, SMCR_MAC_LEN, 0x10);
	fill_bytes(st->prop_out.gid, SMCR_GID_LEN, 0x20);
	fill_bytes(st->prop_out.mac, SMCR_MAC_LEN, 0x30);
	st->prop_out.ip_area_offset = SMCR_CLC_IP_AREA_OFFSET_LINUX;
	st->prop_out.ipv4_subnet = 0x0a010200;
	st->prop_out.ipv4_mask_len = 24;
	st->prop_out.ipv6_prefix_count = 3;
	for (unsigned int i = 0; i < 3; i++) {
		fill_bytes(st->prop_out.ipv6_prefix[i].prefix, 16, (uint8_t)(0x40 + i));
		st->prop_out.ipv6_prefix[i].len = (uint8_t)(48 + 16 * i);
	}

	st->acc_out.peer_id.instance = 0xbeef;
	fill_bytes(st->acc_out.peer_id.mac, SMCR_MAC_LEN, 0x50);
	fill_bytes(st->acc_out.gid, SMCR_GID_LEN, 0x60);
	fill_bytes(st->acc_out.mac, SMCR_MAC_LEN, 0x70);
	st->acc_out.qpn = 0xabcdef;
	st->acc_out.rmb_rkey = 0xdeadbeef;
	st->acc_out.rmbe_idx = 7;
	st->acc_out.rmbe_alert_token = 0x01020304;
	st->acc_out.rmbe_size = 3;
	st->acc_out.qp_mtu = SMCR_MTU_1024;
	st->acc_out.rmb_vaddr = 0x0123456789abcdefull;
	st->acc_out.psn = 0x654321;

	st->conf_out.peer_id.instance = 0x4321;
	fill_bytes(st->conf_out.peer_id.mac, SMCR_MAC_LEN, 0x80);
	fill_bytes(st->conf_out.gid, SMCR_GID_LEN, 0x90);
	fill_bytes(st->conf_out.mac, SMCR_MAC_LEN, 0xa0);
	st->conf_out.qpn = 0x112233;
	st->conf_out.rmb_rkey = 0xcafef00d;
	st->conf_out.rmbe_idx = 1;
	st->conf_out.rmbe_alert_token = 0xa1b2c3d4;
	st->conf_out.rmbe_size = 5;
	st->conf_out.qp_mtu = SMCR_MTU_4096;
	st->conf_out.rmb_vaddr = 0xfedcba9876543210ull;
	st->conf_out.psn = 0x000042;
}

static bool peer_id_eq(const struct smcr_peer_id *a, const struct smcr_peer_id *b)
{
	return a->instance == b->instance && memcmp(a->mac, b->mac, SMCR_MAC_LEN) == 0;
}

static void check_proposal_eq(const struct smcr_clc_proposal *a, const struct smcr_clc_proposal *b)
{
	CU_ASSERT(peer_id_eq(&a->peer_id, &b->peer_id));
	CU_ASSERT(memcmp(a->gid, b->gid, SMCR_GID_LEN) == 0);
	CU_ASSERT(memcmp(a->mac, b->mac, SMCR_MAC_LEN) == 0);
	CU_ASSERT_EQUAL(a->ip_area_offset, b->ip_area_offset);
	CU_ASSERT_EQUAL(a->ipv4_subnet, b->ipv4_subnet);
	CU_ASSERT_EQUAL(a->ipv4_mask_len, b->ipv4_mask_len);
	CU_ASSERT_EQUAL_FATAL(a->ipv6_prefix_count, b->ipv6_prefix_count);
	for (unsigned int i = 0; i < a->ipv6_prefix_count; i++) {
		CU_ASSERT(memcmp(a->ipv6_prefix[i].prefix, b->ipv6_prefix[i].prefix, 16) == 0);
		CU_ASSERT_EQUAL(a->ipv6_prefix[i].len, b->ipv6_prefix[i].len);
	}
}

static void check_acc_conf_eq(const struct smcr_clc_accept_confirm *a,
			      const struct smcr_clc_accept_confirm *b)
{
	CU_ASSERT(peer_id_eq(&a->peer_id, &b->peer_id));
	CU_ASSERT(memcmp(a->gid, b->gid, SMCR_GID_LEN) == 0);
	CU_ASSERT(memcmp(a->mac, b->mac, SMCR_MAC_LEN) == 0);
	CU_ASSERT_EQUAL(a->qpn, b->qpn);
	CU_ASSERT_EQUAL(a->rmb_rkey, b->rmb_rkey);
	CU_ASSERT_EQUAL(a->rmbe_idx, b->rmbe_idx);
	CU_ASSERT_EQUAL(a->rmbe_alert_token, b->rmbe_alert_token);
	CU_ASSERT_EQUAL(a->rmbe_size, b->rmbe_size);
	CU_ASSERT_EQUAL(a->qp_mtu, b->qp_mtu);
	CU_ASSERT_EQUAL(a->rmb_vaddr, b->rmb_vaddr);
	CU_ASSERT_EQUAL(a->psn, b->psn);
}

static const struct smcr_clc_cfg client_cfg = {
	.peer_id = { .instance = 0x0c0c, .mac = { 0xc1, 0xc2, 0xc3, 0xc4, 0xc5, 0xc6 } },
};
static const struct smcr_clc_cfg server_cfg = {
	.peer_id = { .instance = 0x5e5e, .mac = { 0x51, 0x52, 0x53, 0x54, 0x55, 0x56 } },
};

/* The server side in a thread. */
struct server_run {
	int fd;
	const struct smcr_clc_ops *ops;
	struct stub *stub;
	struct smcr_clc_cfg cfg;
	struct smcr_clc_result res;
	int ret;
	long long elapsed_ms;
};

static void *server_thread(void *p)
{
	struct server_run *r = p;
	long long t0 = now_ms();

	r->ret = smcr_clc_server(r->fd, r->ops, r->stub, &r->cfg, &r->res);
	r->elapsed_ms = now_ms() - t0;
	return NULL;
}

/* Runs client and server against each other. */
struct pair_run {
	int cfd, sfd;
	struct stub cs, ss;		/* client's and server's stubs */
	struct server_run srv;
	struct smcr_clc_result cres;
	int cret;
};

/* ... on p->cfd and p->sfd, with the given configurations */
static void run_pair_cfg_on(struct pair_run *p, const struct smcr_clc_cfg *ccfg,
			    const struct smcr_clc_cfg *scfg)
{
	struct side t;

	p->srv.fd = p->sfd;
	p->srv.ops = &stub_ops;
	p->srv.stub = &p->ss;
	p->srv.cfg = *scfg;
	side_start(&t, server_thread, &p->srv);
	p->cret = smcr_clc_client(p->cfd, &stub_ops, &p->cs, ccfg, &p->cres);
	side_join(&t);
}

static void run_pair_on(struct pair_run *p)
{
	run_pair_cfg_on(p, &client_cfg, &server_cfg);
}

static void run_pair(struct pair_run *p)
{
	tcp_pair(&p->cfd, &p->sfd);
	run_pair_on(p);
}

static void close_pair(struct pair_run *p)
{
	close(p->cfd);
	close(p->sfd);
}

/* ---- (1)(2) successful exchanges ---------------------------------------- */

static void check_success(bool first_contact)
{
	struct pair_run p;
	const struct smcr_clc_result *c = &p.cres, *s = &p.srv.res;
	struct smcr_clc_decline d;

	memset(&p, 0, sizeof(p));
	stub_init(&p.cs, first_contact);
	stub_init(&p.ss, first_contact);
	if (!first_contact)
		p.cs.conf_out.qp_mtu = 0;	/* not validated on subsequent contact */
	run_pair(&p);

	CU_ASSERT_EQUAL(p.cret, SMCR_CLC_SMCR);
	CU_ASSERT_EQUAL(p.srv.ret, SMCR_CLC_SMCR);
	CU_ASSERT_EQUAL(c->outcome, SMCR_CLC_SMCR);
	CU_ASSERT_EQUAL(s->outcome, SMCR_CLC_SMCR);
	CU_ASSERT_EQUAL(c->first_contact, first_contact);
	CU_ASSERT_EQUAL(s->first_contact, first_contact);
	CU_ASSERT(c->have_proposal && c->have_accept && c->have_confirm && !c->have_decline);
	CU_ASSERT(s->have_proposal && s->have_accept && s->have_confirm && !s->have_decline);

	/* every field arrived intact, both ways */
	CU_ASSERT_EQUAL(p.ss.n_accept_proposal, 1);
	check_proposal_eq(&p.ss.prop_in, &p.cs.prop_out);
	check_proposal_eq(&s->proposal, &p.cs.prop_out);
	CU_ASSERT_EQUAL(p.cs.n_accept, 1);
	check_acc_conf_eq(&p.cs.acc_in, &p.ss.acc_out);
	check_acc_conf_eq(&c->accept, &p.ss.acc_out);
	CU_ASSERT_EQUAL(p.cs.acc_in.first_contact, first_contact);
	CU_ASSERT_EQUAL(p.ss.n_confirm, 1);
	check_acc_conf_eq(&p.ss.conf_in, &p.cs.conf_out);
	check_acc_conf_eq(&s->confirm, &p.cs.conf_out);
	CU_ASSERT_EQUAL(p.cs.n_undo + p.ss.n_undo, 0);

	/* counters */
	CU_ASSERT_EQUAL(c->stats.proposals_sent, 1);
	CU_ASSERT_EQUAL(c->stats.accepts_rcvd, 1);
	CU_ASSERT_EQUAL(c->stats.confirms_sent, 1);
	CU_ASSERT_EQUAL(c->stats.declines_sent + c->stats.declines_rcvd, 0);
	CU_ASSERT_EQUAL(c->stats.smcr, 1);
	CU_ASSERT_EQUAL(c->stats.first_contacts, first_contact ? 1 : 0);
	CU_ASSERT_EQUAL(c->stats.fallbacks + c->stats.aborts + c->stats.timeouts, 0);
	CU_ASSERT_EQUAL(s->stats.proposals_rcvd, 1);
	CU_ASSERT_EQUAL(s->stats.accepts_sent, 1);
	CU_ASSERT_EQUAL(s->stats.confirms_rcvd, 1);
	CU_ASSERT_EQUAL(s->stats.smcr, 1);
	CU_ASSERT_EQUAL(s->stats.first_contacts, first_contact ? 1 : 0);
	CU_ASSERT_EQUAL(s->stats.fallbacks + s->stats.aborts + s->stats.timeouts, 0);

	/* the CLC bytes are all consumed: nothing left on either side */
	CU_ASSERT_EQUAL(smcr_clc_recv_decline(p.cfd, 0, &d, NULL), 0);
	CU_ASSERT_EQUAL(smcr_clc_recv_decline(p.sfd, 0, &d, NULL), 0);
	close_pair(&p);
}

static void test_first_contact(void)
{
	check_success(true);
}

static void test_subsequent_contact(void)
{
	check_success(false);
}

/* The socket's flags are left as they were, blocking or not. */
static void test_fd_flags_kept(void)
{
	struct pair_run p;
	int cflags, sflags;

	memset(&p, 0, sizeof(p));
	stub_init(&p.cs, true);
	stub_init(&p.ss, true);
	tcp_pair(&p.cfd, &p.sfd);
	cflags = fcntl(p.cfd, F_GETFL) | O_NONBLOCK;
	CU_ASSERT_FATAL(fcntl(p.cfd, F_SETFL, cflags) == 0);
	sflags = fcntl(p.sfd, F_GETFL);
	CU_ASSERT(!(sflags & O_NONBLOCK));
	run_pair_on(&p);
	CU_ASSERT_EQUAL(p.cret, SMCR_CLC_SMCR);
	CU_ASSERT_EQUAL(p.srv.ret, SMCR_CLC_SMCR);
	CU_ASSERT_EQUAL(fcntl(p.cfd, F_GETFL), cflags);
	CU_ASSERT_EQUAL(fcntl(p.sfd, F_GETFL), sflags);
	close_pair(&p);
}

/* ---- (3)(4)(5) Declines at each step ------------------------------------- */

static void check_fallback_pair(const struct pair_run *p, uint32_t code, bool client_declined)
{
	const struct smcr_clc_result *decliner = client_declined ? &p->cres : &p->srv.res;
	const struct smcr_clc_result *other = client_declined ? &p->srv.res : &p->cres;
	const struct smcr_clc_cfg *dcfg = client_declined ? &client_cfg : &server_cfg;
	unsigned int idx = smcr_clc_reason_index(code);

	CU_ASSERT_EQUAL(p->cret, SMCR_CLC_FALLBACK);
	CU_ASSERT_EQUAL(p->srv.ret, SMCR_CLC_FALLBACK);
	CU_ASSERT_EQUAL(decliner->outcome, SMCR_CLC_FALLBACK);
	CU_ASSERT_EQUAL(decliner->reason, code);
	CU_ASSERT_EQUAL(decliner->side, SMCR_CLC_SIDE_LOCAL);
	CU_ASSERT_EQUAL(decliner->stats.declines_sent, 1);
	CU_ASSERT_EQUAL(decliner->stats.declines_sent_by[idx], 1);
	CU_ASSERT_EQUAL(decliner->stats.declines_rcvd, 0);
	CU_ASSERT_EQUAL(other->outcome, SMCR_CLC_FALLBACK);
	CU_ASSERT_EQUAL(other->reason, code);
	CU_ASSERT_EQUAL(other->side, SMCR_CLC_SIDE_PEER);
	CU_ASSERT_EQUAL(other->stats.declines_rcvd, 1);
	CU_ASSERT_EQUAL(other->stats.declines_rcvd_by[idx], 1);
	CU_ASSERT_EQUAL(other->stats.declines_sent, 0);
	CU_ASSERT(other->have_decline);
	CU_ASSERT_EQUAL(other->decline.diagnosis, code);
	CU_ASSERT(peer_id_eq(&other->decline.peer_id, &dcfg->peer_id));
	CU_ASSERT_EQUAL(other->decline.out_of_sync, code == SMCR_DECL_SYNCERR);
	CU_ASSERT_EQUAL(other->peer_out_of_sync, code == SMCR_DECL_SYNCERR);
	for (int i = 0; i < 2; i++) {
		const struct smcr_clc_result *r = i ? decliner : other;

		CU_ASSERT_EQUAL(r->stats.fallbacks, 1);
		CU_ASSERT_EQUAL(r->stats.fallbacks_by[idx], 1);
		CU_ASSERT_EQUAL(r->stats.smcr + r->stats.aborts + r->stats.timeouts, 0);
	}
}

static void test_client_no_rnic(void)
{
	struct pair_run p;

	memset(&p, 0, sizeof(p));
	stub_init(&p.cs, true);
	stub_init(&p.ss, true);
	p.cs.propose_code = SMCR_DECL_NOSMCRDEV;
	run_pair(&p);
	check_fallback_pair(&p, SMCR_DECL_NOSMCRDEV, true);
	CU_ASSERT_EQUAL(p.cres.stats.proposals_sent, 0);
	CU_ASSERT_EQUAL(p.srv.res.stats.proposals_rcvd, 0);
	CU_ASSERT_EQUAL(p.ss.n_accept_proposal, 0);
	CU_ASSERT_EQUAL(p.cs.n_accept, 0);
	CU_ASSERT_EQUAL(p.cs.n_undo + p.ss.n_undo, 0);
	check_app_stream(p.cfd, p.sfd);
	close_pair(&p);
}

static void test_server_declines(void)
{
	struct pair_run p;

	memset(&p, 0, sizeof(p));
	stub_init(&p.cs, true);
	stub_init(&p.ss, true);
	p.ss.accept_proposal_code = SMCR_DECL_MEM;
	run_pair(&p);
	check_fallback_pair(&p, SMCR_DECL_MEM, false);
	CU_ASSERT_EQUAL(p.cres.stats.proposals_sent, 1);
	CU_ASSERT_EQUAL(p.srv.res.stats.proposals_rcvd, 1);
	CU_ASSERT_EQUAL(p.cs.n_accept, 0);
	CU_ASSERT_EQUAL(p.ss.n_confirm, 0);
	CU_ASSERT_EQUAL(p.cs.n_undo + p.ss.n_undo, 0);	/* nothing was set up */
	check_app_stream(p.cfd, p.sfd);
	close_pair(&p);
}

static void check_client_declines_accept(uint32_t code)
{
	struct pair_run p;

	memset(&p, 0, sizeof(p));
	stub_init(&p.cs, code != SMCR_DECL_SYNCERR);
	stub_init(&p.ss, code != SMCR_DECL_SYNCERR);
	p.cs.accept_code = code;
	run_pair(&p);
	check_fallback_pair(&p, code, true);
	CU_ASSERT_EQUAL(p.cs.n_accept, 1);
	CU_ASSERT_EQUAL(p.ss.n_confirm, 0);
	CU_ASSERT_EQUAL(p.srv.res.stats.accepts_sent, 1);
	CU_ASSERT_EQUAL(p.cres.stats.accepts_rcvd, 1);
	CU_ASSERT_EQUAL(p.cres.stats.confirms_sent, 0);
	/* the server had set up a link group and RMBE: undone */
	CU_ASSERT_EQUAL(p.ss.n_undo, 1);
	CU_ASSERT_EQUAL(p.ss.undo_outcome, SMCR_CLC_FALLBACK);
	CU_ASSERT_EQUAL(p.cs.n_undo, 0);
	check_app_stream(p.cfd, p.sfd);
	close_pair(&p);
}

static void test_client_declines_accept(void)
{
	check_client_declines_accept(SMCR_DECL_ERR_RDYLNK);
}

/* C.4: the Accept names a link the client does not have. */
static void test_client_out_of_sync(void)
{
	check_client_declines_accept(SMCR_DECL_SYNCERR);
}

/* First contact: the server may still decline after the Confirm (C.2); the
 * client, already done with CLC, picks the Decline up while it waits for
 * CONFIRM LINK. */
static void test_server_declines_confirm_first_contact(void)
{
	struct pair_run p;
	struct smcr_clc_decline d;
	struct smcr_clc_stats st;

	memset(&p, 0, sizeof(p));
	memset(&st, 0, sizeof(st));
	stub_init(&p.cs, true);
	stub_init(&p.ss, true);
	p.ss.confirm_code = SMCR_DECL_ERR_RDYLNK;
	run_pair(&p);
	CU_ASSERT_EQUAL(p.cret, SMCR_CLC_SMCR);
	CU_ASSERT_EQUAL(p.srv.ret, SMCR_CLC_FALLBACK);
	CU_ASSERT_EQUAL(p.srv.res.reason, SMCR_DECL_ERR_RDYLNK);
	CU_ASSERT_EQUAL(p.srv.res.side, SMCR_CLC_SIDE_LOCAL);
	CU_ASSERT_EQUAL(p.ss.n_undo, 1);
	CU_ASSERT_EQUAL(smcr_clc_recv_decline(p.cfd, 2000, &d, &st), 1);
	CU_ASSERT_EQUAL(d.diagnosis, SMCR_DECL_ERR_RDYLNK);
	CU_ASSERT(peer_id_eq(&d.peer_id, &server_cfg.peer_id));
	CU_ASSERT_EQUAL(st.declines_rcvd, 1);
	CU_ASSERT_EQUAL(st.declines_rcvd_by[smcr_clc_reason_index(SMCR_DECL_ERR_RDYLNK)], 1);
	check_app_stream(p.cfd, p.sfd);
	close_pair(&p);
}

/* ... and the client may decline while CONFIRM LINK is pending. */
static void test_client_declines_after_confirm(void)
{
	struct pair_run p;
	struct smcr_clc_decline d;
	struct smcr_clc_stats st;

	memset(&p, 0, sizeof(p));
	memset(&st, 0, sizeof(st));
	stub_init(&p.cs, true);
	stub_init(&p.ss, true);
	run_pair(&p);
	CU_ASSERT_EQUAL(p.cret, SMCR_CLC_SMCR);
	CU_ASSERT_EQUAL(p.srv.ret, SMCR_CLC_SMCR);
	CU_ASSERT_EQUAL(smcr_clc_send_decline(p.cfd, &client_cfg.peer_id, SMCR_DECL_TIMEOUT_CL,
					      0, &st), 0);
	CU_ASSERT_EQUAL(st.declines_sent, 1);
	CU_ASSERT_EQUAL(smcr_clc_recv_decline(p.sfd, -1, &d, NULL), 1);
	CU_ASSERT_EQUAL(d.diagnosis, SMCR_DECL_TIMEOUT_CL);
	CU_ASSERT(!d.out_of_sync);
	check_app_stream(p.cfd, p.sfd);
	close_pair(&p);
}

/* Subsequent contact: no Decline after the Accept (C.3): abort instead. */
static void test_server_refuses_confirm_subsequent(void)
{
	struct pair_run p;

	memset(&p, 0, sizeof(p));
	stub_init(&p.cs, false);
	stub_init(&p.ss, false);
	p.ss.confirm_code = SMCR_DECL_NOACTLINK;
	run_pair(&p);
	CU_ASSERT_EQUAL(p.cret, SMCR_CLC_SMCR);
	CU_ASSERT_EQUAL(p.srv.ret, -ECONNABORTED);
	CU_ASSERT_EQUAL(p.srv.res.outcome, SMCR_CLC_ABORT);
	CU_ASSERT_EQUAL(p.srv.res.reason, SMCR_DECL_NOACTLINK);
	CU_ASSERT_EQUAL(p.srv.res.stats.declines_sent, 0);
	CU_ASSERT_EQUAL(p.srv.res.stats.aborts, 1);
	CU_ASSERT_EQUAL(p.ss.n_undo, 1);
	close_pair(&p);
}

/* A first-contact Confirm with a reserved MTU: Decline (C.6 enumerated). */
static void test_confirm_bad_mtu(void)
{
	struct pair_run p;
	struct smcr_clc_decline d;

	memset(&p, 0, sizeof(p));
	stub_init(&p.cs, true);
	stub_init(&p.ss, true);
	p.cs.conf_out.qp_mtu = 9;
	run_pair(&p);
	CU_ASSERT_EQUAL(p.cret, SMCR_CLC_SMCR);
	CU_ASSERT_EQUAL(p.srv.ret, SMCR_CLC_FALLBACK);
	CU_ASSERT_EQUAL(p.srv.res.reason, SMCR_DECL_CNFERR);
	CU_ASSERT_EQUAL(p.ss.n_confirm, 0);
	CU_ASSERT_EQUAL(smcr_clc_recv_decline(p.cfd, 2000, &d, NULL), 1);
	CU_ASSERT_EQUAL(d.diagnosis, SMCR_DECL_CNFERR);
	check_app_stream(p.cfd, p.sfd);
	close_pair(&p);
}

/* ---- a scripted peer for the malformed cases ----------------------------- */

struct raw {
	int fd;
	const void *send1;		/* written first */
	size_t send1_len;
	size_t read_len;		/* then this much read (0: nothing) */
	const void *send2;		/* then written */
	size_t send2_len;
	int close_after;		/* then close the fd (1) */
	int hold_ms;			/* then stay silent this long */
	uint8_t got[512];
	int read_rc;
};

static void *raw_thread(void *p)
{
	struct raw *r = p;

	if (r->send1_len)
		write_all(r->fd, r->send1, r->send1_len);
	if (r->read_len)
		r->read_rc = read_exact(r->fd, r->got, r->read_len);
	if (r->send2_len)
		write_all(r->fd, r->send2, r->send2_len);
	if (r->hold_ms)
		poll(NULL, 0, r->hold_ms);
	if (r->close_after)
		shutdown(r->fd, SHUT_RDWR);
	return NULL;
}

static size_t encode(const struct smcr_clc_msg *m, uint8_t *buf, size_t cap)
{
	int n = smcr_clc_encode(m, buf, cap);

	CU_ASSERT_FATAL(n > 0);
	return (size_t)n;
}

static size_t proposal_bytes(uint8_t *buf, size_t cap)
{
	struct smcr_clc_msg m;
	struct stub st;

	stub_init(&st, true);
	memset(&m, 0, sizeof(m));
	m.hdr.type = SMCR_CLC_PROPOSAL;
	m.proposal = st.prop_out;
	return encode(&m, buf, cap);
}

/* A server against a scripted client; returns the server's result. */
static void run_server_raw(struct raw *r, struct server_run *srv, const struct smcr_clc_cfg *cfg,
			   struct stub *st)
{
	int cfd, sfd;
	struct side t;

	tcp_pair(&cfd, &sfd);
	r->fd = cfd;
	srv->fd = sfd;
	srv->ops = &stub_ops;
	srv->stub = st;
	srv->cfg = cfg ? *cfg : server_cfg;
	side_start(&t, raw_thread, r);
	server_thread(srv);
	side_join(&t);
}

/* (6) v2 Proposals.  Linux 6.1's over rxe (tests/vectors/kernel-smcr-v2.txt,
 * frame 9: 156 bytes, byte 7 0x22: version 2, SMC-Rv2 only, v1 type none):
 * read whole and declined with a v1 Decline, as a Linux server without a
 * v2 device does (0x03030000); fallback. */
static const char linux_v2_only_proposal[] =
	"e2d4c3d901009c22000000000000000000000000000000000000000000000000"
	"000000000000000000000000000000000000001c000000000000000000000000"
	"0000000000000000000000000000000001000000000000000000000000000000"
	"0000ffff0a01010100000000000000000000000000000000534d435242442e4b"
	"504545522020202020202020202020202020202020202020e2d4c3d9";

static size_t unhex(const char *h, uint8_t *out, size_t cap)
{
	size_t n = 0;
	unsigned int b;

	while (h[0] && h[1] && n < cap && sscanf(h, "%2x", &b) == 1) {
		out[n++] = (uint8_t)b;
		h += 2;
	}
	return n;
}

static void test_v2_proposal(void)
{
	static const uint8_t decl_head[8] = { 0xe2, 0xd4, 0xc3, 0xd9, 0x04, 0x00, 0x1c, 0x10 };
	uint8_t v2[300];
	struct raw r;
	struct server_run srv;
	struct stub st;
	struct smcr_clc_msg d;
	size_t n = unhex(linux_v2_only_proposal, v2, sizeof(v2));

	CU_ASSERT_EQUAL_FATAL(n, 156);
	memset(&r, 0, sizeof(r));
	memset(&srv, 0, sizeof(srv));
	stub_init(&st, true);
	r.send1 = v2;
	r.send1_len = n;
	r.read_len = SMCR_CLC_DECLINE_LEN;
	run_server_raw(&r, &srv, NULL, &st);

	CU_ASSERT_EQUAL(srv.ret, SMCR_CLC_FALLBACK);
	CU_ASSERT_EQUAL(srv.res.reason, SMCR_DECL_NOSMCDEV);
	CU_ASSERT_EQUAL(srv.res.side, SMCR_CLC_SIDE_LOCAL);
	CU_ASSERT_EQUAL(srv.res.stats.version_mismatches, 1);
	CU_ASSERT_EQUAL(srv.res.stats.v2_proposals_as_v1, 0);
	CU_ASSERT_EQUAL(srv.res.stats.declines_sent, 1);
	CU_ASSERT_EQUAL(srv.res.stats.fallbacks_by[smcr_clc_reason_index(SMCR_DECL_NOSMCDEV)], 1);
	CU_ASSERT_EQUAL(st.n_accept_proposal, 0);
	CU_ASSERT_EQUAL(r.read_rc, 0);
	/* What Linux's smc_clc_msg_decl_valid() takes: version 1 with
	 * exactly 28 bytes; S (0x08 of byte 7) clear; diagnosis at 16. */
	CU_ASSERT_EQUAL(memcmp(r.got, decl_head, sizeof(decl_head)), 0);
	CU_ASSERT_EQUAL(memcmp(r.got + 16, "\x03\x03\x00\x00", 4), 0);
	CU_ASSERT_EQUAL(memcmp(r.got + 24, "\xe2\xd4\xc3\xd9", 4), 0);
	CU_ASSERT_EQUAL(smcr_clc_decode_type(r.got, SMCR_CLC_DECLINE_LEN, SMCR_CLC_DECLINE, &d),
			SMCR_CLC_DECLINE_LEN);
	CU_ASSERT_EQUAL(d.decline.diagnosis, SMCR_DECL_NOSMCDEV);
	CU_ASSERT_FALSE(d.decline.out_of_sync);
	CU_ASSERT(peer_id_eq(&d.decline.peer_id, &server_cfg.peer_id));
	check_app_stream(r.fd, srv.fd);
	close(r.fd);
	close(srv.fd);

	/* Its v1 part alone: typev1 none is "no SMC-R v1". */
	CU_ASSERT_EQUAL(smcr_clc_proposal_v2_decode(v2, n, &d.proposal), SMCR_E_VERSION);
}

/* A v2 Proposal that offers SMC-R v1 too (byte 7 0x20: typev2 R, typev1
 * R) gets a v1 Accept; the v2 extension after the prefixes is skipped. */
static void test_v2_proposal_offers_v1(void)
{
	uint8_t v1[SMCR_CLC_MAX_V1_LEN], v2[SMCR_CLC_MAX_V1_LEN + 64], conf[SMCR_CLC_ACCEPT_LEN];
	struct smcr_clc_msg m;
	struct raw r;
	struct server_run srv;
	struct stub st;
	size_t n = proposal_bytes(v1, sizeof(v1)), n2 = n + 48;

	stub_init(&st, true);
	/* v1 body, 48 bytes of v2 extension, the trailer */
	memcpy(v2, v1, n - SMCR_CLC_TRAILER_LEN);
	fill_bytes(v2 + n - SMCR_CLC_TRAILER_LEN, 48, 0x5a);
	memcpy(v2 + n2 - SMCR_CLC_TRAILER_LEN, "\xe2\xd4\xc3\xd9", 4);
	v2[5] = (uint8_t)(n2 >> 8);
	v2[6] = (uint8_t)n2;
	v2[7] = 0x20;
	memset(&m, 0, sizeof(m));
	CU_ASSERT_EQUAL(smcr_clc_proposal_v2_decode(v2, n2, &m.proposal), 0);
	CU_ASSERT(peer_id_eq(&m.proposal.peer_id, &st.prop_out.peer_id));
	CU_ASSERT_EQUAL(m.proposal.ipv4_subnet, st.prop_out.ipv4_subnet);
	/* Not a v1 decoder's message: trailing bytes before the trailer. */
	CU_ASSERT_EQUAL(smcr_clc_proposal_v2_decode(v2, n2 - 1, &m.proposal), SMCR_E_TRUNC);
	v2[7] = 0x22;	/* typev1 none */
	CU_ASSERT_EQUAL(smcr_clc_proposal_v2_decode(v2, n2, &m.proposal), SMCR_E_VERSION);
	v2[7] = 0x23;	/* typev1 both */
	CU_ASSERT_EQUAL(smcr_clc_proposal_v2_decode(v2, n2, &m.proposal), 0);
	v2[7] = 0x20;

	memset(&m, 0, sizeof(m));
	m.hdr.type = SMCR_CLC_CONFIRM;
	m.confirm = st.conf_out;
	CU_ASSERT_EQUAL_FATAL(encode(&m, conf, sizeof(conf)), SMCR_CLC_CONFIRM_LEN);
	memset(&r, 0, sizeof(r));
	memset(&srv, 0, sizeof(srv));
	r.send1 = v2;
	r.send1_len = n2;
	r.read_len = SMCR_CLC_ACCEPT_LEN;
	r.send2 = conf;
	r.send2_len = SMCR_CLC_CONFIRM_LEN;
	run_server_raw(&r, &srv, NULL, &st);
	CU_ASSERT_EQUAL(srv.ret, SMCR_CLC_SMCR);
	CU_ASSERT_EQUAL(srv.res.stats.v2_proposals_as_v1, 1);
	CU_ASSERT_EQUAL(srv.res.stats.version_mismatches, 0);
	CU_ASSERT_EQUAL(st.n_accept_proposal, 1);
	CU_ASSERT_EQUAL(st.n_confirm, 1);
	CU_ASSERT(peer_id_eq(&st.prop_in.peer_id, &st.prop_out.peer_id));
	CU_ASSERT_EQUAL(memcmp(st.prop_in.gid, st.prop_out.gid, SMCR_GID_LEN), 0);
	/* A v1 Accept: version 1, first contact, 68 bytes. */
	CU_ASSERT_EQUAL(r.read_rc, 0);
	CU_ASSERT_EQUAL(r.got[4], SMCR_CLC_ACCEPT);
	CU_ASSERT_EQUAL(r.got[6], SMCR_CLC_ACCEPT_LEN);
	CU_ASSERT_EQUAL(r.got[7], 0x18);
	check_app_stream(r.fd, srv.fd);
	close(r.fd);
	close(srv.fd);
}

/* (6b) SMC-Rv2 between two of ours: both with the EID, v2 end to end. */
static void eid_set(struct smcr_clc_cfg *cfg, const char *eid)
{
	cfg->eid_count = 1;
	memset(cfg->eids[0], ' ', SMCR_EID_LEN);
	memcpy(cfg->eids[0], eid, strlen(eid));
}

static void run_pair_cfg(struct pair_run *p, const struct smcr_clc_cfg *ccfg,
			 const struct smcr_clc_cfg *scfg)
{
	tcp_pair(&p->cfd, &p->sfd);
	run_pair_cfg_on(p, ccfg, scfg);
}

static void check_v2_pair(bool first_contact, bool server_eid, const char *client_eid)
{
	struct smcr_clc_cfg ccfg = client_cfg, scfg = server_cfg;
	const struct smcr_clc_result *c, *s;
	struct smcr_clc_decline d;
	struct pair_run p;
	bool v2 = server_eid && strcmp(client_eid, "SMCRBD.KPEER") == 0;

	memset(&p, 0, sizeof(p));
	c = &p.cres;
	s = &p.srv.res;
	stub_init(&p.cs, first_contact);
	stub_init(&p.ss, first_contact);
	/* a v2 GID: ::ffff:10.1.1.1 */
	memset(p.cs.prop_out.gid, 0, SMCR_GID_LEN);
	memcpy(p.cs.prop_out.gid + 10, "\xff\xff\x0a\x01\x01\x01", 6);
	eid_set(&ccfg, client_eid);
	if (server_eid) {
		eid_set(&scfg, "OTHER.EID");
		scfg.eid_count = 2;
		memset(scfg.eids[1], ' ', SMCR_EID_LEN);
		memcpy(scfg.eids[1], "SMCRBD.KPEER", 12);
	}
	run_pair_cfg(&p, &ccfg, &scfg);
	CU_ASSERT_EQUAL(p.cret, SMCR_CLC_SMCR);
	CU_ASSERT_EQUAL(p.srv.ret, SMCR_CLC_SMCR);
	CU_ASSERT_EQUAL(c->version, v2 ? 2 : 1);
	CU_ASSERT_EQUAL(s->version, v2 ? 2 : 1);
	CU_ASSERT_EQUAL(c->stats.v2, v2 ? 1 : 0);
	CU_ASSERT_EQUAL(s->stats.v2, v2 ? 1 : 0);
	CU_ASSERT_EQUAL(s->stats.v2_proposals_as_v1, v2 ? 0 : 1);
	if (v2) {
		CU_ASSERT(memcmp(c->eid, "SMCRBD.KPEER    ", 16) == 0);
		CU_ASSERT(memcmp(s->eid, c->eid, SMCR_EID_LEN) == 0);
	}
	CU_ASSERT_EQUAL(c->first_contact, first_contact);
	CU_ASSERT_EQUAL(s->first_contact, first_contact);
	/* every field arrived intact, both ways (the v2 GID is the RoCE GID) */
	check_proposal_eq(&p.ss.prop_in, &p.cs.prop_out);
	check_acc_conf_eq(&p.cs.acc_in, &p.ss.acc_out);
	CU_ASSERT_EQUAL(p.cs.acc_in.first_contact, first_contact);
	check_acc_conf_eq(&p.ss.conf_in, &p.cs.conf_out);
	CU_ASSERT_EQUAL(p.cs.n_undo + p.ss.n_undo, 0);
	CU_ASSERT_EQUAL(smcr_clc_recv_decline(p.cfd, 0, &d, NULL), 0);
	CU_ASSERT_EQUAL(smcr_clc_recv_decline(p.sfd, 0, &d, NULL), 0);
	close_pair(&p);
}

static void test_v2_first_contact(void)
{
	check_v2_pair(true, true, "SMCRBD.KPEER");
}

static void test_v2_subsequent_contact(void)
{
	check_v2_pair(false, true, "SMCRBD.KPEER");
}

static void test_v2_to_v1_server(void)
{
	check_v2_pair(true, false, "SMCRBD.KPEER");
}

static void test_v2_no_common_eid(void)
{
	check_v2_pair(true, true, "NOT.THEIRS");
}

/* Linux 6.1's v2-only Proposal to a server with its EID: a v2 Accept
 * (first contact: the first-contact extension) that Linux's decoder
 * takes, the EID echoed; with another EID only: Decline 0x03030008. */
static void test_v2_kernel_proposal(void)
{
	struct smcr_clc_cfg cfg = server_cfg;
	struct smcr_clc_v2_msg m;
	struct server_run srv;
	uint8_t v2[300];
	struct stub st;
	struct raw r;
	size_t n = unhex(linux_v2_only_proposal, v2, sizeof(v2));
	int len;

	eid_set(&cfg, "SMCRBD.KPEER");
	memset(&r, 0, sizeof(r));
	memset(&srv, 0, sizeof(srv));
	stub_init(&st, true);
	r.send1 = v2;
	r.send1_len = n;
	memset(&m, 0, sizeof(m));
	m.hdr.type = SMCR_CLC_ACCEPT;
	m.accept.r = st.acc_out;
	m.accept.r.first_contact = true;
	len = smcr_clc_v2_encoded_len(&m);
	CU_ASSERT_EQUAL_FATAL(len, 160);	/* as the kernel's own (frame 11) */
	r.read_len = (size_t)len;
	r.close_after = 1;
	run_server_raw(&r, &srv, &cfg, &st);
	CU_ASSERT_EQUAL(r.read_rc, 0);
	CU_ASSERT_EQUAL(st.n_accept_proposal, 1);
	/* the client's RoCE v2 GID from the v2 extension: ::ffff:10.1.1.1 */
	CU_ASSERT(memcmp(st.prop_in.gid + 10, "\xff\xff\x0a\x01\x01\x01", 6) == 0);
	CU_ASSERT_EQUAL(smcr_clc_v2_decode(r.got, (size_t)len, &m), len);
	CU_ASSERT_EQUAL(m.hdr.version, 2);
	CU_ASSERT(m.accept.r.first_contact);
	CU_ASSERT(m.accept.direct);
	CU_ASSERT(memcmp(m.accept.eid, "SMCRBD.KPEER ", 13) == 0);
	check_acc_conf_eq(&m.accept.r, &st.acc_out);
	CU_ASSERT_EQUAL(srv.res.version, 2);
	CU_ASSERT_EQUAL(srv.ret, -ECONNRESET);	/* no Confirm: we closed */
	close(r.fd);
	close(srv.fd);

	eid_set(&cfg, "ANOTHER");
	memset(&r, 0, sizeof(r));
	memset(&srv, 0, sizeof(srv));
	stub_init(&st, true);
	r.send1 = v2;
	r.send1_len = n;
	r.read_len = SMCR_CLC_DECLINE_LEN;
	run_server_raw(&r, &srv, &cfg, &st);
	CU_ASSERT_EQUAL(srv.ret, SMCR_CLC_FALLBACK);
	CU_ASSERT_EQUAL(srv.res.reason, SMCR_DECL_NOUEID);
	CU_ASSERT_EQUAL(memcmp(r.got + 16, "\x03\x03\x00\x08", 4), 0);
	close(r.fd);
	close(srv.fd);
}

/* A v1 Proposal with a growth area too large to buffer: dropped, declined. */
static void test_long_proposal(void)
{
	uint8_t buf[1200];
	struct smcr_clc_msg m;
	struct stub st;
	struct raw r;
	struct server_run srv;
	size_t n;

	stub_init(&st, true);
	memset(&m, 0, sizeof(m));
	m.hdr.type = SMCR_CLC_PROPOSAL;
	m.proposal = st.prop_out;
	m.proposal.ip_area_offset = 1000;
	n = encode(&m, buf, sizeof(buf));
	CU_ASSERT_FATAL(n > SMCR_CLC_MAX_V1_LEN);

	memset(&r, 0, sizeof(r));
	memset(&srv, 0, sizeof(srv));
	r.send1 = buf;
	r.send1_len = n;
	r.read_len = SMCR_CLC_DECLINE_LEN;
	run_server_raw(&r, &srv, NULL, &st);
	CU_ASSERT_EQUAL(srv.ret, SMCR_CLC_FALLBACK);
	CU_ASSERT_EQUAL(srv.res.reason, SMCR_DECL_CNFERR);
	CU_ASSERT_EQUAL(st.n_accept_proposal, 0);
	CU_ASSERT_EQUAL(r.read_rc, 0);
	check_app_stream(r.fd, srv.fd);
	close(r.fd);
	close(srv.fd);
}

/* A Proposal with out-of-range prefix data: Decline DIFFPREFIX. */
static void test_proposal_bad_prefix(void)
{
	uint8_t buf[SMCR_CLC_MAX_V1_LEN];
	struct stub st;
	struct raw r;
	struct server_run srv;
	struct smcr_clc_msg d;
	size_t n = proposal_bytes(buf, sizeof(buf));

	stub_init(&st, true);
	/* the mask length byte of the IP area: head 40 + growth 40 + 4 */
	CU_ASSERT_EQUAL_FATAL(buf[40 + 40 + 4], 24);
	buf[40 + 40 + 4] = 33;
	memset(&r, 0, sizeof(r));
	memset(&srv, 0, sizeof(srv));
	r.send1 = buf;
	r.send1_len = n;
	r.read_len = SMCR_CLC_DECLINE_LEN;
	run_server_raw(&r, &srv, NULL, &st);
	CU_ASSERT_EQUAL(srv.ret, SMCR_CLC_FALLBACK);
	CU_ASSERT_EQUAL(srv.res.reason, SMCR_DECL_DIFFPREFIX);
	CU_ASSERT_EQUAL(st.n_accept_proposal, 0);
	CU_ASSERT_EQUAL(smcr_clc_decode_type(r.got, SMCR_CLC_DECLINE_LEN, SMCR_CLC_DECLINE, &d),
			SMCR_CLC_DECLINE_LEN);
	CU_ASSERT_EQUAL(d.decline.diagnosis, SMCR_DECL_DIFFPREFIX);
	check_app_stream(r.fd, srv.fd);
	close(r.fd);
	close(srv.fd);
}

/* (7) garbage: protocol error, connection to be closed, no Decline */
static void check_server_garbage(const void *bytes, size_t len, int close_after)
{
	struct raw r;
	struct server_run srv;
	struct stub st;
	uint8_t rest[64];

	memset(&r, 0, sizeof(r));
	memset(&srv, 0, sizeof(srv));
	stub_init(&st, true);
	r.send1 = bytes;
	r.send1_len = len;
	r.close_after = close_after;
	run_server_raw(&r, &srv, NULL, &st);
	CU_ASSERT_EQUAL(srv.ret, -EPROTO);
	CU_ASSERT_EQUAL(srv.res.outcome, SMCR_CLC_ABORT);
	CU_ASSERT_EQUAL(srv.res.err, -EPROTO);
	CU_ASSERT_EQUAL(srv.res.stats.proto_errors, 1);
	CU_ASSERT_EQUAL(srv.res.stats.aborts, 1);
	CU_ASSERT_EQUAL(srv.res.stats.declines_sent, 0);
	CU_ASSERT_EQUAL(st.n_accept_proposal + st.n_undo, 0);
	CU_ASSERT(srv.elapsed_ms < 1500);
	/* the server wrote nothing: the client sees only the end */
	shutdown(srv.fd, SHUT_RDWR);
	if (!close_after)
		CU_ASSERT_EQUAL(read_to_eof(r.fd, rest, sizeof(rest)), 0);
	close(r.fd);
	close(srv.fd);
}

static void test_garbage(void)
{
	static const char http[] = "GET / HTTP/1.0\r\nHost: x\r\n\r\n";
	uint8_t buf[SMCR_CLC_MAX_V1_LEN], ac[SMCR_CLC_ACCEPT_LEN];
	struct smcr_clc_msg m;
	struct stub st;
	size_t n;

	check_server_garbage(http, sizeof(http) - 1, 0);
	/* a good header with a bad trailer */
	n = proposal_bytes(buf, sizeof(buf));
	buf[n - 1] ^= 0xff;
	check_server_garbage(buf, n, 0);
	/* a length below the type's minimum */
	n = proposal_bytes(buf, sizeof(buf));
	buf[5] = 0;
	buf[6] = 20;
	check_server_garbage(buf, 20, 1);
	/* an unknown type */
	n = proposal_bytes(buf, sizeof(buf));
	buf[4] = 9;
	check_server_garbage(buf, n, 0);
	/* an Accept where a Proposal belongs */
	stub_init(&st, true);
	memset(&m, 0, sizeof(m));
	m.hdr.type = SMCR_CLC_ACCEPT;
	m.accept = st.acc_out;
	encode(&m, ac, sizeof(ac));
	check_server_garbage(ac, sizeof(ac), 0);
	/* random bytes */
	fill_bytes(buf, sizeof(buf), 0x5a);
	check_server_garbage(buf, sizeof(buf), 1);
}

/* The client side against a scripted server. */
struct client_raw {
	struct raw r;
	struct stub st;
	struct smcr_clc_result res;
	int ret;
	long long elapsed_ms;
	int cfd;
};

static void run_client_raw(struct client_raw *c, const struct smcr_clc_cfg *cfg)
{
	struct side t;
	int sfd;
	long long t0;

	tcp_pair(&c->cfd, &sfd);
	c->r.fd = sfd;
	side_start(&t, raw_thread, &c->r);
	t0 = now_ms();
	c->ret = smcr_clc_client(c->cfd, &stub_ops, &c->st, cfg ? cfg : &client_cfg, &c->res);
	c->elapsed_ms = now_ms() - t0;
	side_join(&t);
}

/* (6c) SMC-Rv2.1 (release 1) release and limit negotiation, as Linux
 * 6.6+ does it (smc_listen_v2_check, smc_clc_srv_v2x_features_validate,
 * smc_clc_clnt_v2x_features_validate, smc_clc_v2x_features_confirm_check). */

/* Two of ours with the EID; cfg changes by the caller. */
static void v21_pair(struct pair_run *p, struct smcr_clc_cfg *ccfg, struct smcr_clc_cfg *scfg)
{
	memset(p, 0, sizeof(*p));
	stub_init(&p->cs, true);
	stub_init(&p->ss, true);
	memset(p->cs.prop_out.gid, 0, SMCR_GID_LEN);
	memcpy(p->cs.prop_out.gid + 10, "\xff\xff\x0a\x01\x01\x01", 6);
	eid_set(ccfg, "SMCRBD.KPEER");
	eid_set(scfg, "SMCRBD.KPEER");
	run_pair_cfg(p, ccfg, scfg);
	CU_ASSERT_EQUAL(p->cret, SMCR_CLC_SMCR);
	CU_ASSERT_EQUAL(p->srv.ret, SMCR_CLC_SMCR);
	CU_ASSERT_EQUAL(p->cres.version, 2);
	CU_ASSERT_EQUAL(p->srv.res.version, 2);
}

static void check_v21_res(const struct smcr_clc_result *r, uint8_t rel, uint8_t conns,
			  uint8_t links)
{
	CU_ASSERT_EQUAL(r->release, rel);
	CU_ASSERT_EQUAL(r->max_conns, conns);
	CU_ASSERT_EQUAL(r->max_links, links);
	CU_ASSERT_EQUAL(r->stats.v21, rel >= 1 ? 1 : 0);
}

static void test_v21_pair(void)
{
	struct smcr_clc_cfg ccfg = client_cfg, scfg = server_cfg;
	struct pair_run p;

	/* both at release 1: 255 and 2 */
	v21_pair(&p, &ccfg, &scfg);
	check_v21_res(&p.cres, 1, 255, 2);
	check_v21_res(&p.srv.res, 1, 255, 2);
	close_pair(&p);
	/* the lower of each: the client's conns, the server's links */
	ccfg = client_cfg;
	scfg = server_cfg;
	ccfg.max_conns = 32;
	scfg.max_links = 1;
	v21_pair(&p, &ccfg, &scfg);
	check_v21_res(&p.cres, 1, 32, 1);
	check_v21_res(&p.srv.res, 1, 32, 1);
	close_pair(&p);
	/* out of range settings are clamped: conns 16, links 2 */
	ccfg = client_cfg;
	scfg = server_cfg;
	ccfg.max_conns = 3;
	scfg.max_links = 9;
	v21_pair(&p, &ccfg, &scfg);
	check_v21_res(&p.cres, 1, 16, 2);
	check_v21_res(&p.srv.res, 1, 16, 2);
	close_pair(&p);
	/* either side at release 0: release 0, nothing negotiated */
	ccfg = client_cfg;
	scfg = server_cfg;
	ccfg.v2_release0 = true;
	v21_pair(&p, &ccfg, &scfg);
	check_v21_res(&p.cres, 0, 0, 0);
	check_v21_res(&p.srv.res, 0, 0, 0);
	close_pair(&p);
	ccfg = client_cfg;
	scfg = server_cfg;
	scfg.v2_release0 = true;
	scfg.max_links = 1;
	v21_pair(&p, &ccfg, &scfg);
	check_v21_res(&p.cres, 0, 0, 0);
	check_v21_res(&p.srv.res, 0, 0, 0);
	close_pair(&p);
}

/* Linux 6.1's Proposal patched to what 6.12 sends (release 1, max_conns
 * 255, max_links 2, feature mask 1) and then to bad values. */
static size_t v21_proposal(uint8_t *v, size_t cap, uint8_t rel, uint8_t conns, uint8_t links)
{
	size_t n = unhex(linux_v2_only_proposal, v, cap);

	CU_ASSERT_FATAL(n == 156);
	v[80 + 3] = (uint8_t)(rel << 4);
	v[80 + 24] = conns;
	v[80 + 25] = links;
	v[80 + 27] = 1;
	return n;
}

/* Linux 6.12's own Proposal (tests/vectors/kernel-6.12-smcr-v21.txt,
 * frame 4): release 1, max_conns 255, max_links 2, feature mask 1. */
static const char linux612_proposal[] =
	"e2d4c3d901009c22000000000000000000000000000000000000000000000000"
	"000000000000000000000000000000000000001c000000000000000000000000"
	"0000000000000000000000000000000001000010000000000000000000000000"
	"0000ffff0a010101ff020001000000000000000000000000534d435242442e4b"
	"504545522020202020202020202020202020202020202020e2d4c3d9";

/* Our server against it: Accept (or a Decline) read back. */
static void v21_server_raw(const uint8_t *prop, size_t n, size_t read_len, bool release0,
			   struct raw *r, struct server_run *srv, struct stub *st)
{
	struct smcr_clc_cfg cfg = server_cfg;

	eid_set(&cfg, "SMCRBD.KPEER");
	cfg.v2_release0 = release0;
	memset(r, 0, sizeof(*r));
	memset(srv, 0, sizeof(*srv));
	stub_init(st, true);
	r->send1 = prop;
	r->send1_len = n;
	r->read_len = read_len;
	r->close_after = 1;
	run_server_raw(r, srv, &cfg, st);
}

static void test_v21_server(void)
{
	struct smcr_clc_v2_msg m;
	struct server_run srv;
	uint8_t v[300];
	struct stub st;
	struct raw r;
	size_t n;

	/* release 1: the Accept says release 1, 255, 2, no feature */
	n = v21_proposal(v, sizeof(v), 1, 255, 2);
	v21_server_raw(v, n, 160, false, &r, &srv, &st);
	CU_ASSERT_EQUAL(r.read_rc, 0);
	CU_ASSERT_EQUAL_FATAL(smcr_clc_v2_decode(r.got, 160, &m), 160);
	CU_ASSERT(m.accept.r.first_contact);
	CU_ASSERT_EQUAL(r.got[105], 0x21);		/* Linux, release 1 */
	CU_ASSERT_EQUAL(r.got[140], 255);		/* max_conns */
	CU_ASSERT_EQUAL(r.got[141], 2);			/* max_links */
	CU_ASSERT_EQUAL(r.got[142] | r.got[143], 0);	/* feature mask: none */
	CU_ASSERT_EQUAL(r.got[144] | r.got[145] | r.got[146] | r.got[147], 0);	/* vendor */
	CU_ASSERT_EQUAL(srv.res.release, 1);
	close(r.fd);
	close(srv.fd);
	/* the kernel's own: the same answer */
	n = unhex(linux612_proposal, v, sizeof(v));
	CU_ASSERT_EQUAL_FATAL(n, 156);
	v21_server_raw(v, n, 160, false, &r, &srv, &st);
	CU_ASSERT_EQUAL(r.got[105], 0x21);
	CU_ASSERT_EQUAL(r.got[140], 255);
	CU_ASSERT_EQUAL(r.got[141], 2);
	CU_ASSERT_EQUAL(r.got[142] | r.got[143], 0);
	CU_ASSERT_EQUAL(srv.res.max_links, 2);
	close(r.fd);
	close(srv.fd);
	/* a later release (2): answered at ours; the client's lower limits */
	n = v21_proposal(v, sizeof(v), 2, 100, 1);
	v21_server_raw(v, n, 160, false, &r, &srv, &st);
	CU_ASSERT_EQUAL(r.got[105], 0x21);
	CU_ASSERT_EQUAL(r.got[140], 100);
	CU_ASSERT_EQUAL(r.got[141], 1);
	close(r.fd);
	close(srv.fd);
	/* a server at release 0: release 0 and the 16 bytes zero, as 6.1 */
	n = v21_proposal(v, sizeof(v), 1, 255, 2);
	v21_server_raw(v, n, 160, true, &r, &srv, &st);
	CU_ASSERT_EQUAL(r.got[105], 0x20);
	for (unsigned int i = 140; i < 156; i++)
		CU_ASSERT_EQUAL(r.got[i], 0);
	close(r.fd);
	close(srv.fd);
	/* a release 0 client (6.1's own Proposal) gets release 0 */
	n = unhex(linux_v2_only_proposal, v, sizeof(v));
	v21_server_raw(v, n, 160, false, &r, &srv, &st);
	CU_ASSERT_EQUAL(r.got[105], 0x20);
	CU_ASSERT_EQUAL(r.got[140] | r.got[141], 0);
	CU_ASSERT_EQUAL(srv.res.release, 0);
	close(r.fd);
	close(srv.fd);
	/* bad limits at release 1: Declines 0x0303000a and 0x0303000b, and
	 * no group made for them */
	n = v21_proposal(v, sizeof(v), 1, 15, 2);
	v21_server_raw(v, n, SMCR_CLC_DECLINE_LEN, false, &r, &srv, &st);
	CU_ASSERT_EQUAL(srv.ret, SMCR_CLC_FALLBACK);
	CU_ASSERT_EQUAL(srv.res.reason, SMCR_DECL_MAXCONNERR);
	CU_ASSERT_EQUAL(memcmp(r.got + 16, "\x03\x03\x00\x0a", 4), 0);
	CU_ASSERT_EQUAL(st.n_accept_proposal, 0);
	CU_ASSERT_EQUAL(srv.res.stats.declines_sent_by[smcr_clc_reason_index(SMCR_DECL_MAXCONNERR)], 1);
	close(r.fd);
	close(srv.fd);
	n = v21_proposal(v, sizeof(v), 1, 255, 0);
	v21_server_raw(v, n, SMCR_CLC_DECLINE_LEN, false, &r, &srv, &st);
	CU_ASSERT_EQUAL(srv.res.reason, SMCR_DECL_MAXLINKERR);
	CU_ASSERT_EQUAL(memcmp(r.got + 16, "\x03\x03\x00\x0b", 4), 0);
	CU_ASSERT_EQUAL(st.n_accept_proposal, 0);
	close(r.fd);
	close(srv.fd);
	/* the same at release 0: not read, so no Decline */
	n = v21_proposal(v, sizeof(v), 0, 15, 0);
	v21_server_raw(v, n, 160, false, &r, &srv, &st);
	CU_ASSERT_EQUAL(st.n_accept_proposal, 1);
	CU_ASSERT_EQUAL(r.got[105], 0x20);
	close(r.fd);
	close(srv.fd);
}

/* Our server's Accept answered by a scripted Confirm: echoed exactly, or
 * declined (first contact: a Decline is allowed after the Accept). */
static void v21_confirm_case(uint8_t rel, uint8_t conns, uint8_t links, int want_ret,
			     uint32_t want_reason)
{
	struct smcr_clc_cfg cfg = server_cfg;
	struct smcr_clc_v2_msg m;
	struct server_run srv;
	uint8_t v[300], conf[300], decl[SMCR_CLC_DECLINE_LEN];
	struct stub st;
	struct raw r;
	size_t n = v21_proposal(v, sizeof(v), 1, 64, 2);
	int cn;

	memset(&m, 0, sizeof(m));
	m.hdr.type = SMCR_CLC_CONFIRM;
	stub_init(&st, true);
	m.confirm.r = st.conf_out;
	m.confirm.r.first_contact = true;
	memcpy(m.confirm.eid, "SMCRBD.KPEER                    ", SMCR_EID_LEN);
	m.confirm.direct = true;
	m.confirm.os_type = SMCR_CLC_OS_LINUX;
	m.confirm.release = rel;
	m.confirm.max_conns = conns;
	m.confirm.max_links = links;
	m.confirm.feature_mask = 0;
	m.confirm.gid_count = 1;
	cn = smcr_clc_v2_encode(&m, conf, sizeof(conf));
	CU_ASSERT_EQUAL_FATAL(cn, 180);
	eid_set(&cfg, "SMCRBD.KPEER");
	memset(&r, 0, sizeof(r));
	memset(&srv, 0, sizeof(srv));
	r.send1 = v;
	r.send1_len = n;
	r.read_len = 160;
	r.send2 = conf;
	r.send2_len = (size_t)cn;
	run_server_raw(&r, &srv, &cfg, &st);
	CU_ASSERT_EQUAL(r.got[140], 64);
	CU_ASSERT_EQUAL(srv.ret, want_ret);
	CU_ASSERT_EQUAL(srv.res.reason, want_reason);
	if (want_ret == SMCR_CLC_FALLBACK) {
		CU_ASSERT_EQUAL(read_exact(r.fd, decl, sizeof(decl)), 0);
		CU_ASSERT_EQUAL(decl[4], SMCR_CLC_DECLINE);
		CU_ASSERT_EQUAL((uint32_t)decl[16] << 24 | (uint32_t)decl[17] << 16 |
				(uint32_t)decl[18] << 8 | decl[19], want_reason);
		CU_ASSERT_EQUAL(st.n_confirm, 0);
		CU_ASSERT_EQUAL(st.n_undo, 1);
	} else {
		CU_ASSERT_EQUAL(st.n_confirm, 1);
		CU_ASSERT_EQUAL(srv.res.max_conns, 64);
		CU_ASSERT_EQUAL(srv.res.stats.v21, 1);
	}
	close(r.fd);
	close(srv.fd);
}

static void test_v21_server_confirm(void)
{
	v21_confirm_case(1, 64, 2, SMCR_CLC_SMCR, 0);
	v21_confirm_case(0, 64, 2, SMCR_CLC_FALLBACK, SMCR_DECL_RELEASEERR);
	v21_confirm_case(1, 65, 2, SMCR_CLC_FALLBACK, SMCR_DECL_MAXCONNERR);
	v21_confirm_case(1, 64, 1, SMCR_CLC_FALLBACK, SMCR_DECL_MAXLINKERR);
}

/* Our client against a scripted 6.12-like server: its Accept's release
 * and limits taken and echoed in the Confirm, or declined. */
static void v21_client_case(bool release0, uint8_t rel, uint8_t conns, uint8_t links,
			    int want_ret, uint32_t want_reason)
{
	struct smcr_clc_cfg cfg = client_cfg;
	struct smcr_clc_v2_msg m, pm;
	struct client_raw c;
	uint8_t acc[300], got[300];
	int an, pn;

	eid_set(&cfg, "SMCRBD.KPEER");
	cfg.v2_release0 = release0;
	cfg.max_conns = 128;
	memset(&c, 0, sizeof(c));
	stub_init(&c.st, true);
	/* the Proposal our client sends: v2 and v1, one EID */
	memset(&pm, 0, sizeof(pm));
	pm.hdr.type = SMCR_CLC_PROPOSAL;
	pm.proposal.typev1 = SMCR_CLC_TYPE_R;
	pm.proposal.typev2 = SMCR_CLC_TYPE_R;
	pm.proposal.v1 = c.st.prop_out;
	pm.proposal.eid_count = 1;
	pn = smcr_clc_v2_encoded_len(&pm);
	CU_ASSERT_FATAL(pn > 0);
	memset(&m, 0, sizeof(m));
	m.hdr.type = SMCR_CLC_ACCEPT;
	m.accept.r = c.st.acc_out;
	m.accept.r.first_contact = true;
	memcpy(m.accept.eid, cfg.eids[0], SMCR_EID_LEN);
	m.accept.direct = true;
	m.accept.os_type = SMCR_CLC_OS_LINUX;
	m.accept.release = rel;
	m.accept.max_conns = conns;
	m.accept.max_links = links;
	m.accept.feature_mask = 1;		/* Linux 6.12's own */
	m.accept.vendor_options = 0xabcd;	/* not read */
	an = smcr_clc_v2_encode(&m, acc, sizeof(acc));
	CU_ASSERT_EQUAL_FATAL(an, 160);
	c.r.read_len = (size_t)pn;
	c.r.send2 = acc;
	c.r.send2_len = (size_t)an;
	run_client_raw(&c, &cfg);
	CU_ASSERT_EQUAL(c.r.read_rc, 0);
	/* the Proposal: our release, and at release 1 our limits */
	CU_ASSERT_EQUAL_FATAL(smcr_clc_v2_decode(c.r.got, (size_t)pn, &pm), pn);
	CU_ASSERT_EQUAL(pm.proposal.release, release0 ? 0 : 1);
	CU_ASSERT_EQUAL(pm.proposal.max_conns, release0 ? 0 : 128);
	CU_ASSERT_EQUAL(pm.proposal.max_links, release0 ? 0 : 2);
	CU_ASSERT_EQUAL(pm.proposal.feature_mask, 0);
	CU_ASSERT_EQUAL(c.ret, want_ret);
	CU_ASSERT_EQUAL(c.res.reason, want_reason);
	if (want_ret == SMCR_CLC_FALLBACK) {
		CU_ASSERT_EQUAL(read_exact(c.r.fd, got, SMCR_CLC_DECLINE_LEN), 0);
		CU_ASSERT_EQUAL(got[4], SMCR_CLC_DECLINE);
		CU_ASSERT_EQUAL((uint32_t)got[16] << 24 | (uint32_t)got[17] << 16 |
				(uint32_t)got[18] << 8 | got[19], want_reason);
		CU_ASSERT_EQUAL(c.st.n_accept, 0);
	} else {
		/* the Confirm echoes release and limits, no feature, no vendor */
		CU_ASSERT_EQUAL(read_exact(c.r.fd, got, 180), 0);
		CU_ASSERT_EQUAL_FATAL(smcr_clc_v2_decode(got, 180, &m), 180);
		CU_ASSERT_EQUAL(m.confirm.release, rel);
		CU_ASSERT_EQUAL(got[105] & 0x0f, rel);
		CU_ASSERT_EQUAL(got[140], rel ? conns : 0);
		CU_ASSERT_EQUAL(got[141], rel ? links : 0);
		CU_ASSERT_EQUAL(m.confirm.feature_mask, 0);
		CU_ASSERT_EQUAL(m.confirm.vendor_options, 0);
		CU_ASSERT_EQUAL(c.res.release, rel);
		CU_ASSERT_EQUAL(c.res.max_conns, rel ? conns : 0);
		CU_ASSERT_EQUAL(c.res.max_links, rel ? links : 0);
	}
	close(c.cfd);
	close(c.r.fd);
}

static void test_v21_client(void)
{
	v21_client_case(false, 1, 128, 2, SMCR_CLC_SMCR, 0);
	v21_client_case(false, 1, 16, 1, SMCR_CLC_SMCR, 0);
	/* a 6.1 server: release 0, its 16 bytes not read */
	v21_client_case(false, 0, 7, 9, SMCR_CLC_SMCR, 0);
	/* a release 0 client: an Accept at release 1 is out of bounds */
	v21_client_case(true, 1, 128, 2, SMCR_CLC_FALLBACK, SMCR_DECL_RELEASEERR);
	v21_client_case(true, 0, 128, 2, SMCR_CLC_SMCR, 0);
	v21_client_case(false, 2, 128, 2, SMCR_CLC_FALLBACK, SMCR_DECL_RELEASEERR);
	v21_client_case(false, 1, 15, 2, SMCR_CLC_FALLBACK, SMCR_DECL_MAXCONNERR);
	v21_client_case(false, 1, 129, 2, SMCR_CLC_FALLBACK, SMCR_DECL_MAXCONNERR);
	v21_client_case(false, 1, 128, 0, SMCR_CLC_FALLBACK, SMCR_DECL_MAXLINKERR);
	v21_client_case(false, 1, 128, 3, SMCR_CLC_FALLBACK, SMCR_DECL_MAXLINKERR);
}

static void test_client_garbage_reply(void)
{
	static const char greeting[] = "NBDMAGIC\x00\x00\x42\x02\x81\x86\x12\x53IHAVEOPT";
	struct client_raw c;
	uint8_t buf[SMCR_CLC_MAX_V1_LEN];
	size_t n = proposal_bytes(buf, sizeof(buf));

	memset(&c, 0, sizeof(c));
	stub_init(&c.st, true);
	c.r.read_len = n;
	c.r.send2 = greeting;
	c.r.send2_len = sizeof(greeting) - 1;
	run_client_raw(&c, NULL);
	CU_ASSERT_EQUAL(c.ret, -EPROTO);
	CU_ASSERT_EQUAL(c.res.outcome, SMCR_CLC_ABORT);
	/* No CLC at all: smcr_connect() connects once more. */
	CU_ASSERT_TRUE(c.res.peer_not_clc);
	CU_ASSERT_EQUAL(c.res.stats.proto_errors, 1);
	CU_ASSERT_EQUAL(c.res.stats.proposals_sent, 1);
	CU_ASSERT_EQUAL(c.st.n_accept, 0);
	CU_ASSERT_EQUAL(c.r.read_rc, 0);
	CU_ASSERT(memcmp(c.r.got, buf, n) == 0);	/* the Proposal went out intact */
	close(c.cfd);
	close(c.r.fd);
}

/* A first-contact Accept with a reserved MTU: the client declines. */
static void test_client_accept_bad_mtu(void)
{
	uint8_t prop[SMCR_CLC_MAX_V1_LEN], acc[SMCR_CLC_ACCEPT_LEN];
	struct smcr_clc_msg m, d;
	struct client_raw c;

	memset(&c, 0, sizeof(c));
	stub_init(&c.st, true);
	memset(&m, 0, sizeof(m));
	m.hdr.type = SMCR_CLC_ACCEPT;
	m.accept = c.st.acc_out;
	m.accept.first_contact = true;
	m.accept.qp_mtu = 7;
	encode(&m, acc, sizeof(acc));
	c.r.read_len = proposal_bytes(prop, sizeof(prop));
	c.r.send2 = acc;
	c.r.send2_len = sizeof(acc);
	run_client_raw(&c, NULL);
	CU_ASSERT_EQUAL(c.ret, SMCR_CLC_FALLBACK);
	CU_ASSERT_EQUAL(c.res.reason, SMCR_DECL_CNFERR);
	CU_ASSERT_EQUAL(c.res.side, SMCR_CLC_SIDE_LOCAL);
	CU_ASSERT_EQUAL(c.st.n_accept, 0);
	CU_ASSERT_EQUAL(read_exact(c.r.fd, c.r.got, SMCR_CLC_DECLINE_LEN), 0);
	CU_ASSERT_EQUAL(smcr_clc_decode_type(c.r.got, SMCR_CLC_DECLINE_LEN, SMCR_CLC_DECLINE, &d),
			SMCR_CLC_DECLINE_LEN);
	CU_ASSERT_EQUAL(d.decline.diagnosis, SMCR_DECL_CNFERR);
	check_app_stream(c.cfd, c.r.fd);
	close(c.cfd);
	close(c.r.fd);
}

/* A v2 Decline in reply to our Proposal: taken as a Decline. */
static void test_client_v2_decline(void)
{
	uint8_t prop[SMCR_CLC_MAX_V1_LEN], v2[40];
	struct client_raw c;

	memset(&c, 0, sizeof(c));
	stub_init(&c.st, true);
	memset(v2, 0, sizeof(v2));
	memcpy(v2, "\xe2\xd4\xc3\xd9\x04", 5);
	v2[6] = sizeof(v2);
	v2[7] = 0x20;
	v2[8] = 0x77;			/* peer ID */
	v2[16] = 0x03;			/* diagnosis 0x03030002 */
	v2[17] = 0x03;
	v2[19] = 0x02;
	memcpy(v2 + sizeof(v2) - 4, "\xe2\xd4\xc3\xd9", 4);
	c.r.read_len = proposal_bytes(prop, sizeof(prop));
	c.r.send2 = v2;
	c.r.send2_len = sizeof(v2);
	run_client_raw(&c, NULL);
	CU_ASSERT_EQUAL(c.ret, SMCR_CLC_FALLBACK);
	CU_ASSERT_EQUAL(c.res.reason, SMCR_DECL_NOSMCRDEV);
	CU_ASSERT_EQUAL(c.res.side, SMCR_CLC_SIDE_PEER);
	CU_ASSERT_EQUAL(c.res.decline.peer_id.instance, 0x7700);
	CU_ASSERT_EQUAL(c.res.stats.version_mismatches, 1);
	check_app_stream(c.cfd, c.r.fd);
	close(c.cfd);
	close(c.r.fd);
}

/* (8) silence: a timeout within the configured bound, counted */
static void test_server_silent_client(void)
{
	struct smcr_clc_cfg cfg = server_cfg;
	struct raw r;
	struct server_run srv;
	struct stub st;

	cfg.proposal_timeout_ms = 300;
	memset(&r, 0, sizeof(r));
	memset(&srv, 0, sizeof(srv));
	stub_init(&st, true);
	r.hold_ms = 600;
	run_server_raw(&r, &srv, &cfg, &st);
	CU_ASSERT_EQUAL(srv.ret, -ETIMEDOUT);
	CU_ASSERT_EQUAL(srv.res.outcome, SMCR_CLC_ABORT);
	CU_ASSERT_EQUAL(srv.res.reason, SMCR_DECL_TIMEOUT_PROPOSAL);
	CU_ASSERT_EQUAL(srv.res.side, SMCR_CLC_SIDE_LOCAL);
	CU_ASSERT_EQUAL(srv.res.stats.timeouts, 1);
	CU_ASSERT_EQUAL(srv.res.stats.aborts, 1);
	CU_ASSERT_EQUAL(srv.res.stats.declines_sent, 0);
	CU_ASSERT(srv.elapsed_ms >= 290 && srv.elapsed_ms < 1500);
	close(r.fd);
	close(srv.fd);
}

/* With fallback_on_silence, a client that said nothing gets plain TCP. */
static void test_server_silent_client_fallback(void)
{
	struct smcr_clc_cfg cfg = server_cfg;
	struct raw r;
	struct server_run srv;
	struct stub st;

	cfg.proposal_timeout_ms = 200;
	cfg.fallback_on_silence = true;
	memset(&r, 0, sizeof(r));
	memset(&srv, 0, sizeof(srv));
	stub_init(&st, true);
	run_server_raw(&r, &srv, &cfg, &st);
	CU_ASSERT_EQUAL(srv.ret, SMCR_CLC_FALLBACK);
	CU_ASSERT_EQUAL(srv.res.reason, SMCR_DECL_TIMEOUT_PROPOSAL);
	CU_ASSERT_EQUAL(srv.res.side, SMCR_CLC_SIDE_LOCAL);
	CU_ASSERT_EQUAL(srv.res.stats.timeouts, 1);
	CU_ASSERT_EQUAL(srv.res.stats.fallbacks, 1);
	CU_ASSERT_EQUAL(srv.res.stats.fallbacks_by[smcr_clc_reason_index(SMCR_DECL_TIMEOUT_PROPOSAL)], 1);
	CU_ASSERT_EQUAL(srv.res.stats.declines_sent, 0);
	CU_ASSERT(srv.elapsed_ms >= 190 && srv.elapsed_ms < 1500);
	check_app_stream(r.fd, srv.fd);
	close(r.fd);
	close(srv.fd);
}

static void test_client_silent_server(void)
{
	struct smcr_clc_cfg cfg = client_cfg;
	struct client_raw c;
	uint8_t prop[SMCR_CLC_MAX_V1_LEN];

	cfg.reply_timeout_ms = 250;
	memset(&c, 0, sizeof(c));
	stub_init(&c.st, true);
	c.r.read_len = proposal_bytes(prop, sizeof(prop));
	c.r.hold_ms = 500;
	run_client_raw(&c, &cfg);
	CU_ASSERT_EQUAL(c.ret, -ETIMEDOUT);
	CU_ASSERT_EQUAL(c.res.outcome, SMCR_CLC_ABORT);
	CU_ASSERT_EQUAL(c.res.reason, SMCR_DECL_TIMEOUT_ACCEPT);
	CU_ASSERT_EQUAL(c.res.stats.timeouts, 1);
	CU_ASSERT_EQUAL(c.res.stats.aborts, 1);
	CU_ASSERT(c.elapsed_ms >= 240 && c.elapsed_ms < 1500);
	close(c.cfd);
	close(c.r.fd);
}

/* The server waits for the Confirm that never comes: timeout, undo. */
static void test_server_no_confirm(void)
{
	struct smcr_clc_cfg cfg = server_cfg;
	uint8_t prop[SMCR_CLC_MAX_V1_LEN];
	struct raw r;
	struct server_run srv;
	struct stub st;

	cfg.reply_timeout_ms = 250;
	memset(&r, 0, sizeof(r));
	memset(&srv, 0, sizeof(srv));
	stub_init(&st, true);
	r.send1 = prop;
	r.send1_len = proposal_bytes(prop, sizeof(prop));
	r.read_len = SMCR_CLC_ACCEPT_LEN;
	r.hold_ms = 500;
	run_server_raw(&r, &srv, &cfg, &st);
	CU_ASSERT_EQUAL(srv.ret, -ETIMEDOUT);
	CU_ASSERT_EQUAL(srv.res.reason, SMCR_DECL_TIMEOUT_CONFIRM);
	CU_ASSERT_EQUAL(srv.res.stats.timeouts, 1);
	CU_ASSERT_EQUAL(srv.res.stats.accepts_sent, 1);
	CU_ASSERT_EQUAL(st.n_undo, 1);
	CU_ASSERT_EQUAL(st.undo_outcome, SMCR_CLC_ABORT);
	CU_ASSERT_EQUAL(r.read_rc, 0);
	close(r.fd);
	close(srv.fd);
}

/* (9) truncated messages, then the peer closes: error, no hang */
static void test_truncated(void)
{
	uint8_t prop[SMCR_CLC_MAX_V1_LEN];
	size_t cuts[] = { 3, 8, 30 };
	size_t n = proposal_bytes(prop, sizeof(prop));

	for (unsigned int i = 0; i < sizeof(cuts) / sizeof(cuts[0]); i++) {
		struct raw r;
		struct server_run srv;
		struct stub st;

		memset(&r, 0, sizeof(r));
		memset(&srv, 0, sizeof(srv));
		stub_init(&st, true);
		r.send1 = prop;
		r.send1_len = cuts[i] < n ? cuts[i] : n;
		r.close_after = 1;
		run_server_raw(&r, &srv, NULL, &st);
		CU_ASSERT_EQUAL(srv.ret, -ECONNRESET);
		CU_ASSERT_EQUAL(srv.res.outcome, SMCR_CLC_ABORT);
		CU_ASSERT_EQUAL(srv.res.stats.aborts, 1);
		CU_ASSERT(srv.elapsed_ms < 1500);
		close(r.fd);
		close(srv.fd);
	}
}

/* Truncated without a close: the deadline ends it. */
static void test_truncated_then_silent(void)
{
	struct smcr_clc_cfg cfg = server_cfg;
	uint8_t prop[SMCR_CLC_MAX_V1_LEN];
	struct raw r;
	struct server_run srv;
	struct stub st;

	cfg.proposal_timeout_ms = 250;
	cfg.fallback_on_silence = true;	/* not silent: part of a message came */
	memset(&r, 0, sizeof(r));
	memset(&srv, 0, sizeof(srv));
	stub_init(&st, true);
	proposal_bytes(prop, sizeof(prop));
	r.send1 = prop;
	r.send1_len = 20;
	r.hold_ms = 600;
	run_server_raw(&r, &srv, &cfg, &st);
	CU_ASSERT_EQUAL(srv.ret, -ETIMEDOUT);
	CU_ASSERT_EQUAL(srv.res.outcome, SMCR_CLC_ABORT);
	CU_ASSERT_EQUAL(srv.res.stats.timeouts, 1);
	CU_ASSERT(srv.elapsed_ms >= 240 && srv.elapsed_ms < 1500);
	close(r.fd);
	close(srv.fd);
}

/* The client's peer closes after the Proposal. */
static void test_client_peer_closes(void)
{
	struct client_raw c;
	uint8_t prop[SMCR_CLC_MAX_V1_LEN];

	memset(&c, 0, sizeof(c));
	stub_init(&c.st, true);
	c.r.read_len = proposal_bytes(prop, sizeof(prop));
	c.r.send2 = "\xe2\xd4\xc3\xd9\x02\x00\x44\x10";	/* an Accept header only */
	c.r.send2_len = 8;
	c.r.close_after = 1;
	run_client_raw(&c, NULL);
	CU_ASSERT_EQUAL(c.ret, -ECONNRESET);
	CU_ASSERT_EQUAL(c.res.stats.aborts, 1);
	CU_ASSERT(c.elapsed_ms < 1500);
	close(c.cfd);
	close(c.r.fd);
}

/* ---- helpers ------------------------------------------------------------- */

static void test_local_prefixes(void)
{
	struct smcr_clc_proposal p;
	int cfd, sfd, sv[2];

	tcp_pair(&cfd, &sfd);
	memset(&p, 0, sizeof(p));
	CU_ASSERT_EQUAL(smcr_clc_local_prefixes(cfd, &p), 0);
	CU_ASSERT_EQUAL(p.ipv4_subnet, 0x7f000000u);
	CU_ASSERT_EQUAL(p.ipv4_mask_len, 8);
	CU_ASSERT_EQUAL(p.ipv6_prefix_count, 0);
	CU_ASSERT_EQUAL(smcr_clc_prefix_match(sfd, &p), 1);
	p.ipv4_subnet = 0x0a000000u;
	CU_ASSERT_EQUAL(smcr_clc_prefix_match(sfd, &p), 0);
	p.ipv4_subnet = 0x7f000000u;
	p.ipv4_mask_len = 16;
	CU_ASSERT_EQUAL(smcr_clc_prefix_match(sfd, &p), 0);
	close(cfd);
	close(sfd);

	CU_ASSERT_FATAL(socketpair(AF_UNIX, SOCK_STREAM, 0, sv) == 0);
	CU_ASSERT_EQUAL(smcr_clc_local_prefixes(sv[0], &p), -EAFNOSUPPORT);
	CU_ASSERT_EQUAL(smcr_clc_prefix_match(sv[0], &p), -EAFNOSUPPORT);
	close(sv[0]);
	close(sv[1]);
}

/* IPv6 loopback, where the host has it. */
static void test_local_prefixes_v6(void)
{
	struct sockaddr_in6 sa = { .sin6_family = AF_INET6, .sin6_addr = IN6ADDR_LOOPBACK_INIT };
	socklen_t sl = sizeof(sa);
	struct smcr_clc_proposal p;
	int lfd, cfd, sfd;

	lfd = socket(AF_INET6, SOCK_STREAM, 0);
	if (lfd < 0 || bind(lfd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		if (lfd >= 0)
			close(lfd);
		return;		/* no IPv6 here */
	}
	CU_ASSERT_FATAL(listen(lfd, 1) == 0);
	CU_ASSERT_FATAL(getsockname(lfd, (struct sockaddr *)&sa, &sl) == 0);
	cfd = socket(AF_INET6, SOCK_STREAM, 0);
	CU_ASSERT_FATAL(connect(cfd, (struct sockaddr *)&sa, sizeof(sa)) == 0);
	sfd = accept(lfd, NULL, NULL);
	CU_ASSERT_FATAL(sfd >= 0);
	memset(&p, 0, sizeof(p));
	CU_ASSERT_EQUAL(smcr_clc_local_prefixes(cfd, &p), 0);
	CU_ASSERT_EQUAL(p.ipv4_mask_len, 0);
	CU_ASSERT_EQUAL(p.ipv6_prefix_count, 1);
	CU_ASSERT_EQUAL(p.ipv6_prefix[0].len, 128);
	CU_ASSERT(memcmp(p.ipv6_prefix[0].prefix, &in6addr_loopback, 16) == 0);
	CU_ASSERT_EQUAL(smcr_clc_prefix_match(sfd, &p), 1);
	p.ipv6_prefix[0].len = 64;
	CU_ASSERT_EQUAL(smcr_clc_prefix_match(sfd, &p), 0);
	close(cfd);
	close(sfd);
	close(lfd);
}

static void test_reasons_and_stats(void)
{
	struct smcr_clc_stats a, b;
	unsigned int i;

	for (i = 0; i < SMCR_CLC_NREASONS - 1; i++) {
		uint32_t code = smcr_clc_reason_code(i);

		CU_ASSERT(code != 0);
		CU_ASSERT_EQUAL(smcr_clc_reason_index(code), i);
		CU_ASSERT(strcmp(smcr_clc_decline_str(code), "unknown") != 0);
	}
	CU_ASSERT_EQUAL(smcr_clc_reason_index(0x12345678), SMCR_CLC_NREASONS - 1);
	CU_ASSERT_EQUAL(smcr_clc_reason_code(SMCR_CLC_NREASONS - 1), 0);
	CU_ASSERT_STRING_EQUAL(smcr_clc_decline_str(0x12345678), "unknown");
	CU_ASSERT_STRING_EQUAL(smcr_clc_decline_str(SMCR_DECL_NOSMCRDEV), "no SMC-R device found");

	memset(&a, 0, sizeof(a));
	memset(&b, 0, sizeof(b));
	b.fallbacks = 2;
	b.timeouts = 1;
	b.fallbacks_by[3] = 2;
	b.declines_rcvd_by[SMCR_CLC_NREASONS - 1] = 5;
	smcr_clc_stats_add(&a, &b);
	smcr_clc_stats_add(&a, &b);
	CU_ASSERT_EQUAL(a.fallbacks, 4);
	CU_ASSERT_EQUAL(a.timeouts, 2);
	CU_ASSERT_EQUAL(a.fallbacks_by[3], 4);
	CU_ASSERT_EQUAL(a.declines_rcvd_by[SMCR_CLC_NREASONS - 1], 10);
}

static void test_bad_args(void)
{
	struct smcr_clc_result res;
	struct smcr_clc_ops none = { 0 };

	CU_ASSERT_EQUAL(smcr_clc_client(-1, &stub_ops, NULL, NULL, &res), -EINVAL);
	CU_ASSERT_EQUAL(res.outcome, SMCR_CLC_ABORT);
	CU_ASSERT_EQUAL(smcr_clc_server(0, &none, NULL, NULL, &res), -EINVAL);
	CU_ASSERT_EQUAL(smcr_clc_client(0, &stub_ops, NULL, NULL, NULL), -EINVAL);
}

/* The suite's fixture: its declines and aborts log errors only. */
int smcr_clc_suite_init(void)
{
	smcr_log_set_level(SMCR_LOG_ERR);
	return 0;
}

int smcr_clc_suite_cleanup(void)
{
	smcr_log_set_level(SMCR_LOG_INFO);
	return 0;
}

CU_TestInfo smcr_clc_tests[] = {
	{ "first contact", test_first_contact },
	{ "subsequent contact", test_subsequent_contact },
	{ "fd flags kept", test_fd_flags_kept },
	{ "client has no RNIC", test_client_no_rnic },
	{ "server declines", test_server_declines },
	{ "client declines the Accept", test_client_declines_accept },
	{ "client out of sync", test_client_out_of_sync },
	{ "server declines after Confirm (first contact)", test_server_declines_confirm_first_contact },
	{ "client declines after Confirm (first contact)", test_client_declines_after_confirm },
	{ "server refuses Confirm (subsequent)", test_server_refuses_confirm_subsequent },
	{ "Confirm with a reserved MTU", test_confirm_bad_mtu },
	{ "v2-only Proposal (Linux 6.1 over rxe): v1 Decline 0x03030000", test_v2_proposal },
	{ "v2 Proposal offering v1: answered in v1", test_v2_proposal_offers_v1 },
	{ "SMC-Rv2 first contact", test_v2_first_contact },
	{ "SMC-Rv2 subsequent contact", test_v2_subsequent_contact },
	{ "SMC-Rv2 client, v1 server: v1", test_v2_to_v1_server },
	{ "SMC-Rv2 client, no common EID: v1", test_v2_no_common_eid },
	{ "the kernel's v2 Proposal: v2 Accept, or NOUEID", test_v2_kernel_proposal },
	{ "over-long Proposal", test_long_proposal },
	{ "Proposal with bad prefix", test_proposal_bad_prefix },
	{ "garbage instead of a Proposal", test_garbage },
	{ "garbage instead of an Accept", test_client_garbage_reply },
	{ "Accept with a reserved MTU", test_client_accept_bad_mtu },
	{ "v2 Decline", test_client_v2_decline },
	{ "v2.1 between two of ours: release and limits", test_v21_pair },
	{ "v2.1 server: Proposal's release and limits", test_v21_server },
	{ "v2.1 server: the Confirm echoes them", test_v21_server_confirm },
	{ "v2.1 client: the Accept's, echoed or declined", test_v21_client },
	{ "silent client", test_server_silent_client },
	{ "silent client, fallback on silence", test_server_silent_client_fallback },
	{ "silent server", test_client_silent_server },
	{ "no Confirm", test_server_no_confirm },
	{ "truncated, then closed", test_truncated },
	{ "truncated, then silent", test_truncated_then_silent },
	{ "client's peer closes", test_client_peer_closes },
	{ "local prefixes", test_local_prefixes },
	{ "local prefixes IPv6", test_local_prefixes_v6 },
	{ "reasons and stats", test_reasons_and_stats },
	{ "bad arguments", test_bad_args },
	CU_TEST_INFO_NULL,
};
