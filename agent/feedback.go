package agent

import (
	"encoding/binary"
	"errors"
	"net"
	"net/netip"
	"sync"
	"time"

	"github.com/dchest/siphash"
	"golang.org/x/net/ipv4"

	"github.com/plait/plait/ebpf/datapath"
	"github.com/plait/plait/wire"
)

// Liveness reports: a path that fails one way is silent only at its receiving end, while
// its sender, which hears the other way, would keep sending into it. So each end tells
// the other, at once when it changes and every livenessDetect otherwise, which of the
// peer's paths it hears: a report, sent through the tunnel itself from this end's tunnel address to the
// peer's (both on the tunnel's UDP port), so that it takes whichever paths work and is
// checked as all the tunnel's packets are (the peer check, the tag, the replay window,
// the inner source). It needs the peer's tunnel address (peer_address). A report is
//
//	magic "PLVR" | version 1 | paths n | tunnel id (2) | sent, Unix ns (8) | heard (8)
//
// big-endian, heard's bit i set when path i delivered within livenessDetect, followed,
// on a tunnel with keys, by a SipHash-2-4 tag of the 24 bytes under its first key
// (little-endian, as the datapath's), and by zeroes up to reportSize bytes. The receiver
// takes it only from the peer's address, arriving on the tunnel device, with a tag under
// one of the keys, and newer than the last it took (reports cross paths of different
// delays).
const (
	reportLen     = 24
	reportVersion = 1
	// reportSize makes a report's inner packet (with its IPv4 and UDP headers) one byte
	// longer than an ACK: the sender puts ACK-sized packets on the tunnel's ACK path, one
	// path and often the slowest (docs/controller.md#ack-path), and news must spread over
	// the split like data, so that the first copy to arrive comes by the fastest path
	// that works.
	reportSize = datapath.AckMaxInner + 1 - 20 - 8
	// reportFresh is how long a report is news: a few report intervals. Older, the
	// peer's view is unknown (its agent stopped or starved, or nothing reaches this
	// end): it takes no path out and puts none back (liveness.go).
	reportFresh = 3 * livenessDetect
)

var reportMagic = [4]byte{'P', 'L', 'V', 'R'}

// Repair requests travel the same channel (repair.go): the receiver asks its peer to
// resend the packets a gap in one of the peer's paths says are lost. A request is
//
//	magic "PLRQ" | version 1 | path | tunnel id (2) | first path_seq (4) | count (2) | via | 0
//
// big-endian, tagged as a report is: via is the path the repairs should take, the one
// the receiver measures fastest now (the sender measures only the other direction, which
// does not show this one's queues). It needs no freshness: answering an old or replayed
// request only resends packets the receiver then refuses as replays.
const requestLen = 16

var requestMagic = [4]byte{'P', 'L', 'R', 'Q'}

// request asks for count packets from path_seq first of the peer's path, to be resent
// on path via.
type request struct {
	path, via uint8
	first     uint32
	count     uint16
}

func (r request) marshal(tunnel uint16, keys []wire.Key) []byte {
	b := make([]byte, requestLen, requestLen+wire.TagLen)
	copy(b, requestMagic[:])
	b[4], b[5] = reportVersion, r.path
	binary.BigEndian.PutUint16(b[6:], tunnel)
	binary.BigEndian.PutUint32(b[8:], r.first)
	binary.BigEndian.PutUint16(b[12:], r.count)
	b[14] = r.via
	if len(keys) > 0 {
		b = binary.LittleEndian.AppendUint64(b, msgTag(&keys[0], b))
	}
	return b
}

func parseRequest(b []byte, tunnel uint16, keys []wire.Key) (request, bool) {
	if !tagged(b, requestLen, keys) || [4]byte(b[:4]) != requestMagic || b[4] != reportVersion || binary.BigEndian.Uint16(b[6:]) != tunnel {
		return request{}, false
	}
	return request{path: b[5], first: binary.BigEndian.Uint32(b[8:]), count: binary.BigEndian.Uint16(b[12:]), via: b[14]}, true
}

// tagged is whether b is n bytes, followed by a tag under one of keys when there are any.
func tagged(b []byte, n int, keys []wire.Key) bool {
	want := n
	if len(keys) > 0 {
		want += wire.TagLen
	}
	if len(b) != want {
		return false
	}
	ok := len(keys) == 0
	for i := range keys {
		ok = ok || msgTag(&keys[i], b[:n]) == binary.LittleEndian.Uint64(b[n:])
	}
	return ok
}

type report struct {
	tunnel uint16
	paths  uint8
	sent   int64  // Unix ns
	heard  uint64 // bit i: path i delivered
}

func (r report) marshal(keys []wire.Key) []byte {
	b := make([]byte, reportLen, reportSize)
	copy(b, reportMagic[:])
	b[4], b[5] = reportVersion, r.paths
	binary.BigEndian.PutUint16(b[6:], r.tunnel)
	binary.BigEndian.PutUint64(b[8:], uint64(r.sent))
	binary.BigEndian.PutUint64(b[16:], r.heard)
	if len(keys) > 0 {
		b = binary.LittleEndian.AppendUint64(b, msgTag(&keys[0], b))
	}
	return append(b, make([]byte, reportSize-len(b))...)
}

