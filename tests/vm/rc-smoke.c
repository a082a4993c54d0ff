/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * rc-smoke: RC QP smoke test for the rxe VM lane.
 *
 *   rc-smoke server LINK LOCAL_IP PORT
 *   rc-smoke client LINK LOCAL_IP PEER_IP PORT
 *
 * Both sides find the RDMA device whose RoCE v2 GID is LOCAL_IP (an IPv4
 * address: GID ::ffff:a.b.c.d), create an RC QP on it and exchange QPN, PSN,
 * GID, rkey and buffer address over a TCP connection between the two
 * link addresses (the client retries until the server listens).  The client
 * then RDMA-WRITEs-WITH-IMM 1 MiB of a pattern into the server's buffer and
 * SENDs 64 bytes; the server checks the work completions, every byte, the
 * immediate value and the SEND payload, and reports the verdict back over
 * TCP.  Both print what was verified; the exit status is 0 only if the
 * server verified everything.
 *
 * Internally functions return 0 or -errno; resources unwind in reverse order
 * through goto labels named for what they undo (rdma-core examples style).
 */
#include <arpa/inet.h>
#include <endian.h>
#include <errno.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <infiniband/verbs.h>

#define DATA_LEN	(1u << 20)	/* RDMA WRITE WITH IMM payload */
#define MSG_OFF		DATA_LEN	/* SEND payload area after it */
#define MSG_LEN		64u
#define BUF_LEN		(DATA_LEN + 4096u)
#define IMM_BASE	0x5c3a0000u	/* | link number */
#define WC_TIMEOUT_MS	30000
#define TCP_TIMEOUT_S	60
#define GID_TIMEOUT_S	10

struct smoke {
	unsigned int link;
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_comp_channel *channel;
	struct ibv_cq *cq;
	struct ibv_mr *mr;
	struct ibv_qp *qp;
	uint8_t *buf;
	uint8_t port;
	int gid_index;
	union ibv_gid gid;
	enum ibv_mtu mtu;
	uint32_t psn;
};

/* What each side tells the other, in network byte order on the wire. */
struct peer_info {
	uint32_t qpn;
	uint32_t psn;
	uint32_t rkey;
	uint64_t addr;
	uint8_t gid[16];
};
#define PEER_INFO_WIRE_LEN 36

static uint8_t pattern(unsigned int link, size_t i)
{
	uint32_t x = (uint32_t)i * 2654435761u + link * 0x9e3779b9u;

	x ^= x >> 15;
	x *= 0x2c1b3c6du;
	x ^= x >> 12;
	return (uint8_t)x;
}

static void fill_msg(unsigned int link, uint8_t *msg)
{
	size_t i;

	for (i = 0; i < MSG_LEN; i++)
		msg[i] = pattern(link + 1000, i);
	snprintf((char *)msg, MSG_LEN, "rc-smoke link %u SEND", link);
}

static const char *gid_str(const union ibv_gid *gid, char *out, size_t len)
{
	if (!inet_ntop(AF_INET6, gid->raw, out, (socklen_t)len))
		snprintf(out, len, "?");
	return out;
}

/*
 * Finds the device and GID index whose RoCE v2 GID is the IPv4-mapped
 * address of @ip.  Keeps the device open in s->ctx.
 */
static int open_dev_by_ip(struct smoke *s, const char *ip)
{
	struct ibv_device **list;
	struct in_addr addr;
	uint8_t want[16] = { [10] = 0xff, [11] = 0xff };
	int num, i, ret = -ENODEV;

	if (inet_pton(AF_INET, ip, &addr) != 1)
		return -EINVAL;
	memcpy(want + 12, &addr, 4);

	list = ibv_get_device_list(&num);
	if (!list)
		return -errno;
	for (i = 0; i < num && ret; i++) {
		struct ibv_context *ctx;
		struct ibv_port_attr pattr;
		uint32_t idx;

		ctx = ibv_open_device(list[i]);
		if (!ctx)
			continue;
		if (ibv_query_port(ctx, 1, &pattr))
			goto close_ctx;
		for (idx = 0; idx < (uint32_t)pattr.gid_tbl_len; idx++) {
			struct ibv_gid_entry entry;

			if (ibv_query_gid_ex(ctx, 1, idx, &entry, 0))
				continue;
			if (entry.gid_type != IBV_GID_TYPE_ROCE_V2 ||
			    memcmp(entry.gid.raw, want, 16))
				continue;
			s->ctx = ctx;
			s->port = 1;
			s->gid_index = (int)idx;
			s->gid = entry.gid;
			s->mtu = pattr.active_mtu;
			ret = 0;
			break;
		}
		if (!ret)
			break;
close_ctx:
		ibv_close_device(ctx);
	}
	ibv_free_device_list(list);
	return ret;
}

