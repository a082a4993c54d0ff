/* SPDX-License-Identifier: BSD-3-Clause */
/* smcrbd: the SMC-R transport (libsmcr underneath). */
#ifndef SMCRBD_TRANSPORT_SMCR_H
#define SMCRBD_TRANSPORT_SMCR_H

#include "smcr.h"
#include "transport.h"

/* Wraps a connected libsmcr socket; takes ownership of s on success.  A
 * socket that fell back to TCP becomes a TCP transport (s is closed). */
int bd_smcr_transport_new(struct smcr_sock *s, struct bd_transport **out);
/* Connects to host:port through ctx (CLC first, TCP fallback automatic);
 * each address's TCP connect gives up after timeout_ms (< 0: never). */
int bd_smcr_connect(struct smcr_ctx *ctx, const char *host, const char *port,
		    int timeout_ms, struct bd_transport **out);
#endif
