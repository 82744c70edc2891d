"""Megatron-LM's tensor-parallel mappings and the experts' all-to-all, as autograd functions, each timed.

Tensors are [batch, sequence, hidden]; the sequence (dim 1) is what sequence parallelism splits.

* `copy_to` (f in Megatron's paper): identity forward, all-reduce of the gradient backward; the input of a
  column-parallel linear layer without sequence parallelism.
* `reduce_from` (g): all-reduce forward, identity backward; the output of a row-parallel layer.
* `gather_seq`: all-gather along the sequence forward, reduce-scatter backward (sequence parallelism's
  input of a column-parallel layer); `reduce_scatter_seq` the reverse (its row-parallel output).
* `split_seq` / `all_gather_seq`: this rank's slice of a replicated tensor (backward: the gradients of
  all slices gathered) and the reverse (backward: the slice); used where a part of the model works on a
  rank's tokens only (MoE layers under TP, the embedding under sequence parallelism).
* `all_to_all`: rows split by destination rank, the reverse exchange backward (experts' dispatch and
  combine).

Try it: `fabriclab train --model gpt-tiny --np 2 --tp 2 --sequence-parallel --steps 2`.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.distributed as dist

from fabriclab.runtime.llm.meter import Meter, nbytes


@dataclass
class Comm:
    """A communicator of this rank: its group, size and position, and the meter that times it."""

    name: str
    group: object
    size: int
    index: int
    meter: Meter

    def all_reduce(self, x: torch.Tensor, op=dist.ReduceOp.SUM) -> torch.Tensor:
        if self.size > 1:
            with self.meter.timed(self.name, f"{self.name}.allreduce", nbytes(x)):
                dist.all_reduce(x, op=op, group=self.group)
        return x

    def all_gather(self, x: torch.Tensor, dim: int) -> torch.Tensor:
        if self.size == 1:
            return x
        x = x.contiguous()
        parts = [torch.empty_like(x) for _ in range(self.size)]
        with self.meter.timed(self.name, f"{self.name}.allgather", nbytes(x) * self.size):
            dist.all_gather(parts, x, group=self.group)
        return torch.cat(parts, dim=dim)

    def reduce_scatter(self, x: torch.Tensor, dim: int) -> torch.Tensor:
        if self.size == 1:
            return x
        chunks = [c.contiguous() for c in x.chunk(self.size, dim=dim)]
        out = torch.empty_like(chunks[0])
        with self.meter.timed(self.name, f"{self.name}.reduce_scatter", nbytes(x)):
            dist.reduce_scatter(out, chunks, group=self.group)
        return out

    def slice(self, x: torch.Tensor, dim: int) -> torch.Tensor:
        if self.size == 1:
            return x
        return x.chunk(self.size, dim=dim)[self.index].contiguous()

    def all_to_all(self, x: torch.Tensor, send_counts: list[int], recv_counts: list[int]) -> torch.Tensor:
        out = x.new_empty((sum(recv_counts),) + tuple(x.shape[1:]))
        with self.meter.timed(self.name, f"{self.name}.alltoall", nbytes(x)):
            dist.all_to_all_single(out, x.contiguous(), output_split_sizes=recv_counts,
                                   input_split_sizes=send_counts, group=self.group)
        return out


class _CopyTo(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, comm):
        ctx.comm = comm
        return x

    @staticmethod
    def backward(ctx, g):
        return ctx.comm.all_reduce(g.contiguous().clone()), None


class _ReduceFrom(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, comm):
        return comm.all_reduce(x.contiguous().clone())

    @staticmethod
    def backward(ctx, g):
        return g, None


class _GatherSeq(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, comm):
        ctx.comm = comm
        return comm.all_gather(x, 1)

    @staticmethod
    def backward(ctx, g):
        return ctx.comm.reduce_scatter(g, 1), None


class _ReduceScatterSeq(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, comm):
        ctx.comm = comm
        return comm.reduce_scatter(x, 1)

    @staticmethod
    def backward(ctx, g):
        return ctx.comm.all_gather(g, 1), None


class _SplitSeq(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, comm):
        ctx.comm = comm
        return comm.slice(x, 1)

    @staticmethod
    def backward(ctx, g):
        return ctx.comm.all_gather(g, 1), None


class _AllGatherSeq(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, comm):
        ctx.comm = comm
        return comm.all_gather(x, 1)

    @staticmethod
    def backward(ctx, g):
        return ctx.comm.slice(g, 1), None


class _AllToAll(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, comm, send_counts, recv_counts):
        ctx.comm, ctx.counts = comm, (send_counts, recv_counts)
        return comm.all_to_all(x, send_counts, recv_counts)

    @staticmethod
    def backward(ctx, g):
        send, recv = ctx.counts
        return ctx.comm.all_to_all(g, recv, send), None, None, None


def copy_to(x, comm: Comm):
    return x if comm.size == 1 else _CopyTo.apply(x, comm)


def reduce_from(x, comm: Comm):
    return x if comm.size == 1 else _ReduceFrom.apply(x, comm)


def gather_seq(x, comm: Comm):
    return x if comm.size == 1 else _GatherSeq.apply(x, comm)


def reduce_scatter_seq(x, comm: Comm):
    return x if comm.size == 1 else _ReduceScatterSeq.apply(x, comm)


def split_seq(x, comm: Comm):
    return x if comm.size == 1 else _SplitSeq.apply(x, comm)


def all_gather_seq(x, comm: Comm):
    return x if comm.size == 1 else _AllGatherSeq.apply(x, comm)


def all_to_all(x, comm: Comm, send_counts: list[int], recv_counts: list[int]):
    return x if comm.size == 1 else _AllToAll.apply(x, comm, send_counts, recv_counts)
