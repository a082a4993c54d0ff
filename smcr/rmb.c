/* SPDX-License-Identifier: BSD-3-Clause */
/* smcrbd: Remote Memory Buffers. */
#include <config.h>

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <infiniband/verbs.h>

#include "dev.h"
#include "log.h"
#include "rmb.h"

/* "RMBE" in IBM-1047, like the RFC's "SMCR" eye catchers. */
const uint8_t smcr_rmbe_eyecatcher[SMCR_RMBE_EYE_LEN] = { 0xd9, 0xd4, 0xc2, 0xc5 };

uint8_t smcr_rmb_size_code(size_t want)
{
	uint8_t code = 0;

	while (code + 1 < SMCR_RMB_CLASSES &&
	       smcr_rmb_size_decompress(code) - SMCR_RMBE_EYE_LEN < want)
		code++;
	return code;
}

static uint32_t rmb_elems(uint8_t code)
{
	uint32_t n = SMCR_RMB_TARGET_SIZE / smcr_rmb_size_decompress(code);

	return n < 1 ? 1 : n > SMCR_RMB_MAX_ELEMS ? SMCR_RMB_MAX_ELEMS : n;
}

uint8_t smcr_rmb_pool_auto_code(const struct smcr_rmb_pool *pool, uint8_t lo,
				uint8_t hi, size_t budget)
{
	const struct smcr_rmb *rmb;
	uint8_t code;

	if (hi >= SMCR_RMB_CLASSES)
		hi = SMCR_RMB_CLASSES - 1;
	for (code = hi; code > lo; code--) {
		for (rmb = pool->classes[code]; rmb; rmb = rmb->next)
			if (rmb->used != (rmb->nelems >= 64 ? ~0ull :
					  (1ull << rmb->nelems) - 1))
				return code;
		if (pool->bytes + (size_t)rmb_elems(code) *
		    smcr_rmb_size_decompress(code) <= budget)
			return code;
	}
	return lo;
}

uint32_t smcr_rmbe_auto_size(const struct smcr_rmb_pool *pool, size_t max_rmb_bytes,
			     uint32_t auto_max)
{
	uint8_t lo = smcr_rmb_size_code(SMCR_RMBE_AUTO_MIN - SMCR_RMBE_EYE_LEN);
	uint8_t hi = smcr_rmb_size_code(auto_max - SMCR_RMBE_EYE_LEN);
	size_t budget = max_rmb_bytes / 64;

	if (hi < lo)
		hi = lo;
	if (hi > SMCR_RMB_SIZE_COMPRESSED_RFC_MAX)
		budget <<= hi - SMCR_RMB_SIZE_COMPRESSED_RFC_MAX;
	if (budget > max_rmb_bytes / 2)
		budget = max_rmb_bytes / 2;
	return smcr_rmb_size_decompress(smcr_rmb_pool_auto_code(pool, lo, hi, budget));
}

void smcr_rmb_pool_init(struct smcr_rmb_pool *pool, size_t max_bytes)
{
	memset(pool, 0, sizeof(*pool));
	pool->max_bytes = max_bytes;
	pool->next_id = 1;
}

static void rmb_destroy(struct smcr_rmb_pool *pool, struct smcr_rmb *rmb)
{
	unsigned int i;

	for (i = 0; i < rmb->nmrs; i++) {
		ibv_dereg_mr(rmb->mrs[i].mr);
		smcr_pd_put(rmb->mrs[i].pd);
	}
	pool->bytes -= rmb->len;
	if (pool->shared)
		pool->shared->bytes -= rmb->len;
	pool->nrmbs--;
	free(rmb->buf);
	free(rmb);
}

void smcr_rmb_pool_fini(struct smcr_rmb_pool *pool)
{
	unsigned int code;

	for (code = 0; code < SMCR_RMB_CLASSES; code++) {
		struct smcr_rmb *rmb, *next;

		for (rmb = pool->classes[code]; rmb; rmb = next) {
			next = rmb->next;
			rmb_destroy(pool, rmb);
		}
		pool->classes[code] = NULL;
	}
}

static void rmbe_init(struct smcr_rmb *rmb, unsigned int i)
{
	uint8_t *base = rmb->buf + (size_t)i * rmb->elem_size;

	memset(base, 0, rmb->elem_size);
	if (rmb->eye_len)
		memcpy(base, smcr_rmbe_eyecatcher, SMCR_RMBE_EYE_LEN);
}

