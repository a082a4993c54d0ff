#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# kernel-smc.sh with both guests on Debian's 6.12 kernel (SMCR_VM_KERNEL=6.12,
# package linux-image-6.12-amd64; skips with the reason when it is not
# installed; only with SMCR_VM_612=1); its logs in vm/kernel-smc-6.12.d.  tests/vm/README.md says which
# lane tests run on which kernel.
# smcr-timeout: 480 (kernel-smc.sh: 240; 6.12 guests boot slower; kernel-interop took 232 s on a host at load 10)
exec bash "$(dirname "$0")/on-6.12.sh" kernel-smc "$@"
