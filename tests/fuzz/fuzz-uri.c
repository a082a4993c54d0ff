/* SPDX-License-Identifier: BSD-3-Clause */
/* smcrbd: libFuzzer target for the export URIs and HOST[:PORT] arguments
 * of the clients (nbdc_uri_parse, nbdc_hostport_parse: smcr-fuse's URI,
 * the nbdkit plugin's uri= and server=), nbds:// and query strings too. */
#include <config.h>

#include <string.h>

#include "fuzz.h"
#include "nbdc-uri.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char host[16], port[6];
	struct nbdc_uri u;
	char *s = malloc(size + 1);
	int r;

	if (!s)
		return 0;
	memcpy(s, data, size);
	s[size] = '\0';
	memset(&u, 0xa5, sizeof(u));
	r = nbdc_uri_parse(s, &u);
	FUZZ_REQUIRE(r <= 0);
	if (r == 0) {
		FUZZ_REQUIRE(u.transport == NBDC_SMCR || u.transport == NBDC_TCP);
		FUZZ_REQUIRE(memchr(u.host, '\0', sizeof(u.host)));
		FUZZ_REQUIRE(memchr(u.port, '\0', sizeof(u.port)));
		FUZZ_REQUIRE(memchr(u.export, '\0', sizeof(u.export)));
		FUZZ_REQUIRE(u.host[0] && u.port[0]);
		/* nbds:// and its query string */
		FUZZ_REQUIRE(u.tls == 0 || u.tls == 1);
		FUZZ_REQUIRE(!u.tls || u.transport == NBDC_TCP);
		FUZZ_REQUIRE(memchr(u.tls_certificates, '\0', sizeof(u.tls_certificates)));
		FUZZ_REQUIRE(memchr(u.tls_psk_file, '\0', sizeof(u.tls_psk_file)));
		FUZZ_REQUIRE(memchr(u.tls_username, '\0', sizeof(u.tls_username)));
		FUZZ_REQUIRE(memchr(u.tls_hostname, '\0', sizeof(u.tls_hostname)));
		FUZZ_REQUIRE(u.tls_verify_peer >= -1 && u.tls_verify_peer <= 1);
	}
	/* Buffers just big enough for some inputs and too small for others. */
	memset(host, 0xa5, sizeof(host));
	memset(port, 0xa5, sizeof(port));
	r = nbdc_hostport_parse(s, 10809, host, sizeof(host), port, sizeof(port));
	FUZZ_REQUIRE(r <= 0);
	if (r == 0) {
		FUZZ_REQUIRE(memchr(host, '\0', sizeof(host)));
		FUZZ_REQUIRE(memchr(port, '\0', sizeof(port)));
	}
	free(s);
	return 0;
}
