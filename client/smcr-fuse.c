/* SPDX-License-Identifier: BSD-3-Clause */
/* smcrbd: smcr-fuse: a remote smcrd export as one file in a FUSE mount.
 *
 *   smcr-fuse [options] URI MOUNTPOINT
 *
 * URI is smcr://HOST[:PORT]/EXPORT (SMC-R, TCP fallback) or
 * nbd://HOST[:PORT]/EXPORT (plain TCP).  The mount holds one regular file,
 * named after the export, whose size is the export's.  read and write map
 * to NBD READ and WRITE, fsync to FLUSH, fallocate(PUNCH_HOLE) to
 * WRITE_ZEROES that may deallocate (a trim that reads back as zeros),
 * fallocate(ZERO_RANGE) to WRITE_ZEROES with NO_HOLE.  The FUSE loop is
 * multithreaded and the client library keeps several connections
 * (reconnecting when the server or the link group goes away).  See
 * smcr-fuse(1). */
#include <config.h>

#define FUSE_USE_VERSION 312
#include <fuse.h>
#include <fuse_lowlevel.h>

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <linux/falloc.h>
#include <sys/stat.h>
#include <sys/statvfs.h>

#include "applog.h"
#include "nbd-conn.h"
#include "nbdc-settings.h"

/* smcr-fuse's own options; the connection settings are the clients'
 * table (nbdc-settings.h), taken out of argv before FUSE sees it. */
struct options {
	char *uri;
	char *servers;
	char *name;
	int help;
	int version;
	int nonopts;
};

static struct options opt;
static struct nbdc_settings set;
static struct nbdc *exp_;
static char fname[NAME_MAX + 2];	/* "/" + name */
static struct nbdc_opts nopts;
static struct nbdc_server more[NBDC_MAX_SERVERS - 1];
static time_t mount_time;
static uid_t uid;
static gid_t gid;

#define OPT(t, p) { t, offsetof(struct options, p), 1 }
static const struct fuse_opt option_spec[] = {
	OPT("-S %s", servers),
	OPT("--servers=%s", servers),
	OPT("-n %s", name),
	OPT("--name=%s", name),
	OPT("-h", help),
	OPT("--help", help),
	OPT("-V", version),
	OPT("--version", version),
	FUSE_OPT_END
};

/* The first non-option argument is the URI (ours); the mountpoint is
 * left for fuse_parse_cmdline. */
static int opt_proc(void *data, const char *arg, int key, struct fuse_args *outargs)
{
	struct options *o = data;

	if (key == FUSE_OPT_KEY_NONOPT && o->nonopts++ == 0) {
		o->uri = strdup(arg);
		return 0;
	}
	return 1;
}

#define TRY_HELP "Try 'smcr-fuse --help' for more information.\n"

static void usage(const char *prog)
{
	printf("Usage: %s [OPTION]... URI MOUNTPOINT\n"
	       "Shows a remote smcrd export as one file in a FUSE mount.\n"
	       "\n"
	       "URI: smcr://HOST[:PORT]/EXPORT (SMC-R, TCP fallback; port %u)\n"
	       "     nbd://HOST[:PORT]/EXPORT  (plain NBD over TCP; port %u)\n"
	       "     nbds://[USER@]HOST[:PORT]/EXPORT[?tls-certificates=DIR...]\n"
	       "                               (NBD over TCP with TLS, as libnbd's)\n"
	       "     nbd+unix:///EXPORT?socket=PATH  (NBD on a Unix socket; smcrd -U)\n"
	       "     nbds+unix://[USER@]/EXPORT?socket=PATH[&tls-...]  (the same, TLS)\n"
	       "\n"
	       "  -S, --servers=HOST[:PORT],...  more servers of the same export (gateways\n"
	       "                        in front of one image), tried in turn after the\n"
	       "                        URI's when a server is lost (same transport)\n"
	       "  -n, --name=FILE       name of the file in the mount (the export name)\n",
	       prog, NBDC_SMCR_PORT, NBD_DEFAULT_PORT);
	printf("Connection settings (the same names in nbdkit-smcr-plugin and smcr-attach;\n"
	       "a tls-* one implies --tls=on):\n");
	nbdc_settings_help(stdout, &set, NBDC_IN_FUSE);
	printf("FUSE:\n"
	       "  -f                    stay in the foreground\n"
	       "  -s                    single-threaded FUSE loop\n"
	       "  -d                    FUSE debug output (implies -f)\n"
	       "  -o OPT[,OPT...]       FUSE mount options (e.g. allow_other, direct_io)\n"
	       "  -h, --help            this text\n"
	       "  -V, --version         version\n"
	       "\n"
	       "Unmount with fusermount3 -u MOUNTPOINT, or send SIGTERM.  See smcr-fuse(1).\n");
}