static int smoke_create(struct smoke *s)
{
	struct ibv_qp_init_attr qp_attr = {
		.qp_type = IBV_QPT_RC,
		.cap = {
			.max_send_wr = 4,
			.max_recv_wr = 4,
			.max_send_sge = 1,
			.max_recv_sge = 1,
		},
	};
	int ret;

	s->buf = calloc(1, BUF_LEN);
	if (!s->buf)
		return -ENOMEM;

	s->pd = ibv_alloc_pd(s->ctx);
	if (!s->pd) {
		ret = -errno;
		goto err_free_buf;
	}
	s->channel = ibv_create_comp_channel(s->ctx);
	if (!s->channel) {
		ret = -errno;
		goto err_dealloc_pd;
	}
	s->cq = ibv_create_cq(s->ctx, 16, NULL, s->channel, 0);
	if (!s->cq) {
		ret = -errno;
		goto err_destroy_channel;
	}
	s->mr = ibv_reg_mr(s->pd, s->buf, BUF_LEN,
			   IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
	if (!s->mr) {
		ret = -errno;
		goto err_destroy_cq;
	}
	qp_attr.send_cq = s->cq;
	qp_attr.recv_cq = s->cq;
	s->qp = ibv_create_qp(s->pd, &qp_attr);
	if (!s->qp) {
		ret = -errno;
		goto err_dereg_mr;
	}
	return 0;

err_dereg_mr:
	ibv_dereg_mr(s->mr);
err_destroy_cq:
	ibv_destroy_cq(s->cq);
err_destroy_channel:
	ibv_destroy_comp_channel(s->channel);
err_dealloc_pd:
	ibv_dealloc_pd(s->pd);
err_free_buf:
	free(s->buf);
	return ret;
}

static void smoke_destroy(struct smoke *s)
{
	ibv_destroy_qp(s->qp);
	ibv_dereg_mr(s->mr);
	ibv_destroy_cq(s->cq);
	ibv_destroy_comp_channel(s->channel);
	ibv_dealloc_pd(s->pd);
	free(s->buf);
}

static int qp_to_init(struct smoke *s)
{
	struct ibv_qp_attr attr = {
		.qp_state = IBV_QPS_INIT,
		.pkey_index = 0,
		.port_num = s->port,
		.qp_access_flags = IBV_ACCESS_REMOTE_WRITE,
	};

	return -ibv_modify_qp(s->qp, &attr, IBV_QP_STATE | IBV_QP_PKEY_INDEX |
			      IBV_QP_PORT | IBV_QP_ACCESS_FLAGS);
}

static int qp_to_rtr_rts(struct smoke *s, const struct peer_info *peer)
{
	struct ibv_qp_attr attr = {
		.qp_state = IBV_QPS_RTR,
		.path_mtu = s->mtu,
		.dest_qp_num = peer->qpn,
		.rq_psn = peer->psn,
		.max_dest_rd_atomic = 1,
		.min_rnr_timer = 12,
		.ah_attr = {
			.is_global = 1,
			.port_num = s->port,
			.grh = {
				.sgid_index = (uint8_t)s->gid_index,
				.hop_limit = 64,
			},
		},
	};
	int ret;

	memcpy(attr.ah_attr.grh.dgid.raw, peer->gid, 16);
	ret = ibv_modify_qp(s->qp, &attr, IBV_QP_STATE | IBV_QP_AV |
			    IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
			    IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER);
	if (ret)
		return -ret;

	memset(&attr, 0, sizeof(attr));
	attr.qp_state = IBV_QPS_RTS;
	attr.timeout = 14;
	attr.retry_cnt = 7;
	attr.rnr_retry = 7;
	attr.sq_psn = s->psn;
	attr.max_rd_atomic = 1;
	return -ibv_modify_qp(s->qp, &attr, IBV_QP_STATE | IBV_QP_TIMEOUT |
			      IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
			      IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC);
}

static int post_recvs(struct smoke *s, unsigned int n)
{
	struct ibv_sge sge = {
		.addr = (uintptr_t)(s->buf + MSG_OFF),
		.length = MSG_LEN,
		.lkey = s->mr->lkey,
	};
	struct ibv_recv_wr wr = { .sg_list = &sge, .num_sge = 1 };
	struct ibv_recv_wr *bad;
	unsigned int i;
	int ret;

	for (i = 0; i < n; i++) {
		wr.wr_id = 100 + i;
		ret = ibv_post_recv(s->qp, &wr, &bad);
		if (ret)
			return -ret;
	}
	return 0;
}

/* WRITE WITH IMM of the data, then a SEND of the message; both signaled. */
static int post_write_and_send(struct smoke *s, const struct peer_info *peer)
{
	struct ibv_sge data_sge = {
		.addr = (uintptr_t)s->buf,
		.length = DATA_LEN,
		.lkey = s->mr->lkey,
	};
	struct ibv_sge msg_sge = {
		.addr = (uintptr_t)(s->buf + MSG_OFF),
		.length = MSG_LEN,
		.lkey = s->mr->lkey,
	};
	struct ibv_send_wr send_wr = {
		.wr_id = 2,
		.sg_list = &msg_sge,
		.num_sge = 1,
		.opcode = IBV_WR_SEND,
		.send_flags = IBV_SEND_SIGNALED,
	};
	struct ibv_send_wr write_wr = {
		.wr_id = 1,
		.next = &send_wr,
		.sg_list = &data_sge,
		.num_sge = 1,
		.opcode = IBV_WR_RDMA_WRITE_WITH_IMM,
		.send_flags = IBV_SEND_SIGNALED,
		.imm_data = htonl(IMM_BASE | s->link),
		.wr.rdma = {
			.remote_addr = peer->addr,
			.rkey = peer->rkey,
		},
	};
	struct ibv_send_wr *bad;

	return -ibv_post_send(s->qp, &write_wr, &bad);
}

/* Waits for @n work completions (stored in @wc) or WC_TIMEOUT_MS. */
static int wait_wcs(struct smoke *s, struct ibv_wc *wc, int n)
{
	struct pollfd pfd = { .fd = s->channel->fd, .events = POLLIN };
	int got = 0, ret;

	while (got < n) {
		struct ibv_cq *ev_cq;
		void *ev_ctx;

		ret = ibv_poll_cq(s->cq, n - got, wc + got);
		if (ret < 0)
			return -EIO;
		got += ret;
		if (got == n)
			break;
		if (ibv_req_notify_cq(s->cq, 0))
			return -EIO;
		/* A completion may have arrived before the notify was armed. */
		ret = ibv_poll_cq(s->cq, n - got, wc + got);
		if (ret < 0)
			return -EIO;
		got += ret;
		if (got == n)
			break;
		ret = poll(&pfd, 1, WC_TIMEOUT_MS);
		if (ret < 0)
			return -errno;
		if (ret == 0)
			return -ETIMEDOUT;
		if (ibv_get_cq_event(s->channel, &ev_cq, &ev_ctx))
			return -EIO;
		ibv_ack_cq_events(ev_cq, 1);
	}
	return 0;
}

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

static int send_info(int fd, const struct smoke *s)
{
	uint8_t wire[PEER_INFO_WIRE_LEN];
	uint32_t v32;
	uint64_t v64;

	v32 = htonl(s->qp->qp_num);
	memcpy(wire, &v32, 4);
	v32 = htonl(s->psn);
	memcpy(wire + 4, &v32, 4);
	v32 = htonl(s->mr->rkey);
	memcpy(wire + 8, &v32, 4);
	v64 = htobe64((uint64_t)(uintptr_t)s->buf);
	memcpy(wire + 12, &v64, 8);
	memcpy(wire + 20, s->gid.raw, 16);
	return send_all(fd, wire, sizeof(wire));
}

static int recv_info(int fd, struct peer_info *peer)
{
	uint8_t wire[PEER_INFO_WIRE_LEN];
	uint32_t v32;
	uint64_t v64;
	int ret;

	ret = recv_all(fd, wire, sizeof(wire));
	if (ret)
		return ret;
	memcpy(&v32, wire, 4);
	peer->qpn = ntohl(v32);
	memcpy(&v32, wire + 4, 4);
	peer->psn = ntohl(v32) & 0xffffff;
	memcpy(&v32, wire + 8, 4);
	peer->rkey = ntohl(v32);
	memcpy(&v64, wire + 12, 8);
	peer->addr = be64toh(v64);
	memcpy(peer->gid, wire + 20, 16);
	return 0;
}

static int sockaddr_of(const char *ip, uint16_t port, struct sockaddr_in *sa)
{
	memset(sa, 0, sizeof(*sa));
	sa->sin_family = AF_INET;
	sa->sin_port = htons(port);
	return inet_pton(AF_INET, ip, &sa->sin_addr) == 1 ? 0 : -EINVAL;
}

/* Listens on ip:port and returns one accepted connection (fd) or -errno. */
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
	return fd;

err_close_listener:
	close(lfd);
	return ret;
}

