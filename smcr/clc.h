/* SPDX-License-Identifier: BSD-3-Clause */
/* smcrbd: the CLC rendezvous flows (RFC 7609 §3.5) over a connected TCP
 * socket, with fallback to TCP on the same socket (§3.5.1.6.4, App. C).
 *
 * The flows know nothing of link groups or verbs: the caller decides what to
 * offer and what to do with the peer's answer through struct smcr_clc_ops.
 *
 *   client                                  server
 *   ops->propose          --Proposal-->     ops->accept_proposal
 *   ops->accept           <--Accept----
 *                         --Confirm--->     ops->confirm
 *
 * Any of the three messages may be replaced by a Decline (in lieu of the
 * expected message, never chasing one: C.1); both sides then fall back.
 *
 * Outcomes (return value and res->outcome)
 * ----------------------------------------
 * SMCR_CLC_SMCR (0)      use SMC-R.  On first contact the caller still runs
 *                        CONFIRM LINK and may receive or send a Decline
 *                        until then (C.2): smcr_clc_recv_decline() and
 *                        smcr_clc_send_decline().
 * SMCR_CLC_FALLBACK (1)  a Decline was sent or received (or, on request, a
 *                        silent client timed out: see below): carry on with
 *                        plain TCP on the same socket.  The stream stands exactly
 *                        at the first application byte in both directions
 *                        (each side read exactly the CLC bytes the other
 *                        wrote, no more), so the application never sees CLC.
 * -errno                 (res->outcome SMCR_CLC_ABORT) the connection must be
 *                        closed: what the stream holds is not known, or the
 *                        RFC forbids a fallback.  -ETIMEDOUT (C.5: a CLC
 *                        timeout terminates the connection), -EPROTO (C.6:
 *                        not a CLC message, a bad length or trailer, a type
 *                        out of turn), -ECONNRESET (peer closed, possibly
 *                        mid-message), -ECONNABORTED (ops->confirm refused
 *                        a subsequent contact: res->reason holds its code),
 *                        other errors of send/recv/poll, or -EINVAL for bad
 *                        arguments.
 *
 * The one exception to C.5, on request (cfg->fallback_on_silence): a server
 * that has received no byte at all when the Proposal wait times out falls
 * back, because nothing was read or written yet.  A client that never
 * speaks first (e.g. a plain NBD client on an SMC-R port with no TCP option
 * negotiation) then gets plain TCP after the timeout.
 *
 * Protocol decisions (C.6 and Linux net/smc behaviour)
 * -----------------------------------------------------
 * - A v2 (or later) header: the whole message is read (the 16-bit length
 *   bounds it at 64 KiB).  SMC-Rv2 as Linux 6.1 speaks it when cfg has
 *   EIDs: a client proposes v2 (and v1); a server answers a v2 Proposal
 *   in v2 when it offers SMC-R v2 with an EID of ours, else in v1 when it
 *   offers SMC-R v1 too (the highest version both speak), else with a v1
 *   Decline: SMCR_DECL_NOUEID (v2 without a common EID) or
 *   SMCR_DECL_NOSMCDEV (as from a Linux server without a v2 device; Linux
 *   takes a 28-byte v1 Decline from either).  A v2 Accept is taken only
 *   after a v2 Proposal and with one of our EIDs (else declined with
 *   SMCR_DECL_VERSMISMAT); the Confirm then is v2 too.  A v2 Decline is
 *   taken as a Decline (its diagnosis sits where v1 has it).  Other v2
 *   messages abort.
 * - SMC-Rv2 releases (Linux 6.6+ speaks release 1, SMC-Rv2.1; 6.1
 *   release 0): a client offers its release (cfg->v2_release0: 0, else
 *   1) and at release 1 its max_conns and max_links in the Proposal's v2
 *   extension; a server answers with the lower release and at release 1
 *   with min(its, the client's) of each in the Accept's first-contact
 *   extension, declining with SMCR_DECL_MAXCONNERR (under 16) or
 *   SMCR_DECL_MAXLINKERR (under 1), as Linux checks every Proposal
 *   (smc_clc_srv_v2x_features_validate).  A client declines an Accept
 *   with a higher release than its own (SMCR_DECL_RELEASEERR), max_conns
 *   under 16 or over its own (MAXCONNERR), max_links under 1 or over its
 *   own (MAXLINKERR), and echoes release and limits in its Confirm; the
 *   server declines a first-contact Confirm that does not echo them
 *   exactly (RELEASEERR, MAXCONNERR, MAXLINKERR: Linux's
 *   smc_clc_v2x_features_confirm_check).  Release 0 reads none of the
 *   v2.1 fields and writes them zero, as Linux 6.1.  The feature mask
 *   is ours ANDed with the peer's: we have no feature, so 0 (Linux 6.12
 *   has only SMC-D's emulated ISM; it declines no feature bit).  Vendor
 *   options are always sent zero and never read.
 * - Bad enumerated values (an Accept's or first-contact Confirm's QP MTU;
 *   a Proposal's prefix lengths and counts): Decline and fall back, with
 *   SMCR_DECL_CNFERR (MTU) or SMCR_DECL_DIFFPREFIX (prefixes, as Linux
 *   declines a Proposal whose prefixes it cannot match).
 * - A v1 Proposal longer than SMCR_CLC_MAX_V1_LEN (a larger growth area):
 *   read, dropped, declined with SMCR_DECL_CNFERR.
 * - Every other parsing error aborts without a Decline.
 * - Our Declines carry cfg->peer_id, and the S flag (out of sync, C.4)
 *   when the diagnosis is SMCR_DECL_SYNCERR.
 * - A server never declines after its Accept on a subsequent contact
 *   (C.3): if ops->confirm refuses one, the server aborts.
 *
 * I/O
 * ---
 * Only recv/send with MSG_DONTWAIT and poll() are used, so the socket may
 * be blocking or non-blocking on entry and its file status flags are never
 * changed.  EINTR is retried; partial reads and writes are resumed; every
 * wait is bounded by a deadline per message.  SIGPIPE is never raised
 * (MSG_NOSIGNAL).
 *
 * Threads: nothing here keeps global state; a call only touches its
 * arguments.  Counters of one exchange land in res->stats; callers add
 * them into their own totals with smcr_clc_stats_add() under their lock.
 */
