#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# A reload keeps the RBD images whose settings did not change (tests/ceph-lib.sh's
# single-node cluster): an export of rbd:rbd/img in a config file, 2 MiB
# written, then
#  - SIGHUP with the file unchanged, and again with only the description
#    changed: "the open image kept", smcrd's thread count (a new librados
#    connection starts dozens) unchanged, the data read back equal;
#  - SIGHUP with read-only = yes: opened again (no "kept" line), a WRITE
#    refused, the data read back equal.
# About 30 s, most of it the cluster's start.
# smcr-timeout: 300
. "${srcdir:-.}/functions.sh"
. "$srcdir/test-smcrd-lib.sh"
. "$srcdir/ceph-lib.sh"
grepq -x '#define HAVE_LIBRBD 1' "$abs_top_builddir/config.h" </dev/null ||
    skip "smcrd built without librbd (librbd-dev missing at configure)"
requires nbdcopy --version
requires qemu-io --version

d=$(scratch_dir)
start_ceph "$d/ceph"
rbdc() { timeout 120 rbd -c "$CEPH_CONF" --id "$CEPH_ID" "$@"; }
rbdc create --size 16M rbd/img || fail "rbd create"
conf() {    # DESCRIPTION READ-ONLY
    printf '[export img]\npath = rbd:rbd/img\nceph-conf = %s\nceph-id = %s\ndescription = %s\nread-only = %s\n' \
        "$CEPH_CONF" "$CEPH_ID" "$1" "$2" >"$d/smcrd.conf"
}
threads() { awk '/^Threads:/ { print $2 }' "/proc/$SMCRD_PID/status"; }
reloads() { grep -c "export 'img': rbd:rbd/img, " "$SMCRD_LOG" || true; }
reload() {    # N: the Nth reload is done
    local i
    kill -HUP "$SMCRD_PID"
    for (( i=0; i<1200; i++ )); do
        [ "$(reloads)" -ge "$1" ] && return 0
        sleep 0.1
    done
    tail -n 20 "$SMCRD_LOG" >&2
    fail "reload $1 not done in 120 s"
}
kept() { grep -c "export 'img': rbd:rbd/img: the open image kept" "$SMCRD_LOG" || true; }

conf one no
start_smcrd -c "$d/smcrd.conf"
make_random "$d/src" 2
nbdcopy "$d/src" "$(uri img)" || fail "nbdcopy in"
t0=$(threads)

reload 2
[ "$(kept)" = 1 ] || fail "unchanged settings: the image not kept ($(kept) kept lines)"
conf two no
reload 3
[ "$(kept)" = 2 ] || fail "a new description: the image not kept"
nbdcopy "$(uri img)" "$d/back" || fail "nbdcopy out after the reloads"
cmp <(head -c $((2 << 20)) "$d/back") "$d/src" || fail "data differs after the reloads"
t1=$(threads)
[ "$t1" -le "$t0" ] || fail "threads $t0 before the reloads, $t1 after: a new cluster connection?"
echo "2 reloads with the RBD settings unchanged: image kept, threads $t0 -> $t1, data equal"

conf two yes
reload 4
[ "$(kept)" = 2 ] || fail "read-only changed: the image was kept"
qemu-io -f raw -c 'write -P 0x55 0 4k' "$(uri img)" >/dev/null 2>&1 &&
    fail "a WRITE to the export made read-only was served"
rm -f "$d/back"
nbdcopy "$(uri img)" "$d/back" || fail "nbdcopy out after the read-only reload"
cmp <(head -c $((2 << 20)) "$d/back") "$d/src" || fail "data differs after the read-only reload"
echo "read-only = yes: opened again (threads $(threads)), WRITE refused, data equal"
stop_smcrd
echo "PASS: a reload keeps the RBD images whose settings did not change"
