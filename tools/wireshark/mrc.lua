-- Wireshark/tshark dissector for MRC v1 (spec/wire.md) over UDP, plain or SRv6 uSID, and for mrc-host's
-- bootstrap datagrams (spec/host.md "Host datagrams").
--
-- Install (no build step): tools/wireshark/install.sh, or copy this file to ~/.local/lib/wireshark/plugins/.
-- One-off use: tshark -X lua_script:tools/wireshark/mrc.lua -r capture.pcapng
--
-- Fields are named mrc.<name> after spec/vectors' field names (mrc.psn, mrc.ev, mrc.cack_psn, ...), so a
-- filter reads like the spec: `mrc.opcode == 0xdd && mrc.reason == 1` (NACK TRIMMED), `mrc.ev == 0x00030001`
-- (everything sent on, or echoing, that EV), `mrc.stream == 3` (one QP pair), `mrc.analysis.retransmission`.
-- Analysis (retransmissions, SACK holes, probe answers, QP streams) runs on the first pass and is kept per
-- frame, as the TCP dissector does.

local mrc = Proto("mrc", "Multipath Reliable Connection")
local mrch = Proto("mrch", "MRC host datagram")

local bit = bit32 or bit
local band, bor, bxor, rshift, lshift = bit.band, bit.bor, bit.bxor, bit.rshift, bit.lshift

local MRC_PORT = 4791
local TVER = 1
local EP_QPN = 2
local PSN_MOD = 0x1000000

-- spec/wire.md §3
local OPCODES = {
    [0xC6] = "WRITE_FIRST", [0xC7] = "WRITE_MIDDLE", [0xC8] = "WRITE_LAST", [0xC9] = "WRITE_LAST_IMM",
    [0xCA] = "WRITE_ONLY", [0xCB] = "WRITE_ONLY_IMM", [0xD1] = "ACK", [0xD8] = "EP_REQUEST",
    [0xD9] = "EP_RESPONSE", [0xDC] = "SACK", [0xDD] = "NACK", [0xDE] = "PROBE",
    [0xE0] = "SEND_FIRST", [0xE1] = "SEND_MIDDLE", [0xE2] = "SEND_LAST", [0xE3] = "SEND_LAST_IMM",
    [0xE4] = "SEND_ONLY", [0xE5] = "SEND_ONLY_IMM", [0xE8] = "READ_REQUEST", [0xE9] = "READ_RESPONSE_FIRST",
    [0xEA] = "READ_RESPONSE_MIDDLE", [0xEB] = "READ_RESPONSE_LAST", [0xEC] = "READ_RESPONSE_ONLY",
}
-- Data-like opcodes: METH [TSETH] RETH [ImmDt] payload. The value says whether ImmDt follows.
local DATA = {
    [0xC6] = false, [0xC7] = false, [0xC8] = false, [0xC9] = true, [0xCA] = false, [0xCB] = true,
    [0xE0] = false, [0xE1] = false, [0xE2] = false, [0xE3] = true, [0xE4] = false, [0xE5] = true,
    [0xE8] = false, [0xE9] = false, [0xEA] = false, [0xEB] = false, [0xEC] = false,
}
local READ_REQUEST = 0xE8
local MARKS = { [0] = "NONE", [1] = "SKIP_ONCE", [2] = "ALWAYS_SKIP", [3] = "NONE (reserved 3)" }
-- spec/wire.md WIRE-NACK-1: retryable reasons, then fatal ones.
local REASONS = {
    [0x01] = "TRIMMED", [0x02] = "TRIMMED_LASTHOP", [0x0A] = "NO_RESOURCE", [0x0B] = "PSN_OOR_WINDOW",
    [0x10] = "REMOTE_ACCESS", [0x11] = "INVALID_REQUEST", [0x19] = "UNEXPECTED",
}
local FATAL = { [0x10] = true, [0x11] = true, [0x19] = true }
local EP_OPS = { [0] = "PORT_STATUS", [1] = "EV_PROBE" }
-- spec/wire.md WIRE-DSCP-1
local DSCP_TRIMMED, DSCP_TRIMMED_LASTHOP = 7, 6
local DSCP_NAMES = { [10] = "DATA", [12] = "DATA_RETX", [14] = "NO_TRIM", [46] = "CONTROL", [7] = "TRIMMED",
    [6] = "TRIMMED_LASTHOP" }

-- spec/host.md "Host datagrams"
local HOST_TYPES = { [1] = "RESOLVE", [2] = "RESOLVE-REPLY", [3] = "CONNECT", [4] = "ACCEPT", [5] = "REFUSE",
    [6] = "CLOSE", [7] = "CLOSED" }
local REFUSE_REASONS = { [1] = "the listener closed", [2] = "malformed or mismatched (plane count, a live peer's address)" }
local ICRC_STATUS = { [0] = "Good", [1] = "Bad", [2] = "Unverified" }