int smcr_rmb_pool_set_layout(struct smcr_rmb_pool *pool, uint8_t eye_len)
{
	struct smcr_rmb *rmb;
	unsigned int code, i;

	if (eye_len != 0 && eye_len != SMCR_RMBE_EYE_LEN)
		return -EINVAL;
	pool->eye_len = eye_len;
	smcr_rmb_pool_for_each(pool, code, rmb) {
		rmb->eye_len = eye_len;
		for (i = 0; i < rmb->nelems; i++)
			rmbe_init(rmb, i);
	}
	return 0;
}

/* Would len more bytes keep the pool and its shared budget within theirs? */
static bool rmb_fits(const struct smcr_rmb_pool *pool, size_t len)
{
	const struct smcr_rmb_budget *b = pool->shared;

	return (!pool->max_bytes || pool->bytes + len <= pool->max_bytes) &&
	       (!b || !b->max || b->bytes + len <= b->max);
}

static int rmb_create(struct smcr_rmb_pool *pool, uint8_t code,
		      struct smcr_rmb **rmbp)
{
	uint32_t elem = smcr_rmb_size_decompress(code);
	unsigned int n = rmb_elems(code), i;
	struct smcr_rmb *rmb;
	int ret;

	if (!rmb_fits(pool, (size_t)n * elem)) {
		/* Try a single element before giving up. */
		n = 1;
		if (!rmb_fits(pool, elem))
			return -ENOBUFS;
	}
	rmb = calloc(1, sizeof(*rmb));
	if (!rmb)
		return -ENOMEM;
	rmb->len = (size_t)n * elem;
	ret = posix_memalign((void **)&rmb->buf, 4096, rmb->len);
	if (ret) {
		free(rmb);
		return -ret;
	}
	rmb->elem_size = elem;
	rmb->eye_len = pool->eye_len;
	rmb->size_code = code;
	rmb->nelems = (uint8_t)n;
	rmb->id = pool->next_id++;
	rmb->local_only = pool->local_only;
	for (i = 0; i < n; i++)
		rmbe_init(rmb, i);
	rmb->next = pool->classes[code];
	pool->classes[code] = rmb;
	pool->bytes += rmb->len;
	if (pool->shared)
		pool->shared->bytes += rmb->len;
	pool->nrmbs++;
	*rmbp = rmb;
	return 0;
}

int smcr_rmbe_get(struct smcr_rmb *rmb, uint8_t index, struct smcr_rmbe *out)
{
	if (index < 1 || index > rmb->nelems)
		return -EINVAL;
	out->rmb = rmb;
	out->index = index;
	out->data = rmb->buf + (size_t)(index - 1) * rmb->elem_size + rmb->eye_len;
	out->data_len = rmb->elem_size - rmb->eye_len;
	return 0;
}

static int rmb_take(struct smcr_rmb *rmb, struct smcr_rmbe *out)
{
	unsigned int i;

	for (i = 0; i < rmb->nelems; i++) {
		if (!(rmb->used & (1ull << i))) {
			rmb->used |= 1ull << i;
			return smcr_rmbe_get(rmb, (uint8_t)(i + 1), out);
		}
	}
	return -ENOSPC;
}

int smcr_rmbe_alloc(struct smcr_rmb_pool *pool, size_t want,
		    struct smcr_rmbe *out, bool *new_rmb)
{
	uint8_t code = smcr_rmb_size_code(want);
	struct smcr_rmb *rmb;
	int ret;

	*new_rmb = false;
	for (rmb = pool->classes[code]; rmb; rmb = rmb->next)
		if (rmb_take(rmb, out) == 0)
			return 0;
	ret = rmb_create(pool, code, &rmb);
	if (ret)
		return ret;
	*new_rmb = true;
	return rmb_take(rmb, out);
}

void smcr_rmbe_free(struct smcr_rmb_pool *pool, struct smcr_rmbe *rmbe)
{
	struct smcr_rmb *rmb = rmbe->rmb;
	unsigned int i;

	(void)pool;
	if (!rmb)
		return;
	i = rmbe->index - 1u;
	rmbe_init(rmb, i);
	rmb->used &= ~(1ull << i);
	rmbe->rmb = NULL;
	rmbe->data = NULL;
}

bool smcr_rmbe_intact(const struct smcr_rmbe *rmbe)
{
	if (!rmbe->rmb->eye_len)
		return true;
	return memcmp(rmbe->data - SMCR_RMBE_EYE_LEN, smcr_rmbe_eyecatcher,
		      SMCR_RMBE_EYE_LEN) == 0;
}

