package datapath

import (
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
)

// The kernel's BPF_PROG_TEST_RUN with repeat runs the program again and again on the one
// buffer it already modified, so after the first run an encapsulating or decapsulating
// program takes another path through its code. Each packet therefore gets its own test run
// (repeat = 1) and the kernel-measured time of a program that only returns, run the same
// way, is subtracted: what remains is the program's own cost per packet.
const benchPackets = 100000

func trivial(b *testing.B, typ ebpf.ProgramType, ret int32) *ebpf.Program {
	prog, err := ebpf.NewProgram(&ebpf.ProgramSpec{
		Type:         typ,
		Instructions: asm.Instructions{asm.Mov.Imm(asm.R0, ret), asm.Return()},
		License:      "GPL",
	})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { prog.Close() })
	return prog
}

// perPacket is the mean kernel-measured run time over the frames.
func perPacket(b *testing.B, prog *ebpf.Program, frames [][]byte) time.Duration {
	var total time.Duration
	for _, f := range frames {
		_, d, err := prog.Benchmark(f, 1, nil)
		if err != nil {
			b.Fatal(err)
		}
		total += d
	}
	return total / time.Duration(len(frames))
}

func report(b *testing.B, prog, base *ebpf.Program, frames [][]byte) {
	raw := perPacket(b, prog, frames)
	overhead := perPacket(b, base, frames)
	b.ReportMetric(float64(raw.Nanoseconds()), "raw-ns/pkt")
	b.ReportMetric(float64(overhead.Nanoseconds()), "timer-ns/pkt")
	b.ReportMetric(float64((raw - overhead).Nanoseconds()), "ns/pkt")
}

func BenchmarkSender(b *testing.B) {
	frames := make([][]byte, benchPackets)
	for i := range frames {
		frames[i] = innerPacket(uint32(i), 1400)
	}
	for _, mode := range []Mode{ModeRR, ModeWRR, ModeEDPF} {
		b.Run(mode.String(), func(b *testing.B) {
			d := load(b)
			tun := testTunnel(mode, 3)
			for i := range tun.Paths {
				tun.Paths[i].Weight = float64(i + 1)
				tun.Paths[i].RateBps = float64(i+1) * 1e9
				tun.Paths[i].DelayNs = uint32(i) * 1000
			}
			configure(b, d, tun)
			for b.Loop() {
				report(b, senderProg(b, d, tun.Slot), trivial(b, ebpf.SchedCLS, 0), frames)
			}
		})
	}
}

func BenchmarkReceiver(b *testing.B) {
	d := load(b)
	configureReceiver(b, d)
	// A striped stream over three paths, in order on each path, with the paths'
	// packets arriving interleaved as they would from paths of equal delay.
	frames := make([][]byte, benchPackets)
	inner := innerPacket(0, 1400)[14:]
	pathSeq := [3]uint32{}
	now := uint32(monotonicNs())
	for i := range frames {
		p := uint32(i % 3)
		frames[i] = plaitPacket(b, arrival{seq: uint32(i), path: p, pathSeq: pathSeq[p]}, 0, now, inner)
		pathSeq[p]++
	}
	for b.Loop() {
		report(b, d.rcv.PlaitReceiver, trivial(b, ebpf.XDP, 2), frames)
	}
}
