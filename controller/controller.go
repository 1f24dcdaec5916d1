// Package controller is the Plait controller (`plait controller`): it reads measurements
// from host agents and switches, estimates every path of each tunnel direction, chooses
// the split (path set, load mode, weights, ACK path, congestion signals) and writes it to
// the agents' eBPF maps and to P4 split tables over P4Runtime. It talks to agents only
// through their gRPC API. Docs: docs/controller.md, with a section per concern.
package controller

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc"

	pb "github.com/plait/plait/api/plait/v1"
	"github.com/plait/plait/internal/sockrpc"
	"github.com/plait/plait/model"
)

// Controller is the core the daemon, the tests and the lab embed.
type Controller struct {
	net   *Network
	opts  options
	start time.Time
	kick  chan struct{}

	mu       sync.Mutex
	agents   map[string]*agentConn
	switches map[string]*switchConn
	dirs     []*direction
	adopted  map[*direction]time.Time // directions holding the split they adopted, since (adopt.go)
	trace    *tracer                  // nil unless WithTrace
}

type options struct {
	log     *slog.Logger
	tcp     model.TCP
	metrics string
	trace   io.Writer
}

// Option configures a Controller.
type Option func(*options)

// WithLogger sets the logger.
func WithLogger(l *slog.Logger) Option { return func(o *options) { o.log = l } }

// WithMetricsAddress records where /metrics is served, for Status.
func WithMetricsAddress(addr string) Option { return func(o *options) { o.metrics = addr } }

// WithTrace writes the estimator trace (every path's observation and estimate at every
// report, tab-separated) to w.
func WithTrace(w io.Writer) Option { return func(o *options) { o.trace = w } }

// WithTCP tells the optimiser what the tunnels' flows are (congestion control, window);
// the model's defaults otherwise.
func WithTCP(t model.TCP) Option { return func(o *options) { o.tcp = t } }

// New builds a controller for a network; Run starts it.
func New(n *Network, opts ...Option) (*Controller, error) {
	o := options{log: slog.Default()}
	for _, f := range opts {
		f(&o)
	}
	c := &Controller{net: n, opts: o, start: time.Now(), kick: make(chan struct{}, 1),
		agents: map[string]*agentConn{}, switches: map[string]*switchConn{}, adopted: map[*direction]time.Time{}}
	if o.trace != nil {
		c.trace = newTracer(o.trace, c.start)
	}
	for name, a := range n.Agents {
		c.agents[name] = &agentConn{name: name, socket: a.Address, tls: a.TLS}
	}
	for name, s := range n.Switches {
		sc, err := newSwitchConn(s, c.kickNow)
		if err != nil {
			return nil, err
		}
		c.switches[name] = sc
	}
	for _, t := range n.Tunnels {
		for _, ends := range [][2]string{{t.Hosts[0], t.Hosts[1]}, {t.Hosts[1], t.Hosts[0]}} {
			d := newDirection(t, ends[0], ends[1], c.start)
			for _, sc := range c.switches {
				for _, sp := range sc.cfg.Splits {
					if sp.Tunnel == t.ID && sp.From == ends[0] {
						d.split = &splitTarget{sw: sc, split: sp}
						names := make([]string, len(sp.Paths))
						for i, p := range sp.Paths {
							names[i] = p.Name
						}
						d.setPaths(names, c.start)
					}
				}
			}
			c.dirs = append(c.dirs, d)
		}
	}
	return c, nil
}

func (c *Controller) kickNow() {
	select {
	case c.kick <- struct{}{}:
	default:
	}
}

// Run controls the network until ctx ends. The datapath keeps the last split it was
// given when the controller stops.
func (c *Controller) Run(ctx context.Context) error {
	var wg sync.WaitGroup
	for _, a := range c.agents {
		wg.Add(1)
		go func() { defer wg.Done(); c.runAgent(ctx, a) }()
	}
	for _, s := range c.switches {
		wg.Add(1)
		go func() { defer wg.Done(); s.run(ctx, c.opts.log) }()
	}
	tick := time.NewTicker(c.net.Interval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			wg.Wait()
			return nil
		case <-tick.C:
			c.step(ctx, true)
		case <-c.kick:
			c.step(ctx, false)
		}
	}
}

