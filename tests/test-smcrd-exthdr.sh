#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# NBD_OPT_EXTENDED_HEADERS: tests/nbd-exthdr.py negotiates it against a
# sparse 6 GiB export (1 MiB of data at 100 MiB) and checks the extended
# requests and replies byte by byte: negotiation errors, WRITE/READ at
# 5 GiB, BLOCK_STATUS_EXT equal to the compact base:allocation, lengths
# above 32 bits refused (EOVERFLOW, EINVAL) or done (TRIM, WRITE_ZEROES),
# a 2^40-byte payload hung up on; hostile-clients.py exthdr's malformed
# extended requests.  The checks run on the NBD/TCP port and on the SMC-R
# port (its TCP fallback on this host).  Clients that do not ask keep the
# compact headers: nbd-probe (structured and simple), nbdinfo --map and
# qemu-img compare when installed.  About 10 s.
. "${srcdir:-.}/functions.sh"
. "$srcdir/test-smcrd-lib.sh"

d=$(scratch_dir)
img=$d/big.img
mib=1048576
truncate -s 6G "$img"
head -c $mib /dev/urandom >"$d/a"
dd if="$d/a" of="$img" bs=1M seek=100 conv=notrunc,fsync status=none
first=$(python3 -c 'import os,sys; f=os.open(sys.argv[1],os.O_RDONLY); print(os.lseek(f,0,os.SEEK_DATA))' "$img") ||
    skip "SEEK_DATA does not work on $d"
[ "$first" = $((100 * mib)) ] || skip "the file system of $d does not keep holes (data at $first)"

SPORT=$(free_port)
start_smcrd --smcr-port "$SPORT" --export "disk=$img"
wait_for 10 grep -q 'listening for NBD over SMC-R' "$SMCRD_LOG"

python3 "$srcdir/nbd-exthdr.py" "$PORT" disk || fail "nbd-exthdr.py failed"
# The SMC-R port's parser, over its TCP fallback (a SYN without the SMC
# option): the same checks.
python3 "$srcdir/nbd-exthdr.py" "$SPORT" disk >"$d/smcr.out" ||
    { cat "$d/smcr.out"; fail "nbd-exthdr.py on the SMC-R port failed"; }
echo "the same $(grep -c '^ok:' "$d/smcr.out") checks pass on the SMC-R port (TCP fallback)"
log_has "export 'disk' (extended replies" || fail "smcrd did not log an extended session"
grep -q "WRITE with a payload of 1099511627776 bytes: dropping the connection" "$SMCRD_LOG" ||
    fail "smcrd did not log the 2^40-byte payload"

# Hostile extended headers: a compact magic and a 2^63-byte payload end the
# connection, a wrapping BLOCK_STATUS gets an extended error reply, half a
# header is dropped; smcrd serves on.
out=$(python3 "$HOSTILE" exthdr "$PORT" disk 40) || fail "hostile-clients.py exthdr: $out"
[ "$out" = "hung up 20, answered 10" ] || fail "hostile-clients.py exthdr: $out"
echo "hostile extended headers: $out"

# Our own client (compact headers): data and exact errors as before.
out=$(probe -s 127.0.0.1 "$PORT" ops disk w:0:4096 r:0:4096 r:6442450944:1 f) ||
    fail "nbd-probe -s: $out"
[ "$out" = "w:0:4096 ok
r:0:4096 ok
r:6442450944:1 EINVAL
f ok" ] || fail "nbd-probe -s printed
$out"
out=$(probe 127.0.0.1 "$PORT" ops disk r:0:4096 t:0:4096) || fail "nbd-probe: $out"
[ "$out" = "r:0:4096 ok
t:0:4096 ok" ] || fail "nbd-probe (simple replies) printed
$out"
echo "nbd-probe, compact headers: structured and simple replies as before"

if command -v nbdinfo >/dev/null 2>&1; then
    got=$(nbdinfo --map "$(uri disk)" | awk '{ print $1, $2, $3 }') || fail "nbdinfo --map failed"
    want="0 $((100 * mib)) 3
$((100 * mib)) $mib 0
$((101 * mib)) $((6144 * mib - 101 * mib)) 3"
    [ "$got" = "$want" ] || fail "nbdinfo --map shows
$got
instead of
$want"
    echo "nbdinfo $(nbdinfo --version | head -1 | awk '{ print $2 }') --map: the layout written"
else
    echo "nbdinfo not installed: not run"
fi
if command -v qemu-img >/dev/null 2>&1; then
    qemu-img compare -f raw -F raw "$img" "$(uri disk)" >/dev/null ||
        fail "qemu-img compare: the export differs from its file"
    echo "$(qemu-img --version | head -1): compare: identical"
else
    echo "qemu-img not installed: not run"
fi
stop_smcrd
echo "PASS: extended headers (64-bit requests, BLOCK_STATUS_EXT), compact clients unchanged"
