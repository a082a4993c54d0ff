#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# SMC-Rv2 with the kernel's AF_SMC (Linux 6.1, net/smc) between the two
# guests: both load the patched rdma_rxe (SMCR_VM_RXE=smc) and give AF_SMC
# the PNET ID and user EID of kernel-smc.sh; libsmcr gets the same EID
# (SMCR_EIDS), so both ends propose and accept SMC-Rv2.  dumpcap records
# the CLC streams and the RoCE SENDs on B's NICs.  Each case runs NCONN connections
# of BYTES each way, SHA-256 checked (smcr-stream -m verify):
#   (a) kernel AF_SMC client (A) -> libsmcr server (B), port 5011
#   (b) libsmcr client (A) -> kernel AF_SMC server (B), port 5012
# Pass: every stream verified; libsmcr counts every connection as SMC-R
# (smc = connections, 0 fallbacks); the kernel counts them as SMC-R v2
# successes (smcr_{client,server}_v2_ok) and no fallback; one link group
# on each end carries them all (first contact once, then subsequent);
# tshark finds CLC v2 Proposals, Accepts and Confirms and no Decline, and
# every RoCE SEND is a CDC (Wireshark) or an LLC v2 message
# (contrib/wireshark/smcr-llc-v2.lua), none malformed.
# Two links: the guests boot with SMCR_VM_SUBNET=one (both NICs on
# 10.1.1.0/24, 10.1.1.idx and 10.1.1.(16+idx)), since Linux 6.1 takes a
# second SMC-Rv2 link only on a device whose netdev is on the subnet of the
# group's TCP source address (smc_ib_determine_gid); the kernel's AF_SMC
# has eth1/rxe1 under the PNET ID too.  Then (c) kernel client -> libsmcr
# server and (d) libsmcr client -> kernel server stream open-ended
# (SMCR_KV2_FO_CONNS, default 8, SHA-256 verified) while links fail one at
# a time (fo_cycle below); libsmcr's counters must show two links before
# each cut, the link failing, connections moving and two links again.
# (e): each end aborts in turn (kernel and libsmcr, client and server):
# the other end must see a reset.
# (d) needs libsmcr's late acker on the client (Linux 6.1's server
# otherwise waits forever in smc_llc_delete_link_work), the client's
# DELETE LINK held while it acks (delete_hold_ms), the peer's address
# resolved on the new link's own netdev (eth1 for rxe1 here, not the
# route's eth0), the kernel's ADD LINK held up to 1.5 s while it resolves
# and a REQ ADD LINK of ours after refusing an asymmetric one; (c) needs
# our server without a late acker (6.1's client clears its QP itself) and
# the consumer cursor held at 6.1's rewound producer cursor.  An ADD LINK
# v2 whose RKey list leaves out an RMB in use is refused and asked for
# again, and no connection moves onto a link without an RKey for its
# peer's RMB (tests/vm/README.md, "The kernel peer").  The kernel guest's
# smcr_link_down tracepoint tells who took a kernel link down.
# SMCR_KV2_RMEM=BYTES: libsmcr gets SMCR_RMBE_SIZE=BYTES, and a kernel
# that has net.smc.rmem and net.smc.wmem (Linux 6.11+, SMCR_VM_KERNEL=6.12)
# gets them set to BYTES; in (a) and (b) each libsmcr connection that
# smcr-stream prints (a server prints its first) must then show its own
# RMBE of BYTES and the kernel's RMBE beyond RFC 7609's
# 512 KiB (6.11+) or at most 512 KiB (6.1), and the data must verify.
# Knobs: SMCR_KV2_CONNS (default 16), SMCR_KV2_BYTES (default 8 MiB; 4 MiB
# on 6.12), SMCR_KV2_FO_CONNS (default 8), SMCR_KV2_PARTS (default "ab c d
# e"; "d" alone 24-33 s with the boot; on 6.12 SMCR_KV2_612_PARTS when
# set, which scripts/check.sh makes "ab e"), SMCR_KV2_FO_CUTS (the cuts of (c)
# and (d), of "cable1 cable2 qp-error kernel-down"; default all four on
# 6.1, on 6.12 "cable1 qp-error kernel-down" in (c) and "cable2 qp-error
# kernel-down" in (d): each cable once, whose failover takes 3-4 s there,
# and each other cut in both parts), SMCR_KV2_LLCCAP=1: dumpcap of the RoCE
# SENDs (LLC, CDC) and SMCR_DEBUG=3 for libsmcr in (c)/(d) (the capture
# stays in the kernel guest's share); SMCR_KV2_KLOG=1: both guests' dmesg
# (with a mark and the guest's clock before each cut) and the kernel's
# trace in fo-ID-dmesg.txt, fo-ID-trace.txt of their shares.
# About 2 minutes under TCG on a quiet host (97 s with parts "ab c e",
# 106-127 s with "ab c d e"), 4.5 minutes on a busy one; 2.5 minutes more
# when the module is built.
# smcr-timeout: 1200
: "${SMCR_VM_TIMEOUT:=1140}"
: "${SMCR_KV2_CONNS:=16}"
export SMCR_VM_RXE=smc SMCR_VM_SUBNET=one
. "$(dirname "$0")/lib.sh"
kpeer_requires
# 6.12's run is make check's second kernel: half the bytes in (a)/(b)
# (64 MiB each way per case, still 16 connections and every check), each
# cable pulled once (SMCR_KV2_FO_CUTS).
if vm_kernel_ge 6.12; then
    : "${SMCR_KV2_BYTES:=4194304}"
