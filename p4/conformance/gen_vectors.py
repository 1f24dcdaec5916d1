#!/usr/bin/env python3
"""Builds the conformance vectors in vectors/ from header fields, independently of the Go
pipeline: every packet is packed field by field here (struct.pack, checksums computed
here), and each hex chunk in a vector carries the note of how it was built.

Run it after changing a vector: python3 p4/conformance/gen_vectors.py
"""
import json
import os
import struct

HERE = os.path.dirname(os.path.abspath(__file__))


def mac(s):
    return bytes(int(x, 16) for x in s.split(":"))


def ip(s):
    return bytes(int(x) for x in s.split("."))


def csum(b):
    s = 0
    for i in range(0, len(b), 2):
        s += (b[i] << 8) | b[i + 1]
    while s > 0xFFFF:
        s = (s & 0xFFFF) + (s >> 16)
    return (~s) & 0xFFFF


def eth(dst, src, etype=0x0800):
    return (mac(dst) + mac(src) + struct.pack("!H", etype), f"ethernet {dst} <- {src} type {etype:#06x}")


def ipv4(src, dst, payload_len, proto=17, ttl=64, ident=1, flags=0, tos=0, good_csum=True):
    h = struct.pack("!BBHHHBBH4s4s", 0x45, tos, 20 + payload_len, ident, flags << 13, ttl, proto, 0, ip(src), ip(dst))
    c = csum(h) if good_csum else 0xBEEF
    h = h[:10] + struct.pack("!H", c) + h[12:]
    return (h, f"ipv4 {src} -> {dst} proto {proto} ttl {ttl} id {ident} flags {flags} len {20 + payload_len} csum {c:#06x}")


def udp(sport, dport, payload_len, c=0):
    return (struct.pack("!HHHH", sport, dport, 8 + payload_len, c), f"udp {sport} -> {dport} len {8 + payload_len} csum {c:#06x}")


def plait(flags, path_id, tunnel_id, seq, path_seq, tx_ns):
    b = struct.pack("!BBHIII", (1 << 4) | flags, path_id, tunnel_id, seq, path_seq, tx_ns)
    return (b, f"plait v1 flags {flags:#x} path {path_id} tunnel {tunnel_id:#06x} seq {seq} path_seq {path_seq} tx_ns {tx_ns:#010x}")


def tel(queue_us, max_qdepth, hops):
    return (struct.pack("!IHBB", queue_us, max_qdepth, hops, 0), f"telemetry queue_us {queue_us} max_qdepth {max_qdepth} hops {hops}")


def raw(b, note):
    return (b, note)


def chunks(*parts):
    return [f"{b.hex()}  # {note}" for b, note in parts]


def length(*parts):
    return sum(len(b) for b, _ in parts)


def vector(name, description, entries, input=None, expect=None, steps=None, packet_in=None, counters=None):
    """Writes a vector: entries, then steps, each sending a packet (repeat times) and
    expecting frames (expect: exact, per port in order) or only how many leave each port
    (expect_counts), then the counters. State (the split's registers) is set up and
    observed through packets only: BMv2's P4Runtime server has no register access."""
    if steps is None:
        steps = [{"input": input, "expect": expect}]
        if packet_in is not None:
            steps[0]["packet_in"] = packet_in
    v = {"description": description, "entries": entries, "steps": steps}
    if counters is not None:
        v["counters"] = counters
    with open(os.path.join(HERE, "vectors", name + ".json"), "w") as f:
        json.dump(v, f, indent=2)
        f.write("\n")


M1, M2, MH = "02:00:00:00:00:01", "02:00:00:00:00:02", "02:00:00:00:00:0a"
payload = raw(bytes(range(16)), "16 payload bytes 00..0f")

