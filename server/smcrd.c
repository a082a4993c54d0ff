/* SPDX-License-Identifier: BSD-3-Clause */
/* smcrd: the smcrbd target daemon.  Exports files, block devices and RBD
 * images over NBD (TCP, TLS, Unix sockets, SMC-R).  This file: options,
 * main in named steps, the serve loop; its other rooms are listed in
 * smcrd-int.h. */
#include <config.h>

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <grp.h>
#include <limits.h>
#include <arpa/inet.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <syslog.h>
#include <unistd.h>

#include "smcrd-conf.h"
#include "smcrd-engine.h"
#include "smcrd-int.h"
#include "smcrd-export.h"
#include "applog.h"
#include "json.h"
#include "jsonw.h"
#include "prom.h"
#include "smcrd-metrics.h"
#include "strbuf.h"
#include "sysd.h"
#include "transport-tls.h"
#include "nbd-server.h"
#include "transport.h"

/* --- command line ------------------------------------------------------- */

static void usage(FILE *f)
{
	fprintf(f,
"Usage: smcrd [OPTION]... [--export NAME=PATH[,ro][,allow=PREFIX]...]...\n"
"Exports files and block devices over NBD, on TCP and SMC-R.\n"
"\n"
"  -e, --export SPEC        export NAME=PATH with options, comma-separated:\n"
"                             ro, allow=PREFIX (repeatable, e.g. 10.0.0.0/8),\n"
"                             blocksize=N, direct, desc=TEXT\n"
"  -c, --config FILE        read settings and exports from FILE (SIGHUP\n"
"                             re-reads its exports)\n"
"  -l, --listen ADDR        listen on ADDR (default: all addresses)\n"
"  -p, --port PORT          NBD over TCP port (default 10809)\n"
"  -U, --unix PATH          NBD on a Unix socket at PATH (then no TCP unless\n"
"                             --listen or --port is given)\n"
"      --smcr-port PORT     also serve NBD over SMC-R on PORT (CLC rendezvous;\n"
"                             TCP fallback when SMC-R is not possible)\n"
"  -q, --queue-depth N      requests in flight per connection (default 128)\n"
"  -t, --threads N          I/O worker threads (default: online CPUs)\n"
"  -m, --max-clients N      simultaneous clients (default 128)\n"
"      --max-clients-per-address N  of them from one address, and no more\n"
"                             than its share of the free ones (default 64;\n"
"                             0: no limit, no share)\n"
"      --max-link-groups-per-address N  SMC-R link groups for one address;\n"
"                             a first contact beyond it gets TCP (default 16;\n"
"                             0: no limit)\n"
"      --max-handshakes N   clients in the handshake (CLC, NBD options) at once;\n"
"                             one more evicts the oldest of the address\n"
"                             with the most (default 32)\n"
"      --max-handshakes-per-address N  of them from one address, and its\n"
"                             share (default: half of max-handshakes; 0: no\n"
"                             limit, no share)\n"
"      --handshake-timeout S  whole handshake, however the client trickles\n"
"                             (default 60)\n"
"      --request-timeout S  a request's payload that stops coming, or replies\n"
"                             not read, for S seconds close the client\n"
"                             (default 30)\n"
"      --idle-timeout S     close a client with nothing in flight that sent\n"
"                             and was sent nothing for S seconds (default 0:\n"
"                             never)\n"
"      --max-rmb-memory SIZE  SMC-R receive buffers per link group, and as\n"
"                             much for send buffers (default:\n"
"                             $SMCR_MAX_RMB_BYTES, else 256M)\n"
"  -M, --max-memory SIZE    request buffer memory, and as much for SMC-R's\n"
"                             pinned buffers (default 1G)\n"
"      --max-memory-per-address SIZE  of it, what the clients of one address\n"
"                             may hold, and its share (default: half of\n"
"                             max-memory; 0: no limit, no share)\n"
"  -d, --direct             O_DIRECT on every export\n"
"      --no-fixed-buffers   plain request buffers, not registered with io_uring\n"
"      --syn-option MODE    the SMC TCP option on SMC-R port SYN-ACKs: auto\n"
"                             (default), bpf (required) or off (CLC always)\n"
"      --eids LIST          user EIDs for SMC-Rv2 (Linux AF_SMC peers over RoCE\n"
"                             v2), comma-separated (default: $SMCR_EIDS; none:\n"
"                             SMC-R v1 only)\n"
"      --rdma-devices LIST  RDMA ports for SMC-R, dev[:port],... (default:\n"
"                             $SMCR_DEVICES, else every active RoCE port with\n"
"                             an IP address)\n"
"      --rmbe-size SIZE     SMC-R receive buffer per connection, 16K..512M\n"
"                             (default: $SMCR_RMBE_SIZE, else 4M shrinking\n"
"                             to 64K as a link group fills)\n"
"  -f, --foreground         stay in the foreground, log to stderr\n"
"  -P, --pidfile FILE       write the process id to FILE\n"
"  -L, --log-file FILE      append log lines to FILE\n"
"      --tls MODE           TLS on NBD/TCP (NBD_OPT_STARTTLS): off (default),\n"
"                             on (at the client's choice) or require\n"
"      --tls-certificates DIR  server-cert.pem, server-key.pem (and\n"
"                             ca-cert.pem) in DIR (default /etc/pki/smcrd)\n"
"      --tls-psk FILE       pre-shared keys (psktool's username:hexkey) instead\n"
"      --tls-verify-peer on|off  require a client certificate signed by\n"
"                             ca-cert.pem (default: on when DIR has one)\n"
"      --metrics-listen [ADDR:]PORT  serve smcrctl metrics' Prometheus text over\n"
"                             HTTP at GET /metrics on ADDR:PORT (ADDR:\n"
"                             127.0.0.1 when only PORT is given; default off)\n"
"      --ctl-group GROUP    members of GROUP may inject faults and run commands\n"
"                             on the control socket (smcrctl), as root may\n"
"      --log-level LEVEL    error, warning, info (default) or debug; the\n"
"                             config file's is applied again on SIGHUP\n"
"  -v, --verbose            debug logging (--log-level debug)\n"
"      --check-config       read the options, the config file, the exports and\n"
"                             the TLS files, say what is wrong (exit status 2)\n"
"                             or that all is well (0), and exit\n"
"  -h, --help               this text\n"
"  -V, --version            version\n"
"\n"
"Signals: SIGTERM/SIGINT drain in-flight requests and exit; SIGHUP reloads\n"
"the exports of the config file, connected clients stay.\n""Under systemd: sockets passed with LISTEN_FDS/LISTEN_PID serve NBD/TCP\n"
"instead of --listen/--port; READY=1 goes to NOTIFY_SOCKET when set.\n"
"See smcrd(8).\n");
}

