/* SPDX-License-Identifier: BSD-3-Clause */
/* smcrbd: the SMC TCP option (RFC 7609 §3.1: kind 254, length 6, ExID
 * 0xE2D4C3D9) on the SYN and SYN-ACK of libsmcr's own sockets, and what the
 * peer sent.  A cgroup sockops program, loaded by smcr/synopt.c.
 *
 * libsmcr marks a socket in sock_map before connect() or listen(); a
 * listener's children inherit the mark (BPF_F_CLONE).  A SYN-ACK is built
 * from a request socket, which has no storage: the listening port in
 * port_map stands for the mark there.  After the handshake the socket's
 * peer field says whether the peer's SYN or SYN-ACK carried the option.
 * Every callback checks its own maps: each libsmcr process attaches its own
 * copy of this program to the same cgroup, and all copies run on every
 * socket of it. */
#include <linux/bpf.h>
#include <linux/types.h>
#include <bpf/bpf_helpers.h>

#include "synopt_bpf.h"

struct {
	__uint(type, BPF_MAP_TYPE_SK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC | BPF_F_CLONE);
	__type(key, int);
	__type(value, struct smcr_synopt_sk);
} sock_map SEC(".maps");

/* Listening ports (host byte order) of our marked listeners. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, SMCR_SYNOPT_MAX_LISTENERS);
	__type(key, __u32);
	__type(value, __u32);
} port_map SEC(".maps");

#define TCPHDR_SYN 0x02
#define TCPHDR_ACK 0x10

static __always_inline struct smcr_synopt_sk *mine(struct bpf_sock_ops *skops)
{
	struct bpf_sock *sk = skops->sk;
	struct smcr_synopt_sk *st;

	if (!sk)
		return 0;
	st = bpf_sk_storage_get(&sock_map, sk, 0, 0);
	return st && st->mark ? st : 0;
}

/* Whether the option is in the packet (flags 0) or in the SYN that the
 * connection started with (BPF_LOAD_HDR_OPT_TCP_SYN). */
static __always_inline int has_option(struct bpf_sock_ops *skops, __u64 flags)
{
	__u8 opt[SMCR_SYNOPT_LEN] = { SMCR_SYNOPT_KIND, SMCR_SYNOPT_LEN,
				      0xE2, 0xD4, 0xC3, 0xD9 };

	return bpf_load_hdr_opt(skops, opt, sizeof(opt), flags) == SMCR_SYNOPT_LEN;
}

/* Whether this outgoing packet gets the option: our SYN, or the SYN-ACK of
 * our listener to a SYN that carried it (not in syncookie mode: the
 * connection made from the cookie would not know that it did SMC). */
static __always_inline int wants_option(struct bpf_sock_ops *skops)
{
	__u32 port;

	if (!(skops->skb_tcp_flags & TCPHDR_SYN))
		return 0;
	if (!(skops->skb_tcp_flags & TCPHDR_ACK))
		return mine(skops) != 0;
	if (skops->args[0])
		return 0;
	port = skops->local_port;
	if (!bpf_map_lookup_elem(&port_map, &port))
		return 0;
	return has_option(skops, BPF_LOAD_HDR_OPT_TCP_SYN);
}

static __always_inline void established(struct bpf_sock_ops *skops, __u64 flags)
{
	struct smcr_synopt_sk *st = mine(skops);

	if (!st)
		return;
	st->peer = has_option(skops, flags) ? SMCR_SYNOPT_PEER_SMC :
					       SMCR_SYNOPT_PEER_NONE;
	/* Nothing more to write: no callback for every later segment. */
	bpf_sock_ops_cb_flags_set(skops, skops->bpf_sock_ops_cb_flags &
				  ~BPF_SOCK_OPS_WRITE_HDR_OPT_CB_FLAG);
}

SEC("sockops")
int smcr_synopt(struct bpf_sock_ops *skops)
{
	__u8 opt[SMCR_SYNOPT_LEN] = { SMCR_SYNOPT_KIND, SMCR_SYNOPT_LEN,
				      0xE2, 0xD4, 0xC3, 0xD9 };

	switch (skops->op) {
	case BPF_SOCK_OPS_TCP_CONNECT_CB:
	case BPF_SOCK_OPS_TCP_LISTEN_CB:
		if (mine(skops))
			bpf_sock_ops_cb_flags_set(skops, skops->bpf_sock_ops_cb_flags |
						  BPF_SOCK_OPS_WRITE_HDR_OPT_CB_FLAG);
		break;
	case BPF_SOCK_OPS_HDR_OPT_LEN_CB:
		if (wants_option(skops))
			bpf_reserve_hdr_opt(skops, SMCR_SYNOPT_LEN, 0);
		break;
	case BPF_SOCK_OPS_WRITE_HDR_OPT_CB:
		/* -EEXIST: another libsmcr process's copy wrote it. */
		if (wants_option(skops))
			bpf_store_hdr_opt(skops, opt, sizeof(opt), 0);
		break;
	case BPF_SOCK_OPS_ACTIVE_ESTABLISHED_CB:
		established(skops, 0);		/* the SYN-ACK */
		break;
	case BPF_SOCK_OPS_PASSIVE_ESTABLISHED_CB:
		established(skops, BPF_LOAD_HDR_OPT_TCP_SYN);	/* saved SYN */
		break;
	}
	return 1;
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
