// Package sockrpc serves and dials Plait's gRPC APIs (agent, controller, switch) on a
// Unix socket or on TCP. Who may call is decided where the API listens:
//
//   - unix:PATH (or a bare path): the socket is mode 0600, or 0660 with a group, and
//     every call is checked against the caller's credentials (SO_PEERCRED): root, the
//     server's own user, or a member of the group.
//   - HOST:PORT: mutual TLS (the client shows a certificate the configured CA signed)
//     is required on anything but loopback; on loopback TLS is optional.
package sockrpc

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"strings"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
)

// Endpoint is where an API listens or is reached: a Unix socket or a TCP address.
type Endpoint struct {
	Unix    bool
	Address string // the socket's path, or HOST:PORT
}

// ParseEndpoint reads unix:PATH, a path (starting with / or ., or ending in .sock), or
// HOST:PORT.
func ParseEndpoint(s string) (Endpoint, error) {
	switch {
	case strings.HasPrefix(s, "unix:"):
		p := strings.TrimPrefix(s, "unix:")
		if p == "" {
			return Endpoint{}, fmt.Errorf("%q names no socket: give unix:PATH", s)
		}
		return Endpoint{Unix: true, Address: p}, nil
	case strings.HasPrefix(s, "/") || strings.HasPrefix(s, ".") || strings.HasSuffix(s, ".sock"):
		return Endpoint{Unix: true, Address: s}, nil
	}
	if _, port, err := net.SplitHostPort(s); err != nil || port == "" {
		return Endpoint{}, fmt.Errorf("%q is neither unix:PATH nor HOST:PORT", s)
	}
	return Endpoint{Address: s}, nil
}

func (e Endpoint) String() string {
	if e.Unix {
		return "unix:" + e.Address
	}
	return e.Address
}

// Loopback is true for a Unix socket and for a TCP address every resolution of which is
// a loopback address.
func (e Endpoint) Loopback() bool {
	if e.Unix {
		return true
	}
	host, _, _ := net.SplitHostPort(e.Address)
	if a, err := netip.ParseAddr(host); err == nil {
		return a.IsLoopback()
	}
	if host == "" {
		return false // all addresses
	}
	addrs, err := net.LookupHost(host)
	if err != nil || len(addrs) == 0 {
		return false
	}
	for _, s := range addrs {
		if a, err := netip.ParseAddr(s); err != nil || !a.IsLoopback() {
			return false
		}
	}
	return true
}

// Listener says where and to whom an API is offered.
type Listener struct {
	Endpoint Endpoint
	TLS      TLS    // TCP only; with a CA, clients must show a certificate it signed
	Group    string // Unix only: a group whose members may call too (socket mode 0660)
}

// Describe says where the API listens and who may call it, for the daemons' first line.
func (l Listener) Describe() string {
	switch {
	case l.Endpoint.Unix && l.Group != "":
		return fmt.Sprintf("%s (root, uid %d and group %s)", l.Endpoint, os.Geteuid(), l.Group)
	case l.Endpoint.Unix:
		return fmt.Sprintf("%s (root and uid %d)", l.Endpoint, os.Geteuid())
	case l.TLS.CA != "":
		return fmt.Sprintf("%s (mutual TLS: clients with a certificate from %s)", l.Endpoint, l.TLS.CA)
	case l.TLS.Cert != "":
		return fmt.Sprintf("%s (TLS, any local client)", l.Endpoint)
	}
	return fmt.Sprintf("%s (plaintext, any local client)", l.Endpoint)
}

// Server is an address claimed for an API, with the gRPC server that checks its
// callers: register services on it, then Serve.
type Server struct {
	*grpc.Server
	lis  net.Listener
	Name string // where and to whom (Listener.Describe)
}

// Claim takes l's address before anything else happens, so that a second daemon that
// finds its address taken stops before it touches any state.
func Claim(l Listener) (*Server, error) {
	srv, lis, err := Listen(l)
	if err != nil {
		return nil, err
	}
	return &Server{Server: srv, lis: lis, Name: l.Describe()}, nil
}

// Serve serves until ctx ends.
func (s *Server) Serve(ctx context.Context) error {
	go func() {
		<-ctx.Done()
		s.GracefulStop()
	}()
	return s.Server.Serve(s.lis)
}

