#!/bin/bash
# Benchmark: smcrd against nbdkit's file plugin and qemu-nbd, serving the
# same file in the same run, measured with fio's nbd engine (libnbd).
#
#   tests/bench/bench-nbd.sh [-s SIZE] [-r SECONDS] [-n ROUNDS] [-k]
#
#   -s SIZE     size of the test file (default 1G; it is filled with random
#               data once, so reads hit real blocks)
#   -r SECONDS  runtime of every fio job (default 10)
#   -n ROUNDS   run every job ROUNDS times per server, report the best
#               (default 1); servers alternate inside a round
#   -k          keep the scratch directory
#
# Prints one row per job: IOPS (4 KiB jobs) or MiB/s (1 MiB jobs) for each
# server and smcrd's ratio to the better of the other two.
# Environment: SMCRD (path of smcrd), BENCH_DIR (scratch location),
# SMCRD_ARGS (extra smcrd options).
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
: "${abs_top_builddir:=$(cd "$here/../.." && pwd)}"
size=1G runtime=10 rounds=1 keep=0
while getopts "s:r:n:k" o; do
    case $o in
        s) size=$OPTARG ;;
        r) runtime=$OPTARG ;;
        n) rounds=$OPTARG ;;
        k) keep=1 ;;
        *) sed -n '2,18p' "$0"; exit 2 ;;
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

p_smcrd=$(port) p_nbdkit=$(port) p_qemu=$(port)
"$smcrd" -f -l 127.0.0.1 -p "$p_smcrd" --export "bench=$img" ${SMCRD_ARGS:-} \
    2>"$dir/smcrd.log" & pids+=($!)
nbdkit -f -i 127.0.0.1 -p "$p_nbdkit" file file="$img" 2>"$dir/nbdkit.log" & pids+=($!)
qemu-nbd -f raw -b 127.0.0.1 -p "$p_qemu" -x bench -t -e 16 --cache=writeback \
    "$img" 2>"$dir/qemu-nbd.log" & pids+=($!)
servers=(smcrd nbdkit qemu-nbd)
declare -A uri=(
    [smcrd]="nbd://127.0.0.1:$p_smcrd/bench"
    [nbdkit]="nbd://127.0.0.1:$p_nbdkit/"
    [qemu-nbd]="nbd://127.0.0.1:$p_qemu/bench"
)
for s in "${servers[@]}"; do wait_port "${uri[$s]}"; done
# name rw bs iodepth metric
jobs=(
    "randread-4k-qd1   randread  4k 1  iops"
    "randread-4k-qd32  randread  4k 32 iops"
    "randwrite-4k-qd1  randwrite 4k 1  iops"
    "randwrite-4k-qd32 randwrite 4k 32 iops"
    "seqread-1m-qd8    read      1M 8  bw"
    "seqwrite-1m-qd8   write     1M 8  bw"
)

run_fio() { # server rw bs depth metric -> number
    local out=$dir/fio.json
    # Same start for every server: the whole file in the page cache (this
    # machine's kernel reclaims cold pages on its own, DAMON).
    cat "$img" >/dev/null
    fio --name=bench --ioengine=nbd --uri="${uri[$1]}" --rw="$2" --bs="$3" \
        --iodepth="$4" --size="$size" --runtime="$runtime" --time_based \
        --randrepeat=0 --output-format=json --output="$out" >/dev/null
    python3 - "$out" "$2" "$5" <<'EOF'
import json, sys
j = json.load(open(sys.argv[1]))["jobs"][0]
side = j["read"] if "read" in sys.argv[2] else j["write"]
if j.get("error"):
    print("ERR"); sys.exit()
print("%.0f" % (side["iops"] if sys.argv[3] == "iops" else side["bw"] / 1024.0))
EOF
}

declare -A best
for (( r=1; r<=rounds; r++ )); do
    for j in "${jobs[@]}"; do
        read -r name rw bs depth metric <<<"$j"
        for s in "${servers[@]}"; do
            v=$(run_fio "$s" "$rw" "$bs" "$depth" "$metric")
            k="$name/$s"
            if [ -z "${best[$k]:-}" ] || { [ "$v" != ERR ] && [ "${best[$k]}" != ERR ] &&
                    [ "$v" -gt "${best[$k]}" ]; }; then
                best[$k]=$v
            fi
            echo "bench: round $r $name $s: $v" >&2
        done
    done
done

echo
printf 'smcrd vs nbdkit (file plugin) vs qemu-nbd, fio nbd engine, %s file, %ss per job, best of %s\n' \
    "$size" "$runtime" "$rounds"
printf '%-19s %-6s %10s %10s %10s %8s\n' job unit smcrd nbdkit qemu-nbd ratio
for j in "${jobs[@]}"; do
    read -r name rw bs depth metric <<<"$j"
    a=${best[$name/smcrd]} b=${best[$name/nbdkit]} c=${best[$name/qemu-nbd]}
    ratio=$(python3 -c "
a,b,c='$a','$b','$c'
try: print('%.2f' % (float(a)/max(float(b),float(c))))
except Exception: print('n/a')")
    unit=IOPS; [ "$metric" = bw ] && unit=MiB/s
    printf '%-19s %-6s %10s %10s %10s %8s\n' "$name" "$unit" "$a" "$b" "$c" "$ratio"
done
echo "(ratio: smcrd / best of nbdkit and qemu-nbd)"
