/* SPDX-License-Identifier: BSD-3-Clause */
/* smcrbd: unit tests of the client library (client/nbd-conn.c) against
 * an NBD server in memory (memserver.c): URIs, I/O with data checks,
 * multi-conn, callbacks, reconnect and resend after the server goes
 * away, the timeout, a bounded connect, ESHUTDOWN, dead connections, SMC-R (TCP fallback
 * here) and the control socket. */
#include <config.h>

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/un.h>

#include "applog.h"
#include "json.h"
#include "jsonw.h"
#include "log.h"
#include "strbuf.h"
#include "memserver.h"
#include "monotime.h"
#include "nbd-conn.h"
#include "nbd-conn-int.h"
#include "nbdc-settings.h"
#include "smcr.h"
#include "unit.h"

static void fill(uint8_t *p, size_t len, uint64_t seed)
{
	uint64_t x = seed * 0x9e3779b97f4a7c15ull + 1;
	size_t i;

	for (i = 0; i < len; i++) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		p[i] = (uint8_t)x;
	}
}

static struct memsrv *server(bool smcr, bool multi)
{
	struct memsrv_opts o = { .smcr = smcr, .no_multi_conn = !multi, .name = "disk" };
	struct memsrv *s = NULL;

	CU_ASSERT_EQUAL_FATAL(memsrv_start(&o, &s), 0);
	return s;
}

static struct nbdc *client(struct memsrv *s, bool smcr, unsigned conns, unsigned timeout_ms,
			   unsigned io_timeout_ms)
{
	char port[16];
	struct nbdc_opts o = {
		.host = "127.0.0.1", .port = port, .export = "disk",
		.transport = smcr ? NBDC_SMCR : NBDC_TCP, .connections = conns,
		.timeout_ms = timeout_ms, .io_timeout_ms = io_timeout_ms,
		.backoff_min_ms = 20, .backoff_max_ms = 200,
	};
	struct nbdc *e = NULL;

	snprintf(port, sizeof(port), "%u", memsrv_port(s));
	CU_ASSERT_EQUAL_FATAL(nbdc_open(&o, &e), 0);
	return e;
}

/* --- the clients' settings table ------------------------------------------ */

static void test_settings(void)
{
	char *argv[] = { "prog", "-C3", "-t", "-r", "--timeout=2.5", "-o", "ro", "URI",
			 "--io-timeout", "0", "--tls-psk=/k", "-D", "7", "MNT", "--", "-C",
			 "9", NULL };
	int argc = (int)(sizeof(argv) / sizeof(argv[0])) - 1;
	struct nbdc_opts o = { 0 };
	struct nbdc_settings v;
	char err[256];
	unsigned i;

	/* One row per setting, each with a name, help and a known type. */
	for (i = 0; i < NBDC_NSETTINGS; i++) {
		CU_ASSERT_PTR_NOT_NULL(nbdc_settings[i].name);
		CU_ASSERT_PTR_NOT_NULL(nbdc_settings[i].help);
		CU_ASSERT_EQUAL(nbdc_setting_find(nbdc_settings[i].name, NBDC_IN_FUSE) ==
				(int)i, (nbdc_settings[i].in & NBDC_IN_FUSE) != 0);
	}
	CU_ASSERT_EQUAL(nbdc_setting_short('t', NBDC_IN_FUSE), NBDC_S_TCP);
	CU_ASSERT_EQUAL(nbdc_setting_short('t', NBDC_IN_ATTACH), NBDC_S_TCP);
	CU_ASSERT_EQUAL(nbdc_setting_find("tcp", NBDC_IN_PLUGIN), -1);
	CU_ASSERT_EQUAL(nbdc_setting_find("dead-timeout", NBDC_IN_PLUGIN), NBDC_S_TIMEOUT);
	CU_ASSERT_EQUAL(nbdc_setting_find("tls-verify", NBDC_IN_PLUGIN), NBDC_S_TLS_VERIFY_PEER);
	CU_ASSERT_EQUAL_FATAL(nbdc_settings_init(&v), 0);
	CU_ASSERT_STRING_EQUAL(v.val[NBDC_S_CONNECTIONS], "4");
	CU_ASSERT_EQUAL(nbdc_setting_set(&v, NBDC_S_CONNECTIONS, "17", err, sizeof(err)), -EINVAL);
	CU_ASSERT_STRING_EQUAL(err, "connections: 1 to 16, not '17'");
	CU_ASSERT_EQUAL(nbdc_setting_set(&v, NBDC_S_TIMEOUT, "x", err, sizeof(err)), -EINVAL);
	CU_ASSERT_EQUAL(nbdc_setting_set(&v, NBDC_S_TLS, "maybe", err, sizeof(err)), -EINVAL);
	CU_ASSERT_EQUAL(nbdc_setting_set(&v, NBDC_S_TCP, "no", err, sizeof(err)), -EINVAL);
	CU_ASSERT_EQUAL(nbdc_setting_set(&v, NBDC_S_CTL, NULL, err, sizeof(err)), -EINVAL);
	/* argv: ours out (the old -t S of smcr-fuse too), the rest in order,
	 * nothing after "--". */
	CU_ASSERT_EQUAL(nbdc_settings_argv(&v, NBDC_IN_FUSE, &argc, argv, err, sizeof(err), NULL),
			0);
	CU_ASSERT_EQUAL(argc, 8);
	CU_ASSERT_STRING_EQUAL(argv[1], "-o");
	CU_ASSERT_STRING_EQUAL(argv[2], "ro");
	CU_ASSERT_STRING_EQUAL(argv[3], "URI");
	CU_ASSERT_STRING_EQUAL(argv[4], "MNT");
	CU_ASSERT_STRING_EQUAL(argv[5], "--");
	CU_ASSERT_STRING_EQUAL(argv[6], "-C");
	CU_ASSERT_PTR_NULL(argv[8]);
	CU_ASSERT_EQUAL(nbdc_settings_uint(&v, NBDC_S_CONNECTIONS), 3);
	CU_ASSERT_STRING_EQUAL(v.val[NBDC_S_TRANSPORT], "tcp");
	CU_ASSERT_EQUAL(nbdc_settings_ms(&v, NBDC_S_TIMEOUT), 7000);
	CU_ASSERT_TRUE(v.given[NBDC_S_TLS_PSK_FILE]);
	o.ctl_name = "prog";
	nbdc_settings_apply(&v, &o);
	CU_ASSERT_EQUAL(o.connections, 3);
	CU_ASSERT_EQUAL(o.timeout_ms, 7000);
	CU_ASSERT_EQUAL(o.io_timeout_ms, UINT32_MAX);
	CU_ASSERT_EQUAL(o.transport, NBDC_TCP);
	CU_ASSERT_TRUE(o.read_only);
	CU_ASSERT_EQUAL(o.tls, NBDC_TLS_ALLOW);
	CU_ASSERT_STRING_EQUAL(o.tls_psk_file, "/k");
	CU_ASSERT_STRING_EQUAL(o.ctl_name, "prog");
	nbdc_settings_free(&v);
	{
		char *a2[] = { "prog", "-t", "5", "-C", "0", NULL };
		int n = 5;

		CU_ASSERT_EQUAL_FATAL(nbdc_settings_init(&v), 0);
		CU_ASSERT_EQUAL(nbdc_settings_argv(&v, NBDC_IN_FUSE, &n, a2, err, sizeof(err),
						   NULL), -EINVAL);
		CU_ASSERT_EQUAL(nbdc_settings_ms(&v, NBDC_S_TIMEOUT), 5000);
		CU_ASSERT_STRING_EQUAL(err, "connections: 1 to 16, not '0'");
		nbdc_settings_free(&v);
	}
	/* rmbe-size: 4M by default, K/M/G, 0 or 16K..512M; its default gives
	 * way to SMCR_RMBE_SIZE, a given value does not. */
	{
		char *old = getenv("SMCR_RMBE_SIZE") ? strdup(getenv("SMCR_RMBE_SIZE")) : NULL;
		struct nbdc_opts o2 = { 0 };

		unsetenv("SMCR_RMBE_SIZE");
		CU_ASSERT_EQUAL_FATAL(nbdc_settings_init(&v), 0);
		nbdc_settings_apply(&v, &o2);
		CU_ASSERT_EQUAL(o2.rmbe_size, 4u << 20);
		setenv("SMCR_RMBE_SIZE", "65536", 1);
		o2 = (struct nbdc_opts){ 0 };
		nbdc_settings_apply(&v, &o2);
		CU_ASSERT_EQUAL(o2.rmbe_size, 0);
		CU_ASSERT_EQUAL(nbdc_setting_set(&v, NBDC_S_RMBE_SIZE, "16k", err, sizeof(err)), 0);
		nbdc_settings_apply(&v, &o2);
		CU_ASSERT_EQUAL(o2.rmbe_size, 16u << 10);
		CU_ASSERT_EQUAL(nbdc_setting_set(&v, NBDC_S_RMBE_SIZE, "0", err, sizeof(err)), 0);
		CU_ASSERT_EQUAL(nbdc_settings_size(&v, NBDC_S_RMBE_SIZE), 0);
		CU_ASSERT_EQUAL(nbdc_setting_set(&v, NBDC_S_RMBE_SIZE, "512M", err, sizeof(err)), 0);
		CU_ASSERT_EQUAL(nbdc_settings_size(&v, NBDC_S_RMBE_SIZE), 512u << 20);
		CU_ASSERT_EQUAL(nbdc_setting_set(&v, NBDC_S_RMBE_SIZE, "1G", err, sizeof(err)),
				-EINVAL);
		CU_ASSERT_STRING_EQUAL(err, "rmbe-size: 0 or 16K to 512M, not '1G'");
		CU_ASSERT_EQUAL(nbdc_setting_set(&v, NBDC_S_RMBE_SIZE, "8K", err, sizeof(err)),
				-EINVAL);
		CU_ASSERT_EQUAL(nbdc_setting_set(&v, NBDC_S_RMBE_SIZE, "4X", err, sizeof(err)),
				-EINVAL);
		CU_ASSERT_EQUAL(nbdc_setting_set(&v, NBDC_S_RMBE_SIZE, "-1", err, sizeof(err)),
				-EINVAL);
		nbdc_settings_free(&v);
		if (old)
			setenv("SMCR_RMBE_SIZE", old, 1);
		else
			unsetenv("SMCR_RMBE_SIZE");
		free(old);
	}
}

/* --- URIs -------------------------------------------------------------- */

