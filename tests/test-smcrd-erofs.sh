#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# An export on a read-only file system (as every path outside
# ReadWritePaths= is under smcrd.service's ProtectSystem=strict): smcrd
# refuses to start with the reason and the fix in its one line ("Read-only
# file system (under systemd, add its directory to ReadWritePaths=: ...; or
# export it read-only)"), at --check-config too, and serves the same export
# read-only (its data read back).  Root, a tmpfs remounted read-only; a
# second or two.
# smcr-timeout: 60
. "${srcdir:-.}/functions.sh"
. "$srcdir/test-smcrd-lib.sh"
requires_root
requires nbdcopy --version

d=$(scratch_dir)
mkdir "$d/mnt"
mount -t tmpfs -o size=4m,mode=0755 smcrbd-erofs "$d/mnt" 2>"$d/err" ||
    skip "cannot mount a tmpfs here: $(cat "$d/err")"
# Before the scratch directory goes (cleanups run last registered first).
cleanup_fn "umount '$d/mnt'"
make_random "$d/mnt/x.img" 1
mount -o remount,ro "$d/mnt" 2>"$d/err" || fail "remount,ro: $(cat "$d/err")"
: 2>/dev/null >>"$d/mnt/x.img" && fail "the remounted tmpfs is still writable"

hint="export 'disk': $d/mnt/x.img: Read-only file system (under systemd, add its directory to ReadWritePaths=: systemctl edit smcrd; or export it read-only)"
rc=0
timeout 30 "$SMCRD" -f -l 127.0.0.1 -p "$(free_port)" -e "disk=$d/mnt/x.img" >"$d/out" 2>&1 || rc=$?
[ "$rc" != 0 ] && [ "$rc" != 124 ] || { cat "$d/out"; fail "smcrd started with a read-write export on a read-only file system (status $rc)"; }
grep -qF -- "$hint" "$d/out" || { cat "$d/out"; fail "no ReadWritePaths= hint at start"; }
printf '[export disk]\npath = %s\n' "$d/mnt/x.img" >"$d/smcrd.conf"
rc=0
"$SMCRD" --check-config --config "$d/smcrd.conf" >"$d/out" 2>"$d/err" || rc=$?
[ "$rc" = 2 ] && grep -qF -- "$hint" "$d/err" || fail "--check-config: status $rc: $(cat "$d/err")"
echo "refused with the ReadWritePaths= hint: at start and at --check-config"

start_smcrd -e "disk=$d/mnt/x.img,ro"
nbdcopy "$(uri disk)" "$d/x.out" || fail "nbdcopy from the read-only export"
cmp "$d/mnt/x.img" "$d/x.out" || fail "the read-only export: other data"
stop_smcrd
echo "PASS: a read-write export on a read-only file system is refused with the hint; read-only it is served (1 MiB equal)"
