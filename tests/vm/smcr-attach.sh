#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# smcr-attach in the rxe lane: the kernel's nbd driver in A on smcrd's
# SMC-R port in B through the kernel's own AF_SMC sockets (two of them,
# multi-conn), no user space process on the data path: mkfs.ext4, a tree of
# files copied, fsck clean, checksums equal after a remount; 32 MiB written
# and read back with O_DIRECT while smcr-attach uses next to no CPU; fio randrw
# with crc32c verification while the link's cable is pulled for a few
# seconds; smcrd killed and restarted under I/O.  After each fault the
# driver reports the dead connections, smcr-attach gives it new ones and
# the I/O goes on: no fio error, no I/O error in A's kernel log.
# smcr-attach has a list of two servers, the second a port of B nobody
# listens on: after the restart it tries that one first (the next in
# turn), fails, and goes round to the first again.  Then
# smcr-attach -d detaches and the watcher exits 0.
# SMCR_ATTACH_SMCR (auto, 1 or 0) picks the sockets' transport:
#   1     SMC-Rv2: both guests load the patched rdma_rxe (SMCR_VM_RXE=smc,
#         as kernel-v2.sh) and A the patched nbd.ko (SMCR_VM_NBD=smc:
#         Debian's 6.1 driver refuses AF_SMC sockets on SMC-R, see
#         README.md); A's AF_SMC has the PNET ID and user EID of
#         kpeer_setup, smcrd the same EID.  The kernel's counters must show
#         the connections as SMC-Rv2 with no fallback, smcrd's as SMC-R.
#   0     the stock modules: the kernel's AF_SMC falls back to TCP on stock
#         rxe (tests/bench/README.md says why); only the counts are checked.
#   auto  1 when the patched modules can be built (kernel source and
#         headers there), else 0 (the default).
# One link: the kernel's SMC-Rv2 link group has only one here (kernel-v2.sh
# says why), so the pulled cable ends it and every connection on it.
# About 4.7 minutes under TCG with SMC-Rv2 (one run: 282 s; SMC-R over rxe
# moves about 1 MB/s here), +45 s to build the two modules once.
# smcr-timeout: 480
: "${SMCR_VM_TIMEOUT:=420}"
: "${SMCR_ATTACH_SMCR:=auto}"
. "$(dirname "$0")/lib.sh"
vm_requires
requires mkfs.ext4 -V
requires fio --version
SMCRD=$abs_top_builddir/server/smcrd
ATTACH=$abs_top_builddir/client/smcr-attach
SMCRCTL=$abs_top_builddir/client/smcrctl
N=$abs_top_builddir/tests/bench/smc-nl
for f in "$SMCRD" "$ATTACH" "$SMCRCTL" "$N"; do [ -x "$f" ] || fail "$f not built"; done
EID=SMCRBD.KPEER
if [ "$SMCR_ATTACH_SMCR" = auto ]; then
    if ! modprobe -S "$VM_KVER" -n smc >/dev/null 2>&1; then
        SMCR_ATTACH_SMCR=0
        echo "kernel $VM_KVER has no module smc: stock modules, AF_SMC on TCP"
    else
        rc=0; vm_kmod_build nbd >/dev/null || rc=$?
        case $rc in
            0) SMCR_ATTACH_SMCR=1 ;;
            77) SMCR_ATTACH_SMCR=0; echo "no patched nbd.ko (see above): stock modules, AF_SMC on TCP" ;;
            *) fail "building the patched nbd module failed" ;;
        esac
    fi
fi
eids=
case $SMCR_ATTACH_SMCR in
    1) export SMCR_VM_RXE=smc SMCR_VM_NBD=smc
       modprobe -S "$VM_KVER" -n smc >/dev/null 2>&1 || skip "kernel $VM_KVER has no module smc"
       eids="--eids $EID" ;;
    0) ;;
    *) fail "SMCR_ATTACH_SMCR: auto, 1 or 0, not '$SMCR_ATTACH_SMCR'" ;;
esac
vm_start_pair 1
[ "$SMCR_ATTACH_SMCR" = 1 ] && kpeer_setup A

B1=$(vm_ip B 1)
start_smcrd() {
    vm_bg B "exec $SMCRD -f -P /tmp/smcrd.pid -p 10809 --smcr-port 10810 $eids -e disk=/tmp/disk.img >>/tmp/smcrd.log 2>&1" >/dev/null
    vm_run B "for i in \$(seq 300); do [ \$(grep -c 'listening for NBD over SMC-R' /tmp/smcrd.log) -ge $1 ] && exit 0; sleep 0.1; done
tail -n 20 /tmp/smcrd.log; exit 1" || fail "smcrd did not come up in B"
}
# smcrd's counters: "connections SMC FALLBACKS".
smcrd_counts() {
    vm_run B "$SMCRCTL --json stats smcrd" | python3 -c '
import json, sys
s = json.load(sys.stdin)[0]["stats"]
print(s["connections"], s["smc_connections"], s["fallbacks"])'
}
vm_run B "truncate -s 256M /tmp/disk.img" || fail "disk"
start_smcrd 1

