"""`fabriclab train`: data-parallel training benchmark, tf_cnn_benchmarks style, ours next to DDP.

Spawns `--np` local ranks on a Gloo group (or joins a torchrun / Slurm / mpirun launch) and trains
`--model` with our trainer (`--runtime ours`), PyTorch DDP (`ddp`) or both in turn (`ours,ddp`).
Prints tf_cnn_benchmarks' lines as the steps run (images/sec with uncertainty and jitter at step 1 and
every `--display-every` steps, from rank 0's step times, as each tf_cnn_benchmarks worker prints its
own), warm-up progress on stderr, then per runtime `total images/sec` (from the slowest rank's step
times) and one row per runtime: images/sec, ratio to DDP, scaling factor against a 1-rank run of the
same per-rank batch (Zhang et al., NetAI'20: T_n / (n T)), per-iteration compute / communication /
exposed communication time and bytes sent per rank, and the host's network throughput and CPU
utilisation over the timed steps. `--trace PATH` writes a Chrome trace of the last steps of ours
(every layer's compute, every bucket's communication); `--json PATH` a record. Every input is checked
before torch is imported or a rank starts. Exits with 1 when a rank fails or ranks end with different
parameters, 2 on bad input.

Try it: `fabriclab train --model resnet50 --np 4 --batch-size 32 --image-size 32 --sync allreduce:ring --overlap backward --steps 50 --warmup 10`.
"""

from __future__ import annotations

import dataclasses
import os
import sys
from pathlib import Path
import typer
from rich import box
from rich.table import Table

from fabriclab.bench.train.config import SYNTHETIC, TrainBenchConfig
from fabriclab.bench.train.report import HEADER, is_display_step, step_line, total_lines
from fabriclab.cli.common import (EXIT_FAILED, FormatOption, JsonOption, Output, StoreOption,
                                  check_output_path, print_error, user_errors, write_trace_file)
from fabriclab.cli.train.options import (RUN, TRAINER, BackendOption, BaselineOption, BatchSizeOption,
                                         BucketOption, ChannelsLastOption, CommThreadsOption, CompressionOption,
                                         CycleTimeOption, DataOption, DeviceOption, DilationOption,
                                         DisplayEveryOption, FirstBucketOption, FusionOption, ImageSizeOption,
                                         LrOption, ModelOption, MomentumOption, NpOption, OverlapOption,
                                         PrecisionOption, PrefetchOption, ReplayOption, RuntimeOption,
                                         StepsOption, SyncOption, TimeoutOption, TraceOption, TraceStepsOption,
                                         WarmupOption)
from fabriclab.cli.llm_options import EpOption, MbsOption, PpOption, SeqOption, SpOption, TpOption, VpOption, ZeroOption
from fabriclab.cli.llm_options import GbsOption as LlmGbsOption
from fabriclab.cli.train.llm import DtypeOption, SeedOption
from fabriclab.runtime.environment import LaunchError, detect_launch


def register(app: typer.Typer) -> None:
    """Add the top-level `train` command to `app`."""
    app.command("train")(train)


