// Package model predicts the goodput of one TCP flow striped over several heterogeneous
// paths. It holds two models:
//
//   - Paper: seed 002's analytical model of TCP striped round robin over n links,
//     eqs. (1)–(24), implemented faithfully as the baseline, with eq. (9) corrected.
//   - Predict: Plait's predictor for one Linux TCP flow (cubic or BBR) under rr, wrr or
//     edpf, with window limits, pipelining, drop-tail queues, loss and the reordering
//     tolerance of SACK/RACK. BestSubset searches it for the path set (and wrr weights)
//     with the highest predicted goodput; the controller calls it every interval.
//
// # The paper's model (Paper)
//
// A round i sends C_i segments; segment j goes to link η = ((j−1+Σ_{k<i}C_k) mod n)+1
// (eq. 2, LinkIndex) and arrives D_{i,j} = (⌊j/n⌋+1)·8s/b_η + d_η after the round starts
// (eq. 3, ArrivalTime). Assuming every arrival order is equally likely, the next
// non-duplicate ACK comes after E(T_i) = D_1 + (E'(T) − D_1)/C (eqs. 4–12) and covers
// F(C_i) = E(A_{i+1}) segments (eqs. 8, 11, 13). RoundWeights gives both exactly;
// MDist is case I (eqs. 5–6), QDist case II (eq. 9). Slow start adds one segment per
// round until I_s = W_s − W_l (eq. 14), congestion avoidance 1/w (eqs. 15–16); the
// iteration sums s·C_k and E(T_k) until E bytes are sent and returns E/T̂ (eqs. 17–19).
// ADA and ABA are eqs. (22)–(23), Accuracy eq. (24). RoundTimeEq20 and DelayDifference
// are the paper's expansions (20)–(21), kept to check the algebra.
//
// Corrections and choices (MODEL.md):
//   - Eq. (9), 1 < k < C: the printed factor (C−k−1) is the factorial (C−k−1)!; printed,
//     the probabilities sum to 15/16 for C = 5. Corrected they equal the exact
//     distribution of a random permutation, C/((C−1)·k·(k+1)).
//   - C_i is fractional (F adds harmonic numbers, congestion avoidance 1/w). The round
//     sends the whole number PaperOptions.Rounding makes of it (default RoundNearest),
//     used for eqs. (2)–(13) and for the bytes of eq. (17); eq. (16) keeps the fraction.
//   - C_i = 1 with m_ACK = 2 (the first round, W_l = 1): the factorials are undefined.
//     Default SingleCaseI extends the paper's own case-I rule (T = D_1, A = 1);
//     SingleDelayedAck adds the receiver's delayed-ACK timer instead.
//   - m_ACK ≥ C: the case-I sums would reach (−1)!; the same rule (fewer than m_ACK
//     in-order segments are acknowledged as they are) gives T = D_m, A = m.
//   - ⌊j/n⌋+1 as printed (default QueueFloorPlusOne) or ⌈j/n⌉ (QueueCeil).
//   - E is not given: DefaultBytes = 1 MiB; a lab comparison passes the bytes moved.
//   - d_l is the forward one-way delay (zero reverse path, as the paper assumes);
//     FoldReverse uses the round trip of a symmetric path instead.
//   - Eq. (21) holds for n ≥ 2 only (it takes ⌊1/n⌋ = 0).
//
// The model has no loss, no retransmission, no window limit and no pipelining: its
// per-ACK recursion settles at 2–3 segments per round, so on Mbit/s links with tens of
// ms of delay it predicts hundreds of kbit/s whatever the bandwidth. It knows only rr.
//
// # Plait's predictor (Predict)
//
// Inputs per path: wire rate b_i, one-way delay d_i, jitter J_i, loss p_i, drop-tail
// queue Q_i (all a lab scenario sets and the controller estimates); the split (shares
// f_i ∝ weights over the used paths); the flow (cc, MSS, per-packet overhead, window W,
// cwnd clamp, initial window, transfer length). P = MSS + overhead is a wire packet and
// η = MSS/P the payload share. The flow is solved as a fluid steady state: a window of
// packets in flight (pipelining), not the paper's round recursion.
//
// P1, ACK return. ACKs ride the used paths too; cumulative ACKs and SACK blocks repeat,
// so news of an arrival comes back over the fastest: d_r = min_i d_i (AckOverPaths), or
// a fixed reverse delay (AckFixed).
//
// P2, capacity of the split. rr and wrr give path i a share f_i of packets whatever the
// load, so the path with the least rate per share saturates first:
//
//	X_cap = min_i b_i / f_i        (rr: n·min b_i; wrr with weights ∝ b_i: about Σ b_i)
//
// wrr's f_i are the host sender's slots, split.Apportion's whole shares of 1024, which is
// what the packets get; the weights decide which paths saturate together (P4, P10).
//
// edpf sends each packet where it arrives first, so its paths fill together and deliver
// in order: one link of rate Σ b_i whose every packet arrives at D = max_i d_i, the
// faster paths holding the lead D − d_i in their queues. EDPF uses a slower path only
// while the faster ones are saturated, so Predict follows it path by path in order of
// first arrival and stops where the window, not capacity, limits; a path whose queue
// cannot hold its lead (Q_i < (D − d_i)·b_i/8P) ends the set.
//
// P3, round trips. R_i = d_i + d_r (edpf: D + d_r). min_rtt m = min R_i; the pipe RTT
// R̄ = Σ f_i R_i is what each packet spends unacknowledged on average (SACKed packets
// leave the pipe), and the in-order RTT R̂ = max R_i is how long a byte waits for its
// cumulative ACK: the slowest path holds the left edge of the window.
//
// P4, queues. When the split saturates, the excess window E (packets beyond the pipe
// X·R̄/8P) sits in the queues of the bottleneck set K (paths with b_k/f_k = X_cap),
// spread by share, each adding 8P/(F_K·X_cap) seconds per packet (F_K = Σ_K f_k). The
// queues overflow at E = B = min_K Q_k·F_K/f_k. For edpf the excess spreads by rate over
// all paths on top of their leads, B = min_i (Q_i − lead_i)·Σb/b_i.
//
// P5, window limits at empty queues:
//
//	X_rwnd = 8W/(η·R̂)          receive window or send buffer over the in-order RTT
//	X_cwnd = MaxCwnd·8P/R̄      the congestion window clamp over the pipe RTT
//	X_bbr  = 7·8P/(R̄ − 2m)     BBR (if R̄ > 2m)
//
// BBR caps inflight at 2·BtlBw·m plus a budget of three TSO bursts (≥ 2 segments,
// or 1 ms of rate) and the probing phase's 2 packets. With SACK the pipe needs X·R̄,
// more than 2·X·m when one path is much slower than the fastest; the bandwidth estimate
// then follows the cwnd-limited delivery rate down until the budget alone fills the gap
// (the rate-proportional 1 ms budget gives X = 8P/(R̄ − 2m − 3 ms) at high rates).
// If the smallest limit is below X_cap the flow is window-limited: X = that limit, no
// queue, no overflow loss.
//
// P6, saturation. Otherwise the flow runs the split at X_cap. Cubic grows the window
// until its queue overflows (E = B) unless a window limit stops it first, which leaves a
// standing queue E < B and no loss. On overflow the window falls to βW_max (β = 0.7,
// W_max = X_cap·R̄/8P + B) and climbs back along max(cubic W_max − C(K−t)³,
// Reno-friendly βW_max + αt/R) with C = 0.4, K = ∛(W_max(1−β)/C), α = 3(1−β)/(1+β);
// averaging min(1, W/BDP) over the cycle gives the utilisation (below 1 for queues
// shorter than (1−β)/β of the pipe) and averaging (W − BDP)⁺ the mean queue. BBR paces
// at its bandwidth estimate and keeps no standing queue.
//
// P7, random loss. The loss that matters is per packet over the split, p = Σ f_i p_i.
// Cubic's window under random loss is RFC 8312's max(1.054·(R/p)^¾, √(3/(2p))) segments,
// X_loss = W_p·8P/R; the flow runs at the smaller of X_loss and P6. BBR v1 does not back
// off for loss below its tolerance; every lost packet is sent again, so both lose the
// factor (1 − p) of goodput.
//
// P8, reordering and RACK. A packet on path i arrives a_i = R_i + q_i after it is sent
// (q_i its mean queueing); it is late behind path j by s_i = max_j (a_i + J_i − a_j + J_j),
// and the skew is max s_i. Linux (tcp_recovery = 1, SACK, DSACK) marks a packet lost
// when a later-sent one was delivered and it is still missing reo_wnd later; reo_wnd
// starts at m/4 and grows by m/4 per round trip that brings a DSACK, up to srtt
// (tcp_max_reordering's dupthresh no longer decides once reordering has been seen).
// srtt of a striped flow is the in-order RTT R̂ = max a_i, not the mean over packets:
// Linux samples the oldest segment an ACK newly acknowledges whenever snd_una advances
// and takes the SACK sample only when it does not (tcp_ack_update_rtt), and nearly every
// ACK of a striped flow advances snd_una with a segment of the slowest path, the one
// that held the left edge. Measured on S1 (topo/scenarios/s1-*.yaml, 2–8 links, rr and
// wrr), iperf3's mean srtt lay 0–16 ms below R̂ from the mean one-way delays, R̄ 6–46 ms
// below it; with R̄ here rr's queued path came out later than srtt, every packet of it
// resent, and rr over 2–5 links 71–83 % accurate (eq. 24). Lateness never exceeds R̂
// but by jitter. In steady state P8 takes every spurious recovery to be undone (the
// window restored; P10 follows what they do to a run), so that what spurious
// retransmissions cost is capacity, modelled as a fraction r of segments sent twice:
//
//	s_i ≤ m/4:          nothing
//	m/4 < s_i ≤ srtt:   learnt after ⌈s_i/(m/4)⌉ − 1 DSACK rounds, each resending path
//	                    i's share; relearnt after 16 recoveries without DSACK, so
//	                    r_i = f_i·min(1, (⌈s_i/(m/4)⌉ − 1)·ā·λ/16), ā = Σ f_j a_j,
//	                    λ = loss events/s
//	s_i > srtt:         never learnt: r_i = f_i, every packet of path i resent
//
// StaticReoWnd keeps reo_wnd at m/4. The reordered ratio (RFC 4737) and mean extent
// count the packets of faster paths sent within a packet's lateness, Σ_j f_j·X/8P·(a_i −
// a_j)⁺, with ratio 1 − e^(−extent).
//
// P9, goodput. Spurious retransmissions use capacity but not window:
//
//	G = η·(1 − p)·min(X, X_sat/(1 + r))
//
// with X_sat the saturated rate of P6 (X_cap·utilisation). For a BBR transfer of length T
// (TCP.Duration) slow start doubles from the initial window every base round trip R̄
// up to the pipe X·R̄/8P (the queues of P6 fill after the pipe, without adding goodput):
// by time t it has delivered B(t) = min(IW·(2^(t/R̄) − 1)·P·η, G·t) for t ≤ t_ss and
// B(t_ss) + G·(t − t_ss) after. What counts is B(T) − B(T_o) over
// T − T_o, T_o the start a measurement leaves out (TCP.Omit, a lab's traffic.omit).
// A cubic transfer follows P10.
//
// P10, the course of a finite cubic transfer. A 20 s lab run is shorter than some of
// what decides its goodput, so Predict follows the window W from the initial window, in
// steps of R̄, until it settles into P6, counting G_cap·min(1, W/BDP) until then (G_cap
// = η(1 − p)X/(1 + r), BDP = X·R̄/8P, X the rate P5 and P7 allow) and G after. Each rule
// below was read off lab runs (the sender's TcpExt counters, iperf3's cwnd, and the
// kernel's tcp_cong_state_set tracepoint with srtt, min_rtt and RACK's reo_wnd_steps at
// every state change: scripts/recovery.bt). Most of those runs came from the lab
// before 2dfdbcd, whose switches, short of CPU, sent up to 6 % of packets more than 5 ms
// late and so reordered the paths by themselves; docs/design.md (Model validation) has
// the series on the lab since. The rules:
//
//   - Slow start doubles W every R̄ until BDP, where HyStart ends it as the queues start
//     to fill (S1-3 wrr left it at cwnd 338-355 against a BDP of 326). That needs the
//     lane with the smallest round trip to queue too: cubic's HyStart takes its delay
//     samples from the segment sent last among those an ACK newly covers (or SACKs), on
//     a striped flow mostly a fast lane's, and compares the smallest of a round with
//     min_rtt. wrr fills all queues together and ends slow start there (3-72
//     retransmissions in the first 2 s in 20 of 21 runs of S1-2…8 at 25e824a); under rr
//     only the bottleneck lane queues, slow start runs on until its queue overflows
//     (410-1596 retransmissions in the first 2 s in 18 of 21 runs), and the cut leaves
//     cubic a W_max far above the pipe. P10 does not follow that overshoot yet; on S1-6
//     rr the climb back past that W_max is what overflows again 11-15 s in (below).
//   - RACK's window ρ = min(k·m/4, R̂) starts at k = 1. While the lateness at empty
//     queues s (P8's skew without queueing) exceeds ρ, a recovery episode comes every
//     R̂ + m + ρ (it lasts an in-order round trip, then the next late segment is marked
//     m + ρ after it was sent), and each one's DSACK adds a step to k (S1-4 at ADA
//     80 ms: k went 1 → 14 in 4.3 s; these steps sum to 3.8 s).
//   - Every episode restarts cubic's epoch, undone or not (Linux restores the window,
//     not cubic's curve), so while they come W grows only on the Reno-friendly line,
//     α = 3(1 − β)/(1 + β) segments per R̄ (3-12 segments a second in the lab). Once ρ
//     covers s, cubic grows from the last epoch's W_0:
//     W = max(W_max + C(τ − K)³, W_0 + ατ/R̄), K = ∛((W_max − W_0)/C), W_max = W_0
//     (ADA 80 ms rr: cwnd 8 → 64 in 5.2 s; the formula gives 64).
//   - The lanes the weights saturate together do not queue alike: the slot table gives
//     lane k δ_k = (f_k/F_K)/(w_k/W_K) − 1 more or less than its weight asks (Σ b_k δ_k
//     = 0), and from the time the window first fills the pipe its queue gains δ_k
//     seconds every second on the others, which P10 adds to its lateness, and to its
//     queue when it checks for an overflow (the first lane full ends the climb). On
//     S1-5 wrr lane iv, the latest, has 129 slots for 12.55 % of the rate (δ = +0.35 %)
//     and lane v 129 for 12.64 % (−0.33 %): in the run's second half the receiver
//     measured 62 ms of queue on iv against 7-15 ms on the others (the stats of `plait
//     lab run s1-5`), every run had 34-52 recovery episodes and cubic grew on the Reno-
//     friendly line, never reaching the queues' limit in 20 s. P10 then predicts 110
//     Mbit/s (lab 110; 105 with level queues). On S1-7 lane iv drifts +0.45 % (63 ms of
//     queue against 27 on lane i late in the run), but the lab's runs grew as cubic
//     does until 12-13 s, so RACK's window was wider there than P10's steps make it;
//     S1-3 and S1-4 put the extra slot on the earliest lane, which only shortens the
//     others' lateness.
//   - A lane later than R̄ at empty queues (s_k > R̄) costs slow start: the first episode
//     ends it. Later than R̄ + m/4 it is never learnt: its first segments are resent
//     (see below: RACK starts with no reordering window), Karn's rule takes no RTT
//     sample from resent segments, and srtt, the cap of ρ, stays near the mean round
//     trip (S1-4 at ADA 80 ms wrr: 100-150 ms against a lateness of 144; S1-6 rr in
//     recovery: 60-77 ms, R̄ 56). So ρ is capped at R̄ for the run and W grows on the
//     Reno-friendly line only. (Under rr at ADA 80 ms ρ stopped at 142 ms, by its steps
//     rather than srtt, with the same result.) At ADA 80 ms (s = 144 ms; R̄ 112 ms under
//     rr, 93 under wrr) this predicts rr 7.2 and wrr 10.0 Mbit/s where the lab gave
//     6.4-11.8 and 1.5-2.0 (55 and 97 without the rule); on A2 (s = 90 ms; R̄ 63 and 72)
//     rr 5.0 and wrr 11.5 (lab 4.7-5.3 and 9.1-12.9; 5.0 and 12.8 without). Within a
//     step of R̄ the lab learnt the lane once slow start had fallen: at ADA 40 ms wrr (s
//     = 72 ms, R̄ 67, m/4 10) slow start fell in the first second in 4 of 6 runs on the
//     lab with the switches' tick (3 of 6 before it), and the window then grew as cubic
//     does, with no resends (cwnd 7-12 at 1 s, 243-607 at 12 s): 56.6 Mbit/s predicted,
//     the lab's medians 43.7-50.6 in four of five series (94.7 in the fifth); 18.2 when
//     the point counted as never learnt. The margin stands for srtt sitting above R̄, since
//     cumulative ACKs sample the in-order round trip; it is read off two points (learnt
//     5 ms beyond R̄, never 51 ms beyond), not derived. rr at ADA 40 ms (R̄ 76) is left
//     to the cascade below. Under wrr at ADA 80 ms the lab's window
//     stayed near a dozen segments, with about lane iv's share (14 %) of the packets resent
//     (280 at 1.6 Mbit/s), where rr's sender resent 35 at 7.1 Mbit/s: P10 does not tell
//     the two apart.
//   - Where P6 overflows, W meets BDP + B (S1-3 wrr: at 11-12 s; 12.2 s here). With one
//     lane, or no queue longer than ρ, that is P6's first cycle and G holds from there.
//     Otherwise the cut drains the queues unevenly, segments still queued fall further
//     than ρ behind the drained lanes, and their copies overtake them: cuts by β stand
//     until W ≤ BDP, a cascade (S1-3 wrr: 1016 → 169, 118 and 352 in three runs, 253
//     here), cubic's W_max then being (1 + β)/2 of the window before the last cut (fast
//     convergence), and the cascade's DSACKs take ρ to R̂. Where a queueing lane is at
//     least min_rtt late at empty queues behind a fastest lane that does not queue (rr
//     on S1-6..8 and at ADA 40 ms; not on S1-2..5, 15-25 ms late, nor at ADA 20 ms,
//     36 ms), the cuts go on to the initial window (S1-6 rr: 290 → 11, 448 → 9 and
//     200 → 7 in chains of 1.4-1.8 s). W climbs back to BDP + B before P6's cycle
//     begins, at the Reno-friendly rate in the lab (10 segments a second on S1-3 wrr),
//     which outlasts the run.
//
// What P10 leaves out, measured: whether slow start survives its first episode. A fresh
// connection has seen no reordering, and until it has, RACK marks with no reordering
// window at all once three segments are SACKed (tcp_rack_reo_wnd): the first SACKs of the
// fastest lane mark every segment of the slower lanes lost (on S1-4 at ADA 80 ms, 7 of
// the initial 10 at 138 ms; cwnd 10 → 3 by PRR). Linux then undoes the cut only by the
// timestamp check (TCPDSACKUndo was at most 1 a run in 24 runs): on a partial ACK whose
// echoed timestamp predates the first retransmission while no retransmission is still
// unacknowledged (tcp_try_undo_partial), or at the end if the last hole was filled by an
// original. Copies go where the split sends them: one on a slow lane keeps a
// retransmission outstanding while the originals fill their holes, and one on a fast lane
// overtakes its original and fills the last hole itself; in the traced run both happened
// and the cut stood (cwnd 7, then 4, 3 and 2 in the next episodes). Where no copy can
// overtake (m + d_c ≥ d_late for every lane c: S1-4 at ADA 20 ms) slow start survived in
// 6 of 6 runs; at ADA 80 ms it fell in 8 of 8 (cwnd 1-5 within two seconds), at 40 ms in
// 3 of 6 (a fourth fell later, from cwnd 750). But on A2, where copies on two of three
// lanes overtake, wrr's slow start survived in 3 of 4 runs, so which runs lose it was not
// reduced to a rule, and P10 lets slow start run unless a lane is never learnt (above).
// The simplest rule, that a lane later
// than a whole min_rtt loses slow start (PRR keeping the timely lanes' share of the
// initial window), was evaluated against the stored validation runs: it brings ADA 40 ms
// rr from 55 to 36 Mbit/s (lab 24.8 and 28.9), ADA 80 ms rr from 55 to 23 (lab 4.3-7.6)
// and wrr from 96 to 35 (lab 1.7-1.9), but moves ADA 40 ms wrr from 95 to 56 where one
// series measured 91, and A2's wrr from 12.7 to 9.5 Mbit/s where the lab's runs keep
// slow start and give 11.3; at ADA 40 ms 10 of 18 runs lost slow start in their first
// second and 3 more in the next. After a collapse at ADA 80 ms rr's ρ
// stopped a step short of the lateness (14·m/4 = 142 ms against 144 ms), so episodes kept
// coming now and then and cubic never took off (4-10 Mbit/s against 55 predicted); wrr's
// srtt stayed at 100-150 ms, below the lateness, because Karn's rule takes no sample from
// the late lane's resent segments, so ρ never covered it (1.7-2.0 Mbit/s against 96).
// Both are what the never-learnt rule above now follows.
// How deep wrr's cascades go is not a matter of lateness either. Only a handful of
// packets are really lost at a wrr overflow, nearly all on the lane the slot table
// over-weights, as the drift above has it (the receiver's counts: 3-12 on lane i on
// S1-3, S1-4 and at ADA 20 ms, 1-5 on lane v on S1-6); the hundreds of retransmissions
// that follow, shallow or deep, are RACK's marks of segments the draining queues left
// behind. Over the validation series at 2957a37 and c926221 and the lab round at
// fc0d0ff, the overflows that went on to a few dozen segments were 0 of 6 on S1-2, 2 of
// 6 on S1-3 (15 ms late at empty queues, min_rtt 40 ms), 1 of 6 at ADA 10 ms (18 ms), 4
// of 9 on S1-4 (25 ms), 5 of 6 at ADA 20 ms (36 ms) and 4 of 4 on S1-6 (40 ms), which a
// threshold at 3/4 of min_rtt fits. Held out (`plait model validate --ada-sweep
// 15,25,30ms --sweep-base s1-4 --repeat 3` at 901ea6e, run after the rule was set) it
// failed: 2 of 3 deep at ADA 15 ms (27 ms late), 0 of 3 at 25 ms (45 ms) and 1 of 3 at
// 30 ms (54 ms), and in the series after it 0 of 3 at ADA 20 ms and 1 of 3 on S1-6, so
// P10 does not use it; rr's min_rtt rule below fared no better there (ADA 25 and 30 ms
// rr, 45 and 54 ms late: cascades stopped at 95-306 segments, 31.5 and 30.7 Mbit/s
// predicted against 41.1 and 52.7 measured).
//
// Whether a cascade follows an overflow also varies (S1-3 wrr: 4 of 6 runs; P10 predicts
// it always), and S1-6 rr's window exceeded BDP + B far (cwnd 225-285 against 159) before
// its cascades. The sender's own counts (ss -ti every 0.5 s through a run) say why: the
// flow is cwnd-limited (unacked − sacked = cwnd), but far fewer segments are SACKed than
// have arrived out of order. On the plateau, cwnd 209, unacked 270 and sacked 61, while
// the paths hold about 150 (2150 packets/s over the measured one-way delays, 43 ms on
// average, and the ACKs' return); just before the overflow, cwnd 286, unacked 392 (2150/s
// over the 182 ms in-order round trip with lane vi's queue full) and sacked 106. Until
// the cumulative ACK, a segment counts in the pipe unless a SACK block has reported it
// (three blocks an ACK, over six interleaved lanes, presumably miss many of the islands):
// the pipe was about three quarters of the in-order round trip's packets, not the mean
// round trip's that P3 and P10 take. S1-5 rr, one run: cwnd 540-590, unacked 644-823,
// sacked 106-232 (0.72-0.83). S1-3 wrr, whose queues even out the lanes' delays: cwnd
// 704-922, unacked 763-958, sacked 36-59 (0.92-0.96), where the in-order and the mean
// round trip differ little. Three runs, not yet a rule.
//
// How deep rr's cascades go, from the kernel's own state changes (scripts/recovery.bt
// beside `plait lab run s1-6 --compare rr --repeat 3` at 0b94f1f; 14.7, 19.2 and 16.1
// Mbit/s): each is a chain of recovery episodes back to back, every one ending with
// segments already marked lost, so that the ACK that ends one opens the next and cuts
// ssthresh again: 290 → 203 → 142 → 99 → 69 → 48 → 33 → 23 → 16 → 11 in 1.8 s in one
// run, 448 → 313 → 219 → 153 → 30 → 21 → 14 → 9 in 1.4 s in another (its slow start had
// overshot to 627 and waited out a timeout), with no timeout in the chains; 121 and 155
// of the runs' 1267 and 1206 resends were marked lost again (TCPLostRetransmit), the
// resends the split put on the late lane. Both then climbed from 9-11 back to 304 in
// 10.8 s and cascaded again (at 18.9 and 13.8 s); the third run's episodes were undone
// in part and held ssthresh at 126-168. So on S1-6 the cascade ends at about ten
// segments, not at BDP. On S1-4 rr (two runs, 54.7 and 54.9 Mbit/s) both overflowed at
// cwnd 476 (12.8 and 13.0 s) and stopped after two episodes, ssthresh 333 → 233, the
// second ending with cwnd 116-138 and nothing marked lost; on S1-8 rr (one run, 25.3
// Mbit/s) a chain of three, 442 → 309 → 186 → 130 (3.1 s), and one of at least five,
// 462 → 323 → 226 → 158 → 110 → 77 (17.1 s, still going when the run ended), where the
// validation's two runs gave 13.7 and 18.8 Mbit/s. A chain's length varies from run to
// run as much as from scenario to scenario.
//
// Two rules for the depth were tried against the day's runs (`plait model validate
// --pool --from`) and are not used:
//   - the chain goes on until an episode's resends, F_K·W of them, are as likely as not
//     to miss the bottleneck lanes K: W ≤ ln 2/(F_K·ln(1/(1 − F_K))), 23 for S1-6. It
//     brings S1-6 rr from 24.8 to 18.9 Mbit/s (lab 12.6-21.5) and S1-7 rr from 28.9 to
//     21.9 (lab 22-28.8), but predicts cascades to 2-15 segments on S1-2..5 rr, which the
//     lab does not show: S1-2 rr 24.6 Mbit/s and S1-3 rr 33.6 against 34.5 and 51.6
//     measured (33.6 and 51.7 without the rule);
//   - the cuts go on while a window's refill of a queuing lane k (W·q_k, P4) on top of
//     its lateness at empty queues puts it beyond RACK's cap R̂: W ≤ (R̂ − s_k)/q_k (87
//     segments on S1-6, 194 on S1-4). It lifts the pooled accuracy on S1-6 and S1-8 rr
//     from 54.3 and 24.6 % to 91.8 and 81.7 %, but drops S1-2..5 rr from 97.5, 99.8,
//     97.2 and 89.1 % to 85.0, 71.6, 66.8 and 65.8 %.
//
// The rule P10 uses (a lane late by min_rtt or more, the fastest lane unqueued) is read
// off where the lab's chains went deep and where they stopped, not derived. A traced
// run (`bpftrace` with srtt, RACK's rtt and the scoreboard at every state change beside
// `plait lab run s1-6 --compare rr --repeat 2` at 9849af4) shows what it stands for:
// through two chains, 385 → 49 and 200 → 140 → 98 → 68 → 47 → 32 → 22 → 15 → 10 → 7 in
// 1.6 s, srtt stayed at 60-77 ms, below lane vi's 83 ms round trip at an empty queue
// (its resent segments give no sample, Karn's rule, and the faster lanes' SACKs pull
// srtt down), and reo_wnd_steps had reached 23-35, so RACK's window was srtt itself;
// every episode ended with 1-5 segments marked lost. Against the stored runs of the
// day (`plait model validate --pool`, six runs a point) it brings S1-6, S1-7 and S1-8 rr
// from 24.8, 28.9 and 32.9 Mbit/s to 18.2, 20.2 and 22.0 (lab medians 20.8, 18.9 and
// 19.3; accuracy 80.5, 47.0 and 29.5 % to 87.3, 93.3 and 85.8 %) and ADA 40 ms rr from
// 55.3 to 29.3 (lab 29.4), and leaves every other point as it was. Why the threshold is
// a min_rtt, and why a chain ends near ten segments, is still open.
//
// # Choosing paths (BestSubset)
//
// With ≤ 8 paths all 255 subsets are predicted (wrr also with the slowest path's weight
// halved and quartered). The paper's rule, more links are not always better when delay
// asymmetry is large, falls out of P3–P8: a slow path raises the in-order RTT R̂ (window
// limits), the pipe R̄ (BBR's cap) and the skew (RACK), and under rr its low rate per
// share caps the whole split. Best does the same over the scheduler modes, for an
// optimiser that also picks the mode.
//
// # Validation against the lab
//
// Every input is something a lab run sets or measures: the scenario's paths (rate,
// one-way delay, jitter, loss, queue) and traffic (cc, duration, omit), plus the stack's
// MSS and per-packet bytes (compact tunnel: MSS 1424, 90 bytes besides; plain TCP: 1448,
// 66). `plait model validate` runs `plait lab run` for each scenario point with rr and
// wrr (ideal and single-best on request), reads summary.json's goodput_steady_bps (from
// omit on), calls Paper (rr) with E = goodput·duration/8 and s = the MSS, and Predict
// with the run's TCP, and reports Accuracy (eq. 24) per model, per link count and per ADA
// point (--ada-sweep spreads a scenario's delays with Spread, in their order). --from
// re-evaluates finished runs, so a change here is checked against the same measurements.
//
// # Plots
//
// plot.py (embedded as PlotScript) draws the sweeps of `plait model sweep` and the
// validations of `plait model validate` with the system python3 and matplotlib:
// `python3 - data.json out.png` with the script on stdin.
package model
