#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# rxe lane: SMC-R connections over two real RC links per host (link_verbs
# over rxe0 and rxe1 in two VMs), the CDC data path (smcr/conn.c) on top.
#   1. clean: LS_CONNS connections (half per link) stream LS_MIB MiB each
#      way, every byte pattern-checked and SHA-256 compared at the far end;
#   2. A forces link 1's QP into the error state mid-stream
#      (--fail-link-after): A's connections on link 1 move at once, B's when
#      its QP reports the error (retry exceeded);
#   3. cable: link 1's cable is pulled on both hosts mid-stream (qemu
#      set_link off on both NICs at once): both sides see a port error;
#   4. ifdown: "ip link set eth0 down" in A mid-stream: A sees a port
#      error, B's QP a retry-exceeded completion (silent loss from B's side);
#   5. drop: A makes link 1 silent by fault injection (--drop-link-after):
#      after the RC retry time it goes down, every SEND it held completes
#      as flushed; B's QP then reports retry exceeded.
# Every run asserts: zero resets, every byte verified, and in 2 and 3 a
# failover of every link-1 connection on both sides.  Prints throughput,
# detection times and replayed bytes.
# smcr-timeout: 600
: "${SMCR_VM_TIMEOUT:=540}"
. "$(dirname "$0")/lib.sh"
vm_requires
prog=$abs_top_builddir/tests/vm/link-stream
[ -x "$prog" ] || fail "$prog not built (make check builds it)"

conns=${LS_CONNS:-8}
mib=${LS_MIB:-8}
runs=${LS_RUNS:-clean qperr cable ifdown drop}
half=$(( conns / 2 ))          # connections on link 1 (even indices)
total=$(( conns * mib * 1048576 ))

vm_start_pair
a1=$(vm_ip A 1) a2=$(vm_ip A 2) b1=$(vm_ip B 1) b2=$(vm_ip B 2)
port=18600
summary=()

# run NAME [client options...]: one stream; sets sout/cout.
stream() {
    local name=$1; shift
    local opts="--conns=$conns --mib=$mib --port=$port"
    local ctl=--ctl-link=1 srv cli
    case $name in cable|ifdown) ctl=--ctl-link=2 ;; esac  # TCP must survive link 1
    port=$((port + 1))
    vm_say "run $name: $conns connections x $mib MiB each way $*"
    srv=$(vm_bg B "$prog server $b1 $b2 $a1 $a2 $opts $ctl ${LS_OPTS:-}")
    cli=$(vm_bg A "$prog client $a1 $a2 $b1 $b2 $opts $ctl ${LS_OPTS:-} $*")
    case $name in cable|ifdown)
        # Cut link 1 once A has received a quarter of the data.
        local out i
        out=$(vm_share A)/out/$cli.out
        for (( i=0; i<1200; i++ )); do
            grep -q '^progress 25%' "$out" 2>/dev/null && break
            [ -e "$(vm_share A)/out/$cli.rc" ] && break
            sleep 0.1
        done
        grep -q '^progress 25%' "$out" || fail "run $name: A never got to 25%"
        if [ "$name" = cable ]; then
            vm_say "run $name: pulling link 1's cable on A and B"
            local pid
            vm_link A 1 off & pid=$!
            vm_link B 1 off
            wait "$pid" || fail "run $name: vm_link A 1 off failed"
        else
            vm_say "run $name: ip link set eth0 down in A"
            vm_run A 'ip link set eth0 down' || fail "run $name: ip link set eth0 down"
        fi
        # Once both sides have failed over, bring link 1 back while the
        # stream goes on: the ports report PORT_ACTIVE (what a link group
        # re-adds links on).
        for (( i=0; i<600; i++ )); do
            grep -q '^link 1 down' "$out" 2>/dev/null &&
                grep -q '^link 1 down' "$(vm_share B)/out/$srv.out" 2>/dev/null && break
            sleep 0.1
        done
        vm_say "run $name: link 1 back"
        if [ "$name" = cable ]; then
            vm_cable 1 on
        else
            vm_run A 'ip link set eth0 up' || fail "run $name: ip link set eth0 up"
        fi
    esac
    cout=$(vm_wait -t 300 A "$cli" 2>&1); crc=$?
    sout=$(vm_wait -t 60 B "$srv" 2>&1); src=$?
    echo "$cout" | sed "s/^/A $name: /"
    echo "$sout" | sed "s/^/B $name: /"
    [ "$crc" = 0 ] || fail "run $name: client on A exited with $crc"
    [ "$src" = 0 ] || fail "run $name: server on B exited with $src"
}

