#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# TLS on NBD/TCP (NBD_OPT_STARTTLS, GnuTLS), with a CA, a server
# certificate, a client certificate and a PSK file made here (certtool,
# psktool; client certificates: test-smcrd-tls-verify.sh):
#  - --tls=require --tls-certificates: nbdinfo over nbds:// says "with
#    TLS"; nbdcopy 8 MiB in and out (multi-conn) equal; base:allocation
#    works inside TLS; a plain nbd:// client is refused (ERR_TLS_REQD) and
#    gets nothing; a client that does not trust the CA fails the handshake;
#  - tls = require, tls-psk = FILE in a config file: nbds://alice@... with
#    tls-psk-file copies the same; a wrong key fails;
#  - --tls=on: plain and TLS clients both served;
#  - --tls=require with --smcr-port: refused at start (exit 2), since
#    SMC-R data does not go through TLS.
# About 6 s.
# smcr-timeout: 120
. "${srcdir:-.}/functions.sh"
. "$srcdir/test-smcrd-lib.sh"
requires certtool --version
requires psktool --version
requires nbdinfo --version
requires nbdcopy --version

# Up means greeting (nbd-probe's LIST would be refused without TLS).
served() {
    timeout 2 bash -c 'exec 3<>/dev/tcp/127.0.0.1/'"$PORT"'; head -c 8 <&3' 2>/dev/null |
        grep -q NBDMAGIC
}

d=$(scratch_dir)
pki=$d/pki
# A CA, a server certificate for 127.0.0.1, another CA, client alice, PSK.
make_tls_pki "$d"
psktool -u alice -p "$d/wrong.psk" >/dev/null 2>&1 || fail "psktool"

truncate -s 16M "$d/disk.img"
dd if=/dev/urandom of="$d/disk.img" bs=1M seek=8 count=1 conv=notrunc status=none
make_random "$d/src" 8

copy_through() {    # WHAT URI
    nbdcopy "$d/src" "$2" || fail "$1: nbdcopy in failed"
    nbdcopy "$2" "$d/back" || fail "$1: nbdcopy out failed"
    cmp <(head -c $((8 << 20)) "$d/back") "$d/src" || fail "$1: data read back differs"
    rm -f "$d/back"
    echo "$1: 8 MiB in and out, equal"
}

# --- X.509, required ----------------------------------------------------------------
start_smcrd --tls=require --tls-certificates "$pki" --export "disk=$d/disk.img"
tls_uri="nbds://127.0.0.1:$PORT/disk?tls-certificates=$d/client"
out=$(nbdinfo "$tls_uri") || fail "nbdinfo over TLS failed"
echo "$out" | grepq "with TLS" || fail "nbdinfo: no TLS: $out"
nbdinfo --map "$tls_uri" | grepq "hole,zero" || fail "no base:allocation inside TLS"
copy_through "x509" "$tls_uri"
log_has "tls: 127.0.0.1:.*TLS1\.[23]" || fail "smcrd logged no TLS session"
# A client that does not upgrade: refused, no export data.
if out=$(nbdinfo "nbd://127.0.0.1:$PORT/disk" 2>&1); then
    fail "a plain client was served with --tls=require: $out"
fi
echo "$out" | grepq "export-size" && fail "a plain client learned the export's size"
python3 - "$PORT" <<'PY' || fail "plain NBD_OPT_GO was not answered NBD_REP_ERR_TLS_REQD"
import socket, struct, sys
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=5)
def rd(n):
    b = b""
    while len(b) < n:
        c = s.recv(n - len(b))
        assert c, "closed"
        b += c
    return b
rd(18)
s.sendall(struct.pack(">I", 3))
name = b"disk"
data = struct.pack(">I", len(name)) + name + struct.pack(">H", 0)
s.sendall(struct.pack(">QII", 0x49484156454f5054, 7, len(data)) + data)
magic, opt, typ, ln = struct.unpack(">QIII", rd(20))
assert (magic, opt, typ) == (0x3e889045565a9, 7, (1 << 31) | 5), (hex(magic), opt, hex(typ))
print("GO without TLS: NBD_REP_ERR_TLS_REQD:", rd(ln).decode())
PY
# A client that does not trust our CA.
if nbdinfo "nbds://127.0.0.1:$PORT/disk?tls-certificates=$d/other" >/dev/null 2>&1; then
    fail "a client trusting another CA was served"
fi
echo "x509: plain client refused (ERR_TLS_REQD), foreign CA refused"
stop_smcrd

# --- PSK, required, from the config file --------------------------------------
SMCRD_LOG=$d/psk.log
printf 'tls = require\ntls-psk = %s\n[export disk]\npath = %s\n' "$d/keys.psk" "$d/disk.img" \
    >"$d/smcrd.conf"
start_smcrd --config "$d/smcrd.conf"
log_has "TLS required on NBD/TCP (pre-shared keys)" || fail "config file: tls keys not taken"
copy_through "psk" "nbds://alice@127.0.0.1:$PORT/disk?tls-psk-file=$d/keys.psk"
if nbdinfo "nbds://alice@127.0.0.1:$PORT/disk?tls-psk-file=$d/wrong.psk" >/dev/null 2>&1; then
    fail "a wrong pre-shared key was accepted"
fi
echo "psk: wrong key refused"
stop_smcrd

# --- on: both -------------------------------------------------------------------------
SMCRD_LOG=$d/on.log
start_smcrd --tls=on --tls-certificates "$pki" --export "disk=$d/disk.img"
nbdinfo "nbd://127.0.0.1:$PORT/disk" | grepq "without TLS" || fail "--tls=on: plain client not served"
nbdinfo "nbds://127.0.0.1:$PORT/disk?tls-certificates=$d/client" | grepq "with TLS" ||
    fail "--tls=on: TLS client not served"
echo "on: plain and TLS clients served"
stop_smcrd

# --- require does not cover SMC-R --------------------------------------------------
rc=0
out=$("$SMCRD" -f -l 127.0.0.1 -p "$(free_port)" --smcr-port "$(free_port)" --tls=require \
      --tls-certificates "$pki" --export "disk=$d/disk.img" 2>&1) || rc=$?
[ "$rc" = 2 ] || fail "--tls=require --smcr-port: exit $rc, expected 2: $out"
echo "$out" | grepq "cannot cover the SMC-R port" || fail "no reason given: $out"
echo "PASS: TLS with X.509 and PSK, require refuses plain clients, on serves both"
