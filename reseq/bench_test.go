package reseq_test

import (
	"context"
	"encoding/binary"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/plait/plait/agent"
	pb "github.com/plait/plait/api/plait/v1"
	"github.com/plait/plait/internal/labnet"
	"github.com/plait/plait/internal/sockrpc"
	"github.com/plait/plait/reseq"
)

// BenchmarkBuffer is the resequencing logic alone, per packet: TCP flows (one, or four
// taking turns) striped 1:1 over two paths whose skew is 16 packets, so that half the
// packets wait behind a hole and are copied in and out; with four flows, the other
// flows' packets behind a hole pass it.
func BenchmarkBuffer(b *testing.B) {
	for _, flows := range []int{1, 4} {
		b.Run(fmt.Sprintf("flows=%d", flows), func(b *testing.B) { buffer(b, flows) })
	}
}

func buffer(b *testing.B, flows int) {
	const packets, skew, mss = 1 << 20, 16, 1448
	frame := make([]byte, 14+20+20+mss)
	ip := frame[14:]
	ip[0], ip[9] = 0x45, 6
	binary.BigEndian.PutUint16(ip[2:], uint16(len(ip)))
	ip[20+12], ip[20+13] = 5<<4, 0x10
	var released int
	for b.Loop() {
		buf := reseq.New(reseq.MaxHold, func([]byte) { released++ })
		buf.SetPaths(0b11)
		start := time.Now()
		for i := range packets {
			// Path 0 carries the even seqs on time, path 1 the odd ones skew packets late.
			seq, path := uint32(i), uint8(0)
			if i%2 == 1 {
				seq, path = uint32(i-skew), 1
			}
			binary.BigEndian.PutUint16(ip[20:], uint16(int(seq)%flows)) // source port: the flow
			binary.BigEndian.PutUint32(ip[20+4:], seq/uint32(flows)*mss)
			now := int64(i) * 1000
			buf.Push(frame, seq, path, now)
			buf.Expire(now)
		}
		b.ReportMetric(float64(time.Since(start).Nanoseconds())/packets, "ns/pkt")
		b.ReportMetric(float64(buf.C.Bound.Load()+buf.C.Lost.Load()), "given-up")
		b.ReportMetric(float64(buf.C.Ahead.Load())/packets, "ahead/pkt")
	}
}

// BenchmarkResequencerA2 runs one cubic flow over A2's paths without their loss, the
// controller steering (auto), with resequencing off and on in alternate rounds, and
// reports the goodput of each (medians) side by side, and the resequencer's time per
// packet in that traffic (its loop: reading, ordering, writing back, system calls
// included).
func BenchmarkResequencerA2(b *testing.B) {
	if bin == "" {
		b.Skip("needs root")
	}
	// A2 (topo/scenarios/a2.yaml) without the 0.1 % loss on b.
	a2 := []labnet.Path{{Name: "a", Rate: "5mbit", Delay: "100ms", Queue: 100}, {Name: "b", Rate: "2mbit", Delay: "10ms", Queue: 100}, {Name: "c", Rate: "7mbit", Delay: "50ms", Queue: 100}}
	const rounds, seconds, omit = 2, 15, 2
	for b.Loop() {
		lab := labnet.New(b, bin, a2, labnet.Options{Telemetry: true})
		stop := lab.StartController("auto", nil)
		lab.WaitEstimates(10 * time.Second)
		h2, conn, err := agent.Dial(lab.Sock2, sockrpc.TLS{})
		if err != nil {
			b.Fatal(err)
		}
		r := alternate(b, lab, rounds, seconds, omit, lab.SetResequence)
		st, err := h2.GetStats(context.Background(), &pb.StatsRequest{})
		if err != nil {
			b.Fatal(err)
		}
		q := st.Tunnels[0].Resequencer
		packets := q.InOrder + q.Bound + q.Lost + q.Skipped + q.Late
		conn.Close()
		stop()
		r.report(b)
		b.ReportMetric(float64(q.BusyNs)/float64(max(packets, 1)), "reseq-ns/pkt")
		b.Logf("off %v, on %v Mbit/s; resequencer %v", mbits(r.off), mbits(r.on), q)
	}
}

