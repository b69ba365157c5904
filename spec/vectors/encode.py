#!/usr/bin/env python3
"""An independent encoder for the golden vectors: builds every packet of spec/vectors/*.vec from its `field`
lines and spec/wire.md alone, and compares the result with the vector's hex.

It shares no code with the Rust implementation (libmrc/src/wire): the opcode table, the header list of each
opcode, the NACK reasons, the SACK marks and the endpoint ops are read from the tables and text of
spec/wire.md; the header layouts are written here from the spec's byte diagrams; CRC32C is computed bit by
bit from the spec's parameters (and checked against its check value first); the AUTH tag (WIRE-AUTH-1) is
SipHash-1-3 written here from the algorithm's definition (and checked against the spec's tag and request
token vectors first). So a vector that the Rust code
wrote wrongly (a field in the wrong place, the wrong width, the ICRC over the wrong bytes) disagrees with this
encoder even though the Rust code reads its own output back.

Payload bytes are not among a vector's fields: every vector carries the payload 00 01 02 ... (byte i is
i mod 256), see spec/vectors/README.md.

Usage: encode.py [SPEC_DIR]   (default: the spec/ folder this file is in). Prints one line per vector and
"ok N" at the end; exits 1 on the first disagreement, naming the vector, the offset and both bytes.
"""

import ipaddress
import os
import re
import sys


def crc32c(data):
    """CRC32C as WIRE-ICRC-1 defines it: Castagnoli, reflected, init and final XOR 0xFFFFFFFF."""
    crc = 0xFFFFFFFF
    for b in data:
        crc ^= b
        for _ in range(8):
            crc = (crc >> 1) ^ (0x82F63B78 if crc & 1 else 0)
    return crc ^ 0xFFFFFFFF


M64 = (1 << 64) - 1


def siphash13(key, data):
    """SipHash-1-3 as WIRE-AUTH-1 names it: the key's 16 bytes as two little-endian words, one compression
    round per 8-byte word, three finalization rounds; the result as a 64-bit number."""

    def rotl(x, b):
        return ((x << b) | (x >> (64 - b))) & M64

    def rounds(v, n):
        for _ in range(n):
            v[0] = (v[0] + v[1]) & M64
            v[1] = rotl(v[1], 13) ^ v[0]
            v[0] = rotl(v[0], 32)
            v[2] = (v[2] + v[3]) & M64
            v[3] = rotl(v[3], 16) ^ v[2]
            v[0] = (v[0] + v[3]) & M64
            v[3] = rotl(v[3], 21) ^ v[0]
            v[2] = (v[2] + v[1]) & M64
            v[1] = rotl(v[1], 17) ^ v[2]
            v[2] = rotl(v[2], 32)

    k0 = int.from_bytes(key[:8], "little")
    k1 = int.from_bytes(key[8:16], "little")
    v = [k0 ^ 0x736F6D6570736575, k1 ^ 0x646F72616E646F6D, k0 ^ 0x6C7967656E657261, k1 ^ 0x7465646279746573]
    tail = len(data) % 8
    words = [int.from_bytes(data[i : i + 8], "little") for i in range(0, len(data) - tail, 8)]
    words.append((len(data) & 0xFF) << 56 | int.from_bytes(data[len(data) - tail :], "little"))
    for m in words:
        v[3] ^= m
        rounds(v, 1)
        v[0] ^= m
    v[2] ^= 0xFF
    rounds(v, 3)
    return v[0] ^ v[1] ^ v[2] ^ v[3]


def read_spec(spec_dir):
    text = open(os.path.join(spec_dir, "wire.md")).read()
    check = re.search(r"check value 0x([0-9A-Fa-f]{8}) for \"123456789\"", text)
    assert check, "wire.md: no CRC check value"
    got = crc32c(b"123456789")
    assert got == int(check.group(1), 16), f"CRC32C check value {got:#010x}"
    # Vector: key `00 01 .. 0f`, covered bytes `00 01 .. 0e` (15 bytes) → tag `56 99 51 2a 6d d8 20 d3`
    auth = re.search(r"covered bytes\s+`00 01 \.\. 0e` \(15 bytes\) → tag `([0-9a-f ]+)`", text)
    assert auth, "wire.md: no AUTH tag vector"
    tag = siphash13(bytes(range(16)), bytes(range(15))).to_bytes(8, "little")
    assert tag == bytes.fromhex(auth.group(1)), f"SipHash-1-3 vector: {tag.hex(' ')}"
    token = re.search(r"request\s+token is `([0-9a-f ]+)`", text)
    assert token, "wire.md: no request token vector"
    tag = siphash13(bytes(range(16)), b"").to_bytes(8, "little")
    assert tag == bytes.fromhex(token.group(1)), f"request token vector: {tag.hex(' ')}"
    # | 0xC6 | WRITE_FIRST | METH [TSETH] RETH, payload | MRC |
    opcodes = {}
    for value, name, headers in re.findall(
        r"^\| (0x[0-9A-F]{2}) \| ([A-Z_]+) \| ([^|]+) \|", text, re.M
    ):
        opcodes[name] = (int(value, 16), headers.replace(",", " ").split())
    assert len(opcodes) >= 20, f"wire.md: only {len(opcodes)} opcodes in the table"
    # Reasons: 0x01 TRIMMED, 0x02 TRIMMED_LASTHOP, ...
    nack = re.search(r"WIRE-NACK-1\*\* Reasons: (.*?)Other values", text, re.S).group(1)
    reasons = {n: int(v, 16) for v, n in re.findall(r"(0x[0-9A-F]{2})\s+([A-Z_]+)", nack)}
    # `m` is the path-marking advice ...: 0 NONE, 1 SKIP_ONCE (...), 2 ALWAYS_SKIP (...)
    sack = re.search(r"WIRE-SACK-1\*\* (.*?)PR = 1", text, re.S).group(1)
    marks = {n: int(v) for v, n in re.findall(r"\b([0-3])\s+([A-Z_]{4,})", sack)}
    # op 0 is PORT_STATUS (...), op 1 is EV_PROBE.
    ops = {n: int(v) for v, n in re.findall(r"op\s+(\d+)\s+is\s+([A-Z_]+)", text)}
    assert {"TRIMMED", "REMOTE_ACCESS"} <= reasons.keys(), reasons
    assert {"NONE", "SKIP_ONCE", "ALWAYS_SKIP"} <= marks.keys(), marks
    assert {"PORT_STATUS", "EV_PROBE"} <= ops.keys(), ops
    return opcodes, reasons, marks, ops


