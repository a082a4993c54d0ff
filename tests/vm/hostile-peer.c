/* SPDX-License-Identifier: BSD-3-Clause */
/* smcrbd VM tests: a hostile SMC-R client against smcrd.
 *
 *   hostile-peer SERVER PORT CASE [options]
 *     --rkey HEX --vaddr HEX   another link group's RMB (foreign-write)
 *     -n N                     repetitions for the floods (default per case)
 *     --nbd-port P             smcrd's NBD/TCP port (nbd-storm)
 *
 * It does what a client must (TCP, CLC through libsmcr's codec and flow,
 * its own QP, PD and RMB with raw verbs through smcr/link_verbs.c, the
 * answer to CONFIRM LINK; ADD LINK requests are rejected and TEST LINK
 * answered so that the group stays up on one link) and then misbehaves as
 * CASE says.  It prints what it saw ("case NAME: ...") and exits 0 when
 * what it could observe itself is what smcrd must do, 1 otherwise; the
 * harness (hostile-peer.sh) checks smcrd's side (log, fds, RSS, the
 * well-behaved client).  Cases: see usage(). */
#include <config.h>

#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/random.h>
#include <sys/resource.h>
#include <sys/socket.h>

#include "clc.h"
#include "dev.h"
#include "link_verbs.h"
#include "msg.h"
#include "rmb.h"

/* PACE: floods go out 16 messages per 20 ms at most.  Unpaced bursts of
 * thousands of 44-byte SENDs twice stalled a guest's virtio-net transmit
 * queue for good ("NETDEV WATCHDOG: transmit queue 0 timed out") on the
 * qemu dgram links of the lane, taking the victim's link with it. */

struct peer {
	int fd;
	struct smcr_devs devs;
	struct smcr_port_ref ref;
	struct smcr_pd *pd;
	struct smcr_vlink_set set;
	struct smcr_link *link;
	struct smcr_rmb_pool rmbs;
	struct smcr_rmbe rmbe;
	struct smcr_peer_id id;
	/* The server's end, from the Accept. */
	struct smcr_clc_accept_confirm acc;
	uint32_t my_token;
	bool confirmed;			/* CONFIRM LINK answered */
	bool no_eyec;			/* RMBEs without eye catcher (Linux) */
	bool deleted;			/* DELETE LINK request received */
	unsigned int delete_replies;	/* to ours */
	uint32_t delete_reason;		/* of the last reply */
	bool down;
	enum ibv_wc_status down_status;
	int write_status;		/* last signaled write: 1 pending */
	/* counters of what the server sent */
	unsigned int test_replies, add_links, rkey_replies, rkey_negative;
	unsigned int delete_rkey_replies, delete_rkey_err_mask, cdcs, llc_other;
	uint16_t cdc_seq;		/* ours */
	struct smcr_cdc_msg last_cdc;	/* the server's */
	bool cdc_abort;			/* a CDC of the server's had A */
	bool tcp_eof;
	bool ended;			/* any of these, or down */
};

/* How long smcrd may take to close what it must: 20 s, times
 * HOSTILE_SLOW (the lane's SMCR_VM_SLOW: 3 on a busy host). */
static double close_wait_ms(void)
{
	const char *v = getenv("HOSTILE_SLOW");
	int f = v ? atoi(v) : 1;

	return 20000.0 * (f > 0 ? f : 1);
}

static double now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static void send_llc(struct peer *p, const struct smcr_llc_msg *m);

static void h_write_done(struct smcr_link *link, uint64_t wr_id, int status)
{
	struct peer *p = link->handler_arg;

	(void)wr_id;
	p->write_status = status;
}

static void h_send_done(struct smcr_link *link, uint64_t wr_id, int status)
{
	(void)link;
	(void)wr_id;
	(void)status;
}

