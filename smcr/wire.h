/* SPDX-License-Identifier: BSD-3-Clause */
/* smcrbd: SMC-R messages exactly as they travel on the wire (RFC 7609,
 * Appendix A).
 *
 * Every struct here is packed, every multi-byte integer is big-endian
 * (network byte order; the smcr_be* typedefs only document that), and every
 * reserved byte has a name.  Nothing outside clc_msg.c, llc_msg.c and
 * cdc_msg.c should touch these structs: the rest of the stack works on the
 * host structs of msg.h, and the encoders/decoders there are the only
 * bridges.  The codecs copy between a byte buffer and these structs with
 * memcpy, so buffers need no particular alignment.
 *
 * Byte offsets in the comments are from the start of the message.
 *
 * Where deployed implementations (Linux AF_SMC net/smc, z/OS, Wireshark's
 * SMC dissector) disagree with a figure of the RFC, the difference is called
 * out at the struct ("INTEROP").  There is one: ADD LINK.
 */
#ifndef SMCR_WIRE_H
#define SMCR_WIRE_H

#include <stdint.h>

typedef uint16_t smcr_be16;
typedef uint32_t smcr_be32;
typedef uint64_t smcr_be64;

#define SMCR_PACKED __attribute__((packed))

/* "SMCR" in IBM-1047 (EBCDIC): the CLC eyecatcher and the TCP option ExID. */
#define SMCR_EYECATCHER_0 0xE2
#define SMCR_EYECATCHER_1 0xD4
#define SMCR_EYECATCHER_2 0xC3
#define SMCR_EYECATCHER_3 0xD9
#define SMCR_EYECATCHER_BE32 0xE2D4C3D9u

/* ---- A.1 TCP option (RFC 6994 shared experimental option) ------------- */

#define SMCR_TCPOPT_KIND 254
#define SMCR_TCPOPT_LEN 6

struct smcr_wire_tcpopt {
	uint8_t kind;		/* 0: 254 */
	uint8_t len;		/* 1: 6 */
	smcr_be32 exid;		/* 2: E2 D4 C3 D9 */
} SMCR_PACKED;
_Static_assert(sizeof(struct smcr_wire_tcpopt) == 6, "A.1 TCP option is 6 bytes");

/* ---- A.2 CLC messages (over the TCP connection) ----------------------- */

struct smcr_wire_clc_hdr {
	uint8_t eyecatcher[4];	/* 0: E2 D4 C3 D9 */
	uint8_t type;		/* 4: 1 Proposal, 2 Accept, 3 Confirm, 4 Decline */
	smcr_be16 length;	/* 5: whole message, header and trailer included */
	uint8_t version_flags;	/* 7: version (high nibble); F (Accept) or
				 *    S (Decline) = 0x08; 0x07 reserved */
} SMCR_PACKED;
_Static_assert(sizeof(struct smcr_wire_clc_hdr) == 8, "CLC header is 8 bytes");

struct smcr_wire_clc_trailer {
	uint8_t eyecatcher[4];	/* E2 D4 C3 D9 */
} SMCR_PACKED;
_Static_assert(sizeof(struct smcr_wire_clc_trailer) == 4, "CLC trailer is 4 bytes");

/* A.2.1 peer ID */
struct smcr_wire_peer_id {
	smcr_be16 instance;	/* 0: instance ID */
	uint8_t mac[6];		/* 2: RoCE MAC of one of the peer's RNICs */
} SMCR_PACKED;
_Static_assert(sizeof(struct smcr_wire_peer_id) == 8, "A.2.1 peer ID is 8 bytes");

/* A.2.2 SMC Proposal, the part before the optional growth area. */
struct smcr_wire_clc_proposal_head {
	struct smcr_wire_clc_hdr hdr;		/*  0 */
	struct smcr_wire_peer_id peer_id;	/*  8: client's peer ID */
	uint8_t gid[16];			/* 16: client's preferred GID */
	uint8_t mac[6];				/* 32: client's preferred MAC */
	smcr_be16 ip_area_offset;		/* 38: bytes to skip to the IP area (0 in v1) */
} SMCR_PACKED;
_Static_assert(sizeof(struct smcr_wire_clc_proposal_head) == 40, "Proposal head is 40 bytes");

