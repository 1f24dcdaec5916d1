package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/plait/plait/agent"
	pb "github.com/plait/plait/api/plait/v1"
	"github.com/plait/plait/controller"
	"github.com/plait/plait/internal/sockrpc"
)

// addClientFlags adds the flags every operator verb shares to root. The TLS files are
// this end's: the CA it trusts for the other end, and its own certificate and key (a
// daemon serves with them, a client shows them).
func addClientFlags(root *cobra.Command) {
	f := root.PersistentFlags()
	f.String("agent", envOr("PLAIT_AGENT", agent.DefaultSocket), "agent to talk to: unix:PATH, a socket path, or HOST:PORT (env PLAIT_AGENT)")
	f.String("controller", os.Getenv("PLAIT_CONTROLLER"), "controller: weights and mode go through the controller instead of the agent; unix:PATH, a socket path, or HOST:PORT (env PLAIT_CONTROLLER)")
	f.String("tls-ca", os.Getenv("PLAIT_TLS_CA"), "CA certificate (PEM) the other end's certificate must be signed by (env PLAIT_TLS_CA)")
	f.String("tls-cert", os.Getenv("PLAIT_TLS_CERT"), "this end's certificate (PEM), as plait cert issue makes (env PLAIT_TLS_CERT)")
	f.String("tls-key", os.Getenv("PLAIT_TLS_KEY"), "this end's private key (PEM) (env PLAIT_TLS_KEY)")
	f.Bool("json", false, "print JSON instead of a table")
}

// tlsFlags reads --tls-ca, --tls-cert and --tls-key.
func tlsFlags(cmd *cobra.Command) sockrpc.TLS {
	var t sockrpc.TLS
	t.CA, _ = cmd.Flags().GetString("tls-ca")
	t.Cert, _ = cmd.Flags().GetString("tls-cert")
	t.Key, _ = cmd.Flags().GetString("tls-key")
	return t
}

// dialTarget checks that a Unix socket exists before dialling it (a TCP address is
// tried at the first call) and dials with TLS for a TCP address.
func dialTarget[C any](cmd *cobra.Command, target, what, start string, dial func(string, sockrpc.TLS) (C, *grpc.ClientConn, error)) (C, func(), error) {
	var zero C
	e, err := sockrpc.ParseEndpoint(target)
	if err != nil {
		return zero, nil, usagef(cmd, "--%s: %v", what, err)
	}
	t := tlsFlags(cmd)
	if e.Unix {
		if _, err := os.Stat(e.Address); err != nil {
			return zero, nil, fmt.Errorf("no %s at %s: %s or point --%s at it", what, e.Address, start, what)
		}
		t = sockrpc.TLS{}
	}
	c, conn, err := dial(target, t)
	if err != nil {
		return zero, nil, err
	}
	return c, func() { conn.Close() }, nil
}

// controllerClient connects to the controller named by --controller.
func controllerClient(cmd *cobra.Command) (pb.ControllerClient, func(), error) {
	target, _ := cmd.Flags().GetString("controller")
	if target == "" {
		target = controller.DefaultSocket
	}
	return dialTarget(cmd, target, "controller", "start one with `plait controller --network FILE`", controller.Dial)
}

// viaController is true when the operator named a controller: steering verbs then go
// through it, so that it does not undo them at its next interval.
func viaController(cmd *cobra.Command) bool {
	s, _ := cmd.Flags().GetString("controller")
	return s != ""
}

func envOr(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}

// agentClient connects to the agent named by --agent. The connection is lazy, so a
// missing agent shows up as an error of the first call, which explain turns into advice.
func agentClient(cmd *cobra.Command) (pb.AgentClient, func(), error) {
	target, _ := cmd.Flags().GetString("agent")
	return dialTarget(cmd, target, "agent", "start one with `plait agent`", agent.Dial)
}

func callCtx(cmd *cobra.Command) (context.Context, context.CancelFunc) {
	return context.WithTimeout(cmd.Context(), 10*time.Second)
}

// withAgent calls f with the agent named by --agent and a deadline for its calls.
func withAgent(cmd *cobra.Command, f func(context.Context, pb.AgentClient) error) error {
	return withClient(cmd, agentClient, f)
}

// withController calls f with the controller named by --controller and a deadline.
func withController(cmd *cobra.Command, f func(context.Context, pb.ControllerClient) error) error {
	return withClient(cmd, controllerClient, f)
}

func withClient[C any](cmd *cobra.Command, dial func(*cobra.Command) (C, func(), error), f func(context.Context, C) error) error {
	c, done, err := dial(cmd)
	if err != nil {
		return err
	}
	defer done()
	ctx, cancel := callCtx(cmd)
	defer cancel()
	return explain(f(ctx, c))
}

// explain turns a gRPC error into the server's own message.
func explain(err error) error {
	if err == nil {
		return nil
	}
	if st, ok := status.FromError(err); ok {
		if st.Code() == codes.Unavailable {
			return fmt.Errorf("the agent or controller is not reachable: %s", sockrpc.Explain(st.Message()))
		}
		return errors.New(st.Message())
	}
	return err
}

func wantJSON(cmd *cobra.Command) bool {
	v, _ := cmd.Flags().GetBool("json")
	return v
}

// printProto prints a message as indented JSON.
func printProto(w io.Writer, m proto.Message) error {
	b, err := protojson.MarshalOptions{Multiline: true, Indent: "  ", EmitUnpopulated: true}.Marshal(m)
	if err != nil {
		return fmt.Errorf("encode JSON: %w", err)
	}
	_, err = fmt.Fprintln(w, string(b))
	return err
}

// printJSON prints any value as indented JSON.
func printJSON(w io.Writer, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return fmt.Errorf("encode JSON: %w", err)
	}
	_, err = fmt.Fprintln(w, string(b))
	return err
}

// table writes aligned columns; rows are tab-separated.
type table struct{ tw *tabwriter.Writer }

func newTable(w io.Writer, header ...string) *table {
	t := &table{tw: tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)}
	t.row(header...)
	return t
}

func (t *table) row(cells ...string) { fmt.Fprintln(t.tw, strings.Join(cells, "\t")+"\t") }
func (t *table) flush() error        { return t.tw.Flush() }
