/* SPDX-License-Identifier: BSD-3-Clause */
/* smcrbd: the clients' connection settings table and its parsers (see
 * nbdc-settings.h). */
#include <config.h>

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nbdc-settings.h"
#include "sizearg.h"

#define YEAR_S	(86400u * 365)

/* In enum nbdc_set_id's order. */
const struct nbdc_setting nbdc_settings[NBDC_NSETTINGS] = {
	[NBDC_S_CONNECTIONS] = { "connections", NULL, 'C', NBDC_SET_UINT, 1, 16, "4", NULL, -1,
		"N", "connections if the server allows multi-conn", NBDC_IN_ALL },
	[NBDC_S_TIMEOUT] = { "timeout", "dead-timeout", 'D', NBDC_SET_SECS, 0, YEAR_S, "30", NULL,
		-1, "S", "requests wait S s for a lost server, 0: fail at once",
		NBDC_IN_ALL },
	[NBDC_S_IO_TIMEOUT] = { "io-timeout", NULL, 0, NBDC_SET_SECS, 0, YEAR_S, "60", NULL, -1,
		"S", "no reply for S s: the connection is dead, 0: never", NBDC_IN_ALL },
	[NBDC_S_TRANSPORT] = { "transport", NULL, 0, NBDC_SET_TRANSPORT, 0, 0, "smcr", NULL, -1,
		"smcr|tcp", "SMC-R with TCP fallback, or plain NBD over TCP", NBDC_IN_ALL },
	[NBDC_S_TCP] = { "tcp", NULL, 't', NBDC_SET_TRANSPORT, 0, 0, NULL, "tcp",
		NBDC_S_TRANSPORT, NULL, "the same as --transport=tcp", NBDC_IN_FUSE | NBDC_IN_ATTACH },
	[NBDC_S_READ_ONLY] = { "read-only", NULL, 'r', NBDC_SET_BOOL, 0, 0, "false", "true", -1,
		"BOOL", "refuse writes", NBDC_IN_ALL },
	[NBDC_S_CTL] = { "ctl", NULL, 0, NBDC_SET_STR, 0, 0, NULL, NULL, -1, "NAME|off",
		"control socket name for smcrctl", NBDC_IN_ALL },
	[NBDC_S_TLS] = { "tls", NULL, 0, NBDC_SET_TLS, 0, 0, "off", "require", -1,
		"off|on|require", "TLS on NBD/TCP",
		NBDC_IN_ALL },
	[NBDC_S_TLS_CERTIFICATES] = { "tls-certificates", NULL, 0, NBDC_SET_STR, 0, 0, NULL, NULL,
		-1, "DIR", "ca-cert.pem [client-cert.pem client-key.pem]", NBDC_IN_ALL },
	[NBDC_S_TLS_PSK_FILE] = { "tls-psk-file", "tls-psk", 0, NBDC_SET_STR, 0, 0, NULL, NULL,
		-1, "FILE", "pre-shared keys (psktool's) instead of certificates", NBDC_IN_ALL },
	[NBDC_S_TLS_USERNAME] = { "tls-username", NULL, 0, NBDC_SET_STR, 0, 0, NULL, NULL, -1,
		"NAME", "PSK identity (default: the login name)", NBDC_IN_ALL },
	[NBDC_S_TLS_HOSTNAME] = { "tls-hostname", NULL, 0, NBDC_SET_STR, 0, 0, NULL, NULL, -1,
		"NAME", "name in smcrd's certificate (default: the host)", NBDC_IN_ALL },
	[NBDC_S_TLS_VERIFY_PEER] = { "tls-verify-peer", "tls-verify", 0, NBDC_SET_BOOL, 0, 0,
		"true", NULL, -1, "BOOL", "check smcrd's certificate", NBDC_IN_ALL },
	[NBDC_S_RMBE_SIZE] = { "rmbe-size", NULL, 0, NBDC_SET_SIZE, 16u << 10, 512u << 20, "4M",
		NULL, -1, "N[K|M]", "SMC-R receive buffer per connection, 0: libsmcr's choice",
		NBDC_IN_ALL },
};

int nbdc_settings_init(struct nbdc_settings *v)
{
	unsigned i;

	memset(v, 0, sizeof(*v));
	for (i = 0; i < NBDC_NSETTINGS; i++) {
		if (!nbdc_settings[i].dflt)
			continue;
		v->val[i] = strdup(nbdc_settings[i].dflt);
		if (!v->val[i]) {
			nbdc_settings_free(v);
			return -ENOMEM;
		}
	}
	return 0;
}

