/* Plait headers and metadata for p4/plait.p4 (v1model).
 *
 * plait_t and plait_tel_t are the wire format: the same layout is defined in
 * ebpf/include/plait.h and wire/wire.go, and tests/wireformat checks all three against
 * each other. Change all three or none.
 */
#ifndef PLAIT_HEADERS_P4
#define PLAIT_HEADERS_P4

const bit<16> ETHERTYPE_IPV4 = 0x0800;
const bit<8> IPPROTO_UDP = 17;
const bit<16> PLAIT_UDP_PORT = 7733;
const bit<8> PLAIT_IPPROTO = 253; // IP encapsulation: plait_t right after the IPv4 header
const bit<4> PLAIT_VERSION = 1;
const bit<4> PLAIT_F_PROBE = 0x1;     // measurement probe: no inner packet follows
const bit<4> PLAIT_F_TELEMETRY = 0x2; // a plait_tel block follows the header
const bit<4> PLAIT_F_COMPACT = 0x4;   // a TCP segment follows; its IPv4 header is the outer one
const bit<8> PLAIT_PATH_REPAIR = 0x80; // path_id's top bit: a repair, resent on path_id[2:0]

header ethernet_t {
    bit<48> dst_addr;
    bit<48> src_addr;
    bit<16> ether_type;
}

header ipv4_t {
    bit<4>  version;
    bit<4>  ihl;
    bit<8>  diffserv;
    bit<16> total_len;
    bit<16> identification;
    bit<3>  flags;
    bit<13> frag_offset;
    bit<8>  ttl;
    bit<8>  protocol;
    bit<16> hdr_checksum;
    bit<32> src_addr;
    bit<32> dst_addr;
}

header udp_t {
    bit<16> src_port;
    bit<16> dst_port;
    bit<16> length;
    bit<16> checksum;
}

header plait_t {
    bit<4>  version;   // PLAIT_VERSION
    bit<4>  flags;     // PLAIT_F_*
    bit<8>  path_id;   // index of the path in the tunnel's path table, < 8; | PLAIT_PATH_REPAIR
    bit<16> tunnel_id; // striped tunnel (sender/receiver pair)
    bit<32> seq;       // tunnel-wide packet sequence
    bit<32> path_seq;  // per-path sequence: a gap is a loss on that path
    bit<32> tx_ns;     // low 32 bits of the sender's clock (ns) at send time
}

header plait_tel_t {
    bit<32> queue_us;   // sum of the switches' queueing delays, us
    bit<16> max_qdepth; // deepest queue seen on the way, packets
    bit<8>  hops;       // switches that stamped this block
    bit<8>  reserved;   // zero
}

// Prepended to packets sent to the controller (PacketIn) and taken off packets from it
// (PacketOut); P4Runtime carries the fields as packet metadata.
@controller_header("packet_in")
header packet_in_t {
    bit<9> ingress_port;
    bit<7> _pad;
}

@controller_header("packet_out")
header packet_out_t {
    bit<9> egress_port;
    bit<7> _pad;
}

struct headers_t {
    packet_in_t  packet_in;
    packet_out_t packet_out;
    ethernet_t   ethernet;
    ipv4_t       ipv4;       // outer for Plait traffic, the only one otherwise
    udp_t        udp;        // parsed only when it carries Plait (dst PLAIT_UDP_PORT)
    plait_t      plait;
    plait_tel_t  plait_tel;
    ipv4_t       inner_ipv4; // the striped packet
}

struct metadata_t {
    bit<16> tunnel_id;    // set by tunnel_split
    bit<6>  tunnel_index; // split state slot of the tunnel, < MAX_TUNNELS
    bit<1>  gen;          // active generation of the tunnel's split_slots
    bit<8>  slot;         // split_cursor value modulo SPLIT_SLOTS
    bit<8>  path_id;      // chosen by split_slots
}

#endif /* PLAIT_HEADERS_P4 */