static void test_uri(void)
{
	struct nbdc_uri u;
	char h[64], p[16];

	CU_ASSERT_EQUAL(nbdc_uri_parse("smcr://host/disk", &u), 0);
	CU_ASSERT_EQUAL(u.transport, NBDC_SMCR);
	CU_ASSERT_STRING_EQUAL(u.host, "host");
	CU_ASSERT_STRING_EQUAL(u.port, "10810");
	CU_ASSERT_STRING_EQUAL(u.export, "disk");
	CU_ASSERT_EQUAL(nbdc_uri_parse("nbd://10.0.0.1:1234/a%20b", &u), 0);
	CU_ASSERT_EQUAL(u.transport, NBDC_TCP);
	CU_ASSERT_STRING_EQUAL(u.host, "10.0.0.1");
	CU_ASSERT_STRING_EQUAL(u.port, "1234");
	CU_ASSERT_STRING_EQUAL(u.export, "a b");
	CU_ASSERT_EQUAL(nbdc_uri_parse("nbd://[::1]:99/", &u), 0);
	CU_ASSERT_STRING_EQUAL(u.host, "::1");
	CU_ASSERT_STRING_EQUAL(u.port, "99");
	CU_ASSERT_STRING_EQUAL(u.export, "");
	CU_ASSERT_EQUAL(nbdc_uri_parse("nbd://h", &u), 0);
	CU_ASSERT_STRING_EQUAL(u.port, "10809");
	CU_ASSERT_EQUAL(nbdc_uri_parse("http://h/x", &u), -EPROTONOSUPPORT);
	/* nbds:// and libnbd's TLS query parameters */
	CU_ASSERT_EQUAL(nbdc_uri_parse("nbd://h/x", &u), 0);
	CU_ASSERT_FALSE(u.tls);
	CU_ASSERT_EQUAL(u.tls_verify_peer, -1);
	CU_ASSERT_EQUAL(nbdc_uri_parse("nbds://alice@h/x?tls-psk-file=/k%20s&"
				       "tls-verify-peer=false", &u), 0);
	CU_ASSERT_TRUE(u.tls);
	CU_ASSERT_EQUAL(u.transport, NBDC_TCP);
	CU_ASSERT_STRING_EQUAL(u.port, "10809");
	CU_ASSERT_STRING_EQUAL(u.host, "h");
	CU_ASSERT_STRING_EQUAL(u.export, "x");
	CU_ASSERT_STRING_EQUAL(u.tls_username, "alice");
	CU_ASSERT_STRING_EQUAL(u.tls_psk_file, "/k s");
	CU_ASSERT_EQUAL(u.tls_verify_peer, 0);
	CU_ASSERT_EQUAL(nbdc_uri_parse("nbds://[::1]:5?tls-certificates=/c&tls-username=b&"
				       "tls-hostname=n", &u), 0);
	CU_ASSERT_STRING_EQUAL(u.host, "::1");
	CU_ASSERT_STRING_EQUAL(u.export, "");
	CU_ASSERT_STRING_EQUAL(u.tls_certificates, "/c");
	CU_ASSERT_STRING_EQUAL(u.tls_username, "b");
	CU_ASSERT_STRING_EQUAL(u.tls_hostname, "n");
	CU_ASSERT_EQUAL(nbdc_uri_parse("nbds://h/x?socket=/s", &u), -EDESTADDRREQ);
	/* libnbd's Unix socket URIs */
	CU_ASSERT_EQUAL(nbdc_uri_parse("nbd+unix:///foo?socket=/tmp/nbd.sock", &u), 0);
	CU_ASSERT_EQUAL(u.transport, NBDC_UNIX);
	CU_ASSERT_FALSE(u.tls);
	CU_ASSERT_STRING_EQUAL(u.host, "/tmp/nbd.sock");
	CU_ASSERT_STRING_EQUAL(u.port, "");
	CU_ASSERT_STRING_EQUAL(u.export, "foo");
	CU_ASSERT_EQUAL(nbdc_uri_parse("nbds+unix://alice@/?socket=/s%20t&tls-certificates=c",
				       &u), 0);
	CU_ASSERT_EQUAL(u.transport, NBDC_UNIX);
	CU_ASSERT_TRUE(u.tls);
	CU_ASSERT_STRING_EQUAL(u.host, "/s t");
	CU_ASSERT_STRING_EQUAL(u.export, "");
	CU_ASSERT_STRING_EQUAL(u.tls_username, "alice");
	CU_ASSERT_STRING_EQUAL(u.tls_certificates, "c");
	CU_ASSERT_EQUAL(nbdc_uri_parse("nbd+unix://?socket=/s", &u), 0);
	CU_ASSERT_STRING_EQUAL(u.export, "");
	CU_ASSERT_EQUAL(nbdc_uri_parse("nbd+unix:///x", &u), -EDESTADDRREQ);
	CU_ASSERT_EQUAL(nbdc_uri_parse("nbd+unix:///x?socket=", &u), -EINVAL);
	CU_ASSERT_EQUAL(nbdc_uri_parse("nbd+unix://h/x?socket=/s", &u), -EINVAL);
	CU_ASSERT_EQUAL(nbdc_uri_parse("nbd+unix://alice@/x?socket=/s", &u), -EINVAL);
	{
		char long_uri[200];

		snprintf(long_uri, sizeof(long_uri), "nbd+unix:///x?socket=/%0120d", 0);
		CU_ASSERT_EQUAL(nbdc_uri_parse(long_uri, &u), -ENAMETOOLONG);
	}
	CU_ASSERT_EQUAL(nbdc_uri_parse("nbd+unix:///x?socket=/s&colour=blue", &u), -EINVAL);
	CU_ASSERT_STRING_EQUAL(u.bad_key, "colour");
	{
		char msg[300];

		nbdc_uri_strerror("U", &u, -EINVAL, msg, sizeof(msg));
		CU_ASSERT_PTR_NOT_NULL(strstr(msg, "U: unknown query key 'colour' (known: tls-"));
		nbdc_uri_format(NBDC_UNIX, true, "/s", "", "e", msg, sizeof(msg));
		CU_ASSERT_STRING_EQUAL(msg, "nbds+unix:///e?socket=/s");
		nbdc_uri_format(NBDC_TCP, true, "::1", "5", "e", msg, sizeof(msg));
		CU_ASSERT_STRING_EQUAL(msg, "nbds://[::1]:5/e");
		nbdc_uri_format(NBDC_SMCR, false, "h", "1", "", msg, sizeof(msg));
		CU_ASSERT_STRING_EQUAL(msg, "smcr://h:1/");
	}
	CU_ASSERT_EQUAL(nbdc_uri_parse("nbds://h/x?tls-verify-peer=maybe", &u), -EINVAL);
	CU_ASSERT_EQUAL(nbdc_uri_parse("nbds://h/x?tls-certificates", &u), -EINVAL);
	CU_ASSERT_EQUAL(nbdc_uri_parse("nbd://alice@h/x", &u), -EINVAL);
	CU_ASSERT_EQUAL(nbdc_uri_parse("nbds://@h/x", &u), -EINVAL);
	CU_ASSERT_EQUAL(nbdc_uri_parse("nbd://h:0/x", &u), -EINVAL);
	CU_ASSERT_EQUAL(nbdc_uri_parse("nbd://h:70000/x", &u), -EINVAL);
	CU_ASSERT_EQUAL(nbdc_uri_parse("nbd://:80/x", &u), -EINVAL);
	CU_ASSERT_EQUAL(nbdc_uri_parse("nbd://[::1/x", &u), -EINVAL);
	/* percent escapes: two hex digits, never a NUL (strtol took "% 1",
	 * "%-1" and "%00" before) */
	CU_ASSERT_EQUAL(nbdc_uri_parse("nbd://h/%41%6a", &u), 0);
	CU_ASSERT_STRING_EQUAL(u.export, "Aj");
	CU_ASSERT_EQUAL(nbdc_uri_parse("nbd://h/a%00b", &u), -EINVAL);
	CU_ASSERT_EQUAL(nbdc_uri_parse("nbd://h/a%-1", &u), -EINVAL);
	CU_ASSERT_EQUAL(nbdc_uri_parse("nbd://h/a% 1", &u), -EINVAL);
	CU_ASSERT_EQUAL(nbdc_uri_parse("nbd://h/a%zz", &u), -EINVAL);
	CU_ASSERT_EQUAL(nbdc_uri_parse("nbd://h/a%4", &u), -EINVAL);
	CU_ASSERT_EQUAL(nbdc_uri_parse("nbd://h/a%", &u), -EINVAL);
	CU_ASSERT_EQUAL(nbdc_hostport_parse("a.b:7", 1, h, sizeof(h), p, sizeof(p)), 0);
	CU_ASSERT_STRING_EQUAL(h, "a.b");
	CU_ASSERT_STRING_EQUAL(p, "7");
	CU_ASSERT_EQUAL(nbdc_hostport_parse("fe80::1", 5, h, sizeof(h), p, sizeof(p)), 0);
	CU_ASSERT_STRING_EQUAL(h, "fe80::1");
	CU_ASSERT_STRING_EQUAL(p, "5");
	CU_ASSERT_EQUAL(nbdc_hostport_parse("x:", 5, h, sizeof(h), p, sizeof(p)), -EINVAL);
}

static void test_servers_parse(void)
{
	struct nbdc_server sv[NBDC_MAX_SERVERS];
	unsigned n = 0;
	char many[200] = "h";

	CU_ASSERT_EQUAL(nbdc_servers_parse("a:1,[::1]:2,b", 9, sv, NBDC_MAX_SERVERS, &n), 0);
	CU_ASSERT_EQUAL(n, 3);
	CU_ASSERT_STRING_EQUAL(sv[0].host, "a");
	CU_ASSERT_STRING_EQUAL(sv[0].port, "1");
	CU_ASSERT_STRING_EQUAL(sv[1].host, "::1");
	CU_ASSERT_STRING_EQUAL(sv[1].port, "2");
	CU_ASSERT_STRING_EQUAL(sv[2].host, "b");
	CU_ASSERT_STRING_EQUAL(sv[2].port, "9");
	/* appended to what is there, within max */
	CU_ASSERT_EQUAL(nbdc_servers_parse("c:3", 9, sv, NBDC_MAX_SERVERS, &n), 0);
	CU_ASSERT_EQUAL(n, 4);
	CU_ASSERT_STRING_EQUAL(sv[3].host, "c");
	n = 0;
	CU_ASSERT_EQUAL(nbdc_servers_parse("solo", 7, sv, NBDC_MAX_SERVERS, &n), 0);
	CU_ASSERT_EQUAL(n, 1);
	CU_ASSERT_STRING_EQUAL(sv[0].port, "7");
	n = 0;
	CU_ASSERT_EQUAL(nbdc_servers_parse("", 7, sv, NBDC_MAX_SERVERS, &n), -EINVAL);
	n = 0;
	CU_ASSERT_EQUAL(nbdc_servers_parse("a,,b", 7, sv, NBDC_MAX_SERVERS, &n), -EINVAL);
	n = 0;
	CU_ASSERT_EQUAL(nbdc_servers_parse("a,", 7, sv, NBDC_MAX_SERVERS, &n), -EINVAL);
	n = 0;
	CU_ASSERT_EQUAL(nbdc_servers_parse(",a", 7, sv, NBDC_MAX_SERVERS, &n), -EINVAL);
	n = 0;
	CU_ASSERT_EQUAL(nbdc_servers_parse("a:0,b", 7, sv, NBDC_MAX_SERVERS, &n), -EINVAL);
	n = 0;
	CU_ASSERT_EQUAL(nbdc_servers_parse("a,fe80::1", 7, sv, NBDC_MAX_SERVERS, &n), 0);
	CU_ASSERT_STRING_EQUAL(sv[1].host, "fe80::1");	/* bare IPv6: no port */
	CU_ASSERT_STRING_EQUAL(sv[1].port, "7");
	while (strlen(many) < 2 * NBDC_MAX_SERVERS + 1)
		strcat(many, ",h");
	n = 0;
	CU_ASSERT_EQUAL(nbdc_servers_parse(many, 7, sv, NBDC_MAX_SERVERS, &n), -E2BIG);
	many[2 * NBDC_MAX_SERVERS - 1] = '\0';		/* exactly max */
	n = 0;
	CU_ASSERT_EQUAL(nbdc_servers_parse(many, 7, sv, NBDC_MAX_SERVERS, &n), 0);
	CU_ASSERT_EQUAL(n, NBDC_MAX_SERVERS);
}

/* --- I/O -------------------------------------------------------------------- */

static void check_io(struct memsrv *s, struct nbdc *e)
{
	size_t len = 3u << 20;
	uint8_t *a = malloc(len), *b = malloc(len);
	uint64_t offs[3] = { 0, 5u << 20, (16u << 20) - len };
	unsigned i;

	for (i = 0; i < 3; i++) {
		fill(a, len, i + 1);
		CU_ASSERT_EQUAL(nbdc_pwrite(e, a, len, offs[i], i == 1 ? NBD_CMD_FLAG_FUA : 0), 0);
		memset(b, 0, len);
		CU_ASSERT_EQUAL(nbdc_pread(e, b, len, offs[i], 0), 0);
		CU_ASSERT(memcmp(a, b, len) == 0);
		CU_ASSERT(memcmp(a, memsrv_data(s) + offs[i], len) == 0);
	}
	CU_ASSERT_EQUAL(nbdc_flush(e, 0), 0);
	CU_ASSERT_EQUAL(nbdc_trim(e, 65536, 0, 0), 0);
	CU_ASSERT_EQUAL(nbdc_zero(e, 4096, 65536, NBD_CMD_FLAG_NO_HOLE), 0);
	CU_ASSERT_EQUAL(nbdc_pread(e, b, 65536 + 4096, 0, 0), 0);
	memset(a, 0, 65536 + 4096);
	CU_ASSERT(memcmp(a, b, 65536 + 4096) == 0);
	/* Past the end: refused here. */
	CU_ASSERT_EQUAL(nbdc_pread(e, b, 4096, (16u << 20) - 100, 0), -EINVAL);
	free(a);
	free(b);
}

static void test_io_tcp(void)
{
	struct memsrv *s = server(false, true);
	struct nbdc *e = client(s, false, 4, 0, 0);
	struct nbdc_stats st;

	CU_ASSERT_EQUAL(nbdc_size(e), 16u << 20);
	CU_ASSERT_EQUAL(nbdc_connections(e), 4);
	CU_ASSERT(nbdc_flags(e) & NBD_FLAG_CAN_MULTI_CONN);
	CU_ASSERT_FALSE(nbdc_read_only(e));
	check_io(s, e);
	nbdc_get_stats(e, &st);
	CU_ASSERT_EQUAL(st.connections_up, 4);
	CU_ASSERT_EQUAL(st.errors, 1 - 1);	/* the refused read never went out */
	CU_ASSERT_EQUAL(st.reconnects, 0);
	CU_ASSERT_EQUAL(st.inflight, 0);
	CU_ASSERT(st.bytes_written >= 9u << 20);
	nbdc_close(e);
	CU_ASSERT_EQUAL(memsrv_accepted(s), 4);
	memsrv_stop(s);
}

