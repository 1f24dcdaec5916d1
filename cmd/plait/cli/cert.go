package cli

import (
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/plait/plait/internal/sockrpc"
)

func newCertCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "cert",
		Short: "Make a lab CA and the certificates agents, controller and switches use for mutual TLS",
		Long: `Make a small CA and certificates for Plait's control plane: every agent, switch and
controller reached over TCP shows a certificate the CA signed and believes only
certificates the CA signed. Certificates are ECDSA P-256, good for both server and
client use; keys are written mode 0600. Keep ca-key.pem off the hosts: only ca.pem and each
host's own certificate and key go to it.`,
		Example: `  plait cert ca --dir pki
  plait cert issue --dir pki --name h1 --host 192.0.2.1
  plait cert issue --dir pki --name controller`,
	}
	var dir, caName, name string
	var validity time.Duration
	ca := &cobra.Command{
		Use:   "ca",
		Short: "Make a CA (ca.pem, ca-key.pem) in --dir",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := sockrpc.NewCA(dir, caName, validity); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "CA %s: %s (give to every end), %s (keep safe)\n", caName,
				filepath.Join(dir, "ca.pem"), filepath.Join(dir, "ca-key.pem"))
			return nil
		},
	}
	ca.Flags().StringVar(&caName, "name", "plait lab CA", "the CA's common name")
	var hosts []string
	var out string
	issue := &cobra.Command{
		Use:   "issue",
		Short: "Issue NAME.pem and NAME-key.pem signed by the CA in --dir",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if name == "" || strings.ContainsAny(name, "/ ") {
				return usagef(cmd, "--name %q: give a file name for the certificate, e.g. h1", name)
			}
			if out == "" {
				out = dir
			}
			if err := sockrpc.Issue(dir, out, name, hosts, validity); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%s: %s, %s (for %s)\n", name, filepath.Join(out, name+".pem"),
				filepath.Join(out, name+"-key.pem"), strings.Join(append([]string{"client use"}, hosts...), ", "))
			return nil
		},
	}
	issue.Flags().StringVar(&name, "name", "", "name of the end (file names and common name), e.g. h1, s1, controller")
	issue.Flags().StringSliceVar(&hosts, "host", nil, "IP addresses and DNS names clients dial this end by (repeatable; none for a client-only certificate)")
	issue.Flags().StringVar(&out, "out", "", "directory for the certificate and key (default: --dir)")
	for _, c := range []*cobra.Command{ca, issue} {
		c.Flags().StringVar(&dir, "dir", "pki", "the CA's directory")
		c.Flags().DurationVar(&validity, "validity", 365*24*time.Hour, "how long certificates are valid")
	}
	cmd.AddCommand(ca, issue)
	return cmd
}
