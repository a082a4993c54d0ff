#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# A hostile SMC-R client against smcrd, over rxe.  smcrd serves
# a disk on B; on A a well-behaved client (nbdc-io over SMC-R: random
# 64 KiB reads and writes, every byte checked) runs on its own link group
# the whole time, while hostile-peer (tests/vm/hostile-peer.c: CLC, its
# own QP/PD/RMB, CONFIRM LINK, then misbehaviour) runs a catalogue of
# cases on link groups of its own.  Each case states what smcrd must do:
#   foreign-write     RDMA WRITE with the victim's rkey and address (taken
#                     from smcrd's debug log): a remote access error on the
#                     attacker's QP, the victim's data untouched
#   cdc-prod-beyond   producer cursor beyond the RMBE: connection aborted
#   cdc-wrap-jump     producer wrap count jumping: connection aborted
#   cdc-cons-beyond   consumer cursor beyond what was written: aborted
#   cdc-bad-token     1000 CDCs with unknown alert tokens: ignored
#   cdc-replay        replayed sequence numbers: ignored (stale)
#   llc-unknown       optional unknown types ignored; a required unknown
#                     type ends the attacker's link group
#   llc-bad-link      DELETE LINK of links not its own, CONFIRM LINK and
#                     ADD LINK CONT of unknown links: group unharmed
#   llc-rkeys         DELETE RKEY of rkeys never announced (error mask back),
#                     300 CONFIRM RKEY of RMBs that do not exist: unharmed
#   add-link-flood    200 ADD LINK requests: bounded, unharmed
#   test-link-flood   2000 TEST LINK requests: all answered, unharmed
#   clc-half          1000 CLC handshakes left half done: closed by smcrd
#   clc-truncated     a Proposal cut short: the socket closed
#   clc-oversized     a 65535-byte CLC message: the socket closed
#   nbd-storm         100,000 READs without reading a reply (NBD/TCP):
#                     smcrd stops reading; nothing else suffers
# Every case must leave the victim running with no error; at the end the
# victim's data verifies, smcrd's fd count is back where it was and its
# RSS within 32 MiB of it.  About 3 minutes under TCG.  HOSTILE_CASES
# (names, space separated) runs some cases only.
# smcr-timeout: 420
: "${SMCR_VM_TIMEOUT:=380}"
. "$(dirname "$0")/lib.sh"
vm_requires
SMCRD=$abs_top_builddir/server/smcrd
IO=$abs_top_builddir/tests/nbdc-io
H=$abs_top_builddir/tests/vm/hostile-peer
for f in "$SMCRD" "$IO" "$H"; do [ -x "$f" ] || fail "$f not built"; done
vm_start_pair
B1=$(vm_ip B 1)
LOG=$(vm_share B)/smcrd.log

