package controller_test

import (
	"context"
	"testing"
	"time"

	"github.com/plait/plait/agent"
	pb "github.com/plait/plait/api/plait/v1"
	"github.com/plait/plait/controller"
	"github.com/plait/plait/internal/labnet"
	"github.com/plait/plait/internal/sockrpc"
)

// pathUp polls an agent until path's state is up, and returns how long that took.
// linkLead is how far ahead a test schedules a link change whose effect it times: room
// for the commands that schedule it to start and run on a loaded machine.
const linkLead = 1500 * time.Millisecond

func pathUp(t testing.TB, ag pb.AgentClient, path string, up bool, limit time.Duration) time.Duration {
	t.Helper()
	start := time.Now()
	for {
		l, err := ag.ListTunnels(context.Background(), &pb.Empty{})
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range l.Tunnels[0].Paths {
			if p.Config.Name == path && p.Up == up && (up || p.Weight == 0) {
				return time.Since(start)
			}
		}
		if time.Since(start) > limit {
			t.Fatalf("path %s not up=%v within %v: %v", path, up, limit, l.Tunnels[0].Paths)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// dialAgents dials h1's and h2's agents, in that order, for the rest of the test.
func dialAgents(t testing.TB, lab *labnet.Lab) []pb.AgentClient {
	t.Helper()
	var ags []pb.AgentClient
	for _, sock := range []string{lab.Sock1, lab.Sock2} {
		ag, conn, err := agent.Dial(sock, sockrpc.TLS{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { conn.Close() })
		ags = append(ags, ag)
	}
	return ags
}

// agentsAlone builds A2 with the controller's estimates in place, kills the controller,
// dials both agents and starts a 10 s flow h1 -> h2 that has run 3 s (it started at
// start): the agents steer alone from here. wait returns the flow's longest stall past
// a time once it ends. The tunnel resequences and repairs, as the lab runs auto: without,
// TCP takes A2's 90 ms of skew for loss (60-270 retransmissions in 10 s) and stalls on
// its own, a backed-off timeout at a time, which is not what these tests judge.
func agentsAlone(t *testing.T) (lab *labnet.Lab, ags []pb.AgentClient, start time.Time, wait func(since time.Time) time.Duration) {
	t.Helper()
	if bin == "" {
		t.Skip("needs root")
	}
	lab = labnet.New(t, bin, a2, labnet.Options{Telemetry: true, Resequence: true, Repair: true})
	lab.StartController("auto", nil)
	lab.WaitEstimates(10 * time.Second)
	lab.KillController()
	ags = dialAgents(t, lab)
	start = time.Now()
	wait = flow(t, lab, 10)
	time.Sleep(3 * time.Second)
	return lab, ags, start, wait
}

// A path fails while the controller is down: the agents take it out of their splits
// themselves within 300 ms and put it back when it works again; a flow through the
// tunnel never stalls for a second; the controller, when back, keeps what they did.
func TestPathFailsWhileControllerIsDown(t *testing.T) {
	lab, ags, start, wait := agentsAlone(t)

	// Path c (the fastest) fails both ways at a set time, which starts the clock.
	down := time.Now().Add(linkLead)
	lab.SetLinkAt(3, true, down, "--down")
	for _, ag := range ags {
		pathUp(t, ag, "c", false, linkLead+time.Second)
	}
	tookOut := time.Since(down)

	// The controller comes back while the path is still dead: it keeps it out.
	stop := lab.StartController("auto", nil)
	defer stop()
	ctl, conn, err := controller.Dial(lab.CtlSock, sockrpc.TLS{})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	time.Sleep(time.Second)
	for _, ag := range ags {
		pathUp(t, ag, "c", false, 0)
	}
	for _, d := range mustPaths(t, ctl).Directions {
		if p := d.Paths[2]; p.Name != "c" || p.Up || p.Weight != 0 {
			t.Errorf("controller back: %s->%s path %s up=%v weight %.2f, want c down with no share", d.From, d.To, p.Name, p.Up, p.Weight)
		}
	}
	back := time.Now()
	lab.SetLink(3, true, "--up")
	for _, ag := range ags {
		pathUp(t, ag, "c", true, 2*time.Second)
	}
	putBack := time.Since(back)
	stall := wait(down)
	t.Logf("path c out of both splits %v after it failed (%.1f s into the flow), back in both %v after it recovered (controller running); longest stall from the fault on %v", tookOut, down.Sub(start).Seconds(), putBack, stall)
	if tookOut > 300*time.Millisecond {
		t.Errorf("the dead path was taken out after %v, want within 300 ms", tookOut)
	}
	if stall > maxStall {
		t.Errorf("the flow stalled for %v", stall)
	}
}

func mustPaths(t *testing.T, ctl pb.ControllerClient) *pb.PathsResponse {
	t.Helper()
	p, err := ctl.Paths(context.Background(), &pb.PathsRequest{TunnelId: 1})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// A path fails one way (towards h2) while the controller is down: h2 hears nothing on
// it, h1 hears h2 on it as before. h1, the sender into the dead direction, takes it out
// of its split within 300 ms, told by h2's liveness report; h2 keeps it, as its own
// direction works; a flow h1 -> h2 never stalls for a second; the path goes back into
// h1's split once it works again.
func TestOneWayFailureReachesTheSender(t *testing.T) {
	lab, ags, start, wait := agentsAlone(t)

	down := time.Now().Add(linkLead)
	lab.SetLinkAt(3, false, down, "--down") // towards h2 only
	pathUp(t, ags[0], "c", false, linkLead+time.Second)
	tookOut := time.Since(down)
	// h2, which hears nothing on c, may take it out of its own split until h1's
	// reports say h1 hears it; then it keeps it.
	h2back := pathUp(t, ags[1], "c", true, time.Second)
	time.Sleep(500 * time.Millisecond)
	pathUp(t, ags[1], "c", true, 0)

	back := time.Now()
	lab.SetLink(3, false, "--up")
	pathUp(t, ags[0], "c", true, 2*time.Second)
	putBack := time.Since(back)
	stall := wait(down)
	t.Logf("c out of h1's split %v after it failed towards h2 (%.1f s into the flow), back %v after it recovered; in h2's split %v after h1 took it out, and kept; longest stall from the fault on %v", tookOut, down.Sub(start).Seconds(), putBack, h2back, stall)
	// The receiving end's 300 ms, and the report's trip back over the other direction's
	// paths, at most a2's longest one-way delay (100 ms).
	if tookOut > 400*time.Millisecond {
		t.Errorf("the sender took the dead path out after %v, want within 400 ms", tookOut)
	}
	if stall > maxStall {
		t.Errorf("the flow stalled for %v", stall)
	}
}
