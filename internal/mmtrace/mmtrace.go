// Package mmtrace reads link traces in Mahimahi's mm-link format and walks their delivery
// opportunities in time. One definition serves the scenario check, the CLI, the embedded
// switch's link emulation and the model's note on a trace.
//
// The format: one line per delivery opportunity, a whole number of milliseconds from the
// trace's start, never decreasing; a timestamp repeats when several packets may leave in
// the same millisecond. Each opportunity is room for OpportunityBytes bytes of IP packet
// to leave the bottleneck queue. The trace repeats with a period of its last timestamp,
// which must be above 0.
package mmtrace

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"
)

// OpportunityBytes is what one delivery opportunity carries: Mahimahi's MTU-sized packet.
const OpportunityBytes = 1500

// MaxOpportunities bounds a trace's length (a 928 s UMTS trace has about 190,000): beyond
// it a file is more likely not a trace at all.
const MaxOpportunities = 10_000_000

// Trace is a parsed trace.
type Trace struct {
	Name string   // the file it came from (base name), for messages
	Ms   []uint32 // opportunity times in ms from the start, non-decreasing, last > 0
}

// Load reads a trace file.
func Load(path string) (*Trace, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("trace %s: %w", path, err)
	}
	defer f.Close()
	return Parse(f, path)
}

// Parse reads a trace; errors name the file and line.
func Parse(r io.Reader, name string) (*Trace, error) {
	t := &Trace{Name: filepath.Base(name)}
	sc := bufio.NewScanner(r)
	line := 0
	for sc.Scan() {
		line++
		s := strings.TrimSpace(sc.Text())
		if s == "" {
			return nil, fmt.Errorf("trace %s:%d: empty line; every line is one delivery opportunity in ms, e.g. 42", name, line)
		}
		v, err := strconv.ParseUint(s, 10, 32)
		if err != nil {
			return nil, fmt.Errorf("trace %s:%d: %q is not a whole number of milliseconds (Mahimahi's mm-link format)", name, line, s)
		}
		if n := len(t.Ms); n > 0 && uint32(v) < t.Ms[n-1] {
			return nil, fmt.Errorf("trace %s:%d: %d ms comes after %d ms; timestamps must not decrease", name, line, v, t.Ms[n-1])
		}
		if len(t.Ms) == MaxOpportunities {
			return nil, fmt.Errorf("trace %s:%d: more than %d opportunities; is this a trace?", name, line, MaxOpportunities)
		}
		t.Ms = append(t.Ms, uint32(v))
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("trace %s:%d: %w", name, line+1, err)
	}
	switch {
	case len(t.Ms) == 0:
		return nil, fmt.Errorf("trace %s: no opportunities; a trace has one line per delivery opportunity", name)
	case t.Ms[len(t.Ms)-1] == 0:
		return nil, fmt.Errorf("trace %s:%d: the last timestamp is 0; a trace must last some time (it repeats with a period of its last timestamp)", name, line)
	}
	return t, nil
}

// Period is the time after which the trace repeats: its last timestamp.
func (t *Trace) Period() time.Duration { return time.Duration(t.Ms[len(t.Ms)-1]) * time.Millisecond }

// MeanRate is the trace's capacity in bit/s averaged over its period.
func (t *Trace) MeanRate() float64 {
	return float64(len(t.Ms)) * OpportunityBytes * 8 / t.Period().Seconds()
}

// Count is the number of opportunities in [from, to) of a trace started offset into itself.
func (t *Trace) Count(offset, from, to time.Duration) int {
	if to <= from {
		return 0
	}
	c := t.Start(0, offset)
	c.SkipTo(int64(from))
	n := 0
	for ; c.Time() < int64(to); c.Next() {
		n++
	}
	return n
}

// Cursor walks a trace's opportunities in absolute nanoseconds, repeating the trace.
type Cursor struct {
	t    *Trace
	base int64 // the absolute time of the current repetition's 0 ms
	i    int
}

// Start returns a cursor at the first opportunity at or after epoch of the trace begun
// at epoch, offset into itself (the trace's time offset is at epoch).
func (t *Trace) Start(epoch int64, offset time.Duration) Cursor {
	c := Cursor{t: t, base: epoch - int64(offset)}
	c.SkipTo(epoch)
	return c
}

// Time is the current opportunity's absolute time.
func (c *Cursor) Time() int64 { return c.base + int64(c.t.Ms[c.i])*int64(time.Millisecond) }

// Next moves to the following opportunity, into the next repetition after the last.
func (c *Cursor) Next() {
	if c.i++; c.i == len(c.t.Ms) {
		c.i = 0
		c.base += int64(c.t.Period())
	}
}

// SkipTo moves to the first opportunity at or after at, never backwards; the skipped ones
// are gone (an opportunity nobody uses is lost, as in Mahimahi).
func (c *Cursor) SkipTo(at int64) {
	if c.Time() >= at {
		return
	}
	period := int64(c.t.Period())
	if rel := at - c.base; rel > period {
		c.base += (rel - 1) / period * period
		c.i = 0
	}
	rel := at - c.base
	ms := c.t.Ms
	// Found: rel <= period, the last timestamp.
	c.i += sort.Search(len(ms)-c.i, func(k int) bool { return int64(ms[c.i+k])*int64(time.Millisecond) >= rel })
}
