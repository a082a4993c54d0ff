#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# Close and abort of SMC-R connections between two hosts
# (tests/vm/smcr-close.c, one server on B taking 6 connections from A in
# turn, each a new client process):
#   1. half-client: A shuts down writing first, B still sends afterwards;
#   2. half-server: B shuts down writing first, A still sends afterwards;
#      (data checked byte by byte, both ends see the end of stream);
#   3. abort-client: A aborts (smcr_abort) mid-transfer: B gets an error;
#   4. abort-server: B aborts while A is sending: A gets an error;
#   5. A killed with SIGKILL while streaming: B gets an error (TEST LINK /
#      completion errors), does not hang, and takes the next connection;
#   6. B killed with SIGKILL while A streams: A gets an error.
# After every connection both ends report their gauges: no connection, no
# RMB element and no send buffer left in use (RMBE returned to the pool).
# smcr-timeout: 240
: "${SMCR_VM_TIMEOUT:=210}"
. "$(dirname "$0")/lib.sh"
vm_requires
C=$abs_top_builddir/tests/vm/smcr-close
[ -x "$C" ] || fail "$C not built"
vm_start_pair
B1=$(vm_ip B 1)

srv=$(vm_bg B "$C server -p 5100 -n 6")

# no_leak WHO OUTPUT: the last gauges line shows nothing in use.
no_leak() {
    local g
    g=$(echo "$2" | grep "^gauges $1:" | tail -n 1)
    [[ $g =~ open_connections\ 0\ rmbes_in_use\ 0\ sndbufs_in_use\ 0\  ]] ||
        fail "$1 leaked: ${g:-no gauges line}"
}

n=0
for mode in half-client half-server abort-client abort-server; do
    n=$((n + 1))
    out=$(vm_run -t 60 A "$C client $B1 -p 5100 -m $mode -b 1048576 -s 60000") ||
        { echo "$out"; fail "$mode: client failed"; }
    vm_say "--- $mode"
    echo "$out" | grep -E '^(client|result|gauges)'
    echo "$out" | grepq '^client: SMC-R$' || fail "$mode: not an SMC-R connection"
    echo "$out" | grepq "^result $mode ok" || fail "$mode: client side not as expected"
    no_leak client "$out"
    vm_wait_out B "$srv" "^gauges server:.*" 30 || fail "$mode: server did not finish the connection"
    sout=$(vm_out B "$srv")
    echo "$sout" | grep -E "^(result $mode|server: conn $((n - 1)) )"
    echo "$sout" | grepq "^result $mode ok" || fail "$mode: server side not as expected"
    [ "$(echo "$sout" | grep -c '^gauges server:')" -ge $n ] || fail "$mode: no server gauges"
    no_leak server "$sout"
done

# 5. The client is killed mid-stream: the server must see an error.
vm_say "--- SIGKILL of the sender (A)"
cl=$(vm_bg A "$C client $B1 -p 5100 -m stream -d 120 -s 60000")
vm_wait_out B "$srv" '^server: conn 4 stream: receiving' 60 || fail "stream 5 did not start"
sleep 2
t0=${EPOCHREALTIME/./}
vm_run A 'kill -9 $(pidof smcr-close)' || fail "could not kill the client"
vm_wait_out B "$srv" '^result stream ' 60
dt=$(( (${EPOCHREALTIME/./} - t0) / 1000 ))
sout=$(vm_out B "$srv")
r=$(echo "$sout" | grep '^result stream' | head -n 1)
echo "$sout" | grep -E '^server: conn 4 '
echo "$r (seen ${dt} ms after the kill)"
[[ $r =~ ^result\ stream\ error\ ([A-Z]+) ]] ||
    fail "server did not get an error when its peer was killed: ${r:-nothing within 60 s}"
vm_wait -t 10 A "$cl" >/dev/null 2>&1
vm_wait_out B "$srv" '^gauges server:' 10 5 || :
no_leak server "$(vm_out B "$srv")"

# 6. The server is killed while the client streams: the client must see an
# error, and give everything back.
vm_say "--- SIGKILL of the receiver (B)"
cl=$(vm_bg A "$C client $B1 -p 5100 -m stream -d 120 -s 60000")
vm_wait_out B "$srv" '^server: conn 5 stream: receiving' 60 || fail "stream 6 did not start"
sleep 2
t0=${EPOCHREALTIME/./}
vm_run B 'kill -9 $(pidof smcr-close)' || fail "could not kill the server"
out=$(vm_wait -t 60 A "$cl") || { echo "$out"; fail "client failed after the server was killed"; }
dt=$(( (${EPOCHREALTIME/./} - t0) / 1000 ))
echo "$out" | grep -E '^(client|result|gauges)'
r=$(echo "$out" | grep '^result stream')
echo "(client done ${dt} ms after the kill)"
[[ $r =~ ^result\ stream\ error\ ([A-Z]+) ]] ||
    fail "client did not get an error when its peer was killed: $r"
no_leak client "$out"
vm_wait -t 10 B "$srv" >/dev/null 2>&1

echo "verified: both half-close orders (data after the other side's shutdown arrives intact), abort from either side seen as an error by the peer, SIGKILL of either peer mid-transfer seen as an error within seconds, the server takes new connections afterwards, and no RMB element or send buffer left in use on any side"
