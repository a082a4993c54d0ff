#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# base:allocation (NBD_CMD_BLOCK_STATUS): a sparse 1 GiB export with three
# data extents (1 MiB at 100 MiB, 4 KiB at 512 MiB, 2 MiB at the end)
#  - nbdinfo --map shows exactly those extents and the holes between them;
#  - nbdcopy and qemu-img convert copy it: same bytes, the copies stay
#    sparse (at most 4 MiB allocated for the 3 MiB of data, not 1 GiB),
#    and smcrd read at most 4 MiB for each (the holes were skipped, not
#    read and found to be zeroes);
# through smcrd directly, through nbdkit smcr transport=tcp, and (map
# only) through nbdkit smcr uri=smcr://... on smcrd's SMC-R port (TCP
# fallback on this host).  About 5 s.
# smcr-timeout: 120
. "${srcdir:-.}/functions.sh"
. "$srcdir/test-smcrd-lib.sh"
. "$srcdir/test-client-lib.sh"
requires nbdinfo --version
requires nbdcopy --version
requires qemu-img --version
requires nbdkit --version

d=$(scratch_dir)
img=$d/sparse.img
mib=1048576
truncate -s 1G "$img"
make_random "$d/a" 1
make_random "$d/c" 2
head -c 4096 /dev/urandom >"$d/b"
dd if="$d/a" of="$img" bs=1M seek=100 conv=notrunc,fsync status=none
dd if="$d/b" of="$img" bs=4096 seek=$((512 * 256)) conv=notrunc,fsync status=none
dd if="$d/c" of="$img" bs=1M seek=1022 conv=notrunc,fsync status=none
# The file system must keep holes (SEEK_DATA finds the first data at 100 MiB).
first=$(python3 -c 'import os,sys; f=os.open(sys.argv[1],os.O_RDONLY); print(os.lseek(f,0,os.SEEK_DATA))' "$img") ||
    skip "SEEK_DATA does not work on $d"
[ "$first" = $((100 * mib)) ] || skip "the file system of $d does not keep holes (data at $first)"

# offset length type, one extent a line, as nbdinfo --map prints them.
want_map="0 $((100 * mib)) 3
$((100 * mib)) $mib 0
$((101 * mib)) $((411 * mib)) 3
$((512 * mib)) 4096 0
$((512 * mib + 4096)) $((510 * mib - 4096)) 3
$((1022 * mib)) $((2 * mib)) 0"

SPORT=$(free_port)
start_smcrd --smcr-port "$SPORT" --export "disk=$img"
wait_for 10 grep -q 'listening for NBD over SMC-R' "$SMCRD_LOG"

check_map() {    # WHAT URI
    local got
    got=$(nbdinfo --map "$2" | awk '{ print $1, $2, $3 }') || fail "$1: nbdinfo --map failed"
    [ "$got" = "$want_map" ] || fail "$1: nbdinfo --map shows
$got
instead of
$want_map"
    echo "$1: nbdinfo --map: 3 data extents, 3 holes, as written"
}

# Bytes smcrd read for the connections closed since log line $1 (waits
# until every connection opened since then is closed).
all_closed() {
    local opened closed
    opened=$(tail -n +"$1" "$SMCRD_LOG" | grep -c "export 'disk' (")
    closed=$(tail -n +"$1" "$SMCRD_LOG" | grep -c "export 'disk' closed")
    [ "$opened" = "$closed" ]
}
read_since() {
    wait_for 10 all_closed "$1"
    tail -n +"$1" "$SMCRD_LOG" | sed -n "s/.*export 'disk' closed (.* \([0-9]*\) bytes read.*/\1/p" |
        awk '{ s += $1 } END { print s + 0 }'
}
log_at() { echo $(( $(wc -l <"$SMCRD_LOG") + 1 )); }

allocated() { echo $(( $(stat -c '%b * %B' "$1") )); }

check_copy() {    # WHAT FILE: same bytes as the image, and sparse
    cmp "$img" "$2" || fail "$1: the copy differs from the export"
    local a
    a=$(allocated "$2")
    [ "$a" -le $((4 * mib)) ] || fail "$1: the copy has $a bytes allocated (not sparse)"
    echo "$1: identical, $((a / 1024)) KiB allocated of 1 GiB"
    rm -f "$2"
}

copies() {    # WHAT URI
    nbdcopy "$2" "$d/copy.img" || fail "$1: nbdcopy failed"
    check_copy "$1 nbdcopy" "$d/copy.img"
    qemu-img convert -q -f raw -O raw "$2" "$d/copy.img" || fail "$1: qemu-img convert failed"
    check_copy "$1 qemu-img convert" "$d/copy.img"
}

check_read() {    # WHAT BYTES MAX
    [ "$2" -le "$3" ] || fail "$1: smcrd read $2 bytes (the holes too?)"
    [ "$2" -ge $((3 * mib + 4096)) ] || fail "$1: smcrd read only $2 bytes"
    echo "$1: smcrd read $2 bytes"
}

check_map smcrd "$(uri disk)"
at=$(log_at)
nbdcopy "$(uri disk)" "$d/copy.img" || fail "nbdcopy failed"
check_read "smcrd nbdcopy" "$(read_since "$at")" $((4 * mib))
check_copy "smcrd nbdcopy" "$d/copy.img"
at=$(log_at)
qemu-img convert -q -f raw -O raw "$(uri disk)" "$d/copy.img" || fail "qemu-img convert failed"
check_read "smcrd qemu-img convert" "$(read_since "$at")" $((4 * mib))
check_copy "smcrd qemu-img convert" "$d/copy.img"

at=$(log_at)
start_nbdkit server="127.0.0.1:$PORT" export=disk transport=tcp connections=2
check_map "nbdkit transport=tcp" "$(nbdkit_uri)"
copies "nbdkit transport=tcp" "$(nbdkit_uri)"
stop_nbdkit
check_read "nbdkit transport=tcp, both copies" "$(read_since "$at")" $((8 * mib))

NBDKIT_LOG=$d/nbdkit-smcr.log
NBDKIT_SOCK=$d/nbdkit-smcr.sock
start_nbdkit uri="smcr://127.0.0.1:$SPORT/disk" connections=1
check_map "nbdkit smcr://" "$(nbdkit_uri)"
stop_nbdkit

stop_smcrd
echo "PASS: base:allocation through smcrd and nbdkit smcr; copies stay sparse"
