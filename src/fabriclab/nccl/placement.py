"""Which servers of a shared cluster each job gets: packed, interleaved, or scattered by a busy scheduler.

A job of N GPUs takes whole servers, `layout(cluster, N).num_servers` of them (jobs never share a
server). The cluster is `num_servers` servers on the two-level tree of `fabric/rail.py`, built from the
cluster's fields as `nccl/links.py` builds it (`placement_topology`). Its size, unless given: the jobs'
servers over the share of the cluster that is free, `ceil(servers of all jobs / (1 - busy))`; the other
`busy` share is held by jobs whose traffic is not simulated (the jobs given are the ones that share links).

* `packed`: the jobs take the first servers in order, one job after the other (leaf by leaf: what a single
  run assumes, `nccl/layout.py`); the busy servers are the ones after them.
* `interleaved`: the first servers are dealt to the jobs in turn (server 0 to job 0, 1 to job 1, ..., a
  job that has all its servers skipped), so every leaf is split between the jobs: Meta's partial racks
  ("RDMA over Ethernet for Distributed AI Training at Meta Scale", SIGCOMM 2024, section 6: a rack partly
  allocated to a job under ECMP path pinning cost more than 30 %).
* `scattered`: a fragmented cluster: the free servers are a seeded random choice among all of them, and the
  jobs take them in a random order, so a job's servers spread over more leaves and its ring's neighbours
  sit on different leaves. Every job's servers are sorted: ranks follow the servers' order, as a launcher
  that sorts host names places them.

Try it: `python -c "from fabriclab.fabric.presets import cluster_preset as c;
from fabriclab.nccl.placement import place_jobs; print(place_jobs(c('dgx-h100'), [64, 32], placement='scattered',
busy=0.5, seed=1))"`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from fabriclab.fabric.cluster import ClusterModel
from fabriclab.nccl.layout import MAX_CLUSTER_GPUS, layout
from fabriclab.nccl.links import _topology, _topology_key

PLACEMENTS = ("packed", "interleaved", "scattered")
# Separates the placement's draw from the hashes' draw of the same seed (`nccl/jobs.py`).
_PLACEMENT_STREAM = 0x91AC


@dataclass(frozen=True, kw_only=True)
class Placement:
    """Where the jobs of one draw sit."""

    num_servers: int
    """Servers of the cluster (the topology), the busy ones included."""
    servers: tuple[tuple[int, ...], ...]
    """Per job, its servers' indices on that topology, in rank order."""


def job_servers(cluster: ClusterModel, num_gpus: int) -> int:
    """Servers a job of `num_gpus` GPUs takes (a ValueError when they do not fill whole servers)."""
    return layout(cluster, num_gpus).num_servers


def cluster_servers(cluster: ClusterModel, needed: int, busy: float = 0.0, num_servers: int | None = None) -> int:
    """The cluster's servers: `num_servers`, or `ceil(needed / (1 - busy))`; a ValueError says what to change
    when `busy` is outside [0, 1), the jobs do not fit or the cluster is bigger than one building here."""
    if not isinstance(busy, (int, float)) or not 0 <= busy < 1:
        raise ValueError(f"busy share {busy!r}: give a share of the cluster's servers in [0, 1), e.g. 0.5")
    total = math.ceil(needed / (1 - busy) - 1e-9) if num_servers is None else num_servers
    free = math.floor(total * (1 - busy) + 1e-9)
    if needed > free:
        raise ValueError(f"the jobs take {needed} servers but a cluster of {total} servers with {busy:.0%} busy has "
                         f"{free} free: give fewer or smaller jobs, a lower busy share or more servers")
    g = cluster.server.gpus_per_server
    spb = cluster.network.servers_per_building
    limit = min(MAX_CLUSTER_GPUS // g, spb) if spb > 0 else MAX_CLUSTER_GPUS // g
    if total > limit:
        raise ValueError(f"a cluster of {total} servers: jobs are placed on at most {limit:,} servers of one "
                         f"building here; give fewer or smaller jobs or a lower busy share")
    return total


def place_jobs(cluster: ClusterModel, gpus: Sequence[int], *, placement: str = "packed", busy: float = 0.0,
               seed: int = 0, num_servers: int | None = None) -> Placement:
    """The servers of jobs of `gpus[j]` GPUs each (module doc); `seed` draws a scattered placement."""
    if placement not in PLACEMENTS:
        raise ValueError(f"placement {placement!r}: use one of {', '.join(PLACEMENTS)}")
    if not gpus:
        raise ValueError("no jobs to place: give at least one")
    counts = [job_servers(cluster, n) for n in gpus]
    needed = sum(counts)
    total = cluster_servers(cluster, needed, busy, num_servers)
    if placement == "packed":
        order = np.arange(needed)
    elif placement == "interleaved":
        order = _dealt(counts)
    else:
        rng = np.random.default_rng([seed, _PLACEMENT_STREAM])
        order = rng.choice(total, size=needed, replace=False)
    cuts = np.cumsum([0] + counts)
    if placement == "interleaved":
        groups = [np.flatnonzero(order == j) for j in range(len(counts))]
    else:
        groups = [order[cuts[j]:cuts[j + 1]] for j in range(len(counts))]
    return Placement(num_servers=total, servers=tuple(tuple(int(s) for s in np.sort(g)) for g in groups))


def _dealt(counts: list[int]) -> np.ndarray:
    """Job of each of the first servers when they are dealt in turn to the jobs that still need one."""
    left, owner = list(counts), []
    while any(left):
        for j, n in enumerate(left):
            if n:
                owner.append(j)
                left[j] -= 1
    return np.array(owner, dtype=np.int64)


def placement_topology(cluster: ClusterModel, num_servers: int):
    """The topology of a cluster of `num_servers` servers (NIC links at rate x efficiency), the one
    `nccl/links.py` simulates a run on: built once per shape and kept."""
    return _topology(_topology_key(cluster, num_servers))


def leaves_spanned(topo, servers: Sequence[int]) -> int:
    """Leaves the servers span: the most distinct leaves NIC k of them sits on, over k (on a rail fabric the
    leaves of each rail; on a plain fat tree the leaves of the servers)."""
    leaf = topo.router.nic_leaf[np.asarray(servers, dtype=np.int64)]
    return max(int(np.unique(leaf[:, k]).size) for k in range(leaf.shape[1]))
