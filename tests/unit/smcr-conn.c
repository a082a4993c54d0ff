/* SPDX-License-Identifier: BSD-3-Clause */
/* smcrbd: the CDC data path of two peers driven against each other through
 * the in-memory wire: random write sizes, wrap-around, small windows, close,
 * abort, bad CDCs, and failover between two links. */
#include <config.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "unit.h"
#include "smcr-suites.h"
#include "conn.h"
#include "memwire.h"

#define NCONN 4
#define NLINK 2

struct peer {
	const char *name;
	struct smcr_rmb_pool rmbs, sndbufs;
	struct smcr_conn conn[NCONN];
	struct smcr_peer_rmb peer_rmb[NCONN];
	struct memwire_end *ends[NLINK];
	unsigned int downs;
	/* stream state per connection */
	uint64_t sent[NCONN], rcvd[NCONN];
	unsigned int bad_bytes;
};

static struct peer A, B;
static struct memwire_end wire[NLINK][2];	/* [slot][0] is A's end */
/* RMBE layout under test: 0 (Linux, the default) or 4 (the RFC's). */
static uint8_t EYE;
static struct smcr_cdc_msg last_cdc;		/* as the last receiver saw it */
static struct smcr_cdc_msg last_cdc_a;		/* the last one A received */
static uint32_t rng = 12345;

static uint32_t rnd(void)
{
	rng = rng * 1103515245u + 12345u;
	return rng >> 8;
}

/* Byte i of the stream from side `from` on connection c. */
static uint8_t stream_byte(const struct peer *from, unsigned int c, uint64_t i)
{
	uint64_t x = i * 0x9E3779B97F4A7C15ull + c * 7919u + (from == &A ? 1 : 2);

	x ^= x >> 29;
	return (uint8_t)(x ^ (x >> 17));
}

static struct smcr_conn *conn_by_token(struct peer *p, uint32_t token)
{
	unsigned int i;

	for (i = 0; i < NCONN; i++)
		if (p->conn[i].token == token)
			return &p->conn[i];
	return NULL;
}

static void h_recv(struct smcr_link *link, const uint8_t msg[SMCR_MSG_LEN])
{
	struct peer *p = link->handler_arg;
	struct smcr_cdc_msg m;
	struct smcr_conn *conn;

	CU_ASSERT_EQUAL_FATAL(smcr_cdc_decode(msg, SMCR_MSG_LEN, &m), SMCR_CDC_LEN);
	if (p == &B)
		last_cdc = m;
	else
		last_cdc_a = m;
	if (m.failover_validation) {
		/* As the link group: CDCs still queued on other links first. */
		unsigned int s;

		for (s = 0; s < NLINK; s++)
			if (&p->ends[s]->link != link)
				p->ends[s]->link.ops->poll(&p->ends[s]->link);
	}
	conn = conn_by_token(p, m.token);
	CU_ASSERT_PTR_NOT_NULL_FATAL(conn);
	smcr_conn_rx_cdc_on(conn, &m, link);
}

static void h_send_done(struct smcr_link *link, uint64_t wr_id, int status)
{
	struct peer *p = link->handler_arg;
	struct smcr_conn *conn = conn_by_token(p, smcr_wr_token(wr_id));

	unsigned int i;

	if (conn && smcr_wr_tag(wr_id) == SMCR_WR_TAG_CDC)
		smcr_conn_cdc_done(conn, smcr_wr_seq(wr_id), status);
	/* As the link group does: room on the link, retry who waits. */
	for (i = 0; i < NCONN; i++)
		if (p->conn[i].link == link && smcr_conn_tx_pending(&p->conn[i]))
			smcr_conn_flush(&p->conn[i]);
}

static void h_down(struct smcr_link *link, int reason)
{
	struct peer *p = link->handler_arg;
	unsigned int i, s;

	(void)reason;
	p->downs++;
	for (i = 0; i < NCONN; i++) {
		smcr_conn_link_gone(&p->conn[i], link);
		if (p->conn[i].link != link)
			continue;
		for (s = 0; s < NLINK; s++) {
			if (&p->ends[s]->link != link &&
			    p->ends[s]->link.state == SMCR_LINK_ACTIVE) {
				CU_ASSERT_EQUAL(smcr_conn_failover(&p->conn[i],
								   &p->ends[s]->link), 0);
				break;
			}
		}
	}
}

static const struct smcr_link_handler handler = {
	.send_done = h_send_done,
	.recv = h_recv,
	.down = h_down,
};

/* Make every RMB of p reachable by the other side on every link. */
static void expose(struct peer *p, unsigned int side)
{
	struct smcr_rmb *rmb;
	unsigned int code, s;

	for (s = 0; s < NLINK; s++)
		smcr_rmb_pool_for_each(&p->rmbs, code, rmb)
			memwire_add_mr(&wire[s][side], rmb->buf, rmb->len,
				       rmb->id * 16 + s);
}

static void setup(size_t rmbe_a, size_t rmbe_b, unsigned int sq_depth)
{
	struct smcr_rmbe ea[NCONN], eb[NCONN], sa, sb;
	unsigned int i, s;
	bool fresh;

	memset(&A, 0, sizeof(A));
	memset(&B, 0, sizeof(B));
	A.name = "A";
	B.name = "B";
	smcr_rmb_pool_init(&A.rmbs, 0);
	smcr_rmb_pool_init(&A.sndbufs, 0);
	smcr_rmb_pool_init(&B.rmbs, 0);
	smcr_rmb_pool_init(&B.sndbufs, 0);
	smcr_rmb_pool_set_layout(&A.rmbs, EYE);
	smcr_rmb_pool_set_layout(&A.sndbufs, EYE);
	smcr_rmb_pool_set_layout(&B.rmbs, EYE);
	smcr_rmb_pool_set_layout(&B.sndbufs, EYE);
	for (s = 0; s < NLINK; s++) {
		memwire_pair(&wire[s][0], &wire[s][1], (uint8_t)(s + 1), (uint8_t)s,
			     sq_depth, &handler, &A, &handler, &B);
		A.ends[s] = &wire[s][0];
		B.ends[s] = &wire[s][1];
	}
	for (i = 0; i < NCONN; i++) {
		CU_ASSERT_EQUAL_FATAL(smcr_rmbe_alloc(&A.rmbs, rmbe_a, &ea[i], &fresh), 0);
		CU_ASSERT_EQUAL_FATAL(smcr_rmbe_alloc(&B.rmbs, rmbe_b, &eb[i], &fresh), 0);
	}
	expose(&A, 0);
	expose(&B, 1);
	for (i = 0; i < NCONN; i++) {
		struct smcr_conn_params pa, pb;

		/* The class that holds the element in either layout. */
		CU_ASSERT_EQUAL_FATAL(smcr_rmbe_alloc(&A.sndbufs, eb[i].rmb->elem_size -
						      SMCR_RMBE_EYE_LEN, &sa, &fresh), 0);
		CU_ASSERT_EQUAL_FATAL(smcr_rmbe_alloc(&B.sndbufs, ea[i].rmb->elem_size -
						      SMCR_RMBE_EYE_LEN, &sb, &fresh), 0);
		for (s = 0; s < NLINK; s++) {
			A.peer_rmb[i].vaddr[s] = (uintptr_t)eb[i].rmb->buf;
			A.peer_rmb[i].rkey[s] = eb[i].rmb->id * 16 + s;
			B.peer_rmb[i].vaddr[s] = (uintptr_t)ea[i].rmb->buf;
			B.peer_rmb[i].rkey[s] = ea[i].rmb->id * 16 + s;
		}
		pa = (struct smcr_conn_params){
			.token = 0xA000 + i, .peer_token = 0xB000 + i,
			.rmbe = ea[i], .sndbuf = sa, .peer_rmb = &A.peer_rmb[i],
			.peer_index = eb[i].index, .peer_elem_size = eb[i].rmb->elem_size,
			.link = &A.ends[i % NLINK]->link,
		};
		pb = (struct smcr_conn_params){
			.token = 0xB000 + i, .peer_token = 0xA000 + i,
			.rmbe = eb[i], .sndbuf = sb, .peer_rmb = &B.peer_rmb[i],
			.peer_index = ea[i].index, .peer_elem_size = ea[i].rmb->elem_size,
			.link = &B.ends[i % NLINK]->link,
		};
		CU_ASSERT_EQUAL_FATAL(smcr_conn_init(&A.conn[i], &pa), 0);
		CU_ASSERT_EQUAL_FATAL(smcr_conn_init(&B.conn[i], &pb), 0);
	}
}

static void teardown(void)
{
	unsigned int s;

	for (s = 0; s < NLINK; s++) {
		memwire_free(&wire[s][0]);
		memwire_free(&wire[s][1]);
	}
	smcr_rmb_pool_fini(&A.rmbs);
	smcr_rmb_pool_fini(&A.sndbufs);
	smcr_rmb_pool_fini(&B.rmbs);
	smcr_rmb_pool_fini(&B.sndbufs);
}

static struct memwire_end *all_ends[NLINK * 2];

static void run_wire(unsigned int max_steps)
{
	unsigned int i, n = 0;

	for (i = 0; i < NLINK; i++) {
		all_ends[2 * i] = &wire[i][0];
		all_ends[2 * i + 1] = &wire[i][1];
	}
	if (max_steps == 0) {
		memwire_run(all_ends, NLINK * 2);
		return;
	}
	for (i = 0; i < max_steps; i++)
		n += (unsigned int)memwire_step(all_ends[rnd() % (NLINK * 2)]);
}

/* One round: every connection of p sends a random-size piece of its stream
 * (up to total) and reads and checks what has arrived. */
static void pump(struct peer *p, struct peer *other, uint64_t total,
		 size_t max_piece, bool zero_copy)
{
	uint8_t buf[70000];
	unsigned int c;

	for (c = 0; c < NCONN; c++) {
		struct smcr_conn *conn = &p->conn[c];
		uint64_t left = total - p->sent[c];
		size_t want = 1 + rnd() % max_piece, k;
		ssize_t n;

		if (want > left)
			want = (size_t)left;
		if (want && !zero_copy) {
			for (k = 0; k < want; k++)
				buf[k] = stream_byte(p, c, p->sent[c] + k);
			n = smcr_conn_send(conn, buf, want);
			if (n > 0)
				p->sent[c] += (uint64_t)n;
			else
				CU_ASSERT_EQUAL(n, -EAGAIN);
		} else if (want) {
			struct iovec iov[2];
			ssize_t space = smcr_conn_reserve(conn, iov);
			size_t j, done = 0;

			CU_ASSERT(space >= 0);
			if (space > 0) {
				if ((size_t)space < want)
					want = (size_t)space;
				for (j = 0; j < 2 && done < want; j++) {
					uint8_t *d = iov[j].iov_base;

					for (k = 0; k < iov[j].iov_len && done < want; k++, done++)
						d[k] = stream_byte(p, c, p->sent[c] + done);
				}
				CU_ASSERT_EQUAL(smcr_conn_commit(conn, want), 0);
				p->sent[c] += want;
			}
		}
		/* Receive: copying or peeking, alternately. */
		if (rnd() & 1) {
			n = smcr_conn_recv(conn, buf, 1 + rnd() % sizeof(buf));
			for (k = 0; n > 0 && k < (size_t)n; k++)
				if (buf[k] != stream_byte(other, c, p->rcvd[c] + k))
					p->bad_bytes++;
			if (n > 0)
				p->rcvd[c] += (uint64_t)n;
		} else {
			struct iovec iov[2];
			ssize_t avail = smcr_conn_peek(conn, iov);
			size_t j, done = 0;

			if (avail > 0) {
				for (j = 0; j < 2; j++)
					for (k = 0; k < iov[j].iov_len; k++, done++)
						if (((uint8_t *)iov[j].iov_base)[k] !=
						    stream_byte(other, c, p->rcvd[c] + done))
							p->bad_bytes++;
				CU_ASSERT_EQUAL(smcr_conn_consume(conn, (size_t)avail), 0);
				p->rcvd[c] += (uint64_t)avail;
			}
		}
	}
}

