// Package agent is the Plait host agent (`plait agent`): it owns a host's tunnels, loads
// and attaches the eBPF datapath, keeps its maps in step with the configuration, turns the
// datapath's counters into per-path statistics, sends probes and probe trains on idle
// paths, gives slow start's congestion signal from its own trigger, and serves all of it
// over gRPC (api/plait/v1/agent.proto). agent_test.go is about 600 lines: one namespace
// test per behaviour over a host pair they all set up alike. Docs: docs/agent.md.
package agent

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/vishvananda/netlink"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	pb "github.com/plait/plait/api/plait/v1"
	"github.com/plait/plait/ebpf/datapath"
	"github.com/plait/plait/split"
)

// Agent is the core the daemon, the tests and the lab embed.
type Agent struct {
	opts options
	dp   *datapath.Datapath

	mu      sync.Mutex
	tunnels map[uint32]*tunnel   // by tunnel id
	reseqs  map[uint32]*reseqRun // by tunnel id, the tunnels that resequence
	rep     *repairs             // the tunnels that repair (repair.go)
	stats   *sampler
}

type options struct {
	pinDir         string
	stateFile      string
	sampleInterval time.Duration
	resolveTimeout time.Duration
	log            *slog.Logger
}

// Option configures an Agent.
type Option func(*options)

// WithPinDir sets where maps and links are pinned (default: per network namespace under
// /sys/fs/bpf/plait).
func WithPinDir(dir string) Option { return func(o *options) { o.pinDir = dir } }

// WithStateFile sets where the configuration is kept across restarts.
func WithStateFile(path string) Option { return func(o *options) { o.stateFile = path } }

// WithSampleInterval sets how often the datapath's counters are read (default 25 ms).
func WithSampleInterval(d time.Duration) Option { return func(o *options) { o.sampleInterval = d } }

// WithResolveTimeout bounds how long Configure waits for a path's next hop to resolve
// (default 300 ms); paths that take longer are resolved in the background.
func WithResolveTimeout(d time.Duration) Option { return func(o *options) { o.resolveTimeout = d } }

// WithLogger sets the logger.
func WithLogger(l *slog.Logger) Option { return func(o *options) { o.log = l } }

// DefaultDirs returns the pin directory and state file for the calling thread's network
// namespace, so that agents in different namespaces sharing /sys/fs/bpf never collide.
func DefaultDirs() (pinDir, stateFile string, err error) {
	fi, err := os.Stat("/proc/thread-self/ns/net")
	if err != nil {
		return "", "", fmt.Errorf("identify network namespace: %w", err)
	}
	id := fmt.Sprintf("netns-%d", inode(fi))
	return filepath.Join("/sys/fs/bpf/plait", id), filepath.Join("/run/plait", id, "state.json"), nil
}

