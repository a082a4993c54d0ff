/* SPDX-License-Identifier: BSD-3-Clause */
/* smcrd: configuration parsing.
 *
 * Config file format (one setting per line, '#' starts a comment):
 *
 *   listen = 0.0.0.0
 *   port = 10809
 *   queue-depth = 128
 *
 *   [export disk0]
 *   path = /dev/sdb
 *   read-only = yes
 *   allow = 10.0.0.0/8, 192.168.0.0/16
 *
 * After FILE come the drop-ins FILE.d/ *.conf, sorted by name: a later
 * setting overrides an earlier one, exports are added (smcrd.conf(5)).
 */
#include <config.h>

#include <arpa/inet.h>
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include "applog.h"
#include "smcr.h"
#include "smcrd-conf.h"

#define DEFAULT_QUEUE_DEPTH	128
#define DEFAULT_MAX_CLIENTS	128
#define DEFAULT_MAX_HANDSHAKES	32
#define DEFAULT_HS_TIMEOUT	60
#define DEFAULT_REQ_TIMEOUT	30
#define DEFAULT_PER_ADDRESS	64
#define DEFAULT_LGRS_PER_ADDRESS	16
#define DEFAULT_MAX_MEMORY	(UINT64_C(1) << 30)

void config_defaults(struct smcrd_config *cfg)
{
	memset(cfg, 0, sizeof(*cfg));
	cfg->queue_depth = DEFAULT_QUEUE_DEPTH;
	cfg->max_clients = DEFAULT_MAX_CLIENTS;
	cfg->max_handshakes = DEFAULT_MAX_HANDSHAKES;
	cfg->handshake_timeout = DEFAULT_HS_TIMEOUT;
	cfg->request_timeout = DEFAULT_REQ_TIMEOUT;
	cfg->max_per_address = DEFAULT_PER_ADDRESS;
	cfg->max_hs_per_address = -1;
	cfg->max_lgrs_per_address = DEFAULT_LGRS_PER_ADDRESS;
	cfg->max_memory = DEFAULT_MAX_MEMORY;
	cfg->max_mem_per_address = UINT64_MAX;
	cfg->fixed_buffers = true;
	cfg->tls_verify_peer = -1;
	cfg->log_level = -1;
}

void config_free(struct smcrd_config *cfg)
{
	free(cfg->listen);
	free(cfg->port);
	free(cfg->unix_path);
	free(cfg->metrics_listen);
	free(cfg->smcr_port);
	free(cfg->pidfile);
	free(cfg->log_file);
	free(cfg->tls_certificates);
	free(cfg->tls_psk);
	free(cfg->ctl_group);
	free(cfg->eids);
	free(cfg->rdma_devices);
	free(cfg->config_file);
	export_list_free(&cfg->cli_exports);
	memset(cfg, 0, sizeof(*cfg));
}