local H, D = base.HEX, base.DEC
local F = {
    opcode = ProtoField.uint8("mrc.opcode", "Opcode", H, OPCODES),
    se = ProtoField.bool("mrc.se", "Solicited event", 8, nil, 0x80),
    rtx = ProtoField.bool("mrc.rtx", "Retransmission", 8, nil, 0x40),
    ts_flag = ProtoField.bool("mrc.ts_flag", "TSETH present", 8, nil, 0x20),
    at_flag = ProtoField.bool("mrc.at_flag", "AUTH tag present (AT)", 8, nil, 0x10),
    auth_tag = ProtoField.bytes("mrc.auth_tag", "AUTH tag (a request: its token; other packets: SipHash-1-3 of the headers; spec WIRE-AUTH-1)"),
    tver = ProtoField.uint8("mrc.tver", "Transport version", D, nil, 0x0F),
    pkey = ProtoField.uint16("mrc.pkey", "P_Key", H),
    dest_qp = ProtoField.uint24("mrc.dest_qp", "Destination QP", H),
    ack_req = ProtoField.bool("mrc.ack_req", "Ack request", 8, nil, 0x80),
    psn = ProtoField.uint24("mrc.psn", "PSN", H),
    ev = ProtoField.uint32("mrc.ev", "EV", H),
    msn = ProtoField.uint16("mrc.msn", "MSN", H),
    rqmsn = ProtoField.uint16("mrc.rqmsn", "RQMSN", H),
    ts = ProtoField.uint32("mrc.ts", "Timestamp (ns, low 32 bits)", H),
    va = ProtoField.uint64("mrc.va", "Virtual address", H),
    rkey = ProtoField.uint32("mrc.rkey", "R_Key", H),
    dma_len = ProtoField.uint32("mrc.dma_len", "DMA length", D),
    imm = ProtoField.uint32("mrc.imm", "Immediate data", H),
    payload = ProtoField.bytes("mrc.payload", "Payload"),
    payload_len = ProtoField.uint32("mrc.payload_len", "Payload length", D),
    trim_remnant = ProtoField.bytes("mrc.trim_remnant", "What trimming left of the payload"),
    mark = ProtoField.uint8("mrc.mark", "Path mark", D, MARKS, 0xC0),
    probe_reply = ProtoField.bool("mrc.probe_reply", "Probe reply (PR)", 8, nil, 0x20),
    tsv = ProtoField.bool("mrc.tsv", "TS echo valid (TSV)", 8, nil, 0x10),
    mpr = ProtoField.uint8("mrc.mpr", "MPR (window, x128 PSNs)", D),
    cack_psn = ProtoField.uint24("mrc.cack_psn", "CACK_PSN", H),
    sack_base = ProtoField.uint24("mrc.sack_base", "SACK_BASE", H),
    bitmap = ProtoField.uint64("mrc.bitmap", "SACK bitmap", H),
    ts_echo = ProtoField.uint32("mrc.ts_echo", "TS echo", H),
    cwnd_pen = ProtoField.uint8("mrc.cwnd_pen", "Receive window penalty", D, nil, 0x7F),
    ooo_count = ProtoField.uint24("mrc.ooo_count", "Out-of-order count", D),
    reason = ProtoField.uint8("mrc.reason", "NACK reason", H, REASONS),
    nack_psn = ProtoField.uint24("mrc.nack_psn", "NACK_PSN", H),
    cmsn = ProtoField.uint16("mrc.cmsn", "CMSN", H),
    op = ProtoField.uint8("mrc.op", "Endpoint op", D, EP_OPS),
    rx_port = ProtoField.uint8("mrc.rx_port", "RX port", D),
    req_id = ProtoField.uint32("mrc.req_id", "Request id", H),
    port_mask = ProtoField.uint32("mrc.port_mask", "Port mask (ports up)", H),
    reserved = ProtoField.bytes("mrc.reserved", "Reserved"),
    icrc = ProtoField.uint32("mrc.icrc", "ICRC", H),
    icrc_status = ProtoField.uint8("mrc.icrc.status", "ICRC status", D, ICRC_STATUS),
    -- analysis (generated)
    stream = ProtoField.uint32("mrc.stream", "Stream index (QP pair)", D),
    trimmed = ProtoField.bool("mrc.trimmed", "Trimmed by a switch"),
    ecn_ce = ProtoField.bool("mrc.ecn_ce", "ECN CE-marked"),
    first_sent = ProtoField.framenum("mrc.analysis.first_sent", "First sent in", base.NONE, frametype.RETRANS_PREV),
    retransmission = ProtoField.bool("mrc.analysis.retransmission", "Retransmission"),
    holes = ProtoField.uint32("mrc.analysis.sack_holes", "PSNs missing (SACK holes)", D),
    hole = ProtoField.string("mrc.analysis.sack_hole", "Missing PSNs"),
    probe_in = ProtoField.framenum("mrc.analysis.probe_in", "Probe in", base.NONE, frametype.REQUEST),
    reply_in = ProtoField.framenum("mrc.analysis.reply_in", "Probe answered in", base.NONE, frametype.RESPONSE),
    probe_rtt = ProtoField.double("mrc.analysis.probe_rtt_us", "Probe RTT (us)"),
    usid_block = ProtoField.string("mrc.usid.block", "uSID block"),
    usid_active = ProtoField.uint16("mrc.usid.active", "Active uSID", H),
    usid_list = ProtoField.string("mrc.usid.list", "uSIDs left"),
    flow_ev = ProtoField.uint32("mrc.flow_label_ev", "EV bits 19..0 (IPv6 flow label)", H),
}
mrc.fields = F

local HF = {
    magic = ProtoField.string("mrch.magic", "Magic"),
    version = ProtoField.uint8("mrch.version", "Version", D),
    type = ProtoField.uint8("mrch.type", "Type", D, HOST_TYPES),
    reserved = ProtoField.uint16("mrch.reserved", "Reserved", H),
    token = ProtoField.uint64("mrch.token", "Token", H),
    listener = ProtoField.uint64("mrch.listener", "Listener id", H),
    planes = ProtoField.uint8("mrch.planes", "Planes", D),
    plane_addr = ProtoField.ipv6("mrch.plane.addr", "Plane address"),
    plane_port = ProtoField.uint16("mrch.plane.port", "Plane UDP port", D),
    plane_t0 = ProtoField.uint16("mrch.plane.t0", "Plane T0 uSID", H),
    qps = ProtoField.uint8("mrch.qps", "QPs", D),
    qpn = ProtoField.uint32("mrch.qpn", "QPN", H),
    peer_qpn = ProtoField.uint32("mrch.peer_qpn", "Receiver's QPN", H),
    psn = ProtoField.uint32("mrch.psn", "First PSN", H, nil, 0x00FFFFFF),
    caps = ProtoField.uint8("mrch.caps", "Capabilities", H),
    cap_send = ProtoField.bool("mrch.caps.send", "SEND/RECV", 8, nil, 0x01),
    cap_read = ProtoField.bool("mrch.caps.read", "READ", 8, nil, 0x02),
    app_len = ProtoField.uint16("mrch.app_len", "Application data length", D),
    app = ProtoField.bytes("mrch.app", "Application data"),
    key = ProtoField.bytes("mrch.key", "Receive key (tags what the peer's QP sends to it)"),
    tag = ProtoField.bytes("mrch.tag", "Tag (SipHash-1-3 of the datagram before it, spec HOST-AUTH-1/2)"),
    refuse = ProtoField.uint8("mrch.refuse_reason", "Refuse reason", D, REFUSE_REASONS),
    padding = ProtoField.bytes("mrch.padding", "Padding"),
    request_in = ProtoField.framenum("mrch.request_in", "Request in", base.NONE, frametype.REQUEST),
    response_in = ProtoField.framenum("mrch.response_in", "Answered in", base.NONE, frametype.RESPONSE),
}
mrch.fields = HF

