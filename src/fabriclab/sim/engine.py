"""Discrete-event, flow-level engine: compute tasks and transfers with dependencies, max-min sharing.

A `TaskGraph` holds tasks of two kinds. A compute task takes `duration_s`. A transfer moves `size_bytes`
from one endpoint to another along a route: it first waits the sum of its links' latencies (once per
message), then shares bandwidth with every other active transfer by max-min fairness. Rates are
solved again only when the set of active transfers changes; transfers that end at the same instant
end together, so symmetric traffic costs few solves. No TCP window model. Each event handles the set
of tasks that end or start at that instant at once (numpy over the set, successors as arrays): no time
depends on the order within a set, and the same graph always gives the same times, bit for bit.

Try it: `fabriclab simulate collective --algo ring --topology star --hosts 8 --size 64MB`.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass, field

import numpy as np

from fabriclab.sim.maxmin import max_min_rates

COMPUTE, TRANSFER = 0, 1
# Two completion times closer than this (relative) are one event: keeps symmetric flows together.
SAME_TIME_REL = 1e-12


@dataclass
class TaskGraph:
    """Tasks and their dependencies; build with `add_compute`, `add_transfer`, `depend`."""

    kind: list[int] = field(default_factory=list)
    duration_s: list[float] = field(default_factory=list)
    size_bytes: list[float] = field(default_factory=list)
    src: list[int] = field(default_factory=list)
    dst: list[int] = field(default_factory=list)
    successors: list[list[int]] = field(default_factory=list)
    num_deps: list[int] = field(default_factory=list)

    def _add(self, kind: int, duration: float, size: float, src: int, dst: int) -> int:
        self.kind.append(kind)
        self.duration_s.append(duration)
        self.size_bytes.append(size)
        self.src.append(src)
        self.dst.append(dst)
        self.successors.append([])
        self.num_deps.append(0)
        return len(self.kind) - 1

    def add_compute(self, duration_s: float) -> int:
        if duration_s < 0:
            raise ValueError(f"compute duration {duration_s} s must be >= 0")
        return self._add(COMPUTE, duration_s, 0.0, -1, -1)

    def add_transfer(self, src: int, dst: int, size_bytes: float) -> int:
        """A transfer between two endpoints of the topology."""
        if size_bytes < 0:
            raise ValueError(f"transfer size {size_bytes} B must be >= 0")
        return self._add(TRANSFER, 0.0, size_bytes, src, dst)

    def depend(self, task: int, on: int) -> None:
        """`task` starts only after `on` has finished."""
        self.successors[on].append(task)
        self.num_deps[task] += 1

    def __len__(self) -> int:
        return len(self.kind)


@dataclass
class Timeline:
    """Start and finish time of every task, and the bytes every link carried."""

    start_s: np.ndarray
    finish_s: np.ndarray
    link_bytes: np.ndarray
    num_solves: int

    @property
    def makespan_s(self) -> float:
        return float(self.finish_s.max()) if self.finish_s.size else 0.0


def successor_arrays(graph: TaskGraph) -> tuple[np.ndarray, np.ndarray]:
    """(pointers, successors): the successors of task t are successors[pointers[t]:pointers[t + 1]]."""
    counts = np.fromiter((len(x) for x in graph.successors), dtype=np.int64, count=len(graph))
    ptr = np.concatenate(([0], np.cumsum(counts)))
    return ptr, np.fromiter((t for x in graph.successors for t in x), dtype=np.int64, count=int(ptr[-1]))


def run(graph: TaskGraph, topology, successors: tuple[np.ndarray, np.ndarray] | None = None) -> Timeline:
    """Simulate `graph` on `topology` (a `fabriclab.fabric.Topology`) and return the timeline.
    `successors`: `successor_arrays(graph)` when the caller keeps them (a graph run on many topologies)."""
    n = len(graph)
    kind = np.asarray(graph.kind, dtype=np.int8)
    size = np.asarray(graph.size_bytes, dtype=np.float64)
    durations = np.asarray(graph.duration_s, dtype=np.float64)
    # A negative or NaN time would move the clock backwards and never let the loop end.
    if n and not (np.isfinite(durations).all() and durations.min() >= 0 and np.isfinite(size).all()
                  and size.min() >= 0):
        raise ValueError("every task needs a finite duration >= 0 s and a finite size >= 0 B")
    is_tx = np.flatnonzero(kind == TRANSFER)
    ptr = np.zeros(n + 1, dtype=np.int64)
    links = np.zeros(0, dtype=np.int64)
    latency = np.zeros(n)
    if is_tx.size:
        src = np.asarray(graph.src, dtype=np.int64)[is_tx]
        dst = np.asarray(graph.dst, dtype=np.int64)[is_tx]
        offsets, links = topology.routes(src, dst)
        counts = np.zeros(n, dtype=np.int64)
        counts[is_tx] = np.diff(offsets)
        ptr[1:] = np.cumsum(counts)
        per_entry = np.repeat(np.arange(n), counts)
        latency = np.bincount(per_entry, weights=topology.latency_s[links], minlength=n)
    capacity = np.asarray(topology.bandwidth_Bps, dtype=np.float64)

    start = np.full(n, np.nan)
    finish = np.full(n, np.nan)
    # Whole sets of tasks at each event, not one task at a time: successors as one array (CSR), dependencies
    # counted down for every task that ends at once. What a task waits once started: a compute task its
    # duration, a transfer its route's latency. Times are the same sums and comparisons as one at a time.
    deps = np.array(graph.num_deps, dtype=np.int64)  # a copy: counted down below
    succ_ptr, succ = successor_arrays(graph) if successors is None else successors
    succ_counts = np.diff(succ_ptr)
    wait_s = np.where(kind == COMPUTE, durations, latency)
    moves = (kind == TRANSFER) & (size > 0) & (ptr[1:] > ptr[:-1])
    wake = np.full(n, np.inf)
    where = np.zeros(n, dtype=np.int64)  # scratch: a task's place in the set being made unique
    remaining = np.zeros(n)
    rate = np.zeros(n)
    num_solves = 0
    now = 0.0
    waiting = np.flatnonzero(deps == 0)
    start[waiting] = now
    wake[waiting] = now + wait_s[waiting]
    active = np.zeros(0, dtype=np.int64)
    while waiting.size or active.size:
        t_wake = wake[waiting].min() if waiting.size else np.inf
        if active.size:
            left = remaining[active] / rate[active]
            t_flow = now + float(left.min())
        else:
            t_flow = np.inf
        t_next = min(float(t_wake), t_flow)
        ended = np.zeros(0, dtype=np.int64)
        changed = False
        if active.size:
            done_mask = left <= (t_next - now) + SAME_TIME_REL * max(t_next, 1e-30)
            remaining[active] -= rate[active] * (t_next - now)
            if done_mask.any():
                changed = True
                ended, active = active[done_mask], active[~done_mask]
        now = t_next
        due_mask = wake[waiting] <= now * (1 + SAME_TIME_REL)
        due, waiting = waiting[due_mask], waiting[~due_mask]
        flows = moves[due]
        if flows.any():
            changed = True
            remaining[due[flows]] = size[due[flows]]
            active = np.concatenate((active, due[flows]))
        ended = np.concatenate((ended, due[~flows]))
        if ended.size:
            finish[ended] = now
            lo, cnt = succ_ptr[ended], succ_counts[ended]
            nxt = succ[np.repeat(lo - np.cumsum(cnt) + cnt, cnt) + np.arange(int(cnt.sum()))]
            if nxt.size:
                np.subtract.at(deps, nxt, 1)
                cand = nxt[deps[nxt] == 0]
                # each ready task once (a step that waited for several ends appears once per end): the last
                # mark of each wins, no sort
                where[cand] = np.arange(cand.size)
                ready = cand[where[cand] == np.arange(cand.size)]
                start[ready] = now
                wake[ready] = now + wait_s[ready]
                waiting = np.concatenate((waiting, ready))
        if changed and active.size:
            ids = active
            counts = ptr[ids + 1] - ptr[ids]
            entry_flow = np.repeat(np.arange(ids.size), counts)
            first = np.repeat(ptr[ids] - np.cumsum(counts) + counts, counts)
            entry_link = links[first + np.arange(entry_flow.size)]
            rate[ids] = max_min_rates(entry_flow, entry_link, ids.size, capacity)
            num_solves += 1
    if np.isnan(finish).any():
        stuck = int(np.flatnonzero(np.isnan(finish))[0])
        raise ValueError(f"task graph has a cycle or an unmet dependency (task {stuck} never ran)")
    link_bytes = np.zeros(capacity.shape[0])
    if links.size:
        per_entry = np.repeat(np.arange(n), np.diff(ptr))
        link_bytes = np.bincount(links, weights=size[per_entry], minlength=capacity.shape[0])
    return Timeline(start_s=start, finish_s=finish, link_bytes=link_bytes, num_solves=num_solves)
