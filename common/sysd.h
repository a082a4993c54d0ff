/* SPDX-License-Identifier: BSD-3-Clause */
/* systemd's socket activation and readiness notification. */
#ifndef SMCRBD_SYSD_H
#define SMCRBD_SYSD_H

#include <stddef.h>

/* The listening sockets systemd passed (LISTEN_PID is this process,
 * LISTEN_FDS of them from descriptor 3): each checked to be a listening
 * IPv4/IPv6/Unix stream socket and made non-blocking and close-on-exec, stored
 * in fds (at most max).  Returns their number, 0 when there are none for
 * this process, or -errno with err saying why.  The variables are removed
 * from the environment once taken. */
int sysd_listen_fds(int *fds, unsigned max, char *err, size_t errlen);

/* Sends state (e.g. "READY=1") to $NOTIFY_SOCKET if set: 0 or -errno. */
int sysd_notify(const char *state);

#endif
