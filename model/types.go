package model

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/plait/plait/topo/scenario"
)

// Path is what the model knows about one path: what a lab scenario sets, or what the
// controller estimates from measurements.
type Path struct {
	Name   string
	Rate   float64       // bit/s on the wire (every byte of every frame counts)
	Delay  time.Duration // one-way base delay, without queueing
	Jitter time.Duration // delay variation that does not reorder within the path
	Loss   float64       // random loss, fraction of packets in [0, 1)
	Queue  int           // drop-tail limit in packets; 0 means scenario.DefaultQueue
}

// PathsFromScenario converts a scenario's paths; a path that follows a trace takes its
// mean rate (see Assumptions).
func PathsFromScenario(ps []scenario.Path) []Path {
	out := make([]Path, len(ps))
	for i, p := range ps {
		out[i] = Path{Name: p.Name, Rate: p.MeanRate(), Delay: p.Delay, Jitter: p.Jitter, Loss: p.Loss, Queue: p.Queue}
	}
	return out
}

func (p Path) queue() float64 {
	if p.Queue == 0 {
		return scenario.DefaultQueue
	}
	return float64(p.Queue)
}

func (p Path) label(i int) string {
	if p.Name != "" {
		return fmt.Sprintf("path %d (%s)", i, p.Name)
	}
	return fmt.Sprintf("path %d", i)
}

func validatePaths(paths []Path) error {
	if len(paths) == 0 {
		return errors.New("no paths: give at least one path with a rate and a delay")
	}
	for i, p := range paths {
		switch {
		case !(p.Rate > 0) || math.IsInf(p.Rate, 0):
			return fmt.Errorf("%s: rate %v bit/s: must be positive and finite, e.g. 5e6 for 5 Mbit/s", p.label(i), p.Rate)
		case p.Delay < 0:
			return fmt.Errorf("%s: delay %v is negative; give the one-way delay, at least 0", p.label(i), p.Delay)
		case p.Jitter < 0:
			return fmt.Errorf("%s: jitter %v is negative", p.label(i), p.Jitter)
		case !(p.Loss >= 0 && p.Loss < 1):
			return fmt.Errorf("%s: loss %v: must be a fraction in [0, 1), e.g. 0.01 for 1 %%", p.label(i), p.Loss)
		case p.Queue < 0:
			return fmt.Errorf("%s: queue %d packets is negative", p.label(i), p.Queue)
		}
	}
	return nil
}

// Mode is the sender's scheduler.
type Mode int

const (
	RR   Mode = iota // round robin over the used paths
	WRR              // weighted round robin by Split.Weights
	EDPF             // earliest delivery path first
)

var modeNames = []string{"rr", "wrr", "edpf"}

func (m Mode) String() string {
	if m < 0 || int(m) >= len(modeNames) {
		return fmt.Sprintf("mode(%d)", int(m))
	}
	return modeNames[m]
}

// MarshalText makes modes readable in JSON.
func (m Mode) MarshalText() ([]byte, error) { return []byte(m.String()), nil }

// UnmarshalText reads what MarshalText writes.
func (m *Mode) UnmarshalText(b []byte) (err error) {
	*m, err = ParseMode(string(b))
	return err
}

// ParseMode reads rr, wrr or edpf.
func ParseMode(s string) (Mode, error) {
	for i, n := range modeNames {
		if strings.EqualFold(s, n) {
			return Mode(i), nil
		}
	}
	return 0, fmt.Errorf("unknown mode %q: use rr, wrr or edpf", s)
}

// Split is how the sender spreads packets.
type Split struct {
	Mode Mode
	// Weights, one per path. nil uses every path: equally for rr, by rate for wrr. A zero
	// weight leaves a path unused (down); for rr and edpf only zero versus non-zero
	// matters.
	Weights []float64
}

// CC is the sender's congestion control.
type CC int

const (
	Cubic CC = iota
	BBR
)

var ccNames = []string{"cubic", "bbr"}

func (c CC) String() string {
	if c < 0 || int(c) >= len(ccNames) {
		return fmt.Sprintf("cc(%d)", int(c))
	}
	return ccNames[c]
}

// Beta is the share of its window a flow keeps at a loss it sees: cubic's β (RFC 9438);
// BBR paces at the rate it measured and does not cut its window on a loss.
func (c CC) Beta() float64 {
	if c == BBR {
		return 1
	}
	return cubicBeta
}

// MarshalText makes congestion controls readable in JSON.
func (c CC) MarshalText() ([]byte, error) { return []byte(c.String()), nil }

