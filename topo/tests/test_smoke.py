"""Smoke test of `plait lab run`: a 2-path, 5-second scenario through every configuration,
then summary.json's fields and the plots. Needs root and bin/plait (make build)."""

import json
import os
import shutil
import subprocess

import pytest

from test_units import check_png

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PLAIT = os.environ.get("PLAIT_BIN", os.path.join(ROOT, "bin", "plait"))

SCENARIO = """
name: smoke
paths:
  - {name: fast, rate: 4mbit, delay: 10ms, queue: 40}
  - {name: slow, rate: 2mbit, delay: 30ms, queue: 40}
traffic: {duration: 5s, omit: 1s, cc: cubic}
"""


def why_not():
    if os.geteuid() != 0:
        return "needs root (namespaces, eBPF)"
    if not os.access(PLAIT, os.X_OK):
        return "no plait binary at %s (make build)" % PLAIT
    for tool in ("mnexec", "iperf3", "mptcpize"):
        if not shutil.which(tool):
            return "%s is not installed (make deps)" % tool
    return None


@pytest.mark.skipif(why_not() is not None, reason=str(why_not()))
def test_lab_run(tmp_path):
    sc = tmp_path / "smoke.yaml"
    sc.write_text(SCENARIO)
    pins_before = pins()
    p = subprocess.run(
        [PLAIT, "lab", "run", str(sc), "--results", str(tmp_path / "results")],
        capture_output=True,
        text=True,
        timeout=240,
    )
    print(p.stdout, p.stderr)
    assert p.returncode == 0, p.stderr
    (out,) = list((tmp_path / "results" / "smoke").iterdir())
    with open(out / "summary.json") as f:
        s = json.load(f)
    assert s["capacity_bps"] == 6e6
    configs = [c["config"] for c in s["configs"]]
    assert configs == ["ideal", "single-best", "mptcp", "rr", "wrr", "auto"]
    for c in s["configs"]:
        for k in (
            "goodput_bps",
            "efficiency",
            "vs_ideal",
            "retransmits",
            "reordered_ratio",
            "per_path_bytes",
        ):
            assert k in c, (c["config"], k)
        assert 0.2e6 < c["goodput_bps"] <= 6e6, c
        assert c["goodput_steady_bps"] > 0, c
        assert abs(c["efficiency"] - c["goodput_bps"] / 6e6) < 1e-9
        if c["config"] == "ideal":
            assert c["vs_ideal"] == 1 and c["steady_vs_ideal"] == 1
        else:
            assert set(c["per_path_bytes"]) == {"fast", "slow"}
        if c["config"] in ("rr", "wrr", "auto"):
            assert c["reordered_ratio"] is not None
        # Every configuration crosses the embedded switches, which count their lateness.
        e = c["emulation"]
        assert e["sent"] > 0 and 0 <= e["late_5ms"] <= e["late_1ms"] <= e["sent"], e
        ev = c["tcp_events"]
        assert all(isinstance(v, int) and v >= 0 for v in ev.values()), c
        if c["config"] == "rr":
            # 10 and 30 ms paths in turn: the sender's stack saw the reordering.
            assert ev["TCPSACKReorder"] > 0, ev
        if c["config"] in ("mptcp", "rr", "wrr"):
            assert (
                min(c["per_path_bytes"].values()) > 0
            ), c  # every path carried traffic
    assert s["single_best"]["name"] == "fast"
    # wrr's weights follow the rates (4:2), as the sending agent reports them.
    w = s["series"]["wrr"]["weight"]
    assert w["fast"] and all(abs(x - 2 / 3) < 0.01 for x in w["fast"]), w
    assert w["slow"] and all(abs(x - 1 / 3) < 0.01 for x in w["slow"]), w
    for name in ("goodput.png", "share.png", "owd.png", "reorder_extent.png"):
        check_png(out / name)
    assert "| auto |" in (out / "summary.md").read_text()
    check_trace(out / "logs")
    # Nothing of the lab is left behind.
    links = subprocess.run(["ip", "-br", "link"], capture_output=True, text=True).stdout
    assert not any(
        l.split()[0].split("@")[0].startswith(("s0-", "s1-", "s2-"))
        for l in links.splitlines()
        if l
    )
    assert not os.path.exists("/run/plait/lab/state.json")
    assert pins() <= pins_before, "bpffs pins left behind: %s" % (pins() - pins_before)


