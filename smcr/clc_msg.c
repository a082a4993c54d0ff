/* SPDX-License-Identifier: BSD-3-Clause */
/* smcrbd: TCP option (RFC 7609 A.1) and CLC message (A.2) codecs. */
#include <config.h>

#include <stddef.h>
#include <string.h>

#include "byteorder.h"
#include "msg.h"
#include "wire.h"

static const uint8_t eyecatcher[4] = {
	SMCR_EYECATCHER_0, SMCR_EYECATCHER_1, SMCR_EYECATCHER_2, SMCR_EYECATCHER_3,
};

const char *smcr_msg_strerror(int err)
{
	switch (err) {
	case SMCR_E_TRUNC: return "message truncated";
	case SMCR_E_EYECATCHER: return "bad eyecatcher";
	case SMCR_E_TRAILER: return "bad trailing eyecatcher";
	case SMCR_E_LENGTH: return "bad message length";
	case SMCR_E_TYPE: return "unknown message type";
	case SMCR_E_OPTIONAL: return "unsupported optional message type";
	case SMCR_E_NOTTYPE: return "unexpected message type";
	case SMCR_E_VERSION: return "unsupported SMC version";
	case SMCR_E_RANGE: return "field out of range";
	case SMCR_E_PREFIXES: return "IPv6 prefixes do not fit";
	case SMCR_E_NOSPC: return "buffer too small";
	case SMCR_E_INVAL: return "value does not fit its field";
	default: return "unknown error";
	}
}

/* ---- A.1 TCP option ------------------------------------------------------ */

int smcr_tcpopt_encode(void *buf, size_t len)
{
	struct smcr_wire_tcpopt w = {
		.kind = SMCR_TCPOPT_KIND,
		.len = SMCR_TCPOPT_LEN,
		.exid = htobe32(SMCR_EYECATCHER_BE32),
	};

	if (len < sizeof(w))
		return SMCR_E_NOSPC;
	memcpy(buf, &w, sizeof(w));
	return sizeof(w);
}

int smcr_tcpopt_find(const void *opts, size_t len)
{
	const uint8_t *p = opts;
	size_t i = 0;
	int found = 0;

	while (i < len) {
		uint8_t kind = p[i], olen;

		if (kind == 0)			/* end of option list */
			break;
		if (kind == 1) {		/* no-operation */
			i++;
			continue;
		}
		if (len - i < 2)
			return SMCR_E_TRUNC;
		olen = p[i + 1];
		if (olen < 2)
			return SMCR_E_LENGTH;
		if (olen > len - i)
			return SMCR_E_TRUNC;
		/* RFC 6994: kind 254 carries a 16- or 32-bit ExID; ours is the
		 * 32-bit E2D4C3D9.  Other users of kind 254 are not ours. */
		if (kind == SMCR_TCPOPT_KIND && olen >= 6 &&
		    memcmp(p + i + 2, eyecatcher, 4) == 0) {
			if (olen != SMCR_TCPOPT_LEN)
				return SMCR_E_LENGTH;
			found = 1;
		}
		i += olen;
	}
	return found;
}

int smcr_tcpopt_find_in_tcphdr(const void *tcphdr, size_t len)
{
	const uint8_t *p = tcphdr;
	size_t hlen;

	if (len < 20)
		return SMCR_E_TRUNC;
	hlen = (size_t)(p[12] >> 4) * 4;	/* data offset, in 32-bit words */
	if (hlen < 20)
		return SMCR_E_LENGTH;
	if (hlen > len)
		return SMCR_E_TRUNC;
	return smcr_tcpopt_find(p + 20, hlen - 20);
}

/* ---- A.2 CLC ------------------------------------------------------------- */

const char *smcr_decline_str(uint32_t diag)
{
	switch (diag) {
	case SMCR_DECL_MEM: return "insufficient memory resources";
	case SMCR_DECL_TIMEOUT_CL: return "timeout waiting for CONFIRM LINK";
	case SMCR_DECL_TIMEOUT_AL: return "timeout waiting for ADD LINK";
	case SMCR_DECL_CNFERR: return "configuration error";
	case SMCR_DECL_PEERNOSMC: return "peer did not indicate SMC";
	case SMCR_DECL_IPSEC: return "IPsec in use";
	case SMCR_DECL_NOSMCDEV: return "no SMC device found";
	case SMCR_DECL_NOSMCRDEV: return "no SMC-R device found";
	case SMCR_DECL_NOUEID: return "no user EID in common (SMC-Rv2)";
	case SMCR_DECL_RELEASEERR: return "SMC-Rv2 release negotiation failed";
	case SMCR_DECL_MAXCONNERR: return "max connections negotiation failed (SMC-Rv2.1)";
	case SMCR_DECL_MAXLINKERR: return "max links negotiation failed (SMC-Rv2.1)";
	case SMCR_DECL_MODEUNSUPP: return "SMC modes do not match";
	case SMCR_DECL_RMBE_EC: return "peer uses RMBE eyecatchers";
	case SMCR_DECL_OPTUNSUPP: return "socket option not supported";
	case SMCR_DECL_DIFFPREFIX: return "IP prefix or subnet mismatch";
	case SMCR_DECL_GETVLANERR: return "cannot get VLAN";
	case SMCR_DECL_NOACTLINK: return "no active link in link group";
	case SMCR_DECL_NOSRVLINK: return "server's link not found";
	case SMCR_DECL_VERSMISMAT: return "SMC version mismatch";
	case SMCR_DECL_SYNCERR: return "synchronisation error";
	case SMCR_DECL_PEERDECL: return "peer declined";
	case SMCR_DECL_INTERR: return "internal error";
	case SMCR_DECL_ERR_RTOK: return "rtoken handling failed";
	case SMCR_DECL_ERR_RDYLNK: return "link setup failed";
	case SMCR_DECL_ERR_REGBUF: return "buffer registration failed";
	default: return "unknown";
	}
}

