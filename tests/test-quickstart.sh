#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# README's quick start, from a `make install DESTDIR=` tree:
#  - smcrd.conf as installed: smcrd starts and says there is no export;
#  - the quick start: smcrd with one export, nbdinfo's size, nbdcopy in
#    and out (checksums equal), the plugin (full path into DESTDIR, where
#    nbdkit's plugindir is) under nbdkit --run;
#  - a wrong export name: the same one line from the plugin (exit 1, in
#    the background too, no socket left) and smcr-fuse;
#  - smcr-fuse refuses size changes (: >, truncate) with EPERM, data intact;
#  - clients against a TLS-only server (--tls=require, a psktool key): the
#    plugin under nbdkit --run and nbdinfo over nbds://, smcr-fuse (root)
#    reads the data back; a plain client and a wrong key are refused in
#    one line;
#  - usage errors: one line, "Try ... --help", exit 2; smcrctl -d with a
#    missing directory fails.
# About 25-40 s on a quiet 2-core machine (most of it make install); 180 s
# beside a soak in the lane.
# smcr-timeout: 360
. "${srcdir:-.}/functions.sh"
. "$srcdir/test-smcrd-lib.sh"
requires nbdkit --version
requires nbdinfo --version
requires nbdcopy --version
requires psktool --version

d=$(scratch_dir)
root=$d/root
make_install -s -C "$abs_top_builddir" install DESTDIR="$root" \
    >"$d/install.log" 2>&1 || { cat "$d/install.log"; fail "make install DESTDIR="; }
