package cli

import (
	"strings"
	"testing"
)

func TestPrintDropsNamesEveryReasonThatCounted(t *testing.T) {
	for _, c := range []struct {
		verdicts map[string]uint64
		want     string
	}{
		{map[string]uint64{"pass": 9, "drop_bad_tag": 0}, ""},
		{map[string]uint64{"pass": 9, "drop_replay": 2, "drop_bad_tag": 20, "decap": 5},
			"receiver dropped, since the datapath was loaded: bad_tag 20, replay 2\n"},
	} {
		var b strings.Builder
		printDrops(&b, "receiver", c.verdicts)
		if b.String() != c.want {
			t.Errorf("printDrops(%v) = %q, want %q", c.verdicts, b.String(), c.want)
		}
	}
}
