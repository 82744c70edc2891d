"""Several jobs on one fabric: how much each job's collective slows down when the others' flows share its links.

Each job runs one collective over its own servers (`nccl/placement.py`): `allreduce`, `allgather` and
`reduce_scatter` as NCCL's rings, one per channel of `library.num_channels` (`nccl/links.py`'s rings: each
ring edge carries the bus bytes over the channels), `alltoall` as every pair at once (size / n each, one
connection a pair). All jobs' transfers run together, routed as `network.routing` says (`nccl/routing.py`):

* `ideal`: D-mod-K; every job's flows keep their spines whoever else runs.
* `ecmp`: every flow the library opens (per channel or peer, per QP: `network.qps_per_connection`) hashed
  to one spine, a seeded draw. A job alone and the jobs together see the same draw for the same flows, so
  only the others' flows differ (each job draws from its own stream: adding a job leaves the others' hashes
  as they were). With `network.hash_per_message`, `messages_in_flight` messages per
  connection are hashed at a time and the times average `routing.MESSAGE_DRAWS` such draws.
* `adaptive`: each leaf spreads all its up- (and down-) traffic, every job's, evenly over its spine links.

A job's time is the bottleneck of its own flows, as a synchronous ring or all-to-all ends with its slowest
flow: the busiest link any of its flows crosses, counting every job's bytes on it (bytes / bandwidth). The
jobs are taken to run their collectives over and over, so each one's load is there the whole time; alone,
the same job on the same servers with the same hashes. Link time only: latencies and the library's
per-step costs are the same alone and together. `num_seeds` draws (seeds `routing_seed`, +1, ...) of the
hashes and of a scattered placement give the median and 90th percentile.

Try it: `fabriclab simulate jobs --cluster dgx-h100 --fabric fat-tree --routing ecmp --placement interleaved
--job allreduce:64:256MiB --job allreduce:64:256MiB --seeds 8`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from fabriclab.collectives.schedule import bus_bandwidth_factor
from fabriclab.fabric.cluster import ClusterModel
from fabriclab.nccl.layout import layout
from fabriclab.nccl.links import _p2p_pairs, _ring_pairs
from fabriclab.nccl.placement import leaves_spanned, place_jobs, placement_topology
from fabriclab.nccl.congestion import TRANSPORTS, Overload, congested_seconds
from fabriclab.nccl.routing import MESSAGE_DRAWS, adaptive_use, offered_load

COLLECTIVES = ("allreduce", "allgather", "reduce_scatter", "alltoall")
# Flows (after one per QP and message) routed at once: 16 M route entries of int64, about 130 MB. An all-to-all
# of 1,024 GPUs is 1 M pairs.
MAX_FLOWS = 2_000_000
# Separates the hashes' draw from the placement's draw of the same seed (`nccl/placement.py`).
_HASH_STREAM = 0x4A0B


@dataclass(frozen=True, kw_only=True)
class JobSpec:
    """One job: a collective on its own GPUs."""

    collective: str
    """allreduce, allgather, reduce_scatter (NCCL's rings) or alltoall (every pair)."""
    num_gpus: int
    """GPUs of the job: whole servers, or part of one."""
    size_bytes: int
    """The collective's buffer, bytes (nccl-tests' size: all-gather's output, all-to-all's send buffer)."""


@dataclass(frozen=True, kw_only=True)
class JobResult:
    """One job's times over the draws."""

    job: JobSpec
    """The job."""
    num_servers: int
    """Servers it holds."""
    leaves: tuple[int, ...]
    """Leaves its servers' NICs sit on, per draw."""
    alone_s: tuple[float, ...]
    """Its link time on its servers with no other job, per draw, s."""
    together_s: tuple[float, ...]
    """Its link time with every job's flows on the fabric, per draw, s."""

    @property
    def slowdowns(self) -> np.ndarray:
        alone, together = np.asarray(self.alone_s), np.asarray(self.together_s)
        return np.where(alone > 0, together / np.where(alone > 0, alone, 1.0), 1.0)  # 1 GPU: nothing moves

    def summary(self) -> dict:
        """Median and 90th percentile over the draws (numbers in base units), for tables and records."""
        s = self.slowdowns
        return {"collective": self.job.collective, "num_gpus": self.job.num_gpus, "size_bytes": self.job.size_bytes,
                "num_servers": self.num_servers, "leaves_median": float(np.median(self.leaves)),
                "alone_s_median": float(np.median(self.alone_s)),
                "together_s_median": float(np.median(self.together_s)),
                "slowdown_median": float(np.median(s)), "slowdown_p90": float(np.percentile(s, 90)),
                "slowdowns": [float(x) for x in s]}


def check_job(cluster: ClusterModel, job: JobSpec) -> None:
    """A ValueError that says what to change when a job is not one this model runs."""
    if job.collective not in COLLECTIVES:
        raise ValueError(f"collective {job.collective!r}: use one of {', '.join(COLLECTIVES)}")
    if cluster.server.gpus_per_domain:
        raise ValueError(f"cluster {cluster.name!r} joins servers in NVLink domains of {cluster.server.gpus_per_domain} "
                         f"GPUs, which jobs here do not model: give a cluster whose server is its NVLink domain "
                         f"(dgx-h100, hgx-b200, ...)")
    layout(cluster, job.num_gpus)
    if not job.size_bytes > 0:
        raise ValueError(f"size {job.size_bytes!r}: give a buffer of at least 1 byte")
    if job.collective == "alltoall" and job.num_gpus * (job.num_gpus - 1) > MAX_FLOWS:
        raise ValueError(f"an all-to-all of {job.num_gpus} GPUs is {job.num_gpus * (job.num_gpus - 1):,} flows; "
                         f"jobs take at most {MAX_FLOWS:,} here: give at most 1,024 GPUs")


def job_flows(cluster: ClusterModel, job: JobSpec, servers: Sequence[int]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(sources, destinations, bytes) of the job's transfers on its servers (endpoints of the cluster)."""
    g = cluster.server.gpus_per_server
    lay = layout(cluster, job.num_gpus)
    if job.collective == "alltoall":
        src, dst = _p2p_pairs(lay, "alltoall", g)
        size = job.size_bytes / job.num_gpus
    else:
        channels = cluster.library.num_channels
        src, dst = _ring_pairs(lay, channels, g)
        size = job.size_bytes * bus_bandwidth_factor(job.collective, job.num_gpus) / channels
    where = np.asarray(servers, dtype=np.int64)
    src, dst = where[src // g] * g + src % g, where[dst // g] * g + dst % g
    return src, dst, np.full(src.size, float(size))


def simulate_jobs(cluster: ClusterModel, jobs: Sequence[JobSpec], *, placement: str = "packed", busy: float = 0.0,
                  num_seeds: int = 1, num_servers: int | None = None) -> list[JobResult]:
    """Each job's time alone and together over `num_seeds` draws (module doc)."""
    for job in jobs:
        check_job(cluster, job)
    if not isinstance(num_seeds, int) or num_seeds < 1:
        raise ValueError(f"seeds {num_seeds!r}: give a whole number of draws >= 1")
    draws = []
    for i in range(num_seeds):
        seed = cluster.network.routing_seed + i
        where = place_jobs(cluster, [j.num_gpus for j in jobs], placement=placement, busy=busy, seed=seed,
                           num_servers=num_servers)
        draws.append(_one_draw(cluster, jobs, where, seed))
    return [JobResult(job=job, num_servers=len(draws[0][0][j]),
                      leaves=tuple(d[1][j] for d in draws), alone_s=tuple(float(d[2][j]) for d in draws),
                      together_s=tuple(float(d[3][j]) for d in draws)) for j, job in enumerate(jobs)]


def _one_draw(cluster: ClusterModel, jobs: Sequence[JobSpec], where, seed: int):
    """(servers, leaves, alone times, together times) of every job for one placement and one seed."""
    topo = placement_topology(cluster, where.num_servers)
    flows = [job_flows(cluster, job, servers) for job, servers in zip(jobs, where.servers)]
    owner = np.concatenate([np.full(f[0].size, j) for j, f in enumerate(flows)])
    src, dst, size = (np.concatenate([f[i] for f in flows]) for i in range(3))
    leaves = [leaves_spanned(topo, s) for s in where.servers]
    alone, together = _times(cluster, topo, owner, src, dst, size, len(jobs), seed)
    return where.servers, leaves, alone, together


def _times(cluster: ClusterModel, topo, owner, src, dst, size, num_jobs: int, seed: int):
    """Per job: its bottleneck alone and together (s), averaged over the message draws of a per-message hash."""
    network, router = cluster.network, topo.router
    if network.routing != "ecmp" or not router.num_spines:
        return _bottlenecks(topo, router, owner, src, dst, size, None, num_jobs, network.routing == "adaptive",
                            network.transport)
    per_message = network.hash_per_message
    copies = network.qps_per_connection * (max(1, round(network.messages_in_flight)) if per_message else 1)
    if src.size * copies > MAX_FLOWS:
        raise ValueError(f"{src.size * copies:,} flows (connections x QPs x messages in flight): jobs take at most "
                         f"{MAX_FLOWS:,} here; give fewer GPUs, QPs or messages in flight")
    owner, src, dst = (np.repeat(x, copies) for x in (owner, src, dst))
    size = np.repeat(size / copies, copies)
    # A stream per job: a job's hashes do not change when other jobs join.
    rngs = [np.random.default_rng([seed, _HASH_STREAM, j]) for j in range(num_jobs)]
    flows = np.bincount(owner, minlength=num_jobs)
    runs = []
    for _ in range(MESSAGE_DRAWS if per_message else 1):
        spine = np.concatenate([rng.integers(router.num_spines, size=n) for rng, n in zip(rngs, flows)])
        runs.append(_bottlenecks(topo, router, owner, src, dst, size, spine, num_jobs, False, network.transport))
    return np.mean([r[0] for r in runs], axis=0), np.mean([r[1] for r in runs], axis=0)


def _bottlenecks(topo, router, owner, src, dst, size, spine, num_jobs: int, adaptive: bool, transport: str = "ideal"):
    """Per job: the busiest link of its own flows alone, and the busiest of its links with all jobs' bytes;
    with a reacting transport each time also pays the congestion control of the spine link its flows
    overload most, alone and together (`nccl/congestion.py`)."""
    offsets, links = router.routes(src, dst, spine=spine)
    per_entry = np.diff(offsets)
    load = np.bincount(np.repeat(owner, per_entry) * topo.num_links + links, weights=np.repeat(size, per_entry),
                       minlength=num_jobs * topo.num_links).reshape(num_jobs, topo.num_links)
    seconds = load / topo.bandwidth_Bps
    if adaptive and router.num_spines:
        seconds = np.stack([adaptive_use(topo, router, row) for row in seconds])
    total = seconds.sum(axis=0)
    alone = seconds.max(axis=1)
    together = np.array([total[row > 0].max(initial=0.0) for row in seconds])
    if TRANSPORTS.get(transport) is None or not router.num_spines:
        return alone, together
    return _congested(topo, router, seconds, alone, together, transport)


def _congested(topo, router, seconds, alone, together, transport: str):
    """The times with each job's overload alone and together: every job's flows at what its edge links
    allow (its spine-free bottleneck), summed on each spine link, over the link's rate."""
    offered = offered_load(router, seconds)
    shared = offered.sum(axis=0)
    link_Bps = float(topo.bandwidth_Bps[router.spine_tier.start])
    out_alone, out_together = alone.copy(), together.copy()
    for j, row in enumerate(offered):
        mine = seconds[j] > 0
        over_alone = Overload(float(row.max()), link_Bps, False)
        over_together = Overload(float(shared[mine].max(initial=0.0)), link_Bps, False)
        out_alone[j] = congested_seconds([alone[j]], over_alone, transport)[0]
        out_together[j] = congested_seconds([together[j]], over_together, transport)[0]
    return out_alone, out_together

