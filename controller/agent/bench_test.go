package agent

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/plait/plait/ebpf/datapath"
)

// iperfGoodput runs one iperf3 TCP flow from h1 to addr and returns the receiver's goodput.
func iperfGoodput(b *testing.B, p *pair, addr string, seconds int) float64 {
	b.Helper()
	p.h2.Start("iperf3", "-s", "-1")
	time.Sleep(200 * time.Millisecond)
	out := p.h1.Run("iperf3", "-c", addr, "-t", itoa(seconds), "-O", "1", "-J", "-C", "cubic")
	var r struct {
		End struct {
			SumReceived struct {
				BitsPerSecond float64 `json:"bits_per_second"`
			} `json:"sum_received"`
		} `json:"end"`
	}
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		b.Fatalf("iperf3 output: %v\n%s", err, out)
	}
	return r.End.SumReceived.BitsPerSecond
}

func itoa(n int) string { b, _ := json.Marshal(n); return string(b) }

// BenchmarkStripedGoodput compares one TCP flow striped over three unshaped veth paths
// with the same flow over one unstriped veth, offloads set the same way on both (no
// segmentation or checksum offload, one-segment skbs), in one run; and reports what
// each program costs per packet in that real traffic.
func BenchmarkStripedGoodput(b *testing.B) {
	for b.Loop() {
		p := newPair(b, 3)
		p.configure(b, 1, 1, 1)
		// The unstriped baseline gets the tunnel device's GSO limit too.
		p.h1.Run("ip", "link", "set", "eth1", "gso_max_segs", "1")
		p.h2.Run("ip", "link", "set", "eth1", "gso_max_segs", "1")
		single := iperfGoodput(b, p, "10.0.1.2", 10)

		stats, err := datapath.EnableRunStats()
		if err != nil {
			b.Fatal(err)
		}
		striped := iperfGoodput(b, p, "10.99.0.2", 10)
		snd, _, err := p.a1.dp.RunStats()
		if err != nil {
			b.Fatal(err)
		}
		_, rcv, err := p.a2.dp.RunStats()
		if err != nil {
			b.Fatal(err)
		}
		stats.Close()
		b.ReportMetric(single/1e9, "single-Gbit/s")
		b.ReportMetric(striped/1e9, "striped-Gbit/s")
		b.ReportMetric(striped/single, "striped/single")
		b.ReportMetric(float64(snd.PerRun().Nanoseconds()), "sender-ns/pkt")
		b.ReportMetric(float64(rcv.PerRun().Nanoseconds()), "receiver-ns/pkt")
	}
}