static void test_no_multi_conn(void)
{
	struct memsrv *s = server(false, false);
	struct nbdc *e = client(s, false, 4, 0, 0);

	CU_ASSERT_EQUAL(nbdc_connections(e), 1);
	check_io(s, e);
	nbdc_close(e);
	memsrv_stop(s);
}

static void test_read_only(void)
{
	struct memsrv_opts o = { .read_only = true, .name = "disk" };
	struct memsrv *s = NULL;
	struct nbdc *e;
	uint8_t buf[512] = { 0 };

	CU_ASSERT_EQUAL_FATAL(memsrv_start(&o, &s), 0);
	e = client(s, false, 1, 0, 0);
	CU_ASSERT_TRUE(nbdc_read_only(e));
	CU_ASSERT_EQUAL(nbdc_pwrite(e, buf, sizeof(buf), 0, 0), -EROFS);
	CU_ASSERT_EQUAL(nbdc_trim(e, 512, 0, 0), -EROFS);
	CU_ASSERT_EQUAL(nbdc_pread(e, buf, sizeof(buf), 0, 0), 0);
	nbdc_close(e);
	memsrv_stop(s);
}

static void test_unknown_export(void)
{
	struct memsrv *s = server(false, true);
	char port[16];
	struct nbdc_opts o = { .host = "127.0.0.1", .port = port, .export = "nope",
			       .transport = NBDC_TCP };
	struct nbdc *e = NULL;
	char msg[128];

	snprintf(port, sizeof(port), "%u", memsrv_port(s));
	CU_ASSERT_EQUAL(nbdc_open(&o, &e), -ENXIO);	/* no such export */
	CU_ASSERT_PTR_NULL(e);
	nbdc_strerror(&o, -ENXIO, msg, sizeof(msg));
	CU_ASSERT_PTR_NOT_NULL(strstr(msg, "has no export 'nope'"));
	memsrv_stop(s);
	/* Nobody listening. */
	CU_ASSERT(nbdc_open(&o, &e) < 0);
}

/* --- asynchronous requests ------------------------------------------------- */

struct batch {
	pthread_mutex_t m;
	pthread_cond_t cv;
	unsigned left, errors;
	int last_error;
};

static void batch_init(struct batch *b, unsigned n)
{
	pthread_mutex_init(&b->m, NULL);
	pthread_cond_init(&b->cv, NULL);
	b->left = n;
	b->errors = 0;
	b->last_error = 0;
}

static void batch_done(void *arg, int result)
{
	struct batch *b = arg;

	pthread_mutex_lock(&b->m);
	if (result) {
		b->errors++;
		b->last_error = result;
	}
	if (--b->left == 0)
		pthread_cond_broadcast(&b->cv);
	pthread_mutex_unlock(&b->m);
}

/* Waits up to ms milliseconds; returns what is left. */
static unsigned batch_wait(struct batch *b, int timeout_ms)
{
	struct timespec ts;
	unsigned left;

	clock_gettime(CLOCK_REALTIME, &ts);
	ts.tv_sec += timeout_ms / 1000;
	ts.tv_nsec += (long)(timeout_ms % 1000) * 1000000L;
	if (ts.tv_nsec >= 1000000000L) {
		ts.tv_sec++;
		ts.tv_nsec -= 1000000000L;
	}
	pthread_mutex_lock(&b->m);
	while (b->left && pthread_cond_timedwait(&b->cv, &b->m, &ts) == 0)
		;
	left = b->left;
	pthread_mutex_unlock(&b->m);
	return left;
}

static void batch_fini(struct batch *b)
{
	pthread_cond_destroy(&b->cv);
	pthread_mutex_destroy(&b->m);
}

#define NBLK	512
#define BLK	8192

/* Writes NBLK distinct blocks asynchronously (seed base), then waits. */
static void async_writes(struct nbdc *e, uint8_t *bufs, uint64_t base, struct batch *b)
{
	unsigned i;

	batch_init(b, NBLK);
	for (i = 0; i < NBLK; i++) {
		fill(bufs + (size_t)i * BLK, BLK, base + i);
		CU_ASSERT_EQUAL(nbdc_submit(e, NBD_CMD_WRITE, 0, (uint64_t)i * BLK * 3, BLK,
					    bufs + (size_t)i * BLK, batch_done, b), 0);
	}
}

static void verify_blocks(struct memsrv *s, struct nbdc *e, const uint8_t *bufs)
{
	uint8_t *got = malloc((size_t)NBLK * BLK);
	struct batch b;
	unsigned i, bad = 0;

	batch_init(&b, NBLK);
	for (i = 0; i < NBLK; i++)
		CU_ASSERT_EQUAL(nbdc_submit(e, NBD_CMD_READ, 0, (uint64_t)i * BLK * 3, BLK,
					    got + (size_t)i * BLK, batch_done, &b), 0);
	CU_ASSERT_EQUAL(batch_wait(&b, 20000), 0);
	CU_ASSERT_EQUAL(b.errors, 0);
	for (i = 0; i < NBLK; i++) {
		bad += memcmp(got + (size_t)i * BLK, bufs + (size_t)i * BLK, BLK) != 0;
		bad += memcmp(memsrv_data(s) + (size_t)i * BLK * 3, bufs + (size_t)i * BLK,
			      BLK) != 0;
	}
	CU_ASSERT_EQUAL(bad, 0);
	batch_fini(&b);
	free(got);
}

static void test_async(void)
{
	struct memsrv *s = server(false, true);
	struct nbdc *e = client(s, false, 3, 0, 0);
	uint8_t *bufs = malloc((size_t)NBLK * BLK);
	struct batch b;

	async_writes(e, bufs, 100, &b);
	CU_ASSERT_EQUAL(batch_wait(&b, 20000), 0);
	CU_ASSERT_EQUAL(b.errors, 0);
	batch_fini(&b);
	verify_blocks(s, e, bufs);
	free(bufs);
	nbdc_close(e);
	memsrv_stop(s);
}

/* nbdc_plug/unplug and turn_end: a plugged batch is sent and completes
 * once unplugged; every completion is followed by a turn_end call of its
 * connection thread (the last call sees them all). */
struct turns {
	struct batch *b;
	unsigned calls, seen;		/* turn_end calls, completions at the last */
};

static void turns_end(void *arg)
{
	struct turns *t = arg;
	unsigned done;

	pthread_mutex_lock(&t->b->m);
	done = NBLK - t->b->left;
	t->calls++;
	if (done > t->seen)
		t->seen = done;
	pthread_mutex_unlock(&t->b->m);
}

static void test_plug_turn_end(void)
{
	struct memsrv *s = server(false, true);
	uint8_t *bufs = malloc((size_t)NBLK * BLK);
	struct batch b;
	struct turns t = { .b = &b };
	char port[16];
	struct nbdc_opts o = {
		.host = "127.0.0.1", .port = port, .export = "disk", .transport = NBDC_TCP,
		.connections = 2, .turn_end = turns_end, .turn_arg = &t,
	};
	struct nbdc *e = NULL;

	snprintf(port, sizeof(port), "%u", memsrv_port(s));
	CU_ASSERT_EQUAL_FATAL(nbdc_open(&o, &e), 0);
	nbdc_plug(e);
	async_writes(e, bufs, 300, &b);
	nbdc_unplug(e);
	CU_ASSERT_EQUAL(batch_wait(&b, 20000), 0);
	CU_ASSERT_EQUAL(b.errors, 0);
	nbdc_close(e);		/* joins the threads: their last turn_end ran */
	CU_ASSERT(t.calls >= 1);
	CU_ASSERT(t.calls <= NBLK);
	CU_ASSERT_EQUAL(t.seen, NBLK);
	for (unsigned i = 0; i < NBLK; i++)
		CU_ASSERT(memcmp(memsrv_data(s) + (size_t)i * BLK * 3, bufs + (size_t)i * BLK,
				 BLK) == 0);
	batch_fini(&b);
	free(bufs);
	memsrv_stop(s);
}

/* nbdc_watch: connection i's thread reads pipe i (block numbers) and
 * submits WRITEs of them; each completes on the thread that submitted
 * it (no hand-off), and a closed pipe ends the watch. */
#define WATCH_CONNS	2

struct watch {
	struct nbdc *e;
	uint8_t *bufs;
	int rfd[WATCH_CONNS];
	pthread_t reader[WATCH_CONNS];
	bool seen[WATCH_CONNS], ended[WATCH_CONNS];
	struct batch b;
	unsigned other_thread;		/* completions off the submitter */
};

struct watch_req {
	struct watch *w;
	unsigned conn;
};

static void watch_done(void *arg, int result)
{
	struct watch_req *q = arg;
	struct watch *w = q->w;

	pthread_mutex_lock(&w->b.m);
	if (!pthread_equal(pthread_self(), w->reader[q->conn]))
		w->other_thread++;
	pthread_mutex_unlock(&w->b.m);
	batch_done(&w->b, result);
	free(q);
}

static int watch_ready(void *arg, unsigned conn)
{
	struct watch *w = arg;
	uint32_t blk[16];
	ssize_t got = read(w->rfd[conn], blk, sizeof(blk));
	unsigned i;

	if (got == 0) {
		pthread_mutex_lock(&w->b.m);
		w->ended[conn] = true;
		pthread_mutex_unlock(&w->b.m);
		return -1;
	}
	if (got < 0)
		return 0;
	pthread_mutex_lock(&w->b.m);
	w->reader[conn] = pthread_self();
	w->seen[conn] = true;
	pthread_mutex_unlock(&w->b.m);
	for (i = 0; i < (size_t)got / sizeof(blk[0]); i++) {
		struct watch_req *q = malloc(sizeof(*q));

		q->w = w;
		q->conn = conn;
		fill(w->bufs + (size_t)blk[i] * BLK, BLK, 500 + blk[i]);
		CU_ASSERT_EQUAL(nbdc_submit(w->e, NBD_CMD_WRITE, 0, (uint64_t)blk[i] * BLK * 3,
					    BLK, w->bufs + (size_t)blk[i] * BLK, watch_done, q), 0);
	}
	return (size_t)got == sizeof(blk);
}

static void test_watch(void)
{
	struct memsrv *s = server(false, true);
	struct watch w = { .bufs = malloc((size_t)NBLK * BLK) };
	char port[16];
	struct nbdc_opts o = {
		.host = "127.0.0.1", .port = port, .export = "disk", .transport = NBDC_TCP,
		.connections = WATCH_CONNS, .turn_arg = &w,
	};
	int wfd[WATCH_CONNS], p[2];
	unsigned i;

	snprintf(port, sizeof(port), "%u", memsrv_port(s));
	CU_ASSERT_EQUAL_FATAL(nbdc_open(&o, &w.e), 0);
	CU_ASSERT_EQUAL(nbdc_watch(w.e, 0, 0), -EINVAL);	/* no watch_ready */
	nbdc_close(w.e);
	o.watch_ready = watch_ready;
	CU_ASSERT_EQUAL_FATAL(nbdc_open(&o, &w.e), 0);
	CU_ASSERT_EQUAL_FATAL(nbdc_connections(w.e), WATCH_CONNS);
	batch_init(&w.b, NBLK);
	for (i = 0; i < WATCH_CONNS; i++) {
		CU_ASSERT_EQUAL_FATAL(pipe2(p, O_NONBLOCK | O_CLOEXEC), 0);
		w.rfd[i] = p[0];
		wfd[i] = p[1];
		CU_ASSERT_EQUAL(nbdc_watch(w.e, i, w.rfd[i]), 0);
	}
	CU_ASSERT_EQUAL(nbdc_watch(w.e, WATCH_CONNS, w.rfd[0]), -EINVAL);
	for (i = 0; i < NBLK; i++) {
		uint32_t blk = i;

		CU_ASSERT_EQUAL(write(wfd[i % WATCH_CONNS], &blk, sizeof(blk)), sizeof(blk));
	}
	for (i = 0; i < WATCH_CONNS; i++)
		close(wfd[i]);
	CU_ASSERT_EQUAL(batch_wait(&w.b, 20000), 0);
	CU_ASSERT_EQUAL(w.b.errors, 0);
	for (i = 0; i < 500; i++) {		/* both pipes' ends seen */
		bool both;

		pthread_mutex_lock(&w.b.m);
		both = w.ended[0] && w.ended[1];
		pthread_mutex_unlock(&w.b.m);
		if (both)
			break;
		usleep(10000);
	}
	nbdc_close(w.e);	/* joins the threads */
	for (i = 0; i < WATCH_CONNS; i++) {
		CU_ASSERT(w.seen[i]);
		CU_ASSERT(w.ended[i]);
		close(w.rfd[i]);
	}
	CU_ASSERT(!pthread_equal(w.reader[0], w.reader[1]));
	CU_ASSERT_EQUAL(w.other_thread, 0);
	for (i = 0; i < NBLK; i++)
		CU_ASSERT(memcmp(memsrv_data(s) + (size_t)i * BLK * 3, w.bufs + (size_t)i * BLK,
				 BLK) == 0);
	batch_fini(&w.b);
	free(w.bufs);
	memsrv_stop(s);
}

