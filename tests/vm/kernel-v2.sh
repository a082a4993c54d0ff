#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# SMC-Rv2 with the kernel's AF_SMC (Linux 6.1, net/smc) between the two
# guests: both load the patched rdma_rxe (SMCR_VM_RXE=smc) and give AF_SMC
# the PNET ID and user EID of kernel-smc.sh; libsmcr gets the same EID
# (SMCR_EIDS), so both ends propose and accept SMC-Rv2.  dumpcap records
# B's eth0 (TCP and RoCEv2) throughout.  Each case runs NCONN connections
# of BYTES each way, SHA-256 checked (smcr-stream -m verify):
#   (a) kernel AF_SMC client (A) -> libsmcr server (B), port 5011
#   (b) libsmcr client (A) -> kernel AF_SMC server (B), port 5012
# Pass: every stream verified; libsmcr counts every connection as SMC-R
# (smc = connections, 0 fallbacks); the kernel counts them as SMC-R v2
# successes (smcr_{client,server}_v2_ok) and no fallback; one link group
# on each end carries them all (first contact once, then subsequent);
# tshark finds CLC v2 Proposals, Accepts and Confirms and no Decline.
# With two links (the default; SMCR_KV2_LINKS=1 for one) the kernel gets
# both NICs in its PNET table and each group gets its second link by
# SMC-Rv2 ADD LINK (RKeys in the message), then failover under load:
#   (c) kernel client (A) -> libsmcr server (B): 8 open-ended verified
#       streams for SMCR_KV2_SECS (default 90) s while link 2's cable, then
#       link 1's is pulled and put back, then a QP error is forced in B;
#       each time both links must be back before the next cut;
#   (d) libsmcr client (A) -> kernel server (B): the same.
# Pass: every stream verified, no reset; libsmcr saw each link fail and a
# second link come back each time (its counters).
# Knobs: SMCR_KV2_CONNS (default 16), SMCR_KV2_BYTES (default 8 MiB).
# About 6 minutes (25 s more when the module is built).
# smcr-timeout: 900
: "${SMCR_VM_TIMEOUT:=840}"
: "${SMCR_KV2_LINKS:=2}"
: "${SMCR_KV2_SECS:=90}"
: "${SMCR_KV2_CONNS:=16}"
: "${SMCR_KV2_BYTES:=8388608}"
export SMCR_VM_RXE=smc
. "$(dirname "$0")/lib.sh"
requires tshark --version
requires dumpcap --version
vm_requires
S=$abs_top_builddir/tests/bench/smcr-stream
N=$abs_top_builddir/tests/bench/smc-nl
for p in "$S" "$N"; do [ -x "$p" ] || fail "$p not built"; done
modprobe -S "$VM_KVER" -n smc >/dev/null 2>&1 || skip "kernel $VM_KVER has no module smc"
vm_start_pair "$SMCR_KV2_LINKS"
B1=$(vm_ip B 1)
share=$(vm_share B)
pcap=$share/kernel-v2.pcapng
nconn=$SMCR_KV2_CONNS
bytes=$SMCR_KV2_BYTES
EID=SMCRBD.KPEER

pnet="$N pnet-add SMCRBD eth0 rxe0 1"
[ "$SMCR_KV2_LINKS" = 2 ] && pnet="$pnet && $N pnet-add SMCRBD eth1 rxe1 1"
for v in A B; do
    vm_run "$v" "modprobe smc && $pnet && $N ueid-add $EID" ||
        fail "AF_SMC setup failed on $v"
done

vm_dumpcap B "-i eth0 -f 'tcp portrange 5011-5012 or udp port 4791' -s 128 -w $pcap"

kstats() { vm_run "$1" "$N stats; $N fallbacks"; }
kget() {
    echo "$1" | awk -v k="$2" '{ v = $NF; $NF = ""; sub(/ $/, "") } $0 == k { s = v } END { print s + 0 }'
}

