/* SPDX-License-Identifier: BSD-3-Clause */
/* smcrbd: SMC-R messages as the stack sees them (host byte order), and the
 * codecs between them and the wire (RFC 7609 Appendix A; wire.h).
 *
 * Conventions
 * -----------
 * - Decoders take (buf, len) and a host struct to fill.  They read at most
 *   len bytes, never more, validate everything a receiver must validate,
 *   and return the number of bytes the message occupies (> 0) or one of the
 *   negative SMCR_E* codes below.  On failure the host struct is
 *   unspecified (smcr_clc_hdr_decode is the one exception: see there).
 *   Reserved fields and bits are ignored on receipt (RFC 7609 A.2: "set to
 *   zero and not validated").
 * - Encoders take a host struct and (buf, len); they write the whole message
 *   with every reserved byte zero and return its length (> 0), or
 *   SMCR_E_NOSPC if len is too small (nothing written), or SMCR_E_INVAL if a
 *   host field does not fit its wire field (e.g. a QP number above 24 bits).
 * - Errors are negative errno values (liburing style), one per kind of
 *   failure, so callers and tests can tell them apart.  smcr_msg_strerror()
 *   names them.
 * - Nothing here allocates, logs or keeps state; every function is
 *   thread-safe.
 */
#ifndef SMCR_MSG_H
#define SMCR_MSG_H

#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* ---- errors ------------------------------------------------------------ */

#define SMCR_E_TRUNC      (-ENODATA)	/* the buffer ends before the message does */
#define SMCR_E_EYECATCHER (-EPROTO)	/* CLC: leading eyecatcher is not E2 D4 C3 D9 */
#define SMCR_E_TRAILER    (-EBADMSG)	/* CLC: trailing eyecatcher is wrong */
#define SMCR_E_LENGTH     (-EMSGSIZE)	/* length field wrong for the type, or inconsistent */
#define SMCR_E_TYPE       (-EBADRQC)	/* unknown type (LLC: one the peer must support) */
#define SMCR_E_OPTIONAL   (-EOPNOTSUPP)	/* LLC: unknown type of the b'10' class: discard silently */
#define SMCR_E_NOTTYPE    (-ENOMSG)	/* a valid type, but not one this decoder handles */
#define SMCR_E_VERSION    (-EPROTONOSUPPORT) /* CLC: version other than 1 */
#define SMCR_E_RANGE      (-ERANGE)	/* a field holds a value outside its range */
#define SMCR_E_PREFIXES   (-EOVERFLOW)	/* CLC Proposal: IPv6 prefixes do not fit the message */
#define SMCR_E_NOSPC      (-ENOSPC)	/* encoder: output buffer too small */
#define SMCR_E_INVAL      (-EINVAL)	/* encoder: a host field does not fit on the wire */

/* A short name for any value above (or "unknown error"). */
const char *smcr_msg_strerror(int err);

/* ---- common ------------------------------------------------------------ */

#define SMCR_GID_LEN 16
#define SMCR_MAC_LEN 6
#define SMCR_MAX_LINKS 8		/* links per link group (RFC 7609) */

/* QP MTU, enumerated as in A.2.3 (the same numbers as enum ibv_mtu). */
enum smcr_mtu {
	SMCR_MTU_256 = 1,
	SMCR_MTU_512 = 2,
	SMCR_MTU_1024 = 3,
	SMCR_MTU_2048 = 4,
	SMCR_MTU_4096 = 5,
};
static inline bool smcr_mtu_valid(unsigned int mtu)
{
	return mtu >= SMCR_MTU_256 && mtu <= SMCR_MTU_4096;
}
/* Bytes for a valid enumerated MTU, 0 otherwise. */
static inline unsigned int smcr_mtu_bytes(unsigned int mtu)
{
	return smcr_mtu_valid(mtu) ? 128u << mtu : 0;
}

/* ---- A.1 TCP option ------------------------------------------------------ */

/* Writes the 6-byte option (kind 254, length 6, ExID E2D4C3D9). */
int smcr_tcpopt_encode(void *buf, size_t len);

