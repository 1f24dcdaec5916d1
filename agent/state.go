package agent

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"

	"golang.org/x/sys/unix"
	"google.golang.org/protobuf/encoding/protojson"

	pb "github.com/plait/plait/api/plait/v1"
	"github.com/plait/plait/ebpf/datapath"
)

// The configuration survives agent restarts in a JSON file beside (not in) the bpffs pins:
// the pins keep the datapath running, the file lets a new agent take it over.
type savedState struct {
	// NetnsCookie identifies the network namespace the state belongs to: inode numbers,
	// which name the default directories, are reused once a namespace is gone.
	NetnsCookie uint64        `json:"netns_cookie"`
	Tunnels     []savedTunnel `json:"tunnels"`
}

type savedTunnel struct {
	Config     json.RawMessage `json:"config"`
	Slot       uint32          `json:"slot"`
	Generation uint64          `json:"generation"`
	Down       []string        `json:"down,omitempty"`
	Estimates  []estimate      `json:"estimates,omitempty"`
}

type estimate struct {
	RateBps float64 `json:"rate_bps"`
	DelayUs float64 `json:"delay_us"`
}

func (a *Agent) save() error {
	cookie, err := netnsCookie()
	if err != nil {
		return err
	}
	st := savedState{NetnsCookie: cookie}
	for _, id := range a.ids() {
		t := a.tunnels[id]
		cfg, err := protojson.Marshal(t.cfg)
		if err != nil {
			return fmt.Errorf("encode tunnel %d: %w", id, err)
		}
		s := savedTunnel{Config: cfg, Slot: t.slot, Generation: t.gen}
		for _, p := range t.paths {
			if !p.up {
				s.Down = append(s.Down, p.cfg.Name)
			}
			s.Estimates = append(s.Estimates, estimate{p.est.RateBps, p.est.DelayUs})
		}
		st.Tunnels = append(st.Tunnels, s)
	}
	b, err := json.MarshalIndent(st, "", "  ")
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(a.opts.stateFile), 0o700); err != nil {
		return fmt.Errorf("save state: %w", err)
	}
	tmp := a.opts.stateFile + ".tmp"
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return fmt.Errorf("save state: %w", err)
	}
	return os.Rename(tmp, a.opts.stateFile)
}

// netnsCookie is the calling thread's network namespace's cookie, unique for the boot.
func netnsCookie() (uint64, error) {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return 0, fmt.Errorf("socket: %w", err)
	}
	defer unix.Close(fd)
	c, err := unix.GetsockoptUint64(fd, unix.SOL_SOCKET, unix.SO_NETNS_COOKIE)
	if err != nil {
		return 0, fmt.Errorf("network namespace cookie: %w", err)
	}
	return c, nil
}

// dropStale removes pins and saved state that another network namespace left behind
// (one that is gone, whose inode this namespace reuses): their links point at interfaces
// that no longer exist and their tunnels are not this host's.
func dropStale(o options) error {
	if _, err := os.Stat(o.pinDir); errors.Is(err, os.ErrNotExist) {
		return nil
	}
	cookie, err := netnsCookie()
	if err != nil {
		return err
	}
	var st savedState
	if b, err := os.ReadFile(o.stateFile); err == nil && json.Unmarshal(b, &st) == nil && st.NetnsCookie == cookie {
		return nil
	}
	o.log.Warn("dropping pins and state left by another network namespace", "pins", o.pinDir, "state", o.stateFile)
	if err := os.RemoveAll(o.pinDir); err != nil {
		return fmt.Errorf("remove stale pins: %w", err)
	}
	if err := os.Remove(o.stateFile); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("remove stale state: %w", err)
	}
	return nil
}

// restore takes over the tunnels a previous agent left running. A tunnel that can no
// longer be resolved (its interface is gone) is reported and left out.
func (a *Agent) restore() error {
	b, err := os.ReadFile(a.opts.stateFile)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("read saved state: %w", err)
	}
	var st savedState
	if err := json.Unmarshal(b, &st); err != nil {
		return fmt.Errorf("saved state %s is corrupt (remove it to start afresh): %w", a.opts.stateFile, err)
	}
	for _, s := range st.Tunnels {
		cfg := &pb.TunnelConfig{}
		if err := protojson.Unmarshal(s.Config, cfg); err != nil {
			return fmt.Errorf("saved state %s is corrupt (remove it to start afresh): %w", a.opts.stateFile, err)
		}
		t, err := resolve(cfg, a.opts.resolveTimeout)
		if err != nil {
			a.opts.log.Error("cannot restore tunnel", "id", cfg.Id, "err", err)
			continue
		}
		t.slot, t.gen = s.Slot, s.Generation
		for _, p := range t.paths {
			for _, name := range s.Down {
				p.up = p.up && p.cfg.Name != name
			}
		}
		if len(s.Estimates) == len(t.paths) {
			for i, e := range s.Estimates {
				t.paths[i].est = &pb.PathEstimate{RateBps: e.RateBps, DelayUs: e.DelayUs}
			}
		}
		a.tunnels[t.cfg.Id] = t
		if err := a.apply(t, false); err != nil {
			delete(a.tunnels, t.cfg.Id)
			a.opts.log.Error("cannot restore tunnel", "id", cfg.Id, "err", err)
			continue
		}
		a.opts.log.Info("restored tunnel", "id", t.cfg.Id, "device", t.cfg.Device, "paths", len(t.paths))
	}
	return nil
}

// savedReceivers lists the interfaces the receiver is attached to.
func (a *Agent) savedReceivers() []int { return a.dp.Attachments(datapath.HookReceiver) }

func inode(fi os.FileInfo) uint64 {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return st.Ino
	}
	return 0
}
