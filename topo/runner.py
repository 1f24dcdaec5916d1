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
import subprocess
import time

import changes
import measure
import nodes
import report
import topos

TUNNEL_CONFIGS = ("rr", "wrr", "auto")
IPERF_PORT = 5201


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
    and a known capacity towards h2, and has stopped holding the split it found: what a
    controller that runs all along knows before a flow starts (it probes idle paths).
    The lab starts it anew for each configuration; a flow that starts first is split on
    guesses, or on the lab's equal weights."""
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
        # measuring: the controller still holds the split it found (the lab's equal
        # weights) until the probe trains have measured every path.
        if dirs and not any(d.get("measuring") for d in dirs) and all(
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
            + ["iperf3", "-s", "-1", "-J", "-i", str(measure.INTERVAL_S), "-p", str(IPERF_PORT)],
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
    before = measure.snapshot(lab, cpid)
    sampler = measure.Sampler(cpid, intfs)
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
    after = measure.snapshot(lab, cpid)
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
    res["goodput_bps"], res["goodput_steady_bps"], res["steady_s"] = measure.goodput(iperf, omit)
    res["longest_stall_s"] = measure.longest_stall(iperf)
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
        d = lambda k: measure.num(ra.get(k, 0)) - measure.num(rb.get(k, 0))
        rec = d("received")
        res["reorder"] = {
            "received": rec,
            "reordered": d("reordered"),
            "inter_path": d("interPath"),
            "intra_path": d("intraPath"),
            "extent_hist": [
                measure.num(a) - measure.num(b)
                for a, b in zip(
                    ra.get("extentHist", []),
                    rb.get("extentHist", []) or [0] * len(ra.get("extentHist", [])),
                )
            ],
        }
        res["reordered_ratio"] = d("reordered") / rec if rec > 0 else 0.0
        # The receiver's resequencer, when the scenario turns it on: packets released in
        # order, at the bound, as proven lost, skipped, late, ahead of another flow's
        # hole; the hold at the end.
        qa, qb = after["resequencer"], before["resequencer"]
        if qa:
            q = lambda k: measure.num(qa.get(k, 0)) - measure.num(qb.get(k, 0))
            res["resequencer"] = {
                "in_order": q("inOrder"),
                "bound": q("bound"),
                "lost": q("lost"),
                "skipped": q("skipped"),
                "late": q("late"),
                "passed": q("passed"),
                "ahead": q("ahead"),
                "holes": q("holes"),
                "dropped": q("dropped"),
                "hold_us": measure.num(qa.get("holdUs", 0)),
            }
    else:
        res["reordered_ratio"] = None
    # Time series: shares from h1's interfaces, delays and weights from the agents.
    res["series"] = measure.series(
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
