#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# Client-chosen export names in smcrd's log: a name
# with a newline, a carriage return and an ANSI escape must not start a
# line of its own (a forged log line); it shows escaped (\x0a).  So do
# NEL (U+0085), U+2028, U+2029 and bytes that are not UTF-8 (\xc2\x85,
# \xe2\x80\xa8, \xff), while valid UTF-8 (U+00E9) is logged as is.  Verbose,
# so that every place that logs the name does; about 3 s.
# smcr-timeout: 60
. "${srcdir:-.}/functions.sh"
. "$srcdir/test-smcrd-lib.sh"
requires python3 --version

d=$(scratch_dir)
truncate -s 1M "$d/disk.img"
start_smcrd -v --export "disk=$d/disk.img,allow=10.0.0.0/8"
forged='smcrd[0.0] info: FORGED root logged in'
python3 "$HOSTILE" name "$PORT" "x\\n$forged\\r\\x1b[2Ky" || fail "client"
python3 "$HOSTILE" name "$PORT" "NEL\\xc2\\x85LS\\xe2\\x80\\xa8PS\\xe2\\x80\\xa9FF\\xffE\\xc3\\xa9" ||
    fail "client"
# The export that exists but is not allowed to this address is logged too.
python3 "$HOSTILE" name "$PORT" "disk" || fail "client"
wait_for 5 grep -q 'FORGED' "$SMCRD_LOG"
stop_smcrd
grep -n 'FORGED' "$SMCRD_LOG"
grep -q '^smcrd\[0\.0\] info: FORGED' "$SMCRD_LOG" && fail "a forged line in the log"
grep -qF 'x\x0asmcrd[0.0] info: FORGED' "$SMCRD_LOG" || fail "the name not logged escaped"
LC_ALL=C grep -q $'[\r\x1b]' "$SMCRD_LOG" && fail "control characters in the log"
grep -qF 'NEL\xc2\x85LS\xe2\x80\xa8PS\xe2\x80\xa9FF\xffE'$'\xc3\xa9' "$SMCRD_LOG" ||
    { grep NEL "$SMCRD_LOG"; fail "NEL, U+2028/2029 or invalid UTF-8 not escaped, or U+00E9 escaped"; }
for b in $'\xc2\x85' $'\xe2\x80\xa8' $'\xe2\x80\xa9' $'\xff'; do
    LC_ALL=C grep -qF "$b" "$SMCRD_LOG" && fail "a raw line separator or invalid byte in the log"
done
grep -q "export 'disk' not allowed" "$SMCRD_LOG" || fail "refusal of 'disk' not logged"
echo "verified: the name shows escaped on $(grep -c 'FORGED' "$SMCRD_LOG") line(s), none forged"
