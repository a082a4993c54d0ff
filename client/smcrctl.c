/* SPDX-License-Identifier: BSD-3-Clause */
/* smcrbd: smcrctl: status, counters and fault injection of the programs
 * that use libsmcr (smcrd, nbdkit-smcr, smcr-fuse, ...), through their
 * control sockets (smcr/ctl.c): DIR/NAME.PID.sock.
 *
 *   smcrctl [--json] [--watch SECS] [--dir DIR] list
 *   smcrctl [--json] [--watch SECS] status [PID|NAME]
 *   smcrctl [--json] [--watch SECS] stats [PID|NAME]
 *   smcrctl [--all] metrics [PID|NAME]
 *   smcrctl [--all] fail-link N [PID|NAME]
 *   smcrctl [--all] fault SPEC [PID|NAME]
 *   smcrctl [--all] reset [PID|NAME]
 *   smcrctl [--all] send PID|NAME COMMAND...
 *
 * See smcrctl(1). */
#include <config.h>

#include <dirent.h>
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>

#include "json.h"
#include "prom.h"
#include "jsonw.h"
#include "smcr.h"

#define REPLY_MAX	(16u << 20)
#define ASK_MS		5000

struct target {
	char name[64];
	int pid;
	char path[sizeof(((struct sockaddr_un *)0)->sun_path)];
};

static char ctl_dir[sizeof(((struct sockaddr_un *)0)->sun_path)];
static bool opt_json, opt_all, dir_given;
static double opt_watch;
static volatile sig_atomic_t stop;

/* --- control sockets ----------------------------------------------------------- */

/* Sends one command line and reads the whole answer (malloc'ed).
 * Returns 0, or -errno (-ECONNREFUSED: stale socket). */
static int ask(const char *path, const char *cmd, char **out)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	struct timeval tv = { .tv_sec = ASK_MS / 1000, .tv_usec = ASK_MS % 1000 * 1000 };
	size_t len = 0, cap = 65536;
	struct ucred cred;
	socklen_t credlen = sizeof(cred);
	char *buf = NULL;
	int fd, r = 0;

	*out = NULL;
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	/* A program whose listen backlog is full (its control thread stuck
	 * or busy) makes connect() and send() wait: for ASK_MS at most. */
	if (setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv))) {
		r = -errno;
		goto out;
	}
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa))) {
		r = errno == EAGAIN ? -ETIMEDOUT : -errno;
		goto out;
	}
	/* Only a program of root's or ours may answer (not one that took
	 * over the socket's name). */
	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &credlen) < 0) {
		r = -errno;
		goto out;
	}
	if (cred.uid != 0 && cred.uid != geteuid()) {
		fprintf(stderr, "smcrctl: %s: served by uid %u, neither root nor us: "
			"not trusted\n", path, (unsigned int)cred.uid);
		r = -EPERM;
		goto out;
	}
	if (send(fd, cmd, strlen(cmd), MSG_NOSIGNAL) < 0 ||
	    send(fd, "\n", 1, MSG_NOSIGNAL) < 0) {
		r = errno == EAGAIN ? -ETIMEDOUT : -errno;
		goto out;
	}
	buf = malloc(cap);
	if (!buf) {
		r = -ENOMEM;
		goto out;
	}
	for (;;) {
		struct pollfd p = { .fd = fd, .events = POLLIN };
		ssize_t n;

		if (poll(&p, 1, ASK_MS) <= 0) {
			r = -ETIMEDOUT;
			goto out;
		}
		if (len + 1 >= cap) {
			char *nb;

			if (cap >= REPLY_MAX) {
				r = -EMSGSIZE;
				goto out;
			}
			nb = realloc(buf, cap * 2);
			if (!nb) {
				r = -ENOMEM;
				goto out;
			}
			buf = nb;
			cap *= 2;
		}
		n = recv(fd, buf + len, cap - len - 1, 0);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			r = -errno;
			goto out;
		}
		if (n == 0)
			break;
		len += (size_t)n;
	}
	buf[len] = '\0';
	*out = buf;
	buf = NULL;
out:
	free(buf);
	close(fd);
	return r;
}

static int cmp_target(const void *a, const void *b)
{
	const struct target *x = a, *y = b;
	int c = strcmp(x->name, y->name);

	return c ? c : x->pid - y->pid;
}

/* Sockets in the directory whose name or pid matches filter (NULL: all),
 * sorted by name and pid.  Stale sockets (nobody listening) are left out
 * unless with_stale. */
