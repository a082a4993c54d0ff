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
	return t == NBDC_TCP ? "nbd" : "smcr";
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
		else {
			snprintf(u->bad_key, sizeof(u->bad_key), "%s", key);
			return -EINVAL;
		}
		if (r < 0)
			return -EINVAL;
		if (r >= 4096 || (r >= 256 && (!strcmp(key, "tls-username") ||
					      !strcmp(key, "tls-hostname"))))
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
	if ((size_t)(slash - rest) >= sizeof(hostport))
		return -ENAMETOOLONG;
	memcpy(hostport, rest, (size_t)(slash - rest));
	hostport[slash - rest] = '\0';
	if (nbdc_hostport_parse(hostport, defport, u->host, sizeof(u->host), u->port,
				sizeof(u->port)))
		return -EINVAL;
	if (slash < query) {
		r = decode(slash + 1, (size_t)(query - slash - 1), u->export, sizeof(u->export));
		if (r < 0)
			return r;
	}
	if (*query)
		return parse_query(query + 1, u);
	return 0;
}
