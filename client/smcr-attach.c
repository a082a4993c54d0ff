/* SPDX-License-Identifier: BSD-3-Clause */
/* smcr-attach: the kernel's nbd driver on an smcrd export, over the kernel's
 * AF_SMC sockets (SMC-R when both ends can, else TCP) or plain TCP, with no
 * user space process on the data path.
 *
 * It opens the sockets, does the NBD handshake on each (fixed newstyle,
 * NBD_OPT_GO; no structured replies: the kernel driver has none) with the
 * project's NBD client code, and hands them to the nbd driver over its
 * generic netlink interface (NBD_CMD_CONNECT with NBD_ATTR_SOCKETS).  Then
 * it stays to watch the device: when the driver reports a dead connection
 * (NBD_CMD_LINK_DEAD on the "nbd_mc_group" multicast group), it connects
 * and handshakes a new socket, with backoff, and gives it to the driver
 * (NBD_CMD_RECONFIGURE), which waits for it up to the dead-connection
 * timeout instead of failing I/O.  It exits when the device is
 * disconnected (smcr-attach -d, nbd-client -d).  Given a comma list of
 * servers, new sockets go to the next server after a dead connection or a
 * failed attempt (-F: the engine's rotation, nbd-conn.h).
 *
 * Errors are -errno inside; the exit status is 0, 1 (runtime) or 2
 * (usage). */
#include <config.h>

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <netdb.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <pthread.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <linux/genetlink.h>
#include <linux/nbd-netlink.h>
#include <linux/netlink.h>
#include <sys/socket.h>

#include "applog.h"
#include "monotime.h"
#include "nbd-client.h"
#include "nbd-conn.h"
#include "nbdc-settings.h"
#include "nbdc-uri.h"
#include "smcr-attach-int.h"
#include "smcr-attach-ublk.h"
#include "transport.h"

#ifndef AF_SMC
#define AF_SMC 43
#endif
#define SMCPROTO_SMC	0	/* AF_SMC over IPv4 */
#define SMCPROTO_SMC6	1	/* AF_SMC over IPv6 */

#define EXIT_USAGE	2
#define UBLK_MAX_QUEUE_DEPTH_OPT 4096	/* ublk's tags per queue */
/* SO_SNDBUF/SO_RCVBUF of AF_SMC sockets unless -B: Linux's SMC-R then
 * gets 256 KiB buffers (64 KiB by net.smc.wmem/rmem; 512 KiB at most,
 * not faster on 1 MiB reads in the lane). */
#define SMC_SOCKBUF	(256 << 10)
#define REFUSED_RETRY_MS 250		/* a refused reconnect: again in */


volatile sig_atomic_t attach_stop;
static int64_t main_ms;		/* when main() began (--ublk --recover's figures) */
/* Without -F: the server new sockets go to (o->srv[]); a dead connection
 * or a failed attempt moves it on to the next. */
static unsigned srv_cur;

static const struct nbdc_server *cur_srv(const struct opts *o)
{
	return &o->srv[srv_cur];
}

static void next_srv(const struct opts *o)
{
	srv_cur = (srv_cur + 1) % o->nsrv;
}

static void on_signal(int sig)
{
	(void)sig;
	attach_stop = 1;
}

/* --- sockets and the NBD handshake ---------------------------------------- */

/* SO_SNDBUF and SO_RCVBUF of fd to v: the ...FORCE options first (root),
 * as SO_RCVBUF is capped at net.core.rmem_max (208 KiB by default) and
 * Linux's SMC-R sizes a buffer at half of what the socket keeps (twice
 * v), so v gives v-sized buffers. */
static int set_sockbuf(int fd, int v)
{
	if (setsockopt(fd, SOL_SOCKET, SO_SNDBUFFORCE, &v, sizeof(v)) < 0 &&
	    setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &v, sizeof(v)) < 0)
		return -errno;
	if (setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &v, sizeof(v)) < 0 &&
	    setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &v, sizeof(v)) < 0)
		return -errno;
	return 0;
}

