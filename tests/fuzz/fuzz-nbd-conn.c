/* SPDX-License-Identifier: BSD-3-Clause */
/* smcrbd: libFuzzer target for the reply parser of the NBD clients the
 * nbdkit plugin and smcr-fuse run on (client/nbd-conn-rx.c: rx_step, simple
 * replies and structured chunks, offsets, holes, errors, block status
 * descriptors), with requests
 * in flight as a connection thread would have them.  The engine's private
 * header (nbd-conn-int.h) gives its connection state; the input is the
 * server's stream after the handshake.  First byte: structured replies,
 * which requests are out, how the stream is split. */
#include <config.h>

#include <stdio.h>
#include <stdlib.h>

#include "nbd-conn-int.h"

#include "fuzz.h"
#include "fuzz-transport.h"

static struct nbdc e;
static unsigned completed;

static void done_cb(void *arg, int result)
{
	(void)arg;
	FUZZ_REQUIRE(result <= 0);
	completed++;
}

static uint8_t bufs[4][8192];
static struct nbd_extent ext[4];
static struct nbdc_extents xbuf = { .ext = ext, .max = 4 };

static const struct {
	uint16_t type;
	uint32_t len;
	uint64_t offset;
} reqs[] = {
	{ NBD_CMD_READ, 4096, 0 }, { NBD_CMD_WRITE, 4096, 4096 },
	{ NBD_CMD_READ, 1024, 512 }, { NBD_CMD_FLUSH, 0, 0 },
	{ NBD_CMD_TRIM, 8192, 0 }, { NBD_CMD_READ, 8192, 1 << 20 },
	{ NBD_CMD_WRITE_ZEROES, 4096, 0 }, { NBD_CMD_READ, 1, 7 },
	{ NBD_CMD_BLOCK_STATUS, 1 << 20, 4096 },
};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static int once;
	struct nbdc_conn *c = &e.conns[0];
	struct fuzz_transport ft;
	struct nbdc_req *r;
	unsigned i, n = 0, rounds;
	uint8_t mode;
	int ret = 0;

	if (!once++) {
		fuzz_quiet_log();
		c->e = &e;
		c->slots = calloc(NBDC_SLOTS, sizeof(*c->slots));
		c->free_slots = calloc(NBDC_SLOTS, sizeof(*c->free_slots));
		c->rx.rbuf = malloc(NBDC_RBUF);
		FUZZ_REQUIRE(c->slots && c->free_slots && c->rx.rbuf);
	}
	if (size < 1)
		return 0;
	mode = data[0];
	fuzz_transport_init(&ft, data + 1, size - 1, (mode >> 5) * 3);
	c->t = &ft.t;
	c->structured = mode & 1;
	/* base:allocation (ID 1) goes with structured replies. */
	c->meta_alloc = c->structured;
	c->meta_id = 1;
	xbuf.n = 0;
	c->shut = false;
	c->gen = 0;
	c->txq = (struct rq){ 0 };
	nbdc_slots_reset(c);
	nbdc_rx_reset(&c->rx);
	completed = 0;
	/* Requests out, as the sending side leaves them (tx_fill). */
	for (i = 0; i < sizeof(reqs) / sizeof(reqs[0]); i++) {
		if (i && !(mode & (1u << (i % 4 + 1))))
			continue;
		r = calloc(1, sizeof(*r));
		FUZZ_REQUIRE(r);
		r->type = reqs[i].type;
		r->len = reqs[i].len;
		r->offset = reqs[i].offset;
		r->buf = r->type == NBD_CMD_READ || r->type == NBD_CMD_WRITE ? bufs[i % 4] : NULL;
		if (r->type == NBD_CMD_BLOCK_STATUS)
			r->buf = &xbuf;
		r->done = done_cb;
		r->slot = c->free_slots[--c->nfree];
		c->slots[r->slot] = r;
		c->inflight++;
		c->gen++;
		r->cookie = (c->gen << 16) | (uint64_t)r->slot;
		r->sent = REQ_HDR + (r->type == NBD_CMD_WRITE ? r->len : 0);
		c->load++;
		e.st_inflight++;
		n++;
	}
	for (rounds = 0; rounds < 1000 && ret == 0; rounds++) {
		bool progress = false;

		ret = nbdc_rx(c, &progress);
		if (!ret && !progress)
			break;
	}
	FUZZ_REQUIRE(ret < 0);	/* the stream ends: never "would block" */
	if (getenv("FUZZ_LOG"))
		fprintf(stderr, "%u requests, %u completed, %u out, %u queued, %d\n",
			n, completed, c->inflight, c->txq.n, ret);
	/* Every request completed, or still out, or back in the queue for
	 * another connection (NBD_ESHUTDOWN). */
	FUZZ_REQUIRE(completed + c->inflight + c->txq.n == n);
	/* Descriptors kept: within the room and the length asked for. */
	{
		uint64_t sum = 0;

		FUZZ_REQUIRE(xbuf.n <= xbuf.max);
		for (i = 0; i < xbuf.n; i++) {
			FUZZ_REQUIRE(ext[i].length);
			sum += ext[i].length;
		}
		FUZZ_REQUIRE(sum <= 1 << 20);
	}
	for (i = 0; i < NBDC_SLOTS; i++)
		if (c->slots[i])
			free(c->slots[i]);
	while ((r = rq_pop(&c->txq)))
		free(r);
	c->load = 0;
	e.st_inflight = 0;
	return 0;
}
