#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# Benchmark: smcrd against nbdkit's file plugin and qemu-nbd, serving the
# same file in the same run, measured with fio's nbd engine (libnbd).
#
#   tests/bench/bench-nbd.sh [-s SIZE] [-r SECONDS] [-n ROUNDS] [-j REGEX] [-c] [-k]
#                            [-S] [-O] [-y] [-P] [-o DIR]
#
#   -s SIZE     size of the test file (default 1G; it is filled with random
#               data once, so reads hit real blocks)
#   -r SECONDS  runtime of every fio job (default 10)
#   -n ROUNDS   run every job ROUNDS times per server (default 3); every
#               figure is the median of the rounds, min and max beside it;
#               servers alternate inside a round
#   -j REGEX    only the jobs whose name matches (e.g. 1m)
#   -S          scaling too: 4 KiB random reads with 1, 4, 16, 64 clients
#               (connections, qd 1 each) and with queue depth 1..128 (one
#               client); SCALE_CLIENTS / SCALE_QD override the lists
#   -o DIR      where the report goes (default ./bench-report): report.md,
#               results.csv (every run), PNG plots (gnuplot)
#   -c          fio on CPU 0, the servers on the other CPUs, like a client
#               on another host (without it the scheduler places them: a
#               4 KiB qd1 job runs ~4x faster when client and server share
#               a CPU than when they do not)
#   -k          keep the scratch directory
#   -O          a fourth server, smcrd-old: smcrd with SMCRD_RING_SOCKET=0
#               (plain TCP by poll + recv/sendmsg instead of on its
#               io_uring), for a before/after in the same run;
#               with SMCRD_OLD=PATH, smcrd-old is that binary (e.g. an
#               older build) with its defaults instead
#   -y          count the system calls of smcrd (perf stat, all its threads)
#               and report them per I/O
#   -P          profile every run of the first round: perf record -a -g
#               and perf stat -a (context switches, CPU time) around fio;
#               DIR/profile/JOB-SERVER.txt has context switches and CPU
#               per I/O (the whole machine) and where the time went, by
#               process, by object and by symbol
#
# Prints (and writes to DIR/report.md) one row per job: IOPS (4 KiB jobs)
# or MiB/s (1 MiB jobs) for each server and smcrd's ratio to the better of
# the other two, medians of the rounds; then the CPU time the server (all
# its threads) and the client (fio) spent per I/O or per GiB.  All three serve the file through the page cache (smcrd without
# --direct, nbdkit cache=default, qemu-nbd --cache=writeback), and every
# job starts with the whole file cached.
# Environment: SMCRD (path of smcrd), BENCH_DIR (scratch location),
# SMCRD_ARGS (extra smcrd options), SMCRD_OLD (see -O).
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
: "${abs_top_builddir:=$(cd "$here/../.." && pwd)}"
size=1G runtime=10 rounds=3 keep=0 only=. pin=0 scale=0 old=0 sysc=0 prof=0 round=0
outdir=$PWD/bench-report
while getopts "s:r:n:j:ckSOyPo:" o; do
    case $o in
        s) size=$OPTARG ;;
        r) runtime=$OPTARG ;;
        n) rounds=$OPTARG ;;
        j) only=$OPTARG ;;
        c) pin=1 ;;
        k) keep=1 ;;
        S) scale=1 ;;
        O) old=1 ;;
        y) sysc=1 ;;
        P) prof=1 ;;
        o) outdir=$OPTARG ;;
        *) sed -n '3,46p' "$0"; exit 2 ;;
    esac
done

smcrd=${SMCRD:-}
if [ -z "$smcrd" ]; then
    for c in "$abs_top_builddir/server/smcrd" "$abs_top_builddir/build/server/smcrd"; do
        [ -x "$c" ] && { smcrd=$c; break; }
    done
fi
[ -x "${smcrd:-}" ] || { echo "bench: smcrd not found (build first, or set SMCRD)" >&2; exit 1; }
for t in fio nbdkit qemu-nbd python3; do
    command -v $t >/dev/null || { echo "bench: $t is required" >&2; exit 1; }