local G = expert.group
local S = expert.severity
local E = {
    retransmission = ProtoExpert.new("mrc.expert.retransmission", "Retransmission", G.SEQUENCE, S.NOTE),
    duplicate = ProtoExpert.new("mrc.expert.duplicate", "PSN sent again without RTX", G.SEQUENCE, S.WARN),
    nack_retry = ProtoExpert.new("mrc.expert.nack", "NACK (retryable)", G.SEQUENCE, S.WARN),
    nack_fatal = ProtoExpert.new("mrc.expert.nack_fatal", "NACK (fatal)", G.RESPONSE_CODE, S.ERROR),
    nack_unknown = ProtoExpert.new("mrc.expert.nack_unknown", "NACK with an unknown reason", G.PROTOCOL, S.WARN),
    trimmed = ProtoExpert.new("mrc.expert.trimmed", "Trimmed packet", G.SEQUENCE, S.WARN),
    holes = ProtoExpert.new("mrc.expert.sack_holes", "SACK holes", G.SEQUENCE, S.NOTE),
    mark = ProtoExpert.new("mrc.expert.path_mark", "Receiver advises skipping the EV", G.SEQUENCE, S.NOTE),
    ce = ProtoExpert.new("mrc.expert.ecn_ce", "ECN congestion experienced", G.SEQUENCE, S.NOTE),
    probe = ProtoExpert.new("mrc.expert.probe", "Path probe", G.SEQUENCE, S.CHAT),
    probe_reply = ProtoExpert.new("mrc.expert.probe_reply", "Probe answered", G.SEQUENCE, S.CHAT),
    endpoint = ProtoExpert.new("mrc.expert.endpoint", "Endpoint request/response", G.SEQUENCE, S.CHAT),
    bad_icrc = ProtoExpert.new("mrc.expert.bad_icrc", "Bad ICRC", G.CHECKSUM, S.ERROR),
    bad_tver = ProtoExpert.new("mrc.expert.bad_tver", "Unknown transport version", G.PROTOCOL, S.ERROR),
    unknown_opcode = ProtoExpert.new("mrc.expert.unknown_opcode", "Unknown opcode", G.PROTOCOL, S.ERROR),
    malformed = ProtoExpert.new("mrc.expert.malformed", "Malformed MRC packet", G.MALFORMED, S.ERROR),
    snapped = ProtoExpert.new("mrc.expert.snapped", "Headers cut by the capture's snap length", G.UNDECODED,
        S.NOTE),
}
mrc.experts = E
local HE = {
    info = ProtoExpert.new("mrch.expert.info", "Host datagram", G.SEQUENCE, S.CHAT),
    refused = ProtoExpert.new("mrch.expert.refused", "Connection refused", G.RESPONSE_CODE, S.WARN),
    malformed = ProtoExpert.new("mrch.expert.malformed", "Malformed host datagram", G.MALFORMED, S.ERROR),
}
mrch.experts = HE

mrc.prefs.claim_4791 = Pref.bool("Claim UDP port 4791", true,
    "Dissect UDP port 4791 as MRC rather than RoCEv2 (both use it)")
mrc.prefs.heuristic = Pref.bool("Find MRC on any UDP port", true,
    "mrc-host binds any port: recognise MRC by opcode, TVer and a matching ICRC, host datagrams by magic")
mrc.prefs.check_icrc = Pref.bool("Check the ICRC", true, "Verify the CRC32C trailer of every untrimmed packet")
mrc.prefs.usid_block = Pref.string("uSID block", "fcbb:bb00",
    "32-bit uSID block (F3216) whose addresses are shown as uSID containers; empty: none")

-- CRC32C (Castagnoli, reflected), spec/wire.md WIRE-ICRC-1.
local CRC = {}
for i = 0, 255 do
    local c = i
    for _ = 1, 8 do
        if band(c, 1) == 1 then c = bxor(rshift(c, 1), 0x82F63B78) else c = rshift(c, 1) end
    end
    CRC[i] = c
end
local function crc32c(s)
    local c = 0xFFFFFFFF
    for i = 1, #s do
        c = bxor(rshift(c, 8), CRC[band(bxor(c, s:byte(i)), 0xFF)])
    end
    return bxor(c, 0xFFFFFFFF)
end

-- The packet being dissected: generated items hang on an empty range of it.
local cur_tvb
local function gen(tree, field, value)
    local item = tree:add(field, cur_tvb(0, 0), value)
    item:set_generated()
    return item
end

local function hex6(v) return string.format("0x%06x", v) end
local function hex8(v) return string.format("0x%08x", v) end
local function psn_add(a, b) return (a + b) % PSN_MOD end