/* --- losing the server ------------------------------------------------------ */

/* nbdc_open with a connect timeout kept short for the reconnects a test
 * times: on a loaded host the first handshake can outlast it, so an open
 * that timed out is tried again (up to 20 times), its timeout doubled each
 * time up to max_ms (what the test's timings still allow). */
static int open_short_timeout(struct nbdc_opts *o, struct nbdc **e, unsigned max_ms)
{
	int r, i;

	for (i = 0; i < 20; i++) {
		r = nbdc_open(o, e);
		if (r != -ETIMEDOUT)
			break;
		if (o->connect_timeout_ms * 2 <= max_ms)
			o->connect_timeout_ms *= 2;
		printf("(open timed out, again at %u ms) ", o->connect_timeout_ms);
	}
	return r;
}

static void wait_up(struct nbdc *e, unsigned want, int timeout_ms)
{
	int64_t end = now_ms() + timeout_ms;
	struct nbdc_stats st;

	do {
		nbdc_get_stats(e, &st);
		if (st.connections_up >= want)
			return;
		usleep(10000);
	} while (now_ms() < end);
	CU_FAIL("connections did not come back");
}

/* Until reconnects reach n with up connections; the stats then. */
static struct nbdc_stats wait_reconnects(struct nbdc *e, uint64_t n, unsigned up,
					 int timeout_ms)
{
	int64_t end = now_ms() + timeout_ms;
	struct nbdc_stats st;

	do {
		nbdc_get_stats(e, &st);
		if (st.reconnects == n && st.connections_up == up)
			break;
		usleep(10000);
	} while (now_ms() < end);
	return st;
}

static void test_reconnect(void)
{
	struct memsrv *s = server(false, true);
	struct nbdc *e = client(s, false, 2, 10000, 0);
	uint8_t *bufs = malloc((size_t)NBLK * BLK);
	struct nbdc_stats st;
	struct batch b;

	/* Requests go out but get no reply, then the server "crashes". */
	memsrv_hang(s, true);
	async_writes(e, bufs, 200, &b);
	usleep(200000);
	memsrv_pause(s);
	memsrv_hang(s, false);
	usleep(300000);
	nbdc_get_stats(e, &st);
	CU_ASSERT_EQUAL(st.connections_up, 0);
	CU_ASSERT(st.inflight > 0);
	CU_ASSERT_EQUAL(memsrv_resume(s), 0);
	CU_ASSERT_EQUAL(batch_wait(&b, 20000), 0);
	CU_ASSERT_EQUAL(b.errors, 0);
	batch_fini(&b);
	verify_blocks(s, e, bufs);
	/* The requests need one connection back; the other may come back a
	 * little later (seen under load). */
	wait_up(e, 2, 5000);
	nbdc_get_stats(e, &st);
	CU_ASSERT(st.reconnects >= 2);
	CU_ASSERT(st.resent >= 1);
	CU_ASSERT(st.reconnect_failures >= 1);
	CU_ASSERT_EQUAL(st.connections_lost, 2);
	CU_ASSERT_EQUAL(st.timed_out, 0);
	CU_ASSERT_EQUAL(st.errors, 0);
	free(bufs);
	nbdc_close(e);
	memsrv_stop(s);
}

/* Writes 1 MiB of pattern seed at offset, reads it back; 0 if the data is
 * in s's memory. */
static int io_on(struct nbdc *e, struct memsrv *s, uint64_t seed, uint64_t offset)
{
	size_t len = 1u << 20;
	uint8_t *a = malloc(len), *b = malloc(len);
	int r;

	fill(a, len, seed);
	r = nbdc_pwrite(e, a, len, offset, 0);
	if (r == 0)
		r = nbdc_pread(e, b, len, offset, 0);
	if (r == 0 && (memcmp(a, b, len) || memcmp(a, memsrv_data(s) + offset, len)))
		r = -EILSEQ;
	free(a);
	free(b);
	return r;
}

static void test_servers(void)
{
	struct memsrv *dead = server(false, true), *a = server(false, true),
		      *b = server(false, true);
	struct nbdc_server more[2];
	char port[16], msg[2048];
	struct nbdc_opts o = {
		.host = "127.0.0.1", .port = port, .export = "disk",
		.transport = NBDC_TCP, .connections = 2, .timeout_ms = 10000,
		.backoff_min_ms = 20, .backoff_max_ms = 200,
		.servers = more, .nservers = 2,
	};
	struct nbdc_stats st;
	struct nbdc *e = NULL;
	unsigned fails;
	int64_t end;
	int len;

	/* The list: a port nobody listens on, then a, then b. */
	snprintf(port, sizeof(port), "%u", memsrv_port(dead));
	memsrv_stop(dead);
	snprintf(more[0].host, sizeof(more[0].host), "127.0.0.1");
	snprintf(more[0].port, sizeof(more[0].port), "%u", memsrv_port(a));
	snprintf(more[1].host, sizeof(more[1].host), "127.0.0.1");
	snprintf(more[1].port, sizeof(more[1].port), "%u", memsrv_port(b));

	/* Open: the first server that answers, every connection on it. */
	CU_ASSERT_EQUAL_FATAL(nbdc_open(&o, &e), 0);
	end = now_ms() + 5000;		/* counted by the server's threads */
	while (memsrv_accepted(a) < 2 && now_ms() < end)
		usleep(10000);
	CU_ASSERT_EQUAL(memsrv_accepted(a), 2);
	CU_ASSERT_EQUAL(memsrv_accepted(b), 0);
	CU_ASSERT_EQUAL(io_on(e, a, 1, 0), 0);
	len = nbdc_dump(e, msg, sizeof(msg), false);
	CU_ASSERT(len > 0 && strstr(msg, "servers (in turn): 127.0.0.1:"));

	/* a goes away: the next one, b, at the first attempt. */
	memsrv_pause(a);
	CU_ASSERT_EQUAL(io_on(e, b, 2, 1u << 20), 0);
	wait_up(e, 2, 5000);
	nbdc_get_stats(e, &st);
	while (memsrv_accepted(b) < 2 && now_ms() < end + 5000)
		usleep(10000);
	CU_ASSERT_EQUAL(memsrv_accepted(b), 2);
	CU_ASSERT_EQUAL(st.reconnects, 2);
	CU_ASSERT_EQUAL(st.reconnect_failures, 0);

	/* b goes away with a back: round the list (the dead port fails)
	 * to a. */
	CU_ASSERT_EQUAL(memsrv_resume(a), 0);
	memsrv_pause(b);
	CU_ASSERT_EQUAL(io_on(e, a, 3, 2u << 20), 0);
	wait_up(e, 2, 5000);
	nbdc_get_stats(e, &st);
	fails = (unsigned)st.reconnect_failures;
	CU_ASSERT(fails >= 1 && fails <= 2);
	CU_ASSERT_EQUAL(st.reconnects, 4);
	while (memsrv_accepted(a) < 4 && now_ms() < end + 10000)
		usleep(10000);
	CU_ASSERT_EQUAL(memsrv_accepted(a), 4);
	CU_ASSERT_EQUAL(st.errors, 0);
	nbdc_close(e);
	memsrv_stop(a);
	memsrv_stop(b);

	/* None answers: the first one's error, the message says so. */
	o.nservers = 0;
	CU_ASSERT_EQUAL(nbdc_open(&o, &e), -ECONNREFUSED);
	o.nservers = 2;
	CU_ASSERT_EQUAL(nbdc_open(&o, &e), -ECONNREFUSED);
	nbdc_strerror(&o, -ECONNREFUSED, msg, sizeof(msg));
	CU_ASSERT_PTR_NOT_NULL(strstr(msg, "(nor 2 other servers)"));
	o.nservers = NBDC_MAX_SERVERS;
	CU_ASSERT_EQUAL(nbdc_open(&o, &e), -EINVAL);
}

/* first_up: nbdc_open returns with the first connection up; the others
 * come up in their threads (not counted as reconnects), and requests
 * sent meanwhile go to those that are up. */
static void test_first_up(void)
{
	struct memsrv *s = server(false, true);
	char port[16];
	struct nbdc_opts o = {
		.host = "127.0.0.1", .port = port, .export = "disk",
		.transport = NBDC_TCP, .connections = 4, .timeout_ms = 10000,
		.backoff_min_ms = 20, .backoff_max_ms = 200, .first_up = true,
	};
	struct nbdc_stats st;
	struct nbdc *e = NULL;
	int64_t end;

	snprintf(port, sizeof(port), "%u", memsrv_port(s));
	CU_ASSERT_EQUAL_FATAL(nbdc_open(&o, &e), 0);
	CU_ASSERT_EQUAL(nbdc_connections(e), 4);
	nbdc_get_stats(e, &st);
	CU_ASSERT(st.connections_up >= 1);
	CU_ASSERT_EQUAL(io_on(e, s, 7, 0), 0);
	wait_up(e, 4, 5000);
	end = now_ms() + 5000;		/* counted by the server's threads */
	while (memsrv_accepted(s) < 4 && now_ms() < end)
		usleep(10000);
	CU_ASSERT_EQUAL(memsrv_accepted(s), 4);
	CU_ASSERT_EQUAL(io_on(e, s, 8, 1u << 20), 0);
	nbdc_get_stats(e, &st);
	CU_ASSERT_EQUAL(st.connections_up, 4);
	CU_ASSERT_EQUAL(st.reconnects, 0);
	CU_ASSERT_EQUAL(st.reconnect_failures, 0);
	CU_ASSERT_EQUAL(st.connections_lost, 0);
	CU_ASSERT_EQUAL(st.errors, 0);
	nbdc_close(e);
	memsrv_stop(s);
}

/* A connection lost after another one moved on follows that one. */
static void test_servers_gather(void)
{
	struct memsrv *dead = server(false, true), *a = server(false, true),
		      *b = server(false, true);
	struct nbdc_server more[2];
	char port[16];
	struct nbdc_opts o = {
		.host = "127.0.0.1", .port = port, .export = "disk",
		.transport = NBDC_TCP, .connections = 2, .timeout_ms = 10000,
		.backoff_min_ms = 20, .backoff_max_ms = 200,
		.servers = more, .nservers = 2,
	};
	uint8_t buf[4096] = { 0 };
	struct nbdc_stats st;
	struct nbdc *e = NULL;
	int64_t end;

	/* The list: a, a port nobody listens on, b. */
	snprintf(port, sizeof(port), "%u", memsrv_port(a));
	snprintf(more[0].host, sizeof(more[0].host), "127.0.0.1");
	snprintf(more[0].port, sizeof(more[0].port), "%u", memsrv_port(dead));
	memsrv_stop(dead);
	snprintf(more[1].host, sizeof(more[1].host), "127.0.0.1");
	snprintf(more[1].port, sizeof(more[1].port), "%u", memsrv_port(b));
	CU_ASSERT_EQUAL_FATAL(nbdc_open(&o, &e), 0);

	/* One connection dropped: it goes round the dead port to b. */
	memsrv_drop_after(a, 1);
	CU_ASSERT_EQUAL(nbdc_pwrite(e, buf, sizeof(buf), 0, 0), 0);
	st = wait_reconnects(e, 1, 2, 5000);
	CU_ASSERT_EQUAL(st.reconnects, 1);
	CU_ASSERT_EQUAL(st.reconnect_failures, 1);

	/* a goes away: the other connection follows to b straight away. */
	memsrv_pause(a);
	wait_up(e, 2, 5000);
	end = now_ms() + 5000;
	st = wait_reconnects(e, 2, 2, 5000);
	CU_ASSERT_EQUAL(st.reconnects, 2);
	CU_ASSERT_EQUAL(st.reconnect_failures, 1);
	while (memsrv_accepted(b) < 2 && now_ms() < end)
		usleep(10000);
	CU_ASSERT_EQUAL(memsrv_accepted(b), 2);
	CU_ASSERT_EQUAL(io_on(e, b, 5, 1u << 20), 0);
	CU_ASSERT_EQUAL(st.errors, 0);
	nbdc_close(e);
	memsrv_stop(a);
	memsrv_stop(b);
}

