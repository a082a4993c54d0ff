/* SPDX-License-Identifier: BSD-3-Clause */
/* smcrbd: unit tests for the neighbour checks of smcr/dev.c: the peer's
 * address must be resolved on the netdev of the link's local GID, not on
 * whichever NIC of the same subnet the route names first. */
#include <config.h>

#include <errno.h>
#include <string.h>
#include <arpa/inet.h>
#include <net/if.h>
#include <netinet/in.h>
#include <linux/neighbour.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>

#include "unit.h"
#include "smcr-suites.h"
#include "dev.h"

/* A dump part being built: RTM_NEWNEIGH entries, then NLMSG_DONE. */
struct dump {
	char buf[1024] __attribute__((aligned(NLMSG_ALIGNTO)));
	size_t len;
};

static void dump_neigh(struct dump *d, int family, const void *addr,
		       int ifindex, uint16_t state)
{
	const size_t alen = family == AF_INET ? 4 : 16;
	struct nlmsghdr *nh = (struct nlmsghdr *)(d->buf + d->len);
	struct ndmsg *nd = NLMSG_DATA(nh);
	struct rtattr *a;

	memset(nh, 0, NLMSG_SPACE(sizeof(*nd) + RTA_SPACE(alen)));
	nh->nlmsg_type = RTM_NEWNEIGH;
	nh->nlmsg_len = NLMSG_LENGTH(sizeof(*nd) + RTA_SPACE(alen));
	nd->ndm_family = (unsigned char)family;
	nd->ndm_ifindex = ifindex;
	nd->ndm_state = state;
	a = RTM_RTA(nd);
	a->rta_type = NDA_DST;
	a->rta_len = (unsigned short)RTA_LENGTH(alen);
	memcpy(RTA_DATA(a), addr, alen);
	d->len += NLMSG_ALIGN(nh->nlmsg_len);
}

static void dump_end(struct dump *d, uint16_t type)
{
	struct nlmsghdr *nh = (struct nlmsghdr *)(d->buf + d->len);

	memset(nh, 0, NLMSG_SPACE(sizeof(int)));
	nh->nlmsg_type = type;
	nh->nlmsg_len = NLMSG_LENGTH(sizeof(int));
	d->len += NLMSG_ALIGN(nh->nlmsg_len);
}

/* parse DUMP for ADDR on IFINDEX: the return value, and *found */
static int parse(const struct dump *d, int family, const void *addr,
		 unsigned int ifindex, bool *found)
{
	*found = false;
	return smcr_neigh_parse(d->buf, d->len, family, addr, ifindex, found);
}

/* The lane's one-subnet case: the peer 10.1.1.18 is resolved on eth0
 * (ifindex 2), the first route, and still incomplete on eth1 (3), the
 * netdev of rxe1's GID.  Only the entry on the link's own netdev counts. */
static void test_neigh_parse_ifindex(void)
{
	struct in_addr peer, other;
	struct in6_addr peer6;
	struct dump d = { .len = 0 };
	bool found;

	inet_pton(AF_INET, "10.1.1.18", &peer);
	inet_pton(AF_INET, "10.1.1.2", &other);
	inet_pton(AF_INET6, "::ffff:10.1.1.18", &peer6);
	dump_neigh(&d, AF_INET, &peer, 2, NUD_REACHABLE);
	dump_neigh(&d, AF_INET, &peer, 3, NUD_INCOMPLETE);
	dump_neigh(&d, AF_INET, &other, 3, NUD_REACHABLE);
	dump_neigh(&d, AF_INET6, &peer6, 3, NUD_REACHABLE);
	dump_end(&d, NLMSG_DONE);

	CU_ASSERT_EQUAL(parse(&d, AF_INET, &peer, 2, &found), 1);
	CU_ASSERT_TRUE(found);
	CU_ASSERT_EQUAL(parse(&d, AF_INET, &peer, 3, &found), 1);
	CU_ASSERT_FALSE(found);		/* what the refused ADD LINK met */
	CU_ASSERT_EQUAL(parse(&d, AF_INET, &peer, 0, &found), 1);
	CU_ASSERT_TRUE(found);		/* no netdev: any interface */
	CU_ASSERT_EQUAL(parse(&d, AF_INET, &peer, 4, &found), 1);
	CU_ASSERT_FALSE(found);
	CU_ASSERT_EQUAL(parse(&d, AF_INET, &other, 3, &found), 1);
	CU_ASSERT_TRUE(found);

	/* Resolved on eth1 too (STALE still has the MAC). */
	d.len = 0;
	dump_neigh(&d, AF_INET, &peer, 2, NUD_REACHABLE);
	dump_neigh(&d, AF_INET, &peer, 3, NUD_STALE);
	CU_ASSERT_EQUAL(parse(&d, AF_INET, &peer, 3, &found), 0);	/* more follows */
	CU_ASSERT_TRUE(found);
	dump_neigh(&d, AF_INET, &peer, 4, NUD_FAILED);
	CU_ASSERT_EQUAL(parse(&d, AF_INET, &peer, 4, &found), 0);
	CU_ASSERT_FALSE(found);
	dump_end(&d, NLMSG_ERROR);
	CU_ASSERT_EQUAL(parse(&d, AF_INET, &peer, 3, &found), -EIO);
}

