"""One what-if sweep from its parsed options: the bucket-time model per point, the sweep, the range.

`WhatifRequest` is what `fabriclab whatif` asks, in numbers (the CLI parses the text); `run_whatif`
resolves the defaults that depend on the machine (a cluster sets the NIC rate and lets its library pick
the algorithm; otherwise Zhang et al.'s ring formula), checks every worker count against the machine
before the work, runs the sweep and, for a cluster, the range of every scaling factor over the cluster's
parameters that no measurement determined (`nccl/band.py`).

Try it: `fabriclab whatif --workers 16 --bandwidth 25Gbps --cost simulated --topology fat-tree`.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from fabriclab.whatif.bucket_time import ALIASES, COST_MODELS, CostModel
from fabriclab.whatif.fusion import FusionPolicy
from fabriclab.whatif.sweep import SweepAxes, sweep_points, sweep_row
from fabriclab.workload.addcost import AddCost
from fabriclab.workload.profile import Profile

# The simulator's endpoint limit (fabric.scenario.MAX_ENDPOINTS); closed forms need no more either.
MAX_WORKERS = 1 << 20
DEFAULT_BANDWIDTHS_BPS = tuple(g * 1e9 / 8 for g in (1, 10, 25, 40, 100))


@dataclass(frozen=True, kw_only=True)
class WhatifRequest:
    """A what-if sweep in numbers."""

    profiles: tuple[Profile, ...]
    """Workload profiles."""
    workers: tuple[int, ...]
    """Worker counts, ascending."""
    bandwidths_Bps: tuple[float, ...] | None = None
    """Link bandwidths; None: the default grid, or a cluster's NIC rate."""
    compression: tuple[float, ...] = (1.0,)
    """Compression ratios > 0."""
    algos: tuple[str, ...] = ("ring",)
    """Algorithm specs (closed-form, simulated)."""
    fusion: FusionPolicy
    """Gradient fusion policy."""
    cost: str | None = None
    """ring-addest, closed-form, simulated or cluster; None: cluster with a cluster, else ring-addest."""
    latency_s: float = 0.0
    """Per-message (closed-form) or per-link (simulated) latency."""
    gamma_s_per_byte: float | None = None
    """Reduction cost per byte; None: from the add-cost table."""
    add_cost: AddCost
    """The AddEst table."""
    compress_add: bool = False
    """Compression also divides the reduction cost."""
    topology: object = None
    """A `fabric.scenario.TopologySpec` (cost simulated): its kind, levels, bisection, link."""
    auto_leaf: bool = True
    """Each worker count gets the default leaf size for its hosts (simulated)."""
    cluster: object = None
    """A `fabric.cluster.ClusterModel`: bucket times from its library model (cost cluster)."""


@dataclass(frozen=True, kw_only=True)
class WhatifAnswer:
    """The rows of a sweep and how they were made."""

    rows: list
    """One dict per point (`whatif.sweep.run_sweep`), with `scaling_low`/`scaling_high` for a cluster."""
    cost: str
    """The bucket-time model used."""
    algos: tuple[str, ...]
    """The algorithms of the rows (`nccl`: the cluster's library chose per size)."""
    ranged: bool
    """Whether the rows carry a range."""
    compute: tuple[str, ...] = ()
    """Where each profile's compute comes from (`whatif.profiles.compute_label`)."""


def resolve(request: WhatifRequest) -> WhatifRequest:
    """The request with its machine-dependent defaults filled in; a ValueError names the option to change."""
    cost = request.cost
    cost = ALIASES.get(cost, cost) if cost is not None else ("cluster" if request.cluster is not None
                                                             else "ring-addest")
    if cost not in COST_MODELS:
        raise ValueError(f"--cost {cost!r}: use one of {', '.join(COST_MODELS)}")
    if (cost == "cluster") != (request.cluster is not None):
        raise ValueError("--cost cluster needs --cluster FILE" if request.cluster is None else
                         f"--cluster sets the cost to `cluster`: drop --cost {cost}")
    if request.workers[-1] > MAX_WORKERS:
        raise ValueError(f"--workers {request.workers[-1]}: at most {MAX_WORKERS} workers")
    if cost == "simulated" and request.topology is None:
        raise ValueError("the simulated cost model needs a topology")
    bandwidths, algos = request.bandwidths_Bps, request.algos
    if request.cluster is not None:
        if bandwidths is not None:
            raise ValueError("--bandwidth does not apply with --cluster: the cluster file sets the NICs; drop "
                             "--bandwidth")
        from fabriclab.nccl.layout import check_cluster_gpus

        from fabriclab.fabric.cluster import cluster_gpu
        from fabriclab.whatif.profiles import profile_for_gpu

        check_cluster_gpus(request.cluster, request.workers[-1], "--workers")
        bandwidths, algos = (request.cluster.server.nic_bandwidth_Bps,), ("nccl",)
        gpu = cluster_gpu(request.cluster)  # compute of the cluster's GPU: converted and labelled when measured elsewhere
        request = replace(request, profiles=tuple(profile_for_gpu(p, gpu) for p in request.profiles))
    return replace(request, cost=cost, bandwidths_Bps=bandwidths or DEFAULT_BANDWIDTHS_BPS, algos=algos)