static void peer_id_to_wire(struct smcr_wire_peer_id *w, const struct smcr_peer_id *h)
{
	w->instance = htobe16(h->instance);
	memcpy(w->mac, h->mac, sizeof(w->mac));
}

static void peer_id_from_wire(struct smcr_peer_id *h, const struct smcr_wire_peer_id *w)
{
	h->instance = be16toh(w->instance);
	memcpy(h->mac, w->mac, sizeof(h->mac));
}

static void hdr_to_wire(struct smcr_wire_clc_hdr *w, uint8_t type, size_t length,
			uint8_t flags)
{
	memcpy(w->eyecatcher, eyecatcher, sizeof(eyecatcher));
	w->type = type;
	w->length = htobe16((uint16_t)length);
	w->version_flags = (uint8_t)(SMCR_CLC_VERSION << 4 | (flags & 0x0F));
}

static size_t min_len(uint8_t type)
{
	switch (type) {
	case SMCR_CLC_PROPOSAL: return SMCR_CLC_PROPOSAL_MIN_LEN;
	case SMCR_CLC_ACCEPT: return SMCR_CLC_ACCEPT_LEN;
	case SMCR_CLC_CONFIRM: return SMCR_CLC_CONFIRM_LEN;
	case SMCR_CLC_DECLINE: return SMCR_CLC_DECLINE_LEN;
	default: return 0;
	}
}

int smcr_clc_hdr_decode(const void *buf, size_t len, struct smcr_clc_hdr *hdr)
{
	struct smcr_wire_clc_hdr w;

	if (len < sizeof(w))
		return SMCR_E_TRUNC;
	memcpy(&w, buf, sizeof(w));
	if (memcmp(w.eyecatcher, eyecatcher, sizeof(eyecatcher)) != 0)
		return SMCR_E_EYECATCHER;
	hdr->type = w.type;
	hdr->length = be16toh(w.length);
	hdr->version = w.version_flags >> 4;
	hdr->flags = w.version_flags & 0x0F;
	if (hdr->version != SMCR_CLC_VERSION)
		/* A v2 (or later) peer: the caller reads hdr->length bytes
		 * and declines.  Its messages have other layouts, so nothing
		 * but the header is checked. */
		return hdr->length >= sizeof(w) ? SMCR_E_VERSION : SMCR_E_LENGTH;
	if (min_len(hdr->type) == 0)
		return SMCR_E_TYPE;
	if (hdr->length < min_len(hdr->type))
		return SMCR_E_LENGTH;
	return hdr->length;
}

static bool trailer_ok(const uint8_t *msg, size_t length)
{
	return memcmp(msg + length - SMCR_CLC_TRAILER_LEN, eyecatcher,
		      SMCR_CLC_TRAILER_LEN) == 0;
}

/* trailing_ok: a v2 Proposal's v2 extension follows the prefixes. */
static int proposal_decode(const uint8_t *p, size_t length, struct smcr_clc_proposal *m,
			   bool trailing_ok)
{
	struct smcr_wire_clc_proposal_head head;
	struct smcr_wire_clc_ip_area ip;
	size_t off, room;
	unsigned int i;

	memcpy(&head, p, sizeof(head));
	peer_id_from_wire(&m->peer_id, &head.peer_id);
	memcpy(m->gid, head.gid, sizeof(m->gid));
	memcpy(m->mac, head.mac, sizeof(m->mac));
	m->ip_area_offset = be16toh(head.ip_area_offset);

	/* head, growth area, IP area, prefixes, trailer */
	off = sizeof(head) + m->ip_area_offset;
	if (off + sizeof(ip) + SMCR_CLC_TRAILER_LEN > length)
		return SMCR_E_LENGTH;
	memcpy(&ip, p + off, sizeof(ip));
	off += sizeof(ip);
	m->ipv4_subnet = be32toh(ip.ipv4_subnet);
	m->ipv4_mask_len = ip.ipv4_mask_len;
	m->ipv6_prefix_count = ip.ipv6_prefix_count;
	if (m->ipv4_mask_len > 32)
		return SMCR_E_RANGE;
	if (m->ipv6_prefix_count > SMCR_CLC_MAX_IPV6_PREFIXES)
		return SMCR_E_RANGE;

	room = length - SMCR_CLC_TRAILER_LEN - off;
	if ((size_t)m->ipv6_prefix_count * sizeof(struct smcr_wire_ipv6_prefix) > room)
		return SMCR_E_PREFIXES;
	if ((size_t)m->ipv6_prefix_count * sizeof(struct smcr_wire_ipv6_prefix) < room &&
	    !trailing_ok)
		return SMCR_E_LENGTH;	/* bytes left over before the trailer */
	for (i = 0; i < m->ipv6_prefix_count; i++) {
		struct smcr_wire_ipv6_prefix w;

		memcpy(&w, p + off, sizeof(w));
		off += sizeof(w);
		memcpy(m->ipv6_prefix[i].prefix, w.prefix, sizeof(w.prefix));
		m->ipv6_prefix[i].len = w.prefix_len;
		if (w.prefix_len > 128)
			return SMCR_E_RANGE;
	}
	return 0;
}

