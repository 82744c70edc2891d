"""Fusion policies: how gradients, ready one by one during backward, are grouped into buckets.

Each policy maps gradients (size, ready time; backward order) to buckets (size, time the bucket is
handed to communication). All are deterministic functions of the profile: no real time is waited.

* `time-or-size`: the heuristic of Zhang et al., "Is Network the Bottleneck of Distributed Training?"
  (NetAI'20; its `BackwardProc`): add gradients to a buffer; when the backward time accumulated since
  the last flush reaches `timeout_s` (5 ms) or the buffer reaches `buffer_bytes` (64 MiB), hand it over
  at that gradient's ready time; the rest at the end of backward. (`paper004` is an old spelling.)
* `horovod`: Horovod's background loop wakes every `cycle_time_s` and fuses all gradients ready by
  then, in order, into buffers of at most `fusion_threshold_bytes` (HOROVOD_CYCLE_TIME,
  HOROVOD_FUSION_THRESHOLD; defaults 1 ms and 64 MiB since Horovod 0.21).
* `ddp`: PyTorch DDP's static buckets in reverse parameter order (here: backward order), 25 MiB each,
  the first one 1 MiB (`bucket_cap_mb`, `_DEFAULT_FIRST_BUCKET_BYTES`); a bucket is ready when its
  last gradient is.
* `none`: one bucket with everything at the end of backward (no overlap: S-Caffe's SC-B).

Try it: `fabriclab whatif --profile vgg16 --fusion ddp --workers 32 --bandwidth 10Gbps`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

MIB = 1 << 20


@dataclass(frozen=True, kw_only=True)
class Bucket:
    """Gradients handed to communication together."""

    size_bytes: int
    """Bytes of the fused gradients."""
    ready_s: float
    """When the bucket is handed over, seconds after backward started."""
    num_grads: int
    """How many gradient tensors it holds."""


@dataclass(frozen=True, kw_only=True)
class FusionPolicy:
    """A named policy and its parameters (see the module doc)."""

    name: str = "time-or-size"
    """time-or-size, horovod, ddp or none."""
    timeout_s: float = 5e-3
    """time-or-size: backward time per buffer (Zhang et al., NetAI'20: 5 ms)."""
    buffer_bytes: int = 64 * MIB
    """time-or-size: buffer size limit (Zhang et al., NetAI'20: 64 MiB)."""
    cycle_time_s: float = 1e-3
    """horovod: background cycle."""
    fusion_threshold_bytes: int = 64 * MIB
    """horovod: largest fused buffer."""
    bucket_bytes: int = 25 * MIB
    """ddp: bucket cap."""
    first_bucket_bytes: int = 1 * MIB
    """ddp: cap of the first bucket."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "name", ALIASES.get(self.name, self.name))

    def buckets(self, sizes: list[int], ready: list[float]) -> list[Bucket]:
        if self.name not in POLICIES:
            raise ValueError(f"unknown fusion policy {self.name!r}: use one of {', '.join(POLICIES)}")
        if not sizes:
            return []
        return POLICIES[self.name](self, sizes, ready)


def _time_or_size(p: FusionPolicy, sizes: list[int], ready: list[float]) -> list[Bucket]:
    out, acc_time, acc_bytes, count, prev = [], 0.0, 0, 0, 0.0
    for size, t in zip(sizes, ready):
        acc_time += t - prev
        prev = t
        acc_bytes += size
        count += 1
        if acc_time >= p.timeout_s or acc_bytes >= p.buffer_bytes:
            out.append(Bucket(size_bytes=acc_bytes, ready_s=t, num_grads=count))
            acc_time, acc_bytes, count = 0.0, 0, 0
    if count:
        out.append(Bucket(size_bytes=acc_bytes, ready_s=ready[-1], num_grads=count))
    return out


def _split(sizes: list[int], cap: int, first_cap: int | None = None) -> list[list[int]]:
    """Consecutive groups of indices whose sizes fit a cap (a tensor larger than the cap goes alone)."""
    groups, cur, total = [], [], 0
    for i, size in enumerate(sizes):
        limit = first_cap if (first_cap is not None and not groups) else cap
        if cur and total + size > limit:
            groups.append(cur)
            cur, total = [], 0
        cur.append(i)
        total += size
    if cur:
        groups.append(cur)
    return groups


def _horovod(p: FusionPolicy, sizes: list[int], ready: list[float]) -> list[Bucket]:
    out, start = [], 0
    while start < len(sizes):
        tick = (math.floor(ready[start] / p.cycle_time_s) + 1) * p.cycle_time_s
        end = start
        while end < len(sizes) and ready[end] <= tick:
            end += 1
        for group in _split(sizes[start:end], p.fusion_threshold_bytes):
            out.append(Bucket(size_bytes=sum(sizes[start + i] for i in group), ready_s=tick,
                              num_grads=len(group)))
        start = end
    return out


def _ddp(p: FusionPolicy, sizes: list[int], ready: list[float]) -> list[Bucket]:
    return [Bucket(size_bytes=sum(sizes[i] for i in g), ready_s=max(ready[i] for i in g), num_grads=len(g))
            for g in _split(sizes, p.bucket_bytes, p.first_bucket_bytes)]


def _none(p: FusionPolicy, sizes: list[int], ready: list[float]) -> list[Bucket]:
    return [Bucket(size_bytes=sum(sizes), ready_s=max(ready), num_grads=len(sizes))]


class _Named(dict):
    """Policies by name; an old spelling (ALIASES) is found too, but only current names are listed."""

    def __contains__(self, name: object) -> bool:
        return dict.__contains__(self, ALIASES.get(name, name))

    def __getitem__(self, name: str):
        return dict.__getitem__(self, ALIASES.get(name, name))


ALIASES = {"paper004": "time-or-size"}
POLICIES = _Named({"time-or-size": _time_or_size, "horovod": _horovod, "ddp": _ddp, "none": _none})
