package p4switch_test

import (
	"context"
	"encoding/binary"
	"math"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"testing"
	"time"
	"unsafe"

	plaitv1 "github.com/plait/plait/api/plait/v1"
	"github.com/plait/plait/internal/mmtrace"
	"github.com/plait/plait/internal/nstest"
	"github.com/plait/plait/p4/p4switch"
	"golang.org/x/sys/unix"
	"google.golang.org/grpc/metadata"
)

// recorded is a recorded trace from ../shared (CI keeps it beside the clone), or "".
func recorded(name string) string {
	f := filepath.Join("..", "..", "..", "shared", "reference", "traces", name)
	if _, err := os.Stat(f); err != nil {
		return ""
	}
	return f
}

// A saturated TCP flow over a trace link gets the trace's packet count: one full-sized
// packet per opportunity, within 1 %, over the project's own trace and, when ../shared is
// there, a recorded LTE trace.
func TestTraceDeliversItsCount(t *testing.T) {
	if _, err := exec.LookPath("iperf3"); err != nil {
		t.Skip("needs iperf3 (make deps installs it)")
	}
	cases := []struct {
		name, file string
		offset     time.Duration
	}{{"test.trace", "../../topo/traces/test.trace", 300 * time.Millisecond}}
	if f := recorded("TMobile-LTE-short.down"); f != "" {
		cases = append(cases, struct {
			name, file string
			offset     time.Duration
		}{"TMobile-LTE-short.down", f, 20 * time.Second})
	}
	l := newLab(t)
	r := l.wire(t)
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tr, err := mmtrace.Load(tc.file)
			if err != nil {
				t.Fatal(err)
			}
			// The ACKs come back over 20 ms; a queue of 1000 keeps the trace's link busy
			// through cubic's backoffs and the trace's bursts.
			if err := r.sw.SetLinkParams(1, p4switch.LinkParams{Delay: 20 * time.Millisecond}); err != nil {
				t.Fatal(err)
			}
			port := strconv.Itoa(5301 + i)
			l.b.Start("iperf3", "-s", "-1", "-B", addrB, "-p", port)
			time.Sleep(300 * time.Millisecond)
			epoch := time.Now()
			if err := r.sw.SetLinkParams(2, p4switch.LinkParams{Trace: &p4switch.LinkTrace{Trace: tr, Offset: tc.offset}, QueuePackets: 1000}); err != nil {
				t.Fatal(err)
			}
			cmd, out := l.a.Start("iperf3", "-c", addrB, "-p", port, "-t", "9", "-C", "cubic")
			sent := func() (uint64, time.Duration) {
				return r.sw.Ports()[1].Stats.TxPackets, time.Since(epoch)
			}
			time.Sleep(2 * time.Second) // past slow start
			n0, t0 := sent()
			time.Sleep(6 * time.Second)
			n1, t1 := sent()
			cmd.Wait()
			got, want := float64(n1-n0), float64(tr.Count(tc.offset, t0, t1))
			t.Logf("%s: %.0f packets from %.2fs to %.2fs, the trace has %.0f opportunities (%.2f Mbit/s)", tc.name, got, t0.Seconds(), t1.Seconds(), want, want*12000/(t1-t0).Seconds()/1e6)
			if math.Abs(got/want-1) > 0.01 {
				t.Errorf("%.0f packets, want the trace's %.0f ±1%%\n%s", got, want, out())
			}
		})
	}
}

// stamped receives numbered UDP probes with the kernel's receive time (SO_TIMESTAMPNS).
type stamped struct {
	seq uint64
	at  time.Time
}

