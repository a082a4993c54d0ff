#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# kernel-nbd-tools.sh with both guests on Debian's 6.12 kernel (SMCR_VM_KERNEL=6.12,
# package linux-image-6.12-amd64; skips with the reason when it is not
# installed); its logs in vm/kernel-nbd-tools-6.12.d.  tests/vm/README.md says which
# lane tests run on which kernel.
# smcr-timeout: 300
# Only with SMCR_VM_612=1 (tests/vm/README.md, "Which kernel"): 6.12's
# stock rdma_rxe double-faults now and then in these guests.
[ "${SMCR_VM_612:-0}" = 1 ] || {
    echo "SKIP: $(basename "$0"): the 6.12 lane runs with SMCR_VM_612=1 (6.12's rdma_rxe panics now and then under TCG: tests/vm/README.md)"
    exit 77
}
: "${abs_builddir:=$abs_top_builddir/tests}"
export SMCR_VM_KERNEL=6.12 SMCR_VM_WORKDIR=${SMCR_VM_WORKDIR:-$abs_builddir/vm/kernel-nbd-tools-6.12.d}
exec bash "$(dirname "$0")/kernel-nbd-tools.sh" "$@"