static bool all_done(uint64_t total)
{
	unsigned int c;

	for (c = 0; c < NCONN; c++)
		if (A.rcvd[c] < total || B.rcvd[c] < total)
			return false;
	return true;
}

/* Stream total bytes each way on every connection; fault link 0 after
 * fault_at rounds if fault is set.  Returns the rounds used. */
static unsigned int stream(uint64_t total, size_t max_piece, unsigned int steps,
			   int fault_at, enum memwire_fault fault, bool zero_copy)
{
	unsigned int round;

	for (round = 0; round < 200000 && !all_done(total); round++) {
		if ((int)round == fault_at)
			memwire_fault(&wire[0][0], fault);
		pump(&A, &B, total, max_piece, zero_copy);
		pump(&B, &A, total, max_piece, !zero_copy);
		run_wire(steps);
		for (unsigned int c = 0; c < NCONN; c++)
			if (A.conn[c].error || B.conn[c].error)
				return round;
	}
	run_wire(0);
	return round;
}

static void check_streams(uint64_t total)
{
	unsigned int c;

	CU_ASSERT_EQUAL(A.bad_bytes, 0);
	CU_ASSERT_EQUAL(B.bad_bytes, 0);
	for (c = 0; c < NCONN; c++) {
		CU_ASSERT_EQUAL(A.conn[c].error, 0);
		CU_ASSERT_EQUAL(B.conn[c].error, 0);
		CU_ASSERT_EQUAL(A.rcvd[c], total);
		CU_ASSERT_EQUAL(B.rcvd[c], total);
	}
}

static void test_stream_small_window(void)
{
	const uint64_t total = 1u << 20;
	unsigned int c;

	/* 16 KiB RMBEs, pieces up to 6 KiB: many wraps and full windows. */
	setup(1000, 1000, 64);
	stream(total, 6000, 7, -1, MEMWIRE_OK, false);
	check_streams(total);
	for (c = 0; c < NCONN; c++) {
		/* 1 MiB through a 16 KiB (- 4) area wraps 64 times. */
		CU_ASSERT(A.conn[c].rx_cons.wrap >= 64);
		CU_ASSERT(B.conn[c].tx_prod.wrap >= 64);
		CU_ASSERT_EQUAL(A.conn[c].stats.bytes_recv, total);
		CU_ASSERT_EQUAL(A.conn[c].stats.bytes_sent, total);
		CU_ASSERT(A.conn[c].stats.blocked > 0);
		CU_ASSERT(A.conn[c].stats.cdc_stale == 0);
	}
	teardown();
}

/* A peer that offers an RMBE beyond the RFC's 512 KiB (Linux 6.11+ with
 * net.smc.rmem raised, or our own end): the writer's send buffer is as
 * large, cursors wrap at 1 MiB, and the data comes through intact. */
static void test_stream_large_peer_rmbe(void)
{
	const uint64_t total = 5u << 19;
	unsigned int c;

	setup(60000, (1u << 20) - SMCR_RMBE_EYE_LEN, 16);
	CU_ASSERT_EQUAL(B.conn[0].rmbe.rmb->size_code, 6);
	stream(total, 65000, 3, -1, MEMWIRE_OK, false);
	check_streams(total);
	for (c = 0; c < NCONN; c++) {
		CU_ASSERT_EQUAL(A.conn[c].tx_len, (1u << 20) - EYE);
		CU_ASSERT_EQUAL(A.conn[c].sndbuf.rmb->elem_size, 1u << 20);
		CU_ASSERT(A.conn[c].tx_prod.wrap >= 2);
		CU_ASSERT(B.conn[c].rx_cons.wrap >= 2);
	}
	teardown();
}

static void test_stream_zero_copy_asym(void)
{
	const uint64_t total = 3u << 20;

	/* Different RMBE sizes each way, zero-copy sends one way. */
	setup(60000, 200000, 16);
	stream(total, 65000, 3, -1, MEMWIRE_OK, true);
	check_streams(total);
	CU_ASSERT_EQUAL(A.conn[0].tx_len, 256 * 1024 - EYE);
	CU_ASSERT_EQUAL(B.conn[0].tx_len, 64 * 1024 - EYE);
	teardown();
}

static void test_window_update_threshold(void)
{
	uint8_t buf[16384];
	struct smcr_conn *a, *b;
	uint64_t cdc_before;

	setup(1000, 1000, 64);
	a = &A.conn[0];
	b = &B.conn[0];
	memset(buf, 7, sizeof(buf));
	/* 1 KiB: B consumes it, the sender's window is still above half: no
	 * CDC only for the window (§4.5.1 example a), nor when more data
	 * comes (less than a tenth of the window to gain). */
	CU_ASSERT_EQUAL(smcr_conn_send(a, buf, 1024), 1024);
	run_wire(0);
	cdc_before = b->stats.cdc_sent;
	CU_ASSERT_EQUAL(smcr_conn_recv(b, buf, sizeof(buf)), 1024);
	run_wire(0);
	CU_ASSERT_EQUAL(b->stats.cdc_sent, cdc_before);
	CU_ASSERT_EQUAL(b->stats.window_updates, 0);
	/* Fill past half: consuming now frees more than a tenth: update. */
	CU_ASSERT_EQUAL(smcr_conn_send(a, buf, 8192), 8192);
	run_wire(0);
	CU_ASSERT_EQUAL(smcr_conn_recv(b, buf, sizeof(buf)), 8192);
	run_wire(0);
	CU_ASSERT_EQUAL(b->stats.window_updates, 1);
	CU_ASSERT_EQUAL(smcr_cursor_cmp(a->tx_len, &a->tx_peer_cons, &a->tx_prod), 0);
	teardown();
}

/* Autocork on every connection of both peers (0: off, as setup leaves it). */
static void cork(uint32_t bytes)
{
	unsigned int i;

	for (i = 0; i < NCONN; i++)
		A.conn[i].tx_cork = B.conn[i].tx_cork = bytes;
}

static void test_autocork(void)
{
	uint8_t buf[16384], got[16384];
	struct smcr_conn *a, *b;
	unsigned int i;

	EYE = 0;
	setup(1000, 1000, 64);
	cork(65536);
	a = &A.conn[0];
	b = &B.conn[0];
	for (i = 0; i < sizeof(buf); i++)
		buf[i] = (uint8_t)(i * 7 + 1);
	/* Nothing in flight: the first send goes at once; the next two wait
	 * for its CDC's completion and then go as one write and one CDC. */
	CU_ASSERT_EQUAL(smcr_conn_send(a, buf, 100), 100);
	CU_ASSERT_EQUAL(a->stats.cdc_sent, 1);
	CU_ASSERT_EQUAL(smcr_conn_send(a, buf + 100, 100), 100);
	CU_ASSERT_EQUAL(smcr_conn_send(a, buf + 200, 100), 100);
	CU_ASSERT_EQUAL(a->stats.cdc_sent, 1);
	CU_ASSERT_EQUAL(a->stats.writes, 1);
	CU_ASSERT_EQUAL(a->stats.corked, 2);
	run_wire(0);
	CU_ASSERT_EQUAL(a->stats.cdc_sent, 2);
	CU_ASSERT_EQUAL(a->stats.writes, 2);
	CU_ASSERT_EQUAL(smcr_conn_recv(b, got, sizeof(got)), 300);
	CU_ASSERT_EQUAL(memcmp(got, buf, 300), 0);
	/* Half the peer's RMBE or more is not held. */
	CU_ASSERT_EQUAL(smcr_conn_send(a, buf, 100), 100);
	CU_ASSERT_EQUAL(smcr_conn_send(a, buf + 100, a->tx_len / 2), a->tx_len / 2);
	CU_ASSERT_EQUAL(a->stats.cdc_sent, 4);
	run_wire(0);
	CU_ASSERT_EQUAL(smcr_conn_recv(b, got, sizeof(got)), 100 + a->tx_len / 2);
	CU_ASSERT_EQUAL(memcmp(got, buf, 100 + a->tx_len / 2), 0);
	/* Closing flushes what is held, with C. */
	CU_ASSERT_EQUAL(smcr_conn_send(a, buf, 100), 100);
	CU_ASSERT_EQUAL(smcr_conn_send(a, buf + 100, 100), 100);
	CU_ASSERT_EQUAL(smcr_conn_close(a), 0);
	run_wire(0);
	CU_ASSERT_EQUAL(smcr_conn_recv(b, got, sizeof(got)), 200);
	CU_ASSERT_EQUAL(memcmp(got, buf, 200), 0);
	CU_ASSERT(b->peer_closed);
	CU_ASSERT_EQUAL(smcr_conn_recv(b, got, sizeof(got)), 0);
	CU_ASSERT_EQUAL(a->error, 0);
	CU_ASSERT_EQUAL(b->error, 0);
	teardown();
}

/* The random streams with autocork: nothing is held for ever. */
static void test_stream_autocork(void)
{
	const uint64_t total = 1u << 20;
	unsigned int c;

	EYE = 0;
	setup(1000, 1000, 64);
	cork(65536);
	stream(total, 3000, 7, -1, MEMWIRE_OK, false);
	check_streams(total);
	for (c = 0; c < NCONN; c++)
		CU_ASSERT(A.conn[c].stats.corked > 0);
	teardown();
}

/* A link cut with sends held: the failover sends them. */
static void test_failover_autocork(void)
{
	const uint64_t total = 1u << 20;

	EYE = 0;
	setup(30000, 30000, 16);
	cork(65536);
	stream(total, 3000, 5, 40, MEMWIRE_CUT, false);
	check_streams(total);
	CU_ASSERT_EQUAL(A.downs, 1);
	CU_ASSERT_EQUAL(B.downs, 1);
	CU_ASSERT(A.conn[0].stats.corked > 0);
	CU_ASSERT_EQUAL(A.conn[0].stats.failovers, 1);
	teardown();
}


