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

int nbdc_uri_parse(const char *uri, struct nbdc_uri *u)
{
	const char *rest, *slash;
	char hostport[300];
	unsigned defport;

	memset(u, 0, sizeof(*u));
	if (!strncmp(uri, "smcr://", 7)) {
		u->transport = NBDC_SMCR;
		defport = NBDC_SMCR_PORT;
		rest = uri + 7;
	} else if (!strncmp(uri, "nbd://", 6)) {
		u->transport = NBDC_TCP;
		defport = NBD_DEFAULT_PORT;
		rest = uri + 6;
	} else {
		return -EPROTONOSUPPORT;
	}
	slash = strchr(rest, '/');
	if (!slash)
		slash = rest + strlen(rest);
	if ((size_t)(slash - rest) >= sizeof(hostport))
		return -ENAMETOOLONG;
	memcpy(hostport, rest, (size_t)(slash - rest));
	hostport[slash - rest] = '\0';
	if (nbdc_hostport_parse(hostport, defport, u->host, sizeof(u->host), u->port,
				sizeof(u->port)))
		return -EINVAL;
	if (*slash) {
		const char *p = slash + 1;
		size_t n = 0;

		/* Percent-decoding of the export name. */
		while (*p) {
			int c = (unsigned char)*p;

			if (c == '%') {
				if (!isxdigit((unsigned char)p[1]) ||
				    !isxdigit((unsigned char)p[2]))
					return -EINVAL;
				c = hexval(p[1]) << 4 | hexval(p[2]);
				if (!c)		/* NBD strings hold no NUL */
					return -EINVAL;
				p += 3;
			} else {
				p++;
			}
			if (n >= sizeof(u->export) - 1)
				return -ENAMETOOLONG;
			u->export[n++] = (char)c;
		}
		u->export[n] = '\0';
	}
	return 0;
}