/* --- file system ------------------------------------------------------------ */

static bool is_file(const char *path)
{
	return !strcmp(path, fname);
}

static void *sf_init(struct fuse_conn_info *conn, struct fuse_config *cfg)
{
	cfg->attr_timeout = 60;
	cfg->entry_timeout = 60;
	cfg->negative_timeout = 60;
	if (conn->capable & FUSE_CAP_SPLICE_READ)
		conn->want &= ~FUSE_CAP_SPLICE_READ;
	conn->max_write = 1u << 20;
	conn->max_readahead = 1u << 20;
	return NULL;
}

static int sf_getattr(const char *path, struct stat *st, struct fuse_file_info *fi)
{
	bool ro = nbdc_read_only(exp_);

	memset(st, 0, sizeof(*st));
	st->st_uid = uid;
	st->st_gid = gid;
	st->st_atime = st->st_mtime = st->st_ctime = mount_time;
	if (!strcmp(path, "/")) {
		st->st_mode = S_IFDIR | 0755;
		st->st_nlink = 2;
		return 0;
	}
	if (!is_file(path))
		return -ENOENT;
	st->st_mode = S_IFREG | (ro ? 0444 : 0644);
	st->st_nlink = 1;
	st->st_size = (off_t)nbdc_size(exp_);
	st->st_blksize = 4096;
	st->st_blocks = (blkcnt_t)((nbdc_size(exp_) + 511) / 512);
	return 0;
}

static int sf_readdir(const char *path, void *buf, fuse_fill_dir_t fill, off_t off,
		      struct fuse_file_info *fi, enum fuse_readdir_flags flags)
{
	if (strcmp(path, "/"))
		return -ENOTDIR;
	fill(buf, ".", NULL, 0, 0);
	fill(buf, "..", NULL, 0, 0);
	fill(buf, fname + 1, NULL, 0, 0);
	return 0;
}

static int sf_open(const char *path, struct fuse_file_info *fi)
{
	if (!is_file(path))
		return -ENOENT;
	if ((fi->flags & O_ACCMODE) != O_RDONLY && nbdc_read_only(exp_))
		return -EROFS;
	/* Atomic O_TRUNC: the size cannot change (see sf_truncate). */
	if ((fi->flags & O_TRUNC) && nbdc_size(exp_))
		return -EPERM;
	return 0;
}

static int sf_truncate(const char *path, off_t size, struct fuse_file_info *fi)
{
	if (!is_file(path))
		return -ENOENT;
	/* The size is the export's: it cannot change (use conv=notrunc). */
	return (uint64_t)size == nbdc_size(exp_) ? 0 : -EPERM;
}

static int sf_read(const char *path, char *buf, size_t size, off_t off,
		   struct fuse_file_info *fi)
{
	uint64_t dev = nbdc_size(exp_);
	int r;

	if (off < 0)
		return -EINVAL;
	if ((uint64_t)off >= dev)
		return 0;
	if (size > dev - (uint64_t)off)
		size = (size_t)(dev - (uint64_t)off);
	r = nbdc_pread(exp_, buf, size, (uint64_t)off, 0);
	return r < 0 ? r : (int)size;
}

static int sf_write(const char *path, const char *buf, size_t size, off_t off,
		    struct fuse_file_info *fi)
{
	uint64_t dev = nbdc_size(exp_);
	int r;

	if (off < 0)
		return -EINVAL;
	if ((uint64_t)off >= dev)
		return -ENOSPC;
	if (size > dev - (uint64_t)off)
		size = (size_t)(dev - (uint64_t)off);
	r = nbdc_pwrite(exp_, buf, size, (uint64_t)off, 0);
	return r < 0 ? r : (int)size;
}

static int sf_fsync(const char *path, int datasync, struct fuse_file_info *fi)
{
	if (nbdc_read_only(exp_) || !(nbdc_flags(exp_) & NBD_FLAG_SEND_FLUSH))
		return 0;
	return nbdc_flush(exp_, 0);
}

static int sf_flush(const char *path, struct fuse_file_info *fi)
{
	return 0;
}

static int sf_fallocate(const char *path, int mode, off_t off, off_t len,
			struct fuse_file_info *fi)
{
	uint64_t dev = nbdc_size(exp_), end;
	uint16_t flags;

