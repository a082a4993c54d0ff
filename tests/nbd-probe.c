/* SPDX-License-Identifier: BSD-3-Clause */
/* smcrbd: a small NBD client for the shell tests, on blockdev's client half
 * and nbd-probe-lib.
 * It prints the exact option replies and error values a server sends.
 *
 *   nbd-probe [-s] HOST PORT list
 *   nbd-probe [-s] HOST PORT info NAME
 *   nbd-probe [-s] HOST PORT export-name NAME
 *   nbd-probe [-s] HOST PORT ops NAME OP...
 *
 * -s negotiates structured replies.  OPs run one after the other on one
 * connection; each prints "OP RESULT" with RESULT "ok" or an errno name:
 *   r:OFF:LEN  read       w:OFF:LEN  write a pattern   z:OFF:LEN  write zeroes
 *   t:OFF:LEN  trim       f          flush             c:OFF:LEN  cache
 *   W:OFF:LEN  write with FUA        x          send 64 bytes of garbage
 * Exit status: 0 done, 1 an option was refused (its reply type printed),
 * 2 connection or usage trouble. */
#include <config.h>

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nbd-client.h"
#include "nbd-probe-lib.h"
#include "transport.h"

static const char *ename(int r)
{
	static char buf[16];

	switch (-r) {
	case 0: return "ok";
	case EPERM: return "EPERM";
	case EIO: return "EIO";
	case ENOMEM: return "ENOMEM";
	case EINVAL: return "EINVAL";
	case ENOSPC: return "ENOSPC";
	case EOVERFLOW: return "EOVERFLOW";
	case ENOTSUP: return "ENOTSUP";
	case ESHUTDOWN: return "ESHUTDOWN";
	case EPIPE: return "EPIPE";
	case ECONNRESET: return "ECONNRESET";
	default:
		snprintf(buf, sizeof(buf), "E%d", -r);
		return buf;
	}
}

static int print_export(void *arg, const char *name, const char *desc)
{
	printf("%s\n", name);
	return 0;
}

static int refused(struct nbd_client *c, int r)
{
	const char *msg;
	uint32_t rep = nbd_client_last_reply(c, &msg);

	if (r == -ENOENT || r == -EACCES || r == -ENOTSUP || r == -EINVAL ||
	    r == -ESHUTDOWN || r == -EPERM || r == -EIO) {
		printf("NBD_REP_%s: %s\n", nbd_rep_name(rep), msg);
		return 1;
	}
	printf("failed: %s\n", ename(r));
	return 2;
}

static int run_op(struct nbdp *p, const char *op)
{
	unsigned long long off = 0, len = 0;
	char kind = op[0];
	uint8_t *buf = NULL;
	int r;

	if (strchr("rwWztc", kind) && sscanf(op + 1, ":%llu:%llu", &off, &len) != 2) {
		fprintf(stderr, "nbd-probe: bad op '%s'\n", op);
		return -EINVAL;
	}
	if (len > (64u << 20))
		return -E2BIG;
	if (kind == 'r' || kind == 'w' || kind == 'W') {
		unsigned long long i;

		buf = malloc(len ? len : 1);
		if (!buf)
			return -ENOMEM;
		for (i = 0; i < len; i++)
			buf[i] = (uint8_t)(off + i);
	}
	switch (kind) {
	case 'r': r = nbdp_pread(p, buf, (uint32_t)len, off, 0); break;
	case 'w': r = nbdp_pwrite(p, buf, (uint32_t)len, off, 0); break;
	case 'W': r = nbdp_pwrite(p, buf, (uint32_t)len, off, NBD_CMD_FLAG_FUA); break;
	case 'z': r = nbdp_cmd(p, NBD_CMD_WRITE_ZEROES, 0, off, (uint32_t)len, NULL); break;
	case 't': r = nbdp_cmd(p, NBD_CMD_TRIM, 0, off, (uint32_t)len, NULL); break;
	case 'c': r = nbdp_cmd(p, NBD_CMD_CACHE, 0, off, (uint32_t)len, NULL); break;
	case 'f': r = nbdp_cmd(p, NBD_CMD_FLUSH, 0, 0, 0, NULL); break;
	case 'x': {
		char junk[64];

		memset(junk, 'Z', sizeof(junk));
		r = bd_write_full(nbdp_transport(p), junk, sizeof(junk), 10000, -1);
		if (r == 0) {
			/* The server should hang up now. */
			r = bd_read_full(nbdp_transport(p), junk, 1, 10000, -1);
			if (r == 0)
				r = -EPROTO;
			else if (r == -ECONNRESET)
				r = 0;
		}
		break;
	}
	default:
		fprintf(stderr, "nbd-probe: bad op '%s'\n", op);
		free(buf);
		return -EINVAL;
	}
	printf("%s %s\n", op, ename(r));
	free(buf);
	return r;
}

