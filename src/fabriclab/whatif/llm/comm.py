"""What one communicator's collective costs on the cluster: its groups' placement, the library model, the flows.

A communicator (TP, CP, EP, DP, PP, the experts' ETP and ETP x EP, DeepEP's two steps) is many groups that
run the same collective at the same time: every TP group of the job all-gathers at once, every DP group
reduce-scatters at once. Placement decides what a
group is made of: with TP innermost, a TP group of 4 is 4 GPUs of one server (NVLink only); a DP group of
the same job has 2 GPUs in each of DP/2 servers; a PP group has one GPU in each of PP servers. The cost of
a group's collective is the cluster's library model (`nccl/predict.py`: NCCL's algorithm and protocol
choice of the cluster's version, its latencies, and the link time from the flow simulator on the real
topology) applied to the group's own shape: its servers, its GPUs per server, and the NICs those GPUs own
(one per GPU on a rail-optimised DGX; a share where GPUs share NICs). Every group of the communicator runs
at once on identical shapes, so each sees the same share of the leaves and spines: the group's shape keeps
the cluster's servers per leaf and its bisection, which is what all the groups together load per NIC.

What this leaves out, said where it matters: a group placed unevenly (some servers holding more of its GPUs
than others) is costed as if every server held the most; different communicators running at the same time
share NICs only through the step's schedule (`whatif/llm/step.py` serialises a stage's network traffic).

Try it: `python -c "from fabriclab.fabric.presets import cluster_preset as c; from fabriclab.workload.parallel
import ParallelConfig as P; from fabriclab.whatif.llm.comm import CommModel;
m = CommModel(c('dgx-h100'), P(num_gpus=128, tp=4, pp=8, gbs=256, seq=2048)); print(m.time('dp', 'reduce_scatter', 1e9))"`.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from fabriclab.fabric.cluster import ClusterModel, cluster_gpu
from fabriclab.fabric.domains import domain_view
from fabriclab.whatif.llm.groups import RankGroups
from fabriclab.workload.parallel import ParallelConfig


@dataclass(frozen=True)
class GroupShape:
    """Where one group of a communicator sits."""

    num_gpus: int
    num_servers: int
    per_server: int
    """The most GPUs of the group in one server."""

    @property
    def crosses_network(self) -> bool:
        return self.num_servers > 1

    def describe(self) -> str:
        if self.num_servers == 1:
            return f"{self.num_gpus} GPU{'s' if self.num_gpus > 1 else ''} in one server"
        return f"{self.num_servers} servers x {self.per_server} GPU{'s' if self.per_server > 1 else ''}"


def group_shape(par: ParallelConfig, communicator: str, gpus_per_server: int) -> GroupShape:
    """The shape of a communicator's first group (every group has the same shape under the frameworks'
    placements: groups differ by a rank offset that moves whole strides)."""
    return _shape(RankGroups(par=par).groups(communicator)[0], gpus_per_server)


def _shape(group: np.ndarray, gpus_per_server: int) -> GroupShape:
    """The shape of one group of global ranks."""
    servers, counts = np.unique(group // gpus_per_server, return_counts=True)
    return GroupShape(int(group.size), int(servers.size), int(counts.max()))


def group_cluster(cluster: ClusterModel, shape: GroupShape) -> ClusterModel:
    """The cluster as one group sees it: servers of `shape.per_server` GPUs, the NICs of those GPUs, the
    same servers per leaf and bisection (module doc)."""
    server = cluster.server
    g = server.gpus_per_server
    if shape.per_server == g:
        return cluster
    share = server.nics_per_server * shape.per_server / g  # NICs the group's GPUs own in one server
    # as many NICs as they own, at most, that serve their GPUs evenly (9 GPUs owning 2.25 NICs of a 72-GPU
    # server with 18: one NIC at 2.25 times the rate); the group's NIC bandwidth is kept either way
    nics = max(d for d in range(1, shape.per_server + 1) if shape.per_server % d == 0 and d <= max(1.0, share))
    sub_server = replace(server, gpus_per_server=shape.per_server, nics_per_server=nics,
                         nic_bandwidth_Bps=server.nic_bandwidth_Bps * share / nics)
    network = cluster.network
    if network.fabric != "rail":  # a plain fat tree's leaf counts NIC ports: keep its servers per leaf
        ports = max(1, round(network.leaf_ports * nics / server.nics_per_server))
        network = replace(network, leaf_ports=ports)
    return replace(cluster, server=sub_server, network=network)


class CommModel:
    """Times of the collectives of a job's communicators on a cluster, cached per (communicator,
    collective, size). `memo`: where the rank groups of `par`'s parallel shape are kept (`RankGroups`);
    the plan shares one among the configurations it simulates."""

    def __init__(self, cluster: ClusterModel, par: ParallelConfig, *, shard_group: int = 0,
                 memo: dict | None = None) -> None:
        cluster = domain_view(cluster, par.num_gpus)  # idempotent: the caller's view, or the domain as one node
        self.cluster = cluster
        self.par = par
        groups = RankGroups(par=par, memo={} if memo is None else memo)
        g = cluster.server.gpus_per_server
        self.shapes = {c: _shape(groups.groups(c)[0], g) for c in ("tp", "cp", "ep", "dp", "pp", "edp")}
        if par.cp > 1:  # Megatron's gradient group of the dense parameters spans dp x cp
            self.shapes["dpcp"] = _merged_shape(groups, g)
        else:
            self.shapes["dpcp"] = self.shapes["dp"]
        for name in ("shard", "replica"):  # HSDP's groups (all of dp x cp, or one rank, without it)
            self.shapes[name] = _shape(groups.groups(name, shard_group)[0], g)
        for name in ("etp", "etpep"):  # the experts' own groups, when they are split at all
            self.shapes[name] = _shape(groups.groups(name)[0], g) if par.ep * par.etp > 1 else GroupShape(1, 1, 1)
        for name in ("ep_inter", "ep_intra"):  # DeepEP's RDMA and NVLink steps of an ETP x EP group
            self.shapes[name] = (_shape(groups.groups(name, gpus_per_server=g)[0], g) if par.ep * par.etp > 1
                                 else GroupShape(1, 1, 1))
        self._clusters = {name: group_cluster(cluster, s) for name, s in self.shapes.items()}
        # activation offloading's copies to and from host memory: one GPU's link to its host (`GpuSpec`)
        self.shapes["host"] = GroupShape(1, 1, 1)
        self.host_bandwidth_Bps = cluster_gpu(cluster).host_bandwidth_Bps
        self._cache: dict[tuple, float] = {}
        self._picks: dict[tuple, str] = {}

    def time(self, communicator: str, collective: str, size_bytes: float) -> float:
        """Seconds of one collective of `size_bytes` (nccl-tests' buffer convention) on every group of the
        communicator at once; 0 for a group of one rank or an empty buffer. `sendrecv`: one pipeline hop;
        `host`: a copy of `size_bytes` over the GPU's link to host memory."""
        if communicator == "host":
            return max(0.0, size_bytes) / self.host_bandwidth_Bps
        shape = self.shapes[communicator]
        if shape.num_gpus == 1 or size_bytes <= 0:
            return 0.0
        key = (communicator, collective, float(size_bytes))
        if key not in self._cache:
            from fabriclab.nccl.predict import collective_times

            cluster, n = self._clusters[communicator], shape.num_gpus
            if collective == "sendrecv":  # one hop between two stages: over the network or inside a server
                n = 2
                cluster = group_cluster(self.cluster, GroupShape(2, 2, 1)) if shape.crosses_network else self.cluster
            times, picks = collective_times(cluster, n, [size_bytes], collective)
            self._cache[key], self._picks[key] = float(times[0]), picks[0]
        return self._cache[key]

    def algorithm(self, communicator: str, collective: str, size_bytes: float) -> str:
        """The algorithm/protocol the library picks for it (for the report)."""
        shape = self.shapes[communicator]
        if communicator == "host":
            return "copy"
        if shape.num_gpus == 1 or size_bytes <= 0 or collective == "sendrecv":
            return "p2p/Simple" if collective == "sendrecv" else "-"
        self.time(communicator, collective, size_bytes)  # predicts and keeps the pick with the time
        return self._picks[(communicator, collective, float(size_bytes))]


def _merged_shape(groups: RankGroups, g: int) -> GroupShape:
    coords = groups.coordinates()
    return _shape(np.flatnonzero((coords["tp"] == 0) & (coords["pp"] == 0)), g)
