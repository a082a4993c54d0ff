#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# nbdcopy a 256 MiB random image into an smcrd export and back out:
# identical (and identical in the exported file).
# smcr-timeout: 600
. "${srcdir:-.}/functions.sh"
. "$srcdir/test-smcrd-lib.sh"
requires nbdcopy --version

d=$(scratch_dir)
mib=$(scale_mib 256 32)
make_random "$d/src.img" "$mib"
truncate -s "${mib}M" "$d/export.img"
start_smcrd --export "disk=$d/export.img"

nbdcopy "$d/src.img" "$(uri disk)" || fail "nbdcopy into the export failed"
nbdcopy "$(uri disk)" "$d/back.img" || fail "nbdcopy out of the export failed"
cmp "$d/src.img" "$d/back.img" || fail "data read back differs"
cmp "$d/src.img" "$d/export.img" || fail "exported file differs"
# Once more with one connection and no multi-conn, simple requests.
rm -f "$d/back.img"
nbdcopy --connections=1 --requests=1 "$(uri disk)" "$d/back.img" || fail "nbdcopy (1 conn)"
cmp "$d/src.img" "$d/back.img" || fail "data read back (1 conn) differs"
stop_smcrd
# The other paths of plain TCP, on 32 MiB: poll + recv/sendmsg
# (SMCRD_RING_SOCKET=0), large READs copied or sent zero-copy instead of
# by sendfile.
small=$(scale_mib 32 8)
make_random "$d/small.img" "$small"
truncate -s "${small}M" "$d/export2.img"
for v in SMCRD_RING_SOCKET=0 SMCRD_READ_REPLY=copy SMCRD_READ_REPLY=zc; do
    export "${v?}"
    start_smcrd --export "disk=$d/export2.img"
    if [ "$v" = SMCRD_RING_SOCKET=0 ]; then
        nbdcopy "$d/small.img" "$(uri disk)" || fail "$v: nbdcopy into the export failed"
    fi
    rm -f "$d/back.img"
    nbdcopy "$(uri disk)" "$d/back.img" || fail "$v: nbdcopy out of the export failed"
    cmp "$d/small.img" "$d/back.img" || fail "$v: data read back differs"
    rm -f "$d/back.img"
    nbdcopy --connections=1 --requests=1 "$(uri disk)" "$d/back.img" || fail "$v: 1 conn"
    cmp "$d/small.img" "$d/back.img" || fail "$v: data read back (1 conn) differs"
    stop_smcrd
    unset "${v%%=*}"
done
echo "PASS: nbdcopy ${mib} MiB in and out, identical; ${small} MiB by the poll path and with READ replies copied and zero-copy"
