"""Training on a GPU: `fabriclab train --device cuda --np 1` in each precision (and channels-last),
ranks sharing one GPU over Gloo, and every sync mode of the trainer on CUDA tensors giving identical
ranks that train like single-process SGD (NCCL too where there are two GPUs)."""

from __future__ import annotations

import json
import math

import pytest
import torch
import torch.distributed as dist
from torch import nn
from torch.nn import functional as F

from fabriclab.runtime.buckets import SGDConfig
from fabriclab.runtime.launch import LaunchConfig, spawn
from fabriclab.runtime.trainer import DataParallelTrainer, TrainerConfig

pytestmark = pytest.mark.gpu


def _train(fabriclab, tmp_path, *args: str) -> dict:
    record = tmp_path / "train.json"
    done = fabriclab("train", "--device", "cuda", "--model", "resnet50", "--image-size", "64", "--steps", "10",
                     "--warmup", "3", "--json", str(record), *args)
    assert done.returncode == 0, done.stdout + done.stderr
    print(done.stdout)
    return json.loads(record.read_text())


@pytest.mark.parametrize("precision", ["fp32", "fp16", "bf16"])
@pytest.mark.parametrize("channels_last", [False, True])
def test_train_on_one_gpu_in_each_precision(fabriclab, tmp_path, precision, channels_last):
    data = _train(fabriclab, tmp_path, "--np", "1", "--batch-size", "32", "--precision", precision,
                  "--runtime", "ours,ddp", *(["--channels-last"] if channels_last else []))
    for summary in data["results"]["runtimes"].values():
        assert summary["images_per_sec"] > 0 and summary["params_agree"]
        assert all(math.isfinite(loss) for loss in summary["losses"])
    launch = data["config"]["launch"]
    assert launch["backend"] == "nccl" and launch["num_gpus"] == 1


def test_two_ranks_share_one_gpu_over_gloo(fabriclab, tmp_path):
    data = _train(fabriclab, tmp_path, "--np", "2", "--batch-size", "16", "--backend", "gloo",
                  "--sync", "allreduce:ring", "--runtime", "ours,ddp", "--precision", "fp16")
    assert all(s["params_agree"] for s in data["results"]["runtimes"].values())


NUM_RANKS, PER_RANK, STEPS = 2, 3, 3
SGD = SGDConfig(lr=0.1, momentum=0.9, weight_decay=0.01)
MODES = [dict(sync="allreduce:native", overlap="backward"), dict(sync="allreduce:ring", overlap="backward"),
         dict(sync="allreduce:butterfly", overlap="none"), dict(sync="reduce:cb", overlap="forward"),
         dict(sync="reduce:native", overlap="backward"), dict(sync="sharded:ring", overlap="backward"),
         dict(sync="ps:servers=2", overlap="backward"), dict(sync="allreduce:ring", overlap="backward",
                                                             compression="fp16"),
         dict(sync="allreduce:ring", overlap="backward", precision="fp16", comm_threads=3)]


def _model() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(6, 10), nn.Tanh(), nn.Linear(10, 8), nn.Tanh(), nn.Linear(8, 3))


def _batches():
    g = torch.Generator().manual_seed(1)
    n = NUM_RANKS * PER_RANK
    return [(torch.randn(n, 6, generator=g), torch.randint(0, 3, (n,), generator=g)) for _ in range(STEPS)]


def _train_modes(ctx) -> list:
    out, data = [], _batches()
    mine = slice(ctx.rank * PER_RANK, (ctx.rank + 1) * PER_RANK)
    for mode in MODES:
        model = _model()
        config = TrainerConfig(sgd=SGD, bucket_bytes=160, first_bucket_bytes=64, device="cuda", **mode)
        trainer = DataParallelTrainer(model, F.cross_entropy, config, example=(data[0][0][mine], data[0][1][mine]))
        for x, y in data:
            trainer.step(x[mine], y[mine])
        trainer.close()
        flat = torch.cat([p.detach().flatten() for p in model.parameters()])
        assert flat.is_cuda
        gathered = [torch.empty_like(flat) for _ in range(ctx.world_size)]
        dist.all_gather(gathered, flat)
        out.append([g.cpu().tolist() for g in gathered])
    return out


def _reference() -> tuple[torch.Tensor, torch.Tensor]:
    model = _model()
    start = torch.cat([p.detach().flatten() for p in model.parameters()])
    opt = torch.optim.SGD(model.parameters(), lr=SGD.lr, momentum=SGD.momentum, weight_decay=SGD.weight_decay)
    for x, y in _batches():
        opt.zero_grad()
        F.cross_entropy(model(x), y).backward()
        opt.step()
    return start, torch.cat([p.detach().flatten() for p in model.parameters()])


def _check(results) -> None:
    start, expected = _reference()
    scale = max((expected - start).abs().max().item(), 1.0)
    for mode, per_rank in zip(MODES, results[0]):
        assert all(p == per_rank[0] for p in per_rank), f"{mode}: ranks disagree"
        low = mode.get("compression") == "fp16" or mode.get("precision") == "fp16"
        err = (torch.tensor(per_rank[0]) - expected).abs().max().item()
        assert err <= (1e-2 if low else 1e-4) * scale, f"{mode}: error {err:.3g}"


def test_every_sync_mode_on_cuda_tensors_over_gloo():
    _check(spawn(_train_modes, config=LaunchConfig(num_ranks=NUM_RANKS, device="cuda", backend="gloo",
                                                   timeout_s=120)))


def test_every_sync_mode_over_nccl(two_gpus):
    _check(spawn(_train_modes, config=LaunchConfig(num_ranks=NUM_RANKS, device="cuda", timeout_s=120)))
