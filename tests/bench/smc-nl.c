/* SPDX-License-Identifier: BSD-3-Clause */
/* smc-nl: the few knobs and counters of the kernel's AF_SMC (net/smc) that
 * the benchmarks need, over generic netlink (what smc-tools' smc_pnet,
 * smcd ueid and smcd stats do; smc-tools is not packaged for every
 * architecture).
 *
 *   smc-nl pnet-add PNETID ETHDEV IBDEV PORT   put a netdev and an RDMA port
 *                                             into one PNET (SMC_PNETID_ADD)
 *   smc-nl ueid-add EID                        add a user EID (SMC-Rv2 needs
 *                                             one shared by both peers)
 *   smc-nl info                                system info (SMC version,
 *                                             SMC-Rv2 capable, ...)
 *   smc-nl stats                               SMC-R successes (v1/v2,
 *                                             client/server), handshake errors
 *   smc-nl fallbacks                           fallback counts by reason code
 *
 * Output: one "name value" pair per line.  Exit status 0 on success.
 */
#include <config.h>

#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <linux/genetlink.h>
#include <linux/netlink.h>
#include <linux/smc.h>
#include <sys/socket.h>

#define BUFSZ 32768

struct req {
	struct nlmsghdr nh;
	struct genlmsghdr gh;
	char attrs[512];
};

static int nl_fd;
static uint32_t seq;

static void put_attr(struct req *r, uint16_t type, const void *data, size_t len)
{
	struct nlattr *a = (struct nlattr *)((char *)r + NLMSG_ALIGN(r->nh.nlmsg_len));

	a->nla_type = type;
	a->nla_len = (uint16_t)(NLA_HDRLEN + len);
	memcpy((char *)a + NLA_HDRLEN, data, len);
	r->nh.nlmsg_len = NLMSG_ALIGN(r->nh.nlmsg_len) + NLA_ALIGN(a->nla_len);
}

static void init_req(struct req *r, uint16_t family, uint8_t cmd, uint8_t version,
		     uint16_t flags)
{
	memset(r, 0, sizeof(*r));
	r->nh.nlmsg_len = NLMSG_LENGTH(GENL_HDRLEN);
	r->nh.nlmsg_type = family;
	r->nh.nlmsg_flags = (uint16_t)(NLM_F_REQUEST | flags);
	r->nh.nlmsg_seq = ++seq;
	r->gh.cmd = cmd;
	r->gh.version = version;
}

/* Sends r and calls fn for every reply message until the ack or the end of
 * a dump.  Returns 0 or -errno (from the kernel's error message). */
static int transact(struct req *r, void (*fn)(struct nlmsghdr *nh, void *arg), void *arg)
{
	static char buf[BUFSZ];
	struct sockaddr_nl sa = { .nl_family = AF_NETLINK };

	if (sendto(nl_fd, r, r->nh.nlmsg_len, 0, (struct sockaddr *)&sa, sizeof(sa)) < 0)
		return -errno;
	for (;;) {
		ssize_t n = recv(nl_fd, buf, sizeof(buf), 0);
		struct nlmsghdr *nh;

		if (n < 0)
			return -errno;
		for (nh = (struct nlmsghdr *)buf; NLMSG_OK(nh, (size_t)n); nh = NLMSG_NEXT(nh, n)) {
			if (nh->nlmsg_seq != r->nh.nlmsg_seq)
				continue;
			if (nh->nlmsg_type == NLMSG_DONE)
				return 0;
			if (nh->nlmsg_type == NLMSG_ERROR) {
				struct nlmsgerr *e = NLMSG_DATA(nh);

				return e->error;
			}
			if (fn)
				fn(nh, arg);
		}
	}
}

#define for_each_attr(a, start, len)						\
	for ((a) = (struct nlattr *)(start);					\
	     (len) >= (int)NLA_HDRLEN && (a)->nla_len >= NLA_HDRLEN &&		\
	     (a)->nla_len <= (len);						\
	     (len) -= NLA_ALIGN((a)->nla_len),					\
	     (a) = (struct nlattr *)((char *)(a) + NLA_ALIGN((a)->nla_len)))

