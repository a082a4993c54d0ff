/* SPDX-License-Identifier: BSD-3-Clause */
/* smcr-attach: the kernel's nbd driver on an smcrd export, over the kernel's
 * AF_SMC sockets (SMC-R when both ends can, else TCP) or plain TCP, with no
 * user space process on the data path.
 *
 * It opens the sockets, does the NBD handshake on each (fixed newstyle,
 * NBD_OPT_GO; no structured replies: the kernel driver has none) with the
 * project's NBD client code, and hands them to the nbd driver over its
 * generic netlink interface (NBD_CMD_CONNECT with NBD_ATTR_SOCKETS).  Then
 * it stays to watch the device: when the driver reports a dead connection
 * (NBD_CMD_LINK_DEAD on the "nbd_mc_group" multicast group), it connects
 * and handshakes a new socket, with backoff, and gives it to the driver
 * (NBD_CMD_RECONFIGURE), which waits for it up to the dead-connection
 * timeout instead of failing I/O.  It exits when the device is
 * disconnected (smcr-attach -d, nbd-client -d).  Given a comma list of
 * servers, new sockets go to the next server after a dead connection or a
 * failed attempt (-F: the engine's rotation, nbd-conn.h).
 *
 * Errors are -errno inside; the exit status is 0, 1 (runtime) or 2
 * (usage). */
#include <config.h>

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <netdb.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <pthread.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <linux/genetlink.h>
#include <linux/nbd-netlink.h>
#include <linux/netlink.h>
#include <sys/socket.h>

#include "applog.h"
#include "monotime.h"
#include "nbd-client.h"
#include "nbd-conn.h"
#include "nbdc-settings.h"
#include "nbdc-uri.h"
#include "smcr-attach-ublk.h"
#include "transport.h"

#ifndef AF_SMC
#define AF_SMC 43
#endif
#define SMCPROTO_SMC	0	/* AF_SMC over IPv4 */
#define SMCPROTO_SMC6	1	/* AF_SMC over IPv6 */

#define EXIT_USAGE	2
#define UBLK_MAX_QUEUE_DEPTH_OPT 4096	/* ublk's tags per queue */
#define MAX_CONNS	16
#define NL_BUF		8192
#define FWD_SOCKBUF	(4 << 20)	/* SO_SNDBUF of the socket pairs */
#define FWD_RXBUF	(256 << 10)	/* requests read ahead, per pair */
/* SO_SNDBUF/SO_RCVBUF of AF_SMC sockets unless -B: Linux's SMC-R then
 * gets 256 KiB buffers (64 KiB by net.smc.wmem/rmem; 512 KiB at most,
 * not faster on 1 MiB reads in the lane). */
#define SMC_SOCKBUF	(256 << 10)
#define REFUSED_RETRY_MS 250		/* a refused reconnect: again in */

struct opts {
	struct nbdc_server srv[NBDC_MAX_SERVERS];	/* gateways of one export */
	unsigned nsrv;
	const char *export;
	int index;			/* N of /dev/nbdN */
	unsigned conns;
	unsigned timeout_s;		/* I/O timeout of the driver */
	unsigned dead_s;		/* wait for a reconnect this long */
	unsigned block;
	bool tcp;			/* plain TCP instead of AF_SMC */
	bool unix_sock;			/* srv[0].host: a Unix socket's path */
	bool readonly;
	bool forward;			/* socket pairs to our forwarder */
	const char *exec;		/* --exec CMD, with forward */
	bool ublk;			/* a ublk device served by the engine */
	int ublk_id;			/* N of /dev/ublkbN; -1: the next free */
	bool recover;			/* take over /dev/ublkbN */
	bool standby;			/* --recover once its server is gone */
	unsigned qdepth;		/* ublk tags per queue; 0: the default */
	int sockbuf;			/* SO_SNDBUF/SO_RCVBUF; 0: the kernel's,
					 * -1: SMC_SOCKBUF on AF_SMC */
	/* TLS (with -F, over TCP): libnbd's names. */
	bool tls;
	const char *tls_certificates, *tls_psk_file, *tls_username;
	bool tls_no_verify_peer;
	/* The clients' connection settings (nbdc-settings.h), which set
	 * conns, dead_s, tcp, readonly and tls above. */
	struct nbdc_settings set;
};

static volatile sig_atomic_t stop;
static int64_t main_ms;		/* when main() began (--ublk --recover's figures) */
/* Without -F: the server new sockets go to (o->srv[]); a dead connection
 * or a failed attempt moves it on to the next. */
static unsigned srv_cur;

static const struct nbdc_server *cur_srv(const struct opts *o)
{
	return &o->srv[srv_cur];
}

static void next_srv(const struct opts *o)
{
	srv_cur = (srv_cur + 1) % o->nsrv;
}

static void on_signal(int sig)
{
	(void)sig;
	stop = 1;
}

/* --- sockets and the NBD handshake ---------------------------------------- */

/* SO_SNDBUF and SO_RCVBUF of fd to v: the ...FORCE options first (root),
 * as SO_RCVBUF is capped at net.core.rmem_max (208 KiB by default) and
 * Linux's SMC-R sizes a buffer at half of what the socket keeps (twice
 * v), so v gives v-sized buffers. */
static int set_sockbuf(int fd, int v)
{
	if (setsockopt(fd, SOL_SOCKET, SO_SNDBUFFORCE, &v, sizeof(v)) < 0 &&
	    setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &v, sizeof(v)) < 0)
		return -errno;
	if (setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &v, sizeof(v)) < 0 &&
	    setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &v, sizeof(v)) < 0)
		return -errno;
	return 0;
}

static int connect_one(const struct opts *o, int *fdp)
{
	struct addrinfo hints = { .ai_socktype = SOCK_STREAM }, *res, *ai;
	int r, fd = -1, sockbuf = o->sockbuf;

	if (sockbuf < 0)
		sockbuf = o->tcp ? 0 : SMC_SOCKBUF;
	r = getaddrinfo(cur_srv(o)->host, cur_srv(o)->port, &hints, &res);
	if (r)
		return r == EAI_SYSTEM ? -errno : -EHOSTUNREACH;
	r = -ECONNREFUSED;
	for (ai = res; ai; ai = ai->ai_next) {
		if (o->tcp)
			fd = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC, IPPROTO_TCP);
		else
			fd = socket(AF_SMC, SOCK_STREAM | SOCK_CLOEXEC,
				    ai->ai_family == AF_INET6 ? SMCPROTO_SMC6 : SMCPROTO_SMC);
		if (fd < 0) {
			r = -errno;
			continue;
		}
		/* Before connect: Linux's SMC-R sizes its buffers (RMBs) from
		 * them when the connection is set up. */
		if (sockbuf && set_sockbuf(fd, sockbuf) < 0)
			log_warn("SO_SNDBUF/SO_RCVBUF %d: %s", sockbuf, strerror(errno));
		if (connect(fd, ai->ai_addr, ai->ai_addrlen) == 0)
			break;
		r = -errno;
		close(fd);
		fd = -1;
	}
	freeaddrinfo(res);
	if (fd < 0)
		return r;
	*fdp = fd;
	return 0;
}

/* A connected socket in the transmission phase of the export, blocking
 * again (the driver's), in *fdp; the export's info in *info. */
static int open_conn(const struct opts *o, struct nbd_export_info *info, int *fdp)
{
	struct bd_transport *t;
	struct nbd_client *c;
	int fd = -1, kfd, r;

	r = connect_one(o, &fd);
	if (r < 0)
		return r;
	r = bd_tcp_transport_new(fd, &t);
	if (r < 0) {
		close(fd);
		return r;
	}
	r = nbd_client_open(t, 10000, &c);	/* owns t from here */
	if (r < 0)
		return r;
	r = nbd_client_go(c, o->export, info);
	if (r < 0)
		goto close_client;
	kfd = dup(fd);
	if (kfd < 0) {
		r = -errno;
		goto close_client;
	}
	if (fcntl(kfd, F_SETFL, fcntl(kfd, F_GETFL) & ~O_NONBLOCK) < 0) {
		r = -errno;
		close(kfd);
		goto close_client;
	}
	*fdp = kfd;
	r = 0;
close_client:
	nbd_client_close(c);
	return r;
}

/* --- generic netlink ------------------------------------------------------- */

struct nl {
	int fd;
	uint16_t family;
	uint32_t mcast;			/* nbd_mc_group, 0 if none */
	uint32_t seq;
	char buf[NL_BUF];
	size_t len;
};

static struct nlattr *attr_put(struct nl *n, uint16_t type, const void *data, size_t len)
{
	struct nlattr *a = (struct nlattr *)(n->buf + NLMSG_ALIGN(n->len));

