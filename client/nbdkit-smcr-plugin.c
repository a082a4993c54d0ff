/* SPDX-License-Identifier: BSD-3-Clause */
/* smcrbd: nbdkit plugin that serves a remote smcrd export, reached over
 * SMC-R (CLC first, TCP fallback) or plain TCP, through the client library
 * (client/nbd-conn.c): several connections, requests of all nbdkit
 * threads in parallel, reconnect with resend when the server or the link
 * group goes away.
 *
 *   nbdkit smcr server=HOST[:PORT][,HOST[:PORT]]... export=NAME [connections=N] [timeout=S]
 *               [transport=smcr|tcp] [io-timeout=S] [ctl=NAME|off]
 *               [tls=off|on|require] [tls-certificates=DIR] [tls-psk-file=FILE]
 *               [tls-username=NAME] [tls-hostname=NAME] [tls-verify-peer=BOOL]
 *   nbdkit smcr uri=smcr://HOST[:PORT]/NAME ...   (or nbd://, nbds://,
 *                                                  nbd+unix://, nbds+unix://)
 *
 * One client library instance serves every nbdkit client: it is opened in
 * .after_fork (nbdkit may fork into the background first; threads do not
 * survive fork) and closed in .cleanup.  See nbdkit-smcr-plugin(1). */
#include <config.h>

#define NBDKIT_API_VERSION 2
#include <nbdkit-plugin.h>

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "applog.h"
#include "nbd-conn.h"
#include "nbdc-settings.h"

#define THREAD_MODEL NBDKIT_THREAD_MODEL_PARALLEL

static char *cfg_server, *cfg_export, *cfg_uri;
/* The clients' shared settings (nbdc-settings.h): connections, timeouts,
 * transport, ctl, TLS. */
static struct nbdc_settings cfg;
static bool cfg_ready;
static struct nbdc *exp_;

static void smcr_unload(void)
{
	applog_set_fn(NULL, NULL);
	free(cfg_server);
	free(cfg_export);
	free(cfg_uri);
	nbdc_settings_free(&cfg);
}

static int set_str(char **dst, const char *v)
{
	free(*dst);
	*dst = strdup(v);
	if (!*dst) {
		nbdkit_error("out of memory");
		return -1;
	}
	return 0;
}

static int smcr_config(const char *key, const char *value)
{
	char err[256];
	int id;

	if (!cfg_ready) {
		if (nbdc_settings_init(&cfg) < 0) {
			nbdkit_error("out of memory");
			return -1;
		}
		cfg_ready = true;
	}
	if (!strcmp(key, "server")) {
		if (cfg_server) {
			nbdkit_error("server= given twice: list the servers in one, "
				     "server=HOST[:PORT],HOST[:PORT]");
			return -1;
		}
		return set_str(&cfg_server, value);
	}
	if (!strcmp(key, "export"))
		return set_str(&cfg_export, value);
	if (!strcmp(key, "uri"))
		return set_str(&cfg_uri, value);
	id = nbdc_setting_find(key, NBDC_IN_PLUGIN);
	if (id >= 0) {
		if (nbdc_setting_set(&cfg, id, value, err, sizeof(err)) < 0) {
			nbdkit_error("%s", err);
			return -1;
		}
		return 0;
	}
	nbdkit_error("unknown parameter '%s'", key);
	return -1;
}

/* Stamped as libsmcr's own stderr lines are (nbdkit's debug lines are not):
 * the time of the event, not of whoever reads the log. */
static void log_to_nbdkit(void *opaque, enum smcr_log_level level, const char *msg)
{
	static const char *const names[] = { "error", "warning", "info", "debug" };
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	/* Errors are shown without -v too (an untrusted control directory:
	 * no control socket). */
	if (level == SMCR_LOG_ERR)
		nbdkit_error("smcr[%ld.%03ld] %s: %s", (long)ts.tv_sec, ts.tv_nsec / 1000000L,
			     names[level], msg);
	else
		nbdkit_debug("smcr[%ld.%03ld] %s: %s", (long)ts.tv_sec, ts.tv_nsec / 1000000L,
			     names[level], msg);
}

