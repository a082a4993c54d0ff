#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# SMC-Rv2 LLC in tshark: contrib/wireshark/smcr-llc-v2.lua (Wireshark 4.0
# knows LLC v1 only) on the kernel's own capture (tests/vectors: Linux 6.1
# to Linux 6.1 over rxe).  Every frame of the mixed session must decode as
# what it is: TCP with the SMC option, SMC-Rv2 CLC (Wireshark's dissector),
# SMC-R CDC (Wireshark's) or SMC-Rv2 LLC (the script), none malformed, none
# left as a plain RoCE SEND, and the fields of the ADD LINK v2 and its
# RToken pair, a CONFIRM LINK v2 and a DELETE RKEY v2 as the kernel sent them.
# smcr-timeout: 60
. "${srcdir:-.}/functions.sh"

requires tshark --version
lua=$srcdir/../contrib/wireshark/smcr-llc-v2.lua
pcap=$srcdir/vectors/kernel-smcr-v2.pcapng
[ -f "$lua" ] && [ -f "$pcap" ] || fail "missing $lua or $pcap"
tshark -v 2>/dev/null | grep -q "with Lua" || skip "this tshark has no Lua"
# One pass: a line per frame, fields separated by '|'
f=$(scratch_dir)/fields
tshark -X lua_script:"$lua" -r "$pcap" -T fields -E separator='|' -E occurrence=a \
    -e frame.number -e frame.protocols -e _ws.malformed -e _ws.expert.severity \
    -e smcrv2llc.type -e smcrv2llc.length -e smcrv2llc.flags.response -e smcrv2llc.gid \
    -e smcrv2llc.qpn -e smcrv2llc.link -e smcrv2llc.max_links -e smcrv2llc.psn \
    -e smcrv2llc.ext.flags -e smcrv2llc.ext.gid -e smcrv2llc.num_rkeys -e smcrv2llc.ref_rkey \
    -e smcrv2llc.new_rkey -e smcrv2llc.new_vaddr -e smcrv2llc.count -e smcrv2llc.rkey \
    >"$f" 2>/dev/null || fail "tshark could not read $pcap with $lua"
frames=$(wc -l <"$f")
[ "$frames" = 43 ] || fail "expected the 43 frames of the vector capture, tshark read $frames"
# (expert severities: 0x600000 warning, 0x800000 error; notes and chats,
# such as RoCEv2's TTL of 1, are fine)
bad=$(awk -F'|' '{ n = split($4, s, ","); w = 0
        for (i = 1; i <= n; i++) if (s[i] + 0 >= 6291456) w = 1 }
    $3 != "" || w { printf "%s ", $1 }' "$f")
[ -z "$bad" ] || fail "malformed frames or expert warnings in frames: $bad"
plain=$(awk -F'|' '$2 ~ /infiniband/ && $2 !~ /:smc/ { printf "%s ", $1 }' "$f")
[ -z "$plain" ] || fail "RoCE SENDs left undecoded: $plain"
count() { awk -F'|' "$1" "$f" | wc -l; }
for want in '$5 == "0x21":2' '$5 == "0x22":2' '$5 == "0x26":8' '$5 == "0x29":12' \
        '$2 ~ /infiniband:smc$/:4' '$2 ~ /tcp:smc$/:9'; do
    got=$(count "${want%:*}")
    [ "$got" = "${want##*:}" ] || fail "frames with ${want%:*}: $got, expected ${want##*:}"
done
row() { awk -F'|' -v n="$1" '$1 == n { $1 = $2 = $3 = $4 = ""; print }' "$f" | xargs; }
# ADD LINK v2 request (frame 8): B's second link offer with one RToken pair
r=$(row 8)
[ "$r" = "0x22 88 0 ::ffff:10.1.1.2 0x000012 2 0xcb63f8 0x80 ::ffff:10.1.1.2 1 0x000003cd 0x000005c5 0xffff8880082d0000" ] ||
    fail "ADD LINK v2 fields: '$r'"
# CONFIRM LINK v2 response (frame 7) and a DELETE RKEY v2 request (frame 32)
r=$(row 7)
[ "$r" = "0x21 44 1 ::ffff:10.1.1.1 0x000011 1 2" ] || fail "CONFIRM LINK v2 fields: '$r'"
r=$(row 32)
[ "$r" = "0x29 44 0 1 0x0000034c" ] || fail "DELETE RKEY v2 fields: '$r'"
echo "tshark + smcr-llc-v2.lua: 43 frames of the kernel's SMC-Rv2 session verified: 24 LLC v2, 4 CDC, 9 CLC v2, nothing malformed, no plain RoCE SEND left"