static void seterr(char *err, size_t errlen, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static void seterr(char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(err, errlen, fmt, ap);
	va_end(ap);
}

int parse_uint(const char *s, unsigned min, unsigned max, unsigned *out)
{
	char *end;
	unsigned long v;

	if (!s || !isdigit((unsigned char)*s))
		return -EINVAL;
	errno = 0;
	v = strtoul(s, &end, 10);
	if (errno || *end)
		return -EINVAL;
	if (v < min || v > max)
		return -ERANGE;
	*out = (unsigned)v;
	return 0;
}

int parse_bool(const char *s, bool *out)
{
	if (!strcasecmp(s, "yes") || !strcasecmp(s, "true") || !strcasecmp(s, "on") ||
	    !strcmp(s, "1")) {
		*out = true;
		return 0;
	}
	if (!strcasecmp(s, "no") || !strcasecmp(s, "false") || !strcasecmp(s, "off") ||
	    !strcmp(s, "0")) {
		*out = false;
		return 0;
	}
	return -EINVAL;
}

int acl_parse(const char *s, struct acl_entry *out)
{
	char buf[INET6_ADDRSTRLEN + 8];
	char *slash;
	unsigned max;

	memset(out, 0, sizeof(*out));
	if (!strcmp(s, "*") || !strcmp(s, "all")) {
		out->family = AF_UNSPEC;
		return 0;
	}
	if (strlen(s) >= sizeof(buf))
		return -EINVAL;
	strcpy(buf, s);
	slash = strchr(buf, '/');
	if (slash)
		*slash++ = '\0';
	if (inet_pton(AF_INET, buf, out->addr) == 1) {
		out->family = AF_INET;
		max = 32;
	} else if (inet_pton(AF_INET6, buf, out->addr) == 1) {
		out->family = AF_INET6;
		max = 128;
	} else {
		return -EINVAL;
	}
	out->prefix = max;
	if (slash && parse_uint(slash, 0, max, &out->prefix) < 0)
		return -EINVAL;
	return 0;
}

static bool prefix_eq(const uint8_t *a, const uint8_t *b, unsigned bits)
{
	unsigned full = bits / 8, rest = bits % 8;

	if (memcmp(a, b, full))
		return false;
	if (rest) {
		uint8_t mask = (uint8_t)(0xff << (8 - rest));

		return (a[full] & mask) == (b[full] & mask);
	}
	return true;
}

bool acl_match(const struct acl_entry *v, unsigned n, const struct sockaddr *sa)
{
	static const uint8_t v4mapped[12] = { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff };
	const uint8_t *a4 = NULL, *a6 = NULL;
	uint8_t mapped[16];
	unsigned i;

	if (n == 0)
		return true;
	/* Both forms of an IPv4 peer: as itself, for IPv4 entries, and
	 * IPv4-mapped (::ffff:a.b.c.d), for IPv6 entries written so. */
	if (sa->sa_family == AF_INET) {
		a4 = (const uint8_t *)&((const struct sockaddr_in *)sa)->sin_addr;
		memcpy(mapped, v4mapped, sizeof(v4mapped));
		memcpy(mapped + 12, a4, 4);
		a6 = mapped;
	} else if (sa->sa_family == AF_INET6) {
		a6 = (const uint8_t *)&((const struct sockaddr_in6 *)sa)->sin6_addr;
		if (!memcmp(a6, v4mapped, sizeof(v4mapped)))
			a4 = a6 + 12;
	}
	for (i = 0; i < n; i++) {
		if (v[i].family == AF_UNSPEC)
			return true;
		if (v[i].family == AF_INET && a4 && prefix_eq(a4, v[i].addr, v[i].prefix))
			return true;
		if (v[i].family == AF_INET6 && a6 && prefix_eq(a6, v[i].addr, v[i].prefix))
			return true;
	}
	return false;
}

void addr_key_of_fd(int fd, const struct sockaddr *sa, char *out, size_t len)
{
	struct ucred cr;
	socklen_t cl = sizeof(cr);

	if (sa->sa_family == AF_UNIX && fd >= 0 &&
	    getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &cl) == 0 && cl == sizeof(cr)) {
		snprintf(out, len, "uid %u", (unsigned)cr.uid);
		return;
	}
	addr_key_of(sa, out, len);
}

bool share_allows(uint64_t pool, uint64_t used, uint64_t mine, unsigned holders,
		  uint64_t cap, uint64_t want)
{
	uint64_t share, left;
	unsigned n = holders + (mine ? 0 : 1);

	if (!used)
		return true;
	if (used > pool || want > pool - used || mine > used)
		return false;
	share = pool / ((uint64_t)n + 1);
	/* Rounded up: the last unit of a small pool goes too. */
	left = (pool - used + mine + 1) / 2;
	if (share > left)
		share = left;
	/* The cap bounds what a holder adds to its own; one that holds
	 * nothing may take one larger piece. */
	if (mine && cap && share > cap)
		share = cap;
	return mine + want <= share;
}

void addr_key_of(const struct sockaddr *sa, char *out, size_t len)
{
	static const uint8_t v4mapped[12] = { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff };
	const uint8_t *a6;
	struct in6_addr net;
	char buf[INET6_ADDRSTRLEN];

	if (sa->sa_family == AF_UNIX) {
		snprintf(out, len, "local");
	} else if (sa->sa_family == AF_INET) {
		if (!inet_ntop(AF_INET, &((const struct sockaddr_in *)sa)->sin_addr, out,
			       (socklen_t)len))
			snprintf(out, len, "?");
	} else if (sa->sa_family == AF_INET6) {
		a6 = (const uint8_t *)&((const struct sockaddr_in6 *)sa)->sin6_addr;
		if (!memcmp(a6, v4mapped, sizeof(v4mapped))) {
			/* An IPv4 peer on an IPv6 socket: the IPv4 key. */
			if (!inet_ntop(AF_INET, a6 + 12, out, (socklen_t)len))
				snprintf(out, len, "?");
			return;
		}
		/* One /64 is one site's (a host may take any address in it). */
		memcpy(&net, a6, 8);
		memset((uint8_t *)&net + 8, 0, 8);
		if (inet_ntop(AF_INET6, &net, buf, sizeof(buf)))
			snprintf(out, len, "%s/64", buf);
		else
			snprintf(out, len, "?");
	} else {
		snprintf(out, len, "?");
	}
}

