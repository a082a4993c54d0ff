#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# Benchmark: smcrd against qemu-nbd (qemu's rbd driver, qemu-block-extra)
# serving the same Ceph RBD image of a single-node cluster started here
# (tests/ceph-lib.sh: one mon, one memstore osd), bench-nbd.sh's jobs with
# fio's nbd engine over TCP on the host, one after the other (each server
# alone on the image: they would pass its exclusive lock around).  Both
# without librbd's cache (smcrd turns it off; qemu-nbd --cache=none):
# a write is acknowledged once the cluster has it.
#
#   tests/bench/bench-rbd.sh [-s MIB] [-r SECONDS] [-j REGEX] [-n ROUNDS]
#
#   -s MIB      image size (default 256; filled with random data once)
#   -r SECONDS  runtime of every fio job (default 10)
#   -j REGEX    only the jobs whose name matches
#   -n ROUNDS   rounds (default 1); the server that goes first alternates
#   -x KEY=VAL  also smcrd with this librbd setting (a copy of the cluster's
#               config file with it), column smcrd-x
#   -b          also fio's rbd engine on the image (librbd with no NBD hop:
#               the ceiling of both servers), column librbd
#
# Prints one row per job: IOPS (4 KiB) or MiB/s (1 MiB) of each server (the
# mean of the rounds) and smcrd's ratio to qemu-nbd; with more rounds, each
# round's figures on stderr.  On a shared host the figures move.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
srcdir=$(cd "$here/.." && pwd)
: "${abs_top_builddir:=$(cd "$here/../.." && pwd)}"
. "$srcdir/functions.sh"
. "$srcdir/ceph-lib.sh"
set +u
. "$srcdir/test-smcrd-lib.sh"
set -u
mib=256 runtime=10 only=. rounds=1 base= extra=
while getopts "s:r:j:n:bx:" o; do
    case $o in
        x) extra=$OPTARG ;;
        b) base=librbd ;;
        n) rounds=$OPTARG ;;
        s) mib=$OPTARG ;;
        r) runtime=$OPTARG ;;
        j) only=$OPTARG ;;
        *) exit 2 ;;
    esac
done
command -v qemu-nbd >/dev/null || fail "needs qemu-nbd"
[ -f /usr/lib/x86_64-linux-gnu/qemu/block-rbd.so ] || fail "needs qemu-block-extra (qemu's rbd driver)"

jobs=(
    "randread-4k-qd1   randread  4k 1  iops"
    "randread-4k-qd32  randread  4k 32 iops"
    "randwrite-4k-qd1  randwrite 4k 1  iops"
    "randwrite-4k-qd32 randwrite 4k 32 iops"
    "seqread-1m-qd8    read      1M 8  bw"
    "seqwrite-1m-qd8   write     1M 8  bw"
)
d=$(scratch_dir)
SMCR_CEPH_OSD_MIB=$(( mib + 512 ))
start_ceph "$d/ceph"
rbd_admin create --size "${mib}M" rbd/bench
make_random "$d/fill.img" "$mib"
rbd_admin import --no-progress "$d/fill.img" rbd/fill >/dev/null
rbd_admin rm --no-progress rbd/bench >/dev/null
rbd_admin rename rbd/fill rbd/bench
rm -f "$d/fill.img"

# run_job SERVER URI RW BS QD KIND: one figure on stdout.
run_job() {
    local out=$d/$1.json v eng=(--ioengine=nbd --uri="$2")
    local conf=$CEPH_CONF
    [ "$1" = librbd ] && eng=(--ioengine=rbd --clientname="$CEPH_ID" --pool=rbd --rbdname=bench)
    # fio's rbd engine as the servers run librbd: without its cache.
    [ "$1" = librbd ] && conf=$d/ceph-nocache.conf
    CEPH_CONF=$conf fio --name=bench "${eng[@]}" --rw="$3" --bs="$4" --iodepth="$5" \
        --size="${mib}M" --runtime="$runtime" --time_based --randrepeat=0 \
        --output-format=json --output="$out" >/dev/null 2>"$d/fio.err"
    v=$(python3 - "$out" "$6" <<'EOF'
import json, sys
j = json.load(open(sys.argv[1]))["jobs"][0]
r, w = j["read"], j["write"]
if sys.argv[2] == "iops":
    print(round(r["iops"] + w["iops"]))
else:
    print(round((r["bw"] + w["bw"]) / 1024, 1))
EOF
)
    echo "$v"
}