static int connect_one(const struct opts *o, int *fdp)
{
	struct addrinfo hints = { .ai_socktype = SOCK_STREAM }, *res, *ai;
	int r, fd = -1, sockbuf = o->sockbuf;

	if (sockbuf < 0)
		sockbuf = o->tcp ? 0 : SMC_SOCKBUF;
	r = getaddrinfo(cur_srv(o)->host, cur_srv(o)->port, &hints, &res);
	if (r)
		return r == EAI_SYSTEM ? -errno : -EHOSTUNREACH;
	r = -ECONNREFUSED;
	for (ai = res; ai; ai = ai->ai_next) {
		if (o->tcp)
			fd = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC, IPPROTO_TCP);
		else
			fd = socket(AF_SMC, SOCK_STREAM | SOCK_CLOEXEC,
				    ai->ai_family == AF_INET6 ? SMCPROTO_SMC6 : SMCPROTO_SMC);
		if (fd < 0) {
			r = -errno;
			continue;
		}
		/* Before connect: Linux's SMC-R sizes its buffers (RMBs) from
		 * them when the connection is set up. */
		if (sockbuf && set_sockbuf(fd, sockbuf) < 0)
			log_warn("SO_SNDBUF/SO_RCVBUF %d: %s", sockbuf, strerror(errno));
		if (connect(fd, ai->ai_addr, ai->ai_addrlen) == 0)
			break;
		r = -errno;
		close(fd);
		fd = -1;
	}
	freeaddrinfo(res);
	if (fd < 0)
		return r;
	*fdp = fd;
	return 0;
}

/* A connected socket in the transmission phase of the export, blocking
 * again (the driver's), in *fdp; the export's info in *info. */
static int open_conn(const struct opts *o, struct nbd_export_info *info, int *fdp)
{
	struct bd_transport *t;
	struct nbd_client *c;
	int fd = -1, kfd, r;

	r = connect_one(o, &fd);
	if (r < 0)
		return r;
	r = bd_tcp_transport_new(fd, &t);
	if (r < 0) {
		close(fd);
		return r;
	}
	r = nbd_client_open(t, 10000, &c);	/* owns t from here */
	if (r < 0)
		return r;
	r = nbd_client_go(c, o->export, info);
	if (r < 0)
		goto close_client;
	kfd = dup(fd);
	if (kfd < 0) {
		r = -errno;
		goto close_client;
	}
	if (fcntl(kfd, F_SETFL, fcntl(kfd, F_GETFL) & ~O_NONBLOCK) < 0) {
		r = -errno;
		close(kfd);
		goto close_client;
	}
	*fdp = kfd;
	r = 0;
close_client:
	nbd_client_close(c);
	return r;
}

/* --- the device ------------------------------------------------------------ */

static int parse_dev(const char *s, int *index)
{
	char *end;
	long v;

	if (!strncmp(s, "/dev/", 5))
		s += 5;
	if (strncmp(s, "nbd", 3))
		return -EINVAL;
	errno = 0;
	v = strtol(s + 3, &end, 10);
	if (errno || *end || end == s + 3 || v < 0 || v > 1 << 20)
		return -EINVAL;
	*index = (int)v;
	return 0;
}

/* N of "ublkbN", "/dev/ublkbN" or "N". */
static int parse_ublk(const char *s, int *id)
{
	char *end;
	long v;

	if (!strncmp(s, "/dev/", 5))
		s += 5;
	if (!strncmp(s, "ublkb", 5))
		s += 5;
	errno = 0;
	v = strtol(s, &end, 10);
	if (errno || *end || end == s || v < 0 || v >= 1 << 20)
		return -EINVAL;
	*id = (int)v;
	return 0;
}

