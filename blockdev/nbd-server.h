/* SPDX-License-Identifier: BSD-3-Clause */
/* smcrbd: the server half of NBD, independent of how requests are executed.
 *
 *  - nbd_server_handshake(): fixed newstyle negotiation over a transport
 *    (blocking, with timeouts), ending in the transmission phase or not;
 *  - nbd_request_check(): validation of one request against the export;
 *  - nbd_reply_build(): the bytes of a reply (simple or structured,
 *    successes, error chunks with offsets, partial reads).
 *
 * The smcrd engine (server/) does the I/O in between. */
#ifndef SMCRBD_NBD_SERVER_H
#define SMCRBD_NBD_SERVER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "nbd-wire.h"
#include "transport.h"

/* What the handshake tells a client about an export. */
struct nbd_server_export {
	const char *name;		/* canonical name */
	const char *description;	/* may be NULL */
	uint64_t size;
	uint16_t tflags;		/* without NBD_FLAG_SEND_DF (added when
					 * structured replies are on) */
	uint32_t min_block;		/* power of two, 1..65536 */
	uint32_t pref_block;
	uint32_t max_payload;
};

/* Callbacks into the daemon.  lookup returns 0 and a handle that the
 * caller owns (released with release), -ENOENT for an unknown export,
 * -EACCES if this client may not use it. */
struct nbd_server_ops {
	int (*lookup)(void *ctx, const char *name, struct nbd_server_export *out,
		      void **handle);
	void (*release)(void *ctx, void *handle);
	/* Calls cb for every export this client may see; stops at the first
	 * negative return of cb and returns it. */
	int (*list)(void *ctx, int (*cb)(void *arg, const char *name, const char *desc),
		    void *arg);
	/* True once the server is shutting down. */
	bool (*shutting_down)(void *ctx);
	/* Optional: a message for policy refusals (e.g. "too many clients");
	 * when set, every option that would select an export is refused
	 * with NBD_REP_ERR_POLICY and this text. */
	const char *(*refusal)(void *ctx);
	/* Optional: TLS (NBD_OPT_STARTTLS).  tls_mode says NBD_TLS_OFF (not
	 * offered), NBD_TLS_ON (at the client's choice) or NBD_TLS_REQUIRE
	 * (every option but STARTTLS and ABORT refused with
	 * NBD_REP_ERR_TLS_REQD until the upgrade); starttls upgrades t in
	 * place after the ACK (0, or -errno: the session ends). */
	int (*tls_mode)(void *ctx);
	int (*starttls)(void *ctx, struct bd_transport *t, int timeout_ms, int cancel_fd);
};

enum { NBD_TLS_OFF = 0, NBD_TLS_ON = 1, NBD_TLS_REQUIRE = 2 };

struct nbd_handshake_limits {
	int timeout_ms;			/* per read/write; < 0: none */
	int total_ms;			/* whole handshake; <= 0: none */
	int cancel_fd;			/* readable: stop waiting; -1: none */
	unsigned max_options;		/* options per session before hangup */
};

/* Result of a successful handshake. */
struct nbd_server_session {
	void *handle;			/* from ops->lookup, owned by caller */
	struct nbd_server_export exp;
	uint16_t tflags;		/* as sent to the client */
	bool structured;		/* also true with extended */
	bool extended;			/* NBD_OPT_EXTENDED_HEADERS */
	bool no_zeroes;
	bool fixed_newstyle;
	bool block_size_ack;		/* client asked for NBD_INFO_BLOCK_SIZE */
	bool base_allocation;		/* base:allocation selected for this export
					 * (NBD_META_ID_BASE_ALLOCATION) */
	bool tls;			/* upgraded by NBD_OPT_STARTTLS */
};

/* Runs the handshake.  0: transmission phase with *out filled in.
 * -ECONNABORTED: the client aborted or hung up; -EPROTO: the client broke
 * the protocol; -ENOENT/-EACCES: NBD_OPT_EXPORT_NAME for an unknown or
 * forbidden export; -ESHUTDOWN, -ETIMEDOUT, -ECANCELED, other -errno. */
int nbd_server_handshake(struct bd_transport *t, const struct nbd_server_ops *ops,
			 void *ctx, const struct nbd_handshake_limits *lim,
			 struct nbd_server_session *out);

/* --- transmission phase ------------------------------------------------ */

