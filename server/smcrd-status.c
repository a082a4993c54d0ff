/* SPDX-License-Identifier: BSD-3-Clause */
/* smcrd's status: the "smcrd" section of the control socket (smcrctl
 * status, in text and JSON: exports, clients, I/O counters per export and
 * client, engine counters, settings) and, from the same JSON, the
 * --metrics-listen HTTP page. */
#include <config.h>

#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "smcrd-conf.h"
#include "smcrd-engine.h"
#include "smcrd-int.h"
#include "smcrd-export.h"
#include "applog.h"
#include "json.h"
#include "jsonw.h"
#include "prom.h"
#include "smcrd-metrics.h"
#include "strbuf.h"

/* The I/O counters per export and client: "export_io" and "client_io",
 * arrays in order of first use, and "latency_bounds_us", the upper bounds
 * of their "latency" buckets (counts per bucket; the last one has no
 * bound). */
static void iostat_json(struct server *s, struct json_object *o)
{
	struct json_object *arr[2], *b = json_object_new_array();
	const struct iostat_entry *e;
	unsigned i;

	for (i = 0; b && i < IOSTAT_BUCKETS - 1; i++)
		json_object_array_add(b, json_object_new_int64(iostat_bound_us[i]));
	jsonw_add(o, "latency_bounds_us", b);
	arr[0] = json_object_new_array();
	arr[1] = json_object_new_array();
	jsonw_add(o, "export_io", arr[0]);
	jsonw_add(o, "client_io", arr[1]);
	pthread_mutex_lock(&s->iostat.lock);
	for (e = s->iostat.head; e; e = e->next) {
		struct json_object *j, *lat, *a = arr[e->kind == IOSTAT_CLIENT];
		struct iostat st;

		if (!a || !(j = json_object_new_object()))
			continue;
		iostat_read(&e->st, &st);
		jsonw_str(j, e->kind == IOSTAT_CLIENT ? "client" : "export", e->name);
		jsonw_u64(j, "connections", st.connections);
		jsonw_u64(j, "connections_total", st.connections_total);
		jsonw_u64(j, "requests", st.requests);
		jsonw_u64(j, "reads", st.reads);
		jsonw_u64(j, "writes", st.writes);
		jsonw_u64(j, "bytes_read", st.bytes_read);
		jsonw_u64(j, "bytes_written", st.bytes_written);
		jsonw_u64(j, "errors", st.errors);
		jsonw_u64(j, "latency_sum_us", st.lat_sum_us);
		lat = json_object_new_array();
		for (i = 0; lat && i < IOSTAT_BUCKETS; i++)
			json_object_array_add(lat, json_object_new_uint64(st.lat[i]));
		jsonw_add(j, "latency", lat);
		json_object_array_add(a, j);
	}
	pthread_mutex_unlock(&s->iostat.lock);
}

/* The "smcrd" section of the control socket (smcrctl status): exports,
 * clients, engine counters, as JSON. */
static int ctl_dump_json(struct server *s, const struct engine_stats *st,
			 const struct smcr_stats *sst, unsigned clients, unsigned conns,
			 char *buf, size_t len)
{
	struct json_object *o = json_object_new_object(), *lim, *set, *exps;
	const struct cfg_setting *cs;
	char v[PATH_MAX + 8];
	unsigned i;

	if (!o)
		return -ENOMEM;
	lim = json_object_new_object();
	jsonw_u64(lim, "max_handshakes", s->cfg.max_handshakes);
	jsonw_u64(lim, "handshake_timeout", s->cfg.handshake_timeout);
	jsonw_u64(lim, "refused_max_clients", s->refused_max_clients);
	jsonw_u64(lim, "refused_handshakes", s->refused_handshakes);
	jsonw_u64(lim, "handshakes_evicted", s->handshakes_evicted);
	jsonw_u64(lim, "handshake_timeouts", s->handshake_timeouts);
	jsonw_u64(lim, "accept_paused", s->accept_paused);
	jsonw_u64(lim, "request_timeout", s->cfg.request_timeout);
	jsonw_u64(lim, "request_timeouts", st->request_timeouts);
	jsonw_u64(lim, "idle_timeout", s->cfg.idle_timeout);
	jsonw_u64(lim, "idle_timeouts", st->idle_timeouts);
	jsonw_u64(lim, "max_clients_per_address", s->cfg.max_per_address);
	jsonw_u64(lim, "refused_per_address", s->refused_per_address);
	jsonw_u64(lim, "max_handshakes_per_address", hs_per_address(s));
	jsonw_u64(lim, "refused_handshakes_per_address", s->refused_hs_per_address);
	jsonw_u64(lim, "max_link_groups_per_address", s->cfg.max_lgrs_per_address);
	jsonw_u64(lim, "max_memory_per_address", hs_mem_per_address(s));
	jsonw_u64(lim, "refused_link_groups_per_address", sst->lgrs_refused_per_address);
	jsonw_add(o, "limits", lim);
	jsonw_u64(o, "clients", clients);
	jsonw_u64(o, "connections", conns);
	jsonw_u64(o, "max_clients", s->cfg.max_clients);
	jsonw_u64(o, "requests", st->requests);
	jsonw_u64(o, "zc_writes", st->zc_writes);
	jsonw_u64(o, "zc_reads", st->zc_reads);
	jsonw_u64(o, "file_reads", st->file_reads);
	jsonw_u64(o, "inline_writes", st->inline_writes);
	set = json_object_new_object();
	for (cs = smcrd_settings; set && cs->name; cs++) {
		uint64_t n;

		config_setting_format(&s->cfg, cs, v, sizeof(v));
		if (cs->type == CFG_BOOL)
			jsonw_bool(set, cs->name, !strcmp(v, "yes"));
		else if (config_setting_number(&s->cfg, cs, &n))
			jsonw_u64(set, cs->name, n);
		else
			jsonw_str(set, cs->name, v);
	}
	jsonw_add(o, "settings", set);
	iostat_json(s, o);
	exps = json_object_new_array();
	jsonw_add(o, "exports", exps);
	for (i = 0; exps && s->table && i < s->table->n; i++) {
		const struct export *e = s->table->v[i];
		struct json_object *j = json_object_new_object();

		if (!j)
			break;
		jsonw_str(j, "name", e->spec.name);
		jsonw_str(j, "path", e->spec.path);
		jsonw_u64(j, "size", e->size);
		jsonw_bool(j, "read_only", e->spec.read_only);
		json_object_array_add(exps, j);
	}
	return jsonw_dump(o, buf, len);
}

