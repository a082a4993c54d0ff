#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# kernel-nbd-tools.sh with both guests on Debian's 6.12 kernel (SMCR_VM_KERNEL=6.12,
# package linux-image-6.12-amd64; skips with the reason when it is not
# installed; only with SMCR_VM_612=1); its logs in vm/kernel-nbd-tools-6.12.d.  tests/vm/README.md says which
# lane tests run on which kernel.
# smcr-timeout: 300
exec bash "$(dirname "$0")/on-6.12.sh" kernel-nbd-tools "$@"
