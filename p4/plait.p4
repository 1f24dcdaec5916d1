/* Plait switch pipeline (P4_16, v1model).
 *
 * Forwards path traffic (ipv4_lpm, then port_fwd), stamps queueing telemetry into Plait
 * packets that carry a telemetry block, counts Plait packets per tunnel and path, and, on
 * an in-network split switch, encapsulates untagged tunnel traffic and sprays it over the
 * paths from a weighted slot table (tunnel_split -> split_slots -> path_encap).
 *
 * Table, action, counter and register names are the P4Runtime API the controller uses
 * (see p4/README.md): renaming one is an API change.
 */
#include <core.p4>
#include <v1model.p4>

#include "include/headers.p4"

#ifndef CPU_PORT
#define CPU_PORT 255
#endif
#define MAX_TUNNELS 64
#define MAX_PATHS 8
#define SPLIT_SLOTS 256
#define PORTS 512

/*************************************************************************
 *********************** P A R S E R  ***********************************
 *************************************************************************/

parser PlaitParser(packet_in packet,
                   out headers_t hdr,
                   inout metadata_t meta,
                   inout standard_metadata_t standard_metadata) {

    state start {
        transition select(standard_metadata.ingress_port) {
            CPU_PORT: parse_packet_out;
            default: parse_ethernet;
        }
    }

    state parse_packet_out {
        packet.extract(hdr.packet_out);
        transition parse_ethernet;
    }

    state parse_ethernet {
        packet.extract(hdr.ethernet);
        transition select(hdr.ethernet.ether_type) {
            ETHERTYPE_IPV4: parse_ipv4;
            default: accept;
        }
    }

    state parse_ipv4 {
        packet.extract(hdr.ipv4);
        transition select(hdr.ipv4.ihl, hdr.ipv4.frag_offset, hdr.ipv4.protocol) {
            (4w5, 13w0, IPPROTO_UDP): check_udp;
            (4w5, 13w0, PLAIT_IPPROTO): parse_plait;
            default: accept;
        }
    }

    // UDP is extracted only when it carries Plait, so that the split can make an
    // untagged packet's IPv4 header the inner one without disturbing its transport.
    state check_udp {
        bit<32> ports = packet.lookahead<bit<32>>();
        transition select(ports[15:0]) {
            PLAIT_UDP_PORT: parse_udp;
            default: accept;
        }
    }

    state parse_udp {
        packet.extract(hdr.udp);
        transition parse_plait;
    }

    state parse_plait {
        packet.extract(hdr.plait);
        transition select(hdr.plait.flags) {
            PLAIT_F_TELEMETRY &&& PLAIT_F_TELEMETRY: parse_plait_tel;
            PLAIT_F_PROBE &&& PLAIT_F_PROBE: accept;
            PLAIT_F_COMPACT &&& PLAIT_F_COMPACT: accept; // a TCP segment follows
            default: parse_inner_ipv4;
        }
    }

    state parse_plait_tel {
        packet.extract(hdr.plait_tel);
        transition select(hdr.plait.flags) {
            PLAIT_F_PROBE &&& PLAIT_F_PROBE: accept;
            PLAIT_F_COMPACT &&& PLAIT_F_COMPACT: accept;
            default: parse_inner_ipv4;
        }
    }

    state parse_inner_ipv4 {
        packet.extract(hdr.inner_ipv4);
        transition accept;
    }
}

/*************************************************************************
 ************   C H E C K S U M    V E R I F I C A T I O N   *************
 *************************************************************************/

// Packets with a bad IPv4 checksum are forwarded like the rest; the deparser rewrites it.
control PlaitVerifyChecksum(inout headers_t hdr, inout metadata_t meta) {
    apply { }
}

/*************************************************************************
 **************  I N G R E S S   P R O C E S S I N G   *******************
 *************************************************************************/

