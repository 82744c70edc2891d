"""Link time per byte of NCCL's rings and trees on a cluster's real topology, from the flow simulator.

Every channel's ring (NCCL rotates the order inside a server per channel, so channels leave through
different NICs) or double binary tree (a chain inside each server) sends its share of the bus bytes, all at
once, as the pipelined algorithm does in steady state (`sim/engine.py` on `fabric/rail.py`'s topology); the
makespan per byte is the link time `nccl/predict.py` builds its costs on. On one server or a non-blocking
rail fabric it equals the closed form (bus bytes / min(NVLink, NICs x rate x efficiency)); on an
oversubscribed plain fat tree it is what the spines allow.

Try it: `python -c "from fabriclab.fabric.presets import cluster_preset as c;
from fabriclab.nccl.links import link_seconds_per_byte as l; print(l(c('a100-hdr'), 64, 'ring', 'allreduce'))"`.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from fabriclab.collectives.schedule import bus_bandwidth_factor
from fabriclab.fabric.cluster import ClusterModel
from fabriclab.fabric.links import Link
from fabriclab.fabric.rail import gpu_cluster_topology
from fabriclab.nccl.layout import Layout, layout
from fabriclab.sim.engine import TaskGraph, run

# Bytes of the message the link time is simulated with; latencies of links are then < 1e-6 of the makespan.
_REF_BYTES = float(1 << 30)


def _ring_pairs(lay: Layout, num_channels: int, g: int) -> tuple[np.ndarray, np.ndarray]:
    src, dst = [], []
    for c in range(num_channels):
        order = [(c + j) % lay.per_server for j in range(lay.per_server)]
        ring = [s * g + x for s in range(lay.num_servers) for x in order]
        src += ring
        dst += ring[1:] + ring[:1]
    return np.array(src), np.array(dst)


def _tree_pairs(lay: Layout, num_channels: int, g: int) -> tuple[np.ndarray, np.ndarray]:
    """Each channel: a chain inside every server from head GPU c % g, and between the heads one of
    NCCL's two binary trees (heap order, or heap order mirrored); every edge both ways."""
    src, dst = [], []
    n_s = lay.num_servers
    for c in range(num_channels):
        head = c % lay.per_server
        chain = [(head + j) % lay.per_server for j in range(lay.per_server)]
        for s in range(n_s):
            for a, b in itertools.pairwise(chain):
                src += [s * g + a, s * g + b]
                dst += [s * g + b, s * g + a]
        for i in range(1, n_s):
            child, parent = (i, (i - 1) // 2) if c % 2 == 0 else (n_s - 1 - i, n_s - 1 - (i - 1) // 2)
            src += [child * g + head, parent * g + head]
            dst += [parent * g + head, child * g + head]
    return np.array(src), np.array(dst)


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


def _topology_key(cluster: ClusterModel, servers: int) -> TopologyKey:
    s, n = cluster.server, cluster.network
    return TopologyKey(num_servers=servers, gpus_per_server=s.gpus_per_server, intra=s.intra,
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
        leaf_ports=key.leaf_ports, bisection=key.bisection)


def cluster_topology(cluster: ClusterModel, num_gpus: int):
    """The topology a run of `num_gpus` GPUs uses (NIC links at rate x efficiency)."""
    return _topology(_topology_key(cluster, layout(cluster, num_gpus).num_servers))


@lru_cache(maxsize=4096)
def _link_seconds_per_bus_byte(key: TopologyKey, num_gpus: int, per_server: int, algorithm: str,
                               num_channels: int) -> float:
    lay = Layout(num_gpus, key.num_servers, per_server)
    topo = _topology(key)
    pairs = _ring_pairs if algorithm == "ring" else _tree_pairs
    src, dst = pairs(lay, num_channels, key.gpus_per_server)
    graph = TaskGraph()
    for a, b in zip(src.tolist(), dst.tolist()):
        graph.add_transfer(a, b, _REF_BYTES / num_channels)
    return run(graph, topo).makespan_s / _REF_BYTES


def link_seconds_per_byte(cluster: ClusterModel, num_gpus: int, algorithm: str, collective: str) -> float:
    """Simulated link time per byte of the buffer (ring: per bus byte x bus factor; tree: per byte)."""
    lay = layout(cluster, num_gpus)
    if lay.num_gpus == 1:
        return 0.0
    per_unit = _link_seconds_per_bus_byte(_topology_key(cluster, lay.num_servers), lay.num_gpus,
                                          lay.per_server, algorithm, cluster.library.num_channels)
    return per_unit * (bus_bandwidth_factor(collective, lay.num_gpus) if algorithm == "ring" else 1.0)
