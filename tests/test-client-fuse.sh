#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# smcr-fuse in front of smcrd (SMC-R port, TCP fallback on this host):
#  - the mount shows one file, named after the export, of its size;
#  - a random file written through the mount (dd conv=notrunc,fsync) reads
#    back identical through the mount and in the exported file;
#  - fallocate --punch-hole and --zero-range read back as zeros;
#  - the size cannot change (truncate fails), a read-only mount (-r, over
#    nbd://) refuses writes and reads the same data;
#  - fusermount3 -u ends the daemon; SIGTERM ends a foreground instance
#    with status 0 and unmounts.
# smcr-timeout: 300
. "${srcdir:-.}/functions.sh"
. "$srcdir/test-smcrd-lib.sh"
. "$srcdir/test-client-lib.sh"
requires fusermount3 --version
[ -c /dev/fuse ] && [ -w /dev/fuse ] || skip "no usable /dev/fuse"
requires_root

d=$(scratch_dir)
mib=$(scale_mib 64 16)
SPORT=$(free_port)
start_smcrd_disk "${mib}M" --smcr-port "$SPORT"
wait_for 10 grep -q 'listening for NBD over SMC-R' "$SMCRD_LOG"
mnt=$d/mnt
mkdir "$mnt" "$d/ro"
cleanup_fn "fusermount3 -u -z '$mnt' 2>/dev/null; fusermount3 -u -z '$d/ro' 2>/dev/null"

# Daemonized, 2 connections.
run_prog "$SMCR_FUSE" -C 2 "smcr://127.0.0.1:$SPORT/disk" "$mnt" 2>"$d/fuse.err" ||
    { cat "$d/fuse.err"; fail "smcr-fuse failed to mount"; }
wait_for 10 mountpoint -q "$mnt"
pid=$(ls "$SMCR_CTL_DIR" | sed -n 's/^smcr-fuse\.\([0-9]*\)\.sock$/\1/p' | head -n 1)
[ -n "$pid" ] || fail "no control socket of the smcr-fuse daemon"
[ "$(ls "$mnt")" = disk ] || fail "mount should hold one file 'disk': $(ls "$mnt")"
[ "$(stat -c %s "$mnt/disk")" = $((mib * 1048576)) ] || fail "file size"

make_random "$d/src" "$mib"
dd if="$d/src" of="$mnt/disk" bs=1M conv=notrunc,fsync status=none || fail "write through the mount"
cmp "$d/src" "$mnt/disk" || fail "read back through the mount differs"
cmp "$d/src" "$d/disk.img" || fail "exported file differs"
echo "wrote and read back $mib MiB through the mount: sha256 $(sha256sum <"$d/src" | cut -c1-16)"

# Punch a hole (3 MiB at 1 MiB) and zero a range (512 KiB at 7 MiB).
fallocate --punch-hole --keep-size -o 1M -l 3M "$mnt/disk" || fail "punch-hole"
fallocate --zero-range --keep-size -o 7M -l 512K "$mnt/disk" || fail "zero-range"
cmp -n 3145728 -i 1048576:0 "$mnt/disk" /dev/zero || fail "punched range not zero (mount)"
cmp -n 524288 -i 7340032:0 "$mnt/disk" /dev/zero || fail "zeroed range not zero (mount)"
cmp -n 3145728 -i 1048576:0 "$d/disk.img" /dev/zero || fail "punched range not zero (file)"
cmp -n 1048576 "$d/src" "$mnt/disk" || fail "data before the hole changed"
cmp -n 1048576 -i 4194304 "$d/src" "$mnt/disk" || fail "data after the hole changed"
# Keep the expected image in step for the read-only check.
dd if=/dev/zero of="$d/src" bs=1M seek=1 count=3 conv=notrunc status=none
dd if=/dev/zero of="$d/src" bs=512K seek=14 count=1 conv=notrunc status=none
cmp "$d/src" "$mnt/disk" || fail "image after fallocate differs"
if truncate -s 1M "$mnt/disk" 2>/dev/null; then fail "truncate should fail"; fi

# Read-only, plain NBD over TCP, in the foreground.
"$SMCR_FUSE" -f -r -C 1 --ctl=off "nbd://127.0.0.1:$PORT/disk" "$d/ro" 2>"$d/ro.err" &
ropid=$!
cleanup_fn "kill -KILL $ropid 2>/dev/null"
wait_for 10 mountpoint -q "$d/ro"
cmp "$d/src" "$d/ro/disk" || fail "read-only mount reads different data"
if dd if=/dev/zero of="$d/ro/disk" bs=4k count=1 conv=notrunc status=none 2>"$d/ro.dd"; then
    fail "write to the read-only mount succeeded"
fi
grep -qi "read-only" "$d/ro.dd" || fail "write refused, but not as read-only: $(cat "$d/ro.dd")"
kill -TERM "$ropid"
rc=0; wait "$ropid" || rc=$?
[ "$rc" = 0 ] || { cat "$d/ro.err"; fail "SIGTERM: smcr-fuse exited with $rc"; }
mountpoint -q "$d/ro" && fail "still mounted after SIGTERM"
# libfuse's defaults are no error (it took "not given" for a bad value).
grep -q "Ignoring invalid" "$d/ro.err" && fail "smcr-fuse -f: $(cat "$d/ro.err")"
# An unknown URI query key is named.
rc=0; "$SMCR_FUSE" "nbd://127.0.0.1:$PORT/disk?tls-certs=/x" "$d/ro" 2>"$d/key.err" || rc=$?
[ "$rc" = 2 ] && grep -q "unknown query key 'tls-certs' (known: tls-certificates," "$d/key.err" ||
    fail "unknown query key: status $rc, $(cat "$d/key.err")"

# The daemon: unmount ends it.
fusermount3 -u "$mnt" || fail "fusermount3 -u"
for (( i=0; i<100; i++ )); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
kill -0 "$pid" 2>/dev/null && fail "smcr-fuse daemon still running after unmount"
[ -e "$SMCR_CTL_DIR/smcr-fuse.$pid.sock" ] && fail "control socket left behind"
stop_smcrd
echo "PASS: smcr-fuse write/read/cmp, punch-hole and zero-range zeros, read-only, clean exits"
