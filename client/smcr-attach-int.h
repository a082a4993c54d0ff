/* SPDX-License-Identifier: BSD-3-Clause */
/* smcr-attach's rooms, as smcr-attach.c (options, the direct sockets, the
 * device's life) calls them: smcr-attach-nl.c speaks the nbd driver's
 * generic netlink, smcr-attach-fwd.c is the forwarder of -F (socket pairs
 * to the client engine), smcr-attach-ublk.c the ublk server of --ublk.
 * Errors are -errno. */
#ifndef SMCR_ATTACH_INT_H
#define SMCR_ATTACH_INT_H

#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "nbd-conn.h"
#include "nbdc-settings.h"
#include "nbdc-uri.h"

#define MAX_CONNS	16
#define NL_BUF		8192

struct opts {
	struct nbdc_server srv[NBDC_MAX_SERVERS];	/* gateways of one export */
	unsigned nsrv;
	const char *export;
	int index;			/* N of /dev/nbdN */
	unsigned conns;
	unsigned timeout_s;		/* I/O timeout of the driver */
	unsigned dead_s;		/* wait for a reconnect this long */
	unsigned block;
	bool tcp;			/* plain TCP instead of AF_SMC */
	bool unix_sock;			/* srv[0].host: a Unix socket's path */
	bool readonly;
	bool forward;			/* socket pairs to our forwarder */
	const char *exec;		/* --exec CMD, with forward */
	bool ublk;			/* a ublk device served by the engine */
	int ublk_id;			/* N of /dev/ublkbN; -1: the next free */
	bool recover;			/* take over /dev/ublkbN */
	bool standby;			/* --recover once its server is gone */
	bool recover_auto;		/* --recover=auto: make, take over or stand by */
	unsigned qdepth;		/* ublk tags per queue; 0: the default */
	int sockbuf;			/* SO_SNDBUF/SO_RCVBUF; 0: the kernel's,
					 * -1: SMC_SOCKBUF on AF_SMC */
	/* TLS (with -F, over TCP): libnbd's names. */
	bool tls;
	const char *tls_certificates, *tls_psk_file, *tls_username;
	bool tls_no_verify_peer;
	/* The clients' connection settings (nbdc-settings.h), which set
	 * conns, dead_s, tcp, readonly and tls above. */
	struct nbdc_settings set;
};

/* Set by SIGINT/SIGTERM: the loops that watch the device end. */
extern volatile sig_atomic_t attach_stop;

/* The client engine's settings from the command line (-F, --ublk). */
void attach_engine_opts(const struct opts *o, struct nbdc_opts *no);

/* -F: the forwarder, from opening the engine to the device's end; the
 * exit status (0, 1; with --exec, CMD's). */
int fwd_run(const struct opts *o);

/* --- the nbd driver's generic netlink (smcr-attach-nl.c) --- */

struct nl {
	int fd;
	uint16_t family;
	uint32_t mcast;			/* nbd_mc_group, 0 if none */
	uint32_t seq;
	char buf[NL_BUF];
	size_t len;
};

/* A socket on the nbd family (-ENOENT: no nbd module); close n->fd. */
int nl_open(struct nl *n);
/* A new message of cmd to family type in n->buf, then its attributes. */
void nl_msg_begin(struct nl *n, uint16_t type, uint8_t cmd);
void nl_put_u32(struct nl *n, uint16_t type, uint32_t v);
void nl_put_u64(struct nl *n, uint16_t type, uint64_t v);
/* NBD_ATTR_SOCKETS with fds; -ENOSPC if the message has no room. */
int nl_socks(struct nl *n, const int *fds, unsigned nfds);
/* Sends the message and waits for its ack; a reply message on the way is
 * passed to cb.  Returns 0 or the kernel's -errno. */
int nl_send(struct nl *n, void (*cb)(void *, struct nlmsghdr *), void *arg);
/* /dev/nbd<index>: 1 connected, 0 not, -errno (-ENODEV: no such device). */
int nl_connected(struct nl *n, int index);
/* Dead-connection reports for /dev/nbd<index> since the last call (n:
 * on the multicast group). */
unsigned nl_link_dead(struct nl *n, int index);
/* NBD_CMD_DISCONNECT of /dev/nbd<index>. */
int nl_disconnect(struct nl *n, int index);

#endif
