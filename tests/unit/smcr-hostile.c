/* SPDX-License-Identifier: BSD-3-Clause */
/* smcrbd: libsmcr against a peer that lies: link groups are found by
 * peer ID, role, GID, MAC (and the server's QP for a client), not by the
 * peer ID a peer may copy; our peer ID's random part
 * comes from getrandom(), not from rand() and the pid; a server keeps
 * at most max_lgrs_per_address link groups for one peer address. */
#include <config.h>

#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/wait.h>

#include "unit.h"
#include "smcr-suites.h"
#include "engine.h"
#include "link.h"

/* One group with one active link to a peer (gid 0x11.., mac 0x22..,
 * qpn 0x123). */
static void one_group(struct smcr_ctx *ctx, struct smcr_lgr *lgr, struct smcr_link *link,
		      enum smcr_role role, const uint8_t pid[8])
{
	memset(ctx, 0, sizeof(*ctx));
	memset(lgr, 0, sizeof(*lgr));
	memset(link, 0, sizeof(*link));
	link->state = SMCR_LINK_ACTIVE;
	lgr->role = role;
	lgr->max_conns = SMCR_LGR_MAX_CONNS;
	memcpy(lgr->peer_id, pid, 8);
	lgr->links[0].link = link;
	memset(lgr->links[0].peer.gid, 0x11, SMCR_GID_LEN);
	memset(lgr->links[0].peer.mac, 0x22, SMCR_MAC_LEN);
	lgr->links[0].peer.qpn = 0x123;
	ctx->lgrs = lgr;
}

static void test_lgr_match(void)
{
	static const uint8_t pid[8] = { 1, 2, 3, 4, 5, 6, 7, 8 };
	uint8_t gid[SMCR_GID_LEN], mac[SMCR_MAC_LEN], other[SMCR_GID_LEN];
	struct smcr_ctx ctx;
	struct smcr_lgr lgr;
	struct smcr_link link;

	memset(gid, 0x11, sizeof(gid));
	memset(mac, 0x22, sizeof(mac));
	memset(other, 0x33, sizeof(other));
	one_group(&ctx, &lgr, &link, SMCR_ROLE_SERVER, pid);
	CU_ASSERT_PTR_EQUAL(smcr_engine_lgr_find(&ctx, SMCR_ROLE_SERVER, pid, gid, mac, 0), &lgr);
	/* SMC-Rv2.1 max_conns: a full server group is not joined (its
	 * connections and the handshakes on it count) */
	lgr.max_conns = 16;
	lgr.nconns = 15;
	CU_ASSERT_PTR_EQUAL(smcr_engine_lgr_find(&ctx, SMCR_ROLE_SERVER, pid, gid, mac, 0), &lgr);
	lgr.setups = 1;
	CU_ASSERT_PTR_NULL(smcr_engine_lgr_find(&ctx, SMCR_ROLE_SERVER, pid, gid, mac, 0));
	lgr.setups = 0;
	lgr.nconns = 16;
	CU_ASSERT_PTR_NULL(smcr_engine_lgr_find(&ctx, SMCR_ROLE_SERVER, pid, gid, mac, 0));
	lgr.nconns = 0;
	lgr.max_conns = SMCR_LGR_MAX_CONNS;
	/* Same peer ID, another GID or MAC: another peer. */
	CU_ASSERT_PTR_NULL(smcr_engine_lgr_find(&ctx, SMCR_ROLE_SERVER, pid, other, mac, 0));
	CU_ASSERT_PTR_NULL(smcr_engine_lgr_find(&ctx, SMCR_ROLE_SERVER, pid, gid, other, 0));
	/* The other role's group is not ours to join. */
	CU_ASSERT_PTR_NULL(smcr_engine_lgr_find(&ctx, SMCR_ROLE_CLIENT, pid, gid, mac, 0x123));
	/* A link that is not active does not count. */
	link.state = SMCR_LINK_FAILED;
	CU_ASSERT_PTR_NULL(smcr_engine_lgr_find(&ctx, SMCR_ROLE_SERVER, pid, gid, mac, 0));

	/* A client also checks the server's QP. */
	one_group(&ctx, &lgr, &link, SMCR_ROLE_CLIENT, pid);
	CU_ASSERT_PTR_EQUAL(smcr_engine_lgr_find(&ctx, SMCR_ROLE_CLIENT, pid, gid, mac, 0x123),
			    &lgr);
	CU_ASSERT_PTR_NULL(smcr_engine_lgr_find(&ctx, SMCR_ROLE_CLIENT, pid, gid, mac, 0x124));
	CU_ASSERT_PTR_NULL(smcr_engine_lgr_find(&ctx, SMCR_ROLE_CLIENT, pid, other, mac, 0x123));
}

