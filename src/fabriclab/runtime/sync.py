"""Gradient aggregation of one bucket, three ways, with any algorithm of `collectives/` or the native one.

* `allreduce:ALGO` (Horovod, DDP): every rank gets the sum of the bucket's gradients and updates its
  own copy of the parameters. ALGO is a schedule spec (`ring`, `butterfly`, `chain:chunks=4`, `cb`,
  ...) run by `ScheduleExecutor`, or `native` for the backend's all_reduce.
* `reduce:ALGO` (S-Caffe, Awan et al.): gradients are reduced to the root (rank 0), which alone updates
  the parameters and broadcasts them back (data propagation). ALGO serves both the reduce and the
  broadcast (`cb` is S-Caffe's hierarchical chain-binomial, `chain:chunks=8` its chunked chain).
* `sharded:ALGO` (ZeRO stage 1, PyTorch's ZeroRedundancyOptimizer): the bucket's gradients are
  reduce-scattered (ALGO: ring, recursive or direct), each rank updates only its block (split_counts:
  block r is rank r's; its momentum lives only there), and the updated parameters are allgathered with
  the same algorithm. The wire carries what a ring allreduce carries, but the update costs 1/n.
* `ps:servers=K` (Li et al. 2014, Zhang, Li, Tanimura, Nakada): K of the ranks are also servers, spread evenly (server k is
  rank floor(k n / K)). Each bucket is cut into K shards; workers push shard k to server k, which sums
  them, updates its shard of the parameters (its optimizer state lives only there) and every worker
  pulls the updated shard. Push and pull are the two phases of `collectives`' parameter-server
  allreduce schedule, run separately so that the server's update sits between them.

Compression (`fp16`, `bf16`): a bucket's gradients are divided by the number of ranks (so a sum of n
fp16 values cannot overflow where their mean does not), cast into a wire buffer, exchanged, and cast
back; parameters always travel in full precision. `grad_bytes` and `param_bytes` are what this rank's
schedules send per step; for `native` what a ring of the same collective sends (Gloo's CPU all_reduce
is a ring). Native collectives are started asynchronously, so several buckets are in flight on the
backend's own threads, as under DDP; a schedule runs to completion on the helper thread.

Try it: `fabriclab train --model resnet50 --np 4 --image-size 32 --batch-size 8 --steps 5 --warmup 1 --sync reduce:cb`.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import torch
import torch.distributed as dist

from fabriclab.collectives import registry
from fabriclab.collectives.schedule import (ALLGATHER, ALLREDUCE, BROADCAST, RECV_REDUCE, REDUCE,
                                            REDUCE_SCATTER, Schedule, split_counts)
from fabriclab.runtime.executor import BufferPool, ScheduleExecutor

NATIVE = "native"
SYNC_KINDS = ("allreduce", "reduce", "sharded", "ps")
DEFERRED = ("reduce", "sharded")
"""Kinds whose parameters come back after the update: with overlap, while the next forward runs."""
COMPRESSIONS = {"none": None, "fp16": torch.float16, "bf16": torch.bfloat16}
ROOT = 0  # S-Caffe's root solver is GPU 0


@dataclass(frozen=True, kw_only=True)
class SyncSpec:
    """A parsed `--sync` value."""

    kind: str
    """allreduce, reduce or ps."""
    algo: str
    """Schedule spec or `native`; for ps the `parameter-server:servers=K` spec."""

    @classmethod
    def parse(cls, text: str) -> "SyncSpec":
        kind, _, algo = text.strip().partition(":")
        if kind not in SYNC_KINDS:
            raise ValueError(f"unknown sync {text!r}: use allreduce:ALGO, reduce:ALGO (ALGO a schedule spec "
                             f"such as ring or cb, or native), sharded:ALGO (ring, recursive, direct) or "
                             f"ps:servers=K")
        if kind == "sharded" and algo in ("", NATIVE):
            raise ValueError(f"sync {text!r}: sharded needs a reduce-scatter / allgather schedule, e.g. "
                             f"sharded:ring (Gloo has no native reduce-scatter here)")
        if kind == "ps":
            return cls(kind=kind, algo=f"parameter-server:{algo}" if algo else "parameter-server")
        return cls(kind=kind, algo=algo or NATIVE)

    def check(self, num_ranks: int) -> None:
        """Raise a ValueError if the algorithm does not exist for this collective and rank count."""
        if self.algo == NATIVE:
            return
        if self.kind == "reduce":
            registry.parse_spec(REDUCE, self.algo, num_ranks)
            registry.parse_spec(BROADCAST, self.algo, num_ranks)
        elif self.kind == "sharded":
            registry.parse_spec(REDUCE_SCATTER, self.algo, num_ranks)
            registry.parse_spec(ALLGATHER, self.algo, num_ranks)
        else:
            registry.parse_spec(ALLREDUCE, self.algo, num_ranks)

    @property
    def text(self) -> str:
        return f"ps:{self.algo.partition(':')[2]}" if self.kind == "ps" else f"{self.kind}:{self.algo}"


class Collective:
    """One collective on buffers of one size: a schedule executor, or the backend's native op."""

    def __init__(self, collective: str, algo: str, count: int, *, group, root: int, segment_bytes: int,
                 pool: BufferPool, schedule: Schedule | None = None) -> None:
        self.collective, self.group, self.root = collective, group, root
        self.rank, size = dist.get_rank(group), dist.get_world_size(group)
        if algo == NATIVE:
            self.executor = None
            ring = registry.build_schedule(collective, "ring", size, count, root)
            self.elements_sent = ring.elements_sent(self.rank)
        else:
            schedule = schedule or registry.build_schedule(collective, algo, size, count, root)
            self.executor = ScheduleExecutor(schedule, group=group, segment_bytes=segment_bytes, pool=pool)
            self.elements_sent = schedule.elements_sent(self.rank)

    def start(self, tensor: torch.Tensor):
        """Start the collective; returns the backend's work to wait on (native), or None when it is
        already done (a schedule runs to completion on the calling thread)."""
        if self.executor is not None:
            self.executor.run(tensor)
            return None
        if self.collective == ALLREDUCE:
            return dist.all_reduce(tensor, group=self.group, async_op=True)
        if self.collective == REDUCE:
            return dist.reduce(tensor, group=self.group, group_dst=self.root, async_op=True)
        return dist.broadcast(tensor, group=self.group, group_src=self.root, async_op=True)