	if (NLMSG_ALIGN(n->len) + NLA_HDRLEN + NLA_ALIGN(len) > sizeof(n->buf))
		return NULL;
	a->nla_type = type;
	a->nla_len = (uint16_t)(NLA_HDRLEN + len);
	if (len)
		memcpy((char *)a + NLA_HDRLEN, data, len);
	n->len = NLMSG_ALIGN(n->len) + NLA_ALIGN(a->nla_len);
	return a;
}

static void attr_u32(struct nl *n, uint16_t type, uint32_t v)
{
	attr_put(n, type, &v, sizeof(v));
}

static void attr_u64(struct nl *n, uint16_t type, uint64_t v)
{
	attr_put(n, type, &v, sizeof(v));
}

static void attr_end(struct nl *n, struct nlattr *nest)
{
	nest->nla_len = (uint16_t)(n->buf + n->len - (char *)nest);
}

static void msg_begin(struct nl *n, uint16_t type, uint8_t cmd)
{
	struct nlmsghdr *h = (struct nlmsghdr *)n->buf;
	struct genlmsghdr *g = NLMSG_DATA(h);

	memset(n->buf, 0, NLMSG_LENGTH(GENL_HDRLEN));
	h->nlmsg_type = type;
	h->nlmsg_flags = NLM_F_REQUEST | NLM_F_ACK;
	h->nlmsg_seq = ++n->seq;
	g->cmd = cmd;
	g->version = 1;
	n->len = NLMSG_LENGTH(GENL_HDRLEN);
}

/* Sends the message and waits for its ack; a reply message on the way is
 * passed to cb.  Returns 0 or the kernel's -errno. */
static int msg_send(struct nl *n, void (*cb)(void *, struct nlmsghdr *), void *arg)
{
	struct sockaddr_nl kernel = { .nl_family = AF_NETLINK };
	uint32_t seq = n->seq;
	char rbuf[NL_BUF];

	((struct nlmsghdr *)n->buf)->nlmsg_len = (uint32_t)n->len;
	if (sendto(n->fd, n->buf, n->len, 0, (struct sockaddr *)&kernel, sizeof(kernel)) < 0)
		return -errno;
	for (;;) {
		ssize_t got = recv(n->fd, rbuf, sizeof(rbuf), 0);
		struct nlmsghdr *h;
		int left;

		if (got < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		left = (int)got;
		for (h = (struct nlmsghdr *)rbuf; NLMSG_OK(h, left); h = NLMSG_NEXT(h, left)) {
			if (h->nlmsg_seq != seq)
				continue;	/* a multicast message, or an old reply */
			if (h->nlmsg_type == NLMSG_ERROR) {
				struct nlmsgerr *e = NLMSG_DATA(h);

				return e->error;
			}
			if (cb)
				cb(arg, h);
		}
	}
}

/* Bytes from an attribute to the next one, at most what is left. */
static size_t attr_step(const struct nlattr *a, size_t left)
{
	size_t step = ((size_t)a->nla_len + 3) & ~(size_t)3;

	return step < left ? step : left;
}

/* Attributes of a generic netlink message (or of a nested attribute). */
static void attrs_parse(struct nlattr *a, size_t len, struct nlattr **tb, unsigned max)
{
	memset(tb, 0, sizeof(*tb) * (max + 1));
	while (len >= NLA_HDRLEN && a->nla_len >= NLA_HDRLEN && a->nla_len <= len) {
		unsigned type = a->nla_type & NLA_TYPE_MASK;

		if (type <= max)
			tb[type] = a;
		len -= attr_step(a, len);
		a = (struct nlattr *)((char *)a + NLA_ALIGN(a->nla_len));
	}
}

static void *attr_data(struct nlattr *a)
{
	return (char *)a + NLA_HDRLEN;
}

static void family_cb(void *arg, struct nlmsghdr *h)
{
	struct nl *n = arg;
	struct genlmsghdr *g = NLMSG_DATA(h);
	struct nlattr *tb[CTRL_ATTR_MAX + 1], *grp;
	size_t len = h->nlmsg_len - NLMSG_LENGTH(GENL_HDRLEN), glen;

	attrs_parse((struct nlattr *)((char *)g + GENL_HDRLEN), len, tb, CTRL_ATTR_MAX);
	if (tb[CTRL_ATTR_FAMILY_ID])
		n->family = *(uint16_t *)attr_data(tb[CTRL_ATTR_FAMILY_ID]);
	if (!tb[CTRL_ATTR_MCAST_GROUPS])
		return;
	grp = attr_data(tb[CTRL_ATTR_MCAST_GROUPS]);
	glen = tb[CTRL_ATTR_MCAST_GROUPS]->nla_len - NLA_HDRLEN;
	while (glen >= NLA_HDRLEN && grp->nla_len >= NLA_HDRLEN && grp->nla_len <= glen) {
		struct nlattr *g2[CTRL_ATTR_MCAST_GRP_MAX + 1];

		attrs_parse(attr_data(grp), grp->nla_len - NLA_HDRLEN, g2,
			    CTRL_ATTR_MCAST_GRP_MAX);
		if (g2[CTRL_ATTR_MCAST_GRP_NAME] && g2[CTRL_ATTR_MCAST_GRP_ID] &&
		    !strcmp(attr_data(g2[CTRL_ATTR_MCAST_GRP_NAME]), NBD_GENL_MCAST_GROUP_NAME))
			n->mcast = *(uint32_t *)attr_data(g2[CTRL_ATTR_MCAST_GRP_ID]);
		glen -= attr_step(grp, glen);
		grp = (struct nlattr *)((char *)grp + NLA_ALIGN(grp->nla_len));
	}
}

static int nl_open(struct nl *n)
{
	struct sockaddr_nl self = { .nl_family = AF_NETLINK };
	int r;

	memset(n, 0, sizeof(*n));
	n->fd = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_GENERIC);
	if (n->fd < 0)
		return -errno;
	if (bind(n->fd, (struct sockaddr *)&self, sizeof(self)) < 0) {
		r = -errno;
		goto close_fd;
	}
	msg_begin(n, GENL_ID_CTRL, CTRL_CMD_GETFAMILY);
	attr_put(n, CTRL_ATTR_FAMILY_NAME, NBD_GENL_FAMILY_NAME,
		 strlen(NBD_GENL_FAMILY_NAME) + 1);
	r = msg_send(n, family_cb, n);
	if (r < 0)
		goto close_fd;	/* -ENOENT: no nbd module */
	if (!n->family) {
		r = -ENOENT;
		goto close_fd;
	}
	return 0;
close_fd:
	close(n->fd);
	return r;
}

static int nl_socks(struct nl *n, const int *fds, unsigned nfds)
{
	struct nlattr *socks = attr_put(n, NBD_ATTR_SOCKETS, NULL, 0);
	unsigned i;

	if (!socks)
		return -ENOSPC;
	for (i = 0; i < nfds; i++) {
		struct nlattr *item = attr_put(n, NBD_SOCK_ITEM, NULL, 0);

		if (!item)
			return -ENOSPC;
		attr_u32(n, NBD_SOCK_FD, (uint32_t)fds[i]);
		attr_end(n, item);
	}
	attr_end(n, socks);
	return 0;
}

struct status {
	int index;
	int connected;		/* -1: unknown */
};

static void status_cb(void *arg, struct nlmsghdr *h)
{
	struct status *st = arg;
	struct genlmsghdr *g = NLMSG_DATA(h);
	struct nlattr *tb[NBD_ATTR_MAX + 1], *dev;
	size_t len = h->nlmsg_len - NLMSG_LENGTH(GENL_HDRLEN), dlen;

	attrs_parse((struct nlattr *)((char *)g + GENL_HDRLEN), len, tb, NBD_ATTR_MAX);
	if (!tb[NBD_ATTR_DEVICE_LIST])
		return;
	dev = attr_data(tb[NBD_ATTR_DEVICE_LIST]);
	dlen = tb[NBD_ATTR_DEVICE_LIST]->nla_len - NLA_HDRLEN;
	while (dlen >= NLA_HDRLEN && dev->nla_len >= NLA_HDRLEN && dev->nla_len <= dlen) {
		struct nlattr *d[NBD_DEVICE_ATTR_MAX + 1];

		attrs_parse(attr_data(dev), dev->nla_len - NLA_HDRLEN, d, NBD_DEVICE_ATTR_MAX);
		if (d[NBD_DEVICE_INDEX] && d[NBD_DEVICE_CONNECTED] &&
		    *(uint32_t *)attr_data(d[NBD_DEVICE_INDEX]) == (uint32_t)st->index)
			st->connected = *(uint8_t *)attr_data(d[NBD_DEVICE_CONNECTED]);
		dlen -= attr_step(dev, dlen);
		dev = (struct nlattr *)((char *)dev + NLA_ALIGN(dev->nla_len));
	}
}

