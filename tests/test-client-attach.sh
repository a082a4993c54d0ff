#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# smcr-attach --forward on the host (no nbd.ko here): --exec runs
# nbd-kside.py as the kernel driver's side of two socket pairs, which
# writes and reads random blocks and checks every byte; the forwarder
# carries them over smcrd's SMC-R port (TCP fallback on this host).
#  1. plain run: requests forwarded, the whole export read back equal,
#     a READ past the end fails, NBD_CMD_DISC ends it (exit 0);
#  2. smcrd killed (SIGKILL) under load and restarted on the same ports:
#     no request fails, the engine reconnects and resends, data equal;
#  3. usage: --exec without --forward, a bad --buffer-size, --recover
#     without --ublk=N, a bad --ublk=N, --ublk with -F or a device (exit 2).
# smcr-timeout: 180
. "${srcdir:-.}/functions.sh"
. "$srcdir/test-smcrd-lib.sh"
. "$srcdir/test-client-lib.sh"
requires python3 --version
ATTACH=$abs_top_builddir/client/smcr-attach
KSIDE=$abs_srcdir/nbd-kside.py
[ -x "$ATTACH" ] || fail "$ATTACH not built"

d=$(scratch_dir)
truncate -s 32M "$d/disk.img"
SPORT=$(free_port)
args=(--smcr-port "$SPORT" --export "disk=$d/disk.img")
start_smcrd "${args[@]}"
wait_for 10 grep -q 'listening for NBD over SMC-R' "$SMCRD_LOG"

# --- 1: a plain run ------------------------------------------------------------
touch "$d/stop"
run_prog "$ATTACH" -F -C 2 -E "python3 '$KSIDE' '$d/stop' 300" "127.0.0.1:$SPORT" disk \
    >"$d/run1.out" 2>"$d/run1.err" || { cat "$d/run1.out" "$d/run1.err"; fail "run 1"; }
cat "$d/run1.out"
[ "$(grep -c 'read back equal' "$d/run1.out")" = 2 ] || fail "run 1: want 2 connections read back equal"
grep -E 'forwarded [0-9]+ request' "$d/run1.err"
n=$(sed -n 's/.*forwarded \([0-9]*\) request(s), \([0-9]*\) failed.*/\1 \2/p' "$d/run1.err")
read -r req failed <<<"$n"
# 300+ per pair, plus the reads of the whole part; the 2 failed are the
# READs past the end.
[ "${req:-0}" -ge 600 ] && [ "$failed" = 2 ] || fail "run 1: $req request(s), $failed failed"

# --- 2: smcrd killed under load ------------------------------------------------
rm -f "$d/stop"
run_prog "$ATTACH" -F -C 2 -D 30 -E "python3 '$KSIDE' '$d/stop' 100" "127.0.0.1:$SPORT" disk \
    >"$d/run2.out" 2>"$d/run2.err" &
att=$!
cleanup_fn "kill -KILL $att 2>/dev/null"
sleep 2
kill_smcrd
sleep 1
restart_smcrd "${args[@]}"
wait_for 10 grep -q 'listening for NBD over SMC-R' "$SMCRD_LOG"
sleep 2
touch "$d/stop"
rc=0; wait "$att" || rc=$?
cat "$d/run2.out"
grep -E 'forwarded [0-9]+ request' "$d/run2.err" || true
[ "$rc" = 0 ] || { cat "$d/run2.err"; fail "run 2: exit $rc"; }
[ "$(grep -c 'read back equal' "$d/run2.out")" = 2 ] || fail "run 2: want 2 connections read back equal"
rec=$(sed -n 's/.*engine: \([0-9]*\) reconnect(s).*/\1/p' "$d/run2.err")
[ "${rec:-0}" -ge 2 ] || fail "run 2: $rec reconnect(s), want both connections back"
grep -q ' 2 failed' "$d/run2.err" || fail "run 2: requests failed besides the READs past the end"

# --- 3: usage --------------------------------------------------------------------
rc=0; "$ATTACH" -E true "127.0.0.1:$SPORT" disk 2>/dev/null || rc=$?
[ "$rc" = 2 ] || fail "--exec without --forward: exit $rc, want 2"
rc=0; "$ATTACH" -F -B 12Q -E true "127.0.0.1:$SPORT" disk 2>/dev/null || rc=$?
[ "$rc" = 2 ] || fail "bad --buffer-size: exit $rc, want 2"
rc=0; "$ATTACH" --recover "127.0.0.1:$SPORT" disk 2>/dev/null || rc=$?
[ "$rc" = 2 ] || fail "--recover without --ublk=N: exit $rc, want 2"
rc=0; "$ATTACH" --ublk=x "127.0.0.1:$SPORT" disk 2>/dev/null || rc=$?
[ "$rc" = 2 ] || fail "--ublk=x: exit $rc, want 2"
rc=0; "$ATTACH" --ublk -F "127.0.0.1:$SPORT" disk 2>/dev/null || rc=$?
[ "$rc" = 2 ] || fail "--ublk with -F: exit $rc, want 2"
rc=0; "$ATTACH" --ublk "127.0.0.1:$SPORT" disk /dev/nbd0 2>/dev/null || rc=$?
[ "$rc" = 2 ] || fail "--ublk with a device argument: exit $rc, want 2"
stop_smcrd
echo "PASS: smcr-attach --forward: 2 socket pairs, every byte checked, smcrd restart survived ($rec reconnects)"
