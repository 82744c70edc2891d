"""The level engine: a fast path for large schedules that is exact where symmetry makes it so.

Transfers are grouped by *level*, their depth in the schedule's dependency graph (for lock-step
algorithms such as ring and butterfly, the round). Each level's transfers are simulated as one batch
that starts together (max-min sharing, re-solved as flows end, fully vectorized); a transfer then
starts when its sender and receiver have finished their previous steps, and lasts what the batch gave
it. Identical levels (same endpoints and sizes) are solved once.

This equals the general engine (`engine.py`) exactly when either
(a) no link is shared by transfers that overlap in time (then a transfer's time does not depend on
    anything else), or
(b) every level starts at one instant and ends before the next one starts (then the batch *is* what
    happens).
The engine checks both after the fact and marks the result `exact=False` when neither holds; a test
keeps the two engines equal on cases of both kinds.

Try it: `fabriclab bench sim`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Iterator

import numpy as np

from fabriclab.sim.maxmin import max_min_rates

SAME_TIME_REL = 1e-12


@dataclass(frozen=True)
class Level:
    """Transfers of one level: sender and receiver ranks, bytes, whether the receiver reduces, and
    each endpoint's step index (so a transfer waits for exactly the step before it)."""

    src: np.ndarray
    dst: np.ndarray
    size_bytes: np.ndarray
    reduce: np.ndarray
    src_step: np.ndarray
    dst_step: np.ndarray


def levels_of(tx, itemsize: int = 1) -> Iterator[Level]:
    """Group matched transfers (`sim.collective.Transfers`) by their depth in the dependency graph."""
    if tx.src.size == 0:
        return
    num_ranks = int(max(tx.src.max(), tx.dst.max())) + 1
    steps_per_rank = np.zeros(num_ranks, dtype=np.int64)
    np.maximum.at(steps_per_rank, tx.src, tx.src_step + 1)
    np.maximum.at(steps_per_rank, tx.dst, tx.dst_step + 1)
    base = np.concatenate(([0], np.cumsum(steps_per_rank)))
    # Slot 0 is "before the first step"; step (r, k) is slot 1 + base[r] + k.
    own_s, own_d = 1 + base[tx.src] + tx.src_step, 1 + base[tx.dst] + tx.dst_step
    prev_s = np.where(tx.src_step > 0, own_s - 1, 0)
    prev_d = np.where(tx.dst_step > 0, own_d - 1, 0)
    step_level = np.zeros(1 + base[-1], dtype=np.int64)
    level = np.zeros(tx.src.size, dtype=np.int64)
    while True:
        new = 1 + np.maximum(step_level[prev_s], step_level[prev_d])
        np.maximum.at(step_level, own_s, new)
        np.maximum.at(step_level, own_d, new)
        if np.array_equal(new, level):
            break
        level = new
    order = np.argsort(level, kind="stable")
    cuts = np.flatnonzero(np.diff(level[order])) + 1
    for idx in np.split(order, cuts):
        yield Level(tx.src[idx], tx.dst[idx], tx.elements[idx] * itemsize, tx.reduce[idx],
                    tx.src_step[idx], tx.dst_step[idx])


def batch_durations(src_ep: np.ndarray, dst_ep: np.ndarray, size_bytes: np.ndarray, topology
                    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, bool]:
    """Durations of transfers that all start at time 0, and the route (offsets, links) they used.

    The last value says whether any link carried more than one of them."""
    offsets, links = topology.routes(src_ep, dst_ep)
    n = src_ep.size
    counts = np.diff(offsets)
    entry_flow = np.repeat(np.arange(n), counts)
    latency = np.bincount(entry_flow, weights=topology.latency_s[links], minlength=n)
    shared = bool(np.bincount(links, minlength=topology.num_links).max(initial=0) > 1)
    capacity = np.asarray(topology.bandwidth_Bps, dtype=np.float64)
    finish = np.where(size_bytes > 0, np.nan, latency)
    remaining = size_bytes.astype(np.float64)
    rate = np.zeros(n)
    active = np.zeros(n, dtype=bool)
    waiting = size_bytes > 0
    now = 0.0
    while waiting.any() or active.any():
        t_act = latency[waiting].min() if waiting.any() else np.inf
        t_end = now + (remaining[active] / rate[active]).min() if active.any() else np.inf
        t_next = min(t_act, t_end)
        if active.any():
            ends_now = active & (now + remaining / np.where(active, rate, 1.0)
                                 <= t_next * (1 + SAME_TIME_REL))
            remaining[active] -= rate[active] * (t_next - now)
            finish[ends_now] = t_next
            active &= ~ends_now
        now = t_next
        starting = waiting & (latency <= now * (1 + SAME_TIME_REL))
        waiting &= ~starting
        active |= starting
        if active.any():
            on = active[entry_flow]
            ids = np.flatnonzero(active)
            remap = np.full(n, -1)
            remap[ids] = np.arange(ids.size)
            rate[ids] = max_min_rates(remap[entry_flow[on]], links[on], ids.size, capacity)
    return finish, offsets, links, shared


@dataclass(frozen=True)
class LevelRun:
    time_s: float
    rank_finish_s: np.ndarray
    link_bytes: np.ndarray
    num_levels: int
    num_batches: int
    exact: bool