static void h_recv(struct smcr_link *link, const uint8_t msg[SMCR_MSG_LEN])
{
	struct peer *p = link->handler_arg;
	struct smcr_llc_msg m, r;

	if (smcr_wr_is_cdc(msg, SMCR_MSG_LEN)) {
		if (smcr_cdc_decode(msg, SMCR_MSG_LEN, &p->last_cdc) == SMCR_CDC_LEN) {
			p->cdcs++;
			p->cdc_abort |= p->last_cdc.peer_abort;
			p->ended |= p->cdc_abort;
		}
		return;
	}
	if (smcr_llc_decode(msg, SMCR_MSG_LEN, &m) < 0) {
		p->llc_other++;
		return;
	}
	memset(&r, 0, sizeof(r));
	r.type = m.type;
	r.reply = true;
	switch (m.type) {
	case SMCR_LLC_CONFIRM_LINK:
		if (m.reply)
			break;
		r.confirm_link = m.confirm_link;
		memcpy(r.confirm_link.mac, p->ref.mac, SMCR_MAC_LEN);
		memcpy(r.confirm_link.gid, p->ref.gid, SMCR_GID_LEN);
		r.confirm_link.qpn = smcr_vlink_qp(p->link)->qp_num;
		r.confirm_link.max_links = 2;
		p->no_eyec = m.confirm_link.no_rmbe_eyec;	/* agreed as offered */
		send_llc(p, &r);
		p->confirmed = true;
		break;
	case SMCR_LLC_ADD_LINK:
		if (m.reply)
			break;
		/* One link is enough for an attacker. */
		p->add_links++;
		r.add_link.reject = true;
		r.add_link.reason = SMCR_LLC_ADD_REJ_NO_ALT_PATH;
		r.add_link.link_num = m.add_link.link_num;
		send_llc(p, &r);
		break;
	case SMCR_LLC_TEST_LINK:
		if (m.reply) {
			p->test_replies++;
			break;
		}
		r.test_link = m.test_link;
		send_llc(p, &r);
		break;
	case SMCR_LLC_DELETE_LINK:
		if (m.reply) {
			p->delete_replies++;
			p->delete_reason = m.delete_link.reason;
		} else {
			p->deleted = true;
		}
		break;
	case SMCR_LLC_CONFIRM_RKEY:
		if (m.reply) {
			p->rkey_replies++;
			p->rkey_negative += m.confirm_rkey.negative;
		}
		break;
	case SMCR_LLC_DELETE_RKEY:
		if (m.reply) {
			p->delete_rkey_replies++;
			p->delete_rkey_err_mask = m.delete_rkey.err_mask;
		}
		break;
	default:
		p->llc_other++;
	}
}

static void h_down(struct smcr_link *link, int reason)
{
	struct peer *p = link->handler_arg;

	(void)reason;
	p->down = true;
	p->ended = true;
	p->down_status = smcr_vlink_stats(link)->down_wc_status;
}

static const struct smcr_link_handler handler = {
	.write_done = h_write_done,
	.send_done = h_send_done,
	.recv = h_recv,
	.down = h_down,
};

/* Run the completion loop for up to ms, or until *flag (if given) is set.
 * Also notices the TCP connection's end (p->tcp_eof). */
static void pump(struct peer *p, double ms, const bool *flag, bool *unused)
{
	double end = now_ms() + ms;

	(void)unused;
	for (;;) {
		struct pollfd pfd[3] = {
			{ .fd = p->ref.dev ? p->ref.dev->chan->fd : -1, .events = POLLIN },
			{ .fd = p->ref.dev ? p->ref.dev->ctx->async_fd : -1, .events = POLLIN },
			{ .fd = p->tcp_eof ? -1 : p->fd, .events = POLLIN },
		};
		double left = end - now_ms();

		if ((flag && *flag) || left <= 0)
			return;
		if (poll(pfd, 3, (int)left + 1) < 0)
			return;
		if (pfd[0].revents)
			smcr_vlink_cq_event(p->ref.dev);
		if (pfd[1].revents)
			smcr_vlink_async_event(&p->set, p->ref.dev);
		if (pfd[2].revents) {
			char buf[4096];
			ssize_t n = recv(p->fd, buf, sizeof(buf), MSG_DONTWAIT);

			if (n == 0 || (n < 0 && errno != EAGAIN))
				p->tcp_eof = p->ended = true;
		}
	}
}

static void send_raw(struct peer *p, const uint8_t msg[SMCR_MSG_LEN])
{
	int tries = 0;

	while (!p->down && p->link->ops->sq_free(p->link) < 1 && tries++ < 200)
		pump(p, 10, NULL, NULL);
	if (!p->down)
		smcr_link_send(p->link, msg, 0);
}

static void send_llc(struct peer *p, const struct smcr_llc_msg *m)
{
	uint8_t buf[SMCR_MSG_LEN];

	if (smcr_llc_encode(m, buf, sizeof(buf)) == SMCR_LLC_LEN)
		send_raw(p, buf);
}

static void send_cdc(struct peer *p, const struct smcr_cdc_msg *m)
{
	uint8_t buf[SMCR_MSG_LEN];

	if (smcr_cdc_encode(m, buf, sizeof(buf)) == SMCR_CDC_LEN)
		send_raw(p, buf);
}

/* ---- CLC as a client --------------------------------------------------- */

static uint32_t cl_propose(void *arg, int fd, struct smcr_clc_proposal *prop)
{
	struct peer *p = arg;

	prop->peer_id = p->id;
	memcpy(prop->gid, p->ref.gid, SMCR_GID_LEN);
	memcpy(prop->mac, p->ref.mac, SMCR_MAC_LEN);
	prop->ip_area_offset = SMCR_CLC_IP_AREA_OFFSET_LINUX;
	return smcr_clc_local_prefixes(fd, prop) ? SMCR_DECL_CNFERR : 0;
}