/* 1 connected, 0 not, -errno. */
static int nl_connected(struct nl *n, int index)
{
	struct status st = { .index = index, .connected = -1 };
	int r;

	msg_begin(n, n->family, NBD_CMD_STATUS);
	attr_u32(n, NBD_ATTR_INDEX, (uint32_t)index);
	r = msg_send(n, status_cb, &st);
	if (r < 0)
		return r;
	return st.connected < 0 ? -ENODEV : st.connected;
}

/* --- the device ------------------------------------------------------------ */

static int parse_dev(const char *s, int *index)
{
	char *end;
	long v;

	if (!strncmp(s, "/dev/", 5))
		s += 5;
	if (strncmp(s, "nbd", 3))
		return -EINVAL;
	errno = 0;
	v = strtol(s + 3, &end, 10);
	if (errno || *end || end == s + 3 || v < 0 || v > 1 << 20)
		return -EINVAL;
	*index = (int)v;
	return 0;
}

/* N of "ublkbN", "/dev/ublkbN" or "N". */
static int parse_ublk(const char *s, int *id)
{
	char *end;
	long v;

	if (!strncmp(s, "/dev/", 5))
		s += 5;
	if (!strncmp(s, "ublkb", 5))
		s += 5;
	errno = 0;
	v = strtol(s, &end, 10);
	if (errno || *end || end == s || v < 0 || v >= 1 << 20)
		return -EINVAL;
	*id = (int)v;
	return 0;
}

static int attach(struct nl *n, const struct opts *o)
{
	struct nbd_export_info info;
	int fds[MAX_CONNS], r;
	unsigned i, nfds = 0, want = o->conns;
	uint16_t flags;

	for (;;) {
		r = open_conn(o, &info, &fds[nfds]);
		/* The first connection takes the first server that answers. */
		if (r < 0 && nfds == 0 && srv_cur + 1 < o->nsrv) {
			log_warn("%s:%s export '%s': %s; trying the next server", cur_srv(o)->host,
				 cur_srv(o)->port, o->export, strerror(-r));
			next_srv(o);
			continue;
		}
		if (r < 0) {
			log_err("%s:%s export '%s': %s", cur_srv(o)->host, cur_srv(o)->port,
				o->export, strerror(-r));
			goto close_fds;
		}
		nfds++;
		if (nfds == 1 && !(info.flags & NBD_FLAG_CAN_MULTI_CONN) && want > 1) {
			log_info("the export does not allow multi-conn: one connection");
			want = 1;
		}
		if (nfds >= want)
			break;
	}
	flags = info.flags;
	if (o->readonly)
		flags |= NBD_FLAG_READ_ONLY;
	msg_begin(n, n->family, NBD_CMD_CONNECT);
	attr_u32(n, NBD_ATTR_INDEX, (uint32_t)o->index);
	attr_u64(n, NBD_ATTR_SIZE_BYTES, info.size);
	attr_u64(n, NBD_ATTR_BLOCK_SIZE_BYTES,
		 o->block ? o->block : info.pref_block >= 512 && info.pref_block <= 4096 ?
		 info.pref_block : 4096);
	attr_u64(n, NBD_ATTR_SERVER_FLAGS, flags);
	attr_u64(n, NBD_ATTR_TIMEOUT, o->timeout_s);
	attr_u64(n, NBD_ATTR_DEAD_CONN_TIMEOUT, o->dead_s);
	r = nl_socks(n, fds, nfds);
	if (r == 0)
		r = msg_send(n, NULL, NULL);
	if (r < 0) {
		log_err("/dev/nbd%d: the nbd driver refused the connection: %s", o->index,
			strerror(-r));
		if (!o->tcp && r == -EINVAL)
			log_err("the kernel's nbd driver may take TCP and UNIX sockets only "
				"(\"nbd: Check socket type\", in Linux 6.9 and 6.1.y stable): an "
				"AF_SMC socket that is on SMC-R is refused (one that fell back to "
				"TCP is taken); see dmesg, use --tcp, or a driver that takes AF_SMC "
				"(smcrbd's tests/vm/nbd-smc.patch)");
		goto close_fds;
	}
	log_info("/dev/nbd%d: %s:%s export '%s', %llu bytes, %u connection(s) over %s",
		 o->index, cur_srv(o)->host, cur_srv(o)->port, o->export,
		 (unsigned long long)info.size, nfds,
		 o->tcp ? "TCP" : "AF_SMC");
	r = 0;
close_fds:
	/* The driver holds its own references to the sockets. */
	for (i = 0; i < nfds; i++)
		close(fds[i]);
	return r;
}

/* One new socket for a dead one; 0 once the driver took it. */
static int reconnect(struct nl *n, const struct opts *o)
{
	struct nbd_export_info info;
	int fd, r;

	r = open_conn(o, &info, &fd);
	if (r < 0)
		return r;
	msg_begin(n, n->family, NBD_CMD_RECONFIGURE);
	attr_u32(n, NBD_ATTR_INDEX, (uint32_t)o->index);
	r = nl_socks(n, &fd, 1);
	if (r == 0)
		r = msg_send(n, NULL, NULL);
	close(fd);
	return r;
}

/* Dead-connection reports for our device since the last call. */
static unsigned read_link_dead(struct nl *n, int index)
{
	char rbuf[NL_BUF];
	unsigned dead = 0;
	ssize_t got;

	while ((got = recv(n->fd, rbuf, sizeof(rbuf), MSG_DONTWAIT)) > 0) {
		int left = (int)got;
		struct nlmsghdr *h;

		for (h = (struct nlmsghdr *)rbuf; NLMSG_OK(h, left); h = NLMSG_NEXT(h, left)) {
			struct genlmsghdr *g = NLMSG_DATA(h);
			struct nlattr *tb[NBD_ATTR_MAX + 1];

			if (h->nlmsg_type != n->family || g->cmd != NBD_CMD_LINK_DEAD)
				continue;
			attrs_parse((struct nlattr *)((char *)g + GENL_HDRLEN),
				    h->nlmsg_len - NLMSG_LENGTH(GENL_HDRLEN), tb, NBD_ATTR_MAX);
			if (tb[NBD_ATTR_INDEX] &&
			    *(uint32_t *)attr_data(tb[NBD_ATTR_INDEX]) == (uint32_t)index)
				dead++;
		}
	}
	return dead;
}

/* Until the device is disconnected: a new socket for every dead one. */
static int watch(const struct opts *o)
{
	struct nl ev;
	struct nl ctl;
	unsigned pending = 0, reconnects = 0;
	int64_t next_try = 0, next_status = 0;
	int backoff = 100, r;
	bool refused = false;

	r = nl_open(&ctl);
	if (r < 0)
		return r;
	r = nl_open(&ev);
	if (r < 0)
		goto close_ctl;
	if (!ev.mcast || setsockopt(ev.fd, SOL_NETLINK, NETLINK_ADD_MEMBERSHIP, &ev.mcast,
				    sizeof(ev.mcast)) < 0) {
		log_warn("no nbd multicast group: dead connections are not replaced");
		ev.mcast = 0;
	}
	while (!stop) {
		struct pollfd p = { .fd = ev.fd, .events = POLLIN };
		int64_t t = now_ms();

		if (t >= next_status) {
			r = nl_connected(&ctl, o->index);
			if (r == 0 || r == -ENODEV) {
				log_info("/dev/nbd%d was disconnected (%u reconnect(s))",
					 o->index, reconnects);
				r = 0;
				break;
			}
			next_status = t + 1000;
		}
		if (pending && t >= next_try) {
			r = reconnect(&ctl, o);
			if (r == 0) {
				pending--;
				reconnects++;
				backoff = 100;
				refused = false;
				log_info("/dev/nbd%d: a dead connection was replaced (%s:%s)",
					 o->index, cur_srv(o)->host, cur_srv(o)->port);
			} else {
				/* Refused (no listener: smcrd restarting) is cheap
				 * for the server: again soon, without growing the
				 * backoff, and logged once in a row. */
				int wait = r == -ECONNREFUSED ? REFUSED_RETRY_MS : backoff;

				if (r != -ECONNREFUSED || !refused)
					log_warn("/dev/nbd%d: reconnect to %s:%s: %s (again in %d ms%s)",
						 o->index, cur_srv(o)->host, cur_srv(o)->port,
						 strerror(-r), wait,
						 o->nsrv > 1 ? ", to the next server" : "");
				refused = r == -ECONNREFUSED;
				next_srv(o);
				next_try = t + wait;
				if (r != -ECONNREFUSED)
					backoff = backoff < 4000 ? backoff * 2 : 5000;
			}
			continue;
		}
		poll(&p, 1, pending ? 50 : 500);
		if (ev.mcast) {
			unsigned d = read_link_dead(&ev, o->index);

			if (d) {
				log_warn("/dev/nbd%d: %u connection(s) died: reconnecting%s",
					 o->index, d, o->nsrv > 1 && !pending ?
					 " to the next server" : "");
				/* Lost its server: the next one (once for a batch). */
				if (!pending)
					next_srv(o);
				pending += d;
				next_try = 0;
			}
		}
	}
	close(ev.fd);
close_ctl:
	close(ctl.fd);
	return r;
}

