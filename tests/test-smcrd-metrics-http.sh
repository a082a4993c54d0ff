#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# smcrd --metrics-listen PORT (loopback) serves smcrctl metrics' text over
# HTTP, and a slow or hostile scraper does not stall it:
#  - after 4 MiB written with nbdcopy, GET /metrics (HTTP/1.1 and 1.0) is
#    200, text/plain; version=0.0.4, and its body equals smcrctl metrics'
#    byte for byte; HEAD has the headers only; another path is 404, POST
#    405, a request line that is not HTTP 400, 5000 bytes of headers 431;
#  - 12 slow-loris clients (a byte of headers every 200 ms) and 8 silent
#    ones at once: 5 scrapes in a row still answer, each within 2 s, and
#    NBD is served meanwhile (nbdinfo); a silent client is closed after the
#    5 s a connection may live;
#  - a client that never reads its reply (64 requests, nothing read)
#    does not hold up the next scrape;
#  - the config key metrics-listen works like the option; a bad value and
#    a port in use fail the start in one line, exit 1.
# smcr-timeout: 120
. "${srcdir:-.}/functions.sh"
. "$srcdir/test-smcrd-lib.sh"
. "$srcdir/test-client-lib.sh"
requires nbdcopy --version
requires nbdinfo --version
requires python3 --version

