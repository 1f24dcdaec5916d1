package agent

import (
	"math"
	"net"
	"net/netip"
	"time"

	"github.com/vishvananda/netlink"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	pb "github.com/plait/plait/api/plait/v1"
	"github.com/plait/plait/ebpf/datapath"
	"github.com/plait/plait/model"
	"github.com/plait/plait/split"
	"github.com/plait/plait/wire"
)

// tunnel is a configured tunnel with everything resolved that the datapath needs.
type tunnel struct {
	cfg       *pb.TunnelConfig // with defaults filled in; weights and mode track changes
	slot      uint32
	addr      netip.Prefix // local tunnel address
	peer      netip.Addr   // the other end's tunnel address, for compact packets
	remote    netip.Prefix // striped destinations
	mtu       int
	paths     []*path
	gen       uint64
	signal    uint32 // congestion signals asked for (datapath.Tunnel.Signal)
	triggered uint32 // of those, by the SignalTrigger
	// rxIfindex is the interface a receive-only tunnel listens on (0 otherwise).
	rxIfindex int
	// allowed are the inner sources the peer may send from.
	allowed []netip.Prefix
	// keys tag and check the tunnel's packets (none: authentication is off).
	keys []wire.Key
	// devPeer is the tunnel device's veth peer, into which the receiver sends
	// decapsulated packets to arrive on the device (devMAC); set when applied.
	devPeer uint32
	devMAC  net.HardwareAddr
}

type path struct {
	cfg      *pb.PathConfig // with defaults filled in
	ifindex  int
	mtu      int
	local    netip.Addr
	remote   netip.Addr
	localMAC net.HardwareAddr
	hopMAC   net.HardwareAddr // nil until resolved
	pending  string           // why hopMAC is not resolved yet
	gateway  netip.Addr
	up       bool
	est      *pb.PathEstimate
}

// usable is whether the datapath may send on the path.
func (p *path) usable() bool { return p.up && p.hopMAC != nil }

func invalid(format string, args ...any) error {
	return status.Errorf(codes.InvalidArgument, format, args...)
}

