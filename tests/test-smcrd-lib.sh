# SPDX-License-Identifier: BSD-3-Clause
# Shared helpers of the smcrd shell tests (test-smcrd-*.sh).  Source it after
# functions.sh.  Not a test itself.
#
#   start_smcrd ARGS...   starts smcrd in the foreground (under valgrind with
#                         SMCR_VALGRIND=1) on 127.0.0.1 and a free port; sets
#                         PORT, SMCRD_PID, SMCRD_LOG; waits until it serves
#   stop_smcrd            SIGTERM, then checks the exit status (0)
#   ctl_ask SOCK BYTES    BYTES to a control socket, prints the answer
#   uri NAME              nbd://127.0.0.1:$PORT/NAME
#   probe ARGS...         tests/nbd-probe against the server
#   nbd_python            runs python3 (with libnbd's nbd module) on stdin
#   requires_nbd_python   skips the test without it
#   make_random FILE MiB  random file
#   log_has PATTERN       grep the smcrd log
#   nfds, rss_kib         smcrd's open descriptors, its VmRSS in KiB
#   HOSTILE               tests/hostile-clients.py (misbehaving clients)
#   requires_src_addr ADDR WHY
#                         skips the test unless a socket binds ADDR (a
#                         loopback source address; WHY: which are wanted)

: "${abs_builddir:=$abs_top_builddir/tests}"

SMCRD=$abs_top_builddir/server/smcrd
# A libtool wrapper script: run the real binary (valgrind must see it).
if [ -x "$abs_top_builddir/server/.libs/smcrd" ] && head -c 2 "$SMCRD" | grepq '#!'; then
    SMCRD=$abs_top_builddir/server/.libs/smcrd
    export LD_LIBRARY_PATH="$abs_top_builddir/smcr/.libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
fi
PROBE=$abs_builddir/nbd-probe
HOSTILE=$srcdir/hostile-clients.py
[ -x "$SMCRD" ] || fail "smcrd not built ($SMCRD)"

# Seconds to wait for smcrd to come up (valgrind is slow to start).
if [ "${SMCR_VALGRIND:-0}" = 1 ]; then START_WAIT=60; else START_WAIT=15; fi

served() {
    "$PROBE" 127.0.0.1 "$PORT" list >/dev/null 2>&1
}

start_smcrd() {
    local i
    PORT=$(free_port)
    SMCRD_LOG=${SMCRD_LOG:-$(scratch_dir)/smcrd.log}
    # Not through run_prog: $! must be smcrd itself (or its valgrind).
    "${VALGRIND[@]}" "$SMCRD" -f -l 127.0.0.1 -p "$PORT" "$@" >>"$SMCRD_LOG" 2>&1 &
    SMCRD_PID=$!
    cleanup_fn "kill -KILL $SMCRD_PID 2>/dev/null"
    for (( i=0; i<START_WAIT*10; i++ )); do
        served && return 0
        kill -0 "$SMCRD_PID" 2>/dev/null || { cat "$SMCRD_LOG" >&2; fail "smcrd exited at start"; }
        sleep 0.1
    done
    cat "$SMCRD_LOG" >&2
    fail "smcrd did not come up on port $PORT"
}

# ctl_ask SOCK BYTES: BYTES (backslash escapes as in Python: '\n', '\x00')
# to the control socket SOCK, its end of input, then the answer on stdout
# (python3).
ctl_ask() {
    python3 - "$1" "$2" <<'PY'
import socket, sys
s = socket.socket(socket.AF_UNIX)
s.settimeout(10)
s.connect(sys.argv[1])
s.sendall(sys.argv[2].encode().decode("unicode_escape").encode("latin-1"))
s.shutdown(socket.SHUT_WR)
out = b""
while True:
    b = s.recv(65536)
    if not b:
        break
    out += b
sys.stdout.write(out.decode(errors="replace"))
PY
}

stop_smcrd() {
    local rc=0
    kill -TERM "$SMCRD_PID"
    wait "$SMCRD_PID" || rc=$?
    if [ "$rc" != 0 ]; then
        tail -n 40 "$SMCRD_LOG" >&2
        fail "smcrd exited with status $rc"
    fi
}

uri() { echo "nbd://127.0.0.1:$PORT/$1"; }

probe() { "$PROBE" "$@"; }

NBD_PYTHON=
for p in python3 /usr/bin/python3; do
    if command -v "$p" >/dev/null 2>&1 && "$p" -c 'import nbd' 2>/dev/null; then
        NBD_PYTHON=$p
        break
    fi
done

requires_nbd_python() {
    [ -n "$NBD_PYTHON" ] || skip "requires python3 with libnbd's nbd module (python3-libnbd)"
}

nbd_python() { "$NBD_PYTHON" - "$@"; }

make_random() {
    head -c "$(( $2 * 1024 * 1024 ))" /dev/urandom >"$1"
}

log_has() { grep -q -- "$1" "$SMCRD_LOG"; }

nfds() { ls "/proc/$SMCRD_PID/fd" | wc -l; }
rss_kib() { awk '/^VmRSS:/ { print $2 }' "/proc/$SMCRD_PID/status"; }

requires_src_addr() {
    python3 -c 'import socket, sys; s=socket.socket(); s.bind((sys.argv[1], 0))' "$1" 2>/dev/null ||
        skip "cannot bind $1 ($2)"
}

# Smaller data under valgrind.
scale_mib() {
    if [ "${SMCR_VALGRIND:-0}" = 1 ]; then echo "$2"; else echo "$1"; fi
}
