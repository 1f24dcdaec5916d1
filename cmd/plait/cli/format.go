package cli

import (
	"fmt"
	"math"
	"time"

	"github.com/spf13/cobra"

	"github.com/plait/plait/topo/scenario"
)

func fmtRate(bps float64) string { return scenario.HumanRate(bps) }

func fmtUs(us float64) string {
	if math.IsNaN(us) {
		return "-"
	}
	return fmt.Sprintf("%.2fms", us/1000)
}

func fmtPct(f float64) string {
	if math.IsNaN(f) {
		return "-"
	}
	return fmt.Sprintf("%.1f%%", 100*f)
}

func parseDuration(cmd *cobra.Command, flag, s string) (d time.Duration, err error) {
	d, err = scenario.ParseDuration(s)
	if err != nil {
		return 0, usagef(cmd, "--%s: %v", flag, err)
	}
	return d, nil
}
