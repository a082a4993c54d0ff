/* smcrbd: the SMC-R transport (libsmcr underneath). */
#ifndef SMCRBD_TRANSPORT_SMCR_H
#define SMCRBD_TRANSPORT_SMCR_H

#include "smcr.h"
#include "transport.h"

/* Wraps a connected libsmcr socket (SMC-R, or fallen back to TCP); takes
 * ownership of s on success. */
int bd_smcr_transport_new(struct smcr_sock *s, struct bd_transport **out);
/* Connects to host:port through ctx (CLC first, TCP fallback automatic). */
int bd_smcr_connect(struct smcr_ctx *ctx, const char *host, const char *port,
		    struct bd_transport **out);
/* The libsmcr socket under an SMC-R transport, or NULL for others. */
struct smcr_sock *bd_smcr_sock(struct bd_transport *t);

#endif
