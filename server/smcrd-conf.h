/* SPDX-License-Identifier: BSD-3-Clause */
/* smcrd: configuration (command line and config file). */
#ifndef SMCRD_CONF_H
#define SMCRD_CONF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include "sizearg.h"	/* parse_size */

/* An allowed client address prefix. */
struct acl_entry {
	int family;			/* AF_INET or AF_INET6 */
	uint8_t addr[16];
	unsigned prefix;		/* bits */
};

/* An export as configured (not opened yet). */
struct export_spec {
	char *name;
	char *path;
	char *description;
	bool read_only;
	int direct;			/* -1: the global setting */
	uint32_t block_size;		/* minimum block size; 0: default */
	struct acl_entry *allow;	/* none: everybody */
	unsigned nallow;
	char **tls_allow;		/* TLS names (certificate CN/DN, PSK
					 * identity) allowed; none: every client */
	unsigned ntls_allow;
	char *ceph_conf;		/* rbd: exports: the cluster's config
					 * file, or NULL (Ceph's default) */
	char *ceph_id;			/* ... and the client id (NULL: admin) */
	bool rbd_exclusive;		/* hold the image's exclusive lock once a
					 * client comes, fencing any other owner */
	unsigned lock_timeout_ms;	/* ... and wait at most this for it
					 * (0: the default) */
};

struct export_list {
	struct export_spec *v;
	unsigned n;
};

struct smcrd_config {
	char *listen;
	char *port;
	char *unix_path;		/* Unix socket to listen on, or NULL */
	char *metrics_listen;		/* HTTP GET /metrics on [ADDR:]PORT, or NULL */
	char *smcr_port;
	unsigned queue_depth;		/* requests in flight per connection */
	unsigned threads;		/* I/O worker threads */
	unsigned max_clients;
	unsigned max_handshakes;	/* clients in the handshake (CLC, NBD options) */
	unsigned handshake_timeout;	/* s, whole handshake */
	unsigned request_timeout;	/* s, a stalled request payload */
	unsigned idle_timeout;		/* s, an idle session; 0: none */
	unsigned max_per_address;	/* clients from one address; 0: no limit */
	int max_hs_per_address;		/* handshakes from one address; 0: no
					 * limit; -1: half of max_handshakes */
	unsigned max_lgrs_per_address;	/* SMC-R link groups from one address; 0: no limit */
	uint64_t max_rmb_memory;	/* SMC-R: RMB bytes per link group; 0: libsmcr's */
	uint64_t max_memory;		/* bytes of request buffers */
	uint64_t max_mem_per_address;	/* of them, for one address; 0: no
					 * limit; UINT64_MAX: half of max_memory */
	bool direct;
	bool fixed_buffers;		/* io_uring fixed buffers (default on) */
	int syn_option;			/* enum smcr_syn_option (default auto) */
	int tls;			/* NBD_TLS_OFF, _ON, _REQUIRE */
	char *tls_certificates;		/* directory */
	char *tls_psk;			/* PSK file */
	int tls_verify_peer;		/* BD_TLS_VERIFY_* (-1: on with a CA) */
	char *ctl_group;		/* control group (name or number), or NULL */
	char *eids;			/* SMC-Rv2 user EIDs, comma-separated, or NULL */
	char *rdma_devices;		/* libsmcr's devices ("dev[:port],..."), or NULL */
	/* SMC-R receive buffer per connection; 0: libsmcr's choice, up to
	 * SMCRD_RMBE_AUTO_MAX */
	uint64_t rmbe_size;
	bool foreground;
	bool verbose;
	int log_level;			/* enum smcr_log_level; -1: libsmcr's
					 * (info, debug with SMCR_DEBUG) */
	char *pidfile;
	char *log_file;
	char *config_file;		/* absolute */
	struct export_list cli_exports;	/* from --export, kept across reloads */
	/* Which settings the command line gave (they win over the file):
	 * bit i for smcrd_settings[i]. */
	uint64_t set_mask;
};

/* A setting of the command line and the config file: its key in the file,
 * which is its long option too unless option says otherwise, and where its
 * value lands.  smcrd_settings[] has them all (the ranges are written
 * there only); the command line, the config file and the status dump
 * (smcrctl status) go by it. */
enum cfg_type {
	CFG_STR,			/* char *: a string */
	CFG_PATH,			/* char *: a file name (absolute from
					 * the command line) */
	CFG_PORT,			/* char *: a port number, 1-65535 */
	CFG_UINT,			/* unsigned in [min, max] */
	CFG_INT,			/* int in [min, max] */
	CFG_SIZE,			/* uint64_t bytes ("64M") in [min, max] */
	CFG_BOOL,			/* bool; on the command line a flag that
					 * sets it (clears it: option "no-...") */
	CFG_ENUM,			/* int, by parse() */
};