/* Scans a TCP option list (the bytes after the 20-byte fixed TCP header) for
 * the SMC-R option.  Returns 1 if present, 0 if not, SMCR_E_TRUNC if an
 * option runs past the end, SMCR_E_LENGTH if an option length is below 2
 * or the SMC-R option (kind 254 with our ExID) is not 6 bytes long. */
int smcr_tcpopt_find(const void *opts, size_t len);

/* The same for a whole TCP header (as in TCP_SAVED_SYN after the IP
 * header): uses the data offset to find the options; SMCR_E_TRUNC if the
 * header is shorter than it says, SMCR_E_LENGTH if the offset is below 5. */
int smcr_tcpopt_find_in_tcphdr(const void *tcphdr, size_t len);

/* ---- A.2 CLC ------------------------------------------------------------- */

enum smcr_clc_type {
	SMCR_CLC_PROPOSAL = 1,
	SMCR_CLC_ACCEPT = 2,
	SMCR_CLC_CONFIRM = 3,
	SMCR_CLC_DECLINE = 4,
};

#define SMCR_CLC_VERSION 1
#define SMCR_CLC_HDR_LEN 8
#define SMCR_CLC_TRAILER_LEN 4
#define SMCR_CLC_PROPOSAL_MIN_LEN 52		/* IPv4, no growth area */
#define SMCR_CLC_ACCEPT_LEN 68
#define SMCR_CLC_CONFIRM_LEN 68
#define SMCR_CLC_DECLINE_LEN 28
#define SMCR_CLC_MAX_IPV6_PREFIXES 8
#define SMCR_CLC_FLAG_FIRST_CONTACT 0x08	/* Accept: F */
#define SMCR_CLC_FLAG_OUT_OF_SYNC 0x08		/* Decline: S */
/* CLC v2 (Linux): byte 7 holds version << 4 | typev2 << 2 | typev1; a
 * Proposal's typev1 says what it offers in v1, typev2 in v2. */
#define SMCR_CLC_TYPE_MASK 0x03
#define SMCR_CLC_TYPE_R 0			/* SMC-R */
#define SMCR_CLC_TYPE_D 1			/* SMC-D */
#define SMCR_CLC_TYPE_N 2			/* neither */
#define SMCR_CLC_TYPE_B 3			/* both */

/* The longest v1 message seen in practice: a Proposal with eight IPv6
 * prefixes and Linux's 40-byte growth area (228 bytes).  The length field
 * allows up to 65535 (a larger growth area); a stream reader that buffers
 * only this much should decline anything longer. */
#define SMCR_CLC_MAX_V1_LEN (SMCR_CLC_PROPOSAL_MIN_LEN + SMCR_CLC_IP_AREA_OFFSET_LINUX + \
			     17 * SMCR_CLC_MAX_IPV6_PREFIXES)

/* Peer diagnosis codes for Decline.  RFC 7609 leaves them to the
 * implementation; these are the values Linux AF_SMC uses (net/smc/smc_clc.h),
 * so that tools on either side print them alike. */