void export_spec_free(struct export_spec *s)
{
	free(s->name);
	free(s->path);
	free(s->description);
	free(s->ceph_conf);
	free(s->ceph_id);
	free(s->allow);
	while (s->ntls_allow)
		free(s->tls_allow[--s->ntls_allow]);
	free(s->tls_allow);
	memset(s, 0, sizeof(*s));
}

int export_list_add(struct export_list *l, struct export_spec *spec)
{
	struct export_spec *v;
	unsigned i;

	for (i = 0; i < l->n; i++)
		if (!strcmp(l->v[i].name, spec->name))
			return -EEXIST;
	v = realloc(l->v, (l->n + 1) * sizeof(*v));
	if (!v)
		return -ENOMEM;
	l->v = v;
	l->v[l->n++] = *spec;
	memset(spec, 0, sizeof(*spec));
	return 0;
}

void export_list_free(struct export_list *l)
{
	unsigned i;

	for (i = 0; i < l->n; i++)
		export_spec_free(&l->v[i]);
	free(l->v);
	l->v = NULL;
	l->n = 0;
}

static int add_allow(struct export_spec *s, const char *list, char *err, size_t errlen)
{
	char *copy = strdup(list), *tok, *save = NULL;
	unsigned before = s->nallow;
	int r = 0;

	if (!copy)
		return -ENOMEM;
	for (tok = strtok_r(copy, ", \t", &save); tok; tok = strtok_r(NULL, ", \t", &save)) {
		struct acl_entry e, *v;

		if (acl_parse(tok, &e) < 0) {
			seterr(err, errlen, "bad address prefix '%s'", tok);
			r = -EINVAL;
			break;
		}
		v = realloc(s->allow, (s->nallow + 1) * sizeof(*v));
		if (!v) {
			r = -ENOMEM;
			break;
		}
		s->allow = v;
		s->allow[s->nallow++] = e;
	}
	/* An empty list must not mean "everybody" (no allow at all does). */
	if (!r && s->nallow == before) {
		seterr(err, errlen, "allow: no address prefix given (leave allow out to "
		       "allow every address)");
		r = -EINVAL;
	}
	free(copy);
	return r;
}

/* Names separated by commas (certificate names may hold spaces). */
static int add_tls_allow(struct export_spec *s, const char *list, char *err, size_t errlen)
{
	char *copy = strdup(list), *tok, *save = NULL;
	unsigned before = s->ntls_allow;
	int r = 0;

	if (!copy)
		return -ENOMEM;
	for (tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		char **v, *name;

		while (isspace((unsigned char)*tok))
			tok++;
		name = tok + strlen(tok);
		while (name > tok && isspace((unsigned char)name[-1]))
			*--name = '\0';
		if (!*tok)
			continue;
		if (strlen(tok) > 1024) {
			seterr(err, errlen, "tls-allow: name longer than 1024 bytes");
			r = -EINVAL;
			break;
		}
		v = realloc(s->tls_allow, (s->ntls_allow + 1) * sizeof(*v));
		if (!v) {
			r = -ENOMEM;
			break;
		}
		s->tls_allow = v;
		s->tls_allow[s->ntls_allow] = strdup(tok);
		if (!s->tls_allow[s->ntls_allow]) {
			r = -ENOMEM;
			break;
		}
		s->ntls_allow++;
	}
	if (!r && s->ntls_allow == before) {
		seterr(err, errlen, "tls-allow: no name given (leave tls-allow out to allow "
		       "every client)");
		r = -EINVAL;
	}
	free(copy);
	return r;
}

