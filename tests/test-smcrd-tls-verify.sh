#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# Who connects over TLS: with a ca-cert.pem in
# --tls-certificates, smcrd requires and verifies the client's certificate
# (as qemu-nbd does):
#  - a certificate from the CA: served, its name logged as verified;
#  - a self-signed one, one from another CA (the reference tester's
#    tlswrongcert), none at all: refused, nothing read;
#  - --tls-verify-peer=off: all three served, names logged "not verified";
#  - tls-allow per export: a certificate name (CN) or PSK identity not on
#    the list neither sees the export (LIST) nor opens it; one on it does;
#  - --tls-verify-peer=on without a ca-cert.pem: refused at start (exit 2).
# About 5 s.
# smcr-timeout: 120
. "${srcdir:-.}/functions.sh"
. "$srcdir/test-smcrd-lib.sh"
requires certtool --version
requires psktool --version
requires nbdinfo --version

served() {
    timeout 2 bash -c 'exec 3<>/dev/tcp/127.0.0.1/'"$PORT"'; head -c 8 <&3' 2>/dev/null |
        grep -q NBDMAGIC
}

d=$(scratch_dir)
pki=$d/pki
mkdir "$pki" "$d/other" "$d/good" "$d/bob" "$d/self" "$d/wrongca" "$d/none" "$d/nocadir"
key() { certtool --generate-privkey --outfile "$1" 2>/dev/null || fail "certtool: key $1"; }
printf 'cn = smcrbd test CA\nca\ncert_signing_key\nexpiration_days = 2\n' >"$d/ca.info"
key "$pki/ca-key.pem"
certtool --generate-self-signed --load-privkey "$pki/ca-key.pem" --template "$d/ca.info" \
    --outfile "$pki/ca-cert.pem" 2>/dev/null || fail "certtool: CA"
key "$d/other/ca-key.pem"
certtool --generate-self-signed --load-privkey "$d/other/ca-key.pem" --template "$d/ca.info" \
    --outfile "$d/other/ca-cert.pem" 2>/dev/null || fail "certtool: other CA"
key "$pki/server-key.pem"
printf 'cn = localhost\nip_address = 127.0.0.1\ntls_www_server\nencryption_key\nsigning_key\nexpiration_days = 2\n' \
    >"$d/server.info"
certtool --generate-certificate --load-ca-certificate "$pki/ca-cert.pem" \
    --load-ca-privkey "$pki/ca-key.pem" --load-privkey "$pki/server-key.pem" \
    --template "$d/server.info" --outfile "$pki/server-cert.pem" 2>/dev/null || fail "certtool: server"
cp "$pki/server-key.pem" "$pki/server-cert.pem" "$d/nocadir/"

client_cert() {    # DIR CN CA-DIR|self
    local dir=$1
    cp "$pki/ca-cert.pem" "$dir/"       # the client trusts our server
    key "$dir/client-key.pem"
    printf 'cn = %s\ntls_www_client\nencryption_key\nsigning_key\nexpiration_days = 2\n' "$2" \
        >"$dir/client.info"
    if [ "$3" = self ]; then
        certtool --generate-self-signed --load-privkey "$dir/client-key.pem" \
            --template "$dir/client.info" --outfile "$dir/client-cert.pem" 2>/dev/null
    else
        certtool --generate-certificate --load-ca-certificate "$3/ca-cert.pem" \
            --load-ca-privkey "$3/ca-key.pem" --load-privkey "$dir/client-key.pem" \
            --template "$dir/client.info" --outfile "$dir/client-cert.pem" 2>/dev/null
    fi || fail "certtool: client $2"
}
client_cert "$d/good" alice "$pki"
client_cert "$d/bob" bob "$pki"
client_cert "$d/self" alice self
client_cert "$d/wrongca" alice "$d/other"
cp "$pki/ca-cert.pem" "$d/none/"        # trusts the server, has no certificate

truncate -s 4M "$d/disk.img"
printf 'smcrbd-tls-verify' | dd of="$d/disk.img" bs=1 seek=65536 conv=notrunc status=none

# The export's size as nbdinfo reports it (known only after NBD_OPT_GO).
served_to() {    # EXPORT CLIENT-DIR
    nbdinfo --size "nbds://127.0.0.1:$PORT/$1?tls-certificates=$2" 2>/dev/null
}
refused_to() {
    local out
    if out=$(served_to "$1" "$2"); then
        fail "$1 served to $(basename "$2") ($out)"
    fi
}

