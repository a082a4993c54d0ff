/* SPDX-License-Identifier: BSD-3-Clause */
/* smcrd: the daemon's chores.  Exports built from the command line and
 * the config file and reloaded on SIGHUP; the pid file, the fork into the
 * background, syslog (smcrd-int.h). */
#include <config.h>

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <syslog.h>
#include <time.h>
#include <unistd.h>

#include "monotime.h"
#include "smcrd-int.h"
#include "smcrd-rbd.h"

/* --- configuration ------------------------------------------------------ */

/* Relative export paths are relative to the directory smcrd started in. */
int daemon_absolutize(struct server *s, struct export_list *l)
{
	unsigned i;

	for (i = 0; i < l->n; i++) {
		/* rbd:POOL/IMAGE is no path; its ceph-conf is. */
		char **f = rbd_path(l->v[i].path) ? &l->v[i].ceph_conf : &l->v[i].path;
		char *p;

		if (!*f)
			continue;
		p = abs_path(s->cwd, *f);
		if (!p)
			return -ENOMEM;
		free(*f);
		*f = p;
	}
	return 0;
}

int daemon_build_table(struct server *s, bool apply_globals,
		       const struct export_table *keep, struct export_table **out)
{
	struct export_list file = { NULL, 0 };
	char err[512] = "";
	int r;

	if (s->cfg.config_file) {
		r = config_load_file(s->cfg.config_file, &s->cfg, apply_globals, &file, err,
				     sizeof(err));
		if (r < 0) {
			log_err("%s", err);
			goto out_free;
		}
		r = daemon_absolutize(s, &file);
		if (r < 0)
			goto out_free;
	}
	r = export_table_open(&s->cfg.cli_exports, &file, s->cfg.direct, keep, out, err,
			      sizeof(err));
	if (r < 0)
		log_err("%s", err);
out_free:
	export_list_free(&file);
	return r;
}

/* After fork: librados's threads stayed with the parent, so RBD images
 * are opened again.  The parent's handles are dropped, not closed (closing
 * would wait for those threads); the files it opened are left open. */
int daemon_reopen_rbd(struct server *s)
{
	struct export_table *t;
	unsigned i;

	for (i = 0; i < s->table->n && !s->table->v[i]->rbd; i++)
		;
	if (i == s->table->n)
		return 0;
	if (daemon_build_table(s, false, NULL, &t) < 0)
		return -EIO;
	s->table = t;
	return 0;
}

void daemon_log_table(const struct export_table *t, const char *config)
{
	unsigned i;

	for (i = 0; i < t->n; i++) {
		const struct export *e = t->v[i];

		log_info("export '%s': %s, %llu bytes%s%s%s", e->spec.name, e->spec.path,
			 (unsigned long long)e->size, e->spec.read_only ? ", read-only" : "",
			 e->dfd >= 0 ? ", O_DIRECT" : "",
			 e->spec.nallow ? ", address-restricted" : "");
	}
	if (!t->n)
		log_warn("no exports configured: add an [export NAME] section to %s and "
			 "reload (SIGHUP)", config ? config : "a config file (--config)");
}

/* SIGHUP: the config file's log-level again, unless the command line set
 * one (-v, --log-level): a level changes at run time.  A key removed from
 * the file leaves the level in force. */
static void reload_log_level(struct server *s)
{
	const struct cfg_setting *st = config_setting("log-level");
	struct export_list file = { NULL, 0 };
	struct smcrd_config c;
	char err[512];

	if (s->cfg.verbose || (s->cfg.set_mask & config_set_bit(st)))
		return;
	config_defaults(&c);
	if (config_load_file(s->cfg.config_file, &c, true, &file, err, sizeof(err)) == 0 &&
	    c.log_level >= 0 && c.log_level != s->cfg.log_level) {
		/* Said at the more verbose of the two levels. */
		bool up = c.log_level > s->cfg.log_level;

		if (!up)
			log_info("SIGHUP: log-level %s", st->names[c.log_level]);
		s->cfg.log_level = c.log_level;
		smcr_log_set_level((enum smcr_log_level)c.log_level);
		if (up)
			log_info("SIGHUP: log-level %s", st->names[c.log_level]);
	}
	export_list_free(&file);
	config_free(&c);
}

