"""Mininet node kinds of Plait's labs.

PlaitHost is a host whose agent (``plait agent``) starts with it and stops with it.
EmbeddedSwitch runs ``plait switch`` on its interfaces and emulates the link on every
egress port; BMv2Switch runs ``simple_switch_grpc`` and puts a link element (``plait
switch --passthrough``, the same link code) in series with its shaped ports, so BMv2
labs need no netem. Both switch kinds live in the root namespace, like Mininet's own OVS
switches, so that the controller reaches every switch's gRPC address on 127.0.0.1; their
interfaces carry only the lab's own traffic. Tables start empty: ``plait controller``
programs the switches.

Every lab interface gets checksum and segmentation offloads off: the switches are
userspace programs that need wire-sized frames with complete checksums.
"""

import os
import shutil
import signal
import socket
import subprocess
import time

from mininet.node import Host, Switch

# The embedded switch's links send what fell due once per tick, as an LTE cell per 1 ms
# TTI (see EmbeddedSwitch.start).
TICK = "1ms"
OFFLOADS = ["tx", "off", "rx", "off", "tso", "off", "gso", "off", "gro", "off"]


def free_port():
    """Returns a TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for(check, timeout, what):
    """Polls check() until it is true; raises RuntimeError naming what after timeout."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return
        time.sleep(0.05)
    raise RuntimeError("timed out after %.0fs waiting for %s" % (timeout, what))


