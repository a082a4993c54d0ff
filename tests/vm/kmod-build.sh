#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# Builds one patched module of the rxe lane for kernel KVER from Debian's
# linux-source-6.1 against that kernel's headers, into OUTDIR, and prints
# the module's path:
#   rxe  rdma_rxe.ko with rxe-smc-fixes.patch (what the kernel's AF_SMC needs)
#   nbd  nbd.ko with nbd-smc.patch (takes AF_SMC sockets on SMC-R)
# Reuses OUTDIR's module while the patch, the source tarball and the headers
# are those it was built from.
#   kmod-build.sh rxe|nbd KVER OUTDIR
# Exit 77 (with the reason on stderr) when the source or headers are absent.
# About 25 s for rxe, 15 s for nbd on the 2-core development machine (8 s
# of each unpacking).
set -u
mod=$1 kver=$2 out=$3
here=$(cd "$(dirname "$0")" && pwd)
# dir: the module's directory in the tree; members: what to unpack; kbuild:
# a Kbuild replacing the directory's Makefile (empty: the tree's own).
case $mod in
    rxe) patch=$here/rxe-smc-fixes.patch ko=rdma_rxe.ko dir=drivers/infiniband/sw/rxe
         members=$dir kbuild= vars=CONFIG_RDMA_RXE=m ;;
    nbd) patch=$here/nbd-smc.patch ko=nbd.ko dir=drivers/block
         members=$dir/nbd.c kbuild='obj-m := nbd.o' vars= ;;
    *) echo "kmod-build: rxe or nbd, not '$mod'" >&2; exit 1 ;;
esac
src=$(ls -1v /usr/src/linux-source-*.tar.xz 2>/dev/null | tail -n 1)
kdir=/lib/modules/$kver/build
skip() { echo "kmod-build: $*" >&2; exit 77; }
[ -n "$src" ] || skip "no /usr/src/linux-source-*.tar.xz (Debian package linux-source-6.1)"
[ -f "$kdir/Makefile" ] ||
    skip "no headers for kernel $kver in $kdir (Debian package linux-headers-$kver)"
command -v patch >/dev/null 2>&1 || skip "no patch (Debian package patch)"

# What the module is built from: a change to any of these rebuilds it.
stamp="$mod $kver $(sha256sum <"$patch" | cut -c1-16) $(stat -c '%s %Y' "$src" \
    "$kdir/Module.symvers" "$kdir/include/generated/utsrelease.h" 2>/dev/null | tr '\n' ' ')"
if [ -s "$out/$ko" ] && [ "$(cat "$out/stamp" 2>/dev/null)" = "$stamp" ]; then
    echo "$out/$ko"
    exit 0
fi

mkdir -p "$out" || exit 1
work=$(mktemp -d "$out/build.XXXXXX") || exit 1
trap 'rm -rf "$work"' EXIT INT TERM
t0=$SECONDS
top=$(tar -tJf "$src" 2>/dev/null | head -n 1)
top=${top%%/*}
tar -xJf "$src" -C "$work" "$top/$members" ||
    { echo "kmod-build: cannot unpack $members from $src" >&2; exit 1; }
mv "$work/$top" "$work/src"
(cd "$work/src" && patch -p1 --quiet --no-backup-if-mismatch) <"$patch" ||
    { echo "kmod-build: $patch does not apply to $src" >&2; exit 1; }
[ -z "$kbuild" ] || echo "$kbuild" >"$work/src/$dir/Kbuild"
# The headers package's Makefile builds an external module from M=.
make -C "$kdir" M="$work/src/$dir" $vars -j2 modules >"$work/make.log" 2>&1 ||
    { tail -n 30 "$work/make.log" >&2; echo "kmod-build: make $mod failed" >&2; exit 1; }
[ "$(modinfo -F vermagic "$work/src/$dir/$ko" | cut -d' ' -f1)" = "$kver" ] ||
    { echo "kmod-build: $ko is not for $kver" >&2; exit 1; }
mv "$work/src/$dir/$ko" "$out/$ko.tmp" && mv "$out/$ko.tmp" "$out/$ko"
echo "$stamp" >"$out/stamp"
echo "kmod-build: built $out/$ko for $kver in $((SECONDS - t0)) s" >&2
echo "$out/$ko"