static int find_targets(const char *filter, bool with_stale, struct target **out,
			unsigned *n_out, unsigned *stale)
{
	struct target *t = NULL;
	unsigned n = 0, cap = 0;
	struct dirent *de;
	const char *why;
	DIR *d;
	int r;

	*stale = 0;
	*out = NULL;
	*n_out = 0;
	/* A directory that another user owns or may write holds whatever
	 * sockets they like: not read at all. */
	r = smcr_ctl_dir_check(ctl_dir, &why);
	if (r == -ENOENT)
		return dir_given ? r : 0;	/* no program has one yet */
	if (r) {
		fprintf(stderr, "smcrctl: %s: %s: not trusted\n", ctl_dir, why);
		return r;
	}
	d = opendir(ctl_dir);
	if (!d)
		return errno == ENOENT && !dir_given ? 0 : -errno;
	while ((de = readdir(d))) {
		size_t l = strlen(de->d_name);
		struct target x;
		char *dot, *answer;

		if (l < 7 || strcmp(de->d_name + l - 5, ".sock"))
			continue;
		memset(&x, 0, sizeof(x));
		snprintf(x.name, sizeof(x.name), "%.*s", (int)(l - 5), de->d_name);
		dot = strrchr(x.name, '.');
		if (!dot)
			continue;
		x.pid = atoi(dot + 1);
		*dot = '\0';
		if (x.pid <= 0)
			continue;
		if ((size_t)snprintf(x.path, sizeof(x.path), "%s/%s", ctl_dir, de->d_name) >=
		    sizeof(x.path))
			continue;
		if (filter) {
			char *end;
			long pid = strtol(filter, &end, 10);

			if (*end ? strncmp(x.name, filter, strlen(filter)) : pid != x.pid)
				continue;
		}
		if (kill(x.pid, 0) && errno == ESRCH) {
			(*stale)++;
			if (!with_stale)
				continue;
		} else if (!with_stale) {
			/* Someone listening? */
			r = ask(x.path, "help", &answer);
			free(answer);
			if (r == -ECONNREFUSED || r == -ENOENT) {
				(*stale)++;
				continue;
			}
		}
		if (n == cap) {
			struct target *nt = realloc(t, (cap = cap ? cap * 2 : 8) * sizeof(*t));

			if (!nt) {
				free(t);
				closedir(d);
				return -ENOMEM;
			}
			t = nt;
		}
		t[n++] = x;
	}
	closedir(d);
	if (n)
		qsort(t, n, sizeof(*t), cmp_target);
	*out = t;
	*n_out = n;
	return 0;
}

/* --- tables ---------------------------------------------------------------------- */

#define TMAX_COLS 24
#define CELL 112

struct table {
	unsigned ncols, nrows, cap;
	char head[TMAX_COLS][CELL];
	char (*rows)[TMAX_COLS][CELL];
};

static void t_init(struct table *t, unsigned ncols, ...)
{
	va_list ap;
	unsigned i;

	memset(t, 0, sizeof(*t));
	t->ncols = ncols;
	va_start(ap, ncols);
	for (i = 0; i < ncols; i++)
		snprintf(t->head[i], CELL, "%s", va_arg(ap, const char *));
	va_end(ap);
}

static char (*t_row(struct table *t))[CELL]
{
	if (t->nrows == t->cap) {
		void *n = realloc(t->rows, (t->cap = t->cap ? t->cap * 2 : 16) * sizeof(*t->rows));

		if (!n) {
			perror("smcrctl");
			exit(1);
		}
		t->rows = n;
	}
	memset(t->rows[t->nrows], 0, sizeof(t->rows[0]));
	return t->rows[t->nrows++];
}

static void t_print(struct table *t, const char *indent)
{
	size_t w[TMAX_COLS] = { 0 };
	unsigned r, c;

	for (c = 0; c < t->ncols; c++) {
		w[c] = strlen(t->head[c]);
		for (r = 0; r < t->nrows; r++)
			if (strlen(t->rows[r][c]) > w[c])
				w[c] = strlen(t->rows[r][c]);
	}
	printf("%s", indent);
	for (c = 0; c < t->ncols; c++)
		printf("%-*s%s", c + 1 < t->ncols ? (int)w[c] : 0, t->head[c],
		       c + 1 < t->ncols ? "  " : "\n");
	for (r = 0; r < t->nrows; r++) {
		printf("%s", indent);
		for (c = 0; c < t->ncols; c++)
			printf("%-*s%s", c + 1 < t->ncols ? (int)w[c] : 0, t->rows[r][c],
			       c + 1 < t->ncols ? "  " : "\n");
	}
	free(t->rows);
	t->rows = NULL;
}

static void cell(char *dst, const struct json *obj, const char *key)
{
	struct json *j = json_get(obj, key);

	if (j)
		json_scalar_text(j, dst, CELL);
	else
		snprintf(dst, CELL, "-");
}

/* --- rates (--watch) ----------------------------------------------------------- */

/* --watch: each program's previous answer, by pid, and when it came; the
 * seconds between it and the one being rendered (0: no rates). */
struct prev_answer {
	int pid;
	bool stats;
	struct json *doc;
	struct timespec at;
};
static struct prev_answer prevs[64];
static double prev_dt;

/* The previous answer of pid (for the same command), and prev_dt; NULL
 * when there is none. */
static struct json *prev_take(int pid, bool stats, const struct timespec *now)
{
	unsigned i;

	prev_dt = 0;
	for (i = 0; i < sizeof(prevs) / sizeof(prevs[0]); i++)
		if (prevs[i].doc && prevs[i].pid == pid && prevs[i].stats == stats) {
			prev_dt = (double)(now->tv_sec - prevs[i].at.tv_sec) +
				  (double)(now->tv_nsec - prevs[i].at.tv_nsec) / 1e9;
			return prevs[i].doc;
		}
	return NULL;
}

/* Keeps doc as pid's previous answer (frees the one before); frees doc
 * when there is no room. */
static void prev_keep(int pid, bool stats, struct json *doc, const struct timespec *now)
{
	unsigned i, slot = sizeof(prevs) / sizeof(prevs[0]);

	for (i = 0; i < sizeof(prevs) / sizeof(prevs[0]); i++) {
		if (prevs[i].doc && prevs[i].pid == pid && prevs[i].stats == stats) {
			slot = i;
			break;
		}
		if (!prevs[i].doc && slot == sizeof(prevs) / sizeof(prevs[0]))
			slot = i;
	}
	if (slot == sizeof(prevs) / sizeof(prevs[0])) {
		json_free(doc);
		return;
	}
	json_free(prevs[slot].doc);
	prevs[slot] = (struct prev_answer){ .pid = pid, .stats = stats, .doc = doc, .at = *now };
}

