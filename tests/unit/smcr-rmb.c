/* SPDX-License-Identifier: BSD-3-Clause */
/* smcrbd: unit tests for the RMB pool (no RDMA device needed). */
#include <config.h>

#include <errno.h>
#include <string.h>

#include "unit.h"
#include "smcr-suites.h"
#include "rmb.h"

static void test_size_code(void)
{
	CU_ASSERT_EQUAL(smcr_rmb_size_code(0), 0);
	CU_ASSERT_EQUAL(smcr_rmb_size_code(16384 - SMCR_RMBE_EYE_LEN), 0);
	CU_ASSERT_EQUAL(smcr_rmb_size_code(16384 - SMCR_RMBE_EYE_LEN + 1), 1);
	CU_ASSERT_EQUAL(smcr_rmb_size_code(65536), 3);
	CU_ASSERT_EQUAL(smcr_rmb_size_code(512 * 1024 - SMCR_RMBE_EYE_LEN), 5);
	/* Every class of the 4-bit code, up to 512 MiB. */
	CU_ASSERT_EQUAL(smcr_rmb_size_code(512 * 1024), 6);
	CU_ASSERT_EQUAL(smcr_rmb_size_code((16u << 20) - SMCR_RMBE_EYE_LEN), 10);
	CU_ASSERT_EQUAL(smcr_rmb_size_code((512u << 20) - SMCR_RMBE_EYE_LEN), 15);
	/* Larger requests are clamped to the largest class. */
	CU_ASSERT_EQUAL(smcr_rmb_size_code(1u << 30), SMCR_RMB_CLASSES - 1);
	CU_ASSERT_EQUAL(SMCR_RMB_CLASSES - 1, SMCR_RMB_SIZE_COMPRESSED_MAX);
	CU_ASSERT_EQUAL(smcr_rmb_size_decompress(0), 16384);
	CU_ASSERT_EQUAL(smcr_rmb_size_decompress(5), 512 * 1024);
}

/* Receive buffers the stack sizes: 512 KiB within the budget, then the
 * largest class that still fits, then the floor; a free element first. */
static void test_auto_size(void)
{
	struct smcr_rmb_pool pool;
	struct smcr_rmbe e[2], f;
	size_t budget = (size_t)1 << 20;	/* two 512 KiB RMBs */
	bool fresh;
	unsigned int i;

	smcr_rmb_pool_init(&pool, 0);
	for (i = 0; i < 2; i++) {
		uint8_t c = smcr_rmb_pool_auto_code(&pool, 2, 5, budget);

		CU_ASSERT_EQUAL(c, 5);
		CU_ASSERT_EQUAL_FATAL(smcr_rmbe_alloc(&pool,
			smcr_rmb_size_decompress(c) - SMCR_RMBE_EYE_LEN, &e[i], &fresh), 0);
		CU_ASSERT(fresh);
	}
	CU_ASSERT_EQUAL(pool.bytes, budget);
	/* Budget used up: the floor (64 KiB), whatever it costs. */
	CU_ASSERT_EQUAL(smcr_rmb_pool_auto_code(&pool, 2, 5, budget), 2);
	/* Half the budget left: a 256 KiB RMB fits (one element), 512 not. */
	smcr_rmbe_free(&pool, &e[1]);
	CU_ASSERT_EQUAL(smcr_rmb_pool_trim(&pool, NULL, NULL), 1);
	CU_ASSERT_EQUAL(smcr_rmb_pool_auto_code(&pool, 2, 5, budget * 3 / 4), 4);
	/* A class with a free element is taken even beyond the budget:
	 * 128 KiB (two to an RMB, one in use), then 512 KiB once free. */
	CU_ASSERT_EQUAL_FATAL(smcr_rmbe_alloc(&pool, 100000, &f, &fresh), 0);
	CU_ASSERT_EQUAL(f.rmb->size_code, 3);
	CU_ASSERT_EQUAL(smcr_rmb_pool_auto_code(&pool, 2, 5, 0), 3);
	smcr_rmbe_free(&pool, &e[0]);
	CU_ASSERT_EQUAL(smcr_rmb_pool_auto_code(&pool, 2, 5, 0), 5);
	smcr_rmbe_free(&pool, &f);
	smcr_rmb_pool_fini(&pool);
}

/* The size a connection gets: auto_max while the pool is within a
 * sixty-fourth of max_rmb_bytes times auto_max / 512 KiB, then the floor. */