/* --check-config: getopt's value (no short option), and whether given. */
#define OPT_CHECK	255
static bool check_config;

/* The options that are no setting (smcrd_settings[] has the others). */
static const struct option cli_opts[] = {
	{ "export", required_argument, NULL, 'e' },
	{ "config", required_argument, NULL, 'c' },
	{ "foreground", no_argument, NULL, 'f' },
	{ "verbose", no_argument, NULL, 'v' },
	{ "check-config", no_argument, NULL, OPT_CHECK },
	{ "help", no_argument, NULL, 'h' },
	{ "version", no_argument, NULL, 'V' },
};
#define NCLI_OPTS	(sizeof(cli_opts) / sizeof(cli_opts[0]))
/* getopt's value of setting i without a short option. */
#define OPT_SETTING	256

/* What getopt_long returns for st. */
static int opt_val(const struct cfg_setting *st)
{
	return st->short_opt ? st->short_opt : OPT_SETTING + (int)(st - smcrd_settings);
}

/* getopt_long's tables: cli_opts, then one option per setting. */
static void build_opts(struct option *lo, char *so)
{
	const struct cfg_setting *st;
	unsigned n = NCLI_OPTS;

	memcpy(lo, cli_opts, sizeof(cli_opts));
	strcpy(so, "e:c:fvhV");
	so += strlen(so);
	for (st = smcrd_settings; st->name; st++, n++) {
		lo[n].name = config_option(st);
		lo[n].has_arg = st->type == CFG_BOOL ? no_argument : required_argument;
		lo[n].flag = NULL;
		lo[n].val = opt_val(st);
		if (st->short_opt) {
			*so++ = st->short_opt;
			if (st->type != CFG_BOOL)
				*so++ = ':';
		}
	}
	memset(&lo[n], 0, sizeof(lo[n]));
	*so = '\0';
}

