#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# systemd's protocols without systemd running:
#  - socket activation: systemd-socket-activate owns the port and starts
#    smcrd on the first connection; nbdinfo attaches through it (size and
#    export name right, data written by nbdcopy read back), and smcrd says
#    it listens on the passed socket;
#  - readiness: with NOTIFY_SOCKET, smcrd sends READY=1 with its MAINPID
#    once it serves, and STOPPING=1 on SIGTERM;
#  - LISTEN_FDS with a descriptor that is not a listening socket: exit 1
#    with the reason; LISTEN_PID of another process: ignored (smcrd
#    listens on -p itself);
#  - smcrd.service and smcrd.socket as make install writes them pass
#    systemd-analyze verify (ExecStart pointed at this build's smcrd), and
#    the service's SystemCallFilter lets the io_uring calls, cachestat and
#    mlock through.
# About 4 s.
# smcr-timeout: 60
. "${srcdir:-.}/functions.sh"
. "$srcdir/test-smcrd-lib.sh"
requires systemd-socket-activate --version
requires systemd-analyze --version
requires nbdinfo --version
requires nbdcopy --version

d=$(scratch_dir)
truncate -s 16M "$d/disk.img"
make_random "$d/src" 4

# --- socket activation ---------------------------------------------------------
PORT=$(free_port)
log=$d/activated.log
# (it passes on only the environment named with -E: smcrd's libsmcr path)
env_args=()
[ -n "${LD_LIBRARY_PATH:-}" ] && env_args=(-E LD_LIBRARY_PATH)
systemd-socket-activate -l "127.0.0.1:$PORT" "${env_args[@]}" \
    "$SMCRD" -f --export "disk=$d/disk.img" >"$log" 2>&1 &
act_pid=$!
cleanup_fn "kill -KILL $act_pid 2>/dev/null"
wait_for 10 grep -q "Listening on" "$log"
# Nothing runs yet: smcrd starts with the first client.
grep -q "ready" "$log" && fail "smcrd started before a client came"
json=$(nbdinfo --json "nbd://127.0.0.1:$PORT/disk") || { cat "$log" >&2; fail "nbdinfo through the activated socket failed"; }
python3 - "$json" <<'PY' || fail "nbdinfo: wrong export: $json"
import json, sys
e = json.loads(sys.argv[1])["exports"][0]
assert e["export-name"] == "disk", e
assert e["export-size"] == 16 << 20, e
PY
grep -q "listening for NBD over TCP on 127.0.0.1:$PORT (socket activation)" "$log" ||
    { cat "$log" >&2; fail "smcrd did not say it took the passed socket"; }
# The same process serves the next clients.
nbdcopy "$d/src" "nbd://127.0.0.1:$PORT/disk" || fail "nbdcopy into the activated smcrd failed"
nbdcopy "nbd://127.0.0.1:$PORT/disk" "$d/back" || fail "nbdcopy out of the activated smcrd failed"
cmp <(head -c $((4 << 20)) "$d/back") "$d/src" || fail "data read back differs"
[ "$(grep -c 'smcrd .* ready' "$log")" = 1 ] || fail "smcrd started more than once"
kill -TERM "$act_pid"
wait "$act_pid" || fail "smcrd (socket-activated) exited with status $?"
echo "socket activation: nbdinfo and nbdcopy (4 MiB in and out) through systemd-socket-activate"

# --- readiness notification ----------------------------------------------------
nsock=$d/notify
python3 - "$nsock" >"$d/notes" <<'PY' &
import socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
s.bind(sys.argv[1])
s.settimeout(20)
for _ in range(2):
    print(s.recv(4096).decode().replace("\n", " "), flush=True)
