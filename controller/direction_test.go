package controller

import (
	"math"
	"testing"
	"time"

	pb "github.com/plait/plait/api/plait/v1"
)

// In flight: the sender's next path_seq, moved on by its rate to when the receiver
// read its counters, less the receiver's highest; across the wrap of the 32-bit sequence.
func TestInFlight(t *testing.T) {
	d := &direction{
		tx: &pb.TunnelStats{TimeUnixNano: t0.UnixNano(), Paths: []*pb.PathStats{{
			TxPackets: 1000, TxBytes: 1500_000, NextPathSeq: 5, TxBps: 2.4e6, // 200 packets a second
		}}},
		rx: &pb.TunnelStats{TimeUnixNano: t0.Add(50 * time.Millisecond).UnixNano(), Paths: []*pb.PathStats{{RxPackets: 900, MaxPathSeq: math.MaxUint32 - 1}}},
	}
	// 5 - (2^32 - 2) - 1 = 6 packets, and 10 sent since the sender's report.
	if got, want := d.inFlight(0), 16*1500.0; math.Abs(got-want) > 1e-6 {
		t.Fatalf("in flight %.0f bytes, want %.0f", got, want)
	}
	d.rx.Paths[0].MaxPathSeq = 1 << 30
	if got := d.inFlight(0); !math.IsNaN(got) {
		t.Fatalf("in flight %.0f bytes between counters 2^30 apart, want NaN", got)
	}
	d.rx.Paths[0].RxPackets = 0
	if got := d.inFlight(0); !math.IsNaN(got) {
		t.Fatalf("in flight %.0f bytes before the receiver saw the path, want NaN", got)
	}
}
