#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# libsmcr against the kernel's AF_SMC (Linux 6.1, net/smc) and against
# plain TCP, between the two guests.  Both guests load the patched rdma_rxe
# (SMCR_VM_RXE=smc) and give AF_SMC the PNET ID and user EID of
# kernel-smc.sh, so the kernel proposes and accepts SMC-Rv2 (its only
# option over rxe).  libsmcr speaks SMC-R v1 only, so every SMC pairing
# must end in a Decline and a TCP fallback that both ends understand.
# dumpcap records B's eth0 throughout; each case runs 2 connections of
# 1 MiB each way, SHA-256 checked (smcr-stream -m verify):
#   (a) kernel AF_SMC client (A) -> libsmcr server (B), port 5001
#   (b) libsmcr client (A) -> kernel AF_SMC server (B), port 5002
#       For both: the SMC TCP option (kind 254, ExID E2D4C3D9) on every
#       SYN and SYN-ACK; CLC runs (a Proposal on each connection) and ends
#       in a Decline on each; the data is verified over TCP; the decliner's
#       reason is what the Decline carries and what the decliner counts,
#       the kernel counts every connection as a fallback (smc-nl), libsmcr
#       counts the reason (its stack counters); no SMC-R connection.
#   (c) libsmcr client (A) -> plain TCP server (B), port 5003, and plain
#       TCP client (A) -> libsmcr server (B), port 5004: no option on the
#       TCP side's SYN or SYN-ACK (nor on libsmcr's SYN-ACK to a SYN
#       without it), not one CLC byte in either stream, data verified,
#       libsmcr counts 0x03010000 (peer did not indicate SMC).
# About 40 s (25 s more when the module is built).
# smcr-timeout: 240
: "${SMCR_VM_TIMEOUT:=200}"
export SMCR_VM_RXE=smc
. "$(dirname "$0")/lib.sh"
kpeer_requires
vm_start_pair 1
B1=$(vm_ip B 1)
share=$(vm_share B)
pcap=$share/kernel-interop.pcapng
nconn=2
bytes=1048576

kpeer_setup A B

vm_dumpcap B "-i eth0 -f 'tcp portrange 5001-5004' -w $pcap"

# run CASE PORT SERVER_TYPE CLIENT_TYPE: one case; sets out/sout.
run() {
    local name=$1 port=$2 st=$3 ct=$4 srv
    srv=$(vm_bg B "exec timeout 90 $S server -t $st -p $port -n $nconn")
    vm_listening B "$port"
    out=$(vm_run -t 100 A "timeout 80 $S client $B1 -t $ct -p $port -m verify -n $nconn -b $bytes -s 32768 2>&1") ||
        { echo "$out"; fail "$name: client failed"; }
    sout=$(vm_wait -t 30 B "$srv" 2>&1) || { echo "$sout"; fail "$name: server failed"; }
    echo "--- $name"
    echo "$out" | grep -E '^(client|stats|result)' | sed 's/^/  /'
    echo "$sout" | grep -E '^(server: (TCP|SMC|syn)|stats)' | sed 's/^/  /'
    echo "$out" | grepq "^result verify $ct $nconn $bytes ok$" || fail "$name: data not verified"
    [ "$(echo "$sout" | grep -c 'verify ok')" = "$nconn" ] ||
        fail "$name: server did not verify $nconn streams"
}
# ours OUTPUT WHO REASON: libsmcr counted nconn fallbacks with REASON.
ours() {
    echo "$1" | grep -Eq "^stats $2: connections $nconn smc 0 fallbacks $nconn " ||
        fail "libsmcr $2 did not count $nconn fallbacks"
    echo "$1" | grep -Eq "^stats $2: fallback reason $3 \\([^)]*\\): $nconn\$" ||
        fail "libsmcr $2 did not count reason $3 $nconn times"
}

k0A=$(kstats A) k0B=$(kstats B)

run "(a) kernel AF_SMC client -> libsmcr server" 5001 smcr smc
echo "$sout" | grepq '^server: syn-option bpf$' || fail "(a): libsmcr server not in syn-option bpf mode"
reason_a=$(echo "$sout" | sed -n 's/^stats server: fallback reason \(0x[0-9a-f]*\) .*/\1/p' | head -n 1)
[ -n "$reason_a" ] || fail "(a): libsmcr server counted no fallback reason"
ours "$sout" server "$reason_a"
kA=$(kstats A)

run "(b) libsmcr client -> kernel AF_SMC server" 5002 smc smcr
echo "$out" | grepq '^client: syn-option bpf$' || fail "(b): libsmcr client not in syn-option bpf mode"
reason_b=$(echo "$out" | sed -n 's/^stats client: fallback reason \(0x[0-9a-f]*\) .*/\1/p' | head -n 1)
[ -n "$reason_b" ] || fail "(b): libsmcr client counted no fallback reason"
ours "$out" client "$reason_b"
echo "$out" | grepq '(declined by peer)$' || fail "(b): libsmcr client does not say the kernel declined"
kB=$(kstats B)

run "(c1) libsmcr client -> plain TCP server" 5003 tcp smcr
ours "$out" client 0x03010000
run "(c2) plain TCP client -> libsmcr server" 5004 smcr tcp
ours "$sout" server 0x03010000

