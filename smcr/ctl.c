/* SPDX-License-Identifier: BSD-3-Clause */
/* smcrbd: the control socket of a libsmcr program (see smcr.h), which
 * smcrctl(1) reads: status of the link groups, links and connections,
 * counters, the program's own sections, fault injection.
 *
 * One thread per control socket: it polls the listening socket, an
 * eventfd (stop) and up to 16 clients at once: one command line in, the
 * answer out, close.  A client that does not send its line within two
 * seconds, or read its answer within ten, is dropped. */
#include <config.h>

#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>

#include "log.h"
#include "monotime.h"
#include "smcr.h"

#define CTL_MAX_SECTIONS	8
#define CTL_LINE_MAX		512
#define CTL_CLIENT_MS		2000	/* to send the command line */
#define CTL_ANSWER_MS		10000	/* to read the answer */
#define CTL_CLIENTS		16	/* served at once */
#define CTL_BUF_MAX		(16u << 20)

struct ctl_section {
	char name[32];
	struct smcr_ctl_section sec;
	bool used;
};

struct smcr_ctl {
	struct smcr_ctx *ctx;
	char name[64];
	char path[sizeof(((struct sockaddr_un *)0)->sun_path)];
	int lfd;
	int stopfd;
	gid_t group;		/* (gid_t)-1: none (smcr_ctl_set_group()) */
	pthread_t thread;
	/* Sections: lock protects the table; busy counts callbacks running
	 * (remove waits for it to drop). */
	pthread_mutex_t lock;
	pthread_cond_t idle;
	unsigned int busy;
	struct ctl_section secs[CTL_MAX_SECTIONS];
	/* "reset": the totals then, subtracted from what stats show (the
	 * control thread's own). */
	struct smcr_stats base;
	bool has_base;
};

char *smcr_ctl_dir(char *buf, size_t len)
{
	const char *env = getenv("SMCR_CTL_DIR");

	if (env && *env)
		snprintf(buf, len, "%s", env);
	else if (geteuid() == 0)
		snprintf(buf, len, "/run/smcr");
	else if ((env = getenv("XDG_RUNTIME_DIR")) && *env)
		snprintf(buf, len, "%s/smcr", env);
	else
		snprintf(buf, len, "/tmp/smcr-%u", (unsigned int)geteuid());
	return buf;
}

int smcr_ctl_dir_check(const char *dir, const char **why)
{
	struct stat st;
	const char *w = NULL;
	int ret = 0;

	if (lstat(dir, &st)) {
		ret = -errno;
		w = strerror(errno);
	} else if (!S_ISDIR(st.st_mode)) {
		ret = -ENOTDIR;
		w = "not a directory";
	} else if (st.st_uid != 0 && st.st_uid != geteuid()) {
		ret = -EPERM;
		w = "owned by another user";
	} else if (st.st_mode & (S_IWGRP | S_IWOTH)) {
		ret = -EPERM;
		w = "writable by group or others";
	}
	if (why)
		*why = w;
	return ret;
}

const char *smcr_ctl_path(struct smcr_ctl *ctl)
{
	return ctl ? ctl->path : "";
}

/* --- answers --------------------------------------------------------- */

struct sbuf {
	char *p;
	size_t len, cap;
	bool oom;
};

static bool sb_reserve(struct sbuf *b, size_t more)
{
	size_t cap = b->cap ? b->cap : 4096;
	char *p;

	if (b->oom)
		return false;
	if (b->len + more + 1 <= b->cap)
		return true;
	while (cap < b->len + more + 1)
		cap *= 2;
	if (cap > CTL_BUF_MAX || !(p = realloc(b->p, cap))) {
		b->oom = true;
		return false;
	}
	b->p = p;
	b->cap = cap;
	return true;
}

