package agent

import (
	"strings"
	"testing"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// Decapsulated packets arrive on the tunnel device, as with any Linux tunnel: with strict
// reverse-path filtering left on, they flow; the device counts them; an nftables rule on
// it stops them, and removing the rule lets them through again.
func TestDecapsulatedPacketsArriveOnTunnelDevice(t *testing.T) {
	p := newPair(t, 3)
	strict := []string{"-qw", "net.ipv4.conf.all.rp_filter=1", "net.ipv4.conf.default.rp_filter=1",
		"net.ipv4.conf.eth1.rp_filter=1", "net.ipv4.conf.eth2.rp_filter=1", "net.ipv4.conf.eth3.rp_filter=1"}
	p.h1.Run("sysctl", strict...)
	p.h2.Run("sysctl", strict...)
	p.configure(t, 1, 1, 1)
	// Whatever the device's offloads (the lab turns GRO off, which a veth otherwise needs
	// to take XDP frames).
	p.h2.Run("ethtool", "-K", "plait0", "gro", "off")
	rx := func() uint64 {
		l, err := run(t, p.h2, func() (netlink.Link, error) { return linkByName("plait0") })
		if err != nil {
			t.Fatal(err)
		}
		return l.Attrs().Statistics.RxPackets
	}
	// What tcpdump -i plait0 reads: a packet socket on the device.
	var tap int
	err := p.h2.Do(func() error {
		l, err := linkByName("plait0")
		if err != nil {
			return err
		}
		const ethPAll = 0x0300 // htons(ETH_P_ALL)
		if tap, err = unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, ethPAll); err != nil {
			return err
		}
		return unix.Bind(tap, &unix.SockaddrLinklayer{Protocol: ethPAll, Ifindex: l.Attrs().Index})
	})
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(tap)
	before := rx()
	p.h1.Run("ping", "-c", "10", "-i", "0.01", "-W", "2", "10.99.0.2")
	if got := rx() - before; got < 10 {
		t.Errorf("h2's plait0 received %d packets for 10 echo requests", got)
	}
	requests := 0
	buf := make([]byte, 2048)
	for {
		n, from, err := unix.Recvfrom(tap, buf, unix.MSG_DONTWAIT)
		if err != nil {
			break
		}
		// An incoming echo request from h1's tunnel address: ICMP type 8.
		if ll, ok := from.(*unix.SockaddrLinklayer); ok && ll.Pkttype == unix.PACKET_HOST &&
			n > 34 && buf[14+9] == 1 && buf[34] == 8 && string(buf[14+12:14+16]) == "\x0a\x63\x00\x01" {
			requests++
		}
	}
	if requests < 10 {
		t.Errorf("a packet socket on h2's plait0 saw %d of the 10 echo requests arrive", requests)
	}
	if v := strings.TrimSpace(p.h2.Run("sysctl", "-n", "net.ipv4.conf.eth1.rp_filter")); v != "1" {
		t.Errorf("eth1's rp_filter is %s: the agent loosened it", v)
	}

	p.h2.Run("nft", "add table inet plaittest")
	p.h2.Run("nft", "add chain inet plaittest in { type filter hook input priority 0 ; }")
	p.h2.Run("nft", "add rule inet plaittest in iifname plait0 drop")
	if _, err := p.h1.Try("ping", "-c", "3", "-i", "0.01", "-W", "1", "10.99.0.2"); err == nil {
		t.Error("ping passed an nftables drop rule on h2's plait0")
	}
	p.h2.Run("nft", "delete table inet plaittest")
	p.h1.Run("ping", "-c", "3", "-i", "0.01", "-W", "2", "10.99.0.2")
}