static void test_timeout(void)
{
	struct memsrv *s = server(false, true);
	struct nbdc *e = client(s, false, 2, 400, 0);
	uint8_t buf[4096];
	struct nbdc_stats st;
	struct batch b;
	int64_t t0;

	memsrv_pause(s);
	usleep(50000);
	t0 = now_ms();
	batch_init(&b, 1);
	CU_ASSERT_EQUAL(nbdc_submit(e, NBD_CMD_READ, 0, 0, sizeof(buf), buf, batch_done, &b), 0);
	CU_ASSERT_EQUAL(batch_wait(&b, 5000), 0);
	CU_ASSERT_EQUAL(b.last_error, -EIO);
	CU_ASSERT(now_ms() - t0 >= 300);
	batch_fini(&b);
	/* Down for longer than the timeout: fail at once. */
	t0 = now_ms();
	CU_ASSERT_EQUAL(nbdc_pread(e, buf, sizeof(buf), 0, 0), -EIO);
	CU_ASSERT(now_ms() - t0 < 100);
	nbdc_get_stats(e, &st);
	CU_ASSERT(st.timed_out >= 2);
	/* Back: works again. */
	CU_ASSERT_EQUAL(memsrv_resume(s), 0);
	wait_up(e, 1, 5000);
	CU_ASSERT_EQUAL(nbdc_pread(e, buf, sizeof(buf), 0, 0), 0);
	wait_up(e, 2, 5000);
	nbdc_close(e);
	memsrv_stop(s);
}

/* A listener on 127.0.0.1:port (0: any free one) whose accept queue is
 * full: the kernel drops further SYNs, so a connect to it hangs as to a
 * dead address.  Its port in *port; queued[NFILL] the queued connections. */
#define NFILL 4
static int full_listener(unsigned *port, int queued[NFILL])
{
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons((uint16_t)*port) };
	socklen_t len = sizeof(sa);
	struct pollfd p = { .events = POLLOUT };
	int one = 1, lfd, i;

	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	CU_ASSERT_FATAL(lfd >= 0);
	setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	/* The server's old port may take a moment to be free. */
	for (i = 0; i < 100 && bind(lfd, (struct sockaddr *)&sa, sizeof(sa)); i++)
		usleep(20000);
	CU_ASSERT_FATAL(i < 100);
	CU_ASSERT_FATAL(listen(lfd, 0) == 0);
	CU_ASSERT_FATAL(getsockname(lfd, (struct sockaddr *)&sa, &len) == 0);
	*port = ntohs(sa.sin_port);
	for (i = 0; i < NFILL; i++) {
		queued[i] = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
		CU_ASSERT_FATAL(queued[i] >= 0);
		CU_ASSERT(connect(queued[i], (struct sockaddr *)&sa, sizeof(sa)) == 0 ||
			  errno == EINPROGRESS);
	}
	/* The last one is not let in: the queue is full. */
	p.fd = queued[NFILL - 1];
	CU_ASSERT_EQUAL(poll(&p, 1, 300), 0);
	return lfd;
}

static void close_full_listener(int lfd, int queued[NFILL])
{
	int i;

	for (i = 0; i < NFILL; i++)
		close(queued[i]);
	close(lfd);
}

/* A (re)connect to an address that never answers gives up after
 * connect_timeout_ms (smcr_connect_timeout, the TCP one), so requests
 * fail at their timeout instead of waiting out the kernel's SYN retries
 * (~2 min; seen in the VM soak); the server back, all is well. */
static void test_connect_timeout(void)
{
	struct memsrv *s = server(true, true);
	unsigned port = 0, t;
	int queued[NFILL], lfd, r;
	char p[16];
	struct nbdc_opts o = { .host = "127.0.0.1", .port = p, .export = "disk",
			       .connections = 1, .timeout_ms = 1500, .connect_timeout_ms = 300,
			       .backoff_min_ms = 20, .backoff_max_ms = 200 };
	struct nbdc *e = NULL;
	struct nbdc_stats st;
	uint8_t a[4096], b[4096];
	int64_t t0;

	/* nbdc_open, over both transports. */
	lfd = full_listener(&port, queued);
	snprintf(p, sizeof(p), "%u", port);
	for (t = 0; t < 2; t++) {
		o.transport = t ? NBDC_SMCR : NBDC_TCP;
		t0 = now_ms();
		CU_ASSERT_EQUAL(nbdc_open(&o, &e), -ETIMEDOUT);
		CU_ASSERT(now_ms() - t0 >= 250 && now_ms() - t0 < 2000);
	}
	close_full_listener(lfd, queued);

	/* Reconnects while the server's port takes no connection. */
	snprintf(p, sizeof(p), "%u", memsrv_port(s));
	o.transport = NBDC_SMCR;
	CU_ASSERT_EQUAL_FATAL(open_short_timeout(&o, &e, 300), 0);
	fill(a, sizeof(a), 11);
	CU_ASSERT_EQUAL(nbdc_pwrite(e, a, sizeof(a), 4096, 0), 0);
	memsrv_pause(s);
	port = memsrv_port(s);
	lfd = full_listener(&port, queued);
	t0 = now_ms();
	r = nbdc_pread(e, b, sizeof(b), 4096, 0);
	CU_ASSERT_EQUAL(r, -EIO);
	CU_ASSERT(now_ms() - t0 >= 1000);
	CU_ASSERT(now_ms() - t0 < 1500 + 300 + 1500);
	nbdc_get_stats(e, &st);
	CU_ASSERT(st.reconnect_failures >= 2);
	close_full_listener(lfd, queued);
	CU_ASSERT_EQUAL(memsrv_resume(s), 0);
	wait_up(e, 1, 5000);
	CU_ASSERT_EQUAL(nbdc_pread(e, b, sizeof(b), 4096, 0), 0);
	CU_ASSERT(memcmp(a, b, sizeof(a)) == 0);
	nbdc_close(e);
	memsrv_stop(s);
}

/* A server that restarts refuses connections until it listens again: a
 * refused reconnect is tried again within NBDC_REFUSED_RETRY_MS (250),
 * not after the backoff (doubling to 5 s), so the connection is back soon
 * after the server; a connect that times out still backs off. */
static void test_reconnect_refused(void)
{
	struct memsrv *s = server(true, true);
	unsigned port;
	int queued[NFILL], lfd;
	char p[16];
	struct nbdc_opts o = { .host = "127.0.0.1", .port = p, .export = "disk",
			       .transport = NBDC_SMCR, .connections = 2, .timeout_ms = 20000 };
	struct nbdc *e = NULL;
	struct nbdc_stats st;
	uint8_t a[4096], b[4096];
	uint64_t fails;
	int64_t t0, back;

	snprintf(p, sizeof(p), "%u", memsrv_port(s));
	CU_ASSERT_EQUAL_FATAL(nbdc_open(&o, &e), 0);
	fill(a, sizeof(a), 12);
	CU_ASSERT_EQUAL(nbdc_pwrite(e, a, sizeof(a), 8192, 0), 0);

	/* Away for 2.5 s (the first attempts may meet the listener still
	 * open, and back off): from 0.5 s on about 8 refused attempts each;
	 * the backoff (100 ms doubling) would make at most 3. */
	memsrv_pause(s);
	t0 = now_ms();
	do {
		nbdc_get_stats(e, &st);
		if (st.connections_up == 0)
			break;
		usleep(10000);
	} while (now_ms() - t0 < 5000);
	CU_ASSERT_EQUAL(st.connections_up, 0);
	usleep(500000);
	nbdc_get_stats(e, &st);
	fails = st.reconnect_failures;
	usleep(2000000);
	nbdc_get_stats(e, &st);
	printf("(%" PRIu64 " refused attempts in 2 s) ", st.reconnect_failures - fails);
	CU_ASSERT(st.reconnect_failures - fails >= 8);

	/* Back: both connections within 250 ms and a handshake (the
	 * backoff would be at 1.6-3.2 s now); 2 s allows a busy host. */
	CU_ASSERT_EQUAL_FATAL(memsrv_resume(s), 0);
	t0 = now_ms();
	wait_up(e, 2, 10000);
	back = now_ms() - t0;
	printf("(back %" PRId64 " ms after the server) ", back);
	CU_ASSERT(back < 2000);
	CU_ASSERT_EQUAL(nbdc_pread(e, b, sizeof(b), 8192, 0), 0);
	CU_ASSERT(memcmp(a, b, sizeof(a)) == 0);
	nbdc_get_stats(e, &st);
	CU_ASSERT_EQUAL(st.errors, 0);
	nbdc_close(e);

	/* A port that takes no connection: an attempt times out (100 ms,
	 * up to 800 on a loaded host) and the next waits for the backoff
	 * (5 s here), so in the 1.5 s from the bind on, at most one refused
	 * attempt (before it) and one timeout. */
	o.connections = 1;
	o.connect_timeout_ms = 100;
	o.backoff_min_ms = o.backoff_max_ms = 5000;
	CU_ASSERT_EQUAL_FATAL(open_short_timeout(&o, &e, 800), 0);
	memsrv_pause(s);
	port = memsrv_port(s);
	lfd = full_listener(&port, queued);
	nbdc_get_stats(e, &st);
	fails = st.reconnect_failures;
	usleep(1500000);
	nbdc_get_stats(e, &st);
	CU_ASSERT_EQUAL(st.connections_up, 0);
	CU_ASSERT(st.reconnect_failures - fails <= 2);
	nbdc_close(e);
	close_full_listener(lfd, queued);
	memsrv_stop(s);
}

static void test_eshutdown(void)
{
	struct memsrv *s = server(false, true);
	struct nbdc *e = client(s, false, 1, 5000, 0);
	uint8_t a[4096], b[4096];
	struct nbdc_stats st;

	fill(a, sizeof(a), 7);
	memsrv_eshutdown(s, 2);
	CU_ASSERT_EQUAL(nbdc_pwrite(e, a, sizeof(a), 8192, 0), 0);
	CU_ASSERT_EQUAL(nbdc_pread(e, b, sizeof(b), 8192, 0), 0);
	CU_ASSERT(memcmp(a, b, sizeof(a)) == 0);
	nbdc_get_stats(e, &st);
	CU_ASSERT(st.connections_lost >= 1);
	CU_ASSERT(st.resent >= 1);
	CU_ASSERT_EQUAL(st.errors, 0);
	nbdc_close(e);
	memsrv_stop(s);
}

static void test_drop_mid_stream(void)
{
	struct memsrv *s = server(false, true);
	struct nbdc *e = client(s, false, 2, 5000, 0);
	uint8_t *bufs = malloc((size_t)NBLK * BLK);
	struct nbdc_stats st;
	struct batch b;

	memsrv_drop_after(s, 100);
	async_writes(e, bufs, 300, &b);
	CU_ASSERT_EQUAL(batch_wait(&b, 20000), 0);
	CU_ASSERT_EQUAL(b.errors, 0);
	batch_fini(&b);
	/* Our own fault injection as well, while reading. */
	nbdc_drop_connections(e);
	verify_blocks(s, e, bufs);
	nbdc_get_stats(e, &st);
	CU_ASSERT(st.connections_lost >= 2);
	CU_ASSERT(st.resent >= 1);
	CU_ASSERT_EQUAL(st.errors, 0);
	free(bufs);
	nbdc_close(e);
	memsrv_stop(s);
}

static void test_io_timeout(void)
{
	struct memsrv *s = server(false, true);
	struct nbdc *e = client(s, false, 1, 10000, 300);
	uint8_t a[4096], b[4096];
	struct nbdc_stats st;
	struct batch bt;

	fill(a, sizeof(a), 9);
	memsrv_hang(s, true);
	batch_init(&bt, 1);
	CU_ASSERT_EQUAL(nbdc_submit(e, NBD_CMD_WRITE, 0, 0, sizeof(a), a, batch_done, &bt), 0);
	usleep(800000);
	nbdc_get_stats(e, &st);
	CU_ASSERT(st.connections_lost >= 1);
	memsrv_hang(s, false);
	CU_ASSERT_EQUAL(batch_wait(&bt, 5000), 0);
	CU_ASSERT_EQUAL(bt.errors, 0);
	batch_fini(&bt);
	CU_ASSERT_EQUAL(nbdc_pread(e, b, sizeof(b), 0, 0), 0);
	CU_ASSERT(memcmp(a, b, sizeof(a)) == 0);
	nbdc_close(e);
	memsrv_stop(s);
}

/* --- READ replies: ranges, overlaps, gaps ------------------------------- */

/* The ranges a READ's chunks filled: merged where they touch, an
 * overlap refused, more ranges than the inline ones, and the cap. */