// step decides every direction's split (full: at the interval; otherwise only to act on
// liveness or reconnections at once) and writes what changed.
func (c *Controller) step(ctx context.Context, full bool) {
	type job struct {
		d    *direction
		want target
		old  target
		all  bool
	}
	var jobs []job
	c.mu.Lock()
	now := time.Now()
	wants := map[*direction]target{}
	if full {
		for _, d := range c.dirs {
			if len(d.ests) > 0 {
				wants[d] = d.decide(now, c.opts.tcp)
			}
		}
		c.routeACKs(wants)
	}
	for _, d := range c.dirs {
		if len(d.ests) == 0 || !c.senderReady(d) {
			continue
		}
		if !d.pushed && d.split != nil {
			if shares := d.split.sw.liveShares(d.split.split); shares != nil {
				c.adoptSplit(d, shares, now)
			}
		}
		want := d.current
		if w, ok := wants[d]; ok && !c.holding(d, now) {
			want = w
		} else if !d.pushed {
			want = d.decide(now, c.opts.tcp)
		} else {
			// Between intervals only liveness changes: take dead paths out now.
			want = livenessOnly(d)
		}
		if want.up == nil || (d.pushed && want.equal(d.current)) {
			continue
		}
		jobs = append(jobs, job{d, want, d.current, !d.pushed})
	}
	c.mu.Unlock()

	for _, j := range jobs {
		err := c.write(ctx, j.d, j.old, j.want, j.all)
		c.mu.Lock()
		if err != nil {
			if j.d.writeErr != err.Error() {
				c.opts.log.Warn("write split", "direction", j.d.name(), "err", err)
			}
			j.d.pushed, j.d.writeErr = false, err.Error()
		} else {
			// A congestion signal is an event, not part of what the sender holds.
			j.want.signal = false
			if used := usedPaths(j.d, j.want); used != usedPaths(j.d, j.old) && (used != "" || j.d.opt.reason != "") {
				// The operator's record of why a flow moved; weights alone move every interval.
				c.opts.log.Info("paths in use", "direction", j.d.name(), "paths", used, "reason", j.d.opt.reason)
			}
			j.d.current, j.d.pushed, j.d.writeErr = j.want, true, ""
		}
		c.mu.Unlock()
	}
}

// routeACKs gives each direction under automatic control whose opposite direction
// stripes by wrr a path for its ACK-sized packets (see ackPath); the rest keep to the
// direction's own split, so a flow each way gets its data striped and its ACKs on one
// path. It does not wait for load: the ACKs of a starting flow need it the most, as slow
// start has TCP's reordering tolerance at its smallest. A split switch tells no ACK from
// data, so there the whole direction takes that path while it is light (edpf).
func (c *Controller) routeACKs(wants map[*direction]target) {
	for d, w := range wants {
		d.ackReason = ""
		if d.override != "auto" || w.up == nil || (d.split != nil && w.mode != pb.Mode_MODE_EDPF) {
			continue
		}
		for _, o := range c.dirs {
			ow, ok := wants[o]
			if !ok || o.tunnel != d.tunnel || o.from != d.to || ow.mode != pb.Mode_MODE_WRR {
				continue
			}
			j, why := ackPath(o.ests, ow.shares(), d.ests, o.resequenced())
			if j < 0 {
				continue
			}
			d.ackReason = why
			o.opt.ackBase = d.ests[j].est.Base
			if d.split != nil {
				w = cloneTarget(w)
				w.mode, w.est, w.weights = pb.Mode_MODE_WRR, nil, make([]float64, len(d.paths))
				w.weights[j] = 1
			}
			w.ackPath = d.paths[j]
			wants[d] = w
		}
	}
}

// usedPaths names the paths that carry a share of t's packets.
func usedPaths(d *direction, t target) string {
	var names []string
	for i, w := range t.shares() {
		if w > 0 && i < len(d.paths) {
			names = append(names, d.paths[i])
		}
	}
	return strings.Join(names, ",")
}

func (c *Controller) senderReady(d *direction) bool {
	if d.split != nil {
		return d.split.sw.ready()
	}
	a := c.agents[d.from]
	return a != nil && a.client() != nil
}

func cloneTarget(t target) target {
	c := t
	c.up = append([]bool(nil), t.up...)
	c.weights = append([]float64(nil), t.weights...)
	c.est = append([]*pb.PathEstimate(nil), t.est...)
	return c
}

