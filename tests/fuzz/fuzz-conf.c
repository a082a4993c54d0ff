/* SPDX-License-Identifier: BSD-3-Clause */
/* smcrbd: libFuzzer target for smcrd's configuration: the config file
 * (config_load_file, through a memfd), and its first line as an --export
 * argument, an allow= prefix matched against addresses, a size, a number
 * and a boolean. */
#include <config.h>

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "fuzz.h"
#include "smcrd-conf.h"

static void check_spec(const struct export_spec *e)
{
	unsigned i;

	FUZZ_REQUIRE(e->name && e->path);
	for (i = 0; i < e->nallow; i++)
		FUZZ_REQUIRE(e->allow[i].family == AF_UNSPEC ||	/* "*" */
			     (e->allow[i].family == AF_INET && e->allow[i].prefix <= 32) ||
			     (e->allow[i].family == AF_INET6 && e->allow[i].prefix <= 128));
}

static void one_line(const char *s)
{
	struct sockaddr_in6 a6 = { .sin6_family = AF_INET6 };
	struct sockaddr_in a4 = { .sin_family = AF_INET };
	struct export_spec spec;
	struct acl_entry acl;
	char err[256];
	uint64_t sz;
	unsigned u;
	bool b;

	memset(&spec, 0, sizeof(spec));
	if (config_parse_export_arg(s, &spec, err, sizeof(err)) == 0)
		check_spec(&spec);
	export_spec_free(&spec);
	if (acl_parse(s, &acl) == 0) {
		inet_pton(AF_INET, "10.1.2.3", &a4.sin_addr);
		inet_pton(AF_INET6, "fd00::1", &a6.sin6_addr);
		(void)acl_match(&acl, 1, (struct sockaddr *)&a4);
		(void)acl_match(&acl, 1, (struct sockaddr *)&a6);
	}
	(void)parse_size(s, &sz);
	(void)parse_uint(s, 1, 1024, &u);
	(void)parse_bool(s, &b);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static char path[64];
	static int fd = -1;
	struct smcrd_config cfg;
	struct export_list list = { 0 };
	char err[256], *line, *nl;
	unsigned i;
	int r;

	if (fd < 0) {
		fuzz_quiet_log();
		fd = memfd_create("fuzz-conf", MFD_CLOEXEC);
		FUZZ_REQUIRE(fd >= 0);
		snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	}
	FUZZ_REQUIRE(ftruncate(fd, 0) == 0);
	FUZZ_REQUIRE(pwrite(fd, data, size, 0) == (ssize_t)size);
	config_defaults(&cfg);
	err[0] = '\0';
	r = config_load_file(path, &cfg, size & 1, &list, err, sizeof(err));
	FUZZ_REQUIRE(r <= 0 && memchr(err, '\0', sizeof(err)));
	if (r == 0)
		for (i = 0; i < list.n; i++)
			check_spec(&list.v[i]);
	export_list_free(&list);
	config_free(&cfg);

	line = malloc(size + 1);
	if (!line)
		return 0;
	memcpy(line, data, size);
	line[size] = '\0';
	if ((nl = strchr(line, '\n')))
		*nl = '\0';
	one_line(line);
	free(line);
	return 0;
}