int main(int argc, char **argv)
{
	struct bd_transport *t;
	struct nbd_client *c;
	struct nbdp *p = NULL;
	struct nbd_export_info info;
	bool structured = false;
	const char *cmd;
	int r, i, status = 0;

	if (argc > 1 && !strcmp(argv[1], "-s")) {
		structured = true;
		argv++;
		argc--;
	}
	if (argc < 4) {
		fprintf(stderr, "usage: nbd-probe [-s] HOST PORT list|info NAME|export-name NAME|"
				"ops NAME OP...\n");
		return 2;
	}
	cmd = argv[3];
	r = bd_tcp_connect(argv[1], argv[2], 10000, &t);
	if (r < 0) {
		printf("connect: %s\n", strerror(-r));
		return 2;
	}
	r = nbd_client_open(t, 30000, &c);
	if (r < 0) {
		printf("handshake: %s\n", strerror(-r));
		return 2;
	}
	if (structured) {
		r = nbd_client_structured(c);
		if (r < 0) {
			status = refused(c, r);
			goto out_close;
		}
	}
	if (!strcmp(cmd, "list")) {
		r = nbd_client_list(c, print_export, NULL);
		if (r < 0)
			status = refused(c, r);
		else
			nbd_client_abort(c);
	} else if ((!strcmp(cmd, "info") || !strcmp(cmd, "export-name")) && argc == 5) {
		if (!strcmp(cmd, "info"))
			r = nbd_client_info(c, argv[4], &info);
		else
			r = nbd_client_export_name(c, argv[4], &info);
		if (r < 0) {
			if (cmd[0] == 'e') {
				printf("hangup\n");
				status = 1;
			} else {
				status = refused(c, r);
			}
			goto out_close;
		}
		printf("size=%" PRIu64 " flags=0x%x min=%u pref=%u max=%u\n", info.size,
		       info.flags, info.min_block, info.pref_block, info.max_payload);
		if (cmd[0] == 'i') {
			nbd_client_abort(c);
		} else {
			r = nbdp_start(c, 30000, NULL, &p);
			c = NULL;
			if (r < 0)
				return 2;
			nbdp_disconnect(p);
		}
	} else if (!strcmp(cmd, "ops") && argc >= 5) {
		r = nbd_client_go(c, argv[4], &info);
		if (r < 0) {
			status = refused(c, r);
			goto out_close;
		}
		r = nbdp_start(c, 30000, NULL, &p);
		c = NULL;
		if (r < 0)
			return 2;
		for (i = 5; i < argc; i++) {
			r = run_op(p, argv[i]);
			if (r == -EPIPE || r == -ECONNRESET || r == -ETIMEDOUT || r == -EPROTO) {
				status = 2;
				goto out_close;
			}
		}
		nbdp_disconnect(p);
	} else {
		fprintf(stderr, "nbd-probe: bad command\n");
		status = 2;
	}
out_close:
	nbd_client_close(c);
	nbdp_close(p);
	return status;
}
