/* SPDX-License-Identifier: BSD-3-Clause */
/* smcrbd: NBD codecs, the only bridge between wire and host structs. */
#include <config.h>

#include <endian.h>
#include <errno.h>
#include <stdbool.h>
#include <string.h>

#include "nbd-wire.h"

void nbd_greeting_encode(uint16_t flags, struct nbd_greeting_wire *w)
{
	w->magic = htobe64(NBD_MAGIC);
	w->ihaveopt = htobe64(NBD_IHAVEOPT);
	w->flags = htobe16(flags);
}

int nbd_greeting_decode(const struct nbd_greeting_wire *w, uint16_t *flags)
{
	if (be64toh(w->magic) != NBD_MAGIC || be64toh(w->ihaveopt) != NBD_IHAVEOPT)
		return -EPROTO;
	*flags = be16toh(w->flags);
	return 0;
}

void nbd_client_flags_encode(uint32_t flags, struct nbd_client_flags_wire *w)
{
	w->flags = htobe32(flags);
}

uint32_t nbd_client_flags_decode(const struct nbd_client_flags_wire *w)
{
	return be32toh(w->flags);
}

void nbd_opt_encode(const struct nbd_opt *h, struct nbd_opt_wire *w)
{
	w->magic = htobe64(NBD_IHAVEOPT);
	w->option = htobe32(h->option);
	w->len = htobe32(h->len);
}

int nbd_opt_decode(const struct nbd_opt_wire *w, struct nbd_opt *h)
{
	if (be64toh(w->magic) != NBD_IHAVEOPT)
		return -EPROTO;
	h->option = be32toh(w->option);
	h->len = be32toh(w->len);
	return 0;
}

void nbd_opt_reply_encode(const struct nbd_opt_reply *h, struct nbd_opt_reply_wire *w)
{
	w->magic = htobe64(NBD_OPT_REPLY_MAGIC);
	w->option = htobe32(h->option);
	w->type = htobe32(h->type);
	w->len = htobe32(h->len);
}

int nbd_opt_reply_decode(const struct nbd_opt_reply_wire *w, struct nbd_opt_reply *h)
{
	if (be64toh(w->magic) != NBD_OPT_REPLY_MAGIC)
		return -EPROTO;
	h->option = be32toh(w->option);
	h->type = be32toh(w->type);
	h->len = be32toh(w->len);
	return 0;
}

void nbd_export_name_reply_encode(uint64_t size, uint16_t flags,
				  struct nbd_export_name_reply_wire *w)
{
	w->size = htobe64(size);
	w->flags = htobe16(flags);
}

void nbd_export_name_reply_decode(const struct nbd_export_name_reply_wire *w,
				  uint64_t *size, uint16_t *flags)
{
	*size = be64toh(w->size);
	*flags = be16toh(w->flags);
}

void nbd_info_export_encode(uint64_t size, uint16_t flags, struct nbd_info_export_wire *w)
{
	w->type = htobe16(NBD_INFO_EXPORT);
	w->size = htobe64(size);
	w->flags = htobe16(flags);
}

void nbd_info_block_size_encode(uint32_t min, uint32_t pref, uint32_t max,
				struct nbd_info_block_size_wire *w)
{
	w->type = htobe16(NBD_INFO_BLOCK_SIZE);
	w->minimum = htobe32(min);
	w->preferred = htobe32(pref);
	w->maximum = htobe32(max);
}

int nbd_info_decode(const void *payload, size_t len, uint16_t *type,
		    struct nbd_export_info *info)
{
	const struct nbd_info_export_wire *ie = payload;
	const struct nbd_info_block_size_wire *ib = payload;
	uint16_t t;

	if (len < 2)
		return -EPROTO;
	memcpy(&t, payload, sizeof(t));
	t = be16toh(t);
	*type = t;
	switch (t) {
	case NBD_INFO_EXPORT:
		if (len != sizeof(*ie))
			return -EPROTO;
		info->size = be64toh(ie->size);
		info->flags = be16toh(ie->flags);
		return 0;
	case NBD_INFO_BLOCK_SIZE:
		if (len != sizeof(*ib))
			return -EPROTO;
		info->min_block = be32toh(ib->minimum);
		info->pref_block = be32toh(ib->preferred);
		info->max_payload = be32toh(ib->maximum);
		return 0;
	default:
		return 0;
	}
}

void nbd_request_encode(const struct nbd_request *h, struct nbd_request_wire *w)
{
	w->magic = htobe32(NBD_REQUEST_MAGIC);
	w->flags = htobe16(h->flags);
	w->type = htobe16(h->type);
	w->cookie = htobe64(h->cookie);
	w->offset = htobe64(h->offset);
	w->length = htobe32((uint32_t)h->length);
}

