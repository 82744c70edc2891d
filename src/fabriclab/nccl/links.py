"""Link time per byte of NCCL's rings, trees and point-to-point patterns on a cluster's real topology.

Every channel's ring (NCCL rotates the order inside a server per channel, so channels leave through
different NICs) or double binary tree (a chain inside each server) sends its share of the bus bytes, all at
once, as the pipelined algorithm does in steady state (`fabric/rail.py`'s topology); the makespan per byte
is the link time `nccl/predict.py` builds its costs on. On one server or a non-blocking rail fabric it
equals the closed form (bus bytes / min(NVLink, NICs x rate x efficiency)); on an oversubscribed plain fat
tree it is what the spines allow. Algorithm `p2p` is NCCL's point-to-point:

* `alltoall`: every rank sends size / n to every other rank, all at once. Since NCCL 2.12 (PXN) data for
  another server goes over NVLink to the GPU on the destination's rail and leaves through that GPU's NIC,
  so on a rail-optimised fabric it stays on one rail; on a plain fat tree it crosses the spines, and an
  oversubscribed network slows it where a ring is not.
* `sendrecv`: rank r sends its whole buffer to (r + 1) % n and receives from (r - 1) % n
  (nccl-tests' sendrecv_perf).

Two engines give the same answer (tests hold them to 1e-9): `general` builds every transfer as a task of
`sim/engine.py` (the oracle); `auto` solves them in classes (`sim/batch.py`). Rings, trees and sendrecv are
listed transfer by transfer (identical ones merged) and folded by their symmetry (`sim/refine.py`: colour
refinement finds the flows and links that see the same; no topology or pattern is assumed, and a fold that
fails its check is not used); all-to-all across servers is classed by the servers' symmetry without listing
its n(n-1) transfers (`sim/pairwise.py`, which holds for every topology `fabric/rail.py` builds; inside one
server it is listed and folded like a ring). Classes depend only on the shape (servers, fabric, leaves,
spines), not on the rates, so a sweep that moves rates (`nccl/band.py`) re-solves them without rebuilding.
A size sweep of 100,000 GPUs of dgx-h100 takes about 20 s and 450 MB (`fabriclab bench sim --scale`).

What stays expensive is many distinct rates: every transfer's end re-solves max-min, and each solve raises
one level per distinct rate. A double binary tree on a plain fat tree whose leaves split servers (20-port
leaves, 8 NICs a server) with a spine count that divides neither gives hundreds of each: 8,192 GPUs at
bisection 1/3 take about a minute per link time here (464 ends, up to 459 levels), in either engine.

Try it: `python -c "from fabriclab.fabric.presets import cluster_preset as c;
from fabriclab.nccl.links import link_seconds_per_byte as l; print(l(c('dgx-h100'), 100000, 'p2p', 'alltoall'))"`.
"""

from __future__ import annotations

import math
import zlib
from dataclasses import dataclass, replace
from functools import lru_cache

import numpy as np

from fabriclab.collectives.schedule import bus_bandwidth_factor
from fabriclab.fabric.buildings import building_servers, tier_seconds_per_unit
from fabriclab.fabric.cluster import ClusterModel, NetworkSpec
from fabriclab.fabric.links import Link
from fabriclab.fabric.rail import gpu_cluster_topology
from fabriclab.nccl.layout import Layout, layout
from fabriclab.nccl.congestion import TRANSPORTS, Overload
from fabriclab.nccl.routing import route_effects
from fabriclab.sim.batch import FlowBatch, explicit_batch, finish_times
from fabriclab.sim.engine import TaskGraph, run
from fabriclab.sim.pairwise import all_to_all_batch
from fabriclab.sim.refine import quotient

ALGORITHMS = ("ring", "tree", "p2p")
P2P = ("alltoall", "sendrecv")
ENGINES = ("auto", "general")
# Bytes of the message the link time is simulated with; latencies of links are then < 1e-6 of the makespan.
_REF_BYTES = float(1 << 30)
# Transfers the general engine is given at most (about 1 kB of Python objects each): an all-to-all of
# 1,024 GPUs is 1.05 M.
MAX_GENERAL_TRANSFERS = 2_000_000
# Servers a scattered job's cluster may have (16,384 servers of 8 GPUs: the layout's own limit).
MAX_SCATTERED_SERVERS = 16_384


def _endpoints(lay: Layout, g: int, ranks: np.ndarray) -> np.ndarray:
    """Endpoint of each rank: ranks fill servers in order."""
    return ranks // lay.per_server * g + ranks % lay.per_server


