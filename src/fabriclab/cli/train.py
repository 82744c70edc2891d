"""`fabriclab train`: data-parallel training benchmark, tf_cnn_benchmarks style, ours next to DDP.

Spawns `--np` local ranks on a Gloo group (or joins a torchrun / Slurm / mpirun launch) and trains
`--model` with our trainer (`--runtime ours`), PyTorch DDP (`ddp`) or both in turn (`ours,ddp`).
Prints tf_cnn_benchmarks' lines per runtime (images/sec with uncertainty and jitter every
`--display-every` steps, then `total images/sec`), then one row per runtime: images/sec, ratio to DDP,
scaling factor against a 1-rank run of the same per-rank batch (seed 004: T_n / (n T)), per-iteration
compute / communication / exposed communication time and bytes sent per rank, and the host's network
throughput and CPU utilisation over the timed steps. `--trace PATH` writes a Chrome trace of the last
steps of ours (every layer's compute, every bucket's communication); `--json PATH` a record.
Exits with 1 when a rank fails or ranks end with different parameters, 2 on bad input.

Try it: `fabriclab train --model resnet50 --np 4 --batch-size 32 --image-size 32 --sync allreduce:ring --overlap backward --steps 50 --warmup 10`.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Optional

import typer
from rich import box
from rich.table import Table

from fabriclab.bench.train import SYNTHETIC, TrainBenchConfig, run_train_bench
from fabriclab.bench.train_report import tf_cnn_lines
from fabriclab.cli.common import (EXIT_FAILED, console, err_console, JsonOption, print_error, save_record,
                                  split_list, user_errors)
from fabriclab.runtime.buckets import SGDConfig
from fabriclab.runtime.launch import LaunchError, detect_launch
from fabriclab.runtime.meters import chrome_trace
from fabriclab.runtime.trainer import TrainerConfig
from fabriclab.units import parse_size, parse_time


def register(app: typer.Typer) -> None:
    """Add the top-level `train` command to `app`."""
    app.command("train")(train)


@user_errors
def train(
    model: Annotated[str, typer.Option(help="Zoo model (fabriclab models lists them).")] = "resnet50",
    num_ranks: Annotated[int, typer.Option("--np", help="Local ranks to spawn.")] = 4,
    batch_size: Annotated[int, typer.Option(help="Global batch per step, split over the ranks.")] = 32,
    image_size: Annotated[Optional[int], typer.Option(help="Image side (model default: 224).")] = None,
    sync: Annotated[str, typer.Option(help="allreduce:ALGO, reduce:ALGO (ALGO: ring, butterfly, cb, "
                                           "chain:chunks=4, native, ...), sharded:ALGO (ring, recursive, "
                                           "direct: ZeRO-1) or ps:servers=K.")] = "allreduce:native",
    overlap: Annotated[str, typer.Option(help="none (SC-B), forward (SC-OB, reduce/sharded) or backward "
                                              "(SC-OBR, DDP).")] = "backward",
    fusion: Annotated[str, typer.Option(help="Bucket policy: ddp, horovod, paper004 or none.")] = "ddp",
    bucket: Annotated[str, typer.Option(help="Bucket cap / fusion threshold.")] = "25MB",
    first_bucket: Annotated[str, typer.Option(help="Cap of the first bucket (ddp policy).")] = "1MB",
    cycle_time: Annotated[str, typer.Option(help="Horovod cycle time / paper004 timeout.")] = "1ms",
    compression: Annotated[str, typer.Option(help="Gradients on the wire: none, fp16 or bf16.")] = "none",
    comm_threads: Annotated[int, typer.Option(help="Helper threads (and process groups) communicating "
                                                   "buckets; k buckets in flight at once.")] = 2,
    runtime: Annotated[str, typer.Option(help="ours, ddp or ours,ddp (timed in turn).")] = "ours",
    steps: Annotated[int, typer.Option(help="Timed steps.")] = 50,
    warmup: Annotated[int, typer.Option(help="Untimed steps before them.")] = 10,
    data: Annotated[str, typer.Option(help="'synthetic' or a folder of TFRecord shards "
                                           "(fabriclab data make).")] = SYNTHETIC,
    prefetch: Annotated[int, typer.Option(help="Batches each rank's reader keeps ready.")] = 4,
    replay: Annotated[Optional[str], typer.Option(help="Replay a profile's layer times instead of "
                                                       "computing: resnet50, resnet101, vgg16 or a file.")] = None,
    dilation: Annotated[float, typer.Option(help="Factor on every replayed time.")] = 1.0,
    baseline: Annotated[bool, typer.Option(help="Run 1 rank too, for the scaling factor.")] = True,
    lr: Annotated[float, typer.Option(help="SGD learning rate.")] = 0.01,
    momentum: Annotated[float, typer.Option(help="SGD momentum.")] = 0.9,
    display_every: Annotated[int, typer.Option(help="Print a line every this many steps.")] = 10,
    trace: Annotated[Optional[Path], typer.Option(metavar="PATH", dir_okay=False,
                                                  help="Write a Chrome trace of ours' last steps.")] = None,
    trace_steps: Annotated[int, typer.Option(help="Steps in the trace.")] = 2,
    timeout: Annotated[float, typer.Option(help="Seconds to wait for a missing or stuck rank.")] = 120.0,
    json_path: JsonOption = None,
) -> None:
    """Train a model data-parallel and report throughput, scaling and communication, tf_cnn_benchmarks style."""
    trainer = TrainerConfig(sync=sync.strip(), overlap=overlap.strip(), fusion=fusion.strip(),
                            bucket_bytes=parse_size(bucket), first_bucket_bytes=parse_size(first_bucket),
                            cycle_time_s=parse_time(cycle_time), compression=compression.strip(),
                            sgd=SGDConfig(lr=lr, momentum=momentum), timeout_s=timeout,
                            comm_threads=comm_threads)
    runtimes = tuple(split_list(runtime, "runtime list"))
    if trace is not None and "ours" not in runtimes:
        raise ValueError("--trace shows our trainer's layers and buckets: add ours to --runtime")
    config = TrainBenchConfig(model=model.strip(), num_ranks=num_ranks, batch_size=batch_size,
                              image_size=image_size, steps=steps, warmup=warmup, trainer=trainer,
                              runtimes=runtimes, data=data, prefetch=prefetch, replay=replay,
                              dilation=dilation, baseline=baseline, display_every=display_every,
                              trace_steps=min(trace_steps, steps) if trace else 0, timeout_s=timeout)
    raise typer.Exit(execute(config, trace, json_path))


def execute(config: TrainBenchConfig, trace_path: Path | None = None, json_path: Path | None = None) -> int:
    """Run, print (in the reporting process only), write the trace and record; returns the exit code."""
    launch = detect_launch()
    reporter = launch is None or launch.rank == 0

    def on_message(rank: int, message: dict) -> None:
        if reporter and err_console.is_terminal and not message["timed"]:
            err_console.print(f"  warm-up {message['runtime']} step {message['step'] + 1}", style="dim",
                              markup=False)

    try:
        result = run_train_bench(config, on_message=on_message)
    except LaunchError as exc:
        print_error(exc)
        return EXIT_FAILED
    if not reporter:
        return 0
    trace = result.pop("trace", None)
    for name, summary in result["runtimes"].items():
        typer.echo(f"\nruntime: {describe(config, name)}")
        for line in tf_cnn_lines(summary["step_s"], summary["losses"], config.batch_size, config.display_every):
            typer.echo(line)  # tabs kept, as tf_cnn_benchmarks prints them
    print_table(result, config)
    if trace is not None and trace_path is not None:
        title = f"{describe(config, 'ours')}, last {config.trace_steps} steps"
        trace_path.write_text(json.dumps(chrome_trace({int(r): ev for r, ev in trace.items()}, title)) + "\n")
        err_console.print(f"trace written to {trace_path}", markup=False, soft_wrap=True)
    save_record(json_path, "train.bench", _config_dict(config), result)
    bad = [name for name, s in result["runtimes"].items() if not s["params_agree"]]
    if bad:
        err_console.print(f"ranks ended with different parameters under {', '.join(bad)}", style="bold red",
                          markup=False)
        return EXIT_FAILED
    return 0


def describe(config: TrainBenchConfig, runtime: str) -> str:
    what = f"replay of {config.replay} x{config.dilation:g}" if config.replay else config.model
    if runtime == "ddp":
        return f"ddp, {what}"
    t = config.trainer
    return (f"ours, {what}, sync {t.sync}, overlap {t.overlap}, fusion {t.fusion}"
            + (f", compression {t.compression}" if t.compression != "none" else ""))


def print_table(result: dict, config: TrainBenchConfig) -> None:
    n = result["num_ranks"]
    title = (f"{n} ranks, global batch {result['global_batch']} ({result['per_rank_batch']} per rank), "
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
    console.print(table, width=None if console.is_terminal else max(console.width, 140))


def _config_dict(config: TrainBenchConfig) -> dict:
    from dataclasses import asdict

    return asdict(config)
