/* SPDX-License-Identifier: BSD-3-Clause */
/* smcrbd: unit tests for smcrd (server/libsmcrd): its io_uring engine
 * against blockdev's client, config, settings table, extents; blockdev
 * itself: test-blockdev.c. */
#include <config.h>

#include <arpa/inet.h>
#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdarg.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "unit.h"
#include "lograte.h"
#include "bd-unit.h"
#include "smcr.h"
#include "smcrd-conf.h"
#include "smcrd-engine.h"
#include "smcrd-export.h"
#include "smcrd-extents.h"
#include "nbd-client.h"
#include "nbd-probe-lib.h"
#include "nbd-server.h"
#include "nbd-wire.h"
#include "transport.h"
#include "monotime.h"

/* --- engine: smcrd's io_uring loop against our client ------------------------ */

struct engine_env {
	char dir[64];
	char path[96];
	struct export *exp;
	struct engine *e;
	int closed;
	pthread_mutex_t lock;
	pthread_cond_t cond;
};

static void env_closed(void *arg, void *owner)
{
	struct engine_env *env = arg;

	pthread_mutex_lock(&env->lock);
	env->closed++;
	pthread_cond_broadcast(&env->cond);
	pthread_mutex_unlock(&env->lock);
}

static int env_setup_mem(struct engine_env *env, uint64_t size, bool ro, uint32_t bs,
			 uint64_t max_memory)
{
	struct engine_params ep = {
		.threads = 2, .queue_depth = 16, .max_memory = max_memory,
		.drain_timeout_ms = 20000, .drain_idle_ms = 10000, .fixed_buffers = true,
		.closed = env_closed, .closed_arg = env,
	};
	struct export_spec spec = { .name = (char *)"t", .direct = -1, .block_size = bs,
				    .read_only = ro };
	int fd;

	memset(env, 0, sizeof(*env));
	pthread_mutex_init(&env->lock, NULL);
	pthread_cond_init(&env->cond, NULL);
	snprintf(env->dir, sizeof(env->dir), "%s/smcrbd-unit.XXXXXX",
		 getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
	if (!mkdtemp(env->dir))
		return -errno;
	snprintf(env->path, sizeof(env->path), "%s/disk", env->dir);
	fd = open(env->path, O_RDWR | O_CREAT | O_TRUNC, 0600);
	if (fd < 0 || ftruncate(fd, (off_t)size) < 0)
		return -errno;
	close(fd);
	spec.path = env->path;
	if (export_open(&spec, false, NULL, &env->exp) < 0)
		return -1;
	return engine_start(&ep, &env->e);
}

static int env_setup(struct engine_env *env, uint64_t size, bool ro, uint32_t bs)
{
	return env_setup_mem(env, size, ro, bs, 256u << 20);
}

static void env_teardown(struct engine_env *env)
{
	engine_drain(env->e);
	engine_stop(env->e);
	export_put(env->exp);
	unlink(env->path);
	rmdir(env->dir);
	pthread_cond_destroy(&env->cond);
	pthread_mutex_destroy(&env->lock);
}

static void env_wait_closed(struct engine_env *env, int n)
{
	pthread_mutex_lock(&env->lock);
	while (env->closed < n)
		pthread_cond_wait(&env->cond, &env->lock);
	pthread_mutex_unlock(&env->lock);
}

/* Builds a client whose transport is connected to the engine, by running
 * a real handshake against a one-export server thread that then hands the
 * connection to the engine. */
struct hand {
	struct engine_env *env;
	struct bd_transport *t;
	int result;
};

static int env_lookup(void *ctx, const char *name, struct nbd_server_export *out,
		      void **handle)
{
	struct hand *h = ctx;
	struct export *e = h->env->exp;

	if (*name && strcmp(name, e->spec.name))
		return -ENOENT;
	out->name = e->spec.name;
	out->description = NULL;
	out->size = e->size;
	out->tflags = e->tflags;
	out->min_block = e->min_block;
	out->pref_block = e->pref_block;
	out->max_payload = NBD_MAX_PAYLOAD;
	*handle = export_get(e);
	return 0;
}

static void env_release(void *ctx, void *handle)
{
	export_put(handle);
}

static int env_list(void *ctx, int (*cb)(void *, const char *, const char *), void *arg)
{
	return cb(arg, ((struct hand *)ctx)->env->exp->spec.name, NULL);
}

static bool env_shutting_down(void *ctx)
{
	return false;
}

static const struct nbd_server_ops env_ops = {
	.lookup = env_lookup, .release = env_release, .list = env_list,
	.shutting_down = env_shutting_down,
};

static void *hand_main(void *arg)
{
	struct hand *h = arg;
	struct nbd_handshake_limits lim = { .timeout_ms = 5000, .cancel_fd = -1,
					    .max_options = 32 };
	struct nbd_server_session sess;

	h->result = nbd_server_handshake(h->t, &env_ops, h, &lim, &sess);
	if (h->result == 0)
		h->result = engine_add(h->env->e, h->t, sess.handle, &sess, NULL);
	else
		bd_close(h->t);
	return NULL;
}

static struct nbdp *connect_engine(struct engine_env *env, bool structured)
{
	struct hand h = { .env = env };
	struct bd_transport *ct;
	struct nbd_client *c = NULL;
	struct nbdp *p = NULL;
	pthread_t th;

	pair(&ct, &h.t);
	CU_ASSERT_FATAL(pthread_create(&th, NULL, hand_main, &h) == 0);
	CU_ASSERT_FATAL(nbd_client_open(ct, 10000, &c) == 0);
	if (structured)
		CU_ASSERT_EQUAL(nbd_client_structured(c), 0);
	CU_ASSERT_EQUAL(nbd_client_go(c, "t", NULL), 0);
	CU_ASSERT_FATAL(nbdp_start(c, 10000, NULL, &p) == 0);
	pthread_join(th, NULL);
	CU_ASSERT_EQUAL(h.result, 0);
	return p;
}

static void fill(uint8_t *p, size_t n, unsigned seed)
{
	size_t i;

	for (i = 0; i < n; i++)
		p[i] = (uint8_t)((i * 131 + seed * 7 + (i >> 9)) & 0xff);
}

static void test_engine_rw(void)
{
	struct engine_env env;
	struct nbdp *c;
	uint8_t *wbuf = malloc(1 << 20), *rbuf = malloc(1 << 20);
	int mode;

	CU_ASSERT_FATAL(wbuf && rbuf);
	CU_ASSERT_FATAL(env_setup(&env, 8 << 20, false, 0) == 0);
	for (mode = 0; mode < 2; mode++) {
		bool structured = mode == 1;

		c = connect_engine(&env, structured);
		CU_ASSERT_FATAL(c != NULL);
		fill(wbuf, 1 << 20, (unsigned)mode);
		CU_ASSERT_EQUAL(nbdp_pwrite(c, wbuf, 1 << 20, 1 << 20, 0), 0);
		CU_ASSERT_EQUAL(nbdp_pwrite(c, wbuf, 4096, 0, NBD_CMD_FLAG_FUA), 0);
		CU_ASSERT_EQUAL(nbdp_cmd(c, NBD_CMD_FLUSH, 0, 0, 0, NULL), 0);
		memset(rbuf, 0, 1 << 20);
		CU_ASSERT_EQUAL(nbdp_pread(c, rbuf, 1 << 20, 1 << 20, 0), 0);
		CU_ASSERT_EQUAL(memcmp(rbuf, wbuf, 1 << 20), 0);
		CU_ASSERT_EQUAL(nbdp_pread(c, rbuf, 4096, 0, 0), 0);
		CU_ASSERT_EQUAL(memcmp(rbuf, wbuf, 4096), 0);
		/* Odd sizes and offsets (min block 1). */
		CU_ASSERT_EQUAL(nbdp_pwrite(c, wbuf + 3, 777, 12345, 0), 0);
		CU_ASSERT_EQUAL(nbdp_pread(c, rbuf, 777, 12345, 0), 0);
		CU_ASSERT_EQUAL(memcmp(rbuf, wbuf + 3, 777), 0);
		/* Zero-length read and write. */
		CU_ASSERT_EQUAL(nbdp_pread(c, rbuf, 0, 0, 0), 0);
		CU_ASSERT_EQUAL(nbdp_pwrite(c, wbuf, 0, 0, 0), 0);
		/* Write zeroes (punch, then provisioned) and trim. */
		CU_ASSERT_EQUAL(nbdp_cmd(c, NBD_CMD_WRITE_ZEROES, 0, 1 << 20, 65536, NULL), 0);
		CU_ASSERT_EQUAL(nbdp_cmd(c, NBD_CMD_WRITE_ZEROES,
					 NBD_CMD_FLAG_NO_HOLE | NBD_CMD_FLAG_FUA,
					 (1 << 20) + 65536, 4096, NULL), 0);
		CU_ASSERT_EQUAL(nbdp_pread(c, rbuf, 65536 + 8192, 1 << 20, 0), 0);
		{
			static const uint8_t zero[65536 + 4096];

			CU_ASSERT_EQUAL(memcmp(rbuf, zero, sizeof(zero)), 0);
		}
		CU_ASSERT_EQUAL(memcmp(rbuf + 65536 + 4096, wbuf + 65536 + 4096, 4096), 0);
		CU_ASSERT_EQUAL(nbdp_cmd(c, NBD_CMD_TRIM, 0, 2 << 20, 8192, NULL), 0);
		CU_ASSERT_EQUAL(nbdp_cmd(c, NBD_CMD_CACHE, 0, 0, 8192, NULL), 0);
		CU_ASSERT_EQUAL(nbdp_disconnect(c), 0);
		env_wait_closed(&env, mode + 1);
		nbdp_close(c);
	}
	env_teardown(&env);
	free(wbuf);
	free(rbuf);
}

/* A worker's only connection writes large WRITEs itself, but only those
 * whose payload it holds whole: one over WRITE_CHUNK (1 MiB) comes in
 * chunks, and its buffer holds the last chunk only when the request
 * starts. */
static void test_engine_alone_large_write(void)
{
	const size_t len = (3u << 20) + 4097, small = 512u << 10;
	struct engine_env env;
	struct engine_stats st;
	struct nbdp *c;
	uint8_t *wbuf = malloc(len), *rbuf = malloc(len);
	uint64_t before;

	CU_ASSERT_FATAL(wbuf && rbuf);
	CU_ASSERT_FATAL(env_setup(&env, 8 << 20, false, 0) == 0);
	c = connect_engine(&env, true);
	CU_ASSERT_FATAL(c != NULL);
	fill(wbuf, len, 5);
	CU_ASSERT_EQUAL(nbdp_pwrite(c, wbuf, len, 8192, 0), 0);
	memset(rbuf, 0, len);
	CU_ASSERT_EQUAL(nbdp_pread(c, rbuf, len, 8192, 0), 0);
	CU_ASSERT_EQUAL(memcmp(rbuf, wbuf, len), 0);
	/* Half a MiB, whole in one buffer: written inline. */
	engine_get_stats(env.e, &st);
	before = st.inline_writes;
	fill(wbuf, small, 6);
	CU_ASSERT_EQUAL(nbdp_pwrite(c, wbuf, small, 4096, 0), 0);
	engine_get_stats(env.e, &st);
	CU_ASSERT_EQUAL(st.inline_writes, before + 1);
	CU_ASSERT_EQUAL(nbdp_pread(c, rbuf, small, 4096, 0), 0);
	CU_ASSERT_EQUAL(memcmp(rbuf, wbuf, small), 0);
	CU_ASSERT_EQUAL(nbdp_disconnect(c), 0);
	env_wait_closed(&env, 1);
	nbdp_close(c);
	env_teardown(&env);
	free(wbuf);
	free(rbuf);
}

static void test_engine_errors(void)
{
	struct engine_env env;
	struct nbdp *c;
	uint8_t buf[8192];
	uint64_t cookie, off;
	int r, res;

	memset(buf, 0, sizeof(buf));
	CU_ASSERT_FATAL(env_setup(&env, 1 << 20, false, 512) == 0);
	c = connect_engine(&env, true);
	CU_ASSERT_FATAL(c != NULL);
	/* Past the end: EINVAL, and the connection still works. */
	CU_ASSERT_EQUAL(nbdp_pread(c, buf, 4096, (1 << 20) - 512, 0), -EINVAL);
	CU_ASSERT_EQUAL(nbdp_pwrite(c, buf, 4096, (1 << 20) - 512, 0), -ENOSPC);
	CU_ASSERT_EQUAL(nbdp_pread(c, buf, 512, 0, 0), 0);
	/* Misaligned for the 512-byte minimum block. */
	CU_ASSERT_EQUAL(nbdp_pread(c, buf, 100, 0, 0), -EINVAL);
	CU_ASSERT_EQUAL(nbdp_pwrite(c, buf, 512, 100, 0), -EINVAL);
	/* Unknown command, bad flags. */
	r = nbdp_submit(c, 77, 0, 0, 0, NULL, &cookie);
	CU_ASSERT_EQUAL(r, 0);
	CU_ASSERT_EQUAL(nbdp_wait_cookie(c, cookie, &res, &off), 0);
	CU_ASSERT_EQUAL(res, -EINVAL);
	CU_ASSERT_EQUAL(nbdp_pread(c, buf, 512, 0, NBD_CMD_FLAG_NO_HOLE), -EINVAL);
	CU_ASSERT_EQUAL(nbdp_cmd(c, NBD_CMD_FLUSH, 0, 0, 0, NULL), 0);
	/* Still fine after all that. */
	memset(buf, 0xa5, sizeof(buf));
	CU_ASSERT_EQUAL(nbdp_pwrite(c, buf, sizeof(buf), 4096, 0), 0);
	memset(buf, 0, sizeof(buf));
	CU_ASSERT_EQUAL(nbdp_pread(c, buf, sizeof(buf), 4096, 0), 0);
	CU_ASSERT_EQUAL(buf[0], 0xa5);
	CU_ASSERT_EQUAL(buf[sizeof(buf) - 1], 0xa5);
	nbdp_disconnect(c);
	env_wait_closed(&env, 1);
	nbdp_close(c);

	/* Garbage in the transmission phase: only that client is dropped. */
	c = connect_engine(&env, false);
	CU_ASSERT_FATAL(c != NULL);
	{
		struct nbdp *good = connect_engine(&env, false);
		struct bd_transport *t = nbdp_transport(c);
		char junk[64];

		memset(junk, 'Z', sizeof(junk));
		CU_ASSERT_EQUAL(bd_write_full(t, junk, sizeof(junk), 5000, -1), 0);
		env_wait_closed(&env, 2);
		CU_ASSERT_EQUAL(bd_read_full(t, junk, 1, 5000, -1), -ECONNRESET);
		CU_ASSERT_EQUAL(nbdp_pread(good, buf, 512, 0, 0), 0);
		nbdp_disconnect(good);
		env_wait_closed(&env, 3);
		nbdp_close(good);
	}
	nbdp_close(c);
	env_teardown(&env);
}

static void test_engine_readonly(void)
{
	struct engine_env env;
	struct nbdp *c;
	uint8_t buf[4096] = { 0 };

	CU_ASSERT_FATAL(env_setup(&env, 1 << 20, true, 0) == 0);
	c = connect_engine(&env, false);
	CU_ASSERT_FATAL(c != NULL);
	CU_ASSERT_EQUAL(nbdp_pwrite(c, buf, sizeof(buf), 0, 0), -EPERM);
	CU_ASSERT_EQUAL(nbdp_cmd(c, NBD_CMD_TRIM, 0, 0, 4096, NULL), -EPERM);
	CU_ASSERT_EQUAL(nbdp_cmd(c, NBD_CMD_WRITE_ZEROES, 0, 0, 4096, NULL), -EPERM);
	CU_ASSERT_EQUAL(nbdp_pread(c, buf, sizeof(buf), 0, 0), 0);
	nbdp_disconnect(c);
	env_wait_closed(&env, 1);
	nbdp_close(c);
	env_teardown(&env);
}

/* Many requests in flight; replies may come in any order. */
static void test_engine_pipeline(void)
{
	enum { N = 64, LEN = 65536 };
	struct engine_env env;
	struct nbdp *c;
	uint8_t *wbuf = malloc((size_t)N * LEN), *rbuf = calloc(N, LEN);
	uint64_t cookies[N];
	int i, done, res;

	CU_ASSERT_FATAL(wbuf && rbuf);
	CU_ASSERT_FATAL(env_setup(&env, (uint64_t)N * LEN, false, 0) == 0);
	c = connect_engine(&env, true);
	CU_ASSERT_FATAL(c != NULL);
	fill(wbuf, (size_t)N * LEN, 9);
	for (i = 0; i < N; i++)
		CU_ASSERT_EQUAL(nbdp_submit(c, NBD_CMD_WRITE, 0, (uint64_t)i * LEN, LEN,
						  wbuf + (size_t)i * LEN, &cookies[i]), 0);
	CU_ASSERT_EQUAL(nbdp_inflight(c), N);
	for (done = 0; done < N; done++) {
		uint64_t ck;

		CU_ASSERT_EQUAL(nbdp_wait(c, &ck, &res, NULL), 0);
		CU_ASSERT_EQUAL(res, 0);
	}
	for (i = 0; i < N; i++)
		CU_ASSERT_EQUAL(nbdp_submit(c, NBD_CMD_READ, 0, (uint64_t)i * LEN, LEN,
						  rbuf + (size_t)i * LEN, &cookies[i]), 0);
	/* Collect in reverse order of submission. */
	for (i = N - 1; i >= 0; i--) {
		CU_ASSERT_EQUAL(nbdp_wait_cookie(c, cookies[i], &res, NULL), 0);
		CU_ASSERT_EQUAL(res, 0);
	}
	CU_ASSERT_EQUAL(memcmp(wbuf, rbuf, (size_t)N * LEN), 0);
	nbdp_disconnect(c);
	env_wait_closed(&env, 1);
	nbdp_close(c);
	env_teardown(&env);
	free(wbuf);
	free(rbuf);
}

/* A tiny memory budget: requests wait for buffers instead of failing,
 * and a request larger than the whole budget still runs alone. */
static void test_engine_memory_limit(void)
{
	enum { N = 32, LEN = 65536 };
	struct engine_env env;
	struct nbdp *c;
	uint8_t *wbuf = malloc((size_t)N * LEN), *rbuf = calloc(N, LEN);
	uint8_t *big = malloc(1 << 20), *bigr = malloc(1 << 20);
	uint64_t ck;
	int i, res;

	CU_ASSERT_FATAL(wbuf && rbuf && big && bigr);
	/* 512 KiB over two workers: 256 KiB each, 64 KiB per connection. */
	CU_ASSERT_FATAL(env_setup_mem(&env, 4u << 20, false, 0, 512u << 10) == 0);
	c = connect_engine(&env, false);
	CU_ASSERT_FATAL(c != NULL);
	fill(wbuf, (size_t)N * LEN, 3);
	for (i = 0; i < N; i++)
		CU_ASSERT_EQUAL(nbdp_submit(c, NBD_CMD_WRITE, 0, (uint64_t)i * LEN, LEN,
						  wbuf + (size_t)i * LEN, NULL), 0);
	for (i = 0; i < N; i++) {
		CU_ASSERT_EQUAL(nbdp_wait(c, &ck, &res, NULL), 0);
		CU_ASSERT_EQUAL(res, 0);
	}
	/* Reads of uncached data would take buffers too; these may go out by
	 * sendfile: either way they must all come back right. */
	for (i = 0; i < N; i++)
		CU_ASSERT_EQUAL(nbdp_submit(c, NBD_CMD_READ, 0, (uint64_t)i * LEN, LEN,
						  rbuf + (size_t)i * LEN, NULL), 0);
	for (i = 0; i < N; i++) {
		CU_ASSERT_EQUAL(nbdp_wait(c, &ck, &res, NULL), 0);
		CU_ASSERT_EQUAL(res, 0);
	}
	CU_ASSERT_EQUAL(memcmp(wbuf, rbuf, (size_t)N * LEN), 0);
	fill(big, 1 << 20, 4);
	CU_ASSERT_EQUAL(nbdp_pwrite(c, big, 1 << 20, 2u << 20, 0), 0);
	CU_ASSERT_EQUAL(nbdp_pread(c, bigr, 1 << 20, 2u << 20, 0), 0);
	CU_ASSERT_EQUAL(memcmp(big, bigr, 1 << 20), 0);
	nbdp_disconnect(c);
	env_wait_closed(&env, 1);
	nbdp_close(c);
	env_teardown(&env);
	free(wbuf);
	free(rbuf);
	free(big);
	free(bigr);
}

/* Requests sent together with NBD_CMD_DISC are all answered first. */
static void test_engine_disc_drains(void)
{
	enum { N = 16 };
	struct engine_env env;
	struct nbdp *c;
	uint8_t *buf = malloc(N * 4096);
	uint64_t ck;
	int i, res;

	CU_ASSERT_FATAL(buf != NULL);
	CU_ASSERT_FATAL(env_setup(&env, 1 << 20, false, 0) == 0);
	c = connect_engine(&env, false);
	CU_ASSERT_FATAL(c != NULL);
	memset(buf, 0x3c, N * 4096);
	for (i = 0; i < N; i++)
		CU_ASSERT_EQUAL(nbdp_submit(c, NBD_CMD_WRITE, 0, (uint64_t)i * 4096, 4096,
						  buf + i * 4096, NULL), 0);
	CU_ASSERT_EQUAL(nbdp_submit(c, NBD_CMD_DISC, 0, 0, 0, NULL, NULL), 0);
	for (i = 0; i < N; i++) {
		CU_ASSERT_EQUAL(nbdp_wait(c, &ck, &res, NULL), 0);
		CU_ASSERT_EQUAL(res, 0);
	}
	env_wait_closed(&env, 1);
	nbdp_close(c);
	env_teardown(&env);
	free(buf);
}

/* Draining: requests in flight are answered, later ones get ESHUTDOWN. */
static void test_engine_drain(void)
{
	struct engine_env env;
	struct nbdp *c;
	uint8_t buf[4096];
	uint64_t ck;
	int res;

	memset(buf, 0x77, sizeof(buf));
	CU_ASSERT_FATAL(env_setup(&env, 1 << 20, false, 0) == 0);
	c = connect_engine(&env, true);
	CU_ASSERT_FATAL(c != NULL);
	CU_ASSERT_EQUAL(nbdp_pwrite(c, buf, sizeof(buf), 0, 0), 0);
	engine_drain(env.e);
	/* New connections are refused now. */
	{
		struct nbd_server_session sess;
		struct bd_transport *a, *b;

		memset(&sess, 0, sizeof(sess));
		pair(&a, &b);
		CU_ASSERT_EQUAL(engine_add(env.e, b, export_get(env.exp), &sess, NULL), -ESHUTDOWN);
		bd_close(a);
	}
	CU_ASSERT_EQUAL(nbdp_pwrite(c, buf, sizeof(buf), 4096, 0), -ESHUTDOWN);
	CU_ASSERT_EQUAL(nbdp_pread(c, buf, sizeof(buf), 0, 0), -ESHUTDOWN);
	CU_ASSERT_EQUAL(nbdp_submit(c, NBD_CMD_FLUSH, 0, 0, 0, NULL, &ck), 0);
	CU_ASSERT_EQUAL(nbdp_wait_cookie(c, ck, &res, NULL), 0);
	CU_ASSERT_EQUAL(res, -ESHUTDOWN);
	nbdp_disconnect(c);
	env_wait_closed(&env, 1);
	nbdp_close(c);
	env_teardown(&env);
}

/* --- a transport with rx_peek: a fixed ring like an SMC-R RMBE -------------
 * Bytes are pulled from a socket into a small ring and handed out in
 * place (two pieces when it wraps); consumed bytes are overwritten with
 * 0xEE at once, so data used after it was given back shows up as
 * corruption. */
struct ring_t {
	struct bd_transport base;
	int fd;
	uint8_t *ring;
	size_t size;
	uint64_t head, tail;		/* consumed, filled (stream offsets) */
	bool eof;
	uint64_t peeks, wraps;
	/* Send side with tx_reserve/tx_commit (NULL tx: none): reserved
	 * bytes are poisoned with 0xDD, so a reply sent before it was filled
	 * shows up as corruption; writev refuses while any is reserved. */
	uint8_t *tx;
	size_t tx_size;
	uint64_t txh, txc, txr;		/* sent, committed, reserved (offsets) */
	uint64_t reserves, tx_wraps;
};

static struct ring_t *ring_of(struct bd_transport *t)
{
	return (struct ring_t *)t;
}

static int ring_fill(struct ring_t *r)
{
	while (r->tail - r->head < r->size && !r->eof) {
		size_t pos = r->tail % r->size, room = r->size - (r->tail - r->head);
		size_t n = r->size - pos < room ? r->size - pos : room;
		ssize_t k = recv(r->fd, r->ring + pos, n, MSG_DONTWAIT);

		if (k > 0)
			r->tail += (uint64_t)k;
		else if (k == 0)
			r->eof = true;
		else if (errno == EAGAIN || errno == EWOULDBLOCK)
			break;
		else if (errno != EINTR)
			return -errno;
	}
	return 0;
}

static ssize_t ring_peek(struct bd_transport *t, struct iovec iov[2])
{
	struct ring_t *r = ring_of(t);
	size_t avail, pos, n0;
	int e = ring_fill(r);

	if (e < 0)
		return e;
	avail = r->tail - r->head;
	if (!avail)
		return r->eof ? 0 : -EAGAIN;
	pos = r->head % r->size;
	n0 = avail < r->size - pos ? avail : r->size - pos;
	iov[0].iov_base = r->ring + pos;
	iov[0].iov_len = n0;
	iov[1].iov_base = r->ring;
	iov[1].iov_len = avail - n0;
	r->peeks++;
	if (iov[1].iov_len)
		r->wraps++;
	return (ssize_t)avail;
}

static int ring_consume(struct bd_transport *t, size_t len)
{
	struct ring_t *r = ring_of(t);
	size_t i;

	if (len > r->tail - r->head)
		return -EINVAL;
	for (i = 0; i < len; i++)
		r->ring[(r->head + i) % r->size] = 0xee;
	r->head += len;
	return 0;
}

static ssize_t ring_readv(struct bd_transport *t, const struct iovec *iov, int cnt)
{
	struct iovec w[2];
	ssize_t n = ring_peek(t, w);
	size_t done = 0, wi = 0, woff = 0;
	int i;

	if (n <= 0)
		return n;
	for (i = 0; i < cnt && done < (size_t)n; i++) {
		size_t ioff = 0;

		while (ioff < iov[i].iov_len && done < (size_t)n) {
			size_t k = iov[i].iov_len - ioff;

			if (woff == w[wi].iov_len) {
				wi++;
				woff = 0;
			}
			if (k > w[wi].iov_len - woff)
				k = w[wi].iov_len - woff;
			memcpy((uint8_t *)iov[i].iov_base + ioff, (uint8_t *)w[wi].iov_base + woff, k);
			ioff += k;
			woff += k;
			done += k;
		}
	}
	ring_consume(t, done);
	return (ssize_t)done;
}

/* Sends committed bytes; block: until all went. */
static int ring_tx_drain(struct ring_t *r, bool block)
{
	while (r->txh < r->txc) {
		size_t pos = r->txh % r->tx_size, n = r->tx_size - pos;
		ssize_t k;

		if (n > r->txc - r->txh)
			n = r->txc - r->txh;
		k = send(r->fd, r->tx + pos, n, MSG_NOSIGNAL | (block ? 0 : MSG_DONTWAIT));
		if (k > 0)
			r->txh += (uint64_t)k;
		else if (k < 0 && (errno == EAGAIN || errno == EWOULDBLOCK) && !block)
			return -EAGAIN;
		else if (k < 0 && errno != EINTR)
			return -errno;
	}
	return 0;
}

static int ring_tx_reserve(struct bd_transport *t, size_t len, struct iovec iov[2])
{
	struct ring_t *r = ring_of(t);
	size_t pos, n0;

	if (len > r->tx_size - 4)
		return -EMSGSIZE;
	if (r->txr - r->txh + len > r->tx_size) {
		ring_tx_drain(r, false);
		if (r->txr - r->txh + len > r->tx_size)
			return -EAGAIN;
	}
	pos = r->txr % r->tx_size;
	n0 = len < r->tx_size - pos ? len : r->tx_size - pos;
	iov[0].iov_base = r->tx + pos;
	iov[0].iov_len = n0;
	iov[1].iov_base = r->tx;
	iov[1].iov_len = len - n0;
	memset(iov[0].iov_base, 0xdd, iov[0].iov_len);
	memset(iov[1].iov_base, 0xdd, iov[1].iov_len);
	r->txr += len;
	r->reserves++;
	if (iov[1].iov_len)
		r->tx_wraps++;
	return 0;
}

static int ring_tx_commit(struct bd_transport *t, size_t len)
{
	struct ring_t *r = ring_of(t);

	if (r->txc + len > r->txr)
		return -EINVAL;
	r->txc += len;
	return ring_tx_drain(r, true);
}

static ssize_t ring_writev(struct bd_transport *t, const struct iovec *iov, int cnt)
{
	struct msghdr m = { .msg_iov = (struct iovec *)iov, .msg_iovlen = (size_t)cnt };
	struct ring_t *r = ring_of(t);
	ssize_t n;

	if (r->txr != r->txc)
		return -EINVAL;		/* would pass a reservation */
	if (r->tx && (n = ring_tx_drain(r, false)) < 0)
		return n;
	n = sendmsg(r->fd, &m, MSG_NOSIGNAL | MSG_DONTWAIT);
	if (n < 0)
		return errno == EWOULDBLOCK ? -EAGAIN : -errno;
	return n;
}

static int ring_poll_fd(struct bd_transport *t)
{
	return ring_of(t)->fd;
}

static short ring_poll_events(struct bd_transport *t, unsigned want)
{
	return (short)(((want & BD_WANT_READ) ? POLLIN : 0) |
		       ((want & BD_WANT_WRITE) ? POLLOUT : 0));
}

/* Statistics of the last ring closed (the engine frees the transport). */
static uint64_t closed_ring_wraps, closed_ring_reserves, closed_ring_tx_wraps;

static void ring_close(struct bd_transport *t)
{
	struct ring_t *r = ring_of(t);

	closed_ring_wraps = r->wraps;
	closed_ring_reserves = r->reserves;
	closed_ring_tx_wraps = r->tx_wraps;
	close(r->fd);
	free(r->ring);
	free(r->tx);
	free(r);
}

static const struct bd_transport_ops ring_ops = {
	.name = "test-ring",
	.readv = ring_readv,
	.writev = ring_writev,
	.poll_fd = ring_poll_fd,
	.poll_events = ring_poll_events,
	.close = ring_close,
	.rx_peek = ring_peek,
	.rx_consume = ring_consume,
};

static const struct bd_transport_ops ring_tx_ops = {
	.name = "test-ring-tx",
	.readv = ring_readv,
	.writev = ring_writev,
	.poll_fd = ring_poll_fd,
	.poll_events = ring_poll_events,
	.close = ring_close,
	.rx_peek = ring_peek,
	.rx_consume = ring_consume,
	.tx_reserve = ring_tx_reserve,
	.tx_commit = ring_tx_commit,
};

/* Set: connect_engine_ring_tx negotiates extended headers too (the
 * caller then speaks them on the raw socket). */
static bool ring_ext;

static struct nbdp *connect_engine_ring_tx(struct engine_env *env, bool structured,
					   size_t ring_size, size_t tx_size)
{
	struct hand h = { .env = env };
	struct bd_transport *ct;
	struct ring_t *r = calloc(1, sizeof(*r));
	struct nbd_client *c = NULL;
	struct nbdp *p = NULL;
	pthread_t th;
	int sv[2];

	CU_ASSERT_FATAL(r != NULL);
	CU_ASSERT_FATAL(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) == 0);
	CU_ASSERT_FATAL(bd_tcp_transport_new(sv[0], &ct) == 0);
	r->base.ops = tx_size ? &ring_tx_ops : &ring_ops;
	if (tx_size) {
		r->tx_size = tx_size;
		r->tx = malloc(tx_size);
		CU_ASSERT_FATAL(r->tx != NULL);
	}
	snprintf(r->base.peer, sizeof(r->base.peer), "ring");
	r->fd = sv[1];
	r->size = ring_size;
	r->ring = malloc(ring_size);
	CU_ASSERT_FATAL(r->ring != NULL);
	h.t = &r->base;
	CU_ASSERT_FATAL(pthread_create(&th, NULL, hand_main, &h) == 0);
	CU_ASSERT_FATAL(nbd_client_open(ct, 10000, &c) == 0);
	if (structured)
		CU_ASSERT_EQUAL(nbd_client_structured(c), 0);
	if (ring_ext) {
		uint32_t rep = 0;

		CU_ASSERT_EQUAL(nbd_client_option(c, NBD_OPT_EXTENDED_HEADERS, NULL, 0, &rep), 0);
		CU_ASSERT_EQUAL(rep, NBD_REP_ACK);
	}
	CU_ASSERT_EQUAL(nbd_client_go(c, "t", NULL), 0);
	CU_ASSERT_FATAL(nbdp_start(c, 10000, NULL, &p) == 0);
	pthread_join(th, NULL);
	CU_ASSERT_EQUAL(h.result, 0);
	return p;
}