def simulate_levels(levels: Iterable[Level], num_ranks: int, topology, placement: np.ndarray, *,
                    gamma_s_per_byte: float = 0.0) -> LevelRun:
    """Run levels in order; see the module docstring for when the answer is exact."""
    link_bytes = np.zeros(topology.num_links)
    cache: dict[bytes, tuple] = {}
    # Per link: the latest finish so far, and whether any two transfers on it overlapped.
    link_busy_until = np.zeros(topology.num_links)
    overlap = False
    synchronized = True
    prev_last_finish = 0.0
    num_levels = 0
    ends = _StepEnds(num_ranks)
    prev = None
    for lv in levels:
        num_levels += 1
        src_ep, dst_ep = placement[lv.src], placement[lv.dst]
        # Consecutive identical levels (a ring's rounds) reuse the batch without hashing the arrays.
        if prev is not None and _same(prev, lv):
            batch = prev_batch
        else:
            key = src_ep.tobytes() + dst_ep.tobytes() + lv.size_bytes.tobytes()
            if key not in cache:
                cache[key] = _Batch(*batch_durations(src_ep, dst_ep, lv.size_bytes, topology),
                                    lv.size_bytes, topology.num_links)
            batch = cache[key]
        prev, prev_batch = lv, batch
        if batch.unique_ends is None:
            batch.unique_ends = (np.unique(lv.src).size == lv.src.size
                                 and np.unique(lv.dst).size == lv.dst.size)
        start = np.maximum(ends.before(lv.src, lv.src_step), ends.before(lv.dst, lv.dst_step))
        finish = start + batch.duration
        first, last = start.min(), finish.max()
        if first < start.max() * (1 - SAME_TIME_REL) or first < prev_last_finish * (1 - SAME_TIME_REL):
            synchronized = False
        prev_last_finish = last
        links, per_entry = batch.links, batch.per_entry
        if batch.shared:
            overlap = True
            np.maximum.at(link_busy_until, links, finish[per_entry])
        else:
            if not overlap and (link_busy_until[links] > start[per_entry] * (1 + SAME_TIME_REL)).any():
                overlap = True
            link_busy_until[links] = np.maximum(link_busy_until[links], finish[per_entry])
        link_bytes += batch.link_bytes
        reduce_s = np.where(lv.reduce, lv.size_bytes * gamma_s_per_byte, 0.0) if gamma_s_per_byte else 0.0
        ends.record(lv, finish, reduce_s, batch.unique_ends)
    rank_finish = ends.rank_finish()
    return LevelRun(time_s=float(rank_finish.max(initial=0.0)), rank_finish_s=rank_finish,
                    link_bytes=link_bytes, num_levels=num_levels, num_batches=len(cache),
                    exact=synchronized or not overlap)


def _same(a: Level, b: Level) -> bool:
    return (a.src.size == b.src.size and np.array_equal(a.src, b.src) and np.array_equal(a.dst, b.dst)
            and np.array_equal(a.size_bytes, b.size_bytes))


class _Batch:
    """A solved level: durations, routes and what they imply for links."""

    def __init__(self, duration, offsets, links, shared, size_bytes, num_links) -> None:
        self.duration = duration
        self.links = links
        self.per_entry = np.repeat(np.arange(duration.size), np.diff(offsets))
        self.shared = shared
        self.unique_ends = None
        self.link_bytes = np.bincount(links, weights=size_bytes[self.per_entry].astype(np.float64),
                                      minlength=num_links)


class _StepEnds:
    """End time of every (rank, step), stored sparsely: transfers end, then the step's reductions."""

    def __init__(self, num_ranks: int) -> None:
        self.num_ranks = num_ranks
        self.last_step = np.full(num_ranks, -1, dtype=np.int64)
        self.last_end = np.zeros(num_ranks)
        self.prev_end = np.zeros(num_ranks)
        self.reduce_s = np.zeros(num_ranks)

    def before(self, ranks: np.ndarray, steps: np.ndarray) -> np.ndarray:
        """End of step k-1 of each (rank, k); a rank's steps arrive in order, so one back suffices."""
        current = self.last_step[ranks] == steps
        done = self.last_end[ranks] + self.reduce_s[ranks]
        return np.where(steps == 0, 0.0, np.where(current, self.prev_end[ranks], done))

    def record(self, lv: Level, finish: np.ndarray, reduce_s, unique_ends: bool) -> None:
        """Add one level's transfers; within a level all entries of a rank belong to one step."""
        fmax = np.full(self.num_ranks, -np.inf)
        if unique_ends:
            fmax[lv.src] = finish
            fmax[lv.dst] = np.maximum(fmax[lv.dst], finish)
        else:
            np.maximum.at(fmax, lv.src, finish)
            np.maximum.at(fmax, lv.dst, finish)
        if np.ndim(reduce_s):
            rsum = np.bincount(lv.dst, weights=reduce_s, minlength=self.num_ranks)
        else:
            rsum = np.zeros(self.num_ranks)
        step = np.full(self.num_ranks, -1, dtype=np.int64)
        step[lv.src] = lv.src_step
        step[lv.dst] = lv.dst_step
        seen = step >= 0
        new = seen & (step != self.last_step)
        old = seen & ~new
        self.prev_end[new] = self.last_end[new] + self.reduce_s[new]
        self.last_step[new] = step[new]
        self.last_end[new] = fmax[new]
        self.reduce_s[new] = rsum[new]
        self.last_end[old] = np.maximum(self.last_end[old], fmax[old])
        self.reduce_s[old] += rsum[old]

    def rank_finish(self) -> np.ndarray:
        return np.where(self.last_step >= 0, self.last_end + self.reduce_s, 0.0)
