/* SPDX-License-Identifier: BSD-3-Clause */
/* smcr-close: close and abort of libsmcr connections (RFC 7609 §4.8), for
 * tests/vm/smcr-close.sh.
 *
 *   smcr-close server [-p PORT] [-n CONNS]
 *   smcr-close client HOST [-p PORT] -m MODE [-b BYTES] [-s SIZE] [-d SECONDS]
 *
 * The server handles CONNS connections one after the other; the client
 * names the mode in a header.  Modes:
 *   half-client   the client sends BYTES and shuts down writing; the server
 *                 reads to the end of the stream, then sends BYTES and
 *                 closes; the client reads to the end
 *   half-server   the same with the roles swapped: the server shuts down
 *                 writing first, the client still sends afterwards
 *   abort-client  the client sends BYTES, then smcr_abort(): the server must
 *                 see an error (not an end of stream)
 *   abort-server  the server reads BYTES, then smcr_abort(): the client,
 *                 still sending, must see an error
 *   stream        the client sends for SECONDS (until an error), the server
 *                 reads until the end of the stream or an error: for tests
 *                 that kill one side (SIGKILL)
 * Data is a pseudo-random stream checked byte by byte at the far end.
 *
 * Each side prints, per connection,
 *   "<side>: conn N MODE: <what happened>"
 *   "result MODE ok|FAIL <detail>"    (half-*, abort-*: the expected outcome)
 *   "result stream eof|error <ERRNO> <bytes> <seconds since last progress>"
 * and, once the connection is closed (or aborted), the stack's gauges
 *   "gauges <side>: open_connections N rmbes_in_use N sndbufs_in_use N rmbs N"
 * which must be 0, 0, 0 (and RMBs may stay for reuse).  Exit status 0 when
 * every result is ok (a stream result counts as ok either way).
 * SMCR_CLOSE_DUMP=SECONDS prints smcr_ctx_dump() to stderr that often.
 */
#include <config.h>

#include <errno.h>
#include <getopt.h>
#include <pthread.h>
#include <netdb.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include "smcr.h"

enum mode { M_HALF_CLIENT = 1, M_HALF_SERVER, M_ABORT_CLIENT, M_ABORT_SERVER, M_STREAM };
static const char *mode_names[] = { "?", "half-client", "half-server", "abort-client",
				    "abort-server", "stream" };

struct hdr {
	uint32_t magic, mode;
	uint64_t bytes;
};
#define HDR_MAGIC 0x534d4352u

static struct smcr_ctx *ctx;
static size_t msg_size = 65536;

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static const char *errname(int err)
{
	switch (-err) {
	case 0: return "0";
	case ECONNRESET: return "ECONNRESET";
	case ECONNABORTED: return "ECONNABORTED";
	case EPIPE: return "EPIPE";
	case ETIMEDOUT: return "ETIMEDOUT";
	case ENOLINK: return "ENOLINK";
	case ENOTCONN: return "ENOTCONN";
	case EPROTO: return "EPROTO";
	case EIO: return "EIO";
	case EHOSTUNREACH: return "EHOSTUNREACH";
	case ENETDOWN: return "ENETDOWN";
	case ENETRESET: return "ENETRESET";
	default: return "other";
	}
}

static void fill(uint8_t *b, size_t n, uint64_t off, int dir)
{
	size_t i;

	for (i = 0; i < n; i++) {
		uint64_t x = (off + i) * 0x9E3779B97F4A7C15ull + 977u * (unsigned int)dir;

		b[i] = (uint8_t)(x >> 56 ^ x >> 23);
	}
}

static void gauges(const char *side)
{
	struct smcr_stats st;

	if (smcr_ctx_stats(ctx, &st))
		return;
	printf("gauges %s: open_connections %llu rmbes_in_use %llu sndbufs_in_use %llu rmbs %llu\n",
	       side, (unsigned long long)st.open_connections,
	       (unsigned long long)st.rmbes_in_use, (unsigned long long)st.sndbufs_in_use,
	       (unsigned long long)st.rmbs);
	printf("stats %s: connections %llu smc %llu fallbacks %llu link_groups %llu "
	       "link_failures %llu cdc_sent %llu cdc_recv %llu test_links %llu\n", side,
	       (unsigned long long)st.connections, (unsigned long long)st.smc_connections,
	       (unsigned long long)st.fallbacks, (unsigned long long)st.link_groups,
	       (unsigned long long)st.link_failures, (unsigned long long)st.cdc_sent,
	       (unsigned long long)st.cdc_recv, (unsigned long long)st.test_links);
	fflush(stdout);
}

