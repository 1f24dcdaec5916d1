package agent

import (
	"encoding/binary"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"unsafe"

	"golang.org/x/net/bpf"
	"golang.org/x/sys/unix"

	"github.com/plait/plait/wire"
)

// A tap keeps a copy of the last tapSlots packets a tunnel sent out of one path
// interface, for repair: a packet socket that sees the interface's outgoing frames (the
// sender's eBPF program redirects them there, and the kernel's taps see every frame a
// device transmits) through a classic BPF filter that takes the tunnel's data packets
// only. Nothing changes in the sender's program, and a tunnel without repair, or whose
// peer has not asked for one for a long while (repairs.quiet), pays nothing. The socket
// reads into the slots themselves, in arrival order; an index by (path, path_seq) finds
// them. With PACKET_VNET_HDR each frame comes with its checksum state: a frame whose TCP
// checksum the interface was still to fill in is resent so, and the kernel fills it in
// then.
//
// tapSlots is 200 ms of a 240 Mbit/s path in 1500-byte packets: a repair is asked for
// about a round trip after the loss.
const tapSlots = 4096

const (
	tapBatch   = 64
	vnetHdrLen = 10 // struct virtio_net_hdr
)

type tapSlot struct {
	ok      bool
	path    uint8
	pathSeq uint32
	n       int // bytes in buf: virtio_net_hdr and frame
}

type tap struct {
	fd, wake int
	port     uint16
	ifindex  int
	frame    int // largest frame with its virtio_net_hdr

	mu    sync.Mutex // meta and index, and buf of slots marked ok
	buf   [][]byte
	meta  []tapSlot
	index [wire.MaxPaths][]int32 // path_seq % tapSlots -> slot + 1 (0: none)
	next  int                    // the slot the next frame goes to

	iov  [tapBatch]unix.Iovec
	msgs [tapBatch]unix.Mmsghdr

	kept, busyNs atomic.Uint64
	done         chan struct{}
	once         sync.Once
}

// openTap opens the tap of tunnel id (port, IP encapsulation or UDP) on the interface
// ifindex of MTU mtu; it must be called in the interface's network namespace.
func openTap(ifindex, mtu int, id, port uint16, ipEncap bool) (*tap, error) {
	t := &tap{fd: -1, wake: -1, port: port, ifindex: ifindex, frame: vnetHdrLen + 14 + mtu, done: make(chan struct{})}
	var err error
	// Protocol 0 until the filter is on: the socket takes nothing before it.
	if t.fd, err = unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_CLOEXEC|unix.SOCK_NONBLOCK, 0); err != nil {
		return nil, fmt.Errorf("repair tap socket: %w", err)
	}
	if err = unix.SetsockoptInt(t.fd, unix.SOL_PACKET, unix.PACKET_VNET_HDR, 1); err != nil {
		t.close()
		return nil, fmt.Errorf("repair tap: PACKET_VNET_HDR: %w", err)
	}
	if err = attachFilter(t.fd, id, port, ipEncap); err != nil {
		t.close()
		return nil, err
	}
	unix.SetsockoptInt(t.fd, unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, tapBatch*4*(t.frame+512))
	if err = unix.Bind(t.fd, &unix.SockaddrLinklayer{Protocol: netOrder16(unix.ETH_P_ALL), Ifindex: ifindex}); err != nil {
		t.close()
		return nil, fmt.Errorf("bind repair tap: %w", err)
	}
	if t.wake, err = unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK); err != nil {
		t.close()
		return nil, fmt.Errorf("eventfd: %w", err)
	}
	t.buf, t.meta = make([][]byte, tapSlots), make([]tapSlot, tapSlots)
	for i := range t.buf {
		t.buf[i] = make([]byte, t.frame)
	}
	go t.run()
	return t, nil
}

func netOrder16(v uint16) uint16 { return v<<8 | v>>8 }

// attachFilter makes the socket take only the tunnel's outgoing data packets: IPv4
// without options (as the sender writes them), from the tunnel's UDP port or in its IP protocol,
// its tunnel id, no probe flag, no repair bit.
func attachFilter(fd int, id, port uint16, ipEncap bool) error {
	const outgoing = 4 // PACKET_OUTGOING
	hdr := uint32(14 + 20 + 8)
	proto := uint32(17)
	if ipEncap {
		hdr, proto = 14+20, wire.IPProto
	}
	prog := []bpf.Instruction{
		bpf.LoadExtension{Num: bpf.ExtType},
		bpf.JumpIf{Cond: bpf.JumpNotEqual, Val: outgoing, SkipTrue: 100},
		bpf.LoadAbsolute{Off: 12, Size: 2},
		bpf.JumpIf{Cond: bpf.JumpNotEqual, Val: 0x0800, SkipTrue: 100},
		bpf.LoadAbsolute{Off: 14, Size: 1},
		bpf.JumpIf{Cond: bpf.JumpNotEqual, Val: 0x45, SkipTrue: 100},
		bpf.LoadAbsolute{Off: 23, Size: 1},
		bpf.JumpIf{Cond: bpf.JumpNotEqual, Val: proto, SkipTrue: 100},
	}
	if !ipEncap {
		// The source port: the destination may be one a NAT rewrote (the peer's port).
		prog = append(prog, bpf.LoadAbsolute{Off: 34, Size: 2}, bpf.JumpIf{Cond: bpf.JumpNotEqual, Val: uint32(port), SkipTrue: 100})
	}
	prog = append(prog,
		bpf.LoadAbsolute{Off: hdr, Size: 1},
		bpf.JumpIf{Cond: bpf.JumpBitsSet, Val: wire.FlagProbe, SkipTrue: 100},
		bpf.LoadAbsolute{Off: hdr + 1, Size: 1},
		bpf.JumpIf{Cond: bpf.JumpBitsSet, Val: wire.PathRepair, SkipTrue: 100},
		bpf.LoadAbsolute{Off: hdr + 2, Size: 2},
		bpf.JumpIf{Cond: bpf.JumpNotEqual, Val: uint32(id), SkipTrue: 100},
		bpf.RetConstant{Val: 0xffff},
		bpf.RetConstant{Val: 0},
	)
	// Every refusal jumps to the last instruction.
	for i, in := range prog {
		if j, ok := in.(bpf.JumpIf); ok {
			j.SkipTrue = uint8(len(prog) - 2 - i)
			prog[i] = j
		}
	}
	raw, err := bpf.Assemble(prog)
	if err != nil {
		return fmt.Errorf("repair tap filter: %w", err)
	}
	f := make([]unix.SockFilter, len(raw))
	for i, r := range raw {
		f[i] = unix.SockFilter{Code: r.Op, Jt: r.Jt, Jf: r.Jf, K: r.K}
	}
	if err := unix.SetsockoptSockFprog(fd, unix.SOL_SOCKET, unix.SO_ATTACH_FILTER, &unix.SockFprog{Len: uint16(len(f)), Filter: &f[0]}); err != nil {
		return fmt.Errorf("repair tap filter: %w", err)
	}
	return nil
}

