"""Simulate any `Schedule` from `fabriclab.collectives` on a topology and a placement of ranks.

The schedule's semantics (see `collectives/schedule.py`) become a task graph: the end of each step of
each rank is a compute task (the reductions of that step, `gamma_s_per_byte` per reduced byte) that
waits for the step's transfers; a transfer starts when both its sender and its receiver have started
the steps that hold it (rendezvous), i.e. after each one's previous step ended.

Try it: `fabriclab simulate collective --algo ring --topology star --hosts 8 --size 64MB`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from fabriclab.collectives import vectorized
from fabriclab.collectives.registry import parse_spec
from fabriclab.collectives.schedule import ALLREDUCE, Schedule
from fabriclab.sim.levels import Level, levels_of, simulate_levels
from fabriclab.sim.limits import check_inputs, check_simulation
from fabriclab.sim.prepared import (PreparedSchedule, Transfers, match_transfers, prepared_collective,
                                    run_prepared)

__all__ = ["CollectiveRun", "SimResult", "Transfers", "match_transfers", "simulate", "simulate_schedule"]


@dataclass(frozen=True)
class CollectiveRun:
    """Outcome of simulating one schedule."""

    time_s: float
    rank_finish_s: np.ndarray
    transfers: Transfers
    transfer_start_s: np.ndarray
    transfer_finish_s: np.ndarray
    link_bytes: np.ndarray
    num_solves: int
    exact: bool = True
    """False when a shortcut could not prove its answer equals the general engine's."""


def simulate_schedule(schedule: Schedule, topology, placement: np.ndarray | None = None, *,
                      itemsize: int = 1, gamma_s_per_byte: float = 0.0) -> CollectiveRun:
    """Run `schedule` on `topology` with rank r on endpoint `placement[r]` (default: r)."""
    if placement is None:
        placement = np.arange(schedule.num_ranks)
    placement = np.asarray(placement, dtype=np.int64)
    if schedule.num_ranks > topology.num_endpoints:
        raise ValueError(f"schedule of {schedule.num_ranks} ranks does not fit {topology.num_endpoints} "
                         f"endpoints of {topology.name}: use more hosts or fewer ranks")
    if placement.shape != (schedule.num_ranks,) or placement.min(initial=0) < 0 or \
            placement.max(initial=0) >= topology.num_endpoints:
        raise ValueError(f"placement must give each of {schedule.num_ranks} ranks an endpoint "
                         f"in 0..{topology.num_endpoints - 1}")
    return _run(PreparedSchedule(schedule), topology, placement, itemsize, gamma_s_per_byte)


def _run(prep: PreparedSchedule, topology, placement: np.ndarray, itemsize: int,
         gamma_s_per_byte: float) -> CollectiveRun:
    graph = prep.graph(itemsize)
    timeline, finish = run_prepared(graph, topology, placement, gamma_s_per_byte)
    tx, tx_task = prep.transfers, graph.tx_task
    return CollectiveRun(time_s=float(finish.max(initial=0.0)), rank_finish_s=finish, transfers=tx,
                         transfer_start_s=timeline.start_s[tx_task],
                         transfer_finish_s=timeline.finish_s[tx_task],
                         link_bytes=timeline.link_bytes, num_solves=timeline.num_solves)


