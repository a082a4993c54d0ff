/* SPDX-License-Identifier: BSD-3-Clause */
/* smcrbd: the clients' export addresses (smcr:// and nbd:// URIs). */
#ifndef SMCRBD_NBDC_URI_H
#define SMCRBD_NBDC_URI_H

#include <stdbool.h>
#include <stddef.h>

#include "nbd-proto.h"

/* Default SMC-R port of smcrd (its TCP NBD port is NBD_DEFAULT_PORT). */
#define NBDC_SMCR_PORT		10810

enum nbdc_transport {
	NBDC_SMCR = 0,		/* SMC-R, TCP fallback by CLC Decline */
	NBDC_TCP,		/* plain NBD over TCP */
	NBDC_UNIX,		/* NBD over a Unix socket (host: its path) */
};

/* smcr://host[:port]/export, nbd://host[:port]/export and
 * nbds://[user@]host[:port]/export (NBD over TCP with TLS required; user
 * is the PSK identity), IPv6 hosts in brackets, an empty export name
 * allowed.  The port defaults to NBDC_SMCR_PORT or NBD_DEFAULT_PORT.
 * nbd+unix:///export?socket=PATH and nbds+unix://[user@]/export?socket=PATH
 * (libnbd's) are NBD over the Unix socket PATH, in the clear or with TLS;
 * their host is empty, and the path goes into host.  A query string
 * takes libnbd's TLS parameters: tls-certificates=DIR, tls-psk-file=FILE,
 * tls-username=NAME, tls-hostname=NAME, tls-verify-peer=true|false, and
 * socket=PATH (+unix only); an unknown key is refused (-EINVAL, the key
 * in bad_key) where libnbd ignores it, so that a misspelt TLS key does
 * not go unnoticed.  -EDESTADDRREQ: a +unix URI without socket=, or a
 * socket= elsewhere. */
struct nbdc_uri {
	enum nbdc_transport transport;
	bool tls;
	char host[256];
	char port[16];
	char export[NBD_MAX_STRING + 1];
	char tls_certificates[4096];		/* "": not given */
	char tls_psk_file[4096];
	char tls_username[256];
	char tls_hostname[256];
	int tls_verify_peer;			/* -1: not given, 0, 1 */
	char bad_key[64];			/* an unknown query key, or "" */
};
/* The query keys nbdc_uri_parse takes, for messages. */
#define NBDC_URI_KEYS "tls-certificates, tls-psk-file, tls-username, tls-hostname, " \
	"tls-verify-peer, socket"
int nbdc_uri_parse(const char *uri, struct nbdc_uri *u);
/* HOST, HOST:PORT, [V6]:PORT into host and port (default_port if none). */
int nbdc_hostport_parse(const char *s, unsigned default_port, char *host,
			size_t hostlen, char *port, size_t portlen);
/* Servers of one export (gateways in front of the same storage): the
 * clients fail over from one to the next. */
#define NBDC_MAX_SERVERS	8
struct nbdc_server {
	char host[256];
	char port[16];
};
/* A comma list HOST[:PORT],HOST[:PORT],... (IPv6 as [V6]:PORT) appended
 * to s[*n], at most max in all: -EINVAL a bad or empty element, -E2BIG
 * more than max. */
int nbdc_servers_parse(const char *list, unsigned default_port, struct nbdc_server *s,
		       unsigned max, unsigned *n);
const char *nbdc_transport_name(enum nbdc_transport t);
/* The address as a URI, for messages: smcr://HOST:PORT/EXPORT,
 * nbds://..., nbd+unix:///EXPORT?socket=PATH. */
void nbdc_uri_format(enum nbdc_transport t, bool tls, const char *host, const char *port,
		     const char *export, char *buf, size_t len);
/* The one-line message for nbdc_uri_parse's error r on uri, e.g.
 * "smcr://h/e?x=1: unknown query key 'x' (known: ...)". */
void nbdc_uri_strerror(const char *uri, const struct nbdc_uri *u, int r, char *buf,
		       size_t len);

#endif
