#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# Benchmark: the kernel's nbd driver in A on smcrd's export in B (256 MiB
# file in tmpfs), one VM pair of the rxe lane (one link), by path:
#   fwd     smcr-attach -F: stock-able nbd driver on socket pairs, our
#           forwarder over libsmcr's SMC-R
#   nbdkit  nbdkit's smcr plugin (SMC-R) behind nbd-client over a unix socket
#   kittcp  the same plugin with transport=tcp (smcrd's NBD port)
#   ksmc    smcr-attach over the kernel's AF_SMC (SMC-Rv2: the patched
#           rdma_rxe and nbd.ko of the lane, kmod-build.sh; skipped when
#           they cannot be built), smcr-attach's default buffers (-B 256K)
#   ksmc-B  the same with -B BUF (SO_SNDBUF/SO_RCVBUF; 0: the kernel's
#           net.smc.wmem/rmem), 1M seqread only, once per size in -b
#           "SIZE..." (default "0 256K")
#   ktcp    smcr-attach -t: the kernel's nbd over plain TCP
#   PATH-acN  PATH with SMCR_AUTOCORK_BYTES=N for libsmcr in smcrd and
#           in A (fwd-ac0: the forwarder, both ends not autocorking;
#           smcrd is restarted when the value changes)
#   fwd-thr fwd with SMCR_ATTACH_THREADS=1 (a reader thread per pair
#           hands requests to the engine's threads)
#   ublk    smcr-attach --ublk: /dev/ublkb0 served by the same engine
#           through io_uring (USER_COPY), no nbd.ko; needs a guest kernel
#           with ublk_drv (SMCR_VM_KERNEL=6.12), skipped otherwise;
#           ublk-copy: the same in the older copy mode
# each with 2 connections, fio (libaio, O_DIRECT, -t seconds each):
# 4k randread qd16, 4k randwrite qd16, 4k randread qd1, 1M seqread qd4.
# -r ROUNDS: every job of every path ROUNDS times, the paths' order
# rotated by one each round; a cell is then the mean and min-max.
# Prints IOPS (MB/s for 1M), ratios of the means to nbdkit and to ksmc
# (and ublk to fwd),
# and each of the aims (below) met or not.  TCG guests: one run's ratios
# only (design.md §4).
#   tests/bench/bench-attach-vm.sh [-B BUILDDIR] [-t SECONDS] [-r ROUNDS] [-b "BUF..."]
#                                  [-o DIR] [-p "fwd nbdkit ksmc ksmc-B ktcp kittcp ublk"]
#                                  [-j "randwrite 4k 16,read 1M 4"] [-P "fwd ksmc"]
#                                  [-S "fwd"]
# -j: only these jobs (RW BS QD, comma-separated).  Per job it also prints
# what smcrd's libsmcr counted per I/O (CDCs and RDMA writes received and
# sent), the CPU time smcr-attach or nbdkit used in A per I/O, and what
# their libsmcr counted (CDCs sent and received, sends held).
# -P: for these paths, a CPU profile of guest A (perf, cpu-clock, 5 s in
# each 4k qd16 job of the first round): the busiest commands and
# functions.  -S: the same in guest B (smcrd's side), also by thread and
# with callees (children).
# Takes /tmp/smcrbd-vm.lock (SMCR_VM_LOCK; empty: none).  Not in make check.
set -uo pipefail

here=$(cd "$(dirname "$0")" && pwd)
. "$here/bench-vm-lib.sh"
top=$(cd "$here/../.." && pwd)
builddir=${abs_top_builddir:-$top/build}
secs=15 rounds=1 buf="0 256K" outdir= paths="fwd nbdkit ksmc ksmc-B ktcp kittcp ublk" jobsel= perfpaths= perfbpaths=
while [ $# -gt 0 ]; do
    case $1 in
        -B) builddir=$2; shift 2 ;;
        -t) secs=$2; shift 2 ;;
        -r) rounds=$2; shift 2 ;;
        -b) buf=$2; shift 2 ;;
        -p) paths=$2; shift 2 ;;
        -j) jobsel=$2; shift 2 ;;
        -P) perfpaths=$2; shift 2 ;;
        -o) outdir=$2; shift 2 ;;
        -S) perfbpaths=$2; shift 2 ;;
        *) sed -n '3,40p' "$0"; exit 2 ;;
    esac