static void test_auto_size_max(void)
{
	size_t max = (size_t)64 << 20;
	struct smcr_rmb_pool pool;
	struct smcr_rmbe e[3];
	bool fresh;
	unsigned int i;

	smcr_rmb_pool_init(&pool, 0);
	/* 512 KiB (the default): 1 MiB of 64 MiB, two of them. */
	for (i = 0; i < 2; i++) {
		CU_ASSERT_EQUAL(smcr_rmbe_auto_size(&pool, max, 512u << 10), 512u << 10);
		CU_ASSERT_EQUAL_FATAL(smcr_rmbe_alloc(&pool, (512u << 10) - SMCR_RMBE_EYE_LEN,
						      &e[i], &fresh), 0);
	}
	CU_ASSERT_EQUAL(smcr_rmbe_auto_size(&pool, max, 512u << 10), 64u << 10);
	for (i = 0; i < 2; i++)
		smcr_rmbe_free(&pool, &e[i]);
	CU_ASSERT_EQUAL(smcr_rmb_pool_trim(&pool, NULL, NULL), 2);
	/* 4 MiB: eight times the share, 8 MiB, two of them; then the floor. */
	for (i = 0; i < 2; i++) {
		CU_ASSERT_EQUAL(smcr_rmbe_auto_size(&pool, max, 4u << 20), 4u << 20);
		CU_ASSERT_EQUAL_FATAL(smcr_rmbe_alloc(&pool, (4u << 20) - SMCR_RMBE_EYE_LEN,
						      &e[i], &fresh), 0);
		CU_ASSERT(fresh);
	}
	CU_ASSERT_EQUAL(pool.bytes, (size_t)8 << 20);
	CU_ASSERT_EQUAL(smcr_rmbe_auto_size(&pool, max, 4u << 20), 64u << 10);
	for (i = 0; i < 2; i++)
		smcr_rmbe_free(&pool, &e[i]);
	CU_ASSERT_EQUAL(smcr_rmb_pool_trim(&pool, NULL, NULL), 2);
	/* Rounded up to a class; never above half of max_rmb_bytes; the
	 * floor is 64 KiB. */
	CU_ASSERT_EQUAL(smcr_rmbe_auto_size(&pool, max, 3u << 20), 4u << 20);
	CU_ASSERT_EQUAL(smcr_rmbe_auto_size(&pool, max, 512u << 20), 32u << 20);
	CU_ASSERT_EQUAL(smcr_rmbe_auto_size(&pool, max, 64u << 10), 64u << 10);
	CU_ASSERT_EQUAL(smcr_rmbe_auto_size(&pool, max, 16u << 10), 64u << 10);
	smcr_rmb_pool_fini(&pool);
}

static void test_alloc_reuse(void)
{
	struct smcr_rmb_pool pool;
	struct smcr_rmbe e[20];
	bool fresh;
	unsigned int i, fresh_count = 0;

	smcr_rmb_pool_init(&pool, 0);
	/* 16 KiB elements: 16 per RMB, so 20 elements need two RMBs. */
	for (i = 0; i < 20; i++) {
		CU_ASSERT_EQUAL_FATAL(smcr_rmbe_alloc(&pool, 1000, &e[i], &fresh), 0);
		fresh_count += fresh;
		CU_ASSERT_EQUAL(e[i].data_len, 16384);	/* no eye catcher */
		CU_ASSERT(smcr_rmbe_intact(&e[i]));
		CU_ASSERT(e[i].index >= 1 && e[i].index <= e[i].rmb->nelems);
	}
	CU_ASSERT_EQUAL(fresh_count, 2);
	CU_ASSERT_EQUAL(pool.nrmbs, 2);
	/* Elements never overlap. */
	for (i = 1; i < 20; i++)
		CU_ASSERT(e[i].data != e[0].data);
	/* A freed element is zeroed and handed out again without a new RMB. */
	memset(e[3].data, 0xab, e[3].data_len);
	smcr_rmbe_free(&pool, &e[3]);
	CU_ASSERT_EQUAL(smcr_rmbe_alloc(&pool, 1000, &e[3], &fresh), 0);
	CU_ASSERT_FALSE(fresh);
	CU_ASSERT_EQUAL(e[3].data[0], 0);
	CU_ASSERT_EQUAL(e[3].data[e[3].data_len - 1], 0);
	CU_ASSERT_EQUAL(pool.nrmbs, 2);
	/* Nothing is trimmed while elements are in use. */
	CU_ASSERT_EQUAL(smcr_rmb_pool_trim(&pool, NULL, NULL), 0);
	for (i = 0; i < 20; i++)
		smcr_rmbe_free(&pool, &e[i]);
	CU_ASSERT_EQUAL(smcr_rmb_pool_trim(&pool, NULL, NULL), 2);
	CU_ASSERT_EQUAL(pool.bytes, 0);
	smcr_rmb_pool_fini(&pool);
}

