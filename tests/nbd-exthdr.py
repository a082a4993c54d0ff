#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""An NBD client that negotiates NBD_OPT_EXTENDED_HEADERS, for the smcrd
tests (not a test itself); raw sockets, every byte checked.

  nbd-exthdr.py PORT EXPORT      runs the checks below against an export
                                 of more than 4 GiB on 127.0.0.1:PORT that
                                 holds data at 100 MiB (1 MiB) and nowhere
                                 else, and is writable

 - negotiation: OPT_EXTENDED_HEADERS with data, again after success, and
   OPT_STRUCTURED_REPLY after it are refused (INVALID, INVALID,
   EXT_HEADER_REQD); it is accepted after OPT_STRUCTURED_REPLY;
 - every reply is a 32-byte extended chunk carrying the request's cookie
   and offset (FLUSH and WRITE too: no simple replies);
 - WRITE with NBD_CMD_FLAG_PAYLOAD_LEN at 5 GiB, READ back, same bytes;
 - BLOCK_STATUS_EXT over the whole export (64-bit request length) equals
   base:allocation over a compact connection (structured replies), both
   walked to the end and merged, and the layout written;
 - lengths above 32 bits: READ gets EOVERFLOW, BLOCK_STATUS past the end
   EINVAL, WRITE without the payload flag EINVAL, a READ with a payload
   EINVAL after its payload was consumed; TRIM and WRITE_ZEROES of more
   than 4 GiB succeed and read back as zeroes;
 - a WRITE announcing a payload of 2^40 bytes ends the connection.
