"""The trainer's own cost on one device: `fabriclab train --np 1` against a plain PyTorch loop.

One rank trains the same model on the same synthetic batch, in the same precision and layout, two ways
that take turns step by step (so a change of machine load hits both alike): our trainer (`ours`: flat
buckets, gradient hooks, the fused SGD update over its buckets) and the plain loop a PyTorch script
runs (`ddp` at one rank is no DDP at all: `zero_grad`, forward, backward, `torch.optim.SGD.step`; under
fp16 with torch.amp.GradScaler). Both are timed as `fabriclab train` times a step: from a barrier to
the loss on the host, which waits for the GPU. The ratio of images/sec (ours / plain) is the
trainer's overhead: the goal is >= 0.97 on a GPU. `rounds` launches give its spread; the median is
reported.

`run_overhead(OverheadConfig(...))` is what `fabriclab bench overhead` runs;
`python -m fabriclab.bench.train.overhead --device cpu --model resnet50 --image-size 32 --batch-size 8`
prints the ratio.

Try it: `python -m fabriclab.bench.train.overhead --model resnet50 --image-size 32 --batch-size 8 --steps 10`.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from dataclasses import dataclass
from typing import Callable

from fabriclab.bench.train.run import TrainBenchConfig, run_train_bench
from fabriclab.runtime.trainer import TrainerConfig

GOAL_RATIO = 0.97


@dataclass(frozen=True, kw_only=True)
class OverheadConfig:
    """One overhead measurement: a model on one device, in one precision."""

    model: str = "resnet50"
    """Zoo model."""
    batch_size: int = 64
    """Batch per step (the one rank's)."""
    image_size: int | None = None
    """Image side (the model's default when None)."""
    device: str = "cpu"
    """cpu or cuda."""
    precision: str = "fp32"
    """fp32, bf16 or fp16."""
    channels_last: bool = False
    """Channels-last layout (convolutional models)."""
    steps: int = 50
    """Timed steps per runtime and round."""
    warmup: int = 10
    """Untimed steps per runtime before them (cuDNN autotuning, allocator warm-up)."""
    rounds: int = 3
    """Launches; the ratio reported is their median."""
    timeout_s: float = 600.0
    """Longest wait for the rank before the run fails."""

    def __post_init__(self) -> None:
        if self.rounds < 1:
            raise ValueError(f"rounds {self.rounds}: give at least 1")
        self.train_config()  # every other check: model, sizes, precision, device

    def train_config(self) -> TrainBenchConfig:
        """`fabriclab train --np 1 --runtime ours,ddp` with this model, batch, precision and device."""
        trainer = TrainerConfig(device=self.device, precision=self.precision, channels_last=self.channels_last,
                                timeout_s=self.timeout_s)
        return TrainBenchConfig(model=self.model, num_ranks=1, batch_size=self.batch_size,
                                image_size=self.image_size, steps=self.steps, warmup=self.warmup,
                                trainer=trainer, runtimes=("ours", "ddp"), baseline=False,
                                timeout_s=self.timeout_s)


def run_overhead(config: OverheadConfig, *, on_round: Callable[[dict], None] | None = None) -> dict:
    """`rounds` launches of one rank, ours and the plain loop in turn; returns images/sec of both (medians
    over the rounds), their ratio (median of the rounds' ratios), every round and where it ran."""
    rounds = []
    for index in range(config.rounds):
        result = run_train_bench(config.train_config())
        ours, plain = result["runtimes"]["ours"], result["runtimes"]["ddp"]
        row = {"round": index, "ours_images_per_sec": ours["images_per_sec"],
               "plain_images_per_sec": plain["images_per_sec"],
               "ratio": ours["images_per_sec"] / plain["images_per_sec"],
               "ours_jitter": ours["jitter"], "plain_jitter": plain["jitter"], "launch": result.get("launch")}
        rounds.append(row)
        if on_round is not None:
            on_round(row)
    return {"ours_images_per_sec": statistics.median(r["ours_images_per_sec"] for r in rounds),
            "plain_images_per_sec": statistics.median(r["plain_images_per_sec"] for r in rounds),
            "ratio": statistics.median(r["ratio"] for r in rounds), "goal_ratio": GOAL_RATIO,
            "rounds": rounds, "launch": rounds[-1]["launch"]}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Images/sec of fabriclab train --np 1 against a plain "
                                                 "PyTorch loop of the same model, batch, precision and data.")
    parser.add_argument("--model", default="resnet50")
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--image-size", type=int, default=None)
    parser.add_argument("--device", default="cpu", choices=("cpu", "cuda"))
    parser.add_argument("--precision", default="fp32", choices=("fp32", "bf16", "fp16"))
    parser.add_argument("--channels-last", action="store_true")
    parser.add_argument("--steps", type=int, default=50)
    parser.add_argument("--warmup", type=int, default=10)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args(argv)
    config = OverheadConfig(model=args.model, batch_size=args.batch_size, image_size=args.image_size,
                            device=args.device, precision=args.precision, channels_last=args.channels_last,
                            steps=args.steps, warmup=args.warmup, rounds=args.rounds)

    def say(row: dict) -> None:
        print(f"round {row['round'] + 1}: ours {row['ours_images_per_sec']:.2f} img/s, plain "
              f"{row['plain_images_per_sec']:.2f} img/s, ratio {row['ratio']:.3f}", flush=True)

    result = run_overhead(config, on_round=say)
    print(f"{config.model} batch {config.batch_size} {config.precision} on {config.device}: ours "
          f"{result['ours_images_per_sec']:.2f} img/s, plain loop {result['plain_images_per_sec']:.2f} img/s, "
          f"ratio {result['ratio']:.3f} (goal >= {GOAL_RATIO})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
