#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""Writes the seed corpora of the fuzz targets that take streams or text
(corpus/<target>/): a few well-formed inputs each, from which libFuzzer's
mutations reach the parsers' deeper states.  Run from tests/fuzz/ after
changing a format; the files are kept in the tree."""
import os
import struct

def put(target, name, data):
    d = os.path.join(os.path.dirname(os.path.abspath(__file__)), 'corpus', target)
    os.makedirs(d, exist_ok=True)
    if isinstance(data, str):
        data = data.encode()
    with open(os.path.join(d, name), 'wb') as f:
        f.write(data)

# --- NBD, the client's stream (fuzz-nbd-server) ------------------------------
IHAVEOPT = 0x49484156454f5054
def opt(o, data=b''):
    return struct.pack('>QII', IHAVEOPT, o, len(data)) + data
def name_req(name, infos=()):
    return struct.pack('>I', len(name)) + name + struct.pack('>H', len(infos)) + \
        b''.join(struct.pack('>H', i) for i in infos)
def req(typ, off, ln, flags=0, cookie=1):
    return struct.pack('>IHHQQI', 0x25609513, flags, typ, cookie, off, ln)

cflags = struct.pack('>I', 3)
tx = req(0, 0, 4096) + req(1, 4096, 512, 1) + b'w' * 512 + req(3, 0, 0) + \
    req(4, 0, 8192) + req(6, 8192, 4096, 2) + req(5, 0, 4096) + req(0, 1 << 20, 1) + \
    req(2, 0, 0)
put('nbd-server', 'go-structured', b'\x00' + cflags + opt(8) +
    opt(6, name_req(b'disk', (0, 1, 2, 3))) + opt(7, name_req(b'disk', (3,))) + tx)
put('nbd-server', 'list-go-ro', b'\x05' + cflags + opt(3) + opt(7, name_req(b'ro')) +
    req(1, 0, 16) + b'x' * 16 + req(0, 4096 * 3, 8) + req(2, 0, 0))
put('nbd-server', 'export-name', b'\x00' + struct.pack('>I', 1) + opt(5) + opt(9) +
    opt(1, b'big') + req(4, 1 << 62, 4096) + req(0, 0, 33 << 20))
put('nbd-server', 'refused', b'\x80' + cflags + opt(7, name_req(b'disk')) +
    opt(7, name_req(b'secret')) + opt(7, name_req(b'nope')) + opt(2))
put('nbd-server', 'default-export', b'\x01' + cflags + opt(8) + opt(8) +
    opt(7, name_req(b'', (3,))) + req(0, 0, 512, 4) + req(7, 0, 512))
def meta_req(name, queries):
    return struct.pack('>I', len(name)) + name + struct.pack('>I', len(queries)) + \
        b''.join(struct.pack('>I', len(q)) + q for q in queries)
put('nbd-server', 'meta-context', b'\x00' + cflags + opt(9, meta_req(b'disk', ())) +
    opt(8) + opt(10, meta_req(b'disk', (b'base:', b'base:allocation'))) +
    opt(7, name_req(b'disk')) + req(7, 0, 4096) + req(7, 4096, 1 << 20, 8) +
    req(7, 0, 0) + req(2, 0, 0))
put('nbd-server', 'tls-required', b'\x40' + cflags + opt(8) + opt(3) + opt(5, b'x') +
    opt(5) + opt(5) + opt(8) + opt(10, meta_req(b'disk', (b'base:allocation',))) +
    opt(7, name_req(b'disk')) + req(7, 0, 4096) + req(0, 0, 512) + req(2, 0, 0))
def xreq(typ, off, ln, flags=0, cookie=1):
    return struct.pack('>IHHQQQ', 0x21e41c71, flags, typ, cookie, off, ln)
# Extended headers (after structured replies, then a repeat of each), 64-bit
# effect lengths, a payload flag on a READ (skipped), a WRITE without it,
# then a payload beyond the maximum (hangs up).
put('nbd-server', 'extended-headers', b'\x00' + cflags + opt(8) + opt(11) + opt(11) +
    opt(8) + opt(11, b'x') + opt(10, meta_req(b'big', (b'base:allocation',))) +
    opt(7, name_req(b'big', (3,))) + xreq(0, 0, 4096) + xreq(1, 4096, 512, 32) +
    b'w' * 512 + xreq(1, 0, 512) + xreq(0, 0, 8, 32) + b'r' * 8 +
    xreq(7, 0, 5 << 32) + xreq(7, 0, 1 << 40, 8) + xreq(4, 1 << 32, 6 << 32) +
    xreq(6, 0, 1 << 33, 2) + xreq(0, 0, 1 << 32) + xreq(3, 0, 0) +
    xreq(1, 0, 64 << 20, 32) + xreq(2, 0, 0))

# --- NBD, the server's stream (fuzz-nbd-client) -------------------------------
REPLY = 0x0003e889045565a9
greeting = b'NBDMAGIC' + struct.pack('>QH', IHAVEOPT, 3)
def rep(o, t, data=b''):
    return struct.pack('>QIII', REPLY, o, t, len(data)) + data
info_export = struct.pack('>HQH', 0, 1 << 20, 1 | 4 | 8 | 32 | 64 | 256 | 1024)
info_bs = struct.pack('>HIII', 3, 512, 4096, 32 << 20)
ACK, SERVER, INFO = 1, 2, 3
def chunk(flags, typ, cookie, data=b''):
    return struct.pack('>IHHQI', 0x668e33ef, flags, typ, cookie, len(data)) + data
def simple(err, cookie, data=b''):
    return struct.pack('>IIQ', 0x67446698, err, cookie) + data
C = [(g << 16) | i for i, g in enumerate((1, 2, 3, 4, 5))]
structured_tx = (chunk(0, 1, C[0], struct.pack('>Q', 0) + b'r' * 4096) +
                 chunk(0, 2, C[0], struct.pack('>QI', 4096, 4096)) + chunk(1, 0, C[0]) +
                 chunk(1, 0, C[1]) +
                 chunk(1, 0x8002, C[2], struct.pack('>IH', 5, 3) + b'bad' + struct.pack('>Q', 600)) +
                 chunk(1, 0x8001, C[3], struct.pack('>IH', 28, 0)) +
                 chunk(1, 0, C[4]) +
                 chunk(1, 1, 0x60000, struct.pack('>Q', 7) + b'p' * 100))
put('nbd-client', 'structured', b'\x70' + greeting + rep(8, ACK) +
    rep(3, SERVER, struct.pack('>I', 4) + b'diska disk') + rep(3, ACK) +
    rep(6, INFO, info_export) + rep(6, INFO, info_bs) + rep(6, ACK) +
    rep(7, INFO, info_export) + rep(7, INFO, info_bs) + rep(7, ACK) + structured_tx)
simple_tx = (simple(0, C[0], b'r' * 8192) + simple(0, C[1]) + simple(5, C[2]) +
             simple(0, C[3]) + simple(28, C[4]) + simple(0, 0x60000, b'p' * 100))
put('nbd-client', 'simple-go', b'\x03' + greeting + rep(7, INFO, info_export) +
    rep(7, ACK) + simple_tx)
put('nbd-client', 'export-name', b'\x80' + greeting +
    struct.pack('>QH', 1 << 20, 1 | 4) + simple_tx)
put('nbd-client', 'errors', b'\x30' + greeting + rep(8, 0x80000001, b'no') +
    rep(3, 0x80000002, b'policy') + rep(7, 0x80000006, b'unknown export'))

# --- smcrctl's JSON (fuzz-json) ----------------------------------------------
put('json', 'status', '[{"name":"smcrd","pid":12,"smcr":{"lgrs":[{"id":1,"role":"server",'
    '"links":[{"id":1,"state":"active","qp":17,"gid":"fe80::1"}],"conns":[]}]},'
    '"stats":{"connections":3,"fallback_reasons":[{"code":50397184,"count":1,'
    '"reason":"peer has no SMC-R"}]},"sections":{"nbd":{"clients":2,"up":true,'
    '"cursor":[1,2],"x":null,"f":-1.5e3}}}]\n')
put('json', 'escapes', '{"s":"a\\"b\\\\c\\/d\\b\\f\\n\\r\\t\\u0041\\u00e9\\u20ac\\ud83d\\ude00"}')
put('json', 'nested', '[[[[{"a":[1,2,{"b":{}}]}]]],true,false,null,"",0,-0.0,1E+9]')

# --- URIs and HOST[:PORT] (fuzz-uri) ------------------------------------------
for i, u in enumerate(['smcr://10.1.1.2/disk', 'nbd://[fd00::2]:10809/', 'smcr://host:1/a/b',
                       'nbd://[::1]/x%20y', '10.0.0.1:10810', '[fe80::1%eth0]:99', 'example.org',
                       'nbds://alice@[::1]:99/e%20x?tls-certificates=/etc/pki&tls-psk-file=k&'
                       'tls-username=u&tls-hostname=h&tls-verify-peer=false',
                       'nbds://h/?tls-verify-peer=maybe&x']):
    put('uri', 'uri%d' % i, u)

# --- fault specs (fuzz-fault) -------------------------------------------------
for i, s in enumerate(['fail-link=2', 'drop-link=1,for=5000', 'delay-dev=rxe0,ms=200,for=3000',
                       'fail-link=1,after=100,every=50,count=3', 'undrop-link=255',
                       'undelay-dev=mlx5_0', 'clear-link=1']):
    put('fault', 'spec%d' % i, s)

# --- smcrd's config file (fuzz-conf) ------------------------------------------
put('conf', 'full', '''# smcrd.conf
listen = 0.0.0.0
port = 10809
smcr-port = 10810
queue-depth = 64
threads = 2
max-clients = 128
max-memory = 256M
direct = no
fixed-buffers = yes
syn-option = auto
pidfile = /run/smcrd.pid

[export disk]
path = /srv/disk.img
read-only = false
allow = 10.0.0.0/8, fd00::/8
block-size = 4k
description = the disk

[export ro]
path = /srv/ro.img
read-only = yes
allow = *
direct = yes
''')
put('conf', 'export-arg', 'disk=/srv/d.img,ro,allow=10.1.0.0/16,allow=::1,blocksize=4096,direct,desc=x\n')
put('conf', 'bare-path', '/srv/images/vm1.raw\n[export  a ]\npath=/a\n')

# --- control commands (fuzz-ctl) ----------------------------------------------
for i, c in enumerate(['status\n', 'status-json\n', 'stats\n', 'stats-json\n', 'help\n',
                       'fault fail-link=1\n', 'fault drop-dev=rxe0,for=10,after=5\n',
                       'fz hello\n', 'fz fail\n', 'unknown command \r\n', 'stats']):
    put('ctl', 'cmd%d' % i, c)

# --- LLC and CDC state machines (fuzz-lgr-llc, fuzz-lgr-cdc) -----------------
# A program: 0x00/0x08 PICK MSG44 injects MSG on a link of the server/the
# client, 0x02 delivers, 0x03 N lets 10*(N+1) ms pass, 0x04 N sends data,
# 0x06 N allocates an RMB (CONFIRM RKEY), 0x0f adds a link, 0x05 cuts one.
here = os.path.dirname(os.path.abspath(__file__))
def corpus_files(name):
    d = os.path.join(here, 'corpus', name)
    return [open(os.path.join(d, f), 'rb').read() for f in sorted(os.listdir(d))]
for i, m in enumerate(corpus_files('llc')):
    m = (m + bytes(44))[:44]
    put('lgr-llc', 'inject-s%d' % i, b'\x00\x00' + m + b'\x02\x03\x10\x02\x04\x20\x02')
    put('lgr-llc', 'inject-c%d' % i, b'\x06\x03\x08\x01' + m + b'\x02\x03\xff\x02')
put('lgr-llc', 'cut-rkey-delete', b'\x25\x2e\x3d\x27')
put('lgr-llc', 'add-link', b'\x0f\x02\x03\x20\x02\x15\x02\x03\xff\x02')
for i, m in enumerate(corpus_files('cdc')):
    m = (m + bytes(44))[:44]
    put('lgr-cdc', 'inject-s%d' % i, b'\x04\x40\x02\x00\x00' + m + b'\x02\x04\x10\x02')
    put('lgr-cdc', 'inject-c%d' % i, b'\x0c\x40\x02\x08\x01' + m + b'\x02\x0c\x10\x02')
put('lgr-cdc', 'stream', b'\x04\xff\x14\xff\x0c\xff\x1c\xff\x02\x04\x01\x02\x03\x10\x02')

# --- the clients' reply parser (fuzz-nbd-conn) ---------------------------------
# Mode 0x1f/0x1e: all 9 requests out, structured or simple replies; request
# i has cookie (i+1)<<16 | i.
K = [((i + 1) << 16) | i for i in range(9)]
off = lambda o: struct.pack('>Q', o)
put('nbd-conn', 'structured', b'\x1f' +
    chunk(0, 1, K[0], off(0) + b'a' * 2048) + chunk(0, 1, K[0], off(2048) + b'b' * 2048) +
    chunk(1, 0, K[0]) + chunk(1, 0, K[1]) +
    chunk(1, 2, K[2], struct.pack('>QI', 512, 1024)) +
    chunk(1, 0x8001, K[3], struct.pack('>IH', 5, 2) + b'io') +
    chunk(1, 0, K[4]) +
    chunk(0, 1, K[5], off((1 << 20) + 4096) + b'c' * 4096) +
    chunk(0, 2, K[5], struct.pack('>QI', 1 << 20, 4096)) + chunk(1, 0, K[5]) +
    chunk(1, 0x8002, K[6], struct.pack('>IH', 28, 0) + off(100)) +
    chunk(1, 1, K[7], off(7) + b'z'))
put('nbd-conn', 'simple', b'\x3e' +
    simple(0, K[0], b'a' * 4096) + simple(0, K[1]) + simple(0, K[2], b'b' * 1024) +
    simple(5, K[3]) + simple(0, K[4]) + simple(108, K[5]) + simple(0, K[6]) +
    simple(0, K[7], b'z'))
put('nbd-conn', 'shutdown', b'\x1f' + chunk(1, 0x8001, K[0], struct.pack('>IH', 108, 0)) +
    simple(108, K[1]))
put('nbd-conn', 'block-status', b'\x1f' +
    chunk(1, 5, K[8], struct.pack('>IIIII', 1, 4096, 3, 8192, 0)) + chunk(1, 0, K[1]))
