"""Every sync x overlap mode of our trainer against DDP, each measured beside DDP in one run.

`fabriclab train` measures one mode; this runs a list of them (`MODES`, or `--modes`) one launch
each, with `runtimes=("ours", "ddp")` so that every row's ratio is against the DDP steps interleaved
with its own (these boxes are noisy: a DDP figure from another minute would not do). The 1-rank
baseline is left out (the scaling factor is `fabriclab train`'s).

Try it: `fabriclab bench train --modes allreduce:ring/backward,allreduce:native/backward --steps 5 --warmup 1`.
"""

from __future__ import annotations

import dataclasses
from typing import Callable

from fabriclab.bench.train.run import TrainBenchConfig, run_train_bench
from fabriclab.runtime.trainer import TrainerConfig

MODES = (
    "allreduce:native/none", "allreduce:native/backward",
    "allreduce:ring/none", "allreduce:ring/backward",
    "allreduce:butterfly/backward", "allreduce:ring/backward/fp16",
    "reduce:native/backward",
    "reduce:cb/none", "reduce:cb/forward", "reduce:cb/backward",
    "sharded:ring/none", "sharded:ring/forward", "sharded:ring/backward",
    "ps:servers=2/none", "ps:servers=2/backward",
)
"""sync/overlap[/compression]: S-Caffe's SC-B, SC-OB, SC-OBR (reduce:cb), allreduce as DDP and
Horovod do it (native, ring, butterfly), ZeRO-1 (sharded: ring reduce-scatter, update of one's own
block, ring allgather), a parameter server, and fp16 on the wire."""


def modes_config(*, model: str, num_ranks: int, batch_size: int, image_size: int, steps: int, warmup: int,
                 comm_threads: int, timeout_s: float, device: str, precision: str, channels_last: bool,
                 replay: str | None = None, dilation: float = 1.0, backend: str | None = None) -> TrainBenchConfig:
    """The run every mode shares: ours and DDP, no 1-rank baseline; `image_size` is dropped when a
    profile is replayed (no images are computed)."""
    trainer = TrainerConfig(comm_threads=comm_threads, timeout_s=timeout_s, device=device, precision=precision,
                            channels_last=channels_last)
    return TrainBenchConfig(model=model, num_ranks=num_ranks, batch_size=batch_size,
                            image_size=None if replay else image_size, steps=steps, warmup=warmup, trainer=trainer,
                            runtimes=("ours", "ddp"), replay=replay, dilation=dilation, baseline=False,
                            timeout_s=timeout_s, backend=backend)


def parse_mode(text: str, base: TrainerConfig) -> TrainerConfig:
    """`sync/overlap[/compression]` on top of `base` (fusion, buckets, SGD)."""
    parts = text.strip().split("/")
    if len(parts) not in (2, 3) or not all(parts):
        raise ValueError(f"mode {text!r}: write sync/overlap[/compression], e.g. allreduce:ring/backward "
                         f"or reduce:cb/forward/fp16")
    compression = parts[2] if len(parts) == 3 else "none"
    return dataclasses.replace(base, sync=parts[0], overlap=parts[1], compression=compression)


def run_modes(base: TrainBenchConfig, modes: list[str],
              on_row: Callable[[dict], None] | None = None) -> list[dict]:
    """One launch per mode (ours and DDP interleaved step by step); returns one row per mode."""
    base_trainer = base.trainer if base.trainer is not None else TrainerConfig()
    configs = [(m, parse_mode(m, base_trainer)) for m in modes]  # every mode checked before any runs
    rows = []
    for mode, trainer in configs:
        config = dataclasses.replace(base, trainer=trainer, runtimes=("ours", "ddp"), baseline=False,
                                     trace_steps=0)
        result = run_train_bench(config)
        ours, ddp = result["runtimes"]["ours"], result["runtimes"]["ddp"]
        row = {"mode": mode, "ours_images_per_sec": ours["images_per_sec"],
               "ddp_images_per_sec": ddp["images_per_sec"],
               "ratio": ours["images_per_sec"] / ddp["images_per_sec"],
               "ours_jitter": ours["jitter"], "ddp_jitter": ddp["jitter"],
               "iteration_ms": ours["iteration_s"] * 1e3, "ddp_iteration_ms": ddp["iteration_s"] * 1e3,
               "exposed_ms": ours.get("exposed_s", 0.0) * 1e3, "comm_ms": ours.get("comm_s", 0.0) * 1e3,
               "cpu_ms": ours.get("cpu_s", 0.0) * 1e3, "ddp_cpu_ms": ddp.get("cpu_s", 0.0) * 1e3,
               "MB_sent": ours.get("bytes_sent", 0.0) / 1e6,
               "params_agree": ours["params_agree"] and ddp["params_agree"]}
        rows.append(row)
        if on_row is not None:
            on_row(row)
    return rows