/* Malformed parts: a header longer than the buffer, a message too short
 * for its ndmsg, an attribute that runs past its message. */
static void test_neigh_parse_malformed(void)
{
	struct in_addr peer;
	struct dump d = { .len = 0 };
	struct nlmsghdr *nh;
	struct rtattr *a;
	bool found;

	inet_pton(AF_INET, "10.1.1.18", &peer);
	dump_neigh(&d, AF_INET, &peer, 3, NUD_REACHABLE);
	nh = (struct nlmsghdr *)d.buf;
	CU_ASSERT_EQUAL(parse(&d, AF_INET, &peer, 3, &found), 0);
	CU_ASSERT_TRUE(found);
	nh->nlmsg_len = (uint32_t)d.len + 4;
	CU_ASSERT_EQUAL(parse(&d, AF_INET, &peer, 3, &found), 0);
	CU_ASSERT_FALSE(found);
	nh->nlmsg_len = NLMSG_LENGTH(sizeof(struct ndmsg) - 1);
	CU_ASSERT_EQUAL(parse(&d, AF_INET, &peer, 3, &found), 0);
	CU_ASSERT_FALSE(found);
	nh->nlmsg_len = NLMSG_LENGTH(sizeof(struct ndmsg) + RTA_LENGTH(4));
	a = RTM_RTA((struct ndmsg *)NLMSG_DATA(nh));
	a->rta_len = RTA_LENGTH(8);
	CU_ASSERT_EQUAL(parse(&d, AF_INET, &peer, 3, &found), 0);
	CU_ASSERT_FALSE(found);
}

/* On this host's kernel: the prod leaves by the interface asked for (an
 * ifindex that does not exist fails it), and the netlink query filters on
 * it.  Loopback keeps one NOARP entry, keyed 0.0.0.0, which the prod
 * through lo creates if it was not there. */
static void test_neigh_prod_kernel(void)
{
	struct sockaddr_in to = { .sin_family = AF_INET, .sin_port = htons(9) };
	const struct in_addr any = { .s_addr = INADDR_ANY };
	unsigned int lo = if_nametoindex("lo");
	const unsigned int none = 0x7ffffff0;
	int r;

	to.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	r = smcr_neigh_prod((struct sockaddr *)&to, sizeof(to), lo);
	if (!lo || r == -EAFNOSUPPORT || r == -EPERM ||
	    smcr_neigh_resolved(AF_INET, &any, 0) < 0) {
		fprintf(stderr, "skipped: no loopback or no rtnetlink here\n");
		return;
	}
	CU_ASSERT_EQUAL(r, 0);
	CU_ASSERT_EQUAL(smcr_neigh_prod((struct sockaddr *)&to, sizeof(to), 0), 0);
	CU_ASSERT_EQUAL(smcr_neigh_prod((struct sockaddr *)&to, sizeof(to), none), -ENODEV);
	CU_ASSERT_EQUAL(smcr_neigh_resolved(AF_INET, &any, lo), 1);
	CU_ASSERT_EQUAL(smcr_neigh_resolved(AF_INET, &any, none), 0);
}

CU_TestInfo smcr_dev_tests[] = {
	{ "neighbour on the GID's netdev only", test_neigh_parse_ifindex },
	{ "malformed neighbour dump", test_neigh_parse_malformed },
	{ "prod out of an interface (kernel)", test_neigh_prod_kernel },
	CU_TEST_INFO_NULL,
};
