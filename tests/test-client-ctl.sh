#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# smcrctl against the control sockets of smcrd and of a client (nbdkit
# with our plugin over smcrd's SMC-R port; TCP fallback on this host):
# list, status (table and JSON with the right fields), stats, counters that
# move with I/O, 'nbd drop' making the client reconnect, fail-link with no
# link (error), --watch, the exit statuses, and stats of a client on TCP;
# reset zeroes smcrd's totals (not its gauges), and they count again;
# 20 silent clients on the plugin's control socket hold it for 2 s at most.
# smcr-timeout: 180
. "${srcdir:-.}/functions.sh"
. "$srcdir/test-smcrd-lib.sh"
. "$srcdir/test-client-lib.sh"
requires nbdkit --version
requires nbdcopy --version

d=$(scratch_dir)
SPORT=$(free_port)
start_smcrd_disk 32M --smcr-port "$SPORT"
wait_for 10 grep -q 'listening for NBD over SMC-R' "$SMCRD_LOG"
start_nbdkit server="127.0.0.1:$SPORT" export=disk connections=3
ctl() { run_prog "$SMCRCTL" "$@"; }

# list: both programs.  The plugin makes its control socket once it has
# attached (after nbdkit's own socket is there): wait for it, a loaded
# machine may take seconds.
plugin_listed() { ctl list | grep -Eq "^nbdkit-smcr +[0-9]+ +running"; }
wait_for 60 plugin_listed
ctl list >"$d/list" || fail "smcrctl list"
cat "$d/list"
grep -Eq "^smcrd +$SMCRD_PID +running" "$d/list" || fail "smcrd not listed"
grep -Eq "^nbdkit-smcr +[0-9]+ +running" "$d/list" || fail "nbdkit-smcr not listed"

# status as a table.
ctl status nbdkit-smcr >"$d/status" || fail "smcrctl status"
cat "$d/status"
grep -q "^=== nbdkit-smcr (pid [0-9]*) ===" "$d/status" || fail "no heading"
grep -q "NBD export 'disk' at smcr://127.0.0.1:$SPORT: 33554432 bytes, read-write, multi-conn, 3 connection(s) up of 3" \
    "$d/status" || fail "export line"
grep -Eq "^  fallback 0x03030002 x3: no SMC-R device found" "$d/status" || fail "fallback reason"
[ "$(grep -Ec '^  [0-2] +up +tcp-fallback +127\.0\.0\.1:' "$d/status")" = 3 ] || fail "connection rows"
ctl status smcrd >"$d/status-smcrd" || fail "smcrctl status smcrd"
grep -Eq "^  +disk +$d/disk.img +33554432 +no" "$d/status-smcrd" || fail "smcrd's export table"
grep -q "^  clients  *3" "$d/status-smcrd" || fail "smcrd should count 3 clients"

# Counters move with I/O; JSON fields.
counters() {
    ctl --json status nbdkit-smcr | python3 -c '
import json, sys
doc = json.load(sys.stdin)
assert len(doc) == 1
p = doc[0]
assert p["name"] == "nbdkit-smcr" and p["pid"] > 0
assert p["smcr"]["link_groups"] == []
s, n = p["stats"], p["sections"]["nbd"]
assert s["connections"] >= 3 and s["fallbacks"] >= 3 and s["smc_connections"] == 0
assert n["export"] == "disk" and n["size"] == 33554432 and n["connections_up"] == 3
assert [c["state"] for c in n["connections"]] == ["up"] * 3
print(n["stats"]["requests"], n["stats"]["bytes_written"], n["stats"]["reconnects"])'
}
read -r req0 wr0 rc0 < <(counters) || fail "JSON status"
make_random "$d/data" 8
nbdcopy "$d/data" "$(nbdkit_uri)" || fail "nbdcopy"
read -r req1 wr1 rc1 < <(counters) || fail "JSON status after I/O"
echo "requests $req0 -> $req1, bytes written $wr0 -> $wr1"
[ "$req1" -gt "$req0" ] && [ "$wr1" -ge $((wr0 + 8388608)) ] || fail "counters did not move"
[ "$rc1" = 0 ] || fail "unexpected reconnects"

# stats, and the JSON of all programs.
ctl stats nbdkit-smcr | grep -Eq "^  connections +[0-9]+ +smc_connections +0 +fallbacks +[0-9]+" ||
    fail "smcrctl stats"
ctl --json status | python3 -c '
import json, sys
names = sorted(p["name"] for p in json.load(sys.stdin))
assert names == ["nbdkit-smcr", "smcrd"], names' || fail "status of all programs"