done
fio --enghelp=nbd >/dev/null 2>&1 || { echo "bench: fio has no nbd engine" >&2; exit 1; }
ncpu=$(nproc)
if [ "$pin" = 1 ] && [ "$ncpu" -lt 2 ]; then
    echo "bench: -c needs at least 2 CPUs" >&2; exit 1
fi
# name rw bs iodepth metric
all_jobs=(
    "randread-4k-qd1   randread  4k 1  iops"
    "randread-4k-qd32  randread  4k 32 iops"
    "randwrite-4k-qd1  randwrite 4k 1  iops"
    "randwrite-4k-qd32 randwrite 4k 32 iops"
    "seqread-1m-qd8    read      1M 8  bw"
    "seqwrite-1m-qd8   write     1M 8  bw"
)
jobs=()
for j in "${all_jobs[@]}"; do
    read -r name _ <<<"$j"
    if [[ $name =~ $only ]]; then jobs+=("$j"); fi
done
if [ "$sysc" = 1 ] && ! perf stat -e raw_syscalls:sys_enter true >/dev/null 2>&1; then
    echo "bench: -y needs perf with the raw_syscalls tracepoints" >&2; exit 1
fi
if [ "$prof" = 1 ] && ! perf record -a -e cpu-clock -o /dev/null true >/dev/null 2>&1; then
    echo "bench: -P needs perf (Debian package linux-perf) allowed to profile the system" >&2; exit 1
