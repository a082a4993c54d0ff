/* SPDX-License-Identifier: BSD-3-Clause */
/* smcr-stream: stream tests and benchmarks over our SMC-R (libsmcr), plain
 * TCP, or the kernel's SMC-R (AF_SMC), with the same flags for all three.
 *
 *   smcr-stream server [-t smcr|tcp|smc] [-p PORT] [-n CONNS]
 *   smcr-stream client HOST [-t ...] [-p PORT] [-m MODE] [-s SIZE]
 *                      [-b BYTES] [-d SECONDS] [-n CONNS] [-i ITERS]
 *
 * Modes (the client says which in a 16-byte header; the server follows):
 *   bw      the client sends BYTES (or for SECONDS) in SIZE-byte messages;
 *           both print MB/s
 *   lat     ping-pong of SIZE-byte messages, ITERS times; prints the mean
 *           round trip in microseconds
 *   verify  each of CONNS connections sends BYTES of a pseudo-random stream
 *           both ways at once; each side checks SHA-256 of what it received
 *           against the sender's, sent after the data; exit 1 on mismatch.
 *           With -b 0 the streams are open-ended (framed: a 4-byte length
 *           before each piece, 0 ends it) and last until -d SECONDS have
 *           passed or a "stop" line appears in the --ctl file; the server
 *           stops when the client's stream has ended.  SIGUSR1 is a
 *           "stop" for any transport (the kernel's AF_SMC has no --ctl).
 *           SIGUSR2 aborts them instead (either side): each connection
 *           stops reading, waits 0.5 s (so that the peer's data waits
 *           unread) and is aborted: smcr_abort() over libsmcr; over
 *           AF_SMC shutdown(SHUT_RDWR), which the kernel sends as an
 *           abort when data is unread (smc_close_final); over TCP a
 *           zero linger and a close (RST).  Prints "<side>: conn N
 *           aborted"; the peer must see an error, not the end.
 *
 * Options for failover tests (libsmcr only):
 *   --ctl FILE        poll FILE every 50 ms for new lines: "fault SPEC" calls
 *                     smcr_fault(SPEC) (e.g. fault fail-link=1), "stop" ends
 *                     open-ended streams; each is acknowledged on stdout
 *   --fault-after BYTES:SPEC
 *                     smcr_fault(SPEC) once BYTES have been received in all
 *   --linger SECONDS  keep the context (its idle link groups) that long
 *                     after the streams, then print the counters again
 *   --ticks FILE      every 100 ms append "tick REALTIME bytes_recv
 *                     bytes_sent failovers link_failures links_added
 *                     links_active rebalanced" (the stack's counters) to
 *                     FILE; every
 *                     change of link_failures, failovers or links_added is
 *                     also printed as an "event" line with the time
 *
 * Open-ended streams (-b 0) print "receiving WHO conn N" when connection N's
 * first bytes arrive.
 * Output ends with one line per result that scripts grep:
 *   "result bw <transport> <MB/s>", "result lat <transport> <usec>",
 *   (lat also latcpu, latcsw: sleeps per round trip, latp50, latp99; the
 *   server "result srvcsw <sleeps per round trip>"),
 *   "result verify <transport> <conns> <bytes> ok|FAIL".
 * The server handles CONNS connections (default 1), then prints its stack
 * counters ("stats ...") and exits.
 */
#include <config.h>

#include <dirent.h>
#include <errno.h>
#include <getopt.h>
#include <netdb.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/resource.h>
#include <sys/socket.h>

#include <openssl/evp.h>

#include "smcr.h"

#ifndef AF_SMC
#define AF_SMC 43
#endif

enum transport { T_SMCR, T_TCP, T_SMC };
enum mode { M_BW = 1, M_LAT, M_VERIFY };

static const char *tnames[] = { "smcr", "tcp", "smc" };

struct opts {
	enum transport t;
	enum mode mode;
	const char *host;
	int port;
	size_t size;
	uint64_t bytes;
	double seconds;
	unsigned int conns, iters;
	const char *ctl_file, *ticks_file, *fault_after_spec;
	uint64_t fault_after;
	double linger;
};

static struct opts o = {
	.t = T_SMCR, .mode = M_BW, .port = 12345, .size = 65536,
	.bytes = 64u << 20, .conns = 1, .iters = 1000,
};
static struct smcr_ctx *ctx;
static volatile bool stop_streams;	/* open-ended verify: end now */
static volatile bool abort_streams;	/* open-ended verify: abort now */
static volatile bool monitor_stop;

static void on_usr1(int sig)
{
	(void)sig;
	stop_streams = true;
}

static void on_usr2(int sig)
{
	(void)sig;
	abort_streams = true;
}

/* One connection over any of the three transports. */
struct conn {
	struct smcr_sock *s;
	int fd;
};

static ssize_t c_send(struct conn *c, const void *b, size_t n)
{
	ssize_t r;

	if (c->s)
		return smcr_send(c->s, b, n, 0);
	do
		r = send(c->fd, b, n, MSG_NOSIGNAL);
	while (r < 0 && errno == EINTR);
	return r < 0 ? -errno : r;
}

static ssize_t c_recv(struct conn *c, void *b, size_t n)
{
	ssize_t r;

	if (c->s)
		return smcr_recv(c->s, b, n, 0);
	do
		r = recv(c->fd, b, n, 0);
	while (r < 0 && errno == EINTR);
	return r < 0 ? -errno : r;
}

