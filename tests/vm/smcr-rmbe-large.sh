#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# SMC-R receive buffers beyond RFC 7609's 512 KiB (the wire's 4-bit size
# goes to 512 MiB; Linux 6.11+ uses it): for RMBEs of 512 KiB, 1, 4 and
# 16 MiB (SMCR_RMBE_SIZE on both ends), libsmcr to libsmcr over rxe:
#  1. each end announces and takes the other's RMBE of that size (the
#     client prints both; its send buffer is the server's RMBE's size);
#  2. one connection carries SMCR_RMBE_VERIFY (default 8M) each way,
#     SHA-256 checked at the far end;
#  3. one connection sends SMCR_RMBE_BW (default 16M) in 1 MiB messages:
#     MB/s per size, printed as a ratio to 512 KiB (the figures of one
#     run only mean something beside each other).
# smcr-timeout: 420
: "${SMCR_VM_TIMEOUT:=360}"
: "${SMCR_RMBE_VERIFY:=8M}"
: "${SMCR_RMBE_BW:=16M}"
. "$(dirname "$0")/lib.sh"
vm_requires
S=$abs_top_builddir/tests/bench/smcr-stream
[ -x "$S" ] || fail "$S not built"
vm_start_pair

port=5100
declare -A mbs
for sz in 512K 1M 4M 16M; do
    case $sz in
    *K) bytes=$(( ${sz%K} * 1024 )) ;;
    *M) bytes=$(( ${sz%M} * 1024 * 1024 )) ;;
    esac
    srv=$(vm_bg B "SMCR_RMBE_SIZE=$bytes $S server -p $port -n 2")
    vm_listening B $port >/dev/null
    out=$(vm_run -t 200 A "SMCR_RMBE_SIZE=$bytes $S client $(vm_ip B 1) -p $port -m verify -n 1 -b $SMCR_RMBE_VERIFY") ||
        { echo "$out"; fail "$sz: verify connection failed"; }
    echo "$out" | grep -E '^(client: SMC-R|result)'
    echo "$out" | grepq "^client: SMC-R (first contact), link [0-9]*, RMBE $bytes, peer RMBE $bytes," ||
        fail "$sz: RMBEs not $bytes bytes each way"
    echo "$out" | grepq "^result verify smcr 1 [0-9]* ok$" || fail "$sz: data not verified"
    out=$(vm_run -t 200 A "SMCR_RMBE_SIZE=$bytes $S client $(vm_ip B 1) -p $port -m bw -s 1M -b $SMCR_RMBE_BW") ||
        { echo "$out"; fail "$sz: bw connection failed"; }
    echo "$out" | grep -E '^result'
    m=$(echo "$out" | sed -n 's/^result bw smcr \([0-9.]*\)$/\1/p')
    [ -n "$m" ] || fail "$sz: no bandwidth figure"
    mbs[$sz]=$m
    sout=$(vm_wait -t 120 B "$srv") || { echo "$sout"; fail "$sz: server failed"; }
    [ "$(echo "$sout" | grep -c 'verify ok')" = 1 ] || fail "$sz: server did not verify the stream"
    port=$((port + 1))
done
for sz in 512K 1M 4M 16M; do
    echo "rmbe $sz: ${mbs[$sz]} MB/s ($(awk -v a="${mbs[$sz]}" -v b="${mbs[512K]}" 'BEGIN { printf "%.2fx", a / b }') of 512K)"
done
echo "verified: RMBEs of 512K, 1M, 4M and 16M both ways, $SMCR_RMBE_VERIFY each way intact (SHA-256) at each size"