/* A.2.2 IP area: follows the head after ip_area_offset bytes. */
struct smcr_wire_clc_ip_area {
	smcr_be32 ipv4_subnet;		/* +0: IPv4 subnet mask (0 on IPv6) */
	uint8_t ipv4_mask_len;		/* +4: significant bits of the mask */
	uint8_t reserved[2];		/* +5 */
	uint8_t ipv6_prefix_count;	/* +7: number of IPv6 prefixes (max 8) */
} SMCR_PACKED;
_Static_assert(sizeof(struct smcr_wire_clc_ip_area) == 8, "Proposal IP area is 8 bytes");

/* A.2.2 Figure 27: one IPv6 prefix array element. */
struct smcr_wire_ipv6_prefix {
	uint8_t prefix[16];		/* +0 */
	uint8_t prefix_len;		/* +16 */
} SMCR_PACKED;
_Static_assert(sizeof(struct smcr_wire_ipv6_prefix) == 17, "IPv6 prefix element is 17 bytes");

/* A.2.2 the whole Proposal of an IPv4 flow: no growth area, no prefixes.
 * Otherwise the message is head, growth area, IP area, prefixes, trailer. */
struct smcr_wire_clc_proposal {
	struct smcr_wire_clc_proposal_head head;	/*  0 */
	struct smcr_wire_clc_ip_area ip;		/* 40 */
	struct smcr_wire_clc_trailer trailer;		/* 48 */
} SMCR_PACKED;
_Static_assert(sizeof(struct smcr_wire_clc_proposal) == 52, "A.2.2 v1 IPv4 Proposal is 52 bytes");

/* A.2.3 SMC Accept and A.2.4 SMC Confirm share this layout. */
struct smcr_wire_clc_accept_confirm {
	struct smcr_wire_clc_hdr hdr;		/*  0: flags 0x08 = first contact (Accept) */
	struct smcr_wire_peer_id peer_id;	/*  8 */
	uint8_t gid[16];			/* 16: RoCE GID */
	uint8_t mac[6];				/* 32: RoCE MAC */
	uint8_t qpn[3];				/* 38: QP number, 24 bits */
	smcr_be32 rmb_rkey;			/* 41: RMB rkey */
	uint8_t rmbe_idx;			/* 45: RMB element index */
	smcr_be32 rmbe_alert_token;		/* 46: RMBE alert token */
	uint8_t rmbe_size_mtu;			/* 50: Bsize (high nibble), MTU (low nibble) */
	uint8_t reserved1;			/* 51 */
	smcr_be64 rmb_vaddr;			/* 52: RMB virtual address */
	uint8_t reserved2;			/* 60 */
	uint8_t psn[3];				/* 61: initial packet sequence number */
	struct smcr_wire_clc_trailer trailer;	/* 64 */
} SMCR_PACKED;
_Static_assert(sizeof(struct smcr_wire_clc_accept_confirm) == 68, "A.2.3/A.2.4 Accept/Confirm are 68 bytes");

/* A.2.5 SMC Decline */
struct smcr_wire_clc_decline {
	struct smcr_wire_clc_hdr hdr;		/*  0: flags 0x08 = S (out of sync) */
	struct smcr_wire_peer_id peer_id;	/*  8: sender's peer ID */
	smcr_be32 diagnosis;			/* 16: peer diagnosis information */
	uint8_t reserved[4];			/* 20 */
	struct smcr_wire_clc_trailer trailer;	/* 24 */
} SMCR_PACKED;
_Static_assert(sizeof(struct smcr_wire_clc_decline) == 28, "A.2.5 Decline is 28 bytes");

/* ---- CLC v2 (SMC-Rv2 as Linux 6.1 speaks it: net/smc/smc_clc.h) ------- */

/* v2 Proposal: the 40-byte head (ip_area_offset 0, or 40 when it offers
 * v1 too), then this area, then (v1 on offer) the IP area and prefixes,
 * then the v2 extension, its EIDs, (SMC-Dv2) more, the trailer. */
