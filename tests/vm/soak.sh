#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# Failover soak through the whole block stack (rxe lane, two links):
#   B: smcrd exports a 256 MiB file over SMC-R (config file, so SIGHUP
#      reloads it);
#   A: nbdkit with the smcr plugin (connections=4) and the kernel's
#      nbd-client on /dev/nbd0 with 4 connections; for the whole soak fio
#      (direct, randrw 4k..256k, iodepth 32, verify=crc32c, verify_fatal)
#      on its first 160 MiB, and ext4 on the last 96 MiB (a loop device over
#      /dev/nbd0 at that offset) taking copies of a file tree;
#   a seeded random schedule of faults (soak-schedule.py), one after the
#   other, each undone and the group whole again (two links on both ends,
#   four NBD connections up) before the next: cable pulls, ifdown/ifup,
#   rdma link delete/add, forced QP errors, injected drops (silent loss)
#   and delays, netem 5% loss, both links down, smcrd SIGKILL/SIGTERM and
#   restart, SIGHUP, a guest paused by qemu (stop/cont, 1-10 s; up to
#   SMCR_SOAK_PAUSE_MS), nbdkit or smcrd SIGSTOPped (1-5 s), on either side
#   (the last two not with SMCR_SOAK_PAUSES=0).
# Pass: fio ends when told to with no verify or I/O error, no I/O error in
# A's kernel log, ext4 fsck clean and every copy's checksums equal after a
# remount in A and from the export file in B, the device read in A equal to
# the file in B, and the counters add up (every link fault failed exactly
# one link on each end, no other fault failed one, every restart was
# recovered by all four connections, no NBD request failed).
# The report (soak-report.py): build/tests/vm/soak.d/report.md and
# timeline.png.
# Knobs: SMCR_SOAK_SEED (default 42, so that make check replays one
# schedule; "random" draws one from the clock; printed), SMCR_SOAK_FAULTS
# (default 24: the first 24 of the schedule, every one of its 13 kinds in
# them; 40 or more for a longer soak), SMCR_SOAK_TIME (seconds: faults go on until then; the
# default's limit below does not cover long runs: see tests/vm/README.md),
# SMCR_SOAK_KINDS (a comma list: only those fault kinds), SMCR_SOAK_PAUSES=0
# (pause and sigstop out of the draw: the schedule before they joined),
# SMCR_SOAK_STRICT_GAPS=1 (an I/O gap over 2 s that no log line explains
# fails the soak; by default the report only lists it).
# About 5 minutes with the defaults on the 2-core TCG machine.
# smcr-timeout: 1800
: "${SMCR_SOAK_FAULTS:=24}"
: "${SMCR_SOAK_TIME:=0}"
: "${SMCR_SOAK_SEED:=42}"
[ "$SMCR_SOAK_SEED" = random ] && SMCR_SOAK_SEED=$(( ${EPOCHREALTIME/./} % 1000000 ))
: "${SMCR_VM_TIMEOUT:=$(( 1740 + SMCR_SOAK_TIME * 2 ))}"
: "${SMCR_VM_MEM:=1024}"
. "$(dirname "$0")/lib.sh"
vm_requires
requires nbdkit --version
requires test -x /usr/sbin/nbd-client
requires fio --version
requires gnuplot --version
PLUGIN=$abs_top_builddir/client/.libs/nbdkit-smcr-plugin.so
SMCRD=$abs_top_builddir/server/smcrd
SMCRCTL=$abs_top_builddir/client/smcrctl
for f in "$PLUGIN" "$SMCRD" "$SMCRCTL"; do [ -e "$f" ] || fail "$f not built"; done
faults=$SMCR_SOAK_FAULTS
[ "$SMCR_SOAK_TIME" -gt 0 ] && faults=1000000
echo "soak: seed $SMCR_SOAK_SEED (SMCR_SOAK_SEED=$SMCR_SOAK_SEED replays this schedule), $([ "$SMCR_SOAK_TIME" -gt 0 ] && echo "faults for ${SMCR_SOAK_TIME} s" || echo "$faults faults")"
vm_start_pair
W=$_vm_work SA=$(vm_share A) SB=$(vm_share B)
python3 "$_vm_libdir/soak-schedule.py" "$SMCR_SOAK_SEED" "$((faults < 100000 ? faults : 100000))" >"$W/schedule" ||
    fail "no schedule"