static uint32_t cl_accept(void *arg, int fd, const struct smcr_clc_proposal *prop,
			  const struct smcr_clc_accept_confirm *acc,
			  struct smcr_clc_accept_confirm *conf)
{
	struct peer *p = arg;
	struct smcr_qp_peer q = { .qpn = acc->qpn, .psn = acc->psn,
				  .mtu = (enum ibv_mtu)acc->qp_mtu };
	struct smcr_qp_peer me;

	(void)fd;
	(void)prop;
	if (!acc->first_contact)
		return SMCR_DECL_SYNCERR;
	p->acc = *acc;
	memcpy(q.gid, acc->gid, SMCR_GID_LEN);
	if (!smcr_mtu_valid(acc->qp_mtu))
		q.mtu = IBV_MTU_1024;
	if (smcr_vlink_connect(p->link, &q))
		return SMCR_DECL_ERR_RDYLNK;
	smcr_vlink_local(p->link, &me);
	memset(conf, 0, sizeof(*conf));
	conf->peer_id = p->id;
	memcpy(conf->gid, p->ref.gid, SMCR_GID_LEN);
	memcpy(conf->mac, p->ref.mac, SMCR_MAC_LEN);
	conf->qpn = me.qpn;
	conf->psn = me.psn;
	conf->qp_mtu = (uint8_t)me.mtu;
	conf->rmb_rkey = smcr_rmb_rkey(p->rmbe.rmb, p->pd);
	conf->rmb_vaddr = (uint64_t)(uintptr_t)p->rmbe.rmb->buf;
	conf->rmbe_idx = p->rmbe.index;
	conf->rmbe_size = p->rmbe.rmb->size_code;
	conf->rmbe_alert_token = p->my_token;
	return 0;
}

static const struct smcr_clc_ops clc_ops = {
	.propose = cl_propose,
	.accept = cl_accept,
};

static int tcp_connect_type(const char *host, int port, int type)
{
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons(port) };
	int fd, one = 1;

	if (inet_pton(AF_INET, host, &sa.sin_addr) != 1)
		return -EINVAL;
	fd = socket(AF_INET, type | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	if (type == SOCK_STREAM)
		setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa))) {
		int ret = -errno;

		close(fd);
		return ret;
	}
	return fd;
}

static int tcp_connect(const char *host, int port)
{
	return tcp_connect_type(host, port, SOCK_STREAM);
}

/* TCP, device, PD, QP, RMB, CLC, CONFIRM LINK. */
static int peer_up(struct peer *p, const char *host, int port)
{
	struct smcr_clc_cfg cfg = { 0 };
	struct smcr_clc_result res;
	struct sockaddr_storage local;
	socklen_t sl = sizeof(local);
	bool fresh;
	int ret;

	memset(p, 0, sizeof(*p));
	p->write_status = 1;
	smcr_devs_init(&p->devs);
	smcr_vlink_set_init(&p->set);
	smcr_rmb_pool_init(&p->rmbs, 0);
	/* The local address the route gives (a UDP socket's connect sends
	 * nothing): device, QP and RMB are set up before the TCP connect,
	 * as a client must, so that the Proposal follows it at once (under
	 * TCG this setup took smcrd's whole 2 s Proposal wait). */
	p->fd = tcp_connect_type(host, port, SOCK_DGRAM);
	if (p->fd < 0)
		return p->fd;
	ret = getsockname(p->fd, (struct sockaddr *)&local, &sl) ? -errno : 0;
	close(p->fd);
	p->fd = -1;
	if (ret)
		return ret;
	ret = smcr_dev_resolve_addr(&p->devs, (struct sockaddr *)&local, &p->ref);
	if (!ret)
		ret = smcr_pd_alloc(p->ref.dev, &p->pd);
	if (!ret)
		ret = smcr_vlink_create(&p->set, &p->ref, p->pd, NULL, &handler, p,
					&p->link);
	if (!ret)
		ret = smcr_rmbe_alloc(&p->rmbs, 16000, &p->rmbe, &fresh);
	if (!ret)
		ret = smcr_rmb_pool_reg(&p->rmbs, p->pd);
	if (ret)
		return ret;
	p->fd = tcp_connect(host, port);
	if (p->fd < 0)
		return p->fd;
	p->link->link_id = 1;
	if (getrandom(&p->id.instance, sizeof(p->id.instance), 0) < 0)
		p->id.instance = (uint16_t)getpid();
	memcpy(p->id.mac, p->ref.mac, SMCR_MAC_LEN);
	p->id.mac[5] ^= 0x5a;	/* never the well-behaved client's ID */
	p->my_token = 0x4000 + (uint32_t)getpid();
	cfg.peer_id = p->id;
	ret = smcr_clc_client(p->fd, &clc_ops, p, &cfg, &res);
	if (ret < 0 || res.outcome != SMCR_CLC_SMCR) {
		fprintf(stderr, "CLC: %s (%d)\n", smcr_clc_outcome_str(res.outcome), ret);
		return ret < 0 ? ret : -ECONNREFUSED;
	}
	p->link->state = SMCR_LINK_ACTIVE;
	pump(p, 10000, &p->confirmed, NULL);
	if (!p->confirmed) {
		fprintf(stderr, "no CONFIRM LINK from the server\n");
		return -ETIMEDOUT;
	}
	/* Let the server's ADD LINK attempt and the NBD greeting pass. */
	pump(p, 1500, NULL, NULL);
	return 0;
}

