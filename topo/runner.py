"""Runs the configurations of a scenario one after the other on one lab.

Every configuration gets the same treatment: the controller (re)started with that
configuration's network file, a reachability check, one iperf3 run from h1 to h2 with the
scenario's congestion control, and measurements taken the same way for all:

- goodput: iperf3's receiver (server) bytes over the whole run, what the application
  got (iperf3's own figure); beside it the steady goodput, over the 1 s intervals that
  start at or after traffic.omit (slow start and first estimates left out);
- retransmissions: h1's TCP RetransSegs counter (/proc/net/snmp of its namespace), which
  also counts MPTCP's subflows;
- per-path bytes and shares over time: h1's interface counters (/proc/PID/net/dev), which
  see tunnel, MPTCP and plain TCP traffic alike;
- one-way delay per path: Plait's receiver on h2 (data packets or, on paths that carry
  no tunnel data, the agent's probes), sampled with ``plait stats --watch --json``;
- reordering: the tunnel's RFC 4737 counters on h2 before and after the run (Plait's
  configurations only);
- the longest stall: the longest spell of iperf3's receiver intervals (0.1 s each) that
  got no bytes, what a path's outage costs the flow;
- paths that change (traces, events): the same changes at the same times for every
  configuration (changes.py);
- the emulation's own lateness: packets the embedded switches sent more than 1 and 5 ms
  after their time (``plait link show``), which reorders the paths by the machine's load
  rather than by their delays; a run with more of them than the plan's late_warn (a share
  of the packets sent, defined in Go beside the plan) gets a warning.
"""

import json
import math
import os
import shutil
import subprocess
import threading
import time

import changes
import nodes
import report
import topos

TUNNEL_CONFIGS = ("rr", "wrr", "auto")
IPERF_PORT = 5201
# The receiver's report interval: the resolution of the longest stall.
INTERVAL_S = 0.1


def read_netdev(pid):
    """Returns {interface: (rx_bytes, tx_bytes)} of process pid's network namespace (of
    this process's when pid is None)."""
    out = {}
    with open("/proc/net/dev" if pid is None else "/proc/%d/net/dev" % pid) as f:
        for line in f.readlines()[2:]:
            name, rest = line.split(":", 1)
            v = rest.split()
            out[name.strip()] = (int(v[0]), int(v[8]))
    return out


def read_mib(pid, table):
    """Returns the counters of one table of /proc/PID/net/snmp or netstat (e.g. Tcp,
    TcpExt, MPTcpExt) of process pid's network namespace, by name; {} when absent."""
    for name in ("snmp", "netstat"):
        with open("/proc/%d/net/%s" % (pid, name)) as f:
            rows = [l.split() for l in f if l.startswith(table + ":")]
        if len(rows) >= 2:
            return dict(zip(rows[0][1:], map(int, rows[1][1:])))
    return {}


# The sender's loss-recovery events (TcpExt): whether a run's retransmissions were
# spurious and undone (DSACK or timestamps) or cost the window is read from these, and
# how slow start ended (HyStart's ACK-train or delay test, with the window it left).
TCP_EVENTS = [
    "TCPSackRecovery",
    "TCPFastRetrans",
    "TCPLostRetransmit",
    "TCPTimeouts",
    "TCPLossProbes",
    "TCPSACKReorder",
    "TCPTSReorder",
    "TCPDSACKRecv",
    "TCPDSACKUndo",
    "TCPFullUndo",
    "TCPPartialUndo",
    "TCPLossUndo",
    "TCPSpuriousRTOs",
    "TCPHystartTrainDetect",
    "TCPHystartTrainCwnd",
    "TCPHystartDelayDetect",
    "TCPHystartDelayCwnd",
]


def num(v):
    """protojson writes 64-bit integers as strings and NaN as "NaN"."""
    if v is None:
        return math.nan
    try:
        return float(v)
    except (TypeError, ValueError):
        return math.nan


def parse_stream(text):
    """Parses back-to-back JSON objects (plait stats --watch --json)."""
    dec = json.JSONDecoder()
    i, out = 0, []
    while True:
        while i < len(text) and text[i].isspace():
            i += 1
        if i >= len(text):
            return out
        try:
            obj, i = dec.raw_decode(text, i)
        except ValueError:
            return out  # a message cut short when the watcher stopped
        out.append(obj)


