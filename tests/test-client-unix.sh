#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# The clients on smcrd -U (NBD on a Unix socket) through libnbd's URIs:
#  - nbdkit smcr uri=nbd+unix:///disk?socket=PATH: 4 MiB in and out through
#    nbdkit, equal to the image;
#  - smcr-fuse nbd+unix://: 1 MiB written and read back (when /dev/fuse is
#    usable);
#  - smcr-attach -F nbd+unix://: nbd-kside.py checks every byte on 2
#    connections;
#  - nbds+unix://alice@/disk?socket=PATH&tls-psk-file=FILE against smcrd
#    --tls=require --tls-psk on the same kind of socket (plugin and
#    smcr-attach -F; when psktool is there);
#  - an unknown query key, a +unix URI without socket= and socket= on an
#    nbd:// URI: one line naming what is wrong, exit 2 (smcr-fuse,
#    smcr-attach) or 1 (nbdkit).
# smcr-timeout: 120
. "${srcdir:-.}/functions.sh"
. "$srcdir/test-smcrd-lib.sh"
. "$srcdir/test-client-lib.sh"
requires nbdkit --version
requires nbdcopy --version
requires python3 --version
ATTACH=$abs_top_builddir/client/smcr-attach
[ -x "$ATTACH" ] || fail "$ATTACH not built"

d=$(scratch_dir)
sock=$d/smcrd.sock
# nbdkit as start_nbdkit runs it (the ASan runtime first for a sanitized plugin).
# There nbdkit can hang in exit() after the plugin's error (see
# test-client-tls.sh): a timeout counts as its exit 1.
nk=(nbdkit) asan=0
if readelf -d "$PLUGIN" 2>/dev/null | grepq 'NEEDED.*libasan'; then
    nk=(env "LD_PRELOAD=$(gcc -print-file-name=libasan.so)" ASAN_OPTIONS=detect_leaks=0 nbdkit)
    asan=1
fi
truncate -s 16M "$d/disk.img"
make_random "$d/src" 4
start_smcrd -U "$sock" --export "disk=$d/disk.img"
[ -S "$sock" ] || fail "smcrd made no socket at $sock"
u="nbd+unix:///disk?socket=$sock"

# --- nbdkit plugin ----------------------------------------------------------------
start_nbdkit uri="$u" connections=2 ctl=off
nbdkit_roundtrip "plugin nbd+unix" "$d/src" "$d/back" "$d/disk.img"
grepq "nbd+unix:///disk?socket=$sock: .* 2 connection(s)" "$NBDKIT_LOG" ||
    { cat "$NBDKIT_LOG"; fail "plugin: no nbd+unix attach logged"; }
stop_nbdkit
echo "plugin $u: 4 MiB in and out, equal to the image"

# --- smcr-fuse --------------------------------------------------------------------
if [ -c /dev/fuse ] && [ -w /dev/fuse ] && command -v fusermount3 >/dev/null; then
    mnt=$d/mnt
    mkdir "$mnt"
    cleanup_fn "fusermount3 -u -z '$mnt' 2>/dev/null"
    head -c 1M /dev/urandom >"$d/part"
    run_prog "$SMCR_FUSE" -C 2 --ctl=off "$u" "$mnt" 2>"$d/fuse.err" ||
        { cat "$d/fuse.err"; fail "smcr-fuse nbd+unix:// did not mount"; }
    dd if="$d/part" of="$mnt/disk" bs=1M seek=12 conv=notrunc,fsync status=none ||
        fail "smcr-fuse: write"
    cmp <(dd if="$mnt/disk" bs=1M skip=12 count=1 status=none) "$d/part" ||
        fail "smcr-fuse: read back differs"
    fusermount3 -u "$mnt" || fail "fusermount3 -u"
    cmp <(dd if="$d/disk.img" bs=1M skip=12 count=1 status=none) "$d/part" ||
        fail "smcr-fuse: the image differs"
    echo "smcr-fuse $u: 1 MiB written, read back and in the image equal"
else
    echo "smcr-fuse part skipped: no usable /dev/fuse or fusermount3"
fi