/* A fresh process's peer ID instance (2 bytes) with its pid taken out
 * as the old rand() ^ pid put it in, through a pipe. */
static int child_instance(uint8_t out[2])
{
	struct smcr_ctx_opts o = { .no_smc = true };
	struct smcr_ctx *ctx;
	int p[2], st;
	pid_t pid;

	if (pipe(p))
		return -1;
	pid = fork();
	if (pid == 0) {
		uint8_t b[2] = { 0, 0 };

		if (smcr_ctx_create(&o, &ctx) == 0) {
			b[0] = (uint8_t)(ctx->peer_id[0] ^ getpid());
			b[1] = (uint8_t)(ctx->peer_id[1] ^ getpid() >> 8);
			smcr_ctx_destroy(ctx);
		}
		_exit(write(p[1], b, 2) == 2 ? 0 : 1);
	}
	close(p[1]);
	st = read(p[0], out, 2) == 2 ? 0 : -1;
	close(p[0]);
	waitpid(pid, NULL, 0);
	return st;
}

/* Children share our rand() state: with rand() ^ pid, what is left once
 * the pid is taken out is the same in every one (anybody who knows the
 * pid knows the ID). */
static void test_peer_id_random(void)
{
	uint8_t first[2], b[2];
	unsigned int i, same = 0;

	CU_ASSERT_FATAL(child_instance(first) == 0);
	for (i = 0; i < 7; i++) {
		CU_ASSERT_FATAL(child_instance(b) == 0);
		if (!memcmp(first, b, 2))
			same++;
	}
	CU_ASSERT(same <= 2);
}

/* RMB memory per group has a limit by default; the option and
 * SMCR_MAX_RMB_BYTES set it. */
static void test_rmb_limit_default(void)
{
	struct smcr_ctx_opts o = { .no_smc = true };
	struct smcr_ctx *ctx;

	unsetenv("SMCR_MAX_RMB_BYTES");
	CU_ASSERT(smcr_lgr_config_default.max_rmb_bytes == SMCR_LGR_MAX_RMB_BYTES);
	CU_ASSERT_FATAL(smcr_ctx_create(&o, &ctx) == 0);
	CU_ASSERT(ctx->lgr_cfg.max_rmb_bytes == (size_t)256 << 20);
	smcr_ctx_destroy(ctx);
	setenv("SMCR_MAX_RMB_BYTES", "8388608", 1);
	CU_ASSERT_FATAL(smcr_ctx_create(&o, &ctx) == 0);
	CU_ASSERT(ctx->lgr_cfg.max_rmb_bytes == (size_t)8 << 20);
	smcr_ctx_destroy(ctx);
	o.max_rmb_bytes = (size_t)4 << 20;
	CU_ASSERT_FATAL(smcr_ctx_create(&o, &ctx) == 0);
	CU_ASSERT(ctx->lgr_cfg.max_rmb_bytes == (size_t)4 << 20);
	smcr_ctx_destroy(ctx);
	unsetenv("SMCR_MAX_RMB_BYTES");
}

/* A TCP connection over loopback from src (127.0.0.x) to 127.0.0.1: the
 * server's end (its peer is src), or -1. */