	if (!is_file(path))
		return -ENOENT;
	if (off < 0 || len <= 0)
		return -EINVAL;
	end = (uint64_t)off + (uint64_t)len;
	if (!(mode & (FALLOC_FL_PUNCH_HOLE | FALLOC_FL_ZERO_RANGE))) {
		/* Plain allocation: everything up to the size exists. */
		if (mode & ~FALLOC_FL_KEEP_SIZE)
			return -EOPNOTSUPP;
		return end <= dev || (mode & FALLOC_FL_KEEP_SIZE) ? 0 : -ENOSPC;
	}
	if (mode & ~(FALLOC_FL_PUNCH_HOLE | FALLOC_FL_ZERO_RANGE | FALLOC_FL_KEEP_SIZE))
		return -EOPNOTSUPP;
	if (nbdc_read_only(exp_))
		return -EROFS;
	if ((uint64_t)off >= dev)
		return 0;
	if (end > dev)
		end = dev;
	if (!(nbdc_flags(exp_) & NBD_FLAG_SEND_WRITE_ZEROES))
		return -EOPNOTSUPP;
	/* PUNCH_HOLE must read back as zeros, which NBD TRIM does not
	 * promise: WRITE_ZEROES without NO_HOLE lets the server deallocate
	 * (smcrd punches a hole) and guarantees the zeros. */
	flags = (mode & FALLOC_FL_PUNCH_HOLE) ? 0 : NBD_CMD_FLAG_NO_HOLE;
	return nbdc_zero(exp_, end - (uint64_t)off, (uint64_t)off, flags);
}

static int sf_statfs(const char *path, struct statvfs *st)
{
	memset(st, 0, sizeof(*st));
	st->f_bsize = st->f_frsize = 4096;
	st->f_blocks = (fsblkcnt_t)((nbdc_size(exp_) + 4095) / 4096);
	st->f_files = 1;
	st->f_namemax = NAME_MAX;
	if (nbdc_read_only(exp_))
		st->f_flag |= ST_RDONLY;
	return 0;
}

static const struct fuse_operations ops = {
	.init = sf_init,
	.getattr = sf_getattr,
	.readdir = sf_readdir,
	.open = sf_open,
	.truncate = sf_truncate,
	.read = sf_read,
	.write = sf_write,
	.fsync = sf_fsync,
	.flush = sf_flush,
	.fallocate = sf_fallocate,
	.statfs = sf_statfs,
};

/* --- main --------------------------------------------------------------------- */

static int connect_export(void)
{
	struct nbdc_opts o = nopts;
	struct nbdc_uri u;
	char msg[512];
	int r = nbdc_uri_parse(opt.uri, &u);

	if (r == 0) {
		nbdc_opts_from_uri(&o, &u);
		nbdc_settings_apply(&set, &o);
		o.servers = more;
		r = nbdc_open(&o, &exp_);
	}
	if (r < 0) {
		nbdc_strerror(&o, r, msg, sizeof(msg));
		fprintf(stderr, "smcr-fuse: %s\n", msg);
	}
	return r;
}

static void old_spelling(const char *line)
{
	fprintf(stderr, "smcr-fuse: %s\n", line);
}

