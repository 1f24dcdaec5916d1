package datapath

import (
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"net/netip"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/btf"

	"github.com/plait/plait/wire"
)

// SenderVerdicts and ReceiverVerdicts name the entries of the verdict maps: the values of
// enum sender_stat and enum receiver_stat (consts.h), lower case, without their prefix,
// read from the programs' BTF so the C enum is their one definition.
var (
	SenderVerdicts   = verdictNames(senderSpec, "sender_stat", "SND_", int(senderSenderStatSND_STAT_MAX))
	ReceiverVerdicts = verdictNames(receiverSpec, "receiver_stat", "RCV_", int(receiverReceiverStatRCV_STAT_MAX))
)

func verdictNames(load func() (*ebpf.CollectionSpec, error), enum, prefix string, n int) []string {
	spec, err := load()
	if err != nil {
		panic(fmt.Sprintf("the embedded datapath does not parse: %v", err))
	}
	var e *btf.Enum
	if err := spec.Types.TypeByName(enum, &e); err != nil {
		panic(fmt.Sprintf("enum %s is not in the datapath's BTF: %v", enum, err))
	}
	names := make([]string, n)
	for _, v := range e.Values {
		if v.Value < uint64(n) {
			names[v.Value] = strings.ToLower(strings.TrimPrefix(v.Name, prefix))
		}
	}
	return names
}

// Verdicts returns both programs' verdict counters, summed over CPUs, with the verdicts
// the programs count per path added up over the given tunnel slots: the sender's
// "redirect" and the receiver's "decap", "probe" and "held" (passed on unmeasured).
func (d *Datapath) Verdicts(slots []uint32) (sender, receiver map[string]uint64, err error) {
	if sender, err = sumVerdicts(d.snd.SndVerdicts, SenderVerdicts); err != nil {
		return nil, nil, err
	}
	if receiver, err = sumVerdicts(d.rcv.RcvVerdicts, ReceiverVerdicts); err != nil {
		return nil, nil, err
	}
	for _, slot := range slots {
		sc, err := d.ReadSender(slot)
		if err != nil {
			return nil, nil, err
		}
		rc, err := d.ReadReceiver(slot, 0)
		if err != nil {
			return nil, nil, err
		}
		for p := range sc.Packets {
			sender["redirect"] += sc.Packets[p]
			receiver["decap"] += rc.Paths[p].Packets
			receiver["probe"] += rc.Paths[p].Probes
			receiver["held"] += rc.Paths[p].Held
		}
	}
	return sender, receiver, nil
}

func sumVerdicts(m *ebpf.Map, names []string) (map[string]uint64, error) {
	out := make(map[string]uint64, len(names))
	var per []uint64
	for i, name := range names {
		if err := m.Lookup(uint32(i), &per); err != nil {
			return nil, fmt.Errorf("read verdict %s: %w", name, err)
		}
		var n uint64
		for _, v := range per {
			n += v
		}
		out[name] = n
	}
	return out, nil
}

// SenderCounters is what the sender did for one tunnel slot.
type SenderCounters struct {
	Seq     uint32 // next tunnel seq
	PathSeq [wire.MaxPaths]uint32
	Packets [wire.MaxPaths]uint64
	Bytes   [wire.MaxPaths]uint64 // on the wire, encapsulation included
	// Signaled counts the congestion signals given (Tunnel.Signal).
	Signaled uint32
	// Peers are the peer's UDP ports the receiver learned, per path (struct tx_peer).
	Peers [wire.MaxPaths]PeerPort
}

// PeerPort is the UDP port the peer's authenticated packets on a path came from, and the
// address they came from: a tunnel with a key sends the path's packets there while the
// path goes to that address (a NAT that rewrites the peer's port is followed).
type PeerPort struct {
	Addr netip.Addr
	Port uint16 // 0: none learned
}

// For is the learned port of a path that goes to dst (on a tunnel with a key), or 0 when
// the sender uses the tunnel's port.
func (p PeerPort) For(dst netip.Addr) uint16 {
	if p.Addr != dst {
		return 0
	}
	return p.Port
}

