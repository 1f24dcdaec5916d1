package agent

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	pb "github.com/plait/plait/api/plait/v1"
)

// Key files: made 0600 by genkey and read back; refused, with the reason and the fix and
// without their content, when others may read them or they hold no key.
func TestKeyFiles(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good.key")
	if err := WriteKeyFile(good); err != nil {
		t.Fatal(err)
	}
	if fi, _ := os.Stat(good); fi.Mode().Perm() != 0o600 {
		t.Errorf("genkey made mode %04o, want 0600", fi.Mode().Perm())
	}
	if err := WriteKeyFile(good); err == nil {
		t.Error("genkey overwrote an existing key file")
	}
	k, err := ReadKeyFile(good)
	if err != nil || k == [16]byte{} {
		t.Fatalf("read back: %x, %v", k, err)
	}
	secret := "00112233445566778899aabbccddee"
	for name, c := range map[string]struct {
		content string
		mode    os.FileMode
		want    string
	}{
		"readable by others": {secret + "ff\n", 0o644, "chmod 600"},
		"short":              {secret, 0o600, "32 hex digits"},
		"not hex":            {secret + "zz", 0o600, "32 hex digits"},
		"long":               {secret + "ffff", 0o600, "32 hex digits"},
	} {
		path := filepath.Join(dir, strings.ReplaceAll(name, " ", "_"))
		if err := os.WriteFile(path, []byte(c.content), c.mode); err != nil {
			t.Fatal(err)
		}
		os.Chmod(path, c.mode)
		_, err := ReadKeyFile(path)
		if err == nil || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), secret) {
			t.Errorf("%s: %v; want an error saying %q, without the file's content", name, err, c.want)
		}
	}
}