def tunnel_of(stats, tid=1):
    for t in stats.get("tunnels", []):
        if int(num(t.get("tunnelId", 0))) == tid:
            return t
    return None


class Sampler(threading.Thread):
    """Samples h1's interface counters every period seconds."""

    def __init__(self, pid, intfs, period=0.25):
        super().__init__(daemon=True)
        self.pid, self.intfs, self.period = pid, intfs, period
        self.samples = []
        self.done = threading.Event()

    def run(self):
        while not self.done.is_set():
            try:
                dev = read_netdev(self.pid)
            except OSError:
                return
            self.samples.append(
                (time.time(), {i: dev.get(i, (0, 0))[1] for i in self.intfs})
            )
            self.done.wait(self.period)

    def stop(self):
        self.done.set()
        self.join(2)


def goodput(iperf, omit):
    """Receiver goodput in bit/s over the whole run (iperf3's own figure), and the steady
    goodput over the 1 s intervals that start at or after omit with the seconds that
    covers. The whole run is the headline: the steady figure also counts data that
    arrived before omit and that the receiver held back until after it (MPTCP's
    data-level reordering, slow start's recovery), so a system that holds more back at
    omit reads higher, above its own payload ceiling in MPTCP's case (docs/lab.md, Outputs)."""
    srv = iperf.get("server_output_json") or {}
    ivs = [iv["sum"] for iv in srv.get("intervals", [])]
    rate = lambda ivs: 8 * sum(iv["bytes"] for iv in ivs) / sum(iv["seconds"] for iv in ivs)
    kept = [iv for iv in ivs if iv["start"] >= omit - 0.05 and iv["seconds"] > 0]
    if kept:
        return rate(ivs), rate(kept), sum(iv["seconds"] for iv in kept)
    end = iperf.get("end", {}).get("sum_received", {})
    gp = float(end.get("bits_per_second", 0))
    return gp, gp, float(end.get("seconds", 0))


def longest_stall(iperf):
    """The longest spell, in seconds, of consecutive receiver intervals without a byte."""
    srv = iperf.get("server_output_json") or {}
    longest = cur = 0.0
    for iv in srv.get("intervals", []):
        s = iv["sum"]
        cur = cur + s["seconds"] if s["bytes"] == 0 else 0.0
        longest = max(longest, cur)
    return longest


def run_all(lab, say):
    plan, sc = lab.plan, lab.sc
    out = plan["out"]
    os.makedirs(out, exist_ok=True)
    n = len(sc["compare"])
    t = sc["traffic"]
    say(
        "== %s: %d paths, capacity %s, %s x %gs (steady goodput leaves out the first %gs), cc %s%s, Plait in %s"
        % (
            sc["name"],
            len(lab.paths),
            report.fmt_rate(sc["capacity_bps"]),
            n,
            t["duration_s"],
            t["omit_s"],
            t["cc"],
            report.fmt_tcp(t, ", "),
            sc["encap"].upper(),
        )
    )
    reps = plan.get("repeat", 1)
    runs = {c: [] for c in sc["compare"]}
    step, steps = 0, n * reps
    # Repetitions go round the configurations, so that a slow spell of the machine
    # does not fall on one configuration only.
    for rep in range(reps):
        for config in sc["compare"]:
            step += 1
            tag = config if reps == 1 else "%s-r%d" % (config, rep + 1)
            say("== [%d/%d] %s: %s" % (step, steps, tag, describe(lab, config)))
            t0 = time.monotonic()
            try:
                res = run_config(lab, config, tag)
            finally:
                lab.stop_controller()
            runs[config].append(res)
            say(
                "   %s  (%.0fs)"
                % (report.result_line(res, sc["capacity_bps"]), time.monotonic() - t0)
            )
            for w in res.get("warnings", []):
                say("   warning: " + w)
    results = [median_run(runs[c]) for c in sc["compare"]]
    summary = report.summarize(plan, results, lab.switch_kind)
    report.write(out, summary, results)
    say("")
    say(report.markdown_table(summary))
    say("")
    say(
        "== results in %s (summary.json, summary.md, %s)"
        % (out, ", ".join(summary["plots"]))
    )
    return 0