bool tls_allow_match(char *const *v, unsigned n, const char *name)
{
	unsigned i;

	if (!n)
		return true;
	if (!name)
		return false;
	for (i = 0; i < n; i++)
		if (!strcmp(v[i], name))
			return true;
	return false;
}

static bool name_valid(const char *name)
{
	return strlen(name) <= 4096;
}

/* One export setting (file keys and --export keys share names). */
static int export_set(struct export_spec *s, const char *key, const char *val, char *err,
		      size_t errlen)
{
	char **dst = NULL;

	if (!strcmp(key, "path")) {
		dst = &s->path;
	} else if (!strcmp(key, "description") || !strcmp(key, "desc")) {
		dst = &s->description;
	} else if (!strcmp(key, "ceph-conf")) {
		dst = &s->ceph_conf;
	} else if (!strcmp(key, "ceph-id")) {
		dst = &s->ceph_id;
	} else if (!strcmp(key, "exclusive")) {
		bool b = true;

		if (val && parse_bool(val, &b) < 0)
			goto bad_value;
		s->rbd_exclusive = b;
		return 0;
	} else if (!strcmp(key, "lock-timeout")) {
		unsigned long v;
		char *end;

		if (!val || !*val)
			goto bad_value;
		errno = 0;
		v = strtoul(val, &end, 10);
		if (*end || errno || v < 1 || v > 3600) {
			seterr(err, errlen, "lock-timeout must be 1..3600 seconds");
			return -EINVAL;
		}
		s->lock_timeout_ms = (unsigned)v * 1000;
		return 0;
	} else if (!strcmp(key, "read-only") || !strcmp(key, "readonly") ||
		   !strcmp(key, "ro")) {
		if (!val) {
			s->read_only = true;
			return 0;
		}
		if (parse_bool(val, &s->read_only) < 0)
			goto bad_value;
		return 0;
	} else if (!strcmp(key, "rw")) {
		s->read_only = false;
		return 0;
	} else if (!strcmp(key, "direct")) {
		bool b = true;

		if (val && parse_bool(val, &b) < 0)
			goto bad_value;
		s->direct = b;
		return 0;
	} else if (!strcmp(key, "block-size") || !strcmp(key, "blocksize")) {
		uint64_t v;

		if (!val || parse_size(val, &v) < 0 || v == 0 || v > 65536 || (v & (v - 1))) {
			seterr(err, errlen, "block size must be a power of two 1..65536");
			return -EINVAL;
		}
		s->block_size = (uint32_t)v;
		return 0;
	} else if (!strcmp(key, "allow")) {
		if (!val)
			goto bad_value;
		return add_allow(s, val, err, errlen);
	} else if (!strcmp(key, "tls-allow")) {
		if (!val)
			goto bad_value;
		return add_tls_allow(s, val, err, errlen);
	} else {
		seterr(err, errlen, "unknown export setting '%s'", key);
		return -EINVAL;
	}
	if (!val)
		goto bad_value;
	free(*dst);
	*dst = strdup(val);
	return *dst ? 0 : -ENOMEM;
bad_value:
	seterr(err, errlen, "bad value for '%s'", key);
	return -EINVAL;
}

int config_parse_export_arg(const char *arg, struct export_spec *out, char *err,
			    size_t errlen)
{
	char *copy, *eq, *rest, *tok, *save = NULL;
	int r = -EINVAL;

	memset(out, 0, sizeof(*out));
	out->direct = -1;
	copy = strdup(arg);
	if (!copy)
		return -ENOMEM;
	/* The first field is NAME=PATH (or a bare PATH). */
	rest = strchr(copy, ',');
	if (rest)
		*rest++ = '\0';
	eq = strchr(copy, '=');
	if (eq) {
		*eq = '\0';
		out->name = strdup(copy);
		out->path = strdup(eq + 1);
	} else {
		const char *base = strrchr(copy, '/');

		out->name = strdup(base ? base + 1 : copy);
		out->path = strdup(copy);
	}
	if (!out->name || !out->path) {
		r = -ENOMEM;
		goto out_free;
	}
	if (!*out->path) {
		seterr(err, errlen, "export '%s' has no path", out->name);
		goto out_free;
	}
	if (!name_valid(out->name)) {
		seterr(err, errlen, "export name too long");
		goto out_free;
	}
	for (tok = rest ? strtok_r(rest, ",", &save) : NULL; tok;
	     tok = strtok_r(NULL, ",", &save)) {
		char *v = strchr(tok, '=');

		if (v)
			*v++ = '\0';
		r = export_set(out, tok, v, err, errlen);
		if (r < 0)
			goto out_free;
	}
	free(copy);
	return 0;
out_free:
	free(copy);
	export_spec_free(out);
	return r;
}