// Close gives the address up without serving (a Unix socket is removed).
func (s *Server) Close() { s.lis.Close() }

// Listen claims l's address and builds the server that checks its callers (Claim
// wraps both). Closing the listener (Serve's end) removes a Unix socket.
func Listen(l Listener) (*grpc.Server, net.Listener, error) {
	if l.Endpoint.Unix {
		if l.TLS.Enabled() {
			return nil, nil, fmt.Errorf("%s: TLS is for TCP addresses; a Unix socket is guarded by its credentials check", l.Endpoint)
		}
		gid := -1
		if l.Group != "" {
			var err error
			if gid, err = lookupGroup(l.Group); err != nil {
				return nil, nil, err
			}
		}
		lis, err := listenUnix(l.Endpoint.Address, gid)
		if err != nil {
			return nil, nil, err
		}
		pc := peerCheck{uid: os.Geteuid(), gid: gid, socket: l.Endpoint.Address}
		srv := grpc.NewServer(grpc.Creds(peerCreds{insecure.NewCredentials()}),
			grpc.UnaryInterceptor(pc.unary), grpc.StreamInterceptor(pc.stream))
		return srv, lis, nil
	}
	if l.Group != "" {
		return nil, nil, fmt.Errorf("%s: a group is for Unix sockets; TCP clients are checked by TLS", l.Endpoint)
	}
	if !l.Endpoint.Loopback() && l.TLS.CA == "" {
		return nil, nil, fmt.Errorf("%s is not a loopback address: serving on it needs mutual TLS, give a CA, certificate and key (plait cert makes them)", l.Endpoint)
	}
	lis, err := net.Listen("tcp", l.Endpoint.Address)
	if err != nil {
		return nil, nil, fmt.Errorf("listen on %s: %w", l.Endpoint, err)
	}
	var opts []grpc.ServerOption
	if l.TLS.Enabled() {
		cfg, err := l.TLS.server()
		if err != nil {
			lis.Close()
			return nil, nil, err
		}
		opts = append(opts, grpc.Creds(refusals{TransportCredentials: credentials.NewTLS(cfg), where: lis.Addr().String(), last: new(atomic.Int64)}))
	}
	return grpc.NewServer(opts...), lis, nil
}

// Dial connects to target (unix:PATH, a path, or HOST:PORT), with TLS when t names any
// file; the connection is made on first use. opts come after Dial's own.
func Dial(target string, t TLS, opts ...grpc.DialOption) (*grpc.ClientConn, error) {
	e, err := ParseEndpoint(target)
	if err != nil {
		return nil, err
	}
	creds := insecure.NewCredentials()
	if t.Enabled() {
		if e.Unix {
			return nil, fmt.Errorf("%s: TLS is for TCP addresses, not Unix sockets", e)
		}
		cfg, err := t.client()
		if err != nil {
			return nil, err
		}
		creds = credentials.NewTLS(cfg)
	}
	addr := e.Address
	if e.Unix {
		addr = "unix://" + e.Address
	} else {
		addr = "dns:///" + e.Address
	}
	conn, err := grpc.NewClient(addr, append([]grpc.DialOption{grpc.WithTransportCredentials(creds)}, opts...)...)
	if err != nil {
		return nil, fmt.Errorf("connect to %s: %w", e, err)
	}
	return conn, nil
}

// refusals logs the clients TLS refuses (no certificate, another CA's, plaintext), at
// most one a second so that a scanner cannot flood the log: the server's side of the
// reason the client is told.
type refusals struct {
	credentials.TransportCredentials
	where string
	last  *atomic.Int64 // unix ns of the last line
}

func (r refusals) ServerHandshake(conn net.Conn) (net.Conn, credentials.AuthInfo, error) {
	c, info, err := r.TransportCredentials.ServerHandshake(conn)
	if err != nil {
		now := time.Now().UnixNano()
		if last := r.last.Load(); now-last >= int64(time.Second) && r.last.CompareAndSwap(last, now) {
			slog.Warn("refused a client", "listener", r.where, "client", conn.RemoteAddr().String(), "err", err)
		}
	}
	return c, info, err
}

func (r refusals) Clone() credentials.TransportCredentials {
	return refusals{TransportCredentials: r.TransportCredentials.Clone(), where: r.where, last: r.last}
}
