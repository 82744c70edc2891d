"""Capacities computed from the links: maximum flow between endpoint sets, and bisection bandwidth.

`bisection_bandwidth_Bps` splits the hosts into the lower and the upper half (by host index, so whole
leaves and pods of a fat tree fall on each side) and returns the maximum flow the links carry from one
half to the other (the smaller of the two directions). For a fat tree built with ratio r this is
r * (hosts / 2) * link bandwidth; Zhang, Li, Tanimura, Nakada vary exactly this quantity. The flow is Dinic's algorithm on
the directed links, in plain Python: fine for thousands of links (tests, reports), not for inner loops.

Try it: `python -c "from fabriclab.fabric import fat_tree, bisection_bandwidth_Bps as b;
print(b(fat_tree(hosts=128, bisection=0.25, link_Bps=4e9)) / 4e9)"`  (prints 16.0 links).
"""

from __future__ import annotations

from collections import deque

import numpy as np

from fabriclab.fabric.topology import Topology


def max_flow_Bps(topology: Topology, sources, sinks) -> float:
    """Most bytes per second the links can carry from endpoints `sources` to endpoints `sinks`."""
    sources, sinks = set(map(int, sources)), set(map(int, sinks))
    if sources & sinks:
        raise ValueError(f"endpoints {sorted(sources & sinks)[:5]} are both sources and sinks: "
                         f"give two disjoint sets")
    n = topology.num_nodes + 2
    source, sink = n - 2, n - 1
    to: list[int] = []
    cap: list[float] = []
    adj: list[list[int]] = [[] for _ in range(n)]

    def add(u: int, v: int, c: float) -> None:
        adj[u].append(len(to))
        to.append(v)
        cap.append(c)
        adj[v].append(len(to))
        to.append(u)
        cap.append(0.0)

    for a, b, c in zip(topology.link_src.tolist(), topology.link_dst.tolist(), topology.bandwidth_Bps.tolist()):
        add(a, b, c)
    unlimited = float(topology.bandwidth_Bps.sum()) + 1.0
    for s in sorted(sources):
        add(source, s, unlimited)
    for t in sorted(sinks):
        add(t, sink, unlimited)
    eps = 1e-9 * float(topology.bandwidth_Bps.max(initial=1.0))
    flow = 0.0
    while True:
        level = _levels(adj, to, cap, source, eps)
        if level[sink] < 0:
            return flow
        pointer = [0] * n
        while (pushed := _augment(adj, to, cap, level, pointer, source, sink, eps)) > 0:
            flow += pushed


def _levels(adj, to, cap, source: int, eps: float) -> list[int]:
    level = [-1] * len(adj)
    level[source] = 0
    queue = deque([source])
    while queue:
        u = queue.popleft()
        for e in adj[u]:
            if cap[e] > eps and level[to[e]] < 0:
                level[to[e]] = level[u] + 1
                queue.append(to[e])
    return level


def _augment(adj, to, cap, level, pointer, source: int, sink: int, eps: float) -> float:
    """Push flow along one shortest augmenting path (Dinic's blocking-flow step); 0 when none is left."""
    path: list[int] = []
    u = source
    while u != sink:
        while pointer[u] < len(adj[u]):
            e = adj[u][pointer[u]]
            if cap[e] > eps and level[to[e]] == level[u] + 1:
                break
            pointer[u] += 1
        else:
            if u == source:
                return 0.0
            level[u] = -1
            u = to[path.pop() ^ 1]
            pointer[u] += 1
            continue
        path.append(e)
        u = to[e]
    pushed = min(cap[e] for e in path)
    for e in path:
        cap[e] -= pushed
        cap[e ^ 1] += pushed
    return pushed


def bisection_bandwidth_Bps(topology: Topology) -> float:
    """Max flow between the lower and the upper half of the hosts, the smaller of both directions."""
    if topology.num_hosts < 2:
        raise ValueError(f"{topology.name} has one host: bisection bandwidth needs at least two")
    g, half = topology.gpus_per_server, topology.num_hosts // 2
    lower = np.arange(half * g)
    upper = np.arange(half * g, topology.num_endpoints)
    return min(max_flow_Bps(topology, lower, upper), max_flow_Bps(topology, upper, lower))