/* Send bytes [off, off + n) of direction dir. */
static int send_range(struct smcr_sock *s, uint64_t off, uint64_t n, int dir, uint64_t *sent)
{
	uint8_t *buf = malloc(msg_size);
	int ret = 0;

	while (n > 0) {
		size_t k = n < msg_size ? (size_t)n : msg_size;

		fill(buf, k, off, dir);
		ret = smcr_send_all(s, buf, k);
		if (ret)
			break;
		off += k;
		n -= k;
		if (sent)
			*sent += k;
	}
	free(buf);
	return ret;
}

/* Read up to the end of the stream (0) or an error (<0), checking every
 * byte against direction dir.  *got counts bytes, *last the time of the
 * last progress; *bad is set on a mismatch. */
static int recv_to_end(struct smcr_sock *s, int dir, uint64_t limit, uint64_t *got,
		       double *last, bool *bad)
{
	uint8_t *buf = malloc(msg_size), *want = malloc(msg_size);
	ssize_t r;

	*last = now_s();
	for (;;) {
		size_t k = msg_size;

		if (limit && limit - *got < k)
			k = (size_t)(limit - *got);
		if (limit && k == 0) {
			r = 0;
			break;
		}
		r = smcr_recv(s, buf, k, 0);
		if (r <= 0)
			break;
		fill(want, (size_t)r, *got, dir);
		if (memcmp(buf, want, (size_t)r))
			*bad = true;
		*got += (uint64_t)r;
		*last = now_s();
	}
	free(buf);
	free(want);
	return (int)r;
}

static void info(struct smcr_sock *s, const char *side)
{
	struct smcr_sock_info in;

	if (smcr_sock_info(s, &in) == 0)
		printf("%s: %s\n", side, in.smc ? "SMC-R" : smcr_reason_str(in.fallback_reason));
}

/* ---- server ------------------------------------------------------------- */

static bool serve(struct smcr_sock *s, unsigned int idx)
{
	struct hdr h;
	uint64_t got = 0, sent = 0;
	double last;
	bool bad = false, ok = false, aborted = false;
	const char *m;
	int ret;

	ret = smcr_recv_all(s, &h, sizeof(h));
	if (ret || h.magic != HDR_MAGIC || h.mode < M_HALF_CLIENT || h.mode > M_STREAM) {
		printf("server: conn %u: bad header (%s)\n", idx, errname(ret));
		smcr_abort(s);
		return false;
	}
	m = mode_names[h.mode];
	switch (h.mode) {
	case M_HALF_CLIENT:
		ret = recv_to_end(s, 0, 0, &got, &last, &bad);
		printf("server: conn %u %s: end of stream after %llu bytes (%s)%s\n", idx, m,
		       (unsigned long long)got, errname(ret), bad ? ", DATA MISMATCH" : "");
		if (ret == 0 && got == h.bytes && !bad)
			ret = send_range(s, 0, h.bytes, 1, &sent);
		else if (ret == 0)
			ret = -EIO;
		ok = ret == 0;
		printf("result %s %s server received %llu, then sent %llu (%s)\n", m,
		       ok ? "ok" : "FAIL", (unsigned long long)got, (unsigned long long)sent,
		       errname(ret));
		break;
	case M_HALF_SERVER:
		ret = send_range(s, 0, h.bytes, 1, &sent);
		if (ret == 0)
			ret = smcr_shutdown(s, SHUT_WR);
		printf("server: conn %u %s: sent %llu, shut down writing (%s)\n", idx, m,
		       (unsigned long long)sent, errname(ret));
		if (ret == 0)
			ret = recv_to_end(s, 0, 0, &got, &last, &bad);
		ok = ret == 0 && got == h.bytes && !bad;
		printf("result %s %s server sent %llu, then received %llu%s (%s)\n", m,
		       ok ? "ok" : "FAIL", (unsigned long long)sent, (unsigned long long)got,
		       bad ? " MISMATCH" : "", errname(ret));
		break;
	case M_ABORT_CLIENT:
		ret = recv_to_end(s, 0, 0, &got, &last, &bad);
		/* The peer's abort must surface as an error, never as an
		 * orderly end of stream, and the data before it is intact. */
		ok = ret < 0 && got <= h.bytes && !bad;
		printf("server: conn %u %s: %s after %llu bytes, %.2f s after the last data\n",
		       idx, m, ret < 0 ? "error" : "end of stream", (unsigned long long)got,
		       now_s() - last);
		printf("result %s %s server got %s after %llu bytes%s\n", m, ok ? "ok" : "FAIL",
		       errname(ret), (unsigned long long)got, bad ? " MISMATCH" : "");
		break;
	case M_ABORT_SERVER:
		ret = recv_to_end(s, 0, h.bytes, &got, &last, &bad);
		ok = ret == 0 && got == h.bytes && !bad;
		printf("server: conn %u %s: read %llu bytes, aborting\n", idx, m,
		       (unsigned long long)got);
		smcr_abort(s);
		aborted = true;
		printf("result %s %s server aborted after %llu bytes\n", m, ok ? "ok" : "FAIL",
		       (unsigned long long)got);
		break;
	case M_STREAM:
		printf("server: conn %u %s: receiving\n", idx, m);
		fflush(stdout);
		ret = recv_to_end(s, 0, 0, &got, &last, &bad);
		printf("server: conn %u %s: %s after %llu bytes%s\n", idx, m,
		       ret < 0 ? "error" : "end of stream", (unsigned long long)got,
		       bad ? ", DATA MISMATCH" : "");
		printf("result stream %s %s %llu %.2f\n", ret < 0 ? "error" : "eof", errname(ret),
		       (unsigned long long)got, now_s() - last);
		ok = !bad;
		break;
	}
	fflush(stdout);
	if (!aborted)
		smcr_close(s);
	gauges("server");
	return ok;
}

