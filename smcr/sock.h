/* SPDX-License-Identifier: BSD-3-Clause */
/* smcrbd: socket internals shared by sock.c and sock_clc.c. */
#ifndef SMCR_SOCK_H
#define SMCR_SOCK_H

#include "engine.h"

/* A socket around a TCP fd (not yet linked into the context). */
struct smcr_sock *smcr_sock_new(struct smcr_ctx *ctx, int fd);
/* Link into ctx->socks and hook connection wake-ups (ctx->lock held). */
void smcr_sock_link(struct smcr_sock *s);
/* Unlink and free everything it holds (ctx->lock held). */
void smcr_sock_destroy_locked(struct smcr_sock *s);

#endif