static char *trim(char *s)
{
	char *e;

	while (isspace((unsigned char)*s))
		s++;
	e = s + strlen(s);
	while (e > s && isspace((unsigned char)e[-1]))
		*--e = '\0';
	return s;
}

static int set_str(char **dst, const char *val)
{
	char *v = strdup(val);

	if (!v)
		return -ENOMEM;
	free(*dst);
	*dst = v;
	return 0;
}

int config_parse_tls(const char *s)
{
	if (!strcmp(s, "off"))
		return 0;
	if (!strcmp(s, "on"))
		return 1;
	if (!strcmp(s, "require"))
		return 2;
	return -EINVAL;
}

int config_parse_verify(const char *s)
{
	bool b;

	return parse_bool(s, &b) < 0 ? -EINVAL : b;
}

static int parse_syn_option(const char *s)
{
	enum smcr_syn_option m;

	return smcr_syn_option_parse(s, &m) < 0 ? -EINVAL : (int)m;
}

static const char *const tls_names[] = { "off", "on", "require", NULL };
static const char *const verify_names[] = { "off", "on", NULL };
static const char *const syn_names[] = { "auto", "bpf", "off", NULL };
/* In the order of enum smcr_log_level. */
static const char *const log_level_names[] = { "error", "warning", "info", "debug", NULL };

static int parse_log_level(const char *s)
{
	int i;

	for (i = 0; log_level_names[i]; i++)
		if (!strcmp(s, log_level_names[i]))
			return i;
	return -EINVAL;
}

/* name (the config key), long option if not name, short option, type,
 * min, max, the field of struct smcrd_config it lands in. */
#define SET(name, opt, sopt, type, min, max, field) \
	{ name, opt, sopt, type, min, max, offsetof(struct smcrd_config, field), NULL, NULL, NULL }
/* name, field, the parser, what it takes, the values' names. */
#define ENUM(name, field, parse, values, names) \
	{ name, NULL, 0, CFG_ENUM, 0, 0, offsetof(struct smcrd_config, field), parse, values, names }
#define MIB		(UINT64_C(1) << 20)

const struct cfg_setting smcrd_settings[] = {
	SET("listen", NULL, 'l', CFG_STR, 0, 0, listen),
	SET("port", NULL, 'p', CFG_PORT, 0, 0, port),
	SET("unix", NULL, 'U', CFG_PATH, 0, 0, unix_path),
	SET("smcr-port", NULL, 0, CFG_PORT, 0, 0, smcr_port),
	SET("queue-depth", NULL, 'q', CFG_UINT, 1, 4096, queue_depth),
	SET("threads", NULL, 't', CFG_UINT, 1, 256, threads),
	SET("max-clients", NULL, 'm', CFG_UINT, 1, 65536, max_clients),
	SET("max-memory", NULL, 'M', CFG_SIZE, 64 * MIB, UINT64_MAX, max_memory),
	SET("max-memory-per-address", NULL, 0, CFG_SIZE, 0, UINT64_MAX - 1, max_mem_per_address),
	SET("direct", NULL, 'd', CFG_BOOL, 0, 0, direct),
	SET("fixed-buffers", "no-fixed-buffers", 0, CFG_BOOL, 0, 0, fixed_buffers),
	SET("max-handshakes", NULL, 0, CFG_UINT, 1, 65536, max_handshakes),
	SET("handshake-timeout", NULL, 0, CFG_UINT, 1, 3600, handshake_timeout),
	SET("max-rmb-memory", NULL, 0, CFG_SIZE, MIB, (UINT64_C(1) << 32) - 1, max_rmb_memory),
	SET("request-timeout", NULL, 0, CFG_UINT, 1, 3600, request_timeout),
	SET("idle-timeout", NULL, 0, CFG_UINT, 0, 7 * 86400, idle_timeout),
	SET("max-clients-per-address", NULL, 0, CFG_UINT, 0, 65536, max_per_address),
	SET("max-link-groups-per-address", NULL, 0, CFG_UINT, 0, 65536, max_lgrs_per_address),
	SET("max-handshakes-per-address", NULL, 0, CFG_INT, 0, 65536, max_hs_per_address),
	ENUM("syn-option", syn_option, parse_syn_option, "not auto, bpf or off", syn_names),
	SET("eids", NULL, 0, CFG_STR, 0, 0, eids),
	SET("rdma-devices", NULL, 0, CFG_STR, 0, 0, rdma_devices),
	SET("rmbe-size", NULL, 0, CFG_SIZE, 0, 512 * MIB, rmbe_size),
	ENUM("tls", tls, config_parse_tls, "not off, on or require", tls_names),
	SET("tls-certificates", NULL, 0, CFG_PATH, 0, 0, tls_certificates),
	SET("tls-psk", NULL, 0, CFG_PATH, 0, 0, tls_psk),
	ENUM("tls-verify-peer", tls_verify_peer, config_parse_verify, "not on or off", verify_names),
	SET("ctl-group", NULL, 0, CFG_STR, 0, 0, ctl_group),
	SET("metrics-listen", NULL, 0, CFG_STR, 0, 0, metrics_listen),
	SET("pidfile", NULL, 'P', CFG_PATH, 0, 0, pidfile),
	SET("log-file", NULL, 'L', CFG_PATH, 0, 0, log_file),
	ENUM("log-level", log_level, parse_log_level, "not error, warning, info or debug",
	     log_level_names),
	{ .name = NULL },
};

