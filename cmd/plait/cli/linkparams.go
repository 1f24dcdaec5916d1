package cli

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	plaitv1 "github.com/plait/plait/api/plait/v1"
	"github.com/plait/plait/internal/mmtrace"
)

var rateUnits = map[string]float64{"bit": 1, "kbit": 1e3, "mbit": 1e6, "gbit": 1e9}

// parseLinkRate reads a bit rate as tc writes it: 5mbit, 100kbit, 1gbit, 800bit.
func parseLinkRate(s string) (uint64, error) {
	t := strings.ToLower(strings.TrimSpace(s))
	i := strings.IndexFunc(t, func(r rune) bool { return (r < '0' || r > '9') && r != '.' })
	if i <= 0 {
		return 0, fmt.Errorf("rate %q: want a number and a unit, e.g. 5mbit, 100kbit or 1gbit", s)
	}
	unit, ok := rateUnits[t[i:]]
	if !ok {
		return 0, fmt.Errorf("rate %q: unknown unit %q; use bit, kbit, mbit or gbit (e.g. 5mbit)", s, t[i:])
	}
	v, err := strconv.ParseFloat(t[:i], 64)
	if err != nil || v < 0 || math.IsInf(v, 0) {
		return 0, fmt.Errorf("rate %q: %q is not a number", s, t[:i])
	}
	return uint64(math.Round(v * unit)), nil
}

// formatLinkRate writes a rate in the largest unit that keeps it short.
func formatLinkRate(bps uint64) string {
	switch {
	case bps == 0:
		return "unlimited"
	case bps%1e9 == 0:
		return fmt.Sprintf("%dgbit", bps/1e9)
	case bps >= 1e6:
		return strconv.FormatFloat(float64(bps)/1e6, 'f', -1, 64) + "mbit"
	case bps >= 1e3:
		return strconv.FormatFloat(float64(bps)/1e3, 'f', -1, 64) + "kbit"
	}
	return fmt.Sprintf("%dbit", bps)
}

func parseLinkDuration(what, s string) (time.Duration, error) {
	d, err := time.ParseDuration(strings.TrimSpace(s))
	if err != nil || d < 0 {
		return 0, fmt.Errorf("%s %q: want a duration such as 45ms, 500us or 1s", what, s)
	}
	return d, nil
}

func parseLinkBool(what, s string) (bool, error) {
	if s == "" {
		return true, nil
	}
	b, err := strconv.ParseBool(s)
	if err != nil {
		return false, fmt.Errorf("%s %q: want true or false", what, s)
	}
	return b, nil
}

// parseLinkSpec reads "rate=5mbit,delay=100ms,jitter=1ms,loss=0.5,queue=50" (also
// reorder, down, ge=P_GOOD_TO_BAD/P_BAD_TO_GOOD/LOSS_GOOD/LOSS_BAD, trace=FILE and
// trace_offset=DURATION) into the fields it sets.
func parseLinkSpec(spec string) (*plaitv1.LinkParams, error) {
	p := &plaitv1.LinkParams{}
	for _, kv := range strings.Split(spec, ",") {
		if kv = strings.TrimSpace(kv); kv == "" {
			continue
		}
		k, v, _ := strings.Cut(kv, "=")
		if err := setLinkField(p, strings.ToLower(k), v); err != nil {
			return nil, err
		}
	}
	return p, checkLinkTrace(p)
}

// checkLinkTrace refuses a trace offset without a trace (which would read as removing it).
func checkLinkTrace(p *plaitv1.LinkParams) error {
	if tr := p.GetTrace(); tr != nil && tr.GetName() == "" && tr.GetOffsetUs() > 0 {
		return fmt.Errorf("trace_offset: give the trace too (trace=FILE)")
	}
	return nil
}

func setLinkField(p *plaitv1.LinkParams, k, v string) error {
	switch k {
	case "rate":
		r, err := parseLinkRate(v)
		if err != nil {
			return err
		}
		p.RateBps = &r
	case "delay", "jitter":
		d, err := parseLinkDuration(k, v)
		if err != nil {
			return err
		}
		us := uint64(d / time.Microsecond)
		if k == "delay" {
			p.DelayUs = &us
		} else {
			p.JitterUs = &us
		}
	case "loss":
		f, err := strconv.ParseFloat(strings.TrimSuffix(v, "%"), 64)
		if err != nil || f < 0 || f > 100 {
			return fmt.Errorf("loss %q: want a percentage between 0 and 100, e.g. 0.5", v)
		}
		p.LossPercent = &f
	case "queue":
		q, err := strconv.ParseUint(v, 10, 32)
		if err != nil {
			return fmt.Errorf("queue %q: want a number of packets, e.g. 50", v)
		}
		q32 := uint32(q)
		p.QueuePackets = &q32
	case "reorder", "down":
		b, err := parseLinkBool(k, v)
		if err != nil {
			return err
		}
		if k == "reorder" {
			p.Reorder = &b
		} else {
			p.Down = &b
		}
	case "ge":
		parts := strings.Split(v, "/")
		if len(parts) != 4 {
			return fmt.Errorf("ge %q: want P_GOOD_TO_BAD/P_BAD_TO_GOOD/LOSS_GOOD/LOSS_BAD, e.g. 0.01/0.3/0/0.5", v)
		}
		var f [4]float64
		for i, s := range parts {
			x, err := strconv.ParseFloat(s, 64)
			if err != nil {
				return fmt.Errorf("ge %q: %q is not a probability", v, s)
			}
			f[i] = x
		}
		p.GilbertElliott = &plaitv1.GilbertElliott{PGoodToBad: f[0], PBadToGood: f[1], LossGood: f[2], LossBad: f[3]}
	case "trace":
		if p.Trace == nil {
			p.Trace = &plaitv1.Trace{}
		}
		if v == "none" { // no opportunities: the trace goes
			p.Trace.Name, p.Trace.OpportunitiesMs = "none", nil
			break
		}
		tr, err := mmtrace.Load(v)
		if err != nil {
			return err
		}
		p.Trace.Name, p.Trace.OpportunitiesMs = tr.Name, tr.Ms
	case "trace_offset", "trace-offset":
		d, err := parseLinkDuration("trace offset", v)
		if err != nil {
			return err
		}
		if p.Trace == nil {
			p.Trace = &plaitv1.Trace{}
		}
		p.Trace.OffsetUs = uint64(d / time.Microsecond)
	default:
		return fmt.Errorf("link parameter %q: want rate, delay, jitter, loss, queue, reorder, down, ge, trace or trace_offset", k)
	}
	return nil
}