/* Counters (totals that only grow): shown with their rate under --watch;
 * other numbers are gauges or settings. */
static bool is_counter(const char *key)
{
	static const char *const keys[] = {
		"requests", "reads", "writes", "bytes_read", "bytes_written", "errors",
		"connections_total", "zc_writes", "zc_reads", "file_reads", "inline_writes",
		"bytes_sent", "bytes_recv", "rdma_writes", "cdc_sent", "cdc_recv", "llc_sent",
		"llc_recv", "completed", "resent", "fallbacks", "smc_connections",
	};
	unsigned i;

	for (i = 0; key && i < sizeof(keys) / sizeof(keys[0]); i++)
		if (!strcmp(key, keys[i]))
			return true;
	return false;
}

/* " (+R/s)": the rate of counter key between prev and cur; "" when not
 * watching, not a counter, or no earlier value (or it went down: reset). */
static const char *rate_text(const struct json *prev, const struct json *cur,
			     const char *key, char *buf, size_t len)
{
	uint64_t c, p;
	double r;

	buf[0] = '\0';
	if (!prev || prev_dt <= 0 || !is_counter(key) || !json_get(prev, key))
		return buf;
	c = json_get_u64(cur, key, 0);
	p = json_get_u64(prev, key, 0);
	if (c < p)
		return buf;
	r = (double)(c - p) / prev_dt;
	if (r >= 1e9)
		snprintf(buf, len, " (+%.1fG/s)", r / 1e9);
	else if (r >= 1e6)
		snprintf(buf, len, " (+%.1fM/s)", r / 1e6);
	else if (r >= 1e4)
		snprintf(buf, len, " (+%.1fk/s)", r / 1e3);
	else
		snprintf(buf, len, " (+%.0f/s)", r);
	return buf;
}

/* The element of the previous array of objects that stands for e: the
 * same value of the first member (an export's or a client's name). */
static const struct json *prev_elem(const struct json *parr, const struct json *e)
{
	const struct json *p;
	char a[CELL], b[CELL];

	if (!parr || !e->child || !json_is_scalar(e->child))
		return NULL;
	json_scalar_text(e->child, a, sizeof(a));
	for (p = parr->child; p; p = p->next) {
		const struct json *k = json_get(p, e->child->key);

		if (!k || !json_is_scalar(k))
			continue;
		json_scalar_text(k, b, sizeof(b));
		if (!strcmp(a, b))
			return p;
	}
	return NULL;
}

/* Generic rendering of a program section: scalars as "key value" lines,
 * arrays of objects as tables (columns: the first element's scalars),
 * nested objects under their own heading.  pj: the previous answer's
 * counterpart (--watch rates), or NULL. */
static void render_generic(const struct json *j, const struct json *pj, const char *indent)
{
	char rate[48];
	char ind2[64], text[CELL];
	const struct json *c;

	snprintf(ind2, sizeof(ind2), "%s  ", indent);
	if (j->type != JSON_OBJ) {
		if (json_is_scalar(j)) {
			json_scalar_text(j, text, sizeof(text));
			printf("%s%s\n", indent, text);
		}
		return;
	}
	for (c = j->child; c; c = c->next) {
		if (json_is_scalar(c)) {
			json_scalar_text(c, text, sizeof(text));
			printf("%s%-20s %s%s\n", indent, c->key, text,
			       rate_text(pj, j, c->key, rate, sizeof(rate)));
		}
	}
	for (c = j->child; c; c = c->next) {
		if (json_is_scalar(c))
			continue;
		if (c->type == JSON_OBJ) {
			printf("%s%s:\n", indent, c->key);
			render_generic(c, pj ? json_get(pj, c->key) : NULL, ind2);
		} else if (c->type == JSON_ARR && c->child && c->child->type == JSON_OBJ) {
			struct table t;
			const struct json *e, *k;
			unsigned n = 0;

			memset(&t, 0, sizeof(t));
			for (k = c->child->child; k && n < TMAX_COLS; k = k->next)
				if (json_is_scalar(k))
					snprintf(t.head[n++], CELL, "%s", k->key);
			t.ncols = n;
			printf("%s%s (%u):\n", indent, c->key, json_count(c));
			for (e = c->child; e; e = e->next) {
				const struct json *pe = prev_elem(pj ? json_get(pj, c->key) : NULL, e);
				char (*row)[CELL] = t_row(&t);
				unsigned i;

				for (i = 0; i < n; i++) {
					size_t l;

					cell(row[i], e, t.head[i]);
					l = strlen(row[i]);
					snprintf(row[i] + l, CELL - l, "%s",
						 rate_text(pe, e, t.head[i], rate, sizeof(rate)));
				}
			}
			t_print(&t, ind2);
		} else if (c->type == JSON_ARR) {
			const struct json *e;

			printf("%s%-20s", indent, c->key);
			for (e = c->child; e; e = e->next) {
				json_scalar_text(e, text, sizeof(text));
				printf(" %s", text);
			}
			printf("\n");
		}
	}
}

