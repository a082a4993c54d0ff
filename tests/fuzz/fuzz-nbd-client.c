/* SPDX-License-Identifier: BSD-3-Clause */
/* smcrbd: libFuzzer target for NBD as a client sees a server (blockdev/
 * nbd-client.c, whose handshake the nbdkit plugin and smcr-fuse use): the
 * input is the server's byte stream.  The client reads the greeting,
 * negotiates structured replies, lists exports, asks for INFO and GO (or
 * EXPORT_NAME), then pipelines READ, WRITE, FLUSH and TRIM on the tests'
 * probe library (tests/nbd-probe-lib.c) and collects their replies,
 * whatever the server sends (client/nbd-conn-rx.c's reply reader has
 * fuzz-nbd-conn).  The first input byte picks the path and how many bytes
 * each read returns. */
#include <config.h>

#include <errno.h>
#include <string.h>

#include "fuzz.h"
#include "fuzz-transport.h"
#include "nbd-client.h"
#include "nbd-probe-lib.h"

static int list_cb(void *arg, const char *name, const char *desc)
{
	unsigned *n = arg;

	FUZZ_REQUIRE(name && strlen(name) <= NBD_MAX_STRING);
	FUZZ_REQUIRE(!desc || strlen(desc) <= NBD_MAX_STRING);
	return ++*n > 1000 ? -E2BIG : 0;
}

static uint8_t rbuf[2][8192], wbuf[4096];

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static int once;
	struct fuzz_transport *ft;
	struct nbd_export_info info;
	struct nbd_client *c;
	unsigned mode, n = 0, i;
	uint64_t cookie;
	int r, result;

	if (!once++)
		fuzz_quiet_log();
	if (size < 1)
		return 0;
	mode = data[0];
	/* The client owns (and closes) its transport: heap, freed here. */
	ft = malloc(sizeof(*ft));
	if (!ft)
		return 0;
	fuzz_transport_init(ft, data + 1, size - 1, mode & 0x0f);
	r = nbd_client_open(&ft->t, 0, &c);
	FUZZ_REQUIRE(r <= 0);
	if (r < 0) {
		FUZZ_REQUIRE(ft->closed);
		free(ft);
		return 0;
	}
	if (mode & 0x10)
		(void)nbd_client_structured(c);
	if (mode & 0x20)
		(void)nbd_client_list(c, list_cb, &n);
	if (mode & 0x40)
		(void)nbd_client_info(c, "disk", &info);
	if (mode & 0x80)
		r = nbd_client_export_name(c, "disk", &info);
	else
		r = nbd_client_go(c, "disk", &info);
	if (r == 0) {
		struct nbdp *p;

		/* The transmission phase on the tests' blocking calls. */
		r = nbdp_start(c, 0, NULL, &p);
		c = NULL;
		if (r < 0) {
			free(ft);
			return 0;
		}
		(void)nbdp_submit(p, NBD_CMD_READ, 0, 0, sizeof(rbuf[0]), rbuf[0], &cookie);
		(void)nbdp_submit(p, NBD_CMD_WRITE, 0, 4096, sizeof(wbuf), wbuf, &cookie);
		(void)nbdp_submit(p, NBD_CMD_READ, 0, 512, 1024, rbuf[1], &cookie);
		(void)nbdp_submit(p, NBD_CMD_FLUSH, 0, 0, 0, NULL, &cookie);
		(void)nbdp_submit(p, NBD_CMD_TRIM, 0, 0, 4096, NULL, &cookie);
		for (i = 0; i < 8 && nbdp_inflight(p); i++) {
			uint64_t off;

			if (nbdp_wait(p, &cookie, &result, &off) < 0)
				break;
			FUZZ_REQUIRE(result <= 0);
		}
		(void)nbdp_pread(p, rbuf[0], 100, 7, 0);
		nbdp_close(p);
	}
	nbd_client_close(c);
	FUZZ_REQUIRE(ft->closed);
	free(ft);
	return 0;
}
