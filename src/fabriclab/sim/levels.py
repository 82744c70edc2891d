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
    if not (np.isfinite(gamma_s_per_byte) and gamma_s_per_byte >= 0):
        raise ValueError(f"gamma {gamma_s_per_byte}: give a finite reduction cost >= 0 seconds per byte")
    cache: dict[bytes, _Batch] = {}
    # Per link: the latest finish so far, and whether any two transfers on it overlapped.
    link_busy_until = np.zeros(topology.num_links)
    overlap = False
    synchronized = True
    prev_last_finish = 0.0
    num_levels = 0
    ends = _StepEnds(num_ranks)
    prev = prev_batch = None
    for lv in levels:
        num_levels += 1
        # Consecutive identical levels (a ring's rounds) reuse the batch without hashing the arrays.
        if prev is not None and _same(prev, lv):
            batch = prev_batch
        else:
            src_ep, dst_ep = placement[lv.src], placement[lv.dst]
            key = src_ep.tobytes() + dst_ep.tobytes() + lv.size_bytes.tobytes()
            if key not in cache:
                cache[key] = _Batch(*batch_durations(src_ep, dst_ep, lv.size_bytes, topology),
                                    lv.size_bytes, topology.num_links, lv, num_ranks)
            batch = cache[key]
        prev, prev_batch = lv, batch
        batch.uses += 1
        step = ends.lockstep_step(lv, batch)
        if step is not None:  # every rank once as sender and once as receiver, all at the same step
            before = ends.uniform_end(step)
            start = np.maximum(before[lv.src], before[lv.dst])
        else:
            start = np.maximum(ends.before(lv.src, lv.src_step), ends.before(lv.dst, lv.dst_step))
        finish = start + batch.duration
        first, last = start.min(), finish.max()
        if synchronized and (first < start.max() * (1 - SAME_TIME_REL)
                             or first < prev_last_finish * (1 - SAME_TIME_REL)):
            synchronized = False
            if not overlap:
                link_busy_until = _busy_until(cache.values(), topology.num_links)
        prev_last_finish = last
        if not overlap:  # once links overlap, only `synchronized` can keep the answer exact
            if batch.shared:
                overlap = True
            elif synchronized:
                # Every level so far ended before this one started, so no link is busy at a start; each
                # link's last finish is that of the latest level that used it (`_busy_until`).
                batch.last_finish, batch.last_use = finish, num_levels
            else:
                links, per_entry = batch.links, batch.per_entry
                if (link_busy_until[links] > start[per_entry] * (1 + SAME_TIME_REL)).any():
                    overlap = True
                link_busy_until[links] = np.maximum(link_busy_until[links], finish[per_entry])
        reduce_s = batch.reduce_s(lv, gamma_s_per_byte)
        if step is not None:
            ends.record_lockstep(step, finish, batch, reduce_s, before)
        else:
            ends.record(lv, finish, reduce_s, batch.unique_ends)
    rank_finish = ends.rank_finish()
    link_bytes = np.zeros(topology.num_links)
    for batch in cache.values():
        link_bytes += batch.uses * batch.link_bytes
    return LevelRun(time_s=float(rank_finish.max(initial=0.0)), rank_finish_s=rank_finish,
                    link_bytes=link_bytes, num_levels=num_levels, num_batches=len(cache),
                    exact=synchronized or not overlap)


def _busy_until(batches, num_links: int) -> np.ndarray:
    """Each link's latest finish while all levels ran one after another: the latest level using it wins."""
    busy = np.zeros(num_links)
    for batch in sorted((b for b in batches if b.last_use), key=lambda b: b.last_use):
        busy[batch.links] = batch.last_finish[batch.per_entry]
    return busy


def _same(a: Level, b: Level) -> bool:
    return (a.src.size == b.src.size and (a.src is b.src or np.array_equal(a.src, b.src))
            and (a.dst is b.dst or np.array_equal(a.dst, b.dst))
            and (a.size_bytes is b.size_bytes or np.array_equal(a.size_bytes, b.size_bytes)))


