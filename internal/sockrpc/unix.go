package sockrpc

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
)

// listenUnix claims a socket path: a live server there is left alone (a second agent
// must not steal the first one's socket), a stale socket a killed process left is
// replaced, and anything else is refused. The socket is mode 0600, or 0660 owned by gid.
func listenUnix(path string, gid int) (net.Listener, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, fmt.Errorf("socket directory: %w", err)
	}
	if fi, err := os.Lstat(path); err == nil {
		if fi.Mode().Type() != os.ModeSocket {
			return nil, fmt.Errorf("%s exists and is not a socket: remove it or choose another socket path", path)
		}
		c, err := net.DialTimeout("unix", path, time.Second)
		if err == nil {
			c.Close()
			return nil, fmt.Errorf("another process serves on %s: stop it first, or give this one another socket", path)
		}
		if !errors.Is(err, syscall.ECONNREFUSED) {
			return nil, fmt.Errorf("socket %s exists and cannot be probed (%v): remove it if no server uses it", path, err)
		}
		if err := os.Remove(path); err != nil {
			return nil, fmt.Errorf("remove stale socket %s: %w", path, err)
		}
	}
	lis, err := net.Listen("unix", path)
	if err != nil {
		return nil, fmt.Errorf("listen on %s: %w", path, err)
	}
	mode := os.FileMode(0o600)
	if gid >= 0 {
		mode = 0o660
		if err := os.Chown(path, -1, gid); err != nil {
			lis.Close()
			return nil, fmt.Errorf("give socket %s to group %d: %w", path, gid, err)
		}
	}
	// Until the mode is set the socket has the umask's; the credentials check below
	// guards that instant too.
	if err := os.Chmod(path, mode); err != nil {
		lis.Close()
		return nil, fmt.Errorf("socket %s: %w", path, err)
	}
	return lis, nil
}

func lookupGroup(name string) (int, error) {
	if n, err := strconv.Atoi(name); err == nil {
		return n, nil
	}
	g, err := user.LookupGroup(name)
	if err != nil {
		return 0, fmt.Errorf("socket group: %w", err)
	}
	return strconv.Atoi(g.Gid)
}

// peerCreds reads the caller's credentials (SO_PEERCRED) off each accepted Unix
// connection, for peerCheck.
type peerCreds struct {
	credentials.TransportCredentials
}

type peerInfo struct {
	credentials.AuthInfo
	cred *unix.Ucred
}

func (c peerCreds) ServerHandshake(conn net.Conn) (net.Conn, credentials.AuthInfo, error) {
	conn, info, err := c.TransportCredentials.ServerHandshake(conn)
	if err != nil {
		return nil, nil, err
	}
	uc, ok := conn.(*net.UnixConn)
	if !ok {
		return conn, peerInfo{AuthInfo: info}, nil
	}
	raw, err := uc.SyscallConn()
	if err != nil {
		return nil, nil, err
	}
	var cred *unix.Ucred
	var cerr error
	if err := raw.Control(func(fd uintptr) { cred, cerr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED) }); err != nil {
		return nil, nil, err
	}
	if cerr != nil {
		return nil, nil, fmt.Errorf("read peer credentials: %w", cerr)
	}
	return conn, peerInfo{AuthInfo: info, cred: cred}, nil
}

func (c peerCreds) Clone() credentials.TransportCredentials {
	return peerCreds{c.TransportCredentials.Clone()}
}

// peerCheck admits root, the server's own user and members of its socket group.
type peerCheck struct {
	uid, gid int
	socket   string
}

func (pc peerCheck) check(ctx context.Context) error {
	p, _ := peer.FromContext(ctx)
	info, ok := p.AuthInfo.(peerInfo)
	if !ok || info.cred == nil {
		return status.Error(codes.PermissionDenied, "the caller's credentials are unknown")
	}
	c := info.cred
	if c.Uid == 0 || int(c.Uid) == pc.uid || pc.gid >= 0 && (int(c.Gid) == pc.gid || inGroup(c.Pid, pc.gid)) {
		return nil
	}
	how := "start the server with a socket group and add the user to it"
	if pc.gid >= 0 {
		how = fmt.Sprintf("add the user to group %d", pc.gid)
	}
	slog.Warn("refused a caller", "socket", pc.socket, "uid", c.Uid, "pid", c.Pid)
	return status.Errorf(codes.PermissionDenied, "uid %d (pid %d) may not use %s: only root and uid %d may (%s)", c.Uid, c.Pid, pc.socket, pc.uid, how)
}

// inGroup reads a process's supplementary groups; SO_PEERCRED gives only the primary.
func inGroup(pid int32, gid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return false
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "Groups:"); ok {
			for _, f := range strings.Fields(rest) {
				if f == strconv.Itoa(gid) {
					return true
				}
			}
		}
	}
	return false
}

func (pc peerCheck) unary(ctx context.Context, req any, _ *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
	if err := pc.check(ctx); err != nil {
		return nil, err
	}
	return h(ctx, req)
}

func (pc peerCheck) stream(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, h grpc.StreamHandler) error {
	if err := pc.check(ss.Context()); err != nil {
		return err
	}
	return h(srv, ss)
}