int nbd_request_decode(const struct nbd_request_wire *w, struct nbd_request *h)
{
	if (be32toh(w->magic) != NBD_REQUEST_MAGIC)
		return -EPROTO;
	h->flags = be16toh(w->flags);
	h->type = be16toh(w->type);
	h->cookie = be64toh(w->cookie);
	h->offset = be64toh(w->offset);
	h->length = be32toh(w->length);
	return 0;
}

void nbd_ext_request_encode(const struct nbd_request *h, struct nbd_ext_request_wire *w)
{
	w->magic = htobe32(NBD_EXTENDED_REQUEST_MAGIC);
	w->flags = htobe16(h->flags);
	w->type = htobe16(h->type);
	w->cookie = htobe64(h->cookie);
	w->offset = htobe64(h->offset);
	w->length = htobe64(h->length);
}

int nbd_ext_request_decode(const struct nbd_ext_request_wire *w, struct nbd_request *h)
{
	if (be32toh(w->magic) != NBD_EXTENDED_REQUEST_MAGIC)
		return -EPROTO;
	h->flags = be16toh(w->flags);
	h->type = be16toh(w->type);
	h->cookie = be64toh(w->cookie);
	h->offset = be64toh(w->offset);
	h->length = be64toh(w->length);
	return 0;
}

int nbd_request_decode_any(const void *buf, int extended, struct nbd_request *h)
{
	if (extended) {
		struct nbd_ext_request_wire w;

		memcpy(&w, buf, sizeof(w));
		return nbd_ext_request_decode(&w, h);
	} else {
		struct nbd_request_wire w;

		memcpy(&w, buf, sizeof(w));
		return nbd_request_decode(&w, h);
	}
}

void nbd_simple_reply_encode(const struct nbd_simple_reply *h, struct nbd_simple_reply_wire *w)
{
	w->magic = htobe32(NBD_SIMPLE_REPLY_MAGIC);
	w->error = htobe32(h->error);
	w->cookie = htobe64(h->cookie);
}

int nbd_simple_reply_decode(const struct nbd_simple_reply_wire *w, struct nbd_simple_reply *h)
{
	if (be32toh(w->magic) != NBD_SIMPLE_REPLY_MAGIC)
		return -EPROTO;
	h->error = be32toh(w->error);
	h->cookie = be64toh(w->cookie);
	return 0;
}

void nbd_chunk_encode(const struct nbd_chunk *h, struct nbd_chunk_wire *w)
{
	w->magic = htobe32(NBD_STRUCTURED_REPLY_MAGIC);
	w->flags = htobe16(h->flags);
	w->type = htobe16(h->type);
	w->cookie = htobe64(h->cookie);
	w->length = htobe32((uint32_t)h->length);
}

int nbd_chunk_decode(const struct nbd_chunk_wire *w, struct nbd_chunk *h)
{
	if (be32toh(w->magic) != NBD_STRUCTURED_REPLY_MAGIC)
		return -EPROTO;
	h->flags = be16toh(w->flags);
	h->type = be16toh(w->type);
	h->cookie = be64toh(w->cookie);
	h->length = be32toh(w->length);
	return 0;
}

void nbd_ext_chunk_encode(const struct nbd_chunk *h, struct nbd_ext_chunk_wire *w)
{
	w->magic = htobe32(NBD_EXTENDED_REPLY_MAGIC);
	w->flags = htobe16(h->flags);
	w->type = htobe16(h->type);
	w->cookie = htobe64(h->cookie);
	w->offset = htobe64(h->offset);
	w->length = htobe64(h->length);
}

int nbd_ext_chunk_decode(const struct nbd_ext_chunk_wire *w, struct nbd_chunk *h)
{
	if (be32toh(w->magic) != NBD_EXTENDED_REPLY_MAGIC)
		return -EPROTO;
	h->flags = be16toh(w->flags);
	h->type = be16toh(w->type);
	h->cookie = be64toh(w->cookie);
	h->offset = be64toh(w->offset);
	h->length = be64toh(w->length);
	return 0;
}

uint32_t nbd_reply_magic(const void *buf)
{
	uint32_t m;

	memcpy(&m, buf, sizeof(m));
	m = be32toh(m);
	if (m == NBD_SIMPLE_REPLY_MAGIC || m == NBD_STRUCTURED_REPLY_MAGIC)
		return m;
	return 0;
}

void nbd_offset_encode(uint64_t offset, struct nbd_chunk_offset_data_wire *w)
{
	w->offset = htobe64(offset);
}

uint64_t nbd_offset_decode(const struct nbd_chunk_offset_data_wire *w)
{
	return be64toh(w->offset);
}

void nbd_hole_decode(const struct nbd_chunk_offset_hole_wire *w, uint64_t *offset,
		     uint32_t *length)
{
	*offset = be64toh(w->offset);
	*length = be32toh(w->length);
}

