/* SPDX-License-Identifier: BSD-3-Clause */
/* smcrbd tests: random reads and writes through the client library
 * (client/nbd-conn.c) with every byte checked, for the reconnect tests.
 *
 *   nbdc-io [options] URI
 *     -c N      connections (default 2)
 *     -t SECS   reconnect timeout (default 30)
 *     -i SECS   io timeout: no reply for this long, the connection is
 *               taken for dead (default 60)
 *     -d SECS   run time (default 10)
 *     -q N      requests in flight (default 32)
 *     -b BYTES  block size (default 65536)
 *     -n NAME   control socket name (default: none)
 *     -z        the export starts zeroed (else blocks are unknown until
 *               written)
 *     -e        errors are expected: exit 0 if some requests failed and
 *               every byte read was right; without -e any error fails
 *     -w PCT    percentage of writes (default 60); with 0 the final pass
 *               is skipped (nothing was written)
 *     -s        blocks in order (wrapping) instead of at random
 *     -S LIST   more servers of the export, HOST:PORT,... (failover)
 *     -x FILE   end the timed phase early once FILE exists (checked every
 *               second), e.g. a test's victim that runs until told
 *
 * Each block has at most one request out at a time; a write fills it with
 * a pattern of (block, generation) and a read must see the generation of
 * the last successful write (0: zeros, with -z).  A
 * failed write leaves its block unknown until the next successful one.
 * At the end every block is read once more and checked.  Prints one line
 * of counters ("result ...") and one of the timed phase's throughput
 * ("result bw MB/s X", 10^6 bytes), for the benchmark. */
#include <config.h>

#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "monotime.h"
#include "nbd-conn.h"

#define UNKNOWN UINT32_MAX

struct slot {
	struct st *st;
	uint8_t *buf;
	uint32_t block, gen;
	bool write;
	int next_free;
};

struct st {
	pthread_mutex_t m;
	pthread_cond_t cv;
	uint32_t *shadow;
	uint8_t *busy;
	uint32_t nblocks, bs;
	struct slot *slots;
	int free_head;
	unsigned inflight;
	uint32_t gen;
	uint64_t reads, writes, errors, bad, first_bad_block, bytes;
	int last_error;
};

static void pattern(uint8_t *p, uint32_t len, uint32_t block, uint32_t gen)
{
	uint64_t x = ((uint64_t)block << 32 | gen) * 0x9e3779b97f4a7c15ull + 1;
	uint32_t i;

	if (!gen) {
		memset(p, 0, len);
		return;
	}
	for (i = 0; i + 8 <= len; i += 8) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		memcpy(p + i, &x, 8);
	}
}

static void done(void *arg, int result)
{
	struct slot *s = arg;
	struct st *st = s->st;
	uint8_t *want = NULL;

	if (!result && !s->write) {
		uint32_t g = __atomic_load_n(&st->shadow[s->block], __ATOMIC_ACQUIRE);

		if (g != UNKNOWN) {
			want = malloc(st->bs);
			pattern(want, st->bs, s->block, g);
		}
	}
	pthread_mutex_lock(&st->m);
	if (result) {
		st->errors++;
		st->last_error = result;
		if (s->write)
			st->shadow[s->block] = UNKNOWN;
	} else if (s->write) {
		st->shadow[s->block] = s->gen;
		st->writes++;
		st->bytes += st->bs;
	} else {
		st->reads++;
		st->bytes += st->bs;
		if (want && memcmp(want, s->buf, st->bs)) {
			if (!st->bad)
				st->first_bad_block = s->block;
			st->bad++;
		}
	}
	st->busy[s->block] = 0;
	s->next_free = st->free_head;
	st->free_head = (int)(s - st->slots);
	st->inflight--;
	pthread_cond_broadcast(&st->cv);
	pthread_mutex_unlock(&st->m);
	free(want);
}

/* Starts one request on block b (write or read); m held on entry and
 * exit, dropped around the submission. */
static void start(struct nbdc *e, struct st *st, uint32_t b, bool write)
{
	struct slot *s = &st->slots[st->free_head];
	int r;

	st->free_head = s->next_free;
	st->busy[b] = 1;
	st->inflight++;
	s->block = b;
	s->write = write;
	if (write) {
		s->gen = ++st->gen;
		if (s->gen == UNKNOWN)
			s->gen = st->gen = 1;
	}
	pthread_mutex_unlock(&st->m);
	if (write)
		pattern(s->buf, st->bs, b, s->gen);
	r = nbdc_submit(e, write ? NBD_CMD_WRITE : NBD_CMD_READ, 0, (uint64_t)b * st->bs,
			st->bs, s->buf, done, s);
	if (r < 0) {
		done(s, r);
		usleep(10000);
	}
	pthread_mutex_lock(&st->m);
}

