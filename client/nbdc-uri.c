/* SPDX-License-Identifier: BSD-3-Clause */
/* smcrbd: the clients' export addresses: smcr:// and nbd:// URIs, HOST:PORT. */
#include <config.h>

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nbdc-uri.h"

static int hexval(char c)
{
	return isdigit((unsigned char)c) ? c - '0' : tolower((unsigned char)c) - 'a' + 10;
}

const char *nbdc_transport_name(enum nbdc_transport t)
{
	return t == NBDC_TCP ? "nbd" : t == NBDC_UNIX ? "nbd+unix" : "smcr";
}

void nbdc_uri_format(enum nbdc_transport t, bool tls, const char *host, const char *port,
		     const char *export, char *buf, size_t len)
{
	bool v6 = host && strchr(host, ':');

	if (t == NBDC_UNIX)
		snprintf(buf, len, "%s:///%s?socket=%s", tls ? "nbds+unix" : "nbd+unix",
			 export ? export : "", host ? host : "");
	else
		snprintf(buf, len, "%s://%s%s%s:%s/%s",
			 tls && t == NBDC_TCP ? "nbds" : nbdc_transport_name(t), v6 ? "[" : "",
			 host ? host : "", v6 ? "]" : "", port ? port : "",
			 export ? export : "");
}

void nbdc_uri_strerror(const char *uri, const struct nbdc_uri *u, int r, char *buf,
		       size_t len)
{
	if (r == -EINVAL && u->bad_key[0])
		snprintf(buf, len, "%s: unknown query key '%s' (known: %s)", uri, u->bad_key,
			 NBDC_URI_KEYS);
	else if (r == -EPROTONOSUPPORT)
		snprintf(buf, len, "%s: use smcr://HOST[:PORT]/EXPORT, nbd://..., nbds://..., "
			 "nbd+unix:///EXPORT?socket=PATH or nbds+unix://...", uri);
	else if (r == -EDESTADDRREQ)
		snprintf(buf, len, "%s: socket=PATH is for nbd+unix:// and nbds+unix:// URIs, "
			 "which need it (and no host)", uri);
	else if (r == -ENAMETOOLONG)
		snprintf(buf, len, "%s: a part is too long", uri);
	else
		snprintf(buf, len, "%s: bad URI", uri);
}

int nbdc_hostport_parse(const char *s, unsigned default_port, char *host,
			size_t hostlen, char *port, size_t portlen)
{
	const char *colon, *hend;
	char *end;
	unsigned long p;

	if (!s || !*s)
		return -EINVAL;
	if (*s == '[') {
		hend = strchr(s, ']');
		if (!hend || hend == s + 1)
			return -EINVAL;
		if ((size_t)(hend - s - 1) >= hostlen)
			return -ENAMETOOLONG;
		memcpy(host, s + 1, (size_t)(hend - s - 1));
		host[hend - s - 1] = '\0';
		colon = hend[1] == ':' ? hend + 1 : NULL;
		if (hend[1] && !colon)
			return -EINVAL;
	} else {
		colon = strchr(s, ':');
		if (colon && strchr(colon + 1, ':'))	/* bare IPv6 */
			colon = NULL;
		hend = colon ? colon : s + strlen(s);
		if (hend == s)
			return -EINVAL;
		if ((size_t)(hend - s) >= hostlen)
			return -ENAMETOOLONG;
		memcpy(host, s, (size_t)(hend - s));
		host[hend - s] = '\0';
	}
	if (colon) {
		errno = 0;
		p = strtoul(colon + 1, &end, 10);
		if (!colon[1] || *end || errno || p == 0 || p > 65535)
			return -EINVAL;
	} else {
		p = default_port;
	}
	snprintf(port, portlen, "%lu", p);
	return 0;
}

int nbdc_servers_parse(const char *list, unsigned default_port, struct nbdc_server *s,
		       unsigned max, unsigned *n)
{
	char one[300];
	const char *p = list, *comma;
	size_t len;
	int r;

	if (!list || !*list)
		return -EINVAL;
	for (;;) {
		comma = strchr(p, ',');
		len = comma ? (size_t)(comma - p) : strlen(p);
		if (len >= sizeof(one))
			return -ENAMETOOLONG;
		if (*n >= max)
			return -E2BIG;
		memcpy(one, p, len);
		one[len] = '\0';
		r = nbdc_hostport_parse(one, default_port, s[*n].host, sizeof(s[*n].host),
					s[*n].port, sizeof(s[*n].port));
		if (r < 0)
			return r;
		(*n)++;
		if (!comma)
			return 0;
		p = comma + 1;
	}
}

/* Percent-decodes len bytes of src into dst (NUL-terminated). */
static int decode(const char *src, size_t len, char *dst, size_t dstlen)
{
	const char *p = src, *end = src + len;
	size_t n = 0;

	while (p < end) {
		int c = (unsigned char)*p;

		if (c == '%') {
			if (end - p < 3 || !isxdigit((unsigned char)p[1]) ||
			    !isxdigit((unsigned char)p[2]))
				return -EINVAL;
			c = hexval(p[1]) << 4 | hexval(p[2]);
			if (!c)		/* NBD strings and paths hold no NUL */
				return -EINVAL;
			p += 3;
		} else {
			p++;
		}
		if (n >= dstlen - 1)
			return -ENAMETOOLONG;
		dst[n++] = (char)c;
	}
	dst[n] = '\0';
	return 0;
}

