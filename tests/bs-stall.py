#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""bs-stall.py URI N: N BLOCK_STATUS requests over the whole export on one
connection, and meanwhile 64 KiB READs one after the other on a second
one (the same smcrd worker).  Prints the time until the last BLOCK_STATUS
reply, the READs done meanwhile, their worst latency, and the extents
received (for tests/test-hostile-blockstatus.sh)."""
import sys, time
import nbd

uri, n = sys.argv[1], int(sys.argv[2])
h1 = nbd.NBD()
h1.add_meta_context("base:allocation")
h1.connect_uri(uri)
h2 = nbd.NBD()
h2.connect_uri(uri)
size = h1.get_size()
ext = [0]


def cb(meta, off, entries, err):
    ext[0] += len(entries) // 2
    return 0


t0 = time.monotonic()
for _ in range(n):
    h1.aio_block_status(min(size, (1 << 32) - 65536), 0, cb)
reads, worst = 0, 0.0
while h1.aio_in_flight() > 0:
    t = time.monotonic()
    h2.pread(65536, 0)
    worst = max(worst, time.monotonic() - t)
    reads += 1
    while h1.aio_in_flight() > 0 and h1.poll(0) > 0:
        pass
burst = time.monotonic() - t0
print("block_status %d in %.3f s, %d extents; %d reads meanwhile, worst %.3f s"
      % (n, burst, ext[0], reads, worst))
h1.shutdown()
h2.shutdown()