/* The setting of getopt's value c, or NULL. */
static const struct cfg_setting *setting_of(int c)
{
	const struct cfg_setting *st;

	for (st = smcrd_settings; st->name; st++)
		if (c == opt_val(st))
			return st;
	return NULL;
}

/* 0, 1 (--help or --version done) or -EINVAL (one line printed). */
static int parse_args(struct server *s, int argc, char **argv)
{
	struct option long_opts[NCLI_OPTS + CFG_MAX_SETTINGS + 1];
	char short_opts[2 * CFG_MAX_SETTINGS + 16];
	struct smcrd_config *cfg = &s->cfg;
	const struct cfg_setting *st;
	char err[256];
	int c, r;

	build_opts(long_opts, short_opts);
	while ((c = getopt_long(argc, argv, short_opts, long_opts, NULL)) != -1) {
		struct export_spec spec;

		switch (c) {
		case 'e':
			if (config_parse_export_arg(optarg, &spec, err, sizeof(err)) < 0) {
				fprintf(stderr, "smcrd: --export %s: %s\n", optarg, err);
				return -EINVAL;
			}
			if (export_list_add(&cfg->cli_exports, &spec) < 0) {
				fprintf(stderr, "smcrd: export '%s' given twice\n", spec.name);
				export_spec_free(&spec);
				return -EINVAL;
			}
			continue;
		case 'c':
			free(cfg->config_file);
			cfg->config_file = abs_path(s->cwd, optarg);
			continue;
		case 'f':
			cfg->foreground = true;
			continue;
		case 'v':
			cfg->verbose = true;
			continue;
		case OPT_CHECK:
			check_config = true;
			continue;
		case 'h':
			usage(stdout);
			return 1;
		case 'V':
			printf("smcrd (%s) %s\n", PACKAGE_NAME, PACKAGE_VERSION);
			return 1;
		}
		st = setting_of(c);
		if (!st)
			return -EINVAL;	/* getopt named the problem */
		r = config_setting_apply(cfg, st, optarg, s->cwd);
		if (r == -EINVAL && st->values)
			fprintf(stderr, "smcrd: --%s %s: %s\n", config_option(st), optarg,
				st->values);
		else if (r == -EINVAL)
			fprintf(stderr, "smcrd: bad value '%s' for --%s\n", optarg,
				config_option(st));
		else if (r < 0)
			fprintf(stderr, "smcrd: --%s: %s\n", config_option(st), strerror(-r));
		if (r < 0)
			return -EINVAL;
	}
	if (optind < argc) {
		fprintf(stderr, "smcrd: unexpected argument '%s'\n", argv[optind]);
		return -EINVAL;
	}
	if (!cfg->config_file && !cfg->cli_exports.n) {
		fprintf(stderr, "smcrd: nothing to export (use --export or --config)\n");
		return -EINVAL;
	}
	return 0;
}

/* --- main ----------------------------------------------------------------- */

