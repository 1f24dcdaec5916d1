package controller

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"slices"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/plait/plait/agent"
	"github.com/plait/plait/internal/sockrpc"
	"github.com/plait/plait/split"
	"github.com/plait/plait/topo/scenario"
	"github.com/plait/plait/wire"
)

// Network is what the controller controls: the agents at the tunnels' ends, the P4
// switches on the paths, and the tunnels. The lab writes one; an operator can too.
//
//	interval: 100ms
//	tls: {ca: ca.pem, cert: ctl.pem, key: ctl-key.pem}  # for every TCP agent and switch
//	agents:
//	  h1: unix:/run/plait/h1.sock   # or a bare path
//	  h2: 192.0.2.2:9470            # TCP: mutual TLS with the tls above
//	  h3: {address: 192.0.2.3:9470, tls: {ca: other-ca.pem, cert: c.pem, key: c-key.pem}}
//	switches:
//	  s1:
//	    address: 127.0.0.1:9601
//	    election_id: 10              # P4Runtime arbitration (default 10)
//	    role: ""                     # P4Runtime role (default: the default role)
//	    on_lost_primary: yield       # yield (default) or reclaim, see switchConn
//	    forward: {1: 2, 2: 1}        # port_fwd: ingress port -> egress port
//	tunnels:
//	  - id: 1
//	    hosts: [h1, h2]             # both agents have tunnel 1 configured
//	    mode: auto                  # auto (default), rr, wrr or edpf
//	    keys: [/etc/plait/t1.key]   # optional: key files the controller gives both agents
type Network struct {
	Interval time.Duration
	Agents   map[string]*Agent
	Switches map[string]*Switch
	Tunnels  []*Tunnel
}

// Agent is a host agent and how to reach it.
type Agent struct {
	Name    string
	Address string      // unix:PATH, a path, or HOST:PORT
	TLS     sockrpc.TLS // for HOST:PORT
}

// Lost-primary policies: what the controller does when another client takes a switch.
const (
	// Yield leaves the switch to the other client and takes it back as soon as it has no
	// primary again (the other one left), with an election id above the highest seen.
	Yield = "yield"
	// Reclaim takes the switch back at once with an election id above the other's, at
	// most once a second (reclaimEvery).
	Reclaim = "reclaim"
)

// Switch is a P4Runtime target running plait.p4.
type Switch struct {
	Name         string
	Address      string
	TLS          sockrpc.TLS
	DeviceID     uint64
	ElectionID   uint64
	Role         string
	OnLost       string // Yield or Reclaim
	P4Info       string // file; default: the built-in P4Info of p4/plait.p4
	DeviceConfig string // file handed to SetForwardingPipelineConfig (BMv2 JSON); may be empty
	Forward      map[uint32]uint32
	Splits       []*Split
}

// Split makes a switch split a tunnel in the network (tunnel_split, split_slots,
// path_encap); the controller keeps its slot table in step with the tunnel's weights.
type Split struct {
	Tunnel uint32
	From   string // the sending end this split serves (one of the tunnel's hosts)
	Index  uint32 // tunnel_index, 0..63
	InPort uint32
	Prefix netip.Prefix
	Paths  []*SplitPath
}

// SplitPath is one path out of a split switch.
type SplitPath struct {
	Name   string
	Port   uint32
	SrcMAC net.HardwareAddr
	DstMAC net.HardwareAddr
	SrcIP  netip.Addr
	DstIP  netip.Addr
}

// Tunnel is a striped tunnel between two agents; the controller steers both directions.
type Tunnel struct {
	ID      uint32
	Hosts   [2]string
	Mode    string // auto, rr, wrr, edpf
	Weights []float64
	// Keys, read from the files the network file names, are given to both agents over
	// their API connection (SetKeys) whenever their key ids differ; none: the agents keep
	// the keys they were configured with.
	Keys Keys
}

// Keys are tunnel keys. They print as their ids, so that no log or error shows them.
type Keys []wire.Key

// IDs names the keys as agents do (Auth.key_ids).
func (k Keys) IDs() []string {
	ids := make([]string, len(k))
	for i := range k {
		ids[i] = agent.KeyID(k[i][:])
	}
	return ids
}

func (k Keys) String() string { return fmt.Sprint(k.IDs()) }

