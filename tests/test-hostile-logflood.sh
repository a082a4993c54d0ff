#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# Log lines a client can cause are rate-limited:
# 1500 connections from 127.0.0.1 that each send an option with a bad
# magic (two log lines each without limits) write at most the per-client
# burst plus its rate over the flood's time, and a "suppressed N" line
# says how many were held back; a client from 127.0.0.2 right after is
# still logged (its own bucket; the per-kind one not drained); smcrd
# serves a good client and its descriptors come back.  About 8 s.
# smcr-timeout: 90
. "${srcdir:-.}/functions.sh"
. "$srcdir/test-smcrd-lib.sh"
requires python3 --version
requires_src_addr 127.0.0.2 "a second loopback source address"

d=$(scratch_dir)
start_smcrd_disk 1M
base=$(nfds)
t0=$SECONDS
python3 "$HOSTILE" garbage "$PORT" 1500 >"$d/flood" || fail "garbage clients"
secs=$((SECONDS - t0 + 1))
cat "$d/flood"
HOSTILE_SRC=127.0.0.2 python3 "$HOSTILE" garbage "$PORT" 1 >/dev/null || fail "127.0.0.2 client"
wait_for 5 grep -q "nbd: 127.0.0.2:[0-9]*: bad option magic" "$SMCRD_LOG"
lines=$(grep -c "127.0.0.1:[0-9]*: bad option magic\|client 127.0.0.1:[0-9]*: handshake ended" "$SMCRD_LOG" || true)
max=$((40 + 5 * secs + 5))
echo "flood of $secs s: $lines lines about 127.0.0.1 logged (at most $max), $(wc -l <"$SMCRD_LOG") in all"
[ "$lines" -le "$max" ] || fail "$lines lines logged for 1500 bad connections (limit $max)"
[ "$lines" -ge 40 ] || fail "only $lines lines: the burst was not logged"
grep -q "log: suppressed [0-9]* handshake messages" "$SMCRD_LOG" || fail "no 'suppressed N' line"
grep "log: suppressed" "$SMCRD_LOG" | head -n 3
probe 127.0.0.1 "$PORT" list | grepq -x disk || fail "no service after the flood"
for (( i=0; i<50; i++ )); do [ "$(nfds)" -le "$base" ] && break; sleep 0.1; done
[ "$(nfds)" -le "$base" ] || fail "smcrd holds $(nfds) descriptors, $base before"
stop_smcrd
echo "PASS: protocol errors logged within the per-client rate, suppressed lines counted"
