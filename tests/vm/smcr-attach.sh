#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# smcr-attach in the rxe lane: the kernel's nbd driver in A on smcrd's
# SMC-R port in B through the kernel's own AF_SMC sockets (two of them,
# multi-conn), no user space process on the data path: mkfs.ext4, a tree of
# files copied, fsck clean, checksums equal after a remount; 64 MiB written
# and read back with O_DIRECT while smcr-attach uses no CPU; smcrd killed
# and restarted under I/O: the driver reports the dead connections,
# smcr-attach gives it new ones and the I/O goes on with no error; then
# smcr-attach -d detaches and the watcher exits 0.  On stock rxe the
# kernel's AF_SMC falls back to TCP (tests/bench/README.md says why) and
# only the counts are checked.  SMCR_ATTACH_SMCR=1 loads the patched
# rdma_rxe (as kernel-smc.sh) and gives smcrd the kernel's EID, so the
# sockets are SMC-Rv2: Debian's 6.1 nbd driver then refuses them ("nbd:
# Check socket type": TCP and UNIX sockets only; a fallen-back AF_SMC
# socket is TCP underneath), which the test reports as a skip with the
# kernel's line.
# smcr-timeout: 300
: "${SMCR_VM_TIMEOUT:=240}"
: "${SMCR_ATTACH_SMCR:=0}"
[ "$SMCR_ATTACH_SMCR" = 1 ] && export SMCR_VM_RXE=smc
. "$(dirname "$0")/lib.sh"
vm_requires
requires mkfs.ext4 -V
SMCRD=$abs_top_builddir/server/smcrd
ATTACH=$abs_top_builddir/client/smcr-attach
SMCNL=$abs_top_builddir/tests/bench/smc-nl
for f in "$SMCRD" "$ATTACH" "$SMCNL"; do [ -x "$f" ] || fail "$f not built"; done
EID=SMCRBD.KPEER
eids=
if [ "$SMCR_ATTACH_SMCR" = 1 ]; then
    modprobe -S "$VM_KVER" -n smc >/dev/null 2>&1 || skip "kernel $VM_KVER has no module smc"
    eids="--eids $EID"
fi
vm_start_pair
if [ "$SMCR_ATTACH_SMCR" = 1 ]; then
    vm_run A "modprobe smc && $SMCNL pnet-add SMCRBD eth0 rxe0 1 && $SMCNL ueid-add $EID" ||
        fail "AF_SMC setup failed in A"
fi

B1=$(vm_ip B 1)
start_smcrd() {
    vm_bg B "exec $SMCRD -f -P /tmp/smcrd.pid -p 10809 --smcr-port 10810 $eids -e disk=/tmp/disk.img >>/tmp/smcrd.log 2>&1" >/dev/null
    vm_run B "for i in \$(seq 300); do [ \$(grep -c 'listening for NBD over SMC-R' /tmp/smcrd.log) -ge $1 ] && exit 0; sleep 0.1; done
tail -n 20 /tmp/smcrd.log; exit 1" || fail "smcrd did not come up in B"
}
vm_run B "truncate -s 256M /tmp/disk.img" || fail "disk"
start_smcrd 1

vm_run A "modprobe nbd && modprobe smc" || fail "modprobe nbd smc"
# -T 10: requests in flight on a connection that dies are sent again when
# they time out (the driver's way); -D 60: new requests wait that long for a
# replaced connection.
att=$(vm_bg A "exec $ATTACH -C 2 -T 10 -D 60 $B1:10810 disk /dev/nbd0 2>/tmp/attach.log")
vm_run A "for i in \$(seq 300); do grep -q 'connection(s) over AF_SMC' /tmp/attach.log && exit 0; sleep 0.1; done
cat /tmp/attach.log; exit 1" || {
    if [ "$SMCR_ATTACH_SMCR" = 1 ] && vm_run A "dmesg | grep 'Unsupported socket: should be TCP or UNIX'"; then
        skip "the kernel's nbd driver refuses AF_SMC sockets on SMC-R (TCP and UNIX only)"
    fi
    fail "smcr-attach did not attach"
}
vm_run A "cat /tmp/attach.log"

