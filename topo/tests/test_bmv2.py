"""The BMv2 switch kind: a lab on simple_switch_grpc with netem links, run only where
BMv2, p4c's plait.json and netem exist (none of them here: the test says why it skips)."""

import os
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


def test_bmv2_command_line():
    s = nodes.BMv2Switch.__new__(nodes.BMv2Switch)
    assert nodes.netem_args({"rate_bps": 5e6, "delay_ns": 45_000_000, "queue": 50}) == [
        "rate",
        "5000000bit",
        "delay",
        "45000us",
        "limit",
        "50",
    ]
    assert s.kind == "simple_switch_grpc"


@pytest.mark.skipif(bmv2_why_not() is not None, reason="BMv2 lab: %s" % bmv2_why_not())
def test_bmv2_lab(tmp_path):
    sc = tmp_path / "bmv2.yaml"
    sc.write_text(
        "name: bmv2\nswitch: bmv2\n"
        "paths: [{name: a, rate: 4mbit, delay: 10ms}, {name: b, rate: 2mbit, delay: 30ms}]\n"
        "traffic: {duration: 5s, omit: 1s}\ncompare: [ideal, rr]\n"
    )
    p = subprocess.run(
        [PLAIT, "lab", "run", str(sc), "--results", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=180,
        cwd=ROOT,
    )
    assert p.returncode == 0, p.stdout + p.stderr
    assert "bmv2 switches" in p.stdout
