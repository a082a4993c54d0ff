/* SPDX-License-Identifier: BSD-3-Clause */
/* smcrbd: libFuzzer targets for the LLC and CDC state machines of a link
 * group (smcr/lgr.c, llc.c, conn.c), driven as tests/unit/smcr-lgr.c
 * drives them: a server and a client group, two ports each, joined by the
 * in-memory wire (tests/unit/memwire.c), with two links, CONFIRM LINK and
 * ADD LINK done and two connections streaming.  The input is a program of
 * steps: messages a hostile peer injects on either side's links, wire
 * deliveries, time passing, data sent and read, links cut, new RMBs
 * (CONFIRM RKEY).  fuzz-lgr-llc injects the 44 bytes as they come;
 * fuzz-lgr-cdc (FUZZ_LGR_CDC) makes each a CDC message for a connection
 * of that group and fuzzes the rest.
 *
 * The pair is built once per process, in an arena of its own (below):
 * every input starts from a copy of that state, byte for byte at the same
 * addresses, and ends with both groups destroyed and nothing left
 * allocated. */
#include <config.h>

#include <errno.h>
#include <string.h>
#include <sys/mman.h>

#include <sanitizer/asan_interface.h>

#include "fuzz.h"
#include "lgr.h"
#include "memwire.h"
#include "wire.h"

#define MAX_ENDS 32
#define NCONN 2
#define MAX_STEPS 256

struct host {
	unsigned int id, nports;
	struct smcr_lgr *lgr;
	struct memwire_end *ends[MAX_ENDS];
	unsigned int port_of[MAX_ENDS];
	unsigned int nends;
	struct smcr_conn conn[NCONN];
	bool conn_added[NCONN];
};

static struct host S, C;
static uint64_t clock_ms;
static const uint8_t *in;
static size_t in_left;

/* ---- the arena -------------------------------------------------------------
 * Building the pair (CONFIRM LINK, ADD LINK, CONFIRM RKEY, two connections)
 * cost more than most programs run on it.  The link is made with
 * --wrap=malloc,calloc,realloc,posix_memalign,free (Makefile.am): on the
 * fuzzing thread, inside LLVMFuzzerTestOneInput, the groups' and the
 * wire's memory comes from a bump arena.  After the first pair is up, the
 * used part of the arena and the globals are copied aside; each input
 * starts by copying them back.  ASan still sees every block: each is
 * unpoisoned while live, with poisoned headers and gaps between blocks
 * (overflows), and freed blocks stay poisoned until the next input (use
 * after free; no block is reused within an input).  Double and invalid
 * frees abort, and a block still live after the groups are destroyed is
 * reported as a leak.  A full arena falls back to malloc. */
#define ARENA_SIZE ((size_t)512 << 20)
#define ARENA_KEEP ((size_t)64 << 20)	/* resident between inputs at most */
#define ARENA_MAGIC 0xa4e7a4e7u

struct arena_hdr {
	uint64_t size;
	uint32_t magic;
	uint32_t live;
};

void *__real_malloc(size_t n);
void *__real_calloc(size_t n, size_t m);
void *__real_realloc(void *p, size_t n);
int __real_posix_memalign(void **p, size_t align, size_t n);
void __real_free(void *p);

static uint8_t *arena;
static size_t arena_top, arena_hw;	/* next free byte; highest top */
static size_t arena_live;		/* blocks allocated, not freed */
static __thread bool arena_on;		/* this thread, inside an input */
/* The snapshot: the arena below snap_top and its live blocks. */
static uint8_t *snap;
static size_t snap_top, snap_live;
static size_t *snap_blocks, snap_nblocks;	/* user offsets */
static size_t *blocks, nblocks, blocks_cap;	/* all since the snapshot */

static bool in_arena(const void *p)
{
	return arena && (const uint8_t *)p >= arena &&
	       (const uint8_t *)p < arena + ARENA_SIZE;
}

__attribute__((no_sanitize("address")))
static struct arena_hdr hdr_read(const uint8_t *user)
{
	const struct arena_hdr *h = (const struct arena_hdr *)(user - sizeof(*h));
	struct arena_hdr r;

	r.size = h->size;
	r.magic = h->magic;
	r.live = h->live;
	return r;
}

