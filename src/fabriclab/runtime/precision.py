"""Mixed precision and memory layout for training: autocast, a loss scaler for fp16, channels-last.

* `precision`: `fp32` (no autocast), `bf16` or `fp16` (forward and loss under `torch.autocast` in that
  type; parameters, gradients and the update stay fp32, as torch.amp does it).
* fp16 gradients underflow, so the loss is multiplied by a scale before backward (`LossScaler`, torch's
  GradScaler policy: start at 2^16, halve on an overflow, double after 2000 clean steps). The trainer
  does the rest on its own flat buckets: after the exchange each rank checks the gradients it updates
  for inf/nan, the ranks agree by an all-reduce of that flag (so they skip a step all together, whatever
  the sync mode and however the gradients were split), and the update divides the scale out (the fused
  SGD kernel takes it as its gradient scale: no extra pass over the gradients).
* `channels_last`: 4-D activations and convolution weights in NHWC order, which cuDNN's tensor-core
  kernels prefer; the trainer's flat buffers keep the weights' strides (`runtime.buckets`).

Try it: `fabriclab train --model resnet50 --np 1 --device cuda --precision fp16 --channels-last --steps 20`.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass

import torch
from torch import nn

PRECISIONS = {"fp32": None, "fp16": torch.float16, "bf16": torch.bfloat16}


def check_precision(precision: str) -> None:
    if precision not in PRECISIONS:
        raise ValueError(f"unknown precision {precision!r}: use one of {', '.join(PRECISIONS)}")


def autocast(device: torch.device, precision: str):
    """The context the forward pass and the loss run in: torch.autocast, or nothing for fp32."""
    dtype = PRECISIONS[precision]
    if dtype is None:
        return contextlib.nullcontext()
    return torch.autocast(device_type=device.type, dtype=dtype)


def prepare_model(model: nn.Module, device: torch.device, channels_last: bool = False) -> nn.Module:
    """Move `model` (in place) to `device`, with 4-D weights in channels-last order when asked."""
    model.to(device)
    if channels_last:
        model.to(memory_format=torch.channels_last)
    return model


def prepare_batch(tensors, device: torch.device, channels_last: bool = False, non_blocking: bool = False):
    """The batch's tensors on `device`; 4-D ones channels-last when asked (no copy when already so)."""
    out = []
    for t in tensors:
        if isinstance(t, torch.Tensor):
            t = t.to(device, non_blocking=non_blocking)
            if channels_last and t.dim() == 4:
                t = t.contiguous(memory_format=torch.channels_last)
        out.append(t)
    return tuple(out)


@dataclass(frozen=True, kw_only=True)
class ScalerConfig:
    """The dynamic loss scale of fp16 training (torch.amp.GradScaler's defaults)."""

    init_scale: float = 2.0 ** 16
    """Scale of the first step."""
    growth_factor: float = 2.0
    """Factor after `growth_interval` steps without inf/nan."""
    backoff_factor: float = 0.5
    """Factor after a step with inf/nan (that step is skipped)."""
    growth_interval: int = 2000
    """Clean steps before the scale grows."""

    def __post_init__(self) -> None:
        if not (self.init_scale > 0 and self.growth_factor > 1 and 0 < self.backoff_factor < 1
                and self.growth_interval >= 1):
            raise ValueError("loss scaler: need init scale > 0, growth factor > 1, 0 < backoff < 1 and "
                             "growth interval >= 1")


class LossScaler:
    """The loss scale as the host keeps it; every rank updates it from the same (agreed) overflow flag."""

    def __init__(self, config: ScalerConfig | None = None) -> None:
        self.config = config or ScalerConfig()
        self.scale = self.config.init_scale
        self.clean_steps = 0
        self.skipped = 0
        """Steps skipped so far for inf/nan gradients."""

    def update(self, found_inf: bool) -> None:
        cfg = self.config
        if found_inf:
            self.scale *= cfg.backoff_factor
            self.clean_steps = 0
            self.skipped += 1
        else:
            self.clean_steps += 1
            if self.clean_steps == cfg.growth_interval:
                self.scale *= cfg.growth_factor
                self.clean_steps = 0


def nonfinite_flag(ranges: list[torch.Tensor], device: torch.device) -> torch.Tensor:
    """A one-element fp32 tensor: 0 when every element of `ranges` is finite, nan otherwise.

    One reduction pass per range: the sum of a range holding inf or nan is inf or nan, and times 0 that
    is nan; a finite sum times 0 is 0. (A sum of finite values overflowing fp32 would also read as nan:
    then every rank skips one step alike, which is safe.)"""
    flag = torch.zeros((), dtype=torch.float32, device=device)
    for r in ranges:
        if r.numel():
            flag += r.sum(dtype=torch.float32) * 0.0
    return flag.reshape(1)
