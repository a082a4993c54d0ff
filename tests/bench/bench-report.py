#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""Turns bench-nbd.sh's results.csv into report.md and PNG plots.

Every figure is the median of the rounds with min and max beside it; the
ratio is smcrd's median over the better median of the other servers, and
the aims (smcrd 1.2x the better server, its CPU per I/O at most
nbdkit's) are printed beside the figures.
Plots (gnuplot, if installed): IOPS and CPU per I/O against clients and
against queue depth, all servers on one chart.
"""
import argparse
import csv
import os
import shutil
import statistics
import subprocess
import sys

SERVERS = ["smcrd", "nbdkit", "qemu-nbd"]
OTHERS = ["nbdkit", "qemu-nbd"]		# the ratio's denominators
AIM_RATIO = 1.2


def num(v):
    try:
        return float(v)
    except ValueError:
        return None


def stats(vals):
    vals = [v for v in vals if v is not None]
    if not vals:
        return None
    return statistics.median(vals), min(vals), max(vals)


def fmt(st, digits=0):
    if not st:
        return "ERR"
    f = "%%.%df" % digits
    med, lo, hi = st
    return (f % med) + " (" + (f % lo) + "-" + (f % hi) + ")"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--title", default="NBD servers")
    ap.add_argument("--what", default="")
    ap.add_argument("--machine", default="")
    ap.add_argument("csv")
    ap.add_argument("outdir")
    a = ap.parse_args()

    global SERVERS
    rows = list(csv.DictReader(open(a.csv)))
    if any(r["server"] == "smcrd-old" for r in rows):
        # bench-nbd.sh -O: smcrd with SMCRD_RING_SOCKET=0 beside it
        SERVERS = ["smcrd", "smcrd-old"] + OTHERS
    # key: (job, clients, qd) -> server -> lists
    data = {}
    units = {}
    order = []
    for r in rows:
        key = (r["job"], int(r["clients"]), int(r["qd"]))
        if key not in data:
            data[key] = {}
            order.append(key)
        d = data[key].setdefault(r["server"], {"v": [], "s": [], "c": [], "y": []})
        d["y"].append(num(r.get("syscalls_per_io") or "-"))
        d["v"].append(num(r["value"]))
        d["s"].append(num(r["server_cpu"]))
        d["c"].append(num(r["client_cpu"]))
        units[key] = (r["unit"], r["cpu_unit"])
    rounds = max(int(r["round"]) for r in rows) if rows else 0

    out = []
    out.append("# %s\n" % a.title)
    out.append("%s; %s.  Each figure: median of %d round(s), (min-max) beside it.\n"
               % (a.what, a.machine, rounds))
    out.append("Ratio: smcrd's median / the better median of nbdkit and qemu-nbd; "
               "aim: >= %.1f on every row, and CPU per I/O (server + client) at or "
               "below nbdkit's.\n" % AIM_RATIO)

    def table(keys, label):
        out.append("\n## %s\n" % label)
        old = "smcrd-old" in SERVERS
        out.append("| job | clients | qd | unit | " + " | ".join(SERVERS)
                   + " | ratio |" + (" ratio smcrd-old |" if old else "") + " aim met |")
        out.append("|---|---|---|---|" + "---|" * len(SERVERS) + "---|---|"
                   + ("---|" if old else ""))
        met = 0
        for k in keys:
            d = data[k]
            st = {s: stats(d.get(s, {"v": []})["v"]) for s in SERVERS}
            others = [st[s][0] for s in OTHERS if st[s]]
            best = max(others) if others else 0

            def ratio_of(s):
                return st[s][0] / best if st.get(s) and best else None
            ratio = ratio_of("smcrd")
            ok = ratio is not None and ratio >= AIM_RATIO
            met += ok
            ro = ratio_of("smcrd-old")
            out.append("| %s | %d | %d | %s | " % (k[0], k[1], k[2], units[k][0])
                       + " | ".join(fmt(st[s]) for s in SERVERS)
                       + " | %s |" % ("%.2f" % ratio if ratio else "n/a")
                       + ((" %s |" % ("%.2f" % ro if ro else "n/a")) if old else "")
                       + " %s |" % ("yes" if ok else "no"))
        out.append("\nAim met on %d of %d rows.\n" % (met, len(keys)))
        out.append("\nCPU per I/O (us) or per GiB (ms): server / client, medians\n")
        out.append("| job | clients | qd | unit | " + " | ".join(SERVERS)
                   + " | smcrd total / nbdkit total |")
        out.append("|---|---|---|---|" + "---|" * len(SERVERS) + "---|")
        for k in keys:
            d = data[k]
            cells, tot = [], {}
            for s in SERVERS:
                sv = stats(d.get(s, {"s": []})["s"])
                cv = stats(d.get(s, {"c": []})["c"])
                if sv and cv:
                    tot[s] = sv[0] + cv[0]
                    cells.append("%.1f / %.1f" % (sv[0], cv[0]))
                else:
                    cells.append("-")
            r = ("%.2f" % (tot["smcrd"] / tot["nbdkit"])
                 if "smcrd" in tot and tot.get("nbdkit") else "n/a")
            out.append("| %s | %d | %d | %s | " % (k[0], k[1], k[2], units[k][1])
                       + " | ".join(cells) + " | %s |" % r)
        out.append("\nThe client's CPU while it ran (fio and its processes, in CPUs: CPU "
                   "per I/O x rate; with -c fio has one CPU, so 1.00 means the client "
                   "is the limit), median\n")
        out.append("| job | clients | qd | " + " | ".join(SERVERS) + " |")
        out.append("|---|---|---|" + "---|" * len(SERVERS))
        for k in keys:
            per_unit = 1e-6 if units[k][0] == "IOPS" else 1e-3 / 1024
            cells = []
            for s in SERVERS:
                d = data[k].get(s, {"v": [], "c": []})
                busy = stats([v * c * per_unit for v, c in zip(d["v"], d["c"])
                              if v is not None and c is not None])
                cells.append("%.2f" % busy[0] if busy else "-")
            out.append("| %s | %d | %d | " % k + " | ".join(cells) + " |")
        sc = [s for s in SERVERS if any(stats(data[k].get(s, {"y": []})["y"]) for k in keys)]
        if sc:
            out.append("\nServer system calls per I/O (perf stat, all threads), "
                       "median (min-max)\n")
            out.append("| job | clients | qd | " + " | ".join(sc) + " |")
            out.append("|---|---|---|" + "---|" * len(sc))
            for k in keys:
                out.append("| %s | %d | %d | " % k + " | ".join(
                    fmt(stats(data[k].get(s, {"y": []})["y"]), 2) for s in sc) + " |")

    main_keys = [k for k in order if not k[0].startswith("scale-")]
    if main_keys:
        table(main_keys, "Jobs (one client)")
    plots = []
    for job, axis, xlabel in (("scale-clients", 1, "clients (connections, qd 1 each)"),
                              ("scale-qd", 2, "queue depth (one client)")):
        keys = sorted((k for k in order if k[0] == job), key=lambda k: k[axis])
        if not keys:
            continue
        table(keys, "4 KiB random reads against %s" % xlabel)
        dat = os.path.join(a.outdir, job + ".dat")
        with open(dat, "w") as f:
            f.write("# x " + " ".join("%s_iops %s_cpu" % (s, s) for s in SERVERS) + "\n")
            for k in keys:
                cols = [str(k[axis])]
                for s in SERVERS:
                    d = data[k].get(s, {"v": [], "s": [], "c": []})
                    v, sv, cv = stats(d["v"]), stats(d["s"]), stats(d["c"])
                    cols.append("%.0f" % v[0] if v else "NaN")
                    cols.append("%.2f" % (sv[0] + cv[0]) if sv and cv else "NaN")
                f.write(" ".join(cols) + "\n")
        plots.append((job, dat, xlabel))

    if plots and shutil.which("gnuplot"):
        for job, dat, xlabel in plots:
            for what, col0, ylabel in (("iops", 2, "IOPS"),
                                       ("cpu", 3, "CPU per I/O, server + client (us)")):
                png = os.path.join(a.outdir, "%s-%s.png" % (job, what))
                lines = ", ".join(
                    "'%s' using 1:%d with linespoints lw 2 title '%s'" % (dat, col0 + 2 * i, s)
                    for i, s in enumerate(SERVERS))
                script = ("set terminal png size 800,480\nset output '%s'\n"
                          "set logscale x 2\nset grid\nset key left top\n"
                          "set xlabel '%s'\nset ylabel '%s'\n"
                          "set title '4 KiB random reads: %s'\nplot %s\n"
                          % (png, xlabel, ylabel, ylabel, lines))
                subprocess.run(["gnuplot"], input=script, text=True, check=True)
                out.append("\n![%s %s](%s)\n" % (job, what, os.path.basename(png)))
    elif plots:
        out.append("\n(gnuplot is not installed: no plots)\n")

    text = "\n".join(out) + "\n"
    open(os.path.join(a.outdir, "report.md"), "w").write(text)
    sys.stdout.write(text)


if __name__ == "__main__":
    main()
