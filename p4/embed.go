// Package p4 holds Plait's P4 program (plait.p4, the switch pipeline) and embeds its
// checked-in P4Info, so the switch and the controller resolve names without reading files
// at run time. Docs: docs/switch.md; p4/README.md is a guide to the folder.
package p4

import _ "embed"

// P4InfoText is build/plait.p4info.txtpb, the P4Info of plait.p4 in protobuf text format.
//
//go:embed build/plait.p4info.txtpb
var P4InfoText []byte

// plait.p4's limits (its #defines), for Go code that must agree with the program: the
// embedded switch's tables and registers, and the controller's slot tables.
// tests/wireformat checks them against plait.p4 and the datapath's C and Go definitions.
const (
	MaxTunnels = 64  // MAX_TUNNELS: split state slots (tunnel_index) and path_counter rows
	MaxPaths   = 8   // MAX_PATHS: paths of a tunnel, path_counter columns
	SplitSlots = 256 // SPLIT_SLOTS: slot table entries per tunnel and generation
	Ports      = 512 // PORTS: bit<9> port numbers, the per-port tables and counters
	CPUPort    = 255 // CPU_PORT unless plait.p4 is compiled with -DCPU_PORT=N
)