/* Connects from local_ip to peer_ip:port, retrying until the peer listens. */
static int tcp_connect_retry(const char *local_ip, const char *peer_ip,
			     uint16_t port)
{
	struct sockaddr_in local, peer;
	time_t deadline = time(NULL) + TCP_TIMEOUT_S;
	int fd, ret;

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
		if (!connect(fd, (struct sockaddr *)&peer, sizeof(peer)))
			return fd;
		ret = -errno;
		close(fd);
		if (time(NULL) >= deadline)
			return ret;
		usleep(100 * 1000);
	}
}

static int open_dev_retry(struct smoke *s, const char *ip)
{
	time_t deadline = time(NULL) + GID_TIMEOUT_S;
	int ret;

	while ((ret = open_dev_by_ip(s, ip)) == -ENODEV &&
	       time(NULL) < deadline)
		usleep(100 * 1000);
	return ret;
}

static void print_dev(const struct smoke *s, const char *role)
{
	char g[INET6_ADDRSTRLEN];

	printf("link %u %s: %s port %u gid[%d] %s (RoCE v2) qpn 0x%06x psn 0x%06x mtu %d\n",
	       s->link, role, ibv_get_device_name(s->ctx->device), s->port,
	       s->gid_index, gid_str(&s->gid, g, sizeof(g)), s->qp->qp_num,
	       s->psn, 128 << s->mtu);
}

