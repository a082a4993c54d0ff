#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# Gateway failover over SMC-R: a single-node Ceph (tests/ceph-lib.sh) in
# guest B, two smcrd gateways in B exporting one RBD image with 'exclusive'
# (each under a restart loop, on its own NBD and SMC-R ports), and nbdc-io
# in A over SMC-R with both gateways' addresses (every byte checked).  The
# active gateway is SIGKILLed SMCR_VM_RBD_KILLS times (default 2); the
# other takes the lock when the client arrives.  No error, no bad byte, the
# reconnects over SMC-R.
# Behind a knob (SMCR_VM_RBD=1): Ceph's start under TCG takes minutes, and
# CI's time budget has no room for it.
# smcr-timeout: 900
kills=${SMCR_VM_RBD_KILLS:-2}
# Ceph's start (~1 min), then ~7 s a kill (20 kills: 212 s in all).
: "${SMCR_VM_TIMEOUT:=$(( 480 + 30 * kills ))}"
: "${SMCR_VM_MEM:=1536}"
: "${SMCR_VM_CMD_TIMEOUT:=600}"
# Debian's ceph-mon dies of SIGILL on the lane's -cpu qemu64.
: "${SMCR_VM_QEMU_ARGS:=-cpu max}"
export SMCR_VM_MEM SMCR_VM_QEMU_ARGS
[ "${SMCR_VM_RBD:-0}" = 1 ] ||
    { echo "SKIP: $(basename "$0"): SMCR_VM_RBD=1 runs it (Ceph in a TCG guest takes minutes)"; exit 77; }
. "$(dirname "$0")/lib.sh"
vm_requires
grepq -x '#define HAVE_LIBRBD 1' "$abs_top_builddir/config.h" </dev/null ||
    skip "smcrd built without librbd (librbd-dev missing at configure)"
for i in ceph-mon ceph-osd ceph-authtool monmaptool rbd; do
    command -v "$i" >/dev/null || skip "needs $i (scripts/install-deps.sh installs Ceph)"
done
SMCRD=$abs_top_builddir/server/smcrd
IO=$abs_top_builddir/tests/nbdc-io
for f in "$SMCRD" "$IO"; do [ -x "$f" ] || fail "$f not built"; done
killed=()
vm_start_pair
B1=$(vm_ip B 1)
# The gateways' logs and pids in B's share: read from here, no round trip.
sh=$(vm_share B)

# Ceph in B, up until the VM stops (the job's EXIT trap stops it).
t0=$SECONDS
ceph=$(vm_bg B "export srcdir=$abs_top_srcdir/tests SMCR_CEPH_OSD_MIB=256
. \$srcdir/functions.sh; . \$srcdir/ceph-lib.sh
cleanup_fn 'touch /tmp/ceph.ended'
start_ceph /tmp/ceph || exit 1
timeout 300 rbd -c \$CEPH_CONF --id \$CEPH_ID create --size 64M rbd/ha || exit 1
echo \"CEPH_CONF=\$CEPH_CONF CEPH_ID=\$CEPH_ID\" >/tmp/ceph.env
free -m; sleep infinity & wait")
vm_run -t 600 B "for i in \$(seq 6000); do [ -s /tmp/ceph.env ] && exit 0; [ -e /tmp/ceph.ended ] && exit 1; sleep 0.1; done; exit 1" ||
    { vm_out B "$ceph"; fail "Ceph did not start in B"; }
echo "Ceph in B: up with an image in $(( SECONDS - t0 )) s"
vm_out B "$ceph" | grep -E '^(ceph:|Mem:)'
eval "$(vm_run B 'cat /tmp/ceph.env')"
opts="ceph-conf=$CEPH_CONF,ceph-id=$CEPH_ID,exclusive,lock-timeout=60"

# Two gateways in B, each under a restart loop; gN's pid and log in B's share.
for g in 0 1; do
    vm_bg B "while [ ! -e /tmp/stop ]; do
  $SMCRD -f -p $(( 10809 + 2 * g )) --smcr-port $(( 10810 + 2 * g )) -e 'ha=rbd:rbd/ha,$opts' >>$sh/g$g.log 2>&1 &
  echo \$! >$sh/g$g.pid; wait \$!; sleep 0.2
done" >/dev/null
done
# count WHAT N: lines of gateway N's log with WHAT (0 before the log is there).
count() { cat "$sh/g$2.log" 2>/dev/null | grep -c "$1" || true; }
ups() { echo $(( $(count 'listening for NBD over SMC-R' 0) + $(count 'listening for NBD over SMC-R' 1) )); }
until_ok 120 '[ "$(ups)" -ge 2 ]' || { tail -n 5 "$sh/g0.log" "$sh/g1.log"; fail "the gateways did not come up in B"; }
took() { count 'took the exclusive lock' "$1"; }

io=$(vm_bg A "$IO -z -c 2 -t 120 -i 20 -d 3600 -q 16 -b 65536 -x /tmp/io.stop \
-S $B1:10812 smcr://$B1:10810/ha")
until_ok 300 '[ "$(took 0)" -gt 0 ] || [ "$(took 1)" -gt 0 ]' || fail "no gateway took the lock for A's client"
# Kill times on A's clock (B's clock moved by the offsets).
vm_clock_offsets "kill times"
# The client's log (stderr) so far: its connections coming back.
backs() { cat "$(vm_share A)/out/$io.err" "$(vm_share A)/out/$io.out" 2>/dev/null | grep -c ' is back (' || true; }
conns=2
# Each kill lands on I/O running through the active gateway, this long
# after the client's connections came back to it.
settle=3
kill_at=()
# The client's handshakes done and I/O running before the first kill.
sleep 10
for k in $(seq "$kills"); do
    # The active one: the last to take the lock.
    act=$(grep -H 'took the exclusive lock' "$sh/g0.log" "$sh/g1.log" |
          sed 's|^.*/g\(.\)\.log:\(.*\)|\2 \1|' | sort | tail -n 1 | awk '{print $NF}')
    oth=$(( 1 - act ))
    n=$(took "$oth") b=$(backs)
    ks=$EPOCHREALTIME
    # B's load (one vCPU: Ceph, both gateways) slows the killed one's exit.
    out=$(vm_run B "echo \$EPOCHREALTIME; kill -KILL \$(cat $sh/g$act.pid); cut -d ' ' -f 1 /proc/loadavg") ||
        fail "kill $k"
    read -r -d '' at load <<<"$out" || true
    kill_at+=("$(echo "$at - $off_b + $off_a" | bc -l)")
    until_ok 120 '[ "$(took "$oth")" -gt "$n" ]' ||
        { tail -n 20 "$sh/g$oth.log"; fail "kill $k: g$oth did not take over"; }
    echo "kill $k: g$act SIGKILLed, g$oth took the lock (seen $(awk -v a="$ks" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.1f", b - a }') s after the kill began; B's load $load)"
    # Every connection back and the killed one up again (passive), then
    # the next kill.
    until_ok 120 '[ "$(backs)" -ge $(( b + conns )) ]' ||
        fail "kill $k: the client's connections did not come back"
    killed[act]=$(( ${killed[act]:-0} + 1 ))
    until_ok 120 '[ "$(count "listening for NBD over SMC-R" "$act")" -gt "${killed[act]}" ]' ||
        fail "g$act did not come back after kill $k"
    sleep "$settle"