static void test_read_spans(void)
{
	static uint8_t buf[1u << 20];
	struct nbdc_req r = { .type = NBD_CMD_READ, .len = sizeof(buf), .buf = buf };
	unsigned i;

	memset(buf, 0xaa, sizeof(buf));
	CU_ASSERT_EQUAL(nbdc_req_span_add(&r, 4096, 4096), 0);
	/* the first chunk did not cover the whole READ: zeroed */
	CU_ASSERT_EQUAL(buf[0], 0);
	CU_ASSERT_EQUAL(buf[sizeof(buf) - 1], 0);
	CU_ASSERT_EQUAL(nbdc_req_span_add(&r, 0, 4096), 0);
	CU_ASSERT_EQUAL(r.nspans, 1);
	CU_ASSERT_EQUAL(nbdc_req_span_add(&r, 12288, 4096), 0);
	CU_ASSERT_EQUAL(r.nspans, 2);
	/* inside, across the start, across the end, around, same range */
	CU_ASSERT_EQUAL(nbdc_req_span_add(&r, 100, 1), -EPROTO);
	CU_ASSERT_EQUAL(nbdc_req_span_add(&r, 8191, 2), -EPROTO);
	CU_ASSERT_EQUAL(nbdc_req_span_add(&r, 12000, 300), -EPROTO);
	CU_ASSERT_EQUAL(nbdc_req_span_add(&r, 8192, 8192), -EPROTO);
	CU_ASSERT_EQUAL(nbdc_req_span_add(&r, 12288, 4096), -EPROTO);
	CU_ASSERT_EQUAL(r.data_seen, 12288);
	/* the hole between them: one range again */
	CU_ASSERT_EQUAL(nbdc_req_span_add(&r, 8192, 4096), 0);
	CU_ASSERT_EQUAL(r.nspans, 1);
	CU_ASSERT_EQUAL(r.spans[0].start, 0);
	CU_ASSERT_EQUAL(r.spans[0].end, 16384);
	/* every other byte pair from the end back: ranges on the heap, up to the cap */
	for (i = 0; i < NBDC_SPANS_MAX - 1; i++)
		CU_ASSERT_EQUAL_FATAL(nbdc_req_span_add(&r, sizeof(buf) - 2 - 4 * i, 2), 0);
	CU_ASSERT_EQUAL(r.nspans, NBDC_SPANS_MAX);
	CU_ASSERT(r.spans != r.inl);
	CU_ASSERT_EQUAL(nbdc_req_span_add(&r, 65536, 2), -EPROTO);
	/* one that joins two ranges still fits */
	CU_ASSERT_EQUAL(nbdc_req_span_add(&r, sizeof(buf) - 4, 2), 0);
	CU_ASSERT_EQUAL(r.nspans, NBDC_SPANS_MAX - 1);
	nbdc_req_rewind(&r);
	CU_ASSERT_EQUAL(r.nspans, 0);
	CU_ASSERT_EQUAL(r.data_seen, 0);
	/* one chunk for the whole READ: the buffer is not zeroed first */
	memset(buf, 0xaa, sizeof(buf));
	CU_ASSERT_EQUAL(nbdc_req_span_add(&r, 0, sizeof(buf)), 0);
	CU_ASSERT_EQUAL(buf[0], 0xaa);
	if (r.spans != r.inl)
		free(r.spans);
}

/* A server's READ replies in every shape: the legal ones read back the
 * data; an overlap or a gap fails the READ with EIO, leaves zeros (never
 * the buffer's earlier bytes), drops the connection, and the next READ on
 * a new connection is right. */
static void test_read_shapes(void)
{
	static const uint32_t lens[] = { 65536, 4097, 2 };
	struct memsrv *s = server(false, true);
	struct nbdc *e = client(s, false, 1, 5000, 0);
	uint8_t *a = malloc(65536), *b = malloc(65536), *z = calloc(1, 65536);
	struct nbdc_stats st;
	uint64_t lost = 0;
	unsigned i, k, n;

	for (i = 0; i < MEMSRV_READ_SHAPES; i++) {
		bool bad = i == MEMSRV_READ_OVERLAP || i == MEMSRV_READ_HOLE_TWICE ||
			   i == MEMSRV_READ_GAP;

		for (k = 0; k < sizeof(lens) / sizeof(lens[0]); k++) {
			uint32_t len = lens[k];
			uint64_t off = 1048576 + 65536 * (uint64_t)(i * 4 + k);
			int ret;

			fill(a, len, i * 10 + k);
			memsrv_read_shape(s, MEMSRV_READ_ONE);
			CU_ASSERT_EQUAL_FATAL(nbdc_pwrite(e, a, len, off, 0), 0);
			memsrv_read_shape(s, (enum memsrv_read_shape)i);
			memset(b, 0xaa, len);
			ret = nbdc_pread(e, b, len, off, 0);
			nbdc_get_stats(e, &st);
			/* the READ completes before its connection is counted lost */
			for (n = 0; bad && st.connections_lost == lost && n < 200; n++) {
				usleep(10000);
				nbdc_get_stats(e, &st);
			}
			if (bad) {
				if (ret != -EIO || memcmp(b, z, len))
					printf("\n  shape %s, %u bytes: %d\n",
					       memsrv_read_shape_name(i), len, ret);
				CU_ASSERT_EQUAL(ret, -EIO);
				CU_ASSERT(memcmp(b, z, len) == 0);
				CU_ASSERT(st.connections_lost > lost);
			} else {
				if (i == MEMSRV_READ_HOLES)
					memset(a, 0, len / 2);
				CU_ASSERT_EQUAL(ret, 0);
				CU_ASSERT(memcmp(a, b, len) == 0);
				CU_ASSERT_EQUAL(st.connections_lost, lost);
			}
			lost = st.connections_lost;
			/* and a good READ after it */
			memsrv_read_shape(s, MEMSRV_READ_ONE);
			memset(b, 0xaa, len);
			CU_ASSERT_EQUAL(nbdc_pread(e, b, len, off, 0), 0);
			CU_ASSERT(memcmp(a, b, len) == 0);
		}
	}
	nbdc_get_stats(e, &st);
	/* 3 bad shapes x 3 lengths */
	CU_ASSERT_EQUAL(st.errors, 9);
	free(a);
	free(b);
	free(z);
	nbdc_close(e);
	memsrv_stop(s);
}

/* A sink's view of a READ (what came where) or a source's of a WRITE
 * (what it gives from data), and an error to give. */
struct sink_rec {
	struct batch b;
	uint8_t *buf, *out;
	const uint8_t *data;
	uint64_t bytes;
	unsigned calls;
	int fail;
};

static int rec_copy(struct sink_rec *sr, uint8_t *at, const struct iovec *iov, int n, bool sink)
{
	size_t off = (size_t)(at - sr->buf);
	int i;

	sr->calls++;
	if (sr->fail)
		return sr->fail;
	for (i = 0; i < n; i++) {
		if (sink)
			memcpy(sr->out + off, iov[i].iov_base, iov[i].iov_len);
		else
			memcpy(iov[i].iov_base, sr->data + off, iov[i].iov_len);
		off += iov[i].iov_len;
		sr->bytes += iov[i].iov_len;
	}
	return 0;
}

static int rec_sink(void *arg, uint8_t *at, const struct iovec *iov, int n)
{
	return rec_copy(arg, at, iov, n, true);
}

static int rec_source(void *arg, uint8_t *at, const struct iovec *iov, int n)
{
	return rec_copy(arg, at, iov, n, false);
}

static void sink_done(void *arg, int result)
{
	struct sink_rec *sr = arg;

	batch_done(&sr->b, result);
}

/* nbdc_submit_read: in every legal reply shape the sink gets every byte
 * at its place (a hole as zeros); a sink's error fails that READ only. */
static void test_read_sink(void)
{
	static const uint32_t lens[] = { 65536, 4097, 2 };
	struct memsrv *s = server(false, true);
	struct nbdc *e = client(s, false, 1, 5000, 0);
	uint8_t *a = malloc(65536), *buf = malloc(65536), *out = malloc(65536);
	struct nbdc_stats st;
	unsigned i, k;

	for (i = 0; i < MEMSRV_READ_SHAPES; i++) {
		if (i == MEMSRV_READ_OVERLAP || i == MEMSRV_READ_HOLE_TWICE || i == MEMSRV_READ_GAP)
			continue;
		for (k = 0; k < sizeof(lens) / sizeof(lens[0]); k++) {
			uint32_t len = lens[k];
			uint64_t off = 1048576 + 65536 * (uint64_t)(i * 4 + k);
			struct sink_rec sr = { .buf = buf, .out = out };

			fill(a, len, i * 10 + k + 100);
			memsrv_read_shape(s, MEMSRV_READ_ONE);
			CU_ASSERT_EQUAL_FATAL(nbdc_pwrite(e, a, len, off, 0), 0);
			memsrv_read_shape(s, (enum memsrv_read_shape)i);
			memset(out, 0xaa, len);
			batch_init(&sr.b, 1);
			CU_ASSERT_EQUAL_FATAL(nbdc_submit_read(e, off, len, buf, rec_sink, sink_done, &sr), 0);
			CU_ASSERT_EQUAL(batch_wait(&sr.b, 5000), 0);
			CU_ASSERT_EQUAL(sr.b.errors, 0);
			batch_fini(&sr.b);
			if (i == MEMSRV_READ_HOLES)
				memset(a, 0, len / 2);
			CU_ASSERT(memcmp(a, out, len) == 0);
			CU_ASSERT_EQUAL(sr.bytes, len);
		}
	}
	/* a sink that fails: that READ gets its error, the connection stays */
	{
		struct sink_rec sr = { .buf = buf, .out = out, .fail = -EIO };

		memsrv_read_shape(s, MEMSRV_READ_ONE);
		batch_init(&sr.b, 1);
		CU_ASSERT_EQUAL_FATAL(nbdc_submit_read(e, 0, 65536, buf, rec_sink, sink_done, &sr), 0);
		CU_ASSERT_EQUAL(batch_wait(&sr.b, 5000), 0);
		CU_ASSERT_EQUAL(sr.b.errors, 1);
		CU_ASSERT_EQUAL(sr.b.last_error, -EIO);
		CU_ASSERT(sr.calls >= 1);
		batch_fini(&sr.b);
		CU_ASSERT_EQUAL(nbdc_submit_read(e, 0, 4096, buf, NULL, sink_done, &sr), -EINVAL);
	}
	fill(a, 4096, 7);
	CU_ASSERT_EQUAL(nbdc_pwrite(e, a, 4096, 0, 0), 0);
	CU_ASSERT_EQUAL(nbdc_pread(e, buf, 4096, 0, 0), 0);
	CU_ASSERT(memcmp(a, buf, 4096) == 0);
	nbdc_get_stats(e, &st);
	CU_ASSERT_EQUAL(st.connections_lost, 0);
	free(a);
	free(buf);
	free(out);
	nbdc_close(e);
	memsrv_stop(s);
}

/* nbdc_submit_write over TCP and over SMC-R fallen back to TCP (no room
 * to lend: the source fills buf): the disk gets the source's bytes; a
 * source's error fails that WRITE only and nothing of it reaches the
 * disk. */
static void test_write_source(void)
{
	static const uint32_t lens[] = { 65536, 4097, 1 };
	uint8_t *a = malloc(65536), *buf = malloc(65536), *back = malloc(65536);
	unsigned t, k;

	for (t = 0; t < 2; t++) {
		struct memsrv *s = server(t == 1, true);
		struct nbdc *e = client(s, t == 1, 2, 5000, 0);
		struct nbdc_stats st;

		for (k = 0; k < sizeof(lens) / sizeof(lens[0]); k++) {
			uint32_t len = lens[k];
			uint64_t off = 1048576 + 131072 * (uint64_t)k + k;
			struct sink_rec sr = { .buf = buf, .data = a };

			fill(a, len, 200 + t * 10 + k);
			memset(buf, 0x55, len);
			batch_init(&sr.b, 1);
			CU_ASSERT_EQUAL_FATAL(nbdc_submit_write(e, 0, off, len, buf, rec_source,
								sink_done, &sr), 0);
			CU_ASSERT_EQUAL(batch_wait(&sr.b, 5000), 0);
			CU_ASSERT_EQUAL(sr.b.errors, 0);
			batch_fini(&sr.b);
			CU_ASSERT(sr.calls >= 1);
			CU_ASSERT_EQUAL(sr.bytes % len, 0);
			CU_ASSERT_EQUAL(nbdc_pread(e, back, len, off, 0), 0);
			CU_ASSERT(memcmp(a, back, len) == 0);
		}
		/* a source that fails: that WRITE gets its error, the old data
		 * stays, the connection too */
		{
			struct sink_rec sr = { .buf = buf, .data = a, .fail = -EIO };

			fill(a, 8192, 77);
			CU_ASSERT_EQUAL(nbdc_pwrite(e, a, 8192, 0, 0), 0);
			batch_init(&sr.b, 1);
			CU_ASSERT_EQUAL_FATAL(nbdc_submit_write(e, 0, 0, 8192, buf, rec_source,
								sink_done, &sr), 0);
			CU_ASSERT_EQUAL(batch_wait(&sr.b, 5000), 0);
			CU_ASSERT_EQUAL(sr.b.errors, 1);
			CU_ASSERT_EQUAL(sr.b.last_error, -EIO);
			batch_fini(&sr.b);
			CU_ASSERT_EQUAL(nbdc_pread(e, back, 8192, 0, 0), 0);
			CU_ASSERT(memcmp(a, back, 8192) == 0);
			CU_ASSERT_EQUAL(nbdc_submit_write(e, 0, 0, 4096, buf, NULL, sink_done, &sr),
					-EINVAL);
		}
		nbdc_get_stats(e, &st);
		CU_ASSERT_EQUAL(st.connections_lost, 0);
		CU_ASSERT_EQUAL(st.writes_in_place, 0);	/* no send buffer to lend */
		nbdc_close(e);
		memsrv_stop(s);
	}
	free(a);
	free(buf);
	free(back);
}