/* Checks the two receive completions and the data; writes a verdict. */
static int verify(struct smoke *s, const struct ibv_wc *wc, char *verdict,
		  size_t len)
{
	const struct ibv_wc *imm = &wc[0], *msg = &wc[1];
	uint8_t expect[MSG_LEN];
	size_t i;
	int k;

	for (k = 0; k < 2; k++) {
		if (wc[k].status != IBV_WC_SUCCESS) {
			snprintf(verdict, len, "FAIL completion %d: %s", k,
				 ibv_wc_status_str(wc[k].status));
			return -EIO;
		}
	}
	if (imm->opcode != IBV_WC_RECV_RDMA_WITH_IMM ||
	    !(imm->wc_flags & IBV_WC_WITH_IMM)) {
		snprintf(verdict, len, "FAIL first completion is opcode %d, not RECV_RDMA_WITH_IMM",
			 imm->opcode);
		return -EIO;
	}
	if (ntohl(imm->imm_data) != (IMM_BASE | s->link)) {
		snprintf(verdict, len, "FAIL immediate 0x%08x, expected 0x%08x",
			 ntohl(imm->imm_data), IMM_BASE | s->link);
		return -EIO;
	}
	if (imm->byte_len != DATA_LEN) {
		snprintf(verdict, len, "FAIL write completion byte_len %u, expected %u",
			 imm->byte_len, DATA_LEN);
		return -EIO;
	}
	for (i = 0; i < DATA_LEN; i++) {
		if (s->buf[i] != pattern(s->link, i)) {
			snprintf(verdict, len, "FAIL data byte %zu is 0x%02x, expected 0x%02x",
				 i, s->buf[i], pattern(s->link, i));
			return -EIO;
		}
	}
	if (msg->opcode != IBV_WC_RECV || msg->byte_len != MSG_LEN) {
		snprintf(verdict, len, "FAIL second completion: opcode %d byte_len %u, expected RECV of %u",
			 msg->opcode, msg->byte_len, MSG_LEN);
		return -EIO;
	}
	fill_msg(s->link, expect);
	if (memcmp(s->buf + MSG_OFF, expect, MSG_LEN)) {
		snprintf(verdict, len, "FAIL SEND payload differs");
		return -EIO;
	}
	snprintf(verdict, len, "verified %u bytes + imm 0x%08x + send %u bytes",
		 DATA_LEN, IMM_BASE | s->link, MSG_LEN);
	return 0;
}

static int run_server(struct smoke *s, const char *ip, uint16_t port)
{
	struct peer_info peer;
	struct ibv_wc wc[2];
	char verdict[160];
	uint8_t vlen;
	int fd, ret;

	ret = post_recvs(s, 2);
	if (ret)
		return ret;
	fd = tcp_accept_one(ip, port);
	if (fd < 0)
		return fd;
	ret = recv_info(fd, &peer);
	if (ret)
		goto out_close;
	ret = qp_to_rtr_rts(s, &peer);
	if (ret)
		goto out_close;
	ret = send_info(fd, s);
	if (ret)
		goto out_close;

	ret = wait_wcs(s, wc, 2);
	if (ret) {
		snprintf(verdict, sizeof(verdict), "FAIL waiting for completions: %s",
			 strerror(-ret));
	} else {
		ret = verify(s, wc, verdict, sizeof(verdict));
	}
	printf("link %u: %s\n", s->link, verdict);
	vlen = (uint8_t)strlen(verdict);
	if (send_all(fd, &vlen, 1) || send_all(fd, verdict, vlen))
		fprintf(stderr, "link %u: could not send the verdict to the client\n",
			s->link);
out_close:
	close(fd);
	return ret;
}

