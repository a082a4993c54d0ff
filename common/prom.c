/* SPDX-License-Identifier: BSD-3-Clause */
/* smcrbd: smcrd's counters in the Prometheus text exposition format 0.0.4,
 * from its status JSON (the control socket's status-json): smcrctl metrics
 * and smcrd --metrics-listen print the same text. */
#include <config.h>

#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>

#include "prom.h"

/* A label value with \\, " and newlines escaped. */
static void prom_label(FILE *f, const char *v)
{
	for (; *v; v++) {
		if (*v == '\\' || *v == '"')
			fprintf(f, "\\%c", *v);
		else if (*v == '\n')
			fputs("\\n", f);
		else
			putc(*v, f);
	}
}

static void prom_head(FILE *f, const char *name, const char *type, const char *help)
{
	fprintf(f, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

/* One sample: name{pid="P",KEY="VAL"[,extra]} value.  pid: 0 for none. */
static void prom_sample(FILE *f, const char *name, int pid, const char *key, const char *val,
			const char *extra, const char *value)
{
	bool any = pid || key || extra;

	fprintf(f, "%s%s", name, any ? "{" : "");
	if (pid)
		fprintf(f, "pid=\"%d\"%s", pid, key || extra ? "," : "");
	if (key) {
		fprintf(f, "%s=\"", key);
		prom_label(f, val);
		fprintf(f, "\"%s", extra ? "," : "");
	}
	if (extra)
		fprintf(f, "%s", extra);
	fprintf(f, "%s %s\n", any ? "}" : "", value);
}

static void prom_u64(FILE *f, const char *name, int pid, const char *key, const char *val, uint64_t v)
{
	char num[32];

	snprintf(num, sizeof(num), "%" PRIu64, v);
	prom_sample(f, name, pid, key, val, NULL, num);
}


/* The per-export or per-client families of all docs. */
static void prom_io(FILE *f, const struct prom_doc *d, unsigned nd, const char *kind)
{
	static const struct {
		const char *name, *key, *type, *help;
	} fam[] = {
		{ "connections", "connections", "gauge", "connections open now" },
		{ "connections_total", "connections_total", "counter", "connections since the start" },
		{ "requests_total", "requests", "counter", "NBD requests answered" },
		{ "reads_total", "reads", "counter", "NBD READ requests answered" },
		{ "writes_total", "writes", "counter", "NBD WRITE requests answered" },
		{ "read_bytes_total", "bytes_read", "counter", "bytes read (READ replies' data)" },
		{ "written_bytes_total", "bytes_written", "counter", "bytes written (WRITE payloads)" },
		{ "errors_total", "errors", "counter", "requests answered with an NBD error" },
	};
	char name[96], arr[16], extra[48], num[48];
	unsigned i, k, b;

	snprintf(arr, sizeof(arr), "%s_io", kind);
	for (i = 0; i < sizeof(fam) / sizeof(fam[0]); i++) {
		char help[96];

		snprintf(name, sizeof(name), "smcrd_%s_%s", kind, fam[i].name);
		snprintf(help, sizeof(help), "%s, per %s", fam[i].help, kind);
		prom_head(f, name, fam[i].type, help);
		for (k = 0; k < nd; k++) {
			const struct json *a = json_get(d[k].sec, arr), *e;

			for (e = a ? a->child : NULL; e; e = e->next)
				prom_u64(f, name, d[k].pid, kind, json_get_str(e, kind, "?"),
					 json_get_u64(e, fam[i].key, 0));
		}
	}
	snprintf(name, sizeof(name), "smcrd_%s_request_duration_seconds", kind);
	snprintf(extra, sizeof(extra), "request received to reply queued, per %s", kind);
	prom_head(f, name, "histogram", extra);
	for (k = 0; k < nd; k++) {
		const struct json *a = json_get(d[k].sec, arr), *bounds, *e;

		bounds = json_get(d[k].sec, "latency_bounds_us");
		for (e = a ? a->child : NULL; e; e = e->next) {
			const struct json *lat = json_get(e, "latency"), *c, *bd;
			const char *who = json_get_str(e, kind, "?");
			uint64_t cum = 0;

			snprintf(name, sizeof(name), "smcrd_%s_request_duration_seconds_bucket", kind);
			for (c = lat ? lat->child : NULL, bd = bounds ? bounds->child : NULL, b = 0; c;
			     c = c->next, b++) {
				cum += strtoull(c->text ? c->text : "0", NULL, 10);
				if (bd) {
					snprintf(extra, sizeof(extra), "le=\"%g\"",
						 strtod(bd->text ? bd->text : "0", NULL) / 1e6);
					bd = bd->next;
				} else {
					snprintf(extra, sizeof(extra), "le=\"+Inf\"");
				}
				snprintf(num, sizeof(num), "%" PRIu64, cum);
				prom_sample(f, name, d[k].pid, kind, who, extra, num);
			}
			snprintf(name, sizeof(name), "smcrd_%s_request_duration_seconds_sum", kind);
			snprintf(num, sizeof(num), "%.6f",
				 (double)json_get_u64(e, "latency_sum_us", 0) / 1e6);
			prom_sample(f, name, d[k].pid, kind, who, NULL, num);
			snprintf(name, sizeof(name), "smcrd_%s_request_duration_seconds_count", kind);
			snprintf(num, sizeof(num), "%" PRIu64, cum);
			prom_sample(f, name, d[k].pid, kind, who, NULL, num);
		}
	}
}

void prom_print(FILE *f, const struct prom_doc *d, unsigned nd)
{
	static const struct {
		const char *name, *key, *type, *help;
	} g[] = {
		{ "smcrd_clients", "clients", "gauge", "clients connected (handshaking or not)" },
		{ "smcrd_connections", "connections", "gauge", "connections in the transmission phase" },
		{ "smcrd_max_clients", "max_clients", "gauge", "the max-clients setting" },
		{ "smcrd_requests_total", "requests", "counter", "NBD requests received" },
	}, lim[] = {
		{ "smcrd_refused_max_clients_total", "refused_max_clients", "counter",
		  "connections refused at max-clients" },
		{ "smcrd_refused_handshakes_total", "refused_handshakes", "counter",
		  "connections refused at max-handshakes" },
		{ "smcrd_refused_per_address_total", "refused_per_address", "counter",
		  "connections refused at max-clients-per-address" },
		{ "smcrd_handshake_timeouts_total", "handshake_timeouts", "counter",
		  "handshakes timed out" },
		{ "smcrd_request_timeouts_total", "request_timeouts", "counter",
		  "connections closed: a request's payload stalled" },
	}, smcr[] = {
		{ "smcrd_smcr_connections_total", "connections", "counter",
		  "libsmcr connections since the start or reset" },
		{ "smcrd_smcr_smc_connections_total", "smc_connections", "counter",
		  "libsmcr connections on SMC-R" },
		{ "smcrd_smcr_fallbacks_total", "fallbacks", "counter",
		  "libsmcr connections that fell back to TCP" },
		{ "smcrd_smcr_failovers_total", "failovers", "counter", "SMC-R link failovers" },
		{ "smcrd_smcr_link_failures_total", "link_failures", "counter", "SMC-R links failed" },
		{ "smcrd_smcr_sent_bytes_total", "bytes_sent", "counter", "bytes sent over SMC-R" },
		{ "smcrd_smcr_received_bytes_total", "bytes_recv", "counter",
		  "bytes received over SMC-R" },
	};
	unsigned i, k;
	bool any_smcr = false;

	for (i = 0; i < sizeof(g) / sizeof(g[0]); i++) {
		prom_head(f, g[i].name, g[i].type, g[i].help);
		for (k = 0; k < nd; k++)
			prom_u64(f, g[i].name, d[k].pid, NULL, NULL, json_get_u64(d[k].sec, g[i].key, 0));
	}
	for (i = 0; i < sizeof(lim) / sizeof(lim[0]); i++) {
		prom_head(f, lim[i].name, lim[i].type, lim[i].help);
		for (k = 0; k < nd; k++)
			prom_u64(f, lim[i].name, d[k].pid, NULL, NULL,
				 json_get_u64(json_get(d[k].sec, "limits"), lim[i].key, 0));
	}
	prom_head(f, "smcrd_export_size_bytes", "gauge", "an export's size");
	for (k = 0; k < nd; k++) {
		const struct json *a = json_get(d[k].sec, "exports"), *e;

		for (e = a ? a->child : NULL; e; e = e->next)
			prom_u64(f, "smcrd_export_size_bytes", d[k].pid, "export",
				 json_get_str(e, "name", "?"), json_get_u64(e, "size", 0));
	}
	prom_io(f, d, nd, "export");
	prom_io(f, d, nd, "client");
	for (k = 0; k < nd; k++)
		any_smcr |= d[k].stats && d[k].stats->type == JSON_OBJ;
	for (i = 0; any_smcr && i < sizeof(smcr) / sizeof(smcr[0]); i++) {
		prom_head(f, smcr[i].name, smcr[i].type, smcr[i].help);
		for (k = 0; k < nd; k++)
			if (d[k].stats && d[k].stats->type == JSON_OBJ)
				prom_u64(f, smcr[i].name, d[k].pid, NULL, NULL,
					 json_get_u64(d[k].stats, smcr[i].key, 0));
	}
}
