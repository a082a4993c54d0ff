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
 * disconnected (smcr-attach -d, nbd-client -d).
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
#include <linux/genetlink.h>
#include <linux/nbd-netlink.h>
#include <linux/netlink.h>
#include <sys/socket.h>

#include "applog.h"
#include "nbd-client.h"
#include "nbdc-uri.h"
#include "transport.h"

#ifndef AF_SMC
#define AF_SMC 43
#endif
#define SMCPROTO_SMC	0	/* AF_SMC over IPv4 */
#define SMCPROTO_SMC6	1	/* AF_SMC over IPv6 */

#define EXIT_USAGE	2
#define MAX_CONNS	16
#define NL_BUF		8192

struct opts {
	char host[256];
	char port[16];
	const char *export;
	int index;			/* N of /dev/nbdN */
	unsigned conns;
	unsigned timeout_s;		/* I/O timeout of the driver */
	unsigned dead_s;		/* wait for a reconnect this long */
	unsigned block;
	bool tcp;			/* plain TCP instead of AF_SMC */
	bool readonly;
};

static volatile sig_atomic_t stop;

static void on_signal(int sig)
{
	(void)sig;
	stop = 1;
}

/* --- sockets and the NBD handshake ---------------------------------------- */

static int connect_one(const struct opts *o, int *fdp)
{
	struct addrinfo hints = { .ai_socktype = SOCK_STREAM }, *res, *ai;
	int r, fd = -1;

	r = getaddrinfo(o->host, o->port, &hints, &res);
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

static int attach(struct nl *n, const struct opts *o)
{
	struct nbd_export_info info;
	int fds[MAX_CONNS], r;
	unsigned i, nfds = 0, want = o->conns;
	uint16_t flags;

	for (;;) {
		r = open_conn(o, &info, &fds[nfds]);
		if (r < 0) {
			log_err("%s:%s export '%s': %s", o->host, o->port, o->export, strerror(-r));
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
		 o->index, o->host, o->port, o->export, (unsigned long long)info.size, nfds,
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

static int64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
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
				log_info("/dev/nbd%d: a dead connection was replaced", o->index);
			} else {
				log_warn("/dev/nbd%d: reconnect: %s (again in %d ms)", o->index,
					 strerror(-r), backoff);
				next_try = t + backoff;
				backoff = backoff < 4000 ? backoff * 2 : 5000;
			}
			continue;
		}
		poll(&p, 1, pending ? 50 : 500);
		if (ev.mcast) {
			unsigned d = read_link_dead(&ev, o->index);

			if (d) {
				log_warn("/dev/nbd%d: %u connection(s) died: reconnecting",
					 o->index, d);
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

/* --- command line ---------------------------------------------------------- */

static void usage(FILE *f)
{
	fprintf(f,
"Usage: smcr-attach [OPTION]... HOST[:PORT] EXPORT /dev/nbdN\n"
"       smcr-attach -d /dev/nbdN\n"
"Attaches an smcrd export to the kernel's nbd driver over AF_SMC (SMC-R, or\n"
"TCP when SMC-R is not possible) and replaces connections that die.\n"
"\n"
"  -C, --connections N     connections if the export allows multi-conn (1)\n"
"  -t, --tcp               plain TCP sockets instead of AF_SMC\n"
"  -b, --block-size N      logical block size (default: the export's, else 4096)\n"
"  -T, --timeout S         I/O timeout of the driver in seconds (default 30)\n"
"  -D, --dead-timeout S    wait S seconds for a reconnect before failing\n"
"                          I/O (default 30)\n"
"  -r, --read-only         attach read-only\n"
"  -d, --detach            disconnect /dev/nbdN\n"
"  -v, --verbose           debug messages\n"
"  -h, --help, -V, --version\n"
"\n"
"PORT defaults to %d (smcrd's SMC-R port).  It stays in the foreground until\n"
"the device is disconnected.\n", NBDC_SMCR_PORT);
}

int main(int argc, char **argv)
{
	static const struct option lo[] = {
		{ "connections", required_argument, NULL, 'C' },
		{ "tcp", no_argument, NULL, 't' },
		{ "block-size", required_argument, NULL, 'b' },
		{ "timeout", required_argument, NULL, 'T' },
		{ "dead-timeout", required_argument, NULL, 'D' },
		{ "read-only", no_argument, NULL, 'r' },
		{ "detach", no_argument, NULL, 'd' },
		{ "verbose", no_argument, NULL, 'v' },
		{ "help", no_argument, NULL, 'h' },
		{ "version", no_argument, NULL, 'V' },
		{ NULL, 0, NULL, 0 },
	};
	struct opts o = { .conns = 1, .timeout_s = 30, .dead_s = 30 };
	struct sigaction sa = { .sa_handler = on_signal };
	bool do_detach = false;
	struct nl n;
	char *end;
	int c, r;

	applog_set_ident("smcr-attach");
	while ((c = getopt_long(argc, argv, "C:tb:T:D:rdvhV", lo, NULL)) != -1) {
		unsigned long v = 0;

		if (optarg) {
			errno = 0;
			v = strtoul(optarg, &end, 10);
			if (errno || *end || !*optarg || v > 1u << 20) {
				fprintf(stderr, "smcr-attach: bad number '%s'\n", optarg);
				return EXIT_USAGE;
			}
		}
		switch (c) {
		case 'C':
			if (v < 1 || v > MAX_CONNS) {
				fprintf(stderr, "smcr-attach: connections: 1 to %d\n", MAX_CONNS);
				return EXIT_USAGE;
			}
			o.conns = (unsigned)v;
			break;
		case 't': o.tcp = true; break;
		case 'b':
			if (v < 512 || v > 4096 || (v & (v - 1))) {
				fprintf(stderr, "smcr-attach: block size: 512, 1024, 2048 or 4096\n");
				return EXIT_USAGE;
			}
			o.block = (unsigned)v;
			break;
		case 'T': o.timeout_s = (unsigned)v; break;
		case 'D': o.dead_s = (unsigned)v; break;
		case 'r': o.readonly = true; break;
		case 'd': do_detach = true; break;
		case 'v': smcr_log_set_level(SMCR_LOG_DEBUG); break;
		case 'h': usage(stdout); return 0;
		case 'V': printf("smcr-attach (%s) %s\n", PACKAGE_NAME, PACKAGE_VERSION); return 0;
		default: usage(stderr); return EXIT_USAGE;
		}
	}
	if (do_detach) {
		if (argc - optind != 1 || parse_dev(argv[optind], &o.index) < 0) {
			usage(stderr);
			return EXIT_USAGE;
		}
		r = detach(o.index);
		if (r < 0) {
			fprintf(stderr, "smcr-attach: /dev/nbd%d: %s\n", o.index, strerror(-r));
			return 1;
		}
		return 0;
	}
	if (argc - optind != 3 || parse_dev(argv[optind + 2], &o.index) < 0) {
		usage(stderr);
		return EXIT_USAGE;
	}
	if (nbdc_hostport_parse(argv[optind], NBDC_SMCR_PORT, o.host, sizeof(o.host), o.port,
				sizeof(o.port)) < 0) {
		fprintf(stderr, "smcr-attach: bad address '%s'\n", argv[optind]);
		return EXIT_USAGE;
	}
	o.export = argv[optind + 1];
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);

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
