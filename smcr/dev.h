/* SPDX-License-Identifier: BSD-3-Clause */
/* smcrbd: RNIC access through libibverbs: devices, ports, GIDs, PDs,
 * completion channels and RC QP state changes.
 *
 * All functions return 0 or a positive count on success and -errno on
 * failure.  A struct smcr_devs is not thread safe: the engine that owns it
 * serialises access.
 */
#ifndef SMCR_DEV_H
#define SMCR_DEV_H

#include <stdbool.h>
#include <stdint.h>
#include <net/if.h>
#include <sys/socket.h>

#include <infiniband/verbs.h>

#include "msg.h"	/* SMCR_GID_LEN, SMCR_MAC_LEN, smcr_mtu_bytes */

/* One opened RNIC: its verbs context and one completion channel.  It has
 * no protection domain of its own: see struct smcr_pd. */
struct smcr_dev {
	struct ibv_context *ctx;
	struct ibv_comp_channel *chan;
	struct ibv_device_attr attr;
	char name[IBV_SYSFS_NAME_MAX];
	unsigned int refs;
	/* The device's uverbs node in sysfs and its inode when we opened it:
	 * gone or another inode means the device was removed (see
	 * smcr_dev_present()). */
	char path[IBV_SYSFS_PATH_MAX];
	uint64_t ino;
	bool gone;			/* removed: never handed out again */
	struct smcr_dev *next;
};

/* A protection domain on one device.  A QP reaches exactly the memory
 * registered in its own PD, so every peer gets its own: the engine keeps
 * one per link group and device, and the group's QPs, link buffers, RMBs
 * and send buffers on that device live in it and nowhere else.
 * Reference counted: the group, every QP's link resources and every MR
 * registered in it hold one; the last smcr_pd_put() deallocates it (from
 * any thread: the reaper frees a link's QP without the owner's lock).  The
 * device must stay open until then. */
struct smcr_pd {
	struct smcr_dev *dev;
	struct ibv_pd *pd;
	unsigned int refs;		/* atomic */
};

/* A new PD on dev with one reference. */
int smcr_pd_alloc(struct smcr_dev *dev, struct smcr_pd **pdp);
struct smcr_pd *smcr_pd_get(struct smcr_pd *pd);
/* NULL is a no-op. */
void smcr_pd_put(struct smcr_pd *pd);

/* The set of devices a context has opened. */
struct smcr_devs {
	struct smcr_dev *head;
};

/* The local end of one link: a device port and the GID used on it. */
struct smcr_port_ref {
	struct smcr_dev *dev;
	uint8_t port;
	int gid_index;
	uint8_t gid[SMCR_GID_LEN];
	uint8_t mac[SMCR_MAC_LEN];
	enum ibv_mtu mtu;		/* active MTU of the port */
	bool up;			/* port state ACTIVE */
	char netdev[IF_NAMESIZE];	/* "" if the port has none */
	unsigned int ifindex;		/* the GID's netdev; 0 if none */
};

/* What one side of an RC QP tells the other (carried in CLC or ADD LINK). */
struct smcr_qp_peer {
	uint32_t qpn;			/* 24 bits */
	uint32_t psn;			/* 24 bits: the peer's initial send PSN */
	uint8_t gid[SMCR_GID_LEN];
	enum ibv_mtu mtu;
};

/* Timeout and retry budget for RC QPs (IB encoding of the ACK timeout:
 * 4.096 us * 2^timeout).  smcr_qp_timing_default can be changed with
 * SMCR_QP_TIMEOUT and SMCR_QP_RETRY (read by smcr_ctx_create()). */
struct smcr_qp_timing {
	uint8_t timeout;
	uint8_t retry_cnt;
	uint8_t rnr_retry;
};

/* smcr_qp_timing_default's, named by smcr/ctx.c's settings table too
 * (dev.c says why 19). */
#define SMCR_QP_TIMEOUT_DEFAULT	19
#define SMCR_QP_RETRY_DEFAULT	6

extern const struct smcr_qp_timing smcr_qp_timing_default;

void smcr_devs_init(struct smcr_devs *devs);
/* Closes every device; all references must have been put. */
void smcr_devs_fini(struct smcr_devs *devs);

/* Find the RoCE v2 GID of a local IPv4 or IPv6 address on any device and
 * port, open that device (or take a reference) and fill *ref.
 * Returns -ENODEV when no RNIC carries the address. */
int smcr_dev_resolve_addr(struct smcr_devs *devs, const struct sockaddr *addr,
			  struct smcr_port_ref *ref);

/* Resolve "DEVICE[:PORT]" (port 1 by default) using the first RoCE v2 GID
 * with an IP address on that port, else GID index 0. */
