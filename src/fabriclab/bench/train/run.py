"""Training benchmark in the style of tf_cnn_benchmarks (as Samsi et al. ran it), for our trainer and DDP
side by side.

Each rank builds the model once per runtime (`ours`: `runtime.trainer.DataParallelTrainer`; `ddp`:
DistributedDataParallel, the peer) from the same seed, then runs `warmup` untimed and `steps` timed
steps; when both runtimes are asked for they take turns step by step, so a change of machine load hits
them alike and their ratio stays meaningful. A step is timed from a barrier to the end of its update,
batch fetch included (tf_cnn_benchmarks times the whole step); its time is the slowest rank's (times
are gathered after the loop). `--batch-size` is the global batch, split evenly over the ranks (S-Caffe's
strong scaling); images/sec counts the global batch.

Inputs: `synthetic` (one fixed batch in memory per rank), a dataset folder of TFRecord shards read by
parallel readers (`runtime.data`), or `replay` (`runtime.replay`: layers wait out a profile's times).

Then a 1-rank run of the same per-rank batch gives the single-device throughput T for the scaling
factor T_n / (n T) of Zhang et al. (NetAI'20) (skipped under torchrun/Slurm, which fix the world
size). Every run checks that the ranks end with identical parameters (`params_agree`).

Try it: `fabriclab train --model resnet50 --np 4 --image-size 32 --batch-size 32 --steps 20 --warmup 5 --runtime ours,ddp`.
"""

from __future__ import annotations

import dataclasses
import time
from typing import Callable

import torch
import torch.distributed as dist

# The config and its checks live without torch (the CLI checks its input before importing torch).
from fabriclab.bench.train.config import RUNTIMES, SYNTHETIC, TrainBenchConfig, check_batch
from fabriclab.bench.train.report import summarize
from fabriclab.runtime.data import (ShardReader, SyntheticSource, image_size_of, list_shards, on_device,
                                    rank_shards)
from fabriclab.runtime.ddp import DDPRunner
from fabriclab.runtime.launch import LaunchConfig, RankContext, launch
from fabriclab.runtime.meters import HostMeter
from fabriclab.runtime.trainer import DataParallelTrainer, TrainerConfig

__all__ = ["RUNTIMES", "SYNTHETIC", "TrainBenchConfig", "check_batch", "run_train_bench", "bench_rank"]


def run_train_bench(config: TrainBenchConfig, *, on_message: Callable[[int, dict], None] | None = None) -> dict:
    """Run the benchmark (and the 1-rank baseline); returns the summary of every runtime.

    `on_message(rank, message)` gets rank 0's report of every step as it ends (`runtime`, `step`,
    `timed`, `seconds`: rank 0's own time, `loss`, and `baseline`: True in the 1-rank run)."""
    if config.trainer is None:
        config = dataclasses.replace(config, trainer=TrainerConfig())
    if config.data != SYNTHETIC:  # a missing shard fails here, in one line, before any rank starts
        size = image_size_of(list_shards(config.data)[0])
        if config.image_size is not None and config.image_size != size:
            raise ValueError(f"the dataset's images are {size}x{size} but --image-size is {config.image_size}: "
                             f"drop --image-size or make the dataset with --image-size {config.image_size}")
    lc = LaunchConfig(num_ranks=config.num_ranks, device=config.trainer.device, backend=config.backend,
                      timeout_s=config.timeout_s)
    outcome = launch(bench_rank, (config,), config=lc, on_message=on_message)
    result = outcome.results[min(outcome.results)]
    baseline = None
    if config.baseline and outcome.external is None and config.num_ranks > 1:
        one = dataclasses.replace(config, num_ranks=1, batch_size=config.batch_size // config.num_ranks,
                                  runtimes=("ours",), trace_steps=0, baseline=False)
        single = launch(bench_rank, (one,), config=dataclasses.replace(lc, num_ranks=1),
                        on_message=None if on_message is None else (
                            lambda rank, message: on_message(rank, {**message, "baseline": True})))
        baseline = single.results[0]["runtimes"]["ours"]["images_per_sec"]
    elif config.num_ranks == 1:
        baseline = result["runtimes"][config.runtimes[0]]["images_per_sec"]
    result["launch"] = outcome.placement
    for summary in result["runtimes"].values():
        summary["single_rank_images_per_sec"] = baseline
        summary["scaling_factor"] = (summary["images_per_sec"] / (result["num_ranks"] * baseline)
                                     if baseline else None)
    return result