static int acc_conf_decode(const uint8_t *p, uint8_t type, struct smcr_clc_accept_confirm *m)
{
	struct smcr_wire_clc_accept_confirm w;

	memcpy(&w, p, sizeof(w));
	m->first_contact = type == SMCR_CLC_ACCEPT &&
		(w.hdr.version_flags & SMCR_CLC_FLAG_FIRST_CONTACT);
	peer_id_from_wire(&m->peer_id, &w.peer_id);
	memcpy(m->gid, w.gid, sizeof(m->gid));
	memcpy(m->mac, w.mac, sizeof(m->mac));
	m->qpn = smcr_get_be24(w.qpn);
	m->rmb_rkey = be32toh(w.rmb_rkey);
	m->rmbe_idx = w.rmbe_idx;
	m->rmbe_alert_token = be32toh(w.rmbe_alert_token);
	m->rmbe_size = w.rmbe_size_mtu >> 4;
	m->qp_mtu = w.rmbe_size_mtu & 0x0F;
	m->rmb_vaddr = be64toh(w.rmb_vaddr);
	m->psn = smcr_get_be24(w.psn);
	/* A.2.3: the MTU "should only be validated in the first contact
	 * exchange". */
	if (m->first_contact && !smcr_mtu_valid(m->qp_mtu))
		return SMCR_E_RANGE;
	return 0;
}

static int decline_decode(const uint8_t *p, struct smcr_clc_decline *m)
{
	struct smcr_wire_clc_decline w;

	memcpy(&w, p, sizeof(w));
	m->out_of_sync = w.hdr.version_flags & SMCR_CLC_FLAG_OUT_OF_SYNC;
	peer_id_from_wire(&m->peer_id, &w.peer_id);
	m->diagnosis = be32toh(w.diagnosis);
	return 0;
}

int smcr_clc_decode(const void *buf, size_t len, struct smcr_clc_msg *msg)
{
	const uint8_t *p = buf;
	int rc;

	memset(msg, 0, sizeof(*msg));
	rc = smcr_clc_hdr_decode(buf, len, &msg->hdr);
	if (rc < 0)
		return rc;
	if (len < msg->hdr.length)
		return SMCR_E_TRUNC;
	switch (msg->hdr.type) {
	case SMCR_CLC_PROPOSAL:
		if (!trailer_ok(p, msg->hdr.length))
			return SMCR_E_TRAILER;
		rc = proposal_decode(p, msg->hdr.length, &msg->proposal, false);
		break;
	case SMCR_CLC_ACCEPT:
	case SMCR_CLC_CONFIRM:
		if (msg->hdr.length != SMCR_CLC_ACCEPT_LEN)
			return SMCR_E_LENGTH;
		if (!trailer_ok(p, msg->hdr.length))
			return SMCR_E_TRAILER;
		rc = acc_conf_decode(p, msg->hdr.type, &msg->accept);
		break;
	case SMCR_CLC_DECLINE:
		if (msg->hdr.length != SMCR_CLC_DECLINE_LEN)
			return SMCR_E_LENGTH;
		if (!trailer_ok(p, msg->hdr.length))
			return SMCR_E_TRAILER;
		rc = decline_decode(p, &msg->decline);
		break;
	default:
		return SMCR_E_TYPE;	/* not reached: hdr_decode checked */
	}
	return rc < 0 ? rc : msg->hdr.length;
}

int smcr_clc_decode_type(const void *buf, size_t len, enum smcr_clc_type type,
			 struct smcr_clc_msg *msg)
{
	int rc = smcr_clc_decode(buf, len, msg);

	if (rc >= 0 && msg->hdr.type != type)
		return SMCR_E_NOTTYPE;
	return rc;
}