// msgTag is the tag of a report or request b (without its tag).
func msgTag(k *wire.Key, b []byte) uint64 {
	return siphash.Hash(binary.LittleEndian.Uint64(k[:8]), binary.LittleEndian.Uint64(k[8:]), b)
}

var errReport = errors.New("not a liveness report of this tunnel")

func parseReport(b []byte, tunnel uint16, keys []wire.Key) (report, error) {
	n := reportLen
	if len(keys) > 0 {
		n += wire.TagLen
	}
	if len(b) != reportSize || !tagged(b[:n], reportLen, keys) || [4]byte(b[:4]) != reportMagic || b[4] != reportVersion || binary.BigEndian.Uint16(b[6:]) != tunnel {
		return report{}, errReport
	}
	return report{tunnel: tunnel, paths: b[5], sent: int64(binary.BigEndian.Uint64(b[8:])), heard: binary.BigEndian.Uint64(b[16:])}, nil
}

// feedback is one tunnel's report channel to its peer.
type feedback struct {
	local, peer netip.AddrPort
	device      string
	ifindex     int // the device's, when the channel was opened
	tunnel      uint16
	conn        *net.UDPConn
	kick        chan struct{} // told when the peer's view changes
	resend      func(request) // answers the peer's repair requests (nil: none)

	mu        sync.Mutex
	keys      []wire.Key
	last      report    // the newest report taken
	at        time.Time // when it came; zero: none yet
	sent      time.Time
	sentHeard uint64 // heard, as last sent
}

// openFeedback binds the tunnel's report socket to its local tunnel address; the agent
// made the address, so no other process holds it first unless it binds every address.
func openFeedback(tunnel uint16, device string, local, peer netip.AddrPort, kick chan struct{}, resend func(request)) (*feedback, error) {
	ifi, err := net.InterfaceByName(device)
	if err != nil {
		return nil, err
	}
	conn, err := net.ListenUDP("udp4", net.UDPAddrFromAddrPort(local))
	if err != nil {
		return nil, err
	}
	pc := ipv4.NewPacketConn(conn)
	if err := pc.SetControlMessage(ipv4.FlagInterface, true); err != nil {
		conn.Close()
		return nil, err
	}
	f := &feedback{local: local, peer: peer, device: device, ifindex: ifi.Index, tunnel: tunnel, conn: conn, kick: kick, resend: resend}
	go f.receive(pc)
	return f, nil
}

func (f *feedback) close() { f.conn.Close() }

func (f *feedback) receive(pc *ipv4.PacketConn) {
	buf := make([]byte, 128)
	for {
		n, cm, src, err := pc.ReadFrom(buf)
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			continue
		}
		// Only what the receiver decapsulated arrives on the tunnel device.
		ua, ok := src.(*net.UDPAddr)
		if !ok || ua.AddrPort().Addr().Unmap() != f.peer.Addr() || cm == nil || cm.IfIndex != f.ifindex {
			continue
		}
		f.mu.Lock()
		if q, ok := parseRequest(buf[:n], f.tunnel, f.keys); ok {
			f.mu.Unlock()
			if f.resend != nil {
				f.resend(q)
			}
			continue
		}
		r, err := parseReport(buf[:n], f.tunnel, f.keys)
		now := time.Now()
		// Newer than the last, or the last is old (the peer's clock was set back).
		changed := false
		if err == nil && (r.sent > f.last.sent || now.Sub(f.at) > time.Second) {
			changed = r.heard != f.last.heard
			f.last, f.at = r, now
		}
		f.mu.Unlock()
		if changed {
			select {
			case f.kick <- struct{}{}:
			default:
			}
		}
	}
}

// send sends this end's report when it changed, or livenessDetect after the last.
func (f *feedback) send(now time.Time, paths int, heard uint64, keys []wire.Key) {
	f.mu.Lock()
	f.keys = keys
	news := heard != f.sentHeard || f.sent.IsZero()
	due := news || now.Sub(f.sent) >= livenessDetect
	if due {
		f.sent, f.sentHeard = now, heard
	}
	f.mu.Unlock()
	if !due {
		return
	}
	r := report{tunnel: f.tunnel, paths: uint8(paths), sent: now.UnixNano(), heard: heard}
	// News goes in as many copies as paths, which the split spreads over several of
	// them: one that meets a dead path or a long one does not hold it back (the
	// receiver takes the first). A full socket buffer or a tunnel that carries nothing
	// only costs the report.
	copies := 1
	if news {
		copies = paths
	}
	b := r.marshal(keys)
	for range copies {
		f.conn.WriteToUDPAddrPort(b, f.peer)
	}
}

// ask sends a repair request to the peer, tagged under keys; a full socket buffer only
// costs the request.
func (f *feedback) ask(q request, keys []wire.Key) error {
	_, err := f.conn.WriteToUDPAddrPort(q.marshal(f.tunnel, keys), f.peer)
	return err
}

// reporting is whether the peer's agent reports on this channel, about paths paths.
func (f *feedback) reporting(paths int) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return !f.at.IsZero() && int(f.last.paths) == paths
}

// heard returns the peer's latest report while it is fresh.
func (f *feedback) heard(now time.Time, paths int) (uint64, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.at.IsZero() || now.Sub(f.at) > reportFresh || int(f.last.paths) != paths {
		return 0, false
	}
	return f.last.heard, true
}
