#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# The kernel peer: Linux AF_SMC to Linux AF_SMC between the two guests over
# SMC-Rv2.  The guests load rdma_rxe built with rxe-smc-fixes.patch
# (SMCR_VM_RXE=smc); both get PNET ID SMCRBD for eth0/rxe0 and eth1/rxe1
# port 1 and the user EID SMCRBD.KPEER (smc-nl).  dumpcap records both of
# B's NICs while A opens 3 AF_SMC connections to B, each sending 1 MiB both
# ways, checked with SHA-256 (smcr-stream -t smc -m verify).  Then:
#   - the kernel's counters (smc-nl stats / fallbacks): 3 SMC-Rv2
#     connections on each side, none v1, no fallback, no handshake error;
#   - the capture: 3 CLC Proposals, Accepts and Confirms of version 2 and
#     no Decline; LLC CONFIRM LINK (request and response) on the RoCEv2
#     link; whether the kernel added a second link by itself (ADD LINK,
#     traffic on eth1) is reported, not required.
# The CLC and LLC messages of the capture are written to
# kernel-smc.d/vectors.txt (hex, one message a line): tests/vectors/ keeps
# such a capture as reference for the SMC-Rv2 codec.
# The guests are powered off through QMP at the end, never shut down: a
# kernel SMC client whose link group dies can hang in D state.
# About 16 s (25 s more the first time: the module is built).
# smcr-timeout: 240
: "${SMCR_VM_TIMEOUT:=200}"
export SMCR_VM_RXE=smc
. "$(dirname "$0")/lib.sh"
requires tshark --version
requires dumpcap --version
vm_requires
S=$abs_top_builddir/tests/bench/smcr-stream
N=$abs_top_builddir/tests/bench/smc-nl
for p in "$S" "$N"; do [ -x "$p" ] || fail "$p not built"; done
modprobe -S "$VM_KVER" -n smc >/dev/null 2>&1 || skip "kernel $VM_KVER has no module smc"
vm_start_pair
B1=$(vm_ip B 1)
share=$(vm_share B)
pcap=$share/kernel-smc.pcapng
port=5000
nconn=3

for v in A B; do
    vm_run "$v" "modprobe smc && $N pnet-add SMCRBD eth0 rxe0 1 && $N pnet-add SMCRBD eth1 rxe1 1 &&
        $N ueid-add SMCRBD.KPEER && $N info" | sed "s/^/$v: /"
    [ "${PIPESTATUS[0]}" = 0 ] || fail "AF_SMC setup failed on $v"
done
vm_run A 'echo "A: $(grep ^rdma_rxe /proc/modules), kernel tainted $(cat /proc/sys/kernel/tainted)"'

vm_dumpcap B "-i eth0 -i eth1 -w $pcap"

srv=$(vm_bg B "exec timeout 90 $S server -t smc -p $port -n $nconn")
vm_listening B "$port"
out=$(vm_run -t 100 A "timeout 80 $S client $B1 -t smc -p $port -m verify -n $nconn -b 1M -s 32768 2>&1")
crc=$?
echo "$out" | grep -E '^(client|result)'
sout=$(vm_wait -t 30 B "$srv" 2>&1) || { echo "$sout"; fail "AF_SMC server failed"; }
[ "$crc" = 0 ] || { echo "$out" | tail -n 5; fail "AF_SMC client failed ($crc)"; }
echo "$out" | grepq "^result verify smc $nconn 1048576 ok$" || fail "stream not verified"

# Link group state while it idles (the kernel keeps it ~10 min).
sleep 2
vm_run B 'kill -INT $(pidof dumpcap)' >/dev/null
vm_wait -t 30 B "$vm_cap" >/dev/null 2>&1
[ -s "$pcap" ] || fail "empty capture"

# The kernel's counters.
declare -A st
for v in A B; do
    s=$(vm_run "$v" "$N stats; $N fallbacks") || fail "smc-nl stats on $v failed"
    echo "$s" | sed "s/^/$v: /"
    st[$v]=$s
done
get() { echo "${st[$1]}" | awk -v k="$2" '$1 == k { v = $2 } END { print v + 0 }'; }
[ "$(get A smcr_client_v2_ok)" = "$nconn" ] || fail "A: smcr_client_v2_ok is not $nconn"
[ "$(get B smcr_server_v2_ok)" = "$nconn" ] || fail "B: smcr_server_v2_ok is not $nconn"
for v in A B; do
    for k in smcr_client_v1_ok smcr_server_v1_ok client_handshake_errors server_handshake_errors; do
        [ "$(get $v $k)" = 0 ] || fail "$v: $k is $(get $v $k)"
    done
    echo "${st[$v]}" | grepq '^fallback ' && fail "$v: the kernel counted fallbacks"
done
[ "$(get A smcr_tx_bytes)" -ge $((nconn * 1048576)) ] ||
    fail "A: smcr_tx_bytes $(get A smcr_tx_bytes) < $((nconn * 1048576))"

# The capture.
tsh() { tshark_smc -r "$pcap" "$@" 2>/dev/null; }
ctype() { tsh -Y "smc.clc_msg == $1 && tcp.port == $port" -T fields -e frame.number | wc -l; }
echo "capture: $(tsh -T fields -e frame.number | wc -l) frames," \
    "$(tsh -Y 'udp.port == 4791 && frame.interface_id == 1' | wc -l) RoCEv2 on eth1"