static int run_client(struct smoke *s, const char *local_ip,
		      const char *peer_ip, uint16_t port)
{
	struct peer_info peer;
	struct ibv_wc wc[2];
	char verdict[256];
	uint8_t vlen;
	size_t i;
	int fd, k, ret;

	for (i = 0; i < DATA_LEN; i++)
		s->buf[i] = pattern(s->link, i);
	fill_msg(s->link, s->buf + MSG_OFF);

	fd = tcp_connect_retry(local_ip, peer_ip, port);
	if (fd < 0)
		return fd;
	ret = send_info(fd, s);
	if (ret)
		goto out_close;
	ret = recv_info(fd, &peer);
	if (ret)
		goto out_close;
	ret = qp_to_rtr_rts(s, &peer);
	if (ret)
		goto out_close;
	ret = post_write_and_send(s, &peer);
	if (ret)
		goto out_close;
	ret = wait_wcs(s, wc, 2);
	if (ret)
		goto out_close;
	for (k = 0; k < 2; k++) {
		if (wc[k].status != IBV_WC_SUCCESS) {
			fprintf(stderr, "link %u: send completion %" PRIu64 ": %s\n",
				s->link, wc[k].wr_id, ibv_wc_status_str(wc[k].status));
			ret = -EIO;
			goto out_close;
		}
	}
	printf("link %u: wrote %u bytes with imm 0x%08x + sent %u bytes\n",
	       s->link, DATA_LEN, IMM_BASE | s->link, MSG_LEN);

	ret = recv_all(fd, &vlen, 1);
	if (!ret)
		ret = recv_all(fd, verdict, vlen);
	if (ret)
		goto out_close;
	verdict[vlen] = '\0';
	printf("link %u: server says: %s\n", s->link, verdict);
	if (strncmp(verdict, "verified ", 9))
		ret = -EIO;
out_close:
	close(fd);
	return ret;
}

static void usage(void)
{
	fprintf(stderr,
		"usage: rc-smoke server LINK LOCAL_IP PORT\n"
		"       rc-smoke client LINK LOCAL_IP PEER_IP PORT\n");
}

int main(int argc, char **argv)
{
	struct smoke s = { 0 };
	const char *local_ip, *peer_ip = NULL;
	int server, port, ret;

	if (argc == 5 && !strcmp(argv[1], "server")) {
		server = 1;
		port = atoi(argv[4]);
	} else if (argc == 6 && !strcmp(argv[1], "client")) {
		server = 0;
		peer_ip = argv[4];
		port = atoi(argv[5]);
	} else {
		usage();
		return 2;
	}
	s.link = (unsigned int)atoi(argv[2]);
	local_ip = argv[3];
	if (port <= 0 || port > 65535) {
		usage();
		return 2;
	}
	setvbuf(stdout, NULL, _IOLBF, 0);
	srand48((long)time(NULL) ^ (long)getpid() * 7919);
	s.psn = (uint32_t)lrand48() & 0xffffff;

	ret = open_dev_retry(&s, local_ip);
	if (ret) {
		fprintf(stderr, "link %u: no RDMA device with a RoCE v2 GID for %s: %s\n",
			s.link, local_ip, strerror(-ret));
		return 1;
	}
	ret = smoke_create(&s);
	if (ret) {
		fprintf(stderr, "link %u: creating verbs resources: %s\n",
			s.link, strerror(-ret));
		goto err_close_device;
	}
	ret = qp_to_init(&s);
	if (ret) {
		fprintf(stderr, "link %u: QP to INIT: %s\n", s.link, strerror(-ret));
		goto err_destroy;
	}
	print_dev(&s, server ? "server" : "client");

	if (server)
		ret = run_server(&s, local_ip, (uint16_t)port);
	else
		ret = run_client(&s, local_ip, peer_ip, (uint16_t)port);
	if (ret && ret != -EIO)
		fprintf(stderr, "link %u: %s failed: %s\n", s.link,
			server ? "server" : "client", strerror(-ret));

err_destroy:
	smoke_destroy(&s);
err_close_device:
	ibv_close_device(s.ctx);
	return ret ? 1 : 0;
}
