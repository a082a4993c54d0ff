/* SPDX-License-Identifier: BSD-3-Clause */
/* smcrbd: LLC message codec (RFC 7609 A.3). */
#include <config.h>

#include <string.h>

#include "byteorder.h"
#include "msg.h"
#include "wire.h"

const char *smcr_llc_type_str(unsigned int type)
{
	switch (type) {
	case SMCR_LLC_CONFIRM_LINK: return "CONFIRM LINK";
	case SMCR_LLC_ADD_LINK: return "ADD LINK";
	case SMCR_LLC_ADD_LINK_CONT: return "ADD LINK CONTINUATION";
	case SMCR_LLC_DELETE_LINK: return "DELETE LINK";
	case SMCR_LLC_CONFIRM_RKEY: return "CONFIRM RKEY";
	case SMCR_LLC_TEST_LINK: return "TEST LINK";
	case SMCR_LLC_CONFIRM_RKEY_CONT: return "CONFIRM RKEY CONTINUATION";
	case SMCR_LLC_DELETE_RKEY: return "DELETE RKEY";
	case SMCR_LLC_REQ_ADD_LINK: return "REQ ADD LINK";
	default: return "unknown";
	}
}

static unsigned int min_u(unsigned int a, unsigned int b)
{
	return a < b ? a : b;
}

/* ---- decode -------------------------------------------------------------- */

static void rkey_spec_from_wire(struct smcr_llc_rkey_spec *h, const struct smcr_wire_llc_rkey_spec *w)
{
	h->link_num = w->link_num;
	h->rkey = be32toh(w->rkey);
	h->vaddr = be64toh(w->vaddr);
}

static int confirm_link_decode(const uint8_t *p, struct smcr_llc_confirm_link *m)
{
	struct smcr_wire_llc_confirm_link w;

	memcpy(&w, p, sizeof(w));
	memcpy(m->mac, w.mac, sizeof(m->mac));
	memcpy(m->gid, w.gid, sizeof(m->gid));
	m->qpn = smcr_get_be24(w.qpn);
	m->link_num = w.link_num;
	m->link_uid = be32toh(w.link_uid);
	m->max_links = w.max_links;
	m->max_conns = w.max_conns;
	m->no_rmbe_eyec = (w.hdr.flags & SMCR_LLC_FLAG_NO_RMBE_EYEC) != 0;
	m->libsmcr = be16toh(w.impl) == SMCR_LLC_CONFIRM_LIBSMCR;
	return 0;
}

static int add_link_decode(const uint8_t *p, struct smcr_llc_add_link *m)
{
	struct smcr_wire_llc_add_link w;

	memcpy(&w, p, sizeof(w));
	m->reject = (w.hdr.flags & SMCR_LLC_FLAG_ADD_LINK_REJECT) != 0;
	m->reason = w.hdr.reserved & 0x0F;
	memcpy(m->mac, w.mac, sizeof(m->mac));
	memcpy(m->gid, w.gid, sizeof(m->gid));
	m->qpn = smcr_get_be24(w.qpn);
	m->link_num = w.link_num;
	m->qp_mtu = w.mtu & 0x0F;
	m->psn = smcr_get_be24(w.psn);
	return 0;
}

static int add_link_cont_decode(const uint8_t *p, struct smcr_llc_add_link_cont *m)
{
	struct smcr_wire_llc_add_link_cont w;
	unsigned int i, n;

	memcpy(&w, p, sizeof(w));
	m->link_num = w.link_num;
	m->num_rtokens = w.num_rtokens;
	n = min_u(w.num_rtokens, 2);
	for (i = 0; i < n; i++) {
		m->pair[i].ref_rkey = be32toh(w.pair[i].ref_rkey);
		m->pair[i].new_rkey = be32toh(w.pair[i].new_rkey);
		m->pair[i].new_vaddr = be64toh(w.pair[i].new_vaddr);
	}
	return 0;
}