static int run_server(int port, unsigned int conns)
{
	struct sockaddr_in sin = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port) };
	struct smcr_sock *ls, *s;
	unsigned int i, fails = 0;
	int ret;

	ret = smcr_listen(ctx, (struct sockaddr *)&sin, sizeof(sin), 16, &ls);
	if (ret) {
		fprintf(stderr, "smcr-close: listen: %s\n", strerror(-ret));
		return 1;
	}
	printf("server: listening on port %d, %u connection(s)\n", port, conns);
	fflush(stdout);
	for (i = 0; i < conns; i++) {
		ret = smcr_accept(ls, &s);
		if (ret) {
			printf("server: accept: %s\n", strerror(-ret));
			fails++;
			continue;
		}
		info(s, "server");
		if (!serve(s, i))
			fails++;
	}
	smcr_close(ls);
	gauges("server");
	return fails ? 1 : 0;
}

/* ---- client ------------------------------------------------------------- */

static int run_client(const char *host, int port, enum mode mode, uint64_t bytes, double secs)
{
	struct addrinfo hints = { .ai_family = AF_INET, .ai_socktype = SOCK_STREAM }, *ai;
	struct hdr h = { .magic = HDR_MAGIC, .mode = (uint32_t)mode, .bytes = bytes };
	const char *m = mode_names[mode];
	struct smcr_sock *s;
	uint64_t got = 0, sent = 0;
	double last, t0;
	bool bad = false, ok = false, aborted = false;
	char p[16];
	int ret, i;

	snprintf(p, sizeof(p), "%d", port);
	if (getaddrinfo(host, p, &hints, &ai)) {
		fprintf(stderr, "smcr-close: cannot resolve %s\n", host);
		return 1;
	}
	/* The server may not listen yet: retry for a while. */
	for (i = 0; i < 100; i++) {
		ret = smcr_connect(ctx, ai->ai_addr, ai->ai_addrlen, &s);
		if (ret != -ECONNREFUSED)
			break;
		usleep(100000);
	}
	freeaddrinfo(ai);
	if (ret) {
		fprintf(stderr, "smcr-close: connect: %s\n", strerror(-ret));
		return 1;
	}
	info(s, "client");
	ret = smcr_send_all(s, &h, sizeof(h));
	switch (mode) {
	case M_HALF_CLIENT:
		if (ret == 0)
			ret = send_range(s, 0, bytes, 0, &sent);
		if (ret == 0)
			ret = smcr_shutdown(s, SHUT_WR);
		printf("client: %s: sent %llu, shut down writing (%s)\n", m,
		       (unsigned long long)sent, errname(ret));
		if (ret == 0)
			ret = recv_to_end(s, 1, 0, &got, &last, &bad);
		ok = ret == 0 && got == bytes && !bad;
		printf("result %s %s client sent %llu, then received %llu%s (%s)\n", m,
		       ok ? "ok" : "FAIL", (unsigned long long)sent, (unsigned long long)got,
		       bad ? " MISMATCH" : "", errname(ret));
		break;
	case M_HALF_SERVER:
		if (ret == 0)
			ret = recv_to_end(s, 1, 0, &got, &last, &bad);
		printf("client: %s: end of stream after %llu bytes (%s)%s\n", m,
		       (unsigned long long)got, errname(ret), bad ? ", DATA MISMATCH" : "");
		if (ret == 0 && got == bytes && !bad)
			ret = send_range(s, 0, bytes, 0, &sent);
		else if (ret == 0)
			ret = -EIO;
		ok = ret == 0;
		printf("result %s %s client received %llu, then sent %llu (%s)\n", m,
		       ok ? "ok" : "FAIL", (unsigned long long)got, (unsigned long long)sent,
		       errname(ret));
		break;
	case M_ABORT_CLIENT:
		if (ret == 0)
			ret = send_range(s, 0, bytes, 0, &sent);
		printf("client: %s: sent %llu, aborting\n", m, (unsigned long long)sent);
		smcr_abort(s);
		aborted = true;
		ok = ret == 0;
		printf("result %s %s client aborted after %llu bytes\n", m, ok ? "ok" : "FAIL",
		       (unsigned long long)sent);
		break;
	case M_ABORT_SERVER: {
		/* Keep sending well past what the server reads: the abort
		 * must stop us with an error. */
		uint64_t cap = bytes * 64 + (64u << 20);

		if (ret == 0)
			ret = send_range(s, 0, cap, 0, &sent);
		ok = ret < 0;
		printf("client: %s: send %s after %llu bytes\n", m,
		       ret < 0 ? "failed" : "did NOT fail", (unsigned long long)sent);
		printf("result %s %s client got %s after %llu bytes\n", m, ok ? "ok" : "FAIL",
		       errname(ret), (unsigned long long)sent);
		break;
	}
	case M_STREAM:
		t0 = last = now_s();
		while (ret == 0 && now_s() - t0 < secs) {
			uint64_t before = sent;

			ret = send_range(s, sent, msg_size, 0, &sent);
			if (sent > before)
				last = now_s();
		}
		if (ret == 0)
			ret = smcr_shutdown(s, SHUT_WR);
		printf("client: %s: %s after %llu bytes\n", m, ret < 0 ? "error" : "done",
		       (unsigned long long)sent);
		printf("result stream %s %s %llu %.2f\n", ret < 0 ? "error" : "eof", errname(ret),
		       (unsigned long long)sent, now_s() - last);
		ok = true;
		break;
	}
	fflush(stdout);
	if (!aborted)
		smcr_close(s);
	gauges("client");
	return ok ? 0 : 1;
}