// UnmarshalText reads what MarshalText writes.
func (c *CC) UnmarshalText(b []byte) (err error) {
	*c, err = ParseCC(string(b))
	return err
}

// ParseCC reads cubic or bbr.
func ParseCC(s string) (CC, error) {
	for i, n := range ccNames {
		if strings.EqualFold(s, n) {
			return CC(i), nil
		}
	}
	return 0, fmt.Errorf("unknown congestion control %q: the predictor knows cubic and bbr", s)
}

// AckPath says how ACKs come back to the sender.
type AckPath int

// MarshalText makes the ACK path readable in JSON.
func (a AckPath) MarshalText() ([]byte, error) {
	if a == AckFixed {
		return []byte("fixed"), nil
	}
	return []byte("over-paths"), nil
}

// UnmarshalText reads what MarshalText writes.
func (a *AckPath) UnmarshalText(b []byte) error {
	switch string(b) {
	case "fixed":
		*a = AckFixed
	case "over-paths":
		*a = AckOverPaths
	default:
		return fmt.Errorf("unknown ACK path %q: use over-paths or fixed", b)
	}
	return nil
}

const (
	// AckOverPaths: ACKs are striped over the used paths like the data (Plait's tunnel
	// carries both directions). ACKs repeat what earlier ones said (cumulative ACK, SACK
	// blocks), so news of an arrival reaches the sender over the fastest used path: the
	// reverse delay is the smallest one-way delay of the used paths.
	AckOverPaths AckPath = iota
	// AckFixed: ACKs take TCP.AckDelay (a separate return path; 0 is the paper's
	// zero-delay reverse path).
	AckFixed
)

// Defaults of TCP for Plait's lab: 1500-byte path MTU, a 44-byte tunnel header, TCP
// timestamps on, Ethernet framing counted by the link emulation.
const (
	DefaultMSS      = 1404    // 1500 − 44 (tunnel) − 20 (IP) − 20 (TCP) − 12 (timestamps)
	DefaultOverhead = 110     // 14 Ethernet + 44 tunnel + 40 IP/TCP + 12 timestamps
	DefaultWindow   = 3 << 20 // bytes: about what autotuning reaches with tcp_rmem's 6 MiB
	DefaultInitCwnd = 10      // Linux's initial window, segments
)

// TCP describes the one flow. The zero value is a Linux cubic flow with default buffers.
type TCP struct {
	CC       CC  `json:"cc"`
	MSS      int `json:"mss"`      // payload bytes per segment; DefaultMSS
	Overhead int `json:"overhead"` // wire bytes per segment besides payload; DefaultOverhead
	// Window bounds the unacknowledged span snd_una…snd_nxt in bytes: the smaller of the
	// receive window and what the send buffer holds. DefaultWindow.
	Window   int           `json:"window"`
	MaxCwnd  int           `json:"max_cwnd,omitempty"` // congestion window clamp in segments; 0: none
	InitCwnd int           `json:"init_cwnd"`          // segments; DefaultInitCwnd
	Duration time.Duration `json:"duration_ns"`        // transfer length, for its slow-start ramp; 0: steady state
	// Omit is the start of the transfer that its goodput leaves out (a lab's traffic.omit):
	// the goodput is the bytes delivered from Omit to Duration over that time.
	Omit     time.Duration `json:"omit_ns,omitempty"`
	AckPath  AckPath       `json:"ack_path"`
	AckDelay time.Duration `json:"ack_delay_ns,omitempty"` // reverse one-way delay for AckFixed
	// StaticReoWnd keeps RACK's reordering window at min_rtt/4 (tcp_recovery bit 0x2, or
	// tcp_dsack = 0): no growth on DSACK.
	StaticReoWnd bool `json:"static_reo_wnd"`
	// Resequenced: the receiving host hands TCP the flow's packets in order, each as late
	// as the slowest path in use would deliver it (docs/datapath.md#resequencing), so
	// every lane has that round trip and TCP sees no reordering.
	Resequenced bool `json:"resequenced,omitempty"`
	// Flows is how many flows share the split, each with its own window: random loss cuts
	// only the window of the flow it strikes, so n flows carry n loss-limited windows.
	// 0 means 1.
	Flows float64 `json:"flows,omitempty"`
}

// WithDefaults fills the zero fields with their defaults.
func (t TCP) WithDefaults() TCP {
	if t.MSS == 0 {
		t.MSS = DefaultMSS
	}
	if t.Overhead == 0 {
		t.Overhead = DefaultOverhead
	}
	if t.Window == 0 {
		t.Window = DefaultWindow
	}
	if t.InitCwnd == 0 {
		t.InitCwnd = DefaultInitCwnd
	}
	if t.Flows == 0 {
		t.Flows = 1
	}
	return t
}

