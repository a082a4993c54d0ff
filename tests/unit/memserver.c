/* SPDX-License-Identifier: BSD-3-Clause */
/* smcrbd tests: a small NBD server in memory (see memserver.h). */
#include <config.h>

#include <arpa/inet.h>
#include <endian.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/eventfd.h>
#include <sys/socket.h>

#include "memserver.h"
#include "nbd-server.h"
#include "nbd-wire.h"
#include "smcr.h"
#include "transport-smcr.h"
#include "transport.h"

#define MAX_CONNS 64

struct mconn {
	struct memsrv *s;
	struct bd_transport *t;
	pthread_t thread;
	bool used;
	int done;
	int hs_mode;
	unsigned hs_ms;
};

struct memsrv {
	struct memsrv_opts o;
	char name[64];
	uint8_t *data;
	pthread_mutex_t lock;		/* data, conns */
	struct smcr_ctx *ctx;
	struct smcr_sock *slisten;
	int lfd;
	int killfd;			/* readable: connections stop */
	int stopfd;			/* readable: acceptor stops */
	pthread_t acceptor;
	bool running;
	struct mconn conns[MAX_CONNS];
	int hang;
	unsigned eshutdown, drop_after;
	int read_shape;
	unsigned requests, accepted, connections;
	int hs_mode;
	unsigned hs_ms;
};

static int lookup(void *ctx, const char *name, struct nbd_server_export *out, void **handle)
{
	struct memsrv *s = ctx;

	if (strcmp(name, s->name) && *name)
		return -ENOENT;
	memset(out, 0, sizeof(*out));
	out->name = s->name;
	out->size = s->o.size;
	out->tflags = NBD_FLAG_HAS_FLAGS | NBD_FLAG_SEND_FLUSH | NBD_FLAG_SEND_FUA |
		      NBD_FLAG_SEND_TRIM | NBD_FLAG_SEND_WRITE_ZEROES | NBD_FLAG_SEND_CACHE;
	if (!s->o.no_multi_conn)
		out->tflags |= NBD_FLAG_CAN_MULTI_CONN;
	if (s->o.read_only)
		out->tflags |= NBD_FLAG_READ_ONLY;
	out->min_block = 1;
	out->pref_block = 4096;
	out->max_payload = 32u << 20;
	*handle = s;
	return 0;
}

static void release(void *ctx, void *handle)
{
}

static int list(void *ctx, int (*cb)(void *arg, const char *name, const char *desc), void *arg)
{
	struct memsrv *s = ctx;

	return cb(arg, s->name, "memory");
}

static bool shutting_down(void *ctx)
{
	return false;
}

static const struct nbd_server_ops ops = {
	.lookup = lookup, .release = release, .list = list, .shutting_down = shutting_down,
};

static const char *const shape_names[MEMSRV_READ_SHAPES] = {
	[MEMSRV_READ_ONE] = "one", [MEMSRV_READ_REVERSE] = "reverse",
	[MEMSRV_READ_HOLES] = "holes", [MEMSRV_READ_OVERLAP] = "overlap",
	[MEMSRV_READ_HOLE_TWICE] = "hole-twice", [MEMSRV_READ_GAP] = "gap",
};

const char *memsrv_read_shape_name(enum memsrv_read_shape shape)
{
	return shape < MEMSRV_READ_SHAPES ? shape_names[shape] : "?";
}

int memsrv_read_shape_parse(const char *name)
{
	int i;

	for (i = 0; i < MEMSRV_READ_SHAPES; i++)
		if (!strcmp(name, shape_names[i]))
			return i;
	return -EINVAL;
}

void memsrv_read_shape(struct memsrv *s, enum memsrv_read_shape shape)
{
	__atomic_store_n(&s->read_shape, (int)shape, __ATOMIC_RELEASE);
}

/* One OFFSET_DATA (hole: OFFSET_HOLE) chunk of a READ at off, n bytes. */
static int send_chunk(struct bd_transport *t, const struct nbd_request *req, bool hole,
		      uint64_t off, uint32_t n, const uint8_t *data, bool done, int killfd)
{
	struct nbd_chunk ch = {
		.flags = done ? NBD_REPLY_FLAG_DONE : 0,
		.type = hole ? NBD_REPLY_TYPE_OFFSET_HOLE : NBD_REPLY_TYPE_OFFSET_DATA,
		.cookie = req->cookie,
		.length = hole ? 12 : 8 + n,
	};
	struct nbd_chunk_wire cw;
	uint8_t o[12];
	uint64_t be = htobe64(off);
	uint32_t be32 = htobe32(n);
	struct iovec iov[3] = {
		{ &cw, sizeof(cw) }, { o, hole ? 12 : 8 }, { (void *)data, hole ? 0 : n },
	};

	nbd_chunk_encode(&ch, &cw);
	memcpy(o, &be, 8);
	memcpy(o + 8, &be32, 4);
	return bd_writev_full(t, iov, 3, 10000, killfd);
}

