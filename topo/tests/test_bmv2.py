"""The BMv2 switch kind: simple_switch_grpc running plait.p4, with Plait's link element
(``plait switch --passthrough``) in series with every shaped port, so no netem is needed.

test_bmv2_lab runs where BMv2 and p4c's plait.json exist (not here: it says why it
skips). test_series_lab runs the same lab code here with a stand-in in BMv2's place: a
``simple_switch_grpc`` on PATH that runs the embedded switch without links from BMv2's
command line, so that only the link elements shape the paths."""

import json
import os
import stat
import subprocess

import pytest

import nodes
from test_smoke import PLAIT, ROOT, why_not

BMV2_JSON = os.path.join(ROOT, "p4", "build", "plait.json")


def bmv2_why_not():
    if why_not():
        return why_not()
    ok, why = nodes.bmv2_available()
    if not ok:
        return why
    if not os.path.exists(BMV2_JSON):
        return "p4/build/plait.json is missing (make p4 needs p4c)"
    return None


def scenario(path, shape):
    path.write_text(
        "name: bmv2-%s\nswitch: bmv2\nshape: %s\n" % (shape, shape)
        + "paths: [{name: a, rate: 4mbit, delay: 10ms}, {name: b, rate: 2mbit, delay: 30ms}]\n"
        "traffic: {duration: 10s, omit: 2s}\ncompare: [ideal, auto]\n"
    )
    return str(path)


def run_lab(tmp_path, shape, env=None, cwd=ROOT):
    p = subprocess.run(
        [PLAIT, "lab", "run", scenario(tmp_path / (shape + ".yaml"), shape)]
        + ["--results", str(tmp_path / "results")],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=cwd,
        env=env,
    )
    print(p.stdout, p.stderr)
    assert p.returncode == 0, p.stdout + p.stderr
    assert "bmv2 switches" in p.stdout
    (out,) = list((tmp_path / "results" / ("bmv2-" + shape)).iterdir())
    with open(out / "summary.json") as f:
        return {c["config"]: c for c in json.load(f)["configs"]}


@pytest.mark.skipif(bmv2_why_not() is not None, reason="BMv2 lab: %s" % bmv2_why_not())
@pytest.mark.parametrize("shape", ["parallel", "split"])
def test_bmv2_lab(tmp_path, shape):
    c = run_lab(tmp_path, shape)
    assert c["auto"]["goodput_bps"] >= 0.9 * c["ideal"]["goodput_bps"], c["auto"]


STAND_IN = """#!/usr/bin/env python3
# simple_switch_grpc's command line, run by plait's embedded switch (no links, no tick):
# --device-id N --no-p4 [-i PORT@IF]... -- --grpc-server-addr ADDR --cpu-port C
import os, sys
args = sys.argv[1:]
if "--help" in args:
    print("stand-in for simple_switch_grpc: no nanomsg, no Thrift")
    sys.exit(0)
cmd = [%r, "switch", "--name", "bmv2-stand-in", "--no-pipeline"]
while args:
    a = args.pop(0)
    if a == "--device-id":
        cmd += ["--device-id", args.pop(0)]
    elif a == "-i":
        port, ifname = args.pop(0).split("@")
        cmd += ["--port", port + "=" + ifname]
    elif a == "--grpc-server-addr":
        cmd += ["--grpc", args.pop(0)]
    elif a == "--cpu-port":
        cmd += ["--cpu-port", args.pop(0)]
    elif a not in ("--no-p4", "--"):
        sys.exit("stand-in: unexpected option " + a)
os.execv(cmd[0], cmd)
"""


@pytest.mark.skipif(why_not() is not None, reason=str(why_not()))
@pytest.mark.parametrize("shape", ["parallel", "split"])
def test_series_lab(tmp_path, shape):
    """The BMv2 lab with a stand-in switch that forwards at full speed: every rate the
    lab measures is the link elements' doing."""
    bindir = tmp_path / "bin"
    bindir.mkdir()
    stand_in = bindir / "simple_switch_grpc"
    stand_in.write_text(STAND_IN % os.path.abspath(PLAIT))
    stand_in.chmod(stand_in.stat().st_mode | stat.S_IXUSR)
    # The lab finds plait.json under its working directory; the embedded switch takes any
    # JSON as the device config.
    build = tmp_path / "p4" / "build"
    build.mkdir(parents=True)
    (build / "plait.json").write_text('{"stand_in": true}')
    env = dict(os.environ, PATH="%s:%s" % (bindir, os.environ["PATH"]))
    c = run_lab(tmp_path, shape, env=env, cwd=str(tmp_path))
    # Unshaped, one flow through the stand-in runs at hundreds of Mbit/s; the ideal link
    # is the paths' 6 Mbit/s together.
    ideal = c["ideal"]["goodput_bps"]
    assert 0.7 * 6e6 < ideal <= 6e6, c["ideal"]
    assert 0.5 * 6e6 < c["auto"]["goodput_bps"] <= 6e6, c["auto"]
    for cfg in c.values():  # the elements' counts reach the results, as a switch's do
        e = cfg["emulation"]
        assert e["sent"] > 0 and 0 <= e["late_5ms"] <= e["late_1ms"] <= e["sent"], e
    auto = c["auto"]["goodput_bps"]
    print("%s: ideal %.2f, auto %.2f Mbit/s" % (shape, ideal / 1e6, auto / 1e6))