-- Fields of the enclosing IPv6 header (the last one: SRv6 encapsulation may stack two).
local f_dscp = Field.new("ipv6.tclass.dscp")
local f_ecn = Field.new("ipv6.tclass.ecn")
local f_flow = Field.new("ipv6.flow")
local f_dst = Field.new("ipv6.dst")
local f_src = Field.new("ipv6.src")
local function last(f)
    local all = { f() }
    local v = all[#all]
    return v and v.value
end

-- Per-capture state, rebuilt on every (re)load; per-frame results so a second pass shows the first's analysis.
local st
local function reset()
    st = {
        frames = {},     -- frame number -> analysis
        streams = {},    -- QPN -> stream index
        next_stream = 0,
        sent = {},       -- QPN -> { [psn] = first frame }
        probes = {},     -- "qpn/ev/ts" -> { frame, time }
        host_req = {},   -- token -> request frame
        connect_qps = {}, -- token -> connector QPNs
        paired = {},     -- QPN -> true once its peer QP is known
        echoes = {},     -- "ev/ts" of data packets to unpaired QPs -> their QPN
    }
end
reset()
function mrc.init() reset() end

local function stream_of(qpn)
    local s = st.streams[qpn]
    if not s then
        s = st.next_stream
        st.next_stream = s + 1
        st.streams[qpn] = s
    end
    return s
end

-- The two QPs of a pair share one stream, learned from CONNECT/ACCEPT, a probe and its answer, or a data
-- packet and the SACK/NACK that echoes its EV and timestamp. A QP already paired keeps its stream.
local function pair_streams(a, b)
    if a == b or st.paired[a] or st.paired[b] then return end
    local sa, sb = st.streams[a], st.streams[b]
    if sa and sb and sa ~= sb then return end
    local s = sa or sb or stream_of(a)
    st.streams[a], st.streams[b] = s, s
    st.paired[a], st.paired[b] = true, true
end

local function trim_state()
    local dscp = last(f_dscp)
    if dscp == DSCP_TRIMMED then return "TRIMMED" end
    if dscp == DSCP_TRIMMED_LASTHOP then return "TRIMMED_LASTHOP" end
    return nil
end

local function usid_tree(tree, pinfo)
    local block = mrc.prefs.usid_block
    if block == nil or block == "" then return end
    for _, addr in ipairs({ last(f_dst), last(f_src) }) do
        local text = tostring(addr)
        -- F3216: 32-bit block, then 16-bit uSIDs up to the first zero.
        local words = {}
        local expanded = text
        local head, tail = text:match("^(.-)::(.*)$")
        if head then
            local hw = {}
            for w in head:gmatch("[^:]+") do hw[#hw + 1] = w end
            local tw = {}
            for w in tail:gmatch("[^:]+") do tw[#tw + 1] = w end
            for _, w in ipairs(hw) do words[#words + 1] = w end
            for _ = 1, 8 - #hw - #tw do words[#words + 1] = "0" end
            for _, w in ipairs(tw) do words[#words + 1] = w end
        else
            for w in text:gmatch("[^:]+") do words[#words + 1] = w end
        end
        expanded = table.concat(words, ":", 1, 2)
        if #words == 8 and expanded == block then
            local list = {}
            for i = 3, 8 do
                local v = tonumber(words[i], 16)
                if v == 0 then break end
                list[#list + 1] = string.format("%04x", v)
            end
            local label = (addr == last(f_dst)) and "destination" or "source"
            local t = gen(tree, F.usid_block, block)
            t:set_text("SRv6 uSID container (" .. label .. " " .. text .. ")")
            gen(t, F.usid_block, block)
            if #list > 0 then
                gen(t, F.usid_active, tonumber(list[1], 16))
            end
            gen(t, F.usid_list, table.concat(list, " "))
        end
    end
end

-- BTH: 12 bytes. Returns opcode, flags byte, dest QP, psn.
local function dissect_bth(tvb, t)
    local b = t:add(mrc, tvb(0, 12), "Base transport header")
    b:set_text("BTH")
    b:add(F.opcode, tvb(0, 1))
    b:add(F.se, tvb(1, 1))
    b:add(F.rtx, tvb(1, 1))
    b:add(F.ts_flag, tvb(1, 1))
    b:add(F.at_flag, tvb(1, 1))
    b:add(F.tver, tvb(1, 1))
    b:add(F.pkey, tvb(2, 2))
    b:add(F.reserved, tvb(4, 1))
    b:add(F.dest_qp, tvb(5, 3))
    b:add(F.ack_req, tvb(8, 1))
    b:add(F.psn, tvb(9, 3))
    return tvb(0, 1):uint(), tvb(1, 1):uint(), tvb(5, 3):uint(), tvb(9, 3):uint()
end

local function need(ctx, n)
    if ctx.off + n > ctx.len then
        ctx.tree:add_proto_expert_info(E.malformed, string.format(
            "%s needs %d bytes at offset %d, %d left", ctx.opname, n, ctx.off, ctx.len - ctx.off))
        ctx.bad = true
        return false
    end
    if ctx.off + n > ctx.cap then
        -- The packet is whole on the wire; the capture kept less of it (snap length).
        ctx.tree:add_proto_expert_info(E.snapped, string.format(
            "The capture kept %d bytes: %s headers cut at offset %d", ctx.cap, ctx.opname, ctx.off))
        ctx.bad = true
        ctx.snapped = true
        return false
    end
    return true
end

local function data_headers(ctx, tvb, flags)
    local t, off = ctx.tree, ctx.off
    if not need(ctx, 8) then return end
    local m = t:add(mrc, tvb(off, 8), "METH")
    m:set_text("METH")
    m:add(F.ev, tvb(off, 4))
    m:add(F.msn, tvb(off + 4, 2))
    m:add(F.rqmsn, tvb(off + 6, 2))
    ctx.ev = tvb(off, 4):uint()
    ctx.off = off + 8
    if band(flags, 0x20) ~= 0 then
        if not need(ctx, 4) then return end
        t:add(mrc, tvb(ctx.off, 4)):set_text("TSETH"):add(F.ts, tvb(ctx.off, 4))
        ctx.ts = tvb(ctx.off, 4):uint()
        ctx.off = ctx.off + 4
    end
    if not need(ctx, 16) then return end
    off = ctx.off
    local r = t:add(mrc, tvb(off, 16))
    r:set_text("RETH")
    r:add(F.va, tvb(off, 8))
    r:add(F.rkey, tvb(off + 8, 4))
    r:add(F.dma_len, tvb(off + 12, 4))
    ctx.dma_len = tvb(off + 12, 4):uint()
    ctx.off = off + 16
    if DATA[ctx.opcode] then
        if not need(ctx, 4) then return end
        t:add(mrc, tvb(ctx.off, 4)):set_text("ImmDt"):add(F.imm, tvb(ctx.off, 4))
        ctx.off = ctx.off + 4
    end
    if band(flags, 0x10) ~= 0 then
        if not need(ctx, 8) then return end
        t:add(F.auth_tag, tvb(ctx.off, 8))
        ctx.off = ctx.off + 8
    end
    local rest = ctx.len - ctx.off
    if ctx.trimmed then
        -- spec WIRE-ICRC-2: nothing after the headers of a trimmed packet is data.
        gen(t, F.payload_len, 0)
        local kept = math.min(rest, ctx.cap - ctx.off)
        if kept > 0 then t:add(F.trim_remnant, tvb(ctx.off, kept)) end
        ctx.off = ctx.len
        ctx.payload = 0
        return
    end
    if ctx.opcode == READ_REQUEST then
        if rest > 0 then
            t:add_proto_expert_info(E.malformed, "READ_REQUEST carries no payload")
            ctx.bad = true
        end
        gen(t, F.payload_len, 0)
        ctx.payload = 0
        return
    end
    gen(t, F.payload_len, rest)
    local kept = math.min(rest, ctx.cap - ctx.off)
    if kept > 0 then
        local item = t:add(F.payload, tvb(ctx.off, kept))
        if kept < rest then item:append_text(string.format(" (%d of %d bytes captured)", kept, rest)) end
    end
    ctx.payload = rest
    ctx.off = ctx.len
end

local function sack_holes(ctx, tvb, pinfo, cack, base, off)
    local lo, hi = tvb(off + 20, 4):uint(), tvb(off + 16, 4):uint()
    local top = -1
    for i = 63, 0, -1 do
        local w = i < 32 and lo or hi
        if band(rshift(w, i % 32), 1) == 1 then top = i break end
    end
    local ranges, missing = {}, 0
    local gap = (base - cack - 1) % PSN_MOD
    if gap > 0 then
        ranges[#ranges + 1] = { psn_add(cack, 1), gap }
        missing = missing + gap
    end
    local start = nil
    for i = 0, top do
        local w = i < 32 and lo or hi
        local set = band(rshift(w, i % 32), 1) == 1
        if not set and start == nil then start = i end
        if set and start ~= nil then
            ranges[#ranges + 1] = { psn_add(base, start), i - start }
            missing = missing + (i - start)
            start = nil
        end
    end
    if missing == 0 or top < 0 and gap == 0 then return end
    local item = gen(ctx.tree, F.holes, missing)
    local texts = {}
    for _, r in ipairs(ranges) do
        local s = r[2] == 1 and hex6(r[1]) or (hex6(r[1]) .. "-" .. hex6(psn_add(r[1], r[2] - 1)))
        gen(item, F.hole, s)
        if #texts < 8 then texts[#texts + 1] = s end
    end
    item:add_proto_expert_info(E.holes, string.format("SACK: %d PSN%s missing above CACK_PSN %s: %s%s",
        missing, missing == 1 and "" or "s", hex6(cack), table.concat(texts, ", "), #ranges > 8 and ", ..." or ""))
end

-- A probe and its answer travel to the two QPs of a pair: match them by EV and timestamp.
local function probe_key(ev, ts) return string.format("%x/%x", ev, ts) end

-- SACK: SETH + CCETH
local function sack(ctx, tvb, pinfo, flags, dest_qp)
    local t, off, a = ctx.tree, ctx.off, ctx.a
    if not need(ctx, 32) then return end
    local s = t:add(mrc, tvb(off, 24))
    s:set_text("SETH")
    s:add(F.mark, tvb(off, 1))
    s:add(F.probe_reply, tvb(off, 1))
    s:add(F.tsv, tvb(off, 1))
    s:add(F.mpr, tvb(off + 1, 1))
    s:add(F.ev, tvb(off + 4, 4)):set_text("EV echo: " .. hex8(tvb(off + 4, 4):uint()))
    s:add(F.cack_psn, tvb(off + 9, 3))
    s:add(F.sack_base, tvb(off + 13, 3))
    s:add(F.bitmap, tvb(off + 16, 8))
    local c = t:add(mrc, tvb(off + 24, 8))
    c:set_text("CCETH")
    local tsv = band(tvb(off, 1):uint(), 0x10) ~= 0
    if tsv then
        c:add(F.ts_echo, tvb(off + 24, 4))
        ctx.echo_ts = tvb(off + 24, 4):uint()
    else
        c:add(F.reserved, tvb(off + 24, 4))
    end
    c:add(F.cwnd_pen, tvb(off + 28, 1))
    c:add(F.ooo_count, tvb(off + 29, 3))
    ctx.off = off + 32
    local ev, cack, base = tvb(off + 4, 4):uint(), tvb(off + 9, 3):uint(), tvb(off + 13, 3):uint()
    ctx.ev = ev
    ctx.info = string.format(" CACK %s", hex6(cack))
    local mark = rshift(tvb(off, 1):uint(), 6)
    if mark == 1 or mark == 2 then
        t:add_proto_expert_info(E.mark, string.format("SACK advises %s for EV %s", MARKS[mark], hex8(ev)))
    end
    if band(tvb(off, 1):uint(), 0x20) ~= 0 then
        local key = probe_key(ev, tvb(off + 24, 4):uint())
        if not pinfo.visited then
            local p = st.probes[key]
            if p and not p.reply then
                p.reply = pinfo.number
                pair_streams(p.qpn, dest_qp)
                a.probe_in = p.frame
                a.probe_rtt = (pinfo.abs_ts - p.time) * 1e6
            end
        end
        local text = string.format("Probe answered: EV %s delivers", hex8(ev))
        if a.probe_in then
            gen(t, F.probe_in, a.probe_in)
            gen(t, F.probe_rtt, a.probe_rtt)
            text = text .. string.format(" (probe in frame %d, %.1f us)", a.probe_in, a.probe_rtt)
        end
        t:add_proto_expert_info(E.probe_reply, text)
        ctx.info = ctx.info .. " PROBE-REPLY"
    end
    sack_holes(ctx, tvb, pinfo, cack, base, off)
end

-- NACK: NETH
local function nack(ctx, tvb, pinfo, flags, dest_qp)
    local t, off, a = ctx.tree, ctx.off, ctx.a
    if not need(ctx, 16) then return end
    local n = t:add(mrc, tvb(off, 16))
    n:set_text("NETH")
    n:add(F.reason, tvb(off, 1))
    n:add(F.nack_psn, tvb(off + 1, 3))
    n:add(F.ev, tvb(off + 4, 4)):set_text("EV echo: " .. hex8(tvb(off + 4, 4):uint()))
    n:add(F.ts_echo, tvb(off + 8, 4))
    ctx.echo_ts = tvb(off + 8, 4):uint()
    n:add(F.mpr, tvb(off + 12, 1))
    n:add(F.cack_psn, tvb(off + 13, 3))
    ctx.off = off + 16
    ctx.ev = tvb(off + 4, 4):uint()
    local reason, npsn = tvb(off, 1):uint(), tvb(off + 1, 3):uint()
    local name = REASONS[reason] or string.format("UNKNOWN(0x%02x)", reason)
    local text = string.format("NACK %s for PSN %s", name, hex6(npsn))
    if FATAL[reason] then
        t:add_proto_expert_info(E.nack_fatal, text .. ": the requester's QP fails")
    elseif REASONS[reason] then
        t:add_proto_expert_info(E.nack_retry, text .. ": the requester retransmits")
    else
        t:add_proto_expert_info(E.nack_unknown, text .. ": ignored by the receiver")
    end
    ctx.info = string.format(" %s NACK_PSN %s", name, hex6(npsn))
end

-- PROBE: PETH
local function probe(ctx, tvb, pinfo, flags, dest_qp)
    local t, off, a = ctx.tree, ctx.off, ctx.a
    if not need(ctx, 8) then return end
    local p = t:add(mrc, tvb(off, 8))
    p:set_text("PETH")
    p:add(F.ev, tvb(off, 4))
    p:add(F.ts, tvb(off + 4, 4))
    ctx.off = off + 8
    local ev = tvb(off, 4):uint()
    ctx.ev = ev
    if not pinfo.visited then
        a.probe_key = probe_key(ev, tvb(off + 4, 4):uint())
        st.probes[a.probe_key] = { frame = pinfo.number, time = pinfo.abs_ts, qpn = dest_qp }
    end
    local p2 = a.probe_key and st.probes[a.probe_key]
    local text = string.format("Probe of EV %s", hex8(ev))
    if p2 and p2.reply then
        gen(t, F.reply_in, p2.reply)
        text = text .. string.format(" (answered in frame %d)", p2.reply)
    end
    t:add_proto_expert_info(E.probe, text)
end

-- ACK: AETH
local function ack(ctx, tvb, pinfo, flags, dest_qp)
    local t, off, a = ctx.tree, ctx.off, ctx.a
    if not need(ctx, 8) then return end
    local k = t:add(mrc, tvb(off, 8))
    k:set_text("AETH")
    k:add(F.reserved, tvb(off, 1))
    k:add(F.cack_psn, tvb(off + 1, 3))
    k:add(F.cmsn, tvb(off + 4, 2))
    k:add(F.reserved, tvb(off + 6, 2))
    ctx.off = off + 8
    ctx.info = string.format(" CACK %s CMSN 0x%04x", hex6(tvb(off + 1, 3):uint()), tvb(off + 4, 2):uint())
end

-- EP_REQUEST: ERTH [TSETH]
local function ep_request(ctx, tvb, pinfo, flags, dest_qp)
    local t, off, a = ctx.tree, ctx.off, ctx.a
    if not need(ctx, 16) then return end
    local e = t:add(mrc, tvb(off, 16))
    e:set_text("ERTH")
    e:add(F.op, tvb(off, 1))
    e:add(F.req_id, tvb(off + 4, 4))
    e:add(F.port_mask, tvb(off + 8, 4))
    e:add(F.ev, tvb(off + 12, 4))
    ctx.ev = tvb(off + 12, 4):uint()
    ctx.off = off + 16
    if band(flags, 0x20) ~= 0 and need(ctx, 4) then
        t:add(mrc, tvb(ctx.off, 4)):set_text("TSETH"):add(F.ts, tvb(ctx.off, 4))
        ctx.off = ctx.off + 4
    end
    local o = tvb(off, 1):uint()
    local text = string.format("%s request %s", EP_OPS[o] or "UNKNOWN", hex8(tvb(off + 4, 4):uint()))
    if o == 0 then
        local mask, up = tvb(off + 8, 4):uint(), {}
        for p = 0, 31 do
            if band(rshift(mask, p), 1) == 1 then up[#up + 1] = tostring(p) end
        end
        text = text .. ": ports up " .. (#up > 0 and table.concat(up, ",") or "none")
    end
    t:add_proto_expert_info(E.endpoint, text)
    ctx.info = " " .. (EP_OPS[o] or string.format("UNKNOWN(0x%02x)", o))
end

-- EP_RESPONSE: EETH
local function ep_response(ctx, tvb, pinfo, flags, dest_qp)
    local t, off, a = ctx.tree, ctx.off, ctx.a
    if not need(ctx, 16) then return end
    local e = t:add(mrc, tvb(off, 16))
    e:set_text("EETH")
    e:add(F.op, tvb(off, 1))
    e:add(F.rx_port, tvb(off + 1, 1))
    e:add(F.reserved, tvb(off + 2, 2))
    e:add(F.req_id, tvb(off + 4, 4))
    e:add(F.ev, tvb(off + 8, 4)):set_text("EV echo: " .. hex8(tvb(off + 8, 4):uint()))
    e:add(F.ts_echo, tvb(off + 12, 4))
    ctx.ev = tvb(off + 8, 4):uint()
    ctx.off = off + 16
    local o = tvb(off, 1):uint()
    t:add_proto_expert_info(E.endpoint, string.format("%s response %s: arrived on port %d",
        EP_OPS[o] or "UNKNOWN", hex8(tvb(off + 4, 4):uint()), tvb(off + 1, 1):uint()))
    ctx.info = " " .. (EP_OPS[o] or "UNKNOWN") .. " response"
end

local CONTROL = {
    [0xDC] = sack, [0xDD] = nack, [0xDE] = probe, [0xD1] = ack, [0xD8] = ep_request, [0xD9] = ep_response,
}

-- Retransmission analysis of a data packet: per destination QP, the first frame each PSN was seen in.
local function data_analysis(ctx, pinfo, flags, dest_qp, psn)
    local a, t = ctx.a, ctx.tree
    if not pinfo.visited then
        local seen = st.sent[dest_qp]
        if not seen then
            seen = {}
            st.sent[dest_qp] = seen
        end
        local first = seen[psn]
        if first and first ~= pinfo.number then
            a.first_sent = first
        else
            seen[psn] = pinfo.number
        end
    end
    local rtx = band(flags, 0x40) ~= 0
    if rtx or a.first_sent then
        gen(t, F.retransmission, true)
    end
    if a.first_sent then
        gen(t, F.first_sent, a.first_sent)
    end
    if rtx then
        local text = string.format("Retransmission of PSN %s", hex6(psn))
        if a.first_sent then text = text .. string.format(" (first sent in frame %d)", a.first_sent) end
        t:add_proto_expert_info(E.retransmission, text)
    elseif a.first_sent then
        t:add_proto_expert_info(E.duplicate, string.format(
            "PSN %s was sent before (frame %d) and RTX is clear", hex6(psn), a.first_sent))
    end
end

local function check_icrc(ctx, tvb)
    local t = ctx.tree
    local n = tvb:reported_len()
    if ctx.trimmed then
        gen(t, F.icrc_status, 2):append_text(" (trimmed: the ICRC was cut)")
        return
    end
    if n < 16 then return end
    if tvb:len() < n then
        gen(t, F.icrc_status, 2):append_text(" (the capture cut the packet)")
        return
    end
    local icrc_item = t:add(F.icrc, tvb(n - 4, 4))
    if not mrc.prefs.check_icrc then return end
    local want = crc32c(tvb(0, n - 4):raw())
    if want == tvb(n - 4, 4):uint() then
        gen(icrc_item, F.icrc_status, 0)
    else
        gen(icrc_item, F.icrc_status, 1)
        icrc_item:add_proto_expert_info(E.bad_icrc, "Bad ICRC: should be " .. hex8(want))
    end
end

local function dissect_mrc(tvb, pinfo, root)
    cur_tvb = tvb
    pinfo.cols.protocol = "MRC"
    local len = tvb:reported_len()
    local tree = root:add(mrc, tvb())
    if len < 12 then
        tree:add_proto_expert_info(E.malformed, "Shorter than the 12-byte BTH")
        return len
    end
    if tvb:len() < 12 then
        tree:add_proto_expert_info(E.snapped, string.format("The capture kept %d bytes of the BTH", tvb:len()))
        return len
    end
    local opcode, flags, dest_qp, psn = dissect_bth(tvb, tree)
    local opname = OPCODES[opcode] or string.format("UNKNOWN(0x%02x)", opcode)
    if not pinfo.visited then st.frames[pinfo.number] = {} end
    local a = st.frames[pinfo.number] or {}
    local trim = trim_state()
    local ctx = { tree = tree, off = 12, opcode = opcode, opname = opname, a = a, trimmed = trim ~= nil,
        cap = tvb:len() }
    -- The ICRC (4 bytes) ends every packet that was not trimmed.
    ctx.len = trim and len or len - 4
    if band(flags, 0x0F) ~= TVER then
        tree:add_proto_expert_info(E.bad_tver, string.format("TVer %d: receivers drop it", band(flags, 0x0F)))
    end
    if trim then
        gen(tree, F.trimmed, true)
        tree:add_proto_expert_info(E.trimmed, string.format(
            "Trimmed by a switch (DSCP %s): payload and ICRC cut, the receiver NACKs PSN %s", trim, hex6(psn)))
    end
    local ecn = last(f_ecn)
    if ecn == 3 then
        gen(tree, F.ecn_ce, true)
        tree:add_proto_expert_info(E.ce, "ECN CE: a queue on the path is filling")
    end
    if DATA[opcode] ~= nil then
        data_headers(ctx, tvb, flags)
        if not ctx.bad then data_analysis(ctx, pinfo, flags, dest_qp, psn) end
    elseif OPCODES[opcode] then
        CONTROL[opcode](ctx, tvb, pinfo, flags, dest_qp)
        -- spec WIRE-AUTH-1: the AUTH tag follows the control header.
        if band(flags, 0x10) ~= 0 and not ctx.bad and need(ctx, 8) then
            tree:add(F.auth_tag, tvb(ctx.off, 8))
            ctx.off = ctx.off + 8
        end
    else
        tree:add_proto_expert_info(E.unknown_opcode, string.format("Opcode 0x%02x: receivers drop it", opcode))
        ctx.off = ctx.len
    end
    if not pinfo.visited and dest_qp ~= EP_QPN then
        if ctx.ts and ctx.ev and not st.paired[dest_qp] then
            st.echoes[probe_key(ctx.ev, ctx.ts)] = dest_qp
        elseif ctx.echo_ts and ctx.ev then
            local key = probe_key(ctx.ev, ctx.echo_ts)
            local q = st.echoes[key]
            if q then
                pair_streams(q, dest_qp)
                st.echoes[key] = nil
            end
        end
        a.stream = stream_of(dest_qp)
    end
    if a.stream then gen(tree, F.stream, a.stream) end
    if not ctx.bad and ctx.off < ctx.len and not trim then
        tree:add_proto_expert_info(E.malformed, string.format("%d bytes after the %s headers", ctx.len - ctx.off,
            opname))
    end
    if not ctx.bad then check_icrc(ctx, tvb) end
    local flow = last(f_flow)
    if flow and ctx.ev then
        gen(tree, F.flow_ev, flow)
    end
    usid_tree(tree, pinfo)
    local info = string.format("%s QP %s", opname, hex6(dest_qp))
    if DATA[opcode] ~= nil then
        info = info .. string.format(" PSN %s", hex6(psn))
    end
    if ctx.ev then info = info .. " EV " .. hex8(ctx.ev) end
    if ctx.payload and ctx.payload > 0 then info = info .. " Len=" .. ctx.payload end
    info = info .. (ctx.info or "")
    if band(flags, 0x40) ~= 0 then info = info .. " [RTX]" end
    if trim then info = info .. " [TRIMMED]" end
    pinfo.cols.info:set(info)
    tree:append_text(", " .. info)
    return len
end

-- ---------------------------------------------------------------- host datagrams (spec/host.md)

local function hneed(ctx, n)
    if ctx.off + n > ctx.len then
        ctx.tree:add_proto_expert_info(HE.malformed, string.format("%s: %d bytes needed at offset %d, %d left",
            ctx.what, n, ctx.off, ctx.len - ctx.off))
        ctx.bad = true
        return false
    end
    if ctx.off + n > ctx.cap then
        ctx.tree:add_proto_expert_info(E.snapped, string.format("The capture kept %d bytes: %s cut at offset %d",
            ctx.cap, ctx.what, ctx.off))
        ctx.bad = true
        return false
    end
    return true
end

local function plane_list(ctx, tvb)
    if not hneed(ctx, 2) then return end
    local count = tvb(ctx.off, 1):uint()
    local pl = ctx.tree:add(HF.planes, tvb(ctx.off, 1))
    ctx.off = ctx.off + 2
    for p = 0, count - 1 do
        if not hneed(ctx, 20) then return end
        local o = ctx.off
        local t = pl:add(mrch, tvb(o, 20))
        t:set_text(string.format("Plane %d: [%s]:%d", p, tostring(tvb(o, 16):ipv6()), tvb(o + 16, 2):uint()))
        t:add(HF.plane_addr, tvb(o, 16))
        t:add(HF.plane_port, tvb(o + 16, 2))
        t:add(HF.plane_t0, tvb(o + 18, 2))
        ctx.off = o + 20
    end
end

local function link_body(ctx, tvb)
    plane_list(ctx, tvb)
    if ctx.bad or not hneed(ctx, 1) then return {} end
    local n = tvb(ctx.off, 1):uint()
    local qt = ctx.tree:add(HF.qps, tvb(ctx.off, 1))
    ctx.off = ctx.off + 1
    local qpns = {}
    for i = 1, n do
        if not hneed(ctx, 25) then return qpns end
        local o = ctx.off
        local t = qt:add(mrch, tvb(o, 25))
        t:set_text(string.format("QP %d: QPN 0x%06x, first PSN 0x%06x", i - 1, tvb(o, 4):uint(),
            band(tvb(o + 4, 4):uint(), 0xFFFFFF)))
        t:add(HF.qpn, tvb(o, 4))
        t:add(HF.psn, tvb(o + 4, 4))
        local c = t:add(HF.caps, tvb(o + 8, 1))
        c:add(HF.cap_send, tvb(o + 8, 1))
        c:add(HF.cap_read, tvb(o + 8, 1))
        t:add(HF.key, tvb(o + 9, 16))
        qpns[i] = tvb(o, 4):uint()
        ctx.off = o + 25
    end
    if not hneed(ctx, 2) then return qpns end
    local app = tvb(ctx.off, 2):uint()
    ctx.tree:add(HF.app_len, tvb(ctx.off, 2))
    ctx.off = ctx.off + 2
    if app > 0 and hneed(ctx, app) then
        ctx.tree:add(HF.app, tvb(ctx.off, app))
        ctx.off = ctx.off + app
    end
    return qpns
end

local function dissect_host(tvb, pinfo, root)
    cur_tvb = tvb
    pinfo.cols.protocol = "MRC-HOST"
    local len = tvb:reported_len()
    local tree = root:add(mrch, tvb())
    local ctx = { tree = tree, off = 0, len = len, cap = tvb:len(), what = "header" }
    if not hneed(ctx, 16) then return len end
    tree:add(HF.magic, tvb(0, 4))
    tree:add(HF.version, tvb(4, 1))
    tree:add(HF.type, tvb(5, 1))
    tree:add(HF.reserved, tvb(6, 2))
    tree:add(HF.token, tvb(8, 8))
    ctx.off = 16
    local ty = tvb(5, 1):uint()
    local token = tvb(8, 8):uint64():tohex()
    local name = HOST_TYPES[ty] or string.format("type %d", ty)
    ctx.what = name
    local info = string.format("%s token 0x%s", name, token)
    if ty == 1 then
        if ctx.cap > 16 then tree:add(HF.padding, tvb(16, ctx.cap - 16)) end
        ctx.off = len
    elseif ty == 2 then
        plane_list(ctx, tvb)
    elseif ty == 3 then
        if hneed(ctx, 8) then
            tree:add(HF.listener, tvb(16, 8))
            ctx.off = 24
            local qpns = link_body(ctx, tvb)
            if not ctx.bad and hneed(ctx, 8) then
                tree:add(HF.tag, tvb(ctx.off, 8))
                ctx.off = ctx.off + 8
            end
            if not pinfo.visited then st.connect_qps[token] = qpns end
            info = info .. string.format(" %d QP%s", #qpns, #qpns == 1 and "" or "s")
        end
    elseif ty == 4 then
        local qpns = link_body(ctx, tvb)
        local theirs = st.connect_qps[token]
        if not pinfo.visited and theirs then
            -- spec HOST-DGRAM-5: the i-th QP of the CONNECT pairs with the i-th of the ACCEPT.
            for i, q in ipairs(qpns) do
                if theirs[i] then pair_streams(q, theirs[i]) end
            end
        end
    elseif ty == 5 then
        if hneed(ctx, 1) then
            tree:add(HF.refuse, tvb(16, 1))
            tree:add_proto_expert_info(HE.refused, "REFUSE: " .. (REFUSE_REASONS[tvb(16, 1):uint()] or "unknown"))
            ctx.off = 17
        end
    elseif ty == 6 then
        if hneed(ctx, 1) then
            local n = tvb(16, 1):uint()
            local qt = tree:add(HF.qps, tvb(16, 1))
            ctx.off = 17
            for _ = 1, n do
                if not hneed(ctx, 8) then break end
                local t = qt:add(mrch, tvb(ctx.off, 8))
                t:set_text(string.format("Close QPN 0x%06x (peer's 0x%06x)", tvb(ctx.off, 4):uint(),
                    tvb(ctx.off + 4, 4):uint()))
                t:add(HF.qpn, tvb(ctx.off, 4))
                t:add(HF.peer_qpn, tvb(ctx.off + 4, 4))
                ctx.off = ctx.off + 8
            end
            if not ctx.bad and hneed(ctx, 8) then
                tree:add(HF.tag, tvb(ctx.off, 8))
                ctx.off = ctx.off + 8
            end
        end
    end
    -- Requests (odd types but REFUSE... no: RESOLVE, CONNECT, CLOSE) and their answers share a token.
    local is_request = ty == 1 or ty == 3 or ty == 6
    if not pinfo.visited then
        st.frames[pinfo.number] = st.frames[pinfo.number] or {}
        local a = st.frames[pinfo.number]
        if is_request then
            st.host_req[token] = st.host_req[token] or { frame = pinfo.number }
        else
            local r = st.host_req[token]
            if r then
                a.request_in = r.frame
                r.response = r.response or pinfo.number
            end
        end
        a.req = st.host_req[token]
    end
    local a = st.frames[pinfo.number] or {}
    if a.request_in then gen(tree, HF.request_in, a.request_in) end
    if is_request and a.req and a.req.response then
        gen(tree, HF.response_in, a.req.response)
    end
    if not ctx.bad and ctx.off < len and ty ~= 1 then
        tree:add_proto_expert_info(HE.malformed, string.format("%d bytes after the %s body", len - ctx.off, name))
    end
    tree:add_proto_expert_info(HE.info, info)
    pinfo.cols.info:set(info)
    tree:append_text(", " .. info)
    return len
end

local function is_host(tvb)
    return tvb:len() >= 5 and tvb(0, 4):string() == "MRCH" and tvb(4, 1):uint() == 1
end

function mrc.dissector(tvb, pinfo, root)
    if is_host(tvb) then
        return dissect_host(tvb, pinfo, root)
    end
    return dissect_mrc(tvb, pinfo, root)
end

-- Ports other than 4791: MRC only if the opcode, TVer and ICRC agree (or the packet was trimmed), host
-- datagrams by their magic.
local function heuristic(tvb, pinfo, root)
    if not mrc.prefs.heuristic then return false end
    if is_host(tvb) then
        dissect_host(tvb, pinfo, root)
        return true
    end
    local n = tvb:len()
    if n < 16 or not OPCODES[tvb(0, 1):uint()] or band(tvb(1, 1):uint(), 0x0F) ~= TVER then return false end
    -- A packet the capture cut (snap length) has no ICRC to check: opcode and TVer must do.
    if not trim_state() and n == tvb:reported_len() then
        if crc32c(tvb(0, n - 4):raw()) ~= tvb(n - 4, 4):uint() then return false end
    end
    dissect_mrc(tvb, pinfo, root)
    return true
end

mrc:register_heuristic("udp", heuristic)

local udp_port = DissectorTable.get("udp.port")
local roce = udp_port:get_dissector(MRC_PORT)
function mrc.prefs_changed()
    if mrc.prefs.claim_4791 then
        udp_port:add(MRC_PORT, mrc)
    elseif roce then
        udp_port:add(MRC_PORT, roce)
    else
        udp_port:remove(MRC_PORT, mrc)
    end
end
udp_port:add(MRC_PORT, mrc)
