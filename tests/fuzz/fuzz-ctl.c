/* SPDX-License-Identifier: BSD-3-Clause */
/* smcrbd: libFuzzer target for the control socket (smcr/ctl.c) as a local
 * client reaches it: each input is sent to a real control socket of a
 * real SMC-R context (no RDMA device needed) whose program has a section
 * with commands, as smcrd and the clients have; the answer is read to its
 * end.  The context, its control thread and a scratch SMCR_CTL_DIR live
 * for the whole run (removed at exit; fuzz-replay.sh puts it in its own
 * scratch directory, which goes even after a crash). */
#include <config.h>

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "fuzz.h"
#include "smcr.h"

static char dir[80];
static struct smcr_ctx *ctx;
static struct smcr_ctl *ctl;
static struct sockaddr_un sa = { .sun_family = AF_UNIX };

static int sec_dump(void *arg, char *buf, size_t len, bool json)
{
	(void)arg;
	return snprintf(buf, len, json ? "{\"ok\":true}" : "ok\n");
}

/* Answers "fz ..." with the rest of the line, at whatever length. */
static int sec_command(void *arg, const char *line, char *buf, size_t len)
{
	(void)arg;
	if (strncmp(line, "fz", 2))
		return -ENOSYS;
	if (!strcmp(line, "fz fail"))
		return -EIO;
	return snprintf(buf, len, "%s\n", line + 2);
}

static void cleanup(void)
{
	smcr_ctl_close(ctl);
	smcr_ctx_destroy(ctx);
	rmdir(dir);
}

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	static const struct smcr_ctl_section sec = {
		.name = "fz", .dump = sec_dump, .command = sec_command,
	};

	(void)argc;
	(void)argv;
	fuzz_quiet_log();
	/* TMPDIR (fuzz-replay.sh's, removed whatever happens) if the socket
	 * path fits in a sockaddr_un there, else /tmp. */
	if (!getenv("TMPDIR") ||
	    snprintf(dir, sizeof(dir), "%s/smcrbd-fuzz-ctl.XXXXXX", getenv("TMPDIR")) >=
	    (int)sizeof(dir) - 24)
		snprintf(dir, sizeof(dir), "/tmp/smcrbd-fuzz-ctl.XXXXXX");
	FUZZ_REQUIRE(mkdtemp(dir));
	setenv("SMCR_CTL_DIR", dir, 1);
	setenv("SMCR_SYN_OPTION", "off", 1);
	unsetenv("SMCR_CTL");
	unsetenv("SMCR_FAULT");
	FUZZ_REQUIRE(smcr_ctx_create(NULL, &ctx) == 0);
	FUZZ_REQUIRE(smcr_ctl_open(ctx, "fuzz", &ctl) == 0 && ctl);
	FUZZ_REQUIRE(smcr_ctl_add_section(ctl, &sec) == 0);
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", smcr_ctl_path(ctl));
	atexit(cleanup);
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char buf[65536];
	size_t off = 0;
	int fd;

	if (size > 1024)
		return 0;
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	FUZZ_REQUIRE(fd >= 0);
	FUZZ_REQUIRE(connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0);
	while (off < size) {
		ssize_t n = send(fd, data + off, size - off, MSG_NOSIGNAL);

		if (n <= 0)
			break;
		off += (size_t)n;
	}
	/* The end of the line is the end of the stream, if no newline came. */
	shutdown(fd, SHUT_WR);
	for (;;) {
		struct pollfd p = { .fd = fd, .events = POLLIN };
		ssize_t n;

		/* A control socket answers within its own deadline (2 s for
		 * the line, 8 s more for the answer): longer is a hang. */
		FUZZ_REQUIRE(poll(&p, 1, 15000) == 1);
		n = recv(fd, buf, sizeof(buf), 0);
		if (n <= 0)
			break;
	}
	close(fd);
	return 0;
}
