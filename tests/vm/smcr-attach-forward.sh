#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# smcr-attach --forward in the rxe lane: Debian's stock nbd.ko in A on
# socket pairs to smcr-attach, which forwards the driver's requests over
# libsmcr's SMC-R (two links) to smcrd in B.  No patched module: this is
# the path of a stock kernel.  Checked: the engine's connections are SMC-R
# with 4 MiB receive buffers at both ends, the defaults (smcrctl),
# mkfs.ext4 with a tree of files, fsck clean and checksums
# equal after a remount; fio randrw with crc32c verification while the
# cable of link 1 is out (libsmcr fails over to link 2); smcrd killed and
# restarted under I/O (the forwarder reconnects and resends: no I/O
# error in A's kernel log, data read back equal); smcr-attach -d detaches,
# the forwarder exits 0 with no failed request.
# smcr-timeout: 480
: "${SMCR_VM_TIMEOUT:=420}"
. "$(dirname "$0")/lib.sh"
vm_requires
requires mkfs.ext4 -V
requires fio --version
SMCRD=$abs_top_builddir/server/smcrd
ATTACH=$abs_top_builddir/client/smcr-attach
SMCRCTL=$abs_top_builddir/client/smcrctl
for f in "$SMCRD" "$ATTACH" "$SMCRCTL"; do [ -x "$f" ] || fail "$f not built"; done
vm_start_pair

B1=$(vm_ip B 1)
start_smcrd() {
    vm_bg B "exec $SMCRD -f -P /tmp/smcrd.pid -p 10809 --smcr-port 10810 -e disk=/tmp/disk.img >>/tmp/smcrd.log 2>&1" >/dev/null
    vm_run B "for i in \$(seq 300); do [ \$(grep -c 'listening for NBD over SMC-R' /tmp/smcrd.log) -ge $1 ] && exit 0; sleep 0.1; done
tail -n 20 /tmp/smcrd.log; exit 1" || fail "smcrd did not come up in B"
}
vm_run B "truncate -s 256M /tmp/disk.img" || fail "disk"
start_smcrd 1

vm_run A "modprobe nbd" || fail "modprobe nbd"
att=$(vm_bg A "exec $ATTACH -F -C 2 -D 60 $B1:10810 disk /dev/nbd0 2>/tmp/attach.log")
vm_run A "for i in \$(seq 600); do grep -q 'connection(s) over SMC-R, forwarded' /tmp/attach.log && exit 0; sleep 0.1; done
cat /tmp/attach.log; dmesg | grep nbd; exit 1" || fail "smcr-attach -F did not attach"
vm_run A "cat /tmp/attach.log"
vm_run A "grep -q '2 connection(s) (smcr)' /tmp/attach.log" || fail "the forwarder's connections are not SMC-R"
vm_run A "$SMCRCTL status smcr-attach | grep -E 'link group|NBD export|^  [01] +up'" ||
    fail "smcrctl status smcr-attach"
# The receive buffers, each connection: the forwarder's (rmbe-size,
# default 4M) and smcrd's (rmbe-size auto: 4 MiB while its group has room).
n=$(vm_run A "$SMCRCTL --json status smcr-attach" | grep -o '"rmbe":4194304,"peer_rmbe":4194304,' | wc -l)
[ "$n" = 2 ] || { vm_run A "$SMCRCTL status smcr-attach"; fail "$n of 2 connections have 4 MiB receive buffers at both ends"; }
echo "receive buffers: 2 connections with 4 MiB at both ends"

out=$(vm_run -t 200 A "
set -eu
size=\$(blockdev --getsize64 /dev/nbd0)
[ \"\$size\" = 268435456 ] || { echo \"FAIL: /dev/nbd0 has \$size bytes\"; exit 1; }
bash $_vm_libdir/ext4-check.sh /dev/nbd0
") || { echo "$out"; vm_run A "cat /tmp/attach.log"; fail "ext4 over smcr-attach -F failed"; }
echo "$out"
echo "$out" | grepq "^ext4: .* checksums equal after remount" || fail "no ext4 verdict"

noerr() {
    vm_run A "dmesg | grep -c 'I/O error' || true" | grepq -x 0 ||
        { vm_run A "dmesg | tail -n 30; cat /tmp/attach.log"; fail "$1: I/O errors in A's kernel log"; }
}

# fio randrw, every block verified, while link 1's cable is out for 4 s.
fio=$(vm_bg A "fio --name=cable --filename=/dev/nbd0 --direct=1 --ioengine=libaio \
    --iodepth=16 --rw=randrw --bs=16k --size=16M --offset=160M --verify=crc32c --verify_fatal=1 \
    --do_verify=1 --output-format=normal 2>&1")
sleep 4
vm_say "cable of link 1 out"
vm_cable 1 off
sleep 4
vm_cable 1 on
vm_say "cable of link 1 back"
out=$(vm_wait -t 200 A "$fio") || { echo "$out"; vm_run A "cat /tmp/attach.log; dmesg | tail -n 30"; fail "fio failed across the cable pull"; }
echo "$out" | grep -E 'err=|READ:|WRITE:' | sed 's/^/  fio: /'
echo "$out" | grepq 'err= 0' || fail "fio reports errors"
noerr "cable pull"

# smcrd dies under I/O and comes back: the forwarder reconnects, resends.
io=$(vm_bg A 'set -e; head -c 16M /dev/urandom >/tmp/src; t0=$(date +%s%N)
for i in $(seq 16); do
    dd if=/tmp/src of=/dev/nbd0 bs=1M count=1 skip=$((i - 1)) seek=$((191 + i)) oflag=direct status=none; done
dd if=/dev/nbd0 of=/tmp/back bs=1M skip=192 count=16 iflag=direct status=none
cmp /tmp/back /tmp/src && echo "I/O across the restart: 16 MiB written, read back equal ($((($(date +%s%N) - t0) / 1000000)) ms)"')
sleep 2
vm_run B 'kill -KILL $(cat /tmp/smcrd.pid)' >/dev/null
sleep 2
start_smcrd 2
out=$(vm_wait -t 200 A "$io") || { echo "$out"; vm_run A "cat /tmp/attach.log; dmesg | tail -n 20"; vm_run B "tail -n 30 /tmp/smcrd.log"; fail "I/O failed across the smcrd restart"; }
echo "$out"
noerr "smcrd restart"

vm_run A "$ATTACH -d /dev/nbd0" || fail "smcr-attach -d"
vm_wait -t 60 A "$att" >/dev/null || { vm_run A "cat /tmp/attach.log"; fail "the forwarder did not exit 0 after -d"; }
line=$(vm_run A "grep 'forwarded [0-9]* request' /tmp/attach.log") || fail "no forwarder summary"
echo "$line"
echo "$line" | grepq ' 0 failed, 0 bad' || fail "requests failed"
rec=$(echo "$line" | sed -n 's/.*engine: \([0-9]*\) reconnect(s).*/\1/p')
[ "${rec:-0}" -ge 1 ] || fail "the forwarder did not reconnect after the restart"
vm_stop
echo "PASS: smcr-attach --forward: stock nbd.ko over socket pairs, SMC-R to smcrd, ext4, fio verify across a cable pull, smcrd restart ($rec reconnects), detached"