static int loop_conn(const char *src, int *client)
{
	struct sockaddr_in a = { .sin_family = AF_INET };
	socklen_t len = sizeof(a);
	int l, c = -1, s = -1;

	l = socket(AF_INET, SOCK_STREAM, 0);
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (l < 0 || bind(l, (struct sockaddr *)&a, sizeof(a)) || listen(l, 1) ||
	    getsockname(l, (struct sockaddr *)&a, &len))
		goto out;
	c = socket(AF_INET, SOCK_STREAM, 0);
	{
		struct sockaddr_in b = { .sin_family = AF_INET };

		inet_pton(AF_INET, src, &b.sin_addr);
		if (c < 0 || bind(c, (struct sockaddr *)&b, sizeof(b)) ||
		    connect(c, (struct sockaddr *)&a, sizeof(a)))
			goto out;
	}
	s = accept(l, NULL, NULL);
out:
	if (s < 0 && c >= 0) {
		close(c);
		c = -1;
	}
	if (l >= 0)
		close(l);
	*client = c;
	return s;
}

static unsigned int limit_lines;
static char limit_line[256];

static void limit_log(void *opaque, enum smcr_log_level level, const char *msg)
{
	(void)opaque;
	if (level == SMCR_LOG_WARN && strstr(msg, "link groups from")) {
		limit_lines++;
		snprintf(limit_line, sizeof(limit_line), "%s", msg);
	}
}

/* Link groups per peer address at the edges: a first contact from an
 * address that has max_lgrs_per_address live server groups is declined
 * (out of memory), counted, logged once per interval; terminated groups,
 * client groups and other addresses do not count. */
static void test_lgrs_per_address(void)
{
	static const uint8_t v4_1[16] = { [10] = 0xff, [11] = 0xff, 127, 0, 0, 1 };
	struct smcr_ctx ctx;
	struct smcr_lgr g[3];
	uint8_t addr[16];
	int c1, c2, s1, s2, i;

	s1 = loop_conn("127.0.0.1", &c1);
	s2 = loop_conn("127.0.0.2", &c2);
	CU_ASSERT_FATAL(s1 >= 0 && s2 >= 0);
	memset(&ctx, 0, sizeof(ctx));
	memset(g, 0, sizeof(g));
	for (i = 0; i < 3; i++) {
		g[i].role = SMCR_ROLE_SERVER;
		memcpy(g[i].peer_addr, v4_1, 16);
		g[i].next = i < 2 ? &g[i + 1] : NULL;
	}
	smcr_log_set_fn(limit_log, NULL);
	/* No limit: anything goes, the address is known all the same. */
	ctx.lgrs = &g[0];
	CU_ASSERT(smcr_engine_lgr_admit(&ctx, s1, addr) == 0);
	CU_ASSERT(memcmp(addr, v4_1, 16) == 0);
	/* Limit 3: 2 groups (g[1], g[2]) admit a third, 3 do not. */
	ctx.max_lgrs_per_address = 3;
	ctx.lgrs = &g[1];
	CU_ASSERT(smcr_engine_lgr_admit(&ctx, s1, addr) == 0);
	ctx.lgrs = &g[0];
	CU_ASSERT(smcr_engine_lgr_admit(&ctx, s1, addr) == SMCR_DECL_MEM);
	CU_ASSERT(ctx.stats.lgrs_refused_per_address == 1);
	CU_ASSERT(limit_lines == 1);
	CU_ASSERT(strstr(limit_line, "3 link groups from ::ffff:127.0.0.1") != NULL);
	/* Another address has none. */
	CU_ASSERT(smcr_engine_lgr_admit(&ctx, s2, addr) == 0);
	CU_ASSERT(addr[15] == 2);
	/* Refused twice more: counted, not logged (10 s not over). */
	CU_ASSERT(smcr_engine_lgr_admit(&ctx, s1, addr) == SMCR_DECL_MEM);
	CU_ASSERT(smcr_engine_lgr_admit(&ctx, s1, addr) == SMCR_DECL_MEM);
	CU_ASSERT(ctx.stats.lgrs_refused_per_address == 3);
	CU_ASSERT(limit_lines == 1);
	/* The interval over: logged with the 2 not logged. */
	ctx.lgr_limit_logged_ms -= SMCR_LIMIT_LOG_MS;
	CU_ASSERT(smcr_engine_lgr_admit(&ctx, s1, addr) == SMCR_DECL_MEM);
	CU_ASSERT(limit_lines == 2);
	CU_ASSERT(strstr(limit_line, "(2 more like this not logged)") != NULL);
	/* A terminated group and a client group do not count. */
	g[1].terminated = true;
	CU_ASSERT(smcr_engine_lgr_admit(&ctx, s1, addr) == 0);
	g[1].terminated = false;
	g[2].role = SMCR_ROLE_CLIENT;
	CU_ASSERT(smcr_engine_lgr_admit(&ctx, s1, addr) == 0);
	CU_ASSERT(ctx.stats.lgrs_refused_per_address == 4);
	/* Limit 1 with one group; a socket without a peer is not limited. */
	ctx.max_lgrs_per_address = 1;
	CU_ASSERT(smcr_engine_lgr_admit(&ctx, s1, addr) == SMCR_DECL_MEM);
	CU_ASSERT(smcr_engine_lgr_admit(&ctx, -1, addr) == 0);
	smcr_log_set_fn(NULL, NULL);
	close(s1);
	close(s2);
	close(c1);
	close(c2);
}