static void peer_down(struct peer *p)
{
	smcr_vlink_destroy(p->link);
	smcr_rmb_pool_fini(&p->rmbs);
	smcr_pd_put(p->pd);
	smcr_dev_put(&p->devs, &p->ref);
	smcr_devs_fini(&p->devs);
	if (p->fd >= 0)
		close(p->fd);
}

/* Did smcrd end this connection within ms: an abort CDC, the TCP
 * connection closed, or our link down?  Says which. */
static const char *ends_within(struct peer *p, double ms, double *took)
{
	static char how[128];
	double t0 = now_ms();

	pump(p, ms, &p->ended, NULL);
	*took = now_ms() - t0;
	if (!p->ended)
		return NULL;
	/* What else follows at once. */
	pump(p, 200, NULL, NULL);
	snprintf(how, sizeof(how), "%s%s%s", p->cdc_abort ? " abort CDC" : "",
		 p->tcp_eof ? " TCP closed" : "", p->down ? " link down" : "");
	return how + 1;
}

/* Still served: a TEST LINK comes back. */
static bool alive(struct peer *p)
{
	struct smcr_llc_msg m = { .type = SMCR_LLC_TEST_LINK };
	unsigned int before = p->test_replies;
	double end = now_ms() + 3000;

	send_llc(p, &m);
	while (!p->ended && p->test_replies == before && now_ms() < end)
		pump(p, 50, NULL, NULL);
	return !p->ended && p->test_replies > before;
}

static uint32_t elem_size(const struct peer *p)
{
	return smcr_rmb_size_decompress(p->acc.rmbe_size);
}

static uint64_t server_rmbe(const struct peer *p)
{
	return p->acc.rmb_vaddr + (uint64_t)(p->acc.rmbe_idx - 1) * elem_size(p);
}

/* A CDC on our connection with the server's token. */
static void cdc_base(struct peer *p, struct smcr_cdc_msg *m)
{
	memset(m, 0, sizeof(*m));
	m->seqno = ++p->cdc_seq;
	m->token = p->acc.rmbe_alert_token;
	/* Nothing written: the cursor starts after the eye catcher, if any. */
	m->prod.count = p->no_eyec ? 0 : 4;
	m->cons = p->last_cdc.prod;
}

/* ---- the cases --------------------------------------------------------- */

struct opts {
	const char *host;
	int port, nbd_port;
	uint32_t rkey;
	uint64_t vaddr;
	bool have_victim;
	unsigned int n;
};

static int write_at(struct peer *p, uint64_t raddr, uint32_t rkey, double ms)
{
	/* 256 bytes of 0xA5 from our own RMB (registered here). */
	struct smcr_sge sge = { .addr = p->rmbe.data, .len = 256,
				.lkey = smcr_rmb_lkey(p->rmbe.rmb, p->pd) };
	int ret;

	memset(p->rmbe.data, 0xA5, sge.len);
	p->write_status = 1;
	ret = smcr_link_write(p->link, &sge, 1, raddr, rkey, 1, true);
	if (ret)
		return ret;
	for (double end = now_ms() + ms; p->write_status == 1 && now_ms() < end;)
		pump(p, 50, NULL, NULL);
	return p->write_status;
}