PY
py_pid=$!
cleanup_fn "kill -KILL $py_pid 2>/dev/null"
wait_for 5 test -S "$nsock"
NOTIFY_SOCKET=$nsock start_smcrd --export "disk=$d/disk.img"
wait_for 5 grep -q READY=1 "$d/notes"
grep -q "READY=1 MAINPID=$SMCRD_PID" "$d/notes" || fail "READY=1 without smcrd's pid: $(cat "$d/notes")"
stop_smcrd
wait "$py_pid" || fail "no second notification"
grep -q "STOPPING=1" "$d/notes" || fail "no STOPPING=1: $(cat "$d/notes")"
echo "notify: $(tr '\n' '|' <"$d/notes")"

# --- bad or foreign LISTEN_FDS ------------------------------------------------
rc=0
out=$(LISTEN_FDS=1 bash -c 'exec 3</dev/null; LISTEN_PID=$$ exec "$0" "$@"' \
      "$SMCRD" -f --export "disk=$d/disk.img" 2>&1) || rc=$?
[ "$rc" = 1 ] || fail "fd 3 not a socket: exit $rc, expected 1: $out"
echo "$out" | grepq "socket activation: descriptor 3 is not a socket" ||
    fail "fd 3 not a socket: no reason given: $out"
# Meant for another process: smcrd listens on its own port.
SMCRD_LOG=$d/foreign.log
LISTEN_PID=1 LISTEN_FDS=1 start_smcrd --export "disk=$d/disk.img"
grep -q "listening for NBD over TCP on 127.0.0.1:$PORT$" "$SMCRD_LOG" ||
    fail "with LISTEN_PID of another process smcrd did not listen itself"
stop_smcrd

# --- the units ---------------------------------------------------------------------
mkdir "$d/units"
sed "s|^ExecStart=[^ ]*|ExecStart=$SMCRD|" "$abs_top_builddir/server/smcrd.service" \
    >"$d/units/smcrd.service"
cp "$abs_top_srcdir/server/smcrd.socket" "$d/units/"
grep -q "^ExecStart=$SMCRD --foreground --config /" "$d/units/smcrd.service" ||
    fail "smcrd.service: unexpected ExecStart: $(grep ExecStart "$d/units/smcrd.service")"
out=$(cd "$d/units" && systemd-analyze verify --man=no ./smcrd.socket ./smcrd.service 2>&1) ||
    fail "systemd-analyze verify: $out"
[ -z "$out" ] || fail "systemd-analyze verify complains: $out"
echo "units: systemd-analyze verify clean"
# The system call filter lets through what smcrd needs: the io_uring calls
# and cachestat (named in the unit itself), mlock for RDMA memory and the
# calls of the engine and libibverbs, as this systemd expands the unit's
# groups; other calls get EPERM.
unit=$d/units/smcrd.service
filter=$(sed -n 's/^SystemCallFilter=//p' "$unit" | tr ' ' '\n')
for c in io_uring_setup io_uring_enter io_uring_register cachestat; do
    grep -qx "$c" <<<"$filter" || fail "smcrd.service: SystemCallFilter does not name $c"
done
grep -qx 'SystemCallErrorNumber=EPERM' "$unit" || fail "smcrd.service: no SystemCallErrorNumber=EPERM"
expand_calls() {
    local x
    for x in "$@"; do
        case $x in
        @*) expand_calls $(systemd-analyze syscall-filter "$x" | sed -e 1d -e '/^ *#/d' -e 's/^ *//') ;;
        ?*) echo "$x" ;;
        esac
    done
}
allowed=$(expand_calls $filter | sort -u)
for c in io_uring_setup io_uring_enter io_uring_register mlock mlockall \
         mmap madvise ioctl epoll_wait eventfd2 signalfd4 accept4 sendmsg recvmsg \
         sendfile pread64 pwritev2 clone3 rseq cachestat; do
    grep -qx "$c" <<<"$allowed" || fail "smcrd.service: SystemCallFilter lets no $c through"
done
echo "units: SystemCallFilter allows $(echo "$allowed" | wc -l) calls, io_uring and mlock among them"
echo "PASS: socket activation, readiness, bad and foreign LISTEN_FDS, units"