static int proposal_len(const struct smcr_clc_proposal *m)
{
	if (m->ipv6_prefix_count > SMCR_CLC_MAX_IPV6_PREFIXES || m->ipv4_mask_len > 32)
		return SMCR_E_INVAL;
	for (unsigned int i = 0; i < m->ipv6_prefix_count; i++)
		if (m->ipv6_prefix[i].len > 128)
			return SMCR_E_INVAL;
	size_t n = sizeof(struct smcr_wire_clc_proposal) + m->ip_area_offset +
		(size_t)m->ipv6_prefix_count * sizeof(struct smcr_wire_ipv6_prefix);
	if (n > UINT16_MAX)
		return SMCR_E_INVAL;
	return (int)n;
}

static int acc_conf_check(const struct smcr_clc_accept_confirm *m)
{
	if (m->qpn > SMCR_U24_MAX || m->psn > SMCR_U24_MAX ||
	    m->rmbe_size > 0x0F || m->qp_mtu > 0x0F)
		return SMCR_E_INVAL;
	return 0;
}

int smcr_clc_encoded_len(const struct smcr_clc_msg *msg)
{
	int rc;

	switch (msg->hdr.type) {
	case SMCR_CLC_PROPOSAL:
		return proposal_len(&msg->proposal);
	case SMCR_CLC_ACCEPT:
	case SMCR_CLC_CONFIRM:
		rc = acc_conf_check(&msg->accept);
		return rc < 0 ? rc : SMCR_CLC_ACCEPT_LEN;
	case SMCR_CLC_DECLINE:
		return SMCR_CLC_DECLINE_LEN;
	default:
		return SMCR_E_TYPE;
	}
}

static void proposal_encode(const struct smcr_clc_proposal *m, uint8_t *p, size_t length)
{
	struct smcr_wire_clc_proposal_head head;
	struct smcr_wire_clc_ip_area ip;
	size_t off;

	memset(&head, 0, sizeof(head));
	hdr_to_wire(&head.hdr, SMCR_CLC_PROPOSAL, length, 0);
	peer_id_to_wire(&head.peer_id, &m->peer_id);
	memcpy(head.gid, m->gid, sizeof(head.gid));
	memcpy(head.mac, m->mac, sizeof(head.mac));
	head.ip_area_offset = htobe16(m->ip_area_offset);
	memcpy(p, &head, sizeof(head));
	off = sizeof(head);

	memset(p + off, 0, m->ip_area_offset);	/* growth area */
	off += m->ip_area_offset;

	memset(&ip, 0, sizeof(ip));
	ip.ipv4_subnet = htobe32(m->ipv4_subnet);
	ip.ipv4_mask_len = m->ipv4_mask_len;
	ip.ipv6_prefix_count = m->ipv6_prefix_count;
	memcpy(p + off, &ip, sizeof(ip));
	off += sizeof(ip);

	for (unsigned int i = 0; i < m->ipv6_prefix_count; i++) {
		struct smcr_wire_ipv6_prefix w;

		memcpy(w.prefix, m->ipv6_prefix[i].prefix, sizeof(w.prefix));
		w.prefix_len = m->ipv6_prefix[i].len;
		memcpy(p + off, &w, sizeof(w));
		off += sizeof(w);
	}
	memcpy(p + off, eyecatcher, sizeof(eyecatcher));
}

static void acc_conf_encode(const struct smcr_clc_accept_confirm *m, uint8_t type, uint8_t *p)
{
	struct smcr_wire_clc_accept_confirm w;

	memset(&w, 0, sizeof(w));
	hdr_to_wire(&w.hdr, type, sizeof(w),
		    type == SMCR_CLC_ACCEPT && m->first_contact ? SMCR_CLC_FLAG_FIRST_CONTACT : 0);
	peer_id_to_wire(&w.peer_id, &m->peer_id);
	memcpy(w.gid, m->gid, sizeof(w.gid));
	memcpy(w.mac, m->mac, sizeof(w.mac));
	smcr_put_be24(w.qpn, m->qpn);
	w.rmb_rkey = htobe32(m->rmb_rkey);
	w.rmbe_idx = m->rmbe_idx;
	w.rmbe_alert_token = htobe32(m->rmbe_alert_token);
	w.rmbe_size_mtu = (uint8_t)(m->rmbe_size << 4 | m->qp_mtu);
	w.rmb_vaddr = htobe64(m->rmb_vaddr);
	smcr_put_be24(w.psn, m->psn);
	memcpy(w.trailer.eyecatcher, eyecatcher, sizeof(eyecatcher));
	memcpy(p, &w, sizeof(w));
}

static void decline_encode(const struct smcr_clc_decline *m, uint8_t *p)
{
	struct smcr_wire_clc_decline w;

	memset(&w, 0, sizeof(w));
	hdr_to_wire(&w.hdr, SMCR_CLC_DECLINE, sizeof(w),
		    m->out_of_sync ? SMCR_CLC_FLAG_OUT_OF_SYNC : 0);
	peer_id_to_wire(&w.peer_id, &m->peer_id);
	w.diagnosis = htobe32(m->diagnosis);
	memcpy(w.trailer.eyecatcher, eyecatcher, sizeof(eyecatcher));
	memcpy(p, &w, sizeof(w));
}

