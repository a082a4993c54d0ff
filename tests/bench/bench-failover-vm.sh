#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# Benchmark: failover side by side in one VM pair of the
# rxe lane (two links), the same 64 MiB tmpfs file in B behind every system:
#   smcr     smcrbd: nbdkit's smcr plugin (2 connections, timeout=60) and
#            the kernel's nbd-client on its unix socket
#   nvmeof   NVMe-oF/RDMA, native multipath over both links (rdma-peers.sh),
#            nvme connect $NVMEOF_CONNECT_OPTS (default here
#            "--reconnect-delay=2 --ctrl-loss-tmo=60": reconnect soon after a
#            link is back, fail I/O after a minute without a path)
#   rnbd     RNBD/RTRS, two paths, rtrs-client's defaults (printed; 6.1's
#            rnbd-client sets a fixed reconnect delay, RECONNECT_DELAY)
# Under fio randrw 70/30, 4k, qd4, verify=crc32c (verify_backlog: written
# blocks read back and checked while it runs), continue_on_error=all, a
# per-I/O completion log (write_lat_log, log_avg_msec=0, unix epoch ms;
# clocksource=clock_gettime rather than fio's TSC-based default, whose epoch
# times may drift from the guest clock that times the faults under TCG),
# these faults, all in the guests:
#   cable    one link's cable pulled for HOLD s, then back: qemu's
#            set_link off on both ends at once (the guests see carrier
#            loss, addresses and routes stay), timed by A's carrier loss
#            (ip monitor link in A, each event stamped with A's clock)
#   loss     netem loss 100% on one link's NIC in A and in B for HOLD s
#            (every frame dropped both ways, the port stays up): one job
#            in each guest, started together, timing its own hold; timed
#            from A's clock just before A's tc command
#   both     both cables pulled for 10 s, then back (timed as cable)
# fio runs 5 s before the fault and 12 s after the heal.  Fault times and
# fio's log share A's CLOCK_REALTIME; each run checks that by fio's report
# time less its last logged I/O ("clock check", ms; a few hundred ms at
# most when they agree).  The link alternates between runs.  Per run: the longest time with no
# completed I/O over the whole fio run (from the per-I/O log), fio's errors
# (I/O errors and verify failures), the kernel's lines in A's and B's dmesg
# that tell of failed I/O ("I/O error", "critical", "error -5"), and the
# time from the fault until throughput is back to 80% of the 5 s before the
# fault (1 s windows 100 ms apart: 0 when none within 5 s of the fault is
# below 80%, else the end of the first window at >= 80% after the first one
# below; ">N" if none before fio's last I/O, N ms after the fault).  Gaps
# after the heal (a path coming back) count in the longest gap, not in
# this time.
# Not in make check: "make bench-failover-vm" in the build tree.
#
#   tests/bench/bench-failover-vm.sh [-B BUILDDIR] [-r REPS] [-s SYSTEMS]
#                                    [-f FAULTS] [-H HOLD] [-o DIR]
#   -r REPS      runs per system and fault (default 5: the fewest a cell is read from)
#   -s SYSTEMS   default "smcr nvmeof rnbd"; -f FAULTS default "cable loss both"
#   -H HOLD      seconds a one-link fault lasts (default 12)
#   -o DIR       report dir (default BUILDDIR/bench-failover-report):
#                failover.tsv (one line per run; appended to, so that runs
#                of several invocations, e.g. one system each, sum up),
#                report.md, per-run fio output and dmesg excerpts in runs/
#   -R           only print the report of DIR's failover.tsv (no VMs)
# Holds the VM lock (SMCR_VM_LOCK, default /tmp/smcrbd-vm.lock) throughout:
# keep one invocation under ~15 minutes (one system, 5 reps x 3 faults
# took 10.5 minutes under TCG, boot included).
set -uo pipefail

here=$(cd "$(dirname "$0")" && pwd)
. "$here/bench-vm-lib.sh"
top=$(cd "$here/../.." && pwd)
builddir=${abs_top_builddir:-$top/build}
reps=5 systems="smcr nvmeof rnbd" faults="cable loss both" hold=12 outdir= report_only=
while [ $# -gt 0 ]; do
    case $1 in
        -B) builddir=$2; shift 2 ;;
        -r) reps=$2; shift 2 ;;
        -s) systems=$2; shift 2 ;;
        -f) faults=$2; shift 2 ;;
        -H) hold=$2; shift 2 ;;
        -o) outdir=$2; shift 2 ;;
        -R) report_only=1; shift ;;
        *) sed -n '3,54p' "$0"; exit 2 ;;
    esac
