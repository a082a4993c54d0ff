#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# An independent check of the CLC codecs: Wireshark's SMC dissector.
#
# unit/tshark-clc-peer sends a real Proposal, Accept and Confirm (TCP
# stream 0) and a Proposal with an IPv6 prefix list and a Decline (stream 1)
# over loopback, written by our encoders and read back by our decoders, and
# prints for each message the fields tshark must show.  We capture them on
# lo and require that tshark
#   - recognises every message as SMC, of the type sent,
#   - shows every field equal to what was sent (peer IDs, GIDs, MACs, QP
#     numbers, rkeys, RMBE index, alert tokens, RMB sizes, MTUs, virtual
#     addresses, PSNs, first contact and out-of-sync flags, IPv4 subnet,
#     IPv6 prefixes, diagnosis code), and
#   - reports nothing malformed and no expert warning or error.
# smcr-timeout: 90
. "${srcdir:-.}/functions.sh"

requires tshark --version

peer=$abs_top_builddir/tests/unit/tshark-clc-peer
[ -x "$peer" ] || fail "missing $peer (make check builds it)"
dir=$(scratch_dir)
port=$(free_port)
pcap=$dir/clc.pcap

# Capture only the test's port.  tshark says "Capturing on" once dumpcap
# has the interface open.
tshark -i lo -f "tcp port $port" -w "$pcap" -q >"$dir/tshark.out" 2>&1 &
tshark_pid=$!
cleanup_fn "kill $tshark_pid 2>/dev/null; wait $tshark_pid 2>/dev/null"
for (( i = 0; i < 200; i++ )); do
    grep -q "Capturing on" "$dir/tshark.out" && break
    kill -0 "$tshark_pid" 2>/dev/null || { cat "$dir/tshark.out" >&2; fail "tshark could not capture on lo"; }
    sleep 0.1
done
grep -q "Capturing on" "$dir/tshark.out" || fail "tshark did not start capturing"
sleep 0.5

run_prog "$peer" "$port" >"$dir/expected" 2>"$dir/peer.err" ||
    { cat "$dir/peer.err" >&2; fail "tshark-clc-peer failed"; }
cat "$dir/peer.err"

# Let the last segments reach the capture file, then stop tshark cleanly.
sleep 1
kill -INT "$tshark_pid"
wait "$tshark_pid" 2>/dev/null
[ -s "$pcap" ] || fail "empty capture"

tsh() { tshark_smc -r "$pcap" "$@" 2>/dev/null; }

# Numbers compare by value (tshark prints some in hex, some in decimal).
shopt -s extglob
norm() {
    local v=${1,,}
    if [[ $v =~ ^0x[0-9a-f]+$ ]]; then
        v=${v#0x}; v=${v##+(0)}; echo "0x${v:-0}"
    elif [[ $v =~ ^[0-9]+$ ]] && (( ${#v} < 18 )); then
        printf '0x%x\n' "$((10#$v))"
    else
        echo "$v"
    fi
}

nmsg=$(wc -l <"$dir/expected")
[ "$nmsg" -eq 5 ] || fail "expected 5 messages from the peer, got $nmsg"
nsmc=$(tsh -Y smc -T fields -e frame.number | wc -l)
[ "$nsmc" -eq "$nmsg" ] || { tsh -Y tcp.len; fail "tshark shows $nsmc SMC frames, $nmsg messages were sent"; }

bad=0
checked=0
while read -r stream name fields; do
    args=() keys=() want=()
    for kv in $fields; do
        keys+=("${kv%%=*}")
        want+=("${kv#*=}")
        args+=(-e "${kv%%=*}")
    done
    type=${want[0]}		# the first field is smc.clc_msg
    rows=$(tsh -Y "tcp.stream == $stream && smc.clc_msg == $type" \
        -T fields -E occurrence=a -E aggregator=, "${args[@]}")
    if [ "$(printf '%s\n' "$rows" | grep -c .)" -ne 1 ]; then
        echo "FAIL: stream $stream $name: expected one SMC frame of type $type, tshark shows:"
        printf '%s\n' "$rows"
        bad=$((bad + 1))
        continue
    fi
    IFS=$'\t' read -r -a got <<<"$rows"
    before=$bad
    for i in "${!keys[@]}"; do
        g=${got[$i]:-}
        if [ "$(norm "$g")" = "$(norm "${want[$i]}")" ]; then
            checked=$((checked + 1))
        else
            echo "FAIL: stream $stream $name: ${keys[$i]}: sent ${want[$i]}, tshark shows '${g}'"
            bad=$((bad + 1))
        fi
    done
    [ "$bad" -eq "$before" ] && echo "ok: stream $stream $name: ${#keys[@]} fields agree"
done <"$dir/expected"

malformed=$(tsh -Y '_ws.malformed || _ws.expert.severity >= 0x00600000')
if [ -n "$malformed" ]; then
    echo "FAIL: tshark reports malformed frames or expert warnings:"
    echo "$malformed"
    tsh -q -z expert
    bad=$((bad + 1))
fi

[ "$bad" -eq 0 ] || { tsh -Y smc -V | sed -n '/^Shared Memory/,/^$/p'; fail "$bad disagreements with tshark"; }
echo "tshark agrees on all $checked fields of $nmsg CLC messages (Proposal x2, Accept, Confirm, Decline)"
