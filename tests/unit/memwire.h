/* SPDX-License-Identifier: BSD-3-Clause */
/* smcrbd tests: an in-memory wire between two struct smcr_link ends, with
 * fault injection.  Work requests queue up per link and are delivered, in
 * order, by memwire_step()/memwire_run(), like an RC QP would. */
#ifndef SMCR_TESTS_MEMWIRE_H
#define SMCR_TESTS_MEMWIRE_H

#include <stdbool.h>
#include <stdint.h>

#include "link.h"

enum memwire_fault {
	MEMWIRE_OK = 0,
	/* Work requests are lost and flushed with errors: a cut cable. */
	MEMWIRE_CUT,
	/* Writes and sends complete at the sender but are never placed:
	 * the RNIC acked data the host never got (RFC 7609 §4.6.1). */
	MEMWIRE_ACK_NO_PLACE,
	/* Traffic vanishes without any completion: silent loss with the
	 * port still up (only TEST LINK notices). */
	MEMWIRE_BLACKHOLE,
};

struct memwire_mr {
	uint8_t *base;
	uint64_t len;
	uint32_t rkey;
};

struct memwire_end {
	struct smcr_link link;
	struct memwire_end *peer;
	struct memwire_op *head, *tail;	/* posted, not yet delivered */
	unsigned int queued;
	unsigned int sq_depth;
	enum memwire_fault fault;
	bool failed;			/* down already reported */
	/* Memory the peer may write into (our RMBs). */
	struct memwire_mr mrs[64];
	unsigned int nmrs;
	uint64_t delivered, bad_rkey;
};

/* One unconnected end: ops set, handler given, state INACTIVE. */
void memwire_init(struct memwire_end *e, unsigned int sq_depth,
		  const struct smcr_link_handler *h, void *arg);
/* Point e's work requests at peer (each side connects its own end). */
void memwire_connect(struct memwire_end *e, struct memwire_end *peer);
/* Connect two ends: link id and group slot are set on both. */
void memwire_pair(struct memwire_end *a, struct memwire_end *b,
		  uint8_t link_id, uint8_t slot, unsigned int sq_depth,
		  const struct smcr_link_handler *ha, void *arga,
		  const struct smcr_link_handler *hb, void *argb);
/* Expose [base, base+len) to the peer under rkey (once per rkey). */
void memwire_add_mr(struct memwire_end *e, void *base, uint64_t len, uint32_t rkey);
/* Deliver one queued work request of e (0 if none was queued). */
int memwire_step(struct memwire_end *e);
/* Deliver everything queued on all given ends until all are idle; returns
 * how many were delivered. */
unsigned long memwire_run(struct memwire_end **ends, unsigned int n);
/* Inject a fault on e's link; MEMWIRE_CUT reports the link down to both
 * ends when the next work request would be delivered. */
void memwire_fault(struct memwire_end *e, enum memwire_fault f);
void memwire_free(struct memwire_end *e);

#endif