// resolve checks a requested configuration and looks up everything it refers to; it
// changes nothing.
func resolve(req *pb.TunnelConfig, resolveTimeout time.Duration) (*tunnel, error) {
	cfg := proto.Clone(req).(*pb.TunnelConfig)
	if cfg.Id == 0 || cfg.Id > 0xffff {
		return nil, invalid("tunnel id %d out of range: use 1 to 65535, the same on both ends", cfg.Id)
	}
	if cfg.Device == "" {
		return nil, invalid("tunnel %d has no device: name the tunnel device, e.g. plait0", cfg.Id)
	}
	addr, err := netip.ParsePrefix(cfg.Address)
	if err != nil || !addr.Addr().Is4() {
		return nil, invalid("tunnel address %q is not an IPv4 address with prefix length, e.g. 10.99.0.1/24", cfg.Address)
	}
	remote := addr.Masked()
	if cfg.RemotePrefix != "" {
		if remote, err = netip.ParsePrefix(cfg.RemotePrefix); err != nil || !remote.Addr().Is4() {
			return nil, invalid("remote prefix %q is not an IPv4 prefix, e.g. 10.99.0.0/24", cfg.RemotePrefix)
		}
	}
	cfg.RemotePrefix = remote.Masked().String()
	var peer netip.Addr
	if cfg.PeerAddress != "" {
		if peer, err = netip.ParseAddr(cfg.PeerAddress); err != nil || !peer.Is4() || peer == addr.Addr() {
			return nil, invalid("peer address %q is not the other end's IPv4 tunnel address", cfg.PeerAddress)
		}
		if !remote.Contains(peer) {
			return nil, invalid("peer address %s is outside the striped prefix %s", peer, remote)
		}
	}
	if cfg.Port == 0 {
		cfg.Port = wire.Port
	}
	if cfg.Port > 0xffff {
		return nil, invalid("port %d out of range", cfg.Port)
	}
	if _, ok := pb.Encap_name[int32(cfg.Encap)]; !ok {
		return nil, invalid("unknown encapsulation %d: use udp or ip", cfg.Encap)
	}
	if cfg.SignalTrigger, err = signalTrigger(cfg.SignalTrigger); err != nil {
		return nil, err
	}
	if cfg.WindowKept, err = windowKept(cfg.WindowKept); err != nil {
		return nil, err
	}
	allowed, err := allowedIPs(cfg.AllowedIps)
	if err != nil {
		return nil, err
	}
	keys, err := tunnelKeys(cfg)
	if err != nil {
		return nil, err
	}
	if cfg.ReceiveOnly {
		if cfg.SignalTrigger != nil {
			return nil, invalid("signal trigger on a receive-only tunnel, which sends nothing: leave it out")
		}
		if cfg.Resequence {
			return nil, invalid("resequence on a receive-only tunnel, which has no tunnel device to put packets in order onto: leave it out")
		}
		if cfg.Repair {
			return nil, invalid("repair on a receive-only tunnel, whose sender is a split switch that keeps no copies: leave it out")
		}
		t, err := resolveReceiveOnly(cfg, addr)
		if err != nil {
			return nil, err
		}
		t.allowed = cmpOrPrefixes(allowed, addr.Masked())
		return t, nil
	}
	if cfg.Mode == pb.Mode_MODE_UNSPECIFIED {
		cfg.Mode = pb.Mode_MODE_WRR
	}
	if _, ok := pb.Mode_name[int32(cfg.Mode)]; !ok {
		return nil, invalid("unknown mode %d: use rr, wrr or edpf", cfg.Mode)
	}
	n := len(cfg.Paths)
	if n == 0 || n > wire.MaxPaths {
		return nil, invalid("tunnel %d has %d paths: give 1 to %d", cfg.Id, n, wire.MaxPaths)
	}
	if len(cfg.Weights) == 0 {
		cfg.Weights = make([]float64, n)
		for i := range cfg.Weights {
			cfg.Weights[i] = 1
		}
	}
	if err := split.Check(cfg.Weights, n); err != nil {
		return nil, invalid("%v", err)
	}

	t := &tunnel{cfg: cfg, addr: addr, peer: peer, remote: remote.Masked(), mtu: math.MaxInt, allowed: allowed, keys: keys}
	if len(t.allowed) == 0 && peer.IsValid() {
		t.allowed = []netip.Prefix{netip.PrefixFrom(peer, 32)}
	}
	t.allowed = cmpOrPrefixes(t.allowed, t.remote)
	names := map[string]bool{}
	pairs := map[[2]netip.Addr]string{}
	for i, pc := range cfg.Paths {
		p, err := resolvePath(i, pc, resolveTimeout)
		if err != nil {
			return nil, err
		}
		if names[p.cfg.Name] {
			return nil, invalid("path name %q is used twice: give each path its own name", p.cfg.Name)
		}
		names[p.cfg.Name] = true
		if other, dup := pairs[[2]netip.Addr{p.local, p.remote}]; dup {
			return nil, invalid("paths %q and %q both run %s -> %s: each path needs its own pair of addresses", other, p.cfg.Name, p.local, p.remote)
		}
		pairs[[2]netip.Addr{p.local, p.remote}] = p.cfg.Name
		if p.local == addr.Addr() || p.remote == addr.Addr() {
			return nil, invalid("path %q uses the tunnel address %s: paths need their own addresses", p.cfg.Name, addr.Addr())
		}
		if t.remote.Contains(p.remote) {
			return nil, invalid("path %q: remote %s lies inside the striped prefix %s, so the tunnel would carry its own packets", p.cfg.Name, p.remote, t.remote)
		}
		t.mtu = min(t.mtu, p.mtu)
		t.paths = append(t.paths, p)
	}
	if cfg.Repair && !peer.IsValid() {
		return nil, invalid("repair needs the peer's tunnel address (peer_address, --peer): requests for repairs travel to it")
	}
	if cfg.AckPath != "" && !names[cfg.AckPath] {
		return nil, invalid("ack_path %q is not one of the tunnel's paths", cfg.AckPath)
	}
	overhead := wire.Overhead(cfg.Encap == pb.Encap_ENCAP_IP, peer.IsValid())
	if cfg.Telemetry {
		overhead += wire.TelemetryLen
	}
	if len(keys) > 0 {
		overhead += wire.TagLen
	}
	t.mtu -= overhead
	if t.mtu < 576 {
		return nil, invalid("the smallest path MTU leaves %d bytes inside the tunnel, below IPv4's 576: raise the path MTUs", t.mtu)
	}
	return t, nil
}

