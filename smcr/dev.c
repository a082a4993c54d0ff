/* SPDX-License-Identifier: BSD-3-Clause */
/* smcrbd: RNIC access through libibverbs. */
#include <config.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <linux/neighbour.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <sys/stat.h>

#include "dev.h"
#include "log.h"

/* 4.096 us * 2^19 = 2.1 s per try, 6 retries: a dead path is reported by
 * a completion error in about 15 s, so a peer stopped for up to 10 s (a
 * live migration's blackout, a paused VM) finds its links still there.
 * A dead peer is found sooner: TEST LINK fails a link after 2 s while
 * another is left, and the last one too once a connection's TCP socket
 * shows the peer's process gone (llc.c); only a silent peer (stopped,
 * crashed or every path cut) takes the long limit.  (7 would mean "retry
 * forever" on rxe, so a silent loss would never be reported.)  At 17
 * (537 ms, 3.8 s in all) a 5 s pause ended the group; shorter is too
 * tight where a host may stall: on rxe under TCG, with 67 ms (14), 134 ms
 * (15, as Linux SMC-R) and 268 ms (16), a guest's kernel stopped
 * acknowledging on its other link for 1 to 2 s while "rdma link delete"
 * or "ip link set down" took one port away, and the group lost its last
 * link and every connection.  SMCR_QP_TIMEOUT changes it. */
const struct smcr_qp_timing smcr_qp_timing_default = {
	.timeout = SMCR_QP_TIMEOUT_DEFAULT,
	.retry_cnt = SMCR_QP_RETRY_DEFAULT,
	.rnr_retry = 7,
};

void smcr_devs_init(struct smcr_devs *devs)
{
	devs->head = NULL;
}

static void dev_close(struct smcr_dev *dev)
{
	if (dev->chan)
		ibv_destroy_comp_channel(dev->chan);
	if (dev->ctx)
		ibv_close_device(dev->ctx);
	free(dev);
}

void smcr_devs_fini(struct smcr_devs *devs)
{
	struct smcr_dev *dev, *next;

	for (dev = devs->head; dev; dev = next) {
		next = dev->next;
		if (dev->refs)
			smcr_warn("device %s closed with %u references", dev->name,
				  dev->refs);
		dev_close(dev);
	}
	devs->head = NULL;
}

/* Open a device by verbs device pointer, or return the one already open. */
static int dev_open(struct smcr_devs *devs, struct ibv_device *ibdev,
		    struct smcr_dev **devp)
{
	const char *name = ibv_get_device_name(ibdev);
	struct smcr_dev *dev;
	int ret;

	struct stat st;

	/* A device removed and added again comes back under the same name:
	 * only a device that is still there is the one we have open. */
	for (dev = devs->head; dev; dev = dev->next) {
		if (!dev->gone && strcmp(dev->name, name) == 0 &&
		    smcr_dev_present(dev)) {
			*devp = dev;
			return 0;
		}
	}
	dev = calloc(1, sizeof(*dev));
	if (!dev)
		return -ENOMEM;
	snprintf(dev->name, sizeof(dev->name), "%s", name);
	snprintf(dev->path, sizeof(dev->path), "%s", ibdev->dev_path);
	if (stat(dev->path, &st) == 0)
		dev->ino = (uint64_t)st.st_ino;
	else
		dev->path[0] = 0;	/* cannot tell: assume it stays */
	dev->ctx = ibv_open_device(ibdev);
	if (!dev->ctx) {
		ret = errno ? -errno : -ENODEV;
		smcr_err("cannot open RDMA device %s: %s", name, strerror(-ret));
		goto out_free;
	}
	if (ibv_query_device(dev->ctx, &dev->attr)) {
		ret = -EIO;
		goto out_close;
	}
	dev->chan = ibv_create_comp_channel(dev->ctx);
	if (!dev->chan) {
		ret = -ENOMEM;
		smcr_err("%s: cannot create a completion channel", name);
		goto out_close;
	}
	dev->next = devs->head;
	devs->head = dev;
	*devp = dev;
	return 0;

out_close:
	ibv_close_device(dev->ctx);
out_free:
	free(dev);
	return ret;
}

