#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# smcrd serving Ceph RBD images (rbd:POOL/IMAGE[@SNAP]) from a single-node
# cluster of its own (tests/ceph-lib.sh), over NBD/TCP on the host: nbdcopy
# in and out (and the image as Ceph holds it), qemu-img compare, WRITE
# ZEROES / TRIM / FLUSH / FUA by qemu-io, base:allocation of a sparse image,
# fio randrw with verify, a snapshot served read-only with the data of the
# snapshot's time; ext4 on an export (smcr-fuse, a loop mount: root and
# /dev/fuse) with a tree of files, fsck clean, and the image as Ceph holds
# it (rbd export) fsck clean with the files' checksums.
# smcr-timeout: 600
. "${srcdir:-.}/functions.sh"
. "$srcdir/test-smcrd-lib.sh"
. "$srcdir/test-client-lib.sh"
. "$srcdir/ceph-lib.sh"
grepq -x '#define HAVE_LIBRBD 1' "$abs_top_builddir/config.h" </dev/null ||
    skip "smcrd built without librbd (librbd-dev missing at configure)"
requires nbdcopy --version
requires qemu-img --version
requires qemu-io --version
requires nbdinfo --version
requires fio --version
fio --enghelp=nbd >/dev/null 2>&1 || skip "fio has no nbd engine"

d=$(scratch_dir)
start_ceph "$d/ceph"
rbdc() { timeout 120 rbd -c "$CEPH_CONF" --id "$CEPH_ID" "$@"; }
mib=$(scale_mib 64 16)
rbdc create --size "${mib}M" rbd/disk || fail "rbd create"
rbdc create --size 64M rbd/sparse || fail "rbd create"
rbdc create --size 32M rbd/fio || fail "rbd create"
rbdc create --size 64M rbd/ext4 || fail "rbd create"
opts="ceph-conf=$CEPH_CONF,ceph-id=$CEPH_ID"
exports=(--export "disk=rbd:rbd/disk,$opts" --export "sparse=rbd:rbd/sparse,$opts"
         --export "fio=rbd:rbd/fio,$opts" --export "ext4=rbd:rbd/ext4,$opts")

start_smcrd --queue-depth 64 "${exports[@]}"
nbdinfo "$(uri disk)" | grepq "export-size: $(( mib << 20 ))" || fail "export size"

# nbdcopy in and out; the image in Ceph holds the same bytes.
make_random "$d/src.img" "$mib"
nbdcopy "$d/src.img" "$(uri disk)" || fail "nbdcopy into the export failed"
nbdcopy "$(uri disk)" "$d/back.img" || fail "nbdcopy out of the export failed"
cmp "$d/src.img" "$d/back.img" || fail "data read back differs"
rbdc export rbd/disk "$d/ceph.img" >/dev/null 2>&1 || fail "rbd export"
[ "$(md5sum <"$d/src.img")" = "$(md5sum <"$d/ceph.img")" ] || fail "image in Ceph differs"
rm -f "$d/back.img" "$d/ceph.img"
qemu-img compare -f raw -F raw "$d/src.img" "$(uri disk)" >/dev/null ||
    fail "qemu-img compare differs"

# base:allocation: a fresh image is one hole; 1 MiB written at 4 MiB is
# data, the rest stays a hole.
qemu-io -f raw -c 'write -P 0xab 4M 1M' "$(uri sparse)" >/dev/null || fail "qemu-io write"
nbdinfo --map "$(uri sparse)" >"$d/map.txt" || fail "nbdinfo --map"
tr -s ' \t' ' ' <"$d/map.txt" | sed 's/^ //' >"$d/map2.txt"
expect="0 4194304 3 hole,zero
4194304 1048576 0 data
5242880 61865984 3 hole,zero"
[ "$(cat "$d/map2.txt")" = "$expect" ] || { cat "$d/map.txt" >&2; fail "base:allocation map"; }

# WRITE_ZEROES, TRIM, FLUSH, FUA writes; the data afterwards.
qemu-io -f raw -c 'write -P 0x5a 0 2M' -c 'write -z 0 1M' -c 'discard 1M 1M' \
    -c 'write -f -P 0x77 2M 64k' -c 'flush' "$(uri sparse)" >"$d/qio.txt" 2>&1 ||
    { cat "$d/qio.txt" >&2; fail "qemu-io zeroes/trim/fua"; }
qemu-io -f raw -r -c 'read -P 0 0 1M' -c 'read -P 0x77 2M 64k' -c 'read -P 0xab 4M 1M' \
    "$(uri sparse)" >"$d/qio.txt" 2>&1 || { cat "$d/qio.txt" >&2; fail "qemu-io read back"; }
grepq -i 'pattern verification failed\|error' "$d/qio.txt" &&
    { cat "$d/qio.txt" >&2; fail "data after zeroes/FUA"; }