# --- forwarding by port -------------------------------------------------------------
arp = [eth("ff:ff:ff:ff:ff:ff", M1, 0x0806), raw(bytes(28), "28-byte ARP body (zeros)")]
vector(
    "port_fwd",
    description="port_fwd forwards a non-IP frame unchanged; rx and tx port counters count it",
    entries=[{"table": "port_fwd", "match": {"standard_metadata.ingress_port": 1}, "action": "forward", "params": {"port": 2}}],
    input={"port": 1, "packet": chunks(*arp)},
    expect=[{"port": 2, "packet": chunks(*arp)}],
    counters=[
        {"name": "port_rx_counter", "index": 1, "packets": 1, "bytes": length(*arp)},
        {"name": "port_tx_counter", "index": 2, "packets": 1, "bytes": length(*arp)},
    ],
)
vector(
    "default_drop",
    description="with no entries port_fwd's default action drops; only the rx counter moves",
    entries=[],
    input={"port": 1, "packet": chunks(*arp)},
    expect=[],
    counters=[
        {"name": "port_rx_counter", "index": 1, "packets": 1, "bytes": length(*arp)},
        {"name": "port_tx_counter", "index": 2, "packets": 0, "bytes": 0},
    ],
)

# --- IPv4 routing ---------------------------------------------------------------------
u = udp(1234, 5201, 16)
pin = [eth(M2, M1), ipv4("10.0.0.1", "10.1.2.3", 24, ttl=64), u, payload]
pout = [eth("02:00:00:00:00:24", M2), ipv4("10.0.0.1", "10.1.2.3", 24, ttl=63), u, payload]
vector(
    "ipv4_lpm_ttl_checksum",
    description="ipv4_lpm picks the longest prefix (/24 over /8), rewrites the MACs, decrements TTL and recomputes the checksum",
    entries=[
        {"table": "ipv4_lpm", "match": {"hdr.ipv4.dst_addr": "10.0.0.0/8"}, "action": "ipv4_forward", "params": {"dst_mac": "02:00:00:00:00:08", "port": 3}},
        {"table": "ipv4_lpm", "match": {"hdr.ipv4.dst_addr": "10.1.2.0/24"}, "action": "ipv4_forward", "params": {"dst_mac": "02:00:00:00:00:24", "port": 2}},
    ],
    input={"port": 1, "packet": chunks(*pin)},
    expect=[{"port": 2, "packet": chunks(*pout)}],
    counters=[{"name": "port_tx_counter", "index": 2, "packets": 1, "bytes": length(*pin)}],
)
bad = [eth(M2, M1), ipv4("10.0.0.1", "192.168.7.7", 24, good_csum=False), u, payload]
fixed = [eth(M2, M1), ipv4("10.0.0.1", "192.168.7.7", 24), u, payload]
vector(
    "ipv4_miss_falls_to_port_fwd",
    description="an ipv4_lpm miss falls through to port_fwd; the deparser rewrites a wrong IPv4 checksum",
    entries=[
        {"table": "ipv4_lpm", "match": {"hdr.ipv4.dst_addr": "10.0.0.0/8"}, "action": "drop"},
        {"table": "port_fwd", "match": {"standard_metadata.ingress_port": 1}, "action": "forward", "params": {"port": 4}},
    ],
    input={"port": 1, "packet": chunks(*bad)},
    expect=[{"port": 4, "packet": chunks(*fixed)}],
)
vector(
    "ipv4_lpm_drop",
    description="an ipv4_lpm hit with drop drops, even when port_fwd would forward",
    entries=[
        {"table": "ipv4_lpm", "match": {"hdr.ipv4.dst_addr": "10.1.0.0/16"}, "action": "drop"},
        {"table": "port_fwd", "match": {"standard_metadata.ingress_port": 1}, "action": "forward", "params": {"port": 2}},
    ],
    input={"port": 1, "packet": chunks(*pin)},
    expect=[],
    counters=[{"name": "port_tx_counter", "index": 2, "packets": 0, "bytes": 0}],
)

# --- telemetry ------------------------------------------------------------------------
inner = [ipv4("192.168.1.1", "192.168.2.1", 24, ttl=61, ident=9), udp(4000, 5001, 16), payload]
n_in = length(*inner)


def plait_pkt(tel_block, ucsum, flags=0x2, tunnel=0x0102, path=2, body=None, ip_encap=False):
    """A Plait packet in UDP, or with ip_encap right after IPv4 (protocol 253, no UDP)."""
    body = inner if body is None else body
    n = 16 + (8 if tel_block else 0) + length(*body)
    if ip_encap:
        outer = [ipv4("172.16.0.1", "172.16.1.1", n, proto=253, flags=2)]
    else:
        outer = [ipv4("172.16.0.1", "172.16.1.1", 8 + n, flags=2), udp(7733, 7733, n, ucsum)]
    parts = [eth(M2, M1)] + outer + [plait(flags, path, tunnel, 1000, 77, 0x12345678)]
    if tel_block:
        parts.append(tel_block)
    return parts + body