static void *attr_data(struct nlattr *a) { return (char *)a + NLA_HDRLEN; }
static int attr_len(struct nlattr *a) { return a->nla_len - NLA_HDRLEN; }

static uint64_t attr_uint(struct nlattr *a)
{
	uint64_t v = 0;

	switch (attr_len(a)) {
	case 1: v = *(uint8_t *)attr_data(a); break;
	case 2: v = *(uint16_t *)attr_data(a); break;
	case 4: v = *(uint32_t *)attr_data(a); break;
	case 8: memcpy(&v, attr_data(a), 8); break;
	default: break;
	}
	return v;
}

static void family_cb(struct nlmsghdr *nh, void *arg)
{
	struct nlattr *a;
	int len = (int)nh->nlmsg_len - NLMSG_LENGTH(GENL_HDRLEN);

	for_each_attr(a, (char *)NLMSG_DATA(nh) + GENL_HDRLEN, len)
		if ((a->nla_type & NLA_TYPE_MASK) == CTRL_ATTR_FAMILY_ID)
			*(uint16_t *)arg = *(uint16_t *)attr_data(a);
}

static uint16_t family(const char *name)
{
	struct req r;
	uint16_t id = 0;
	int ret;

	init_req(&r, GENL_ID_CTRL, CTRL_CMD_GETFAMILY, 1, NLM_F_ACK);
	put_attr(&r, CTRL_ATTR_FAMILY_NAME, name, strlen(name) + 1);
	ret = transact(&r, family_cb, &id);
	if (ret || !id) {
		fprintf(stderr, "smc-nl: generic netlink family %s: %s (is the smc module loaded?)\n",
			name, ret ? strerror(-ret) : "not found");
		exit(1);
	}
	return id;
}

/* ---- printing nested attributes by name ---------------------------------- */

static const char *sys_names[] = {
	[SMC_NLA_SYS_VER] = "smc_version", [SMC_NLA_SYS_REL] = "smc_release",
	[SMC_NLA_SYS_IS_ISM_V2] = "ism_v2", [SMC_NLA_SYS_LOCAL_HOST] = "host",
	[SMC_NLA_SYS_SEID] = "seid", [SMC_NLA_SYS_IS_SMCR_V2] = "smcr_v2",
};

static const char *tech_names[] = {
	[SMC_NLA_STATS_T_CLNT_V1_SUCC] = "client_v1_ok",
	[SMC_NLA_STATS_T_CLNT_V2_SUCC] = "client_v2_ok",
	[SMC_NLA_STATS_T_SRV_V1_SUCC] = "server_v1_ok",
	[SMC_NLA_STATS_T_SRV_V2_SUCC] = "server_v2_ok",
	[SMC_NLA_STATS_T_RX_BYTES] = "rx_bytes", [SMC_NLA_STATS_T_TX_BYTES] = "tx_bytes",
	[SMC_NLA_STATS_T_RX_CNT] = "rx_calls", [SMC_NLA_STATS_T_TX_CNT] = "tx_calls",
};

static void print_attrs(const char *prefix, struct nlattr *start, int len,
			const char **names, size_t nnames)
{
	struct nlattr *a;

	for_each_attr(a, start, len) {
		unsigned int t = a->nla_type & NLA_TYPE_MASK;
		const char *n = t < nnames ? names[t] : NULL;

		if (!n)
			continue;
		if (t == SMC_NLA_SYS_LOCAL_HOST && names == sys_names)
			printf("%s%s %.*s\n", prefix, n, attr_len(a), (char *)attr_data(a));
		else if (t == SMC_NLA_SYS_SEID && names == sys_names)
			printf("%s%s %.*s\n", prefix, n, attr_len(a), (char *)attr_data(a));
		else
			printf("%s%s %llu\n", prefix, n, (unsigned long long)attr_uint(a));
	}
}

