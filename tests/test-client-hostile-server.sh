#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# Every client against a server whose READ replies break the NBD protocol
# (nbd-memserver --read-shape): chunks for the same bytes twice (overlap,
# hole-twice) or a READ ended with bytes never sent (gap).  Each must fail
# the READ with EIO, never return success with the bytes of an earlier
# request, and drop the connection (the reason is logged).  The legal
# shapes (chunks in reverse order, a hole then data) read back equal.
#  1. the nbdkit plugin, driven by libnbd (python3-libnbd): a 64 KiB
#     WRITE, then the READ of the same bytes (nbdkit's request buffer
#     still holds the WRITE's data);
#  2. smcr-attach -F, the forwarder, with a driver side on socket pairs
#     (no nbd.ko): the READ's simple reply carries EIO and no data;
#  3. smcr-fuse (root and /dev/fuse): read(2) of the file fails with EIO.
# Each READ is answered within the client's timeout (5 s) plus slack.
# smcr-timeout: 240
. "${srcdir:-.}/functions.sh"
. "$srcdir/test-smcrd-lib.sh"
. "$srcdir/test-client-lib.sh"
requires nbdkit --version
requires_nbd_python
ATTACH=$abs_top_builddir/client/smcr-attach
[ -x "$MEMSERVER" ] || fail "$MEMSERVER not built"
[ -x "$ATTACH" ] || fail "$ATTACH not built"

d=$(scratch_dir)
BAD="overlap hole-twice gap"
GOOD="reverse holes"

# start_memserver SHAPE: sets MPORT, MPID
start_memserver() {
    rm -f "$d/mem.out"
    "${VALGRIND[@]}" "$MEMSERVER" -s 8 -n disk --read-shape "$1" >"$d/mem.out" 2>>"$d/mem.err" &
    MPID=$!
    cleanup_fn "kill -KILL $MPID 2>/dev/null"
    wait_for 10 grep -q '^port ' "$d/mem.out"
    MPORT=$(sed -n 's/^port //p' "$d/mem.out")
}
stop_memserver() {
    kill -TERM "$MPID" 2>/dev/null || true
    wait "$MPID" 2>/dev/null || true
}

# --- 1: the nbdkit plugin ------------------------------------------------------
cat >"$d/plugin.py" <<'EOF'
import errno, os, sys, time
import nbd
sock, shape, bad = sys.argv[1], sys.argv[2], sys.argv[3] == "bad"
h = nbd.NBD()
h.connect_unix(sock)
data = os.urandom(65536)
h.pwrite(data, 1 << 20)
t0 = time.monotonic()
try:
    got = h.pread(65536, 1 << 20)
    err = 0
except nbd.Error as e:
    # libnbd's Error.errno is the name ("EIO")
    got, err = None, getattr(errno, e.errno, -1) if isinstance(e.errno, str) else e.errno
took = time.monotonic() - t0
if bad:
    if err != errno.EIO:
        print("FAIL plugin %s: READ gave %s, want EIO (%s)" %
              (shape, "success" if got is not None else errno.errorcode.get(err, err),
               "the WRITE's bytes" if got == data else "other bytes"))
        sys.exit(1)
else:
    want = bytes(32768) + data[32768:] if shape == "holes" else data
    if err or got != want:
        print("FAIL plugin %s: READ %s" % (shape, "failed %d" % err if err else "differs"))
        sys.exit(1)
if took > 8:
    print("FAIL plugin %s: READ took %.1f s (timeout 5 s)" % (shape, took))
    sys.exit(1)
print("plugin %s: %s in %.3f s" % (shape, "EIO" if bad else "read back equal", took))
EOF
for shape in $BAD $GOOD; do
    bad=good; case " $BAD " in *" $shape "*) bad=bad ;; esac
    start_memserver "$shape"
    NBDKIT_LOG=$d/nbdkit-$shape.log
    start_nbdkit uri="nbd://127.0.0.1:$MPORT/disk" connections=1 timeout=5
    "$NBD_PYTHON" "$d/plugin.py" "$NBDKIT_SOCK" "$shape" "$bad" || {
        tail -n 20 "$NBDKIT_LOG"; fail "plugin, $shape"; }
    if [ "$bad" = bad ]; then
        grep -Eq -e 'the server sent (data|a hole) for' -e 'reply to a READ .* left [0-9]+ bytes unsent' \
            "$NBDKIT_LOG" ||
            fail "plugin, $shape: no reason logged"
    fi
    stop_nbdkit
    stop_memserver