def check_trace(logs):
    """auto's estimator trace: a row per path and report, and the forward direction's
    last rows hold what the estimator made of the 4 and 2 Mbit/s paths: the capacity it
    last measured on each while the path was busy (a path that stops queueing while
    another queues is probed upward afterwards, 15 % a report, until it queues again;
    the flow may end in such a probe), and estimates probes only raise."""
    (trace,) = list(logs.glob("trace-auto*.tsv"))
    lines = trace.read_text().splitlines()
    head = lines[0].split("\t")
    assert head[:5] == ["t_s", "tunnel", "from", "to", "path"], head
    rows = [dict(zip(head, l.split("\t"))) for l in lines[1:]]
    assert rows and all(len(r) == len(head) for r in rows)
    last = {r["path"]: r for r in rows if r["from"] == "h1"}
    busy = {r["path"]: r for r in rows if r["from"] == "h1" and r["busy"] == "true"}
    assert set(last) == {"fast", "slow"} == set(busy), (set(last), set(busy))
    for name, rate in (("fast", 4e6), ("slow", 2e6)):
        r = last[name]
        assert r["alive"] == "true" and r["capacity_known"] == "true", r
        assert 0.8 * rate < float(r["capacity_bps"]), r
        assert 0.8 * rate < float(busy[name]["capacity_bps"]) < 1.3 * rate, busy[name]


def sysctl(key):
    with open("/proc/sys/" + key.replace(".", "/")) as f:
        return f.read().strip()


def pins():
    d = "/sys/fs/bpf/plait"
    return set(os.listdir(d)) if os.path.isdir(d) else set()


@pytest.mark.skipif(why_not() is not None, reason=str(why_not()))
def test_lab_up(tmp_path):
    """lab up: the Mininet CLI on the lab, commands from stdin, everything gone after;
    --tcp sets the hosts' TCP knobs and nothing outside the lab."""
    sc = tmp_path / "smoke.yaml"
    sc.write_text(SCENARIO)
    root_before = sysctl("net.ipv4.tcp_reordering")
    p = subprocess.run(
        [PLAIT, "lab", "up", str(sc), "--tcp", "reordering=31,dsack=0"],
        input="h1 ping -c2 -W2 10.99.0.2\npy len(net.switches)\n"
        "h1 sysctl -n net.ipv4.tcp_reordering net.ipv4.tcp_dsack\n"
        "h2 sysctl -n net.ipv4.tcp_reordering\nexit\n",
        capture_output=True,
        text=True,
        timeout=120,
    )
    out = p.stdout + p.stderr  # Mininet's CLI prints through its logger (stderr)
    assert p.returncode == 0, out
    assert "2 received" in out, out
    assert "\n3\n" in out.replace("mininet> ", "\n"), out  # s0, s1, s2
    assert "\n31\n0\n31\n" in out.replace("mininet> ", "\n"), out
    assert sysctl("net.ipv4.tcp_reordering") == root_before
    assert "lab stopped and cleaned up" in out
    assert not os.path.exists("/run/plait/lab/state.json")


@pytest.mark.skipif(why_not() is not None, reason=str(why_not()))
def test_lab_run_split_shape(tmp_path):
    """The in-network split shape: split and merge switches, receive-only tunnels,
    MTU room for the switches' encapsulation; a Plait configuration moves data."""
    sc = tmp_path / "split.yaml"
    sc.write_text(SCENARIO + "shape: split\ncompare: [single-best, rr]\n")
    p = subprocess.run(
        [PLAIT, "lab", "run", str(sc), "--results", str(tmp_path / "results")],
        capture_output=True,
        text=True,
        timeout=180,
    )
    print(p.stdout, p.stderr)
    assert p.returncode == 0, p.stderr
    (out,) = list((tmp_path / "results" / "smoke").iterdir())
    with open(out / "summary.json") as f:
        s = json.load(f)
    assert s["shape"] == "split"
    for c in s["configs"]:
        assert c["goodput_bps"] > 0.5e6, c
        assert "error" not in c, c
