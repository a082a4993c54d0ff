#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# SMC-R failover under load in the rxe lane (libsmcr through smcr-stream):
#  1. 16 connections stream both ways (every byte pattern-checked, SHA-256
#     compared at the end) while links fail and come back, FO_CYCLES times
#     per link and method:
#       cable        qemu set_link off/on on both hosts (a pulled cable)
#       ifdown       "ip link set ethN down/up" in A
#       rdma-delete  "rdma link delete rxeN" and "rdma link add", in A and
#                    in B (the server) by turns
#       qp-error     the link's QP forced into error (smcr_fault fail-dev=
#                    through the tool's control file)
#     then netem 5% loss on link 1 for a while.  After every cut both sides lost
#     the link and moved its connections (link_failures and failovers
#     grow), then have two links again (links_added grows) and spread the
#     connections over them (rebalanced grows).  At the end: no connection
#     reset, every checksum equal.
#  2. Detection times, measured inside A from the cut to the failover: port
#     down (cable pulled, from the carrier loss that "ip monitor" reports)
#     and silent loss (netem 100% on one NIC, port up; then smcr_fault
#     "drop") under load and on an idle group (TEST LINK); the throughput
#     dip around the cable pull; an injected 200 ms delay, and a 500 ms
#     drop ended by "undrop", fail no link and move no connection.
#  3. Both links down longer than the timeouts: connections end with an
#     error, the processes do not hang, buffers are freed, and the next
#     connection builds a new link group.
#  4. Asymmetric group: B's two NICs bridged under one RNIC (rxe0 on br0),
#     A with two; A's links fail (cable, ifdown) and come back.
#  5. Pauses: qemu stops B's guest (SMCR_FO_PAUSE_VM=A: A's) for
#     SMCR_FO_PAUSE s (default 10; a live migration's blackout), then B's server is SIGSTOPped for SMCR_FO_STOP
#     s (default 3): no connection reset, no link group ended, data again
#     within SMCR_FO_PAUSE_BACK_MS (default 2000) of the cont; the SIGSTOP's
#     time to data is measured.  The default QP timing (ACK timeout 19: RC
#     retries end after ~15 s) lets a 10 s pause through (at 17, ~3.8 s, a
#     5 s pause reset all 8 connections).  Then B's server is killed
#     (SIGKILL) under 2 streams: A must reset both connections within
#     SMCR_FO_KILL_RESET_MS (default 3000) and end the group within
#     SMCR_FO_KILL_MS (default 8000) of the kill, on the guests' clocks
#     (the dead process's TCP sockets tell A it is gone: a connection
#     whose TCP ended with no SMC close and whose links stay silent 1 s
#     is reset, and the last link does not wait out the ~16 s a stopped
#     peer gets).
# FO_CYCLES (SMCR_FO_CYCLES, default 2: 16 cuts, 2 per link and method;
# a cut and its heal take 8-15 s under TCG, the link coming back several
# seconds after its cable; 3 (24 cuts, 550 s for the whole test on the
# busy 2-core machine) and before that 10 were the default until CI's
# hour got short: the soak (vm/soak.sh) puts 40 faults of every kind
# through the block stack in make check too).
# SMCR_FO_PHASES (default "1 2 3 4 5") runs some of the parts only.
# smcr-timeout: 1800
: "${SMCR_VM_TIMEOUT:=1740}"
. "$(dirname "$0")/lib.sh"
vm_requires
S=$abs_top_builddir/tests/bench/smcr-stream
[ -x "$S" ] || fail "$S not built"
cycles=${SMCR_FO_CYCLES:-2}
phases=" ${SMCR_FO_PHASES:-1 2 3 4 5} "
vm_start_pair
SA=$(vm_share A) SB=$(vm_share B)
summary=()

now_ms() { echo $(( ${EPOCHREALTIME/./} / 1000 )); }

# qmp_link_timed NAME LINK on|off: set_link, print the host time at which
# qemu had done it (its reply).
qmp_link_timed() {
    local up=false
    [ "$3" = on ] && up=true
    python3 - "${_vm_sock[$1]}" "$2" "$up" <<'PYEOF'
import json, socket, sys, time
s = socket.socket(socket.AF_UNIX)
s.settimeout(10)
s.connect(sys.argv[1])
f = s.makefile("rw")
def reply():
    while True:
        m = json.loads(f.readline())
        if "event" not in m:
            return m
reply()
f.write('{"execute": "qmp_capabilities"}\n'); f.flush()
reply()
f.write(json.dumps({"execute": "set_link", "arguments": {"name": "link" + sys.argv[2], "up": sys.argv[3] == "true"}}) + "\n"); f.flush()
r = reply()
print("%.6f" % time.time())
sys.exit(1 if "error" in r else 0)
PYEOF
}