// allowedIPs reads the inner source prefixes a tunnel's peer may send from.
func allowedIPs(in []string) ([]netip.Prefix, error) {
	if len(in) > datapath.MaxAllowed {
		return nil, invalid("%d allowed IPs: give at most %d prefixes", len(in), datapath.MaxAllowed)
	}
	var out []netip.Prefix
	for _, s := range in {
		p, err := netip.ParsePrefix(s)
		if err != nil {
			if a, aerr := netip.ParseAddr(s); aerr == nil {
				p, err = netip.PrefixFrom(a, a.BitLen()), nil
			}
		}
		if err != nil || !p.Addr().Is4() {
			return nil, invalid("allowed IP %q is not an IPv4 address or prefix, e.g. 10.99.0.2/32", s)
		}
		out = append(out, p.Masked())
	}
	return out, nil
}

// cmpOrPrefixes is ps, or def alone when ps is empty.
func cmpOrPrefixes(ps []netip.Prefix, def netip.Prefix) []netip.Prefix {
	if len(ps) > 0 {
		return ps
	}
	return []netip.Prefix{def}
}

// resolveReceiveOnly checks a tunnel whose packets a split switch encapsulates: the
// agent only listens on an existing interface.
func resolveReceiveOnly(cfg *pb.TunnelConfig, addr netip.Prefix) (*tunnel, error) {
	if len(cfg.Paths) > 0 || len(cfg.Weights) > 0 {
		return nil, invalid("tunnel %d is receive-only: it takes no paths or weights (the split switch has them)", cfg.Id)
	}
	l, err := linkByName(cfg.Device)
	if err != nil {
		return nil, invalid("receive-only tunnel %d: %v", cfg.Id, err)
	}
	cfg.Mode, cfg.RemotePrefix, cfg.PeerAddress = pb.Mode_MODE_UNSPECIFIED, "", ""
	return &tunnel{cfg: cfg, addr: addr, mtu: l.Attrs().MTU, rxIfindex: l.Attrs().Index}, nil
}

func resolvePath(i int, pc *pb.PathConfig, resolveTimeout time.Duration) (*path, error) {
	pc = proto.Clone(pc).(*pb.PathConfig)
	if pc.Interface == "" {
		return nil, invalid("path %d has no interface: name the interface it leaves by", i+1)
	}
	if pc.Name == "" {
		pc.Name = pc.Interface
	}
	l, err := linkByName(pc.Interface)
	if err != nil {
		return nil, status.Errorf(codes.InvalidArgument, "path %q: %v", pc.Name, err)
	}
	p := &path{cfg: pc, ifindex: l.Attrs().Index, mtu: l.Attrs().MTU, localMAC: l.Attrs().HardwareAddr, up: true, est: &pb.PathEstimate{}}
	if len(p.localMAC) != 6 {
		return nil, invalid("path %q: interface %s is not Ethernet", pc.Name, pc.Interface)
	}
	if pc.LocalAddr == "" {
		if p.local, err = firstIPv4(l); err != nil {
			return nil, invalid("path %q: %v", pc.Name, err)
		}
		pc.LocalAddr = p.local.String()
	} else if p.local, err = netip.ParseAddr(pc.LocalAddr); err != nil || !p.local.Is4() {
		return nil, invalid("path %q: local address %q is not IPv4", pc.Name, pc.LocalAddr)
	}
	if p.remote, err = netip.ParseAddr(pc.RemoteAddr); err != nil || !p.remote.Is4() {
		return nil, invalid("path %q: remote address %q is not IPv4: give the peer's address on this path", pc.Name, pc.RemoteAddr)
	}
	if pc.NextHop != "" {
		if p.gateway, err = netip.ParseAddr(pc.NextHop); err != nil || !p.gateway.Is4() {
			return nil, invalid("path %q: next hop %q is not IPv4", pc.Name, pc.NextHop)
		}
	}
	p.resolve(l, resolveTimeout)
	return p, nil
}