_Static_assert(sizeof(smcrd_settings) / sizeof(smcrd_settings[0]) <= CFG_MAX_SETTINGS + 1,
	       "more settings than bits in set_mask");

const struct cfg_setting *config_setting(const char *name)
{
	const struct cfg_setting *st;

	for (st = smcrd_settings; st->name; st++)
		if (!strcmp(st->name, name))
			return st;
	return NULL;
}

char *abs_path(const char *cwd, const char *p)
{
	char *r;

	if (p[0] == '/')
		return strdup(p);
	if (asprintf(&r, "%s/%s", cwd, p) < 0)
		return NULL;
	return r;
}

int config_setting_apply(struct smcrd_config *cfg, const struct cfg_setting *st,
			 const char *val, const char *cwd)
{
	void *p = (char *)cfg + st->off;
	uint64_t sz = 0;
	unsigned u = 0;
	bool b = false;
	int v = 0;
	char *str;

	/* The value is checked also where the command line wins. */
	switch (st->type) {
	case CFG_PORT:
		if (parse_uint(val, 1, 65535, &u) < 0)
			return -EINVAL;
		break;
	case CFG_UINT:
	case CFG_INT:
		if (parse_uint(val, (unsigned)st->min, (unsigned)st->max, &u) < 0)
			return -EINVAL;
		break;
	case CFG_SIZE:
		if (parse_size(val, &sz) < 0 || sz < st->min || sz > st->max)
			return -EINVAL;
		break;
	case CFG_BOOL:
		if (!val)
			b = strncmp(config_option(st), "no-", 3) != 0;
		else if (parse_bool(val, &b) < 0)
			return -EINVAL;
		break;
	case CFG_ENUM:
		v = st->parse(val);
		if (v < 0)
			return -EINVAL;
		break;
	case CFG_STR:
	case CFG_PATH:
		break;
	}
	if (!cwd && (cfg->set_mask & config_set_bit(st)))
		return 0;
	if (cwd)
		cfg->set_mask |= config_set_bit(st);
	switch (st->type) {
	case CFG_PATH:
		if (cwd) {
			str = abs_path(cwd, val);
			if (!str)
				return -ENOMEM;
			free(*(char **)p);
			*(char **)p = str;
			return 0;
		}
		/* fall through */
	case CFG_STR:
	case CFG_PORT:
		return set_str(p, val);
	case CFG_UINT:
		*(unsigned *)p = u;
		break;
	case CFG_INT:
		*(int *)p = (int)u;
		break;
	case CFG_SIZE:
		*(uint64_t *)p = sz;
		break;
	case CFG_BOOL:
		*(bool *)p = b;
		break;
	case CFG_ENUM:
		*(int *)p = v;
		break;
	}
	return 0;
}

