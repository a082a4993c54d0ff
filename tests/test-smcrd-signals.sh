#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# SIGHUP reloads the exports of the config file and keeps connected clients;
# SIGTERM drains in-flight requests and exits 0; daemon mode with a pid file.
# smcr-timeout: 300
. "${srcdir:-.}/functions.sh"
. "$srcdir/test-smcrd-lib.sh"
requires_nbd_python

d=$(scratch_dir)
truncate -s 16M "$d/a.img"
truncate -s 64M "$d/b.img"
cat >"$d/smcrd.conf" <<CONF
# test config
queue-depth = 64

[export alpha]
path = $d/a.img
CONF
start_smcrd --config "$d/smcrd.conf" --pidfile "$d/smcrd.pid"
[ "$(cat "$d/smcrd.pid")" = "$SMCRD_PID" ] || fail "pid file content"
[ "$(probe 127.0.0.1 "$PORT" list)" = alpha ] || fail "initial export list"

# --- SIGHUP: a connected client of 'alpha' survives its removal ---------------
nbd_python "$(uri alpha)" "$d" <<'PY' >"$d/hup.out" 2>&1 &
import os, sys, time, nbd
uri, d = sys.argv[1], sys.argv[2]
h = nbd.NBD()
h.connect_uri(uri)
h.pwrite(b"\x11" * 65536, 0)
open(d + "/connected", "w").close()
for _ in range(600):
    if os.path.exists(d + "/go"):
        break
    time.sleep(0.05)
else:
    sys.exit("never told to go on")
h.pwrite(b"\x22" * 65536, 65536)
assert h.pread(65536, 0) == b"\x11" * 65536
assert h.pread(65536, 65536) == b"\x22" * 65536
h.flush()
h.shutdown()
print("old client fine")
PY
hup_pid=$!
wait_for 30 test -e "$d/connected"
cat >"$d/smcrd.conf" <<CONF
queue-depth = 64
[export beta]
path = $d/b.img
description = the new one
CONF
kill -HUP "$SMCRD_PID"
wait_for 30 log_has "export 'beta'"
[ "$(probe 127.0.0.1 "$PORT" list)" = beta ] || fail "export list after SIGHUP"
out=$(probe 127.0.0.1 "$PORT" info alpha) && fail "alpha still exported after SIGHUP"
case $out in NBD_REP_ERR_UNKNOWN:*) ;; *) fail "alpha after SIGHUP: $out" ;; esac
[ "$(nbdinfo --size "$(uri beta)")" = 67108864 ] || fail "beta size"
touch "$d/go"
wait "$hup_pid" || { cat "$d/hup.out"; fail "client connected before SIGHUP failed"; }
cmp <(head -c 65536 "$d/a.img") <(head -c 65536 /dev/zero | tr '\0' '\021') ||
    fail "alpha data written before SIGHUP"

# A broken config file: reload fails, exports stay.
echo "this is not = [valid" >"$d/smcrd.conf"
echo "[export" >>"$d/smcrd.conf"
kill -HUP "$SMCRD_PID"
wait_for 30 log_has "reload failed"
[ "$(probe 127.0.0.1 "$PORT" list)" = beta ] || fail "exports lost after a bad reload"

# --- SIGTERM with requests in flight: all answered, exit 0 ----------------------
nbd_python "$(uri beta)" "$SMCRD_PID" "$d" <<'PY' >"$d/term.out" 2>&1 || { cat "$d/term.out"; fail "drain client failed"; }
import errno, os, signal, sys, nbd
uri, pid, d = sys.argv[1], int(sys.argv[2]), sys.argv[3]
h = nbd.NBD()
h.connect_uri(uri)
n, size = 48, 1 << 20
bufs = [bytes([i + 1]) * size for i in range(n)]
cookies = [h.aio_pwrite(bufs[i], i * size) for i in range(n)]
# Wait until the server is busy with them, then ask it to stop.
while not h.aio_command_completed(cookies[0]):
    h.poll(-1)
os.kill(pid, signal.SIGTERM)
ok, shut, other = [0], 0, 0
done = {0}
while len(done) < n:
    for i, c in enumerate(cookies):
        if i in done:
            continue
        try:
            if h.aio_command_completed(c):
                ok.append(i)
                done.add(i)
        except nbd.Error as e:
            done.add(i)
            if e.errnum == errno.ESHUTDOWN:
                shut += 1
            else:
                other += 1
                print("command %d: %s" % (i, e))
    if len(done) < n:
        try:
            h.poll(1000)
        except nbd.Error as e:
            sys.exit("connection dropped with %d of %d answered: %s" % (len(done), n, e))
open(d + "/ok.list", "w").write(" ".join(map(str, ok)))
print("answered ok=%d eshutdown=%d other=%d" % (len(ok), shut, other))
sys.exit(1 if other else 0)
PY
rc=0
wait "$SMCRD_PID" || rc=$?
[ $rc = 0 ] || { tail -20 "$SMCRD_LOG"; fail "smcrd exited $rc after SIGTERM"; }
cat "$d/term.out"
log_has "draining" || fail "no drain log line"
[ -e "$d/smcrd.pid" ] && fail "pid file left behind"
python3 - "$d/b.img" $(cat "$d/ok.list") <<'PY' || fail "writes answered ok are not on disk"
import sys
with open(sys.argv[1], "rb") as f:
    for i in map(int, sys.argv[2:]):
        f.seek(i << 20)
        if f.read(1 << 20) != bytes([i + 1]) * (1 << 20):
            sys.exit("write %d answered ok but not on disk" % i)
PY

# --- daemon mode -------------------------------------------------------------------
if [ "${SMCR_VALGRIND:-0}" != 1 ]; then
    PORT=$(free_port)
    "$SMCRD" -l 127.0.0.1 -p "$PORT" --pidfile "$d/daemon.pid" --log-file "$d/daemon.log" \
        --export "beta=$d/b.img" || fail "daemon start failed"
    [ -s "$d/daemon.pid" ] || fail "no pid file"
    dpid=$(cat "$d/daemon.pid")
    cleanup_fn "kill -KILL $dpid 2>/dev/null"
    [ "$(probe 127.0.0.1 "$PORT" list)" = beta ] || fail "daemon does not serve"
    kill -TERM "$dpid"
    wait_for 30 sh -c "! kill -0 $dpid 2>/dev/null"
    [ -e "$d/daemon.pid" ] && fail "daemon left its pid file"
    grep -q "exiting" "$d/daemon.log" || fail "daemon log"
fi
echo "PASS: SIGHUP reload keeps clients, SIGTERM drains, daemon mode"
