#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# Lines a client causes once per connection are rate-limited per client:
#  - bad CLC Proposals on the SMC-R port for 3 s (libsmcr's lines about
#    the handshake name the peer and pass smcrd's per-peer limiter);
#  - NBD_OPT_GO for an export that does not exist for 3 s (the refusal,
#    logged once per connection, within the client's rate).
# Each writes at most the per-client burst plus its rate over the flood's
# time (40 + 5/s, slack 5), every connection was refused (counted by the
# clients), the reason is logged with the peer at least once, a "suppressed
# N" line counts what was held back, and a good client is served after.
# About 8 s.
# smcr-timeout: 90
. "${srcdir:-.}/functions.sh"
. "$srcdir/test-smcrd-lib.sh"
requires python3 --version
# CLC on every connection (with the SYN option, a peer without it gets TCP).
export SMCR_SYN_OPTION=off
FLOOD=3

d=$(scratch_dir)
SPORT=$(free_port)
start_smcrd_disk 1M --smcr-port "$SPORT"
wait_for 10 grep -q 'listening for NBD over SMC-R' "$SMCRD_LOG"

about_lo() { grep -c "127\.0\.0\.1:[0-9]*" "$SMCRD_LOG" || true; }
# flood NAME PER MODE ARGS...: PER lines per connection without a limit.
flood() {
    local name=$1 per=$2 before t0 n secs lines max; shift 2
    before=$(about_lo)
    t0=$SECONDS
    python3 "$HOSTILE" "$@" >"$d/$name" || fail "$name clients"
    secs=$((SECONDS - t0 + 1))
    n=$(awk '{ print $2 }' "$d/$name")
    lines=$(( $(about_lo) - before ))
    max=$((40 + 5 * secs + 5))
    echo "$name: $n connections in $secs s, $lines lines about 127.0.0.1 (at most $max)"
    # Enough connections to go over the bound twice without the limit.
    [ $((n * per)) -gt $((2 * max)) ] ||
        skip "$name: only $n connections in $secs s (a slow smcrd, valgrind?): no flood to limit"
    [ "$lines" -le "$max" ] || fail "$name: $lines lines logged for $n connections (limit $max)"
    [ "$lines" -ge 10 ] || fail "$name: only $lines lines: the burst was not logged"
}

flood badclc 3 badclc "$SPORT" "$FLOOD"
grep -q "127\.0\.0\.1:[0-9]*: clc server: protocol error" "$SMCRD_LOG" ||
    fail "no libsmcr line names the peer and its protocol error"
grep "127\.0\.0\.1:[0-9]*: clc server: protocol error" "$SMCRD_LOG" | head -n 1

flood badgo 1 badgo "$PORT" nosuch "$FLOOD"
grep -q "nbd: 127\.0\.0\.1:[0-9]*: unknown export 'nosuch'" "$SMCRD_LOG" ||
    fail "the refusal's reason was not logged"
grep -q "log: suppressed [0-9]* handshake messages" "$SMCRD_LOG" || fail "no 'suppressed N' line"
grep "log: suppressed" "$SMCRD_LOG" | tail -n 2

probe 127.0.0.1 "$PORT" list | grepq -x disk || fail "no service after the floods"
echo "$(wc -l <"$SMCRD_LOG") lines in all"
stop_smcrd
echo "PASS: per-connection lines of bad CLC Proposals and refused GOs within the per-client rate"