static int detach(int index)
{
	struct nl n;
	int r = nl_open(&n);

	if (r < 0)
		return r;
	msg_begin(&n, n.family, NBD_CMD_DISCONNECT);
	attr_u32(&n, NBD_ATTR_INDEX, (uint32_t)index);
	r = msg_send(&n, NULL, NULL);
	close(n.fd);
	return r;
}

/* --- the forwarder (--forward) -------------------------------------------- */

/* The driver gets one end of a socketpair(AF_UNIX) per connection of the
 * client engine (nbd-conn.c: SMC-R or TCP, reconnect and resend).  The
 * engine's connection thread i watches pair i (nbdc_watch): it reads the
 * driver's requests, puts them in its own send queue, sends them, takes
 * the replies and writes them to the pair in one writev per turn, so a
 * request wakes one thread of ours.  While connection i is down, what
 * pair i brings goes to another connection (or waits), as any request.
 * SMCR_ATTACH_THREADS=1: a reader thread per pair submits instead (every
 * request that one read() brought before it wakes the engine). */
struct fwd;
struct fwd_req;

struct fwd_conn {
	struct fwd *f;
	int fd;				/* our end */
	int kfd;			/* the driver's end, until handed over */
	pthread_t thread;
	bool started;
	pthread_mutex_t wlock;		/* out, and writing to fd */
	struct fwd_req *out, **out_tail;	/* replies to write */
	/* Requests read ahead: one read() takes several of them. */
	char *rx;
	size_t rx_off, rx_len;
};

struct fwd {
	struct nbdc *e;
	unsigned n;
	struct fwd_conn c[MAX_CONNS];
	pthread_mutex_t lock;
	pthread_cond_t idle;
	unsigned inflight;
	bool threads;			/* SMCR_ATTACH_THREADS=1 */
	uint64_t requests, errors, bad, writes, reads;
};

/* One request of the driver, in parts of at most the engine's maximum. */
struct fwd_req {
	struct fwd_conn *c;
	struct fwd_req *next;		/* in c->out */
	uint64_t cookie;
	uint16_t type;
	uint32_t len;
	unsigned parts;			/* still out, under f->lock */
	int err;			/* first error, under f->lock */
	char *buf;			/* READ, WRITE payload */
	struct nbd_simple_reply_wire w;	/* the reply's header */
};

#define FWD_IOV		64		/* replies per writev: 2 iovecs each */