int smcr_clc_encode(const struct smcr_clc_msg *msg, void *buf, size_t len)
{
	int n = smcr_clc_encoded_len(msg);

	if (n < 0)
		return n;
	if (len < (size_t)n)
		return SMCR_E_NOSPC;
	switch (msg->hdr.type) {
	case SMCR_CLC_PROPOSAL:
		proposal_encode(&msg->proposal, buf, (size_t)n);
		break;
	case SMCR_CLC_ACCEPT:
		acc_conf_encode(&msg->accept, SMCR_CLC_ACCEPT, buf);
		break;
	case SMCR_CLC_CONFIRM:
		acc_conf_encode(&msg->confirm, SMCR_CLC_CONFIRM, buf);
		break;
	case SMCR_CLC_DECLINE:
		decline_encode(&msg->decline, buf);
		break;
	}
	return n;
}

int smcr_clc_proposal_v2_decode(const void *buf, size_t len, struct smcr_clc_proposal *m)
{
	const uint8_t *p = buf;
	struct smcr_wire_clc_hdr w;
	unsigned int typev1;
	size_t length;

	memset(m, 0, sizeof(*m));
	if (len < sizeof(struct smcr_wire_clc_proposal_head))
		return SMCR_E_TRUNC;
	memcpy(&w, p, sizeof(w));
	if (memcmp(w.eyecatcher, eyecatcher, sizeof(eyecatcher)) != 0)
		return SMCR_E_EYECATCHER;
	if (w.type != SMCR_CLC_PROPOSAL)
		return SMCR_E_TYPE;
	if (w.version_flags >> 4 < 2)
		return SMCR_E_VERSION;
	typev1 = w.version_flags & SMCR_CLC_TYPE_MASK;
	if (typev1 != SMCR_CLC_TYPE_R && typev1 != SMCR_CLC_TYPE_B)
		return SMCR_E_VERSION;		/* no SMC-R v1 on offer */
	length = be16toh(w.length);
	if (length < SMCR_CLC_PROPOSAL_MIN_LEN)
		return SMCR_E_LENGTH;
	if (len < length)
		return SMCR_E_TRUNC;
	if (!trailer_ok(p, length))
		return SMCR_E_TRAILER;
	return proposal_decode(p, length, m, true);
}

/* ---- CLC v2 (SMC-Rv2 as Linux speaks it) ---------------------------------- */

static void hdr_v2_to_wire(struct smcr_wire_clc_hdr *w, uint8_t type, size_t length,
			   uint8_t typev2, uint8_t typev1)
{
	memcpy(w->eyecatcher, eyecatcher, sizeof(eyecatcher));
	w->type = type;
	w->length = htobe16((uint16_t)length);
	w->version_flags = (uint8_t)(SMCR_CLC_VERSION_2 << 4 | (typev2 & 3) << 2 | (typev1 & 3));
}

static int proposal_v2_decode(const uint8_t *p, size_t length, struct smcr_clc_v2_proposal *m)
{
	struct smcr_wire_clc_proposal_head head;
	struct smcr_wire_clc_smcd_area smcd;
	struct smcr_wire_clc_v2_ext ext;
	size_t end = length - SMCR_CLC_TRAILER_LEN, after_ip = sizeof(head) + sizeof(smcd);
	size_t ext_off;
	int rc;

	m->typev1 = p[7] & SMCR_CLC_TYPE_MASK;
	m->typev2 = p[7] >> 2 & SMCR_CLC_TYPE_MASK;
	if (length < sizeof(head) + sizeof(smcd) + SMCR_CLC_TRAILER_LEN)
		return SMCR_E_LENGTH;
	memcpy(&head, p, sizeof(head));
	if (m->typev1 != SMCR_CLC_TYPE_N) {
		/* Linux: the IP area starts at most after the SMC-D area. */
		if (be16toh(head.ip_area_offset) > sizeof(smcd))
			return SMCR_E_LENGTH;
		rc = proposal_decode(p, length, &m->v1, true);
		if (rc < 0)
			return rc;
		after_ip = sizeof(head) + m->v1.ip_area_offset + sizeof(struct smcr_wire_clc_ip_area) +
			(size_t)m->v1.ipv6_prefix_count * sizeof(struct smcr_wire_ipv6_prefix);
	} else {
		peer_id_from_wire(&m->v1.peer_id, &head.peer_id);
		memcpy(m->v1.gid, head.gid, sizeof(m->v1.gid));
		memcpy(m->v1.mac, head.mac, sizeof(m->v1.mac));
		m->v1.ip_area_offset = be16toh(head.ip_area_offset);
	}
	if (m->typev2 == SMCR_CLC_TYPE_N)
		return 0;
	memcpy(&smcd, p + sizeof(head), sizeof(smcd));
	ext_off = sizeof(head) + offsetof(struct smcr_wire_clc_smcd_area, reserved) +
		be16toh(smcd.v2_ext_offset);
	if (ext_off < after_ip || ext_off + sizeof(ext) > end)
		return SMCR_E_LENGTH;
	memcpy(&ext, p + ext_off, sizeof(ext));
	if (ext.eid_count > SMCR_CLC_MAX_EIDS)
		return SMCR_E_RANGE;
	if (ext_off + sizeof(ext) + (size_t)ext.eid_count * SMCR_EID_LEN > end)
		return SMCR_E_LENGTH;
	m->release = ext.release_seid >> 4;
	m->seid = ext.release_seid & 0x01;
	memcpy(m->roce_gid, ext.roce_gid, sizeof(m->roce_gid));
	m->max_conns = ext.max_conns;
	m->max_links = ext.max_links;
	m->feature_mask = be16toh(ext.feature_mask);
	m->eid_count = ext.eid_count;
	memcpy(m->eids, p + ext_off + sizeof(ext), (size_t)ext.eid_count * SMCR_EID_LEN);
	return 0;
}

