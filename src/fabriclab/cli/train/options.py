"""The options of `fabriclab train`, in two groups that build its configuration.

`RUN` (what runs and how it is reported: model, ranks, batch, steps, data or a replayed profile, the
runtimes, the trace, the timeout) builds the `TrainBenchConfig`; `TRAINER` (how our trainer communicates
and steps: sync, overlap, fusion and buckets, compression, helper threads, SGD, device and precision)
builds its `TrainerConfig`. The command takes the options (the aliases below) and hands `locals()` to
the groups, as the topology options do (`cli.options.TOPOLOGY`). Every value is checked before torch is
imported: `TRAINER.parse` checks without torch, `TRAINER.build` then imports it.

Try it: `fabriclab train --help`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from fabriclab.bench.limits import check_number
from fabriclab.bench.train.config import SYNTHETIC, TrainBenchConfig
from fabriclab.cli.common import split_list
from fabriclab.units import parse_size, parse_time
from fabriclab.whatif.fusion import POLICIES

MAX_COMM_THREADS = 16

# What runs (RUN)
ModelOption = Annotated[str, typer.Option(help="Zoo CNN, or a transformer: gpt-tiny, moe-tiny, a built-in LLM "
                                                "or a config.json (fabriclab models lists them).")]
NpOption = Annotated[int, typer.Option("--np", help="Local ranks to spawn.")]
BatchSizeOption = Annotated[int, typer.Option(help="Global batch per step, split over the ranks.")]
ImageSizeOption = Annotated[Optional[int], typer.Option(help="Image side (model default: 224).")]
RuntimeOption = Annotated[str, typer.Option(help="ours, ddp or ours,ddp (timed in turn).")]
StepsOption = Annotated[int, typer.Option(help="Timed steps.")]
WarmupOption = Annotated[int, typer.Option(help="Untimed steps before them.")]
DataOption = Annotated[str, typer.Option(help="'synthetic' or a folder of TFRecord shards "
                                              "(fabriclab data make).")]
PrefetchOption = Annotated[int, typer.Option(help="Batches each rank's reader keeps ready.")]
ReplayOption = Annotated[Optional[str], typer.Option(help="Replay a profile's layer times instead of "
                                                          "computing: resnet50, resnet101, vgg16 or a file.")]
DilationOption = Annotated[float, typer.Option(help="Factor on every replayed time.")]
BaselineOption = Annotated[bool, typer.Option(help="Run 1 rank too, for the scaling factor.")]
DisplayEveryOption = Annotated[int, typer.Option(help="Print a line every this many steps.")]
TraceOption = Annotated[Optional[Path], typer.Option(metavar="PATH",
                                                     help="Write a Chrome trace of ours' last steps.")]
TraceStepsOption = Annotated[int, typer.Option(help="Steps in the trace.")]
TimeoutOption = Annotated[float, typer.Option(help="Seconds to wait for a missing or stuck rank.")]
BackendOption = Annotated[Optional[str], typer.Option(help="gloo, nccl or mpi (default: nccl on cuda, gloo on "
                                                           "cpu; gloo lets ranks share a GPU).")]
# How our trainer communicates and steps (TRAINER)
SyncOption = Annotated[str, typer.Option(help="allreduce:ALGO, reduce:ALGO (ALGO: ring, butterfly, cb, "
                                              "chain:chunks=4, native, ...), sharded:ALGO (ring, recursive, "
                                              "direct: ZeRO-1) or ps:servers=K.")]
OverlapOption = Annotated[str, typer.Option(help="none (SC-B), forward (SC-OB, reduce/sharded) or backward "
                                                 "(SC-OBR, DDP).")]
FusionOption = Annotated[str, typer.Option(help=f"Bucket policy: {', '.join(POLICIES)} (time-or-size: Zhang "
                                                f"et al.'s timeout and buffer).")]
BucketOption = Annotated[str, typer.Option(help="Bucket cap / fusion threshold.")]
FirstBucketOption = Annotated[str, typer.Option(help="Cap of the first bucket (ddp policy).")]
CycleTimeOption = Annotated[str, typer.Option(help="Horovod cycle time / time-or-size timeout.")]
CompressionOption = Annotated[str, typer.Option(help="Gradients on the wire: none, fp16 or bf16.")]
CommThreadsOption = Annotated[int, typer.Option(help="Helper threads (and process groups) communicating "
                                                     "buckets; k buckets in flight at once.")]
LrOption = Annotated[Optional[float], typer.Option(help="Learning rate: SGD's (CNN, default 0.01) or Adam's "
                                                         "(transformer, default 0.001).")]
MomentumOption = Annotated[float, typer.Option(help="SGD momentum.")]
DeviceOption = Annotated[str, typer.Option(help="cpu or cuda (each rank on the GPU of its local rank).")]
PrecisionOption = Annotated[str, typer.Option(help="fp32, bf16 or fp16 (autocast; fp16 with a loss "
                                                   "scale).")]
ChannelsLastOption = Annotated[bool, typer.Option("--channels-last", help="Channels-last (NHWC) weights and "
                                                                          "batches.")]


class TrainerGroup:
    """The trainer's options -> `TrainerConfig`: `parse` checks them without torch, `build` makes the config."""

    def parse(self, o: dict) -> dict:
        """The checked settings of the parsed command line `o` (the keywords of `build`)."""
        check_number(o["lr"], "--lr", above=0)
        check_number(o["momentum"], "--momentum", minimum=0)
        if o["momentum"] >= 1:
            raise ValueError(f"--momentum {o['momentum']:g}: give a momentum in [0, 1)")
        if not 1 <= o["comm_threads"] <= MAX_COMM_THREADS:
            raise ValueError(f"--comm-threads {o['comm_threads']}: give 1..{MAX_COMM_THREADS}")
        fusion = o["fusion"].strip()
        if fusion not in POLICIES:
            raise ValueError(f"unknown fusion {fusion!r}: use one of {', '.join(POLICIES)}")
        sizes = {name: parse_size(o[key]) for name, key in (("--bucket", "bucket"), ("--first-bucket", "first_bucket"))}
        for name, size in sizes.items():
            if size < 1:
                raise ValueError(f"{name} {size} B: give at least 1 byte, e.g. 25MB")
        return dict(sync=o["sync"].strip(), overlap=o["overlap"].strip(), fusion=fusion,
                    bucket_bytes=sizes["--bucket"], first_bucket_bytes=sizes["--first-bucket"],
                    cycle_time_s=check_number(parse_time(o["cycle_time"]), "--cycle-time", above=0),
                    compression=o["compression"].strip(), lr=o["lr"], momentum=o["momentum"],
                    timeout_s=o["timeout"], comm_threads=o["comm_threads"], device=o["device"],
                    precision=o["precision"], channels_last=o["channels_last"])

    def build(self, settings: dict):
        """The `TrainerConfig` of `parse`'s settings; imports torch (its sync, overlap and compression
        checks need it)."""
        from fabriclab.runtime.buckets import SGDConfig
        from fabriclab.runtime.trainer_config import TrainerConfig

        settings = dict(settings)
        sgd = SGDConfig(lr=settings.pop("lr"), momentum=settings.pop("momentum"))
        return TrainerConfig(sgd=sgd, **settings)