# check NAME FAILOVERS: both sides verified everything, no reset, and the
# expected number of failovers per side.
check() {
    local name=$1 fo=$2 side out
    for side in A B; do
        [ $side = A ] && out=$cout || out=$sout
        echo "$out" | grepq "^verified: $conns/$conns connections x $((mib * 1048576)) bytes each way: pattern ok $conns/$conns, sha256 equal $conns/$conns, peer received $total bytes$" ||
            fail "run $name: $side did not verify every byte"
        echo "$out" | grepq "^result: PASS resets 0 failovers $fo replayed " ||
            fail "run $name: $side: expected PASS, no reset and $fo failovers: $(echo "$out" | grep '^result:')"
    done
}

# port_back NAME SIDE: SIDE saw link 1's port become active again.
port_back() {
    local out
    [ "$2" = A ] && out=$cout || out=$sout
    echo "$out" | grepq '^port active: rxe0 port 1 (link 1)' ||
        fail "run $1: $2 did not report link 1's port active again"
}

# held_flushed: A's dropped link 1 held SENDs back, and every SEND it was
# given completed (the held ones with a flush error, after the rest).
held_flushed() {
    local l
    l=$(echo "$cout" | grep '^link 1 sends completed: ')
    [[ $l =~ completed:\ ([0-9]+)\ of\ ([0-9]+)\ \(([0-9]+)\ with\ an\ error\)\;\ fault:\ held\ ([0-9]+),\ never\ sent\ ([0-9]+) ]] ||
        fail "run drop: no completion count for link 1: $l"
    [ "${BASH_REMATCH[1]}" = "${BASH_REMATCH[2]}" ] || fail "run drop: not every SEND on link 1 completed: $l"
    [ "${BASH_REMATCH[3]}" -gt 0 ] && [ "${BASH_REMATCH[4]}" -gt 0 ] &&
        [ "${BASH_REMATCH[5]}" -gt 0 ] ||
        fail "run drop: held work requests did not complete as flushed: $l"
    summary+=("drop A: $l")
}

figures() {
    local name=$1 side out
    for side in A B; do
        [ $side = A ] && out=$cout || out=$sout
        summary+=("$name $side: $(echo "$out" | sed -n 's/^received .*: \([0-9.]* MB\/s in\), \([0-9.]* MB\/s both directions\)$/\1, \2/p')$(
                   echo "$out" | sed -n 's/^link 1 down: \(.*\); moved.*/; link 1 down: \1/p'); $(
                   echo "$out" | sed -n 's/^result: PASS resets 0 \(.*\)/\1/p')")
    done
}

for r in $runs; do
    case $r in
        clean) stream clean; check clean 0 ;;
        qperr) stream qperr "--fail-link-after=$((total / 3))"; check qperr "$half" ;;
        cable) stream cable; check cable "$half"
               port_back cable A; port_back cable B ;;
        ifdown) stream ifdown; check ifdown "$half"; port_back ifdown A ;;
        drop) stream drop "--drop-link-after=$((total / 3))"; check drop "$half"
              held_flushed ;;
        *) fail "unknown run $r" ;;
    esac
    figures "$r"
done
vm_stop
echo "--- figures (rxe under TCG; compare only within this run):"
printf '%s\n' "${summary[@]}"
echo "PASS: link_verbs over rxe, 2 links, $conns connections x $mib MiB each way: runs $runs verified, zero resets, every link-1 connection failed over on both sides"