// resolve looks up the path's next hop. A path whose peer is not reachable yet (a link
// coming up, a switch not yet programmed) is accepted and kept out of the split until it
// resolves.
func (p *path) resolve(l netlink.Link, timeout time.Duration) {
	mac, err := nextHopMAC(l, p.local, p.remote, p.gateway, timeout)
	if err != nil {
		p.hopMAC, p.pending = nil, err.Error()
		return
	}
	p.hopMAC, p.pending = mac, ""
}

// datapath returns the sender's view of the tunnel.
func (t *tunnel) datapath() datapath.Tunnel {
	mode := map[pb.Mode]datapath.Mode{pb.Mode_MODE_RR: datapath.ModeRR, pb.Mode_MODE_WRR: datapath.ModeWRR, pb.Mode_MODE_EDPF: datapath.ModeEDPF}[t.cfg.Mode]
	dt := datapath.Tunnel{Slot: t.slot, ID: uint16(t.cfg.Id), Prefix: t.remote, Port: uint16(t.cfg.Port), Mode: mode,
		Telemetry: t.cfg.Telemetry, Compact: t.peer.IsValid(), Local: t.addr.Addr(), Peer: t.peer, Signal: t.signal,
		IPEncap: t.cfg.Encap == pb.Encap_ENCAP_IP}
	if len(t.keys) > 0 {
		dt.Key = &t.keys[0]
	}
	for i, p := range t.paths {
		dt.Paths = append(dt.Paths, datapath.Path{
			Ifindex: uint32(p.ifindex), SrcIP: p.local, DstIP: p.remote, SrcMAC: p.localMAC, DstMAC: p.hopMAC,
			Up: p.usable(), Weight: t.cfg.Weights[i], RateBps: p.est.RateBps, DelayNs: uint32(max(0, p.est.DelayUs*1000)),
			MTU: uint32(p.mtu), ACKs: p.cfg.Name == t.cfg.AckPath,
		})
	}
	return dt
}

// receiver is the receiver's view: the peer sends on each path from its address on the
// path to ours, arriving on the path's interface, from inner sources in allowed; compact
// packets from the peer are restored to travel from its tunnel address to this one.
func (t *tunnel) receiver() datapath.Receiver {
	r := datapath.Receiver{ID: uint16(t.cfg.Id), Slot: t.slot, Peer: t.peer, Local: t.addr.Addr(),
		Self: t.addr.Addr(), Allowed: t.allowed, Keys: t.keys, PeerIfindex: t.devPeer, DeviceMAC: t.devMAC, Repair: t.cfg.Repair}
	for _, p := range t.paths {
		r.Paths = append(r.Paths, datapath.RxPathConfig{Src: p.remote, Dst: p.local, Ifindex: uint32(p.ifindex)})
	}
	if t.cfg.ReceiveOnly {
		r.AnyPeer, r.Ifindex = true, uint32(t.rxIfindex)
	}
	return r
}

func (t *tunnel) pathByName(name string) (int, *path, error) {
	for i, p := range t.paths {
		if p.cfg.Name == name {
			return i, p, nil
		}
	}
	var names []string
	for _, p := range t.paths {
		names = append(names, p.cfg.Name)
	}
	return 0, nil, status.Errorf(codes.NotFound, "tunnel %d has no path %q (its paths: %v)", t.cfg.Id, name, names)
}

// weights are the configured weights normalised over the paths that can carry packets.
func (t *tunnel) weights() []float64 { return t.normalise(t.cfg.Weights) }

// shares are the fractions of packets the split is set to give each path: wrr's
// normalised weights, rr's equal shares; none under edpf, which decides per packet.
func (t *tunnel) shares() []float64 {
	switch t.cfg.Mode {
	case pb.Mode_MODE_WRR:
		return t.weights()
	case pb.Mode_MODE_RR:
		equal := make([]float64, len(t.paths))
		for i := range equal {
			equal[i] = 1
		}
		return t.normalise(equal)
	}
	return make([]float64, len(t.paths))
}

