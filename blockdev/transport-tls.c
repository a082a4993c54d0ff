/* SPDX-License-Identifier: BSD-3-Clause */
/* smcrbd: TLS (GnuTLS) on a transport, upgraded in place (NBD STARTTLS).
 *
 * bd_tls_upgrade() runs the TLS handshake over the transport's own ops and
 * then swaps its ops for the ones here: the same struct bd_transport, its
 * bytes now encrypted.  GnuTLS reads and writes through the saved inner
 * ops (non-blocking: EAGAIN goes back up as -EAGAIN).
 *
 * readv reads records until the caller's buffers are full or the socket
 * is empty, so a short read means "poll before reading again" as for TCP.
 * A record that could not be sent whole is kept by GnuTLS: writev then
 * says -EAGAIN (or counts only what went before), and the next writev,
 * which starts with the same bytes, flushes it and counts it. */
#include <config.h>

#include <errno.h>
#include <poll.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <pwd.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <sys/stat.h>
#include <time.h>

#include <gnutls/gnutls.h>
#include <gnutls/x509.h>
#include <dlfcn.h>
#include <pthread.h>

#include "applog.h"
#include "dlsyms.h"
#include "lograte.h"
#include "monotime.h"
#include "transport-tls.h"

/* GnuTLS is loaded when TLS is first asked for (bd_tls_server_new,
 * bd_tls_client_new), not when the program starts: its library and the
 * eight it needs cost an exec more than everything else it links (on a
 * slow guest, hundreds of milliseconds for a program that never uses
 * TLS).  Every GnuTLS function used here is called through gt, which
 * tls_load() fills from GNUTLS_SONAME with the types of the headers. */
#define GNUTLS_FUNCTIONS \
	X(gnutls_alert_get) \
	X(gnutls_alert_get_name) \
	X(gnutls_auth_get_type) \
	X(gnutls_bye) \
	X(gnutls_certificate_allocate_credentials) \
	X(gnutls_certificate_free_credentials) \
	X(gnutls_certificate_get_peers) \
	X(gnutls_certificate_server_set_request) \
	X(gnutls_certificate_set_x509_key_file) \
	X(gnutls_certificate_set_x509_system_trust) \
	X(gnutls_certificate_set_x509_trust_file) \
	X(gnutls_certificate_verification_status_print) \
	X(gnutls_certificate_verify_peers2) \
	X(gnutls_credentials_set) \
	X(gnutls_deinit) \
	X(gnutls_handshake) \
	X(gnutls_init) \
	X(gnutls_priority_deinit) \
	X(gnutls_priority_init) \
	X(gnutls_priority_set) \
	X(gnutls_psk_allocate_client_credentials) \
	X(gnutls_psk_allocate_server_credentials) \
	X(gnutls_psk_free_client_credentials) \
	X(gnutls_psk_free_server_credentials) \
	X(gnutls_psk_server_get_username) \
	X(gnutls_psk_set_client_credentials) \
	X(gnutls_psk_set_server_credentials_file) \
	X(gnutls_record_get_direction) \
	X(gnutls_record_recv) \
	X(gnutls_record_send) \
	X(gnutls_server_name_set) \
	X(gnutls_session_get_desc) \
	X(gnutls_session_get_verify_cert_status) \
	X(gnutls_session_set_verify_cert) \
	X(gnutls_strerror) \
	X(gnutls_transport_set_errno) \
	X(gnutls_transport_set_ptr) \
	X(gnutls_transport_set_pull_function) \
	X(gnutls_transport_set_pull_timeout_function) \
	X(gnutls_transport_set_vec_push_function) \
	X(gnutls_x509_crt_deinit) \
	X(gnutls_x509_crt_get_dn3) \
	X(gnutls_x509_crt_get_dn_by_oid) \
	X(gnutls_x509_crt_import) \
	X(gnutls_x509_crt_init) \

static struct {
#define X(f) __typeof__(f) *f;
	GNUTLS_FUNCTIONS
#undef X
	gnutls_free_function *free_fn;
} gt;
static pthread_once_t gt_once = PTHREAD_ONCE_INIT;
static char gt_error[256];

static void gt_load(void)
{
	const struct dl_sym syms[] = {
#define X(f) { #f, (void **)&gt.f },
		GNUTLS_FUNCTIONS
#undef X
		{ "gnutls_free", (void **)&gt.free_fn },
	};
	char why[200];

	if (dl_load(GNUTLS_SONAME, RTLD_NOW | RTLD_LOCAL, syms, sizeof(syms) / sizeof(syms[0]),
		    why, sizeof(why)) < 0)
		snprintf(gt_error, sizeof(gt_error), "TLS needs GnuTLS: %s", why);
}

/* 0 once GnuTLS is loaded, or -ENOTSUP with why in err. */
static int tls_load(char *err, size_t errlen)
{
	pthread_once(&gt_once, gt_load);
	if (gt_error[0]) {
		snprintf(err, errlen, "%s", gt_error);
		return -ENOTSUP;
	}
	return 0;
}


