/* SPDX-License-Identifier: BSD-3-Clause */
/* smcrbd: NBD messages as they travel (network byte order) and as the
 * program uses them (host structs), with the codecs between the two.
 *
 * Wire structs are packed, their multi-byte fields hold big-endian values
 * and nothing but the encode/decode functions below reads or writes them.
 * Decoders check magic numbers and return -EPROTO on a mismatch. */
#ifndef SMCRBD_NBD_WIRE_H
#define SMCRBD_NBD_WIRE_H

#include <stddef.h>
#include <stdint.h>

#include "nbd-proto.h"

#define NBD_PACKED __attribute__((packed))

/* --- handshake ------------------------------------------------------- */

/* S: NBDMAGIC, IHAVEOPT, handshake flags. */
struct nbd_greeting_wire {
	uint64_t magic;
	uint64_t ihaveopt;
	uint16_t flags;
} NBD_PACKED;

/* C: client flags. */
struct nbd_client_flags_wire {
	uint32_t flags;
} NBD_PACKED;

/* C: option header, followed by len bytes of data. */
struct nbd_opt_wire {
	uint64_t magic;
	uint32_t option;
	uint32_t len;
} NBD_PACKED;

/* S: option reply header, followed by len bytes of data. */
struct nbd_opt_reply_wire {
	uint64_t magic;
	uint32_t option;
	uint32_t type;
	uint32_t len;
} NBD_PACKED;

/* S: answer to NBD_OPT_EXPORT_NAME (then 124 zero bytes unless
 * NO_ZEROES was negotiated). */
struct nbd_export_name_reply_wire {
	uint64_t size;
	uint16_t flags;
} NBD_PACKED;

/* NBD_REP_INFO payloads. */
struct nbd_info_export_wire {
	uint16_t type;			/* NBD_INFO_EXPORT */
	uint64_t size;
	uint16_t flags;
} NBD_PACKED;

struct nbd_info_block_size_wire {
	uint16_t type;			/* NBD_INFO_BLOCK_SIZE */
	uint32_t minimum;
	uint32_t preferred;
	uint32_t maximum;
} NBD_PACKED;

/* --- transmission ---------------------------------------------------- */

struct nbd_request_wire {
	uint32_t magic;
	uint16_t flags;
	uint16_t type;
	uint64_t cookie;
	uint64_t offset;
	uint32_t length;
} NBD_PACKED;

/* The request once NBD_OPT_EXTENDED_HEADERS is negotiated: a 64-bit
 * length, which is the payload's with NBD_CMD_FLAG_PAYLOAD_LEN and the
 * effect length (no payload) without it. */
struct nbd_ext_request_wire {
	uint32_t magic;
	uint16_t flags;
	uint16_t type;
	uint64_t cookie;
	uint64_t offset;
	uint64_t length;
} NBD_PACKED;

struct nbd_simple_reply_wire {
	uint32_t magic;
	uint32_t error;
	uint64_t cookie;
} NBD_PACKED;

struct nbd_chunk_wire {
	uint32_t magic;
	uint16_t flags;
	uint16_t type;
	uint64_t cookie;
	uint32_t length;
} NBD_PACKED;

/* Every reply chunk once extended headers are negotiated (no simple
 * replies then); offset is the request's. */
struct nbd_ext_chunk_wire {
	uint32_t magic;
	uint16_t flags;
	uint16_t type;
	uint64_t cookie;
	uint64_t offset;
	uint64_t length;
} NBD_PACKED;

/* Payload prefixes of structured chunks. */
struct nbd_chunk_offset_data_wire {
	uint64_t offset;
} NBD_PACKED;

struct nbd_chunk_offset_hole_wire {
	uint64_t offset;
	uint32_t length;
} NBD_PACKED;

/* NBD_REPLY_TYPE_BLOCK_STATUS: the context ID, then descriptors. */
struct nbd_chunk_block_status_wire {
	uint32_t context_id;
} NBD_PACKED;

struct nbd_block_descriptor_wire {
	uint32_t length;
	uint32_t flags;
} NBD_PACKED;

/* NBD_REPLY_TYPE_BLOCK_STATUS_EXT: context ID and descriptor count, then
 * count descriptors of 64-bit length and status. */
struct nbd_chunk_block_status_ext_wire {
	uint32_t context_id;
	uint32_t count;
} NBD_PACKED;

