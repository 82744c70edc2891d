"""One training iteration, replayed: backward emits buckets, communication runs them in order.

Backward starts at 0 and hands bucket i to communication at its ready time; buckets are all-reduced one
after another (FIFO, as Zhang et al.'s all-reduce process and Horovod's one background thread do), each
starting at max(its ready time, the end of the previous one), so communication overlaps the rest of
backward. With t_sync the end of the last all-reduce and t_back the end of backward,
t_overhead = t_sync - t_back, and Zhang et al.'s scaling factor is f = t_batch / (t_batch + t_overhead).

Try it: `fabriclab whatif --profile resnet50 --workers 16 --bandwidth 10Gbps`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable

from fabriclab.whatif.fusion import FusionPolicy
from fabriclab.workload.profile import Profile


@dataclass(frozen=True, kw_only=True)
class IterationResult:
    """What one what-if point gives."""

    t_batch_s: float
    """Single-device iteration time (profile)."""
    t_back_s: float
    """End of backward (the last gradient's ready time)."""
    t_sync_s: float
    """End of the last bucket's all-reduce (at least t_back)."""
    comm_s: float
    """Sum of all buckets' all-reduce times."""
    num_buckets: int
    """Buckets the fusion policy made."""

    @property
    def overhead_s(self) -> float:
        """t_overhead = t_sync - t_back: communication that backward did not hide."""
        return self.t_sync_s - self.t_back_s

    @property
    def exposed_fraction(self) -> float:
        return self.overhead_s / self.comm_s if self.comm_s > 0 else 0.0

    @property
    def iteration_s(self) -> float:
        return self.t_batch_s + self.overhead_s

    @property
    def scaling_factor(self) -> float:
        return self.t_batch_s / self.iteration_s


def simulate_iteration(profile: Profile, fusion: FusionPolicy, allreduce_s: Callable[[float], float]
                       ) -> IterationResult:
    """Replay `profile`'s backward with `fusion`, costing each bucket with `allreduce_s(size_bytes)`."""
    sizes = [g.size_bytes for g in profile.grads]
    ready = [g.ready_s for g in profile.grads]
    buckets = fusion.buckets(sizes, ready)
    t_back = profile.backward_s
    end, comm = 0.0, 0.0
    for b in buckets:
        cost = allreduce_s(b.size_bytes)
        comm += cost
        end = max(end, b.ready_s) + cost
    return IterationResult(t_batch_s=profile.iteration_s, t_back_s=t_back, t_sync_s=max(end, t_back),
                           comm_s=comm, num_buckets=len(buckets))


def simulate_horovod_iteration(profile: Profile, fusion: FusionPolicy, allreduce_s: Callable[[float], float],
                               *, negotiation_s: float = 0.0) -> IterationResult:
    """Horovod's background loop: fuse what is ready when the loop comes around, not on a fixed clock.

    A cycle starts `fusion.cycle_time_s` after the previous one started, or when the previous cycle's
    all-reduces end if they take longer (Horovod's `RunLoopOnce` sleeps only the rest of the cycle);
    it spends `negotiation_s` agreeing on what every rank has ready, then all-reduces every gradient
    ready by its start, in buffers of at most `fusion.fusion_threshold_bytes`, one after another. So
    slow communication makes fewer, larger buffers (and pays fewer per-buffer latencies) than
    `simulate_iteration` with the `horovod` policy, whose buckets are fixed by the clock alone."""
    sizes = [g.size_bytes for g in profile.grads]
    ready = [g.ready_s for g in profile.grads]
    t_back = profile.backward_s
    start, nxt, comm, buckets, end = 0.0, 0, 0.0, 0, 0.0
    while nxt < len(sizes):
        # Sleep to the next tick; if nothing is ready then, sleep whole cycles until something is.
        start += fusion.cycle_time_s
        if ready[nxt] > start:
            start += fusion.cycle_time_s * math.ceil((ready[nxt] - start) / fusion.cycle_time_s - 1e-12)
        t = start + negotiation_s
        last = nxt
        while last < len(sizes) and ready[last] <= start:
            last += 1
        buffer = 0
        for i in range(nxt, last + 1):
            if i == last or (buffer and buffer + sizes[i] > fusion.fusion_threshold_bytes):
                cost = allreduce_s(buffer)
                t += cost
                comm += cost
                buckets += 1
                buffer = 0
            if i < last:
                buffer += sizes[i]
        nxt, end = last, t
        start = max(start, end - fusion.cycle_time_s)
    return IterationResult(t_batch_s=profile.iteration_s, t_back_s=t_back, t_sync_s=max(end, t_back),
                           comm_s=comm, num_buckets=buckets)
