/* SPDX-License-Identifier: BSD-3-Clause */
/* smcrbd tests: the memory NBD server of tests/unit/memserver.c as a
 * program, for shell tests that need an SMC-R (CLC) NBD server:
 *   nbd-memserver [--smcr] [-p PORT] [-s MIB] [-n NAME] [--no-multi-conn]
 *                 [--read-shape SHAPE]
 * SHAPE: how structured READ replies go out (memserver.h): one, reverse,
 * holes, or a hostile server's overlap, hole-twice, gap.
 * Prints "port N" when it listens; exits on SIGTERM or SIGINT. */
#include <config.h>

#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "memserver.h"

int main(int argc, char **argv)
{
	static const struct option lo[] = {
		{ "smcr", no_argument, NULL, 'S' },
		{ "port", required_argument, NULL, 'p' },
		{ "size", required_argument, NULL, 's' },
		{ "name", required_argument, NULL, 'n' },
		{ "no-multi-conn", no_argument, NULL, 'M' },
		{ "read-shape", required_argument, NULL, 'R' },
		{ NULL, 0, NULL, 0 },
	};
	struct memsrv_opts o = { .name = "disk" };
	struct memsrv *s;
	sigset_t set;
	int c, sig, r, shape = MEMSRV_READ_ONE;

	while ((c = getopt_long(argc, argv, "p:s:n:", lo, NULL)) != -1) {
		switch (c) {
		case 'S': o.smcr = true; break;
		case 'p': o.port = (unsigned)atoi(optarg); break;
		case 's': o.size = (uint64_t)atoll(optarg) << 20; break;
		case 'n': o.name = optarg; break;
		case 'M': o.no_multi_conn = true; break;
		case 'R':
			shape = memsrv_read_shape_parse(optarg);
			if (shape < 0) {
				fprintf(stderr, "nbd-memserver: unknown read shape '%s'\n", optarg);
				return 2;
			}
			break;
		default:
			fprintf(stderr, "usage: nbd-memserver [--smcr] [-p PORT] [-s MIB] [-n NAME] [--no-multi-conn] [--read-shape SHAPE]\n");
			return 2;
		}
	}
	sigemptyset(&set);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGINT);
	pthread_sigmask(SIG_BLOCK, &set, NULL);
	r = memsrv_start(&o, &s);
	if (r < 0) {
		fprintf(stderr, "nbd-memserver: %s\n", strerror(-r));
		return 1;
	}
	memsrv_read_shape(s, (enum memsrv_read_shape)shape);
	printf("port %u\n", memsrv_port(s));
	fflush(stdout);
	sigwait(&set, &sig);
	memsrv_stop(s);
	return 0;
}
