"""The training benchmark's configuration and its checks, without torch (`bench.train` runs it).

`TrainBenchConfig` refuses, before any rank starts: unknown runtimes and models, image sizes the model
cannot take, a global batch that does not split over the ranks, more local ranks than this machine
holds, a run whose ranks would not fit its memory (`training_memory_bytes`, a rough estimate from
measurements here), non-finite or out-of-range numbers (dilation, timeout, steps).

Try it: `fabriclab train --np 4 --batch-size 6` (one error line: 6 does not split over 4 ranks).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

from fabriclab.bench.limits import RANK_MEMORY_BYTES, check_local_ranks, check_memory
from fabriclab.workload.zoo import FP32_BYTES, TOKENS, get_spec, input_shape, layer_table

if TYPE_CHECKING:
    from fabriclab.runtime.trainer_config import TrainerConfig

RUNTIMES = ("ours", "ddp")
SYNTHETIC = "synthetic"
MAX_STEPS = 1_000_000
MAX_PREFETCH = 1024
# Memory of one training rank beyond the interpreter: parameters, gradients, momentum and the flat
# communication buffers are ~4 x the parameter bytes per runtime; activations kept for backward, per
# sample, measured here (peak RSS of two SGD steps, minus parameters, gradients and momentum):
# ResNet-50 at 224: 236 x the input's bytes, VGG-16: 296 x; BERT-base: 1.3 MB per token.
PARAM_COPIES = 4
ACTIVATION_PER_INPUT_BYTE = 300
ACTIVATION_PER_TOKEN_BYTES = 1.5e6


@dataclass(frozen=True, kw_only=True)
class TrainBenchConfig:
    """One benchmark run: a model, a rank count, a trainer configuration and the runtimes to time."""

    model: str = "resnet50"
    """Zoo model (ignored with `replay`, which builds a model of the profile's gradients)."""
    num_ranks: int = 4
    """Local ranks to spawn (a torchrun/Slurm/MPI launch brings its own)."""
    batch_size: int = 32
    """Global batch per step, split evenly over the ranks."""
    image_size: int | None = None
    """Image side in pixels (the model's default, 224 for ResNet-50, when None; a dataset's own size)."""
    steps: int = 50
    """Timed steps per runtime."""
    warmup: int = 10
    """Untimed steps before them."""
    trainer: TrainerConfig | None = None
    """Sync, overlap, fusion, compression and SGD settings of our trainer (SGD also for DDP); None:
    `TrainerConfig()`'s defaults (so the rest of the config can be checked without importing torch)."""
    runtimes: tuple[str, ...] = ("ours",)
    """ours, ddp, or both (timed in turn)."""
    data: str = SYNTHETIC
    """`synthetic` or a folder of TFRecord shards (`fabriclab data make`)."""
    prefetch: int = 4
    """Batches each rank's reader thread keeps ready."""
    replay: str | None = None
    """Profile to replay instead of computing: a built-in V100 name (resnet50, ...) or a profile file."""
    dilation: float = 1.0
    """Factor on every replayed time."""
    baseline: bool = True
    """Also run 1 rank at the per-rank batch, for the scaling factor."""
    display_every: int = 10
    """Print a tf_cnn_benchmarks line every this many steps."""
    trace_steps: int = 0
    """Timed steps of `ours` (the last ones) whose events go into the Chrome trace; 0: no trace."""
    timeout_s: float = 120.0
    """Longest wait for a missing or stuck rank before the run fails naming it."""
    backend: str | None = None
    """torch.distributed backend: gloo, nccl or mpi; None follows the trainer's device (nccl on cuda)."""
    seed: int = 0
    """Seed of the model initialisation and the synthetic batches."""

    def __post_init__(self) -> None:
        if not self.runtimes or set(self.runtimes) - set(RUNTIMES) or len(set(self.runtimes)) < len(self.runtimes):
            raise ValueError(f"unknown or repeated runtime in {','.join(self.runtimes)}: use ours, ddp or ours,ddp")
        if self.num_ranks < 1:
            raise ValueError(f"number of ranks must be >= 1, got {self.num_ranks}")
        check_local_ranks(self.num_ranks)
        check_batch(self.batch_size, self.num_ranks)
        if not (1 <= self.steps <= MAX_STEPS and 0 <= self.warmup <= MAX_STEPS and self.display_every >= 1):
            raise ValueError(f"need 1 <= steps <= {MAX_STEPS:,}, 0 <= warmup <= {MAX_STEPS:,} and display-every "
                             f">= 1, got {self.steps}, {self.warmup} and {self.display_every}")
        if not 0 <= self.trace_steps <= self.steps:
            raise ValueError(f"trace steps {self.trace_steps} must be within 0..{self.steps}")
        if not 1 <= self.prefetch <= MAX_PREFETCH:
            raise ValueError(f"prefetch {self.prefetch}: give 1..{MAX_PREFETCH} batches")
        if not (math.isfinite(self.timeout_s) and self.timeout_s > 0):
            raise ValueError(f"timeout {self.timeout_s}: give a finite number of seconds > 0")
        if not (math.isfinite(self.dilation) and self.dilation > 0):
            raise ValueError(f"dilation must be a finite number > 0, got {self.dilation}")
        if self.seed < 0:
            raise ValueError(f"seed {self.seed}: give a seed >= 0")
        if self.replay is None:
            get_spec(self.model)
            input_shape(self.model, max(2, self.batch_size // self.num_ranks), self.image_size)
            check_memory(self.num_ranks * training_memory_bytes(self), f"training {self.model} at "
                         f"{self.batch_size // self.num_ranks} samples per rank on {self.num_ranks} local ranks",
                         "give a smaller --batch-size or --image-size, or fewer --np")
        elif self.data != SYNTHETIC:
            raise ValueError("replayed compute reads no data: drop --data or --replay")


def check_batch(batch_size: int, num_ranks: int) -> None:
    if batch_size < 1 or batch_size % num_ranks:
        good = max(num_ranks, round(batch_size / num_ranks) * num_ranks)
        raise ValueError(f"batch size {batch_size} does not split over {num_ranks} ranks: use a multiple of "
                         f"{num_ranks}, e.g. {good}")


def training_memory_bytes(config: TrainBenchConfig) -> float:
    """Rough memory of one rank training `config.model` (see the constants above for where it comes from)."""
    return model_memory_bytes(config.model, config.batch_size // config.num_ranks, config.image_size,
                              num_models=len(config.runtimes))


def model_memory_bytes(model: str, batch_size: int, input_size: int | None = None, *, num_models: int = 1) -> float:
    """Rough memory of one process training `num_models` copies of zoo `model` at `batch_size` samples:
    the interpreter, `PARAM_COPIES` x the parameters per copy, the activations kept for backward."""
    spec = get_spec(model)
    shape = input_shape(model, batch_size, input_size)
    samples, per_sample = shape[0], math.prod(shape[1:])
    if spec.input_kind == TOKENS:
        activations = samples * per_sample * ACTIVATION_PER_TOKEN_BYTES
    else:
        activations = samples * per_sample * FP32_BYTES * ACTIVATION_PER_INPUT_BYTE
    params = layer_table(model).param_bytes * PARAM_COPIES * num_models
    return RANK_MEMORY_BYTES + params + activations