nprop=$(ctype 1) nacc=$(ctype 2) nconf=$(ctype 3) ndecl=$(ctype 4)
echo "CLC: $nprop Proposal, $nacc Accept, $nconf Confirm, $ndecl Decline"
[ "$nprop" = "$nconn" ] && [ "$nacc" = "$nconn" ] && [ "$nconf" = "$nconn" ] ||
    fail "expected $nconn CLC Proposals, Accepts and Confirms"
[ "$ndecl" = 0 ] || fail "a CLC Decline was sent"
# The CLC header's version nibble (byte 7: version << 4 | flags).
vers=$(tsh -Y "smc.clc_msg && tcp.port == $port" -T fields -e tcp.payload |
           awk '{ print substr($1, 15, 1) }' | sort | uniq -c | awk '{ printf "%s x v%s ", $1, $2 }')
echo "CLC versions: $vers"
case $vers in "$((3 * nconn)) x v2 ") ;; *) fail "not every CLC message is version 2: $vers" ;; esac
[ "$(tsh -Y "tcp.port == $port && smc.clc_msg && _ws.malformed" | wc -l)" = 0 ] ||
    fail "tshark finds a malformed CLC message"
# RoCEv2 SEND Only frames carry LLC and CDC messages (RDMA WRITEs the data).
# By the first byte after the 12-byte BTH: 0xfe CDC, 0x2N LLC v2 (Wireshark
# 4.0 knows only LLC v1: it calls CONFIRM LINK and ADD LINK v2 malformed).
# "type:r" is a response (flag 0x80 in byte 3); "-rej" an ADD LINK reject.
sends=$(tsh -Y 'udp.port == 4791 && infiniband.bth.opcode == 4' -T fields \
            -e frame.interface_id -e ip.src -e udp.payload |
        awk '{ t = substr($3, 25, 2); f = index("0123456789abcdef", substr($3, 31, 1)) - 1
               k = (t == "fe") ? "cdc" : "0x" t (f >= 8 ? ":r" : "") ((t == "22" && f % 8 >= 4) ? "-rej" : "")
               print "eth" $1, $2, k }' | sort | uniq -c)
echo "RoCEv2 SENDs (count, NIC, source, message):"; echo "$sends" | sed 's/^/  /'
nsend() { echo "$sends" | awk -v s="$1" -v k="$2" '$3 ~ s && $4 == k { n += $1 } END { print n + 0 }'; }
[ "$(nsend 10.1.1.2 0x21)" = 1 ] && [ "$(nsend 10.1.1.1 0x21:r)" = 1 ] ||
    fail "expected one CONFIRM LINK v2 request (B) and response (A)"
[ "$(nsend . cdc)" -gt 0 ] || fail "no CDC message"
echo "$sends" | awk '$4 ~ /^0x0/' | grepq . && fail "an LLC v1 message on an SMC-Rv2 link group"
if [ "$(nsend 10.1.1.1 0x22:r)" -gt 0 ]; then
    echo "ADD LINK v2: B offered a second link, A accepted"
elif [ "$(nsend 10.1.1.1 0x22:r-rej)" -gt 0 ]; then
    echo "ADD LINK v2: B offered a second link, A rejected it: one link"
else
    echo "no ADD LINK: the link group kept one link"
fi

# Reference vectors: every CLC message (TCP payload), every LLC message and
# the first 8 CDC messages (RoCEv2 SEND payloads: after the 12-byte BTH,
# without the 4-byte ICRC).
{
    echo "# kernel-smc.sh: frame interface(0=eth0,1=eth1) source kind hex"
    tsh -Y "smc && tcp.port == $port && tcp.len > 0" -T fields -e frame.number \
        -e frame.interface_id -e ip.src -e smc.clc_msg -e tcp.payload |
        awk '{ printf "%s %s %s CLC%s %s\n", $1, $2, $3, $4, $5 }'
    tsh -Y 'udp.port == 4791 && infiniband.bth.opcode == 4' -T fields -e frame.number \
        -e frame.interface_id -e ip.src -e udp.payload |
        awk '{ p = substr($4, 25, length($4) - 32); t = substr(p, 1, 2)
               if (t == "fe" && ++cdc > 8) next
               printf "%s %s %s %s %s\n", $1, $2, $3, (t == "fe" ? "CDC" : "LLC0x" t), p }'
} | sort -n >"$_vm_work/vectors.txt"
# A small capture of the same: SYNs, CLC, LLC and the first 4 CDC frames.
cdc4=$(tsh -Y 'udp.port == 4791 && infiniband.bth.opcode == 4 && udp.payload[12] == fe' \
           -T fields -e frame.number | head -n 4 | paste -sd, -)
tsh -Y "(tcp.port == $port && (tcp.flags.syn == 1 || smc.clc_msg)) ||
        (udp.port == 4791 && infiniband.bth.opcode == 4 && udp.payload[12] != fe) ||
        frame.number in {$cdc4}" -w "$_vm_work/kernel-smc-ref.pcapng" ||
    fail "cannot write the reference capture"
echo "vectors: $_vm_work/vectors.txt ($(wc -l <"$_vm_work/vectors.txt") lines)," \
    "$_vm_work/kernel-smc-ref.pcapng ($(tshark -r "$_vm_work/kernel-smc-ref.pcapng" 2>/dev/null | wc -l) frames)"

vm_quit A B
exit 0
