/* SPDX-License-Identifier: BSD-3-Clause */
/* smcrbd: sends real CLC messages over loopback TCP for the tshark check
 * (tests/test-tshark-clc.sh).
 *
 *   tshark-clc-peer PORT
 *
 * Plays both ends in one process, each message written with our encoders
 * and read back with our decoders on the other end:
 *   TCP stream 0 (127.0.0.1): Proposal (IPv4) -> Accept (first contact)
 *                              -> Confirm
 *   TCP stream 1 (::1, or 127.0.0.1 without IPv6): Proposal (IPv6 prefix
 *                              list) -> Decline (out of sync)
 * and prints, for each message, one line of what Wireshark's SMC dissector
 * must show:
 *   STREAM TYPE field=value field=value ...
 * with values in tshark's "-T fields" notation.  Exit status 0 if every
 * message went through and decoded to what was sent. */
#include <config.h>

#include <arpa/inet.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "msg.h"

static void die(const char *what)
{
	perror(what);
	exit(1);
}

static void xwrite(int fd, const void *buf, size_t len)
{
	const uint8_t *p = buf;

	while (len) {
		ssize_t n = write(fd, p, len);

		if (n <= 0)
			die("write");
		p += n;
		len -= (size_t)n;
	}
}

static void xread(int fd, void *buf, size_t len)
{
	uint8_t *p = buf;

	while (len) {
		ssize_t n = read(fd, p, len);

		if (n <= 0)
			die("read");
		p += n;
		len -= (size_t)n;
	}
}

static void send_clc(int fd, const struct smcr_clc_msg *m)
{
	uint8_t buf[SMCR_CLC_MAX_V1_LEN];
	int n = smcr_clc_encode(m, buf, sizeof(buf));

	if (n < 0) {
		fprintf(stderr, "encode: %s\n", smcr_msg_strerror(n));
		exit(1);
	}
	xwrite(fd, buf, (size_t)n);
}

/* Reads one CLC message the way a stream reader must: the header first,
 * then the rest of the length it announces. */
static void recv_clc(int fd, struct smcr_clc_msg *m, enum smcr_clc_type want)
{
	uint8_t buf[SMCR_CLC_MAX_V1_LEN];
	struct smcr_clc_hdr h;
	int rc;

	xread(fd, buf, SMCR_CLC_HDR_LEN);
	rc = smcr_clc_hdr_decode(buf, SMCR_CLC_HDR_LEN, &h);
	if (rc < 0 || h.length > sizeof(buf)) {
		fprintf(stderr, "header: %s\n", rc < 0 ? smcr_msg_strerror(rc) : "too long");
		exit(1);
	}
	xread(fd, buf + SMCR_CLC_HDR_LEN, h.length - SMCR_CLC_HDR_LEN);
	rc = smcr_clc_decode_type(buf, h.length, want, m);
	if (rc != h.length) {
		fprintf(stderr, "decode: %s\n", smcr_msg_strerror(rc));
		exit(1);
	}
}

