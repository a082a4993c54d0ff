#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# smcrd's counters per export and per client against real I/O: nbdcopy
# writes 4 MiB to one export and reads them back, nbdinfo opens another;
# smcrctl --json status has export_io and client_io whose bytes equal the
# bytes moved and whose latency buckets add up to the requests; smcrctl
# metrics prints the Prometheus text format (every sample line
# 'name{labels} value', HELP and TYPE before a family's samples, histogram
# buckets cumulative up to +Inf = _count) with the same numbers; --watch
# shows rates (in the export_io and client_io tables, and of the global
# counters); with two smcrd, reset, send and metrics want a TARGET or
# --all.
# smcr-timeout: 300
. "${srcdir:-.}/functions.sh"
. "$srcdir/test-smcrd-lib.sh"
. "$srcdir/test-client-lib.sh"
requires nbdcopy --version
requires nbdinfo --version
requires python3 --version

d=$(scratch_dir)
truncate -s 1M "$d/small.img"
start_smcrd_disk 4M --export "small=$d/small.img"
ctl() { run_prog "$SMCRCTL" "$@"; }
wait_for 10 test -S "$SMCR_CTL_DIR/smcrd.$SMCRD_PID.sock"

make_random "$d/data" 4
nbdcopy "$d/data" "$(uri disk)" || fail "nbdcopy to the export"
nbdcopy "$(uri disk)" "$d/back" || fail "nbdcopy from the export"
cmp -n 4194304 "$d/data" "$d/back" || fail "data read back differ"
nbdinfo "$(uri small)" >/dev/null || fail "nbdinfo"
mib4=4194304
# The 4 MiB export was written whole and read whole (nbdcopy may open
# several connections; nbdinfo may read a little of 'small').
io_json() {
    ctl --json status smcrd | python3 -c '
import json, sys
sec = json.load(sys.stdin)[0]["sections"]["smcrd"]
ex = {e["export"]: e for e in sec["export_io"]}
cl = {c["client"]: c for c in sec["client_io"]}
nb = len(sec["latency_bounds_us"])
for e in list(ex.values()) + list(cl.values()):
    assert len(e["latency"]) == nb + 1, e
    assert sum(e["latency"]) == e["requests"], e
    assert e["requests"] >= e["reads"] + e["writes"], e
d, s, c = ex["disk"], ex["small"], cl["127.0.0.1"]
print(d["bytes_written"], d["bytes_read"], d["errors"], d["connections"],
      d["connections_total"], s["connections_total"], s["bytes_written"],
      c["bytes_written"], c["bytes_read"], c["requests"], d["requests"] + s["requests"],
      c["connections_total"])'
}
closed() { read -r _ _ _ conns _ < <(io_json) && [ "$conns" = 0 ]; }
wait_for 10 closed || fail "connections still counted open: $(io_json)"
read -r dw dr derr dconn dct sct sw cw cr creq sumreq cct < <(io_json) || fail "status --json: $(io_json)"
echo "export disk: written $dw, read $dr, errors $derr, connections $dconn ($dct in all); small: $sct; client: written $cw, read $cr, requests $creq"
[ "$dw" = $mib4 ] || fail "export disk: bytes_written $dw, moved $mib4"
[ "$dr" = $mib4 ] || fail "export disk: bytes_read $dr, moved $mib4"
[ "$derr" = 0 ] || fail "export disk: errors $derr"
[ "$dct" -ge 2 ] && [ "$sct" = 1 ] || fail "connections_total: disk $dct, small $sct"
[ "$sw" = 0 ] || fail "export small: bytes_written $sw"
[ "$cw" = "$dw" ] && [ "$cr" -ge "$dr" ] || fail "client 127.0.0.1: written $cw, read $cr"
[ "$creq" = "$sumreq" ] && [ "$cct" = $((dct + sct)) ] || fail "client: requests $creq (exports $sumreq), connections $cct"
ctl status smcrd | grepq "^  export_io (2):" || fail "status: no export_io table"
ctl send smcrd status | grepq "^io export disk: connections 0 ($dct in all), .*bytes read $dr, written $dw, errors 0" ||
    fail "control socket status: no io line"