#define SMCR_DECL_MEM		0x01010000u /* insufficient memory resources */
#define SMCR_DECL_TIMEOUT_CL	0x02010000u /* timeout waiting for CONFIRM LINK */
#define SMCR_DECL_TIMEOUT_AL	0x02020000u /* timeout waiting for ADD LINK */
#define SMCR_DECL_CNFERR	0x03000000u /* configuration error */
#define SMCR_DECL_PEERNOSMC	0x03010000u /* peer did not indicate SMC (TCP option) */
#define SMCR_DECL_IPSEC		0x03020000u /* IPsec in use */
#define SMCR_DECL_NOSMCDEV	0x03030000u /* no SMC device found */
#define SMCR_DECL_NOSMCRDEV	0x03030002u /* no SMC-R device found */
#define SMCR_DECL_NOUEID	0x03030008u /* v2: no user EID in common */
#define SMCR_DECL_RELEASEERR	0x03030009u /* v2.1: release negotiation failed */
#define SMCR_DECL_MAXCONNERR	0x0303000au /* v2.1: max connections negotiation failed */
#define SMCR_DECL_MAXLINKERR	0x0303000bu /* v2.1: max links negotiation failed */
#define SMCR_DECL_MODEUNSUPP	0x03040000u /* SMC modes do not match */
#define SMCR_DECL_RMBE_EC	0x03050000u /* peer uses RMBE eyecatchers */
#define SMCR_DECL_OPTUNSUPP	0x03060000u /* socket option not supported */
#define SMCR_DECL_DIFFPREFIX	0x03070000u /* IP prefix / subnet mismatch */
#define SMCR_DECL_GETVLANERR	0x03080000u /* cannot get VLAN of the IP device */
#define SMCR_DECL_NOACTLINK	0x030a0000u /* no active link in the link group */
#define SMCR_DECL_NOSRVLINK	0x030b0000u /* link from the server not found */
#define SMCR_DECL_VERSMISMAT	0x030c0000u /* SMC version mismatch */
#define SMCR_DECL_SYNCERR	0x04000000u /* synchronisation error */
#define SMCR_DECL_PEERDECL	0x05000000u /* peer declined during handshake */
#define SMCR_DECL_INTERR	0x09990000u /* internal error */
#define SMCR_DECL_ERR_RTOK	0x09990001u /*   rtoken handling failed */
#define SMCR_DECL_ERR_RDYLNK	0x09990002u /*   making the link ready failed */
#define SMCR_DECL_ERR_REGBUF	0x09990003u /*   registering RDMA buffers failed */

/* A short description of a diagnosis code ("unknown" if not listed). */
const char *smcr_decline_str(uint32_t diag);

/* A.2.1 */
struct smcr_peer_id {
	uint16_t instance;
	uint8_t mac[SMCR_MAC_LEN];
};

struct smcr_clc_hdr {
	uint8_t type;		/* enum smcr_clc_type, or anything on error */
	uint16_t length;	/* whole message */
	uint8_t version;	/* high nibble of byte 7 */
	uint8_t flags;		/* low nibble of byte 7 */
};

struct smcr_ipv6_prefix {
	uint8_t prefix[16];
	uint8_t len;		/* 0..128 */
};

/* The size of the growth area ("offset to mask/prefix area") to send in a
 * Proposal.  A.2.2 says it is 0 in this version and that receivers must
 * skip it, whatever it is.  Linux since 5.11 always sends 40 (its SMC-D
 * area, zeros for SMC-R), and Wireshark's SMC dissector (4.0 on Debian 12,
 * and later versions) assumes those 40 bytes: it shows an offset-0 Proposal
 * as malformed.  Sending 40 zero bytes is legal, and parses everywhere. */
#define SMCR_CLC_IP_AREA_OFFSET_LINUX 40

/* A.2.2 */
struct smcr_clc_proposal {
	struct smcr_peer_id peer_id;
	uint8_t gid[SMCR_GID_LEN];		/* client's preferred GID */
	uint8_t mac[SMCR_MAC_LEN];		/* client's preferred MAC */
	uint16_t ip_area_offset;		/* growth area size, sent as zeros:
						 * SMCR_CLC_IP_AREA_OFFSET_LINUX */
	uint32_t ipv4_subnet;			/* host order, e.g. 0xffffff00 */
	uint8_t ipv4_mask_len;			/* 0..32 */
	uint8_t ipv6_prefix_count;		/* 0..8 */
	struct smcr_ipv6_prefix ipv6_prefix[SMCR_CLC_MAX_IPV6_PREFIXES];
};

/* A.2.3 (server's values) and A.2.4 (client's values). */
struct smcr_clc_accept_confirm {
	bool first_contact;			/* Accept only (F); ignored for Confirm */
	struct smcr_peer_id peer_id;
	uint8_t gid[SMCR_GID_LEN];
	uint8_t mac[SMCR_MAC_LEN];
	uint32_t qpn;				/* 24 bits */
	uint32_t rmb_rkey;
	uint8_t rmbe_idx;
	uint32_t rmbe_alert_token;
	uint8_t rmbe_size;			/* compressed, 4 bits: smcr_rmb_size_decompress() */
	uint8_t qp_mtu;				/* enum smcr_mtu, 4 bits */
	uint64_t rmb_vaddr;
	uint32_t psn;				/* 24 bits */
};