struct smcr_wire_clc_smcd_area {
	smcr_be64 ism_gid;			/*  0: SMC-D only */
	smcr_be16 ism_chid;			/*  8: SMC-D only */
	smcr_be16 v2_ext_offset;		/* 10: from the end of this field */
	uint8_t reserved[28];			/* 12 */
} SMCR_PACKED;
_Static_assert(sizeof(struct smcr_wire_clc_smcd_area) == 40, "v2 Proposal SMC-D area is 40 bytes");

struct smcr_wire_clc_v2_ext {
	uint8_t eid_count;			/*  0: user EIDs after this */
	uint8_t ism_gid_count;			/*  1: SMC-Dv2 */
	uint8_t reserved1;			/*  2 */
	uint8_t release_seid;			/*  3: release (high nibble), SEID (0x01) */
	uint8_t reserved2[2];			/*  4 */
	smcr_be16 smcd_v2_ext_offset;		/*  6: SMC-Dv2 */
	uint8_t roce_gid[16];			/*  8: the client's RoCE v2 GID */
	/* SMC-Rv2.1 (release 1; Linux 6.6+): the client's limits for a new
	 * link group and its supplemental features.  Zero from a v2.0 peer
	 * (Linux 6.1), which reads none of them. */
	uint8_t max_conns;			/* 24: 16..255 */
	uint8_t max_links;			/* 25: 1..2 in Linux */
	smcr_be16 feature_mask;			/* 26: Linux 6.7+: bit 0 emulated ISM (SMC-D) */
	uint8_t reserved3[12];			/* 28 */
} SMCR_PACKED;
_Static_assert(sizeof(struct smcr_wire_clc_v2_ext) == 40, "v2 extension is 40 bytes");

/* v2 Accept and Confirm (SMC-R): the v1 fields, then these; on first
 * contact the first-contact extension and the GID list follow. */
struct smcr_wire_clc_accept_confirm_v2 {
	struct smcr_wire_clc_hdr hdr;		/*  0: typev2 0x2 = first contact */
	struct smcr_wire_peer_id peer_id;	/*  8 */
	uint8_t gid[16];			/* 16 */
	uint8_t mac[6];				/* 32 */
	uint8_t qpn[3];				/* 38 */
	smcr_be32 rmb_rkey;			/* 41 */
	uint8_t rmbe_idx;			/* 45 */
	smcr_be32 rmbe_alert_token;		/* 46 */
	uint8_t rmbe_size_mtu;			/* 50 */
	uint8_t reserved1;			/* 51 */
	smcr_be64 rmb_vaddr;			/* 52 */
	uint8_t reserved2;			/* 60 */
	uint8_t psn[3];				/* 61 */
	uint8_t eid[32];			/* 64: the EID both chose */
	uint8_t reserved3[8];			/* 96 */
} SMCR_PACKED;
_Static_assert(sizeof(struct smcr_wire_clc_accept_confirm_v2) == 104, "v2 Accept/Confirm body is 104 bytes");

struct smcr_wire_clc_fce {
	uint8_t direct;				/*  0: 0x80 = no gateway between the peers */
	uint8_t os_release;			/*  1: OS type (high nibble), release (low) */
	uint8_t reserved[2];			/*  2 */
	uint8_t hostname[32];			/*  4: blank-padded */
} SMCR_PACKED;
_Static_assert(sizeof(struct smcr_wire_clc_fce) == 36, "first-contact extension is 36 bytes");

/* After the first-contact extension, in an Accept and a Confirm alike:
 * its SMC-Rv2.1 part (Linux struct smc_clc_first_contact_ext_v2x after
 * its v2.0 base; all zero at release 0, and Linux 6.1 reads none of it).
 * Offsets from the start of the first-contact extension. */
struct smcr_wire_clc_fce_v2x {
	uint8_t max_conns;			/* 36: the group's, echoed in the Confirm */
	uint8_t max_links;			/* 37: likewise */
	smcr_be16 feature_mask;			/* 38: the features both have */
	smcr_be32 vendor_exp_options;		/* 40: vendor options: zero */
	uint8_t reserved[8];			/* 44 */
} SMCR_PACKED;
_Static_assert(sizeof(struct smcr_wire_clc_fce) + sizeof(struct smcr_wire_clc_fce_v2x) == 52,
	       "first-contact extension v2.1 is 52 bytes");

