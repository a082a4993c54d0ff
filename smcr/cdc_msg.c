/* SPDX-License-Identifier: BSD-3-Clause */
/* smcrbd: CDC message codec (RFC 7609 A.4). */
#include <config.h>

#include <string.h>

#include "byteorder.h"
#include "msg.h"
#include "wire.h"

int smcr_cdc_decode(const void *buf, size_t len, struct smcr_cdc_msg *msg)
{
	struct smcr_wire_cdc w;

	memset(msg, 0, sizeof(*msg));
	if (len < sizeof(w))
		return SMCR_E_TRUNC;
	memcpy(&w, buf, sizeof(w));
	if (w.type != SMCR_CDC_TYPE)
		return SMCR_E_NOTTYPE;
	if (w.length != SMCR_CDC_LEN)
		return SMCR_E_LENGTH;
	msg->seqno = be16toh(w.seqno);
	msg->token = be32toh(w.token);
	msg->prod.wrap = be16toh(w.prod.wrap);
	msg->prod.count = be32toh(w.prod.count);
	msg->cons.wrap = be16toh(w.cons.wrap);
	msg->cons.count = be32toh(w.cons.count);
	msg->writer_blocked = (w.prod_flags & SMCR_CDC_WRITER_BLOCKED) != 0;
	msg->urg_pending = (w.prod_flags & SMCR_CDC_URG_PENDING) != 0;
	msg->urg_present = (w.prod_flags & SMCR_CDC_URG_PRESENT) != 0;
	msg->cons_update_req = (w.prod_flags & SMCR_CDC_CONS_UPDATE_REQ) != 0;
	msg->failover_validation = (w.prod_flags & SMCR_CDC_FAILOVER_VALIDATION) != 0;
	msg->peer_done_writing = (w.conn_state & SMCR_CDC_PEER_DONE_WRITING) != 0;
	msg->peer_conn_closed = (w.conn_state & SMCR_CDC_PEER_CONN_CLOSED) != 0;
	msg->peer_abort = (w.conn_state & SMCR_CDC_PEER_ABORT) != 0;
	return SMCR_CDC_LEN;
}

int smcr_cdc_encode(const struct smcr_cdc_msg *msg, void *buf, size_t len)
{
	struct smcr_wire_cdc w;

	if (len < sizeof(w))
		return SMCR_E_NOSPC;
	memset(&w, 0, sizeof(w));
	w.type = SMCR_CDC_TYPE;
	w.length = SMCR_CDC_LEN;
	w.seqno = htobe16(msg->seqno);
	w.token = htobe32(msg->token);
	w.prod.wrap = htobe16(msg->prod.wrap);
	w.prod.count = htobe32(msg->prod.count);
	w.cons.wrap = htobe16(msg->cons.wrap);
	w.cons.count = htobe32(msg->cons.count);
	w.prod_flags = (uint8_t)((msg->writer_blocked ? SMCR_CDC_WRITER_BLOCKED : 0) |
				 (msg->urg_pending ? SMCR_CDC_URG_PENDING : 0) |
				 (msg->urg_present ? SMCR_CDC_URG_PRESENT : 0) |
				 (msg->cons_update_req ? SMCR_CDC_CONS_UPDATE_REQ : 0) |
				 (msg->failover_validation ? SMCR_CDC_FAILOVER_VALIDATION : 0));
	w.conn_state = (uint8_t)((msg->peer_done_writing ? SMCR_CDC_PEER_DONE_WRITING : 0) |
				 (msg->peer_conn_closed ? SMCR_CDC_PEER_CONN_CLOSED : 0) |
				 (msg->peer_abort ? SMCR_CDC_PEER_ABORT : 0));
	memcpy(buf, &w, sizeof(w));
	return SMCR_CDC_LEN;
}
