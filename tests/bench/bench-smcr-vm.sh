#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# Benchmark: in one VM pair of the rxe lane, over the same rxe
# link (link 1, one NIC per guest), measure
#   - ib_write_bw / ib_write_lat (perftest): the limit of the link,
#   - libsmcr (our SMC-R, smcr-stream -t smcr),
#   - the kernel's AF_SMC (smcr-stream -t smc, "modprobe smc" in both),
#   - with --v2 (the guests load the patched rdma_rxe, SMCR_VM_RXE=smc, and
#     share a PNET ID and user EID: SMC-Rv2 everywhere): libsmcr client to
#     kernel server and kernel client to libsmcr server too,
#   - plain TCP (smcr-stream -t tcp),
#   - block over SMC-R: smcrd in B exporting a 64 MiB file in tmpfs, the
#     client library (tests/nbdc-io) in A reading it in order over one
#     connection, 1 MiB READs (larger than the 512 KiB receive buffer, so
#     every reply goes in pieces) and 64 KiB READs, against the raw stream
#     of the same round (aim: 0.8x); and the same over TCP,
# bandwidth with 64 KiB messages and ping-pong latency of 64-byte messages,
# and print each as a ratio to ib_write_bw / ib_write_lat (the median of
# the ratios within each round: the host's load varies between rounds).
# libsmcr is also measured with its old defaults (64 KiB RMBEs, no busy
# poll), 512 KiB RMBEs and a 50 us busy poll (SMCR_BUSY_POLL_US).  See
# tests/bench/README.md (also: why AF_SMC falls back to TCP over rxe).
#
#   tests/bench/bench-smcr-vm.sh [-B BUILDDIR] [-r ROUNDS] [-b BYTES] [-i ITERS]
#                                [--smc-v2-probe] [--v2] [--sizes "4K 64K ..."]
#                                [--profile] [--profile-only] [--caller-poll]
#                                [--autocork] [--kbuf "64K 512K 4M"] [-o DIR]
#
#   -B BUILDDIR  the build tree (default: ./build next to the sources, or
#                $abs_top_builddir)
#   -r ROUNDS    measurements per transport, interleaved; the median is
#                reported (default 3)
#   -b BYTES     bytes per bandwidth run (default 32M = 512 x 64 KiB)
#   -i ITERS     round trips per latency run (default 1000)
#   --smc-v2-probe
#                also try to make AF_SMC use SMC-Rv2 over rxe (PNET ID for
#                eth0/rxe0 and a user EID on both guests, bench/smc-nl) and
#                report how far it gets; on Debian's 6.1 kernel the client
#                then hangs in the kernel (see README.md), so this runs last.
#   --v2         the kernel peer: patched rdma_rxe in both guests, PNET ID
#                and user EID for AF_SMC and libsmcr (SMCR_EIDS): every
#                pairing is SMC-Rv2 (counted), kernel and libsmcr mixed.
#   --sizes LIST bandwidth against message size as well: ib_write_bw,
#                libsmcr (defaults), AF_SMC and TCP with each size of LIST (BYTES
#                per run, every round), table and plot (gnuplot) in DIR
#   --profile    after the rounds, the 64-byte round trip once more under
#                perf (in the guests, software clock): perf stat of both
#                ends for ib_write_lat, rstream, AF_SMC, libsmcr and TCP,
#                and perf record -a -g at both ends of all but TCP, split
#                into parts (the program, verbs libraries, system calls,
#                kernel rxe, UDP/IP, scheduler and wake-ups, idle) in usec
#                per round trip; needs perf (Debian package linux-perf)
#   --profile-only
#                only that profile, no rounds (SMCR_PROFILE_SPIN_US="20
#                100": libsmcr with each SMCR_BUSY_POLL_US as well)
#   --caller-poll
#                only the round-trip rows, interleaved in each round:
#                ib_write_lat (64 B, 4 KiB), ib_write_bw (4 KiB), and
#                libsmcr with SMCR_CALLER_POLL=0 and =1: round trips of
#                64 B and 4 KiB (mean, p50, p99, sleeps per round trip at
#                the client and at the server), 4 KiB stream; and the
#                anchors rstream (rsocket; Debian's rdmacm-utils), AF_SMC
#                (SMC-R with --v2, else its TCP fallback) and TCP
#   --autocork   the same rows with SMCR_AUTOCORK_BYTES=0 and =65536
#                instead of SMCR_CALLER_POLL (default caller poll)
#   --kbuf LIST  only the 1 MiB streams against the kernel's buffer size
#                (implies --v2): for each size K of LIST, net.smc.wmem and
#                net.smc.rmem = K in both guests (the kernel's send buffer
#                and RMB; above 512 KiB from Linux 6.11 on, so with
#                SMCR_VM_KERNEL=6.12) and SMCR_RMBE_SIZE=K for libsmcr:
#                AF_SMC to AF_SMC, libsmcr client to the kernel's server
#                and the kernel's client to libsmcr's server, 1 MiB
#                messages, against ib_write_bw 1 MiB in the same round;
#                the RMBE libsmcr's client saw the kernel offer
#   -o DIR       where the report goes (default: bench-smcr-report in the
#                build tree): report.md (what this prints) and, with
#                --sizes, bw-size.dat and bw-size.png
#
# Latency: perftest's ib_write_lat reports half the round trip; the table
# shows round trips for everything (ib_write_lat's t_avg x 2).  Bandwidth in
# MB/s (10^6 bytes; perftest's MiB/s are converted).  Guests run under TCG:
# only the ratios of one run mean anything (design.md §4).
#
# VM runs take /tmp/smcrbd-vm.lock (SMCR_VM_LOCK; empty: no lock), the lock
# the VM tests share on a development machine.  Not part of make check:
# "make bench-vm" in the build tree runs it.
set -uo pipefail