static void serve(struct server *s, int sfd)
{
	struct pollfd pfd[LISTEN_MAX + 2];
	bool paused = false;
	unsigned i;

	for (i = 0; i < s->nlfd; i++) {
		pfd[i].fd = s->lfd[i];
		pfd[i].events = POLLIN;
	}
	pfd[s->nlfd].fd = sfd;
	pfd[s->nlfd].events = POLLIN;
	pfd[s->nlfd + 1].fd = s->smcr_ls ? smcr_listen_fd(s->smcr_ls) : -1;
	pfd[s->nlfd + 1].events = POLLIN;
	for (;;) {
		int r;

		/* Out of descriptors: the listeners wait (poll ignores fd -1). */
		for (i = 0; i < s->nlfd; i++)
			pfd[i].fd = paused ? -1 : s->lfd[i];
		pfd[s->nlfd + 1].fd = s->smcr_ls && !paused ? smcr_listen_fd(s->smcr_ls) : -1;
		r = poll(pfd, s->nlfd + 2, paused ? ACCEPT_PAUSE_MS : -1);
		paused = false;

		if (r < 0) {
			if (errno == EINTR)
				continue;
			log_err("poll: %s", strerror(errno));
			return;
		}
		if (pfd[s->nlfd].revents) {
			struct signalfd_siginfo si;

			if (read(sfd, &si, sizeof(si)) == sizeof(si)) {
				if (si.ssi_signo == SIGHUP) {
					daemon_reload_start(s);
				} else {
					log_info("%s: draining and exiting",
						 strsignal((int)si.ssi_signo));
					return;
				}
			}
		}
		for (i = 0; i < s->nlfd; i++)
			if (pfd[i].revents && listen_accept(s, s->lfd[i], false) == -EMFILE)
				paused = true;
		if (s->smcr_ls && pfd[s->nlfd + 1].revents &&
		    listen_accept(s, smcr_listen_fd(s->smcr_ls), true) == -EMFILE)
			paused = true;
	}
}

/* The SMC-R listener on the configured port, on every address. */
static int smcr_start(struct server *s)
{
	struct smcr_ctx_opts o = { .syn_option = (enum smcr_syn_option)s->cfg.syn_option,
				   .max_rmb_bytes = (size_t)s->cfg.max_rmb_memory,
				   .eids = s->cfg.eids,
				   .devices = s->cfg.rdma_devices,
				   .rmbe_size = (uint32_t)s->cfg.rmbe_size,
				   /* libsmcr's 0 is "from the environment" */
				   .max_lgrs_per_address = s->cfg.max_lgrs_per_address ?
							   s->cfg.max_lgrs_per_address : UINT_MAX };
	struct sockaddr_in sin = { .sin_family = AF_INET };
	char *end, pinned[24];
	struct smcr_setting set[3] = { { NULL, NULL } };
	unsigned long port = strtoul(s->cfg.smcr_port, &end, 10);
	unsigned nset = 0;
	int r;

	/* --max-memory also bounds the stack's pinned memory (every link
	 * group's RMBs and send buffers); SMCR_MAX_PINNED_BYTES overrides. */
	snprintf(pinned, sizeof(pinned), "%" PRIu64, s->cfg.max_memory);
	if (!getenv("SMCR_MAX_PINNED_BYTES"))
		set[nset++] = (struct smcr_setting){ "max_pinned_bytes", pinned };
	/* rmbe-size auto: up to SMCRD_RMBE_AUTO_MAX a connection (a 1 MiB
	 * WRITE then needs no cursor update per piece), fewer and smaller
	 * as a group fills; SMCR_RMBE_AUTO_MAX overrides. */
	if (!s->cfg.rmbe_size && !getenv("SMCR_RMBE_AUTO_MAX"))
		set[nset++] = (struct smcr_setting){ "rmbe_auto_max", SMCRD_RMBE_AUTO_MAX };
	if (nset)
		o.settings = set;

	if (*end || port == 0 || port > 65535) {
		log_err("--smcr-port %s: not a port number", s->cfg.smcr_port);
		return -EINVAL;
	}
	r = smcr_ctx_create(&o, &s->smcr);
	if (r < 0) {
		log_err("SMC-R: cannot start the stack: %s", strerror(-r));
		return r;
	}
	sin.sin_port = htons((uint16_t)port);
	if (s->cfg.listen && inet_pton(AF_INET, s->cfg.listen, &sin.sin_addr) != 1) {
		log_err("SMC-R listens on IPv4 addresses only: %s", s->cfg.listen);
		return -EINVAL;
	}
	r = smcr_listen(s->smcr, (struct sockaddr *)&sin, sizeof(sin), SOMAXCONN, &s->smcr_ls);
	if (r < 0) {
		log_err("SMC-R: listen on port %lu: %s", port, strerror(-r));
		return r;
	}
	log_info("listening for NBD over SMC-R on port %lu (TCP fallback when "
		 "SMC-R is not possible; SYN option: %s)", port,
		 smcr_ctx_syn_option(s->smcr) == SMCR_SYN_OPTION_BPF ? "bpf" :
		 "off, CLC always");
	return 0;
}

