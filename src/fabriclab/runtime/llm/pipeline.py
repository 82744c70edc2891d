"""One step's forward and backward passes in the order of Megatron-LM's 1F1B or interleaved 1F1B schedule
(`whatif.llm.schedule.order`, the simulator's order), with point-to-point sends between stages.

Sends are asynchronous (`isend`, waited for at the end of the step); a receive blocks right before the
pass that needs it. Every rank runs its own order, and a receive only waits for a pass the schedule runs
earlier on its sender, so nothing deadlocks when the simulator's schedule does not. The time blocked in a
receive is split later (`trainer.split_pp`) into the transfer itself (from the sender's send) and the
wait for the sender's pass (the bubble).

Try it: `fabriclab train --model gpt-tiny --np 4 --pp 4 --gbs 8 --steps 2 --trace step.json`.
"""

from __future__ import annotations

import time

import torch
import torch.distributed as dist

from fabriclab.runtime.llm.meter import nbytes
from fabriclab.whatif.llm.schedule import F, order


class Pipeline:
    """Runs the passes of this rank's chunks for one step."""

    def __init__(self, chunks, *, pp: int, vp: int, stage: int, ranks: list[int], num_microbatches: int,
                 act_shape: tuple, dtype, device, meter, data, hooks) -> None:
        self.chunks, self.pp, self.vp, self.stage, self.ranks = chunks, pp, vp, stage, ranks
        self.m, self.act_shape, self.dtype, self.meter = num_microbatches, act_shape, dtype, meter
        self.data, self.hooks, self.device = data, hooks, device
        self.ops = order(pp, vp, num_microbatches, stage)

    def _is_model_first(self, c: int) -> bool:
        return self.stage == 0 and c == 0

    def _is_model_last(self, c: int) -> bool:
        return self.stage == self.pp - 1 and c == self.vp - 1

    def _tag(self, kind: int, chunk: int, mb: int) -> int:
        return (kind * self.vp + chunk) * self.m + mb

    def run(self) -> tuple[float, list, list]:
        """Run the step's passes; returns (sum of micro-batch losses / m on the last stage, else 0, the
        sends as (tag, peer, start), the receives as (tag, peer, posted, done))."""
        self.sends, self.recvs, pending = [], [], []
        saved: dict[tuple[int, int], tuple] = {}
        loss_sum = 0.0
        for kind, c, mb in self.ops:
            if kind == F:
                x = self._input(c, mb)
                self.hooks.before_pass(c, kind, mb)
                t0 = self._now()
                targets = self.data.targets(mb) if self._is_model_last(c) else None
                out = self.chunks[c](x, targets)
                if self._is_model_last(c):
                    out = out / self.m
                self.meter.add("compute", f"F chunk {c} mb {mb}", t0, self._now())
                saved[(c, mb)] = (x, out)
                if self._is_model_last(c):
                    loss_sum += out.item()
                else:
                    pending.append(self._send(out.detach(), F, c, mb, +1))
            else:
                x, out = saved.pop((c, mb))
                grad = None if self._is_model_last(c) else self._recv(kind, c, mb, +1, out.shape)
                self.hooks.before_pass(c, kind, mb)
                t0 = self._now()
                torch.autograd.backward(out, grad)
                self.meter.add("compute", f"B chunk {c} mb {mb}", t0, self._now())
                self.hooks.after_backward(c, mb)
                if not self._is_model_first(c):
                    pending.append(self._send(x.grad, kind, c, mb, -1))
        t0 = time.perf_counter()
        for work in pending:
            work.wait()
        if pending:
            self.meter.add("pp", "pp.send wait", t0, time.perf_counter())
        return loss_sum, self.sends, self.recvs

    def _now(self) -> float:
        """The time, after the device's queued work (a GPU runs kernels asynchronously)."""
        if self.meter.sync is not None:
            self.meter.sync()
        return time.perf_counter()

    def _input(self, c: int, mb: int):
        if self._is_model_first(c):
            return self.data.inputs(mb)
        x = self._recv(F, c, mb, -1, self.act_shape)
        return x.requires_grad_()

    def _peer(self, c: int, direction: int) -> tuple[int, int]:
        """(rank, chunk) of the neighbour pass: the next stage (+1) or the previous one (-1)."""
        s = self.stage + direction
        if s == self.pp:
            return self.ranks[0], c + 1
        if s < 0:
            return self.ranks[-1], c - 1
        return self.ranks[s], c

    def _send(self, tensor, kind: int, c: int, mb: int, direction: int):
        rank, _ = self._peer(c, direction)
        tensor = tensor.contiguous()
        self.sends.append((self._tag(kind, c, mb), rank, time.perf_counter()))
        self.meter.bytes["pp"] += nbytes(tensor)
        return dist.isend(tensor, rank, tag=self._tag(kind, c, mb))

    def _recv(self, kind: int, c: int, mb: int, direction: int, shape):
        rank, their_chunk = self._peer(c, direction)
        buf = torch.empty(shape, dtype=self.dtype, device=self.device)
        t0 = time.perf_counter()
        dist.recv(buf, rank, tag=self._tag(kind, their_chunk, mb))
        t1 = time.perf_counter()
        self.recvs.append((self._tag(kind, their_chunk, mb), rank, t0, t1))
        self.meter.add("pp", f"pp.recv {'FB'[kind]} chunk {c} mb {mb}", t0, t1)
        return buf
