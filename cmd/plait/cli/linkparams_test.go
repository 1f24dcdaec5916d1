package cli

import (
	"strings"
	"testing"
)

func TestParseLinkRate(t *testing.T) {
	cases := []struct {
		in   string
		want uint64
		err  string
	}{
		{"5mbit", 5e6, ""},
		{"100kbit", 1e5, ""},
		{"1gbit", 1e9, ""},
		{"1.5Mbit", 1.5e6, ""},
		{"800bit", 800, ""},
		{"5mb", 0, `unknown unit "mb"`},
		{"fast", 0, "want a number and a unit"},
		{"", 0, "want a number and a unit"},
	}
	for _, c := range cases {
		got, err := parseLinkRate(c.in)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("parseLinkRate(%q) = %d, %v; want error %q", c.in, got, err, c.err)
			}
			continue
		}
		if err != nil || got != c.want {
			t.Errorf("parseLinkRate(%q) = %d, %v; want %d", c.in, got, err, c.want)
		}
	}
}

func TestParseLinkSpec(t *testing.T) {
	p, err := parseLinkSpec("rate=5mbit,delay=100ms,jitter=1ms,loss=0.5,queue=50,reorder,ge=0.01/0.3/0/0.5")
	if err != nil {
		t.Fatal(err)
	}
	if p.GetRateBps() != 5e6 || p.GetDelayUs() != 100000 || p.GetJitterUs() != 1000 || p.GetLossPercent() != 0.5 ||
		p.GetQueuePackets() != 50 || !p.GetReorder() || p.GetGilbertElliott().GetPBadToGood() != 0.3 || p.Down != nil {
		t.Errorf("parsed %v", p)
	}
	bad := []struct{ in, want string }{
		{"rate=5", "unit"},
		{"delay=5", "duration"},
		{"loss=150", "percentage"},
		{"queue=-1", "number of packets"},
		{"ge=0.1/0.2", "P_GOOD_TO_BAD"},
		{"speed=5mbit", "want rate, delay"},
		{"down=maybe", "true or false"},
	}
	for _, c := range bad {
		if _, err := parseLinkSpec(c.in); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("parseLinkSpec(%q): %v, want error mentioning %q", c.in, err, c.want)
		}
	}
}

func TestFormatLinkRate(t *testing.T) {
	for in, want := range map[uint64]string{0: "unlimited", 5e6: "5mbit", 1e9: "1gbit", 1.5e6: "1.5mbit", 100e3: "100kbit", 12: "12bit"} {
		if got := formatLinkRate(in); got != want {
			t.Errorf("formatLinkRate(%d) = %q, want %q", in, got, want)
		}
	}
}

func TestParseLinkSpecTrace(t *testing.T) {
	p, err := parseLinkSpec("trace_offset=2s,trace=../../../topo/traces/test.trace,rate=0bit")
	if err != nil {
		t.Fatal(err)
	}
	tr := p.GetTrace()
	if tr.GetName() != "test.trace" || len(tr.GetOpportunitiesMs()) != 755 || tr.GetOffsetUs() != 2e6 || p.GetRateBps() != 0 {
		t.Errorf("parsed trace %q, %d opportunities, offset %d us, rate %d", tr.GetName(), len(tr.GetOpportunitiesMs()), tr.GetOffsetUs(), p.GetRateBps())
	}
	if p, err := parseLinkSpec("trace=none"); err != nil || p.GetTrace() == nil || len(p.GetTrace().GetOpportunitiesMs()) != 0 {
		t.Errorf("trace=none: %v, %v; want a trace without opportunities (it removes the link's)", p, err)
	}
	for _, c := range []struct{ in, want string }{
		{"trace_offset=2s", "give the trace too"},
		{"trace=/nonexistent.trace", "nonexistent.trace"},
		{"trace=../../../topo/traces/test.trace,trace_offset=soon", "trace offset"},
	} {
		if _, err := parseLinkSpec(c.in); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("parseLinkSpec(%q): %v, want error mentioning %q", c.in, err, c.want)
		}
	}
}
