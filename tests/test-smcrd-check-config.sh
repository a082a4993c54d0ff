#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# smcrd --check-config: a good file says OK with its export count (exit 0)
# and serves nothing; an unknown key, a bad export path and bad TLS give
# exit status 2 with file:line or the reason; a '#' after a value is warned
# about with file:line and the value kept; the status shows rmbe-size as
# "auto", not 0; the unit does not restart on exit status 2.
# smcr-timeout: 60
. "${srcdir:-.}/functions.sh"
. "$srcdir/test-smcrd-lib.sh"
. "$srcdir/test-client-lib.sh"

d=$(scratch_dir)
truncate -s 1M "$d/disk.img"
printf '[export disk]\npath = %s\ndescription = build #42\n' "$d/disk.img" >"$d/good.conf"
out=$("$SMCRD" --check-config --config "$d/good.conf" 2>"$d/err") || fail "good config: exit $?: $(cat "$d/err")"
[ "$out" = "smcrd: configuration OK ($d/good.conf): 1 export(s)" ] || fail "good config said: $out"
grep -q "good.conf:3: '#' starts a comment: the value of 'description' is 'build'" "$d/err" ||
    fail "no warning of the '#': $(cat "$d/err")"
printf 'queue-depth = 4\nbogus = 1\n' >"$d/bad.conf"
rc=0; "$SMCRD" --check-config --config "$d/bad.conf" >"$d/out" 2>"$d/err" || rc=$?
[ "$rc" = 2 ] && grep -q "bad.conf:2: unknown setting 'bogus'" "$d/err" && [ ! -s "$d/out" ] ||
    fail "unknown key: status $rc: $(cat "$d/err" "$d/out")"
rc=0; "$SMCRD" --check-config --export "x=$d/none/img" >/dev/null 2>"$d/err" || rc=$?
[ "$rc" = 2 ] && grep -q "export 'x'" "$d/err" || fail "missing export file: status $rc: $(cat "$d/err")"
rc=0; "$SMCRD" --check-config --export "disk=$d/disk.img" --tls on --tls-certificates "$d/none" \
    >/dev/null 2>"$d/err" || rc=$?
[ "$rc" = 2 ] && grep -q "TLS" "$d/err" || fail "bad TLS directory: status $rc: $(cat "$d/err")"

# rmbe-size: libsmcr's choice is shown, not 0.
start_smcrd --export "disk=$d/disk.img"
wait_for 10 test -S "$SMCR_CTL_DIR/smcrd.$SMCRD_PID.sock"
"$SMCRCTL" send smcrd status | grepq "rmbe-size auto (SMCR_RMBE_SIZE, else 4M down to 64K)," ||
    fail "status: rmbe-size not auto"
"$SMCRCTL" --json status smcrd | grepq '"rmbe-size": *"auto' || fail "status-json: rmbe-size not auto"
stop_smcrd
grep -qx "RestartPreventExitStatus=2" "$abs_top_builddir/server/smcrd.service" ||
    fail "smcrd.service restarts on exit status 2"
echo "PASS: --check-config OK and errors (status 2), '#' warned, rmbe-size auto, no restart on 2"