struct cfg_setting {
	const char *name;
	const char *option;		/* long option if not name, or NULL */
	char short_opt;			/* or 0 */
	enum cfg_type type;
	uint64_t min, max;		/* CFG_UINT, CFG_INT, CFG_SIZE */
	size_t off;			/* in struct smcrd_config */
	int (*parse)(const char *s);	/* CFG_ENUM: the value, or -EINVAL */
	const char *values;		/* CFG_ENUM: what parse takes */
	const char *const *names;	/* CFG_ENUM: the values' names */
};

#define CFG_MAX_SETTINGS	64	/* bits of set_mask */

/* rmbe-size auto: libsmcr's rmbe_auto_max for smcrd (bytes, as text). */
#define SMCRD_RMBE_AUTO_MAX	"4194304"

/* Ends with a NULL name. */
extern const struct cfg_setting smcrd_settings[];

/* The setting of this config key, or NULL. */
const struct cfg_setting *config_setting(const char *name);
static inline const char *config_option(const struct cfg_setting *st)
{
	return st->option ? st->option : st->name;
}
static inline uint64_t config_set_bit(const struct cfg_setting *st)
{
	return UINT64_C(1) << (st - smcrd_settings);
}
/* Sets st to val.  From the command line (cwd: the directory relative
 * paths are from; val NULL: a CFG_BOOL's flag) the setting is marked as
 * given; from the config file (cwd NULL) it is left alone when the
 * command line gave it, after val is checked.  -EINVAL: a bad value. */
int config_setting_apply(struct smcrd_config *cfg, const struct cfg_setting *st,
			 const char *val, const char *cwd);
/* st's value as text: "-" when not set, "auto" for a default computed
 * later. */
void config_setting_format(const struct smcrd_config *cfg, const struct cfg_setting *st,
			   char *buf, size_t len);
/* st's value as a number; false when it has none (not a number, or
 * "auto"). */
bool config_setting_number(const struct smcrd_config *cfg, const struct cfg_setting *st,
			   uint64_t *out);

/* "off", "on", "require" -> 0, 1, 2 (NBD_TLS_*); -EINVAL otherwise. */
int config_parse_tls(const char *s);
/* "on"/"yes"/"off"/"no"... -> 1 or 0; -EINVAL otherwise. */
int config_parse_verify(const char *s);
/* p if absolute, else cwd/p; NULL: no memory. */
char *abs_path(const char *cwd, const char *p);

void config_defaults(struct smcrd_config *cfg);
void config_free(struct smcrd_config *cfg);

/* "name=path[,ro][,allow=PREFIX]...[,blocksize=N][,direct][,desc=TEXT]"
 * (also a bare "path", named after its last path component). */
int config_parse_export_arg(const char *arg, struct export_spec *out, char *err,
			    size_t errlen);
/* Reads the config file, then its drop-ins (path.d/NAME.conf, by name;
 * none when path.d does not exist): globals (unless set on the command
 * line) into cfg when apply_globals, a later one winning, exports into
 * *out (appended; one defined twice is an error). */
int config_load_file(const char *path, struct smcrd_config *cfg, bool apply_globals,
		     struct export_list *out, char *err, size_t errlen);

int export_list_add(struct export_list *l, struct export_spec *spec);
void export_list_free(struct export_list *l);
void export_spec_free(struct export_spec *s);

/* "10.0.0.0/8", "::1", "fd00::/8", "*" (everything). */
int acl_parse(const char *s, struct acl_entry *out);
bool acl_match(const struct acl_entry *v, unsigned n, const struct sockaddr *sa);

/* The key of a peer's per-address limits and shares: its IPv4 address
 * (IPv4-mapped IPv6 too), its IPv6 /64 ("2001:db8:1:2::/64": a host may
 * take any address of its /64), "local" for Unix sockets, "?" else. */
void addr_key_of(const struct sockaddr *sa, char *out, size_t len);
/* addr_key_of() for an accepted socket: a Unix-socket peer is keyed by its
 * uid (SO_PEERCRED: "uid 1000"), so one user's clients cannot take the
 * shares of another's; "local" when the kernel does not say. */
void addr_key_of_fd(int fd, const struct sockaddr *sa, char *out, size_t len);
/* A pool's share for one holder (an address in a worker's request memory,
 * a connection in its address's, an address in the client or handshake
 * slots): whether a holder that has mine of the pool may take want more,
 * with used of pool taken by holders holders (this one counted if it
 * holds some) and cap the most one may hold (0: none; one that holds
 * nothing may take one piece larger).  A holder may have
 * pool / (holders + 1) (the next one's part kept), and never more than
 * half of what it could take now (what is free plus its own), so that
 * holders that never give back (clients that do not read their replies,
 * sessions that stay) leave the half of the rest each time, and one
 * that holds nothing is served beside them.  An empty pool gives any
 * size (one request larger than a share is served alone). */
bool share_allows(uint64_t pool, uint64_t used, uint64_t mine, unsigned holders,
		  uint64_t cap, uint64_t want);
/* Whether a client of TLS name name (NULL: none) may use an export with
 * this tls-allow list (none: everybody). */
bool tls_allow_match(char *const *v, unsigned n, const char *name);

int parse_uint(const char *s, unsigned min, unsigned max, unsigned *out);
int parse_bool(const char *s, bool *out);

#endif