/* A structured READ's reply in the shape s->read_shape (not ONE). */
static int send_read_shaped(struct memsrv *s, struct bd_transport *t,
			    const struct nbd_request *req, const uint8_t *buf, int shape)
{
	uint32_t len = req->length, half = len / 2, k, n;
	uint64_t off = req->offset;
	int r = 0;

	switch (shape) {
	case MEMSRV_READ_REVERSE:
		for (k = (len - 1) / 512 + 1; k-- > 0 && !r;) {
			n = len - k * 512 < 512 ? len - k * 512 : 512;
			r = send_chunk(t, req, false, off + k * 512, n, buf + k * 512, !k,
				       s->killfd);
		}
		return r;
	case MEMSRV_READ_HOLES:
		r = send_chunk(t, req, true, off, half, NULL, false, s->killfd);
		return r ? r : send_chunk(t, req, false, off + half, len - half, buf + half,
					  true, s->killfd);
	case MEMSRV_READ_OVERLAP:
	case MEMSRV_READ_HOLE_TWICE:
		r = send_chunk(t, req, shape == MEMSRV_READ_HOLE_TWICE, off, half, buf, false,
			       s->killfd);
		return r ? r : send_chunk(t, req, shape == MEMSRV_READ_HOLE_TWICE, off, half,
					  buf, true, s->killfd);
	case MEMSRV_READ_GAP:
		return send_chunk(t, req, false, off, half, buf, true, s->killfd);
	}
	return -EINVAL;
}

/* Waits ms, or until the server kills its connections: true then. */
static bool killed_in(struct memsrv *s, unsigned ms)
{
	struct pollfd pf = { .fd = s->killfd, .events = POLLIN };

	return poll(&pf, 1, (int)ms) > 0;
}

static int send_rep(struct mconn *mc, uint32_t option, uint32_t type, const void *data,
		    uint32_t len)
{
	struct nbd_opt_reply rep = { .option = option, .type = type, .len = len };
	struct nbd_opt_reply_wire w;
	struct iovec iov[2] = {
		{ .iov_base = &w, .iov_len = sizeof(w) },
		{ .iov_base = (void *)data, .iov_len = len },
	};

	nbd_opt_reply_encode(&rep, &w);
	return bd_writev_full(mc->t, iov, len ? 2 : 1, 2000, mc->s->killfd);
}

/* The hostile handshakes of memsrv_handshake_mode(); they end when the
 * client goes away (a write fails) or the server stops. */
static void hostile_handshake(struct mconn *mc)
{
	struct memsrv *s = mc->s;
	struct nbd_greeting_wire gw;
	struct nbd_client_flags_wire cw;
	uint8_t junk[4096];
	size_t i;

	nbd_greeting_encode(NBD_FLAG_FIXED_NEWSTYLE | NBD_FLAG_NO_ZEROES, &gw);
	if (mc->hs_mode == MEMSRV_HS_GREETING) {
		for (i = 0; i < sizeof(gw); i++)
			if (bd_write_full(mc->t, (uint8_t *)&gw + i, 1, 2000, s->killfd) < 0 ||
			    killed_in(s, mc->hs_ms))
				return;
		while (!killed_in(s, 100))
			if (bd_wait(mc->t, BD_WANT_READ, 0, -1) == 0 &&
			    bd_read_full(mc->t, junk, 1, 0, -1) < 0)
				return;
		return;
	}
	if (bd_write_full(mc->t, &gw, sizeof(gw), 2000, s->killfd) < 0 ||
	    bd_read_full(mc->t, &cw, sizeof(cw), 5000, s->killfd) < 0)
		return;
	for (;;) {
		struct nbd_opt_wire ow;
		struct nbd_opt o;

		if (bd_read_full(mc->t, &ow, sizeof(ow), 5000, s->killfd) < 0 ||
		    nbd_opt_decode(&ow, &o) < 0 || o.len > sizeof(junk) ||
		    bd_read_full(mc->t, junk, o.len, 5000, s->killfd) < 0)
			return;
		if (o.option == NBD_OPT_STRUCTURED_REPLY) {
			if (send_rep(mc, o.option, NBD_REP_ACK, NULL, 0) < 0)
				return;
			continue;
		}
		if (o.option != NBD_OPT_GO && o.option != NBD_OPT_INFO) {
			if (send_rep(mc, o.option, NBD_REP_ERR_UNSUP, NULL, 0) < 0)
				return;
			continue;
		}
		for (;;) {
			struct nbd_info_export_wire iw;

			nbd_info_export_encode(s->o.size, NBD_FLAG_HAS_FLAGS, &iw);
			if (send_rep(mc, o.option, NBD_REP_INFO, &iw, sizeof(iw)) < 0 ||
			    (mc->hs_ms && killed_in(s, mc->hs_ms)))
				return;
		}
	}
}

