/* SPDX-License-Identifier: BSD-3-Clause */
/* smcrbd: TLS on a transport (server side), for NBD's STARTTLS. */
#ifndef SMCRBD_TRANSPORT_TLS_H
#define SMCRBD_TRANSPORT_TLS_H

#include <stdbool.h>
#include <stddef.h>

#include "transport.h"

/* Server credentials: X.509 from cert_dir as nbdkit lays it out
 * (server-cert.pem, server-key.pem, optional ca-cert.pem), or, when
 * psk_file is set, pre-shared keys from it (psktool's username:hexkey
 * lines).  -errno with err saying why. */
struct bd_tls;
int bd_tls_server_new(const char *cert_dir, const char *psk_file, struct bd_tls **out,
		      char *err, size_t errlen);
void bd_tls_free(struct bd_tls *c);

/* Runs the TLS handshake (server side) on t, waiting as bd_wait() does,
 * and turns t into a TLS stream in place: the same pointer, its readv and
 * writev now encrypted, bd_close() ends both.  On failure t is unchanged
 * (but its stream is unusable). */
int bd_tls_upgrade(struct bd_transport *t, struct bd_tls *c, int timeout_ms, int cancel_fd);
bool bd_tls_active(const struct bd_transport *t);

#endif