#ifndef SMCR_CLC_H
#define SMCR_CLC_H

#include <stdbool.h>
#include <stdint.h>

#include "msg.h"

/* Local reasons (this stack's own, in the timeout class 0x02 of the
 * diagnosis codes; Linux has no code for a CLC wait, it fails the socket).
 * They are reported and counted, never sent in a Decline. */
#define SMCR_DECL_TIMEOUT_PROPOSAL	0x02ff0001u /* server: no Proposal in time */
#define SMCR_DECL_TIMEOUT_ACCEPT	0x02ff0002u /* client: no Accept/Decline in time */
#define SMCR_DECL_TIMEOUT_CONFIRM	0x02ff0003u /* server: no Confirm/Decline in time */

/* Defaults of struct smcr_clc_cfg (milliseconds). */
#define SMCR_CLC_DEFAULT_TIMEOUT_MS 2000

struct smcr_clc_cfg {
	/* Ours, sent in every Decline we send.  (Proposal, Accept and
	 * Confirm carry the peer ID the callbacks put there.) */
	struct smcr_peer_id peer_id;
	/* Each wait for one message (from the start of the wait to its last
	 * byte) and each send; 0 or negative: SMCR_CLC_DEFAULT_TIMEOUT_MS.
	 * There is no "forever". */
	int proposal_timeout_ms;	/* server: waiting for the Proposal */
	int reply_timeout_ms;		/* client: Accept; server: Confirm */
	int send_timeout_ms;		/* room in the socket buffer */
	/* Server: fall back instead of aborting when the Proposal wait
	 * times out with no byte received (see above).  Default off (C.5). */
	bool fallback_on_silence;
	/* SMC-Rv2 (Linux): with at least one user EID (32 bytes, blank
	 * padded) a client proposes v2 with them (and v1), and a server
	 * answers a v2 Proposal that names one of them in v2.  None: v1. */
	uint8_t eid_count;
	uint8_t eids[SMCR_CLC_MAX_EIDS][SMCR_EID_LEN];
	/* SMC-Rv2 release: by default release 1 (SMC-Rv2.1) is offered and
	 * the lower of both releases is spoken; v2_release0 offers release 0
	 * (SMC-Rv2.0, as Linux 6.1) only. */
	bool v2_release0;
	/* SMC-Rv2.1: our limits for a link group made by this exchange,
	 * max_conns 16..255 (0: 255; 1..15: 16) and max_links 1..2 (0 or
	 * more than 2: 2).  The exchange settles on the lower of both
	 * peers' (see res->max_conns). */
	uint8_t max_conns;
	uint8_t max_links;
};

enum smcr_clc_outcome {
	SMCR_CLC_SMCR = 0,
	SMCR_CLC_FALLBACK = 1,
	SMCR_CLC_ABORT = 2,
};

