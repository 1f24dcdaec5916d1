"""What the lab runner measures, and how: the readers of a namespace's counters
(/proc/PID/net/dev and snmp), the agents' statistics streams, iperf3's JSON, the
embedded switches' lateness, and the per-path series the report plots. runner.py
decides what to run; this module only reads and reduces."""

import json
import math
import subprocess
import threading
import time

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