/* Connected pair over loopback: *cli and *srv. */
static int pair(int family, int port, int *cli, int *srv)
{
	struct sockaddr_storage ss;
	socklen_t sl;
	int lfd, one = 1;

	memset(&ss, 0, sizeof(ss));
	if (family == AF_INET6) {
		struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)&ss;

		s6->sin6_family = AF_INET6;
		s6->sin6_port = htons((uint16_t)port);
		s6->sin6_addr = in6addr_loopback;
		sl = sizeof(*s6);
	} else {
		struct sockaddr_in *s4 = (struct sockaddr_in *)&ss;

		s4->sin_family = AF_INET;
		s4->sin_port = htons((uint16_t)port);
		s4->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
		sl = sizeof(*s4);
	}
	lfd = socket(family, SOCK_STREAM, 0);
	if (lfd < 0)
		return -1;
	setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(lfd, (struct sockaddr *)&ss, sl) < 0 || listen(lfd, 1) < 0) {
		close(lfd);
		return -1;
	}
	*cli = socket(family, SOCK_STREAM, 0);
	if (*cli < 0 || connect(*cli, (struct sockaddr *)&ss, sl) < 0)
		die("connect");
	*srv = accept(lfd, NULL, NULL);
	if (*srv < 0)
		die("accept");
	close(lfd);
	setsockopt(*cli, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	setsockopt(*srv, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	return 0;
}

/* ---- tshark notation ---------------------------------------------------- */

static uint64_t peer_id_u64(const struct smcr_peer_id *p)
{
	uint64_t v = p->instance;

	for (int i = 0; i < 6; i++)
		v = v << 8 | p->mac[i];
	return v;
}

static const char *mac_str(const uint8_t mac[6])
{
	static char s[4][18];
	static int k;
	char *b = s[k++ & 3];

	snprintf(b, 18, "%02x:%02x:%02x:%02x:%02x:%02x",
		 mac[0], mac[1], mac[2], mac[3], mac[4], mac[5]);
	return b;
}

static const char *ip6_str(const uint8_t a[16])
{
	static char s[4][INET6_ADDRSTRLEN];
	static int k;
	char *b = s[k++ & 3];

	inet_ntop(AF_INET6, a, b, INET6_ADDRSTRLEN);
	return b;
}

static void print_acc_conf(int stream, const char *name, const char *pfx_peer,
			   const struct smcr_clc_accept_confirm *a, bool accept)
{
	/* Wireshark names the Accept's and the Confirm's fields differently */
	printf("%d %s smc.clc_msg=%d smc.length=68 %s=0x%016" PRIx64, stream, name,
	       accept ? 2 : 3, pfx_peer, peer_id_u64(&a->peer_id));
	if (accept)
		printf(" smc.accept.server.preferred.gid=%s smc.accept.server.preferred.mac=%s"
		       " smc.accept.server.qp.number=0x%06x smc.accept.server.rmb.rkey=0x%08x"
		       " smc.accept.server.tcp.conn.index=0x%02x"
		       " smc.accept.server.rmb.element.alert.token=0x%08x"
		       " smc.accept.rmb.buffer.size=%u smc.accept.qp.mtu.value=%u"
		       " smc.accept.server.rmb.virtual.address=0x%016" PRIx64
		       " smc.accept.initial.psn=0x%06x smc.proposal.first.contact=%d\n",
		       ip6_str(a->gid), mac_str(a->mac), a->qpn, a->rmb_rkey, a->rmbe_idx,
		       a->rmbe_alert_token, a->rmbe_size, a->qp_mtu, a->rmb_vaddr, a->psn,
		       a->first_contact);
	else
		printf(" smc.client.gid=%s smc.confirm.client.mac=%s"
		       " smc.confirm.client.qp.number=0x%06x smc.confirm.client.rmb.rkey=0x%08x"
		       " smc.confirm.client.tcp.conn.index=0x%02x"
		       " smc.client.rmb.element.alert.token=0x%08x"
		       " smc.confirm.rmb.buffer.size=%u smc.confirm.qp.mtu.value=%u"
		       " smc.client.rmb.virtual.address=0x%016" PRIx64
		       " smc.initial.psn=0x%06x\n",
		       ip6_str(a->gid), mac_str(a->mac), a->qpn, a->rmb_rkey, a->rmbe_idx,
		       a->rmbe_alert_token, a->rmbe_size, a->qp_mtu, a->rmb_vaddr, a->psn);
}

static void print_proposal(int stream, const struct smcr_clc_proposal *p, int length)
{
	printf("%d Proposal smc.clc_msg=1 smc.length=%d"
	       " smc.proposal.sender.client.peer.id=0x%016" PRIx64
	       " smc.proposal.client.preferred.gid=%s smc.proposal.client.preferred.mac=%s"
	       " smc.outgoing.interface.subnet.mask=%u.%u.%u.%u"
	       " smc.outgoing.interface.subnet.mask.number.of.significant.bits=%u"
	       " smc.proposal.smcv1_subnet_ext_offset=0x%04x"
	       " smc.proposal.ipv6.prefix.count=%u",
	       stream, length, peer_id_u64(&p->peer_id), ip6_str(p->gid), mac_str(p->mac),
	       p->ipv4_subnet >> 24, (p->ipv4_subnet >> 16) & 0xFF,
	       (p->ipv4_subnet >> 8) & 0xFF, p->ipv4_subnet & 0xFF,
	       p->ipv4_mask_len, p->ip_area_offset, p->ipv6_prefix_count);
	if (p->ipv6_prefix_count) {
		/* multiple occurrences: tshark joins them with commas */
		printf(" smc.proposal.ipv6.prefix.value=");
		for (unsigned int i = 0; i < p->ipv6_prefix_count; i++)
			printf("%s%s", i ? "," : "", ip6_str(p->ipv6_prefix[i].prefix));
		printf(" smc.proposal.ipv6.prefix.length=");
		for (unsigned int i = 0; i < p->ipv6_prefix_count; i++)
			printf("%s%u", i ? "," : "", p->ipv6_prefix[i].len);
	}
	printf("\n");
}

/* ---- the messages --------------------------------------------------------- */

static const struct smcr_peer_id client_id = {
	.instance = 0x4a7e, .mac = { 0x02, 0x00, 0x5e, 0x10, 0x20, 0x30 },
};
static const struct smcr_peer_id server_id = {
	.instance = 0x1b2c, .mac = { 0x52, 0x54, 0x00, 0x12, 0x34, 0x56 },
};
static const uint8_t client_gid[16] = {
	0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0x00, 0x00, 0x5e, 0xff, 0xfe, 0x10, 0x20, 0x30,
};
static const uint8_t server_gid[16] = {
	0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 10, 11, 12, 13,	/* RoCEv2 IPv4 GID */
};

static void check(bool ok, const char *what)
{
	if (!ok) {
		fprintf(stderr, "decoded %s differs from what was sent\n", what);
		exit(1);
	}
}

static void same_acc_conf(const struct smcr_clc_accept_confirm *a,
			  const struct smcr_clc_accept_confirm *b, const char *what)
{
	check(a->first_contact == b->first_contact && a->peer_id.instance == b->peer_id.instance &&
	      !memcmp(a->peer_id.mac, b->peer_id.mac, 6) && !memcmp(a->gid, b->gid, 16) &&
	      !memcmp(a->mac, b->mac, 6) && a->qpn == b->qpn && a->rmb_rkey == b->rmb_rkey &&
	      a->rmbe_idx == b->rmbe_idx && a->rmbe_alert_token == b->rmbe_alert_token &&
	      a->rmbe_size == b->rmbe_size && a->qp_mtu == b->qp_mtu &&
	      a->rmb_vaddr == b->rmb_vaddr && a->psn == b->psn, what);
}

static void same_proposal(const struct smcr_clc_proposal *a, const struct smcr_clc_proposal *b)
{
	check(a->peer_id.instance == b->peer_id.instance && !memcmp(a->peer_id.mac, b->peer_id.mac, 6) &&
	      !memcmp(a->gid, b->gid, 16) && !memcmp(a->mac, b->mac, 6) &&
	      a->ipv4_subnet == b->ipv4_subnet && a->ipv4_mask_len == b->ipv4_mask_len &&
	      a->ipv6_prefix_count == b->ipv6_prefix_count, "Proposal");
	for (unsigned int i = 0; i < a->ipv6_prefix_count; i++)
		check(!memcmp(a->ipv6_prefix[i].prefix, b->ipv6_prefix[i].prefix, 16) &&
		      a->ipv6_prefix[i].len == b->ipv6_prefix[i].len, "IPv6 prefix");
}

int main(int argc, char **argv)
{
	struct smcr_clc_msg prop, acc, conf, decl, got;
	int port, cli, srv, stream2_family = AF_INET6;

	if (argc != 2 || (port = atoi(argv[1])) <= 0 || port > 65535) {
		fprintf(stderr, "usage: %s PORT\n", argv[0]);
		return 2;
	}
	setvbuf(stdout, NULL, _IOLBF, 0);

	/* stream 0: Proposal, Accept, Confirm over IPv4 */
	if (pair(AF_INET, port, &cli, &srv) < 0)
		die("listen on 127.0.0.1");

	memset(&prop, 0, sizeof(prop));
	prop.hdr.type = SMCR_CLC_PROPOSAL;
	prop.proposal.peer_id = client_id;
	memcpy(prop.proposal.gid, client_gid, 16);
	memcpy(prop.proposal.mac, client_id.mac, 6);
	/* Linux's 40-byte SMC-D area (zeros), as Linux and Wireshark expect */
	prop.proposal.ip_area_offset = SMCR_CLC_IP_AREA_OFFSET_LINUX;
	prop.proposal.ipv4_subnet = 0xFFFFFF00;
	prop.proposal.ipv4_mask_len = 24;
	send_clc(cli, &prop);
	recv_clc(srv, &got, SMCR_CLC_PROPOSAL);
	same_proposal(&prop.proposal, &got.proposal);
	print_proposal(0, &prop.proposal, smcr_clc_encoded_len(&prop));

	memset(&acc, 0, sizeof(acc));
	acc.hdr.type = SMCR_CLC_ACCEPT;
	acc.accept.first_contact = true;
	acc.accept.peer_id = server_id;
	memcpy(acc.accept.gid, server_gid, 16);
	memcpy(acc.accept.mac, server_id.mac, 6);
	acc.accept.qpn = 0x0A1B2C;
	acc.accept.rmb_rkey = 0x8E7D6C5B;
	acc.accept.rmbe_idx = 1;
	acc.accept.rmbe_alert_token = 0x00C0FFEE;
	acc.accept.rmbe_size = 5;			/* 512 KiB */
	acc.accept.qp_mtu = SMCR_MTU_1024;
	acc.accept.rmb_vaddr = 0x00007F3A12345000ull;
	acc.accept.psn = 0xABCDEF;
	send_clc(srv, &acc);
	recv_clc(cli, &got, SMCR_CLC_ACCEPT);
	same_acc_conf(&acc.accept, &got.accept, "Accept");
	print_acc_conf(0, "Accept", "smc.accept.sender.server.peer.id", &acc.accept, true);

	memset(&conf, 0, sizeof(conf));
	conf.hdr.type = SMCR_CLC_CONFIRM;
	conf.confirm.peer_id = client_id;
	memcpy(conf.confirm.gid, client_gid, 16);
	memcpy(conf.confirm.mac, client_id.mac, 6);
	conf.confirm.qpn = 0x000123;
	conf.confirm.rmb_rkey = 0x00ABCDEF;
	conf.confirm.rmbe_idx = 7;
	conf.confirm.rmbe_alert_token = 0xDEADBEEF;
	conf.confirm.rmbe_size = 2;			/* 64 KiB */
	conf.confirm.qp_mtu = SMCR_MTU_4096;
	conf.confirm.rmb_vaddr = 0xFFFF800012345678ull;
	conf.confirm.psn = 0x000042;
	send_clc(cli, &conf);
	recv_clc(srv, &got, SMCR_CLC_CONFIRM);
	same_acc_conf(&conf.confirm, &got.confirm, "Confirm");
	print_acc_conf(0, "Confirm", "smc.confirm.sender.client.peer.id", &conf.confirm, false);
	close(cli);
	close(srv);

	/* stream 1: a Proposal with an IPv6 prefix list, declined */
	if (pair(AF_INET6, port, &cli, &srv) < 0) {
		stream2_family = AF_INET;
		if (pair(AF_INET, port, &cli, &srv) < 0)
			die("listen again");
	}
	memset(&prop, 0, sizeof(prop));
	prop.hdr.type = SMCR_CLC_PROPOSAL;
	prop.proposal.peer_id = client_id;
	memcpy(prop.proposal.gid, client_gid, 16);
	memcpy(prop.proposal.mac, client_id.mac, 6);
	prop.proposal.ip_area_offset = SMCR_CLC_IP_AREA_OFFSET_LINUX;
	prop.proposal.ipv6_prefix_count = 3;
	inet_pton(AF_INET6, "2001:db8:1:2::", prop.proposal.ipv6_prefix[0].prefix);
	prop.proposal.ipv6_prefix[0].len = 64;
	inet_pton(AF_INET6, "fd00:a:b::", prop.proposal.ipv6_prefix[1].prefix);
	prop.proposal.ipv6_prefix[1].len = 48;
	inet_pton(AF_INET6, "::1", prop.proposal.ipv6_prefix[2].prefix);
	prop.proposal.ipv6_prefix[2].len = 128;
	send_clc(cli, &prop);
	recv_clc(srv, &got, SMCR_CLC_PROPOSAL);
	same_proposal(&prop.proposal, &got.proposal);
	print_proposal(1, &prop.proposal, smcr_clc_encoded_len(&prop));

	memset(&decl, 0, sizeof(decl));
	decl.hdr.type = SMCR_CLC_DECLINE;
	decl.decline.out_of_sync = true;
	decl.decline.peer_id = server_id;
	decl.decline.diagnosis = SMCR_DECL_DIFFPREFIX;
	send_clc(srv, &decl);
	recv_clc(cli, &got, SMCR_CLC_DECLINE);
	check(got.decline.out_of_sync && got.decline.diagnosis == SMCR_DECL_DIFFPREFIX &&
	      got.decline.peer_id.instance == server_id.instance, "Decline");
	printf("1 Decline smc.clc_msg=4 smc.length=28 smc.sender.peer.id=0x%016" PRIx64
	       " smc.peer.diag.info=0x%08x smc.decline.osync=1 smc.decline.smc.version=1\n",
	       peer_id_u64(&server_id), SMCR_DECL_DIFFPREFIX);
	close(cli);
	close(srv);
	fprintf(stderr, "stream 1 over %s\n", stream2_family == AF_INET6 ? "IPv6" : "IPv4");
	return 0;
}
