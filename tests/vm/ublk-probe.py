#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
# smcr-attach-ublk.sh's probe of a restart, started ahead so that no exec
# is in what it measures: opens DEVICE with O_DIRECT, touches READY, waits
# for a line on the FIFO GO, then reads 4 KiB at OFFSET and writes the
# time it came back (the shell's $EPOCHREALTIME form) to BACK.  TRACE: a
# tracefs directory, marked "back" and stopped then (or "").
import mmap
import os
import sys
import time

dev, offset, ready, go, back, trace = sys.argv[1:7]
fd = os.open(dev, os.O_RDONLY | os.O_DIRECT)
buf = mmap.mmap(-1, 4096)
open(ready, "w").close()
with open(go) as f:
    f.readline()
n = os.preadv(fd, [buf], int(offset))
t = time.time()
if trace:
    with open(trace + "/trace_marker", "w") as f:
        f.write("back\n")
    with open(trace + "/tracing_on", "w") as f:
        f.write("0\n")
if n != 4096:
    sys.exit("short read: %d" % n)
with open(back + ".tmp", "w") as f:
    f.write("%.6f\n" % t)
os.rename(back + ".tmp", back)