else
    : "${SMCR_KV2_BYTES:=8388608}"
fi
vm_start_pair 2
B1=$(vm_ip B 1)
share=$(vm_share B)
pcap=$share/kernel-v2.pcapng
nconn=$SMCR_KV2_CONNS
bytes=$SMCR_KV2_BYTES
EID=SMCRBD.KPEER

kpeer_setup A B
rmem=${SMCR_KV2_RMEM:-}
krmem=
if [ -n "$rmem" ]; then
    krmem=1
    for v in A B; do
        vm_run "$v" "sysctl -w net.smc.rmem=$rmem net.smc.wmem=$rmem" || krmem=0
    done
    echo "--- RMBEs: libsmcr's $rmem bytes; the kernels' net.smc.rmem/wmem" \
        "$([ "$krmem" = 1 ] && echo "set to $rmem" || echo "not there (Linux 6.1: at most 512 KiB)")"
fi
# big OUTPUT WHO: with SMCR_KV2_RMEM, libsmcr's WHO offered its own RMBE
# of rmem bytes on every connection and took the kernel's, beyond 512 KiB
# when the kernel's net.smc.rmem was set, else at most 512 KiB.
big() {
    [ -n "$rmem" ] || return 0
    local lines n t
    # smcr-stream's server prints its first connection only, the client all
    lines=$(echo "$1" | grep "^$2: SMC-R (")
    t=$(echo "$lines" | grep -c .)
    n=$(echo "$lines" | awk -v r="$rmem" -v k="$krmem" '{ for (i = 1; i < NF; i++) {
            if ($i == "RMBE" && $(i - 1) != "peer") own = $(i + 1) + 0
            if ($i == "peer" && $(i + 1) == "RMBE") peer = $(i + 2) + 0 }
        if (own == r && ((k == 1) == (peer > 524288))) n++ } END { print n + 0 }')
    echo "  $2: $n of $t connections shown with RMBE $rmem and the kernel's as expected:" \
        "$(echo "$lines" | sed -n 's/.*\(peer RMBE [0-9]*\).*/\1/p' | sort | uniq -c | tr -s ' \n' ' ')"
    [ "$t" -ge 1 ] && [ "$n" = "$t" ] || fail "libsmcr $2: not every connection on the RMBEs expected"
}

# SMCR_KV2_612_PARTS: the default parts on 6.12 (scripts/check.sh: "ab e")
parts="ab c d e"
vm_kernel_ge 6.12 && parts=${SMCR_KV2_612_PARTS:-$parts}
parts=" ${SMCR_KV2_PARTS:-$parts} "
if [[ $parts == *" ab "* ]]; then
# the CLC streams and every RoCE SEND (BTH opcode 4, RC SEND Only: LLC and
# CDC; not the RDMA WRITEs) on both NICs (a -f before the first -i is
# every interface's filter)
# (-B: a 64 MiB kernel buffer per interface, so that a busy TCG guest drops
# nothing)
vm_dumpcap B "-B 64 -f 'tcp portrange 5011-5012 or (udp port 4791 and udp[8] = 4)' -i eth0 -i eth1 -w $pcap"


# ab_fail MSG: both guests' kernel messages and B's smcr_link_down events
# go to ab-dmesg-V.txt and ab-trace.txt in the work dir, their smc and rxe
# lines shown; then fail.
ab_fail() {
    local v
    for v in A B; do
        vm_run -t 30 "$v" 'dmesg' >"$_vm_work/ab-dmesg-$v.txt" 2>&1
        echo "--- $v's kernel messages (whole in $_vm_work/ab-dmesg-$v.txt)"
        grep -iE 'smc|rxe' "$_vm_work/ab-dmesg-$v.txt" | tail -n 15
    done
    vm_run -t 30 B 'cat /sys/kernel/tracing/trace' >"$_vm_work/ab-trace.txt" 2>&1
    echo "--- B's smcr_link_down events (whole in $_vm_work/ab-trace.txt)"
    grep smcr_link_down "$_vm_work/ab-trace.txt" | tail -n 10
    fail "$@"
}
vm_run B 'mount -t tracefs nodev /sys/kernel/tracing 2>/dev/null; echo >/sys/kernel/tracing/trace;
    echo 1 >/sys/kernel/tracing/events/smc/smcr_link_down/enable' >/dev/null 2>&1 ||
    vm_say "no smcr_link_down tracepoint in B"