/* --ctl-group: a group name or number; -ENOENT when there is none. */
static int resolve_group(const char *name, gid_t *gid)
{
	struct group gr, *res = NULL;
	char buf[4096], *end;
	unsigned long v;

	errno = 0;
	v = strtoul(name, &end, 10);
	if (*name && !*end && !errno && v < (gid_t)-1) {
		*gid = (gid_t)v;
		return 0;
	}
	if (getgrnam_r(name, &gr, buf, sizeof(buf), &res) || !res)
		return -ENOENT;
	*gid = res->gr_gid;
	return 0;
}

static void shutdown_server(struct server *s)
{
	unsigned i;
	char b = 1;

	for (i = 0; i < s->nlfd; i++)
		close(s->lfd[i]);
	s->nlfd = 0;
	if (s->smcr_ls) {
		smcr_close(s->smcr_ls);
		s->smcr_ls = NULL;
	}
	pthread_mutex_lock(&s->lock);
	s->stopping = true;
	pthread_mutex_unlock(&s->lock);
	/* Handshakes in progress: wake them up, they end with an error. */
	if (write(s->cancel_wr, &b, 1) < 0)
		log_warn("cancel pipe: %s", strerror(errno));
	engine_drain(s->engine);
	pthread_mutex_lock(&s->lock);
	while (s->handshakes)
		pthread_cond_wait(&s->cond, &s->lock);
	pthread_mutex_unlock(&s->lock);
	engine_stop(s->engine);
	s->engine = NULL;
}

/* --- main's steps --------------------------------------------------------- */

/* The defaults, before the command line. */
static void server_init(struct server *s)
{
	memset(s, 0, sizeof(*s));
	config_defaults(&s->cfg);
	applog_set_ident("smcrd");
	applog_rate_peer_lines(true);
	pthread_mutex_init(&s->lock, NULL);
	iostat_init(&s->iostat);
	pthread_cond_init(&s->cond, NULL);
	s->cancel_fd = s->cancel_wr = -1;
	s->metrics_fd = -1;
	if (!getcwd(s->cwd, sizeof(s->cwd)))
		strcpy(s->cwd, "/");
}

/* --ctl-group and the TLS settings: checked, and TLS's credentials loaded
 * (logged); -EINVAL, said why, when they are wrong. */