// write brings the direction's sender from old to want: an agent's eBPF maps or a split
// switch's slot table.
func (c *Controller) write(ctx context.Context, d *direction, old, want target, all bool) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	if d.split != nil {
		return d.split.sw.setSplit(ctx, d.split.split, want.shares())
	}
	a := c.agents[d.from]
	cl := a.client()
	if cl == nil {
		return fmt.Errorf("agent %s is not connected", d.from)
	}
	id := d.tunnel.ID
	for i, up := range want.up {
		if all || i >= len(old.up) || old.up[i] != up {
			if _, err := cl.SetPathState(ctx, &pb.SetPathStateRequest{TunnelId: id, Path: d.paths[i], Up: up}); err != nil {
				return fmt.Errorf("set path %s: %w", d.paths[i], err)
			}
		}
	}
	// Inputs first, then the mode that reads them.
	if want.est != nil {
		if _, err := cl.SetPathEstimates(ctx, &pb.SetPathEstimatesRequest{TunnelId: id, Estimates: want.est}); err != nil {
			return fmt.Errorf("set estimates: %w", err)
		}
	}
	if want.mode == pb.Mode_MODE_WRR && want.weights != nil && (all || !equalWeights(old.weights, want.weights)) {
		if _, err := cl.SetWeights(ctx, &pb.SetWeightsRequest{TunnelId: id, Weights: want.weights}); err != nil {
			return fmt.Errorf("set weights: %w", err)
		}
	}
	if all || old.mode != want.mode {
		if _, err := cl.SetMode(ctx, &pb.SetModeRequest{TunnelId: id, Mode: want.mode}); err != nil {
			return fmt.Errorf("set mode: %w", err)
		}
	}
	if all || old.ackPath != want.ackPath {
		if _, err := cl.SetAckPath(ctx, &pb.SetAckPathRequest{TunnelId: id, Path: want.ackPath}); err != nil {
			return fmt.Errorf("set ACK path: %w", err)
		}
	}
	if all || !sameTrigger(old.trigger, want.trigger) {
		g := want.trigger
		if g == nil {
			g = &pb.SignalTrigger{}
		}
		if _, err := cl.SetSignalTrigger(ctx, &pb.SetSignalTriggerRequest{TunnelId: id, Trigger: g}); err != nil {
			return fmt.Errorf("set signal trigger: %w", err)
		}
	}
	if want.kept > 0 && (all || old.kept != want.kept) {
		if _, err := cl.SetWindowKept(ctx, &pb.SetWindowKeptRequest{TunnelId: id, WindowKept: want.kept}); err != nil {
			return fmt.Errorf("set window kept: %w", err)
		}
	}
	if want.signal {
		if _, err := cl.Signal(ctx, &pb.TunnelRef{Id: id}); err != nil {
			return fmt.Errorf("congestion signal: %w", err)
		}
	}
	return nil
}

func equalWeights(a, b []float64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if !near(a[i], b[i], 0.01) {
			return false
		}
	}
	return true
}

// agentConn is the controller's link to one agent: a statistics stream, re-established
// whenever the agent or the connection goes away.
type agentConn struct {
	name, socket string
	tls          sockrpc.TLS

	mu         sync.Mutex
	cl         pb.AgentClient
	conn       *grpc.ClientConn
	lastErr    string
	reconnects uint64
}

func (a *agentConn) client() pb.AgentClient {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.cl
}

func (a *agentConn) status() *pb.AgentStatus {
	a.mu.Lock()
	defer a.mu.Unlock()
	return &pb.AgentStatus{Name: a.name, Socket: a.socket, Connected: a.cl != nil, LastError: a.lastErr, Reconnects: a.reconnects}
}

// statsEvery is how often agents report: twice per interval, so that a dead path is
// noticed well within the 300 ms it may keep its weight.
func (c *Controller) statsEvery() time.Duration {
	return max(25*time.Millisecond, min(50*time.Millisecond, c.net.Interval/2))
}

func (c *Controller) runAgent(ctx context.Context, a *agentConn) {
	backoff := 100 * time.Millisecond
	for ctx.Err() == nil {
		err := c.followAgent(ctx, a)
		a.mu.Lock()
		if a.cl != nil {
			a.conn.Close()
			a.cl, a.conn = nil, nil
		}
		if err != nil && ctx.Err() == nil {
			a.lastErr = err.Error()
		}
		a.mu.Unlock()
		c.mu.Lock()
		for _, d := range c.dirs {
			if d.from == a.name {
				d.pushed = false // re-program after the agent comes back
			}
		}
		c.mu.Unlock()
		select {
		case <-ctx.Done():
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 2*time.Second)
	}
}

