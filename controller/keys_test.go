package controller_test

import (
	"context"
	"encoding/base64"
	"encoding/hex"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/encoding/protojson"

	"github.com/plait/plait/agent"
	pb "github.com/plait/plait/api/plait/v1"
	"github.com/plait/plait/controller"
	"github.com/plait/plait/internal/labnet"
	"github.com/plait/plait/internal/sockrpc"
)

// The network file names a key file: the controller gives the key to both agents over
// their API connections, in place of the one they were configured with. The tunnel
// carries under the new key, and neither the controller's log nor its API shows it.
func TestControllerGivesKeys(t *testing.T) {
	if bin == "" {
		t.Skip("needs root")
	}
	lab := labnet.New(t, bin, a2[:2], labnet.Options{})
	keyFile := filepath.Join(t.TempDir(), "new.key")
	if err := agent.WriteKeyFile(keyFile); err != nil {
		t.Fatal(err)
	}
	key, err := agent.ReadKeyFile(keyFile)
	if err != nil {
		t.Fatal(err)
	}
	old, err := agent.ReadKeyFile(lab.KeyFile)
	if err != nil {
		t.Fatal(err)
	}
	out := startWithKeys(t, lab, keyFile)

	want := []string{agent.KeyID(key[:])}
	var ags []pb.AgentClient
	for _, sock := range []string{lab.Sock1, lab.Sock2} {
		ag, conn, err := agent.Dial(sock, sockrpc.TLS{})
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		ags = append(ags, ag)
		var ids []string
		for deadline := time.Now().Add(10 * time.Second); !slices.Equal(ids, want); time.Sleep(20 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("%s holds keys %v, want the network file's %v (the configured one was %s)\ncontroller log:\n%s", sock, ids, want, agent.KeyID(old[:]), out())
			}
			l, err := ag.ListTunnels(context.Background(), &pb.Empty{})
			if err != nil {
				t.Fatal(err)
			}
			ids = l.Tunnels[0].Config.GetAuth().GetKeyIds()
		}
	}

	// Both ends tag and check with the new key: packets pass both ways, none dropped
	// for a bad tag. (Replacing a key outright drops what is in flight meanwhile; two
	// keys, the new one second, then first, roll over without a gap.)
	badTags := func() (n uint64) {
		for _, ag := range ags {
			st, err := ag.GetStats(context.Background(), &pb.StatsRequest{TunnelId: 1})
			if err != nil {
				t.Fatal(err)
			}
			n += st.Receiver["drop_bad_tag"]
		}
		return n
	}
	// Packets the agent that changed first sent meanwhile were dropped; so is a probe
	// from a sample under way as the key changed (made again at the next, 25 ms on).
	waitCarry(t, lab)
	time.Sleep(100 * time.Millisecond)
	before := badTags()
	if o, err := lab.H1.Try("ping", "-c", "5", "-i", "0.1", "-W", "1", "10.99.0.2"); err != nil {
		for _, ag := range ags {
			st, _ := ag.GetStats(context.Background(), &pb.StatsRequest{TunnelId: 1})
			l, _ := ag.ListTunnels(context.Background(), &pb.Empty{})
			t.Logf("receiver %v sender %v\n%v", st.GetReceiver(), st.GetSender(), l)
		}
		t.Fatalf("ping through the tunnel under the new key: %v\n%s", err, o)
	}
	if n := badTags() - before; n != 0 {
		t.Errorf("%d packets dropped for a bad tag under the new key", n)
	}

	// Neither the log nor the API shows a key.
	ctl, conn, err := controller.Dial(lab.CtlSock, sockrpc.TLS{})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	st, err := ctl.Status(context.Background(), &pb.StatusRequest{})
	if err != nil {
		t.Fatal(err)
	}
	paths, err := ctl.Paths(context.Background(), &pb.PathsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	shown := out() + protojson.Format(st) + protojson.Format(paths)
	for _, k := range [][]byte{key[:], old[:]} {
		for _, enc := range []string{hex.EncodeToString(k), base64.StdEncoding.EncodeToString(k), base64.StdEncoding.EncodeToString(k)[:20]} {
			if strings.Contains(shown, enc) {
				t.Errorf("a key shows in the controller's log or API (as %s)", enc)
			}
		}
	}
	if !strings.Contains(out(), want[0]) {
		t.Errorf("the controller's log does not name the key it gave by its id %s:\n%s", want[0], out())
	}
}

// startWithKeys starts the lab's controller with a network file whose tunnel names
// keyFile, and returns its output so far.
func startWithKeys(t *testing.T, lab *labnet.Lab, keyFile string) (out func() string) {
	t.Helper()
	b, err := os.ReadFile(lab.Network("auto", nil))
	if err != nil {
		t.Fatal(err)
	}
	network := filepath.Join(lab.Dir, "network-keys.yaml")
	if err := os.WriteFile(network, append(b, "    keys: ["+keyFile+"]\n"...), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd, out := lab.Ctl.Start(bin, "controller", "--network", network, "--listen", lab.CtlSock, "--metrics", "")
	t.Cleanup(func() { cmd.Process.Signal(os.Interrupt); cmd.Wait() })
	return out
}

// A tunnel added without authentication cannot take the network file's keys: the
// controller says so in status and still steers it.
func TestControllerReportsKeysItCannotGive(t *testing.T) {
	if bin == "" {
		t.Skip("needs root")
	}
	lab := labnet.New(t, bin, a2[:2], labnet.Options{NoAuth: true})
	keyFile := filepath.Join(t.TempDir(), "new.key")
	if err := agent.WriteKeyFile(keyFile); err != nil {
		t.Fatal(err)
	}
	startWithKeys(t, lab, keyFile)
	var ctl pb.ControllerClient
	for deadline := time.Now().Add(10 * time.Second); ctl == nil; time.Sleep(50 * time.Millisecond) {
		c, conn, err := controller.Dial(lab.CtlSock, sockrpc.TLS{})
		if err == nil {
			defer conn.Close()
			ctl = c
		} else if time.Now().After(deadline) {
			t.Fatal(err)
		}
	}
	st := waitStatus(t, ctl, 10*time.Second, "agents connected, keys refused", func(st *pb.StatusResponse) bool {
		for _, a := range st.Agents {
			if !a.Connected || !strings.Contains(a.LastError, "does not authenticate") {
				return false
			}
		}
		return len(st.Agents) == 2
	})
	t.Logf("%s: %s", st.Agents[0].Name, st.Agents[0].LastError)
	waitStatus(t, ctl, 10*time.Second, "the tunnel steered", func(*pb.StatusResponse) bool {
		p, err := ctl.Paths(context.Background(), &pb.PathsRequest{TunnelId: 1})
		return err == nil && len(p.Directions) == 2 && p.Directions[0].Mode != "-"
	})
}