static int attach(struct nl *n, const struct opts *o)
{
	struct nbd_export_info info;
	int fds[MAX_CONNS], r;
	unsigned i, nfds = 0, want = o->conns;
	uint16_t flags;

	for (;;) {
		r = open_conn(o, &info, &fds[nfds]);
		/* The first connection takes the first server that answers. */
		if (r < 0 && nfds == 0 && srv_cur + 1 < o->nsrv) {
			log_warn("%s:%s export '%s': %s; trying the next server", cur_srv(o)->host,
				 cur_srv(o)->port, o->export, strerror(-r));
			next_srv(o);
			continue;
		}
		if (r < 0) {
			log_err("%s:%s export '%s': %s", cur_srv(o)->host, cur_srv(o)->port,
				o->export, strerror(-r));
			goto close_fds;
		}
		nfds++;
		if (nfds == 1 && !(info.flags & NBD_FLAG_CAN_MULTI_CONN) && want > 1) {
			log_info("the export does not allow multi-conn: one connection");
			want = 1;
		}
		if (nfds >= want)
			break;
	}
	flags = info.flags;
	if (o->readonly)
		flags |= NBD_FLAG_READ_ONLY;
	nl_msg_begin(n, n->family, NBD_CMD_CONNECT);
	nl_put_u32(n, NBD_ATTR_INDEX, (uint32_t)o->index);
	nl_put_u64(n, NBD_ATTR_SIZE_BYTES, info.size);
	nl_put_u64(n, NBD_ATTR_BLOCK_SIZE_BYTES,
		 o->block ? o->block : info.pref_block >= 512 && info.pref_block <= 4096 ?
		 info.pref_block : 4096);
	nl_put_u64(n, NBD_ATTR_SERVER_FLAGS, flags);
	nl_put_u64(n, NBD_ATTR_TIMEOUT, o->timeout_s);
	nl_put_u64(n, NBD_ATTR_DEAD_CONN_TIMEOUT, o->dead_s);
	r = nl_socks(n, fds, nfds);
	if (r == 0)
		r = nl_send(n, NULL, NULL);
	if (r < 0) {
		log_err("/dev/nbd%d: the nbd driver refused the connection: %s", o->index,
			strerror(-r));
		if (!o->tcp && r == -EINVAL)
			log_err("the kernel's nbd driver may take TCP and UNIX sockets only "
				"(\"nbd: Check socket type\", in Linux 6.9 and 6.1.y stable): an "
				"AF_SMC socket that is on SMC-R is refused (one that fell back to "
				"TCP is taken); see dmesg, use --tcp, or a driver that takes AF_SMC "
				"(smcrbd's tests/vm/nbd-smc.patch)");
		goto close_fds;
	}
	log_info("/dev/nbd%d: %s:%s export '%s', %llu bytes, %u connection(s) over %s",
		 o->index, cur_srv(o)->host, cur_srv(o)->port, o->export,
		 (unsigned long long)info.size, nfds,
		 o->tcp ? "TCP" : "AF_SMC");
	r = 0;
close_fds:
	/* The driver holds its own references to the sockets. */
	for (i = 0; i < nfds; i++)
		close(fds[i]);
	return r;
}

/* One new socket for a dead one; 0 once the driver took it. */
static int reconnect(struct nl *n, const struct opts *o)
{
	struct nbd_export_info info;
	int fd, r;

	r = open_conn(o, &info, &fd);
	if (r < 0)
		return r;
	nl_msg_begin(n, n->family, NBD_CMD_RECONFIGURE);
	nl_put_u32(n, NBD_ATTR_INDEX, (uint32_t)o->index);
	r = nl_socks(n, &fd, 1);
	if (r == 0)
		r = nl_send(n, NULL, NULL);
	close(fd);
	return r;
}


