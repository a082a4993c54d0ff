#!/bin/bash
# rxe lane: SMC-R connections over two real RC links per host (link_verbs
# over rxe0 and rxe1 in two VMs), the CDC data path (smcr/conn.c) on top.
#   1. clean: LS_CONNS connections (half per link) stream LS_MIB MiB each
#      way, every byte pattern-checked and SHA-256 compared at the far end;
#   2. A forces link 1's QP into the error state mid-stream
#      (--fail-link-after): A's connections on link 1 move at once, B's when
#      its QP reports the error (retry exceeded);
#   3. link 1's cable is pulled on both hosts mid-stream (qemu set_link off):
#      both sides detect it (port error or completion error) and move.
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
runs=${LS_RUNS:-clean qperr cable}
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
    [ "$name" = cable ] && ctl=--ctl-link=2   # TCP must survive link 1's loss
    port=$((port + 1))
    vm_say "run $name: $conns connections x $mib MiB each way $*"
    srv=$(vm_bg B "$prog server $b1 $b2 $a1 $a2 $opts $ctl")
    cli=$(vm_bg A "$prog client $a1 $a2 $b1 $b2 $opts $ctl $*")
    if [ "$name" = cable ]; then
        # Pull the cable once A has received a quarter of the data.
        local out i
        out=$(vm_share A)/out/$cli.out
        for (( i=0; i<1200; i++ )); do
            grep -q '^progress 25%' "$out" 2>/dev/null && break
            [ -e "$(vm_share A)/out/$cli.rc" ] && break
            sleep 0.1
        done
        grep -q '^progress 25%' "$out" || fail "run $name: A never got to 25%"
        vm_say "run $name: pulling link 1's cable"
        vm_cable 1 off
    fi
    cout=$(vm_wait -t 300 A "$cli" 2>&1); crc=$?
    sout=$(vm_wait -t 60 B "$srv" 2>&1); src=$?
    [ "$name" = cable ] && vm_cable 1 on
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
        echo "$out" | grep -q "^verified: $conns/$conns connections x $((mib * 1048576)) bytes each way: pattern ok $conns/$conns, sha256 equal $conns/$conns, peer received $total bytes$" ||
            fail "run $name: $side did not verify every byte"
        echo "$out" | grep -q "^result: PASS resets 0 failovers $fo replayed " ||
            fail "run $name: $side: expected PASS, no reset and $fo failovers: $(echo "$out" | grep '^result:')"
    done
}

figures() {
    local name=$1 side out
    for side in A B; do
        [ $side = A ] && out=$cout || out=$sout
        summary+=("$name $side: $(echo "$out" | sed -n 's/^received .*: \([0-9.]* MB\/s in\), \([0-9.]* MB\/s both directions\)$/\1, \2/p')" \
                  "$(echo "$out" | sed -n 's/^link 1 down: \(.*\); moved.*/link 1 down: \1/p')" \
                  "$(echo "$out" | sed -n 's/^result: PASS resets 0 \(.*\)/\1/p')")
    done
}

for r in $runs; do
    case $r in
        clean) stream clean; check clean 0 ;;
        qperr) stream qperr "--fail-link-after=$((total / 3))"; check qperr "$half" ;;
        cable) stream cable; check cable "$half" ;;
        *) fail "unknown run $r" ;;
    esac
    figures "$r"
done
vm_stop
echo "--- figures (rxe under TCG; compare only within this run):"
printf '%s\n' "${summary[@]}" | grep -v '^$'
echo "PASS: link_verbs over rxe, 2 links, $conns connections x $mib MiB each way: runs $runs verified, zero resets, every link-1 connection failed over on both sides"