int smcr_pd_alloc(struct smcr_dev *dev, struct smcr_pd **pdp)
{
	struct smcr_pd *pd = calloc(1, sizeof(*pd));
	int ret;

	if (!pd)
		return -ENOMEM;
	pd->pd = ibv_alloc_pd(dev->ctx);
	if (!pd->pd) {
		ret = errno ? -errno : -ENOMEM;
		smcr_err("%s: cannot allocate a protection domain: %s", dev->name,
			 strerror(-ret));
		free(pd);
		return ret;
	}
	pd->dev = dev;
	pd->refs = 1;
	*pdp = pd;
	return 0;
}

struct smcr_pd *smcr_pd_get(struct smcr_pd *pd)
{
	__atomic_add_fetch(&pd->refs, 1, __ATOMIC_RELAXED);
	return pd;
}

void smcr_pd_put(struct smcr_pd *pd)
{
	int ret;

	if (!pd || __atomic_sub_fetch(&pd->refs, 1, __ATOMIC_ACQ_REL))
		return;
	ret = ibv_dealloc_pd(pd->pd);
	if (ret)	/* something is still in it: a leak, not a crash */
		smcr_err("%s: cannot deallocate a protection domain: %s",
			 pd->dev->name, strerror(ret));
	free(pd);
}

bool smcr_dev_present(struct smcr_dev *dev)
{
	struct stat st;

	if (dev->gone)
		return false;
	if (!dev->path[0])
		return true;
	if (stat(dev->path, &st) == 0 && (uint64_t)st.st_ino == dev->ino)
		return true;
	dev->gone = true;
	return false;
}

/* Takes dev out of devs and closes it (no reference left). */
static void dev_unlink(struct smcr_devs *devs, struct smcr_dev *dev)
{
	struct smcr_dev **pp;

	for (pp = &devs->head; *pp; pp = &(*pp)->next) {
		if (*pp == dev) {
			*pp = dev->next;
			break;
		}
	}
	dev_close(dev);
}

void smcr_dev_get(struct smcr_port_ref *ref)
{
	ref->dev->refs++;
}

void smcr_dev_put(struct smcr_devs *devs, struct smcr_port_ref *ref)
{
	struct smcr_dev *dev = ref->dev;

	if (!dev)
		return;
	ref->dev = NULL;
	if (--dev->refs)
		return;
	dev_unlink(devs, dev);
}

int smcr_gid_from_addr(const struct sockaddr *addr, uint8_t gid[SMCR_GID_LEN])
{
	if (addr->sa_family == AF_INET) {
		const struct sockaddr_in *sin = (const void *)addr;

		memset(gid, 0, 10);
		gid[10] = 0xff;
		gid[11] = 0xff;
		memcpy(gid + 12, &sin->sin_addr, 4);
		return 0;
	}
	if (addr->sa_family == AF_INET6) {
		const struct sockaddr_in6 *sin6 = (const void *)addr;

		memcpy(gid, &sin6->sin6_addr, SMCR_GID_LEN);
		return 0;
	}
	return -EAFNOSUPPORT;
}

static void netdev_mac(unsigned int ifindex, char *name, uint8_t *mac)
{
	struct ifreq ifr;
	int fd;

	name[0] = 0;
	memset(mac, 0, SMCR_MAC_LEN);
	if (!ifindex || !if_indextoname(ifindex, name)) {
		name[0] = 0;
		return;
	}
	fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return;
	memset(&ifr, 0, sizeof(ifr));
	snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "%s", name);
	if (ioctl(fd, SIOCGIFHWADDR, &ifr) == 0)
		memcpy(mac, ifr.ifr_hwaddr.sa_data, SMCR_MAC_LEN);
	close(fd);
}

/* A GID that carries an IP address: IPv4-mapped or not link-local. */
static bool gid_has_ip(const uint8_t *gid)
{
	static const uint8_t v4_prefix[12] = { [10] = 0xff, [11] = 0xff };

	if (memcmp(gid, v4_prefix, sizeof(v4_prefix)) == 0)
		return true;
	return !(gid[0] == 0xfe && (gid[1] & 0xc0) == 0x80);
}