void config_setting_format(const struct smcrd_config *cfg, const struct cfg_setting *st,
			   char *buf, size_t len)
{
	const void *p = (const char *)cfg + st->off;
	const char *s;
	int v;
	unsigned i;

	switch (st->type) {
	case CFG_STR:
	case CFG_PATH:
	case CFG_PORT:
		s = *(char *const *)p;
		snprintf(buf, len, "%s", s ? s : "-");
		return;
	case CFG_UINT:
		snprintf(buf, len, "%u", *(const unsigned *)p);
		return;
	case CFG_INT:
		v = *(const int *)p;
		if (v < 0)
			snprintf(buf, len, "auto");
		else
			snprintf(buf, len, "%d", v);
		return;
	case CFG_SIZE:
		if (*(const uint64_t *)p == UINT64_MAX)
			snprintf(buf, len, "auto");
		else if (!*(const uint64_t *)p && !strcmp(st->name, "rmbe-size"))
			/* libsmcr's choice (smcrd(8), --rmbe-size) */
			snprintf(buf, len, "auto (SMCR_RMBE_SIZE, else 4M down to 64K)");
		else
			snprintf(buf, len, "%llu", (unsigned long long)*(const uint64_t *)p);
		return;
	case CFG_BOOL:
		snprintf(buf, len, "%s", *(const bool *)p ? "yes" : "no");
		return;
	case CFG_ENUM:
		v = *(const int *)p;
		for (i = 0; st->names[i] && (int)i != v; i++)
			;
		if (v < 0)
			snprintf(buf, len, "auto");
		else if (st->names[i])
			snprintf(buf, len, "%s", st->names[i]);
		else
			snprintf(buf, len, "%d", v);
		return;
	}
}

bool config_setting_number(const struct smcrd_config *cfg, const struct cfg_setting *st,
			   uint64_t *out)
{
	const void *p = (const char *)cfg + st->off;

	switch (st->type) {
	case CFG_UINT:
		*out = *(const unsigned *)p;
		return true;
	case CFG_INT:
		*out = (uint64_t)*(const int *)p;
		return *(const int *)p >= 0;
	case CFG_SIZE:
		*out = *(const uint64_t *)p;
		return *out != UINT64_MAX && (*out || strcmp(st->name, "rmbe-size"));
	default:
		return false;
	}
}

static int global_set(struct smcrd_config *cfg, const char *key, const char *val,
		      char *err, size_t errlen)
{
	const struct cfg_setting *st = config_setting(key);
	int r;

	if (!st) {
		seterr(err, errlen, "unknown setting '%s'", key);
		return -EINVAL;
	}
	r = config_setting_apply(cfg, st, val, NULL);
	if (r == -EINVAL)
		seterr(err, errlen, "bad value '%s' for '%s'", val, key);
	return r;
}

/* One file of the configuration. */
static int load_one(const char *path, struct smcrd_config *cfg, bool apply_globals,
		    struct export_list *out, char *err, size_t errlen)
{
	struct export_spec cur;
	bool in_export = false;
	char *line = NULL;
	size_t cap = 0;
	ssize_t len;
	unsigned lineno = 0;
	FILE *f;
	unsigned before = out->n;
	char e2[200];
	int r = 0;