here=$(cd "$(dirname "$0")" && pwd)
. "$here/bench-vm-lib.sh"
top=$(cd "$here/../.." && pwd)
builddir=${abs_top_builddir:-$top/build}
rounds=3 bytes=32M iters=1000 probe=0 v2=0 sizes= outdir= profile=0 po=0 cp=0 kbuf=
cpknob=SMCR_CALLER_POLL cpvals="0 1" cpname="caller poll"
while [ $# -gt 0 ]; do
    case $1 in
        -B) builddir=$2; shift 2 ;;
        -r) rounds=$2; shift 2 ;;
        -b) bytes=$2; shift 2 ;;
        -i) iters=$2; shift 2 ;;
        --smc-v2-probe) probe=1; shift ;;
        --v2) v2=1; shift ;;
        --sizes) sizes=$2; shift 2 ;;
        --profile) profile=1; shift ;;
        --profile-only) profile=1 po=1; shift ;;
        --caller-poll) cp=1; shift ;;
        --autocork) cp=1 cpknob=SMCR_AUTOCORK_BYTES cpvals="0 65536" cpname=autocork; shift ;;
        --kbuf) kbuf=$2 v2=1; shift 2 ;;
        -o) outdir=$2; shift 2 ;;
        *) sed -n '3,78p' "$0"; exit 2 ;;
    esac
done
builddir=$(cd "$builddir" && pwd) || exit 1
: "${outdir:=$builddir/bench-smcr-report}"
mkdir -p "$outdir" || exit 1
outdir=$(cd "$outdir" && pwd)
sizes_b=
for z in $sizes; do
    b=$(numfmt --from=iec "$z") || { echo "bench: bad size '$z'" >&2; exit 2; }
    sizes_b="$sizes_b $b"
done
# Everything printed from here on goes to the report too.
exec > >(tee "$outdir/report.md") 2>&1
export abs_top_builddir=$builddir abs_builddir=$builddir/tests
export abs_top_srcdir=$top srcdir=$top/tests
: "${SMCR_VM_WORKDIR:=$builddir/tests/bench/bench-smcr-vm.d}"
: "${SMCR_VM_TIMEOUT:=900}"
: "${SMCR_VM_CMD_TIMEOUT:=180}"
export SMCR_VM_WORKDIR SMCR_VM_TIMEOUT SMCR_VM_CMD_TIMEOUT

S=$builddir/tests/bench/smcr-stream
N=$builddir/tests/bench/smc-nl
IO=$builddir/tests/nbdc-io
SMCRD=$builddir/server/smcrd
for p in "$S" "$N" "$IO" "$SMCRD"; do
    [ -x "$p" ] || { echo "bench: $p not built (make -C $builddir/tests ${p#$builddir/tests/})" >&2; exit 1; }
done
command -v ib_write_bw >/dev/null || { echo "bench: ib_write_bw not found (Debian package perftest)" >&2; exit 1; }

bench_vm_lock

EID=SMCRBD.BENCH
v2env=
[ "$v2" = 1 ] && export SMCR_VM_RXE=smc && v2env="SMCR_EIDS=$EID"
. "$top/tests/vm/lib.sh"
vm_requires
vm_start_pair 1
A1=$(vm_ip A 1) B1=$(vm_ip B 1)