struct nbd_tx_params {
	uint64_t size;
	uint16_t tflags;		/* as sent */
	bool structured;		/* chunks, not simple replies (for READ) */
	bool extended;			/* 32-byte headers both ways, 64-bit lengths */
	bool base_allocation;		/* NBD_CMD_BLOCK_STATUS allowed */
	uint32_t min_block;
	uint32_t max_payload;
};

/* Most descriptors in one NBD_CMD_BLOCK_STATUS reply (the client asks
 * again for the rest). */
#define NBD_BS_MAX_EXTENTS	512
/* Most bytes one NBD_CMD_BLOCK_STATUS reply describes: an extended
 * request's effect length is cut to this (the extents are 32-bit), which
 * the spec allows (the client asks again from where the reply ends). */
#define NBD_BS_MAX_LENGTH(min_block)	((UINT64_C(1) << 32) - (min_block))

void nbd_tx_params_from_session(const struct nbd_server_session *s, struct nbd_tx_params *p);

/* Checks one decoded request.  Returns 0 if it may be executed, or the NBD
 * error to reply with (NBD_EINVAL, NBD_EPERM, NBD_ENOSPC, NBD_EOVERFLOW),
 * with *msg pointing to a static explanation.  Whatever the verdict, the
 * request's payload (nbd_request_payload() bytes) follows on the wire and
 * must be read or skipped.  NBD_CMD_DISC is valid (the caller ends the session). */
uint32_t nbd_request_check(const struct nbd_tx_params *p, const struct nbd_request *r,
			   const char **msg);

/* Bytes of a request header: 32 with extended headers, else 28. */
size_t nbd_request_hdr_len(const struct nbd_tx_params *p);
/* Decodes the request header at buf (nbd_request_hdr_len() bytes). */
int nbd_request_parse(const struct nbd_tx_params *p, const void *buf, struct nbd_request *r);
/* Payload bytes that follow the header on the wire: a compact WRITE's
 * length; with extended headers the length of a request flagged
 * NBD_CMD_FLAG_PAYLOAD_LEN (whatever the command), else none. */
uint64_t nbd_request_payload(const struct nbd_tx_params *p, const struct nbd_request *r);
/* True when the request must end the connection rather than get an
 * error reply: an extended request announcing a payload larger than the
 * maximum payload (the spec's hard disconnect; no byte of it is read). */
bool nbd_request_hangup(const struct nbd_tx_params *p, const struct nbd_request *r,
			const char **msg);

/* Wire bytes of a reply around the data: head, then data_len bytes of
 * data (READ only), then tail. */
#define NBD_REPLY_MSG_MAX	96
#define NBD_REPLY_PART_MAX	(sizeof(struct nbd_ext_chunk_wire) + \
				 sizeof(struct nbd_chunk_error_wire) + \
				 NBD_REPLY_MSG_MAX + 8)
struct nbd_reply_buf {
	uint8_t head[NBD_REPLY_PART_MAX];
	uint8_t tail[NBD_REPLY_PART_MAX];
	uint16_t head_len;
	uint16_t tail_len;
	uint32_t data_len;
};

/* No offset for an error. */
#define NBD_NO_OFFSET	UINT64_MAX

/* Builds the reply to r.
 *  error == 0: success; for READ, data_len must equal r->length; for
 *    BLOCK_STATUS, data_len is the size of the descriptors that follow
 *    the head (n * 8 from nbd_extents_encode(), or with extended headers
 *    n * 16 from nbd_extents_ext_encode()).
 *  error != 0: for READ, data_len good bytes (from r->offset) may precede
 *    the error (structured replies only; simple replies carry no data on
 *    error); err_offset is the absolute offset of the failure or
 *    NBD_NO_OFFSET; msg is optional text for structured error chunks. */
void nbd_reply_build(const struct nbd_tx_params *p, const struct nbd_request *r,
		     uint32_t error, uint32_t data_len, uint64_t err_offset,
		     const char *msg, struct nbd_reply_buf *out);

/* The reply to a READ whose data is sent while it is still being read
 * (e.g. sendfile): an error can only end the connection, so a structured
 * reply is a data chunk without NBD_REPLY_FLAG_DONE and a final NONE
 * chunk (tail); a simple reply is the plain success header. */
void nbd_reply_build_read_stream(const struct nbd_tx_params *p, const struct nbd_request *r,
				 struct nbd_reply_buf *out);

#endif
