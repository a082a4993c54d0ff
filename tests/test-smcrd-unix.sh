#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# NBD on a Unix socket:
#  - smcrd -U PATH (no -l/-p): nbdinfo over nbd+unix:// sees the export,
#    nbdcopy 4 MiB in and out equal, and smcrd listens on no TCP port;
#    SIGTERM removes the socket; its mode is 0777 less the umask;
#  - a stale socket at PATH is replaced; a live one (another smcrd) and a
#    regular file there are refused (exit 1, with the reason);
#  - socket activation over AF_UNIX: libnbd's systemd activation starts
#    smcrd with a Unix socket (LISTEN_FDS), data written and read back;
#  - Unix-socket clients are keyed by uid: 32 silent clients of user
#    nobody hold 16 handshakes (its share), root's client is served;
#  - unix = PATH in the config file, with port = P: both listeners.
# About 4 s.
# smcr-timeout: 120
. "${srcdir:-.}/functions.sh"
. "$srcdir/test-smcrd-lib.sh"
requires nbdinfo --version
requires nbdcopy --version
requires ss -V

d=$(scratch_dir)
sock=$d/nbd.sock
truncate -s 8M "$d/disk.img"
make_random "$d/src" 4
uuri="nbd+unix:///disk?socket=$sock"
pids=()
cleanup_fn 'for p in "${pids[@]}"; do kill -KILL "$p" 2>/dev/null; done'

start_unix() {    # LOG ARGS...: smcrd in the foreground; sets UPID
    local log=$1; shift
    "$SMCRD" -f "$@" >"$log" 2>&1 &
    UPID=$!
    pids+=("$UPID")
}
stop_unix() {
    kill -TERM "$UPID"
    wait "$UPID" || fail "smcrd exited $? on SIGTERM"
}
unix_served() { nbdinfo --size "$uuri" >/dev/null 2>&1; }

# --- -U PATH alone ----------------------------------------------------------------
um=$(umask)
umask 027
start_unix "$d/u.log" -U "$sock" -e "disk=$d/disk.img"
umask "$um"
wait_for 15 unix_served
# The socket's mode: 0777 less the umask (smcrd(8)).
mode=$(stat -c %a "$sock")
[ "$mode" = 750 ] || fail "socket mode $mode under umask 027 (smcrd(8): 0777 less the umask)"
[ "$(nbdinfo --size "$uuri")" = 8388608 ] || fail "nbdinfo: wrong size over the Unix socket"
nbdcopy "$d/src" "$uuri" || fail "nbdcopy in"
nbdcopy "$uuri" "$d/back" || fail "nbdcopy out"
cmp <(head -c $((4 << 20)) "$d/back") "$d/src" || fail "data read back over the Unix socket differs"
ss -Hltnp | grep -q "pid=$UPID," && fail "smcrd -U listens on TCP too: $(ss -Hltnp | grep "pid=$UPID,")"
grep -q "listening for NBD on Unix socket $sock" "$d/u.log" || fail "no listening line"
# Another smcrd on the same live socket: refused.
rc=0
out=$(timeout 10 "$SMCRD" -f -U "$sock" -e "disk=$d/disk.img" 2>&1) || rc=$?
[ "$rc" = 1 ] || fail "second smcrd on a live socket: exit $rc: $out"
echo "$out" | grepq "in use by another server" || fail "no reason: $out"
unix_served || fail "the first smcrd lost its socket"
stop_unix
[ -e "$sock" ] && fail "socket left behind after SIGTERM"
echo "-U: nbdinfo and nbdcopy 4 MiB equal, no TCP listener, a live socket kept, removed at exit"

# --- a stale socket is replaced; a regular file is not -------------------------
python3 -c 'import socket, sys; s = socket.socket(socket.AF_UNIX); s.bind(sys.argv[1])' "$sock"
[ -S "$sock" ] || fail "test setup: no stale socket"
start_unix "$d/stale.log" -U "$sock" -e "disk=$d/disk.img"
wait_for 15 unix_served
stop_unix
echo data >"$d/file"
rc=0
out=$(timeout 10 "$SMCRD" -f -U "$d/file" -e "disk=$d/disk.img" 2>&1) || rc=$?
[ "$rc" = 1 ] || fail "-U on a regular file: exit $rc: $out"
echo "$out" | grepq "exists and is not a socket" || fail "no reason: $out"
[ "$(cat "$d/file")" = data ] || fail "the regular file was touched"
echo "stale socket replaced; a regular file refused and kept"

