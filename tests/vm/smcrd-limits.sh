#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# smcrd's limits over real SMC-R (rxe).  smcrd on B with
# --max-link-groups-per-address 2; on A three nbdc-io processes (each its
# own peer ID, so each its own link group), every byte checked:
#  1. the first two get link groups and write 4 MiB blocks over SMC-R (a
#     payload larger than the RMB is copied out of it in 1 MiB chunks, each
#     written while receiving waits);
#  2. the third is declined (0x01010000, out of memory) and runs over TCP:
#     smcrctl on B counts lgrs_refused_per_address 1, the fallback by its
#     reason, 2 link groups, and the refusal is logged once.
# smcr-timeout: 300
: "${SMCR_VM_TIMEOUT:=240}"
. "$(dirname "$0")/lib.sh"
vm_requires
SMCRD=$abs_top_builddir/server/smcrd
SMCRCTL=$abs_top_builddir/client/smcrctl
IO=$abs_top_builddir/tests/nbdc-io
for f in "$SMCRD" "$SMCRCTL" "$IO"; do [ -x "$f" ] || fail "$f not built"; done
vm_start_pair
B1=$(vm_ip B 1)
LOG=$(vm_share B)/smcrd.log

# An export each: nbdc-io checks every byte against what it wrote itself.
srv=$(vm_bg B "truncate -s 64M /tmp/d1.img /tmp/d2.img /tmp/d3.img &&
exec $SMCRD -f -P /tmp/smcrd.pid --syn-option off -p 10809 --smcr-port 10810 \
    --max-link-groups-per-address 2 -e d1=/tmp/d1.img -e d2=/tmp/d2.img \
    -e d3=/tmp/d3.img >$LOG 2>&1")
for i in $(seq 300); do grep -qs 'listening for NBD over SMC-R' "$LOG" && break; sleep 0.1; done
grep -qs 'listening for NBD over SMC-R' "$LOG" || { cat "$LOG"; fail "smcrd did not come up in B"; }

# stat NAME: smcrd's libsmcr counter NAME (fallback_0x01010000: that reason's).
stat() {
    vm_run B "$SMCRCTL --json stats smcrd" | python3 -c '
import json, sys
st = json.load(sys.stdin)[0]["stats"]
k = sys.argv[1]
if k.startswith("fallback_"):
    code = int(k[9:], 16)
    print(sum(r["count"] for r in st["fallback_reasons"] if r["code"] == code))
else:
    print(st[k])' "$1"
}

run_io() { vm_bg A "SMCR_SYN_OPTION=off $IO -z -c 1 -t 30 -i 30 -d $2 -q 4 -b $3 smcr://$B1/$1"; }
io1=$(run_io d1 40 4194304)
io2=$(run_io d2 40 4194304)
for i in $(seq 200); do [ "$(stat link_groups)" = 2 ] && break; sleep 0.2; done
[ "$(stat link_groups)" = 2 ] || fail "link groups on B: $(stat link_groups), want 2"
[ "$(stat lgrs_refused_per_address)" = 0 ] || fail "refused before the limit"
io3=$(run_io d3 10 65536)
# The groups are counted as soon as the third is declined, while the first
# two still run (for 40 s).
for i in $(seq 200); do [ "$(stat lgrs_refused_per_address)" != 0 ] && break; sleep 0.2; done
groups=$(stat link_groups)
out3=$(vm_wait -t 120 A "$io3" 2>&1) || { echo "$out3" | tail -n 20; fail "the third client failed"; }
r3=$(grep '^result ' <<<"$out3")
echo "third client (TCP): $r3"
[[ $r3 =~ \ errors\ 0\ bad\ 0\  ]] || fail "third client: errors or bad data: $r3"
refused=$(stat lgrs_refused_per_address) fb=$(stat fallback_0x01010000)
logged=$(grep -c 'link groups from' "$LOG" || true)
echo "B: link groups $groups, refused $refused, fallbacks 0x01010000 $fb, logged $logged"
[ "$refused" = 1 ] || fail "lgrs_refused_per_address $refused, want 1"
[ "$fb" = 1 ] || fail "fallbacks 0x01010000: $fb, want 1"
[ "$groups" = 2 ] || fail "link groups $groups, want 2"
[ "$logged" = 1 ] || fail "logged $logged times, want 1"
for io in "$io1" "$io2"; do
    out=$(vm_wait -t 120 A "$io" 2>&1) || { echo "$out" | tail -n 20; fail "a 4 MiB client failed"; }
    r=$(grep '^result ' <<<"$out")
    echo "4 MiB client (SMC-R): $r"
    [[ $r =~ \ errors\ 0\ bad\ 0\  ]] || fail "4 MiB client: errors or bad data: $r"
    [[ $r =~ writes\ ([0-9]+) ]] && [ "${BASH_REMATCH[1]}" -gt 0 ] || fail "no writes: $r"
done
vm_run B "kill \$(cat /tmp/smcrd.pid)" >/dev/null
vm_wait -t 30 B "$srv" >/dev/null 2>&1 || true
echo "max-link-groups-per-address 2 over rxe: 2 groups, the third client declined to TCP (counted, logged once); 4 MiB WRITEs over SMC-R intact"
