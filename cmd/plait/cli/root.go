// Package cli is the plait command line (cobra): one newXxxCmd per command for the
// daemons (agent, switch, controller), the labs, the model and the operator verbs that
// talk to a running agent or controller; the work is done by the packages they call
// (the lab's plan and run in topo, its validation against the models in topo/validate).
// README.md lists the commands.
package cli

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"
)

// Main runs the command line and returns the process exit code.
func Main(args []string) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	root := newRootCmd()
	root.SetArgs(args)
	if err := root.ExecuteContext(ctx); err != nil {
		var ue usageError
		if errors.As(err, &ue) {
			fmt.Fprintf(os.Stderr, "plait: %v\nRun '%s --help' for usage.\n", err, ue.cmd)
			return 2
		}
		fmt.Fprintf(os.Stderr, "plait: %v\n", err)
		return 1
	}
	return 0
}

func newRootCmd() *cobra.Command {
	root := &cobra.Command{
		Use:   "plait",
		Short: "Stripe one TCP flow across several heterogeneous network paths",
		Long: `Plait stripes the packets of one flow across several network paths at the network
layer: an eBPF sender tags and sprays packets by a split table, an eBPF receiver measures
each path and strips the tag, P4 switches carry the paths, and a controller keeps the split
matched to the paths' capacity and delay.`,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetFlagErrorFunc(func(c *cobra.Command, err error) error {
		return usageError{err: err, cmd: c.CommandPath()}
	})
	root.AddCommand(
		newVersionCmd(),
		newSwitchCmd(),
		newLinkCmd(),
		newModelCmd(),
		newAgentCmd(),
		newTunnelCmd(),
		newWeightsCmd(),
		newModeCmd(),
		newPathCmd(),
		newStatsCmd(),
		newControllerCmd(),
		newStatusCmd(),
		newPathsCmd(),
		newWatchCmd(),
		newLabCmd(),
		newCertCmd(),
	)
	addClientFlags(root)
	return root
}

// usageError marks errors in how the command was called (exit code 2), as opposed to
// errors in doing what it asked.
type usageError struct {
	err error
	cmd string
}

func (e usageError) Error() string { return e.err.Error() }
func (e usageError) Unwrap() error { return e.err }

// usagef reports a bad argument of cmd.
func usagef(cmd *cobra.Command, format string, args ...any) error {
	return usageError{err: fmt.Errorf(format, args...), cmd: cmd.CommandPath()}
}
