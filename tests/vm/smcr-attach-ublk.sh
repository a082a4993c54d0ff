#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# smcr-attach --ublk in the rxe lane (Linux 6.12 guests: ublk_drv): A's
# /dev/ublkb0 is served by smcr-attach through io_uring, its requests
# sent over libsmcr's SMC-R (two links) to smcrd in B.  Checked: the
# device's size, block sizes and discard; the engine's connections are
# SMC-R; a second smcr-attach on the device says it is busy; mkfs.ext4 with a tree of files, fsck clean and checksums equal
# after a remount; fio randrw with crc32c verification while the cable of
# link 1 is out; smcrd killed and restarted under I/O (reconnect and
# resend, data read back equal); smcr-attach SIGKILLed under fio verify
# and a new smcr-attach --ublk=0 --recover taking the device over (fio
# sees no error, the recovery time printed); no I/O error in A's kernel
# log; a signal removes the device and the last server exits 0 with no
# failed request.  SMCR_UBLK_COPY_MODE=1: the older copy mode instead of
# USER_COPY.  SMCR_UBLK_KILLS=N (default 1): N SIGKILLs and restarts by
# hand (smcr-attach --recover started once the old one is gone) under one
# fio verify job, then SMCR_UBLK_STANDBY=M (default 1) SIGKILLs each taken
# over by an smcr-attach --standby started ahead; the time from each
# restart to I/O back printed (min/median/max; the aim is 2 s).  With
# N + M > 2 nothing else runs (no ext4, cable pull or smcrd restart;
# about 45 s a by-hand kill on a busy host, so from 8 kills on give
# SMCR_VM_SLOW=2 or more: run-test's limit is this file's 480 s times
# it).  The first smcr-attach makes the device with --recover=auto, and
# the by-hand restarts take it over with --recover, every second one with
# --recover=auto (what smcr-attach-ublk@.service runs).
# SMCR_UBLK_TRACE=1: the kernel's side of each restart from ftrace (from
# the SIGKILL to I/O back), and smcr-attach's own (SMCR_UBLK_TRACE=1 in
# its environment: its steps and its first 64 requests).
# smcr-timeout: 480
: "${SMCR_UBLK_KILLS:=1}" "${SMCR_UBLK_STANDBY:=1}"
KILLS=$SMCR_UBLK_KILLS STANDBYS=$SMCR_UBLK_STANDBY
: "${SMCR_VM_TIMEOUT:=$((420 + 30 * KILLS + 20 * STANDBYS))}"
. "$(dirname "$0")/lib.sh"
vm_kernel 6.12
vm_requires
requires fio --version
requires mkfs.ext4 -V
SMCRD=$abs_top_builddir/server/smcrd
ATTACH=$abs_top_builddir/client/smcr-attach
SMCRCTL=$abs_top_builddir/client/smcrctl
for f in "$SMCRD" "$ATTACH" "$SMCRCTL"; do [ -x "$f" ] || fail "$f not built"; done
[ -e "/lib/modules/$VM_KVER/kernel/drivers/block/ublk_drv.ko" ] ||
    [ -e "/lib/modules/$VM_KVER/kernel/drivers/block/ublk_drv.ko.xz" ] ||
    skip "kernel $VM_KVER has no ublk_drv module"
envs=
[ "${SMCR_UBLK_COPY_MODE:-0}" = 1 ] && envs="SMCR_UBLK_NO_USER_COPY=1"
trace=${SMCR_UBLK_TRACE:-0}
[ "$trace" = 1 ] && envs="${envs:+$envs }SMCR_UBLK_TRACE=1"
vm_start_pair

