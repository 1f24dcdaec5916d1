package controller_test

import (
	"testing"
	"time"

	"github.com/plait/plait/internal/labnet"
)

// BenchmarkFailover measures on the A2 lab, with a TCP flow running, how long a path
// that fails both ways keeps its share (link down to weight 0 in both agents) and how
// long a recovered one waits for it (link up to a share again), with the controller
// running and with the controller down (the agents alone), side by side, and a path that
// fails towards h2 only, with the agents alone (h1 out, back in). Each change is
// scheduled linkLead ahead and the clock starts at its time.
func BenchmarkFailover(b *testing.B) {
	if bin == "" {
		b.Skip("needs root")
	}
	for range b.N {
		lab := labnet.New(b, bin, a2, labnet.Options{Telemetry: true})
		lab.StartController("auto", nil)
		lab.WaitEstimates(10 * time.Second)
		ags := dialAgents(b, lab)
		wait := flow(b, lab, 15)
		time.Sleep(2 * time.Second)
		cycle := func(label string) {
			start := time.Now().Add(linkLead)
			lab.SetLinkAt(3, true, start, "--down")
			for _, ag := range ags {
				pathUp(b, ag, "c", false, linkLead+2*time.Second)
			}
			b.ReportMetric(float64(time.Since(start).Microseconds())/1e3, label+"-down-ms")
			time.Sleep(time.Second)
			start = time.Now().Add(linkLead)
			lab.SetLinkAt(3, true, start, "--up")
			for _, ag := range ags {
				pathUp(b, ag, "c", true, linkLead+3*time.Second)
			}
			b.ReportMetric(float64(time.Since(start).Microseconds())/1e3, label+"-up-ms")
			time.Sleep(time.Second)
		}
		cycle("controller")
		lab.KillController()
		cycle("agents")
		// One way (towards h2): the sender, h1, learns it from h2's liveness report.
		start := time.Now().Add(linkLead)
		lab.SetLinkAt(3, false, start, "--down")
		pathUp(b, ags[0], "c", false, linkLead+2*time.Second)
		b.ReportMetric(float64(time.Since(start).Microseconds())/1e3, "agents-oneway-down-ms")
		time.Sleep(time.Second)
		start = time.Now().Add(linkLead)
		lab.SetLinkAt(3, false, start, "--up")
		pathUp(b, ags[0], "c", true, linkLead+3*time.Second)
		b.ReportMetric(float64(time.Since(start).Microseconds())/1e3, "agents-oneway-up-ms")
		b.ReportMetric(float64(wait(time.Time{}).Microseconds())/1e3, "stall-ms")
	}
}