enum smcr_clc_side {
	SMCR_CLC_SIDE_NONE = 0,
	SMCR_CLC_SIDE_LOCAL,		/* we declined, or timed out */
	SMCR_CLC_SIDE_PEER,		/* the peer's Decline */
};

/* Diagnosis codes counted one by one; anything else lands in the last slot
 * ("other").  smcr_clc_reason_index() maps a code to its slot. */
#define SMCR_CLC_NREASONS 29

struct smcr_clc_stats {
	uint64_t proposals_sent, proposals_rcvd;
	uint64_t accepts_sent, accepts_rcvd;
	uint64_t confirms_sent, confirms_rcvd;
	uint64_t declines_sent, declines_rcvd;
	uint64_t smcr;			/* exchanges ending in SMC-R ... */
	uint64_t first_contacts;	/*   ... of which first contacts */
	uint64_t fallbacks;		/* exchanges ending in TCP fallback */
	uint64_t aborts;		/* exchanges ending in a closed connection */
	uint64_t timeouts;		/* waits that timed out (abort or fallback) */
	uint64_t proto_errors;		/* C.6 protocol errors (abort) */
	uint64_t version_mismatches;	/* v2+ messages dropped */
	uint64_t v2_proposals_as_v1;	/* v2 Proposals offering v1 too: answered in v1 */
	uint64_t v2;			/* exchanges ending in SMC-Rv2 */
	uint64_t v21;			/*   ... first contacts at release 1 (v2.1) */
	uint64_t declines_sent_by[SMCR_CLC_NREASONS];
	uint64_t declines_rcvd_by[SMCR_CLC_NREASONS];
	uint64_t fallbacks_by[SMCR_CLC_NREASONS];
};

struct smcr_clc_result {
	enum smcr_clc_outcome outcome;
	/* The version the exchange speaks: 1, or 2 (SMC-Rv2) once a v2
	 * Proposal was taken (server) or a v2 Accept came (client).  In
	 * v2 proposal.gid holds the v2 extension's RoCE GID, and eid the
	 * EID both named. */
	uint8_t version;
	uint8_t eid[SMCR_EID_LEN];
	/* SMC-Rv2, for a new link group: the release both speak
	 * (SMCR_CLC_RELEASE_0 or _1; 0 in v1) and, at release 1, the
	 * group's limits both echo (max_conns 16..255, max_links 1..2); 0
	 * where not negotiated (release 0, v1).  A server has them from any
	 * v2 Proposal before ops->accept_proposal (they apply if it makes a
	 * group); a client from a first-contact Accept before ops->accept
	 * (a subsequent contact leaves them 0: the group has its own). */
	uint8_t release;
	uint8_t max_conns, max_links;
	int err;			/* ABORT: the -errno returned; else 0 */
	/* FALLBACK: the Decline's diagnosis (sent or received) or a local
	 * SMCR_DECL_TIMEOUT_*; ABORT: a SMCR_DECL_TIMEOUT_* or 0. */
	uint32_t reason;
	enum smcr_clc_side side;
	bool first_contact;		/* the Accept's F (sent or received) */
	bool peer_out_of_sync;		/* the peer's Decline had S (C.4): its
					 * link group must be torn down */
	/* ABORT: the peer's first bytes were no CLC at all (a server that
	 * fell back to TCP on silence before our Proposal came). */
	bool peer_not_clc;
	/* The messages of the exchange that happened, either direction
	 * (have_* says which).  decline is the one sent or received. */
	bool have_proposal, have_accept, have_confirm, have_decline;
	struct smcr_clc_proposal proposal;
	struct smcr_clc_accept_confirm accept;
	struct smcr_clc_accept_confirm confirm;
	struct smcr_clc_decline decline;
	struct smcr_clc_stats stats;	/* this exchange only */
};

/* Callbacks.  Each returns 0 to go on or a Decline diagnosis code
 * (SMCR_DECL_*, not 0) to decline with.  fd is the CLC socket (for
 * getsockname, smcr_clc_local_prefixes, smcr_clc_prefix_match); the
 * callbacks must not read or write it. */
