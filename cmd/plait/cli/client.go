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
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/plait/plait/agent"
	pb "github.com/plait/plait/api/plait/v1"
	"github.com/plait/plait/controller"
)

// addClientFlags adds the flags every operator verb shares to root.
func addClientFlags(root *cobra.Command) {
	root.PersistentFlags().String("agent", envOr("PLAIT_AGENT", agent.DefaultSocket), "agent socket to talk to (env PLAIT_AGENT)")
	root.PersistentFlags().String("controller", os.Getenv("PLAIT_CONTROLLER"), "controller socket: weights and mode go through the controller instead of the agent (env PLAIT_CONTROLLER)")
	root.PersistentFlags().Bool("json", false, "print JSON instead of a table")
}

// controllerClient connects to the controller named by --controller, or says how to name
// one when ask is true.
func controllerClient(cmd *cobra.Command) (pb.ControllerClient, func(), error) {
	socket, _ := cmd.Flags().GetString("controller")
	if socket == "" {
		socket = controller.DefaultSocket
	}
	if _, err := os.Stat(socket); err != nil {
		return nil, nil, fmt.Errorf("no controller at %s: start one with `plait controller --network FILE` or point --controller at its socket", socket)
	}
	c, conn, err := controller.Dial(socket)
	if err != nil {
		return nil, nil, err
	}
	return c, func() { conn.Close() }, nil
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
	socket, _ := cmd.Flags().GetString("agent")
	if _, err := os.Stat(socket); err != nil {
		return nil, nil, fmt.Errorf("no agent at %s: start one with `plait agent` or point --agent at its socket", socket)
	}
	c, conn, err := agent.Dial(socket)
	if err != nil {
		return nil, nil, err
	}
	return c, func() { conn.Close() }, nil
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
			return fmt.Errorf("the agent or controller is not reachable: %s", st.Message())
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
