#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# The clients given a list of servers (gateways of one export): smcrd A
# and B over TCP on loopback export the same files.
#  1. Across one SIGKILL of A (frozen first, so that requests are out):
#     - nbdc-io (the client library, every byte checked) on A with B after
#       it: both connections go on with B at once (no failed attempt),
#       nothing fails, what was out is resent;
#     - nbdkit smcr server=A,B (a comma list) under nbdcopy of random data
#       in: read back through B, sha256 of source, copy and exported file
#       equal; smcrctl lists both servers, every connection on B.
#  2. smcr-attach -F with a dead first server attaches to the second;
#     usage errors: an empty list element, server= given twice.
#  3. smcr-fuse -S with a dead server in its URI mounts through the
#     second (root and /dev/fuse); an empty list element is refused.
# smcr-timeout: 240
. "${srcdir:-.}/functions.sh"
. "$srcdir/test-smcrd-lib.sh"
. "$srcdir/test-client-lib.sh"
ATTACH=$abs_top_builddir/client/smcr-attach
[ -x "$NBDC_IO" ] || fail "nbdc-io not built"
[ -x "$ATTACH" ] || fail "$ATTACH not built"
# CI runs the host tests twice; in the ASan pass unit/test-client covers the
# engine's server lists (CI time; SMCR_SERVERS_ASAN=1 runs it there too).
readelf -d "$SMCRD" 2>/dev/null | grepq 'NEEDED.*libasan' && [ -z "${SMCR_SERVERS_ASAN:-}" ] &&
    skip "ASan build: runs in the plain build only (CI time; SMCR_SERVERS_ASAN=1 runs it here too)"
nbdkit=yes
command -v nbdkit >/dev/null && command -v nbdcopy >/dev/null ||
    { nbdkit=; echo "nbdkit or nbdcopy missing: the plugin's part not run"; }

d=$(scratch_dir)
truncate -s 32M "$d/disk.img" "$d/disk2.img"
exports=(--export "disk=$d/disk.img" --export "disk2=$d/disk2.img")
SMCRD_LOG=$d/a.log
start_smcrd "${exports[@]}"
port_a=$PORT pid_a=$SMCRD_PID
SMCRD_LOG=$d/b.log
start_smcrd "${exports[@]}"
port_b=$PORT
sha() { sha256sum <"$1" | cut -d' ' -f1; }

# --- 1: A killed under both clients ------------------------------------------------
if [ -n "$nbdkit" ]; then
    start_nbdkit server="127.0.0.1:$port_a,127.0.0.1:$port_b" export=disk2 transport=tcp \
        connections=2 timeout=30
    head -c 16M /dev/urandom >"$d/src"
fi
run_prog "$NBDC_IO" -z -c 2 -t 30 -d 5 -q 32 -b 65536 -S "127.0.0.1:$port_b" \
    "nbd://127.0.0.1:$port_a/disk" >"$d/io.out" 2>"$d/io.err" &
io=$!
cleanup_fn "kill -KILL $io 2>/dev/null"
sleep 1.5
kill -STOP "$pid_a"
if [ -n "$nbdkit" ]; then
    nbdcopy --connections=2 --requests=16 "$d/src" "$(nbdkit_uri)" &
    cp=$!
    cleanup_fn "kill -KILL $cp 2>/dev/null"
fi
sleep 1
kill -KILL "$pid_a"
wait "$pid_a" 2>/dev/null || true

rc=0; wait "$io" || rc=$?
cat "$d/io.out"
grep 'is back\|lost' "$d/io.err" || true
[ "$rc" = 0 ] || { tail -n 20 "$d/io.err"; fail "I/O failed across the failover (rc $rc)"; }
[ "$(result_field "$d/io.out" errors)" = 0 ] || fail "errors reported"
[ "$(result_field "$d/io.out" bad)" = 0 ] || fail "bad data"
[ "$(result_field "$d/io.out" reconnects)" -ge 2 ] || fail "both connections should have reconnected"
[ "$(result_field "$d/io.out" resent)" -ge 1 ] || fail "nothing was resent"
[ "$(result_field "$d/io.out" reconnect_failures)" = 0 ] ||
    fail "a connection tried the dead server again instead of the next one"