static int delete_link_decode(const uint8_t *p, struct smcr_llc_delete_link *m)
{
	struct smcr_wire_llc_delete_link w;

	memcpy(&w, p, sizeof(w));
	m->all = (w.hdr.flags & SMCR_LLC_FLAG_DEL_LINK_ALL) != 0;
	m->orderly = (w.hdr.flags & SMCR_LLC_FLAG_DEL_LINK_ORDERLY) != 0;
	m->link_num = w.link_num;
	m->reason = be32toh(w.reason);
	return 0;
}

static int confirm_rkey_decode(const uint8_t *p, struct smcr_llc_confirm_rkey *m)
{
	struct smcr_wire_llc_confirm_rkey w;
	unsigned int i, n;

	memcpy(&w, p, sizeof(w));
	m->negative = (w.hdr.flags & SMCR_LLC_FLAG_RKEY_NEGATIVE) != 0;
	m->retry = (w.hdr.flags & SMCR_LLC_FLAG_RKEY_RETRY) != 0;
	m->num_tokens = w.num_tokens;
	m->rkey = be32toh(w.rkey);
	m->vaddr = be64toh(w.vaddr);
	/* At most eight links per group, so at most seven other links. */
	if (m->num_tokens > SMCR_MAX_LINKS - 1)
		return SMCR_E_RANGE;
	n = min_u(w.num_tokens, 2);
	for (i = 0; i < n; i++)
		rkey_spec_from_wire(&m->other[i], &w.other[i]);
	return 0;
}

static int confirm_rkey_cont_decode(const uint8_t *p, struct smcr_llc_confirm_rkey_cont *m)
{
	struct smcr_wire_llc_confirm_rkey_cont w;
	unsigned int i, n;

	memcpy(&w, p, sizeof(w));
	m->negative = (w.hdr.flags & SMCR_LLC_FLAG_RKEY_NEGATIVE) != 0;
	m->num_left = w.num_left;
	if (m->num_left > SMCR_MAX_LINKS - 1)
		return SMCR_E_RANGE;
	n = min_u(w.num_left, 3);
	for (i = 0; i < n; i++)
		rkey_spec_from_wire(&m->spec[i], &w.spec[i]);
	return 0;
}

static int delete_rkey_decode(const uint8_t *p, struct smcr_llc_delete_rkey *m)
{
	struct smcr_wire_llc_delete_rkey w;
	unsigned int i;

	memcpy(&w, p, sizeof(w));
	m->negative = (w.hdr.flags & SMCR_LLC_FLAG_RKEY_NEGATIVE) != 0;
	m->count = w.count;
	m->err_mask = w.err_mask;
	if (m->count < 1 || m->count > 8)
		return SMCR_E_RANGE;
	/* bit 0x80 is the first rkey: bits below 0x80 >> (count - 1) name
	 * rkeys that are not there */
	if (m->err_mask & (uint8_t)(0xFFu >> m->count))
		return SMCR_E_RANGE;
	for (i = 0; i < m->count; i++)
		m->rkey[i] = be32toh(w.rkey[i]);
	return 0;
}

static int test_link_decode(const uint8_t *p, struct smcr_llc_test_link *m)
{
	struct smcr_wire_llc_test_link w;

	memcpy(&w, p, sizeof(w));
	memcpy(m->user_data, w.user_data, sizeof(m->user_data));
	return 0;
}

static int req_add_link_decode(const uint8_t *p, struct smcr_llc_req_add_link *m)
{
	struct smcr_wire_llc_req_add_link w;

	memcpy(&w, p, sizeof(w));
	m->gid_count = w.gid_count;
	if (m->gid_count)
		memcpy(m->gid, w.gid, sizeof(m->gid));
	return 0;
}