static void test_eyecatcher_overlay(void)
{
	struct smcr_rmb_pool pool;
	struct smcr_rmbe e, again;
	bool fresh;

	smcr_rmb_pool_init(&pool, 0);
	CU_ASSERT_EQUAL_FATAL(smcr_rmbe_alloc(&pool, 100000, &e, &fresh), 0);
	CU_ASSERT_EQUAL(e.rmb->size_code, 3);
	/* Linux's layout: data from the element's first byte. */
	CU_ASSERT_PTR_EQUAL(e.data, e.rmb->buf + (e.index - 1) * e.rmb->elem_size);
	CU_ASSERT_EQUAL(e.data_len, 128 * 1024);
	CU_ASSERT(smcr_rmbe_intact(&e));
	/* The RFC's: "RMBE" (IBM-1047) first, then the data; every element
	 * is reset, the one in use too. */
	e.data[0] = 0x55;
	CU_ASSERT_EQUAL(smcr_rmb_pool_set_layout(&pool, 3), -EINVAL);
	CU_ASSERT_EQUAL(smcr_rmb_pool_set_layout(&pool, SMCR_RMBE_EYE_LEN), 0);
	CU_ASSERT_EQUAL(smcr_rmbe_get(e.rmb, e.index, &e), 0);
	CU_ASSERT_EQUAL(e.data_len, 128 * 1024 - 4);
	CU_ASSERT_EQUAL(e.data[-4], 0xd9);
	CU_ASSERT_EQUAL(e.data[-1], 0xc5);
	CU_ASSERT_EQUAL(e.data[0], 0);
	CU_ASSERT(smcr_rmbe_intact(&e));
	e.data[-1] ^= 0xff;		/* an overlay of the eye catcher */
	CU_ASSERT_FALSE(smcr_rmbe_intact(&e));
	/* Lookup by wire index finds the same element; bad indexes fail. */
	CU_ASSERT_EQUAL(smcr_rmbe_get(e.rmb, e.index, &again), 0);
	CU_ASSERT_PTR_EQUAL(again.data, e.data);
	CU_ASSERT_EQUAL(smcr_rmbe_get(e.rmb, 0, &again), -EINVAL);
	CU_ASSERT_EQUAL(smcr_rmbe_get(e.rmb, (uint8_t)(e.rmb->nelems + 1), &again), -EINVAL);
	CU_ASSERT_PTR_EQUAL(smcr_rmb_find(&pool, e.rmb->id), e.rmb);
	CU_ASSERT_PTR_NULL(smcr_rmb_find(&pool, e.rmb->id + 100));
	/* Freeing rewrites it. */
	smcr_rmbe_free(&pool, &e);
	CU_ASSERT_EQUAL(smcr_rmbe_alloc(&pool, 100000, &e, &fresh), 0);
	CU_ASSERT(smcr_rmbe_intact(&e));
	smcr_rmbe_free(&pool, &e);
	smcr_rmb_pool_fini(&pool);
}

static void test_pool_limit(void)
{
	struct smcr_rmb_pool pool;
	struct smcr_rmbe a, b;
	bool fresh;

	/* Room for one 512 KiB element only. */
	smcr_rmb_pool_init(&pool, 600 * 1024);
	CU_ASSERT_EQUAL(smcr_rmbe_alloc(&pool, 400000, &a, &fresh), 0);
	CU_ASSERT_EQUAL(smcr_rmbe_alloc(&pool, 400000, &b, &fresh), -ENOBUFS);
	/* A smaller class still fits in what is left. */
	CU_ASSERT_EQUAL(smcr_rmbe_alloc(&pool, 1000, &b, &fresh), 0);
	CU_ASSERT(pool.bytes <= 600 * 1024);
	smcr_rmb_pool_fini(&pool);
}