B1=$(vm_ip B 1)
start_smcrd() {
    vm_bg B "exec $SMCRD -f -P /tmp/smcrd.pid -p 10809 --smcr-port 10810 -e disk=/tmp/disk.img >>/tmp/smcrd.log 2>&1" >/dev/null
    vm_run B "for i in \$(seq 300); do [ \$(grep -c 'listening for NBD over SMC-R' /tmp/smcrd.log) -ge $1 ] && exit 0; sleep 0.1; done
tail -n 20 /tmp/smcrd.log; exit 1" || fail "smcrd did not come up in B"
}
# One smcr-attach --ublk=0 (ARGS: more options), its pid in /tmp/attach.pid;
# waits for the line RE in its log (the N-th).
start_attach() {
    local re=$1 n=$2; shift 2
    vm_bg A "echo \$\$ >/tmp/attach.pid; exec env $envs $ATTACH --ublk=0 -C 2 -D 60 $* $B1:10810 disk 2>>/tmp/attach.log"
    vm_run A "for i in \$(seq 600); do [ \$(grep -c '$re' /tmp/attach.log) -ge $n ] && exit 0; sleep 0.1; done
cat /tmp/attach.log; dmesg | grep -i ublk; exit 1" || fail "smcr-attach --ublk $*: no '$re'"
}
noerr() {
    vm_run A "dmesg | grep -c 'I/O error' || true" | grepq -x 0 ||
        { vm_run A "dmesg | tail -n 30; cat /tmp/attach.log"; fail "$1: I/O errors in A's kernel log"; }
}
vm_run B "truncate -s 256M /tmp/disk.img" || fail "disk"
start_smcrd 1

att=$(start_attach 'connection(s) over SMC-R, ' 1 --recover=auto)
vm_run A "cat /tmp/attach.log"
vm_run A "grep -q '2 connection(s) (smcr)' /tmp/attach.log" || fail "the engine's connections are not SMC-R"
vm_run A "$SMCRCTL status smcr-attach | grep -E 'link group|NBD export|^  [01] +up'" ||
    fail "smcrctl status smcr-attach"
# Busy: /dev/ublkb0 exists, and its server is alive (one line each, exit 1,
# before any connection).
out=$(vm_run A "$ATTACH --ublk=0 $B1:10810 disk 2>&1; echo \"exit \$?\"; $ATTACH --ublk=0 --recover $B1:10810 disk 2>&1; echo \"exit \$?\"")
echo "$out"
[ "$(echo "$out" | grep -c '^exit 1$')" = 2 ] || fail "a second smcr-attach on /dev/ublkb0 did not exit 1"
echo "$out" | grepq 'error: ublk: /dev/ublkb0 is busy: it exists (served;' || fail "no 'busy: it exists' line"
echo "$out" | grepq 'error: ublk: /dev/ublkb0 is busy: its server (pid [0-9]*) is running' ||
    fail "--recover of a served device: no 'busy' line"