static int check_access(struct server *s)
{
	int r;

	s->ctl_gid = (gid_t)-1;
	if (s->cfg.ctl_group && resolve_group(s->cfg.ctl_group, &s->ctl_gid) < 0) {
		log_err("ctl-group %s: no such group", s->cfg.ctl_group);
		return -EINVAL;
	}
	s->tls_mode = s->cfg.tls;
	if ((s->cfg.tls_certificates || s->cfg.tls_psk) && s->tls_mode == NBD_TLS_OFF) {
		log_err("TLS certificates or keys given, but TLS is off (--tls=on|require)");
		return -EINVAL;
	}
	if (s->cfg.tls_certificates && s->cfg.tls_psk) {
		log_err("give TLS certificates or a PSK file, not both");
		return -EINVAL;
	}
	if (s->tls_mode != NBD_TLS_OFF) {
		char err[256], *dir = NULL, *psk = NULL;

		if (s->tls_mode == NBD_TLS_REQUIRE && s->cfg.smcr_port) {
			log_err("--tls=require cannot cover the SMC-R port (its data goes by RDMA, "
				"not through TLS): use --tls=on, or no SMC-R port");
			return -EINVAL;
		}
		/* Relative paths of the config file: from smcrd's start directory. */
		if (s->cfg.tls_certificates)
			dir = abs_path(s->cwd, s->cfg.tls_certificates);
		if (s->cfg.tls_psk)
			psk = abs_path(s->cwd, s->cfg.tls_psk);
		if (s->cfg.tls_psk && s->cfg.tls_verify_peer == BD_TLS_VERIFY_ON) {
			log_err("tls-verify-peer is for certificates (PSK clients are always "
				"checked)");
			free(dir);
			free(psk);
			return -EINVAL;
		}
		r = bd_tls_server_new(dir, psk, s->cfg.tls_verify_peer, &s->tls, err, sizeof(err));
		free(dir);
		free(psk);
		if (r < 0) {
			log_err("TLS: %s", err);
			return -EINVAL;
		}
		log_info("TLS %s on NBD/TCP (%s%s)",
			 s->tls_mode == NBD_TLS_REQUIRE ? "required" : "offered",
			 s->cfg.tls_psk ? "pre-shared keys" : "X.509 certificates",
			 s->cfg.tls_psk ? "" : bd_tls_verifies_peer(s->tls) ?
			 ", client certificates verified" : ", client certificates not verified");
	}
	return 0;
}

/* --log-file: stderr from here on (local time stamps); -EINVAL, said
 * why, when the file is not one to write to. */
static int open_log_file(struct server *s)
{
	/* Not through a symbolic link or a hard link, never blocking
	 * on a FIFO; mode 0640. */
	int fd = open(s->cfg.log_file, O_WRONLY | O_CREAT | O_APPEND | O_NOFOLLOW |
		      O_NONBLOCK | O_NOCTTY | O_CLOEXEC, 0640);
	const char *bad = NULL;
	struct stat lst;

	if (fd < 0) {
		log_err("log file %s: %s", s->cfg.log_file,
			errno == ELOOP ? "is a symbolic link" :
			errno == ENXIO ? "a FIFO or socket" : strerror(errno));
		return -EINVAL;
	}
	if (fstat(fd, &lst) < 0)
		bad = strerror(errno);
	else if (!S_ISREG(lst.st_mode) && !S_ISCHR(lst.st_mode))
		bad = "not a regular file (a FIFO, socket or directory)";
	else if (S_ISREG(lst.st_mode) && lst.st_nlink > 1)
		bad = "has other hard links (another file's name)";
	else if (fcntl(fd, F_SETFL, O_APPEND) < 0)
		bad = strerror(errno);
	if (bad) {
		log_err("log file %s: %s", s->cfg.log_file, bad);
		close(fd);
		return -EINVAL;
	}
	dup2(fd, STDERR_FILENO);
	close(fd);
	applog_set_stamp(APPLOG_STAMP_LOCAL);
	return 0;
}

/* Signals are taken synchronously by the main thread only (a signalfd
 * of *sigs). */
static void block_signals(sigset_t *sigs)
{
	sigemptyset(sigs);
	sigaddset(sigs, SIGTERM);
	sigaddset(sigs, SIGINT);
	sigaddset(sigs, SIGHUP);
	pthread_sigmask(SIG_BLOCK, sigs, NULL);
	signal(SIGPIPE, SIG_IGN);
}

