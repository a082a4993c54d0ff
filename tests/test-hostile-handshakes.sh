#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# Handshakes one address cannot hog, in number or in time:
#  - max-handshakes 8 (so 4 per address): 4 silent clients from 127.0.0.1,
#    a 5th from there is closed (refused_handshakes_per_address), a good
#    client from 127.0.0.2 is served (writes and reads back 1 MiB), and
#    max-handshakes itself is never reached;
#  - a trickled TLS handshake: 4 clients that send NBD_OPT_STARTTLS and
#    then a TLS record one byte every 0.3 s are closed at
#    --handshake-timeout (3 s) counted from accept, not kept alive by
#    their bytes; counted as handshake timeouts; a good TLS-less client
#    is served meanwhile (--tls=on).
# smcrd's descriptors come back to their count before each attack.
# About 12 s (most of it the two 3 s waits and start-up).
# smcr-timeout: 180
. "${srcdir:-.}/functions.sh"
. "$srcdir/test-smcrd-lib.sh"
. "$srcdir/test-client-lib.sh"
requires python3 --version
requires certtool --version
requires_src_addr 127.0.0.2 "a second loopback source address"

d=$(scratch_dir)
limit() { smcrd_limit "$1"; }
fds_back() {    # BASE: smcrd's descriptor count back to BASE (polls 10 s)
    local i
    for (( i=0; i<100; i++ )); do
        [ "$(nfds)" -le "$1" ] && return 0
        sleep 0.1
    done
    fail "smcrd holds $(nfds) descriptors, $1 before"
}

# --- per address before global ---------------------------------------------
start_smcrd_disk 4M --max-handshakes 8
base=$(nfds)
[ "$(limit max_handshakes_per_address)" = 4 ] || fail "max_handshakes_per_address $(limit max_handshakes_per_address), want 4"
hold_handshakes 4 3
probe 127.0.0.1 "$PORT" list >/dev/null 2>&1 && fail "a 5th handshake from 127.0.0.1 was served"
[ "$(limit refused_handshakes_per_address)" -ge 1 ] || fail "refusal not counted"
HOSTILE_SRC=127.0.0.2 python3 "$HOSTILE" good "$PORT" disk 20 ||
    fail "a client from another address was locked out"
[ "$(limit refused_handshakes)" = 0 ] || fail "max-handshakes reached ($(limit refused_handshakes))"
log_has "max-handshakes-per-address" || fail "refusal not logged"
wait "$held"
fds_back "$base"
echo "per address: 4 held from 127.0.0.1, 5th refused, 127.0.0.2 served; fds back to $base"
stop_smcrd

# --- TLS handshake trickled past handshake-timeout -------------------------------
pki=$d/pki
mkdir "$pki"
certtool --generate-privkey --outfile "$pki/server-key.pem" 2>/dev/null
printf 'cn = localhost\nip_address = 127.0.0.1\ntls_www_server\nencryption_key\nsigning_key\nexpiration_days = 2\n' \
    >"$d/server.info"
certtool --generate-self-signed --load-privkey "$pki/server-key.pem" --template "$d/server.info" \
    --outfile "$pki/server-cert.pem" 2>/dev/null || fail "certtool"
SMCRD_LOG=$d/tls.log
start_smcrd --export "disk=$d/disk.img" --tls=on --tls-certificates "$pki" --handshake-timeout 3
base=$(nfds)
t0=$SECONDS
python3 "$HOSTILE" tlsloris "$PORT" 4 0.3 12 >"$d/loris" &
loris=$!
cleanup_fn "kill $loris 2>/dev/null"
wait_for 10 grep -q '^tlsloris 4$' "$d/loris"
python3 "$HOSTILE" good "$PORT" disk 20 || fail "a good client was not served beside TLS loris clients"
wait "$loris" || fail "tlsloris clients"
cat "$d/loris"
grep -q '^tlsloris alive 0 ' "$d/loris" || fail "trickled TLS handshakes outlived handshake-timeout: $(tail -n 1 "$d/loris")"
took=$(sed -n 's/^tlsloris alive 0 after \([0-9]*\) s$/\1/p' "$d/loris")
[ -n "$took" ] && [ "$took" -le 8 ] || fail "trickled TLS handshakes closed after ${took:-?} s (limit 3 s)"
[ "$(limit handshake_timeouts)" = 4 ] || fail "handshake_timeouts $(limit handshake_timeouts), want 4"
fds_back "$base"
echo "tls loris: 4 closed after $took s (handshake-timeout 3), counted; good client served; fds back to $base"
stop_smcrd
echo "PASS: per-address handshake share, TLS handshake within handshake-timeout"
