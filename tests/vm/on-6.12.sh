#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# The body of the NAME-6.12.sh wrappers: on-6.12.sh NAME [ARGS...] runs
# vm/NAME.sh with both guests on Debian's 6.12 kernel (SMCR_VM_KERNEL=6.12,
# package linux-image-6.12-amd64; NAME.sh skips with the reason when it is
# not installed), its logs in vm/NAME-6.12.d.  Only with SMCR_VM_612=1
# (every 6.12 run) or SMCR_VM_612=core (kernel-v2-6.12.sh and
# smcr-attach-ublk.sh only; =ublk: smcr-attach-ublk.sh only, no wrapper;
# tests/vm/README.md, "Two kernels"): every 6.12 run is lane time CI
# has little of.  Not a test itself.
name=$1; shift
case ${SMCR_VM_612:-0}:$name in
    1:* | core:kernel-v2) ;;
    *)
        echo "SKIP: $name-6.12.sh: the 6.12 lane runs with SMCR_VM_612=1 (SMCR_VM_612=core: kernel-v2-6.12 and smcr-attach-ublk only, =ublk: smcr-attach-ublk only; which test runs on which kernel: tests/vm/README.md, \"Two kernels\")"
        exit 77 ;;
esac
: "${abs_builddir:=$abs_top_builddir/tests}"
export SMCR_VM_KERNEL=6.12 SMCR_VM_WORKDIR=${SMCR_VM_WORKDIR:-$abs_builddir/vm/$name-6.12.d}
exec bash "$(dirname "$0")/$name.sh" "$@"