static void render_counters(const struct json *st, const struct json *pst, const char *indent)
{
	char rate[48];
	static const char *const keys[] = {
		"connections", "smc_connections", "fallbacks", "link_groups", "links_added",
		"links_deleted", "link_failures", "failovers", "bytes_sent", "bytes_recv",
		"rdma_writes", "cdc_sent", "cdc_recv", "llc_sent", "llc_recv",
		"rkeys_confirmed", "test_links",
	};
	const struct json *fr, *e;
	unsigned i;

	for (i = 0; i < sizeof(keys) / sizeof(keys[0]); i++)
		printf("%s%-16s %" PRIu64 "%s%s", i % 3 ? "  " : indent, keys[i],
		       json_get_u64(st, keys[i], 0),
		       rate_text(pst, st, keys[i], rate, sizeof(rate)), i % 3 == 2 ? "\n" : "");
	if (i % 3)
		printf("\n");
	/* libsmcr's progress thread, woken by source (absent from older ones) */
	if (json_get(st, "wake_timer"))
		printf("%sprogress thread woken: kick %" PRIu64 " timer %" PRIu64 " devcq %" PRIu64
		       " link %" PRIu64 " async %" PRIu64 "; caller_serves %" PRIu64 "\n", indent,
		       json_get_u64(st, "wake_kick", 0), json_get_u64(st, "wake_timer", 0),
		       json_get_u64(st, "wake_devcq", 0), json_get_u64(st, "wake_link", 0),
		       json_get_u64(st, "wake_async", 0), json_get_u64(st, "caller_serves", 0));
	fr = json_get(st, "fallback_reasons");
	for (e = fr ? fr->child : NULL; e; e = e->next)
		printf("%sfallback 0x%08" PRIx64 " x%" PRIu64 ": %s\n", indent,
		       json_get_u64(e, "code", 0), json_get_u64(e, "count", 0),
		       json_get_str(e, "reason", "?"));
}

static void render_nbd(const char *name, const struct json *s)
{
	const struct json *st = json_get(s, "stats"), *conns = json_get(s, "connections"), *c;
	struct table t;

	printf("NBD export '%s' at %s://%s:%" PRIu64 ": %" PRIu64 " bytes, %s%s, %" PRIu64
	       " connection(s) up of %u, timeout %" PRIu64 " ms   [%s]\n",
	       json_get_str(s, "export", "?"),
	       strcmp(json_get_str(s, "transport", "smcr"), "nbd") ? "smcr" : "nbd",
	       json_get_str(s, "server", "?"), json_get_u64(s, "port", 0),
	       json_get_u64(s, "size", 0),
	       json_get_bool(s, "read_only", false) ? "read-only" : "read-write",
	       json_get_bool(s, "multi_conn", false) ? ", multi-conn" : "",
	       json_get_u64(s, "connections_up", 0), json_count(conns),
	       json_get_u64(s, "timeout_ms", 0), name);
	printf("  requests %" PRIu64 "  completed %" PRIu64 "  errors %" PRIu64
	       "  in flight %" PRIu64 "  read %" PRIu64 " B  written %" PRIu64 " B\n",
	       json_get_u64(st, "requests", 0), json_get_u64(st, "completed", 0),
	       json_get_u64(st, "errors", 0), json_get_u64(st, "inflight", 0),
	       json_get_u64(st, "bytes_read", 0), json_get_u64(st, "bytes_written", 0));
	printf("  reconnects %" PRIu64 "  reconnect failures %" PRIu64
	       "  connections lost %" PRIu64 "  resent %" PRIu64 "  timed out %" PRIu64 "\n",
	       json_get_u64(st, "reconnects", 0), json_get_u64(st, "reconnect_failures", 0),
	       json_get_u64(st, "connections_lost", 0), json_get_u64(st, "resent", 0),
	       json_get_u64(st, "timed_out", 0));
	t_init(&t, 9, "CONN", "STATE", "TRANSPORT", "PEER", "REQUESTS", "SENT", "RECONNECTS",
	       "RESENT", "LAST ERROR");
	for (c = conns ? conns->child : NULL; c; c = c->next) {
		char (*row)[CELL] = t_row(&t);

		cell(row[0], c, "id");
		cell(row[1], c, "state");
		cell(row[2], c, "transport");
		cell(row[3], c, "peer");
		cell(row[4], c, "load");
		cell(row[5], c, "sent");
		cell(row[6], c, "reconnects");
		cell(row[7], c, "resent");
		cell(row[8], c, "error");
	}
	t_print(&t, "  ");
}