srv=$(vm_bg B "truncate -s 64M /tmp/disk.img &&
exec $SMCRD -f -v -P /tmp/smcrd.pid --syn-option off -p 10809 --smcr-port 10810 -e disk=/tmp/disk.img >$LOG 2>&1")
for i in $(seq 300); do grep -qs 'listening for NBD over SMC-R' "$LOG" && break; sleep 0.1; done
grep -qs 'listening for NBD over SMC-R' "$LOG" || { cat "$LOG"; fail "smcrd did not come up in B"; }

# The victim: one connection, its own link group, for the whole run: it
# runs until the cases are over and the test creates its stop file (a
# fixed run time ran out under a busy host before the last case), or
# HOSTILE_VICTIM_SECS (default 900) times the lane's slowness at most.
stop=$(vm_share A)/victim.stop
rm -f "$stop"
io=$(vm_bg A "SMCR_SYN_OPTION=off $IO -z -c 1 -t 30 -i 30 -d $(( ${HOSTILE_VICTIM_SECS:-900} * _vm_slow )) -x $stop -q 8 -b 65536 smcr://$B1/disk")
for i in $(seq 300); do grep -qs 'RMB .* on rxe0: rkey' "$LOG" && break; sleep 0.1; done
line=$(grep -m1 'RMB .* on rxe0: rkey' "$LOG") || { tail -n 30 "$LOG"; fail "no RMB of the victim in smcrd's log"; }
[[ $line =~ rkey\ ([0-9a-f]+)\ vaddr\ ([0-9a-f]+) ]] || fail "cannot parse: $line"
vrkey=${BASH_REMATCH[1]} vvaddr=${BASH_REMATCH[2]}
echo "victim's RMB on rxe0: rkey $vrkey vaddr $vvaddr"
sleep 3

spid=$(vm_run B 'cat /tmp/smcrd.pid') || fail "no smcrd pid"
res() { vm_run B "echo \$(ls /proc/$spid/fd | wc -l) \$(awk '/^VmRSS/ {print \$2}' /proc/$spid/status)"; }
read -r fd0 rss0 <<<"$(res)" || fail "smcrd's resources"
echo "smcrd before: $fd0 fds, RSS $rss0 KiB"

report=()
# run CASE EXPECT_LOG_REGEX|- [ARGS...]: the case passes on its own terms,
# its part of smcrd's log shows EXPECT (if not -), the victim still runs.
run() {
    local c=$1 want=$2 off out rc t0=$SECONDS; shift 2
    [[ " ${HOSTILE_CASES:-$c} " == *" $c "* ]] || return 0
    off=$(stat -c %s "$LOG")
    out=$(vm_run -t 120 A "HOSTILE_SLOW=$_vm_slow $H $B1 10810 $c $*" 2>&1); rc=$?
    echo "$out"
    sleep 1
    local new
    new=$(tail -c +$((off + 1)) "$LOG")
    [ "$rc" = 0 ] || { grep -v ' debug: ' <<<"$new" | tail -n 20; fail "case $c: exit status $rc"; }
    if [ "$want" != - ]; then
        grep -Eq "$want" <<<"$new" || { grep -v ' debug: ' <<<"$new" | tail -n 20; fail "case $c: smcrd's log lacks /$want/"; }
        echo "  smcrd: $(grep -Em1 "$want" <<<"$new" | sed -E 's/^.* (warning|info|error|debug): //')"
    fi
    [ -e "$(vm_share A)/out/$io.rc" ] && { vm_wait A "$io" | tail -n 5; fail "case $c: the victim ended"; }
    report+=("$c ($((SECONDS - t0)) s): $(grep "^case $c:" <<<"$out" | tail -n 1 | sed "s/^case $c: //")")
}

run foreign-write 'no TEST LINK reply' --rkey "$vrkey" --vaddr "$vvaddr"
run cdc-prod-beyond 'producer cursor outside the RMBE'
run cdc-wrap-jump 'bad CDC from peer \(producer cursor'
run cdc-cons-beyond 'consumer cursor beyond what was written'
run cdc-bad-token 'CDC for unknown token'
run cdc-replay -
run llc-unknown 'malformed LLC message'
run llc-bad-link -
run llc-rkeys -
run add-link-flood -
run test-link-flood -
run clc-truncated -
run clc-oversized -
run clc-half - -n 1000
run nbd-storm -

touch "$stop"
out=$(vm_wait -t 240 A "$io" 2>&1) || { echo "$out" | tail -n 30; fail "the victim failed"; }
r=$(grep '^result ' <<<"$out")
echo "victim: $r"
[[ $r =~ \ errors\ 0\ bad\ 0\  ]] || fail "victim: I/O errors or bad data: $r"
sleep 5
read -r fd1 rss1 <<<"$(res)" || fail "smcrd's resources"
echo "smcrd after: $fd1 fds, RSS $rss1 KiB"
[ "$fd1" -le "$fd0" ] || fail "smcrd has $fd1 fds, $fd0 before"
[ "$rss1" -le $((rss0 + 32768)) ] || fail "smcrd's RSS grew from $rss0 to $rss1 KiB"
grep -E ' (warning|error): ' "$LOG" | sed -E 's/^.* (warning|error): /\1: /' | sort | uniq -c | sort -rn | head -n 20
vm_run B "kill \$(cat /tmp/smcrd.pid)" >/dev/null
vm_wait -t 30 B "$srv" >/dev/null 2>&1 || true
printf '%s\n' "${report[@]}"
echo "hostile peer: ${#report[@]} cases, the victim verified with no error; smcrd $fd0 -> $fd1 fds, RSS $rss0 -> $rss1 KiB"
