#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# smcrd's SMC-R listener on a host without RDMA: a plain NBD client that
# sends no CLC Proposal gets NBD over TCP on the same socket after the
# Proposal wait, and its data round-trips.
# smcr-timeout: 120
. "${srcdir:-.}/functions.sh"
requires nbdinfo --version
requires nbdcopy --version
smcrd=$abs_top_builddir/server/smcrd
d=$(scratch_dir)
port=$(free_port)
sport=$(free_port)
truncate -s 16M "$d/disk"
head -c 8M /dev/urandom >"$d/data"

run_prog "$smcrd" -f -P "$d/pid" -p "$port" --smcr-port "$sport" -e "disk=$d/disk" 2>"$d/log" &
# $! is run_prog's subshell: stop smcrd itself by its pid file.
cleanup_fn "kill \$(cat '$d/pid' 2>/dev/null) $! 2>/dev/null"
wait_for 10 grep -q 'listening for NBD over SMC-R' "$d/log"
wait_for 10 test -s "$d/pid"

size=$(nbdinfo --size "nbd://127.0.0.1:$sport/disk") || { cat "$d/log"; fail "nbdinfo failed"; }
[ "$size" = 16777216 ] || fail "size $size over the SMC-R port"
nbdcopy "$d/data" "nbd://127.0.0.1:$sport/disk" || fail "write failed"
nbdcopy "nbd://127.0.0.1:$port/disk" "$d/back" || fail "read back over TCP failed"
cmp -n 8388608 "$d/data" "$d/back" || fail "data differs"
grep -q 'TCP fallback' "$d/log" || fail "no fallback logged"
echo "verified: 8 MiB written over the SMC-R port (TCP fallback), read back over TCP"