static struct nbdp *connect_engine_ring(struct engine_env *env, bool structured,
					size_t ring_size)
{
	return connect_engine_ring_tx(env, structured, ring_size, 0);
}

/* WRITE payloads written to disk straight from the receive ring (two
 * pieces when it wraps), the ring given back in order; payloads larger
 * than the ring take the copy path; everything reads back right. */
static void test_engine_zero_copy_rx(void)
{
	static const uint32_t sizes[] = { 512, 4096, 20000, 40960, 65536, 4096, 777, 131072 };
	enum { ROUNDS = 24 };
	struct engine_env env;
	struct nbdp *c;
	struct engine_stats st;
	size_t total = 0, off = 0;
	uint8_t *wbuf, *rbuf;
	unsigned i, k;
	int res, mode;

	for (i = 0; i < ROUNDS; i++)
		total += sizes[i % 8];
	wbuf = malloc(total);
	rbuf = malloc(total);
	CU_ASSERT_FATAL(wbuf && rbuf);
	fill(wbuf, total, 11);
	CU_ASSERT_FATAL(env_setup(&env, 8u << 20, false, 0) == 0);
	for (mode = 0; mode < 2; mode++) {
		uint64_t ck;

		/* An odd ring size: wraps fall anywhere. */
		c = connect_engine_ring(&env, mode == 1, 49152 + 123);
		CU_ASSERT_FATAL(c != NULL);
		off = 0;
		for (i = 0; i < ROUNDS; i++) {
			uint32_t len = sizes[i % 8];
			uint16_t fl = (i % 5 == 4) ? NBD_CMD_FLAG_FUA : 0;

			CU_ASSERT_EQUAL(nbdp_submit(c, NBD_CMD_WRITE, fl, off, len,
							  wbuf + off, NULL), 0);
			off += len;
			/* Keep a few in flight at a time. */
			if (nbdp_inflight(c) >= 6) {
				CU_ASSERT_EQUAL(nbdp_wait(c, &ck, &res, NULL), 0);
				CU_ASSERT_EQUAL(res, 0);
			}
		}
		while (nbdp_inflight(c)) {
			CU_ASSERT_EQUAL(nbdp_wait(c, &ck, &res, NULL), 0);
			CU_ASSERT_EQUAL(res, 0);
		}
		/* Errors in the middle (payload skipped in place). */
		CU_ASSERT_EQUAL(nbdp_pwrite(c, wbuf, 4096, (8u << 20) - 100, 0), -ENOSPC);
		memset(rbuf, 0, total);
		for (k = 0, off = 0; k < ROUNDS; k++) {
			CU_ASSERT_EQUAL(nbdp_pread(c, rbuf + off, sizes[k % 8], off, 0), 0);
			off += sizes[k % 8];
		}
		CU_ASSERT_EQUAL(memcmp(wbuf, rbuf, total), 0);
		nbdp_disconnect(c);
		env_wait_closed(&env, mode + 1);
		nbdp_close(c);
		CU_ASSERT(closed_ring_wraps > 0);
	}
	engine_get_stats(env.e, &st);
	/* Payloads that are whole in the ring when their header is parsed go
	 * from there; the 64 and 128 KiB ones never fit (copy path). */
	printf("(zero-copy writes %llu of %d) ", (unsigned long long)st.zc_writes, 2 * ROUNDS);
	CU_ASSERT(st.zc_writes >= ROUNDS / 4);
	CU_ASSERT(st.zc_writes <= 2 * (ROUNDS - ROUNDS / 4));
	{
		int fd = open(env.path, O_RDONLY);

		CU_ASSERT_FATAL(fd >= 0);
		CU_ASSERT_EQUAL(pread(fd, rbuf, total, 0), (ssize_t)total);
		CU_ASSERT_EQUAL(memcmp(wbuf, rbuf, total), 0);
		close(fd);
	}
	env_teardown(&env);
	free(wbuf);
	free(rbuf);
}

