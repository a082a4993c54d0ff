#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# Edge cases, with libnbd (strict checks off) and our probe client:
# read past the end -> EINVAL and the connection still works; write to a
# read-only export -> EPERM; writes past the end -> ENOSPC; oversized and
# misaligned requests; a client sending garbage is dropped while another
# keeps working; the daemon survives all of it.
# smcr-timeout: 180
. "${srcdir:-.}/functions.sh"
. "$srcdir/test-smcrd-lib.sh"
requires_nbd_python

d=$(scratch_dir)
truncate -s 64M "$d/a.img"
truncate -s 1M "$d/b.img"
start_smcrd --export "disk=$d/a.img" --export "ro=$d/b.img,ro" --export "sect=$d/b.img,blocksize=512"

nbd_python "$(uri disk)" "$(uri ro)" <<'PY' || fail "libnbd edge cases failed"
import errno, sys, nbd

def expect_err(what, fn, want):
    try:
        fn()
    except nbd.Error as e:
        if e.errnum != want:
            sys.exit("%s: got %s, want %s" % (what, errno.errorcode.get(e.errnum), errno.errorcode[want]))
        return
    sys.exit("%s: succeeded, want %s" % (what, errno.errorcode[want]))

for structured in (True, False):
    h = nbd.NBD()
    h.set_request_structured_replies(structured)
    h.set_strict_mode(0)          # let the server judge
    h.connect_uri(sys.argv[1])
    assert h.get_structured_replies_negotiated() == structured
    size = h.get_size()
    h.pwrite(b"\xab" * 4096, 0)
    expect_err("read past the end", lambda: h.pread(4096, size - 512), errno.EINVAL)
    expect_err("read beyond the end", lambda: h.pread(512, size + 4096), errno.EINVAL)
    assert h.pread(4096, 0) == b"\xab" * 4096, "connection broken after EINVAL"
    expect_err("write past the end", lambda: h.pwrite(b"x" * 4096, size - 100), errno.ENOSPC)
    expect_err("zero past the end", lambda: h.zero(8192, size - 4096), errno.ENOSPC)
    expect_err("trim past the end", lambda: h.trim(8192, size - 4096), errno.EINVAL)
    # A read larger than the 32 MiB maximum payload.
    want = errno.EOVERFLOW if structured else errno.EINVAL
    expect_err("oversized read", lambda: h.pread(33 * 1024 * 1024, 0), want)
    assert h.pread(4096, 0) == b"\xab" * 4096, "connection broken after oversized read"
    # Flags not valid for the command.
    expect_err("NO_HOLE on a read",
               lambda: h.pread(512, 0, nbd.CMD_FLAG_NO_HOLE), errno.EINVAL)
    h.flush()
    h.shutdown()

ro = nbd.NBD()
ro.set_strict_mode(0)
ro.connect_uri(sys.argv[2])
assert ro.is_read_only()
expect_err("write to read-only", lambda: ro.pwrite(b"y" * 512, 0), errno.EPERM)
expect_err("trim on read-only", lambda: ro.trim(512, 0), errno.EPERM)
expect_err("zero on read-only", lambda: ro.zero(512, 0), errno.EPERM)
assert len(ro.pread(512, 0)) == 512
ro.shutdown()
print("libnbd edge cases ok")
PY

# Exact error values with our own client, simple and structured replies.
for s in "" -s; do
    out=$(probe $s 127.0.0.1 "$PORT" ops sect r:0:512 r:1048064:1024 r:100:512 w:512:1000 \
          w:1048064:1024 z:1048576:512 W:0:512 f c:0:4096 t:0:512 r:0:512) || fail "probe ops: $out"
    expected="r:0:512 ok
r:1048064:1024 EINVAL
r:100:512 EINVAL
w:512:1000 EINVAL
w:1048064:1024 ENOSPC
z:1048576:512 ENOSPC
W:0:512 ok
f ok
c:0:4096 ok
t:0:512 ok
r:0:512 ok"
    [ "$out" = "$expected" ] || fail "probe ops ($s): got
$out"
    out=$(probe $s 127.0.0.1 "$PORT" ops ro w:0:512 z:0:512 t:0:512 r:0:512)
    [ "$out" = "w:0:512 EPERM
z:0:512 EPERM
t:0:512 EPERM
r:0:512 ok" ] || fail "read-only ops ($s): got
$out"
done

# Garbage: a client in the middle of a session is dropped (and one that
# sends nonsense instead of a handshake), while another keeps working.
nbd_python "$(uri disk)" "$PORT" "$PROBE" <<'PY' || fail "garbage client test failed"
import socket, subprocess, sys, nbd
good = nbd.NBD()
good.connect_uri(sys.argv[1])
good.pwrite(b"\x5a" * 65536, 1 << 20)
# Garbage in the transmission phase (probe sends 64 bytes of 'Z').
out = subprocess.run([sys.argv[3], "127.0.0.1", sys.argv[2], "ops", "disk", "r:0:512", "x"],
                     capture_output=True, text=True)
assert out.returncode == 0 and "x ok" in out.stdout, "garbage client not dropped: %r" % (out.stdout,)
# Garbage instead of the handshake.
s = socket.create_connection(("127.0.0.1", int(sys.argv[2])))
s.settimeout(10)
assert s.recv(18)[:8] == b"NBDMAGIC"
try:
    s.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n" * 4)
    while s.recv(1024):
        pass
except (ConnectionResetError, BrokenPipeError):
    pass            # dropped: what we want
s.close()
# A client that connects and vanishes mid-request.
s = socket.create_connection(("127.0.0.1", int(sys.argv[2])))
s.sendall(b"\0\0\0\3")
s.close()
assert good.pread(65536, 1 << 20) == b"\x5a" * 65536, "good client broken"
good.shutdown()
print("garbage clients dropped, good client fine")
PY

kill -0 "$SMCRD_PID" || fail "smcrd died"
probe 127.0.0.1 "$PORT" list >/dev/null || fail "smcrd no longer serving"
stop_smcrd
log_has "bad request magic" || fail "no log line about the garbage"
echo "PASS: edge cases"
