"""The peer: the same model and step under PyTorch DistributedDataParallel and torch.optim.SGD.

DDP as it comes (25 MiB buckets, 1 MiB first bucket, its C++ reducer overlapping allreduce with
backward), except that it does not broadcast buffers before every forward: our trainer keeps
batch-norm statistics per rank, so both do the same communication.

Try it: `fabriclab train --model resnet50 --np 4 --image-size 32 --batch-size 8 --steps 5 --warmup 1 --runtime ours,ddp`.
"""

from __future__ import annotations

import inspect
from typing import Callable

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel

from fabriclab.runtime.buckets import SGDConfig
from fabriclab.runtime.devices import compute_device
from fabriclab.runtime.precision import autocast, prepare_batch, prepare_model

# Newer torch renamed broadcast_buffers (deprecated, with a warning) to forward_sync_buffers.
_NO_BUFFER_SYNC = ({"forward_sync_buffers": False}
                   if "forward_sync_buffers" in inspect.signature(DistributedDataParallel.__init__).parameters
                   else {"broadcast_buffers": False})


class DDPRunner:
    """One SGD step of `model` under DDP over the default process group; on one rank the plain loop
    (zero_grad, forward, backward, torch.optim.SGD step) that `bench.train_overhead` measures against.

    On `device` cuda the model moves to the current GPU; `precision` bf16/fp16 runs forward and loss
    under torch.autocast, fp16 with torch.amp.GradScaler, as a PyTorch training script does."""

    def __init__(self, model: nn.Module, loss_fn: Callable, sgd: SGDConfig, *, device: str = "cpu",
                 precision: str = "fp32", channels_last: bool = False) -> None:
        self.model, self.loss_fn = model, loss_fn
        self.device = compute_device(device)
        self.precision, self.channels_last = precision, channels_last
        prepare_model(model, self.device, channels_last)
        distributed = dist.is_initialized() and dist.get_world_size() > 1
        ids = {"device_ids": [self.device.index]} if self.device.type == "cuda" else {}
        self.net = DistributedDataParallel(model, **ids, **_NO_BUFFER_SYNC) if distributed else model
        self.optimizer = torch.optim.SGD(model.parameters(), lr=sgd.lr, momentum=sgd.momentum,
                                         weight_decay=sgd.weight_decay)
        self.scaler = torch.amp.GradScaler(self.device.type) if precision == "fp16" else None
        self.last_stats: dict[str, float] = {}
        self.events: list = []

    def step(self, inputs, targets) -> float:
        inputs, targets = prepare_batch((inputs, targets), self.device, self.channels_last, non_blocking=True)
        self.optimizer.zero_grad()
        with autocast(self.device, self.precision):
            loss = self.loss_fn(self.net(inputs), targets)
        if self.scaler is None:
            loss.backward()
            self.optimizer.step()
        else:
            self.scaler.scale(loss).backward()
            self.scaler.step(self.optimizer)
            self.scaler.update()
        return float(loss.detach())

    def finish(self) -> None:
        pass

    def close(self) -> None:
        pass
