package controller

import (
	"context"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// /metrics over real HTTP: the agents' connection state and each direction's gauges and
// congestion-signal counter, labelled by tunnel and ends.
func TestMetrics(t *testing.T) {
	n, err := ParseNetwork([]byte("agents: {h1: /nonexistent/h1.sock, h2: /nonexistent/h2.sock}\ntunnels:\n  - {id: 1, hosts: [h1, h2]}\n"))
	if err != nil {
		t.Fatal(err)
	}
	c, err := New(n)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range c.dirs {
		if d.from == "h1" {
			d.opt.signals = 2
		}
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := lis.Addr().String()
	lis.Close()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- ServeMetrics(ctx, c, addr) }()
	t.Cleanup(func() { cancel(); <-done })

	var body string
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		resp, err := http.Get("http://" + addr + "/metrics")
		if err == nil {
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			body = string(b)
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("GET /metrics: %v", err)
		}
	}
	for _, want := range []string{
		`plait_agent_connected{agent="h1"} 0`,
		`plait_direction_congestion_signals_total{from="h1",to="h2",tunnel="1"} 2`,
		`plait_direction_congestion_signals_total{from="h2",to="h1",tunnel="1"} 0`,
		`plait_direction_rx_bps{from="h2",to="h1",tunnel="1"} 0`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %s:\n%s", want, body)
		}
	}
}
