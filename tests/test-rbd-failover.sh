#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# Two gateways on one RBD image with the export option 'exclusive', both
# started up front, over NBD/TCP on the host.  A gateway takes the image's
# exclusive lock when a client arrives, breaking the old owner's (Ceph
# blocklists it); a fenced gateway closes its connections unanswered and
# reconnects to the cluster when the next client arrives:
#  1. a live gateway cut off: A serves a client (an open qemu-io session),
#     a client of B makes B take the image; A's next write on its open
#     connection fails and is not in the image; then a new client of A
#     makes A take it back.  Both with a config file that turns librbd's
#     blocklist on a broken lock off (smcrd turns it back on: fencing).
#     A gateway whose Ceph user may not blocklist takes nothing from A:
#     its client is closed, A is not fenced;
#  2. under the client library's I/O (nbdc-io: every byte checked, both
#     gateway addresses, requests resent after a reconnect) the active
#     gateway is SIGKILLed SMCR_RBD_KILLS times (default 3).  The test
#     starts no gateway: each runs under a restart loop (a service
#     manager's Restart=), so the killed one comes back passive and the
#     other, which the client reaches, takes over by itself.  No error, no
#     bad byte, the other gateway holds the lock (and serves) within 10 s
#     of each kill;
#  3. the active gateway is frozen (SIGSTOP) under the same I/O: the client
#     times out, moves to the other, which fences the frozen one; resumed,
#     the frozen one writes nothing more (nbdc-io reads every block back);
#  4. (after 1) the cluster does not answer (the mon frozen): the clients of
#     a gateway that cannot take the lock are closed after its lock-timeout,
#     and its handshake threads stay free.
# smcr-timeout: 900
. "${srcdir:-.}/functions.sh"
. "$srcdir/test-smcrd-lib.sh"
. "$srcdir/test-client-lib.sh"
. "$srcdir/ceph-lib.sh"
grepq -x '#define HAVE_LIBRBD 1' "$abs_top_builddir/config.h" </dev/null ||
    skip "smcrd built without librbd (librbd-dev missing at configure)"
requires qemu-io --version
# CI runs the host tests twice; the ASan pass has test-rbd.sh for the RBD
# requests and test-client-reconnect.sh for the client's resends.
readelf -d "$SMCRD" 2>/dev/null | grepq 'NEEDED.*libasan' &&
    [ -z "${SMCR_RBD_KILLS:-}" ] &&
    skip "ASan build: runs in the plain build only (CI time; SMCR_RBD_KILLS=N runs it here too)"
[ -x "$NBDC_IO" ] || fail "nbdc-io not built"
kills=${SMCR_RBD_KILLS:-3}

d=$(scratch_dir)
start_ceph "$d/ceph"
rbdc() { timeout 120 rbd -c "$CEPH_CONF" --id "$CEPH_ID" "$@"; }
rbdc create --size 64M rbd/ha || fail "rbd create"
rbdc create --size 16M rbd/fence || fail "rbd create"
opts="ceph-conf=$CEPH_CONF,ceph-id=$CEPH_ID,exclusive"

# gateway NAME PORT EXPORT [SMCRD-ARG...]: smcrd under a restart loop, its
# pid in $d/NAME.pid, its log $d/NAME.log; up when the port answers.
gateway() {
    local name=$1 port=$2 ex=$3
    shift 3
    (
        trap - EXIT
        while [ ! -e "$d/stop" ]; do
            "$SMCRD" -f -l 127.0.0.1 -p "$port" --export "$ex" "$@" >>"$d/$name.log" 2>&1 &
            echo $! >"$d/$name.pid"
            { wait $!; } 2>/dev/null
            sleep 0.2
        done
    ) &
    cleanup_fn "touch $d/stop; kill -KILL $! 2>/dev/null; kill -KILL \$(cat $d/$name.pid) 2>/dev/null"
    disown $!
    PORT=$port wait_for "$START_WAIT" served
}
gw_pid() { cat "$d/$1.pid"; }
took() { grep -c 'took the exclusive lock' "$d/$1.log" || true; }
took_more() { [ "$(took "$1")" -gt "$2" ]; }
qwrite() { qemu-io -f raw -c "write -P $2 0 64k" "nbd://127.0.0.1:$1/fence" >"$d/q.txt" 2>&1 &&
           ! grepq -i 'error\|failed' "$d/q.txt"; }