def read_vector(path):
    v = {"hex": bytearray(), "fields": {}, "frame": False, "trimmed": False}
    for line in open(path):
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        key, value = (s.strip() for s in line.split("=", 1))
        if key == "hex":
            v["hex"] += bytes.fromhex(value)
        elif key.startswith("field "):
            v["fields"][key[6:]] = value
        elif key in ("frame", "trimmed"):
            v[key] = value == "true"
        else:
            v[key] = value
    return v


def num(f, name):
    return int(f[name], 0)


def be(value, width):
    return value.to_bytes(width, "big")


def flag(f, name):
    return f[name] == "true"


def meth(f):
    # byte 0-3 EV, 4-5 MSN, 6-7 RQMSN
    return be(num(f, "ev"), 4) + be(num(f, "msn"), 2) + be(num(f, "rqmsn"), 2)


def reth(f):
    # byte 0-7 VA, 8-11 R_Key, 12-15 DMA length
    return be(num(f, "va"), 8) + be(num(f, "rkey"), 4) + be(num(f, "dma_len"), 4)


def seth_cceth(f, marks):
    # SETH: byte 0 m(7..6) PR(5) TSV(4); 1 MPR; 2-3 reserved; 4-7 EV echo; 8 reserved; 9-11 CACK_PSN;
    # 12 reserved; 13-15 SACK_BASE; 16-23 bitmap. CCETH: 0-3 TS echo; 4 RCV_CWND_PEN (6..0); 5-7 OOO_COUNT.
    tsv = f["ts_echo"] != "none"
    b0 = marks[f["mark"]] << 6 | flag(f, "probe_reply") << 5 | tsv << 4
    seth = (
        bytes([b0, num(f, "mpr"), 0, 0])
        + be(num(f, "ev"), 4)
        + be(num(f, "cack_psn"), 4)
        + be(num(f, "sack_base"), 4)
        + be(num(f, "bitmap"), 8)
    )
    ts = num(f, "ts_echo") if tsv else 0
    return seth + be(ts, 4) + bytes([num(f, "cwnd_pen") & 0x7F]) + be(num(f, "ooo_count"), 3)


def neth(f, reasons):
    # byte 0 reason; 1-3 NACK_PSN; 4-7 EV echo; 8-11 TS echo; 12 MPR; 13-15 CACK_PSN
    return (
        bytes([reasons[f["reason"]]])
        + be(num(f, "nack_psn"), 3)
        + be(num(f, "ev"), 4)
        + be(num(f, "ts_echo"), 4)
        + bytes([num(f, "mpr")])
        + be(num(f, "cack_psn"), 3)
    )


def auth_tag(key, opcode, headers):
    """WIRE-AUTH-1: a request's token (SipHash-1-3 of the empty message) or, for any other packet, SipHash-1-3 of
    the headers so far (BTH with AT set onwards), under `key`, little-endian; nothing without a key."""
    if key is None:
        return b""
    request = opcode.startswith(("WRITE_", "SEND_")) or opcode == "READ_REQUEST"
    return siphash13(bytes.fromhex(key), b"" if request else headers).to_bytes(8, "little")