/* Elements beyond the RFC's 512 KiB: one to an RMB, within the pool's
 * limit and a budget shared between pools (a context's pinned memory). */
static void test_large_elements(void)
{
	struct smcr_rmb_budget shared = { .max = 6u << 20 };
	struct smcr_rmb_pool rx, tx;
	struct smcr_rmbe a, b, c;
	bool fresh;

	smcr_rmb_pool_init(&rx, 0);
	smcr_rmb_pool_init(&tx, 0);
	rx.shared = tx.shared = &shared;
	CU_ASSERT_EQUAL_FATAL(smcr_rmbe_alloc(&rx, (4u << 20) - SMCR_RMBE_EYE_LEN, &a,
					      &fresh), 0);
	CU_ASSERT(fresh);
	CU_ASSERT_EQUAL(a.rmb->size_code, 8);
	CU_ASSERT_EQUAL(a.rmb->nelems, 1);
	CU_ASSERT_EQUAL(a.rmb->elem_size, 4u << 20);
	CU_ASSERT_EQUAL(a.data_len, 4u << 20);		/* Linux layout by default */
	a.data[a.data_len - 1] = 0x5a;			/* all of it is ours */
	CU_ASSERT_EQUAL(shared.bytes, 4u << 20);
	/* 2 MiB more fits the shared 6 MiB, 4 MiB more does not. */
	CU_ASSERT_EQUAL(smcr_rmbe_alloc(&tx, (4u << 20) - SMCR_RMBE_EYE_LEN, &b, &fresh),
			-ENOBUFS);
	CU_ASSERT_EQUAL_FATAL(smcr_rmbe_alloc(&tx, (2u << 20) - SMCR_RMBE_EYE_LEN, &b,
					      &fresh), 0);
	CU_ASSERT_EQUAL(shared.bytes, 6u << 20);
	CU_ASSERT_EQUAL(smcr_rmbe_alloc(&rx, 1000, &c, &fresh), -ENOBUFS);
	/* Freed RMBs give their bytes back. */
	smcr_rmbe_free(&tx, &b);
	CU_ASSERT_EQUAL(smcr_rmb_pool_trim(&tx, NULL, NULL), 1);
	CU_ASSERT_EQUAL(shared.bytes, 4u << 20);
	smcr_rmbe_free(&rx, &a);
	smcr_rmb_pool_fini(&rx);
	smcr_rmb_pool_fini(&tx);
	CU_ASSERT_EQUAL(shared.bytes, 0);
}

/* A send buffer pool's RMBs are registered for local access only (no
 * rkey a peer could use), a receive pool's for remote write. */
static void test_local_only(void)
{
	struct smcr_rmb_pool rx, tx;
	struct smcr_rmbe a, b;
	bool fresh;

	smcr_rmb_pool_init(&rx, 0);
	smcr_rmb_pool_init(&tx, 0);
	tx.local_only = true;
	CU_ASSERT_EQUAL_FATAL(smcr_rmbe_alloc(&rx, 1000, &a, &fresh), 0);
	CU_ASSERT_EQUAL_FATAL(smcr_rmbe_alloc(&tx, 1000, &b, &fresh), 0);
	CU_ASSERT_FALSE(a.rmb->local_only);
	CU_ASSERT_TRUE(b.rmb->local_only);
	/* Nothing registered yet: no keys. */
	CU_ASSERT_EQUAL(a.rmb->nmrs, 0);
	CU_ASSERT_EQUAL(smcr_rmb_rkey(a.rmb, NULL), 0);
	CU_ASSERT_EQUAL(smcr_rmb_lkey(b.rmb, NULL), 0);
	smcr_rmb_pool_fini(&rx);
	smcr_rmb_pool_fini(&tx);
}

CU_TestInfo smcr_rmb_tests[] = {
	{ "size code", test_size_code },
	{ "size chosen per connection", test_auto_size },
	{ "size chosen per connection, up to rmbe_auto_max", test_auto_size_max },
	{ "alloc and reuse", test_alloc_reuse },
	{ "eye catcher and lookup", test_eyecatcher_overlay },
	{ "pool limit", test_pool_limit },
	{ "send buffers are local only", test_local_only },
	{ "elements beyond 512 KiB, shared budget", test_large_elements },
	CU_TEST_INFO_NULL,
};
