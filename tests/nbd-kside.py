#!/usr/bin/python3
# SPDX-License-Identifier: BSD-3-Clause
# The kernel nbd driver's side of smcr-attach --forward --exec, for tests:
# NBD transmission phase (simple replies) on the file descriptors in
# $SMCR_ATTACH_FDS, one thread each, on its own part of the export.  Each
# thread sends batches of up to QD requests (random WRITEs and READs of
# 4 KiB to 256 KiB, FLUSH), matches the replies by cookie, and checks
# every READ against what it read first and wrote since; a READ past the end must fail.  It
# runs until the file STOP exists and MIN_OPS were done per fd, then reads
# its whole part back (in 1 MiB and 3 MiB requests), compares, sends
# NBD_CMD_DISC and prints one line per fd.
# Usage: nbd-kside.py STOP MIN_OPS [QD]
import os
import random
import socket
import struct
import sys
import threading

REQ, REP = 0x25609513, 0x67446698
READ, WRITE, DISC, FLUSH = 0, 1, 2, 3
SLOT = 256 << 10

stop_file, min_ops = sys.argv[1], int(sys.argv[2])
qd = int(sys.argv[3]) if len(sys.argv) > 3 else 8
fds = [int(x) for x in os.environ["SMCR_ATTACH_FDS"].split()]
size = int(os.environ["SMCR_ATTACH_SIZE"])
errors = []
lines = []


def recv_exact(s, n):
    b = bytearray()
    while len(b) < n:
        got = s.recv(n - len(b))
        if not got:
            raise EOFError("the forwarder closed the socket")
        b += got
    return bytes(b)


def run(i, fd):
    s = socket.socket(fileno=fd)
    part = size // len(fds) // SLOT * SLOT
    base = i * part
    model = bytearray(part)
    rng = random.Random(i * 7919 + 1)
    cookie = 0
    ops = wr = rd = 0

    def send(typ, off, length, data=b""):
        nonlocal cookie
        cookie += 1
        s.sendall(struct.pack(">IHHQQI", REQ, 0, typ, cookie, off, length) + data)
        return cookie

    def replies(out):
        # out: cookie -> (type, offset in part, length); returns cookie -> data/err
        got = {}
        while out:
            magic, err, c = struct.unpack(">IIQ", recv_exact(s, 16))
            if magic != REP or c not in out:
                raise ValueError(f"fd {fd}: bad reply magic {magic:#x} cookie {c}")
            typ, off, length = out.pop(c)
            data = recv_exact(s, length) if typ == READ and err == 0 else None
            got[c] = (typ, off, length, err, data)
        return got

    # What the part holds now (1 MiB READs).
    out = {}
    for off in range(0, part, 1 << 20):
        length = min(part - off, 1 << 20)
        out[send(READ, base + off, length)] = (READ, off, length)
    for c, (typ, off, length, err, data) in replies(out).items():
        if err:
            raise ValueError(f"fd {fd}: READ at {base + off} failed: {err}")
        model[off:off + length] = data
    while ops < min_ops or not os.path.exists(stop_file):
        out = {}
        slots = rng.sample(range(part // SLOT), min(qd, part // SLOT))
        for sl in slots:
            length = rng.randrange(1, SLOT // 4096 + 1) * 4096
            off = sl * SLOT
            if rng.random() < 0.5:
                data = rng.randbytes(length)
                model[off:off + length] = data
                out[send(WRITE, base + off, length, data)] = (WRITE, off, length)
                wr += length
            else:
                out[send(READ, base + off, length)] = (READ, off, length)
                rd += length
        if rng.random() < 0.1:
            out[send(FLUSH, 0, 0)] = (FLUSH, 0, 0)
        for c, (typ, off, length, err, data) in replies(out).items():
            ops += 1
            if err:
                raise ValueError(f"fd {fd}: request type {typ} at {off} failed: {err}")
            if typ == READ and data != bytes(model[off:off + length]):
                raise ValueError(f"fd {fd}: READ at {base + off} + {length} differs")
    # A READ past the end fails (the forwarder passes the error on).
    c = send(READ, size, 4096)
    err = replies({c: (READ, size, 4096)})[c][3]
    if err == 0:
        raise ValueError(f"fd {fd}: a READ past the end succeeded")
    # The whole part back, in 1 MiB and 3 MiB requests.
    off, out, back = 0, {}, {}
    while off < part:
        length = min(part - off, (3 << 20) if (off >> 20) % 2 else (1 << 20))
        out[send(READ, base + off, length)] = (READ, off, length)
        off += length
    for c, (typ, o, length, err, data) in replies(out).items():
        if err or data != bytes(model[o:o + length]):
            raise ValueError(f"fd {fd}: read back at {base + o} + {length} differs (err {err})")
    send(DISC, 0, 0)
    lines.append(f"fd {fd}: {ops} requests, {wr} bytes written, {rd} read, "
                 f"{part} read back equal")
    s.close()


def guarded(i, fd):
    try:
        run(i, fd)
    except Exception as e:  # noqa: BLE001: reported and counted
        errors.append(str(e))


ts = [threading.Thread(target=guarded, args=(i, fd)) for i, fd in enumerate(fds)]
for t in ts:
    t.start()
for t in ts:
    t.join()
for line in lines:
    print(line)
for e in errors:
    print("FAIL:", e, file=sys.stderr)
sys.exit(1 if errors or not lines else 0)