# stream NAME PORT CONNS [OPTS]: start server in B and client in A,
# open-ended, with control and tick files NAME.{ctl,ticks}; sets srv, cli,
# TA, TB, CA, CB.
stream() {
    local name=$1 port=$2 n=$3; shift 3
    TA=$SA/$name.ticks TB=$SB/$name.ticks CA=$SA/$name.ctl CB=$SB/$name.ctl
    : >"$CA"; : >"$CB"
    srv=$(vm_bg B "$S server -p $port -n $n --ctl $CB --ticks $TB $*")
    until_ok 30 "grep -qs '^server: listening' $SB/out/$srv.out" || fail "$name: server did not start"
    cli=$(vm_bg A "$S client $(vm_ip B 1) -p $port -m verify -b 0 -n $n -s 16K --ctl $CA --ticks $TA $*")
    until_ok 60 "[ \$(tf $TA 8) = 2 ] && [ \$(tf $TB 8) = 2 ] && [ \$(tf $TA 3) -gt 1000000 ]" ||
        fail "$name: no two links and data flowing after 60 s"
}

# finish NAME CONNS: stop the streams, check every byte and checksum.
finish() {
    local name=$1 n=$2 cout sout
    echo stop >>"$CA"
    cout=$(vm_wait -t 180 A "$cli" 2>&1); crc=$?
    sout=$(vm_wait -t 60 B "$srv" 2>&1); src=$?
    echo "$cout" | grep -E '^(client|stats|result)' | sed "s/^/A $name: /"
    echo "$sout" | grep -E '^stats' | sed "s/^/B $name: /"
    echo "$cout" | grepq "^result verify smcr $n 0 ok$" ||
        { echo "$cout" | tail -n 30; echo "$sout" | grep -E 'warning|error|reset|abort' | sed "s/^/B $name: /" | tail -n 30
          fail "$name: the client did not verify all $n streams"; }
    echo "$cout" | grepq "^client: $n of $n connection(s) verified" || fail "$name: client: not $n of $n verified"
    [ "$(echo "$sout" | grep -c 'verify ok')" = "$n" ] ||
        { echo "$sout" | grep -v 'verify ok' | tail -n 30; fail "$name: the server did not verify all $n streams"; }
    [ "$crc" = 0 ] && [ "$src" = 0 ] || fail "$name: client exited $crc, server $src"
    CSTATS=$(echo "$cout" | grep '^stats client: connections' | tail -n 1)
    SSTATS=$(echo "$sout" | grep '^stats server: connections' | tail -n 1)
}

stat_of() { [[ $1 =~ (^| )$2\ ([0-9]+) ]] && echo "${BASH_REMATCH[2]}" || echo -1; }

# cycle WHAT LINK CUT HEAL: fail a link under load and bring it back.
cuts=0
cycle() {
    local what=$1 l=$2 cut=$3 heal=$4
    local fa fb foa fob aa ab ra rb t0 tc t1 t2 t3
    fa=$(tf $TA 6) fb=$(tf $TB 6) foa=$(tf $TA 5) fob=$(tf $TB 5)
    aa=$(tf $TA 7) ab=$(tf $TB 7)
    t0=$(now_ms)
    eval "$cut" >/dev/null || fail "$what link $l: '$cut' failed"
    tc=$(now_ms)
    until_ok 20 "[ \$(tf $TA 6) -gt $fa ] && [ \$(tf $TB 6) -gt $fb ]" ||
        fail "$what link $l: not both sides saw it fail (A $(tail -n 1 $TA), B $(tail -n 1 $TB))"
    t1=$(now_ms)
    ra=$(tf $TA 9) rb=$(tf $TB 9)
    eval "$heal" >/dev/null || fail "$what link $l: '$heal' failed"
    until_ok 40 "[ \$(tf $TA 8) = 2 ] && [ \$(tf $TB 8) = 2 ] && [ \$(tf $TA 7) -gt $aa ] && [ \$(tf $TB 7) -gt $ab ]" ||
        fail "$what link $l: no second link again (A $(tail -n 1 $TA), B $(tail -n 1 $TB))"
    t2=$(now_ms)
    # Connections spread over both links again before the next cut.
    until_ok 20 "[ \$(tf $TA 9) -gt $ra ] && [ \$(tf $TB 9) -gt $rb ]" ||
        fail "$what link $l: connections not rebalanced onto the new link"
    t3=$(now_ms)
    [ "$(tf $TA 5)" -gt "$foa" ] && [ "$(tf $TB 5)" -gt "$fob" ] ||
        fail "$what link $l: no connection moved (failovers A $foa -> $(tf $TA 5), B $fob -> $(tf $TB 5))"
    cuts=$((cuts + 1))
    vm_say "$what link $l: both sides failed over after $((t1 - t0)) ms (the cut itself took $((tc - t0)) ms; A moved $(( $(tf $TA 5) - foa )), B $(( $(tf $TB 5) - fob )) connections); two links $((t2 - t1)) ms after healing, rebalanced $((t3 - t2)) ms later"
}