static void test_close_orders(void)
{
	uint8_t buf[100];
	struct smcr_conn *a, *b;

	setup(1000, 1000, 64);
	a = &A.conn[0];
	b = &B.conn[0];
	/* A half-closes after data: B reads the data, then end of stream,
	 * and can still send to A. */
	CU_ASSERT_EQUAL(smcr_conn_send(a, "hello", 5), 5);
	CU_ASSERT_EQUAL(smcr_conn_shutdown(a), 0);
	CU_ASSERT_EQUAL(smcr_conn_send(a, "x", 1), -EPIPE);
	run_wire(0);
	CU_ASSERT_EQUAL(smcr_conn_recv(b, buf, sizeof(buf)), 5);
	CU_ASSERT_EQUAL(smcr_conn_recv(b, buf, sizeof(buf)), 0);
	CU_ASSERT(smcr_conn_poll(b) & SMCR_POLLHUP);
	CU_ASSERT_EQUAL(smcr_conn_send(b, "world", 5), 5);
	CU_ASSERT_EQUAL(smcr_conn_close(b), 0);
	run_wire(0);
	CU_ASSERT_EQUAL(smcr_conn_recv(a, buf, sizeof(buf)), 5);
	CU_ASSERT_EQUAL(memcmp(buf, "world", 5), 0);
	CU_ASSERT_EQUAL(smcr_conn_recv(a, buf, sizeof(buf)), 0);
	CU_ASSERT_FALSE(smcr_conn_finished(a));
	CU_ASSERT_EQUAL(smcr_conn_close(a), 0);
	run_wire(0);
	CU_ASSERT(smcr_conn_finished(a));
	CU_ASSERT(smcr_conn_finished(b));

	/* The other order on another connection: B closes first. */
	a = &A.conn[1];
	b = &B.conn[1];
	CU_ASSERT_EQUAL(smcr_conn_close(b), 0);
	run_wire(0);
	CU_ASSERT_EQUAL(smcr_conn_recv(a, buf, sizeof(buf)), 0);
	CU_ASSERT_EQUAL(smcr_conn_send(a, "late", 4), -EPIPE);
	CU_ASSERT_EQUAL(smcr_conn_close(a), 0);
	run_wire(0);
	CU_ASSERT(smcr_conn_finished(a));
	CU_ASSERT(smcr_conn_finished(b));
	CU_ASSERT_EQUAL(a->error, 0);
	CU_ASSERT_EQUAL(b->error, 0);
	teardown();
}

static void test_abort_mid_transfer(void)
{
	uint8_t buf[4096];

	setup(1000, 1000, 64);
	memset(buf, 1, sizeof(buf));
	CU_ASSERT_EQUAL(smcr_conn_send(&A.conn[0], buf, sizeof(buf)), (ssize_t)sizeof(buf));
	smcr_conn_abort(&A.conn[0], -ECONNABORTED);
	run_wire(0);
	CU_ASSERT_EQUAL(smcr_conn_recv(&B.conn[0], buf, sizeof(buf)), -ECONNRESET);
	CU_ASSERT(smcr_conn_poll(&B.conn[0]) & SMCR_POLLERR);
	CU_ASSERT(smcr_conn_finished(&A.conn[0]));
	CU_ASSERT(smcr_conn_finished(&B.conn[0]));
	/* The other connections are untouched. */
	CU_ASSERT_EQUAL(smcr_conn_send(&A.conn[1], buf, 10), 10);
	run_wire(0);
	CU_ASSERT_EQUAL(smcr_conn_recv(&B.conn[1], buf, sizeof(buf)), 10);
	teardown();
}

/* An abort leaves its posted CDCs (and the writes before them) in flight:
 * a close waits for them before the send buffer goes back.  If the link
 * fails instead, its QP flushed them: the failover must count none left,
 * or the close would wait out its linger. */
static void test_abort_then_link_cut(void)
{
	uint8_t buf[4096];

	setup(1000, 1000, 64);
	memset(buf, 2, sizeof(buf));
	CU_ASSERT_EQUAL(smcr_conn_send(&A.conn[0], buf, sizeof(buf)), (ssize_t)sizeof(buf));
	smcr_conn_abort(&A.conn[0], -ECONNABORTED);
	CU_ASSERT(A.conn[0].inflight_n > 0);
	memwire_fault(&wire[0][0], MEMWIRE_CUT);
	run_wire(0);
	CU_ASSERT_EQUAL(A.downs, 1);
	CU_ASSERT_PTR_EQUAL(A.conn[0].link, &wire[1][0].link);
	CU_ASSERT_EQUAL(A.conn[0].inflight_n, 0);
	CU_ASSERT(smcr_conn_finished(&A.conn[0]));
	teardown();
}

static void test_bad_cdc(void)
{
	uint8_t buf[100];
	struct smcr_cdc_msg m;
	struct smcr_conn *b = &B.conn[2];

	setup(1000, 1000, 64);
	b = &B.conn[2];
	/* Producer cursor beyond the RMBE: only that connection dies. */
	memset(&m, 0, sizeof(m));
	m.seqno = 1;
	m.token = b->token;
	m.prod.count = b->rmbe.data_len + EYE;
	m.cons.count = EYE;
	CU_ASSERT_EQUAL(smcr_conn_rx_cdc(b, &m), -EPROTO);
	CU_ASSERT_EQUAL(b->error, -EPROTO);
	/* Cursor inside the eye catcher (RFC layout) or beyond the RMBE
	 * (Linux's), on another connection. */
	b = &B.conn[3];
	m.token = b->token;
	m.prod.count = EYE ? 2 : b->rmbe.data_len + 7;
	CU_ASSERT_EQUAL(smcr_conn_rx_cdc(b, &m), -EPROTO);
	/* More data than the window allows, on a third. */
	b = &B.conn[1];
	m.token = b->token;
	m.prod.wrap = 1;
	m.prod.count = 100 + EYE;
	CU_ASSERT_EQUAL(smcr_conn_rx_cdc(b, &m), -EPROTO);
	/* Consumer cursor ahead of what B wrote. */
	b = &B.conn[0];
	memset(&m, 0, sizeof(m));
	m.seqno = 1;
	m.token = b->token;
	m.prod.count = EYE;
	m.cons.count = EYE + 10;
	CU_ASSERT_EQUAL(smcr_conn_rx_cdc(b, &m), -EPROTO);
	run_wire(0);
	/* A sees the aborts; a fresh setup's connection still works. */
	CU_ASSERT_EQUAL(smcr_conn_recv(&A.conn[2], buf, sizeof(buf)), -ECONNRESET);
	teardown();

	setup(1000, 1000, 64);
	CU_ASSERT_EQUAL(smcr_conn_send(&A.conn[2], "ok", 2), 2);
	run_wire(0);
	CU_ASSERT_EQUAL(smcr_conn_recv(&B.conn[2], buf, sizeof(buf)), 2);
	teardown();
}

static void test_failover_cut(void)
{
	const uint64_t total = 1u << 20;
	unsigned int c;

	/* Cut link 0 mid-stream with writes and CDCs in flight: every
	 * connection on it moves to link 1 and nothing is lost. */
	setup(30000, 30000, 16);
	stream(total, 9000, 5, 40, MEMWIRE_CUT, false);
	check_streams(total);
	CU_ASSERT_EQUAL(A.downs, 1);
	CU_ASSERT_EQUAL(B.downs, 1);
	for (c = 0; c < NCONN; c++) {
		CU_ASSERT_PTR_EQUAL(A.conn[c].link, &wire[1][0].link);
		CU_ASSERT_PTR_EQUAL(B.conn[c].link, &wire[1][1].link);
	}
	/* Connections 0 and 2 started on link 0 and were replayed. */
	CU_ASSERT_EQUAL(A.conn[0].stats.failovers, 1);
	CU_ASSERT_EQUAL(A.conn[1].stats.failovers, 0);
	CU_ASSERT(A.conn[0].stats.replayed_bytes + B.conn[0].stats.replayed_bytes > 0);
	CU_ASSERT_EQUAL(wire[1][0].bad_rkey + wire[1][1].bad_rkey, 0);
	teardown();
}

/* A message is its RDMA write(s) and its CDC behind one doorbell: one
 * write, two at the wrap, and after a failover the validation CDC in
 * front of them; all of it arrives. */
static void test_one_doorbell(void)
{
	static uint8_t buf[1 << 17], got[1 << 17];
	struct smcr_link *l0 = &wire[0][0].link, *l1 = &wire[1][0].link;
	struct smcr_conn *a, *b;
	uint64_t d, w, sd, sent = 0, rcvd = 0;
	size_t n, i;
	ssize_t r;

	setup(1000, 1000, 64);
	a = &A.conn[0];
	b = &B.conn[0];
	CU_ASSERT_PTR_EQUAL_FATAL(a->link, l0);
	for (i = 0; i < sizeof(buf); i++)
		buf[i] = (uint8_t)(i * 7 + 1);

	d = l0->doorbells, w = l0->writes, sd = l0->sends;
	CU_ASSERT_EQUAL(smcr_conn_send(a, buf, 700), 700);
	sent += 700;
	CU_ASSERT_EQUAL(l0->writes - w, 1);
	CU_ASSERT_EQUAL(l0->sends - sd, 1);
	CU_ASSERT_EQUAL(l0->doorbells - d, 1);
	run_wire(0);
	r = smcr_conn_recv(b, got, sizeof(got));
	CU_ASSERT_EQUAL(r, 700);
	CU_ASSERT_EQUAL(memcmp(got, buf, 700), 0);
	rcvd += 700;
	CU_ASSERT(smcr_conn_cursor_update(b, false) >= 0);
	run_wire(0);

	/* Across the end of the peer's RMBE: two writes, one doorbell. */
	n = a->tx_len - a->tx_fill.count + 100;
	CU_ASSERT_FATAL(n <= smcr_conn_tx_space(a));
	CU_ASSERT_FATAL(n + 256 <= sizeof(buf));
	d = l0->doorbells, w = l0->writes, sd = l0->sends;
	CU_ASSERT_EQUAL(smcr_conn_send(a, buf + sent % 256, n), (ssize_t)n);
	CU_ASSERT_EQUAL(l0->writes - w, 2);
	CU_ASSERT_EQUAL(l0->sends - sd, 1);
	CU_ASSERT_EQUAL(l0->doorbells - d, 1);
	run_wire(0);
	r = smcr_conn_recv(b, got, sizeof(got));
	CU_ASSERT_EQUAL(r, (ssize_t)n);
	CU_ASSERT_EQUAL(memcmp(got, buf + sent % 256, n), 0);
	sent += n;
	rcvd += (uint64_t)r;
	CU_ASSERT(smcr_conn_cursor_update(b, false) >= 0);
	run_wire(0);

	/* Written, never delivered; the link dies; the failover replays
	 * it on link 1: validation, write, CDC in one post. */
	CU_ASSERT_EQUAL(smcr_conn_send(a, buf, 300), 300);
	memwire_fault(&wire[0][0], MEMWIRE_CUT);
	d = l1->doorbells, w = l1->writes, sd = l1->sends;
	CU_ASSERT_EQUAL(smcr_conn_failover(a, l1), 0);
	CU_ASSERT_EQUAL(l1->sends - sd, 2);
	CU_ASSERT(l1->writes - w >= 1);
	CU_ASSERT_EQUAL(l1->doorbells - d, 1);
	CU_ASSERT_EQUAL(wire[1][0].batch, 0);
	run_wire(0);
	r = smcr_conn_recv(b, got, sizeof(got));
	CU_ASSERT_EQUAL(r, 300);
	CU_ASSERT_EQUAL(memcmp(got, buf, 300), 0);
	CU_ASSERT_EQUAL(a->error, 0);
	CU_ASSERT_EQUAL(b->error, 0);
	teardown();
}