static int port_fill(struct smcr_dev *dev, uint8_t port,
		     const struct ibv_gid_entry *ent, struct smcr_port_ref *ref)
{
	memset(ref, 0, sizeof(*ref));
	ref->dev = dev;
	ref->port = port;
	ref->gid_index = (int)ent->gid_index;
	memcpy(ref->gid, ent->gid.raw, SMCR_GID_LEN);
	netdev_mac(ent->ndev_ifindex, ref->netdev, ref->mac);
	ref->ifindex = ref->netdev[0] ? ent->ndev_ifindex : 0;
	return smcr_port_refresh(ref);
}

bool smcr_port_reaches(const struct smcr_port_ref *ref,
		       const uint8_t gid[SMCR_GID_LEN])
{
	static const uint8_t v4[12] = { [10] = 0xff, [11] = 0xff };
	bool v4peer = memcmp(gid, v4, sizeof(v4)) == 0;
	struct ifaddrs *ifs, *ifa;
	bool any = false, hit = false;

	if (!ref->netdev[0] || getifaddrs(&ifs))
		return true;
	for (ifa = ifs; ifa && !hit; ifa = ifa->ifa_next) {
		const uint8_t *a, *m;
		unsigned int i, len;

		if (!ifa->ifa_addr || !ifa->ifa_netmask ||
		    strcmp(ifa->ifa_name, ref->netdev))
			continue;
		if (v4peer && ifa->ifa_addr->sa_family == AF_INET) {
			a = (const uint8_t *)&((struct sockaddr_in *)ifa->ifa_addr)->sin_addr;
			m = (const uint8_t *)&((struct sockaddr_in *)ifa->ifa_netmask)->sin_addr;
			len = 4;
		} else if (!v4peer && ifa->ifa_addr->sa_family == AF_INET6) {
			a = ((struct sockaddr_in6 *)ifa->ifa_addr)->sin6_addr.s6_addr;
			m = ((struct sockaddr_in6 *)ifa->ifa_netmask)->sin6_addr.s6_addr;
			len = 16;
			/* Link-local addresses say nothing about the LAN. */
			if (a[0] == 0xfe && (a[1] & 0xc0) == 0x80)
				continue;
		} else {
			continue;
		}
		any = true;
		hit = true;
		for (i = 0; i < len; i++)
			if ((a[i] & m[i]) != (gid[16 - len + i] & m[i]))
				hit = false;
	}
	freeifaddrs(ifs);
	return hit || !any;
}

/* Every valid GID entry of ctx's ports (all of them, or only port when it
 * is > 0), in one call (ibv_query_gid_table: one ioctl for the whole
 * table, where an entry at a time costs a system call for each of rxe's
 * 1024 slots, most of them empty).  *entsp is malloc'd; returns the
 * number of entries or -errno. */
static int gid_table(struct ibv_context *ctx, uint8_t nports, int port,
		     struct ibv_gid_entry **entsp)
{
	struct ibv_gid_entry *ents;
	size_t total = 0;
	ssize_t n;
	uint8_t p;

	for (p = 1; p <= nports; p++) {
		struct ibv_port_attr pattr;

		if (ibv_query_port(ctx, p, &pattr) == 0 && pattr.gid_tbl_len > 0)
			total += (size_t)pattr.gid_tbl_len;
	}
	*entsp = NULL;
	if (!total)
		return 0;
	ents = calloc(total, sizeof(*ents));
	if (!ents)
		return -ENOMEM;
	n = ibv_query_gid_table(ctx, ents, total, 0);
	if (n < 0) {
		free(ents);
		return (int)n;
	}
	if (port > 0) {
		ssize_t i, k = 0;

		for (i = 0; i < n; i++)
			if (ents[i].port_num == (uint32_t)port)
				ents[k++] = ents[i];
		n = k;
	}
	*entsp = ents;
	return (int)n;
}