/* A.2.5 */
struct smcr_clc_decline {
	bool out_of_sync;			/* S */
	struct smcr_peer_id peer_id;
	uint32_t diagnosis;			/* SMCR_DECL_* */
};

struct smcr_clc_msg {
	struct smcr_clc_hdr hdr;	/* decode: filled; encode: only hdr.type is read */
	union {
		struct smcr_clc_proposal proposal;
		struct smcr_clc_accept_confirm accept;
		struct smcr_clc_accept_confirm confirm;
		struct smcr_clc_decline decline;
	};
};

/* Checks the first 8 bytes of a CLC message (eyecatcher, type, length,
 * version) so a stream reader knows how many bytes to read.  Returns the
 * message length, or SMCR_E_TRUNC (fewer than 8 bytes), SMCR_E_EYECATCHER,
 * SMCR_E_TYPE, SMCR_E_LENGTH (below the type's minimum), or SMCR_E_VERSION.
 *
 * SMCR_E_VERSION (e.g. a v2 Linux peer): *hdr is still filled in, so the
 * caller can read and drop hdr->length bytes and answer with a Decline
 * (SMCR_DECL_VERSMISMAT) instead of misparsing the message.  For every other
 * error *hdr is unspecified. */
int smcr_clc_hdr_decode(const void *buf, size_t len, struct smcr_clc_hdr *hdr);

/* Decodes one whole CLC message of any type into msg (msg->hdr too).
 * Besides the header errors above: SMCR_E_TRUNC if len < hdr.length
 * (bytes after hdr.length are not looked at), SMCR_E_LENGTH if the length
 * field is wrong for the type, SMCR_E_TRAILER, SMCR_E_RANGE (Accept with F
 * whose MTU is not 1..5; Proposal with more than 8 prefixes, a prefix
 * longer than 128 bits or an IPv4 mask longer than 32), SMCR_E_PREFIXES
 * (the prefixes announced run into the trailer).  Returns hdr.length.
 *
 * A Confirm's MTU is not checked (the RFC validates it only on first
 * contact, which the decoder cannot know): check smcr_mtu_valid() then. */
int smcr_clc_decode(const void *buf, size_t len, struct smcr_clc_msg *msg);
/* The v1 part of a v2 (or later) Proposal that also offers SMC-R v1
 * (typev1 R or both): head, IP area and prefixes as in v1, the v2
 * extension after them skipped: v1 is the highest version both offer.  0, SMCR_E_VERSION when it offers no SMC-R v1, or the v1
 * decoder's errors (SMCR_E_TRUNC if len < its length). */
int smcr_clc_proposal_v2_decode(const void *buf, size_t len, struct smcr_clc_proposal *m);

/* Like smcr_clc_decode, but SMCR_E_NOTTYPE unless the message has the
 * given type. */
int smcr_clc_decode_type(const void *buf, size_t len, enum smcr_clc_type type,
			 struct smcr_clc_msg *msg);

/* Encodes msg (of type msg->hdr.type; the rest of msg->hdr is ignored:
 * version 1, the length and the flags follow from the body). */
int smcr_clc_encode(const struct smcr_clc_msg *msg, void *buf, size_t len);

/* The encoded length of msg, or SMCR_E_INVAL / SMCR_E_TYPE. */
int smcr_clc_encoded_len(const struct smcr_clc_msg *msg);

/* ---- CLC v2 (SMC-Rv2, Linux net/smc) --------------------------------------- */

#define SMCR_CLC_VERSION_2 2
#define SMCR_EID_LEN 32			/* blank-padded */
#define SMCR_CLC_MAX_EIDS 8		/* user EIDs in a Proposal */
#define SMCR_CLC_MAX_GIDS 8		/* GIDs in a first-contact Confirm */
#define SMCR_CLC_HOSTNAME_LEN 32
#define SMCR_CLC_OS_LINUX 2
#define SMCR_CLC_V2_ACC_CONF_LEN 108	/* subsequent contact */
#define SMCR_CLC_V2_DECLINE_LEN 44
/* SMC-Rv2 releases (the v2 extension's and first-contact extension's
 * 4-bit release): 0 is SMC-Rv2.0 (Linux 5.10-6.5), 1 SMC-Rv2.1 (Linux
 * 6.6+: max_conns, max_links, feature_mask, vendor options). */