/* From here on, every GnuTLS call goes through gt. */
#define gnutls_alert_get gt.gnutls_alert_get
#define gnutls_alert_get_name gt.gnutls_alert_get_name
#define gnutls_auth_get_type gt.gnutls_auth_get_type
#define gnutls_bye gt.gnutls_bye
#define gnutls_certificate_allocate_credentials gt.gnutls_certificate_allocate_credentials
#define gnutls_certificate_free_credentials gt.gnutls_certificate_free_credentials
#define gnutls_certificate_get_peers gt.gnutls_certificate_get_peers
#define gnutls_certificate_server_set_request gt.gnutls_certificate_server_set_request
#define gnutls_certificate_set_x509_key_file gt.gnutls_certificate_set_x509_key_file
#define gnutls_certificate_set_x509_system_trust gt.gnutls_certificate_set_x509_system_trust
#define gnutls_certificate_set_x509_trust_file gt.gnutls_certificate_set_x509_trust_file
#define gnutls_certificate_verification_status_print gt.gnutls_certificate_verification_status_print
#define gnutls_certificate_verify_peers2 gt.gnutls_certificate_verify_peers2
#define gnutls_credentials_set gt.gnutls_credentials_set
#define gnutls_deinit gt.gnutls_deinit
#define gnutls_handshake gt.gnutls_handshake
#define gnutls_init gt.gnutls_init
#define gnutls_priority_deinit gt.gnutls_priority_deinit
#define gnutls_priority_init gt.gnutls_priority_init
#define gnutls_priority_set gt.gnutls_priority_set
#define gnutls_psk_allocate_client_credentials gt.gnutls_psk_allocate_client_credentials
#define gnutls_psk_allocate_server_credentials gt.gnutls_psk_allocate_server_credentials
#define gnutls_psk_free_client_credentials gt.gnutls_psk_free_client_credentials
#define gnutls_psk_free_server_credentials gt.gnutls_psk_free_server_credentials
#define gnutls_psk_server_get_username gt.gnutls_psk_server_get_username
#define gnutls_psk_set_client_credentials gt.gnutls_psk_set_client_credentials
#define gnutls_psk_set_server_credentials_file gt.gnutls_psk_set_server_credentials_file
#define gnutls_record_get_direction gt.gnutls_record_get_direction
#define gnutls_record_recv gt.gnutls_record_recv
#define gnutls_record_send gt.gnutls_record_send
#define gnutls_server_name_set gt.gnutls_server_name_set
#define gnutls_session_get_desc gt.gnutls_session_get_desc
#define gnutls_session_get_verify_cert_status gt.gnutls_session_get_verify_cert_status
#define gnutls_session_set_verify_cert gt.gnutls_session_set_verify_cert
#define gnutls_strerror gt.gnutls_strerror
#define gnutls_transport_set_errno gt.gnutls_transport_set_errno
#define gnutls_transport_set_ptr gt.gnutls_transport_set_ptr
#define gnutls_transport_set_pull_function gt.gnutls_transport_set_pull_function
#define gnutls_transport_set_pull_timeout_function gt.gnutls_transport_set_pull_timeout_function
#define gnutls_transport_set_vec_push_function gt.gnutls_transport_set_vec_push_function
#define gnutls_x509_crt_deinit gt.gnutls_x509_crt_deinit
#define gnutls_x509_crt_get_dn3 gt.gnutls_x509_crt_get_dn3
#define gnutls_x509_crt_get_dn_by_oid gt.gnutls_x509_crt_get_dn_by_oid
#define gnutls_x509_crt_import gt.gnutls_x509_crt_import
#define gnutls_x509_crt_init gt.gnutls_x509_crt_init
#undef gnutls_free
#define gnutls_free(a) ((*gt.free_fn)((void *)(a)), (a) = NULL)

#define TLS_CHUNK	16384		/* plaintext per record */

/* A line about one client's TLS session, rate-limited (lograte.h). */
#define tls_log(t, ...) log_rated(LOGRATE_TLS, (t)->peer, SMCR_LOG_INFO, __VA_ARGS__)

struct bd_tls {
	gnutls_certificate_credentials_t x509;
	gnutls_psk_server_credentials_t psk;
	gnutls_priority_t prio;
	bool verify;			/* require and verify client certificates */
};

struct tls_state {
	const struct bd_transport_ops *inner;
	gnutls_session_t s;
	size_t pending;			/* plaintext of a record GnuTLS holds */
	char *peer_name;		/* authenticated client name, or NULL */
	int64_t deadline;		/* handshake, ms CLOCK_MONOTONIC; 0: none */
	uint8_t buf[TLS_CHUNK];		/* small pieces gathered */
};