# stalls VM JOB WHO: libsmcr's stall reports (SMCR_CONN_STALL_MS: a
# connection that waited with nothing moving, its cursors and pending
# state) in a job's output so far, shown.
stalls() {
    local lines
    lines=$(cat "$(vm_share "$1")/out/$2.out" "$(vm_share "$1")/out/$2.err" 2>/dev/null |
        grep -E 'no progress for|link group: [0-9]+ link\(s\) active')
    [ -z "$lines" ] || { echo "--- libsmcr $3's stall reports"; echo "$lines" | tail -n 40; }
}

# run CASE PORT SERVER_TYPE CLIENT_TYPE: one case; sets out/sout.
run() {
    local name=$1 port=$2 st=$3 ct=$4 srv t0 t1
    srv=$(vm_bg B "SMCR_EIDS=$EID ${rmem:+SMCR_RMBE_SIZE=$rmem} exec timeout 400 $S server -t $st -p $port -n $nconn")
    vm_listening B "$port"
    t0=$(date +%s%N)
    out=$(vm_run -t 420 A "SMCR_EIDS=$EID ${rmem:+SMCR_RMBE_SIZE=$rmem} timeout 380 $S client $B1 -t $ct -p $port -m verify -n $nconn -b $bytes -s 65536 2>&1") ||
        { echo "$out"; [ "$st" != smcr ] || stalls B "$srv" server; ab_fail "$name: client failed"; }
    t1=$(date +%s%N)
    sout=$(vm_wait -t 60 B "$srv" 2>&1) || { echo "$sout"; ab_fail "$name: server failed"; }
    echo "--- $name ($(( (t1 - t0) / 1000000 )) ms)"
    echo "$out" | grep -E '^(client|stats|result)' | sed 's/^/  /'
    echo "$sout" | grep -E '^(server: (TCP|SMC|syn)|stats)' | sed 's/^/  /'
    echo "$out" | grepq "^result verify $ct $nconn $bytes ok$" || fail "$name: data not verified"
    [ "$(echo "$sout" | grep -c 'verify ok')" = "$nconn" ] ||
        fail "$name: server did not verify $nconn streams"
}
# ours OUTPUT WHO: libsmcr counted nconn SMC-R connections, no fallback,
# all on one link group, at release 1 (SMC-Rv2.1) with 6.12 and 0 with 6.1.
ours() {
    echo "$1" | grepq "^stats $2: connections $nconn smc $nconn fallbacks 0 link_groups 1 " || {
        echo "--- libsmcr $2's log"; echo "$1" | grep '^smcr\[' | tail -n 40
        ab_fail "libsmcr $2 did not count $nconn SMC-R connections, 0 fallbacks, 1 link group"; }
    [ "$(echo "$1" | grep -c "^$2: SMC-R (first contact)")" = 1 ] ||
        fail "libsmcr $2: not exactly one first contact"
    # the group's release: SMC-Rv2.1 with Linux 6.6+ (6.12), 2.0 with 6.1
    local v21 want=0
    vm_kernel_ge 6.12 && want=1
    v21=$(echo "$1" | sed -n "s/^stats $2: connections .* link_groups_v21 \([0-9]*\).*/\1/p" | tail -n 1)
    echo "  libsmcr $2: link groups at SMC-Rv2.1: ${v21:-?} (want $want on $VM_KSERIES)"
    [ "$v21" = "$want" ] || fail "libsmcr $2: ${v21:-no} link group(s) at SMC-Rv2.1, not $want, with Linux $VM_KSERIES"
}

k0A=$(kstats A) k0B=$(kstats B)
run "(a) kernel AF_SMC client -> libsmcr server, SMC-Rv2" 5011 smcr smc
ours "$sout" server
big "$sout" server
run "(b) libsmcr client -> kernel AF_SMC server, SMC-Rv2" 5012 smc smcr
ours "$out" client
big "$out" client
kA=$(kstats A) kB=$(kstats B)