# The GID index of the RoCE v2 GID that carries the link's IPv4 address.
gidx=$(vm_run A 'for g in /sys/class/infiniband/rxe0/ports/1/gids/*; do
    i=${g##*/}; t=$(cat /sys/class/infiniband/rxe0/ports/1/gid_attrs/types/$i 2>/dev/null)
    case "$(cat $g)" in 0000:0000:0000:0000:0000:ffff:*) [ "$t" = "RoCE v2" ] && { echo $i; exit; } ;; esac
done')
[ -n "$gidx" ] || fail "no RoCE v2 IPv4 GID on A's rxe0"
vm_say "RoCE v2 GID index $gidx"

# Modules for AF_SMC (no PNET ID, no EID: the default configuration;
# with --v2 the PNET ID and EID that make it SMC-Rv2).
vm_run A 'modprobe smc' && vm_run B 'modprobe smc' || fail "modprobe smc failed"
if [ "$v2" = 1 ]; then
    for v in A B; do
        vm_run $v "$N pnet-add NET1 eth0 rxe0 1 && $N ueid-add $EID" || fail "AF_SMC v2 setup in $v"
    done
fi

# The block target: one smcrd for every round (NBD over TCP on 10809,
# over SMC-R on 10810).
vm_run B "truncate -s 64M /tmp/disk.img" || fail "disk image in B"
vm_bg B "$v2env exec $SMCRD -f -p 10809 --smcr-port 10810 -e disk=/tmp/disk.img >>/tmp/smcrd.log 2>&1" >/dev/null
vm_run B "for i in \$(seq 300); do grep -q 'listening for NBD over SMC-R' /tmp/smcrd.log && exit 0; sleep 0.1; done
tail -n 20 /tmp/smcrd.log; exit 1" || fail "smcrd did not come up in B"

port=6000
nbytes=$(numfmt --from=iec "$bytes")
niters_bw=$(( (nbytes + 65535) / 65536 ))
declare -A res

# perftest: the server is started first; the client retries until it
# listens.  Prints the metric or nothing.
perf_run() {
    local tool=$1 args=$2 srv out
    port=$((port + 1))
    srv=$(vm_bg B "$tool -d rxe0 -x $gidx -F -p $port $args 2>&1")
    out=$(vm_run -t 120 A "for i in \$(seq 50); do $tool -d rxe0 -x $gidx -F -p $port $args $B1 2>&1 && exit 0; sleep 0.2; done; exit 1")
    vm_wait -t 30 B "$srv" >/dev/null 2>&1
    echo "$out"
}

# smcr-stream over T (smcr, tcp, smc; SERVER:CLIENT for a mixed pair) in
# mode M with extra client args, environment ENV, and commands (perf) to
# run the server and the client under.
stream_run() {
    local t=$1 m=$2 args=$3 env="${4:-} $v2env" pre_s=${5:-} pre_c=${6:-} srv out st ct
    st=${t%%:*} ct=${t##*:}
    port=$((port + 1))
    srv=$(vm_bg B "$env $pre_s $S server -t $st -p $port -n 1")
    vm_run B "for i in \$(seq 100); do ss -ltn | grep -q ':$port ' && exit 0; sleep 0.1; done; exit 1" >/dev/null ||
        { echo "bench: $t server did not listen" >&2; return 1; }
    out=$(vm_run -t 300 A "$env $pre_c $S client $B1 -t $ct -p $port -m $m $args 2>&1")
    echo "$out"
    vm_wait -t 60 B "$srv" 2>&1 | grep '^result srvcsw'
}

# nbdc-io reading the export in order: URI BLOCK DEPTH.
block_run() {
    vm_run -t 120 A "$v2env $IO -z -c 1 -w 0 -s -q $3 -b $2 -d 6 $1 2>&1"
}

# rstream (rsocket over rdma_cm, Debian's rdmacm-utils) with ARGS: the
# server first, the client retries until it listens.
rs=0
if command -v rstream >/dev/null && vm_run A 'modprobe rdma_ucm' && vm_run B 'modprobe rdma_ucm'; then
    rs=1
fi
rstream_run() {
    local srv out pre=${2:-}
    port=$((port + 1))
    srv=$(vm_bg B "$pre rstream -p $port $1 2>&1")
    out=$(vm_run -t 300 A "for i in \$(seq 50); do $pre rstream -s $B1 -p $port $1 2>&1 && exit 0; sleep 0.2; done; exit 1")
    vm_wait -t 30 B "$srv" >/dev/null 2>&1
    echo "$out"
}

# val KEY R VALUE: one measurement (empty: failed).
val() { res[$1,$2]=$3; }
# field [-v VAR=VALUE] AWK-PROGRAM: the last value it prints from $out.
field() { echo "$out" | awk "$@" | tail -n 1; }
complain() { [ -n "$2" ] || { echo "$out" | tail -n 5 | sed 's/^/    /'; echo "bench: $1 gave no result" >&2; }; }

median() { grep . | sort -g | awk '{ a[NR] = $1 } END { if (NR) print a[int((NR + 1) / 2)]; else print "-" }'; }
# all KEY: every round's value; med KEY: their median; mratio KEY REF: the
# median over rounds of KEY/REF measured in the same round (the host's load
# changes from round to round; a ratio within one round is what counts).
all() { local r; for (( r=1; r<=rounds; r++ )); do printf '%s ' "${res[$1,$r]:--}"; done; }
med() { local r; for (( r=1; r<=rounds; r++ )); do echo "${res[$1,$r]:-}"; done | median; }
mratio() {
    local r
    for (( r=1; r<=rounds; r++ )); do
        awk -v a="${res[$1,$r]:-}" -v b="${res[$2,$r]:-}" 'BEGIN { if (a + 0 > 0 && b + 0 > 0) printf "%.2f\n", a / b }'
    done | median
}

# --profile: the 64-byte round trip once more under perf in both guests.
# perf stat of both ends per round trip; then perf record -a (each guest
# has one CPU: the whole CPU, softirqs and idle too) at both ends of
# ib_write_lat, rstream, AF_SMC and libsmcr, split by part of the stack.
profile_run() {
    echo
    command -v perf >/dev/null || { echo "(perf is not installed: no profile)"; return 0; }
    vm_say "profile: 64-byte round trips under perf"
    local k v w s out pre
    # perf stat -x, -o FILE prints "value,unit,event,...": per round trip.
    per_rt() { awk -F, -v n=$iters '$3 ~ /task-clock|context-switches/ {
        printf "%s %.3f ", $3 == "task-clock" ? "cpu_ms" : "csw", $1 / n } END { print "" }'; }
    pstat() { echo "perf stat -x, -o /tmp/pstat-$1.txt -e task-clock,context-switches --"; }
    # cpu-clock every 250 us of CPU (-c: a fixed period, samples count time)
    precord() { echo "perf record -q -a -g -e cpu-clock -c 250000 -o /tmp/prof-$1.data --"; }
    # the mean round trip in usec from $out of run K
    rtt_of() {
        case $1 in
            ib) field '$1 == 64 && NF >= 6 { printf "%.1f\n", $6 * 2 }' ;;
            rs) field 'NF >= 8 && $NF ~ /^[0-9.]+$/ { printf "%.1f\n", $NF * 2 }' ;;
            *) field '$1 == "result" && $2 == "lat" { print $4 }' ;;
        esac
    }
    local spins=
    for v in ${SMCR_PROFILE_SPIN_US:-}; do spins+=" spin$v"; done
    for k in ib rs smc smcr $spins tcp; do
        for w in stat record; do
            [ $w = record ] && [ $k = tcp ] && continue
            [ $w = stat ] && pre=$(pstat $k) || pre=$(precord $k)
            case $k in
                ib) out=$(perf_run "$pre ib_write_lat" "-s 64 -n $iters") ;;
                rs) [ "$rs" = 1 ] || continue
                    out=$(rstream_run "-S 64 -C 1 -I $iters" "$pre") ;;
                spin*) out=$(stream_run smcr lat "-s 64 -i $iters" "SMCR_BUSY_POLL_US=${k#spin}" "$pre" "$pre") ;;
                *) out=$(stream_run $k lat "-s 64 -i $iters" "" "$pre" "$pre") ;;
            esac
            echo "  $k 64 B round trip under perf $w: $(rtt_of $k) usec"
            [ $w = stat ] || continue
            for v in A:client B:server; do
                echo "    perf stat, $k ${v#*:} (whole process), per round trip: $(vm_run ${v%%:*} "cat /tmp/pstat-$k.txt" | per_rt)"
            done
        done
    done
    # perf report by comm, object and symbol, split into parts by
    # perf-parts.awk (a sample is 250 us)
    echo "  where each end's CPU goes (perf record -a, usec per round trip; idle: waiting for the peer, from the server's start):"
    printf '    %-12s %6s %6s %6s %6s %6s %6s %6s %6s %6s %6s\n' run app verbs sysc rxe net sched kother harn idle busy
    for k in ib rs smc smcr $spins; do
        [ $k = rs ] && [ "$rs" != 1 ] && continue
        for v in A:client B:server; do
            vm_run ${v%%:*} "perf report -i /tmp/prof-$k.data --no-children --stdio -g none -n --percent-limit 0 \
                --sort comm,dso,sym 2>/dev/null | awk -v n=$iters -v us=250 -v run='$k ${v#*:}' \
                -f $here/perf-parts.awk /proc/kallsyms -"
        done
    done
    echo "  (app: the program, libc, libsmcr (in smcr-stream); verbs: libibverbs, librxe, librdmacm (rsocket); sysc: entry, uverbs, copies, kernel smc_*; rxe: kernel rxe_*; net: UDP/IP, virtio NIC (vp_notify: the doorbell, a trap to qemu), softirq; sched: scheduler, wake-ups, epoll, futex; kother: the rest of the kernel; harn: the lane's bash; busy: all but idle)"
    for k in ib rs smc smcr; do
        [ $k = rs ] && [ "$rs" != 1 ] && continue
        for v in A:client B:server; do
            echo "  $k ${v#*:}: top comms, objects and symbols (perf report --no-children, % of all samples, idle included):"
            for s in "comm 2" "dso 2" "sym 0.4"; do
                vm_run ${v%%:*} "perf report -i /tmp/prof-$k.data --no-children --stdio -g none \
                    --percent-limit ${s#* } --sort ${s% *} 2>/dev/null | grep -v '^#' | grep . | head -n 32" | sed 's/^/    /'
                echo "    --"
            done
            # kernel addresses perf could not name (a module loaded from the
            # build tree): the symbol below each in /proc/kallsyms (16 hex
            # digits compare as strings)
            vm_run ${v%%:*} "perf report -i /tmp/prof-$k.data --no-children --stdio -g none --percent-limit 0.5 \
                --sort sym 2>/dev/null | awk '\$2 == \"[k]\" && \$3 ~ /^0x/ { print \$1, substr(\$3, 3) }' |
                while read pc a; do awk -v a=\$a -v pc=\$pc '\$1 <= a && \$1 > b { b = \$1; n = \$3 \" \" \$4 }
                    END { print \"    \" pc \" 0x\" a \" is in \" n }' /proc/kallsyms; done"
        done
    done
}
[ "$po" = 1 ] && { profile_run; vm_stop; exit 0; }