int smcr_llc_decode(const void *buf, size_t len, struct smcr_llc_msg *msg)
{
	const uint8_t *p = buf;
	struct smcr_wire_llc_hdr hdr;
	uint8_t type;
	int rc;

	memset(msg, 0, sizeof(*msg));
	if (len < SMCR_LLC_LEN)
		return SMCR_E_TRUNC;
	memcpy(&hdr, p, sizeof(hdr));
	if ((hdr.type & 0xC0) == 0xC0)
		return SMCR_E_NOTTYPE;	/* b'11': a CDC message */
	type = hdr.type;
	if ((hdr.type & 0xF0) == SMCR_LLC_VERSION_2 << 4) {
		msg->version = SMCR_LLC_VERSION_2;
		msg->length = (uint16_t)(hdr.length | hdr.reserved << 8);
		if (msg->length < SMCR_LLC_LEN || msg->length > SMCR_LLC_V2_MAX_LEN)
			return SMCR_E_LENGTH;
		type = hdr.type & 0x0F;
	} else {
		if (hdr.length != SMCR_LLC_LEN)
			return SMCR_E_LENGTH;
		msg->version = 1;
		msg->length = SMCR_LLC_LEN;
	}
	msg->type = type;
	msg->reply = (hdr.flags & SMCR_LLC_FLAG_REPLY) != 0;
	switch (type) {
	case SMCR_LLC_CONFIRM_LINK:
		rc = confirm_link_decode(p, &msg->confirm_link);
		break;
	case SMCR_LLC_ADD_LINK:
		rc = add_link_decode(p, &msg->add_link);
		break;
	case SMCR_LLC_ADD_LINK_CONT:
		rc = add_link_cont_decode(p, &msg->add_link_cont);
		break;
	case SMCR_LLC_DELETE_LINK:
		rc = delete_link_decode(p, &msg->delete_link);
		break;
	case SMCR_LLC_CONFIRM_RKEY:
		rc = confirm_rkey_decode(p, &msg->confirm_rkey);
		break;
	case SMCR_LLC_CONFIRM_RKEY_CONT:
		rc = confirm_rkey_cont_decode(p, &msg->confirm_rkey_cont);
		break;
	case SMCR_LLC_DELETE_RKEY:
		rc = delete_rkey_decode(p, &msg->delete_rkey);
		break;
	case SMCR_LLC_TEST_LINK:
		rc = test_link_decode(p, &msg->test_link);
		break;
	case SMCR_LLC_REQ_ADD_LINK:
		if (msg->version != SMCR_LLC_VERSION_2)
			return SMCR_E_TYPE;
		rc = req_add_link_decode(p, &msg->req_add_link);
		break;
	default:
		/* A.3: b'10' opcodes are optional (discard silently if
		 * unknown), b'00' ones must be supported. */
		return (hdr.type & 0xC0) == 0x80 ? SMCR_E_OPTIONAL : SMCR_E_TYPE;
	}
	return rc < 0 ? rc : SMCR_LLC_LEN;
}

int smcr_llc_add_link_v2_ext_decode(const void *msg, size_t len,
				    struct smcr_llc_add_link_v2_ext *ext,
				    struct smcr_llc_rtoken_pair *pairs, unsigned int max)
{
	const uint8_t *p = msg;
	struct smcr_wire_llc_add_link_v2_ext w;
	struct smcr_wire_llc_rtoken_pair rt;
	unsigned int i;

	memset(ext, 0, sizeof(*ext));
	if (len < SMCR_LLC_LEN + sizeof(w))
		return SMCR_E_TRUNC;
	memcpy(&w, p + SMCR_LLC_LEN, sizeof(w));
	ext->direct = (w.flags & SMCR_LLC_V2_DIRECT) != 0;
	memcpy(ext->target_gid, w.target_gid, sizeof(ext->target_gid));
	ext->num_rkeys = (uint16_t)(w.num_rkeys[0] | w.num_rkeys[1] << 8);
	if (ext->num_rkeys > SMCR_LLC_V2_MAX_RKEYS)
		return SMCR_E_RANGE;
	if (len < SMCR_LLC_LEN + sizeof(w) + (size_t)ext->num_rkeys * sizeof(rt))
		return SMCR_E_TRUNC;
	for (i = 0; i < ext->num_rkeys && i < max; i++) {
		memcpy(&rt, p + SMCR_LLC_LEN + sizeof(w) + i * sizeof(rt), sizeof(rt));
		pairs[i].ref_rkey = be32toh(rt.ref_rkey);
		pairs[i].new_rkey = be32toh(rt.new_rkey);
		pairs[i].new_vaddr = be64toh(rt.new_vaddr);
	}
	return ext->num_rkeys;
}

