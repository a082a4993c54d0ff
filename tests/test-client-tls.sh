#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# The project's clients against smcrd --tls=require (NBD over TCP with
# STARTTLS), with a CA, a server certificate, a client certificate and a
# PSK file made here (certtool, psktool):
#  - nbdkit smcr uri=nbds://...?tls-certificates=DIR: 8 MiB in and out
#    through nbdkit (nbdcopy), equal; smcrd logged the verified client;
#  - the same with server=/tls=require/tls-psk-file= (PSK) parameters;
#  - smcr-fuse nbds:// URI: a file written through the mount reads back
#    equal, and equal in the image smcrd serves;
#  - smcr-attach -F --tls-certificates: nbd-kside.py checks every byte;
#  - tls=on against a server without TLS goes on in the clear;
#  - refused with one clear line and exit 1: a CA that did not sign the
#    server's certificate (plugin, smcr-fuse, smcr-attach), a plain nbd://
#    client ("requires TLS"), TLS asked for on smcr:// (plugin).
# GnuTLS is loaded only for TLS: smcr-attach, smcr-fuse, smcrd and the
# plugin do not link it (readelf), and all of the above work.
# smcr-timeout: 240
. "${srcdir:-.}/functions.sh"
. "$srcdir/test-smcrd-lib.sh"
. "$srcdir/test-client-lib.sh"
requires certtool --version
requires psktool --version
requires nbdkit --version
requires nbdcopy --version
requires python3 --version
# Up means greeting (nbd-probe's LIST would be refused without TLS).
served() {
    timeout 2 bash -c 'exec 3<>/dev/tcp/127.0.0.1/'"$PORT"'; head -c 8 <&3' 2>/dev/null |
        grep -q NBDMAGIC
}
ATTACH=$abs_top_builddir/client/smcr-attach
[ -x "$ATTACH" ] || fail "$ATTACH not built"

if command -v readelf >/dev/null; then
    for f in client/.libs/smcr-attach client/.libs/smcr-fuse server/.libs/smcrd \
             client/.libs/nbdkit-smcr-plugin.so; do
        [ -e "$abs_top_builddir/$f" ] || continue
        readelf -d "$abs_top_builddir/$f" | grep -q 'NEEDED.*libgnutls' &&
            fail "$f links GnuTLS (it is loaded only when TLS is used)"
    done
fi

d=$(scratch_dir)
pki=$d/pki
make_tls_pki "$d"

truncate -s 16M "$d/disk.img"
make_random "$d/src" 8

# One line on stderr, exit 1, and the line says $2:  refused WHAT TEXT CMD...
# nbdkit as run here: the ASan runtime first for a plugin built with
# --enable-sanitizers (as start_nbdkit does); there nbdkit can hang in
# exit() after the plugin's error (see test-quickstart.sh), so a timeout
# counts beside exit 1 and the message is still checked.
nk=(nbdkit) asan=0
if readelf -d "$PLUGIN" 2>/dev/null | grepq 'NEEDED.*libasan'; then
    nk=(env "LD_PRELOAD=$(gcc -print-file-name=libasan.so)" ASAN_OPTIONS=detect_leaks=0 nbdkit)
    asan=1
fi
refused() {
    local what=$1 text=$2 rc=0
    shift 2
    timeout $((asan ? 20 : 60)) "$@" >"$d/ref.out" 2>"$d/ref.err" || rc=$?
    [ "$rc" = 124 ] && [ "$asan" = 1 ] && [ "$1" = "${nk[0]}" ] && rc=1
    [ "$rc" = 1 ] || { cat "$d/ref.err"; fail "$what: exit $rc, want 1"; }
    grep -v '^$' "$d/ref.err" | grep -v 'debug:' >"$d/ref.lines" || true
    [ "$(wc -l <"$d/ref.lines")" = 1 ] || { cat "$d/ref.err"; fail "$what: want one line"; }
    grepq "$text" "$d/ref.lines" || { cat "$d/ref.err"; fail "$what: no '$text'"; }
    echo "$what: refused: $(cat "$d/ref.lines")"
}

start_smcrd --tls=require --tls-certificates "$pki" --export "disk=$d/disk.img"
tls="nbds://127.0.0.1:$PORT/disk"

# --- the nbdkit plugin ------------------------------------------------------------
start_nbdkit uri="$tls?tls-certificates=$d/client" connections=2 ctl=off
nbdkit_roundtrip "plugin" "$d/src" "$d/back" "$d/disk.img"
stop_nbdkit
log_has "client certificate 'alice'.*verified" || fail "smcrd did not verify the plugin's certificate"
echo "plugin nbds:// (X.509): 8 MiB in and out, equal, in the image too"

refused "plugin, foreign CA" "not trusted" \
    "${nk[@]}" -U "$d/x.sock" "$PLUGIN" uri="$tls?tls-certificates=$d/other"
