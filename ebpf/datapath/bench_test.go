package datapath

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"

	"github.com/plait/plait/wire"
)

// The kernel's BPF_PROG_TEST_RUN with repeat runs the program again and again on the one
// buffer it already modified, so after the first run an encapsulating or decapsulating
// program takes another path through its code. Each packet therefore gets its own test run
// (repeat = 1) and the kernel-measured time of a program that only returns, run the same
// way, is subtracted: what remains is the program's own cost per packet.
//
// Part of that cost is kernel helpers no striping program can do without: a clock read
// and the one helper that moves the packet's head. A program that calls only those, with
// the same arguments, is measured too ("helpers-ns/pkt"); the rest ("own-ns/pkt") is what
// Plait's own instructions cost; "x-floor" is the program's run time over the floor's,
// both with what a test run costs around any program. On kernels with return-thunk
// mitigations (AMD SRSO "Safe RET") every helper call pays for its returns, and the floor
// is most of the cost.
const benchPackets = 100000

// Frames a program runs before its floor and a bare program take their turn.
const benchChunk = 1000

// program loads a hand-written program for comparison with the datapath's.
func program(b *testing.B, typ ebpf.ProgramType, insns asm.Instructions) *ebpf.Program {
	prog, err := ebpf.NewProgram(&ebpf.ProgramSpec{Type: typ, Instructions: insns, License: "GPL"})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { prog.Close() })
	return prog
}

// trivial only returns ret: what a test run costs around any program.
func trivial(b *testing.B, typ ebpf.ProgramType, ret int32) *ebpf.Program {
	return program(b, typ, asm.Instructions{asm.Mov.Imm(asm.R0, ret), asm.Return()})
}

// perPacket is the mean kernel-measured run time over the frames; XDP programs see them
// arrive on rxIfindex.
func perPacket(b *testing.B, prog *ebpf.Program, frames [][]byte) time.Duration {
	var total time.Duration
	for _, f := range frames {
		if prog.Type() == ebpf.XDP {
			_, _, d := runXDP(b, prog, f, rxIfindex)
			total += d
			continue
		}
		_, d, err := prog.Benchmark(f, 1, nil)
		if err != nil {
			b.Fatal(err)
		}
		total += d
	}
	return total / time.Duration(len(frames))
}

// helperFloor builds a program of the given type that reads the clock, then calls the
// head-moving helper as the datapath does (move(ctx) sets up its arguments and calls it),
// and returns ret.
func helperFloor(b *testing.B, typ ebpf.ProgramType, move asm.Instructions, ret int32) *ebpf.Program {
	insns := asm.Instructions{
		asm.Mov.Reg(asm.R6, asm.R1),
		asm.FnKtimeGetNs.Call(),
		asm.Mov.Reg(asm.R1, asm.R6),
	}
	insns = append(insns, move...)
	return program(b, typ, append(insns, asm.Mov.Imm(asm.R0, ret), asm.Return()))
}

// report runs the program, its floor and a bare program by turns, benchChunk frames
// each, so that a machine whose load drifts (another job starting) weighs on all three
// alike, and reports the medians over the chunks: one after the other, the three were
// measured seconds apart and x-floor moved by 0.4 from one run to the next.
func report(b *testing.B, prog, floor, base *ebpf.Program, frames [][]byte) {
	var raws, helpers, overheads, ratios []float64
	for i := 0; i < len(frames); i += benchChunk {
		chunk := frames[i:min(i+benchChunk, len(frames))]
		raw := float64(perPacket(b, prog, chunk))
		helper := float64(perPacket(b, floor, chunk))
		overhead := float64(perPacket(b, base, chunk))
		raws, helpers, overheads = append(raws, raw), append(helpers, helper), append(overheads, overhead)
		// The program's run against the floor's, both with the test run's own cost.
		ratios = append(ratios, raw/helper)
	}
	raw, helper, overhead := median(raws), median(helpers), median(overheads)
	b.ReportMetric(raw, "raw-ns/pkt")
	b.ReportMetric(overhead, "timer-ns/pkt")
	b.ReportMetric(raw-overhead, "ns/pkt")
	b.ReportMetric(helper-overhead, "helpers-ns/pkt")
	b.ReportMetric(raw-helper, "own-ns/pkt")
	b.ReportMetric(median(ratios), "x-floor")
}