static void *conn_main(void *arg)
{
	struct mconn *mc = arg;
	struct memsrv *s = mc->s;
	struct nbd_handshake_limits lim = {
		.timeout_ms = 5000, .total_ms = 10000, .cancel_fd = s->killfd, .max_options = 32,
	};
	struct nbd_server_session sess;
	struct nbd_tx_params p;
	uint8_t *buf = malloc(32u << 20);
	int r;

	if (!buf)
		goto out;
	if (mc->hs_mode != MEMSRV_HS_NORMAL) {
		hostile_handshake(mc);
		goto out;
	}
	r = nbd_server_handshake(mc->t, &ops, s, &lim, &sess);
	if (r < 0)
		goto out;
	__atomic_add_fetch(&s->accepted, 1, __ATOMIC_RELAXED);
	nbd_tx_params_from_session(&sess, &p);
	for (;;) {
		struct nbd_request_wire w;
		struct nbd_request req;
		struct nbd_reply_buf rb;
		struct iovec iov[3];
		const char *msg = NULL;
		uint32_t err;
		unsigned n;
		int shape;

		r = bd_read_full(mc->t, &w, sizeof(w), -1, s->killfd);
		if (r < 0 || nbd_request_decode(&w, &req) < 0)
			break;
		err = nbd_request_check(&p, &req, &msg);
		if (req.type == NBD_CMD_WRITE) {
			r = req.length <= (32u << 20) ?
			    bd_read_full(mc->t, buf, req.length, -1, s->killfd) :
			    bd_skip_full(mc->t, req.length, -1, s->killfd);
			if (r < 0)
				break;
		}
		if (req.type == NBD_CMD_DISC)
			break;
		pthread_mutex_lock(&s->lock);
		n = s->drop_after;
		if (n)
			s->drop_after--;
		pthread_mutex_unlock(&s->lock);
		if (n == 1)
			break;
		while (__atomic_load_n(&s->hang, __ATOMIC_ACQUIRE)) {
			struct pollfd pf = { .fd = s->killfd, .events = POLLIN };

			if (poll(&pf, 1, 10) > 0)
				goto out;
		}
		pthread_mutex_lock(&s->lock);
		if (!err && s->eshutdown) {
			s->eshutdown--;
			err = NBD_ESHUTDOWN;
		}
		pthread_mutex_unlock(&s->lock);
		if (!err) {
			pthread_mutex_lock(&s->lock);
			switch (req.type) {
			case NBD_CMD_READ:
				memcpy(buf, s->data + req.offset, req.length);
				break;
			case NBD_CMD_WRITE:
				memcpy(s->data + req.offset, buf, req.length);
				break;
			case NBD_CMD_TRIM:
			case NBD_CMD_WRITE_ZEROES:
				memset(s->data + req.offset, 0, req.length);
				break;
			default:
				break;
			}
			pthread_mutex_unlock(&s->lock);
			__atomic_add_fetch(&s->requests, 1, __ATOMIC_RELAXED);
		}
		if (s->o.delay_us)
			usleep(s->o.delay_us);
		shape = __atomic_load_n(&s->read_shape, __ATOMIC_ACQUIRE);
		if (!err && req.type == NBD_CMD_READ && p.structured && req.length >= 2 &&
		    shape != MEMSRV_READ_ONE) {
			if (shape == MEMSRV_READ_HOLES) {
				/* what the hole says: zeros, from now on */
				pthread_mutex_lock(&s->lock);
				memset(s->data + req.offset, 0, req.length / 2);
				pthread_mutex_unlock(&s->lock);
				memset(buf, 0, req.length / 2);
			}
			if (send_read_shaped(s, mc->t, &req, buf, shape) < 0)
				break;
			continue;
		}
		nbd_reply_build(&p, &req, err,
				!err && req.type == NBD_CMD_READ ? req.length : 0,
				NBD_NO_OFFSET, msg, &rb);
		iov[0].iov_base = rb.head;
		iov[0].iov_len = rb.head_len;
		iov[1].iov_base = buf;
		iov[1].iov_len = rb.data_len;
		iov[2].iov_base = rb.tail;
		iov[2].iov_len = rb.tail_len;
		if (bd_writev_full(mc->t, iov, 3, 10000, s->killfd) < 0)
			break;
	}
out:
	free(buf);
	bd_close(mc->t);
	mc->t = NULL;
	__atomic_store_n(&mc->done, 1, __ATOMIC_RELEASE);
	return NULL;
}

