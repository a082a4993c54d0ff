/* SPDX-License-Identifier: BSD-3-Clause */
/* smcrd: I/O counters per export and per client (smcrd-iostat.h). */
#include <config.h>

#include <stdlib.h>
#include <string.h>

#include "nbd-proto.h"
#include "smcrd-iostat.h"

const uint32_t iostat_bound_us[IOSTAT_BUCKETS - 1] = {
	10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10000, 25000, 100000,
	1000000, 10000000,
};

void iostat_init(struct iostat_table *t)
{
	memset(t, 0, sizeof(*t));
	pthread_mutex_init(&t->lock, NULL);
}

void iostat_fini(struct iostat_table *t)
{
	struct iostat_entry *e, *n;

	for (e = t->head; e; e = n) {
		n = e->next;
		free(e);
	}
	t->head = t->tail = NULL;
	pthread_mutex_destroy(&t->lock);
}

struct iostat *iostat_get(struct iostat_table *t, enum iostat_kind kind, const char *name)
{
	struct iostat_entry *e;
	size_t len;

	pthread_mutex_lock(&t->lock);
	if (kind == IOSTAT_CLIENT && t->nclients >= IOSTAT_MAX_CLIENTS) {
		for (e = t->head; e; e = e->next)
			if (e->kind == kind && !strcmp(e->name, name))
				goto out;
		name = "other";
	}
	for (e = t->head; e; e = e->next)
		if (e->kind == kind && !strcmp(e->name, name))
			goto out;
	len = strlen(name);
	e = calloc(1, sizeof(*e) + len + 1);
	if (!e)
		goto out;
	e->kind = kind;
	memcpy(e->name, name, len + 1);
	if (t->tail)
		t->tail->next = e;
	else
		t->head = e;
	t->tail = e;
	if (kind == IOSTAT_CLIENT)
		t->nclients++;
out:
	pthread_mutex_unlock(&t->lock);
	return e ? &e->st : NULL;
}

#define ADD(f, v) __atomic_add_fetch(&(f), (v), __ATOMIC_RELAXED)

void iostat_add(struct iostat *s, uint16_t type, uint64_t bytes, uint32_t error,
		uint64_t lat_us)
{
	unsigned b = 0;

	if (!s)
		return;
	ADD(s->requests, 1);
	if (type == NBD_CMD_READ) {
		ADD(s->reads, 1);
		ADD(s->bytes_read, bytes);
	} else if (type == NBD_CMD_WRITE) {
		ADD(s->writes, 1);
		ADD(s->bytes_written, bytes);
	}
	if (error)
		ADD(s->errors, 1);
	while (b < IOSTAT_BUCKETS - 1 && lat_us > iostat_bound_us[b])
		b++;
	ADD(s->lat[b], 1);
	ADD(s->lat_sum_us, lat_us);
}

void iostat_conn(struct iostat *s, int delta)
{
	if (!s)
		return;
	if (delta > 0) {
		ADD(s->connections, 1);
		ADD(s->connections_total, 1);
	} else {
		__atomic_sub_fetch(&s->connections, 1, __ATOMIC_RELAXED);
	}
}

#define LD(f) __atomic_load_n(&(f), __ATOMIC_RELAXED)

void iostat_read(const struct iostat *s, struct iostat *o)
{
	unsigned i;

	o->requests = LD(s->requests);
	o->reads = LD(s->reads);
	o->writes = LD(s->writes);
	o->bytes_read = LD(s->bytes_read);
	o->bytes_written = LD(s->bytes_written);
	o->errors = LD(s->errors);
	o->connections = LD(s->connections);
	o->connections_total = LD(s->connections_total);
	o->lat_sum_us = LD(s->lat_sum_us);
	for (i = 0; i < IOSTAT_BUCKETS; i++)
		o->lat[i] = LD(s->lat[i]);
}