/* The option, else SMCR_MAX_LGRS_PER_ADDRESS, else no limit. */
static void test_lgrs_per_address_opt(void)
{
	struct smcr_ctx_opts o = { .no_smc = true };
	struct smcr_ctx *ctx;

	unsetenv("SMCR_MAX_LGRS_PER_ADDRESS");
	CU_ASSERT_FATAL(smcr_ctx_create(&o, &ctx) == 0);
	CU_ASSERT(ctx->max_lgrs_per_address == 0);
	smcr_ctx_destroy(ctx);
	setenv("SMCR_MAX_LGRS_PER_ADDRESS", "5", 1);
	CU_ASSERT_FATAL(smcr_ctx_create(&o, &ctx) == 0);
	CU_ASSERT(ctx->max_lgrs_per_address == 5);
	smcr_ctx_destroy(ctx);
	o.max_lgrs_per_address = 2;
	CU_ASSERT_FATAL(smcr_ctx_create(&o, &ctx) == 0);
	CU_ASSERT(ctx->max_lgrs_per_address == 2);
	smcr_ctx_destroy(ctx);
	unsetenv("SMCR_MAX_LGRS_PER_ADDRESS");
}

/* A peer whose TCP socket ends (its process killed: the kernel sends
 * FIN and destroys the QPs).  A fake link counts what is sent on it. */
static unsigned int te_sends, te_tests;
static uint8_t te_probe[SMCR_LLC_LEN];	/* the last TEST LINK sent */

static int te_post_send(struct smcr_link *link, const void *msg, uint64_t wr_id)
{
	(void)link;
	te_sends++;
	if (((const uint8_t *)msg)[0] == SMCR_LLC_TEST_LINK) {
		te_tests++;
		memcpy(te_probe, msg, sizeof(te_probe));
	}
	(void)wr_id;
	return 0;
}

static const struct smcr_link_ops te_link_ops = { .post_send = te_post_send };
static uint64_t te_clock;

static uint64_t te_now(struct smcr_lgr *lgr)
{
	(void)lgr;
	return te_clock;
}

static const struct smcr_lgr_ops te_lgr_ops = { .now_ms = te_now };

struct te_rig {
	struct smcr_ctx ctx;
	struct smcr_lgr lgr;
	struct smcr_link link;
	struct smcr_sock s;
	int peer;		/* the peer's end of our "TCP" socket */
};

