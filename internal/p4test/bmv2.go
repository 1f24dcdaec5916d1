package p4test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	p4v1 "github.com/p4lang/p4runtime/go/p4/v1"
	"github.com/plait/plait/internal/nstest"
	"github.com/plait/plait/p4/p4info"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

// BMv2Missing says why BMv2 cannot run here, "" when p4c-bm2-ss and simple_switch_grpc
// are both on PATH.
func BMv2Missing() string {
	for _, bin := range []string{"p4c-bm2-ss", "simple_switch_grpc"} {
		if _, err := exec.LookPath(bin); err != nil {
			return bin + " is not on PATH (p4c and BMv2 are not installable here)"
		}
	}
	return ""
}

// P4c is plait.p4 as p4c-bm2-ss compiled it for BMv2.
type P4c struct {
	Info      *p4info.Info // p4c's P4Info
	DevConfig []byte       // p4c's BMv2 JSON
}

// CompileP4 compiles src (plait.p4) with p4c-bm2-ss for v1model.
func CompileP4(t testing.TB, src string) *P4c {
	t.Helper()
	dir := t.TempDir()
	jsonPath, infoPath := filepath.Join(dir, "plait.json"), filepath.Join(dir, "plait.p4info.txtpb")
	cmd := exec.Command("p4c-bm2-ss", "--arch", "v1model", "-o", jsonPath, "--p4runtime-files", infoPath, src)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("p4c-bm2-ss: %v\n%s", err, out)
	}
	text, err := os.ReadFile(infoPath)
	if err != nil {
		t.Fatal(err)
	}
	c := &P4c{}
	if c.Info, err = p4info.Parse(text); err != nil {
		t.Fatal(err)
	}
	if c.DevConfig, err = os.ReadFile(jsonPath); err != nil {
		t.Fatal(err)
	}
	return c
}

// BMv2 is simple_switch_grpc, to run a program p4c compiled.
type BMv2 struct {
	*P4c
	Conn     *grpc.ClientConn
	DeviceID uint64
	Pid      int           // simple_switch_grpc's process
	Output   func() string // the switch's log
}

// StartBMv2 starts simple_switch_grpc in ns with ifaces as ports 1, 2, ..., the
// P4Runtime device id deviceID and the server on a Unix socket. It starts without a
// pipeline: the caller arbitrates, then pushes prog with Push.
func StartBMv2(t testing.TB, ns *nstest.NS, prog *P4c, deviceID uint64, ifaces []string) *BMv2 {
	t.Helper()
	dir := t.TempDir()
	b := &BMv2{P4c: prog, DeviceID: deviceID}
	sock := filepath.Join(dir, "bmv2.sock")
	args := append([]string{"--no-p4"}, BMv2Args(deviceID, dir)...)
	for i, ifname := range ifaces {
		args = append(args, "-i", fmt.Sprintf("%d@%s", i+1, ifname))
	}
	args = append(args, "--", "--grpc-server-addr", "unix:"+sock, "--cpu-port", "255")
	// nsenter execs the switch, so the process is the switch's own.
	proc, out := ns.Start("simple_switch_grpc", args...)
	b.Pid, b.Output = proc.Process.Pid, out
	for i := 0; ; i++ {
		if _, err := os.Stat(sock); err == nil {
			break
		}
		if i == 100 {
			t.Fatalf("simple_switch_grpc did not start:\n%s", b.Output())
		}
		time.Sleep(100 * time.Millisecond)
	}
	var err error
	if b.Conn, err = grpc.NewClient("unix://"+sock, grpc.WithTransportCredentials(insecure.NewCredentials())); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Conn.Close() })
	return b
}

// BMv2Args are the simple_switch_grpc options that let an instance run beside others: the
// P4Runtime device id (which requests must name; BMv2's default is 0), and, where the
// build has nanomsg, a notifications socket under dir (the default,
// /tmp/bmv2-<device id>-notifications.ipc, makes a second instance exit). A build without
// nanomsg refuses the option, so it is given only where --help lists it. Thrift's port
// needs nothing: each instance here has a network namespace of its own.
func BMv2Args(deviceID uint64, dir string) []string {
	args := []string{"--device-id", fmt.Sprint(deviceID)}
	help, _ := exec.Command("simple_switch_grpc", "--help").CombinedOutput()
	if strings.Contains(string(help), "--notifications-addr") {
		args = append(args, "--notifications-addr", "ipc://"+filepath.Join(dir, "notifications.ipc"))
	}
	return args
}

// Push commits p4c's P4Info and JSON; the caller must be primary (election id 1).
func (b *BMv2) Push(ctx context.Context) error {
	_, err := p4v1.NewP4RuntimeClient(b.Conn).SetForwardingPipelineConfig(ctx, &p4v1.SetForwardingPipelineConfigRequest{
		DeviceId: b.DeviceID, ElectionId: &p4v1.Uint128{Low: 1}, Action: p4v1.SetForwardingPipelineConfigRequest_VERIFY_AND_COMMIT,
		Config: &p4v1.ForwardingPipelineConfig{P4Info: b.Info.P4Info, P4DeviceConfig: b.DevConfig},
	})
	if err != nil {
		return fmt.Errorf("push pipeline to BMv2 (device %d): %w", b.DeviceID, err)
	}
	return nil
}
