/* SPDX-License-Identifier: BSD-3-Clause */
/* systemd's socket activation (smcrd) and readiness protocol (smcrd,
 * smcr-attach), without libsystemd (sd_listen_fds(3), sd_notify(3)
 * describe both). */
#include <config.h>

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stddef.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "sysd.h"

#define SD_LISTEN_FDS_START	3

static int errf(char *err, size_t errlen, int r, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

static int errf(char *err, size_t errlen, int r, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(err, errlen, fmt, ap);
	va_end(ap);
	return r;
}

/* A decimal number, whole, within [0, max]. */
static int parse_num(const char *s, unsigned long max, unsigned long *out)
{
	char *end;

	if (!s || *s < '0' || *s > '9')
		return -EINVAL;
	errno = 0;
	*out = strtoul(s, &end, 10);
	if (errno || *end || *out > max)
		return -EINVAL;
	return 0;
}

/* fd must be a listening TCP socket (IPv4 or IPv6). */
static int check_listener(int fd, char *err, size_t errlen)
{
	struct sockaddr_storage ss;
	socklen_t len = sizeof(ss);
	int v, fl;
	socklen_t vlen = sizeof(v);

	if (fcntl(fd, F_GETFD) < 0)
		return errf(err, errlen, -EBADF, "descriptor %d is not open", fd);
	if (getsockopt(fd, SOL_SOCKET, SO_TYPE, &v, &vlen) < 0)
		return errf(err, errlen, -ENOTSOCK, "descriptor %d is not a socket", fd);
	if (v != SOCK_STREAM)
		return errf(err, errlen, -EINVAL, "socket %d is not a stream socket", fd);
	vlen = sizeof(v);
	if (getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &v, &vlen) < 0 || !v)
		return errf(err, errlen, -EINVAL, "socket %d is not listening", fd);
	if (getsockname(fd, (struct sockaddr *)&ss, &len) < 0 ||
	    (ss.ss_family != AF_INET && ss.ss_family != AF_INET6 && ss.ss_family != AF_UNIX))
		return errf(err, errlen, -EAFNOSUPPORT,
			    "socket %d is not IPv4, IPv6 or Unix (ListenStream= takes a port, "
			    "an address or a path)", fd);
	fl = fcntl(fd, F_GETFL);
	if (fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0 ||
	    fcntl(fd, F_SETFD, FD_CLOEXEC) < 0)
		return errf(err, errlen, -errno, "socket %d: %s", fd, strerror(errno));
	return 0;
}

int sysd_listen_fds(int *fds, unsigned max, char *err, size_t errlen)
{
	const char *pid_s = getenv("LISTEN_PID"), *n_s = getenv("LISTEN_FDS");
	unsigned long pid, n, i;
	int r;

	if (!pid_s || !n_s)
		return 0;
	if (parse_num(pid_s, LONG_MAX, &pid) < 0)
		return errf(err, errlen, -EINVAL, "LISTEN_PID=%s: not a process id", pid_s);
	/* Meant for another process (inherited by mistake): not ours. */
	if (pid != (unsigned long)getpid())
		return 0;
	if (parse_num(n_s, INT_MAX - SD_LISTEN_FDS_START, &n) < 0)
		return errf(err, errlen, -EINVAL, "LISTEN_FDS=%s: not a number", n_s);
	if (n == 0)
		return 0;
	if (n > max)
		return errf(err, errlen, -E2BIG, "LISTEN_FDS=%lu: at most %u sockets", n, max);
	for (i = 0; i < n; i++) {
		r = check_listener(SD_LISTEN_FDS_START + (int)i, err, errlen);
		if (r < 0)
			return r;
		fds[i] = SD_LISTEN_FDS_START + (int)i;
	}
	/* Not for whatever this process starts. */
	unsetenv("LISTEN_PID");
	unsetenv("LISTEN_FDS");
	unsetenv("LISTEN_FDNAMES");
	return (int)n;
}

int sysd_notify(const char *state)
{
	const char *path = getenv("NOTIFY_SOCKET");
	struct sockaddr_un sun = { .sun_family = AF_UNIX };
	socklen_t len;
	size_t plen;
	ssize_t n;
	int fd, r = 0;

	if (!path || !*path)
		return 0;
	plen = strlen(path);
	if ((path[0] != '/' && path[0] != '@') || plen >= sizeof(sun.sun_path))
		return -EINVAL;
	memcpy(sun.sun_path, path, plen);
	if (path[0] == '@')
		sun.sun_path[0] = '\0';		/* abstract namespace */
	len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + plen);
	fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	n = sendto(fd, state, strlen(state), MSG_NOSIGNAL, (struct sockaddr *)&sun, len);
	if (n < 0)
		r = -errno;
	close(fd);
	return r;
}
