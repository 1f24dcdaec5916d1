package agent

import (
	"context"
	"strings"
	"testing"

	pb "github.com/plait/plait/api/plait/v1"
)

// A tunnel whose --device names an interface that exists and is not a tunnel device the
// agent made (here a path interface) is refused, and the interface is left as it was.
func TestDeviceNamingAnotherInterfaceIsRefused(t *testing.T) {
	p := newPair(t, 3)
	before := p.h1.Run("ip", "-o", "addr", "show", "dev", "eth2")
	c := tunnelConfig("1", "2", 1)
	c.Device = "eth2"
	_, err := run(t, p.h1, func() (*pb.Tunnel, error) { return p.a1.Configure(context.Background(), c) })
	if err == nil || !strings.Contains(err.Error(), "not a Plait tunnel device") {
		t.Fatalf("tunnel on device eth2 (a path interface): %v, want a refusal naming it", err)
	}
	if after := p.h1.Run("ip", "-o", "addr", "show", "dev", "eth2"); after != before {
		t.Fatalf("refused tunnel changed eth2:\nbefore %s\nafter  %s", before, after)
	}
	// A tunnel device the agent made is taken over again, as after a restart.
	p.configure(t)
	if _, err := run(t, p.h1, func() (*pb.Tunnel, error) { return p.a1.Configure(context.Background(), tunnelConfig("1", "2", 3)) }); err != nil {
		t.Fatalf("reconfiguring on its own device plait0: %v", err)
	}
}