static int case_foreign_write(struct peer *p, const struct opts *o)
{
	double t0;
	int st;

	if (!o->have_victim) {
		fprintf(stderr, "foreign-write needs --rkey and --vaddr\n");
		return 2;
	}
	/* Control: our own group's RMBE, past its first 64 bytes, with no
	 * CDC announcing it: smcrd never reads it. */
	st = write_at(p, server_rmbe(p) + 64, p->acc.rmb_rkey, 5000);
	printf("case foreign-write: write into our own group's RMBE (rkey %08x): %s\n",
	       p->acc.rmb_rkey, st == 0 ? "ok" : strerror(-st));
	if (st != 0)
		return 1;
	st = write_at(p, o->vaddr, o->rkey, 10000);
	printf("case foreign-write: write with the victim's rkey %08x vaddr %" PRIx64
	       ": %s, completion status %s\n", o->rkey, o->vaddr,
	       st == 0 ? "ok" : st == 1 ? "no completion" : strerror(-st),
	       p->down ? ibv_wc_status_str(p->down_status) : "-");
	if (st == 0 || !p->down || p->down_status != IBV_WC_REM_ACCESS_ERR)
		return 1;
	/* Our QP is dead: smcrd sees the link go silent (TEST LINK). */
	t0 = now_ms();
	pump(p, 20000, &p->tcp_eof, NULL);
	printf("case foreign-write: our link is down; smcrd %s after %.0f ms\n",
	       p->tcp_eof ? "closed the connection" : "kept the connection",
	       now_ms() - t0);
	return 0;
}

/* A bad CDC: smcrd must end this connection. */
static int case_cdc_bad(struct peer *p, const char *name, void (*bad)(struct peer *, struct smcr_cdc_msg *))
{
	struct smcr_cdc_msg m;
	double took = 0;
	bool closed;

	cdc_base(p, &m);
	bad(p, &m);
	send_cdc(p, &m);
	closed = ends_within(p, 10000, &took);
	printf("case %s: smcrd %s the connection (%.0f ms)\n", name,
	       closed ? "closed" : "kept", took);
	return closed ? 0 : 1;
}

static void bad_prod_beyond(struct peer *p, struct smcr_cdc_msg *m)
{
	m->prod.count = elem_size(p) + 4096;
}

static void bad_wrap_jump(struct peer *p, struct smcr_cdc_msg *m)
{
	(void)p;
	m->prod.wrap = 7;
	m->prod.count = 100;
}

static void bad_cons_beyond(struct peer *p, struct smcr_cdc_msg *m)
{
	/* The server wrote a greeting of some 150 bytes: far beyond. */
	m->cons.wrap = p->last_cdc.prod.wrap;
	m->cons.count = elem_size(p) / 2 + 1000;
	if (m->cons.count >= smcr_rmb_size_decompress(p->rmbe.rmb->size_code))
		m->cons.count = smcr_rmb_size_decompress(p->rmbe.rmb->size_code) - 8;
}

/* Ignored without harm: an unknown token, a replayed sequence number. */
static int case_cdc_ignored(struct peer *p, const char *name, bool replay, unsigned int n)
{
	struct smcr_cdc_msg m;
	unsigned int i;
	bool ok;

	for (i = 0; i < n && !p->down; i++) {
		cdc_base(p, &m);
		if (replay) {
			/* A valid cursor update once, then the same seqno
			 * with a cursor that would be an overrun. */
			if (i == 0) {
				send_cdc(p, &m);
				continue;
			}
			m.seqno = 1;
			p->cdc_seq = 1;
			m.prod.count = elem_size(p) - 8;
			m.prod.wrap = 3;
		} else {
			m.token = 0xdead0000u + i;
			m.prod.count = elem_size(p) * 4;	/* would be fatal */
		}
		send_cdc(p, &m);
		if (i % 16 == 15)
			pump(p, 20, NULL, NULL);	/* see PACE */
	}
	ok = alive(p);
	printf("case %s: %u CDCs sent, the connection %s\n", name, n,
	       ok ? "is still served" : "ended");
	return ok ? 0 : 1;
}

static int case_llc_unknown(struct peer *p)
{
	uint8_t msg[SMCR_MSG_LEN] = { 0 };
	unsigned int i;
	const char *how;
	double took;
	bool ok;

	/* Optional class (b'10'): to be ignored. */
	for (i = 0; i < 32; i++) {
		msg[0] = (uint8_t)(0x80 + i);
		msg[1] = SMCR_LLC_LEN;
		send_raw(p, msg);
	}
	ok = alive(p);
	printf("case llc-unknown: 32 optional unknown types: the group %s\n",
	       ok ? "is still served" : "ended");
	if (!ok)
		return 1;
	/* A type every peer must know, unknown: a protocol error. */
	msg[0] = 0x05;
	send_raw(p, msg);
	how = ends_within(p, 10000, &took);
	printf("case llc-unknown: required type 0x05: %s after %.0f ms\n",
	       how ? how : "smcrd kept the link", took);
	return how ? 0 : 1;
}