int smcr_port_other_gid(const struct smcr_port_ref *ref, const uint8_t *avoid,
			unsigned int n, struct smcr_port_ref *out)
{
	struct ibv_gid_entry *ents;
	int i, nent, ret = -ENOENT;

	if (!ref->dev)
		return -ENOENT;
	nent = gid_table(ref->dev->ctx, ref->dev->attr.phys_port_cnt, ref->port, &ents);
	for (i = 0; i < nent; i++) {
		const struct ibv_gid_entry *ent = &ents[i];
		unsigned int k;
		bool used = false;

		if (ent->gid_type != IBV_GID_TYPE_ROCE_V2 || !gid_has_ip(ent->gid.raw))
			continue;
		for (k = 0; k < n; k++)
			if (memcmp(avoid + k * SMCR_GID_LEN, ent->gid.raw, SMCR_GID_LEN) == 0)
				used = true;
		if (used)
			continue;
		*out = *ref;
		out->gid_index = (int)ent->gid_index;
		memcpy(out->gid, ent->gid.raw, SMCR_GID_LEN);
		if (ent->ndev_ifindex != ref->ifindex) {
			netdev_mac(ent->ndev_ifindex, out->netdev, out->mac);
			out->ifindex = out->netdev[0] ? ent->ndev_ifindex : 0;
		}
		ret = 0;
		break;
	}
	free(ents);
	return ret;
}

int smcr_port_refresh(struct smcr_port_ref *ref)
{
	struct ibv_port_attr pattr;
	int ret;

	ret = ibv_query_port(ref->dev->ctx, ref->port, &pattr);
	if (ret)
		return -ret;
	ref->up = pattr.state == IBV_PORT_ACTIVE;
	ref->mtu = pattr.active_mtu;
	return 0;
}

/* Calls fn for each RoCE v2 GID entry of every port of every device until fn
 * returns non-zero; returns that value, or 0. */
typedef int (*gid_visit_fn)(struct smcr_devs *devs, struct ibv_device *ibdev,
			    uint8_t port, const struct ibv_gid_entry *ent,
			    void *arg);

static int visit_gids(struct smcr_devs *devs, const char *only_dev,
		      int only_port, gid_visit_fn fn, void *arg)
{
	struct ibv_device **list;
	int i, n, ret = 0;

	list = ibv_get_device_list(&n);
	if (!list)
		return errno ? -errno : -ENODEV;
	for (i = 0; i < n && !ret; i++) {
		struct ibv_gid_entry *ents;
		struct smcr_dev *dev;
		int k, nent;

		if (only_dev && strcmp(ibv_get_device_name(list[i]), only_dev))
			continue;
		/* Opened once: the visitor that keeps a port of it takes a
		 * reference (dev_open finds it open); unused, it is closed. */
		if (dev_open(devs, list[i], &dev))
			continue;
		nent = gid_table(dev->ctx, dev->attr.phys_port_cnt, only_port, &ents);
		for (k = 0; k < nent && !ret; k++)
			if (ents[k].gid_type == IBV_GID_TYPE_ROCE_V2 &&
			    ents[k].port_num >= 1 && ents[k].port_num <= dev->attr.phys_port_cnt)
				ret = fn(devs, list[i], (uint8_t)ents[k].port_num, &ents[k], arg);
		free(ents);
		if (!dev->refs)
			dev_unlink(devs, dev);
	}
	ibv_free_device_list(list);
	return ret;
}

struct resolve_arg {
	uint8_t gid[SMCR_GID_LEN];
	bool any_ip;		/* match the first GID with an IP */
	struct smcr_port_ref *ref;
};

static int resolve_visit(struct smcr_devs *devs, struct ibv_device *ibdev,
			 uint8_t port, const struct ibv_gid_entry *ent, void *arg)
{
	struct resolve_arg *ra = arg;
	struct smcr_dev *dev;
	int ret;

	if (ra->any_ip ? !gid_has_ip(ent->gid.raw) :
	    memcmp(ent->gid.raw, ra->gid, SMCR_GID_LEN) != 0)
		return 0;
	ret = dev_open(devs, ibdev, &dev);
	if (ret)
		return ret;
	ret = port_fill(dev, port, ent, ra->ref);
	if (ret)
		return ret;
	smcr_dev_get(ra->ref);
	return 1;
}

int smcr_dev_resolve_addr(struct smcr_devs *devs, const struct sockaddr *addr,
			  struct smcr_port_ref *ref)
{
	struct resolve_arg ra = { .ref = ref };
	int ret;

	ret = smcr_gid_from_addr(addr, ra.gid);
	if (ret)
		return ret;
	ret = visit_gids(devs, NULL, 0, resolve_visit, &ra);
	if (ret < 0)
		return ret;
	return ret == 1 ? 0 : -ENODEV;
}

