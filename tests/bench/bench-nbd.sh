#!/bin/bash
# Benchmark: smcrd against nbdkit's file plugin and qemu-nbd, serving the
# same file in the same run, measured with fio's nbd engine (libnbd).
#
#   tests/bench/bench-nbd.sh [-s SIZE] [-r SECONDS] [-n ROUNDS] [-j REGEX] [-c] [-k]
#
#   -s SIZE     size of the test file (default 1G; it is filled with random
#               data once, so reads hit real blocks)
#   -r SECONDS  runtime of every fio job (default 10)
#   -n ROUNDS   run every job ROUNDS times per server, report the best
#               (default 1); servers alternate inside a round
#   -j REGEX    only the jobs whose name matches (e.g. 1m)
#   -c          fio on CPU 0, the servers on the other CPUs, like a client
#               on another host (without it the scheduler places them: a
#               4 KiB qd1 job runs ~4x faster when client and server share
#               a CPU than when they do not)
#   -k          keep the scratch directory
#
# Prints one row per job: IOPS (4 KiB jobs) or MiB/s (1 MiB jobs) for each
# server and smcrd's ratio to the better of the other two; then the CPU
# time each server spent on it (all its threads; usec per I/O, or ms per
# GiB).  All three serve the file through the page cache (smcrd without
# --direct, nbdkit cache=default, qemu-nbd --cache=writeback), and every
# job starts with the whole file cached.
# Environment: SMCRD (path of smcrd), BENCH_DIR (scratch location),
# SMCRD_ARGS (extra smcrd options).
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
: "${abs_top_builddir:=$(cd "$here/../.." && pwd)}"
size=1G runtime=10 rounds=1 keep=0 only=. pin=0
while getopts "s:r:n:j:ck" o; do
    case $o in
        s) size=$OPTARG ;;
        r) runtime=$OPTARG ;;
        n) rounds=$OPTARG ;;
        j) only=$OPTARG ;;
        c) pin=1 ;;
        k) keep=1 ;;
        *) sed -n '2,26p' "$0"; exit 2 ;;
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
"${srv_cpus[@]}" "$smcrd" -f -l 127.0.0.1 -p "$p_smcrd" --export "bench=$img" ${SMCRD_ARGS:-} \
    2>"$dir/smcrd.log" & pids+=($!)
"${srv_cpus[@]}" nbdkit -f -i 127.0.0.1 -p "$p_nbdkit" file file="$img" cache=default \
    2>"$dir/nbdkit.log" & pids+=($!)
"${srv_cpus[@]}" qemu-nbd -f raw -b 127.0.0.1 -p "$p_qemu" -x bench -t -e 16 --cache=writeback \
    "$img" 2>"$dir/qemu-nbd.log" & pids+=($!)
servers=(smcrd nbdkit qemu-nbd)
declare -A uri=(
    [smcrd]="nbd://127.0.0.1:$p_smcrd/bench"
    [nbdkit]="nbd://127.0.0.1:$p_nbdkit/"
    [qemu-nbd]="nbd://127.0.0.1:$p_qemu/bench"
)
# The servers run in the foreground of $! (the smcrd wrapper execs it).
declare -A spid=([smcrd]=${pids[0]} [nbdkit]=${pids[1]} [qemu-nbd]=${pids[2]})
for s in "${servers[@]}"; do wait_port "${uri[$s]}"; done

# CPU time of a process and all its threads, in clock ticks.
cpu_ticks() { awk '{ print $14 + $15 }' "/proc/$1/stat"; }
tck=$(getconf CLK_TCK)

run_fio() { # server rw bs depth metric -> "value cpu"
    local out=$dir/fio.json c0 c1
    # Same start for every server: the whole file in the page cache (this
    # machine's kernel reclaims cold pages on its own, DAMON).
    cat "$img" >/dev/null
    c0=$(cpu_ticks "${spid[$1]}")
    "${cli_cpus[@]}" fio --name=bench --ioengine=nbd --uri="${uri[$1]}" --rw="$2" --bs="$3" \
        --iodepth="$4" --size="$size" --runtime="$runtime" --time_based \
        --randrepeat=0 --output-format=json --output="$out" >/dev/null
    c1=$(cpu_ticks "${spid[$1]}")
    python3 - "$out" "$2" "$5" "$((c1 - c0))" "$tck" <<'PY'
import json, sys
j = json.load(open(sys.argv[1]))["jobs"][0]
side = j["read"] if "read" in sys.argv[2] else j["write"]
if j.get("error") or not side["total_ios"]:
    print("ERR -"); sys.exit()
sec = int(sys.argv[4]) / float(sys.argv[5])
if sys.argv[3] == "iops":
    print("%.0f %.1f" % (side["iops"], sec * 1e6 / side["total_ios"]))
else:
    print("%.0f %.0f" % (side["bw"] / 1024.0, sec * 1e3 / (side["io_bytes"] / 2.0**30)))
PY
}

declare -A best cpu
for (( r=1; r<=rounds; r++ )); do
    for j in "${jobs[@]}"; do
        read -r name rw bs depth metric <<<"$j"
        for s in "${servers[@]}"; do
            read -r v c < <(run_fio "$s" "$rw" "$bs" "$depth" "$metric")
            k="$name/$s"
            if [ -z "${best[$k]:-}" ] || { [ "$v" != ERR ] && { [ "${best[$k]}" = ERR ] ||
                    [ "$v" -gt "${best[$k]}" ]; }; }; then
                best[$k]=$v cpu[$k]=$c
            fi
            echo "bench: round $r $name $s: $v (server CPU $c)" >&2
        done
    done
done

ratio() {
    python3 -c "
a,b,c='$1','$2','$3'
try: print('%.2f' % (float(a)/max(float(b),float(c))))
except Exception: print('n/a')"
}
echo
printf 'smcrd vs nbdkit (file plugin) vs qemu-nbd, fio nbd engine, %s file, %ss per job, best of %s%s\n' \
    "$size" "$runtime" "$rounds" "$([ "$pin" = 1 ] && echo ', fio on CPU 0, servers on the others')"
printf '%-19s %-6s %10s %10s %10s %8s\n' job unit smcrd nbdkit qemu-nbd ratio
for j in "${jobs[@]}"; do
    read -r name rw bs depth metric <<<"$j"
    a=${best[$name/smcrd]} b=${best[$name/nbdkit]} c=${best[$name/qemu-nbd]}
    unit=IOPS; [ "$metric" = bw ] && unit=MiB/s
    printf '%-19s %-6s %10s %10s %10s %8s\n' "$name" "$unit" "$a" "$b" "$c" "$(ratio "$a" "$b" "$c")"
done
echo "(ratio: smcrd / best of nbdkit and qemu-nbd)"
echo
echo "server CPU time for those runs (all threads of the server process)"
printf '%-19s %-6s %10s %10s %10s\n' job unit smcrd nbdkit qemu-nbd
for j in "${jobs[@]}"; do
    read -r name rw bs depth metric <<<"$j"
    unit=us/IO; [ "$metric" = bw ] && unit=ms/GiB
    printf '%-19s %-6s %10s %10s %10s\n' "$name" "$unit" "${cpu[$name/smcrd]}" \
        "${cpu[$name/nbdkit]}" "${cpu[$name/qemu-nbd]}"
done
