"""Mixed precision and channels-last in the trainer, on the CPU: ranks stay identical and train like one
process; an fp16 step with inf/nan gradients on one rank is skipped by every rank.

One spawn of 2 ranks runs a small convolutional net (no batch norm, so a rank's forward on its half
equals the single-process forward on those rows) in several modes. Each must leave both ranks with
bit-identical parameters close to single-process SGD on the whole batch: bf16 autocast rounds
activations to 8 bits (tolerance 5e-2 of the largest parameter change), fp16 to 11 bits (1e-2), fp32
with channels-last is exact up to summation order (1e-5).

The overflow case makes one element of rank 1's gradient of the first layer's weight infinite at step 2.
With sharded sync only the rank owning that element's block sees the inf after the reduce-scatter:
without the flag's all-reduce the other rank would update its block and keep its loss scale. Every rank
must skip that step (loss scale halved, one step skipped) and end where SGD without step 2 ends.
"""

from __future__ import annotations

import math

import pytest
import torch
import torch.distributed as dist
from torch import nn
from torch.nn import functional as F

from fabriclab.runtime.buckets import SGDConfig, _dense_strides
from fabriclab.runtime.launch import LaunchConfig, spawn
from fabriclab.runtime.precision import LossScaler, ScalerConfig, nonfinite_flag, prepare_batch
from fabriclab.runtime.trainer import DataParallelTrainer, TrainerConfig

NUM_RANKS, PER_RANK, STEPS, INF_STEP = 2, 2, 3, 1
SGD = SGDConfig(lr=0.05, momentum=0.9)
MODES = [
    dict(sync="allreduce:ring", overlap="backward", precision="bf16", channels_last=True),
    dict(sync="allreduce:native", overlap="none", precision="bf16"),
    dict(sync="sharded:ring", overlap="forward", precision="fp32", channels_last=True),
    dict(sync="reduce:cb", overlap="backward", precision="fp16", channels_last=True),
    dict(sync="ps:servers=2", overlap="backward", precision="fp16"),
]
TOLERANCE = {"fp32": 1e-5, "fp16": 1e-2, "bf16": 5e-2}


def make_model() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(nn.Conv2d(3, 4, 3), nn.ReLU(), nn.Conv2d(4, 6, 3, padding=1), nn.ReLU(),
                         nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(6, 3))


def batches() -> list[tuple[torch.Tensor, torch.Tensor]]:
    g = torch.Generator().manual_seed(1)
    return [(torch.randn(NUM_RANKS * PER_RANK, 3, 6, 6, generator=g),
             torch.randint(0, 3, (NUM_RANKS * PER_RANK,), generator=g)) for _ in range(STEPS)]


def _flat(model) -> torch.Tensor:
    return torch.cat([p.detach().flatten() for p in model.parameters()])


def _poison(grad: torch.Tensor) -> torch.Tensor:
    """The gradient with its first element infinite: one shard of one bucket gets the inf."""
    grad = grad.clone()
    grad.view(-1)[0] = math.inf
    return grad


def train_modes(ctx) -> list:
    out, data = [], batches()
    mine = slice(ctx.rank * PER_RANK, (ctx.rank + 1) * PER_RANK)
    for mode in MODES + [dict(sync="sharded:ring", overlap="backward", precision="fp16", inject=True)]:
        mode = dict(mode)
        inject = mode.pop("inject", False)
        model = make_model()
        config = TrainerConfig(sgd=SGD, bucket_bytes=200, first_bucket_bytes=64, **mode)
        trainer = DataParallelTrainer(model, F.cross_entropy, config, example=(data[0][0][mine], data[0][1][mine]))
        layouts = [p.is_contiguous(memory_format=torch.channels_last) for p in model.parameters() if p.dim() == 4]
        steps = [0]
        if inject and ctx.rank == 1:
            model[0].weight.register_hook(lambda g: _poison(g) if steps[0] == INF_STEP else g)
        for x, y in data:
            trainer.step(x[mine], y[mine])
            steps[0] += 1
        trainer.close()
        flat = _flat(model)
        gathered = [torch.empty_like(flat) for _ in range(ctx.world_size)]
        dist.all_gather(gathered, flat)
        out.append({"params": [g.tolist() for g in gathered], "layouts": layouts, "stats": trainer.last_stats})
    return out