static void render_status(const struct json *doc, const struct json *prev)
{
	const struct json *smcr = json_get(doc, "smcr"), *lgrs = json_get(smcr, "link_groups");
	const struct json *conns = json_get(smcr, "connections"), *secs, *g, *l, *c;
	struct table t;
	unsigned gi = 0, nfb = 0;

	printf("=== %s (pid %" PRIu64 ") ===\n", json_get_str(doc, "name", "?"),
	       json_get_u64(doc, "pid", 0));
	if (!smcr || smcr->type != JSON_OBJ) {
		printf("no SMC-R context (TCP only)\n");
	} else {
		const char *syn = json_get_str(smcr, "syn_option", NULL);

		/* The SMC TCP option on SYNs (libsmcr(3), syn_option). */
		if (syn && !strcmp(syn, "bpf"))
			printf("SYN option: bpf (CLC only when both SYNs carry it)\n");
		else if (syn)
			printf("SYN option: off, CLC always (%s)\n",
			       json_get_str(smcr, "syn_option_off_why", "?"));
		{
			const struct json *eids = json_get(smcr, "eids"), *e;

			/* SMC-Rv2 user EIDs (libsmcr(3), eids) */
			printf("SMC-Rv2 EIDs:");
			for (e = eids ? eids->child : NULL; e; e = e->next)
				printf("%s %s", e == eids->child ? "" : ",",
				       e->type == JSON_STR ? e->text : "?");
			printf("%s\n", json_count(eids) ? "" : " none (SMC-R v1 only)");
		}
		printf("link groups: %u\n", json_count(lgrs));
		for (g = lgrs ? lgrs->child : NULL; g; g = g->next, gi++) {
			const struct json *gs = json_get(g, "stats");

			printf("  link group %u: %s, %" PRIu64 " connection(s)%s, RMBE layout %s, SMC-Rv%" PRIu64 "; failovers %" PRIu64
			       ", links added %" PRIu64 ", deleted %" PRIu64 ", failed %" PRIu64
			       ", LLC sent %" PRIu64 ", received %" PRIu64 "\n",
			       gi, json_get_str(g, "role", "?"), json_get_u64(g, "connections", 0),
			       json_get_bool(g, "terminated", false) ? ", terminated" : "",
			       json_get_str(g, "rmbe_layout", "?"), json_get_u64(g, "version", 1),
			       json_get_u64(gs, "failovers", 0), json_get_u64(gs, "links_added", 0),
			       json_get_u64(gs, "links_deleted", 0),
			       json_get_u64(gs, "link_failures", 0), json_get_u64(gs, "llc_sent", 0),
			       json_get_u64(gs, "llc_recv", 0));
			t_init(&t, 11, "LINK", "STATE", "DEVICE", "LOCAL GID", "PEER GID", "QPN",
			       "PEER QPN", "CONNS", "WRITES", "SENDS", "RECVS");
			for (l = json_get(g, "links") ? json_get(g, "links")->child : NULL; l;
			     l = l->next) {
				char (*row)[CELL] = t_row(&t);

				cell(row[0], l, "id");
				cell(row[1], l, "state");
				cell(row[2], l, "device");
				cell(row[3], l, "local_gid");
				cell(row[4], l, "peer_gid");
				cell(row[5], l, "qpn");
				cell(row[6], l, "peer_qpn");
				cell(row[7], l, "connections");
				cell(row[8], l, "writes");
				cell(row[9], l, "sends");
				cell(row[10], l, "recvs");
				if (json_get_bool(l, "asym", false))
					snprintf(row[1] + strlen(row[1]), CELL - strlen(row[1]), "(asym)");
			}
			t_print(&t, "    ");
		}
		printf("connections: %u\n", json_count(conns));
		/* PINNED: our RMBE and our send buffer (the peer's RMBE's size). */
		t_init(&t, 12, "TOKEN", "LINK", "RMBE", "PEER RMBE", "PINNED", "RX PROD",
		       "RX CONS", "TX PROD", "TX PEER CONS", "SENT", "RECEIVED", "FAILOVERS");
		for (c = conns ? conns->child : NULL; c; c = c->next) {
			char (*row)[CELL];

			if (!json_get_bool(c, "smc", false)) {
				nfb++;
				continue;
			}
			row = t_row(&t);
			snprintf(row[0], CELL, "%08" PRIx64, json_get_u64(c, "token", 0));
			cell(row[1], c, "link");
			cell(row[2], c, "rmbe");
			cell(row[3], c, "peer_rmbe");
			cell(row[4], c, "pinned");
			cell(row[5], c, "rx_prod");
			cell(row[6], c, "rx_cons");
			cell(row[7], c, "tx_prod");
			cell(row[8], c, "tx_peer_cons");
			cell(row[9], c, "bytes_sent");
			cell(row[10], c, "bytes_recv");
			cell(row[11], c, "failovers");
		}
		if (t.nrows)
			t_print(&t, "  ");
		else
			free(t.rows);
		if (nfb)
			printf("  %u connection(s) fell back to TCP\n", nfb);
		/* Every group's RMBs and send buffers, used or not. */
		if (json_get(smcr, "pinned_bytes")) {
			uint64_t lim = json_get_u64(smcr, "max_pinned_bytes", 0);

			printf("pinned memory: %" PRIu64 " bytes", json_get_u64(smcr, "pinned_bytes", 0));
			if (lim)
				printf(" of at most %" PRIu64 "\n", lim);
			else
				printf(" (no limit)\n");
		}
		printf("counters:\n");
		render_counters(json_get(doc, "stats"), prev ? json_get(prev, "stats") : NULL, "  ");
	}
	secs = json_get(doc, "sections");
	for (c = secs ? secs->child : NULL; c; c = c->next) {
		if (!strncmp(c->key, "nbd", 3) && json_get(c, "export"))
			render_nbd(c->key, c);
		else {
			printf("%s:\n", c->key);
			render_generic(c, prev ? json_get(json_get(prev, "sections"), c->key) : NULL,
				       "  ");
		}
	}
}

/* --- commands ---------------------------------------------------------------------- */

/* {"name","pid"} of a target, for --json; NULL when out of memory. */
static struct json_object *target_json(const struct target *t)
{
	struct json_object *o = json_object_new_object();

	jsonw_str(o, "name", t->name);
	jsonw_add(o, "pid", json_object_new_int(t->pid));
	return o;
}

/* Prints a --json answer (on one line) and drops it. */
static int print_json(struct json_object *o)
{
	const char *s = jsonw_text(o);
	int r = 0;

	if (s) {
		printf("%s\n", s);
	} else {
		fprintf(stderr, "smcrctl: %s\n", strerror(ENOMEM));
		r = -ENOMEM;
	}
	json_object_put(o);
	return r;
}