// ReadSender reads a tunnel slot's sender counters.
func (d *Datapath) ReadSender(slot uint32) (SenderCounters, error) {
	var c SenderCounters
	var st senderTxState
	if err := d.snd.SndStates.Lookup(slot, &st); err != nil {
		return c, fmt.Errorf("read sender state: %w", err)
	}
	c.Seq, c.PathSeq, c.Signaled = st.Seq, st.PathSeq, st.Signaled
	for i, p := range st.Peers {
		if p.Port != 0 {
			var a [4]byte
			binary.NativeEndian.PutUint32(a[:], p.Addr)
			c.Peers[i] = PeerPort{Addr: netip.AddrFrom4(a), Port: htons(p.Port)}
		}
	}
	var per []senderTxPathStats
	for p := uint32(0); p < wire.MaxPaths; p++ {
		if err := d.snd.SndPaths.Lookup(slot*wire.MaxPaths+p, &per); err != nil {
			return c, fmt.Errorf("read sender path counters: %w", err)
		}
		for _, v := range per {
			c.Packets[p] += v.Packets
			c.Bytes[p] += v.Bytes
		}
	}
	return c, nil
}

// SetReceivePorts sets the UDP ports the receiver treats as Plait (at most 4).
func (d *Datapath) SetReceivePorts(ports []uint16) error {
	var v receiverRxPorts
	if len(ports) > len(v.Port) {
		return fmt.Errorf("%d receive ports, the receiver takes at most %d: use fewer distinct ports", len(ports), len(v.Port))
	}
	for i, p := range ports {
		v.Port[i] = htons(p)
	}
	if err := d.rcv.RcvPorts.Update(uint32(0), v, ebpf.UpdateAny); err != nil {
		return fmt.Errorf("write receive ports: %w", err)
	}
	return nil
}

// Receiver is what the receiver knows of a tunnel: who may send on it, from where.
type Receiver struct {
	ID     uint16
	Slot   uint32
	BiasNs int32 // subtracted from receive-minus-send times before the signed cast
	// Paths, by path id: the receiver takes the tunnel's packets only with one of these
	// outer address pairs, on that path's interface, and counts them for that path.
	Paths []RxPathConfig
	// AnyPeer, for receive-only tunnels (a split switch encapsulates): packets from any
	// outer addresses are taken on Ifindex, and their header's path id is believed.
	AnyPeer bool
	Ifindex uint32
	// Allowed are the inner sources the peer may send from (WireGuard's AllowedIPs);
	// Self, this end's tunnel address, is never one.
	Allowed []netip.Prefix
	Self    netip.Addr
	// Keys, when given, make the tunnel take only packets tagged under one of them, each
	// once: the first is the one the peer tags with, a second lets keys roll over.
	Keys []wire.Key
	// Compact packets are restored to travel from Peer to Local (the tunnel's addresses);
	// without them the tunnel takes no compact packets.
	Peer, Local netip.Addr
	// Decapsulated packets are sent into the tunnel device's veth peer (PeerIfindex) to
	// arrive on the device (DeviceMAC), as with any Linux tunnel; without one they pass
	// on the path interface.
	PeerIfindex uint32
	DeviceMAC   net.HardwareAddr
	// Repair: gaps in a path's path_seq are reported to the agent (Gaps), which asks the
	// peer to resend them.
	Repair bool
}

// RxPathConfig is one path as the receiver checks it.
type RxPathConfig struct {
	Src, Dst netip.Addr // the peer's address on the path, and this host's
	Ifindex  uint32     // where its packets arrive
}

// MaxAllowed is how many inner source prefixes a tunnel may allow (RX_ALLOWED in consts.h).
const MaxAllowed = len(receiverRxTunnel{}.Allowed)