# run CASE PORT SERVER_TYPE CLIENT_TYPE: one case; sets out/sout.
run() {
    local name=$1 port=$2 st=$3 ct=$4 srv t0 t1
    srv=$(vm_bg B "SMCR_EIDS=$EID exec timeout 400 $S server -t $st -p $port -n $nconn")
    vm_listening B "$port"
    t0=$(date +%s%N)
    out=$(vm_run -t 420 A "SMCR_EIDS=$EID timeout 380 $S client $B1 -t $ct -p $port -m verify -n $nconn -b $bytes -s 65536 2>&1") ||
        { echo "$out"; fail "$name: client failed"; }
    t1=$(date +%s%N)
    sout=$(vm_wait -t 60 B "$srv" 2>&1) || { echo "$sout"; fail "$name: server failed"; }
    echo "--- $name ($(( (t1 - t0) / 1000000 )) ms)"
    echo "$out" | grep -E '^(client|stats|result)' | sed 's/^/  /'
    echo "$sout" | grep -E '^(server: (TCP|SMC|syn)|stats)' | sed 's/^/  /'
    echo "$out" | grepq "^result verify $ct $nconn $bytes ok$" || fail "$name: data not verified"
    [ "$(echo "$sout" | grep -c 'verify ok')" = "$nconn" ] ||
        fail "$name: server did not verify $nconn streams"
}
# ours OUTPUT WHO: libsmcr counted nconn SMC-R connections, no fallback,
# all on one link group.
ours() {
    echo "$1" | grepq "^stats $2: connections $nconn smc $nconn fallbacks 0 link_groups 1 " ||
        fail "libsmcr $2 did not count $nconn SMC-R connections, 0 fallbacks, 1 link group"
    [ "$(echo "$1" | grep -c "^$2: SMC-R (first contact)")" = 1 ] ||
        fail "libsmcr $2: not exactly one first contact"
}

k0A=$(kstats A) k0B=$(kstats B)
run "(a) kernel AF_SMC client -> libsmcr server, SMC-Rv2" 5011 smcr smc
ours "$sout" server
run "(b) libsmcr client -> kernel AF_SMC server, SMC-Rv2" 5012 smc smcr
ours "$out" client
kA=$(kstats A) kB=$(kstats B)

sleep 1
vm_run B 'kill -INT $(pidof dumpcap)' >/dev/null
vm_wait -t 30 B "$vm_cap" >/dev/null 2>&1
[ -s "$pcap" ] || fail "empty capture"

echo "--- the kernel's counters (smc-nl), before -> after"
kd() { echo "$(( $(kget "$2" "$3") - $(kget "$1" "$3") ))"; }
for k in smcr_client_v1_ok smcr_client_v2_ok smcr_server_v1_ok smcr_server_v2_ok; do
    echo "  A $k +$(kd "$k0A" "$kA" "$k"), B $k +$(kd "$k0B" "$kB" "$k")"
done
[ "$(kd "$k0A" "$kA" smcr_client_v2_ok)" = "$nconn" ] ||
    fail "(a): the kernel client counted $(kd "$k0A" "$kA" smcr_client_v2_ok) SMC-Rv2 connections, not $nconn"
[ "$(kd "$k0B" "$kB" smcr_server_v2_ok)" = "$nconn" ] ||
    fail "(b): the kernel server counted $(kd "$k0B" "$kB" smcr_server_v2_ok) SMC-Rv2 connections, not $nconn"
fbA=$(echo "$kA" | grep -c '^fallback client') fb0A=$(echo "$k0A" | grep -c '^fallback client')
nfA=$(( $(echo "$kA" | awk '/^fallback client/ { s += $NF } END { print s + 0 }') -
        $(echo "$k0A" | awk '/^fallback client/ { s += $NF } END { print s + 0 }') ))
nfB=$(( $(echo "$kB" | awk '/^fallback server/ { s += $NF } END { print s + 0 }') -
        $(echo "$k0B" | awk '/^fallback server/ { s += $NF } END { print s + 0 }') ))
echo "  fallbacks: A client +$nfA, B server +$nfB"
[ "$nfA" = 0 ] && [ "$nfB" = 0 ] || fail "the kernel counted fallbacks"
: "$fbA" "$fb0A"

echo "--- the capture"
tsh() { tshark -r "$pcap" "$@" 2>/dev/null; }
for port in 5011 5012; do
    c() { tsh -Y "tcp.port == $port && smc.clc_msg == $1" -T fields -e _ws.col.Protocol | grep -c '^SMCv2$'; }
    d=$(tsh -Y "tcp.port == $port && smc.clc_msg == 4" -T fields -e frame.number | wc -l)
    echo "  port $port: v2 Proposals $(c 1), Accepts $(c 2), Confirms $(c 3); Declines $d"
    [ "$(c 1)" = "$nconn" ] && [ "$(c 2)" = "$nconn" ] && [ "$(c 3)" = "$nconn" ] ||
        fail "port $port: expected $nconn v2 Proposals, Accepts and Confirms"
    [ "$d" = 0 ] || fail "port $port: a Decline on the wire"
done
mal=$(tsh -Y 'tcp.port in {5011, 5012} && _ws.malformed' -T fields -e frame.number | wc -l)
echo "  malformed CLC frames: $mal"
[ "$mal" = 0 ] || fail "tshark finds $mal malformed frames in the CLC streams"
cp "$pcap" "$_vm_work/kernel-v2.pcapng"