__attribute__((no_sanitize("address")))
static void hdr_write(uint8_t *user, uint64_t size, uint32_t live)
{
	struct arena_hdr *h = (struct arena_hdr *)(user - sizeof(*h));

	h->size = size;
	h->magic = ARENA_MAGIC;
	h->live = live;
}

static size_t round16(size_t n)
{
	return (n + 15) & ~(size_t)15;
}

/* NULL: not on the arena's thread, or the arena is full. */
static void *arena_alloc(size_t n, size_t align)
{
	size_t user;
	uint8_t *p;

	if (!arena_on || !arena)
		return NULL;
	if (n == 0)
		n = 1;
	if (align < 16)
		align = 16;
	/* 16 bytes of gap, then the header, then the block. */
	user = (arena_top + 32 + align - 1) & ~(align - 1);
	if (n > ARENA_SIZE || user + round16(n) > ARENA_SIZE)
		return NULL;
	if (nblocks == blocks_cap) {
		size_t cap = blocks_cap ? 2 * blocks_cap : 1024;
		size_t *b = __real_realloc(blocks, cap * sizeof(*b));

		if (!b)
			return NULL;
		blocks = b;
		blocks_cap = cap;
	}
	blocks[nblocks++] = user;
	p = arena + user;
	hdr_write(p, n, 1);
	arena_top = user + round16(n);
	if (arena_top > arena_hw)
		arena_hw = arena_top;
	arena_live++;
	__asan_unpoison_memory_region(p, n);
	memset(p, 0xbe, n);	/* as ASan's malloc fills, but all of it */
	return p;
}

static void arena_free(void *p)
{
	struct arena_hdr h = hdr_read(p);

	if (((uintptr_t)p & 15) || h.magic != ARENA_MAGIC) {
		fprintf(stderr, "fuzz-lgr: free(%p): not a block of the arena\n", p);
		abort();
	}
	if (!h.live) {
		fprintf(stderr, "fuzz-lgr: free(%p): double free\n", p);
		abort();
	}
	hdr_write(p, h.size, 0);
	arena_live--;
	__asan_poison_memory_region(p, round16((size_t)h.size));
}

void *__wrap_malloc(size_t n)
{
	void *p = arena_alloc(n, 16);

	return p ? p : __real_malloc(n);
}

void *__wrap_calloc(size_t n, size_t m)
{
	void *p;

	if (m && n > SIZE_MAX / m)
		return __real_calloc(n, m);
	p = arena_alloc(n * m, 16);
	if (!p)
		return __real_calloc(n, m);
	memset(p, 0, n * m);
	return p;
}

int __wrap_posix_memalign(void **pp, size_t align, size_t n)
{
	void *p = align && !(align & (align - 1)) ? arena_alloc(n, align) : NULL;

	if (!p)
		return __real_posix_memalign(pp, align, n);
	*pp = p;
	return 0;
}

void __wrap_free(void *p)
{
	if (p && in_arena(p))
		arena_free(p);
	else
		__real_free(p);
}

void *__wrap_realloc(void *p, size_t n)
{
	struct arena_hdr h;
	void *q;

	if (!p || !in_arena(p))
		return p ? __real_realloc(p, n) : __wrap_malloc(n);
	h = hdr_read(p);
	q = __wrap_malloc(n);
	if (!q)
		return NULL;
	memcpy(q, p, n < h.size ? n : (size_t)h.size);
	arena_free(p);
	return q;
}

static void arena_init(void)
{
	void *m = mmap(NULL, ARENA_SIZE, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);

	FUZZ_REQUIRE(m != MAP_FAILED);
	arena = m;
	__asan_poison_memory_region(arena, ARENA_SIZE);
}

static void arena_snapshot(void)
{
	size_t i;

	snap_top = arena_top;
	snap_live = arena_live;
	snap = __real_malloc(snap_top ? snap_top : 1);
	snap_blocks = __real_malloc((nblocks ? nblocks : 1) * sizeof(*snap_blocks));
	FUZZ_REQUIRE(snap && snap_blocks);
	__asan_unpoison_memory_region(arena, snap_top);
	memcpy(snap, arena, snap_top);
	for (i = 0; i < nblocks; i++)
		if (hdr_read(arena + blocks[i]).live)
			snap_blocks[snap_nblocks++] = blocks[i];
	__asan_poison_memory_region(arena, snap_top);
	for (i = 0; i < snap_nblocks; i++)
		__asan_unpoison_memory_region(arena + snap_blocks[i],
					      hdr_read(arena + snap_blocks[i]).size);
	nblocks = 0;
}

