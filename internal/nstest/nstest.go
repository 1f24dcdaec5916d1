// Package nstest gives tests throw-away network namespaces, veth links and processes
// inside them, all removed when the test ends, also when it fails or panics. Commands run
// through nsenter rather than `ip netns exec`, which also unshares the mount namespace and
// remounts /sys, hiding /sys/fs/bpf so that BPF pins would die with the process. How
// tests use it: CONTRIBUTING.md.
package nstest

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vishvananda/netns"
)

// Prefix starts the name of every namespace this package creates; stale ones from a
// killed test run are removed by the next run.
const Prefix = "plaittest-"

// RequireRoot skips the test when it cannot create namespaces.
func RequireRoot(t testing.TB) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root to create network namespaces (run make test as root)")
	}
	for _, tool := range []string{"ip", "nsenter"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("needs %s on PATH: %v", tool, err)
		}
	}
}

var sweepOnce sync.Once

// sweep deletes namespaces left behind by test processes that no longer run.
func sweep() {
	entries, _ := os.ReadDir("/run/netns")
	for _, e := range entries {
		name := e.Name()
		if !strings.HasPrefix(name, Prefix) {
			continue
		}
		pid, err := strconv.Atoi(strings.SplitN(strings.TrimPrefix(name, Prefix), "-", 2)[0])
		if err != nil || processAlive(pid) {
			continue
		}
		killAll(name)
		exec.Command("ip", "netns", "delete", name).Run()
	}
}

func processAlive(pid int) bool {
	_, err := os.Stat(filepath.Join("/proc", strconv.Itoa(pid)))
	return err == nil
}

// NS is a named network namespace that lives as long as the test.
type NS struct {
	Name string
	t    testing.TB
}

// New creates a namespace called Prefix-<pid>-<name> with loopback up.
func New(t testing.TB, name string) *NS {
	t.Helper()
	RequireRoot(t)
	sweepOnce.Do(sweep)
	full := fmt.Sprintf("%s%d-%s", Prefix, os.Getpid(), name)
	exec.Command("ip", "netns", "delete", full).Run()
	if out, err := exec.Command("ip", "netns", "add", full).CombinedOutput(); err != nil {
		t.Fatalf("ip netns add %s: %v: %s", full, err, out)
	}
	ns := &NS{Name: full, t: t}
	t.Cleanup(func() {
		killAll(full)
		if out, err := exec.Command("ip", "netns", "delete", full).CombinedOutput(); err != nil {
			t.Errorf("ip netns delete %s: %v: %s", full, err, out)
		}
	})
	ns.Run("ip", "link", "set", "lo", "up")
	return ns
}

// killAll kills every process in the namespace and waits for them to go. The test
// process itself can show up: Do may have run on the main thread, which Go then retires
// inside the namespace instead of reusing.
func killAll(name string) {
	pids := func() []int {
		out, _ := exec.Command("ip", "netns", "pids", name).Output()
		var pids []int
		for _, f := range strings.Fields(string(out)) {
			if pid, err := strconv.Atoi(f); err == nil && pid != os.Getpid() {
				pids = append(pids, pid)
			}
		}
		return pids
	}
	left := pids()
	for _, pid := range left {
		if proc, err := os.FindProcess(pid); err == nil {
			proc.Kill()
		}
	}
	for i := 0; i < 50 && len(left) > 0; i++ {
		time.Sleep(20 * time.Millisecond)
		left = pids()
	}
}

// Path is the namespace's bind mount, for nsenter --net and setns.
func (n *NS) Path() string { return "/run/netns/" + n.Name }

// Command returns a command that runs inside the namespace.
func (n *NS) Command(name string, args ...string) *exec.Cmd {
	return exec.Command("nsenter", append([]string{"--net=" + n.Path(), "--", name}, args...)...)
}

// Run runs a command in the namespace and fails the test if it fails; it returns stdout.
func (n *NS) Run(name string, args ...string) string {
	n.t.Helper()
	out, err := n.Try(name, args...)
	if err != nil {
		n.t.Fatalf("%s: %v", n.Name, err)
	}
	return out
}

// Try runs a command in the namespace and returns its stdout, or an error with its stderr.
func (n *NS) Try(name string, args ...string) (string, error) {
	var stdout, stderr bytes.Buffer
	cmd := n.Command(name, args...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.String(), fmt.Errorf("%s %s: %v: %s", name, strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return stdout.String(), nil
}

// Start starts a command in the namespace in the background. It is killed when the test
// ends; its combined output is returned by the function Start returns.
func (n *NS) Start(name string, args ...string) (cmd *exec.Cmd, output func() string) {
	n.t.Helper()
	var buf syncBuffer
	cmd = n.Command(name, args...)
	cmd.Stdout, cmd.Stderr = &buf, &buf
	if err := cmd.Start(); err != nil {
		n.t.Fatalf("start %s in %s: %v", name, n.Name, err)
	}
	n.t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
	})
	return cmd, buf.String
}

// Do runs f on an OS thread that has entered the namespace, and puts the thread back
// in its own namespace afterwards. A thread that cannot go back stays locked, so Go
// retires it rather than run other goroutines in the wrong namespace.
func (n *NS) Do(f func() error) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		orig, err := netns.Get()
		if err != nil {
			errc <- fmt.Errorf("current namespace: %w", err)
			return
		}
		defer orig.Close()
		h, err := netns.GetFromPath(n.Path())
		if err != nil {
			errc <- err
			return
		}
		defer h.Close()
		if err := netns.Set(h); err != nil {
			errc <- fmt.Errorf("setns %s: %w", n.Name, err)
			return
		}
		err = f()
		if netns.Set(orig) == nil {
			runtime.UnlockOSThread()
		}
		errc <- err
	}()
	return <-errc
}

// Veth links interface aName in a with interface bName in b.
func Veth(t testing.TB, a *NS, aName string, b *NS, bName string) {
	t.Helper()
	tmp := fmt.Sprintf("pt%d", time.Now().UnixNano()%1e9)
	if out, err := exec.Command("ip", "link", "add", tmp+"a", "netns", a.Name, "type", "veth", "peer", "name", tmp+"b", "netns", b.Name).CombinedOutput(); err != nil {
		t.Fatalf("ip link add veth: %v: %s", err, out)
	}
	a.Run("ip", "link", "set", tmp+"a", "name", aName)
	b.Run("ip", "link", "set", tmp+"b", "name", bName)
	a.Run("ip", "link", "set", aName, "up")
	b.Run("ip", "link", "set", bName, "up")
}

// Addr assigns an address (CIDR) to an interface in the namespace.
func (n *NS) Addr(dev, cidr string) {
	n.t.Helper()
	n.Run("ip", "addr", "add", cidr, "dev", dev)
}

// Offloads turns segmentation and checksum offloads on or off, so that userspace switches
// and striping see wire-sized packets with complete checksums.
func (n *NS) Offloads(dev string, on bool) {
	n.t.Helper()
	v := "off"
	if on {
		v = "on"
	}
	n.Run("ethtool", "-K", dev, "tx", v, "rx", v, "tso", v, "gso", v, "gro", v)
}

type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
