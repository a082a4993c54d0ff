#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# SMC-R between two hosts over rxe, through libsmcr's public API:
#  1. 64 concurrent connections A -> B, each 2 MiB both directions, SHA-256
#     checked at the far end; then one connection with 64 MiB each way.
#  2. Subsequent contact: one link group with two links carries all 64;
#     new RMBs were announced with CONFIRM RKEY (stack counters).
#  3. Both RMBE layouts: the groups above speak Linux's (no eyecatcher); a
#     server that speaks only the RFC's (SMCR_RMBE_EYECATCHER=1, as older
#     smcrbd) gets it from the client too: 4 connections x 2 MiB verified.
# smcr-timeout: 420
: "${SMCR_VM_TIMEOUT:=360}"
. "$(dirname "$0")/lib.sh"
vm_requires
S=$abs_top_builddir/tests/bench/smcr-stream
[ -x "$S" ] || fail "$S not built"
vm_start_pair

srv=$(vm_bg B "$S server -p 5000 -n 65")
vm_listening B 5000 >/dev/null
out=$(vm_run -t 300 A "$S client $(vm_ip B 1) -p 5000 -m verify -n 64 -b 2M") ||
    { echo "$out"; fail "64 connections failed"; }
echo "$out" | grep -E '^(client|stats|result)'
echo "$out" | grepq '^result verify smcr 64 2097152 ok$' || fail "64 x 2 MiB not verified"
echo "$out" | grepq '^client: SMC-R (first contact).*, layout linux$' ||
    fail "first connection not SMC-R first contact in Linux's RMBE layout"
echo "$out" | grepq '^client: SMC-R (subsequent contact)' || fail "later connections not subsequent contact"
st=$(echo "$out" | grep '^stats client: connections')
[[ $st =~ connections\ 64\ smc\ 64\ fallbacks\ 0\ link_groups\ 1\ links_added\ 2\  ]] ||
    fail "expected 64 SMC-R connections on one link group with two links: $st"
[[ $st =~ rkeys_confirmed\ ([0-9]+) ]] && [ "${BASH_REMATCH[1]}" -gt 0 ] ||
    fail "no RMB was announced with CONFIRM RKEY: $st"

out=$(vm_run -t 300 A "$S client $(vm_ip B 1) -p 5000 -m verify -n 1 -b 64M") ||
    { echo "$out"; fail "64 MiB connection failed"; }
echo "$out" | grep -E '^(result)'
echo "$out" | grepq '^result verify smcr 1 67108864 ok$' || fail "64 MiB not verified"

sout=$(vm_wait -t 120 B "$srv") || { echo "$sout"; fail "server failed"; }
[ "$(echo "$sout" | grep -c 'verify ok')" = 65 ] || fail "server did not verify 65 streams"

srv=$(vm_bg B "SMCR_RMBE_EYECATCHER=1 $S server -p 5001 -n 4")
vm_listening B 5001 >/dev/null
out=$(vm_run -t 120 A "$S client $(vm_ip B 1) -p 5001 -m verify -n 4 -b 2M") ||
    { echo "$out"; fail "4 connections to an RFC-layout server failed"; }
echo "$out" | grep -E '^(client: SMC-R|result)'
echo "$out" | grepq '^result verify smcr 4 2097152 ok$' || fail "4 x 2 MiB (RFC layout) not verified"
echo "$out" | grepq '^client: SMC-R (first contact).*, layout rfc$' || fail "client did not take the RFC layout"
sout=$(vm_wait -t 120 B "$srv") || { echo "$sout"; fail "RFC-layout server failed"; }
[ "$(echo "$sout" | grep -c 'verify ok')" = 4 ] || fail "RFC-layout server did not verify 4 streams"
echo "verified: 64 connections x 2 MiB each way + 1 x 64 MiB each way over SMC-R (SHA-256), one link group, two links, Linux's RMBE layout; 4 x 2 MiB with an RFC-layout server"