#define SMCR_CLC_RELEASE_0 0
#define SMCR_CLC_RELEASE_1 1
/* SMC-Rv2.1 limits as Linux enforces them (SMC_CONN_PER_LGR_MIN/MAX,
 * SMC_LINKS_ADD_LNK_MIN/MAX). */
#define SMCR_CLC_MIN_CONNS 16
#define SMCR_CLC_MAX_CONNS 255
#define SMCR_CLC_MIN_LINKS 1
#define SMCR_CLC_MAX_LINKS 2

struct smcr_clc_v2_proposal {
	uint8_t typev1, typev2;			/* SMCR_CLC_TYPE_*: what it offers in v1, v2 */
	struct smcr_clc_proposal v1;		/* head; IP area and prefixes if typev1 != N */
	/* the v2 extension (typev2 != N) */
	uint8_t release;			/* 4 bits */
	bool seid;				/* a system EID follows (SMC-Dv2) */
	uint8_t roce_gid[SMCR_GID_LEN];		/* the client's RoCE v2 GID */
	/* release >= 1: the client's limits and features (else zero) */
	uint8_t max_conns, max_links;
	uint16_t feature_mask;
	uint8_t eid_count;
	uint8_t eids[SMCR_CLC_MAX_EIDS][SMCR_EID_LEN];
};

struct smcr_clc_v2_accept_confirm {
	struct smcr_clc_accept_confirm r;	/* r.first_contact: typev2's bit, both types */
	uint8_t eid[SMCR_EID_LEN];
	/* first contact only */
	bool direct;				/* no gateway (v2_direct) */
	uint8_t os_type, release;		/* 4 bits each */
	uint8_t hostname[SMCR_CLC_HOSTNAME_LEN];
	/* release >= 1: the group's limits, the features both have, the
	 * vendor options (zero from us); coded at any release */
	uint8_t max_conns, max_links;
	uint16_t feature_mask;
	uint32_t vendor_options;
	uint8_t gid_count;			/* Confirm only */
	uint8_t gids[SMCR_CLC_MAX_GIDS][SMCR_GID_LEN];
};

struct smcr_clc_v2_decline {
	struct smcr_clc_decline d;
	uint8_t os_type;			/* 4 bits */
	uint32_t diagnosis_v2[4];
};

struct smcr_clc_v2_msg {
	struct smcr_clc_hdr hdr;	/* decode: filled; encode: only hdr.type is read */
	union {
		struct smcr_clc_v2_proposal proposal;
		struct smcr_clc_v2_accept_confirm accept;
		struct smcr_clc_v2_accept_confirm confirm;
		struct smcr_clc_v2_decline decline;
	};
};

/* Decodes one whole CLC message of version 2 or later (SMC-R; an Accept or
 * Confirm for SMC-D is SMCR_E_RANGE).  Returns hdr.length, or
 * SMCR_E_TRUNC, SMCR_E_EYECATCHER, SMCR_E_TYPE, SMCR_E_VERSION (version 1:
 * smcr_clc_decode()), SMCR_E_LENGTH (a length wrong for the type, or an
 * offset or count that runs past the trailer), SMCR_E_TRAILER, SMCR_E_RANGE
 * (more than 8 EIDs or GIDs, a bad prefix or MTU). */
int smcr_clc_v2_decode(const void *buf, size_t len, struct smcr_clc_v2_msg *msg);

/* Encodes msg as Linux 6.1 does (version 2; a Proposal offers v1 too when
 * typev1 is R, with the IP area after a 40-byte SMC-D area).  The length,
 * or SMCR_E_NOSPC, SMCR_E_INVAL, SMCR_E_TYPE. */
int smcr_clc_v2_encode(const struct smcr_clc_v2_msg *msg, void *buf, size_t len);
int smcr_clc_v2_encoded_len(const struct smcr_clc_v2_msg *msg);

/* ---- A.3 LLC ------------------------------------------------------------- */

