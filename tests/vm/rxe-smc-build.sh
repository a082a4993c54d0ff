#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# Builds rdma_rxe.ko with tests/vm/rxe-smc-fixes.patch for kernel KVER from
# Debian's linux-source-6.1 against that kernel's headers, into OUTDIR, and
# prints the module's path.  Reuses OUTDIR/rdma_rxe.ko while the patch, the
# source tarball and the headers are those it was built from.
#   rxe-smc-build.sh KVER OUTDIR
# Exit 77 (with the reason on stderr) when the source or headers are absent.
# About 25 s on the 2-core development machine (8 s of it unpacking).
set -u
kver=$1 out=$2
here=$(cd "$(dirname "$0")" && pwd)
patch=$here/rxe-smc-fixes.patch
src=$(ls -1v /usr/src/linux-source-*.tar.xz 2>/dev/null | tail -n 1)
kdir=/lib/modules/$kver/build
skip() { echo "rxe-smc-build: $*" >&2; exit 77; }
[ -n "$src" ] || skip "no /usr/src/linux-source-*.tar.xz (Debian package linux-source-6.1)"
[ -f "$kdir/Makefile" ] ||
    skip "no headers for kernel $kver in $kdir (Debian package linux-headers-$kver)"
command -v patch >/dev/null 2>&1 || skip "no patch (Debian package patch)"

# What the module is built from: a change to any of these rebuilds it.
stamp="$kver $(sha256sum <"$patch" | cut -c1-16) $(stat -c '%s %Y' "$src" \
    "$kdir/Module.symvers" "$kdir/include/generated/utsrelease.h" 2>/dev/null | tr '\n' ' ')"
if [ -s "$out/rdma_rxe.ko" ] && [ "$(cat "$out/stamp" 2>/dev/null)" = "$stamp" ]; then
    echo "$out/rdma_rxe.ko"
    exit 0
fi

mkdir -p "$out" || exit 1
work=$(mktemp -d "$out/build.XXXXXX") || exit 1
trap 'rm -rf "$work"' EXIT INT TERM
t0=$SECONDS
top=$(tar -tJf "$src" 2>/dev/null | head -n 1)
top=${top%%/*}
tar -xJf "$src" -C "$work" "$top/drivers/infiniband/sw/rxe" ||
    { echo "rxe-smc-build: cannot unpack rxe from $src" >&2; exit 1; }
mv "$work/$top" "$work/src"
(cd "$work/src" && patch -p1 --quiet --no-backup-if-mismatch) <"$patch" ||
    { echo "rxe-smc-build: $patch does not apply to $src" >&2; exit 1; }
# The headers package's Makefile builds an external module from M=.
make -C "$kdir" M="$work/src/drivers/infiniband/sw/rxe" CONFIG_RDMA_RXE=m \
    -j2 modules >"$work/make.log" 2>&1 ||
    { tail -n 30 "$work/make.log" >&2; echo "rxe-smc-build: make failed" >&2; exit 1; }
ko=$work/src/drivers/infiniband/sw/rxe/rdma_rxe.ko
[ "$(modinfo -F vermagic "$ko" | cut -d' ' -f1)" = "$kver" ] ||
    { echo "rxe-smc-build: $ko is not for $kver" >&2; exit 1; }
mv "$ko" "$out/rdma_rxe.ko.tmp" && mv "$out/rdma_rxe.ko.tmp" "$out/rdma_rxe.ko"
echo "$stamp" >"$out/stamp"
echo "rxe-smc-build: built $out/rdma_rxe.ko for $kver in $((SECONDS - t0)) s" >&2
echo "$out/rdma_rxe.ko"