cable_cut() { vm_cable "$1" off; }
cable_heal() { vm_cable "$1" on; }

# ---- 1. failover under load ---------------------------------------------------
if [[ $phases == *" 1 "* ]]; then
vm_say "1. 16 connections, both ways, links failing $cycles times per link and method"
stream load 5000 16
t_load=$(now_ms)
for l in 1 2; do
    for (( i=0; i<cycles; i++ )); do
        cycle cable $l "cable_cut $l" "cable_heal $l"
    done
done
for l in 1 2; do
    for (( i=0; i<cycles; i++ )); do
        cycle ifdown $l "vm_run A 'ip link set eth$((l-1)) down'" "vm_run A 'ip link set eth$((l-1)) up'"
    done
done
# The RDMA device goes away in A and in B by turns.
for l in 1 2; do
    for (( i=0; i<cycles; i++ )); do
        h=$([ $((i % 2)) = 0 ] && echo A || echo B)
        cycle "rdma-delete($h)" $l "vm_run $h 'rdma link delete rxe$((l-1))'" \
            "vm_run $h 'rdma link add rxe$((l-1)) type rxe netdev eth$((l-1))'"
    done
done
for l in 1 2; do
    for (( i=0; i<cycles; i++ )); do
        cycle qp-error $l "echo 'fault fail-dev=rxe$((l-1))' >>$CA" ":"
    done
done
fa=$(tf $TA 6) r0=$(tf $TA 3) t0=$(tf $TA 2)
vm_run A 'tc qdisc add dev eth0 root netem loss 5%' >/dev/null || fail "netem 5% on eth0"
sleep 10
vm_run A 'tc qdisc del dev eth0 root' >/dev/null || fail "removing netem"
netem_rate=$(awk -v b="$(tf $TA 3)" -v a="$r0" -v t1="$(tf $TA 2)" -v t0="$t0" 'BEGIN { printf "%.2f", (b - a) / (t1 - t0) / 1e6 }')
netem_fail=$(( $(tf $TA 6) - fa ))
vm_say "netem 5% loss on link 1 for 10 s: A received $netem_rate MB/s, $netem_fail link failure(s)"
until_ok 40 "[ \$(tf $TA 8) = 2 ] && [ \$(tf $TB 8) = 2 ]" || fail "netem: not two links again"
finish load 16
load_s=$(( ($(now_ms) - t_load) / 1000 ))
for side in CSTATS SSTATS; do
    st=${!side}
    [ "$(stat_of "$st" link_failures)" -ge "$cuts" ] || fail "$side: link_failures below $cuts: $st"
    [ "$(stat_of "$st" failovers)" -ge "$cuts" ] || fail "$side: failovers below $cuts: $st"
    [ "$(stat_of "$st" links_added)" -ge $((cuts + 2)) ] || fail "$side: links_added below $((cuts + 2)): $st"
    [ "$(stat_of "$st" rebalanced)" -ge "$cuts" ] || fail "$side: rebalanced below $cuts: $st"
    [ "$(stat_of "$st" open_connections)" = 0 ] || fail "$side: connections left open: $st"
done
[ "$(stat_of "$SSTATS" devices_lost)" -ge 1 ] && [ "$(stat_of "$CSTATS" devices_lost)" -ge 1 ] ||
    fail "a removed RDMA device was not noticed: A: $CSTATS; B: $SSTATS"
summary+=("load: $cuts link cuts in ${load_s} s ($cycles per link by cable, by ifdown, by rdma link delete/add (A and B by turns) and by a forced QP error) and 10 s of netem 5% loss (A received $netem_rate MB/s, $netem_fail link failures): 16/16 streams verified both ways, no reset")
summary+=("load counters A: $(echo "$CSTATS" | grep -oE '(link_failures|failovers|links_added|rebalanced|devices_lost) [0-9]+' | tr '\n' ' ')")
summary+=("load counters B: $(echo "$SSTATS" | grep -oE '(link_failures|failovers|links_added|rebalanced|devices_lost) [0-9]+' | tr '\n' ' ')")
fi

# ---- 2. detection times ----------------------------------------------------------
det_port=- det_load=- det_idle=- det_drop=-
if [[ $phases == *" 2 "* ]]; then
vm_say "2. detection times"
vm_clock_offset A || fail "detect: cannot read A's clock"
vm_say "A's clock is host + $OFFSET s (+- $OFFSET_ERR ms)"
stream detect 5001 8 --linger 12
out_a=$SA/out/$cli.out

# The first event after T (guest time) whose link_failures exceeds N, as
# "time failovers".
event_after() {
    awk -v t="$2" -v n="$3" '$1 == "event" && $2 >= t && $4 > n { print $2, $6; exit }' "$1"
}

