#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# smcrd over TCP: nbdinfo sees the right size and flags, nbdinfo --list
# lists the exports, unknown and forbidden exports get the right option
# errors (NBD_REP_ERR_UNKNOWN, NBD_REP_ERR_POLICY).
# smcr-timeout: 120
. "${srcdir:-.}/functions.sh"
. "$srcdir/test-smcrd-lib.sh"
requires nbdinfo --version

d=$(scratch_dir)
truncate -s 64M "$d/a.img"
truncate -s 3M "$d/b.img"
start_smcrd --export "disk=$d/a.img" --export "ro=$d/b.img,ro,desc=read only disk" \
    --export "hidden=$d/a.img,allow=10.0.0.0/8" --export "sect=$d/b.img,blocksize=512"

json=$(nbdinfo --json "$(uri disk)") || fail "nbdinfo disk failed"
check_json() { # json python-expression
    python3 -c "import json,sys; j=json.loads(sys.argv[1]); e=j['exports'][0]; sys.exit(0 if ($2) else 1)" "$1" ||
        fail "nbdinfo: expected $2 in: $1"
}
check_json "$json" "e['export-size'] == 64*1024*1024"
check_json "$json" "e['is_read_only'] is False and e['can_flush'] and e['can_fua']"
check_json "$json" "e['can_trim'] and e['can_zero'] and e['can_multi_conn'] and e['can_cache']"
check_json "$json" "e['block_size_minimum'] == 1 and e['block_size_maximum'] == 32*1024*1024"
check_json "$json" "j['protocol'] == 'newstyle-fixed' and j['structured']"

json=$(nbdinfo --json "$(uri ro)") || fail "nbdinfo ro failed"
check_json "$json" "e['export-size'] == 3*1024*1024 and e['is_read_only'] is True"
check_json "$json" "not e['can_trim'] and not e['can_zero']"
check_json "$json" "e['description'] == 'read only disk'"

json=$(nbdinfo --json "$(uri sect)") || fail "nbdinfo sect failed"
check_json "$json" "e['block_size_minimum'] == 512 and e['block_size_preferred'] == 4096"

# The empty name is the first export.
[ "$(nbdinfo --size "nbd://127.0.0.1:$PORT")" = 67108864 ] || fail "default export size"

list=$(nbdinfo --list --json "nbd://127.0.0.1:$PORT") || fail "nbdinfo --list failed"
names=$(python3 -c "import json,sys; print(' '.join(sorted(e['export-name'] for e in json.loads(sys.argv[1])['exports'])))" "$list")
[ "$names" = "disk ro sect" ] || fail "nbdinfo --list: '$names' (hidden must not be listed)"
[ "$(probe 127.0.0.1 "$PORT" list | sort | tr '\n' ' ')" = "disk ro sect " ] || fail "probe list"

# Unknown export: NBD_REP_ERR_UNKNOWN, exactly.
out=$(probe 127.0.0.1 "$PORT" info nope) && fail "info on an unknown export succeeded"
case $out in NBD_REP_ERR_UNKNOWN:*nope*) ;; *) fail "unknown export: '$out'" ;; esac
nbdinfo "$(uri nope)" >/dev/null 2>&1 && fail "nbdinfo on an unknown export succeeded"
# NBD_OPT_EXPORT_NAME cannot report errors: the server hangs up.
[ "$(probe 127.0.0.1 "$PORT" export-name nope)" = hangup ] || fail "export-name nope"
out=$(probe 127.0.0.1 "$PORT" export-name disk) || fail "export-name disk: $out"
case $out in size=67108864\ *) ;; *) fail "export-name disk: '$out'" ;; esac

# Address-restricted export: 127.0.0.1 is not in 10.0.0.0/8.
out=$(probe 127.0.0.1 "$PORT" info hidden) && fail "info on a forbidden export succeeded"
case $out in NBD_REP_ERR_POLICY:*) ;; *) fail "forbidden export: '$out'" ;; esac

# Structured replies negotiated by our own client too.
out=$(probe -s 127.0.0.1 "$PORT" info disk) || fail "info -s"
case $out in *"flags=0x"*) ;; *) fail "info -s: $out" ;; esac

stop_smcrd
log_has "not allowed" || fail "no log line about the refused address"
echo "PASS: nbdinfo sizes, flags, list, option errors"