static int cmd_list(void)
{
	struct target *t;
	unsigned n, stale, i;
	struct table tb;
	int r = find_targets(NULL, true, &t, &n, &stale);

	if (r < 0) {
		fprintf(stderr, "smcrctl: %s: %s\n", ctl_dir, strerror(-r));
		return 1;
	}
	if (opt_json) {
		struct json_object *arr = json_object_new_array();

		for (i = 0; arr && i < n; i++) {
			struct json_object *o = target_json(&t[i]);

			if (!o)
				break;
			jsonw_str(o, "socket", t[i].path);
			jsonw_bool(o, "alive", !(kill(t[i].pid, 0) && errno == ESRCH));
			json_object_array_add(arr, o);
		}
		r = print_json(arr);
		if (r < 0) {
			free(t);
			return 1;
		}
	} else {
		t_init(&tb, 4, "NAME", "PID", "STATE", "SOCKET");
		for (i = 0; i < n; i++) {
			char (*row)[CELL] = t_row(&tb);

			snprintf(row[0], CELL, "%.63s", t[i].name);
			snprintf(row[1], CELL, "%d", t[i].pid);
			snprintf(row[2], CELL, "%s",
				 kill(t[i].pid, 0) && errno == ESRCH ? "stale" : "running");
			snprintf(row[3], CELL, "%.111s", t[i].path);
		}
		t_print(&tb, "");
	}
	free(t);
	return 0;
}

/* status / stats of every matching process. */
static int cmd_show(bool stats, const char *filter)
{
	struct target *t;
	unsigned n, stale, i, ok = 0;
	struct json_object *out = NULL;
	int r = find_targets(filter, false, &t, &n, &stale);

	if (r < 0) {
		fprintf(stderr, "smcrctl: %s: %s\n", ctl_dir, strerror(-r));
		return 1;
	}
	if (!n) {
		fprintf(stderr, "smcrctl: no %s%s%sprogram with a control socket in %s\n",
			filter ? "'" : "", filter ? filter : "", filter ? "' " : "", ctl_dir);
		return 1;
	}
	if (opt_json && !(out = json_object_new_array())) {
		free(t);
		return 1;
	}
	for (i = 0; i < n; i++) {
		char *answer, err[128];
		struct json *doc;

		bool tcp_only = false;

		r = ask(t[i].path, stats ? "stats-json" : "status-json", &answer);
		if (r >= 0 && stats && !strncmp(answer, "error: no SMC-R context", 23)) {
			/* A program on TCP only: its own sections are its counters. */
			free(answer);
			tcp_only = true;
			r = ask(t[i].path, "status-json", &answer);
		}
		if (r < 0) {
			fprintf(stderr, "smcrctl: %s (pid %d): %s\n", t[i].name, t[i].pid,
				strerror(-r));
			continue;
		}
		if (!strncmp(answer, "error:", 6)) {
			if (!opt_json)
				printf("=== %s (pid %d) ===\n%s", t[i].name, t[i].pid, answer);
			free(answer);
			continue;
		}
		doc = json_parse(answer, err, sizeof(err));
		if (!doc) {
			fprintf(stderr, "smcrctl: %s (pid %d): bad answer: %s\n", t[i].name,
				t[i].pid, err);
			free(answer);
			continue;
		}
		if (opt_json) {
			struct json_object *a = json_tokener_parse(answer), *o = a;

			if (tcp_only || stats) {
				o = target_json(&t[i]);
				if (tcp_only)
					jsonw_add(o, "stats", NULL);
				jsonw_add(o, tcp_only ? "status" : "stats", a);
			}
			if (o)
				json_object_array_add(out, o);
		} else {
			struct timespec now;
			const struct json *prev;
			bool st = stats && !tcp_only;

			clock_gettime(CLOCK_MONOTONIC, &now);
			prev = opt_watch > 0 ? prev_take(t[i].pid, st, &now) : NULL;
			if (st) {
				printf("=== %s (pid %d) ===\n", t[i].name, t[i].pid);
				render_counters(doc, prev, "  ");
			} else {
				render_status(doc, prev);
			}
			if (opt_watch > 0) {
				prev_keep(t[i].pid, st, doc, &now);
				doc = NULL;
			}
		}
		ok++;
		json_free(doc);
		free(answer);
		if (!opt_json && i + 1 < n)
			printf("\n");
	}
	if (opt_json && print_json(out) < 0)
		ok = 0;
	free(t);
	fflush(stdout);
	return ok ? 0 : 1;
}

/* More than one program matches a command that acts on one: names them
 * and asks for one, or --all.  Returns 2 (usage). */
static int too_many(const char *cmd, const char *filter, const struct target *t, unsigned n)
{
	unsigned i;

	fprintf(stderr, "smcrctl: %s: %u programs match%s%s%s:", cmd, n,
		filter ? " '" : "", filter ? filter : "", filter ? "'" : "");
	for (i = 0; i < n; i++)
		fprintf(stderr, "%s %s (pid %d)", i ? "," : "", t[i].name, t[i].pid);
	fprintf(stderr, "; name one (a pid or a name), or give --all\n");
	return 2;
}

/* One command line to the matching process (every one with --all);
 * prints the answers. */
