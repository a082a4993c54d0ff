#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# Stock libnbd tools (nbdinfo, nbdcopy) in A through the kernel's AF_SMC
# (SMC-Rv2, SMCR_VM_RXE=smc as kernel-v2.sh) against smcrd in B, by the
# project's own preload (vm/smc-preload.so: TCP sockets become AF_SMC,
# connect made blocking, which libnbd needs on 6.1).  Checked:
#   - nbdinfo over plain TCP and over SMC-R, alternately (3 each): the
#     export's size in every output; each time measured in the same run,
#     the SMC-R median within SMCR_NBD_TOOLS_RATIO (default 1.5) times the
#     TCP one.  libnbd 1.14 sends the end of NBD_OPT_LIST_META_CONTEXT
#     with MSG_MORE, which AF_SMC holds until a CDC from smcrd asks for it
#     (smcrd's read wait: blockdev/transport.c); before that every nbdinfo
#     took 30 s more.
#   - nbdcopy of 2 MiB of random data into the export and back out: the
#     SHA-256 of the source, of B's backing file and of the copy back equal.
#   - A's kernel counts every connection as SMC-Rv2 with no fallback;
#     smcrd counts them as SMC-R connections, and its cursor CDCs.
# About 25 s (+40 s to build the patched rdma_rxe once).
# smcr-timeout: 300
: "${SMCR_VM_TIMEOUT:=240}"
: "${SMCR_NBD_TOOLS_RATIO:=1.5}"
export SMCR_VM_RXE=smc
. "$(dirname "$0")/lib.sh"
vm_requires
requires nbdinfo --version
requires nbdcopy --version
SMCRD=$abs_top_builddir/server/smcrd
SMCRCTL=$abs_top_builddir/client/smcrctl
N=$abs_top_builddir/tests/bench/smc-nl
PRE=$abs_top_builddir/tests/vm/.libs/smc-preload.so
for f in "$SMCRD" "$SMCRCTL" "$N" "$PRE"; do [ -e "$f" ] || fail "$f not built"; done
modprobe -S "$VM_KVER" -n smc >/dev/null 2>&1 || skip "kernel $VM_KVER has no module smc"
EID=SMCRBD.KPEER
size=2097152

vm_start_pair 1
kpeer_setup A
B1=$(vm_ip B 1)
share=$(vm_share A)

vm_run B "truncate -s $size /tmp/disk.img" || fail "disk"
vm_bg B "exec $SMCRD -f -p 10809 --smcr-port 10810 --eids $EID -e disk=/tmp/disk.img >>/tmp/smcrd.log 2>&1" >/dev/null
vm_run B "for i in \$(seq 300); do grep -q 'listening for NBD over SMC-R' /tmp/smcrd.log && exit 0; sleep 0.1; done
tail -n 20 /tmp/smcrd.log; exit 1" || fail "smcrd did not come up in B"

# smcrd's libsmcr counters, as "NAME VALUE" lines.
smcrd_counts() {
    vm_run B "$SMCRCTL --json stats smcrd" | python3 -c '
import json, sys
s = json.load(sys.stdin)[0]["stats"]
for k in ("connections", "smc_connections", "fallbacks", "cursor_updates", "cursor_requests"):
    print(k, s.get(k, 0))'
}
k0=$(kstats A) || fail "smc-nl in A"