out=$(vm_run -t 150 A "
set -eu
size=\$(blockdev --getsize64 /dev/nbd0)
[ \"\$size\" = 268435456 ] || { echo \"FAIL: /dev/nbd0 has \$size bytes\"; exit 1; }
bash $_vm_libdir/ext4-check.sh /dev/nbd0
") || { echo "$out"; vm_run A "cat /tmp/attach.log"; fail "ext4 over smcr-attach failed"; }
echo "$out"
echo "$out" | grepq "^ext4: .* checksums equal after remount" || fail "no ext4 verdict"

# The kernel moves the data: smcr-attach sleeps through 64 MiB each way.
out=$(vm_run -t 120 A '
set -eu
pid=$(pidof smcr-attach)
t0=$(awk "{ print \$14 + \$15 }" /proc/$pid/stat)
head -c 64M /dev/urandom >/tmp/src
dd if=/tmp/src of=/dev/nbd0 bs=1M oflag=direct status=none
dd if=/dev/nbd0 of=/tmp/back bs=1M count=64 iflag=direct status=none
cmp /tmp/src /tmp/back || { echo "FAIL: read back differs"; exit 1; }
t1=$(awk "{ print \$14 + \$15 }" /proc/$pid/stat)
echo "64 MiB written and read back (O_DIRECT), equal; smcr-attach used $((t1 - t0)) clock ticks meanwhile"
[ $((t1 - t0)) -le 20 ] || { echo "FAIL: smcr-attach is on the data path"; exit 1; }
') || { echo "$out"; fail "direct I/O through /dev/nbd0"; }
echo "$out"

# The kernel's AF_SMC sockets carried it (SMC-R or its TCP fallback).
out=$(vm_run A "$SMCNL stats; $SMCNL fallbacks") || { echo "$out"; fail "smc-nl in A"; }
echo "$out" | sed 's/^/  A AF_SMC: /'
n=$(echo "$out" | awk '$1 ~ /^smcr_client_v[12]_ok$/ { s += $2 }
    $1 == "fallbacks_total" { s += $5 } END { print s + 0 }')
[ "$n" -ge 2 ] || fail "the kernel's AF_SMC counters show $n client connection(s), want 2 or more"
if [ "$SMCR_ATTACH_SMCR" = 1 ]; then
    v2=$(echo "$out" | awk '$1 == "smcr_client_v2_ok" { print $2 + 0 }')
    fb=$(echo "$out" | awk '$1 == "fallbacks_total" { print $5 + 0 }')
    [ "${v2:-0}" -ge 2 ] && [ "${fb:-0}" = 0 ] ||
        fail "want every connection SMC-Rv2: $v2 SMC-Rv2, ${fb:-0} fallback(s)"
    echo "A's AF_SMC: $n client connection(s), all SMC-Rv2 to smcrd"
else
    echo "A's AF_SMC: $n client connection(s) (SMC-R or fallback)"
fi

# smcrd dies under I/O and comes back: no I/O error.
io=$(vm_bg A 'set -e; for i in $(seq 40); do
    dd if=/tmp/src of=/dev/nbd0 bs=1M count=8 skip=$((i % 8 * 8)) seek=$((i % 8 * 8)) oflag=direct status=none; done
dd if=/dev/nbd0 of=/tmp/back2 bs=1M count=64 iflag=direct status=none
cmp /tmp/back2 /tmp/src && echo "I/O across the restart: 40 x 8 MiB written, 64 MiB read back equal"')
sleep 2
vm_run B 'kill -KILL $(cat /tmp/smcrd.pid)' >/dev/null
sleep 2
start_smcrd 2
out=$(vm_wait -t 150 A "$io") || { echo "$out"; vm_run A "cat /tmp/attach.log; dmesg | tail -n 20"; fail "I/O failed across the smcrd restart"; }
echo "$out"
vm_run A "grep -c 'dead connection was replaced' /tmp/attach.log" >/tmp/n.$$ || true
rep=$(tr -dc 0-9 </tmp/n.$$); rm -f /tmp/n.$$
[ "${rep:-0}" -ge 1 ] || { vm_run A "cat /tmp/attach.log"; fail "no dead connection was replaced"; }
vm_run A "dmesg | grep -c 'I/O error' || true" | grepq -x 0 ||
    { vm_run A "dmesg | tail -n 30"; fail "I/O errors in A's kernel log"; }
echo "smcrd restart: $rep connection(s) replaced by smcr-attach, no I/O error in A's kernel log"

vm_run A "$ATTACH -d /dev/nbd0" || fail "smcr-attach -d"
vm_wait -t 30 A "$att" >/dev/null || { vm_run A "cat /tmp/attach.log"; fail "the watcher did not exit 0 after -d"; }
vm_run A "grep 'was disconnected' /tmp/attach.log" || fail "no disconnect line"
vm_stop
echo "PASS: smcr-attach: kernel nbd over AF_SMC to smcrd, ext4 and O_DIRECT verified, restart survived, detached"
