#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# qemu-img convert into an smcrd export, then qemu-img compare: identical.
# smcr-timeout: 600
. "${srcdir:-.}/functions.sh"
. "$srcdir/test-smcrd-lib.sh"
requires qemu-img --version

d=$(scratch_dir)
mib=$(scale_mib 128 16)
make_random "$d/src.img" "$mib"
# Leave a hole in the middle: qemu-img writes zeroes for it.
dd if=/dev/zero of="$d/src.img" bs=1M seek=$(( mib / 2 )) count=2 conv=notrunc status=none
truncate -s "${mib}M" "$d/export.img"
dd if=/dev/urandom of="$d/export.img" bs=1M seek=$(( mib / 2 )) count=2 conv=notrunc status=none
start_smcrd --export "disk=$d/export.img"

qemu-img convert -n -f raw -O raw "$d/src.img" "$(uri disk)" || fail "qemu-img convert failed"
qemu-img compare -f raw -F raw "$d/src.img" "$(uri disk)" || fail "qemu-img compare: differ"
cmp "$d/src.img" "$d/export.img" || fail "exported file differs"
qemu-img info "$(uri disk)" | grepq "virtual size: $mib MiB" || fail "qemu-img info size"
stop_smcrd
echo "PASS: qemu-img convert + compare, ${mib} MiB"