__attribute__((format(printf, 2, 3)))
static void sb_printf(struct sbuf *b, const char *fmt, ...)
{
	va_list ap;
	int n;

	if (!sb_reserve(b, 256))
		return;
	va_start(ap, fmt);
	n = vsnprintf(b->p + b->len, b->cap - b->len, fmt, ap);
	va_end(ap);
	if (n < 0)
		return;
	if ((size_t)n >= b->cap - b->len) {
		if (!sb_reserve(b, (size_t)n))
			return;
		va_start(ap, fmt);
		vsnprintf(b->p + b->len, b->cap - b->len, fmt, ap);
		va_end(ap);
	}
	b->len += (size_t)n;
}

/* Appends what a dump-like function writes, growing the buffer on
 * -ENOSPC.  Returns 0 or -errno (nothing appended). */
static int sb_dump(struct sbuf *b, int (*fn)(void *, char *, size_t, bool), void *arg,
		   bool json)
{
	size_t want = 16384;
	int n;

	for (;;) {
		if (!sb_reserve(b, want))
			return -ENOMEM;
		n = fn(arg, b->p + b->len, b->cap - b->len, json);
		if (n >= 0 && (size_t)n < b->cap - b->len) {
			b->len += (size_t)n;
			b->p[b->len] = '\0';
			return 0;
		}
		if (n != -ENOSPC && n < 0)
			return n;
		want = (b->cap - b->len) * 2;
	}
}

static int ctx_dump_fn(void *arg, char *buf, size_t len, bool json)
{
	return smcr_ctx_dump(arg, buf, len, json);
}

#define STAT(name) { #name, offsetof(struct smcr_stats, name) }
static const struct {
	const char *name;
	size_t off;
} stat_fields[] = {
	STAT(connections), STAT(smc_connections), STAT(fallbacks),
	STAT(link_groups), STAT(links_added), STAT(links_deleted),
	STAT(link_failures), STAT(failovers), STAT(cdc_sent), STAT(cdc_recv),
	STAT(rdma_writes), STAT(bytes_sent), STAT(bytes_recv), STAT(llc_sent),
	STAT(llc_recv), STAT(rkeys_confirmed), STAT(test_links),
	STAT(open_connections), STAT(rmbes_in_use), STAT(sndbufs_in_use),
	STAT(rmbs), STAT(links_active), STAT(rebalanced), STAT(devices_lost),
	STAT(fault_held), STAT(fault_discarded), STAT(fault_held_recvs),
	STAT(lgrs_refused_per_address), STAT(local_stalls), STAT(local_stall_ms),
	STAT(clc_retries), STAT(cursor_updates), STAT(cursor_requests), STAT(corked),
	STAT(wake_kick), STAT(wake_timer), STAT(wake_devcq), STAT(wake_link),
	STAT(wake_async), STAT(caller_serves), STAT(prod_rewinds), STAT(cons_held),
	STAT(link_groups_v21), STAT(add_links_refused_max), STAT(pinned_bytes),
	STAT(max_pinned_bytes),
};
#undef STAT

static unsigned long long stat_of(const struct smcr_stats *st, size_t i)
{
	return *(const uint64_t *)((const char *)st + stat_fields[i].off);
}

/* What is held now, not a total: "reset" leaves these. */
static bool stat_is_gauge(size_t i)
{
	size_t off = stat_fields[i].off;

	return off == offsetof(struct smcr_stats, link_groups) ||
	       off == offsetof(struct smcr_stats, link_groups_v21) ||
	       off == offsetof(struct smcr_stats, open_connections) ||
	       off == offsetof(struct smcr_stats, rmbes_in_use) ||
	       off == offsetof(struct smcr_stats, sndbufs_in_use) ||
	       off == offsetof(struct smcr_stats, rmbs) ||
	       off == offsetof(struct smcr_stats, pinned_bytes) ||
	       off == offsetof(struct smcr_stats, max_pinned_bytes) ||
	       off == offsetof(struct smcr_stats, links_active);
}

static uint64_t since(uint64_t now, uint64_t base)
{
	return now > base ? now - base : 0;
}

/* The context's counters since the last "reset": totals less the
 * baseline, gauges as they are.  The totals never go down (a link
 * group's and a socket's counts are kept when they go). */
