#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# Cheap WRITE announcers against a good client: with
# 64 MiB of request memory on one worker, 8 clients announce a 16 MiB
# WRITE each and send 1 byte; they are closed after request-timeout (2 s),
# counted and logged once; a good client writes 1 MiB and reads it back
# within 8 s.  At the edge:
# a client whose payload comes in two halves 1 s apart (under the limit)
# is served.  About 10 s.
# smcr-timeout: 90
. "${srcdir:-.}/functions.sh"
. "$srcdir/test-smcrd-lib.sh"
. "$srcdir/test-client-lib.sh"
requires python3 --version

d=$(scratch_dir)
start_smcrd_disk 64M -t 1 -M 64M --request-timeout 2 --no-fixed-buffers
python3 "$HOSTILE" trickle "$PORT" disk 1 || fail "a payload in two halves 1 s apart was not served"
python3 "$HOSTILE" announce "$PORT" disk 8 16777216 12 >"$d/announce" &
a=$!
cleanup_fn "kill $a 2>/dev/null"
wait_for 5 grep -q '^announcing 8$' "$d/announce"
python3 "$HOSTILE" good "$PORT" disk 8 || fail "the good client was not served in 8 s"
# (Since WRITE memory is charged as the payload comes, the good client
# need not wait for the timeouts: test-smcrd-write-charge.sh.)
timeouts_at() { [ "$(smcrd_limit request_timeouts)" -ge "$1" ]; }
wait_for 8 timeouts_at 8
n=$(smcrd_limit request_timeouts)
logged=$(grep -c 'request payload stalled' "$SMCRD_LOG" || true)
echo "request timeouts: $n counted, $logged logged"
[ "$n" = 8 ] || fail "request_timeouts $n"
[ "$logged" -ge 1 ] && [ "$logged" -le 2 ] || fail "logged $logged times"
kill "$a" 2>/dev/null
stop_smcrd