	memset(&cur, 0, sizeof(cur));
	f = fopen(path, "re");
	if (!f) {
		r = -errno;
		seterr(err, errlen, "%s: %s", path, strerror(errno));
		return r;
	}
	while ((len = getline(&line, &cap, f)) > 0) {
		char *s, *eq, *key, *val, *hash;

		lineno++;
		if (memchr(line, '\0', (size_t)len)) {
			/* It would silently cut the line short. */
			seterr(err, errlen, "%s:%u: NUL byte in the line", path, lineno);
			r = -EINVAL;
			goto out_free;
		}
		hash = strchr(line, '#');
		if (hash)
			*hash = '\0';
		s = trim(line);
		if (!*s)
			continue;
		if (*s == '[') {
			char *end = strchr(s, ']');
			char *name;

			if (!end || end[1]) {
				seterr(err, errlen, "%s:%u: bad section header", path, lineno);
				r = -EINVAL;
				goto out_free;
			}
			*end = '\0';
			name = trim(s + 1);
			if (!strncmp(name, "export", 6) && (isspace((unsigned char)name[6]))) {
				name = trim(name + 6);
			} else {
				seterr(err, errlen, "%s:%u: expected [export NAME]", path, lineno);
				r = -EINVAL;
				goto out_free;
			}
			if (!name_valid(name)) {
				seterr(err, errlen, "%s:%u: export name longer than 4096 bytes", path,
				       lineno);
				r = -EINVAL;
				goto out_free;
			}
			if (in_export) {
				r = export_list_add(out, &cur);
				if (r < 0)
					goto out_dup;
			}
			memset(&cur, 0, sizeof(cur));
			cur.direct = -1;
			cur.name = strdup(name);
			if (!cur.name) {
				r = -ENOMEM;
				goto out_free;
			}
			in_export = true;
			continue;
		}
		eq = strchr(s, '=');
		if (!eq) {
			seterr(err, errlen, "%s:%u: expected KEY = VALUE", path, lineno);
			r = -EINVAL;
			goto out_free;
		}
		*eq = '\0';
		key = trim(s);
		val = trim(eq + 1);
		if (hash)
			/* "description = build #42" would be served as "build"
			 * without a word: a value cannot hold a '#'. */
			log_warn("%s:%u: '#' starts a comment: the value of '%s' is '%s' "
				 "(a value cannot hold '#')", path, lineno, key, val);
		if (in_export)
			r = export_set(&cur, key, val, e2, sizeof(e2));
		else
			r = apply_globals ? global_set(cfg, key, val, e2, sizeof(e2)) : 0;
		if (r < 0) {
			seterr(err, errlen, "%s:%u: %s", path, lineno, e2);
			goto out_free;
		}
	}
	if (ferror(f)) {
		r = -EIO;
		seterr(err, errlen, "%s: read error", path);
		goto out_free;
	}
	if (in_export) {
		in_export = false;
		r = export_list_add(out, &cur);
		if (r < 0)
			goto out_dup;
	}
	goto out_free;
out_dup:
	seterr(err, errlen, "%s: export '%s' %s", path, cur.name,
	       r == -EEXIST ? "defined twice" : "cannot be added");
out_free:
	if (in_export || cur.name)
		export_spec_free(&cur);
	free(line);
	fclose(f);
	if (r == 0) {
		unsigned i;

		for (i = before; i < out->n; i++)
			if (!out->v[i].path) {
				seterr(err, errlen, "%s: export '%s' has no path", path,
				       out->v[i].name);
				return -EINVAL;
			}
	}
	return r;
}

/* The drop-ins: NAME.conf, not hidden, a regular file (a symlink to
 * /dev/null masks one). */
static int dropin_filter(const struct dirent *de)
{
	size_t n = strlen(de->d_name);

	return de->d_name[0] != '.' && n > 5 && !strcmp(de->d_name + n - 5, ".conf");
}

/* By byte value, whatever the locale. */
static int dropin_cmp(const struct dirent **a, const struct dirent **b)
{
	return strcmp((*a)->d_name, (*b)->d_name);
}

int config_load_file(const char *path, struct smcrd_config *cfg, bool apply_globals,
		     struct export_list *out, char *err, size_t errlen)
{
	struct dirent **names = NULL;
	char *dir = NULL;
	int i, n, r;

	r = load_one(path, cfg, apply_globals, out, err, errlen);
	if (r < 0)
		return r;
	if (asprintf(&dir, "%s.d", path) < 0)
		return -ENOMEM;
	n = scandir(dir, &names, dropin_filter, dropin_cmp);
	if (n < 0) {
		r = errno == ENOENT ? 0 : -errno;
		if (r < 0)
			seterr(err, errlen, "%s: %s", dir, strerror(-r));
		goto out_dir;
	}
	for (i = 0; i < n; i++) {
		struct stat st;
		char *file;

		if (r < 0)
			continue;
		if (asprintf(&file, "%s/%s", dir, names[i]->d_name) < 0) {
			r = -ENOMEM;
			continue;
		}
		if (stat(file, &st) < 0) {
			r = -errno;
			seterr(err, errlen, "%s: %s", file, strerror(errno));
		} else if (S_ISREG(st.st_mode)) {
			r = load_one(file, cfg, apply_globals, out, err, errlen);
		}
		free(file);
	}
	for (i = 0; i < n; i++)
		free(names[i]);
	free(names);
out_dir:
	free(dir);
	return r;
}
