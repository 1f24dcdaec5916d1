package controller_test

import (
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/plait/plait/internal/labnet"
)

// flowBin is the interval the receiving side counts a flow's bytes over.
const flowBin = 100 * time.Millisecond

// flow is a cubic TCP flow h1 -> h2 through the tunnel for seconds; wait returns its
// longest stall that began at or after since (the zero time: any): the longest run of
// 100 ms intervals in which the receiving application got nothing. A fault test passes
// the fault's time, so that what it judges is the fault: not TCP's own slow start on the
// split it started with (a lost retransmission there waits a backed-off timeout, 1.5-1.9
// s in 3 of 24 runs), nor a stall already under way when the fault came (its timer is
// backed off, and a retransmission in flight on the path that dies doubles it again; in
// one CI run a stall that began before the fault lasted 2.4 s and ended with slow
// start). The receiver's side is the one that counts, on the test's clock: the sender's
// writes go into a socket buffer that holds a second of the flow.
func flow(t testing.TB, lab *labnet.Lab, seconds int) (wait func(since time.Time) time.Duration) {
	t.Helper()
	var ln net.Listener
	if err := lab.H2.Do(func() (err error) { ln, err = net.Listen("tcp", "10.99.0.2:0"); return err }); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	dialer := net.Dialer{Timeout: 5 * time.Second, Control: func(_, _ string, c syscall.RawConn) error {
		var serr error
		err := c.Control(func(fd uintptr) {
			serr = unix.SetsockoptString(int(fd), unix.IPPROTO_TCP, unix.TCP_CONGESTION, "cubic")
		})
		return errors.Join(err, serr)
	}}
	var conn net.Conn
	if err := lab.H1.Do(func() (err error) { conn, err = dialer.Dial("tcp", ln.Addr().String()); return err }); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	rcv, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rcv.Close() })

	var (
		wg       sync.WaitGroup
		sendErr  error
		rcvErr   error
		retrans  uint32
		first    time.Time
		bins     []int // bytes received in each flowBin from first
		received int
	)
	wg.Add(2)
	go func() {
		defer wg.Done()
		buf := make([]byte, 128<<10)
		end := time.Now().Add(time.Duration(seconds) * time.Second)
		conn.SetWriteDeadline(end.Add(10 * time.Second)) // a flow that never drains fails the test, not hangs it
		for time.Now().Before(end) {
			if _, sendErr = conn.Write(buf); sendErr != nil {
				return
			}
		}
		if raw, err := conn.(*net.TCPConn).SyscallConn(); err == nil {
			raw.Control(func(fd uintptr) {
				if info, err := unix.GetsockoptTCPInfo(int(fd), unix.IPPROTO_TCP, unix.TCP_INFO); err == nil {
					retrans = info.Total_retrans
				}
			})
		}
		sendErr = conn.(*net.TCPConn).CloseWrite()
	}()
	go func() {
		defer wg.Done()
		buf := make([]byte, 256<<10)
		for {
			n, err := rcv.Read(buf)
			if n > 0 {
				now := time.Now()
				if first.IsZero() {
					first = now
				}
				i := int(now.Sub(first) / flowBin)
				for len(bins) <= i {
					bins = append(bins, 0)
				}
				bins[i] += n
				received += n
			}
			if err != nil {
				if !errors.Is(err, io.EOF) {
					rcvErr = err
				}
				return
			}
		}
	}()
	return func(since time.Time) time.Duration {
		wg.Wait()
		if err := errors.Join(sendErr, rcvErr); err != nil {
			t.Fatalf("the flow: %v", err)
		}
		if received == 0 {
			t.Fatalf("the flow delivered nothing")
		}
		from := 0 // the first interval judged
		if !since.IsZero() {
			from = int(max(0, since.Sub(first)) / flowBin)
		}
		most, at, run, under := 0, 0, 0, 0
		for i, b := range bins {
			if b > 0 {
				run = 0
				continue
			}
			switch run++; {
			case i-run+1 >= from && run > most:
				most, at = run, i+1
			case i-run+1 < from && i >= from:
				under = run
			}
		}
		if under > 0 {
			t.Logf("a stall under way at the fault lasted %.1f s, not judged", (time.Duration(under) * flowBin).Seconds())
		}
		if most > 0 {
			var s strings.Builder
			for i := max(0, at-most-10); i < min(len(bins), at+10); i++ {
				fmt.Fprintf(&s, " %d", bins[i]/1000)
			}
			t.Logf("longest stall judged %.1f s, %.1f-%.1f s into the flow (the fault at %.1f s); %d retransmissions; kB a 100 ms around it:%s",
				(time.Duration(most) * flowBin).Seconds(), (time.Duration(at-most) * flowBin).Seconds(), (time.Duration(at) * flowBin).Seconds(),
				(time.Duration(from) * flowBin).Seconds(), retrans, s.String())
		}
		return time.Duration(most) * flowBin
	}
}