static int acc_conf_v2_decode(const uint8_t *p, size_t length, uint8_t type,
			      struct smcr_clc_v2_accept_confirm *m)
{
	size_t end = length - SMCR_CLC_TRAILER_LEN, off;
	struct smcr_wire_clc_accept_confirm_v2 w;
	struct smcr_wire_clc_fce_v2x x;
	struct smcr_wire_clc_gid_list gl;
	struct smcr_wire_clc_fce fce;
	int rc;

	if ((p[7] & SMCR_CLC_TYPE_MASK) != SMCR_CLC_TYPE_R)
		return SMCR_E_RANGE;		/* SMC-D */
	if (length < SMCR_CLC_V2_ACC_CONF_LEN)
		return SMCR_E_LENGTH;
	/* The v1 fields sit where v1 has them, and F is the same bit
	 * (typev2's first-contact bit), now on a Confirm too. */
	rc = acc_conf_decode(p, SMCR_CLC_ACCEPT, &m->r);
	if (rc < 0)
		return rc;
	memcpy(&w, p, sizeof(w));
	memcpy(m->eid, w.eid, sizeof(m->eid));
	(void)type;
	if (!m->r.first_contact)
		return 0;
	off = sizeof(w);
	if (off + sizeof(fce) > end)
		return SMCR_E_LENGTH;
	memcpy(&fce, p + off, sizeof(fce));
	m->direct = fce.direct & 0x80;
	m->os_type = fce.os_release >> 4;
	m->release = fce.os_release & 0x0F;
	memcpy(m->hostname, fce.hostname, sizeof(m->hostname));
	off += sizeof(fce);
	/* The v2.1 part: 16 bytes that Linux always sends (zero at
	 * release 0); a message that ends before them has none. */
	if (off + sizeof(x) > end)
		return 0;
	memcpy(&x, p + off, sizeof(x));
	m->max_conns = x.max_conns;
	m->max_links = x.max_links;
	m->feature_mask = be16toh(x.feature_mask);
	m->vendor_options = be32toh(x.vendor_exp_options);
	off += sizeof(x);
	if (type != SMCR_CLC_CONFIRM || off + sizeof(gl) > end)
		return 0;			/* an Accept has no list */
	memcpy(&gl, p + off, sizeof(gl));
	off += sizeof(gl);
	if (gl.gid_count > SMCR_CLC_MAX_GIDS)
		return SMCR_E_RANGE;
	if (off + (size_t)gl.gid_count * SMCR_GID_LEN > end)
		return SMCR_E_LENGTH;
	m->gid_count = gl.gid_count;
	memcpy(m->gids, p + off, (size_t)gl.gid_count * SMCR_GID_LEN);
	return 0;
}

int smcr_clc_v2_decode(const void *buf, size_t len, struct smcr_clc_v2_msg *msg)
{
	struct smcr_wire_clc_decline_v2 d;
	const uint8_t *p = buf;
	unsigned int i;
	int rc;

	memset(msg, 0, sizeof(*msg));
	rc = smcr_clc_hdr_decode(buf, len, &msg->hdr);
	if (rc != SMCR_E_VERSION)
		return rc < 0 ? rc : SMCR_E_VERSION;	/* v1: smcr_clc_decode() */
	if (msg->hdr.version < SMCR_CLC_VERSION_2)
		return SMCR_E_VERSION;		/* 0: nobody's */
	if (len < msg->hdr.length)
		return SMCR_E_TRUNC;
	if (msg->hdr.length < SMCR_CLC_HDR_LEN + SMCR_CLC_TRAILER_LEN)
		return SMCR_E_LENGTH;
	if (!trailer_ok(p, msg->hdr.length))
		return SMCR_E_TRAILER;
	switch (msg->hdr.type) {
	case SMCR_CLC_PROPOSAL:
		rc = proposal_v2_decode(p, msg->hdr.length, &msg->proposal);
		break;
	case SMCR_CLC_ACCEPT:
	case SMCR_CLC_CONFIRM:
		rc = acc_conf_v2_decode(p, msg->hdr.length, msg->hdr.type, &msg->accept);
		break;
	case SMCR_CLC_DECLINE:
		if (msg->hdr.length != SMCR_CLC_V2_DECLINE_LEN)
			return SMCR_E_LENGTH;
		rc = decline_decode(p, &msg->decline.d);
		memcpy(&d, p, sizeof(d));
		msg->decline.os_type = d.os_type >> 4;
		for (i = 0; i < 4; i++)
			msg->decline.diagnosis_v2[i] = be32toh(d.diagnosis_v2[i]);
		break;
	default:
		return SMCR_E_TYPE;
	}
	return rc < 0 ? rc : msg->hdr.length;
}

