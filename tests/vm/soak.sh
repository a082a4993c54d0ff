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
#   restart, SIGHUP, on either side.
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
# (default 24: recovery takes ~8-11 s a fault under TCG), SMCR_SOAK_TIME (seconds: faults go on until then; the
# default's limit below does not cover long runs: see tests/vm/README.md).
# About 5 minutes with the defaults on the 2-core TCG machine.
# smcr-timeout: 1200
: "${SMCR_SOAK_FAULTS:=24}"
: "${SMCR_SOAK_TIME:=0}"
: "${SMCR_SOAK_SEED:=42}"
[ "$SMCR_SOAK_SEED" = random ] && SMCR_SOAK_SEED=$(( ${EPOCHREALTIME/./} % 1000000 ))
: "${SMCR_VM_TIMEOUT:=$(( 1140 + SMCR_SOAK_TIME * 2 ))}"
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

# Guest clock minus host clock (us), from the quickest of 8 round trips.
offset() {
    local i t1 t2 tg best=-1 off=0
    for (( i=0; i<8; i++ )); do
        t1=$(us); tg=$(vm_run "$1" 'echo ${EPOCHREALTIME/./}') || return 1; t2=$(us)
        if [ $best -lt 0 ] || [ $((t2 - t1)) -lt $best ]; then
            best=$((t2 - t1)); off=$((tg - (t1 + t2) / 2))
        fi
    done
    echo "$off $((best / 2))"
}
read -r OFF_A ERR_A <<<"$(offset A)" || fail "cannot read A's clock"
read -r OFF_B ERR_B <<<"$(offset B)" || fail "cannot read B's clock"
vm_say "clocks: A = host + $OFF_A us (+- $ERR_A), B = host + $OFF_B us (+- $ERR_B)"

# ---- B: smcrd ---------------------------------------------------------------------
cat >"$SB/smcrd.conf" <<EOF
port = 10809
smcr-port = 10810
[export disk]
path = /tmp/disk.img
EOF
start_srv() {
    vm_bg B "exec $SMCRD -f -c $SB/smcrd.conf -P /tmp/smcrd.pid -L $SB/smcrd.log 2>>$SB/smcrd.err"
}
# wait_srv N: until smcrd has said N times that it listens on SMC-R.
wait_srv() {
    vm_run B "for i in \$(seq 600); do [ \$(grep -c 'listening for NBD over SMC-R' $SB/smcrd.log) -ge $1 ] && exit 0; sleep 0.1; done
tail -n 20 $SB/smcrd.log $SB/smcrd.err; exit 1" || fail "smcrd did not come up in B"
}
vm_run B "truncate -s 256M /tmp/disk.img" >/dev/null || fail "disk image"
srv=$(start_srv)
starts=1
wait_srv $starts

