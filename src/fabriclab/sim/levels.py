"""The level engine: a fast path for large schedules that is exact where symmetry makes it so.

Transfers are grouped by *level*, their depth in the schedule's dependency graph (for lock-step
algorithms such as ring and butterfly, the round). Each level's transfers are simulated as one batch
that starts together (max-min sharing, re-solved as flows end, fully vectorized); a transfer then
starts when its sender and receiver have finished their previous steps, and lasts what the batch gave
it. Identical levels (same endpoints and sizes) are solved once. A level may stand for a run of identical
rounds (`Level.repeat`, a ring's rounds); once every rank's round ends the same time after its previous
one (a steady state: a ring on 16,384 hosts reaches it after a few dozen rounds), the rest of the run is
that round shifted, so it is added in one step and the time grows with the hosts, not their square.

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

from dataclasses import dataclass, replace
from typing import Iterable, Iterator

import numpy as np

from fabriclab.sim.maxmin import max_min_rates
from fabriclab.sim.step_ends import StepEnds

SAME_TIME_REL = 1e-12
# A run of identical lock-step rounds is in a steady state when every rank's round ends the same time after
# its previous one, to this share of the clock (float rounding is ~1e-16; real differences, a latency of
# 1e-7 s against a clock of 1 s, are far above it).
_STEADY_REL = 1e-13


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
    repeat: int = 1
    """This level and `repeat - 1` more like it, each one step later at every rank (a ring's rounds)."""


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
    runner = _Runner(num_ranks, topology, placement, gamma_s_per_byte)
    for lv in levels:
        runner.run(lv)
    return runner.result()


class _Runner:
    """The level engine's state between levels."""

    def __init__(self, num_ranks: int, topology, placement: np.ndarray, gamma_s_per_byte: float) -> None:
        self.num_ranks, self.topology, self.placement, self.gamma = num_ranks, topology, placement, gamma_s_per_byte
        self.cache: dict[bytes, _Batch] = {}
        # Per link: the latest finish so far, and whether any two transfers on it overlapped.
        self.link_busy_until = np.zeros(topology.num_links)
        self.overlap = False
        self.synchronized = True
        self.prev_last_finish = 0.0
        self.num_levels = 0
        self.ends = StepEnds(num_ranks)
        self.prev: Level | None = None
        self.prev_batch: _Batch | None = None

    def batch(self, lv: Level) -> _Batch:
        # Consecutive identical levels (a ring's rounds) reuse the batch without hashing the arrays.
        if self.prev is not None and _same(self.prev, lv):
            return self.prev_batch
        src_ep, dst_ep = self.placement[lv.src], self.placement[lv.dst]
        key = src_ep.tobytes() + dst_ep.tobytes() + lv.size_bytes.tobytes()
        if key not in self.cache:
            self.cache[key] = _Batch(*batch_durations(src_ep, dst_ep, lv.size_bytes, self.topology),
                                     lv.size_bytes, self.topology.num_links, lv, self.num_ranks)
        return self.cache[key]

    def run(self, lv: Level) -> None:
        """`lv` and its `repeat - 1` repetitions; a lock-step run that reaches a steady state (every rank's
        round ends the same time after its previous one) skips the rest: each later round is the last one
        shifted by that time, exactly, since a round's ends are a shift-equivariant function of the
        previous round's ends (max of two ends plus a duration)."""
        batch = self.batch(lv)
        self.prev, self.prev_batch = lv, batch
        step = self.ends.lockstep_step(lv, batch)
        for rep in range(lv.repeat):
            if step is not None and self.ends.uniform != step + rep - 1:
                step = None
            now = lv if step is not None or not rep else replace(lv, src_step=lv.src_step + rep,
                                                                dst_step=lv.dst_step + rep)
            flags = (self.synchronized, self.overlap)
            before, finish = self.level(now, batch, None if step is None else step + rep)
            left = lv.repeat - rep - 1
            if step is not None and rep and left and flags == (self.synchronized, self.overlap):
                delta = self.ends.uniform_end(step + rep + 1) - before
                if np.ptp(delta) <= _STEADY_REL * float(np.abs(before).max()):
                    self.skip(batch, left, float(delta.mean()), finish)
                    return

    def level(self, lv: Level, batch: _Batch, step: int | None) -> tuple[np.ndarray | None, np.ndarray]:
        """One level at lock-step `step` (None: not a lock-step round); (ends before it, its finishes)."""
        self.num_levels += 1
        batch.uses += 1
        before = None
        if step is not None:  # every rank once as sender and once as receiver, all at the same step
            before = self.ends.uniform_end(step)
            start = np.maximum(before[lv.src], before[lv.dst])
        else:
            start = np.maximum(self.ends.before(lv.src, lv.src_step), self.ends.before(lv.dst, lv.dst_step))
        finish = start + batch.duration
        first, last = start.min(), finish.max()
        if self.synchronized and (first < start.max() * (1 - SAME_TIME_REL)
                                  or first < self.prev_last_finish * (1 - SAME_TIME_REL)):
            self.synchronized = False
            if not self.overlap:
                self.link_busy_until = _busy_until(self.cache.values(), self.topology.num_links)
        self.prev_last_finish = last
        if not self.overlap:  # once links overlap, only `synchronized` can keep the answer exact
            if batch.shared:
                self.overlap = True
            elif self.synchronized:
                # Every level so far ended before this one started, so no link is busy at a start; each
                # link's last finish is that of the latest level that used it (`_busy_until`).
                batch.last_finish, batch.last_use = finish, self.num_levels
            else:
                links, per_entry = batch.links, batch.per_entry
                if (self.link_busy_until[links] > start[per_entry] * (1 + SAME_TIME_REL)).any():
                    self.overlap = True
                self.link_busy_until[links] = np.maximum(self.link_busy_until[links], finish[per_entry])
        reduce_s = batch.reduce_s(lv, self.gamma)
        if step is not None:
            self.ends.record_lockstep(step, finish, batch, reduce_s, before)
        else:
            self.ends.record(lv, finish, reduce_s, batch.unique_ends)
        return before, finish

    def skip(self, batch: _Batch, rounds: int, by_s: float, finish: np.ndarray) -> None:
        """Account for `rounds` more rounds of `batch`, each the last one shifted by `by_s` more."""
        self.num_levels += rounds
        batch.uses += rounds
        self.ends.shift(rounds, by_s)
        self.prev_last_finish += rounds * by_s
        if not self.overlap:
            if self.synchronized:
                batch.last_finish, batch.last_use = finish + rounds * by_s, self.num_levels
            else:
                links, per_entry = batch.links, batch.per_entry
                self.link_busy_until[links] = np.maximum(self.link_busy_until[links],
                                                         finish[per_entry] + rounds * by_s)

    def result(self) -> LevelRun:
        rank_finish = self.ends.rank_finish()
        link_bytes = np.zeros(self.topology.num_links)
        for batch in self.cache.values():
            link_bytes += batch.uses * batch.link_bytes
        return LevelRun(time_s=float(rank_finish.max(initial=0.0)), rank_finish_s=rank_finish,
                        link_bytes=link_bytes, num_levels=self.num_levels, num_batches=len(self.cache),
                        exact=self.synchronized or not self.overlap)


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
