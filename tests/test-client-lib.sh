# SPDX-License-Identifier: BSD-3-Clause
# Shared helpers of the client shell tests (test-client-*.sh).  Source it
# after functions.sh and test-smcrd-lib.sh.  Not a test itself.
#
#   restart_smcrd ARGS...   starts smcrd again on the same $PORT
#   kill_smcrd              SIGKILL (a crash), and reaps it
#   start_nbdkit ARGS...    nbdkit with our plugin (build tree) on a unix
#                           socket $NBDKIT_SOCK, in the foreground; sets
#                           NBDKIT_PID and NBDKIT_LOG
#   stop_nbdkit             SIGTERM and wait
#   nbdkit_uri              nbd+unix:///?socket=$NBDKIT_SOCK
#   nbdkit_roundtrip WHAT SRC BACK IMAGE
#                           nbdcopy SRC into nbdkit, the export back into
#                           BACK; fails (WHAT: ...) unless BACK and IMAGE
#                           (the export's file) begin with SRC
#   nbdkit_wait_up N [SECS] wait until N of nbdkit's NBD connections are up
#                           (a lost one comes back after its backoff, up
#                           to 5 s, or 250 ms if refused; longer on a
#                           busy machine)
#   ctl_flood SOCK N        N silent clients on a control socket (more
#                           than the 16 it serves at once), then 'help'
#                           on one more: fails unless it is answered
#                           within 10 s (the silent ones are dropped
#                           after 2 s); prints the time in $flood_ms
#   SMCRCTL, SMCR_FUSE, NBDC_IO, MEMSERVER   our programs

SMCRCTL=$abs_top_builddir/client/smcrctl
SMCR_FUSE=$abs_top_builddir/client/smcr-fuse
NBDC_IO=$abs_builddir/nbdc-io
MEMSERVER=$abs_builddir/nbd-memserver
PLUGIN=$abs_top_builddir/client/.libs/nbdkit-smcr-plugin.so
# Our installed programs are libtool wrapper scripts in the build tree:
# run the real binaries (valgrind must see them), with the library path.
for _v in SMCRCTL SMCR_FUSE; do
    _p=${!_v}
    if [ -x "$(dirname "$_p")/.libs/$(basename "$_p")" ] && head -c 2 "$_p" | grepq '#!'; then
        printf -v "$_v" '%s' "$(dirname "$_p")/.libs/$(basename "$_p")"
    fi
done
export LD_LIBRARY_PATH="$abs_top_builddir/smcr/.libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
# Control sockets of this test only.
export SMCR_CTL_DIR=${SMCR_CTL_DIR:-$(scratch_dir)/ctl}

restart_smcrd() {
    "${VALGRIND[@]}" "$SMCRD" -f -l 127.0.0.1 -p "$PORT" "$@" >>"$SMCRD_LOG" 2>&1 &
    SMCRD_PID=$!
    cleanup_fn "kill -KILL $SMCRD_PID 2>/dev/null"
    wait_for "$START_WAIT" served
}

kill_smcrd() {
    kill -KILL "$SMCRD_PID"
    wait "$SMCRD_PID" 2>/dev/null || true
}

start_nbdkit() {
    NBDKIT_SOCK=${NBDKIT_SOCK:-$(scratch_dir)/nbdkit.sock}
    NBDKIT_LOG=${NBDKIT_LOG:-$(scratch_dir)/nbdkit.log}
    [ -f "$PLUGIN" ] || fail "plugin not built ($PLUGIN)"
    rm -f "$NBDKIT_SOCK"
    # A plugin built with --enable-sanitizers needs the ASan runtime first
    # in nbdkit (which is not built with it); nbdkit's own exit-time
    # allocations are not ours to report.
    local preload=
    if readelf -d "$PLUGIN" 2>/dev/null | grepq 'NEEDED.*libasan'; then
        preload=$(gcc -print-file-name=libasan.so)
        NBDKIT_ASAN=1
    fi
    LD_PRELOAD=${preload:+$preload${LD_PRELOAD:+:$LD_PRELOAD}} \
    ASAN_OPTIONS=${preload:+detect_leaks=0} \
        nbdkit -f -v -U "$NBDKIT_SOCK" "$PLUGIN" "$@" >>"$NBDKIT_LOG" 2>&1 &
    NBDKIT_PID=$!
    cleanup_fn "kill -KILL $NBDKIT_PID 2>/dev/null"
    local i
    for (( i=0; i<START_WAIT*10; i++ )); do
        [ -S "$NBDKIT_SOCK" ] && return 0
        kill -0 "$NBDKIT_PID" 2>/dev/null || { tail -n 30 "$NBDKIT_LOG" >&2; fail "nbdkit exited at start"; }
        sleep 0.1
    done
    tail -n 30 "$NBDKIT_LOG" >&2
    fail "nbdkit did not come up"
}

