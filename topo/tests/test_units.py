"""Unit tests of the lab's pieces that need no root: topologies, link specs, goodput,
stats parsing, and the report with its plots."""

import json
import math

import matplotlib

matplotlib.use("Agg")
import matplotlib.image  # noqa: E402

import nodes  # noqa: E402
import report  # noqa: E402
import runner  # noqa: E402
import topos  # noqa: E402

PATHS = [
    {
        "name": "a",
        "rate_bps": 5e6,
        "delay_ns": 100_000_000,
        "jitter_ns": 0,
        "loss": 0,
        "queue": 100,
    },
    {
        "name": "b",
        "rate_bps": 2e6,
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


def test_link_spec_and_netem():
    assert nodes.link_spec(PATHS[0]) == "rate=5000000bit,delay=100000us,queue=100"
    assert (
        nodes.link_spec(PATHS[1])
        == "rate=2000000bit,delay=10000us,jitter=1000us,loss=0.5,queue=50"
    )
    assert nodes.netem_args(PATHS[1]) == [
        "rate",
        "2000000bit",
        "delay",
        "10000us",
        "1000us",
        "loss",
        "0.5%",
        "limit",
        "50",
    ]


def test_goodput_leaves_out_the_warm_up():
    iv = lambda s, b: {"sum": {"start": s, "end": s + 1, "seconds": 1.0, "bytes": b}}
    ip = {
        "server_output_json": {
            "intervals": [iv(0, 10), iv(1, 20), iv(2, 1000), iv(3, 3000)]
        }
    }
    bps, secs = runner.goodput(ip, 2)
    assert secs == 2 and bps == 8 * 4000 / 2
    assert runner.goodput(ip, 0) == (8 * 4030 / 4, 4)
    # Without the server's intervals, the client's receiver summary.
    ip = {"end": {"sum_received": {"bits_per_second": 5e6, "seconds": 5}}}
    assert runner.goodput(ip, 1) == (5e6, 5)


def test_parse_stream_and_num():
    text = (
        json.dumps({"a": 1}, indent=2)
        + "\n"
        + json.dumps({"a": "2"}, indent=2)
        + '\n{"a": '
    )
    msgs = runner.parse_stream(text)
    assert [runner.num(m["a"]) for m in msgs] == [1, 2]
    assert math.isnan(runner.num("NaN")) and math.isnan(runner.num(None))


def fake_results():
    res = []
    for i, c in enumerate(["ideal", "single-best", "mptcp", "rr", "wrr", "auto"]):
        t = [0.25 * k for k in range(1, 21)]
        r = {
            "config": c,
            "goodput_bps": 6.5e6 - i * 3e5,
            "retransmits": 10 * i,
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
    assert "| auto | 5 Mbit/s | 71.4 % | 76.9 % | 50 | 50.0 % | 123 | 101.0 | - |" in md
    for name in report.PLOTS:
        check_png(tmp_path / name)


def check_png(path):
    """A real PNG: the signature, and an image matplotlib reads back with content."""
    with open(path, "rb") as f:
        assert f.read(8) == b"\x89PNG\r\n\x1a\n", path
    img = matplotlib.image.imread(str(path))
    assert img.shape[0] > 200 and img.shape[1] > 400, (path, img.shape)
    assert img.std() > 0.01, "%s is blank" % path