static bool r_or_n(uint8_t t)
{
	return t == SMCR_CLC_TYPE_R || t == SMCR_CLC_TYPE_N;
}

int smcr_clc_v2_encoded_len(const struct smcr_clc_v2_msg *msg)
{
	const struct smcr_clc_v2_proposal *pr = &msg->proposal;
	const struct smcr_clc_v2_accept_confirm *ac = &msg->accept;
	size_t n;
	int rc;

	switch (msg->hdr.type) {
	case SMCR_CLC_PROPOSAL:
		if (!r_or_n(pr->typev1) || !r_or_n(pr->typev2) ||
		    (pr->typev1 == SMCR_CLC_TYPE_N && pr->typev2 == SMCR_CLC_TYPE_N) ||
		    pr->eid_count > SMCR_CLC_MAX_EIDS || pr->release > 0x0F)
			return SMCR_E_INVAL;
		n = sizeof(struct smcr_wire_clc_proposal_head) +
			sizeof(struct smcr_wire_clc_smcd_area) + SMCR_CLC_TRAILER_LEN;
		if (pr->typev1 != SMCR_CLC_TYPE_N) {
			struct smcr_clc_proposal v1 = pr->v1;

			v1.ip_area_offset = 0;
			rc = proposal_len(&v1);
			if (rc < 0)
				return rc;
			n += (size_t)rc - sizeof(struct smcr_wire_clc_proposal_head) -
				SMCR_CLC_TRAILER_LEN;
		}
		if (pr->typev2 != SMCR_CLC_TYPE_N)
			n += sizeof(struct smcr_wire_clc_v2_ext) + (size_t)pr->eid_count * SMCR_EID_LEN;
		return (int)n;
	case SMCR_CLC_ACCEPT:
	case SMCR_CLC_CONFIRM:
		rc = acc_conf_check(&ac->r);
		if (rc < 0)
			return rc;
		if (ac->gid_count > SMCR_CLC_MAX_GIDS || ac->os_type > 0x0F || ac->release > 0x0F)
			return SMCR_E_INVAL;
		n = SMCR_CLC_V2_ACC_CONF_LEN;
		if (ac->r.first_contact)
			n += sizeof(struct smcr_wire_clc_fce) + sizeof(struct smcr_wire_clc_fce_v2x) +
				(msg->hdr.type == SMCR_CLC_CONFIRM ?
				 sizeof(struct smcr_wire_clc_gid_list) +
				 (size_t)ac->gid_count * SMCR_GID_LEN : 0);
		return (int)n;
	case SMCR_CLC_DECLINE:
		return msg->decline.os_type > 0x0F ? SMCR_E_INVAL : SMCR_CLC_V2_DECLINE_LEN;
	default:
		return SMCR_E_TYPE;
	}
}

static void proposal_v2_encode(const struct smcr_clc_v2_proposal *m, uint8_t *p, size_t length)
{
	struct smcr_wire_clc_smcd_area smcd;
	struct smcr_wire_clc_v2_ext ext;
	struct smcr_clc_proposal v1 = m->v1;
	size_t off = sizeof(struct smcr_wire_clc_proposal_head) + sizeof(smcd);
	uint8_t tmp[SMCR_CLC_MAX_V1_LEN];
	int n;

	/* The v1 encoder writes head, growth area (the SMC-D area's place:
	 * zeros), IP area, prefixes; without a v1 offer only the head. */
	v1.ip_area_offset = m->typev1 != SMCR_CLC_TYPE_N ? sizeof(smcd) : 0;
	n = proposal_len(&v1);
	proposal_encode(&v1, tmp, (size_t)n);
	memcpy(p, tmp, sizeof(struct smcr_wire_clc_proposal_head));
	memset(&smcd, 0, sizeof(smcd));
	if (m->typev1 != SMCR_CLC_TYPE_N) {
		size_t ip = (size_t)n - off - SMCR_CLC_TRAILER_LEN;

		memcpy(p + off, tmp + off, ip);
		off += ip;
	}
	if (m->typev2 != SMCR_CLC_TYPE_N) {
		smcd.v2_ext_offset = htobe16((uint16_t)(off - sizeof(struct smcr_wire_clc_proposal_head) -
					     offsetof(struct smcr_wire_clc_smcd_area, reserved)));
		memset(&ext, 0, sizeof(ext));
		ext.eid_count = m->eid_count;
		ext.release_seid = (uint8_t)(m->release << 4 | (m->seid ? 0x01 : 0));
		memcpy(ext.roce_gid, m->roce_gid, sizeof(ext.roce_gid));
		ext.max_conns = m->max_conns;
		ext.max_links = m->max_links;
		ext.feature_mask = htobe16(m->feature_mask);
		memcpy(p + off, &ext, sizeof(ext));
		off += sizeof(ext);
		memcpy(p + off, m->eids, (size_t)m->eid_count * SMCR_EID_LEN);
		off += (size_t)m->eid_count * SMCR_EID_LEN;
	}
	memcpy(p + sizeof(struct smcr_wire_clc_proposal_head), &smcd, sizeof(smcd));
	hdr_v2_to_wire((struct smcr_wire_clc_hdr *)p, SMCR_CLC_PROPOSAL, length, m->typev2,
		       m->typev1);
	memcpy(p + off, eyecatcher, sizeof(eyecatcher));
}