/* A message's chain: its write(s) first, unsignaled, then its CDC,
 * signaled and inline (44 bytes within the QP's 64 of inline data); on a
 * QP without inline data the CDC goes from its slot and arrives all the
 * same.  No chain ends with a write. */
static void test_chain_inline(void)
{
	static uint8_t buf[1 << 17], got[1 << 17];
	struct memwire_end *e0 = &wire[0][0];
	struct smcr_conn *a, *b;
	uint64_t d, sent = 0;
	size_t n, i;
	ssize_t r;

	setup(1000, 1000, 64);
	a = &A.conn[0];
	b = &B.conn[0];
	CU_ASSERT_PTR_EQUAL_FATAL(a->link, &e0->link);
	for (i = 0; i < sizeof(buf); i++)
		buf[i] = (uint8_t)(i * 13 + 5);

	d = e0->link.doorbells;
	CU_ASSERT_EQUAL(smcr_conn_send(a, buf, 700), 700);
	CU_ASSERT_EQUAL(e0->link.doorbells - d, 1);
	CU_ASSERT_EQUAL_FATAL(e0->chain_n, 2);
	CU_ASSERT(e0->chain[0].is_write);
	CU_ASSERT_EQUAL(e0->chain[0].flags, 0);
	CU_ASSERT_EQUAL(e0->chain[0].len, 700);
	CU_ASSERT(!e0->chain[1].is_write);
	CU_ASSERT_EQUAL(e0->chain[1].flags, SMCR_WR_SIGNALED | SMCR_WR_INLINE);
	CU_ASSERT_EQUAL(e0->chain[1].len, SMCR_MSG_LEN);
	run_wire(0);
	r = smcr_conn_recv(b, got, sizeof(got));
	CU_ASSERT_EQUAL(r, 700);
	CU_ASSERT_EQUAL(memcmp(got, buf, 700), 0);
	sent += 700;
	CU_ASSERT(smcr_conn_cursor_update(b, false) >= 0);
	run_wire(0);

	/* At the wrap: write, write, CDC. */
	n = a->tx_len - a->tx_fill.count + 100;
	CU_ASSERT_FATAL(n <= smcr_conn_tx_space(a));
	CU_ASSERT_FATAL(n <= sizeof(buf));
	d = e0->link.doorbells;
	CU_ASSERT_EQUAL(smcr_conn_send(a, buf, n), (ssize_t)n);
	CU_ASSERT_EQUAL(e0->link.doorbells - d, 1);
	CU_ASSERT_EQUAL_FATAL(e0->chain_n, 3);
	CU_ASSERT(e0->chain[0].is_write && e0->chain[1].is_write);
	CU_ASSERT_EQUAL(e0->chain[0].flags | e0->chain[1].flags, 0);
	CU_ASSERT_EQUAL(e0->chain[0].len + e0->chain[1].len, n);
	CU_ASSERT(!e0->chain[2].is_write);
	CU_ASSERT_EQUAL(e0->chain[2].flags, SMCR_WR_SIGNALED | SMCR_WR_INLINE);
	run_wire(0);
	r = smcr_conn_recv(b, got, sizeof(got));
	CU_ASSERT_EQUAL(r, (ssize_t)n);
	CU_ASSERT_EQUAL(memcmp(got, buf, n), 0);
	CU_ASSERT(smcr_conn_cursor_update(b, false) >= 0);
	run_wire(0);

	/* A QP without inline data. */
	e0->link.max_inline = 0;
	CU_ASSERT_EQUAL(smcr_conn_send(a, buf + 1, 500), 500);
	CU_ASSERT_EQUAL_FATAL(e0->chain_n, 2);
	CU_ASSERT_EQUAL(e0->chain[0].flags, 0);
	CU_ASSERT_EQUAL(e0->chain[1].flags, SMCR_WR_SIGNALED);
	run_wire(0);
	r = smcr_conn_recv(b, got, sizeof(got));
	CU_ASSERT_EQUAL(r, 500);
	CU_ASSERT_EQUAL(memcmp(got, buf + 1, 500), 0);
	CU_ASSERT_EQUAL(e0->link.inline_sends, e0->link.sends - 1);
	CU_ASSERT_EQUAL(e0->link.unsignaled, e0->link.writes);
	CU_ASSERT_EQUAL(e0->chains_write_last, 0);
	CU_ASSERT_EQUAL(a->error, 0);
	CU_ASSERT_EQUAL(b->error, 0);
	teardown();
}

static unsigned int raw_write_dones, raw_send_dones;

static void raw_write_done(struct smcr_link *link, uint64_t wr_id, int status)
{
	(void)link, (void)wr_id, (void)status;
	raw_write_dones++;
}

static void raw_send_done(struct smcr_link *link, uint64_t wr_id, int status)
{
	(void)link, (void)wr_id, (void)status;
	raw_send_dones++;
}

static void raw_recv(struct smcr_link *link, const uint8_t msg[SMCR_MSG_LEN])
{
	(void)link, (void)msg;
}

static const struct smcr_link_handler raw_handler = {
	.write_done = raw_write_done,
	.send_done = raw_send_done,
	.recv = raw_recv,
};

/* An unsignaled work request keeps its send queue slot, placed or not,
 * until a later signaled one completes; the signals forced every
 * signal_every-th bring slots back to a run of unsignaled writes and are
 * not reported to the owner. */
static void test_sq_unsignaled_slots(void)
{
	static uint8_t src[64], dst[64 * 100], msg[SMCR_MSG_LEN];
	struct memwire_end ea, eb, *ends[2] = { &ea, &eb };
	struct smcr_sge sge = { src, sizeof(src), 1 };
	unsigned int i, posted, rounds;

	for (i = 0; i < sizeof(src); i++)
		src[i] = (uint8_t)(i + 1);
	raw_write_dones = raw_send_dones = 0;
	memwire_pair(&ea, &eb, 1, 0, 8, &raw_handler, NULL, &raw_handler, NULL);
	memwire_add_mr(&eb, dst, sizeof(dst), 77);
	ea.link.signal_every = 0;
	for (i = 0; i < 7; i++)
		CU_ASSERT_EQUAL(smcr_link_write(&ea.link, &sge, 1, (uintptr_t)dst + 64 * i,
						77, i, false), 0);
	memwire_run(ends, 2);
	CU_ASSERT_EQUAL(ea.delivered, 7);
	CU_ASSERT_EQUAL(ea.link.ops->sq_free(&ea.link), 1);	/* placed, still held */
	CU_ASSERT_EQUAL(ea.sq_done_held_max, 7);
	CU_ASSERT_EQUAL(smcr_link_send(&ea.link, msg, 100), 0);
	CU_ASSERT_EQUAL(smcr_link_write(&ea.link, &sge, 1, (uintptr_t)dst, 77, 9, false),
			-EAGAIN);
	CU_ASSERT_EQUAL(ea.sq_refused, 1);
	memwire_run(ends, 2);
	CU_ASSERT_EQUAL(ea.link.ops->sq_free(&ea.link), 8);	/* the SEND freed all */
	CU_ASSERT_EQUAL(raw_send_dones, 1);
	CU_ASSERT_EQUAL(raw_write_dones, 0);
	memwire_free(&ea);
	memwire_free(&eb);

	/* 100 unsignaled writes through 8 slots, every fourth signaled. */
	memset(dst, 0, sizeof(dst));
	memwire_pair(&ea, &eb, 1, 0, 8, &raw_handler, NULL, &raw_handler, NULL);
	memwire_add_mr(&eb, dst, sizeof(dst), 77);
	ea.link.signal_every = 4;
	for (posted = 0, rounds = 0; posted < 100 && rounds < 1000; rounds++) {
		int r = smcr_link_write(&ea.link, &sge, 1, (uintptr_t)dst + 64 * posted,
					77, posted, false);

		if (r == -EAGAIN) {
			memwire_run(ends, 2);
			continue;
		}
		CU_ASSERT_EQUAL_FATAL(r, 0);
		posted++;
	}
	memwire_run(ends, 2);
	CU_ASSERT_EQUAL(posted, 100);
	CU_ASSERT_EQUAL(ea.delivered, 100);
	CU_ASSERT_EQUAL(ea.link.forced_signals, 25);
	CU_ASSERT_EQUAL(ea.link.unsignaled, 75);
	CU_ASSERT_EQUAL(raw_write_dones, 0);
	CU_ASSERT(ea.sq_max_used <= 8);
	CU_ASSERT_EQUAL(ea.link.ops->sq_free(&ea.link), 8);
	for (i = 0; i < 100; i++)
		CU_ASSERT_EQUAL(memcmp(dst + 64 * i, src, 64), 0);
	memwire_free(&ea);
	memwire_free(&eb);
}

/* A long stream both ways through an 8-slot send queue: unsignaled
 * writes hold slots until their CDCs complete, and no post is refused
 * (a message waits whole for room, never half posted). */
static void test_stream_sq_unsignaled(void)
{
	const uint64_t total = 1u << 20;
	unsigned int s, k;

	setup(30000, 30000, 8);
	stream(total, 9000, 5, -1, MEMWIRE_OK, false);
	check_streams(total);
	for (s = 0; s < NLINK; s++) {
		for (k = 0; k < 2; k++) {
			struct memwire_end *e = &wire[s][k];

			CU_ASSERT(e->sq_max_used <= 8);
			CU_ASSERT(e->sq_done_held_max > 0);
			CU_ASSERT_EQUAL(e->sq_refused, 0);
			CU_ASSERT_EQUAL(e->chains_write_last, 0);
			CU_ASSERT(e->link.unsignaled > 0);
			CU_ASSERT_EQUAL(e->link.unsignaled + e->link.forced_signals,
					e->link.writes);
			CU_ASSERT_EQUAL(e->link.inline_sends, e->link.sends);
			CU_ASSERT_EQUAL(e->link.doorbells, e->link.sends);
		}
	}
	teardown();
}

/* Three messages posted, one write placed, nothing completed, the link
 * cut: the flush completes the unsignaled writes too, and the failover
 * replays all three on link 1, exactly once and in order. */
