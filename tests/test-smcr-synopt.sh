#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# The SMC TCP option (RFC 7609 §3.1: kind 254, length 6, ExID E2D4C3D9) from
# libsmcr's BPF program, on loopback (this host has no RDMA: every pairing
# ends in TCP, and what matters is which one runs CLC).  A capture on lo must
# show, with the data verified by SHA-256 both ways each time:
#   1. libsmcr <-> libsmcr: the option on the SYN and the SYN-ACK, CLC runs
#      (a Decline: no SMC-R device), and NOT on the SYNs of a plain TCP
#      connection made meanwhile in the same cgroup;
#   2. libsmcr client -> plain TCP server: option on the SYN only, not one
#      CLC byte on the wire, fallback 0x03010000 counted;
#   3. plain TCP client -> libsmcr server: the same, counted by the server;
#   4. nbdinfo -> smcrd's SMC-R port: NBD at once, no Proposal wait;
#      smcrctl shows the mode and the counted reason;
#   5. SMCR_SYN_OPTION=off on both ends: no option, CLC as before;
#   6. a client with the option -> a server with it off: plain TCP (the
#      server sees non-CLC bytes first), no CLC byte;
#   7. smcrd --syn-option off and the nbdkit plugin with SMCR_SYN_OPTION=off:
#      CLC on the SMC-R port as before (the client declines: no RDMA here),
#      1 MiB written through nbdkit and read back over smcrd's TCP port.
# Needs root and cgroup v2 (the program's attach point).  About 20 s.
# smcr-timeout: 300
. "${srcdir:-.}/functions.sh"
. "$srcdir/test-smcrd-lib.sh"
. "$srcdir/test-client-lib.sh"
requires tshark --version
requires nbdkit --version
requires nbdcopy --version
requires nbdinfo --version
[ "${SMCR_VALGRIND:-0}" = 1 ] && skip "valgrind does not know the bpf syscalls (libsmcr runs with syn-option=off under it)"
[ "$(id -u)" = 0 ] || skip "loading a BPF program needs root"
grep -q ' - cgroup2 ' /proc/self/mountinfo || skip "no cgroup v2 mounted"

stream=$abs_top_builddir/tests/bench/smcr-stream
[ -x "$stream" ] || skip "no tests/bench/smcr-stream (configure found no libcrypto: libssl-dev)"
smcrd=$SMCRD
smcrctl=$SMCRCTL
if ls /sys/class/infiniband/ 2>/dev/null | grepq .; then
    skip "this host has RDMA devices; the test expects TCP fallback everywhere"
fi
d=$(scratch_dir)
export SMCR_CTL_DIR=$d/ctl

# Can this host load it at all?  (bpf: the context fails if not.)
p=$(free_port)
SMCR_SYN_OPTION=bpf "$stream" server -p "$p" -n 1 >"$d/probe.out" 2>&1 &
probe=$!
cleanup_fn "kill $probe 2>/dev/null"
for (( i = 0; i < 50; i++ )); do
    grep -q 'syn-option' "$d/probe.out" && break
    kill -0 "$probe" 2>/dev/null || break
    sleep 0.1
done
if ! grep -q 'syn-option bpf' "$d/probe.out"; then
    cat "$d/probe.out"
    skip "the BPF program does not load here: $(grep -o 'syn-option=bpf: .*' "$d/probe.out")"
fi
kill "$probe"; wait "$probe" 2>/dev/null

