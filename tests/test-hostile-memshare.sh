#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# One address cannot fill the request memory: with 64 MiB on one worker and a long --request-timeout, 8
# clients from 127.0.0.1 ask for four 8 MiB READs each and read nothing.
# Each connection holds at most its share of its address's memory (16
# MiB for the first), and 127.0.0.1 at most --max-memory-per-address
# (default: half); a client from 127.0.0.2 writes and reads back 1 MiB
# meanwhile, before any reply timeout.  smcrd's descriptors and RSS come back after.
# About 10 s (30 s on a loaded machine).
# smcr-timeout: 120
. "${srcdir:-.}/functions.sh"
. "$srcdir/test-smcrd-lib.sh"
. "$srcdir/test-client-lib.sh"
requires python3 --version
requires_src_addr 127.0.0.2 "a second loopback source address"

d=$(scratch_dir)
start_smcrd_disk 256M -t 1 -M 64M --request-timeout 120 --no-fixed-buffers
[ "$(smcrd_limit max_memory_per_address)" = 33554432 ] ||
    fail "max_memory_per_address $(smcrd_limit max_memory_per_address), want half of 64M"
HOSTILE_SRC=127.0.0.2 python3 "$HOSTILE" good "$PORT" disk 30 >/dev/null ||
    fail "good client before the attack"
base=$(nfds)
rss0=$(rss_kib)
# Each READ at its own offset: none is sent from the page cache (which
# holds no request memory).
python3 "$HOSTILE" noread "$PORT" disk 8 4 8388608 100 spread >"$d/noread" &
nr=$!
cleanup_fn "kill $nr 2>/dev/null"
wait_for 30 grep -q '^noread 8$' "$d/noread"
# 127.0.0.1 is at its share: its clients wait.
wait_for 30 grep -q 'client 127.0.0.1:[0-9]*: 127.0.0.1 holds [0-9]* bytes of worker 0.*max-memory-per-address' "$SMCRD_LOG"
t0=$SECONDS
HOSTILE_SRC=127.0.0.2 python3 "$HOSTILE" good "$PORT" disk 30 ||
    fail "the client from 127.0.0.2 was not served beside 127.0.0.1's non-reading clients"
took=$((SECONDS - t0))
[ "$(smcrd_limit request_timeouts)" = 0 ] ||
    fail "a reply timeout came first: the good client was served only after it"
kill "$nr" 2>/dev/null
wait "$nr" 2>/dev/null || true
for (( i=0; i<300; i++ )); do [ "$(nfds)" -le "$base" ] && break; sleep 0.1; done
[ "$(nfds)" -le "$base" ] || fail "smcrd holds $(nfds) descriptors, $base before"
rss1=$(rss_kib)
echo "127.0.0.2 served in $took s beside 8 non-reading clients of 127.0.0.1; fds $base -> $(nfds); RSS $rss0 -> $rss1 KiB"
# 127.0.0.1 held at most 32 MiB, and it is given back.
[ "$rss1" -le $((rss0 + 49152)) ] || fail "RSS $rss1 KiB after, $rss0 before"
python3 "$HOSTILE" good "$PORT" disk 30 >/dev/null || fail "127.0.0.1 not served after the attack"
stop_smcrd
# The config key, and 0 (no limit) on the command line over it.
printf 'max-memory = 64M\nmax-memory-per-address = 16M\n' >"$d/smcrd.conf"
start_smcrd -c "$d/smcrd.conf" --export "disk=$d/disk.img"
[ "$(smcrd_limit max_memory_per_address)" = 16777216 ] || fail "config max-memory-per-address = 16M not taken"
stop_smcrd
start_smcrd -c "$d/smcrd.conf" --export "disk=$d/disk.img" --max-memory-per-address 0
[ "$(smcrd_limit max_memory_per_address)" = 0 ] || fail "--max-memory-per-address 0 not taken"
stop_smcrd
echo "PASS: one address holds at most its share of the request memory"