bin() { find "$root" -type f -name "$1" -perm -u+x | head -n 1; }
smcrd=$(bin smcrd) smcrctl=$(bin smcrctl) fuse=$(bin smcr-fuse)
[ -n "$smcrd" ] && [ -n "$smcrctl" ] && [ -n "$fuse" ] || fail "programs not installed"
plugindir=$(pkg-config --variable=plugindir nbdkit)
plugin=$root$plugindir/nbdkit-smcr-plugin.so
[ -f "$plugin" ] || fail "the plugin is not in nbdkit's plugindir ($plugindir) under DESTDIR"
# The programs load the installed libsmcr.so (the DESTDIR tree's, found
# through LD_LIBRARY_PATH as ldconfig would find it in the real libdir).
so=$(find "$root" -name 'libsmcr.so.[0-9]' | head -n 1)
[ -n "$so" ] || fail "no libsmcr.so.N installed"
export LD_LIBRARY_PATH=${so%/*}
# nbdkit as run here: a plugin built with --enable-sanitizers needs the ASan
# runtime first in nbdkit (not built with it); nbdkit's own exit-time
# allocations are not ours to report (as start_nbdkit in test-client-lib.sh).
nk=(nbdkit) asan=0
if readelf -d "$plugin" 2>/dev/null | grepq 'NEEDED.*libasan'; then
    nk=(env "LD_PRELOAD=$(gcc -print-file-name=libasan.so)" ASAN_OPTIONS=detect_leaks=0 nbdkit)
    asan=1
fi
# exit_ok RC WHAT: nbdkit failed with exit 1.  With ASan preloaded, nbdkit
# can hang in exit() after the error (p11-kit's destructor waits for
# glibc's setlocale lock; seen with gdb), so there the timeout (124)
# counts too: the message is still checked.  The normal build checks exit 1.
exit_ok() {
    [ "$1" = 1 ] && return 0
    if [ "$asan" = 1 ] && [ "$1" = 124 ]; then
        echo "note: $2: nbdkit hung in exit() under ASan (p11-kit destructor); message checked"
        return 0
    fi
    fail "$2: exit $1"
}
conf=$(find "$root" -path '*/etc/smcrd.conf' | head -n 1)
[ -n "$conf" ] || fail "no smcrd.conf in sysconfdir"
export SMCR_CTL_DIR=$d/ctl

# --- the config file as installed -------------------------------------------------
PORT=$(free_port)
"$smcrd" -f -l 127.0.0.1 -p "$PORT" -c "$conf" >"$d/conf.log" 2>&1 &
pid=$!
cleanup_fn "kill -KILL $pid 2>/dev/null"
wait_for 10 grep -q 'no exports configured: add an \[export NAME\] section' "$d/conf.log"
kill -TERM "$pid"; wait "$pid" || fail "smcrd with the installed config exited $?"
echo "installed config: $(grep -o 'no exports configured.*' "$d/conf.log")"

# --- the quick start ---------------------------------------------------------------
cd "$d" || fail "cd"
truncate -s 64M disk.img
"$smcrd" -f -l 127.0.0.1 -p "$PORT" --export disk="$PWD/disk.img" 2>"$d/smcrd.log" &
pid=$!
cleanup_fn "kill -KILL $pid 2>/dev/null"
wait_for 10 nbdinfo --size "nbd://127.0.0.1:$PORT/disk"
size=$(nbdinfo --size "nbd://127.0.0.1:$PORT/disk")
[ "$size" = 67108864 ] || fail "nbdinfo: size $size"
make_random src.img 8
nbdcopy src.img "nbd://127.0.0.1:$PORT/disk" || fail "nbdcopy in"
nbdcopy "nbd://127.0.0.1:$PORT/disk" back.img || fail "nbdcopy out"
cmp -n 8388608 src.img back.img || fail "nbdcopy: data read back differs"
out=$("${nk[@]}" -U - "$plugin" server="127.0.0.1:$PORT" export=disk transport=tcp \
      --run 'nbdinfo --size "$uri"') || fail "nbdkit smcr --run failed"
[ "$out" = 67108864 ] || fail "nbdkit smcr: size $out"
echo "quick start: nbdinfo 64 MiB, nbdcopy 8 MiB in and out equal, nbdkit smcr size $out"

# --- a wrong export name ------------------------------------------------------------
want="smcrd at 127.0.0.1:$PORT has no export 'nope'"
rc=0
timeout $((asan ? 15 : 30)) "${nk[@]}" -U - "$plugin" server="127.0.0.1:$PORT" export=nope transport=tcp \
    --run 'nbdinfo --size "$uri"' >/dev/null 2>"$d/run.err" || rc=$?
exit_ok "$rc" "nbdkit --run, wrong export"
grep -qxF "nbdkit: error: $want" "$d/run.err" || fail "nbdkit --run: $(cat "$d/run.err")"
rc=0
timeout $((asan ? 15 : 30)) "${nk[@]}" -U "$d/bg.sock" -P "$d/bg.pid" "$plugin" server="127.0.0.1:$PORT" \
    export=nope transport=tcp 2>"$d/bg.err" || rc=$?
[ -f "$d/bg.pid" ] && cleanup_fn "kill -KILL $(cat "$d/bg.pid") 2>/dev/null"
exit_ok "$rc" "nbdkit in the background, wrong export"
[ "$rc" = 1 ] && [ -e "$d/bg.sock" ] && fail "nbdkit left its socket behind"
grep -qxF "nbdkit: error: $want" "$d/bg.err" || fail "nbdkit: $(cat "$d/bg.err")"
mkdir mnt
rc=0
"$fuse" "nbd://127.0.0.1:$PORT/nope" mnt 2>"$d/fuse.err" || rc=$?
[ "$rc" = 1 ] || fail "smcr-fuse, wrong export: exit $rc"
[ "$(cat "$d/fuse.err")" = "smcr-fuse: $want" ] || fail "smcr-fuse: $(cat "$d/fuse.err")"
grep -q "nbd: 127.0.0.1:[0-9]*: unknown export 'nope'" "$d/smcrd.log" ||
    fail "smcrd did not log the unknown export at the default level"
echo "wrong export: '$want' from nbdkit (--run and background, exit 1) and smcr-fuse"

# --- smcr-fuse refuses size changes ----------------------------------------------------
if [ "$(id -u)" = 0 ] && [ -w /dev/fuse ] && command -v fusermount3 >/dev/null; then
    "$fuse" "nbd://127.0.0.1:$PORT/disk" mnt || fail "smcr-fuse mount"
    cleanup_fn "fusermount3 -u -z '$d/mnt' 2>/dev/null"
    (: >mnt/disk) 2>"$d/trunc.err" && fail ": > mnt/disk succeeded"
    grep -q 'Operation not permitted' "$d/trunc.err" || fail ": >: $(cat "$d/trunc.err")"
    truncate -s 1M mnt/disk 2>"$d/trunc.err" && fail "truncate succeeded"
    grep -q 'Operation not permitted' "$d/trunc.err" || fail "truncate: $(cat "$d/trunc.err")"
    [ "$(stat -c %s mnt/disk)" = 67108864 ] || fail "size changed"
    cmp -n 8388608 src.img mnt/disk || fail "data changed by a refused truncation"
    fusermount3 -u mnt
    echo "smcr-fuse: ': >' and truncate refused (EPERM), size and data intact"
else
    echo "smcr-fuse mount part skipped (needs root and /dev/fuse)"
fi
kill -TERM "$pid"; wait "$pid" || fail "smcrd exited $?"

# --- clients against a TLS-only server ------------------------------------------------
psktool -u alice -p keys.psk >/dev/null 2>&1 || fail "psktool"
psktool -u alice -p wrong.psk >/dev/null 2>&1 || fail "psktool"
"$smcrd" -f -l 127.0.0.1 -p "$PORT" --tls=require --tls-psk "$PWD/keys.psk" \
    --export disk="$PWD/disk.img" 2>"$d/tls.log" &
pid=$!
cleanup_fn "kill -KILL $pid 2>/dev/null"
tls="nbds://alice@127.0.0.1:$PORT/disk?tls-psk-file=$PWD/keys.psk"
wait_for 10 nbdinfo --size "$tls"
out=$("${nk[@]}" -U - "$plugin" uri="$tls" --run 'nbdinfo --size "$uri"') ||
    fail "nbdkit smcr uri=nbds:// --run failed"
[ "$out" = 67108864 ] || fail "nbdkit smcr over TLS: size $out"
"${nk[@]}" -U - "$plugin" uri="$tls" --run 'nbdcopy "$uri" tls.img' ||
    fail "nbdkit smcr uri=nbds://: nbdcopy out failed"
cmp -n 8388608 src.img tls.img || fail "over TLS: data read back differs"
grep -q "PSK identity 'alice'" "$d/tls.log" || fail "smcrd logged no PSK identity"
rc=0
timeout $((asan ? 15 : 30)) "${nk[@]}" -U - "$plugin" server="127.0.0.1:$PORT" export=disk \
    transport=tcp --run true >/dev/null 2>"$d/plain.err" || rc=$?
exit_ok "$rc" "nbdkit, plain client of a TLS-only server"
grep -qx "nbdkit: error: cannot attach nbd://127.0.0.1:$PORT/disk: the server requires TLS.*" \
    "$d/plain.err" || fail "nbdkit, plain client: $(cat "$d/plain.err")"
rc=0
timeout $((asan ? 15 : 30)) "${nk[@]}" -U - "$plugin" \
    uri="nbds://alice@127.0.0.1:$PORT/disk?tls-psk-file=$PWD/wrong.psk" --run true \
    >/dev/null 2>"$d/wrong.err" || rc=$?
exit_ok "$rc" "nbdkit, wrong key"
[ "$(grep -c . "$d/wrong.err")" = 1 ] &&
    grep -q "^nbdkit: error: cannot attach nbds://.*refused the TLS handshake" "$d/wrong.err" ||
    fail "nbdkit, wrong key: $(cat "$d/wrong.err")"
if [ "$(id -u)" = 0 ] && [ -w /dev/fuse ] && command -v fusermount3 >/dev/null; then
    "$fuse" "$tls" mnt || fail "smcr-fuse nbds:// mount"
    cleanup_fn "fusermount3 -u -z '$d/mnt' 2>/dev/null"
    cmp -n 8388608 src.img mnt/disk || fail "smcr-fuse over TLS: data differs"
    fusermount3 -u mnt
    echo "TLS-only server: smcr-fuse nbds:// reads the data back equal"
fi
echo "TLS-only server: nbdkit smcr uri=nbds:// size $out, 8 MiB read back equal;" \
    "plain client and wrong key refused:"
cat "$d/plain.err" "$d/wrong.err"
kill -TERM "$pid"; wait "$pid" || fail "smcrd exited $?"

# --- usage errors -------------------------------------------------------------------------
usage_err() {   # PROG ARGS...: exit 2, a line naming the problem, then Try
    local rc=0 p=$1 name; name=$(basename "$1"); shift
    "$p" "$@" >/dev/null 2>"$d/usage.err" || rc=$?
    [ "$rc" = 2 ] || fail "$name $*: exit $rc"
    [ "$(wc -l <"$d/usage.err")" = 2 ] || fail "$name $*: $(cat "$d/usage.err")"
    [ "$(tail -n 1 "$d/usage.err")" = "Try '$name --help' for more information." ] ||
        fail "$name $*: $(cat "$d/usage.err")"
}
usage_err "$smcrd" --bogus
usage_err "$smcrd" -q abc --export x=/dev/null
usage_err "$smcrctl" bogus
usage_err "$smcrctl" --watch x list
usage_err "$fuse" --timeout=x nbd://h/e mnt
rc=0
"$smcrctl" -d /nonexistent list >"$d/ctl.out" 2>"$d/ctl.err" || rc=$?
[ "$rc" = 1 ] || fail "smcrctl -d /nonexistent: exit $rc"
grep -q '/nonexistent: No such file or directory' "$d/ctl.err" || fail "smcrctl: $(cat "$d/ctl.err")"
echo "PASS: quick start from make install DESTDIR=; usage errors in one line and exit 2"