int main(int argc, char **argv)
{
	struct fuse_args args;
	struct fuse_cmdline_opts cl = { 0 };
	struct fuse_loop_config *lc = NULL;
	struct fuse_session *se;
	struct nbdc_uri u;
	struct fuse *f = NULL;
	char err[256];
	int ret = 1, r;

	if (nbdc_settings_init(&set) < 0 || nbdc_setting_default(&set, NBDC_S_CTL, "smcr-fuse") < 0)
		return 1;
	if (nbdc_settings_argv(&set, NBDC_IN_FUSE, &argc, argv, err, sizeof(err),
			       old_spelling) < 0) {
		fprintf(stderr, "smcr-fuse: %s\n" TRY_HELP, err);
		nbdc_settings_free(&set);
		return 2;
	}
	args = (struct fuse_args)FUSE_ARGS_INIT(argc, argv);
	if (fuse_opt_parse(&args, &opt, option_spec, opt_proc) == -1) {
		fputs(TRY_HELP, stderr);
		return 2;
	}
	if (opt.help) {
		usage(argv[0]);
		fuse_opt_free_args(&args);
		return 0;
	}
	if (opt.version) {
		printf("smcr-fuse (smcrbd) %s, FUSE %s\n", PACKAGE_VERSION, fuse_pkgversion());
		fuse_opt_free_args(&args);
		return 0;
	}
	if (fuse_parse_cmdline(&args, &cl) != 0 || !opt.uri || !cl.mountpoint) {
		if (!opt.uri || !cl.mountpoint)
			fprintf(stderr, "smcr-fuse: %s\n", !opt.uri ? "no URI and no mount point" :
				"no mount point");
		fputs(TRY_HELP, stderr);
		ret = 2;
		goto out_args;
	}
	r = nbdc_uri_parse(opt.uri, &u);
	if (r < 0) {
		char msg[600];

		nbdc_uri_strerror(opt.uri, &u, r, msg, sizeof(msg));
		fprintf(stderr, "smcr-fuse: %s\n%s", msg, TRY_HELP);
		ret = 2;
		goto out_args;
	}
	if ((opt.servers || set.given[NBDC_S_TRANSPORT]) && u.transport == NBDC_UNIX) {
		fprintf(stderr, "smcr-fuse: --%s: not with a Unix socket\n%s",
			opt.servers ? "servers" : "transport", TRY_HELP);
		ret = 2;
		goto out_args;
	}
	if (opt.servers) {
		unsigned def = u.transport == NBDC_SMCR ? NBDC_SMCR_PORT : NBD_DEFAULT_PORT;

		r = nbdc_servers_parse(opt.servers, def, more, NBDC_MAX_SERVERS - 1,
				       &nopts.nservers);
		if (r < 0) {
			fprintf(stderr, "smcr-fuse: --servers=%s: %s\n%s", opt.servers,
				r == -E2BIG ? "too many servers (the URI's and 7 more at most)" :
				"expected HOST[:PORT],HOST[:PORT],...", TRY_HELP);
			ret = 2;
			goto out_args;
		}
	}
	if (opt.name && (!*opt.name || strchr(opt.name, '/') || strlen(opt.name) > NAME_MAX)) {
		fprintf(stderr, "smcr-fuse: --name: not a file name\n%s", TRY_HELP);
		ret = 2;
		goto out_args;
	}
	snprintf(fname, sizeof(fname), "/%s",
		 opt.name ? opt.name : *u.export && !strchr(u.export, '/') &&
		 strlen(u.export) <= NAME_MAX ? u.export : "disk");
	if (nbdc_settings_bool(&set, NBDC_S_READ_ONLY))
		fuse_opt_add_arg(&args, "-oro");
	applog_set_ident("smcr-fuse");
	mount_time = time(NULL);
	uid = getuid();
	gid = getgid();

	/* Check the export now, where errors reach the terminal; the
	 * connections (threads) are made again after daemonizing. */
	if (connect_export() < 0)
		goto out_args;
	if (!cl.foreground) {
		nbdc_close(exp_);
		exp_ = NULL;
	}
	f = fuse_new(&args, &ops, sizeof(ops), NULL);
	if (!f)
		goto out_close;
	if (fuse_mount(f, cl.mountpoint) != 0)
		goto out_destroy;
	if (fuse_daemonize(cl.foreground) != 0)
		goto out_unmount;
	se = fuse_get_session(f);
	if (fuse_set_signal_handlers(se) != 0)
		goto out_unmount;
	if (!exp_ && connect_export() < 0)
		goto out_signals;
	if (cl.singlethread) {
		ret = fuse_loop(f);
	} else {
		lc = fuse_loop_cfg_create();
		if (!lc)
			goto out_signals;
		fuse_loop_cfg_set_clone_fd(lc, cl.clone_fd);
		/* UINT_MAX is "not given": libfuse 3.14 warns of it as an
		 * invalid max threads value when set. */
		if (cl.max_idle_threads != UINT_MAX)
			fuse_loop_cfg_set_idle_threads(lc, cl.max_idle_threads);
		fuse_loop_cfg_set_max_threads(lc, cl.max_threads);
		ret = fuse_loop_mt(f, lc);
		fuse_loop_cfg_destroy(lc);
	}
	/* 0 after an unmount, the signal number after SIGTERM/SIGINT/SIGHUP
	 * (a clean exit as well), -errno on failure. */
	ret = ret < 0 ? 1 : 0;
out_signals:
	fuse_remove_signal_handlers(se);
out_unmount:
	fuse_unmount(f);
out_destroy:
	fuse_destroy(f);
out_close:
	nbdc_close(exp_);
out_args:
	free(cl.mountpoint);
	fuse_opt_free_args(&args);
	free(opt.uri);
	free(opt.servers);
	free(opt.name);
	nbdc_settings_free(&set);
	return ret;
}
