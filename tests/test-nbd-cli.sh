#!/bin/bash
# smcrd's command line and limits: --help, --version, usage errors (exit 2),
# --max-clients refuses extra clients with a clear option error while the
# others keep working.
# smcr-timeout: 120
. "${srcdir:-.}/functions.sh"
. "$srcdir/test-nbd-lib.sh"
requires_nbd_python

d=$(scratch_dir)
truncate -s 8M "$d/a.img"

"$SMCRD" --help | grep -q -- "--export" || fail "--help"
"$SMCRD" --version | grep -q "smcrd" || fail "--version"
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

rc=0; "$SMCRD" -f --smcr-port nonsense --export "x=$d/a.img" >/dev/null 2>&1 || rc=$?
[ $rc != 0 ] || fail "bad --smcr-port accepted"

start_smcrd --max-clients 2 --export "disk=$d/a.img"

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