void nbdc_settings_free(struct nbdc_settings *v)
{
	unsigned i;

	for (i = 0; i < NBDC_NSETTINGS; i++) {
		free(v->val[i]);
		v->val[i] = NULL;
	}
}

int nbdc_setting_find(const char *name, unsigned client)
{
	unsigned i;

	for (i = 0; i < NBDC_NSETTINGS; i++) {
		const struct nbdc_setting *s = &nbdc_settings[i];

		if ((s->in & client) && (!strcmp(name, s->name) || (s->alias &&
									 !strcmp(name, s->alias))))
			return (int)i;
	}
	return -1;
}

int nbdc_setting_short(char c, unsigned client)
{
	unsigned i;

	for (i = 0; c && i < NBDC_NSETTINGS; i++)
		if ((nbdc_settings[i].in & client) && nbdc_settings[i].sopt == c)
			return (int)i;
	return -1;
}

static int parse_bool(const char *v)
{
	static const char *const t[] = { "true", "on", "yes", "1" }, *const f[] = {
		"false", "off", "no", "0" };
	unsigned i;

	for (i = 0; i < 4; i++) {
		if (!strcmp(v, t[i]))
			return 1;
		if (!strcmp(v, f[i]))
			return 0;
	}
	return -1;
}

static int parse_tls(const char *v)
{
	if (!strcmp(v, "require") || !strcmp(v, "required"))
		return NBDC_TLS_REQUIRE;
	if (!strcmp(v, "on"))
		return NBDC_TLS_ALLOW;
	return parse_bool(v) == 0 ? NBDC_TLS_OFF : -1;
}

/* 0 when value suits s; else -EINVAL with err. */
static int check(const struct nbdc_setting *s, const char *value, char *err, size_t len)
{
	char *end;

	switch (s->type) {
	case NBDC_SET_UINT: {
		unsigned long n;

		errno = 0;
		n = strtoul(value, &end, 10);
		if (*value && !*end && !errno && n >= s->min && n <= s->max && value[0] != '-')
			return 0;
		snprintf(err, len, "%s: %u to %u, not '%s'", s->name, s->min, s->max, value);
		return -EINVAL;
	}
	case NBDC_SET_SECS: {
		double d = strtod(value, &end);

		if (*value && !*end && d >= 0 && d <= s->max)
			return 0;
		snprintf(err, len, "%s: not a number of seconds: '%s'", s->name, value);
		return -EINVAL;
	}
	case NBDC_SET_BOOL:
		if (parse_bool(value) >= 0)
			return 0;
		snprintf(err, len, "%s: true or false, not '%s'", s->name, value);
		return -EINVAL;
	case NBDC_SET_TRANSPORT:
		if (!strcmp(value, "smcr") || !strcmp(value, "tcp") || !strcmp(value, "nbd"))
			return 0;
		snprintf(err, len, "transport: smcr or tcp, not '%s'", value);
		return -EINVAL;
	case NBDC_SET_TLS:
		if (parse_tls(value) >= 0)
			return 0;
		snprintf(err, len, "tls: off, on or require, not '%s'", value);
		return -EINVAL;
	case NBDC_SET_SIZE: {
		uint64_t n;

		if (parse_size(value, &n) == 0 && (n == 0 || (n >= s->min && n <= s->max)))
			return 0;
		snprintf(err, len, "%s: 0 or %uK to %uM, not '%s'", s->name, s->min >> 10,
			 s->max >> 20, value);
		return -EINVAL;
	}
	case NBDC_SET_STR:
		return 0;
	}
	return -EINVAL;
}