# --- 1: a live gateway cut off ----------------------------------------------------
# Without a blocklist, a broken lock's old owner would go on writing.
{ cat "$CEPH_CONF"; printf '[client]\nrbd blocklist on break lock = false\n'; } >"$d/nobl.conf"
fopts="ceph-conf=$d/nobl.conf,ceph-id=$CEPH_ID,exclusive"
pa=$(free_port) pb=$(free_port)
gateway fa "$pa" "fence=rbd:rbd/fence,$fopts"
gateway fb "$pb" "fence=rbd:rbd/fence,$fopts"
[ "$(took fa)$(took fb)" = 00 ] || fail "a gateway took the lock before any client came"
mkfifo "$d/qa.in"
qemu-io -f raw "nbd://127.0.0.1:$pa/fence" <"$d/qa.in" >"$d/qa.out" 2>&1 &
qa=$!
cleanup_fn "kill -KILL $qa 2>/dev/null"
exec 7>"$d/qa.in"
echo 'write -P 0x11 0 64k' >&7
wait_for 60 grep -q 'wrote 65536/65536' "$d/qa.out"
[ "$(took fa)" = 1 ] || fail "gateway A did not take the lock for its client"
qwrite "$pb" 0x22 || { cat "$d/q.txt" >&2; fail "write via gateway B"; }
grepq 'broke the exclusive lock' "$d/fb.log" || fail "gateway B did not break A's lock"
echo 'write -P 0x33 0 64k' >&7
echo 'quit' >&7
exec 7>&-
rc=0; timeout 120 tail --pid="$qa" -f /dev/null || rc=$?
[ "$rc" = 0 ] || fail "qemu-io on gateway A did not end"
[ "$(grep -c 'wrote 65536/65536' "$d/qa.out")" = 1 ] &&
    grepq -i 'error\|failed' "$d/qa.out" ||
    { cat "$d/qa.out" >&2; fail "gateway A still wrote after B fenced it"; }
grepq 'fenced' "$d/fa.log" || fail "gateway A did not log its fencing"
qemu-io -f raw -r -c 'read -P 0x22 0 64k' "nbd://127.0.0.1:$pb/fence" >"$d/q.txt" 2>&1 &&
    ! grepq -i 'verification failed\|error' "$d/q.txt" || { cat "$d/q.txt" >&2; fail "data after fencing"; }
# A new client of A: A reconnects to the cluster and takes the image back.
qwrite "$pa" 0x44 || { cat "$d/q.txt" "$d/fa.log" >&2; fail "gateway A after its fencing"; }
grepq 'reconnected to the cluster after the fence' "$d/fa.log" || fail "A did not reconnect"
qemu-io -f raw -r -c 'read -P 0x44 0 64k' "nbd://127.0.0.1:$pa/fence" >"$d/q.txt" 2>&1 &&
    ! grepq -i 'verification failed\|error' "$d/q.txt" || { cat "$d/q.txt" >&2; fail "data via A again"; }
echo "1: gateway A, cut off by B's takeover, failed its next write; A took the image back"
# No fence, no takeover: a gateway whose user lacks 'osd blocklist'.
ceph_admin auth get-or-create client.nobl mon 'allow r' osd 'profile rbd pool=rbd' \
    -o "$d/ceph/client.nobl.keyring" >/dev/null || fail "ceph auth get-or-create client.nobl"
fenced=$(grep -c 'fenced' "$d/fa.log" || true)
pn=$(free_port)
gateway fn "$pn" "fence=rbd:rbd/fence,ceph-conf=$CEPH_CONF,ceph-id=nobl,exclusive"
! qwrite "$pn" 0x66 || { cat "$d/fn.log" >&2; fail "a gateway that cannot fence A served a write"; }
grepq 'breaking the exclusive lock of .*: Permission denied' "$d/fn.log" &&
    [ "$(took fn)" = 0 ] || { cat "$d/fn.log" >&2; fail "gateway N: no refused break logged, or a lock taken"; }
