"""Drives the switch with p4runtime-shell, a third-party P4Runtime client: pushes the
P4Info and a device config, then for every table inserts an entry, reads it back,
deletes it and reads again; also a default-entry modify, a counter read and a duplicate
insert. Prints one JSON object per step for the Go test to check.

usage: p4rt_shell_client.py GRPC_ADDR P4INFO DEVICE_CONFIG
"""
import json
import sys

import p4runtime_sh.shell as sh

addr, p4info, device_config = sys.argv[1:4]


def out(**kw):
    print(json.dumps(kw), flush=True)


ENTRIES = {
    "port_fwd": ({"standard_metadata.ingress_port": "1"}, "forward", {"port": "2"}),
    "ipv4_lpm": ({"hdr.ipv4.dst_addr": "10.1.0.0/16"}, "ipv4_forward", {"dst_mac": "02:00:00:00:00:09", "port": "2"}),
    "tunnel_split": (
        {"standard_metadata.ingress_port": "1", "hdr.ipv4.dst_addr": "10.9.0.0/16"},
        "split",
        {"tunnel_id": "258", "tunnel_index": "3", "gen": "1"},
    ),
    "split_slots": ({"meta.tunnel_index": "3", "meta.gen": "1", "meta.slot": "200"}, "set_path", {"path_id": "5"}),
    "path_encap": (
        {"meta.tunnel_index": "3", "meta.path_id": "5"},
        "encap",
        {"src_mac": "02:00:00:00:00:5a", "dst_mac": "02:00:00:00:00:b5", "src_ip": "172.16.5.1", "dst_ip": "172.17.5.1", "port": "4"},
    ),
    "port_telemetry": ({"standard_metadata.egress_port": "2"}, "NoAction", {}),
}


def entry(table):
    match, action, params = ENTRIES[table]
    te = sh.TableEntry(table)(action=action)
    for k, v in match.items():
        te.match[k] = v
    for k, v in params.items():
        te.action[k] = v
    return te


def count(table):
    return sum(1 for _ in sh.TableEntry(table).read())


sh.setup(device_id=1, grpc_addr=addr, election_id=(0, 1), config=sh.FwdPipeConfig(p4info, device_config), verbose=False)
try:
    for table in ENTRIES:
        entry(table).insert()
        read = list(sh.TableEntry(table).read())
        out(step="inserted", table=table, count=len(read), action=read[0].action.action_name if read else None)
        entry(table).delete()
        out(step="deleted", table=table, count=count(table))

    te = sh.TableEntry("ipv4_lpm")(action="drop", is_default=True)
    te.modify()
    default = list(sh.TableEntry("ipv4_lpm")(is_default=True).read())
    out(step="default", table="ipv4_lpm", action=default[0].action.action_name if default else None)

    cells = list(sh.CounterEntry("port_rx_counter").read())
    out(step="counter", name="port_rx_counter", cells=len(cells))

    entry("port_fwd").insert()
    try:
        entry("port_fwd").insert()
        out(step="duplicate", error=None)
    except Exception as e:  # p4runtime-shell raises P4RuntimeWriteException
        out(step="duplicate", error=str(e))
finally:
    sh.teardown()
