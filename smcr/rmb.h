/* SPDX-License-Identifier: BSD-3-Clause */
/* smcrbd: Remote Memory Buffers (RFC 7609 §2.1, §4.1-4.4).
 *
 * An RMB is one pinned buffer split into equal RMB elements (RMBEs), one per
 * connection.  In the RFC's layout each RMBE starts with a 4-byte eye
 * catcher, followed by the wrapping receive area the peer RDMA-writes into;
 * in Linux's layout (CONFIRM LINK flag 0x03) there is no eye catcher and the
 * whole element is data.  A pool has one layout (its link group's); cursors
 * are offsets into the data area.  RMBs come in size classes (16 KiB << code,
 * code 0..15, the 4-bit compressed size of the wire: 16 KiB .. 512 MiB; the
 * RFC stops at 512 KiB, Linux 6.11+ uses all 16), belong to one link group's pool, and are
 * registered in that group's protection domains only (one per RDMA device
 * the group has links on): no other group's QP can reach them.  A pool of
 * send buffers (local_only) is registered for local access only.
 *
 * Functions return 0 or -errno.  A pool is not thread safe.
 */
#ifndef SMCR_RMB_H
#define SMCR_RMB_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cursor.h"	/* smcr_rmb_size_decompress */

struct smcr_dev;
struct smcr_pd;
struct ibv_mr;

#define SMCR_RMB_CLASSES	16	/* 16 KiB .. 512 MiB */
#define SMCR_RMBE_EYE_LEN	4	/* the RFC layout's eye catcher */
#define SMCR_RMB_MAX_DEVS	9	/* 8 symmetric links + 1 asymmetric */
#define SMCR_RMB_MAX_ELEMS	64
/* Smallest receive buffer a connection gets when the stack sizes it. */
#define SMCR_RMBE_AUTO_MIN	(64u * 1024u)
/* Bytes we aim for per RMB: small elements are grouped. */
#define SMCR_RMB_TARGET_SIZE	(256u * 1024u)

extern const uint8_t smcr_rmbe_eyecatcher[SMCR_RMBE_EYE_LEN];

struct smcr_rmb_mr {
	struct smcr_pd *pd;		/* holds a reference */
	struct ibv_mr *mr;
};

struct smcr_rmb {
	uint8_t *buf;
	size_t len;
	uint32_t elem_size;		/* the whole element */
	uint8_t eye_len;		/* 0 or SMCR_RMBE_EYE_LEN: the pool's */
	uint8_t size_code;
	uint8_t nelems;
	uint64_t used;			/* bit i: element i + 1 in use */
	uint32_t id;			/* unique within the pool */
	bool announced;			/* the peer has its rkeys */
	bool local_only;		/* the pool's: no remote access */
	unsigned int nmrs;
	struct smcr_rmb_mr mrs[SMCR_RMB_MAX_DEVS];
	struct smcr_rmb *next;
};

/* One connection's element. */
struct smcr_rmbe {
	struct smcr_rmb *rmb;
	uint8_t index;			/* 1-based, as on the wire */
	uint8_t *data;			/* receive area */
	uint32_t data_len;		/* elem_size - rmb->eye_len */
};

/* Memory several pools draw on (every link group's RMBs and send buffers
 * of one context): an RMB that would take bytes beyond max is not made. */
struct smcr_rmb_budget {
	size_t bytes;			/* allocated in every pool that draws on it */
	size_t max;			/* 0: unlimited */
};

struct smcr_rmb_pool {
	struct smcr_rmb *classes[SMCR_RMB_CLASSES];
	struct smcr_rmb_budget *shared;	/* also counted there; NULL: none */
	size_t bytes;			/* allocated in all RMBs */
	size_t max_bytes;		/* 0: unlimited */
	uint32_t next_id;
	unsigned int nrmbs;
	bool local_only;		/* send buffers: no remote access; set
					 * before the first allocation */
	uint8_t eye_len;		/* layout of new RMBs: 0 (default) or 4 */
};

/* Smallest code whose element holds want bytes of data in either layout
 * (i.e. with an eye catcher), clamped to the largest class. */
uint8_t smcr_rmb_size_code(size_t want);

/* The class for a connection whose receive buffer is sized by the stack
 * (no size set): the largest class from lo to hi that has a free element
 * or whose new RMB keeps the pool within budget bytes; lo if none does
 * (it is then bounded by the pool's own limit only). */