func median(v []float64) float64 {
	s := slices.Clone(v)
	slices.Sort(s)
	return s[len(s)/2]
}

// Each scheduler with and without authentication (a tag on every packet), side by side.
func BenchmarkSender(b *testing.B) {
	frames := make([][]byte, benchPackets)
	for i := range frames {
		frames[i] = innerPacket(uint32(i), 1400)
	}
	for _, mode := range []Mode{ModeRR, ModeWRR, ModeEDPF} {
		for _, auth := range []bool{false, true} {
			b.Run(fmt.Sprintf("%s/auth=%v", mode, auth), func(b *testing.B) {
				d := load(b)
				tun := testTunnel(mode, 3)
				for i := range tun.Paths {
					tun.Paths[i].Weight = float64(i + 1)
					tun.Paths[i].RateBps = float64(i+1) * 1e9
					tun.Paths[i].DelayNs = uint32(i) * 1000
				}
				if auth {
					tun.Key = &wire.Key{1, 2, 3}
				}
				configure(b, d, tun)
				// bpf_skb_adjust_room(skb, EncapLen, BPF_ADJ_ROOM_MAC, ENCAP_L3_IPV4 |
				// ENCAP_L4_UDP | ENCAP_L2(HeaderLen)), then bpf_redirect(ifindex, 0).
				encap := asm.Instructions{
					asm.Mov.Imm(asm.R2, wire.EncapLen),
					asm.Mov.Imm(asm.R3, 1),
					asm.LoadImm(asm.R4, 1<<1|1<<4|wire.HeaderLen<<56, asm.DWord),
					asm.FnSkbAdjustRoom.Call(),
					asm.Mov.Imm(asm.R1, int32(tun.Paths[0].Ifindex)),
					asm.Mov.Imm(asm.R2, 0),
					asm.FnRedirect.Call(),
				}
				floor := helperFloor(b, ebpf.SchedCLS, encap, 7 /* TC_ACT_REDIRECT */)
				for b.Loop() {
					report(b, senderProg(b, d, tun.Slot), floor, trivial(b, ebpf.SchedCLS, 0), frames)
				}
			})
		}
	}
}

// The receiver with its checks (peer, interface, inner source) and delivery to the
// tunnel device, with and without authentication (tag and anti-replay window), and
// authenticated with repair on (on a stream without loss: what repair costs a packet
// that arrives in order), side by side. Its floor reads the clock, moves the head and
// redirects to the device.
func BenchmarkReceiver(b *testing.B) {
	key := wire.Key{1, 2, 3}
	for _, c := range []struct{ auth, repair bool }{{false, false}, {true, false}, {true, true}} {
		auth := c.auth
		b.Run(fmt.Sprintf("auth=%v,repair=%v", c.auth, c.repair), func(b *testing.B) {
			d := load(b)
			configureReceiver(b, d)
			r := testReceiver(rxTunnel, rxSlot, 3)
			r.PeerIfindex, r.DeviceMAC, r.Repair = rxIfindex, tunMAC, c.repair
			var k *wire.Key
			if auth {
				r.Keys, k = []wire.Key{key}, &key
			}
			if err := d.SetReceiver(r); err != nil {
				b.Fatal(err)
			}
			// A striped stream over three paths, in order on each path, with the paths'
			// packets arriving interleaved as they would from paths of equal delay.
			frames := make([][]byte, benchPackets)
			inner := innerPacket(0, 1400)[14:]
			pathSeq := [3]uint32{}
			for i := range frames {
				p := uint32(i % 3)
				a := arrival{seq: uint32(i), path: p, pathSeq: pathSeq[p]}
				if auth {
					frames[i] = signedPacket(b, k, a, 0, inner, false)
				} else {
					frames[i] = plaitPacket(b, a, 0, uint32(monotonicNs()), inner)
				}
				pathSeq[p]++
			}
			head := wire.EncapLen
			if auth {
				head += wire.TagLen
			}
			decap := asm.Instructions{
				asm.Mov.Imm(asm.R2, int32(head)),
				asm.FnXdpAdjustHead.Call(),
				asm.Mov.Imm(asm.R1, rxIfindex),
				asm.Mov.Imm(asm.R2, 0),
				asm.FnRedirect.Call(),
			}
			floor := helperFloor(b, ebpf.XDP, decap, 4 /* XDP_REDIRECT */)
			for b.Loop() {
				report(b, d.rcv.PlaitReceiver, floor, trivial(b, ebpf.XDP, 2), frames)
			}
		})
	}
}

