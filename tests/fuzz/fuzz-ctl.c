/* SPDX-License-Identifier: BSD-3-Clause */
/* smcrbd: libFuzzer target for the control socket (smcr/ctl.c) as a local
 * client reaches it: each input is sent to a real control socket of a
 * real SMC-R context (no RDMA device needed) whose program has a section
 * with commands, as smcrd and the clients have; the answer is read to its
 * end.  The context, its control thread and a scratch SMCR_CTL_DIR live
 * for the whole run (removed at exit; fuzz-replay.sh puts it in its own
 * scratch directory, which goes even after a crash). */
#include <config.h>

#include <dirent.h>
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "fuzz.h"
#include "monotime.h"
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

/* How long each of our threads has waited for a CPU (ns, from
 * /proc/self/task/TID/schedstat), up to 16 of them. */
struct delays {
	int n;
	long tid[16];
	unsigned long long ns[16];
};

static void delays_read(struct delays *d)
{
	DIR *dir = opendir("/proc/self/task");
	struct dirent *e;

	d->n = 0;
	while (dir && (e = readdir(dir)) && d->n < 16) {
		char path[64];
		unsigned long long run, wait;
		FILE *f;

		if (e->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "/proc/self/task/%s/schedstat", e->d_name);
		f = fopen(path, "r");
		if (!f)
			continue;
		if (fscanf(f, "%llu %llu", &run, &wait) == 2) {
			d->tid[d->n] = atol(e->d_name);
			d->ns[d->n++] = wait;
		}
		fclose(f);
	}
	if (dir)
		closedir(dir);
}

/* The longest any thread of ours waited for a CPU since *then (ms). */
static int64_t starved_ms(const struct delays *then)
{
	unsigned long long most = 0;
	struct delays now;
	int i, j;

	delays_read(&now);
	for (i = 0; i < now.n; i++)
		for (j = 0; j < then->n; j++)
			if (now.tid[i] == then->tid[j] && now.ns[i] - then->ns[j] > most)
				most = now.ns[i] - then->ns[j];
	return (int64_t)(most / 1000000);
}

/* Waits for fd to be readable: a control socket answers within its own
 * deadline (2 s for the line, 8 s more for the answer), so 15 s is a
 * hang; but time any of our threads spent waiting for a CPU does not
 * count (a niced fuzzer beside busy VMs on 2 cores), up to 10 minutes in
 * all.  A wait over 15 s is written to stderr either way. */
static bool answered(int fd)
{
	struct pollfd p = { .fd = fd, .events = POLLIN };
	int64_t t0 = now_ms(), waited;
	struct delays d;

	/* The CPU waits are read only when the answer is slow (they cost a
	 * directory and a file per thread): from the first second on. */
	if (poll(&p, 1, 1000) == 1)
		return true;
	delays_read(&d);
	for (;;) {
		if (poll(&p, 1, 1000) == 1) {
			waited = now_ms() - t0;
			if (waited > 15000)
				fprintf(stderr, "fuzz-ctl: answered after %lld ms, %lld ms of it "
					"waiting for a CPU\n", (long long)waited,
					(long long)starved_ms(&d));
			return true;
		}
		waited = now_ms() - t0;
		if (waited - starved_ms(&d) > 15000 || waited > 600000) {
			fprintf(stderr, "fuzz-ctl: no answer in %lld ms (%lld ms of it waiting "
				"for a CPU)\n", (long long)waited, (long long)starved_ms(&d));
			return false;
		}
	}
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
		ssize_t n;

		FUZZ_REQUIRE(answered(fd));
		n = recv(fd, buf, sizeof(buf), 0);
		if (n <= 0)
			break;
	}
	close(fd);
	return 0;
}