control PlaitIngress(inout headers_t hdr,
                     inout metadata_t meta,
                     inout standard_metadata_t standard_metadata) {

    counter(PORTS, CounterType.packets_and_bytes) port_rx_counter;

    // Split state per tunnel_index; sequence numbers are handed out fetch-and-add style,
    // so a tunnel's first packet has seq 0 and each path's first packet path_seq 0.
    register<bit<32>>(MAX_TUNNELS) split_cursor;
    register<bit<32>>(MAX_TUNNELS) tunnel_seq;
    register<bit<32>>(MAX_TUNNELS * MAX_PATHS) path_seq;

    action drop() {
        mark_to_drop(standard_metadata);
    }

    action forward(bit<9> port) {
        standard_metadata.egress_spec = port;
    }

    action send_to_cpu() {
        standard_metadata.egress_spec = CPU_PORT;
    }

    action ipv4_forward(bit<48> dst_mac, bit<9> port) {
        hdr.ethernet.src_addr = hdr.ethernet.dst_addr;
        hdr.ethernet.dst_addr = dst_mac;
        hdr.ipv4.ttl = hdr.ipv4.ttl - 1;
        standard_metadata.egress_spec = port;
    }

    action split(bit<16> tunnel_id, bit<6> tunnel_index, bit<1> gen) {
        meta.tunnel_id = tunnel_id;
        meta.tunnel_index = tunnel_index;
        meta.gen = gen;
        bit<32> cursor;
        split_cursor.read(cursor, (bit<32>)tunnel_index);
        split_cursor.write((bit<32>)tunnel_index, cursor + 1);
        meta.slot = cursor[7:0];
    }

    action set_path(bit<8> path_id) {
        meta.path_id = path_id;
    }

    // Outer IPv4 (DF, TTL 64) + UDP (checksum 0) + Plait header + zeroed telemetry in front
    // of the packet's own IPv4 header, which becomes the inner one.
    action encap(bit<48> src_mac, bit<48> dst_mac, bit<32> src_ip, bit<32> dst_ip, bit<9> port) {
        bit<32> seq;
        tunnel_seq.read(seq, (bit<32>)meta.tunnel_index);
        tunnel_seq.write((bit<32>)meta.tunnel_index, seq + 1);
        bit<32> pidx = (bit<32>)(meta.tunnel_index ++ meta.path_id[2:0]);
        bit<32> pseq;
        path_seq.read(pseq, pidx);
        path_seq.write(pidx, pseq + 1);

        hdr.inner_ipv4 = hdr.ipv4;
        hdr.ipv4.version = 4;
        hdr.ipv4.ihl = 5;
        hdr.ipv4.total_len = hdr.inner_ipv4.total_len + 52;
        hdr.ipv4.identification = 0;
        hdr.ipv4.flags = 2;
        hdr.ipv4.frag_offset = 0;
        hdr.ipv4.ttl = 64;
        hdr.ipv4.protocol = IPPROTO_UDP;
        hdr.ipv4.src_addr = src_ip;
        hdr.ipv4.dst_addr = dst_ip;

        hdr.udp.setValid();
        hdr.udp.src_port = PLAIT_UDP_PORT;
        hdr.udp.dst_port = PLAIT_UDP_PORT;
        hdr.udp.length = hdr.inner_ipv4.total_len + 32;
        hdr.udp.checksum = 0;

        hdr.plait.setValid();
        hdr.plait.version = PLAIT_VERSION;
        hdr.plait.flags = PLAIT_F_TELEMETRY;
        hdr.plait.path_id = meta.path_id;
        hdr.plait.tunnel_id = meta.tunnel_id;
        hdr.plait.seq = seq;
        hdr.plait.path_seq = pseq;
        hdr.plait.tx_ns = (bit<32>)(standard_metadata.ingress_global_timestamp * 1000);

        hdr.plait_tel.setValid();
        hdr.plait_tel.queue_us = 0;
        hdr.plait_tel.max_qdepth = 0;
        hdr.plait_tel.hops = 0;
        hdr.plait_tel.reserved = 0;

        hdr.ethernet.src_addr = src_mac;
        hdr.ethernet.dst_addr = dst_mac;
        standard_metadata.egress_spec = port;
    }

    // Path switches in the lab are two-port wires: one entry per ingress port.
    table port_fwd {
        key = {
            standard_metadata.ingress_port: exact;
        }
        actions = {
            forward;
            drop;
            send_to_cpu;
        }
        size = PORTS;
        default_action = drop();
    }

    table ipv4_lpm {
        key = {
            hdr.ipv4.dst_addr: lpm;
        }
        actions = {
            ipv4_forward;
            drop;
            send_to_cpu;
            NoAction;
        }
        size = 1024;
        default_action = NoAction();
    }

    // Untagged traffic entering a tunnel; the entry's gen picks the split_slots generation,
    // so the controller fills the inactive one and then flips gen with one MODIFY.
    table tunnel_split {
        key = {
            standard_metadata.ingress_port: exact;
            hdr.ipv4.dst_addr: lpm;
        }
        actions = {
            split;
            NoAction;
        }
        size = MAX_TUNNELS;
        default_action = NoAction();
    }

    table split_slots {
        key = {
            meta.tunnel_index: exact;
            meta.gen: exact;
            meta.slot: exact;
        }
        actions = {
            set_path;
            drop;
        }
        size = MAX_TUNNELS * 2 * SPLIT_SLOTS;
        default_action = drop();
    }

    table path_encap {
        key = {
            meta.tunnel_index: exact;
            meta.path_id: exact;
        }
        actions = {
            encap;
            drop;
        }
        size = MAX_TUNNELS * MAX_PATHS;
        default_action = drop();
    }

    apply {
        port_rx_counter.count((bit<32>)standard_metadata.ingress_port);
        if (hdr.packet_out.isValid()) {
            standard_metadata.egress_spec = hdr.packet_out.egress_port;
            hdr.packet_out.setInvalid();
        } else {
            bool routed = false;
            if (hdr.ipv4.isValid() && !hdr.plait.isValid()) {
                if (tunnel_split.apply().hit) {
                    routed = true;
                    if (split_slots.apply().hit) {
                        path_encap.apply();
                    }
                }
            }
            if (!routed && hdr.ipv4.isValid()) {
                routed = ipv4_lpm.apply().hit;
            }
            if (!routed) {
                port_fwd.apply();
            }
        }
    }
}