static void info_cb(struct nlmsghdr *nh, void *arg)
{
	struct nlattr *a;
	int len = (int)nh->nlmsg_len - NLMSG_LENGTH(GENL_HDRLEN);

	(void)arg;
	for_each_attr(a, (char *)NLMSG_DATA(nh) + GENL_HDRLEN, len)
		if ((a->nla_type & NLA_TYPE_MASK) == SMC_GEN_SYS_INFO)
			print_attrs("", attr_data(a), attr_len(a), sys_names,
				    sizeof(sys_names) / sizeof(sys_names[0]));
}

static void stats_cb(struct nlmsghdr *nh, void *arg)
{
	struct nlattr *a, *b;
	int len = (int)nh->nlmsg_len - NLMSG_LENGTH(GENL_HDRLEN), blen;

	(void)arg;
	for_each_attr(a, (char *)NLMSG_DATA(nh) + GENL_HDRLEN, len) {
		if ((a->nla_type & NLA_TYPE_MASK) != SMC_GEN_STATS)
			continue;
		blen = attr_len(a);
		for_each_attr(b, attr_data(a), blen) {
			switch (b->nla_type & NLA_TYPE_MASK) {
			case SMC_NLA_STATS_SMCR_TECH:
				print_attrs("smcr_", attr_data(b), attr_len(b), tech_names,
					    sizeof(tech_names) / sizeof(tech_names[0]));
				break;
			case SMC_NLA_STATS_CLNT_HS_ERR_CNT:
				printf("client_handshake_errors %llu\n",
				       (unsigned long long)attr_uint(b));
				break;
			case SMC_NLA_STATS_SRV_HS_ERR_CNT:
				printf("server_handshake_errors %llu\n",
				       (unsigned long long)attr_uint(b));
				break;
			}
		}
	}
}

static void fback_cb(struct nlmsghdr *nh, void *arg)
{
	struct nlattr *a, *b;
	int len = (int)nh->nlmsg_len - NLMSG_LENGTH(GENL_HDRLEN), blen;

	(void)arg;
	for_each_attr(a, (char *)NLMSG_DATA(nh) + GENL_HDRLEN, len) {
		int srv = -1;
		uint64_t code = 0, cnt = 0, srv_cnt = 0, clnt_cnt = 0;
		bool have_code = false, have_tot = false;

		if ((a->nla_type & NLA_TYPE_MASK) != SMC_GEN_FBACK_STATS)
			continue;
		blen = attr_len(a);
		for_each_attr(b, attr_data(a), blen) {
			switch (b->nla_type & NLA_TYPE_MASK) {
			case SMC_NLA_FBACK_STATS_TYPE: srv = (int)attr_uint(b); break;
			case SMC_NLA_FBACK_STATS_RSN_CODE: code = attr_uint(b); have_code = true; break;
			case SMC_NLA_FBACK_STATS_RSN_CNT: cnt = attr_uint(b); break;
			case SMC_NLA_FBACK_STATS_SRV_CNT: srv_cnt = attr_uint(b); have_tot = true; break;
			case SMC_NLA_FBACK_STATS_CLNT_CNT: clnt_cnt = attr_uint(b); have_tot = true; break;
			}
		}
		if (have_tot)
			printf("fallbacks_total server %llu client %llu\n",
			       (unsigned long long)srv_cnt, (unsigned long long)clnt_cnt);
		if (have_code && cnt)
			printf("fallback %s 0x%08llx %llu\n", srv == 1 ? "server" : "client",
			       (unsigned long long)code, (unsigned long long)cnt);
	}
}

static int simple(uint16_t fam, uint8_t cmd, uint8_t version, void (*cb)(struct nlmsghdr *, void *),
		  bool dump)
{
	struct req r;

	init_req(&r, fam, cmd, version, dump ? NLM_F_DUMP : NLM_F_ACK);
	return transact(&r, cb, NULL);
}