/* Then a Confirm's GID list (count, then the GIDs); an Accept has none. */
struct smcr_wire_clc_gid_list {
	uint8_t gid_count;			/*  0 */
	uint8_t reserved[3];			/*  1 */
} SMCR_PACKED;
_Static_assert(sizeof(struct smcr_wire_clc_gid_list) == 4, "GID list head is 4 bytes");

struct smcr_wire_clc_decline_v2 {
	struct smcr_wire_clc_hdr hdr;		/*  0 */
	struct smcr_wire_peer_id peer_id;	/*  8 */
	smcr_be32 diagnosis;			/* 16 */
	uint8_t os_type;			/* 20: high nibble */
	uint8_t reserved[3];			/* 21 */
	smcr_be32 diagnosis_v2[4];		/* 24: more diagnosis codes */
	struct smcr_wire_clc_trailer trailer;	/* 40 */
} SMCR_PACKED;
_Static_assert(sizeof(struct smcr_wire_clc_decline_v2) == 44, "v2 Decline is 44 bytes");

/* ---- A.3 LLC messages (RoCE SendMsg, always 44 bytes) ----------------- */

struct smcr_wire_llc_hdr {
	uint8_t type;		/* 0 */
	uint8_t length;		/* 1: 44 */
	uint8_t reserved;	/* 2: ADD LINK: reason code in the low nibble */
	uint8_t flags;		/* 3: 0x80 reply; the rest per message */
} SMCR_PACKED;
_Static_assert(sizeof(struct smcr_wire_llc_hdr) == 4, "LLC header is 4 bytes");

/* SMC-Rv2 ADD LINK extension (Linux struct smc_llc_msg_add_link_v2_ext),
 * at byte 44 of the message; num_rkeys in host order (little-endian) as
 * Linux 6.1 writes it; then num_rkeys RToken pairs (A.3.3 Figure 34). */
struct smcr_wire_llc_add_link_v2_ext {
	uint8_t flags;			/*  0: 0x80 v2_direct */
	uint8_t reserved;		/*  1 */
	uint8_t target_gid[16];		/*  2: the sender's new link's GID */
	uint8_t reserved2[8];		/* 18 */
	uint8_t num_rkeys[2];		/* 26: little-endian */
} SMCR_PACKED;
_Static_assert(sizeof(struct smcr_wire_llc_add_link_v2_ext) == 28, "ADD LINK v2 ext is 28 bytes");
#define SMCR_LLC_V2_DIRECT 0x80

/* SMC-Rv2 REQ ADD LINK (Linux struct smc_llc_msg_req_add_link_v2): the
 * client's GIDs for more links; the message is 28 + 16 * gid_count bytes,
 * of which the 44-byte receive slot holds the first GID. */
struct smcr_wire_llc_req_add_link {
	struct smcr_wire_llc_hdr hdr;	/*  0: v2 header, flags 0x80 R */
	uint8_t reserved[20];		/*  4 */
	uint8_t gid_count;		/* 24 */
	uint8_t reserved2[3];		/* 25 */
	uint8_t gid[16];		/* 28: the first GID */
} SMCR_PACKED;
_Static_assert(sizeof(struct smcr_wire_llc_req_add_link) == 44, "REQ ADD LINK head is 44 bytes");

/* A.3.1 CONFIRM LINK */
struct smcr_wire_llc_confirm_link {
	struct smcr_wire_llc_hdr hdr;	/*  0: flags 0x80 R; Linux sets 0x03 (no RMBE eyecatcher) */
	uint8_t mac[6];			/*  4: sender's RoCE MAC */
	uint8_t gid[16];		/* 10: sender's RoCE GID */
	uint8_t qpn[3];			/* 26: sender's QP number */
	uint8_t link_num;		/* 29 */
	smcr_be32 link_uid;		/* 30: sender's link user ID */
	uint8_t max_links;		/* 34 */
	uint8_t max_conns;		/* 35: SMC-Rv2.1 groups (Linux 6.6+); else 0 */
	uint8_t reserved[6];		/* 36 */
	smcr_be16 impl;			/* 42: reserved; SMCR_LLC_CONFIRM_LIBSMCR from libsmcr */
} SMCR_PACKED;
_Static_assert(sizeof(struct smcr_wire_llc_confirm_link) == 44, "A.3.1 is 44 bytes");

