#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# fio with its nbd engine, randrw at iodepth 32 with crc32c verification,
# on a buffered and an O_DIRECT export: no errors.
# smcr-timeout: 600
. "${srcdir:-.}/functions.sh"
. "$srcdir/test-smcrd-lib.sh"
requires fio --version
fio --enghelp=nbd >/dev/null 2>&1 || skip "fio has no nbd engine"

d=$(scratch_dir)
mib=$(scale_mib 128 8)
truncate -s "${mib}M" "$d/a.img"
truncate -s "${mib}M" "$d/b.img"
start_smcrd --queue-depth 64 --export "buffered=$d/a.img" --export "direct=$d/b.img,direct"

for e in buffered direct; do
    out=$d/fio-$e.txt
    fio --name="verify-$e" --ioengine=nbd --uri="$(uri $e)" --rw=randrw --rwmixread=50 \
        --bs=4k --bssplit=4k/60:64k/30:1m/10 --iodepth=32 --size="${mib}M" \
        --verify=crc32c --verify_fatal=1 --do_verify=1 --verify_state_save=0 >"$out" 2>&1 ||
        { cat "$out" >&2; fail "fio on $e failed"; }
    grep -q "err= 0" "$out" || { cat "$out" >&2; fail "fio on $e reported errors"; }
    grep -qi "verify.*fail\|bad magic\|crc32c.*wanted" "$out" && { cat "$out" >&2; fail "verify errors on $e"; }
done
stop_smcrd
log_has "O_DIRECT" || fail "direct export not opened with O_DIRECT"
echo "PASS: fio randrw iodepth 32 verify=crc32c, buffered and O_DIRECT"
