/* SPDX-License-Identifier: BSD-3-Clause */
/* smcrbd: the clients' connection settings, one table (nbdc_settings[]):
 * name, short option, type, default and help of each.  The nbdkit plugin
 * takes them as NAME=VALUE parameters, smcr-fuse and smcr-attach as
 * --NAME[=]VALUE or -X VALUE options, with the same names and letters, and
 * all three fill struct nbdc_opts from them (nbdc_settings_apply). */
#ifndef SMCRBD_NBDC_SETTINGS_H
#define SMCRBD_NBDC_SETTINGS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "nbd-conn.h"

/* Which clients offer a setting. */
#define NBDC_IN_PLUGIN	0x1
#define NBDC_IN_FUSE	0x2
#define NBDC_IN_ATTACH	0x4
#define NBDC_IN_ALL	0x7

enum nbdc_set_type {
	NBDC_SET_UINT,		/* min..max */
	NBDC_SET_SECS,		/* seconds, a fraction allowed, 0..max */
	NBDC_SET_BOOL,		/* true/false, on/off, yes/no, 1/0 */
	NBDC_SET_STR,
	NBDC_SET_TRANSPORT,	/* smcr | tcp (nbd) */
	NBDC_SET_TLS,		/* off | on | require */
	NBDC_SET_SIZE,		/* bytes (parse_size: 4k, 64M, 1GiB): 0 or min..max */
};

/* The values, by setting (index in nbdc_settings[]). */
enum nbdc_set_id {
	NBDC_S_CONNECTIONS, NBDC_S_TIMEOUT, NBDC_S_IO_TIMEOUT, NBDC_S_TRANSPORT, NBDC_S_TCP,
	NBDC_S_READ_ONLY, NBDC_S_CTL, NBDC_S_TLS, NBDC_S_TLS_CERTIFICATES,
	NBDC_S_TLS_PSK_FILE, NBDC_S_TLS_USERNAME, NBDC_S_TLS_HOSTNAME, NBDC_S_TLS_VERIFY_PEER,
	NBDC_S_RMBE_SIZE,
	NBDC_NSETTINGS
};

struct nbdc_setting {
	const char *name;	/* plugin key, long option */
	const char *alias;	/* an older spelling that still works, or NULL */
	char sopt;		/* short option (smcr-fuse, smcr-attach), or 0 */
	enum nbdc_set_type type;
	unsigned min, max;	/* UINT: range; SECS: max */
	const char *dflt;	/* the default, as text; NULL: none */
	const char *implied;	/* the value when given without one (a flag),
				 * or NULL: a value is required */
	int sets;		/* another setting this one sets (to implied),
				 * or -1 */
	const char *arg;	/* the value's name in the help */
	const char *help;
	unsigned in;		/* NBDC_IN_* */
};
extern const struct nbdc_setting nbdc_settings[NBDC_NSETTINGS];

struct nbdc_settings {
	char *val[NBDC_NSETTINGS];	/* the text given, or the default */
	bool given[NBDC_NSETTINGS];
};

/* The defaults of every setting. */
int nbdc_settings_init(struct nbdc_settings *v);
void nbdc_settings_free(struct nbdc_settings *v);
/* The setting named name (or its alias) offered by client; -1: none. */
int nbdc_setting_find(const char *name, unsigned client);
/* The one with short option c; -1: none. */
int nbdc_setting_short(char c, unsigned client);
/* Sets setting id from value (NULL: its implied value): 0, or -EINVAL
 * with a one-line reason in err ("connections: 1 to 16, not 40"). */
int nbdc_setting_set(struct nbdc_settings *v, int id, const char *value, char *err,
		     size_t errlen);
/* Another default for setting id (a client's own; not "given"). */
int nbdc_setting_default(struct nbdc_settings *v, int id, const char *value);
/* Parsed values (checked by nbdc_setting_set). */
unsigned nbdc_settings_uint(const struct nbdc_settings *v, int id);
unsigned nbdc_settings_ms(const struct nbdc_settings *v, int id);	/* SECS */
uint64_t nbdc_settings_size(const struct nbdc_settings *v, int id);	/* SIZE */
bool nbdc_settings_bool(const struct nbdc_settings *v, int id);
int nbdc_settings_tls(const struct nbdc_settings *v);		/* NBDC_TLS_* */
/* Into o: connections, timeout (0: at once), io-timeout (0: never),
 * read-only, the control socket (off: none), TLS (given: over what o has;
 * a credential implies tls=on), and the transport when given. */
void nbdc_settings_apply(const struct nbdc_settings *v, struct nbdc_opts *o);
/* Takes client's settings out of argv (--NAME=V, --NAME V, -X V, -XV, and
 * flags), leaving the rest in order; argv[0] stays.  0, or -EINVAL with
 * the reason in err.  warn (may be NULL) gets a line for an old spelling. */
int nbdc_settings_argv(struct nbdc_settings *v, unsigned client, int *argc, char **argv,
		       char *err, size_t errlen, void (*warn)(const char *line));
/* client's settings for its --help (options) or its config help (plugin:
 * NAME=VALUE), with their defaults as v has them now. */
void nbdc_settings_help(FILE *f, const struct nbdc_settings *v, unsigned client);

#endif
