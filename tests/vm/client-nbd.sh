#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# The clients over real SMC-R (rxe): smcrd on host B (NBD over SMC-R on port
# 10810, two links), and on host A:
#  1. nbdkit smcr -> SMC-R -> smcrd; the kernel's nbd-client on /dev/nbd0
#     through nbdkit's unix socket; mkfs.ext4, mount, copy a tree of files,
#     umount, fsck clean, checksums equal after a remount; nbdinfo --map
#     through nbdkit shows data and holes (base:allocation over SMC-R);
#  2. fio on /dev/nbd0, randrw, iodepth 32, verify=crc32c: no errors; while
#     it runs, smcrctl shows nbdkit-smcr's link group (two active links) and
#     its SMC-R connections, and the counters move;
#  3. smcr-fuse over SMC-R: a 64 MiB random file written through the mount,
#     read back and compared; punch-hole reads back zeros;
#  4. smcrctl on B shows the server side (link group and clients while
#     nbdkit is attached, exports).
# smcr-timeout: 360
: "${SMCR_VM_TIMEOUT:=300}"
. "$(dirname "$0")/lib.sh"
vm_requires
requires nbdkit --version
requires test -x /usr/sbin/nbd-client
requires fio --version
PLUGIN=$abs_top_builddir/client/.libs/nbdkit-smcr-plugin.so
SMCRD=$abs_top_builddir/server/smcrd
SMCRCTL=$abs_top_builddir/client/smcrctl
FUSE=$abs_top_builddir/client/smcr-fuse
for f in "$PLUGIN" "$SMCRD" "$SMCRCTL" "$FUSE"; do [ -e "$f" ] || fail "$f not built"; done
vm_start_pair