done
builddir=$(cd "$builddir" && pwd) || exit 1
: "${outdir:=$builddir/bench-failover-report}"
mkdir -p "$outdir/runs" || exit 1
outdir=$(cd "$outdir" && pwd)
res=$outdir/failover.tsv
[ -s "$res" ] ||
    printf 'system\tfault\trep\tlink\tmax_gap_ms\tgap_at_ms\tback80_ms\tbase_iops\tios\tfio_errors\tverify_errors\tkernel_errors\tfio_rc\tfault_ms\theal_ms\tskew_ms\n' >"$res"

report() {
python3 - "$res" <<'EOF'
import csv, sys
from collections import defaultdict
rows = list(csv.DictReader(open(sys.argv[1]), delimiter="\t"))
if not rows:
    sys.exit(0)
order = ["smcr", "nvmeof", "rnbd"]
systems = sorted({x["system"] for x in rows}, key=lambda s: order.index(s) if s in order else 9)
faults = [f for f in ["cable", "loss", "both"] if any(x["fault"] == f for x in rows)]
acc = defaultdict(list)
for x in rows:
    acc[(x["system"], x["fault"])].append(x)
def num(v):
    try:
        return float(v)
    except ValueError:
        return None
print("\n## Failover (per system and fault: runs; longest gap without a completed I/O, ms: max and median over runs; time back to 80%, ms: median and max; errors summed over runs; fio clock check: largest |report time - last logged I/O|, ms)\n")
print("| fault | system | runs | hung | max gap ms (worst) | max gap ms (median) | back to 80% ms (median) | back to 80% ms (worst) | fio I/O errors | verify errors | kernel error lines | base IOPS | clock check ms |")
print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
def med(v):
    v = sorted(v)
    return v[len(v) // 2] if v else None
worst = {}
errs = {}
for f in faults:
    for s in systems:
        r = acc.get((s, f), [])
        if not r:
            continue
        gaps = [num(x["max_gap_ms"]) if x["max_gap_ms"] != "hung" else float("inf") for x in r if num(x["max_gap_ms"]) is not None or x["max_gap_ms"] == "hung"]
        # ">N": not back before fio's last I/O, N ms after the fault.
        back = [(num(x["back80_ms"]), x["back80_ms"]) if num(x["back80_ms"]) is not None else
                (float("inf"), x["back80_ms"]) for x in r if x["back80_ms"] not in ("-", "never")]
        hung = sum(1 for x in r if x["max_gap_ms"] == "hung")
        skew = [abs(int(x["skew_ms"])) for x in r if x.get("skew_ms", "-").lstrip("-").isdigit()]
        e = [sum(int(x[k]) for x in r if x[k].isdigit()) for k in ("fio_errors", "verify_errors", "kernel_errors")]
        bad_rc = sum(1 for x in r if x["fio_rc"] != "0")
        worst[(s, f)] = max(gaps) if gaps else None
        errs[(s, f)] = sum(e) + bad_rc
        mb = med(back)
        bi = [num(x["base_iops"]) for x in r if num(x["base_iops"]) is not None]
        print("| %s | %s | %d | %d | %s | %s | %s | %s | %d | %d | %d | %s | %s%s |" % (
            f, s, len(r), hung, ("hung" if max(gaps) == float("inf") else "%.0f" % max(gaps)) if gaps else "-",
            ("hung" if med(gaps) == float("inf") else "%.0f" % med(gaps)) if gaps else "-",
            mb[1] if mb else "-", max(back)[1] if back else "-", e[0], e[1], e[2],
            "%.0f" % med(bi) if bi else "-",
            max(skew) if skew else "-", " (fio exit != 0 or hung in %d)" % bad_rc if bad_rc else ""))
print("\n## Aim: smcrbd's longest gap at most the better peer's on every fault kind, 0 errors in every run\n")
for f in faults:
    peers = [worst[(p, f)] for p in ("nvmeof", "rnbd") if worst.get((p, f)) is not None]
    me = worst.get(("smcr", f))
    if me is None or not peers:
        print("- %s: not measured for smcr and a peer" % f)
        continue
    bp = min(peers)
    ok = me <= bp and errs[("smcr", f)] == 0
    print("- %s: smcr worst gap %.0f ms, better peer %.0f ms (%.2fx), smcr errors %d: %s" % (
        f, me, bp, me / bp if bp else float("inf"), errs[("smcr", f)], "met" if ok else "NOT met"))
EOF
}
if [ -n "$report_only" ]; then
    report
    exit 0
fi

exec > >(tee -a "$outdir/report.md") 2>&1
export abs_top_builddir=$builddir abs_builddir=$builddir/tests
export abs_top_srcdir=$top srcdir=$top/tests
: "${SMCR_VM_WORKDIR:=$builddir/tests/bench/bench-failover-vm.d}"
: "${SMCR_VM_TIMEOUT:=3600}"
: "${SMCR_VM_CMD_TIMEOUT:=180}"
: "${NVMEOF_CONNECT_OPTS=--reconnect-delay=2 --ctrl-loss-tmo=60}"
export SMCR_VM_WORKDIR SMCR_VM_TIMEOUT SMCR_VM_CMD_TIMEOUT NVMEOF_CONNECT_OPTS

SMCRD=$builddir/server/smcrd
PLUGIN=$builddir/client/.libs/nbdkit-smcr-plugin.so
SMCRCTL=$builddir/client/smcrctl
bench_need "$SMCRD" "$PLUGIN" "$SMCRCTL"
bench_need_cmd fio nbdkit

bench_vm_lock

. "$top/tests/vm/lib.sh"
. "$top/tests/vm/rdma-peers.sh"
bench_peers_requires
echo "# bench-failover-vm.sh -r $reps -s \"$systems\" -f \"$faults\" -H $hold ($(date -u '+%F %H:%M UTC'))"
vm_start_pair
B1=$(vm_ip B 1)
IMG=/dev/shm/disk.img
vm_run B "truncate -s 64M $IMG && modprobe loop" || fail "backing file"
vm_run A "modprobe nbd" || fail "nbd"
vm_bg B "exec $SMCRD -f -P /tmp/smcrd.pid -p 10809 --smcr-port 10810 -e disk=$IMG >/tmp/smcrd.log 2>&1" >/dev/null
vm_run B "for i in \$(seq 300); do grep -q 'listening for NBD over SMC-R' /tmp/smcrd.log && exit 0; sleep 0.1; done; cat /tmp/smcrd.log; exit 1" ||
    fail "smcrd did not come up in B"
SA=$(vm_share A)

# attach SYSTEM: prints the device in A.
attach() {
    case $1 in
        smcr)
            vm_bg A "exec nbdkit -f -U /tmp/nbdkit.sock -P /tmp/nbdkit.pid $PLUGIN server=$B1 export=disk connections=2 timeout=60 2>/tmp/nbdkit.log" >/dev/null
            vm_run A "for i in \$(seq 600); do [ -S /tmp/nbdkit.sock ] && break; sleep 0.1; done
nbd-client -N '' -b 4096 -C 2 -u /tmp/nbdkit.sock /dev/nbd0 >/dev/null || { cat /tmp/nbdkit.log; exit 1; }
echo /dev/nbd0" ;;
        nvmeof) nvmet_export "$IMG" >/dev/null && nvmeof_attach ;;
        rnbd) rnbd_export "$IMG" >/dev/null && rnbd_attach ;;
    esac
}
detach() {
    case $1 in
        smcr) vm_run A "nbd-client -d /dev/nbd0 >/dev/null; kill \$(cat /tmp/nbdkit.pid); for i in \$(seq 100); do [ -e /proc/\$(cat /tmp/nbdkit.pid) ] || exit 0; sleep 0.1; done" ;;
        nvmeof) nvmeof_detach; nvmet_unexport ;;
        rnbd) rnbd_detach; rnbd_unexport ;;
    esac
}
# Both paths working again (after a fault healed): up to READY_SECS (default
# 90: rnbd-client reconnects a path every 30 s), timed in the guest.
: "${READY_SECS:=90}"
paths_ready() {
    local n
    case $1 in
        smcr) n="\$($SMCRCTL status nbdkit | grep -cw active)" ;;
        nvmeof) n="\$(n=0; for c in /sys/class/nvme-subsystem/*/nvme*; do [[ \${c##*/} =~ ^nvme[0-9]+\$ ]] && [ \"\$(cat \$c/state)\" = live ] && n=\$((n + 1)); done; echo \$n)" ;;
        rnbd) n="\$(n=0; for p in /sys/class/rtrs-client/$RNBD_SESS/paths/*; do [ \"\$(cat \$p/state)\" = connected ] && n=\$((n + 1)); done; echo \$n)" ;;
    esac
    vm_run -t $((READY_SECS + 60)) A "end=\$((SECONDS + $READY_SECS)); while [ \$SECONDS -lt \$end ]; do [ $n -ge 2 ] && exit 0; sleep 0.2; done; exit 1"
}
settings() {
    case $1 in
        smcr) echo "smcr: nbdkit smcr plugin connections=2 timeout=60; nbd-client -C 2 -b 4096 (no -t)" ;;
        nvmeof) vm_run A "for c in /sys/class/nvme-subsystem/*/nvme*; do [[ \${c##*/} =~ ^nvme[0-9]+\$ ]] || continue; echo \"nvmeof: \${c##*/} ctrl_loss_tmo \$(cat \$c/ctrl_loss_tmo) reconnect_delay \$(cat \$c/reconnect_delay) fast_io_fail_tmo \$(cat \$c/fast_io_fail_tmo) kato \$(cat \$c/kato 2>/dev/null); iopolicy \$(cat \${c%/*}/iopolicy)\"; done" ;;
        rnbd) vm_run A "s=/sys/class/rtrs-client/$RNBD_SESS; echo \"rnbd: mpath_policy \$(cat \$s/mpath_policy) max_reconnect_attempts \$(cat \$s/max_reconnect_attempts) (reconnect delay: rnbd-client's fixed RECONNECT_DELAY)\"" ;;
    esac
}