/* ---- encode -------------------------------------------------------------- */

int smcr_llc_add_link_v2_encode(const struct smcr_llc_msg *msg,
				const struct smcr_llc_add_link_v2_ext *ext,
				const struct smcr_llc_rtoken_pair *pairs, void *buf, size_t len)
{
	struct smcr_wire_llc_add_link_v2_ext w;
	struct smcr_wire_llc_rtoken_pair rt;
	struct smcr_llc_msg head = *msg;
	size_t n = SMCR_LLC_LEN + sizeof(w) + (size_t)ext->num_rkeys * sizeof(rt);
	uint8_t *p = buf;
	unsigned int i;
	int rc;

	if (msg->type != SMCR_LLC_ADD_LINK || ext->num_rkeys > SMCR_LLC_V2_MAX_RKEYS)
		return SMCR_E_INVAL;
	if (len < n)
		return SMCR_E_NOSPC;
	head.version = SMCR_LLC_VERSION_2;
	rc = smcr_llc_encode(&head, p, len);
	if (rc < 0)
		return rc;
	p[1] = (uint8_t)n;		/* the whole length, little-endian */
	p[2] = (uint8_t)(n >> 8);
	memset(&w, 0, sizeof(w));
	w.flags = ext->direct ? SMCR_LLC_V2_DIRECT : 0;
	memcpy(w.target_gid, ext->target_gid, sizeof(w.target_gid));
	w.num_rkeys[0] = (uint8_t)ext->num_rkeys;
	w.num_rkeys[1] = (uint8_t)(ext->num_rkeys >> 8);
	memcpy(p + SMCR_LLC_LEN, &w, sizeof(w));
	for (i = 0; i < ext->num_rkeys; i++) {
		rt.ref_rkey = htobe32(pairs[i].ref_rkey);
		rt.new_rkey = htobe32(pairs[i].new_rkey);
		rt.new_vaddr = htobe64(pairs[i].new_vaddr);
		memcpy(p + SMCR_LLC_LEN + sizeof(w) + i * sizeof(rt), &rt, sizeof(rt));
	}
	return (int)n;
}

static void hdr_to_wire(struct smcr_wire_llc_hdr *w, const struct smcr_llc_msg *msg, uint8_t flags)
{
	w->type = msg->type;
	w->length = SMCR_LLC_LEN;
	w->flags = (uint8_t)(flags | (msg->reply ? SMCR_LLC_FLAG_REPLY : 0));
}

static void rkey_spec_to_wire(struct smcr_wire_llc_rkey_spec *w, const struct smcr_llc_rkey_spec *h)
{
	w->link_num = h->link_num;
	w->rkey = htobe32(h->rkey);
	w->vaddr = htobe64(h->vaddr);
}

static int confirm_link_encode(const struct smcr_llc_msg *msg, uint8_t *p)
{
	const struct smcr_llc_confirm_link *m = &msg->confirm_link;
	struct smcr_wire_llc_confirm_link w;

	if (m->qpn > SMCR_U24_MAX)
		return SMCR_E_INVAL;
	memset(&w, 0, sizeof(w));
	hdr_to_wire(&w.hdr, msg, m->no_rmbe_eyec ? SMCR_LLC_FLAG_NO_RMBE_EYEC : 0);
	memcpy(w.mac, m->mac, sizeof(w.mac));
	memcpy(w.gid, m->gid, sizeof(w.gid));
	smcr_put_be24(w.qpn, m->qpn);
	w.link_num = m->link_num;
	w.link_uid = htobe32(m->link_uid);
	w.max_links = m->max_links;
	w.max_conns = m->max_conns;
	w.impl = htobe16(m->libsmcr ? SMCR_LLC_CONFIRM_LIBSMCR : 0);
	memcpy(p, &w, sizeof(w));
	return 0;
}

