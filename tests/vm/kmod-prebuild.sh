#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# Builds ahead of the lane the modules its tests build on first use
# (kmod-build.sh, into BUILDDIR/tests/vm/kmod-KVER/MOD, where vm_kmod_build
# finds them): for 6.1 rxe, nbd and rnbd, for 6.12 nbd and rnbd (its stock
# rdma_rxe is used), for each series whose generic image is in /boot.
# scripts/check.sh runs it niced beside the host tests, whose time is
# mostly spent waiting, so the lane does not wait on the builds (108 s
# of one core on a quiet host).  What cannot be built is left to the test
# that needs it, which then says why (kmod-build.sh's exit 77).
#   kmod-prebuild.sh BUILDDIR
set -u
out=${1:?usage: kmod-prebuild.sh BUILDDIR}
here=$(cd "$(dirname "$0")" && pwd)
. "$here/kernel-path.sh"
rc=0
for series in 6.1 6.12; do
    k=$(_vm_kernel_path "$series") || { echo "kmod-prebuild: no $series image in /boot"; continue; }
    kver=${k##*/vmlinuz-}
    mods="nbd rnbd"
    [ "$series" = 6.1 ] && mods="rxe $mods"
    for mod in $mods; do
        t0=$SECONDS
        bash "$here/kmod-build.sh" "$mod" "$kver" "$out/tests/vm/kmod-$kver/$mod" >/dev/null
        r=$?
        case $r in
            0) echo "kmod-prebuild: $mod for $kver ready in $((SECONDS - t0)) s" ;;
            77) echo "kmod-prebuild: $mod for $kver skipped" ;;
            *) echo "kmod-prebuild: $mod for $kver failed ($r)"; rc=1 ;;
        esac
    done
done
exit $rc