// normalise scales w, one value per path, to sum to 1 over the usable paths; the others
// get 0.
func (t *tunnel) normalise(w []float64) []float64 {
	var total float64
	for i, p := range t.paths {
		if p.usable() {
			total += w[i]
		}
	}
	out := make([]float64, len(t.paths))
	for i, p := range t.paths {
		if p.usable() && total > 0 {
			out[i] = w[i] / total
		}
	}
	return out
}

// proto describes the tunnel for the API.
func (t *tunnel) proto() *pb.Tunnel {
	out := &pb.Tunnel{Config: redacted(t.cfg), Mtu: uint32(t.mtu), Generation: t.gen}
	w := t.weights()
	for i, p := range t.paths {
		out.Paths = append(out.Paths, &pb.PathState{
			Index: uint32(i), Config: proto.Clone(p.cfg).(*pb.PathConfig), Up: p.up, Weight: w[i],
			Estimate: proto.Clone(p.est).(*pb.PathEstimate), LocalMac: p.localMAC.String(), NextHopMac: p.hopMAC.String(), Ifindex: uint32(p.ifindex),
			Pending: p.pending,
		})
	}
	return out
}

func checkEstimates(est []*pb.PathEstimate, n int) error {
	if len(est) != n {
		return invalid("%d estimates for %d paths: give one per path", len(est), n)
	}
	for i, e := range est {
		if e == nil || math.IsNaN(e.RateBps) || math.IsInf(e.RateBps, 0) || e.RateBps < 0 {
			return invalid("estimate %d: rate must be a finite number of bit/s >= 0", i+1)
		}
		if e.RateBps > 0 && e.RateBps < 2000 {
			return invalid("estimate %d: rate %.0f bit/s is below the 2 kbit/s edpf can represent", i+1, e.RateBps)
		}
		if math.IsNaN(e.DelayUs) || math.IsInf(e.DelayUs, 0) || e.DelayUs < 0 || e.DelayUs > 4e6 {
			return invalid("estimate %d: delay must be between 0 and 4 s (in µs)", i+1)
		}
		if math.IsNaN(e.CapacityBps) || math.IsInf(e.CapacityBps, 0) || e.CapacityBps < 0 {
			return invalid("estimate %d: capacity must be a finite number of bit/s >= 0", i+1)
		}
	}
	return nil
}

// windowKept checks a requested TunnelConfig.window_kept and fills in its default,
// cubic's β: Linux's default congestion control.
func windowKept(v float64) (float64, error) {
	switch {
	case v == 0:
		return model.Cubic.Beta(), nil
	case !(v > 0 && v <= 1):
		return 0, invalid("window_kept %v: give the share of its window a flow keeps at a loss, above 0 and at most 1 (cubic 0.7, BBR 1), or 0 for cubic's", v)
	}
	return v, nil
}

// signalTrigger checks a requested SignalTrigger and returns what the tunnel keeps of it:
// a copy, or nil for none (rate 0).
func signalTrigger(g *pb.SignalTrigger) (*pb.SignalTrigger, error) {
	finite := func(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) && v >= 0 }
	switch {
	case g == nil || g.RateBps == 0:
		return nil, nil
	case !finite(g.RateBps) || g.RateBps < 2000:
		return nil, invalid("signal trigger: rate %v bit/s: give the paths' capacity together (at least 2 kbit/s), or 0 for no trigger", g.RateBps)
	case !finite(g.QueueUs) || g.QueueUs == 0 || g.QueueUs > 4e6:
		return nil, invalid("signal trigger: queue %v µs: give more than 0 and at most 4 s", g.QueueUs)
	case !finite(g.StandingUs) || g.StandingUs > 4e6:
		return nil, invalid("signal trigger: standing %v µs: give 0 to 4 s", g.StandingUs)
	case g.WindowMs == 0 || g.WindowMs > 60000:
		return nil, invalid("signal trigger: window %d ms: give 1 ms to 60 s after a flow's first packet", g.WindowMs)
	}
	return proto.Clone(g).(*pb.SignalTrigger), nil
}