func (t *tap) close() {
	t.once.Do(func() {
		if t.wake >= 0 {
			var one [8]byte
			binary.NativeEndian.PutUint64(one[:], 1)
			unix.Write(t.wake, one[:])
			<-t.done
		}
		for _, fd := range []int{t.fd, t.wake} {
			if fd >= 0 {
				unix.Close(fd)
			}
		}
	})
}

// run keeps copies until close.
func (t *tap) run() {
	defer close(t.done)
	// A thread of its own: its CPU time is the tap's cost (busyNs).
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	fds := []unix.PollFd{{Fd: int32(t.fd), Events: unix.POLLIN}, {Fd: int32(t.wake), Events: unix.POLLIN}}
	for {
		if _, err := unix.Ppoll(fds, nil, nil); err != nil && !errors.Is(err, unix.EINTR) {
			return
		}
		if fds[1].Revents != 0 {
			return
		}
		start := threadCPU()
		for t.receive() == tapBatch {
		}
		t.busyNs.Add(uint64(threadCPU() - start))
	}
}

func threadCPU() int64 {
	var ts unix.Timespec
	unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts)
	return ts.Nano()
}

// receive reads up to a batch of frames into the next slots and indexes them; it
// returns how many it read.
func (t *tap) receive() int {
	n := min(tapBatch, tapSlots-t.next)
	t.mu.Lock()
	for i := range n {
		t.meta[t.next+i].ok = false
	}
	t.mu.Unlock()
	for i := range n {
		t.iov[i].Base = &t.buf[t.next+i][0]
		t.iov[i].SetLen(t.frame)
		t.msgs[i].Hdr.Iov, t.msgs[i].Hdr.Iovlen = &t.iov[i], 1
	}
	got, _, errno := unix.Syscall6(unix.SYS_RECVMMSG, uintptr(t.fd), uintptr(unsafe.Pointer(&t.msgs[0])), uintptr(n), unix.MSG_DONTWAIT, 0, 0)
	if errno != 0 || got == 0 {
		return 0
	}
	t.mu.Lock()
	for i := range int(got) {
		s, b := t.next+i, t.buf[t.next+i][:t.msgs[i].Len]
		off := keptPlaitOffset(b)
		if off < 0 {
			continue
		}
		p, ps := b[off+1]&(wire.MaxPaths-1), binary.BigEndian.Uint32(b[off+8:])
		if t.index[p] == nil {
			t.index[p] = make([]int32, tapSlots)
		}
		t.meta[s] = tapSlot{ok: true, path: p, pathSeq: ps, n: len(b)}
		t.index[p][ps%tapSlots] = int32(s + 1)
	}
	t.mu.Unlock()
	t.kept.Add(uint64(got))
	t.next = (t.next + int(got)) % tapSlots
	return int(got)
}

// keptPlaitOffset is where the Plait header starts in b (virtio_net_hdr, Ethernet, IPv4
// without options, UDP or not), or -1 when b is too short for one.
func keptPlaitOffset(b []byte) int {
	off := vnetHdrLen + 14 + 20
	if len(b) < off || b[vnetHdrLen+14+9] == 17 {
		off += 8
	}
	if len(b) < off+wire.HeaderLen {
		return -1
	}
	return off
}

// copyOut appends the kept frame (virtio_net_hdr first) of path's pathSeq to out; ok is
// false when it is no longer (or never was) kept.
func (t *tap) copyOut(out []byte, path uint8, pathSeq uint32) ([]byte, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	idx := t.index[path%wire.MaxPaths]
	if idx == nil {
		return out, false
	}
	s := int(idx[pathSeq%tapSlots]) - 1
	if s < 0 || !t.meta[s].ok || t.meta[s].path != path || t.meta[s].pathSeq != pathSeq {
		return out, false
	}
	return append(out, t.buf[s][:t.meta[s].n]...), true
}

// send transmits frame (virtio_net_hdr first) on the tap's interface.
func (t *tap) send(frame []byte) error {
	return unix.Sendto(t.fd, frame, 0, &unix.SockaddrLinklayer{Protocol: netOrder16(unix.ETH_P_IP), Ifindex: t.ifindex})
}