out=$(vm_run A 'q=/sys/block/ublkb0/queue
echo "size $(blockdev --getsize64 /dev/ublkb0) lbs $(cat $q/logical_block_size) pbs $(cat $q/physical_block_size) discard $(cat $q/discard_max_bytes) wz $(cat $q/write_zeroes_max_bytes) cache $(cat $q/write_cache) fua $(cat $q/fua)"') ||
    fail "/sys/block/ublkb0"
echo "/dev/ublkb0: $out"
echo "$out" | grepq '^size 268435456 lbs 512 pbs 4096 discard [1-9][0-9]* wz [1-9][0-9]* cache write back fua 1$' ||
    fail "/dev/ublkb0's size, block sizes, discard, write-zeroes, cache or FUA are not the export's"

# The longer recovery run (more than one kill of each kind) leaves out
# ext4, the cable pull and the smcrd restart.
if (( KILLS + STANDBYS <= 2 )); then
    out=$(vm_run -t 200 A "bash $_vm_libdir/ext4-check.sh /dev/ublkb0") ||
        { echo "$out"; vm_run A "cat /tmp/attach.log"; fail "ext4 over /dev/ublkb0 failed"; }
    echo "$out"
    echo "$out" | grepq "^ext4: .* checksums equal after remount" || fail "no ext4 verdict"
    noerr "ext4"

    # fio randrw, every block verified, while link 1's cable is out for 4 s.
    fio=$(vm_bg A "fio --name=cable --filename=/dev/ublkb0 --direct=1 --ioengine=libaio \
        --iodepth=16 --rw=randrw --bs=16k --size=16M --offset=160M --verify=crc32c --verify_fatal=1 \
        --do_verify=1 --output-format=normal 2>&1")
    sleep 4
    vm_say "cable of link 1 out"
    vm_cable 1 off
    sleep 4
    vm_cable 1 on
    vm_say "cable of link 1 back"
    out=$(vm_wait -t 200 A "$fio") || { echo "$out"; vm_run A "cat /tmp/attach.log; dmesg | tail -n 30"; fail "fio failed across the cable pull"; }
    echo "$out" | grep -E 'err=|READ:|WRITE:' | sed 's/^/  fio: /'
    echo "$out" | grepq 'err= 0' || fail "fio reports errors"
    noerr "cable pull"

    # smcrd dies under I/O and comes back: the engine reconnects, resends.
    io=$(vm_bg A 'set -e; head -c 16M /dev/urandom >/tmp/src; t0=$(date +%s%N)
    for i in $(seq 16); do
        dd if=/tmp/src of=/dev/ublkb0 bs=1M count=1 skip=$((i - 1)) seek=$((191 + i)) oflag=direct status=none; done
    dd if=/dev/ublkb0 of=/tmp/back bs=1M skip=192 count=16 iflag=direct status=none
    cmp /tmp/back /tmp/src && echo "I/O across the smcrd restart: 16 MiB written, read back equal ($((($(date +%s%N) - t0) / 1000000)) ms)"')
    sleep 2
    vm_run B 'kill -KILL $(cat /tmp/smcrd.pid)' >/dev/null
    sleep 2
    start_smcrd 2
    out=$(vm_wait -t 200 A "$io") || { echo "$out"; vm_run A "cat /tmp/attach.log; dmesg | tail -n 20"; vm_run B "tail -n 30 /tmp/smcrd.log"; fail "I/O failed across the smcrd restart"; }
    echo "$out"
    noerr "smcrd restart"
fi

# smcr-attach dies (SIGKILL) under fio verify, KILLS times; /dev/ublkb0
# stays, its requests wait; each time a new smcr-attach takes it over and
# fio goes on.  fio writes until told and reads back every block it wrote
# as it goes (verify_backlog), so I/O is in flight at every SIGKILL.
# What an exec of smcr-attach costs in A by itself (ld.so and its
# libraries over the guest's 9p root, under TCG): three runs of --help,
# beside smcrctl's (libsmcr without gnutls and the NBD client).
vm_run A "for i in 1 2 3; do for p in $ATTACH $SMCRCTL; do t0=\$EPOCHREALTIME; \$p --help >/dev/null 2>&1; t1=\$EPOCHREALTIME
echo \"\${p##*/} --help in A: \$(( (\${t1/./} - \${t0/./}) / 1000 )) ms, \$(ldd \$p | wc -l) objects\"; done; done"
fio=$(vm_bg A "fio --name=recover --filename=/dev/ublkb0 --direct=1 --ioengine=libaio \
    --iodepth=16 --rw=randwrite --bs=16k --size=16M --offset=128M --verify=crc32c --verify_fatal=1 \
    --verify_backlog=32 --time_based --runtime=3600 --output-format=normal >/tmp/fio.out 2>&1 &
echo \$! >/tmp/fio.pid; wait \$!; echo \"fio exit \$?\" >>/tmp/fio.out; cat /tmp/fio.out")
sleep 4
# One restart, all in one guest command (no round trip of the lane in
# the figures): SIGKILL; once the old process is gone, the new one starts
# and a 4 KiB O_DIRECT read of /dev/ublkb0 is issued (it waits with fio's
# requests); "I/O back" is when that read is done.  The read comes from
# ublk-probe.py, started (and the device opened) before the SIGKILL: a
# process started after it (dd) took 1-2 s to exec and issue its read in
# a guest whose CPU fio and the new server share, after the device was
# back.
# probe OFFSET (a function of the guest's scripts): the probe, waiting on
# /tmp/probe.go; tdir: the tracefs directory, if ftrace.
probe_fn='probe() { rm -f /tmp/back /tmp/probe.ready /tmp/probe.go; mkfifo /tmp/probe.go
python3 '"$_vm_libdir"'/ublk-probe.py /dev/ublkb0 "$1" /tmp/probe.ready /tmp/probe.go /tmp/back "$tdir" 2>>/tmp/probe.err &
for k in $(seq 300); do [ -e /tmp/probe.ready ] && break; nap 0.1; done
[ -e /tmp/probe.ready ] || { echo "FAIL: the probe did not start"; cat /tmp/probe.err; exit 1; }; }'
restart() {
    local how=--recover
    (( $1 % 2 == 0 )) && how=--recover=auto
    vm_run -t 120 A "i=$1
rm -f /tmp/nap; mkfifo /tmp/nap; exec {napfd}<>/tmp/nap
nap() { read -rt \"\$1\" -u \$napfd || :; }
ms() { echo \$(( (\${2/./} - \${1/./}) / 1000 )); }
mark() { :; }
tdir=; [ \"$trace\" = 1 ] && tdir=/sys/kernel/tracing
$probe_fn
probe \$((i * 8192))
[ \"$trace\" = 1 ] && { T=/sys/kernel/tracing; mark() { echo \"\$*\" >\$T/trace_marker; }; echo >\$T/trace; echo 1 >\$T/tracing_on; }
pid=\$(cat /tmp/attach.pid); n=\$(grep -c 'taken over' /tmp/attach.log)
mark kill; t0=\$EPOCHREALTIME; kill -KILL \$pid
while [ -d /proc/\$pid ]; do nap 0.005; done; t1=\$EPOCHREALTIME; mark gone
[ -b /dev/ublkb0 ] || { echo 'FAIL: /dev/ublkb0 went with its server'; exit 1; }
rm -f /tmp/attach.exit
# (a subshell: no exec but smcr-attach's own on the way to it)
($run_attach --ublk=0 $how -C 2 -D 60 $B1:10810 disk 2>>/tmp/attach.log & echo \$! >/tmp/attach.pid; wait \$!; echo \"exit \$?\" >/tmp/attach.exit) </dev/null >/dev/null 2>&1 &
echo go >/tmp/probe.go
# (no fork while it waits: the guest's CPU is the new server's)
for k in \$(seq 6000); do [ -s /tmp/back ] && break; nap 0.01; done
[ -s /tmp/back ] || { echo 'FAIL: no I/O back within 60 s'; tail -n 20 /tmp/attach.log; exit 1; }
for k in \$(seq 100); do [ \$(grep -c 'taken over' /tmp/attach.log) -gt \$n ] && break; nap 0.1; done
grep -c 'taken over' /tmp/attach.log | grep -qx \$((n + 1)) || { echo 'FAIL: not taken over'; tail -n 20 /tmp/attach.log; exit 1; }
tb=\$(cat /tmp/back); np=\$(cat /tmp/attach.pid)
# The new process's exec (its start time, in ticks since boot) and its
# log line's stamp, on the shell's clock.
read -r up _ </proc/uptime; now=\$EPOCHREALTIME; st=\$(cut -d' ' -f22 /proc/\$np/stat)
te=\$(( \${now/./} - \${up/./} * 10000 + st * 1000000 / \$(getconf CLK_TCK) ))
te=\${te:0:-6}.\${te: -6}
tt=\$(date -d \"\$(grep \"smcr-attach\\[\$np\\].*taken over\" /tmp/attach.log | cut -c1-23)\" +%s.%6N)
echo \"restart \$i: smcr-attach (pid \$pid) SIGKILLed, gone after \$(ms \$t0 \$t1) ms; /dev/ublkb0 stayed; the new one exec'd \$(ms \$t1 \$te) ms after the restart, took over \$(ms \$te \$tt) ms after its exec; I/O back \$(ms \$tt \$tb) ms after that: \$(ms \$te \$tb) ms after the exec, \$(ms \$t1 \$tb) ms after the restart, \$(ms \$t0 \$tb) ms after the SIGKILL\"
echo \"RESTART \$i \$(ms \$t1 \$tb) \$(ms \$te \$tb)\"
[ \"$trace\" = 1 ] && for k in \$(seq 150); do grep -q \"smcr-attach\\[\$np\\].*ublk trace: .* followed\" /tmp/attach.log && break; nap 0.1; done
grep \"smcr-attach\\[\$(cat /tmp/attach.pid)\\]\" /tmp/attach.log | grep -E \"$show\"
[ \"$trace\" = 1 ] || exit 0
echo 0 >\$T/tracing_on
# Times in ms from the SIGKILL; repeated polls (START_USER_RECOVERY, the
# probe's opens) counted, not listed.
grep -v '^#' \$T/trace | awk '\$1 !~ /^[0-9]+\\.[0-9]+\$/ { next } { t = \$1 + 0; if (!t0) t0 = t; f = \$0; sub(/.*\\| +/, \"\", f); gsub(/[0-9]+\\.[0-9]+ us/, \"\", f)
  if (f == last) { rep++; next } if (rep) print \"    (\" rep \" more)\"; rep = 0; last = f
  if (!said) { printf \"  ftrace: 0 ms is CLOCK_MONOTONIC %.6f s\\n\", t0; said = 1 }
  printf \"  ftrace %8.1f ms  %s\\n\", (t - t0) * 1000, f } END { if (rep) print \"    (\" rep \" more)\" }'"
}
# One takeover by a standby: smcr-attach --standby started ahead, and once
# it says it is standing by (its engine connected), the server SIGKILLed;
# "I/O back" as in restart().
standby_restart() {
    vm_run -t 120 A "i=$1
rm -f /tmp/nap; mkfifo /tmp/nap; exec {napfd}<>/tmp/nap
nap() { read -rt \"\$1\" -u \$napfd || :; }
ms() { echo \$(( (\${2/./} - \${1/./}) / 1000 )); }
mark() { :; }
n=\$(grep -c 'standing by for its server' /tmp/attach.log); m=\$(grep -c 'taken over' /tmp/attach.log)
rm -f /tmp/standby.pid
ts=\$EPOCHREALTIME
($run_attach --ublk=0 --standby -C 2 -D 60 $B1:10810 disk 2>>/tmp/attach.log & echo \$! >/tmp/standby.pid; wait \$!; echo \"exit \$?\" >/tmp/standby\$i.exit) </dev/null >/dev/null 2>&1 &
for k in \$(seq 600); do [ \$(grep -c 'standing by for its server' /tmp/attach.log) -gt \$n ] && break; nap 0.1; done
[ \$(grep -c 'standing by for its server' /tmp/attach.log) -gt \$n ] || { echo 'FAIL: the standby is not standing by after 60 s'; tail -n 20 /tmp/attach.log; exit 1; }
tr=\$EPOCHREALTIME; sp=\$(cat /tmp/standby.pid)
pid=\$(cat /tmp/attach.pid)
tdir=; [ \"$trace\" = 1 ] && tdir=/sys/kernel/tracing
$probe_fn
probe \$((i * 8192 + 4096))
[ \"$trace\" = 1 ] && { T=/sys/kernel/tracing; mark() { echo \"\$*\" >\$T/trace_marker; }; echo >\$T/trace; echo 1 >\$T/tracing_on; }
mark kill; t0=\$EPOCHREALTIME; kill -KILL \$pid
while [ -d /proc/\$pid ]; do nap 0.005; done; t1=\$EPOCHREALTIME; mark gone
[ -b /dev/ublkb0 ] || { echo 'FAIL: /dev/ublkb0 went with its server'; exit 1; }
echo go >/tmp/probe.go
for k in \$(seq 6000); do [ -s /tmp/back ] && break; nap 0.01; done
[ -s /tmp/back ] || { echo 'FAIL: no I/O back within 60 s'; tail -n 20 /tmp/attach.log; exit 1; }
for k in \$(seq 100); do [ \$(grep -c 'taken over' /tmp/attach.log) -gt \$m ] && break; nap 0.1; done
grep -q \"smcr-attach\\[\$sp\\].*taken over\" /tmp/attach.log || { echo 'FAIL: the standby did not take it over'; tail -n 20 /tmp/attach.log; exit 1; }
tb=\$(cat /tmp/back)
echo \"standby \$i: smcr-attach --standby (pid \$sp) standing by \$(ms \$ts \$tr) ms after its start; smcr-attach (pid \$pid) SIGKILLed, gone after \$(ms \$t0 \$t1) ms; /dev/ublkb0 stayed; I/O back \$(ms \$t1 \$tb) ms after it was gone, \$(ms \$t0 \$tb) ms after the SIGKILL\"
echo \"STANDBY \$i \$(ms \$t1 \$tb) \$(ms \$t0 \$tb)\"
echo \$sp >/tmp/attach.pid; echo /tmp/standby\$i.exit >/tmp/attach.exitf
[ \"$trace\" = 1 ] && for k in \$(seq 150); do grep -q \"smcr-attach\\[\$sp\\].*ublk trace: .* followed\" /tmp/attach.log && break; nap 0.1; done
grep \"smcr-attach\\[\$sp\\]\" /tmp/attach.log | grep -E 'standing by|taken over|$sshow'
[ \"$trace\" = 1 ] || exit 0
echo 0 >\$T/tracing_on
grep -v '^#' \$T/trace | awk '\$1 !~ /^[0-9]+\\.[0-9]+\$/ { next } { t = \$1 + 0; if (!t0) t0 = t; f = \$0; sub(/.*\\| +/, \"\", f); gsub(/[0-9]+\\.[0-9]+ us/, \"\", f)
  if (f == last) { rep++; next } if (rep) print \"    (\" rep \" more)\"; rep = 0; last = f
  if (!said) { printf \"  ftrace: 0 ms is CLOCK_MONOTONIC %.6f s\\n\", t0; said = 1 }
  printf \"  ftrace %8.1f ms  %s\\n\", (t - t0) * 1000, f } END { if (rep) print \"    (\" rep \" more)\" }'"
}
# SMCR_UBLK_TRACE=1: the kernel's side of each restart (ftrace's
# function_graph on ublk_drv's open, release, quiesce and recovery
# commands and its requests' dispatch, with the test's marks), printed
# after each restart's line.
if [ "$trace" = 1 ]; then
    vm_run A 'T=/sys/kernel/tracing; [ -e $T/trace ] || mount -t tracefs nodev $T || exit 1
echo 0 >$T/tracing_on; echo mono >$T/trace_clock; echo function_graph >$T/current_tracer
echo 1 >$T/options/funcgraph-abstime; echo 0 >$T/options/funcgraph-irqs
for f in ublk_ch_open ublk_ch_release ublk_quiesce_work_fn ublk_stop_work_fn ublk_ctrl_start_recovery ublk_ctrl_end_recovery ublk_abort_requests ublk_queue_rq ublk_rq_task_work_cb; do
    echo $f >>$T/set_ftrace_filter 2>/dev/null || echo "ftrace: no $f"; done
cat $T/set_ftrace_filter' || fail "ftrace in A"
fi
# The new server's log: all of it for the first three restarts, then its
# "taken over" line and the steps of its engine's connect.
show=.
# ... and of smcr-attach's trace, all but the requests other than 4 KiB
# READs (the probe's).
show_trace='ublk trace: ([^r]|reference|request .* READ [0-9]+\+4096:)'
backs=() execs=()
# SMCR_UBLK_TRACE=1: smcrd's log lines (B) of each restart, after it.
smcrd_lines=0
smcrd_log() {
    [ "$trace" = 1 ] || return 0
    vm_run B "tail -n +$((smcrd_lines + 1)) /tmp/smcrd.log | sed 's/^/  smcrd: /'; wc -l </tmp/smcrd.log >/tmp/smcrd.lines" || true
    smcrd_lines=$(vm_run B "cat /tmp/smcrd.lines" 2>/dev/null || echo "$smcrd_lines")
}
smcrd_log >/dev/null
run_attach=$ATTACH
[ -n "$envs" ] && run_attach="env $envs $ATTACH"
for (( k = 1; k <= KILLS; k++ )); do
    out=$(restart "$k") || { echo "$out"; vm_run A "cat /tmp/attach.log"; fail "SIGKILL $k and --recover of smcr-attach"; }
    echo "$out" | grep -v '^RESTART '
    smcrd_log
    backs+=("$(echo "$out" | sed -n 's/^RESTART [0-9]* \([0-9-]*\) .*/\1/p')")
    execs+=("$(echo "$out" | sed -n 's/^RESTART [0-9]* [0-9-]* //p')")
    [ "$k" = 1 ] && { vm_wait -t 10 A "$att" >/dev/null || true; }
    [ "$k" = 3 ] && show="taken over|looking for RDMA ports|link [12] up|connection\\(s\\) \\(|is up \\(|$show_trace"
    sleep 1	# fio's I/O through the new server before the next SIGKILL
done
sbacks=() skills=()
sshow='ublk trace'	# all of it for the first two, then as show
for (( k = 1; k <= STANDBYS; k++ )); do
    (( k == 3 )) && sshow=$show_trace
    out=$(standby_restart "$k") || { echo "$out"; vm_run A "cat /tmp/attach.log"; fail "SIGKILL $k of smcr-attach with a standby"; }
    echo "$out" | grep -v '^STANDBY '
    smcrd_log
    sbacks+=("$(echo "$out" | sed -n 's/^STANDBY [0-9]* \([0-9-]*\) .*/\1/p')")
    skills+=("$(echo "$out" | sed -n 's/^STANDBY [0-9]* [0-9-]* //p')")
    (( KILLS == 0 && k == 1 )) && { vm_wait -t 10 A "$att" >/dev/null || true; }
    sleep 1
done
sleep 1
out=$(vm_run A 'kill -INT $(cat /tmp/fio.pid)' && vm_wait -t 200 A "$fio") ||
    { echo "$out"; vm_run A "cat /tmp/attach.log; dmesg | tail -n 30"; fail "fio failed across the SIGKILLs and recoveries"; }
echo "$out" | grep -E 'err=|READ:|WRITE:|^ +clat \(|^ +lat \(|fio exit' | sed 's/^/  fio: /'
echo "$out" | grepq 'err= 0' || fail "fio reports errors across the recoveries"
echo "$out" | grepq -E '^fio exit (0|128|130)$' || fail "fio did not end on its SIGINT"
echo "$out" | grepq -iE 'verify.*(fail|bad|mismatch)|bad magic' && fail "fio found bad data"
# min, median, max of the arguments
mmm() {
    local s
    s=$(printf '%s\n' "$@" | sort -n)
    echo "min $(echo "$s" | head -n 1) ms, median $(echo "$s" | sed -n "$(( ($# + 1) / 2 ))p") ms, max $(echo "$s" | tail -n 1) ms"
}
(( KILLS )) && echo "recovery: ${#backs[@]} SIGKILL(s) of smcr-attach under fio verify, restarted by hand, 0 fio errors; I/O back after each restart: $(mmm "${backs[@]}"); after the new process's exec: $(mmm "${execs[@]}") (aim: within 2000 ms)"
(( STANDBYS )) && echo "recovery: ${#sbacks[@]} SIGKILL(s) of smcr-attach under fio verify, taken over by a standby, 0 fio errors; I/O back after the old one was gone: $(mmm "${sbacks[@]}"); after the SIGKILL: $(mmm "${skills[@]}") (aim: within 2000 ms)"
noerr "SIGKILL and recovery"

# A standby of a device whose server removes it (SIGTERM) exits 0.
vm_run A "($run_attach --ublk=0 --standby -C 2 -D 60 $B1:10810 disk 2>>/tmp/attach.log & echo \$! >/tmp/last.pid; wait \$!; echo \"exit \$?\" >/tmp/last.exit) </dev/null >/dev/null 2>&1 &
for i in \$(seq 600); do [ -s /tmp/last.pid ] && grep -q \"smcr-attach\\[\$(cat /tmp/last.pid)\\].*standing by for its server\" /tmp/attach.log && exit 0; sleep 0.1; done; exit 1" ||
    { vm_run A "cat /tmp/attach.log"; fail "the last standby is not standing by"; }
vm_run A 'ef=$(cat /tmp/attach.exitf 2>/dev/null || echo /tmp/attach.exit)
kill -TERM $(cat /tmp/attach.pid); for i in $(seq 600); do [ -s $ef ] && break; sleep 0.1; done
grep -qx "exit 0" $ef' || { vm_run A "cat /tmp/attach.exit* /tmp/standby*.exit /tmp/attach.log"; fail "smcr-attach did not exit 0 after SIGTERM"; }
vm_run A '[ ! -e /dev/ublkb0 ] && [ ! -e /dev/ublkc0 ]' || fail "/dev/ublkb0 or /dev/ublkc0 is still there after SIGTERM"
vm_run A 'for i in $(seq 300); do [ -s /tmp/last.exit ] && break; sleep 0.1; done
grep -qx "exit 0" /tmp/last.exit && grep -q "smcr-attach\[$(cat /tmp/last.pid)\].*was removed: not standing by" /tmp/attach.log' ||
    { vm_run A "cat /tmp/last.exit; tail -n 20 /tmp/attach.log"; fail "the standby of a removed device did not exit 0 saying so"; }
echo "a standby of the device its server removed: exit 0, 'was removed: not standing by any more'"
line=$(vm_run A "grep 'ublk: [0-9]* request' /tmp/attach.log | tail -n 1") || fail "no summary"
echo "$line"
echo "$line" | grepq ' 0 failed;' || fail "requests failed"
echo "$line" | grepq 'ublk: [1-9][0-9]* request' || fail "the recovering smcr-attach served no request: fio was not running across the SIGKILL"
# USER_COPY over SMC-R: fio's 16 KiB WRITEs were read from /dev/ublkc0
# straight into libsmcr's send buffer (nbdc_submit_write)
[ -n "$envs" ] || echo "$line" | grepq -E ', [1-9][0-9]* WRITE\(s\) from the send buffer' ||
    fail "no WRITE went out of libsmcr's send buffer: $line"
vm_stop
if (( KILLS + STANDBYS <= 2 )); then
    echo "PASS: smcr-attach --ublk${envs:+ ($envs)}: /dev/ublkb0 over SMC-R to smcrd, ext4, fio verify across a cable pull, an smcrd restart, $KILLS SIGKILL(s) + --recover and $STANDBYS SIGKILL(s) taken over by --standby, removed on SIGTERM"
else
    echo "PASS: smcr-attach --ublk${envs:+ ($envs)}: /dev/ublkb0 over SMC-R to smcrd, fio verify across $KILLS SIGKILL(s) + --recover and $STANDBYS SIGKILL(s) taken over by --standby, removed on SIGTERM"
fi