# cables on|off LINK...: set_link on both ends of these links from one
# process, the QMP sessions opened first, so that all ends change within
# milliseconds (vm_cable starts python and a QMP session per end: on this
# lane that took seconds per end, and a 10 s fault lasted 19-29 s).
cables() {
    local up=$1; shift
    python3 - "$up" "${_vm_sock[A]}" "${_vm_sock[B]}" "$@" <<'EOF'
import json, socket, sys
up, socks, links = sys.argv[1] == "on", sys.argv[2:4], sys.argv[4:]
conns = []
for p in socks:
    s = socket.socket(socket.AF_UNIX)
    s.settimeout(20)
    s.connect(p)
    f = s.makefile("rw")
    conns.append(f)
def reply(f):
    while True:
        m = json.loads(f.readline())
        if "event" not in m:
            return m
for f in conns:
    reply(f)
    f.write('{"execute": "qmp_capabilities"}\n'); f.flush()
    reply(f)
for l in links:
    for f in conns:
        f.write(json.dumps({"execute": "set_link", "arguments": {"name": "link" + l, "up": up}}) + "\n")
        f.flush()
        r = reply(f)
        if "error" in r:
            sys.exit("set_link link%s: %s" % (l, r["error"]))
EOF
}

pre=5 post=12
kerr_re='I/O error|critical|error -5|blk_update_request|Buffer I/O'
read -r -a sys <<<"$systems"
read -r -a flt <<<"$faults"
for s in "${sys[@]}"; do
    hung=
    dev=$(attach "$s") || { echo "bench: $s did not attach"; detach "$s"; continue; }
    vm_say "$s on $dev"
    settings "$s"
    for (( r=1; r<=reps; r++ )); do
        for f in "${flt[@]}"; do
            l=$(( (r - 1) % 2 + 1 )) e=eth$(( (r - 1) % 2 ))
            h=$hold
            [ "$f" = both ] && { h=10 l=12; }
            if ! paths_ready "$s"; then
                echo "bench: $s: not both paths back within ${READY_SECS} s before $f rep $r: its remaining runs skipped"
                printf '%s\t%s\t%s\tpaths not back\n' "$s" "$f" "$r" >>"$outdir/skipped.tsv"
                break 2
            fi
            tag=$s.$f.$r
            rt=$((pre + h + post))
            rm -f "$SA/$tag".*
            dB=$(vm_run B "dmesg | wc -l")
            # The job in A: its dmesg line count, a link monitor stamping each
            # carrier change with A's clock ($EPOCHREALTIME, the clock of
            # fio's log_unix_epoch), a mark once both run, then fio; after
            # fio its per-I/O log and A's new kernel lines go to the share.
            job=$(vm_bg A "rm -f /tmp/fo_*.log; dA=\$(dmesg | wc -l); echo \$dA >$SA/$tag.dA
rm -f /tmp/fo_mon; mkfifo /tmp/fo_mon; ip monitor link >/tmp/fo_mon & m=\$!
while read -r x; do echo \"\$EPOCHREALTIME \$x\"; done </tmp/fo_mon >$SA/$tag.mon & w=\$!
sleep 0.3; echo \$EPOCHREALTIME >$SA/$tag.started
fio --name=fo --filename=$dev --direct=1 --ioengine=libaio --rw=randrw --rwmixread=70 \
--bs=4k --iodepth=4 --verify=crc32c --verify_backlog=64 --verify_fatal=0 --continue_on_error=all \
--runtime=$rt --time_based=1 --clocksource=clock_gettime --write_lat_log=/tmp/fo --log_avg_msec=0 --log_unix_epoch=1 \
--output-format=json --output=$SA/$tag.json; rc=\$?
kill \$m \$w; cp /tmp/fo_clat.1.log $SA/$tag.clat.log; dmesg | tail -n +\$((dA + 1)) >$SA/$tag.dmesgA; exit \$rc")
            for (( i=0; i<600; i++ )); do [ -e "$SA/$tag.started" ] && break; sleep 0.1; done
            [ -e "$SA/$tag.started" ] || echo "bench: fio not started in A after 60 s"
            sleep "$pre"
            # Fault and heal times: cable and both from A's link monitor
            # (the first carrier change after the command), loss from A's
            # clock just before its tc commands.
            tf_= th_=
            case $f in
                cable) cables off "$l"; sleep "$h"; cables on "$l" ;;
                loss) # One job per guest, started together, each timing
                      # its own hold (host-side vm_runs between the steps
                      # made it 12 s plus seconds of agent round trips).
                      jA=$(vm_bg A "echo \$EPOCHREALTIME; tc qdisc add dev $e root netem loss 100%; sleep $h; echo \$EPOCHREALTIME; tc qdisc del dev $e root")
                      jB=$(vm_bg B "tc qdisc add dev $e root netem loss 100%; sleep $h; tc qdisc del dev $e root")
                      x=$(vm_wait -t $((h + 120)) A "$jA"); vm_wait -t $((h + 120)) B "$jB" >/dev/null
                      tf_=${x%%$'\n'*} th_=${x#*$'\n'} ;;
                both) cables off 1 2; sleep 10; cables on 1 2 ;;
            esac
            # fio ends at rt s unless an I/O never completes: then (HUNG_SECS
            # after its end, default 120) the run counts as hung, with the
            # device's in-flight counts and the kernel log, and the system's
            # remaining runs are skipped (its device cannot be detached).
            end=$((SECONDS + rt + ${HUNG_SECS:-120}))
            while [ ! -e "$SA/out/$job.rc" ] && [ $SECONDS -lt $end ]; do sleep 1; done
            if [ ! -e "$SA/out/$job.rc" ]; then
                vm_run A "echo \"in flight (read write): \$(cat /sys/block/${dev#/dev/}/inflight)\"; ps -eo pid,stat,wchan:24,etime,comm | grep -w fio; dmesg | tail -n +\$((\$(cat $SA/$tag.dA) + 1))" \
                    >"$outdir/runs/$tag.hung.txt" 2>&1
                printf '%s\t%s\t%s\t%s\thung\t-\tnever\t-\t-\t-\t-\t%s\ttimeout\t-\t-\t-\n' "$s" "$f" "$r" "$l" \
                    "$(grep -cE "$kerr_re" "$outdir/runs/$tag.hung.txt")" >>"$res"
                vm_say "$(tail -n 1 "$res"): fio not done ${HUNG_SECS:-120} s after its runtime (runs/$tag.hung.txt)"
                printf '%s\t%s\t%s\tI/O hung\n' "$s" "$f" "$r" >>"$outdir/skipped.tsv"
                hung=1
                break 2
            fi
            out=$(vm_wait A "$job" 2>&1); frc=$?
            printf '%s\n' "$out" >"$outdir/runs/$tag.fio.out"
            for x in json clat.log mon started; do cp "$SA/$tag.$x" "$outdir/runs/" 2>/dev/null; done
            sed 's/^/A: /' "$SA/$tag.dmesgA" >"$outdir/runs/$tag.dmesg"
            vm_run B "dmesg | tail -n +$((dB + 1))" | sed 's/^/B: /' >>"$outdir/runs/$tag.dmesg"
            ke=$(grep -cE "$kerr_re" "$outdir/runs/$tag.dmesg")
            python3 - "$outdir/runs/$tag.clat.log" "$outdir/runs/$tag.json" "$outdir/runs/$tag.fio.out" \
                "$outdir/runs/$tag.mon" "$f" "$l" "${tf_%%$'\n'*}" "${th_%%$'\n'*}" $pre "$s" "$r" "$ke" "$frc" \
                "$outdir/runs/$tag.started" "$rt" >>"$res" <<'EOF'