static int smcr_config_complete(void)
{
	if (!cfg_ready && nbdc_settings_init(&cfg) == 0)
		cfg_ready = true;
	if (!cfg_ready) {
		nbdkit_error("out of memory");
		return -1;
	}
	if (!cfg_server && !cfg_uri) {
		nbdkit_error("server=HOST[:PORT] or uri=smcr://HOST[:PORT]/EXPORT is required");
		return -1;
	}
	if (cfg_server && cfg_uri) {
		nbdkit_error("give server= or uri=, not both");
		return -1;
	}
	return 0;
}

/* The connection options from the parameters (the servers in sv). */
static int make_opts(struct nbdc_opts *o, struct nbdc_uri *u,
		     struct nbdc_server sv[NBDC_MAX_SERVERS])
{
	unsigned n = 0;
	int r;

	if (cfg_uri) {
		r = nbdc_uri_parse(cfg_uri, u);
		if (r < 0) {
			char label[300], msg[600];

			snprintf(label, sizeof(label), "uri=%.290s", cfg_uri);
			nbdc_uri_strerror(label, u, r, msg, sizeof(msg));
			nbdkit_error("%s", msg);
			return -1;
		}
		if (cfg.given[NBDC_S_TRANSPORT] && u->transport == NBDC_UNIX) {
			nbdkit_error("uri=%s: transport= is for smcr:// and nbd:// URIs", cfg_uri);
			return -1;
		}
		nbdc_opts_from_uri(o, u);
		nbdc_settings_apply(&cfg, o);
		return 0;
	}
	/* TLS is NBD over TCP's (smcrd offers none on its SMC-R port). */
	nbdc_settings_apply(&cfg, o);
	if (!cfg.given[NBDC_S_TRANSPORT])
		o->transport = o->tls != NBDC_TLS_OFF ? NBDC_TCP : NBDC_SMCR;
	r = nbdc_servers_parse(cfg_server, o->transport == NBDC_TCP ? NBD_DEFAULT_PORT :
			       NBDC_SMCR_PORT, sv, NBDC_MAX_SERVERS, &n);
	if (r == -E2BIG) {
		nbdkit_error("server=%s: at most %d servers", cfg_server, NBDC_MAX_SERVERS);
		return -1;
	}
	if (r < 0) {
		nbdkit_error("server=%s: expected HOST, HOST:PORT or [IPV6]:PORT, "
			     "or a comma list of them", cfg_server);
		return -1;
	}
	o->host = sv[0].host;
	o->port = sv[0].port;
	o->servers = sv + 1;
	o->nservers = n - 1;
	o->export = cfg_export ? cfg_export : "";
	return 0;
}

static int attach(struct nbdc_opts *o, struct nbdc **out)
{
	char msg[512];
	int r = nbdc_open(o, out);

	if (r < 0) {
		nbdc_strerror(o, r, msg, sizeof(msg));
		nbdkit_error("%s", msg);
		return -1;
	}
	return 0;
}

/* Checks the parameters and the export before nbdkit forks, so that
 * errors reach the terminal and nbdkit exits non-zero: one connection,
 * closed again (its thread does not survive a fork). */
static int smcr_get_ready(void)
{
	struct nbdc_opts o = { 0 };
	struct nbdc_server sv[NBDC_MAX_SERVERS];
	struct nbdc *probe;
	struct nbdc_uri u;

	if (make_opts(&o, &u, sv) < 0)
		return -1;
	o.connections = 1;
	o.ctl_name = NULL;
	applog_set_fn(log_to_nbdkit, NULL);
	if (attach(&o, &probe) < 0)
		return -1;
	nbdc_close(probe);
	return 0;
}

static int smcr_after_fork(void)
{
	struct nbdc_opts o = { .ctl_name = "nbdkit-smcr" };
	struct nbdc_server sv[NBDC_MAX_SERVERS];
	struct nbdc_uri u;

	/* libsmcr's lines go to nbdkit's debug log: -v shows them. */
	applog_set_fn(log_to_nbdkit, NULL);
	if (make_opts(&o, &u, sv) < 0 ||
	    attach(&o, &exp_) < 0)
		return -1;
	nbdkit_debug("smcr: %u connection(s), %" PRIu64 " bytes", nbdc_connections(exp_),
		     nbdc_size(exp_));
	return 0;
}

static void smcr_cleanup(void)
{
	nbdc_close(exp_);
	exp_ = NULL;
}

static void *smcr_open(int readonly)
{
	if (!exp_) {
		nbdkit_error("not connected");
		return NULL;
	}
	return exp_;
}

