#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# Wireshark's SMC dissector reads every message of an SMC-R session
# between two hosts.  dumpcap captures B's two NICs (eth0 =
# link 1, eth1 = link 2) while A opens 5 SMC-R connections to B, each
# sending 128 KiB both ways (first contact, ADD LINK of link 2, subsequent
# contacts, a second RMB announced with CONFIRM RKEY, CDCs, closes), then a
# 6th that ping-pongs 64-byte messages for a few seconds (TEST LINK on the
# idle link 2).  On the host, tshark must then
#   - decode every CLC message on the test's TCP port as SMC (6 Proposals,
#     6 Accepts, 6 Confirms, no Decline),
#   - decode every RoCEv2 SEND (UDP 4791, BTH opcode SEND Only: that is
#     how LLC and CDC messages travel; RDMA WRITEs carry payload data) as
#     an SMC LLC or CDC message,
#   - see at least the LLC exchanges this session must have (CONFIRM LINK,
#     ADD LINK, ADD LINK CONTINUATION, CONFIRM RKEY, TEST LINK requests
#     and replies)
#     and as many CDC messages as the two stacks counted,
#   - report no malformed frame and no expert warning or error on them,
#   - see flag 0x03 (no RMBE eyecatcher, Linux's layout) on every CONFIRM
#     LINK, request and response.
# and, RFC 7609 §3.1, see the SMC TCP option (kind 254, ExID E2D4C3D9) on
# the SYN and the SYN-ACK of all 6 connections (libsmcr's BPF program; both
# ends report syn-option bpf).
# Known dissector quirk (Wireshark 4.0): it reads the RToken pairs of ADD
# LINK CONTINUATION from offset 6, the RFC and Linux put them at 8; the
# rkey/address values tshark shows for that message are therefore shifted.
# That does not make the frame malformed and is not checked here.
# smcr-timeout: 180
: "${SMCR_VM_TIMEOUT:=150}"
. "$(dirname "$0")/lib.sh"
requires tshark --version
requires dumpcap --version
vm_requires
S=$abs_top_builddir/tests/bench/smcr-stream
[ -x "$S" ] || fail "$S not built"
vm_start_pair
B1=$(vm_ip B 1)
share=$(vm_share B)
pcap=$share/session.pcapng
port=5000

vm_dumpcap B "-i eth0 -i eth1 -w $pcap"

srv=$(vm_bg B "$S server -p $port -n 6")
vm_listening B "$port"
out=$(vm_run -t 120 A "$S client $B1 -p $port -m verify -n 5 -b 128K -s 32768") ||
    { echo "$out"; fail "client failed"; }
# A 6th connection: ping-pong for a few seconds, while link 2 idles long
# enough for TEST LINK.
lat=$(vm_run -t 120 A "$S client $B1 -p $port -m lat -s 64 -i 2500") ||
    { echo "$lat"; fail "ping-pong connection failed"; }
echo "$lat" | grep '^result'
sout=$(vm_wait -t 60 B "$srv") || { echo "$sout"; fail "server failed"; }
echo "$out" | grep -E '^(client|stats|result)'
echo "$sout" | grep -E '^stats'
echo "$out" | grepq '^result verify smcr 5 131072 ok$' || fail "session data not verified"
echo "$out" | grepq '^client: SMC-R (first contact)' || fail "not an SMC-R session"
echo "$out" | grepq '^client: syn-option bpf$' || fail "client not in syn-option bpf mode"
echo "$sout" | grepq '^server: syn-option bpf$' || fail "server not in syn-option bpf mode"
vm_run B 'kill -INT $(pidof dumpcap)' >/dev/null
vm_wait -t 30 B "$vm_cap" >/dev/null 2>&1
[ -s "$pcap" ] || fail "empty capture"

tsh() { tshark_smc -r "$pcap" "$@" 2>/dev/null; }
# count FILTER FIELD: print "value count" for every occurrence of FIELD.
count() {
    tsh -Y "$1" -T fields -E occurrence=a -E aggregator=, -e "$2" |
        tr ',' '\n' | grep . | sort | uniq -c | awk '{ print $2, $1 }'
}
get() { echo "$1" | awk -v k="$2" '$1 == k { print $2; f = 1 } END { if (!f) print 0 }'; }

bad=0
nframes=$(tsh -T fields -e frame.number | wc -l)
echo "capture: $nframes frames"

# CLC on TCP.
clc=$(count "tcp.port == $port && smc" smc.clc_msg)
echo "CLC messages by type (1 Proposal, 2 Accept, 3 Confirm, 4 Decline):"; echo "$clc"
for t in 1:Proposal 2:Accept 3:Confirm; do
    n=$(get "$clc" "${t%%:*}")
    [ "$n" = 6 ] || { echo "FAIL: $n CLC ${t#*:} messages decoded, 6 sent"; bad=$((bad + 1)); }
done
[ "$(get "$clc" 4)" = 0 ] || { echo "FAIL: a Decline in an SMC-R session"; bad=$((bad + 1)); }
# Every TCP segment with payload on the port carries CLC until SMC-R takes
# over; none may be left undecoded.
undecoded=$(tsh -Y "tcp.port == $port && tcp.len > 0 && !smc" -T fields -e frame.number | wc -l)
[ "$undecoded" = 0 ] || { echo "FAIL: $undecoded TCP segments with payload not decoded as SMC"; bad=$((bad + 1)); }

