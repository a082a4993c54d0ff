-- SPDX-License-Identifier: BSD-3-Clause
-- SMC-Rv2 LLC messages for Wireshark/tshark (4.0 decodes LLC v1 only).
--
-- An LLC message is the payload of an RoCE (RC) SEND.  In SMC-Rv2 its
-- first byte is the version (2) in the high nibble and the v1 type in the
-- low one, bytes 1-2 the message length in the sender's byte order (Linux
-- 6.1 on x86: little-endian), byte 3 the flags (0x80: response).  Most are
-- 44 bytes; ADD LINK v2 carries its RKeys after byte 44 and REQ ADD LINK
-- its GIDs.  Layouts: RFC 7609 Appendix A.3 and Linux net/smc/smc_llc.c.
--
--   tshark -X lua_script:smcr-llc-v2.lua -r capture.pcapng
-- or copy it to ~/.local/lib/wireshark/plugins/.  A payload is taken only
-- when its version nibble is 2, its type is an LLC type and its length
-- field equals the payload's length; Wireshark's own SMC dissector keeps
-- everything else (CLC, CDC, LLC v1).

local p = Proto("smcrv2llc", "SMC-Rv2 LLC")

local types = {
    [0x21] = "CONFIRM LINK", [0x22] = "ADD LINK", [0x23] = "ADD LINK CONTINUATION",
    [0x24] = "DELETE LINK", [0x25] = "REQUEST ADD LINK", [0x26] = "CONFIRM RKEY",
    [0x27] = "TEST LINK", [0x28] = "CONFIRM RKEY CONTINUATION", [0x29] = "DELETE RKEY",
}

local f = {
    type = ProtoField.uint8("smcrv2llc.type", "Type", base.HEX, types),
    length = ProtoField.uint16("smcrv2llc.length", "Length (little-endian)"),
    reserved = ProtoField.uint8("smcrv2llc.reserved", "Reserved / reason", base.HEX),
    flags = ProtoField.uint8("smcrv2llc.flags", "Flags", base.HEX),
    resp = ProtoField.bool("smcrv2llc.flags.response", "Response", 8, nil, 0x80),
    mac = ProtoField.ether("smcrv2llc.mac", "Sender MAC"),
    gid = ProtoField.ipv6("smcrv2llc.gid", "GID"),
    qpn = ProtoField.uint24("smcrv2llc.qpn", "QP number", base.HEX),
    link = ProtoField.uint8("smcrv2llc.link", "Link number"),
    link_uid = ProtoField.bytes("smcrv2llc.link_uid", "Link user ID"),
    max_links = ProtoField.uint8("smcrv2llc.max_links", "Max links"),
    mtu = ProtoField.uint8("smcrv2llc.mtu", "MTU", base.DEC, nil, 0x0f),
    psn = ProtoField.uint24("smcrv2llc.psn", "Initial PSN", base.HEX),
    v2_flags = ProtoField.uint8("smcrv2llc.ext.flags", "Extension flags (0x80 direct)", base.HEX),
    target_gid = ProtoField.ipv6("smcrv2llc.ext.gid", "Target GID"),
    num_rkeys = ProtoField.uint16("smcrv2llc.num_rkeys", "RKeys (little-endian)"),
    ref_rkey = ProtoField.uint32("smcrv2llc.ref_rkey", "Reference RKey", base.HEX),
    new_rkey = ProtoField.uint32("smcrv2llc.new_rkey", "New RKey", base.HEX),
    new_vaddr = ProtoField.uint64("smcrv2llc.new_vaddr", "New virtual address", base.HEX),
    reason = ProtoField.uint32("smcrv2llc.reason", "Reason", base.HEX),
    num_tokens = ProtoField.uint8("smcrv2llc.num_tokens", "RTokens to follow"),
    rkey = ProtoField.uint32("smcrv2llc.rkey", "RKey", base.HEX),
    vaddr = ProtoField.uint64("smcrv2llc.vaddr", "Virtual address", base.HEX),
    count = ProtoField.uint8("smcrv2llc.count", "Count"),
    err_mask = ProtoField.uint8("smcrv2llc.err_mask", "Error mask", base.HEX),
    gid_count = ProtoField.uint8("smcrv2llc.gid_count", "GIDs"),
    user_data = ProtoField.bytes("smcrv2llc.user_data", "User data"),
}
p.fields = f

local function rtoken_pairs(buf, tree, off, n)
    for _ = 1, n do
        if off + 16 > buf:len() then return false end
        local t = tree:add(p, buf(off, 16), "RToken pair")
        t:add(f.ref_rkey, buf(off, 4))
        t:add(f.new_rkey, buf(off + 4, 4))
        t:add(f.new_vaddr, buf(off + 8, 8))
        off = off + 16
    end
    return true
