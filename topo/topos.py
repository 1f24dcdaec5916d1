"""Plait's two lab shapes as Mininet topologies.

Parallel (the hosts' eBPF splits; one switch per path, each emulating its path in both
directions; s0 is the ideal configuration's single link, built when it is compared)::

            10.0.1.1  h1-eth1 --1-- s1 --2-- h2-eth1  10.0.1.2
            10.0.2.1  h1-eth2 --1-- s2 --2-- h2-eth2  10.0.2.2
      h1        ...                                              h2
            10.0.N.1  h1-ethN --1-- sN --2-- h2-ethN  10.0.N.2
            10.0.0.1  h1-eth0 --1-- s0 --2-- h2-eth0  10.0.0.2   (ideal link)

      tunnel 1: h1 plait0 10.99.0.1/24  <->  h2 plait0 10.99.0.2/24, path k = 10.0.k.0/24

In-network split (the P4 slot table splits: s10 splits h1's traffic to h2 and s11 splits
h2's traffic to h1; both hosts only decapsulate)::

                                  +--1-- s1 --2--+
      h1-eth1 --1-- s10 --(k+1)---+--1-- s2 --2--+---(k+1)-- s11 --1-- h2-eth1
                                  +--1-- sN --2--+
      h1-eth0 --1-- s0 --2-- h2-eth0   (ideal link)

      h1-eth1 10.99.0.1/24, path addresses 10.0.k.1/32     (outer source of s11's paths)
      h2-eth1 10.99.0.2/24, path addresses 10.0.k.2/32     (outer source of s10's paths)
      h1-eth0 10.0.0.1/24, h2-eth0 10.0.0.2/24

Every switch port's egress emulates a link: a path's rate, delay, jitter, loss and queue
on both ports of its switch, the ideal link's on both ports of s0; the split and merge
switches' ports are not shaped. In the split shape every port of s10, s11 and the path
switches has MTU 1600, room for the split switch's encapsulation around the hosts'
1500-byte packets.
"""

from mininet.topo import Topo

TUNNEL_PREFIX = "10.99.0.0/24"
TUNNEL_ADDR = {"h1": "10.99.0.1", "h2": "10.99.0.2"}
IDEAL_SWITCH = "s0"
SPLIT_SWITCH = "s10"
MERGE_SWITCH = "s11"
# The split shape's switches carry the split switch's encapsulation (44 bytes and an
# 8-byte telemetry block) around hosts' 1500-byte packets: their ports get a larger MTU.
CORE_MTU = 1600


def path_addr(k, host):
    """Address of host (h1 or h2) on path k (1-based)."""
    return "10.0.%d.%d" % (k, 1 if host == "h1" else 2)


class ParallelTopo(Topo):
    """h1 and h2 with one interface per path, one switch per path.

    paths: list of link dicts (rate_bps, delay_ns, jitter_ns, loss, queue);
    ideal: the ideal link dict or None; host and switch: node classes; host_params and switch_params:
    their params.
    """

    def build(
        self,
        paths,
        ideal=None,
        host=None,
        switch=None,
        host_params=None,
        switch_params=None,
    ):
        host_params, switch_params = host_params or {}, switch_params or {}
        h1 = self.addHost("h1", cls=host, ip=None, **host_params)
        h2 = self.addHost("h2", cls=host, ip=None, **host_params)
        links = [(k, p) for k, p in enumerate(paths, 1)]
        if ideal is not None:
            links.append((0, ideal))
        for k, link in links:
            s = self.addSwitch(
                "s%d" % k, cls=switch, links={1: link, 2: link}, **switch_params
            )
            self.addLink(
                h1,
                s,
                port1=k,
                port2=1,
                intfName1="h1-eth%d" % k,
                params1={"ip": path_addr(k, "h1") + "/24"},
            )
            self.addLink(
                h2,
                s,
                port1=k,
                port2=2,
                intfName1="h2-eth%d" % k,
                params1={"ip": path_addr(k, "h2") + "/24"},
            )


class SplitTopo(Topo):
    """h1 — split switch — one switch per path — merge switch — h2 (see the module doc)."""

    def build(
        self,
        paths,
        ideal=None,
        host=None,
        switch=None,
        host_params=None,
        switch_params=None,
    ):
        host_params, switch_params = host_params or {}, switch_params or {}
        h1 = self.addHost("h1", cls=host, ip=None, **host_params)
        h2 = self.addHost("h2", cls=host, ip=None, **host_params)
        core = dict(switch_params, mtu=CORE_MTU)
        split = self.addSwitch(SPLIT_SWITCH, cls=switch, **core)
        merge = self.addSwitch(MERGE_SWITCH, cls=switch, **core)
        self.addLink(
            h1,
            split,
            port1=1,
            port2=1,
            intfName1="h1-eth1",
            params1={"ip": TUNNEL_ADDR["h1"] + "/24"},
        )
        self.addLink(
            h2,
            merge,
            port1=1,
            port2=1,
            intfName1="h2-eth1",
            params1={"ip": TUNNEL_ADDR["h2"] + "/24"},
        )
        for k, link in enumerate(paths, 1):
            s = self.addSwitch("s%d" % k, cls=switch, links={1: link, 2: link}, **core)
            self.addLink(split, s, port1=k + 1, port2=1)
            self.addLink(s, merge, port1=2, port2=k + 1)
        if ideal is not None:
            s = self.addSwitch(
                IDEAL_SWITCH, cls=switch, links={1: ideal, 2: ideal}, **switch_params
            )
            self.addLink(
                h1,
                s,
                port1=0,
                port2=1,
                intfName1="h1-eth0",
                params1={"ip": path_addr(0, "h1") + "/24"},
            )
            self.addLink(
                h2,
                s,
                port1=0,
                port2=2,
                intfName1="h2-eth0",
                params1={"ip": path_addr(0, "h2") + "/24"},
            )


def forwarding(shape, npaths, ideal):
    """Returns {switch: {in port: out port}}: the port_fwd entries every configuration
    needs (the split and merge switches' extra state comes from the configuration)."""
    fwd = {"s%d" % k: {1: 2, 2: 1} for k in range(1, npaths + 1)}
    if ideal:
        fwd[IDEAL_SWITCH] = {1: 2, 2: 1}
    if shape == "split":
        # Plain packets (ARP, the reverse of single-best) take path 1.
        fwd[SPLIT_SWITCH] = {1: 2, 2: 1}
        fwd[MERGE_SWITCH] = {1: 2, 2: 1}
        for k in range(2, npaths + 1):
            fwd[SPLIT_SWITCH][k + 1] = 1
            fwd[MERGE_SWITCH][k + 1] = 1
    return fwd
