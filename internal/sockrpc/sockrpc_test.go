package sockrpc

import (
	"context"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
)

// serve runs a health service on l and returns its address.
func serve(t *testing.T, l Listener) string {
	t.Helper()
	srv, lis, err := Listen(l)
	if err != nil {
		t.Fatal(err)
	}
	healthpb.RegisterHealthServer(srv, health.NewServer())
	go srv.Serve(lis)
	t.Cleanup(srv.Stop)
	if l.Endpoint.Unix {
		return "unix:" + l.Endpoint.Address
	}
	return lis.Addr().String()
}

func call(target string, tls TLS) error {
	conn, err := Dial(target, tls)
	if err != nil {
		return err
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	_, err = healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{})
	return err
}

func TestParseEndpoint(t *testing.T) {
	for in, want := range map[string]Endpoint{
		"unix:/run/a.sock": {Unix: true, Address: "/run/a.sock"},
		"/run/a.sock":      {Unix: true, Address: "/run/a.sock"},
		"a.sock":           {Unix: true, Address: "a.sock"},
		"10.0.0.1:9559":    {Address: "10.0.0.1:9559"},
		"[::1]:9559":       {Address: "[::1]:9559"},
	} {
		if got, err := ParseEndpoint(in); err != nil || got != want {
			t.Errorf("ParseEndpoint(%q) = %+v, %v; want %+v", in, got, err, want)
		}
	}
	for _, bad := range []string{"unix:", "10.0.0.1", "agent"} {
		if _, err := ParseEndpoint(bad); err == nil {
			t.Errorf("ParseEndpoint(%q) accepted", bad)
		}
	}
	for addr, want := range map[string]bool{"127.0.0.1:1": true, "[::1]:1": true, "localhost:1": true, "10.0.0.1:1": false, ":1": false, "0.0.0.0:1": false} {
		if got := (Endpoint{Address: addr}).Loopback(); got != want {
			t.Errorf("%s loopback = %v, want %v", addr, got, want)
		}
	}
}

// A socket is 0600; a second server refuses a live socket and leaves it working; a
// stale one (its server killed) is replaced; a file that is not a socket is refused.
func TestUnixSocketClaim(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "agent.sock")
	l := Listener{Endpoint: Endpoint{Unix: true, Address: sock}}
	target := serve(t, l)
	if fi, err := os.Stat(sock); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("socket mode %v (%v), want 0600", fi.Mode().Perm(), err)
	}
	if _, _, err := Listen(l); err == nil || !strings.Contains(err.Error(), "another process serves") {
		t.Fatalf("second server on a live socket: %v, want a refusal", err)
	}
	if err := call(target, TLS{}); err != nil {
		t.Fatalf("the first server stopped answering after the second was refused: %v", err)
	}

	stale := filepath.Join(t.TempDir(), "stale.sock")
	lis, err := net.Listen("unix", stale)
	if err != nil {
		t.Fatal(err)
	}
	lis.(*net.UnixListener).SetUnlinkOnClose(false)
	lis.Close() // as a killed process leaves it: the file stays, nobody listens
	serve(t, Listener{Endpoint: Endpoint{Unix: true, Address: stale}})
	if err := call("unix:"+stale, TLS{}); err != nil {
		t.Fatalf("server on a stale socket: %v", err)
	}

	file := filepath.Join(t.TempDir(), "file")
	os.WriteFile(file, nil, 0o644)
	if _, _, err := Listen(Listener{Endpoint: Endpoint{Unix: true, Address: file}}); err == nil || !strings.Contains(err.Error(), "not a socket") {
		t.Fatalf("socket path naming a regular file: %v, want a refusal", err)
	}
	if _, err := os.Stat(file); err != nil {
		t.Fatal("the regular file was removed")
	}
}

// With a group the socket is 0660 and belongs to it.
func TestUnixSocketGroup(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "g.sock")
	serve(t, Listener{Endpoint: Endpoint{Unix: true, Address: sock}, Group: "65534"})
	fi, err := os.Stat(sock)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o660 || fi.Sys().(*syscall.Stat_t).Gid != 65534 {
		t.Fatalf("socket mode %v gid %d, want 0660 and 65534", fi.Mode().Perm(), fi.Sys().(*syscall.Stat_t).Gid)
	}
}