/* --- timeouts that bound ---------------------------------------------------- */

/* A server that answers every request with ESHUTDOWN: the request fails
 * with EIO at its timeout (1.5 s from its submission, slack 1 s),
 * however often it went out again, and the reconnects back off (20 ms
 * doubling to 200 ms here: about 10 connections in 1.5 s; at once each
 * time, it would be thousands).  The server answering again, I/O works. */
static void test_eshutdown_always(void)
{
	struct memsrv *s = server(false, true);
	struct nbdc *e = client(s, false, 1, 1500, 0);
	uint8_t a[4096], b[4096];
	unsigned c0, conns;
	int64_t t0, ms;
	int r;

	fill(a, sizeof(a), 21);
	CU_ASSERT_EQUAL(nbdc_pwrite(e, a, sizeof(a), 4096, 0), 0);
	memsrv_eshutdown(s, UINT32_MAX);
	c0 = memsrv_connections(s);
	t0 = now_ms();
	r = nbdc_pread(e, b, sizeof(b), 4096, 0);
	CU_ASSERT_EQUAL(r, -EIO);
	ms = now_ms() - t0;
	conns = memsrv_connections(s) - c0;
	printf("(%d after %" PRId64 " ms, %u connections) ", r, ms, conns);
	CU_ASSERT(ms >= 1400);
	CU_ASSERT(ms < 1500 + 1000);
	CU_ASSERT(conns <= 25);
	memsrv_eshutdown(s, 0);
	wait_up(e, 1, 5000);
	CU_ASSERT_EQUAL(nbdc_pread(e, b, sizeof(b), 4096, 0), 0);
	CU_ASSERT(memcmp(a, b, sizeof(a)) == 0);
	nbdc_close(e);
	memsrv_stop(s);
}

/* A reconnect whose handshake never ends (an NBD_REP_INFO every 200 ms,
 * each within the 5 s connect timeout): the request waiting for it fails
 * with EIO at its timeout (1.5 s, slack 1 s), not when the handshake
 * does (never); the handshake normal again, the connection comes back. */
static void test_handshake_endless_reconnect(void)
{
	struct memsrv *s = server(false, true);
	struct nbdc *e = client(s, false, 1, 1500, 0);
	uint8_t a[4096], b[4096];
	struct nbdc_stats st;
	unsigned c0, conns;
	int64_t t0, ms;
	int r;

	fill(a, sizeof(a), 22);
	CU_ASSERT_EQUAL(nbdc_pwrite(e, a, sizeof(a), 8192, 0), 0);
	memsrv_handshake_mode(s, MEMSRV_HS_ENDLESS_INFO, 200);
	c0 = memsrv_connections(s);
	nbdc_drop_connections(e);
	t0 = now_ms();
	do {
		nbdc_get_stats(e, &st);
		usleep(1000);
	} while (st.connections_up && now_ms() - t0 < 5000);
	CU_ASSERT_EQUAL_FATAL(st.connections_up, 0);
	t0 = now_ms();
	r = nbdc_pread(e, b, sizeof(b), 8192, 0);
	CU_ASSERT_EQUAL(r, -EIO);
	ms = now_ms() - t0;
	conns = memsrv_connections(s) - c0;
	printf("(%d after %" PRId64 " ms, %u handshakes) ", r, ms, conns);
	CU_ASSERT(ms >= 1400);
	CU_ASSERT(ms < 1500 + 1000);
	CU_ASSERT(conns >= 1 && conns <= 10);
	memsrv_handshake_mode(s, MEMSRV_HS_NORMAL, 0);
	wait_up(e, 1, 10000);
	CU_ASSERT_EQUAL(nbdc_pread(e, b, sizeof(b), 8192, 0), 0);
	CU_ASSERT(memcmp(a, b, sizeof(a)) == 0);
	nbdc_close(e);
	memsrv_stop(s);
}

/* The first attach against handshakes that do not end: one deadline for
 * all of it (connect_timeout, 800 ms here; slack 700 ms), however the
 * bytes trickle in: a greeting one byte every 300 ms (6 s in all), an
 * NBD_REP_INFO every 100 ms without end; endless replies as fast as the
 * server can send them break the handshake at the cap, at once. */
static void test_handshake_deadline(void)
{
	static const struct { int mode; unsigned ms; int err; } cases[] = {
		{ MEMSRV_HS_GREETING, 300, -ETIMEDOUT },
		{ MEMSRV_HS_ENDLESS_INFO, 100, -ETIMEDOUT },
		{ MEMSRV_HS_ENDLESS_INFO, 0, -EPROTO },
	};
	struct memsrv *s = server(false, true);
	char p[16];
	struct nbdc_opts o = { .host = "127.0.0.1", .port = p, .export = "disk",
			       .transport = NBDC_TCP, .connections = 1, .timeout_ms = 1000,
			       .connect_timeout_ms = 800 };
	struct nbdc *e = NULL;
	unsigned i;
	int64_t t0, ms;
	int r;

	snprintf(p, sizeof(p), "%u", memsrv_port(s));
	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		memsrv_handshake_mode(s, cases[i].mode, cases[i].ms);
		t0 = now_ms();
		r = nbdc_open(&o, &e);
		ms = now_ms() - t0;
		printf("(mode %d/%u ms: %d after %" PRId64 " ms) ", cases[i].mode, cases[i].ms, r,
		       ms);
		CU_ASSERT_EQUAL(r, cases[i].err);
		CU_ASSERT(ms < 800 + 700);
		if (cases[i].err == -ETIMEDOUT)
			CU_ASSERT(ms >= 700);
		if (r == 0)
			nbdc_close(e);
	}
	/* A normal handshake still works; its deadline is not what is tested
	 * here (valgrind or a busy host may take longer than 800 ms). */
	memsrv_handshake_mode(s, MEMSRV_HS_NORMAL, 0);
	o.connect_timeout_ms = 10000;
	CU_ASSERT_EQUAL_FATAL(nbdc_open(&o, &e), 0);
	nbdc_close(e);
	memsrv_stop(s);
}

/* --- SMC-R (TCP fallback on this host) and the control socket -------------- */

static int ctl_ask(const char *path, const char *cmd, char *out, size_t len)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	size_t got = 0;
	ssize_t n;
	int fd;

	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path);
	fd = socket(AF_UNIX, SOCK_STREAM, 0);
	if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof(sa))) {
		if (fd >= 0)
			close(fd);
		return -1;
	}
	if (write(fd, cmd, strlen(cmd)) < 0 || write(fd, "\n", 1) < 0) {
		close(fd);
		return -1;
	}
	while (got < len - 1 && (n = read(fd, out + got, len - 1 - got)) > 0)
		got += (size_t)n;
	out[got] = '\0';
	close(fd);
	return (int)got;
}

static void test_smcr_ctl(void)
{
	char dir[] = "/tmp/smcr-ctl-test.XXXXXX", path[256], *out = malloc(65536);
	struct memsrv *s;
	struct nbdc *e;
	struct nbdc_stats st;
	char port[16];
	struct nbdc_opts o = {
		.host = "127.0.0.1", .port = port, .export = "disk", .transport = NBDC_SMCR,
		.connections = 2, .timeout_ms = 5000, .ctl_name = "test-client",
		.backoff_min_ms = 20,
	};

	CU_ASSERT_PTR_NOT_NULL_FATAL(mkdtemp(dir));
	setenv("SMCR_CTL_DIR", dir, 1);
	/* A socket of a program that is gone is removed when one opens. */
	snprintf(path, sizeof(path), "%s/ghost.%d.sock", dir, 4194303);
	fclose(fopen(path, "w"));
	snprintf(path + strlen(dir), sizeof(path) - strlen(dir), "/alive.%d.sock", (int)getpid());
	fclose(fopen(path, "w"));
	s = server(true, true);
	snprintf(port, sizeof(port), "%u", memsrv_port(s));
	e = NULL;
	CU_ASSERT_EQUAL_FATAL(nbdc_open(&o, &e), 0);
	CU_ASSERT_PTR_NOT_NULL(nbdc_smcr_ctx(e));
	snprintf(path, sizeof(path), "%s/ghost.%d.sock", dir, 4194303);
	CU_ASSERT_EQUAL(access(path, F_OK), -1);
	snprintf(path, sizeof(path), "%s/alive.%d.sock", dir, (int)getpid());
	CU_ASSERT_EQUAL(access(path, F_OK), 0);
	unlink(path);
	check_io(s, e);
	snprintf(path, sizeof(path), "%s/test-client.%d.sock", dir, (int)getpid());
	CU_ASSERT(ctl_ask(path, "status-json", out, 65536) > 0);
	CU_ASSERT_PTR_NOT_NULL(strstr(out, "\"name\":\"test-client\""));
	CU_ASSERT_PTR_NOT_NULL(strstr(out, "\"sections\":{\"nbd\":{\"export\":\"disk\""));
	CU_ASSERT_PTR_NOT_NULL(strstr(out, "\"transport\":\"tcp-fallback\""));
	CU_ASSERT_PTR_NOT_NULL(strstr(out, "\"fallbacks\":2"));
	CU_ASSERT(ctl_ask(path, "status", out, 65536) > 0);
	CU_ASSERT_PTR_NOT_NULL(strstr(out, "test-client (pid"));
	CU_ASSERT_PTR_NOT_NULL(strstr(out, "[nbd]"));
	CU_ASSERT_PTR_NOT_NULL(strstr(out, "tcp-fallback"));
	CU_ASSERT(ctl_ask(path, "stats", out, 65536) > 0);
	CU_ASSERT_PTR_NOT_NULL(strstr(out, "fallbacks 2\n"));
	CU_ASSERT(ctl_ask(path, "fault fail-link=1", out, 65536) > 0);
	CU_ASSERT_PTR_NOT_NULL(strstr(out, "error:"));
	{
		/* Fault specs: well formed ones find no link here (-ENOENT),
		 * the rest are refused (-EINVAL). */
		static const char *const good[] = {
			"drop-link=1", "drop-link=2,for=500", "delay-link=1,ms=50",
			"delay-dev=rxe0,ms=5,for=100", "clear-link=1", "fail-dev=rxe0",
			"undrop-link=1", "undelay-dev=rxe1", "for=500 drop-link=255",
			"ms=200,delay-link=3",
		};
		static const char *const bad[] = {
			"drop-link=0", "drop-link=256", "drop-link=x", "delay-link=1",
			"drop-link=1,ms=5", "clear-link=1,for=5", "fail-link=1,for=5",
			"bogus-link=1", "drop-link=1,drop-link=2", "drop", "for=5",
			"drop-dev=", "drop-port=1", "drop-link=1x", "drop-link=-1",
			"drop-link=1,for=5x", "drop-link=1,for=", "drop-link=1,for=-5",
			"delay-link=1,ms=0", "delay-link=1,ms=4294967296",
			"drop-link=1,after=1s", "drop-link=1,every=x", "drop-link=1,count=",
			"undrop-link=1,for=5", "undelay-link=1,ms=5", "drop-link=1,bogus=1",
			/* longer than any device name */
			"drop-dev=rxe0123456789012345678901234567890123456789012345678901234567890",
		};
		char cmd[256];
		size_t i;

		for (i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
			CU_ASSERT_EQUAL(smcr_fault(nbdc_smcr_ctx(e), good[i]), -ENOENT);
			snprintf(cmd, sizeof(cmd), "fault %s", good[i]);
			CU_ASSERT(ctl_ask(path, cmd, out, 65536) > 0);
			CU_ASSERT_PTR_NOT_NULL(strstr(out, "error:"));
			CU_ASSERT_PTR_NOT_NULL(strstr(out, "no such link"));
		}
		CU_ASSERT_EQUAL(smcr_fault(nbdc_smcr_ctx(e), ""), -EINVAL);
		for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
			CU_ASSERT_EQUAL(smcr_fault(nbdc_smcr_ctx(e), bad[i]), -EINVAL);
			snprintf(cmd, sizeof(cmd), "fault %s", bad[i]);
			CU_ASSERT(ctl_ask(path, cmd, out, 65536) > 0);
			CU_ASSERT_PTR_NOT_NULL(strstr(out, strerror(EINVAL)));
		}
		/* A spec longer than smcr_fault() takes is refused, not cut. */
		snprintf(cmd, sizeof(cmd), "fault drop-link=1");
		while (strlen(cmd) < 160)
			strcat(cmd, ",for=1");
		CU_ASSERT(ctl_ask(path, cmd, out, 65536) > 0);
		CU_ASSERT_PTR_NOT_NULL(strstr(out, strerror(EINVAL)));
		CU_ASSERT(ctl_ask(path, "fault drop-link=1,after=60000", out, 65536) > 0);
		CU_ASSERT_PTR_NOT_NULL(strstr(out, "ok:"));
		CU_ASSERT(ctl_ask(path, "fault delay-dev=rxe0,ms=5,for=100,every=60000,count=2",
				  out, 65536) > 0);
		CU_ASSERT_PTR_NOT_NULL(strstr(out, "ok:"));
		CU_ASSERT(ctl_ask(path, "fault undrop-link=1,after=60000", out, 65536) > 0);
		CU_ASSERT_PTR_NOT_NULL(strstr(out, "ok:"));
		CU_ASSERT(ctl_ask(path, "stats", out, 65536) > 0);
		CU_ASSERT_PTR_NOT_NULL(strstr(out, "fault_held 0\n"));
		CU_ASSERT_PTR_NOT_NULL(strstr(out, "fault_held_recvs 0\n"));
	}
	CU_ASSERT(ctl_ask(path, "bogus", out, 65536) > 0);
	CU_ASSERT_PTR_NOT_NULL(strstr(out, "error: unknown command"));
	CU_ASSERT(ctl_ask(path, "nbd drop", out, 65536) > 0);
	CU_ASSERT_PTR_NOT_NULL(strstr(out, "ok: dropped 2"));
	usleep(100000);
	wait_up(e, 2, 5000);
	check_io(s, e);
	nbdc_get_stats(e, &st);
	CU_ASSERT_EQUAL(st.reconnects, 2);
	nbdc_close(e);
	CU_ASSERT_EQUAL(access(path, F_OK), -1);
	memsrv_stop(s);
	rmdir(dir);
	unsetenv("SMCR_CTL_DIR");
	free(out);
}

