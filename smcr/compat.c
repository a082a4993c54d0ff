/* SPDX-License-Identifier: BSD-3-Clause */
/* smcrbd: LIBSMCR_0.1's calls that took a struct without its size, for
 * programs linked against it (smcr.h's inlines now pass sizeof to the
 * *_size calls of LIBSMCR_0.2).  Only in the shared library. */
#include <config.h>

#include "abi.h"

int smcr_ctx_create_0_1(const struct smcr_ctx_opts *opts, struct smcr_ctx **ctxp);
int smcr_ctx_stats_0_1(struct smcr_ctx *ctx, struct smcr_stats *st);
int smcr_sock_info_0_1(struct smcr_sock *s, struct smcr_sock_info *info);

__asm__(".symver smcr_ctx_create_0_1, smcr_ctx_create@LIBSMCR_0.1");
int smcr_ctx_create_0_1(const struct smcr_ctx_opts *opts, struct smcr_ctx **ctxp)
{
	return smcr_ctx_create_size(opts, SMCR_CTX_OPTS_SIZE_0_1, ctxp);
}

__asm__(".symver smcr_ctx_stats_0_1, smcr_ctx_stats@LIBSMCR_0.1");
int smcr_ctx_stats_0_1(struct smcr_ctx *ctx, struct smcr_stats *st)
{
	return smcr_ctx_stats_size(ctx, st, SMCR_STATS_SIZE_0_1);
}

__asm__(".symver smcr_sock_info_0_1, smcr_sock_info@LIBSMCR_0.1");
int smcr_sock_info_0_1(struct smcr_sock *s, struct smcr_sock_info *info)
{
	return smcr_sock_info_size(s, info, SMCR_SOCK_INFO_SIZE_0_1);
}