def _ring_pairs(lay: Layout, num_channels: int, g: int) -> tuple[np.ndarray, np.ndarray]:
    """Each channel's ring: servers in order, inside each the GPUs from c % per_server on."""
    order = (np.arange(num_channels)[:, None] + np.arange(lay.per_server)) % lay.per_server
    ring = (np.arange(lay.num_servers)[None, :, None] * g + order[:, None, :]).reshape(num_channels, -1)
    return ring.ravel(), np.roll(ring, -1, axis=1).ravel()


def _tree_pairs(lay: Layout, num_channels: int, g: int) -> tuple[np.ndarray, np.ndarray]:
    """Each channel: a chain inside every server from head GPU c % g, and between the heads one of
    NCCL's two binary trees (heap order, or heap order mirrored); every edge both ways. As NCCL builds them
    (`connectTrees` in src/graph/connect.cc: channel c + nChannels duplicates channel c, its GPU and NIC, with
    the dual tree), the first half of the channels runs the first tree and the second half the mirrored one
    on the same heads, so each NIC carries one channel of each and no server is an inner node of both."""
    src, dst = [], []
    n_s, base = lay.num_servers, np.arange(lay.num_servers)[:, None] * g
    i = np.arange(1, n_s)
    half = max(1, num_channels // 2)
    for c in range(num_channels):
        head = c % lay.per_server
        chain = (head + np.arange(lay.per_server)) % lay.per_server
        a, b = base + chain[:-1], base + chain[1:]
        child, parent = (i, (i - 1) // 2) if (c // half) % 2 == 0 else (n_s - 1 - i, n_s - 1 - (i - 1) // 2)
        up, down = child * g + head, parent * g + head
        src += [np.stack([a, b], axis=2).ravel(), np.stack([up, down], axis=1).ravel()]
        dst += [np.stack([b, a], axis=2).ravel(), np.stack([down, up], axis=1).ravel()]
    return np.concatenate(src), np.concatenate(dst)


def _p2p_pairs(lay: Layout, collective: str, g: int) -> tuple[np.ndarray, np.ndarray]:
    ranks = np.arange(lay.num_gpus)
    if collective == "sendrecv":
        return _endpoints(lay, g, ranks), _endpoints(lay, g, (ranks + 1) % lay.num_gpus)
    src, dst = np.nonzero(~np.eye(lay.num_gpus, dtype=bool))
    return _endpoints(lay, g, src), _endpoints(lay, g, dst)


@dataclass(frozen=True)
class TopologyKey:
    """What the topology of a run depends on: hashable, so equal clusters share one built topology."""

    num_servers: int
    gpus_per_server: int
    intra: str
    intra_bandwidth_Bps: float
    intra_latency_s: float
    pcie_bandwidth_Bps: float
    nics_per_server: int
    nic_payload_Bps: float
    """NIC line rate x the efficiency the library reaches."""
    nic_latency_s: float
    fabric: str
    leaf_ports: int
    bisection: float
    server_map: tuple[int, ...] | None = None
    """Where the run's servers sit among `num_servers` (a scattered job, `job_server_map`); None: the first."""
    pxn: bool = True
    """NCCL's PXN (off with NCCL_PXN_DISABLE=1): `fabric/rail.py`."""

    def shape(self) -> TopologyKey:
        """The same nodes, links and routes with one made-up rate per kind of link (NVLink or PCIe inside,
        PCIe to the NIC, network): what classes depend on, whatever the rates."""
        return replace(self, intra_bandwidth_Bps=1.0, intra_latency_s=0.0, pcie_bandwidth_Bps=2.0,
                       nic_payload_Bps=3.0, nic_latency_s=0.0)


def job_server_map(network: NetworkSpec, servers: int) -> tuple[int, tuple[int, ...] | None]:
    """(servers of the cluster, the job's servers among them in rank order): a packed job holds the first
    `servers`; a scattered one a seeded random choice (`network.routing_seed`) among `servers / (1 - busy)`,
    sorted as a launcher that sorts host names ranks them (`nccl/placement.py` places several jobs so)."""
    if network.placement != "scattered" or servers < 2:
        return servers, None
    total = math.ceil(servers / (1.0 - network.busy_share) - 1e-9)
    if total > MAX_SCATTERED_SERVERS:
        raise ValueError(f"a job of {servers:,} servers scattered over a cluster {network.busy_share:.0%} busy needs "
                         f"{total:,} servers; at most {MAX_SCATTERED_SERVERS:,} are simulated: give a lower busy share")
    if total == servers:
        return servers, None
    rng = np.random.default_rng([network.routing_seed, 0x91AC])
    return total, tuple(int(x) for x in np.sort(rng.choice(total, size=servers, replace=False)))


def job_endpoints(cluster: ClusterModel, num_gpus: int, endpoints: np.ndarray) -> np.ndarray:
    """The endpoints of a run's GPUs (`rank // per server x G + rank % per server`, packed) where its
    servers really sit on `cluster_topology(cluster, num_gpus)`."""
    lay = layout(cluster, num_gpus)
    _, where = job_server_map(cluster.network, lay.num_servers)
    if where is None:
        return endpoints
    g = cluster.server.gpus_per_server
    return np.asarray(where, dtype=np.int64)[endpoints // g] * g + endpoints % g


def _topology_key(cluster: ClusterModel, servers: int) -> TopologyKey:
    s, n = cluster.server, cluster.network
    servers, where = job_server_map(n, servers)
    pxn = cluster.library.nccl_env.get("NCCL_PXN_DISABLE", "0").strip() != "1"
    return TopologyKey(num_servers=servers, server_map=where, pxn=pxn, gpus_per_server=s.gpus_per_server,
                       intra=s.intra,
                       intra_bandwidth_Bps=s.intra_bandwidth_Bps, intra_latency_s=s.intra_latency_s,
                       pcie_bandwidth_Bps=s.pcie_bandwidth_Bps, nics_per_server=s.nics_per_server,
                       nic_payload_Bps=s.nic_bandwidth_Bps * s.nic_efficiency, nic_latency_s=s.nic_latency_s,
                       fabric=n.fabric, leaf_ports=n.leaf_ports, bisection=n.bisection)


@lru_cache(maxsize=64)
def _topology(key: TopologyKey):
    return gpu_cluster_topology(
        num_servers=key.num_servers, gpus_per_server=key.gpus_per_server, intra=key.intra,
        intra_link=Link(name="intra", bandwidth_Bps=key.intra_bandwidth_Bps, latency_s=key.intra_latency_s),
        pcie=Link(name="pcie", bandwidth_Bps=key.pcie_bandwidth_Bps, latency_s=0.1e-6),
        nics_per_server=key.nics_per_server,
        nic=Link(name="nic", bandwidth_Bps=key.nic_payload_Bps, latency_s=key.nic_latency_s), fabric=key.fabric,
        leaf_ports=key.leaf_ports, bisection=key.bisection, pxn=key.pxn)


def cluster_topology(cluster: ClusterModel, num_gpus: int):
    """The topology a run of `num_gpus` GPUs uses (NIC links at rate x efficiency)."""
    return _topology(_topology_key(cluster, layout(cluster, num_gpus).num_servers))


def _pairs(lay: Layout, algorithm: str, collective: str, num_channels: int, g: int,
           server_map: tuple[int, ...] | None = None):
    """(sources, destinations, bytes of each transfer) of one run of `_REF_BYTES`, on the servers
    `server_map` names (None: the first)."""
    if algorithm == "p2p":
        src, dst = _p2p_pairs(lay, collective, g)
        size = _REF_BYTES / (lay.num_gpus if collective == "alltoall" else 1)
    else:
        src, dst = (_ring_pairs if algorithm == "ring" else _tree_pairs)(lay, num_channels, g)
        size = _REF_BYTES / num_channels
    if server_map is not None:
        where = np.asarray(server_map, dtype=np.int64)
        src, dst = where[src // g] * g + src % g, where[dst // g] * g + dst % g
    return src, dst, size


# Folded batches are small (a tree of 100,000 GPUs: some 30,000 classes, a few MB); a size sweep with its
# ranges asks for 8 channel counts x 2 algorithms x 5 rate sets, the rates re-using the batches.
@lru_cache(maxsize=64)
def _batch(shape: TopologyKey, lay: Layout, algorithm: str, collective: str, num_channels: int) -> FlowBatch:
    """The classes of one run on every topology of this shape (link ids do not depend on the rates)."""
    topo = _topology(shape)
    if algorithm == "p2p" and collective == "alltoall" and lay.num_servers > 1 and shape.server_map is None:
        return all_to_all_batch(topo, _REF_BYTES / lay.num_gpus)
    batch = explicit_batch(topo, *_pairs(lay, algorithm, collective, num_channels, shape.gpus_per_server,
                                         shape.server_map))
    return quotient(batch, topo.bandwidth_Bps[batch.column_link])


def _general(key: TopologyKey, lay: Layout, algorithm: str, collective: str, num_channels: int) -> float:
    src, dst, size = _pairs(lay, algorithm, collective, num_channels, key.gpus_per_server, key.server_map)
    if src.size > MAX_GENERAL_TRANSFERS:
        raise ValueError(f"{src.size:,} transfers: the general engine takes at most {MAX_GENERAL_TRANSFERS:,} "
                         f"here; use engine='auto' or fewer GPUs")
    graph = TaskGraph()
    for a, b in zip(src.tolist(), dst.tolist()):
        graph.add_transfer(a, b, size)
    return run(graph, _topology(key)).makespan_s


@lru_cache(maxsize=4096)
def _link_seconds_per_unit(key: TopologyKey, lay: Layout, algorithm: str, collective: str, num_channels: int,
                           engine: str) -> float:
    """Makespan per `_REF_BYTES` (per bus byte for a ring, per byte for a tree or p2p)."""
    if engine == "general":
        return _general(key, lay, algorithm, collective, num_channels) / _REF_BYTES
    batch = _batch(key.shape(), lay, algorithm, collective, num_channels)
    topo = _topology(key)
    finish = finish_times(batch, topo.bandwidth_Bps, topo.latency_s)
    return float(finish.max(initial=0.0)) / _REF_BYTES


@lru_cache(maxsize=4096)
def _route_effects(key: TopologyKey, lay: Layout, algorithm: str, collective: str, num_channels: int,
                   network: NetworkSpec) -> tuple[float, float, float]:
    """The routed time over the D-mod-K time of the same transfers, and the overload of the busiest spine
    link with its rate (`nccl/routing.py`)."""
    src, dst, size = _pairs(lay, algorithm, collective, num_channels, key.gpus_per_server, key.server_map)
    # a digest, not hash(): Python salts str hashes per process, and a draw must not change with the process
    salt = zlib.crc32(repr((algorithm, collective, num_channels, lay.num_gpus)).encode())
    return route_effects(_topology(key), src, dst, size, network, salt)


def _one_building(cluster: ClusterModel, lay: Layout) -> Layout:
    """The run inside one building (`fabric/buildings.py`): all of it where one building holds it."""
    inside = building_servers(cluster.network, lay.num_servers)
    return lay if inside == lay.num_servers else Layout(inside * lay.per_server, inside, lay.per_server)


def _run(cluster: ClusterModel, num_gpus: int, algorithm: str, collective: str, num_channels: int | None = None):
    """(layout, the run inside one building, its topology key, the p2p collective or "", the channels): across
    buildings a run is simulated in one building and on the third tier (`fabric/buildings.py`)."""
    lay = layout(cluster, num_gpus)
    one = _one_building(cluster, lay)
    channels = (num_channels or cluster.library.num_channels) if algorithm != "p2p" else 0
    return lay, one, _topology_key(cluster, one.num_servers), collective if algorithm == "p2p" else "", channels


def overload(cluster: ClusterModel, num_gpus: int, algorithm: str, collective: str,
             num_channels: int | None = None) -> Overload | None:
    """How hard the run's flows press on the busiest spine link, where the cluster's transport has a
    congestion control that reacts (`nccl/congestion.py`); None otherwise."""
    if TRANSPORTS.get(cluster.network.transport) is None or algorithm not in ALGORITHMS:
        return None
    lay, one, key, p2p, channels = _run(cluster, num_gpus, algorithm, collective, num_channels)
    if lay.num_servers < 2:
        return None
    _, ratio, link_Bps = _route_effects(key, one, algorithm, p2p, channels, cluster.network)
    restarts = cluster.network.hash_per_message and algorithm != "p2p"
    return Overload(ratio, link_Bps, restarts) if link_Bps > 0 else None


def link_seconds_per_byte(cluster: ClusterModel, num_gpus: int, algorithm: str, collective: str, *,
                          engine: str = "auto") -> float:
    """Simulated link time per byte of the buffer (ring: per bus byte x bus factor; tree: per byte; p2p: per
    byte each rank sends in all, `alltoall` or `sendrecv`). `engine`: `auto` (classes) or `general`."""
    if algorithm not in ALGORITHMS:
        raise ValueError(f"algorithm {algorithm!r}: use one of {', '.join(ALGORITHMS)}")
    if algorithm == "p2p" and collective not in P2P:
        raise ValueError(f"collective {collective!r} is not point-to-point: p2p takes {', '.join(P2P)}")
    if engine not in ENGINES:
        raise ValueError(f"engine {engine!r}: use one of {', '.join(ENGINES)}")
    lay, one, key, p2p, channels = _run(cluster, num_gpus, algorithm, collective)
    if lay.num_gpus == 1:
        return 0.0
    per_unit = _link_seconds_per_unit(key, one, algorithm, p2p, channels, engine)
    if cluster.network.routing != "ideal" or cluster.network.placement == "scattered":
        per_unit *= _route_effects(key, one, algorithm, p2p, channels, cluster.network)[0]
    if one is not lay:
        s = cluster.server
        nics_Bps = s.nics_per_server * s.nic_bandwidth_Bps * s.nic_efficiency
        per_unit = max(per_unit, tier_seconds_per_unit(cluster.network, lay.num_servers, lay.per_server, nics_Bps,
                                                       algorithm, collective, channels))
    return per_unit * (bus_bandwidth_factor(collective, lay.num_gpus) if algorithm == "ring" else 1.0)
