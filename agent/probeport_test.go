package agent

import (
	"context"
	"encoding/binary"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	pb "github.com/plait/plait/api/plait/v1"
	"github.com/plait/plait/wire"
)

// Probes leave from the tunnel's port, as the data does, so that on an idle path they
// keep a NAT's mapping for that port alive: h1's probes on an idle path, seen leaving
// its interface, come from port 7733.
func TestProbesLeaveFromTheTunnelPort(t *testing.T) {
	p := newPair(t, 2)
	ctx := context.Background()
	if _, err := run(t, p.h1, func() (*pb.Tunnel, error) { return p.a1.Configure(ctx, tunnelConfig("1", "2", 2)) }); err != nil {
		t.Fatal(err)
	}
	var src uint16
	err := p.h1.Do(func() error {
		l, err := linkByName("eth1")
		if err != nil {
			return err
		}
		fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, int(htons(unix.ETH_P_ALL)))
		if err != nil {
			return err
		}
		defer unix.Close(fd)
		if err := unix.Bind(fd, &unix.SockaddrLinklayer{Protocol: htons(unix.ETH_P_ALL), Ifindex: l.Attrs().Index}); err != nil {
			return err
		}
		tv := unix.NsecToTimeval(int64(100 * time.Millisecond))
		if err := unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv); err != nil {
			return err
		}
		buf := make([]byte, 2048)
		for deadline := time.Now().Add(2 * time.Second); time.Now().Before(deadline); {
			n, _, err := unix.Recvfrom(fd, buf, 0)
			// ETH_P_ALL: packet sockets see outgoing frames only with it.
			if err != nil || n < 14+20+8+1 || binary.BigEndian.Uint16(buf[12:]) != unix.ETH_P_IP {
				continue
			}
			ip := buf[14:n]
			hl := int(ip[0]&0xf) * 4
			if ip[9] != unix.IPPROTO_UDP || len(ip) < hl+9 {
				continue
			}
			udp := ip[hl:]
			if binary.BigEndian.Uint16(udp[2:]) == 7733 && udp[8]&0x0f&wire.FlagProbe != 0 {
				src = binary.BigEndian.Uint16(udp[0:])
				return nil
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if src == 0 {
		t.Fatal("no probe left h1's eth1 within 2 s")
	}
	if src != 7733 {
		t.Errorf("h1's probes leave from port %d, want the tunnel's 7733", src)
	}
}

func htons(v uint16) uint16 { return v<<8 | v>>8 }