[ -e "$d/x.sock" ] && fail "plugin left its socket behind"
refused "plugin, plain nbd://" "requires TLS" \
    "${nk[@]}" -U "$d/x.sock" "$PLUGIN" uri="nbd://127.0.0.1:$PORT/disk"
refused "plugin, TLS on smcr://" "TLS is for NBD over TCP" \
    "${nk[@]}" -U "$d/x.sock" "$PLUGIN" uri="smcr://127.0.0.1:$PORT/disk" tls=require

# --- smcr-fuse --------------------------------------------------------------------
if [ -c /dev/fuse ] && [ -w /dev/fuse ] && command -v fusermount3 >/dev/null; then
    mnt=$d/mnt
    mkdir "$mnt"
    cleanup_fn "fusermount3 -u -z '$mnt' 2>/dev/null"
    head -c 1M /dev/urandom >"$d/part"
    run_prog "$SMCR_FUSE" -C 2 --ctl=off "$tls?tls-certificates=$d/client" "$mnt" \
        2>"$d/fuse.err" || { cat "$d/fuse.err"; fail "smcr-fuse nbds:// did not mount"; }
    dd if="$d/part" of="$mnt/disk" bs=1M seek=12 conv=notrunc,fsync status=none ||
        fail "smcr-fuse: write"
    cmp <(dd if="$mnt/disk" bs=1M skip=12 count=1 status=none) "$d/part" ||
        fail "smcr-fuse: read back differs"
    cmp <(head -c 8M "$mnt/disk") "$d/src" || fail "smcr-fuse: the plugin's data differs"
    fusermount3 -u "$mnt" || fail "fusermount3 -u"
    cmp <(dd if="$d/disk.img" bs=1M skip=12 count=1 status=none) "$d/part" ||
        fail "smcr-fuse: the image differs"
    echo "smcr-fuse nbds://: 1 MiB written, read back and in the image equal"
    refused "smcr-fuse, foreign CA" "not trusted" \
        "$SMCR_FUSE" -f --ctl=off "$tls?tls-certificates=$d/other" "$mnt"
else
    echo "smcr-fuse part skipped: no usable /dev/fuse or fusermount3"
fi

# --- smcr-attach --forward -----------------------------------------------------
touch "$d/stop"
run_prog "$ATTACH" -F -C 2 --tls-certificates "$d/client" \
    -E "python3 '$abs_srcdir/nbd-kside.py' '$d/stop' 100" "127.0.0.1:$PORT" disk \
    >"$d/att.out" 2>"$d/att.err" || { cat "$d/att.out" "$d/att.err"; fail "smcr-attach over TLS"; }
[ "$(grep -c 'read back equal' "$d/att.out")" = 2 ] || { cat "$d/att.out" "$d/att.err"; fail "smcr-attach: want 2 connections read back equal"; }
echo "smcr-attach -F --tls-certificates: $(grep -Eo 'forwarded [0-9]+ request\(s\)' "$d/att.err")"
refused "smcr-attach, foreign CA" "not trusted" \
    "$ATTACH" -F --tls-certificates "$d/other" -E true "127.0.0.1:$PORT" disk
rc=0; "$ATTACH" --tls "127.0.0.1:$PORT" disk /dev/nbd0 2>/dev/null || rc=$?
[ "$rc" = 2 ] || fail "smcr-attach --tls without --forward: exit $rc, want 2"
stop_smcrd

# --- PSK --------------------------------------------------------------------------
SMCRD_LOG=$d/psk.log
start_smcrd --tls=require --tls-psk "$d/keys.psk" --export "disk=$d/disk.img"
start_nbdkit server="127.0.0.1:$PORT" export=disk tls=require tls-psk-file="$d/keys.psk" \
    tls-username=alice ctl=off
nbdcopy "$(nbdkit_uri)" "$d/back" || fail "plugin PSK: nbdcopy out"
# (nbd-kside.py above wrote its own data into the image.)
cmp "$d/back" "$d/disk.img" || fail "plugin PSK: the export read differs from the image"
stop_nbdkit
log_has "PSK identity 'alice'" || fail "smcrd logged no PSK identity"
echo "plugin PSK: the whole export read, equal to the image"
stop_smcrd

# --- tls=on against a server without TLS: in the clear -----------------------------
SMCRD_LOG=$d/plain.log
start_smcrd --export "disk=$d/disk.img"
out=$("${nk[@]}" -U - "$PLUGIN" server="127.0.0.1:$PORT" export=disk tls=on \
      tls-certificates="$d/client" ctl=off --run 'nbdinfo --size "$uri"') ||
    fail "plugin tls=on against a server without TLS"
[ "$out" = 16777216 ] || fail "plugin tls=on: size $out"
echo "plugin tls=on, server without TLS: served in the clear (size $out)"
stop_smcrd
echo "PASS: plugin, smcr-fuse and smcr-attach over TLS (X.509, PSK); foreign CA and plain clients refused in one line"
