"""Plait's Mininet lab: builds a scenario's paths, runs one TCP flow over them in every
configuration of the scenario's compare list, and writes the results.

Run through ``plait lab run SCENARIO`` or ``plait lab up SCENARIO``, which validate the
scenario in Go and hand this program a plan (JSON)::

    /usr/bin/python3 lab.py run --plan plan.json
    /usr/bin/python3 lab.py up --plan plan.json
    /usr/bin/python3 lab.py clean

The lab owns everything it starts: the Mininet nodes, an agent per host, a switch
process per switch, the controller, iperf3 and the stats samplers. All of it, with the
agents' bpffs pins and /run/plait state, goes on exit, on error and on Ctrl-C; a lab that
was killed outright is cleaned by ``plait lab clean`` or by the next lab's start.
"""

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import time

import nodes
import runner
import topos

RUNDIR = "/run/plait/lab"
# The controller's P4Runtime election id on every switch: the primary's, which the lab
# gives plait link set to change links while the controller runs (the paths' events).
ELECTION_ID = 10
STATE = os.path.join(RUNDIR, "state.json")
ALLOWED_CC = "/proc/sys/net/ipv4/tcp_allowed_congestion_control"


def say(msg):
    print(msg, flush=True)


class LabError(Exception):
    """A problem with a clear fix; printed without a traceback."""


def check_prerequisites(plan):
    if os.geteuid() != 0:
        raise LabError(
            "the lab needs root (namespaces, eBPF, raw sockets): run it with sudo"
        )
    for tool, pkg in [
        ("iperf3", "iperf3"),
        ("mnexec", "mininet"),
        ("ethtool", "ethtool"),
    ]:
        if not shutil.which(tool):
            raise LabError(
                "%s is not installed: apt-get install %s (or run make deps)"
                % (tool, pkg)
            )
    if "mptcp" in plan["scenario"]["compare"] and not shutil.which("mptcpize"):
        raise LabError(
            "mptcpize is not installed: apt-get install mptcpize (or drop mptcp from compare)"
        )
    if not os.access(plan["plait"], os.X_OK):
        raise LabError(
            "plait binary %s is not executable: run make build" % plan["plait"]
        )
    cc = plan["scenario"]["traffic"]["cc"]
    with open("/proc/sys/net/ipv4/tcp_available_congestion_control") as f:
        avail = f.read().split()
    if cc not in avail:
        subprocess.run(["modprobe", "tcp_" + cc], capture_output=True)
        with open("/proc/sys/net/ipv4/tcp_available_congestion_control") as f:
            avail = f.read().split()
        if cc not in avail:
            raise LabError(
                "traffic.cc: congestion control %r is not available in this kernel (have: %s)"
                % (cc, ", ".join(avail))
            )


