// Package p4switch is Plait's embedded switch target (`plait switch`): plait.p4's pipeline
// in Go on ports that are Linux interfaces (AF_PACKET) or memory, a P4Runtime server for
// it, and link emulation on every egress port (rate, delay, jitter, loss, queue limit,
// down, an optional TTI tick), which LinkEmulation changes at run time. The core (Switch)
// takes P4Runtime and LinkEmulation request types directly and server.go adapts it to
// gRPC, so the binary, tests and labs embed the same core. Docs: docs/switch.md.
package p4switch

import (
	"errors"
	"fmt"
	"log/slog"
	"math"
	"math/rand/v2"
	"os"
	"sort"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/plait/plait/p4/p4info"
	"golang.org/x/sys/unix"
)

// Switch is one switch: pipeline, ports with their links, P4Runtime state.
type Switch struct {
	deviceID uint64
	cpuPort  uint16
	log      *slog.Logger
	pipe     *Pipeline
	ports    map[uint16]*swPort
	pool     *packetPool
	peer     map[uint16]*swPort // passthrough: a port's frames leave through its peer

	base     time.Time
	monoBase int64 // CLOCK_MONOTONIC at base, ns

	bind atomic.Pointer[binding] // committed pipeline config; nil before one

	writeMu sync.Mutex // serialises Write and SetForwardingPipelineConfig
	linkMu  sync.Mutex // serialises SetLink read-modify-writes

	mu           sync.Mutex // P4Runtime state below
	cookie       uint64
	deviceConfig []byte
	saved        *pipelineConfig
	ctrls        map[*controller]bool
	primary      *controller
	highest      u128
	haveHighest  bool

	stats struct {
		rxPackets, rxTruncated, pipelineDrops, noPortDrops, packetInDrops, txErrors atomic.Uint64
	}

	done    chan struct{}
	wg      sync.WaitGroup
	started atomic.Bool
	closeMu sync.Once
}

type swPort struct {
	num  uint16
	port Port
	link *link
}

type config struct {
	deviceID uint64
	cpuPort  uint16
	log      *slog.Logger
	info     *p4info.Info
	noConfig bool
	ports    []portConfig
	tick     time.Duration
	pairs    [][2]uint16
}

type portConfig struct {
	num    uint16
	port   Port
	params LinkParams
}

// Option configures a Switch.
type Option func(*config) error

// WithDeviceID sets the P4Runtime device ID (default 1).
func WithDeviceID(id uint64) Option { return func(c *config) error { c.deviceID = id; return nil } }

// WithCPUPort sets the CPU port; it must be the CPU_PORT plait.p4 was compiled with.
func WithCPUPort(port uint16) Option {
	return func(c *config) error {
		if port == 0 || port >= dropPort {
			return fmt.Errorf("cpu port %d: want 1 to %d", port, dropPort-1)
		}
		c.cpuPort = port
		return nil
	}
}

// WithLogger sets where the switch logs (default: discard).
func WithLogger(l *slog.Logger) Option { return func(c *config) error { c.log = l; return nil } }

// WithP4Info starts the switch with this P4Info committed instead of the built-in one.
func WithP4Info(info *p4info.Info) Option { return func(c *config) error { c.info = info; return nil } }

// WithoutPipeline starts the switch with no pipeline config, as BMv2 does: it forwards
// nothing until a controller pushes one.
func WithoutPipeline() Option { return func(c *config) error { c.noConfig = true; return nil } }

// WithTick makes each port's link send only at its TTI boundaries, a tick apart, as an
// LTE cell sends a transport block per 1 ms TTI: a packet leaves at the first boundary
// after its time, with everything else due by then, so a link wakes at most once per
// tick. Waking per packet instead costs so much on a machine with few CPUs that the
// scheduler, not the link, decides when packets leave, by tens of milliseconds and
// differently on every link. The boundaries are fixed (each link at a phase of its own)
// rather than a tick after the last wake, so that when a packet leaves does not depend on
// what the link sent before: a probe train's first packet, after an idle spell, would
// otherwise leave alone and the rest a tick later, and every train read one packet a tick.
func WithTick(d time.Duration) Option {
	return func(c *config) error {
		if d < 0 || d > 10*time.Millisecond {
			return fmt.Errorf("tick %v: give 0 (wake per packet) to 10ms", d)
		}
		c.tick = d
		return nil
	}
}