struct log_capture {
	int calls;
	enum smcr_log_level level;
	char msg[256];
};

static void capture_log(void *opaque, enum smcr_log_level level, const char *msg)
{
	struct log_capture *c = opaque;

	c->calls++;
	c->level = level;
	snprintf(c->msg, sizeof(c->msg), "%s", msg);
}

/* The application's log callback gets libsmcr's lines without a stamp, at
 * the level set; the programs' logger (applog.h) routes libsmcr's lines
 * into its own sink, and its stderr sink stamps lines in local time when
 * asked (smcrd's log file). */
static void test_log(void)
{
	struct log_capture c = { 0 };
	char path[] = "/tmp/smcr-log-test.XXXXXX", line[512], want[64];
	enum smcr_log_level old = smcr_log_get_level();
	int fd, saved;
	FILE *f;

	smcr_log_set_level(SMCR_LOG_INFO);
	smcr_log_set_fn(capture_log, &c);
	smcr_log(SMCR_LOG_WARN, "link %d failed", 2);
	CU_ASSERT_EQUAL(c.calls, 1);
	CU_ASSERT_EQUAL(c.level, SMCR_LOG_WARN);
	CU_ASSERT_STRING_EQUAL(c.msg, "link 2 failed");
	smcr_log(SMCR_LOG_DEBUG, "not shown");
	CU_ASSERT_EQUAL(c.calls, 1);

	/* Both libsmcr's lines and the program's, escaped, to its sink. */
	applog_set_fn(capture_log, &c);
	smcr_log(SMCR_LOG_ERR, "from libsmcr");
	CU_ASSERT_EQUAL(c.calls, 2);
	CU_ASSERT_EQUAL(c.level, SMCR_LOG_ERR);
	CU_ASSERT_STRING_EQUAL(c.msg, "from libsmcr");
	log_info("export '%s'", "a\nb");
	CU_ASSERT_EQUAL(c.calls, 3);
	CU_ASSERT_EQUAL(c.level, SMCR_LOG_INFO);
	CU_ASSERT_STRING_EQUAL(c.msg, "export 'a\\x0ab'");
	log_dbg("not shown");
	CU_ASSERT_EQUAL(c.calls, 3);
	applog_set_fn(NULL, NULL);

	fd = mkstemp(path);
	CU_ASSERT_FATAL(fd >= 0);
	fflush(stderr);
	saved = dup(STDERR_FILENO);
	dup2(fd, STDERR_FILENO);
	applog_set_stamp(APPLOG_STAMP_LOCAL);
	log_info("stamped");
	smcr_log(SMCR_LOG_INFO, "stamped too");
	applog_set_stamp(APPLOG_STAMP_EPOCH);
	fflush(stderr);
	dup2(saved, STDERR_FILENO);
	close(saved);
	smcr_log_set_fn(NULL, NULL);
	CU_ASSERT_EQUAL(c.calls, 3);
	f = fdopen(fd, "r");
	rewind(f);
	/* "2026-11-23 20:10:01.123 smcr[PID] info: stamped" */
	CU_ASSERT_PTR_NOT_NULL_FATAL(fgets(line, sizeof(line), f));
	CU_ASSERT(strlen(line) > 24 && line[4] == '-' && line[7] == '-' && line[10] == ' ' &&
		  line[13] == ':' && line[16] == ':' && line[19] == '.' && line[23] == ' ');
	snprintf(want, sizeof(want), " smcr[%ld] info: stamped\n", (long)getpid());
	CU_ASSERT_PTR_NOT_NULL(strstr(line, want));
	CU_ASSERT_PTR_NOT_NULL_FATAL(fgets(line, sizeof(line), f));
	CU_ASSERT(strlen(line) > 24 && line[4] == '-' && line[19] == '.');
	snprintf(want, sizeof(want), " smcr[%ld] info: stamped too\n", (long)getpid());
	CU_ASSERT_PTR_NOT_NULL(strstr(line, want));
	fclose(f);
	unlink(path);
	smcr_log_set_level(old);
}

/* smcrctl's JSON reader (json-c underneath): what a forged control socket
 * could send must give an error, never a crash (a cut-short \u escape read
 * and wrote past the end with the hand-written parser). */
static void test_json(void)
{
	static const char *const bad[] = {
		"", "{", "[1,", "\"ab", "\"\\u12", "\"\\u", "\"\\ud800", "{\"a\":}",
		"{\"a\":1} x", "[1] [2]", "nul", "{\"a\" 1}", "\"\\x\"",
	};
	char err[128], text[64], deep[2 * 200 + 1];
	const struct json *c;
	struct json *j;
	unsigned i;

	j = json_parse(" {\"n\":18446744073709551615,\"s\":\"a\\u00e9\\n\",\"b\":true,"
		       "\"z\":null,\"c\":[3,4],\"o\":{\"x\":[]}} \n", err, sizeof(err));
	CU_ASSERT_PTR_NOT_NULL_FATAL(j);
	CU_ASSERT_EQUAL(json_get_u64(j, "n", 0), UINT64_MAX);
	CU_ASSERT_STRING_EQUAL(json_get_str(j, "s", ""), "a\xc3\xa9\n");
	CU_ASSERT(json_get_bool(j, "b", false));
	CU_ASSERT_EQUAL(json_get(j, "z")->type, JSON_NULL);
	c = json_get(j, "c");
	CU_ASSERT(json_is_scalar(c));
	json_scalar_text(c, text, sizeof(text));
	CU_ASSERT_STRING_EQUAL(text, "3:4");
	CU_ASSERT_EQUAL(json_count(json_get(json_get(j, "o"), "x")), 0);
	CU_ASSERT_EQUAL(json_count(j), 6);
	CU_ASSERT_PTR_NULL(json_get(j, "missing"));
	json_free(j);

	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		j = json_parse(bad[i], err, sizeof(err));
		CU_ASSERT_PTR_NULL(j);
		CU_ASSERT(err[0] != '\0');
		json_free(j);
	}
	/* nesting deeper than json-c allows: an error, not a stack overflow */
	memset(deep, '[', 200);
	memset(deep + 200, ']', 200);
	deep[400] = '\0';
	j = json_parse(deep, err, sizeof(err));
	CU_ASSERT_PTR_NULL(j);
	json_free(j);
}

/* The status dumps' appender says how long what did not fit was, so that
 * the caller can ask again with a larger buffer; the programs' JSON (json-c)
 * escapes what it must and leaves "/" as is, as libsmcr's does. */
static void test_strbuf(void)
{
	struct json_object *o = json_object_new_object();
	char buf[128];
	size_t off;
	int n;

	off = strbuf_out(buf, sizeof(buf), 0, "%s=%d,", "a", 1);
	CU_ASSERT_STRING_EQUAL(buf, "a=1,");
	CU_ASSERT_EQUAL(off, 4);
	off = strbuf_out(buf, 8, 0, "%s", "0123456789");
	CU_ASSERT_EQUAL(off, 10);		/* too small: says how much */
	CU_ASSERT_EQUAL(strbuf_out(buf, 8, off, "more"), off);

	jsonw_str(o, "s", "q\"b\\c\n\x01/d");
	jsonw_u64(o, "n", UINT64_MAX);
	jsonw_bool(o, "b", false);
	jsonw_str(o, "z", NULL);
	json_object_get(o);
	CU_ASSERT_EQUAL(jsonw_dump(o, buf, 10), -ENOSPC);
	n = jsonw_dump(o, buf, sizeof(buf));
	CU_ASSERT_EQUAL(n, (int)strlen(buf));
	CU_ASSERT_STRING_EQUAL(buf, "{\"s\":\"q\\\"b\\\\c\\n\\u0001/d\",\"n\":18446744073709551615,"
			       "\"b\":false,\"z\":\"\"}");
}

static CU_TestInfo client_tests[] = {
	{ "URIs", test_uri },
	{ "the clients' settings table", test_settings },
	{ "server lists", test_servers_parse },
	{ "I/O over TCP, 4 connections", test_io_tcp },
	{ "no multi-conn: one connection", test_no_multi_conn },
	{ "read-only export", test_read_only },
	{ "unknown export, no server", test_unknown_export },
	{ "asynchronous requests", test_async },
	{ "plugged submissions, turn_end after completions", test_plug_turn_end },
	{ "a watched descriptor: requests of a connection's own thread", test_watch },
	{ "server lost and back: resend", test_reconnect },
	{ "a list of servers: the next one in turn", test_servers },
	{ "a list of servers: connections gather", test_servers_gather },
	{ "first_up: the other connections come up in their threads", test_first_up },
	{ "timeout: errors, then back", test_timeout },
	{ "connect to a full backlog: bounded", test_connect_timeout },
	{ "refused reconnects: back soon after the server", test_reconnect_refused },
	{ "ESHUTDOWN reply: resend", test_eshutdown },
	{ "connections dropped mid-stream", test_drop_mid_stream },
	{ "dead connection (io timeout)", test_io_timeout },
	{ "READ ranges: merged, overlaps refused, capped", test_read_spans },
	{ "READ replies: legal shapes read back, overlaps and gaps fail", test_read_shapes },
	{ "READ with a sink: every byte at its place, a sink's error fails it", test_read_sink },
	{ "WRITE with a source: its bytes reach the disk, a source's error fails it",
	  test_write_source },
	{ "ESHUTDOWN to every request: EIO at the timeout, reconnects back off",
	  test_eshutdown_always },
	{ "a reconnect's handshake that never ends: EIO at the timeout",
	  test_handshake_endless_reconnect },
	{ "handshakes that trickle: one deadline, replies capped", test_handshake_deadline },
	{ "SMC-R fallback and control socket", test_smcr_ctl },
	{ "log callback and stamps", test_log },
	{ "JSON reader", test_json },
	{ "status appender", test_strbuf },
	CU_TEST_INFO_NULL,
};

static const struct unit_suite suites[] = {
	{ .name = "client", .tests = client_tests },
	{ .name = NULL },
};

int main(int argc, char **argv)
{
	return unit_main(argc, argv, suites);
}
