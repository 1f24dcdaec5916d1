package controller

import (
	"encoding/csv"
	"fmt"
	"io"
	"math"
	"time"
)

// traceColumns heads the estimator trace: one row per path each time a receiving agent
// reports, what the agents measured beside what the estimator made of it. The 500 ms
// statistics stream shows estimates; what moved one (a busy stretch, packet pairs, a
// delivery floor) shows only here, report by report.
var traceColumns = []string{
	"t_s", "tunnel", "from", "to", "path",
	"rx_packets", "lost", "rx_bps", "tx_bps", "owd_min_us", "owd_mean_us", "switch_queue_us", "in_flight_bytes",
	"pair_bps", "pair_samples",
	"alive", "base_us", "standing_us", "queue_us", "busy", "capacity_bps", "capacity_known", "loss", "late", "jitter_us", "spread_us",
}

// tracer writes the estimator trace as tab-separated values, for pandas, R or awk.
type tracer struct {
	w     *csv.Writer
	start time.Time
	err   error // what stopped the trace; the controller goes on
}

func newTracer(w io.Writer, start time.Time) *tracer {
	cw := csv.NewWriter(w)
	cw.Comma = '\t'
	t := &tracer{w: cw, start: start}
	t.row(traceColumns)
	return t
}

// row writes one line; a write that fails stays failed, and flush reports it.
func (t *tracer) row(cols []string) { t.w.Write(cols) }

// path records one path's observation and the estimate it led to.
func (t *tracer) path(d *direction, i int, o Observation, e *pathEstimator) {
	est := &e.est
	t.row([]string{
		fmt.Sprintf("%.3f", o.At.Sub(t.start).Seconds()), fmt.Sprint(d.tunnel.ID), d.from, d.to, d.paths[i],
		fmt.Sprint(est.RxPackets), fmt.Sprint(o.Lost), traceNum(o.RxBps), traceNum(o.TxBps), traceNum(o.OwdMin), traceNum(o.OwdMean), traceNum(o.Queue), traceNum(o.InFlight),
		traceNum(o.DispBps), fmt.Sprint(o.DispN),
		fmt.Sprint(est.Alive), traceNum(est.Base), traceNum(standingQueue(o, est)), traceNum(est.Queue), fmt.Sprint(est.Busy), traceNum(est.Capacity),
		fmt.Sprint(est.CapacityKnown), fmt.Sprintf("%.6f", est.Loss), fmt.Sprintf("%.6f", est.Late), traceNum(o.Jitter), traceNum(est.Spread),
	})
}

// flush ends a report's rows (a trace read while the controller runs is whole reports)
// and returns the error that stopped the trace, once.
func (t *tracer) flush() error {
	if t.err != nil {
		return nil
	}
	t.w.Flush()
	t.err = t.w.Error()
	return t.err
}

// traceNum writes a measurement to the microsecond or bit; NaN (not measured) as "nan".
func traceNum(v float64) string {
	if math.IsNaN(v) {
		return "nan"
	}
	return fmt.Sprintf("%.0f", v)
}
