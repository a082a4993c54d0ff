/* SPDX-License-Identifier: BSD-3-Clause */
/* smcrbd fuzzing: a bd_transport over the fuzzer's input.  Reads return
 * the input from the start, a few bytes at a time when chunk is set (as a
 * real stream splits), then the end of the stream; writes are accepted and
 * dropped (counted).  Nothing ever blocks, so no wait reaches poll. */
#ifndef SMCR_FUZZ_TRANSPORT_H
#define SMCR_FUZZ_TRANSPORT_H

#include <errno.h>
#include <stdint.h>
#include <string.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "transport.h"

struct fuzz_transport {
	struct bd_transport t;
	const uint8_t *data;
	size_t len, off;
	size_t chunk;			/* 0: as much as asked */
	uint64_t written;
	int fd;				/* pollable, never used */
	int closed;
};

static ssize_t ft_readv(struct bd_transport *t, const struct iovec *iov, int n)
{
	struct fuzz_transport *f = (struct fuzz_transport *)t;
	size_t done = 0, left = f->len - f->off;
	int i;

	if (f->chunk && left > f->chunk)
		left = f->chunk;
	for (i = 0; i < n && left; i++) {
		size_t k = iov[i].iov_len < left ? iov[i].iov_len : left;

		memcpy(iov[i].iov_base, f->data + f->off, k);
		f->off += k;
		left -= k;
		done += k;
	}
	return (ssize_t)done;
}

static ssize_t ft_writev(struct bd_transport *t, const struct iovec *iov, int n)
{
	struct fuzz_transport *f = (struct fuzz_transport *)t;
	size_t done = 0;
	int i;

	for (i = 0; i < n; i++) {
		/* Touch every byte: a write of memory not ours shows here. */
		volatile uint8_t sink = 0;
		size_t k;

		for (k = 0; k < iov[i].iov_len; k++)
			sink ^= ((const uint8_t *)iov[i].iov_base)[k];
		(void)sink;
		done += iov[i].iov_len;
	}
	f->written += done;
	return done ? (ssize_t)done : -EAGAIN;
}

static int ft_poll_fd(struct bd_transport *t)
{
	return ((struct fuzz_transport *)t)->fd;
}

static short ft_poll_events(struct bd_transport *t, unsigned want)
{
	(void)t;
	return (short)(((want & BD_WANT_READ) ? POLLIN : 0) |
		       ((want & BD_WANT_WRITE) ? POLLOUT : 0));
}

static void ft_close(struct bd_transport *t)
{
	((struct fuzz_transport *)t)->closed = 1;
}

static const struct bd_transport_ops fuzz_transport_ops = {
	.name = "fuzz",
	.readv = ft_readv,
	.writev = ft_writev,
	.poll_fd = ft_poll_fd,
	.poll_events = ft_poll_events,
	.close = ft_close,
};

/* An eventfd that is always writable and never readable: a wait on it for
 * reading would time out, which the targets never let happen. */
static inline void fuzz_transport_init(struct fuzz_transport *f, const uint8_t *data,
				       size_t len, size_t chunk)
{
	static int fd = -1;

	if (fd < 0)
		fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	memset(f, 0, sizeof(*f));
	f->t.ops = &fuzz_transport_ops;
	memcpy(f->t.peer, "fuzz", 5);
	f->data = data;
	f->len = len;
	f->chunk = chunk;
	f->fd = fd;
}

#endif