def mrc_packet(v, spec, extra_len):
    """The UDP payload the fields describe; `extra_len` payload bytes for a trimmed vector (cut, no ICRC)."""
    opcodes, reasons, marks, ops = spec
    f = v["fields"]
    opcode, headers = opcodes[f["opcode"]]
    has_ts = "[TSETH]" in headers and f.get("ts", "none") != "none"
    # BTH: 0 opcode; 1 SE(7) RTX(6) TS(5) TVer(3..0)=1; 2-3 P_Key; 4 reserved; 5-7 DestQP; 8 A(7); 9-11 PSN
    key = v.get("auth_key")
    b1 = flag(f, "se") << 7 | flag(f, "rtx") << 6 | has_ts << 5 | (key is not None) << 4 | 1
    out = bytes([opcode, b1]) + be(num(f, "pkey"), 2) + be(num(f, "dest_qp"), 4)
    out += bytes([flag(f, "ack_req") << 7]) + be(num(f, "psn"), 3)
    for h in headers:
        if h == "METH":
            out += meth(f)
        elif h == "[TSETH]":
            out += be(num(f, "ts"), 4) if has_ts else b""
        elif h == "RETH":
            out += reth(f)
        elif h == "ImmDt":
            out += be(num(f, "imm"), 4)
        elif h == "payload":
            out += auth_tag(key, f["opcode"], out)
            key = None
            n = extra_len if v["trimmed"] else num(f, "payload_len")
            out += bytes(i % 256 for i in range(n))
        elif h == "AETH":  # 0 reserved; 1-3 CACK_PSN; 4-5 CMSN; 6-7 reserved
            out += be(num(f, "cack_psn"), 4) + be(num(f, "cmsn"), 2) + b"\0\0"
        elif h == "SETH":
            out += seth_cceth(f, marks)
        elif h == "CCETH":
            pass  # written with the SETH
        elif h == "NETH":
            out += neth(f, reasons)
        elif h == "PETH":  # 0-3 EV; 4-7 TS
            out += be(num(f, "ev"), 4) + be(num(f, "ts"), 4)
        elif h == "ERTH":  # 0 op; 1-3 reserved; 4-7 request id; 8-11 port mask; 12-15 EV
            out += bytes([ops[f["op"]], 0, 0, 0]) + be(num(f, "req_id"), 4)
            out += be(num(f, "port_mask"), 4) + be(num(f, "ev"), 4)
        elif h == "EETH":  # 0 op; 1 RX port; 2-3 reserved; 4-7 request id; 8-11 EV echo; 12-15 TS echo
            out += bytes([ops[f["op"]], num(f, "rx_port"), 0, 0]) + be(num(f, "req_id"), 4)
            out += be(num(f, "ev"), 4) + be(num(f, "ts_echo"), 4)
        else:
            raise SystemExit(f"{v['name']}: header {h} of {f['opcode']} is unknown to this encoder")
    # A packet without payload: the tag ends the headers.
    out += auth_tag(key, f["opcode"], out)
    if v["trimmed"]:
        return out
    return out + be(crc32c(out), 4)


def frame(v, spec):
    f = v["fields"]
    payload = mrc_packet(v, spec, 0)
    # IPv6: version 6, traffic class (DSCP << 2 | ECN), 20-bit flow label; payload length; next header; hop
    # limit; source; destination. UDP: ports, length, checksum (zero, WIRE-ENC-3).
    tc = num(f, "ip.dscp") << 2 | num(f, "ip.ecn")
    word = 6 << 28 | tc << 20 | num(f, "ip.flow_label")
    ip = be(word, 4) + be(num(f, "ip.payload_len"), 2)
    ip += bytes([num(f, "ip.next_header"), num(f, "ip.hop_limit")])
    ip += ipaddress.IPv6Address(f["ip.src"]).packed + ipaddress.IPv6Address(f["ip.dst"]).packed
    udp = be(num(f, "udp.src_port"), 2) + be(num(f, "udp.dst_port"), 2)
    udp += be(num(f, "udp.length"), 2) + be(num(f, "udp.checksum"), 2)
    assert num(f, "udp.length") == 8 + len(payload), "udp.length"
    return ip + udp + payload


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    spec_dir = sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(here)
    spec = read_spec(spec_dir)
    vec_dir = os.path.join(spec_dir, "vectors")
    names = sorted(n for n in os.listdir(vec_dir) if n.endswith(".vec"))
    for n in names:
        v = read_vector(os.path.join(vec_dir, n))
        v.setdefault("name", n)
        want = bytes(v["hex"])
        if v["frame"]:
            got = frame(v, spec)
        else:
            got = mrc_packet(v, spec, 0)
            if v["trimmed"]:
                # Headers as encoded, then as much of the payload as the switch kept.
                got = mrc_packet(v, spec, len(want) - len(got))
        if got != want:
            at = next((i for i in range(min(len(got), len(want))) if got[i] != want[i]), None)
            if at is None:
                raise SystemExit(f"{n}: {len(got)} bytes encoded, the vector has {len(want)}")
            raise SystemExit(
                f"{n}: byte {at} differs: encoded {got[at]:#04x}, vector {want[at]:#04x}\n"
                f"  encoded {got.hex(' ')}\n  vector  {want.hex(' ')}"
            )
        print(f"{n}: {v['fields'].get('opcode')} {len(want)} bytes match")
    print(f"ok {len(names)}")


if __name__ == "__main__":
    main()