stop_nbdkit() {
    local rc=0 i
    if grep -Eq 'ERROR: (Address|Leak)Sanitizer|runtime error:' "$NBDKIT_LOG"; then
        grep -E -A 20 'Sanitizer|runtime error:' "$NBDKIT_LOG" | head -n 40 >&2
        fail "sanitizer report in nbdkit's log"
    fi
    kill -TERM "$NBDKIT_PID"
    # With the ASan runtime preloaded (sanitizer builds), nbdkit can hang
    # in libp11-kit's exit handler (freelocale waiting for the setlocale
    # lock) after it has unloaded our plugin; seen with a plugin built
    # without sanitizers too.  The plugin's part is over by then.
    for (( i=0; i<200; i++ )); do
        kill -0 "$NBDKIT_PID" 2>/dev/null || break
        sleep 0.1
    done
    if kill -0 "$NBDKIT_PID" 2>/dev/null && [ -n "${NBDKIT_ASAN:-}" ] &&
        grep -q 'debug: smcr: unload plugin' "$NBDKIT_LOG"; then
        echo "note: nbdkit (ASan runtime preloaded) hung after unloading the plugin; killed it"
        kill -KILL "$NBDKIT_PID"
        wait "$NBDKIT_PID" 2>/dev/null || true
        return 0
    fi
    if kill -0 "$NBDKIT_PID" 2>/dev/null; then
        # Hung with the plugin loaded: show where, then end it.
        tail -n 30 "$NBDKIT_LOG" >&2
        backtraces "$NBDKIT_PID" >&2
        kill -KILL "$NBDKIT_PID"
        wait "$NBDKIT_PID" 2>/dev/null || true
        fail "nbdkit did not exit within 20 s of SIGTERM"
    fi
    wait "$NBDKIT_PID" || rc=$?
    [ "$rc" = 0 ] || { tail -n 30 "$NBDKIT_LOG" >&2; fail "nbdkit exited with status $rc"; }
}

nbdkit_uri() { echo "nbd+unix:///?socket=$NBDKIT_SOCK"; }

nbdkit_roundtrip() {
    local what=$1 src=$2 back=$3 img=$4 n
    n=$(stat -c %s "$src")
    nbdcopy "$src" "$(nbdkit_uri)" || fail "$what: nbdcopy in"
    nbdcopy "$(nbdkit_uri)" "$back" || fail "$what: nbdcopy out"
    cmp <(head -c "$n" "$back") "$src" || fail "$what: data read back differs"
    cmp <(head -c "$n" "$img") "$src" || fail "$what: the image differs"
}

_nbdkit_up() {
    "$SMCRCTL" --json status nbdkit-smcr 2>/dev/null | python3 -c '
import json, sys
n = json.load(sys.stdin)[0]["sections"]["nbd"]
sys.exit(0 if n["connections_up"] >= int(sys.argv[1]) else 1)' "$1"
}
nbdkit_wait_up() { wait_for "${2:-60}" _nbdkit_up "$1"; }

# A field of nbdc-io's "result" line:  result_field FILE NAME
result_field() {
    sed -n "s/^result .*\<$2 \([0-9][0-9]*\).*/\1/p" "$1"
}

# smcrd_limit NAME: a counter of the "limits" part of smcrd's status
# (smcrctl --json status smcrd).
smcrd_limit() {
    "$SMCRCTL" --json status smcrd | python3 -c '
import json, sys
print(json.load(sys.stdin)[0]["sections"]["smcrd"]["limits"][sys.argv[1]])' "$1"
}

# hold_handshakes N SECS: N clients of tests/hostile-clients.py silent in
# smcrd's handshake on $PORT for SECS seconds, in the background (pid in
# $held); returns once all N are connected.
hold_handshakes() {
    python3 "$HOSTILE" hold "$PORT" "$1" "$2" >"$d/hold" &
    held=$!
    cleanup_fn "kill $held 2>/dev/null"
    wait_for 5 grep -q "^holding $1\$" "$d/hold"
}

ctl_flood() {
    local out
    out=$(python3 - "$1" "$2" <<'PY'
import socket, struct, sys, time
path, n = sys.argv[1], int(sys.argv[2])
socks = []
for _ in range(n):
    s = socket.socket(socket.AF_UNIX)
    s.connect(path)
    socks.append(s)
t0 = time.monotonic()
s = socket.socket(socket.AF_UNIX)
# A blocking connect waits (up to SO_SNDTIMEO) for room in the listen
# backlog, where the silent ones may still sit on a busy machine; with a
# Python timeout it would fail at once with EAGAIN.
s.setsockopt(socket.SOL_SOCKET, socket.SO_SNDTIMEO, struct.pack("ll", 10, 0))
s.connect(path)
s.settimeout(10)
s.sendall(b"help\n")
out = b""
try:
    while True:
        b = s.recv(65536)
        if not b:
            break
        out += b
except socket.timeout:
    pass
print(int((time.monotonic() - t0) * 1000), out.split(b"\n")[0].decode(errors="replace"))
PY
) || fail "ctl_flood: $1: python failed"
    flood_ms=${out%% *}
    case "$out" in
    *" commands: "*) ;;
    *) fail "no answer on $1 after $2 silent clients ($flood_ms ms): '${out#* }'" ;;
    esac
}