static void test_failover_unsignaled(void)
{
	static uint8_t buf[3000], got[4096];
	struct memwire_end *e0 = &wire[0][0];
	struct smcr_conn *a, *b;
	unsigned int k;
	size_t i;
	ssize_t r;

	setup(30000, 30000, 16);
	a = &A.conn[0];
	b = &B.conn[0];
	CU_ASSERT_PTR_EQUAL_FATAL(a->link, &e0->link);
	for (i = 0; i < sizeof(buf); i++)
		buf[i] = (uint8_t)(i * 31 + 7);
	for (k = 0; k < 3; k++)
		CU_ASSERT_EQUAL(smcr_conn_send(a, buf + 1000 * k, 1000), 1000);
	CU_ASSERT_EQUAL(e0->queued, 6);
	CU_ASSERT_EQUAL(e0->link.unsignaled, 3);
	CU_ASSERT_EQUAL(memwire_step(e0), 1);	/* the first write, placed */
	CU_ASSERT_EQUAL(e0->sq_done_held_max, 1);
	CU_ASSERT_EQUAL(e0->link.ops->sq_free(&e0->link), 10);
	memwire_fault(e0, MEMWIRE_CUT);
	run_wire(0);
	CU_ASSERT_EQUAL(e0->flushed, 5);
	CU_ASSERT_EQUAL(e0->flushed_unsignaled, 2);
	CU_ASSERT_EQUAL(A.downs, 1);
	CU_ASSERT_PTR_EQUAL(a->link, &wire[1][0].link);
	CU_ASSERT_EQUAL(a->stats.failovers, 1);
	CU_ASSERT_EQUAL(a->stats.replayed_bytes, 3000);
	r = smcr_conn_recv(b, got, sizeof(got));
	CU_ASSERT_EQUAL(r, 3000);
	CU_ASSERT_EQUAL(memcmp(got, buf, 3000), 0);
	CU_ASSERT_EQUAL(a->error, 0);
	CU_ASSERT_EQUAL(b->error, 0);
	CU_ASSERT_EQUAL(wire[1][0].chains_write_last, 0);
	CU_ASSERT_EQUAL(wire[1][0].sq_refused, 0);
	teardown();
}

static void test_failover_lost_data(void)
{
	uint8_t buf[4096];
	struct smcr_conn *a, *b;

	/* The RNIC acks a write + CDC that never reach B's memory; then the
	 * link dies.  A's validation CDC names a seqno B never processed:
	 * B must reset (§4.6.1). */
	setup(1000, 1000, 64);
	a = &A.conn[0];
	b = &B.conn[0];
	memset(buf, 3, sizeof(buf));
	memwire_fault(&wire[0][0], MEMWIRE_ACK_NO_PLACE);
	CU_ASSERT_EQUAL(smcr_conn_send(a, buf, sizeof(buf)), (ssize_t)sizeof(buf));
	run_wire(0);
	CU_ASSERT_EQUAL(a->ss, 1);
	CU_ASSERT_EQUAL(b->rx_seq, 0);
	memwire_fault(&wire[0][0], MEMWIRE_CUT);
	CU_ASSERT_EQUAL(smcr_conn_send(a, buf, 1), 1);
	run_wire(0);
	CU_ASSERT_EQUAL(b->error, -ECONNRESET);
	CU_ASSERT_EQUAL(smcr_conn_recv(a, buf, sizeof(buf)), -ECONNRESET);
	/* Connection 1 was on link 1 and is unaffected. */
	CU_ASSERT_EQUAL(A.conn[1].error, 0);
	teardown();
}

static void test_failover_peer_consumed_more(void)
{
	uint8_t buf[300];
	struct smcr_cdc_cursor start;
	struct smcr_cdc_msg m;
	struct smcr_conn *a, *b;

	/* A failover took tx_prod back to the last confirmed write and the
	 * replay could not be posted yet (send queue full); a CDC the peer
	 * sent before it saw the failover says it consumed beyond that.
	 * That is no protocol error: A skips what needs no replay. */
	setup(1000, 1000, 64);
	a = &A.conn[0];
	b = &B.conn[0];
	start = a->tx_prod;
	memset(buf, 5, sizeof(buf));
	CU_ASSERT_EQUAL(smcr_conn_send(a, buf, sizeof(buf)), (ssize_t)sizeof(buf));
	run_wire(0);
	CU_ASSERT_EQUAL(smcr_conn_recv(b, buf, sizeof(buf)), (ssize_t)sizeof(buf));
	a->tx_prod = start;
	memset(&m, 0, sizeof(m));
	m.token = a->token;
	m.seqno = (uint16_t)(a->rx_seq + 1);
	m.prod.wrap = a->rx_prod.wrap;
	m.prod.count = a->rx_prod.count + EYE;
	m.cons.count = (uint32_t)sizeof(buf) + EYE;
	CU_ASSERT_EQUAL(smcr_conn_rx_cdc(a, &m), 0);
	CU_ASSERT_EQUAL(a->error, 0);
	CU_ASSERT_EQUAL(a->tx_prod.count, sizeof(buf));
	CU_ASSERT(smcr_cursor_cmp(a->tx_len, &a->tx_prod, &a->tx_fill) == 0);
	/* Beyond what A was ever given: still refused. */
	m.seqno++;
	m.cons.count = (uint32_t)sizeof(buf) + 1 + EYE;
	CU_ASSERT_EQUAL(smcr_conn_rx_cdc(a, &m), -EPROTO);
	teardown();
}

static void test_prod_rewind(void)
{
	uint8_t buf[600], got[600];
	struct smcr_cdc_msg m;
	struct smcr_conn *a, *b;
	unsigned int i;

	/* Linux after a failover (smc_switch_cursor): its producer cursor
	 * goes back to its last completed CDC, a CDC carries it, and it
	 * writes those bytes again.  B takes the old cursor as no new data. */
	setup(1000, 1000, 64);
	a = &A.conn[0];
	b = &B.conn[0];
	for (i = 0; i < sizeof(buf); i++)
		buf[i] = (uint8_t)i;
	CU_ASSERT_EQUAL(smcr_conn_send(a, buf, 400), 400);
	run_wire(0);
	CU_ASSERT_EQUAL(smcr_conn_recv(b, got, 100), 100);
	memset(&m, 0, sizeof(m));
	m.token = b->token;
	m.seqno = (uint16_t)(b->rx_seq + 1);
	m.prod.count = 200 + EYE;		/* 400 were announced */
	m.cons.count = EYE;
	CU_ASSERT_EQUAL(smcr_conn_rx_cdc(b, &m), 0);
	a->tx_seq = m.seqno;			/* as if A had sent it */
	CU_ASSERT_EQUAL(b->error, 0);
	CU_ASSERT_EQUAL(b->stats.prod_rewinds, 1);
	CU_ASSERT_EQUAL(smcr_conn_rx_avail(b), 300);
	/* The stream goes on from where it was. */
	CU_ASSERT_EQUAL(smcr_conn_send(a, buf + 400, 200), 200);
	run_wire(0);
	CU_ASSERT_EQUAL(smcr_conn_recv(b, got + 100, 500), 500);
	CU_ASSERT(memcmp(got, buf, sizeof(buf)) == 0);
	/* More than an RMBE back is no rewind. */
	m.seqno = (uint16_t)(b->rx_seq + 1);
	m.prod.wrap = (uint16_t)(b->rx_prod.wrap - 2);
	m.prod.count = EYE;
	m.cons = (struct smcr_cdc_cursor){ 0, EYE };
	CU_ASSERT_EQUAL(smcr_conn_rx_cdc(b, &m), -EPROTO);
	teardown();
}

/* A (Linux) CDC to b: seqno, producer cursor at data offset prod. */
static int rx_linux(struct smcr_conn *b, uint16_t seq, uint16_t wrap, uint32_t prod,
		    bool validation)
{
	struct smcr_cdc_msg m;

	memset(&m, 0, sizeof(m));
	m.token = b->token;
	m.seqno = seq;
	m.failover_validation = validation;
	m.prod = (struct smcr_cdc_cursor){ wrap, prod + EYE };
	m.cons = (struct smcr_cdc_cursor){ 0, EYE };
	return smcr_conn_rx_cdc_on(b, &m, b->link);
}

/* The consumer cursor b's next CDC carries (a peer A does not take). */
static uint32_t cons_posted(struct smcr_conn *b)
{
	CU_ASSERT_EQUAL(smcr_conn_cursor_update(b, true), 1);
	return b->rx_cons_sent.count;
}

/* The consumer cursor b's next CDC carries, as A receives it. */
static uint32_t cons_sent(struct smcr_conn *b)
{
	memset(&last_cdc_a, 0, sizeof(last_cdc_a));
	CU_ASSERT_EQUAL(smcr_conn_cursor_update(b, true), 1);
	run_wire(0);
	CU_ASSERT_EQUAL(last_cdc_a.token, b->peer_token);
	return last_cdc_a.cons.count - EYE;
}

static void test_cons_held_at_rewind(void)
{
	static uint8_t buf[70000];
	struct smcr_conn *b;
	uint32_t len;
	uint16_t seq;

	/* Linux 6.1 at a failover rewinds its producer cursor to the one its
	 * last completed CDC carried and names that CDC's seqno less one in
	 * its validation CDC.  Told of a consumer cursor beyond its producer
	 * cursor, it writes past the end of our RMBE (smc_tx_rdma_writes
	 * takes prod.wrap != cons.wrap for "one chunk"): B must hold its
	 * cursor at the peer's until the peer's CDCs pass it again.  (The
	 * CDCs are made up: the wire is not run, A never sees them.) */
	setup(1000, 1000, 64);
	b = &B.conn[0];
	/* Four CDCs of 100 bytes each (the bytes do not matter here). */
	for (seq = 1; seq <= 4; seq++)
		CU_ASSERT_EQUAL(rx_linux(b, seq, 0, 100u * seq, false), 0);
	CU_ASSERT_EQUAL(smcr_conn_recv(b, buf, sizeof(buf)), 400);
	/* Its CDC 2 completed last (validation seqno 1): back to 200. */
	CU_ASSERT_EQUAL(rx_linux(b, 1, 0, 0, true), 0);
	CU_ASSERT_EQUAL(b->error, 0);
	CU_ASSERT_EQUAL(b->stats.cons_held, 1);
	/* (6.1 may be out of window and silent: the cursor goes at once.) */
	CU_ASSERT_EQUAL(b->rx_cons_sent.count, 200);
	CU_ASSERT_EQUAL(cons_posted(b), 200);
	/* It writes from 200 again: a cursor behind ours, ours held at it. */
	CU_ASSERT_EQUAL(rx_linux(b, 5, 0, 300, false), 0);
	CU_ASSERT_EQUAL(b->stats.prod_rewinds, 1);
	CU_ASSERT_EQUAL(smcr_conn_rx_avail(b), 0);
	CU_ASSERT_EQUAL(cons_posted(b), 300);
	/* Past what B has taken: B's own cursor again, and new data. */
	CU_ASSERT_EQUAL(rx_linux(b, 6, 0, 450, false), 0);
	CU_ASSERT_EQUAL(smcr_conn_rx_avail(b), 50);
	CU_ASSERT_EQUAL(cons_posted(b), 400);
	CU_ASSERT_EQUAL(smcr_conn_recv(b, buf, sizeof(buf)), 50);
	CU_ASSERT_EQUAL(cons_posted(b), 450);
	/* Across a wrap: the case that wrote past the end in 6.1. */
	len = b->rmbe.data_len;
	CU_ASSERT_EQUAL(rx_linux(b, 7, 0, len - 100, false), 0);
	CU_ASSERT_EQUAL(rx_linux(b, 8, 1, 50, false), 0);
	CU_ASSERT_EQUAL(smcr_conn_recv(b, buf, sizeof(buf)), (ssize_t)(len - 400));
	CU_ASSERT_EQUAL(rx_linux(b, 7, 0, 0, true), 0);	/* CDC 8 completed */
	CU_ASSERT_EQUAL(cons_posted(b), 50);
	CU_ASSERT_EQUAL(b->rx_cons_sent.wrap, 1);
	CU_ASSERT_EQUAL(rx_linux(b, 6, 0, 0, true), 0);	/* only CDC 7 */
	CU_ASSERT_EQUAL(cons_posted(b), len - 100);
	CU_ASSERT_EQUAL(b->rx_cons_sent.wrap, 0);
	CU_ASSERT_EQUAL(b->error, 0);
	teardown();
}

