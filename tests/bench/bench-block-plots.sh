#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# Plots of a bench-block-vm.sh report dir with gnuplot (PNG, in DIR):
#   lat-cdf-4k-qd1.png  4k randread qd1 completion latency CDF per system
#                       (fio's percentiles, cdf.tsv; the mean over rounds)
#   iops.png            IOPS per system of the 4k jobs (mean over rounds)
#   bandwidth.png       MB/s per system of the 64k and 1M jobs
#   tests/bench/bench-block-plots.sh DIR
# Exit 77 without gnuplot.
set -euo pipefail
dir=$1
command -v gnuplot >/dev/null || { echo "plots: no gnuplot (Debian package gnuplot-nox)" >&2; exit 77; }
[ -s "$dir/results.tsv" ] || { echo "plots: no $dir/results.tsv" >&2; exit 1; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT INT TERM

python3 - "$dir" "$work" <<'EOF'
import csv, os, sys
from collections import defaultdict
d, w = sys.argv[1:]
order = ["smcr", "fwd", "attach", "fuse", "tcp", "nvmeof", "rnbd"]
rows = list(csv.DictReader(open(os.path.join(d, "results.tsv")), delimiter="\t"))
key = lambda s: order.index(s) if s in order else 99
systems = sorted({x["system"] for x in rows}, key=key)
acc = defaultdict(list)
for x in rows:
    acc[(x["system"], x["job"])].append(x)
def mean(s, j, k):
    v = [float(x[k]) for x in acc.get((s, j), []) if x[k] not in ("", "-")]
    return sum(v) / len(v) if v else 0
def table(name, jobs, k):
    jobs = [j for j in jobs if any((s, j) in acc for s in systems)]
    with open(os.path.join(w, name), "w") as o:
        o.write("job " + " ".join(systems) + "\n")
        for j in jobs:
            o.write(j + " " + " ".join("%.2f" % mean(s, j, k) for s in systems) + "\n")
table("iops.dat", ["rr4k-qd1", "rr4k-qd16", "rw4k-qd16"], "iops")
table("bw.dat", ["rw64k-qd8", "sr1m-qd4", "sw1m-qd4"], "MBps")
cdf = defaultdict(list)
p = os.path.join(d, "cdf.tsv")
if os.path.exists(p):
    for line in open(p):
        r, s, pct, us = line.split()
        cdf[(s, float(pct))].append(float(us))
with open(os.path.join(w, "systems"), "w") as o:
    for s in systems:
        pts = sorted((pct, sum(v) / len(v)) for (t, pct), v in cdf.items() if t == s)
        if not pts:
            continue
        o.write(s + "\n")
        with open(os.path.join(w, "cdf-%s.dat" % s), "w") as f:
            for pct, us in pts:
                f.write("%.3f %.4f\n" % (us / 1000, pct))
EOF

n=$(head -n 1 "$work/iops.dat" | wc -w)
cdfplot=
while read -r s; do
    cdfplot+="${cdfplot:+, }'$work/cdf-$s.dat' using 1:2 with linespoints title '$s'"
done <"$work/systems"
gnuplot <<EOF
set terminal pngcairo size 800,500 font ",10"
set grid
set key top left
$( [ -n "$cdfplot" ] && cat <<EOC
set output '$dir/lat-cdf-4k-qd1.png'
set title '4k randread qd1: completion latency CDF (fio percentiles)'
set xlabel 'latency (ms, log scale)'
set ylabel 'percentile'
set logscale x
set yrange [0:100]
plot $cdfplot
EOC
)
unset logscale x
set yrange [0:*]
set style data histograms
set style histogram clustered gap 1
set style fill solid 0.8 border -1
set key top right
set xlabel ''
set output '$dir/iops.png'
set title '4k jobs: IOPS (mean over rounds)'
set ylabel 'IOPS'
plot for [i=2:$n] '$work/iops.dat' using i:xtic(1) title columnheader(i)
set output '$dir/bandwidth.png'
set title '64k and 1M jobs: bandwidth (mean over rounds)'
set ylabel 'MB/s'
plot for [i=2:$n] '$work/bw.dat' using i:xtic(1) title columnheader(i)
EOF
[ -n "$cdfplot" ] || echo "plots: no 4k qd1 percentiles (cdf.tsv): no CDF" >&2
ls "$dir"/*.png