func listenStamped(t *testing.T, ns *nstest.NS, addr string, port int) *net.UDPConn {
	t.Helper()
	var c *net.UDPConn
	if err := ns.Do(func() (err error) {
		c, err = net.ListenUDP("udp4", &net.UDPAddr{IP: net.ParseIP(addr), Port: port})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	rc, _ := c.SyscallConn()
	rc.Control(func(fd uintptr) { unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_TIMESTAMPNS, 1) })
	t.Cleanup(func() { c.Close() })
	return c
}

func receiveStamped(c *net.UDPConn, quiet time.Duration) []stamped {
	var out []stamped
	buf, oob := make([]byte, 2048), make([]byte, 128)
	for {
		c.SetReadDeadline(time.Now().Add(quiet))
		n, oobn, _, _, err := c.ReadMsgUDP(buf, oob)
		if err != nil {
			return out
		}
		msgs, _ := unix.ParseSocketControlMessage(oob[:oobn])
		for _, m := range msgs {
			if m.Header.Level == unix.SOL_SOCKET && m.Header.Type == unix.SO_TIMESTAMPNS && n >= 8 {
				ts := *(*unix.Timespec)(unsafe.Pointer(&m.Data[0]))
				out = append(out, stamped{binary.BigEndian.Uint64(buf), time.Unix(ts.Unix())})
			}
		}
	}
}

// An outage scheduled through SetLink (as the lab schedules a scenario's events) starts
// and ends at its times on both directions, within one tick, while a TCP flow fills the
// link: probes every 0.5 ms each way stop being delivered at the down time (plus the
// delay and what was serialising) and are delivered again from the up time.
func TestScheduledOutageBothWays(t *testing.T) {
	if _, err := exec.LookPath("iperf3"); err != nil {
		t.Skip("needs iperf3 (make deps installs it)")
	}
	const tick = time.Millisecond
	const delay = 5 * time.Millisecond
	const rate = 20e6
	ser := time.Duration(1514 * 8 / rate * float64(time.Second))
	l := newLab(t)
	r := l.wire(t)
	for _, port := range []uint16{1, 2} {
		if err := r.sw.SetLinkParams(port, p4switch.LinkParams{RateBps: rate, Delay: delay, QueuePackets: 50}); err != nil {
			t.Fatal(err)
		}
	}
	toB := listenStamped(t, l.b, addrB, 9100)
	toA := listenStamped(t, l.a, addrA, 9101)
	l.b.Start("iperf3", "-s", "-1", "-B", addrB, "-p", "5401")
	time.Sleep(300 * time.Millisecond)
	cmd, _ := l.a.Start("iperf3", "-c", addrB, "-p", "5401", "-t", "4", "-C", "cubic")
	time.Sleep(500 * time.Millisecond)
	down := time.Now().Add(time.Second).Truncate(time.Millisecond).Add(300 * time.Microsecond)
	up := down.Add(time.Second)
	// As the primary controller (election id 1, wire's) may.
	ctx := metadata.NewIncomingContext(context.Background(), metadata.Pairs(p4switch.ElectionIDKey, "1"))
	for _, port := range []uint32{1, 2} {
		for _, ch := range []struct {
			at   time.Time
			down bool
		}{{down, true}, {up, false}} {
			d := ch.down
			if _, err := r.sw.SetLink(ctx, &plaitv1.SetLinkRequest{Port: port, Params: &plaitv1.LinkParams{Down: &d}, AtUnixNano: ch.at.UnixNano()}); err != nil {
				t.Fatal(err)
			}
		}
	}
	gotB, gotA := make(chan []stamped), make(chan []stamped)
	go func() { gotB <- receiveStamped(toB, 2*time.Second) }() // longer than the outage
	go func() { gotA <- receiveStamped(toA, 2*time.Second) }()
	// sendProbes returns the probes' send times (a sleep of 0.5 ms takes longer on a
	// loaded machine, so the bounds below take the spacing as it was).
	sendProbes := func(ns *nstest.NS, dst string, port int) (sent []time.Time) {
		var c *net.UDPConn
		ns.Do(func() (err error) {
			c, err = net.DialUDP("udp4", nil, &net.UDPAddr{IP: net.ParseIP(dst), Port: port})
			return err
		})
		defer c.Close()
		msg := make([]byte, 64)
		for i, end := uint64(0), up.Add(500*time.Millisecond); time.Now().Before(end); i++ {
			binary.BigEndian.PutUint64(msg, i)
			sent = append(sent, time.Now())
			c.Write(msg)
			time.Sleep(500 * time.Microsecond)
		}
		return sent
	}
	sentToA := make(chan []time.Time)
	go func() { sentToA <- sendProbes(l.b, addrA, 9101) }()
	sentToB := sendProbes(l.a, addrB, 9100)
	cmd.Wait()
	lateMax := max(r.sw.Ports()[0].Stats.LateMax, r.sw.Ports()[1].Stats.LateMax)
	for _, dir := range []struct {
		name string
		got  []stamped
		sent []time.Time
	}{{"towards b", <-gotB, sentToB}, {"towards a", <-gotA, <-sentToA}} {
		var before, after []time.Time
		for _, p := range dir.got {
			switch {
			case p.at.Before(down.Add(delay + ser + tick + lateMax)):
				before = append(before, p.at)
			case p.at.Before(up.Add(delay)):
				t.Errorf("%s: a probe delivered at %v, inside the outage (%v to %v plus %v of delay)", dir.name, p.at.Sub(down), time.Duration(0), up.Sub(down), delay)
			default:
				after = append(after, p.at)
			}
		}
		if len(after) == 0 {
			t.Fatalf("%s: no probe after the outage", dir.name)
		}
		sort.Slice(before, func(i, j int) bool { return before[i].Before(before[j]) })
		sort.Slice(after, func(i, j int) bool { return after[i].Before(after[j]) })
		if len(before) < 2 {
			t.Fatalf("%s: %d probes before the outage", dir.name, len(before))
		}
		last, first := before[len(before)-1].Sub(down)-delay, after[0].Sub(up)-delay
		spacing := before[len(before)-1].Sub(before[len(before)-2])
		i := sort.Search(len(dir.sent), func(i int) bool { return !dir.sent[i].Before(up) })
		nextSent := dir.sent[i].Sub(up) // the first probe sent once the link is up again
		t.Logf("%s: last probe left %v after the down time (%v after the one before), first %v after the up time (sent %v after it; serialisation %v, the switch at most %v late)",
			dir.name, last, spacing, first, nextSent, ser, lateMax)
		// The link was full up to the down time: the last probe left within the probes'
		// spacing and its serialisation of it. After the up time the queue is empty: the
		// first probe sent leaves once serialised.
		if last < -spacing-ser-tick {
			t.Errorf("%s: the last probe left %v before the down time: the outage began early", dir.name, -last)
		}
		if first > nextSent+ser+tick+lateMax {
			t.Errorf("%s: the first probe left %v after the up time, the first sent after it %v: the outage ended late", dir.name, first, nextSent)
		}
	}
}

// A Gilbert–Elliott link's loss, measured on numbered probes, has the chain's mean rate
// and mean burst length.
func TestGilbertElliottBursts(t *testing.T) {
	l := newLab(t)
	r := l.wire(t)
	// Mean loss 5 %, bursts of 4 packets: the scenario's loss: 5, burst: 4.
	const loss, burst, n = 0.05, 4.0, 40000
	ge := &p4switch.GilbertElliott{PGoodToBad: loss / burst / (1 - loss), PBadToGood: 1 / burst, LossBad: 1}
	if err := r.sw.SetLinkParams(2, p4switch.LinkParams{GE: ge}); err != nil {
		t.Fatal(err)
	}
	ps := probes(t, l, n, 64, 10, time.Millisecond/2, 500*time.Millisecond)
	seen := make([]bool, n)
	for _, p := range ps {
		if p.seq < n {
			seen[p.seq] = true
		}
	}
	lost, bursts := 0, 0
	for i, ok := range seen {
		if !ok {
			lost++
			if i == 0 || seen[i-1] {
				bursts++
			}
		}
	}
	rate, mean := float64(lost)/n, float64(lost)/float64(max(bursts, 1))
	// About 500 bursts: the mean burst's standard error is sqrt(var/bursts) with a
	// geometric var of (1-r)/r² = 12, 0.15 packets; the loss rate's, with the bursts'
	// number and length both random, about 0.3 points. Four of them: a correct link fails
	// one run in 15,000.
	t.Logf("loss %.4f (want %.2f), %d bursts of mean %.2f packets (want %.1f)", rate, loss, bursts, mean, burst)
	if math.Abs(rate-loss) > 4*0.003 {
		t.Errorf("loss rate %.4f, want %.2f", rate, loss)
	}
	if math.Abs(mean-burst) > 4*0.15 {
		t.Errorf("mean burst %.2f packets, want %.1f", mean, burst)
	}
}

// Under real TCP flows, a Gilbert–Elliott link's own loss decisions have the chain's
// mean loss and mean burst length: the link counts the packets that met its loss, those
// it dropped and the runs of drops in a row.
func TestGilbertElliottUnderTCP(t *testing.T) {
	if _, err := exec.LookPath("iperf3"); err != nil {
		t.Skip("needs iperf3 (make deps installs it)")
	}
	l := newLab(t)
	r := l.wire(t)
	const loss, burst = 0.05, 4.0
	ge := &p4switch.GilbertElliott{PGoodToBad: loss / burst / (1 - loss), PBadToGood: 1 / burst, LossBad: 1}
	if err := r.sw.SetLinkParams(2, p4switch.LinkParams{GE: ge, Delay: time.Millisecond}); err != nil {
		t.Fatal(err)
	}
	if err := r.sw.SetLinkParams(1, p4switch.LinkParams{Delay: time.Millisecond}); err != nil {
		t.Fatal(err)
	}
	before := r.sw.Ports()[1].Stats
	l.b.Start("iperf3", "-s", "-1", "-B", addrB, "-p", "5501")
	time.Sleep(300 * time.Millisecond)
	// A fixed time, not a fixed amount: the chain moves per packet, so a burst that
	// catches every flow in its retransmission timeout lasts until the flows' backed-off
	// timers send again, and a fixed amount took minutes on a busy machine. Eight flows
	// keep packets coming; the margins below come from the counts actually seen.
	cmd, out := l.a.Start("iperf3", "-c", addrB, "-p", "5501", "-t", "12", "-P", "8", "-C", "cubic")
	if err := cmd.Wait(); err != nil {
		t.Fatalf("iperf3: %v\n%s", err, out())
	}
	time.Sleep(100 * time.Millisecond) // the last packets delivered
	after := r.sw.Ports()[1].Stats
	lost := float64(after.LossDrops - before.LossDrops)
	met := lost + float64(after.TxPackets-before.TxPackets)
	bursts := float64(after.LossBursts - before.LossBursts)
	if met < 3000 || bursts < 30 {
		t.Fatalf("only %.0f packets met the loss (%.0f bursts): too few to measure\n%s", met, bursts, out())
	}
	rate, mean := lost/met, lost/bursts
	// Standard errors from the counts: bursts start at random, their lengths are
	// geometric (variance (1-r)/r² = 12), so the lost count's variance is about
	// bursts·(12 + 4²); four of them.
	sdRate, sdMean := math.Sqrt(bursts*(12+burst*burst))/met, math.Sqrt(12/bursts)
	t.Logf("%.0f packets met the loss: %.4f lost (want %.2f ± %.4f), %.0f bursts of mean %.2f (want %.1f ± %.2f)", met, rate, loss, 4*sdRate, bursts, mean, burst, 4*sdMean)
	if math.Abs(rate-loss) > 4*sdRate {
		t.Errorf("loss rate %.4f, want %.2f ± %.4f", rate, loss, 4*sdRate)
	}
	if math.Abs(mean-burst) > 4*sdMean {
		t.Errorf("mean burst %.2f packets, want %.1f ± %.2f", mean, burst, 4*sdMean)
	}
}
