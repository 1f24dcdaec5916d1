package scenario

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// rateUnits are tc's spellings (bit, kbit, mbit, gbit; decimal multipliers) plus the
// common bps forms, all case-insensitive.
var rateUnits = []struct {
	suffix string
	mult   float64
}{
	{"gbit", 1e9}, {"mbit", 1e6}, {"kbit", 1e3}, {"bit", 1},
	{"gbps", 1e9}, {"mbps", 1e6}, {"kbps", 1e3}, {"bps", 1},
}

// ParseRate parses a link rate such as "5mbit", "100kbit", "1.5gbit" or "35.9Mbps" into
// bit/s. A unit is required: a bare number is too easily read as the wrong one.
func ParseRate(s string) (float64, error) {
	t := strings.ToLower(strings.TrimSpace(s))
	for _, u := range rateUnits {
		num, ok := strings.CutSuffix(t, u.suffix)
		if !ok {
			continue
		}
		v, err := strconv.ParseFloat(strings.TrimSpace(num), 64)
		if err != nil {
			return 0, fmt.Errorf("rate %q: %q is not a number (write e.g. 5mbit)", s, num)
		}
		r := v * u.mult
		if !(r > 0) || math.IsInf(r, 0) {
			return 0, fmt.Errorf("rate %q must be positive and finite (write e.g. 5mbit)", s)
		}
		return r, nil
	}
	return 0, fmt.Errorf("rate %q has no unit: write bit, kbit, mbit or gbit (e.g. 5mbit)", s)
}

// FormatRate writes bit/s the way ParseRate reads it back, in the largest unit that
// keeps the number at least 1.
func FormatRate(bps float64) string {
	for _, u := range rateUnits[:3] {
		if bps >= u.mult {
			return strconv.FormatFloat(bps/u.mult, 'f', -1, 64) + u.suffix
		}
	}
	return strconv.FormatFloat(bps, 'f', -1, 64) + "bit"
}

// ParseDuration parses a delay or jitter such as "45ms", "1.5s" or "0" (Go syntax;
// a unit is required except for zero). Negative values are refused.
func ParseDuration(s string) (time.Duration, error) {
	t := strings.TrimSpace(s)
	if t == "0" {
		return 0, nil
	}
	d, err := time.ParseDuration(t)
	if err != nil {
		return 0, fmt.Errorf("duration %q: write a number with a unit, e.g. 45ms or 1.5s", s)
	}
	if d < 0 {
		return 0, fmt.Errorf("duration %q is negative; delays and jitter are one-way and at least 0", s)
	}
	return d, nil
}

// ParsePercent parses a loss rate in percent, "1", "0.5" or "1%", into a fraction.
func ParsePercent(s string) (float64, error) {
	t := strings.TrimSuffix(strings.TrimSpace(s), "%")
	v, err := strconv.ParseFloat(strings.TrimSpace(t), 64)
	if err != nil {
		return 0, fmt.Errorf("loss %q: write a percentage such as 1 or 0.5%%", s)
	}
	if !(v >= 0 && v < 100) {
		return 0, fmt.Errorf("loss %q must be at least 0 and below 100 percent", s)
	}
	return v / 100, nil
}

// HumanRate writes bit/s for people: two decimals in Mbit/s or Gbit/s, one in kbit/s,
// "-" for none.
func HumanRate(bps float64) string {
	switch {
	case bps <= 0 || math.IsNaN(bps):
		return "-"
	case bps >= 1e9:
		return fmt.Sprintf("%.2fGbit/s", bps/1e9)
	case bps >= 1e6:
		return fmt.Sprintf("%.2fMbit/s", bps/1e6)
	default:
		return fmt.Sprintf("%.1fkbit/s", bps/1e3)
	}
}