tin = plait_pkt(tel(500, 7, 2), 0xABCD)
tout = plait_pkt(tel(500, 7, 3), 0)
fwd12 = {"table": "port_fwd", "match": {"standard_metadata.ingress_port": 1}, "action": "forward", "params": {"port": 2}}
vector(
    "telemetry_stamp",
    description="a Plait packet with a telemetry block is stamped on egress: hops+1, max_qdepth kept (queue empty), queue_us + 0, UDP checksum cleared; path_counter[(tunnel % 64) * 8 + path] counts it",
    entries=[fwd12],
    input={"port": 1, "packet": chunks(*tin)},
    expect=[{"port": 2, "packet": chunks(*tout), "bmv2_ignore": [[14 + 20 + 8 + 16, 4, "queue_us: BMv2's deq_timedelta is a real, non-zero time"]]}],
    counters=[{"name": "path_counter", "index": (0x0102 % 64) * 8 + 2, "packets": 1, "bytes": length(*tin)}],
)
tin_ip = plait_pkt(tel(500, 7, 2), None, ip_encap=True)
vector(
    "telemetry_stamp_ip",
    description="an IP-encapsulated Plait packet (IPv4 protocol 253, no UDP) is stamped like one in UDP and counted per path",
    entries=[fwd12],
    input={"port": 1, "packet": chunks(*tin_ip)},
    expect=[{"port": 2, "packet": chunks(*plait_pkt(tel(500, 7, 3), None, ip_encap=True)), "bmv2_ignore": [[14 + 20 + 16, 4, "queue_us: BMv2's deq_timedelta is a real, non-zero time"]]}],
    counters=[{"name": "path_counter", "index": (0x0102 % 64) * 8 + 2, "packets": 1, "bytes": length(*tin_ip)}],
)
vector(
    "telemetry_off",
    description="port_telemetry with NoAction for the egress port leaves the telemetry block and UDP checksum alone",
    entries=[fwd12, {"table": "port_telemetry", "match": {"standard_metadata.egress_port": 2}, "action": "NoAction"}],
    input={"port": 1, "packet": chunks(*tin)},
    expect=[{"port": 2, "packet": chunks(*tin)}],
)
probe_in = plait_pkt(tel(0, 0, 0), 0, flags=0x3, body=[raw(bytes(8), "8 probe padding bytes")])
probe_out = plait_pkt(tel(0, 0, 1), 0, flags=0x3, body=[raw(bytes(8), "8 probe padding bytes")])
vector(
    "telemetry_probe",
    description="a probe (flags P|T) is stamped too; no inner IPv4 is parsed",
    entries=[fwd12],
    input={"port": 1, "packet": chunks(*probe_in)},
    expect=[{"port": 2, "packet": chunks(*probe_out), "bmv2_ignore": [[14 + 20 + 8 + 16, 4, "queue_us"]]}],
)
tcp_segment = [raw(struct.pack("!HHIIBBHHH", 40000, 5201, 1, 0, 5 << 4, 0x18, 65535, 0x1234, 0), "tcp 40000 -> 5201 seq 1 ACK|PSH csum 0x1234"), payload]
compact_in = plait_pkt(tel(500, 7, 2), 0, flags=0x6, body=tcp_segment)
compact_out = plait_pkt(tel(500, 7, 3), 0, flags=0x6, body=tcp_segment)
vector(
    "telemetry_compact",
    description="a compact packet (flags C|T: a TCP segment follows the Plait headers, no inner IPv4) is stamped and its segment left alone",
    entries=[fwd12],
    input={"port": 1, "packet": chunks(*compact_in)},
    expect=[{"port": 2, "packet": chunks(*compact_out), "bmv2_ignore": [[14 + 20 + 8 + 16, 4, "queue_us"]]}],
    counters=[{"name": "path_counter", "index": (0x0102 % 64) * 8 + 2, "packets": 1, "bytes": length(*compact_in)}],
)
plain = plait_pkt(None, 0x1111, flags=0x0)
vector(
    "plait_without_telemetry",
    description="a Plait packet without a telemetry block is forwarded unchanged and counted per path",
    entries=[fwd12],
    input={"port": 1, "packet": chunks(*plain)},
    expect=[{"port": 2, "packet": chunks(*plain)}],
    counters=[{"name": "path_counter", "index": (0x0102 % 64) * 8 + 2, "packets": 1, "bytes": length(*plain)}],
)