def reference(skip: int | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    model = make_model()
    start = _flat(model)
    opt = torch.optim.SGD(model.parameters(), lr=SGD.lr, momentum=SGD.momentum)
    for i, (x, y) in enumerate(batches()):
        if i == skip:
            continue
        opt.zero_grad()
        F.cross_entropy(model(x), y).backward()
        opt.step()
    return start, _flat(model)


@pytest.fixture(scope="module")
def results():
    return spawn(train_modes, config=LaunchConfig(num_ranks=NUM_RANKS, timeout_s=60))


@pytest.mark.parametrize("index", range(len(MODES)), ids=[",".join(map(str, m.values())) for m in MODES])
def test_mode_keeps_ranks_identical_and_trains_like_one_process(results, index):
    mode, got = MODES[index], results[0][index]
    assert all(p == got["params"][0] for p in got["params"]), f"{mode}: ranks disagree"
    assert got["layouts"] == [mode.get("channels_last", False)] * 2  # the conv weights kept their layout
    start, expected = reference()
    scale = (expected - start).abs().max().item()
    err = (torch.tensor(got["params"][0]) - expected).abs().max().item()
    assert err <= TOLERANCE[mode["precision"]] * max(scale, 1.0), f"{mode}: error {err:.3g} (change {scale:.3g})"
    if mode["precision"] == "fp16":
        assert got["stats"]["loss_scale"] == 2.0 ** 16 and got["stats"]["skipped_steps"] == 0


def test_an_inf_gradient_on_one_rank_skips_the_step_on_every_rank(results):
    per_rank = [r[-1] for r in results.values()]
    params = per_rank[0]["params"]
    assert params[0] == params[1], "ranks disagree after the skipped step"
    assert all(r["stats"]["skipped_steps"] == 1 and r["stats"]["loss_scale"] == 2.0 ** 15 for r in per_rank)
    start, skipped = reference(skip=INF_STEP)
    _, full = reference()
    got = torch.tensor(params[0])
    assert (got - skipped).abs().max() <= 1e-2 * max((skipped - start).abs().max().item(), 1.0)
    assert (got - full).abs().max() > (got - skipped).abs().max()  # it is the skip that matches


def test_loss_scaler_policy():
    scaler = LossScaler(ScalerConfig(init_scale=8.0, growth_interval=2))
    for found in (False, True, False, False, False):
        scaler.update(found)
    assert (scaler.scale, scaler.skipped, scaler.clean_steps) == (8.0, 1, 1)
    with pytest.raises(ValueError, match="growth factor > 1"):
        ScalerConfig(growth_factor=1.0)


def test_nonfinite_flag_and_layouts():
    clean = [torch.ones(5), torch.zeros(0)]
    assert nonfinite_flag(clean, torch.device("cpu")).item() == 0.0
    for bad in (math.inf, -math.inf, math.nan):
        assert math.isnan(nonfinite_flag([torch.ones(3), torch.tensor([1.0, bad])], torch.device("cpu")).item())
    weight = torch.randn(8, 3, 5, 5).to(memory_format=torch.channels_last)
    assert _dense_strides(weight) == weight.stride() and _dense_strides(torch.randn(8, 3, 5, 5)) == (75, 25, 5, 1)
    x, y = prepare_batch((torch.randn(2, 3, 4, 4), torch.tensor([1, 2])), torch.device("cpu"), channels_last=True)
    assert x.is_contiguous(memory_format=torch.channels_last) and not x.is_contiguous() and y.tolist() == [1, 2]


@pytest.mark.parametrize("kwargs, message", [
    (dict(precision="fp8"), "unknown precision 'fp8'"), (dict(device="tpu"), "unknown device 'tpu'")])
def test_bad_precision_or_device_says_what_to_use(kwargs, message):
    with pytest.raises(ValueError, match=message):
        TrainerConfig(**kwargs)