# The SMC TCP option on every SYN and SYN-ACK of the port.
for seg in "0:SYN" "1:SYN-ACK"; do
    rows=$(tsh -Y "tcp.port == $port && tcp.flags.syn == 1 && tcp.flags.ack == ${seg%%:*}" -T fields -e tcp.options)
    n=$(printf '%s\n' "$rows" | grep -c .)
    with=$(printf '%s\n' "$rows" | grep -c 'fe06e2d4c3d9')
    echo "${seg#*:}: $with of $n with the SMC option"
    [ "$n" -ge 6 ] && [ "$with" = "$n" ] ||
        { echo "FAIL: ${seg#*:}s: $with of $n carry the SMC option, expected all of at least 6"; bad=$((bad + 1)); }
done

# LLC and CDC in RoCEv2 SENDs.
sends=$(tsh -Y 'udp.dstport == 4791 && infiniband.bth.opcode == 4' -T fields -e frame.number | wc -l)
other=$(tsh -Y 'udp.dstport == 4791 && infiniband.bth.opcode <= 5 && infiniband.bth.opcode != 4' -T fields -e frame.number | wc -l)
smc_sends=$(tsh -Y 'udp.dstport == 4791 && infiniband.bth.opcode == 4 && smc.llc_msg' -T fields -e frame.number | wc -l)
writes=$(tsh -Y 'udp.dstport == 4791 && infiniband.bth.opcode >= 6 && infiniband.bth.opcode <= 11' -T fields -e frame.number | wc -l)
echo "RoCEv2: $sends SEND Only frames ($smc_sends decoded as SMC), $other other SEND frames, $writes RDMA WRITE frames"
[ "$sends" -gt 0 ] || { echo "FAIL: no RoCEv2 SEND captured"; bad=$((bad + 1)); }
[ "$smc_sends" = "$sends" ] || {
    echo "FAIL: $((sends - smc_sends)) RoCEv2 SENDs not decoded as SMC:"
    tsh -Y 'udp.dstport == 4791 && infiniband.bth.opcode == 4 && !smc.llc_msg' | head -n 5
    bad=$((bad + 1)); }
[ "$other" = 0 ] || { echo "FAIL: $other SENDs that are not SEND Only (LLC and CDC are one packet each)"; bad=$((bad + 1)); }
llc=$(count 'udp.dstport == 4791 && infiniband.bth.opcode == 4' smc.llc_msg)
echo "LLC/CDC messages by type (1 CONFIRM LINK, 2 ADD LINK, 3 ADD LINK CONT, 4 DELETE LINK, 6 CONFIRM RKEY, 7 TEST LINK, 8 CONFIRM RKEY CONT, 9 DELETE RKEY, 0xfe CDC):"
echo "$llc"
for t in 0x01:2:"CONFIRM LINK (request + reply on link 1)" 0x02:2:"ADD LINK (request + reply)" \
         0x03:2:"ADD LINK CONTINUATION (request + reply)" 0x06:2:"CONFIRM RKEY (request + reply)" \
         0x07:2:"TEST LINK (request + reply)"; do
    IFS=: read -r code min what <<<"$t"
    n=$(get "$llc" "$code")
    [ "$n" -ge "$min" ] || { echo "FAIL: $n $what decoded, expected at least $min"; bad=$((bad + 1)); }
done
# CONFIRM LINK runs on both links (first link, then the added one).
n=$(get "$llc" 0x01)
[ "$n" -ge 4 ] || { echo "FAIL: $n CONFIRM LINK messages, expected 4 (two links)"; bad=$((bad + 1)); }
# Both stacks speak Linux's RMBE layout: every CONFIRM LINK, request and
# response, carries flag 0x03 (no RMBE eyecatcher).
flags=$(tsh -Y 'smc.llc_msg == 0x01' -T fields -e smc.confirm.link.flags)
noeye=0
for f in $flags; do
    [ $((f & 0x03)) = 3 ] && noeye=$((noeye + 1))
done
echo "CONFIRM LINK: $noeye of $(echo "$flags" | grep -c .) with flag 0x03 (no RMBE eyecatcher): $(echo $flags)"
[ "$noeye" -ge 4 ] && [ "$noeye" = "$(echo "$flags" | grep -c .)" ] ||
    { echo "FAIL: CONFIRM LINK without flag 0x03"; bad=$((bad + 1)); }
# Every CDC the stacks sent is on the wire (rxe may resend a lost one).
cdc=$(get "$llc" 0xfe)
sent=0
for st in "$(echo "$out" | grep '^stats client: connections')" "$(echo "$sout" | grep '^stats server: connections')"; do
    [[ $st =~ cdc_sent\ ([0-9]+) ]] || fail "no cdc_sent in: $st"
    sent=$((sent + BASH_REMATCH[1]))
done
echo "CDC: $cdc decoded, the two stacks counted $sent sent"
[ "$cdc" -ge "$sent" ] && [ "$sent" -gt 0 ] ||
    { echo "FAIL: $cdc CDC messages decoded, $sent sent"; bad=$((bad + 1)); }

malformed=$(tsh -Y '_ws.malformed || (smc && _ws.expert.severity >= 0x00600000)')
if [ -n "$malformed" ]; then
    echo "FAIL: tshark reports malformed frames or expert warnings:"
    echo "$malformed" | head -n 20
    tsh -q -z expert | head -n 40
    bad=$((bad + 1))
fi

[ "$bad" -eq 0 ] || fail "$bad problems with tshark's view of the session (capture: $pcap)"
echo "verified: tshark decodes all $((6 * 3)) CLC messages and all $sends LLC/CDC messages ($cdc CDC) of the session as SMC, nothing malformed"
