package datapath

import (
	"encoding/binary"
	"fmt"
	"math"
	"net"
	"net/netip"
	"sync"

	"github.com/cilium/ebpf"

	"github.com/plait/plait/split"
	"github.com/plait/plait/wire"
)

// Mode is the sender's scheduler (enum plait_mode in consts.h).
type Mode senderPlaitMode

const (
	ModeRR   = Mode(senderPlaitModeMODE_RR)
	ModeWRR  = Mode(senderPlaitModeMODE_WRR)
	ModeEDPF = Mode(senderPlaitModeMODE_EDPF)
)

func (m Mode) String() string {
	switch m {
	case ModeRR:
		return "rr"
	case ModeWRR:
		return "wrr"
	case ModeEDPF:
		return "edpf"
	}
	return fmt.Sprintf("mode(%d)", uint8(m))
}

// ParseMode reads a mode name.
func ParseMode(s string) (Mode, error) {
	for _, m := range []Mode{ModeRR, ModeWRR, ModeEDPF} {
		if m.String() == s {
			return m, nil
		}
	}
	return 0, fmt.Errorf("unknown mode %q: use rr, wrr or edpf", s)
}

const (
	// MaxTunnels is MAX_TUNNELS in consts.h (tests/wireformat checks it).
	MaxTunnels = 64
	// WRRSlots is the wrr table's length (WRR_SLOTS in consts.h; tests/wireformat checks it).
	WRRSlots = split.HostSlots
	// AckMaxInner is ACK_MAX_INNER in consts.h (tests/wireformat checks it): an inner
	// packet of up to this many bytes takes the tunnel's ACK path, when it has one.
	AckMaxInner = 80
)

// The embedded programs' specs, parsed once for the names read from them; Load parses
// its own copies to load.
var (
	senderSpec   = sync.OnceValues(loadSender)
	receiverSpec = sync.OnceValues(loadReceiver)
)

// Path is one path of a tunnel as the sender needs it.
type Path struct {
	Ifindex uint32
	SrcIP   netip.Addr
	DstIP   netip.Addr
	SrcMAC  net.HardwareAddr
	DstMAC  net.HardwareAddr // next hop
	Up      bool
	Weight  float64 // wrr
	RateBps float64 // edpf: capacity; 0 keeps the path out of edpf
	DelayNs uint32  // edpf: one-way delay
	MTU     uint32  // of the interface
	// ACKs makes the path carry the tunnel's ACK-sized packets (IPv4 and TCP headers
	// only), whatever the mode; at most one path of a tunnel may.
	ACKs bool
}

// Tunnel is a sender configuration.
type Tunnel struct {
	Slot      uint32 // < MaxTunnels, assigned by the agent
	ID        uint16
	Prefix    netip.Prefix // remote prefix: inner destinations that are striped
	Port      uint16
	Mode      Mode
	Telemetry bool
	// Compact sends TCP between Local and Peer (the tunnel's own addresses) with one IPv4
	// header: 20 bytes less a packet.
	Compact     bool
	Local, Peer netip.Addr
	// IPEncap puts the Plait header right after the outer IPv4 header (protocol
	// wire.IPProto) instead of in UDP: 8 bytes less a packet, for paths without NAT.
	IPEncap bool
	Paths   []Path
	// Signal counts the congestion signals asked for: the sender gives one each time it
	// is ahead of the signals given (SenderCounters.Signaled); see take_signal.
	Signal uint32
	// Key, when set, tags every packet (wire.FlagAuth).
	Key *wire.Key
}