static int c_send_all(struct conn *c, const void *b, size_t n)
{
	const uint8_t *p = b;

	while (n) {
		ssize_t r = c_send(c, p, n);

		if (r < 0)
			return (int)r;
		p += r;
		n -= (size_t)r;
	}
	return 0;
}

/* c_recv_all() returned -ECONNRESET for an end of stream, not an error */
static __thread bool recv_eof;

static int c_recv_all(struct conn *c, void *b, size_t n)
{
	uint8_t *p = b;

	recv_eof = false;

	while (n) {
		ssize_t r = c_recv(c, p, n);

		if (r < 0)
			return (int)r;
		if (r == 0) {
			recv_eof = true;
			return -ECONNRESET;
		}
		p += r;
		n -= (size_t)r;
	}
	return 0;
}

static void c_close(struct conn *c)
{
	if (c->s)
		smcr_close(c->s);
	else if (c->fd >= 0)
		close(c->fd);
}

/* Abort (see SIGUSR2 above).  smcr_abort() frees the socket and a TCP
 * socket is closed here: c_close() afterwards frees what is left. */
static void c_abort(struct conn *c)
{
	struct linger l = { .l_onoff = 1, .l_linger = 0 };

	if (c->s) {
		smcr_abort(c->s);
		c->s = NULL;
		c->fd = -1;
	} else if (o.t == T_SMC) {
		shutdown(c->fd, SHUT_RDWR);
	} else {
		setsockopt(c->fd, SOL_SOCKET, SO_LINGER, &l, sizeof(l));
		close(c->fd);
		c->fd = -1;
	}
}

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int resolve(const char *host, int port, struct sockaddr_storage *ss, socklen_t *len)
{
	struct addrinfo hints = { .ai_socktype = SOCK_STREAM }, *ai;
	char p[16];
	int ret;

	snprintf(p, sizeof(p), "%d", port);
	ret = getaddrinfo(host, p, &hints, &ai);
	if (ret) {
		fprintf(stderr, "smcr-stream: %s: %s\n", host, gai_strerror(ret));
		return -EINVAL;
	}
	memcpy(ss, ai->ai_addr, ai->ai_addrlen);
	*len = ai->ai_addrlen;
	freeaddrinfo(ai);
	return 0;
}

static int plain_socket(int family)
{
	/* AF_SMC takes the IP family as its protocol (0: IPv4, 1: IPv6). */
	if (o.t == T_SMC)
		return socket(AF_SMC, SOCK_STREAM, family == AF_INET6 ? 1 : 0);
	return socket(family, SOCK_STREAM, 0);
}