static void test_cons_held_at_own_failover(void)
{
	uint8_t buf[1000];
	struct smcr_link *l0, *l1;
	struct smcr_conn *a, *b;

	/* B's link fails first and B fails over before the peer's validation
	 * came: the peer may have rewound already, so B's CDCs carry only
	 * what the peer has seen (its last completed CDC's cursor) until a
	 * CDC on a live link or a validation says more.  What a failed link
	 * still delivers (not a late acker's) says nothing. */
	setup(1000, 1000, 64);
	a = &A.conn[0];
	b = &B.conn[0];
	l0 = &B.ends[0]->link;
	l1 = &B.ends[1]->link;
	memset(buf, 7, sizeof(buf));
	CU_ASSERT_EQUAL(smcr_conn_send(a, buf, 300), 300);
	run_wire(0);
	CU_ASSERT_EQUAL(cons_sent(b), 0);		/* completed: A saw 0 */
	CU_ASSERT_EQUAL(smcr_conn_recv(b, buf, sizeof(buf)), 300);
	smcr_conn_link_gone(b, l0);
	l0->state = SMCR_LINK_FAILED;
	CU_ASSERT_EQUAL(smcr_conn_failover(b, l1), 0);
	run_wire(0);
	CU_ASSERT_EQUAL(last_cdc_a.token, b->peer_token);
	CU_ASSERT_EQUAL(last_cdc_a.cons.count - EYE, 0);
	CU_ASSERT_EQUAL(b->stats.cons_held, 1);
	/* A CDC still arriving on the failed link does not lift it... */
	CU_ASSERT_EQUAL(smcr_conn_send(a, buf, 100), 100);
	run_wire(0);
	CU_ASSERT_EQUAL(smcr_conn_rx_avail(b), 100);
	CU_ASSERT_EQUAL(cons_sent(b), 0);
	/* ...one on a live link does. */
	l0->state = SMCR_LINK_ACTIVE;
	CU_ASSERT_EQUAL(smcr_conn_send(a, buf, 100), 100);
	run_wire(0);
	CU_ASSERT_EQUAL(cons_sent(b), 300);
	CU_ASSERT_EQUAL(smcr_conn_recv(b, buf, sizeof(buf)), 200);
	CU_ASSERT_EQUAL(cons_sent(b), 500);
	CU_ASSERT_EQUAL(a->error, 0);
	CU_ASSERT_EQUAL(b->error, 0);
	teardown();
}

static void test_cons_released_at_validation(void)
{
	static uint8_t buf[1 << 20];
	struct smcr_link *l0, *l1;
	struct smcr_conn *b;
	uint32_t len, i;
	ssize_t n, got = 0;

	/* Linux 6.12 as the peer, our link failing first (vm/kernel-v2-6.12
	 * (b) under load: no TEST LINK reply on link 1).  The peer filled
	 * our RMBE while it knew our consumer cursor at 0; B read it all,
	 * but its CDC saying so never completed.  B fails over and holds
	 * its cursor at what the peer has surely seen (0).  The peer's
	 * validation names its last completed CDC (seqno less one): it
	 * rewound its producer cursor to that CDC's, a whole RMBE ahead,
	 * and waits for window, sending nothing more.  B must now announce
	 * up to there, or both wait for good.  (The CDCs are made up: the
	 * wire is not run, A never sees them.) */
	setup(1000, 1000, 64);
	b = &B.conn[0];
	l0 = &B.ends[0]->link;
	l1 = &B.ends[1]->link;
	len = b->rmbe.data_len;
	for (i = 1; i <= 4; i++)
		CU_ASSERT_EQUAL(rx_linux(b, (uint16_t)i, i == 4 ? 1 : 0,
					 i == 4 ? 0 : len / 4 * i, false), 0);
	while ((n = smcr_conn_recv(b, buf + got, sizeof(buf) - (size_t)got)) > 0)
		got += n;
	CU_ASSERT_EQUAL(got, (ssize_t)len);
	CU_ASSERT(b->peer_blocked == false);
	smcr_conn_link_gone(b, l0);
	l0->state = SMCR_LINK_FAILED;
	CU_ASSERT_EQUAL(smcr_conn_failover(b, l1), 0);
	CU_ASSERT_EQUAL(cons_posted(b), 0);		/* held: the peer saw 0 */
	CU_ASSERT_EQUAL(b->rx_cons_sent.wrap, 0);
	/* its CDC 4 completed last: validation seqno 3, producer at 1:0 */
	CU_ASSERT_EQUAL(smcr_conn_rx_cdc_on(b, &(struct smcr_cdc_msg){
			.token = b->token, .seqno = 3, .failover_validation = true }, l1), 0);
	CU_ASSERT_EQUAL(b->error, 0);
	CU_ASSERT_EQUAL(b->rx_cons_sent.wrap, 1);	/* sent at once */
	CU_ASSERT_EQUAL(b->rx_cons_sent.count, 0);
	CU_ASSERT_EQUAL(cons_posted(b), 0);
	CU_ASSERT_EQUAL(b->rx_cons_sent.wrap, 1);
	/* An older validation (a CDC before it) still lowers it. */
	CU_ASSERT_EQUAL(smcr_conn_rx_cdc_on(b, &(struct smcr_cdc_msg){
			.token = b->token, .seqno = 2, .failover_validation = true }, l1), 0);
	CU_ASSERT_EQUAL(cons_posted(b), len / 4 * 3);
	CU_ASSERT_EQUAL(b->rx_cons_sent.wrap, 0);
	CU_ASSERT_EQUAL(b->error, 0);
	teardown();
}

/* Where the bytes and the wire cursors are in each layout, across a wrap:
 * a 16 KiB element holds 16384 data bytes (Linux) or 16380 after the eye
 * catcher (RFC); wire counts are data offsets + 0 or + 4. */
static void test_layout_offsets(void)
{
	static uint8_t buf[16384], out[16384];
	const uint32_t n1 = 16000, n2 = 1000, data = 16384 - EYE;
	struct smcr_conn *a, *b;
	const uint8_t *elem;
	size_t i;

	setup(1000, 1000, 64);
	a = &A.conn[0];
	b = &B.conn[0];
	CU_ASSERT_EQUAL(b->rmbe.rmb->elem_size, 16384);
	CU_ASSERT_EQUAL(b->rmbe.data_len, data);
	CU_ASSERT_EQUAL(a->tx_len, data);
	elem = b->rmbe.rmb->buf + (size_t)(b->rmbe.index - 1) * 16384;
	CU_ASSERT_PTR_EQUAL(b->rmbe.data, elem + EYE);
	CU_ASSERT_EQUAL(a->peer_offset, (uint32_t)(b->rmbe.index - 1) * 16384 + EYE);
	for (i = 0; i < sizeof(buf); i++)
		buf[i] = (uint8_t)(i * 7 + 1);
	CU_ASSERT_EQUAL(smcr_conn_send(a, buf, n1), (ssize_t)n1);
	run_wire(0);
	CU_ASSERT_EQUAL(elem[EYE], buf[0]);
	CU_ASSERT_EQUAL(last_cdc.prod.wrap, 0);
	CU_ASSERT_EQUAL(last_cdc.prod.count, n1 + EYE);
	CU_ASSERT_EQUAL(b->rx_prod.count, n1);
	CU_ASSERT_EQUAL(smcr_conn_recv(b, out, sizeof(out)), (ssize_t)n1);
	CU_ASSERT_EQUAL(memcmp(out, buf, n1), 0);
	run_wire(0);
	/* The window is open again: the second write wraps. */
	CU_ASSERT_EQUAL(smcr_conn_send(a, buf, n2), (ssize_t)n2);
	run_wire(0);
	CU_ASSERT_EQUAL(last_cdc.prod.wrap, 1);
	CU_ASSERT_EQUAL(last_cdc.prod.count, n1 + n2 - data + EYE);
	CU_ASSERT_EQUAL(last_cdc.cons.count, EYE);	/* nothing of B's sent */
	CU_ASSERT_EQUAL(elem[EYE + data - 1], buf[data - n1 - 1]);
	CU_ASSERT_EQUAL(elem[EYE], buf[data - n1]);
	if (EYE)
		CU_ASSERT_EQUAL(memcmp(elem, smcr_rmbe_eyecatcher, SMCR_RMBE_EYE_LEN), 0);
	CU_ASSERT_EQUAL(smcr_conn_recv(b, out, sizeof(out)), (ssize_t)n2);
	CU_ASSERT_EQUAL(memcmp(out, buf, n2), 0);
	CU_ASSERT_EQUAL(b->error, 0);
	CU_ASSERT_EQUAL(a->error, 0);
	/* A wire count of 0..3 is data in Linux's layout, the eye catcher
	 * in the RFC's. */
	{
		struct smcr_cdc_msg m = { .token = b->token, .seqno = (uint16_t)(b->rx_seq + 1) };
		int want = EYE ? -EPROTO : 0;

		m.prod = last_cdc.prod;
		m.cons.count = 0;
		CU_ASSERT_EQUAL(smcr_conn_rx_cdc(b, &m), want);
	}
	teardown();
}

/* The link group fixes its layout at the first CONFIRM LINK, after CLC set
 * the first connection up: the connection takes it from its RMBs again
 * (Linux's to the RFC's here), and data flows in it; not once data moved. */
static void test_relayout(void)
{
	struct smcr_rmb_pool *pools[4] = { &A.rmbs, &A.sndbufs, &B.rmbs, &B.sndbufs };
	unsigned int c, k;

	EYE = 0;
	setup(1000, 1000, 64);
	CU_ASSERT_EQUAL(A.conn[0].tx_len, 16384);
	for (k = 0; k < 4; k++)
		CU_ASSERT_EQUAL(smcr_rmb_pool_set_layout(pools[k], SMCR_RMBE_EYE_LEN), 0);
	for (c = 0; c < NCONN; c++) {
		CU_ASSERT_EQUAL(smcr_conn_relayout(&A.conn[c]), 0);
		CU_ASSERT_EQUAL(smcr_conn_relayout(&B.conn[c]), 0);
		CU_ASSERT_EQUAL(A.conn[c].tx_len, 16380);
		CU_ASSERT_EQUAL(A.conn[c].rmbe.data_len, 16380);
		CU_ASSERT_EQUAL(A.conn[c].rx_eye, SMCR_RMBE_EYE_LEN);
		CU_ASSERT_EQUAL(A.conn[c].peer_offset,
				(uint32_t)(B.conn[c].rmbe.index - 1) * 16384 + SMCR_RMBE_EYE_LEN);
		CU_ASSERT_PTR_EQUAL(B.conn[c].rmbe.data, B.conn[c].rmbe.rmb->buf +
				    (size_t)(B.conn[c].rmbe.index - 1) * 16384 + SMCR_RMBE_EYE_LEN);
	}
	EYE = SMCR_RMBE_EYE_LEN;
	stream(256 * 1024, 6000, 7, -1, MEMWIRE_OK, false);
	check_streams(256 * 1024);
	CU_ASSERT_EQUAL(smcr_conn_relayout(&A.conn[0]), -EBUSY);
	teardown();
	EYE = 0;
}

