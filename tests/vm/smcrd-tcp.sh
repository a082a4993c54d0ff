#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# smcrd over plain NBD/TCP in the rxe lane: smcrd in B exports a 256 MiB
# file on port 10809 (no SMC-R listener); in A the kernel's nbd-client
# attaches /dev/nbd0 over one of the links, mkfs.ext4, mount, copy a tree of
# files, umount, fsck clean, checksums equal after a remount.  smcrctl on B
# counts the client while it is attached; after SIGTERM smcrd exits 0 and
# the export file itself holds a clean ext4 with the same files.
# smcr-timeout: 240
: "${SMCR_VM_TIMEOUT:=180}"
. "$(dirname "$0")/lib.sh"
vm_requires
requires test -x /usr/sbin/nbd-client
requires mkfs.ext4 -V
SMCRD=$abs_top_builddir/server/smcrd
SMCRCTL=$abs_top_builddir/client/smcrctl
for f in "$SMCRD" "$SMCRCTL"; do [ -x "$f" ] || fail "$f not built"; done
vm_start_pair

B1=$(vm_ip B 1)
srv=$(vm_bg B "truncate -s 256M /tmp/disk.img &&
exec $SMCRD -f -P /tmp/smcrd.pid -p 10809 -e disk=/tmp/disk.img >/tmp/smcrd.log 2>&1")
vm_run B "for i in \$(seq 300); do [ -s /tmp/smcrd.pid ] && grep -qi listening /tmp/smcrd.log && exit 0; sleep 0.1; done
cat /tmp/smcrd.log; exit 1" || fail "smcrd did not come up in B"

out=$(vm_run -t 150 A "
set -eu
modprobe nbd
nbd-client -N disk -b 4096 $B1 10809 /dev/nbd0 >/dev/null
size=\$(blockdev --getsize64 /dev/nbd0)
[ \"\$size\" = 268435456 ] || { echo \"FAIL: /dev/nbd0 has \$size bytes\"; exit 1; }
echo \"attached: /dev/nbd0 over TCP to $B1:10809, \$size bytes\"
bash $_vm_libdir/ext4-check.sh /dev/nbd0
") || { echo "$out"; vm_run B "tail -n 20 /tmp/smcrd.log"; fail "ext4 over smcrd/TCP failed"; }
echo "$out"
echo "$out" | grepq "^ext4: .* checksums equal after remount" || fail "no ext4 verdict"

# The server's view while the client is attached.
st=$(vm_run B "$SMCRCTL status smcrd") || { echo "$st"; fail "smcrctl on B failed"; }
echo "$st" | grep -Eq "^  clients +1$" || { echo "$st"; fail "B: smcrd should count 1 client"; }
echo "smcrctl on B: smcrd counts 1 client"

vm_run A 'nbd-client -d /dev/nbd0 >/dev/null' || fail "nbd-client -d failed"
vm_run B 'kill -TERM $(cat /tmp/smcrd.pid)' || fail "cannot signal smcrd"
sout=$(vm_wait -t 30 B "$srv" 2>&1) || { echo "$sout"; vm_run B "tail -n 20 /tmp/smcrd.log"; fail "smcrd did not exit 0 on SIGTERM"; }
echo "smcrd: exited 0 on SIGTERM"

# The export file itself, in B: a clean ext4 holding the same files.
out=$(vm_run -t 60 B "
set -eu
modprobe loop 2>/dev/null || true
fsck.ext4 -fn /tmp/disk.img >/tmp/fsck.out 2>&1 || { cat /tmp/fsck.out; echo 'FAIL: fsck of the export file'; exit 1; }
mkdir -p /mnt/y
mount -o ro,loop /tmp/disk.img /mnt/y
(cd /mnt/y/tree && find . -type f -print0 | sort -z | xargs -0 sha256sum) >/tmp/got
umount /mnt/y
(cd /usr/include/linux && find . -type f -print0 | sort -z | xargs -0 sha256sum) >/tmp/want
cmp /tmp/want /tmp/got || { echo 'FAIL: the export file holds other data'; exit 1; }
echo \"export file: fsck clean, \$(wc -l </tmp/got) files with the same checksums\"
") || { echo "$out"; fail "the export file in B is not what A wrote"; }
echo "$out"
vm_stop
echo "PASS: kernel nbd-client -> smcrd over TCP: ext4 built, files verified on the device and in the export file"
