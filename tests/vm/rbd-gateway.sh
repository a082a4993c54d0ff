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
: "${SMCR_VM_TIMEOUT:=840}"
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
kills=${SMCR_VM_RBD_KILLS:-2}
killed=()
vm_start_pair
B1=$(vm_ip B 1)

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

# Two gateways in B, each under a restart loop; gN's pid in /tmp/gN.pid.
for g in 0 1; do
    vm_bg B "while [ ! -e /tmp/stop ]; do
  $SMCRD -f -p $(( 10809 + 2 * g )) --smcr-port $(( 10810 + 2 * g )) -e 'ha=rbd:rbd/ha,$opts' >>/tmp/g$g.log 2>&1 &
  echo \$! >/tmp/g$g.pid; wait \$!; sleep 0.2
done" >/dev/null
done
vm_run B "for i in \$(seq 1200); do [ \$(cat /tmp/g0.log /tmp/g1.log | grep -c 'listening for NBD over SMC-R') -ge 2 ] && exit 0; sleep 0.1; done
tail -n 5 /tmp/g0.log /tmp/g1.log; exit 1" || fail "the gateways did not come up in B"
took() { vm_run B "grep -c 'took the exclusive lock' /tmp/g$1.log || true"; }

io=$(vm_bg A "$IO -z -c 2 -t 120 -i 20 -d 3600 -q 16 -b 65536 -x /tmp/io.stop \
-S $B1:10812 smcr://$B1:10810/ha")
wait_for 300 vm_run B "grep -q 'took the exclusive lock' /tmp/g0.log /tmp/g1.log"
# Kill times on A's clock (B's clock moved by the offsets).
vm_clock_offsets "kill times"
kill_at=()
sleep 10
for k in $(seq "$kills"); do
    t0=$(took 0) t1=$(took 1)
    # The active one: the last to take the lock.
    act=$(vm_run B "grep -H 'took the exclusive lock' /tmp/g0.log /tmp/g1.log |
sed 's|^/tmp/g\\(.\\)\\.log:\\(.*\\)|\\2 \\1|' | sort | tail -n 1 | awk '{print \$NF}'")
    oth=$(( 1 - act ))
    n=$([ "$oth" = 0 ] && echo "$t0" || echo "$t1")
    ks=$SECONDS
    out=$(vm_run B "echo \$EPOCHREALTIME; kill -KILL \$(cat /tmp/g$act.pid)") || fail "kill $k"
    kill_at+=("$(echo "$out - $off_b + $off_a" | bc -l)")
    for i in $(seq 120); do [ "$(took "$oth")" -gt "$n" ] && break; sleep 1; done
    [ "$(took "$oth")" -gt "$n" ] || { vm_run B "tail -n 20 /tmp/g$oth.log"; fail "kill $k: g$oth did not take over"; }
    echo "kill $k: g$act SIGKILLed, g$oth took the lock (seen after $(( SECONDS - ks )) s of polling)"
    # The killed one back (passive) before the next kill.
    killed[act]=$(( ${killed[act]:-0} + 1 ))
    vm_run B "for i in \$(seq 300); do [ \$(grep -c 'listening for NBD over SMC-R' /tmp/g$act.log) -gt ${killed[act]} ] && exit 0; sleep 0.2; done; exit 1" >/dev/null ||
        fail "g$act did not come back after kill $k"
    sleep 10
done
vm_run A "touch /tmp/io.stop"
vm_run B "grep -h 'lock\|fenced\|not served' /tmp/g0.log /tmp/g1.log | sort | cut -c12-"
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
locks=$(vm_run B "grep -h 'took the exclusive lock' /tmp/g0.log /tmp/g1.log" |
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
vm_run B "touch /tmp/stop; kill \$(cat /tmp/g0.pid) \$(cat /tmp/g1.pid)" >/dev/null || true
vm_stop
echo "PASS: Ceph in guest B, two gateways over SMC-R: $kills SIGKILLs of the active one under verified I/O from A, 0 errors, 0 bad bytes, I/O back within $worst ms of each kill"
