/* SPDX-License-Identifier: BSD-3-Clause */
/* smcrbd: the CLC rendezvous flows over a connected TCP socket, with TCP
 * fallback (RFC 7609 §3.5, Appendix C).  See clc.h for the conventions. */
#include <config.h>

#include <arpa/inet.h>
#include <errno.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdbool.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "clc.h"
#include "log.h"

/* ---- reasons and counters ------------------------------------------------ */

static const uint32_t reason_codes[SMCR_CLC_NREASONS - 1] = {
	SMCR_DECL_MEM,
	SMCR_DECL_TIMEOUT_CL,
	SMCR_DECL_TIMEOUT_AL,
	SMCR_DECL_CNFERR,
	SMCR_DECL_PEERNOSMC,
	SMCR_DECL_IPSEC,
	SMCR_DECL_NOSMCDEV,
	SMCR_DECL_NOSMCRDEV,
	SMCR_DECL_MODEUNSUPP,
	SMCR_DECL_RMBE_EC,
	SMCR_DECL_OPTUNSUPP,
	SMCR_DECL_DIFFPREFIX,
	SMCR_DECL_GETVLANERR,
	SMCR_DECL_NOACTLINK,
	SMCR_DECL_NOSRVLINK,
	SMCR_DECL_VERSMISMAT,
	SMCR_DECL_SYNCERR,
	SMCR_DECL_PEERDECL,
	SMCR_DECL_INTERR,
	SMCR_DECL_ERR_RTOK,
	SMCR_DECL_ERR_RDYLNK,
	SMCR_DECL_ERR_REGBUF,
	SMCR_DECL_TIMEOUT_PROPOSAL,
	SMCR_DECL_TIMEOUT_ACCEPT,
	SMCR_DECL_TIMEOUT_CONFIRM,
	SMCR_DECL_RELEASEERR,
	SMCR_DECL_MAXCONNERR,
	SMCR_DECL_MAXLINKERR,
};

unsigned int smcr_clc_reason_index(uint32_t code)
{
	unsigned int i;

	for (i = 0; i < SMCR_CLC_NREASONS - 1; i++)
		if (reason_codes[i] == code)
			return i;
	return SMCR_CLC_NREASONS - 1;
}

uint32_t smcr_clc_reason_code(unsigned int index)
{
	return index < SMCR_CLC_NREASONS - 1 ? reason_codes[index] : 0;
}

const char *smcr_clc_decline_str(uint32_t code)
{
	switch (code) {
	case SMCR_DECL_TIMEOUT_PROPOSAL: return "timeout waiting for CLC Proposal";
	case SMCR_DECL_TIMEOUT_ACCEPT: return "timeout waiting for CLC Accept";
	case SMCR_DECL_TIMEOUT_CONFIRM: return "timeout waiting for CLC Confirm";
	default: return smcr_decline_str(code);
	}
}

const char *smcr_clc_outcome_str(enum smcr_clc_outcome outcome)
{
	switch (outcome) {
	case SMCR_CLC_SMCR: return "SMC-R";
	case SMCR_CLC_FALLBACK: return "TCP fallback";
	case SMCR_CLC_ABORT: return "aborted";
	default: return "unknown";
	}
}

void smcr_clc_stats_add(struct smcr_clc_stats *dst, const struct smcr_clc_stats *src)
{
	unsigned int i;

	dst->proposals_sent += src->proposals_sent;
	dst->proposals_rcvd += src->proposals_rcvd;
	dst->accepts_sent += src->accepts_sent;
	dst->accepts_rcvd += src->accepts_rcvd;
	dst->confirms_sent += src->confirms_sent;
	dst->confirms_rcvd += src->confirms_rcvd;
	dst->declines_sent += src->declines_sent;
	dst->declines_rcvd += src->declines_rcvd;
	dst->smcr += src->smcr;
	dst->first_contacts += src->first_contacts;
	dst->fallbacks += src->fallbacks;
	dst->aborts += src->aborts;
	dst->timeouts += src->timeouts;
	dst->proto_errors += src->proto_errors;
	dst->version_mismatches += src->version_mismatches;
	dst->v2_proposals_as_v1 += src->v2_proposals_as_v1;
	dst->v2 += src->v2;
	dst->v21 += src->v21;
	for (i = 0; i < SMCR_CLC_NREASONS; i++) {
		dst->declines_sent_by[i] += src->declines_sent_by[i];
		dst->declines_rcvd_by[i] += src->declines_rcvd_by[i];
		dst->fallbacks_by[i] += src->fallbacks_by[i];
	}
}

/* ---- socket I/O with deadlines ------------------------------------------- */

static void deadline_in(struct timespec *d, int ms)
{
	clock_gettime(CLOCK_MONOTONIC, d);
	d->tv_sec += ms / 1000;
	d->tv_nsec += (long)(ms % 1000) * 1000000L;
	if (d->tv_nsec >= 1000000000L) {
		d->tv_sec++;
		d->tv_nsec -= 1000000000L;
	}
}

/* Milliseconds left until d, rounded up; 0 once it has passed. */
static int ms_left(const struct timespec *d)
{
	struct timespec now;
	long long ns;

	clock_gettime(CLOCK_MONOTONIC, &now);
	ns = (long long)(d->tv_sec - now.tv_sec) * 1000000000LL + (d->tv_nsec - now.tv_nsec);
	if (ns <= 0)
		return 0;
	return (int)((ns + 999999) / 1000000);
}

/* Waits until fd is ready for events (or has an error or hang-up, which the
 * next recv/send reports).  0, -ETIMEDOUT or -errno. */