# --caller-poll (--autocork): the round-trip rows only, then the table,
# and nothing else.
if [ -n "$kbuf" ]; then
    ks=
    for (( r=1; r<=rounds; r++ )); do
        vm_say "kernel buffer round $r of $rounds"
        out=$(perf_run ib_write_bw "-s 1048576 -n $(( (nbytes + 1048575) / 1048576 ))")
        # (a 0.00 from perftest is no result: the round has no ratios)
        v=$(field '$1 == 1048576 && NF >= 5 && $4 > 0 { printf "%.2f\n", $4 * 1.048576 }'); complain "ib_write_bw 1M" "$v"
        val ibbw1m $r "$v"
        for z in $kbuf; do
            b=$(numfmt --from=iec "$z")
            if ! vm_run A "sysctl -qw net.smc.wmem=$b net.smc.rmem=$b" >/dev/null 2>&1 ||
                ! vm_run B "sysctl -qw net.smc.wmem=$b net.smc.rmem=$b" >/dev/null 2>&1; then
                [ "$r" = 1 ] && echo "  $z: the kernel takes no net.smc.rmem of $b"
                continue
            fi
            for t in smc smc:smcr smcr:smc; do
                k=kb_${t/:/_}_$z
                out=$(stream_run $t bw "-s 1M -b $bytes" "SMCR_RMBE_SIZE=$b")
                v=$(field '$1 == "result" && $2 == "bw" { print $4 }'); complain "$t bw 1M ($z)" "$v"
                val $k $r "$v"
                [ "$t" = smc:smcr ] && val kb_peer_$z $r "$(field '/^client: SMC-R/ { for (i = 1; i < NF; i++) if ($i == "peer" && $(i + 1) == "RMBE") { sub(",", "", $(i + 2)); print $(i + 2) } }')"
            done
        done
    done
    echo
    echo "1 MiB streams by the kernel's buffer size (net.smc.wmem = rmem = K; libsmcr SMCR_RMBE_SIZE=K), rxe link 1, guests on Linux $(vm_run A 'uname -r' 2>/dev/null); $rounds round(s) of $bytes; medians over the rounds, ratios: median of per-round ratios to ib_write_bw 1 MiB"
    printf '%-34s %9s %8s %14s\n' "1 MiB stream" "MB/s" /ib_bw "kernel RMBE"
    printf '%-34s %9s %8s %14s\n' "ib_write_bw 1 MiB" "$(med ibbw1m)" 1.00 -
    for z in $kbuf; do
        for t in smc smc:smcr smcr:smc; do
            k=kb_${t/:/_}_$z
            case $t in
                smc) n="AF_SMC <-> AF_SMC, $z" ;;
                smc:smcr) n="libsmcr client -> kernel, $z" ;;
                smcr:smc) n="kernel client -> libsmcr, $z" ;;
            esac
            printf '%-34s %9s %8s %14s\n' "$n" "$(med $k)" "$(mratio $k ibbw1m)" \
                "$([ $t = smc:smcr ] && med kb_peer_$z || echo -)"
            ks+=" $k"
        done
    done
    echo "per round:"
    for k in ibbw1m $ks; do printf '  %-26s %s\n' "$k" "$(all $k)"; done
    smc_stats=$(vm_run A "$N stats" 2>&1)
    echo "kernel AF_SMC in A: $(echo "$smc_stats" | awk '$1 ~ /^smcr_client_v2_ok$/ { s += $2 } END { print s + 0 }') SMC-Rv2 client connection(s)"
    exit 0
fi