// WithPassthrough pairs ports a and b: frames received on one leave through the other's
// link, with no P4 pipeline and no P4Runtime. A switch with pairs is a link element: the
// embedded switch's link emulation, the same code, in series with another switch's ports.
// Every port must be in exactly one pair.
func WithPassthrough(a, b uint16) Option {
	return func(c *config) error {
		if a == b {
			return fmt.Errorf("passthrough %d:%d: pair two different ports", a, b)
		}
		c.pairs = append(c.pairs, [2]uint16{a, b})
		return nil
	}
}

// WithPort adds a port with the link its egress emulates.
func WithPort(num uint16, p Port, params LinkParams) Option {
	return func(c *config) error {
		if err := params.Validate(); err != nil {
			return fmt.Errorf("port %d: %w", num, err)
		}
		c.ports = append(c.ports, portConfig{num, p, params})
		return nil
	}
}

// New builds a switch. Ports start moving packets at Start.
func New(opts ...Option) (*Switch, error) {
	c := config{deviceID: 1, cpuPort: DefaultCPUPort, log: slog.New(slog.DiscardHandler)}
	for _, o := range opts {
		if err := o(&c); err != nil {
			return nil, err
		}
	}
	s := &Switch{
		deviceID: c.deviceID, cpuPort: c.cpuPort, log: c.log,
		pipe: NewPipeline(c.cpuPort), ports: map[uint16]*swPort{}, ctrls: map[*controller]bool{},
		base: time.Now(), done: make(chan struct{}),
	}
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts); err != nil {
		return nil, fmt.Errorf("read monotonic clock: %w", err)
	}
	s.monoBase = ts.Nano()
	maxFrame := 1518
	for _, pc := range c.ports {
		switch {
		case pc.num == c.cpuPort:
			return nil, fmt.Errorf("port %d (%s) is the CPU port: number data ports otherwise or move the CPU port with --cpu-port", pc.num, pc.port.Name())
		case pc.num >= dropPort:
			return nil, fmt.Errorf("port %d (%s): port numbers are 0 to %d (bit<9>, 511 drops)", pc.num, pc.port.Name(), dropPort-1)
		case s.ports[pc.num] != nil:
			return nil, fmt.Errorf("port %d given twice (%s and %s)", pc.num, s.ports[pc.num].port.Name(), pc.port.Name())
		}
		sp := &swPort{num: pc.num, port: pc.port}
		egress := s.egress
		if len(c.pairs) > 0 {
			egress = func(*packet) {}
		}
		sp.link = newLink(pc.params, s.now(), egress, s.free)
		if sp.link.tick = int64(c.tick); c.tick > 0 {
			sp.link.phase = rand.Int64N(int64(c.tick))
		}
		s.ports[pc.num] = sp
		maxFrame = max(maxFrame, pc.port.maxFrame())
	}
	s.pool = newPacketPool(maxFrame + lenCtrlHdr)
	if len(c.pairs) > 0 {
		return s, s.pair(c.pairs)
	}
	if !c.noConfig {
		info := c.info
		if info == nil {
			info = p4info.Default()
		}
		b, err := bind(info)
		if err != nil {
			return nil, fmt.Errorf("p4info: %w", err)
		}
		s.bind.Store(b)
	}
	return s, nil
}

func (s *Switch) pair(pairs [][2]uint16) error {
	s.peer = map[uint16]*swPort{}
	for _, p := range pairs {
		for i, n := range p {
			switch {
			case s.ports[n] == nil:
				return fmt.Errorf("passthrough %d:%d: no port %d (ports: %v)", p[0], p[1], n, s.portNumbers())
			case s.peer[n] != nil:
				return fmt.Errorf("passthrough %d:%d: port %d is already paired", p[0], p[1], n)
			}
			s.peer[n] = s.ports[p[1-i]]
		}
	}
	for _, n := range s.portNumbers() {
		if s.peer[n] == nil {
			return fmt.Errorf("passthrough: port %d is in no pair (a link element forwards only between paired ports)", n)
		}
	}
	return nil
}

// now is CLOCK_MONOTONIC in ns, read through Go's (vDSO) monotonic clock. The split's
// tx_ns comes from it, so it shares a clock with the hosts' eBPF programs.
func (s *Switch) now() int64 { return s.monoBase + int64(time.Since(s.base)) }

// Start starts every port's receive and transmit goroutines.
func (s *Switch) Start() error {
	if s.started.Swap(true) {
		return errors.New("switch already started")
	}
	for _, sp := range s.ports {
		t, err := newTimer()
		if err != nil {
			return err
		}
		s.wg.Add(2)
		go s.rxLoop(sp)
		go s.txLoop(sp, t)
	}
	return nil
}