fi
[ ${#jobs[@]} -gt 0 ] || { echo "bench: no job matches '$only'" >&2; exit 2; }

dir=$(mktemp -d "${BENCH_DIR:-${TMPDIR:-/var/tmp}}/smcrd-bench.XXXXXX")
pids=()
cleanup() {
    local p
    for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
    for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
    [ "$keep" = 1 ] && echo "bench: kept $dir" || rm -rf "$dir"
}
trap cleanup EXIT

port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
wait_port() {
    local i
    for i in $(seq 100); do
        nbdinfo --size "$1" >/dev/null 2>&1 && return 0
        sleep 0.1
    done
    echo "bench: server at $1 did not come up" >&2; return 1
}

img=$dir/disk.img
echo "bench: preparing a $size file of random data in $dir"
fio --name=fill --filename="$img" --rw=write --bs=1M --size="$size" --ioengine=psync \
    --refill_buffers --end_fsync=1 --output=/dev/null
sync

srv_cpus=() cli_cpus=()
if [ "$pin" = 1 ]; then
    srv_cpus=(taskset -c "1-$((ncpu - 1))") cli_cpus=(taskset -c 0)
fi
p_smcrd=$(port) p_nbdkit=$(port) p_qemu=$(port)
# one address with up to 64 clients connecting at once
smcrd_opts=(--export "bench=$img" --max-clients-per-address 0 --max-handshakes 128)
"${srv_cpus[@]}" "$smcrd" -f -l 127.0.0.1 -p "$p_smcrd" "${smcrd_opts[@]}" ${SMCRD_ARGS:-} \
    2>"$dir/smcrd.log" & pids+=($!)
"${srv_cpus[@]}" nbdkit -f -i 127.0.0.1 -p "$p_nbdkit" file file="$img" cache=default \
    2>"$dir/nbdkit.log" & pids+=($!)
"${srv_cpus[@]}" qemu-nbd -f raw -b 127.0.0.1 -p "$p_qemu" -x bench -t -e 128 --cache=writeback \
    "$img" 2>"$dir/qemu-nbd.log" & pids+=($!)
servers=(smcrd nbdkit qemu-nbd)
declare -A uri=(
    [smcrd]="nbd://127.0.0.1:$p_smcrd/bench"
    [nbdkit]="nbd://127.0.0.1:$p_nbdkit/"
    [qemu-nbd]="nbd://127.0.0.1:$p_qemu/bench"
)
# The servers run in the foreground of $! (the smcrd wrapper execs it).
declare -A spid=([smcrd]=${pids[0]} [nbdkit]=${pids[1]} [qemu-nbd]=${pids[2]})
if [ "$old" = 1 ]; then
    p_old=$(port)
    if [ -n "${SMCRD_OLD:-}" ]; then
        "${srv_cpus[@]}" "$SMCRD_OLD" -f -l 127.0.0.1 -p "$p_old" \
            "${smcrd_opts[@]}" ${SMCRD_ARGS:-} 2>"$dir/smcrd-old.log" & pids+=($!)
    else
        SMCRD_RING_SOCKET=0 "${srv_cpus[@]}" "$smcrd" -f -l 127.0.0.1 -p "$p_old" \
            "${smcrd_opts[@]}" ${SMCRD_ARGS:-} 2>"$dir/smcrd-old.log" & pids+=($!)
    fi
    servers=(smcrd smcrd-old nbdkit qemu-nbd)
    uri[smcrd-old]="nbd://127.0.0.1:$p_old/bench"
    spid[smcrd-old]=${pids[3]}
fi
for s in "${servers[@]}"; do wait_port "${uri[$s]}"; done

# CPU time of a process and all its threads, in clock ticks.
cpu_ticks() { awk '{ print $14 + $15 }' "/proc/$1/stat"; }
tck=$(getconf CLK_TCK)

run_fio() { # server rw bs depth metric clients -> "value server-cpu client-cpu syscalls"
    local out=$dir/fio.json c0 c1 t perf=- ppid= rpid= spid2=
    rm -f "$dir/perf.txt"
    # Same start for every server: the whole file in the page cache (this
    # machine's kernel reclaims cold pages on its own, DAMON).
    cat "$img" >/dev/null
    c0=$(cpu_ticks "${spid[$1]}")
    # smcrd's threads all exist from its start (perf -p takes the threads
    # there are); nbdkit and qemu-nbd make threads per connection.
    if [ "$sysc" = 1 ] && [[ $1 == smcrd* ]]; then
        perf stat -x, -e raw_syscalls:sys_enter -o "$dir/perf.txt" -p "${spid[$1]}" &
        ppid=$!
        perf=$dir/perf.txt
        sleep 0.2
    fi
    if [ "$prof" = 1 ] && [ "$round" = 1 ]; then
        perf record -q -a -g -e cpu-clock -o "$dir/prof.data" 2>/dev/null & rpid=$!
        perf stat -a -x, -e context-switches,cpu-clock -o "$dir/prof.stat" & spid2=$!
        sleep 0.2
    fi
    # bash's time: user and system time of fio and its job processes (fio's
    # own messages go to fio.err: with 64 jobs it warns, and t must be two
    # numbers)
    t=$( { TIMEFORMAT='%U %S'; time "${cli_cpus[@]}" fio --name=bench --ioengine=nbd \
        --uri="${uri[$1]}" --rw="$2" --bs="$3" --iodepth="$4" --numjobs="$6" \
        --group_reporting --size="$size" --runtime="$runtime" --time_based \
        --randrepeat=0 --output-format=json --output="$out" >/dev/null 2>"$dir/fio.err"; } 2>&1 )
    c1=$(cpu_ticks "${spid[$1]}")
    if [ -n "$ppid" ]; then
        kill -INT "$ppid"
        wait "$ppid" || true
    fi
    if [ -n "$rpid" ]; then
        kill -INT "$rpid" "$spid2"
        wait "$rpid" "$spid2" || true
        prof_report "$out" "$2" "$1"
    fi
    python3 - "$out" "$2" "$5" "$((c1 - c0))" "$tck" $t "$perf" <<'PY'
import json, sys
j = json.load(open(sys.argv[1]))["jobs"][0]
side = j["read"] if "read" in sys.argv[2] else j["write"]
if j.get("error") or not side["total_ios"]:
    print("ERR - - -"); sys.exit()
srv = int(sys.argv[4]) / float(sys.argv[5])
cli = float(sys.argv[6]) + float(sys.argv[7])
n = side["total_ios"]
sc = "-"
if sys.argv[8] != "-":
    for line in open(sys.argv[8]):
        f = line.split(",")
        if len(f) > 2 and f[2].startswith("raw_syscalls:sys_enter") and f[0].isdigit():
            sc = "%.2f" % (int(f[0]) / n)
if sys.argv[3] == "iops":
    print("%.0f %.2f %.2f %s" % (side["iops"], srv * 1e6 / n, cli * 1e6 / n, sc))
else:
    gib = side["io_bytes"] / 2.0**30
    print("%.0f %.0f %.0f %s" % (side["bw"] / 1024.0, srv * 1e3 / gib, cli * 1e3 / gib, sc))
PY
}

# prof_report FIO-JSON RW SERVER: context switches and CPU per I/O of the
# whole machine while fio ran, and where the time went.
prof_report() {
    local n f=$outdir/profile/$prof_name-$3.txt
    n=$(python3 -c 'import json, sys; j = json.load(open(sys.argv[1]))["jobs"][0]
print(j["read" if "read" in sys.argv[2] else "write"]["total_ios"])' "$1" "$2" 2>/dev/null) || n=0
    mkdir -p "$outdir/profile"
    {
        echo "# $prof_name, $3 ($n I/Os): the whole machine while fio ran"
        awk -F, -v n="$n" 'n > 0 && $3 ~ /context-switches/ { printf "context switches per I/O: %.2f\n", $1 / n }
            n > 0 && $3 ~ /cpu-clock/ { printf "CPU per I/O (all CPUs, idle included): %.1f us\n", $1 * 1000 / n }' "$dir/prof.stat"
        for k in "comm 1" "dso 1" "sym 1"; do
            echo "## perf report --no-children --sort ${k% *} (>= ${k#* }%)"
            perf report -i "$dir/prof.data" --no-children --stdio -g none --percent-limit "${k#* }" \
                --sort "${k% *}" 2>/dev/null | grep -v '^#' | grep . | head -n 25
        done
    } >"$f"
    rm -f "$dir/prof.data" "$dir/prof.data.old" "$dir/prof.stat"
    echo "bench: profile in $f: $(grep -m1 'context switches' "$f")" >&2
}

mkdir -p "$outdir"
csv=$outdir/results.csv
echo "round,job,server,clients,qd,value,unit,server_cpu,client_cpu,cpu_unit,syscalls_per_io" >"$csv"
run_one() { # round name server rw bs depth metric clients
    local v c k y unit=IOPS cu=us/IO
    round=$1 prof_name=$2
    [ "$8" != 1 ] && prof_name=$2-$8
    [ "$2" = scale-qd ] && prof_name=$2-$6
    [ "$7" = bw ] && unit=MiB/s cu=ms/GiB
    if ! read -r v c k y < <(run_fio "$3" "$4" "$5" "$6" "$7" "$8") || [ -z "$v" ]; then
        # a run that failed is a row of its own, and the bench goes on
        v=ERR c=- k=- y=-
        echo "bench: round $1 $2 $3 x$8 qd$6 failed; fio said: $(tail -n 3 "$dir/fio.err" 2>/dev/null)" >&2
        tail -n 3 "$dir/$3.log" 2>/dev/null | sed 's/^/bench:   /' >&2
    fi
    echo "$1,$2,$3,$8,$6,$v,$unit,$c,$k,$cu,$y" >>"$csv"
    echo "bench: round $1 $2 $3 x$8 qd$6: $v $unit (CPU per I/O: server $c, client $k $cu; server syscalls per I/O $y)" >&2
}

for (( r=1; r<=rounds; r++ )); do
    for j in "${jobs[@]}"; do
        read -r name rw bs depth metric <<<"$j"
        for s in "${servers[@]}"; do run_one "$r" "$name" "$s" "$rw" "$bs" "$depth" "$metric" 1; done
    done
    if [ "$scale" = 1 ]; then
        for n in ${SCALE_CLIENTS:-1 4 16 64}; do
            for s in "${servers[@]}"; do run_one "$r" scale-clients "$s" randread 4k 1 iops "$n"; done
        done
        for q in ${SCALE_QD:-1 2 4 8 16 32 64 128}; do
            for s in "${servers[@]}"; do run_one "$r" scale-qd "$s" randread 4k "$q" iops 1; done
        done
    fi
done

what="fio nbd engine, $size file, ${runtime}s per job, median of $rounds round(s)"
[ "$pin" = 1 ] && what="$what, fio on CPU 0, servers on the others"
python3 "$here/bench-report.py" --title "smcrd vs nbdkit (file plugin) vs qemu-nbd" \
    --what "$what" --machine "$(nproc) CPUs, $(uname -r), load $(cut -d' ' -f1-3 /proc/loadavg)" \
    "$csv" "$outdir"
echo "bench: report in $outdir/report.md"