B1=$(vm_ip B 1)
us() { echo "${EPOCHREALTIME/./}"; }

# ---- B: smcrd ---------------------------------------------------------------------
cat >"$SB/smcrd.conf" <<EOF
port = 10809
smcr-port = 10810
[export disk]
path = /tmp/disk.img
EOF
# A daemon that crashes leaves its core in the share; a failure prints its
# backtrace (gdb on the host: the guests run the host's binaries).
for v in A B; do
    vm_run $v "echo $(vm_share $v)/core.%e.%p >/proc/sys/kernel/core_pattern" >/dev/null ||
        fail "core_pattern in $v"
done
cores() {
    local c
    for c in "$SA"/core.* "$SB"/core.*; do
        [ -e "$c" ] || continue
        echo "--- $c:"
        gdb -batch -nx -ex 'info sharedlibrary' -ex 'thread apply all bt' \
            "$(file -b "$c" | sed -n "s/.*execfn: '\([^']*\)'.*/\1/p")" "$c" 2>&1 |
            grep -v '^\[New LWP\|^warning: ' | head -n 150
    done
}
eval "lib_$(declare -f fail)"
fail() { cores; lib_fail "$@"; }
start_srv() {
    vm_bg B "ulimit -c unlimited
exec $SMCRD -f -c $SB/smcrd.conf -P /tmp/smcrd.pid -L $SB/smcrd.log 2>>$SB/smcrd.err"
}
# wait_srv N: until smcrd has said N times that it listens on SMC-R (its
# log is in the share: read here, no job in the guest).
wait_srv() {
    local i c
    for (( i=0; i<600; i++ )); do
        c=$(grep -c 'listening for NBD over SMC-R' "$SB/smcrd.log" 2>/dev/null)
        [ "${c:-0}" -ge "$1" ] && return 0
        sleep 0.1
    done
    tail -n 20 "$SB/smcrd.log" "$SB/smcrd.err"
    fail "smcrd did not come up in B"
}
vm_run B "truncate -s 256M /tmp/disk.img" >/dev/null || fail "disk image"
srv=$(start_srv)
starts=1
wait_srv $starts

