#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# An empty allow list is an error, never "everybody":
# --export NAME=PATH,allow= and the config file's 'allow =' and
# 'allow = ,' make smcrd exit with status 2 and say why; a real prefix
# still works both ways (127.0.0.1 sees the export, 10.0.0.0/8 hides it).
# About 3 s.
# smcr-timeout: 60
. "${srcdir:-.}/functions.sh"
. "$srcdir/test-smcrd-lib.sh"

d=$(scratch_dir)
truncate -s 1M "$d/disk.img"

refused() {
    local rc=0
    timeout 10 "$SMCRD" -f -l 127.0.0.1 -p "$(free_port)" "$@" >"$d/out" 2>&1 || rc=$?
    [ "$rc" = 2 ] || { cat "$d/out"; fail "smcrd $* exited $rc (want 2: refused)"; }
    grep -q 'allow: no address prefix given' "$d/out" || { cat "$d/out"; fail "no reason for $*"; }
}

refused --export "disk=$d/disk.img,allow="
refused --export "disk=$d/disk.img,allow=,ro"
for v in '' ',' ' , '; do
    printf '[export disk]\npath = %s\nallow = %s\n' "$d/disk.img" "$v" >"$d/conf"
    refused --config "$d/conf"
done
echo "refused: allow= on the command line (2 forms) and allow = '', ',', ' , ' in a file"

# A real prefix: the loopback client sees the export, or not.
start_smcrd --export "disk=$d/disk.img,allow=127.0.0.1"
probe 127.0.0.1 "$PORT" list | grepq -x disk || fail "allow=127.0.0.1 hides the export"
stop_smcrd
printf '[export disk]\npath = %s\nallow = 10.0.0.0/8\n' "$d/disk.img" >"$d/conf"
start_smcrd --config "$d/conf"
probe 127.0.0.1 "$PORT" list | grepq disk && fail "allow = 10.0.0.0/8 shows the export to 127.0.0.1"
stop_smcrd