int smcr_dev_resolve_name(struct smcr_devs *devs, const char *spec,
			  struct smcr_port_ref *ref)
{
	struct resolve_arg ra = { .any_ip = true, .ref = ref };
	char name[IBV_SYSFS_NAME_MAX];
	const char *colon = strchr(spec, ':');
	int port = 1, ret;
	size_t len = colon ? (size_t)(colon - spec) : strlen(spec);

	if (len == 0 || len >= sizeof(name))
		return -EINVAL;
	memcpy(name, spec, len);
	name[len] = 0;
	if (colon) {
		char *end;
		long p = strtol(colon + 1, &end, 10);

		if (*end || p < 1 || p > 255)
			return -EINVAL;
		port = (int)p;
	}
	ret = visit_gids(devs, name, port, resolve_visit, &ra);
	if (ret < 0)
		return ret;
	return ret == 1 ? 0 : -ENODEV;
}

struct list_arg {
	struct smcr_port_ref *refs;
	int max, n;
	char last_dev[IBV_SYSFS_NAME_MAX];
	int last_port;
};

static int list_visit(struct smcr_devs *devs, struct ibv_device *ibdev,
		      uint8_t port, const struct ibv_gid_entry *ent, void *arg)
{
	struct list_arg *la = arg;
	const char *name = ibv_get_device_name(ibdev);
	struct smcr_port_ref *ref;
	struct smcr_dev *dev;
	int ret;

	/* One entry per port: its first RoCE v2 GID that has an IP. */
	if (!gid_has_ip(ent->gid.raw))
		return 0;
	if (la->last_port == port && strcmp(la->last_dev, name) == 0)
		return 0;
	if (la->n >= la->max)
		return 1;
	ret = dev_open(devs, ibdev, &dev);
	if (ret)
		return ret;
	ref = &la->refs[la->n];
	ret = port_fill(dev, port, ent, ref);
	if (ret)
		return ret;
	snprintf(la->last_dev, sizeof(la->last_dev), "%s", name);
	la->last_port = port;
	if (!ref->up)
		return 0;
	smcr_dev_get(ref);
	la->n++;
	return 0;
}

int smcr_dev_list_ports_of(struct smcr_devs *devs, const char *name,
			   struct smcr_port_ref *refs, int max)
{
	struct list_arg la = { .refs = refs, .max = max };
	int ret;

	ret = visit_gids(devs, name, 0, list_visit, &la);
	if (ret < 0) {
		while (la.n > 0)
			smcr_dev_put(devs, &refs[--la.n]);
		return ret;
	}
	return la.n;
}

int smcr_qp_create(struct smcr_port_ref *ref, struct smcr_pd *pd,
		   struct ibv_cq *send_cq,
		   struct ibv_cq *recv_cq, uint32_t max_send_wr,
		   uint32_t max_recv_wr, struct ibv_qp **qpp,
		   uint32_t *max_inline)
{
	struct ibv_qp_init_attr attr = {
		.send_cq = send_cq,
		.recv_cq = recv_cq,
		.cap = {
			.max_send_wr = max_send_wr,
			.max_recv_wr = max_recv_wr,
			.max_send_sge = 2,
			.max_recv_sge = 2,	/* slot + SMC-Rv2 overflow */
			.max_inline_data = 64,
		},
		.qp_type = IBV_QPT_RC,
		.sq_sig_all = 0,
	};
	struct ibv_qp *qp;

	qp = ibv_create_qp(pd->pd, &attr);
	if (!qp) {
		/* Some providers have no inline support. */
		attr.cap.max_inline_data = 0;
		qp = ibv_create_qp(pd->pd, &attr);
	}
	if (!qp) {
		int ret = errno ? -errno : -ENOMEM;

		smcr_err("%s: cannot create an RC QP: %s", ref->dev->name,
			 strerror(-ret));
		return ret;
	}
	/* ibv_create_qp() wrote back what the QP really has. */
	if (max_inline)
		*max_inline = attr.cap.max_inline_data;
	*qpp = qp;
	return 0;
}