static void acc_conf_v2_encode(const struct smcr_clc_v2_accept_confirm *m, uint8_t type,
			       uint8_t *p, size_t length)
{
	struct smcr_wire_clc_accept_confirm_v2 w;
	struct smcr_wire_clc_fce_v2x x;
	struct smcr_wire_clc_gid_list gl;
	struct smcr_wire_clc_fce fce;
	uint8_t v1[SMCR_CLC_ACCEPT_LEN];
	size_t off = sizeof(w);

	/* The v1 fields as v1 has them; then the v2 header over them. */
	acc_conf_encode(&m->r, SMCR_CLC_ACCEPT, v1);
	memset(&w, 0, sizeof(w));
	memcpy(&w, v1, offsetof(struct smcr_wire_clc_accept_confirm_v2, eid));
	hdr_v2_to_wire(&w.hdr, type, length, m->r.first_contact ? 2 : 0, SMCR_CLC_TYPE_R);
	memcpy(w.eid, m->eid, sizeof(w.eid));
	memcpy(p, &w, sizeof(w));
	if (m->r.first_contact) {
		memset(&fce, 0, sizeof(fce));
		fce.direct = m->direct ? 0x80 : 0;
		fce.os_release = (uint8_t)(m->os_type << 4 | m->release);
		memcpy(fce.hostname, m->hostname, sizeof(fce.hostname));
		memcpy(p + off, &fce, sizeof(fce));
		off += sizeof(fce);
		memset(&x, 0, sizeof(x));
		x.max_conns = m->max_conns;
		x.max_links = m->max_links;
		x.feature_mask = htobe16(m->feature_mask);
		x.vendor_exp_options = htobe32(m->vendor_options);
		memcpy(p + off, &x, sizeof(x));
		off += sizeof(x);
		if (type == SMCR_CLC_CONFIRM) {
			memset(&gl, 0, sizeof(gl));
			gl.gid_count = m->gid_count;
			memcpy(p + off, &gl, sizeof(gl));
			off += sizeof(gl);
			memcpy(p + off, m->gids, (size_t)m->gid_count * SMCR_GID_LEN);
			off += (size_t)m->gid_count * SMCR_GID_LEN;
		}
	}
	memcpy(p + off, eyecatcher, sizeof(eyecatcher));
}

int smcr_clc_v2_encode(const struct smcr_clc_v2_msg *msg, void *buf, size_t len)
{
	int n = smcr_clc_v2_encoded_len(msg);
	struct smcr_wire_clc_decline_v2 d;
	uint8_t v1[SMCR_CLC_DECLINE_LEN];
	unsigned int i;

	if (n < 0)
		return n;
	if (len < (size_t)n)
		return SMCR_E_NOSPC;
	switch (msg->hdr.type) {
	case SMCR_CLC_PROPOSAL:
		proposal_v2_encode(&msg->proposal, buf, (size_t)n);
		break;
	case SMCR_CLC_ACCEPT:
	case SMCR_CLC_CONFIRM:
		acc_conf_v2_encode(&msg->accept, msg->hdr.type, buf, (size_t)n);
		break;
	case SMCR_CLC_DECLINE:
		decline_encode(&msg->decline.d, v1);
		memset(&d, 0, sizeof(d));
		memcpy(&d, v1, offsetof(struct smcr_wire_clc_decline_v2, os_type));
		hdr_v2_to_wire(&d.hdr, SMCR_CLC_DECLINE, sizeof(d), 0, 0);
		d.hdr.version_flags |= v1[7] & SMCR_CLC_FLAG_OUT_OF_SYNC;
		d.os_type = (uint8_t)(msg->decline.os_type << 4);
		for (i = 0; i < 4; i++)
			d.diagnosis_v2[i] = htobe32(msg->decline.diagnosis_v2[i]);
		memcpy(d.trailer.eyecatcher, eyecatcher, sizeof(eyecatcher));
		memcpy(buf, &d, sizeof(d));
		break;
	}
	return n;
}
