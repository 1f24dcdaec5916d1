// Package wireformat proves that the definitions of the Plait wire format agree (it holds
// tests only): the Go layout (wire.Layout) is the reference; the P4 headers
// (p4/include/headers.p4, read by p4/p4src) and the C structs and limits as compiled into
// the datapath (ebpf/include/plait.h, TestCLayout) are checked field by field, and the Go
// encoder against the layout byte by byte. Docs: docs/wire-format.md.
package wireformat