d=$(scratch_dir)
# Free ports, in one python (each takes a second or two on a busy host).
read -r MPORT MPORT2 BPORT1 BPORT2 < <(python3 -c '
import socket
ss = [socket.socket() for _ in range(4)]
for s in ss:
    s.bind(("127.0.0.1", 0))
print(*[s.getsockname()[1] for s in ss])') || fail "no free ports"
start_smcrd_disk 4M --metrics-listen "$MPORT"
wait_for 10 test -S "$SMCR_CTL_DIR/smcrd.$SMCRD_PID.sock"
log_has "serving metrics over HTTP on $MPORT" || fail "no metrics line in the log"
make_random "$d/data" 4
nbdcopy "$d/data" "$(uri disk)" || fail "nbdcopy to the export"
wait_for 10 bash -c "! '$SMCRCTL' --json status smcrd | grep -q '\"connections\":[1-9]'"
run_prog "$SMCRCTL" metrics >"$d/ctl.txt" || fail "smcrctl metrics"

# ask(port, raw, timeout): raw to 127.0.0.1:port, the reply read to its end;
# returns its status line, headers (names in lower case) and body.  For the
# python scripts below (PYTHONPATH=$d).
cat >"$d/httpask.py" <<'PY'
import socket

def ask(port, raw, timeout=5):
    s = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    s.sendall(raw)
    out = b""
    while True:
        b = s.recv(65536)
        if not b:
            break
        out += b
    s.close()
    head, _, body = out.partition(b"\r\n\r\n")
    lines = head.decode().split("\r\n")
    hdr = {k.lower(): v.strip() for k, _, v in (l.partition(":") for l in lines[1:])}
    return lines[0], hdr, body
PY

PYTHONPATH=$d python3 - "$MPORT" "$d/ctl.txt" <<'PY' || fail "HTTP replies"
import socket, sys, time
from httpask import ask
port, ctl = int(sys.argv[1]), open(sys.argv[2], "rb").read()

for ver in ("1.1", "1.0"):
    st, h, body = ask(port, b"GET /metrics HTTP/" + ver.encode() + b"\r\nHost: x\r\nUser-Agent: t\r\n\r\n")
    assert st == "HTTP/1.1 200 OK", st
    assert h["content-type"] == "text/plain; version=0.0.4; charset=utf-8", h
    assert int(h["content-length"]) == len(body), (h, len(body))
    assert body == ctl, "HTTP/%s body differs from smcrctl metrics" % ver
assert b'smcrd_export_written_bytes_total{export="disk"} 4194304\n' in body
st, h, body = ask(port, b"HEAD /metrics HTTP/1.1\r\n\r\n")
assert st.endswith("200 OK") and body == b"" and int(h["content-length"]) == len(ctl), (st, h)
st, _, _ = ask(port, b"GET /metrics?x=1 HTTP/1.1\n\n")
assert st.endswith("200 OK"), st
for raw, want in ((b"GET / HTTP/1.1\r\n\r\n", "404"), (b"POST /metrics HTTP/1.1\r\n\r\n", "405"),
                  (b"hello\r\n\r\n", "400"), (b"GET /metrics SMTP/1\r\n\r\n", "400"),
                  (b"GET /metrics HTTP/1.1\r\nX: " + b"a" * 5000, "431")):
    st, h, _ = ask(port, raw)
    assert st.split()[1] == want, (raw[:30], st)
print("HTTP: 200 equal to smcrctl metrics (%d bytes), HEAD, 404, 405, 400, 431" % len(ctl))
# A client that asks and never reads does not hold up the next scrape.
s = socket.create_connection(("127.0.0.1", port))
s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
s.sendall(b"GET /metrics HTTP/1.1\r\n\r\n" * 64)
t = time.monotonic()
st, _, body = ask(port, b"GET /metrics HTTP/1.0\r\n\r\n", timeout=2)
assert st.endswith("200 OK") and body == ctl, st
print("scrape beside a client that does not read: %.0f ms" % ((time.monotonic() - t) * 1000))
PY

# Slow loris and silent clients, scrapes and NBD meanwhile (nbdinfo is
# started once the slow ones are in: when the file 'in' exists).
PYTHONPATH=$d python3 - "$MPORT" "$d/in" <<'PY' &
import socket, sys, threading, time
from httpask import ask
port, flag = int(sys.argv[1]), sys.argv[2]
def loris():
    try:
        s = socket.create_connection(("127.0.0.1", port))
        for c in b"GET /metrics HTTP/1.1\r\nX-Slow: " + b"z" * 100:
            s.send(bytes([c]))
            time.sleep(0.2)
    except OSError:
        pass
held = []
def silent():
    held.append(socket.create_connection(("127.0.0.1", port)))
ts = [threading.Thread(target=loris, daemon=True) for _ in range(12)]
for t in ts:
    t.start()
for _ in range(8):
    silent()
time.sleep(0.5)
open(flag, "w").close()
worst = 0
for i in range(5):
    t = time.monotonic()
    st, _, body = ask(port, b"GET /metrics HTTP/1.1\r\n\r\n", timeout=2)
    dt = time.monotonic() - t
    worst = max(worst, dt)
    assert st == "HTTP/1.1 200 OK" and b"smcrd_clients" in body, (st, body[:80])
    assert dt < 2, dt
    time.sleep(0.2)
print("5 scrapes beside 12 slow and 8 silent clients: slowest %.0f ms" % (worst * 1000))
t = time.monotonic()
s = socket.create_connection(("127.0.0.1", port))
s.settimeout(15)
assert s.recv(1) == b""
dt = time.monotonic() - t
assert 3 < dt < 12, dt
print("a silent client closed after %.1f s" % dt)
PY
slow=$!
cleanup_fn "kill $slow 2>/dev/null"
wait_for 20 test -e "$d/in"
t0=$(date +%s%N)
nbdinfo --size "$(uri disk)" >/dev/null || fail "nbdinfo beside the slow clients"
echo "nbdinfo beside the slow clients: $(( ($(date +%s%N) - t0) / 1000000 )) ms"
wait "$slow" || fail "scrapes under slow loris"
stop_smcrd

# The config key; a bad value and a port in use fail the start.
printf 'metrics-listen = 127.0.0.1:%s\n[export disk]\npath = %s\n' "$MPORT2" "$DISK" >"$d/smcrd.conf"
SMCRD_LOG=$d/conf.log start_smcrd -c "$d/smcrd.conf"
answer=$(timeout 10 bash -c 'exec 3<>/dev/tcp/127.0.0.1/'"$MPORT2"'
    printf "GET /metrics HTTP/1.0\r\n\r\n" >&3; head -n 1 <&3') || true
[[ $answer = "HTTP/1.1 200 OK"* ]] || fail "metrics-listen from the config file: '$answer'"
run_prog "$SMCRCTL" send smcrd status | grepq "metrics-listen 127.0.0.1:$MPORT2" ||
    fail "status: no metrics-listen setting"
bport=$BPORT1
for bad in "1:2:3" "127.0.0.1:$MPORT2"; do
    rc=0
    timeout 30 "$SMCRD" -f -l 127.0.0.1 -p "$bport" --export "disk=$DISK" \
        --metrics-listen "$bad" >"$d/bad.out" 2>&1 || rc=$?
    [ "$rc" = 1 ] || { cat "$d/bad.out"; fail "--metrics-listen $bad: exit $rc, want 1"; }
    grepq "metrics-listen $bad: " "$d/bad.out" || { cat "$d/bad.out"; fail "--metrics-listen $bad: no reason"; }
    echo "refused: $(grep "metrics-listen $bad" "$d/bad.out" | sed 's/.*error: //')"
    bport=$BPORT2
done
stop_smcrd
echo PASS
