#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""Hostile NBD / CLC clients for the smcrd limit tests (not a test itself).

  hostile-clients.py abandon PORT N       N connections that send half a
                                          CLC Proposal and go, in waves
  hostile-clients.py hold PORT N SECS     N connections that send nothing
                                          and stay SECS
  hostile-clients.py loris PORT N GAP SECS  N NBD clients that trickle one
                                          byte of an option every GAP s
  hostile-clients.py announce PORT EXPORT N SIZE SECS
                                          N clients that announce a WRITE
                                          of SIZE and send 1 byte of it
  hostile-clients.py name PORT NAME        NBD_OPT_GO and NBD_OPT_EXPORT_NAME
                                          with NAME (Python escapes decoded)
  hostile-clients.py good PORT EXPORT SECS  GO, WRITE 1 MiB, READ it back and
                                          compare, within SECS; prints the time
  hostile-clients.py trickle PORT EXPORT GAP  a 64 KiB WRITE in 2 halves GAP s
                                          apart, then READ it back
  hostile-clients.py tlsloris PORT N GAP SECS  N clients that send
                                          NBD_OPT_STARTTLS, then trickle a TLS
                                          record one byte every GAP s
  hostile-clients.py noread PORT EXPORT N COUNT SIZE SECS [spread]
                                          N clients that each send COUNT
                                          READs of SIZE and read no reply
                                          for SECS; spread: each READ at its
                                          own offset (none in the page cache:
                                          none is sent from it)
  hostile-clients.py garbage PORT N        N connections, one after the
                                          other, that send an option with a
                                          bad magic; prints the time taken
  hostile-clients.py badclc PORT SECS      for SECS, one connection after
                                          the other that sends a whole CLC
                                          Proposal with a wrong trailing
                                          eyecatcher; prints the count
  hostile-clients.py badgo PORT EXPORT SECS  for SECS, one connection after
                                          the other that asks NBD_OPT_GO
                                          for EXPORT (refused); prints the
                                          count
  hostile-clients.py idle PORT EXPORT SECS GAP  GO, then a 4 KiB READ every
                                          GAP s (0: none) for SECS; prints
                                          "closed after T s" or "open"
  hostile-clients.py sessions PORT EXPORT N SECS  N clients that GO (one
                                          after the other) and then send
                                          nothing for SECS; prints
                                          "sessions K" (K of them in)
  hostile-clients.py readlat PORT EXPORT N SIZE  GO, WRITE SIZE bytes at
                                          offset 0, then N READs of them one
                                          at a time, each compared; prints
                                          the READ latencies (ms)
  hostile-clients.py exthdr PORT EXPORT N  N clients, one after the other,
                                          that negotiate extended headers
                                          and send in turn: a request with
                                          the compact magic, a WRITE that
                                          announces 2^63 bytes of payload,
                                          a BLOCK_STATUS of 2^64-1 bytes
                                          from offset 2^64-512, a header cut
                                          short; prints "hung up K, answered
                                          J" (K connections closed by the
                                          server, J error replies seen)