done
[[ $rounds =~ ^[1-9][0-9]*$ ]] || { echo "-r: a count of rounds, not '$rounds'" >&2; exit 2; }
builddir=$(cd "$builddir" && pwd) || exit 1
: "${outdir:=$builddir/bench-attach-report}"
mkdir -p "$outdir" && outdir=$(cd "$outdir" && pwd) || exit 1
exec > >(tee "$outdir/report.md") 2>&1
export abs_top_builddir=$builddir abs_builddir=$builddir/tests
export abs_top_srcdir=$top srcdir=$top/tests
: "${SMCR_VM_WORKDIR:=$builddir/tests/bench/bench-attach-vm.d}"
: "${SMCR_VM_TIMEOUT:=1500}"
: "${SMCR_VM_CMD_TIMEOUT:=180}"
export SMCR_VM_WORKDIR SMCR_VM_TIMEOUT SMCR_VM_CMD_TIMEOUT

SMCRD=$builddir/server/smcrd
ATTACH=$builddir/client/smcr-attach
PLUGIN=$builddir/client/.libs/nbdkit-smcr-plugin.so
N=$builddir/tests/bench/smc-nl
bench_need "$SMCRD" "$ATTACH" "$PLUGIN" "$N"

bench_vm_lock

. "$top/tests/vm/lib.sh"
vm_requires
ksmc=1 ublk=1
if [[ " $paths " != *" ksmc"* ]]; then
    ksmc=0
elif ! modprobe -S "$VM_KVER" -n smc >/dev/null 2>&1 || ! vm_kmod_build nbd >/dev/null; then
    ksmc=0
    echo "no patched nbd.ko or no smc module: the ksmc paths are skipped"
fi
if ! modprobe -S "$VM_KVER" -n ublk_drv >/dev/null 2>&1; then
    ublk=0
    [[ " $paths " == *" ublk"* ]] && echo "kernel $VM_KVER has no ublk_drv: the ublk paths are skipped (SMCR_VM_KERNEL=6.12)"
fi
if [ "$ksmc" = 1 ]; then
    export SMCR_VM_RXE=smc SMCR_VM_NBD=smc
fi
vm_start_pair 1
B1=$(vm_ip B 1)
[ "$ksmc" = 1 ] && kpeer_setup A
eids=
[ "$ksmc" = 1 ] && eids="--eids SMCRBD.KPEER"
vm_run B "truncate -s 256M /tmp/disk.img" || fail "disk"
# start_srv AC: smcrd (again) with SMCR_AUTOCORK_BYTES=AC ('': libsmcr's
# default).
srv_ac=none
start_srv() {
    [ "$1" = "$srv_ac" ] && return 0
    vm_run B "p=\$(pidof smcrd) && { kill \$p; for i in \$(seq 100); do pidof smcrd >/dev/null || break; sleep 0.1; done; }
: >/tmp/smcrd.log" >/dev/null
    vm_bg B "${1:+SMCR_AUTOCORK_BYTES=$1 }exec $SMCRD -f -p 10809 --smcr-port 10810 $eids -e disk=/tmp/disk.img >>/tmp/smcrd.log 2>&1" >/dev/null
    vm_run B "for i in \$(seq 300); do grep -q 'listening for NBD over SMC-R' /tmp/smcrd.log && exit 0; sleep 0.1; done
tail -n 20 /tmp/smcrd.log; exit 1" || fail "smcrd did not come up in B"
    srv_ac=$1
}
start_srv ""
vm_run A "modprobe nbd; dd if=/dev/zero bs=1M count=0 2>/dev/null" || fail "modprobe nbd"

jobs=("randread 4k 16" "randwrite 4k 16" "randread 4k 1" "read 1M 4")
# ksmc-B once per buffer size: ksmc-B:SIZE
p2=
for p in $paths; do
    if [ "$p" = ksmc-B ]; then
        for b in $buf; do p2+=" ksmc-B:$b"; done
    else
        p2+=" $p"
    fi
done
paths=$p2
if [ -n "$jobsel" ]; then
    IFS=, read -r -a jobs <<<"$jobsel"
fi
SMCRCTL=$builddir/client/smcrctl
declare -A res per