struct nbd_block_descriptor_ext_wire {
	uint64_t length;
	uint64_t flags;
} NBD_PACKED;

/* NBD_REPLY_TYPE_ERROR and _ERROR_OFFSET start with this, then the
 * message, then (ERROR_OFFSET only) a 64-bit offset. */
struct nbd_chunk_error_wire {
	uint32_t error;
	uint16_t msg_len;
} NBD_PACKED;

_Static_assert(sizeof(struct nbd_greeting_wire) == 18, "greeting");
_Static_assert(sizeof(struct nbd_opt_wire) == 16, "option header");
_Static_assert(sizeof(struct nbd_opt_reply_wire) == 20, "option reply");
_Static_assert(sizeof(struct nbd_export_name_reply_wire) == 10, "export name reply");
_Static_assert(sizeof(struct nbd_info_export_wire) == 12, "info export");
_Static_assert(sizeof(struct nbd_info_block_size_wire) == 14, "info block size");
_Static_assert(sizeof(struct nbd_request_wire) == 28, "request");
_Static_assert(sizeof(struct nbd_ext_request_wire) == 32, "extended request");
_Static_assert(sizeof(struct nbd_simple_reply_wire) == 16, "simple reply");
_Static_assert(sizeof(struct nbd_ext_chunk_wire) == 32, "extended chunk");
_Static_assert(sizeof(struct nbd_block_descriptor_ext_wire) == 16, "extended descriptor");
_Static_assert(sizeof(struct nbd_chunk_wire) == 20, "chunk");
_Static_assert(sizeof(struct nbd_chunk_error_wire) == 6, "error chunk");
_Static_assert(sizeof(struct nbd_block_descriptor_wire) == 8, "block descriptor");

/* --- host structs ---------------------------------------------------- */

struct nbd_opt {
	uint32_t option;
	uint32_t len;
};

struct nbd_opt_reply {
	uint32_t option;
	uint32_t type;
	uint32_t len;
};

struct nbd_export_info {
	uint64_t size;
	uint16_t flags;			/* transmission flags */
	uint32_t min_block;		/* 0: not advertised */
	uint32_t pref_block;
	uint32_t max_payload;
};

struct nbd_request {
	uint16_t flags;
	uint16_t type;
	uint64_t cookie;
	uint64_t offset;
	uint64_t length;		/* 32 bits in a compact request */
};

struct nbd_simple_reply {
	uint32_t error;
	uint64_t cookie;
};

struct nbd_chunk {
	uint16_t flags;
	uint16_t type;
	uint64_t cookie;
	uint64_t offset;		/* extended chunks only */
	uint64_t length;		/* 32 bits in a compact chunk */
};

/* One block status descriptor (an extent). */
struct nbd_extent {
	uint32_t length;
	uint32_t flags;			/* NBD_STATE_* */
};

/* --- codecs ---------------------------------------------------------- */

void nbd_greeting_encode(uint16_t flags, struct nbd_greeting_wire *w);
int nbd_greeting_decode(const struct nbd_greeting_wire *w, uint16_t *flags);

void nbd_client_flags_encode(uint32_t flags, struct nbd_client_flags_wire *w);
uint32_t nbd_client_flags_decode(const struct nbd_client_flags_wire *w);

void nbd_opt_encode(const struct nbd_opt *h, struct nbd_opt_wire *w);
int nbd_opt_decode(const struct nbd_opt_wire *w, struct nbd_opt *h);

void nbd_opt_reply_encode(const struct nbd_opt_reply *h, struct nbd_opt_reply_wire *w);
int nbd_opt_reply_decode(const struct nbd_opt_reply_wire *w, struct nbd_opt_reply *h);

void nbd_export_name_reply_encode(uint64_t size, uint16_t flags,
				  struct nbd_export_name_reply_wire *w);
void nbd_export_name_reply_decode(const struct nbd_export_name_reply_wire *w,
				  uint64_t *size, uint16_t *flags);

void nbd_info_export_encode(uint64_t size, uint16_t flags, struct nbd_info_export_wire *w);
void nbd_info_block_size_encode(uint32_t min, uint32_t pref, uint32_t max,
				struct nbd_info_block_size_wire *w);
/* Decodes one NBD_REP_INFO payload (len bytes) into *info.  Known types of
 * a wrong length give -EPROTO; unknown types are ignored (return 0).
 * *type receives the info type. */