func (r *Receiver) validate() error {
	if r.Slot >= MaxTunnels {
		return fmt.Errorf("tunnel slot %d out of range (max %d tunnels)", r.Slot, MaxTunnels)
	}
	if r.AnyPeer != (len(r.Paths) == 0) {
		return fmt.Errorf("tunnel %d: give either paths or any peer, not both or neither", r.ID)
	}
	if r.AnyPeer && r.Ifindex == 0 {
		return fmt.Errorf("tunnel %d takes any peer but names no interface", r.ID)
	}
	if len(r.Paths) > wire.MaxPaths {
		return fmt.Errorf("tunnel %d has %d paths, at most %d", r.ID, len(r.Paths), wire.MaxPaths)
	}
	for i, p := range r.Paths {
		if !p.Src.Is4() || !p.Dst.Is4() || p.Ifindex == 0 {
			return fmt.Errorf("receiver path %d: %s -> %s on ifindex %d is not an IPv4 path on an interface", i, p.Src, p.Dst, p.Ifindex)
		}
	}
	if len(r.Allowed) == 0 || len(r.Allowed) > MaxAllowed {
		return fmt.Errorf("tunnel %d allows %d inner source prefixes: give 1 to %d", r.ID, len(r.Allowed), MaxAllowed)
	}
	for _, a := range r.Allowed {
		if !a.Addr().Is4() {
			return fmt.Errorf("allowed inner source %s is not an IPv4 prefix", a)
		}
	}
	if len(r.Keys) > len(receiverRxTunnel{}.Keys) {
		return fmt.Errorf("tunnel %d has %d keys: give at most 2, the new one and the one it replaces", r.ID, len(r.Keys))
	}
	return nil
}

func be32(a netip.Addr) uint32 {
	if !a.Is4() {
		return 0
	}
	b := a.As4()
	return binary.NativeEndian.Uint32(b[:])
}

// SetReceiver makes the receiver accept a tunnel from its peer. The tunnel's delay epoch
// carries over from the slot's previous configuration.
func (d *Datapath) SetReceiver(r Receiver) error {
	if err := r.validate(); err != nil {
		return err
	}
	var t receiverRxTunnel
	if err := d.rcv.RcvTunnels.Lookup(r.Slot, &t); err != nil {
		return fmt.Errorf("read receiver tunnel %d: %w", r.ID, err)
	}
	epoch := max(t.Epoch, 1) // 0 would look like the zeroed per-CPU slots never written
	t = receiverRxTunnel{BiasNs: r.BiasNs, Epoch: epoch, N_paths: uint8(len(r.Paths)), N_allowed: uint8(len(r.Allowed)), Self: be32(r.Self)}
	if r.Peer.Is4() && r.Local.Is4() {
		t.Peer, t.Local = be32(r.Peer), be32(r.Local)
	}
	if r.PeerIfindex != 0 {
		if len(r.DeviceMAC) != 6 {
			return fmt.Errorf("tunnel %d: device MAC %q is not Ethernet", r.ID, r.DeviceMAC)
		}
		t.DevIfindex = r.PeerIfindex
		copy(t.DevMac[:], r.DeviceMAC)
	}
	if r.AnyPeer {
		t.Flags |= receiverRxFlagRX_F_ANY_PEER
		t.Paths[0].Ifindex = r.Ifindex
	}
	for i, p := range r.Paths {
		t.Paths[i].Src, t.Paths[i].Dst, t.Paths[i].Ifindex = be32(p.Src), be32(p.Dst), p.Ifindex
	}
	if r.Repair {
		t.Flags |= receiverRxFlagRX_F_REPAIR
	}
	if len(r.Keys) > 0 {
		t.Flags |= receiverRxFlagRX_F_AUTH
		t.N_keys = uint8(len(r.Keys))
	}
	for i := range r.Keys {
		t.Keys[i].K0, t.Keys[i].K1 = keyHalves(&r.Keys[i])
	}
	for i, a := range r.Allowed {
		a = a.Masked()
		t.Allowed[i].Addr = be32(a.Addr())
		t.Allowed[i].Mask = binary.NativeEndian.Uint32(net.CIDRMask(a.Bits(), 32))
	}
	if err := d.rcv.RcvTunnels.Update(r.Slot, t, ebpf.UpdateAny); err != nil {
		return fmt.Errorf("write receiver tunnel %d: %w", r.ID, err)
	}
	if err := d.rcv.RcvIds.Update(uint32(r.ID), r.Slot+1, ebpf.UpdateAny); err != nil {
		return fmt.Errorf("write receiver tunnel id %d: %w", r.ID, err)
	}
	return nil
}

// RemoveReceiver makes the receiver drop tunnel id's packets as unknown.
func (d *Datapath) RemoveReceiver(id uint16) error {
	if err := d.rcv.RcvIds.Update(uint32(id), uint32(0), ebpf.UpdateAny); err != nil {
		return fmt.Errorf("remove receiver tunnel %d: %w", id, err)
	}
	return nil
}

