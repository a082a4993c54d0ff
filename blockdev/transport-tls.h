/* SPDX-License-Identifier: BSD-3-Clause */
/* smcrbd: TLS on a transport (both sides), for NBD's STARTTLS. */
#ifndef SMCRBD_TRANSPORT_TLS_H
#define SMCRBD_TRANSPORT_TLS_H

#include <stdbool.h>
#include <stddef.h>

#include "transport.h"

/* Server credentials: X.509 from cert_dir as nbdkit lays it out
 * (server-cert.pem, server-key.pem, optional ca-cert.pem), or, when
 * psk_file is set, pre-shared keys from it (psktool's username:hexkey
 * lines).  verify_peer: BD_TLS_VERIFY_AUTO requires and verifies a client
 * certificate when there is a ca-cert.pem, _ON requires a ca-cert.pem,
 * _OFF asks for a certificate only to log its name (never trusted).
 * -errno with err saying why. */
enum { BD_TLS_VERIFY_AUTO = -1, BD_TLS_VERIFY_OFF = 0, BD_TLS_VERIFY_ON = 1 };
struct bd_tls;
int bd_tls_server_new(const char *cert_dir, const char *psk_file, int verify_peer,
		      struct bd_tls **out, char *err, size_t errlen);
/* True if clients' certificates are verified (a CA and verify_peer on). */
bool bd_tls_verifies_peer(const struct bd_tls *c);
void bd_tls_free(struct bd_tls *c);

/* Runs the TLS handshake (server side) on t, all of it within timeout_ms
 * (< 0: no limit) however the peer trickles its bytes, and turns t into a TLS stream in place: the same pointer, its readv and
 * writev now encrypted, bd_close() ends both.  On failure t is unchanged
 * (but its stream is unusable). */
int bd_tls_upgrade(struct bd_transport *t, struct bd_tls *c, int timeout_ms, int cancel_fd);
/* The client's authenticated name on an upgraded t: the common name (or,
 * without one, the DN) of its verified certificate, or its PSK identity;
 * NULL if none. */
const char *bd_tls_peer_name(const struct bd_transport *t);

/* --- the client side ---------------------------------------------------------
 * Credentials named as libnbd names them: certificates is a directory
 * with ca-cert.pem (the CA that signed the server's certificate) and,
 * optionally, client-cert.pem and client-key.pem; NULL: the system's
 * trusted CAs.  psk_file: psktool's username:hexkey lines, the key of
 * username (NULL: the login name) is used.  verify_peer: the server's
 * certificate must be signed by a trusted CA and name hostname. */
struct bd_tls_client_opts {
	const char *certificates;
	const char *psk_file;
	const char *username;
	const char *hostname;
	bool verify_peer;
};
struct bd_tls_client;
int bd_tls_client_new(const struct bd_tls_client_opts *o, struct bd_tls_client **out,
		      char *err, size_t errlen);
void bd_tls_client_free(struct bd_tls_client *c);
/* The client's handshake on t (after the server acknowledged
 * NBD_OPT_STARTTLS), as bd_tls_upgrade().  -EKEYREJECTED: the server's
 * certificate is not trusted; -ENOKEY: the server ended the handshake
 * (refused our credentials, mostly); other -errno.  err says why. */
int bd_tls_client_upgrade(struct bd_transport *t, struct bd_tls_client *c, int timeout_ms,
			  int cancel_fd, char *err, size_t errlen);

#endif