done

# --- 2: smcr-attach -F ---------------------------------------------------------
# The driver's side: a WRITE of 64 KiB, then its READ, on each pair.
cat >"$d/kside.py" <<'EOF'
import os, socket, struct, sys, time
shape, bad = sys.argv[1], sys.argv[2] == "bad"
REQ, REP = 0x25609513, 0x67446698
def recv_exact(s, n):
    b = bytearray()
    while len(b) < n:
        got = s.recv(n - len(b))
        if not got:
            raise EOFError("the forwarder closed the socket")
        b += got
    return bytes(b)
rc = 0
for fd in [int(x) for x in os.environ["SMCR_ATTACH_FDS"].split()]:
    s = socket.socket(fileno=fd)
    data = os.urandom(65536)
    s.sendall(struct.pack(">IHHQQI", REQ, 0, 1, 1, 1 << 20, len(data)) + data)
    magic, err, h = struct.unpack(">IIQ", recv_exact(s, 16))
    if err:
        print("FAIL -F %s: WRITE failed %d" % (shape, err)); rc = 1; continue
    t0 = time.monotonic()
    s.sendall(struct.pack(">IHHQQI", REQ, 0, 0, 2, 1 << 20, len(data)))
    magic, err, h = struct.unpack(">IIQ", recv_exact(s, 16))
    took = time.monotonic() - t0
    if bad:
        if err != 5:
            got = recv_exact(s, len(data)) if not err else b""
            print("FAIL -F %s: READ error %d, want EIO (5)%s" %
                  (shape, err, "; the WRITE's bytes" if got == data else ""))
            rc = 1
    else:
        got = recv_exact(s, len(data)) if not err else b""
        want = bytes(32768) + data[32768:] if shape == "holes" else data
        if err or got != want:
            print("FAIL -F %s: READ %s" % (shape, "error %d" % err if err else "differs")); rc = 1
    if took > 8:
        print("FAIL -F %s: READ took %.1f s" % (shape, took)); rc = 1
    print("-F %s: %s in %.3f s" % (shape, "EIO" if bad else "read back equal", took))
    s.sendall(struct.pack(">IHHQQI", REQ, 0, 2, 3, 0, 0))
sys.exit(rc)
EOF
for shape in $BAD $GOOD; do
    bad=good; case " $BAD " in *" $shape "*) bad=bad ;; esac
    start_memserver "$shape"
    run_prog "$ATTACH" -F -t -C 1 -D 5 -E "python3 '$d/kside.py' $shape $bad" \
        "127.0.0.1:$MPORT" disk >"$d/att-$shape.out" 2>"$d/att-$shape.err" || true
    cat "$d/att-$shape.out"
    grep -q "^-F $shape: " "$d/att-$shape.out" && ! grep -q FAIL "$d/att-$shape.out" || {
        tail -n 20 "$d/att-$shape.err"; fail "smcr-attach -F, $shape"; }
    stop_memserver
done

# --- 3: smcr-fuse ----------------------------------------------------------------
if [ "$(id -u)" != 0 ] || [ ! -c /dev/fuse ] || ! fusermount3 --version >/dev/null 2>&1; then
    echo "smcr-fuse part skipped: needs root, /dev/fuse and fusermount3"
else
    for shape in $BAD; do
        start_memserver "$shape"
        mnt=$d/mnt-$shape
        mkdir -p "$mnt"
        run_prog "$SMCR_FUSE" -C 1 --ctl=off -t 5 "nbd://127.0.0.1:$MPORT/disk" "$mnt" \
            2>"$d/fuse-$shape.err" || { cat "$d/fuse-$shape.err"; fail "smcr-fuse did not mount"; }
        cleanup_fn "fusermount3 -u '$mnt' 2>/dev/null"
        t0=$SECONDS
        if out=$(dd if="$mnt/disk" of=/dev/null bs=64k count=1 skip=16 2>&1); then
            fail "smcr-fuse, $shape: read(2) succeeded, want EIO"
        fi
        echo "$out" | grepq 'Input/output error' || fail "smcr-fuse, $shape: $out"
        [ $((SECONDS - t0)) -le 8 ] || fail "smcr-fuse, $shape: the read took $((SECONDS - t0)) s"
        echo "smcr-fuse $shape: EIO"
        fusermount3 -u "$mnt"
        stop_memserver
    done
fi
echo "hostile server: every client failed every broken READ with EIO; legal shapes verified"