B1=$(vm_ip B 1)
srv=$(vm_bg B "truncate -s 256M /tmp/disk.img && truncate -s 80M /tmp/fuse.img &&
exec $SMCRD -f -P /tmp/smcrd.pid -p 10809 --smcr-port 10810 -e disk=/tmp/disk.img -e fuse=/tmp/fuse.img >/tmp/smcrd.log 2>&1")
vm_run B "for i in \$(seq 300); do grep -q 'listening for NBD over SMC-R' /tmp/smcrd.log && exit 0; sleep 0.1; done
cat /tmp/smcrd.log; exit 1" || fail "smcrd did not come up in B"

# --- 1. nbdkit smcr + kernel nbd-client, ext4 ----------------------------------
kit=$(vm_bg A "exec nbdkit -f -v -U /tmp/nbdkit.sock -P /tmp/nbdkit.pid $PLUGIN server=$B1 export=disk connections=2 timeout=60 2>/tmp/nbdkit.log")
out=$(vm_run -t 240 A '
set -eu
# The plugin logs its check before nbdkit serves (1 connection), then
# the engine it serves with (2): wait for that one.
for i in $(seq 600); do grep -q "nbd: smcr://.* 2 connection(s)" /tmp/nbdkit.log && break; sleep 0.1; done
grep "nbd: smcr://" /tmp/nbdkit.log || { cat /tmp/nbdkit.log; exit 1; }
modprobe nbd
nbd-client -N "" -b 4096 -u /tmp/nbdkit.sock /dev/nbd0 >/dev/null
size=$(blockdev --getsize64 /dev/nbd0)
[ "$size" = 268435456 ] || { echo "FAIL: /dev/nbd0 has $size bytes"; exit 1; }
bash '"$_vm_libdir"'/ext4-check.sh /dev/nbd0
') || { echo "$out"; vm_run A "tail -n 30 /tmp/nbdkit.log"; fail "ext4 over nbdkit smcr failed"; }
echo "$out"
echo "$out" | grepq "^ext4: .* checksums equal after remount" || fail "no ext4 verdict"
echo "$out" | grepq "2 connection(s) (smcr)" || fail "nbdkit's connections are not SMC-R"
# base:allocation over SMC-R: the ext4 image is metadata in a sparse file.
map=$(vm_run A "nbdinfo --map 'nbd+unix:///?socket=/tmp/nbdkit.sock'") ||
    fail "nbdinfo --map through nbdkit smcr failed"
echo "$map" | python3 -c '
import sys
ext = [l.split() for l in sys.stdin.read().splitlines()]
pos = 0
for off, ln, typ, *_ in ext:
    assert int(off) == pos, ext
    pos += int(ln)
assert pos == 256 << 20, pos
kinds = {t for _, _, t, *_ in ext}
assert kinds == {"0", "3"}, kinds
print("base:allocation over SMC-R: %d extents, data and holes, 256 MiB" % len(ext))
' || { echo "$map"; fail "nbdinfo --map over SMC-R: wrong extents"; }

# --- 2. fio with verify, smcrctl while it runs -------------------------------------
snap() {
    vm_run A "$SMCRCTL --json status nbdkit-smcr" | python3 -c '
import json, sys
p = json.load(sys.stdin)[0]
lg = p["smcr"]["link_groups"]
assert len(lg) == 1, "link groups: %d" % len(lg)
links = lg[0]["links"]
assert [l["state"] for l in links] == ["active", "active"], links
assert all(l["local_gid"] and l["peer_gid"] and l["qpn"] and l["peer_qpn"] for l in links), links
conns = [c for c in p["smcr"]["connections"] if c["smc"]]
assert len(conns) == 2, p["smcr"]["connections"]
assert all(c["link"] > 0 for c in conns), conns
s, n = p["stats"], p["sections"]["nbd"]
assert s["smc_connections"] >= 2 and s["fallbacks"] == 0, s
assert [c["transport"] for c in n["connections"]] == ["smcr", "smcr"], n["connections"]
print(s["rdma_writes"], s["cdc_sent"], s["bytes_sent"], n["stats"]["requests"],
      len(links), len(conns), links[0]["device"], links[1]["device"])'
}
# Counters before fio, the status while it runs, counters after it: fio's
# I/O must show in them however fast or slow this machine is.
s1=$(snap) || fail "smcrctl status (before fio) wrong"
fio=$(vm_bg A 'fio --name=verify --filename=/dev/nbd0 --rw=randrw --bs=16k --iodepth=32 \
  --ioengine=libaio --direct=1 --size=24M --offset=128M --verify=crc32c --verify_fatal=1 \
  --do_verify=1 --output-format=json >/tmp/fio.out 2>/tmp/fio.err; rc=$?; cat /tmp/fio.out; cat /tmp/fio.err >&2; exit $rc')
sleep 2
smid=$(snap) || fail "smcrctl status (during fio) wrong"
vm_run A "$SMCRCTL status nbdkit-smcr" | sed -n '1,/^counters/p'
# The server's view while the client is attached.
out=$(vm_run B "$SMCRCTL status smcrd") || { echo "$out"; fail "smcrctl on B failed"; }
echo "$out" | sed -n '1,/^connections/p'
echo "$out" | grepq "link group 0: server, 2 connection(s)" || fail "no server link group with 2 connections on B"
[ "$(echo "$out" | grep -Ec '^    [0-9]+ +active +rxe[01] ')" = 2 ] || fail "B: two active links expected"
echo "$out" | grep -Eq "^  clients +2$" || fail "B: smcrd should count 2 clients"
fout=$(vm_wait -t 300 A "$fio") || { echo "$fout"; fail "fio failed"; }
s2=$(snap) || fail "smcrctl status (after fio) wrong"
read -r w1 c1 b1 r1 nl nc d1 d2 <<<"$s1"
read -r wm cm _ rm _ _ _ _ <<<"$smid"
read -r w2 c2 b2 r2 _ _ _ _ <<<"$s2"
echo "smcrctl: 1 link group, $nl links ($d1, $d2), $nc SMC-R connections; rdma writes $w1 -> $wm -> $w2, CDC $c1 -> $cm -> $c2, requests $r1 -> $rm -> $r2 (before, during, after fio)"
[ "$w2" -gt "$w1" ] && [ "$c2" -gt "$c1" ] && [ "$r2" -gt "$r1" ] || fail "counters did not move with fio"
echo "$fout" | python3 -c '
import json, sys
j = json.load(sys.stdin)["jobs"][0]
r, w = j["read"], j["write"]
print("fio randrw 16k iodepth 32 verify=crc32c: read %d KiB at %d KiB/s, wrote %d KiB at %d KiB/s, error %d"
      % (r["io_kbytes"], r["bw"], w["io_kbytes"], w["bw"], j["error"]))
assert j["error"] == 0 and w["io_kbytes"] > 0' || { echo "$fout"; fail "fio reported an error"; }
# smcrd read the file straight into the SMC-R send buffer for (most of)
# fio's 16 KiB READs, and wrote WRITE payloads from the RMBE.
zc=$(vm_run B "$SMCRCTL --json status smcrd" | python3 -c '
import json, sys
s = json.load(sys.stdin)[0]["sections"]["smcrd"]
print(s["zc_reads"], s["zc_writes"], s["requests"])') || fail "smcrctl --json on B failed"
read -r zr zw zq <<<"$zc"
echo "smcrd: $zr zero-copy READ replies, $zw zero-copy WRITEs of $zq requests"
[ "$zr" -gt 0 ] && [ "$zw" -gt 0 ] || fail "smcrd did no zero-copy I/O over SMC-R"
vm_run A 'nbd-client -d /dev/nbd0 >/dev/null; kill $(cat /tmp/nbdkit.pid)'
kout=$(vm_wait -t 60 A "$kit") || { echo "$kout"; vm_run A "tail -n 20 /tmp/nbdkit.log"; fail "nbdkit did not exit cleanly"; }

# --- 3. smcr-fuse over SMC-R ------------------------------------------------------------
out=$(vm_run -t 240 A "
set -eu
modprobe fuse
mkdir -p /mnt/f
$FUSE -C 2 smcr://$B1/fuse /mnt/f
head -c 64M /dev/urandom >/tmp/src
dd if=/tmp/src of=/mnt/f/fuse bs=1M conv=notrunc,fsync status=none
$SMCRCTL status smcr-fuse | grep -E 'link group 0|NBD export|^  [01] +up'
echo 3 >/proc/sys/vm/drop_caches
cmp -n 67108864 /tmp/src /mnt/f/fuse
fallocate --punch-hole --keep-size -o 8M -l 4M /mnt/f/fuse
echo 3 >/proc/sys/vm/drop_caches
cmp -n 4194304 -i 8388608:0 /mnt/f/fuse /dev/zero
cmp -n 8388608 /tmp/src /mnt/f/fuse
fusermount3 -u /mnt/f
echo 'fuse: 64 MiB written and read back identical over SMC-R, punched hole reads zeros'
") || { echo "$out"; fail "smcr-fuse over SMC-R failed"; }
echo "$out"
echo "$out" | grepq "^fuse: 64 MiB written" || fail "no fuse verdict"

# --- 4. the server's exports ------------------------------------------------------------
out=$(vm_run B "$SMCRCTL status smcrd") || { echo "$out"; fail "smcrctl on B failed"; }
echo "$out" | grep -Eq "^ +disk +/tmp/disk.img +268435456" || fail "no export table on B"
vm_run B 'kill $(cat /tmp/smcrd.pid)' >/dev/null
sout=$(vm_wait -t 60 B "$srv") || { echo "$sout"; vm_run B "tail -n 20 /tmp/smcrd.log"; fail "smcrd exit status"; }
vm_stop
echo "PASS: ext4 over nbdkit smcr + nbd-client, fio verify, smcr-fuse 64 MiB, smcrctl views, all over SMC-R"