static int do_connect(struct conn *c)
{
	struct sockaddr_storage ss;
	socklen_t len;
	int ret, one = 1;

	memset(c, 0, sizeof(*c));
	c->fd = -1;
	ret = resolve(o.host, o.port, &ss, &len);
	if (ret)
		return ret;
	if (o.t == T_SMCR)
		return smcr_connect(ctx, (struct sockaddr *)&ss, len, &c->s);
	c->fd = plain_socket(ss.ss_family);
	if (c->fd < 0)
		return -errno;
	if (connect(c->fd, (struct sockaddr *)&ss, len)) {
		ret = -errno;
		close(c->fd);
		return ret;
	}
	setsockopt(c->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	return 0;
}

/* The stream both sides agree on: byte i of direction dir on conn k. */
static void fill(uint8_t *b, size_t n, uint64_t off, unsigned int k, int dir)
{
	size_t i;

	for (i = 0; i < n; i++) {
		uint64_t x = (off + i) * 0x9E3779B97F4A7C15ull + k * 131u + (unsigned int)dir;

		b[i] = (uint8_t)(x >> 56 ^ x >> 23);
	}
}

struct hdr {
	uint32_t mode, conn;
	uint64_t bytes_or_iters;
	uint64_t size;
};

struct verify_job {
	struct conn c;
	unsigned int k;
	int dir;		/* our sending direction: 0 client, 1 server */
	uint64_t bytes;		/* each way; 0: open-ended, framed */
	size_t size;
	int err;
	bool ok;
	bool peer_ended;	/* framed: the peer's end marker arrived */
	bool recv_paused;	/* SIGUSR2: the receiver stopped reading */
	bool eof;		/* err is an end of stream (no end marker) */
	bool aborted;
	uint64_t got, sent;
};

static double real_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void *verify_recv(void *arg)
{
	struct verify_job *j = arg;
	uint8_t *buf = malloc(j->size), *want = malloc(j->size);
	uint8_t md[32], peer_md[32];
	EVP_MD_CTX *h = EVP_MD_CTX_new();
	bool framed = j->bytes == 0;
	uint64_t got = 0;
	unsigned int mdlen;

	EVP_DigestInit_ex(h, EVP_sha256(), NULL);
	j->ok = true;
	while (framed || got < j->bytes) {
		size_t n = j->size;
		ssize_t r;

		if (framed && abort_streams) {
			__atomic_store_n(&j->recv_paused, true, __ATOMIC_RELEASE);
			j->err = -ECONNABORTED;
			j->ok = false;
			break;
		}
		if (framed) {
			uint32_t len;
			int ret = c_recv_all(&j->c, &len, sizeof(len));

			if (ret || len > j->size) {
				j->eof = recv_eof;
				j->err = ret ? ret : -EPROTO;
				j->ok = false;
				break;
			}
			if (len == 0) {
				__atomic_store_n(&j->peer_ended, true, __ATOMIC_RELEASE);
				break;
			}
			ret = c_recv_all(&j->c, buf, len);
			if (ret) {
				j->eof = recv_eof;
				j->err = ret;
				j->ok = false;
				break;
			}
			r = (ssize_t)len;
		} else {
			if (j->bytes - got < n)
				n = (size_t)(j->bytes - got);
			r = c_recv(&j->c, buf, n);
			if (r <= 0) {
				j->err = r < 0 ? (int)r : -ECONNRESET;
				j->ok = false;
				break;
			}
		}
		fill(want, (size_t)r, got, j->k, !j->dir);
		if (memcmp(buf, want, (size_t)r))
			j->ok = false;
		EVP_DigestUpdate(h, buf, (size_t)r);
		if (framed && got == 0) {
			/* scripts wait for these before they signal */
			printf("receiving %s conn %u\n", j->dir ? "server" : "client", j->k);
			fflush(stdout);
		}
		got += (uint64_t)r;
		__atomic_store_n(&j->got, got, __ATOMIC_RELAXED);
	}
	EVP_DigestFinal_ex(h, md, &mdlen);
	if (j->err == 0 && c_recv_all(&j->c, peer_md, sizeof(peer_md)) == 0)
		j->ok = j->ok && memcmp(md, peer_md, sizeof(md)) == 0;
	else
		j->ok = false;
	EVP_MD_CTX_free(h);
	free(buf);
	free(want);
	return NULL;
}

/* Open-ended streams: the client stops on -d or "stop", the server when
 * the client's stream has ended. */
static bool verify_stop(struct verify_job *j, double t0)
{
	if (abort_streams)
		return true;	/* verify_conn aborts after its loop */
	if (j->dir == 1)
		return __atomic_load_n(&j->peer_ended, __ATOMIC_ACQUIRE) ||
		       j->err != 0;
	if (stop_streams)
		return true;
	return o.seconds > 0 && now_s() - t0 >= o.seconds;
}

/* SIGUSR2: abort once the receiver has stopped reading and the peer's
 * data has had 0.5 s to pile up unread (or the receiver ended anyway). */
static void verify_abort(struct verify_job *j)
{
	struct timespec half = { 0, 500000000 };
	int i;

	for (i = 0; i < 100 && !__atomic_load_n(&j->recv_paused, __ATOMIC_ACQUIRE) &&
		    !j->err; i++)
		nanosleep(&(struct timespec){ 0, 50000000 }, NULL);
	nanosleep(&half, NULL);
	c_abort(&j->c);
	j->aborted = true;
}

/* Send our stream and its SHA-256 while a thread receives the peer's. */
static bool verify_conn(struct verify_job *j)
{
	uint8_t *buf = malloc(j->size), md[32];
	EVP_MD_CTX *h = EVP_MD_CTX_new();
	bool framed = j->bytes == 0;
	uint64_t sent = 0;
	unsigned int mdlen;
	double t0 = now_s();
	pthread_t rt;
	int ret = 0;

	EVP_DigestInit_ex(h, EVP_sha256(), NULL);
	pthread_create(&rt, NULL, verify_recv, j);
	while (ret == 0 && (framed ? !verify_stop(j, t0) : sent < j->bytes)) {
		size_t n = j->size;

		if (!framed && j->bytes - sent < n)
			n = (size_t)(j->bytes - sent);
		fill(buf, n, sent, j->k, j->dir);
		EVP_DigestUpdate(h, buf, n);
		if (framed) {
			uint32_t len = (uint32_t)n;

			ret = c_send_all(&j->c, &len, sizeof(len));
		}
		if (ret == 0)
			ret = c_send_all(&j->c, buf, n);
		sent += n;
		__atomic_store_n(&j->sent, sent, __ATOMIC_RELAXED);
	}
	EVP_DigestFinal_ex(h, md, &mdlen);
	if (ret == 0 && framed && abort_streams) {
		verify_abort(j);
		ret = -ECONNABORTED;
	}
	if (ret == 0 && framed) {
		uint32_t zero = 0;

		ret = c_send_all(&j->c, &zero, sizeof(zero));
	}
	if (ret == 0)
		ret = c_send_all(&j->c, md, sizeof(md));
	pthread_join(rt, NULL);
	if (ret && (!j->err || j->eof)) {
		/* the sender's error, unless the receiver had one of its own
		 * (a reset is reported once, to whichever thread asks first;
		 * the other sees only the end, or a broken pipe) */
		j->err = ret;
		j->eof = false;
	}
	EVP_MD_CTX_free(h);
	free(buf);
	return j->ok && ret == 0;
}

static void *verify_thread(void *arg)
{
	verify_conn(arg);
	return NULL;
}

static void print_stats(const char *who)
{
	struct smcr_stats st;
	unsigned int i;

	if (!ctx || smcr_ctx_stats(ctx, &st))
		return;
	printf("stats %s: connections %llu smc %llu fallbacks %llu link_groups %llu "
	       "links_added %llu link_failures %llu failovers %llu rkeys_confirmed %llu "
	       "cdc_sent %llu rdma_writes %llu bytes_sent %llu bytes_recv %llu "
	       "links_deleted %llu rebalanced %llu devices_lost %llu test_links %llu "
	       "open_connections %llu rmbes_in_use %llu sndbufs_in_use %llu "
	       "fault_held %llu fault_discarded %llu fault_held_recvs %llu corked %llu "
	       "prod_rewinds %llu cons_held %llu link_groups_v21 %llu\n", who,
	       (unsigned long long)st.connections, (unsigned long long)st.smc_connections,
	       (unsigned long long)st.fallbacks, (unsigned long long)st.link_groups,
	       (unsigned long long)st.links_added, (unsigned long long)st.link_failures,
	       (unsigned long long)st.failovers, (unsigned long long)st.rkeys_confirmed,
	       (unsigned long long)st.cdc_sent, (unsigned long long)st.rdma_writes,
	       (unsigned long long)st.bytes_sent, (unsigned long long)st.bytes_recv,
	       (unsigned long long)st.links_deleted, (unsigned long long)st.rebalanced,
	       (unsigned long long)st.devices_lost, (unsigned long long)st.test_links,
	       (unsigned long long)st.open_connections, (unsigned long long)st.rmbes_in_use,
	       (unsigned long long)st.sndbufs_in_use, (unsigned long long)st.fault_held,
	       (unsigned long long)st.fault_discarded,
	       (unsigned long long)st.fault_held_recvs, (unsigned long long)st.corked,
	       (unsigned long long)st.prod_rewinds, (unsigned long long)st.cons_held,
	       (unsigned long long)st.link_groups_v21);
	printf("stats %s: progress thread woken by kick %llu timer %llu devcq %llu link %llu "
	       "async %llu; caller_serves %llu\n", who,
	       (unsigned long long)st.wake_kick, (unsigned long long)st.wake_timer,
	       (unsigned long long)st.wake_devcq, (unsigned long long)st.wake_link,
	       (unsigned long long)st.wake_async, (unsigned long long)st.caller_serves);
	for (i = 0; i < SMCR_STATS_REASONS; i++)
		if (st.fallback_by_reason[i])
			printf("stats %s: fallback reason 0x%08x (%s): %llu\n", who,
			       smcr_stats_reason(i), smcr_reason_str(smcr_stats_reason(i)),
			       (unsigned long long)st.fallback_by_reason[i]);
}

static void print_info(struct conn *c, const char *who)
{
	struct smcr_sock_info info;

	if (!c->s || smcr_sock_info(c->s, &info))
		return;
	if (info.smc)
		printf("%s: SMC-R (%s contact), link %u, RMBE %u, peer RMBE %u, layout %s\n", who,
		       info.first_contact ? "first" : "subsequent", info.link_id,
		       info.rmbe_size, info.peer_rmbe_size,
		       info.rmbe_eyecatcher ? "rfc" : "linux");
	else
		printf("%s: TCP fallback: %s (%s)\n", who, smcr_reason_str(info.fallback_reason),
		       info.fallback_by_peer ? "declined by peer" : "local");
}

/* ---- failover tests: control file, fault injection, ticks --------------- */

static void ctl_line(char *line)
{
	size_t n = strlen(line);

	while (n && (line[n - 1] == '\n' || line[n - 1] == '\r'))
		line[--n] = 0;
	if (!strncmp(line, "fault ", 6)) {
		int r = smcr_fault(ctx, line + 6);

		printf("ctl %.3f: fault %s: %d\n", real_s(), line + 6, r);
	} else if (!strcmp(line, "stop")) {
		stop_streams = true;
		printf("ctl %.3f: stop\n", real_s());
	} else if (!strcmp(line, "dump")) {
		static char buf[65536];

		if (smcr_ctx_dump(ctx, buf, sizeof(buf), false) >= 0)
			printf("ctl %.3f: dump\n%s", real_s(), buf);
	} else if (*line) {
		printf("ctl %.3f: unknown command '%s'\n", real_s(), line);
	}
	fflush(stdout);
}

/* New complete lines of the control file since *off. */
static void ctl_poll(long *off)
{
	char line[512];
	FILE *f = fopen(o.ctl_file, "r");

	if (!f)
		return;
	if (fseek(f, *off, SEEK_SET) == 0) {
		while (fgets(line, sizeof(line), f)) {
			if (!strchr(line, '\n'))
				break;	/* not complete yet */
			*off += (long)strlen(line);
			ctl_line(line);
		}
	}
	fclose(f);
}

static void *monitor(void *arg)
{
	FILE *tf = o.ticks_file ? fopen(o.ticks_file, "a") : NULL;
	struct smcr_stats prev, st;
	bool fault_done = false;
	unsigned int round = 0;
	long ctl_off = 0;

	(void)arg;
	memset(&prev, 0, sizeof(prev));
	while (!monitor_stop) {
		double t;

		usleep(20000);
		if (smcr_ctx_stats(ctx, &st))
			continue;
		t = real_s();
		if (st.link_failures != prev.link_failures || st.failovers != prev.failovers ||
		    st.links_added != prev.links_added) {
			printf("event %.3f link_failures %llu failovers %llu links_added %llu\n", t,
			       (unsigned long long)st.link_failures,
			       (unsigned long long)st.failovers,
			       (unsigned long long)st.links_added);
			fflush(stdout);
		}
		if (tf && round % 5 == 0) {
			fprintf(tf, "tick %.3f %llu %llu %llu %llu %llu %llu %llu\n", t,
				(unsigned long long)st.bytes_recv,
				(unsigned long long)st.bytes_sent,
				(unsigned long long)st.failovers,
				(unsigned long long)st.link_failures,
				(unsigned long long)st.links_added,
				(unsigned long long)st.links_active,
				(unsigned long long)st.rebalanced);
			fflush(tf);
		}
		if (o.fault_after_spec && !fault_done && st.bytes_recv >= o.fault_after) {
			fault_done = true;
			printf("fault %.3f: %s after %llu bytes: %d\n", t, o.fault_after_spec,
			       (unsigned long long)st.bytes_recv,
			       smcr_fault(ctx, o.fault_after_spec));
			fflush(stdout);
		}
		if (o.ctl_file && round % 2 == 0)
			ctl_poll(&ctl_off);
		prev = st;
		round++;
	}
	if (tf)
		fclose(tf);
	return NULL;
}

/* Sleeps (voluntary context switches) of each thread of this process
 * (/proc/self/task); returns how many threads. */
#define CSW_MAX 16
struct csw {
	char name[32];
	long tid;
	unsigned long long n;
};

static unsigned int csw_read(struct csw *t)
{
	DIR *d = opendir("/proc/self/task");
	struct dirent *e;
	unsigned int k = 0;

	while (d && (e = readdir(d)) && k < CSW_MAX) {
		char path[300], line[128];
		FILE *f;

		if (e->d_name[0] == '.')
			continue;
		memset(&t[k], 0, sizeof(t[k]));
		t[k].tid = atol(e->d_name);
		snprintf(path, sizeof(path), "/proc/self/task/%s/comm", e->d_name);
		if ((f = fopen(path, "r"))) {
			if (fgets(t[k].name, sizeof(t[k].name), f))
				t[k].name[strcspn(t[k].name, "\n")] = 0;
			fclose(f);
		}
		snprintf(path, sizeof(path), "/proc/self/task/%s/status", e->d_name);
		if ((f = fopen(path, "r"))) {
			while (fgets(line, sizeof(line), f))
				if (sscanf(line, "voluntary_ctxt_switches: %llu", &t[k].n) == 1)
					break;
			fclose(f);
		}
		k++;
	}
	if (d)
		closedir(d);
	return k;
}

/* "result WHAT NAME PER-ITER" for each thread's sleeps between a and b. */
static void csw_print(const char *what, const struct csw *a, unsigned int na,
		      const struct csw *b, unsigned int nb, uint64_t iters)
{
	unsigned int i, j;

	for (j = 0; j < nb && iters; j++) {
		unsigned long long n0 = 0;

		for (i = 0; i < na; i++)
			if (a[i].tid == b[j].tid)
				n0 = a[i].n;
		printf("result %s %s %.2f\n", what, b[j].name,
		       (double)(b[j].n - n0) / (double)iters);
	}
}

/* ---- server ------------------------------------------------------------- */

static int serve_one(struct conn *c, unsigned int idx)
{
	struct hdr h;
	uint8_t *buf;
	int ret;

	ret = c_recv_all(c, &h, sizeof(h));
	if (ret)
		return ret;
	buf = malloc(h.size ? h.size : 1);
	if (h.mode == M_BW) {
		uint64_t got = 0;
		double t0 = now_s(), dt;
		ssize_t r;

		while ((r = c_recv(c, buf, h.size)) > 0)
			got += (uint64_t)r;
		dt = now_s() - t0;
		printf("server: received %llu bytes in %.3f s: %.1f MB/s\n",
		       (unsigned long long)got, dt, (double)got / dt / 1e6);
		ret = r < 0 ? (int)r : 0;
		if (ret == 0)
			ret = c_send_all(c, &got, sizeof(got));
	} else if (h.mode == M_LAT) {
		struct rusage ru0, ru1;
		struct csw t0[CSW_MAX], t1[CSW_MAX];
		unsigned int n0 = csw_read(t0), n1;
		uint64_t i;

		getrusage(RUSAGE_SELF, &ru0);
		for (i = 0; i < h.bytes_or_iters && ret == 0; i++) {
			ret = c_recv_all(c, buf, h.size);
			if (ret == 0)
				ret = c_send_all(c, buf, h.size);
		}
		getrusage(RUSAGE_SELF, &ru1);
		n1 = csw_read(t1);
		if (ret == 0)
			csw_print("srvcsw_thread", t0, n0, t1, n1, h.bytes_or_iters);
		/* Sleeps per round trip at this end (all threads). */
		if (ret == 0 && h.bytes_or_iters)
			printf("result srvcsw %.2f\n", (double)(ru1.ru_nvcsw - ru0.ru_nvcsw) /
			       (double)h.bytes_or_iters);
	} else if (h.mode == M_VERIFY) {
		struct verify_job j = { .c = *c, .k = h.conn, .dir = 1,
					.bytes = h.bytes_or_iters, .size = h.size };

		/* the transport's error, else a data or digest mismatch */
		ret = verify_conn(&j) ? 0 : j.err ? j.err : -EBADMSG;
		if (j.aborted) {
			*c = j.c;	/* what the abort left to close */
			printf("server: conn %u aborted (received %llu, sent %llu bytes)\n", idx,
			       (unsigned long long)j.got, (unsigned long long)j.sent);
		} else if (j.bytes)
			printf("server: conn %u verify %s (%llu bytes each way)\n", idx,
			       ret ? "FAIL" : "ok", (unsigned long long)j.bytes);
		else
			printf("server: conn %u verify %s (open-ended: received %llu, sent %llu bytes)%s%s%s\n",
			       idx, ret ? "FAIL" : "ok", (unsigned long long)j.got,
			       (unsigned long long)j.sent, j.err ? ": " : "",
			       j.err ? strerror(-j.err) : "",
			       j.eof ? " (the stream ended: no error from the transport)" : "");
	} else {
		ret = -EPROTO;
	}
	free(buf);
	return ret;
}

struct srv_job {
	struct conn c;
	unsigned int idx;
	int ret;
};

static void *serve_thread(void *arg)
{
	struct srv_job *j = arg;

	j->ret = serve_one(&j->c, j->idx);
	c_close(&j->c);
	return NULL;
}

static int run_server(void)
{
	struct sockaddr_in sin = { .sin_family = AF_INET };
	struct srv_job *jobs = calloc(o.conns, sizeof(*jobs));
	pthread_t *th = calloc(o.conns, sizeof(*th));
	struct smcr_sock *ls = NULL;
	unsigned int i, fails = 0;
	int lfd = -1, ret, one = 1;

	sin.sin_port = htons((uint16_t)o.port);
	if (o.t == T_SMCR) {
		ret = smcr_listen(ctx, (struct sockaddr *)&sin, sizeof(sin), 128, &ls);
	} else {
		lfd = plain_socket(AF_INET);
		ret = lfd < 0 ? -errno : 0;
		if (!ret) {
			setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
			if (bind(lfd, (struct sockaddr *)&sin, sizeof(sin)) || listen(lfd, 128))
				ret = -errno;
		}
	}
	if (ret) {
		fprintf(stderr, "smcr-stream: listen on port %d: %s\n", o.port, strerror(-ret));
		return 1;
	}
	printf("server: listening on port %d (%s), %u connection(s)\n", o.port,
	       tnames[o.t], o.conns);
	fflush(stdout);
	for (i = 0; i < o.conns; i++) {
		jobs[i].idx = i;
		jobs[i].c.fd = -1;
		if (ls) {
			ret = smcr_accept(ls, &jobs[i].c.s);
		} else {
			jobs[i].c.fd = accept(lfd, NULL, NULL);
			ret = jobs[i].c.fd < 0 ? -errno : 0;
			if (!ret)
				setsockopt(jobs[i].c.fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
		}
		if (ret) {
			fprintf(stderr, "smcr-stream: accept: %s\n", strerror(-ret));
			jobs[i].ret = ret;
			fails++;
			continue;
		}
		if (i == 0)
			print_info(&jobs[i].c, "server");
		pthread_create(&th[i], NULL, serve_thread, &jobs[i]);
	}
	for (i = 0; i < o.conns; i++) {
		if (jobs[i].c.s || jobs[i].c.fd >= 0) {
			pthread_join(th[i], NULL);
			if (jobs[i].ret) {
				fprintf(stderr, "smcr-stream: connection %u: %s\n", i,
					strerror(-jobs[i].ret));
				fails++;
			}
		}
	}
	print_stats("server");
	if (ls)
		smcr_close(ls);
	else
		close(lfd);
	free(jobs);
	free(th);
	return fails ? 1 : 0;
}

/* ---- client ------------------------------------------------------------- */

static int run_bw(void)
{
	struct conn c;
	struct hdr h = { .mode = M_BW, .size = o.size };
	uint8_t *buf = malloc(o.size);
	uint64_t sent = 0, acked = 0;
	double t0, dt;
	int ret;

	ret = do_connect(&c);
	if (ret) {
		fprintf(stderr, "smcr-stream: connect: %s\n", strerror(-ret));
		return 1;
	}
	print_info(&c, "client");
	fill(buf, o.size, 0, 0, 0);
	ret = c_send_all(&c, &h, sizeof(h));
	t0 = now_s();
	while (ret == 0) {
		if (o.seconds > 0 ? now_s() - t0 >= o.seconds : sent >= o.bytes)
			break;
		ret = c_send_all(&c, buf, o.size);
		sent += o.size;
	}
	if (ret == 0) {
		if (c.s)
			smcr_shutdown(c.s, SHUT_WR);
		else
			shutdown(c.fd, SHUT_WR);
		ret = c_recv_all(&c, &acked, sizeof(acked));
	}
	dt = now_s() - t0;
	if (ret || acked != sent) {
		fprintf(stderr, "smcr-stream: bw: %s (sent %llu, server got %llu)\n",
			ret ? strerror(-ret) : "short", (unsigned long long)sent,
			(unsigned long long)acked);
		ret = 1;
	} else {
		printf("client: sent %llu bytes in %.3f s\n", (unsigned long long)sent, dt);
		printf("result bw %s %.1f\n", tnames[o.t], (double)sent / dt / 1e6);
	}
	print_stats("client");
	c_close(&c);
	free(buf);
	return ret ? 1 : 0;
}

static double tv_s(const struct timeval *tv)
{
	return (double)tv->tv_sec + (double)tv->tv_usec / 1e6;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

static int run_lat(void)
{
	struct rusage ru0, ru1;
	struct conn c;
	struct hdr h = { .mode = M_LAT, .size = o.size, .bytes_or_iters = o.iters };
	uint8_t *buf = calloc(1, o.size);
	double *rt = calloc(o.iters ? o.iters : 1, sizeof(*rt));
	struct csw th0[CSW_MAX], th1[CSW_MAX];
	unsigned int nt0, nt1;
	double t0, t1, dt;
	unsigned int i;
	int ret;

	if (!buf || !rt) {
		free(buf);
		free(rt);
		return 1;
	}
	ret = do_connect(&c);
	if (ret) {
		fprintf(stderr, "smcr-stream: connect: %s\n", strerror(-ret));
		return 1;
	}
	print_info(&c, "client");
	ret = c_send_all(&c, &h, sizeof(h));
	nt0 = csw_read(th0);
	getrusage(RUSAGE_SELF, &ru0);
	t0 = now_s();
	t1 = t0;
	for (i = 0; i < o.iters && ret == 0; i++) {
		double t2;

		ret = c_send_all(&c, buf, o.size);
		if (ret == 0)
			ret = c_recv_all(&c, buf, o.size);
		t2 = now_s();
		rt[i] = t2 - t1;
		t1 = t2;
	}
	dt = now_s() - t0;
	getrusage(RUSAGE_SELF, &ru1);
	nt1 = csw_read(th1);
	if (ret) {
		fprintf(stderr, "smcr-stream: lat: %s\n", strerror(-ret));
	} else {
		printf("client: %u round trips of %zu bytes in %.3f s\n", o.iters, o.size, dt);
		printf("result lat %s %.1f\n", tnames[o.t], dt / o.iters * 1e6);
		/* CPU time of the whole client (all its threads) per round trip. */
		printf("result latcpu %s %.1f\n", tnames[o.t],
		       (tv_s(&ru1.ru_utime) + tv_s(&ru1.ru_stime) -
			tv_s(&ru0.ru_utime) - tv_s(&ru0.ru_stime)) / o.iters * 1e6);
		/* Sleeps (voluntary context switches, all threads) per round
		 * trip: the wake-ups a round trip costs. */
		printf("result latcsw %s %.2f\n", tnames[o.t],
		       (double)(ru1.ru_nvcsw - ru0.ru_nvcsw) / o.iters);
		csw_print("latcsw_thread", th0, nt0, th1, nt1, o.iters);
		/* Round trips' median and 99th percentile (usec). */
		if (o.iters) {
			qsort(rt, o.iters, sizeof(*rt), cmp_double);
			printf("result latp50 %s %.1f\n", tnames[o.t], rt[o.iters / 2] * 1e6);
			printf("result latp99 %s %.1f\n", tnames[o.t],
			       rt[(size_t)o.iters * 99 / 100 < o.iters ?
				  (size_t)o.iters * 99 / 100 : o.iters - 1] * 1e6);
		}
	}
	print_stats("client");
	c_close(&c);
	free(rt);
	free(buf);
	return ret ? 1 : 0;
}

static int run_verify(void)
{
	struct verify_job *jobs = calloc(o.conns, sizeof(*jobs));
	pthread_t *th = calloc(o.conns, sizeof(*th));
	unsigned int i, ok = 0;
	uint64_t got = 0, sent = 0, conn_fo = 0;
	double t0, dt;
	int ret;

	/* Connect one by one (CLC is sequential per connection anyway). */
	for (i = 0; i < o.conns; i++) {
		struct hdr h = { .mode = M_VERIFY, .conn = i, .size = o.size,
				 .bytes_or_iters = o.bytes };

		ret = do_connect(&jobs[i].c);
		if (ret == 0)
			ret = c_send_all(&jobs[i].c, &h, sizeof(h));
		if (ret) {
			fprintf(stderr, "smcr-stream: connection %u: %s\n", i, strerror(-ret));
			o.conns = i;
			break;
		}
		if (i == 0 || i == o.conns - 1)
			print_info(&jobs[i].c, "client");
		jobs[i].k = i;
		jobs[i].dir = 0;
		jobs[i].bytes = o.bytes;
		jobs[i].size = o.size;
	}
	t0 = now_s();
	for (i = 0; i < o.conns; i++)
		pthread_create(&th[i], NULL, verify_thread, &jobs[i]);
	for (i = 0; i < o.conns; i++) {
		struct smcr_sock_info info;

		pthread_join(th[i], NULL);
		if (jobs[i].aborted)
			printf("client: conn %u aborted (received %llu, sent %llu bytes)\n", i,
			       (unsigned long long)jobs[i].got, (unsigned long long)jobs[i].sent);
		if (jobs[i].ok && !jobs[i].err)
			ok++;
		else
			fprintf(stderr, "smcr-stream: connection %u: %s%s\n", i,
				jobs[i].err ? strerror(-jobs[i].err) : "data mismatch",
				jobs[i].eof ? " (the stream ended: no error from the transport)" : "");
		got += jobs[i].got;
		sent += jobs[i].sent;
		if (jobs[i].c.s && smcr_sock_info(jobs[i].c.s, &info) == 0)
			conn_fo += info.failovers;
		c_close(&jobs[i].c);
	}
	dt = now_s() - t0;
	print_stats("client");
	if (o.bytes)
		printf("client: %u of %u connection(s) verified %llu bytes each way (SHA-256)\n",
		       ok, o.conns, (unsigned long long)o.bytes);
	else
		printf("client: %u of %u connection(s) verified (SHA-256), open-ended: received %llu, sent %llu bytes in %.1f s (%.2f MB/s both ways)\n",
		       ok, o.conns, (unsigned long long)got, (unsigned long long)sent,
		       dt, (double)(got + sent) / dt / 1e6);
	printf("client: connection failovers %llu\n", (unsigned long long)conn_fo);
	printf("result verify %s %u %llu %s\n", tnames[o.t], o.conns,
	       (unsigned long long)o.bytes, ok == o.conns && ok ? "ok" : "FAIL");
	free(jobs);
	free(th);
	return ok == o.conns && ok ? 0 : 1;
}

static uint64_t parse_size(const char *s)
{
	char *end;
	double v = strtod(s, &end);

	switch (*end) {
	case 'k': case 'K': v *= 1024; break;
	case 'm': case 'M': v *= 1024 * 1024; break;
	case 'g': case 'G': v *= 1024.0 * 1024 * 1024; break;
	default: break;
	}
	return (uint64_t)v;
}

static void usage(FILE *f)
{
	fprintf(f,
		"usage: smcr-stream server [-t smcr|tcp|smc] [-p PORT] [-n CONNS]\n"
		"       smcr-stream client HOST [-t smcr|tcp|smc] [-p PORT] [-m bw|lat|verify]\n"
		"                   [-s SIZE] [-b BYTES] [-d SECONDS] [-n CONNS] [-i ITERS]\n"
		"       failover tests: [--ctl FILE] [--ticks FILE] [--fault-after BYTES:SPEC]\n"
		"                   [--linger SECONDS]\n"
		"Transports: smcr (this stack, falls back to TCP), tcp, smc (kernel AF_SMC).\n"
		"Defaults: port 12345, bw, 64K messages, 64M bytes, 1 connection, 1000 iterations.\n");
}

int main(int argc, char **argv)
{
	static const struct option lo[] = {
		{ "help", no_argument, NULL, 'h' },
		{ "ctl", required_argument, NULL, 'C' },
		{ "ticks", required_argument, NULL, 'T' },
		{ "fault-after", required_argument, NULL, 'F' },
		{ "linger", required_argument, NULL, 'L' },
		{ NULL, 0, NULL, 0 },
	};
	bool server, mon_running = false;
	pthread_t mon;
	int c, ret;

	if (argc < 2) {
		usage(stderr);
		return 2;
	}
	if (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help")) {
		usage(stdout);
		return 0;
	}
	server = !strcmp(argv[1], "server");
	if (!server && strcmp(argv[1], "client")) {
		usage(stderr);
		return 2;
	}
	optind = 2;
	if (!server) {
		if (argc < 3) {
			usage(stderr);
			return 2;
		}
		o.host = argv[2];
		optind = 3;
	}
	while ((c = getopt_long(argc, argv, "t:p:m:s:b:d:n:i:h", lo, NULL)) != -1) {
		switch (c) {
		case 't':
			o.t = !strcmp(optarg, "tcp") ? T_TCP : !strcmp(optarg, "smc") ? T_SMC : T_SMCR;
			break;
		case 'p': o.port = atoi(optarg); break;
		case 'm':
			o.mode = !strcmp(optarg, "lat") ? M_LAT :
				 !strcmp(optarg, "verify") ? M_VERIFY : M_BW;
			break;
		case 's': o.size = (size_t)parse_size(optarg); break;
		case 'b': o.bytes = parse_size(optarg); break;
		case 'd': o.seconds = atof(optarg); break;
		case 'n': o.conns = (unsigned int)atoi(optarg); break;
		case 'i': o.iters = (unsigned int)atoi(optarg); break;
		case 'C': o.ctl_file = optarg; break;
		case 'L': o.linger = atof(optarg); break;
		case 'T': o.ticks_file = optarg; break;
		case 'F':
			o.fault_after_spec = strchr(optarg, ':');
			if (!o.fault_after_spec) {
				usage(stderr);
				return 2;
			}
			o.fault_after = parse_size(optarg);
			o.fault_after_spec++;
			break;
		case 'h': usage(stdout); return 0;
		default: usage(stderr); return 2;
		}
	}
	if (!o.size || !o.conns) {
		usage(stderr);
		return 2;
	}
	signal(SIGUSR1, on_usr1);
	signal(SIGUSR2, on_usr2);
	if (o.t == T_SMCR) {
		ret = smcr_ctx_create(NULL, &ctx);
		if (ret) {
			fprintf(stderr, "smcr-stream: %s\n", strerror(-ret));
			return 1;
		}
		printf("%s: syn-option %s\n", server ? "server" : "client",
		       smcr_syn_option_str(smcr_ctx_syn_option(ctx)));
		fflush(stdout);
	}
	if (ctx && (o.ctl_file || o.ticks_file || o.fault_after_spec)) {
		if (pthread_create(&mon, NULL, monitor, NULL) == 0)
			mon_running = true;
	}
	if (server)
		ret = run_server();
	else
		ret = o.mode == M_LAT ? run_lat() : o.mode == M_VERIFY ? run_verify() : run_bw();
	if (ctx && o.linger > 0) {
		/* Keep the link groups (idle now) a while: TEST LINK tests. */
		printf("%s: lingering %.1f s\n", server ? "server" : "client", o.linger);
		fflush(stdout);
		usleep((useconds_t)(o.linger * 1e6));
		print_stats(server ? "server" : "client");
	}
	if (mon_running) {
		monitor_stop = true;
		pthread_join(mon, NULL);
	}
	fflush(stdout);
	smcr_ctx_destroy(ctx);
	return ret;
}
