package datapath

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"github.com/cilium/ebpf/rlimit"
	"golang.org/x/sys/unix"
)

// Datapath is the loaded sender and receiver with their maps. With a pin directory, maps
// and attachments outlive the process and a later Load picks them up again.
type Datapath struct {
	snd    senderObjects
	rcv    receiverObjects
	pinDir string
	// Without a pin directory, attachments live as long as these handles.
	links map[string]link.Link
}

// ErrIncompatiblePins means the pinned maps were created by a different build of the
// programs; their layout cannot be trusted.
var ErrIncompatiblePins = errors.New("pinned maps do not match this build of the datapath")

// Load loads both programs. With pinDir != "", maps are pinned there (reusing any already
// pinned) and attachments made later are pinned too; pinDir == "" keeps everything
// private to this process (tests).
func Load(pinDir string) (*Datapath, error) {
	if err := rlimit.RemoveMemlock(); err != nil {
		return nil, fmt.Errorf("remove memlock limit: %w", err)
	}
	d := &Datapath{pinDir: pinDir, links: map[string]link.Link{}}
	var opts ebpf.CollectionOptions
	if pinDir != "" {
		if err := EnsureBPFFS(pinDir); err != nil {
			return nil, err
		}
		opts.Maps.PinPath = pinDir
	}
	if err := loadPinned(loadSender, &d.snd, &opts, pinDir != ""); err != nil {
		return nil, fmt.Errorf("load sender: %w", err)
	}
	if err := loadPinned(loadReceiver, &d.rcv, &opts, pinDir != ""); err != nil {
		d.snd.Close()
		return nil, fmt.Errorf("load receiver: %w", err)
	}
	return d, nil
}

func loadPinned(load func() (*ebpf.CollectionSpec, error), objs any, opts *ebpf.CollectionOptions, pin bool) error {
	spec, err := load()
	if err != nil {
		return err
	}
	if pin {
		for _, m := range spec.Maps {
			m.Pinning = ebpf.PinByName
		}
	}
	err = spec.LoadAndAssign(objs, opts)
	if errors.Is(err, ebpf.ErrMapIncompatible) {
		return fmt.Errorf("%w in %s (remove it to start from scratch): %v", ErrIncompatiblePins, opts.Maps.PinPath, err)
	}
	var ve *ebpf.VerifierError
	if errors.As(err, &ve) {
		return fmt.Errorf("verifier rejected the program: %+v", ve)
	}
	if errors.Is(err, unix.EPERM) {
		return fmt.Errorf("%w: loading eBPF needs root (CAP_BPF and CAP_NET_ADMIN)", err)
	}
	return err
}

// Close releases this process's handles; pinned maps and attachments stay.
func (d *Datapath) Close() error {
	errs := []error{d.snd.Close(), d.rcv.Close()}
	for _, l := range d.links {
		errs = append(errs, l.Close())
	}
	return errors.Join(errs...)
}

// EnsureBPFFS makes sure dir lies on a mounted bpffs, mounting /sys/fs/bpf if needed.
func EnsureBPFFS(dir string) error {
	const root = "/sys/fs/bpf"
	if !strings.HasPrefix(filepath.Clean(dir)+"/", root+"/") {
		return fmt.Errorf("pin directory %s is not under %s", dir, root)
	}
	var st unix.Statfs_t
	if err := unix.Statfs(root, &st); err != nil {
		return fmt.Errorf("stat %s: %w", root, err)
	}
	if st.Type != unix.BPF_FS_MAGIC {
		if err := unix.Mount("bpf", root, "bpf", 0, ""); err != nil {
			return fmt.Errorf("mount bpffs on %s: %w (needs root)", root, err)
		}
	}
	return os.MkdirAll(dir, 0o700)
}

// Hook is where a program is attached.
type Hook string

const (
	HookSender   Hook = "tc-egress" // sender on a tunnel device
	HookReceiver Hook = "xdp"       // receiver on a path interface
)

func (d *Datapath) linkName(h Hook, ifindex int) string {
	return fmt.Sprintf("link-%s-%d", h, ifindex)
}

// Attach attaches the sender or receiver to an interface, or, when a pinned attachment
// from an earlier run exists, swaps this build's program into it without a gap.
func (d *Datapath) Attach(h Hook, ifindex int) error {
	prog := d.rcv.PlaitReceiver
	if h == HookSender {
		prog = d.snd.PlaitSender
	}
	name := d.linkName(h, ifindex)
	if l, err := d.existingLink(name); err != nil {
		return err
	} else if l != nil {
		if err := l.Update(prog); err != nil {
			return fmt.Errorf("update %s link on ifindex %d: %w", h, ifindex, err)
		}
		return nil
	}
	var l link.Link
	var err error
	if h == HookSender {
		l, err = link.AttachTCX(link.TCXOptions{Interface: ifindex, Program: prog, Attach: ebpf.AttachTCXEgress})
	} else {
		l, err = link.AttachXDP(link.XDPOptions{Program: prog, Interface: ifindex})
	}
	if err != nil {
		return fmt.Errorf("attach %s to ifindex %d: %w", h, ifindex, err)
	}
	if d.pinDir == "" {
		d.links[name] = l
		return nil
	}
	defer l.Close()
	if err := l.Pin(filepath.Join(d.pinDir, name)); err != nil {
		return fmt.Errorf("pin %s link: %w", h, err)
	}
	return nil
}

// Detach removes the program from the interface.
func (d *Datapath) Detach(h Hook, ifindex int) error {
	name := d.linkName(h, ifindex)
	l, err := d.existingLink(name)
	if err != nil || l == nil {
		return err
	}
	delete(d.links, name)
	if d.pinDir != "" {
		if err := l.Unpin(); err != nil {
			l.Close()
			return fmt.Errorf("unpin %s link: %w", h, err)
		}
	}
	return l.Close()
}

// Attached reports whether the program is attached to the interface by this datapath.
func (d *Datapath) Attached(h Hook, ifindex int) bool {
	name := d.linkName(h, ifindex)
	if _, ok := d.links[name]; ok {
		return true
	}
	if d.pinDir == "" {
		return false
	}
	_, err := os.Stat(filepath.Join(d.pinDir, name))
	return err == nil
}

// existingLink returns the attachment called name, or nil when there is none. Pinned
// links are returned as fresh handles the caller must close unless it keeps them.
func (d *Datapath) existingLink(name string) (link.Link, error) {
	if l, ok := d.links[name]; ok {
		return l, nil
	}
	if d.pinDir == "" {
		return nil, nil
	}
	l, err := link.LoadPinnedLink(filepath.Join(d.pinDir, name), nil)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("load pinned link %s: %w", name, err)
	}
	d.links[name] = l
	return l, nil
}
