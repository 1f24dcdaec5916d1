// Package p4test serves an embedded switch over P4Runtime on loopback for tests that
// drive it from the outside (docs/switch.md).
package p4test

import (
	"net"
	"testing"

	"google.golang.org/grpc"

	"github.com/plait/plait/p4/p4switch"
)

// MemPorts returns memory ports 1..n and the options that put them on a switch.
func MemPorts(n int) (map[uint16]*p4switch.MemPort, []p4switch.Option) {
	ports := map[uint16]*p4switch.MemPort{}
	var opts []p4switch.Option
	for i := 1; i <= n; i++ {
		mp := p4switch.NewMemPort("mem" + string(rune('0'+i)))
		ports[uint16(i)] = mp
		opts = append(opts, p4switch.WithPort(uint16(i), mp, p4switch.LinkParams{}))
	}
	return ports, opts
}

// Serve starts a switch built from opts and serves it over gRPC on a loopback port until
// the test ends; it returns the switch and its address.
func Serve(t testing.TB, opts ...p4switch.Option) (*p4switch.Switch, string) {
	t.Helper()
	sw, err := p4switch.New(opts...)
	if err != nil {
		t.Fatal(err)
	}
	if err := sw.Start(); err != nil {
		t.Fatal(err)
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		sw.Close()
		t.Fatal(err)
	}
	g := grpc.NewServer()
	sw.Register(g)
	go g.Serve(lis)
	t.Cleanup(func() {
		g.Stop()
		sw.Close()
	})
	return sw, lis.Addr().String()
}