qwrite "$pa" 0x77 && [ "$(grep -c 'fenced' "$d/fa.log" || true)" = "$fenced" ] ||
    { cat "$d/q.txt" "$d/fa.log" >&2; fail "gateway A after N's refused break"; }
echo "1: gateway N, not allowed to blocklist, took no lock; A still serves, not fenced"

# --- 4 (here, on the same image): the cluster does not answer ----------------------
# The mon frozen, so breaking A's lock (a blocklist) gets no answer: four
# clients of a third gateway (lock-timeout=2, four handshakes at most) are
# closed after 2 s, all of them, and a file export of that gateway still
# serves while the mon is frozen (the stuck attempt holds no handshake
# thread); the mon resumed, the late lock is released (no client waits),
# and a new client of it takes the image.
pc=$(free_port)
truncate -s 1M "$d/plain.img"
gateway fc "$pc" "fence=rbd:rbd/fence,$opts,lock-timeout=2" --max-handshakes 4 \
    --max-handshakes-per-address 0 --export "plain=$d/plain.img"
mon=${_ceph_pids[0]}
kill -STOP "$mon"
cleanup_fn "kill -CONT $mon 2>/dev/null"
t0=$(date +%s%N) qc=()
for i in 1 2 3 4; do
    timeout 60 qemu-io -f raw -c 'write -P 0x55 0 64k' "nbd://127.0.0.1:$pc/fence" \
        >"$d/qc$i.txt" 2>&1 &
    qc+=($!)
done
wait "${qc[@]}" || true
stuck_ms=$(( ($(date +%s%N) - t0) / 1000000 ))
for i in 1 2 3 4; do
    ! grepq 'wrote 65536/65536' "$d/qc$i.txt" || fail "a client wrote with the mon frozen"
done
n=$(grep -c 'within 2000 ms (lock-timeout): closed, the gateway stays passive' "$d/fc.log" ||
    true)
[ "$n" = 4 ] || { cat "$d/fc.log" >&2; fail "$n of 4 clients closed on the lock-timeout"; }
[ "$stuck_ms" -lt 30000 ] || fail "the clients waited $stuck_ms ms for a 2 s lock-timeout"
qemu-io -f raw -c 'write -P 0x66 0 64k' -c 'read -P 0x66 0 64k' "nbd://127.0.0.1:$pc/plain" \
    >"$d/q.txt" 2>&1 && ! grepq -i 'verification failed\|error' "$d/q.txt" ||
    { cat "$d/q.txt" "$d/fc.log" >&2; fail "file export with the mon frozen"; }
[ "$(took fc)" = 0 ] || fail "gateway C took the lock with the mon frozen"
kill -CONT "$mon"
# The attempt still under way ends once the mon answers; with no client
# left waiting, the lock it took goes back.
wait_for 120 grepq 'released it, still passive' "$d/fc.log"
[ "$(took fc)" = 0 ] || fail "gateway C kept the lock its clients gave up on"
wait_for 120 qwrite "$pc" 0x77 || { cat "$d/q.txt" "$d/fc.log" >&2; fail "gateway C after the mon resumed"; }
grep 'lock\|passive' "$d/fc.log" | sed 's/^/4: gateway C: /'
echo "4: mon frozen: 4 clients closed after ${stuck_ms} ms (lock-timeout 2 s), a file" \
     "export served meanwhile; mon resumed: a client of C took the image"

# --- 2: SIGKILL the active gateway; the other takes over by itself -------------------
ports=("$(free_port)" "$(free_port)")
gateway g0 "${ports[0]}" "ha=rbd:rbd/ha,$opts"
gateway g1 "${ports[1]}" "ha=rbd:rbd/ha,$opts"
dur=$(( kills * 10 + 40 ))
run_prog "$NBDC_IO" -z -c 2 -t 30 -i 5 -d "$dur" -q 32 -b 65536 -x "$d/io.stop" \
    -S "127.0.0.1:${ports[1]}" "nbd://127.0.0.1:${ports[0]}/ha" >"$d/io.out" 2>"$d/io.err" &
