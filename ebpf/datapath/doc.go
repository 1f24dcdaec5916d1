// Package datapath loads Plait's eBPF programs (sender.bpf.c on TC egress of a tunnel
// device, receiver.bpf.c on XDP of each path interface), attaches and pins them, and reads
// and writes their maps with the layouts bpf2go generates from the C structs and enums
// (gen.go). Docs: docs/datapath.md; what the receiver checks: docs/security.md.
package datapath
