#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# rxe lane smoke 1: an RC QP from host A to host B over each of the two
# links (real libibverbs over Soft-RoCE in two VMs); 1 MiB RDMA WRITE WITH
# IMM plus a 64-byte SEND per link, every byte checked on B.
# smcr-timeout: 180
: "${SMCR_VM_TIMEOUT:=120}"
. "$(dirname "$0")/lib.sh"
vm_requires
prog=$abs_top_builddir/tests/vm/rc-smoke
[ -x "$prog" ] || fail "$prog not built (make check builds it)"

vm_start_pair
port=18515
for link in 1 2; do
    a=$(vm_ip A "$link") b=$(vm_ip B "$link")
    srv=$(vm_bg B "$prog server $link $b $port")
    cout=$(vm_run A "$prog client $link $a $b $port" 2>&1); crc=$?
    sout=$(vm_wait -t 40 B "$srv" 2>&1); src=$?
    echo "$cout" | sed 's/^/A: /'
    echo "$sout" | sed 's/^/B: /'
    [ "$crc" = 0 ] || fail "link $link: client on A exited with $crc"
    [ "$src" = 0 ] || fail "link $link: server on B exited with $src"
    echo "$sout" | grepq "^link $link: verified 1048576 bytes + imm 0x5c3a000$link + send 64 bytes$" ||
        fail "link $link: B did not verify the data"
    echo "$cout" | grepq "^link $link: server says: verified " ||
        fail "link $link: A got no verdict"
done
vm_stop
echo "PASS: RC over rxe, both links: 2 x (1048576 bytes RDMA WRITE WITH IMM + 64 bytes SEND) verified on B"