if [ "$cp" = 1 ]; then
    unset "$cpknob"
    # One smcrd per value of the knob (NBD over SMC-R on 10830, 10831, ...):
    # nbdc-io's 4 KiB READs at qd1 against each.
    i=0
    for c in $cpvals; do
        vm_bg B "$v2env $cpknob=$c exec $SMCRD -f -p $((10820 + i)) --smcr-port $((10830 + i)) -e disk=/tmp/disk.img >>/tmp/smcrd-cp$c.log 2>&1" >/dev/null
        vm_run B "for i in \$(seq 300); do grep -q 'listening for NBD over SMC-R' /tmp/smcrd-cp$c.log && exit 0; sleep 0.1; done
tail -n 20 /tmp/smcrd-cp$c.log; exit 1" || fail "smcrd ($cpknob=$c) did not come up in B"
        i=$((i + 1))
    done
    for (( r=1; r<=rounds; r++ )); do
        vm_say "caller-poll round $r of $rounds"
        for b in 64 4096; do
            out=$(perf_run ib_write_lat "-s $b -n $iters")
            val iblat$b $r "$(field -v b=$b '$1 == b && NF >= 6 { printf "%.1f\n", $6 * 2 }')"
            val iblat${b}_typ $r "$(field -v b=$b '$1 == b && NF >= 6 { printf "%.1f\n", $5 * 2 }')"
            val iblat${b}_p99 $r "$(field -v b=$b '$1 == b && NF >= 8 { printf "%.1f\n", $8 * 2 }')"
        done
        out=$(perf_run ib_write_bw "-s 4096 -n $(( (nbytes + 4095) / 4096 ))")
        val ibbw4k $r "$(field '$1 == 4096 && NF >= 5 { printf "%.2f\n", $4 * 1.048576 }')"
        # the other anchors: rsocket (rstream), AF_SMC, TCP
        if [ "$rs" = 1 ]; then
            for b in 64 4096; do
                out=$(rstream_run "-S $b -C 1 -I $iters")
                v=$(field 'NF >= 8 && $NF ~ /^[0-9.]+$/ { printf "%.1f\n", $NF * 2 }')
                complain "rstream -S $b" "$v"; val rs_lat_$b $r "$v"
            done
            out=$(rstream_run "-S 4096 -C $(( (nbytes + 4095) / 4096 )) -I 1")
            v=$(field 'NF >= 8 && $NF ~ /^[0-9.]+$/ { printf "%.2f\n", $(NF - 1) * 125 }')
            complain "rstream -S 4096 stream" "$v"; val rs_bw4k $r "$v"
        fi
        for k in smc tcp; do
            for b in 64 4096; do
                out=$(stream_run $k lat "-s $b -i $iters")
                for f in lat latp50 latp99 latcsw srvcsw; do
                    v=$(field -v f=$f '$1 == "result" && $2 == f { print $NF }')
                    complain "$k $f -s $b" "$v"
                    val ${k}_${f}_$b $r "$v"
                done
            done
            out=$(stream_run $k bw "-s 4096 -b $bytes")
            v=$(field '$1 == "result" && $2 == "bw" { print $4 }'); complain "$k bw 4K" "$v"
            val ${k}_bw4k $r "$v"
        done
        for c in $cpvals; do
            for b in 64 4096; do
                out=$(stream_run smcr lat "-s $b -i $iters" "$cpknob=$c")
                # where the sleeps are: per thread, both ends (first round)
                [ "$r" = 1 ] && echo "$out" | grep -E '^result (lat|srv)csw_thread|^stats client' |
                    sed "s/^/  $b B, $cpname $c: /"
                for f in lat latp50 latp99 latcsw srvcsw; do
                    v=$(field -v f=$f '$1 == "result" && $2 == f { print $NF }')
                    complain "smcr $f -s $b ($cpname $c)" "$v"
                    val cp${c}_${f}_$b $r "$v"
                done
            done
            out=$(stream_run smcr bw "-s 4096 -b $bytes" "$cpknob=$c")
            v=$(field '$1 == "result" && $2 == "bw" { print $4 }'); complain "smcr bw 4K ($cpname $c)" "$v"
            val cp${c}_bw4k $r "$v"
        done
        # smcrd (the knob set in B) and nbdc-io in A: 4 KiB READs, qd1;
        # the mean round trip from the rate (10^6 bytes/s)
        i=0
        for c in $cpvals; do
            out=$(vm_run -t 120 A "$v2env $cpknob=$c $IO -z -c 1 -w 0 -s -q 1 -b 4096 -d 6 smcr://$B1:$((10830 + i))/disk 2>&1")
            v=$(field '$1 == "result" && $2 == "bw" { if ($4 > 0) printf "%.1f\n", 4096 / $4 }')
            complain "nbdc-io 4K qd1 ($cpname $c)" "$v"
            val cp${c}_blk4k $r "$v"
            i=$((i + 1))
        done
    done
    echo
    echo "round trips by $cpname ($cpknob), rxe link 1 between two TCG guests; $rounds round(s), $iters round trips per run, 4 KiB stream of $bytes; medians over the rounds, ratios: median of per-round ratios"
    printf '%-30s %9s %9s %9s %8s %8s %8s\n' "round trip (usec)" mean p50 p99 /ib_lat "cli csw" "srv csw"
    for b in 64 4096; do
        printf '%-30s %9s %9s %9s %8s %8s %8s\n' "ib_write_lat $b B (x 2)" "$(med iblat$b)" "$(med iblat${b}_typ)" "$(med iblat${b}_p99)" 1.00 0 0
        [ "$rs" = 1 ] && printf '%-30s %9s %9s %9s %8s %8s %8s\n' "rstream $b B (x 2)" "$(med rs_lat_$b)" - - \
            "$(mratio rs_lat_$b iblat$b)" - -
        for k in smc tcp; do
            printf '%-30s %9s %9s %9s %8s %8s %8s\n' "$( [ $k = smc ] && echo "AF_SMC $b B" || echo "TCP $b B")" \
                "$(med ${k}_lat_$b)" "$(med ${k}_latp50_$b)" "$(med ${k}_latp99_$b)" "$(mratio ${k}_lat_$b iblat$b)" \
                "$(med ${k}_latcsw_$b)" "$(med ${k}_srvcsw_$b)"
        done
        for c in $cpvals; do
            printf '%-30s %9s %9s %9s %8s %8s %8s\n' "libsmcr $b B, $cpname $c" "$(med cp${c}_lat_$b)" \
                "$(med cp${c}_latp50_$b)" "$(med cp${c}_latp99_$b)" "$(mratio cp${c}_lat_$b iblat$b)" \
                "$(med cp${c}_latcsw_$b)" "$(med cp${c}_srvcsw_$b)"
        done
    done
    echo "(ib_write_lat: p50 is its t_typical, p99 its 99% percentile, both x 2; csw: sleeps, voluntary context switches of all threads, per round trip)"
    printf '%-30s %9s %8s\n' "smcrd 4 KiB READ, qd1 (usec)" mean "/lib 4K"
    for c in $cpvals; do
        printf '%-30s %9s %8s\n' "nbdc-io, smcrd $cpname $c" "$(med cp${c}_blk4k)" "$(mratio cp${c}_blk4k cp${c}_lat_4096)"
    done
    echo "(mean from nbdc-io's rate; /lib 4K: to libsmcr's 4 KiB round trip with the same $cpname)"
    printf '%-30s %9s %8s\n' "4 KiB stream" "MB/s" /ib_bw
    printf '%-30s %9s %8s\n' "ib_write_bw 4 KiB" "$(med ibbw4k)" 1.00
    [ "$rs" = 1 ] && printf '%-30s %9s %8s\n' "rstream 4 KiB" "$(med rs_bw4k)" "$(mratio rs_bw4k ibbw4k)"
    for k in smc tcp; do
        printf '%-30s %9s %8s\n' "$( [ $k = smc ] && echo AF_SMC || echo TCP) 4 KiB" "$(med ${k}_bw4k)" "$(mratio ${k}_bw4k ibbw4k)"
    done
    for c in $cpvals; do
        printf '%-30s %9s %8s\n' "libsmcr, $cpname $c" "$(med cp${c}_bw4k)" "$(mratio cp${c}_bw4k ibbw4k)"
    done
    echo "per round:"
    ks="iblat64 iblat4096 ibbw4k rs_lat_64 rs_lat_4096 rs_bw4k smc_lat_64 smc_lat_4096 tcp_lat_64 tcp_lat_4096"
    for f in lat_64 lat_4096 latcsw_64 latcsw_4096 srvcsw_64 srvcsw_4096 bw4k blk4k; do
        for c in $cpvals; do ks+=" cp${c}_$f"; done
    done
    for k in $ks; do
        printf '  %-18s %s\n' "$k" "$(all $k)"
    done
    echo "smcrd's libsmcr counters (progress thread wake-ups by source, caller serves):"
    i=0
    for c in $cpvals; do
        vm_run B "for d in /proc/[0-9]*; do case \$(cat \$d/comm) in bash|sh) continue ;; esac
    tr '\\0' ' ' <\$d/cmdline 2>/dev/null | grep -q -- '--smcr-port $((10830 + i)) ' && $builddir/client/smcrctl stats \${d#/proc/}; done" 2>&1 |
            grep -E 'woken|cdc_' | tr -s ' ' | paste -sd ' ' | sed "s/^/  $cpname $c: /"
        i=$((i + 1))
    done
    smc_stats=$(vm_run A "$N stats; $N fallbacks" 2>&1)
    echo "kernel AF_SMC: $(echo "$smc_stats" | awk '$1 ~ /^smcr_client_v[12]_ok$/ { s += $2 } END { print s + 0 }') SMC-R connection(s) on the client; fallbacks: $(echo "$smc_stats" | awk '$1 == "fallback" && $2 == "client" { printf "%s%s x%s", sep, $3, $4; sep = ", " }')"
    exit 0
fi

for (( r=1; r<=rounds && !cp; r++ )); do
    vm_say "round $r of $rounds"
    # "#bytes #iterations BW peak[MB/sec] BW average[MB/sec] MsgRate" (MiB/s)
    out=$(perf_run ib_write_bw "-s 65536 -n $niters_bw")
    v=$(field '$1 == 65536 && NF >= 5 { printf "%.2f\n", $4 * 1.048576 }'); complain ib_write_bw "$v"
    val ib_bw $r "$v"
    # "#bytes #iterations t_min t_max t_typical t_avg ..." (one way, usec)
    out=$(perf_run ib_write_lat "-s 64 -n $iters")
    v=$(field '$1 == 64 && NF >= 6 { printf "%.1f\n", $6 * 2 }'); complain ib_write_lat "$v"
    val ib_lat $r "$v"
    val ib_lat_typ $r "$(field '$1 == 64 && NF >= 6 { printf "%.1f\n", $5 * 2 }')"
    kinds="smcr smc tcp"
    [ "$v2" = 1 ] && kinds="smcr smc smc:smcr smcr:smc tcp"
    for t in $kinds; do
        k=${t/:/_}
        out=$(stream_run $t bw "-s 65536 -b $bytes")
        v=$(field '$1 == "result" && $2 == "bw" { print $4 }'); complain "$t bw" "$v"
        val ${k}_bw $r "$v"
        [ "$r" = 1 ] && echo "$out" | grep -E '^(client: SMC|stats client)' | sed "s/^/  $t: /"
        out=$(stream_run $t lat "-s 64 -i $iters")
        v=$(field '$1 == "result" && $2 == "lat" { print $4 }'); complain "$t lat" "$v"
        val ${k}_lat $r "$v"
        val ${k}_latcpu $r "$(field '$1 == "result" && $2 == "latcpu" { print $4 }')"
        val ${k}_latcsw $r "$(field '$1 == "result" && $2 == "latcsw" { print $4 }')"
    done
    # Block over SMC-R (and TCP) against the streams above.
    for k in smcr1m smcr64k tcp1m; do
        case $k in
            smcr1m) out=$(block_run smcr://$B1/disk 1048576 4) ;;
            smcr64k) out=$(block_run smcr://$B1/disk 65536 16) ;;
            tcp1m) out=$(block_run nbd://$B1/disk 1048576 4) ;;
        esac
        v=$(field '$1 == "result" && $2 == "bw" { print $4 }'); complain "block $k" "$v"
        echo "$out" | grep -q 'result reads .* errors 0 bad 0 ' || { complain "block $k (errors or bad bytes)" ""; v=; }
        val block_${k}_bw $r "$v"
        [ "$r" = 1 ] && echo "$out" | grep -E 'connection\(s\)' | sed "s/^.*info: /  block $k: /"
    done
    # libsmcr's old defaults (64 KiB RMBEs, a receive that sleeps at
    # once), with 512 KiB RMBEs set by hand, and with a receive
    # that polls its CQ for 50 us before it sleeps (20 ms made a round
    # trip take over a second and the run hit the VM watchdog).
    for k in 64 512 spin; do
        case $k in
            64) env="SMCR_RMBE_SIZE=65536 SMCR_BUSY_POLL_US=0" ;;
            512) env="SMCR_RMBE_SIZE=524288" ;;
            spin) env="SMCR_BUSY_POLL_US=50" ;;
        esac
        if [ $k != spin ]; then
            out=$(stream_run smcr bw "-s 65536 -b $bytes" "$env")
            v=$(field '$1 == "result" && $2 == "bw" { print $4 }'); complain "smcr bw ($env)" "$v"
            val smcr${k}_bw $r "$v"
            [ "$r" = 1 ] && echo "$out" | grep -E '^(client: SMC|stats client)' | sed "s/^/  $env: /"
        fi
        [ $k = 512 ] && continue
        out=$(stream_run smcr lat "-s 64 -i $iters" "$env")
        v=$(field '$1 == "result" && $2 == "lat" { print $4 }'); complain "smcr lat ($env)" "$v"
        val smcr${k}_lat $r "$v"
        val smcr${k}_latcpu $r "$(field '$1 == "result" && $2 == "latcpu" { print $4 }')"
        val smcr${k}_latcsw $r "$(field '$1 == "result" && $2 == "latcsw" { print $4 }')"
    done
