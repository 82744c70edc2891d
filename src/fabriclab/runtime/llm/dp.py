"""Data parallelism of the trainer: flat gradient buffers, their reduction (plain or ZeRO-sharded) and Adam.

A chunk's parameters are views of flat buffers, one for its dense parameters (reduced over the `dp`
group) and one for its experts (over `edp`), padded to a multiple of the group size; backward
accumulates every micro-batch's gradient into them. After the step's last backward (no overlap: the
prediction is told so):

* ZeRO-0: all-reduce the gradients; Adam on the whole buffer on every rank.
* ZeRO-1/2: reduce-scatter them, Adam on this rank's shard (its slice of master weights and moments),
  all-gather the updated parameters (Megatron's distributed optimizer; stage 2 frees the gradients
  outside the shard, which changes memory, not traffic).
* ZeRO-3: all-gather the parameters before every forward and backward of a chunk, reduce-scatter its
  gradients after every backward (FSDP's traffic); parameters are kept whole between passes, so the
  memory saving is not reproduced.

Gradients are sums over the group divided by dp (the loss is a mean over the global batch). Parameters
that see only this rank's tokens under TP (`tp_partial`: norms under sequence parallelism, the router)
are summed over TP first; experts are already reduced over TP inside `edp`.

Try it: `fabriclab train --model gpt-tiny --np 4 --zero 1 --steps 3`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.distributed as dist

from fabriclab.runtime.llm.comm import Comm
from fabriclab.runtime.llm.meter import nbytes


@dataclass(frozen=True, kw_only=True)
class AdamConfig:
    """Adam as torch.optim.Adam computes it (no weight decay)."""

    lr: float = 1e-3
    """Learning rate."""
    beta1: float = 0.9
    """First-moment decay."""
    beta2: float = 0.95
    """Second-moment decay."""
    eps: float = 1e-8
    """Denominator floor."""


class FlatGroup:
    """Parameters as views of one flat buffer (padded to a multiple of the group), sharded for ZeRO."""

    def __init__(self, params: list, comm: Comm, zero: int, name: str) -> None:
        self.params, self.comm, self.zero, self.name = params, comm, zero, name
        total = sum(p.numel() for p in params)
        n = comm.size
        self.padded = math.ceil(total / n) * n if total else 0
        first = params[0] if params else torch.empty(0)
        self.flat = torch.zeros(self.padded, dtype=first.dtype, device=first.device)
        self.grad = torch.zeros_like(self.flat)
        pos = 0
        self.views = []
        for p in params:
            view = self.flat[pos:pos + p.numel()].view(p.shape)
            view.copy_(p.detach())
            p.data = view
            self.views.append((pos, p.numel()))
            pos += p.numel()
        self.sharded = zero >= 1 and n > 1
        width = self.padded // n if self.sharded else self.padded
        lo = comm.index * width if self.sharded else 0
        self.shard = slice(lo, lo + width)
        self.shard_grad = torch.zeros(width, dtype=first.dtype, device=first.device)
        self.m = torch.zeros(width, dtype=first.dtype, device=first.device)
        self.v = torch.zeros(width, dtype=first.dtype, device=first.device)
        self.scratch = torch.empty_like(self.flat) if zero == 3 else None
        self.ring = None
        ring_dtypes = (torch.float32, torch.float16, torch.bfloat16)  # what the executor reduces
        if self.sharded and self.padded and self.flat.device.type == "cpu" and self.flat.dtype in ring_dtypes:
            # Gloo's reduce_scatter and all-gather are not bandwidth-optimal rings (its reduce-scatter is
            # slower than its all-reduce of the same buffer); the schedule executor's rings send what a ring
            # sends, (n - 1) / n of the buffer, as the simulator costs it.
            from fabriclab.collectives.registry import build_schedule
            from fabriclab.runtime.executor import ScheduleExecutor

            self.ring = {c: ScheduleExecutor(build_schedule(c, "ring", n, self.padded), group=comm.group)
                         for c in ("reduce_scatter", "allgather")}

    def attach_grads(self) -> None:
        """Zero the gradients and point every parameter's `.grad` at its slice (backward accumulates there)."""
        self.grad.zero_()
        self.shard_grad.zero_()
        for p, (pos, n) in zip(self.params, self.views):
            p.grad = self.grad[pos:pos + n].view(p.shape)

    def gather_params(self, into_model: bool) -> None:
        """ZeRO-3: every rank's shard of the parameters, into the model or (a graph holds them) a scratch."""
        if not self.padded or not self.sharded:
            return
        out = self.flat if into_model else self.scratch
        if not into_model:
            out[self.shard] = self.flat[self.shard]
        self._all_gather(out)

    def _all_gather(self, out: torch.Tensor) -> None:
        """Every rank's shard of `out` (this rank's already in place) into every rank's `out`."""
        with self.comm.meter.timed("dp", f"{self.name}.allgather", nbytes(out)):
            if self.ring is not None:
                self.ring["allgather"].run(out)
            else:
                dist.all_gather_into_tensor(out, out[self.shard].clone(), group=self.comm.group)

    def reduce_grads(self) -> None:
        """Sum the gradients over the group into this rank's shard (ZeRO >= 1) or everywhere (ZeRO-0)."""
        if not self.padded:
            return
        if self.comm.size == 1:
            self.shard_grad += self.grad
        elif self.sharded:
            with self.comm.meter.timed("dp", f"{self.name}.reduce_scatter", nbytes(self.grad)):
                if self.ring is not None:
                    out = self.ring["reduce_scatter"].run(self.grad)[self.shard]
                else:
                    out = torch.empty_like(self.shard_grad)
                    dist.reduce_scatter_tensor(out, self.grad, group=self.comm.group)
            self.shard_grad += out
        else:
            with self.comm.meter.timed("dp", f"{self.name}.allreduce", nbytes(self.grad)):
                dist.all_reduce(self.grad, group=self.comm.group)
            self.shard_grad += self.grad
        if self.zero == 3:
            self.grad.zero_()

    def adam(self, config: AdamConfig, step: int, divisor: float) -> None:
        if not self.padded:
            return
        g = self.shard_grad / divisor
        self.m.mul_(config.beta1).add_(g, alpha=1 - config.beta1)
        self.v.mul_(config.beta2).addcmul_(g, g, value=1 - config.beta2)
        bias1 = 1 - config.beta1 ** step
        bias2 = 1 - config.beta2 ** step
        denom = (self.v.sqrt() / math.sqrt(bias2)).add_(config.eps)
        self.flat[self.shard].addcdiv_(self.m, denom, value=-config.lr / bias1)

    def publish(self) -> None:
        """ZeRO-1/2: all-gather the updated shards (ZeRO-3 gathers before the next forward instead)."""
        if self.sharded and self.zero in (1, 2) and self.padded:
            self._all_gather(self.flat)


class ChunkData:
    """The data-parallel side of one model chunk: its dense and expert flat groups and TP-partial params."""

    def __init__(self, chunk, dp: Comm, edp: Comm, tp: Comm, zero: int, index: int) -> None:
        params = [p for p in chunk.parameters()]
        self.tp = tp
        self.partial = [p for p in params if p.tp_partial and not p.expert and tp.size > 1]
        self.groups = [FlatGroup([p for p in params if not p.expert], dp, zero, f"dp.chunk{index}"),
                       FlatGroup([p for p in params if p.expert], edp, zero, f"dp.experts.chunk{index}")]

    def sum_partial_over_tp(self) -> None:
        """Norms under sequence parallelism and the router: each TP rank saw only its tokens."""
        if self.partial:
            flat = torch.cat([p.grad.flatten() for p in self.partial])
            self.tp.all_reduce(flat)
            pos = 0
            for p in self.partial:
                p.grad.copy_(flat[pos:pos + p.numel()].view(p.shape))
                pos += p.numel()
