"""Unit tests of the lab's pieces that need no root: topologies, link specs, goodput,
stats parsing, and the report with its plots."""

import json
import math

import matplotlib

matplotlib.use("Agg")
import matplotlib.image  # noqa: E402

import measure  # noqa: E402
import nodes  # noqa: E402
import report  # noqa: E402
import runner  # noqa: E402
import topos  # noqa: E402

PATHS = [
    {
        "name": "a",
        "rate_bps": 5e6,
        "capacity_bps": 5e6,
        "delay_ns": 100_000_000,
        "jitter_ns": 0,
        "loss": 0,
        "queue": 100,
    },
    {
        "name": "b",
        "rate_bps": 2e6,
        "capacity_bps": 2e6,
        "delay_ns": 10_000_000,
        "jitter_ns": 1_000_000,
        "loss": 0.005,
        "queue": 50,
    },
]
IDEAL = {
    "name": "ideal",
    "rate_bps": 7e6,
    "delay_ns": 10_000_000,
    "jitter_ns": 0,
    "loss": 0,
    "queue": 150,
}


def test_parallel_topo():
    t = topos.ParallelTopo(
        paths=PATHS, ideal=IDEAL, host_params={"plait": "/bin/plait"}
    )
    assert sorted(t.hosts()) == ["h1", "h2"]
    assert sorted(t.switches()) == ["s0", "s1", "s2"]
    assert t.nodeInfo("h1")["plait"] == "/bin/plait"
    assert t.nodeInfo("s2")["links"] == {1: PATHS[1], 2: PATHS[1]}
    assert t.nodeInfo("s0")["links"][2] == IDEAL
    info = t.linkInfo("h1", "s2")
    assert (
        info["params1"] == {"ip": "10.0.2.1/24"}
        and info["port1"] == 2
        and info["port2"] == 1
    )
    assert t.linkInfo("h2", "s1")["params1"] == {"ip": "10.0.1.2/24"}


def test_parallel_topo_without_ideal():
    t = topos.ParallelTopo(paths=PATHS)
    assert sorted(t.switches()) == ["s1", "s2"]


def test_split_topo():
    t = topos.SplitTopo(paths=PATHS, ideal=IDEAL)
    assert sorted(t.switches()) == ["s0", "s1", "s10", "s11", "s2"]
    assert t.linkInfo("s10", "s2")["port1"] == 3
    assert t.linkInfo("s2", "s11")["port2"] == 3
    assert "links" not in t.nodeInfo("s10")
    fwd = topos.forwarding("split", 2, True)
    assert fwd["s10"] == {1: 2, 2: 1, 3: 1} and fwd["s0"] == {1: 2, 2: 1}


def test_link_spec():
    # Every field is given, so that a change sets back what an earlier one changed.
    assert (
        nodes.link_spec(PATHS[0])
        == "rate=5000000bit,delay=100000us,jitter=0us,loss=0,queue=100"
    )
    assert (
        nodes.link_spec(PATHS[1])
        == "rate=2000000bit,delay=10000us,jitter=1000us,loss=0.5,queue=50"
    )
    traced = dict(
        PATHS[0],
        rate_bps=0,
        loss=0.01,
        ge=[0.0025, 0.25, 0, 1],
        trace_down="/t/x.down",
        trace_up="/t/x.up",
        trace_offset_ns=2_500_000_000,
    )
    assert nodes.link_spec(nodes.directed(traced, toward_h2=False)) == (
        "rate=0bit,delay=100000us,jitter=0us,loss=1,ge=0.0025/0.25/0/1,queue=100,"
        "trace=/t/x.up,trace_offset=2500000us"
    )
    down = nodes.directed(traced, toward_h2=True)
    assert ("trace", "/t/x.down") in nodes.link_fields(down)
    assert not [k for k, _ in nodes.link_fields(down, trace=False) if "trace" in k]


def test_goodput_leaves_out_the_warm_up():
    iv = lambda s, b: {"sum": {"start": s, "end": s + 1, "seconds": 1.0, "bytes": b}}
    ip = {
        "server_output_json": {
            "intervals": [iv(0, 10), iv(1, 20), iv(2, 1000), iv(3, 3000)]
        }
    }
    whole, steady, secs = measure.goodput(ip, 2)
    assert whole == 8 * 4030 / 4 and steady == 8 * 4000 / 2 and secs == 2
    assert measure.goodput(ip, 0) == (8 * 4030 / 4, 8 * 4030 / 4, 4)
    # Without the server's intervals, the client's receiver summary.
    ip = {"end": {"sum_received": {"bits_per_second": 5e6, "seconds": 5}}}
    assert measure.goodput(ip, 1) == (5e6, 5e6, 5)


