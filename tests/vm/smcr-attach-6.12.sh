#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# smcr-attach.sh with both guests on Debian's 6.12 kernel (SMCR_VM_KERNEL=6.12,
# package linux-image-6.12-amd64; skips with the reason when it is not
# installed; only with SMCR_VM_612=1); its logs in vm/smcr-attach-6.12.d.  tests/vm/README.md says which
# lane tests run on which kernel.
# smcr-timeout: 720 (smcr-attach.sh: 480; 6.12 builds nbd.ko, 70-130 s, and its guests boot slower)
exec bash "$(dirname "$0")/on-6.12.sh" smcr-attach "$@"
