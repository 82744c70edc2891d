"""Discrete-event, flow-level engine: compute tasks and transfers with dependencies, max-min sharing.

A `TaskGraph` holds tasks of two kinds. A compute task takes `duration_s`. A transfer moves `size_bytes`
from one endpoint to another along a route: it first waits the sum of its links' latencies (once per
message), then shares bandwidth with every other active transfer by max-min fairness. Rates are
solved again only when the set of active transfers changes; transfers that end at the same instant
end together, so symmetric traffic costs few solves. No TCP window model. The same graph always gives
the same times, bit for bit (numpy reductions in a fixed order, ties broken by task index).

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


def run(graph: TaskGraph, topology) -> Timeline:
    """Simulate `graph` on `topology` (a `fabriclab.fabric.Topology`) and return the timeline."""
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
    deps = list(graph.num_deps)
    heap: list[tuple[float, int, int]] = []  # (time, order, task): latency ends and compute ends
    active: list[int] = []
    remaining = np.zeros(n)
    rate = np.zeros(n)
    num_solves = 0

    def begin(task: int, now: float) -> None:
        start[task] = now
        if kind[task] == COMPUTE:
            heapq.heappush(heap, (now + graph.duration_s[task], task, task))
        else:
            heapq.heappush(heap, (now + latency[task], n + task, task))

    def end(task: int, now: float, ready: list[int]) -> None:
        finish[task] = now
        for nxt in graph.successors[task]:
            deps[nxt] -= 1
            if deps[nxt] == 0:
                ready.append(nxt)

    now = 0.0
    for task in range(n):
        if deps[task] == 0:
            begin(task, now)
    while heap or active:
        t_heap = heap[0][0] if heap else np.inf
        if active:
            ids = np.asarray(active)
            left = remaining[ids] / rate[ids]
            t_flow = now + float(left.min())
        else:
            t_flow = np.inf
        t_next = min(t_heap, t_flow)
        if active:
            done_mask = left <= (t_next - now) + SAME_TIME_REL * max(t_next, 1e-30)
            remaining[ids] -= rate[ids] * (t_next - now)
        now = t_next
        changed = False
        ready: list[int] = []
        if active:
            done = ids[done_mask]
            if done.size:
                changed = True
                active = ids[~done_mask].tolist()
                for task in done.tolist():
                    end(task, now, ready)
        while heap and heap[0][0] <= now * (1 + SAME_TIME_REL):
            _, _, task = heapq.heappop(heap)
            if kind[task] == COMPUTE:
                end(task, now, ready)
            elif size[task] > 0 and ptr[task + 1] > ptr[task]:
                active.append(task)
                remaining[task] = size[task]
                changed = True
            else:
                end(task, now, ready)
        for task in ready:
            begin(task, now)
        if changed and active:
            ids = np.asarray(active)
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