static bool evt_reply(int fd, uint8_t *buf, size_t len, int ms);

/* One extended reply chunk from fd: checks magic, cookie and offset;
 * *type, and the payload into buf (at most size bytes). */
static uint64_t ext_reply(int fd, uint64_t cookie, uint64_t offset, uint16_t *type,
			  uint8_t *buf, size_t size)
{
	struct nbd_ext_chunk_wire w;
	struct nbd_chunk ch = { 0 };

	CU_ASSERT_FATAL(evt_reply(fd, (uint8_t *)&w, sizeof(w), 5000));
	CU_ASSERT_FATAL(nbd_ext_chunk_decode(&w, &ch) == 0);
	CU_ASSERT_EQUAL(ch.cookie, cookie);
	CU_ASSERT_EQUAL(ch.offset, offset);
	CU_ASSERT_EQUAL(ch.flags, NBD_REPLY_FLAG_DONE);
	CU_ASSERT_FATAL(ch.length <= size);
	if (ch.length)
		CU_ASSERT_FATAL(evt_reply(fd, buf, ch.length, 5000));
	*type = ch.type;
	return ch.length;
}

/* Extended headers over a receive ring (the SMC-R path): WRITEs with
 * NBD_CMD_FLAG_PAYLOAD_LEN from the ring in place, their NONE chunks, a
 * WRITE without the flag and a READ with a payload (skipped in place)
 * refused with EINVAL, the data read back in OFFSET_DATA chunks. */