void nbd_extents_encode(const struct nbd_extent *e, unsigned n, void *wire)
{
	struct nbd_block_descriptor_wire w;
	unsigned i;

	for (i = 0; i < n; i++) {
		w.length = htobe32(e[i].length);
		w.flags = htobe32(e[i].flags);
		memcpy((uint8_t *)wire + i * sizeof(w), &w, sizeof(w));
	}
}

void nbd_extents_decode(const void *wire, unsigned n, struct nbd_extent *e)
{
	struct nbd_block_descriptor_wire w;
	unsigned i;

	for (i = 0; i < n; i++) {
		memcpy(&w, (const uint8_t *)wire + i * sizeof(w), sizeof(w));
		e[i].length = be32toh(w.length);
		e[i].flags = be32toh(w.flags);
	}
}

void nbd_extents_ext_encode(const struct nbd_extent *e, unsigned n, void *wire)
{
	struct nbd_block_descriptor_ext_wire w;
	unsigned i;

	for (i = 0; i < n; i++) {
		w.length = htobe64(e[i].length);
		w.flags = htobe64(e[i].flags);
		memcpy((uint8_t *)wire + i * sizeof(w), &w, sizeof(w));
	}
}

void nbd_block_status_ext_encode(uint32_t id, uint32_t count,
				 struct nbd_chunk_block_status_ext_wire *w)
{
	w->context_id = htobe32(id);
	w->count = htobe32(count);
}

void nbd_block_status_id_encode(uint32_t id, struct nbd_chunk_block_status_wire *w)
{
	w->context_id = htobe32(id);
}

uint32_t nbd_block_status_id_decode(const struct nbd_chunk_block_status_wire *w)
{
	return be32toh(w->context_id);
}

/* An error chunk behind a compact or an extended chunk header. */
static int error_chunk_build(void *buf, size_t size, bool ext, uint64_t cookie,
			     uint64_t req_offset, uint16_t flags, uint32_t error, const char *msg,
			     int has_offset, uint64_t offset)
{
	struct nbd_chunk ch;
	struct nbd_chunk_error_wire ew;
	size_t hdr_len = ext ? sizeof(struct nbd_ext_chunk_wire) : sizeof(struct nbd_chunk_wire);
	size_t fixed = hdr_len + sizeof(ew) + (has_offset ? sizeof(uint64_t) : 0);
	size_t mlen = msg ? strlen(msg) : 0;
	uint8_t *p = buf;

	if (size < fixed)
		return -ENOSPC;
	if (mlen > size - fixed)
		mlen = size - fixed;
	if (mlen > NBD_MAX_STRING)
		mlen = NBD_MAX_STRING;
	ch.flags = flags;
	ch.type = has_offset ? NBD_REPLY_TYPE_ERROR_OFFSET : NBD_REPLY_TYPE_ERROR;
	ch.cookie = cookie;
	ch.offset = req_offset;
	ch.length = fixed - hdr_len + mlen;
	if (ext) {
		struct nbd_ext_chunk_wire w;

		nbd_ext_chunk_encode(&ch, &w);
		memcpy(p, &w, sizeof(w));
	} else {
		struct nbd_chunk_wire w;

		nbd_chunk_encode(&ch, &w);
		memcpy(p, &w, sizeof(w));
	}
	p += hdr_len;
	ew.error = htobe32(error);
	ew.msg_len = htobe16((uint16_t)mlen);
	memcpy(p, &ew, sizeof(ew));
	p += sizeof(ew);
	if (mlen)
		memcpy(p, msg, mlen);
	p += mlen;
	if (has_offset) {
		uint64_t be = htobe64(offset);

		memcpy(p, &be, sizeof(be));
		p += sizeof(be);
	}
	return (int)(p - (uint8_t *)buf);
}

int nbd_error_chunk_build(void *buf, size_t size, uint64_t cookie, uint16_t flags,
			  uint32_t error, const char *msg, int has_offset,
			  uint64_t offset)
{
	return error_chunk_build(buf, size, false, cookie, 0, flags, error, msg, has_offset,
				 offset);
}

int nbd_ext_error_chunk_build(void *buf, size_t size, uint64_t cookie, uint64_t req_offset,
			      uint16_t flags, uint32_t error, const char *msg, int has_offset,
			      uint64_t offset)
{
	return error_chunk_build(buf, size, true, cookie, req_offset, flags, error, msg,
				 has_offset, offset);
}

