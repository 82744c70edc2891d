"""Sweeps of the what-if: profiles x bandwidths x workers x compression (x algorithm), and Zhang et al.'s
question "what compression ratio reaches a scaling factor of 0.9 / 0.99?".

Try it: `fabriclab whatif reproduce`.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, replace
from typing import Callable, Iterator

from fabriclab.whatif.bucket_time import CostModel
from fabriclab.whatif.fusion import FusionPolicy
from fabriclab.whatif.iteration import simulate_iteration
from fabriclab.workload.profile import Profile

# Seed 004's grid (sim_with_compression_*.py): 16/32/64 workers, 1-100 Gbps, compression 1-100.
PAPER_WORKERS = (16, 32, 64)
PAPER_BANDWIDTHS_GBPS = (1, 10, 25, 40, 100)
PAPER_COMPRESSION = (1, 2, 5, 10, 50, 100)


@dataclass(frozen=True, kw_only=True)
class SweepAxes:
    """The grid of one sweep."""

    profiles: tuple[Profile, ...]
    """Workload profiles."""
    workers: tuple[int, ...] = PAPER_WORKERS
    """Worker counts."""
    bandwidths_Bps: tuple[float, ...] = tuple(g * 1e9 / 8 for g in PAPER_BANDWIDTHS_GBPS)
    """Link bandwidths, bytes per second."""
    compression: tuple[float, ...] = (1.0,)
    """Compression ratios."""
    algos: tuple[str, ...] = ("ring",)
    """Algorithms (closed-form and simulated cost models)."""


def sweep_points(axes: SweepAxes) -> list[tuple[int, str, float, int, float]]:
    """The sweep's points in row order: (profile index, algorithm, bandwidth, workers, compression)."""
    return list(itertools.product(range(len(axes.profiles)), axes.algos, axes.bandwidths_Bps, axes.workers,
                                  axes.compression))


def sweep_row(profile: Profile, fusion: FusionPolicy, make_cost: Callable[..., CostModel], point: tuple) -> dict:
    """The row of one point of `sweep_points` (its profile given)."""
    _, algo, bw, n, comp = point
    model = make_cost(num_workers=n, bandwidth_Bps=bw, compression=comp, algo=algo)
    r = simulate_iteration(profile, fusion, model)
    return {"model": profile.model, "device": profile.device, "workers": n, "bandwidth_Gbps": bw * 8 / 1e9,
            "compression": comp, "fusion": fusion.name, "cost": model.kind, "algo": algo,
            "iteration_s": r.iteration_s, "t_batch_s": r.t_batch_s, "t_back_s": r.t_back_s,
            "t_sync_s": r.t_sync_s, "overhead_s": r.overhead_s, "comm_s": r.comm_s,
            "exposed_comm_s": r.overhead_s, "exposed_fraction": r.exposed_fraction,
            "scaling_factor": r.scaling_factor, "num_buckets": r.num_buckets}


def run_sweep(axes: SweepAxes, fusion: FusionPolicy, make_cost: Callable[..., CostModel]) -> Iterator[dict]:
    """One row per point. `make_cost(num_workers=, bandwidth_Bps=, compression=, algo=)` -> CostModel."""
    for point in sweep_points(axes):
        yield sweep_row(axes.profiles[point[0]], fusion, make_cost, point)


def compression_needed(profile: Profile, fusion: FusionPolicy, cost: CostModel, target: float,
                       *, most: float = 1000.0) -> float | None:
    """Smallest compression ratio whose scaling factor reaches `target` (bisection: f grows with the
    ratio), or None if even `most` does not reach it."""
    def f(ratio: float) -> float:
        return simulate_iteration(profile, fusion, replace(cost, compression=ratio, _cache={})).scaling_factor

    if f(1.0) >= target:
        return 1.0
    if f(most) < target:
        return None
    lo, hi = 1.0, most
    for _ in range(60):
        mid = (lo * hi) ** 0.5
        lo, hi = (mid, hi) if f(mid) < target else (lo, mid)
        if hi / lo < 1 + 1e-4:
            break
    return hi