/* SMCR_CLOSE_DUMP=SECONDS: print smcr_ctx_dump() that often (debugging). */
static void *dumper(void *arg)
{
	unsigned int secs = *(unsigned int *)arg;
	static char buf[65536];

	for (;;) {
		sleep(secs);
		if (smcr_ctx_dump(ctx, buf, sizeof(buf), false) > 0)
			fprintf(stderr, "--- dump\n%s", buf);
	}
	return NULL;
}

int main(int argc, char **argv)
{
	const char *host = NULL;
	unsigned int conns = 1;
	uint64_t bytes = 1u << 20;
	double secs = 30;
	enum mode mode = M_HALF_CLIENT;
	bool server;
	int c, port = 5100, ret, i;

	if (argc < 2 || (strcmp(argv[1], "server") && strcmp(argv[1], "client"))) {
		fprintf(stderr, "usage: smcr-close server [-p PORT] [-n CONNS]\n"
			"       smcr-close client HOST [-p PORT] -m MODE [-b BYTES] [-s SIZE] [-d SECONDS]\n"
			"modes: half-client half-server abort-client abort-server stream\n");
		return 2;
	}
	server = !strcmp(argv[1], "server");
	optind = 2;
	if (!server) {
		if (argc < 3)
			return 2;
		host = argv[2];
		optind = 3;
	}
	while ((c = getopt(argc, argv, "p:n:m:b:s:d:")) != -1) {
		switch (c) {
		case 'p': port = atoi(optarg); break;
		case 'n': conns = (unsigned int)atoi(optarg); break;
		case 'b': bytes = strtoull(optarg, NULL, 0); break;
		case 's': msg_size = (size_t)strtoull(optarg, NULL, 0); break;
		case 'd': secs = atof(optarg); break;
		case 'm':
			for (i = 1; i <= M_STREAM; i++)
				if (!strcmp(optarg, mode_names[i]))
					mode = (enum mode)i;
			if (strcmp(optarg, mode_names[mode])) {
				fprintf(stderr, "smcr-close: unknown mode %s\n", optarg);
				return 2;
			}
			break;
		default:
			return 2;
		}
	}
	if (!msg_size)
		return 2;
	ret = smcr_ctx_create(NULL, &ctx);
	if (ret) {
		fprintf(stderr, "smcr-close: %s\n", strerror(-ret));
		return 1;
	}
	if (getenv("SMCR_CLOSE_DUMP")) {
		static unsigned int dump_secs;
		pthread_t t;

		dump_secs = (unsigned int)atoi(getenv("SMCR_CLOSE_DUMP"));
		if (dump_secs && pthread_create(&t, NULL, dumper, &dump_secs) == 0)
			pthread_detach(t);
	}
	ret = server ? run_server(port, conns) : run_client(host, port, mode, bytes, secs);
	fflush(stdout);
	smcr_ctx_destroy(ctx);
	return ret;
}