static void ctl_stats(struct smcr_ctl *ctl, struct smcr_stats *st)
{
	size_t i;

	smcr_ctx_stats(ctl->ctx, st);
	if (!ctl->has_base)
		return;
	for (i = 0; i < sizeof(stat_fields) / sizeof(stat_fields[0]); i++) {
		uint64_t *v = (uint64_t *)((char *)st + stat_fields[i].off);

		if (!stat_is_gauge(i))
			*v = since(*v, stat_of(&ctl->base, i));
	}
	for (i = 0; i < SMCR_STATS_REASONS; i++)
		st->fallback_by_reason[i] = since(st->fallback_by_reason[i],
						  ctl->base.fallback_by_reason[i]);
}

static void stats_text(struct sbuf *b, const struct smcr_stats *st)
{
	size_t i;

	for (i = 0; i < sizeof(stat_fields) / sizeof(stat_fields[0]); i++)
		sb_printf(b, "%s %llu\n", stat_fields[i].name, stat_of(st, i));
	for (i = 0; i < SMCR_STATS_REASONS; i++)
		if (st->fallback_by_reason[i])
			sb_printf(b, "fallback 0x%08x %llu (%s)\n",
				  smcr_stats_reason((unsigned int)i),
				  (unsigned long long)st->fallback_by_reason[i],
				  smcr_reason_str(smcr_stats_reason((unsigned int)i)));
}

/* Appends s as a JSON string ("..." with ", \ and control characters
 * escaped).  libsmcr's one JSON string writer: the library links no JSON
 * library (its users would have to link it too, for the few names and
 * reasons quoted here, in this file only); the programs write theirs with
 * json-c (common/jsonw.h). */
static void json_str(struct sbuf *b, const char *s)
{
	/* room for the worst case: every byte as \u00XX */
	if (!sb_reserve(b, 6 * strlen(s) + 2))
		return;
	sb_printf(b, "\"");
	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;

		if (c == '"' || c == '\\')
			sb_printf(b, "\\%c", c);
		else if (c < 0x20)
			sb_printf(b, "\\u%04x", c);
		else
			sb_printf(b, "%c", c);
	}
	sb_printf(b, "\"");
}

static void stats_json(struct sbuf *b, const struct smcr_stats *st)
{
	unsigned int i, n = 0;

	sb_printf(b, "{");
	for (i = 0; i < sizeof(stat_fields) / sizeof(stat_fields[0]); i++)
		sb_printf(b, "\"%s\":%llu,", stat_fields[i].name, stat_of(st, i));
	sb_printf(b, "\"fallback_reasons\":[");
	for (i = 0; i < SMCR_STATS_REASONS; i++) {
		if (!st->fallback_by_reason[i])
			continue;
		sb_printf(b, "%s{\"code\":%u,\"count\":%llu,\"reason\":", n++ ? "," : "",
			  smcr_stats_reason(i),
			  (unsigned long long)st->fallback_by_reason[i]);
		json_str(b, smcr_reason_str(smcr_stats_reason(i)));
		sb_printf(b, "}");
	}
	sb_printf(b, "]}");
}

/* Runs fn on each used section with the table unlocked (busy held). */
static void sections_begin(struct smcr_ctl *ctl)
{
	pthread_mutex_lock(&ctl->lock);
	ctl->busy++;
	pthread_mutex_unlock(&ctl->lock);
}

static void sections_end(struct smcr_ctl *ctl)
{
	pthread_mutex_lock(&ctl->lock);
	if (--ctl->busy == 0)
		pthread_cond_broadcast(&ctl->idle);
	pthread_mutex_unlock(&ctl->lock);
}