/* Until the device is disconnected: a new socket for every dead one. */
static int watch(const struct opts *o)
{
	struct nl ev;
	struct nl ctl;
	unsigned pending = 0, reconnects = 0;
	int64_t next_try = 0, next_status = 0;
	int backoff = 100, r;
	bool refused = false;

	r = nl_open(&ctl);
	if (r < 0)
		return r;
	r = nl_open(&ev);
	if (r < 0)
		goto close_ctl;
	if (!ev.mcast || setsockopt(ev.fd, SOL_NETLINK, NETLINK_ADD_MEMBERSHIP, &ev.mcast,
				    sizeof(ev.mcast)) < 0) {
		log_warn("no nbd multicast group: dead connections are not replaced");
		ev.mcast = 0;
	}
	while (!attach_stop) {
		struct pollfd p = { .fd = ev.fd, .events = POLLIN };
		int64_t t = now_ms();

		if (t >= next_status) {
			r = nl_connected(&ctl, o->index);
			if (r == 0 || r == -ENODEV) {
				log_info("/dev/nbd%d was disconnected (%u reconnect(s))",
					 o->index, reconnects);
				r = 0;
				break;
			}
			next_status = t + 1000;
		}
		if (pending && t >= next_try) {
			r = reconnect(&ctl, o);
			if (r == 0) {
				pending--;
				reconnects++;
				backoff = 100;
				refused = false;
				log_info("/dev/nbd%d: a dead connection was replaced (%s:%s)",
					 o->index, cur_srv(o)->host, cur_srv(o)->port);
			} else {
				/* Refused (no listener: smcrd restarting) is cheap
				 * for the server: again soon, without growing the
				 * backoff, and logged once in a row. */
				int wait = r == -ECONNREFUSED ? REFUSED_RETRY_MS : backoff;

				if (r != -ECONNREFUSED || !refused)
					log_warn("/dev/nbd%d: reconnect to %s:%s: %s (again in %d ms%s)",
						 o->index, cur_srv(o)->host, cur_srv(o)->port,
						 strerror(-r), wait,
						 o->nsrv > 1 ? ", to the next server" : "");
				refused = r == -ECONNREFUSED;
				next_srv(o);
				next_try = t + wait;
				if (r != -ECONNREFUSED)
					backoff = backoff < 4000 ? backoff * 2 : 5000;
			}
			continue;
		}
		poll(&p, 1, pending ? 50 : 500);
		if (ev.mcast) {
			unsigned d = nl_link_dead(&ev, o->index);

			if (d) {
				log_warn("/dev/nbd%d: %u connection(s) died: reconnecting%s",
					 o->index, d, o->nsrv > 1 && !pending ?
					 " to the next server" : "");
				/* Lost its server: the next one (once for a batch). */
				if (!pending)
					next_srv(o);
				pending += d;
				next_try = 0;
			}
		}
	}
	close(ev.fd);
close_ctl:
	close(ctl.fd);
	return r;
}

static int detach(int index)
{
	struct nl n;
	int r = nl_open(&n);

	if (r < 0)
		return r;
	r = nl_disconnect(&n, index);
	close(n.fd);
	return r;
}

/* --- command line ---------------------------------------------------------- */

void attach_engine_opts(const struct opts *o, struct nbdc_opts *no)
{
	*no = (struct nbdc_opts){
		.host = o->srv[0].host,
		.port = o->srv[0].port,
		.servers = o->srv + 1,
		.nservers = o->nsrv - 1,
		.export = o->export,
		.transport = o->unix_sock ? NBDC_UNIX : o->tcp ? NBDC_TCP : NBDC_SMCR,
		.connections = o->conns,
		.timeout_ms = o->dead_s ? o->dead_s * 1000 : 1,
		.read_only = o->readonly,
		.ctl_name = "smcr-attach",
		.tls = o->tls ? NBDC_TLS_REQUIRE : NBDC_TLS_OFF,
		.tls_certificates = o->tls_certificates,
		.tls_psk_file = o->tls_psk_file,
		.tls_username = o->tls_username,
		.tls_no_verify_peer = o->tls_no_verify_peer,
	};
	nbdc_settings_apply(&o->set, no);
	no->transport = o->unix_sock ? NBDC_UNIX : o->tcp ? NBDC_TCP : NBDC_SMCR;
	no->tls = o->tls ? nbdc_settings_tls(&o->set) == NBDC_TLS_ALLOW ? NBDC_TLS_ALLOW :
			   NBDC_TLS_REQUIRE : NBDC_TLS_OFF;
}

/* --ublk: the engine serves a ublk device (smcr-attach-ublk.c). */
static int run_ublk(const struct opts *o)
{
	struct ublk_args a = {
		.dev_id = o->ublk_id,
		.recover = o->recover || o->standby,
		.standby = o->standby,
		.recover_auto = o->recover_auto,
		.block = o->block,
		.queue_depth = o->qdepth,
		.readonly = o->readonly,
		.main_ms = main_ms,
	};

	attach_engine_opts(o, &a.no);
	return ublk_run(&a, &attach_stop);
}

enum {
	OPT_UBLK = 0x100, OPT_RECOVER, OPT_STANDBY, OPT_OLD_TIMEOUT,
	OPT_SETTING = 0x200,	/* + the id of an nbdc setting */
};

/* An export's URI instead of HOST[:PORT],... EXPORT: its address, export,
 * transport and TLS settings into o (pointing into a static copy). */