// ResetReceiver zeroes a slot's sequence tracking and counters.
func (d *Datapath) ResetReceiver(slot uint32) error {
	if err := d.rcv.RcvSeq.Update(slot, receiverRxShared{}, ebpf.UpdateAny); err != nil {
		return fmt.Errorf("reset receiver state: %w", err)
	}
	zero := make([]receiverRxStats, ebpf.MustPossibleCPU())
	if err := d.rcv.RcvCounters.Update(slot, zero, ebpf.UpdateAny); err != nil {
		return fmt.Errorf("reset receiver counters: %w", err)
	}
	return nil
}

// NextEpoch ends tunnel id's current measurement interval and returns its number; the
// interval minima and maxima of that epoch can then be read with ReadReceiver.
func (d *Datapath) NextEpoch(id uint16) (uint32, error) {
	var slot uint32
	if err := d.rcv.RcvIds.Lookup(uint32(id), &slot); err != nil {
		return 0, fmt.Errorf("read receiver tunnel id %d: %w", id, err)
	}
	if slot == 0 {
		return 0, fmt.Errorf("tunnel %d is not configured on the receiver", id)
	}
	slot--
	var t receiverRxTunnel
	if err := d.rcv.RcvTunnels.Lookup(slot, &t); err != nil {
		return 0, fmt.Errorf("read receiver tunnel %d: %w", id, err)
	}
	closed := t.Epoch
	t.Epoch++
	if err := d.rcv.RcvTunnels.Update(slot, t, ebpf.UpdateAny); err != nil {
		return 0, fmt.Errorf("write receiver tunnel %d: %w", id, err)
	}
	return closed, nil
}

// RxPath is what the receiver measured on one path, summed over CPUs.
type RxPath struct {
	Packets, Bytes, Probes, Late, Dups uint64
	OwdSumNs                           int64
	OwdCnt                             uint64
	OwdMinNs                           int32 // minimum of the epoch asked for
	HasMin                             bool
	OwdEwmaNs                          float64 // packet-weighted mean of the CPUs' EWMAs
	JitterNs                           float64
	DispBytes, DispNs, DispSamples     uint64
	TelPackets, QueueUsSum             uint64
	QdepthMax                          uint32 // maximum of the epoch asked for
	Hops                               uint32
	LastRxNs                           uint64 // monotonic ns of the latest arrival
	Started                            bool
	FirstPathSeq, MaxPathSeq           uint32
	Resyncs                            uint32
	// Held counts packets whose seq or path_seq jump was not believed (passed on, not
	// measured); DelayHeld, delay samples too far from the path's recent delay to use.
	Held, DelayHeld uint64
}

// Lost is how many path sequence numbers have not arrived, as far as the receiver can tell.
func (p RxPath) Lost() uint64 {
	if !p.Started {
		return 0
	}
	expected := uint64(p.MaxPathSeq-p.FirstPathSeq) + 1
	got := p.Packets - p.Dups
	if got >= expected {
		return 0
	}
	return expected - got
}

// RxTunnel is what the receiver measured on one tunnel slot.
type RxTunnel struct {
	Received, Reordered, InterPath, IntraPath uint64
	ThreeReordered, UnknownExtent, Dups       uint64
	LateNsSum                                 uint64
	LateNsMax                                 uint64 // maximum of the epoch asked for
	// Repairs taken (in no path's counts); Gaps reported to the agent, and the path_seqs
	// in them (GapSeqs).
	Repairs, Gaps, GapSeqs    uint64
	ExtentHist                [len(receiverRxStats{}.Tunnel.ExtentHist)]uint64
	MaxSeq, Arrivals, Resyncs uint32
	Paths                     [wire.MaxPaths]RxPath
}