static void test_engine_ext_headers_ring(void)
{
	static const uint32_t sizes[] = { 512, 4096, 20000, 777, 40960, 8192 };
	enum { ROUNDS = 18 };
	struct engine_env env;
	struct engine_stats st;
	struct nbdp *c;
	uint8_t *wbuf, *rbuf;
	size_t total = 0, off;
	unsigned i;
	uint16_t type;
	int cfd;

	for (i = 0; i < ROUNDS; i++)
		total += sizes[i % 6];
	wbuf = malloc(total);
	rbuf = malloc(40960 + 64);
	CU_ASSERT_FATAL(wbuf && rbuf);
	fill(wbuf, total, 13);
	CU_ASSERT_FATAL(env_setup(&env, 8u << 20, false, 0) == 0);
	ring_ext = true;
	c = connect_engine_ring(&env, false, 49152 + 123);
	ring_ext = false;
	CU_ASSERT_FATAL(c != NULL);
	cfd = bd_info(nbdp_transport(c)).tcp_fd;
	for (i = 0, off = 0; i < ROUNDS; i++) {
		struct nbd_request q = { .flags = NBD_CMD_FLAG_PAYLOAD_LEN, .type = NBD_CMD_WRITE,
					 .cookie = 100 + i, .offset = off,
					 .length = sizes[i % 6] };
		struct nbd_ext_request_wire w;

		nbd_ext_request_encode(&q, &w);
		CU_ASSERT_EQUAL(send(cfd, &w, sizeof(w), MSG_NOSIGNAL), (ssize_t)sizeof(w));
		CU_ASSERT_EQUAL(send(cfd, wbuf + off, q.length, MSG_NOSIGNAL), (ssize_t)q.length);
		CU_ASSERT_EQUAL(ext_reply(cfd, q.cookie, q.offset, &type, rbuf, 64), 0);
		CU_ASSERT_EQUAL(type, NBD_REPLY_TYPE_NONE);
		off += q.length;
	}
	{
		struct nbd_request bad[2] = {
			{ .type = NBD_CMD_WRITE, .cookie = 1, .offset = 0, .length = 512 },
			{ .flags = NBD_CMD_FLAG_PAYLOAD_LEN, .type = NBD_CMD_READ, .cookie = 2,
			  .offset = 4096, .length = 100 },
		};
		struct nbd_ext_request_wire w;
		uint32_t err;

		for (i = 0; i < 2; i++) {
			nbd_ext_request_encode(&bad[i], &w);
			CU_ASSERT_EQUAL(send(cfd, &w, sizeof(w), MSG_NOSIGNAL), (ssize_t)sizeof(w));
			if (i == 1)
				CU_ASSERT_EQUAL(send(cfd, wbuf, 100, MSG_NOSIGNAL), 100);
			CU_ASSERT(ext_reply(cfd, bad[i].cookie, bad[i].offset, &type, rbuf, 256) >= 6);
			CU_ASSERT_EQUAL(type, NBD_REPLY_TYPE_ERROR);
			memcpy(&err, rbuf, 4);
			CU_ASSERT_EQUAL(be32toh(err), NBD_EINVAL);
		}
	}
	for (i = 0, off = 0; i < ROUNDS; i++) {
		struct nbd_request q = { .type = NBD_CMD_READ, .cookie = 200 + i, .offset = off,
					 .length = sizes[i % 6] };
		struct nbd_ext_request_wire w;
		uint64_t at;

		nbd_ext_request_encode(&q, &w);
		CU_ASSERT_EQUAL(send(cfd, &w, sizeof(w), MSG_NOSIGNAL), (ssize_t)sizeof(w));
		CU_ASSERT_EQUAL(ext_reply(cfd, q.cookie, q.offset, &type, rbuf, 40960 + 64),
				8 + q.length);
		CU_ASSERT_EQUAL(type, NBD_REPLY_TYPE_OFFSET_DATA);
		memcpy(&at, rbuf, 8);
		CU_ASSERT_EQUAL(be64toh(at), off);
		CU_ASSERT_EQUAL(memcmp(rbuf + 8, wbuf + off, q.length), 0);
		off += q.length;
	}
	engine_get_stats(env.e, &st);
	printf("(zero-copy writes %llu of %d) ", (unsigned long long)st.zc_writes, ROUNDS);
	CU_ASSERT(st.zc_writes > 0);
	{
		struct nbd_request q = { .type = NBD_CMD_DISC };
		struct nbd_ext_request_wire w;

		nbd_ext_request_encode(&q, &w);
		CU_ASSERT_EQUAL(send(cfd, &w, sizeof(w), MSG_NOSIGNAL), (ssize_t)sizeof(w));
	}
	env_wait_closed(&env, 1);
	nbdp_close(c);
	env_teardown(&env);
	free(wbuf);
	free(rbuf);
}

/* READ replies reserved in the transport's send ring and read from the
 * file straight into it (two pieces when the ring wraps), committed in
 * order; replies that do not fit take the copy path; WRITE replies queue
 * behind reservations without passing them.  Every byte reads back. */
static void test_engine_zero_copy_tx(void)
{
	static const uint32_t sizes[] = { 4096, 512, 16384, 20000, 777, 65536, 8192, 131072 };
	enum { ROUNDS = 40, DEPTH = 6 };
	struct engine_env env;
	struct nbdp *c;
	struct engine_stats st;
	size_t total = 0, off;
	uint8_t *want, *got;
	unsigned i, mode;
	uint64_t ck;
	int res, fd;

	for (i = 0; i < ROUNDS; i++)
		total += sizes[i % 8];
	want = malloc(total);
	got = malloc(total);
	CU_ASSERT_FATAL(want && got);
	fill(want, total, 23);
	CU_ASSERT_FATAL(env_setup(&env, 8u << 20, false, 0) == 0);
	fd = open(env.path, O_WRONLY);
	CU_ASSERT_FATAL(fd >= 0);
	CU_ASSERT_EQUAL(pwrite(fd, want, total, 0), (ssize_t)total);
	close(fd);
	for (mode = 0; mode < 2; mode++) {
		c = connect_engine_ring_tx(&env, mode == 1, 49152 + 123, 65536 + 77);
		CU_ASSERT_FATAL(c != NULL);
		/* One at a time: every reply that fits is reserved (6 sizes of
		 * 8), and the ring wraps. */
		memset(got, 0, total);
		for (i = 0, off = 0; i < ROUNDS; i++) {
			CU_ASSERT_EQUAL(nbdp_pread(c, got + off, sizes[i % 8], off, 0), 0);
			off += sizes[i % 8];
		}
		CU_ASSERT_EQUAL(memcmp(want, got, total), 0);
		/* Pipelined, with WRITEs between: reserved and copied replies
		 * mix, in any order. */
		memset(got, 0, total);
		for (i = 0, off = 0; i < ROUNDS; i++) {
			uint32_t len = sizes[i % 8];

			CU_ASSERT_EQUAL(nbdp_submit(c, NBD_CMD_READ, 0, off, len,
							  got + off, NULL), 0);
			/* A WRITE now and then: its reply is not reserved. */
			if (i % 7 == 3)
				CU_ASSERT_EQUAL(nbdp_submit(c, NBD_CMD_WRITE, 0,
								  (4u << 20) + off, 512,
								  want + off, NULL), 0);
			off += len;
			while (nbdp_inflight(c) >= DEPTH) {
				CU_ASSERT_EQUAL(nbdp_wait(c, &ck, &res, NULL), 0);
				CU_ASSERT_EQUAL(res, 0);
			}
		}
		while (nbdp_inflight(c)) {
			CU_ASSERT_EQUAL(nbdp_wait(c, &ck, &res, NULL), 0);
			CU_ASSERT_EQUAL(res, 0);
		}
		CU_ASSERT_EQUAL(memcmp(want, got, total), 0);
		/* A read past the end: an error reply, the connection lives. */
		CU_ASSERT_EQUAL(nbdp_pread(c, got, 4096, (8u << 20) - 100, 0), -EINVAL);
		CU_ASSERT_EQUAL(nbdp_pread(c, got, 4096, 0, 0), 0);
		CU_ASSERT_EQUAL(memcmp(want, got, 4096), 0);
		nbdp_disconnect(c);
		env_wait_closed(&env, (int)mode + 1);
		nbdp_close(c);
		CU_ASSERT(closed_ring_reserves >= ROUNDS * 6 / 8);
		CU_ASSERT(closed_ring_tx_wraps > 0);
	}
	engine_get_stats(env.e, &st);
	printf("(zero-copy reads %llu of %d) ", (unsigned long long)st.zc_reads, 2 * (2 * ROUNDS + 1));
	CU_ASSERT(st.zc_reads >= 2 * (ROUNDS * 6 / 8));
	CU_ASSERT(st.zc_reads < 2 * (2 * ROUNDS + 1));
	env_teardown(&env);
	free(want);
	free(got);
}

