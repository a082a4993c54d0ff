#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# Gateways on one RBD image with the export option 'exclusive' (smcrd holds
# the image's exclusive lock and, at open, breaks any other owner's, which
# Ceph blocklists), over NBD/TCP on the host:
#  1. a second gateway fences a live first one: the first one's writes
#     fail from then on, the second one's work;
#  2. under the client library's I/O (nbdc-io: every byte checked, given
#     both gateway addresses, requests resent after a reconnect) the
#     gateway is SIGKILLed SMCR_RBD_KILLS times (default 3) and a new one
#     takes the image over on the other address, as a standby would: no
#     error, no bad byte, each takeover within 10 s; the client follows
#     to the next server in its list (figures: kill to I/O back).
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

# --- 1: a live gateway fenced by a second one ------------------------------------
start_smcrd --export "fence=rbd:rbd/fence,$opts"
port_a=$PORT pid_a=$SMCRD_PID log_a=$SMCRD_LOG
qemu-io -f raw -c 'write -P 0x11 0 64k' "$(uri fence)" >/dev/null || fail "write via gateway A"
SMCRD_LOG=$d/b.log start_smcrd --export "fence=rbd:rbd/fence,$opts"
grepq 'broke the exclusive lock' "$d/b.log" || fail "gateway B did not break A's lock"
qemu-io -f raw -c 'write -P 0x22 0 64k' "$(uri fence)" >/dev/null || fail "write via gateway B"
if qemu-io -f raw -c 'write -P 0x33 0 64k' "nbd://127.0.0.1:$port_a/fence" >"$d/qa.txt" 2>&1 &&
   ! grepq -i 'error\|failed' "$d/qa.txt"; then
    fail "gateway A still writes after B fenced it"
fi
qemu-io -f raw -r -c 'read -P 0x22 0 64k' "$(uri fence)" >"$d/qb.txt" 2>&1 &&
    ! grepq -i 'verification failed\|error' "$d/qb.txt" || { cat "$d/qb.txt" >&2; fail "data after fencing"; }
stop_smcrd
kill -KILL "$pid_a" 2>/dev/null; wait "$pid_a" 2>/dev/null || true
SMCRD_LOG=$log_a

# --- 2: SIGKILL the gateway, a new one takes over ----------------------------------
# Two gateway addresses (ports here), used in turn; the client has both.
start_smcrd --export "ha=rbd:rbd/ha,$opts"
ports=("$PORT" "$(free_port)")
dur=$(( kills * 8 + 6 ))
run_prog "$NBDC_IO" -z -c 2 -t 30 -d "$dur" -q 32 -b 65536 -S "127.0.0.1:${ports[1]}" \
    "$(uri ha)" >"$d/io.out" 2>"$d/io.err" &
io=$!
cleanup_fn "kill -KILL $io 2>/dev/null"
worst=0
: >"$d/kills"
for (( k=1; k<=kills; k++ )); do
    sleep 3
    kill -0 "$io" 2>/dev/null || break
    kill_smcrd
    t0=$(date +%s%N)
    echo "$t0" >>"$d/kills"
    PORT=${ports[k % 2]}
    restart_smcrd --export "ha=rbd:rbd/ha,$opts"
    ms=$(( ($(date +%s%N) - t0) / 1000000 ))
    [ "$ms" -gt "$worst" ] && worst=$ms
    echo "kill $k: new gateway serving on port $PORT after $ms ms"
done
[ "$k" -gt "$kills" ] || fail "nbdc-io ended before kill $k"
rc=0; wait "$io" || rc=$?
cat "$d/io.out"
[ "$rc" = 0 ] || { tail -n 20 "$d/io.err" >&2; fail "I/O failed across the takeovers (rc $rc)"; }
[ "$(result_field "$d/io.out" errors)" = 0 ] || fail "errors reported"
[ "$(result_field "$d/io.out" bad)" = 0 ] || fail "bad data"
[ "$(result_field "$d/io.out" reconnects)" -ge "$kills" ] || fail "fewer reconnects than kills"
n=$(grep -c 'broke the exclusive lock' "$SMCRD_LOG" || true)
[ "$n" -ge "$kills" ] || fail "only $n of $kills takeovers broke the old gateway's lock"
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
echo "kill to I/O back on the next gateway (ms): $back"
case " $back " in *" none "*) fail "a kill with no reconnect to the next server logged";; esac
for p in "${ports[@]}"; do
    grepq "127.0.0.1:$p is back (server" "$d/io.err" || fail "the client never went to port $p"
done
stop_smcrd
echo "PASS: a live gateway fenced by a second; $kills SIGKILLs under verified I/O, the" \
     "client following its list of 2 gateways: 0 errors, 0 bad bytes, slowest takeover" \
     "$worst ms, I/O back after $back ms"