static void arena_restore(void)
{
	size_t i;

	__asan_unpoison_memory_region(arena, snap_top);
	memcpy(arena, snap, snap_top);
	__asan_poison_memory_region(arena, arena_hw);
	for (i = 0; i < snap_nblocks; i++)
		__asan_unpoison_memory_region(arena + snap_blocks[i],
					      hdr_read(arena + snap_blocks[i]).size);
	if (arena_hw > ARENA_KEEP)
		madvise(arena + ARENA_KEEP, arena_hw - ARENA_KEEP, MADV_DONTNEED);
	arena_top = arena_hw = snap_top;
	arena_live = snap_live;
	nblocks = 0;
}

static uint8_t next_byte(void)
{
	if (!in_left)
		return 0;
	in_left--;
	return *in++;
}

static struct memwire_end *end_of(struct smcr_link *l)
{
	return (struct memwire_end *)l;
}

static int end_index(struct host *h, struct smcr_link *l)
{
	unsigned int i;

	for (i = 0; i < h->nends; i++)
		if (&h->ends[i]->link == l)
			return (int)i;
	return -1;
}

static struct memwire_end *end_by_qp(uint32_t qpn, const uint8_t *gid)
{
	struct host *hs[2] = { &S, &C };
	unsigned int k, i;

	for (k = 0; k < 2; k++)
		for (i = 0; i < hs[k]->nends; i++)
			if (hs[k]->ends[i]->link.priv == (void *)(uintptr_t)qpn &&
			    gid[15] == hs[k]->id * 16 + hs[k]->port_of[i])
				return hs[k]->ends[i];
	return NULL;
}

static unsigned int qps_on_port(const struct host *h, unsigned int port)
{
	unsigned int i, n = 0;

	for (i = 0; i < h->nends; i++)
		n += h->port_of[i] == port;
	return n;
}

static bool port_used(struct host *h, unsigned int port)
{
	unsigned int i;

	for (i = 0; i < SMCR_LINK_SLOTS; i++) {
		struct smcr_link *l = h->lgr->links[i].link;
		int e = l ? end_index(h, l) : -1;

		if (e >= 0 && h->port_of[e] == port)
			return true;
	}
	return false;
}

static int op_link_create(struct smcr_lgr *lgr, const struct smcr_link_info *peer,
			  bool asym, struct smcr_link **linkp, struct smcr_link_info *local)
{
	struct host *h = lgr->owner;
	struct memwire_end *e;
	unsigned int port;

	(void)peer;
	if (h->nends == MAX_ENDS)
		return -ENOMEM;
	for (port = 0; port < h->nports; port++)
		if (!port_used(h, port))
			break;
	if (port == h->nports) {
		if (!asym || h->nports == 0)
			return -ENODEV;
		port = 0;
	}
	e = calloc(1, sizeof(*e));
	if (!e)
		return -ENOMEM;
	memwire_init(e, 64, &smcr_lgr_link_handler, lgr);
	memset(local, 0, sizeof(*local));
	local->qpn = 0x11 + qps_on_port(h, port);
	h->port_of[h->nends] = port;
	h->ends[h->nends++] = e;
	local->psn = 100 + h->nends;
	local->mtu = 3;
	local->gid[15] = (uint8_t)(h->id * 16 + port);
	local->mac[5] = (uint8_t)(h->id * 16 + port);
	e->link.priv = (void *)(uintptr_t)local->qpn;
	*linkp = &e->link;
	return 0;
}

static int op_link_connect(struct smcr_lgr *lgr, struct smcr_link *link,
			   const struct smcr_link_info *peer)
{
	struct memwire_end *p = end_by_qp(peer->qpn, peer->gid);

	(void)lgr;
	if (!p)
		return -ENOENT;
	memwire_connect(end_of(link), p);
	return 0;
}

