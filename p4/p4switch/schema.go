package p4switch

import "github.com/plait/plait/p4"

// The objects of plait.p4 that the Go pipeline implements, by the names p4c gives them.
// Binding a P4Info (bind.go) maps each to its P4Runtime ID; the pipeline itself only
// uses these indices.

const (
	matchExact = iota
	matchLPM
)

type keySpec struct {
	name string
	bits int
	kind int
}

type paramSpec struct {
	name string
	bits int
}

type actionSpec struct {
	name   string
	params []paramSpec
}

type tableSpec struct {
	name    string
	keys    []keySpec
	actions []int
	def     int // default action (no parameters)
	size    int
	lpm     int // index of the LPM key, -1 if none
}

type arraySpec struct {
	name string
	size int
	bits int // registers only
}

const (
	actNoAction = iota
	actDrop
	actForward
	actSendToCPU
	actIPv4Forward
	actSplit
	actSetPath
	actEncap
	actStampTelemetry
	numActions
)

var actionSpecs = [numActions]actionSpec{
	actNoAction:       {"NoAction", nil},
	actDrop:           {"PlaitIngress.drop", nil},
	actForward:        {"PlaitIngress.forward", []paramSpec{{"port", 9}}},
	actSendToCPU:      {"PlaitIngress.send_to_cpu", nil},
	actIPv4Forward:    {"PlaitIngress.ipv4_forward", []paramSpec{{"dst_mac", 48}, {"port", 9}}},
	actSplit:          {"PlaitIngress.split", []paramSpec{{"tunnel_id", 16}, {"tunnel_index", 6}, {"gen", 1}}},
	actSetPath:        {"PlaitIngress.set_path", []paramSpec{{"path_id", 8}}},
	actEncap:          {"PlaitIngress.encap", []paramSpec{{"src_mac", 48}, {"dst_mac", 48}, {"src_ip", 32}, {"dst_ip", 32}, {"port", 9}}},
	actStampTelemetry: {"PlaitEgress.stamp_telemetry", nil},
}

const (
	maxKeys   = 3
	maxParams = 5

	maxTunnels = p4.MaxTunnels
	maxPaths   = p4.MaxPaths
	splitSlots = p4.SplitSlots
	numPorts   = p4.Ports

	// dropPort is v1model's egress_spec after mark_to_drop.
	dropPort = 511
	// DefaultCPUPort is plait.p4's CPU_PORT unless it is compiled with -DCPU_PORT=N.
	DefaultCPUPort = p4.CPUPort
)

const (
	tblPortFwd = iota
	tblIPv4LPM
	tblTunnelSplit
	tblSplitSlots
	tblPathEncap
	tblPortTelemetry
	numTables
)

var tableSpecs = [numTables]tableSpec{
	tblPortFwd: {
		name: "PlaitIngress.port_fwd", keys: []keySpec{{"standard_metadata.ingress_port", 9, matchExact}},
		actions: []int{actForward, actDrop, actSendToCPU}, def: actDrop, size: numPorts, lpm: -1,
	},
	tblIPv4LPM: {
		name: "PlaitIngress.ipv4_lpm", keys: []keySpec{{"hdr.ipv4.dst_addr", 32, matchLPM}},
		actions: []int{actIPv4Forward, actDrop, actSendToCPU, actNoAction}, def: actNoAction, size: 1024, lpm: 0,
	},
	tblTunnelSplit: {
		name:    "PlaitIngress.tunnel_split",
		keys:    []keySpec{{"standard_metadata.ingress_port", 9, matchExact}, {"hdr.ipv4.dst_addr", 32, matchLPM}},
		actions: []int{actSplit, actNoAction}, def: actNoAction, size: maxTunnels, lpm: 1,
	},
	tblSplitSlots: {
		name:    "PlaitIngress.split_slots",
		keys:    []keySpec{{"meta.tunnel_index", 6, matchExact}, {"meta.gen", 1, matchExact}, {"meta.slot", 8, matchExact}},
		actions: []int{actSetPath, actDrop}, def: actDrop, size: maxTunnels * 2 * splitSlots, lpm: -1,
	},
	tblPathEncap: {
		name: "PlaitIngress.path_encap", keys: []keySpec{{"meta.tunnel_index", 6, matchExact}, {"meta.path_id", 8, matchExact}},
		actions: []int{actEncap, actDrop}, def: actDrop, size: maxTunnels * maxPaths, lpm: -1,
	},
	tblPortTelemetry: {
		name: "PlaitEgress.port_telemetry", keys: []keySpec{{"standard_metadata.egress_port", 9, matchExact}},
		actions: []int{actStampTelemetry, actNoAction}, def: actStampTelemetry, size: numPorts, lpm: -1,
	},
}

const (
	ctrPortRx = iota
	ctrPath
	ctrPortTx
	numCounters
)

var counterSpecs = [numCounters]arraySpec{
	ctrPortRx: {name: "PlaitIngress.port_rx_counter", size: numPorts},
	ctrPath:   {name: "PlaitEgress.path_counter", size: maxTunnels * maxPaths},
	ctrPortTx: {name: "PlaitEgress.port_tx_counter", size: numPorts},
}

const (
	regSplitCursor = iota
	regTunnelSeq
	regPathSeq
	numRegisters
)

var registerSpecs = [numRegisters]arraySpec{
	regSplitCursor: {name: "PlaitIngress.split_cursor", size: maxTunnels, bits: 32},
	regTunnelSeq:   {name: "PlaitIngress.tunnel_seq", size: maxTunnels, bits: 32},
	regPathSeq:     {name: "PlaitIngress.path_seq", size: maxTunnels * maxPaths, bits: 32},
}

// Controller headers: field order as in headers.p4.
var (
	packetInFields  = []paramSpec{{"ingress_port", 9}, {"_pad", 7}}
	packetOutFields = []paramSpec{{"egress_port", 9}, {"_pad", 7}}
)
