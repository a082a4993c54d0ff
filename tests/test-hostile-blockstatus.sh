#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# BLOCK_STATUS does not stall the worker's other clients: on a fragmented export (4 KiB of data every 128 KiB,
# blocksize=65536) and one worker, a client sends 128 BLOCK_STATUS
# requests over the whole export at once while a second client READs
# 64 KiB at a time (tests/bs-stall.py).  The scans run in slices between
# the worker's other work: the READs go on meanwhile (at least 8 of them,
# or, when the whole burst is over in fewer, no READ waited for half of it;
# before, 1 or 2 READs, the first waiting for all 128 scans).  On a fast
# file system the 128 scans may take 35 ms, time for only 7 READs; on a
# loaded one, a READ may wait 0.28 s of a 0.72 s burst beside 20 others:
# neither is a stall.  Every reply carries its 256 extents (the scan's
# step bound), and smcrd's descriptors come back.  About 10 s.
# smcr-timeout: 120
. "${srcdir:-.}/functions.sh"
. "$srcdir/test-smcrd-lib.sh"
requires_nbd_python

d=$(scratch_dir)
"$NBD_PYTHON" - "$d/frag.img" <<'PY' || fail "cannot make the fragmented file"
import os, sys
fd = os.open(sys.argv[1], os.O_CREAT | os.O_WRONLY | os.O_TRUNC, 0o644)
os.ftruncate(fd, 64 << 20)
for off in range(0, 64 << 20, 128 << 10):
    os.pwrite(fd, b"x" * 4096, off)
os.close(fd)
PY
nholes=$("$NBD_PYTHON" -c '
import os, sys
fd = os.open(sys.argv[1], os.O_RDONLY)
print(os.lseek(fd, 0, os.SEEK_HOLE) < (64 << 20))' "$d/frag.img")
[ "$nholes" = True ] || skip "the scratch file system reports no holes (SEEK_HOLE)"
start_smcrd --export "disk=$d/frag.img,blocksize=65536" -t 1
base=$(nfds)
"$NBD_PYTHON" "$srcdir/bs-stall.py" "nbd://127.0.0.1:$PORT/disk" 128 >"$d/out" ||
    fail "bs-stall.py failed"
cat "$d/out"
read -r burst ext reads worst < <(sed -E -n \
    's/^block_status 128 in ([0-9.]+) s, ([0-9]+) extents; ([0-9]+) reads meanwhile, worst ([0-9.]+) s$/\1 \2 \3 \4/p' "$d/out")
[ -n "$worst" ] || fail "no figures from bs-stall.py"
[ "$ext" = $((128 * 256)) ] || fail "$ext extents in 128 replies, want 256 each"
if [ "$reads" -lt 8 ] && awk -v w="$worst" -v b="$burst" 'BEGIN { exit !(w * 2 > b) }'; then
    fail "only $reads READs beside 128 BLOCK_STATUS ($burst s), one waited $worst s: the worker stalled"
fi
for (( i=0; i<100; i++ )); do [ "$(nfds)" -le "$base" ] && break; sleep 0.1; done
[ "$(nfds)" -le "$base" ] || fail "smcrd holds $(nfds) descriptors, $base before"
stop_smcrd
echo "PASS: $reads READs (worst $worst s) beside 128 BLOCK_STATUS scans ($burst s)"