static void status(struct smcr_ctl *ctl, struct sbuf *b, bool json)
{
	struct smcr_stats st;
	unsigned int i, n = 0;

	if (json) {
		sb_printf(b, "{\"name\":");
		json_str(b, ctl->name);
		sb_printf(b, ",\"pid\":%d,\"smcr\":", (int)getpid());
		if (ctl->ctx) {
			size_t mark = b->len;

			if (sb_dump(b, ctx_dump_fn, ctl->ctx, true) < 0) {
				b->len = mark;
				sb_printf(b, "null");
			}
			/* smcr_ctx_dump ends its JSON with a newline. */
			while (b->len > mark && (b->p[b->len - 1] == '\n'))
				b->len--;
			ctl_stats(ctl, &st);
			sb_printf(b, ",\"stats\":");
			stats_json(b, &st);
		} else {
			sb_printf(b, "null,\"stats\":null");
		}
		sb_printf(b, ",\"sections\":{");
	} else {
		sb_printf(b, "%s (pid %d)\n", ctl->name, (int)getpid());
		if (ctl->ctx) {
			size_t mark = b->len;

			if (sb_dump(b, ctx_dump_fn, ctl->ctx, false) < 0)
				b->len = mark;
			if (b->len == mark)
				sb_printf(b, "no link groups\n");
		} else {
			sb_printf(b, "no SMC-R context\n");
		}
	}
	sections_begin(ctl);
	for (i = 0; i < CTL_MAX_SECTIONS; i++) {
		struct ctl_section *s = &ctl->secs[i];
		size_t mark;

		if (!s->used || !s->sec.dump)
			continue;
		mark = b->len;
		if (json) {
			sb_printf(b, "%s", n++ ? "," : "");
			json_str(b, s->name);
			sb_printf(b, ":");
		} else {
			sb_printf(b, "[%s]\n", s->name);
		}
		if (sb_dump(b, s->sec.dump, s->sec.arg, json) < 0) {
			b->len = mark;
			if (json && mark == b->len && n == 1)
				n = 0;
		}
	}
	sections_end(ctl);
	if (json)
		sb_printf(b, "}}\n");
}

/* Commands anybody who can connect may run: they change nothing. */
static bool read_only(const char *line)
{
	static const char *const ro[] = { "status", "status-json", "stats", "stats-json",
					  "help" };
	size_t i;

	for (i = 0; i < sizeof(ro) / sizeof(ro[0]); i++)
		if (!strcmp(line, ro[i]))
			return true;
	return false;
}

/* Whether the client on fd may change state: root, the program's own
 * user, or a member of the control group (SO_PEERCRED, SO_PEERGROUPS). */
static bool may_change(struct smcr_ctl *ctl, int fd, uid_t *uidp)
{
	gid_t group = __atomic_load_n(&ctl->group, __ATOMIC_ACQUIRE);
	struct ucred cred;
	socklen_t len = sizeof(cred);
	gid_t groups[256];
	size_t i;

	*uidp = (uid_t)-1;
	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) < 0)
		return false;	/* unknown: read-only commands */
	*uidp = cred.uid;
	if (cred.uid == 0 || cred.uid == geteuid())
		return true;
	if (group == (gid_t)-1)
		return false;
	if (cred.gid == group)
		return true;
	len = sizeof(groups);
	if (getsockopt(fd, SOL_SOCKET, SO_PEERGROUPS, groups, &len) < 0)
		return false;
	for (i = 0; i < len / sizeof(groups[0]); i++)
		if (groups[i] == group)
			return true;
	return false;
}

/* allowed: may_change() of the client (uid its uid); read-only commands
 * are for anybody. */
static void command(struct smcr_ctl *ctl, const char *line, bool allowed, uid_t uid,
		    struct sbuf *b)
{
	gid_t group = __atomic_load_n(&ctl->group, __ATOMIC_ACQUIRE);
	struct smcr_stats st;
	unsigned int i;
	int r;