// Close stops the ports and waits for their goroutines.
func (s *Switch) Close() error {
	var errs []error
	s.closeMu.Do(func() {
		close(s.done)
		for _, sp := range s.ports {
			errs = append(errs, sp.port.Close())
		}
		s.wg.Wait()
	})
	return errors.Join(errs...)
}

func (s *Switch) free(pk *packet) { s.pool.put(pk) }

func (s *Switch) rxLoop(sp *swPort) {
	defer s.wg.Done()
	pkts := make([]*packet, rxBatch)
	for i := range pkts {
		pkts[i] = s.pool.get()
	}
	outs := make([]*swPort, rxBatch)
	warned := false
	for {
		n, err := sp.port.recv(pkts)
		if err != nil {
			select {
			case <-s.done:
				return
			default:
			}
			s.log.Warn("receive failed", "port", sp.num, "interface", sp.port.Name(), "err", err)
			time.Sleep(100 * time.Millisecond)
			continue
		}
		now := s.now()
		s.stats.rxPackets.Add(uint64(n))
		if !warned {
			for _, pk := range pkts[:n] {
				if pk.end < 0 {
					s.log.Warn("dropping frames larger than the interface MTU: turn offloads off on both ends (ethtool -K DEV tx off rx off tso off gso off gro off)", "port", sp.num, "interface", sp.port.Name())
					warned = true
					break
				}
			}
		}
		s.pipe.mu.RLock()
		for i := 0; i < n; i++ {
			outs[i] = s.ingress(pkts[i], sp.num, now)
		}
		s.pipe.mu.RUnlock()
		for i := 0; i < n; i++ {
			s.forward(pkts[i], outs[i], now)
			pkts[i] = s.pool.get()
		}
	}
}

// inject runs one frame through the switch as if received on port (PacketOut).
func (s *Switch) inject(port uint16, frame []byte) {
	pk := s.pool.get()
	if len(frame) > len(pk.buf)-headroom {
		s.stats.rxTruncated.Add(1)
		s.pool.put(pk)
		return
	}
	pk.off, pk.end = headroom, headroom+copy(pk.buf[headroom:], frame)
	now := s.now()
	s.pipe.mu.RLock()
	out := s.ingress(pk, port, now)
	s.pipe.mu.RUnlock()
	s.forward(pk, out, now)
}

// cpuPortMarker stands for the CPU port among egress destinations.
var cpuPortMarker = &swPort{}

// ingress parses pk and runs the ingress pipeline; it returns the egress port, nil to
// drop. The caller holds s.pipe.mu read-locked.
func (s *Switch) ingress(pk *packet, inPort uint16, now int64) *swPort {
	if pk.end < 0 {
		s.stats.rxTruncated.Add(1)
		return nil
	}
	if s.peer != nil {
		return s.peer[inPort]
	}
	f := pk.frame()
	st := &pk.st
	pk.payload = pk.off + parse(f, inPort, s.cpuPort, &st.hdr)
	st.ingressLen = len(f)
	st.sm = stdMeta{ingressPort: inPort, ingressTsUs: uint64(now / 1000)}
	st.meta = userMeta{}
	s.pipe.ingress(st)
	out := st.sm.egressSpec
	st.sm.egressPort = out
	switch {
	case out == dropPort:
		s.stats.pipelineDrops.Add(1)
		return nil
	case out == s.cpuPort:
		return cpuPortMarker
	}
	sp := s.ports[out]
	if sp == nil {
		s.stats.noPortDrops.Add(1)
	}
	return sp
}

func (s *Switch) forward(pk *packet, out *swPort, now int64) {
	switch out {
	case nil:
		s.pool.put(pk)
	case cpuPortMarker:
		s.egress(pk)
		s.packetIn(pk.frame())
		s.pool.put(pk)
	default:
		out.link.enqueue(pk, now)
	}
}

// egress runs the egress pipeline and the deparser, which writes the headers in front of
// the payload (into the headroom when they grew).
func (s *Switch) egress(pk *packet) {
	s.pipe.mu.RLock()
	s.pipe.egress(&pk.st)
	s.pipe.mu.RUnlock()
	h := &pk.st.hdr
	off := pk.payload - h.headerLen()
	h.deparse(pk.buf[off:pk.payload])
	pk.off = off
}