static int add_link_encode(const struct smcr_llc_msg *msg, uint8_t *p)
{
	const struct smcr_llc_add_link *m = &msg->add_link;
	struct smcr_wire_llc_add_link w;

	if (m->qpn > SMCR_U24_MAX || m->psn > SMCR_U24_MAX ||
	    m->reason > 0x0F || m->qp_mtu > 0x0F)
		return SMCR_E_INVAL;
	memset(&w, 0, sizeof(w));
	hdr_to_wire(&w.hdr, msg, m->reject ? SMCR_LLC_FLAG_ADD_LINK_REJECT : 0);
	w.hdr.reserved = m->reason;
	memcpy(w.mac, m->mac, sizeof(w.mac));
	memcpy(w.gid, m->gid, sizeof(w.gid));
	smcr_put_be24(w.qpn, m->qpn);
	w.link_num = m->link_num;
	w.mtu = m->qp_mtu;
	smcr_put_be24(w.psn, m->psn);
	memcpy(p, &w, sizeof(w));
	return 0;
}

static int add_link_cont_encode(const struct smcr_llc_msg *msg, uint8_t *p)
{
	const struct smcr_llc_add_link_cont *m = &msg->add_link_cont;
	struct smcr_wire_llc_add_link_cont w;
	unsigned int i, n = min_u(m->num_rtokens, 2);

	memset(&w, 0, sizeof(w));
	hdr_to_wire(&w.hdr, msg, 0);
	w.link_num = m->link_num;
	w.num_rtokens = m->num_rtokens;
	for (i = 0; i < n; i++) {
		w.pair[i].ref_rkey = htobe32(m->pair[i].ref_rkey);
		w.pair[i].new_rkey = htobe32(m->pair[i].new_rkey);
		w.pair[i].new_vaddr = htobe64(m->pair[i].new_vaddr);
	}
	memcpy(p, &w, sizeof(w));
	return 0;
}

static int delete_link_encode(const struct smcr_llc_msg *msg, uint8_t *p)
{
	const struct smcr_llc_delete_link *m = &msg->delete_link;
	struct smcr_wire_llc_delete_link w;

	memset(&w, 0, sizeof(w));
	hdr_to_wire(&w.hdr, msg, (uint8_t)((m->all ? SMCR_LLC_FLAG_DEL_LINK_ALL : 0) |
					    (m->orderly ? SMCR_LLC_FLAG_DEL_LINK_ORDERLY : 0)));
	w.link_num = m->link_num;
	w.reason = htobe32(m->reason);
	memcpy(p, &w, sizeof(w));
	return 0;
}

static int confirm_rkey_encode(const struct smcr_llc_msg *msg, uint8_t *p)
{
	const struct smcr_llc_confirm_rkey *m = &msg->confirm_rkey;
	struct smcr_wire_llc_confirm_rkey w;
	unsigned int i, n = min_u(m->num_tokens, 2);

	if (m->num_tokens > SMCR_MAX_LINKS - 1)
		return SMCR_E_INVAL;
	memset(&w, 0, sizeof(w));
	hdr_to_wire(&w.hdr, msg, (uint8_t)((m->negative ? SMCR_LLC_FLAG_RKEY_NEGATIVE : 0) |
					    (m->retry ? SMCR_LLC_FLAG_RKEY_RETRY : 0)));
	w.num_tokens = m->num_tokens;
	w.rkey = htobe32(m->rkey);
	w.vaddr = htobe64(m->vaddr);
	for (i = 0; i < n; i++)
		rkey_spec_to_wire(&w.other[i], &m->other[i]);
	memcpy(p, &w, sizeof(w));
	return 0;
}

static int confirm_rkey_cont_encode(const struct smcr_llc_msg *msg, uint8_t *p)
{
	const struct smcr_llc_confirm_rkey_cont *m = &msg->confirm_rkey_cont;
	struct smcr_wire_llc_confirm_rkey_cont w;
	unsigned int i, n = min_u(m->num_left, 3);

	if (m->num_left > SMCR_MAX_LINKS - 1)
		return SMCR_E_INVAL;
	memset(&w, 0, sizeof(w));
	hdr_to_wire(&w.hdr, msg, m->negative ? SMCR_LLC_FLAG_RKEY_NEGATIVE : 0);
	w.num_left = m->num_left;
	for (i = 0; i < n; i++)
		rkey_spec_to_wire(&w.spec[i], &m->spec[i]);
	memcpy(p, &w, sizeof(w));
	return 0;
}