/* --- one wake-up fd for both directions, as an SMC-R socket has ------------
 * The transport's poll fd is an eventfd that means "look again" (libsmcr's
 * smcr_sock_fd); reads (in place, from a ring like ring_t's) and writes
 * that find nothing drain it first, then look again, as
 * blockdev/transport-smcr.c does.  A notifier thread plays
 * libsmcr's progress thread: it signals when request bytes arrive.  Sends
 * have a credit (the peer's window); once it is out, the next drain finds
 * the window reopened and its wake-up already written (the peer's cursor
 * update landing between a send that blocked and its POLL_OUT), so only a
 * server that looks at its send again on any wake-up goes on. */
struct evt_t {
	struct ring_t ring;		/* receive in place, as an RMBE */
	int fd, evfd;
	bool evmode;			/* after the handshake: poll the eventfd */
	pthread_mutex_t lock;
	size_t credit;			/* reply bytes the window takes */
	bool want_credit;		/* a send ran out of it */
	int64_t want_ms;
	bool stop;
	pthread_t notifier;
	unsigned raced;			/* window reopened inside a drain */
};

static struct evt_t *evt_of(struct bd_transport *t)
{
	return (struct evt_t *)t;
}

static void evt_signal(struct evt_t *r)
{
	uint64_t one = 1;

	if (write(r->evfd, &one, sizeof(one)) < 0)
		CU_FAIL("eventfd write");
}

static void evt_grant(struct evt_t *r)
{
	r->credit = SIZE_MAX;
	r->want_credit = false;
	evt_signal(r);
}

/* transport-smcr.c's still_blocked(): clear the fd, look again. */
static void evt_drain(struct evt_t *r, bool race)
{
	uint64_t junk;

	pthread_mutex_lock(&r->lock);
	if (race && r->want_credit) {
		evt_grant(r);
		r->raced++;
	}
	pthread_mutex_unlock(&r->lock);
	if (read(r->evfd, &junk, sizeof(junk)) < 0)
		junk = 0;
}

static ssize_t evt_peek(struct bd_transport *t, struct iovec iov[2])
{
	struct evt_t *r = evt_of(t);
	ssize_t n = ring_peek(t, iov);

	if (n != -EAGAIN || !r->evmode)
		return n;
	evt_drain(r, true);
	return ring_peek(t, iov);
}

static ssize_t evt_readv(struct bd_transport *t, const struct iovec *iov, int cnt)
{
	struct evt_t *r = evt_of(t);
	ssize_t n = ring_readv(t, iov, cnt);

	if (n != -EAGAIN || !r->evmode)
		return n;
	evt_drain(r, true);
	return ring_readv(t, iov, cnt);
}

static ssize_t evt_writev(struct bd_transport *t, const struct iovec *iov, int cnt)
{
	struct evt_t *r = evt_of(t);
	struct iovec v[64];
	size_t room, total = 0;
	int tries, i, k;
	ssize_t n;

	for (tries = 0; tries < 2; tries++) {
		pthread_mutex_lock(&r->lock);
		room = r->evmode ? r->credit : SIZE_MAX;
		pthread_mutex_unlock(&r->lock);
		if (room)
			break;
		evt_drain(r, false);
	}
	if (!room)
		return -EAGAIN;
	for (i = k = 0; i < cnt && k < 64 && total < room; i++, k++) {
		v[k] = iov[i];
		if (v[k].iov_len > room - total)
			v[k].iov_len = room - total;
		total += v[k].iov_len;
	}
	n = writev(r->fd, v, k);	/* the socket buffer takes it all */
	if (n < 0)
		return -errno;
	pthread_mutex_lock(&r->lock);
	if (r->evmode && r->credit != SIZE_MAX) {
		r->credit -= (size_t)n;
		if (!r->credit && !r->want_credit) {
			r->want_credit = true;
			r->want_ms = now_ms();
		}
	}
	pthread_mutex_unlock(&r->lock);
	return n;
}

static int evt_poll_fd(struct bd_transport *t)
{
	struct evt_t *r = evt_of(t);

	return r->evmode ? r->evfd : r->fd;
}

static short evt_poll_events(struct bd_transport *t, unsigned want)
{
	if (evt_of(t)->evmode)
		return POLLIN;
	return (short)(((want & BD_WANT_READ) ? POLLIN : 0) |
		       ((want & BD_WANT_WRITE) ? POLLOUT : 0));
}

static void evt_close(struct bd_transport *t)
{
	struct evt_t *r = evt_of(t);

	pthread_mutex_lock(&r->lock);
	r->stop = true;
	pthread_mutex_unlock(&r->lock);
	pthread_join(r->notifier, NULL);
	close(r->evfd);
	pthread_mutex_destroy(&r->lock);
	ring_close(t);		/* closes fd, frees r */
}

/* Signals when request bytes (or the end) arrive; a send short of credit
 * gets its window after 200 ms at the latest (the peer reading on). */
static void *evt_notifier(void *arg)
{
	struct evt_t *r = arg;
	uint64_t last = 0;		/* bytes arrived: taken + unread */
	bool hup = false;

	for (;;) {
		struct pollfd p = { .fd = r->fd, .events = POLLIN };
		uint64_t arrived;
		int avail = 0;

		pthread_mutex_lock(&r->lock);
		if (r->stop) {
			pthread_mutex_unlock(&r->lock);
			break;
		}
		if (r->want_credit && now_ms() - r->want_ms >= 200)
			evt_grant(r);
		pthread_mutex_unlock(&r->lock);
		if (poll(&p, 1, 5) < 0 || ioctl(r->fd, FIONREAD, &avail) < 0)
			avail = 0;
		arrived = __atomic_load_n(&r->ring.tail, __ATOMIC_ACQUIRE) + (uint64_t)avail;
		if (arrived > last || ((p.revents & POLLHUP) && !hup)) {
			hup = hup || (p.revents & POLLHUP);
			evt_signal(r);
		}
		last = arrived;
		if (avail)
			usleep(1000);	/* not taken yet: no spin */
	}
	return NULL;
}

static const struct bd_transport_ops evt_ops = {
	.name = "test-evt",
	.readv = evt_readv,
	.writev = evt_writev,
	.poll_fd = evt_poll_fd,
	.poll_events = evt_poll_events,
	.close = evt_close,
	.rx_peek = evt_peek,
	.rx_consume = ring_consume,
};

static void *evt_hand_main(void *arg)
{
	struct hand *h = arg;
	struct nbd_handshake_limits lim = { .timeout_ms = 5000, .cancel_fd = -1,
					    .max_options = 32 };
	struct nbd_server_session sess;

	h->result = nbd_server_handshake(h->t, &env_ops, h, &lim, &sess);
	if (h->result == 0) {
		evt_of(h->t)->evmode = true;
		h->result = engine_add(h->env->e, h->t, sess.handle, &sess, NULL);
	} else {
		bd_close(h->t);
	}
	return NULL;
}

/* Reads one simple reply of a 4 KiB READ within ms; false if none came. */
static bool evt_reply(int fd, uint8_t *buf, size_t len, int ms)
{
	size_t got = 0;

	while (got < len) {
		struct pollfd p = { .fd = fd, .events = POLLIN };
		ssize_t n;

		if (poll(&p, 1, ms) <= 0)
			return false;
		n = recv(fd, buf + got, len - got, 0);
		if (n <= 0)
			return false;
		got += (size_t)n;
	}
	return true;
}

/* A queue depth of READs and the header of a WRITE whose payload is held
 * back: replies close the window in the second one; the partial send
 * frees a slot, so the engine reads (the WRITE header, then nothing, and
 * drains the fd) before its POLL_OUT is armed.  Every READ reply must
 * come while the client sends nothing more. */
static void test_engine_shared_wakeup_fd(void)
{
	enum { QD = 16, LEN = 4096, REPLY = 16 + LEN };
	struct engine_env env;
	struct hand h = { .env = &env };
	struct bd_transport *ct;
	struct nbd_client *nc = NULL;
	struct nbdp *c = NULL;
	struct nbd_request_wire w[QD + 1];
	struct evt_t *r = calloc(1, sizeof(*r));
	static uint8_t want[QD * LEN], buf[REPLY];
	unsigned i, got = 0;
	pthread_t th;
	int sv[2], fd, cfd;

	CU_ASSERT_FATAL(r != NULL);
	CU_ASSERT_FATAL(env_setup(&env, 1u << 20, false, 0) == 0);
	fill(want, sizeof(want), 5);
	fd = open(env.path, O_WRONLY);
	CU_ASSERT_FATAL(fd >= 0);
	CU_ASSERT_EQUAL(pwrite(fd, want, sizeof(want), 0), (ssize_t)sizeof(want));
	close(fd);
	CU_ASSERT_FATAL(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) == 0);
	CU_ASSERT_FATAL(bd_tcp_transport_new(sv[0], &ct) == 0);
	r->ring.base.ops = &evt_ops;
	snprintf(r->ring.base.peer, sizeof(r->ring.base.peer), "evt");
	r->fd = r->ring.fd = sv[1];
	r->ring.size = 65536;
	r->ring.ring = malloc(r->ring.size);
	CU_ASSERT_FATAL(r->ring.ring != NULL);
	r->evfd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	CU_ASSERT_FATAL(r->evfd >= 0);
	pthread_mutex_init(&r->lock, NULL);
	/* The first reply and half the second fit the window. */
	r->credit = REPLY + REPLY / 2;
	CU_ASSERT_FATAL(pthread_create(&r->notifier, NULL, evt_notifier, r) == 0);
	h.t = &r->ring.base;
	CU_ASSERT_FATAL(pthread_create(&th, NULL, evt_hand_main, &h) == 0);
	CU_ASSERT_FATAL(nbd_client_open(ct, 10000, &nc) == 0);
	CU_ASSERT_EQUAL(nbd_client_go(nc, "t", NULL), 0);
	CU_ASSERT_FATAL(nbdp_start(nc, 10000, NULL, &c) == 0);
	pthread_join(th, NULL);
	CU_ASSERT_EQUAL_FATAL(h.result, 0);
	cfd = bd_info(nbdp_transport(c)).tcp_fd;
	for (i = 0; i <= QD; i++) {
		struct nbd_request q = { .type = i < QD ? NBD_CMD_READ : NBD_CMD_WRITE,
					 .cookie = i, .offset = (uint64_t)i * LEN,
					 .length = LEN };

		nbd_request_encode(&q, &w[i]);
	}
	CU_ASSERT_EQUAL(send(cfd, w, sizeof(w), MSG_NOSIGNAL), (ssize_t)sizeof(w));
	/* 5 s: a send woken only by the notifier's 200 ms fallback comes
	 * well within it; one whose wake-up was lost never does. */
	while (got < QD && evt_reply(cfd, buf, REPLY, 5000)) {
		uint64_t cookie;

		memcpy(&cookie, buf + 8, 8);
		cookie = be64toh(cookie);
		CU_ASSERT_FATAL(cookie < QD);
		CU_ASSERT_EQUAL(memcmp(buf + 16, want + cookie * LEN, LEN), 0);
		got++;
	}
	printf("(%u of %d replies; the window reopened inside a drain %u time(s)) ",
	       got, QD, r->raced);
	CU_ASSERT_EQUAL(got, QD);
	/* Unstick it either way: the window, the WRITE's payload, its reply. */
	pthread_mutex_lock(&r->lock);
	evt_grant(r);
	pthread_mutex_unlock(&r->lock);
	while (got < QD && evt_reply(cfd, buf, REPLY, 5000))
		got++;
	CU_ASSERT_EQUAL(send(cfd, want, LEN, MSG_NOSIGNAL), LEN);
	CU_ASSERT(evt_reply(cfd, buf, 16, 5000));
	CU_ASSERT_EQUAL(buf[7], 0);	/* error 0 */
	nbdp_disconnect(c);
	env_wait_closed(&env, 1);
	nbdp_close(c);
	env_teardown(&env);
}