// onOff is goodput (bit/s) and retransmissions of rounds with a mechanism off and on.
type onOff struct {
	off, on         []float64
	retrOff, retrOn int
}

// alternate runs rounds of one flow each with set(false), then set(true), so that both
// see the same stretch of the machine's load.
func alternate(b *testing.B, lab *labnet.Lab, rounds, seconds, omit int, set func(bool)) onOff {
	var r onOff
	for range rounds {
		set(false)
		g, n := lab.Goodput(b, "10.99.0.2", seconds, omit)
		r.off, r.retrOff = append(r.off, g), r.retrOff+n
		set(true)
		g, n = lab.Goodput(b, "10.99.0.2", seconds, omit)
		r.on, r.retrOn = append(r.on, g), r.retrOn+n
	}
	return r
}

func (r onOff) report(b *testing.B) {
	rounds := float64(len(r.off))
	b.ReportMetric(median(r.off)/1e6, "off-Mbit/s")
	b.ReportMetric(median(r.on)/1e6, "on-Mbit/s")
	b.ReportMetric(median(r.on)/median(r.off), "on/off")
	b.ReportMetric(float64(r.retrOff)/rounds, "off-retrans/run")
	b.ReportMetric(float64(r.retrOn)/rounds, "on-retrans/run")
}

func median(v []float64) float64 {
	s := slices.Clone(v)
	slices.Sort(s)
	return s[len(s)/2]
}

func mbits(v []float64) []float64 {
	out := make([]float64, len(v))
	for i, x := range v {
		out[i] = float64(int(x/1e4)) / 100
	}
	return out
}

// BenchmarkRepairA2 runs one cubic flow over A2's paths without their loss, the
// controller steering (auto) and the receiver resequencing, with repair off and on in
// alternate rounds, and reports the goodput of each (medians) side by side, and what
// repair cost a packet in that traffic: the sending agent's tap thread per packet kept
// (system calls included), and how many packets were asked for and resent (on loss-free
// paths, only those the paths' own queues dropped).
func BenchmarkRepairA2(b *testing.B) {
	if bin == "" {
		b.Skip("needs root")
	}
	a2 := []labnet.Path{{Name: "a", Rate: "5mbit", Delay: "100ms", Queue: 100}, {Name: "b", Rate: "2mbit", Delay: "10ms", Queue: 100}, {Name: "c", Rate: "7mbit", Delay: "50ms", Queue: 100}}
	const rounds, seconds, omit = 3, 15, 2
	for b.Loop() {
		lab := labnet.New(b, bin, a2, labnet.Options{Telemetry: true, Resequence: true})
		stop := lab.StartController("auto", nil)
		lab.WaitEstimates(10 * time.Second)
		r := alternate(b, lab, rounds, seconds, omit, lab.SetRepair)
		var rep [2]*pb.RepairStats
		for i, sock := range []string{lab.Sock1, lab.Sock2} {
			h, conn, err := agent.Dial(sock, sockrpc.TLS{})
			if err != nil {
				b.Fatal(err)
			}
			st, err := h.GetStats(context.Background(), &pb.StatsRequest{})
			conn.Close()
			if err != nil {
				b.Fatal(err)
			}
			rep[i] = st.Tunnels[0].Repair
		}
		stop()
		r.report(b)
		b.ReportMetric(float64(rep[0].TapBusyNs)/float64(max(rep[0].Kept, 1)), "tap-ns/pkt")
		b.ReportMetric(float64(rep[0].Resent)/rounds, "resent/run")
		b.Logf("off %v, on %v Mbit/s; sender h1 %v; receiver h2 %v", mbits(r.off), mbits(r.on), rep[0], rep[1])
	}
}