# The Prometheus text.
ctl metrics >"$d/metrics" || fail "smcrctl metrics"
python3 - "$d/metrics" "$dw" "$dr" "$creq" <<'PY' || fail "metrics text"
import re, sys
text = open(sys.argv[1]).read()
dw, dr, creq = int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
lab = r'[a-zA-Z_][a-zA-Z0-9_]*="(?:\\.|[^"\\])*"'
sample = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{' + lab + r'(?:,' + lab + r')*\})? (\S+)$')
types, helps, seen, vals = {}, set(), set(), {}
for n, line in enumerate(text.splitlines(), 1):
    if line.startswith("# HELP "):
        helps.add(line.split()[2])
        continue
    if line.startswith("# TYPE "):
        _, _, name, typ = line.split()
        assert name not in types, "TYPE twice: %s" % name
        assert typ in ("counter", "gauge", "histogram"), line
        types[name] = typ
        continue
    m = sample.match(line)
    assert m, "line %d not a sample: %r" % (n, line)
    name, labels, value = m.groups()
    float(value)
    fam = re.sub(r'_(bucket|sum|count)$', '', name) if re.sub(r'_(bucket|sum|count)$', '', name) in types and types[re.sub(r'_(bucket|sum|count)$', '', name)] == "histogram" else name
    assert fam in types, "line %d: sample before its TYPE: %r" % (n, line)
    assert fam in helps, "no HELP for " + fam
    assert name.startswith("smcrd_"), name
    vals[name + (labels or "")] = float(value)
assert vals['smcrd_export_written_bytes_total{export="disk"}'] == dw, vals
assert vals['smcrd_export_read_bytes_total{export="disk"}'] == dr, vals
assert vals['smcrd_client_requests_total{client="127.0.0.1"}'] == creq, vals
assert vals['smcrd_export_size_bytes{export="disk"}'] == 4 << 20
for who in ('export="disk"', 'export="small"', 'client="127.0.0.1"'):
    kind = who.split("=")[0]
    h = "smcrd_%s_request_duration_seconds" % kind
    b = [(k, v) for k, v in vals.items() if k.startswith(h + "_bucket{" + who + ",")]
    assert len(b) >= 2 and b[-1][0].endswith('le="+Inf"}'), b
    assert all(x[1] <= y[1] for x, y in zip(b, b[1:])), b
    assert b[-1][1] == vals[h + "_count{" + who + "}"] == vals["smcrd_%s_requests_total{%s}" % (kind, who)]
print("metrics: %d samples, %d families, parsed" % (len(vals), len(types)))
PY

# --watch: each counter with its rate.
nbdcopy "$(uri disk)" null: &
cp=$!
timeout 3.5 "$SMCRCTL" --watch 1 status smcrd >"$d/watch" || true
wait "$cp" || fail "nbdcopy during --watch"
grep -Eq "^    disk +[0-9]+ +[0-9]+ \(\+[0-9.]+[kMG]?/s\) +[0-9]+ \(\+[0-9.]+[kMG]?/s\)" "$d/watch" ||
    { cat "$d/watch"; fail "--watch: no rates in the export_io table"; }
grep -Eq "^    127\.0\.0\.1 +[0-9]+ +[0-9]+ \(\+[0-9.]+[kMG]?/s\) +[0-9]+ \(\+[0-9.]+[kMG]?/s\)" "$d/watch" ||
    { cat "$d/watch"; fail "--watch: no rates in the client_io table"; }
grep -Eq "^  requests +[0-9]+ \(\+[0-9.]+[kMG]?/s\)" "$d/watch" || fail "--watch: no rate of requests"

# Two smcrd: commands that change state (and metrics) want one named.
first=$SMCRD_PID
SMCRD_LOG=$d/smcrd2.log start_smcrd --export "small=$d/small.img"
second=$SMCRD_PID
wait_for 10 test -S "$SMCR_CTL_DIR/smcrd.$second.sock"
rc=0; ctl reset 2>"$d/err" || rc=$?
[ "$rc" = 2 ] && grepq "reset: 2 programs match: smcrd (pid [0-9]*), smcrd (pid [0-9]*); name one" <"$d/err" ||
    fail "reset with two smcrd: status $rc, $(cat "$d/err")"
rc=0; ctl metrics >/dev/null 2>&1 || rc=$?
[ "$rc" = 2 ] || fail "metrics with two smcrd: status $rc"
rc=0; ctl send smcrd help >/dev/null 2>&1 || rc=$?
[ "$rc" = 2 ] || fail "send to two smcrd: status $rc"
ctl send "$second" help | grepq "^smcrd (pid $second): commands: " || fail "send PID"
[ "$(ctl --all send smcrd help | grep -c '^smcrd (pid [0-9]*): commands: ')" = 2 ] ||
    fail "send --all"
ctl --all metrics | grepq "^smcrd_clients{pid=\"$second\"} 0$" || fail "metrics --all: no pid label"
ctl metrics "$first" | grepq '^smcrd_export_written_bytes_total{export="disk"} '"$dw"'$' ||
    fail "metrics PID"
stop_smcrd
SMCRD_PID=$first
stop_smcrd
echo "PASS: per-export and per-client counters equal the bytes moved; metrics text parses; --watch rates; one daemon unless --all"