static CU_TestInfo engine_tests[] = {
	{ "read write flush zero trim", test_engine_rw },
	{ "errors keep the connection", test_engine_errors },
	{ "read-only export", test_engine_readonly },
	{ "pipeline out of order", test_engine_pipeline },
	{ "disc answers in-flight", test_engine_disc_drains },
	{ "drain", test_engine_drain },
	{ "memory limit", test_engine_memory_limit },
	{ "zero-copy receive", test_engine_zero_copy_rx },
	{ "extended headers over a receive ring", test_engine_ext_headers_ring },
	{ "zero-copy READ replies", test_engine_zero_copy_tx },
	{ "one wake-up fd for both directions", test_engine_shared_wakeup_fd },
	{ "large WRITEs inline on a worker's only connection", test_engine_alone_large_write },
	CU_TEST_INFO_NULL,
};

/* --- config ------------------------------------------------------------------ */

static void test_export_arg(void)
{
	struct export_spec s;
	char err[128];

	CU_ASSERT_EQUAL(config_parse_export_arg("disk=/tmp/x,ro,allow=10.0.0.0/8,"
						"allow=::1,blocksize=4096,desc=hello",
						&s, err, sizeof(err)), 0);
	CU_ASSERT_STRING_EQUAL(s.name, "disk");
	CU_ASSERT_STRING_EQUAL(s.path, "/tmp/x");
	CU_ASSERT(s.read_only);
	CU_ASSERT_EQUAL(s.block_size, 4096);
	CU_ASSERT_EQUAL(s.nallow, 2);
	CU_ASSERT_STRING_EQUAL(s.description, "hello");
	export_spec_free(&s);

	CU_ASSERT_EQUAL(config_parse_export_arg("/dev/sdb", &s, err, sizeof(err)), 0);
	CU_ASSERT_STRING_EQUAL(s.name, "sdb");
	CU_ASSERT(!s.read_only);
	export_spec_free(&s);

	CU_ASSERT_EQUAL(config_parse_export_arg("d=/x,bogus", &s, err, sizeof(err)), -EINVAL);
	CU_ASSERT_PTR_NOT_NULL(strstr(err, "bogus"));
	CU_ASSERT_EQUAL(config_parse_export_arg("d=/x,blocksize=1000", &s, err, sizeof(err)),
			-EINVAL);
	CU_ASSERT_EQUAL(config_parse_export_arg("d=/x,allow=10.0.0.0/33", &s, err,
						sizeof(err)), -EINVAL);
	CU_ASSERT_EQUAL(config_parse_export_arg("d=", &s, err, sizeof(err)), -EINVAL);
}

/* The key of the per-address limits: IPv4 as it is (mapped or not), IPv6
 * by its /64, Unix sockets "local". */