sleep 1
vm_run B 'kill -INT $(pidof dumpcap)' >/dev/null
capstat=$(vm_wait -t 30 B "$vm_cap" 2>&1)
[ -s "$pcap" ] || fail "empty capture"
echo "--- dumpcap: $(echo "$capstat" | grep -i "packets" | tr -s "\n" " ")"

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
tsh() { tshark_smc -r "$pcap" "$@" 2>/dev/null; }
for port in 5011 5012; do
    c() { tsh -Y "tcp.port == $port && smc.clc_msg == $1" -T fields -e _ws.col.Protocol | grep -c '^SMCv2$'; }
    d=$(tsh -Y "tcp.port == $port && smc.clc_msg == 4" -T fields -e frame.number | wc -l)
    echo "  port $port: v2 Proposals $(c 1), Accepts $(c 2), Confirms $(c 3); Declines $d"
    [ "$(c 1)" = "$nconn" ] && [ "$(c 2)" = "$nconn" ] && [ "$(c 3)" = "$nconn" ] || {
        echo "  per TCP stream (stream: SYN flags, then CLC types and protocols):"
        tsh -Y "tcp.port == $port && (tcp.flags.syn == 1 || smc)" -T fields -e tcp.stream \
            -e tcp.flags.str -e smc.clc_msg -e _ws.col.Protocol |
            awk -F'\t' '{ l[$1] = l[$1] " " ($3 != "" ? $3 "/" $4 : "syn") } END { for (k in l) print "    " k ":" l[k] }' |
            sort -n | head -n 40
        fail "port $port: expected $nconn v2 Proposals, Accepts and Confirms"
    }
    [ "$d" = 0 ] || fail "port $port: a Decline on the wire"
done
mal=$(tsh -Y 'tcp.port in {5011, 5012} && _ws.malformed' -T fields -e frame.number | wc -l)
echo "  malformed CLC frames: $mal"
[ "$mal" = 0 ] || fail "tshark finds $mal malformed frames in the CLC streams"
# LLC and CDC: Wireshark 4.0 decodes CDC and LLC v1; LLC v2 through
# contrib/wireshark/smcr-llc-v2.lua.  Every SEND must be one of them, none
# malformed; both links' CONFIRM LINK v2, an ADD LINK v2 and CONFIRM RKEY
# v2 flows must be there.
lua=$_vm_libdir/../../contrib/wireshark/smcr-llc-v2.lua
if tshark -v 2>/dev/null | grep -q "with Lua"; then
    tshark_smc -X lua_script:"$lua" -r "$pcap" -Y infiniband -T fields -E separator='|' -E occurrence=a \
        -e frame.protocols -e _ws.malformed -e _ws.expert.severity -e smcrv2llc.type \
        >"$_vm_work/roce.txt" 2>/dev/null || fail "tshark could not read the capture with $lua"
    sends=$(wc -l <"$_vm_work/roce.txt")
    cdc=$(grep -c 'infiniband:smc|' "$_vm_work/roce.txt")
    llc=$(grep -c 'infiniband:smcrv2llc|' "$_vm_work/roce.txt")
    other=$(( sends - cdc - llc ))
    bad=$(awk -F'|' '{ n = split($3, s, ","); w = 0
            for (i = 1; i <= n; i++) if (s[i] + 0 >= 6291456) w = 1 }
        $2 != "" || w' "$_vm_work/roce.txt" | wc -l)
    lt() { awk -F'|' -v t="$1" '$4 == t' "$_vm_work/roce.txt" | wc -l; }
    echo "  RoCE SENDs: $sends (CDC $cdc, LLC v2 $llc: CONFIRM LINK $(lt 0x21), ADD LINK $(lt 0x22)," \
        "CONFIRM RKEY $(lt 0x26), DELETE RKEY $(lt 0x29), TEST LINK $(lt 0x27)), other $other, malformed or warned $bad"
    [ "$other" = 0 ] && [ "$bad" = 0 ] || fail "tshark: $other SENDs neither CDC nor LLC v2, $bad malformed or warned"
    [ "$cdc" -ge "$(( 4 * nconn ))" ] || fail "tshark: only $cdc CDC messages"
    [ "$(lt 0x21)" -ge 4 ] && [ "$(lt 0x22)" -ge 2 ] && [ "$(lt 0x26)" -ge 4 ] ||
        fail "tshark: CONFIRM LINK v2 (>= 4), ADD LINK v2 (>= 2) or CONFIRM RKEY v2 (>= 4) missing"
else
    echo "  (this tshark has no Lua: LLC v2 not decoded)"
fi
cp "$pcap" "$_vm_work/kernel-v2.pcapng"
fi