vm_run A "modprobe nbd && modprobe smc" || fail "modprobe nbd smc"
# -T 10: requests in flight on a connection that dies are sent again when
# they time out (the driver's way); -D 60: new requests wait that long for a
# replaced connection.
att=$(vm_bg A "exec $ATTACH -C 2 -T 10 -D 60 $B1:10810,$B1:10812 disk /dev/nbd0 2>/tmp/attach.log")
vm_run A "for i in \$(seq 300); do grep -q 'connection(s) over AF_SMC' /tmp/attach.log && exit 0; sleep 0.1; done
cat /tmp/attach.log; dmesg | grep nbd; exit 1" || fail "smcr-attach did not attach"
vm_run A "cat /tmp/attach.log"

# The kernel's AF_SMC sockets carry it (SMC-Rv2, or TCP after a fallback).
k0=$(kstats A) || fail "smc-nl in A"
echo "$k0" | sed 's/^/  A AF_SMC: /'
n=$(( $(kget "$k0" smcr_client_v1_ok) + $(kget "$k0" smcr_client_v2_ok) ))
fb=$(echo "$k0" | awk '$1 == "fallbacks_total" { s = $5 } END { print s + 0 }')
[ $((n + ${fb:-0})) -ge 2 ] ||
    fail "the kernel's AF_SMC counters show $((n + ${fb:-0})) client connection(s), want 2 or more"
if [ "$SMCR_ATTACH_SMCR" = 1 ]; then
    v2=$(kget "$k0" smcr_client_v2_ok)
    [ "$v2" -ge 2 ] && [ "${fb:-0}" = 0 ] ||
        fail "want every connection SMC-Rv2: $v2 SMC-Rv2, ${fb:-0} fallback(s)"
    read -r c smc sfb <<<"$(smcrd_counts)" || fail "smcrctl stats smcrd"
    [ "$smc" -ge 2 ] && [ "$smc" = "$c" ] && [ "$sfb" = 0 ] ||
        fail "smcrd counts $c connection(s), $smc on SMC-R, $sfb fallback(s)"
    echo "SMC-Rv2: A's AF_SMC $v2 client connection(s), 0 fallbacks; smcrd $smc SMC-R connection(s), 0 fallbacks"
else
    echo "A's AF_SMC: $((n + ${fb:-0})) client connection(s) (SMC-R or fallback)"
fi

