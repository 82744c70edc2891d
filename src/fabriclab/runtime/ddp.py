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

# Newer torch renamed broadcast_buffers (deprecated, with a warning) to forward_sync_buffers.
_NO_BUFFER_SYNC = ({"forward_sync_buffers": False}
                   if "forward_sync_buffers" in inspect.signature(DistributedDataParallel.__init__).parameters
                   else {"broadcast_buffers": False})


class DDPRunner:
    """One SGD step of `model` under DDP over the default process group (plain model on one rank)."""

    def __init__(self, model: nn.Module, loss_fn: Callable, sgd: SGDConfig) -> None:
        self.model, self.loss_fn = model, loss_fn
        distributed = dist.is_initialized() and dist.get_world_size() > 1
        self.net = DistributedDataParallel(model, **_NO_BUFFER_SYNC) if distributed else model
        self.optimizer = torch.optim.SGD(model.parameters(), lr=sgd.lr, momentum=sgd.momentum,
                                         weight_decay=sgd.weight_decay)
        self.last_stats: dict[str, float] = {}
        self.events: list = []

    def step(self, inputs, targets) -> float:
        self.optimizer.zero_grad()
        loss = self.loss_fn(self.net(inputs), targets)
        loss.backward()
        self.optimizer.step()
        return float(loss.detach())

    def finish(self) -> None:
        pass

    def close(self) -> None:
        pass