struct smcr_clc_ops {
	/* Client: fill the Proposal body (peer ID, GID, MAC, ip_area_offset,
	 * IPv4 subnet/IPv6 prefixes: smcr_clc_local_prefixes()).  A code
	 * (e.g. SMCR_DECL_NOSMCRDEV: no RNIC) sends a Decline instead, so
	 * the server stops waiting, and falls back. */
	uint32_t (*propose)(void *arg, int fd, struct smcr_clc_proposal *prop);
	/* Client: the server accepted.  First contact (acc->first_contact):
	 * set up the link (QP to RTR) and RMBE; else find the link named by
	 * the Accept (none: SMCR_DECL_SYNCERR, C.4) and allocate the RMBE.
	 * Fill conf (conf->first_contact is ignored). */
	uint32_t (*accept)(void *arg, int fd, const struct smcr_clc_proposal *prop,
			   const struct smcr_clc_accept_confirm *acc,
			   struct smcr_clc_accept_confirm *conf);
	/* Server: find or create a link group (set acc->first_contact),
	 * allocate the RMBE, fill acc.  Or decline: SMCR_DECL_MEM,
	 * SMCR_DECL_DIFFPREFIX (smcr_clc_prefix_match), ... */
	uint32_t (*accept_proposal)(void *arg, int fd, const struct smcr_clc_proposal *prop,
				    struct smcr_clc_accept_confirm *acc);
	/* Server: the client confirmed (first contact: connect the QP).  A
	 * code is sent as a Decline on first contact; on a subsequent
	 * contact it aborts (no Decline after an Accept: C.3). */
	uint32_t (*confirm)(void *arg, int fd, const struct smcr_clc_accept_confirm *acc,
			    const struct smcr_clc_accept_confirm *conf);
	/* Optional: after accept (client) or accept_proposal (server)
	 * returned 0, the exchange did not end in SMC-R: release what they
	 * set up.  Called once, just before smcr_clc_client/server return. */
	void (*undo)(void *arg, const struct smcr_clc_result *res);
};

/* The client's side, on a connected socket.  ops->propose and ops->accept
 * are required.  cfg may be NULL (defaults, zero peer ID).  Returns
 * SMCR_CLC_SMCR, SMCR_CLC_FALLBACK or -errno (see above); res is always
 * filled. */
int smcr_clc_client(int fd, const struct smcr_clc_ops *ops, void *arg,
		    const struct smcr_clc_cfg *cfg, struct smcr_clc_result *res);

/* The server's side, on an accepted socket.  ops->accept_proposal and
 * ops->confirm are required. */
int smcr_clc_server(int fd, const struct smcr_clc_ops *ops, void *arg,
		    const struct smcr_clc_cfg *cfg, struct smcr_clc_result *res);

/* For the first-contact window after the CLC exchange (C.2), until CONFIRM
 * LINK completes.  Sends a Decline (S set for SMCR_DECL_SYNCERR) within
 * timeout_ms (<= 0: the default).  0 or -errno.  stats may be NULL. */
int smcr_clc_send_decline(int fd, const struct smcr_peer_id *id, uint32_t diagnosis,
			  int timeout_ms, struct smcr_clc_stats *stats);

/* Waits up to timeout_ms (0: just look; negative: the default) for a
 * Decline.  Returns 1 with *decl filled (the stream then stands at the
 * first application byte: fall back), 0 if no byte arrived (nothing
 * consumed), or -errno: -ETIMEDOUT (part of a message only), -EPROTO
 * (anything but a Decline), -ECONNRESET (peer closed).  stats may be NULL. */
int smcr_clc_recv_decline(int fd, int timeout_ms, struct smcr_clc_decline *decl,
			  struct smcr_clc_stats *stats);

/* Fills prop's IPv4 subnet and mask length (IPv4 or v4-mapped local
 * address: the subnet of the local interface address that covers it) or
 * its IPv6 prefixes (every non-link-local prefix of the interface that
 * holds the local address, at most 8), from getsockname and getifaddrs,
 * as Linux does.  0, or -errno (-EAFNOSUPPORT for non-IP sockets,
 * -EADDRNOTAVAIL if no interface holds the address). */
int smcr_clc_local_prefixes(int fd, struct smcr_clc_proposal *prop);

/* Server, first contact (§3.5.1.2): 1 if a local interface address of the
 * interface holding fd's local address is on the client's IPv4 subnet
 * (same mask length) or on one of its IPv6 prefixes, 0 if not, -errno. */
int smcr_clc_prefix_match(int fd, const struct smcr_clc_proposal *prop);

/* A description of any diagnosis code, ours included ("unknown"). */
const char *smcr_clc_decline_str(uint32_t code);

/* The stats slot of a code (SMCR_CLC_NREASONS - 1 for any other code), and
 * the code of a slot (0 for the "other" slot). */
unsigned int smcr_clc_reason_index(uint32_t code);
uint32_t smcr_clc_reason_code(unsigned int index);

/* dst += src, field by field. */
void smcr_clc_stats_add(struct smcr_clc_stats *dst, const struct smcr_clc_stats *src);

const char *smcr_clc_outcome_str(enum smcr_clc_outcome outcome);

#endif
