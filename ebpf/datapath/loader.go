package datapath

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"github.com/cilium/ebpf/rlimit"
	"golang.org/x/sys/unix"
)

// Datapath is the loaded sender and receiver with their maps. With a pin directory, maps
// and attachments outlive the process and a later Load picks them up again.
type Datapath struct {
	sndSpec *ebpf.CollectionSpec
	snd     senderMaps
	// One sender instance per tunnel slot, the slot compiled in as a constant.
	sndProgs map[uint32]*ebpf.Program
	rcv      receiverObjects
	pinDir   string
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
	d := &Datapath{pinDir: pinDir, links: map[string]link.Link{}, sndProgs: map[uint32]*ebpf.Program{}}
	var opts ebpf.CollectionOptions
	if pinDir != "" {
		if err := EnsureBPFFS(pinDir); err != nil {
			return nil, err
		}
		opts.Maps.PinPath = pinDir
	}
	spec, err := loadSender()
	if err != nil {
		return nil, err
	}
	d.sndSpec = spec
	if err := loadPinned(spec.Copy(), &d.snd, &opts, pinDir != ""); err != nil {
		return nil, fmt.Errorf("load sender maps: %w", err)
	}
	if spec, err = loadReceiver(); err == nil {
		// The receiver writes the peer ports it learns into the sender's state.
		opts.MapReplacements = map[string]*ebpf.Map{"snd_states": d.snd.SndStates}
		err = loadPinned(spec, &d.rcv, &opts, pinDir != "")
	}
	if err != nil {
		d.snd.Close()
		return nil, fmt.Errorf("load receiver: %w", err)
	}
	return d, nil
}

// senderProgram returns the sender instance for a tunnel slot, loading it on first use.
func (d *Datapath) senderProgram(slot uint32) (*ebpf.Program, error) {
	if p, ok := d.sndProgs[slot]; ok {
		return p, nil
	}
	if slot >= MaxTunnels {
		return nil, fmt.Errorf("tunnel slot %d out of range (max %d tunnels)", slot, MaxTunnels)
	}
	spec := d.sndSpec.Copy()
	if err := spec.Variables["tunnel_slot"].Set(slot); err != nil {
		return nil, fmt.Errorf("set tunnel slot: %w", err)
	}
	var progs senderPrograms
	opts := ebpf.CollectionOptions{MapReplacements: map[string]*ebpf.Map{
		"snd_gens": d.snd.SndGens, "snd_configs": d.snd.SndConfigs, "snd_states": d.snd.SndStates,
		"snd_paths": d.snd.SndPaths, "snd_verdicts": d.snd.SndVerdicts,
	}}
	if err := loadPinned(spec, &progs, &opts, false); err != nil {
		return nil, fmt.Errorf("load sender for slot %d: %w", slot, err)
	}
	d.sndProgs[slot] = progs.PlaitSender
	return progs.PlaitSender, nil
}

func loadPinned(spec *ebpf.CollectionSpec, objs any, opts *ebpf.CollectionOptions, pin bool) error {
	if pin {
		for _, m := range spec.Maps {
			m.Pinning = ebpf.PinByName
		}
	}
	err := spec.LoadAndAssign(objs, opts)
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
	for _, p := range d.sndProgs {
		errs = append(errs, p.Close())
	}
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
	HookSender   Hook = "tc-egress"  // sender on a tunnel device
	HookReceiver Hook = "xdp"        // receiver on a path interface
	HookDevice   Hook = "xdp-device" // the tunnel device's pass-through (plait_device)
)

func (d *Datapath) linkName(h Hook, ifindex int) string {
	return fmt.Sprintf("link-%s-%d", h, ifindex)
}

// AttachSender attaches the sender of tunnel slot to the egress of a tunnel device.
func (d *Datapath) AttachSender(ifindex int, slot uint32) error {
	prog, err := d.senderProgram(slot)
	if err != nil {
		return err
	}
	return d.attach(HookSender, ifindex, prog)
}

// AttachReceiver attaches the receiver to a path interface.
func (d *Datapath) AttachReceiver(ifindex int) error {
	return d.attach(HookReceiver, ifindex, d.rcv.PlaitReceiver)
}

// AttachDevice attaches the pass-through XDP program to a tunnel device, so that it
// takes the decapsulated packets the receiver redirects into its veth peer.
func (d *Datapath) AttachDevice(ifindex int) error {
	return d.attach(HookDevice, ifindex, d.rcv.PlaitDevice)
}

// attach attaches prog at a hook, or, when a pinned attachment from an earlier run
// exists, swaps prog into it without a gap.
func (d *Datapath) attach(h Hook, ifindex int, prog *ebpf.Program) error {
	name := d.linkName(h, ifindex)
	if l, err := d.existingLink(name); err != nil {
		return err
	} else if l != nil {
		err := l.Update(prog)
		if err == nil {
			return nil
		}
		if !errors.Is(err, unix.ENOLINK) {
			return fmt.Errorf("update %s link on ifindex %d: %w", h, ifindex, err)
		}
		// The interface it was attached to is gone: a new one has its index now.
		if err := d.Detach(h, ifindex); err != nil {
			return err
		}
	}
	var l link.Link
	var err error
	if h == HookSender {
		l, err = link.AttachTCX(link.TCXOptions{Interface: ifindex, Program: prog, Attach: ebpf.AttachTCXEgress})
	} else { // HookReceiver, HookDevice
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

// Attachments lists the interfaces a hook's program is attached to.
func (d *Datapath) Attachments(h Hook) []int {
	prefix := "link-" + string(h) + "-"
	seen := map[int]bool{}
	for name := range d.links {
		var ifindex int
		if _, err := fmt.Sscanf(strings.TrimPrefix(name, prefix), "%d", &ifindex); err == nil && strings.HasPrefix(name, prefix) {
			seen[ifindex] = true
		}
	}
	if d.pinDir != "" {
		entries, _ := os.ReadDir(d.pinDir)
		for _, e := range entries {
			var ifindex int
			if strings.HasPrefix(e.Name(), prefix) {
				if _, err := fmt.Sscanf(strings.TrimPrefix(e.Name(), prefix), "%d", &ifindex); err == nil {
					seen[ifindex] = true
				}
			}
		}
	}
	var out []int
	for i := range seen {
		out = append(out, i)
	}
	slices.Sort(out)
	return out
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
