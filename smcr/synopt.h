/* SPDX-License-Identifier: BSD-3-Clause */
/* smcrbd: the SMC TCP option on our SYNs and SYN-ACKs (RFC 7609 §3.1)
 * through a cgroup BPF sockops program (synopt.bpf.c).  Internal.
 *
 * One program per process, attached to the process's own cgroup v2 by a
 * bpf_link (gone when the process exits), shared by its contexts. */
#ifndef SMCR_SYNOPT_H
#define SMCR_SYNOPT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "smcr.h"

/* Load and attach (or take another reference).  0, or -errno with the
 * reason written into why (-EOPNOTSUPP: built without BPF). */
int smcr_synopt_get(char *why, size_t len);
void smcr_synopt_put(void);

/* Mark a TCP socket of ours before connect(): its SYN carries the option. */
int smcr_synopt_mark(int fd);
/* The same for a socket before listen(), bound to port: SYN-ACKs to SYNs
 * with the option carry it; its children are marked.  Sets TCP_SAVE_SYN. */
int smcr_synopt_listen(int fd, uint16_t port);
void smcr_synopt_unlisten(uint16_t port);
/* After the handshake: 1 if the peer's SYN (we accepted) or SYN-ACK (we
 * connected) carried the option, 0 if not, -ENOENT if fd is not ours. */
int smcr_synopt_peer(int fd);

#endif
