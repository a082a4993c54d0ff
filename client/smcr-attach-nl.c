/* SPDX-License-Identifier: BSD-3-Clause */
/* smcr-attach's talk with the kernel's nbd driver over generic netlink
 * (linux/nbd-netlink.h): the family and its multicast group, messages and
 * their attributes, the device's status and its dead-connection reports.
 * What to connect and when is smcr-attach.c's and smcr-attach-fwd.c's. */
#include <config.h>

#include <errno.h>
#include <string.h>
#include <unistd.h>
#include <linux/genetlink.h>
#include <linux/nbd-netlink.h>
#include <linux/netlink.h>
#include <sys/socket.h>

#include "smcr-attach-int.h"

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

void nl_put_u32(struct nl *n, uint16_t type, uint32_t v)
{
	attr_put(n, type, &v, sizeof(v));
}

void nl_put_u64(struct nl *n, uint16_t type, uint64_t v)
{
	attr_put(n, type, &v, sizeof(v));
}

static void attr_end(struct nl *n, struct nlattr *nest)
{
	nest->nla_len = (uint16_t)(n->buf + n->len - (char *)nest);
}

void nl_msg_begin(struct nl *n, uint16_t type, uint8_t cmd)
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

int nl_send(struct nl *n, void (*cb)(void *, struct nlmsghdr *), void *arg)
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

int nl_open(struct nl *n)
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
	nl_msg_begin(n, GENL_ID_CTRL, CTRL_CMD_GETFAMILY);
	attr_put(n, CTRL_ATTR_FAMILY_NAME, NBD_GENL_FAMILY_NAME,
		 strlen(NBD_GENL_FAMILY_NAME) + 1);
	r = nl_send(n, family_cb, n);
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

int nl_socks(struct nl *n, const int *fds, unsigned nfds)
{
	struct nlattr *socks = attr_put(n, NBD_ATTR_SOCKETS, NULL, 0);
	unsigned i;

	if (!socks)
		return -ENOSPC;
	for (i = 0; i < nfds; i++) {
		struct nlattr *item = attr_put(n, NBD_SOCK_ITEM, NULL, 0);

		if (!item)
			return -ENOSPC;
		nl_put_u32(n, NBD_SOCK_FD, (uint32_t)fds[i]);
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

int nl_connected(struct nl *n, int index)
{
	struct status st = { .index = index, .connected = -1 };
	int r;

	nl_msg_begin(n, n->family, NBD_CMD_STATUS);
	nl_put_u32(n, NBD_ATTR_INDEX, (uint32_t)index);
	r = nl_send(n, status_cb, &st);
	if (r < 0)
		return r;
	return st.connected < 0 ? -ENODEV : st.connected;
}

unsigned nl_link_dead(struct nl *n, int index)
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

int nl_disconnect(struct nl *n, int index)
{
	nl_msg_begin(n, n->family, NBD_CMD_DISCONNECT);
	nl_put_u32(n, NBD_ATTR_INDEX, (uint32_t)index);
	return nl_send(n, NULL, NULL);
}