end

local function rkey_spec(buf, tree, off)
    local t = tree:add(p, buf(off, 13), "Link and RMB")
    t:add(f.link, buf(off, 1))
    t:add(f.rkey, buf(off + 1, 4))
    t:add(f.vaddr, buf(off + 5, 8))
end

-- the body of each type; false: the message does not hold what it says
local body = {
    [0x21] = function(buf, t)
        t:add(f.mac, buf(4, 6)); t:add(f.gid, buf(10, 16)); t:add(f.qpn, buf(26, 3))
        t:add(f.link, buf(29, 1)); t:add(f.link_uid, buf(30, 4)); t:add(f.max_links, buf(34, 1))
        return true
    end,
    [0x22] = function(buf, t)
        t:add(f.reserved, buf(2, 1))
        t:add(f.mac, buf(4, 6)); t:add(f.gid, buf(12, 16)); t:add(f.qpn, buf(28, 3))
        t:add(f.link, buf(31, 1)); t:add(f.mtu, buf(32, 1)); t:add(f.psn, buf(33, 3))
        if buf:len() == 44 then return true end
        if buf:len() < 72 then return false end
        local e = t:add(p, buf(44, 28), "ADD LINK v2 extension")
        e:add(f.v2_flags, buf(44, 1)); e:add(f.target_gid, buf(46, 16))
        e:add_le(f.num_rkeys, buf(70, 2))
        local n = buf(70, 2):le_uint()
        return buf:len() == 72 + 16 * n and rtoken_pairs(buf, e, 72, n)
    end,
    [0x24] = function(buf, t)
        t:add(f.link, buf(4, 1)); t:add(f.reason, buf(5, 4))
        return true
    end,
    [0x25] = function(buf, t)
        t:add(f.gid_count, buf(24, 1))
        local n = buf(24, 1):uint()
        if buf:len() ~= 28 + 16 * n and not (n <= 1 and buf:len() == 44) then return false end
        for i = 0, n - 1 do t:add(f.gid, buf(28 + 16 * i, 16)) end
        return true
    end,
    [0x26] = function(buf, t)
        t:add(f.num_tokens, buf(4, 1)); t:add(f.rkey, buf(5, 4)); t:add(f.vaddr, buf(9, 8))
        for i = 0, math.min(buf(4, 1):uint(), 2) - 1 do rkey_spec(buf, t, 17 + 13 * i) end
        return true
    end,
    [0x27] = function(buf, t)
        t:add(f.user_data, buf(4, 16))
        return true
    end,
    [0x28] = function(buf, t)
        t:add(f.num_tokens, buf(4, 1))
        for i = 0, math.min(buf(4, 1):uint(), 3) - 1 do rkey_spec(buf, t, 5 + 13 * i) end
        return true
    end,
    [0x29] = function(buf, t)
        t:add(f.count, buf(4, 1)); t:add(f.err_mask, buf(5, 1))
        local n = buf(4, 1):uint()
        if 8 + 4 * n > buf:len() then return false end
        for i = 0, n - 1 do t:add(f.rkey, buf(8 + 4 * i, 4)) end
        return true
    end,
}
body[0x23] = function(buf, t)
    t:add(f.link, buf(4, 1)); t:add(f.num_tokens, buf(5, 1))
    return rtoken_pairs(buf, t, 8, math.min(buf(5, 1):uint(), 2))
end

local function heur(buf, pinfo, tree)
    local len = buf:len()
    if len < 44 or len > 8192 then return false end
    local ty = buf(0, 1):uint()
    if not types[ty] or buf(1, 2):le_uint() ~= len then return false end
    pinfo.cols.protocol = "SMC-Rv2 LLC"
    local resp = bit.band(buf(3, 1):uint(), 0x80) ~= 0
    local name = types[ty] .. (resp and " response" or " request")
    pinfo.cols.info:append(" [SMC-Rv2] LLC " .. name)
    local t = tree:add(p, buf(), "SMC-Rv2 LLC " .. name)
    t:add(f.type, buf(0, 1))
    t:add_le(f.length, buf(1, 2))
    local fl = t:add(f.flags, buf(3, 1))
    fl:add(f.resp, buf(3, 1))
    if not body[ty](buf, t) then
        t:add_expert_info(PI_MALFORMED, PI_ERROR, "message shorter than its contents")
    end
    return true
end

p:register_heuristic("infiniband.payload", heur)