import json, re, sys
log, js, fout, mon, f, l, tf, th, pre, s, r, ke, frc, started, rt = sys.argv[1:]
pre = float(pre) * 1000
# cable/both: the first carrier loss of a faulted link in A's monitor, and
# the first carrier back after it.
if f in ("cable", "both"):
    eths = ["eth0", "eth1"] if f == "both" else ["eth%d" % (int(l) - 1)]
    tf = th = ""
    try:
        for x in open(mon):
            m = re.match(r"([0-9.]+) \d+: (eth\d+): <([^>]*)>", x)
            if not m or m.group(2) not in eths:
                continue
            down = "NO-CARRIER" in m.group(3).split(",")
            if not tf and down:
                tf = m.group(1)
            elif tf and not th and not down:
                th = m.group(1)
    except OSError:
        pass
t = sorted(int(x.split(",")[0]) for x in open(log) if x.strip())
gap, at = 0, 0
for a, b in zip(t, t[1:]):
    if b - a > gap:
        gap, at = b - a, a
# The log has successful completions only: from the last one to the end of
# fio's runtime (started just before fio, plus its runtime) is a gap too
# (I/O that failed, or never completed, until the end).
end = None
try:
    end = float(open(started).read()) * 1000 + float(rt) * 1000
    if t and end - t[-1] > gap:
        gap, at = int(end - t[-1]), t[-1]
