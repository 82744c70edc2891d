"""What SimAI's packet simulator did, from its flow log `out/fct.txt`: flows, their sizes, ports, concurrency.

One line per finished flow (ns-3 `qp_finish` in SimAI's network_frontend/ns3/entry.h):

    src_ip dst_ip sport dport size_bytes start_ns fct_ns standalone_fct_ns

IPs in hex, `0b00NNNN01`: the node id is `int(ip[2:6], 16)` (GPUs are nodes 0..G-1, server = id // 8).
MockNccl gives every flow of a connection (src, dst) the next source port (`portNumber[src][dst]++`), so
ns-3's per-flow ECMP hashes each flow anew; the statistics here say how many ports a connection used and
how many flows a NIC had in flight, the two things that decide how evenly ECMP spreads.

Ports, concurrency and slowdown are taken over the flows that cross leaves (the ones the spines route: between
servers whose NICs are on different leaves; on a rail fabric a server's GPUs sit on different leaves, but
their flows take the shorter way over the server's NVSwitch):
`ports_per_connection` counts the distinct source ports of each (src, dst) pair; `in_flight_per_nic` is, per
sending GPU, its flows' summed duration over the time at least one is in flight, averaged over the GPUs
that send any (`_max`: the most at one instant on any of them); `in_flight_per_connection` the same per pair;
`slowdown` a flow's time over its standalone time (ns-3's own estimate of it alone on the path).

Try it: `python -c "from fabriclab.bench.simai.fct import flow_stats, read_flows; import sys;
print(flow_stats(read_flows(open(sys.argv[1])), leaf=lambda g: g // 16))" out/fct.txt`.
"""

from __future__ import annotations

import statistics
from array import array
from collections import defaultdict
from dataclasses import dataclass
from typing import Callable, Iterable

GPUS_PER_SERVER = 8


@dataclass(frozen=True, kw_only=True)
class Flows:
    """The flow log's columns, one entry per flow."""

    src: array
    dst: array
    sport: array
    size_bytes: array
    start_ns: array
    fct_ns: array
    standalone_ns: array

    def __len__(self) -> int:
        return len(self.src)


def node_id(ip_hex: str) -> int:
    """The node of an IP as SimAI writes it (`0b000301` -> 3)."""
    return int(ip_hex[2:6], 16)


def read_flows(lines: Iterable[str]) -> Flows:
    """The flows of an fct.txt (its lines); a ValueError names a line that is not a flow."""
    cols = {name: array("q") for name in ("src", "dst", "sport", "size_bytes", "start_ns", "fct_ns", "standalone_ns")}
    for number, line in enumerate(lines, 1):
        parts = line.split()
        if not parts:
            continue
        try:
            if len(parts) != 8:
                raise ValueError
            values = (node_id(parts[0]), node_id(parts[1]), int(parts[2]), int(parts[4]), int(parts[5]),
                      int(parts[6]), int(parts[7]))
        except ValueError:
            raise ValueError(f"fct.txt line {number}: {line.strip()[:80]!r} is not `src_ip dst_ip sport dport "
                             f"bytes start_ns fct_ns standalone_ns`") from None
        for column, value in zip(cols.values(), values):
            column.append(value)
    return Flows(**cols)


def flow_stats(flows: Flows, *, leaf: Callable[[int], int]) -> dict:
    """The flows in a few numbers (module docstring); `leaf`: GPU -> the leaf its NIC is on."""
    n = len(flows)
    if n == 0:
        return {"flows": 0}
    ports: dict[tuple[int, int], set[int]] = defaultdict(set)  # cross-leaf connection -> its source ports
    by_nic: dict[int, list[tuple[int, int]]] = defaultdict(list)  # sender -> (start, end) of cross-leaf flows
    by_connection: dict[tuple[int, int], list[tuple[int, int]]] = defaultdict(list)
    cross_server, slowdown = 0, []
    for i in range(n):
        src, dst = flows.src[i], flows.dst[i]
        between_servers = src // GPUS_PER_SERVER != dst // GPUS_PER_SERVER
        cross_server += between_servers
        if between_servers and leaf(src) != leaf(dst):  # a server's own GPUs talk over its NVSwitch
            span = (flows.start_ns[i], flows.start_ns[i] + flows.fct_ns[i])
            ports[(src, dst)].add(flows.sport[i])
            by_nic[src].append(span)
            by_connection[(src, dst)].append(span)
            if flows.standalone_ns[i] > 0:
                slowdown.append(flows.fct_ns[i] / flows.standalone_ns[i])
    counts = [len(p) for p in ports.values()]
    nic = [_in_flight(spans) for spans in by_nic.values()]
    return {"flows": n, "bytes_min": min(flows.size_bytes), "bytes_median": statistics.median(flows.size_bytes),
            "bytes_max": max(flows.size_bytes), "connections": len({*zip(flows.src, flows.dst)}),
            "cross_server_flows": cross_server, "cross_leaf_flows": sum(map(len, by_nic.values())),
            "cross_leaf_connections": len(ports),
            "ports_per_connection_mean": statistics.fmean(counts) if counts else None,
            "ports_per_connection_max": max(counts, default=None),
            "in_flight_per_nic_mean": statistics.fmean(m for m, _ in nic) if nic else None,
            "in_flight_per_nic_max": max((top for _, top in nic), default=None),
            "in_flight_per_connection_mean": statistics.fmean(_in_flight(s)[0] for s in by_connection.values())
            if by_connection else None,
            "slowdown_mean": statistics.fmean(slowdown) if slowdown else None,
            "span_ns": max(flows.start_ns[i] + flows.fct_ns[i] for i in range(n)) - min(flows.start_ns)}


def _in_flight(spans: list[tuple[int, int]]) -> tuple[float, int]:
    """(mean flows in flight while any is, the most at once) of one sender's (start, end) spans."""
    events = sorted([(s, 1) for s, _ in spans] + [(e, -1) for _, e in spans])  # an end before a start at a tie
    busy = flow_time = 0
    count = top = 0
    last = events[0][0]
    for t, step in events:
        if count:
            busy += t - last
            flow_time += count * (t - last)
        count += step
        top = max(top, count)
        last = t
    return (flow_time / busy if busy else float(len(spans))), top
