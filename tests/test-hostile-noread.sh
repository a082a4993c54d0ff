#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# Clients that never read their replies: with 64 MiB
# of request memory on one worker and --request-timeout 2, 4 clients ask
# for four 8 MiB READs each and read nothing (their receive buffers
# 4 KiB).  Each is closed within request-timeout and a few ticks ("reply
# timeout", counted in request_timeouts), smcrd's descriptors and RSS come
# back, and a good client writes and reads back 1 MiB meanwhile.
# About 8 s.
# smcr-timeout: 90
. "${srcdir:-.}/functions.sh"
. "$srcdir/test-smcrd-lib.sh"
. "$srcdir/test-client-lib.sh"
requires python3 --version

d=$(scratch_dir)
start_smcrd_disk 64M -t 1 -M 64M --request-timeout 2 --no-fixed-buffers
python3 "$HOSTILE" good "$PORT" disk 8 >/dev/null || fail "good client before the attack"
base=$(nfds)
rss0=$(rss_kib)
t0=$SECONDS
python3 "$HOSTILE" noread "$PORT" disk 4 4 8388608 20 >"$d/noread" &
nr=$!
cleanup_fn "kill $nr 2>/dev/null"
wait_for 10 grep -q '^noread 4$' "$d/noread"
python3 "$HOSTILE" good "$PORT" disk 15 || fail "the good client was not served beside non-reading clients"
timeouts_at() { [ "$(smcrd_limit request_timeouts)" -ge "$1" ]; }
wait_for 10 timeouts_at 4
took=$((SECONDS - t0))
n=$(grep -c 'reply timeout: closing' "$SMCRD_LOG" || true)
[ "$n" = 4 ] || fail "$n reply timeouts logged per client, want 4"
grep -q 'replies not read for' "$SMCRD_LOG" || fail "no 'replies not read' warning"
for (( i=0; i<100; i++ )); do [ "$(nfds)" -le "$base" ] && break; sleep 0.1; done
[ "$(nfds)" -le "$base" ] || fail "smcrd holds $(nfds) descriptors, $base before"
rss1=$(rss_kib)
echo "4 non-reading clients closed within $took s (request-timeout 2); fds $base -> $(nfds); RSS $rss0 -> $rss1 KiB"
# Their buffers are given back: RSS within 48 MiB of before (they held up
# to 64 MiB of request memory).
[ "$rss1" -le $((rss0 + 49152)) ] || fail "RSS $rss1 KiB after, $rss0 before"
python3 "$HOSTILE" good "$PORT" disk 8 >/dev/null || fail "good client after the attack"
kill "$nr" 2>/dev/null
stop_smcrd
echo "PASS: clients that do not read their replies are closed and freed"