uint8_t smcr_rmb_pool_auto_code(const struct smcr_rmb_pool *pool, uint8_t lo,
				uint8_t hi, size_t budget);
/* The element size for such a connection (eye catcher included): up to
 * auto_max (by default RFC 7609's largest, 512 KiB, what a writer needs
 * to keep a link busy over a round trip of milliseconds) while the pool
 * stays within a sixty-fourth of max_rmb_bytes (4 MiB of the default:
 * more in flight at once overran rxe in smcr-stream.sh, 32 x 512 KiB),
 * as many times more as auto_max is larger than 512 KiB (at most half of
 * max_rmb_bytes), then smaller classes down to 64 KiB. */
uint32_t smcr_rmbe_auto_size(const struct smcr_rmb_pool *pool, size_t max_rmb_bytes,
			     uint32_t auto_max);

void smcr_rmb_pool_init(struct smcr_rmb_pool *pool, size_t max_bytes);
/* Deregisters and frees every RMB, used or not. */
void smcr_rmb_pool_fini(struct smcr_rmb_pool *pool);
/* Switch the pool and every RMB in it to eye_len (0 or SMCR_RMBE_EYE_LEN):
 * every element is reset, used or not, so only before any data flowed (the
 * link group's first CONFIRM LINK).  -EINVAL for another eye_len. */
int smcr_rmb_pool_set_layout(struct smcr_rmb_pool *pool, uint8_t eye_len);

/* Take a free element of the class that fits want bytes, from an existing
 * RMB when one has room, else from a new RMB (*new_rmb set: it must be
 * registered and announced to the peer before use).  -ENOBUFS when the pool
 * limit is reached. */
int smcr_rmbe_alloc(struct smcr_rmb_pool *pool, size_t want,
		    struct smcr_rmbe *out, bool *new_rmb);
/* Return an element: its data is zeroed and its eye catcher (if any)
 * rewritten. */
void smcr_rmbe_free(struct smcr_rmb_pool *pool, struct smcr_rmbe *rmbe);
/* Is the element's eye catcher intact?  Always true without one. */
bool smcr_rmbe_intact(const struct smcr_rmbe *rmbe);
/* Look up element index (1-based) of an RMB; -EINVAL if out of range. */
int smcr_rmbe_get(struct smcr_rmb *rmb, uint8_t index, struct smcr_rmbe *out);

/* Find an RMB by id, or NULL. */
struct smcr_rmb *smcr_rmb_find(struct smcr_rmb_pool *pool, uint32_t id);

/* Free RMBs no connection uses, calling fn first (e.g. to send DELETE
 * RKEY); returns how many were freed. */
unsigned int smcr_rmb_pool_trim(struct smcr_rmb_pool *pool,
				void (*fn)(struct smcr_rmb *rmb, void *arg),
				void *arg);

/* Free one RMB; -EBUSY while a connection uses one of its elements. */
int smcr_rmb_destroy(struct smcr_rmb_pool *pool, struct smcr_rmb *rmb);

/* Register rmb in pd for local and remote write (local only for a pool
 * that is local_only; no-op if it already is); deregister it from pd; its
 * rkey and lkey there (0 if not registered). */
int smcr_rmb_reg(struct smcr_rmb *rmb, struct smcr_pd *pd);
void smcr_rmb_dereg(struct smcr_rmb *rmb, struct smcr_pd *pd);
uint32_t smcr_rmb_rkey(const struct smcr_rmb *rmb, const struct smcr_pd *pd);
uint32_t smcr_rmb_lkey(const struct smcr_rmb *rmb, const struct smcr_pd *pd);
/* The same for every RMB of the pool. */
int smcr_rmb_pool_reg(struct smcr_rmb_pool *pool, struct smcr_pd *pd);
void smcr_rmb_pool_dereg(struct smcr_rmb_pool *pool, struct smcr_pd *pd);

/* Iterate over every RMB of a pool. */
#define smcr_rmb_pool_for_each(pool, code, rmb)				\
	for ((code) = 0; (code) < SMCR_RMB_CLASSES; (code)++)		\
		for ((rmb) = (pool)->classes[code]; (rmb); (rmb) = (rmb)->next)

#endif
