package agent

import (
	"context"
	"math"
	"net/netip"
	"time"

	pb "github.com/plait/plait/api/plait/v1"
	"github.com/plait/plait/wire"
)

// Liveness without the controller, in the manner of BFD's asynchronous mode (RFC 5880):
// the peer's agent puts a packet on every path at least every probeIdle (data, or a
// probe when the path is idle), so a path on which nothing has arrived for
// livenessDetect (three probe intervals) is silent, provided another path of the tunnel
// still delivers (else it is the peer that is gone, and no path is better than another).
//
// Links and interfaces fail both ways, and then both ends see the silence first; a path
// that fails one way is silent only at its receiving end. So an end takes a path out of
// its split when it hears nothing on it, or when the peer's liveness report
// (feedback.go) says the peer hears nothing of this end on it; and puts it back once the
// peer's reports say it delivers again for livenessHold. Only the peer knows whether
// this end's packets reach it, so while its agent reports, a path comes back on its word
// alone: when its reports stop (its agent stopped or starved, or the reports lost), a
// path that is out stays out, as a BFD session comes up only on its peer's word. A dead
// path put back costs the flows on it a burst of losses, retransmissions among them,
// which TCP repairs with backed-off timeouts; a live one kept out costs its share until
// the reports resume. A peer that never reported (an older agent) leaves it to what this
// end hears itself. The end whose receiving direction failed takes the path out for as
// long as its silence and the peer's report disagree, one report interval or two, and
// then back. Only a path this loop took down is put back, so an operator's `path down`
// stands.
const (
	livenessDetect = 3 * probeIdle
	livenessHold   = 2 * probeIdle
)

type livenessKey struct {
	tunnel uint32
	path   string
}

type pathLife struct {
	since time.Time // when this loop first saw the path
	down  bool      // taken out by liveness
	heard time.Time // since when a dead path has been delivering again; zero: it is not
	// oneWay: silent here, but the peer hears it (put back by its reports): this end's
	// silence is not news until it hears the path again or the reports stop.
	oneWay bool
}

// RunLiveness judges every path each sample interval until ctx ends.
func (a *Agent) RunLiveness(ctx context.Context) {
	tick := time.NewTicker(a.opts.sampleInterval)
	defer tick.Stop()
	paths := map[livenessKey]*pathLife{}
	reports := map[uint32]*feedback{}
	defer func() {
		for id, f := range reports {
			a.rep.setFeedback(id, nil)
			f.close()
		}
	}()
	// A report that changes what the peer hears is acted on at once.
	kick := make(chan struct{}, 1)
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-tick.C:
			a.judgePaths(ctx, now, paths, reports, kick)
		case <-kick:
			a.judgePaths(ctx, time.Now(), paths, reports, kick)
		}
	}
}