Prints one line per check; exits 1 on the first failure."""
import socket, struct, sys

NBDMAGIC = 0x4e42444d41474943
IHAVEOPT = 0x49484156454F5054
REPLY = 0x0003e889045565a9
REQ, XREQ = 0x25609513, 0x21e41c71
SIMPLE, STRUCT, XREPLY = 0x67446698, 0x668e33ef, 0x6e8a278c
OPT_GO, OPT_SR, OPT_SET_META, OPT_EXT = 7, 8, 10, 11
REP_ACK, REP_INFO, REP_META = 1, 3, 4
ERR = 1 << 31
REP_ERR_INVALID, REP_ERR_EXT_REQD = ERR | 3, ERR | 10
CMD_READ, CMD_WRITE, CMD_DISC, CMD_FLUSH, CMD_TRIM = 0, 1, 2, 3, 4
CMD_ZEROES, CMD_BS = 6, 7
F_PAYLOAD = 1 << 5
T_NONE, T_DATA, T_HOLE, T_BS, T_BS_EXT = 0, 1, 2, 5, 6
DONE = 1
EINVAL, EOVERFLOW = 22, 75
GiB, MiB = 1 << 30, 1 << 20


def fail(msg):
    print("FAIL:", msg)
    sys.exit(1)


def ok(msg):
    print("ok:", msg, flush=True)


def recv_exact(s, n):
    buf = bytearray()
    while len(buf) < n:
        b = s.recv(min(n - len(buf), 1 << 20))
        if not b:
            raise EOFError("closed after %d of %d bytes" % (len(buf), n))
        buf += b
    return bytes(buf)


class Conn:
    def __init__(self, port):
        self.s = socket.create_connection(("127.0.0.1", port), timeout=20)
        magic, opt, _ = struct.unpack(">QQH", recv_exact(self.s, 18))
        if magic != NBDMAGIC or opt != IHAVEOPT:
            fail("bad greeting")
        self.s.sendall(struct.pack(">I", 3))
        self.ext = False
        self.cookie = 0

    def opt(self, o, data=b""):
        """Sends option o; returns [(type, data)] up to the final reply."""
        self.s.sendall(struct.pack(">QII", IHAVEOPT, o, len(data)) + data)
        out = []
        while True:
            magic, ro, t, ln = struct.unpack(">QIII", recv_exact(self.s, 20))
            if magic != REPLY or ro != o:
                fail("bad option reply to %d" % o)
            out.append((t, recv_exact(self.s, ln)))
            if t == REP_ACK or t & ERR:
                return out

    def go(self, export, extended, meta=True):
        name = export.encode()
        if meta:
            q = b"base:allocation"
            r = self.opt(OPT_SET_META, struct.pack(">I", len(name)) + name +
                         struct.pack(">II", 1, len(q)) + q)
            if r[-1][0] != REP_ACK or r[0][0] != REP_META:
                fail("SET_META_CONTEXT: %r" % r)
        r = self.opt(OPT_GO, struct.pack(">I", len(name)) + name + struct.pack(">H", 0))
        if r[-1][0] != REP_ACK:
            fail("GO refused: %r" % r)
        for t, d in r:
            if t == REP_INFO and struct.unpack(">H", d[:2])[0] == 0:
                _, self.size, self.tflags = struct.unpack(">HQH", d)
        self.ext = extended

    def send(self, typ, off, ln, flags=0, payload=b""):
        self.cookie += 1
        if self.ext:
            hdr = struct.pack(">IHHQQQ", XREQ, flags, typ, self.cookie, off, ln)
        else:
            hdr = struct.pack(">IHHQQI", REQ, flags, typ, self.cookie, off, ln)
        self.s.sendall(hdr + payload)
        return self.cookie

    def chunk(self, cookie, off):
        """One reply chunk: (flags, type, payload); simple replies as
        (DONE, None, error)."""
        if self.ext:
            magic, fl, t, c, o, ln = struct.unpack(">IHHQQQ", recv_exact(self.s, 32))
            if magic != XREPLY:
                fail("reply magic 0x%08x, not an extended reply" % magic)
            if o != off:
                fail("extended reply offset %d, the request's was %d" % (o, off))
        else:
            head = recv_exact(self.s, 16)
            magic = struct.unpack(">I", head[:4])[0]
            if magic == SIMPLE:
                _, err, c = struct.unpack(">IIQ", head)
                if c != cookie:
                    fail("cookie %d, not %d" % (c, cookie))
                return DONE, None, err
            if magic != STRUCT:
                fail("reply magic 0x%08x" % magic)
            _, fl, t, c = struct.unpack(">IHHQ", head)
            ln = struct.unpack(">I", recv_exact(self.s, 4))[0]
        if c != cookie:
            fail("cookie %d, not %d" % (c, cookie))
        if ln > 64 * MiB:
            fail("reply length %d" % ln)
        return fl, t, recv_exact(self.s, ln)

    def cmd(self, typ, off, ln, flags=0, payload=b""):
        """Runs one command: (error, data bytes, extents [(len, flags)])."""
        c = self.send(typ, off, ln, flags, payload)
        err, data, ext = 0, bytearray(), []
        while True:
            fl, t, p = self.chunk(c, off)
            if t is None:           # simple reply
                if typ == CMD_READ and not p:
                    data = recv_exact(self.s, ln)
                return p, bytes(data), ext
            if t & 0x8000:
                err = struct.unpack(">I", p[:4])[0]
            elif t == T_DATA:
                o = struct.unpack(">Q", p[:8])[0]
                if o != off + len(data):
                    fail("data chunk at %d" % o)
                data += p[8:]
            elif t == T_HOLE:
                o, n = struct.unpack(">QI", p)
                data += bytes(n)
            elif t == T_BS_EXT:
                if not self.ext:
                    fail("BLOCK_STATUS_EXT without extended headers")
                _, n = struct.unpack(">II", p[:8])
                if len(p) != 8 + 16 * n or n == 0:
                    fail("BLOCK_STATUS_EXT: count %d, %d bytes" % (n, len(p)))
                for i in range(n):
                    el, ef = struct.unpack(">QQ", p[8 + 16 * i:24 + 16 * i])
                    if ef >> 32:
                        fail("base:allocation status 0x%x" % ef)
                    ext.append((el, ef))
            elif t == T_BS:
                if self.ext:
                    fail("compact BLOCK_STATUS chunk with extended headers")
                for i in range((len(p) - 4) // 8):
                    ext.append(struct.unpack(">II", p[4 + 8 * i:12 + 8 * i]))
            elif t != T_NONE:
                fail("chunk type %d" % t)
            if fl & DONE:
                return err, bytes(data), ext


def walk(c, size):
    """base:allocation of the whole export, merged: [(off, len, flags)]."""
    out, off = [], 0
    while off < size:
        err, _, ext = c.cmd(CMD_BS, off, size - off if c.ext else min(size - off, 0xfffff000))
        if err or not ext:
            fail("BLOCK_STATUS at %d: error %d" % (off, err))
        for ln, fl in ext:
            if out and out[-1][2] == fl and out[-1][0] + out[-1][1] == off:
                out[-1] = (out[-1][0], out[-1][1] + ln, fl)
            else:
                out.append((off, ln, fl))
            off += ln
    return out, off


def negotiation(port, export):
    c = Conn(port)
    r = c.opt(OPT_EXT, b"x")
    if r[-1][0] != REP_ERR_INVALID:
        fail("EXTENDED_HEADERS with data: %r" % r)
    r = c.opt(OPT_SR)
    if r[-1][0] != REP_ACK:
        fail("STRUCTURED_REPLY: %r" % r)
    r = c.opt(OPT_EXT)
    if r[-1][0] != REP_ACK:
        fail("EXTENDED_HEADERS after STRUCTURED_REPLY: %r" % r)
    r = c.opt(OPT_EXT)
    if r[-1][0] != REP_ERR_INVALID:
        fail("EXTENDED_HEADERS again: %r" % r)
    r = c.opt(OPT_SR)
    if r[-1][0] != REP_ERR_EXT_REQD:
        fail("STRUCTURED_REPLY after EXTENDED_HEADERS: %r" % r)
    c.go(export, True)
    err, _, _ = c.cmd(CMD_FLUSH, 0, 0)
    if err:
        fail("FLUSH: error %d" % err)
    c.send(CMD_DISC, 0, 0)
    ok("negotiation: EXTENDED_HEADERS refused with data (INVALID) and again "
       "(INVALID), STRUCTURED_REPLY after it refused (EXT_HEADER_REQD); FLUSH "
       "answered by an extended chunk")


def main(port, export):
    negotiation(port, export)

    c = Conn(port)
    r = c.opt(OPT_EXT)
    if r[-1][0] != REP_ACK:
        fail("EXTENDED_HEADERS refused: %r" % r)
    c.go(export, True)
    size = c.size
    if size <= 5 * GiB + MiB:
        fail("export of %d bytes: more than 5 GiB wanted" % size)

    # Compact connection first, for the reference map.
    k = Conn(port)
    if k.opt(OPT_SR)[-1][0] != REP_ACK:
        fail("STRUCTURED_REPLY refused")
    k.go(export, False)
    cmap, cend = walk(k, size)
    xmap, xend = walk(c, size)
    if cmap != xmap:
        fail("BLOCK_STATUS_EXT map %r differs from the compact map %r" % (xmap, cmap))
    want = [(0, 100 * MiB, 3), (100 * MiB, MiB, 0), (101 * MiB, size - 101 * MiB, 3)]
    if xmap != want:
        fail("map %r, written %r" % (xmap, want))
    err, _, ext = c.cmd(CMD_BS, 0, size)
    ok("BLOCK_STATUS_EXT: %d extents in the first reply to a request of %d bytes; "
       "the whole map equals the compact base:allocation: %r" % (len(ext), size, xmap))

    pat = bytes((i * 7 + 3) & 0xff for i in range(64 * 1024))
    err, _, _ = c.cmd(CMD_WRITE, 5 * GiB, len(pat), F_PAYLOAD, pat)
    if err:
        fail("WRITE with PAYLOAD_LEN at 5 GiB: error %d" % err)
    err, data, _ = c.cmd(CMD_READ, 5 * GiB, len(pat))
    if err or data != pat:
        fail("READ back at 5 GiB: error %d, %d bytes, same: %s" % (err, len(data), data == pat))
    ok("WRITE (PAYLOAD_LEN) and READ of 64 KiB at 5 GiB: same bytes")

    err, _, _ = c.cmd(CMD_READ, 0, 5 * GiB)
    if err != EOVERFLOW:
        fail("READ of 5 GiB: error %d, not EOVERFLOW" % err)
    err, _, _ = c.cmd(CMD_BS, GiB, size)
    if err != EINVAL:
        fail("BLOCK_STATUS past the end: error %d, not EINVAL" % err)
    err, _, _ = c.cmd(CMD_TRIM, GiB, size)
    if err != EINVAL:
        fail("TRIM past the end: error %d, not EINVAL" % err)
    err, _, _ = c.cmd(CMD_WRITE, 0, 512)
    if err != EINVAL:
        fail("WRITE without PAYLOAD_LEN: error %d, not EINVAL" % err)
    err, _, _ = c.cmd(CMD_READ, 0, 8, F_PAYLOAD, b"payload!")
    if err != EINVAL:
        fail("READ with a payload: error %d, not EINVAL" % err)
    err, data, _ = c.cmd(CMD_READ, 5 * GiB, 16)
    if err or data != pat[:16]:
        fail("READ after the refused payload: error %d" % err)
    ok("READ of 5 GiB: EOVERFLOW; BLOCK_STATUS and TRIM past the end: EINVAL; "
       "WRITE without PAYLOAD_LEN and READ with a payload: EINVAL, stream intact")

    err, _, _ = c.cmd(CMD_ZEROES, GiB, 4 * GiB + 4 * MiB + MiB)   # to 5 GiB + 5 MiB
    if err:
        fail("WRITE_ZEROES of %d bytes: error %d" % (4 * GiB + 5 * MiB, err))
    err, data, _ = c.cmd(CMD_READ, 5 * GiB, len(pat))
    if err or data != bytes(len(pat)):
        fail("READ after WRITE_ZEROES: not zeroes")
    c.cmd(CMD_WRITE, 5 * GiB, len(pat), F_PAYLOAD, pat)
    err, _, _ = c.cmd(CMD_TRIM, 4 * GiB, size - 4 * GiB)
    if err:
        fail("TRIM of %d bytes: error %d" % (size - 4 * GiB, err))
    err, data, _ = c.cmd(CMD_READ, 5 * GiB, len(pat))
    if err or data != bytes(len(pat)):
        fail("READ after TRIM: not zeroes")
    xmap, _ = walk(c, size)
    if xmap != want:
        fail("map after TRIM and WRITE_ZEROES %r, not %r" % (xmap, want))
    ok("WRITE_ZEROES of %d bytes and TRIM of %d bytes: zeroes read back, map %r"
       % (4 * GiB + 5 * MiB, size - 4 * GiB, xmap))

    # The compact connection still gets compact replies.
    err, data, _ = k.cmd(CMD_READ, 100 * MiB, 4096)
    err2, _, _ = k.cmd(CMD_FLUSH, 0, 0)
    if err or err2 or len(data) != 4096:
        fail("compact connection: READ %d, FLUSH %d" % (err, err2))
    k.send(CMD_DISC, 0, 0)
    ok("compact connection alongside: structured READ, simple FLUSH reply")

    c.send(CMD_WRITE, 0, 1 << 40, F_PAYLOAD, b"x" * 4096)
    try:
        while True:
            b = c.s.recv(65536)
            if not b:
                break
            fail("reply to a WRITE announcing 2^40 bytes")
    except ConnectionResetError:
        pass
    ok("WRITE announcing a payload of 2^40 bytes: connection closed")


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    main(int(sys.argv[1]), sys.argv[2])