static void test_addr_key(void)
{
	static const struct {
		const char *addr, *key;
	} v[] = {
		{ "2001:db8:1:2::1", "2001:db8:1:2::/64" },
		{ "2001:db8:1:2:ffff:ffff:ffff:ffff", "2001:db8:1:2::/64" },
		{ "2001:db8:1:3::1", "2001:db8:1:3::/64" },
		{ "fe80::1", "fe80::/64" },
		{ "::1", "::/64" },
		{ "::ffff:127.0.0.1", "127.0.0.1" },
	};
	struct sockaddr_in a4 = { .sin_family = AF_INET };
	struct sockaddr_in6 a6 = { .sin6_family = AF_INET6 };
	struct sockaddr_storage un = { .ss_family = AF_UNIX };
	char key[INET6_ADDRSTRLEN];
	unsigned i;

	for (i = 0; i < sizeof(v) / sizeof(v[0]); i++) {
		CU_ASSERT_EQUAL_FATAL(inet_pton(AF_INET6, v[i].addr, &a6.sin6_addr), 1);
		addr_key_of((struct sockaddr *)&a6, key, sizeof(key));
		CU_ASSERT_STRING_EQUAL(key, v[i].key);
	}
	inet_pton(AF_INET, "127.0.0.1", &a4.sin_addr);
	addr_key_of((struct sockaddr *)&a4, key, sizeof(key));
	CU_ASSERT_STRING_EQUAL(key, "127.0.0.1");
	addr_key_of((struct sockaddr *)&un, key, sizeof(key));
	CU_ASSERT_STRING_EQUAL(key, "local");
	/* An accepted Unix socket: its peer's uid (SO_PEERCRED). */
	{
		int sv[2];
		char want[32];

		CU_ASSERT_EQUAL_FATAL(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
		snprintf(want, sizeof(want), "uid %u", (unsigned)geteuid());
		addr_key_of_fd(sv[0], (struct sockaddr *)&un, key, sizeof(key));
		CU_ASSERT_STRING_EQUAL(key, want);
		addr_key_of_fd(-1, (struct sockaddr *)&un, key, sizeof(key));
		CU_ASSERT_STRING_EQUAL(key, "local");
		addr_key_of_fd(sv[0], (struct sockaddr *)&a4, key, sizeof(key));
		CU_ASSERT_STRING_EQUAL(key, "127.0.0.1");
		close(sv[0]);
		close(sv[1]);
	}
}

/* Holders that never give back, one after the other, each taking all
 * its share: how many units each gets, and what is left. */
static uint64_t share_fill(uint64_t pool, uint64_t cap, unsigned holders, uint64_t unit,
			   uint64_t got[])
{
	uint64_t used = 0;
	unsigned i;

	for (i = 0; i < holders; i++) {
		got[i] = 0;
		while (share_allows(pool, used, got[i], got[i] ? i + 1 : i, cap, unit)) {
			got[i] += unit;
			used += unit;
		}
	}
	return pool - used;
}

/* share_allows(): a pool of 128 slots (max-clients), holders that stay. */
static void test_share(void)
{
	uint64_t got[24];
	unsigned i;

	/* An empty pool gives anything; a full one nothing. */
	CU_ASSERT_TRUE(share_allows(64, 0, 0, 0, 16, 1000));
	CU_ASSERT_FALSE(share_allows(64, 64, 0, 3, 0, 1));
	CU_ASSERT_FALSE(share_allows(64, 60, 0, 3, 0, 5));
	/* One alone: half; two: the second a third at most and half of
	 * what is left. */
	CU_ASSERT_EQUAL(share_fill(128, 64, 1, 1, got), 64);
	CU_ASSERT_EQUAL(got[0], 64);
	CU_ASSERT_EQUAL(share_fill(128, 64, 2, 1, got), 32);
	CU_ASSERT_EQUAL(got[1], 32);
	/* 2 to 4 addresses never take the whole pool: a fifth is served. */
	for (i = 2; i <= 4; i++) {
		uint64_t left = share_fill(128, 64, i, 1, got);
		uint64_t used = 128 - left;

		CU_ASSERT_TRUE(left >= 8);
		CU_ASSERT_TRUE(share_allows(128, used, 0, i, 64, 1));
	}
	/* Memory in 4 KiB buffers: 8 connections that never read leave a
	 * 4 KiB READ room in 32 MiB. */
	share_fill(32 << 20, 0, 8, 4096, got);
	CU_ASSERT_EQUAL(got[0], 16 << 20);
	{
		uint64_t used = 0;

		for (i = 0; i < 8; i++)
			used += got[i];
		CU_ASSERT_TRUE(share_allows(32 << 20, used, 0, 8, 0, 4096));
	}
	/* The cap bounds a holder's growth, not its first piece. */
	CU_ASSERT_TRUE(share_allows(1 << 20, 4096, 0, 1, 65536, 262144));
	CU_ASSERT_FALSE(share_allows(1 << 20, 65536, 65536, 1, 65536, 4096));
	/* Many holders: each still gets one while any is free. */
	CU_ASSERT_EQUAL(share_fill(16, 0, 24, 1, got), 0);
	CU_ASSERT_EQUAL(got[0], 8);
	CU_ASSERT_EQUAL(got[4], 1);
	CU_ASSERT_EQUAL(got[23], 0);
}

static void test_acl(void)
{
	struct acl_entry v[2];
	struct sockaddr_in a4 = { .sin_family = AF_INET };
	struct sockaddr_in6 a6 = { .sin6_family = AF_INET6 };

	CU_ASSERT_EQUAL(acl_parse("10.1.0.0/16", &v[0]), 0);
	CU_ASSERT_EQUAL(acl_parse("fd00::/8", &v[1]), 0);
	inet_pton(AF_INET, "10.1.200.3", &a4.sin_addr);
	CU_ASSERT(acl_match(v, 2, (struct sockaddr *)&a4));
	inet_pton(AF_INET, "10.2.0.1", &a4.sin_addr);
	CU_ASSERT(!acl_match(v, 2, (struct sockaddr *)&a4));
	CU_ASSERT(acl_match(v, 0, (struct sockaddr *)&a4));
	inet_pton(AF_INET6, "fd12::1", &a6.sin6_addr);
	CU_ASSERT(acl_match(v, 2, (struct sockaddr *)&a6));
	inet_pton(AF_INET6, "::ffff:10.1.0.9", &a6.sin6_addr);
	CU_ASSERT(acl_match(v, 2, (struct sockaddr *)&a6));
	inet_pton(AF_INET6, "2001:db8::1", &a6.sin6_addr);
	CU_ASSERT(!acl_match(v, 2, (struct sockaddr *)&a6));
	CU_ASSERT_EQUAL(acl_parse("10.1.2.3/7", &v[0]), 0);
	inet_pton(AF_INET, "11.255.0.1", &a4.sin_addr);
	CU_ASSERT(acl_match(v, 1, (struct sockaddr *)&a4));
	CU_ASSERT_EQUAL(acl_parse("*", &v[0]), 0);
	CU_ASSERT(acl_match(v, 1, (struct sockaddr *)&a6));
	CU_ASSERT_EQUAL(acl_parse("nonsense", &v[0]), -EINVAL);
	/* An IPv4-mapped entry matches the IPv4 peer in either form. */
	CU_ASSERT_EQUAL(acl_parse("::ffff:127.0.0.1", &v[0]), 0);
	inet_pton(AF_INET, "127.0.0.1", &a4.sin_addr);
	CU_ASSERT(acl_match(v, 1, (struct sockaddr *)&a4));
	inet_pton(AF_INET6, "::ffff:127.0.0.1", &a6.sin6_addr);
	CU_ASSERT(acl_match(v, 1, (struct sockaddr *)&a6));
	inet_pton(AF_INET, "127.0.0.2", &a4.sin_addr);
	CU_ASSERT(!acl_match(v, 1, (struct sockaddr *)&a4));
	CU_ASSERT_EQUAL(acl_parse("::ffff:10.0.0.0/104", &v[0]), 0);
	inet_pton(AF_INET, "10.9.8.7", &a4.sin_addr);
	CU_ASSERT(acl_match(v, 1, (struct sockaddr *)&a4));
	inet_pton(AF_INET, "11.0.0.1", &a4.sin_addr);
	CU_ASSERT(!acl_match(v, 1, (struct sockaddr *)&a4));
	/* And an IPv4 entry the mapped peer (as before). */
	CU_ASSERT_EQUAL(acl_parse("127.0.0.1", &v[0]), 0);
	CU_ASSERT(acl_match(v, 1, (struct sockaddr *)&a6));
}

static void test_sizes(void)
{
	uint64_t v;
	unsigned u;
	bool b;

	CU_ASSERT_EQUAL(parse_size("64M", &v), 0);
	CU_ASSERT_EQUAL(v, 64u << 20);
	CU_ASSERT_EQUAL(parse_size("4k", &v), 0);
	CU_ASSERT_EQUAL(v, 4096);
	CU_ASSERT_EQUAL(parse_size("1GiB", &v), 0);
	CU_ASSERT_EQUAL(v, 1u << 30);
	CU_ASSERT_EQUAL(parse_size("12x", &v), -EINVAL);
	CU_ASSERT_EQUAL(parse_size("-1", &v), -EINVAL);
	CU_ASSERT_EQUAL(parse_uint("10", 1, 5, &u), -ERANGE);
	CU_ASSERT_EQUAL(parse_uint("5", 1, 5, &u), 0);
	CU_ASSERT_EQUAL(parse_bool("Yes", &b), 0);
	CU_ASSERT(b);
	CU_ASSERT_EQUAL(parse_bool("maybe", &b), -EINVAL);
}

static void test_config_file(void)
{
	char path[] = "/tmp/smcrbd-conf.XXXXXX";
	struct smcrd_config cfg;
	struct export_list l = { NULL, 0 };
	char err[256];
	FILE *f;
	int fd;

	fd = mkstemp(path);
	CU_ASSERT_FATAL(fd >= 0);
	f = fdopen(fd, "w");
	fprintf(f, "# smcrd\nport = 10900\nqueue-depth = 32  # comment\n\n"
		   "[export a]\npath = /tmp/a\nread-only = yes\nallow = 10.0.0.0/8, ::1\n"
		   "[export b]\npath=/tmp/b\ndescription = the b disk\n");
	fclose(f);
	config_defaults(&cfg);
	cfg.set_mask = config_set_bit(config_setting("queue-depth"));	/* given on the command line */
	cfg.queue_depth = 7;
	CU_ASSERT_EQUAL(config_load_file(path, &cfg, true, &l, err, sizeof(err)), 0);
	CU_ASSERT_STRING_EQUAL(cfg.port, "10900");
	CU_ASSERT_EQUAL(cfg.queue_depth, 7);
	CU_ASSERT_EQUAL(l.n, 2);
	CU_ASSERT_STRING_EQUAL(l.v[0].name, "a");
	CU_ASSERT(l.v[0].read_only);
	CU_ASSERT_EQUAL(l.v[0].nallow, 2);
	CU_ASSERT_STRING_EQUAL(l.v[1].description, "the b disk");
	export_list_free(&l);
	config_free(&cfg);

	f = fopen(path, "w");
	fprintf(f, "[export a]\npath = /tmp/a\n[export a]\npath = /tmp/b\n");
	fclose(f);
	config_defaults(&cfg);
	CU_ASSERT_EQUAL(config_load_file(path, &cfg, true, &l, err, sizeof(err)), -EEXIST);
	CU_ASSERT_PTR_NOT_NULL(strstr(err, "twice"));
	export_list_free(&l);

	f = fopen(path, "w");
	fprintf(f, "[export a]\nread-only = yes\n");
	fclose(f);
	CU_ASSERT_EQUAL(config_load_file(path, &cfg, true, &l, err, sizeof(err)), -EINVAL);
	CU_ASSERT_PTR_NOT_NULL(strstr(err, "no path"));
	export_list_free(&l);

	/* syn-option: the file's value, unless the command line gave one;
	 * a pidfile in the file while --no-fixed-buffers was given (the two
	 * shared a bit of set_mask). */
	f = fopen(path, "w");
	fprintf(f, "syn-option = off\npidfile = /tmp/x.pid\n");
	fclose(f);
	config_defaults(&cfg);
	cfg.set_mask = config_set_bit(config_setting("fixed-buffers"));
	CU_ASSERT_EQUAL(cfg.syn_option, SMCR_SYN_OPTION_AUTO);
	CU_ASSERT_EQUAL(config_load_file(path, &cfg, true, &l, err, sizeof(err)), 0);
	CU_ASSERT_EQUAL(cfg.syn_option, SMCR_SYN_OPTION_OFF);
	CU_ASSERT_PTR_NOT_NULL_FATAL(cfg.pidfile);
	CU_ASSERT_STRING_EQUAL(cfg.pidfile, "/tmp/x.pid");
	export_list_free(&l);
	config_free(&cfg);
	config_defaults(&cfg);
	cfg.set_mask = config_set_bit(config_setting("syn-option"));
	cfg.syn_option = SMCR_SYN_OPTION_BPF;
	CU_ASSERT_EQUAL(config_load_file(path, &cfg, true, &l, err, sizeof(err)), 0);
	CU_ASSERT_EQUAL(cfg.syn_option, SMCR_SYN_OPTION_BPF);
	export_list_free(&l);
	config_free(&cfg);
	f = fopen(path, "w");
	fprintf(f, "syn-option = on\n");
	fclose(f);
	config_defaults(&cfg);
	CU_ASSERT_EQUAL(config_load_file(path, &cfg, true, &l, err, sizeof(err)), -EINVAL);
	CU_ASSERT_PTR_NOT_NULL(strstr(err, "syn-option"));
	export_list_free(&l);
	config_free(&cfg);

	f = fopen(path, "w");
	fprintf(f, "bogus = 1\n");
	fclose(f);
	config_defaults(&cfg);
	CU_ASSERT_EQUAL(config_load_file(path, &cfg, true, &l, err, sizeof(err)), -EINVAL);
	CU_ASSERT_PTR_NOT_NULL(strstr(err, ":1:"));
	export_list_free(&l);
	config_free(&cfg);
	unlink(path);
}

/* smcrd_settings[]: each range's ends are taken, one step past them is
 * not; a config file value is kept out where the command line gave one;
 * the status text of each setting. */
static void test_settings(void)
{
	const struct cfg_setting *st;
	struct smcrd_config cfg;
	uint64_t num = 0;
	char v[64];
	unsigned n = 0;

	config_defaults(&cfg);
	for (st = smcrd_settings; st->name; st++, n++) {
		CU_ASSERT_PTR_EQUAL(config_setting(st->name), st);
		config_setting_format(&cfg, st, v, sizeof(v));
		CU_ASSERT(v[0] != '\0');
		if (st->type != CFG_UINT && st->type != CFG_INT && st->type != CFG_SIZE)
			continue;
		snprintf(v, sizeof(v), "%llu", (unsigned long long)st->min);
		CU_ASSERT_EQUAL(config_setting_apply(&cfg, st, v, NULL), 0);
		snprintf(v, sizeof(v), "%llu", (unsigned long long)st->max);
		CU_ASSERT_EQUAL(config_setting_apply(&cfg, st, v, NULL), 0);
		if (st->min) {
			snprintf(v, sizeof(v), "%llu", (unsigned long long)st->min - 1);
			CU_ASSERT_EQUAL(config_setting_apply(&cfg, st, v, NULL), -EINVAL);
		}
		if (st->max < UINT64_MAX) {
			snprintf(v, sizeof(v), "%llu", (unsigned long long)st->max + 1);
			CU_ASSERT_EQUAL(config_setting_apply(&cfg, st, v, NULL), -EINVAL);
		}
	}
	CU_ASSERT(n >= 27 && n <= CFG_MAX_SETTINGS);
	CU_ASSERT_PTR_NULL(config_setting("no-fixed-buffers"));
	config_free(&cfg);

	config_defaults(&cfg);
	st = config_setting("queue-depth");
	CU_ASSERT_EQUAL(config_setting_apply(&cfg, st, "64", "/"), 0);
	CU_ASSERT_EQUAL(config_setting_apply(&cfg, st, "32", NULL), 0);
	CU_ASSERT_EQUAL(cfg.queue_depth, 64);
	CU_ASSERT_EQUAL(config_setting_apply(&cfg, st, "0", NULL), -EINVAL);
	st = config_setting("fixed-buffers");
	CU_ASSERT_EQUAL(config_setting_apply(&cfg, st, NULL, "/"), 0);
	CU_ASSERT(!cfg.fixed_buffers);
	st = config_setting("pidfile");
	CU_ASSERT_EQUAL(config_setting_apply(&cfg, st, "x.pid", "/run"), 0);
	CU_ASSERT_STRING_EQUAL(cfg.pidfile, "/run/x.pid");
	config_setting_format(&cfg, config_setting("tls"), v, sizeof(v));
	CU_ASSERT_STRING_EQUAL(v, "off");
	config_setting_format(&cfg, config_setting("max-handshakes-per-address"), v, sizeof(v));
	CU_ASSERT_STRING_EQUAL(v, "auto");
	config_setting_format(&cfg, config_setting("listen"), v, sizeof(v));
	CU_ASSERT_STRING_EQUAL(v, "-");
	CU_ASSERT(config_setting_number(&cfg, config_setting("queue-depth"), &num));
	CU_ASSERT_EQUAL(num, 64);
	CU_ASSERT(!config_setting_number(&cfg, config_setting("max-handshakes-per-address"), &num));
	CU_ASSERT(!config_setting_number(&cfg, config_setting("max-memory-per-address"), &num));
	CU_ASSERT(!config_setting_number(&cfg, config_setting("port"), &num));
	config_free(&cfg);
}

/* common/lograte.c: one line per interval with the count held back, and
 * the per-client burst of lograte_ok. */
static void test_lograte(void)
{
	struct lograte_every e = LOGRATE_EVERY_INIT;
	struct timespec ts = { 0, 120 * 1000000 };
	unsigned long held = 99;
	unsigned i, passed = 0;

	CU_ASSERT(lograte_every_ok(&e, 100, &held));
	CU_ASSERT_EQUAL(held, 0);
	for (i = 0; i < 3; i++)
		CU_ASSERT(!lograte_every_ok(&e, 100, &held));
	nanosleep(&ts, NULL);
	CU_ASSERT(lograte_every_ok(&e, 100, &held));
	CU_ASSERT_EQUAL(held, 3);
	CU_ASSERT(!lograte_every_ok(&e, 100, &held));
	/* A client gets its burst (the kind's is larger), then held back. */
	for (i = 0; i < LOGRATE_CLIENT_BURST + 10; i++)
		passed += lograte_ok(LOGRATE_SESSION, "192.0.2.7:4000");
	CU_ASSERT(passed >= LOGRATE_CLIENT_BURST && passed <= LOGRATE_CLIENT_BURST + 1);
	/* Another client is not. */
	CU_ASSERT(lograte_ok(LOGRATE_SESSION, "192.0.2.8:4000"));
	pthread_mutex_destroy(&e.lock);
}

static CU_TestInfo config_tests[] = {
	{ "--export argument", test_export_arg },
	{ "address prefixes", test_acl },
	{ "per-address keys", test_addr_key },
	{ "pool shares", test_share },
	{ "numbers", test_sizes },
	{ "config file", test_config_file },
	{ "settings table", test_settings },
	{ "log rate limits", test_lograte },
	CU_TEST_INFO_NULL,
};

/* --- base:allocation ---------------------------------------------------------- */

/* A 1 MiB file: data at [64K, 68K) and [512K, 520K), holes around. */
static int sparse_file(char *dir, size_t dlen, char *path, size_t plen)
{
	static uint8_t buf[8192];
	int fd;

	memset(buf, 0xa5, sizeof(buf));
	snprintf(dir, dlen, "%s/smcrbd-unit.XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
	if (!mkdtemp(dir))
		return -1;
	snprintf(path, plen, "%s/sparse", dir);
	fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0600);
	if (fd < 0)
		return -1;
	if (ftruncate(fd, 1 << 20) < 0 || pwrite(fd, buf, 4096, 64 << 10) != 4096 ||
	    pwrite(fd, buf, 8192, 512 << 10) != 8192 || fsync(fd) < 0) {
		close(fd);
		return -1;
	}
	return fd;
}

#define HZ	(NBD_STATE_HOLE | NBD_STATE_ZERO)

static bool ext_is(const struct nbd_extent *e, unsigned n, unsigned want_n, ...)
{
	va_list ap;
	unsigned i;
	bool ok = n == want_n;

	va_start(ap, want_n);
	for (i = 0; ok && i < n; i++) {
		uint32_t len = va_arg(ap, uint32_t), flags = va_arg(ap, uint32_t);

		ok = e[i].length == len && e[i].flags == flags;
	}
	va_end(ap);
	if (!ok)
		for (i = 0; i < n; i++)
			fprintf(stderr, "  extent %u: %u bytes, flags %u\n", i, e[i].length,
				e[i].flags);
	return ok;
}

static void test_bs_scan(void)
{
	char dir[64], path[96];
	struct nbd_extent e[8];
	unsigned n;
	int fd = sparse_file(dir, sizeof(dir), path, sizeof(path));
	off_t probe;

	CU_ASSERT_FATAL(fd >= 0);
	probe = lseek(fd, 0, SEEK_DATA);
	if (probe != 64 << 10) {
		/* A file system without holes (or SEEK_DATA) here. */
		fprintf(stderr, "  (%s: no SEEK_DATA holes: only the fallbacks tested)\n", dir);
		n = extents_scan(fd, true, 0, 1 << 20, 4096, false, e, 8);
		CU_ASSERT(n >= 1);
		goto out;
	}
	n = extents_scan(fd, true, 0, 1 << 20, 4096, false, e, 8);
	CU_ASSERT(ext_is(e, n, 5, 64 << 10, HZ, 4096, 0, (512 - 68) << 10, HZ, 8192, 0,
			 (1024 - 520) << 10, HZ));
	/* REQ_ONE: the first extent only, from anywhere. */
	n = extents_scan(fd, true, 0, 1 << 20, 4096, true, e, 8);
	CU_ASSERT(ext_is(e, n, 1, 64 << 10, HZ));
	n = extents_scan(fd, true, 64 << 10, 1 << 19, 4096, true, e, 8);
	CU_ASSERT(ext_is(e, n, 1, 4096, 0));
	/* Fewer slots than extents: covers less. */
	n = extents_scan(fd, true, 0, 1 << 20, 4096, false, e, 2);
	CU_ASSERT(ext_is(e, n, 2, 64 << 10, HZ, 4096, 0));
	/* Clipped to the range on both ends. */
	n = extents_scan(fd, true, 60 << 10, 10 << 10, 1024, false, e, 8);
	CU_ASSERT(ext_is(e, n, 3, 4096, HZ, 4096, 0, 2048, HZ));
	n = extents_scan(fd, true, 513 << 10, 1024, 512, false, e, 8);
	CU_ASSERT(ext_is(e, n, 1, 1024, 0));
	/* 64 KiB blocks: partial blocks are data, holes shrink to whole ones. */
	n = extents_scan(fd, true, 0, 1 << 20, 65536, false, e, 8);
	CU_ASSERT(ext_is(e, n, 5, 64 << 10, HZ, 64 << 10, 0, (512 - 128) << 10, HZ,
			 64 << 10, 0, (1024 - 576) << 10, HZ));
	/* A fragmented file (4 KiB of data every 8 KiB): the scan stops
	 * after EXTENTS_SCAN_STEPS steps (one extent each here), covering
	 * less of the range, however many slots are left. */
	{
		static struct nbd_extent big[EXTENTS_SCAN_STEPS * 2];
		uint64_t frag = (uint64_t)EXTENTS_SCAN_STEPS + 64, covered = 0, i;
		char blk[4096];
		int ffd;

		snprintf(path + strlen(dir), sizeof(path) - strlen(dir), "/frag");
		ffd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0600);
		CU_ASSERT_FATAL(ffd >= 0);
		memset(blk, 0x5a, sizeof(blk));
		for (i = 0; i < frag; i++)
			CU_ASSERT_FATAL(pwrite(ffd, blk, sizeof(blk), (off_t)(i * 8192)) == 4096);
		CU_ASSERT(ftruncate(ffd, (off_t)(frag * 8192)) == 0);
		n = extents_scan(ffd, true, 0, (uint32_t)(frag * 8192), 4096, false, big,
				 EXTENTS_SCAN_STEPS * 2);
		for (i = 0; i < n; i++)
			covered += big[i].length;
		CU_ASSERT(n == EXTENTS_SCAN_STEPS);
		CU_ASSERT(covered == (uint64_t)EXTENTS_SCAN_STEPS * 4096);
		CU_ASSERT(big[0].flags == 0 && big[1].flags == HZ);
		close(ffd);
		unlink(path);
		snprintf(path + strlen(dir), sizeof(path) - strlen(dir), "/sparse");
	}
out:
	/* Not seekable (block devices): all data, one extent. */
	n = extents_scan(fd, false, 4096, 1 << 19, 4096, false, e, 8);
	CU_ASSERT(ext_is(e, n, 1, 1 << 19, 0));
	/* Descriptor that lseek refuses: data. */
	n = extents_scan(-1, true, 0, 4096, 512, false, e, 8);
	CU_ASSERT(ext_is(e, n, 1, 4096, 0));
	close(fd);
	unlink(path);
	rmdir(dir);
}

