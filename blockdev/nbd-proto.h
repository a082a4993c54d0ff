/* SPDX-License-Identifier: BSD-3-Clause */
/* smcrbd: NBD protocol constants (doc/proto.md of the NBD project).
 *
 * Only numbers live here; the byte layout of every message is in
 * nbd-wire.h and the codecs in nbd-wire.c are the only code that touches
 * network byte order. */
#ifndef SMCRBD_NBD_PROTO_H
#define SMCRBD_NBD_PROTO_H

#include <stdint.h>

#define NBD_DEFAULT_PORT		10809

/* Magic numbers. */
#define NBD_MAGIC			UINT64_C(0x4e42444d41474943) /* "NBDMAGIC" */
#define NBD_IHAVEOPT			UINT64_C(0x49484156454f5054) /* "IHAVEOPT" */
#define NBD_OPT_REPLY_MAGIC		UINT64_C(0x0003e889045565a9)
#define NBD_REQUEST_MAGIC		UINT32_C(0x25609513)
#define NBD_SIMPLE_REPLY_MAGIC		UINT32_C(0x67446698)
#define NBD_STRUCTURED_REPLY_MAGIC	UINT32_C(0x668e33ef)
#define NBD_EXTENDED_REQUEST_MAGIC	UINT32_C(0x21e41c71)
#define NBD_EXTENDED_REPLY_MAGIC	UINT32_C(0x6e8a278c)

/* Handshake flags (server, 16 bits). */
#define NBD_FLAG_FIXED_NEWSTYLE		(1u << 0)
#define NBD_FLAG_NO_ZEROES		(1u << 1)

/* Client flags (32 bits). */
#define NBD_FLAG_C_FIXED_NEWSTYLE	(1u << 0)
#define NBD_FLAG_C_NO_ZEROES		(1u << 1)

/* Transmission flags (16 bits). */
#define NBD_FLAG_HAS_FLAGS		(1u << 0)
#define NBD_FLAG_READ_ONLY		(1u << 1)
#define NBD_FLAG_SEND_FLUSH		(1u << 2)
#define NBD_FLAG_SEND_FUA		(1u << 3)
#define NBD_FLAG_ROTATIONAL		(1u << 4)
#define NBD_FLAG_SEND_TRIM		(1u << 5)
#define NBD_FLAG_SEND_WRITE_ZEROES	(1u << 6)
#define NBD_FLAG_SEND_DF		(1u << 7)
#define NBD_FLAG_CAN_MULTI_CONN		(1u << 8)
#define NBD_FLAG_SEND_RESIZE		(1u << 9)
#define NBD_FLAG_SEND_CACHE		(1u << 10)
#define NBD_FLAG_SEND_FAST_ZERO		(1u << 11)

/* Options. */
#define NBD_OPT_EXPORT_NAME		1
#define NBD_OPT_ABORT			2
#define NBD_OPT_LIST			3
#define NBD_OPT_STARTTLS		5
#define NBD_OPT_INFO			6
#define NBD_OPT_GO			7
#define NBD_OPT_STRUCTURED_REPLY	8
#define NBD_OPT_LIST_META_CONTEXT	9
#define NBD_OPT_SET_META_CONTEXT	10
#define NBD_OPT_EXTENDED_HEADERS	11

/* Option reply types. */
#define NBD_REP_ACK			1
#define NBD_REP_SERVER			2
#define NBD_REP_INFO			3
#define NBD_REP_META_CONTEXT		4
#define NBD_REP_FLAG_ERROR		(UINT32_C(1) << 31)
#define NBD_REP_ERR_UNSUP		(NBD_REP_FLAG_ERROR | 1)
#define NBD_REP_ERR_POLICY		(NBD_REP_FLAG_ERROR | 2)
#define NBD_REP_ERR_INVALID		(NBD_REP_FLAG_ERROR | 3)
#define NBD_REP_ERR_PLATFORM		(NBD_REP_FLAG_ERROR | 4)
#define NBD_REP_ERR_TLS_REQD		(NBD_REP_FLAG_ERROR | 5)
#define NBD_REP_ERR_UNKNOWN		(NBD_REP_FLAG_ERROR | 6)
#define NBD_REP_ERR_SHUTDOWN		(NBD_REP_FLAG_ERROR | 7)
#define NBD_REP_ERR_BLOCK_SIZE_REQD	(NBD_REP_FLAG_ERROR | 8)
#define NBD_REP_ERR_TOO_BIG		(NBD_REP_FLAG_ERROR | 9)
#define NBD_REP_ERR_EXT_HEADER_REQD	(NBD_REP_FLAG_ERROR | 10)

/* NBD_REP_INFO types. */
#define NBD_INFO_EXPORT			0
#define NBD_INFO_NAME			1
#define NBD_INFO_DESCRIPTION		2
#define NBD_INFO_BLOCK_SIZE		3

/* Commands. */
#define NBD_CMD_READ			0
#define NBD_CMD_WRITE			1
#define NBD_CMD_DISC			2
#define NBD_CMD_FLUSH			3
#define NBD_CMD_TRIM			4
#define NBD_CMD_CACHE			5
#define NBD_CMD_WRITE_ZEROES		6
#define NBD_CMD_BLOCK_STATUS		7

/* Command flags. */
#define NBD_CMD_FLAG_FUA		(1u << 0)
#define NBD_CMD_FLAG_NO_HOLE		(1u << 1)
#define NBD_CMD_FLAG_DF			(1u << 2)
#define NBD_CMD_FLAG_REQ_ONE		(1u << 3)
#define NBD_CMD_FLAG_FAST_ZERO		(1u << 4)
#define NBD_CMD_FLAG_PAYLOAD_LEN	(1u << 5)	/* extended headers only */

/* Structured reply flags and chunk types. */
#define NBD_REPLY_FLAG_DONE		(1u << 0)
#define NBD_REPLY_TYPE_NONE		0
#define NBD_REPLY_TYPE_OFFSET_DATA	1
#define NBD_REPLY_TYPE_OFFSET_HOLE	2
#define NBD_REPLY_TYPE_BLOCK_STATUS	5
#define NBD_REPLY_TYPE_BLOCK_STATUS_EXT	6	/* extended headers only */
#define NBD_REPLY_TYPE_ERROR		((1u << 15) | 1)
#define NBD_REPLY_TYPE_ERROR_OFFSET	((1u << 15) | 2)
#define NBD_REPLY_TYPE_IS_ERR(t)	(((t) & (1u << 15)) != 0)

/* Metadata contexts: the one the spec defines, its status flags, and the
 * ID smcrd gives it (any value is valid; clients take it from the reply). */
#define NBD_META_BASE_ALLOCATION	"base:allocation"
#define NBD_META_ID_BASE_ALLOCATION	1
#define NBD_STATE_HOLE			(1u << 0)
#define NBD_STATE_ZERO			(1u << 1)

/* Error values on the wire (they equal the Linux errno values). */
#define NBD_SUCCESS			0
#define NBD_EPERM			1
#define NBD_EIO				5
#define NBD_ENOMEM			12
#define NBD_EINVAL			22
#define NBD_ENOSPC			28
#define NBD_EOVERFLOW			75
#define NBD_ENOTSUP			95
#define NBD_ESHUTDOWN			108

/* Limits. */
#define NBD_MAX_STRING			4096		/* names, messages */
#define NBD_MAX_PAYLOAD			(32u << 20)	/* 2^25, never a DoS */
#define NBD_MAX_OPTION_LEN		(64u << 10)	/* option data we accept */
#define NBD_EXPORT_NAME_ZEROES		124

#endif