/* Each test in both layouts. */
#define BOTH(fn)							\
	static void fn##_linux(void) { EYE = 0; fn(); }			\
	static void fn##_rfc(void) { EYE = SMCR_RMBE_EYE_LEN; fn(); }
BOTH(test_stream_small_window)
BOTH(test_stream_zero_copy_asym)
BOTH(test_window_update_threshold)
BOTH(test_close_orders)
BOTH(test_abort_mid_transfer)
BOTH(test_abort_then_link_cut)
BOTH(test_bad_cdc)
BOTH(test_failover_cut)
BOTH(test_failover_lost_data)
BOTH(test_failover_peer_consumed_more)
BOTH(test_prod_rewind)
BOTH(test_cons_held_at_rewind)
BOTH(test_cons_held_at_own_failover)
BOTH(test_cons_released_at_validation)
BOTH(test_layout_offsets)

/* ---- request/reply through the scheduled wire ---------------------------
 * A is a client with up to QD requests out on each connection, B a server
 * that answers each request in order, as nbdkit and smcrd do.  Each
 * message is an 8-byte header (body length, reply body length) and a body
 * from the sender's stream.  An application that got nothing done waits
 * until its connection's notify runs (as one blocked in smcr_recv or on
 * the socket's eventfd would, without the timeout); the scheduler reorders
 * deliveries, both sides' receive and completion polls and the
 * applications' steps.  Nothing left to happen before both sides closed is
 * a stall. */

#define RPC_QD 4
#define RPC_BODY_MAX 40000

struct app {
	struct peer *p, *other;
	unsigned int c;
	bool client;
	bool waiting, notified, closed, done;
	/* the message being sent */
	uint8_t tx[8 + RPC_BODY_MAX];
	uint32_t tx_len, tx_off;
	/* receive parser: header bytes, then body bytes left */
	uint8_t hdr[8];
	uint32_t hdr_got, body_left, reply_want;
	/* client: requests issued, replies received; server: replies due */
	unsigned int issued, answered, out;
	uint32_t due[RPC_QD * 2];
	unsigned int due_n;
	bool eof;
};

static struct app apps[2][NCONN];	/* [0]: A, the clients */
static unsigned int rpc_reqs;
static unsigned int rpc_move_every;	/* 1 in n hook steps moves a connection */
static unsigned int rpc_moves, rpc_resets;	/* over the runs of one test */
static uint64_t rpc_corked;
static uint64_t rpc_notifies;

static void app_notify(struct smcr_conn *conn, void *arg)
{
	struct app *a = arg;

	(void)conn;
	a->notified = true;
	rpc_notifies++;
}

static uint32_t rpc_size(struct memwire_sched *ms)
{
	uint32_t r = memwire_sched_rand(ms) % 100;

	if (r < 60)
		return memwire_sched_rand(ms) % 200;
	if (r < 90)
		return 200 + memwire_sched_rand(ms) % 4000;
	return 4200 + memwire_sched_rand(ms) % (RPC_BODY_MAX - 4200);
}

static void put32(uint8_t *b, uint32_t v)
{
	b[0] = (uint8_t)(v >> 24);
	b[1] = (uint8_t)(v >> 16);
	b[2] = (uint8_t)(v >> 8);
	b[3] = (uint8_t)v;
}

static uint32_t get32(const uint8_t *b)
{
	return (uint32_t)b[0] << 24 | (uint32_t)b[1] << 16 | (uint32_t)b[2] << 8 | b[3];
}

/* Sets up the next message: body of len bytes from the stream. */
static void app_msg(struct app *a, uint32_t len, uint32_t reply)
{
	uint32_t k;

	put32(a->tx, len);
	put32(a->tx + 4, reply);
	for (k = 0; k < len; k++)
		a->tx[8 + k] = stream_byte(a->p, a->c, a->p->sent[a->c] + k);
	a->p->sent[a->c] += len;
	a->tx_len = 8 + len;
	a->tx_off = 0;
}

/* Feeds n received bytes to the parser. */
static void app_parse(struct app *a, const uint8_t *b, size_t n)
{
	while (n) {
		if (a->hdr_got < 8) {
			a->hdr[a->hdr_got++] = *b++;
			n--;
			if (a->hdr_got == 8) {
				a->body_left = get32(a->hdr);
				a->reply_want = get32(a->hdr + 4);
				if (a->body_left > RPC_BODY_MAX)
					a->p->bad_bytes++;
			}
		} else {
			if (*b++ != stream_byte(a->other, a->c, a->p->rcvd[a->c]))
				a->p->bad_bytes++;
			a->p->rcvd[a->c]++;
			a->body_left--;
			n--;
		}
		if (a->hdr_got == 8 && a->body_left == 0) {
			/* A whole message. */
			a->hdr_got = 0;
			if (a->client) {
				a->answered++;
				a->out--;
			} else if (a->due_n < sizeof(a->due) / sizeof(a->due[0])) {
				a->due[a->due_n++] = a->reply_want;
			} else {
				a->p->bad_bytes++;	/* more than QD out */
			}
		}
	}
}

/* One step of an application: true if it got something done. */
static bool app_run(struct app *a, struct memwire_sched *ms)
{
	struct smcr_conn *conn = &a->p->conn[a->c];
	uint8_t buf[20000];
	bool did = false;
	ssize_t n;

	a->notified = false;
	if (conn->error) {
		a->done = true;
		return true;
	}
	if (a->closed) {
		if (smcr_conn_finished(conn))
			a->done = true;
		return a->done;
	}
	if (a->tx_off == a->tx_len) {
		if (a->client && a->issued < rpc_reqs && a->out < RPC_QD) {
			app_msg(a, rpc_size(ms), rpc_size(ms));
			a->issued++;
			a->out++;
		} else if (!a->client && a->due_n) {
			app_msg(a, a->due[0], 0);
			memmove(a->due, a->due + 1, --a->due_n * sizeof(a->due[0]));
		}
	}
	if (a->tx_off < a->tx_len) {
		n = smcr_conn_send(conn, a->tx + a->tx_off, a->tx_len - a->tx_off);
		if (n > 0) {
			a->tx_off += (uint32_t)n;
			did = true;
		} else {
			CU_ASSERT_EQUAL(n, -EAGAIN);
		}
	}
	n = smcr_conn_recv(conn, buf, 1 + memwire_sched_rand(ms) % sizeof(buf));
	if (n > 0) {
		app_parse(a, buf, (size_t)n);
		did = true;
	} else if (n == 0 && !a->eof) {
		a->eof = true;
		did = true;
	}
	/* The client closes after its last reply, the server at the end of
	 * the client's stream with every reply sent. */
	if ((a->client && a->answered == rpc_reqs) ||
	    (!a->client && a->eof && !a->due_n && a->tx_off == a->tx_len)) {
		CU_ASSERT_EQUAL(smcr_conn_close(conn), 0);
		a->closed = true;
		did = true;
	}
	return did;
}

static bool rpc_hook(struct memwire_sched *ms, void *arg)
{
	unsigned int i, ready = 0, pick;

	(void)arg;
	if (rpc_move_every && memwire_sched_rand(ms) % rpc_move_every == 0) {
		/* Rebalancing: one side moves a connection to its other link. */
		struct peer *p = memwire_sched_rand(ms) & 1 ? &A : &B;
		struct smcr_conn *conn = &p->conn[memwire_sched_rand(ms) % NCONN];
		struct smcr_link *to = &p->ends[conn->link == &p->ends[0]->link]->link;

		if (to->state == SMCR_LINK_ACTIVE && !conn->error)
			smcr_conn_move(conn, to);
		return true;
	}
	for (i = 0; i < 2 * NCONN; i++) {
		struct app *a = &apps[i / NCONN][i % NCONN];

		ready += !a->done && (!a->waiting || a->notified);
	}
	if (!ready)
		return false;
	pick = memwire_sched_rand(ms) % ready;
	for (i = 0; i < 2 * NCONN; i++) {
		struct app *a = &apps[i / NCONN][i % NCONN];

		if (a->done || (a->waiting && !a->notified) || pick--)
			continue;
		a->waiting = !app_run(a, ms);
		return true;
	}
	return false;
}

static bool rpc_done(void)
{
	unsigned int i;

	for (i = 0; i < 2 * NCONN; i++)
		if (!apps[i / NCONN][i % NCONN].done)
			return false;
	return true;
}

struct rpc_cfg {
	uint64_t seed;
	size_t rmbe;
	unsigned int sq_depth, reqs;
	uint32_t tx_cap;	/* the link's unconfirmed bytes (0: no limit) */
	int64_t cut_at;		/* step to cut link 0 at, -1: never */
	unsigned int move_every;
	uint32_t cork;
	bool lazy;	/* completions polled as with SMCR_CALLER_POLL */
};

/* As the engine after each batch (and a socket after a data call) with
 * caller-driven progress: arm the send CQ of links whose connections wait
 * for a send completion. */
static void want_send_done_all(void)
{
	unsigned int i;

	for (i = 0; i < NCONN; i++) {
		struct smcr_conn *c[2] = { &A.conn[i], &B.conn[i] };
		unsigned int k;

		for (k = 0; k < 2; k++)
			if (c[k]->link && smcr_conn_wants_tx_done(c[k]))
				c[k]->link->ops->want_send_done(c[k]->link);
	}
}