/* The pipe that wakes the handshakes in progress at the end. */
static int cancel_pipe(struct server *s)
{
	int p[2];

	if (pipe2(p, O_CLOEXEC) < 0) {
		int r = -errno;

		log_err("pipe: %s", strerror(-r));
		return r;
	}
	s->cancel_fd = p[0];
	s->cancel_wr = p[1];
	return 0;
}

/* SMC-R's listener (after daemonizing: the stack runs its own thread)
 * and the I/O engine; -errno once said why. */
static int start_engine(struct server *s)
{
	struct engine_params ep;
	int r;

	memset(&ep, 0, sizeof(ep));
	ep.threads = s->cfg.threads;
	ep.queue_depth = s->cfg.queue_depth;
	ep.max_memory = s->cfg.max_memory;
	ep.max_memory_per_address = hs_mem_per_address(s);
	ep.fixed_buffers = s->cfg.fixed_buffers;
	ep.drain_timeout_ms = 30000;
	ep.request_timeout_ms = s->cfg.request_timeout * 1000;
	ep.idle_timeout_ms = s->cfg.idle_timeout * 1000;
	ep.closed = hs_client_gone;
	ep.closed_arg = s;
	ep.iostat = &s->iostat;
	/* SMC-R after daemonizing: the stack runs its own thread. */
	if (s->cfg.smcr_port) {
		r = smcr_start(s);
		if (r < 0)
			return r;
	}
	r = engine_start(&ep, &s->engine);
	if (r < 0)
		log_err("cannot start the I/O engine: %s", strerror(-r));
	return r;
}

/* Ready: the parent of the fork (its pipe in *notify, then closed) and
 * systemd are told; in the background without a log file, syslog. */
static void notify_ready(struct server *s, int *notify)
{
	char st[64];
	int r;

	if (*notify >= 0) {
		char ok = 0;

		if (!s->cfg.log_file) {
			/* In the background without a log file: syslog. */
			openlog("smcrd", LOG_PID | LOG_NDELAY, LOG_DAEMON);
			applog_set_fn(daemon_syslog, NULL);
		}
		daemon_detach_stdio(s->cfg.log_file);
		if (write(*notify, &ok, 1) < 0)
			log_warn("cannot notify the parent: %s", strerror(errno));
		close(*notify);
		*notify = -1;
	}
	snprintf(st, sizeof(st), "READY=1\nMAINPID=%ld", (long)getpid());
	r = sysd_notify(st);
	if (r < 0)
		log_warn("cannot notify systemd: %s", strerror(-r));
}

