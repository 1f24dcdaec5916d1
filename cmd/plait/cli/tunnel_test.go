package cli

import (
	"bytes"
	"strings"
	"testing"

	"github.com/spf13/cobra"

	pb "github.com/plait/plait/api/plait/v1"
)

// The tunnel listing says when the controller has set a signal trigger, and what it
// waits for, and says nothing of one that is not set.
func TestTunnelListingShowsTheSignalTrigger(t *testing.T) {
	list := func(g *pb.SignalTrigger) string {
		var out bytes.Buffer
		cmd := &cobra.Command{}
		cmd.SetOut(&out)
		tun := &pb.Tunnel{Config: &pb.TunnelConfig{Id: 1, Device: "plait0", Mode: pb.Mode_MODE_WRR, SignalTrigger: g}}
		if err := printTunnels(cmd, []*pb.Tunnel{tun}); err != nil {
			t.Fatal(err)
		}
		return out.String()
	}
	got := list(&pb.SignalTrigger{RateBps: 7e6, QueueUs: 107e3, StandingUs: 200e3, WindowMs: 2400})
	if want := "signal trigger: once within 2400 ms of a flow's start, at a queue of 107.00ms at 7.00Mbit/s that stood 200.00ms"; !strings.Contains(got, want) {
		t.Errorf("listing:\n%s\nwant a line %q", got, want)
	}
	if got := list(nil); strings.Contains(got, "trigger") {
		t.Errorf("listing without a trigger mentions one:\n%s", got)
	}
}