def test_longest_stall():
    ivs = [0, 5, 0, 0, 0, 7, 0, 0, 3]
    ip = {
        "server_output_json": {
            "intervals": [{"sum": {"bytes": b, "seconds": 0.1}} for b in ivs]
        }
    }
    assert math.isclose(measure.longest_stall(ip), 0.3)
    assert measure.longest_stall({}) == 0


def test_median_run_takes_each_figure_s_median():
    rs = [
        {"goodput_bps": 3, "goodput_steady_bps": 1},
        {"goodput_bps": 1, "goodput_steady_bps": 3},
        {"goodput_bps": 2, "goodput_steady_bps": 2.5},
    ]
    m = runner.median_run(rs)
    assert m["goodput_bps"] == 2 and m["goodput_steady_bps"] == 2.5
    assert m["goodput_runs_bps"] == [3, 1, 2]
    assert m["goodput_steady_runs_bps"] == [1, 3, 2.5]
    assert "emulation" not in m


def test_median_run_counts_every_run_s_lateness():
    rs = [
        {"goodput_bps": g, "emulation": {"sent": 100, "late_1ms": 10 * g, "late_5ms": g}}
        for g in (3, 1, 2)
    ]
    m = runner.median_run(rs)
    assert m["goodput_bps"] == 2
    assert m["emulation"] == {"sent": 300, "late_1ms": 60, "late_5ms": 6}
    assert rs[2]["emulation"]["sent"] == 100  # the run itself keeps its own


def test_fmt_rate():
    assert report.fmt_rate(999.6e3) == "1 Mbit/s"
    assert report.fmt_rate(999.4e3) == "999 kbit/s"
    assert report.fmt_rate(6.695e6) == "6.7 Mbit/s"
    assert report.fmt_rate(1.5e9) == "1.5 Gbit/s"
    assert report.fmt_rate(12) == "12 bit/s"
    assert report.fmt_rate(float("nan")) == "-"


def test_parse_stream_and_num():
    text = (
        json.dumps({"a": 1}, indent=2)
        + "\n"
        + json.dumps({"a": "2"}, indent=2)
        + '\n{"a": '
    )
    msgs = measure.parse_stream(text)
    assert [measure.num(m["a"]) for m in msgs] == [1, 2]
    assert math.isnan(measure.num("NaN")) and math.isnan(measure.num(None))


def fake_results():
    res = []
    for i, c in enumerate(["ideal", "single-best", "mptcp", "rr", "wrr", "auto"]):
        t = [0.25 * k for k in range(1, 21)]
        r = {
            "config": c,
            "goodput_bps": 6.5e6 - i * 3e5,
            "goodput_steady_bps": 6e6 - i * 3e5,
            "retransmits": 10 * i,
            "longest_stall_s": 0.1 * i,
            "reordered_ratio": 0.1 * i if c in ("rr", "wrr", "auto") else None,
            "per_path_bytes": {"a": 1000 * i, "b": 400 * i},
            "owd_mean_ms": {"a": 101.0, "b": None},
            "rtt_ms": 123.4,
            "series": {
                "t": t,
                "rate_bps": {"a": [5e6] * 20, "b": [2e6] * 20},
                "agent_t": t,
                "owd_ms": {"a": [100.0] * 20, "b": [10.0] * 19 + [math.nan]},
                "weight": {"a": [5 / 7] * 20, "b": [2 / 7] * 20},
                "weight_t": t,
            },
        }
        if r["reordered_ratio"] is not None:
            r["reorder"] = {
                "received": 1000,
                "reordered": 100,
                "extent_hist": [50, 30, 10, 5, 0, 0, 0, 5],
            }
        res.append(r)
    return res


def plan():
    return {
        "scenario": {
            "name": "T",
            "description": "two paths",
            "shape": "parallel",
            "encap": "ip",
            "paths": PATHS,
            "capacity_bps": 7e6,
            "traffic": {"duration_s": 5, "omit_s": 1, "cc": "cubic", "flows": 1},
            "compare": [],
        },
        "ideal": IDEAL,
        "single_best": {"index": 0, "name": "a", "reason": "the model"},
    }


def test_report(tmp_path):
    s = report.summarize(plan(), fake_results(), "embedded")
    report.write(str(tmp_path), s, fake_results())
    with open(tmp_path / "summary.json") as f:
        got = json.load(f)  # strict JSON: NaN became null
    assert got["capacity_bps"] == 7e6
    ideal, auto = got["configs"][0], got["configs"][-1]
    assert ideal["vs_ideal"] == 1 and abs(auto["vs_ideal"] - 5e6 / 6.5e6) < 1e-9
    assert ideal["steady_vs_ideal"] == 1 and abs(auto["steady_vs_ideal"] - 4.5e6 / 6e6) < 1e-9
    assert abs(auto["efficiency"] - 5e6 / 7e6) < 1e-9
    for c in got["configs"]:
        for k in (
            "config",
            "goodput_bps",
            "efficiency",
            "vs_ideal",
            "retransmits",
            "reordered_ratio",
            "per_path_bytes",
        ):
            assert k in c
    md = (tmp_path / "summary.md").read_text()
    assert "| auto | 5 Mbit/s | 71.4 % | 76.9 % | 75.0 % | 0.5 | 50 | 50.0 % | 123 | 101.0 | - |" in md
    for name in report.PLOTS:
        check_png(tmp_path / name)


