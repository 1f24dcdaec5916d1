package controller_test

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/plait/plait/agent"
	pb "github.com/plait/plait/api/plait/v1"
	"github.com/plait/plait/controller"
	"github.com/plait/plait/internal/labnet"
	"github.com/plait/plait/internal/sockrpc"
)

// a2q is the A2 lab with the scenario's 100-packet queues.
var a2q = []labnet.Path{{Name: "a", Rate: "5mbit", Delay: "100ms", Queue: 100}, {Name: "b", Rate: "2mbit", Delay: "10ms", Queue: 100}, {Name: "c", Rate: "7mbit", Delay: "50ms", Queue: 100}}

var benchSeconds, benchOmit = envInt("PLAIT_BENCH_SECONDS", 20), envInt("PLAIT_BENCH_OMIT", 2)

func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil {
		return v
	}
	return def
}

// BenchmarkControllerGoodput runs one TCP flow over the A2 lab with the controller
// (auto), with plain rr, with wrr at the paths' capacities, and over the ideal link (one
// emulated link with the summed rate and the smallest delay), in one run.
func BenchmarkControllerGoodput(b *testing.B) {
	if bin == "" {
		b.Skip("needs root")
	}
	for b.Loop() {
		lab := labnet.New(b, bin, a2q, labnet.Options{Ideal: true, Telemetry: true})
		results := map[string]float64{}
		for _, cfg := range []struct{ name, mode, addr string }{
			{"ideal", "rr", "10.0.0.2"}, {"rr", "rr", "10.99.0.2"}, {"wrr", "wrr", "10.99.0.2"}, {"auto", "auto", "10.99.0.2"},
		} {
			var w []float64
			if cfg.mode == "wrr" {
				w = []float64{5, 2, 7}
			}
			stop := lab.StartController(cfg.mode, w)
			lab.WaitEstimates(10 * time.Second)
			g, retr := lab.Goodput(b, cfg.addr, benchSeconds, benchOmit)
			stop()
			results[cfg.name] = g
			b.ReportMetric(g/1e6, cfg.name+"-Mbit/s")
			b.Logf("%-5s %6.2f Mbit/s, %d retransmissions", cfg.name, g/1e6, retr)
		}
		for _, name := range []string{"auto", "rr", "wrr"} {
			b.ReportMetric(results[name]/results["ideal"], name+"/ideal")
		}
	}
}

// BenchmarkControllerReaction measures how long the controller takes to get the weights
// right after a path's capacity changes (median of 5 changes, and the slowest of the two
// increases: the split then under-feeds the path, so nothing queues to measure it), and
// how long a reweight from the CLI takes to reach the datapath. PLAIT_BENCH_RESEQ=1 runs
// it with both ends resequencing, where the striped flow fills the paths more often.
func BenchmarkControllerReaction(b *testing.B) {
	if bin == "" {
		b.Skip("needs root")
	}
	for b.Loop() {
		lab := labnet.New(b, bin, a2q, labnet.Options{Telemetry: true, Resequence: os.Getenv("PLAIT_BENCH_RESEQ") != ""})
		stop := lab.StartController("auto", nil)
		ctl, conn, err := controller.Dial(lab.CtlSock, sockrpc.TLS{})
		if err != nil {
			b.Fatal(err)
		}
		lab.H2.Start("iperf3", "-s", "-1")
		time.Sleep(300 * time.Millisecond)
		lab.H1.Start("iperf3", "-c", "10.99.0.2", "-t", "60", "-C", "cubic")
		time.Sleep(4 * time.Second)

		// Path c alternates between 7 and 3.5 Mbit/s.
		var took []time.Duration
		var up time.Duration // the slowest increase
		for i := 0; i < 5; i++ {
			rate, want := "3500kbit", []float64{5, 2, 3.5}
			if i%2 == 1 {
				rate, want = "7mbit", []float64{5, 2, 7}
			}
			lab.SetLink(3, true, "--rate", rate)
			start := time.Now()
			var got []float64
			var trace []string
			for time.Since(start) < 8*time.Second {
				d := forward(b, ctl)
				if got = weights(d); within(got, want, 0.10) {
					break
				}
				if len(trace) == 0 || time.Since(start) > time.Duration(len(trace))*500*time.Millisecond {
					line := fmt.Sprintf("%4.1fs %5.2f Mbit/s", time.Since(start).Seconds(), d.GoodputBps/1e6)
					for _, p := range d.Paths {
						line += fmt.Sprintf(" | %s w%.2f c%.2f q%.0f tx%.2f rx%.2f", p.Name, p.Weight, p.CapacityBps/1e6, p.QueueUs/1e3, p.TxBps/1e6, p.RxBps/1e6)
					}
					trace = append(trace, line)
				}
				time.Sleep(20 * time.Millisecond)
			}
			took = append(took, time.Since(start))
			if i%2 == 1 {
				up = max(up, time.Since(start))
			}
			if !within(got, want, 0.10) {
				b.Logf("path c at %s: weights still %.3f after 8 s, want the ratio of %v:\n%s", rate, got, want, strings.Join(trace, "\n"))
			} else if took[i] > time.Second {
				b.Logf("path c at %s: weights %.3f after %v:\n%s", rate, got, took[i], strings.Join(trace, "\n"))
			}
			time.Sleep(2 * time.Second)
		}
		b.Logf("convergence after each capacity change, down and up in turn: %v", took)
		slices.Sort(took)
		b.ReportMetric(took[2].Seconds()*1e3, "converge-ms(median)")
		b.ReportMetric(up.Seconds()*1e3, "converge-up-ms(max)")

		// From the operator's command to the datapath: plait weights set, then the agent's
		// view of the tunnel shows the new weights.
		ag, aconn, err := agent.Dial(lab.Sock1, sockrpc.TLS{})
		if err != nil {
			b.Fatal(err)
		}
		var lat []time.Duration
		for i := 0; i < 5; i++ {
			w := []string{"1", "2", "3"}
			if i%2 == 1 {
				w = []string{"3", "2", "1"}
			}
			start := time.Now()
			lab.Plait(append([]string{"weights", "set"}, w...)...)
			for time.Since(start) < 5*time.Second {
				l, err := ag.ListTunnels(context.Background(), &pb.Empty{})
				if err == nil && l.Tunnels[0].Config.Mode == pb.Mode_MODE_WRR && fmt.Sprint(l.Tunnels[0].Config.Weights[0]) == w[0] {
					break
				}
				time.Sleep(time.Millisecond)
			}
			lat = append(lat, time.Since(start))
		}
		slices.Sort(lat)
		b.ReportMetric(float64(lat[2].Microseconds())/1e3, "cli-to-datapath-ms(median)")
		b.Logf("CLI to datapath: %v (includes starting the plait process)", lat)
		lab.Plait("weights", "auto")
		aconn.Close()
		conn.Close()
		stop()
	}
}
