/* SPDX-License-Identifier: BSD-3-Clause */
/* smcrbd tests: the memory NBD server of tests/unit/memserver.c as a
 * program, for shell tests that need an SMC-R (CLC) NBD server:
 *   nbd-memserver [--smcr] [-p PORT] [-s MIB] [-n NAME] [--no-multi-conn]
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
		{ NULL, 0, NULL, 0 },
	};
	struct memsrv_opts o = { .name = "disk" };
	struct memsrv *s;
	sigset_t set;
	int c, sig, r;

	while ((c = getopt_long(argc, argv, "p:s:n:", lo, NULL)) != -1) {
		switch (c) {
		case 'S': o.smcr = true; break;
		case 'p': o.port = (unsigned)atoi(optarg); break;
		case 's': o.size = (uint64_t)atoll(optarg) << 20; break;
		case 'n': o.name = optarg; break;
		case 'M': o.no_multi_conn = true; break;
		default:
			fprintf(stderr, "usage: nbd-memserver [--smcr] [-p PORT] [-s MIB] [-n NAME] [--no-multi-conn]\n");
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
	printf("port %u\n", memsrv_port(s));
	fflush(stdout);
	sigwait(&set, &sig);
	memsrv_stop(s);
	return 0;
}
