#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# smcrd's drop-ins FILE.d/*.conf: an export defined in one is served (its
# data read back), a later drop-in (by name) overrides a setting of FILE and
# of an earlier one, files not named *.conf (and hidden ones) are ignored,
# a bad line in a drop-in fails --check-config and the start with its
# file:line, an export defined twice names the file, and SIGHUP reads a new
# drop-in.  A few seconds.
# smcr-timeout: 60
. "${srcdir:-.}/functions.sh"
. "$srcdir/test-smcrd-lib.sh"
. "$srcdir/test-client-lib.sh"
requires nbdinfo --version
requires nbdcopy --version

d=$(scratch_dir)
make_random "$d/a.img" 1
make_random "$d/b.img" 1
make_random "$d/c.img" 1
conf=$d/smcrd.conf
printf 'queue-depth = 8\n[export a]\npath = %s\n' "$d/a.img" >"$conf"
mkdir "$conf.d"
printf 'queue-depth = 16\n[export b]\npath = %s\n' "$d/b.img" >"$conf.d/10-b.conf"
printf 'queue-depth = 32\n' >"$conf.d/20-depth.conf"
printf 'queue-depth = 64\n' >"$conf.d/15-first.conf"
printf 'bogus = 1\n' >"$conf.d/30-x.conf.disabled"
printf 'bogus = 1\n' >"$conf.d/.40-hidden.conf"
printf 'bogus = 1\n' >"$conf.d/README"

out=$("$SMCRD" --check-config --config "$conf" 2>"$d/err") || fail "check-config: exit $?: $(cat "$d/err")"
[ "$out" = "smcrd: configuration OK ($conf): 2 export(s)" ] || fail "check-config said: $out"

start_smcrd --config "$conf"
nbdinfo --list "nbd://127.0.0.1:$PORT" >"$d/list" 2>&1 || fail "nbdinfo --list: $(cat "$d/list")"
grepq 'export="b"' "$d/list" || fail "the drop-in's export is not listed: $(cat "$d/list")"
nbdcopy "$(uri b)" "$d/b.out" || fail "nbdcopy of the drop-in's export"
cmp "$d/b.img" "$d/b.out" || fail "the drop-in's export: other data"
wait_for 10 test -S "$SMCR_CTL_DIR/smcrd.$SMCRD_PID.sock"
"$SMCRCTL" send smcrd status | grepq "queue-depth 32," ||
    fail "queue-depth not 32 (20-depth.conf last): $("$SMCRCTL" send smcrd status | grep -o 'queue-depth [^,]*')"
echo "verified: drop-in export served (data equal), 20-depth.conf overrides 15-first.conf and FILE"

# SIGHUP reads a new drop-in.
printf '[export c]\npath = %s\nread-only = yes\n' "$d/c.img" >"$conf.d/50-c.conf"
kill -HUP "$SMCRD_PID"
wait_for 10 sh -c "nbdinfo --list 'nbd://127.0.0.1:$PORT' 2>/dev/null | grep -q 'export=\"c\"'" ||
    fail "SIGHUP: the new drop-in's export is not served"
nbdcopy "$(uri c)" "$d/c.out" && cmp "$d/c.img" "$d/c.out" || fail "SIGHUP: export c: other data"
stop_smcrd
echo "verified: SIGHUP serves a new drop-in's export"

# A bad line: file:line, status 2, at --check-config and at the start.
printf 'queue-depth = 8\n\nbogus = 1\n' >"$conf.d/60-bad.conf"
rc=0; "$SMCRD" --check-config --config "$conf" >"$d/out" 2>"$d/err" || rc=$?
[ "$rc" = 2 ] && grepq "$conf.d/60-bad.conf:3: unknown setting 'bogus'" "$d/err" ||
    fail "bad drop-in: status $rc: $(cat "$d/err")"
rc=0; "$SMCRD" -f -l 127.0.0.1 -p "$(free_port)" --config "$conf" >"$d/out" 2>&1 || rc=$?
[ "$rc" = 2 ] && grepq "60-bad.conf:3: unknown setting 'bogus'" "$d/out" ||
    fail "bad drop-in at start: status $rc: $(cat "$d/out")"
rm "$conf.d/60-bad.conf"
printf '[export a]\npath = %s\n' "$d/c.img" >"$conf.d/70-dup.conf"
rc=0; "$SMCRD" --check-config --config "$conf" >"$d/out" 2>"$d/err" || rc=$?
[ "$rc" = 2 ] && grepq "70-dup.conf: export 'a' defined twice" "$d/err" ||
    fail "export defined twice: status $rc: $(cat "$d/err")"
echo "PASS: drop-ins read by name, *.conf only, later wins, errors with file:line, SIGHUP"