// followAgent connects, learns the agent's tunnels and consumes its statistics stream.
func (c *Controller) followAgent(ctx context.Context, a *agentConn) error {
	conn, err := sockrpc.Dial(a.socket, a.tls)
	if err != nil {
		return fmt.Errorf("agent %s: %w", a.name, err)
	}
	cl := pb.NewAgentClient(conn)
	list, err := cl.ListTunnels(ctx, &pb.Empty{})
	if err != nil {
		conn.Close()
		return fmt.Errorf("agent %s: %w", a.name, err)
	}
	// An agent that cannot take its keys is still steered; status says why.
	keysErr := ""
	if err := c.giveKeys(ctx, a.name, cl, list); err != nil {
		keysErr = fmt.Sprintf("agent %s: %v", a.name, err)
		c.opts.log.Warn("keys not given", "agent", a.name, "err", err)
	}
	stream, err := cl.WatchStats(ctx, &pb.StatsRequest{IntervalMs: uint32(c.statsEvery().Milliseconds())})
	if err != nil {
		conn.Close()
		return fmt.Errorf("agent %s: %w", a.name, err)
	}
	a.mu.Lock()
	a.cl, a.conn, a.lastErr = cl, conn, keysErr
	a.reconnects++
	a.mu.Unlock()

	now := time.Now()
	c.mu.Lock()
	for _, d := range c.dirs {
		if d.from != a.name || d.split != nil {
			continue
		}
		for _, t := range list.Tunnels {
			if t.Config.Id == d.tunnel.ID {
				names := make([]string, len(t.Paths))
				for i, p := range t.Paths {
					names[i] = p.Config.Name
				}
				d.setPaths(names, now)
				c.adoptAgent(d, t, now)
				// A path the agent took out while the controller was away stays out until
				// the estimates show it delivering again.
				for i, p := range t.Paths {
					if !p.Up && d.ests[i].est.RxPackets == 0 {
						d.ests[i].est.Alive = false
					}
				}
			}
		}
	}
	c.mu.Unlock()
	c.kickNow()

	for {
		st, err := stream.Recv()
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("agent %s: %w", a.name, err)
		}
		c.onStats(a.name, st)
	}
}

// onStats routes an agent's statistics: its sending side to the directions leaving it,
// its receiving side to the directions arriving at it.
func (c *Controller) onStats(agentName string, st *pb.Stats) {
	now := time.Now()
	changed := false
	c.mu.Lock()
	for _, ts := range st.Tunnels {
		for _, d := range c.dirs {
			if d.tunnel.ID != ts.TunnelId {
				continue
			}
			if d.from == agentName {
				d.tx = ts
			}
			if d.to == agentName {
				d.rx = ts
				changed = d.observe(now, c.trace) || changed
			}
		}
	}
	if c.trace != nil {
		if err := c.trace.flush(); err != nil {
			c.opts.log.Error("estimator trace stopped", "err", err)
		}
	}
	c.mu.Unlock()
	if changed {
		c.kickNow()
	}
}

// errNoDirection is returned for operator requests naming nothing the controller steers.
var errNoDirection = errors.New("no such tunnel direction")

// findDirection resolves an operator's (tunnel, from) pair; zero values pick the only
// tunnel and its first host.
func (c *Controller) findDirection(tunnel uint32, from string) (*direction, error) {
	var match []*direction
	for _, d := range c.dirs {
		if (tunnel == 0 || d.tunnel.ID == tunnel) && (from == "" || d.from == from) {
			match = append(match, d)
		}
	}
	if from == "" && len(match) == 2 && match[0].tunnel == match[1].tunnel {
		return match[0], nil
	}
	switch len(match) {
	case 0:
		return nil, fmt.Errorf("%w: tunnel %d from %q", errNoDirection, tunnel, from)
	case 1:
		return match[0], nil
	}
	return nil, fmt.Errorf("several tunnels match: give --tunnel (and --from)")
}

func finite(v float64) float64 {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return 0
	}
	return v
}