# --- in-network split -----------------------------------------------------------------
orig = [eth(M2, M1), ipv4("10.9.1.1", "10.9.2.2", 24, ttl=64, ident=0x4242), udp(40000, 5201, 16, 0x5555), payload]
n = length(*orig) - 14


def encapsulated(path, seq, pseq, src_ip, dst_ip, dmac):
    return [
        eth(dmac, "02:00:00:00:00:5a"),
        ipv4(src_ip, dst_ip, 8 + 16 + 8 + n, flags=2, ident=0, ttl=64),
        udp(7733, 7733, 16 + 8 + n, 0),
        plait(0x2, path, 0x0102, seq, pseq, 0),
        tel(0, 0, 1),
    ] + orig[1:]


def slot(n, path, gen=1):
    return {"table": "split_slots", "match": {"meta.tunnel_index": 3, "meta.gen": gen, "meta.slot": n}, "action": "set_path", "params": {"path_id": path}}


def path_encap(path, port):
    return {"table": "path_encap", "match": {"meta.tunnel_index": 3, "meta.path_id": path}, "action": "encap", "params": {"src_mac": "02:00:00:00:00:5a", "dst_mac": "02:00:00:00:00:b%d" % path, "src_ip": "172.16.%d.1" % path, "dst_ip": "172.17.%d.1" % path, "port": port}}


def via(path, seq, pseq):
    """orig as path_encap(path) sends it with the tunnel's seq and the path's path_seq."""
    return encapsulated(path, seq, pseq, "172.16.%d.1" % path, "172.17.%d.1" % path, "02:00:00:00:00:b%d" % path)


# Paths 1 and 2 leave on port 2, path 5 on port 4; port_fwd sends the rest to port 3.
split_base = [
    {"table": "tunnel_split", "match": {"standard_metadata.ingress_port": 1, "hdr.ipv4.dst_addr": "10.9.0.0/16"}, "action": "split", "params": {"tunnel_id": 0x0102, "tunnel_index": 3, "gen": 1}},
    path_encap(1, 2),
    path_encap(2, 2),
    path_encap(5, 4),
    {"table": "port_fwd", "match": {"standard_metadata.ingress_port": 1}, "action": "forward", "params": {"port": 3}},
]
tx_off = 14 + 20 + 8 + 12
ign = {"ignore": [[tx_off, 4, "tx_ns: ingress time"]], "bmv2_ignore": [[tx_off + 4, 4, "queue_us"]]}


def send(note, expect=None, counts=None, repeat=1, pkt=orig):
    st = {"note": note, "input": {"port": 1, "packet": chunks(*pkt)}}
    if repeat > 1:
        st["repeat"] = repeat
    if counts is not None:
        st["expect_counts"] = counts
    else:
        st["expect"] = expect or []
    return st


def on(port, path, seq, pseq):
    return dict({"port": port, "packet": chunks(*via(path, seq, pseq))}, **ign)