# --- socket activation with a Unix socket (libnbd) ---------------------------
if [ -n "$NBD_PYTHON" ]; then
    nbd_python "$SMCRD" "$d/disk.img" <<'PY' || fail "libnbd socket activation over AF_UNIX"
import nbd, os, sys
h = nbd.NBD()
h.set_export_name("disk")
h.connect_systemd_socket_activation([sys.argv[1], "-f", "-e", "disk=" + sys.argv[2]])
assert h.get_size() == 8 << 20, h.get_size()
data = os.urandom(200000)
h.pwrite(data, 1 << 20)
assert h.pread(len(data), 1 << 20) == data
h.shutdown()
print("socket activation over AF_UNIX: 200000 bytes written and read back")
PY
else
    echo "(no python3 nbd module: socket activation over AF_UNIX not tried)"
fi

# --- Unix-socket clients keyed by uid ------------------------------------------------
# 32 silent connections of user nobody hold its share of the handshakes
# (16 of 32) and no more; root's client is another key (uid 0): served.
# (the system's python3: a per-user one, e.g. under /root, is not nobody's)
if id nobody >/dev/null 2>&1 && setpriv --version >/dev/null 2>&1 && [ "$(id -u)" = 0 ] &&
   [ -x /usr/bin/python3 ]; then
    # The socket in a directory of its own: nobody cannot reach into the
    # scratch tree (mktemp's 0700).
    top=$(mktemp -d /tmp/smcrbd-unix.XXXXXX)
    cleanup_fn "rm -rf '$top'"
    chmod 0755 "$top"
    usock=$top/nbd.sock
    um=$(umask)
    umask 0
    start_unix "$d/uid.log" -U "$usock" -e "disk=$d/disk.img" -v
    umask "$um"
    wait_for 15 test -S "$usock"
    setpriv --reuid=nobody --regid="$(id -g nobody)" --clear-groups /usr/bin/python3 -c '
import socket, sys, time
socks = []
for _ in range(32):
    s = socket.socket(socket.AF_UNIX)
    s.connect(sys.argv[1])
    socks.append(s)
time.sleep(1)
n = 0
for s in socks:
    try:
        n += len(s.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT)) > 0
    except OSError:
        pass
print("nobody holds", n, flush=True)
time.sleep(30)' "$usock" >"$d/nobody" &
    pids+=($!)
    wait_for 15 grep -q '^nobody holds' "$d/nobody"
    cat "$d/nobody"
    grep -q '^nobody holds 16$' "$d/nobody" || fail "nobody's silent clients: $(cat "$d/nobody"), want 16"
    uuri2="nbd+unix:///disk?socket=$usock"
    nbdinfo --size "$uuri2" >/dev/null || fail "root's client not served beside nobody's 16"
    grep -q "uid $(id -u nobody) has 16 clients in the handshake" "$d/uid.log" ||
        fail "no refusal of uid $(id -u nobody) logged"
    grep -q "client .*: export 'disk'" "$d/uid.log" || fail "root's client not logged"
    kill "${pids[-1]}" 2>/dev/null
    stop_unix
    echo "Unix socket by uid: nobody held 16 of 32 handshakes, root (uid 0) served"
else
    echo "(not root, or no nobody, setpriv or /usr/bin/python3: Unix-socket keys by uid not tried)"
fi

# --- config file: unix and port ------------------------------------------------------
port=$(free_port)
printf 'unix = %s\nlisten = 127.0.0.1\nport = %s\n[export disk]\npath = %s\n' "$sock" "$port" \
    "$d/disk.img" >"$d/smcrd.conf"
start_unix "$d/conf.log" --config "$d/smcrd.conf"
wait_for 15 unix_served
PORT=$port
wait_for 15 probe 127.0.0.1 "$port" list
stop_unix
echo "config: unix and port both served"
echo "PASS: NBD on a Unix socket, socket activation over AF_UNIX"