enum smcr_llc_type {
	SMCR_LLC_CONFIRM_LINK = 0x01,
	SMCR_LLC_ADD_LINK = 0x02,
	SMCR_LLC_ADD_LINK_CONT = 0x03,
	SMCR_LLC_DELETE_LINK = 0x04,
	SMCR_LLC_REQ_ADD_LINK = 0x05,		/* SMC-Rv2 only (Linux) */
	SMCR_LLC_CONFIRM_RKEY = 0x06,
	SMCR_LLC_TEST_LINK = 0x07,
	SMCR_LLC_CONFIRM_RKEY_CONT = 0x08,
	SMCR_LLC_DELETE_RKEY = 0x09,
};

#define SMCR_LLC_LEN 44
/* SMC-Rv2 (Linux net/smc): byte 0 holds version << 4 | type, bytes 1-2 the
 * message length (44..8192), which Linux 6.1 writes in its host order
 * (little-endian on every peer seen); longer messages (ADD LINK with its
 * RKey list, REQ ADD LINK, DELETE RKEY) go in one SEND of that length. */
#define SMCR_LLC_VERSION_2 2
#define SMCR_LLC_V2_MAX_LEN 8192
#define SMCR_LLC_FLAG_REPLY 0x80
#define SMCR_LLC_FLAG_ADD_LINK_REJECT 0x40	/* Z */
#define SMCR_LLC_FLAG_DEL_LINK_ALL 0x40		/* A */
#define SMCR_LLC_FLAG_DEL_LINK_ORDERLY 0x20	/* O */
#define SMCR_LLC_FLAG_RKEY_NEGATIVE 0x20	/* Z */
#define SMCR_LLC_FLAG_RKEY_RETRY 0x10		/* C (CONFIRM RKEY only) */
/* Not in the RFC: Linux sets these CONFIRM LINK flag bits to say it puts no
 * eyecatcher in its RMBEs, and refuses a link whose peer does not. */
#define SMCR_LLC_FLAG_NO_RMBE_EYEC 0x03

/* A.3.2 ADD LINK reject reason codes */
#define SMCR_LLC_ADD_REJ_NO_ALT_PATH 0x1
#define SMCR_LLC_ADD_REJ_INVALID_MTU 0x2

/* A.3.4 DELETE LINK reason codes */
#define SMCR_LLC_DEL_LOST_PATH		0x00010000u
#define SMCR_LLC_DEL_OP_INIT_TERM	0x00020000u
#define SMCR_LLC_DEL_PROG_INIT_TERM	0x00030000u /* link inactivity */
#define SMCR_LLC_DEL_PROT_VIOL		0x00040000u
#define SMCR_LLC_DEL_NOT_NEEDED		0x00050000u /* asymmetric link no longer needed */
#define SMCR_LLC_DEL_NO_LINK		0x00100000u /* reply: unknown link ID */

struct smcr_llc_confirm_link {			/* A.3.1 */
	uint8_t mac[SMCR_MAC_LEN];
	uint8_t gid[SMCR_GID_LEN];
	uint32_t qpn;				/* 24 bits */
	uint8_t link_num;
	uint32_t link_uid;
	uint8_t max_links;
	uint8_t max_conns;			/* SMC-Rv2.1 (the CLC's); else 0 */
	bool no_rmbe_eyec;			/* SMCR_LLC_FLAG_NO_RMBE_EYEC (Linux) */
	bool libsmcr;				/* SMCR_LLC_CONFIRM_LIBSMCR */
};

struct smcr_llc_add_link {			/* A.3.2 */
	bool reject;				/* Z */
	uint8_t reason;				/* SMCR_LLC_ADD_REJ_*, 4 bits */
	uint8_t mac[SMCR_MAC_LEN];
	uint8_t gid[SMCR_GID_LEN];
	uint32_t qpn;				/* 24 bits */
	uint8_t link_num;
	uint8_t qp_mtu;				/* enum smcr_mtu, 4 bits (not checked:
						 * 0 in some requests and rejects) */
	uint32_t psn;				/* 24 bits */
};

struct smcr_llc_rtoken_pair {			/* A.3.3 Figure 34 */
	uint32_t ref_rkey;
	uint32_t new_rkey;
	uint64_t new_vaddr;
};