static int uri_opts(const char *uri, struct opts *o)
{
	static struct nbdc_uri u;
	char msg[600];
	int r = nbdc_uri_parse(uri, &u);

	if (r < 0) {
		nbdc_uri_strerror(uri, &u, r, msg, sizeof(msg));
		fprintf(stderr, "smcr-attach: %s\n", msg);
		return EXIT_USAGE;
	}
	snprintf(o->srv[0].host, sizeof(o->srv[0].host), "%s", u.host);
	snprintf(o->srv[0].port, sizeof(o->srv[0].port), "%s", u.port);
	o->nsrv = 1;
	o->export = u.export;
	o->unix_sock = u.transport == NBDC_UNIX;
	if (u.transport == NBDC_TCP)
		o->tcp = true;
	if (u.tls)
		o->tls = true;
	if (u.tls_certificates[0])
		o->tls_certificates = u.tls_certificates;
	if (u.tls_psk_file[0])
		o->tls_psk_file = u.tls_psk_file;
	if (u.tls_username[0])
		o->tls_username = u.tls_username;
	if (u.tls_verify_peer >= 0)
		o->tls_no_verify_peer = !u.tls_verify_peer;
	return 0;
}

static void usage(FILE *f, const struct nbdc_settings *set)
{
	fprintf(f,
"Usage: smcr-attach [OPTION]... HOST[:PORT][,HOST[:PORT]]... EXPORT /dev/nbdN\n"
"       smcr-attach -F --exec CMD [OPTION]... HOST[:PORT][,...] EXPORT\n"
"       smcr-attach --ublk[=N] [--recover[=auto] | --standby] [OPTION]... HOST[:PORT][,...]\n"
"                   EXPORT\n"
"       smcr-attach [-F | --ublk[=N]] [OPTION]... URI [/dev/nbdN]\n"
"       smcr-attach -d /dev/nbdN | /dev/ublkbN\n"
"Attaches an smcrd export to the kernel's nbd driver over AF_SMC (SMC-R, or\n"
"TCP when SMC-R is not possible) and replaces connections that die; with\n"
"-F, over socket pairs to its own forwarder on libsmcr (stock kernels);\n"
"with --ublk, as a ublk device (/dev/ublkbN) that it serves itself.\n"
"\n"
"  -F, --forward           the driver on socket pairs; smcr-attach forwards\n"
"                          its requests over libsmcr (SMC-R, TCP fallback),\n"
"                          with reconnect and resend\n"
"      --ublk[=N]          a ublk device /dev/ublkbN (N: the next free one)\n"
"                          served over libsmcr (SMC-R, TCP fallback) with\n"
"                          reconnect and resend; needs ublk_drv (Linux >= 6.0,\n"
"                          USER_COPY from 6.5); it outlives a killed smcr-attach\n"
"      --recover[=auto]    with --ublk=N: take over /dev/ublkbN, whose server\n"
"                          died; its requests in flight are issued again.\n"
"                          auto: make it if there is none, else as --standby\n"
"                          (at once if its server is gone): a service's restarts\n"
"      --standby           with --ublk=N: connect now, wait for /dev/ublkbN's\n"
"                          server to die, then take the device over at once\n"
"  -Q, --queue-depth N     with --ublk: requests per queue (default 128)\n"
"  -E, --exec CMD          with -F, no device: run CMD with the driver's ends\n"
"                          of the pairs (fds in $SMCR_ATTACH_FDS; tests)\n"
"  -B, --buffer-size N[K|M]  SO_SNDBUF and SO_RCVBUF of the sockets (default\n"
"                          256K on AF_SMC: Linux's SMC-R buffers follow them;\n"
"                          0: the kernel's, net.smc.wmem/rmem)\n"
"  -b, --block-size N      logical block size (default: the export's, else 4096)\n"
"  -T, --driver-timeout S  I/O timeout of the driver in seconds (default 30;\n"
"                          with -F: the dead-timeout + 30); --timeout S is an\n"
"                          old spelling of it\n"
"  -d, --detach            disconnect /dev/nbdN, or remove /dev/ublkbN\n"
"  -v, --verbose           debug messages\n"
"  -h, --help, -V, --version\n"
"Connection settings (the same names in nbdkit-smcr-plugin and smcr-fuse;\n"
"any tls-* one implies --tls):\n");
	nbdc_settings_help(f, set, NBDC_IN_ATTACH);
	fprintf(f,
"\n"
"PORT defaults to %d (smcrd's SMC-R port; with --tls %d, NBD/TCP).  A comma\n"
"list names gateways of one export: a connection that loses its server\n"
"reconnects to the next one, in turn.  It stays in the foreground until the\n"
"device is disconnected (--ublk: removed; a signal removes it too).\n"
"URI: smcr://HOST[:PORT]/EXPORT, nbd://..., nbds://... (TLS), and with -F or\n"
"--ublk nbd+unix:///EXPORT?socket=PATH or nbds+unix://... (smcrd -U).\n", NBDC_SMCR_PORT, NBD_DEFAULT_PORT);
}