# ---- (c), (d): failover with the kernel peer ---------------------------------
# OURS is the libsmcr end, KERN the kernel's.  Open-ended verified streams;
# cuts one at a time, each with two links up before it:
#   cable L      both ends of link L pulled (qemu set_link), then back
#   qp-error     our QP on rxe0 forced into error (smcr_fault fail-dev)
#   kernel-down  "ip link set eth1 down" in the kernel's guest, then up: the
#                kernel's port goes down (IB_EVENT_PORT_ERR); it has no
#                way to force a single QP into error from user space, so
#                this is its nearest equivalent, not a QP error; the heal
#                (vm_ifup) puts back eth1's /28 route too, which the down
#                removed: without it the guest routes the second link's
#                peer through eth0
# Our counters (ticks) must show each link fail, its connections move, and
# a second link again after the heal (added by whichever end's turn it is).
# A link leaves either by failing here (link_failures) or by the kernel's
# DELETE LINK when the kernel noticed first: both count, by links_active.
fo_summary=()
# fo_fail MSG: stop the LLC capture (SMCR_KV2_LLCCAP) so that it is whole, fail.
# The kernel's guest's blocked tasks and messages go to kern-dmesg.txt in its
# share; its last smc lines are shown.
fo_fail() {
    local km
    [ -z "${cap:-}" ] || vm_run "$kern" 'kill -INT $(pidof dumpcap); sleep 1' >/dev/null 2>&1
    km=$(vm_share "$kern")/kern-dmesg.txt
    vm_run -t 30 "$kern" 'echo w >/proc/sysrq-trigger; dmesg' >"$km" 2>&1
    echo "--- the kernel's messages ($kern, whole in $km)"
    grep -i smc "$km" | tail -n 20
    vm_run -t 30 "$kern" 'cat /sys/kernel/tracing/trace' >"${km%dmesg.txt}trace.txt" 2>&1
    echo "--- the kernel's smcr_link_down events (who took a link down; whole in ${km%dmesg.txt}trace.txt)"
    grep smcr_link_down "${km%dmesg.txt}trace.txt" | tail -n 20
    fail "$@"
}
# carrier_watch start|stop WHAT (SMCR_KV2_KLOG=1): each guest logs, from
# the cut on, its clock whenever a NIC's carrier or an rxe port's state
# changes (busybox builtins, every 20 ms); stop prints when each went down
# after the cut, by the guest's own clock (the guest kernel's share of a
# failover: virtio's carrier, then rxe's port event).
carrier_watch() {
    local v f
    for v in A B; do
        f=/tmp/carrier-watch
        if [ "$1" = start ]; then
            vm_run "$v" "rm -f $f.stop; read u _ </proc/uptime; echo \"cut \$u\" >$f.log
                (p=; while [ ! -e $f.stop ]; do
                    s=; for n in /sys/class/net/eth*; do c=x; read c <\$n/carrier 2>/dev/null; s=\"\$s \${n##*/}=\$c\"; done
                    for d in /sys/class/infiniband/*; do read st _ <\$d/ports/1/state; s=\"\$s \${d##*/}=\$st\"; done
                    [ \"\$s\" = \"\$p\" ] || { read u _ </proc/uptime; echo \"\$u\$s\" >>$f.log; p=\$s; }
                    usleep 20000; done) >/dev/null 2>&1 &" >/dev/null
        else
            vm_run "$v" "touch $f.stop; sleep 0.1; cp $f.log $(vm_share "$v")/carrier-watch.log 2>/dev/null; cat $f.log" 2>/dev/null |
                awk -v who="$v" -v what="$2" '
                    $1 == "cut" { t0 = $2; next }
                    { for (i = 2; i <= NF; i++) {
                        split($i, kv, "="); k = kv[1]; val = kv[2]
                        off = k ~ /^eth/ ? (val == "0" || val == "x") : val == "1:"
                        if ((k in seen) && off && !(k in down)) down[k] = $1 - t0
                        seen[k] = val } }
                    END { s = ""; for (k in down) s = s sprintf(" %s down %.0f ms", k, down[k] * 1000)
                          printf "  %s %s: by the guest clock after the cut:%s\n", who, what,
                              (s == "" ? " nothing went down" : s) }'
        fi
    done
}
# kern_qp_refusals: how many times the kernel's guest's rdma_rxe has
# refused a QP change so far (its dmesg).
kern_qp_refusals() {
    vm_run -t 30 "$kern" "dmesg | grep -c 'rxe_modify_qp: returned err = -22'" 2>/dev/null | tr -dc 0-9 || true
}
fo_cycle() {
    local what=$1 cut=$2 heal=$3 fa foa aa t0 t1 t2 kq0
    until_ok 60 "[ \$(tf $T 8) = 2 ]" || fo_fail "$what: not two links before the cut ($(tail -n 1 $T))"
    fa=$(tf $T 6) foa=$(tf $T 5) aa=$(tf $T 7)
    # SMCR_KV2_KLOG=1: a mark with the guest's clock in both kernels' logs
    # just before the cut (dmesg and the trace are saved after the part)
    [ "${SMCR_KV2_KLOG:-0}" = 1 ] &&
        vm_run A 'echo "smcrbd: cut at $(date +%s.%N)" >/dev/kmsg' >/dev/null &&
        vm_run B 'echo "smcrbd: cut at $(date +%s.%N)" >/dev/kmsg' >/dev/null
    [ "${SMCR_KV2_KLOG:-0}" = 1 ] && carrier_watch start
    kq0=$(kern_qp_refusals)
    t0=$(date +%s%N)
    eval "$cut" >/dev/null || fo_fail "$what: '$cut' failed"
    # the link fails here, or the kernel saw it first and deleted it
    until_ok 30 "[ \$(tf $T 6) -gt $fa ] || [ \$(tf $T 8) -lt 2 ]" ||
        fo_fail "$what: libsmcr lost no link ($(tail -n 1 $T))"
    t1=$(date +%s%N)
    [ "${SMCR_KV2_KLOG:-0}" = 1 ] && carrier_watch stop "$what"
    eval "$heal" >/dev/null || fo_fail "$what: '$heal' failed"
    local back="two links again"
    if ! until_ok 90 "[ \$(tf $T 8) = 2 ] && [ \$(tf $T 7) -gt $aa ]"; then
        # Linux 6.12's rdma_rxe, after its port came back, may refuse the
        # kernel's own new QPs (EINVAL from rxe_modify_qp, every 2.5 s as
        # the kernel retries): no link can come back, whatever we do.
        # Only that, as the last cut of a part, is let through: the
        # streams go on verified over the one link.
        local refused
        refused=$(kern_qp_refusals)
        [ "$refused" -gt "${kq0:-0}" ] && [ "$what" = "$last_cut" ] ||
            fo_fail "$what: no second link again after the heal ($(tail -n 1 $T))"
        back="no second link: $kern's rdma_rxe refused its own QPs $(( refused - kq0 )) times (rxe_modify_qp EINVAL)"
        vm_say "$what: $back; the streams go on over one link"
    fi
    t2=$(date +%s%N)
    [ "$(tf $T 5)" -gt "$foa" ] || fo_fail "$what: no connection moved (failovers $foa -> $(tf $T 5))"
    fo_summary+=("$what: failed over after $(( (t1 - t0) / 1000000 )) ms, $back $(( (t2 - t1) / 1000000 )) ms after the heal, $(( $(tf $T 5) - foa )) connection(s) moved")
    vm_say "${fo_summary[-1]}"
}
# fo ID NAME PORT OURS KERN: KERN's end is the client when OURS is B.
fo() {
    local id=$1 name=$2 port=$3 ours=$4 kern=$5 srv cli share sout cout n=$SMCR_KV2_FO_CONNS kt
    share=$(vm_share "$ours")
    T=$share/fo-$id.ticks C=$share/fo-$id.ctl
    : >"$C"
    local dbg=
    cap=
    if [ "${SMCR_KV2_LLCCAP:-0}" = 1 ]; then
        dbg="SMCR_DEBUG=3 "
        vm_dumpcap "$kern" "-i eth0 -i eth1 -f 'udp port 4791 and udp[8] = 4' -w $(vm_share "$kern")/fo-$id-llc.pcapng"
        cap=$vm_cap
    fi
    # the kernel's smcr_link_down tracepoint: its location is the caller
    # that took a link down (fo_fail shows them)
    vm_run "$kern" 'mount -t tracefs nodev /sys/kernel/tracing 2>/dev/null; echo >/sys/kernel/tracing/trace;
        echo 1 >/sys/kernel/tracing/events/smc/smcr_link_down/enable' >/dev/null 2>&1 ||
        vm_say "no smcr_link_down tracepoint in $kern"
    if [ "$ours" = B ]; then
        srv=$(vm_bg B "${dbg}SMCR_EIDS=$EID exec timeout 600 $S server -t smcr -p $port -n $n --ctl $C --ticks $T")
        vm_listening B "$port"
        cli=$(vm_bg A "exec timeout 580 $S client $B1 -t smc -p $port -m verify -b 0 -n $n -s 16K")
    else
        srv=$(vm_bg B "exec timeout 600 $S server -t smc -p $port -n $n")
        vm_listening B "$port"
        cli=$(vm_bg A "${dbg}SMCR_EIDS=$EID exec timeout 580 $S client $B1 -t smcr -p $port -m verify -b 0 -n $n -s 16K --ctl $C --ticks $T")
    fi
    until_ok 60 "[ \$(tf $T 8) = 2 ] && [ \$(tf $T 3) -gt 1000000 ]" ||
        fail "$name: no two links with data flowing after 60 s ($(tail -n 1 $T 2>/dev/null))"
    local cuts=" ${SMCR_KV2_FO_CUTS:-cable1 cable2 qp-error kernel-down} "
    if [ -z "${SMCR_KV2_FO_CUTS:-}" ] && vm_kernel_ge 6.12; then
        [ "$id" = c ] && cuts=" cable1 qp-error kernel-down " || cuts=" cable2 qp-error kernel-down "
    fi
    [[ $cuts == *" cable1 "* ]] && fo_cycle "$name cable 1" "vm_cable 1 off" "vm_cable 1 on"
    [[ $cuts == *" cable2 "* ]] && fo_cycle "$name cable 2" "vm_cable 2 off" "vm_cable 2 on"
    [[ $cuts == *" qp-error "* ]] && fo_cycle "$name qp-error (libsmcr, rxe0)" "echo 'fault fail-dev=rxe0' >>$C" ":"
    last_cut=
    [[ $cuts == *" kernel-down "* ]] && last_cut="$name kernel-down ($kern eth1)"
    [[ $cuts == *" kernel-down "* ]] &&
        fo_cycle "$name kernel-down ($kern eth1)" "vm_run $kern 'ip link set eth1 down'" "vm_ifup $kern 2"
    fo_summary+=("$name: cuts${cuts% }")
    vm_run A 'kill -USR1 $(pidof smcr-stream)' >/dev/null
    [ -z "$cap" ] || vm_run "$kern" 'kill -INT $(pidof dumpcap)' >/dev/null
    local crc=0 src=0
    cout=$(vm_wait -t 120 A "$cli" 2>&1) || crc=1
    sout=$(vm_wait -t 60 B "$srv" 2>&1) || src=1
    if [ $crc = 1 ] || [ $src = 1 ]; then
        # each end's verdict per connection (stdout), then its log (stderr)
        echo "--- client (A)"; echo "$cout" | grep -E '^(client|server|result)[: ]' | tail -n 20
        echo "$cout" | grep -vE '^(client|server|result|stats|receiving)[: ]' | tail -n 30
        echo "--- server (B)"; echo "$sout" | grep -E '^(client|server|result)[: ]' | tail -n 20
        echo "$sout" | grep -vE '^(client|server|result|stats|receiving)[: ]' | tail -n 30
        if [ "$ours" = B ]; then stalls B "$srv" server; else stalls A "$cli" client; fi
        [ $crc = 0 ] || fo_fail "$name: client failed"
        fo_fail "$name: server failed"
    fi
    echo "$cout" | grep -E '^(client|stats|result)' | sed "s/^/  A $name: /"
    echo "$sout" | grep -E '^stats' | sed "s/^/  B $name: /"
    echo "$cout" | grepq "^client: $n of $n connection(s) verified" || fail "$name: client: not $n of $n verified"
    echo "$cout" | grepq "^result verify [a-z]* $n 0 ok$" || fail "$name: the client's result is not ok"
    [ "$(echo "$sout" | grep -c 'verify ok')" = "$n" ] || fail "$name: the server did not verify $n streams"
    st=$( (echo "$cout"; echo "$sout") | grep '^stats [a-z]*: connections' | tail -n 1)
    # A connection opened while the kernel adds its second link may be
    # declined by the kernel's client with "buffer registration failed"
    # (0x09990003: registering its new RMB on every link failed) and
    # fall back to TCP: reported, allowed; any other fallback is not.
    fb=$( (echo "$cout"; echo "$sout") | grep '^stats [a-z]*: fallback reason' | sed 's/^stats [a-z]*: //')
    [ -z "$fb" ] || fo_summary+=("$name: TCP fallbacks: $(echo "$fb" | tr '\n' ';')")
    echo "$fb" | grep -v '^$' | grepq -v '0x09990003' && fail "$name: a fallback other than the kernel's 0x09990003: $fb"
    if [ "${SMCR_KV2_KLOG:-0}" = 1 ]; then
        vm_run -t 30 A 'dmesg' >"$(vm_share A)/fo-$id-dmesg.txt" 2>&1
        vm_run -t 30 B 'dmesg' >"$(vm_share B)/fo-$id-dmesg.txt" 2>&1
        vm_run -t 30 "$kern" 'cat /sys/kernel/tracing/trace' >"$(vm_share "$kern")/fo-$id-trace.txt" 2>&1
    fi
    kt=$(vm_run "$kern" 'cat /sys/kernel/tracing/trace' 2>/dev/null | grep -o 'location=[^ ]*' |
        sed 's/^location=//; s/+0x.*//' | sort | uniq -c | tr -s ' \n' ' ')
    fo_summary+=("$name: the kernel's link downs (smcr_link_down) by caller:${kt:- none}")
    fo_summary+=("$name: $n/$n streams verified both ways, no reset; libsmcr: $(echo "$st" | grep -oE '(connections|smc|fallbacks|link_failures|links_deleted|failovers|links_added|rebalanced) [0-9]+' | tr '\n' ' ')")
}
: "${SMCR_KV2_FO_CONNS:=8}"
[[ $parts == *" c "* ]] && fo c "(c) kernel client -> libsmcr server, failover" 5013 B A
[[ $parts == *" d "* ]] && fo d "(d) libsmcr client -> kernel server, failover" 5014 A B
echo "--- failover with the kernel peer"
printf '  %s\n' "${fo_summary[@]}"