struct smcr_llc_add_link_cont {			/* A.3.3 */
	uint8_t link_num;
	uint8_t num_rtokens;			/* remaining, these included */
	/* The first min(num_rtokens, 2) pairs are on the wire, the rest are
	 * zeros (decode: zeroed; encode: written as zeros). */
	struct smcr_llc_rtoken_pair pair[2];
};

struct smcr_llc_delete_link {			/* A.3.4 */
	bool all;				/* A */
	bool orderly;				/* O */
	uint8_t link_num;
	uint32_t reason;			/* SMCR_LLC_DEL_* */
};

struct smcr_llc_rkey_spec {			/* A.3.5 Figure 37 */
	uint8_t link_num;
	uint32_t rkey;
	uint64_t vaddr;
};

struct smcr_llc_confirm_rkey {			/* A.3.5 */
	bool negative;				/* Z */
	bool retry;				/* C */
	uint8_t num_tokens;			/* other links' RTokens, 0..7 */
	uint32_t rkey;				/* on the link carrying the message */
	uint64_t vaddr;
	/* The first min(num_tokens, 2) specs are on the wire, the rest zeros. */
	struct smcr_llc_rkey_spec other[2];
};

struct smcr_llc_confirm_rkey_cont {		/* A.3.6 */
	bool negative;				/* Z */
	uint8_t num_left;			/* remaining, these included, 0..7 */
	/* The first min(num_left, 3) specs are on the wire, the rest zeros. */
	struct smcr_llc_rkey_spec spec[3];
};

struct smcr_llc_delete_rkey {			/* A.3.7 */
	bool negative;				/* Z */
	uint8_t count;				/* 1..8 */
	uint8_t err_mask;			/* bit 0x80 >> i for rkey[i], i < count */
	uint32_t rkey[8];			/* rkey[count..7] are zeros */
};

struct smcr_llc_test_link {			/* A.3.8 */
	uint8_t user_data[16];
};

struct smcr_llc_msg;

/* SMC-Rv2 ADD LINK: after its 44 bytes, the RKeys of every RMB in use on
 * the new link (no ADD LINK CONTINUATION in v2). */
#define SMCR_LLC_ADD_LINK_V2_EXT_LEN 28
#define SMCR_LLC_V2_MAX_RKEYS 255
struct smcr_llc_add_link_v2_ext {
	bool direct;				/* no gateway */
	uint8_t target_gid[SMCR_GID_LEN];	/* the sender's new link's GID */
	uint16_t num_rkeys;			/* pairs that follow */
};

/* The extension of a v2 ADD LINK of len bytes (the whole message): up to
 * max pairs into pairs.  Returns the number of pairs on the wire (may be
 * above max: the rest are not read), or SMCR_E_TRUNC (no extension, or
 * fewer pairs than it says), SMCR_E_RANGE (more than 255). */
int smcr_llc_add_link_v2_ext_decode(const void *msg, size_t len,
				    struct smcr_llc_add_link_v2_ext *ext,
				    struct smcr_llc_rtoken_pair *pairs, unsigned int max);
/* Encodes a v2 ADD LINK: msg (type ADD LINK) and the extension with
 * ext->num_rkeys pairs.  The length, or SMCR_E_NOSPC / SMCR_E_INVAL. */
int smcr_llc_add_link_v2_encode(const struct smcr_llc_msg *msg,
				const struct smcr_llc_add_link_v2_ext *ext,
				const struct smcr_llc_rtoken_pair *pairs, void *buf, size_t len);

struct smcr_llc_req_add_link {			/* SMC-Rv2: the client's invitation */
	uint8_t gid_count;			/* GIDs offered (the message holds them all) */
	uint8_t gid[SMCR_GID_LEN];		/* the first, if gid_count > 0 */
};