done

# Bandwidth against message size (--sizes): every round, one run each.
for (( r=1; r<=rounds && ${#sizes_b}; r++ )); do
    vm_say "message sizes, round $r of $rounds"
    for b in $sizes_b; do
        out=$(perf_run ib_write_bw "-s $b -n $(( (nbytes + b - 1) / b ))")
        v=$(field -v b=$b '$1 == b && NF >= 5 { printf "%.2f\n", $4 * 1.048576 }'); complain "ib_write_bw -s $b" "$v"
        val sz_ib_$b $r "$v"
        for t in smcr smc tcp; do
            out=$(stream_run $t bw "-s $b -b $bytes")
            v=$(field '$1 == "result" && $2 == "bw" { print $4 }'); complain "$t bw -s $b" "$v"
            val sz_${t}_$b $r "$v"
        done
    done
done

# Did AF_SMC use SMC-R?  The kernel's own counters say.
smc_stats=$(vm_run A "$N stats; $N fallbacks" 2>&1)
smc_ok=$(echo "$smc_stats" | awk '$1 ~ /^smcr_client_v[12]_ok$/ { s += $2 } END { print s + 0 }')
smc_v2=$(echo "$smc_stats" | awk '$1 == "smcr_client_v2_ok" { s += $2 } END { print s + 0 }')
smc_v2b=$(vm_run B "$N stats" 2>&1 | awk '$1 == "smcr_server_v2_ok" { s += $2 } END { print s + 0 }')
smc_fb=$(echo "$smc_stats" | awk '$1 == "fallback" && $2 == "client" { printf "%s%s x%s", sep, $3, $4; sep = ", " }')


echo
echo "rxe link 1 between two TCG guests; $rounds round(s); bw: 64 KiB messages, $bytes per run; lat: round trip of 64-byte ping-pong, $iters iterations"
echo "values: median over the rounds; ratios: median of the ratios within each round"
printf '%-36s %9s %8s %10s %8s\n' transport "bw MB/s" "/ib_bw" "RTT usec" "/ib_lat"
printf '%-36s %9s %8s %10s %8s\n' "ib_write_bw / ib_write_lat (t_avg x 2)" "$(med ib_bw)" 1.00 "$(med ib_lat)" 1.00
rows="smcr smcr64 smcr512 smcrspin smc tcp"
[ "$v2" = 1 ] && rows="smcr smcr64 smcr512 smcrspin smc smc_smcr smcr_smc tcp"
for t in $rows; do
    case $t in
        smcr) name="libsmcr (SMC-R), defaults"; [ "$v2" = 1 ] && name="libsmcr <-> libsmcr (v2), defaults" ;;
        smcr64) name="libsmcr, old defaults (64K, no poll)" ;;
        smcrspin) name="libsmcr, busy poll 50 us" ;;
        smc_smcr) name="libsmcr -> kernel server (v2)" ;;
        smcr_smc) name="kernel -> libsmcr server (v2)" ;;
        smcr512) name="libsmcr, RMBE 512 KiB" ;;
        smc) if [ "$v2" = 1 ]; then name="kernel <-> kernel (v2)";
             elif [ "$smc_ok" -gt 0 ]; then name="kernel AF_SMC (SMC-R)"; else name="kernel AF_SMC (fell back to TCP)"; fi ;;
        tcp) name="TCP" ;;
    esac
    printf '%-36s %9s %8s %10s %8s\n' "$name" "$(med ${t}_bw)" "$(mratio ${t}_bw ib_bw)" \
        "$(med ${t}_lat)" "$(mratio ${t}_lat ib_lat)"
