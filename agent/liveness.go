package agent

import (
	"context"
	"math"
	"time"

	pb "github.com/plait/plait/api/plait/v1"
)

// Liveness without the controller, in the manner of BFD's asynchronous mode (RFC 5880):
// the peer's agent puts a packet on every path at least every probeIdle (data, or a
// probe when the path is idle), so a path on which nothing has arrived for
// livenessDetect (three probe intervals) is dead, provided another path of the tunnel
// still delivers (else it is the peer that is gone, and no path is better than another).
// A dead path is taken out of this host's split at once, and put back once it has
// delivered again for livenessHold. Only a path this loop took down is put back, so an
// operator's `path down` stands.
//
// A path fails both ways when a link or an interface fails, and both ends then see it;
// a path that fails one way only is seen by its receiving end alone, which takes it out
// of its own split but cannot tell the sender (the controller, which hears both ends,
// can).
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
}

// RunLiveness judges every path each sample interval until ctx ends.
func (a *Agent) RunLiveness(ctx context.Context) {
	tick := time.NewTicker(a.opts.sampleInterval)
	defer tick.Stop()
	paths := map[livenessKey]*pathLife{}
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-tick.C:
			a.judgePaths(ctx, now, paths)
		}
	}
}

func (a *Agent) judgePaths(ctx context.Context, now time.Time, paths map[livenessKey]*pathLife) {
	list, err := a.ListTunnels(ctx, &pb.Empty{})
	if err != nil {
		return
	}
	seen := map[livenessKey]bool{}
	defer func() {
		for k := range paths {
			if !seen[k] {
				delete(paths, k) // its tunnel or path is gone
			}
		}
	}()
	for _, t := range list.Tunnels {
		if t.Config.ReceiveOnly || len(t.Paths) < 2 {
			continue
		}
		st, err := a.GetStats(ctx, &pb.StatsRequest{TunnelId: t.Config.Id})
		if err != nil || len(st.Tunnels) == 0 {
			continue
		}
		age := map[string]time.Duration{} // absent: nothing ever arrived on the path
		anyAlive := false
		for _, p := range st.Tunnels[0].Paths {
			if !math.IsNaN(p.LastRxAgeMs) {
				age[p.Name] = time.Duration(p.LastRxAgeMs * float64(time.Millisecond))
				anyAlive = anyAlive || age[p.Name] < livenessDetect
			}
		}
		for _, p := range t.Paths {
			name := p.Config.Name
			k := livenessKey{t.Config.Id, name}
			seen[k] = true
			l := paths[k]
			if l == nil {
				l = &pathLife{since: now}
				paths[k] = l
			}
			// A path that never delivered is silent once it has had the time to.
			d, known := age[name]
			if !known {
				d = now.Sub(l.since)
			}
			silent := d > livenessDetect
			switch {
			case silent && anyAlive && !l.down:
				l.down, l.heard = true, time.Time{}
				a.opts.log.Warn("path dead", "tunnel", t.Config.Id, "path", name, "silent", d.Round(time.Millisecond))
			case l.down && !silent:
				if l.heard.IsZero() {
					l.heard = now
				}
				if now.Sub(l.heard) >= livenessHold {
					l.down = false
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

func (a *Agent) setUp(ctx context.Context, tunnel uint32, path string, up bool) {
	if _, err := a.SetPathState(ctx, &pb.SetPathStateRequest{TunnelId: tunnel, Path: path, Up: up}); err != nil {
		a.opts.log.Warn("liveness", "tunnel", tunnel, "path", path, "err", err)
	}
}