static void te_rig(struct te_rig *r)
{
	static const uint8_t pid[8] = { 1, 2, 3, 4, 5, 6, 7, 8 };
	int sv[2];

	one_group(&r->ctx, &r->lgr, &r->link, SMCR_ROLE_CLIENT, pid);
	r->link.ops = &te_link_ops;
	r->lgr.ops = &te_lgr_ops;
	r->lgr.owner = &r->ctx;
	r->lgr.links[0].last_rx_ms = 5;
	CU_ASSERT_FATAL(socketpair(AF_UNIX, SOCK_STREAM, 0, sv) == 0);
	memset(&r->s, 0, sizeof(r->s));
	r->s.ctx = &r->ctx;
	r->s.fd = sv[0];
	r->s.smc = true;
	r->s.lgr = &r->lgr;
	r->s.conn.link = &r->link;
	r->s.conn.token = 7;
	r->ctx.socks = &r->s;
	r->peer = sv[1];
	te_sends = te_tests = 0;
	te_clock = 10;
}

/* The peer's reply to the last TEST LINK, or a CDC it sent. */
static void te_answer(struct te_rig *r)
{
	struct smcr_llc_msg m;
	uint8_t buf[SMCR_LLC_LEN];

	CU_ASSERT_FATAL(smcr_llc_decode(te_probe, sizeof(te_probe), &m) == SMCR_LLC_LEN);
	m.reply = true;
	CU_ASSERT_FATAL(smcr_llc_encode(&m, buf, sizeof(buf)) == SMCR_LLC_LEN);
	smcr_llc_rx(&r->lgr, &r->link, buf);
}

static void te_unrig(struct te_rig *r)
{
	close(r->s.fd);
	if (r->peer >= 0)
		close(r->peer);
}

/* The peer's TCP ends on a socket that is not watched: nothing. */
static void te_not_watched(struct te_rig *r)
{
	close(r->peer);
	r->peer = -1;
	smcr_engine_tcp_ends(&r->ctx, 1000);
	smcr_engine_tcp_ends(&r->ctx, 1000 + 2 * SMCR_TCP_END_GRACE_MS);
	CU_ASSERT_EQUAL(r->s.tcp_end_ms, 0);
	CU_ASSERT_EQUAL(r->s.conn.error, 0);
	CU_ASSERT_EQUAL(te_sends, 0);
	te_unrig(r);
}