def bucket_time_factory(request: WhatifRequest, cluster=None):
    """`make(num_workers=, bandwidth_Bps=, compression=, algo=)` -> CostModel for a resolved request; with
    cost `simulated`, the request's topology with one host per worker (every worker count is built here,
    before the work); with cost `cluster`, the cluster `cluster` (every worker count checked here)."""
    from fabriclab.fabric.scenario import auto_hosts_per_leaf, build_topology

    spec, topos = request.topology, {}

    def spec_for(n: int, bandwidth_Bps: float):
        leaf = auto_hosts_per_leaf(n, spec.bisection, spec.levels) if request.auto_leaf else spec.hosts_per_leaf
        return replace(spec.with_hosts(n), hosts_per_leaf=leaf, bandwidth_Bps=bandwidth_Bps,
                       latency_s=request.latency_s)

    if request.cost == "simulated":
        for n in request.workers:  # every worker count must make a valid network before the work starts
            one = spec_for(n, spec.bandwidth_Bps)
            if one.kind in ("fat-tree", "leaf-spine") and n <= one.hosts_per_leaf:
                raise ValueError(f"{n} workers fill only one leaf of {one.hosts_per_leaf}: give --hosts-per-leaf "
                                 f"<= {max(n // 2, 1)} or --topology star")
            build_topology(one)
    if request.cost == "cluster":
        from fabriclab.nccl.layout import layout

        for n in request.workers:
            layout(cluster, n)

    def make(*, num_workers: int, bandwidth_Bps: float, compression: float, algo: str) -> CostModel:
        topo = None
        if request.cost == "simulated":
            key = (num_workers, bandwidth_Bps)
            if key not in topos:
                topos[key] = build_topology(spec_for(num_workers, bandwidth_Bps))
            topo = topos[key]
        return CostModel(kind=request.cost, bandwidth_Bps=bandwidth_Bps, num_workers=num_workers,
                         compression=compression, compress_add=request.compress_add, add_cost=request.add_cost,
                         algo=algo, alpha_s=request.latency_s, gamma_s_per_byte=request.gamma_s_per_byte,
                         topology=topo, cluster=cluster)
    return make


class WhatifWork:
    """What every point of a resolved what-if needs (pickled once per run); the cost models it builds
    (with their topologies and caches) are per process."""

    def __init__(self, request: WhatifRequest) -> None:
        self.request, self._makes = request, None

    def __getstate__(self) -> dict:
        return {"request": self.request}

    def __setstate__(self, state: dict) -> None:
        self.request, self._makes = state["request"], None

    def makes(self) -> list:
        """The cost factory of the request's machine, then those of its moved clusters (the range)."""
        if self._makes is None:
            request = self.request
            self._makes = [bucket_time_factory(request, request.cluster)]
            if request.cluster is not None:
                from fabriclab.nccl.band import moved_clusters

                self._makes += [bucket_time_factory(request, c) for c in moved_clusters(request.cluster)]
        return self._makes


def whatif_point(work: WhatifWork, point: tuple) -> dict:
    """The row of one point (`sweep.sweep_points`), with its range on a cluster."""
    request = work.request
    profile, (make, *ends) = request.profiles[point[0]], work.makes()
    row = sweep_row(profile, request.fusion, make, point)
    if ends:
        low, high = (sweep_row(profile, request.fusion, end, point)["scaling_factor"] for end in ends)
        row["scaling_low"], row["scaling_high"] = min(low, row["scaling_factor"]), max(high, row["scaling_factor"])
    return row


def run_whatif(request: WhatifRequest, run_points=None) -> WhatifAnswer:
    """Resolve the request, run the sweep and, on a cluster, the range of every row. `run_points(fn, work,
    points)` returns `[fn(work, p) for p in points]` in order, wherever it runs them (default: here)."""
    request = resolve(request)
    axes = SweepAxes(profiles=request.profiles, workers=request.workers, bandwidths_Bps=request.bandwidths_Bps,
                     compression=request.compression, algos=request.algos)
    work = WhatifWork(request)
    work.makes()  # every worker count checked against the machine here, before the work
    run_points = run_points or (lambda fn, context, points: [fn(context, p) for p in points])
    rows = run_points(whatif_point, work, sweep_points(axes))
    from fabriclab.whatif.profiles import compute_label

    return WhatifAnswer(rows=rows, cost=request.cost, algos=request.algos, ranged=request.cluster is not None,
                        compute=tuple(dict.fromkeys(compute_label(p) for p in request.profiles)))