static int fail(const char *what, int ret)
{
	fprintf(stderr, "smc-nl: %s: %s\n", what, strerror(-ret));
	return 1;
}

int main(int argc, char **argv)
{
	struct sockaddr_nl sa = { .nl_family = AF_NETLINK };
	struct req r;
	int ret;

	if (argc < 2) {
		fprintf(stderr, "usage: smc-nl pnet-add PNETID ETHDEV IBDEV PORT | ueid-add EID |"
			" info | stats | fallbacks\n");
		return 2;
	}
	nl_fd = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_GENERIC);
	if (nl_fd < 0 || bind(nl_fd, (struct sockaddr *)&sa, sizeof(sa)))
		return fail("netlink socket", -errno);

	if (!strcmp(argv[1], "pnet-add") && argc == 6) {
		uint8_t port = (uint8_t)atoi(argv[5]);
		char name[17] = { 0 };
		size_t i;

		/* PNET IDs are upper case, at most 16 characters. */
		for (i = 0; argv[2][i] && i < 16; i++)
			name[i] = (char)(argv[2][i] >= 'a' && argv[2][i] <= 'z' ?
					 argv[2][i] - 32 : argv[2][i]);
		init_req(&r, family(SMCR_GENL_FAMILY_NAME), SMC_PNETID_ADD,
			 SMCR_GENL_FAMILY_VERSION, NLM_F_ACK);
		put_attr(&r, SMC_PNETID_NAME, name, strlen(name) + 1);
		put_attr(&r, SMC_PNETID_ETHNAME, argv[3], strlen(argv[3]) + 1);
		put_attr(&r, SMC_PNETID_IBNAME, argv[4], strlen(argv[4]) + 1);
		put_attr(&r, SMC_PNETID_IBPORT, &port, 1);
		ret = transact(&r, NULL, NULL);
		return ret ? fail("pnet-add", ret) : 0;
	}
	if (!strcmp(argv[1], "ueid-add") && argc == 3) {
		/* The kernel takes exactly SMC_MAX_EID_LEN characters, blank
		 * padded, upper case. */
		char eid[SMC_MAX_EID_LEN + 1];
		size_t i;

		memset(eid, ' ', SMC_MAX_EID_LEN);
		eid[SMC_MAX_EID_LEN] = 0;
		for (i = 0; argv[2][i] && i < SMC_MAX_EID_LEN; i++)
			eid[i] = (char)(argv[2][i] >= 'a' && argv[2][i] <= 'z' ?
					argv[2][i] - 32 : argv[2][i]);
		init_req(&r, family(SMC_GENL_FAMILY_NAME), SMC_NETLINK_ADD_UEID,
			 SMC_GENL_FAMILY_VERSION, NLM_F_ACK);
		put_attr(&r, SMC_NLA_EID_TABLE_ENTRY, eid, sizeof(eid));
		ret = transact(&r, NULL, NULL);
		return ret && ret != -EEXIST ? fail("ueid-add", ret) : 0;
	}
	if (!strcmp(argv[1], "info")) {
		ret = simple(family(SMC_GENL_FAMILY_NAME), SMC_NETLINK_GET_SYS_INFO,
			     SMC_GENL_FAMILY_VERSION, info_cb, true);
		return ret ? fail("info", ret) : 0;
	}
	if (!strcmp(argv[1], "stats")) {
		ret = simple(family(SMC_GENL_FAMILY_NAME), SMC_NETLINK_GET_STATS,
			     SMC_GENL_FAMILY_VERSION, stats_cb, true);
		return ret ? fail("stats", ret) : 0;
	}
	if (!strcmp(argv[1], "fallbacks")) {
		ret = simple(family(SMC_GENL_FAMILY_NAME), SMC_NETLINK_GET_FBACK_STATS,
			     SMC_GENL_FAMILY_VERSION, fback_cb, true);
		return ret ? fail("fallbacks", ret) : 0;
	}
	fprintf(stderr, "smc-nl: unknown command or wrong arguments: %s\n", argv[1]);
	return 2;
}
