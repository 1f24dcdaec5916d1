package p4switch

import (
	"errors"
	"fmt"
	"net"
	"os"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Port is where a switch port's frames come from and go to: a Linux interface
// (OpenInterface) or memory (NewMemPort).
type Port interface {
	// recv fills pkts[:n] with frames at pkts[i].buf[headroom:], blocking until there is
	// at least one; a frame that did not fit has end < 0.
	recv(pkts []*packet) (n int, err error)
	// send transmits the frames; frames the interface refuses are dropped and counted.
	send(pkts []*packet) (dropped int, err error)
	// maxFrame is the largest frame the port carries (MTU + Ethernet header and a tag).
	maxFrame() int
	Name() string
	Close() error
}

// mmsghdr is struct mmsghdr for recvmmsg/sendmmsg.
type mmsghdr struct {
	hdr unix.Msghdr
	len uint32
	_   [4]byte
}

// afPacket is a port on a Linux interface through an AF_PACKET socket, batched with
// recvmmsg/sendmmsg and waited on through Go's netpoller (no thread blocked, no polling
// when idle). The calls never block (MSG_DONTWAIT), so they are raw system calls, as are
// the timer's: Go's ordinary entry readies the runtime for a thread that blocks, which
// wakes its monitor thread (sysmon) at nearly every call, and eight switch processes of
// a lab did that tens of thousands of times a second.
type afPacket struct {
	name string
	mtu  int
	file *os.File
	rc   syscall.RawConn

	rxHdrs []mmsghdr
	rxIov  []unix.Iovec
	txHdrs []mmsghdr
	txIov  []unix.Iovec
}

const (
	rxBatch   = 64
	txBatch   = 64
	socketBuf = 4 << 20
)

func htons(v uint16) uint16 { return v<<8 | v>>8 }

// OpenInterface opens the interface name (in the caller's network namespace) as a port.
func OpenInterface(name string) (Port, error) {
	ifi, err := net.InterfaceByName(name)
	if err != nil {
		return nil, fmt.Errorf("open port %s: %w", name, err)
	}
	fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, int(htons(unix.ETH_P_ALL)))
	if err != nil {
		return nil, fmt.Errorf("open port %s: packet socket: %w", name, err)
	}
	fail := func(what string, err error) (Port, error) {
		unix.Close(fd)
		return nil, fmt.Errorf("open port %s: %s: %w", name, what, err)
	}
	// The switch's own transmissions must not come back in as received frames.
	if err := unix.SetsockoptInt(fd, unix.SOL_PACKET, unix.PACKET_IGNORE_OUTGOING, 1); err != nil {
		return fail("ignore outgoing", err)
	}
	if err := unix.SetsockoptInt(fd, unix.SOL_PACKET, unix.PACKET_QDISC_BYPASS, 1); err != nil {
		return fail("qdisc bypass", err)
	}
	if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, socketBuf); err != nil {
		unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUF, socketBuf)
	}
	if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_SNDBUFFORCE, socketBuf); err != nil {
		unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_SNDBUF, socketBuf)
	}
	if err := unix.Bind(fd, &unix.SockaddrLinklayer{Protocol: htons(unix.ETH_P_ALL), Ifindex: ifi.Index}); err != nil {
		return fail("bind", err)
	}
	mreq := unix.PacketMreq{Ifindex: int32(ifi.Index), Type: unix.PACKET_MR_PROMISC}
	if err := unix.SetsockoptPacketMreq(fd, unix.SOL_PACKET, unix.PACKET_ADD_MEMBERSHIP, &mreq); err != nil {
		return fail("promiscuous mode", err)
	}
	f := os.NewFile(uintptr(fd), "packet:"+name)
	rc, err := f.SyscallConn()
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("open port %s: %w", name, err)
	}
	return &afPacket{
		name: name, mtu: ifi.MTU, file: f, rc: rc,
		rxHdrs: make([]mmsghdr, rxBatch), rxIov: make([]unix.Iovec, rxBatch),
		txHdrs: make([]mmsghdr, txBatch), txIov: make([]unix.Iovec, txBatch),
	}, nil
}

func (p *afPacket) Name() string  { return p.name }
func (p *afPacket) maxFrame() int { return p.mtu + 18 }
func (p *afPacket) Close() error  { return p.file.Close() }

func (p *afPacket) recv(pkts []*packet) (int, error) {
	n := min(len(pkts), len(p.rxHdrs))
	for i := 0; i < n; i++ {
		b := pkts[i].buf[headroom:]
		p.rxIov[i].Base = &b[0]
		p.rxIov[i].SetLen(len(b))
		p.rxHdrs[i] = mmsghdr{}
		p.rxHdrs[i].hdr.Iov = &p.rxIov[i]
		p.rxHdrs[i].hdr.SetIovlen(1)
	}
	var got int
	var errno syscall.Errno
	err := p.rc.Read(func(fd uintptr) bool {
		r, _, e := unix.RawSyscall6(unix.SYS_RECVMMSG, fd, uintptr(unsafe.Pointer(&p.rxHdrs[0])), uintptr(n), unix.MSG_DONTWAIT, 0, 0)
		if e == unix.EAGAIN || e == unix.EINTR {
			return false
		}
		got, errno = int(r), e
		return true
	})
	if err != nil {
		return 0, err
	}
	if errno != 0 {
		return 0, fmt.Errorf("recvmmsg on %s: %w", p.name, errno)
	}
	for i := 0; i < got; i++ {
		pk := pkts[i]
		pk.off, pk.end = headroom, headroom+int(p.rxHdrs[i].len)
		if p.rxHdrs[i].hdr.Flags&unix.MSG_TRUNC != 0 {
			pk.end = -1
		}
	}
	return got, nil
}

func (p *afPacket) send(pkts []*packet) (int, error) {
	dropped := 0
	for len(pkts) > 0 {
		n := min(len(pkts), len(p.txHdrs))
		for i := 0; i < n; i++ {
			f := pkts[i].frame()
			p.txIov[i].Base = &f[0]
			p.txIov[i].SetLen(len(f))
			p.txHdrs[i] = mmsghdr{}
			p.txHdrs[i].hdr.Iov = &p.txIov[i]
			p.txHdrs[i].hdr.SetIovlen(1)
		}
		var sent int
		var errno syscall.Errno
		err := p.rc.Write(func(fd uintptr) bool {
			r, _, e := unix.RawSyscall6(unix.SYS_SENDMMSG, fd, uintptr(unsafe.Pointer(&p.txHdrs[0])), uintptr(n), unix.MSG_DONTWAIT, 0, 0)
			if e == unix.EAGAIN || e == unix.EINTR {
				return false
			}
			sent, errno = int(r), e
			return true
		})
		if err != nil {
			return dropped, err
		}
		if errno != 0 {
			// The first frame was refused (too big for the MTU, or no buffer): drop it and
			// go on with the rest.
			if errors.Is(errno, unix.ENETDOWN) || errors.Is(errno, unix.ENXIO) {
				return dropped + len(pkts), nil
			}
			sent = 1
			dropped++
		}
		pkts = pkts[sent:]
	}
	return dropped, nil
}