// ReadReceiver reads a slot's measurements; interval extremes are those of epoch.
func (d *Datapath) ReadReceiver(slot, epoch uint32) (RxTunnel, error) {
	var out RxTunnel
	var sh receiverRxShared
	if err := d.rcv.RcvSeq.Lookup(slot, &sh); err != nil {
		return out, fmt.Errorf("read receiver state: %w", err)
	}
	out.MaxSeq, out.Arrivals, out.Resyncs = sh.MaxSeq, sh.Arrivals, sh.Resyncs
	var per []receiverRxStats
	if err := d.rcv.RcvCounters.Lookup(slot, &per); err != nil {
		return out, fmt.Errorf("read receiver counters: %w", err)
	}
	k := epoch & 1
	for _, cpu := range per {
		t := &cpu.Tunnel
		out.Reordered += t.Reordered
		out.InterPath += t.InterPath
		out.IntraPath += t.IntraPath
		out.ThreeReordered += t.ThreeReordered
		out.UnknownExtent += t.UnknownExtent
		out.Dups += t.Dups
		out.LateNsSum += t.LateNsSum
		out.Repairs += t.Repairs
		out.Gaps += t.Gaps
		out.GapSeqs += t.GapSeqs
		if t.LateEpoch[k] == epoch {
			out.LateNsMax = max(out.LateNsMax, t.LateNsMax[k])
		}
		for i, v := range t.ExtentHist {
			out.ExtentHist[i] += v
		}
	}
	for p := range out.Paths {
		o := &out.Paths[p]
		s := sh.Paths[p]
		o.Started, o.FirstPathSeq, o.MaxPathSeq, o.Resyncs = s.Started != 0, s.FirstPs, s.MaxPs, s.Resyncs
		var ewmaW, jitW float64
		for _, cpu := range per {
			c := &cpu.Paths[p]
			o.Packets += c.Packets
			out.Received += c.Packets
			o.Bytes += c.Bytes
			o.Probes += c.Probes
			o.Late += c.Late
			o.Dups += c.Dups
			o.OwdSumNs += c.OwdSumNs
			o.OwdCnt += c.OwdCnt
			if c.MinEpoch[k] == epoch && c.OwdCnt > 0 && (!o.HasMin || c.OwdMinNs[k] < o.OwdMinNs) {
				o.OwdMinNs, o.HasMin = c.OwdMinNs[k], true
			}
			if c.OwdCnt > 0 {
				w := float64(c.OwdCnt)
				ewmaW += w
				o.OwdEwmaNs += w * float64(c.OwdEwmaNs)
				jitW += w
				o.JitterNs += w * float64(c.JitterNs)
			}
			o.DispBytes += c.DispBytes
			o.DispNs += c.DispNs
			o.DispSamples += c.DispSamples
			o.TelPackets += c.TelPackets
			o.QueueUsSum += c.QueueUsSum
			if c.QdepthEpoch[k] == epoch {
				o.QdepthMax = max(o.QdepthMax, c.QdepthMax[k])
			}
			o.Hops = max(o.Hops, c.Hops)
			o.LastRxNs = max(o.LastRxNs, c.LastRxNs)
			o.Held += c.Held
			o.DelayHeld += c.DelayHeld
		}
		if ewmaW > 0 {
			o.OwdEwmaNs /= ewmaW
			o.JitterNs /= jitW
		}
	}
	return out, nil
}

// RunStats is the kernel's account of a program's runs in real traffic; it only grows
// while run-time statistics are enabled (EnableRunStats).
type RunStats struct {
	Runs    uint64
	Runtime time.Duration
}

// PerRun is the mean cost of one run.
func (r RunStats) PerRun() time.Duration {
	if r.Runs == 0 {
		return 0
	}
	return r.Runtime / time.Duration(r.Runs)
}

// EnableRunStats turns on the kernel's per-program run-time accounting (which costs a
// clock read per run) until the returned Closer is closed.
func EnableRunStats() (io.Closer, error) {
	c, err := ebpf.EnableStats(uint32(unix.BPF_STATS_RUN_TIME))
	if err != nil {
		return nil, fmt.Errorf("enable BPF run-time statistics: %w", err)
	}
	return c, nil
}

// RunStats returns the sender's (all instances) and the receiver's run statistics.
func (d *Datapath) RunStats() (sender, receiver RunStats, err error) {
	for _, p := range d.sndProgs {
		s, err := p.Stats()
		if err != nil {
			return sender, receiver, fmt.Errorf("sender run statistics: %w", err)
		}
		sender.Runs += s.RunCount
		sender.Runtime += s.Runtime
	}
	s, err := d.rcv.PlaitReceiver.Stats()
	if err != nil {
		return sender, receiver, fmt.Errorf("receiver run statistics: %w", err)
	}
	return sender, RunStats{Runs: s.RunCount, Runtime: s.Runtime}, nil
}
