#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# nbdkit with our plugin (nbdkit smcr ...) in front of smcrd, served on a
# unix socket to libnbd's tools:
#  - transport=tcp to smcrd's NBD port: nbdinfo shows the export's size and
#    flags; nbdcopy 64 MiB of random data in and out, checksums equal (and
#    equal to the exported file);
#  - uri=smcr://... to smcrd's SMC-R port (CLC, TCP fallback on this host):
#    the same with other data;
#  - smcrd killed and restarted under nbdcopy: no error, data intact.
# smcr-timeout: 300
. "${srcdir:-.}/functions.sh"
. "$srcdir/test-smcrd-lib.sh"
. "$srcdir/test-client-lib.sh"
requires nbdkit --version
requires nbdcopy --version
requires nbdinfo --version

d=$(scratch_dir)
mib=$(scale_mib 64 16)
truncate -s "${mib}M" "$d/disk.img"
SPORT=$(free_port)
exports=(--smcr-port "$SPORT" --export "disk=$d/disk.img")
start_smcrd "${exports[@]}"
wait_for 10 grep -q 'listening for NBD over SMC-R' "$SMCRD_LOG"

roundtrip() {    # NAME: random data in and out through nbdkit, checksums
    make_random "$d/$1.src" "$mib"
    nbdcopy "$d/$1.src" "$(nbdkit_uri)" || fail "$1: nbdcopy into nbdkit failed"
    nbdcopy "$(nbdkit_uri)" "$d/$1.back" || fail "$1: nbdcopy out of nbdkit failed"
    local a b c
    a=$(sha256sum <"$d/$1.src" | cut -d' ' -f1)
    b=$(sha256sum <"$d/$1.back" | cut -d' ' -f1)
    c=$(sha256sum <"$d/disk.img" | cut -d' ' -f1)
    [ "$a" = "$b" ] || fail "$1: data read back differs"
    [ "$a" = "$c" ] || fail "$1: exported file differs"
    echo "$1: $mib MiB in and out, sha256 $a"
}

# --- plain TCP -------------------------------------------------------------------
start_nbdkit server="127.0.0.1:$PORT" export=disk transport=tcp connections=4
json=$(nbdinfo --json "$(nbdkit_uri)") || fail "nbdinfo failed"
python3 - "$json" "$((mib * 1048576))" <<'PY' || fail "nbdinfo: wrong size or flags: $json"
import json, sys
e = json.loads(sys.argv[1])["exports"][0]
assert e["export-size"] == int(sys.argv[2]), e["export-size"]
for k in ("can_flush", "can_fua", "can_trim", "can_zero", "can_multi_conn", "can_cache"):
    assert e[k], k
assert not e["is_read_only"]
PY
roundtrip tcp
grep -q "4 connection(s)" "$NBDKIT_LOG" || fail "expected 4 connections to smcrd"
stop_nbdkit

# --- SMC-R port (TCP fallback here) ------------------------------------------------
NBDKIT_LOG=$d/nbdkit-smcr.log
start_nbdkit uri="smcr://127.0.0.1:$SPORT/disk" connections=2 timeout=30
roundtrip smcr
grep -q "smcr://127.0.0.1:$SPORT/disk: .* 2 connection(s) (tcp-fallback)" "$NBDKIT_LOG" ||
    fail "no smcr:// attach (with TCP fallback) logged"

# --- the server goes away under nbdcopy ------------------------------------------------
# Frozen first, so that requests are surely out when it dies.
make_random "$d/crash.src" "$mib"
kill -STOP "$SMCRD_PID"
nbdcopy --connections=2 --requests=16 "$d/crash.src" "$(nbdkit_uri)" &
cp=$!
cleanup_fn "kill -KILL $cp 2>/dev/null"
sleep 1
kill_smcrd
sleep 1
restart_smcrd "${exports[@]}"
wait "$cp" || fail "nbdcopy failed across a server restart"
nbdcopy "$(nbdkit_uri)" "$d/crash.back" || fail "read back after the restart failed"
cmp "$d/crash.src" "$d/crash.back" || fail "data differs after the restart"
# nbdcopy may finish on one connection while the other waits out its backoff.
nbdkit_wait_up 2
json=$("$SMCRCTL" --json status nbdkit-smcr) || fail "smcrctl failed"
python3 - "$json" <<'PY' || fail "counters after the restart: $json"
import json, sys
n = json.loads(sys.argv[1])[0]["sections"]["nbd"]["stats"]
print("after the restart:", n)
assert n["errors"] == 0 and n["timed_out"] == 0
assert n["reconnects"] >= 2 and n["resent"] >= 1 and n["connections_lost"] >= 2
PY
stop_nbdkit
stop_smcrd
echo "PASS: nbdkit smcr over TCP and over the SMC-R port; server restart under load survived"