static struct nbdp *connect_engine_meta(struct engine_env *env)
{
	struct hand h = { .env = env };
	struct bd_transport *ct;
	struct nbd_client *c = NULL;
	struct nbdp *p = NULL;
	uint32_t id = 0;
	pthread_t th;

	pair(&ct, &h.t);
	CU_ASSERT_FATAL(pthread_create(&th, NULL, hand_main, &h) == 0);
	CU_ASSERT_FATAL(nbd_client_open(ct, 10000, &c) == 0);
	CU_ASSERT_EQUAL(nbd_client_structured(c), 0);
	CU_ASSERT_EQUAL(nbd_client_set_meta_context(c, "t", NBD_META_BASE_ALLOCATION, &id), 0);
	CU_ASSERT_EQUAL(nbd_client_go(c, "t", NULL), 0);
	CU_ASSERT_FATAL(nbdp_start(c, 10000, &id, &p) == 0);
	pthread_join(th, NULL);
	CU_ASSERT_EQUAL(h.result, 0);
	return p;
}

static void test_bs_engine(void)
{
	struct engine_env env;
	struct nbdp *c;
	struct nbd_extent e[8];
	uint8_t *buf = malloc(65536);
	unsigned n;

	CU_ASSERT_FATAL(buf != NULL);
	fill(buf, 65536, 3);
	CU_ASSERT_FATAL(env_setup(&env, 8 << 20, false, 0) == 0);
	/* Without the context: EINVAL, and the connection stays. */
	c = connect_engine(&env, true);
	CU_ASSERT_EQUAL(nbdp_block_status(c, 4096, 0, 0, e, 8, &n), -EINVAL);
	CU_ASSERT_EQUAL(nbdp_pwrite(c, buf, 65536, 1 << 20, 0), 0);
	CU_ASSERT_EQUAL(nbdp_disconnect(c), 0);
	env_wait_closed(&env, 1);
	nbdp_close(c);

	c = connect_engine_meta(&env);
	CU_ASSERT_FATAL(c != NULL);
	CU_ASSERT_EQUAL(nbdp_block_status(c, 8 << 20, 0, 0, e, 8, &n), 0);
	if (lseek(env.exp->fd, 0, SEEK_DATA) == 1 << 20) {
		CU_ASSERT(ext_is(e, n, 3, 1 << 20, HZ, 65536, 0, (7 << 20) - 65536, HZ));
		CU_ASSERT_EQUAL(nbdp_block_status(c, 8 << 20, 0, NBD_CMD_FLAG_REQ_ONE,
							e, 8, &n), 0);
		CU_ASSERT(ext_is(e, n, 1, 1 << 20, HZ));
		/* Punched: one hole. */
		CU_ASSERT_EQUAL(nbdp_cmd(c, NBD_CMD_TRIM, 0, 1 << 20, 65536, NULL), 0);
		CU_ASSERT_EQUAL(nbdp_block_status(c, 8 << 20, 0, 0, e, 8, &n), 0);
		CU_ASSERT(ext_is(e, n, 1, 8 << 20, HZ));
	} else {
		CU_ASSERT(n >= 1);
	}
	CU_ASSERT_EQUAL(nbdp_block_status(c, 4096, 8 << 20, 0, e, 8, &n), -EINVAL);
	CU_ASSERT_EQUAL(nbdp_block_status(c, 0, 0, 0, e, 8, &n), -EINVAL);
	/* Still serving. */
	CU_ASSERT_EQUAL(nbdp_pread(c, buf, 4096, 0, 0), 0);
	CU_ASSERT_EQUAL(nbdp_disconnect(c), 0);
	env_wait_closed(&env, 2);
	nbdp_close(c);
	env_teardown(&env);
	free(buf);
}

/* The TLS keys of the config file; the command line wins. */
static void test_tls_config(void)
{
	char path[] = "/tmp/smcrbd-conf.XXXXXX";
	struct smcrd_config cfg;
	struct export_list l = { NULL, 0 };
	char err[256];
	FILE *f;
	int fd = mkstemp(path);

	CU_ASSERT_FATAL(fd >= 0);
	f = fdopen(fd, "w");
	fprintf(f, "tls = require\ntls-certificates = pki\ntls-psk = /k.psk\n");
	fclose(f);
	config_defaults(&cfg);
	CU_ASSERT_EQUAL(cfg.tls, NBD_TLS_OFF);
	CU_ASSERT_EQUAL(config_load_file(path, &cfg, true, &l, err, sizeof(err)), 0);
	CU_ASSERT_EQUAL(cfg.tls, NBD_TLS_REQUIRE);
	CU_ASSERT_STRING_EQUAL(cfg.tls_certificates, "pki");
	CU_ASSERT_STRING_EQUAL(cfg.tls_psk, "/k.psk");
	config_free(&cfg);
	config_defaults(&cfg);
	cfg.tls = NBD_TLS_ON;
	cfg.set_mask = config_set_bit(config_setting("tls"));
	CU_ASSERT_EQUAL(config_load_file(path, &cfg, true, &l, err, sizeof(err)), 0);
	CU_ASSERT_EQUAL(cfg.tls, NBD_TLS_ON);
	config_free(&cfg);
	f = fopen(path, "w");
	fprintf(f, "tls = yes\n");
	fclose(f);
	config_defaults(&cfg);
	CU_ASSERT_EQUAL(config_load_file(path, &cfg, true, &l, err, sizeof(err)), -EINVAL);
	CU_ASSERT_PTR_NOT_NULL(strstr(err, "'tls'"));
	config_free(&cfg);
	CU_ASSERT_EQUAL(config_parse_tls("on"), NBD_TLS_ON);
	CU_ASSERT_EQUAL(config_parse_tls("off"), NBD_TLS_OFF);
	CU_ASSERT(config_parse_tls("ON") < 0);
	export_list_free(&l);
	unlink(path);
}

static CU_TestInfo bs_tests[] = {
	{ "extents from SEEK_DATA/SEEK_HOLE", test_bs_scan },
	{ "engine", test_bs_engine },
	{ "TLS config keys", test_tls_config },
	CU_TEST_INFO_NULL,
};

static const struct unit_suite suites[] = {
	{ .name = "engine", .tests = engine_tests },
	{ .name = "config", .tests = config_tests },
	{ .name = "base:allocation and TLS", .tests = bs_tests },
	{ .name = NULL },
};

int main(int argc, char **argv)
{
	return unit_main(argc, argv, suites);
}