// WithSysctls applies the hosts' net.ipv4.tcp_<knob> settings (a scenario's traffic.tcp)
// that change what the predictor follows: DSACK off or recovery's static-window bit keep
// RACK's reordering window at min_rtt/4; timestamps off give their 12 bytes a segment to
// payload. Other knobs leave the prediction as it is.
func (t TCP) WithSysctls(k map[string]int) TCP {
	t = t.WithDefaults()
	if v, ok := k["dsack"]; ok && v == 0 || k["recovery"]&0x2 != 0 {
		t.StaticReoWnd = true
	}
	if v, ok := k["timestamps"]; ok && v == 0 {
		t.MSS += 12
		t.Overhead -= 12
	}
	return t
}

func (t TCP) validate() error {
	switch {
	case t.CC < Cubic || t.CC > BBR:
		return fmt.Errorf("unknown congestion control %d", t.CC)
	case t.MSS < 1:
		return fmt.Errorf("MSS %d bytes: must be at least 1", t.MSS)
	case t.Overhead < 0:
		return fmt.Errorf("per-segment overhead %d bytes is negative", t.Overhead)
	case t.Window < t.MSS:
		return fmt.Errorf("window %d bytes: must hold at least one segment (%d bytes)", t.Window, t.MSS)
	case t.MaxCwnd < 0:
		return fmt.Errorf("cwnd clamp %d is negative; 0 means none", t.MaxCwnd)
	case t.InitCwnd < 1:
		return fmt.Errorf("initial window %d segments: must be at least 1", t.InitCwnd)
	case t.Duration < 0:
		return fmt.Errorf("duration %v is negative; 0 means steady state", t.Duration)
	case t.Omit < 0 || (t.Omit > 0 && t.Omit >= t.Duration):
		return fmt.Errorf("omit %v: must be at least 0 and below the duration %v", t.Omit, t.Duration)
	case t.AckPath < AckOverPaths || t.AckPath > AckFixed:
		return fmt.Errorf("unknown ACK path %d", t.AckPath)
	case t.AckDelay < 0:
		return fmt.Errorf("ACK delay %v is negative", t.AckDelay)
	case !(t.Flows >= 1) || math.IsInf(t.Flows, 1):
		return fmt.Errorf("flows %v: must be at least 1", t.Flows)
	}
	return nil
}

// Limit names what bounds the predicted goodput.
type Limit string

const (
	LimitCapacity Limit = "capacity"     // the split saturates its bottleneck path(s) fully
	LimitBuffer   Limit = "buffer"       // as capacity, but the queue is too short for cubic's sawtooth
	LimitWindow   Limit = "window"       // receive window / send buffer over the in-order RTT
	LimitCwnd     Limit = "cwnd-clamp"   // TCP.MaxCwnd
	LimitBBR      Limit = "bbr-inflight" // BBR's 2·BDP(min_rtt) inflight cap
	LimitLoss     Limit = "loss"         // random loss (cubic's response function)
)

// Prediction is the predicted steady behaviour of the flow. Rates are bit/s, times
// seconds; per-path slices follow the input paths (zero for unused paths).
type Prediction struct {
	Goodput  float64 `json:"goodput_bps"`  // TCP payload delivered in order
	WireRate float64 `json:"wire_bps"`     // all bytes the paths carry, retransmissions too
	Capacity float64 `json:"capacity_bps"` // the split's capacity bound on the wire
	Limit    Limit   `json:"limit"`

	Used       []int     `json:"used"`          // indices of the paths that carry data
	Share      []float64 `json:"share"`         // fraction of packets per path
	QueueDelay []float64 `json:"queue_delay_s"` // mean queueing per path

	RTT        float64 `json:"rtt_s"`          // mean over packets, with queueing (Linux's srtt is InOrderRTT: P8)
	MinRTT     float64 `json:"min_rtt_s"`      // fastest used path's round trip
	InOrderRTT float64 `json:"in_order_rtt_s"` // send to cumulative ACK: the slowest used path

	Skew           float64 `json:"skew_s"`          // largest lateness of a path behind another
	ReoWnd         float64 `json:"reo_wnd_s"`       // RACK's reordering window once adapted
	ReorderedRatio float64 `json:"reordered_ratio"` // RFC 4737 reordered packets / packets
	MeanExtent     float64 `json:"mean_extent"`     // packets overtaking a packet, on average
	Spurious       float64 `json:"spurious"`        // spurious retransmissions per segment
	Loss           float64 `json:"loss"`            // random loss per packet
}
