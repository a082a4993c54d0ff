/* SPDX-License-Identifier: BSD-3-Clause */
/* smcrbd: what smcr/synopt.bpf.c and smcr/synopt.c share. */
#ifndef SMCR_SYNOPT_BPF_H
#define SMCR_SYNOPT_BPF_H

#define SMCR_SYNOPT_KIND 254
#define SMCR_SYNOPT_LEN 6
#define SMCR_SYNOPT_MAX_LISTENERS 256

/* What the peer sent, in struct smcr_synopt_sk.peer. */
#define SMCR_SYNOPT_PEER_UNKNOWN 0	/* handshake not seen (yet) */
#define SMCR_SYNOPT_PEER_SMC 1		/* its SYN / SYN-ACK had the option */
#define SMCR_SYNOPT_PEER_NONE 2		/* it had not */

/* Per socket (BPF_MAP_TYPE_SK_STORAGE value). */
struct smcr_synopt_sk {
	__u32 mark;			/* set by libsmcr: one of ours */
	__u32 peer;			/* SMCR_SYNOPT_PEER_*, set by the program */
};

#endif
