#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# TCP fallback between two hosts when one has no RNIC.
# B's rxe device is deleted before anything starts; then, over link 1's
# addresses:
#   1. client A (RNIC) -> server B (none): B declines, both ends carry on
#      over the same TCP connections;
#   2. client B (none) -> server A (RNIC): B declines locally.
# Each time 4 connections send 2 MiB both ways with SHA-256 checked at the
# far end, and both sides count 4 fallbacks with the reason (no SMC-R
# device), the client's marked as declined by the peer in case 1.  A's RNIC
# stays idle: no RoCE packet leaves it.
# smcr-timeout: 150
: "${SMCR_VM_TIMEOUT:=120}"
. "$(dirname "$0")/lib.sh"
vm_requires
S=$abs_top_builddir/tests/bench/smcr-stream
[ -x "$S" ] || fail "$S not built"
vm_start_pair 1

vm_run B 'rdma link delete rxe0 && ls /sys/class/infiniband | wc -l' | grepq -x 0 ||
    fail "could not remove B's RNIC"
sent_pkts() { vm_run A 'cat /sys/class/infiniband/rxe0/ports/1/hw_counters/sent_pkts'; }
pkts0=$(sent_pkts)


# check CASE SERVER_VM CLIENT_VM PORT BY_PEER
check() {
    local name=$1 sv=$2 cv=$3 port=$4 by_peer=$5 srv out sout
    srv=$(vm_bg "$sv" "$S server -p $port -n 4")
    vm_listening "$sv" "$port"
    out=$(vm_run -t 90 "$cv" "$S client $(vm_ip "$sv" 1) -p $port -m verify -n 4 -b 2M -s 60000") ||
        { echo "$out"; fail "$name: client failed"; }
    sout=$(vm_wait -t 60 "$sv" "$srv") || { echo "$sout"; fail "$name: server failed"; }
    echo "--- $name"
    echo "$out" | grep -E '^(client|stats|result)'
    echo "$sout" | grep -E '^(server: (TCP|SMC)|stats)'
    echo "$out" | grepq '^result verify smcr 4 2097152 ok$' || fail "$name: data not verified"
    [ "$(echo "$sout" | grep -c 'verify ok')" = 4 ] || fail "$name: server did not verify 4 streams"
    echo "$out" | grep -Eq "^client: TCP fallback: no SMC(-R)? device.* \\($by_peer\\)$" ||
        fail "$name: client does not show the fallback reason (expected: $by_peer)"
    echo "$sout" | grep -Eq '^server: TCP fallback: no SMC(-R)? device' ||
        fail "$name: server does not show the fallback reason"
    for who in client server; do
        local o=$out
        [ $who = server ] && o=$sout
        echo "$o" | grep -Eq "^stats $who: connections 4 smc 0 fallbacks 4 " ||
            fail "$name: $who did not count 4 fallbacks"
        echo "$o" | grep -Eq "^stats $who: fallback reason 0x0303000[02] \\(no SMC(-R)? device[^)]*\\): 4\$" ||
            fail "$name: $who did not count the reason (no SMC-R device) 4 times"
    done
}

check "A (RNIC) -> B (no RNIC)" B A 5000 "declined by peer"
check "B (no RNIC) -> A (RNIC)" A B 5001 "local"

pkts1=$(sent_pkts)
[ "$pkts0" = "$pkts1" ] || fail "A's rxe0 sent $((pkts1 - pkts0)) RoCE packets: not a TCP fallback"
echo "verified: with no RNIC on one side (either role), 2 x 4 connections fell back to TCP after a Decline, 2 MiB each way SHA-256 checked, fallbacks counted with reason 'no SMC-R device' on both ends; no RoCE packet sent"