static int parse_bool(const char *v)
{
	if (!strcmp(v, "true") || !strcmp(v, "on") || !strcmp(v, "yes") || !strcmp(v, "1"))
		return 1;
	if (!strcmp(v, "false") || !strcmp(v, "off") || !strcmp(v, "no") || !strcmp(v, "0"))
		return 0;
	return -EINVAL;
}

/* key=value&... (libnbd's names). */
static int parse_query(const char *q, struct nbdc_uri *u)
{
	while (*q) {
		size_t len = strcspn(q, "&");
		const char *eq = memchr(q, '=', len);
		char key[32], val[4096];
		int r;

		if (!eq || (size_t)(eq - q) >= sizeof(key)) {
			snprintf(u->bad_key, sizeof(u->bad_key), "%.*s",
				 (int)(eq ? (size_t)(eq - q) : len), q);
			return -EINVAL;
		}
		memcpy(key, q, (size_t)(eq - q));
		key[eq - q] = '\0';
		r = decode(eq + 1, len - (size_t)(eq - q) - 1, val, sizeof(val));
		if (r < 0)
			return r;
		if (!strcmp(key, "tls-certificates"))
			r = snprintf(u->tls_certificates, sizeof(u->tls_certificates), "%s", val);
		else if (!strcmp(key, "tls-psk-file"))
			r = snprintf(u->tls_psk_file, sizeof(u->tls_psk_file), "%s", val);
		else if (!strcmp(key, "tls-username"))
			r = snprintf(u->tls_username, sizeof(u->tls_username), "%s", val);
		else if (!strcmp(key, "tls-hostname"))
			r = snprintf(u->tls_hostname, sizeof(u->tls_hostname), "%s", val);
		else if (!strcmp(key, "tls-verify-peer"))
			r = u->tls_verify_peer = parse_bool(val);
		else if (!strcmp(key, "socket") && u->transport == NBDC_UNIX)
			r = *val ? snprintf(u->host, sizeof(u->host), "%s", val) : -EINVAL;
		else if (!strcmp(key, "socket"))
			return -EDESTADDRREQ;
		else {
			snprintf(u->bad_key, sizeof(u->bad_key), "%s", key);
			return -EINVAL;
		}
		if (r < 0)
			return -EINVAL;
		if (r >= 4096 || (r >= 256 && (!strcmp(key, "tls-username") ||
					      !strcmp(key, "tls-hostname"))) ||
		    (r >= 108 && !strcmp(key, "socket")))	/* sun_path */
			return -ENAMETOOLONG;
		q += len;
		if (*q == '&')
			q++;
	}
	return 0;
}

int nbdc_uri_parse(const char *uri, struct nbdc_uri *u)
{
	const char *rest, *slash, *at, *query;
	char hostport[300];
	unsigned defport;
	int r;

	memset(u, 0, sizeof(*u));
	u->tls_verify_peer = -1;
	if (!strncmp(uri, "smcr://", 7)) {
		u->transport = NBDC_SMCR;
		defport = NBDC_SMCR_PORT;
		rest = uri + 7;
	} else if (!strncmp(uri, "nbd://", 6)) {
		u->transport = NBDC_TCP;
		defport = NBD_DEFAULT_PORT;
		rest = uri + 6;
	} else if (!strncmp(uri, "nbds://", 7)) {
		u->transport = NBDC_TCP;
		u->tls = true;
		defport = NBD_DEFAULT_PORT;
		rest = uri + 7;
	} else if (!strncmp(uri, "nbd+unix://", 11)) {
		u->transport = NBDC_UNIX;
		defport = 0;
		rest = uri + 11;
	} else if (!strncmp(uri, "nbds+unix://", 12)) {
		u->transport = NBDC_UNIX;
		u->tls = true;
		defport = 0;
		rest = uri + 12;
	} else {
		return -EPROTONOSUPPORT;
	}
	query = strchr(rest, '?');
	if (!query)
		query = rest + strlen(rest);
	slash = memchr(rest, '/', (size_t)(query - rest));
	if (!slash)
		slash = query;
	/* user@: the TLS username (libnbd's), for nbds:// only. */
	at = memchr(rest, '@', (size_t)(slash - rest));
	if (at) {
		if (!u->tls)
			return -EINVAL;
		r = decode(rest, (size_t)(at - rest), u->tls_username, sizeof(u->tls_username));
		if (r < 0 || !u->tls_username[0])
			return r < 0 ? r : -EINVAL;
		rest = at + 1;
	}
	if (u->transport == NBDC_UNIX) {
		if (slash != rest)		/* a host beside socket= */
			return -EINVAL;
	} else {
		if ((size_t)(slash - rest) >= sizeof(hostport))
			return -ENAMETOOLONG;
		memcpy(hostport, rest, (size_t)(slash - rest));
		hostport[slash - rest] = '\0';
		if (nbdc_hostport_parse(hostport, defport, u->host, sizeof(u->host), u->port,
					sizeof(u->port)))
			return -EINVAL;
	}
	if (slash < query) {
		r = decode(slash + 1, (size_t)(query - slash - 1), u->export, sizeof(u->export));
		if (r < 0)
			return r;
	}
	if (*query) {
		r = parse_query(query + 1, u);
		if (r < 0)
			return r;
	}
	if (u->transport == NBDC_UNIX && !u->host[0])
		return -EDESTADDRREQ;
	return 0;
}