sleep 1
vm_run B 'kill -INT $(pidof dumpcap)' >/dev/null
vm_wait -t 30 B "$vm_cap" >/dev/null 2>&1
[ -s "$pcap" ] || fail "empty capture"

echo "--- the kernel's counters (smc-nl), before -> after"
kd() { echo "$(kget "$1" "$3") -> $(kget "$2" "$3")"; }
for k in smcr_client_v1_ok smcr_client_v2_ok smcr_server_v1_ok smcr_server_v2_ok; do
    echo "  A $k $(kd "$k0A" "$kA" "$k"), B $k $(kd "$k0B" "$kB" "$k")"
    [ "$(kget "$kA" "$k")" = "$(kget "$k0A" "$k")" ] || fail "A: $k moved: an SMC-R connection"
    [ "$(kget "$kB" "$k")" = "$(kget "$k0B" "$k")" ] || fail "B: $k moved: an SMC-R connection"
done
echo "$kA" | grep '^fallback' | sed 's/^/  A: /'
echo "$kB" | grep '^fallback' | sed 's/^/  B: /'
# (a): the kernel client counts the Decline as "peer declined"
# (0x05000000, SMC_CLC_DECL_PEERDECL); (b): the kernel server counts its
# own reason, the one libsmcr received.
fa=$(( $(kget "$kA" "fallback client 0x05000000") - $(kget "$k0A" "fallback client 0x05000000") ))
[ "$fa" = "$nconn" ] ||
    fail "(a): the kernel client counted $fa fallbacks 'peer declined' (0x05000000), not $nconn"
fb=$(( $(kget "$kB" "fallback server $reason_b") - $(kget "$k0B" "fallback server $reason_b") ))
[ "$fb" = "$nconn" ] ||
    fail "(b): the kernel server counted $fb fallbacks with reason $reason_b, not $nconn"

echo "--- the capture"
tsh() { tshark_smc -r "$pcap" "$@" 2>/dev/null; }
# syn PORT ACK: the tcp.options of every SYN (ACK 0) or SYN-ACK (ACK 1).
syn() { tsh -Y "tcp.port == $1 && tcp.flags.syn == 1 && tcp.flags.ack == $2" -T fields -e tcp.options; }
opt=fe06e2d4c3d9
for c in 5001:a 5002:b 5003:c1 5004:c2; do
    port=${c%%:*} name=${c#*:}
    syns=$(syn "$port" 0) acks=$(syn "$port" 1)
    ns=$(echo "$syns" | grep -c .) na=$(echo "$acks" | grep -c .)
    os=$(echo "$syns" | grep -c "$opt") oa=$(echo "$acks" | grep -c "$opt")
    prop=$(tsh -Y "tcp.port == $port && smc.clc_msg == 1" -T fields -e frame.number | wc -l)
    decl=$(tsh -Y "tcp.port == $port && smc.clc_msg == 4" -T fields -e smc.peer.diag.info | sort | uniq -c | awk '{ printf "%s%s %s", sep, $1, $2; sep = ", " }')
    nclc=$(tsh -Y "tcp.port == $port && smc.clc_msg" -T fields -e frame.number | wc -l)
    echo "  ($name) port $port: SMC option on $os/$ns SYNs, $oa/$na SYN-ACKs; $nclc CLC messages, $prop Proposals; Declines (count, reason): ${decl:-none}"
    [ "$ns" -ge "$nconn" ] && [ "$na" -ge "$nconn" ] || fail "($name): SYNs missing from the capture"
    case $name in
        a|b)
            [ "$os" = "$ns" ] && [ "$oa" = "$na" ] || fail "($name): a SYN or SYN-ACK without the SMC option"
            [ "$prop" = "$nconn" ] || fail "($name): expected $nconn CLC Proposals"
            want=$reason_a; [ "$name" = b ] && want=$reason_b
            [ "$decl" = "$nconn $want" ] ||
                fail "($name): expected $nconn Declines with reason $want on the wire, saw: ${decl:-none}"
            ;;
        c1)
            [ "$os" = "$ns" ] || fail "(c1): libsmcr's SYN without the SMC option"
            [ "$oa" = 0 ] || fail "(c1): the plain TCP server's SYN-ACK carries the SMC option"
            [ "$nclc" = 0 ] || fail "(c1): CLC bytes in a plain TCP stream"
            ;;
        c2)
            [ "$os" = 0 ] || fail "(c2): the plain TCP client's SYN carries the SMC option"
            [ "$oa" = 0 ] || fail "(c2): libsmcr answered a SYN without the option with it"
            [ "$nclc" = 0 ] || fail "(c2): CLC bytes in a plain TCP stream"
            ;;
    esac
done
# The first 4 payload bytes of each direction of (c): never the CLC
# eyecatcher (tshark's SMC dissector needs it to call a frame CLC).
eye=$(tsh -Y 'tcp.port in {5003, 5004} && tcp.len >= 4' -T fields -e tcp.payload |
          grep -ci '^e2d4c3d9')
[ "$eye" = 0 ] || fail "(c): $eye segments start with the CLC eyecatcher"
cp "$pcap" "$_vm_work/kernel-interop.pcapng"
echo "verified: (a) kernel client -> libsmcr: Decline $reason_a, kernel counted 0x05000000; (b) libsmcr -> kernel server: Decline $reason_b counted on both ends; (c) no CLC with plain TCP either way; every byte SHA-256 checked"
vm_quit A B
exit 0