static int full_read(int fd, void *buf, size_t len)
{
	char *p = buf;

	while (len) {
		ssize_t got = read(fd, p, len);

		if (got < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		if (got == 0)
			return -ECONNRESET;
		p += got;
		len -= (size_t)got;
	}
	return 0;
}

/* At least n (<= FWD_RXBUF) bytes of the driver's stream in c->rx. */
static int rx_fill(struct fwd_conn *c, size_t n)
{
	if (c->rx_len >= n)
		return 0;
	if (c->rx_off + n > FWD_RXBUF) {
		memmove(c->rx, c->rx + c->rx_off, c->rx_len);
		c->rx_off = 0;
	}
	while (c->rx_len < n) {
		char *end = c->rx + c->rx_off + c->rx_len;
		ssize_t got = read(c->fd, end, FWD_RXBUF - c->rx_off - c->rx_len);

		if (got < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		if (got == 0)
			return -ECONNRESET;
		c->rx_len += (size_t)got;
		__atomic_add_fetch(&c->f->reads, 1, __ATOMIC_RELAXED);
	}
	return 0;
}

/* What the driver has written, without waiting: 1 when it filled c->rx
 * (there may be more), 0, or -errno (-ECONNRESET: the driver closed). */
static int rx_more(struct fwd_conn *c)
{
	size_t room;
	ssize_t got;

	if (c->rx_off + c->rx_len == FWD_RXBUF && c->rx_off) {
		memmove(c->rx, c->rx + c->rx_off, c->rx_len);
		c->rx_off = 0;
	}
	room = FWD_RXBUF - c->rx_off - c->rx_len;
	if (!room)
		return 1;
	do
		got = recv(c->fd, c->rx + c->rx_off + c->rx_len, room, MSG_DONTWAIT);
	while (got < 0 && errno == EINTR);
	if (got < 0)
		return errno == EAGAIN || errno == EWOULDBLOCK ? 0 : -errno;
	if (got == 0)
		return -ECONNRESET;
	c->rx_len += (size_t)got;
	__atomic_add_fetch(&c->f->reads, 1, __ATOMIC_RELAXED);
	return (size_t)got == room;
}

/* n bytes of the stream into buf: what was read ahead, then the rest
 * straight from the socket (a large WRITE's payload). */
static int rx_take(struct fwd_conn *c, void *buf, size_t n)
{
	size_t k = n < c->rx_len ? n : c->rx_len;

	memcpy(buf, c->rx + c->rx_off, k);
	c->rx_off += k;
	c->rx_len -= k;
	if (!c->rx_len)
		c->rx_off = 0;
	return k < n ? full_read(c->fd, (char *)buf + k, n - k) : 0;
}

static int full_writev(int fd, struct iovec *iov, int n)
{
	struct msghdr m = { .msg_iov = iov, .msg_iovlen = (size_t)n };

	while (m.msg_iovlen) {
		ssize_t sent = sendmsg(fd, &m, MSG_NOSIGNAL);

		if (sent < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		while (m.msg_iovlen && (size_t)sent >= m.msg_iov->iov_len) {
			sent -= (ssize_t)m.msg_iov->iov_len;
			m.msg_iov++;
			m.msg_iovlen--;
		}
		if (m.msg_iovlen) {
			m.msg_iov->iov_base = (char *)m.msg_iov->iov_base + sent;
			m.msg_iov->iov_len -= (size_t)sent;
		}
	}
	return 0;
}

static void fwd_put(struct fwd *f, unsigned n)
{
	pthread_mutex_lock(&f->lock);
	f->inflight -= n;
	if (f->inflight == 0)
		pthread_cond_broadcast(&f->idle);
	pthread_mutex_unlock(&f->lock);
}

/* Queues q's simple reply (with the data of a READ that succeeded) on
 * its pair; fwd_flush() writes it. */
static void fwd_queue(struct fwd_req *q, int err)
{
	struct nbd_simple_reply h = { .error = err ? nbd_errno_to_wire(-err) : 0,
				      .cookie = q->cookie };
	struct fwd_conn *c = q->c;

	nbd_simple_reply_encode(&h, &q->w);
	q->err = err;
	q->next = NULL;
	pthread_mutex_lock(&c->wlock);
	*c->out_tail = q;
	c->out_tail = &q->next;
	pthread_mutex_unlock(&c->wlock);
}

/* Writes the replies queued on c, FWD_IOV / 2 to a writev, and frees
 * their requests.  The lock keeps replies whole and in queue order. */
static void fwd_flush_conn(struct fwd_conn *c)
{
	struct iovec iov[FWD_IOV];
	struct fwd_req *q, *batch;
	unsigned n;
	int cnt;

	pthread_mutex_lock(&c->wlock);
	while ((batch = c->out)) {
		cnt = 0;
		n = 0;
		for (q = batch; q && cnt <= FWD_IOV - 2; q = q->next, n++) {
			iov[cnt].iov_base = &q->w;
			iov[cnt++].iov_len = sizeof(q->w);
			if (q->type == NBD_CMD_READ && !q->err && q->len) {
				iov[cnt].iov_base = q->buf;
				iov[cnt++].iov_len = q->len;
			}
		}
		c->out = q;
		if (!q)
			c->out_tail = &c->out;
		/* A driver that went away reads no more replies: nothing to do. */
		(void)full_writev(c->fd, iov, cnt);
		__atomic_add_fetch(&c->f->writes, 1, __ATOMIC_RELAXED);
		while (batch != q) {
			struct fwd_req *next = batch->next;

			free(batch->buf);
			free(batch);
			batch = next;
		}
		fwd_put(c->f, n);
	}
	pthread_mutex_unlock(&c->wlock);
}

/* The engine's turn_end: every pair's queued replies. */
static void fwd_flush(void *arg)
{
	struct fwd *f = arg;
	unsigned i;

	for (i = 0; i < f->n; i++)
		fwd_flush_conn(&f->c[i]);
}

/* A reply that is not a request's completion (refusals in the thread). */
static void fwd_reply_now(struct fwd_conn *c, uint64_t cookie, int err)
{
	struct fwd_req *q = calloc(1, sizeof(*q));

	if (!q)
		return;		/* the driver times the request out */
	q->c = c;
	q->cookie = cookie;
	pthread_mutex_lock(&c->f->lock);
	c->f->inflight++;
	pthread_mutex_unlock(&c->f->lock);
	fwd_queue(q, err);
	fwd_flush_conn(c);
}

static void fwd_done(void *arg, int result)
{
	struct fwd_req *q = arg;
	struct fwd *f = q->c->f;
	bool last;
	int err;

	pthread_mutex_lock(&f->lock);
	if (result < 0 && !q->err)
		q->err = result;
	last = --q->parts == 0;
	err = q->err;
	if (last && err)
		f->errors++;
	pthread_mutex_unlock(&f->lock);
	if (last)
		fwd_queue(q, err);
}

/* Submits q (whose parts count is 1 here) in parts; q may be done and
 * queued when this returns. */
static void fwd_submit(struct fwd *f, struct fwd_req *q, uint16_t flags, uint64_t off)
{
	/* q's fields are copied first: the last part's completion may queue
	 * q, and a flush free it, before nbdc_submit() returns. */
	const uint32_t len = q->len;
	const uint16_t type = q->type;
	char *const buf = q->buf;
	uint32_t max = nbdc_max_request(f->e), done = 0;
	bool data = type == NBD_CMD_READ || type == NBD_CMD_WRITE;
	int r;

	if (!data || !max || max > len)
		max = len ? len : 1;
	do {
		uint32_t part = len - done < max ? len - done : max;
		bool more = done + part < len;

		if (more) {
			pthread_mutex_lock(&f->lock);
			q->parts++;
			pthread_mutex_unlock(&f->lock);
		}
		r = nbdc_submit(f->e, type, flags, off + done, part,
				data ? buf + done : NULL, fwd_done, q);
		if (r < 0)
			fwd_done(q, r);
		done += part;
	} while (done < len);
}

/* One request from c->rx (its header there): 0, or -errno to stop. */
static int fwd_one(struct fwd_conn *c)
{
	struct fwd *f = c->f;
	struct nbd_request_wire w;
	struct nbd_request h;
	struct fwd_req *q;
	uint16_t flags;

	rx_take(c, &w, sizeof(w));
	if (nbd_request_decode(&w, &h) < 0) {
		log_err("forwarder %d: a request with a bad magic from the driver",
			(int)(c - f->c));
		f->bad++;
		return -EPROTO;
	}
	if (h.type == NBD_CMD_DISC)
		return -ECONNRESET;
	q = calloc(1, sizeof(*q));
	if (!q) {
		if (h.type == NBD_CMD_WRITE && h.length) {
			f->bad++;	/* its payload is still unread */
			return -ENOMEM;
		}
		fwd_reply_now(c, h.cookie, -ENOMEM);
		return 0;
	}
	q->c = c;
	q->cookie = h.cookie;
	q->type = h.type;
	q->len = h.length;
	q->parts = 1;
	if (h.type == NBD_CMD_READ || h.type == NBD_CMD_WRITE) {
		if (h.length > NBD_MAX_PAYLOAD) {
			/* A WRITE's payload this large is not read: stop. */
			log_err("forwarder %d: a request of %llu bytes", (int)(c - f->c),
				(unsigned long long)h.length);
			f->bad++;
			free(q);
			return -EPROTO;
		}
		if (!h.length || !(q->buf = malloc(h.length))) {
			free(q);
			if (h.type == NBD_CMD_WRITE && h.length) {
				f->bad++;	/* its payload is still unread */
				return -ENOMEM;
			}
			fwd_reply_now(c, h.cookie, h.length ? -ENOMEM : -EINVAL);
			return 0;
		}
		if (h.type == NBD_CMD_WRITE) {
			/* The rest of a large payload comes by blocking reads
			 * (the driver writes it at once): first wake the
			 * engine for what is queued. */
			if (f->threads && h.length > c->rx_len) {
				nbdc_unplug(f->e);
				nbdc_plug(f->e);
			}
			if (rx_take(c, q->buf, h.length) < 0) {
				free(q->buf);
				free(q);
				return -ECONNRESET;
			}
		}
	}
	pthread_mutex_lock(&f->lock);
	f->inflight++;
	f->requests++;
	pthread_mutex_unlock(&f->lock);
	/* The flags the engine takes for each command. */
	switch (h.type) {
	case NBD_CMD_WRITE:
	case NBD_CMD_TRIM:
		flags = h.flags & NBD_CMD_FLAG_FUA;
		break;
	case NBD_CMD_WRITE_ZEROES:
		flags = h.flags & (NBD_CMD_FLAG_FUA | NBD_CMD_FLAG_NO_HOLE);
		break;
	default:
		flags = 0;
	}
	fwd_submit(f, q, flags, h.offset);
	return 0;
}

static void *fwd_thread(void *arg)
{
	struct fwd_conn *c = arg;
	struct fwd *f = c->f;
	int r = 0;

	while (r == 0 && rx_fill(c, sizeof(struct nbd_request_wire)) == 0) {
		/* Every request read so far, then one wake-up per connection. */
		nbdc_plug(f->e);
		do
			r = fwd_one(c);
		while (r == 0 && c->rx_len >= sizeof(struct nbd_request_wire));
		nbdc_unplug(f->e);
		fwd_flush_conn(c);	/* replies of requests refused at once */
	}
	/* No more requests (the driver closed its end, or sent NBD_CMD_DISC):
	 * the driver reads no replies either. */
	shutdown(c->fd, SHUT_RD);
	return NULL;
}

/* The engine's watch_ready: connection i's thread takes pair i's
 * requests. */
static int fwd_ready(void *arg, unsigned i)
{
	struct fwd *f = arg;
	struct fwd_conn *c = &f->c[i];
	int more = rx_more(c), r = 0;

	while (more >= 0 && r == 0 && c->rx_len >= sizeof(struct nbd_request_wire))
		r = fwd_one(c);
	fwd_flush_conn(c);	/* replies of requests refused at once */
	if (more < 0 || r < 0) {
		/* The driver closed its end, or sent NBD_CMD_DISC: it reads
		 * no replies either. */
		shutdown(c->fd, SHUT_RD);
		return -1;
	}
	return more;
}

/* The client engine's settings from the command line (-F, --ublk). */
static void engine_opts(const struct opts *o, struct nbdc_opts *no)
{
	*no = (struct nbdc_opts){
		.host = o->srv[0].host,
		.port = o->srv[0].port,
		.servers = o->srv + 1,
		.nservers = o->nsrv - 1,
		.export = o->export,
		.transport = o->unix_sock ? NBDC_UNIX : o->tcp ? NBDC_TCP : NBDC_SMCR,
		.connections = o->conns,
		.timeout_ms = o->dead_s ? o->dead_s * 1000 : 1,
		.read_only = o->readonly,
		.ctl_name = "smcr-attach",
		.tls = o->tls ? NBDC_TLS_REQUIRE : NBDC_TLS_OFF,
		.tls_certificates = o->tls_certificates,
		.tls_psk_file = o->tls_psk_file,
		.tls_username = o->tls_username,
		.tls_no_verify_peer = o->tls_no_verify_peer,
	};
	nbdc_settings_apply(&o->set, no);
	no->transport = o->unix_sock ? NBDC_UNIX : o->tcp ? NBDC_TCP : NBDC_SMCR;
	no->tls = o->tls ? nbdc_settings_tls(&o->set) == NBDC_TLS_ALLOW ? NBDC_TLS_ALLOW :
			   NBDC_TLS_REQUIRE : NBDC_TLS_OFF;
}

/* The engine on the export, and n socket pairs. */
static int fwd_open(const struct opts *o, struct fwd *f)
{
	struct nbdc_opts no;
	const char *thr = getenv("SMCR_ATTACH_THREADS");
	char msg[512];
	int sbuf = FWD_SOCKBUF, r, sv[2];
	unsigned i;

	engine_opts(o, &no);
	no.turn_end = fwd_flush;
	no.turn_arg = f;
	no.watch_ready = fwd_ready;
	memset(f, 0, sizeof(*f));
	f->threads = thr && !strcmp(thr, "1");
	pthread_mutex_init(&f->lock, NULL);
	pthread_cond_init(&f->idle, NULL);
	r = nbdc_open(&no, &f->e);
	if (r < 0) {
		nbdc_strerror(&no, r, msg, sizeof(msg));
		log_err("%s", msg);
		return r;
	}
	/* As many pairs as the engine has connections: the driver spreads
	 * requests over them as the engine does over its own. */
	f->n = nbdc_connections(f->e);
	for (i = 0; i < f->n; i++) {
		struct fwd_conn *c = &f->c[i];

		if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0) {
			r = -errno;
			goto close_pairs;
		}
		/* Replies are written from the engine's threads: room for a
		 * queue of them, so those threads seldom wait for the driver. */
		setsockopt(sv[0], SOL_SOCKET, SO_SNDBUF, &sbuf, sizeof(sbuf));
		setsockopt(sv[1], SOL_SOCKET, SO_SNDBUF, &sbuf, sizeof(sbuf));
		c->rx = malloc(FWD_RXBUF);
		if (!c->rx) {
			close(sv[0]);
			close(sv[1]);
			r = -ENOMEM;
			goto close_pairs;
		}
		c->f = f;
		c->fd = sv[0];
		c->kfd = sv[1];
		c->out_tail = &c->out;
		pthread_mutex_init(&c->wlock, NULL);
	}
	return 0;
close_pairs:
	while (i--) {
		close(f->c[i].fd);
		close(f->c[i].kfd);
		free(f->c[i].rx);
	}
	nbdc_close(f->e);
	return r;
}

static int fwd_start(struct fwd *f)
{
	unsigned i;
	int r;

	for (i = 0; i < f->n; i++) {
		struct fwd_conn *c = &f->c[i];

		if (c->kfd >= 0) {
			close(c->kfd);
			c->kfd = -1;
		}
		if (!f->threads) {
			r = nbdc_watch(f->e, i, c->fd);
			if (r < 0)
				return r;
			continue;
		}
		r = pthread_create(&c->thread, NULL, fwd_thread, c);
		if (r)
			return -r;
		c->started = true;
	}
	return 0;
}

/* Joins the threads (their ends closed by the driver: call it after
 * the device is disconnected), lets requests out finish and closes. */
static void fwd_close(struct fwd *f)
{
	struct nbdc_stats st;
	struct timespec until;
	unsigned i;

	for (i = 0; i < f->n; i++) {
		struct fwd_conn *c = &f->c[i];

		if (c->kfd >= 0)
			close(c->kfd);
		/* The engine's threads see the end of a watched pair. */
		shutdown(c->fd, SHUT_RDWR);
		if (c->started)
			pthread_join(c->thread, NULL);
	}
	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_sec += 10;
	pthread_mutex_lock(&f->lock);
	while (f->inflight && pthread_cond_timedwait(&f->idle, &f->lock, &until) == 0)
		;
	pthread_mutex_unlock(&f->lock);
	nbdc_get_stats(f->e, &st);
	log_info("forwarded %llu request(s), %llu failed, %llu bad, read in %llu read(s), "
		 "replies in %llu write(s); engine: %llu reconnect(s), %llu resent, %llu bytes "
		 "read, %llu written",
		 (unsigned long long)f->requests, (unsigned long long)f->errors,
		 (unsigned long long)f->bad, (unsigned long long)f->reads,
		 (unsigned long long)f->writes,
		 (unsigned long long)st.reconnects,
		 (unsigned long long)st.resent, (unsigned long long)st.bytes_read,
		 (unsigned long long)st.bytes_written);
	nbdc_close(f->e);
	for (i = 0; i < f->n; i++) {
		close(f->c[i].fd);
		free(f->c[i].rx);
	}
}

/* Hands the driver's ends to /dev/nbdN. */
static int fwd_attach(struct nl *n, const struct opts *o, struct fwd *f)
{
	int fds[MAX_CONNS], r;
	uint32_t min, pref, max;
	uint16_t flags = nbdc_flags(f->e);
	unsigned i;

	for (i = 0; i < f->n; i++)
		fds[i] = f->c[i].kfd;
	if (o->readonly || nbdc_read_only(f->e))
		flags |= NBD_FLAG_READ_ONLY;
	nbdc_block_size(f->e, &min, &pref, &max);
	msg_begin(n, n->family, NBD_CMD_CONNECT);
	attr_u32(n, NBD_ATTR_INDEX, (uint32_t)o->index);
	attr_u64(n, NBD_ATTR_SIZE_BYTES, nbdc_size(f->e));
	attr_u64(n, NBD_ATTR_BLOCK_SIZE_BYTES,
		 o->block ? o->block : pref >= 512 && pref <= 4096 ? pref : 4096);
	attr_u64(n, NBD_ATTR_SERVER_FLAGS, flags);
	attr_u64(n, NBD_ATTR_TIMEOUT, o->timeout_s);
	r = nl_socks(n, fds, f->n);
	if (r == 0)
		r = msg_send(n, NULL, NULL);
	if (r < 0) {
		log_err("/dev/nbd%d: the nbd driver refused the connection: %s", o->index,
			strerror(-r));
		return r;
	}
	log_info("/dev/nbd%d: %s:%s export '%s', %llu bytes, %u connection(s) over %s, "
		 "forwarded", o->index, o->srv[0].host, o->srv[0].port, o->export,
		 (unsigned long long)nbdc_size(f->e), f->n, o->unix_sock ? "a Unix socket" :
		 o->tcp ? "TCP" : "SMC-R");
	return 0;
}

/* Until the device is disconnected (or a signal: then it disconnects
 * it, as nothing would serve it any more). */
static int fwd_watch(const struct opts *o)
{
	struct nl n;
	int r = nl_open(&n);

	if (r < 0)
		return r;
	while (!stop) {
		r = nl_connected(&n, o->index);
		if (r <= 0)
			break;
		poll(NULL, 0, 200);
	}
	if (stop) {
		log_info("/dev/nbd%d: signal: disconnecting it", o->index);
		msg_begin(&n, n.family, NBD_CMD_DISCONNECT);
		attr_u32(&n, NBD_ATTR_INDEX, (uint32_t)o->index);
		r = msg_send(&n, NULL, NULL);
	} else if (r == 0 || r == -ENODEV) {
		log_info("/dev/nbd%d was disconnected", o->index);
		r = 0;
	}
	close(n.fd);
	return r;
}

/* --exec: CMD plays the driver (tests): the driver's ends are its file
 * descriptors, listed in SMCR_ATTACH_FDS; the export's size is in
 * SMCR_ATTACH_SIZE.  Returns CMD's exit status, or -errno. */
static int fwd_exec(struct fwd *f, const char *cmd)
{
	char fds[MAX_CONNS * 12] = "", size[24];
	unsigned i;
	pid_t pid;
	int st;

	for (i = 0; i < f->n; i++)
		snprintf(fds + strlen(fds), sizeof(fds) - strlen(fds), "%s%d", i ? " " : "",
			 f->c[i].kfd);
	snprintf(size, sizeof(size), "%llu", (unsigned long long)nbdc_size(f->e));
	pid = fork();
	if (pid < 0)
		return -errno;
	if (pid == 0) {
		for (i = 0; i < f->n; i++)
			fcntl(f->c[i].kfd, F_SETFD, 0);
		setenv("SMCR_ATTACH_FDS", fds, 1);
		setenv("SMCR_ATTACH_SIZE", size, 1);
		execl("/bin/sh", "sh", "-c", cmd, (char *)NULL);
		_exit(127);
	}
	st = fwd_start(f);
	if (st < 0) {
		kill(pid, SIGTERM);
		waitpid(pid, NULL, 0);
		return st;
	}
	while (waitpid(pid, &st, 0) < 0) {
		if (errno != EINTR)
			return -errno;
		if (stop)
			kill(pid, SIGTERM);
	}
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

/* --- command line ---------------------------------------------------------- */

static int run_forward(const struct opts *o)
{
	struct fwd f;
	struct nl n;
	int r;

	if (!o->exec) {
		r = nl_open(&n);
		if (r < 0) {
			log_err("the kernel's nbd driver: %s%s", strerror(-r),
				r == -ENOENT ? " (modprobe nbd)" : "");
			return 1;
		}
	}
	r = fwd_open(o, &f);
	if (r < 0)
		goto close_nl;
	if (o->exec) {
		r = fwd_exec(&f, o->exec);
		fwd_close(&f);
		if (r < 0)
			log_err("--exec: %s", strerror(-r));
		return r < 0 ? 1 : r;
	}
	/* The driver's requests wait in the pairs until the threads run. */
	r = fwd_attach(&n, o, &f);
	if (r == 0)
		r = fwd_start(&f);
	if (r == 0)
		r = fwd_watch(o);
	fwd_close(&f);
	if (r < 0)
		log_err("/dev/nbd%d: %s", o->index, strerror(-r));
close_nl:
	if (!o->exec)
		close(n.fd);
	return r < 0 ? 1 : 0;
}

/* --ublk: the engine serves a ublk device (smcr-attach-ublk.c). */
static int run_ublk(const struct opts *o)
{
	struct ublk_args a = {
		.dev_id = o->ublk_id,
		.recover = o->recover || o->standby,
		.standby = o->standby,
		.block = o->block,
		.queue_depth = o->qdepth,
		.readonly = o->readonly,
		.main_ms = main_ms,
	};

	engine_opts(o, &a.no);
	return ublk_run(&a, &stop);
}

enum {
	OPT_UBLK = 0x100, OPT_RECOVER, OPT_STANDBY, OPT_OLD_TIMEOUT,
	OPT_SETTING = 0x200,	/* + the id of an nbdc setting */
};

/* An export's URI instead of HOST[:PORT],... EXPORT: its address, export,
 * transport and TLS settings into o (pointing into a static copy). */
static int uri_opts(const char *uri, struct opts *o)
{
	static struct nbdc_uri u;
	char msg[600];
	int r = nbdc_uri_parse(uri, &u);

	if (r < 0) {
		nbdc_uri_strerror(uri, &u, r, msg, sizeof(msg));
		fprintf(stderr, "smcr-attach: %s\n", msg);
		return EXIT_USAGE;
	}
	snprintf(o->srv[0].host, sizeof(o->srv[0].host), "%s", u.host);
	snprintf(o->srv[0].port, sizeof(o->srv[0].port), "%s", u.port);
	o->nsrv = 1;
	o->export = u.export;
	o->unix_sock = u.transport == NBDC_UNIX;
	if (u.transport == NBDC_TCP)
		o->tcp = true;
	if (u.tls)
		o->tls = true;
	if (u.tls_certificates[0])
		o->tls_certificates = u.tls_certificates;
	if (u.tls_psk_file[0])
		o->tls_psk_file = u.tls_psk_file;
	if (u.tls_username[0])
		o->tls_username = u.tls_username;
	if (u.tls_verify_peer >= 0)
		o->tls_no_verify_peer = !u.tls_verify_peer;
	return 0;
}

static void usage(FILE *f, const struct nbdc_settings *set)
{
	fprintf(f,
"Usage: smcr-attach [OPTION]... HOST[:PORT][,HOST[:PORT]]... EXPORT /dev/nbdN\n"
"       smcr-attach -F --exec CMD [OPTION]... HOST[:PORT][,...] EXPORT\n"
"       smcr-attach --ublk[=N] [--recover | --standby] [OPTION]... HOST[:PORT][,...] EXPORT\n"
"       smcr-attach [-F | --ublk[=N]] [OPTION]... URI [/dev/nbdN]\n"
"       smcr-attach -d /dev/nbdN | /dev/ublkbN\n"
"Attaches an smcrd export to the kernel's nbd driver over AF_SMC (SMC-R, or\n"
"TCP when SMC-R is not possible) and replaces connections that die; with\n"
"-F, over socket pairs to its own forwarder on libsmcr (stock kernels);\n"
"with --ublk, as a ublk device (/dev/ublkbN) that it serves itself.\n"
"\n"
"  -F, --forward           the driver on socket pairs; smcr-attach forwards\n"
"                          its requests over libsmcr (SMC-R, TCP fallback),\n"
"                          with reconnect and resend\n"
"      --ublk[=N]          a ublk device /dev/ublkbN (N: the next free one)\n"
"                          served over libsmcr (SMC-R, TCP fallback) with\n"
"                          reconnect and resend; needs ublk_drv (Linux >= 6.0,\n"
"                          USER_COPY from 6.5); it outlives a killed smcr-attach\n"
"      --recover           with --ublk=N: take over /dev/ublkbN, whose server\n"
"                          died; its requests in flight are issued again\n"
"      --standby           with --ublk=N: connect now, wait for /dev/ublkbN's\n"
"                          server to die, then take the device over at once\n"
"  -Q, --queue-depth N     with --ublk: requests per queue (default 128)\n"
"  -E, --exec CMD          with -F, no device: run CMD with the driver's ends\n"
"                          of the pairs (fds in $SMCR_ATTACH_FDS; tests)\n"
"  -B, --buffer-size N[K|M]  SO_SNDBUF and SO_RCVBUF of the sockets (default\n"
"                          256K on AF_SMC: Linux's SMC-R buffers follow them;\n"
"                          0: the kernel's, net.smc.wmem/rmem)\n"
"  -b, --block-size N      logical block size (default: the export's, else 4096)\n"
"  -T, --driver-timeout S  I/O timeout of the driver in seconds (default 30;\n"
"                          with -F: the dead-timeout + 30); --timeout S is an\n"
"                          old spelling of it\n"
"  -d, --detach            disconnect /dev/nbdN, or remove /dev/ublkbN\n"
"  -v, --verbose           debug messages\n"
"  -h, --help, -V, --version\n"
"Connection settings (the same names in nbdkit-smcr-plugin and smcr-fuse;\n"
"any tls-* one implies --tls):\n");
	nbdc_settings_help(f, set, NBDC_IN_ATTACH);
	fprintf(f,
"\n"
"PORT defaults to %d (smcrd's SMC-R port; with --tls %d, NBD/TCP).  A comma\n"
"list names gateways of one export: a connection that loses its server\n"
"reconnects to the next one, in turn.  It stays in the foreground until the\n"
"device is disconnected (--ublk: removed; a signal removes it too).\n"
"URI: smcr://HOST[:PORT]/EXPORT, nbd://..., nbds://... (TLS), and with -F or\n"
"--ublk nbd+unix:///EXPORT?socket=PATH or nbds+unix://... (smcrd -U).\n", NBDC_SMCR_PORT, NBD_DEFAULT_PORT);
}

int main(int argc, char **argv)
{
	static const struct option own[] = {
		{ "forward", no_argument, NULL, 'F' },
		{ "exec", required_argument, NULL, 'E' },
		{ "ublk", optional_argument, NULL, OPT_UBLK },
		{ "recover", no_argument, NULL, OPT_RECOVER },
		{ "standby", no_argument, NULL, OPT_STANDBY },
		{ "queue-depth", required_argument, NULL, 'Q' },
		{ "buffer-size", required_argument, NULL, 'B' },
		{ "block-size", required_argument, NULL, 'b' },
		{ "driver-timeout", required_argument, NULL, 'T' },
		{ "timeout", required_argument, NULL, OPT_OLD_TIMEOUT },
		{ "detach", no_argument, NULL, 'd' },
		{ "verbose", no_argument, NULL, 'v' },
		{ "help", no_argument, NULL, 'h' },
		{ "version", no_argument, NULL, 'V' },
	};
	struct option lo[sizeof(own) / sizeof(own[0]) + 2 * NBDC_NSETTINGS + 1];
	unsigned nlo = 0, k;
	char err[256];
	/* static: its settings' strings live until exit */
	static struct opts o = { .conns = 1, .timeout_s = 30, .dead_s = 30, .sockbuf = -1,
				 .ublk_id = -1 };
	struct sigaction sa = { .sa_handler = on_signal };
	bool do_detach = false, timeout_set = false;
	struct nl n;
	char *end;
	int c, r;

	main_ms = now_ms();
	applog_set_ident("smcr-attach");
	if (nbdc_settings_init(&o.set) < 0 ||
	    nbdc_setting_default(&o.set, NBDC_S_CONNECTIONS, "1") < 0 ||
	    nbdc_setting_default(&o.set, NBDC_S_CTL, "smcr-attach") < 0)
		return 1;
	/* Its own options, then the table's: each by its name, and by its
	 * old one (timeout: only as dead-timeout; --timeout is the
	 * driver's, as it was). */
	for (k = 0; k < sizeof(own) / sizeof(own[0]); k++)
		lo[nlo++] = own[k];
	for (k = 0; k < NBDC_NSETTINGS; k++) {
		const struct nbdc_setting *st = &nbdc_settings[k];
		int has = st->sets >= 0 ? no_argument : st->implied ? optional_argument :
			  required_argument;

		if (!(st->in & NBDC_IN_ATTACH))
			continue;
		if (k != NBDC_S_TIMEOUT)
			lo[nlo++] = (struct option){ st->name, has, NULL, OPT_SETTING + (int)k };
		if (st->alias)
			lo[nlo++] = (struct option){ st->alias, has, NULL, OPT_SETTING + (int)k };
	}
	lo[nlo] = (struct option){ NULL, 0, NULL, 0 };
	while ((c = getopt_long(argc, argv, "C:tFE:B:b:T:D:rQ:dvhV", lo, NULL)) != -1) {
		unsigned long v = 0;
		int id = c >= OPT_SETTING ? c - OPT_SETTING :
			 c < 0x100 ? nbdc_setting_short((char)c, NBDC_IN_ATTACH) : -1;

		if (id >= 0) {
			if (nbdc_setting_set(&o.set, id, optarg, err, sizeof(err)) < 0) {
				fprintf(stderr, "smcr-attach: %s\n", err);
				return EXIT_USAGE;
			}
			continue;
		}
		if (c == OPT_OLD_TIMEOUT) {
			fprintf(stderr, "smcr-attach: --timeout S is an old spelling of "
				"--driver-timeout S (-T S)\n");
			c = 'T';
		}

		if (c == 'E') {
			o.exec = optarg;
			continue;
		}
		if (c == OPT_UBLK) {
			o.ublk = true;
			if (optarg && parse_ublk(optarg, &o.ublk_id) < 0) {
				fprintf(stderr, "smcr-attach: --ublk=N: N of /dev/ublkbN\n");
				return EXIT_USAGE;
			}
			continue;
		}
		if (c == OPT_RECOVER) {
			o.recover = true;
			continue;
		}
		if (c == OPT_STANDBY) {
			o.standby = true;
			continue;
		}
		if (c == 'B') {
			errno = 0;
			v = strtoul(optarg, &end, 10);
			if (*end == 'K' || *end == 'k')
				v <<= 10, end++;
			else if (*end == 'M' || *end == 'm')
				v <<= 20, end++;
			if (errno || *end || !*optarg || (v && v < 4096) || v > 1u << 30) {
				fprintf(stderr, "smcr-attach: buffer size: 0, or 4K to 1024M\n");
				return EXIT_USAGE;
			}
			o.sockbuf = (int)v;
			continue;
		}
		if (optarg) {
			errno = 0;
			v = strtoul(optarg, &end, 10);
			if (errno || *end || !*optarg || v > 1u << 20) {
				fprintf(stderr, "smcr-attach: bad number '%s'\n", optarg);
				return EXIT_USAGE;
			}
		}
		switch (c) {
		case 'F': o.forward = true; break;
		case 'b':
			if (v < 512 || v > 4096 || (v & (v - 1))) {
				fprintf(stderr, "smcr-attach: block size: 512, 1024, 2048 or 4096\n");
				return EXIT_USAGE;
			}
			o.block = (unsigned)v;
			break;
		case 'Q':
			if (v < 1 || v > UBLK_MAX_QUEUE_DEPTH_OPT) {
				fprintf(stderr, "smcr-attach: queue depth: 1 to %d\n",
					UBLK_MAX_QUEUE_DEPTH_OPT);
				return EXIT_USAGE;
			}
			o.qdepth = (unsigned)v;
			break;
		case 'T': o.timeout_s = (unsigned)v; timeout_set = true; break;
		case 'd': do_detach = true; break;
		case 'v': smcr_log_set_level(SMCR_LOG_DEBUG); break;
		case 'h': usage(stdout, &o.set); return 0;
		case 'V': printf("smcr-attach (%s) %s\n", PACKAGE_NAME, PACKAGE_VERSION); return 0;
		default: usage(stderr, &o.set); return EXIT_USAGE;
		}
	}
	o.conns = nbdc_settings_uint(&o.set, NBDC_S_CONNECTIONS);
	o.dead_s = (nbdc_settings_ms(&o.set, NBDC_S_TIMEOUT) + 999) / 1000;
	o.tcp = o.set.given[NBDC_S_TRANSPORT] && strcmp(o.set.val[NBDC_S_TRANSPORT], "smcr");
	o.readonly = nbdc_settings_bool(&o.set, NBDC_S_READ_ONLY);
	o.tls = o.set.given[NBDC_S_TLS] ? nbdc_settings_tls(&o.set) != NBDC_TLS_OFF :
		o.set.given[NBDC_S_TLS_CERTIFICATES] || o.set.given[NBDC_S_TLS_PSK_FILE] ||
		o.set.given[NBDC_S_TLS_USERNAME] || o.set.given[NBDC_S_TLS_HOSTNAME] ||
		o.set.given[NBDC_S_TLS_VERIFY_PEER];
	o.tls_certificates = o.set.val[NBDC_S_TLS_CERTIFICATES];
	o.tls_psk_file = o.set.val[NBDC_S_TLS_PSK_FILE];
	o.tls_username = o.set.val[NBDC_S_TLS_USERNAME];
	o.tls_no_verify_peer = o.set.given[NBDC_S_TLS_VERIFY_PEER] &&
			       !nbdc_settings_bool(&o.set, NBDC_S_TLS_VERIFY_PEER);
	if (do_detach && argc - optind == 1 && strstr(argv[optind], "ublkb")) {
		int id;

		if (parse_ublk(argv[optind], &id) < 0) {
			usage(stderr, &o.set);
			return EXIT_USAGE;
		}
		r = ublk_detach(id);
		if (r < 0) {
			fprintf(stderr, "smcr-attach: /dev/ublkb%d: %s\n", id, strerror(-r));
			return 1;
		}
		return 0;
	}
	if (do_detach) {
		if (argc - optind != 1 || parse_dev(argv[optind], &o.index) < 0) {
			usage(stderr, &o.set);
			return EXIT_USAGE;
		}
		r = detach(o.index);
		if (r < 0) {
			fprintf(stderr, "smcr-attach: /dev/nbd%d: %s\n", o.index, strerror(-r));
			return 1;
		}
		return 0;
	}
	if (o.recover && (!o.ublk || o.ublk_id < 0)) {
		fprintf(stderr, "smcr-attach: --recover needs --ublk=N\n");
		return EXIT_USAGE;
	}
	if (o.standby && (!o.ublk || o.ublk_id < 0)) {
		fprintf(stderr, "smcr-attach: --standby needs --ublk=N\n");
		return EXIT_USAGE;
	}
	if (o.ublk && (o.forward || o.exec)) {
		fprintf(stderr, "smcr-attach: --ublk and --forward exclude each other\n");
		return EXIT_USAGE;
	}
	if (o.qdepth && !o.ublk) {
		fprintf(stderr, "smcr-attach: --queue-depth needs --ublk\n");
		return EXIT_USAGE;
	}
	if (o.exec && !o.forward) {
		fprintf(stderr, "smcr-attach: --exec needs --forward\n");
		return EXIT_USAGE;
	}
	if (optind < argc && strstr(argv[optind], "://")) {
		r = uri_opts(argv[optind], &o);
		if (r)
			return r;
		optind++;
	} else if (optind < argc && argc - optind >= 2) {
		r = nbdc_servers_parse(argv[optind], o.tls ? NBD_DEFAULT_PORT : NBDC_SMCR_PORT,
				       o.srv, NBDC_MAX_SERVERS, &o.nsrv);
		if (r < 0) {
			if (r == -E2BIG)
				fprintf(stderr, "smcr-attach: '%s': at most %d servers\n",
					argv[optind], NBDC_MAX_SERVERS);
			else
				fprintf(stderr, "smcr-attach: bad address '%s'\n", argv[optind]);
			return EXIT_USAGE;
		}
		o.export = argv[optind + 1];
		optind += 2;
	} else {
		usage(stderr, &o.set);
		return EXIT_USAGE;
	}
	if (o.tls && !o.forward && !o.ublk) {
		fprintf(stderr, "smcr-attach: TLS needs --forward (the kernel's nbd driver "
			"has none)\n");
		return EXIT_USAGE;
	}
	if (o.unix_sock && !o.forward && !o.ublk) {
		fprintf(stderr, "smcr-attach: a Unix socket needs --forward or --ublk\n");
		return EXIT_USAGE;
	}
	if (o.tls)
		o.tcp = true;
	if (o.exec || o.ublk ? argc - optind != 0 :
	    argc - optind != 1 || parse_dev(argv[optind], &o.index) < 0) {
		usage(stderr, &o.set);
		return EXIT_USAGE;
	}
	if (o.forward && !timeout_set)
		o.timeout_s = o.dead_s + 30;
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);
	if (o.forward)
		return run_forward(&o);
	if (o.ublk)
		return run_ublk(&o);

	r = nl_open(&n);
	if (r < 0) {
		log_err("the kernel's nbd driver: %s%s", strerror(-r),
			r == -ENOENT ? " (modprobe nbd)" : "");
		return 1;
	}
	r = attach(&n, &o);
	close(n.fd);
	if (r < 0)
		return 1;
	r = watch(&o);
	if (r < 0) {
		log_err("watching /dev/nbd%d: %s", o.index, strerror(-r));
		return 1;
	}
	return 0;
}