# ---- A: nbdkit, nbd-client, fio, ext4 ---------------------------------------------------
# nbdkit's stderr: libsmcr's and the client library's lines (not the data
# path), each stamped by the plugin when it is logged (smcr[EPOCH.ms]),
# in A's clock: the detection times.
kit=$(vm_bg A "ulimit -c unlimited
exec nbdkit -f -v -D nbdkit.backend.datapath=0 -U /tmp/nbdkit.sock -P /tmp/nbdkit.pid $PLUGIN \
    server=$B1 export=disk connections=4 timeout=60 2>$SA/nbdkit.log")
vm_run -t 120 A '
set -e
for i in $(seq 600); do grep -q "nbd: smcr://" '$SA'/nbdkit.log 2>/dev/null && break; sleep 0.1; done
grep -q "nbd: smcr://" '$SA'/nbdkit.log || { tail -n 30 '$SA'/nbdkit.log; exit 1; }
modprobe nbd
nbd-client -N "" -b 4096 -C 4 -t 600 -u /tmp/nbdkit.sock /dev/nbd0 >/dev/null
[ "$(blockdev --getsize64 /dev/nbd0)" = 268435456 ]
dmesg -c >/dev/null' || fail "nbdkit smcr + nbd-client did not come up in A"

(cd /usr/include/linux && find . -type f -print0 | LC_ALL=C sort -z | xargs -0 sha256sum) >"$SA/tree.sha" ||
    fail "checksums of the tree"
# ext4 is made before fio starts (mkfs through a loaded queue took minutes);
# the copies go on during the faults, at least one, up to 8.
vm_run -t 120 A "set -e
modprobe loop
loop=\$(losetup -f --show -o $((160 << 20)) --sizelimit $((96 << 20)) /dev/nbd0)
echo \$loop >/tmp/loop
mkfs.ext4 -q -F -E lazy_itable_init=0,lazy_journal_init=0 \$loop
mkdir -p /mnt/x && mount \$loop /mnt/x" || fail "ext4 on /dev/nbd0"
ext4=$(vm_bg A "set -e
n=0
while [ \$n -lt 8 ]; do
    n=\$((n + 1)); cp -a /usr/include/linux /mnt/x/tree\$n; sync
    [ -e /tmp/ext4.stop ] && break
done
echo \$n >/tmp/ext4.copies
echo \"ext4: \$n copies of /usr/include/linux written during the soak\"")
fio=$(vm_bg A "fio --name=soak --filename=/dev/nbd0 --offset=0 --size=160M --rw=randrw --bsrange=4k-256k \
  --iodepth=32 --ioengine=libaio --direct=1 --verify=crc32c --verify_fatal=1 --verify_backlog=256 \
  --verify_state_save=0 --time_based --runtime=36000 --write_lat_log=/tmp/fio --log_avg_msec=0 \
  --log_unix_epoch=1 --output-format=json --output=/tmp/fio.json 2>/tmp/fio.err & echo \$! >/tmp/fio.pid
wait \$!; rc=\$?; cp /tmp/fio_clat.1.log $SA/fio_clat.log; cat /tmp/fio.err >&2; exit \$rc")

# ---- the group is whole: two links on both ends, four NBD connections ------------------
# A watcher in each guest (one job for the whole soak: a job per look cost
# 1 to 8 s a round trip under the load, and every exec of a dynamically
# linked program in A ~2 s): one "smcrctl --json --watch 0.2 status" feeds
# one awk (bash took seconds a 5 KB line in A), which writes each JSON to
# watch.json (between a "SEQ" and a "SEQ end" line: a look over 4 KiB is
# written in pieces, and the host must not take half of one) and says
# "SEQ WHOLE"; bash stamps that into a line
# "SEQ GUEST_TIME WHOLE GUEST_TIME" in watch.  Whole is every live link
# group with two active links (after a restart the four connections may
# come back in groups of their own) and, in A, four NBD connections up.
# The host reads both from the share; the line's guest time against the
# file's mtime (set by the host as the write lands) is the guest's clock
# offset, a sample per look: no round trip to measure.
cat >"$W/watch.awk" <<'EOF'
{
	n++
	printf "%d\n%s\n%d end\n", n, $0, n > json
	close(json)
	g = gsub(/"terminated":false/, "&")
	l = gsub(/"state":"active"/, "&")
	u = gsub(/"state":"up","transport/, "&")
	print n, (g >= 1 && l == 2 * g && u == want) ? 1 : 0
	fflush()
}
EOF
cp "$W/watch.awk" "$SA/watch.awk"
cp "$W/watch.awk" "$SB/watch.awk"
# mawk reads a pipe in blocks unless told otherwise
AWK=awk; command -v mawk >/dev/null && AWK="mawk -W interactive"
watcher() {	# SIDE TARGET CONNECTIONS
    local S; S=$(vm_share "$1")
    vm_bg "$1" "mkfifo /tmp/w1 /tmp/w2	# (no /dev/fd in the guest for a <(...))
$SMCRCTL --json --watch 0.2 status $2 >/tmp/w1 2>/dev/null & p1=\$!
$AWK -v json=$S/watch.json -v want=$3 -f $S/watch.awk </tmp/w1 >/tmp/w2 & p2=\$!
trap 'kill \$p1 \$p2' EXIT
exec 8</tmp/w2
while [ ! -e /tmp/watch.stop ] && read -r -u 8 seq ok; do
    while read -r -t 0 -u 8; do read -r -u 8 seq ok || break; done
    printf '%s %s %s %s\\n' \$seq \"\$EPOCHREALTIME\" \$ok \$EPOCHREALTIME >$S/watch
done
exit 0"
}
watch_a=$(watcher A nbdkit-smcr 4)
watch_b=$(watcher B smcrd 0)
# look SIDE: the watcher's last line: W_SEQ, W_OK, W_T (guest time it read
# the JSON), W_OFF (guest minus host clock, us, from the line's stamp and
# the file's mtime); 1 if none yet.
look() {
    local f m1 m2 line
    f=$(vm_share "$1")/watch
    for (( k=0; k<5; k++ )); do
        m1=$(stat -c %.6Y "$f" 2>/dev/null) || return 1
        line=$(<"$f")
        m2=$(stat -c %.6Y "$f" 2>/dev/null) || return 1
        [ "$m1" = "$m2" ] || continue
        read -r W_SEQ gtime W_OK W_T <<<"$line"
        [ -n "$W_T" ] || continue
        W_OFF=$(( ${gtime/./} - ${m1/./} ))
        return 0
    done
    return 1
}
# whole N [RECONNECTS]: waits (up to 150 s) until both watchers saw the
# group whole in a look taken after this call (two lines on, and read 0.5 s
# after it: smcrctl asks every 0.2 s) and A's NBD reconnects at RECONNECTS
# or more; keeps those looks as snapshot N, the offsets as OFF_A/OFF_B.
nbd_reconnects() {
    python3 -c 'import json, sys; print(json.load(sys.stdin)[0]["sections"]["nbd"]["stats"]["reconnects"])' 2>/dev/null || echo 0
}
whole() {
    local n=$1 rmin=${2:-0} side done_A=0 done_B=0 end json tmin
    local -A from
    tmin=$(( $(us) + 500000 ))
    for side in A B; do
        look $side || W_SEQ=0
        from[$side]=$((W_SEQ + 2))	# the next look may have begun before now
    done
    end=$(( $(us) + 150000000 ))
    while [ $done_A = 0 ] || [ $done_B = 0 ]; do
        for side in A B; do
            [ $side = A ] && [ $done_A = 1 ] && continue
            [ $side = B ] && [ $done_B = 1 ] && continue
            look $side || continue
            [ "$W_SEQ" -ge "${from[$side]}" ] && [ "$W_OK" = 1 ] &&
                [ $(( ${W_T/./} - W_OFF )) -ge $tmin ] || continue
            json=$(<"$(vm_share $side)/watch.json")
            [ "${json%%$'\n'*}" = "$W_SEQ" ] || continue	# the next look's already
            # read whole: not while awk was still writing a look over 4 KiB
            [ "${json##*$'\n'}" = "$W_SEQ end" ] || continue
            json=${json#*$'\n'}
            json=${json%$'\n'*}
            if [ $side = A ] && [ "$rmin" -gt 0 ]; then
                [ "$(nbd_reconnects <<<"$json")" -ge "$rmin" ] || continue
            fi
            printf '%s\n' "$json" >"$W/snap.$n.$side"
            echo "$W_T" >"$W/snap.$n.$side.t"	# its guest time (the report's count window)
            printf -v "OFF_$side" %s "$W_OFF"
            printf -v "done_$side" 1
        done
        [ "$(us)" -lt $end ] || break
        sleep 0.05
    done
    for side in A B; do
        wid=$watch_a; [ $side = B ] && wid=$watch_b
        [ -e "$(vm_share $side)/out/$wid.rc" ] &&
            fail "fault $n: the watcher in $side ended: $(tail -n 5 "$(vm_share $side)/out/$wid.err")"
    done
    [ -e "$SB/out/$srv.rc" ] && [ $done_B = 0 ] &&
        fail "fault $n: smcrd in B ended (exit status $(cat "$SB/out/$srv.rc"); 139: SIGSEGV): $(tail -n 3 "$SB/smcrd.log")"
    [ $done_A = 1 ] || fail "fault $n: A not whole again (two links, four NBD connections): $(head -c 600 "$(vm_share A)/watch.json")"
    [ $done_B = 1 ] || fail "fault $n: B not whole again (two links): $(head -c 600 "$(vm_share B)/watch.json")"
}
whole 0
vm_say "clocks: A = host + $OFF_A us, B = host + $OFF_B us (the watchers' looks)"
sleep 3		# fio's steady state before the first fault

# ---- the faults --------------------------------------------------------------------------
# An executor in each guest runs the fault commands: it looks for a new
# x.cmd in the share every 100 ms (bash builtins only), runs it and writes
# "ID STATUS", the output and "end ID" to x.out; a job per command (vm_run) cost
# 3 to 5 s more in A under the load.
executor() {	# SIDE
    local S; S=$(vm_share "$1")
    vm_bg "$1" "mkfifo /tmp/x.tick; exec 9<>/tmp/x.tick
last=0
while [ ! -e /tmp/watch.stop ]; do
    c=
    [ -e $S/x.cmd ] && { read -r -d '' c <$S/x.cmd || :; }
    if [ -n \"\$c\" ] && [ \"\${c%%\$'\\n'*}\" != \$last ]; then
        last=\${c%%\$'\\n'*}
        out=\$(eval \"\${c#*\$'\\n'}\" 2>&1)
        printf '%s %s\\n%s\\nend %s\\n' \$last \$? \"\$out\" \$last >$S/x.out
    fi
    read -r -t 0.1 -u 9 _
done
exit 0"
}
exec_a=$(executor A)
exec_b=$(executor B)
# gx SIDE CMD: runs CMD through the executor, prints its output; its status.
gx() {
    local S out id i body
    S=$(vm_share "$1")
    id=${EPOCHREALTIME/./}	# (gx runs in $(...): no counter survives it)
    printf '%s\n%s\n' $id "$2" >"$S/x.cmd.tmp"
    mv "$S/x.cmd.tmp" "$S/x.cmd"
    for (( i=0; i<6000; i++ )); do
        if [ -e "$S/x.out" ]; then
            out=$(<"$S/x.out")
            if [ "${out##*$'\n'}" = "end $id" ]; then
                body=${out#*$'\n'}
                printf '%s\n' "${body%$'\n'*}"
                out=${out%%$'\n'*}
                return "${out#* }"
            fi
        fi
        sleep 0.02
    done
    fail "the executor in $1 did not run '$2' within 120 s"
}
# gt SIDE CMD: runs CMD in the guest and prints the guest time it printed
# (as host us), e.g. right before the action.
gt() {
    local out off
    out=$(gx "$1" "$2") || fail "fault: '$2' in $1 failed: $out"
    off=OFF_$1
    out=${out%%$'\n'*}
    echo $(( ${out//./} - ${!off} ))
}
tgt() { [ "$1" = A ] && echo nbdkit-smcr || echo smcrd; }
now='echo $EPOCHREALTIME'
: >"$W/faults.tsv"
t_soak=$(us)
n=0
while read -r i kind side link hold gap; do
    if [ "$SMCR_SOAK_TIME" -gt 0 ]; then
        [ $(( ($(us) - t_soak) / 1000000 )) -ge "$SMCR_SOAK_TIME" ] && break
    fi
    # the guests' clocks drift under TCG: their offsets from the watchers'
    # last looks
    look A && OFF_A=$W_OFF
    look B && OFF_B=$W_OFF
    dev=rxe$((link - 1)) eth=eth$((link - 1))
    hs=$(awk -v m="$hold" 'BEGIN { printf "%.3f", m / 1000 }')
    case $kind in
    qp-error)
        t0=$(gt $side "$now; $SMCRCTL fault fail-dev=$dev $(tgt $side) >/dev/null") ;;
    # (the daemon undoes a drop or delay itself after 'for': wait as long)
    drop)
        t0=$(gt $side "$now; $SMCRCTL fault drop-dev=$dev,for=$hold $(tgt $side) >/dev/null")
        sleep "$hs" ;;
    delay)
        t0=$(gt $side "$now; $SMCRCTL fault delay-dev=$dev,ms=200,for=$hold $(tgt $side) >/dev/null")
        sleep "$hs" ;;
    cable)	# t0: A's end is out (a QMP call each end, ~0.3 s apart)
        vm_link A $link off; t0=$(us); vm_link B $link off
        sleep "$hs"; vm_cable $link on ;;
    both-down)
        vm_link A 1 off; t0=$(us); vm_link A 2 off; vm_link B 1 off; vm_link B 2 off
        sleep "$hs"; vm_cable 1 on; vm_cable 2 on ;;
    # the time after the command that makes the fault (an exec costs ~2 s
    # in A under the load, nearly all of it before the command acts); not
    # for rdma link delete: it returns once the program closed the device
    ifdown)
        t0=$(gt $side "ip link set $eth down; $now; sleep $hs; ip link set $eth up") ;;
    rdma-delete)
        t0=$(gt $side "$now; rdma link delete $dev; sleep $hs; rdma link add $dev type rxe netdev $eth") ;;
    netem)
        t0=$(gt $side "tc qdisc add dev $eth root netem loss 5%; $now; sleep $hs; tc qdisc del dev $eth root") ;;
    kill|term)
        sig=KILL; [ $kind = term ] && sig=TERM
        t0=$(gt B "$now; kill -$sig \$(cat /tmp/smcrd.pid)")
        vm_wait -t 60 B "$srv" >/dev/null 2>&1
        [ $kind = term ] && [ $? != 0 ] && fail "fault $i: smcrd did not drain and exit 0 on SIGTERM"
        sleep "$hs"
        srv=$(start_srv); starts=$((starts + 1)); wait_srv $starts
        # whole only with all four NBD connections lost and back (else it
        # could pass before A noticed)
        rmin=$(( $(nbd_reconnects <"$W/snap.$((i - 1)).A") + 4 )) ;;
    hup)
        t0=$(gt B "$now; kill -HUP \$(cat /tmp/smcrd.pid)") ;;
    pause)	# t0: qemu's reply to stop (its watcher and executor stop too)
        read -r tp0 _ < <(vm_pause $side "$hs") && [ -n "$tp0" ] || fail "fault $i: qemu stop/cont of $side failed"
        t0=${tp0/./} ;;
    sigstop)
        pf=/tmp/smcrd.pid; [ $side = A ] && pf=/tmp/nbdkit.pid
        t0=$(gt $side "$now; kill -STOP \$(cat $pf); sleep $hs; kill -CONT \$(cat $pf)") ;;
    *) fail "unknown fault kind $kind" ;;
    esac
    # (gt's fail ends only its $(...): its message is above)
    [ -n "$t0" ] || fail "fault $i: $kind in $side: the fault command failed"
    t1=$(us)
    whole "$i" "${rmin:-0}"
    t2=$(us)
    rmin=0
    printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$i" "$kind" "$side" "$link" "$t0" "$t1" "$t2" \
        "$OFF_A" "$OFF_B" >>"$W/faults.tsv"
    vm_say "fault $i: $kind ($side, link $link, held ${hold} ms): whole again after $(( (t2 - t0) / 1000 )) ms"
    n=$i
    sleep "$(awk -v m="$gap" 'BEGIN { printf "%.3f", m / 1000 }')"