func (a *Agent) judgePaths(ctx context.Context, now time.Time, paths map[livenessKey]*pathLife, reports map[uint32]*feedback, kick chan struct{}) {
	list, err := a.ListTunnels(ctx, &pb.Empty{})
	if err != nil {
		return
	}
	seen := map[livenessKey]bool{}
	tunnels := map[uint32]bool{}
	defer func() {
		for k := range paths {
			if !seen[k] {
				delete(paths, k) // its tunnel or path is gone
			}
		}
		for id, f := range reports {
			if !tunnels[id] {
				a.rep.setFeedback(id, nil)
				f.close()
				delete(reports, id)
			}
		}
	}()
	for _, t := range list.Tunnels {
		// Repair's requests travel the report channel, on a tunnel of one path too.
		if t.Config.ReceiveOnly || len(t.Paths) < 2 && !t.Config.Repair {
			continue
		}
		tunnels[t.Config.Id] = true
		st, err := a.GetStats(ctx, &pb.StatsRequest{TunnelId: t.Config.Id})
		if err != nil || len(st.Tunnels) == 0 {
			continue
		}
		age := map[string]time.Duration{} // absent: nothing ever arrived on the path
		for _, p := range st.Tunnels[0].Paths {
			if !math.IsNaN(p.LastRxAgeMs) {
				age[p.Name] = time.Duration(p.LastRxAgeMs * float64(time.Millisecond))
			}
		}
		// What this end hears, for its report to the peer.
		var hears uint64
		for i, p := range t.Paths {
			k := livenessKey{t.Config.Id, p.Config.Name}
			if paths[k] == nil {
				paths[k] = &pathLife{since: now}
			}
			// A path that never delivered is silent once it has had the time to.
			d, known := age[p.Config.Name]
			if !known {
				d = now.Sub(paths[k].since)
			}
			if d <= livenessDetect {
				hears |= 1 << i
			}
		}
		// What the peer hears of this end's paths, when it says so.
		var peerHears uint64
		fromPeer, reporting := false, false
		if f := a.feedbackFor(t, reports, kick); f != nil {
			f.send(now, len(t.Paths), hears, a.tunnelKeys(t.Config.Id))
			peerHears, fromPeer = f.heard(now, len(t.Paths))
			reporting = f.reporting(len(t.Paths))
		}
		for i, p := range t.Paths {
			name := p.Config.Name
			k := livenessKey{t.Config.Id, name}
			seen[k] = true
			l := paths[k]
			// Silence means something only while another path delivers: else it is the
			// peer that is gone, and no path is better than another.
			silentHere := hears&(1<<i) == 0 && hears != 0
			silentThere := fromPeer && peerHears&(1<<i) == 0 && peerHears != 0
			if l.oneWay && (!silentHere || !fromPeer) {
				l.oneWay = false
			}
			silent := silentHere && !l.oneWay || silentThere
			switch {
			case l.down && fromPeer:
				silent = peerHears&(1<<i) == 0 // back by what the peer hears
			case l.down && reporting:
				silent = true // its reports stopped: no word that it hears the path
			}
			switch {
			case silent && !l.down:
				l.down, l.heard = true, time.Time{}
				by := "silent here"
				if silentThere {
					by = "the peer's report"
				}
				a.opts.log.Warn("path dead", "tunnel", t.Config.Id, "path", name, "by", by)
			case l.down && !silent:
				if l.heard.IsZero() {
					l.heard = now
				}
				if now.Sub(l.heard) >= livenessHold {
					// Put back by the peer's reports while this end hears nothing on it: it
					// failed towards this end only, and this end's direction works.
					l.down, l.oneWay = false, silentHere
					a.opts.log.Info("path back", "tunnel", t.Config.Id, "path", name)
					a.setUp(ctx, t.Config.Id, name, true)
					continue
				}
			case l.down:
				l.heard = time.Time{}
			}
			// A controller that does not know yet may have put it back: keep it out.
			if l.down && p.Up {
				a.setUp(ctx, t.Config.Id, name, false)
			}
		}
	}
}

// feedbackFor is the tunnel's report channel, opened (again) as its addresses require;
// nil when the tunnel names no peer address or the channel cannot be opened.
func (a *Agent) feedbackFor(t *pb.Tunnel, reports map[uint32]*feedback, kick chan struct{}) *feedback {
	id := t.Config.Id
	local, err1 := netip.ParsePrefix(t.Config.Address)
	peer, err2 := netip.ParseAddr(t.Config.PeerAddress)
	f := reports[id]
	if err1 != nil || err2 != nil {
		if f != nil {
			a.rep.setFeedback(id, nil)
			f.close()
			delete(reports, id)
		}
		return nil
	}
	l, p := netip.AddrPortFrom(local.Addr(), uint16(t.Config.Port)), netip.AddrPortFrom(peer, uint16(t.Config.Port))
	if f != nil && f.local == l && f.peer == p && f.device == t.Config.Device {
		return f
	}
	if f != nil {
		a.rep.setFeedback(id, nil)
		f.close()
		delete(reports, id)
	}
	f, err := openFeedback(uint16(id), t.Config.Device, l, p, kick, func(q request) { a.resend(id, q) })
	if err != nil {
		a.opts.log.Warn("liveness reports", "tunnel", id, "err", err)
		return nil
	}
	reports[id] = f
	a.rep.setFeedback(id, f)
	return f
}

// tunnelKeys are the keys the tunnel's packets are tagged with now.
func (a *Agent) tunnelKeys(id uint32) []wire.Key {
	a.mu.Lock()
	defer a.mu.Unlock()
	if t := a.tunnels[id]; t != nil {
		return t.keys
	}
	return nil
}

func (a *Agent) setUp(ctx context.Context, tunnel uint32, path string, up bool) {
	if _, err := a.SetPathState(ctx, &pb.SetPathStateRequest{TunnelId: tunnel, Path: path, Up: up}); err != nil {
		a.opts.log.Warn("liveness", "tunnel", tunnel, "path", path, "err", err)
	}
}