	if (!read_only(line) && !allowed) {
		if (group == (gid_t)-1)
			sb_printf(b, "error: permission denied: only root or uid %u may "
				  "change state (you are uid %u)\n",
				  (unsigned int)geteuid(), (unsigned int)uid);
		else
			sb_printf(b, "error: permission denied: only root, uid %u or group "
				  "%u may change state (you are uid %u)\n",
				  (unsigned int)geteuid(), (unsigned int)group,
				  (unsigned int)uid);
		return;
	}
	if (!strcmp(line, "status")) {
		status(ctl, b, false);
	} else if (!strcmp(line, "status-json")) {
		status(ctl, b, true);
	} else if (!strcmp(line, "stats") || !strcmp(line, "stats-json")) {
		if (!ctl->ctx) {
			sb_printf(b, "error: no SMC-R context in this program\n");
			return;
		}
		ctl_stats(ctl, &st);
		if (line[5]) {
			stats_json(b, &st);
			sb_printf(b, "\n");
		} else {
			stats_text(b, &st);
		}
	} else if (!strncmp(line, "fault ", 6)) {
		if (!ctl->ctx) {
			sb_printf(b, "error: no SMC-R context in this program\n");
			return;
		}
		r = smcr_fault(ctl->ctx, line + 6);
		if (r < 0)
			sb_printf(b, "error: %s: %s\n", line + 6,
				  r == -ENOENT ? "no such link" : strerror(-r));
		else
			sb_printf(b, "ok: %s: %d link(s)\n", line + 6, r);
	} else if (!strcmp(line, "reset")) {
		if (!ctl->ctx) {
			sb_printf(b, "error: no SMC-R context in this program\n");
			return;
		}
		smcr_ctx_stats(ctl->ctx, &ctl->base);
		ctl->has_base = true;
		sb_printf(b, "ok: counters reset (gauges and the program's own sections "
			  "kept)\n");
	} else if (!strcmp(line, "help")) {
		sb_printf(b, "commands: status, status-json, stats, stats-json, fault SPEC, "
			  "reset");
		sections_begin(ctl);
		for (i = 0; i < CTL_MAX_SECTIONS; i++)
			if (ctl->secs[i].used && ctl->secs[i].sec.command)
				sb_printf(b, ", %s ...", ctl->secs[i].name);
		sections_end(ctl);
		sb_printf(b, "\n");
	} else {
		r = -ENOSYS;
		sections_begin(ctl);
		for (i = 0; i < CTL_MAX_SECTIONS && r == -ENOSYS; i++) {
			struct ctl_section *s = &ctl->secs[i];
			size_t room = 65536;

			if (!s->used || !s->sec.command || !sb_reserve(b, room))
				continue;
			r = s->sec.command(s->sec.arg, line, b->p + b->len, b->cap - b->len);
			if (r >= 0) {
				b->len += (size_t)r < b->cap - b->len ? (size_t)r :
					  b->cap - b->len - 1;
				b->p[b->len] = '\0';
			}
		}
		sections_end(ctl);
		if (r == -ENOSYS)
			sb_printf(b, "error: unknown command '%s' (try help)\n", line);
		else if (r < 0)
			sb_printf(b, "error: %s: %s\n", line, strerror(-r));
	}
}

/* --- the thread ---------------------------------------------------------- */

/* A client of the control socket: its command line coming in, then its
 * answer going out, each against a deadline. */
struct ctl_client {
	int fd;				/* -1: free slot */
	int64_t deadline;
	bool answering;
	size_t got;
	char line[CTL_LINE_MAX];
	struct sbuf out;
	size_t off;
};

static void client_end(struct ctl_client *c)
{
	close(c->fd);
	free(c->out.p);
	memset(c, 0, sizeof(*c));
	c->fd = -1;
}

/* The line is in (or the client stopped sending): run it, answer next.
 * False: nothing to answer (an empty line), the client ends. */
static bool client_command(struct smcr_ctl *ctl, struct ctl_client *c)
{
	char *nl = strchr(c->line, '\n');
	size_t len;
	bool allowed;
	uid_t uid;

	if (nl)
		*nl = '\0';
	/* An empty line (or only blanks) leaves len at 0: nothing to do. */
	len = strlen(c->line);
	while (len && (c->line[len - 1] == '\r' || c->line[len - 1] == ' '))
		c->line[--len] = '\0';
	if (!len)
		return false;
	allowed = may_change(ctl, c->fd, &uid);
	command(ctl, c->line, allowed, uid, &c->out);
	if (c->out.oom) {
		free(c->out.p);
		c->out = (struct sbuf){ 0 };
		sb_printf(&c->out, "error: out of memory\n");
	}
	c->answering = true;
	c->deadline = now_ms() + CTL_ANSWER_MS;
	return c->out.len > 0;
}

