#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# smcr-attach --ublk on Debian 12's Linux 6.1 (no ublk_drv: the kernel is
# built without CONFIG_BLK_DEV_UBLK): one line says what is missing and
# which kernel has it, the exit status is 1, and nothing was created.
# smcr-timeout: 120
: "${SMCR_VM_TIMEOUT:=100}"
. "$(dirname "$0")/lib.sh"
vm_kernel 6.1
vm_requires
ATTACH=$abs_top_builddir/client/smcr-attach
[ -x "$ATTACH" ] || fail "$ATTACH not built"
vm_start_single
out=$(vm_run A "$ATTACH --ublk 10.1.1.2 disk 2>&1; echo \"exit \$?\"; ls /dev/ublk* 2>/dev/null | wc -l")
echo "$out"
vm_stop
echo "$out" | grepq -x 'exit 1' || fail "smcr-attach --ublk did not exit 1"
echo "$out" | grepq -x 0 || fail "a ublk device node appeared"
[ "$(echo "$out" | grep -c 'error:')" = 1 ] || fail "not one error line"
echo "$out" | grepq 'error: ublk: no /dev/ublk-control: the kernel needs the ublk driver (ublk_drv: CONFIG_BLK_DEV_UBLK, Linux >= 6.0; on Debian 12, linux-image-6.12-amd64)' ||
    fail "the error does not say that ublk_drv is absent and where to get it"
echo "PASS: smcr-attach --ublk on $VM_KVER: ublk_drv absent, said in one line, exit 1"