def ps_phases(algo: str, num_ranks: int, count: int) -> tuple[Schedule, Schedule]:
    """The push and pull halves of the parameter-server allreduce schedule (its two steps per rank)."""
    full = registry.build_schedule(ALLREDUCE, algo, num_ranks, count)
    for r, steps in enumerate(full.steps):
        assert len(steps) in (0, 2), f"rank {r}: a parameter-server schedule has a push and a pull step"
    push = dataclasses.replace(full, steps=tuple(steps[:1] for steps in full.steps))
    pull = dataclasses.replace(full, steps=tuple(steps[1:] for steps in full.steps))
    return push, pull


class BucketSync:
    """Aggregation of one bucket's gradients and, for reduce and ps, the return of its parameters.

    `grads` and `params` are this bucket's slices of the flat buffers (views, updated in place)."""

    def __init__(self, spec: SyncSpec, grads: torch.Tensor, params: torch.Tensor, *, group,
                 compression: str, segment_bytes: int, pool: BufferPool) -> None:
        self.spec, self.grads, self.params = spec, grads, params
        self.size = 1 if group is None else dist.get_world_size(group)
        self.rank = 0 if group is None else dist.get_rank(group)
        wire_dtype = None if self.size == 1 else COMPRESSIONS[compression]
        self.wire = None if wire_dtype is None else torch.empty(grads.numel(), dtype=wire_dtype,
                                                                 device=grads.device)
        wire_itemsize = (self.wire if self.wire is not None else grads).element_size()
        count = grads.numel()
        options = dict(group=group, segment_bytes=segment_bytes, pool=pool)
        self.owned: list[tuple[int, int]] = []
        """(start, stop) ranges of the bucket this rank updates: all (allreduce), all on the root
        (reduce), its shards (ps)."""
        self.grad_op = self.param_op = None
        if self.size == 1:  # nothing to exchange: this rank owns every parameter
            self.owned = [(0, count)]
        elif spec.kind == "allreduce":
            self.grad_op = Collective(ALLREDUCE, spec.algo, count, root=0, **options)
            self.param_op = None
            self.owned = [(0, count)]
        elif spec.kind == "reduce":
            self.grad_op = Collective(REDUCE, spec.algo, count, root=ROOT, **options)
            self.param_op = Collective(BROADCAST, spec.algo, count, root=ROOT, **options)
            self.owned = [(0, count)] if self.rank == ROOT else []
        elif spec.kind == "sharded":
            self.grad_op = Collective(REDUCE_SCATTER, spec.algo, count, root=0, **options)
            self.param_op = Collective(ALLGATHER, spec.algo, count, root=0, **options)
            counts = split_counts(count, self.size)
            start = sum(counts[:self.rank])
            self.owned = [(start, start + counts[self.rank])] if counts[self.rank] else []
        else:
            push, pull = ps_phases(spec.algo, self.size, count)
            self.grad_op = Collective(ALLREDUCE, spec.algo, count, root=0, schedule=push, **options)
            self.param_op = Collective(ALLREDUCE, spec.algo, count, root=0, schedule=pull, **options)
            chunks = {push.chunks[op.chunk] for op in push.ops(self.rank) if op.kind == RECV_REDUCE}
            self.owned = sorted((off, off + n) for off, n in chunks)
        self.grad_bytes = 0 if self.grad_op is None else self.grad_op.elements_sent * wire_itemsize
        self.param_bytes = 0 if self.param_op is None else self.param_op.elements_sent * params.element_size()

    @property
    def grad_scale(self) -> float:
        """Factor that turns the exchanged gradients into the mean over ranks."""
        return 1.0 if self.wire is not None else 1.0 / self.size

    def start_reduce(self):
        """Start aggregating the gradients (sum, or mean when compressed) where they are needed;
        returns what `finish_reduce` waits on. Native collectives run asynchronously on the backend's
        own threads (several buckets in flight, as DDP has them); schedules run here and now."""
        if self.size == 1:
            return None
        if self.wire is None:
            return self.grad_op.start(self.grads)
        torch.mul(self.grads, 1.0 / self.size, out=self.wire)  # divide and cast in one pass
        return self.grad_op.start(self.wire)

    def finish_reduce(self, work) -> None:
        if work is not None:
            work.wait()
        if self.wire is None or self.size == 1:
            return
        if self.spec.kind == "allreduce":
            self.grads.copy_(self.wire)
        else:
            for a, b in self.owned:
                self.grads[a:b].copy_(self.wire[a:b])

    def start_params(self):
        """Start returning the updated parameters: broadcast from the root (reduce) or pull from the
        servers (ps); returns the work to wait on, or None when done."""
        if self.param_op is None:
            return None
        return self.param_op.start(self.params)