/* The ops of every upgraded transport; its state hangs off t->tls. */
static const struct bd_transport_ops tls_ops;

static struct tls_state *st(struct bd_transport *t)
{
	return t->tls;
}

/* --- GnuTLS's I/O, through the inner ops ----------------------------------- */

static ssize_t vec_push(gnutls_transport_ptr_t p, const giovec_t *iov, int cnt)
{
	struct bd_transport *t = p;
	const struct bd_transport_ops *in = t->ops == &tls_ops ? st(t)->inner : t->ops;
	ssize_t n = in->writev(t, (const struct iovec *)iov, cnt);

	if (n >= 0)
		return n;
	gnutls_transport_set_errno(st(t)->s, (int)-n);
	return -1;
}

static ssize_t pull(gnutls_transport_ptr_t p, void *buf, size_t len)
{
	struct bd_transport *t = p;
	const struct bd_transport_ops *in = t->ops == &tls_ops ? st(t)->inner : t->ops;
	struct iovec iov = { .iov_base = buf, .iov_len = len };
	ssize_t n = in->readv(t, &iov, 1);

	if (n >= 0)
		return n;
	gnutls_transport_set_errno(st(t)->s, (int)-n);
	return -1;
}

/* What is left of the handshake's time: -1 without a deadline. */
static int left_ms(const struct tls_state *ts)
{
	int64_t left;

	if (!ts->deadline)
		return -1;
	left = ts->deadline - now_ms();
	return left > 0 ? (left > INT32_MAX ? INT32_MAX : (int)left) : 0;
}

/* GnuTLS's own waits: never past the handshake's deadline. */
static int pull_timeout(gnutls_transport_ptr_t p, unsigned int ms)
{
	struct bd_transport *t = p;
	const struct bd_transport_ops *in = t->ops == &tls_ops ? st(t)->inner : t->ops;
	struct pollfd pfd = { .fd = in->poll_fd(t), .events = in->poll_events(t, BD_WANT_READ) };
	int wait = ms == GNUTLS_INDEFINITE_TIMEOUT ? -1 : (int)ms;
	int left = t->ops == &tls_ops ? -1 : left_ms(st(t));

	if (left >= 0 && (wait < 0 || wait > left))
		wait = left;
	return poll(&pfd, 1, wait);
}

static int tls_errno(int r)
{
	switch (r) {
	case GNUTLS_E_AGAIN:
		return -EAGAIN;
	case GNUTLS_E_INTERRUPTED:
		return -EINTR;
	case GNUTLS_E_PREMATURE_TERMINATION:
	case GNUTLS_E_PUSH_ERROR:
	case GNUTLS_E_PULL_ERROR:
		return -ECONNRESET;
	default:
		return -EPROTO;
	}
}

/* --- the upgraded transport ------------------------------------------------ */

static ssize_t tls_readv(struct bd_transport *t, const struct iovec *iov, int cnt)
{
	struct tls_state *ts = st(t);
	size_t total = 0;
	int i;

	for (i = 0; i < cnt; i++) {
		size_t off = 0;

		while (off < iov[i].iov_len) {
			ssize_t r = gnutls_record_recv(ts->s, (uint8_t *)iov[i].iov_base + off,
						       iov[i].iov_len - off);

			if (r == GNUTLS_E_INTERRUPTED)
				continue;
			if (r == 0)
				return (ssize_t)total;		/* close_notify */
			if (r < 0) {
				if (total)
					return (ssize_t)total;
				if (r != GNUTLS_E_AGAIN)
					log_dbg("tls: %s: receive: %s", t->peer,
						gnutls_strerror((int)r));
				return tls_errno((int)r);
			}
			off += (size_t)r;
			total += (size_t)r;
		}
	}
	return (ssize_t)total;
}

/* The next piece of plaintext after skipping skip bytes of iov: straight
 * from the caller's memory when it is one piece, else gathered. */
static size_t next_piece(struct tls_state *ts, const struct iovec *iov, int cnt, size_t skip,
			 const void **p)
{
	size_t n = 0;
	int i;

	for (i = 0; i < cnt && skip >= iov[i].iov_len; i++)
		skip -= iov[i].iov_len;
	if (i == cnt)
		return 0;
	if (iov[i].iov_len - skip >= TLS_CHUNK || i == cnt - 1) {
		n = iov[i].iov_len - skip;
		*p = (const uint8_t *)iov[i].iov_base + skip;
		return n > TLS_CHUNK ? TLS_CHUNK : n;
	}
	for (; i < cnt && n < TLS_CHUNK; i++) {
		size_t k = iov[i].iov_len - skip;

		if (k > TLS_CHUNK - n)
			k = TLS_CHUNK - n;
		memcpy(ts->buf + n, (const uint8_t *)iov[i].iov_base + skip, k);
		n += k;
		skip = 0;
	}
	*p = ts->buf;
	return n;
}

