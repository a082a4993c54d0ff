#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# libsmcr on a host without an RNIC: the client declines (no SMC-R device),
# both ends carry on over the same TCP connection, the data arrives intact
# (SHA-256 both ways) and the fallback is counted with its reason.
# smcr-timeout: 120
. "${srcdir:-.}/functions.sh"

stream=$abs_top_builddir/tests/bench/smcr-stream
[ -x "$stream" ] || skip "no tests/bench/smcr-stream (configure found no libcrypto: libssl-dev)"
if ls /sys/class/infiniband/ 2>/dev/null | grepq .; then
    skip "this host has RDMA devices; the fallback test needs a host without"
fi
d=$(scratch_dir)
port=$(free_port)

run_prog "$stream" server -p "$port" -n 4 >"$d/server.out" 2>"$d/server.err" &
spid=$!
cleanup_fn "kill $spid 2>/dev/null"
wait_for 10 bash -c "ss -ltn | grep -q ':$port '"

run_prog "$stream" client 127.0.0.1 -p "$port" -m verify -n 4 -b 2M -s 60000 \
    >"$d/client.out" 2>"$d/client.err" || { cat "$d"/*; fail "client failed"; }
wait "$spid" || { cat "$d"/*; fail "server failed"; }

cat "$d/client.out" "$d/server.out"
grep -q '^result verify smcr 4 2097152 ok$' "$d/client.out" || fail "data not verified"
[ "$(grep -c 'verify ok' "$d/server.out")" = 4 ] || fail "server did not verify 4 streams"
grep -q 'TCP fallback: no SMC-R device' "$d/client.out" ||
    grep -q 'TCP fallback: .*SMC-R' "$d/client.out" || fail "no fallback reason shown"
grep -Eq '^stats client: connections 4 smc 0 fallbacks 4 ' "$d/client.out" ||
    fail "client fallback counters wrong"
grep -Eq '^stats server: connections 4 smc 0 fallbacks 4 ' "$d/server.out" ||
    fail "server fallback counters wrong"
grep -Eq 'fallback reason 0x03030002 .*: 4$' "$d/client.out" ||
    fail "client reason not counted as 'no SMC-R device'"
echo "verified: 4 fallback connections x 2 MiB each way, reasons counted"