static void smcr_close_handle(void *h)
{
}

static int64_t smcr_get_size(void *h)
{
	return (int64_t)nbdc_size(h);
}

static bool has(void *h, uint16_t flag)
{
	return (nbdc_flags(h) & flag) != 0;
}

static int smcr_can_write(void *h)
{
	return !nbdc_read_only(h);
}

static int smcr_can_flush(void *h)
{
	return has(h, NBD_FLAG_SEND_FLUSH);
}

static int smcr_is_rotational(void *h)
{
	return has(h, NBD_FLAG_ROTATIONAL);
}

static int smcr_can_trim(void *h)
{
	return has(h, NBD_FLAG_SEND_TRIM);
}

static int smcr_can_zero(void *h)
{
	return has(h, NBD_FLAG_SEND_WRITE_ZEROES);
}

static int smcr_can_fast_zero(void *h)
{
	return has(h, NBD_FLAG_SEND_FAST_ZERO);
}

static int smcr_can_fua(void *h)
{
	if (has(h, NBD_FLAG_SEND_FUA))
		return NBDKIT_FUA_NATIVE;
	return has(h, NBD_FLAG_SEND_FLUSH) ? NBDKIT_FUA_EMULATE : NBDKIT_FUA_NONE;
}

/* Every nbdkit client shares the same connections: a flush on any of
 * them covers writes completed on all (and with several connections the
 * server itself promised multi-conn consistency). */
static int smcr_can_multi_conn(void *h)
{
	return 1;
}

static int smcr_can_cache(void *h)
{
	return has(h, NBD_FLAG_SEND_CACHE) ? NBDKIT_CACHE_NATIVE : NBDKIT_CACHE_NONE;
}

static int smcr_block_size(void *h, uint32_t *minimum, uint32_t *preferred,
			   uint32_t *maximum)
{
	uint32_t mn, pr, mx;

	nbdc_block_size(h, &mn, &pr, &mx);
	if (!mn) {
		*minimum = *preferred = *maximum = 0;
		return 0;
	}
	*minimum = mn;
	*preferred = pr < mn ? mn : pr;
	*maximum = 0xffffffff;	/* nbdc splits larger requests */
	if (*preferred < 512)
		*preferred = 512;
	if (*preferred > 32u << 20)
		*preferred = 32u << 20;
	return 0;
}

static int result(int r)
{
	if (r >= 0)
		return 0;
	nbdkit_set_error(r == -ENOTSUP ? EOPNOTSUPP : -r);
	return -1;
}

static uint16_t fua(uint32_t flags)
{
	return (flags & NBDKIT_FLAG_FUA) ? NBD_CMD_FLAG_FUA : 0;
}

static int smcr_pread(void *h, void *buf, uint32_t count, uint64_t offset, uint32_t flags)
{
	return result(nbdc_pread(h, buf, count, offset, 0));
}

static int smcr_pwrite(void *h, const void *buf, uint32_t count, uint64_t offset,
		       uint32_t flags)
{
	return result(nbdc_pwrite(h, buf, count, offset, fua(flags)));
}

static int smcr_flush(void *h, uint32_t flags)
{
	return result(nbdc_flush(h, 0));
}

static int smcr_trim(void *h, uint32_t count, uint64_t offset, uint32_t flags)
{
	return result(nbdc_trim(h, count, offset, fua(flags)));
}

static int smcr_zero(void *h, uint32_t count, uint64_t offset, uint32_t flags)
{
	uint16_t f = fua(flags);

	if (!(flags & NBDKIT_FLAG_MAY_TRIM))
		f |= NBD_CMD_FLAG_NO_HOLE;
	if (flags & NBDKIT_FLAG_FAST_ZERO)
		f |= NBD_CMD_FLAG_FAST_ZERO;
	return result(nbdc_zero(h, count, offset, f));
}

static int smcr_cache(void *h, uint32_t count, uint64_t offset, uint32_t flags)
{
	return result(nbdc_cache(h, count, offset, 0));
}

static int smcr_can_extents(void *h)
{
	return nbdc_can_block_status(h);
}

/* base:allocation from smcrd, as nbdkit's extents (holes read as zeroes
 * there: the two flags have the same meaning). */