int smcr_qp_to_init(struct ibv_qp *qp, const struct smcr_port_ref *ref)
{
	struct ibv_qp_attr attr = {
		.qp_state = IBV_QPS_INIT,
		.pkey_index = 0,
		.port_num = ref->port,
		.qp_access_flags = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_LOCAL_WRITE,
	};

	return -ibv_modify_qp(qp, &attr, IBV_QP_STATE | IBV_QP_PKEY_INDEX |
					 IBV_QP_PORT | IBV_QP_ACCESS_FLAGS);
}

int smcr_qp_to_rtr(struct ibv_qp *qp, const struct smcr_port_ref *ref,
		   const struct smcr_qp_peer *peer)
{
	struct ibv_qp_attr attr = {
		.qp_state = IBV_QPS_RTR,
		.path_mtu = peer->mtu < ref->mtu ? peer->mtu : ref->mtu,
		.dest_qp_num = peer->qpn & 0xffffff,
		.rq_psn = peer->psn & 0xffffff,
		.max_dest_rd_atomic = 1,
		.min_rnr_timer = 12,
		.ah_attr = {
			.is_global = 1,
			.port_num = ref->port,
			.sl = 0,
			.grh = {
				.sgid_index = (uint8_t)ref->gid_index,
				.hop_limit = 64,
			},
		},
	};

	memcpy(attr.ah_attr.grh.dgid.raw, peer->gid, SMCR_GID_LEN);
	return -ibv_modify_qp(qp, &attr, IBV_QP_STATE | IBV_QP_AV |
					 IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
					 IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC |
					 IBV_QP_MIN_RNR_TIMER);
}

int smcr_qp_to_rts(struct ibv_qp *qp, uint32_t psn,
		   const struct smcr_qp_timing *timing)
{
	struct ibv_qp_attr attr = {
		.qp_state = IBV_QPS_RTS,
		.sq_psn = psn & 0xffffff,
		.timeout = timing->timeout,
		.retry_cnt = timing->retry_cnt,
		.rnr_retry = timing->rnr_retry,
		.max_rd_atomic = 1,
	};

	return -ibv_modify_qp(qp, &attr, IBV_QP_STATE | IBV_QP_SQ_PSN |
					 IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
					 IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC);
}

int smcr_qp_to_err(struct ibv_qp *qp)
{
	struct ibv_qp_attr attr = { .qp_state = IBV_QPS_ERR };

	return -ibv_modify_qp(qp, &attr, IBV_QP_STATE);
}

int smcr_neigh_parse(const void *buf, size_t len, int family, const void *addr,
		     unsigned int ifindex, bool *found)
{
	const size_t alen = family == AF_INET ? 4 : 16;
	const uint16_t ok = NUD_REACHABLE | NUD_STALE | NUD_DELAY | NUD_PROBE |
			    NUD_PERMANENT | NUD_NOARP;
	const struct nlmsghdr *nh;
	size_t n = len;

	for (nh = buf; NLMSG_OK(nh, n); nh = NLMSG_NEXT(nh, n)) {
		const struct ndmsg *nd = NLMSG_DATA(nh);
		const struct rtattr *a;
		int rlen;

		if (nh->nlmsg_type == NLMSG_DONE)
			return 1;
		if (nh->nlmsg_type == NLMSG_ERROR)
			return -EIO;
		if (nh->nlmsg_type != RTM_NEWNEIGH ||
		    nh->nlmsg_len < NLMSG_LENGTH(sizeof(*nd)) ||
		    nd->ndm_family != family || !(nd->ndm_state & ok) ||
		    (ifindex && nd->ndm_ifindex != (int)ifindex))
			continue;
		rlen = (int)RTM_PAYLOAD(nh);
		for (a = RTM_RTA(nd); RTA_OK(a, rlen); a = RTA_NEXT(a, rlen))
			if (a->rta_type == NDA_DST && RTA_PAYLOAD(a) == alen &&
			    !memcmp(RTA_DATA(a), addr, alen))
				*found = true;
	}
	return 0;
}

