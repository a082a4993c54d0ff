#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""The soak's report and counter check (tests/vm/soak.sh).

soak-report.py --dir W --seed S --offset-a US --offset-b US --qp-timeout N

Reads what soak.sh left in W: faults.tsv (per fault: number, kind, side,
link, host times in us of the fault, its undoing and the group whole
again, the guests' clock offsets), snap.N.A / snap.N.B (smcrctl --json
status after fault N; 0 before the first), nbdkit.log (A's nbdkit stderr:
the plugin stamps libsmcr's lines, smcr[EPOCH.ms], A's clock), smcrd.log (B's, local time), fio_bw.log (fio's read and write
bandwidth per 250 ms, A's clock) and fio.json.  Writes W/report.md,
W/timeline.png (gnuplot) and their data files.  Exits 1 when the counters
do not add up: every link fault failed exactly one link on each end,
delays and reloads none, pauses no reconnect, every lost group or restart was recovered by all
four NBD connections, and no NBD request failed."""
import argparse
import datetime
import json
import os
import re
import statistics
import subprocess
import sys
import time

LINK_KINDS = ("qp-error", "drop", "cable", "ifdown", "rdma-delete")
QUIET_KINDS = ("delay", "hup")
GROUP_KINDS = ("both-down", "kill", "term")
PAUSE_KINDS = ("pause", "sigstop")  # no reset; a link may fail and come back
AIMS = {  # kind class -> (detect ms, moved ms), None: no aim
    "port": (1000, 1000),    # port down: cable, ifdown, rdma-delete
    "silent": (3000, None),  # silent loss: injected drop
}
COLOURS = {"qp-error": "#1f77b4", "drop": "#d62728", "delay": "#bcbd22", "cable": "#2ca02c",
           "ifdown": "#17becf", "rdma-delete": "#9467bd", "netem": "#ff7f0e",
           "both-down": "#8c564b", "kill": "#000000", "term": "#7f7f7f", "hup": "#e377c2",
           "pause": "#aec7e8", "sigstop": "#98df8a"}

# A link failure as counted (lgr.c: "link N failed (ERR), moving ..."), not
# the info line of a failed link dropped later ("link N failed T ms ago
# and was not deleted: dropping it"), which counts nothing.
FAIL_RE = r"link group: link \d+ failed \(-?\d+\)"
A_EVENT = re.compile(FAIL_RE + r"|link group ended|nbd: connection \d+ .* lost")
B_EVENT = re.compile(FAIL_RE + r"|link group ended")
A_BACK = re.compile(r"nbd: connection \d+ .* is back")
INJECT = re.compile(r"fault injection: (fail|drop|delay) link")
INJECT_KINDS = ("qp-error", "drop", "delay")
STAMP = re.compile(r"smcr\[(\d+\.\d+)\]")


def load_snap(path):
    """(pid, link_failures, nbd stats dict or None) of one smcrctl --json stats."""
    try:
        doc = json.loads(open(path).read())[0]
    except (OSError, ValueError, IndexError):
        return None
    st = doc.get("stats") or {}
    nbd = (doc.get("sections") or (doc.get("status") or {}).get("sections") or {}).get("nbd")
    lgs = [g for g in (doc.get("smcr") or {}).get("link_groups") or [] if not g.get("terminated")]
    return doc.get("pid"), st.get("link_failures", 0), (nbd or {}).get("stats"), len(lgs)


FAILED = re.compile(FAIL_RE)


def snap_time(d, n, side):
    """The guest time (s) of snapshot N's look in SIDE, None if not kept."""
    try:
        return float(open(os.path.join(d, "snap.%d.%s.t" % (n, side))).read())
    except (OSError, ValueError):
        return None


def a_events(path, pattern=A_EVENT):
    """A's lines that match, at the time the plugin stamped them (A's clock)."""
    out = []
    for line in open(path, errors="replace"):
        m = STAMP.search(line)
        if m and pattern.search(line):
            out.append((float(m.group(1)), "A", line[m.end():].strip()))
    return out


def b_events(path, pattern=B_EVENT):
    out = []
    for line in open(path, errors="replace"):
        if not pattern.search(line):
            continue
        try:
            t = datetime.datetime.strptime(line[:23], "%Y-%m-%d %H:%M:%S.%f")
        except ValueError:
            continue
        out.append((time.mktime(t.timetuple()) + t.microsecond / 1e6, "B",
                    line[24:].strip()))
    return out


def bw_series(path, host):
    """fio's log (an entry when a window of >= 250 ms with I/O ends: the
    average since the direction's last entry) spread over 250 ms bins:
    [(host time s of the bin's start, read MiB/s, write MiB/s)], and the
    entries' times (host s) for the stalls."""
    bins, last, times = {}, {}, []
    for line in open(path):
        f = [x.strip() for x in line.split(",")]
        if len(f) < 3:
            continue
        t, bw, dr = host(int(f[0]) / 1000.0), int(f[1]) / 1024.0, int(f[2])
        times.append(t)
        p = last.get(dr, t - 0.25)
        last[dr] = t
        b = int(p * 4)
        while b / 4.0 < t:
            lo, hi = max(p, b / 4.0), min(t, (b + 1) / 4.0)
            bins.setdefault(b, [0.0, 0.0])[dr] += bw * (hi - lo) * 4
            b += 1
    out = [(b / 4.0, v[0], v[1]) for b, v in sorted(bins.items())]
    return out, sorted(times)


def clat_series(path, host):
    """fio's per-I/O completion log (log_avg_msec=0: "ms, clat ns, dir,
    bytes, offset" per I/O, ms since the epoch on A's clock) as bw_series
    gives it: 250 ms bins of MiB/s per direction, and every completion's
    time (host s), sorted."""
    bins, times = {}, []
    for line in open(path):
        f = [x.strip() for x in line.split(",")]
        if len(f) < 4:
            continue
        t, dr, n = host(int(f[0]) / 1000.0), int(f[2]), int(f[3])
        if dr not in (0, 1):
            continue
        times.append(t)
        bins.setdefault(int(t * 4), [0.0, 0.0])[dr] += n / 1048576.0 * 4
    out = [(b / 4.0, v[0], v[1]) for b, v in sorted(bins.items())]
    return out, sorted(times)


# A gap's cause: the first of these found in a log line from 1 s before
# the gap to its end, else the fault it lies in if that kind stops I/O
# by itself.  Order: the strongest explanation first.
CAUSES = [
    (re.compile(r"link group ended"), "link group lost (NBD reconnect)"),
    (re.compile(r"nbd: connection \d+ .* lost"), "NBD connection lost (reconnect)"),
    (re.compile(r"no TEST LINK reply"), "TEST LINK timeout (silent loss detected)"),
    (re.compile(r"retry counter exceeded|transport retry"), "RC retries ran out (silent loss)"),
    (re.compile(r"port error|port .* down|device .* (gone|removed)"), "port or device down"),
    (re.compile(r"link group: link \d+ failed"), "link failover"),
    (re.compile(r"local stall|progress thread busy"), "local stall (the daemon did not run)"),
    (re.compile(r"ADD LINK|DELETE LINK|CONFIRM"), "LLC exchange (link add/delete)"),
]
SELF_KINDS = {"pause": "guest paused (the fault itself)",
              "sigstop": "daemon stopped (the fault itself)",
              "kill": "smcrd killed and restarted", "term": "smcrd stopped and restarted",
              "both-down": "both links down (the fault itself)"}


def log_lines(d, host):
    """Every stamped line of both daemons' logs: [(host s, side, text)]."""
    out = []
    for t, _, m in a_events(os.path.join(d, "nbdkit.log"), re.compile(".")):
        out.append((host("A", t), "A", m))
    for t, _, m in b_events(os.path.join(d, "smcrd.log"), re.compile(".")):
        out.append((host("B", t), "B", m))
    return sorted(out)


def med(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


def worst(xs):
    xs = [x for x in xs if x is not None]
    return max(xs) if xs else None


def ms(x):
    return "-" if x is None else "%.0f" % x


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dir", required=True)
    ap.add_argument("--seed", required=True)
    ap.add_argument("--offset-a", type=int, required=True)
    ap.add_argument("--offset-b", type=int, required=True)
    ap.add_argument("--qp-timeout", type=int, default=19)
    ap.add_argument("--strict-gaps", action="store_true",
                    help="an unexplained I/O gap over 2 s is an error")
    a = ap.parse_args()
    d = a.dir
    faults = []
    for line in open(os.path.join(d, "faults.tsv")):
        n, kind, side, link, t0, t1, t2, oa, ob = line.split("\t")
        faults.append(dict(n=int(n), kind=kind, side=side, link=int(link),
                           t0=int(t0) / 1e6, t1=int(t1) / 1e6, t2=int(t2) / 1e6,
                           off_a=int(oa), off_b=int(ob)))
    # guest clock (s) -> host clock.  A fault's offsets are sampled as the
    # group is whole again (its end); they drift slowly (one round trip
    # each, noisy under load: the median of 9 neighbours) but jump when a
    # guest is paused, as its clock stops with it: a pause of that side
    # starts a stretch of its own, smoothed apart, from the guest time the
    # pause began (the pause fault's own sample is from after it).
    def stretches(side, key):
        out = []
        for f in faults:
            if not out or (f["kind"] == "pause" and f["side"] == side):
                g0 = f["t0"] + out[-1][1][-1][1] if out else float("-inf")
                out.append((g0, []))
            out[-1][1].append((f["t0"], f[key] / 1e6))
        for _, seg in out:
            v = [off for _, off in seg]
            seg[:] = [(t, statistics.median(v[max(0, i - 4):i + 5]))
                      for i, (t, _) in enumerate(seg)]
        return out
    offs = {"A": stretches("A", "off_a"), "B": stretches("B", "off_b")}

    def host(side, g):
        if not offs[side]:
            return g
        seg = [s for g0, s in offs[side] if g >= g0][-1]
        o = seg[0][1]
        for t, off in seg:
            if g - off < t - 0.5:
                break
            o = off
        return g - o
    events = sorted([(host("A", t), w, m) for t, w, m in a_events(os.path.join(d, "nbdkit.log"))] +
                    [(host("B", t), w, m) for t, w, m in b_events(os.path.join(d, "smcrd.log"))])
    backs = sorted(host("A", t) for t, _, _ in a_events(os.path.join(d, "nbdkit.log"), A_BACK))
    # an injected fault (smcrctl fault) starts when the daemon logs it, not
    # when the command was started (an exec costs ~2 s in A under load)
    injected = sorted([(host("A", t), "A") for t, _, _ in
                       a_events(os.path.join(d, "nbdkit.log"), INJECT)] +
                      [(host("B", t), "B") for t, _, _ in
                       b_events(os.path.join(d, "smcrd.log"), INJECT)])
    for f in faults:
        if f["kind"] in INJECT_KINDS:
            inj = [t for t, who in injected if who == f["side"] and f["t0"] - 1 <= t <= f["t1"] + 1]
            if inj:
                f["t0"] = inj[0]
    clat = os.path.join(d, "fio_clat.log")
    if os.path.exists(clat):
        bw, fio_times = clat_series(clat, lambda g: host("A", g))
    else:
        bw, fio_times = bw_series(os.path.join(d, "fio_bw.log"), lambda g: host("A", g))
    per_io = os.path.exists(clat)
    lines = log_lines(d, host)
    # every gap between completions over 2 s, with its fault and cause
    gaps = []
    for p, t in zip(fio_times, fio_times[1:]):
        if t - p <= 2.0:
            continue
        fl = [f for f in faults if f["t0"] - 1 <= t and p <= f["t2"] + 1]
        # the last fault begun by 1 s after the gap's start (its stamp may
        # follow its effect: a guest stopped, a link cut); the one before
        # reaches the gap only by its own 1 s of slack
        near = [f for f in fl if f["t0"] - 1 <= p]
        fault = (near or fl)[-1] if fl else None
        cause = None
        # a stop the fault makes (pause, SIGSTOP) is its gap's cause; the
        # link failures it brings are its consequences
        stop = [f for f in fl if f["kind"] in PAUSE_KINDS and f["t0"] - 1 <= p <= f["t1"]]
        if stop:
            cause = "%s (I/O back %+.0f ms after it was undone, host's view)" % (
                SELF_KINDS[stop[0]["kind"]], (t - stop[0]["t1"]) * 1000)
        for rx, what in CAUSES if cause is None else []:
            hit = [(lt, side, m) for lt, side, m in lines if p - 1 <= lt <= t and rx.search(m)]
            if hit:
                cause = "%s (%s: %s)" % (what, hit[0][1], hit[0][2][:70])
                break
        if cause is None and fault and fault["kind"] in SELF_KINDS:
            cause = SELF_KINDS[fault["kind"]]
        gaps.append(dict(start=p, len=t - p, fault=fault, cause=cause))
    a_fail = [t for t, who, m in events if who == "A" and "link group: link" in m]
    b_fail = [t for t, who, m in events if who == "B" and "link group: link" in m]
    errors, notes = [], []
    snaps = {}
    for f in [{"n": 0}] + faults:
        snaps[f["n"]] = (load_snap(os.path.join(d, "snap.%d.A" % f["n"])),
                         load_snap(os.path.join(d, "snap.%d.B" % f["n"])))
    sums = {"link_faults": 0, "A": 0, "B": 0, "want_A": 0, "want_B": 0}
    prev = 0
    for i, f in enumerate(faults):
        # the failures either end logged from this fault to the next
        lo = f["t0"] - 0.3
        hi = faults[i + 1]["t0"] - 0.3 if i + 1 < len(faults) else 1e12
        f["log_a"] = len([t for t in a_fail if lo <= t < hi])
        f["log_b"] = len([t for t in b_fail if lo <= t < hi])
        (pa, fa, na, _), (pb, fb, _, _) = snaps[f["n"]]
        (qa, ga, ma, lga), (qb, gb, _, lgb) = snaps[prev]
        f["groups"] = "%d/%d" % (lga, lgb)
        f["fail_a"] = fa - ga
        f["fail_b"] = fb - gb if pb == qb else None   # smcrd restarted: a new count
        f["reconnects"] = na["reconnects"] - ma["reconnects"]
        f["nbd_errors"] = na["errors"]
        prev = f["n"]
        k, what = f["kind"], "fault %d (%s, %s, link %d)" % (f["n"], f["kind"], f["side"], f["link"])
        if na["errors"]:
            errors.append("%s: %d NBD request(s) failed" % (what, na["errors"]))
        if k in LINK_KINDS:
            # one link of every live link group fails, on both ends
            sums["link_faults"] += 1
            sums["want_A"] += lga
            sums["want_B"] += lgb
            sums["A"] += f["log_a"]
            sums["B"] += f["log_b"]
            if f["log_a"] != lga or f["log_b"] != lgb:
                notes.append("%s: %d link failure(s) in A, %d in B; %d and %d expected (one per "
                              "link group)" % (what, f["log_a"], f["log_b"], lga, lgb))
        elif k in QUIET_KINDS:
            if f["log_a"] or f["log_b"]:
                notes.append("%s: %d/%d link failure(s) logged in its window; none expected"
                             % (what, f["log_a"], f["log_b"]))
            if f["reconnects"]:
                errors.append("%s: %d reconnect(s); none expected" % (what, f["reconnects"]))
        elif k in PAUSE_KINDS:
            if f["reconnects"]:
                errors.append("%s: %d NBD reconnect(s) (connections reset); none expected"
                              % (what, f["reconnects"]))
            if f["log_a"] or f["log_b"]:
                notes.append("%s: %d/%d link failure(s) logged in its window"
                             % (what, f["log_a"], f["log_b"]))
        elif k in GROUP_KINDS:
            if f["reconnects"] < 4:
                errors.append("%s: %d NBD reconnect(s); all 4 connections expected to come back"
                              % (what, f["reconnects"]))
        # detection: the first failure either end logged
        ev = [e for e in events if f["t0"] - 0.3 <= e[0] <= f["t2"] + 0.5]
        f["detect"] = (ev[0][0] - f["t0"]) * 1000 if ev and k not in QUIET_KINDS else None
        f["by"] = ev[0][1] if f["detect"] is not None else "-"
        # moved, by the daemons' own lines: a link fault's connections are
        # on the other link once both ends logged the failure (each moves
        # its own at that line); a lost group's once all four NBD
        # connections logged they are back
        f["switched"] = None
        if k in GROUP_KINDS:
            back = [t for t in backs if f["t0"] - 0.3 <= t <= f["t2"] + 0.5]
            if len(back) >= 4:
                f["switched"] = (back[3] - f["t0"]) * 1000
        elif k not in QUIET_KINDS:
            firsts = []
            for w in ("A", "B"):
                ts = [t for t, who, m in ev if who == w and "link group: link" in m]
                firsts.append(min(ts) if ts else None)
            if None not in firsts:
                f["switched"] = (max(firsts) - f["t0"]) * 1000
        # throughput around the fault
        before = [r + w for t, r, w in bw if f["t0"] - 2 <= t < f["t0"]]
        base = sum(before) / len(before) if before else 0
        win = [(t, r + w) for t, r, w in bw if f["t0"] <= t <= max(f["t2"], f["t0"] + 2)]
        stalls = [t for p, t in zip(fio_times, fio_times[1:])
                  if t - p > 0.375 and p >= f["t0"] - 0.25 and p <= f["t2"]]
        f["moved"] = (max(stalls) - f["t0"]) * 1000 if stalls else 0.0
        # the longest time with no completed I/O that overlaps the fault
        # (from its start to the group whole again)
        iv = [t - p for p, t in zip(fio_times, fio_times[1:]) if t > f["t0"] and p < f["t2"]]
        f["gap"] = max(iv) * 1000 if iv else None
        f["base"] = base
        f["dip"] = f["back80"] = None
        if base > 0 and win:
            lo = min(range(len(win)), key=lambda i: win[i][1])
            f["dip"] = 100.0 * win[lo][1] / base
            if win[lo][1] >= 0.8 * base:
                f["back80"] = 0.0
            else:
                back = [t for t, x in win[lo:] if x >= 0.8 * base] + \
                       [t for t, r, w in bw if t > win[-1][0] and r + w >= 0.8 * base][:1]
                f["back80"] = (back[0] - f["t0"]) * 1000 if back else None
    # the counters: the log lines add up to them (A: one process; B: every
    # smcrd of the soak, each counted up to its last snapshot)
    snap_n = [0] + [f["n"] for f in faults]
    snap_list = [snaps[n] for n in snap_n]
    cnt_a = snap_list[-1][0][1] - snap_list[0][0][1]
    cnt_b, pid, base, lastv = 0, snap_list[0][1][0], snap_list[0][1][1], snap_list[0][1][1]
    for _, sb in snap_list[1:]:
        if sb[0] != pid:
            cnt_b += lastv - base
            pid, base = sb[0], 0
        lastv = sb[1]
    cnt_b += lastv - base
    # the lines in the counters' window: from snapshot 0 to the last one,
    # each side on its own clock (the watcher's look), so that neither the
    # host-clock mapping (off by a paused guest's lag, noisy under load)
    # nor a failure after the last snapshot (the end's I/O) counts
    win = [snap_time(d, n, w) for n in (0, snap_n[-1]) for w in ("A", "B")]
    if None not in win:
        log_a = len([t for t, _, m in a_events(os.path.join(d, "nbdkit.log"))
                     if win[0] < t <= win[2] and FAILED.search(m)])
        log_b = len([t for t, _, m in b_events(os.path.join(d, "smcrd.log"))
                     if win[1] < t <= win[3] and FAILED.search(m)])
    else:
        log_a = len([t for t in a_fail if t >= faults[0]["t0"] - 0.3]) if faults else 0
        log_b = len([t for t in b_fail if t >= faults[0]["t0"] - 0.3]) if faults else 0
    sums["cnt_A"], sums["cnt_B"], sums["log_A"], sums["log_B"] = cnt_a, cnt_b, log_a, log_b
    if abs(cnt_a - log_a) > 0 or cnt_b > log_b:
        errors.append("link_failures counted %d in A, %d in B; logged %d and %d (faults whose "
                      "counts differ: %s)"
                      % (cnt_a, cnt_b, log_a, log_b,
                         ", ".join("%d (%s) A %d/%d" % (f["n"], f["kind"], f["fail_a"], f["log_a"])
                                   for f in faults if f["fail_a"] != f["log_a"]) or "none"))
    end_a, end_b = load_snap(os.path.join(d, "snap.%d.A" % prev)), load_snap(os.path.join(d, "snap.end.B"))

    # ---- the plot ----
    t_start = (bw[0][0] if bw else faults[0]["t0"])
    with open(os.path.join(d, "timeline.dat"), "w") as o:
        for t, r, w in bw:
            o.write("%.3f %.3f %.3f\n" % (t - t_start, r, w))
    ymax = max([r for _, r, _ in bw] + [w for _, _, w in bw] + [1]) * 1.25
    gp = ['set terminal pngcairo size 2400,900 font "sans,11"',
          'set output "%s"' % os.path.join(d, "timeline.png"),
          'set title "smcrbd failover soak (seed %s): fio randrw 4k..256k iodepth 32 verify=crc32c '
          'on /dev/nbd0 (nbdkit smcr, 4 connections, rxe under TCG); %d faults"' % (a.seed, len(faults)),
          'set xlabel "seconds"', 'set ylabel "MiB/s per 250 ms"', 'set key outside right top',
          'set yrange [0:%.1f]' % ymax, 'set grid ytics']
    for f in faults:
        x = f["t0"] - t_start
        gp.append('set arrow from %.3f, graph 0 to %.3f, graph 0.93 nohead lc rgb "%s" lw 1' %
                  (x, x, COLOURS.get(f["kind"], "#000000")))
        gp.append('set label "%s%s" at %.3f, graph 0.94 rotate by 90 font "sans,7" tc rgb "%s"' %
                  (f["kind"], "" if f["side"] == "AB" else " " + f["side"], x,
                   COLOURS.get(f["kind"], "#000000")))
    gp.append('plot "%s" using 1:2 with lines lw 1 lc rgb "#1f77b4" title "read", '
              '"" using 1:3 with lines lw 1 lc rgb "#d62728" title "write"' %
              os.path.join(d, "timeline.dat"))
    with open(os.path.join(d, "timeline.gp"), "w") as o:
        o.write("\n".join(gp) + "\n")
    subprocess.run(["gnuplot", os.path.join(d, "timeline.gp")], check=True)

    # ---- the report ----
    fio = None
    try:
        t = open(os.path.join(d, "fio.json")).read()
        fio = json.loads(t[t.index("{"):])["jobs"][0]
    except (OSError, ValueError, IndexError, KeyError):
        pass
    dur = faults[-1]["t2"] - faults[0]["t0"] if faults else 0
    rep = ["# smcrbd failover soak", "",
           "Seed **%s** (`SMCR_SOAK_SEED=%s` replays the schedule); %d faults in %.0f s; "
           "QP ACK timeout %d (4.096 us << %d = %.0f ms, 7 tries: about %.1f s to a completion "
           "error on silent loss); rxe over qemu TCG, two links." %
           (a.seed, a.seed, len(faults), dur, a.qp_timeout, a.qp_timeout,
            4.096e-3 * (1 << a.qp_timeout), 7 * 4.096e-6 * (1 << a.qp_timeout)), ""]
    if fio:
        rep += ["Load: fio on /dev/nbd0 (first 160 MiB), direct, randrw 4k..256k, iodepth 32, "
                "verify=crc32c, verify_fatal=1, verify_backlog=256: read %d MiB, wrote %d MiB in %d s, "
                "error %d; ext4 on the last 96 MiB taking copies of /usr/include/linux." %
                (fio["read"]["io_kbytes"] >> 10, fio["write"]["io_kbytes"] >> 10, fio["elapsed"],
                 fio["error"]), ""]
    rep += ["Counters: %d link faults (%s), each failing one link of every link group: "
            "%d link failures expected in A, %d seen; %d expected in B, %d seen. "
            "All faults: link_failures counters A %d, B %d; failures logged A %d, B %d. "
            "NBD requests failed in A: %s; reconnects: %s." %
            (sums["link_faults"], ", ".join(LINK_KINDS), sums["want_A"], sums["A"],
             sums["want_B"], sums["B"], sums["cnt_A"], sums["cnt_B"], sums["log_A"], sums["log_B"],
             end_a[2]["errors"] if end_a and end_a[2] else "?",
             end_a[2]["reconnects"] if end_a and end_a[2] else "?"), "",
           "Times in ms from the fault, all from the daemons' own log lines, stamped as they "
           "were logged (smcrd's log; the nbdkit plugin's lines), and the guests' clock "
           "offsets sampled every ~150 ms (a watcher's line against its file's mtime on the "
           "host): *detect* to the first link failure (or lost connection) either end logged; "
           "*moved* until the connections were on the surviving link at both ends (the later "
           "end's first link failure line: each end moves its connections there) or, for a "
           "lost group or a restart, until all four NBD connections logged they were back; "
           "*fio gap* to the end of the last gap of more than 375 ms between fio's log "
           "entries that began during the fault (0: none; fio's logging itself lags under "
           "TCG, so this is an upper bound); *dip* the lowest 250 ms window within the "
           "fault (at least 2 s) against the 2 s before; *80%* until a window was back to 80% "
           "of that.  Windows of 250 ms: the times are as coarse.", "",
           "## Per kind (median / worst)", "",
           "| kind | n | detect | moved | fio gap | dip (lowest %) | back to 80% | aim |",
           "|---|---|---|---|---|---|---|---|"]
    aim_txt = {"cable": "port down: detect and I/O moving within 1000 ms; 80% within 2000 ms",
               "ifdown": "port down: detect and I/O moving within 1000 ms; 80% within 2000 ms",
               "rdma-delete": "device gone: as port down (1000 ms)",
               "drop": "silent loss: detect within 3000 ms",
               "qp-error": "I/O moving within 1000 ms; 80% within 2000 ms",
               "delay": "no link fails, no error", "hup": "no link fails, no error",
               "netem": "no error", "both-down": "group lost: client reconnects, no error",
               "kill": "client reconnects, no error", "term": "drained, client reconnects, no error",
               "pause": "no reset; I/O back within 2 s after the cont",
               "sigstop": "no reset; I/O back within 2 s after SIGCONT"}
    for k in sorted({f["kind"] for f in faults}):
        fs = [f for f in faults if f["kind"] == k]
        dips = [f["dip"] for f in fs if f["dip"] is not None]
        rep.append("| %s | %d | %s / %s | %s / %s | %s / %s | %s / %s | %s / %s | %s |" % (
            k, len(fs), ms(med([f["detect"] for f in fs])), ms(worst([f["detect"] for f in fs])),
            ms(med([f["switched"] for f in fs])), ms(worst([f["switched"] for f in fs])),
            ms(med([f["moved"] for f in fs])), ms(worst([f["moved"] for f in fs])),
            ms(med(dips)), ms(min(dips) if dips else None),
            ms(med([f["back80"] for f in fs])), ms(worst([f["back80"] for f in fs])),
            aim_txt.get(k, "")))
    rep += ["", "Zero errors over the whole soak is an aim the test enforces; the times are "
            "reported, not enforced: under TCG a guest's vCPU is shared by fio, nbdkit, the "
            "kernel's rxe and nbd, and the 250 ms windows are noisy (random 4k..256k blocks).",
            "", "![timeline](timeline.png)", "",
            "Timeline: read (blue) and write (red) MiB/s per 250 ms over the whole soak; a "
            "vertical line per fault in the colour of its kind, labelled with kind and side.", "",
            "## Every fault", "",
            "| # | kind | side | link | detect | by | moved | fio gap | dip % | 80% | whole after | "
            "link groups A/B | link failures A/B | reconnects |",
            "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for f in faults:
        rep.append("| %d | %s | %s | %s | %s | %s | %s | %s | %s | %s | %.0f | %s | %d/%d | %d |" % (
            f["n"], f["kind"], f["side"], f["link"] if f["kind"] != "both-down" else "1+2",
            ms(f["detect"]), f["by"], ms(f["switched"]), ms(f["moved"]), ms(f["dip"]), ms(f["back80"]),
            (f["t2"] - f["t0"]) * 1000, f["groups"], f["log_a"], f["log_b"], f["reconnects"]))
    rep += ["", "## Longest I/O gap per fault kind (median / worst, ms)", "",
            "From fio's %s: the longest time with no completed I/O between a fault's start "
            "and the group whole again." % ("per-I/O completion log (log_avg_msec=0)" if per_io
                                            else "250 ms bandwidth log (coarse)"), "",
            "| kind | n | longest gap |", "|---|---|---|"]
    for k in sorted({f["kind"] for f in faults}):
        fs = [f["gap"] for f in faults if f["kind"] == k]
        rep.append("| %s | %d | %s / %s |" % (k, len(fs), ms(med(fs)), ms(worst(fs))))
    rep += ["", "## Gaps over 2 s by cause", "",
            "Every gap of more than 2 s between two completed I/Os, attributed to the first "
            "of these found in either daemon's log from 1 s before the gap to its end: group "
            "lost, NBD connection lost, TEST LINK timeout, RC retries out, port or device "
            "down, link failover, local stall, LLC exchange; else the fault it lies in when "
            "that kind stops I/O by itself (pause, sigstop, kill, term, both-down); else "
            "unexplained.", "", "| cause | gaps | total s | longest ms |", "|---|---|---|---|"]
    by = {}
    for g in gaps:
        key = re.sub(r" \(.*", "", g["cause"]) if g["cause"] else "unexplained"
        by.setdefault(key, []).append(g["len"])
    for key in sorted(by, key=lambda k: -max(by[k])):
        rep.append("| %s | %d | %.1f | %.0f |" % (key, len(by[key]), sum(by[key]),
                                                  1000 * max(by[key])))
    if not gaps:
        rep.append("| (none) | 0 | 0 | 0 |")
    rep += ["", "| gap start (s into the soak) | ms | fault | cause |", "|---|---|---|---|"]
    t_first = faults[0]["t0"] if faults else 0
    for g in gaps:
        f = g["fault"]
        rep.append("| %.1f | %.0f | %s | %s |" % (
            g["start"] - t_first, 1000 * g["len"],
            "%d %s %s" % (f["n"], f["kind"], f["side"]) if f else "-",
            (g["cause"] or "unexplained").replace("|", "/")))
    unexplained = [g for g in gaps if not g["cause"]]
    if unexplained and a.strict_gaps:
        errors.append("%d I/O gap(s) over 2 s unexplained (longest %.0f ms)" %
                      (len(unexplained), 1000 * max(g["len"] for g in unexplained)))
    if errors:
        rep += ["", "## Counters that do not add up", ""] + ["* " + e for e in errors]
    if notes:
        rep += ["", "## Link failures not where expected", "",
                "Counted from both ends' logs between a fault and the next, on the host's "
                "clock (guest offsets +- ~100 ms; a late detection lands in the next "
                "fault's window):", ""] + ["* " + e for e in notes]
    with open(os.path.join(d, "report.md"), "w") as o:
        o.write("\n".join(rep) + "\n")
    # the table on stdout (the test's log)
    for line in rep:
        if line.startswith("| kind") or (line.startswith("| ") and not line[2:3].isdigit()):
            print(line)
    print("link faults %d: link failures A %d (expected %d), B %d (expected %d)" %
          (sums["link_faults"], sums["A"], sums["want_A"], sums["B"], sums["want_B"]))
    for line in rep[rep.index("## Gaps over 2 s by cause"):]:
        if line.startswith("| ") and not line.startswith("| gap start"):
            print("gap: " + line)
    for e in notes:
        print("note: " + e)
    for e in errors:
        print("COUNTERS: " + e)
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
