#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# A block device as export: smcrd advertises a
# minimum block size of 1, so unaligned WRITE_ZEROES and TRIM must work
# on a loop device (fallocate there wants whole sectors): zeroing 6000
# bytes at 3000 (with and without NO_HOLE) reads back as zeroes with the
# bytes around intact, an unaligned TRIM succeeds and leaves the partial
# sectors at its edges alone, aligned zeroing still works.  Needs root
# and a loop device (exit 77 without).  About 2 s.
# smcr-timeout: 120
. "${srcdir:-.}/functions.sh"
. "$srcdir/test-smcrd-lib.sh"
requires_root
requires losetup --version
requires_nbd_python

d=$(scratch_dir)
truncate -s 8M "$d/backing.img"
loop=$(losetup -f --show "$d/backing.img" 2>/dev/null) || skip "no loop device here"
cleanup_fn "losetup -d '$loop'"
[ -b "$loop" ] || skip "losetup gave no block device"

start_smcrd --export "disk=$loop"
nbd_python "$(uri disk)" <<'PY' || fail "unaligned zeroing on a block device"
import nbd, os, sys
h = nbd.NBD()
h.connect_uri(sys.argv[1])
assert h.get_block_size(nbd.SIZE_MINIMUM) == 1, h.get_block_size(nbd.SIZE_MINIMUM)
data = os.urandom(1 << 16)
h.pwrite(data, 0)
h.zero(6000, 3000)
want = bytearray(data)
want[3000:9000] = bytes(6000)
assert h.pread(1 << 16, 0) == want, "zero(6000, 3000) read back wrong"
h.zero(1000, 20000, nbd.CMD_FLAG_NO_HOLE)
want[20000:21000] = bytes(1000)
assert h.pread(1 << 16, 0) == want, "zero(1000, 20000, NO_HOLE) read back wrong"
# TRIM is a hint: sectors [30208, 34816) may go; the partial sectors at
# its edges keep their bytes.
h.trim(5000, 30001)
back = h.pread(1 << 16, 0)
assert back[:30208] == want[:30208], "unaligned TRIM touched bytes before its sectors"
assert back[34816:] == want[34816:], "unaligned TRIM touched bytes after its sectors"
want[30208:34816] = back[30208:34816]
h.zero(8192, 4096)
want[4096:12288] = bytes(8192)
assert h.pread(1 << 16, 0) == want, "aligned zero read back wrong"
h.flush()
print("block device: zero(6000,3000), zero NO_HOLE, unaligned trim, aligned zero: right")
PY
log_has "export 'disk': $loop" || fail "export not logged"
stop_smcrd
echo "PASS: unaligned WRITE_ZEROES and TRIM on a block device"