func (t *Tunnel) validate() error {
	if t.Slot >= MaxTunnels {
		return fmt.Errorf("tunnel slot %d out of range (max %d tunnels)", t.Slot, MaxTunnels)
	}
	if len(t.Paths) == 0 || len(t.Paths) > wire.MaxPaths {
		return fmt.Errorf("tunnel has %d paths, want 1 to %d", len(t.Paths), wire.MaxPaths)
	}
	if !t.Prefix.Addr().Is4() {
		return fmt.Errorf("remote prefix %s is not IPv4", t.Prefix)
	}
	if t.Mode < ModeRR || t.Mode > ModeEDPF {
		return fmt.Errorf("unknown mode %d", t.Mode)
	}
	if t.Compact && (!t.Local.Is4() || !t.Peer.Is4()) {
		return fmt.Errorf("compact needs the tunnel's own IPv4 addresses, got %s and %s", t.Local, t.Peer)
	}
	weights := make([]float64, len(t.Paths))
	for i, p := range t.Paths {
		weights[i] = p.Weight
	}
	if err := split.Check(weights, len(t.Paths)); err != nil {
		return err
	}
	acks := 0
	for i, p := range t.Paths {
		if p.ACKs {
			acks++
		}
		if !p.SrcIP.Is4() || !p.DstIP.Is4() {
			return fmt.Errorf("path %d: addresses %s -> %s are not IPv4", i, p.SrcIP, p.DstIP)
		}
		if len(p.SrcMAC) != 6 || (p.Up && len(p.DstMAC) != 6) {
			return fmt.Errorf("path %d: MAC addresses %q -> %q are not Ethernet", i, p.SrcMAC, p.DstMAC)
		}
		if p.Ifindex == 0 {
			return fmt.Errorf("path %d: no interface", i)
		}
		if p.MTU < 576 {
			return fmt.Errorf("path %d: MTU %d is below IPv4's 576", i, p.MTU)
		}
	}
	if acks > 1 {
		return fmt.Errorf("%d paths carry the ACKs: at most one may", acks)
	}
	return nil
}

// WriteSender installs t as the sender configuration of its slot. The datapath switches
// from the previous configuration to this one between two packets: it reads the copy that
// snd_gens names, and this writes the other copy before flipping that word.
func (d *Datapath) WriteSender(t Tunnel) error {
	if err := t.validate(); err != nil {
		return err
	}
	cfg, err := t.encode()
	if err != nil {
		return err
	}
	var live uint32 // copy in use plus one; 0 when unconfigured
	if err := d.snd.SndGens.Lookup(t.Slot, &live); err != nil {
		return fmt.Errorf("read tunnel generation: %w", err)
	}
	next := uint32(0)
	if live == 1 {
		next = 1
	}
	if err := d.snd.SndConfigs.Update(t.Slot*2+next, cfg, ebpf.UpdateAny); err != nil {
		return fmt.Errorf("write tunnel config: %w", err)
	}
	if err := d.snd.SndGens.Update(t.Slot, next+1, ebpf.UpdateAny); err != nil {
		return fmt.Errorf("switch tunnel config: %w", err)
	}
	return nil
}

// RemoveSender stops striping for a slot: its device's packets then pass untouched.
func (d *Datapath) RemoveSender(slot uint32) error {
	if err := d.snd.SndGens.Update(slot, uint32(0), ebpf.UpdateAny); err != nil {
		return fmt.Errorf("remove tunnel slot %d: %w", slot, err)
	}
	return nil
}

// ResetSender zeroes a slot's scheduler state and counters and starts its sequence numbers
// (seq and every path_seq) at start, for a tunnel that is new rather than reconfigured.
func (d *Datapath) ResetSender(slot, start uint32) error {
	st := senderTxState{Seq: start}
	for i := range st.PathSeq {
		st.PathSeq[i] = start
	}
	if err := d.snd.SndStates.Update(slot, st, ebpf.UpdateAny); err != nil {
		return fmt.Errorf("reset sender state: %w", err)
	}
	zero := make([]senderTxPathStats, ebpf.MustPossibleCPU())
	for p := uint32(0); p < wire.MaxPaths; p++ {
		if err := d.snd.SndPaths.Update(slot*wire.MaxPaths+p, zero, ebpf.UpdateAny); err != nil {
			return fmt.Errorf("reset sender counters: %w", err)
		}
	}
	return nil
}