done <"$W/schedule"
soak_s=$(( ($(us) - t_soak) / 1000000 ))
vm_say "$n faults in $soak_s s"

# ---- the end: fio, ext4, the device against the file -------------------------------------
sleep 2
vm_run B 'touch /tmp/watch.stop' >/dev/null
vm_run A 'touch /tmp/watch.stop /tmp/ext4.stop; kill -INT $(cat /tmp/fio.pid)' >/dev/null
for j in "A $watch_a" "B $watch_b" "A $exec_a" "B $exec_b"; do
    vm_wait -t 60 $j >/dev/null || fail "a watcher or executor failed in ${j% *}"
done
fout=$(vm_wait -t 120 A "$fio" 2>&1); frc=$?
eout=$(vm_wait -t 300 A "$ext4" 2>&1) || { echo "$eout"; fail "ext4 copies failed"; }
echo "$eout"
vm_run A 'cat /tmp/fio.json' >"$W/fio.json" || fail "no fio output"
echo "$fout" | grep -v '^fio: terminating on signal' | grep . | sed 's/^/fio: /'
python3 - "$W/fio.json" "$frc" <<'PY' || fail "fio: errors (exit status $frc)"
import json, sys
t = open(sys.argv[1]).read()
j = json.loads(t[t.index("{"):])["jobs"][0]
r, w = j["read"], j["write"]
print("fio: read %d MiB, wrote %d MiB in %d s (randrw 4k..256k, iodepth 32, verify=crc32c, "
      "verify_backlog=256), error %d, exit status %s"
      % (r["io_kbytes"] >> 10, w["io_kbytes"] >> 10, j["elapsed"], j["error"], sys.argv[2]))