int main(int argc, char **argv)
{
	struct nbdc_opts o = { .connections = 2, .timeout_ms = 30000 };
	unsigned depth = 32, secs = 10, wpct = 60, i;
	const char *stop_file = NULL;
	bool expect_errors = false, zeroed = false, seq = false;
	uint32_t next_block = 0;
	int64_t t0;
	double mbps;
	struct nbdc_stats ns;
	struct st st = { .bs = 65536 };
	struct nbdc *e;
	int64_t end, next_report;
	uint64_t size;
	struct nbdc_server more[NBDC_MAX_SERVERS - 1];
	int c, r;

	while ((c = getopt(argc, argv, "c:t:i:d:q:b:n:ezw:sS:x:")) != -1) {
		switch (c) {
		case 'c': o.connections = (unsigned)atoi(optarg); break;
		case 't': o.timeout_ms = (unsigned)(atof(optarg) * 1000); break;
		case 'i': o.io_timeout_ms = (unsigned)(atof(optarg) * 1000); break;
		case 'd': secs = (unsigned)atoi(optarg); break;
		case 'q': depth = (unsigned)atoi(optarg); break;
		case 'b': st.bs = (uint32_t)atoi(optarg); break;
		case 'n': o.ctl_name = optarg; break;
		case 'e': expect_errors = true; break;
		case 'z': zeroed = true; break;
		case 'w': wpct = (unsigned)atoi(optarg); break;
		case 's': seq = true; break;
		case 'x': stop_file = optarg; break;
		case 'S':
			if (nbdc_servers_parse(optarg, NBD_DEFAULT_PORT, more, NBDC_MAX_SERVERS - 1,
					       &o.nservers) < 0) {
				fprintf(stderr, "nbdc-io: -S %s: bad server list\n", optarg);
				return 2;
			}
			o.servers = more;
			break;
		default:
			fprintf(stderr, "usage: nbdc-io [-c N] [-t SECS] [-i SECS] [-d SECS] [-q N] [-b BYTES] [-n NAME] [-e] [-z] [-w PCT] [-s] [-S LIST] [-x FILE] URI\n");
			return 2;
		}
	}
	if (optind != argc - 1 || !depth || st.bs < 8 || st.bs % 8 || wpct > 100) {
		fprintf(stderr, "nbdc-io: bad arguments\n");
		return 2;
	}
	srand((unsigned)getpid());
	r = nbdc_open_uri(argv[optind], &o, &e);
	if (r < 0) {
		fprintf(stderr, "nbdc-io: %s: %s\n", argv[optind], strerror(-r));
		return 1;
	}
	size = nbdc_size(e);
	st.nblocks = (uint32_t)(size / st.bs);
	if (st.nblocks < depth * 2) {
		fprintf(stderr, "nbdc-io: export too small\n");
		return 1;
	}
	pthread_mutex_init(&st.m, NULL);
	pthread_cond_init(&st.cv, NULL);
	st.shadow = calloc(st.nblocks, sizeof(*st.shadow));
	st.busy = calloc(st.nblocks, 1);
	if (!zeroed)
		for (i = 0; i < st.nblocks; i++)
			st.shadow[i] = UNKNOWN;
	st.slots = calloc(depth, sizeof(*st.slots));
	for (i = 0; i < depth; i++) {
		st.slots[i].st = &st;
		st.slots[i].buf = malloc(st.bs);
		st.slots[i].next_free = (int)i + 1;
	}
	st.slots[depth - 1].next_free = -1;
	st.free_head = 0;

	t0 = now_ms();
	end = t0 + (int64_t)secs * 1000;
	next_report = t0 + 1000;
	pthread_mutex_lock(&st.m);
	while (now_ms() < end) {
		uint32_t b;

		while (st.inflight >= depth)
			pthread_cond_wait(&st.cv, &st.m);
		do
			b = seq ? next_block++ % st.nblocks : (uint32_t)rand() % st.nblocks;
		while (st.busy[b]);
		start(e, &st, b, (unsigned)(rand() % 100) < wpct);
		if (now_ms() >= next_report) {
			next_report += 1000;
			nbdc_get_stats(e, &ns);
			fprintf(stderr, "nbdc-io: reads %" PRIu64 " writes %" PRIu64 " errors %" PRIu64
				" up %u reconnects %" PRIu64 " resent %" PRIu64 "\n", st.reads,
				st.writes, st.errors, ns.connections_up, ns.reconnects, ns.resent);
			if (stop_file && access(stop_file, F_OK) == 0)
				break;
		}
	}
	while (st.inflight)
		pthread_cond_wait(&st.cv, &st.m);
	mbps = (double)st.bytes / (double)(now_ms() - t0) / 1000.0;
	/* Every block once more (errors still count). */
	for (i = 0; wpct && i < st.nblocks; i++) {
		while (st.inflight >= depth)
			pthread_cond_wait(&st.cv, &st.m);
		start(e, &st, i, false);
	}
	while (st.inflight)
		pthread_cond_wait(&st.cv, &st.m);
	pthread_mutex_unlock(&st.m);

	nbdc_get_stats(e, &ns);
	printf("result reads %" PRIu64 " writes %" PRIu64 " errors %" PRIu64 " bad %" PRIu64
	       " reconnects %" PRIu64 " resent %" PRIu64 " lost %" PRIu64 " timed_out %" PRIu64
	       " reconnect_failures %" PRIu64 "\n",
	       st.reads, st.writes, st.errors, st.bad, ns.reconnects, ns.resent,
	       ns.connections_lost, ns.timed_out, ns.reconnect_failures);
	printf("result bw MB/s %.2f\n", mbps);
	if (st.bad)
		printf("first bad block %" PRIu64 "\n", st.first_bad_block);
	if (st.errors)
		printf("last error: %s\n", strerror(-st.last_error));
	nbdc_close(e);
	for (i = 0; i < depth; i++)
		free(st.slots[i].buf);
	free(st.slots);
	free(st.busy);
	free(st.shadow);
	if (st.bad)
		return 1;
	if (expect_errors)
		return st.errors ? 0 : 1;
	return st.errors ? 1 : 0;
}