out=$(vm_run -t 150 A "
set -eu
size=\$(blockdev --getsize64 /dev/nbd0)
[ \"\$size\" = 268435456 ] || { echo \"FAIL: /dev/nbd0 has \$size bytes\"; exit 1; }
bash $_vm_libdir/ext4-check.sh /dev/nbd0
") || { echo "$out"; vm_run A "cat /tmp/attach.log"; fail "ext4 over smcr-attach failed"; }
echo "$out"
echo "$out" | grepq "^ext4: .* checksums equal after remount" || fail "no ext4 verdict"

# The kernel moves the data: smcr-attach sleeps through 32 MiB each way
# (its once-a-second status poll aside: 1% of the time at most).
out=$(vm_run -t 120 A '
set -eu
pid=$(pidof smcr-attach)
head -c 32M /dev/urandom >/tmp/src
t0=$(awk "{ print \$14 + \$15 }" /proc/$pid/stat) ms=$(date +%s%N)
dd if=/tmp/src of=/dev/nbd0 bs=1M oflag=direct status=none
dd if=/dev/nbd0 of=/tmp/back bs=1M count=32 iflag=direct status=none
cmp /tmp/src /tmp/back || { echo "FAIL: read back differs"; exit 1; }
t1=$(awk "{ print \$14 + \$15 }" /proc/$pid/stat) ms=$((($(date +%s%N) - ms) / 1000000))
echo "32 MiB written and read back (O_DIRECT) in $ms ms, equal; smcr-attach used $((t1 - t0)) clock ticks meanwhile"
[ $((t1 - t0)) -le $((5 + ms / 1000)) ] || { echo "FAIL: smcr-attach is on the data path"; exit 1; }
') || { echo "$out"; fail "direct I/O through /dev/nbd0"; }
echo "$out"

# replaced WHAT [MIN]: smcr-attach replaced MIN (default 1) or more
# connections since the last call, and A's kernel logged no I/O error.
rep0=0
replaced() {
    local rep
    rep=$(vm_run A "grep -c 'dead connection was replaced' /tmp/attach.log || true")
    [ "${rep:-0}" -ge $((rep0 + ${2:-1})) ] || { vm_run A "cat /tmp/attach.log; dmesg | tail -n 30"; fail "$1: no dead connection was replaced"; }
    vm_run A "dmesg | grep -c 'I/O error' || true" | grepq -x 0 ||
        { vm_run A "dmesg | tail -n 30"; fail "$1: I/O errors in A's kernel log"; }
    echo "$1: $((rep - rep0)) connection(s) replaced by smcr-attach, no I/O error in A's kernel log"
    rep0=$rep
}

# fio randrw, every block verified (crc32c), while the cable is out for 4 s.
fio=$(vm_bg A "fio --name=cable --filename=/dev/nbd0 --direct=1 --ioengine=libaio \
    --iodepth=16 --rw=randrw --bs=16k --size=32M --verify=crc32c --verify_fatal=1 \
    --do_verify=1 --output-format=normal 2>&1")
sleep 4
vm_say "cable of link 1 out"
vm_cable 1 off
sleep 4
vm_cable 1 on
vm_say "cable of link 1 back"
out=$(vm_wait -t 100 A "$fio") || { echo "$out"; vm_run A "cat /tmp/attach.log; dmesg | tail -n 30"; fail "fio failed across the cable pull"; }
echo "$out" | grep -E 'err=|READ:|WRITE:|verify' | sed 's/^/  fio: /'
echo "$out" | grepq 'err= 0' || fail "fio reports errors"
# TCP (stock modules) rides out a 4 s cable pull; SMC-R loses its only link.
if [ "$SMCR_ATTACH_SMCR" = 1 ]; then replaced "cable pulled under fio"; else replaced "cable pulled under fio" 0; fi
if [ "$SMCR_ATTACH_SMCR" = 1 ]; then
    k1=$(kstats A) || fail "smc-nl in A"
    echo "after the cable pull: A's AF_SMC smcr_client_v2_ok $(kget "$k1" smcr_client_v2_ok), fallbacks $(echo "$k1" | awk '$1 == "fallbacks_total" { s = $5 } END { print s + 0 }'); smcrd (connections smc fallbacks) $(smcrd_counts)"
fi

# smcrd dies under I/O and comes back: no I/O error.
io=$(vm_bg A 'set -e; t0=$(date +%s%N); for i in $(seq 24); do
    dd if=/tmp/src of=/dev/nbd0 bs=1M count=2 skip=$((i % 16 * 2)) seek=$((i % 16 * 2)) oflag=direct status=none; done
dd if=/dev/nbd0 of=/tmp/back2 bs=1M count=32 iflag=direct status=none
cmp /tmp/back2 /tmp/src && echo "I/O across the restart: 24 x 2 MiB written, 32 MiB read back equal ($((($(date +%s%N) - t0) / 1000000)) ms)"')
sleep 2
vm_run B 'kill -KILL $(cat /tmp/smcrd.pid)' >/dev/null
sleep 2
start_smcrd 2
out=$(vm_wait -t 100 A "$io") || { echo "$out"; vm_run A "cat /tmp/attach.log; dmesg | tail -n 20"; vm_run B "tail -n 30 /tmp/smcrd.log"; fail "I/O failed across the smcrd restart"; }
echo "$out"
replaced "smcrd restart"
vm_run A "grep -q 'reconnect to $B1:10812: ' /tmp/attach.log && grep -q 'replaced ($B1:10810)' /tmp/attach.log" ||
    { vm_run A "cat /tmp/attach.log"; fail "smcr-attach did not go round its list of servers"; }
echo "smcrd restart: smcr-attach tried the next server ($B1:10812, nobody there), then the first again"

vm_run A "$ATTACH -d /dev/nbd0" || fail "smcr-attach -d"
vm_wait -t 30 A "$att" >/dev/null || { vm_run A "cat /tmp/attach.log"; fail "the watcher did not exit 0 after -d"; }
vm_run A "grep 'was disconnected' /tmp/attach.log" || fail "no disconnect line"
vm_stop
mode="fallen back to TCP, stock modules"
[ "$SMCR_ATTACH_SMCR" = 1 ] && mode="SMC-Rv2"
echo "PASS: smcr-attach: kernel nbd over AF_SMC ($mode) to smcrd, ext4, O_DIRECT and fio verified, cable pull and restart survived, detached"