/* The I/O counters per export and client, one line each. */
static size_t iostat_text(struct server *s, char *buf, size_t len, size_t off)
{
	const struct iostat_entry *e;

	pthread_mutex_lock(&s->iostat.lock);
	for (e = s->iostat.head; e; e = e->next) {
		struct iostat st;

		iostat_read(&e->st, &st);
		off = strbuf_out(buf, len, off,
				 "io %s %s: connections %llu (%llu in all), requests %llu "
				 "(reads %llu, writes %llu), bytes read %llu, written %llu, "
				 "errors %llu, mean latency %llu us\n",
				 e->kind == IOSTAT_CLIENT ? "client" : "export", e->name,
				 (unsigned long long)st.connections,
				 (unsigned long long)st.connections_total,
				 (unsigned long long)st.requests, (unsigned long long)st.reads,
				 (unsigned long long)st.writes, (unsigned long long)st.bytes_read,
				 (unsigned long long)st.bytes_written, (unsigned long long)st.errors,
				 (unsigned long long)(st.requests ? st.lat_sum_us / st.requests : 0));
	}
	pthread_mutex_unlock(&s->iostat.lock);
	return off;
}

/* The "smcrd" section of the control socket (smcrctl status): exports,
 * clients, engine counters.  Runs on the control thread. */
static int ctl_dump(void *arg, char *buf, size_t len, bool json)
{
	struct server *s = arg;
	struct engine_stats st = { 0 };
	struct smcr_stats sst = { 0 };
	const struct cfg_setting *cs;
	char v[PATH_MAX + 8];
	size_t off = 0;
	unsigned i, clients, conns = s->engine ? engine_connections(s->engine) : 0;
	int r;

	if (s->engine)
		engine_get_stats(s->engine, &st);
	if (s->smcr)
		smcr_ctx_stats(s->smcr, &sst);
	pthread_mutex_lock(&s->lock);
	clients = s->clients;
	if (json) {
		r = ctl_dump_json(s, &st, &sst, clients, conns, buf, len);
		pthread_mutex_unlock(&s->lock);
		return r;
	}
	off = strbuf_out(buf, len, off,
			 "limits: max-handshakes %u, handshake-timeout %u s; refused at "
			 "max-clients %llu, at max-handshakes %llu (evicted %llu), handshake "
			 "timeouts %llu, "
			 "accept paused %llu; request-timeout %u s, request timeouts %llu; "
			 "max-clients-per-address %u, refused %llu; "
			 "max-link-groups-per-address %u, refused %llu\n",
			 s->cfg.max_handshakes, s->cfg.handshake_timeout,
			 (unsigned long long)s->refused_max_clients,
			 (unsigned long long)s->refused_handshakes,
			 (unsigned long long)s->handshakes_evicted,
			 (unsigned long long)s->handshake_timeouts,
			 (unsigned long long)s->accept_paused, s->cfg.request_timeout,
			 (unsigned long long)st.request_timeouts, s->cfg.max_per_address,
			 (unsigned long long)s->refused_per_address, s->cfg.max_lgrs_per_address,
			 (unsigned long long)sst.lgrs_refused_per_address);
	off = strbuf_out(buf, len, off,
			 "clients %u (in transmission %u, max %u), requests %llu, zero-copy writes %llu, "
			 "zero-copy reads %llu, sendfile reads %llu, inline writes %llu\n",
			 clients, conns, s->cfg.max_clients, (unsigned long long)st.requests,
			 (unsigned long long)st.zc_writes, (unsigned long long)st.zc_reads,
			 (unsigned long long)st.file_reads,
			 (unsigned long long)st.inline_writes);
	for (i = 0; s->table && i < s->table->n; i++) {
		const struct export *e = s->table->v[i];

		off = strbuf_out(buf, len, off, "export %s: %s, %llu bytes%s\n", e->spec.name,
				 e->spec.path, (unsigned long long)e->size,
				 e->spec.read_only ? ", read-only" : "");
	}
	off = iostat_text(s, buf, len, off);
	off = strbuf_out(buf, len, off, "settings:");
	for (cs = smcrd_settings; cs->name; cs++) {
		config_setting_format(&s->cfg, cs, v, sizeof(v));
		off = strbuf_out(buf, len, off, " %s %s%s", cs->name, v, cs[1].name ? "," : "\n");
	}
	pthread_mutex_unlock(&s->lock);
	return off >= len ? -ENOSPC : (int)off;
}