func (t *Tunnel) encode() (*senderTxCfg, error) {
	var cfg senderTxCfg
	pfx := t.Prefix.Masked().Addr().As4()
	cfg.Prefix = binary.NativeEndian.Uint32(pfx[:])
	mask := net.CIDRMask(t.Prefix.Bits(), 32)
	cfg.Mask = binary.NativeEndian.Uint32(mask)
	cfg.Port = htons(t.Port)
	cfg.TunnelId = htons(t.ID)
	cfg.Mode = senderPlaitMode(t.Mode)
	cfg.N_paths = uint8(len(t.Paths))
	cfg.Signal = t.Signal
	if t.Telemetry {
		cfg.Flags |= senderTxFlagTX_F_TELEMETRY
	}
	if t.IPEncap {
		cfg.Flags |= senderTxFlagTX_F_IP_ENCAP
	}
	if t.Key != nil {
		cfg.Flags |= senderTxFlagTX_F_AUTH
		cfg.Key.K0, cfg.Key.K1 = keyHalves(t.Key)
	}
	if t.Compact {
		cfg.Flags |= senderTxFlagTX_F_COMPACT
		local, peer := t.Local.As4(), t.Peer.As4()
		cfg.Local = binary.NativeEndian.Uint32(local[:])
		cfg.Peer = binary.NativeEndian.Uint32(peer[:])
	}
	weights := make([]float64, len(t.Paths))
	cfg.Mtu = math.MaxUint32
	for i, p := range t.Paths {
		if p.Up {
			cfg.UpMask |= 1 << i
			weights[i] = p.Weight
		}
		if p.ACKs {
			cfg.Flags |= senderTxFlagTX_F_ACK_PATH
			cfg.AckPath = uint8(i)
		}
		src, dst := p.SrcIP.As4(), p.DstIP.As4()
		tp := &cfg.Paths[i]
		tp.Ifindex = p.Ifindex
		tp.SrcIp = binary.NativeEndian.Uint32(src[:])
		tp.DstIp = binary.NativeEndian.Uint32(dst[:])
		tp.CsumBase = ipv4CsumBase(src, dst, wire.OuterProto(t.IPEncap))
		copy(tp.SrcMac[:], p.SrcMAC)
		copy(tp.DstMac[:], p.DstMAC)
		if p.RateBps > 0 {
			bt := 8e9 / p.RateBps * 1024
			if bt > math.MaxUint32 {
				return nil, fmt.Errorf("path %d: rate %.0f bit/s is below what edpf can represent", i, p.RateBps)
			}
			tp.ByteTime = max(1, uint32(bt))
		}
		tp.DelayNs = p.DelayNs
		cfg.Mtu = min(cfg.Mtu, p.MTU)
	}
	if t.Mode == ModeWRR && cfg.UpMask != 0 {
		if !anyPositive(weights) {
			// The weighted paths are all down: fail over evenly to the ones that are up.
			for i, p := range t.Paths {
				if p.Up {
					weights[i] = 1
				}
			}
		}
		slots, err := split.Smooth(weights, WRRSlots)
		if err != nil {
			return nil, err
		}
		copy(cfg.Slots[:], slots)
	}
	return &cfg, nil
}

// keyHalves are the two little-endian words SipHash reads a key as.
func keyHalves(k *wire.Key) (uint64, uint64) {
	return binary.LittleEndian.Uint64(k[:8]), binary.LittleEndian.Uint64(k[8:])
}

func anyPositive(ws []float64) bool {
	for _, w := range ws {
		if w > 0 {
			return true
		}
	}
	return false
}

// ipv4CsumBase is the one's complement sum of the outer IPv4 header the sender writes,
// with tot_len and checksum zero, summed as the sender loads it (16-bit words in host
// order), so the program only adds tot_len and folds.
func ipv4CsumBase(src, dst [4]byte, proto byte) uint32 {
	hdr := []byte{0x45, 0, 0, 0, 0, 0, 0x40, 0, 64, proto, 0, 0}
	hdr = append(append(hdr, src[:]...), dst[:]...)
	var sum uint32
	for i := 0; i < len(hdr); i += 2 {
		sum += uint32(binary.NativeEndian.Uint16(hdr[i:]))
	}
	return sum
}

func htons(v uint16) uint16 {
	var b [2]byte
	binary.BigEndian.PutUint16(b[:], v)
	return binary.NativeEndian.Uint16(b[:])
}