static void op_link_destroy(struct smcr_lgr *lgr, struct smcr_link *link)
{
	struct host *h = lgr->owner;
	int i = end_index(h, link);

	if (i >= 0) {
		memwire_free(h->ends[i]);
		h->ends[i]->fault = MEMWIRE_BLACKHOLE;
		h->ends[i]->link.state = SMCR_LINK_FAILED;
		h->ends[i]->failed = true;
		h->ends[i]->link.priv = NULL;
	}
}

static int op_rmb_reg(struct smcr_lgr *lgr, struct smcr_rmb *rmb, struct smcr_link *link,
		      uint32_t *rkey, uint64_t *vaddr)
{
	struct host *h = lgr->owner;
	int i = end_index(h, link);
	unsigned int k;

	if (i < 0)
		return -ENOENT;
	if (h->ends[i]->nmrs == sizeof(h->ends[i]->mrs) / sizeof(h->ends[i]->mrs[0]))
		return -ENOMEM;
	*rkey = h->id << 24 | rmb->id << 8 | h->port_of[i];
	*vaddr = (uintptr_t)rmb->buf;
	memwire_add_mr(h->ends[i], rmb->buf, rmb->len, *rkey);
	for (k = 0; k < h->nends; k++)
		if (h->port_of[k] == h->port_of[i] && k != (unsigned int)i &&
		    h->ends[k]->nmrs < sizeof(h->ends[k]->mrs) / sizeof(h->ends[k]->mrs[0]))
			memwire_add_mr(h->ends[k], rmb->buf, rmb->len, *rkey);
	return 0;
}

static void op_event(struct smcr_lgr *lgr, enum smcr_lgr_event ev, struct smcr_link *link,
		     int status)
{
	(void)lgr;
	(void)ev;
	(void)link;
	(void)status;
}

static uint64_t op_now(struct smcr_lgr *lgr)
{
	(void)lgr;
	return clock_ms;
}

static const struct smcr_lgr_ops ops = {
	.link_create = op_link_create,
	.link_connect = op_link_connect,
	.link_destroy = op_link_destroy,
	.rmb_reg = op_rmb_reg,
	.event = op_event,
	.now_ms = op_now,
};

/* Delivers what is queued, round robin, at most max work requests: a
 * conversation that never ends is reported as a hang. */
static void run(unsigned long max)
{
	unsigned long n = 0;
	bool progress = true;

	while (progress) {
		struct host *hs[2] = { &S, &C };
		unsigned int k, i;

		progress = false;
		for (k = 0; k < 2; k++)
			for (i = 0; i < hs[k]->nends; i++)
				if (memwire_step(hs[k]->ends[i])) {
					progress = true;
					n++;
				}
		FUZZ_REQUIRE(n <= max);
	}
}

static void tick(unsigned int ms)
{
	clock_ms += ms;
	smcr_lgr_tick(S.lgr);
	smcr_lgr_tick(C.lgr);
}