static int cmd_send(const char *filter, const char *line, bool need_one)
{
	struct target *t;
	unsigned n, stale, i, ok = 0;
	int r = find_targets(filter, false, &t, &n, &stale);

	if (r < 0 || !n) {
		fprintf(stderr, "smcrctl: no %s%s%sprogram with a control socket in %s\n",
			filter ? "'" : "", filter ? filter : "", filter ? "' " : "", ctl_dir);
		free(t);
		return 1;
	}
	if (n > 1 && !opt_all) {
		char cmd[32];

		snprintf(cmd, sizeof(cmd), "%.*s", (int)strcspn(line, " "), line);
		r = too_many(cmd, filter, t, n);
		free(t);
		return r;
	}
	for (i = 0; i < n; i++) {
		char *answer;

		r = ask(t[i].path, line, &answer);
		if (r < 0) {
			fprintf(stderr, "smcrctl: %s (pid %d): %s\n", t[i].name, t[i].pid,
				strerror(-r));
			continue;
		}
		printf("%s (pid %d): %s%s", t[i].name, t[i].pid, answer,
		       *answer && answer[strlen(answer) - 1] == '\n' ? "" : "\n");
		if (strncmp(answer, "error:", 6))
			ok++;
		free(answer);
	}
	free(t);
	return ok || !need_one ? 0 : 1;
}

/* --- metrics (Prometheus text, common/prom.c) --------------------------------- */

/* smcrctl metrics: smcrd's counters in the Prometheus text format; one
 * smcrd (default: the one named smcrd), or every matching one with --all
 * (then each sample has a pid label). */
static int cmd_metrics(const char *filter)
{
	struct prom_doc d[64];
	struct target *t;
	unsigned n, stale, i, nd = 0;
	int r = find_targets(filter ? filter : "smcrd", false, &t, &n, &stale);
	struct json *docs[64] = { NULL };

	if (r < 0 || !n) {
		fprintf(stderr, "smcrctl: no '%s' program with a control socket in %s\n",
			filter ? filter : "smcrd", ctl_dir);
		free(t);
		return 1;
	}
	if (n > 1 && !opt_all) {
		r = too_many("metrics", filter ? filter : "smcrd", t, n);
		free(t);
		return r;
	}
	for (i = 0; i < n && nd < sizeof(d) / sizeof(d[0]); i++) {
		char *answer, err[128];
		struct json *doc, *sec;

		r = ask(t[i].path, "status-json", &answer);
		if (r < 0) {
			fprintf(stderr, "smcrctl: %s (pid %d): %s\n", t[i].name, t[i].pid,
				strerror(-r));
			continue;
		}
		doc = json_parse(answer, err, sizeof(err));
		free(answer);
		sec = doc ? json_get(json_get(doc, "sections"), "smcrd") : NULL;
		if (!sec) {
			fprintf(stderr, "smcrctl: %s (pid %d): %s\n", t[i].name, t[i].pid,
				doc ? "no smcrd section (not smcrd)" : err);
			json_free(doc);
			continue;
		}
		docs[nd] = doc;
		d[nd].pid = opt_all ? t[i].pid : 0;
		d[nd].sec = sec;
		d[nd].stats = json_get(doc, "stats");
		nd++;
	}
	if (nd)
		prom_print(stdout, d, nd);
	for (i = 0; i < nd; i++)
		json_free(docs[i]);
	free(t);
	fflush(stdout);
	return nd ? 0 : 1;
}

static void on_signal(int sig)
{
	stop = 1;
}

static void usage(FILE *f)
{
	fprintf(f,
		"Usage: smcrctl [OPTION]... COMMAND [ARG]...\n"
		"Shows the SMC-R link groups, links, connections and counters of smcrd,\n"
		"nbdkit-smcr, smcr-fuse and any other program using libsmcr, through their\n"
		"control sockets, and injects faults.\n"
		"\n"
		"Commands (TARGET: a pid, or a program name or its beginning; default: all;\n"
		"fail-link, fault, reset, send and metrics act on one program: when several\n"
		"match, name one or give --all):\n"
		"  list                     the control sockets found\n"
		"  status [TARGET]          link groups, links, connections, counters and\n"
		"                           the program's own status (exports, clients, NBD)\n"
		"  stats [TARGET]           counters only\n"
		"  metrics [TARGET]         smcrd's counters in the Prometheus text format\n"
		"                           (TARGET default: smcrd)\n"
		"  fail-link N [TARGET]     force link N of every link group into the error\n"
		"                           state (failover test)\n"
		"  fault SPEC [TARGET]      inject a fault: fail-link=N, drop-link=N,\n"
		"                           delay-link=N,ms=D, clear-link=N, undrop-link=N,\n"
		"                           undelay-link=N (or -dev=NAME for every link on\n"
		"                           an RDMA device); options for=MS (how long a drop\n"
		"                           or delay lasts), after=MS, every=MS, count=C\n"
		"  reset [TARGET]           zero the counters 'stats' shows (not the\n"
		"                           gauges, nor a program's own sections)\n"
		"  send TARGET COMMAND...   any control command (e.g. 'nbd drop')\n"
		"\n"
		"Options:\n"
		"  -j, --json               JSON instead of tables\n"
		"  -w, --watch SECS         repeat every SECS seconds until interrupted, with\n"
		"                           each counter's rate (per second) after it\n"
		"  -a, --all                fail-link, fault, reset, send, metrics: every\n"
		"                           matching program\n"
		"  -d, --dir DIR            control socket directory (default: $SMCR_CTL_DIR,\n"
		"                           /run/smcr for root, else $XDG_RUNTIME_DIR/smcr)\n"
		"  -h, --help               this text\n"
		"  -V, --version            version\n"
		"\n"
		"Exit status: 0 success, 1 no such program or a failed command, 2 usage.\n"
		"See smcrctl(1).\n");
}

