// Package datapath loads Plait's eBPF programs (sender.bpf.c on TC egress of a tunnel
// device, receiver.bpf.c on XDP of each path interface), attaches and pins them, and reads
// and writes their maps with the layouts bpf2go generates from the C structs (gen.go).
// receiver_test.go is over 600 lines because the receiver's tests share one reference
// model of its verdicts and RFC 4737 counters (reference, classify), written apart from
// the C program. Docs: docs/datapath.md.
package datapath