static void reload(struct server *s)
{
	struct export_table *t, *old;

	if (!s->cfg.config_file) {
		log_info("SIGHUP: no config file: nothing to reload");
		return;
	}
	log_info("SIGHUP: reloading exports from %s", s->cfg.config_file);
	reload_log_level(s);
	/* The table in use changes only here (this thread): read unlocked.
	 * Its RBD images whose settings are the same are shared. */
	if (daemon_build_table(s, false, s->table, &t) < 0) {
		log_err("reload failed: keeping the current exports");
		return;
	}
	pthread_mutex_lock(&s->lock);
	if (s->stopping) {
		/* Built while smcrd was stopping: not served. */
		pthread_mutex_unlock(&s->lock);
		export_table_free(t);
		return;
	}
	old = s->table;
	s->table = t;
	pthread_mutex_unlock(&s->lock);
	/* Connected clients keep their own references. */
	export_table_free(old);
	daemon_log_table(t, s->cfg.config_file);
}

/* The new table is built here, off the accept loop (an RBD export opens
 * as slowly as its cluster answers: Ceph's mount timeout is 300 s), and
 * swapped in under the lock; SIGHUPs while it runs make one more pass. */
static void *reload_thread(void *arg)
{
	struct server *s = arg;

	pthread_mutex_lock(&s->lock);
	while (s->reload_again && !s->stopping) {
		s->reload_again = false;
		pthread_mutex_unlock(&s->lock);
		reload(s);
		pthread_mutex_lock(&s->lock);
	}
	s->reload_running = false;
	pthread_mutex_unlock(&s->lock);
	return NULL;
}

void daemon_reload_start(struct server *s)
{
	int r;

	pthread_mutex_lock(&s->lock);
	s->reload_again = true;
	if (s->reload_running) {
		pthread_mutex_unlock(&s->lock);
		log_info("SIGHUP: a reload is running: once more after it");
		return;
	}
	if (s->reload_joinable) {
		/* Done (not running): it only has to return. */
		pthread_join(s->reload_tid, NULL);
		s->reload_joinable = false;
	}
	r = pthread_create(&s->reload_tid, NULL, reload_thread, s);
	if (r == 0) {
		pthread_setname_np(s->reload_tid, "smcrd-reload");
		s->reload_running = s->reload_joinable = true;
	}
	pthread_mutex_unlock(&s->lock);
	if (r) {
		log_warn("SIGHUP: cannot start the reload thread: %s: reloading in the "
			 "accept loop", strerror(r));
		pthread_mutex_lock(&s->lock);
		s->reload_again = false;
		pthread_mutex_unlock(&s->lock);
		reload(s);
	}
}

/* At exit (s->stopping set): waits up to wait_ms for a reload.  false:
 * it still runs (inside a cluster that does not answer) and uses s. */
bool daemon_reload_stop(struct server *s, unsigned wait_ms)
{
	struct timespec ts;
	bool joinable;

	pthread_mutex_lock(&s->lock);
	joinable = s->reload_joinable;
	pthread_mutex_unlock(&s->lock);
	if (!joinable)
		return true;
	deadline_after_ms(CLOCK_REALTIME, wait_ms, &ts);
	if (pthread_timedjoin_np(s->reload_tid, NULL, &ts)) {
		log_warn("a reload still runs (its cluster does not answer): exiting without it");
		return false;
	}
	s->reload_joinable = false;
	return true;
}

/* --- daemon ----------------------------------------------------------------- */

/* Not through a symbolic link (a local user could point it at a file of
 * root's), and only a regular file; mode 0644.  Made relative to its
 * directory, opened once: removal at exit is in that directory, whatever
 * its name points to by then. */
