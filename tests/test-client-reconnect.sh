#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# The client library (client/nbd-conn.c) against smcrd over TCP, with
# every byte checked by nbdc-io:
#  1. smcrd is killed (SIGKILL) under load and restarted on the same port
#     within the timeout: no I/O error, requests resent, both connections
#     reconnected, within 2 s of smcrd answering again (a refused
#     reconnect is tried again within 250 ms, not after the backoff: the
#     engine's own debug lines say so, a busy host cannot fake it);
#  2. smcrd stays away longer than the timeout: requests fail (EIO), and
#     once it is back, I/O works again with the data intact.
# smcr-timeout: 240
. "${srcdir:-.}/functions.sh"
. "$srcdir/test-smcrd-lib.sh"
. "$srcdir/test-client-lib.sh"

d=$(scratch_dir)
truncate -s 64M "$d/disk.img" "$d/disk2.img"
exports=(--export "disk=$d/disk.img" --export "disk2=$d/disk2.img")
start_smcrd "${exports[@]}"
secs=$(scale_mib 10 20)

# --- 1: back within the timeout -----------------------------------------------
# SMCR_DEBUG: the engine's reconnect attempts and their next wait.
SMCR_DEBUG=7 run_prog "$NBDC_IO" -z -c 2 -t 30 -d "$secs" -q 32 -b 65536 "nbd://127.0.0.1:$PORT/disk" \
    >"$d/io1.out" 2>"$d/io1.err" &
io=$!
cleanup_fn "kill -KILL $io 2>/dev/null"
sleep 3
kill_smcrd
sleep 2
restart_smcrd "${exports[@]}"
t0=$(date +%s%N)
# Both connections back: two 'is back' lines (the log is nbdc-io's).
back=
for (( i=0; i<300; i++ )); do
    if [ "$(grep -c 'is back' "$d/io1.err")" -ge 2 ]; then
        back=$(( ($(date +%s%N) - t0) / 1000000 )); break
    fi
    sleep 0.05
done
rc=0; wait "$io" || rc=$?
cat "$d/io1.out"
[ -n "$back" ] || fail "the connections were not back 15 s after smcrd answered"
echo "connections back ${back} ms after smcrd answered again"
# A refused reconnect waits NBDC_REFUSED_RETRY_MS (250), never the backoff.
refused=$(grep -c 'reconnect failed (Connection refused), next in' "$d/io1.err" || true)
[ "$refused" -ge 1 ] || fail "no refused reconnect logged while smcrd was away"
if grep 'reconnect failed (Connection refused), next in' "$d/io1.err" | grep -v 'next in 250 ms$'; then
    fail "a refused reconnect waited longer than 250 ms (the backoff)"
fi
echo "$refused refused reconnect(s), each tried again after 250 ms"
# Only a sanity bound on the time: the host may be busy.
[ "$back" -lt 10000 ] || fail "connections back only ${back} ms after smcrd answered"
[ "$rc" = 0 ] || { tail -n 20 "$d/io1.err"; fail "I/O failed across a server restart (rc $rc)"; }
[ "$(result_field "$d/io1.out" errors)" = 0 ] || fail "errors reported"
[ "$(result_field "$d/io1.out" bad)" = 0 ] || fail "bad data"
[ "$(result_field "$d/io1.out" reconnects)" -ge 2 ] || fail "both connections should have reconnected"
[ "$(result_field "$d/io1.out" resent)" -ge 1 ] || fail "nothing was resent (no request out at the kill?)"
[ "$(result_field "$d/io1.out" reconnect_failures)" -ge 1 ] || fail "no failed reconnect attempt counted"
grep -q "is back" "$d/io1.err" || fail "no reconnect logged"

# --- 2: away for longer than the timeout ----------------------------------------
run_prog "$NBDC_IO" -z -e -c 2 -t 1.5 -d "$secs" -q 16 -b 65536 "nbd://127.0.0.1:$PORT/disk2" \
    >"$d/io2.out" 2>"$d/io2.err" &
io=$!
cleanup_fn "kill -KILL $io 2>/dev/null"
sleep 2
kill_smcrd
sleep 4
restart_smcrd "${exports[@]}"
rc=0; wait "$io" || rc=$?
cat "$d/io2.out"
[ "$rc" = 0 ] || { tail -n 20 "$d/io2.err"; fail "expected errors and intact data (rc $rc)"; }
[ "$(result_field "$d/io2.out" errors)" -ge 1 ] || fail "no error although the server stayed away"
[ "$(result_field "$d/io2.out" timed_out)" -ge 1 ] || fail "no timeout counted"
[ "$(result_field "$d/io2.out" bad)" = 0 ] || fail "bad data"
stop_smcrd
echo "PASS: restart within the timeout: no error; beyond it: errors, then I/O again"