# split_cursor[3] reaches 200 through 200 packets on slots 0..199: 7 of them (slots 8..14)
# take path 5, 34 (slots 15..48) path 2, the rest miss and drop. So tunnel_seq[3] is 41
# and path_seq[3*8+5] 7 when slot 200 comes; slots 201 and 202 then show what the
# registers hold afterwards.
vector(
    "split_encap",
    description="tunnel_split matches untagged traffic to the tunnel prefix; split_cursor[3], at 200 after 200 packets, picks slot 200 of the active generation (gen 1 -> path 5, gen 0 would be path 1); path_encap adds outer IPv4 (DF, TTL 64) + UDP (csum 0) + Plait (seq = tunnel_seq[3], path_seq = path_seq[3*8+5], flags T) + a telemetry block stamped once on egress; the next packets show cursor 201, tunnel_seq 42, path 1's path_seq untouched at 0 and path 5's at 8",
    entries=split_base
    + [slot(n, 5) for n in range(8, 15)]
    + [slot(n, 2) for n in range(15, 49)]
    + [slot(200, 1, gen=0), slot(200, 5), slot(201, 1), slot(202, 5)],
    steps=[
        send("slots 0..199: 7 to path 5 (port 4), 34 to path 2 (port 2), 159 misses", counts={"2": 34, "4": 7}, repeat=200),
        send("slot 200: path 5, seq 41, path_seq 7", [on(4, 5, 41, 7)]),
        send("slot 201: path 1, seq 42, path 1's first packet", [on(2, 1, 42, 0)]),
        send("slot 202: path 5, seq 43, path_seq 8", [on(4, 5, 43, 8)]),
    ],
    counters=[
        {"name": "path_counter", "index": (0x0102 % 64) * 8 + 5, "packets": 9, "bytes": 9 * length(*orig)},
        {"name": "path_counter", "index": (0x0102 % 64) * 8 + 1, "packets": 1, "bytes": length(*orig)},
        {"name": "port_tx_counter", "index": 4, "packets": 9, "bytes": 9 * length(*orig)},
    ],
)
vector(
    "split_slot_miss_drops",
    description="a split tunnel whose slot for the cursor is empty drops (split_slots default), never falls through to port_fwd, and moves the cursor on without taking a sequence number: after 7 packets on path 1 (slots 0..6), slot 7 is empty, and the next packet takes slot 8 with seq 7",
    entries=split_base + [slot(n, 1) for n in range(7)] + [slot(8, 5), slot(9, 1)],
    steps=[
        send("slots 0..6: path 1", counts={"2": 7}, repeat=7),
        send("slot 7: no entry, dropped"),
        send("slot 8: path 5, seq 7", [on(4, 5, 7, 0)]),
    ],
)
other = [eth(M2, M1), ipv4("10.9.1.1", "10.8.0.1", 24), udp(40000, 5201, 16, 0x5555), payload]
split_entries = split_base + [slot(0, 5), slot(1, 1)]
first = send("a tunnel packet then takes slot 0 (path 5) with seq 0: the cursor did not move", [on(4, 5, 0, 0)])
vector(
    "split_other_traffic",
    description="traffic outside the tunnel prefix is not split: it goes on to port_fwd untouched, and the split cursor stays at 0",
    entries=split_entries,
    steps=[send("outside the tunnel prefix", [{"port": 3, "packet": chunks(*other)}], pkt=other), first],
)
tagged = plait_pkt(None, 0, flags=0x0)
tagged[1] = ipv4("172.16.0.1", "10.9.9.9", length(*tagged[2:]), flags=2)
vector(
    "split_skips_tagged",
    description="a packet that already carries Plait is not split again even inside the tunnel prefix",
    entries=split_entries,
    steps=[send("tagged, inside the tunnel prefix", [{"port": 3, "packet": chunks(*tagged)}], pkt=tagged), first],
)

tagged_ip = plait_pkt(None, None, flags=0x0, ip_encap=True)
tagged_ip[1] = ipv4("172.16.0.1", "10.9.9.9", length(*tagged_ip[2:]), proto=253, flags=2)
vector(
    "split_skips_tagged_ip",
    description="an IP-encapsulated Plait packet inside the tunnel prefix is not split again either",
    entries=split_entries,
    steps=[send("IP-encapsulated, inside the tunnel prefix", [{"port": 3, "packet": chunks(*tagged_ip)}], pkt=tagged_ip), first],
)

# --- packet-in ------------------------------------------------------------------------
vector(
    "packet_in",
    description="send_to_cpu hands the frame to the primary controller as a PacketIn with ingress_port metadata",
    entries=[{"table": "port_fwd", "match": {"standard_metadata.ingress_port": 3}, "action": "send_to_cpu"}],
    input={"port": 3, "packet": chunks(*arp)},
    expect=[],
    packet_in=[{"metadata": {"ingress_port": 3}, "packet": chunks(*arp)}],
    counters=[{"name": "port_tx_counter", "index": 255, "packets": 1, "bytes": length(*arp)}],
)
