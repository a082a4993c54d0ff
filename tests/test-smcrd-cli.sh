#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# smcrd's command line and limits: --help, --version, usage errors (exit 2;
# every number checked whole before anything listens), all listeners or none,
# --max-clients refuses extra clients with a clear option error while the
# others keep working.
# smcr-timeout: 120
. "${srcdir:-.}/functions.sh"
. "$srcdir/test-smcrd-lib.sh"
requires_nbd_python

d=$(scratch_dir)
truncate -s 8M "$d/a.img"

"$SMCRD" --help | grepq -- "--export" || fail "--help"
"$SMCRD" --version | grepq "smcrd" || fail "--version"
rc=0; "$SMCRD" --bogus >/dev/null 2>&1 || rc=$?
[ $rc = 2 ] || fail "unknown option: exit $rc, want 2"
rc=0; "$SMCRD" -f >/dev/null 2>&1 || rc=$?
[ $rc = 2 ] || fail "no exports: exit $rc, want 2"
rc=0; "$SMCRD" -f -p "$(free_port)" --export "x=$d/missing.img" >/dev/null 2>&1 || rc=$?
[ $rc = 2 ] || fail "missing file: exit $rc, want 2"
rc=0; "$SMCRD" -f --export "x=$d/a.img,blocksize=3" >/dev/null 2>&1 || rc=$?
[ $rc = 2 ] || fail "bad block size: exit $rc, want 2"
rc=0; "$SMCRD" -f --export "x=$d/a.img" --export "x=$d/a.img" >/dev/null 2>&1 || rc=$?
[ $rc = 2 ] || fail "duplicate export: exit $rc, want 2"

# Every number is checked whole, before anything listens: exit 2.
for bad in "-p 99999" "-p 0" "-p abc" "-p 10809x" "--smcr-port 70000" \
           "--smcr-port nonsense" "-q 0" "-t 999"; do
    rc=0; timeout 30 "$SMCRD" -f $bad --export "x=$d/a.img" >"$d/out" 2>&1 || rc=$?
    [ $rc = 2 ] || fail "'$bad': exit $rc, want 2"
    grep -q "listening" "$d/out" && fail "'$bad': listened before refusing"
done
printf 'port = 99999\n[export x]\npath = %s\n' "$d/a.img" >"$d/bad.conf"
rc=0; timeout 30 "$SMCRD" -f --config "$d/bad.conf" >"$d/out" 2>&1 || rc=$?
[ $rc = 2 ] || fail "config port 99999: exit $rc, want 2"
# A NUL byte would cut a line short ("path = X\0,ro" read as "path = X"):
# refused; so is an export name over 4096 bytes (NBD's limit).
printf '[export x]\npath = %s\0junk\n' "$d/a.img" >"$d/nul.conf"
rc=0; timeout 30 "$SMCRD" -f --config "$d/nul.conf" >"$d/out" 2>&1 || rc=$?
[ $rc = 2 ] || fail "config with a NUL byte: exit $rc, want 2"
grep -q "nul.conf:2: NUL byte" "$d/out" || { cat "$d/out" >&2; fail "NUL byte: no reason given"; }
printf '[export %s]\npath = %s\n' "$(head -c 4097 /dev/zero | tr '\0' n)" "$d/a.img" >"$d/long.conf"
rc=0; timeout 30 "$SMCRD" -f --config "$d/long.conf" >"$d/out" 2>&1 || rc=$?
[ $rc = 2 ] || fail "config export name of 4097 bytes: exit $rc, want 2"
grep -q "export name longer than 4096 bytes" "$d/out" || { cat "$d/out" >&2; fail "long name: no reason given"; }

# All listeners or none: with 0.0.0.0's port taken (and [::]'s free),
# smcrd must fail, not say "ready" while IPv4 clients hang.
busy=$(free_port)
python3 -c 'import socket,sys,time
s=socket.socket(); s.bind(("0.0.0.0", int(sys.argv[1]))); s.listen(); time.sleep(30)' "$busy" &
holder=$!
cleanup_fn "kill $holder 2>/dev/null"
wait_for 5 python3 -c 'import socket,sys; socket.create_connection(("127.0.0.1", int(sys.argv[1])))' "$busy"
rc=0; timeout 30 "$SMCRD" -f -p "$busy" --export "x=$d/a.img" >"$d/out" 2>&1 || rc=$?
[ $rc = 1 ] || { cat "$d/out" >&2; fail "0.0.0.0 busy: exit $rc, want 1"; }
grep -q " ready: " "$d/out" && fail "0.0.0.0 busy: smcrd said ready"
grep -q "0.0.0.0:$busy: Address already in use" "$d/out" || { cat "$d/out" >&2; fail "0.0.0.0 busy: no reason given"; }
kill $holder 2>/dev/null

# One address here: its share of the client slots off (0), max-clients alone.
start_smcrd --max-clients 2 --max-clients-per-address 0 --export "disk=$d/a.img"

nbd_python "$(uri disk)" "$PORT" "$PROBE" <<'PY' || fail "max-clients test failed"
import subprocess, sys, nbd
a, b = nbd.NBD(), nbd.NBD()
a.connect_uri(sys.argv[1])
b.connect_uri(sys.argv[1])
out = subprocess.run([sys.argv[3], "127.0.0.1", sys.argv[2], "info", "disk"],
                     capture_output=True, text=True)
assert out.returncode == 1 and out.stdout.startswith("NBD_REP_ERR_POLICY") \
    and "too many clients" in out.stdout, "third client: %r" % (out.stdout,)
a.pwrite(b"a" * 4096, 0)
assert b.pread(4096, 0) == b"a" * 4096
a.shutdown()
b.shutdown()
print("third client refused, two served")
PY
# Slots are given back when clients leave.
wait_for 10 probe 127.0.0.1 "$PORT" info disk
stop_smcrd
log_has "too many clients" || fail "refusal not logged"
echo "PASS: command line and limits"
