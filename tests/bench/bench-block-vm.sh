#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# Benchmark: smcrbd beside the RDMA block devices users would pick instead,
# in one VM pair of the rxe lane (two links), on the same backing file (a
# tmpfs file in B, /dev/shm) with the same fio jobs (direct=1, libaio, on
# the block device in A), the systems in a rotating order each round:
#   smcr     smcrbd over SMC-R: nbdkit's smcr plugin (2 connections) and
#            the kernel's nbd-client on its unix socket (/dev/nbd0)
#   attach   smcrbd through smcr-attach: the kernel's nbd over the kernel's
#            AF_SMC (SMC-Rv2) to smcrd (/dev/nbd2); only when asked for
#            (-s): the guests then boot with the patched rdma_rxe and
#            nbd.ko for every system (SMCR_VM_RXE=smc SMCR_VM_NBD=smc,
#            see tests/vm/smcr-attach.sh)
#   fwd      smcrbd through smcr-attach -F: the stock nbd driver on socket
#            pairs to smcr-attach's forwarder on libsmcr (/dev/nbd3)
#   tcp      smcrbd over plain NBD/TCP: nbd-client to smcrd (/dev/nbd1)
#   ublk     smcrbd through smcr-attach --ublk (2 connections): the kernel's
#            ublk driver (/dev/ublkb0), io_uring into the block layer, no
#            nbd.ko; only when asked for (-s) and on a kernel with
#            ublk_drv (SMCR_VM_KERNEL=6.12), skipped otherwise
#   fuse     smcrbd through smcr-fuse (2 connections): the export as a file
#            in a FUSE mount (/mnt/f/disk), the sequential jobs only
#   nvmeof   NVMe-oF/RDMA, native multipath over both links (rdma-peers.sh)
#   rnbd     RNBD/RTRS, two paths (rdma-peers.sh; built by kmod-build.sh)
# Jobs: 4k randread qd1 (mean, p50, p99, p99.9 completion latency), 4k
# randread qd16, 4k randwrite qd16, 64k randrw 70/30 qd8, 1M seqread qd4,
# 1M seqwrite qd4.  CPU per I/O in each guest (A client, B target): busy
# jiffies of /proc/stat over the job divided by its I/Os.  Ratios to the
# better of nvmeof and rnbd (the mean over rounds), beside the aims.
# Not in make check: "make bench-block-vm" in the build tree.
#
#   tests/bench/bench-block-vm.sh [-B BUILDDIR] [-r ROUNDS] [-t SECS]
#                                 [-s "smcr fwd tcp nvmeof rnbd"] [-p JOBS]
#                                 [-P SYSTEMS] [-j JOBS] [-R BYTES] [-o DIR]
#   -B BUILDDIR  the build tree (default ./build, or $abs_top_builddir)
#   -r ROUNDS    rounds (default 1); -t SECS per job (default 10)
#   -s SYSTEMS   which systems (default "smcr fwd tcp nvmeof rnbd")
#   -p JOBS      after each measured run of these jobs (e.g. "rr4k-qd16
#                sr1m-qd4"), one more of the same job under perf record -a -g
#                (cpu-clock, 499 Hz) in both guests while fio runs in A: DIR/profile/SYSTEM.JOB.{A,B}.txt
#                (by process and DSO, and the top symbols) and context
#                switches per I/O of each guest (/proc/stat ctxt)
#   -P SYSTEMS   profile only these systems (default: all); the guests'
#                perf.data and kallsyms are kept beside the summaries
#                (DIR/profile/SYSTEM.JOB.{A,B}.perf.data, .kallsyms) for
#                perf report on the host (--kallsyms)
#   -j JOBS      run only these jobs (default: all six)
#   -R BYTES     SMC-R receive buffers of BYTES at both ends: smcrd's
#                (--rmbe-size; default auto, 4 MiB down to 64 KiB)
#                and the plugin's, -F's and ublk's (rmbe-size; default 4M);
#                attach's AF_SMC socket buffers too (-B; default 256K), which
#                Linux sizes its SMC-R buffers by (beyond 512 KiB from 6.11)
#   -o DIR       report dir (default BUILDDIR/bench-block-report):
#                results.tsv (one line per round, system and job), report.md,
#                cdf.tsv and the plots (bench-block-plots.sh): lat-cdf-4k-qd1.png,
#                iops.png, bandwidth.png
# Holds the VM lock (SMCR_VM_LOCK, default /tmp/smcrbd-vm.lock) throughout.
set -uo pipefail