static bool group_up(void)
{
	struct smcr_lgr_config cfg;
	struct smcr_link *sl, *cl;
	struct smcr_link_info si, ci;
	struct smcr_rmbe se, ce;
	uint32_t rk;
	uint64_t va;
	bool pend;
	unsigned int i;

	memset(&S, 0, sizeof(S));
	memset(&C, 0, sizeof(C));
	S.id = 1;
	C.id = 2;
	S.nports = C.nports = 2;
	clock_ms = 1000;
	/* RMBs of one 16 KiB element each, 128 KiB at most: no page faults
	 * on megabytes of buffers in every run, and the limit is reached. */
	cfg = smcr_lgr_config_default;
	cfg.max_rmb_bytes = 128u << 10;
	FUZZ_REQUIRE(smcr_lgr_create(SMCR_ROLE_SERVER, &ops, &S, &cfg, &S.lgr) == 0);
	FUZZ_REQUIRE(smcr_lgr_create(SMCR_ROLE_CLIENT, &ops, &C, &cfg, &C.lgr) == 0);
	FUZZ_REQUIRE(op_link_create(S.lgr, NULL, false, &sl, &si) == 0);
	FUZZ_REQUIRE(op_link_create(C.lgr, &si, false, &cl, &ci) == 0);
	FUZZ_REQUIRE(op_link_connect(S.lgr, sl, &ci) == 0);
	FUZZ_REQUIRE(op_link_connect(C.lgr, cl, &si) == 0);
	FUZZ_REQUIRE(smcr_lgr_first_link(C.lgr, cl, &ci, &si) == 0);
	FUZZ_REQUIRE(smcr_lgr_rmbe_alloc(S.lgr, 1000, &se, &pend) == 0);
	FUZZ_REQUIRE(smcr_lgr_rmbe_alloc(C.lgr, 1000, &ce, &pend) == 0);
	FUZZ_REQUIRE(smcr_lgr_first_link(S.lgr, sl, &si, &ci) == 0);
	FUZZ_REQUIRE(smcr_lgr_rmb_token(S.lgr, se.rmb, 0, &rk, &va) == 0);
	FUZZ_REQUIRE(smcr_lgr_peer_rmb_add(C.lgr, 0, rk, va));
	FUZZ_REQUIRE(smcr_lgr_rmb_token(C.lgr, ce.rmb, 0, &rk, &va) == 0);
	FUZZ_REQUIRE(smcr_lgr_peer_rmb_add(S.lgr, 0, rk, va));
	S.conn[0].rmbe = se;
	C.conn[0].rmbe = ce;
	run(100000);
	FUZZ_REQUIRE(smcr_lgr_active_links(S.lgr) == 2);

	for (i = 0; i < NCONN; i++) {
		struct smcr_conn_params sp, cp;
		struct smcr_rmbe se2 = S.conn[i].rmbe, ce2 = C.conn[i].rmbe, sb, cb;
		struct smcr_lgr_peer_rmb *sp_rmb, *cp_rmb;

		if (i > 0) {
			FUZZ_REQUIRE(smcr_lgr_rmbe_alloc(S.lgr, 1000, &se2, &pend) == 0);
			FUZZ_REQUIRE(smcr_lgr_rmbe_alloc(C.lgr, 1000, &ce2, &pend) == 0);
			run(100000);	/* new RMBs: CONFIRM RKEY */
		}
		FUZZ_REQUIRE(smcr_lgr_sndbuf_alloc(S.lgr, ce2.rmb->elem_size, &sb) == 0);
		FUZZ_REQUIRE(smcr_lgr_sndbuf_alloc(C.lgr, se2.rmb->elem_size, &cb) == 0);
		smcr_lgr_rmb_token(S.lgr, se2.rmb, 0, &rk, &va);
		cp_rmb = smcr_lgr_peer_rmb_find(C.lgr, 0, rk);
		smcr_lgr_rmb_token(C.lgr, ce2.rmb, 0, &rk, &va);
		sp_rmb = smcr_lgr_peer_rmb_find(S.lgr, 0, rk);
		FUZZ_REQUIRE(sp_rmb && cp_rmb);
		sp = (struct smcr_conn_params){
			.token = smcr_lgr_conn_token(S.lgr), .rmbe = se2, .sndbuf = sb,
			.peer_rmb = &sp_rmb->r, .peer_index = ce2.index,
			.peer_elem_size = ce2.rmb->elem_size, .link = smcr_lgr_pick_link(S.lgr),
		};
		cp = (struct smcr_conn_params){
			.token = smcr_lgr_conn_token(C.lgr), .peer_token = sp.token,
			.rmbe = ce2, .sndbuf = cb, .peer_rmb = &cp_rmb->r,
			.peer_index = se2.index, .peer_elem_size = se2.rmb->elem_size,
			.link = smcr_lgr_pick_link(C.lgr),
		};
		sp.peer_token = cp.token;
		FUZZ_REQUIRE(smcr_conn_init(&S.conn[i], &sp) == 0);
		FUZZ_REQUIRE(smcr_conn_init(&C.conn[i], &cp) == 0);
		FUZZ_REQUIRE(smcr_lgr_conn_add(S.lgr, &S.conn[i]) == 0);
		FUZZ_REQUIRE(smcr_lgr_conn_add(C.lgr, &C.conn[i]) == 0);
		S.conn_added[i] = C.conn_added[i] = true;
		run(100000);
	}
	return true;
}

