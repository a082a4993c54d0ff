#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# The control socket against a hostile local client: empty and blank
# command lines, a line cut short, an over-long line; the daemon must
# answer the next good command each time.  15 silent clients (connected, sending nothing) and one that never reads its
# answer do not hold up a real command (one at a time: 30 s); 20 silent
# ones (a full table of 16 and more) hold it for their 2 s at most.
# smcr-timeout: 300
. "${srcdir:-.}/functions.sh"
. "$srcdir/test-smcrd-lib.sh"
. "$srcdir/test-client-lib.sh"
requires python3 --version

d=$(scratch_dir)
start_smcrd_disk 1M
sock=$SMCR_CTL_DIR/smcrd.$SMCRD_PID.sock
wait_for 10 test -S "$sock"

# send BYTES: writes them to the control socket, prints the answer.
send() { ctl_ask "$sock" "$1"; }

alive() {
    kill -0 "$SMCRD_PID" 2>/dev/null || { tail -n 30 "$SMCRD_LOG" >&2; fail "smcrd died after $1"; }
    send 'help\n' | grepq '^commands: status' || fail "no answer to help after $1"
}

for line in '\n' '\r\n' '   \n' '\r\r \n' '' ' ' '\r'; do
    out=$(send "$line") || fail "send '$line'"
    [ -z "$out" ] || fail "an answer to a blank line '$line': $out"
    alive "blank line '$line'"
done
# The settings as in effect (smcrd_settings[]): given and defaults.
send 'status\n' | grepq "^settings: listen 127.0.0.1, port $PORT, .*queue-depth 128, .*fixed-buffers yes, .*max-handshakes-per-address auto, .*log-file -, log-level auto$" ||
    fail "status: no settings line"
send 'status-json\n' | grepq '"settings": *{ *"listen": *"127\.0\.0\.1", *"port": *"'"$PORT"'", *"unix": *"-", *"smcr-port": *"-", *"queue-depth": *128,.*"direct": *false,' ||
    fail "status-json: no settings"
# A line longer than the daemon reads, and bytes that are not text.
send "$(printf 'x%.0s' $(seq 1 2000))\\n" >/dev/null || true
alive "an over-long line"
send 'status\x00junk\n' >/dev/null || true
alive "a NUL in a line"
send 'stat\xff\xfe\n' | grepq "unknown command" || fail "binary command not refused"
alive "binary bytes"
# Silent clients and a client that does not read a large answer.
python3 - "$sock" >"$d/silent" <<'PY' &
import socket, sys, time
socks = []
for _ in range(15):
    s = socket.socket(socket.AF_UNIX)
    s.connect(sys.argv[1])
    socks.append(s)
s = socket.socket(socket.AF_UNIX)
s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
s.connect(sys.argv[1])
s.sendall(b"status\n")
socks.append(s)
print("holding", len(socks), flush=True)
time.sleep(4)
PY
silent=$!
cleanup_fn "kill $silent 2>/dev/null"
wait_for 5 grep -q '^holding 16$' "$d/silent"
t0=$(date +%s%N)
send 'help\n' | grepq '^commands: status' || fail "no answer beside 16 stuck clients"
ms=$(( ($(date +%s%N) - t0) / 1000000 ))
echo "a command beside 15 silent clients and one not reading: answered in $ms ms"
# One at a time, the 15 silent ones alone would hold it 30 s (2 s each).
[ "$ms" -lt 15000 ] || fail "answered after $ms ms: the stuck clients held it"
wait "$silent"
alive "stuck clients"
# More silent clients than it serves at once (16; 4 more wait in the
# backlog): once the first 16 are dropped, 2 s on, it takes the others
# and the command.  (It polled only its stop descriptor after dropping
# a full table: no answer ever.)
ctl_flood "$sock" 20
echo "a command behind 20 silent clients: answered in $flood_ms ms"
alive "20 silent clients"
stop_smcrd