done
echo "per round:"
keys="ib_bw ib_lat ib_lat_typ smcr_bw smcr64_bw smcr512_bw smcr_lat smcr64_lat smcrspin_lat smc_bw smc_lat tcp_bw tcp_lat block_smcr1m_bw block_smcr64k_bw block_tcp1m_bw"
[ "$v2" = 1 ] && keys="$keys smc_smcr_bw smc_smcr_lat smcr_smc_bw smcr_smc_lat"
for k in $keys; do
    printf '  %-12s %s\n' "$k" "$(all $k)"
done
echo "block over SMC-R (smcrd, 64 MiB export in tmpfs; nbdc-io, one connection, READs in order; MB/s, median; ratio: median within a round)"
echo "  1 MiB READs, 4 in flight:   $(med block_smcr1m_bw)  / libsmcr stream $(mratio block_smcr1m_bw smcr_bw)  (aim 0.8)"
echo "  64 KiB READs, 16 in flight: $(med block_smcr64k_bw)  / libsmcr stream $(mratio block_smcr64k_bw smcr_bw)  (aim 0.8)"
echo "  over TCP, 1 MiB READs:      $(med block_tcp1m_bw)  / TCP stream $(mratio block_tcp1m_bw tcp_bw)"
echo "client CPU per round trip (usec, all threads; median): libsmcr defaults $(med smcr_latcpu), old defaults $(med smcr64_latcpu), busy poll 50 us $(med smcrspin_latcpu); AF_SMC $(med smc_latcpu); TCP $(med tcp_latcpu)"
echo "client sleeps per round trip (voluntary context switches, all threads; median): libsmcr defaults $(med smcr_latcsw), old defaults $(med smcr64_latcsw), busy poll 50 us $(med smcrspin_latcsw); AF_SMC $(med smc_latcsw); TCP $(med tcp_latcsw); ib_write_lat polls (0)"
echo "kernel AF_SMC: $smc_ok SMC-R connection(s) on the client ($smc_v2 SMC-Rv2; B's server: $smc_v2b SMC-Rv2); fallbacks: ${smc_fb:-none} (0x03030000: no SMC device found)"
if [ "$v2" = 1 ]; then
    echo "libsmcr vs the kernel on the same link (median of per-round ratios):"
    echo "  bw:  libsmcr<->libsmcr / kernel<->kernel $(mratio smcr_bw smc_bw); libsmcr->kernel / kernel<->kernel $(mratio smc_smcr_bw smc_bw); kernel->libsmcr / kernel<->kernel $(mratio smcr_smc_bw smc_bw)"
    echo "  RTT: libsmcr<->libsmcr / kernel<->kernel $(mratio smcr_lat smc_lat); libsmcr->kernel / kernel<->kernel $(mratio smc_smcr_lat smc_lat); kernel->libsmcr / kernel<->kernel $(mratio smcr_smc_lat smc_lat)"