int nbd_info_decode(const void *payload, size_t len, uint16_t *type,
		    struct nbd_export_info *info);

/* Compact requests: the encoder takes lengths of at most 32 bits (the
 * caller checks). */
void nbd_request_encode(const struct nbd_request *h, struct nbd_request_wire *w);
int nbd_request_decode(const struct nbd_request_wire *w, struct nbd_request *h);
void nbd_ext_request_encode(const struct nbd_request *h, struct nbd_ext_request_wire *w);
int nbd_ext_request_decode(const struct nbd_ext_request_wire *w, struct nbd_request *h);
/* The request header at buf, extended (32 bytes) or compact (28). */
int nbd_request_decode_any(const void *buf, int extended, struct nbd_request *h);

void nbd_simple_reply_encode(const struct nbd_simple_reply *h, struct nbd_simple_reply_wire *w);
int nbd_simple_reply_decode(const struct nbd_simple_reply_wire *w, struct nbd_simple_reply *h);

void nbd_chunk_encode(const struct nbd_chunk *h, struct nbd_chunk_wire *w);
int nbd_chunk_decode(const struct nbd_chunk_wire *w, struct nbd_chunk *h);
void nbd_ext_chunk_encode(const struct nbd_chunk *h, struct nbd_ext_chunk_wire *w);
int nbd_ext_chunk_decode(const struct nbd_ext_chunk_wire *w, struct nbd_chunk *h);

/* Magic at the start of a reply (simple or structured), or 0. */
uint32_t nbd_reply_magic(const void *buf);

void nbd_offset_encode(uint64_t offset, struct nbd_chunk_offset_data_wire *w);
uint64_t nbd_offset_decode(const struct nbd_chunk_offset_data_wire *w);
void nbd_hole_decode(const struct nbd_chunk_offset_hole_wire *w, uint64_t *offset,
		     uint32_t *length);

/* Block status payloads: n descriptors to or from wire bytes (n * 8). */
void nbd_extents_encode(const struct nbd_extent *e, unsigned n, void *wire);
void nbd_extents_decode(const void *wire, unsigned n, struct nbd_extent *e);
/* NBD_REPLY_TYPE_BLOCK_STATUS_EXT descriptors (n * 16 bytes). */
void nbd_extents_ext_encode(const struct nbd_extent *e, unsigned n, void *wire);
void nbd_block_status_ext_encode(uint32_t id, uint32_t count,
				 struct nbd_chunk_block_status_ext_wire *w);
void nbd_block_status_id_encode(uint32_t id, struct nbd_chunk_block_status_wire *w);
uint32_t nbd_block_status_id_decode(const struct nbd_chunk_block_status_wire *w);

/* Builds a complete error chunk (header + payload) into buf, for
 * NBD_REPLY_TYPE_ERROR (has_offset false) or NBD_REPLY_TYPE_ERROR_OFFSET.
 * msg may be NULL; it is truncated to fit.  Returns the total length,
 * or -ENOSPC if even an empty message does not fit. */
int nbd_error_chunk_build(void *buf, size_t size, uint64_t cookie, uint16_t flags,
			  uint32_t error, const char *msg, int has_offset,
			  uint64_t offset);
/* The same with an extended chunk header carrying req_offset (the
 * request's offset). */
int nbd_ext_error_chunk_build(void *buf, size_t size, uint64_t cookie, uint64_t req_offset,
			      uint16_t flags, uint32_t error, const char *msg, int has_offset,
			      uint64_t offset);
/* Parses an error chunk payload.  msg (optional) receives a NUL-terminated
 * copy, truncated to msg_size.  Returns -EPROTO if inconsistent. */
int nbd_error_chunk_parse(const void *payload, size_t len, uint16_t type,
			  uint32_t *error, char *msg, size_t msg_size,
			  uint64_t *offset);

/* Maps an errno value (positive) to the NBD error to put on the wire. */
uint32_t nbd_errno_to_wire(int err);
/* Maps an NBD error from the wire to -errno (one the spec does not define:
 * -EINVAL, as the spec says; so is 0 in an error chunk, which must carry
 * an error).  The one mapping of both clients. */
int nbd_wire_to_errno(uint32_t error);
/* Names for logs. */
const char *nbd_cmd_name(uint16_t type);
const char *nbd_opt_name(uint32_t option);
const char *nbd_rep_name(uint32_t type);

#endif