def ring_runs(collective: str, algo: str, num_ranks: int, count: int, itemsize: int) -> list[Level] | None:
    """The rounds of `collectives/vectorized.py`'s ring allreduce as two runs (`Level.repeat`) when every
    block is the same size: p - 1 rounds that reduce, then p - 1 that copy, each the same transfers one
    step later. None for anything else (its rounds are then listed one by one)."""
    spec, _ = parse_spec(collective, algo, num_ranks)
    p = num_ranks
    if collective != ALLREDUCE or spec.name != "ring" or p < 2 or count < p or count % p:
        return None
    src = np.arange(p, dtype=np.int64)
    dst, size = (src + 1) % p, np.full(p, count // p * itemsize, dtype=np.int64)
    first, second = np.zeros(p, dtype=np.int64), np.full(p, p - 1, dtype=np.int64)
    return [Level(src, dst, size, np.ones(p, dtype=bool), first, first, repeat=p - 1),
            Level(src, dst, size, np.zeros(p, dtype=bool), second, second, repeat=p - 1)]


# Above this many operations the general engine's per-transfer Python work dominates; the level
# engine then runs instead (and says whether its answer is exact).
GENERAL_ENGINE_MAX_TRANSFERS = 200_000


class _Counted:
    """Levels passed through, counting the transfers they stand for."""

    def __init__(self, levels) -> None:
        self.levels, self.transfers = levels, 0

    def __iter__(self):
        for lv in self.levels:
            self.transfers += lv.src.size * lv.repeat
            yield lv


@dataclass(frozen=True)
class SimResult:
    """What `simulate` reports for one collective on one topology."""

    time_s: float
    rank_finish_s: np.ndarray
    link_bytes: np.ndarray
    engine: str
    exact: bool
    detail: CollectiveRun | None = None


def simulate(collective: str, algo: str, topology, num_ranks: int, size_bytes: int, *,
             placement: np.ndarray | None = None, itemsize: int = 4, gamma_s_per_byte: float = 0.0,
             engine: str = "auto") -> SimResult:
    """Simulate `algo` performing `collective` on `size_bytes` (float32 elements by default).

    engine: `general` (event-driven, every transfer), `levels` (the fast path of `levels.py`), or
    `auto` (general up to GENERAL_ENGINE_MAX_TRANSFERS transfers, else levels)."""
    if engine not in ("auto", "general", "levels"):
        raise ValueError(f"engine {engine!r} is not one of auto, general, levels")
    check_inputs(size_bytes, itemsize, gamma_s_per_byte)
    if isinstance(num_ranks, bool) or not isinstance(num_ranks, (int, np.integer)) or num_ranks < 1:
        raise ValueError(f"ranks {num_ranks!r}: give a whole number of ranks >= 1")
    count = size_bytes // itemsize
    if num_ranks > topology.num_endpoints:
        raise ValueError(f"{num_ranks} ranks do not fit the {topology.num_endpoints} endpoints of "
                         f"{topology.name}: use more hosts or fewer ranks")
    if placement is None:
        placement = np.arange(num_ranks)
    placement = np.asarray(placement, dtype=np.int64)
    if placement.shape != (num_ranks,) or placement.min(initial=0) < 0 or \
            placement.max(initial=0) >= topology.num_endpoints:
        raise ValueError(f"placement must give each of {num_ranks} ranks an endpoint "
                         f"in 0..{topology.num_endpoints - 1}")
    check_simulation(collective, algo, num_ranks, count, engine)
    arrays = vectorized.rounds(collective, algo, num_ranks, count) if engine != "general" else None
    if arrays is not None and (engine == "levels" or num_ranks > 64):
        levels = ring_runs(collective, algo, num_ranks, count, itemsize) or \
            (Level(s, d, e * itemsize, r, ks, kd) for s, d, e, r, ks, kd in arrays)
        counted = _Counted(levels)
        run_ = simulate_levels(counted, num_ranks, topology, placement, gamma_s_per_byte=gamma_s_per_byte)
        # `auto` keeps the general engine's answer where the fast path cannot prove its own and the general
        # engine can afford the schedule.
        if run_.exact or engine == "levels" or counted.transfers > GENERAL_ENGINE_MAX_TRANSFERS:
            return SimResult(run_.time_s, run_.rank_finish_s, run_.link_bytes, "levels", run_.exact)
    prep = prepared_collective(collective, algo, num_ranks, count)
    if engine == "levels" or (engine == "auto" and prep.num_messages > GENERAL_ENGINE_MAX_TRANSFERS):
        run_ = simulate_levels(levels_of(prep.transfers, itemsize), num_ranks, topology, placement,
                               gamma_s_per_byte=gamma_s_per_byte)
        return SimResult(run_.time_s, run_.rank_finish_s, run_.link_bytes, "levels", run_.exact)
    detail = _run(prep, topology, placement, itemsize, gamma_s_per_byte)
    return SimResult(detail.time_s, detail.rank_finish_s, detail.link_bytes, "general", True, detail)
