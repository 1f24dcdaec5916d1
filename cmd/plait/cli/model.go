package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/plait/plait/model"
	"github.com/plait/plait/topo/scenario"
)

func newModelCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "model",
		Short: "Predict the goodput of one TCP flow striped over heterogeneous paths",
		Long: `The model commands run two predictors side by side: seed 002's analytical model of
TCP striped round robin over n links (the baseline, eq. 9 corrected), and Plait's
predictor for one Linux TCP flow under rr, wrr or edpf, which the controller uses to
choose how many and which paths to use. 'go doc ./model' has the equations.`,
	}
	cmd.AddCommand(newModelPredictCmd(), newModelSweepCmd(), newModelValidateCmd())
	return cmd
}

// modelTCPFlags are the flow's parameters shared by the model commands.
type modelTCPFlags struct {
	cc        string
	window    string
	mss       int
	overhead  int
	maxCwnd   int
	duration  time.Duration
	ackDelay  string
	staticReo bool
}

func (f *modelTCPFlags) register(fs *pflag.FlagSet) {
	fs.StringVar(&f.cc, "cc", "", "congestion control: cubic or bbr (default: the scenario's, else cubic)")
	fs.StringVar(&f.window, "window", "", "receive window / send buffer limit, e.g. 64KiB or 3MiB (default 3MiB)")
	fs.IntVar(&f.mss, "mss", 0, fmt.Sprintf("TCP payload bytes per segment (default %d)", model.DefaultMSS))
	fs.IntVar(&f.overhead, "overhead", 0, fmt.Sprintf("wire bytes per segment besides payload (default %d)", model.DefaultOverhead))
	fs.IntVar(&f.maxCwnd, "max-cwnd", 0, "congestion window clamp in segments (default none)")
	fs.DurationVar(&f.duration, "duration", 0, "transfer length, for the slow-start ramp (default: the scenario's, else steady state)")
	fs.StringVar(&f.ackDelay, "ack-delay", "", "ACKs return over a fixed one-way delay instead of over the paths, e.g. 0 or 20ms")
	fs.BoolVar(&f.staticReo, "static-reo-wnd", false, "RACK's reordering window stays at min_rtt/4 (no DSACK adaptation)")
}

func (f *modelTCPFlags) tcp(cmd *cobra.Command, sc *scenario.Scenario) (model.TCP, error) {
	t := model.TCP{MSS: f.mss, Overhead: f.overhead, MaxCwnd: f.maxCwnd, Duration: f.duration, StaticReoWnd: f.staticReo}
	cc := f.cc
	if cc == "" && sc != nil {
		cc = sc.Traffic.CC
	}
	if cc != "" {
		c, err := model.ParseCC(cc)
		if err != nil {
			return t, usagef(cmd, "--cc: %v", err)
		}
		t.CC = c
	}
	if f.window != "" {
		w, err := parseModelBytes(f.window)
		if err != nil {
			return t, usagef(cmd, "--window: %v", err)
		}
		t.Window = w
	}
	if !cmd.Flags().Changed("duration") && sc != nil {
		t.Duration = sc.Traffic.Duration
	}
	if sc != nil && len(sc.Traffic.TCP) > 0 {
		mss, overhead := t.MSS, t.Overhead
		t = t.WithSysctls(sc.Traffic.TCP)
		// --mss and --overhead describe the flow as it is: the knobs do not shift them.
		if f.mss != 0 {
			t.MSS = mss
		}
		if f.overhead != 0 {
			t.Overhead = overhead
		}
	}
	if f.ackDelay != "" {
		d, err := scenario.ParseDuration(f.ackDelay)
		if err != nil {
			return t, usagef(cmd, "--ack-delay: %v", err)
		}
		t.AckPath, t.AckDelay = model.AckFixed, d
	}
	if t.MSS < 0 || t.Overhead < 0 || t.MaxCwnd < 0 || t.Duration < 0 {
		return t, usagef(cmd, "--mss, --overhead, --max-cwnd and --duration must not be negative")
	}
	return t, nil
}