int smcr_neigh_resolved(int family, const void *addr, unsigned int ifindex)
{
	struct {
		struct nlmsghdr nh;
		struct ndmsg nd;
	} req = {
		.nh = { .nlmsg_len = sizeof(req), .nlmsg_type = RTM_GETNEIGH,
			.nlmsg_flags = NLM_F_REQUEST | NLM_F_DUMP, .nlmsg_seq = 1 },
		.nd = { .ndm_family = (unsigned char)family },
	};
	char buf[16384] __attribute__((aligned(NLMSG_ALIGNTO)));
	bool found = false;
	int fd, ret = 0;

	fd = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_ROUTE);
	if (fd < 0)
		return -errno;
	if (send(fd, &req, sizeof(req), 0) < 0) {
		ret = -errno;
		goto out_close;
	}
	while (ret == 0) {
		ssize_t n = recv(fd, buf, sizeof(buf), 0);

		if (n < 0) {
			ret = -errno;
			goto out_close;
		}
		ret = smcr_neigh_parse(buf, (size_t)n, family, addr, ifindex, &found);
	}
	if (ret > 0)
		ret = found;
out_close:
	close(fd);
	return ret;
}

int smcr_neigh_prod(const struct sockaddr *to, socklen_t tolen, unsigned int ifindex)
{
	union {
		struct cmsghdr align;
		char buf[CMSG_SPACE(sizeof(struct in6_pktinfo))];
	} ctl;
	struct iovec iov = { .iov_base = "", .iov_len = 1 };
	struct msghdr msg = {
		.msg_name = (void *)to, .msg_namelen = tolen,
		.msg_iov = &iov, .msg_iovlen = 1,
	};
	struct cmsghdr *cm;
	int fd, ret = 0;

	fd = socket(to->sa_family, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	/* The source interface: the route's first device is not necessarily
	 * the netdev whose neighbour table the GID's RTR looks in (two NICs
	 * on one subnet). */
	if (ifindex) {
		memset(&ctl, 0, sizeof(ctl));
		msg.msg_control = ctl.buf;
		cm = (struct cmsghdr *)ctl.buf;
		if (to->sa_family == AF_INET) {
			struct in_pktinfo pi = { .ipi_ifindex = (int)ifindex };

			cm->cmsg_level = IPPROTO_IP;
			cm->cmsg_type = IP_PKTINFO;
			cm->cmsg_len = CMSG_LEN(sizeof(pi));
			memcpy(CMSG_DATA(cm), &pi, sizeof(pi));
			msg.msg_controllen = CMSG_SPACE(sizeof(pi));
		} else {
			struct in6_pktinfo pi = { .ipi6_ifindex = ifindex };

			cm->cmsg_level = IPPROTO_IPV6;
			cm->cmsg_type = IPV6_PKTINFO;
			cm->cmsg_len = CMSG_LEN(sizeof(pi));
			memcpy(CMSG_DATA(cm), &pi, sizeof(pi));
			msg.msg_controllen = CMSG_SPACE(sizeof(pi));
		}
	}
	if (sendmsg(fd, &msg, 0) < 0)
		ret = -errno;
	close(fd);
	return ret;
}

int smcr_gid_resolved(const uint8_t gid[SMCR_GID_LEN], unsigned int ifindex,
		      bool prod)
{
	static const uint8_t v4[12] = { [10] = 0xff, [11] = 0xff };
	struct sockaddr_storage ss = { 0 };
	struct sockaddr_in *sin = (struct sockaddr_in *)&ss;
	struct sockaddr_in6 *sin6 = (struct sockaddr_in6 *)&ss;
	socklen_t sl;
	int r;

	if (!memcmp(gid, v4, sizeof(v4))) {
		sin->sin_family = AF_INET;
		sin->sin_port = htons(9);
		memcpy(&sin->sin_addr, gid + 12, 4);
		sl = sizeof(*sin);
		r = smcr_neigh_resolved(AF_INET, &sin->sin_addr, ifindex);
	} else {
		if (gid[0] == 0xfe && (gid[1] & 0xc0) == 0x80)
			return 1;
		sin6->sin6_family = AF_INET6;
		sin6->sin6_port = htons(9);
		memcpy(&sin6->sin6_addr, gid, 16);
		sl = sizeof(*sin6);
		r = smcr_neigh_resolved(AF_INET6, &sin6->sin6_addr, ifindex);
	}
	if (r != 0)
		return 1;
	if (prod)
		(void)smcr_neigh_prod((struct sockaddr *)&ss, sl, ifindex);
	return 0;
}
