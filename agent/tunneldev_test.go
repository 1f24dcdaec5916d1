package agent

import (
	"strings"
	"testing"

	"github.com/vishvananda/netlink"
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
	before := rx()
	p.h1.Run("ping", "-c", "10", "-i", "0.01", "-W", "2", "10.99.0.2")
	if got := rx() - before; got < 10 {
		t.Errorf("h2's plait0 received %d packets for 10 echo requests", got)
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