// The credentials check refuses a user who reaches the socket but is not admitted (here
// the file mode is opened up by hand, as in the instant before the server sets it), and
// admits one in the socket's group.
func TestPeerCredentials(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to call as another user")
	}
	dir, err := os.MkdirTemp("", "sockrpc")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	os.Chmod(dir, 0o755)
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "client")
	copyFile(t, self, bin)

	asNobody := func(sock string, groups ...uint32) (string, error) {
		cmd := exec.Command(bin, "-test.run", "^TestHelperClient$")
		cmd.Env = append(os.Environ(), "SOCKRPC_CLIENT="+sock)
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534, Groups: groups}}
		out, err := cmd.CombinedOutput()
		return string(out), err
	}

	sock := filepath.Join(dir, "a.sock")
	serve(t, Listener{Endpoint: Endpoint{Unix: true, Address: sock}})
	os.Chmod(sock, 0o777)
	out, err := asNobody(sock)
	if err == nil || !strings.Contains(out, "PermissionDenied") || !strings.Contains(out, "uid 65534") {
		t.Fatalf("uid 65534 on root's socket: %v\n%s\nwant PermissionDenied naming the uid", err, out)
	}

	gsock := filepath.Join(dir, "g.sock")
	serve(t, Listener{Endpoint: Endpoint{Unix: true, Address: gsock}, Group: "4242"})
	if out, err := asNobody(gsock, 4242); err != nil {
		t.Fatalf("member of the socket's group refused: %v\n%s", err, out)
	}
	if out, err := asNobody(gsock); err == nil {
		t.Fatalf("non-member admitted to a group socket:\n%s", out)
	}
}

// TestHelperClient is the client TestPeerCredentials runs as another user.
func TestHelperClient(t *testing.T) {
	sock := os.Getenv("SOCKRPC_CLIENT")
	if sock == "" {
		t.Skip("run by TestPeerCredentials")
	}
	if err := call("unix:"+sock, TLS{}); err != nil {
		t.Fatalf("%s: %v", status.Code(err), err)
	}
}

func copyFile(t *testing.T, from, to string) {
	in, err := os.Open(from)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	out, err := os.OpenFile(to, os.O_CREATE|os.O_WRONLY, 0o755)
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	if _, err := io.Copy(out, in); err != nil {
		t.Fatal(err)
	}
}

// labCA makes a CA and a certificate for a server on 127.0.0.1 and one for a client.
func labCA(t *testing.T) (dir string, server, client TLS) {
	dir = t.TempDir()
	if err := NewCA(dir, "test CA", time.Hour); err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{"server", "client"} {
		if err := Issue(dir, dir, n, []string{"127.0.0.1", "localhost"}, time.Hour); err != nil {
			t.Fatal(err)
		}
	}
	ca := filepath.Join(dir, "ca.pem")
	return dir, TLS{CA: ca, Cert: filepath.Join(dir, "server.pem"), Key: filepath.Join(dir, "server-key.pem")},
		TLS{CA: ca, Cert: filepath.Join(dir, "client.pem"), Key: filepath.Join(dir, "client-key.pem")}
}

// Mutual TLS admits a client with a certificate from the CA and refuses, with a message
// that says what is missing, one without a certificate, one from another CA and one
// speaking plaintext.
func TestMutualTLS(t *testing.T) {
	_, server, client := labCA(t)
	addr := serve(t, Listener{Endpoint: Endpoint{Address: "127.0.0.1:0"}, TLS: server})
	if err := call(addr, client); err != nil {
		t.Fatalf("client with a certificate from the CA: %v", err)
	}
	err := call(addr, TLS{CA: client.CA})
	if err == nil || !strings.Contains(Explain(err.Error()), "give a certificate and key its CA signed") {
		t.Fatalf("client without a certificate: %v, want a refusal asking for one", err)
	}
	_, _, rogue := labCA(t)
	rogue.CA = client.CA // trusts the server, shows a certificate from another CA
	if err := call(addr, rogue); err == nil || status.Code(err) != codes.Unavailable {
		t.Fatalf("client with another CA's certificate: %v, want refused", err)
	} else {
		t.Logf("another CA's certificate: %s", Explain(err.Error()))
	}
	if err := call(addr, TLS{}); err == nil {
		t.Fatal("plaintext client admitted to a TLS server")
	}
	// The client checks the server too: a server certificate from another CA is refused.
	_, _, other := labCA(t)
	other.CA = filepath.Join(filepath.Dir(other.CA), "ca.pem")
	if err := call(addr, TLS{CA: other.CA, Cert: other.Cert, Key: other.Key}); err == nil || !strings.Contains(err.Error(), "unknown authority") {
		t.Fatalf("server from another CA: %v, want refused", err)
	}
}

// Anything but loopback needs mutual TLS; TLS without client certificates is refused
// there too.
func TestNonLoopbackNeedsMutualTLS(t *testing.T) {
	_, server, _ := labCA(t)
	for _, l := range []Listener{
		{Endpoint: Endpoint{Address: "0.0.0.0:0"}},
		{Endpoint: Endpoint{Address: ":0"}, TLS: TLS{Cert: server.Cert, Key: server.Key}},
	} {
		if _, _, err := Listen(l); err == nil || !strings.Contains(err.Error(), "mutual TLS") {
			t.Errorf("%+v: %v, want a refusal asking for mutual TLS", l, err)
		}
	}
	srv, lis, err := Listen(Listener{Endpoint: Endpoint{Address: "0.0.0.0:0"}, TLS: server})
	if err != nil {
		t.Fatalf("mutual TLS on all addresses: %v", err)
	}
	lis.Close()
	srv.Stop()
}