// New loads the datapath (reusing pinned maps and links) and restores the saved
// configuration, so a restarted agent carries on where the last one stopped.
func New(opts ...Option) (*Agent, error) {
	o := options{sampleInterval: 25 * time.Millisecond, resolveTimeout: 300 * time.Millisecond, log: slog.Default()}
	for _, f := range opts {
		f(&o)
	}
	if o.pinDir == "" || o.stateFile == "" {
		pin, state, err := DefaultDirs()
		if err != nil {
			return nil, err
		}
		o.pinDir = cmpOr(o.pinDir, pin)
		o.stateFile = cmpOr(o.stateFile, state)
	}
	if os.Geteuid() != 0 {
		return nil, errors.New("the agent needs root (CAP_BPF and CAP_NET_ADMIN) to load eBPF and configure interfaces: run it with sudo")
	}
	if err := dropStale(o); err != nil {
		return nil, err
	}
	dp, err := datapath.Load(o.pinDir)
	if err != nil {
		return nil, fmt.Errorf("load the eBPF datapath: %w", err)
	}
	a := &Agent{opts: o, dp: dp, tunnels: map[uint32]*tunnel{}, reseqs: map[uint32]*reseqRun{}, rep: newRepairs()}
	a.stats = newSampler(a)
	if err := a.restore(); err != nil {
		dp.Close()
		return nil, err
	}
	return a, nil
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// Close releases the agent's handles. The datapath keeps running from its pins; the
// tunnels that resequence go back to direct delivery until an agent resumes them.
func (a *Agent) Close() error {
	a.mu.Lock()
	for id, t := range a.tunnels {
		a.stopResequencer(id, t.slot)
	}
	a.closeRepairs()
	a.mu.Unlock()
	return a.dp.Close()
}

// Run samples the datapath, probes idle paths, steps the signal triggers and resolves
// pending next hops until ctx ends. It must run on a thread in the agent's network
// namespace (the daemon's only one).
func (a *Agent) Run(ctx context.Context) {
	tick := time.NewTicker(a.opts.sampleInterval)
	defer tick.Stop()
	trig := time.NewTicker(triggerEvery)
	defer trig.Stop()
	triggers := map[uint32]*trigger{}
	lastResolve := time.Now()
	for {
		select {
		case <-ctx.Done():
			return
		case <-trig.C:
			a.stepTriggers(triggers)
		case <-tick.C:
			a.stats.sample()
			a.renewResequencers()
			a.tendTaps()
			if time.Since(lastResolve) >= resolveEvery {
				a.resolvePending()
				lastResolve = time.Now()
			}
		}
	}
}

const resolveEvery = 250 * time.Millisecond

// resolvePending retries the next hops of paths that could not be resolved yet and lets
// them into the split once they are.
func (a *Agent) resolvePending() {
	type job struct {
		id   uint32
		i    int
		p    path
		link string
	}
	var jobs []job
	a.mu.Lock()
	for id, t := range a.tunnels {
		for i, p := range t.paths {
			if p.hopMAC == nil {
				jobs = append(jobs, job{id, i, *p, p.cfg.Interface})
			}
		}
	}
	a.mu.Unlock()
	for _, j := range jobs {
		l, err := linkByName(j.link)
		if err != nil {
			continue
		}
		if j.p.resolve(l, 0); j.p.hopMAC == nil {
			continue
		}
		_, err = a.update(j.id, func(t *tunnel) error {
			if j.i < len(t.paths) && t.paths[j.i].cfg.Name == j.p.cfg.Name {
				t.paths[j.i].hopMAC, t.paths[j.i].pending = j.p.hopMAC, ""
			}
			return nil
		})
		if err == nil {
			a.opts.log.Info("next hop resolved", "tunnel", j.id, "path", j.p.cfg.Name, "mac", j.p.hopMAC.String())
		}
	}
}

// Configure creates or replaces a tunnel.
func (a *Agent) Configure(_ context.Context, req *pb.TunnelConfig) (*pb.Tunnel, error) {
	t, err := resolve(req, a.opts.resolveTimeout)
	if err != nil {
		return nil, err
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	old := a.tunnels[t.cfg.Id]
	for id, other := range a.tunnels {
		if id != t.cfg.Id && other.cfg.Device == t.cfg.Device {
			return nil, invalid("device %s already carries tunnel %d: give this tunnel its own device", t.cfg.Device, id)
		}
	}
	if err := a.checkPorts(t); err != nil {
		return nil, err
	}
	if old != nil {
		t.slot, t.gen = old.slot, old.gen
		// Reconfiguring keeps what operators and the controller set on paths that stay.
		for _, p := range t.paths {
			if _, op, err := old.pathByName(p.cfg.Name); err == nil {
				p.up, p.est = op.up, op.est
			}
		}
	} else if t.slot, err = a.freeSlot(); err != nil {
		return nil, err
	}
	if err := a.apply(t, old == nil); err != nil {
		return nil, err
	}
	a.tunnels[t.cfg.Id] = t
	if old != nil {
		a.detachUnused()
	}
	a.stats.forget(t.cfg.Id)
	return t.proto(), a.save()
}

func (a *Agent) checkPorts(t *tunnel) error {
	ports := map[uint32]bool{t.cfg.Port: true}
	for id, o := range a.tunnels {
		if id != t.cfg.Id {
			ports[o.cfg.Port] = true
		}
	}
	if len(ports) > 4 {
		return invalid("tunnels on this host would use %d different UDP ports; the receiver takes at most 4", len(ports))
	}
	return nil
}

func (a *Agent) freeSlot() (uint32, error) {
	used := map[uint32]bool{}
	for _, t := range a.tunnels {
		used[t.slot] = true
	}
	for s := uint32(0); s < datapath.MaxTunnels; s++ {
		if !used[s] {
			return s, nil
		}
	}
	return 0, status.Errorf(codes.ResourceExhausted, "all %d tunnel slots are in use: remove a tunnel first", datapath.MaxTunnels)
}

// apply brings the kernel in line with t: device, attachments, then the maps the programs
// read, the sender's configuration last so that it never points at a path not yet ready.
func (a *Agent) apply(t *tunnel, fresh bool) error {
	if t.cfg.ReceiveOnly {
		return a.applyReceiveOnly(t, fresh)
	}
	dev, peer, err := ensureTunnelDevice(t.cfg.Device, t.addr, t.remote, t.mtu)
	if err != nil {
		return status.Errorf(codes.FailedPrecondition, "%v", err)
	}
	t.devPeer, t.devMAC = uint32(peer.Attrs().Index), dev.Attrs().HardwareAddr
	if err := a.dp.AttachDevice(dev.Attrs().Index); err != nil {
		return status.Errorf(codes.FailedPrecondition, "tunnel device %s: %v", t.cfg.Device, err)
	}
	for _, p := range t.paths {
		if err := a.dp.AttachReceiver(p.ifindex); err != nil {
			return status.Errorf(codes.FailedPrecondition, "path %q: %v", p.cfg.Name, err)
		}
	}
	if fresh {
		// A tunnel that starts over numbers its packets from somewhere new: the peer's
		// receiver, which may remember the old numbers, then takes them after one packet
		// (a jump, held until the next confirms it) instead of refusing the numbers it
		// has seen as replays until the new ones pass them.
		if err := errors.Join(a.dp.ResetSender(t.slot, rand.Uint32()), a.dp.ResetReceiver(t.slot)); err != nil {
			return status.Errorf(codes.Internal, "%v", err)
		}
	}
	if err := a.dp.SetReceivePorts(a.ports(t)); err != nil {
		return status.Errorf(codes.Internal, "%v", err)
	}
	if err := a.dp.SetReceiver(t.receiver()); err != nil {
		return status.Errorf(codes.Internal, "%v", err)
	}
	if err := a.writeSender(t); err != nil {
		return err
	}
	if err := a.dp.AttachSender(dev.Attrs().Index, t.slot); err != nil {
		return status.Errorf(codes.FailedPrecondition, "tunnel device %s: %v", t.cfg.Device, err)
	}
	if err := a.resequence(t, uint32(dev.Attrs().Index)); err != nil {
		return err
	}
	return a.repair(t)
}

// applyReceiveOnly makes the host measure and untag a split switch's packets on its
// interface, which carries the tunnel address.
func (a *Agent) applyReceiveOnly(t *tunnel, fresh bool) error {
	l, err := linkByName(t.cfg.Device)
	if err != nil {
		return status.Errorf(codes.FailedPrecondition, "%v", err)
	}
	addr := &netlink.Addr{IPNet: &net.IPNet{IP: t.addr.Addr().AsSlice(), Mask: net.CIDRMask(t.addr.Bits(), 32)}}
	if err := netlink.AddrReplace(l, addr); err != nil {
		return status.Errorf(codes.FailedPrecondition, "add %s to %s: %v", t.addr, t.cfg.Device, err)
	}
	if err := a.dp.AttachReceiver(t.rxIfindex); err != nil {
		return status.Errorf(codes.FailedPrecondition, "%s: %v", t.cfg.Device, err)
	}
	if fresh {
		if err := a.dp.ResetReceiver(t.slot); err != nil {
			return status.Errorf(codes.Internal, "%v", err)
		}
	}
	if err := a.dp.SetReceivePorts(a.ports(t)); err != nil {
		return status.Errorf(codes.Internal, "%v", err)
	}
	if err := a.dp.SetReceiver(t.receiver()); err != nil {
		return status.Errorf(codes.Internal, "%v", err)
	}
	return nil
}

func (a *Agent) writeSender(t *tunnel) error {
	if err := a.dp.WriteSender(t.datapath()); err != nil {
		return status.Errorf(codes.InvalidArgument, "%v", err)
	}
	t.gen++
	return nil
}

func (a *Agent) ports(t *tunnel) []uint16 {
	set := map[uint16]bool{uint16(t.cfg.Port): true}
	for id, o := range a.tunnels {
		if id != t.cfg.Id {
			set[uint16(o.cfg.Port)] = true
		}
	}
	var ports []uint16
	for p := range set {
		ports = append(ports, p)
	}
	slices.Sort(ports)
	return ports
}

// detachUnused removes the receiver from interfaces no tunnel uses any more.
func (a *Agent) detachUnused() {
	inUse := map[int]bool{}
	for _, t := range a.tunnels {
		for _, p := range t.paths {
			inUse[p.ifindex] = true
		}
		if t.rxIfindex != 0 {
			inUse[t.rxIfindex] = true
		}
	}
	for _, ifindex := range a.savedReceivers() {
		if !inUse[ifindex] {
			if err := a.dp.Detach(datapath.HookReceiver, ifindex); err != nil {
				a.opts.log.Warn("detach receiver", "ifindex", ifindex, "err", err)
			}
		}
	}
}

// RemoveTunnel stops a tunnel: its device's traffic passes untouched and its packets are
// no longer accepted. The device itself is left for the operator.
func (a *Agent) RemoveTunnel(_ context.Context, ref *pb.TunnelRef) (*pb.Empty, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	t, err := a.tunnel(ref.Id)
	if err != nil {
		return nil, err
	}
	errs := []error{a.dp.RemoveSender(t.slot), a.dp.RemoveReceiver(uint16(t.cfg.Id))}
	if l, err := linkByName(t.cfg.Device); err == nil && !t.cfg.ReceiveOnly {
		errs = append(errs, a.dp.Detach(datapath.HookSender, l.Attrs().Index), a.dp.Detach(datapath.HookDevice, l.Attrs().Index))
	}
	a.stopResequencer(ref.Id, t.slot)
	a.forgetRepair(ref.Id)
	delete(a.tunnels, ref.Id)
	a.detachUnused()
	a.stats.forget(ref.Id)
	if err := errors.Join(errs...); err != nil {
		return nil, status.Errorf(codes.Internal, "remove tunnel %d: %v", ref.Id, err)
	}
	return &pb.Empty{}, a.save()
}

// ListTunnels describes every tunnel.
func (a *Agent) ListTunnels(context.Context, *pb.Empty) (*pb.ListTunnelsResponse, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	out := &pb.ListTunnelsResponse{}
	for _, id := range a.ids() {
		out.Tunnels = append(out.Tunnels, a.tunnels[id].proto())
	}
	return out, nil
}

func (a *Agent) ids() []uint32 {
	var ids []uint32
	for id := range a.tunnels {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
}

func (a *Agent) tunnel(id uint32) (*tunnel, error) {
	if t, ok := a.tunnels[id]; ok {
		return t, nil
	}
	if id == 0 && len(a.tunnels) == 1 {
		for _, t := range a.tunnels {
			return t, nil
		}
	}
	if id == 0 {
		return nil, status.Errorf(codes.InvalidArgument, "this host has %d tunnels: say which one", len(a.tunnels))
	}
	return nil, status.Errorf(codes.NotFound, "no tunnel %d on this host", id)
}

// update changes a tunnel through f, which must leave it valid or return an error; on
// error nothing changes, on success the datapath flips to the new configuration.
func (a *Agent) update(id uint32, f func(t *tunnel) error) (*pb.Tunnel, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	t, err := a.tunnel(id)
	if err != nil {
		return nil, err
	}
	if t.cfg.ReceiveOnly {
		return nil, status.Errorf(codes.FailedPrecondition, "tunnel %d is receive-only: its split is the switch's, set through the controller", t.cfg.Id)
	}
	next := t.clone()
	if err := f(next); err != nil {
		return nil, err
	}
	if err := a.writeSender(next); err != nil {
		return nil, err
	}
	a.tunnels[next.cfg.Id] = next
	return next.proto(), a.save()
}

func (t *tunnel) clone() *tunnel {
	c := *t
	c.cfg = proto.Clone(t.cfg).(*pb.TunnelConfig)
	c.paths = make([]*path, len(t.paths))
	for i, p := range t.paths {
		cp := *p
		cp.est = proto.Clone(p.est).(*pb.PathEstimate)
		c.paths[i] = &cp
	}
	return &c
}

// SetWeights sets the wrr weights, one per path.
func (a *Agent) SetWeights(_ context.Context, req *pb.SetWeightsRequest) (*pb.Tunnel, error) {
	return a.update(req.TunnelId, func(t *tunnel) error {
		if err := split.Check(req.Weights, len(t.paths)); err != nil {
			return invalid("%v", err)
		}
		t.cfg.Weights = slices.Clone(req.Weights)
		return nil
	})
}

// SetMode sets the scheduler.
func (a *Agent) SetMode(_ context.Context, req *pb.SetModeRequest) (*pb.Tunnel, error) {
	return a.update(req.TunnelId, func(t *tunnel) error {
		if _, ok := pb.Mode_name[int32(req.Mode)]; !ok || req.Mode == pb.Mode_MODE_UNSPECIFIED {
			return invalid("unknown mode %d: use rr, wrr or edpf", req.Mode)
		}
		if req.Mode == pb.Mode_MODE_EDPF && !slices.ContainsFunc(t.paths, func(p *path) bool { return p.up && p.est.RateBps > 0 }) {
			return status.Errorf(codes.FailedPrecondition, "edpf needs a rate estimate for at least one path that is up: set estimates first (or run the controller)")
		}
		t.cfg.Mode = req.Mode
		return nil
	})
}

// SetAckPath sets or clears the path that carries the tunnel's ACK-sized packets.
func (a *Agent) SetAckPath(_ context.Context, req *pb.SetAckPathRequest) (*pb.Tunnel, error) {
	return a.update(req.TunnelId, func(t *tunnel) error {
		if req.Path != "" {
			if _, _, err := t.pathByName(req.Path); err != nil {
				return err
			}
		}
		t.cfg.AckPath = req.Path
		return nil
	})
}

// SetPathState marks a path up or down; a path that is down gets no packets.
func (a *Agent) SetPathState(_ context.Context, req *pb.SetPathStateRequest) (*pb.Tunnel, error) {
	return a.update(req.TunnelId, func(t *tunnel) error {
		_, p, err := t.pathByName(req.Path)
		if err != nil {
			return err
		}
		p.up = req.Up
		return nil
	})
}

// Signal asks for one congestion signal more than the sender has given, so requests that
// come while one is pending, or from a restarted agent, ask for no more than one.
func (a *Agent) Signal(_ context.Context, req *pb.TunnelRef) (*pb.Tunnel, error) {
	return a.update(req.Id, a.askSignal)
}

func (a *Agent) askSignal(t *tunnel) error {
	c, err := a.dp.ReadSender(t.slot)
	if err != nil {
		return status.Errorf(codes.Internal, "%v", err)
	}
	t.signal = c.Signaled + 1
	return nil
}

// SetSignalTrigger sets or clears the tunnel's SignalTrigger.
func (a *Agent) SetSignalTrigger(_ context.Context, req *pb.SetSignalTriggerRequest) (*pb.Tunnel, error) {
	return a.update(req.TunnelId, func(t *tunnel) error {
		g, err := signalTrigger(req.Trigger)
		if err != nil {
			return err
		}
		t.cfg.SignalTrigger = g
		a.opts.log.Info("signal trigger", "tunnel", t.cfg.Id, "trigger", t.cfg.SignalTrigger)
		return nil
	})
}

// SetWindowKept sets how much of its window a flow of the tunnel keeps at a loss, which
// holds the waits for repairs to what the window cut they spare would cost.
func (a *Agent) SetWindowKept(_ context.Context, req *pb.SetWindowKeptRequest) (*pb.Tunnel, error) {
	return a.update(req.TunnelId, func(t *tunnel) error {
		v, err := windowKept(req.WindowKept)
		if err != nil {
			return err
		}
		if v != t.cfg.WindowKept {
			t.cfg.WindowKept = v
			a.opts.log.Info("window kept at a loss", "tunnel", t.cfg.Id, "beta", v)
		}
		return nil
	})
}

// SetPathEstimates feeds edpf each path's rate and one-way delay, and the probe trains
// each path's capacity.
func (a *Agent) SetPathEstimates(_ context.Context, req *pb.SetPathEstimatesRequest) (*pb.Tunnel, error) {
	return a.update(req.TunnelId, func(t *tunnel) error {
		if err := checkEstimates(req.Estimates, len(t.paths)); err != nil {
			return err
		}
		for i, p := range t.paths {
			p.est = proto.Clone(req.Estimates[i]).(*pb.PathEstimate)
		}
		return nil
	})
}