def proc_start(pid):
    """Returns a process's start time (clock ticks since boot), or None when it is gone
    (or a zombie)."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return None if fields[0] in "ZX" else int(fields[19])
    except (OSError, ValueError, IndexError):
        return None


def clean_state(quiet=False):
    """Removes what a lab recorded in its state file: processes, interfaces, pins."""
    try:
        with open(STATE) as f:
            st = json.load(f)
    except (OSError, ValueError):
        st = None
    if st:
        pid = st.get("pid", 0)
        if pid != os.getpid() and proc_start(pid) == st.get("start"):
            raise LabError(
                "another lab is running (pid %d); stop it first or wait for it"
                % st["pid"]
            )
        for pid, started in st.get("pids", []):
            # Only the very process recorded: a pid may have been reused since.
            if proc_start(pid) == started:
                try:
                    os.kill(pid, signal.SIGKILL)
                except (ProcessLookupError, PermissionError):
                    pass
        for ifname in st.get("intfs", []):
            subprocess.run(["ip", "link", "del", ifname], capture_output=True)
        for ino in st.get("inodes", []):
            shutil.rmtree("/sys/fs/bpf/plait/netns-%d" % ino, ignore_errors=True)
            shutil.rmtree("/run/plait/netns-%d" % ino, ignore_errors=True)
        if st.get("allowed_cc"):
            with open(ALLOWED_CC, "w") as f:
                f.write(" ".join(st["allowed_cc"]))
        if not quiet:
            say("cleaned up lab of pid %s" % st.get("pid"))
    for name in os.listdir(RUNDIR) if os.path.isdir(RUNDIR) else []:
        p = os.path.join(RUNDIR, name)
        if os.path.isdir(p):
            shutil.rmtree(p, ignore_errors=True)
        else:
            os.unlink(p)


class Lab:
    """One scenario's Mininet network with its agents, switches and controller."""

    def __init__(self, plan):
        self.plan = plan
        self.sc = plan["scenario"]
        self.paths = self.sc["paths"]
        self.shape = self.sc["shape"]
        self.plait = plan["plait"]
        self.net = None
        self.ctl = None
        self.ctl_name = None
        self.children = []
        self.switch_kind = None
        self.allowed_cc = None
        self.rundir = RUNDIR
        self.ctl_socket = os.path.join(RUNDIR, "controller.sock")
        self.owner = False  # of RUNDIR and its state file, once start() checked
        self.election_id = ELECTION_ID

    # -- life cycle -------------------------------------------------------------

    def start(self):
        from mininet.log import setLogLevel
        from mininet.net import Mininet

        setLogLevel("error")
        # Mininet.init() would raise system-wide limits and sysctls; the lab needs none.
        Mininet.inited = True
        os.makedirs(RUNDIR, exist_ok=True)
        clean_state(quiet=True)  # refuses while another lab lives
        self.owner = True
        self.record()
        self.allow_cc(self.sc["traffic"]["cc"])
        switch_cls = self.pick_switch()
        ideal = self.plan["ideal"] if "ideal" in self.sc["compare"] else None
        topo_cls = topos.SplitTopo if self.shape == "split" else topos.ParallelTopo
        topo = topo_cls(
            paths=self.paths,
            ideal=ideal,
            host=nodes.PlaitHost,
            switch=switch_cls,
            host_params={
                "plait": self.plait,
                "rundir": RUNDIR,
                "cc": self.sc["traffic"]["cc"],
                "tcp": self.sc["traffic"].get("tcp") or {},
            },
            switch_params={"plait": self.plait, "rundir": RUNDIR},
        )
        say(
            "== lab: %s shape, %d paths, %s switches"
            % (self.shape, len(self.paths), self.switch_kind)
        )
        self.net = Mininet(topo=topo, controller=None, build=False, autoSetMacs=False)
        try:
            self.net.build()
        finally:
            self.record()
        self.net.start()
        self.record()
        self.h1, self.h2 = self.net.get("h1"), self.net.get("h2")
        self.tunnel_up = False
        self.reseq = False  # whether the tunnel up resequences
        self.repair = False  # whether the tunnel up repairs losses
        if self.shape == "split":
            self.split_mtu()
        if "mptcp" in self.sc["compare"] and self.shape == "parallel":
            self.add_mptcp_endpoints()
        self.record()

    def allow_cc(self, cc):
        """A namespace other than the first may only make a congestion control its
        default when the first namespace allows it (tcp_allowed_congestion_control);
        the lab adds it for its lifetime and restores the list on stop."""
        with open(ALLOWED_CC) as f:
            allowed = f.read().split()
        if cc not in allowed:
            self.allowed_cc = allowed
            self.record()  # first, so that a killed lab's clean-up restores the list
            with open(ALLOWED_CC, "w") as f:
                f.write(" ".join(allowed + [cc]))

    def pick_switch(self):
        want = self.sc["switch"]
        if want in ("auto", "bmv2"):
            ok, why = nodes.bmv2_available()
            if ok and not self.plan.get("bmv2_json"):
                ok, why = False, "p4/build/plait.json is missing (run make p4)"
            if ok:
                self.switch_kind = "bmv2"
                return nodes.BMv2Switch
            if want == "bmv2":
                raise LabError("switch: bmv2 asked for, but " + why)
            say("== BMv2 not used: %s; using plait switch" % why)
        self.switch_kind = "embedded"
        return nodes.EmbeddedSwitch

    def record(self):
        """Writes what clean_state needs to undo this lab if this process dies."""
        st = {"pid": os.getpid(), "start": proc_start(os.getpid())}
        st.update(pids=[], intfs=[], inodes=[])
        if self.allowed_cc is not None:
            st["allowed_cc"] = self.allowed_cc
        if self.net is not None:
            for h in self.net.hosts:
                if h.pid:
                    st["pids"].append(h.pid)
                if getattr(h, "ino", None):
                    st["inodes"].append(h.ino)
                if getattr(h, "agent", None):
                    st["pids"].append(h.agent.pid)
            for s in self.net.switches:
                st["intfs"] += [i for i in s.intfNames() if i != "lo"]
                if getattr(s, "proc", None):
                    st["pids"].append(s.proc.pid)
        for p in self.children + ([self.ctl] if self.ctl else []):
            st["pids"].append(p.pid)
        st["pids"] = [
            [p, proc_start(p)] for p in st["pids"] if proc_start(p) is not None
        ]
        tmp = STATE + ".tmp"
        with open(tmp, "w") as f:
            json.dump(st, f)
        os.replace(tmp, STATE)

    def save_logs(self):
        """Copies the run's logs and files into the results folder (run) before cleanup."""
        out = self.plan.get("out")
        if not out or not os.path.isdir(RUNDIR):
            return
        logs = os.path.join(out, "logs")
        os.makedirs(logs, exist_ok=True)
        for name in os.listdir(RUNDIR):
            if name.endswith((".log", ".json", ".yaml", ".tsv")) and name != "state.json":
                shutil.copy(os.path.join(RUNDIR, name), logs)

    def stop(self):
        if not self.owner:  # another lab's: leave it alone
            return
        self.stop_controller()
        for p in self.children:
            nodes.stop_process(p, 2)
        self.children = []
        if self.net is not None:
            try:
                self.net.stop()
            except Exception as e:  # keep cleaning whatever is left
                say("lab: stopping Mininet: %s" % e)
            self.net = None
        self.save_logs()
        clean_state(quiet=True)  # also restores tcp_allowed_congestion_control
        self.allowed_cc = None

    def spawn(self, proc):
        self.children.append(proc)
        self.record()
        return proc

    def reap(self, proc, timeout=2):
        nodes.stop_process(proc, timeout)
        if proc in self.children:
            self.children.remove(proc)

    # -- tunnels ----------------------------------------------------------------

    def tunnel(self, up, config=None):
        """Adds or removes tunnel 1 (for config: whether it resequences and repairs
        depends on it).
        The baselines (ideal, single-best, mptcp) run without it, so that no Plait probe
        shares their paths."""
        reseq, repair = (
            self.sc.get(f) == "on" or (self.sc.get(f) == "auto" and config == "auto")
            for f in ("resequence", "repair")
        )
        same = (reseq, repair) == (self.reseq, self.repair)
        if up == self.tunnel_up and (not up or same):
            return
        if up:
            self.reseq, self.repair = reseq, repair
            self.add_tunnels()
        else:
            for h in (self.h1, self.h2):
                h.plaitcmd("tunnel", "rm", "1")
        self.tunnel_up = up

    def add_tunnels(self):
        if self.shape == "split":
            return self.add_receive_tunnels()
        n = len(self.paths)
        auth = ["--no-auth"]
        if self.sc["auth"] == "on":
            key = os.path.join(self.rundir, "tunnel.key")
            if os.path.exists(key):
                os.remove(key)
            subprocess.run([self.plait, "tunnel", "genkey", key], check=True)
            auth = ["--key-file", key]
        for host, peer in ((self.h1, "h2"), (self.h2, "h1")):
            args = ["tunnel", "add", "--id", "1", "--device", "plait0"] + auth
            args += ["--address", topos.TUNNEL_ADDR[host.name] + "/24"]
            # Compact: TCP between the two tunnel addresses carries its own IPv4 header
            # as the outer one (20 bytes less a packet).
            args += ["--peer", topos.TUNNEL_ADDR[peer], "--encap", self.sc["encap"]]
            for k, p in enumerate(self.paths, 1):
                args += [
                    "--path",
                    "name=%s,dev=%s-eth%d,remote=%s"
                    % (p["name"], host.name, k, topos.path_addr(k, peer)),
                ]
            args += ["--mode", "wrr", "--weights", ",".join(["1"] * n)]
            if self.reseq:
                args += ["--resequence"]
            args += ["--repair=%s" % ("true" if self.repair else "false")]
            host.plaitcmd(*args)
            host.cmd("ethtool -K plait0 %s >/dev/null 2>&1" % " ".join(nodes.OFFLOADS))

    def split_mtu(self):
        """Split shape: the hosts' interface takes the switches' encapsulated frames
        (MTU 1600) but sends inner packets of at most 1500 bytes (route MTU)."""
        for h in (self.h1, self.h2):
            dev = h.name + "-eth1"
            out = h.cmd(
                "ip link set %s mtu %d && ip route replace %s dev %s src %s mtu lock 1500 2>&1"
                % (
                    dev,
                    topos.CORE_MTU,
                    topos.TUNNEL_PREFIX,
                    dev,
                    topos.TUNNEL_ADDR[h.name],
                )
            ).strip()
            if out:
                raise LabError("%s: setting the split shape's MTU: %s" % (h.name, out))

    def add_receive_tunnels(self):
        for host, peer in ((self.h1, "h2"), (self.h2, "h1")):
            me = host.name
            for k in range(1, len(self.paths) + 1):
                host.cmd("ip addr add %s/32 dev %s-eth1" % (topos.path_addr(k, me), me))
            args = ["tunnel", "add", "--id", "1", "--device", "%s-eth1" % me]
            args += ["--address", topos.TUNNEL_ADDR[me] + "/24", "--receive-only"]
            out = subprocess.run(
                [self.plait, "--agent", host.socket] + args,
                capture_output=True,
                text=True,
            )
            if out.returncode:
                raise LabError(
                    "shape: split needs receive-only tunnels in the agent, which it does not "
                    "offer yet (%s); use shape: parallel" % out.stderr.strip()
                )

    def add_mptcp_endpoints(self):
        """The server (h2) announces its other path addresses; both ends accept 8."""
        for h in (self.h1, self.h2):
            h.cmd("ip mptcp endpoint flush")
            h.cmd("ip mptcp limits set subflows 8 add_addr_accepted 8")
        for k in range(2, len(self.paths) + 1):
            out = self.h2.cmd(
                "ip mptcp endpoint add %s dev h2-eth%d signal 2>&1"
                % (topos.path_addr(k, "h2"), k)
            ).strip()
            if out:
                raise LabError("mptcp: ip mptcp endpoint add on h2: %s" % out)

    # -- the controller ---------------------------------------------------------

    def network(self, config):
        """The controller's network file for one configuration (see controller/)."""
        n = len(self.paths)
        ideal = "ideal" in self.sc["compare"]
        fwd = topos.forwarding(self.shape, n, ideal)
        if self.shape == "split" and config == "single-best":
            k = self.plan["single_best"]["index"] + 1
            for s in (topos.SPLIT_SWITCH, topos.MERGE_SWITCH):
                fwd[s][1] = k + 1
        switches = {}
        for s in self.net.switches:
            ent = {
                "address": s.address,
                "election_id": self.election_id,
                "forward": fwd.get(s.name, {}),
            }
            if self.switch_kind == "bmv2":
                ent["device_config"] = self.plan["bmv2_json"]
            switches[s.name] = ent
        net = {
            "interval": "100ms",
            "agents": {"h1": self.h1.socket, "h2": self.h2.socket},
            "switches": switches,
        }
        if config in ("rr", "wrr", "auto"):
            t = {"id": 1, "hosts": ["h1", "h2"], "mode": config}
            if config == "wrr":
                t["weights"] = [p["capacity_bps"] / 1e6 for p in self.paths]
            net["tunnels"] = [t]
            if self.shape == "split":
                self.add_splits(switches)
        return net

    def add_splits(self, switches):
        for sw, frm, to in (
            (topos.SPLIT_SWITCH, "h1", "h2"),
            (topos.MERGE_SWITCH, "h2", "h1"),
        ):
            dst_mac = (self.h2 if to == "h2" else self.h1).intf(to + "-eth1").MAC()
            src_mac = (self.h1 if frm == "h1" else self.h2).intf(frm + "-eth1").MAC()
            switches[sw]["splits"] = [
                {
                    "tunnel": 1,
                    "from": frm,
                    "index": 0,
                    "in_port": 1,
                    "prefix": topos.TUNNEL_ADDR[to] + "/32",
                    "paths": [
                        {
                            "name": p["name"],
                            "port": k + 1,
                            "src_mac": src_mac,
                            "dst_mac": dst_mac,
                            "src_ip": topos.path_addr(k, frm),
                            "dst_ip": topos.path_addr(k, to),
                        }
                        for k, p in enumerate(self.paths, 1)
                    ],
                }
            ]

    def start_controller(self, config, tag=None):
        import yaml

        path = os.path.join(RUNDIR, "network-%s.yaml" % config)
        with open(path, "w") as f:
            yaml.safe_dump(self.network(config), f, sort_keys=False)
        log = open(os.path.join(RUNDIR, "controller-%s.log" % (tag or config)), "w")
        sock = self.ctl_socket
        cmd = [self.plait, "controller", "--network", path, "--listen", sock]
        cmd += ["--metrics", "127.0.0.1:%d" % nodes.free_port()]
        cmd += ["--trace", os.path.join(RUNDIR, "trace-%s.tsv" % (tag or config))]
        if self.sc["traffic"]["cc"] in ("cubic", "bbr"):
            cmd += ["--cc", self.sc["traffic"]["cc"]]
        self.ctl = subprocess.Popen(
            cmd, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
        )
        self.ctl_name = log.name
        log.close()
        self.record()
        time.sleep(0.3)
        if self.ctl.poll() is not None:
            with open(self.ctl_name) as f:
                tail = f.read().strip().splitlines()[-3:]
            raise LabError(
                "plait controller exited at once (%s): %s"
                % (self.ctl.returncode, " | ".join(tail))
            )

    def stop_controller(self):
        if self.ctl is not None:
            nodes.stop_process(self.ctl)
            self.ctl = None

    def wait_reachable(self, config, timeout=15):
        """Waits until the configuration's addresses answer ping from h1."""
        if config == "ideal":
            addrs = [topos.path_addr(0, "h2")]
        elif self.shape == "split":
            addrs = [topos.TUNNEL_ADDR["h2"]]
        elif config == "single-best":
            addrs = [topos.path_addr(self.plan["single_best"]["index"] + 1, "h2")]
        else:
            addrs = [topos.path_addr(k, "h2") for k in range(1, len(self.paths) + 1)]
            if config in ("rr", "wrr", "auto"):
                addrs.append(topos.TUNNEL_ADDR["h2"])
        deadline = time.monotonic() + timeout
        for a in addrs:
            while True:
                if "0 received" not in self.h1.cmd("ping -c1 -W1 %s" % a):
                    break
                if self.ctl is not None and self.ctl.poll() is not None:
                    raise LabError(
                        "plait controller exited (%s); see %s"
                        % (self.ctl.returncode, self.ctl_name)
                    )
                if time.monotonic() > deadline:
                    raise LabError(
                        "%s: %s does not answer from h1 after %ds: the controller did not "
                        "program forwarding (see %s)"
                        % (config, a, timeout, self.ctl_name)
                    )


