package agent

import (
	"encoding/json"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/plait/plait/ebpf/datapath"
)

// iperfGoodput runs one iperf3 TCP flow from h1 to addr and returns the receiver's goodput
// and the sender's retransmissions.
func iperfGoodput(b *testing.B, p *pair, addr string, seconds int) (float64, int) {
	b.Helper()
	p.h2.Start("iperf3", "-s", "-1")
	time.Sleep(200 * time.Millisecond)
	return iperfResult(b, p.h1.Run("iperf3", "-c", addr, "-t", strconv.Itoa(seconds), "-O", "1", "-J", "-C", "cubic"))
}

// iperfResult reads an iperf3 client's JSON report: the receiver's goodput and the
// sender's retransmissions.
func iperfResult(t testing.TB, out string) (float64, int) {
	t.Helper()
	var r struct {
		End struct {
			SumSent struct {
				Retransmits int `json:"retransmits"`
			} `json:"sum_sent"`
			SumReceived struct {
				BitsPerSecond float64 `json:"bits_per_second"`
			} `json:"sum_received"`
		} `json:"end"`
	}
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("iperf3 output: %v\n%s", err, out)
	}
	return r.End.SumReceived.BitsPerSecond, r.End.SumSent.Retransmits
}

// BenchmarkStripedGoodput compares one TCP flow striped over three unshaped veth paths
// with the same flow over one unstriped veth, offloads set the same way on both (no
// segmentation or checksum offload, one-segment skbs), in one run; and reports what
// each program costs per packet in that real traffic. Single and striped flows alternate
// for five rounds and the medians are compared: on a small machine a flow's goodput
// varies by tens of percent from one run to the next.
func BenchmarkStripedGoodput(b *testing.B) {
	const rounds = 5
	for b.Loop() {
		p := newPair(b, 3)
		p.configure(b, 1, 1, 1)
		// The unstriped baseline gets the tunnel device's GSO limit too.
		p.h1.Run("ip", "link", "set", "eth1", "gso_max_segs", "1")
		p.h2.Run("ip", "link", "set", "eth1", "gso_max_segs", "1")

		stats, err := datapath.EnableRunStats()
		if err != nil {
			b.Fatal(err)
		}
		var single, striped []float64
		var singleRetx, stripedRetx int
		for range rounds {
			g, r := iperfGoodput(b, p, "10.0.1.2", 10)
			single, singleRetx = append(single, g), singleRetx+r
			g, r = iperfGoodput(b, p, "10.99.0.2", 10)
			striped, stripedRetx = append(striped, g), stripedRetx+r
		}
		snd, _, err := p.a1.dp.RunStats()
		if err != nil {
			b.Fatal(err)
		}
		_, rcv, err := p.a2.dp.RunStats()
		if err != nil {
			b.Fatal(err)
		}
		stats.Close()
		b.ReportMetric(median(single)/1e9, "single-Gbit/s")
		b.ReportMetric(median(striped)/1e9, "striped-Gbit/s")
		b.ReportMetric(median(striped)/median(single), "striped/single")
		b.ReportMetric(float64(singleRetx)/rounds, "single-retrans/run")
		b.ReportMetric(float64(stripedRetx)/rounds, "striped-retrans/run")
		b.ReportMetric(float64(snd.PerRun().Nanoseconds()), "sender-ns/pkt")
		b.ReportMetric(float64(rcv.PerRun().Nanoseconds()), "receiver-ns/pkt")
		b.Logf("single %s Gbit/s; striped %s Gbit/s", gbits(single), gbits(striped))
	}
}

func median(v []float64) float64 {
	s := slices.Clone(v)
	slices.Sort(s)
	return s[len(s)/2]
}

func gbits(v []float64) string {
	var parts []string
	for _, x := range v {
		parts = append(parts, strconv.FormatFloat(x/1e9, 'f', 2, 64))
	}
	return strings.Join(parts, " ")
}