# --- default: CA present, certificates required and verified -------------
SMCRD_LOG=$d/verify.log
start_smcrd --tls=require --tls-certificates "$pki" --export "disk=$d/disk.img" \
    --export "alice=$d/disk.img,tls-allow=alice"
log_has "client certificates verified" || fail "start-up does not say certificates are verified"
[ "$(served_to disk "$d/good")" = 4194304 ] || fail "CA-signed client certificate refused"
log_has "client certificate 'alice' (CN=alice), verified" || fail "peer name not logged"
if [ -n "$NBD_PYTHON" ]; then
    got=$(nbd_python "nbds://127.0.0.1:$PORT/disk?tls-certificates=$d/good" <<'PY'
import nbd, sys
h = nbd.NBD()
h.set_uri_allow_local_file(True)
h.connect_uri(sys.argv[1])
sys.stdout.write(h.pread(17, 65536).decode())
PY
) || fail "libnbd read failed"
    [ "$got" = smcrbd-tls-verify ] || fail "read back '$got'"
fi
for who in self wrongca none; do
    refused_to disk "$d/$who"
done
log_has "handshake failed.*certificate" || fail "no certificate refusal logged"
echo "verify on: CA-signed served; self-signed, other CA, no certificate refused"
# tls-allow: alice may use 'alice'; bob is verified but not on its list.
[ "$(served_to alice "$d/good")" = 4194304 ] || fail "tls-allow: alice refused"
refused_to alice "$d/bob"
log_has "export 'alice' not allowed for TLS name 'bob' (tls-allow)" || fail "tls-allow refusal not logged"
list=$(nbdinfo --list "nbds://127.0.0.1:$PORT/?tls-certificates=$d/bob" 2>&1) || fail "LIST as bob: $list"
echo "$list" | grepq "export=\"alice\"\|export: alice" && fail "bob's LIST shows 'alice': $list"
echo "$list" | grepq "disk" || fail "bob's LIST lacks 'disk': $list"
echo "tls-allow: alice served, bob refused and not listed"
stop_smcrd

# --- the switch off: anything with TLS is served ---------------------------
SMCRD_LOG=$d/off.log
start_smcrd --tls=require --tls-certificates "$pki" --tls-verify-peer=off \
    --export "disk=$d/disk.img" --export "alice=$d/disk.img,tls-allow=alice"
log_has "client certificates not verified" || fail "start-up does not say certificates are not verified"
for who in good self wrongca none; do
    [ "$(served_to disk "$d/$who")" = 4194304 ] || fail "verify off: $who refused"
done
log_has "client certificate 'alice' (CN=alice), not verified" || fail "unverified name not logged"
# An unverified name is no name: tls-allow refuses it.
refused_to alice "$d/self"
echo "verify off: all served; an unverified name does not pass tls-allow"
stop_smcrd

# --- PSK identities and tls-allow ----------------------------------------------
psktool -u alice -p "$d/keys.psk" >/dev/null 2>&1 || fail "psktool"
psktool -u bob -p "$d/keys.psk" >/dev/null 2>&1 || fail "psktool"
SMCRD_LOG=$d/psk.log
printf 'tls = require\ntls-psk = %s\n[export disk]\npath = %s\ntls-allow = carol, alice\n' \
    "$d/keys.psk" "$d/disk.img" >"$d/smcrd.conf"
start_smcrd --config "$d/smcrd.conf"
nbdinfo --size "nbds://alice@127.0.0.1:$PORT/disk?tls-psk-file=$d/keys.psk" >/dev/null ||
    fail "psk: alice refused"
log_has "PSK identity 'alice'" || fail "psk identity not logged"
if nbdinfo --size "nbds://bob@127.0.0.1:$PORT/disk?tls-psk-file=$d/keys.psk" >/dev/null 2>&1; then
    fail "psk: bob served despite tls-allow"
fi
log_has "not allowed for TLS name 'bob'" || fail "psk: bob's refusal not logged"
echo "psk: tls-allow serves alice, refuses bob"
stop_smcrd

# --- verify on without a CA: a usage error ------------------------------
rc=0
out=$("$SMCRD" -f -l 127.0.0.1 -p "$(free_port)" --tls=require --tls-verify-peer=on \
      --tls-certificates "$d/nocadir" --export "disk=$d/disk.img" 2>&1) || rc=$?
[ "$rc" = 2 ] || fail "--tls-verify-peer=on without ca-cert.pem: exit $rc: $out"
echo "$out" | grepq "no ca-cert.pem" || fail "no reason given: $out"
echo "PASS: client certificates verified, tls-allow by certificate name and PSK identity"
