/* SPDX-License-Identifier: BSD-3-Clause */
/* smcrd: configuration (command line and config file). */
#ifndef SMCRD_CONF_H
#define SMCRD_CONF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

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
	bool rbd_exclusive;		/* hold the image's exclusive lock, fencing
					 * any other owner at open */
};

struct export_list {
	struct export_spec *v;
	unsigned n;
};

struct smcrd_config {
	char *listen;
	char *port;
	char *unix_path;		/* Unix socket to listen on, or NULL */
	char *smcr_port;
	unsigned queue_depth;		/* requests in flight per connection */
	unsigned threads;		/* I/O worker threads */
	unsigned max_clients;
	unsigned max_handshakes;	/* clients in the handshake (CLC, NBD options) */
	unsigned handshake_timeout;	/* s, whole handshake */
	unsigned request_timeout;	/* s, a stalled request payload */
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
	bool foreground;
	bool verbose;
	char *pidfile;
	char *log_file;
	char *config_file;		/* absolute */
	struct export_list cli_exports;	/* from --export, kept across reloads */
	/* Which globals the command line set (they win over the file). */
	unsigned set_mask;
};

#define CFG_SET_LISTEN		(1u << 0)
#define CFG_SET_PORT		(1u << 1)
#define CFG_SET_SMCR_PORT	(1u << 2)
#define CFG_SET_QUEUE_DEPTH	(1u << 3)
#define CFG_SET_THREADS		(1u << 4)
#define CFG_SET_MAX_CLIENTS	(1u << 5)
#define CFG_SET_MAX_MEMORY	(1u << 6)
#define CFG_SET_DIRECT		(1u << 7)
#define CFG_SET_FIXED_BUFFERS	(1u << 8)
#define CFG_SET_PIDFILE		(1u << 9)
#define CFG_SET_LOG_FILE	(1u << 10)
#define CFG_SET_SYN_OPTION	(1u << 11)
#define CFG_SET_TLS		(1u << 12)
#define CFG_SET_TLS_CERTS	(1u << 13)
#define CFG_SET_TLS_PSK		(1u << 14)
#define CFG_SET_MAX_HANDSHAKES	(1u << 15)
#define CFG_SET_HS_TIMEOUT	(1u << 16)
#define CFG_SET_MAX_RMB		(1u << 17)
#define CFG_SET_REQ_TIMEOUT	(1u << 18)
#define CFG_SET_PER_ADDRESS	(1u << 19)
#define CFG_SET_CTL_GROUP	(1u << 20)
#define CFG_SET_LGRS_PER_ADDRESS	(1u << 21)
#define CFG_SET_TLS_VERIFY	(1u << 22)
#define CFG_SET_HS_PER_ADDRESS	(1u << 23)
#define CFG_SET_UNIX		(1u << 24)
#define CFG_SET_MEM_PER_ADDRESS	(1u << 27)
#define CFG_SET_EIDS		(1u << 28)

/* "off", "on", "require" -> 0, 1, 2 (NBD_TLS_*); -EINVAL otherwise. */
int config_parse_tls(const char *s);
/* "on"/"yes"/"off"/"no"... -> 1 or 0; -EINVAL otherwise. */
int config_parse_verify(const char *s);

void config_defaults(struct smcrd_config *cfg);
void config_free(struct smcrd_config *cfg);

/* "name=path[,ro][,allow=PREFIX]...[,blocksize=N][,direct][,desc=TEXT]"
 * (also a bare "path", named after its last path component). */
int config_parse_export_arg(const char *arg, struct export_spec *out, char *err,
			    size_t errlen);
/* Reads the config file: globals (unless set on the command line) into
 * cfg when apply_globals, exports into *out (appended). */
int config_load_file(const char *path, struct smcrd_config *cfg, bool apply_globals,
		     struct export_list *out, char *err, size_t errlen);

int export_list_add(struct export_list *l, struct export_spec *spec);
void export_list_free(struct export_list *l);
void export_spec_free(struct export_spec *s);

/* "10.0.0.0/8", "::1", "fd00::/8", "*" (everything). */
int acl_parse(const char *s, struct acl_entry *out);
bool acl_match(const struct acl_entry *v, unsigned n, const struct sockaddr *sa);
/* Whether a client of TLS name name (NULL: none) may use an export with
 * this tls-allow list (none: everybody). */
bool tls_allow_match(char *const *v, unsigned n, const char *name);

/* "64M", "1G", "4096", "4k". */
int parse_size(const char *s, uint64_t *out);
int parse_uint(const char *s, unsigned min, unsigned max, unsigned *out);
int parse_bool(const char *s, bool *out);

#endif