struct smcr_rmb *smcr_rmb_find(struct smcr_rmb_pool *pool, uint32_t id)
{
	struct smcr_rmb *rmb;
	unsigned int code;

	smcr_rmb_pool_for_each(pool, code, rmb)
		if (rmb->id == id)
			return rmb;
	return NULL;
}

unsigned int smcr_rmb_pool_trim(struct smcr_rmb_pool *pool,
				void (*fn)(struct smcr_rmb *rmb, void *arg),
				void *arg)
{
	unsigned int code, freed = 0;

	for (code = 0; code < SMCR_RMB_CLASSES; code++) {
		struct smcr_rmb **pp = &pool->classes[code];

		while (*pp) {
			struct smcr_rmb *rmb = *pp;

			if (rmb->used) {
				pp = &rmb->next;
				continue;
			}
			if (fn)
				fn(rmb, arg);
			*pp = rmb->next;
			rmb_destroy(pool, rmb);
			freed++;
		}
	}
	return freed;
}

int smcr_rmb_destroy(struct smcr_rmb_pool *pool, struct smcr_rmb *rmb)
{
	struct smcr_rmb **pp;

	if (rmb->used)
		return -EBUSY;
	for (pp = &pool->classes[rmb->size_code]; *pp; pp = &(*pp)->next) {
		if (*pp == rmb) {
			*pp = rmb->next;
			rmb_destroy(pool, rmb);
			return 0;
		}
	}
	return -ENOENT;
}

static int rmb_mr_slot(const struct smcr_rmb *rmb, const struct smcr_pd *pd)
{
	unsigned int i;

	for (i = 0; pd && i < rmb->nmrs; i++)
		if (rmb->mrs[i].pd == pd)
			return (int)i;
	return -1;
}

int smcr_rmb_reg(struct smcr_rmb *rmb, struct smcr_pd *pd)
{
	int access = IBV_ACCESS_LOCAL_WRITE;
	struct ibv_mr *mr;

	if (rmb_mr_slot(rmb, pd) >= 0)
		return 0;
	if (rmb->nmrs >= SMCR_RMB_MAX_DEVS)
		return -ENOSPC;
	if (!rmb->local_only)
		access |= IBV_ACCESS_REMOTE_WRITE;
	mr = ibv_reg_mr(pd->pd, rmb->buf, rmb->len, access);
	if (!mr) {
		int ret = errno ? -errno : -ENOMEM;

		smcr_err("%s: cannot register a %zu-byte buffer", pd->dev->name,
			 rmb->len);
		return ret;
	}
	rmb->mrs[rmb->nmrs].pd = smcr_pd_get(pd);
	rmb->mrs[rmb->nmrs].mr = mr;
	rmb->nmrs++;
	return 0;
}

void smcr_rmb_dereg(struct smcr_rmb *rmb, struct smcr_pd *pd)
{
	int i = rmb_mr_slot(rmb, pd);

	if (i < 0)
		return;
	ibv_dereg_mr(rmb->mrs[i].mr);
	smcr_pd_put(rmb->mrs[i].pd);
	rmb->mrs[i] = rmb->mrs[--rmb->nmrs];
}

uint32_t smcr_rmb_rkey(const struct smcr_rmb *rmb, const struct smcr_pd *pd)
{
	int i = rmb_mr_slot(rmb, pd);

	return i < 0 ? 0 : rmb->mrs[i].mr->rkey;
}

uint32_t smcr_rmb_lkey(const struct smcr_rmb *rmb, const struct smcr_pd *pd)
{
	int i = rmb_mr_slot(rmb, pd);

	return i < 0 ? 0 : rmb->mrs[i].mr->lkey;
}

int smcr_rmb_pool_reg(struct smcr_rmb_pool *pool, struct smcr_pd *pd)
{
	struct smcr_rmb *rmb;
	unsigned int code;
	int ret;

	smcr_rmb_pool_for_each(pool, code, rmb) {
		ret = smcr_rmb_reg(rmb, pd);
		if (ret)
			return ret;
	}
	return 0;
}

void smcr_rmb_pool_dereg(struct smcr_rmb_pool *pool, struct smcr_pd *pd)
{
	struct smcr_rmb *rmb;
	unsigned int code;

	smcr_rmb_pool_for_each(pool, code, rmb)
		smcr_rmb_dereg(rmb, pd);
}
