package agent

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"runtime"
	"time"
	"unsafe"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// linkByName finds an interface, with an error that says where to look.
func linkByName(name string) (netlink.Link, error) {
	l, err := netlink.LinkByName(name)
	if err != nil {
		var nf netlink.LinkNotFoundError
		if errors.As(err, &nf) {
			return nil, fmt.Errorf("no interface %q in this network namespace (see `ip link`)", name)
		}
		return nil, fmt.Errorf("look up interface %q: %w", name, err)
	}
	return l, nil
}

func firstIPv4(l netlink.Link) (netip.Addr, error) {
	addrs, err := netlink.AddrList(l, netlink.FAMILY_V4)
	if err != nil {
		return netip.Addr{}, fmt.Errorf("addresses of %s: %w", l.Attrs().Name, err)
	}
	for _, a := range addrs {
		if ip, ok := netip.AddrFromSlice(a.IP.To4()); ok {
			return ip, nil
		}
	}
	return netip.Addr{}, fmt.Errorf("interface %s has no IPv4 address: give the path a local_addr or add one", l.Attrs().Name)
}

// nextHopMAC finds the Ethernet address packets to dst leave l with, asking the kernel to
// resolve it (by sending it a datagram) when its neighbour table does not know it yet.
func nextHopMAC(l netlink.Link, src, dst, gateway netip.Addr, timeout time.Duration) (net.HardwareAddr, error) {
	name := l.Attrs().Name
	hop := gateway
	if !hop.IsValid() {
		routes, err := netlink.RouteGetWithOptions(dst.AsSlice(), &netlink.RouteGetOptions{Oif: name, SrcAddr: src.AsSlice()})
		if err != nil {
			return nil, fmt.Errorf("no route to %s from %s via %s: %w", dst, src, name, err)
		}
		hop = dst
		if len(routes) > 0 && routes[0].Gw != nil {
			hop, _ = netip.AddrFromSlice(routes[0].Gw.To4())
		}
	}
	deadline := time.Now().Add(timeout)
	for poked := false; ; {
		neighs, err := netlink.NeighList(l.Attrs().Index, netlink.FAMILY_V4)
		if err != nil {
			return nil, fmt.Errorf("neighbours of %s: %w", name, err)
		}
		for _, n := range neighs {
			ip, _ := netip.AddrFromSlice(n.IP.To4())
			usable := n.State&(netlink.NUD_INCOMPLETE|netlink.NUD_FAILED) == 0 && len(n.HardwareAddr) == 6
			if ip == hop && usable {
				return n.HardwareAddr, nil
			}
		}
		// Always ask the kernel once, and look once more after, whatever the timeout.
		if poked && time.Now().After(deadline) {
			return nil, fmt.Errorf("next hop %s on %s does not answer ARP yet: is the peer up and the path forwarding?", hop, name)
		}
		if !poked {
			if err := poke(name, src, dst); err != nil {
				return nil, err
			}
			poked = true
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// poke sends one datagram to the discard port of dst out of dev, which makes the kernel
// resolve the next hop.
func poke(dev string, src, dst netip.Addr) error {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("socket: %w", err)
	}
	defer unix.Close(fd)
	if err := unix.BindToDevice(fd, dev); err != nil {
		return fmt.Errorf("bind to %s: %w", dev, err)
	}
	if err := unix.Bind(fd, &unix.SockaddrInet4{Addr: src.As4()}); err != nil {
		return fmt.Errorf("bind to %s: %w", src, err)
	}
	// The send may fail with EHOSTUNREACH while resolution is pending; that is fine.
	unix.Sendto(fd, []byte{0}, unix.MSG_DONTWAIT, &unix.SockaddrInet4{Addr: dst.As4(), Port: 9})
	return nil
}

// peerName names the unused end of a tunnel device's veth pair.
func peerName(dev string) string { return dev + "p" }

// ensureTunnelDevice creates the tunnel device (a veth pair) when it is missing and sets
// what striping needs: no ARP (the sender writes every Ethernet header), no offloads and
// no GSO (every packet wire-sized with a complete checksum), the MTU, the address and the
// route. It returns the device and its peer, into which the receiver sends decapsulated
// packets so that they arrive on the device.
func ensureTunnelDevice(name string, addr, remote netip.Prefix, mtu int) (dev, peer netlink.Link, err error) {
	if len(peerName(name)) > unix.IFNAMSIZ-1 {
		return nil, nil, fmt.Errorf("tunnel device name %q is too long: use at most %d characters", name, unix.IFNAMSIZ-2)
	}
	dev, err = netlink.LinkByName(name)
	if err == nil && !isTunnelDevice(dev) {
		return nil, nil, fmt.Errorf("interface %s exists and is not a Plait tunnel device (a veth pair %s/%s): name a new device, e.g. plait0, so that the agent does not reconfigure this one", name, name, peerName(name))
	}
	if err != nil {
		veth := &netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: name, MTU: mtu}, PeerName: peerName(name)}
		if err := netlink.LinkAdd(veth); err != nil {
			return nil, nil, fmt.Errorf("create tunnel device %s: %w", name, err)
		}
	}
	for _, d := range []string{name, peerName(name)} {
		dl, err := netlink.LinkByName(d)
		if err != nil {
			return nil, nil, fmt.Errorf("tunnel device %s: %w", d, err)
		}
		if err := netlink.LinkSetMTU(dl, mtu); err != nil {
			return nil, nil, fmt.Errorf("set MTU %d on %s: %w", mtu, d, err)
		}
		if err := netlink.LinkSetARPOff(dl); err != nil {
			return nil, nil, fmt.Errorf("turn ARP off on %s: %w", d, err)
		}
		if err := offloadsOff(d); err != nil {
			return nil, nil, err
		}
		// TCP builds GSO super-packets whatever the device's offloads say; one header per
		// wire packet needs one-segment skbs.
		if err := netlink.LinkSetGSOMaxSegs(dl, 1); err != nil {
			return nil, nil, fmt.Errorf("limit GSO on %s: %w", d, err)
		}
		os.WriteFile(filepath.Join("/proc/sys/net/ipv6/conf", d, "disable_ipv6"), []byte("1"), 0)
		if err := netlink.LinkSetUp(dl); err != nil {
			return nil, nil, fmt.Errorf("set %s up: %w", d, err)
		}
	}
	if dev, err = netlink.LinkByName(name); err == nil {
		peer, err = netlink.LinkByName(peerName(name))
	}
	if err != nil {
		return nil, nil, fmt.Errorf("tunnel device %s: %w", name, err)
	}
	a := &netlink.Addr{IPNet: &net.IPNet{IP: addr.Addr().AsSlice(), Mask: net.CIDRMask(addr.Bits(), 32)}}
	if err := netlink.AddrReplace(dev, a); err != nil {
		return nil, nil, fmt.Errorf("add %s to %s: %w", addr, name, err)
	}
	if remote.Masked() != addr.Masked() {
		r := &netlink.Route{LinkIndex: dev.Attrs().Index, Dst: &net.IPNet{IP: remote.Addr().AsSlice(), Mask: net.CIDRMask(remote.Bits(), 32)}}
		if err := netlink.RouteReplace(r); err != nil {
			return nil, nil, fmt.Errorf("route %s via %s: %w", remote, name, err)
		}
	}
	return dev, peer, nil
}