class _Batch:
    """A solved level: durations, routes and what they imply for links and ranks."""

    def __init__(self, duration, offsets, links, shared, size_bytes, num_links, lv: Level, num_ranks: int) -> None:
        self.duration = duration
        self.links = links
        self.per_entry = np.repeat(np.arange(duration.size), np.diff(offsets))
        self.shared = shared
        self.uses = 0
        self.last_use = 0
        self.last_finish: np.ndarray | None = None
        self.link_bytes = np.bincount(links, weights=size_bytes[self.per_entry].astype(np.float64),
                                      minlength=num_links)
        n = lv.src.size
        self.unique_ends = bool(np.bincount(lv.src).max(initial=0) <= 1 and np.bincount(lv.dst).max(initial=0) <= 1)
        # Every rank sends once and receives once: position of each rank's send and receive.
        self.permutation = self.unique_ends and n == num_ranks
        if self.permutation:
            self.send_of = np.empty(n, dtype=np.int64)
            self.send_of[lv.src] = np.arange(n)
            self.recv_of = np.empty(n, dtype=np.int64)
            self.recv_of[lv.dst] = np.arange(n)
        self._reduce: tuple | None = None

    def reduce_s(self, lv: Level, gamma_s_per_byte: float):
        """Reduction seconds per transfer (0.0 when there is no reduction cost)."""
        if not gamma_s_per_byte:
            return 0.0
        cached = self._reduce
        if cached is not None and cached[0] is lv.reduce:
            return cached[1]
        value = np.where(lv.reduce, lv.size_bytes * gamma_s_per_byte, 0.0)
        self._reduce = (lv.reduce, value)
        return value


class _StepEnds:
    """End time of every (rank, step), stored sparsely: transfers end, then the step's reductions."""

    def __init__(self, num_ranks: int) -> None:
        self.num_ranks = num_ranks
        self.last_step = np.full(num_ranks, -1, dtype=np.int64)
        self.last_end = np.zeros(num_ranks)
        self.prev_end = np.zeros(num_ranks)
        self.reduce_s = np.zeros(num_ranks)
        self.no_reduce = True
        """Whether `reduce_s` is all zeros (then it is not added)."""
        self.uniform = -1
        """The step every rank has last recorded, when it is the same for all (else None)."""

    def lockstep_step(self, lv: Level, batch: _Batch) -> int | None:
        """The level's step if it is a lock-step round after a lock-step past (see `record_lockstep`)."""
        if self.uniform is None or not batch.permutation:
            return None
        step = int(lv.src_step[0])
        if step != self.uniform + 1 or not lv.src_step.min() == lv.src_step.max() == step:
            return None
        if lv.dst_step is not lv.src_step and not lv.dst_step.min() == lv.dst_step.max() == step:
            return None
        return step

    def uniform_end(self, step: int) -> np.ndarray:
        """End of every rank's step `step - 1` (all ranks are there); do not modify it."""
        if not step:
            return np.zeros(self.num_ranks)
        return self.last_end if self.no_reduce else self.last_end + self.reduce_s

    def record_lockstep(self, step: int, finish: np.ndarray, batch: _Batch, reduce_s, before: np.ndarray) -> None:
        """Add a level in which every rank sends once and receives once, all at step `step`; `before`
        is `uniform_end(step)`."""
        self.prev_end = before  # the old `last_end`: replaced below, never changed in place
        self.last_end = np.maximum(finish[batch.send_of], finish[batch.recv_of])
        if np.ndim(reduce_s):
            self.reduce_s, self.no_reduce = reduce_s[batch.recv_of], False
        elif not self.no_reduce:
            self.reduce_s, self.no_reduce = np.zeros(self.num_ranks), True
        self.last_step.fill(step)
        self.uniform = step

    def before(self, ranks: np.ndarray, steps: np.ndarray) -> np.ndarray:
        """End of step k-1 of each (rank, k); a rank's steps arrive in order, so one back suffices."""
        current = self.last_step[ranks] == steps
        done = self.last_end[ranks] + self.reduce_s[ranks]
        return np.where(steps == 0, 0.0, np.where(current, self.prev_end[ranks], done))

    def record(self, lv: Level, finish: np.ndarray, reduce_s, unique_ends: bool) -> None:
        """Add one level's transfers; within a level all entries of a rank belong to one step."""
        self.uniform = None
        self.no_reduce = False
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
