#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# The RDMA block peers of the benchmark (rdma-peers.sh) still work in the
# rxe lane: B exports one 64 MiB file in its tmpfs; A attaches it through
# NVMe-oF/RDMA (nvmet + nvme-rdma, native multipath over both links) and
# through RNBD/RTRS (two paths, one per link), writes an 8 MiB random
# pattern through each device with O_DIRECT at its own offset, reads it back
# and compares, and B's backing file must hold the same bytes (sha256).
# Both controllers / paths must be up.  RNBD is skipped (the NVMe part still
# runs) when the kernel source or headers to build it are absent.
# About 60 s under TCG (+40 s to build the RNBD/RTRS modules once).
# smcr-timeout: 300
: "${SMCR_VM_TIMEOUT:=240}"
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/rdma-peers.sh"
vm_requires
nvmeof_requires
rc=0; rnbd_requires || rc=$?
case $rc in
    0) rnbd=1 ;;
    77) rnbd=0; echo "RNBD/RTRS cannot be built here (see above): NVMe-oF only" ;;
    *) fail "building the RNBD/RTRS modules failed" ;;
esac
vm_start_pair

# Not in /tmp: the guest root is an overlay, whose inodes give nvmet a
# 1-byte block size (i_blkbits 0); /dev/shm is a plain tmpfs.
IMG=/dev/shm/peer.img
vm_run B "truncate -s 64M $IMG" || fail "backing file in B"

# check NAME DEV MIB: 8 MiB of random bytes through DEV at offset MIB, read
# back and compared in A, then in B's backing file (sha256).
check() {
    local name=$1 dev=$2 off=$3 out want got
    out=$(vm_run -t 120 A "
set -eu
size=\$(blockdev --getsize64 $dev)
[ \"\$size\" = 67108864 ] || { echo \"FAIL: $dev has \$size bytes\"; exit 1; }
head -c 8M /dev/urandom >/tmp/$name.pat
t0=\$(date +%s%N)
dd if=/tmp/$name.pat of=$dev bs=1M seek=$off oflag=direct status=none
dd if=$dev of=/tmp/$name.back bs=1M skip=$off count=8 iflag=direct status=none
ms=\$(( (\$(date +%s%N) - t0) / 1000000 ))
cmp /tmp/$name.pat /tmp/$name.back || { echo 'FAIL: read back differs'; exit 1; }
echo \"$name: 8 MiB written and read back through $dev (O_DIRECT) in \$ms ms, equal\"
sha256sum </tmp/$name.pat") || { echo "$out"; fail "$name: I/O through $dev"; }
    echo "$out" | sed '$d'
    want=$(echo "$out" | tail -n 1 | cut -d' ' -f1)
    got=$(vm_run B "dd if=$IMG bs=1M skip=$off count=8 status=none | sha256sum" | cut -d' ' -f1)
    [ -n "$want" ] && [ "$want" = "$got" ] ||
        fail "$name: B's backing file holds other bytes at $off MiB ($got, want $want)"
    echo "$name: B's backing file holds the same 8 MiB (sha256 ${want:0:16}...)"
}

out=$(nvmet_export "$IMG") || { echo "$out"; fail "nvmet export in B"; }
echo "$out"
dev=$(nvmeof_attach) || { vm_run A "dmesg | tail -n 20"; fail "nvme-rdma attach in A"; }
echo "nvme-rdma: $dev, 2 controllers live (native multipath)"
check nvmeof "$dev" 8
nvmeof_detach || fail "nvme disconnect"
nvmet_unexport || fail "nvmet unexport"

if [ "$rnbd" = 1 ]; then
    rnbd_export "$IMG" || fail "rnbd-server export in B"
    dev=$(rnbd_attach) || { vm_run A "dmesg | tail -n 20"; fail "rnbd map in A"; }
    echo "rnbd: $dev, 2 paths connected"
    check rnbd "$dev" 24
    rnbd_detach || fail "rnbd unmap"
    rnbd_unexport || fail "losetup -d in B"
fi
vm_stop
if [ "$rnbd" = 1 ]; then
    echo "PASS: NVMe-oF/RDMA (multipath) and RNBD/RTRS (two paths): data written in A found in B's backing file"
else
    echo "PASS: NVMe-oF/RDMA (multipath): data written in A found in B's backing file"
    skip "RNBD/RTRS part skipped: its modules cannot be built here (NVMe-oF passed)"
fi