def median_run(rs):
    """The run with the median goodput (the lower middle one of an even count) stands
    for its configuration; every run's goodput and steady goodput are kept beside it,
    and the median of the steady goodputs. The emulation's counts are every run's: how
    faithful the lab was bears on the median as much as on the run that is it."""
    mid = (len(rs) - 1) // 2
    res = dict(sorted(rs, key=lambda r: r.get("goodput_bps", 0))[mid])
    if len(rs) > 1:
        if all("emulation" in r for r in rs):
            res["emulation"] = {
                k: sum(r["emulation"][k] for r in rs) for k in rs[0]["emulation"]
            }
        res["goodput_runs_bps"] = [r.get("goodput_bps", 0) for r in rs]
        res["goodput_steady_runs_bps"] = [r.get("goodput_steady_bps", 0) for r in rs]
        res["goodput_steady_bps"] = sorted(res["goodput_steady_runs_bps"])[mid]
    return res


def describe(lab, config):
    sb = lab.plan["single_best"]
    ideal = lab.plan["ideal"]
    return {
        "ideal": "one link of %s at %gms one-way, queue %d"
        % (
            "the paths' capacities merged"
            if lab.sc.get("dynamic")
            else report.fmt_rate(ideal["rate_bps"]),
            ideal["delay_ns"] / 1e6,
            ideal["queue"],
        ),
        "single-best": "plain TCP over path %s (%s)" % (sb["name"], sb["reason"]),
        "mptcp": "Linux MPTCP, one subflow per path",
        "rr": "Plait, round robin",
        "wrr": "Plait, weights = path rates",
        "auto": "Plait, steered by the controller",
    }[config]


def target(lab, config):
    """Returns (destination address, namespace pid of the counters or None for the root
    namespace, interfaces whose transmitted bytes count, their path names).

    Parallel shape: h1's interface per path. Split shape: the path switches' ports toward
    the merge switch (root namespace), since h1 has one interface there."""
    names = [p["name"] for p in lab.paths]
    n = len(names)
    if config == "ideal":
        return topos.path_addr(0, "h2"), lab.h1.pid, ["h1-eth0"], ["ideal"]
    if lab.shape == "split":
        return (
            topos.TUNNEL_ADDR["h2"],
            None,
            ["s%d-eth2" % k for k in range(1, n + 1)],
            names,
        )
    intfs = ["h1-eth%d" % k for k in range(1, n + 1)]
    if config == "single-best":
        k = lab.plan["single_best"]["index"] + 1
        return topos.path_addr(k, "h2"), lab.h1.pid, intfs, names
    if config == "mptcp":
        return topos.path_addr(1, "h2"), lab.h1.pid, intfs, names
    return topos.TUNNEL_ADDR["h2"], lab.h1.pid, intfs, names


def wait_mode(lab, config, timeout=10):
    """Waits until both agents' tunnel runs the configuration's scheduler."""
    want = {"rr": "MODE_RR", "wrr": "MODE_WRR"}.get(config)
    if want is None or lab.shape == "split":  # split: the switches' slot tables split
        return
    deadline = time.monotonic() + timeout
    for h in (lab.h1, lab.h2):
        while True:
            ts = json.loads(h.plaitcmd("tunnel", "ls", "--json")).get("tunnels", [])
            if ts and ts[0]["config"].get("mode") == want:
                break
            if time.monotonic() > deadline:
                raise RuntimeError(
                    "%s: %s's tunnel did not switch to %s" % (config, h.name, want)
                )
            time.sleep(0.1)


def wait_estimates(lab, timeout=10):
    """Waits until the controller has every path up with a known one-way delay both ways
    and a known capacity towards h2: what a controller that runs all along knows before
    a flow starts (it probes idle paths). The lab starts it anew for each configuration;
    a flow that starts first is split on guesses."""
    deadline = time.monotonic() + timeout
    known = lambda v: v is not None and v != "NaN"
    while time.monotonic() < deadline:
        p = subprocess.run(
            [lab.plait, "--controller", lab.ctl_socket, "--json", "paths"],
            capture_output=True,
            text=True,
            timeout=10,
        )
        dirs = json.loads(p.stdout or "{}").get("directions", []) if p.returncode == 0 else []
        if dirs and all(
            pv.get("up")
            and known(pv.get("owdUs"))
            and (not d.get("from", "").startswith("h1") or known(pv.get("capacityBps")))
            for d in dirs
            for pv in d.get("paths", [])
        ):
            return True
        time.sleep(0.2)
    return False


