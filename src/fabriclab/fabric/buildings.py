"""The third tier: a cluster spread over buildings (sites), each with its own leaves and spines.

The announced clusters of 2026-2028 hold 100,000 to 1,000,000 GPUs across buildings. Here servers fill
buildings of `network.servers_per_building` in order; each building is the two-tier network of
`fabric/rail.py`, and the buildings meet on a third tier: each building has `building_bandwidth_Bps` to
it per direction (0: as much as its NICs) and crossing it adds `building_latency_s` (fibre: ~5 us per km).

A collective's link time on such a cluster is taken as the slower of its two parts (`nccl/links.py`):

* inside: the same algorithm on one full building alone, flow-simulated as any cluster (`nccl/links.py`);
  buildings are alike, so one stands for all, and the time no longer grows with the buildings;
* across: the bytes each building sends over the third tier, counted exactly from the algorithm's pattern
  (below), over its bandwidth; the busiest building sets the time.

Taking the slower of the two assumes the flows that cross the third tier are not also what limits a
building's own links (a building's bottleneck and the third tier's are different links): a model of the
scale-out, not a simulation of every flow across it. Counting, per unit of the link time's bytes:

* ring (NCCL's channels each a ring over the servers in order): every channel's ring leaves each building
  once, so a building sends one unit per bus byte, whatever the channels;
* double binary tree: NCCL's two binary trees between the servers (`ncclGetDtree`), each edge both ways;
  the edges whose ends are in two buildings, over the channels (a btree's edges span powers of two, so few
  cross: it is the heap-ordered stand-in inside a building, `nccl/links.py`, that would cross at every node);
* all-to-all: every GPU sends 1/n of its bytes to each of the n - 1 others: a building of g GPUs sends
  g (n - g) / n;
* sendrecv: rank r to r + 1: one unit leaves each building.

Latency: a ring pass crosses the tier once per building (an all-reduce twice per building), a tree
2 ceil(log2 buildings) times (up and down its top levels), point-to-point once.

Try it: `fabriclab simulate collective --cluster dgx-h100-campus --gpus 1000000 --sizes 1MB,1GB`.
"""

from __future__ import annotations

import math

import numpy as np


def building_servers(network, num_servers: int) -> int:
    """Servers of the largest building a run of `num_servers` servers uses (all of them: one building)."""
    spb = network.servers_per_building
    return num_servers if spb <= 0 else min(spb, num_servers)


def num_buildings(network, num_servers: int) -> int:
    """Buildings a run of `num_servers` servers spans."""
    spb = network.servers_per_building
    return 1 if spb <= 0 else -(-num_servers // spb)


def _servers_of_each(network, num_servers: int) -> np.ndarray:
    b = num_buildings(network, num_servers)
    out = np.full(b, network.servers_per_building if b > 1 else num_servers, dtype=np.int64)
    out[-1] = num_servers - (b - 1) * out[0]
    return out


def dtree_parents(n: int) -> tuple[np.ndarray, np.ndarray]:
    """NCCL's two binary trees over n nodes (`collectives/trees.py` `dtree_parents`, in numpy): parent of
    each node, -1 at a root."""
    r = np.arange(n, dtype=np.int64)
    bit = r & -r
    up = (r ^ bit) | (bit << 1)
    first = np.where(up < n, up, r ^ bit)
    first[0] = -1
    if n % 2:
        src = first[(r - 1) % n]
        second = np.where(src < 0, -1, (src + 1) % n)
    else:
        src = first[n - 1 - r]
        second = np.where(src < 0, -1, n - 1 - src)
    return first, second


def _tree_units(num_servers: int, spb: int, num_channels: int, num_buildings: int) -> np.ndarray:
    """Per building, the tree flows (of 1 / channels each) that leave it, over all channels: channel c runs
    NCCL's tree c % 2 between the servers, each edge both ways."""
    out = np.zeros(num_buildings)
    for which, parents in enumerate(dtree_parents(num_servers)):
        child = np.flatnonzero(parents >= 0)
        bc, bp = child // spb, parents[child] // spb
        cross = bc != bp
        per = np.bincount(bc[cross], minlength=num_buildings) + np.bincount(bp[cross], minlength=num_buildings)
        out += per * ((num_channels + 1 - which) // 2)
    return out / num_channels


def tier_seconds_per_unit(network, num_servers: int, gpus_per_server: int, building_nic_Bps: float,
                          algorithm: str, collective: str, num_channels: int) -> float:
    """Seconds per unit (module doc) the busiest building's traffic takes over the third tier: 0 on one
    building. `building_nic_Bps`: one server's NICs together, the tier's bandwidth per server when the
    network gives none."""
    b = num_buildings(network, num_servers)
    if b <= 1:
        return 0.0
    servers = _servers_of_each(network, num_servers)
    gpus = servers * gpus_per_server
    n = num_servers * gpus_per_server
    if algorithm == "ring" or collective == "sendrecv":
        units = np.ones(b)
    elif algorithm == "tree":
        units = _tree_units(num_servers, network.servers_per_building, num_channels, b)
    else:  # all-to-all
        units = gpus * (n - gpus) / n
    bandwidth = network.building_bandwidth_Bps or 0.0
    rate = np.full(b, bandwidth) if bandwidth > 0 else servers * building_nic_Bps
    return float((units / rate).max())


def tier_latency_s(network, num_servers: int, algorithm: str, collective: str) -> float:
    """Latency the third tier adds to one collective (module doc)."""
    b = num_buildings(network, num_servers)
    if b <= 1 or network.building_latency_s <= 0:
        return 0.0
    if algorithm == "ring":
        crossings = 2 * b if collective == "allreduce" else b
    elif algorithm == "tree":
        crossings = 2 * math.ceil(math.log2(b))
    else:
        crossings = 1
    return crossings * network.building_latency_s