static ssize_t tls_writev(struct bd_transport *t, const struct iovec *iov, int cnt)
{
	struct tls_state *ts = st(t);
	size_t total = 0;
	ssize_t r;

	if (ts->pending) {
		/* The same bytes come again first: the record GnuTLS holds. */
		do {
			r = gnutls_record_send(ts->s, NULL, 0);
		} while (r == GNUTLS_E_INTERRUPTED);
		if (r < 0)
			return tls_errno((int)r);
		total = ts->pending;
		ts->pending = 0;
	}
	for (;;) {
		const void *p = NULL;
		size_t n = next_piece(ts, iov, cnt, total, &p);

		if (!n)
			break;
		do {
			r = gnutls_record_send(ts->s, p, n);
		} while (r == GNUTLS_E_INTERRUPTED);
		if (r == GNUTLS_E_AGAIN) {
			ts->pending = n;
			break;
		}
		if (r < 0) {
			log_dbg("tls: %s: send: %s", t->peer, gnutls_strerror((int)r));
			return total ? (ssize_t)total : tls_errno((int)r);
		}
		total += (size_t)r;
	}
	return total ? (ssize_t)total : -EAGAIN;
}

static int tls_poll_fd(struct bd_transport *t)
{
	return st(t)->inner->poll_fd(t);
}

static short tls_poll_events(struct bd_transport *t, unsigned want)
{
	return st(t)->inner->poll_events(t, want);
}

static int tls_peer_addr(struct bd_transport *t, struct sockaddr_storage *ss, socklen_t *len)
{
	const struct bd_transport_ops *in = st(t)->inner;

	return in->peer_addr ? in->peer_addr(t, ss, len) : -ENOTSUP;
}

static int tls_shutdown(struct bd_transport *t)
{
	const struct bd_transport_ops *in = st(t)->inner;

	/* close_notify if it fits now; the peer sees the end either way. */
	gnutls_bye(st(t)->s, GNUTLS_SHUT_WR);
	return in->shutdown ? in->shutdown(t) : 0;
}

static void tls_close(struct bd_transport *t)
{
	struct tls_state *ts = st(t);

	t->ops = ts->inner;
	t->tls = NULL;
	gnutls_deinit(ts->s);
	free(ts->peer_name);
	free(ts);
	t->ops->close(t);
}

/* Over a kernel TCP socket; its bytes are not plain (no tcp_fd). */
static void tls_info(struct bd_transport *t, struct bd_transport_info *info)
{
	info->kernel_tcp = true;
}

static const struct bd_transport_ops tls_ops = {
	.name = "tls",
	.readv = tls_readv,
	.writev = tls_writev,
	.poll_fd = tls_poll_fd,
	.poll_events = tls_poll_events,
	.peer_addr = tls_peer_addr,
	.shutdown = tls_shutdown,
	.close = tls_close,
	.info = tls_info,
};

/* --- credentials and the handshake ------------------------------------------ */

static int file_exists(const char *dir, const char *name, char *path, size_t len)
{
	struct stat sb;

	snprintf(path, len, "%s/%s", dir, name);
	return stat(path, &sb) == 0;
}

int bd_tls_server_new(const char *cert_dir, const char *psk_file, int verify_peer,
		      struct bd_tls **out, char *err, size_t errlen)
{
	/* TLS 1.2 and 1.3 only (the NBD spec: 1.2 at least, no older by
	 * default); PSK key exchanges added when a PSK file is used. */
	const char *prio = psk_file ? "NORMAL:-VERS-ALL:+VERS-TLS1.3:+VERS-TLS1.2:"
				      "+ECDHE-PSK:+DHE-PSK:+PSK"
				    : "NORMAL:-VERS-ALL:+VERS-TLS1.3:+VERS-TLS1.2";
	char cert[4096], key[4096], ca[4096];
	struct bd_tls *c;
	bool has_ca;
	int r;