except (OSError, ValueError):
    pass
fe = ve = 0
skew = "-"
try:
    jj = json.load(open(js))
    j = jj["jobs"][0]
    fe = j.get("total_err", 0)
    # fio's clock check: its report time (CLOCK_REALTIME) less its last
    # logged completion (its epoch plus its own clock's elapsed time).
    if t:
        skew = "%d" % (jj["timestamp_ms"] - t[-1])
except Exception:
    fe = -1
ve = len(re.findall(r"verify: bad|bad magic|crc32c: verify failed|verify failed", open(fout).read()))
if not tf or not t:
    print("\t".join(map(str, [s, f, r, l, gap, "-", "-", "-", len(t), fe, ve, ke, frc, "-", "-", skew])))
    sys.exit(0)
tf = float(tf) * 1000
th = float(th) * 1000 if th else None
t0 = max(tf - pre, t[0])
base = sum(1 for x in t if t0 <= x < tf) / ((tf - t0) / 1000) if tf > t0 else 0
# 1 s windows, 100 ms apart, from the fault: the first below 80% of the
# base rate within 5 s of the fault starts the dip (none: 0), the first at
# >= 80% after it ends it; not back before fio's last I/O: ">N".
import bisect
rate = lambda w: bisect.bisect_left(t, w + 1000) - bisect.bisect_left(t, w)
back, w, dip = ">%.0f" % (max(t[-1], end or 0) - tf), tf, None
while w + 1000 <= t[-1]:
    if dip is None:
        if w > tf + 5000:
            back = "0"
            break
        if rate(w) < 0.8 * base:
            dip = w
    elif rate(w) >= 0.8 * base:
        back = "%.0f" % (w + 1000 - tf)
        break
    w += 100
print("\t".join(map(str, [s, f, r, l, gap, "%.0f" % (at - tf), back, "%.0f" % base, len(t), fe, ve, ke, frc,
                          "%.0f" % tf, "%.0f" % th if th else "-", skew])))
EOF
            vm_say "$(tail -n 1 "$res")"
        done
    done
    [ -n "$hung" ] || detach "$s" || echo "bench: $s detach failed"
done
vm_stop
report
echo "bench: results in $res, report $outdir/report.md"
