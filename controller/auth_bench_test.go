package controller_test

import (
	"testing"
	"time"

	"github.com/plait/plait/internal/labnet"
)

// BenchmarkAuthGoodput runs one TCP flow over the A2 lab under the controller (auto)
// with every packet tagged and checked (the default), then with authentication off, in
// one run: what per-packet authentication costs a flow. The second reports the ratio.
func BenchmarkAuthGoodput(b *testing.B) {
	if bin == "" {
		b.Skip("needs root")
	}
	var withAuth float64
	for _, auth := range []bool{true, false} {
		name := map[bool]string{true: "auth", false: "noauth"}[auth]
		b.Run(name, func(b *testing.B) {
			for b.Loop() {
				lab := labnet.New(b, bin, a2q, labnet.Options{Telemetry: true, NoAuth: !auth})
				stop := lab.StartController("auto", nil)
				lab.WaitEstimates(10 * time.Second)
				g, retr := lab.Goodput(b, "10.99.0.2", benchSeconds, benchOmit)
				stop()
				b.ReportMetric(g/1e6, "Mbit/s")
				b.Logf("%s %6.2f Mbit/s, %d retransmissions", name, g/1e6, retr)
				if auth {
					withAuth = g
				} else if withAuth > 0 {
					b.ReportMetric(withAuth/g, "auth/noauth")
				}
			}
		})
	}
}