{ cat "$CEPH_CONF"; echo "[client]"; echo "rbd cache = false"; } >"$d/ceph-nocache.conf"
xs=
if [ -n "$extra" ]; then
    xs=smcrd-x
    { cat "$CEPH_CONF"; echo "[client]"; echo "${extra%%=*} = ${extra#*=}"; } >"$d/ceph-x.conf"
fi
declare -A res
for (( round=1; round<=rounds; round++ )); do
order="smcrd $xs qemu-nbd"
[ $(( round % 2 )) = 0 ] && order="qemu-nbd $xs smcrd"
for server in $order $base; do
    port=$(free_port) pid=
    if [ "$server" = librbd ]; then
        u=
    elif [ "$server" != qemu-nbd ]; then
        conf=$CEPH_CONF
        [ "$server" = smcrd-x ] && conf=$d/ceph-x.conf
        "$SMCRD" -f -l 127.0.0.1 -p "$port" \
            --export "bench=rbd:rbd/bench,ceph-conf=$conf,ceph-id=$CEPH_ID" \
            >"$d/$server.log" 2>&1 &
        u=nbd://127.0.0.1:$port/bench
    else
        qemu-nbd -t -b 127.0.0.1 -p "$port" -x bench -f raw --cache=none --aio=threads \
            "rbd:rbd/bench:id=$CEPH_ID:conf=$CEPH_CONF" >"$d/$server.log" 2>&1 &
        u=nbd://127.0.0.1:$port/bench
    fi
    if [ -n "$u" ]; then
        pid=$!
        cleanup_fn "kill -KILL $pid 2>/dev/null"
        wait_for 30 nbdinfo "$u"
    fi
    for j in "${jobs[@]}"; do
        read -r name rw bs qd kind <<<"$j"
        [[ $name =~ $only ]] || continue
        v=$(run_job "$server" "$u" "$rw" "$bs" "$qd" "$kind")
        [ "$rounds" -gt 1 ] && echo "round $round: $server $name $v" >&2
        res[$server,$name]=$(python3 -c "print(round(${res[$server,$name]:-0} + $v / $rounds, 1))")
    done
    [ -z "$pid" ] || { kill -TERM "$pid"; wait "$pid" || true; }
done
done
hdr="| $(printf '%-18s' job) | $(printf '%10s' smcrd) | $(printf '%10s' qemu-nbd) | ratio  |"
sep="|--------------------|------------|------------|--------|"
[ -n "$xs" ] && hdr+="    smcrd-x | ratio  |" sep+="------------|--------|"
[ -n "$base" ] && hdr+="     librbd |" sep+="------------|"
[ -n "$xs" ] && echo "smcrd-x: smcrd with $extra"
echo "$hdr"
echo "$sep"
for j in "${jobs[@]}"; do
    read -r name rw bs qd kind <<<"$j"
    [[ $name =~ $only ]] || continue
    a=${res[smcrd,$name]} b=${res[qemu-nbd,$name]}
    row=$(printf '| %-18s | %10s | %10s | %6s |' "$name ($kind)" "$a" "$b" \
        "$(python3 -c "print(f'{$a/$b:.2f}' if $b else '-')")")
    [ -n "$xs" ] && row+=$(printf ' %10s | %6s |' "${res[smcrd-x,$name]}" \
        "$(python3 -c "print(f'{${res[smcrd-x,$name]}/$b:.2f}' if $b else '-')")")
    [ -n "$base" ] && row+=$(printf ' %10s |' "${res[librbd,$name]}")
    echo "$row"
done
