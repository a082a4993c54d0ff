#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# Builds one patched module of the rxe lane for kernel KVER from Debian's
# linux-source-<series> of that kernel (linux-source-6.1, linux-source-6.12)
# against that kernel's headers, into OUTDIR, and prints the module's path:
#   rxe  rdma_rxe.ko with rxe-smc-fixes.patch (what the kernel's AF_SMC needs)
#   nbd  nbd.ko with nbd-smc.patch (takes AF_SMC sockets on SMC-R)
#   rnbd RNBD/RTRS, unpatched (Debian's kernel does not build them):
#        rtrs-core.ko, rtrs-client.ko, rtrs-server.ko, rnbd-client.ko and
#        rnbd-server.ko in OUTDIR (their load order); prints OUTDIR
# Reuses OUTDIR's modules while the patch, the source tarball and the headers
# are those they were built from.
#   kmod-build.sh rxe|nbd|rnbd KVER OUTDIR
# Exit 77 (with the reason on stderr) when the source or headers are absent.
# About 25 s for rxe, 15 s for nbd on the 2-core development machine (8 s
# of each unpacking); about 40 s for rnbd.
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
    # Two directories: rtrs, then rnbd against rtrs's Module.symvers.
    rnbd) patch=/dev/null ko=rnbd-server.ko dir=drivers/infiniband/ulp/rtrs
          dir2=drivers/block/rnbd members="$dir $dir2" kbuild=
          vars="CONFIG_INFINIBAND_RTRS=m CONFIG_INFINIBAND_RTRS_CLIENT=m CONFIG_INFINIBAND_RTRS_SERVER=m" ;;
    *) echo "kmod-build: rxe, nbd or rnbd, not '$mod'" >&2; exit 1 ;;
esac
# The source of the kernel's own series (6.1.0-57-amd64: 6.1,
# 6.12.117+deb12-amd64: 6.12), never another one's.
series=${kver%%[-+]*}
series=${series%.*}
src=/usr/src/linux-source-$series.tar.xz
kdir=/lib/modules/$kver/build
skip() { echo "kmod-build: $*" >&2; exit 77; }
[ -r "$src" ] || skip "no $src (Debian package linux-source-$series)"
[ -f "$kdir/Makefile" ] ||
    skip "no headers for kernel $kver in $kdir (Debian package linux-headers-$kver)"
command -v patch >/dev/null 2>&1 || skip "no patch (Debian package patch)"

# What the module is built from: a change to any of these rebuilds it.
stamp="$mod $kver $(sha256sum <"$patch" | cut -c1-16) $(stat -c '%s %Y' "$src" \
    "$kdir/Module.symvers" "$kdir/include/generated/utsrelease.h" 2>/dev/null | tr '\n' ' ')"
result=$out/$ko
[ "$mod" = rnbd ] && result=$out
if [ -s "$out/$ko" ] && [ "$(cat "$out/stamp" 2>/dev/null)" = "$stamp" ]; then
    echo "$result"
    exit 0
fi

mkdir -p "$out" || exit 1
work=$(mktemp -d "$out/build.XXXXXX") || exit 1
trap 'rm -rf "$work"' EXIT INT TERM
t0=$SECONDS
top=$(tar -tJf "$src" 2>/dev/null | head -n 1)
top=${top%%/*}
tar -xJf "$src" -C "$work" $(printf "$top/%s " $members) ||
    { echo "kmod-build: cannot unpack $members from $src" >&2; exit 1; }
mv "$work/$top" "$work/src"
(cd "$work/src" && patch -p1 --quiet --no-backup-if-mismatch) <"$patch" ||
    { echo "kmod-build: $patch does not apply to $src" >&2; exit 1; }
[ -z "$kbuild" ] || echo "$kbuild" >"$work/src/$dir/Kbuild"
# The headers package's Makefile builds an external module from M=.
make -C "$kdir" M="$work/src/$dir" $vars -j2 modules >"$work/make.log" 2>&1 ||
    { tail -n 30 "$work/make.log" >&2; echo "kmod-build: make $mod failed" >&2; exit 1; }
kos=$work/src/$dir/$ko
if [ "$mod" = rnbd ]; then
    # rnbd's own Makefile looks for rtrs.h under $(srctree): the headers.
    cat >"$work/src/$dir2/Kbuild" <<EOF
ccflags-y := -I$work/src/$dir
rnbd-client-y := rnbd-clt.o rnbd-clt-sysfs.o rnbd-common.o
CFLAGS_rnbd-srv-trace.o = -I\$(src)
rnbd-server-y := rnbd-common.o rnbd-srv.o rnbd-srv-sysfs.o rnbd-srv-trace.o
obj-m := rnbd-client.o rnbd-server.o
EOF
    make -C "$kdir" M="$work/src/$dir2" KBUILD_EXTRA_SYMBOLS="$work/src/$dir/Module.symvers" \
        -j2 modules >"$work/make2.log" 2>&1 ||
        { tail -n 30 "$work/make2.log" >&2; echo "kmod-build: make rnbd failed" >&2; exit 1; }
    # rnbd-server.ko ($ko) last: its presence marks a complete set.
    kos="$work/src/$dir/rtrs-core.ko $work/src/$dir/rtrs-client.ko $work/src/$dir/rtrs-server.ko"
    kos+=" $work/src/$dir2/rnbd-client.ko $work/src/$dir2/rnbd-server.ko"
    rm -f "$out/$ko"
fi
for k in $kos; do
    [ "$(modinfo -F vermagic "$k" | cut -d' ' -f1)" = "$kver" ] ||
        { echo "kmod-build: ${k##*/} is not for $kver" >&2; exit 1; }
    mv "$k" "$out/${k##*/}.tmp" && mv "$out/${k##*/}.tmp" "$out/${k##*/}" || exit 1
done
echo "$stamp" >"$out/stamp"
echo "kmod-build: built $mod ($out) for $kver in $((SECONDS - t0)) s" >&2
echo "$result"