	r = tls_load(err, errlen);
	if (r < 0)
		return r;
	c = calloc(1, sizeof(*c));
	if (!c)
		return -ENOMEM;
	if (psk_file) {
		r = gnutls_psk_allocate_server_credentials(&c->psk);
		if (r == 0)
			r = gnutls_psk_set_server_credentials_file(c->psk, psk_file);
		if (r < 0) {
			snprintf(err, errlen, "PSK file %s: %s", psk_file, gnutls_strerror(r));
			goto out_free;
		}
	} else {
		if (!cert_dir)
			cert_dir = "/etc/pki/smcrd";
		if (!file_exists(cert_dir, "server-cert.pem", cert, sizeof(cert)) ||
		    !file_exists(cert_dir, "server-key.pem", key, sizeof(key))) {
			snprintf(err, errlen, "%s: no server-cert.pem and server-key.pem", cert_dir);
			r = -ENOENT;
			goto out_free;
		}
		has_ca = file_exists(cert_dir, "ca-cert.pem", ca, sizeof(ca));
		if (!has_ca && verify_peer == BD_TLS_VERIFY_ON) {
			snprintf(err, errlen, "%s: no ca-cert.pem to verify clients' certificates "
				 "with (tls-verify-peer)", cert_dir);
			r = -ENOENT;
			goto out_free;
		}
		c->verify = has_ca && verify_peer != BD_TLS_VERIFY_OFF;
		r = gnutls_certificate_allocate_credentials(&c->x509);
		if (r == 0 && has_ca)
			r = gnutls_certificate_set_x509_trust_file(c->x509, ca,
								   GNUTLS_X509_FMT_PEM) <= 0 ? -1 : 0;
		if (r == 0)
			r = gnutls_certificate_set_x509_key_file(c->x509, cert, key,
								 GNUTLS_X509_FMT_PEM);
		if (r < 0) {
			snprintf(err, errlen, "certificates in %s: %s", cert_dir,
				 r == -1 ? "bad ca-cert.pem" : gnutls_strerror(r));
			goto out_free;
		}
	}
	r = gnutls_priority_init(&c->prio, prio, NULL);
	if (r < 0) {
		snprintf(err, errlen, "TLS priorities: %s", gnutls_strerror(r));
		goto out_free;
	}
	*out = c;
	return 0;
out_free:
	bd_tls_free(c);
	return -EINVAL;
}

bool bd_tls_verifies_peer(const struct bd_tls *c)
{
	return c && c->verify;
}

void bd_tls_free(struct bd_tls *c)
{
	if (!c)
		return;
	if (c->prio)
		gnutls_priority_deinit(c->prio);
	if (c->x509)
		gnutls_certificate_free_credentials(c->x509);
	if (c->psk)
		gnutls_psk_free_server_credentials(c->psk);
	free(c);
}

/* The client certificate's common name (else its DN) into *out (malloc'd):
 * 0, -ENOENT without a certificate, other -errno. */
static int cert_name(gnutls_session_t s, char **out, char **dn_out)
{
	const gnutls_datum_t *list;
	gnutls_x509_crt_t crt;
	gnutls_datum_t dn = { NULL, 0 };
	unsigned n = 0;
	char cn[1024];
	size_t cnlen = sizeof(cn);
	int r;

	list = gnutls_certificate_get_peers(s, &n);
	if (!list || !n)
		return -ENOENT;
	if (gnutls_x509_crt_init(&crt) < 0)
		return -ENOMEM;
	r = gnutls_x509_crt_import(crt, &list[0], GNUTLS_X509_FMT_DER);
	if (r < 0)
		goto out_deinit;
	r = gnutls_x509_crt_get_dn3(crt, &dn, 0);
	if (r < 0)
		goto out_deinit;
	*dn_out = strndup((const char *)dn.data, dn.size);
	if (gnutls_x509_crt_get_dn_by_oid(crt, GNUTLS_OID_X520_COMMON_NAME, 0, 0, cn,
					  &cnlen) == 0 && cnlen && !memchr(cn, 0, cnlen))
		*out = strndup(cn, cnlen);
	else
		*out = strndup((const char *)dn.data, dn.size);
	gnutls_free(dn.data);
	gnutls_x509_crt_deinit(crt);
	if (!*out || !*dn_out) {
		free(*out);
		free(*dn_out);
		*out = *dn_out = NULL;
		return -ENOMEM;
	}
	return 0;
out_deinit:
	gnutls_x509_crt_deinit(crt);
	return -EPROTO;
}

/* Who the client is, after the handshake: its PSK identity, or its
 * certificate's name (verified when c->verify: the handshake already
 * checked it; checked again here).  -EACCES refuses the client. */
static int peer_identity(struct bd_transport *t, struct tls_state *ts, struct bd_tls *c)
{
	char *name = NULL, *dn = NULL;
	unsigned status = 0;
	int r;

	if (gnutls_auth_get_type(ts->s) == GNUTLS_CRD_PSK) {
		const char *u = gnutls_psk_server_get_username(ts->s);

		if (!u || !*u) {
			tls_log(t, "tls: %s: no PSK identity", t->peer);
			return -EACCES;
		}
		ts->peer_name = strdup(u);
		if (!ts->peer_name)
			return -ENOMEM;
		tls_log(t, "tls: %s: PSK identity '%s'", t->peer, u);
		return 0;
	}
	r = cert_name(ts->s, &name, &dn);
	if (r == -ENOENT) {
		if (c->verify) {
			tls_log(t, "tls: %s: no client certificate: refused", t->peer);
			return -EACCES;
		}
		return 0;
	}
	if (r < 0) {
		tls_log(t, "tls: %s: client certificate unreadable: %s", t->peer, strerror(-r));
		return c->verify ? -EACCES : 0;
	}
	if (!c->verify) {
		tls_log(t, "tls: %s: client certificate '%s' (%s), not verified (tls-verify-peer off)",
			 t->peer, name, dn);
		free(name);
		free(dn);
		return 0;
	}
	r = gnutls_certificate_verify_peers2(ts->s, &status);
	if (r < 0 || status) {
		tls_log(t, "tls: %s: client certificate '%s' (%s) not trusted: refused", t->peer,
			 name, dn);
		free(name);
		free(dn);
		return -EACCES;
	}
	tls_log(t, "tls: %s: client certificate '%s' (%s), verified", t->peer, name, dn);
	free(dn);
	ts->peer_name = name;
	return 0;
}

