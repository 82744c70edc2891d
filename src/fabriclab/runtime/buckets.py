"""Flat parameter and gradient buffers cut into buckets, and SGD on ranges of them.

Every trainable parameter becomes a view into one flat parameter buffer, and its gradient has a slice
of one flat gradient buffer, both laid out in the order backward produces the gradients (a
channels-last weight keeps its strides in both, so the gradient copy is a plain memory copy and the
element-wise update pairs every weight with its own gradient). A bucket is
then a contiguous range of both: the trainer's gradient hook copies the gradient autograd just made
into its slice and drops `.grad` (one read and one write; accumulating into a zeroed slice would cost a
memset, two reads and a write), a collective runs on the bucket in place, and SGD updates a bucket's
parameters with three vectorised ops instead of several small ops per tensor.

Which gradients share a bucket is `fabriclab.whatif.fusion.FusionPolicy`'s decision, the same code the
what-if simulator uses: `ddp` (size caps, 25 MiB and a 1 MiB first bucket), `horovod` (cycle time and
fusion threshold), `time-or-size` (Zhang et al.: timeout and buffer size) or `none` (one bucket: nothing to overlap). The
time-based policies need each gradient's ready time, which the trainer measures on rank 0 in a probe
iteration and shares, so every rank cuts the same buckets.

Try it: `fabriclab train --model resnet50 --np 2 --image-size 32 --batch-size 4 --steps 3 --warmup 1 --fusion horovod`.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from fabriclab.whatif.fusion import FusionPolicy


@dataclass(frozen=True, kw_only=True)
class BucketRange:
    """One bucket: a contiguous range of the flat buffers, in backward order."""

    index: int
    """Position in backward order (bucket 0 is the first one ready)."""
    start: int
    """First element."""
    stop: int
    """One past the last element."""
    params: tuple[int, ...]
    """Indices (into `FlatLayout.params`) of the parameters it holds."""

    @property
    def count(self) -> int:
        return self.stop - self.start


class FlatLayout:
    """Parameters of `params` (in backward order) as views of flat buffers, cut into `buckets`."""

    def __init__(self, params: list[nn.Parameter], sizes_per_bucket: list[int]) -> None:
        assert sum(sizes_per_bucket) == len(params), "every parameter belongs to exactly one bucket"
        self.params = params
        total = sum(p.numel() for p in params)
        first = params[0] if params else torch.empty(0)
        self.flat_params = torch.empty(total, dtype=first.dtype, device=first.device)
        self.flat_grads = torch.zeros_like(self.flat_params)
        self.offsets: list[int] = []
        pos = 0
        self.strides: list[tuple[int, ...]] = []
        for p in params:
            n = p.numel()
            self.offsets.append(pos)
            self.strides.append(_dense_strides(p))
            view = self.flat_params[pos:pos + n].as_strided(p.shape, self.strides[-1])
            view.copy_(p.detach())
            p.data = view
            p.grad = None
            pos += n
        self.buckets: list[BucketRange] = []
        index = 0
        for num in sizes_per_bucket:
            members = tuple(range(index, index + num))
            start = self.offsets[index]
            stop = self.offsets[index + num - 1] + params[index + num - 1].numel()
            self.buckets.append(BucketRange(index=len(self.buckets), start=start, stop=stop, params=members))
            index += num
        self.bucket_of = [0] * len(params)
        for bucket in self.buckets:
            for i in bucket.params:
                self.bucket_of[i] = bucket.index

    @property
    def numel(self) -> int:
        return self.flat_params.numel()

    def grad_slice(self, i: int) -> torch.Tensor:
        """Parameter i's slice of the flat gradient buffer, shaped and laid out like the parameter."""
        off = self.offsets[i]
        return self.flat_grads[off:off + self.params[i].numel()].as_strided(self.params[i].shape, self.strides[i])


def _dense_strides(p: torch.Tensor) -> tuple[int, ...]:
    """The strides a parameter keeps in the flat buffer: its own when it is channels-last (a dense layout
    cuDNN's fast kernels want, and autograd gives its gradient the same), else contiguous."""
    if p.dim() == 4 and not p.is_contiguous() and p.is_contiguous(memory_format=torch.channels_last):
        return tuple(p.stride())
    if p.dim() == 5 and not p.is_contiguous() and p.is_contiguous(memory_format=torch.channels_last_3d):
        return tuple(p.stride())
    return tuple(torch.empty(p.shape, device="meta").stride())