// GoString keeps %#v from printing them too.
func (k Keys) GoString() string { return k.String() }

type rawNetwork struct {
	Interval string                `yaml:"interval"`
	TLS      *rawTLS               `yaml:"tls"`
	Agents   map[string]*rawAgent  `yaml:"agents"`
	Switches map[string]*rawSwitch `yaml:"switches"`
	Tunnels  []*rawTunnel          `yaml:"tunnels"`
}

type rawTLS struct {
	CA   string `yaml:"ca"`
	Cert string `yaml:"cert"`
	Key  string `yaml:"key"`
}

// rawAgent is an address, or a mapping with address and tls.
type rawAgent struct {
	Address string  `yaml:"address"`
	TLS     *rawTLS `yaml:"tls"`
}

func (a *rawAgent) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind == yaml.ScalarNode {
		return n.Decode(&a.Address)
	}
	type plain rawAgent
	return n.Decode((*plain)(a))
}

type rawSwitch struct {
	Address      string            `yaml:"address"`
	TLS          *rawTLS           `yaml:"tls"`
	DeviceID     uint64            `yaml:"device_id"`
	ElectionID   uint64            `yaml:"election_id"`
	Role         string            `yaml:"role"`
	OnLost       string            `yaml:"on_lost_primary"`
	P4Info       string            `yaml:"p4info"`
	DeviceConfig string            `yaml:"device_config"`
	Forward      map[uint32]uint32 `yaml:"forward"`
	Splits       []*rawSplit       `yaml:"splits"`
}

type rawSplit struct {
	Tunnel uint32          `yaml:"tunnel"`
	From   string          `yaml:"from"`
	Index  uint32          `yaml:"index"`
	InPort uint32          `yaml:"in_port"`
	Prefix string          `yaml:"prefix"`
	Paths  []*rawSplitPath `yaml:"paths"`
}

type rawSplitPath struct {
	Name   string `yaml:"name"`
	Port   uint32 `yaml:"port"`
	SrcMAC string `yaml:"src_mac"`
	DstMAC string `yaml:"dst_mac"`
	SrcIP  string `yaml:"src_ip"`
	DstIP  string `yaml:"dst_ip"`
}

type rawTunnel struct {
	ID      uint32    `yaml:"id"`
	Hosts   []string  `yaml:"hosts"`
	Mode    string    `yaml:"mode"`
	Weights []float64 `yaml:"weights"`
	Keys    []string  `yaml:"keys"`
}

// LoadNetwork reads and validates a network file.
func LoadNetwork(path string) (*Network, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read network file: %w", err)
	}
	n, err := ParseNetwork(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return n, nil
}

// ParseNetwork validates a network description; every error names the field at fault.
func ParseNetwork(b []byte) (*Network, error) {
	var raw rawNetwork
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	if err := dec.Decode(&raw); err != nil {
		return nil, fmt.Errorf("not a network description: %w", err)
	}
	n := &Network{Interval: 100 * time.Millisecond, Agents: map[string]*Agent{}, Switches: map[string]*Switch{}}
	if raw.Interval != "" {
		d, err := scenario.ParseDuration(raw.Interval)
		if err != nil {
			return nil, fmt.Errorf("interval: %w", err)
		}
		if d < 20*time.Millisecond || d > 10*time.Second {
			return nil, fmt.Errorf("interval: %v is outside 20ms..10s", d)
		}
		n.Interval = d
	}
	def, err := raw.TLS.check("tls")
	if err != nil {
		return nil, err
	}
	for name, ra := range raw.Agents {
		where := "agents." + name
		if ra == nil || ra.Address == "" {
			return nil, fmt.Errorf("%s: give the agent's address: unix:PATH or HOST:PORT", where)
		}
		e, err := sockrpc.ParseEndpoint(ra.Address)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", where, err)
		}
		a := &Agent{Name: name, Address: ra.Address}
		if a.TLS, err = endTLS(where, e, ra.TLS, def); err != nil {
			return nil, err
		}
		n.Agents[name] = a
	}
	for _, rt := range raw.Tunnels {
		t, err := rt.validate(n)
		if err != nil {
			return nil, err
		}
		if slices.ContainsFunc(n.Tunnels, func(o *Tunnel) bool { return o.ID == t.ID }) {
			return nil, fmt.Errorf("tunnels: tunnel %d is listed twice", t.ID)
		}
		n.Tunnels = append(n.Tunnels, t)
	}
	for name, rs := range raw.Switches {
		s, err := rs.validate(name, n, def)
		if err != nil {
			return nil, err
		}
		n.Switches[name] = s
	}
	if len(n.Agents) == 0 && len(n.Switches) == 0 {
		return nil, errors.New("nothing to control: list agents and/or switches")
	}
	return n, nil
}