int main(int argc, char **argv)
{
	static const struct option own[] = {
		{ "forward", no_argument, NULL, 'F' },
		{ "exec", required_argument, NULL, 'E' },
		{ "ublk", optional_argument, NULL, OPT_UBLK },
		{ "recover", optional_argument, NULL, OPT_RECOVER },
		{ "standby", no_argument, NULL, OPT_STANDBY },
		{ "queue-depth", required_argument, NULL, 'Q' },
		{ "buffer-size", required_argument, NULL, 'B' },
		{ "block-size", required_argument, NULL, 'b' },
		{ "driver-timeout", required_argument, NULL, 'T' },
		{ "timeout", required_argument, NULL, OPT_OLD_TIMEOUT },
		{ "detach", no_argument, NULL, 'd' },
		{ "verbose", no_argument, NULL, 'v' },
		{ "help", no_argument, NULL, 'h' },
		{ "version", no_argument, NULL, 'V' },
	};
	struct option lo[sizeof(own) / sizeof(own[0]) + 2 * NBDC_NSETTINGS + 1];
	unsigned nlo = 0, k;
	char err[256];
	/* static: its settings' strings live until exit */
	static struct opts o = { .conns = 1, .timeout_s = 30, .dead_s = 30, .sockbuf = -1,
				 .ublk_id = -1 };
	struct sigaction sa = { .sa_handler = on_signal };
	bool do_detach = false, timeout_set = false;
	struct nl n;
	char *end;
	int c, r;

	main_ms = now_ms();
	applog_set_ident("smcr-attach");
	if (nbdc_settings_init(&o.set) < 0 ||
	    nbdc_setting_default(&o.set, NBDC_S_CONNECTIONS, "1") < 0 ||
	    nbdc_setting_default(&o.set, NBDC_S_CTL, "smcr-attach") < 0)
		return 1;
	/* Its own options, then the table's: each by its name, and by its
	 * old one (timeout: only as dead-timeout; --timeout is the
	 * driver's, as it was). */
	for (k = 0; k < sizeof(own) / sizeof(own[0]); k++)
		lo[nlo++] = own[k];
	for (k = 0; k < NBDC_NSETTINGS; k++) {
		const struct nbdc_setting *st = &nbdc_settings[k];
		int has = st->sets >= 0 ? no_argument : st->implied ? optional_argument :
			  required_argument;

		if (!(st->in & NBDC_IN_ATTACH))
			continue;
		if (k != NBDC_S_TIMEOUT)
			lo[nlo++] = (struct option){ st->name, has, NULL, OPT_SETTING + (int)k };
		if (st->alias)
			lo[nlo++] = (struct option){ st->alias, has, NULL, OPT_SETTING + (int)k };
	}
	lo[nlo] = (struct option){ NULL, 0, NULL, 0 };
	while ((c = getopt_long(argc, argv, "C:tFE:B:b:T:D:rQ:dvhV", lo, NULL)) != -1) {
		unsigned long v = 0;
		int id = c >= OPT_SETTING ? c - OPT_SETTING :
			 c < 0x100 ? nbdc_setting_short((char)c, NBDC_IN_ATTACH) : -1;

		if (id >= 0) {
			if (nbdc_setting_set(&o.set, id, optarg, err, sizeof(err)) < 0) {
				fprintf(stderr, "smcr-attach: %s\n", err);
				return EXIT_USAGE;
			}
			continue;
		}
		if (c == OPT_OLD_TIMEOUT) {
			fprintf(stderr, "smcr-attach: --timeout S is an old spelling of "
				"--driver-timeout S (-T S)\n");
			c = 'T';
		}

		if (c == 'E') {
			o.exec = optarg;
			continue;
		}
		if (c == OPT_UBLK) {
			o.ublk = true;
			if (optarg && parse_ublk(optarg, &o.ublk_id) < 0) {
				fprintf(stderr, "smcr-attach: --ublk=N: N of /dev/ublkbN\n");
				return EXIT_USAGE;
			}
			continue;
		}
		if (c == OPT_RECOVER) {
			if (optarg && strcmp(optarg, "auto")) {
				fprintf(stderr, "smcr-attach: --recover takes no value but auto\n");
				return EXIT_USAGE;
			}
			o.recover = !optarg;
			o.recover_auto = optarg;
			continue;
		}
		if (c == OPT_STANDBY) {
			o.standby = true;
			continue;
		}
		if (c == 'B') {
			errno = 0;
			v = strtoul(optarg, &end, 10);
			if (*end == 'K' || *end == 'k')
				v <<= 10, end++;
			else if (*end == 'M' || *end == 'm')
				v <<= 20, end++;
			if (errno || *end || !*optarg || (v && v < 4096) || v > 1u << 30) {
				fprintf(stderr, "smcr-attach: buffer size: 0, or 4K to 1024M\n");
				return EXIT_USAGE;
			}
			o.sockbuf = (int)v;
			continue;
		}
		if (optarg) {
			errno = 0;
			v = strtoul(optarg, &end, 10);
			if (errno || *end || !*optarg || v > 1u << 20) {
				fprintf(stderr, "smcr-attach: bad number '%s'\n", optarg);
				return EXIT_USAGE;
			}
		}
		switch (c) {
		case 'F': o.forward = true; break;
		case 'b':
			if (v < 512 || v > 4096 || (v & (v - 1))) {
				fprintf(stderr, "smcr-attach: block size: 512, 1024, 2048 or 4096\n");
				return EXIT_USAGE;
			}
			o.block = (unsigned)v;
			break;
		case 'Q':
			if (v < 1 || v > UBLK_MAX_QUEUE_DEPTH_OPT) {
				fprintf(stderr, "smcr-attach: queue depth: 1 to %d\n",
					UBLK_MAX_QUEUE_DEPTH_OPT);
				return EXIT_USAGE;
			}
			o.qdepth = (unsigned)v;
			break;
		case 'T': o.timeout_s = (unsigned)v; timeout_set = true; break;
		case 'd': do_detach = true; break;
		case 'v': smcr_log_set_level(SMCR_LOG_DEBUG); break;
		case 'h': usage(stdout, &o.set); return 0;
		case 'V': printf("smcr-attach (%s) %s\n", PACKAGE_NAME, PACKAGE_VERSION); return 0;
		default: usage(stderr, &o.set); return EXIT_USAGE;
		}
	}
	o.conns = nbdc_settings_uint(&o.set, NBDC_S_CONNECTIONS);
	o.dead_s = (nbdc_settings_ms(&o.set, NBDC_S_TIMEOUT) + 999) / 1000;
	o.tcp = o.set.given[NBDC_S_TRANSPORT] && strcmp(o.set.val[NBDC_S_TRANSPORT], "smcr");
	o.readonly = nbdc_settings_bool(&o.set, NBDC_S_READ_ONLY);
	o.tls = o.set.given[NBDC_S_TLS] ? nbdc_settings_tls(&o.set) != NBDC_TLS_OFF :
		o.set.given[NBDC_S_TLS_CERTIFICATES] || o.set.given[NBDC_S_TLS_PSK_FILE] ||
		o.set.given[NBDC_S_TLS_USERNAME] || o.set.given[NBDC_S_TLS_HOSTNAME] ||
		o.set.given[NBDC_S_TLS_VERIFY_PEER];
	o.tls_certificates = o.set.val[NBDC_S_TLS_CERTIFICATES];
	o.tls_psk_file = o.set.val[NBDC_S_TLS_PSK_FILE];
	o.tls_username = o.set.val[NBDC_S_TLS_USERNAME];
	o.tls_no_verify_peer = o.set.given[NBDC_S_TLS_VERIFY_PEER] &&
			       !nbdc_settings_bool(&o.set, NBDC_S_TLS_VERIFY_PEER);
	if (do_detach && argc - optind == 1 && strstr(argv[optind], "ublkb")) {
		int id;

		if (parse_ublk(argv[optind], &id) < 0) {
			usage(stderr, &o.set);
			return EXIT_USAGE;
		}
		r = ublk_detach(id);
		if (r < 0) {
			fprintf(stderr, "smcr-attach: /dev/ublkb%d: %s\n", id, strerror(-r));
			return 1;
		}
		return 0;
	}
	if (do_detach) {
		if (argc - optind != 1 || parse_dev(argv[optind], &o.index) < 0) {
			usage(stderr, &o.set);
			return EXIT_USAGE;
		}
		r = detach(o.index);
		if (r < 0) {
			fprintf(stderr, "smcr-attach: /dev/nbd%d: %s\n", o.index, strerror(-r));
			return 1;
		}
		return 0;
	}
	if ((o.recover || o.recover_auto) && (!o.ublk || o.ublk_id < 0)) {
		fprintf(stderr, "smcr-attach: --recover needs --ublk=N\n");
		return EXIT_USAGE;
	}
	if (o.recover_auto && (o.recover || o.standby)) {
		fprintf(stderr, "smcr-attach: --recover=auto excludes --recover and --standby\n");
		return EXIT_USAGE;
	}
	if (o.standby && (!o.ublk || o.ublk_id < 0)) {
		fprintf(stderr, "smcr-attach: --standby needs --ublk=N\n");
		return EXIT_USAGE;
	}
	if (o.ublk && (o.forward || o.exec)) {
		fprintf(stderr, "smcr-attach: --ublk and --forward exclude each other\n");
		return EXIT_USAGE;
	}
	if (o.qdepth && !o.ublk) {
		fprintf(stderr, "smcr-attach: --queue-depth needs --ublk\n");
		return EXIT_USAGE;
	}
	if (o.exec && !o.forward) {
		fprintf(stderr, "smcr-attach: --exec needs --forward\n");
		return EXIT_USAGE;
	}
	if (o.set.given[NBDC_S_RMBE_SIZE] && !o.forward && !o.ublk) {
		fprintf(stderr, "smcr-attach: --rmbe-size needs --forward or --ublk (the kernel's "
			"AF_SMC sizes its buffers by -B)\n");
		return EXIT_USAGE;
	}
	if (optind < argc && strstr(argv[optind], "://")) {
		r = uri_opts(argv[optind], &o);
		if (r)
			return r;
		optind++;
	} else if (optind < argc && argc - optind >= 2) {
		r = nbdc_servers_parse(argv[optind], o.tls ? NBD_DEFAULT_PORT : NBDC_SMCR_PORT,
				       o.srv, NBDC_MAX_SERVERS, &o.nsrv);
		if (r < 0) {
			if (r == -E2BIG)
				fprintf(stderr, "smcr-attach: '%s': at most %d servers\n",
					argv[optind], NBDC_MAX_SERVERS);
			else
				fprintf(stderr, "smcr-attach: bad address '%s'\n", argv[optind]);
			return EXIT_USAGE;
		}
		o.export = argv[optind + 1];
		optind += 2;
	} else {
		usage(stderr, &o.set);
		return EXIT_USAGE;
	}
	if (o.tls && !o.forward && !o.ublk) {
		fprintf(stderr, "smcr-attach: TLS needs --forward (the kernel's nbd driver "
			"has none)\n");
		return EXIT_USAGE;
	}
	if (o.unix_sock && !o.forward && !o.ublk) {
		fprintf(stderr, "smcr-attach: a Unix socket needs --forward or --ublk\n");
		return EXIT_USAGE;
	}
	if (o.tls)
		o.tcp = true;
	if (o.exec || o.ublk ? argc - optind != 0 :
	    argc - optind != 1 || parse_dev(argv[optind], &o.index) < 0) {
		usage(stderr, &o.set);
		return EXIT_USAGE;
	}
	if (o.forward && !timeout_set)
		o.timeout_s = o.dead_s + 30;
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);
	if (o.forward)
		return fwd_run(&o);
	if (o.ublk)
		return run_ublk(&o);

	r = nl_open(&n);
	if (r < 0) {
		log_err("the kernel's nbd driver: %s%s", strerror(-r),
			r == -ENOENT ? " (modprobe nbd)" : "");
		return 1;
	}
	r = attach(&n, &o);
	close(n.fd);
	if (r < 0)
		return 1;
	r = watch(&o);
	if (r < 0) {
		log_err("watching /dev/nbd%d: %s", o.index, strerror(-r));
		return 1;
	}
	return 0;
}
