package controller

import (
	"context"
	"testing"
	"time"
)

// BenchmarkReconnect measures, with the embedded switch over gRPC on loopback, what
// (re)programming a split switch costs: a fresh switch (pipeline and 517 entries), a
// controller reconnecting to a switch that kept its state, and a split switch that
// restarted (from its gRPC server coming back to the controller's split in place).
func BenchmarkReconnect(b *testing.B) {
	for range b.N {
		ls := startSwitch(b, "127.0.0.1:0", 2)
		sc, stop := runConn(b, splitSwitch(ls.addr))
		st := sc.status()
		b.ReportMetric(st.LastReconcileMs, "fresh-ms")
		b.ReportMetric(float64(st.WriteRpcs), "fresh-writes")
		b.ReportMetric(float64(st.Inserts), "fresh-entries")
		if err := sc.setSplit(context.Background(), sc.cfg.Splits[0], []float64{0.25, 0.75}); err != nil {
			b.Fatal(err)
		}
		stop()

		start := time.Now()
		sc, _ = runConn(b, splitSwitch(ls.addr))
		took := time.Since(start)
		st = sc.status()
		b.ReportMetric(float64(took.Microseconds())/1e3, "reconnect-ms")
		b.ReportMetric(float64(st.WriteRpcs), "reconnect-writes")
		b.ReportMetric(float64(st.PipelinePushes), "reconnect-pushes")
		b.ReportMetric(float64(st.Deletes), "reconnect-deletes")
		if err := sc.setSplit(context.Background(), sc.cfg.Splits[0], []float64{0.5, 0.5}); err != nil {
			b.Fatal(err)
		}

		before := sc.status()
		ls.stop()
		ls = startSwitch(b, ls.addr, 2)
		restored := waitFor(b, 2*time.Second, "split restored", func() bool { return sc.status().Programmed > before.Programmed },
			func() string { return sc.status().LastError })
		b.ReportMetric(float64(restored.Microseconds())/1e3, "restart-restore-ms")
		b.ReportMetric(float64(sc.status().WriteRpcs-before.WriteRpcs), "restart-writes")
		if got := ls.rig.spread(b, 256); got[2] != 128 || got[3] != 128 {
			b.Fatalf("restarted switch sent %v, want the split it had (128 each)", got)
		}
	}
}
