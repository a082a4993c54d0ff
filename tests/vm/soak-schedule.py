#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""The soak's fault schedule (tests/vm/soak.sh): soak-schedule.py SEED COUNT.

Prints COUNT lines "N KIND SIDE LINK HOLD_MS GAP_MS", the same for the same
seed.  Every kind comes once in the first len(KINDS) faults (in a shuffled
order), then they are drawn by weight: the fast kinds densely, the restarts
seldom.  SIDE is A (the client), B (the server) or AB (both: a cable);
LINK is 1 or 2; HOLD_MS how long the fault lasts before it is undone;
GAP_MS the pause after the group is whole again.  SMCR_SOAK_KINDS (a comma
list) draws only those kinds; SMCR_SOAK_PAUSES=0 leaves pause and sigstop
out (unless named there)."""
import os
import random
import sys

PAUSE_W = 0 if os.environ.get("SMCR_SOAK_PAUSES", "1") == "0" else 3
# kind: (weight, sides, hold range in ms)
KINDS = {
    "qp-error":    (30, ("A", "B"), (0, 0)),
    "drop":        (6, ("A", "B"), (4500, 4500)),
    "delay":       (20, ("A", "B"), (1000, 2500)),
    "cable":       (14, ("AB",), (300, 800)),
    "ifdown":      (4, ("A", "B"), (300, 1000)),
    "rdma-delete": (4, ("A", "B"), (300, 1000)),
    "netem":       (3, ("A", "B"), (2000, 3000)),
    "both-down":   (3, ("AB",), (1500, 4000)),
    "kill":        (2, ("B",), (0, 500)),
    "term":        (2, ("B",), (0, 500)),
    "hup":         (6, ("B",), (0, 0)),
    # Not with SMCR_SOAK_PAUSES=0 (the older schedule) unless named in
    # SMCR_SOAK_KINDS.
    # qemu stop/cont of one guest (a live migration's blackout); up to
    # SMCR_SOAK_PAUSE_MS (default 10000: the default QP timing retries for
    # ~15 s, libsmcr's last link waits ~16 s for a silent peer)
    "pause":       (PAUSE_W, ("A", "B"), (1000, int(os.environ.get("SMCR_SOAK_PAUSE_MS", "10000")))),
    # SIGSTOP/SIGCONT of nbdkit (A) or smcrd (B)
    "sigstop":     (PAUSE_W, ("A", "B"), (1000, 5000)),
}


def main():
    seed, count = int(sys.argv[1]), int(sys.argv[2])
    # SMCR_SOAK_KINDS=a,b,...: only those kinds (by their weights)
    only = [k for k in os.environ.get("SMCR_SOAK_KINDS", "").split(",") if k]
    for k in only:
        if k not in KINDS:
            sys.exit("soak-schedule.py: unknown kind %s (known: %s)" % (k, " ".join(sorted(KINDS))))
        if not KINDS[k][0]:
            KINDS[k] = (1,) + KINDS[k][1:]
    for k in KINDS:
        if only and k not in only:
            KINDS[k] = (0,) + KINDS[k][1:]
    rnd = random.Random(seed)
    names = sorted(KINDS)
    first = [k for k in names if KINDS[k][0]]
    rnd.shuffle(first)
    weights = [KINDS[k][0] for k in names]
    for i in range(count):
        kind = first[i] if i < len(first) else rnd.choices(names, weights)[0]
        _, sides, (lo, hi) = KINDS[kind]
        side = rnd.choice(sides)
        link = rnd.choice((1, 2))
        hold = rnd.randint(lo, hi)
        gap = rnd.randint(100, 400)
        print(i + 1, kind, side, link, hold, gap)


if __name__ == "__main__":
    main()