# ---- A: nbdkit, nbd-client, fio, ext4 ---------------------------------------------------
# nbdkit's stderr (libsmcr's and the client library's lines, not the data
# path) stamped with A's clock as the lines arrive: the detection times.
kit=$(vm_bg A "stamp() { local l; while IFS= read -r l; do printf '%s %s\n' \"\$EPOCHREALTIME\" \"\$l\"; done; }
mkfifo /tmp/nbdkit.fifo
stamp </tmp/nbdkit.fifo >$SA/nbdkit.log &
exec nbdkit -f -v -D nbdkit.backend.datapath=0 -U /tmp/nbdkit.sock -P /tmp/nbdkit.pid $PLUGIN \
    server=$B1 export=disk connections=4 timeout=60 2>/tmp/nbdkit.fifo")
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
  --verify_state_save=0 --time_based --runtime=36000 --write_bw_log=/tmp/fio --log_avg_msec=250 \
  --log_unix_epoch=1 --output-format=json --output=/tmp/fio.json 2>/tmp/fio.err & echo \$! >/tmp/fio.pid
wait \$!; rc=\$?; cp /tmp/fio_bw.1.log $SA/fio_bw.log; cat /tmp/fio.err >&2; exit \$rc")

# ---- the group is whole: two links on both ends, four NBD connections ------------------
# whole N: waits (up to 60 s) in A and B at once, keeps both ends' counters
# as snapshot N.
# (every live link group with two active links: after a restart the four
# connections may come back in groups of their own)
JSON_LG='"terminated": *false'
JSON_ACT='"state": *"active"'
whole() {
    local ja jb ra rb
    ja=$(vm_bg A "for i in \$(seq 400); do
  j=\$($SMCRCTL --json status nbdkit-smcr 2>/dev/null)
  g=\$(grep -oE '$JSON_LG' <<<\"\$j\" | wc -l); l=\$(grep -oE '$JSON_ACT' <<<\"\$j\" | wc -l)
  [ \$g -ge 1 ] && [ \$l = \$((2 * g)) ] &&
    [ \$(grep -oE '\"state\": *\"up\", *\"transport' <<<\"\$j\" | wc -l) = 4 ] && { echo \"\$j\"; exit 0; }
  sleep 0.1
done; echo \"\$j\"; exit 1")
    jb=$(vm_bg B "for i in \$(seq 400); do
  j=\$($SMCRCTL --json status smcrd 2>/dev/null)
  g=\$(grep -oE '$JSON_LG' <<<\"\$j\" | wc -l); l=\$(grep -oE '$JSON_ACT' <<<\"\$j\" | wc -l)
  [ \$g -ge 1 ] && [ \$l = \$((2 * g)) ] && { echo \"\$j\"; exit 0; }
  sleep 0.1
done; echo \"\$j\"; exit 1")
    vm_wait -t 150 A "$ja" >"$W/snap.$1.A"; ra=$?
    vm_wait -t 150 B "$jb" >"$W/snap.$1.B"; rb=$?
    [ $ra = 0 ] || fail "fault $1: A not whole again (two links, four NBD connections): $(head -c 600 "$W/snap.$1.A")"
    [ $rb = 0 ] || fail "fault $1: B not whole again (two links): $(head -c 600 "$W/snap.$1.B")"
}
whole 0
sleep 3		# fio's steady state before the first fault

# ---- the faults --------------------------------------------------------------------------
# gt SIDE CMD: runs CMD in the guest and prints the guest time it printed
# (as host us), e.g. right after the action.
gt() {
    local out off
    out=$(vm_run "$1" "$2") || fail "fault: '$2' in $1 failed: $out"
    off=OFF_$1
    out=${out%%$'\n'*}
    echo $(( ${out//./} - ${!off} ))
}
nbd_reconnects() {
    python3 -c 'import json, sys; print(json.load(sys.stdin)[0]["sections"]["nbd"]["stats"]["reconnects"])' 2>/dev/null || echo 0
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
    # the guests' clocks drift under TCG: their offsets again, one round trip
    t1=$(us); ga=$(vm_run A 'echo ${EPOCHREALTIME/./}'); t2=$(us); OFF_A=$((ga - (t1 + t2) / 2))
    t1=$(us); gb=$(vm_run B 'echo ${EPOCHREALTIME/./}'); t2=$(us); OFF_B=$((gb - (t1 + t2) / 2))
    dev=rxe$((link - 1)) eth=eth$((link - 1))
    hs=$(awk -v m="$hold" 'BEGIN { printf "%.3f", m / 1000 }')
    case $kind in
    qp-error)
        t0=$(gt $side "$now; $SMCRCTL fault fail-dev=$dev $(tgt $side) >/dev/null") ;;
    drop)
        t0=$(gt $side "$now; $SMCRCTL fault drop-dev=$dev,for=$hold $(tgt $side) >/dev/null") ;;
    delay)
        t0=$(gt $side "$now; $SMCRCTL fault delay-dev=$dev,ms=200,for=$hold $(tgt $side) >/dev/null") ;;
    cable)
        t0=$(us); vm_cable $link off; sleep "$hs"; vm_cable $link on ;;
    both-down)
        t0=$(us); vm_cable 1 off; vm_cable 2 off; sleep "$hs"; vm_cable 1 on; vm_cable 2 on ;;
    ifdown)
        t0=$(gt $side "$now; ip link set $eth down; sleep $hs; ip link set $eth up") ;;
    rdma-delete)
        t0=$(gt $side "$now; rdma link delete $dev; sleep $hs; rdma link add $dev type rxe netdev $eth") ;;
    netem)
        t0=$(gt $side "$now; tc qdisc add dev $eth root netem loss 5%; sleep $hs; tc qdisc del dev $eth root") ;;
    kill|term)
        sig=KILL; [ $kind = term ] && sig=TERM
        t0=$(gt B "$now; kill -$sig \$(cat /tmp/smcrd.pid)")
        vm_wait -t 60 B "$srv" >/dev/null 2>&1
        [ $kind = term ] && [ $? != 0 ] && fail "fault $i: smcrd did not drain and exit 0 on SIGTERM"
        sleep "$hs"
        srv=$(start_srv); starts=$((starts + 1)); wait_srv $starts
        # all four NBD connections lost and back (else "whole" could pass
        # before A noticed)
        r0=$(nbd_reconnects <"$W/snap.$((i - 1)).A")
        for (( k=0; k<300; k++ )); do
            r=$(vm_run A "$SMCRCTL --json status nbdkit-smcr" 2>/dev/null | nbd_reconnects)
            [ "${r:-0}" -ge $((r0 + 4)) ] && break
            sleep 0.2
        done ;;
    hup)
        t0=$(gt B "$now; kill -HUP \$(cat /tmp/smcrd.pid)") ;;
    *) fail "unknown fault kind $kind" ;;
    esac
    t1=$(us)
    whole "$i"
    t2=$(us)
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
vm_run A 'touch /tmp/ext4.stop; kill -INT $(cat /tmp/fio.pid)' >/dev/null
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
cp "$SA/nbdkit.log" "$SA/fio_bw.log" "$SA/dmesg.txt" "$W/" 2>/dev/null
cp "$SB/smcrd.log" "$W/"
vm_stop

# ---- the report; the counters --------------------------------------------------------------
python3 "$_vm_libdir/soak-report.py" --dir "$W" --seed "$SMCR_SOAK_SEED" \
    --offset-a "$OFF_A" --offset-b "$OFF_B" --qp-timeout "${SMCR_QP_TIMEOUT:-17}" ||
    fail "the counters do not add up (report: $W/report.md)"
echo "report: $W/report.md, plot: $W/timeline.png"
echo "PASS: soak: $n faults in $soak_s s (seed $SMCR_SOAK_SEED) under fio verify and ext4 through nbdkit smcr + nbd-client: no error, counters add up"