[ "$(grep -c "to 127.0.0.1:$port_b is back (server 2 of 2" "$d/io.err")" -ge 2 ] ||
    fail "no reconnect to server 2 logged"

if [ -n "$nbdkit" ]; then
    wait "$cp" || fail "nbdcopy failed across the failover"
    nbdcopy "$(nbdkit_uri)" "$d/export" || fail "read back through B failed"
    head -c 16M "$d/export" >"$d/back"
    head -c 16M "$d/disk2.img" >"$d/file"
    [ "$(sha "$d/src")" = "$(sha "$d/back")" ] || fail "data read back differs"
    [ "$(sha "$d/src")" = "$(sha "$d/file")" ] || fail "exported file differs"
    nbdkit_wait_up 2
    json=$("$SMCRCTL" --json status nbdkit-smcr) || fail "smcrctl failed"
    python3 - "$json" "127.0.0.1:$port_a" "127.0.0.1:$port_b" <<'PY' || fail "status: $json"
import json, sys
n = json.loads(sys.argv[1])[0]["sections"]["nbd"]
print("nbdkit after the failover:", n["servers"], n["stats"])
assert n["servers"] == sys.argv[2:], n["servers"]
assert n["stats"]["errors"] == 0 and n["stats"]["reconnects"] >= 2
for c in n["connections"]:
    assert c["state"] == "up" and c["peer"].endswith(sys.argv[3].split(":")[1]), c
PY
    echo "nbdkit: 16 MiB in across the failover, sha256 $(sha "$d/src")"
    stop_nbdkit
    rc=0 preload=
    readelf -d "$PLUGIN" 2>/dev/null | grepq 'NEEDED.*libasan' &&
        preload=$(gcc -print-file-name=libasan.so)
    LD_PRELOAD=$preload ASAN_OPTIONS=detect_leaks=0 \
        nbdkit -f -U - "$PLUGIN" server=127.0.0.1:1 server=127.0.0.1:2 --run true \
        >"$d/twice.err" 2>&1 || rc=$?
    [ "$rc" != 0 ] && grepq 'given twice' "$d/twice.err" ||
        { cat "$d/twice.err"; fail "server= given twice: want an error"; }
fi

# --- 2: smcr-attach --------------------------------------------------------------------
dead=$(free_port)
run_prog "$ATTACH" -F -t -E 'echo "size $SMCR_ATTACH_SIZE"' \
    "127.0.0.1:$dead,127.0.0.1:$port_b" disk >"$d/att.out" 2>"$d/att.err" ||
    { cat "$d/att.err"; fail "smcr-attach with a dead first server failed"; }
grepq "size $((32 << 20))" "$d/att.out" || fail "smcr-attach: no size from server 2"
grepq 'trying the next server' "$d/att.err" || fail "smcr-attach: no move to server 2 logged"
rc=0; "$ATTACH" -F -t -E true "127.0.0.1:$port_b,,127.0.0.1:$dead" disk 2>/dev/null || rc=$?
[ "$rc" = 2 ] || fail "an empty list element: exit $rc, want 2"

# --- 3: smcr-fuse -S -------------------------------------------------------------------
rc=0; "$SMCR_FUSE" -S "127.0.0.1:$port_b,," "nbd://127.0.0.1:$dead/disk" "$d" 2>"$d/fuse.err" ||
    rc=$?
[ "$rc" = 2 ] && grepq 'expected HOST' "$d/fuse.err" ||
    fail "smcr-fuse -S with an empty element: exit $rc, want 2: $(cat "$d/fuse.err")"
fuse=
if [ "$(id -u)" = 0 ] && [ -w /dev/fuse ] && command -v fusermount3 >/dev/null; then
    mkdir "$d/mnt"
    cleanup_fn "fusermount3 -u -z '$d/mnt' 2>/dev/null"
    run_prog "$SMCR_FUSE" -f -C 2 --ctl=off -S "127.0.0.1:$port_b" \
        "nbd://127.0.0.1:$dead/disk" "$d/mnt" 2>"$d/fuse.err" &
    fz=$!
    wait_for 30 mountpoint -q "$d/mnt"
    [ "$(sha "$d/mnt/disk")" = "$(sha "$d/disk.img")" ] || fail "smcr-fuse: data via server 2"
    fusermount3 -u "$d/mnt" || fail "fusermount3 -u"
    wait "$fz" || fail "smcr-fuse exited with an error"
    fuse=", smcr-fuse"
else
    echo "no root, /dev/fuse or fusermount3: smcr-fuse's mount not run"
fi
stop_smcrd
echo "PASS: failover from a killed server to the next in the list (library, plugin," \
     "smcr-attach$fuse): 0 errors, data checked"
