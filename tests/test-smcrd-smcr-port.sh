#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# smcrd's SMC-R listener on a host without RDMA: a plain NBD client that
# sends no CLC Proposal gets NBD over TCP on the same socket after the
# Proposal wait, and its data round-trips.  --rdma-devices and the config
# key rdma-devices reach libsmcr (over SMCR_DEVICES); --rmbe-size takes
# 16M (beyond RFC 7609's 512K) and at most 512M (the wire's 4-bit size).
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

# The RDMA devices: the option wins over SMCR_DEVICES, the config key too;
# a device that is not there stops smcrd at start (exit 1) naming it.
nodev() {
    local rc=0
    SMCR_DEVICES=nosuchdev9 timeout 30 "$smcrd" -f -p "$(free_port)" --smcr-port "$(free_port)" \
        -e "disk=$d/disk" "$@" >"$d/nodev.log" 2>&1 || rc=$?
    [ "$rc" = 1 ] || { cat "$d/nodev.log"; fail "smcrd $*: exit $rc, not 1"; }
}
nodev --rdma-devices nosuchdev0
grep -q 'RDMA port nosuchdev0' "$d/nodev.log" || { cat "$d/nodev.log"; fail "--rdma-devices did not reach libsmcr"; }
printf 'rdma-devices = nosuchdev1\nrmbe-size = 16M\n' >"$d/conf"
nodev --config "$d/conf"
grep -q 'RDMA port nosuchdev1' "$d/nodev.log" || { cat "$d/nodev.log"; fail "rdma-devices (config) did not reach libsmcr"; }
rc=0
timeout 30 "$smcrd" -f -p "$(free_port)" --rmbe-size 1G -e "disk=$d/disk" >"$d/big.log" 2>&1 || rc=$?
[ "$rc" = 2 ] && grep -q 'rmbe-size' "$d/big.log" || { cat "$d/big.log"; fail "--rmbe-size 1G: exit $rc, not 2"; }
echo "verified: --rdma-devices and rdma-devices reach libsmcr over SMCR_DEVICES; rmbe-size 16M taken, --rmbe-size 1G refused"