def _workload(config: TrainBenchConfig, per_rank: int, rank: int, world_size: int):
    """(model builder, loss function, data source) of this rank."""
    if config.replay is not None:
        from fabriclab.runtime.replay import ReplayNet, replay_batch, replay_loss
        from fabriclab.workload.profile import load_profile

        profile = load_profile(config.replay)
        return lambda: ReplayNet(profile, config.dilation), replay_loss, SyntheticSource(replay_batch(per_rank))
    from fabriclab.workload.models import get_model
    from fabriclab.workload.models.data import synthetic_batch, training_loss

    def loss(output, targets):
        return training_loss(config.model, output, targets)

    if config.data == SYNTHETIC:
        source = SyntheticSource(synthetic_batch(config.model, per_rank, input_size=config.image_size,
                                                 seed=config.seed + rank))
    else:
        source = ShardReader(rank_shards(list_shards(config.data), rank, world_size), per_rank,
                             prefetch=config.prefetch)
    return lambda: get_model(config.model), loss, source


def bench_rank(ctx: RankContext, config: TrainBenchConfig) -> dict:
    """The benchmark on one rank; every rank returns the same summary."""
    check_batch(config.batch_size, ctx.world_size)
    per_rank = config.batch_size // ctx.world_size
    build, loss_fn, source = _workload(config, per_rank, ctx.rank, ctx.world_size)
    source = on_device(source, ctx.device, config.trainer.channels_last)
    runners = {}
    for name in config.runtimes:
        torch.manual_seed(config.seed)
        model = build()
        if name == "ours":
            runners[name] = DataParallelTrainer(model, loss_fn, config.trainer, example=source.next(),
                                                trace=config.trace_steps > 0)
        else:
            runners[name] = DDPRunner(model, loss_fn, config.trainer.sgd, **config.trainer.compute_options)
    meter = HostMeter() if ctx.local_rank == 0 else None
    times = {n: [] for n in runners}
    losses = {n: [] for n in runners}
    stats = {n: [] for n in runners}
    traced: list = []
    for step in range(config.warmup + config.steps):
        ctx.mark(f"step {step}")
        timed = step >= config.warmup
        for name, runner in runners.items():
            dist.barrier()
            if meter and timed:
                meter.start(name)
            start, cpu = time.perf_counter(), time.process_time()
            loss = runner.step(*source.next())
            elapsed, cpu = time.perf_counter() - start, time.process_time() - cpu
            if meter and timed:
                meter.stop()
            if timed:
                times[name].append(elapsed)
                losses[name].append(loss)
                # CPU seconds of this process (every thread) per step: on a CPU-bound box the
                # runtime that needs less of it per step is the faster one.
                stats[name].append({**runner.last_stats, "cpu_s": cpu})
                if name == "ours" and step >= config.warmup + config.steps - config.trace_steps:
                    traced += runner.events
            if ctx.rank == 0:
                ctx.report({"runtime": name, "step": step, "timed": timed, "seconds": elapsed, "loss": loss})
    source.close()
    for runner in runners.values():
        runner.finish()
    result = {"num_ranks": ctx.world_size, "per_rank_batch": per_rank, "global_batch": config.batch_size,
              "runtimes": {}}
    for name, runner in runners.items():
        slowest = _gather_max(times[name])
        result["runtimes"][name] = summarize(
            slowest, losses[name], _mean_stats(stats[name], ctx.world_size), config.batch_size,
            meter.summary(name) if meter else {}, _params_agree(runner.model, ctx.world_size))
    if config.trace_steps:
        everyone = [None] * ctx.world_size
        dist.all_gather_object(everyone, traced)
        result["trace"] = dict(enumerate(everyone))
    for runner in runners.values():
        runner.close()
    return result


def _gather_max(values: list[float]) -> list[float]:
    local = torch.tensor(values, dtype=torch.float64)
    if not dist.is_initialized() or dist.get_world_size() == 1:
        return local.tolist()
    everyone = [torch.empty_like(local) for _ in range(dist.get_world_size())]
    dist.all_gather(everyone, local)
    return torch.stack(everyone).amax(0).tolist()


def _mean_stats(stats: list[dict], world_size: int) -> dict[str, float]:
    """Per-step means of the trainer's stats, averaged over the ranks (empty for DDP)."""
    keys = sorted({k for s in stats for k in s})
    if not keys:
        return {}
    local = torch.tensor([sum(s.get(k, 0.0) for s in stats) / len(stats) for k in keys], dtype=torch.float64)
    if world_size > 1:
        dist.all_reduce(local)
    return dict(zip(keys, (local / world_size).tolist()))


def _params_agree(model, world_size: int) -> bool:
    """The correctness check of every run: all ranks end with bit-identical parameters."""
    flat = torch.cat([p.detach().flatten().double() for p in model.parameters()]).cpu()
    digest = torch.stack([flat.sum(), (flat * torch.arange(1, flat.numel() + 1, dtype=torch.float64)).sum()])
    if world_size == 1:
        return True
    everyone = [torch.empty_like(digest) for _ in range(world_size)]
    dist.all_gather(everyone, digest)
    # NaN == NaN here: a diverged run whose ranks diverged alike still agrees.
    return all(torch.allclose(d, everyone[0], rtol=0, atol=0, equal_nan=True) for d in everyone)
