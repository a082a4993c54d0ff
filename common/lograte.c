/* SPDX-License-Identifier: BSD-3-Clause */
/* smcrbd: per-kind, per-client and per-interval rate limits of log lines. */
#include <config.h>

#include <pthread.h>
#include <arpa/inet.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "lograte.h"
#include "monotime.h"

#define CLIENT_SLOTS	256		/* addresses tracked (hashed, replaced) */
#define ADDR_MAX	48

struct client_slot {
	char addr[ADDR_MAX];
	struct lograte_bucket b;
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct lograte_bucket kinds[LOGRATE_KINDS];
static unsigned long held[LOGRATE_KINDS];
static struct client_slot clients[CLIENT_SLOTS];

static const char *const kind_names[LOGRATE_KINDS] = {
	[LOGRATE_HANDSHAKE] = "handshake",
	[LOGRATE_TLS] = "TLS",
	[LOGRATE_SESSION] = "session",
	[LOGRATE_PROTOCOL] = "protocol error",
};

static void refill(struct lograte_bucket *b, int64_t now, double burst, double rate)
{
	if (!b->at_ms) {
		b->tokens = burst;
	} else if (now > b->at_ms) {
		b->tokens += (double)(now - b->at_ms) * rate / 1000.0;
		if (b->tokens > burst)
			b->tokens = burst;
	}
	b->at_ms = now;
}

/* The address part of "host:port" / "[v6]:port" into out; of IPv6, its /64. */
static void addr_of(const char *peer, char *out)
{
	const char *end = strrchr(peer, ':');
	size_t n;

	if (peer[0] == '[') {
		const char *close = strchr(peer, ']');

		peer++;
		end = close;
	}
	n = end ? (size_t)(end - peer) : strlen(peer);
	if (n >= ADDR_MAX)
		n = ADDR_MAX - 1;
	memcpy(out, peer, n);
	out[n] = '\0';
	if (strchr(out, ':')) {
		/* IPv6: one bucket per /64 (a host may take any address of
		 * its /64, a new bucket each). */
		struct in6_addr a;

		if (inet_pton(AF_INET6, out, &a) == 1) {
			memset((unsigned char *)&a + 8, 0, 8);
			inet_ntop(AF_INET6, &a, out, ADDR_MAX);
		}
	}
}

static struct client_slot *client_slot(const char *addr)
{
	uint32_t h = 2166136261u;
	const unsigned char *p;
	struct client_slot *c;

	for (p = (const unsigned char *)addr; *p; p++)
		h = (h ^ *p) * 16777619u;
	c = &clients[h % CLIENT_SLOTS];
	if (strcmp(c->addr, addr)) {
		/* Another address had the slot: a fresh bucket. */
		snprintf(c->addr, sizeof(c->addr), "%s", addr);
		c->b.at_ms = 0;
	}
	return c;
}

bool lograte_ok(enum lograte_kind kind, const char *client)
{
	struct lograte_bucket *k = &kinds[kind];
	struct client_slot *c = NULL;
	unsigned long n = 0;
	int64_t now = now_ms();
	bool ok;

	pthread_mutex_lock(&lock);
	refill(k, now, LOGRATE_KIND_BURST, LOGRATE_KIND_RATE);
	if (client) {
		char addr[ADDR_MAX];

		addr_of(client, addr);
		c = client_slot(addr);
		refill(&c->b, now, LOGRATE_CLIENT_BURST, LOGRATE_CLIENT_RATE);
	}
	ok = k->tokens >= 1.0 && (!c || c->b.tokens >= 1.0);
	if (ok) {
		k->tokens -= 1.0;
		if (c)
			c->b.tokens -= 1.0;
		n = held[kind];
		held[kind] = 0;
	} else {
		held[kind]++;
	}
	pthread_mutex_unlock(&lock);
	if (n)
		log_warn("log: suppressed %lu %s messages (rate limit)", n, kind_names[kind]);
	return ok;
}

bool lograte_every_ok(struct lograte_every *e, unsigned interval_ms, unsigned long *nheld)
{
	bool ok;

	pthread_mutex_lock(&e->lock);
	/* A bucket of one token, refilled over interval_ms. */
	refill(&e->b, now_ms(), 1.0, interval_ms ? 1000.0 / interval_ms : 1e9);
	ok = e->b.tokens >= 1.0;
	if (ok) {
		e->b.tokens -= 1.0;
		*nheld = e->held;
		e->held = 0;
	} else {
		e->held++;
	}
	pthread_mutex_unlock(&e->lock);
	return ok;
}