static int delete_rkey_encode(const struct smcr_llc_msg *msg, uint8_t *p)
{
	const struct smcr_llc_delete_rkey *m = &msg->delete_rkey;
	struct smcr_wire_llc_delete_rkey w;
	unsigned int i;

	if (m->count < 1 || m->count > 8 || (m->err_mask & (uint8_t)(0xFFu >> m->count)))
		return SMCR_E_INVAL;
	memset(&w, 0, sizeof(w));
	hdr_to_wire(&w.hdr, msg, m->negative ? SMCR_LLC_FLAG_RKEY_NEGATIVE : 0);
	w.count = m->count;
	w.err_mask = m->err_mask;
	for (i = 0; i < m->count; i++)
		w.rkey[i] = htobe32(m->rkey[i]);
	memcpy(p, &w, sizeof(w));
	return 0;
}

static int test_link_encode(const struct smcr_llc_msg *msg, uint8_t *p)
{
	struct smcr_wire_llc_test_link w;

	memset(&w, 0, sizeof(w));
	hdr_to_wire(&w.hdr, msg, 0);
	memcpy(w.user_data, msg->test_link.user_data, sizeof(w.user_data));
	memcpy(p, &w, sizeof(w));
	return 0;
}

int smcr_llc_encode(const struct smcr_llc_msg *msg, void *buf, size_t len)
{
	uint8_t tmp[SMCR_LLC_LEN];
	int rc;

	switch (msg->type) {
	case SMCR_LLC_CONFIRM_LINK: rc = confirm_link_encode(msg, tmp); break;
	case SMCR_LLC_ADD_LINK: rc = add_link_encode(msg, tmp); break;
	case SMCR_LLC_ADD_LINK_CONT: rc = add_link_cont_encode(msg, tmp); break;
	case SMCR_LLC_DELETE_LINK: rc = delete_link_encode(msg, tmp); break;
	case SMCR_LLC_CONFIRM_RKEY: rc = confirm_rkey_encode(msg, tmp); break;
	case SMCR_LLC_CONFIRM_RKEY_CONT: rc = confirm_rkey_cont_encode(msg, tmp); break;
	case SMCR_LLC_DELETE_RKEY: rc = delete_rkey_encode(msg, tmp); break;
	case SMCR_LLC_TEST_LINK: rc = test_link_encode(msg, tmp); break;
	case SMCR_LLC_REQ_ADD_LINK:
		if (msg->version != SMCR_LLC_VERSION_2)
			return SMCR_E_TYPE;
		memset(tmp, 0, sizeof(tmp));
		hdr_to_wire((struct smcr_wire_llc_hdr *)tmp, msg, 0);
		if (!msg->reply && msg->req_add_link.gid_count) {
			/* the one GID the 44 bytes hold */
			struct smcr_wire_llc_req_add_link *w = (void *)tmp;

			w->gid_count = 1;
			memcpy(w->gid, msg->req_add_link.gid, sizeof(w->gid));
		}
		rc = 0;
		break;
	default: return SMCR_E_TYPE;
	}
	if (rc < 0)
		return rc;
	if (msg->version == SMCR_LLC_VERSION_2) {
		/* v2 header: version and type, 16-bit length (Linux: host
		 * order, little-endian) over the v1 length and reserved bytes */
		tmp[0] = (uint8_t)(SMCR_LLC_VERSION_2 << 4 | msg->type);
		tmp[1] = SMCR_LLC_LEN;
		tmp[2] = 0;
	}
	if (len < SMCR_LLC_LEN)
		return SMCR_E_NOSPC;
	memcpy(buf, tmp, SMCR_LLC_LEN);
	return SMCR_LLC_LEN;
}
