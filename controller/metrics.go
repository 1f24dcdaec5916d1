package controller

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// DefaultMetrics is where /metrics is served unless told otherwise: loopback only.
const DefaultMetrics = "127.0.0.1:9469"

// Describe and Collect make the controller a Prometheus collector: every scrape reads the
// current estimates, so there is no second copy of the state to keep in step.
var (
	pathLabels = []string{"tunnel", "from", "to", "path"}
	descs      = map[string]*prometheus.Desc{
		"capacity": prometheus.NewDesc("plait_path_capacity_bps", "Estimated capacity of a path, bit/s on the wire.", pathLabels, nil),
		"owd":      prometheus.NewDesc("plait_path_owd_seconds", "Estimated base one-way delay of a path.", pathLabels, nil),
		"queue":    prometheus.NewDesc("plait_path_queue_seconds", "Queueing delay on a path now.", pathLabels, nil),
		"loss":     prometheus.NewDesc("plait_path_loss_ratio", "Fraction of a path's packets lost.", pathLabels, nil),
		"weight":   prometheus.NewDesc("plait_path_weight", "Share of the tunnel's packets the split gives a path.", pathLabels, nil),
		"up":       prometheus.NewDesc("plait_path_up", "1 when the path delivers packets.", pathLabels, nil),
		"rx":       prometheus.NewDesc("plait_path_rx_bps", "Delivery rate of a path, bit/s on the wire.", pathLabels, nil),
		"goodput":  prometheus.NewDesc("plait_direction_rx_bps", "Delivery rate of a tunnel direction over all paths.", pathLabels[:3], nil),
		"reorder":  prometheus.NewDesc("plait_direction_reordered_ratio", "Fraction of a direction's packets that arrived reordered.", pathLabels[:3], nil),
		"signals":  prometheus.NewDesc("plait_direction_congestion_signals_total", "Early congestion signals a direction's bulk flow was given, by the controller or the sending agent's trigger.", pathLabels[:3], nil),
		"agent":    prometheus.NewDesc("plait_agent_connected", "1 when the controller is connected to the agent.", []string{"agent"}, nil),
		"switch":   prometheus.NewDesc("plait_switch_primary", "1 when the controller is primary on the switch and has programmed it.", []string{"switch"}, nil),
		"program":  prometheus.NewDesc("plait_switch_programmed_total", "Times the switch was (re)programmed.", []string{"switch"}, nil),
		"lost":     prometheus.NewDesc("plait_switch_primary_lost_total", "Times another P4Runtime client took the switch from the controller.", []string{"switch"}, nil),
		"pushes":   prometheus.NewDesc("plait_switch_pipeline_pushes_total", "Pipeline configs pushed to the switch (a switch that kept its state gets none).", []string{"switch"}, nil),
		"writes":   prometheus.NewDesc("plait_switch_reconcile_write_rpcs_total", "Write RPCs reprogramming the switch took.", []string{"switch"}, nil),
		"updates":  prometheus.NewDesc("plait_switch_reconcile_updates_total", "Entries reprogramming the switch inserted, modified or deleted.", []string{"switch", "type"}, nil),
	}
)

func (c *Controller) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range descs {
		ch <- d
	}
}

func (c *Controller) Collect(ch chan<- prometheus.Metric) {
	gauge := func(name string, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(descs[name], prometheus.GaugeValue, finite(v), labels...)
	}
	c.mu.Lock()
	for _, d := range c.dirs {
		v := d.view()
		dl := []string{fmt.Sprint(d.tunnel.ID), d.from, d.to}
		gauge("goodput", v.GoodputBps, dl...)
		gauge("reorder", v.Reordered, dl...)
		ch <- prometheus.MustNewConstMetric(descs["signals"], prometheus.CounterValue, float64(d.opt.signals), dl...)
		for _, p := range v.Paths {
			l := append(append([]string(nil), dl...), p.Name)
			gauge("capacity", p.CapacityBps, l...)
			gauge("owd", p.OwdUs/1e6, l...)
			gauge("queue", p.QueueUs/1e6, l...)
			gauge("loss", p.Loss, l...)
			gauge("weight", p.Weight, l...)
			gauge("up", b2f(p.Up), l...)
			gauge("rx", p.RxBps, l...)
		}
	}
	c.mu.Unlock()
	for name, a := range c.agents {
		gauge("agent", b2f(a.status().Connected), name)
	}
	for name, s := range c.switches {
		st := s.status()
		gauge("switch", b2f(st.Primary), name)
		counter := func(d string, v uint64, labels ...string) {
			ch <- prometheus.MustNewConstMetric(descs[d], prometheus.CounterValue, float64(v), append([]string{name}, labels...)...)
		}
		counter("program", st.Programmed)
		counter("lost", st.PrimaryLost)
		counter("pushes", st.PipelinePushes)
		counter("writes", st.WriteRpcs)
		counter("updates", st.Inserts, "insert")
		counter("updates", st.Modifies, "modify")
		counter("updates", st.Deletes, "delete")
	}
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// ServeMetrics serves /metrics on addr until ctx ends.
func ServeMetrics(ctx context.Context, c *Controller, addr string) error {
	reg := prometheus.NewRegistry()
	if err := reg.Register(c); err != nil {
		return err
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	lis, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("serve metrics on %s: %w", addr, err)
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() {
		<-ctx.Done()
		srv.Close()
	}()
	if err := srv.Serve(lis); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