func (rt *rawTunnel) validate(n *Network) (*Tunnel, error) {
	where := fmt.Sprintf("tunnels[id %d]", rt.ID)
	if rt.ID == 0 || rt.ID > 0xffff {
		return nil, fmt.Errorf("%s.id: %d is outside 1..65535", where, rt.ID)
	}
	if len(rt.Hosts) != 2 || rt.Hosts[0] == rt.Hosts[1] {
		return nil, fmt.Errorf("%s.hosts: give the two agents at the tunnel's ends", where)
	}
	for _, h := range rt.Hosts {
		if _, ok := n.Agents[h]; !ok {
			return nil, fmt.Errorf("%s.hosts: %q is not among agents", where, h)
		}
	}
	t := &Tunnel{ID: rt.ID, Hosts: [2]string{rt.Hosts[0], rt.Hosts[1]}, Mode: rt.Mode, Weights: rt.Weights}
	if t.Mode == "" {
		t.Mode = "auto"
	}
	if !slices.Contains([]string{"auto", "rr", "wrr", "edpf"}, t.Mode) {
		return nil, fmt.Errorf("%s.mode: %q is not auto, rr, wrr or edpf", where, t.Mode)
	}
	if t.Weights != nil && t.Mode != "wrr" {
		return nil, fmt.Errorf("%s.weights: weights need mode wrr", where)
	}
	// The agent checks them so too, but only once it is connected: a bad file is
	// refused before the controller starts.
	if t.Weights != nil {
		if err := split.Check(t.Weights, len(t.Weights)); err != nil {
			return nil, fmt.Errorf("%s.weights: %w", where, err)
		}
	}
	if len(rt.Keys) > 2 {
		return nil, fmt.Errorf("%s.keys: %d key files: give one, or two while rolling keys over", where, len(rt.Keys))
	}
	for _, f := range rt.Keys {
		k, err := agent.ReadKeyFile(f)
		if err != nil {
			return nil, fmt.Errorf("%s.keys: %w", where, err)
		}
		t.Keys = append(t.Keys, k)
	}
	return t, nil
}

// check names the files' problems; nil stays nil.
func (t *rawTLS) check(where string) (*sockrpc.TLS, error) {
	if t == nil {
		return nil, nil
	}
	out := &sockrpc.TLS{CA: t.CA, Cert: t.Cert, Key: t.Key}
	if (out.Cert == "") != (out.Key == "") {
		return nil, fmt.Errorf("%s: give both cert and key, or neither", where)
	}
	for field, f := range map[string]string{"ca": t.CA, "cert": t.Cert, "key": t.Key} {
		if f == "" {
			continue
		}
		if _, err := os.Stat(f); err != nil {
			return nil, fmt.Errorf("%s.%s: %w", where, field, err)
		}
	}
	return out, nil
}

// endTLS is the TLS material for one agent or switch: its own, or the file's default;
// a TCP end that is not on loopback must have a CA and a client certificate, as it
// requires mutual TLS.
func endTLS(where string, e sockrpc.Endpoint, own *rawTLS, def *sockrpc.TLS) (sockrpc.TLS, error) {
	t, err := own.check(where + ".tls")
	if err != nil {
		return sockrpc.TLS{}, err
	}
	if t == nil {
		t = def
	}
	if e.Unix {
		if own != nil {
			return sockrpc.TLS{}, fmt.Errorf("%s.tls: TLS is for HOST:PORT addresses, %s is a Unix socket", where, e)
		}
		return sockrpc.TLS{}, nil
	}
	if t == nil {
		t = &sockrpc.TLS{}
	}
	if !e.Loopback() && (t.CA == "" || t.Cert == "") {
		return sockrpc.TLS{}, fmt.Errorf("%s: %s is not loopback, so it requires mutual TLS: give tls: {ca, cert, key} (here or at the top of the file)", where, e)
	}
	return *t, nil
}

