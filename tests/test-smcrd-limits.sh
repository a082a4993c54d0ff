#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# smcrd's named limits at their edges:
#  - handshake-timeout holds inside a read: slow loris clients
#    that trickle one byte a second into an NBD_OPT_GO payload are closed
#    when it ends, a good client gets in right after, the closes are
#    counted and logged once, not per client;
#  - max-handshakes: with N-1 clients silent in the handshake a good one
#    is served; with N the next evicts the oldest (counted) and is
#    served; when they go a good client is served again.
# One address here, its shares off (--max-*-per-address 0): the shares
# are test-hostile-shares.sh's.
# About 12 s.
# smcr-timeout: 90
. "${srcdir:-.}/functions.sh"
. "$srcdir/test-smcrd-lib.sh"
. "$srcdir/test-client-lib.sh"
requires python3 --version

d=$(scratch_dir)
limit() { smcrd_limit "$1"; }

# --- handshake-timeout 3 s, every client slot taken by a loris ---------
start_smcrd_disk 1M --max-clients 10 --max-clients-per-address 0 --handshake-timeout 3
python3 "$HOSTILE" loris "$PORT" 10 1 7 >"$d/loris" &
loris=$!
cleanup_fn "kill $loris 2>/dev/null"
wait_for 5 grep -q '^loris 10$' "$d/loris"
probe 127.0.0.1 "$PORT" list >/dev/null 2>&1 && fail "a client got in past 10 loris clients (test setup)"
wait_for 4 probe 127.0.0.1 "$PORT" list
t=$SECONDS
wait "$loris" || fail "loris clients"
cat "$d/loris"
grep -q '^loris 10$' "$d/loris" || fail "not 10 loris clients"
grep -q '^loris alive 0 ' "$d/loris" || fail "loris clients outlived handshake-timeout: $(tail -n 1 "$d/loris")"
n=$(limit handshake_timeouts)
[ "$n" = 10 ] || fail "handshake_timeouts $n, want 10"
logged=$(grep -c 'handshake not done in time' "$SMCRD_LOG" || true)
echo "handshake timeouts: $n counted, $logged logged"
[ "$logged" -ge 1 ] && [ "$logged" -le 2 ] || fail "handshake timeouts logged $logged times"
stop_smcrd

# --- max-handshakes 4 ------------------------------------------------------
start_smcrd --export "disk=$d/disk.img" --max-handshakes 4 --max-handshakes-per-address 0
hold_handshakes 3 4
probe 127.0.0.1 "$PORT" list | grepq -x disk || fail "limit-1: a good client was not served"
wait "$held"
hold_handshakes 4 3
probe 127.0.0.1 "$PORT" list | grepq -x disk || fail "at max-handshakes a 5th client was not served"
[ "$(limit handshakes_evicted)" = 1 ] || fail "handshakes_evicted $(limit handshakes_evicted), want 1"
[ "$(limit refused_handshakes)" = 0 ] || fail "refused_handshakes $(limit refused_handshakes), want 0"
grep -q 'max-handshakes.*the oldest handshake of 127.0.0.1 evicted' "$SMCRD_LOG" || fail "eviction not logged"
wait "$held"
wait_for 5 probe 127.0.0.1 "$PORT" list
echo "max-handshakes 4: 3 held + 1 served, 4 held + 1 served (the oldest evicted: $(limit handshakes_evicted) counted), served after"
stop_smcrd