@user_errors
def train(
    model: ModelOption = "resnet50",
    num_ranks: NpOption = 4,
    batch_size: BatchSizeOption = 32,
    image_size: ImageSizeOption = None,
    sync: SyncOption = "allreduce:native",
    overlap: OverlapOption = "backward",
    fusion: FusionOption = "ddp",
    bucket: BucketOption = "25MB",
    first_bucket: FirstBucketOption = "1MB",
    cycle_time: CycleTimeOption = "1ms",
    compression: CompressionOption = "none",
    comm_threads: CommThreadsOption = 2,
    runtime: RuntimeOption = "ours",
    steps: StepsOption = 50,
    warmup: WarmupOption = 10,
    data: DataOption = SYNTHETIC,
    prefetch: PrefetchOption = 4,
    replay: ReplayOption = None,
    dilation: DilationOption = 1.0,
    baseline: BaselineOption = True,
    lr: LrOption = None,
    momentum: MomentumOption = 0.9,
    display_every: DisplayEveryOption = 10,
    trace: TraceOption = None,
    trace_steps: TraceStepsOption = 2,
    timeout: TimeoutOption = 120.0,
    device: DeviceOption = "cpu",
    backend: BackendOption = None,
    precision: PrecisionOption = "fp32",
    channels_last: ChannelsLastOption = False,
    tp: TpOption = "1",
    pp: PpOption = "1",
    vp: VpOption = "1",
    ep: EpOption = "1",
    mbs: MbsOption = "1",
    gbs: LlmGbsOption = None,
    seq: SeqOption = None,
    sequence_parallel: SpOption = True,
    zero: ZeroOption = "0",
    seed: SeedOption = 0,
    dtype: DtypeOption = "float32",
    fmt: FormatOption = None,
    json_path: JsonOption = None,
    store: StoreOption = None,
) -> None:
    """Train a model and report throughput and communication: a CNN data-parallel (tf_cnn_benchmarks style),
    a transformer (gpt-tiny, moe-tiny, a config.json) with TP x PP x DP (x EP, ZeRO)."""
    from fabriclab.cli.train import llm as train_llm

    out = Output(fmt, json_path, store)
    check_output_path(trace, "--trace")
    o = locals()
    train_llm.route(o, trace, out)  # a transformer is trained there (and exits)
    settings = TRAINER.parse(o)
    config = RUN.build(o)
    # Only the trainer's own settings (sync, overlap, compression) need torch to be checked.
    raise typer.Exit(execute(dataclasses.replace(config, trainer=TRAINER.build(settings)), trace, out))


def execute(config: TrainBenchConfig, trace_path: Path | None = None, out: Output | Path | None = None) -> int:
    """Run, print (in the reporting process only), write the trace and record; returns the exit code.
    `out` may also be a `--json` path (or None)."""
    from fabriclab.bench.train.run import run_train_bench

    if not isinstance(out, Output):
        out = Output(None, out)
    launch = detect_launch()
    reporter = launch is None or launch.rank == 0
    live = LiveLines(out, config) if reporter else None
    try:
        result = run_train_bench(config, on_message=live.on_message if live else None)
    except LaunchError as exc:
        print_error(exc)
        return EXIT_FAILED
    if not reporter:
        return 0
    trace = result.pop("trace", None)
    for name, summary in result["runtimes"].items():
        out.note(f"\n{name} over the slowest rank's steps:")
        for line in total_lines(summary["step_s"], config.batch_size):
            out.note(line)
    out.table(result_table(result, config))
    for line in run_notes(result, config, _cores()):
        out.note(line)
    code = 0
    if trace is not None and trace_path is not None:
        code = _write_trace(trace, trace_path, config)
    out.record("train.bench", dataclasses.asdict(config) | {"launch": result.pop("launch", None)}, result)
    bad = [name for name, s in result["runtimes"].items() if not s["params_agree"]]
    if bad:
        print_error(f"ranks ended with different parameters under {', '.join(bad)}")
        return EXIT_FAILED
    return code


def _write_trace(trace: dict, path: Path, config: TrainBenchConfig) -> int:
    """Write the Chrome trace; a failed write is one error line (the run's record is still written)."""
    from fabriclab.runtime.meters import chrome_trace

    title = f"{describe(config, 'ours')}, last {config.trace_steps} steps"
    return write_trace_file(path, chrome_trace({int(r): ev for r, ev in trace.items()}, title),
                            f"trace written to {path}")


class LiveLines:
    """tf_cnn_benchmarks' step lines printed as rank 0 reports its steps (`on_message` of the launch)."""

    def __init__(self, out: Output, config: TrainBenchConfig) -> None:
        self.out, self.config = out, config
        self.times: dict[str, list[float]] = {}
        self.warmups: dict[str, int] = {}
        self.several = len(config.runtimes) > 1

    def on_message(self, rank: int, message: dict) -> None:
        config, baseline = self.config, message.get("baseline", False)
        key = "1 rank" if baseline else message["runtime"]
        if not message["timed"]:
            done = self.warmups[key] = self.warmups.get(key, 0) + 1
            if is_display_step(done, config.display_every):
                print(f"  warm-up {key}: step {done} of {config.warmup} ({message['seconds']:.3f} s)",
                      file=sys.stderr, flush=True)
            return
        times = self.times.setdefault(key, [])
        if not times:
            self._header(key, baseline)
        times.append(message["seconds"])
        if is_display_step(len(times), config.display_every):
            batch = config.batch_size // config.num_ranks if baseline else config.batch_size
            prefix = f"[{key}] " if self.several or baseline else ""
            self.out.note(prefix + step_line(times, message["loss"], batch))

    def _header(self, key: str, baseline: bool) -> None:
        if baseline:
            self.out.note(f"\nbaseline for the scaling factor: ours on 1 rank at "
                          f"{self.config.batch_size // self.config.num_ranks} samples per step")
        else:
            self.out.note(f"\nruntime: {describe(self.config, key)}")
        self.out.note(HEADER)