func (rs *rawSwitch) validate(name string, n *Network, def *sockrpc.TLS) (*Switch, error) {
	where := "switches." + name
	if _, _, err := net.SplitHostPort(rs.Address); err != nil {
		return nil, fmt.Errorf("%s.address: %q is not host:port", where, rs.Address)
	}
	t, err := endTLS(where, sockrpc.Endpoint{Address: rs.Address}, rs.TLS, def)
	if err != nil {
		return nil, err
	}
	s := &Switch{Name: name, Address: rs.Address, TLS: t, DeviceID: rs.DeviceID, ElectionID: rs.ElectionID, Role: rs.Role,
		OnLost: rs.OnLost, P4Info: rs.P4Info, DeviceConfig: rs.DeviceConfig, Forward: rs.Forward}
	if s.OnLost == "" {
		s.OnLost = Yield
	}
	if s.OnLost != Yield && s.OnLost != Reclaim {
		return nil, fmt.Errorf("%s.on_lost_primary: %q is not %s or %s", where, s.OnLost, Yield, Reclaim)
	}
	if s.DeviceID == 0 {
		s.DeviceID = 1
	}
	if s.ElectionID == 0 {
		s.ElectionID = 10
	}
	for _, f := range []string{s.P4Info, s.DeviceConfig} {
		if f != "" {
			if _, err := os.Stat(f); err != nil {
				return nil, fmt.Errorf("%s: %w", where, err)
			}
		}
	}
	for i, r := range rs.Splits {
		sp, err := r.validate(fmt.Sprintf("%s.splits[%d]", where, i), n)
		if err != nil {
			return nil, err
		}
		s.Splits = append(s.Splits, sp)
	}
	return s, nil
}

func (r *rawSplit) validate(where string, n *Network) (*Split, error) {
	i := slices.IndexFunc(n.Tunnels, func(t *Tunnel) bool { return t.ID == r.Tunnel })
	if i < 0 {
		return nil, fmt.Errorf("%s.tunnel: %d is not among tunnels", where, r.Tunnel)
	}
	t := n.Tunnels[i]
	if r.From != t.Hosts[0] && r.From != t.Hosts[1] {
		return nil, fmt.Errorf("%s.from: %q is not one of tunnel %d's hosts %v", where, r.From, t.ID, t.Hosts)
	}
	if r.Index > 63 {
		return nil, fmt.Errorf("%s.index: %d is outside 0..63", where, r.Index)
	}
	pfx, err := netip.ParsePrefix(r.Prefix)
	if err != nil || !pfx.Addr().Is4() {
		return nil, fmt.Errorf("%s.prefix: %q is not an IPv4 prefix", where, r.Prefix)
	}
	sp := &Split{Tunnel: r.Tunnel, From: r.From, Index: r.Index, InPort: r.InPort, Prefix: pfx.Masked()}
	if len(r.Paths) == 0 || len(r.Paths) > wire.MaxPaths {
		return nil, fmt.Errorf("%s.paths: give 1 to %d paths", where, wire.MaxPaths)
	}
	for j, rp := range r.Paths {
		pw := fmt.Sprintf("%s.paths[%d]", where, j)
		p := &SplitPath{Name: rp.Name, Port: rp.Port}
		if p.Name == "" {
			return nil, fmt.Errorf("%s.name: name the path as the tunnel's agents do", pw)
		}
		if p.SrcMAC, err = net.ParseMAC(rp.SrcMAC); err != nil {
			return nil, fmt.Errorf("%s.src_mac: %v", pw, err)
		}
		if p.DstMAC, err = net.ParseMAC(rp.DstMAC); err != nil {
			return nil, fmt.Errorf("%s.dst_mac: %v", pw, err)
		}
		if p.SrcIP, err = netip.ParseAddr(rp.SrcIP); err != nil || !p.SrcIP.Is4() {
			return nil, fmt.Errorf("%s.src_ip: %q is not IPv4", pw, rp.SrcIP)
		}
		if p.DstIP, err = netip.ParseAddr(rp.DstIP); err != nil || !p.DstIP.Is4() {
			return nil, fmt.Errorf("%s.dst_ip: %q is not IPv4", pw, rp.DstIP)
		}
		sp.Paths = append(sp.Paths, p)
	}
	return sp, nil
}
