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

	"github.com/plait/plait/split"
	"github.com/plait/plait/topo/scenario"
	"github.com/plait/plait/wire"
)

// Network is what the controller controls: the agents at the tunnels' ends, the P4
// switches on the paths, and the tunnels. The lab writes one; an operator can too.
//
//	interval: 100ms
//	agents:   {h1: /run/plait/h1.sock, h2: /run/plait/h2.sock}
//	switches:
//	  s1:
//	    address: 127.0.0.1:9601
//	    forward: {1: 2, 2: 1}        # port_fwd: ingress port -> egress port
//	tunnels:
//	  - id: 1
//	    hosts: [h1, h2]             # both agents have tunnel 1 configured
//	    mode: auto                  # auto (default), rr, wrr or edpf
type Network struct {
	Interval time.Duration
	Agents   map[string]string // name -> socket
	Switches map[string]*Switch
	Tunnels  []*Tunnel
}

// Switch is a P4Runtime target running plait.p4.
type Switch struct {
	Name         string
	Address      string
	DeviceID     uint64
	ElectionID   uint64
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
}

type rawNetwork struct {
	Interval string                `yaml:"interval"`
	Agents   map[string]string     `yaml:"agents"`
	Switches map[string]*rawSwitch `yaml:"switches"`
	Tunnels  []*rawTunnel          `yaml:"tunnels"`
}

type rawSwitch struct {
	Address      string            `yaml:"address"`
	DeviceID     uint64            `yaml:"device_id"`
	ElectionID   uint64            `yaml:"election_id"`
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
	n := &Network{Interval: 100 * time.Millisecond, Agents: raw.Agents, Switches: map[string]*Switch{}}
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
	for name, sock := range raw.Agents {
		if sock == "" {
			return nil, fmt.Errorf("agents.%s: give the agent's socket path", name)
		}
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
		s, err := rs.validate(name, n)
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
	return t, nil
}

func (rs *rawSwitch) validate(name string, n *Network) (*Switch, error) {
	where := "switches." + name
	if _, _, err := net.SplitHostPort(rs.Address); err != nil {
		return nil, fmt.Errorf("%s.address: %q is not host:port", where, rs.Address)
	}
	s := &Switch{Name: name, Address: rs.Address, DeviceID: rs.DeviceID, ElectionID: rs.ElectionID,
		P4Info: rs.P4Info, DeviceConfig: rs.DeviceConfig, Forward: rs.Forward}
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