/*************************************************************************
 ****************  E G R E S S   P R O C E S S I N G   *******************
 *************************************************************************/

control PlaitEgress(inout headers_t hdr,
                    inout metadata_t meta,
                    inout standard_metadata_t standard_metadata) {

    // Indexed by (tunnel_id mod MAX_TUNNELS) * MAX_PATHS + path_id mod MAX_PATHS.
    counter(MAX_TUNNELS * MAX_PATHS, CounterType.packets_and_bytes) path_counter;
    counter(PORTS, CounterType.packets_and_bytes) port_tx_counter;

    // Under UDP the checksum is cleared because the telemetry block sits in the UDP
    // payload; IP encapsulation has no checksum over it.
    action stamp_telemetry() {
        bit<16> qdepth = (bit<16>)standard_metadata.enq_qdepth;
        hdr.plait_tel.queue_us = hdr.plait_tel.queue_us + standard_metadata.deq_timedelta;
        hdr.plait_tel.max_qdepth = qdepth > hdr.plait_tel.max_qdepth ? qdepth : hdr.plait_tel.max_qdepth;
        hdr.plait_tel.hops = hdr.plait_tel.hops + 1;
        if (hdr.udp.isValid()) {
            hdr.udp.checksum = 0;
        }
    }

    // Stamping is on by default; an entry with NoAction turns it off for one port.
    table port_telemetry {
        key = {
            standard_metadata.egress_port: exact;
        }
        actions = {
            stamp_telemetry;
            NoAction;
        }
        size = PORTS;
        default_action = stamp_telemetry();
    }

    apply {
        if (standard_metadata.egress_port == CPU_PORT) {
            hdr.packet_in.setValid();
            hdr.packet_in.ingress_port = standard_metadata.ingress_port;
            hdr.packet_in._pad = 0;
        } else if (hdr.plait.isValid()) {
            path_counter.count((bit<32>)(hdr.plait.tunnel_id[5:0] ++ hdr.plait.path_id[2:0]));
            if (hdr.plait_tel.isValid()) {
                port_telemetry.apply();
            }
        }
        port_tx_counter.count((bit<32>)standard_metadata.egress_port);
    }
}

/*************************************************************************
 *************   C H E C K S U M    C O M P U T A T I O N   **************
 *************************************************************************/

// Only option-less headers: csum16 here covers the 20 fixed bytes.
control PlaitComputeChecksum(inout headers_t hdr, inout metadata_t meta) {
    apply {
        update_checksum(
            hdr.ipv4.isValid() && hdr.ipv4.ihl == 5,
            { hdr.ipv4.version,
              hdr.ipv4.ihl,
              hdr.ipv4.diffserv,
              hdr.ipv4.total_len,
              hdr.ipv4.identification,
              hdr.ipv4.flags,
              hdr.ipv4.frag_offset,
              hdr.ipv4.ttl,
              hdr.ipv4.protocol,
              hdr.ipv4.src_addr,
              hdr.ipv4.dst_addr },
            hdr.ipv4.hdr_checksum,
            HashAlgorithm.csum16);
    }
}

/*************************************************************************
 ***********************  D E P A R S E R  *******************************
 *************************************************************************/

control PlaitDeparser(packet_out packet, in headers_t hdr) {
    apply {
        packet.emit(hdr.packet_in);
        packet.emit(hdr.ethernet);
        packet.emit(hdr.ipv4);
        packet.emit(hdr.udp);
        packet.emit(hdr.plait);
        packet.emit(hdr.plait_tel);
        packet.emit(hdr.inner_ipv4);
    }
}

/*************************************************************************
 ***********************  S W I T C H  *******************************
 *************************************************************************/

V1Switch(
    PlaitParser(),
    PlaitVerifyChecksum(),
    PlaitIngress(),
    PlaitEgress(),
    PlaitComputeChecksum(),
    PlaitDeparser()
) main;