assert j["error"] == 0 and w["io_kbytes"] > 0 and r["io_kbytes"] > 0
assert sys.argv[2] in ("0", "1", "128", "130") and sys.argv[2] != "1" or j["error"] == 0
PY
echo "$fout" | grepq -iE 'verify|bad magic|crc32c|error' && { echo "$fout"; fail "fio reported a verify or I/O error"; }

out=$(vm_run -t 300 A "set -e
loop=\$(cat /tmp/loop)
umount /mnt/x
fsck.ext4 -fn \$loop >/tmp/fsck.out 2>&1 || { cat /tmp/fsck.out; echo 'FAIL: fsck'; exit 1; }
echo 3 >/proc/sys/vm/drop_caches
mount -o ro \$loop /mnt/x
n=\$(cat /tmp/ext4.copies)
for c in \$(seq \$n); do
    (cd /mnt/x/tree\$c && find . -type f -print0 | LC_ALL=C sort -z | xargs -0 sha256sum) >/tmp/got
    cmp -s $SA/tree.sha /tmp/got || { echo \"FAIL: copy \$c differs after the remount\"; exit 1; }
done
umount /mnt/x
losetup -d \$loop
echo \"ext4 in A: fsck clean, \$n copies of \$(wc -l <$SA/tree.sha) files equal after a remount\"
sync; echo 3 >/proc/sys/vm/drop_caches
dd if=/dev/nbd0 bs=1M iflag=direct status=none | sha256sum | cut -d' ' -f1 >$SA/dev.sha
nbd-client -d /dev/nbd0 >/dev/null
kill \$(cat /tmp/nbdkit.pid)
dmesg >$SA/dmesg.txt
if grep -iE 'I/O error|blk_update_request|nbd[0-9].*(timed out|error|dead)|EXT4-fs (error|warning)|Buffer I/O' $SA/dmesg.txt; then
    echo 'FAIL: errors in the kernel log'; exit 1
fi
echo 'A kernel log: no I/O error'") || { echo "$out"; fail "the end in A failed"; }
echo "$out"
vm_wait -t 60 A "$kit" >/dev/null 2>&1 || fail "nbdkit did not exit cleanly"
vm_run B 'kill -HUP $(cat /tmp/smcrd.pid)' >/dev/null	# the log shows the last reload
vm_run B "$SMCRCTL --json stats smcrd" >"$W/snap.end.B" 2>/dev/null
out=$(vm_run -t 300 B "set -e
p=\$(cat /tmp/smcrd.pid); kill \$p
for i in \$(seq 300); do [ -e /proc/\$p ] || break; sleep 0.1; done
modprobe loop
want=\$(cat $SA/dev.sha)
got=\$(sha256sum /tmp/disk.img | cut -d' ' -f1)
[ \"\$want\" = \"\$got\" ] || { echo \"FAIL: the device read in A (\$want) differs from the file in B (\$got)\"; exit 1; }
loop=\$(losetup -f --show -r -o $((160 << 20)) --sizelimit $((96 << 20)) /tmp/disk.img)
fsck.ext4 -fn \$loop >/tmp/fsck.out 2>&1 || { cat /tmp/fsck.out; echo 'FAIL: fsck in B'; exit 1; }
mkdir -p /mnt/x && mount -o ro \$loop /mnt/x
for d in /mnt/x/tree*; do
    (cd \$d && find . -type f -print0 | LC_ALL=C sort -z | xargs -0 sha256sum) >/tmp/got
    cmp -s $SA/tree.sha /tmp/got || { echo \"FAIL: \$d differs in B\"; exit 1; }
done
umount /mnt/x; losetup -d \$loop
echo \"B: the export file equals the device A read (sha256 \${want:0:16}...); its ext4 fsck clean, every copy equal\"") ||
    { echo "$out"; fail "the export file in B does not check"; }
echo "$out"
vm_wait -t 60 B "$srv" >/dev/null 2>&1 || fail "smcrd did not exit cleanly at the end"
cp "$SA/nbdkit.log" "$SA/fio_clat.log" "$SA/dmesg.txt" "$W/" 2>/dev/null
cp "$SB/smcrd.log" "$W/"
vm_stop

# ---- the report; the counters --------------------------------------------------------------
python3 "$_vm_libdir/soak-report.py" --dir "$W" --seed "$SMCR_SOAK_SEED" \
    --offset-a "$OFF_A" --offset-b "$OFF_B" --qp-timeout "${SMCR_QP_TIMEOUT:-19}" \
    ${SMCR_SOAK_STRICT_GAPS:+--strict-gaps} ||
    fail "the counters do not add up (report: $W/report.md)"
echo "report: $W/report.md, plot: $W/timeline.png"
echo "PASS: soak: $n faults in $soak_s s (seed $SMCR_SOAK_SEED) under fio verify and ext4 through nbdkit smcr + nbd-client: no error, counters add up"
