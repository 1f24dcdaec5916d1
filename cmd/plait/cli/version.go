package cli

import (
	"fmt"
	"runtime/debug"

	"github.com/spf13/cobra"
)

func newVersionCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the version and the pinned dependencies",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			info, ok := debug.ReadBuildInfo()
			if !ok {
				return fmt.Errorf("no build information in this binary")
			}
			fmt.Fprintf(cmd.OutOrStdout(), "plait %s (%s)\n", info.Main.Version, info.GoVersion)
			for _, d := range info.Deps {
				fmt.Fprintf(cmd.OutOrStdout(), "  %s %s\n", d.Path, d.Version)
			}
			return nil
		},
	}
}
