#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# smcrd's log level: --log-level with a bad value is a usage error (exit 2,
# one line); log-level = warning in the config file keeps a client's info
# lines out of the log; after SIGHUP with log-level = debug the next client
# logs its debug lines, and --log-level on the command line wins over the
# file on SIGHUP.
# smcr-timeout: 120
. "${srcdir:-.}/functions.sh"
. "$srcdir/test-smcrd-lib.sh"
requires nbdinfo --version

d=$(scratch_dir)
export SMCR_CTL_DIR=$d/ctl
truncate -s 1M "$d/a.img"
rc=0; "$SMCRD" --log-level loud >"$d/usage" 2>&1 || rc=$?
[ $rc = 2 ] || fail "--log-level loud: exit $rc, want 2"
grepq -x "smcrd: --log-level loud: not error, warning, info or debug" "$d/usage" ||
    fail "--log-level loud: $(cat "$d/usage")"

conf() { printf 'log-level = %s\n[export a]\npath = %s\n' "$1" "$d/a.img" >"$d/c.conf"; }
# client N: one nbdinfo, then the log's line count settles
client() { nbdinfo --size "nbd://127.0.0.1:$port/a" >/dev/null || fail "nbdinfo ($1)"; sleep 0.3; }

conf warning
port=$(free_port)
"$SMCRD" -f -l 127.0.0.1 -p "$port" -c "$d/c.conf" 2>"$d/log" &
pid=$!
cleanup_fn "kill -KILL $pid 2>/dev/null"
wait_for 20 nbdinfo --size "nbd://127.0.0.1:$port/a"
client warning
grepq ' info: ' "$d/log" && fail "info lines at log-level warning: $(grep ' info: ' "$d/log" | head -n 3)"
conf debug
kill -HUP "$pid"
wait_for 10 grep -q 'SIGHUP: log-level debug' "$d/log"
client debug
grepq "debug: client 127.0.0.1:[0-9]*: connected" "$d/log" ||
    fail "no debug line after SIGHUP to log-level debug: $(tail -n 5 "$d/log")"
kill -TERM "$pid"; wait "$pid" || fail "smcrd exited $?"

# The command line's level stays over the file's.
: >"$d/log"
"$SMCRD" -f -l 127.0.0.1 -p "$port" -c "$d/c.conf" --log-level error 2>"$d/log" &
pid=$!
cleanup_fn "kill -KILL $pid 2>/dev/null"
wait_for 20 nbdinfo --size "nbd://127.0.0.1:$port/a"
kill -HUP "$pid"; sleep 0.5
client error
[ ! -s "$d/log" ] || fail "lines at --log-level error: $(head -n 3 "$d/log")"
kill -TERM "$pid"; wait "$pid" || fail "smcrd exited $?"
echo "PASS: log-level warning hides info lines, SIGHUP to debug shows a client's debug lines, --log-level error stays over the file"