# attach PATH: /dev/nbd0 on PATH (dev: the device); detach PATH.
dev=/dev/nbd0
attach() {
    local ac=
    case $1 in *-ac[0-9]*) ac=${1##*-ac} ;; esac
    start_srv "$ac"
    dev=/dev/nbd0
    case ${1%-ac[0-9]*} in
        ublk|ublk-copy)
             local cm=
             [ "${1%-ac[0-9]*}" = ublk-copy ] && cm="SMCR_UBLK_NO_USER_COPY=1 "
             vm_bg A "$cm${ac:+SMCR_AUTOCORK_BYTES=$ac }exec $ATTACH --ublk=0 -C 2 $B1:10810 disk 2>/tmp/att.log" >/dev/null
             dev=/dev/ublkb0
             want='/dev/ublkb0: .* queue(s) of' ;;
        fwd|fwd-thr)
             local thr=
             [ "${1%-ac[0-9]*}" = fwd-thr ] && thr="SMCR_ATTACH_THREADS=1 "
             vm_bg A "$thr${ac:+SMCR_AUTOCORK_BYTES=$ac }exec $ATTACH -F -C 2 $B1:10810 disk /dev/nbd0 2>/tmp/att.log" >/dev/null
             want='over SMC-R, forwarded' ;;
        ksmc) vm_bg A "exec $ATTACH -C 2 $B1:10810 disk /dev/nbd0 2>/tmp/att.log" >/dev/null
              want='over AF_SMC' ;;
        ksmc-B:*) vm_bg A "exec $ATTACH -C 2 -B ${1#ksmc-B:} $B1:10810 disk /dev/nbd0 2>/tmp/att.log" >/dev/null
                want='over AF_SMC' ;;
        ktcp) vm_bg A "exec $ATTACH -t -C 2 $B1:10809 disk /dev/nbd0 2>/tmp/att.log" >/dev/null
              want='over TCP' ;;
        nbdkit|kittcp)
                local tr=
                [ "${1%-ac[0-9]*}" = kittcp ] && tr=" transport=tcp"
                vm_run A "rm -f /tmp/kit.sock" >/dev/null
                vm_bg A "${ac:+SMCR_AUTOCORK_BYTES=$ac }exec nbdkit -f -U /tmp/kit.sock -P /tmp/kit.pid $PLUGIN server=$B1 export=disk connections=2$tr 2>/tmp/att.log" >/dev/null
                vm_run A "for i in \$(seq 600); do [ -S /tmp/kit.sock ] && exit 0; sleep 0.1; done; exit 1" || return 1
                vm_run A "nbd-client -N '' -b 4096 -C 2 -u /tmp/kit.sock /dev/nbd0 >/tmp/nc.log 2>&1" || { vm_run A "cat /tmp/nc.log /tmp/att.log"; return 1; }
                return 0 ;;
    esac
    vm_run A "for i in \$(seq 600); do grep -q '$want' /tmp/att.log && exit 0; sleep 0.1; done; cat /tmp/att.log; exit 1"
}
detach() {
    if [[ ${1%-ac[0-9]*} = ublk* ]]; then
        bench_ublk_stop
    elif [[ ${1%-ac[0-9]*} = nbdkit || ${1%-ac[0-9]*} = kittcp ]]; then
        vm_run A "nbd-client -d /dev/nbd0 >/dev/null 2>&1; kill \$(cat /tmp/kit.pid); sleep 1" >/dev/null
    else
        vm_run A "$ATTACH -d /dev/nbd0; for i in \$(seq 100); do pidof smcr-attach >/dev/null || exit 0; sleep 0.1; done" >/dev/null
    fi
    vm_run A "cat /tmp/att.log | tail -n 3"
}
# counters: smcrd's libsmcr cdc_recv cdc_sent rdma_writes (B), the CPU
# ticks of the user space process on A's data path (0 for the kernel's),
# smcrd's CPU ticks, the busy ticks of A's and of B's one CPU, and the
# libsmcr cdc_sent cdc_recv corked of A's forwarder or plugin (0 0 0 for
# the kernel's paths).
busy='awk "/^cpu / { print \$2 + \$3 + \$4 + \$7 + \$8 }" /proc/stat'
# prof_report GUEST JOB LABEL NSYMS: the guest's perf profile of a job, by
# command and object, then by function (self)
prof_report() {
    vm_wait "$1" "$2" >/dev/null
    vm_say "$3: guest $1's CPU profile (perf, cpu-clock, 5 s), by command and object:"
    vm_run "$1" "perf report -q -i /tmp/perf.data --no-children --stdio --sort comm,dso 2>/dev/null | grep -v '^\$' | grep '%' | head -n 12"
    vm_say "$3: guest $1 by function (self):"
    vm_run "$1" "perf report -q -i /tmp/perf.data --no-children --stdio --sort sym -g none 2>/dev/null | grep '%' | head -n $4"
}

