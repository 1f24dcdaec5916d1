package p4switch

import (
	"sync"

	"github.com/plait/plait/wire"
)

// Pipeline is plait.p4 in Go: the same parser, tables, actions, counters, registers,
// checksum update and deparser, with the same v1model semantics (egress_spec 0 unless set,
// 511 drops, counters count the packet's ingress length, PacketIn/PacketOut through the
// CPU port's controller headers).
type Pipeline struct {
	cpuPort uint16

	mu     sync.RWMutex // guards table contents
	tables [numTables]*table

	counters  [numCounters]counterArray
	registers [numRegisters]registerArray
}

// NewPipeline returns an empty pipeline (every table at its default action).
func NewPipeline(cpuPort uint16) *Pipeline {
	p := &Pipeline{cpuPort: cpuPort}
	for i := range tableSpecs {
		p.tables[i] = newTable(&tableSpecs[i])
	}
	for i, s := range counterSpecs {
		p.counters[i] = make(counterArray, s.size)
	}
	for i, s := range registerSpecs {
		p.registers[i] = make(registerArray, s.size)
	}
	return p
}

// stdMeta is the part of v1model's standard_metadata the program uses.
type stdMeta struct {
	ingressPort, egressSpec, egressPort uint16
	ingressTsUs                         uint64 // ingress_global_timestamp
	enqQdepth, deqTimedeltaUs           uint32
}

type userMeta struct {
	tunnelID                       uint16
	tunnelIndex, gen, slot, pathID uint8
}

// packetState is a packet between parser and deparser.
type packetState struct {
	hdr        headers
	sm         stdMeta
	meta       userMeta
	ingressLen int
}

// ingress runs PlaitIngress; the caller holds p.mu read-locked.
func (p *Pipeline) ingress(s *packetState) {
	h, sm := &s.hdr, &s.sm
	p.counters[ctrPortRx].count(int(sm.ingressPort), s.ingressLen)
	if h.has(hPacketOut) {
		sm.egressSpec = h.packetOut
		h.valid &^= hPacketOut
		return
	}
	routed := false
	if h.has(hIPv4) && !h.has(hPlait) {
		if e, hit := p.tables[tblTunnelSplit].lookup([maxKeys]uint64{uint64(sm.ingressPort), uint64(h.ipv4.dst)}); hit {
			p.exec(e, s)
			routed = true
			e, hit := p.tables[tblSplitSlots].lookup([maxKeys]uint64{uint64(s.meta.tunnelIndex), uint64(s.meta.gen), uint64(s.meta.slot)})
			p.exec(e, s)
			if hit {
				e, _ := p.tables[tblPathEncap].lookup([maxKeys]uint64{uint64(s.meta.tunnelIndex), uint64(s.meta.pathID)})
				p.exec(e, s)
			}
		}
	}
	if !routed && h.has(hIPv4) {
		var e *entry
		e, routed = p.tables[tblIPv4LPM].lookup([maxKeys]uint64{uint64(h.ipv4.dst)})
		p.exec(e, s)
	}
	if !routed {
		e, _ := p.tables[tblPortFwd].lookup([maxKeys]uint64{uint64(sm.ingressPort)})
		p.exec(e, s)
	}
}

// egress runs PlaitEgress; the caller holds p.mu read-locked and has set egressPort,
// enqQdepth and deqTimedeltaUs.
func (p *Pipeline) egress(s *packetState) {
	h, sm := &s.hdr, &s.sm
	if sm.egressPort == p.cpuPort {
		h.valid |= hPacketIn
		h.packetIn = sm.ingressPort
	} else if h.has(hPlait) {
		p.counters[ctrPath].count(int(h.plait.TunnelID&(maxTunnels-1))*maxPaths+int(h.plait.PathID&(maxPaths-1)), s.ingressLen)
		if h.has(hPlaitTel) {
			e, _ := p.tables[tblPortTelemetry].lookup([maxKeys]uint64{uint64(sm.egressPort)})
			p.exec(e, s)
		}
	}
	p.counters[ctrPortTx].count(int(sm.egressPort), s.ingressLen)
}

// exec runs one action with the entry's arguments.
func (p *Pipeline) exec(e *entry, s *packetState) {
	h, sm, m, a := &s.hdr, &s.sm, &s.meta, &e.params
	switch e.action {
	case actNoAction:
	case actDrop:
		sm.egressSpec = dropPort
	case actForward:
		sm.egressSpec = uint16(a[0])
	case actSendToCPU:
		sm.egressSpec = p.cpuPort
	case actIPv4Forward:
		h.eth.src = h.eth.dst
		putMAC(&h.eth.dst, a[0])
		h.ipv4.ttl--
		sm.egressSpec = uint16(a[1])
	case actSplit:
		m.tunnelID, m.tunnelIndex, m.gen = uint16(a[0]), uint8(a[1]), uint8(a[2])
		m.slot = uint8(p.registers[regSplitCursor].fetchAdd(int(m.tunnelIndex)))
	case actSetPath:
		m.pathID = uint8(a[0])
	case actEncap:
		p.encap(s, a)
	case actStampTelemetry:
		q := uint16(sm.enqQdepth)
		h.tel.QueueUs += sm.deqTimedeltaUs
		h.tel.MaxQdepth = max(h.tel.MaxQdepth, q)
		h.tel.Hops++
		if h.has(hUDP) {
			h.udp.checksum = 0
		}
	}
}

func (p *Pipeline) encap(s *packetState, a *[maxParams]uint64) {
	h, sm, m := &s.hdr, &s.sm, &s.meta
	seq := p.registers[regTunnelSeq].fetchAdd(int(m.tunnelIndex))
	pseq := p.registers[regPathSeq].fetchAdd(int(m.tunnelIndex)<<3 | int(m.pathID&7))

	h.inner = h.ipv4
	h.valid |= hInnerIPv4
	h.ipv4.version, h.ipv4.ihl = 4, 5
	h.ipv4.totalLen = h.inner.totalLen + encapLen
	h.ipv4.id, h.ipv4.flags, h.ipv4.fragOffset = 0, 2, 0
	h.ipv4.ttl, h.ipv4.protocol = 64, ipProtoUDP
	h.ipv4.src, h.ipv4.dst = uint32(a[2]), uint32(a[3])

	h.valid |= hUDP | hPlait | hPlaitTel
	h.udp = udpHdr{srcPort: plaitUDPPort, dstPort: plaitUDPPort, length: h.inner.totalLen + encapLen - lenIPv4}
	h.plait = wire.Header{
		Version: plaitVersion, Flags: wire.FlagTelemetry, PathID: m.pathID, TunnelID: m.tunnelID,
		Seq: seq, PathSeq: pseq, TxNs: uint32(sm.ingressTsUs * 1000),
	}
	h.tel = wire.Telemetry{}
	putMAC(&h.eth.src, a[0])
	putMAC(&h.eth.dst, a[1])
	sm.egressSpec = uint16(a[4])
}

func putMAC(d *[6]byte, v uint64) {
	for i := 5; i >= 0; i-- {
		d[i] = byte(v)
		v >>= 8
	}
}