static int smcr_extents(void *h, uint32_t count, uint64_t offset, uint32_t flags,
			struct nbdkit_extents *extents)
{
	struct nbd_extent ext[128];
	unsigned i, n;
	int r;

	r = nbdc_block_status(h, count, offset,
			      (flags & NBDKIT_FLAG_REQ_ONE) ? NBD_CMD_FLAG_REQ_ONE : 0, ext,
			      sizeof(ext) / sizeof(ext[0]), &n);
	if (r == -ENOTSUP)	/* a reconnect found a server without it */
		return nbdkit_add_extent(extents, offset, count, 0);
	if (r < 0)
		return result(r);
	for (i = 0; i < n; i++) {
		uint32_t type = ((ext[i].flags & NBD_STATE_HOLE) ? NBDKIT_EXTENT_HOLE : 0) |
				((ext[i].flags & NBD_STATE_ZERO) ? NBDKIT_EXTENT_ZERO : 0);

		if (nbdkit_add_extent(extents, offset, ext[i].length, type) == -1)
			return -1;
		offset += ext[i].length;
	}
	return 0;
}

static void smcr_dump_plugin(void)
{
	printf("smcr_default_port=%u\n", NBDC_SMCR_PORT);
	printf("smcr_tcp_default_port=%u\n", NBD_DEFAULT_PORT);
	printf("smcr_transports=smcr,tcp,unix\n");
}

/* The parameters for nbdkit smcr --help: the address ones, then the
 * clients' settings table (nbdc_settings[]) with its defaults. */
static char config_help[4096] =
	"server=HOST[:PORT]     smcrd to attach (port: 10810 smcr, 10809 tcp); a comma\n"
	"                       list HOST[:PORT],HOST[:PORT]: gateways of one export,\n"
	"                       the next one taken when one is lost\n"
	"export=NAME            export name (default \"\")\n"
	"uri=smcr://HOST[:PORT]/NAME, nbd://..., nbds://... or\n"
	"    nbd+unix:///NAME?socket=PATH, nbds+unix://...  instead of server=, export=\n"
	"The connection settings (the same names in smcr-fuse and smcr-attach; a tls-*\n"
	"one implies tls=on):\n";

__attribute__((constructor)) static void make_config_help(void)
{
	struct nbdc_settings v;
	size_t n = strlen(config_help);
	FILE *f;

	if (nbdc_settings_init(&v) < 0)
		return;
	nbdc_setting_default(&v, NBDC_S_CTL, "nbdkit-smcr");
	f = fmemopen(config_help + n, sizeof(config_help) - n, "w");
	if (f) {
		nbdc_settings_help(f, &v, NBDC_IN_PLUGIN);
		fclose(f);
	}
	nbdc_settings_free(&v);
	/* nbdkit adds a newline of its own */
	n = strlen(config_help);
	if (n && config_help[n - 1] == '\n')
		config_help[n - 1] = '\0';
}

static struct nbdkit_plugin plugin = {
	.name = "smcr",
	.longname = "smcrbd SMC-R NBD client",
	.version = PACKAGE_VERSION,
	.description = "attach a remote smcrd export over SMC-R (or TCP)",
	.unload = smcr_unload,
	.config = smcr_config,
	.config_complete = smcr_config_complete,
	.config_help = config_help,
	.magic_config_key = "server",
	.get_ready = smcr_get_ready,
	.after_fork = smcr_after_fork,
	.cleanup = smcr_cleanup,
	.open = smcr_open,
	.close = smcr_close_handle,
	.get_size = smcr_get_size,
	.can_write = smcr_can_write,
	.can_flush = smcr_can_flush,
	.is_rotational = smcr_is_rotational,
	.can_trim = smcr_can_trim,
	.can_zero = smcr_can_zero,
	.can_fast_zero = smcr_can_fast_zero,
	.can_fua = smcr_can_fua,
	.can_multi_conn = smcr_can_multi_conn,
	.can_cache = smcr_can_cache,
	.block_size = smcr_block_size,
	.pread = smcr_pread,
	.pwrite = smcr_pwrite,
	.flush = smcr_flush,
	.trim = smcr_trim,
	.zero = smcr_zero,
	.cache = smcr_cache,
	.can_extents = smcr_can_extents,
	.extents = smcr_extents,
	.dump_plugin = smcr_dump_plugin,
	.errno_is_preserved = 0,
};

NBDKIT_REGISTER_PLUGIN(plugin)