static void group_down(void)
{
	struct host *hs[2] = { &S, &C };
	unsigned int k, i;

	for (k = 0; k < 2; k++)
		for (i = 0; i < NCONN; i++)
			if (hs[k]->conn_added[i])
				smcr_lgr_conn_remove(hs[k]->lgr, &hs[k]->conn[i]);
	smcr_lgr_destroy(S.lgr);
	smcr_lgr_destroy(C.lgr);
	for (k = 0; k < 2; k++)
		for (i = 0; i < hs[k]->nends; i++) {
			memwire_free(hs[k]->ends[i]);
			free(hs[k]->ends[i]);
		}
}

/* 44 bytes from the input onto a live link of h, as if its peer sent them. */
static void inject(struct host *h)
{
	uint8_t msg[SMCR_MSG_LEN];
	unsigned int i, pick = next_byte();
	struct memwire_end *e = NULL;

	for (i = 0; i < SMCR_MSG_LEN; i++)
		msg[i] = next_byte();
	for (i = 0; i < h->nends; i++) {
		struct memwire_end *x = h->ends[(pick + i) % h->nends];

		if (x->peer && !x->failed && x->link.state != SMCR_LINK_FAILED) {
			e = x;
			break;
		}
	}
	if (!e)
		return;
#ifdef FUZZ_LGR_CDC
	/* A CDC message (type 0xFE, length 44) for one of h's connections,
	 * its token in bytes 4..7 (smcr/wire.h). */
	{
		uint32_t token = h->conn[pick % NCONN].token;

		msg[0] = 0xFE;
		msg[1] = SMCR_MSG_LEN;
		msg[4] = (uint8_t)(token >> 24);
		msg[5] = (uint8_t)(token >> 16);
		msg[6] = (uint8_t)(token >> 8);
		msg[7] = (uint8_t)token;
	}
#endif
	e->link.recvs++;
	e->link.handler->recv(&e->link, msg);
}

static void pump(struct host *h, unsigned int c, unsigned int len)
{
	static uint8_t buf[8192];

	if (h->conn[c].error)
		return;
	memset(buf, 0x5a, len);
	(void)smcr_conn_send(&h->conn[c], buf, len);
	(void)smcr_conn_recv(&h->conn[c], buf, sizeof(buf));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static int once;
	unsigned int step;

	static struct host snap_S, snap_C;
	static uint64_t snap_clock;

	arena_on = true;
	if (!once++) {
		fuzz_quiet_log();
		arena_init();
		group_up();
		arena_snapshot();
		snap_S = S;
		snap_C = C;
		snap_clock = clock_ms;
	} else {
		arena_restore();
		S = snap_S;
		C = snap_C;
		clock_ms = snap_clock;
	}
	in = data;
	in_left = size;
	for (step = 0; step < MAX_STEPS && in_left; step++) {
		uint8_t op = next_byte();

		switch (op & 7) {
		case 0:
		case 1:
			inject(op & 8 ? &C : &S);
			break;
		case 2:
			run(200000);
			break;
		case 3:
			tick(10u * (1 + next_byte()));
			break;
		case 4:
			pump(op & 8 ? &C : &S, (op >> 4) % NCONN, 1 + next_byte() * 32u);
			break;
		case 5: {
			struct host *h = op & 8 ? &C : &S;
			struct memwire_end *e = h->ends[(op >> 4) % h->nends];

			memwire_fault(e, op & 0x80 ? MEMWIRE_BLACKHOLE : MEMWIRE_CUT);
			break;
		}
		case 6: {
			struct host *h = op & 8 ? &C : &S;
			struct smcr_rmbe x;
			bool pend;

			/* A new RMB: CONFIRM RKEY on the other links. */
			(void)smcr_lgr_rmbe_alloc(h->lgr, 1024u << (next_byte() % 8), &x, &pend);
			break;
		}
		case 7:
			if (op & 8)
				(void)smcr_lgr_add_link(op & 16 ? C.lgr : S.lgr);
			else
				(void)smcr_lgr_delete_link(op & 16 ? C.lgr : S.lgr,
							   (op >> 5) % SMCR_LINK_SLOTS, 0);
			break;
		}
	}
	run(200000);
	tick(5000);
	run(200000);
	group_down();
	/* Both groups are gone: whatever is still allocated leaked. */
	FUZZ_REQUIRE(arena_live == 0);
	arena_on = false;
	return 0;
}
