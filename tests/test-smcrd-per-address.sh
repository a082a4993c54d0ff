#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# max-clients-per-address at its edges: with N-1 clients from
# 127.0.0.1 silent in the handshake a good one is served; with N the next
# is closed at once, counted and logged once; when they go a good client
# is served again.  max-link-groups-per-address (its edges: the unit test
# "link groups per peer address") from the command line and the config
# file, shown with its counter.  About 6 s.
# smcr-timeout: 180
. "${srcdir:-.}/functions.sh"
. "$srcdir/test-smcrd-lib.sh"
. "$srcdir/test-client-lib.sh"
requires python3 --version

d=$(scratch_dir)
refused() { smcrd_limit refused_per_address; }
start_smcrd_disk 1M --max-clients-per-address 3
hold_handshakes 2 3
probe 127.0.0.1 "$PORT" list | grepq -x disk || fail "limit-1: the 3rd client was not served"
wait "$held"
hold_handshakes 3 3
probe 127.0.0.1 "$PORT" list >/dev/null 2>&1 && fail "a 4th client from one address was served"
probe 127.0.0.1 "$PORT" list >/dev/null 2>&1 && fail "a 5th client from one address was served"
[ "$(refused)" = 2 ] || fail "refused_per_address $(refused), want 2"
wait "$held"
wait_for 5 probe 127.0.0.1 "$PORT" list
logged=$(grep -c 'max-clients-per-address' "$SMCRD_LOG" || true)
[ "$logged" = 1 ] || fail "logged $logged times, want 1"
echo "max-clients-per-address 3: 2 held + 1 served, 3 held + 2 refused (counted, logged once), served after"
[ "$(smcrd_limit max_link_groups_per_address)" = 16 ] || fail "default max-link-groups-per-address"
stop_smcrd

cat >"$d/smcrd.conf" <<EOF
max-link-groups-per-address = 5
[export disk]
path = $d/disk.img
EOF
start_smcrd -c "$d/smcrd.conf"
[ "$(smcrd_limit max_link_groups_per_address)" = 5 ] || fail "config max-link-groups-per-address"
[ "$(smcrd_limit refused_link_groups_per_address)" = 0 ] || fail "refused_link_groups_per_address"
stop_smcrd
start_smcrd -c "$d/smcrd.conf" --max-link-groups-per-address 0
[ "$(smcrd_limit max_link_groups_per_address)" = 0 ] || fail "command line max-link-groups-per-address"
stop_smcrd
"$SMCRD" -f -l 127.0.0.1 -p "$(free_port)" --max-link-groups-per-address x -e "disk=$d/disk.img" \
    >/dev/null 2>&1 && fail "max-link-groups-per-address x accepted"
echo "max-link-groups-per-address: default 16, 5 from the file, 0 from the command line"
