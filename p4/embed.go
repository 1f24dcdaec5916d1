// Package p4 holds Plait's P4 program (plait.p4, the switch pipeline) and embeds its
// checked-in P4Info, so the switch and the controller resolve names without reading files
// at run time. Docs: docs/switch.md; p4/README.md is a guide to the folder.
package p4

import _ "embed"

// P4InfoText is build/plait.p4info.txtpb, the P4Info of plait.p4 in protobuf text format.
//
//go:embed build/plait.p4info.txtpb
var P4InfoText []byte
