#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# Client-chosen export names in smcrd's log: a name
# with a newline, a carriage return and an ANSI escape must not start a
# line of its own (a forged log line); it shows escaped (\x0a).  Verbose,
# so that every place that logs the name does; about 3 s.
# smcr-timeout: 60
. "${srcdir:-.}/functions.sh"
. "$srcdir/test-smcrd-lib.sh"
requires python3 --version
HOSTILE=$srcdir/hostile-clients.py

d=$(scratch_dir)
truncate -s 1M "$d/disk.img"
start_smcrd -v --export "disk=$d/disk.img,allow=10.0.0.0/8"
forged='smcrd[0.0] info: FORGED root logged in'
python3 "$HOSTILE" name "$PORT" "x\\n$forged\\r\\x1b[2Ky" || fail "client"
# The export that exists but is not allowed to this address is logged too.
python3 "$HOSTILE" name "$PORT" "disk" || fail "client"
wait_for 5 grep -q 'FORGED' "$SMCRD_LOG"
stop_smcrd
grep -n 'FORGED' "$SMCRD_LOG"
grep -q '^smcrd\[0\.0\] info: FORGED' "$SMCRD_LOG" && fail "a forged line in the log"
grep -qF 'x\x0asmcrd[0.0] info: FORGED' "$SMCRD_LOG" || fail "the name not logged escaped"
LC_ALL=C grep -q $'[\r\x1b]' "$SMCRD_LOG" && fail "control characters in the log"
grep -q "export 'disk' not allowed" "$SMCRD_LOG" || fail "refusal of 'disk' not logged"
echo "verified: the name shows escaped on $(grep -c 'FORGED' "$SMCRD_LOG") line(s), none forged"