// isTunnelDevice tells a tunnel device ensureTunnelDevice made (a veth whose peer is
// peerName) from any other interface.
func isTunnelDevice(l netlink.Link) bool {
	p, err := netlink.LinkByName(peerName(l.Attrs().Name))
	return l.Type() == "veth" && err == nil && p.Type() == "veth"
}

// Legacy ethtool commands, still served by every driver; see linux/ethtool.h.
const (
	ethtoolSRXCSUM = 0x15
	ethtoolSTXCSUM = 0x17
	ethtoolSSG     = 0x19
	ethtoolSTSO    = 0x1f
	ethtoolSGSO    = 0x24
	ethtoolSGRO    = 0x2c
)

// offloadsOff turns off the offloads that would hand the sender super-packets or packets
// with partial checksums.
func offloadsOff(dev string) error {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("socket: %w", err)
	}
	defer unix.Close(fd)
	for _, cmd := range []uint32{ethtoolSTSO, ethtoolSGSO, ethtoolSGRO, ethtoolSTXCSUM, ethtoolSRXCSUM, ethtoolSSG} {
		value := struct{ cmd, data uint32 }{cmd, 0}
		var ifr struct {
			name [unix.IFNAMSIZ]byte
			data unsafe.Pointer
			_    [24 - unsafe.Sizeof(uintptr(0))]byte
		}
		copy(ifr.name[:], dev)
		ifr.data = unsafe.Pointer(&value)
		_, _, errno := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), unix.SIOCETHTOOL, uintptr(unsafe.Pointer(&ifr)))
		runtime.KeepAlive(&value)
		if errno != 0 && errno != unix.EOPNOTSUPP {
			return fmt.Errorf("turn offload %#x off on %s: %w", cmd, dev, errno)
		}
	}
	return nil
}
