"""Every sync x overlap x compression mode of the trainer gives the parameters of single-process SGD.

One local spawn of 3 ranks (not a power of two, so buckets and shards split unevenly) runs every mode
in turn on a small MLP (no batch norm, so a rank's forward on its slice equals the single-process
forward on the same rows). Each rank trains on its own third of every global batch; after the steps
every rank must hold bit-identical parameters (one rank computed them and the others received them,
or all computed the same sums), equal to torch.optim.SGD on the whole batch within a tolerance: fp32
sums in another order differ by a few ulps (rtol 1e-5); fp16/bf16 on the wire round each gradient to
11/8 bits, so those modes get 1e-2 / 4e-2 relative to the largest parameter change.
"""

from __future__ import annotations

import pytest
import torch
import torch.distributed as dist
from torch import nn
from torch.nn import functional as F

from fabriclab.runtime.buckets import SGDConfig
from fabriclab.runtime.launch import LaunchConfig, spawn
from fabriclab.runtime.trainer import DataParallelTrainer, TrainerConfig

NUM_RANKS, PER_RANK, STEPS = 3, 2, 3
SGD = SGDConfig(lr=0.1, momentum=0.9, weight_decay=0.01)
# Small buckets (a few hundred bytes) so that every mode has several and overlap has work to do.
MODES = [
    dict(sync="allreduce:native", overlap="none"),
    dict(sync="allreduce:native", overlap="backward"),
    dict(sync="allreduce:ring", overlap="none"),
    dict(sync="allreduce:ring", overlap="backward"),
    dict(sync="allreduce:butterfly", overlap="backward", fusion="none"),
    dict(sync="allreduce:ring", overlap="backward", compression="fp16"),
    dict(sync="allreduce:native", overlap="backward", compression="bf16"),
    dict(sync="allreduce:chain:chunks=2", overlap="backward", fusion="horovod"),
    dict(sync="reduce:native", overlap="none"),
    dict(sync="reduce:native", overlap="forward"),
    dict(sync="reduce:native", overlap="backward"),
    dict(sync="reduce:cb", overlap="none"),
    dict(sync="reduce:chain:chunks=2", overlap="forward"),
    dict(sync="reduce:binomial", overlap="backward", compression="fp16"),
    dict(sync="ps:servers=1", overlap="none"),
    dict(sync="ps:servers=2", overlap="backward"),
    dict(sync="ps:servers=3", overlap="backward", compression="bf16", fusion="paper004"),
    dict(sync="sharded:ring", overlap="none"),
    dict(sync="sharded:ring", overlap="forward"),
    dict(sync="sharded:ring", overlap="backward"),
    dict(sync="sharded:recursive", overlap="backward", compression="fp16"),
    dict(sync="sharded:direct", overlap="backward", fusion="none"),
    # One helper thread (every bucket in order on one group) and three (buckets spread over groups).
    dict(sync="allreduce:ring", overlap="backward", comm_threads=1),
    dict(sync="reduce:cb", overlap="forward", comm_threads=3),
    dict(sync="ps:servers=2", overlap="backward", comm_threads=3),
]


def make_model() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(6, 10), nn.Tanh(), nn.Linear(10, 8), nn.Tanh(), nn.Linear(8, 3))


def batches() -> list[tuple[torch.Tensor, torch.Tensor]]:
    g = torch.Generator().manual_seed(1)
    return [(torch.randn(NUM_RANKS * PER_RANK, 6, generator=g), torch.randint(0, 3, (NUM_RANKS * PER_RANK,), generator=g))
            for _ in range(STEPS)]


def train_all_modes(ctx):
    out = []
    data = batches()
    for mode in MODES:
        model = make_model()
        config = TrainerConfig(sgd=SGD, bucket_bytes=160, first_bucket_bytes=64, cycle_time_s=1e-5, **mode)
        mine = slice(ctx.rank * PER_RANK, (ctx.rank + 1) * PER_RANK)
        example = (data[0][0][mine], data[0][1][mine])
        trainer = DataParallelTrainer(model, F.cross_entropy, config, example=example)
        ctx.mark(str(mode))
        for x, y in data:
            trainer.step(x[mine], y[mine])
        trainer.close()
        flat = torch.cat([p.detach().flatten() for p in model.parameters()])
        gathered = [torch.empty_like(flat) for _ in range(ctx.world_size)]
        dist.all_gather(gathered, flat)
        out.append((len(trainer.syncs), [g.tolist() for g in gathered]))
    return out


def reference() -> tuple[torch.Tensor, torch.Tensor]:
    model = make_model()
    start = torch.cat([p.detach().flatten() for p in model.parameters()])
    opt = torch.optim.SGD(model.parameters(), lr=SGD.lr, momentum=SGD.momentum, weight_decay=SGD.weight_decay)
    for x, y in batches():
        opt.zero_grad()
        F.cross_entropy(model(x), y).backward()
        opt.step()
    return start, torch.cat([p.detach().flatten() for p in model.parameters()])


@pytest.fixture(scope="module")
def results():
    return spawn(train_all_modes, config=LaunchConfig(num_ranks=NUM_RANKS, timeout_s=60))


@pytest.mark.parametrize("index", range(len(MODES)), ids=[",".join(map(str, m.values())) for m in MODES])
def test_mode_matches_single_process_sgd(results, index):
    num_buckets, per_rank = results[0][index]
    mode = MODES[index]
    assert num_buckets > 1 or mode.get("fusion") == "none"
    assert all(p == per_rank[0] for p in per_rank), f"{mode}: ranks disagree"
    start, expected = reference()
    got = torch.tensor(per_rank[0])
    scale = (expected - start).abs().max().item()
    tol = {"fp16": 1e-2, "bf16": 4e-2}.get(mode.get("compression"), 1e-5)
    err = (got - expected).abs().max().item()
    assert err <= tol * max(scale, 1.0) if mode.get("compression") else err <= 1e-5 * (1 + expected.abs().max().item()), \
        f"{mode}: max error {err:.3g} against single-process SGD (largest change {scale:.3g})"