/* Joins finished connection threads; all: every one (after killfd). */
static void reap(struct memsrv *s, bool all)
{
	unsigned i;

	for (i = 0; i < MAX_CONNS; i++) {
		struct mconn *mc = &s->conns[i];

		if (!mc->used || (!all && !__atomic_load_n(&mc->done, __ATOMIC_ACQUIRE)))
			continue;
		pthread_join(mc->thread, NULL);
		mc->used = false;
	}
}

static void *acceptor(void *arg)
{
	struct memsrv *s = arg;

	for (;;) {
		struct pollfd p[2] = {
			{ .fd = s->o.smcr ? smcr_listen_fd(s->slisten) : s->lfd, .events = POLLIN },
			{ .fd = s->stopfd, .events = POLLIN },
		};
		struct bd_transport *t = NULL;
		unsigned i;
		int r;

		if (poll(p, 2, 200) < 0 && errno != EINTR)
			break;
		if (p[1].revents)
			break;
		reap(s, false);
		if (!p[0].revents)
			continue;
		if (s->o.smcr) {
			struct smcr_sock *ss;

			r = smcr_accept(s->slisten, &ss);
			if (r < 0)
				continue;
			r = bd_smcr_transport_new(ss, &t);
			if (r < 0) {
				smcr_close(ss);
				continue;
			}
		} else {
			int fd = accept4(s->lfd, NULL, NULL, SOCK_CLOEXEC);

			if (fd < 0)
				continue;
			r = bd_tcp_transport_new(fd, &t);
			if (r < 0) {
				close(fd);
				continue;
			}
		}
		for (i = 0; i < MAX_CONNS && s->conns[i].used; i++)
			;
		if (i == MAX_CONNS) {
			bd_close(t);
			continue;
		}
		s->conns[i] = (struct mconn){ .s = s, .t = t, .used = true };
		pthread_mutex_lock(&s->lock);
		s->conns[i].hs_mode = s->hs_mode;
		s->conns[i].hs_ms = s->hs_ms;
		pthread_mutex_unlock(&s->lock);
		__atomic_add_fetch(&s->connections, 1, __ATOMIC_RELAXED);
		if (pthread_create(&s->conns[i].thread, NULL, conn_main, &s->conns[i])) {
			bd_close(t);
			s->conns[i].used = false;
		}
	}
	return NULL;
}