static int wait_fd(int fd, short events, const struct timespec *deadline)
{
	for (;;) {
		struct pollfd pfd = { .fd = fd, .events = events };
		int ms = ms_left(deadline), rc;

		if (ms == 0)
			return -ETIMEDOUT;
		rc = poll(&pfd, 1, ms);
		if (rc < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		if (rc == 0)
			continue;	/* the loop head decides */
		if (pfd.revents & POLLNVAL)
			return -EBADF;
		return 0;
	}
}

/* Reads exactly len bytes (never more) into buf; *got counts what arrived,
 * also on failure.  0, -ETIMEDOUT, -ECONNRESET (end of stream) or -errno.
 * If rest_ms >= 0, the deadline moves to rest_ms after the first byte. */
static int read_full(int fd, void *buf, size_t len, struct timespec *deadline,
		     int rest_ms, size_t *got)
{
	size_t done = 0;
	int rc;

	while (done < len) {
		ssize_t n = recv(fd, (char *)buf + done, len - done, MSG_DONTWAIT);

		if (n > 0) {
			if (*got == 0 && rest_ms >= 0)
				deadline_in(deadline, rest_ms);
			done += (size_t)n;
			*got += (size_t)n;
			continue;
		}
		if (n == 0)
			return -ECONNRESET;
		if (errno == EINTR)
			continue;
		if (errno != EAGAIN && errno != EWOULDBLOCK)
			return -errno;
		rc = wait_fd(fd, POLLIN, deadline);
		if (rc < 0)
			return rc;
	}
	return 0;
}

/* Reads and drops len bytes. */
static int discard(int fd, size_t len, struct timespec *deadline, size_t *got)
{
	uint8_t scratch[512];

	while (len > 0) {
		size_t n = len < sizeof(scratch) ? len : sizeof(scratch);
		int rc = read_full(fd, scratch, n, deadline, -1, got);

		if (rc < 0)
			return rc;
		len -= n;
	}
	return 0;
}

static int send_full(int fd, const void *buf, size_t len, int timeout_ms)
{
	struct timespec deadline;
	size_t done = 0;
	int rc;

	deadline_in(&deadline, timeout_ms);
	while (done < len) {
		ssize_t n = send(fd, (const char *)buf + done, len - done,
				 MSG_DONTWAIT | MSG_NOSIGNAL);

		if (n >= 0) {
			done += (size_t)n;
			continue;
		}
		if (errno == EINTR)
			continue;
		if (errno != EAGAIN && errno != EWOULDBLOCK)
			return -errno;
		rc = wait_fd(fd, POLLOUT, &deadline);
		if (rc < 0)
			return rc;
	}
	return 0;
}

/* ---- reading one CLC message --------------------------------------------- */

enum rx_kind {
	RX_V1,		/* a v1 message whose header checked out, in buf */
	RX_V2,		/* a message of another version: read whole; its first
			 * min(length, sizeof(buf)) bytes are in buf */
	RX_LONG,	/* a v1 Proposal longer than buf: read and dropped */
};

/* What we keep of a message: every v1 one, and a v2 Proposal whole (Linux
 * 6.1's: head, IP area, v2 extension with up to 8 EIDs, SMC-D extension:
 * well below this). */
#define CLC_RX_KEEP 1024
_Static_assert(CLC_RX_KEEP >= SMCR_CLC_MAX_V1_LEN, "a v1 message fits");

struct rxmsg {
	enum rx_kind kind;
	struct smcr_clc_hdr hdr;
	size_t got;			/* bytes consumed from the stream */
	int hdr_err;			/* the header decoder's error, if any */
	uint8_t buf[CLC_RX_KEEP];
};

/* Reads exactly one CLC message, or as little as it takes to see it is not
 * one.  first_ms bounds the whole message; rest_ms >= 0 instead restarts the
 * clock at the first byte (for a mere look at the socket).  0, or -errno:
 * -EPROTO (not a CLC header we can follow: m->hdr_err says why),
 * -ETIMEDOUT, -ECONNRESET, ... (m->got tells whether anything was read). */
static int rx_msg(int fd, int first_ms, int rest_ms, struct rxmsg *m)
{
	struct timespec deadline;
	size_t keep;
	int rc;

	m->got = 0;
	m->hdr_err = 0;
	deadline_in(&deadline, first_ms);
	rc = read_full(fd, m->buf, SMCR_CLC_HDR_LEN, &deadline, rest_ms, &m->got);
	if (rc < 0)
		return rc;
	rc = smcr_clc_hdr_decode(m->buf, SMCR_CLC_HDR_LEN, &m->hdr);
	if (rc == SMCR_E_VERSION) {
		/* Another version: read all of it (the 16-bit length bounds
		 * it), keeping what fits, so the caller can decline it and
		 * the stream stays in step. */
		m->kind = RX_V2;
		keep = m->hdr.length < sizeof(m->buf) ? m->hdr.length : sizeof(m->buf);
		rc = read_full(fd, m->buf + SMCR_CLC_HDR_LEN, keep - SMCR_CLC_HDR_LEN,
			       &deadline, -1, &m->got);
		if (rc < 0)
			return rc;
		return discard(fd, m->hdr.length - keep, &deadline, &m->got);
	}
	if (rc < 0) {
		m->hdr_err = rc;
		return -EPROTO;
	}
	if (m->hdr.length > SMCR_CLC_MAX_V1_LEN) {
		if (m->hdr.type != SMCR_CLC_PROPOSAL) {
			m->hdr_err = SMCR_E_LENGTH;
			return -EPROTO;
		}
		m->kind = RX_LONG;
		return discard(fd, m->hdr.length - SMCR_CLC_HDR_LEN, &deadline, &m->got);
	}
	m->kind = RX_V1;
	return read_full(fd, m->buf + SMCR_CLC_HDR_LEN, m->hdr.length - SMCR_CLC_HDR_LEN,
			 &deadline, -1, &m->got);
}

/* A Decline of another version (Linux v2 keeps the v1 layout of its first
 * 20 bytes: header, peer ID, diagnosis). */
static void v2_decline(const struct rxmsg *m, struct smcr_clc_decline *d)
{
	memset(d, 0, sizeof(*d));
	d->out_of_sync = m->hdr.flags & SMCR_CLC_FLAG_OUT_OF_SYNC;
	if (m->hdr.length >= 20) {
		d->peer_id.instance = (uint16_t)(m->buf[8] << 8 | m->buf[9]);
		memcpy(d->peer_id.mac, m->buf + 10, SMCR_MAC_LEN);
		d->diagnosis = (uint32_t)m->buf[16] << 24 | (uint32_t)m->buf[17] << 16 |
			(uint32_t)m->buf[18] << 8 | m->buf[19];
	}
}

/* ---- the flows ----------------------------------------------------------- */

struct clc {
	int fd;
	const char *role;
	const struct smcr_clc_ops *ops;
	void *arg;
	struct smcr_clc_cfg cfg;
	struct smcr_clc_result *res;
	bool set_up;			/* a setup callback returned 0 */
};

static int timeout_or_default(int ms)
{
	return ms > 0 ? ms : SMCR_CLC_DEFAULT_TIMEOUT_MS;
}

static void clc_init(struct clc *c, int fd, const char *role, const struct smcr_clc_ops *ops,
		     void *arg, const struct smcr_clc_cfg *cfg, struct smcr_clc_result *res)
{
	memset(c, 0, sizeof(*c));
	c->fd = fd;
	c->role = role;
	c->ops = ops;
	c->arg = arg;
	if (cfg)
		c->cfg = *cfg;
	c->cfg.proposal_timeout_ms = timeout_or_default(c->cfg.proposal_timeout_ms);
	c->cfg.reply_timeout_ms = timeout_or_default(c->cfg.reply_timeout_ms);
	c->cfg.send_timeout_ms = timeout_or_default(c->cfg.send_timeout_ms);
	if (!c->cfg.max_conns)
		c->cfg.max_conns = SMCR_CLC_MAX_CONNS;
	else if (c->cfg.max_conns < SMCR_CLC_MIN_CONNS)
		c->cfg.max_conns = SMCR_CLC_MIN_CONNS;
	if (!c->cfg.max_links || c->cfg.max_links > SMCR_CLC_MAX_LINKS)
		c->cfg.max_links = SMCR_CLC_MAX_LINKS;
	c->res = res;
	memset(res, 0, sizeof(*res));
}

static void clc_undo(struct clc *c)
{
	if (c->set_up && c->ops->undo)
		c->ops->undo(c->arg, c->res);
	c->set_up = false;
}

static int clc_abort(struct clc *c, int err, uint32_t reason)
{
	struct smcr_clc_result *res = c->res;

	res->outcome = SMCR_CLC_ABORT;
	res->err = err;
	res->reason = reason;
	res->side = reason ? SMCR_CLC_SIDE_LOCAL : SMCR_CLC_SIDE_NONE;
	res->stats.aborts++;
	if (err == -EPROTO)
		res->stats.proto_errors++;
	if (reason)
		smcr_warn("clc %s: closing the connection: %s (%s)", c->role,
			  strerror(-err), smcr_clc_decline_str(reason));
	else
		smcr_warn("clc %s: closing the connection: %s", c->role, strerror(-err));
	clc_undo(c);
	return err;
}

static int clc_timeout(struct clc *c, uint32_t reason)
{
	c->res->stats.timeouts++;
	return clc_abort(c, -ETIMEDOUT, reason);
}

static void count_fallback(struct clc *c, uint32_t reason, enum smcr_clc_side side)
{
	struct smcr_clc_result *res = c->res;

	res->outcome = SMCR_CLC_FALLBACK;
	res->reason = reason;
	res->side = side;
	res->stats.fallbacks++;
	res->stats.fallbacks_by[smcr_clc_reason_index(reason)]++;
	/* Debug: the caller logs the fallback (sock_clc.c), one line. */
	smcr_dbg("clc %s: TCP fallback, %s: %s (0x%08x)", c->role,
		  side == SMCR_CLC_SIDE_PEER ? "peer declined" : "declined",
		  smcr_clc_decline_str(reason), reason);
	clc_undo(c);
}

static int encode_send(int fd, const struct smcr_clc_msg *msg, int timeout_ms)
{
	uint8_t buf[SMCR_CLC_MAX_V1_LEN];
	int n = smcr_clc_encode(msg, buf, sizeof(buf));

	if (n < 0)
		return n;
	return send_full(fd, buf, (size_t)n, timeout_ms);
}

static int send_decline(int fd, const struct smcr_peer_id *id, uint32_t diagnosis,
			int timeout_ms, struct smcr_clc_decline *sent,
			struct smcr_clc_stats *stats)
{
	struct smcr_clc_msg msg;
	int rc;

	memset(&msg, 0, sizeof(msg));
	msg.hdr.type = SMCR_CLC_DECLINE;
	msg.decline.out_of_sync = diagnosis == SMCR_DECL_SYNCERR;
	msg.decline.peer_id = *id;
	msg.decline.diagnosis = diagnosis;
	rc = encode_send(fd, &msg, timeout_ms);
	if (rc < 0)
		return rc;
	if (sent)
		*sent = msg.decline;
	if (stats) {
		stats->declines_sent++;
		stats->declines_sent_by[smcr_clc_reason_index(diagnosis)]++;
	}
	return 0;
}

/* Declines in lieu of the message we owe, and falls back. */
static int clc_decline(struct clc *c, uint32_t diagnosis)
{
	struct smcr_clc_result *res = c->res;
	int rc;

	rc = send_decline(c->fd, &c->cfg.peer_id, diagnosis, c->cfg.send_timeout_ms,
			  &res->decline, &res->stats);
	if (rc < 0)
		return clc_abort(c, rc, diagnosis);
	res->have_decline = true;
	count_fallback(c, diagnosis, SMCR_CLC_SIDE_LOCAL);
	return SMCR_CLC_FALLBACK;
}

/* The peer declined in lieu of the message we waited for. */
static int clc_peer_declined(struct clc *c, const struct smcr_clc_decline *d)
{
	struct smcr_clc_result *res = c->res;

	res->decline = *d;
	res->have_decline = true;
	res->peer_out_of_sync = d->out_of_sync;
	res->stats.declines_rcvd++;
	res->stats.declines_rcvd_by[smcr_clc_reason_index(d->diagnosis)]++;
	count_fallback(c, d->diagnosis, SMCR_CLC_SIDE_PEER);
	return SMCR_CLC_FALLBACK;
}

static int clc_proto_error(struct clc *c, int err, const char *what)
{
	smcr_warn("clc %s: protocol error %s: %s", c->role, what, smcr_msg_strerror(err));
	return clc_abort(c, -EPROTO, 0);
}

/* What clc_receive() got when waiting for a message of one type. */
enum rx_result {
	RXR_MSG,		/* *msg holds the expected message */
	RXR_DONE,		/* the exchange is over: *ret holds its result */
	RXR_V2,			/* the expected type, but of another version */
	RXR_RANGE,		/* the expected type with a bad enumerated value */
	RXR_LONG,		/* an over-long v1 Proposal (dropped) */
	RXR_MSG2,		/* *v2 holds the expected message, version 2 */
};

/* Receives the message of the given type, or a Decline in its place.  A
 * Decline, a timeout and every error end the exchange here (RXR_DONE, *ret
 * holds its return value); the other cases are the caller's to answer. */
static enum rx_result clc_receive(struct clc *c, enum smcr_clc_type type, int timeout_ms,
				  uint32_t timeout_reason, bool silence_ok,
				  struct smcr_clc_msg *msg, struct smcr_clc_v2_msg *v2, int *ret)
{
	struct rxmsg m;
	int rc;

	rc = rx_msg(c->fd, timeout_ms, -1, &m);
	if (rc == -ETIMEDOUT) {
		if (silence_ok && m.got == 0) {
			c->res->stats.timeouts++;
			count_fallback(c, timeout_reason, SMCR_CLC_SIDE_LOCAL);
			*ret = SMCR_CLC_FALLBACK;
		} else {
			*ret = clc_timeout(c, timeout_reason);
		}
		return RXR_DONE;
	}
	if (rc == -EPROTO) {
		c->res->peer_not_clc = m.hdr_err == SMCR_E_EYECATCHER;
		*ret = clc_proto_error(c, m.hdr_err, "in a CLC header");
		return RXR_DONE;
	}
	if (rc < 0) {
		*ret = clc_abort(c, rc, 0);
		return RXR_DONE;
	}
	if (m.kind == RX_V2 && v2 && m.hdr.type == type && m.hdr.length <= sizeof(m.buf)) {
		/* SMC-Rv2 is ours to speak: the whole message. */
		rc = smcr_clc_v2_decode(m.buf, m.hdr.length, v2);
		if (rc >= 0)
			return RXR_MSG2;
		if (rc == SMCR_E_RANGE && type != SMCR_CLC_PROPOSAL)
			return RXR_RANGE;
		if (type != SMCR_CLC_PROPOSAL) {
			*ret = clc_proto_error(c, rc, "in a CLC v2 message");
			return RXR_DONE;
		}
		/* A Proposal we cannot read whole: its v1 part, below. */
	}
	if (m.kind == RX_V2 && type == SMCR_CLC_PROPOSAL &&
	    m.hdr.type == SMCR_CLC_PROPOSAL) {
		/* A v2 Proposal that offers SMC-R v1 as well gets a v1
		 * answer; a v2-only one is declined. */
		memset(msg, 0, sizeof(*msg));
		rc = smcr_clc_proposal_v2_decode(m.buf, m.hdr.length <= sizeof(m.buf) ?
						 m.hdr.length : sizeof(m.buf),
						 &msg->proposal);
		if (rc == 0 || rc == SMCR_E_RANGE) {
			msg->hdr = m.hdr;
			c->res->stats.v2_proposals_as_v1++;
			smcr_info("clc %s: CLC version %u Proposal (%u bytes) offers v1: answering in v1",
				  c->role, m.hdr.version, m.hdr.length);
			return rc ? RXR_RANGE : RXR_MSG;
		}
		c->res->stats.version_mismatches++;
		smcr_info("clc %s: CLC version %u Proposal (%u bytes, v1 type %u) without SMC-R v1: %s",
			  c->role, m.hdr.version, m.hdr.length,
			  m.hdr.flags & SMCR_CLC_TYPE_MASK, smcr_msg_strerror(rc));
		return RXR_V2;
	}
	if (m.kind == RX_V2) {
		c->res->stats.version_mismatches++;
		smcr_info("clc %s: CLC version %u message (type %u, %u bytes) dropped",
			  c->role, m.hdr.version, m.hdr.type, m.hdr.length);
		if (m.hdr.type == SMCR_CLC_DECLINE) {
			struct smcr_clc_decline d;

			v2_decline(&m, &d);
			*ret = clc_peer_declined(c, &d);
			return RXR_DONE;
		}
		if (m.hdr.type == type)
			return RXR_V2;
		*ret = clc_proto_error(c, SMCR_E_NOTTYPE, "(a message out of turn)");
		return RXR_DONE;
	}
	if (m.kind == RX_LONG) {
		if (type == SMCR_CLC_PROPOSAL)
			return RXR_LONG;
		*ret = clc_proto_error(c, SMCR_E_NOTTYPE, "(a message out of turn)");
		return RXR_DONE;
	}
	rc = smcr_clc_decode(m.buf, m.hdr.length, msg);
	if (msg->hdr.type != type && msg->hdr.type != SMCR_CLC_DECLINE) {
		*ret = clc_proto_error(c, SMCR_E_NOTTYPE, "(a message out of turn)");
		return RXR_DONE;
	}
	if (rc == SMCR_E_RANGE && msg->hdr.type == type)
		return RXR_RANGE;
	if (rc < 0) {
		*ret = clc_proto_error(c, rc, "in a CLC message");
		return RXR_DONE;
	}
	if (msg->hdr.type == SMCR_CLC_DECLINE) {
		*ret = clc_peer_declined(c, &msg->decline);
		return RXR_DONE;
	}
	return RXR_MSG;
}

/* Send one of our messages; false with *ret set to what the exchange
 * returns when it cannot go out. */
static bool clc_send(struct clc *c, const struct smcr_clc_msg *msg, const char *name,
		     int *ret)
{
	int rc = encode_send(c->fd, msg, c->cfg.send_timeout_ms);

	if (rc == SMCR_E_INVAL || rc == SMCR_E_NOSPC) {
		smcr_err("clc %s: the %s does not encode: %s", c->role, name,
			 smcr_msg_strerror(rc));
		*ret = clc_decline(c, SMCR_DECL_INTERR);
		return false;
	}
	if (rc < 0) {
		*ret = clc_abort(c, rc, 0);
		return false;
	}
	return true;
}

/* ---- SMC-Rv2 ---------------------------------------------------------------- */

static bool offers_r(uint8_t type)
{
	return type == SMCR_CLC_TYPE_R || type == SMCR_CLC_TYPE_B;
}

static bool eid_ours(const struct clc *c, const uint8_t *eid)
{
	unsigned int i;

	for (i = 0; i < c->cfg.eid_count && i < SMCR_CLC_MAX_EIDS; i++)
		if (memcmp(c->cfg.eids[i], eid, SMCR_EID_LEN) == 0)
			return true;
	return false;
}

/* The first EID of a v2 Proposal that we have too (Linux's
 * smc_clc_match_eid), or NULL. */
static const uint8_t *eid_common(const struct clc *c, const struct smcr_clc_v2_proposal *p)
{
	unsigned int i;

	for (i = 0; i < p->eid_count && i < SMCR_CLC_MAX_EIDS; i++)
		if (eid_ours(c, p->eids[i]))
			return p->eids[i];
	return NULL;
}

/* A GID of a RoCE v2 port with an IPv4 address (::ffff:a.b.c.d): the
 * only kind a Linux v2 peer can route to. */
static bool gid_v4mapped(const uint8_t *gid)
{
	static const uint8_t pfx[12] = { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff };

	return memcmp(gid, pfx, sizeof(pfx)) == 0;
}

static uint8_t our_release(const struct clc *c)
{
	return c->cfg.v2_release0 ? SMCR_CLC_RELEASE_0 : SMCR_CLC_RELEASE_1;
}

/* Our first-contact extension: no gateway, Linux's OS type (this runs on
 * Linux), the release both speak and at release 1 the group's limits (no
 * feature, vendor options zero), the host name blank-padded as Linux
 * pads it. */
static void fce_fill(struct smcr_clc_v2_accept_confirm *a, const struct smcr_clc_result *res)
{
	char host[256] = "";
	size_t n;

	a->direct = true;
	a->os_type = SMCR_CLC_OS_LINUX;
	a->release = res->release;
	if (res->release >= SMCR_CLC_RELEASE_1) {
		a->max_conns = res->max_conns;
		a->max_links = res->max_links;
	}
	gethostname(host, sizeof(host) - 1);
	n = strlen(host);
	memset(a->hostname, ' ', sizeof(a->hostname));
	memcpy(a->hostname, host, n < sizeof(a->hostname) ? n : sizeof(a->hostname));
}

static bool clc_send_v2(struct clc *c, const struct smcr_clc_v2_msg *msg, const char *name,
			int *ret)
{
	uint8_t buf[CLC_RX_KEEP];
	int n = smcr_clc_v2_encode(msg, buf, sizeof(buf));

	if (n < 0) {
		smcr_err("clc %s: the v2 %s does not encode: %s", c->role, name,
			 smcr_msg_strerror(n));
		*ret = clc_decline(c, SMCR_DECL_INTERR);
		return false;
	}
	n = send_full(c->fd, buf, (size_t)n, c->cfg.send_timeout_ms);
	if (n < 0) {
		*ret = clc_abort(c, n, 0);
		return false;
	}
	return true;
}

/* The exchange ended in SMC-R. */
static int clc_smcr(struct clc *c)
{
	struct smcr_clc_result *res = c->res;

	res->stats.smcr++;
	if (res->first_contact)
		res->stats.first_contacts++;
	if (res->version == SMCR_CLC_VERSION_2)
		res->stats.v2++;
	if (res->version == SMCR_CLC_VERSION_2 && res->first_contact &&
	    res->release >= SMCR_CLC_RELEASE_1)
		res->stats.v21++;
	res->outcome = SMCR_CLC_SMCR;
	if (res->version == SMCR_CLC_VERSION_2 && res->first_contact)
		smcr_dbg("clc %s: SMC-Rv2.%u (first contact; max_conns %u, max_links %u)",
			 c->role, res->release, res->max_conns, res->max_links);
	else
		smcr_dbg("clc %s: SMC-R%s (%s contact)", c->role,
			 res->version == SMCR_CLC_VERSION_2 ? "v2" : "",
			 res->first_contact ? "first" : "subsequent");
	return SMCR_CLC_SMCR;
}

/* Server: the release and limits of a v2 Proposal (Linux's
 * smc_listen_v2_check and smc_clc_srv_v2x_features_validate): 0, or the
 * Decline code. */
static uint32_t v21_propose_rx(struct clc *c, const struct smcr_clc_v2_proposal *p)
{
	struct smcr_clc_result *res = c->res;

	res->release = p->release < our_release(c) ? p->release : our_release(c);
	if (res->release < SMCR_CLC_RELEASE_1)
		return 0;
	res->max_conns = p->max_conns < c->cfg.max_conns ? p->max_conns : c->cfg.max_conns;
	res->max_links = p->max_links < c->cfg.max_links ? p->max_links : c->cfg.max_links;
	if (res->max_conns < SMCR_CLC_MIN_CONNS) {
		smcr_info("clc server: SMC-Rv2.1 Proposal with max_conns %u (at least %u)",
			  p->max_conns, SMCR_CLC_MIN_CONNS);
		return SMCR_DECL_MAXCONNERR;
	}
	if (res->max_links < SMCR_CLC_MIN_LINKS) {
		smcr_info("clc server: SMC-Rv2.1 Proposal with max_links %u (at least %u)",
			  p->max_links, SMCR_CLC_MIN_LINKS);
		return SMCR_DECL_MAXLINKERR;
	}
	return 0;
}

/* Client: a first-contact v2 Accept's release and limits (Linux's
 * smc_clc_clnt_v2x_features_validate, and no more than we offered). */
static uint32_t v21_accept_rx(struct clc *c, const struct smcr_clc_v2_accept_confirm *a)
{
	struct smcr_clc_result *res = c->res;

	if (a->release > our_release(c)) {
		smcr_info("clc client: Accept at SMC-Rv2 release %u (we offered %u)",
			  a->release, our_release(c));
		return SMCR_DECL_RELEASEERR;
	}
	res->release = a->release;
	if (res->release < SMCR_CLC_RELEASE_1)
		return 0;
	if (a->max_conns < SMCR_CLC_MIN_CONNS || a->max_conns > c->cfg.max_conns) {
		smcr_info("clc client: Accept with max_conns %u (%u..%u)", a->max_conns,
			  SMCR_CLC_MIN_CONNS, c->cfg.max_conns);
		return SMCR_DECL_MAXCONNERR;
	}
	if (a->max_links < SMCR_CLC_MIN_LINKS || a->max_links > c->cfg.max_links) {
		smcr_info("clc client: Accept with max_links %u (%u..%u)", a->max_links,
			  SMCR_CLC_MIN_LINKS, c->cfg.max_links);
		return SMCR_DECL_MAXLINKERR;
	}
	res->max_conns = a->max_conns;
	res->max_links = a->max_links;
	return 0;
}

/* Server: a first-contact v2 Confirm echoes what our Accept said. */
static uint32_t v21_confirm_rx(struct clc *c, const struct smcr_clc_v2_accept_confirm *f)
{
	const struct smcr_clc_result *res = c->res;

	if (f->release != res->release) {
		smcr_info("clc server: Confirm at SMC-Rv2 release %u (Accept: %u)",
			  f->release, res->release);
		return SMCR_DECL_RELEASEERR;
	}
	if (res->release < SMCR_CLC_RELEASE_1)
		return 0;
	if (f->max_conns != res->max_conns) {
		smcr_info("clc server: Confirm with max_conns %u (Accept: %u)", f->max_conns,
			  res->max_conns);
		return SMCR_DECL_MAXCONNERR;
	}
	if (f->max_links != res->max_links) {
		smcr_info("clc server: Confirm with max_links %u (Accept: %u)", f->max_links,
			  res->max_links);
		return SMCR_DECL_MAXLINKERR;
	}
	return 0;
}

int smcr_clc_client(int fd, const struct smcr_clc_ops *ops, void *arg,
		    const struct smcr_clc_cfg *cfg, struct smcr_clc_result *res)
{
	struct smcr_clc_v2_msg v2;
	struct smcr_clc_msg msg;
	struct clc c;
	uint32_t code;
	int ret;

	if (!res)
		return -EINVAL;
	clc_init(&c, fd, "client", ops, arg, cfg, res);
	if (fd < 0 || !ops || !ops->propose || !ops->accept)
		return clc_abort(&c, -EINVAL, 0);

	/* Proposal, or a Decline in its place */
	code = ops->propose(arg, fd, &res->proposal);
	if (code)
		return clc_decline(&c, code);
	res->version = 1;
	if (c.cfg.eid_count) {
		/* v2 and v1: the server picks the highest it can do */
		memset(&v2, 0, sizeof(v2));
		v2.hdr.type = SMCR_CLC_PROPOSAL;
		v2.proposal.typev1 = SMCR_CLC_TYPE_R;
		v2.proposal.typev2 = SMCR_CLC_TYPE_R;
		v2.proposal.v1 = res->proposal;
		memcpy(v2.proposal.roce_gid, res->proposal.gid, SMCR_GID_LEN);
		v2.proposal.release = our_release(&c);
		if (v2.proposal.release >= SMCR_CLC_RELEASE_1) {
			v2.proposal.max_conns = c.cfg.max_conns;
			v2.proposal.max_links = c.cfg.max_links;
		}
		v2.proposal.eid_count = c.cfg.eid_count;
		memcpy(v2.proposal.eids, c.cfg.eids, sizeof(v2.proposal.eids));
		if (!clc_send_v2(&c, &v2, "Proposal", &ret))
			return ret;
	} else {
		memset(&msg, 0, sizeof(msg));
		msg.hdr.type = SMCR_CLC_PROPOSAL;
		msg.proposal = res->proposal;
		if (!clc_send(&c, &msg, "Proposal", &ret))
			return ret;
	}
	res->have_proposal = true;
	res->stats.proposals_sent++;

	/* Accept or Decline */
	switch (clc_receive(&c, SMCR_CLC_ACCEPT, c.cfg.reply_timeout_ms,
			    SMCR_DECL_TIMEOUT_ACCEPT, false, &msg,
			    c.cfg.eid_count ? &v2 : NULL, &ret)) {
	case RXR_DONE:
		return ret;
	case RXR_MSG2:
		if (!eid_ours(&c, v2.accept.eid))
			return clc_decline(&c, SMCR_DECL_VERSMISMAT);
		res->version = SMCR_CLC_VERSION_2;
		memcpy(res->eid, v2.accept.eid, SMCR_EID_LEN);
		msg.accept = v2.accept.r;
		if (v2.accept.r.first_contact) {
			code = v21_accept_rx(&c, &v2.accept);
			if (code) {
				res->accept = msg.accept;
				res->have_accept = true;
				res->stats.accepts_rcvd++;
				return clc_decline(&c, code);
			}
		}
		break;
	case RXR_V2:
		return clc_decline(&c, SMCR_DECL_VERSMISMAT);
	case RXR_RANGE:
		/* C.6: a reserved enumerated value (the QP MTU) */
		return clc_decline(&c, SMCR_DECL_CNFERR);
	case RXR_LONG:		/* only for a Proposal: not reached */
		return clc_proto_error(&c, SMCR_E_NOTTYPE, "(a message out of turn)");
	case RXR_MSG:
		break;
	}
	res->accept = msg.accept;
	res->have_accept = true;
	res->first_contact = msg.accept.first_contact;
	res->stats.accepts_rcvd++;

	/* Confirm, or a Decline in its place */
	code = ops->accept(arg, fd, &res->proposal, &res->accept, &res->confirm);
	if (code)
		return clc_decline(&c, code);
	c.set_up = true;
	res->confirm.first_contact = false;
	if (res->version == SMCR_CLC_VERSION_2) {
		memset(&v2, 0, sizeof(v2));
		v2.hdr.type = SMCR_CLC_CONFIRM;
		v2.confirm.r = res->confirm;
		v2.confirm.r.first_contact = res->first_contact;
		memcpy(v2.confirm.eid, res->eid, SMCR_EID_LEN);
		if (res->first_contact) {
			fce_fill(&v2.confirm, res);
			/* the GIDs for more links: this link's only, for now */
			v2.confirm.gid_count = 1;
			memcpy(v2.confirm.gids[0], res->confirm.gid, SMCR_GID_LEN);
		}
		if (!clc_send_v2(&c, &v2, "Confirm", &ret))
			return ret;
	} else {
		memset(&msg, 0, sizeof(msg));
		msg.hdr.type = SMCR_CLC_CONFIRM;
		msg.confirm = res->confirm;
		if (!clc_send(&c, &msg, "Confirm", &ret))
			return ret;
	}
	res->have_confirm = true;
	res->stats.confirms_sent++;
	return clc_smcr(&c);
}

int smcr_clc_server(int fd, const struct smcr_clc_ops *ops, void *arg,
		    const struct smcr_clc_cfg *cfg, struct smcr_clc_result *res)
{
	struct smcr_clc_v2_msg v2;
	const uint8_t *eid;
	struct smcr_clc_msg msg;
	struct clc c;
	uint32_t code;
	int ret;

	if (!res)
		return -EINVAL;
	clc_init(&c, fd, "server", ops, arg, cfg, res);
	if (fd < 0 || !ops || !ops->accept_proposal || !ops->confirm)
		return clc_abort(&c, -EINVAL, 0);

	/* Proposal or Decline */
	res->version = 1;
	switch (clc_receive(&c, SMCR_CLC_PROPOSAL, c.cfg.proposal_timeout_ms,
			    SMCR_DECL_TIMEOUT_PROPOSAL, c.cfg.fallback_on_silence, &msg,
			    c.cfg.eid_count ? &v2 : NULL, &ret)) {
	case RXR_DONE:
		return ret;
	case RXR_MSG2:
		eid = offers_r(v2.proposal.typev2) ? eid_common(&c, &v2.proposal) : NULL;
		msg.hdr = v2.hdr;
		msg.proposal = v2.proposal.v1;
		if (eid && gid_v4mapped(v2.proposal.roce_gid)) {
			res->version = SMCR_CLC_VERSION_2;
			memcpy(res->eid, eid, SMCR_EID_LEN);
			memcpy(msg.proposal.gid, v2.proposal.roce_gid, SMCR_GID_LEN);
			code = v21_propose_rx(&c, &v2.proposal);
			if (code) {
				res->proposal = msg.proposal;
				res->have_proposal = true;
				res->stats.proposals_rcvd++;
				return clc_decline(&c, code);
			}
		} else if (offers_r(v2.proposal.typev1)) {
			res->stats.v2_proposals_as_v1++;
			smcr_info("clc server: CLC version %u Proposal %s: answering in v1",
				  v2.hdr.version, eid ? "with a RoCE GID we cannot route to" :
				  "without an EID of ours");
		} else {
			res->stats.proposals_rcvd++;
			res->stats.version_mismatches++;
			return clc_decline(&c, offers_r(v2.proposal.typev2) && !eid ?
					   SMCR_DECL_NOUEID : SMCR_DECL_NOSMCDEV);
		}
		break;
	case RXR_V2:
		/* No SMC-R v1 on offer, and we have no v2 (yet): what a Linux
		 * server without a v2 device answers (a v1 Decline, which a
		 * v2 Linux client takes). */
		return clc_decline(&c, SMCR_DECL_NOSMCDEV);
	case RXR_RANGE:
		/* prefix counts or lengths out of range: nothing to match */
		res->stats.proposals_rcvd++;
		return clc_decline(&c, SMCR_DECL_DIFFPREFIX);
	case RXR_LONG:
		res->stats.proposals_rcvd++;
		return clc_decline(&c, SMCR_DECL_CNFERR);
	case RXR_MSG:
		break;
	}
	res->proposal = msg.proposal;
	res->have_proposal = true;
	res->stats.proposals_rcvd++;

	/* Accept, or a Decline in its place */
	code = ops->accept_proposal(arg, fd, &res->proposal, &res->accept);
	if (code)
		return clc_decline(&c, code);
	c.set_up = true;
	res->first_contact = res->accept.first_contact;
	if (res->version == SMCR_CLC_VERSION_2) {
		memset(&v2, 0, sizeof(v2));
		v2.hdr.type = SMCR_CLC_ACCEPT;
		v2.accept.r = res->accept;
		memcpy(v2.accept.eid, res->eid, SMCR_EID_LEN);
		if (res->first_contact)
			fce_fill(&v2.accept, res);
		if (!clc_send_v2(&c, &v2, "Accept", &ret))
			return ret;
	} else {
		memset(&msg, 0, sizeof(msg));
		msg.hdr.type = SMCR_CLC_ACCEPT;
		msg.accept = res->accept;
		if (!clc_send(&c, &msg, "Accept", &ret))
			return ret;
	}
	res->have_accept = true;
	res->stats.accepts_sent++;

	/* Confirm or Decline */
	switch (clc_receive(&c, SMCR_CLC_CONFIRM, c.cfg.reply_timeout_ms,
			    SMCR_DECL_TIMEOUT_CONFIRM, false, &msg,
			    res->version == SMCR_CLC_VERSION_2 ? &v2 : NULL, &ret)) {
	case RXR_DONE:
		return ret;
	case RXR_MSG2:
		msg.confirm = v2.confirm.r;
		if (res->first_contact) {
			code = v21_confirm_rx(&c, &v2.confirm);
			if (code) {
				res->confirm = msg.confirm;
				res->have_confirm = true;
				res->stats.confirms_rcvd++;
				return clc_decline(&c, code);
			}
		}
		break;
	case RXR_V2:
	case RXR_RANGE:
	case RXR_LONG:
		/* The decoder checks no enumerated value of a Confirm, and a
		 * v2 Confirm to our v1 Accept is out of step: C.6. */
		return clc_proto_error(&c, SMCR_E_VERSION, "(a v2 Confirm)");
	case RXR_MSG:
		if (res->version == SMCR_CLC_VERSION_2)
			return clc_proto_error(&c, SMCR_E_VERSION, "(a v1 Confirm to a v2 Accept)");
		break;
	}
	res->confirm = msg.confirm;
	res->have_confirm = true;
	res->stats.confirms_rcvd++;

	/* After our Accept a Decline is allowed only on first contact (C.3). */
	if (res->first_contact && !smcr_mtu_valid(res->confirm.qp_mtu))
		code = SMCR_DECL_CNFERR;
	else
		code = ops->confirm(arg, fd, &res->accept, &res->confirm);
	if (code) {
		if (res->first_contact)
			return clc_decline(&c, code);
		return clc_abort(&c, -ECONNABORTED, code);
	}
	return clc_smcr(&c);
}

/* ---- the first-contact window after CLC (C.2) ---------------------------- */

int smcr_clc_send_decline(int fd, const struct smcr_peer_id *id, uint32_t diagnosis,
			  int timeout_ms, struct smcr_clc_stats *stats)
{
	static const struct smcr_peer_id zero;

	if (fd < 0)
		return -EINVAL;
	return send_decline(fd, id ? id : &zero, diagnosis, timeout_or_default(timeout_ms),
			    NULL, stats);
}

int smcr_clc_recv_decline(int fd, int timeout_ms, struct smcr_clc_decline *decl,
			  struct smcr_clc_stats *stats)
{
	struct smcr_clc_msg msg;
	struct rxmsg m;
	int rc;

	if (fd < 0 || !decl)
		return -EINVAL;
	if (timeout_ms < 0)
		timeout_ms = SMCR_CLC_DEFAULT_TIMEOUT_MS;
	rc = rx_msg(fd, timeout_ms, SMCR_CLC_DEFAULT_TIMEOUT_MS, &m);
	if (rc == -ETIMEDOUT && m.got == 0)
		return 0;
	if (rc < 0)
		goto fail;
	if (m.kind == RX_V2 && m.hdr.type == SMCR_CLC_DECLINE) {
		if (stats)
			stats->version_mismatches++;
		v2_decline(&m, decl);
	} else if (m.kind == RX_V1) {
		rc = smcr_clc_decode_type(m.buf, m.hdr.length, SMCR_CLC_DECLINE, &msg);
		if (rc < 0) {
			rc = -EPROTO;
			goto fail;
		}
		*decl = msg.decline;
	} else {
		rc = -EPROTO;
		goto fail;
	}
	if (stats) {
		stats->declines_rcvd++;
		stats->declines_rcvd_by[smcr_clc_reason_index(decl->diagnosis)]++;
	}
	return 1;
fail:
	if (stats) {
		if (rc == -ETIMEDOUT)
			stats->timeouts++;
		if (rc == -EPROTO)
			stats->proto_errors++;
	}
	return rc;
}

/* ---- local prefixes -------------------------------------------------------- */

static unsigned int mask_len(const uint8_t *mask, size_t len)
{
	unsigned int n = 0;
	size_t i;

	for (i = 0; i < len; i++) {
		uint8_t b = mask[i];

		while (b & 0x80) {
			n++;
			b = (uint8_t)(b << 1);
		}
		if (mask[i] != 0xff)
			break;
	}
	return n;
}

static void prefix_of(const uint8_t *addr, unsigned int bits, uint8_t *out, size_t len)
{
	size_t i;

	for (i = 0; i < len; i++) {
		unsigned int keep = bits >= 8 * (i + 1) ? 8 : bits > 8 * i ? bits - 8 * (unsigned int)i : 0;

		out[i] = keep ? (uint8_t)(addr[i] & (0xff << (8 - keep))) : 0;
	}
}

/* The local address of fd: family AF_INET (v4-mapped IPv6 included, as
 * *v4, host order) or AF_INET6 (*v6), or -errno. */
static int local_addr(int fd, uint32_t *v4, struct in6_addr *v6)
{
	struct sockaddr_storage ss;
	socklen_t sl = sizeof(ss);

	if (getsockname(fd, (struct sockaddr *)&ss, &sl) < 0)
		return -errno;
	if (ss.ss_family == AF_INET) {
		*v4 = ntohl(((struct sockaddr_in *)&ss)->sin_addr.s_addr);
		return AF_INET;
	}
	if (ss.ss_family == AF_INET6) {
		*v6 = ((struct sockaddr_in6 *)&ss)->sin6_addr;
		if (IN6_IS_ADDR_V4MAPPED(v6)) {
			const uint8_t *b = v6->s6_addr;

			*v4 = (uint32_t)b[12] << 24 | (uint32_t)b[13] << 16 |
				(uint32_t)b[14] << 8 | b[15];
			return AF_INET;
		}
		return AF_INET6;
	}
	return -EAFNOSUPPORT;
}

static uint32_t v4_mask(unsigned int bits)
{
	return bits == 0 ? 0 : bits >= 32 ? 0xffffffffu : ~0u << (32 - bits);
}

/* The IPv4 interface address covering addr (an exact match preferred). */
static const struct ifaddrs *find_v4(const struct ifaddrs *list, uint32_t addr)
{
	const struct ifaddrs *ifa, *cover = NULL;

	for (ifa = list; ifa; ifa = ifa->ifa_next) {
		uint32_t a, m;

		if (!ifa->ifa_addr || ifa->ifa_addr->sa_family != AF_INET || !ifa->ifa_netmask)
			continue;
		a = ntohl(((const struct sockaddr_in *)ifa->ifa_addr)->sin_addr.s_addr);
		m = ntohl(((const struct sockaddr_in *)ifa->ifa_netmask)->sin_addr.s_addr);
		if (a == addr)
			return ifa;
		if (!cover && ((a ^ addr) & m) == 0)
			cover = ifa;
	}
	return cover;
}

static const struct ifaddrs *find_v6(const struct ifaddrs *list, const struct in6_addr *addr)
{
	const struct ifaddrs *ifa;

	for (ifa = list; ifa; ifa = ifa->ifa_next)
		if (ifa->ifa_addr && ifa->ifa_addr->sa_family == AF_INET6 &&
		    memcmp(&((const struct sockaddr_in6 *)ifa->ifa_addr)->sin6_addr,
			   addr, sizeof(*addr)) == 0)
			return ifa;
	return NULL;
}

/* The prefix of an IPv6 interface address, false for link-local ones. */
static bool v6_prefix(const struct ifaddrs *ifa, struct smcr_ipv6_prefix *p)
{
	const struct in6_addr *a = &((const struct sockaddr_in6 *)ifa->ifa_addr)->sin6_addr;
	unsigned int bits = 128;

	if (IN6_IS_ADDR_LINKLOCAL(a))
		return false;
	if (ifa->ifa_netmask)
		bits = mask_len(((const struct sockaddr_in6 *)ifa->ifa_netmask)->sin6_addr.s6_addr, 16);
	prefix_of(a->s6_addr, bits, p->prefix, sizeof(p->prefix));
	p->len = (uint8_t)bits;
	return true;
}

static bool same_if(const struct ifaddrs *a, const struct ifaddrs *b)
{
	return strcmp(a->ifa_name, b->ifa_name) == 0;
}

int smcr_clc_local_prefixes(int fd, struct smcr_clc_proposal *prop)
{
	struct ifaddrs *list;
	const struct ifaddrs *own, *ifa;
	struct in6_addr v6;
	uint32_t v4 = 0;
	int family, rc = 0;

	family = local_addr(fd, &v4, &v6);
	if (family < 0)
		return family;
	if (getifaddrs(&list) < 0)
		return -errno;
	prop->ipv4_subnet = 0;
	prop->ipv4_mask_len = 0;
	prop->ipv6_prefix_count = 0;
	if (family == AF_INET) {
		own = find_v4(list, v4);
		if (own) {
			uint32_t m = ntohl(((const struct sockaddr_in *)own->ifa_netmask)->sin_addr.s_addr);

			prop->ipv4_subnet = v4 & m;
			prop->ipv4_mask_len = (uint8_t)mask_len((const uint8_t *)
				&((const struct sockaddr_in *)own->ifa_netmask)->sin_addr, 4);
		} else {
			rc = -EADDRNOTAVAIL;
		}
		goto out;
	}
	own = find_v6(list, &v6);
	if (!own) {
		rc = -EADDRNOTAVAIL;
		goto out;
	}
	for (ifa = list; ifa && prop->ipv6_prefix_count < SMCR_CLC_MAX_IPV6_PREFIXES;
	     ifa = ifa->ifa_next) {
		struct smcr_ipv6_prefix p;
		unsigned int i;
		bool dup = false;

		if (!ifa->ifa_addr || ifa->ifa_addr->sa_family != AF_INET6 || !same_if(ifa, own))
			continue;
		if (!v6_prefix(ifa, &p))
			continue;
		for (i = 0; i < prop->ipv6_prefix_count; i++)
			if (prop->ipv6_prefix[i].len == p.len &&
			    memcmp(prop->ipv6_prefix[i].prefix, p.prefix, sizeof(p.prefix)) == 0)
				dup = true;
		if (!dup)
			prop->ipv6_prefix[prop->ipv6_prefix_count++] = p;
	}
out:
	freeifaddrs(list);
	return rc;
}

int smcr_clc_prefix_match(int fd, const struct smcr_clc_proposal *prop)
{
	struct ifaddrs *list;
	const struct ifaddrs *own, *ifa;
	struct in6_addr v6;
	uint32_t v4 = 0;
	int family, rc = 0;

	family = local_addr(fd, &v4, &v6);
	if (family < 0)
		return family;
	if (getifaddrs(&list) < 0)
		return -errno;
	own = family == AF_INET ? find_v4(list, v4) : find_v6(list, &v6);
	if (!own) {
		rc = -EADDRNOTAVAIL;
		goto out;
	}
	for (ifa = list; ifa && rc == 0; ifa = ifa->ifa_next) {
		if (!ifa->ifa_addr || ifa->ifa_addr->sa_family != family || !same_if(ifa, own))
			continue;
		if (family == AF_INET) {
			uint32_t a, m;

			if (!ifa->ifa_netmask || prop->ipv4_mask_len > 32)
				continue;
			a = ntohl(((const struct sockaddr_in *)ifa->ifa_addr)->sin_addr.s_addr);
			m = ntohl(((const struct sockaddr_in *)ifa->ifa_netmask)->sin_addr.s_addr);
			if (m == v4_mask(prop->ipv4_mask_len) && (a & m) == prop->ipv4_subnet)
				rc = 1;
		} else {
			struct smcr_ipv6_prefix p;
			unsigned int i;

			if (!v6_prefix(ifa, &p))
				continue;
			for (i = 0; i < prop->ipv6_prefix_count && i < SMCR_CLC_MAX_IPV6_PREFIXES; i++)
				if (prop->ipv6_prefix[i].len == p.len &&
				    memcmp(prop->ipv6_prefix[i].prefix, p.prefix, sizeof(p.prefix)) == 0)
					rc = 1;
		}
	}
out:
	freeifaddrs(list);
	return rc;
}
