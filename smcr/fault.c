/* SPDX-License-Identifier: BSD-3-Clause */
/* smcrbd: fault injection (smcr_fault, SMCR_FAULT; the spec is in smcr.h):
 * a spec parsed, then applied to links now or kept on the context's
 * schedule, which the progress thread's tick runs. */
#include <config.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine.h"
#include "log.h"

enum smcr_fault_action {
	FAULT_FAIL, FAULT_DROP, FAULT_DELAY, FAULT_CLEAR, FAULT_UNDROP, FAULT_UNDELAY,
};

/* While a link holds work requests back the timer runs this often. */
#define SMCR_FAULT_TICK_MS 5

static const char *const fault_names[] = {
	[FAULT_FAIL] = "fail", [FAULT_DROP] = "drop", [FAULT_DELAY] = "delay",
	[FAULT_CLEAR] = "clear", [FAULT_UNDROP] = "undrop", [FAULT_UNDELAY] = "undelay",
};

/* Apply f to the links with its id, or (id 0) on the device it names;
 * how many. */
static int fault_links(struct smcr_ctx *ctx, const struct smcr_fault_sched *f)
{
	static const enum smcr_vlink_fault_kind kind[] = {
		[FAULT_DROP] = SMCR_VLINK_FAULT_DROP,
		[FAULT_DELAY] = SMCR_VLINK_FAULT_DELAY,
		[FAULT_CLEAR] = SMCR_VLINK_FAULT_NONE,
		[FAULT_UNDROP] = SMCR_VLINK_FAULT_NONE,
		[FAULT_UNDELAY] = SMCR_VLINK_FAULT_NONE,
	};
	struct smcr_lgr *lgr;
	unsigned int i;
	int n = 0;

	for (lgr = ctx->lgrs; lgr; lgr = lgr->next) {
		if (lgr->terminated)
			continue;
		for (i = 0; i < SMCR_LINK_SLOTS; i++) {
			struct smcr_link *l = lgr->links[i].link;

			if (!l || l->state == SMCR_LINK_FAILED || lgr->links[i].down)
				continue;
			if (f->link_id ? l->link_id != f->link_id :
			    !l->dev || strcmp(l->dev->name, f->dev))
				continue;
			/* undrop and undelay end only their own kind. */
			if ((f->action == FAULT_UNDROP || f->action == FAULT_UNDELAY) &&
			    (!l->dev || smcr_vlink_fault_get(l) !=
			     (f->action == FAULT_UNDROP ? SMCR_VLINK_FAULT_DROP :
			      SMCR_VLINK_FAULT_DELAY)))
				continue;
			if (f->action == FAULT_DELAY)
				smcr_info("fault injection: delay link %u (%s) by %u ms",
					  l->link_id, l->dev ? l->dev->name : "-", f->ms);
			else
				smcr_info("fault injection: %s link %u (%s)",
					  fault_names[f->action], l->link_id,
					  l->dev ? l->dev->name : "-");
			if (f->action == FAULT_FAIL) {
				l->ops->fail(l);
			} else if (!l->dev || smcr_vlink_fault(l, kind[f->action], f->ms,
							      f->for_ms)) {
				continue;
			}
			n++;
		}
	}
	if (n && f->action != FAULT_FAIL)
		smcr_engine_set_tick(ctx, SMCR_FAULT_TICK_MS);
	return n;
}

/* A whole decimal number of at most 32 bits. */
static int parse_u32(const char *s, unsigned int *v)
{
	unsigned long long x;
	char *end;

	if (*s < '0' || *s > '9')
		return -EINVAL;
	errno = 0;
	x = strtoull(s, &end, 10);
	if (*end || errno || x > UINT32_MAX)
		return -EINVAL;
	*v = (unsigned int)x;
	return 0;
}

int smcr_engine_fault(struct smcr_ctx *ctx, const char *spec)
{
	static const char *const opts[] = { "after=", "every=", "count=", "ms=", "for=" };
	struct smcr_fault_sched f = { .action = FAULT_FAIL };
	unsigned int v[5] = { 0 }, id = 0;
	char buf[128], *tok, *save = NULL;
	bool timed = false, target = false;
	size_t a, o, nl;

	if (snprintf(buf, sizeof(buf), "%s", spec) >= (int)sizeof(buf))
		return -EINVAL;
	for (tok = strtok_r(buf, ", ", &save); tok; tok = strtok_r(NULL, ", ", &save)) {
		char *eq = strchr(tok, '=');

		for (o = 0; o < sizeof(opts) / sizeof(opts[0]); o++)
			if (!strncmp(tok, opts[o], strlen(opts[o])))
				break;
		if (o < sizeof(opts) / sizeof(opts[0])) {
			if (parse_u32(tok + strlen(opts[o]), &v[o]))
				return -EINVAL;
			if (o < 3)
				timed = true;
			continue;
		}
		/* ACTION-link=N or ACTION-dev=NAME, once */
		for (a = 0; a < sizeof(fault_names) / sizeof(fault_names[0]); a++) {
			nl = strlen(fault_names[a]);
			if (!strncmp(tok, fault_names[a], nl) && tok[nl] == '-')
				break;
		}
		if (target || a == sizeof(fault_names) / sizeof(fault_names[0]) || !eq || !eq[1])
			return -EINVAL;
		f.action = (uint8_t)a;
		if (!strncmp(tok + nl, "-link=", 6)) {
			if (parse_u32(eq + 1, &id) || id < 1 || id > 255)
				return -EINVAL;
		} else if (!strncmp(tok + nl, "-dev=", 5)) {
			if (snprintf(f.dev, sizeof(f.dev), "%s", eq + 1) >= (int)sizeof(f.dev))
				return -EINVAL;
		} else {
			return -EINVAL;
		}
		target = true;
	}
	f.ms = v[3];
	f.for_ms = v[4];
	/* ms= only with delay (and there required), for= with drop and delay */
	if (!target || (f.action == FAULT_DELAY) != (f.ms > 0) ||
	    (f.for_ms && f.action != FAULT_DROP && f.action != FAULT_DELAY))
		return -EINVAL;
	f.link_id = (uint8_t)id;
	if (!timed)
		return fault_links(ctx, &f) ?: -ENOENT;
	if (ctx->nfaults >= sizeof(ctx->faults) / sizeof(ctx->faults[0]))
		return -ENOSPC;
	f.next_ms = smcr_now_ms() + (v[0] ? v[0] : v[1]);
	f.every_ms = v[1];
	f.left = v[2];
	ctx->faults[ctx->nfaults++] = f;
	if (id)
		smcr_info("fault injection: %s link %u in %u ms%s", fault_names[f.action], id,
			  v[0] ? v[0] : v[1], v[1] ? ", then again and again" : "");
	else
		smcr_info("fault injection: %s the links on %s in %u ms%s",
			  fault_names[f.action], f.dev, v[0] ? v[0] : v[1],
			  v[1] ? ", then again and again" : "");
	return 0;
}

void smcr_engine_faults_tick(struct smcr_ctx *ctx, uint64_t now)
{
	unsigned int i = 0;

	while (i < ctx->nfaults) {
		struct smcr_fault_sched *f = &ctx->faults[i];
		int n;

		if (now < f->next_ms) {
			i++;
			continue;
		}
		n = fault_links(ctx, f);
		if (f->every_ms) {
			f->next_ms = now + f->every_ms;
			if (n > 0 && f->left && --f->left == 0)
				f->every_ms = 0;
		}
		if (!f->every_ms && n > 0) {
			ctx->faults[i] = ctx->faults[--ctx->nfaults];
			continue;
		}
		i++;
	}
}