func (s *Switch) txLoop(sp *swPort, t *timer) {
	defer s.wg.Done()
	defer t.close()
	l := sp.link
	batch := make([]*packet, 0, txBatch)
	for {
		l.mu.Lock()
		now := s.now()
		l.armed = 0
		l.advance(now)
		batch = l.popDue(now, batch[:0], txBatch)
		next := int64(math.MaxInt64)
		if len(batch) == 0 {
			next = l.onGrid(l.next())
			l.armed = next
		}
		l.mu.Unlock()
		if len(batch) > 0 {
			dropped, err := sp.port.send(batch)
			if err != nil {
				select {
				case <-s.done:
					return
				default:
				}
				s.log.Warn("send failed", "port", sp.num, "interface", sp.port.Name(), "err", err)
				dropped = len(batch)
			}
			s.stats.txErrors.Add(uint64(dropped))
			for i, pk := range batch {
				s.pool.put(pk)
				batch[i] = nil
			}
			continue
		}
		if next != math.MaxInt64 {
			t.arm(next)
		}
		select {
		case <-l.wake:
		case <-t.fired:
		case <-s.done:
			return
		}
	}
}

// timer wakes a port's transmit goroutine at an absolute CLOCK_MONOTONIC time with
// microsecond precision: a timerfd in Go's netpoller, where Go's own timers would round
// short sleeps up to a millisecond. Its calls are raw, as afPacket's are.
type timer struct {
	fd    int
	file  *os.File
	fired chan struct{}
}

func newTimer() (*timer, error) {
	fd, err := unix.TimerfdCreate(unix.CLOCK_MONOTONIC, unix.TFD_NONBLOCK|unix.TFD_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("timerfd: %w", err)
	}
	t := &timer{fd: fd, file: os.NewFile(uintptr(fd), "timerfd"), fired: make(chan struct{}, 1)}
	rc, err := t.file.SyscallConn()
	if err != nil {
		t.file.Close()
		return nil, fmt.Errorf("timerfd: %w", err)
	}
	go func() {
		var buf [8]byte
		for {
			err := rc.Read(func(fd uintptr) bool {
				_, _, e := unix.RawSyscall(unix.SYS_READ, fd, uintptr(unsafe.Pointer(&buf[0])), uintptr(len(buf)))
				return e != unix.EAGAIN
			})
			if err != nil {
				return
			}
			select {
			case t.fired <- struct{}{}:
			default:
			}
		}
	}()
	return t, nil
}

func (t *timer) arm(at int64) {
	spec := unix.ItimerSpec{Value: unix.NsecToTimespec(max(at, 1))}
	unix.RawSyscall6(unix.SYS_TIMERFD_SETTIME, uintptr(t.fd), unix.TFD_TIMER_ABSTIME, uintptr(unsafe.Pointer(&spec)), 0, 0, 0)
}

func (t *timer) close() { t.file.Close() }

// PortInfo describes a port and its link.
type PortInfo struct {
	Port      uint16
	Interface string
	Params    LinkParams
	Stats     LinkStats
}

// SetLinkParams replaces a port's link parameters and cancels its scheduled changes;
// packets already queued are kept.
func (s *Switch) SetLinkParams(port uint16, p LinkParams) error {
	sp := s.ports[port]
	if sp == nil {
		return fmt.Errorf("no port %d (ports: %v)", port, s.portNumbers())
	}
	if err := p.Validate(); err != nil {
		return fmt.Errorf("port %d: %w", port, err)
	}
	l := sp.link
	l.mu.Lock()
	l.setAt(p, s.now())
	l.changes = nil // a change now overrides the scheduled ones
	wake := l.disarm()
	l.mu.Unlock()
	if wake {
		l.kick()
	}
	return nil
}

// Ports describes every port, in port order.
func (s *Switch) Ports() []PortInfo {
	var out []PortInfo
	for _, n := range s.portNumbers() {
		sp := s.ports[n]
		p, st := sp.link.snapshot()
		out = append(out, PortInfo{Port: n, Interface: sp.port.Name(), Params: p, Stats: st})
	}
	return out
}

func (s *Switch) portNumbers() []uint16 {
	ns := make([]uint16, 0, len(s.ports))
	for n := range s.ports {
		ns = append(ns, n)
	}
	sort.Slice(ns, func(i, j int) bool { return ns[i] < ns[j] })
	return ns
}

// Stats are switch-wide packet counts outside the P4 counters.
type Stats struct {
	RxPackets, RxTruncated, PipelineDrops, NoPortDrops, PacketInDrops, TxErrors uint64
}

// Stats returns the switch-wide counts.
func (s *Switch) Stats() Stats {
	return Stats{
		s.stats.rxPackets.Load(), s.stats.rxTruncated.Load(), s.stats.pipelineDrops.Load(),
		s.stats.noPortDrops.Load(), s.stats.packetInDrops.Load(), s.stats.txErrors.Load(),
	}
}
