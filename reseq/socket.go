package reseq

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"runtime"
	"sync"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/plait/plait/ebpf/datapath"
)

// batch is how many packets one recvmmsg or sendmmsg call moves at most.
const batch = 64

// Resequencer reads a tunnel's ReseqEtherType frames on the tunnel device's veth peer
// (where the receiver sends them, into the device) and writes them back into the peer
// in seq order, restored to IPv4 frames addressed to the device, so that they arrive on
// the device as the receiver's direct delivery would.
type Resequencer struct {
	*Buffer
	rx, tx, wake int
	devMAC       net.HardwareAddr
	frame        int // largest frame: the device's MTU and an Ethernet header

	// receive side: one buffer per message
	rbufs [batch][]byte
	riov  [batch]unix.Iovec
	rmsg  [batch]unix.Mmsghdr
	// send side: released packets are copied here until the batch goes
	sbufs [batch][]byte
	siov  [batch]unix.Iovec
	smsg  [batch]unix.Mmsghdr
	sn    int

	done chan struct{}
	once sync.Once
}

// Open opens the sockets of a resequencer on peerIfindex, the veth peer of a tunnel
// device whose address is devMAC and MTU mtu; it must be called in the device's network
// namespace. hold is the initial hold bound (ns); port is the tunnel's UDP port, whose
// datagrams (the agents' own messages) are not counted as flows.
func Open(peerIfindex int, devMAC net.HardwareAddr, mtu int, hold int64, port uint16) (*Resequencer, error) {
	r := &Resequencer{devMAC: devMAC, frame: mtu + 14, done: make(chan struct{}), rx: -1, tx: -1, wake: -1}
	r.Buffer = New(hold, r.queue)
	r.flows.port = port
	var err error
	proto := htons(datapath.ReseqEtherType)
	if r.rx, err = unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_CLOEXEC|unix.SOCK_NONBLOCK, int(proto)); err != nil {
		return nil, fmt.Errorf("resequencer socket: %w", err)
	}
	if err = unix.Bind(r.rx, &unix.SockaddrLinklayer{Protocol: proto, Ifindex: peerIfindex}); err != nil {
		r.Close()
		return nil, fmt.Errorf("bind resequencer socket: %w", err)
	}
	// A burst behind a hole must not overflow the socket: room for a full window.
	unix.SetsockoptInt(r.rx, unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, Window*(r.frame+512))
	// Protocol 0: this socket only sends.
	if r.tx, err = unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, 0); err != nil {
		r.Close()
		return nil, fmt.Errorf("resequencer socket: %w", err)
	}
	if err = unix.Bind(r.tx, &unix.SockaddrLinklayer{Ifindex: peerIfindex}); err != nil {
		r.Close()
		return nil, fmt.Errorf("bind resequencer socket: %w", err)
	}
	if r.wake, err = unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK); err != nil {
		r.Close()
		return nil, fmt.Errorf("eventfd: %w", err)
	}
	for i := range batch {
		r.rbufs[i] = make([]byte, r.frame)
		r.riov[i].Base = &r.rbufs[i][0]
		r.riov[i].SetLen(r.frame)
		r.rmsg[i].Hdr.Iov, r.rmsg[i].Hdr.Iovlen = &r.riov[i], 1
		r.sbufs[i] = make([]byte, r.frame)
		r.siov[i].Base = &r.sbufs[i][0]
		r.smsg[i].Hdr.Iov, r.smsg[i].Hdr.Iovlen = &r.siov[i], 1
	}
	return r, nil
}

func htons(v uint16) uint16 { return v<<8 | v>>8 }

// Close stops Run and closes the sockets.
func (r *Resequencer) Close() error {
	r.once.Do(func() {
		if r.wake >= 0 {
			var one [8]byte
			binary.NativeEndian.PutUint64(one[:], 1)
			unix.Write(r.wake, one[:])
			<-r.done
		}
		for _, fd := range []int{r.rx, r.tx, r.wake} {
			if fd >= 0 {
				unix.Close(fd)
			}
		}
	})
	return nil
}

func threadCPU() int64 {
	var ts unix.Timespec
	unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts)
	return ts.Nano()
}

func monoNow() int64 {
	var ts unix.Timespec
	unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts)
	return ts.Nano()
}

// Run moves packets until Close. Each round waits for frames or the held hole's
// deadline, takes what the socket has, releases what is due and sends it in one call.
func (r *Resequencer) Run() {
	defer close(r.done)
	// A thread of its own: its CPU time is the resequencer's cost (BusyNs).
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	fds := []unix.PollFd{{Fd: int32(r.rx), Events: unix.POLLIN}, {Fd: int32(r.wake), Events: unix.POLLIN}}
	for {
		var ts *unix.Timespec
		if d := r.Deadline(); d != 0 {
			t := unix.NsecToTimespec(max(0, d-monoNow()))
			ts = &t
		}
		if _, err := unix.Ppoll(fds, ts, nil); err != nil && !errors.Is(err, unix.EINTR) {
			return
		}
		if fds[1].Revents != 0 {
			return
		}
		start := threadCPU()
		r.receive()
		r.Expire(monoNow())
		r.flush()
		r.C.BusyNs.Add(uint64(threadCPU() - start))
	}
}

// receive takes up to a few batches of frames from the socket.
func (r *Resequencer) receive() {
	for range 4 {
		n, _, errno := unix.Syscall6(unix.SYS_RECVMMSG, uintptr(r.rx), uintptr(unsafe.Pointer(&r.rmsg[0])), batch, unix.MSG_DONTWAIT, 0, 0)
		if errno != 0 || n == 0 {
			return
		}
		now := monoNow()
		for i := range int(n) {
			f := r.rbufs[i][:r.rmsg[i].Len]
			if len(f) < 14+20 {
				continue
			}
			path, seq := f[6], binary.BigEndian.Uint32(f[8:12])
			// What the receiver delivers directly: addressed to the device, IPv4.
			copy(f[0:6], r.devMAC)
			clear(f[6:12])
			binary.BigEndian.PutUint16(f[12:14], 0x0800)
			r.Push(f, seq, path, now)
		}
		if int(n) < batch {
			return
		}
	}
}

// queue copies a released packet into the send batch, sending the batch when full.
func (r *Resequencer) queue(frame []byte) {
	if r.sn == batch {
		r.flush()
	}
	n := copy(r.sbufs[r.sn], frame)
	r.siov[r.sn].SetLen(n)
	r.sn++
}

// flush sends the batch.
func (r *Resequencer) flush() {
	for off := 0; off < r.sn; {
		n, _, errno := unix.Syscall6(unix.SYS_SENDMMSG, uintptr(r.tx), uintptr(unsafe.Pointer(&r.smsg[off])), uintptr(r.sn-off), 0, 0, 0)
		if errno == unix.EINTR {
			continue
		}
		if errno != 0 || n == 0 {
			// The device refused the first of them: it is dropped, as a full queue would.
			r.C.Dropped.Add(1)
			off++
			continue
		}
		off += int(n)
	}
	r.sn = 0
}