static int case_llc_bad_link(struct peer *p)
{
	struct smcr_llc_msg m = { .type = SMCR_LLC_DELETE_LINK };
	bool ok;

	/* DELETE LINK of links that are not ours (not in this group). */
	for (uint8_t l = 2; l < 10; l++) {
		m.delete_link.link_num = l;
		m.delete_link.reason = SMCR_LLC_DEL_OP_INIT_TERM;
		m.delete_link.orderly = true;
		send_llc(p, &m);
	}
	/* CONFIRM LINK and ADD LINK CONT naming links that do not exist. */
	memset(&m, 0, sizeof(m));
	m.type = SMCR_LLC_CONFIRM_LINK;
	m.reply = true;
	m.confirm_link.link_num = 200;
	send_llc(p, &m);
	memset(&m, 0, sizeof(m));
	m.type = SMCR_LLC_ADD_LINK_CONT;
	m.add_link_cont.link_num = 77;
	m.add_link_cont.num_rtokens = 1;
	send_llc(p, &m);
	ok = alive(p);
	printf("case llc-bad-link: DELETE LINK of links 2..9 (%u replies, reason %08x), CONFIRM LINK and ADD LINK CONT of unknown links: the group %s%s\n",
	       p->delete_replies, p->delete_reason,
	       ok ? "is still served" : "ended", p->deleted ? " (DELETE LINK received)" : "");
	return ok && !p->deleted ? 0 : 1;
}

static int case_llc_rkeys(struct peer *p, unsigned int n)
{
	struct smcr_llc_msg m;
	unsigned int i;
	bool ok;

	/* DELETE RKEY of rkeys we never announced: an error mask back. */
	memset(&m, 0, sizeof(m));
	m.type = SMCR_LLC_DELETE_RKEY;
	m.delete_rkey.count = 8;
	for (i = 0; i < 8; i++)
		m.delete_rkey.rkey[i] = 0x1000 + i;
	send_llc(p, &m);
	pump(p, 500, NULL, NULL);
	/* CONFIRM RKEY flood: rkeys of RMBs that do not exist. */
	for (i = 0; i < n && !p->down; i++) {
		memset(&m, 0, sizeof(m));
		m.type = SMCR_LLC_CONFIRM_RKEY;
		m.confirm_rkey.rkey = 0x20000 + i;
		m.confirm_rkey.vaddr = 0x7f0000000000ull + (uint64_t)i * 65536;
		send_llc(p, &m);
		pump(p, 2, NULL, NULL);
	}
	pump(p, 1000, NULL, NULL);
	ok = alive(p);
	printf("case llc-rkeys: DELETE RKEY of 8 unknown rkeys: %u reply(ies), error mask %02x; %u CONFIRM RKEY: %u replies, %u negative; the group %s\n",
	       p->delete_rkey_replies, p->delete_rkey_err_mask, n, p->rkey_replies,
	       p->rkey_negative, ok ? "is still served" : "ended");
	return ok && p->delete_rkey_replies == 1 && p->delete_rkey_err_mask == 0xff ? 0 : 1;
}

static int case_llc_flood(struct peer *p, bool add_link, unsigned int n)
{
	struct smcr_llc_msg m;
	unsigned int i, before = p->test_replies;
	bool ok;

	for (i = 0; i < n && !p->down; i++) {
		memset(&m, 0, sizeof(m));
		if (add_link) {
			m.type = SMCR_LLC_ADD_LINK;
			memcpy(m.add_link.mac, p->ref.mac, SMCR_MAC_LEN);
			memcpy(m.add_link.gid, p->ref.gid, SMCR_GID_LEN);
		} else {
			m.type = SMCR_LLC_TEST_LINK;
			m.test_link.user_data[0] = (uint8_t)i;
		}
		send_llc(p, &m);
		if (i % 16 == 15)
			pump(p, 20, NULL, NULL);	/* see PACE */
	}
	pump(p, 2000, NULL, NULL);
	ok = alive(p);
	if (add_link)
		printf("case add-link-flood: %u ADD LINK requests: %u ADD LINK from smcrd (rejected); the group %s\n",
		       n, p->add_links, ok ? "is still served" : "ended");
	else
		printf("case test-link-flood: %u TEST LINK requests: %u replies; the group %s\n",
		       n, p->test_replies - before, ok ? "is still served" : "ended");
	return ok ? 0 : 1;
}

/* ---- CLC and NBD over TCP ---------------------------------------------- */