# capture NAME PORT...: tshark on lo for those ports, until stop_capture.
capture() {
    local name=$1 f="" p; shift
    for p in "$@"; do f="${f:+$f or }tcp port $p"; done
    # Headers only (-s) and a large buffer (-B): bulk data on lo made the
    # kernel drop frames, the SYN among them, on a loaded machine.
    tshark -i lo -s 128 -B 64 -f "$f" -w "$d/$name.pcap" -q >"$d/$name.tshark" 2>&1 &
    tshark_pid=$!
    cleanup_fn "kill $tshark_pid 2>/dev/null"
    wait_for 20 grep -q "Capture started\|Capturing on" "$d/$name.tshark"
    sleep 0.3
}
stop_capture() { sleep 1; kill -INT "$tshark_pid"; wait "$tshark_pid" 2>/dev/null; }
tsh() { local n=$1; shift; tshark_smc -r "$d/$n.pcap" "$@" 2>/dev/null; }
# fields NAME: the capture decoded once (tshark is the slow part of this
# test on a loaded machine): source and destination port, SYN, ACK, the
# frame's protocols (smc for a CLC message) and the TCP options.
fields() {
    local f=$d/$1.fields
    [ -s "$f" ] || tsh "$1" -T fields -e tcp.srcport -e tcp.dstport -e tcp.flags.syn \
        -e tcp.flags.ack -e frame.protocols -e tcp.options >"$f"
    cat "$f"
}
# opt NAME PORT syn|synack: 1 if that segment to/from PORT carries the option.
opt() {
    local rows; rows=$(fields "$1" | awk -F'\t' -v p="$2" -v w="$3" '
        function on(x) { return x == "1" || x == "True" }
        on($3) && ((w == "syn" && !on($4) && $2 == p) || (w == "synack" && on($4) && $1 == p)) {
            print "options:" $6 }')
    if [ -z "$rows" ]; then
        echo "$1: no $3 segment for port $2; the capture ($(tsh "$1" | wc -l) frames):" >&2
        tsh "$1" | head -n 20 >&2
        cat "$d/$1.tshark" >&2
        echo missing
        return
    fi
    if grep -qv 'fe06e2d4c3d9' <<<"$rows"; then
        grep -q 'fe06e2d4c3d9' <<<"$rows" && fail "$1: only some ${3}s to port $2 carry it"
        echo 0
    else
        echo 1
    fi
}
want() { # NAME PORT syn|synack 0|1
    local got; got=$(opt "$1" "$2" "$3")
    [ "$got" != missing ] || fail "$1: no $3 segment for port $2 in the capture"
    [ "$got" = "$4" ] || fail "$1: $3 (port $2): option $( ((got)) && echo present || echo absent), expected $( (($4)) && echo present || echo absent)"
}
clc_frames() { fields "$1" | awk -F'\t' '$5 ~ /(^|:)smc(:|$)/' | wc -l; }
start_server() { # NAME PORT [ARGS...]: smcr-stream server
    local name=$1 port=$2; shift 2
    "$stream" server -p "$port" "$@" >"$d/$name.srv" 2>&1 &
    srv_pid=$!
    cleanup_fn "kill $srv_pid 2>/dev/null"
    wait_for 10 bash -c "ss -ltn | grep -q ':$port '"
}
client() { # NAME PORT [ARGS...]
    local name=$1 port=$2; shift 2
    "$stream" client 127.0.0.1 -p "$port" -m verify -n 2 -b 1M -s 60000 "$@" \
        >"$d/$name.cl" 2>&1 || { cat "$d/$name".*; fail "$name: client failed"; }
    wait "$srv_pid" || { cat "$d/$name".*; fail "$name: server failed"; }
    grep -Eq '^result verify (smcr|tcp) 2 1048576 ok$' "$d/$name.cl" ||
        { cat "$d/$name".*; fail "$name: data not verified"; }
}

# 1. libsmcr to libsmcr, and a plain TCP pair meanwhile.
p=$(free_port); q=$(free_port)
capture both "$p" "$q"
start_server both "$p" -n 2
grep -q '^server: syn-option bpf$' "$d/both.srv" || fail "server not in bpf mode"
srv1=$srv_pid
"$stream" server -t tcp -p "$q" -n 2 >"$d/plain.srv" 2>&1 &
srv_pid=$!
cleanup_fn "kill $srv_pid 2>/dev/null"
wait_for 10 bash -c "ss -ltn | grep -q ':$q '"
client plain "$q" -t tcp
srv_pid=$srv1
client both "$p"
stop_capture
want both "$p" syn 1; want both "$p" synack 1
want both "$q" syn 0; want both "$q" synack 0
n=$(clc_frames both)
[ "$n" -ge 2 ] || fail "both: $n CLC frames, expected a Decline on each of 2 connections"
grep -Eq 'fallback reason 0x03030002 .*: 2$' "$d/both.cl" || fail "both: client should decline (no SMC-R device) twice"
echo "ok 1: option on both SYNs of ours, CLC ran ($n CLC frames); none on a plain TCP pair meanwhile"

# 2. libsmcr client -> plain TCP server.
p=$(free_port)
capture totcp "$p"
"$stream" server -t tcp -p "$p" -n 2 >"$d/totcp.srv" 2>&1 &
srv_pid=$!
cleanup_fn "kill $srv_pid 2>/dev/null"
wait_for 10 bash -c "ss -ltn | grep -q ':$p '"
client totcp "$p"
stop_capture
want totcp "$p" syn 1; want totcp "$p" synack 0
[ "$(clc_frames totcp)" = 0 ] || fail "totcp: CLC bytes on the wire"
grep -Eq 'fallback reason 0x03010000 .*: 2$' "$d/totcp.cl" || fail "totcp: reason 0x03010000 not counted twice"
echo "ok 2: libsmcr -> plain TCP server: SYN-ACK without option, no CLC byte, 0x03010000 counted"

# 3. plain TCP client -> libsmcr server.
p=$(free_port)
capture fromtcp "$p"
start_server fromtcp "$p" -n 2
client fromtcp "$p" -t tcp
stop_capture
want fromtcp "$p" syn 0; want fromtcp "$p" synack 0
[ "$(clc_frames fromtcp)" = 0 ] || fail "fromtcp: CLC bytes on the wire"
grep -Eq 'fallback reason 0x03010000 .*: 2$' "$d/fromtcp.srv" || fail "fromtcp: server did not count 0x03010000 twice"
echo "ok 3: plain TCP client -> libsmcr server: no option echoed, no CLC byte, counted"

# 4. nbdinfo -> smcrd's SMC-R port: no Proposal wait (it was 2 s).
p=$(free_port); sp=$(free_port)
truncate -s 4M "$d/disk"
capture nbd "$sp"
"$smcrd" -f -P "$d/smcrd.pid" -p "$p" --smcr-port "$sp" --syn-option bpf \
    -e "disk=$d/disk" 2>"$d/smcrd.log" &
cleanup_fn "kill \$(cat '$d/smcrd.pid' 2>/dev/null) $! 2>/dev/null"
wait_for 10 grep -q 'listening for NBD over SMC-R.*SYN option: bpf' "$d/smcrd.log"
t0=$(date +%s%N)
size=$(nbdinfo --size "nbd://127.0.0.1:$sp/disk") || { cat "$d/smcrd.log"; fail "nbdinfo failed"; }
ms=$(( ($(date +%s%N) - t0) / 1000000 ))
stop_capture
[ "$size" = 4194304 ] || fail "nbd: size $size"
[ "$ms" -lt 1500 ] || fail "nbd: nbdinfo took $ms ms (a CLC wait?)"
want nbd "$sp" syn 0; want nbd "$sp" synack 0
[ "$(clc_frames nbd)" = 0 ] || fail "nbd: CLC bytes on the wire"
"$smcrctl" status smcrd >"$d/status" || fail "smcrctl status"
grep -q '^SYN option: bpf' "$d/status" || { cat "$d/status"; fail "smcrctl status does not show the mode"; }
grep '^SYN option' "$d/status"
"$smcrctl" stats smcrd >"$d/stats" || fail "smcrctl stats"
grep -q '^  fallback 0x03010000 x1: peer did not indicate SMC$' "$d/stats" ||
    { cat "$d/stats"; fail "smcrctl stats: reason not counted"; }
kill "$(cat "$d/smcrd.pid")"
echo "ok 4: nbdinfo on the SMC-R port: NBD after $ms ms, smcrctl shows 'SYN option: bpf' and the reason"

# 5. off on both ends: no option, CLC always.
p=$(free_port)
capture off "$p"
SMCR_SYN_OPTION=off start_server off "$p" -n 2
SMCR_SYN_OPTION=off client off "$p"
stop_capture
grep -q '^server: syn-option off$' "$d/off.srv" || fail "off: server not off"
want off "$p" syn 0; want off "$p" synack 0
n=$(clc_frames off)
[ "$n" -ge 2 ] || fail "off: $n CLC frames, CLC should run"
grep -Eq 'fallback reason 0x03030002 .*: 2$' "$d/off.cl" || fail "off: no CLC decline counted"
echo "ok 5: syn-option=off: no option, CLC on every connection ($n CLC frames)"

# 6. option on the client only: the server (off) sees no Proposal first.
p=$(free_port)
capture mixed "$p"
SMCR_SYN_OPTION=off start_server mixed "$p" -n 2
client mixed "$p"
stop_capture
want mixed "$p" syn 1; want mixed "$p" synack 0
[ "$(clc_frames mixed)" = 0 ] || fail "mixed: CLC bytes on the wire"
grep -Eq 'fallback reason 0x03010000 .*: 2$' "$d/mixed.srv" || fail "mixed: server did not take TCP"
echo "ok 6: client with the option, server off: plain TCP at once on both ends"

# 7. smcrd and the nbdkit plugin, both off: CLC on the SMC-R port as before.
sp=$(free_port)
head -c 1M /dev/urandom >"$d/data"
capture pair "$sp"
SMCRD_LOG=$d/smcrd7.log
start_smcrd --smcr-port "$sp" --syn-option off -e "disk=$d/disk"
wait_for 10 grep -q 'listening for NBD over SMC-R.*SYN option: off' "$SMCRD_LOG"
SMCR_SYN_OPTION=off start_nbdkit server="127.0.0.1:$sp" export=disk connections=1
nbdcopy "$d/data" "$(nbdkit_uri)" || fail "pair: write through nbdkit failed"
stop_nbdkit
nbdcopy "nbd://127.0.0.1:$PORT/disk" "$d/back" || fail "pair: read back over TCP failed"
cmp -n 1048576 "$d/data" "$d/back" || fail "pair: data differs"
stop_capture
want pair "$sp" syn 0; want pair "$sp" synack 0
n=$(clc_frames pair)
[ "$n" -ge 1 ] || fail "pair: no CLC on the SMC-R port"
"$smcrctl" stats "$SMCRD_PID" >"$d/stats7" || fail "smcrctl stats (7)"
# Two connections: the plugin's check in .get_ready (before nbdkit forks)
# and its attach after the fork.
grep -q '^  fallback 0x03030002 x2: no SMC-R device found$' "$d/stats7" ||
    { cat "$d/stats7"; fail "pair: smcrd did not count the client's CLC Decline"; }
stop_smcrd
echo "ok 7: smcrd and nbdkit with syn-option off: CLC ran ($n CLC frame(s)), 1 MiB verified"
