"""Paths that change during a run (docs/traces.md): before each configuration's flow,
every emulated link is set back to how the scenario starts it, and its trace and the
events' steps are scheduled in the switches (``plait link set --at``) from the flow's
start, so each configuration meets the same changes at the same times, applied exactly in
the links' own time. Both ports of a path's switch (both directions) get each step.
"""

import subprocess
import time

import nodes
import topos


def link_set(lab, sw, port, fields, at=None, down=None):
    """Starts plait link set on the link a switch emulates on port: fields as
    nodes.link_fields gives them, at a Unix time (None: now, which cancels the port's
    scheduled changes), as the controller's election id (it is primary)."""
    address, lport = sw.link_port(port)
    cmd = [lab.plait, "link", "set", "--switch", address, "--port", str(lport)]
    cmd += ["--election-id", str(lab.election_id)]
    cmd += ["--%s=%s" % (k.replace("_", "-"), v) for k, v in fields]
    if down is not None:
        cmd.append("--down=%s" % ("true" if down else "false"))
    if at is not None:
        cmd += ["--at", "%.6f" % at]
    return (
        subprocess.Popen(
            cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True
        ),
        "%s port %d" % (sw.name, port),
    )


def wait_all(procs):
    for p, what in procs:
        _, err = p.communicate(timeout=30)
        if p.returncode:
            raise RuntimeError("plait link set on %s: %s" % (what, err.strip()))


def schedule(lab):
    """Sets every emulated link as the scenario starts it, then schedules the traces'
    starts and the events' steps from a start time t0 a moment ahead; returns t0, or None
    when no path changes. Both ports of a path's switch (both directions) get each step."""
    dyn = lab.sc.get("dynamic")
    if not dyn:
        return None
    sws = [lab.net.get("s%d" % k) for k in range(1, len(lab.paths) + 1)]
    if "ideal" in lab.sc["compare"]:
        sws.append(lab.net.get(topos.IDEAL_SWITCH))
    now = [
        link_set(lab, sw, port, nodes.link_fields(sw.links[port], trace=False), down=False)
        for sw in sws
        for port in (1, 2)
    ]
    wait_all(now)
    later = []
    for sw in sws:
        for port in (1, 2):
            tr = [kv for kv in nodes.link_fields(sw.links[port]) if kv[0].startswith("trace")]
            if tr:
                later.append((sw, port, tr, 0.0, None))
    for st in dyn.get("steps") or []:
        for port in (1, 2):
            fields = nodes.link_fields(st["link"], trace=False)
            later.append((sws[st["path"]], port, fields, st["at_s"], st["down"]))
    # Room for starting every plait link set on a loaded machine.
    t0 = time.time() + 1.0 + 0.1 * len(later)
    wait_all([link_set(lab, sw, port, f, t0 + at, down) for sw, port, f, at, down in later])
    if time.time() >= t0:
        raise RuntimeError(
            "scheduling the paths' changes took past their start (%d changes); the machine "
            "is too loaded" % len(later)
        )
    return t0