# A command for the client library: drop its connections; they come back.
ctl send nbdkit-smcr nbd drop | grepq "ok: dropped 3 connection(s)" || fail "nbd drop"
wait_for 10 bash -c "'$SMCRCTL' --json status nbdkit-smcr | grep -q '\"reconnects\":3,'"
cmp -n 8388608 "$d/data" "$d/disk.img" || fail "data"

# reset: the totals of stats start again from 0, gauges stay; new
# connections count from there.
stat() {    # NAME: smcrd's libsmcr counter
    "$SMCRCTL" --json status smcrd | python3 -c '
import json, sys
print(json.load(sys.stdin)[0]["stats"][sys.argv[1]])' "$1"
}
c0=$(stat connections) o0=$(stat open_connections)
ctl reset smcrd | grepq "ok: counters reset" || fail "smcrctl reset"
c1=$(stat connections) o1=$(stat open_connections)
[ "$c1" = 0 ] && [ "$o1" = "$o0" ] ||
    fail "after reset: connections $c0 -> $c1, open_connections $o0 -> $o1"
ctl send nbdkit-smcr nbd drop | grepq "ok: dropped 3 connection(s)" || fail "nbd drop 2"
wait_for 10 bash -c "'$SMCRCTL' --json status nbdkit-smcr | grep -q '\"reconnects\":6,'"
c2=$(stat connections)
[ "$c2" -ge 3 ] && [ "$c2" -lt "$c0" ] ||
    fail "after reset and 3 reconnects: connections $c2 (before reset $c0)"
echo "reset: connections $c0 -> $c1 -> $c2 (3 reconnects), open_connections $o0 -> $o1"
rc=0; ctl reset a b 2>/dev/null || rc=$?
[ "$rc" = 2 ] || fail "reset with two targets: status $rc"

# More silent clients than the plugin's control socket serves at once:
# answered once the first 16 are dropped (2 s).
ctl_flood "$(ls "$SMCR_CTL_DIR"/nbdkit-smcr.*.sock | head -n 1)" 20
echo "the plugin's control socket behind 20 silent clients: answered in $flood_ms ms"
ctl status nbdkit-smcr | grepq "^=== nbdkit-smcr" || fail "status after 20 silent clients"

# Faults need a link group: none here.
if ctl fail-link 1 nbdkit-smcr >"$d/fault" 2>&1; then fail "fail-link without links succeeded"; fi
grep -q "error: fail-link=1: no such link" "$d/fault" || fail "fail-link message: $(cat "$d/fault")"

# --watch repeats.
timeout 2.5 "$SMCRCTL" --watch 0.5 stats smcrd >"$d/watch" || true
[ "$(grep -c '^smcrctl stats, every 0.5s' "$d/watch")" -ge 3 ] || fail "--watch did not repeat"

# Exit statuses.
rc=0; ctl status no-such-program 2>/dev/null || rc=$?
[ "$rc" = 1 ] || fail "unknown program: status $rc"
rc=0; ctl bogus 2>/dev/null || rc=$?
[ "$rc" = 2 ] || fail "unknown command: status $rc"
rc=0; ctl fail-link x 2>/dev/null || rc=$?
[ "$rc" = 2 ] || fail "bad link id: status $rc"

stop_nbdkit

# A client on plain TCP has no SMC-R counters: stats shows its NBD section
# and exits 0 (it said "error: no SMC-R context" and --json exited 1).
start_nbdkit server="127.0.0.1:$PORT" export=disk transport=tcp
nbdcopy "nbd+unix:///?socket=$NBDKIT_SOCK" null: || fail "nbdkit over TCP"
ctl stats nbdkit-smcr >"$d/tcp-stats" || { cat "$d/tcp-stats"; fail "stats of a TCP client: exit $?"; }
grep -q "^no SMC-R context (TCP only)" "$d/tcp-stats" || { cat "$d/tcp-stats"; fail "stats of a TCP client: no notice"; }
grep -q "NBD export 'disk' at nbd://127.0.0.1:$PORT" "$d/tcp-stats" || fail "stats of a TCP client: no NBD section"
ctl --json stats nbdkit-smcr | python3 -c '
import json, sys
p = json.load(sys.stdin)[0]
assert p["stats"] is None and p["status"]["sections"]["nbd"]["stats"]["requests"] >= 1, p' ||
    fail "stats --json of a TCP client"
stop_nbdkit
stop_smcrd
ls "$SMCR_CTL_DIR" | grepq . && fail "control sockets left behind: $(ls "$SMCR_CTL_DIR")"
echo "PASS: smcrctl list/status/stats/reset/send/fail-link/--watch on smcrd and nbdkit-smcr"
