/* SPDX-License-Identifier: BSD-3-Clause */
/* smcrbd: libFuzzer target for fault specs (smcr_fault(): the control
 * socket's "fault SPEC", smcrctl fault, SMCR_FAULT) on a context with no
 * link groups: every spec is parsed, none finds a link. */
#include <config.h>

#include <errno.h>
#include <string.h>

#include "fuzz.h"
#include "engine.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct smcr_ctx ctx;
	static int once;
	char *s;
	int r;

	if (!once++) {
		fuzz_quiet_log();
		pthread_mutex_init(&ctx.lock, NULL);
		ctx.epfd = ctx.wakefd = ctx.timerfd = -1;
	}
	s = malloc(size + 1);
	if (!s)
		return 0;
	memcpy(s, data, size);
	s[size] = '\0';
	/* Half the runs with the table of timed faults full. */
	ctx.nfaults = size & 1 ? 8 : 0;
	r = smcr_fault(&ctx, s);
	FUZZ_REQUIRE(r == 0 || r == -EINVAL || r == -ENOENT || r == -ENOSPC);
	FUZZ_REQUIRE(ctx.nfaults <= 8);
	if (r == 0)
		FUZZ_REQUIRE(ctx.nfaults == 1);
	free(s);
	return 0;
}