/* Reads or writes what the socket takes now.  False: the client is done. */
static bool client_step(struct smcr_ctl *ctl, struct ctl_client *c)
{
	ssize_t n;

	if (!c->answering) {
		n = recv(c->fd, c->line + c->got, sizeof(c->line) - 1 - c->got, MSG_DONTWAIT);
		if (n < 0)
			return errno == EAGAIN || errno == EINTR;
		c->got += (size_t)n;
		c->line[c->got] = '\0';
		if (n > 0 && !strchr(c->line, '\n') && c->got < sizeof(c->line) - 1)
			return true;
		if (!client_command(ctl, c))
			return false;
	}
	while (c->off < c->out.len) {
		n = send(c->fd, c->out.p + c->off, c->out.len - c->off,
			 MSG_NOSIGNAL | MSG_DONTWAIT);
		if (n < 0)
			return errno == EAGAIN || errno == EINTR;
		if (n == 0)
			return false;
		c->off += (size_t)n;
	}
	return false;
}

/* Serves up to CTL_CLIENTS clients at once: a silent or slow one holds
 * only its own slot, for its deadline at most. */
static void *ctl_thread(void *arg)
{
	struct smcr_ctl *ctl = arg;
	struct ctl_client cl[CTL_CLIENTS];
	struct pollfd p[CTL_CLIENTS + 2];
	unsigned i, n = 0;

	memset(cl, 0, sizeof(cl));
	for (i = 0; i < CTL_CLIENTS; i++)
		cl[i].fd = -1;
	for (;;) {
		int64_t now = now_ms(), next = -1;
		int fd, r;

		p[0] = (struct pollfd){ .fd = ctl->stopfd, .events = POLLIN };
		for (i = 0; i < CTL_CLIENTS; i++) {
			struct ctl_client *c = &cl[i];

			p[i + 2] = (struct pollfd){ .fd = c->fd,
				.events = c->answering ? POLLOUT : POLLIN };
			if (c->fd < 0)
				continue;
			if (c->deadline <= now) {
				client_end(c);	/* too slow: dropped */
				p[i + 2].fd = -1;
				n--;
				continue;
			}
			if (next < 0 || c->deadline - now < next)
				next = c->deadline - now;
		}
		/* After the expired ones are gone: a full table that just
		 * emptied takes connections again. */
		p[1] = (struct pollfd){ .fd = n < CTL_CLIENTS ? ctl->lfd : -1, .events = POLLIN };
		r = poll(p, CTL_CLIENTS + 2, (int)next);
		if (r < 0) {
			if (errno == EINTR)
				continue;
			smcr_err("ctl: poll: %s", strerror(errno));
			break;
		}
		if (p[0].revents)
			break;
		for (i = 0; i < CTL_CLIENTS; i++)
			if (cl[i].fd >= 0 && p[i + 2].revents && !client_step(ctl, &cl[i])) {
				client_end(&cl[i]);
				n--;
			}
		if (!p[1].revents)
			continue;
		fd = accept4(ctl->lfd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
		if (fd < 0)
			continue;
		for (i = 0; cl[i].fd >= 0; i++)
			;
		memset(&cl[i], 0, sizeof(cl[i]));
		cl[i].fd = fd;
		cl[i].deadline = now_ms() + CTL_CLIENT_MS;
		n++;
	}
	for (i = 0; i < CTL_CLIENTS; i++)
		if (cl[i].fd >= 0)
			client_end(&cl[i]);
	return NULL;
}

/* --- setup ------------------------------------------------------------- */

static int mkdir_p(const char *dir)
{
	char tmp[sizeof(((struct sockaddr_un *)0)->sun_path)];
	char *p;

	if (snprintf(tmp, sizeof(tmp), "%s", dir) >= (int)sizeof(tmp))
		return -ENAMETOOLONG;
	for (p = tmp + 1; *p; p++) {
		if (*p != '/')
			continue;
		*p = '\0';
		if (mkdir(tmp, 0755) && errno != EEXIST)
			return -errno;
		*p = '/';
	}
	if (mkdir(tmp, 0755) == 0)
		/* Ours: 0755 whatever the umask (smcr_ctl_dir_check()). */
		return chmod(tmp, 0755) ? -errno : 0;
	return errno == EEXIST ? 0 : -errno;
}

/* Removes the sockets of programs that are gone (killed without a chance
 * to clean up): NAME.PID.sock whose PID does not exist. */
static void remove_stale(const char *dir)
{
	struct dirent *de;
	DIR *d = opendir(dir);

	if (!d)
		return;
	while ((de = readdir(d))) {
		size_t l = strlen(de->d_name);
		char path[sizeof(((struct sockaddr_un *)0)->sun_path)], *dot, *end;
		char base[256];
		long pid;

		if (l < 7 || l >= sizeof(base) || strcmp(de->d_name + l - 5, ".sock"))
			continue;
		memcpy(base, de->d_name, l - 5);
		base[l - 5] = '\0';
		dot = strrchr(base, '.');
		if (!dot)
			continue;
		pid = strtol(dot + 1, &end, 10);
		if (*end || pid <= 0 || kill((pid_t)pid, 0) == 0 || errno != ESRCH)
			continue;
		if (snprintf(path, sizeof(path), "%s/%s", dir, de->d_name) < (int)sizeof(path))
			unlink(path);
	}
	closedir(d);
}

int smcr_ctl_open(struct smcr_ctx *ctx, const char *name, struct smcr_ctl **ctlp)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	const char *env = getenv("SMCR_CTL"), *why;
	char dir[sizeof(sa.sun_path)];
	struct smcr_ctl *ctl;
	pthread_condattr_t ca;
	int ret;

	*ctlp = NULL;
	if (env && (!strcmp(env, "0") || !strcmp(env, "no") || !strcmp(env, "off")))
		return 0;
	if (!name || !*name || strchr(name, '/'))
		return -EINVAL;
	ctl = calloc(1, sizeof(*ctl));
	if (!ctl)
		return -ENOMEM;
	ctl->ctx = ctx;
	ctl->lfd = ctl->stopfd = -1;
	ctl->group = (gid_t)-1;
	snprintf(ctl->name, sizeof(ctl->name), "%s", name);
	smcr_ctl_dir(dir, sizeof(dir));
	ret = mkdir_p(dir);
	if (ret) {
		smcr_warn("ctl: cannot create %s: %s", dir, strerror(-ret));
		goto out_free;
	}
	/* Another user who owns or may write the directory could replace
	 * our socket with theirs. */
	ret = smcr_ctl_dir_check(dir, &why);
	if (ret) {
		struct stat st;

		/* An error, not a warning: someone else may have made the
		 * directory first to take this program's socket. */
		if (!lstat(dir, &st))
			smcr_err("ctl: %s: %s: not using it (owner uid %u, mode %04o; we are "
				 "uid %u): NO CONTROL SOCKET: remove the directory or set "
				 "SMCR_CTL_DIR", dir, why, (unsigned int)st.st_uid,
				 (unsigned int)(st.st_mode & 07777), (unsigned int)geteuid());
		else
			smcr_err("ctl: %s: %s: not using it: NO CONTROL SOCKET", dir, why);
		goto out_free;
	}
	if (snprintf(ctl->path, sizeof(ctl->path), "%s/%s.%d.sock", dir, ctl->name,
		     (int)getpid()) >= (int)sizeof(ctl->path)) {
		ret = -ENAMETOOLONG;
		goto out_free;
	}
	memcpy(sa.sun_path, ctl->path, sizeof(sa.sun_path));
	ctl->lfd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	ctl->stopfd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (ctl->lfd < 0 || ctl->stopfd < 0) {
		ret = -errno;
		goto out_close;
	}
	/* A socket left by an earlier process with our pid is stale, and so
	 * are those of processes that are gone. */
	unlink(ctl->path);
	remove_stale(dir);
	if (bind(ctl->lfd, (struct sockaddr *)&sa, sizeof(sa)) ||
	    listen(ctl->lfd, 16)) {
		ret = -errno;
		smcr_warn("ctl: %s: %s", ctl->path, strerror(-ret));
		goto out_close;
	}
	chmod(ctl->path, 0660);
	pthread_mutex_init(&ctl->lock, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&ctl->idle, &ca);
	pthread_condattr_destroy(&ca);
	ret = -pthread_create(&ctl->thread, NULL, ctl_thread, ctl);
	if (ret) {
		pthread_cond_destroy(&ctl->idle);
		pthread_mutex_destroy(&ctl->lock);
		unlink(ctl->path);
		goto out_close;
	}
	pthread_setname_np(ctl->thread, "smcr-ctl");
	smcr_dbg("ctl: listening on %s", ctl->path);
	*ctlp = ctl;
	return 0;

out_close:
	if (ctl->lfd >= 0)
		close(ctl->lfd);
	if (ctl->stopfd >= 0)
		close(ctl->stopfd);
out_free:
	free(ctl);
	return ret;
}

