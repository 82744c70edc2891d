"""Replayed compute: a torch module that waits out a profile's layer times instead of computing.

`ReplayNet(profile, dilation=d)` has one layer per gradient of the profile, each owning a parameter of
that gradient's size. Its forward sleeps each layer's forward time; its backward, one autograd node per
layer, sleeps until the layer's gradient was ready in the profile and then hands autograd a gradient of
the right size (filled with a constant). Any trainer sees a model like any other: its gradient hooks
fire at the profile's times and real gradient-sized tensors go over the wire, so a CPU box reproduces a
GPU cluster's communication pattern, and DDP runs the very same module.

How the times are split (the V100 `.bk.log` profiles record only gradient ready times and the batch
time): backward layer i lasts ready_i - ready_(i-1). The forward total is the sum of the profile's layer
forward times where it has them (a `fabriclab profile` JSON), else the iteration time minus the
backward time (so it also carries the optimizer update and the input pipeline of the measured run).
That total is spread over the layers in proportion to their backward times: backward is about twice the
forward for convolutions and fully connected layers, so the ratio is the same for all of them.

Waiting is sleeping, never spinning, so four ranks on two cores do not fight over the CPU: each sleeps
until an absolute deadline (start of the pass + the profile's time), so the ~0.1 ms a sleep oversleeps
does not accumulate over the 161 layers of ResNet-50. `dilation` multiplies every time: a CPU box
whose loopback moves data 10x slower than the GPU cluster's network replays with dilation 10 to keep
the profile's ratio of compute to communication.

Try it: `fabriclab train --replay resnet50 --dilation 10 --np 4 --batch-size 128 --steps 10 --warmup 2`.
"""

from __future__ import annotations

import time

import torch
from torch import nn

from fabriclab.workload.profile import Profile

FP32_BYTES = 4


def layer_times(profile: Profile, dilation: float = 1.0) -> tuple[list[float], list[float], list[int]]:
    """(forward seconds, backward seconds, elements) per replay layer, in forward order."""
    if not dilation > 0:
        raise ValueError(f"dilation must be > 0, got {dilation}")
    grads = profile.grads
    if not grads:
        raise ValueError(f"profile {profile.model!r} has no gradients to replay")
    backward, prev = [], 0.0
    for g in grads:  # backward order
        backward.append(max(0.0, g.ready_s - prev))
        prev = max(prev, g.ready_s)
    forward_total = sum(layer.forward_s for layer in profile.layers)
    if forward_total <= 0:
        forward_total = max(0.0, profile.iteration_s - profile.backward_s)
    total_backward = sum(backward)
    forward = ([forward_total * b / total_backward for b in backward] if total_backward > 0
               else [forward_total / len(grads)] * len(grads))
    elements = [max(1, g.size_bytes // FP32_BYTES) for g in grads]
    rev = slice(None, None, -1)
    return ([f * dilation for f in forward[rev]], [b * dilation for b in backward[rev]], elements[rev])


def sleep_until(deadline: float) -> None:
    delay = deadline - time.perf_counter()
    if delay > 0:
        time.sleep(delay)


class _Clock:
    """Deadlines of one pass: each layer ends at the pass's start plus the time of the layers so far."""

    def __init__(self) -> None:
        self.start, self.elapsed = 0.0, 0.0
        self.pending = True
        """True until the first layer of the next pass starts the clock."""

    def begin(self) -> None:
        self.start, self.elapsed = time.perf_counter(), 0.0

    def wait(self, seconds: float) -> None:
        self.elapsed += seconds
        sleep_until(self.start + self.elapsed)


class _ReplayLayer(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, weight, forward_s, backward_s, clocks):
        ctx.backward_s, ctx.clocks, ctx.shape, ctx.device = backward_s, clocks, weight.shape, weight.device
        clocks[0].wait(forward_s)
        return x.clone()

    @staticmethod
    def backward(ctx, grad_out):
        backward_clock = ctx.clocks[1]
        if backward_clock.pending:
            backward_clock.begin()
            backward_clock.pending = False
        backward_clock.wait(ctx.backward_s)
        grad = torch.ones((), dtype=torch.float32, device=ctx.device).expand(ctx.shape)
        return grad_out.clone(), grad, None, None, None


class ReplayLayer(nn.Module):
    """One profiled gradient: a parameter of its size and its forward and backward times."""

    def __init__(self, numel: int, forward_s: float, backward_s: float, clocks) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.zeros(numel))
        self.forward_s, self.backward_s, self._clocks = forward_s, backward_s, clocks

    def forward(self, x):
        return _ReplayLayer.apply(x, self.weight, self.forward_s, self.backward_s, self._clocks)


class ReplayNet(nn.Module):
    """A chain of `ReplayLayer`s in forward order; input and output are one-element tensors."""

    def __init__(self, profile: Profile, dilation: float = 1.0) -> None:
        super().__init__()
        forward, backward, elements = layer_times(profile, dilation)
        self.profile, self.dilation = profile, dilation
        self._clocks = (_Clock(), _Clock())
        self.layers = nn.ModuleList(ReplayLayer(n, f, b, self._clocks)
                                    for n, f, b in zip(elements, forward, backward))

    def forward(self, x):
        self._clocks[0].begin()
        self._clocks[1].pending = True  # the next backward starts its own clock
        x = x.detach()
        for layer in self.layers:
            x = layer(x)
        return x

    @property
    def iteration_s(self) -> float:
        """Forward plus backward time of one pass, dilated (what a step takes without communication)."""
        return sum(layer.forward_s + layer.backward_s for layer in self.layers)


def replay_loss(output, targets) -> torch.Tensor:
    """The loss of a replay step: the output itself (its gradient starts the backward chain)."""
    return output.sum()


def replay_batch(batch_size: int) -> tuple[torch.Tensor, torch.Tensor]:
    """A replay step's input: one element (the batch size only scales images/sec)."""
    return torch.zeros(1), torch.zeros(batch_size)