fi

if [ -n "$sizes_b" ]; then
    echo
    echo "bandwidth against message size (MB/s, median of $rounds round(s); ratio: median of libsmcr / ib_write_bw within a round)"
    printf '%10s %12s %10s %8s %10s %8s %10s\n' "message" ib_write_bw libsmcr "/ib_bw" AF_SMC "/ib_bw" TCP
    echo "# bytes ib_write_bw libsmcr tcp af_smc (MB/s, medians)" >"$outdir/bw-size.dat"
    for b in $sizes_b; do
        printf '%10s %12s %10s %8s %10s %8s %10s\n' "$(numfmt --to=iec $b)" "$(med sz_ib_$b)" \
            "$(med sz_smcr_$b)" "$(mratio sz_smcr_$b sz_ib_$b)" "$(med sz_smc_$b)" \
            "$(mratio sz_smc_$b sz_ib_$b)" "$(med sz_tcp_$b)"
        echo "$b $(med sz_ib_$b) $(med sz_smcr_$b) $(med sz_tcp_$b) $(med sz_smc_$b)" | sed 's/ - / NaN /g; s/ -$/ NaN/' >>"$outdir/bw-size.dat"
    done
    if command -v gnuplot >/dev/null; then
        gnuplot <<GP && echo "plot: $outdir/bw-size.png" && echo "![bandwidth against message size](bw-size.png)"
set terminal png size 800,480
set output '$outdir/bw-size.png'
set logscale x 2
set format x '%.0b %BB'
set grid
set key left top
set xlabel 'message size (bytes)'
set ylabel 'MB/s'
set title 'One stream over one rxe link (TCG guests): bandwidth against message size'
plot '$outdir/bw-size.dat' using 1:2 with linespoints lw 2 title 'ib\_write\_bw', \
     '' using 1:3 with linespoints lw 2 title 'libsmcr (defaults)', \
     '' using 1:4 with linespoints lw 2 title 'TCP'
GP
    else
        echo "(gnuplot is not installed: no plot)"
    fi
fi

[ "$profile" = 1 ] && profile_run
if [ "$probe" = 1 ]; then
    echo
    vm_say "AF_SMC probe: PNET ID NET1 for eth0 + rxe0 port 1 and user EID SMCRBD.BENCH on both guests (SMC-Rv2)"
    for v in A B; do
        vm_run $v "$N pnet-add NET1 eth0 rxe0 1 && $N ueid-add SMCRBD.BENCH && $N info" | sed "s/^/  $v: /"
    done
    port=$((port + 1))
    srv=$(vm_bg B "$S server -t smc -p $port -n 1")
    sleep 2
    cl=$(vm_bg A "timeout 20 $S client $B1 -t smc -p $port -m bw -b 1M 2>&1")
    sleep 25
    vm_run A 'p=$(pidof smcr-stream); if [ -n "$p" ]; then echo "client still there after 25 s: $(grep State /proc/$p/status)"; cat /proc/$p/stack; else echo "client done"; fi'
    vm_run A "$N stats; $N fallbacks" | sed 's/^/  A: /'
    vm_run B "$N stats; $N fallbacks" | sed 's/^/  B: /'
fi
vm_stop