def run_config(lab, config, tag=None):
    tag = tag or config
    sc = lab.sc
    tr = sc["traffic"]
    dur, omit = tr["duration_s"], tr["omit_s"]
    h1, h2 = lab.h1, lab.h2
    dst, cpid, intfs, names = target(lab, config)
    res = {"config": config, "warnings": []}

    lab.tunnel(config in TUNNEL_CONFIGS, config)
    lab.start_controller(config, tag)
    lab.wait_reachable(config)
    wait_mode(lab, config)
    if config == "auto" and lab.shape != "split" and not wait_estimates(lab):
        res["warnings"].append("the controller had not estimated every path after 10 s")
    mptcp = ["mptcpize", "run"] if config == "mptcp" else []
    srv_log = open(os.path.join(lab.rundir, "iperf3-server-%s.log" % tag), "w")
    server = lab.spawn(
        h2.popen(
            mptcp
            + ["iperf3", "-s", "-1", "-J", "-i", str(INTERVAL_S), "-p", str(IPERF_PORT)],
            stdout=srv_log,
            stderr=subprocess.STDOUT,
        )
    )
    srv_log.close()
    nodes.wait_for(
        lambda: h2.cmd("ss -Hltn sport = :%d" % IPERF_PORT).strip() != ""
        or server.poll() is not None,
        10,
        "iperf3 server on h2",
    )
    # Samplers: each agent's stats, and (Plait's configurations) the controller's view,
    # kept in the logs for whoever tunes the controller.
    watch = {}
    if config in TUNNEL_CONFIGS:
        watch = {
            "h1": ["--agent", h1.socket, "--json", "stats", "--tunnel", "1"],
            "h2": ["--agent", h2.socket, "--json", "stats", "--tunnel", "1"],
            "controller": ["--controller", lab.ctl_socket, "--json", "watch"],
        }
    watchers = {}
    for name, args in watch.items():
        f = open(os.path.join(lab.rundir, "stats-%s-%s.json" % (tag, name)), "w")
        cmd = [lab.plait] + args + ["--interval", "500ms"]
        if name != "controller":
            cmd.append("--watch")
        proc = subprocess.Popen(
            cmd, stdout=f, stderr=subprocess.STDOUT, start_new_session=True
        )
        watchers[name] = (lab.spawn(proc), f.name)
        f.close()
    t0 = changes.schedule(lab)
    before = snapshot(lab, cpid)
    sampler = Sampler(cpid, intfs)
    sampler.start()
    if t0 is not None:
        time.sleep(max(0.0, t0 - time.time()))
    t_start = time.time()  # every time series counts from here (t0: the paths' changes too)
    cmd = mptcp + [
        "iperf3",
        "-c",
        dst,
        "-p",
        str(IPERF_PORT),
        "-t",
        "%g" % dur,
        "-C",
        tr["cc"],
        "-J",
        "--get-server-output",
    ]
    if tr["flows"] > 1:
        cmd += ["-P", str(tr["flows"])]
    client = lab.spawn(h1.popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE))
    try:
        cout, cerr = client.communicate(timeout=dur + 30)
    except subprocess.TimeoutExpired:
        lab.reap(client)
        cout, cerr = b"", b"timed out"
    sampler.stop()
    after = snapshot(lab, cpid)
    for name, (p, _) in watchers.items():
        lab.reap(p)
    lab.reap(server)
    lab.reap(client)

    try:
        iperf = json.loads(cout.decode() or "{}")
    except ValueError:
        iperf = {}
    if iperf.get("error") or not iperf:
        res["error"] = (
            iperf.get("error") or cerr.decode().strip() or "iperf3 printed nothing"
        )
        res["warnings"].append("iperf3: " + res["error"])
    with open(os.path.join(lab.rundir, "iperf3-%s.json" % tag), "w") as f:
        json.dump(iperf, f)
    res["goodput_bps"], res["goodput_steady_bps"], res["steady_s"] = goodput(iperf, omit)
    res["longest_stall_s"] = longest_stall(iperf)
    res["retransmits"] = after["retrans"] - before["retrans"]
    res["tcp_events"] = {
        k: v - before["tcp_events"][k] for k, v in after["tcp_events"].items()
    }
    with open(os.path.join(lab.rundir, "tcp-events-%s.json" % tag), "w") as f:
        json.dump(res["tcp_events"], f)
    rtts = [
        st["sender"]["mean_rtt"]
        for st in iperf.get("end", {}).get("streams", [])
        if st.get("sender", {}).get("mean_rtt")
    ]
    res["rtt_ms"] = sum(rtts) / len(rtts) / 1e3 if rtts else None
    res["iperf_retransmits"] = (
        iperf.get("end", {}).get("sum_sent", {}).get("retransmits")
    )
    res["per_path_bytes"] = {
        nm: after["tx"].get(i, 0) - before["tx"].get(i, 0)
        for nm, i in zip(names, intfs)
    }
    total = sum(res["per_path_bytes"].values())
    # A path carried the flow when it has 3 % of the bytes (the baselines run without
    # the tunnel, so no probes count).
    used = lambda nm: res["per_path_bytes"].get(nm, 0) >= 0.03 * max(total, 1)
    if config == "mptcp":
        joins = after["joins"] - before["joins"]
        idle = [nm for nm in names if not used(nm)]
        res["mptcp_joined_subflows"] = joins
        res["all_paths_used"] = not idle and joins >= len(names) - 1
        if idle:
            res["warnings"].append(
                "mptcp: paths %s carried under 3%% of the bytes" % ", ".join(idle)
            )
        if joins < len(names) - 1:
            res["warnings"].append(
                "mptcp: %d subflows joined, want %d" % (joins, len(names) - 1)
            )
    # Reordering at h2 (the tunnel's counters are cumulative).
    if config in TUNNEL_CONFIGS:
        ra, rb = after["reorder"], before["reorder"]
        d = lambda k: num(ra.get(k, 0)) - num(rb.get(k, 0))
        rec = d("received")
        res["reorder"] = {
            "received": rec,
            "reordered": d("reordered"),
            "inter_path": d("interPath"),
            "intra_path": d("intraPath"),
            "extent_hist": [
                num(a) - num(b)
                for a, b in zip(
                    ra.get("extentHist", []),
                    rb.get("extentHist", []) or [0] * len(ra.get("extentHist", [])),
                )
            ],
        }
        res["reordered_ratio"] = d("reordered") / rec if rec > 0 else 0.0
        # The receiver's resequencer, when the scenario turns it on: packets released in
        # order, at the bound, as proven lost, skipped, late; the hold at the end.
        qa, qb = after["resequencer"], before["resequencer"]
        if qa:
            q = lambda k: num(qa.get(k, 0)) - num(qb.get(k, 0))
            res["resequencer"] = {
                "in_order": q("inOrder"),
                "bound": q("bound"),
                "lost": q("lost"),
                "skipped": q("skipped"),
                "late": q("late"),
                "passed": q("passed"),
                "holes": q("holes"),
                "dropped": q("dropped"),
                "hold_us": num(qa.get("holdUs", 0)),
            }
    else:
        res["reordered_ratio"] = None
    # Time series: shares from h1's interfaces, delays and weights from the agents.
    res["series"] = series(
        sampler.samples, intfs, names, watchers, t_start, [p["name"] for p in lab.paths]
    )
    # Mean one-way delay after omit, of the paths this configuration's flow used.
    owd = {}
    for nm in [p["name"] for p in lab.paths if config != "ideal" and used(p["name"])]:
        vals = [
            v
            for t, v in zip(
                res["series"]["agent_t"], res["series"]["owd_ms"].get(nm, [])
            )
            if t >= omit and not math.isnan(v)
        ]
        owd[nm] = sum(vals) / len(vals) if vals else None
    res["owd_mean_ms"] = owd
    res["started"] = t_start
    sent = after["switches"]["sent"] - before["switches"]["sent"]
    late = {k: after["switches"][k] - before["switches"][k] for k in ("late_1ms", "late_5ms")}
    res["emulation"] = dict(sent=sent, **late)
    if sent > 0 and late["late_5ms"] > lab.plan["late_warn"] * sent:
        res["warnings"].append(
            "the switches sent %.1f %% of packets more than 5 ms late: the machine's load, "
            "not the paths, reordered them (give the lab more CPUs or fewer paths)"
            % (100.0 * late["late_5ms"] / sent)
        )
    return res