# --- smcr-attach --forward -----------------------------------------------------------
attach_kside() {    # WHAT ARGS...: smcr-attach -F ... --exec nbd-kside.py
    local what=$1
    shift
    touch "$d/stop"
    run_prog "$ATTACH" -F -C 2 -E "python3 '$abs_srcdir/nbd-kside.py' '$d/stop' 50" "$@" \
        >"$d/att.out" 2>"$d/att.err" || { cat "$d/att.out" "$d/att.err"; fail "$what"; }
    [ "$(grep -c 'read back equal' "$d/att.out")" = 2 ] ||
        { cat "$d/att.out" "$d/att.err"; fail "$what: want 2 connections read back equal"; }
    echo "$what: $(grep -Eo 'forwarded [0-9]+ request\(s\)' "$d/att.err")"
}
attach_kside "smcr-attach -F $u" "$u"

# --- bad URIs: one line naming the fault --------------------------------------------
bad() {    # WANT-RC TEXT CMD...
    local want=$1 text=$2 rc=0
    shift 2
    timeout $((asan ? 20 : 60)) "$@" >"$d/bad.out" 2>"$d/bad.err" || rc=$?
    [ "$rc" = 124 ] && [ "$asan" = 1 ] && [ "$1" = "${nk[0]}" ] && rc=1
    grep -v '^$' "$d/bad.err" | grep -v 'debug:\|^Try ' >"$d/bad.lines" || true
    [ "$rc" = "$want" ] || { cat "$d/bad.err"; fail "$*: exit $rc, want $want"; }
    [ "$(wc -l <"$d/bad.lines")" = 1 ] || { cat "$d/bad.err"; fail "$*: want one line"; }
    grepq -- "$text" "$d/bad.lines" || { cat "$d/bad.err"; fail "$*: no '$text'"; }
    echo "refused: $(cat "$d/bad.lines")"
}
bad 2 "unknown query key 'tls-certificate'" \
    "$ATTACH" -F -E true "$u&tls-certificate=/x"
bad 2 "socket=PATH is for nbd+unix" "$ATTACH" -F -E true "nbd+unix:///disk"
bad 2 "socket=PATH is for nbd+unix" "$ATTACH" -F -E true "nbd://127.0.0.1/disk?socket=$sock"
bad 2 "needs --forward or --ublk" "$ATTACH" "$u" /dev/nbd0
bad 2 "unknown query key 'colour'" "$SMCR_FUSE" --ctl=off "$u&colour=blue" "$d"
bad 1 "unknown query key 'colour'" "${nk[@]}" -U - "$PLUGIN" uri="$u&colour=blue" --run true
stop_smcrd

# --- nbds+unix://: TLS (PSK) over the Unix socket -------------------------------------
if command -v psktool >/dev/null; then
    psktool -u alice -p "$d/keys.psk" >/dev/null 2>&1 || fail "psktool"
    SMCRD_LOG=$d/psk.log
    # Up means greeting (nbd-probe's LIST is refused without TLS).
    served() {
        timeout 2 bash -c 'exec 3<>/dev/tcp/127.0.0.1/'"$PORT"'; head -c 8 <&3' 2>/dev/null |
            grepq NBDMAGIC
    }
    start_smcrd -U "$sock" --tls=require --tls-psk "$d/keys.psk" --export "disk=$d/disk.img"
    t="nbds+unix://alice@/disk?socket=$sock&tls-psk-file=$d/keys.psk"
    start_nbdkit uri="$t" ctl=off
    nbdcopy "$(nbdkit_uri)" "$d/back2" || fail "plugin nbds+unix: nbdcopy out"
    cmp "$d/back2" "$d/disk.img" || fail "plugin nbds+unix: the export read differs"
    stop_nbdkit
    log_has "PSK identity 'alice'" || fail "smcrd logged no PSK identity"
    echo "plugin nbds+unix://alice@...: the whole export read over TLS, equal to the image"
    attach_kside "smcr-attach -F nbds+unix://" "$t"
    bad 1 "requires TLS" "$ATTACH" -F -E true "$u"
    stop_smcrd
else
    echo "nbds+unix:// part skipped: no psktool"
fi
echo PASS