/* Not in the RFC: libsmcr puts this in the last two reserved bytes of its
 * CONFIRM LINK (the RFC and Linux leave them zero), so that its peer knows
 * it needs none of the ways round Linux's behaviour (delete_hold_ms). */
#define SMCR_LLC_CONFIRM_LIBSMCR 0x6c73u	/* "ls" */

/* A.3.2 ADD LINK
 *
 * INTEROP: Figure 32 of the RFC draws the GID directly after the MAC
 * (GID at 10, QP 26, link 29, MTU 30, PSN 31).  Every deployed implementation
 * puts two reserved bytes after the MAC instead: Linux (net/smc/smc_llc.c,
 * struct smc_llc_msg_add_link, "reserved2[2]") and Wireshark's SMC dissector
 * (written from the z/OS side in 2014, before Linux had ADD LINK) both read
 * GID at 12, QP 28, link 31, MTU 32, PSN 33.  Both still total 44 bytes; the
 * figure appears to have been copied from CONFIRM LINK.  We follow the
 * deployed layout so that ADD LINK interoperates with Linux and decodes in
 * Wireshark. */
struct smcr_wire_llc_add_link {
	struct smcr_wire_llc_hdr hdr;	/*  0: reserved = reason code (low nibble);
					 *     flags 0x80 R, 0x40 Z (rejected) */
	uint8_t mac[6];			/*  4: sender's RoCE MAC */
	uint8_t reserved1[2];		/* 10: see INTEROP above */
	uint8_t gid[16];		/* 12: sender's RoCE GID */
	uint8_t qpn[3];			/* 28: sender's QP number */
	uint8_t link_num;		/* 31 */
	uint8_t mtu;			/* 32: reserved (high nibble), MTU (low nibble) */
	uint8_t psn[3];			/* 33: initial PSN */
	uint8_t reserved2[8];		/* 36 */
} SMCR_PACKED;
_Static_assert(sizeof(struct smcr_wire_llc_add_link) == 44, "A.3.2 is 44 bytes");

/* A.3.3 Figure 34: RKey/RToken pair */
struct smcr_wire_llc_rtoken_pair {
	smcr_be32 ref_rkey;		/* +0: RMB's rkey on the link carrying this message */
	smcr_be32 new_rkey;		/* +4: its rkey on the new link */
	smcr_be64 new_vaddr;		/* +8: its virtual address on the new link */
} SMCR_PACKED;
_Static_assert(sizeof(struct smcr_wire_llc_rtoken_pair) == 16, "RToken pair is 16 bytes");

/* A.3.3 ADD LINK CONTINUATION */
struct smcr_wire_llc_add_link_cont {
	struct smcr_wire_llc_hdr hdr;			/*  0: flags 0x80 R */
	uint8_t link_num;				/*  4 */
	uint8_t num_rtokens;				/*  5: remaining, these included */
	uint8_t reserved1[2];				/*  6 */
	struct smcr_wire_llc_rtoken_pair pair[2];	/*  8, 24: pairs or zeros */
	uint8_t reserved2[4];				/* 40 */
} SMCR_PACKED;
_Static_assert(sizeof(struct smcr_wire_llc_add_link_cont) == 44, "A.3.3 is 44 bytes");

/* A.3.4 DELETE LINK */
struct smcr_wire_llc_delete_link {
	struct smcr_wire_llc_hdr hdr;	/*  0: flags 0x80 R, 0x40 A (all), 0x20 O (orderly) */
	uint8_t link_num;		/*  4 */
	smcr_be32 reason;		/*  5 */
	uint8_t reserved[35];		/*  9 */
} SMCR_PACKED;
_Static_assert(sizeof(struct smcr_wire_llc_delete_link) == 44, "A.3.4 is 44 bytes");