class RunGroup:
    """What runs -> `TrainBenchConfig` (without the trainer's settings: `TRAINER` builds those)."""

    def build(self, o: dict) -> TrainBenchConfig:
        """The checked `TrainBenchConfig` of the parsed command line `o`; a dataset or profile that cannot
        be read is an error here, before any work."""
        check_number(o["dilation"], "--dilation", above=0)
        check_number(o["timeout"], "--timeout", above=0)
        if o["trace_steps"] < 1:
            raise ValueError(f"--trace-steps {o['trace_steps']}: give at least 1 step")
        runtimes = tuple(split_list(o["runtime"], "runtime list"))
        if o["trace"] is not None and "ours" not in runtimes:
            raise ValueError("--trace shows our trainer's layers and buckets: add ours to --runtime")
        _check_inputs(o["data"], o["replay"])
        return TrainBenchConfig(
            model=o["model"].strip(), num_ranks=o["num_ranks"], batch_size=o["batch_size"],
            image_size=o["image_size"], steps=o["steps"], warmup=o["warmup"], runtimes=runtimes, data=o["data"],
            prefetch=o["prefetch"], replay=o["replay"], dilation=o["dilation"], baseline=o["baseline"],
            display_every=o["display_every"],
            trace_steps=min(o["trace_steps"], o["steps"]) if o["trace"] else 0, timeout_s=o["timeout"],
            backend=o["backend"])


def _check_inputs(data: str, replay: str | None) -> None:
    """A dataset folder or a replayed profile that cannot be read is an error before any work."""
    if replay is not None:
        from fabriclab.workload.profile import load_profile

        load_profile(replay)
    if data != SYNTHETIC:
        from fabriclab.runtime.data import list_shards

        list_shards(data)


TRAINER = TrainerGroup()
RUN = RunGroup()