counters() {
    local b a sd ab bb al
    b=$(vm_run B "$SMCRCTL --json stats smcrd" | python3 -c '
import json, sys
s = json.load(sys.stdin)[0]["stats"]
print(s["cdc_recv"], s["cdc_sent"], s["rdma_writes"])') || b="0 0 0"
    a=$(vm_run A 'p=$(pidof smcr-attach nbdkit | tr " " "\n" | head -n 1); [ -n "$p" ] && awk "{ print \$14 + \$15 }" /proc/$p/stat || echo 0')
    sd=$(vm_run B 'awk "{ print \$14 + \$15 }" /proc/$(pidof smcrd)/stat')
    ab=$(vm_run A "$busy") bb=$(vm_run B "$busy")
    al=$(vm_run A "for n in smcr-attach nbdkit-smcr; do $SMCRCTL --json stats \$n 2>/dev/null && break; done" | python3 -c '
import json, sys
s = json.load(sys.stdin)[0]["stats"]
print(s["cdc_sent"], s["cdc_recv"], s["corked"])' 2>/dev/null) || al="0 0 0"
    echo "$b ${a:-0} ${sd:-0} ${ab:-0} ${bb:-0} ${al:-0 0 0}"
}
fio_run() {
    local rw=$1 bs=$2 qd=$3
    vm_run -t $((secs + 120)) A "fio --name=b --filename=$dev --direct=1 --ioengine=libaio \
        --rw=$rw --bs=$bs --iodepth=$qd --size=192M --time_based --runtime=$secs --ramp_time=2 \
        --output-format=json 2>/dev/null" | python3 -c '
import json, sys
j = json.load(sys.stdin)["jobs"][0]
d = j["read"] if j["read"]["io_bytes"] else j["write"]
print(("%.1f" % (d["bw_bytes"] / 1e6) if sys.argv[1] == "1M" else "%.0f" % d["iops"]), d["total_ios"])' "$bs"
}

# one_path PATH ROUND: every job on PATH once; res and per get the
# round's figures appended (res space-separated, per ';'-separated).
one_path() {
    local p=$1 r=$2 j rw bs qd c0 c1 prof profb val ios pio
    case ${p%-ac[0-9]*} in
        ksmc|ksmc-B:*) [ "$ksmc" = 1 ] || return 0 ;;
        ublk*) [ "$ublk" = 1 ] || return 0 ;;
    esac
    vm_say "path $p (round $r of $rounds)"
    attach "$p" || { echo "attach $p failed"; return 0; }
    for j in "${jobs[@]}"; do
        read -r rw bs qd <<<"$j"
        case $p in ksmc-B:*) [ "$bs" != 1M ] && continue ;; esac
        c0=$(counters)
        prof= profb=
        if [ "$r" = 1 ] && [[ " $perfpaths " == *" $p "* ]] && [ "$bs" = 4k ] && [ "$qd" = 16 ]; then
            prof=$(vm_bg A "sleep 4; perf record -q -e cpu-clock -F 250 -a -g -o /tmp/perf.data -- sleep 5 >/dev/null 2>&1")
        fi
        if [ "$r" = 1 ] && [[ " $perfbpaths " == *" $p "* ]] && [ "$bs" = 4k ] && [ "$qd" = 16 ]; then
            profb=$(vm_bg B "sleep 4; perf record -q -e cpu-clock -F 250 -a -g -o /tmp/perf.data -- sleep 5 >/dev/null 2>&1")
        fi
        read -r val ios <<<"$(fio_run "$rw" "$bs" "$qd")"
        c1=$(counters)
        if [ -n "$prof" ]; then
            prof_report A "$prof" "$p $j" 25
        fi
        if [ -n "$profb" ]; then
            prof_report B "$profb" "$p $j" 30
            vm_say "$p $j: guest B by thread and function (self):"
            vm_run B "perf report -q -i /tmp/perf.data --no-children --stdio --sort comm,sym -g none 2>/dev/null | grep '%' | head -n 30"
            vm_say "$p $j: guest B by function with what it calls (children):"
            vm_run B "perf report -q -i /tmp/perf.data --children --stdio --sort sym -g none 2>/dev/null | grep '%' | head -n 40"
        fi
        [ -n "$val" ] && res[$p,$j]+="${res[$p,$j]:+ }$val"
        vm_say "$p $j: ${val:-failed}"
        # per I/O (ramp included in the counters: fio's count is a floor)
        pio=$(python3 -c 'import sys
c0 = [float(x) for x in sys.argv[1].split()]; c1 = [float(x) for x in sys.argv[2].split()]
n = float(sys.argv[3] or 0)
d = [b - a for a, b in zip(c0, c1)]
print("%.2f / %.2f / %.2f / %.1f / %.1f / %.1f / %.1f / %.2f / %.2f / %.2f" % (d[0] / n, d[1] / n, d[2] / n,
      d[3] * 10 / n, d[4] * 10 / n, d[5] * 10 / n, d[6] * 10 / n, d[7] / n, d[8] / n, d[9] / n) if n else "-")' "$c0" "$c1" "${ios:-0}")
        [ "$pio" != - ] && per[$p,$j]+="${per[$p,$j]:+;}$pio"
        vm_say "$p $j: per I/O: smcrd's CDCs received / sent / RDMA writes, CPU ms of A's user space path / of smcrd / A busy / B busy, A's libsmcr CDCs sent / received / sends held: $pio"
    done
    detach "$p"
}
# round r runs the paths rotated left by r - 1
read -r -a plist <<<"$paths"
for ((r = 1; r <= rounds; r++)); do
    k=$(((r - 1) % ${#plist[@]}))
    order=("${plist[@]:k}" "${plist[@]:0:k}")
    [ "$rounds" -gt 1 ] && vm_say "round $r of $rounds: ${order[*]}"
    for p in "${order[@]}"; do one_path "$p" "$r"; done
done
vm_stop

# cell VALUES: one value as it is; several as mean (min-max)
cell() { python3 -c 'import sys
v = sys.argv[1].split()
f = "%.1f" if any("." in x for x in v) else "%.0f"
x = [float(a) for a in v]
if not x:
    print("-")
elif len(x) == 1:
    print(v[0])
else:
    print((f + " (" + f + "-" + f + ")") % (sum(x) / len(x), min(x), max(x)))' "$1"; }
# mean VALUES: their mean, empty for none
mean() { python3 -c 'import sys
x = [float(a) for a in sys.argv[1].split()]
print("%g" % (sum(x) / len(x)) if x else "")' "$1"; }
# per_mean 'A / B / ...;A / B / ...': the rounds' per-I/O figures, each
# the mean over the rounds
per_mean() { python3 -c 'import sys
r = [[float(x) for x in s.split(" / ")] for s in sys.argv[1].split(";") if s]
if not r:
    print("-")
else:
    m = [sum(c) / len(c) for c in zip(*r)]
    print(" / ".join(("%.1f" if 3 <= i < 7 else "%.2f") % x for i, x in enumerate(m)))' "$1"; }

ratio() { python3 -c 'import sys
a, b = sys.argv[1:]
print("%.2fx" % (float(a) / float(b)) if a and b and float(b) > 0 else "-")' "$1" "$2"; }
echo
# avg: each cell's mean over the rounds, what ratios and aims compare
declare -A avg
for k in "${!res[@]}"; do avg[$k]=$(mean "${res[$k]}"); done
declare -A label=([fwd]="fwd (smcr-attach -F)"
    [nbdkit]="nbdkit plugin + nbd-client" [ksmc]="kernel AF_SMC"
    [ktcp]="kernel nbd over TCP" [fwd-ac0]="fwd, autocork off"
    [fwd-thr]="fwd, reader threads"
    [kittcp]="nbdkit plugin over TCP" [ublk]="ublk (smcr-attach --ublk)"
    [ublk-copy]="ublk, copy mode")
hdr="| job |" sep="|---|"
for p in $paths; do
    l=${label[$p]:-$p}
    case $p in ksmc-B:*) l="kernel AF_SMC -B ${p#ksmc-B:}" ;; esac
    hdr+=" $l |"; sep+="---|"
done
[ "$rounds" -gt 1 ] && echo "Each cell: the mean of $rounds rounds (min-max); ratios of the means."
echo
echo "$hdr fwd/nbdkit | fwd/ksmc | ksmc/nbdkit | ublk/fwd |"
echo "$sep---|---|---|---|"
for j in "${jobs[@]}"; do
    read -r rw bs qd <<<"$j"
    name="$bs $rw qd$qd"; [ "$bs" = 1M ] && name="$name, MB/s"
    row="| $name |"
    for p in $paths; do row+=" $(cell "${res[$p,$j]:-}") |"; done
    echo "$row $(ratio "${avg[fwd,$j]:-}" "${avg[nbdkit,$j]:-}") | $(ratio "${avg[fwd,$j]:-}" "${avg[ksmc,$j]:-}") | $(ratio "${avg[ksmc,$j]:-}" "${avg[nbdkit,$j]:-}") | $(ratio "${avg[ublk,$j]:-}" "${avg[fwd,$j]:-}") |"
done
echo
echo "Per I/O (means over the rounds): smcrd's libsmcr CDCs received / CDCs sent / RDMA writes sent; CPU ms of A's user space data path (smcr-attach or nbdkit) / of smcrd / of all of A / of all of B (ticks, the fio ramp included); A's libsmcr (forwarder or plugin) CDCs sent / received / sends held by autocork"
echo
hdr="| job |" sep="|---|"
for p in $paths; do hdr+=" $p |"; sep+="---|"; done
echo "$hdr"
echo "$sep"
for j in "${jobs[@]}"; do
    row="| $j |"
    for p in $paths; do row+=" $(per_mean "${per[$p,$j]:-}") |"; done
    echo "$row"
done

# The aims: the forwarder >= 0.8x the kernel AF_SMC path and >= 2x
# the plugin on 4k qd16, >= 1.0x the plugin on 1M reads; the kernel
# AF_SMC path (its best buffer size) >= 1.0x the plugin on 1M reads.
# aim NAME VALUES BASES MIN: the ratio of the means; with a value per
# round on both sides, also the range of the rounds' own ratios.
aim() {
    python3 -c 'import sys
n, a, b, m = sys.argv[1:]
a = [float(x) for x in a.split()]; b = [float(x) for x in b.split()]
if not a or not b or sum(b) <= 0:
    print("| %s | - | - | %sx | not measured |" % (n, m))
else:
    r = sum(a) / len(a) / (sum(b) / len(b))
    rr = [x / y for x, y in zip(a, b) if y > 0] if len(a) == len(b) > 1 else []
    print("| %s | %.2fx | %s | %sx | %s |" % (n, r, "%.2f-%.2fx" % (min(rr), max(rr)) if rr else "-",
          m, "met" if r >= float(m) else "missed"))' "$@"
}
best_ksmc() { # JOB: the values of ksmc or ksmc-B:*, the best mean
    local j=$1 v best= bp=
    for p in $paths; do
        case $p in ksmc|ksmc-B:*) v=${avg[$p,$j]:-} ;; *) continue ;; esac
        [ -n "$v" ] || continue
        if [ -z "$best" ] || python3 -c 'import sys; sys.exit(0 if float(sys.argv[1]) > float(sys.argv[2]) else 1)' "$v" "$best"; then
            best=$v bp=$p
        fi
    done
    [ -n "$bp" ] && echo "${res[$bp,$j]}"
}
echo
echo "| aim | measured (ratio of the means) | the rounds' own ratios | wanted | |"
echo "|---|---|---|---|---|"
for j in "randread 4k 16" "randwrite 4k 16"; do
    read -r rw bs qd <<<"$j"
    aim "fwd / kernel AF_SMC, $bs $rw qd$qd" "${res[fwd,$j]:-}" "${res[ksmc,$j]:-}" 0.8
    aim "fwd / nbdkit plugin, $bs $rw qd$qd" "${res[fwd,$j]:-}" "${res[nbdkit,$j]:-}" 2
done
aim "fwd / nbdkit plugin, 1M read qd4" "${res[fwd,read 1M 4]:-}" "${res[nbdkit,read 1M 4]:-}" 1.0
aim "kernel AF_SMC (best buffer) / nbdkit plugin, 1M read qd4" "$(best_ksmc "read 1M 4")" \
    "${res[nbdkit,read 1M 4]:-}" 1.0
# The ublk path against -F: at least 1.3x on 4k qd1, 1.0x on the others.
for j in "${jobs[@]}"; do
    read -r rw bs qd <<<"$j"
    m=1.0; [ "$bs" = 4k ] && [ "$qd" = 1 ] && m=1.3
    [ -n "${res[ublk,$j]:-}" ] && aim "ublk / fwd, $bs $rw qd$qd" "${res[ublk,$j]:-}" "${res[fwd,$j]:-}" $m
done