/* One run; returns 0, or the step it stalled at (+1). */
static uint64_t rpc_run(const struct rpc_cfg *cfg, bool verbose)
{
	struct memwire_sched ms;
	struct memwire_end *ends[NLINK * 2];
	unsigned int i, s;
	uint64_t stalled = 0;

	setup(cfg->rmbe, cfg->rmbe, cfg->sq_depth);
	for (s = 0; s < NLINK; s++) {
		wire[s][0].link.tx_cap = wire[s][1].link.tx_cap = cfg->tx_cap;
		ends[2 * s] = &wire[s][0];
		ends[2 * s + 1] = &wire[s][1];
		wire[s][0].lazy_cq = wire[s][1].lazy_cq = cfg->lazy;
	}
	cork(cfg->cork);
	memset(apps, 0, sizeof(apps));
	rpc_reqs = cfg->reqs;
	rpc_move_every = cfg->move_every;
	for (i = 0; i < 2 * NCONN; i++) {
		struct app *a = &apps[i / NCONN][i % NCONN];

		a->client = i < NCONN;
		a->p = a->client ? &A : &B;
		a->other = a->client ? &B : &A;
		a->c = i % NCONN;
		a->p->conn[a->c].notify = app_notify;
		a->p->conn[a->c].notify_arg = a;
	}
	memwire_sched_init(&ms, ends, NLINK * 2, cfg->seed);
	/* Each seed its own mix of speeds. */
	ms.w_deliver = 1 + memwire_sched_rand(&ms) % 8;
	ms.w_rx = 1 + memwire_sched_rand(&ms) % 8;
	ms.w_cq = 1 + memwire_sched_rand(&ms) % 8;
	ms.w_hook = 1 + memwire_sched_rand(&ms) % 8;
	ms.hook = rpc_hook;
	while (!rpc_done() && ms.steps < 20000000) {
		if (cfg->cut_at >= 0 && ms.steps == (uint64_t)cfg->cut_at)
			memwire_fault(&wire[0][0], MEMWIRE_CUT);
		if (cfg->lazy)
			want_send_done_all();
		if (memwire_sched_step(&ms) < 0) {
			stalled = ms.steps + 1;
			break;
		}
	}
	if (!stalled && !rpc_done())
		stalled = ms.steps + 1;
	if (stalled && verbose) {
		for (i = 0; i < 2 * NCONN; i++) {
			struct app *a = &apps[i / NCONN][i % NCONN];
			struct smcr_conn *k = &a->p->conn[a->c];

			fprintf(stderr, "seed %llu step %llu: %s conn %u: issued %u answered %u due %u "
				"tx %u/%u hdr %u body_left %u eof %d closed %d done %d waiting %d | "
				"tx_fill %u:%u tx_prod %u:%u peer_cons %u:%u inflight %u cdc_due %d "
				"blocked %d peer_blocked %d want_close %d closed_sent %d rx_prod %u:%u rx_cons %u:%u cons_sent %u:%u\n",
				(unsigned long long)cfg->seed, (unsigned long long)ms.steps,
				a->client ? "A" : "B", a->c, a->issued, a->answered, a->due_n,
				a->tx_off, a->tx_len, a->hdr_got, a->body_left, a->eof, a->closed,
				a->done, a->waiting,
				k->tx_fill.wrap, k->tx_fill.count, k->tx_prod.wrap, k->tx_prod.count,
				k->tx_peer_cons.wrap, k->tx_peer_cons.count, k->inflight_n,
				k->cdc_due, k->blocked, k->peer_blocked, k->want_close,
				k->closed_sent, k->rx_prod.wrap,
				k->rx_prod.count, k->rx_cons.wrap, k->rx_cons.count,
				k->rx_cons_sent.wrap, k->rx_cons_sent.count);
		}
	}
	for (i = 0; i < NLINK * 2; i++) {
		CU_ASSERT(ends[i]->sq_max_used <= cfg->sq_depth);
		CU_ASSERT_EQUAL(ends[i]->chains_write_last, 0);
	}
	if (!stalled) {
		CU_ASSERT_EQUAL(A.bad_bytes, 0);
		CU_ASSERT_EQUAL(B.bad_bytes, 0);
		for (i = 0; i < NCONN; i++) {
			CU_ASSERT_EQUAL(A.conn[i].error, 0);
			CU_ASSERT_EQUAL(B.conn[i].error, 0);
			CU_ASSERT_EQUAL(apps[0][i].answered, rpc_reqs);
			CU_ASSERT_EQUAL(A.rcvd[i], B.sent[i]);
			CU_ASSERT_EQUAL(B.rcvd[i], A.sent[i]);
		}
	}
	for (i = 0; i < NCONN; i++) {
		rpc_moves += A.conn[i].moves + B.conn[i].moves;
		rpc_corked += A.conn[i].stats.corked + B.conn[i].stats.corked;
		rpc_resets += A.conn[i].error != 0 || B.conn[i].error != 0;
	}
	memwire_sched_drain(&ms);
	teardown();
	return stalled;
}

/* SMCR_SCHED_SEEDS=n runs n seeds per configuration (default 16, 3
 * under valgrind: CI runs the unit tests there too). */
static unsigned int sched_seeds(void)
{
	const char *e = getenv("SMCR_SCHED_SEEDS");
	const char *vg = getenv("SMCR_VALGRIND");

	if (e && atoi(e) > 0)
		return (unsigned int)atoi(e);
	return vg && !strcmp(vg, "1") ? 3 : 16;
}

static void sched_rpc_lazy(uint32_t cork, bool cut, unsigned int move_every, bool lazy)
{
	unsigned int n = sched_seeds(), i, stalls = 0;

	EYE = 0;
	rpc_moves = rpc_resets = 0;
	rpc_corked = 0;
	for (i = 0; i < n; i++) {
		struct rpc_cfg cfg = {
			.seed = i + 1,
			.rmbe = (i % 3) ? 1000 : 60000,
			.sq_depth = 8 + (i % 4) * 8,
			.reqs = 60,
			.tx_cap = (i % 5) == 1 ? 6000 : (i % 5) == 3 ? 30000 : 0,
			.cut_at = cut ? 2000 + (int64_t)(i * 997) % 20000 : -1,
			.move_every = move_every,
			.cork = cork,
			.lazy = lazy,
		};

		if (rpc_run(&cfg, stalls == 0))
			stalls++;
	}
	if (stalls)
		fprintf(stderr, "%u of %u seeds stalled\n", stalls, n);
	CU_ASSERT_EQUAL(stalls, 0);
	if (move_every)
		CU_ASSERT(rpc_moves > 0);
	CU_ASSERT(cork ? rpc_corked > 0 : rpc_corked == 0);
	/* Validation CDCs on the surviving link wait for what the dead
	 * one still holds (h_recv): no failover resets a connection. */
	CU_ASSERT_EQUAL(rpc_resets, 0);
}

static void sched_rpc(uint32_t cork, bool cut, unsigned int move_every)
{
	sched_rpc_lazy(cork, cut, move_every, false);
}

static void test_sched_rpc(void) { sched_rpc(0, false, 0); }
static void test_sched_rpc_cut(void) { sched_rpc(0, true, 0); }
static void test_sched_rpc_moves(void) { sched_rpc(0, false, 300); }
static void test_sched_rpc_cork(void) { sched_rpc(65536, false, 0); }
static void test_sched_rpc_cork_cut(void) { sched_rpc(65536, true, 0); }
static void test_sched_rpc_cork_moves(void) { sched_rpc(65536, false, 300); }
/* Caller-driven progress: send completions are polled only with a
 * received message or when smcr_conn_wants_tx_done() armed them; a case
 * it misses stalls (the product's 100 ms tick would hide it). */
static void test_sched_rpc_lazy(void) { sched_rpc_lazy(0, false, 0, true); }
static void test_sched_rpc_lazy_cut(void) { sched_rpc_lazy(0, true, 0, true); }
static void test_sched_rpc_lazy_cork_moves(void) { sched_rpc_lazy(65536, false, 300, true); }
/* The product's defaults (caller-driven progress, autocork) and a cut. */
static void test_sched_rpc_lazy_cork_cut(void) { sched_rpc_lazy(65536, true, 0, true); }

CU_TestInfo smcr_conn_tests[] = {
	{ "stream, small windows, wrap", test_stream_small_window_linux },
	{ "stream, zero copy, asymmetric RMBEs", test_stream_zero_copy_asym_linux },
	{ "window update threshold", test_window_update_threshold_linux },
	{ "close in both orders", test_close_orders_linux },
	{ "autocork: small sends behind a CDC in flight", test_autocork },
	{ "autocork: random streams", test_stream_autocork },
	{ "autocork: failover with sends held", test_failover_autocork },
	{ "abort mid-transfer", test_abort_mid_transfer_linux },
	{ "abort, then the link cut", test_abort_then_link_cut_linux },
	{ "bad CDC aborts one connection", test_bad_cdc_linux },
	{ "peer RMBE beyond 512 KiB: stream through 1 MiB", test_stream_large_peer_rmbe },
	{ "one doorbell per message (writes, CDC, failover validation)",
	  test_one_doorbell },
	{ "a chain: writes unsignaled, then the CDC signaled and inline",
	  test_chain_inline },
	{ "send queue: unsignaled slots held until a signaled completion",
	  test_sq_unsignaled_slots },
	{ "send queue: a long stream through 8 slots, no post refused",
	  test_stream_sq_unsignaled },
	{ "failover after chains with unsignaled writes: all replayed",
	  test_failover_unsignaled },
	{ "failover: cut link, replay", test_failover_cut_linux },
	{ "failover: acked but lost data resets", test_failover_lost_data_linux },
	{ "failover: the peer consumed beyond the rollback", test_failover_peer_consumed_more_linux },
	{ "producer cursor rewound (Linux after a failover)", test_prod_rewind_linux },
	{ "consumer cursor held at a rewound producer cursor", test_cons_held_at_rewind_linux },
	{ "consumer cursor held at our own failover", test_cons_held_at_own_failover_linux },
	{ "consumer cursor held at our failover, released at the peer's validation",
	  test_cons_released_at_validation_linux },
	{ "layout: offsets at the wrap, no eye catcher", test_layout_offsets_linux },
	{ "layout fixed after set-up: relayout", test_relayout },
	{ "RFC layout: stream, small windows, wrap", test_stream_small_window_rfc },
	{ "RFC layout: stream, zero copy, asymmetric RMBEs", test_stream_zero_copy_asym_rfc },
	{ "RFC layout: window update threshold", test_window_update_threshold_rfc },
	{ "RFC layout: close in both orders", test_close_orders_rfc },
	{ "RFC layout: abort mid-transfer", test_abort_mid_transfer_rfc },
	{ "RFC layout: abort, then the link cut", test_abort_then_link_cut_rfc },
	{ "RFC layout: bad CDC aborts one connection", test_bad_cdc_rfc },
	{ "RFC layout: failover: cut link, replay", test_failover_cut_rfc },
	{ "RFC layout: failover: acked but lost data resets", test_failover_lost_data_rfc },
	{ "RFC layout: failover: the peer consumed beyond the rollback",
	  test_failover_peer_consumed_more_rfc },
	{ "RFC layout: producer cursor rewound", test_prod_rewind_rfc },
	{ "RFC layout: consumer cursor held at a rewound producer cursor",
	  test_cons_held_at_rewind_rfc },
	{ "RFC layout: consumer cursor held at our own failover",
	  test_cons_held_at_own_failover_rfc },
	{ "RFC layout: consumer cursor released at the peer's validation",
	  test_cons_released_at_validation_rfc },
	{ "RFC layout: offsets at the wrap, eye catcher", test_layout_offsets_rfc },
	{ "scheduled wire: request/reply", test_sched_rpc },
	{ "scheduled wire: request/reply, link cut", test_sched_rpc_cut },
	{ "scheduled wire: request/reply, moves", test_sched_rpc_moves },
	{ "scheduled wire: request/reply, autocork", test_sched_rpc_cork },
	{ "scheduled wire: request/reply, autocork, link cut", test_sched_rpc_cork_cut },
	{ "scheduled wire: request/reply, autocork, moves", test_sched_rpc_cork_moves },
	{ "scheduled wire: send completions on demand", test_sched_rpc_lazy },
	{ "scheduled wire: send completions on demand, link cut", test_sched_rpc_lazy_cut },
	{ "scheduled wire: send completions on demand, autocork, moves",
	  test_sched_rpc_lazy_cork_moves },
	{ "scheduled wire: send completions on demand, autocork, link cut",
	  test_sched_rpc_lazy_cork_cut },
	CU_TEST_INFO_NULL,
};
