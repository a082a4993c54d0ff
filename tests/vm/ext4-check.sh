#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# Run in a guest: ext4-check.sh DEV — mkfs.ext4 on DEV, copy a tree of
# files, umount, fsck clean, remount and compare checksums; prints one
# "ext4: ..." verdict line, exits non-zero on any difference.
set -eu
dev=$1 src=/usr/include/linux
mkfs.ext4 -q -F -E lazy_itable_init=0,lazy_journal_init=0 "$dev"
mkdir -p /mnt/x
mount "$dev" /mnt/x
cp -a "$src" /mnt/x/tree
(cd "$src" && find . -type f -print0 | sort -z | xargs -0 sha256sum) >/tmp/want
umount /mnt/x
fsck.ext4 -fn "$dev" >/tmp/fsck.out 2>&1 || { cat /tmp/fsck.out; echo "FAIL: fsck"; exit 1; }
echo 3 >/proc/sys/vm/drop_caches
mount -o ro "$dev" /mnt/x
(cd /mnt/x/tree && find . -type f -print0 | sort -z | xargs -0 sha256sum) >/tmp/got
umount /mnt/x
cmp /tmp/want /tmp/got || { echo "FAIL: checksums differ after the remount"; exit 1; }
echo "ext4: $(wc -l </tmp/want) files ($(du -sk "$src" | cut -f1) KiB) copied, fsck clean, checksums equal after remount"