# port down: pull link 2's cable, A's end first, at a host time that is
# converted to A's clock (measured before the streams started)
sleep 4		# a steady stream before
fa=$(tf $TA 6)
t_host=$(qmp_link_timed A 2 off) || fail "detect: set_link A link2 off"
vm_link B 2 off
t_carrier=$(echo "$t_host + $OFFSET" | bc -l)
until_ok 20 "[ \$(tf $TA 6) -gt $fa ]" || fail "detect: cable pull not detected"
ev=$(event_after "$out_a" "$(echo "$t_carrier - 1" | bc)" "$fa")
[ -n "$ev" ] || fail "detect: no failover event in A"
det_port=$(printf '%.0f' "$(echo "(${ev%% *} - $t_carrier) * 1000" | bc -l)")
# and on A's clock alone: the port error event to the connections moved
det_ev=$(awk -v t="$t_carrier" '
    { if (!match($0, /^smcr\[[0-9.]+\]/)) next; ts = substr($0, 6, RLENGTH - 6) + 0 }
    ts >= t - 1 && !pe && /rxe1 port 1: port error/ { pe = ts }
    pe && /link group: link [0-9]+ failed \(/ { printf "%.0f", (ts - pe) * 1000; exit }' "$SA/out/$cli.err")
sleep 4		# the stream on one link for a while
vm_cable 2 on
until_ok 40 "[ \$(tf $TA 8) = 2 ] && [ \$(tf $TB 8) = 2 ]" || fail "detect: link 2 not back"
# throughput in A around the pull: the 2 s before, then 500 ms steps
dip=$(awk -v tc="$t_carrier" '
    $1 == "tick" && NF == 9 { t[n] = $2; b[n] = $3 + $4; n++ }
    END {
        for (i = 1; i < n; i++)
            if (t[i] <= tc && t[i] > tc - 2) { bb += b[i] - b[i-1]; bt += t[i] - t[i-1] }
        base = bt > 0 ? bb / bt / 1e6 : 0
        printf "before %.2f MB/s; after the pull:", base
        min = -1; back = -1
        for (w = 0; w < 8; w++) {
            lo = tc + w * 0.5; hi = lo + 0.5; x = 0; y = 0
            for (i = 1; i < n; i++)
                if (t[i] > lo && t[i] <= hi) { x += b[i] - b[i-1]; y += t[i] - t[i-1] }
            if (y <= 0) { printf " -"; continue }
            r = x / y / 1e6
            printf " %.2f", r
            if (min < 0 || r < min) min = r
            if (back < 0 && w > 0 && r >= 0.8 * base) back = (w + 1) * 500
        }
        low = (base > 0 && min >= 0) ? 100 * min / base : 0
        printf " MB/s per 500 ms; lowest %.0f%% of before; back to 80%% after ", low
        if (back < 0) printf ">4000 ms"; else printf "%d ms", back
    }' "$TA")
vm_say "port down (cable pull): A moved its connections $det_port ms (+- $OFFSET_ERR) after qemu pulled its cable, $det_ev ms after the port error event; throughput $dip"

# silent loss under load: A drops everything it sends on link 1
sleep 2
fa=$(tf $TA 6)
t_cut=$(vm_run A 'tc qdisc add dev eth0 root netem loss 100% && echo $EPOCHREALTIME') || fail "netem 100% on eth0"
until_ok 20 "[ \$(tf $TA 6) -gt $fa ]" || fail "detect: silent loss under load not detected"
ev=$(event_after "$out_a" "$(echo "$t_cut - 1" | bc)" "$fa")
det_load=$(printf '%.0f' "$(echo "(${ev%% *} - $t_cut) * 1000" | bc -l)")
vm_run A 'tc qdisc del dev eth0 root' >/dev/null
until_ok 40 "[ \$(tf $TA 8) = 2 ] && [ \$(tf $TB 8) = 2 ]" || fail "detect: link 1 not back after netem"
vm_say "silent loss under load (netem 100% on A's eth0): A moved its connections after $det_load ms"

# the same by fault injection: smcr_fault "drop" (through the tool's control
# file) makes A's link on rxe0 silent with every port up
sleep 2
fa=$(tf $TA 6)
echo 'fault drop-dev=rxe0' >>"$CA"
until_ok 20 "[ \$(tf $TA 6) -gt $fa ]" || fail "detect: injected drop not detected"
t_cut=$(awk '$1 == "ctl" && /fault drop-dev=rxe0: [1-9]/ { t = $2 + 0 } END { if (t) printf "%.3f", t }' "$out_a")
[ -n "$t_cut" ] || fail "detect: the drop was not injected: $(grep '^ctl' "$out_a" | tail -n 2)"
ev=$(event_after "$out_a" "$t_cut" "$fa")
det_drop=$(printf '%.0f' "$(echo "(${ev%% *} - $t_cut) * 1000" | bc -l)")
until_ok 40 "[ \$(tf $TA 8) = 2 ] && [ \$(tf $TB 8) = 2 ]" || fail "detect: link 1 not back after the drop"
vm_say "silent loss by fault injection (drop on A's rxe0 link): A moved its connections after $det_drop ms"

grep -q 'held work requests flushed without the QP' "$SA/out/$cli.err" &&
    fail "detect: the dropped link's held requests did not go to its QP to be flushed"

# a delay is not a failure: 200 ms on everything A sends on rxe0 for 3 s
sleep 2
fa=$(tf $TA 6) fb=$(tf $TB 6) foa=$(tf $TA 5) fob=$(tf $TB 5) r0=$(tf $TA 3) s0=$(tf $TA 4)
echo 'fault delay-dev=rxe0,ms=200,for=3000' >>"$CA"
sleep 5
grep -q '^ctl .*fault delay-dev=rxe0,ms=200,for=3000: [1-9]' "$out_a" ||
    fail "detect: the delay was not injected: $(grep '^ctl' "$out_a" | tail -n 2)"
[ "$(tf $TA 6)" = "$fa" ] && [ "$(tf $TB 6)" = "$fb" ] ||
    fail "detect: a 200 ms delay failed a link (A $fa -> $(tf $TA 6), B $fb -> $(tf $TB 6))"
[ "$(tf $TA 5)" = "$foa" ] && [ "$(tf $TB 5)" = "$fob" ] ||
    fail "detect: a 200 ms delay moved connections (A $foa -> $(tf $TA 5), B $fob -> $(tf $TB 5))"
[ "$(tf $TA 3)" -gt "$r0" ] && [ "$(tf $TA 4)" -gt "$s0" ] || fail "detect: no data moved during the delay"
delay_mb=$(awk -v a="$r0" -v b="$(tf $TA 3)" -v c="$s0" -v d="$(tf $TA 4)" 'BEGIN { printf "%.1f", (b - a + d - c) / 1e6 }')
vm_say "delay 200 ms on A's rxe0 link for 3 s: no link failed, no connection moved, $delay_mb MB moved in the 5 s around it"

# nor is a drop that ends before the RC retries would run out: 500 ms, undrop
fa=$(tf $TA 6) fb=$(tf $TB 6) foa=$(tf $TA 5) fob=$(tf $TB 5)
echo 'fault drop-dev=rxe0' >>"$CA"
sleep 0.5
echo 'fault undrop-dev=rxe0' >>"$CA"
sleep 3
grep -q '^ctl .*fault undrop-dev=rxe0: [1-9]' "$out_a" ||
    fail "detect: undrop found no dropped link: $(grep '^ctl' "$out_a" | tail -n 2)"
[ "$(tf $TA 6)" = "$fa" ] && [ "$(tf $TB 6)" = "$fb" ] && [ "$(tf $TA 5)" = "$foa" ] &&
    [ "$(tf $TB 5)" = "$fob" ] || fail "detect: a 500 ms drop failed a link or moved connections"
vm_say "drop 500 ms on A's rxe0 link, then undrop: no link failed, no connection moved"

# silent loss on an idle group: only TEST LINK can tell
echo stop >>"$CA"
until_ok 120 "grep -q '^client: lingering' $out_a" || fail "detect: streams did not end"
sleep 2
fa=$(tf $TA 6) tl=$(tf $TA 2)
t_cut=$(vm_run A 'tc qdisc add dev eth1 root netem loss 100% && echo $EPOCHREALTIME') || fail "netem 100% on eth1"
until_ok 15 "[ \$(tf $TA 6) -gt $fa ]" || fail "detect: silent loss on an idle link not detected"
ev=$(event_after "$out_a" "$(echo "$t_cut - 1" | bc)" "$fa")
det_idle=$(printf '%.0f' "$(echo "(${ev%% *} - $t_cut) * 1000" | bc -l)")
vm_run A 'tc qdisc del dev eth1 root' >/dev/null
vm_say "silent loss, idle links (TEST LINK): link down after $det_idle ms"
finish detect 8
[ "$(stat_of "$CSTATS" test_links)" -gt 0 ] || fail "detect: no TEST LINK sent: $CSTATS"
[ "$(stat_of "$CSTATS" fault_held)" -gt 0 ] || fail "detect: the faults held nothing back: $CSTATS"
summary+=("detection: port down (cable pulled) $det_port ms (+- $OFFSET_ERR ms) from the pull to the failover ($det_ev ms from A's port error event); silent loss under load $det_load ms (netem), $det_drop ms (injected drop); silent loss on idle links (TEST LINK) $det_idle ms; a 200 ms injected delay for 3 s and a 500 ms drop ended by undrop failed no link")
summary+=("fault counters A: $(echo "$CSTATS" | grep -oE 'fault_[a-z_]+ [0-9]+' | tr '\n' ' ')")
summary+=("throughput in A around the cable pull: $dip")
fi

# ---- 3. both links down ----------------------------------------------------------
if [[ $phases == *" 3 "* ]]; then
vm_say "3. both links down longer than the timeouts"
TA=$SA/down.ticks TB=$SB/down.ticks
srv=$(vm_bg B "$S server -p 5002 -n 5 --ticks $TB")
until_ok 30 "grep -qs '^server: listening' $SB/out/$srv.out" || fail "down: server did not start"
cli=$(vm_bg A "$S client $(vm_ip B 1) -p 5002 -m verify -b 0 -n 4 -s 16K --ticks $TA")
until_ok 60 "[ \$(tf $TA 8) = 2 ] && [ \$(tf $TA 3) -gt 500000 ]" || fail "down: streams did not start"
t0=$(now_ms)
vm_cable 1 off
vm_cable 2 off
cout=$(vm_wait -t 60 A "$cli" 2>&1); crc=$?
t1=$(now_ms)
echo "$cout" | grep -E '^(client|result|stats)' | sed 's/^/A down: /'
[ "$crc" = 1 ] || fail "down: the client should fail (exit 1), not $crc"
echo "$cout" | grepq '^result verify smcr 4 0 FAIL$' || fail "down: no FAIL result"
[ "$(echo "$cout" | grep -c 'smcr-stream: connection .*: Connection reset')" = 4 ] ||
    fail "down: not every connection ended with a reset"
st=$(echo "$cout" | grep '^stats client: connections' | tail -n 1)
[ "$(stat_of "$st" open_connections)" = 0 ] && [ "$(stat_of "$st" rmbes_in_use)" = 0 ] &&
    [ "$(stat_of "$st" sndbufs_in_use)" = 0 ] || fail "down: client holds buffers: $st"
sleep 3
vm_cable 1 on
vm_cable 2 on
until_ok 30 "[ \$(tf $TB 8) = 0 ]" || fail "down: the server's group is still there"
out=$(vm_run -t 120 A "$S client $(vm_ip B 1) -p 5002 -m verify -n 1 -b 1M") ||
    { echo "$out"; fail "down: a new connection after both links came back failed"; }
echo "$out" | grepq '^client: SMC-R (first contact)' || fail "down: the new connection is not a first contact (new link group)"
echo "$out" | grepq '^result verify smcr 1 1048576 ok$' || fail "down: the new connection did not verify"
sout=$(vm_wait -t 60 B "$srv" 2>&1)
echo "$sout" | grep -E '^stats' | sed 's/^/B down: /'
[ "$(echo "$sout" | grep -c 'verify FAIL')" = 4 ] && [ "$(echo "$sout" | grep -c 'verify ok')" = 1 ] ||
    fail "down: the server should see 4 failed and 1 good stream"
st=$(echo "$sout" | grep '^stats server: connections' | tail -n 1)
[ "$(stat_of "$st" open_connections)" = 0 ] && [ "$(stat_of "$st" rmbes_in_use)" = 0 ] ||
    fail "down: server holds buffers: $st"
summary+=("both links down: 4 connections ended with a reset $((t1 - t0)) ms after the cables were pulled, no buffers held; a new connection built a new group (first contact) and verified")
fi

# ---- 4. asymmetric group -------------------------------------------------------------
if [[ $phases == *" 4 "* ]]; then
vm_say "4. asymmetric: B has one RNIC (rxe0 on a bridge over both NICs), A two"
vm_run B 'rdma link delete rxe0 && rdma link delete rxe1 &&
    ip link add br0 type bridge && ip addr flush dev eth0 && ip addr flush dev eth1 &&
    ip link set eth0 master br0 && ip link set eth1 master br0 && ip link set br0 up &&
    ip addr add 10.1.1.2/24 dev br0 && ip addr add 10.1.2.2/24 dev br0 &&
    rdma link add rxe0 type rxe netdev br0' || fail "asym: bridge setup in B"
# A answers ARP only on the NIC of the address (both wires meet in B's bridge).
vm_run A 'sysctl -qw net.ipv4.conf.all.arp_ignore=1 net.ipv4.conf.all.arp_announce=2' || fail "asym: sysctl in A"
until_ok 30 "vm_run B 'grep -q 0a01:0202 /sys/class/infiniband/rxe0/ports/1/gids/*' >/dev/null" ||
    fail "asym: rxe0 in B has no GID for 10.1.2.2"
stream asym 5003 8
echo dump >>"$CB"
until_ok 10 "[ \$(grep -cE '^  link [0-9]+ active +rxe0 ' $SB/out/$srv.out) -ge 2 ]" ||
    fail "asym: B's two links are not both on rxe0: $(grep -A8 'ctl.*dump' $SB/out/$srv.out)"
cycle "asym cable" 1 "cable_cut 1" "cable_heal 1"
cycle "asym ifdown" 2 "vm_run A 'ip link set eth1 down'" "vm_run A 'ip link set eth1 up'"
cycle "asym cable" 2 "cable_cut 2" "cable_heal 2"
finish asym 8
summary+=("asymmetric (B one RNIC, A two): 3 failovers of A's links, 8/8 streams verified, no reset")
fi

# ---- 5. pauses ----------------------------------------------------------------------
# A guest stopped by qemu (the blackout of a live migration) and a process
# stopped by SIGSTOP: no connection reset, no link group ended, data flowing
# again soon after (aim: 2 s).  "I/O back": from the cont to the first of
# A's ticks (100 ms) whose received bytes grew, on A's clock.  Measured
# (this part alone, 2-core TCG host at load 8-13, 70 s with the boot): a
# 10 s pause of B, data 57 ms after the cont (of A, SMCR_FO_PAUSE_VM=A:
# 344 ms), one link failed at each end (TEST LINK), no reset; a 3 s
# SIGSTOP, data 111 ms (73 ms) after SIGCONT; the killed server's group
# ended in A 3237 ms (3401 ms) after the kill.  With ACK timeout 17
# (before) a 2 s pause gave data after 146 ms, a 3 s SIGSTOP after 2910 ms.
pause_s=-; stop_s=-; pause_back=-; stop_back=-
if [[ $phases == *" 5 "* ]]; then
pause_s=${SMCR_FO_PAUSE:-10} stop_s=${SMCR_FO_STOP:-3} pvm=${SMCR_FO_PAUSE_VM:-B}
vm_say "5. pauses: $pvm's guest stopped by qemu for $pause_s s, B's server SIGSTOPped for $stop_s s"
vm_clock_offsets pause
# SMCR_FO_PAUSE_ENV: environment for both ends of this part only (to try
# other timeouts, e.g. "SMCR_QP_TIMEOUT=19")
S="${SMCR_FO_PAUSE_ENV:+env $SMCR_FO_PAUSE_ENV }$S" stream pause 5004 8
sleep 3
# io_back T: ms from T (A's clock) to the first tick after it with more
# bytes received than at T; empty until there is one.  min_links T: the
# fewest active links in A's ticks from T on.
io_back() {
    awk -v t="$1" '$1 == "tick" && NF == 9 {
        if ($2 <= t) { r = $3; next }
        if ($3 > r) { printf "%.0f", ($2 - t) * 1000; exit } }' "$TA"
}
min_links() { awk -v t="$1" '$1 == "tick" && NF == 9 && $2 >= t && (m == "" || $8 < m) { m = $8 } END { print m }' "$TA"; }
fa=$(tf $TA 6) fb=$(tf $TB 6)
read -r tp0 tp1 < <(vm_pause "$pvm" "$pause_s") && [ -n "$tp1" ] || fail "pause: qemu stop/cont of $pvm failed"
ta=$(echo "$tp1 + $off_a" | bc -l)
until_ok 60 "[ -n \"\$(io_back $ta)\" ]" || fail "pause: no data in A within 60 s after $pvm's guest went on"
pause_back=$(io_back "$ta")
pause_links=$(min_links "$(echo "$tp0 + $off_a" | bc -l)")
pause_fail="A $(( $(tf $TA 6) - fa )), B $(( $(tf $TB 6) - fb ))"
vm_say "guest pause of $pvm for $pause_s s (qemu: stop $tp0, cont $tp1): data in A again $pause_back ms after the cont; links active in A at least $pause_links; link failures $pause_fail"
[ "${pause_links:-0}" -ge 1 ] || fail "pause: A had no link left (the link group ended)"
until_ok 60 "[ \$(tf $TA 8) = 2 ] && [ \$(tf $TB 8) = 2 ]" || fail "pause: not two links again after the guest pause"
sleep 2
fa=$(tf $TA 6) fb=$(tf $TB 6)
out=$(vm_run B "p=\$(pgrep -n -f 'server -p 5004')
kill -STOP \$p; echo \$EPOCHREALTIME; sleep $stop_s; kill -CONT \$p; echo \$EPOCHREALTIME") ||
    fail "pause: SIGSTOP/SIGCONT of B's server failed: $out"
read -r ts0 ts1 <<<"$(echo $out)"
ta=$(echo "$ts1 - $off_b + $off_a" | bc -l)
until_ok 60 "[ -n \"\$(io_back $ta)\" ]" || fail "pause: no data in A within 60 s after SIGCONT"
stop_back=$(io_back "$ta")
stop_links=$(min_links "$(echo "$ts0 - $off_b + $off_a" | bc -l)")
stop_fail="A $(( $(tf $TA 6) - fa )), B $(( $(tf $TB 6) - fb ))"
vm_say "SIGSTOP of B's server for $stop_s s: data in A again $stop_back ms after SIGCONT; links active in A at least $stop_links; link failures $stop_fail"
[ "${stop_links:-0}" -ge 1 ] || fail "pause: A had no link left after SIGSTOP (the link group ended)"
finish pause 8
for side in CSTATS SSTATS; do
    [ "$(stat_of "${!side}" open_connections)" = 0 ] || fail "pause: $side: connections left open: ${!side}"
done
summary+=("pauses: $pvm's guest stopped $pause_s s: data again $pause_back ms after the cont (link failures $pause_fail); B's server SIGSTOPped $stop_s s: data again $stop_back ms after SIGCONT (link failures $stop_fail); 8/8 streams verified, no reset (aim: data within 2000 ms)")
[ "$pause_back" -le "${SMCR_FO_PAUSE_BACK_MS:-2000}" ] ||
    fail "pause: data in A only $pause_back ms after $pvm's guest went on (aim: ${SMCR_FO_PAUSE_BACK_MS:-2000})"
# A killed peer is not a stopped one: B's kernel ends the connections'
# TCP, and A ends the group after one TEST LINK timeout instead of the
# last link's long limit (15 s of RC retries + 1 s).
TA=$SA/kill.ticks TB=$SB/kill.ticks
vm_clock_offsets kill
srv=$(vm_bg B "$S server -p 5005 -n 2 --ticks $TB")
until_ok 30 "grep -qs '^server: listening' $SB/out/$srv.out" || fail "kill: server did not start"
cli=$(vm_bg A "$S client $(vm_ip B 1) -p 5005 -m verify -b 0 -n 2 -s 16K --ticks $TA")
until_ok 60 "[ \$(tf $TA 8) = 2 ] && [ \$(tf $TA 3) -gt 500000 ]" || fail "kill: streams did not start"
out=$(vm_run B "p=\$(pgrep -n -f 'server -p 5005'); echo \$EPOCHREALTIME; kill -KILL \$p") ||
    fail "kill: SIGKILL of B's server failed: $out"
tk=$(echo "$out - $off_b + $off_a" | bc -l)
cout=$(vm_wait -t 60 A "$cli" 2>&1); crc=$?
echo "$cout" | grep -E '^(client|result|stats)' | sed 's/^/A kill: /'
[ "$crc" = 1 ] || fail "kill: the client should fail (exit 1), not $crc"
[ "$(echo "$cout" | grep -c 'smcr-stream: connection .*: Connection reset')" = 2 ] ||
    fail "kill: not every connection ended with a reset"
# from the kill (B's clock, moved to A's) to A's "link group ended", or
# to A ending the group itself (DELETE LINK all) when the client exits
# first, its connections already reset
kill_det=$(awk -v t="$tk" 'match($0, /^smcr\[[0-9.]+\]/) && /link group ended|DELETE LINK \(all\) sent/ {
    s = substr($0, 6, RLENGTH - 6) + 0; if (s >= t) { printf "%.0f", (s - t) * 1000; exit } }' \
    "$SA/out/$cli.err")
[ -n "$kill_det" ] || fail "kill: A's log shows no end of the group after the kill"
# ... and to A's last connection reset for it, well before the group's
# TEST LINK limit: by the TCP-end watch (its TCP ended, its links silent
# for 1 s), or earlier by the group's end when A's RDMA writes met the
# dead process's deregistered RMBs (remote access error on both links:
# "link group ended ...: resetting 2 connection(s)").
kill_rst=$(awk -v t="$tk" 'match($0, /^smcr\[[0-9.]+\]/) {
    s = substr($0, 6, RLENGTH - 6) + 0; if (s < t) next
    if (/its process is gone, connection reset/) { n++; d = (s - t) * 1000 }
    else if (/link group ended .*: resetting [0-9]+ connection/) {
        sub(/.*resetting /, ""); if ($1 + 0 > 0) { n += $1; d = (s - t) * 1000 } } }
    END { if (n == 2) printf "%.0f", d }' "$SA/out/$cli.err")
[ -n "$kill_rst" ] || fail "kill: A did not reset both connections for the peer's ended TCP or its group's end"
vm_say "SIGKILL of B's server: A's 2 connections reset $kill_rst ms after the kill, the group ended $kill_det ms after it"
[ "$kill_det" -le "${SMCR_FO_KILL_MS:-8000}" ] ||
    fail "kill: A took $kill_det ms to end the group of a killed peer (aim: ${SMCR_FO_KILL_MS:-8000})"
[ "$kill_rst" -le "${SMCR_FO_KILL_RESET_MS:-3000}" ] ||
    fail "kill: A took $kill_rst ms to reset the connections of a killed peer (aim: ${SMCR_FO_KILL_RESET_MS:-3000})"
summary+=("killed peer (SIGKILL of B's server): A's connections reset $kill_rst ms after the kill, its group ended after $kill_det ms")
fi

vm_stop
echo "--- summary (rxe under TCG; compare only within this run):"
printf '%s\n' "${summary[@]}"
echo "PASS: SMC-R failover under load: $cuts cuts, detection port-down $det_port ms, silent loss $det_load ms (load) / $det_idle ms (idle) / $det_drop ms (injected drop)"
