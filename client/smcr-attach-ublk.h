/* SPDX-License-Identifier: BSD-3-Clause */
/* smcr-attach --ublk: an export as a ublk block device (/dev/ublkbN),
 * served by the client engine (smcr-attach-ublk.c). */
#ifndef SMCRBD_SMCR_ATTACH_UBLK_H
#define SMCRBD_SMCR_ATTACH_UBLK_H

#include <signal.h>
#include <stdbool.h>
#include <stdint.h>

#include "nbd-conn.h"

struct ublk_args {
	struct nbdc_opts no;		/* the engine's (turn_end etc. are ours) */
	int dev_id;			/* N of /dev/ublkbN; -1: the next free */
	bool recover;			/* take over the existing /dev/ublkbN */
	bool standby;			/* with recover: connect first, wait for its
					 * server (and each next one) to be gone */
	bool recover_auto;		/* make /dev/ublkbN if there is none, else as
					 * recover + standby (a service's restarts) */
	unsigned block;			/* logical block size; 0: the export's */
	unsigned queue_depth;		/* 0: UBLK_QD */
	bool readonly;
	int64_t main_ms;		/* now_ms() when main() began; 0: unknown */
};

/* Until a signal (then it removes the device) or the device's removal
 * by another (smcr-attach -d).  A SIGKILL leaves the device for the next
 * smcr-attach --ublk=N --recover.  Returns the exit status. */
int ublk_run(const struct ublk_args *a, volatile sig_atomic_t *stop);
/* Removes /dev/ublkbN (whose server is gone, or going). */
int ublk_detach(int dev_id);

#endif