// Tunnels that send authenticate unless told not to; bad key settings are refused.
func TestTunnelKeys(t *testing.T) {
	key := testKey[:]
	for name, c := range map[string]struct {
		auth        *pb.Auth
		receiveOnly bool
		keys        int
		want        string
	}{
		"one key":            {&pb.Auth{Keys: [][]byte{key}}, false, 1, ""},
		"rolling over":       {&pb.Auth{Keys: [][]byte{key, key[:16]}}, false, 2, ""},
		"off":                {&pb.Auth{Disabled: true}, false, 0, ""},
		"receive-only":       {nil, true, 0, ""},
		"none":               {nil, false, 0, "no key"},
		"three":              {&pb.Auth{Keys: [][]byte{key, key, key}}, false, 0, "3 keys"},
		"short":              {&pb.Auth{Keys: [][]byte{key[:15]}}, false, 0, "15 bytes"},
		"keys and off":       {&pb.Auth{Keys: [][]byte{key}, Disabled: true}, false, 0, "keys but"},
		"receive-only keyed": {&pb.Auth{Keys: [][]byte{key}}, true, 0, "receive-only"},
	} {
		keys, err := tunnelKeys(&pb.TunnelConfig{Id: 1, Auth: c.auth, ReceiveOnly: c.receiveOnly})
		switch {
		case c.want == "" && (err != nil || len(keys) != c.keys):
			t.Errorf("%s: %d keys, %v; want %d", name, len(keys), err, c.keys)
		case c.want != "" && (status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%s: %v; want InvalidArgument saying %q", name, err, c.want)
		}
	}
}

// The agent never shows a key: its answers carry key ids, the same on both ends when the
// keys are.
func TestKeysAreNotShown(t *testing.T) {
	p := newPair(t, 1)
	ctx := context.Background()
	var ids []string
	for _, h := range []struct {
		a             *Agent
		local, remote string
	}{{p.a1, "1", "2"}, {p.a2, "2", "1"}} {
		ns := p.h1
		if h.a == p.a2 {
			ns = p.h2
		}
		tun, err := run(t, ns, func() (*pb.Tunnel, error) { return h.a.Configure(ctx, tunnelConfig(h.local, h.remote, 1)) })
		if err != nil {
			t.Fatal(err)
		}
		list, _ := h.a.ListTunnels(ctx, &pb.Empty{})
		for _, c := range []*pb.TunnelConfig{tun.Config, list.Tunnels[0].Config} {
			if len(c.Auth.GetKeys()) != 0 || len(c.Auth.GetKeyIds()) != 1 {
				t.Fatalf("the agent answered with keys %x, key ids %v", c.Auth.GetKeys(), c.Auth.GetKeyIds())
			}
		}
		ids = append(ids, tun.Config.Auth.KeyIds[0])
	}
	if ids[0] != ids[1] || strings.Contains(ids[0], "706c6169") {
		t.Errorf("key ids %v: want equal ids that are not the key", ids)
	}
}

// Mismatched keys on the two ends: nothing passes, and every packet is a counted drop.
func TestMismatchedKeysAreCountedDrops(t *testing.T) {
	p := newPair(t, 1)
	ctx := context.Background()
	if _, err := run(t, p.h1, func() (*pb.Tunnel, error) { return p.a1.Configure(ctx, tunnelConfig("1", "2", 1)) }); err != nil {
		t.Fatal(err)
	}
	other := tunnelConfig("2", "1", 1)
	other.Auth.Keys = [][]byte{[]byte("a different key!")}
	if _, err := run(t, p.h2, func() (*pb.Tunnel, error) { return p.a2.Configure(ctx, other) }); err != nil {
		t.Fatal(err)
	}
	if _, err := p.h1.Try("ping", "-c", "5", "-i", "0.02", "-W", "1", "10.99.0.2"); err == nil {
		t.Fatal("ping crossed a tunnel whose ends have different keys")
	}
	_, rcv, err := p.a2.dp.Verdicts(nil)
	if err != nil {
		t.Fatal(err)
	}
	if rcv["drop_bad_tag"] < 5 {
		t.Errorf("h2 counted %d bad tags for 5 pings", rcv["drop_bad_tag"])
	}
}

// A tunnel removed and added again on one end numbers its packets afresh; the other end,
// which remembers the old numbers, takes the new ones after at most one packet.
func TestReAddedTunnelIsTaken(t *testing.T) {
	p := newPair(t, 1)
	ctx := context.Background()
	add := func() {
		t.Helper()
		if _, err := run(t, p.h1, func() (*pb.Tunnel, error) { return p.a1.Configure(ctx, tunnelConfig("1", "2", 1)) }); err != nil {
			t.Fatal(err)
		}
	}
	add()
	if _, err := run(t, p.h2, func() (*pb.Tunnel, error) { return p.a2.Configure(ctx, tunnelConfig("2", "1", 1)) }); err != nil {
		t.Fatal(err)
	}
	p.h1.Run("ping", "-c", "20", "-i", "0.01", "-W", "2", "10.99.0.2")
	if _, err := run(t, p.h1, func() (*pb.Empty, error) { return p.a1.RemoveTunnel(ctx, &pb.TunnelRef{Id: 7}) }); err != nil {
		t.Fatal(err)
	}
	add()
	out := p.h1.Run("ping", "-c", "10", "-i", "0.05", "-W", "1", "10.99.0.2")
	if !strings.Contains(out, " 10 received") && !strings.Contains(out, " 9 received") {
		t.Errorf("after h1's tunnel was added again, ping: %s", out)
	}
}

// Keys installed on a running tunnel (SetKeys, as the controller does) roll over without
// a gap: the new key second on both ends, then first, then alone; not one packet is
// dropped for its tag. Bad keys are refused and change nothing.
func TestSetKeysRollsOver(t *testing.T) {
	p := newPair(t, 1)
	ctx := context.Background()
	ends := []*Agent{p.a1, p.a2}
	if _, err := run(t, p.h1, func() (*pb.Tunnel, error) { return p.a1.Configure(ctx, tunnelConfig("1", "2", 1)) }); err != nil {
		t.Fatal(err)
	}
	if _, err := run(t, p.h2, func() (*pb.Tunnel, error) { return p.a2.Configure(ctx, tunnelConfig("2", "1", 1)) }); err != nil {
		t.Fatal(err)
	}
	oldKey, newKey := testKey[:], []byte("the next key 16B")
	badTags := func() uint64 {
		var n uint64
		for _, e := range ends {
			_, rcv, err := e.dp.Verdicts(nil)
			if err != nil {
				t.Fatal(err)
			}
			n += rcv["drop_bad_tag"]
		}
		return n
	}
	for step, keys := range [][][]byte{{oldKey, newKey}, {newKey, oldKey}, {newKey}} {
		for _, e := range ends {
			tun, err := e.SetKeys(ctx, &pb.SetKeysRequest{TunnelId: 7, Keys: keys})
			if err != nil {
				t.Fatalf("step %d: %v", step, err)
			}
			if len(tun.Config.Auth.GetKeys()) != 0 || len(tun.Config.Auth.GetKeyIds()) != len(keys) || tun.Config.Auth.KeyIds[0] != KeyID(keys[0]) {
				t.Fatalf("step %d: the agent answered with keys %x, ids %v", step, tun.Config.Auth.GetKeys(), tun.Config.Auth.GetKeyIds())
			}
		}
		if out, err := p.h1.Try("ping", "-c", "5", "-i", "0.02", "-W", "1", "10.99.0.2"); err != nil {
			t.Fatalf("step %d: ping: %v\n%s", step, err, out)
		}
	}
	if n := badTags(); n != 0 {
		t.Errorf("%d packets dropped for their tag while the keys rolled over", n)
	}

	for name, c := range map[string]struct {
		keys [][]byte
		code codes.Code
		want string
	}{
		"short": {[][]byte{newKey[:15]}, codes.InvalidArgument, "15 bytes"},
		"three": {[][]byte{newKey, newKey, newKey}, codes.InvalidArgument, "3 keys"},
		"none":  {nil, codes.InvalidArgument, "no key"},
	} {
		_, err := p.a1.SetKeys(ctx, &pb.SetKeysRequest{TunnelId: 7, Keys: c.keys})
		if status.Code(err) != c.code || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v; want %v saying %q", name, err, c.code, c.want)
		}
	}
	l, _ := p.a1.ListTunnels(ctx, &pb.Empty{})
	if ids := l.Tunnels[0].Config.Auth.GetKeyIds(); len(ids) != 1 || ids[0] != KeyID(newKey) {
		t.Errorf("refused keys changed the tunnel's: %v", ids)
	}
	off := tunnelConfig("1", "2", 1)
	off.Auth = &pb.Auth{Disabled: true}
	if _, err := run(t, p.h1, func() (*pb.Tunnel, error) { return p.a1.Configure(ctx, off) }); err != nil {
		t.Fatal(err)
	}
	if _, err := p.a1.SetKeys(ctx, &pb.SetKeysRequest{TunnelId: 7, Keys: [][]byte{newKey}}); status.Code(err) != codes.FailedPrecondition {
		t.Errorf("keys for a tunnel without authentication: %v, want FailedPrecondition", err)
	}
}
