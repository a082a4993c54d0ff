#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# rdma-block-peers.sh with both guests on Debian's 6.12 kernel (SMCR_VM_KERNEL=6.12,
# package linux-image-6.12-amd64; skips with the reason when it is not
# installed; only with SMCR_VM_612=1); its logs in vm/rdma-block-peers-6.12.d.  tests/vm/README.md says which
# lane tests run on which kernel.
# smcr-timeout: 540 (rdma-block-peers.sh: 300; building RNBD/RTRS from linux-source-6.12 took 151 s)
exec bash "$(dirname "$0")/on-6.12.sh" rdma-block-peers "$@"
