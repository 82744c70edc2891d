"""Flows that all start at once, solved in classes: the general engine's answer at a fraction of its work.

A `FlowBatch` is what `engine.run` does with a task graph of independent transfers (no dependencies):
every transfer waits its route's latency, then shares the links by max-min fairness, re-solved whenever
a transfer starts or ends. Here transfers come in *classes* whose members have the same size, the same
latency and, by construction, the same rate at every instant; a class is solved as one flow that stands
for `entry_users` flows on every link of a *column* (a link, or a class of links that carry the same).

Where classes come from:

* `explicit_batch`: every transfer given, identical ones (same source, destination, size) merged, each
  link its own column. Exact with no assumption: identical flows get identical max-min rates.
* `sim/pairwise.py`: all-to-all on a GPU cluster, classes from the servers' symmetry (never enumerated).

`finish_times` then runs the engine's event loop over classes: the same events (starts after the
latency, ends within SAME_TIME_REL of each other together), the same water-filling (`maxmin.py`, with
`entry_users`), so it agrees with `engine.run` on the same transfers to rounding (tests check 1e-9).

Try it: `python -m pytest tests/sim/test_batch.py`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from fabriclab.sim.engine import SAME_TIME_REL
from fabriclab.sim.maxmin import max_min_rates


@dataclass(frozen=True, kw_only=True)
class FlowBatch:
    """Classes of flows that all start at time 0; entry i: class `entry_class[i]` on column `entry_column[i]`."""

    entry_class: np.ndarray
    """Flow class of each entry (int64)."""
    entry_column: np.ndarray
    """Column of each entry (int64): a link, or a class of equivalent links."""
    entry_hops: np.ndarray
    """Links of the column on one flow's route (for its latency)."""
    entry_users: np.ndarray
    """Flows of the class that cross one link of the column."""
    column_link: np.ndarray
    """A topology link standing for each column: its bandwidth and latency are the column's."""
    size_bytes: np.ndarray
    """Bytes of each flow of a class."""
    num_flows: np.ndarray
    """Flows each class stands for."""

    @property
    def num_classes(self) -> int:
        return int(self.size_bytes.size)


def explicit_batch(topology, src: np.ndarray, dst: np.ndarray, size_bytes) -> FlowBatch:
    """Every transfer src[i] -> dst[i] of `size_bytes` (one value or one per transfer); identical transfers
    form one class, every used link one column."""
    src, dst = np.asarray(src, dtype=np.int64), np.asarray(dst, dtype=np.int64)
    size = np.broadcast_to(np.asarray(size_bytes, dtype=np.float64), src.shape)
    n = topology.num_endpoints
    pair = src * n + dst
    if np.unique(size).size > 1:
        _, size_id = np.unique(size, return_inverse=True)
        pair = pair + size_id.astype(np.int64) * n * n
    keys, first, counts = np.unique(pair, return_index=True, return_counts=True)
    offsets, links = topology.routes(src[first], dst[first])
    entry_class = np.repeat(np.arange(keys.size), np.diff(offsets))
    column_link, entry_column = np.unique(links, return_inverse=True)
    return FlowBatch(entry_class=entry_class, entry_column=entry_column.astype(np.int64),
                     entry_hops=np.ones(links.size), entry_users=counts[entry_class].astype(np.float64),
                     column_link=column_link, size_bytes=size[first].astype(np.float64), num_flows=counts)


def finish_times(batch: FlowBatch, bandwidth_Bps: np.ndarray, latency_s: np.ndarray) -> np.ndarray:
    """Finish time of every class's flows, with the given per-link bandwidth and latency of the topology."""
    n = batch.num_classes
    capacity = np.asarray(bandwidth_Bps, dtype=np.float64)[batch.column_link]
    hop_latency = np.asarray(latency_s, dtype=np.float64)[batch.column_link[batch.entry_column]]
    latency = np.bincount(batch.entry_class, weights=batch.entry_hops * hop_latency, minlength=n)
    movable = (batch.size_bytes > 0) & (np.bincount(batch.entry_class, minlength=n) > 0)
    finish = np.full(n, np.nan)
    remaining = batch.size_bytes.astype(np.float64, copy=True)
    rate = np.zeros(n)
    waiting, active = np.ones(n, dtype=bool), np.zeros(n, dtype=bool)
    now = 0.0
    while waiting.any() or active.any():
        t_next = latency[waiting].min() if waiting.any() else np.inf
        changed = False
        if active.any():
            ids = np.flatnonzero(active)
            left = remaining[ids] / rate[ids]
            t_next = min(t_next, now + float(left.min()))
            done = ids[left <= (t_next - now) + SAME_TIME_REL * max(t_next, 1e-30)]
            remaining[ids] -= rate[ids] * (t_next - now)
            finish[done] = t_next
            active[done] = False
            changed = done.size > 0
        now = t_next
        starting = waiting & (latency <= now * (1 + SAME_TIME_REL))
        waiting &= ~starting
        finish[starting & ~movable] = now
        active |= starting & movable
        changed |= bool((starting & movable).any())
        if changed and active.any():
            on = active[batch.entry_class]
            ids = np.flatnonzero(active)
            compact = np.full(n, -1, dtype=np.int64)
            compact[ids] = np.arange(ids.size)
            rate[ids] = max_min_rates(compact[batch.entry_class[on]], batch.entry_column[on], ids.size, capacity,
                                      batch.entry_users[on])
    return finish


def makespan_s(batch: FlowBatch, topology) -> float:
    """When the last flow of the batch ends on `topology` (0 for an empty batch)."""
    finish = finish_times(batch, topology.bandwidth_Bps, topology.latency_s)
    return float(finish.max()) if finish.size else 0.0