def switch_counts(lab):
    """Packets the link emulation (the embedded switches, or BMv2's link elements) sent,
    and sent more than 1 and 5 ms late, so far."""
    c = {"sent": 0, "late_1ms": 0, "late_5ms": 0}
    for sw in lab.net.switches:
        if sw.link_address is None:
            continue
        out = subprocess.run(
            [lab.plait, "link", "show", "--switch", sw.link_address, "--json"],
            capture_output=True,
            text=True,
            timeout=10,
        )
        if out.returncode != 0:
            raise RuntimeError("plait link show on %s: %s" % (sw.name, out.stderr.strip()))
        for link in json.loads(out.stdout) or []:
            st = link.get("stats", {})
            c["sent"] += int(num(st.get("tx_packets", 0)))
            c["late_1ms"] += int(num(st.get("late_over_one_ms", 0)))
            c["late_5ms"] += int(num(st.get("late_over_five_ms", 0)))
    return c


def snapshot(lab, cpid):
    t = {}
    if lab.tunnel_up:
        st = json.loads(lab.h2.plaitcmd("--json", "stats", "--tunnel", "1"))
        t = tunnel_of(st) or {}
    tx = {i: v[1] for i, v in read_netdev(cpid).items()}
    pid = lab.h1.pid
    ext = read_mib(pid, "TcpExt")
    return {
        "retrans": read_mib(pid, "Tcp").get("RetransSegs", 0),
        "tcp_events": {k: ext.get(k, 0) for k in TCP_EVENTS},
        "joins": read_mib(pid, "MPTcpExt").get("MPJoinSynAckRx", 0),
        "tx": tx,
        "reorder": t.get("reorder", {}),
        "resequencer": t.get("resequencer", {}),
        "switches": switch_counts(lab),
    }