io=$!
cleanup_fn "kill -KILL $io 2>/dev/null"
wait_for 60 took_more g0 0
worst=0
: >"$d/kills"
for (( k=1; k<=kills; k++ )); do
    sleep 3
    kill -0 "$io" 2>/dev/null || fail "nbdc-io ended before kill $k"
    act=g$(( (k - 1) % 2 )) oth=g$(( k % 2 ))
    n=$(took "$oth")
    t0=$(date +%s%N)
    kill -KILL "$(gw_pid "$act")"
    echo "$t0" >>"$d/kills"
    wait_for 60 took_more "$oth" "$n"
    ms=$(( ($(date +%s%N) - t0) / 1000000 ))
    [ "$ms" -gt "$worst" ] && worst=$ms
    echo "kill $k: $act killed, $oth took the image after $ms ms"
done

# --- 3: freeze the active gateway -------------------------------------------------
sleep 3
act=g$(( kills % 2 )) oth=g$(( (kills + 1) % 2 ))
n=$(took "$oth")
fz=$(gw_pid "$act")
kill -STOP "$fz"
cleanup_fn "kill -CONT $fz 2>/dev/null"
t0=$(date +%s%N)
wait_for 60 took_more "$oth" "$n"
freeze_ms=$(( ($(date +%s%N) - t0) / 1000000 ))
sleep 2
kill -CONT "$fz"
echo "3: $act frozen, $oth took the image after $freeze_ms ms; $act resumed"
sleep 3
touch "$d/io.stop"
rc=0; wait "$io" || rc=$?
cat "$d/io.out"
[ "$rc" = 0 ] || { tail -n 20 "$d/io.err" >&2; fail "I/O failed across the takeovers (rc $rc)"; }
[ "$(result_field "$d/io.out" errors)" = 0 ] || fail "errors reported"
[ "$(result_field "$d/io.out" bad)" = 0 ] || fail "bad data"
[ "$(result_field "$d/io.out" reconnects)" -ge "$kills" ] || fail "fewer reconnects than kills"
n=$(cat "$d/g0.log" "$d/g1.log" | grep -c 'broke the exclusive lock' || true)
[ "$n" -ge $(( kills + 1 )) ] || fail "only $n of $(( kills + 1 )) takeovers broke the old gateway's lock"
[ "$worst" -le 10000 ] || fail "a takeover took $worst ms (over 10 s)"
# Kill to the first connection back, from nbdc-io's log (local time stamps).
back=$(python3 - "$d/kills" "$d/io.err" <<'PY'
import sys, time, datetime
kills = [int(l) / 1e9 for l in open(sys.argv[1]) if l.strip()]
backs = []
for l in open(sys.argv[2]):
    if " is back (server " in l:
        t = datetime.datetime.strptime(l[:23], "%Y-%m-%d %H:%M:%S.%f")
        backs.append(time.mktime(t.timetuple()) + t.microsecond / 1e6)
out = []
for t in kills:
    after = [b for b in backs if b >= t - 0.01]
    out.append(str(int((min(after) - t) * 1000)) if after else "none")
print(" ".join(out))
PY
) || fail "reading the reconnect times"
echo "kill to the client reconnected to the other gateway (ms): $back"
case " $back " in *" none "*) fail "a kill with no reconnect to the next server logged";; esac
for b in $back; do
    [ "$b" -le 10000 ] || fail "the client reconnected $b ms after a kill (over 10 s)"
done
for p in "${ports[@]}"; do
    grepq "127.0.0.1:$p is back (server" "$d/io.err" || fail "the client never went to port $p"
done
san=$(grep -l 'AddressSanitizer\|runtime error:' "$d"/*.log || true)
[ -z "$san" ] || { cat $san >&2; fail "sanitizer reports in $san"; }
fenced=$(grep -c 'fenced' "$d/$act.log" || true)
echo "PASS: a live gateway cut off wrote nothing more; $kills SIGKILLs and a freeze under" \
     "verified I/O, both gateways up from the start: 0 errors, 0 bad bytes, kill to" \
     "the other gateway holding the lock: at most $worst ms (client reconnected after" \
     "$back ms); freeze to takeover $freeze_ms ms" \
     "(the frozen gateway logged $fenced fenced operations)"