static int case_clc_half(const struct opts *o, unsigned int n)
{
	static const uint8_t eye[4] = { 0xE2, 0xD4, 0xC3, 0xD9 };
	struct rlimit rl = { n + 64, n + 64 };
	int *fds = calloc(n, sizeof(int));
	unsigned int i, opened = 0, closed = 0;
	uint8_t hdr[8];

	if (!fds)
		return 2;
	setrlimit(RLIMIT_NOFILE, &rl);
	memcpy(hdr, eye, 4);
	hdr[4] = 1;			/* Proposal */
	hdr[5] = 0;
	hdr[6] = 52;			/* 52 bytes announced, 8 sent */
	hdr[7] = 0x10;
	for (i = 0; i < n; i++) {
		fds[i] = tcp_connect(o->host, o->port);
		if (fds[i] < 0)
			break;
		opened++;
		if (send(fds[i], hdr, i % 2 ? sizeof(hdr) : 3, MSG_NOSIGNAL) < 0)
			break;
	}
	printf("case clc-half: %u of %u handshakes opened and left half done\n",
	       opened, n);
	/* Hold them until smcrd gives up on them (its CLC timeout). */
	for (double end = now_ms() + close_wait_ms(); now_ms() < end && closed < opened;) {
		closed = 0;
		for (i = 0; i < opened; i++) {
			char buf[64];
			ssize_t r = recv(fds[i], buf, sizeof(buf), MSG_DONTWAIT);

			if (r == 0 || (r < 0 && errno != EAGAIN))
				closed++;
		}
		usleep(500 * 1000);
	}
	printf("case clc-half: smcrd closed %u of %u\n", closed, opened);
	for (i = 0; i < opened; i++)
		close(fds[i]);
	free(fds);
	return opened == n && closed == opened ? 0 : 1;
}

/* A message whose header announces len bytes, body of sent bytes; does
 * smcrd close the socket within close_wait_ms()? */
static int clc_bad(const struct opts *o, const char *name, uint16_t len, size_t sent)
{
	static const uint8_t eye[4] = { 0xE2, 0xD4, 0xC3, 0xD9 };
	uint8_t *buf = calloc(1, sent > 8 ? sent : 8);
	double t0;
	int fd = tcp_connect(o->host, o->port);
	bool closed = false;

	if (fd < 0 || !buf) {
		free(buf);
		return 2;
	}
	memcpy(buf, eye, 4);
	buf[4] = 1;
	buf[5] = (uint8_t)(len >> 8);
	buf[6] = (uint8_t)len;
	buf[7] = 0x10;
	memset(buf + 8, 0x41, sent > 8 ? sent - 8 : 0);
	if (send(fd, buf, sent, MSG_NOSIGNAL) < 0)
		perror("send");
	t0 = now_ms();
	while (!closed && now_ms() - t0 < close_wait_ms()) {
		struct pollfd pfd = { .fd = fd, .events = POLLIN };
		char r[256];
		ssize_t k;

		if (poll(&pfd, 1, 200) <= 0)
			continue;
		k = recv(fd, r, sizeof(r), 0);
		closed = k == 0 || (k < 0 && errno != EAGAIN);
	}
	printf("case %s: header says %u bytes, %zu sent: smcrd %s the socket (%.0f ms)\n",
	       name, len, sent, closed ? "closed" : "kept", now_ms() - t0);
	close(fd);
	free(buf);
	return closed ? 0 : 1;
}

static int readn(int fd, void *buf, size_t len)
{
	size_t got = 0;

	while (got < len) {
		ssize_t n = recv(fd, (uint8_t *)buf + got, len - got, 0);

		if (n <= 0)
			return -EIO;
		got += (size_t)n;
	}
	return 0;
}

/* Fixed newstyle handshake, EXPORT_NAME "" (the first export), then n
 * 64 KiB READs without reading a reply, then close. */
static int case_nbd_storm(const struct opts *o, unsigned int n)
{
	uint8_t greet[18], reply[8 + 2 + 124], req[28];
	uint32_t cflags = htobe32(3);	/* FIXED_NEWSTYLE | NO_ZEROES */
	struct {
		uint64_t magic;
		uint32_t opt, len;
	} __attribute__((packed)) opt = { htobe64(0x49484156454F5054ull), htobe32(1), 0 };
	unsigned int i, sent = 0;
	int fd = tcp_connect(o->host, o->nbd_port);
	double t0;

	if (fd < 0)
		return 2;
	if (readn(fd, greet, sizeof(greet)) ||
	    send(fd, &cflags, 4, MSG_NOSIGNAL) != 4 ||
	    send(fd, &opt, sizeof(opt), MSG_NOSIGNAL) != sizeof(opt) ||
	    readn(fd, reply, 10)) {
		printf("case nbd-storm: handshake failed\n");
		close(fd);
		return 1;
	}
	fcntl(fd, F_SETFL, O_NONBLOCK);
	t0 = now_ms();
	for (i = 0; i < n; i++) {
		uint32_t magic = htobe32(0x25609513);
		uint16_t flags = 0, type = htobe16(0);	/* READ */
		uint64_t handle = htobe64(i), off = htobe64((uint64_t)(i % 64) * 65536);
		uint32_t len = htobe32(65536);

		memcpy(req, &magic, 4);
		memcpy(req + 4, &flags, 2);
		memcpy(req + 6, &type, 2);
		memcpy(req + 8, &handle, 8);
		memcpy(req + 16, &off, 8);
		memcpy(req + 24, &len, 4);
		if (send(fd, req, sizeof(req), MSG_NOSIGNAL) != (ssize_t)sizeof(req)) {
			struct pollfd pfd = { .fd = fd, .events = POLLOUT };

			if (errno != EAGAIN || poll(&pfd, 1, 3000) <= 0)
				break;
			i--;
			continue;
		}
		sent++;
	}
	printf("case nbd-storm: %u of %u 64 KiB READs sent without reading a reply (%.0f ms); smcrd %s\n",
	       sent, n, now_ms() - t0,
	       sent < n ? "stopped reading (backpressure)" : "took them all");
	close(fd);
	return 0;
}