# nbdinfo, TCP and SMC-R alternately; times in ms from A's clock.
out=$(vm_run -t 200 A "
set -u
for i in 1 2 3; do
    for m in tcp smc; do
        if [ \$m = tcp ]; then pre= uri=nbd://$B1:10809/disk; else pre=$PRE uri=nbd://$B1:10810/disk; fi
        t0=\$(date +%s%N)
        LD_PRELOAD=\$pre timeout 100 nbdinfo \$uri >$share/info-\$m-\$i.txt 2>&1 || { echo \"FAIL: nbdinfo \$m \$i\"; cat $share/info-\$m-\$i.txt; exit 1; }
        echo \"nbdinfo \$m \$i \$(( (\$(date +%s%N) - t0) / 1000000 ))\"
    done
done") || { echo "$out"; vm_run B "tail -n 20 /tmp/smcrd.log"; fail "nbdinfo failed"; }
echo "$out"
for f in "$share"/info-*.txt; do
    grep -Eq "export-size: $size\b" "$f" || { cat "$f"; fail "$(basename "$f"): no export-size $size"; }
done
grep -q 'base:allocation' "$share/info-smc-1.txt" ||
    { cat "$share/info-smc-1.txt"; fail "nbdinfo over SMC-R listed no meta context"; }
med() { echo "$out" | awk -v m="$1" '$1 == "nbdinfo" && $2 == m { print $4 }' | sort -n | sed -n 2p; }
tcp=$(med tcp) smc=$(med smc)
[ -n "$tcp" ] && [ -n "$smc" ] || fail "no nbdinfo times"
ratio=$(awk -v a="$smc" -v b="$tcp" 'BEGIN { printf "%.2f", a / (b > 0 ? b : 1) }')
echo "nbdinfo median: TCP $tcp ms, SMC-R (AF_SMC, preload) $smc ms: $ratio x"
awk -v r="$ratio" -v m="$SMCR_NBD_TOOLS_RATIO" 'BEGIN { exit !(r <= m) }' ||
    fail "nbdinfo over SMC-R takes ${ratio}x the TCP time (limit ${SMCR_NBD_TOOLS_RATIO}x)"

# nbdcopy in and out through the preload, SHA-256 on both sides.
out=$(vm_run -t 200 A "
set -eu
head -c $size /dev/urandom >/tmp/src
t0=\$(date +%s%N)
LD_PRELOAD=$PRE timeout 150 nbdcopy /tmp/src nbd://$B1:10810/disk
t1=\$(date +%s%N)
LD_PRELOAD=$PRE timeout 150 nbdcopy nbd://$B1:10810/disk /tmp/back
t2=\$(date +%s%N)
echo \"nbdcopy in \$(( (t1 - t0) / 1000000 )) ms, out \$(( (t2 - t1) / 1000000 )) ms\"
echo \"sha src \$(sha256sum </tmp/src | cut -c1-64)\"
echo \"sha back \$(sha256sum </tmp/back | cut -c1-64)\"") || { echo "$out"; vm_run B "tail -n 20 /tmp/smcrd.log"; fail "nbdcopy failed"; }
echo "$out"
src=$(echo "$out" | awk '$2 == "src" { print $3 }')
back=$(echo "$out" | awk '$2 == "back" { print $3 }')
disk=$(vm_run B "sha256sum </tmp/disk.img | cut -c1-64")
echo "SHA-256: source $src, B's backing file $disk, copied back $back"
[ -n "$src" ] && [ "$src" = "$back" ] && [ "$src" = "$disk" ] || fail "checksums differ"

# Every connection was SMC-Rv2, on both ends.
k1=$(kstats A) || fail "smc-nl in A"
v2=$(( $(kget "$k1" smcr_client_v2_ok) - $(kget "$k0" smcr_client_v2_ok) ))
fb=$(( $(echo "$k1" | awk '$1 == "fallbacks_total" { s = $5 } END { print s + 0 }') -
       $(echo "$k0" | awk '$1 == "fallbacks_total" { s = $5 } END { print s + 0 }') ))
c=$(smcrd_counts) || fail "smcrctl stats smcrd"
echo "$c" | sed 's/^/  smcrd: /'
get() { echo "$c" | awk -v k="$1" '$1 == k { print $2 }'; }
echo "A's AF_SMC: $v2 SMC-Rv2 client connection(s), $fb fallback(s)"
[ "$fb" = 0 ] || fail "A's AF_SMC fell back to TCP $fb time(s)"
[ "$v2" -ge 5 ] || fail "A's AF_SMC counts $v2 SMC-Rv2 connections, want 5 or more (3 nbdinfo, 2 nbdcopy)"
[ "$(get smc_connections)" = "$v2" ] && [ "$(get fallbacks)" = 0 ] ||
    fail "smcrd counts $(get smc_connections) SMC-R connection(s) and $(get fallbacks) fallback(s), A $v2"
vm_quit A B
echo "PASS: nbdinfo ($ratio x the TCP time) and nbdcopy (2 MiB each way, SHA-256 equal) through smc-preload over SMC-Rv2 to smcrd"