here=$(cd "$(dirname "$0")" && pwd)
. "$here/bench-vm-lib.sh"
top=$(cd "$here/../.." && pwd)
builddir=${abs_top_builddir:-$top/build}
rounds=1 secs=10 systems="smcr fwd tcp nvmeof rnbd" outdir= profile= psys= only= rmbe=
while [ $# -gt 0 ]; do
    case $1 in
        -B) builddir=$2; shift 2 ;;
        -r) rounds=$2; shift 2 ;;
        -t) secs=$2; shift 2 ;;
        -s) systems=$2; shift 2 ;;
        -o) outdir=$2; shift 2 ;;
        -p) profile=$2; shift 2 ;;
        -P) psys=$2; shift 2 ;;
        -j) only=$2; shift 2 ;;
        -R) rmbe=$(numfmt --from=iec "$2") || exit 2; shift 2 ;;
        *) sed -n '3,57p' "$0"; exit 2 ;;
    esac
done
builddir=$(cd "$builddir" && pwd) || exit 1
: "${outdir:=$builddir/bench-block-report}"
mkdir -p "$outdir" || exit 1
outdir=$(cd "$outdir" && pwd)
exec > >(tee "$outdir/report.md") 2>&1
export abs_top_builddir=$builddir abs_builddir=$builddir/tests
export abs_top_srcdir=$top srcdir=$top/tests
: "${SMCR_VM_WORKDIR:=$builddir/tests/bench/bench-block-vm.d}"
: "${SMCR_VM_TIMEOUT:=3600}"
: "${SMCR_VM_CMD_TIMEOUT:=180}"
export SMCR_VM_WORKDIR SMCR_VM_TIMEOUT SMCR_VM_CMD_TIMEOUT

SMCRD=$builddir/server/smcrd
PLUGIN=$builddir/client/.libs/nbdkit-smcr-plugin.so
ATTACH=$builddir/client/smcr-attach
FUSE=$builddir/client/smcr-fuse
N=$builddir/tests/bench/smc-nl
bench_need "$SMCRD" "$PLUGIN" "$ATTACH" "$N"
case " $systems " in *" fuse "*) bench_need "$FUSE"; bench_need_cmd fusermount3 ;; esac
bench_need_cmd fio nbdkit
[ -z "$profile" ] || bench_need_cmd perf

bench_vm_lock

. "$top/tests/vm/lib.sh"
. "$top/tests/vm/rdma-peers.sh"
bench_peers_requires
eids=
case " $systems " in
    *" attach "*) export SMCR_VM_RXE=smc SMCR_VM_NBD=smc; eids="--eids SMCRBD.KPEER" ;;
esac
if [[ " $systems " == *" ublk "* ]] && ! modprobe -S "$VM_KVER" -n ublk_drv >/dev/null 2>&1; then
    echo "kernel $VM_KVER has no ublk_drv: ublk is skipped (SMCR_VM_KERNEL=6.12)"
    systems=$(echo " $systems " | sed 's/ ublk / /; s/^ *//; s/ *$//')
fi
vm_start_pair
[ -n "$eids" ] && kpeer_setup A
B1=$(vm_ip B 1)
IMG=/dev/shm/disk.img
vm_run B "truncate -s 64M $IMG && modprobe loop" || fail "backing file"
vm_run A "modprobe nbd" || fail "nbd"
# -R: smcrd's option (srm), the plugin's parameter (prm), -F's and ublk's
# (arm), attach's socket buffers (bm)
srm= prm= arm= bm=
if [ -n "$rmbe" ]; then
    srm="--rmbe-size $rmbe" prm="rmbe-size=$rmbe" arm="--rmbe-size=$rmbe" bm="-B $rmbe"
    echo "SMC-R receive buffers of $rmbe bytes at both ends"