# ---- failover with the kernel peer ------------------------------------------
# tf TICKS N: field N of the last tick line ("tick T recv sent failovers
# link_failures links_added links_active rebalanced").
tf() { awk -v n="$2" 'NF == 9 { v = $n } END { print v + 0 }' "$1" 2>/dev/null || echo 0; }
until_ok() {
    local secs=$1 i; shift
    for (( i=0; i<secs*5; i++ )); do eval "$*" && return 0; sleep 0.2; done
    return 1
}
# cycle NAME TICKS CTL CUT HEAL: a link fails under load and comes back.
cycle() {
    local name=$1 T=$2 C=$3 cut=$4 heal=$5 lf t0 t1 t2
    lf=$(tf "$T" 6)
    t0=$(date +%s%3N)
    eval "$cut" >/dev/null || fail "$name: '$cut' failed"
    until_ok 30 "[ \$(tf $T 6) -gt $lf ]" || fail "$name: libsmcr saw no link fail ($(tail -n 1 "$T"))"
    t1=$(date +%s%3N)
    sleep 2
    eval "$heal" >/dev/null || fail "$name: '$heal' failed"
    until_ok 60 "[ \$(tf $T 8) = 2 ]" || fail "$name: no second link again ($(tail -n 1 "$T"))"
    t2=$(date +%s%3N)
    vm_say "$name: link failure seen $((t1 - t0)) ms after the cut; two links again $((t2 - t1 - 2000)) ms after the heal"
    : "$C"
}
# failover CASE PORT: (c) or (d) on PORT with the libsmcr side's ticks.
failover() {
    local name=$1 port=$2 ours=$3 T C srv cli cout sout n=8
    local sa sb
    sa=$(vm_share A) sb=$(vm_share B)
    if [ "$ours" = B ]; then T=$sb/$port.ticks C=$sb/$port.ctl; else T=$sa/$port.ticks C=$sa/$port.ctl; fi
    : >"$T"; : >"$C"
    if [ "$ours" = B ]; then
        srv=$(vm_bg B "SMCR_EIDS=$EID exec timeout 400 $S server -t smcr -p $port -n $n --ctl $C --ticks $T")
        vm_listening B "$port"
        cli=$(vm_bg A "exec timeout 400 $S client $B1 -t smc -p $port -m verify -b 0 -d $SMCR_KV2_SECS -n $n -s 16K")
    else
        srv=$(vm_bg B "exec timeout 400 $S server -t smc -p $port -n $n")
        vm_listening B "$port"
        cli=$(vm_bg A "SMCR_EIDS=$EID exec timeout 400 $S client $B1 -t smcr -p $port -m verify -b 0 -d $SMCR_KV2_SECS -n $n -s 16K --ctl $C --ticks $T")
    fi
    until_ok 60 "[ \$(tf $T 8) = 2 ] && [ \$(tf $T 3) -gt 1000000 ]" ||
        fail "$name: no two links with data flowing after 60 s ($(tail -n 1 "$T"))"
    vm_say "$name: two links, data flowing"
    cycle "$name cable 2" "$T" "$C" "vm_cable 2 off" "vm_cable 2 on"
    cycle "$name cable 1" "$T" "$C" "vm_cable 1 off" "vm_cable 1 on"
    cycle "$name QP error" "$T" "$C" "echo 'fault fail-dev=rxe0' >>$C" ":"
    cout=$(vm_wait -t 300 A "$cli" 2>&1) || { echo "$cout" | tail -n 20; fail "$name: client failed"; }
    sout=$(vm_wait -t 60 B "$srv" 2>&1) || { echo "$sout" | tail -n 20; fail "$name: server failed"; }
    echo "--- $name"
    echo "$cout" | grep -E '^(client|stats|result)' | sed 's/^/  /'
    echo "$sout" | grep -E '^(stats|server: [0-9])' | sed 's/^/  /'
    echo "$cout" | grepq "^result verify [a-z]* $n 0 ok$" || fail "$name: the client did not verify all $n streams"
    [ "$(echo "$sout" | grep -c 'verify ok')" = "$n" ] || fail "$name: the server did not verify all $n streams"
}
if [ "$SMCR_KV2_LINKS" = 2 ]; then
    failover "(c) kernel client -> libsmcr server, failover" 5013 B
    failover "(d) libsmcr client -> kernel server, failover" 5014 A
fi

echo "PASS: SMC-Rv2 with the kernel: (a) kernel client -> libsmcr and (b) libsmcr -> kernel server, $nconn x $bytes bytes each way per case, SHA-256 verified, all SMC-Rv2 (kernel v2_ok +$nconn each), no fallback$([ "$SMCR_KV2_LINKS" = 2 ] && echo "; (c), (d) two links by ADD LINK v2, failover under load (2 cable pulls, 1 QP error each), every stream verified")"
vm_quit A B
exit 0