void status_ctl_open(struct server *s)
{
	struct smcr_ctl_section sec = { .name = "smcrd", .dump = ctl_dump, .arg = s };
	int r = smcr_ctl_open(s->smcr, "smcrd", &s->ctl);

	if (r < 0) {
		char dir[108];
		const char *why = NULL;

		smcr_ctl_dir(dir, sizeof(dir));
		if (smcr_ctl_dir_check(dir, &why) < 0 && why)
			log_err("no control socket (smcrctl): %s: %s", dir, why);
		else
			log_warn("no control socket (smcrctl): %s", strerror(-r));
		return;
	}
	if (!s->ctl)
		return;
	smcr_ctl_add_section(s->ctl, &sec);
	if (s->ctl_gid != (gid_t)-1) {
		r = smcr_ctl_set_group(s->ctl, s->ctl_gid);
		if (r < 0)
			log_warn("ctl-group %s: %s (root and uid %u only)", s->cfg.ctl_group,
				 strerror(-r), (unsigned int)geteuid());
	}
}

/* GET /metrics: smcrctl metrics' text, from the same status JSON (the
 * smcrd section and libsmcr's counters since the start). */
static char *metrics_body(void *arg, size_t *lenp)
{
	struct server *s = arg;
	struct json *sec = NULL, *stats = NULL;
	struct prom_doc d = { 0 };
	size_t cap = 64 << 10;
	char *buf = NULL, *out = NULL, err[128];
	FILE *f;
	int n;

	for (;;) {
		char *nb = realloc(buf, cap);

		if (!nb)
			goto out;
		buf = nb;
		n = ctl_dump(s, buf, cap, true);
		if (n != -ENOSPC || cap >= (64u << 20))
			break;
		cap *= 2;
	}
	if (n < 0)
		goto out;
	sec = json_parse(buf, err, sizeof(err));
	if (!sec) {
		log_warn("metrics: the status JSON does not parse: %s", err);
		goto out;
	}
	if (s->smcr) {
		struct smcr_stats st;

		smcr_ctx_stats(s->smcr, &st);
		snprintf(buf, cap, "{\"connections\":%llu,\"smc_connections\":%llu,"
			 "\"fallbacks\":%llu,\"failovers\":%llu,\"link_failures\":%llu,"
			 "\"bytes_sent\":%llu,\"bytes_recv\":%llu}",
			 (unsigned long long)st.connections,
			 (unsigned long long)st.smc_connections,
			 (unsigned long long)st.fallbacks, (unsigned long long)st.failovers,
			 (unsigned long long)st.link_failures, (unsigned long long)st.bytes_sent,
			 (unsigned long long)st.bytes_recv);
		stats = json_parse(buf, err, sizeof(err));
	}
	d.sec = sec;
	d.stats = stats;
	f = open_memstream(&out, lenp);
	if (!f)
		goto out;
	prom_print(f, &d, 1);
	if (fclose(f)) {
		free(out);
		out = NULL;
	}
out:
	json_free(stats);
	json_free(sec);
	free(buf);
	return out;
}

void status_metrics_serve(struct server *s)
{
	int r;

	if (s->metrics_fd < 0)
		return;
	r = metrics_start(s->metrics_fd, metrics_body, s, &s->metrics);
	s->metrics_fd = -1;
	if (r < 0)
		log_err("metrics-listen %s: %s (no metrics over HTTP)", s->cfg.metrics_listen,
			strerror(-r));
}