# fio randrw, crc32c verified.
fio --name=verify-rbd --ioengine=nbd --uri="$(uri fio)" --rw=randrw --rwmixread=50 \
    --bs=4k --bssplit=4k/60:64k/30:1m/10 --iodepth=32 --size=32M \
    --verify=crc32c --verify_fatal=1 --do_verify=1 --verify_state_save=0 >"$d/fio.txt" 2>&1 ||
    { cat "$d/fio.txt" >&2; fail "fio failed"; }
grepq "err= 0" "$d/fio.txt" || { cat "$d/fio.txt" >&2; fail "fio reported errors"; }

# ext4: made and filled through the export, by the kernel (a loop mount
# of smcr-fuse's file); fsck clean there and on the image in Ceph.
ext4=
src=/usr/include/linux
if [ "$(id -u)" != 0 ] || [ ! -w /dev/fuse ] || ! command -v fusermount3 >/dev/null ||
   ! command -v mkfs.ext4 >/dev/null || [ ! -d "$src" ] || [ ! -x "$SMCR_FUSE" ]; then
    echo "ext4 part not run: needs root, /dev/fuse, fusermount3, mkfs.ext4, smcr-fuse and $src"
else
    mkdir "$d/fm" "$d/mnt"
    cleanup_fn "umount -l '$d/mnt' 2>/dev/null; fusermount3 -u -z '$d/fm' 2>/dev/null"
    run_prog "$SMCR_FUSE" -f -C 2 --ctl=off "$(uri ext4)" "$d/fm" 2>"$d/fuse.err" &
    fz=$!
    wait_for 30 mountpoint -q "$d/fm"
    mkfs.ext4 -q -F -E lazy_itable_init=0,lazy_journal_init=0 "$d/fm/ext4" ||
        fail "mkfs.ext4 on the export"
    if mount -o loop "$d/fm/ext4" "$d/mnt" 2>"$d/mount.err"; then
        cp -a "$src" "$d/mnt/tree" || fail "cp into ext4 on the export"
        (cd "$src" && find . -type f -print0 | sort -z | xargs -0 sha256sum) >"$d/want"
        umount "$d/mnt" || fail "umount"
        e2fsck -fn "$d/fm/ext4" >"$d/fsck.txt" 2>&1 || { cat "$d/fsck.txt" >&2; fail "fsck via the export"; }
        fusermount3 -u "$d/fm" || fail "fusermount3 -u"
        wait "$fz" || fail "smcr-fuse exited with an error"
        rbdc export rbd/ext4 "$d/ext4.img" >/dev/null 2>&1 || fail "rbd export"
        e2fsck -fn "$d/ext4.img" >"$d/fsck.txt" 2>&1 || { cat "$d/fsck.txt" >&2; fail "fsck of the image in Ceph"; }
        mount -o loop,ro "$d/ext4.img" "$d/mnt" || fail "mount of the image in Ceph"
        (cd "$d/mnt/tree" && find . -type f -print0 | sort -z | xargs -0 sha256sum) >"$d/got"
        umount "$d/mnt"
        cmp -s "$d/want" "$d/got" || fail "ext4: checksums differ in the image in Ceph"
        ext4=", ext4 ($(wc -l <"$d/want") files) fsck clean with equal checksums in Ceph"
        echo "ext4: $(wc -l <"$d/want") files copied in through the export; fsck clean via the" \
             "export and on the image in Ceph, sha256 of every file equal"
    else
        echo "ext4 part not run: no loop mount here ($(head -n 1 "$d/mount.err"))"
        fusermount3 -u "$d/fm"; wait "$fz" || true
    fi
fi
stop_smcrd

# A snapshot, then the image changes: the snapshot, served read-only,
# has the data of its time.
rbdc snap create rbd/disk@s1 >/dev/null 2>&1 || fail "rbd snap create"
start_smcrd "${exports[@]}" --export "snap=rbd:rbd/disk@s1,$opts"
qemu-io -f raw -c 'write -P 0 0 1M' "$(uri disk)" >/dev/null || fail "overwrite"
nbdinfo "$(uri snap)" | grepq 'is_read_only: true' || fail "snapshot not read-only"
qemu-img compare -f raw -F raw "$d/src.img" "$(uri snap)" >/dev/null ||
    fail "snapshot data differs"
qemu-img compare -f raw -F raw "$d/src.img" "$(uri disk)" >/dev/null 2>&1 &&
    fail "image did not change"
if qemu-io -f raw -c 'write -P 1 0 4k' "$(uri snap)" >"$d/qio.txt" 2>&1 &&
   ! grepq -i 'error\|denied\|read-only\|failed' "$d/qio.txt"; then
    fail "a write to the snapshot succeeded"
fi
stop_smcrd
echo "PASS: rbd exports: nbdcopy ${mib} MiB in/out and in Ceph identical, qemu-img compare," \
     "zeroes/trim/FUA, base:allocation map, fio verify, snapshot read-only with its data$ext4"