int smcr_ctl_set_group(struct smcr_ctl *ctl, gid_t gid)
{
	if (!ctl || gid == (gid_t)-1)
		return -EINVAL;
	if (chown(ctl->path, (uid_t)-1, gid) < 0)
		return -errno;
	chmod(ctl->path, 0660);
	__atomic_store_n(&ctl->group, gid, __ATOMIC_RELEASE);
	return 0;
}

void smcr_ctl_close(struct smcr_ctl *ctl)
{
	uint64_t one = 1;

	if (!ctl)
		return;
	if (write(ctl->stopfd, &one, sizeof(one)) < 0)
		smcr_warn("ctl: stop: %s", strerror(errno));
	pthread_join(ctl->thread, NULL);
	unlink(ctl->path);
	close(ctl->lfd);
	close(ctl->stopfd);
	pthread_cond_destroy(&ctl->idle);
	pthread_mutex_destroy(&ctl->lock);
	free(ctl);
}

int smcr_ctl_add_section(struct smcr_ctl *ctl, const struct smcr_ctl_section *sec)
{
	unsigned int i;
	int ret = -ENOSPC;

	if (!ctl)
		return 0;
	if (!sec || !sec->name || !*sec->name || strlen(sec->name) >= sizeof(ctl->secs[0].name))
		return -EINVAL;
	pthread_mutex_lock(&ctl->lock);
	while (ctl->busy)
		pthread_cond_wait(&ctl->idle, &ctl->lock);
	for (i = 0; i < CTL_MAX_SECTIONS; i++)
		if (ctl->secs[i].used && !strcmp(ctl->secs[i].name, sec->name)) {
			ret = -EEXIST;
			goto out;
		}
	for (i = 0; i < CTL_MAX_SECTIONS; i++) {
		if (ctl->secs[i].used)
			continue;
		snprintf(ctl->secs[i].name, sizeof(ctl->secs[i].name), "%s", sec->name);
		ctl->secs[i].sec = *sec;
		ctl->secs[i].sec.name = ctl->secs[i].name;
		ctl->secs[i].used = true;
		ret = 0;
		break;
	}
out:
	pthread_mutex_unlock(&ctl->lock);
	return ret;
}

int smcr_ctl_remove_section(struct smcr_ctl *ctl, const char *name)
{
	unsigned int i;
	int ret = -ENOENT;

	if (!ctl)
		return 0;
	pthread_mutex_lock(&ctl->lock);
	while (ctl->busy)
		pthread_cond_wait(&ctl->idle, &ctl->lock);
	for (i = 0; i < CTL_MAX_SECTIONS; i++)
		if (ctl->secs[i].used && !strcmp(ctl->secs[i].name, name)) {
			ctl->secs[i].used = false;
			ret = 0;
		}
	pthread_mutex_unlock(&ctl->lock);
	return ret;
}