def stop_process(proc, timeout=5.0):
    """Stops a Popen with SIGTERM, then SIGKILL; returns its exit code."""
    if proc is None or proc.poll() is not None:
        return None if proc is None else proc.returncode
    proc.send_signal(signal.SIGTERM)
    try:
        return proc.wait(timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        return proc.wait()


def log_tail(path, n=5):
    """The last n lines of a log file, joined for an error message."""
    try:
        with open(path) as f:
            return " | ".join(l.strip() for l in f.read().strip().splitlines()[-n:])
    except OSError:
        return "(no log)"


def netns_inode(pid):
    """Returns the inode of process pid's network namespace (the agent's pin key)."""
    return os.stat("/proc/%d/ns/net" % pid).st_ino


def directed(link, toward_h2):
    """Returns a path's link dict for the port that sends towards h2 (the flow's
    direction) or towards h1: its trace, when it has one, is that direction's."""
    out = dict(link)
    tr = link.get("trace_down" if toward_h2 else "trace_up")
    if tr:
        out["trace"] = tr
    return out


def link_fields(link, trace=True):
    """Returns a link dict's parameters (rate_bps, delay_ns, ..., ge, and the trace
    directed() gave it) as plait's link keys and values; with trace false, without the
    trace (a change that leaves it running). Every field is given, so that a change sets
    back what an earlier one changed."""
    f = [("rate", "%dbit" % round(link["rate_bps"]))]
    f.append(("delay", "%dus" % (link.get("delay_ns", 0) // 1000)))
    f.append(("jitter", "%dus" % (link.get("jitter_ns", 0) // 1000)))
    f.append(("loss", "%g" % (100 * link.get("loss", 0))))
    if link.get("ge"):
        f.append(("ge", "/".join("%.9g" % v for v in link["ge"])))
    f.append(("queue", "%d" % link["queue"]))
    if trace and link.get("trace"):
        f.append(("trace", link["trace"]))
        f.append(("trace_offset", "%dus" % (link.get("trace_offset_ns", 0) // 1000)))
    return f


def link_spec(link):
    """Returns plait switch's --link spec for a link dict (see link_fields)."""
    return ",".join("%s=%s" % kv for kv in link_fields(link))


class PlaitHost(Host):
    """A host with a Plait agent.

    params: plait (the binary), rundir (sockets and logs), cc (congestion control).
    The agent serves on rundir/<name>.sock and pins its maps under
    /sys/fs/bpf/plait/netns-<inode>, which terminate() removes.
    """

    def __init__(
        self,
        name,
        plait="plait",
        rundir="/run/plait/lab",
        cc="cubic",
        tcp=None,
        **params
    ):
        self.plait = plait
        self.rundir = rundir
        self.cc = cc
        self.tcp = tcp or {}  # net.ipv4.tcp_<knob>: value, the scenario's traffic.tcp
        self.agent = None
        self.ino = None
        super().__init__(name, **params)

    @property
    def socket(self):
        return os.path.join(self.rundir, self.name + ".sock")

    def config(self, **params):
        r = super().config(**params)
        self.ino = netns_inode(self.pid)
        for key, value in [
            ("net.ipv6.conf.all.disable_ipv6", "1"),
            ("net.ipv6.conf.default.disable_ipv6", "1"),
            ("net.ipv4.tcp_congestion_control", self.cc),
            ("net.ipv4.tcp_no_metrics_save", "1"),
            ("net.mptcp.enabled", "1"),
            ("net.ipv4.conf.all.rp_filter", "0"),
            ("net.ipv4.conf.default.rp_filter", "0"),
        ] + [("net.ipv4.tcp_" + k, str(v)) for k, v in sorted(self.tcp.items())]:
            out = self.cmd("sysctl -q -w %s=%s 2>&1" % (key, value)).strip()
            if out:
                raise RuntimeError(
                    "%s: sysctl %s=%s: %s" % (self.name, key, value, out)
                )
        for intf in self.intfNames():
            if intf != "lo":
                self.cmd(
                    "ethtool -K %s %s >/dev/null 2>&1" % (intf, " ".join(OFFLOADS))
                )
        self.start_agent()
        return r

    def start_agent(self):
        if os.path.exists(self.socket):
            os.unlink(self.socket)
        log = open(os.path.join(self.rundir, self.name + "-agent.log"), "w")
        self.agent = self.popen(
            [self.plait, "agent", "--socket", self.socket],
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        log.close()

        def up():
            if self.agent.poll() is not None:
                raise RuntimeError(
                    "%s: plait agent exited with %s: %s"
                    % (self.name, self.agent.returncode, log_tail(log.name))
                )
            return os.path.exists(self.socket)

        wait_for(up, 15, "%s's agent socket %s" % (self.name, self.socket))

    def plaitcmd(self, *args, check=True):
        """Runs a plait operator verb against this host's agent; returns stdout."""
        p = subprocess.run(
            [self.plait, "--agent", self.socket] + list(args),
            capture_output=True,
            text=True,
            timeout=30,
        )
        if check and p.returncode != 0:
            raise RuntimeError(
                "%s: plait %s: %s" % (self.name, " ".join(args), p.stderr.strip())
            )
        return p.stdout

    def terminate(self):
        stop_process(self.agent)
        self.agent = None
        if self.ino is not None:
            for d in (
                "/sys/fs/bpf/plait/netns-%d" % self.ino,
                "/run/plait/netns-%d" % self.ino,
            ):
                shutil.rmtree(d, ignore_errors=True)
        if os.path.exists(self.socket):
            os.unlink(self.socket)
        super().terminate()


class P4Switch(Switch):
    """What both switch kinds share: a gRPC address, the ports' links, offloads off.

    params: links ({port: link dict} emulated on that port's egress), grpc_port,
    rundir, plait, mtu (of every port, for encapsulated frames in the split shape).
    """

    kind = "p4"

    def __init__(
        self,
        name,
        links=None,
        grpc_port=None,
        rundir="/run/plait/lab",
        plait="plait",
        mtu=None,
        **params
    ):
        params.setdefault("inNamespace", False)
        self.mtu = mtu
        # Port 2 faces h2 (the flow's direction), port 1 h1.
        self.links = {p: directed(l, p == 2) for p, l in (links or {}).items()}
        self.grpc_port = grpc_port or free_port()
        self.rundir = rundir
        self.plait = plait
        self.proc = None
        super().__init__(name, **params)

    @property
    def address(self):
        return "127.0.0.1:%d" % self.grpc_port

    def data_ports(self):
        """Returns {port number: interface name} of the data ports."""
        return {p: i.name for i, p in self.ports.items() if i.name != "lo"}

    def prepare_intfs(self):
        for _, ifname in sorted(self.data_ports().items()):
            self.prepare_intf(ifname)

    def prepare_intf(self, ifname):
        """Offloads and IPv6 off, the switch's MTU, up."""
        subprocess.run(["ethtool", "-K", ifname] + OFFLOADS, capture_output=True)
        try:
            with open("/proc/sys/net/ipv6/conf/%s/disable_ipv6" % ifname, "w") as f:
                f.write("1")
        except OSError:
            pass
        if self.mtu:
            subprocess.run(
                ["ip", "link", "set", ifname, "mtu", str(self.mtu)],
                capture_output=True,
            )
        subprocess.run(["ip", "link", "set", ifname, "up"], capture_output=True)

    def log_path(self):
        return os.path.join(self.rundir, self.name + ".log")

    def wait_listening(self, timeout=15):
        wait_serving(
            self.name, self.kind, self.proc, self.grpc_port, self.log_path(), timeout
        )

    @property
    def link_address(self):
        """The gRPC address of the switch's link emulation ('plait link show/set'), None
        when it emulates no link."""
        return self.address

    def link_port(self, port):
        """Returns (gRPC address, port number) where 'plait link set' changes the link
        emulated on this switch's egress port."""
        return self.link_address, port

    def stop(self, deleteIntfs=True):
        stop_process(self.proc)
        self.proc = None
        super().stop(deleteIntfs)

    def terminate(self):
        stop_process(self.proc)
        self.proc = None
        super().terminate()


def wait_serving(name, kind, proc, grpc_port, log, timeout):
    """Waits until proc serves on 127.0.0.1:grpc_port; raises with its log if it exits."""

    def up():
        if proc.poll() is not None:
            raise RuntimeError(
                "%s: %s exited with %s: %s"
                % (name, kind, proc.returncode, log_tail(log))
            )
        with socket.socket() as s:
            return s.connect_ex(("127.0.0.1", grpc_port)) == 0

    wait_for(up, timeout, "%s's %s on 127.0.0.1:%d" % (name, kind, grpc_port))


def start_plait_switch(plait, name, address, ports, links, log, extra=()):
    """Starts 'plait switch' on ports ({number: interface}) with links ({number: link
    dict}) emulated on those ports' egress; returns the Popen."""
    # A lab runs a switch per path on a machine that may have two CPUs: waking per
    # packet, or a Go scheduler per switch spinning on several CPUs, leaves links
    # waiting for a CPU, and the wait reorders them against each other by tens of
    # milliseconds, more than the reordering the paths are there to create.
    cmd = [plait, "switch", "--name", name, "--grpc", address, "--tick", TICK]
    for port, ifname in sorted(ports.items()):
        cmd += ["--port", "%d=%s" % (port, ifname)]
        if port in links:
            cmd += ["--link", "%d:%s" % (port, link_spec(links[port]))]
    cmd += list(extra)
    with open(log, "w") as out:
        return subprocess.Popen(
            cmd,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            env=dict(os.environ, GOMAXPROCS="1"),
        )


class EmbeddedSwitch(P4Switch):
    """Plait's embedded P4 switch: plait.p4 in Go, P4Runtime, link emulation per port."""

    kind = "plait switch"

    def start(self, controllers):
        self.prepare_intfs()
        self.proc = start_plait_switch(
            self.plait,
            self.name,
            self.address,
            self.data_ports(),
            self.links,
            self.log_path(),
        )
        self.wait_listening()


def bmv2_available():
    """Returns (True, '') when BMv2 can run a lab here, else (False, why not)."""
    if not shutil.which("simple_switch_grpc"):
        return (
            False,
            "simple_switch_grpc is not installed (BMv2 is not packaged for Debian 12)",
        )
    return True, ""


def bmv2_options(name, rundir):
    """simple_switch_grpc options that let one instance run beside the lab's others: a
    nanomsg notifications socket (the default, /tmp/bmv2-<device id>-notifications.ipc,
    makes a second instance with the same device id exit) and a Thrift port of its own
    (9090 by default), each only where this build has it (--help lists it; a build
    without refuses the option)."""
    help_text = subprocess.run(
        ["simple_switch_grpc", "--help"], capture_output=True, text=True
    ).stdout
    opts = []
    if "--notifications-addr" in help_text:
        opts += [
            "--notifications-addr",
            "ipc://" + os.path.join(rundir, name + "-notifications.ipc"),
        ]
    if "--thrift-port" in help_text:
        opts += ["--thrift-port", str(free_port())]
    return opts


class BMv2Switch(P4Switch):
    """BMv2 simple_switch_grpc running plait.p4 (pushed by the controller), with Plait's
    link element in series with every shaped port, since BMv2 has no link emulation::

        neighbour --- sX-ethP  [element: 2k-1 <-> 2k]  sX-pP-e ~veth~ sX-pP-b --- BMv2 port P

    The element (``plait switch --passthrough``, one per switch, k counting the shaped
    ports) emulates port P's link on what leaves towards the neighbour, with the embedded
    switch's link code and tick; BMv2 sees an unshaped veth. link_port(P) says where the
    link is changed at run time.

    params: device_id (P4Runtime device id), cpu_port (plait.p4's CPU_PORT).
    """

    kind = "simple_switch_grpc"

    def __init__(self, name, device_id=1, cpu_port=255, **params):
        self.device_id = device_id
        self.cpu_port = cpu_port
        self.element = None
        self.element_grpc_port = None
        self.veths = []  # element-side ends, deleted with the element
        super().__init__(name, **params)

    @property
    def link_address(self):
        if self.element is None:
            return None
        return "127.0.0.1:%d" % self.element_grpc_port

    def element_log_path(self):
        return os.path.join(self.rundir, self.name + "-links.log")

    def series(self):
        """Returns [(BMv2 port, neighbour-side interface, element-side veth, BMv2-side
        veth, element port on the neighbour's side)] for the shaped ports."""
        out = []
        for port, ifname in sorted(self.data_ports().items()):
            if port in self.links:
                k = len(out) + 1
                pre = "%s-p%d" % (self.name, port)
                out.append((port, ifname, pre + "-e", pre + "-b", 2 * k - 1))
        return out

    def link_port(self, port):
        for p, _, _, _, eport in self.series():
            if p == port:
                return self.link_address, eport
        raise KeyError("%s: port %d has no emulated link" % (self.name, port))

    def add_veth(self, a, b):
        subprocess.run(["ip", "link", "del", a], capture_output=True)  # a killed lab's
        r = subprocess.run(
            ["ip", "link", "add", a, "type", "veth", "peer", "name", b],
            capture_output=True,
            text=True,
        )
        if r.returncode:
            raise RuntimeError(
                "%s: veth %s-%s: %s" % (self.name, a, b, r.stderr.strip())
            )
        self.veths.append(a)
        self.prepare_intf(a)
        self.prepare_intf(b)

    def start(self, controllers):
        self.prepare_intfs()
        bmv2_ports = self.data_ports()
        series = self.series()
        if series:
            eports, elinks, extra = {}, {}, []
            for port, ifname, e, b, k in series:
                self.add_veth(e, b)
                bmv2_ports[port] = b
                eports[k], eports[k + 1] = ifname, e
                elinks[k] = self.links[port]
                extra += ["--passthrough", "%d:%d" % (k, k + 1)]
            self.element_grpc_port = free_port()
            self.element = start_plait_switch(
                self.plait,
                self.name + "-links",
                "127.0.0.1:%d" % self.element_grpc_port,
                eports,
                elinks,
                self.element_log_path(),
                extra,
            )
            wait_serving(
                self.name,
                "link element",
                self.element,
                self.element_grpc_port,
                self.element_log_path(),
                15,
            )
        cmd = ["simple_switch_grpc", "--device-id", str(self.device_id), "--no-p4"]
        cmd += bmv2_options(self.name, self.rundir)
        for port, ifname in sorted(bmv2_ports.items()):
            cmd += ["-i", "%d@%s" % (port, ifname)]
        cmd += [
            "--",
            "--grpc-server-addr",
            self.address,
            "--cpu-port",
            str(self.cpu_port),
        ]
        log = open(self.log_path(), "w")
        self.proc = subprocess.Popen(
            cmd, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
        )
        log.close()
        self.wait_listening(30)

    def stop_element(self):
        stop_process(self.element)
        self.element = None
        for e in self.veths:
            subprocess.run(["ip", "link", "del", e], capture_output=True)
        self.veths = []

    def stop(self, deleteIntfs=True):
        self.stop_element()
        super().stop(deleteIntfs)

    def terminate(self):
        self.stop_element()
        super().terminate()