fi
vm_bg B "exec $SMCRD -f -P /tmp/smcrd.pid -p 10809 --smcr-port 10810 $eids $srm -e disk=$IMG >/tmp/smcrd.log 2>&1" >/dev/null
vm_run B "for i in \$(seq 300); do grep -q 'listening for NBD over SMC-R' /tmp/smcrd.log && exit 0; sleep 0.1; done; cat /tmp/smcrd.log; exit 1" ||
    fail "smcrd did not come up in B"
SA=$(vm_share A)

# attach SYSTEM: prints the device in A.
attach() {
    case $1 in
        smcr)
            vm_bg A "exec nbdkit -f -U /tmp/nbdkit.sock -P /tmp/nbdkit.pid $PLUGIN server=$B1 export=disk connections=2 timeout=60 $prm 2>/tmp/nbdkit.log" >/dev/null
            vm_run A "for i in \$(seq 600); do [ -S /tmp/nbdkit.sock ] && break; sleep 0.1; done
nbd-client -N '' -b 4096 -C 2 -u /tmp/nbdkit.sock /dev/nbd0 >/dev/null || { cat /tmp/nbdkit.log; exit 1; }
echo /dev/nbd0" ;;
        tcp) vm_run A "nbd-client -N disk -b 4096 -C 2 $B1 10809 /dev/nbd1 >/dev/null && echo /dev/nbd1" ;;
        fwd)
            vm_bg A "exec $ATTACH -F -C 2 $arm $B1:10810 disk /dev/nbd3 2>/tmp/fwd.log" >/dev/null
            vm_run A "for i in \$(seq 300); do grep -q 'over SMC-R, forwarded' /tmp/fwd.log && echo /dev/nbd3 && exit 0; sleep 0.1; done
cat /tmp/fwd.log >&2; exit 1" ;;
        ublk)
            vm_bg A "exec $ATTACH --ublk=0 -C 2 $arm $B1:10810 disk 2>/tmp/ublk.log" >/dev/null
            vm_run A "for i in \$(seq 300); do grep -q '/dev/ublkb0: .* queue(s) of' /tmp/ublk.log && echo /dev/ublkb0 && exit 0; sleep 0.1; done
cat /tmp/ublk.log >&2; exit 1" ;;
        attach)
            vm_bg A "exec $ATTACH -C 2 -T 10 -D 60 $bm $B1:10810 disk /dev/nbd2 2>/tmp/attach.log" >/dev/null
            vm_run A "for i in \$(seq 300); do grep -q 'connection(s) over AF_SMC' /tmp/attach.log && echo /dev/nbd2 && exit 0; sleep 0.1; done
cat /tmp/attach.log >&2; exit 1" ;;
        fuse) vm_run A "modprobe fuse && mkdir -p /mnt/f && $FUSE -C 2 smcr://$B1:10810/disk /mnt/f && echo /mnt/f/disk" ;;
        nvmeof) nvmet_export "$IMG" >/dev/null && nvmeof_attach ;;
        rnbd) rnbd_export "$IMG" >/dev/null && rnbd_attach ;;
    esac
}
detach() {
    case $1 in
        smcr) vm_run A "nbd-client -d /dev/nbd0 >/dev/null; kill \$(cat /tmp/nbdkit.pid); for i in \$(seq 100); do [ -e /proc/\$(cat /tmp/nbdkit.pid) ] || exit 0; sleep 0.1; done" ;;
        tcp) vm_run A "nbd-client -d /dev/nbd1 >/dev/null" ;;
        attach) vm_run A "$ATTACH -d /dev/nbd2" >/dev/null ;;
        fwd) vm_run A "$ATTACH -d /dev/nbd3" >/dev/null ;;
        ublk) bench_ublk_stop
              # its summary: requests, failures, WRITEs from the send buffer
              vm_run A "grep -h 'request(s), ' /tmp/ublk.log | tail -n 1 | sed 's/^.*ublk: /  ublk: /'" || true ;;
        fuse) vm_run A "fusermount3 -u /mnt/f" ;;
        nvmeof) nvmeof_detach; nvmet_unexport ;;
        rnbd) rnbd_detach; rnbd_unexport ;;
    esac
}