int daemon_write_pidfile(const char *path, struct pidfile *pf)
{
	const char *slash = strrchr(path, '/');
	char dir[4096];
	struct stat st;
	char buf[32];
	int fd, n, r;

	pf->dirfd = -1;
	pf->path = path;
	if (slash) {
		size_t dl = slash == path ? 1 : (size_t)(slash - path);

		if (dl >= sizeof(dir) || strlen(slash + 1) >= sizeof(pf->base) || !slash[1]) {
			log_err("pid file %s: %s", path, strerror(ENAMETOOLONG));
			return -ENAMETOOLONG;
		}
		memcpy(dir, path, dl);
		dir[dl] = '\0';
		snprintf(pf->base, sizeof(pf->base), "%s", slash + 1);
	} else {
		if (strlen(path) >= sizeof(pf->base)) {
			log_err("pid file %s: %s", path, strerror(ENAMETOOLONG));
			return -ENAMETOOLONG;
		}
		snprintf(dir, sizeof(dir), ".");
		snprintf(pf->base, sizeof(pf->base), "%s", path);
	}
	pf->dirfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (pf->dirfd < 0) {
		r = -errno;
		log_err("pid file %s: directory %s: %s", path, dir, strerror(-r));
		return r;
	}
	/* O_NONBLOCK: a FIFO without a reader fails (ENXIO), never blocks. */
	fd = openat(pf->dirfd, pf->base,
		    O_WRONLY | O_CREAT | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC, 0644);
	if (fd < 0) {
		r = -errno;
		log_err("pid file %s: %s", path, r == -ELOOP ? "is a symbolic link" :
			r == -ENXIO ? "not a regular file" : strerror(-r));
		goto out_dir;
	}
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
		log_err("pid file %s: not a regular file", path);
		r = -EINVAL;
		goto out_close;
	}
	if (st.st_nlink > 1) {
		/* A hard link to another file (of root's, say) is no pid file. */
		log_err("pid file %s: has %lu hard links (another file's name)", path,
			(unsigned long)st.st_nlink);
		r = -EMLINK;
		goto out_close;
	}
	pf->dev = st.st_dev;
	pf->ino = st.st_ino;
	n = snprintf(buf, sizeof(buf), "%ld\n", (long)getpid());
	if (ftruncate(fd, 0) < 0 || write(fd, buf, (size_t)n) != n) {
		r = -EIO;
		log_err("pid file %s: %s", path, strerror(-r));
		goto out_close;
	}
	if (close(fd) < 0) {
		r = -EIO;
		log_err("pid file %s: %s", path, strerror(-r));
		goto out_dir;
	}
	return 0;
out_close:
	close(fd);
out_dir:
	close(pf->dirfd);
	pf->dirfd = -1;
	return r;
}

/* Removes the pid file if its name in its directory is still the file
 * made and it still holds our pid (not one another process or user put
 * in its place). */
void daemon_remove_pidfile(struct pidfile *pf)
{
	char buf[32], want[32];
	struct stat st;
	ssize_t n;
	int fd;

	if (pf->dirfd < 0)
		return;
	fd = openat(pf->dirfd, pf->base, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY |
		    O_CLOEXEC);
	if (fd >= 0) {
		snprintf(want, sizeof(want), "%ld\n", (long)getpid());
		n = read(fd, buf, sizeof(buf) - 1);
		if (!fstat(fd, &st) && st.st_dev == pf->dev && st.st_ino == pf->ino && n > 0 &&
		    (buf[n] = '\0', !strcmp(buf, want)))
			unlinkat(pf->dirfd, pf->base, 0);
		else
			log_warn("pid file %s: not ours any more: left in place", pf->path);
		close(fd);
	}
	close(pf->dirfd);
	pf->dirfd = -1;
}

/* Forks; the parent waits until the child reports readiness and exits
 * with its status.  Returns the pipe to report on (child). */
int daemon_fork(void)
{
	int p[2];
	pid_t pid;
	char st = 1;

	if (pipe2(p, O_CLOEXEC) < 0)
		return -errno;
	pid = fork();
	if (pid < 0)
		return -errno;
	if (pid > 0) {
		close(p[1]);
		if (read(p[0], &st, 1) != 1)
			st = 1;
		_exit(st);
	}
	close(p[0]);
	if (setsid() < 0)
		return -errno;
	return p[1];
}

void daemon_syslog(void *opaque, enum smcr_log_level level, const char *msg)
{
	static const int prio[] = { LOG_ERR, LOG_WARNING, LOG_INFO, LOG_DEBUG };

	syslog(prio[level], "%s", msg);
}

void daemon_detach_stdio(const char *log_file)
{
	int fd = open("/dev/null", O_RDWR | O_CLOEXEC);

	if (fd >= 0) {
		dup2(fd, STDIN_FILENO);
		dup2(fd, STDOUT_FILENO);
		if (!log_file)
			dup2(fd, STDERR_FILENO);
		if (fd > STDERR_FILENO)
			close(fd);
	}
}