Environment: HOSTILE_SRC=ADDR connects from ADDR (e.g. 127.0.0.2);
HOSTILE_OFFSET=BYTES adds BYTES to noread's offsets.
Prints one line of figures; exits non-zero on a setup failure."""
import os, resource, socket, struct, sys, time

EYE = bytes([0xE2, 0xD4, 0xC3, 0xD9])
NBDMAGIC = 0x4e42444d41474943
IHAVEOPT = 0x49484156454F5054

soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))


def conn(port):
    src = os.environ.get("HOSTILE_SRC")
    s = socket.create_connection(("127.0.0.1", port), timeout=10,
                                 source_address=(src, 0) if src else None)
    return s


def abandon(port, n):
    done = 0
    wave = 100
    while done < n:
        socks = []
        for _ in range(min(wave, n - done)):
            s = conn(port)
            # a Proposal header cut short: eyecatcher, type 1, length 52
            s.sendall(EYE + bytes([1, 0, 52, 0x10]))
            socks.append(s)
        for s in socks:
            s.close()
        done += len(socks)
    print("abandoned", done)


def hold(port, n, secs):
    socks = []
    for _ in range(n):
        try:
            socks.append(conn(port))
        except OSError:
            break
    print("holding", len(socks), flush=True)
    time.sleep(secs)
    for s in socks:
        s.close()


def nbd_greet(s):
    buf = b""
    while len(buf) < 18:
        b = s.recv(18 - len(buf))
        if not b:
            raise OSError("closed in the greeting")
        buf += b
    magic, opt, flags = struct.unpack(">QQH", buf)
    assert magic == NBDMAGIC and opt == IHAVEOPT, "bad greeting"
    s.sendall(struct.pack(">I", 3))   # fixed newstyle, no zeroes


def loris(port, n, gap, secs):
    socks = []
    for _ in range(n):
        try:
            s = conn(port)
            nbd_greet(s)
            # NBD_OPT_GO with a 100-byte payload: sent one byte at a time
            s.sendall(struct.pack(">QII", IHAVEOPT, 7, 100))
            socks.append(s)
        except OSError:
            break
    print("loris", len(socks), flush=True)
    t0 = time.monotonic()
    alive = list(socks)
    while time.monotonic() - t0 < secs and alive:
        time.sleep(gap)
        still = []
        for s in alive:
            try:
                s.sendall(b"\0")
                still.append(s)
            except OSError:
                s.close()
        alive = still
    print("loris alive", len(alive), "after", round(time.monotonic() - t0), "s", flush=True)
    for s in alive:
        s.close()


def go(s, export):
    name = export.encode()
    payload = struct.pack(">I", len(name)) + name + struct.pack(">H", 0)
    s.sendall(struct.pack(">QII", IHAVEOPT, 7, len(payload)) + payload)
    while True:
        hdr = b""
        while len(hdr) < 20:
            b = s.recv(20 - len(hdr))
            if not b:
                raise OSError("closed in GO")
            hdr += b
        magic, opt, rtype, ln = struct.unpack(">QIII", hdr)
        data = b""
        while len(data) < ln:
            data += s.recv(ln - len(data))
        if rtype == 1:
            return
        if rtype & 0x80000000:
            raise OSError("GO refused: %x %s" % (rtype, data[4:] if len(data) > 4 else data))


def announce(port, export, n, size, secs):
    socks = []
    for i in range(n):
        try:
            s = conn(port)
            nbd_greet(s)
            go(s, export)
            # NBD_CMD_WRITE of size bytes at 0, then one byte of it
            s.sendall(struct.pack(">IHHQQI", 0x25609513, 0, 1, i, 0, size) + b"x")
            socks.append(s)
        except OSError as e:
            print("announce", i, e, flush=True)
            break
    print("announcing", len(socks), flush=True)
    time.sleep(secs)
    for s in socks:
        s.close()


def name(port, export):
    raw = export.encode().decode("unicode_escape").encode("latin-1")
    s = conn(port)
    nbd_greet(s)
    payload = struct.pack(">I", len(raw)) + raw + struct.pack(">H", 0)
    s.sendall(struct.pack(">QII", IHAVEOPT, 7, len(payload)) + payload)
    s.recv(4096)
    s.sendall(struct.pack(">QII", IHAVEOPT, 1, len(raw)) + raw)
    try:
        s.recv(4096)
    except OSError:
        pass
    s.close()
    print("sent", len(raw), "byte name")


def recv_exact(s, n):
    buf = b""
    while len(buf) < n:
        b = s.recv(n - len(buf))
        if not b:
            raise OSError("closed")
        buf += b
    return buf


def simple_reply(s, handle):
    magic, err, h = struct.unpack(">IIQ", recv_exact(s, 16))
    assert magic == 0x67446698 and h == handle, "bad reply"
    if err:
        raise OSError("NBD error %d" % err)


def write_read(s, data, halves_gap=None):
    hdr = struct.pack(">IHHQQI", 0x25609513, 0, 1, 1, 0, len(data))
    if halves_gap is None:
        s.sendall(hdr + data)
    else:
        s.sendall(hdr + data[:len(data) // 2])
        time.sleep(halves_gap)
        s.sendall(data[len(data) // 2:])
    simple_reply(s, 1)
    s.sendall(struct.pack(">IHHQQI", 0x25609513, 0, 0, 2, 0, len(data)))
    simple_reply(s, 2)
    back = recv_exact(s, len(data))
    if back != data:
        raise OSError("data read back differs")


def good(port, export, secs, size=1 << 20, gap=None):
    t0 = time.monotonic()
    s = conn(port)
    s.settimeout(secs)
    nbd_greet(s)
    go(s, export)
    write_read(s, os.urandom(size), gap)
    print("good client (%d bytes) done in %.1f s" % (size, time.monotonic() - t0))


def trickle(port, export, gap):
    s = conn(port)
    nbd_greet(s)
    go(s, export)
    write_read(s, os.urandom(65536), gap)
    print("trickling client done")


def opt_reply(s):
    magic, opt, rtype, ln = struct.unpack(">QIII", recv_exact(s, 20))
    recv_exact(s, ln)
    return rtype


def tlsloris(port, n, gap, secs):
    socks = []
    for _ in range(n):
        try:
            s = conn(port)
            nbd_greet(s)
            s.sendall(struct.pack(">QII", IHAVEOPT, 5, 0))      # STARTTLS
            if opt_reply(s) != 1:
                raise OSError("STARTTLS not acknowledged")
            s.sendall(b"\x16\x03\x01\x01\x00")               # a 256-byte record
            socks.append(s)
        except OSError as e:
            print("tlsloris:", e, flush=True)
            break
    print("tlsloris", len(socks), flush=True)
    t0 = time.monotonic()
    alive = list(socks)
    while time.monotonic() - t0 < secs and alive:
        time.sleep(gap)
        still = []
        for s in alive:
            try:
                s.sendall(b"\1")
                still.append(s)
            except OSError:
                s.close()
        alive = still
    print("tlsloris alive", len(alive), "after", round(time.monotonic() - t0), "s", flush=True)
    for s in alive:
        s.close()


def noread(port, export, n, count, size, secs, spread=False):
    socks = []
    for i in range(n):
        s = conn(port)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        nbd_greet(s)
        go(s, export)
        base = int(os.environ.get("HOSTILE_OFFSET", "0"))
        s.sendall(b"".join(struct.pack(">IHHQQI", 0x25609513, 0, 0, j,
                                       base + ((i * count + j) * size if spread else 0),
                                       size)
                           for j in range(count)))
        socks.append(s)
    print("noread", len(socks), flush=True)
    time.sleep(secs)
    for s in socks:
        s.close()


def garbage(port, n):
    t0 = time.monotonic()
    for _ in range(n):
        s = conn(port)
        nbd_greet(s)
        s.sendall(struct.pack(">QII", 0x1122334455667788, 1, 0))
        try:
            s.recv(64)
        except OSError:
            pass
        s.close()
    print("garbage %d in %.1f s" % (n, time.monotonic() - t0), flush=True)


def drain(s):
    try:
        while s.recv(4096):
            pass
    except OSError:
        pass


def badclc(port, secs):
    n = 0
    end = time.monotonic() + secs
    while time.monotonic() < end:
        s = conn(port)
        # a Proposal of 52 bytes, all zero, but for a trailer of "XXXX"
        s.sendall(EYE + bytes([1, 0, 52, 0x10]) + bytes(40) + b"XXXX")
        drain(s)
        s.close()
        n += 1
    print("badclc %d in %.1f s" % (n, secs), flush=True)


def badgo(port, export, secs):
    n = 0
    end = time.monotonic() + secs
    while time.monotonic() < end:
        s = conn(port)
        nbd_greet(s)
        try:
            go(s, export)
            sys.exit("GO for %s was granted" % export)
        except OSError:
            pass
        s.close()
        n += 1
    print("badgo %d in %.1f s" % (n, secs), flush=True)


def idle(port, export, secs, gap):
    s = conn(port)
    nbd_greet(s)
    go(s, export)
    t0 = time.monotonic()
    handle = 0
    while time.monotonic() - t0 < secs:
        try:
            if gap > 0:
                handle += 1
                s.sendall(struct.pack(">IHHQQI", 0x25609513, 0, 0, handle, 0, 4096))
                simple_reply(s, handle)
                recv_exact(s, 4096)
                s.settimeout(gap)
            else:
                s.settimeout(max(0.05, secs - (time.monotonic() - t0)))
            if s.recv(1, socket.MSG_PEEK) == b"":
                raise OSError("closed")
        except socket.timeout:
            continue
        except OSError:
            print("closed after %.1f s" % (time.monotonic() - t0), flush=True)
            return
    print("open after %.1f s" % (time.monotonic() - t0), flush=True)
    s.close()


def sessions(port, export, n, secs):
    socks = []
    for _ in range(n):
        try:
            s = conn(port)
            nbd_greet(s)
            go(s, export)
            socks.append(s)
        except (OSError, struct.error):
            pass
    print("sessions", len(socks), flush=True)
    time.sleep(secs)
    for s in socks:
        s.close()


def readlat(port, export, n, size):
    s = conn(port)
    s.settimeout(30)
    nbd_greet(s)
    go(s, export)
    data = os.urandom(size)
    s.sendall(struct.pack(">IHHQQI", 0x25609513, 0, 1, 1, 0, size) + data)
    simple_reply(s, 1)
    lat = []
    for i in range(n):
        t0 = time.monotonic()
        s.sendall(struct.pack(">IHHQQI", 0x25609513, 0, 0, 2 + i, 0, size))
        simple_reply(s, 2 + i)
        if recv_exact(s, size) != data:
            raise OSError("data read back differs")
        lat.append((time.monotonic() - t0) * 1000)
    lat.sort()
    print("readlat %d x %d bytes: median %.1f ms max %.1f ms" %
          (n, size, lat[len(lat) // 2], lat[-1]))


def exthdr(port, export, n):
    hung = answered = 0
    for i in range(n):
        s = conn(port)
        nbd_greet(s)
        s.sendall(struct.pack(">QII", IHAVEOPT, 11, 0))
        opt_reply(s)
        go(s, export)
        kind = i % 4
        if kind == 0:      # compact header (and 4 bytes more) after extended headers
            s.sendall(struct.pack(">IHHQQI", 0x25609513, 0, 0, 1, 0, 512) + bytes(4))
        elif kind == 1:    # payload of 2^63 bytes announced
            s.sendall(struct.pack(">IHHQQQ", 0x21e41c71, 1 << 5, 1, 1, 0, 1 << 63))
        elif kind == 2:    # offset + length wraps around 2^64
            s.sendall(struct.pack(">IHHQQQ", 0x21e41c71, 0, 7, 1, (1 << 64) - 512,
                                  (1 << 64) - 1))
        else:              # half a header, then gone
            s.sendall(struct.pack(">IHHQ", 0x21e41c71, 0, 0, 1))
            s.close()
            continue
        try:
            b = s.recv(65536)
            if b:
                answered += 1
                magic = struct.unpack(">I", b[:4])[0]
                assert magic == 0x6e8a278c, "reply magic 0x%08x" % magic
            else:
                hung += 1
        except ConnectionResetError:
            hung += 1
        s.close()
    print("hung up %d, answered %d" % (hung, answered))


cmd = sys.argv[1]
if cmd == "abandon":
    abandon(int(sys.argv[2]), int(sys.argv[3]))
elif cmd == "hold":
    hold(int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4]))
elif cmd == "loris":
    loris(int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4]), float(sys.argv[5]))
elif cmd == "announce":
    announce(int(sys.argv[2]), sys.argv[3], int(sys.argv[4]), int(sys.argv[5]),
             float(sys.argv[6]))
elif cmd == "good":
    # good PORT EXPORT SECS [SIZE [GAP]]: write SIZE bytes (in two halves
    # GAP seconds apart) and read them back, within SECS
    good(int(sys.argv[2]), sys.argv[3], float(sys.argv[4]),
         int(sys.argv[5]) if len(sys.argv) > 5 else 1 << 20,
         float(sys.argv[6]) if len(sys.argv) > 6 else None)
elif cmd == "trickle":
    trickle(int(sys.argv[2]), sys.argv[3], float(sys.argv[4]))
elif cmd == "tlsloris":
    tlsloris(int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4]), float(sys.argv[5]))
elif cmd == "noread":
    noread(int(sys.argv[2]), sys.argv[3], int(sys.argv[4]), int(sys.argv[5]),
           int(sys.argv[6]), float(sys.argv[7]),
           len(sys.argv) > 8 and sys.argv[8] == "spread")
elif cmd == "garbage":
    garbage(int(sys.argv[2]), int(sys.argv[3]))
elif cmd == "badclc":
    badclc(int(sys.argv[2]), float(sys.argv[3]))
elif cmd == "badgo":
    badgo(int(sys.argv[2]), sys.argv[3], float(sys.argv[4]))
elif cmd == "idle":
    idle(int(sys.argv[2]), sys.argv[3], float(sys.argv[4]), float(sys.argv[5]))
elif cmd == "sessions":
    sessions(int(sys.argv[2]), sys.argv[3], int(sys.argv[4]), float(sys.argv[5]))
elif cmd == "readlat":
    readlat(int(sys.argv[2]), sys.argv[3], int(sys.argv[4]), int(sys.argv[5]))
elif cmd == "name":
    name(int(sys.argv[2]), sys.argv[3])
elif cmd == "exthdr":
    exthdr(int(sys.argv[2]), sys.argv[3], int(sys.argv[4]))
else:
    sys.exit("usage: see the source")