def load_plan(path):
    with open(path) as f:
        return json.load(f)


def main(argv=None):
    ap = argparse.ArgumentParser(prog="lab.py", description=__doc__.split("\n\n")[0])
    ap.add_argument("command", choices=["run", "up", "clean"])
    ap.add_argument("--plan", help="the plan written by plait lab")
    args = ap.parse_args(argv)

    stopping = []

    def interrupted(signum, frame):
        # Once: a second signal must not cut the clean-up short.
        if not stopping:
            stopping.append(signum)
            raise KeyboardInterrupt

    signals = [signal.SIGTERM, signal.SIGHUP]
    if args.command != "up":  # Mininet's CLI handles Ctrl-C itself
        signals.append(signal.SIGINT)
    for sig in signals:
        signal.signal(sig, interrupted)
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    lab = None
    try:
        if args.command == "clean":
            if os.geteuid() != 0:
                raise LabError("cleaning a lab needs root")
            os.makedirs(RUNDIR, exist_ok=True)
            clean_state()
            return 0
        if not args.plan:
            raise LabError("--plan is missing")
        plan = load_plan(args.plan)
        check_prerequisites(plan)
        lab = Lab(plan)
        lab.start()
        if args.command == "up":
            return up(lab)
        return runner.run_all(lab, say)
    except (LabError, RuntimeError) as e:
        print("lab: %s" % e, file=sys.stderr, flush=True)
        return 1
    except KeyboardInterrupt:
        print("\nlab: interrupted; cleaning up", file=sys.stderr, flush=True)
        return 130
    finally:
        if lab is not None:
            stopping.append(0)
            signal.signal(signal.SIGINT, signal.SIG_IGN)
            if lab.owner:
                lab.stop()
                say("== lab stopped and cleaned up")


def up(lab):
    from mininet.cli import CLI
    from mininet.log import setLogLevel

    plaits = [c for c in ("auto", "wrr", "rr") if c in lab.sc["compare"]]
    config = plaits[0] if plaits else lab.sc["compare"][0]
    lab.tunnel(bool(plaits), config)
    lab.start_controller(config)
    lab.wait_reachable(config)
    say(
        "== lab up (%s): h1 and h2, agents at %s and %s; controller socket %s/controller.sock\n"
        "   try: h1 ping -c3 10.99.0.2   |   h1 iperf3 -c 10.99.0.2 -t 5 (after h2 iperf3 -s -D)\n"
        "   operator verbs: plait --agent %s stats   |   plait --controller %s/controller.sock paths\n"
        "   exit or Ctrl-D stops the lab and cleans up"
        % (config, lab.h1.socket, lab.h2.socket, RUNDIR, lab.h1.socket, RUNDIR)
    )
    setLogLevel("output")  # the CLI prints its commands' output at this level
    CLI(lab.net)
    setLogLevel("error")
    return 0


if __name__ == "__main__":
    sys.exit(main())
