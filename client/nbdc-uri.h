/* SPDX-License-Identifier: BSD-3-Clause */
/* smcrbd: the clients' export addresses (smcr:// and nbd:// URIs). */
#ifndef SMCRBD_NBDC_URI_H
#define SMCRBD_NBDC_URI_H

#include <stddef.h>

#include "nbd-proto.h"

/* Default SMC-R port of smcrd (its TCP NBD port is NBD_DEFAULT_PORT). */
#define NBDC_SMCR_PORT		10810

enum nbdc_transport {
	NBDC_SMCR = 0,		/* SMC-R, TCP fallback by CLC Decline */
	NBDC_TCP,		/* plain NBD over TCP */
};

/* smcr://host[:port]/export and nbd://host[:port]/export (IPv6 hosts in
 * brackets; an empty export name is allowed).  The port defaults to
 * NBDC_SMCR_PORT or NBD_DEFAULT_PORT. */
struct nbdc_uri {
	enum nbdc_transport transport;
	char host[256];
	char port[16];
	char export[NBD_MAX_STRING + 1];
};
int nbdc_uri_parse(const char *uri, struct nbdc_uri *u);
/* HOST, HOST:PORT, [V6]:PORT into host and port (default_port if none). */
int nbdc_hostport_parse(const char *s, unsigned default_port, char *host,
			size_t hostlen, char *port, size_t portlen);
const char *nbdc_transport_name(enum nbdc_transport t);

#endif