// parseModelBytes reads a size: a plain number of bytes, or with k, KiB, M, MiB (binary,
// as socket buffers are counted).
func parseModelBytes(s string) (int, error) {
	t := strings.TrimSpace(s)
	mult := 1
	for _, u := range []struct {
		suffix string
		mult   int
	}{{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"k", 1 << 10}, {"K", 1 << 10}, {"M", 1 << 20}} {
		if num, ok := strings.CutSuffix(t, u.suffix); ok {
			t, mult = num, u.mult
			break
		}
	}
	v, err := strconv.ParseFloat(strings.TrimSpace(t), 64)
	if err != nil || !(v > 0) || v*float64(mult) > math.MaxInt32 {
		return 0, fmt.Errorf("size %q: write a positive number of bytes, e.g. 65536, 64KiB or 3MiB", s)
	}
	return int(v * float64(mult)), nil
}

// modelPaperFlags expose the paper model's unstated choices.
type modelPaperFlags struct {
	bytes       string
	segment     int
	ackEvery    int
	rounding    string
	queueTerm   string
	single      string
	foldReverse bool
}

func (f *modelPaperFlags) register(fs *pflag.FlagSet) {
	fs.StringVar(&f.bytes, "paper-bytes", "", "paper model: bytes to transfer E (default 1MiB)")
	fs.IntVar(&f.segment, "paper-segment", 0, fmt.Sprintf("paper model: segment size s in bytes (default %d)", model.DefaultSegment))
	fs.IntVar(&f.ackEvery, "paper-ack-every", 0, fmt.Sprintf("paper model: m_ACK (default %d)", model.DefaultAckEvery))
	fs.StringVar(&f.rounding, "paper-rounding", "nearest", "paper model: whole segments from a fractional C_i: nearest, down or up")
	fs.StringVar(&f.queueTerm, "paper-queue", "floor", "paper model: eq. (3) queue term: floor (⌊j/n⌋+1, as printed) or ceil (⌈j/n⌉)")
	fs.StringVar(&f.single, "paper-single", "case1", "paper model: a one-segment round with m_ACK ≥ 2: case1 (T = D_1) or delack (adds the 200 ms timer)")
	fs.BoolVar(&f.foldReverse, "paper-fold-reverse", false, "paper model: take d_l as the round trip of a symmetric path, not the one-way delay")
}

func (f *modelPaperFlags) options(cmd *cobra.Command) (model.PaperOptions, error) {
	o := model.PaperOptions{Segment: f.segment, AckEvery: f.ackEvery, FoldReverse: f.foldReverse}
	if f.bytes != "" {
		b, err := parseModelBytes(f.bytes)
		if err != nil {
			return o, usagef(cmd, "--paper-bytes: %v", err)
		}
		o.Bytes = float64(b)
	}
	var ok bool
	if o.Rounding, ok = map[string]model.Rounding{"nearest": model.RoundNearest, "down": model.RoundDown, "up": model.RoundUp}[f.rounding]; !ok {
		return o, usagef(cmd, "--paper-rounding %q: use nearest, down or up", f.rounding)
	}
	if o.QueueTerm, ok = map[string]model.QueueTerm{"floor": model.QueueFloorPlusOne, "ceil": model.QueueCeil}[f.queueTerm]; !ok {
		return o, usagef(cmd, "--paper-queue %q: use floor or ceil", f.queueTerm)
	}
	if o.Single, ok = map[string]model.SingleSegment{"case1": model.SingleCaseI, "delack": model.SingleDelayedAck}[f.single]; !ok {
		return o, usagef(cmd, "--paper-single %q: use case1 or delack", f.single)
	}
	if o.Segment < 0 || o.AckEvery < 0 {
		return o, usagef(cmd, "--paper-segment and --paper-ack-every must be positive")
	}
	return o, nil
}

func writeModelJSON(w io.Writer, v any) error {
	data, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return fmt.Errorf("encode json: %w", err)
	}
	_, err = fmt.Fprintf(w, "%s\n", data)
	return err
}

// modelRate prints bit/s with three significant digits in a readable unit.
func modelRate(bps float64) string {
	switch {
	case bps >= 1e9:
		return fmt.Sprintf("%.3g Gbit/s", bps/1e9)
	case bps >= 1e6:
		return fmt.Sprintf("%.3g Mbit/s", bps/1e6)
	case bps >= 1e3:
		return fmt.Sprintf("%.3g kbit/s", bps/1e3)
	}
	return fmt.Sprintf("%.3g bit/s", bps)
}

func modelSeconds(s float64) string {
	return time.Duration(s * 1e9).Round(100 * time.Microsecond).String()
}
