/* SPDX-License-Identifier: BSD-3-Clause */
/* smc-preload.so: a program's TCP connections over the kernel's AF_SMC
 * (LD_PRELOAD), as smc-tools' smc_run does, for the lane's tests of stock
 * NBD tools against smcrd.
 *
 * socket(AF_INET/AF_INET6, SOCK_STREAM, 0 or IPPROTO_TCP) becomes
 * socket(AF_SMC, ..., SMCPROTO_SMC/SMCPROTO_SMC6) (a plain socket when the
 * kernel has no AF_SMC).  connect() on such a socket is made blocking even
 * when the socket is non-blocking: Linux 6.1 reports a non-blocking AF_SMC
 * connect as done once TCP is up, then answers reads with ENOTCONN while
 * the CLC handshake still runs (TCP would say EAGAIN); libnbd connects
 * non-blocking and reads at once, and gives up.  A blocking connect
 * returns after CLC (SMC-R, or the fallback to TCP).
 *
 * SMC_PRELOAD_DEBUG=1 says on stderr which sockets it turned. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>

#ifndef AF_SMC
#define AF_SMC 43
#endif
#define SMCPROTO_SMC	0	/* SMC over IPv4 */
#define SMCPROTO_SMC6	1	/* SMC over IPv6 */

static int (*real_socket)(int, int, int);
static int (*real_connect)(int, const struct sockaddr *, socklen_t);

static int debug(void)
{
	const char *d = getenv("SMC_PRELOAD_DEBUG");

	return d && *d && *d != '0';
}

int socket(int domain, int type, int protocol)
{
	if (!real_socket)
		real_socket = (int (*)(int, int, int))dlsym(RTLD_NEXT, "socket");
	if (!real_socket) {
		errno = ENOSYS;
		return -1;
	}
	if ((domain == AF_INET || domain == AF_INET6) && (type & 0xf) == SOCK_STREAM &&
	    (protocol == 0 || protocol == IPPROTO_TCP)) {
		int fd = real_socket(AF_SMC, type,
				     domain == AF_INET6 ? SMCPROTO_SMC6 : SMCPROTO_SMC);

		if (debug())
			fprintf(stderr, "smc-preload: socket(%s) -> %s fd %d\n",
				domain == AF_INET6 ? "AF_INET6" : "AF_INET",
				fd >= 0 ? "AF_SMC" : "no AF_SMC, TCP", fd);
		if (fd >= 0)
			return fd;
	}
	return real_socket(domain, type, protocol);
}

int connect(int fd, const struct sockaddr *addr, socklen_t len)
{
	int dom = 0, fl, r, e;
	socklen_t dl = sizeof(dom);

	if (!real_connect)
		real_connect = (int (*)(int, const struct sockaddr *, socklen_t))
			dlsym(RTLD_NEXT, "connect");
	if (!real_connect) {
		errno = ENOSYS;
		return -1;
	}
	if (getsockopt(fd, SOL_SOCKET, SO_DOMAIN, &dom, &dl) || dom != AF_SMC)
		return real_connect(fd, addr, len);
	fl = fcntl(fd, F_GETFL);
	if (fl < 0 || !(fl & O_NONBLOCK))
		return real_connect(fd, addr, len);
	/* Blocking until CLC is done; the caller's flags come back after. */
	if (fcntl(fd, F_SETFL, fl & ~O_NONBLOCK))
		return real_connect(fd, addr, len);
	r = real_connect(fd, addr, len);
	e = errno;
	fcntl(fd, F_SETFL, fl);
	if (debug())
		fprintf(stderr, "smc-preload: blocking connect on fd %d: %s\n", fd,
			r ? "failed" : "done");
	errno = e;
	return r;
}