int smcr_dev_resolve_name(struct smcr_devs *devs, const char *spec,
			  struct smcr_port_ref *ref);

/* Every active port with a usable RoCE v2 GID of the device called name
 * (NULL: of every device), at most max, each holding a device reference.
 * Returns the number found. */
int smcr_dev_list_ports_of(struct smcr_devs *devs, const char *name,
			   struct smcr_port_ref *refs, int max);

/* Take another reference on ref->dev / drop one (closing it at zero). */
void smcr_dev_get(struct smcr_port_ref *ref);
void smcr_dev_put(struct smcr_devs *devs, struct smcr_port_ref *ref);

/* Is the device still there?  A removed device (rdma link delete, hot
 * unplug) may not say so: a provider without "disassociate" support (rxe)
 * keeps every object of ours working and makes the removal wait until we
 * close the device; only its uverbs node disappears at once.  So this
 * looks at that node.  A device found gone is marked so and is never
 * returned by the lookups again; the last smcr_dev_put() closes it. */
bool smcr_dev_present(struct smcr_dev *dev);

/* Can the port reach the peer's GID without a router: is the address in
 * the GID on a subnet of the port's network device?  True when that cannot
 * be told (no netdev, no addresses). */
bool smcr_port_reaches(const struct smcr_port_ref *ref,
		       const uint8_t gid[SMCR_GID_LEN]);

/* Another RoCE v2 GID with an IP address on ref's port, none of the n GIDs
 * in avoid: *out is ref with that GID (same device reference, not taken
 * again).  -ENOENT if there is none. */
int smcr_port_other_gid(const struct smcr_port_ref *ref, const uint8_t *avoid,
			unsigned int n, struct smcr_port_ref *out);

/* Refresh ref->up and ref->mtu from the port's current attributes. */
int smcr_port_refresh(struct smcr_port_ref *ref);

/* An RC QP in pd (on ref's device) with the given CQs and queue sizes,
 * asking 64 bytes of inline data (0 where the device refuses that);
 * *max_inline (if not NULL) is what the QP got. */
int smcr_qp_create(struct smcr_port_ref *ref, struct smcr_pd *pd,
		   struct ibv_cq *send_cq,
		   struct ibv_cq *recv_cq, uint32_t max_send_wr,
		   uint32_t max_recv_wr, struct ibv_qp **qpp,
		   uint32_t *max_inline);

/* RESET -> INIT, allowing remote writes into our memory. */
int smcr_qp_to_init(struct ibv_qp *qp, const struct smcr_port_ref *ref);
/* INIT -> RTR towards the peer; mtu is min(local, peer). */
int smcr_qp_to_rtr(struct ibv_qp *qp, const struct smcr_port_ref *ref,
		   const struct smcr_qp_peer *peer);
/* RTR -> RTS with our initial send PSN. */
int smcr_qp_to_rts(struct ibv_qp *qp, uint32_t psn,
		   const struct smcr_qp_timing *timing);
/* Any state -> ERR: outstanding work requests flush with errors. */
int smcr_qp_to_err(struct ibv_qp *qp);

/* Fill gid with the IPv4-mapped or IPv6 RoCE v2 GID of addr. */
int smcr_gid_from_addr(const struct sockaddr *addr, uint8_t gid[SMCR_GID_LEN]);

/* One recv() of an RTM_GETNEIGH dump: sets *found when it holds addr
 * (family AF_INET or AF_INET6) with a link-layer address on ifindex (0: on
 * any interface).  1 when the dump ended, 0 when more follows, -EIO on a
 * netlink error. */
int smcr_neigh_parse(const void *buf, size_t len, int family, const void *addr,
		     unsigned int ifindex, bool *found);
/* Is addr in the kernel's neighbour table with a link-layer address, on
 * ifindex (0: any)?  1, 0, or -errno (no netlink). */
int smcr_neigh_resolved(int family, const void *addr, unsigned int ifindex);
/* A one-byte datagram to `to` out of ifindex (0: as routed), which starts
 * the neighbour's resolution there.  0 or -errno. */
int smcr_neigh_prod(const struct sockaddr *to, socklen_t tolen, unsigned int ifindex);
/* The same for the address in a RoCE v2 GID on ifindex, the netdev of the
 * local GID that will reach it (the peer may be resolved on another NIC of
 * the same subnet): 1 when resolved or when it cannot tell (link-local
 * IPv6, no netlink), else 0, and with prod a datagram to it out of ifindex
 * starts the resolution.  It does not wait. */
int smcr_gid_resolved(const uint8_t gid[SMCR_GID_LEN], unsigned int ifindex,
		      bool prod);

#endif
