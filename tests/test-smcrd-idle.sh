#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# --idle-timeout: a client that does nothing after its handshake is
# closed once the timeout has passed (2 s here; closed within 2-6 s, the
# engine's tick and a busy machine as slack), from 127.0.0.1 and from
# 127.0.0.2 alike, and counted (idle_timeouts); a client that READs every
# 0.5 s stays open for 5 s, more than twice the timeout.  Without the
# option idle clients stay.  About 12 s.
# smcr-timeout: 120
. "${srcdir:-.}/functions.sh"
. "$srcdir/test-smcrd-lib.sh"
requires python3 --version

d=$(scratch_dir)
start_smcrd_disk 1M --idle-timeout 2
python3 "$HOSTILE" idle "$PORT" disk 10 0 >"$d/idle1" &
p1=$!
src2=
python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.2", 0))' 2>/dev/null && src2=127.0.0.2
HOSTILE_SRC=${src2:-127.0.0.1} python3 "$HOSTILE" idle "$PORT" disk 10 0 >"$d/idle2" &
p2=$!
python3 "$HOSTILE" idle "$PORT" disk 5 0.5 >"$d/busy" || fail "busy client"
wait "$p1" || fail "idle client"
wait "$p2" || fail "idle client from ${src2:-127.0.0.1}"
echo "idle: $(cat "$d/idle1"); idle from ${src2:-127.0.0.1}: $(cat "$d/idle2"); reading every 0.5 s: $(cat "$d/busy")"
for f in idle1 idle2; do
    t=$(sed -n 's/^closed after \([0-9.]*\) s$/\1/p' "$d/$f")
    [ -n "$t" ] || fail "an idle client was not closed in 10 s ($(cat "$d/$f"))"
    awk -v t="$t" 'BEGIN { exit !(t >= 1.9 && t <= 6) }' || fail "an idle client closed after $t s (timeout 2 s)"
done
grep -q '^open after' "$d/busy" || fail "a client that reads every 0.5 s was closed: $(cat "$d/busy")"
grep -q "idle for [0-9]* ms (idle-timeout): closing" "$SMCRD_LOG" || fail "no idle-timeout line in the log"
stop_smcrd

: >"$SMCRD_LOG"
start_smcrd_disk 1M
python3 "$HOSTILE" idle "$PORT" disk 4 0 >"$d/idle3" || fail "idle client"
grep -q '^open after' "$d/idle3" || fail "idle client closed without --idle-timeout: $(cat "$d/idle3")"
stop_smcrd
echo "PASS: idle clients closed after --idle-timeout, busy ones kept, none closed without it"
