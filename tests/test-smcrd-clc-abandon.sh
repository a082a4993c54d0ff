#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# smcrd's SMC-R port against abandoned CLC handshakes:
# 1000 connections that send half a Proposal and close, more at once than
# max-clients lets in; smcrd's descriptors come back to their count before
# and no socket of its port is left in CLOSE-WAIT.  Then at the fd limit
# (a held flood of silent connections): the accept loop does not spin, "Too many open files" is
# logged a few times, not per attempt, and a good client gets in after.
# About 15 s.
# smcr-timeout: 90
. "${srcdir:-.}/functions.sh"
. "$srcdir/test-smcrd-lib.sh"
requires python3 --version
requires ss -V
# CLC on every connection (with the SYN option, a peer without it gets TCP).
export SMCR_SYN_OPTION=off

d=$(scratch_dir)
SPORT=$(free_port)
start_smcrd_disk 1M --smcr-port "$SPORT" --max-clients 8
wait_for 10 grep -q 'listening for NBD over SMC-R' "$SMCRD_LOG"

closewait() { ss -Htan state close-wait "( sport = :$SPORT )" | wc -l; }
base=$(nfds)
python3 "$HOSTILE" abandon "$SPORT" 1000 || fail "abandon clients"
settled() { [ "$(nfds)" -le "$base" ] && [ "$(closewait)" = 0 ]; }
for (( i=0; i<150; i++ )); do settled && break; sleep 0.1; done
echo "fds: $base before, $(nfds) after; CLOSE-WAIT on :$SPORT: $(closewait)"
settled || fail "descriptors leaked: $(nfds) fds (was $base), $(closewait) in CLOSE-WAIT"
kill -0 "$SMCRD_PID" || fail "smcrd died"
probe 127.0.0.1 "$PORT" list >/dev/null || fail "no NBD service after the flood"
stop_smcrd

# At the fd limit: 64 descriptors, a flood that holds 100 connections.
: >"$SMCRD_LOG"
start_smcrd() {
    PORT=$(free_port)
    prlimit --nofile=64:64 "$SMCRD" -f -l 127.0.0.1 -p "$PORT" --smcr-port "$SPORT" \
        --max-clients 200 --max-handshakes 200 --export "disk=$d/disk.img" >>"$SMCRD_LOG" 2>&1 &
    SMCRD_PID=$!
    cleanup_fn "kill -KILL $SMCRD_PID 2>/dev/null"
    wait_for 15 served
}
start_smcrd
python3 "$HOSTILE" hold "$SPORT" 100 4 >"$d/hold" &
holder=$!
cleanup_fn "kill $holder 2>/dev/null"
wait_for 10 grep -q 'Too many open files' "$SMCRD_LOG"
wait "$holder" || fail "hold clients"
cat "$d/hold"
n=$(grep -c 'Too many open files' "$SMCRD_LOG" || true)
echo "'Too many open files' logged $n times"
[ "$n" -le 10 ] || fail "the accept loop logged the fd limit $n times in 4 s"
wait_for 15 served
stop_smcrd