/* A.3.5 Figure 37: link number / RMB specification */
struct smcr_wire_llc_rkey_spec {
	uint8_t link_num;		/* +0 */
	smcr_be32 rkey;			/* +1 */
	smcr_be64 vaddr;		/* +5 */
} SMCR_PACKED;
_Static_assert(sizeof(struct smcr_wire_llc_rkey_spec) == 13, "RMB specification is 13 bytes");

/* A.3.5 CONFIRM RKEY */
struct smcr_wire_llc_confirm_rkey {
	struct smcr_wire_llc_hdr hdr;			/*  0: flags 0x80 R, 0x40 reserved,
							 *     0x20 Z (negative), 0x10 C (retry) */
	uint8_t num_tokens;				/*  4: other links' RTokens to come */
	smcr_be32 rkey;					/*  5: new RMB's rkey on this link */
	smcr_be64 vaddr;				/*  9: and its virtual address */
	struct smcr_wire_llc_rkey_spec other[2];	/* 17, 30: other links or zeros */
	uint8_t reserved;				/* 43 */
} SMCR_PACKED;
_Static_assert(sizeof(struct smcr_wire_llc_confirm_rkey) == 44, "A.3.5 is 44 bytes");

/* A.3.6 CONFIRM RKEY CONTINUATION: three specifications fill the message
 * (the text says "up to three"; Figure 38's trailing "Reserved" byte does not
 * fit and is a drawing artefact; Linux agrees on three). */
struct smcr_wire_llc_confirm_rkey_cont {
	struct smcr_wire_llc_hdr hdr;			/*  0: flags 0x80 R, 0x20 Z */
	uint8_t num_left;				/*  4: remaining, these included */
	struct smcr_wire_llc_rkey_spec spec[3];		/*  5, 18, 31 */
} SMCR_PACKED;
_Static_assert(sizeof(struct smcr_wire_llc_confirm_rkey_cont) == 44, "A.3.6 is 44 bytes");

/* A.3.7 DELETE RKEY */
struct smcr_wire_llc_delete_rkey {
	struct smcr_wire_llc_hdr hdr;	/*  0: flags 0x80 R, 0x20 Z */
	uint8_t count;			/*  4: 1..8 */
	uint8_t err_mask;		/*  5: 0x80 = first rkey failed, ... */
	uint8_t reserved1[2];		/*  6 */
	smcr_be32 rkey[8];		/*  8: deleted rkeys or zeros */
	uint8_t reserved2[4];		/* 40 */
} SMCR_PACKED;
_Static_assert(sizeof(struct smcr_wire_llc_delete_rkey) == 44, "A.3.7 is 44 bytes");

/* A.3.8 TEST LINK */
struct smcr_wire_llc_test_link {
	struct smcr_wire_llc_hdr hdr;	/*  0: flags 0x80 R */
	uint8_t user_data[16];		/*  4: echoed by the reply */
	uint8_t reserved[24];		/* 20 */
} SMCR_PACKED;
_Static_assert(sizeof(struct smcr_wire_llc_test_link) == 44, "A.3.8 is 44 bytes");

/* ---- A.4 CDC message --------------------------------------------------- */

struct smcr_wire_cdc_cursor {
	smcr_be16 reserved;		/* +0 */
	smcr_be16 wrap;			/* +2: wrap sequence number */
	smcr_be32 count;		/* +4: offset into the RMBE data area */
} SMCR_PACKED;
_Static_assert(sizeof(struct smcr_wire_cdc_cursor) == 8, "CDC cursor is 8 bytes");

struct smcr_wire_cdc {
	uint8_t type;				/*  0: 0xFE */
	uint8_t length;				/*  1: 44 */
	smcr_be16 seqno;			/*  2 */
	smcr_be32 token;			/*  4: alert token */
	struct smcr_wire_cdc_cursor prod;	/*  8: producer cursor */
	struct smcr_wire_cdc_cursor cons;	/* 16: consumer cursor */
	uint8_t prod_flags;			/* 24: B P U R F, 0x07 reserved */
	uint8_t conn_state;			/* 25: D C A, 0x1F reserved */
	uint8_t reserved[18];			/* 26 */
} SMCR_PACKED;
_Static_assert(sizeof(struct smcr_wire_cdc) == 44, "A.4 CDC is 44 bytes");

#endif