# ---- (e): abort from either side ------------------------------------------
# Two open-ended streams each way; once data flows on both, each way, and
# 1 s more, the aborting end gets SIGUSR2:
# smcr-stream stops reading, waits 0.5 s and aborts, smcr_abort() in
# libsmcr, shutdown() with data unread in the kernel (which smc_close_final
# sends as peer_conn_abort).  The other end must see "Connection reset by
# peer" on both connections (an error, not an end of stream), and the
# libsmcr end hold no connection or buffer afterwards.
ab_summary=()
# ab NAME PORT SERVER_TYPE CLIENT_TYPE ABORTER(client|server)
ab() {
    local name=$1 port=$2 st=$3 ct=$4 who=$5 srv cli cout sout crc src abo peer ours n=2 t0 t1
    srv=$(vm_bg B "SMCR_EIDS=$EID exec timeout 200 $S server -t $st -p $port -n $n")
    vm_listening B "$port"
    cli=$(vm_bg A "SMCR_EIDS=$EID exec timeout 190 $S client $B1 -t $ct -p $port -m verify -b 0 -n $n -s 16K")
    # data flowing on every connection both ways, then 1 s more
    vm_wait_out A "$cli" '^receiving client conn [0-9]+$' 60 "$n" &&
        vm_wait_out B "$srv" '^receiving server conn [0-9]+$' 60 "$n" ||
        fail "$name: not all $n connections carried data after 60 s"
    sleep 1
    t0=$(date +%s%N)
    if [ "$who" = client ]; then vm_run A 'kill -USR2 $(pidof smcr-stream)' >/dev/null
    else vm_run B 'kill -USR2 $(pidof smcr-stream)' >/dev/null; fi
    cout=$(vm_wait -t 150 A "$cli" 2>&1); crc=$?
    sout=$(vm_wait -t 150 B "$srv" 2>&1); src=$?
    t1=$(date +%s%N)
    [ "$crc" = 1 ] && [ "$src" = 1 ] || {
        echo "$cout" | tail -n 20; echo "$sout" | tail -n 20
        fail "$name: client and server should both end with 1, not $crc and $src"; }
    if [ "$who" = client ]; then abo=$cout peer=$sout; else abo=$sout peer=$cout; fi
    if [ "$st" = smcr ]; then ours=$sout; else ours=$cout; fi
    echo "$abo$nl$peer" | grep -E '(aborted|Connection reset|verify FAIL|stream ended)' | sed "s/^/  $name: /"
    [ "$(echo "$abo" | grep -cE "^$who: conn [0-9]+ aborted")" = "$n" ] ||
        fail "$name: the $who did not abort its $n connections"
    # a server says so per stream on stdout (and again on stderr), a
    # client on stderr only
    if [ "$who" = client ]; then rst='^server: conn [0-9]+ verify FAIL.*: Connection reset by peer$'
    else rst='^smcr-stream: connection [0-9]+: Connection reset by peer$'; fi
    [ "$(echo "$peer" | grep -cE "$rst")" = "$n" ] ||
        fail "$name: the peer did not see a reset on all $n connections"
    st_line=$(echo "$ours" | grep '^stats [a-z]*: connections' | tail -n 1)
    echo "$st_line" | grepq "connections $n smc $n fallbacks 0 " || fail "$name: libsmcr: not $n SMC-R connections: $st_line"
    echo "$st_line" | grepq 'open_connections 0 rmbes_in_use 0 sndbufs_in_use 0' ||
        fail "$name: libsmcr holds a connection or buffer: $st_line"
    ab_summary+=("$name: $n/$n reset at the peer, $(( (t1 - t0) / 1000000 )) ms from the signal to both ends done; libsmcr holds nothing")
}
nl=$'\n'
if [[ $parts == *" e "* ]]; then
    ab "(e) kernel client aborts, libsmcr server" 5021 smcr smc client
    ab "(e) libsmcr server aborts, kernel client" 5022 smcr smc server
    ab "(e) libsmcr client aborts, kernel server" 5023 smc smcr client
    ab "(e) kernel server aborts, libsmcr client" 5024 smc smcr server
    echo "--- abort with the kernel peer"
    printf '  %s\n' "${ab_summary[@]}"
fi

# what the parts that ran verified
said=
[[ $parts == *" ab "* ]] && said+="; (a)/(b) $nconn x $bytes bytes each way per case, SHA-256 verified, all SMC-Rv2, no fallback, one link group each"
[[ $parts == *" c "* || $parts == *" d "* ]] && said+="; (c)/(d) failover with $SMCR_KV2_FO_CONNS streams verified, no reset (cable pulls, a QP error forced in libsmcr, the kernel's port down)"
[[ $parts == *" e "* ]] && said+="; (e) abort from either end seen as a reset by the other"
echo "PASS: SMC-Rv2 with the kernel, parts${parts% }${said:+:${said#;}}"
vm_quit A B
exit 0