done
vm_run A "touch /tmp/io.stop"
grep -h 'lock\|fenced\|not served' "$sh/g0.log" "$sh/g1.log" | sort | cut -c12-
out=$(vm_wait -t 600 A "$io" 2>&1) || { echo "$out" | tail -n 30; fail "nbdc-io failed"; }
echo "$out" | grep -E "^(result|first bad|last error)|is back|lost"
r=$(echo "$out" | grep '^result ' | head -n 1)
[[ $r =~ \ errors\ 0\ bad\ 0\  ]] || fail "I/O errors or bad data: $r"
[[ $r =~ reconnects\ ([0-9]+) ]] && [ "${BASH_REMATCH[1]}" -ge "$kills" ] || fail "fewer reconnects than kills: $r"
echo "$out" | grepq "is back (server .*, smcr)" || fail "the reconnects were not over SMC-R"
# Per kill, on A's clock: the first connection reset for the dead
# gateway's ended TCP, the first connection lost, the last one back and the
# other gateway's lock (the resent requests wait for it): I/O is back at
# the later of the last two.  Stamps: "ident[EPOCH.mmm]" or local
# "YYYY-MM-DD HH:MM:SS.mmm" (the guests share the host's zone).
stamp_fn='function stamp(l) {
    if (l ~ /^[a-z-]+\[[0-9.]+\]/) return substr(l, index(l, "[") + 1) + 0
    if (l ~ /^[0-9][0-9][0-9][0-9]-[0-9][0-9]-[0-9][0-9] [0-9][0-9]:[0-9][0-9]:[0-9][0-9]\./)
        return mktime(substr(l, 1, 4) " " substr(l, 6, 2) " " substr(l, 9, 2) " " \
                      substr(l, 12, 2) " " substr(l, 15, 2) " 0") + substr(l, 18, 6)
    return -1 }'
locks=$(grep -h 'took the exclusive lock' "$sh/g0.log" "$sh/g1.log" |
    awk -v off="$(echo "$off_a - $off_b" | bc -l)" "$stamp_fn"' { t = stamp($0); if (t > 0) printf "%.3f ", t + off }')
worst=0
for k in "${!kill_at[@]}"; do
    t=${kill_at[k]} next=${kill_at[k+1]:-1e12}
    d=$(echo "$out" | awk -v t="$t" -v u="$next" -v locks="$locks" "$stamp_fn"'
        function ms(s) { return sprintf("%.0f", (s - t) * 1000) }
        { s = stamp($0); if (s < t || s >= u) next
          if (rst == "" && /its process is gone, connection reset/) rst = ms(s)
          if (lost == "" && / lost \(/) lost = ms(s)
          if (/is back \(/) back = ms(s) }
        END { n = split(locks, l, " ")
              for (i = 1; i <= n; i++) if (l[i] >= t && l[i] < u) { lock = ms(l[i]); break }
              print (rst == "" ? "-" : rst), (lost == "" ? "-" : lost),
                    (back == "" ? "-" : back), (lock == "" ? "-" : lock) }')
    read -r rst lost back lock <<<"$d"
    echo "kill $(( k + 1 )) (A's clock, ms after it): connection reset $rst, lost $lost, back $back, the other gateway's lock $lock"
    [ "$back" != - ] && [ "$lock" != - ] || fail "kill $(( k + 1 )): no connection back or no lock taken after it"
    ioback=$(( back > lock ? back : lock ))
    [ "$ioback" -gt "$worst" ] && worst=$ioback
done
[ "$worst" -le "${SMCR_VM_RBD_BACK_MS:-10000}" ] ||
    fail "I/O back only $worst ms after a kill (aim: ${SMCR_VM_RBD_BACK_MS:-10000})"
vm_run B "touch /tmp/stop; kill \$(cat $sh/g0.pid) \$(cat $sh/g1.pid)" >/dev/null || true
vm_stop
echo "PASS: Ceph in guest B, two gateways over SMC-R: $kills SIGKILLs of the active one under verified I/O from A, 0 errors, 0 bad bytes, I/O back within $worst ms of each kill"