static int usage_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* One line naming the problem (none: getopt has printed it), as nbdkit. */
static int usage_error(const char *fmt, ...)
{
	va_list ap;

	if (fmt) {
		fputs("smcrctl: ", stderr);
		va_start(ap, fmt);
		vfprintf(stderr, fmt, ap);
		va_end(ap);
		fputc('\n', stderr);
	}
	fputs("Try 'smcrctl --help' for more information.\n", stderr);
	return 2;
}

int main(int argc, char **argv)
{
	static const struct option lo[] = {
		{ "json", no_argument, NULL, 'j' },
		{ "all", no_argument, NULL, 'a' },
		{ "watch", required_argument, NULL, 'w' },
		{ "dir", required_argument, NULL, 'd' },
		{ "help", no_argument, NULL, 'h' },
		{ "version", no_argument, NULL, 'V' },
		{ NULL, 0, NULL, 0 },
	};
	double watch = 0;
	const char *cmd;
	int c, r = 0;

	smcr_ctl_dir(ctl_dir, sizeof(ctl_dir));
	while ((c = getopt_long(argc, argv, "+ajw:d:hV", lo, NULL)) != -1) {
		switch (c) {
		case 'j': opt_json = true; break;
		case 'a': opt_all = true; break;
		case 'w': {
			char *end;

			watch = strtod(optarg, &end);
			if (*end || watch <= 0) {
				return usage_error("--watch: not a number of seconds: %s", optarg);
			}
			break;
		}
		case 'd':
			if ((size_t)snprintf(ctl_dir, sizeof(ctl_dir), "%s", optarg) >=
			    sizeof(ctl_dir))
				return usage_error("--dir: name too long");
			dir_given = true;
			break;
		case 'h': usage(stdout); return 0;
		case 'V': printf("smcrctl (smcrbd) %s\n", PACKAGE_VERSION); return 0;
		default: return usage_error(NULL);
		}
	}
	if (optind >= argc)
		return usage_error("no command (list, status, stats, metrics, fail-link, fault, reset, send)");
	cmd = argv[optind++];
	opt_watch = watch;
	signal(SIGINT, on_signal);
	signal(SIGTERM, on_signal);
	signal(SIGPIPE, SIG_IGN);
	if (!strcmp(cmd, "fail-link")) {
		char line[64], *end;
		long id;

		if (optind >= argc || optind + 2 < argc) {
			return usage_error("usage: smcrctl fail-link N [TARGET]");
		}
		id = strtol(argv[optind], &end, 10);
		if (*end || id < 1 || id > 255) {
			return usage_error("fail-link: N is a link id, 1..255");
		}
		snprintf(line, sizeof(line), "fault fail-link=%ld", id);
		return cmd_send(optind + 1 < argc ? argv[optind + 1] : NULL, line, true);
	}
	if (!strcmp(cmd, "fault")) {
		char line[256];

		if (optind >= argc || optind + 2 < argc || !strchr(argv[optind], '=')) {
			return usage_error("usage: smcrctl fault SPEC [TARGET], e.g. drop-link=1,for=3000");
		}
		snprintf(line, sizeof(line), "fault %s", argv[optind]);
		return cmd_send(optind + 1 < argc ? argv[optind + 1] : NULL, line, true);
	}
	if (!strcmp(cmd, "reset")) {
		if (optind + 1 < argc)
			return usage_error("usage: smcrctl reset [TARGET]");
		return cmd_send(optind < argc ? argv[optind] : NULL, "reset", true);
	}
	if (!strcmp(cmd, "send")) {
		char line[512] = "";
		int i;

		if (optind + 2 > argc) {
			return usage_error("usage: smcrctl send TARGET COMMAND...");
		}
		for (i = optind + 1; i < argc; i++)
			snprintf(line + strlen(line), sizeof(line) - strlen(line), "%s%s",
				 i > optind + 1 ? " " : "", argv[i]);
		return cmd_send(argv[optind], line, true);
	}
	if (!strcmp(cmd, "metrics") && watch <= 0) {
		if (optind + 1 < argc)
			return usage_error("usage: smcrctl metrics [TARGET]");
		return cmd_metrics(optind < argc ? argv[optind] : NULL);
	}
	if (strcmp(cmd, "list") && strcmp(cmd, "status") && strcmp(cmd, "stats") &&
	    strcmp(cmd, "metrics")) {
		return usage_error("unknown command '%s'", cmd);
	}
	if (optind + 1 < argc || (!strcmp(cmd, "list") && optind < argc))
		return usage_error("%s: too many arguments", cmd);
	do {
		if (watch > 0 && !opt_json && isatty(STDOUT_FILENO))
			printf("\033[H\033[2J");
		if (watch > 0 && !opt_json) {
			time_t now = time(NULL);
			char ts[32];

			strftime(ts, sizeof(ts), "%F %T", localtime(&now));
			printf("smcrctl %s, every %gs: %s\n\n", cmd, watch, ts);
		}
		if (!strcmp(cmd, "list"))
			r = cmd_list();
		else if (!strcmp(cmd, "metrics"))
			r = cmd_metrics(optind < argc ? argv[optind] : NULL);
		else
			r = cmd_show(!strcmp(cmd, "stats"), optind < argc ? argv[optind] : NULL);
		fflush(stdout);
		if (watch > 0 && !stop) {
			struct timespec ts = { .tv_sec = (time_t)watch,
					       .tv_nsec = (long)((watch - (time_t)watch) * 1e9) };

			nanosleep(&ts, NULL);
		}
	} while (watch > 0 && !stop);
	return r;
}
