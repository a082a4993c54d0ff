#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# /init of the rxe lane's initramfs (busybox sh).  lib.sh builds the
# initramfs at test time from the host's busybox-static and kernel modules.
#
# Loads the virtio + 9p + overlay modules, mounts the host's root filesystem
# (9p tag "hostroot", read-only) under a tmpfs overlay, and switch_roots into
# it, running the guest agent named by "smcr.init=PATH" on the kernel command
# line (tests/vm/guest.sh, found at the same path as on the host).
/bin/busybox --install -s /bin
export PATH=/bin

die() {
    echo "initramfs: $*" >/dev/console
    echo "initramfs: powering off" >/dev/console
    poweroff -f
    sleep 5
    exit 1
}

mount -t proc proc /proc
mount -t devtmpfs devtmpfs /dev || die "cannot mount devtmpfs"

for ko in /modules/*.ko; do
    insmod "$ko" || die "insmod $ko failed"
done

init=
for arg in $(cat /proc/cmdline); do
    case $arg in smcr.init=*) init=${arg#smcr.init=} ;; esac
done
[ -n "$init" ] || die "no smcr.init= on the kernel command line"

mkdir -p /lower /rw /newroot
# msize 512 KiB: fewer 9p round trips when executables are paged in.
# cache=mmap: file contents stay coherent with the host (cache=loose served
# stale contents of files the host rewrote, and was not measurably faster).
mount -t 9p -o trans=virtio,version=9p2000.L,ro,msize=524288,cache=mmap \
    hostroot /lower || die "cannot mount the host root (9p tag hostroot)"
mount -t tmpfs -o mode=0755 tmpfs /rw || die "cannot mount tmpfs"
mkdir -p /rw/upper /rw/work
mount -t overlay -o lowerdir=/lower,upperdir=/rw/upper,workdir=/rw/work \
    overlay /newroot || die "cannot mount the overlay"
[ -x "/newroot$init" ] || [ -f "/newroot$init" ] || die "$init not found in the host root"

mount --move /dev /newroot/dev || die "cannot move /dev"
umount /proc
exec switch_root /newroot /bin/bash "$init"