/* A session of FLAGS on T's transport, its deadline TIMEOUT_MS from now
 * (none if negative), with PRIO and the credentials given; NULL with *R
 * set (a GnuTLS code, or -ENOMEM). */
static struct tls_state *tls_session_new(struct bd_transport *t, unsigned int flags,
					 int timeout_ms, gnutls_priority_t prio, void *x509,
					 void *psk, int *r)
{
	struct tls_state *ts = calloc(1, sizeof(*ts));

	if (!ts) {
		*r = -ENOMEM;
		return NULL;
	}
	ts->inner = t->ops;
	/* One deadline for the whole handshake: a peer that trickles its
	 * bytes does not restart the wait. */
	if (timeout_ms >= 0)
		ts->deadline = now_ms() + timeout_ms;
	*r = gnutls_init(&ts->s, flags | GNUTLS_NONBLOCK);
	if (*r < 0) {
		free(ts);
		return NULL;
	}
	*r = gnutls_priority_set(ts->s, prio);
	if (*r == 0 && x509)
		*r = gnutls_credentials_set(ts->s, GNUTLS_CRD_CERTIFICATE, x509);
	if (*r == 0 && psk)
		*r = gnutls_credentials_set(ts->s, GNUTLS_CRD_PSK, psk);
	return ts;
}

/* Runs TS's handshake over T (t->tls set for the pull and push functions
 * meanwhile): 0, a GnuTLS error, or with *WAIT_ERR set (-errno) when the
 * wait for the peer failed (deadline, cancel_fd, socket error). */
static int tls_handshake(struct bd_transport *t, struct tls_state *ts, int cancel_fd,
			 int *wait_err)
{
	int r;

	*wait_err = 0;
	t->tls = ts;
	gnutls_transport_set_ptr(ts->s, t);
	gnutls_transport_set_vec_push_function(ts->s, vec_push);
	gnutls_transport_set_pull_function(ts->s, pull);
	gnutls_transport_set_pull_timeout_function(ts->s, pull_timeout);
	for (;;) {
		r = gnutls_handshake(ts->s);
		if (r != GNUTLS_E_AGAIN && r != GNUTLS_E_INTERRUPTED)
			return r;
		*wait_err = bd_wait(t, gnutls_record_get_direction(ts->s) ? BD_WANT_WRITE
									 : BD_WANT_READ,
				    left_ms(ts), cancel_fd);
		if (*wait_err < 0)
			return *wait_err;
	}
}

int bd_tls_upgrade(struct bd_transport *t, struct bd_tls *c, int timeout_ms, int cancel_fd)
{
	struct tls_state *ts;
	int r, w;

	if (t->tls)
		return -EALREADY;
	ts = tls_session_new(t, GNUTLS_SERVER, timeout_ms, c->prio, c->x509, c->psk, &r);
	if (!ts)
		return r == -ENOMEM ? -ENOMEM : -EPROTO;
	if (r < 0)
		goto out_deinit;
	if (c->x509) {
		/* Asked for even unverified, to log who it says it is. */
		gnutls_certificate_server_set_request(ts->s, c->verify ? GNUTLS_CERT_REQUIRE
								       : GNUTLS_CERT_REQUEST);
		if (c->verify)
			gnutls_session_set_verify_cert(ts->s, NULL, 0);
	}
	r = tls_handshake(t, ts, cancel_fd, &w);
	if (w < 0) {
		tls_log(t, "tls: %s: handshake: %s", t->peer, strerror(-w));
		t->tls = NULL;
		gnutls_deinit(ts->s);
		free(ts);
		return w;
	}
	if (r < 0)
		goto out_unset;
	{
		char *desc = gnutls_session_get_desc(ts->s);

		tls_log(t, "tls: %s: %s", t->peer, desc ? desc : "handshake done");
		gnutls_free(desc);
	}
	r = peer_identity(t, ts, c);
	if (r < 0) {
		t->tls = NULL;
		gnutls_deinit(ts->s);
		free(ts->peer_name);
		free(ts);
		return r;
	}
	t->ops = &tls_ops;
	return 0;
out_unset:
	t->tls = NULL;
out_deinit:
	tls_log(t, "tls: %s: handshake failed: %s", t->peer, gnutls_strerror(r));
	gnutls_deinit(ts->s);
	free(ts);
	return -EPROTO;
}