static void usage(void)
{
	fputs("usage: hostile-peer SERVER PORT CASE [--rkey HEX --vaddr HEX] [-n N] [--nbd-port P]\n"
	      "cases: foreign-write cdc-prod-beyond cdc-wrap-jump cdc-cons-beyond\n"
	      "       cdc-bad-token cdc-replay llc-unknown llc-bad-link llc-rkeys\n"
	      "       add-link-flood test-link-flood clc-half clc-truncated\n"
	      "       clc-oversized nbd-storm\n", stderr);
	exit(2);
}

int main(int argc, char **argv)
{
	static const struct option lopts[] = {
		{ "rkey", required_argument, NULL, 'r' },
		{ "vaddr", required_argument, NULL, 'a' },
		{ "nbd-port", required_argument, NULL, 'N' },
		{ NULL, 0, NULL, 0 },
	};
	struct opts o = { .nbd_port = 10809 };
	const char *c;
	struct peer p;
	int opt, ret;

	while ((opt = getopt_long(argc, argv, "n:", lopts, NULL)) != -1) {
		switch (opt) {
		case 'r': o.rkey = (uint32_t)strtoul(optarg, NULL, 16); o.have_victim = true; break;
		case 'a': o.vaddr = strtoull(optarg, NULL, 16); break;
		case 'N': o.nbd_port = atoi(optarg); break;
		case 'n': o.n = (unsigned int)atoi(optarg); break;
		default: usage();
		}
	}
	if (argc - optind != 3)
		usage();
	o.host = argv[optind];
	o.port = atoi(argv[optind + 1]);
	c = argv[optind + 2];
	setvbuf(stdout, NULL, _IOLBF, 0);

	if (!strcmp(c, "clc-half"))
		return case_clc_half(&o, o.n ? o.n : 1000);
	if (!strcmp(c, "clc-truncated"))
		return clc_bad(&o, c, 52, 30);
	if (!strcmp(c, "clc-oversized"))
		return clc_bad(&o, c, 65535, 8192);
	if (!strcmp(c, "nbd-storm"))
		return case_nbd_storm(&o, o.n ? o.n : 100000);

	ret = peer_up(&p, o.host, o.port);
	if (ret) {
		printf("case %s: could not set up the SMC-R connection: %s\n", c,
		       strerror(-ret));
		peer_down(&p);
		return 2;
	}
	printf("case %s: link group up: our QP %06x, smcrd's QP %06x, smcrd's RMB rkey %08x, %u CDC(s) received\n",
	       c, smcr_vlink_qp(p.link)->qp_num, p.acc.qpn, p.acc.rmb_rkey, p.cdcs);
	if (!strcmp(c, "foreign-write"))
		ret = case_foreign_write(&p, &o);
	else if (!strcmp(c, "cdc-prod-beyond"))
		ret = case_cdc_bad(&p, c, bad_prod_beyond);
	else if (!strcmp(c, "cdc-wrap-jump"))
		ret = case_cdc_bad(&p, c, bad_wrap_jump);
	else if (!strcmp(c, "cdc-cons-beyond"))
		ret = case_cdc_bad(&p, c, bad_cons_beyond);
	else if (!strcmp(c, "cdc-bad-token"))
		ret = case_cdc_ignored(&p, c, false, o.n ? o.n : 1000);
	else if (!strcmp(c, "cdc-replay"))
		ret = case_cdc_ignored(&p, c, true, o.n ? o.n : 100);
	else if (!strcmp(c, "llc-unknown"))
		ret = case_llc_unknown(&p);
	else if (!strcmp(c, "llc-bad-link"))
		ret = case_llc_bad_link(&p);
	else if (!strcmp(c, "llc-rkeys"))
		ret = case_llc_rkeys(&p, o.n ? o.n : 300);
	else if (!strcmp(c, "add-link-flood"))
		ret = case_llc_flood(&p, true, o.n ? o.n : 200);
	else if (!strcmp(c, "test-link-flood"))
		ret = case_llc_flood(&p, false, o.n ? o.n : 2000);
	else
		usage();
	peer_down(&p);
	return ret;
}