int nbdc_setting_set(struct nbdc_settings *v, int id, const char *value, char *err,
		     size_t errlen)
{
	const struct nbdc_setting *s = &nbdc_settings[id];
	char *copy;
	int r;

	if (!value)
		value = s->implied;
	if (!value) {
		snprintf(err, errlen, "%s: needs a value (%s)", s->name, s->arg);
		return -EINVAL;
	}
	if (s->sets >= 0 && value != s->implied) {
		snprintf(err, errlen, "%s takes no value", s->name);
		return -EINVAL;
	}
	r = check(s, value, err, errlen);
	if (r < 0)
		return r;
	if (s->sets >= 0)
		id = s->sets;
	copy = strdup(value);
	if (!copy) {
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	free(v->val[id]);
	v->val[id] = copy;
	v->given[id] = true;
	return 0;
}

int nbdc_setting_default(struct nbdc_settings *v, int id, const char *value)
{
	char *copy = strdup(value);

	if (!copy)
		return -ENOMEM;
	free(v->val[id]);
	v->val[id] = copy;
	return 0;
}

unsigned nbdc_settings_uint(const struct nbdc_settings *v, int id)
{
	return v->val[id] ? (unsigned)strtoul(v->val[id], NULL, 10) : 0;
}

unsigned nbdc_settings_ms(const struct nbdc_settings *v, int id)
{
	double ms = v->val[id] ? strtod(v->val[id], NULL) * 1000 : 0;

	return ms >= UINT32_MAX ? UINT32_MAX - 1 : (unsigned)ms;
}

uint64_t nbdc_settings_size(const struct nbdc_settings *v, int id)
{
	uint64_t n;

	return v->val[id] && parse_size(v->val[id], &n) == 0 ? n : 0;
}

bool nbdc_settings_bool(const struct nbdc_settings *v, int id)
{
	return v->val[id] && parse_bool(v->val[id]) == 1;
}

int nbdc_settings_tls(const struct nbdc_settings *v)
{
	return v->val[NBDC_S_TLS] ? parse_tls(v->val[NBDC_S_TLS]) : NBDC_TLS_OFF;
}

void nbdc_settings_apply(const struct nbdc_settings *v, struct nbdc_opts *o)
{
	const char *ctl = v->val[NBDC_S_CTL];
	unsigned ms;

	o->connections = nbdc_settings_uint(v, NBDC_S_CONNECTIONS);
	ms = nbdc_settings_ms(v, NBDC_S_TIMEOUT);
	o->timeout_ms = ms ? ms : 1;			/* 0: fail at once */
	ms = nbdc_settings_ms(v, NBDC_S_IO_TIMEOUT);
	o->io_timeout_ms = ms ? ms : UINT32_MAX;	/* 0: never */
	if (nbdc_settings_bool(v, NBDC_S_READ_ONLY))
		o->read_only = true;
	if (ctl)
		o->ctl_name = !strcmp(ctl, "off") || !strcmp(ctl, "none") ? NULL : ctl;
	if (v->given[NBDC_S_TRANSPORT])
		o->transport = strcmp(v->val[NBDC_S_TRANSPORT], "smcr") ? NBDC_TCP : NBDC_SMCR;
	if (v->given[NBDC_S_TLS])
		o->tls = nbdc_settings_tls(v);
	else if (!o->tls && (v->given[NBDC_S_TLS_CERTIFICATES] || v->given[NBDC_S_TLS_PSK_FILE] ||
			     v->given[NBDC_S_TLS_USERNAME]))
		o->tls = NBDC_TLS_ALLOW;	/* as nbdkit-nbd-plugin(1) */
	if (v->val[NBDC_S_TLS_CERTIFICATES])
		o->tls_certificates = v->val[NBDC_S_TLS_CERTIFICATES];
	if (v->val[NBDC_S_TLS_PSK_FILE])
		o->tls_psk_file = v->val[NBDC_S_TLS_PSK_FILE];
	if (v->val[NBDC_S_TLS_USERNAME])
		o->tls_username = v->val[NBDC_S_TLS_USERNAME];
	if (v->val[NBDC_S_TLS_HOSTNAME])
		o->tls_hostname = v->val[NBDC_S_TLS_HOSTNAME];
	if (v->given[NBDC_S_TLS_VERIFY_PEER])
		o->tls_no_verify_peer = !nbdc_settings_bool(v, NBDC_S_TLS_VERIFY_PEER);
	/* The default gives way to SMCR_RMBE_SIZE in the environment. */
	if (v->given[NBDC_S_RMBE_SIZE] || !getenv("SMCR_RMBE_SIZE"))
		o->rmbe_size = (uint32_t)nbdc_settings_size(v, NBDC_S_RMBE_SIZE);
}

/* A number of seconds: smcr-fuse's old "-t S". */
static bool is_secs(const char *s)
{
	char *end;

	return s && *s && (strtod(s, &end), !*end);
}

/* argv[*i] as one of client's settings: 1 taken (*i moved past its
 * value), 0 not one, -EINVAL. */
static int take(struct nbdc_settings *v, unsigned client, int argc, char **argv, int *i,
		char *err, size_t len, void (*warn)(const char *line))
{
	const char *a = argv[*i], *val = NULL;
	char name[64];
	int id;

	if (a[0] != '-' || !a[1])
		return 0;
	if (a[1] == '-') {
		const char *eq = strchr(a + 2, '=');
		size_t n = eq ? (size_t)(eq - a - 2) : strlen(a + 2);

		if (n >= sizeof(name))
			return 0;
		memcpy(name, a + 2, n);
		name[n] = '\0';
		id = nbdc_setting_find(name, client);
		if (id < 0)
			return 0;
		if (eq)
			val = eq + 1;
		else if (!nbdc_settings[id].implied && *i + 1 < argc)
			val = argv[++*i];
	} else {
		if ((client & NBDC_IN_FUSE) && a[1] == 't') {
			const char *s = a[2] ? a + 2 : *i + 1 < argc ? argv[*i + 1] : NULL;

			if (is_secs(s)) {	/* the old -t S of smcr-fuse */
				if (!a[2])
					++*i;
				if (warn)
					warn("-t S is -D S (--timeout S); -t alone is --tcp");
				return nbdc_setting_set(v, NBDC_S_TIMEOUT, s, err, len) < 0 ?
				       -EINVAL : 1;
			}
		}
		id = nbdc_setting_short(a[1], client);
		if (id < 0)
			return 0;
		if (nbdc_settings[id].implied) {
			if (a[2])		/* -tX: a group of flags, not ours */
				return 0;
		} else if (a[2]) {
			val = a + 2;
		} else if (*i + 1 < argc) {
			val = argv[++*i];
		}
	}
	return nbdc_setting_set(v, id, val, err, len) < 0 ? -EINVAL : 1;
}

int nbdc_settings_argv(struct nbdc_settings *v, unsigned client, int *argc, char **argv,
		       char *err, size_t errlen, void (*warn)(const char *line))
{
	int i, out = 1, r;

	for (i = 1; i < *argc; i++) {
		if (!strcmp(argv[i], "--")) {
			while (i < *argc)
				argv[out++] = argv[i++];
			break;
		}
		r = take(v, client, *argc, argv, &i, err, errlen, warn);
		if (r < 0)
			return r;
		if (r == 0)
			argv[out++] = argv[i];
	}
	*argc = out;
	argv[out] = NULL;
	return 0;
}

void nbdc_settings_help(FILE *f, const struct nbdc_settings *v, unsigned client)
{
	unsigned i;

	for (i = 0; i < NBDC_NSETTINGS; i++) {
		struct nbdc_setting shown = nbdc_settings[i];
		const struct nbdc_setting *s = &shown;
		char left[64], dflt[80] = "";

		if (!(s->in & client))
			continue;
		/* smcr-attach's --timeout was (and stays) its driver's: there
		 * the wait for a lost server goes by its old name only. */
		if (client == NBDC_IN_ATTACH && i == NBDC_S_TIMEOUT) {
			shown.name = shown.alias;
			shown.alias = NULL;
		}
		if (s->sets < 0 && v->val[i])
			snprintf(dflt, sizeof(dflt), " (%s)", v->val[i]);
		if (client == NBDC_IN_PLUGIN)
			snprintf(left, sizeof(left), "%s=%s", s->name,
				 s->arg ? s->arg : s->implied);
		else if (s->implied && s->sets >= 0)
			snprintf(left, sizeof(left), "%c%c%s--%s", s->sopt ? '-' : ' ',
				 s->sopt ? s->sopt : ' ', s->sopt ? ", " : "  ", s->name);
		else
			snprintf(left, sizeof(left), "%c%c%s--%s%s%s%s", s->sopt ? '-' : ' ',
				 s->sopt ? s->sopt : ' ', s->sopt ? ", " : "  ", s->name,
				 s->implied ? "[=" : "=", s->arg, s->implied ? "]" : "");
		if (client == NBDC_IN_PLUGIN)
			fprintf(f, "%-22s %s%s\n", left, s->help, dflt);
		else
			fprintf(f, "  %-26s %s%s\n", left, s->help, dflt);
		if (s->alias)
			fprintf(f, "%*s (also %s%s)\n", client == NBDC_IN_PLUGIN ? 22 : 28, "",
				client == NBDC_IN_PLUGIN ? "" : "--", s->alias);
	}
}