const char *bd_tls_peer_name(const struct bd_transport *t)
{
	return t->ops == &tls_ops ? st((struct bd_transport *)t)->peer_name : NULL;
}

/* --- the client side ------------------------------------------------------------ */

struct bd_tls_client {
	gnutls_certificate_credentials_t x509;
	gnutls_psk_client_credentials_t psk;
	gnutls_priority_t prio;
	bool verify;
	char *hostname;			/* checked in the server's certificate */
};

/* The key of user in a psktool file, as hex into key (NUL-terminated). */
static int psk_lookup(const char *file, const char *user, char *key, size_t keylen,
		      char *err, size_t errlen)
{
	char line[1024];
	size_t ulen = strlen(user);
	FILE *f = fopen(file, "re");
	int r = -ENOENT;

	if (!f) {
		r = -errno;
		snprintf(err, errlen, "tls-psk-file %s: %s", file, strerror(-r));
		return r;
	}
	while (fgets(line, sizeof(line), f)) {
		size_t n = strcspn(line, "\r\n");

		line[n] = '\0';
		if (strncmp(line, user, ulen) || line[ulen] != ':')
			continue;
		n = strlen(line + ulen + 1);
		if (!n || n % 2 || n >= keylen ||
		    strspn(line + ulen + 1, "0123456789abcdefABCDEF") != n) {
			snprintf(err, errlen, "tls-psk-file %s: the key of '%s' is not hex", file,
				 user);
			r = -EINVAL;
			break;
		}
		memcpy(key, line + ulen + 1, n + 1);
		r = 0;
		break;
	}
	fclose(f);
	if (r == -ENOENT)
		snprintf(err, errlen, "tls-psk-file %s: no key for '%s' (tls-username)", file,
			 user);
	explicit_bzero(line, sizeof(line));
	return r;
}

static const char *login_name(void)
{
	struct passwd *pw = getpwuid(geteuid());

	return pw ? pw->pw_name : NULL;
}

int bd_tls_client_new(const struct bd_tls_client_opts *o, struct bd_tls_client **out,
		      char *err, size_t errlen)
{
	const char *prio = o->psk_file ? "NORMAL:-VERS-ALL:+VERS-TLS1.3:+VERS-TLS1.2:"
					 "+ECDHE-PSK:+DHE-PSK:+PSK"
				       : "NORMAL:-VERS-ALL:+VERS-TLS1.3:+VERS-TLS1.2";
	struct bd_tls_client *c;
	char path[4096], key[4096];
	int r;

	r = tls_load(err, errlen);
	if (r < 0)
		return r;
	c = calloc(1, sizeof(*c));
	if (!c)
		return -ENOMEM;
	c->verify = o->verify_peer;
	if (o->hostname) {
		c->hostname = strdup(o->hostname);
		if (!c->hostname) {
			r = -ENOMEM;
			goto out_free;
		}
	}
	if (o->psk_file) {
		const char *user = o->username ? o->username : login_name();
		gnutls_datum_t k;

		if (!user) {
			snprintf(err, errlen, "no login name: give tls-username");
			r = -EINVAL;
			goto out_free;
		}
		r = psk_lookup(o->psk_file, user, key, sizeof(key), err, errlen);
		if (r < 0)
			goto out_free;
		k.data = (unsigned char *)key;
		k.size = (unsigned)strlen(key);
		r = gnutls_psk_allocate_client_credentials(&c->psk);
		if (r == 0)
			r = gnutls_psk_set_client_credentials(c->psk, user, &k,
							      GNUTLS_PSK_KEY_HEX);
		explicit_bzero(key, sizeof(key));
		if (r < 0) {
			snprintf(err, errlen, "tls-psk-file %s: %s", o->psk_file,
				 gnutls_strerror(r));
			r = -EINVAL;
			goto out_free;
		}
	} else {
		r = gnutls_certificate_allocate_credentials(&c->x509);
		if (r < 0) {
			r = -ENOMEM;
			goto out_free;
		}
		if (o->certificates) {
			char kpath[4096];
			bool has_cert, has_key;

			if (file_exists(o->certificates, "ca-cert.pem", path, sizeof(path)) &&
			    gnutls_certificate_set_x509_trust_file(c->x509, path,
								   GNUTLS_X509_FMT_PEM) <= 0) {
				snprintf(err, errlen, "tls-certificates: %s: no certificate in it",
					 path);
				r = -EINVAL;
				goto out_free;
			}
			has_cert = file_exists(o->certificates, "client-cert.pem", path,
					       sizeof(path));
			has_key = file_exists(o->certificates, "client-key.pem", kpath,
					      sizeof(kpath));
			if (has_cert != has_key) {
				snprintf(err, errlen, "tls-certificates: %s: client-cert.pem "
					 "and client-key.pem go together", o->certificates);
				r = -EINVAL;
				goto out_free;
			}
			r = has_cert ? gnutls_certificate_set_x509_key_file(
					       c->x509, path, kpath, GNUTLS_X509_FMT_PEM) : 0;
			if (r < 0) {
				snprintf(err, errlen, "tls-certificates: %s: %s", o->certificates,
					 gnutls_strerror(r));
				r = -EINVAL;
				goto out_free;
			}
		} else if (c->verify &&
			   gnutls_certificate_set_x509_system_trust(c->x509) <= 0) {
			snprintf(err, errlen, "no tls-certificates directory and no system CAs");
			r = -ENOENT;
			goto out_free;
		}
	}
	r = gnutls_priority_init(&c->prio, prio, NULL);
	if (r < 0) {
		snprintf(err, errlen, "TLS priorities: %s", gnutls_strerror(r));
		r = -EINVAL;
		goto out_free;
	}
	*out = c;
	return 0;
out_free:
	bd_tls_client_free(c);
	return r;
}

