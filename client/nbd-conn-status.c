/* SPDX-License-Identifier: BSD-3-Clause */
/* smcrbd client engine: status.  Counters, the text and JSON dump and
 * the control socket's "nbd" section (nbd-conn-int.h). */
#include <config.h>

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "jsonw.h"
#include "nbd-conn-int.h"
#include "strbuf.h"

void nbdc_get_stats(struct nbdc *e, struct nbdc_stats *st)
{
	unsigned i;

	memset(st, 0, sizeof(*st));
	st->requests = ALOAD(&e->st_requests);
	st->completed = ALOAD(&e->st_completed);
	st->errors = ALOAD(&e->st_errors);
	st->bytes_read = ALOAD(&e->st_read);
	st->bytes_written = ALOAD(&e->st_written);
	st->timed_out = ALOAD(&e->st_timed_out);
	st->inflight = ALOAD(&e->st_inflight);
	for (i = 0; i < e->nconns; i++) {
		struct nbdc_conn *c = &e->conns[i];

		st->reconnects += ALOAD(&c->st_reconnects);
		st->reconnect_failures += ALOAD(&c->st_failed);
		st->connections_lost += ALOAD(&c->st_lost);
		st->resent += ALOAD(&c->st_resent);
		st->writes_in_place += ALOAD(&c->st_in_place);
		st->connections_up += ALOAD(&c->state) == C_UP;
	}
}

int nbdc_conn_times(struct nbdc *e, unsigned conn, struct nbdc_conn_times *t)
{
	struct nbdc_conn *c;

	if (conn >= e->nconns)
		return -EINVAL;
	c = &e->conns[conn];
	t->attempt_ms = ALOAD(&c->t_attempt_ms);
	t->transport_ms = ALOAD(&c->t_transport_ms);
	t->handshake_ms = ALOAD(&c->t_handshake_ms);
	t->up_ms = ALOAD(&c->t_up_ms);
	return 0;
}

/* One connection's state, copied under its lock. */
struct conn_view {
	char tname[24], peer[64], err[96];
	bool up;
	int64_t down;
};

static void conn_view(struct nbdc_conn *c, int64_t now, struct conn_view *v)
{
	v->up = ALOAD(&c->state) == C_UP;
	pthread_mutex_lock(&c->lock);
	memcpy(v->tname, c->tname, sizeof(v->tname));
	memcpy(v->peer, c->peer, sizeof(v->peer));
	memcpy(v->err, c->last_error, sizeof(v->err));
	v->down = v->up ? 0 : now - c->down_since;
	pthread_mutex_unlock(&c->lock);
}

/* HOST:PORT, [V6]:PORT. */
static void server_name(const struct nbdc_server *s, char *buf, size_t len)
{
	bool v6 = strchr(s->host, ':') != NULL;

	snprintf(buf, len, "%s%s%s:%s", v6 ? "[" : "", s->host, v6 ? "]" : "", s->port);
}

static int dump_json(struct nbdc *e, const struct nbdc_stats *st, char *buf, size_t len)
{
	struct json_object *o = json_object_new_object(), *s, *conns;
	int64_t now = now_ms();
	unsigned i;

	if (!o)
		return -ENOMEM;
	jsonw_str(o, "export", e->export_name);
	jsonw_str(o, "server", e->host);
	/* a number when it is one (the port of an nbd:// address) */
	if (e->port[0] && strspn(e->port, "0123456789") == strlen(e->port))
		jsonw_u64(o, "port", strtoull(e->port, NULL, 10));
	else
		jsonw_str(o, "port", e->port);
	jsonw_str(o, "transport", nbdc_transport_name(e->transport));
	if (e->nsrv > 1) {
		struct json_object *a = json_object_new_array();
		char hp[300];

		for (i = 0; a && i < e->nsrv; i++) {
			server_name(&e->srv[i], hp, sizeof(hp));
			json_object_array_add(a, json_object_new_string(hp));
		}
		jsonw_add(o, "servers", a);
	}
	jsonw_u64(o, "size", e->info.size);
	jsonw_u64(o, "flags", e->info.flags);
	jsonw_bool(o, "read_only", e->ro);
	jsonw_bool(o, "multi_conn", e->info.flags & NBD_FLAG_CAN_MULTI_CONN);
	jsonw_u64(o, "timeout_ms", e->timeout_ms);
	jsonw_u64(o, "connections_up", st->connections_up);
	s = json_object_new_object();
	jsonw_u64(s, "requests", st->requests);
	jsonw_u64(s, "completed", st->completed);
	jsonw_u64(s, "errors", st->errors);
	jsonw_u64(s, "inflight", st->inflight);
	jsonw_u64(s, "bytes_read", st->bytes_read);
	jsonw_u64(s, "bytes_written", st->bytes_written);
	jsonw_u64(s, "reconnects", st->reconnects);
	jsonw_u64(s, "reconnect_failures", st->reconnect_failures);
	jsonw_u64(s, "connections_lost", st->connections_lost);
	jsonw_u64(s, "resent", st->resent);
	jsonw_u64(s, "timed_out", st->timed_out);
	jsonw_u64(s, "writes_in_place", st->writes_in_place);
	jsonw_add(o, "stats", s);
	conns = json_object_new_array();
	jsonw_add(o, "connections", conns);
	for (i = 0; conns && i < e->nconns; i++) {
		struct nbdc_conn *c = &e->conns[i];
		struct json_object *j = json_object_new_object();
		struct conn_view v;

		if (!j)
			break;
		conn_view(c, now, &v);
		jsonw_u64(j, "id", i);
		jsonw_str(j, "state", v.up ? "up" : "down");
		jsonw_str(j, "transport", v.tname);
		jsonw_str(j, "peer", v.peer);
		jsonw_u64(j, "load", ALOAD(&c->load));
		jsonw_add(j, "down_ms", json_object_new_int64(v.down));
		jsonw_u64(j, "sent", ALOAD(&c->st_sent));
		jsonw_u64(j, "reconnects", ALOAD(&c->st_reconnects));
		jsonw_u64(j, "reconnect_failures", ALOAD(&c->st_failed));
		jsonw_u64(j, "lost", ALOAD(&c->st_lost));
		jsonw_u64(j, "resent", ALOAD(&c->st_resent));
		jsonw_str(j, "error", v.err);
		json_object_array_add(conns, j);
	}
	return jsonw_dump(o, buf, len);
}