struct smcr_llc_msg {
	uint8_t type;				/* enum smcr_llc_type */
	bool reply;				/* R */
	uint8_t version;			/* 0 or 1: v1; SMCR_LLC_VERSION_2 */
	uint16_t length;			/* decode: the length field (v2: may
						 * exceed the 44 bytes decoded) */
	union {
		struct smcr_llc_confirm_link confirm_link;
		struct smcr_llc_add_link add_link;
		struct smcr_llc_add_link_cont add_link_cont;
		struct smcr_llc_delete_link delete_link;
		struct smcr_llc_confirm_rkey confirm_rkey;
		struct smcr_llc_confirm_rkey_cont confirm_rkey_cont;
		struct smcr_llc_delete_rkey delete_rkey;
		struct smcr_llc_test_link test_link;
		struct smcr_llc_req_add_link req_add_link;
	};
};

/* What a received 44-byte work request buffer holds, from byte 0: its two
 * high-order bits b'11' mean CDC, anything else LLC (A.3). */
static inline bool smcr_wr_is_cdc(const void *buf, size_t len)
{
	return len >= 1 && (*(const uint8_t *)buf & 0xC0) == 0xC0;
}

/* Decodes an LLC message, v1 or SMC-Rv2 (the first 44 bytes of a longer
 * v2 message).  Errors: SMCR_E_TRUNC (len < 44), SMCR_E_LENGTH (v1: length
 * byte not 44; v2: length outside 44..8192), SMCR_E_NOTTYPE (a CDC message), SMCR_E_TYPE
 * (unknown type the peer must support: protocol error), SMCR_E_OPTIONAL
 * (unknown type of the b'10' class: drop silently), SMCR_E_RANGE (CONFIRM
 * RKEY token count above 7, CONFIRM RKEY CONT count above 7, DELETE RKEY
 * count not 1..8 or an error-mask bit beyond the count).  Returns 44. */
int smcr_llc_decode(const void *buf, size_t len, struct smcr_llc_msg *msg);

/* Encodes msg into 44 bytes (v2 header when msg->version is 2; an ADD
 * LINK reject's reason code then has no room, as in Linux).  SMCR_E_TYPE
 * for an unknown msg->type, or REQ ADD LINK in v1. */
int smcr_llc_encode(const struct smcr_llc_msg *msg, void *buf, size_t len);

/* Printable name of an LLC type ("unknown" otherwise). */
const char *smcr_llc_type_str(unsigned int type);

/* ---- A.4 CDC ------------------------------------------------------------- */

#define SMCR_CDC_TYPE 0xFE
#define SMCR_CDC_LEN 44
/* producer flags (byte 24) */
#define SMCR_CDC_WRITER_BLOCKED 0x80		/* B */
#define SMCR_CDC_URG_PENDING 0x40		/* P */
#define SMCR_CDC_URG_PRESENT 0x20		/* U */
#define SMCR_CDC_CONS_UPDATE_REQ 0x10		/* R */
#define SMCR_CDC_FAILOVER_VALIDATION 0x08	/* F */
/* connection state flags (byte 25) */
#define SMCR_CDC_PEER_DONE_WRITING 0x80		/* D */
#define SMCR_CDC_PEER_CONN_CLOSED 0x40		/* C */
#define SMCR_CDC_PEER_ABORT 0x20		/* A */

struct smcr_cdc_cursor {
	uint16_t wrap;
	uint32_t count;
};

struct smcr_cdc_msg {
	uint16_t seqno;
	uint32_t token;				/* alert token */
	struct smcr_cdc_cursor prod;
	struct smcr_cdc_cursor cons;
	bool writer_blocked;			/* B */
	bool urg_pending;			/* P */
	bool urg_present;			/* U */
	bool cons_update_req;			/* R */
	bool failover_validation;		/* F */
	bool peer_done_writing;			/* D */
	bool peer_conn_closed;			/* C */
	bool peer_abort;			/* A */
};

/* Decodes a CDC message.  Errors: SMCR_E_TRUNC (len < 44), SMCR_E_NOTTYPE
 * (byte 0 is not 0xFE), SMCR_E_LENGTH (length byte not 44).  Cursors are
 * not checked against the RMBE here; the connection does that.  Returns 44. */
int smcr_cdc_decode(const void *buf, size_t len, struct smcr_cdc_msg *msg);

/* Encodes msg into 44 bytes. */
int smcr_cdc_encode(const struct smcr_cdc_msg *msg, void *buf, size_t len);

#endif