void bd_tls_client_free(struct bd_tls_client *c)
{
	if (!c)
		return;
	if (c->prio)
		gnutls_priority_deinit(c->prio);
	if (c->x509)
		gnutls_certificate_free_credentials(c->x509);
	if (c->psk)
		gnutls_psk_free_client_credentials(c->psk);
	free(c->hostname);
	free(c);
}

/* Why a client handshake failed, as -errno and a line in err. */
static int client_failure(gnutls_session_t s, int r, char *err, size_t errlen)
{
	if (r == GNUTLS_E_CERTIFICATE_VERIFICATION_ERROR || r == GNUTLS_E_CERTIFICATE_ERROR) {
		gnutls_datum_t out = { NULL, 0 };
		unsigned status = gnutls_session_get_verify_cert_status(s);

		if (gnutls_certificate_verification_status_print(
			    status, GNUTLS_CRT_X509, &out, 0) == 0 && out.data)
			snprintf(err, errlen, "the server's TLS certificate is not trusted: %s",
				 (const char *)out.data);
		else
			snprintf(err, errlen, "the server's TLS certificate is not trusted");
		gnutls_free(out.data);
		return -EKEYREJECTED;
	}
	if (r == GNUTLS_E_FATAL_ALERT_RECEIVED) {
		const char *a = gnutls_alert_get_name(gnutls_alert_get(s));

		snprintf(err, errlen, "the server refused the TLS handshake (%s)",
			 a ? a : "alert");
		return -ENOKEY;
	}
	/* smcrd closes without an alert when it refuses a key. */
	if (r == GNUTLS_E_PREMATURE_TERMINATION || r == GNUTLS_E_PULL_ERROR ||
	    r == GNUTLS_E_PUSH_ERROR) {
		snprintf(err, errlen, "the server closed the connection in the TLS handshake");
		return -ENOKEY;
	}
	snprintf(err, errlen, "TLS handshake: %s", gnutls_strerror(r));
	return tls_errno(r) == -EPROTO ? -EPROTO : -ECONNRESET;
}

static bool is_ip_address(const char *h)
{
	unsigned char a[16];

	return inet_pton(AF_INET, h, a) == 1 || inet_pton(AF_INET6, h, a) == 1;
}

int bd_tls_client_upgrade(struct bd_transport *t, struct bd_tls_client *c, int timeout_ms,
			  int cancel_fd, char *err, size_t errlen)
{
	struct tls_state *ts;
	int r, w;

	if (t->tls)
		return -EALREADY;
	ts = tls_session_new(t, GNUTLS_CLIENT, timeout_ms, c->prio, c->x509, c->psk, &r);
	if (!ts) {
		if (r != -ENOMEM)
			snprintf(err, errlen, "TLS: %s", gnutls_strerror(r));
		return -ENOMEM;
	}
	if (r == 0 && c->hostname && !is_ip_address(c->hostname))
		r = gnutls_server_name_set(ts->s, GNUTLS_NAME_DNS, c->hostname,
					   strlen(c->hostname));
	if (r < 0) {
		snprintf(err, errlen, "TLS: %s", gnutls_strerror(r));
		gnutls_deinit(ts->s);
		free(ts);
		return -EINVAL;
	}
	if (c->x509 && c->verify)
		gnutls_session_set_verify_cert(ts->s, c->hostname, 0);
	r = tls_handshake(t, ts, cancel_fd, &w);
	if (r < 0) {
		if (w < 0)
			snprintf(err, errlen, "TLS handshake: %s", strerror(-w));
		else
			r = client_failure(ts->s, r, err, errlen);
		t->tls = NULL;
		gnutls_deinit(ts->s);
		free(ts);
		return r;
	}
	{
		char *desc = gnutls_session_get_desc(ts->s);

		log_dbg("tls: %s: %s", t->peer, desc ? desc : "handshake done");
		gnutls_free(desc);
	}
	t->ops = &tls_ops;
	return 0;
}