def describe(config: TrainBenchConfig, runtime: str) -> str:
    what = f"replay of {config.replay} x{config.dilation:g}" if config.replay else config.model
    if runtime == "ddp":
        return f"ddp, {what}"
    t = config.trainer
    return (f"ours, {what}, sync {t.sync}, overlap {t.overlap}, fusion {t.fusion}"
            + (f", compression {t.compression}" if t.compression != "none" else ""))


def _cores() -> int:
    """CPU cores this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def run_notes(result: dict, config: TrainBenchConfig, cores: int) -> list[str]:
    """What the reader must know to read the table: ranks sharing cores, a replay's dilation."""
    notes = []
    n = result["num_ranks"]
    device = config.trainer.device if config.trainer is not None else "cpu"
    if device == "cpu" and n > cores:
        scaling = [s.get("scaling_factor") for s in result["runtimes"].values() if s.get("scaling_factor")]
        said = f" ({', '.join(f'{v:.3f}' for v in scaling)})" if scaling else ""
        notes.append(f"note: {n} ranks share {cores} CPU core{'s' if cores > 1 else ''}: each rank computes "
                     f"slower than one rank alone, so the scaling factor{said} measures this machine's cores, "
                     f"not the algorithm or the network")
    if config.replay:
        notes.append(f"note: dilated replay: every compute time is {config.replay}'s profiled time x"
                     f"{config.dilation:g}, no model runs; images/sec are of the dilated run (x{config.dilation:g} "
                     f"for the un-dilated rate), not a measurement of {config.replay}")
    return notes


def result_table(result: dict, config: TrainBenchConfig) -> Table:
    n = result["num_ranks"]
    dilated = f"dilated replay of {config.replay} x{config.dilation:g}, " if config.replay else ""
    title = (f"{dilated}{n} ranks, global batch {result['global_batch']} ({result['per_rank_batch']} per rank), "
             f"{config.steps} steps (+{config.warmup} warm-up); times per iteration, bytes per rank")
    table = Table(title=title, title_justify="left", box=box.SIMPLE_HEAD, pad_edge=False)
    headers = ("runtime", "images/sec", "vs ddp", "scaling", "iter ms", "compute ms", "comm ms",
               "exposed ms", "MB sent", "net GB/s", "CPU %", "CPU ms/rank", "params")
    for h in headers:
        table.add_column(h, justify="left" if h == "runtime" else "right", no_wrap=True)
    ddp = result["runtimes"].get("ddp", {}).get("images_per_sec")
    ms = lambda s, k: "-" if k not in s else f"{s[k] * 1e3:.1f}"  # noqa: E731
    for name, s in result["runtimes"].items():
        table.add_row(name, f"{s['images_per_sec']:.2f}", f"{s['images_per_sec'] / ddp:.3f}" if ddp else "-",
                      "-" if s.get("scaling_factor") is None else f"{s['scaling_factor']:.3f}",
                      ms(s, "iteration_s"), ms(s, "compute_s"), ms(s, "comm_s"), ms(s, "exposed_s"),
                      "-" if "bytes_sent" not in s else f"{s['bytes_sent'] / 1e6:.1f}",
                      "-" if "host_tx_Bps" not in s else f"{s['host_tx_Bps'] / 1e9:.3f}",
                      "-" if "cpu_util" not in s else f"{s['cpu_util'] * 100:.0f}", ms(s, "cpu_s"),
                      "agree" if s["params_agree"] else "DIFFER")
    return table
