#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# WRITE memory charged as the payload arrives, fairly per client: with
# 64 MiB of
# request memory on one worker and request-timeout far away, 32 clients
# announce a 32 MiB WRITE each and send 1 byte; a good client still writes
# 1 MiB and reads it back within 5 s, and nobody is closed for it.  Large
# WRITEs (24 MiB + 4 KiB, and 8 MiB in two halves 1 s apart) go to disk in
# chunks and read back intact.  About 10 s.
# smcr-timeout: 90
. "${srcdir:-.}/functions.sh"
. "$srcdir/test-smcrd-lib.sh"
. "$srcdir/test-client-lib.sh"
requires python3 --version

d=$(scratch_dir)
# All clients come from 127.0.0.1: no per-address share, the charge alone
# must keep the good one served (test-hostile-memshare.sh: the share).
start_smcrd_disk 64M -t 1 -M 64M --request-timeout 60 --no-fixed-buffers \
    --max-memory-per-address 0
python3 "$HOSTILE" good "$PORT" disk 20 $(( (24 << 20) + 4096 )) ||
    fail "a 24 MiB + 4 KiB WRITE was not served intact"
python3 "$HOSTILE" good "$PORT" disk 20 $(( 8 << 20 )) 1 ||
    fail "an 8 MiB WRITE in two halves 1 s apart was not served intact"
python3 "$HOSTILE" announce "$PORT" disk 32 33554432 15 >"$d/announce" &
a=$!
cleanup_fn "kill $a 2>/dev/null"
wait_for 10 grep -q '^announcing 32$' "$d/announce"
python3 "$HOSTILE" good "$PORT" disk 5 ||
    fail "with 32 clients holding partial 32 MiB WRITEs, a good client was not served in 5 s"
n=$(smcrd_limit request_timeouts)
[ "$n" = 0 ] || fail "request_timeouts $n: the good client was served by closing others"
kill "$a" 2>/dev/null
stop_smcrd
