/* SPDX-License-Identifier: BSD-3-Clause */
/* smcrbd: libsmcr against a peer that lies (issue 13 defect 7): link
 * groups are found by peer ID, role, GID, MAC (and the server's QP for a
 * client), not by the peer ID a peer may copy; our peer ID's random part
 * comes from getrandom(), not from rand() and the pid. */
#include <config.h>

#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "unit.h"
#include "smcr-suites.h"
#include "engine.h"
#include "link.h"

/* One group with one active link to a peer (gid 0x11.., mac 0x22..,
 * qpn 0x123). */
static void one_group(struct smcr_ctx *ctx, struct smcr_lgr *lgr, struct smcr_link *link,
		      enum smcr_role role, const uint8_t pid[8])
{
	memset(ctx, 0, sizeof(*ctx));
	memset(lgr, 0, sizeof(*lgr));
	memset(link, 0, sizeof(*link));
	link->state = SMCR_LINK_ACTIVE;
	lgr->role = role;
	memcpy(lgr->peer_id, pid, 8);
	lgr->links[0].link = link;
	memset(lgr->links[0].peer.gid, 0x11, SMCR_GID_LEN);
	memset(lgr->links[0].peer.mac, 0x22, SMCR_MAC_LEN);
	lgr->links[0].peer.qpn = 0x123;
	ctx->lgrs = lgr;
}

static void test_lgr_match(void)
{
	static const uint8_t pid[8] = { 1, 2, 3, 4, 5, 6, 7, 8 };
	uint8_t gid[SMCR_GID_LEN], mac[SMCR_MAC_LEN], other[SMCR_GID_LEN];
	struct smcr_ctx ctx;
	struct smcr_lgr lgr;
	struct smcr_link link;

	memset(gid, 0x11, sizeof(gid));
	memset(mac, 0x22, sizeof(mac));
	memset(other, 0x33, sizeof(other));
	one_group(&ctx, &lgr, &link, SMCR_ROLE_SERVER, pid);
	CU_ASSERT_PTR_EQUAL(smcr_engine_lgr_find(&ctx, SMCR_ROLE_SERVER, pid, gid, mac, 0), &lgr);
	/* Same peer ID, another GID or MAC: another peer. */
	CU_ASSERT_PTR_NULL(smcr_engine_lgr_find(&ctx, SMCR_ROLE_SERVER, pid, other, mac, 0));
	CU_ASSERT_PTR_NULL(smcr_engine_lgr_find(&ctx, SMCR_ROLE_SERVER, pid, gid, other, 0));
	/* The other role's group is not ours to join. */
	CU_ASSERT_PTR_NULL(smcr_engine_lgr_find(&ctx, SMCR_ROLE_CLIENT, pid, gid, mac, 0x123));
	/* A link that is not active does not count. */
	link.state = SMCR_LINK_FAILED;
	CU_ASSERT_PTR_NULL(smcr_engine_lgr_find(&ctx, SMCR_ROLE_SERVER, pid, gid, mac, 0));

	/* A client also checks the server's QP. */
	one_group(&ctx, &lgr, &link, SMCR_ROLE_CLIENT, pid);
	CU_ASSERT_PTR_EQUAL(smcr_engine_lgr_find(&ctx, SMCR_ROLE_CLIENT, pid, gid, mac, 0x123),
			    &lgr);
	CU_ASSERT_PTR_NULL(smcr_engine_lgr_find(&ctx, SMCR_ROLE_CLIENT, pid, gid, mac, 0x124));
	CU_ASSERT_PTR_NULL(smcr_engine_lgr_find(&ctx, SMCR_ROLE_CLIENT, pid, other, mac, 0x123));
}

/* A fresh process's peer ID instance (2 bytes) with its pid taken out
 * as the old rand() ^ pid put it in, through a pipe. */
static int child_instance(uint8_t out[2])
{
	struct smcr_ctx_opts o = { .no_smc = true };
	struct smcr_ctx *ctx;
	int p[2], st;
	pid_t pid;

	if (pipe(p))
		return -1;
	pid = fork();
	if (pid == 0) {
		uint8_t b[2] = { 0, 0 };

		if (smcr_ctx_create(&o, &ctx) == 0) {
			b[0] = (uint8_t)(ctx->peer_id[0] ^ getpid());
			b[1] = (uint8_t)(ctx->peer_id[1] ^ getpid() >> 8);
			smcr_ctx_destroy(ctx);
		}
		_exit(write(p[1], b, 2) == 2 ? 0 : 1);
	}
	close(p[1]);
	st = read(p[0], out, 2) == 2 ? 0 : -1;
	close(p[0]);
	waitpid(pid, NULL, 0);
	return st;
}

/* Children share our rand() state: with rand() ^ pid, what is left once
 * the pid is taken out is the same in every one (anybody who knows the
 * pid knows the ID). */
static void test_peer_id_random(void)
{
	uint8_t first[2], b[2];
	unsigned int i, same = 0;

	CU_ASSERT_FATAL(child_instance(first) == 0);
	for (i = 0; i < 7; i++) {
		CU_ASSERT_FATAL(child_instance(b) == 0);
		if (!memcmp(first, b, 2))
			same++;
	}
	CU_ASSERT(same <= 2);
}

/* RMB memory per group has a limit by default (issue 13 defect 8); the
 * option and SMCR_MAX_RMB_BYTES set it. */
static void test_rmb_limit_default(void)
{
	struct smcr_ctx_opts o = { .no_smc = true };
	struct smcr_ctx *ctx;

	unsetenv("SMCR_MAX_RMB_BYTES");
	CU_ASSERT(smcr_lgr_config_default.max_rmb_bytes == SMCR_LGR_MAX_RMB_BYTES);
	CU_ASSERT_FATAL(smcr_ctx_create(&o, &ctx) == 0);
	CU_ASSERT(ctx->lgr_cfg.max_rmb_bytes == (size_t)256 << 20);
	smcr_ctx_destroy(ctx);
	setenv("SMCR_MAX_RMB_BYTES", "8388608", 1);
	CU_ASSERT_FATAL(smcr_ctx_create(&o, &ctx) == 0);
	CU_ASSERT(ctx->lgr_cfg.max_rmb_bytes == (size_t)8 << 20);
	smcr_ctx_destroy(ctx);
	o.max_rmb_bytes = (size_t)4 << 20;
	CU_ASSERT_FATAL(smcr_ctx_create(&o, &ctx) == 0);
	CU_ASSERT(ctx->lgr_cfg.max_rmb_bytes == (size_t)4 << 20);
	smcr_ctx_destroy(ctx);
	unsetenv("SMCR_MAX_RMB_BYTES");
}

CU_TestInfo smcr_hostile_tests[] = {
	{ "link group match: peer ID, role, GID, MAC, QP", test_lgr_match },
	{ "peer ID from getrandom", test_peer_id_random },
	{ "RMB memory per group: limited by default", test_rmb_limit_default },
	CU_TEST_INFO_NULL,
};
