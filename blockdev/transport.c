/* SPDX-License-Identifier: BSD-3-Clause */
/* smcrbd: transport helpers shared by every implementation. */
#include <config.h>

#include <errno.h>
#include <poll.h>
#include <stdint.h>
#include <string.h>
#include <time.h>

#include "monotime.h"
#include "transport.h"

int bd_peer_addr(struct bd_transport *t, struct sockaddr_storage *ss, socklen_t *len)
{
	if (!t->ops->peer_addr)
		return -ENOTSUP;
	return t->ops->peer_addr(t, ss, len);
}

int bd_shutdown(struct bd_transport *t)
{
	if (!t->ops->shutdown)
		return 0;
	return t->ops->shutdown(t);
}

struct bd_transport_info bd_info(struct bd_transport *t)
{
	struct bd_transport_info info = { .name = t->ops->name, .tcp_fd = -1 };

	if (t->ops->info)
		t->ops->info(t, &info);
	return info;
}

void bd_abort(struct bd_transport *t)
{
	if (t && t->ops->abort)
		t->ops->abort(t);
	else
		bd_close(t);
}

int bd_wait(struct bd_transport *t, unsigned want, int timeout_ms, int cancel_fd)
{
	struct pollfd pfd[2];
	int64_t deadline = timeout_ms >= 0 ? now_ms() + timeout_ms : -1;
	nfds_t n = 1;

	pfd[0].fd = bd_poll_fd(t);
	pfd[0].events = bd_poll_events(t, want);
	if (cancel_fd >= 0) {
		pfd[1].fd = cancel_fd;
		pfd[1].events = POLLIN;
		n = 2;
	}
	for (;;) {
		int left = -1, r;

		if (deadline >= 0) {
			int64_t d = deadline - now_ms();

			left = d > 0 ? (int)d : 0;
		}
		pfd[0].revents = 0;
		if (n == 2)
			pfd[1].revents = 0;
		r = poll(pfd, n, left);
		if (r < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		if (r == 0)
			return -ETIMEDOUT;
		if (n == 2 && pfd[1].revents)
			return -ECANCELED;
		if (pfd[0].revents)
			return 0;
	}
}

/* The next wait: timeout_ms, cut to what is left before deadline (ms on
 * CLOCK_MONOTONIC, 0: none); -ETIMEDOUT once it has passed. */
static int wait_ms(int timeout_ms, int64_t deadline)
{
	int64_t left;

	if (!deadline)
		return timeout_ms;
	left = deadline - now_ms();
	if (left <= 0)
		return -ETIMEDOUT;
	return timeout_ms >= 0 && timeout_ms < left ? timeout_ms : (int)left;
}

int bd_read_full(struct bd_transport *t, void *buf, size_t len, int timeout_ms,
		 int cancel_fd)
{
	return bd_read_full_by(t, buf, len, timeout_ms, 0, cancel_fd);
}

/* While a read waits on a transport with rx_waiting: the first "anyone
 * holding bytes back?" request after this long with nothing, then at
 * doubling intervals up to the last.  Linux's AF_SMC sends data corked
 * with MSG_MORE only when such a CDC comes (libnbd 1.14 corks the end of
 * NBD_OPT_LIST_META_CONTEXT), where TCP would have sent it anyway. */
#define NUDGE_FIRST_MS	20
#define NUDGE_MAX_MS	1000

int bd_read_full_by(struct bd_transport *t, void *buf, size_t len, int timeout_ms,
		    int64_t deadline, int cancel_fd)
{
	uint8_t *p = buf;
	int64_t idle_since = 0;
	int nudge = NUDGE_FIRST_MS;

	while (len) {
		struct iovec iov = { .iov_base = p, .iov_len = len };
		ssize_t n = bd_readv(t, &iov, 1);

		if (n == -EAGAIN) {
			int w = timeout_ms, r;
			bool nudging = false;

			if (!idle_since) {
				idle_since = now_ms();
				/* What we read so far is acknowledged at once. */
				bd_rx_waiting(t, false);
			}
			if (w >= 0) {
				/* timeout_ms counts from the last bytes. */
				int64_t left = timeout_ms - (now_ms() - idle_since);

				w = left > 0 ? (int)left : 0;
			}
			w = wait_ms(w, deadline);
			if (w != -ETIMEDOUT && bd_has(t, BD_HAS_RX_WAITING) && (w < 0 || w > nudge)) {
				w = nudge;
				nudging = true;
			}
			r = w == -ETIMEDOUT ? w : bd_wait(t, BD_WANT_READ, w, cancel_fd);
			if (r == -ETIMEDOUT && nudging) {
				int u = bd_rx_waiting(t, true);

				if (u < 0)
					return u;
				nudge = nudge * 2 < NUDGE_MAX_MS ? nudge * 2 : NUDGE_MAX_MS;
				continue;
			}
			if (r < 0)
				return r;
			continue;
		}
		if (n < 0)
			return (int)n;
		if (n == 0)
			return -ECONNRESET;
		p += n;
		len -= (size_t)n;
		idle_since = 0;
		nudge = NUDGE_FIRST_MS;
	}
	return 0;
}

int bd_skip_full(struct bd_transport *t, size_t len, int timeout_ms, int cancel_fd)
{
	uint8_t scratch[4096];

	while (len) {
		size_t n = len < sizeof(scratch) ? len : sizeof(scratch);
		int r = bd_read_full(t, scratch, n, timeout_ms, cancel_fd);

		if (r < 0)
			return r;
		len -= n;
	}
	return 0;
}

int bd_writev_full(struct bd_transport *t, const struct iovec *iov_in, int iovcnt,
		   int timeout_ms, int cancel_fd)
{
	return bd_writev_full_by(t, iov_in, iovcnt, timeout_ms, 0, cancel_fd);
}

int bd_writev_full_by(struct bd_transport *t, const struct iovec *iov_in, int iovcnt,
		      int timeout_ms, int64_t deadline, int cancel_fd)
{
	struct iovec iov[16];
	int i, cnt = 0;

	if (iovcnt > 16)
		return -EINVAL;
	for (i = 0; i < iovcnt; i++)
		if (iov_in[i].iov_len)
			iov[cnt++] = iov_in[i];
	i = 0;
	while (i < cnt) {
		ssize_t n = bd_writev(t, iov + i, cnt - i);

		if (n == -EAGAIN) {
			int w = wait_ms(timeout_ms, deadline);
			int r = w == -ETIMEDOUT ? w : bd_wait(t, BD_WANT_WRITE, w, cancel_fd);

			if (r < 0)
				return r;
			continue;
		}
		if (n < 0)
			return (int)n;
		while (n > 0 && i < cnt) {
			if ((size_t)n >= iov[i].iov_len) {
				n -= (ssize_t)iov[i].iov_len;
				i++;
			} else {
				iov[i].iov_base = (uint8_t *)iov[i].iov_base + n;
				iov[i].iov_len -= (size_t)n;
				n = 0;
			}
		}
	}
	return 0;
}

int bd_write_full(struct bd_transport *t, const void *buf, size_t len, int timeout_ms,
		  int cancel_fd)
{
	struct iovec iov = { .iov_base = (void *)buf, .iov_len = len };

	return bd_writev_full(t, &iov, 1, timeout_ms, cancel_fd);
}