# name rw bs iodepth [extra]
JOBS=(
    "rr4k-qd1 randread 4k 1"
    "rr4k-qd16 randread 4k 16"
    "rw4k-qd16 randwrite 4k 16"
    "rw64k-qd8 randrw 64k 8 --rwmixread=70"
    "sr1m-qd4 read 1M 4"
    "sw1m-qd4 write 1M 4"
)
# fio's completion-latency percentiles (at most 20): the 4k qd1 CDF plot.
pcts=1:5:10:20:30:40:50:60:70:80:90:95:97:99:99.5:99.9:99.99
stat_sh='read -r _ u n s i w q sq st _ </proc/stat; echo $((u + n + s + q + sq + st))'
# Frames the guest sent on its links (every NIC is a link): with CPU per
# I/O, what each system puts on the wire per I/O.
net_sh='t=0; for f in /sys/class/net/*/statistics/tx_packets; do case $f in */lo/*) continue ;; esac; read -r x <$f; t=$((t + x)); done; echo $t'
# profile_job SYSTEM DEV NAME RW BS QD [EXTRA]: the job again under perf in
# both guests; perf.data, kallsyms and summaries in $outdir/profile.
profile_job() {
    local s=$1 dev=$2 name=$3 rw=$4 bs=$5 qd=$6 extra=${7:-} v pj=() cA cB p t1 win
    # perf runs in both guests until fio has ended in A (SIGTERM: perf
    # record stops and writes its file).  Under TCG its start takes tens of
    # seconds, so the summaries (made on the host, which has the guests'
    # binaries) keep the samples of the $secs s up to A's last fio sample
    # only.  perf's clock counts from boot and the guests boot together
    # (checked: B's target threads ran within a second of A's fio).
    local rec="perf record -a -g -e cpu-clock -F 499 -o /tmp/perf.data >/dev/null 2>&1 &
echo \$! >/tmp/perf.pid; wait
cp /tmp/perf.data SHARE/prof.data; cat /proc/kallsyms >SHARE/prof.kallsyms; rm -f /tmp/perf.data /tmp/perf.pid"
    mkdir -p "$outdir/profile"
    for v in A B; do
        pj+=("$(vm_bg "$v" "${rec//SHARE/$(vm_share "$v")}")")
        vm_run "$v" "for i in \$(seq 300); do [ -s /tmp/perf.data ] && exit 0; sleep 0.1; done; exit 1" ||
            echo "bench: perf did not start in $v"
    done
    cB=$(vm_run B "awk '/^ctxt/ {print \$2}' /proc/stat")
    vm_run -t $((secs + 120)) A "c0=\$(awk '/^ctxt/ {print \$2}' /proc/stat)
fio --name=$name --filename=$dev --direct=1 --ioengine=libaio --rw=$rw --bs=$bs --iodepth=$qd $extra \
    --runtime=$secs --time_based=1 --output-format=json --output=$SA/prof.json >/dev/null
c1=\$(awk '/^ctxt/ {print \$2}' /proc/stat); echo \$((c1 - c0)) >$SA/prof.ctxA; kill -TERM \$(cat /tmp/perf.pid)" ||
        echo "bench: $s $name (profile) failed"
    cB=$(( $(vm_run B "awk '/^ctxt/ {print \$2}' /proc/stat; kill -TERM \$(cat /tmp/perf.pid)" | head -n 1) - cB ))
    vm_wait -t 300 A "${pj[0]}" >/dev/null; vm_wait -t 300 B "${pj[1]}" >/dev/null
    cA=$(cat "$SA/prof.ctxA")
    python3 - "$SA/prof.json" "$cA" "$cB" <<'EOF' >"$outdir/profile/$s.$name.ctx"
import json, sys
j = json.load(open(sys.argv[1]))["jobs"][0]
ios = j["read"]["total_ios"] + j["write"]["total_ios"]
print("%d I/Os under perf; context switches per I/O: A %.1f, B %.1f" % (ios, int(sys.argv[2]) / max(ios, 1), int(sys.argv[3]) / max(ios, 1)))
EOF
    for v in A B; do
        mv "$(vm_share "$v")/prof.data" "$outdir/profile/$s.$name.$v.perf.data"
        mv "$(vm_share "$v")/prof.kallsyms" "$outdir/profile/$s.$name.$v.kallsyms"
    done
    p=$outdir/profile/$s.$name
    t1=$(perf script -i "$p.A.perf.data" --kallsyms "$p.A.kallsyms" -F comm,time 2>/dev/null |
             awk '$1 == "fio" { t = $NF } END { sub(":", "", t); print t }')
    win=
    [ -n "$t1" ] && win=$(awk -v t="$t1" -v s="$secs" 'BEGIN { printf "%.6f,%.6f", t - s, t }')
    for v in A B; do
        local pr=(perf report -i "$p.$v.perf.data" --kallsyms "$p.$v.kallsyms" --no-children -g none --stdio ${win:+--time "$win"})
        { echo "## perf time ${win:-all (no fio sample in A)}"
          echo '## by process and DSO'
          "${pr[@]}" --sort comm,dso --percent-limit 1 2>/dev/null | grep -v '^#' | grep -v '^$'
          echo '## top symbols'
          "${pr[@]}" --sort comm,sym --percent-limit 0.7 2>/dev/null | grep -v '^#' | grep -v '^$' | head -n 40
        } >"$p.$v.txt"
    done
    vm_say "profile $s $name: $(cat "$outdir/profile/$s.$name.ctx")"
}

res=$outdir/results.tsv
rm -f "$outdir/cdf.tsv"
printf 'round\tsystem\tjob\tiops\tMBps\tlat_mean_us\tp50_us\tp99_us\tp999_us\tcpuA_us_per_io\tcpuB_us_per_io\tframesA_per_io\tframesB_per_io\n' >"$res"
read -r -a sys <<<"$systems"
hz=$(getconf CLK_TCK)
for (( r=1; r<=rounds; r++ )); do
    n=${#sys[@]}
    for (( k=0; k<n; k++ )); do
        s=${sys[$(( (k + r - 1) % n ))]}
        dev=$(attach "$s") || { echo "bench: round $r: $s did not attach"; detach "$s"; continue; }
        vm_say "round $r: $s on $dev"
        for j in "${JOBS[@]}"; do
            read -r name rw bs qd extra <<<"$j"
            [ "$s" = fuse ] && [[ $name != s?1m-* ]] && continue
            [ -z "$only" ] || [[ " $only " == *" $name "* ]] || continue
            read -r b0 n0 <<<"$(vm_run B "echo \$($stat_sh) \$($net_sh)")"
            vm_run -t $((secs + 120)) A "a0=\$($stat_sh) f0=\$($net_sh)
fio --name=$name --filename=$dev --direct=1 --ioengine=libaio --rw=$rw --bs=$bs --iodepth=$qd $extra \
    --runtime=$secs --time_based=1 --percentile_list=$pcts --output-format=json --output=$SA/$s.$name.$r.json >/dev/null
rc=\$?; a1=\$($stat_sh) f1=\$($net_sh); echo \$((a1 - a0)) \$((f1 - f0)) >$SA/$s.$name.$r.cpuA; exit \$rc" ||
                { echo "bench: $s $name failed"; continue; }
            read -r b1 n1 <<<"$(vm_run B "echo \$($stat_sh) \$($net_sh)")"
            read -r ja na <"$SA/$s.$name.$r.cpuA"
            python3 - "$SA/$s.$name.$r.json" "$ja" $((b1 - b0)) "$hz" "$r" "$s" "$name" "$outdir/cdf.tsv" "$na" $((n1 - n0)) >>"$res" <<'EOF'
import json, sys
f, ja, jb, hz, r, s, name, cdf, na, nb = sys.argv[1:]
j = json.load(open(f))["jobs"][0]
if name == "rr4k-qd1":
    with open(cdf, "a") as o:
        for k, v in j["read"]["clat_ns"].get("percentile", {}).items():
            o.write("%s\t%s\t%s\t%.1f\n" % (r, s, float(k), v / 1000))
ios = j["read"]["total_ios"] + j["write"]["total_ios"]
iops = j["read"]["iops"] + j["write"]["iops"]
mbps = (j["read"]["bw_bytes"] + j["write"]["bw_bytes"]) / 1e6
d = j["read"] if j["read"]["total_ios"] else j["write"]
c = d["clat_ns"]; p = c.get("percentile", {})
us = lambda v: "%.0f" % (v / 1000)
cpu = lambda t: "%.0f" % (int(t) / int(hz) * 1e6 / ios) if ios else "-"
fr = lambda n: "%.1f" % (int(n) / ios) if ios else "-"
print("\t".join([r, s, name, "%.0f" % iops, "%.2f" % mbps, us(c["mean"]),
                 us(p.get("50.000000", 0)), us(p.get("99.000000", 0)),
                 us(p.get("99.900000", 0)), cpu(ja), cpu(jb), fr(na), fr(nb)]))
EOF
            tail -n 1 "$res"
            [[ " $profile " == *" $name "* ]] && [[ -z $psys || " $psys " == *" $s "* ]] && profile_job "$s" "$dev" "$name" "$rw" "$bs" "$qd" $extra
        done
        detach "$s" || echo "bench: $s detach failed"
    done
done
vm_stop
python3 - "$res" <<'EOF'
import csv, sys
from collections import defaultdict
rows = list(csv.DictReader(open(sys.argv[1]), delimiter="\t"))
acc = defaultdict(list)
for x in rows:
    acc[(x["system"], x["job"])].append(x)
def mean(sysn, job, k):
    v = [float(x[k]) for x in acc.get((sysn, job), []) if x[k] not in ("-", "")]
    return sum(v) / len(v) if v else None
systems = sorted({x["system"] for x in rows}, key=["smcr", "fwd", "ublk", "attach", "fuse", "tcp", "nvmeof", "rnbd"].index)
jobs = list(dict.fromkeys(x["job"] for x in rows))
def best_peer(job, k, low):
    v = [mean(p, job, k) for p in ("nvmeof", "rnbd") if mean(p, job, k) is not None]
    return (min(v) if low else max(v)) if v else None
print("\n## Results (mean of %d round(s); ratio: to the better of nvmeof and rnbd)\n" % max(int(x["round"]) for x in rows))
print("| job | system | IOPS | MB/s | mean us | p50 us | p99 us | p99.9 us | A us/IO | B us/IO | A frames/IO | B frames/IO | IOPS ratio |")
print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
for job in jobs:
    bp = best_peer(job, "iops", False)
    for s in systems:
        m = {k: mean(s, job, k) for k in ("iops", "MBps", "lat_mean_us", "p50_us", "p99_us", "p999_us", "cpuA_us_per_io", "cpuB_us_per_io", "framesA_per_io", "framesB_per_io")}
        if m["iops"] is None:
            continue
        f = lambda v, d=0: "-" if v is None else ("%.*f" % (d, v))
        ratio = "%.2fx" % (m["iops"] / bp) if bp else "-"
        print("| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |" % (job, s, f(m["iops"]), f(m["MBps"], 2),
              f(m["lat_mean_us"]), f(m["p50_us"]), f(m["p99_us"]), f(m["p999_us"]),
              f(m["cpuA_us_per_io"]), f(m["cpuB_us_per_io"]), f(m["framesA_per_io"], 1), f(m["framesB_per_io"], 1), ratio))
print("\n## Aims (smcrbd's best attach path, smcr, fwd, ublk, attach or fuse, against the better peer)\n")
def aim(label, job, k, low, limit):
    bp = best_peer(job, k, low)
    v = [mean(s, job, k) for s in ("smcr", "fwd", "ublk", "attach", "fuse") if mean(s, job, k) is not None]
    v = (min(v) if low else max(v)) if v else None
    if bp is None or v is None:
        print("- %s: not measured" % label); return
    r = v / bp
    ok = r <= limit if low else r >= limit
    print("- %s: %.2fx (aim %s %.1fx): %s" % (label, r, "<=" if low else ">=", limit, "met" if ok else "NOT met"))
aim("4k randread qd16 IOPS", "rr4k-qd16", "iops", False, 1.0)
aim("4k randwrite qd16 IOPS", "rw4k-qd16", "iops", False, 1.0)
aim("1M seqread bandwidth", "sr1m-qd4", "MBps", False, 1.0)
aim("1M seqwrite bandwidth", "sw1m-qd4", "MBps", False, 1.0)
aim("4k qd1 p50 latency", "rr4k-qd1", "p50_us", True, 1.2)
for job in jobs:
    aim("target CPU per I/O, " + job, job, "cpuB_us_per_io", True, 1.0)
EOF
bash "$here/bench-block-plots.sh" "$outdir" && echo "bench: plots $outdir/*.png"
echo "bench: results in $res, report $outdir/report.md"