// What delivering decapsulated packets on the tunnel device costs against the
// alternatives, in the helpers each needs beyond the receiver's clock read and head move:
// pass where they arrived (the stack sees them on the path interface: no firewall on the
// tunnel device, loose reverse-path filtering); redirect the XDP frame into the device's
// veth peer (what the receiver does); or pass them marked in XDP metadata to a TC ingress
// program that moves them to the device with bpf_redirect_peer (a second program, and a
// helper in each). Each figure is the floor program's run time less a bare run's.
func BenchmarkDeliveryAlternatives(b *testing.B) {
	frames := make([][]byte, benchPackets)
	for i := range frames {
		frames[i] = plaitPacket(b, arrival{seq: uint32(i)}, 0, 0, innerPacket(0, 1400)[14:])
	}
	head := asm.Instructions{asm.Mov.Imm(asm.R2, wire.EncapLen), asm.FnXdpAdjustHead.Call()}
	ctx := asm.Instructions{asm.Mov.Reg(asm.R1, asm.R6)}
	redirect := asm.Instructions{asm.Mov.Imm(asm.R1, rxIfindex), asm.Mov.Imm(asm.R2, 0), asm.FnRedirect.Call()}
	meta := asm.Instructions{asm.Mov.Imm(asm.R2, -4), asm.FnXdpAdjustMeta.Call()}
	peer := asm.Instructions{asm.Mov.Imm(asm.R1, rxIfindex), asm.Mov.Imm(asm.R2, 0), asm.FnRedirectPeer.Call()}
	cat := func(parts ...asm.Instructions) asm.Instructions {
		var out asm.Instructions
		for _, p := range parts {
			out = append(out, p...)
		}
		return out
	}
	for b.Loop() {
		xdpBase := perPacket(b, trivial(b, ebpf.XDP, 2), frames)
		tcBase := perPacket(b, trivial(b, ebpf.SchedCLS, 0), frames)
		pass := perPacket(b, helperFloor(b, ebpf.XDP, head, 2), frames) - xdpBase
		redir := perPacket(b, helperFloor(b, ebpf.XDP, cat(head, ctx, redirect), 4), frames) - xdpBase
		marked := perPacket(b, helperFloor(b, ebpf.XDP, cat(head, ctx, meta), 2), frames) - xdpBase
		tc := perPacket(b, program(b, ebpf.SchedCLS, cat(peer, asm.Instructions{asm.Return()})), frames) - tcBase
		b.ReportMetric(float64(pass.Nanoseconds()), "pass-ns/pkt")
		b.ReportMetric(float64(redir.Nanoseconds()), "xdp-redirect-ns/pkt")
		b.ReportMetric(float64((marked + tc).Nanoseconds()), "tc-redirect-peer-ns/pkt")
	}
}
