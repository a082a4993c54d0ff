/* SPDX-License-Identifier: BSD-3-Clause */
/* smcrbd: loads synopt.bpf.c (embedded by bpftool gen skeleton) and
 * attaches it to the cgroup v2 this process runs in. */
#include <config.h>

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

#include "log.h"
#include "synopt.h"

#if __has_include(<valgrind/valgrind.h>)
#include <valgrind/valgrind.h>
#endif
#ifndef RUNNING_ON_VALGRIND
#define RUNNING_ON_VALGRIND 0
#endif

int smcr_syn_option_parse(const char *s, enum smcr_syn_option *mode)
{
	if (!s || !*s || !strcmp(s, "auto"))
		*mode = SMCR_SYN_OPTION_AUTO;
	else if (!strcmp(s, "bpf"))
		*mode = SMCR_SYN_OPTION_BPF;
	else if (!strcmp(s, "off"))
		*mode = SMCR_SYN_OPTION_OFF;
	else
		return -EINVAL;
	return 0;
}

const char *smcr_syn_option_str(enum smcr_syn_option mode)
{
	switch (mode) {
	case SMCR_SYN_OPTION_AUTO: return "auto";
	case SMCR_SYN_OPTION_BPF: return "bpf";
	case SMCR_SYN_OPTION_OFF: return "off";
	}
	return "?";
}

#ifdef HAVE_SYNOPT_BPF

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <linux/types.h>

#include "synopt_bpf.h"
#include "synopt.skel.h"

static struct {
	pthread_mutex_t lock;
	unsigned int refs;
	struct smcr_synopt_bpf *skel;
	struct bpf_link *link;
	int sock_map, port_map;
} g = { .lock = PTHREAD_MUTEX_INITIALIZER, .sock_map = -1, .port_map = -1 };

static int libbpf_log(enum libbpf_print_level level, const char *fmt, va_list ap)
{
	if (level != LIBBPF_DEBUG && smcr_log_get_level() >= SMCR_LOG_DEBUG)
		smcr_vlog(SMCR_LOG_DEBUG, fmt, ap);
	return 0;
}

/* Where cgroup v2 is mounted ("0::PATH" in /proc/self/cgroup is relative
 * to it): the directory of our own cgroup, opened. */
static int cgroup_open(char *why, size_t len)
{
	char line[1024], mnt[512] = "", path[1536];
	FILE *f;
	int fd;

	f = fopen("/proc/self/mountinfo", "re");
	if (!f)
		goto no_mount;
	while (fgets(line, sizeof(line), f)) {
		char *sep = strstr(line, " - cgroup2 ");
		char point[512];

		/* ID PARENT MAJ:MIN ROOT MOUNTPOINT ... - TYPE ... */
		if (sep && sscanf(line, "%*s %*s %*s %*s %511s", point) == 1) {
			snprintf(mnt, sizeof(mnt), "%s", point);
			break;
		}
	}
	fclose(f);
	if (!mnt[0])
		goto no_mount;
	f = fopen("/proc/self/cgroup", "re");
	if (!f)
		goto no_mount;
	path[0] = 0;
	while (fgets(line, sizeof(line), f)) {
		if (!strncmp(line, "0::", 3)) {
			line[strcspn(line, "\n")] = 0;
			snprintf(path, sizeof(path), "%s%s", mnt, line + 3);
			break;
		}
	}
	fclose(f);
	if (!path[0])
		goto no_mount;
	fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0) {
		int err = errno;

		snprintf(why, len, "cannot open cgroup %s: %s", path, strerror(err));
		return -err;
	}
	return fd;

no_mount:
	snprintf(why, len, "no cgroup v2 mounted");
	return -ENOENT;
}

static int load(char *why, size_t len)
{
	libbpf_print_fn_t old = libbpf_set_print(libbpf_log);
	int cg, ret;

	if (RUNNING_ON_VALGRIND) {
		/* It does not know most bpf commands, nor libbpf's attrs. */
		snprintf(why, len, "running under valgrind");
		ret = -EOPNOTSUPP;
		goto out_print;
	}
	cg = cgroup_open(why, len);
	if (cg < 0) {
		ret = cg;
		goto out_print;
	}
	g.skel = smcr_synopt_bpf__open_and_load();
	if (!g.skel) {
		ret = -errno;
		snprintf(why, len, "cannot load the BPF program: %s", strerror(-ret));
		goto out_close_cg;
	}
	g.link = bpf_program__attach_cgroup(g.skel->progs.smcr_synopt, cg);
	if (!g.link) {
		ret = -errno;
		snprintf(why, len, "cannot attach the BPF program to the cgroup: %s",
			 strerror(-ret));
		goto out_destroy;
	}
	g.sock_map = bpf_map__fd(g.skel->maps.sock_map);
	g.port_map = bpf_map__fd(g.skel->maps.port_map);
	close(cg);
	libbpf_set_print(old);
	return 0;

out_destroy:
	smcr_synopt_bpf__destroy(g.skel);
	g.skel = NULL;
out_close_cg:
	close(cg);
out_print:
	libbpf_set_print(old);
	return ret < 0 ? ret : -EIO;
}

int smcr_synopt_get(char *why, size_t len)
{
	int ret = 0;

	pthread_mutex_lock(&g.lock);
	if (!g.refs)
		ret = load(why, len);
	if (!ret)
		g.refs++;
	pthread_mutex_unlock(&g.lock);
	return ret;
}

void smcr_synopt_put(void)
{
	pthread_mutex_lock(&g.lock);
	if (g.refs && !--g.refs) {
		bpf_link__destroy(g.link);
		g.link = NULL;
		smcr_synopt_bpf__destroy(g.skel);
		g.skel = NULL;
		g.sock_map = g.port_map = -1;
	}
	pthread_mutex_unlock(&g.lock);
}

int smcr_synopt_mark(int fd)
{
	struct smcr_synopt_sk v = { .mark = 1 };

	return bpf_map_update_elem(g.sock_map, &fd, &v, BPF_ANY) ? -errno : 0;
}

int smcr_synopt_listen(int fd, uint16_t port)
{
	__u32 key = port, one = 1;
	int ret;

	/* A retransmitted SYN-ACK and the established callback read the
	 * client's SYN from the saved copy. */
	if (setsockopt(fd, IPPROTO_TCP, TCP_SAVE_SYN, &one, sizeof(one)))
		return -errno;
	ret = smcr_synopt_mark(fd);
	if (ret)
		return ret;
	return bpf_map_update_elem(g.port_map, &key, &one, BPF_ANY) ? -errno : 0;
}

void smcr_synopt_unlisten(uint16_t port)
{
	__u32 key = port;

	bpf_map_delete_elem(g.port_map, &key);
}

int smcr_synopt_peer(int fd)
{
	struct smcr_synopt_sk v;

	if (bpf_map_lookup_elem(g.sock_map, &fd, &v) || !v.mark)
		return -ENOENT;
	return v.peer == SMCR_SYNOPT_PEER_SMC;
}

#else /* !HAVE_SYNOPT_BPF */

int smcr_synopt_get(char *why, size_t len)
{
	snprintf(why, len, "built without BPF (configure --disable-syn-bpf)");
	return -EOPNOTSUPP;
}

void smcr_synopt_put(void)
{
}

int smcr_synopt_mark(int fd)
{
	return -EOPNOTSUPP;
}

int smcr_synopt_listen(int fd, uint16_t port)
{
	return -EOPNOTSUPP;
}

void smcr_synopt_unlisten(uint16_t port)
{
}

int smcr_synopt_peer(int fd)
{
	return -ENOENT;
}

#endif