static void test_tcp_end(void)
{
	struct te_rig r;

	/* TCP open: nothing happens, however long. */
	te_rig(&r);
	smcr_engine_tcp_ends(&r.ctx, 1000);
	smcr_engine_tcp_ends(&r.ctx, 5000);
	CU_ASSERT_EQUAL(r.s.tcp_end_ms, 0);
	CU_ASSERT_EQUAL(r.s.conn.error, 0);
	CU_ASSERT_EQUAL(te_sends, 0);

	/* Killed: FIN, nothing more on the link.  Probed at once, reset
	 * at the grace, and the group's last link is no longer given the
	 * long limit. */
	close(r.peer);
	r.peer = -1;
	te_clock = 1000;
	smcr_engine_tcp_ends(&r.ctx, 1000);
	CU_ASSERT_EQUAL(r.s.tcp_end_ms, 1000);
	CU_ASSERT_EQUAL(te_tests, 1);
	CU_ASSERT_EQUAL(r.s.conn.error, 0);
	/* The first probe unanswered: no second one while it is out. */
	smcr_engine_tcp_ends(&r.ctx, 1000 + SMCR_TCP_END_GRACE_MS / 2);
	CU_ASSERT_EQUAL(te_tests, 1);
	CU_ASSERT_EQUAL(r.s.conn.error, 0);
	smcr_engine_tcp_ends(&r.ctx, 1000 + SMCR_TCP_END_GRACE_MS - 1);
	CU_ASSERT_EQUAL(r.s.conn.error, 0);
	smcr_engine_tcp_ends(&r.ctx, 1000 + SMCR_TCP_END_GRACE_MS);
	CU_ASSERT_EQUAL(r.s.conn.error, -ECONNRESET);
	CU_ASSERT_TRUE(r.s.peer_gone);
	CU_ASSERT_TRUE(r.s.conn.abort_sent);
	CU_ASSERT_TRUE(smcr_engine_lgr_ops.peer_gone(&r.lgr));
	te_unrig(&r);

	/* Killed with its last messages still in our CQ: read after the
	 * FIN, they do not keep the connection; only a probe's reply would. */
	te_rig(&r);
	close(r.peer);
	r.peer = -1;
	te_clock = 1000;
	smcr_engine_tcp_ends(&r.ctx, 1000);
	CU_ASSERT_EQUAL(te_tests, 1);
	te_clock = 1050;
	r.lgr.links[0].last_rx_ms = 1050;	/* a CDC sent before it died */
	smcr_engine_tcp_ends(&r.ctx, 1050);
	smcr_engine_tcp_ends(&r.ctx, 1000 + SMCR_TCP_END_GRACE_MS);
	CU_ASSERT_EQUAL(r.s.conn.error, -ECONNRESET);
	CU_ASSERT_TRUE(r.s.peer_gone);
	te_unrig(&r);

	/* A peer that ends TCP but lives (it answers the probe): kept. */
	te_rig(&r);
	shutdown(r.peer, SHUT_WR);
	te_clock = 1000;
	smcr_engine_tcp_ends(&r.ctx, 1000);
	CU_ASSERT_EQUAL(te_tests, 1);
	te_clock = 1003;
	te_answer(&r);
	CU_ASSERT_EQUAL(r.lgr.links[0].test_sent_ms, 0);
	smcr_engine_tcp_ends(&r.ctx, 1100);
	smcr_engine_tcp_ends(&r.ctx, 1000 + 3 * SMCR_TCP_END_GRACE_MS);
	CU_ASSERT_EQUAL(r.s.conn.error, 0);
	CU_ASSERT_TRUE(r.s.tcp_end_judged);
	CU_ASSERT_FALSE(r.s.peer_gone);
	CU_ASSERT_FALSE(smcr_engine_lgr_ops.peer_gone(&r.lgr));
	te_unrig(&r);

	/* A probe of before the FIN was out: answered, it does not count;
	 * the link is probed again at the next tick, and that reply does. */
	te_rig(&r);
	te_clock = 900;
	CU_ASSERT_EQUAL(smcr_llc_test_link(&r.lgr, 0), 0);
	shutdown(r.peer, SHUT_WR);
	te_clock = 1000;
	smcr_engine_tcp_ends(&r.ctx, 1000);
	CU_ASSERT_EQUAL(te_tests, 1);		/* none while one is out */
	te_clock = 1010;
	te_answer(&r);
	smcr_engine_tcp_ends(&r.ctx, 1100);
	CU_ASSERT_FALSE(r.s.tcp_end_judged);
	CU_ASSERT_EQUAL(te_tests, 2);
	te_clock = 1110;
	te_answer(&r);
	smcr_engine_tcp_ends(&r.ctx, 1200);
	smcr_engine_tcp_ends(&r.ctx, 1000 + SMCR_TCP_END_GRACE_MS);
	CU_ASSERT_EQUAL(r.s.conn.error, 0);
	CU_ASSERT_TRUE(r.s.tcp_end_judged);
	te_unrig(&r);

	/* Linux's order: its close (or shutdown) CDC, then its FIN. */
	te_rig(&r);
	r.s.conn.peer_done = true;
	te_not_watched(&r);

	/* A plain TCP (fallback) socket is not ours to judge. */
	te_rig(&r);
	r.s.smc = false;
	te_not_watched(&r);
}

CU_TestInfo smcr_hostile_tests[] = {
	{ "link group match: peer ID, role, GID, MAC, QP", test_lgr_match },
	{ "peer ID from getrandom", test_peer_id_random },
	{ "RMB memory per group: limited by default", test_rmb_limit_default },
	{ "link groups per peer address: at the limit", test_lgrs_per_address },
	{ "link groups per peer address: option, environment", test_lgrs_per_address_opt },
	{ "a peer whose TCP ends: reset when silent, kept when it answers", test_tcp_end },
	CU_TEST_INFO_NULL,
};