static int listen_now(struct memsrv *s)
{
	struct sockaddr_in sa = { .sin_family = AF_INET };
	socklen_t len = sizeof(sa);
	int one = 1, r;

	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	sa.sin_port = htons((uint16_t)s->o.port);
	if (s->o.smcr) {
		r = smcr_listen(s->ctx, (struct sockaddr *)&sa, sizeof(sa), 64, &s->slisten);
		if (r < 0)
			return r;
		if (!s->o.port) {
			getsockname(smcr_listen_fd(s->slisten), (struct sockaddr *)&sa, &len);
			s->o.port = ntohs(sa.sin_port);
		}
	} else {
		s->lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
		if (s->lfd < 0)
			return -errno;
		setsockopt(s->lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
		if (bind(s->lfd, (struct sockaddr *)&sa, sizeof(sa)) || listen(s->lfd, 64)) {
			r = -errno;
			close(s->lfd);
			s->lfd = -1;
			return r;
		}
		getsockname(s->lfd, (struct sockaddr *)&sa, &len);
		s->o.port = ntohs(sa.sin_port);
	}
	if (pthread_create(&s->acceptor, NULL, acceptor, s))
		return -EAGAIN;
	s->running = true;
	return 0;
}

static void drain_fd(int fd)
{
	uint64_t junk;

	while (read(fd, &junk, sizeof(junk)) > 0)
		;
}

void memsrv_pause(struct memsrv *s)
{
	uint64_t one = 1;

	if (!s->running)
		return;
	if (write(s->stopfd, &one, sizeof(one)) < 0 || write(s->killfd, &one, sizeof(one)) < 0)
		perror("memsrv: eventfd");
	pthread_join(s->acceptor, NULL);
	reap(s, true);
	if (s->o.smcr) {
		smcr_close(s->slisten);
		s->slisten = NULL;
	} else {
		close(s->lfd);
		s->lfd = -1;
	}
	s->running = false;
	drain_fd(s->stopfd);
	drain_fd(s->killfd);
}

int memsrv_resume(struct memsrv *s)
{
	int i, r = -EADDRINUSE;

	/* The old port may take a moment to be free again. */
	for (i = 0; i < 100 && !s->running; i++) {
		r = listen_now(s);
		if (r == 0)
			break;
		usleep(20000);
	}
	return r;
}

int memsrv_start(const struct memsrv_opts *o, struct memsrv **out)
{
	struct memsrv *s = calloc(1, sizeof(*s));
	int r;

	if (!s)
		return -ENOMEM;
	s->o = *o;
	if (!s->o.size)
		s->o.size = 16u << 20;
	snprintf(s->name, sizeof(s->name), "%s", o->name ? o->name : "mem");
	s->lfd = -1;
	pthread_mutex_init(&s->lock, NULL);
	s->data = calloc(1, s->o.size);
	s->killfd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	s->stopfd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (!s->data || s->killfd < 0 || s->stopfd < 0) {
		r = -ENOMEM;
		goto fail;
	}
	if (s->o.smcr) {
		r = smcr_ctx_create(NULL, &s->ctx);
		if (r < 0)
			goto fail;
	}
	r = listen_now(s);
	if (r < 0)
		goto fail;
	*out = s;
	return 0;
fail:
	memsrv_stop(s);
	return r;
}

void memsrv_stop(struct memsrv *s)
{
	if (!s)
		return;
	memsrv_pause(s);
	if (s->ctx)
		smcr_ctx_destroy(s->ctx);
	if (s->killfd >= 0)
		close(s->killfd);
	if (s->stopfd >= 0)
		close(s->stopfd);
	pthread_mutex_destroy(&s->lock);
	free(s->data);
	free(s);
}

unsigned memsrv_port(struct memsrv *s)
{
	return s->o.port;
}

uint8_t *memsrv_data(struct memsrv *s)
{
	return s->data;
}

void memsrv_hang(struct memsrv *s, bool on)
{
	__atomic_store_n(&s->hang, on, __ATOMIC_RELEASE);
}

void memsrv_eshutdown(struct memsrv *s, unsigned n)
{
	pthread_mutex_lock(&s->lock);
	s->eshutdown = n;
	pthread_mutex_unlock(&s->lock);
}

void memsrv_drop_after(struct memsrv *s, unsigned n)
{
	pthread_mutex_lock(&s->lock);
	s->drop_after = n;
	pthread_mutex_unlock(&s->lock);
}

void memsrv_handshake_mode(struct memsrv *s, int mode, unsigned ms)
{
	pthread_mutex_lock(&s->lock);
	s->hs_mode = mode;
	s->hs_ms = ms;
	pthread_mutex_unlock(&s->lock);
}

unsigned memsrv_connections(struct memsrv *s)
{
	return __atomic_load_n(&s->connections, __ATOMIC_ACQUIRE);
}

unsigned memsrv_requests(struct memsrv *s)
{
	return __atomic_load_n(&s->requests, __ATOMIC_ACQUIRE);
}

unsigned memsrv_accepted(struct memsrv *s)
{
	return __atomic_load_n(&s->accepted, __ATOMIC_ACQUIRE);
}

unsigned memsrv_open_conns(struct memsrv *s)
{
	unsigned i, n = 0;

	for (i = 0; i < MAX_CONNS; i++)
		n += s->conns[i].used && !__atomic_load_n(&s->conns[i].done, __ATOMIC_ACQUIRE);
	return n;
}
