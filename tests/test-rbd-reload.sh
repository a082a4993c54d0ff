#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# A reload keeps the RBD images whose settings did not change (tests/ceph-lib.sh's
# single-node cluster): an export of rbd:rbd/img in a config file, 2 MiB
# written, then
#  - SIGHUP with the file unchanged, and again with only the description
#    changed: "the open image kept", the image's watcher (rbd status: the
#    client.N of smcrd's cluster connection) the same, the data read back
#    equal;
#  - SIGHUP after the ceph-conf file was touched: opened again (no "kept"
#    line, another watcher);
#  - SIGHUP with read-only = yes: opened again, a WRITE refused, the data
#    read back equal.
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
# The image's watchers (rbd status): smcrd's open image is one, a
# client.N of its own cluster connection.
watcher() { rbdc status rbd/img 2>/dev/null | sed -n 's/.*watcher=.* \(client\.[0-9]*\) cookie=.*/\1/p' | sort | tr '\n' ' '; }
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
w0=$(watcher)
echo "watchers: $w0"
[ -n "$w0" ] || fail "no watcher of rbd/img (rbd status)"

reload 2
[ "$(kept)" = 1 ] || fail "unchanged settings: the image not kept ($(kept) kept lines)"
conf two no
reload 3
[ "$(kept)" = 2 ] || fail "a new description: the image not kept"
nbdcopy "$(uri img)" "$d/back" || fail "nbdcopy out after the reloads"
cmp <(head -c $((2 << 20)) "$d/back") "$d/src" || fail "data differs after the reloads"
w1=$(watcher)
[ "$w1" = "$w0" ] || fail "watchers $w0 before the reloads, $w1 after: opened again"
echo "2 reloads with the RBD settings unchanged: image kept (watcher $w1 the same), data equal"

# The ceph-conf file touched (its time is part of the settings).
sleep 1
touch "$CEPH_CONF"
reload 4
[ "$(kept)" = 2 ] || fail "ceph-conf touched: the image was kept"
w2=$(watcher)
[ -n "$w2" ] && [ "$w2" != "$w0" ] || fail "ceph-conf touched: watcher '$w2', '$w0' before: not opened again"
echo "ceph-conf touched: opened again (watcher $w0-> $w2)"

conf two yes
reload 5
[ "$(kept)" = 2 ] || fail "read-only changed: the image was kept"
qemu-io -f raw -c 'write -P 0x55 0 4k' "$(uri img)" >/dev/null 2>&1 &&
    fail "a WRITE to the export made read-only was served"
rm -f "$d/back"
nbdcopy "$(uri img)" "$d/back" || fail "nbdcopy out after the read-only reload"
cmp <(head -c $((2 << 20)) "$d/back") "$d/src" || fail "data differs after the read-only reload"
echo "read-only = yes: opened again, WRITE refused, data equal"
stop_smcrd
echo "PASS: a reload keeps the RBD images whose settings did not change"