int main(int argc, char **argv)
{
	/* Static: a reload thread left running at exit still reads it
	 * (and what it holds stays reachable). */
	static struct server s;
	struct pidfile pidfile = { .dirfd = -1 };
	sigset_t sigs;
	int sfd = -1, notify = -1, r, status = EXIT_FAILURE;
	long ncpu;
	bool tcp_default, reload_left = false;

	server_init(&s);

	r = parse_args(&s, argc, argv);
	if (r < 0)
		fputs("Try 'smcrd --help' for more information.\n", stderr);
	if (r) {
		status = r > 0 ? EXIT_SUCCESS : EXIT_USAGE;
		goto out_config;
	}
	if (s.cfg.verbose)
		smcr_log_set_level(SMCR_LOG_DEBUG);
	if (daemon_absolutize(&s, &s.cfg.cli_exports) < 0)
		goto out_config;
	if (daemon_build_table(&s, true, NULL, &s.table) < 0) {
		status = EXIT_USAGE;
		goto out_config;
	}
	/* --log-level, else the config file's (-v wins over both). */
	if (!s.cfg.verbose && s.cfg.log_level >= 0)
		smcr_log_set_level((enum smcr_log_level)s.cfg.log_level);
	if (check_access(&s) < 0) {
		status = EXIT_USAGE;
		goto out_table;
	}
	if (check_config) {
		printf("smcrd: configuration OK (%s): %u export(s)\n",
		       s.cfg.config_file ? s.cfg.config_file : "no config file",
		       s.table ? s.table->n : 0);
		status = EXIT_SUCCESS;
		goto out_table;
	}
	if (s.cfg.log_file && open_log_file(&s) < 0)
		goto out_table;
	tcp_default = !s.cfg.port && !s.cfg.listen;
	if (!s.cfg.port)
		s.cfg.port = strdup("10809");
	if (!s.cfg.threads) {
		ncpu = sysconf(_SC_NPROCESSORS_ONLN);
		s.cfg.threads = ncpu > 0 ? (unsigned)(ncpu > 64 ? 64 : ncpu) : 1;
	}
	r = listen_activated(&s);
	if (r < 0)
		goto out_table;
	if (r == 0 && s.cfg.unix_path && listen_unix(&s, s.cfg.unix_path) < 0)
		goto out_listen;
	/* With a Unix socket, TCP only when a port or address was given. */
	if (r == 0 && (!s.cfg.unix_path || !tcp_default) &&
	    listen_on(&s, s.cfg.listen, s.cfg.port) < 0)
		goto out_listen;
	/* Bound now, so that a taken port fails the start; served from
	 * after the fork (a thread). */
	if (s.cfg.metrics_listen) {
		s.metrics_fd = metrics_listen(s.cfg.metrics_listen);
		if (s.metrics_fd < 0)
			goto out_listen;
	}
	daemon_log_table(s.table, s.cfg.config_file);

	block_signals(&sigs);

	if (!s.cfg.foreground) {
		notify = daemon_fork();
		if (notify < 0) {
			log_err("daemonize: %s", strerror(-notify));
			goto out_listen;
		}
		if (daemon_reopen_rbd(&s) < 0)
			goto out_listen;
	}
	sfd = signalfd(-1, &sigs, SFD_CLOEXEC);
	if (sfd < 0) {
		log_err("signalfd: %s", strerror(errno));
		goto out_listen;
	}
	if (cancel_pipe(&s) < 0)
		goto out_sfd;
	if (s.cfg.pidfile && daemon_write_pidfile(s.cfg.pidfile, &pidfile) < 0)
		goto out_pipe;

	if (start_engine(&s) < 0)
		goto out_pidfile;
	log_info("smcrd %s ready: %u I/O threads, queue depth %u, max %u clients",
		 PACKAGE_VERSION, s.cfg.threads, s.cfg.queue_depth, s.cfg.max_clients);
	notify_ready(&s, &notify);

	status_ctl_open(&s);
	status_metrics_serve(&s);
	serve(&s, sfd);
	sysd_notify("STOPPING=1");
	metrics_stop(s.metrics);
	s.metrics = NULL;
	smcr_ctl_close(s.ctl);
	s.ctl = NULL;
	shutdown_server(&s);
	/* A reload stuck in its cluster still reads s: s's table and
	 * settings are left as they are (the process ends). */
	reload_left = !daemon_reload_stop(&s, 5000);
	log_info("exiting");
	status = EXIT_SUCCESS;

out_pidfile:
	if (s.smcr_ls)
		smcr_close(s.smcr_ls);
	smcr_ctx_destroy(s.smcr);
	daemon_remove_pidfile(&pidfile);
out_pipe:
	close(s.cancel_fd);
	close(s.cancel_wr);
out_sfd:
	close(sfd);
out_listen:
	for (r = 0; r < (int)s.nlfd; r++)
		close(s.lfd[r]);
	listen_unix_remove(&s);
	if (s.metrics_fd >= 0)
		close(s.metrics_fd);
	if (notify >= 0)
		close(notify);		/* the parent reads EOF: failure */
out_table:
	if (reload_left)
		return status;
	bd_tls_free(s.tls);
	export_table_free(s.table);
out_config:
	free(s.addrs);
	config_free(&s.cfg);
	pthread_cond_destroy(&s.cond);
	pthread_mutex_destroy(&s.lock);
	iostat_fini(&s.iostat);
	return status;
}
