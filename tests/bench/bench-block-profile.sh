#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# Where the guests' CPU goes per I/O, from bench-block-vm.sh's profiles
# (-p): for each DIR/profile/SYSTEM.JOB, both guests' samples of the job's
# last SECS seconds up to A's last fio sample (as the summaries), split by
# who ran (fio; the user-space data path: nbdkit, smcr-attach, smcrd and
# libsmcr's threads; kernel threads: softirqs, rxe, nvme, nbd workers; the
# VM harness's shell; idle) and, across all of them, the samples on
# vp_notify (a virtio doorbell: QEMU's cost of every frame sent, charged to
# the guest instruction that rang it) and in rxe.  ms per I/O = share of
# the window x SECS / I/Os under perf.  Needs perf on the host.
#   tests/bench/bench-block-profile.sh DIR [SECS]   (SECS: bench's -t, 10)
set -uo pipefail
dir=${1:?usage: bench-block-profile.sh DIR [SECS]} secs=${2:-10}
command -v perf >/dev/null || { echo "bench-block-profile: no perf" >&2; exit 1; }
echo "| system | job | guest | busy % | ms/IO busy | fio | user-space path | kernel threads | irq in idle | harness | doorbells (vp_notify) | rxe | ctx switches/IO |"
echo "|---|---|---|---|---|---|---|---|---|---|---|---|---|"
for ctx in "$dir"/profile/*.ctx; do
    p=${ctx%.ctx} sj=${p##*/}
    ios=$(awk '{ print $1 }' "$ctx")
    t1=$(perf script -i "$p.A.perf.data" --kallsyms "$p.A.kallsyms" -F comm,time 2>/dev/null |
             awk '$1 == "fio" { t = $NF } END { sub(":", "", t); print t }')
    [ -n "$t1" ] || { echo "bench-block-profile: $sj: no fio sample in A" >&2; continue; }
    for v in A B; do
        perf script -G -i "$p.$v.perf.data" --kallsyms "$p.$v.kallsyms" -F comm,time,ip,sym,dso \
            --time "$(awk -v t="$t1" -v s="$secs" 'BEGIN { printf "%.6f,%.6f", t - s, t }')" 2>/dev/null |
        python3 -c '
import re, sys
sj, v, ios, secs, ctx = sys.argv[1:6]
ios = int(ios); n = 0; c = dict.fromkeys(("idle", "fio", "user", "kthr", "irqidle", "harness", "other", "bell", "rxe"), 0)
harness = re.compile(r"^(bash|sh|sleep|busybox|cat|awk|timeout|mv|rm|perf)$")
user = re.compile(r"^(nbdkit|smcr|nbd-client)")
for line in sys.stdin:
    m = re.match(r"^\s*(.*?)\s+\d+\.\d+:\s+[0-9a-f]+\s+(\S+)\s+\((.*)\)\s*$", line)
    if not m:
        continue
    comm, sym, dso = m.groups(); n += 1
    if comm == "swapper":
        c["idle" if sym == "native_safe_halt" else "irqidle"] += 1
    elif comm == "fio": c["fio"] += 1
    elif user.match(comm): c["user"] += 1
    elif harness.match(comm): c["harness"] += 1
    elif re.match(r"^(ksoftirqd|kworker|rcu|migration|irq/)", comm): c["kthr"] += 1
    else: c["other"] += 1
    if sym == "vp_notify": c["bell"] += 1
    if "rdma_rxe" in dso: c["rxe"] += 1
if not n or not ios:
    sys.exit(0)
ms = lambda k: "%.2f" % (c[k] / n * float(secs) * 1000 / ios)
sysn, job = sj.split(".", 1)
cs = re.search(r"A ([0-9.]+), B ([0-9.]+)", ctx)
print("| %s | %s | %s | %.0f | %.2f | %s | %s | %s | %s | %s | %s | %s | %s |" % (
    sysn, job, v, 100.0 * (n - c["idle"]) / n, (n - c["idle"]) / n * float(secs) * 1000 / ios,
    ms("fio"), ms("user"), ms("kthr"), ms("irqidle"), ms("harness"), ms("bell"), ms("rxe"),
    cs.group(1 if v == "A" else 2) if cs else "-"))
' "$sj" "$v" "$ios" "$secs" "$(cat "$ctx")"
    done
done