def plan_buckets(sizes_bytes: list[int], ready_s: list[float] | None, policy: FusionPolicy) -> list[int]:
    """Gradients per bucket (consecutive, backward order) under `policy`.

    Without ready times (no probe) only the size-based policies (`ddp`, `none`) can plan."""
    if not sizes_bytes:
        return []
    if ready_s is None:
        if policy.name not in ("ddp", "none"):
            raise ValueError(f"fusion {policy.name!r} needs gradient ready times: give the trainer an "
                             f"example batch to probe, or use --fusion ddp")
        ready_s = [0.0] * len(sizes_bytes)
    return [b.num_grads for b in policy.buckets(list(sizes_bytes), list(ready_s))]


# torch's fused SGD kernel (CPU since 2.4, CUDA); without it, the three-pass update below.
_FUSED_SGD = getattr(torch, "_fused_sgd_", None)
_FUSED_DTYPES = (torch.float32, torch.float64, torch.float16, torch.bfloat16)


@dataclass(frozen=True, kw_only=True)
class SGDConfig:
    """Plain SGD as torch.optim.SGD computes it (dampening 0, no Nesterov)."""

    lr: float = 0.01
    """Learning rate."""
    momentum: float = 0.9
    """Momentum factor (0 disables the momentum buffer)."""
    weight_decay: float = 0.0
    """L2 penalty added to the gradient."""

    def __post_init__(self) -> None:
        if not self.lr > 0:
            raise ValueError(f"learning rate must be > 0, got {self.lr}")
        if not 0 <= self.momentum < 1:
            raise ValueError(f"momentum must be in [0, 1), got {self.momentum}")
        if self.weight_decay < 0:
            raise ValueError(f"weight decay must be >= 0, got {self.weight_decay}")


class FlatSGD:
    """SGD on element ranges of a `FlatLayout`; the momentum buffer exists only where it is used.

    `grad_scale` is what the gradients must be multiplied by to be the average over ranks (1/n after
    a sum, 1 after a pre-divided compressed exchange). Weight decay and momentum are applied in the
    gradients' own units, so the update equals torch.optim.SGD's on the averaged gradient."""

    def __init__(self, layout: FlatLayout, config: SGDConfig) -> None:
        self.layout, self.config = layout, config
        self.momentum_buf: torch.Tensor | None = None
        self.started = False
        self._inverses: dict[tuple[float, torch.device], torch.Tensor] = {}

    def _inverse(self, grad_scale: float, device: torch.device) -> torch.Tensor:
        """1 / grad_scale as the one-element tensor the fused kernel divides by (cached)."""
        key = (grad_scale, device)
        if key not in self._inverses:
            self._inverses[key] = torch.tensor(1.0 / grad_scale, dtype=torch.float32, device=device)
        return self._inverses[key]

    def update(self, start: int, stop: int, grad_scale: float) -> None:
        if stop <= start:
            return
        cfg = self.config
        p = self.layout.flat_params[start:stop]
        g = self.layout.flat_grads[start:stop]
        if cfg.momentum and _FUSED_SGD is not None and p.dtype in _FUSED_DTYPES:
            # One pass over parameters, gradients and momentum instead of three (the update is most of
            # the trainer's CPU beyond compute). The kernel divides the gradients by `grad_scale` (and
            # leaves them so), then applies weight decay and momentum exactly as torch.optim.SGD.
            if self.momentum_buf is None:
                self.momentum_buf = torch.zeros_like(self.layout.flat_params)
            _FUSED_SGD([p], [g], [self.momentum_buf[start:stop]], weight_decay=cfg.weight_decay,
                       momentum=cfg.momentum, lr=cfg.lr, dampening=0.0, nesterov=False, maximize=False,
                       is_first_step=False, grad_scale=self._inverse(grad_scale, g.device), found_inf=None)
            return
        if cfg.weight_decay:
            g.add_(p, alpha=cfg.weight_decay / grad_scale)
        if cfg.momentum:
            if self.momentum_buf is None:
                self.momentum_buf = torch.zeros_like(self.layout.flat_params)
            buf = self.momentum_buf[start:stop]
            # buf = momentum x buf + g in one pass. torch.optim.SGD starts the buffer at the first
            # gradient; a zero buffer times momentum plus the gradient is the same thing.
            torch.add(g, buf, alpha=cfg.momentum, out=buf)
            g = buf
        p.add_(g, alpha=-cfg.lr * grad_scale)