def path_name(p, paths):
    """The scenario's name of an agent's path: by its index (path_id on the wire), since a
    receive-only tunnel (split shape) knows its paths only by id."""
    i = int(num(p.get("index", -1)))
    return paths[i] if 0 <= i < len(paths) else p.get("name", "?")


def series(samples, intfs, names, watchers, t_start, paths):
    """Per-path rate over time (h1 interfaces) and agent-measured delay and weight, with
    times in seconds since the iperf3 client started."""
    out = {
        "t": [],
        "rate_bps": {n: [] for n in names},
        "agent_t": [],
        "owd_ms": {},
        "weight": {},
    }
    for (t0, a), (t1, b) in zip(samples, samples[1:]):
        dt = t1 - t0
        if dt <= 0:
            continue
        out["t"].append(t1 - t_start)
        for n, i in zip(names, intfs):
            out["rate_bps"][n].append(8 * (b[i] - a[i]) / dt)
    msgs = {}
    for host, (_, path) in watchers.items():
        if host not in ("h1", "h2"):
            continue
        with open(path) as f:
            msgs[host] = parse_stream(f.read())
    for m in msgs.get("h2", []):
        t = tunnel_of(m)
        if t is None:
            continue
        out["agent_t"].append(num(t.get("timeUnixNano")) / 1e9 - t_start)
        for p in t.get("paths", []):
            out["owd_ms"].setdefault(path_name(p, paths), []).append(
                num(p.get("owdMeanUs")) / 1e3
            )
    for m in msgs.get("h1", []):
        t = tunnel_of(m)
        if t is None:
            continue
        out.setdefault("weight_t", []).append(
            num(t.get("timeUnixNano")) / 1e9 - t_start
        )
        for p in t.get("paths", []):
            out["weight"].setdefault(path_name(p, paths), []).append(
                num(p.get("weight"))
            )
    return out
