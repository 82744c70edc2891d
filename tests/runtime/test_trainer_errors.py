"""The trainer's errors: bad combinations in one line, and a rank that dies mid-step is named."""

from __future__ import annotations

import os
import time

import pytest
from torch import nn
from torch.nn import functional as F

from fabriclab.runtime.environment import LaunchError
from fabriclab.runtime.launch import LaunchConfig, spawn
from fabriclab.runtime.trainer import DataParallelTrainer, TrainerConfig

TIMEOUT_S = 3.0


@pytest.mark.parametrize("kwargs, message", [
    (dict(overlap="forward", sync="ps:servers=2"), "--overlap forward .* only reduce and sharded sync have"),
    (dict(overlap="forward", sync="allreduce:ring"), "use --sync reduce:ALGO"),
    (dict(overlap="sideways"), "unknown overlap 'sideways'"),
    (dict(sync="gossip:ring"), "unknown sync 'gossip:ring'"),
    (dict(fusion="magic"), "unknown fusion 'magic'"),
    (dict(compression="int4"), "unknown compression 'int4'"),
])
def test_bad_configurations_fail_in_one_line(kwargs, message):
    with pytest.raises(ValueError, match=message) as info:
        TrainerConfig(**kwargs)
    assert "\n" not in str(info.value)


def dies_mid_step(ctx, victim: int):
    import torch

    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 64), nn.Tanh(), nn.Linear(64, 2))
    trainer = DataParallelTrainer(model, F.cross_entropy, TrainerConfig(sync="allreduce:ring", timeout_s=TIMEOUT_S,
                                                                        bucket_bytes=256, first_bucket_bytes=256))
    x, y = torch.randn(2, 4), torch.tensor([0, 1])

    def die(module, args):
        os._exit(7)

    for step in range(20):
        ctx.mark(f"step {step}")
        if ctx.rank == victim and step == 3:
            model[2].register_forward_pre_hook(die)  # in the middle of the forward pass
        trainer.step(x, y)
    return "finished"


def test_a_rank_that_dies_mid_step_is_named():
    start = time.monotonic()
    with pytest.raises(LaunchError) as info:
        spawn(dies_mid_step, (2,), config=LaunchConfig(num_ranks=3, timeout_s=TIMEOUT_S))
    assert time.monotonic() - start < 10 + TIMEOUT_S  # process start, the timeout, slack for 2 cores
    assert "rank 2 exited with code 7" in str(info.value)
    assert 2 in info.value.ranks


def test_an_unknown_algorithm_is_named_when_the_trainer_starts():
    with pytest.raises(LaunchError, match="unknown allreduce algorithm 'zigzag'"):
        spawn(_build_zigzag, config=LaunchConfig(num_ranks=2, timeout_s=TIMEOUT_S))


def _build_zigzag(ctx):
    DataParallelTrainer(nn.Linear(2, 2), F.mse_loss, TrainerConfig(sync="allreduce:zigzag"))