int nbdc_dump(struct nbdc *e, char *buf, size_t len, bool json)
{
	char where[400];
	struct nbdc_stats st;
	size_t off = 0;
	int64_t now = now_ms();
	unsigned i;

	nbdc_get_stats(e, &st);
	if (json)
		return dump_json(e, &st, buf, len);
	nbdc_uri_format(e->transport, false, e->host, e->port, "", where, sizeof(where));
	where[strlen(where) - (e->transport == NBDC_UNIX ? 0 : 1)] = '\0';
	off = strbuf_out(buf, len, off,
		  "export '%s' at %s: %" PRIu64 " bytes, %s%s, %u of %u connection(s) up, timeout %u ms\n"
		  "  requests %" PRIu64 ", completed %" PRIu64 ", errors %" PRIu64
		  ", in flight %u, read %" PRIu64 " B, written %" PRIu64 " B\n"
		  "  reconnects %" PRIu64 ", reconnect failures %" PRIu64
		  ", connections lost %" PRIu64 ", resent %" PRIu64 ", timed out %" PRIu64 "\n",
		  e->export_name, where, e->info.size, e->ro ? "read-only" : "read-write",
		  (e->info.flags & NBD_FLAG_CAN_MULTI_CONN) ? ", multi-conn" : "",
		  st.connections_up, e->nconns, e->timeout_ms, st.requests,
		  st.completed, st.errors, st.inflight, st.bytes_read,
		  st.bytes_written, st.reconnects, st.reconnect_failures,
		  st.connections_lost, st.resent, st.timed_out);
	for (i = 0; e->nsrv > 1 && i < e->nsrv; i++) {
		char hp[300];

		server_name(&e->srv[i], hp, sizeof(hp));
		off = strbuf_out(buf, len, off, "%s%s%s", i ? ", " : "  servers (in turn): ",
				 hp, i + 1 == e->nsrv ? "\n" : "");
	}
	for (i = 0; i < e->nconns; i++) {
		struct nbdc_conn *c = &e->conns[i];
		struct conn_view v;

		conn_view(c, now, &v);
		off = strbuf_out(buf, len, off, "  connection %u: %s", i, v.up ? "up" : "down");
		if (!v.up)
			off = strbuf_out(buf, len, off, " for %" PRId64 ".%01" PRId64 " s",
					 v.down / 1000, (v.down % 1000) / 100);
		off = strbuf_out(buf, len, off,
			  ", %s %s, %u request(s), sent %" PRIu64 ", reconnects %" PRIu64
			  ", lost %" PRIu64 ", resent %" PRIu64 "%s%s\n",
			  v.tname, v.peer, ALOAD(&c->load), ALOAD(&c->st_sent),
			  ALOAD(&c->st_reconnects), ALOAD(&c->st_lost),
			  ALOAD(&c->st_resent), v.err[0] ? ", last error: " : "", v.err);
	}
	return off >= len ? -ENOSPC : (int)off;
}

int nbdc_ctl_dump(void *arg, char *buf, size_t len, bool json)
{
	return nbdc_dump(arg, buf, len, json);
}

int nbdc_ctl_command(void *arg, const char *line, char *reply, size_t len)
{
	struct nbdc *e = arg;

	if (!strcmp(line, "nbd drop")) {
		nbdc_drop_connections(e);
		return snprintf(reply, len, "ok: dropped %u connection(s)\n", e->nconns);
	}
	if (!strncmp(line, "nbd ", 4))
		return -EINVAL;
	return -ENOSYS;
}

void nbdc_drop_connections(struct nbdc *e)
{
	unsigned i;

	for (i = 0; i < e->nconns; i++) {
		ASTORE(&e->conns[i].drop, 1);
		nbdc_conn_wake(&e->conns[i]);
	}
}
