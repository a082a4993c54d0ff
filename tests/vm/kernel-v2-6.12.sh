#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# kernel-v2.sh with both guests on Debian's 6.12 kernel (SMCR_VM_KERNEL=6.12,
# package linux-image-6.12-amd64; skips with the reason when it is not
# installed); its logs in vm/kernel-v2-6.12.d.  tests/vm/README.md says which
# lane tests run on which kernel.
# smcr-timeout: 1200
: "${abs_builddir:=$abs_top_builddir/tests}"
export SMCR_VM_KERNEL=6.12 SMCR_VM_WORKDIR=${SMCR_VM_WORKDIR:-$abs_builddir/vm/kernel-v2-6.12.d}
exec bash "$(dirname "$0")/kernel-v2.sh" "$@"