def test_report_dynamic(tmp_path):
    """A changing scenario's summary lists its events and plots the paths' capacity."""
    p = plan()
    p["scenario"]["dynamic"] = {
        "steps": [
            {"at_s": 2, "path": 1, "what": "b down for 1s", "down": True},
            {"at_s": 3, "path": 1, "what": "b up again", "down": False},
        ],
        "capacity_bin_s": 0.1,
        "capacity_bps": {"a": [5e6] * 50, "b": [2e6] * 20 + [0] * 10 + [2e6] * 20},
    }
    s = report.summarize(p, fake_results(), "embedded")
    report.write(str(tmp_path), s, fake_results())
    md = (tmp_path / "summary.md").read_text()
    assert "- 2s: b down for 1s" in md and "the paths' capacities merged" in md
    for name in report.PLOTS:
        check_png(tmp_path / name)


def check_png(path):
    """A real PNG: the signature, and an image matplotlib reads back with content."""
    with open(path, "rb") as f:
        assert f.read(8) == b"\x89PNG\r\n\x1a\n", path
    img = matplotlib.image.imread(str(path))
    assert img.shape[0] > 200 and img.shape[1] > 400, (path, img.shape)
    assert img.std() > 0.01, "%s is blank" % path


class _Intf:
    def __init__(self, mac):
        self.mac = mac

    def MAC(self):
        return self.mac


class _Node:
    def __init__(self, name, address=None, mac=None):
        self.name, self.address, self.socket = name, address, "/run/%s.sock" % name
        self.mac = mac

    def intf(self, name):
        return _Intf(self.mac)


def fake_lab(shape):
    import lab

    p = plan()
    p["scenario"]["shape"] = shape
    p["scenario"]["compare"] = ["ideal", "single-best", "rr", "wrr", "auto"]
    p["plait"] = "/bin/plait"
    p["single_best"]["index"] = 1
    lb = lab.Lab(p)
    names = ["s0", "s1", "s2"] + (["s10", "s11"] if shape == "split" else [])
    lb.net = type("Net", (), {})()
    lb.net.switches = [
        _Node(n, "127.0.0.1:%d" % (9000 + i)) for i, n in enumerate(names)
    ]
    lb.h1 = _Node("h1", mac="00:00:00:00:00:01")
    lb.h2 = _Node("h2", mac="00:00:00:00:00:02")
    lb.switch_kind = "embedded"
    return lb


def test_network_files_parallel():
    lb = fake_lab("parallel")
    n = lb.network("ideal")
    assert "tunnels" not in n and n["agents"] == {
        "h1": "/run/h1.sock",
        "h2": "/run/h2.sock",
    }
    assert n["switches"]["s1"] == {
        "address": "127.0.0.1:9001",
        "election_id": 10,
        "forward": {1: 2, 2: 1},
    }
    assert lb.network("rr")["tunnels"] == [
        {"id": 1, "hosts": ["h1", "h2"], "mode": "rr"}
    ]
    assert lb.network("wrr")["tunnels"][0]["weights"] == [5.0, 2.0]
    assert lb.network("auto")["tunnels"][0]["mode"] == "auto"


def test_network_files_split():
    lb = fake_lab("split")
    sb = lb.network(
        "single-best"
    )  # path index 1 = port 3 of the split and merge switches
    assert (
        sb["switches"]["s10"]["forward"][1] == 3
        and sb["switches"]["s11"]["forward"][1] == 3
    )
    assert "splits" not in sb["switches"]["s10"]
    n = lb.network("auto")
    (sp,) = n["switches"]["s10"]["splits"]
    assert sp["from"] == "h1" and sp["in_port"] == 1 and sp["prefix"] == "10.99.0.2/32"
    assert [p["port"] for p in sp["paths"]] == [2, 3]
    assert sp["paths"][1] == {
        "name": "b",
        "port": 3,
        "src_mac": "00:00:00:00:00:01",
        "dst_mac": "00:00:00:00:00:02",
        "src_ip": "10.0.2.1",
        "dst_ip": "10.0.2.2",
    }
    (back,) = n["switches"]["s11"]["splits"]
    assert back["from"] == "h2" and back["paths"][0]["dst_ip"] == "10.0.1.1"
