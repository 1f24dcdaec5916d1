package cli

import (
	"fmt"
	"math"
	"time"

	"github.com/spf13/cobra"

	"github.com/plait/plait/topo/scenario"
)

func fmtRate(bps float64) string {
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