int nbd_error_chunk_parse(const void *payload, size_t len, uint16_t type,
			  uint32_t *error, char *msg, size_t msg_size,
			  uint64_t *offset)
{
	struct nbd_chunk_error_wire ew;
	const uint8_t *p = payload;
	size_t mlen, tail;

	if (len < sizeof(ew))
		return -EPROTO;
	memcpy(&ew, p, sizeof(ew));
	*error = be32toh(ew.error);
	mlen = be16toh(ew.msg_len);
	tail = type == NBD_REPLY_TYPE_ERROR_OFFSET ? sizeof(uint64_t) : 0;
	if (mlen > len - sizeof(ew) || len - sizeof(ew) - mlen < tail)
		return -EPROTO;
	if (msg && msg_size) {
		size_t n = mlen < msg_size - 1 ? mlen : msg_size - 1;

		memcpy(msg, p + sizeof(ew), n);
		msg[n] = '\0';
	}
	if (offset) {
		*offset = 0;
		if (tail) {
			uint64_t be;

			memcpy(&be, p + sizeof(ew) + mlen, sizeof(be));
			*offset = be64toh(be);
		}
	}
	return 0;
}

uint32_t nbd_errno_to_wire(int err)
{
	switch (err) {
	case 0:
		return NBD_SUCCESS;
	case EPERM:
	case EROFS:
	case EACCES:
		return NBD_EPERM;
	case ENOMEM:
		return NBD_ENOMEM;
	case EINVAL:
		return NBD_EINVAL;
	case ENOSPC:
	case EDQUOT:
	case EFBIG:
		return NBD_ENOSPC;
	case EOVERFLOW:
		return NBD_EOVERFLOW;
	case ENOTSUP:
		return NBD_ENOTSUP;
	case ESHUTDOWN:
		return NBD_ESHUTDOWN;
	default:
		return NBD_EIO;
	}
}

int nbd_wire_to_errno(uint32_t error)
{
	switch (error) {
	case NBD_EPERM: case NBD_EIO: case NBD_ENOMEM: case NBD_EINVAL:
	case NBD_ENOSPC: case NBD_EOVERFLOW: case NBD_ENOTSUP: case NBD_ESHUTDOWN:
		return -(int)error;	/* the NBD values are Linux's errno values */
	default:
		/* The NBD spec: an unexpected error value is taken as EINVAL. */
		return -EINVAL;
	}
}

const char *nbd_cmd_name(uint16_t type)
{
	switch (type) {
	case NBD_CMD_READ: return "READ";
	case NBD_CMD_WRITE: return "WRITE";
	case NBD_CMD_DISC: return "DISC";
	case NBD_CMD_FLUSH: return "FLUSH";
	case NBD_CMD_TRIM: return "TRIM";
	case NBD_CMD_CACHE: return "CACHE";
	case NBD_CMD_WRITE_ZEROES: return "WRITE_ZEROES";
	case NBD_CMD_BLOCK_STATUS: return "BLOCK_STATUS";
	default: return "unknown";
	}
}

const char *nbd_opt_name(uint32_t option)
{
	switch (option) {
	case NBD_OPT_EXPORT_NAME: return "EXPORT_NAME";
	case NBD_OPT_ABORT: return "ABORT";
	case NBD_OPT_LIST: return "LIST";
	case NBD_OPT_STARTTLS: return "STARTTLS";
	case NBD_OPT_INFO: return "INFO";
	case NBD_OPT_GO: return "GO";
	case NBD_OPT_STRUCTURED_REPLY: return "STRUCTURED_REPLY";
	case NBD_OPT_LIST_META_CONTEXT: return "LIST_META_CONTEXT";
	case NBD_OPT_SET_META_CONTEXT: return "SET_META_CONTEXT";
	case NBD_OPT_EXTENDED_HEADERS: return "EXTENDED_HEADERS";
	default: return "unknown";
	}
}

const char *nbd_rep_name(uint32_t type)
{
	switch (type) {
	case NBD_REP_ACK: return "ACK";
	case NBD_REP_SERVER: return "SERVER";
	case NBD_REP_INFO: return "INFO";
	case NBD_REP_META_CONTEXT: return "META_CONTEXT";
	case NBD_REP_ERR_UNSUP: return "ERR_UNSUP";
	case NBD_REP_ERR_POLICY: return "ERR_POLICY";
	case NBD_REP_ERR_INVALID: return "ERR_INVALID";
	case NBD_REP_ERR_PLATFORM: return "ERR_PLATFORM";
	case NBD_REP_ERR_TLS_REQD: return "ERR_TLS_REQD";
	case NBD_REP_ERR_UNKNOWN: return "ERR_UNKNOWN";
	case NBD_REP_ERR_SHUTDOWN: return "ERR_SHUTDOWN";
	case NBD_REP_ERR_BLOCK_SIZE_REQD: return "ERR_BLOCK_SIZE_REQD";
	case NBD_REP_ERR_TOO_BIG: return "ERR_TOO_BIG";
	case NBD_REP_ERR_EXT_HEADER_REQD: return "ERR_EXT_HEADER_REQD";
	default: return "unknown";
	}
}
