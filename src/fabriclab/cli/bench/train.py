"""`fabriclab bench overhead|train`: our trainer's own cost, and every sync x overlap mode against DDP.

`overhead` runs `train --np 1` against a plain PyTorch loop (`bench.train.overhead`); `train` measures each
mode of our trainer beside DDP in one launch (`bench.train.modes`). torch is imported only inside them.

Try it: `fabriclab bench train --modes allreduce:ring/backward,allreduce:native/backward --steps 5 --warmup 1`.
"""

from __future__ import annotations

import dataclasses
from typing import Optional

import typer
from rich.table import Table

from fabriclab.cli.common import (EXIT_FAILED, FormatOption, JsonOption, Output, StoreOption, print_error,
                                  split_list, user_errors)
from fabriclab.cli.options import parse_count, parse_number


@user_errors
def overhead_cmd(
    model: str = typer.Option("resnet50", help="Zoo model."),
    batch_size: int = typer.Option(64, help="Batch per step of the one rank."),
    image_size: Optional[int] = typer.Option(None, help="Image side (the model's default if not given)."),
    device: str = typer.Option("cpu", help="cpu or cuda."),
    precision: str = typer.Option("fp32", help="fp32, bf16 or fp16."),
    channels_last: bool = typer.Option(False, help="Channels-last layout (convolutional models)."),
    steps: int = typer.Option(50, help="Timed steps per runtime and round."),
    warmup: int = typer.Option(10, help="Untimed steps before them."),
    rounds: int = typer.Option(3, help="Launches; the median ratio is reported."),
    fmt: FormatOption = None, json_path: JsonOption = None, store: StoreOption = None,
) -> None:
    """The trainer's own cost: `train --np 1` against a plain PyTorch loop (goal >= 0.97x on a GPU)."""
    from fabriclab.bench.train.overhead import OverheadConfig, run_overhead

    out = Output(fmt, json_path, store)
    config = OverheadConfig(model=model, batch_size=batch_size, image_size=image_size, device=device,
                            precision=precision, channels_last=channels_last, steps=steps, warmup=warmup,
                            rounds=rounds)
    r = run_overhead(config, on_round=lambda row: out.note(
        f"round {row['round'] + 1}: ours {row['ours_images_per_sec']:.2f} img/s, plain "
        f"{row['plain_images_per_sec']:.2f} img/s, ratio {row['ratio']:.3f}"))
    verdict, code = overhead_verdict(r["ratio"], r["goal_ratio"], device)
    table = Table(title=f"trainer overhead, {model}, batch {batch_size}, {device}, {precision}")
    for col in ("ours (img/s)", "plain loop (img/s)", "ours / plain", "goal", "verdict"):
        table.add_column(col, justify="right")
    table.add_row(f"{r['ours_images_per_sec']:.2f}", f"{r['plain_images_per_sec']:.2f}", f"{r['ratio']:.3f}",
                  f">= {r['goal_ratio']:g} on a GPU", verdict)
    out.table(table)
    if code == 0 and not device.startswith("cuda"):
        out.note(f"the goal (>= {r['goal_ratio']:g}) is for a GPU: on {device} the ratio is shown, not judged "
                 f"(a CPU step's cost is dominated by the model, not by the trainer's own work)")
    out.record("bench.overhead", config, r | {"verdict": verdict})
    if code:
        print_error(f"ours / plain {r['ratio']:.3f} missed the goal >= {r['goal_ratio']:g} on {device}")
        raise typer.Exit(code)


def overhead_verdict(ratio: float, goal: float, device: str) -> tuple[str, int]:
    """`met` or `missed` (exit 1) on a GPU; on a CPU `not judged` (the goal is for GPUs), exit 0."""
    if not device.startswith("cuda"):
        return "not judged (CPU)", 0
    return ("met", 0) if ratio >= goal else ("missed", EXIT_FAILED)


@user_errors
def train_cmd(
    modes: str = typer.Option("all", help="Comma list of sync/overlap or sync/overlap/compression modes, or "
                                          "all (15 modes)."),
    model: str = typer.Option("resnet50", help="Zoo model."),
    num_ranks: str = typer.Option("4", "--np", metavar="N", help="Local ranks."),
    batch_size: str = typer.Option("32", metavar="N", help="Global batch per step."),
    image_size: str = typer.Option("32", metavar="PIXELS", help="Image side (real compute)."),
    replay: Optional[str] = typer.Option(None, help="Replay a profile's layer times (resnet50, a file)."),
    dilation: str = typer.Option("1", metavar="D", help="Factor on every replayed time (>= 1)."),
    steps: str = typer.Option("30", metavar="N", help="Timed steps per mode."),
    warmup: str = typer.Option("5", metavar="N", help="Untimed steps before them."),
    comm_threads: str = typer.Option("2", metavar="N", help="Helper threads of our trainer."),
    timeout: str = typer.Option("120", metavar="SECONDS", help="Seconds to wait for a stuck rank."),
    device: str = typer.Option("cpu", help="cpu or cuda (each rank on the GPU of its local rank)."),
    backend: Optional[str] = typer.Option(None, help="gloo, nccl or mpi (default: nccl on cuda, gloo on cpu)."),
    precision: str = typer.Option("fp32", help="fp32, bf16 or fp16 (autocast; fp16 with a loss scale)."),
    channels_last: bool = typer.Option(False, "--channels-last", help="Channels-last weights and batches."),
    fmt: FormatOption = None,
    json_path: JsonOption = None,
    store: StoreOption = None,
) -> None:
    """Our trainer in every sync x overlap mode against DDP, each mode measured beside DDP in one run."""
    out = Output(fmt, json_path, store)
    base, chosen = _modes_config(locals())
    from fabriclab.bench.train.modes import run_modes
    from fabriclab.runtime.launch import LaunchError

    table = _modes_table(base)
    out.note(f"{len(chosen)} modes, one launch each ...")
    try:
        rows = run_modes(base, chosen, lambda row: _add_mode_row(out, table, row))
    except LaunchError as exc:
        print_error(exc)
        raise typer.Exit(EXIT_FAILED)
    out.table(table)
    out.record("bench.train", {"modes": chosen, **dataclasses.asdict(base)}, rows)
    if not all(r["params_agree"] for r in rows):
        raise typer.Exit(EXIT_FAILED)


def _modes_config(o: dict) -> tuple:
    """(the run every mode shares, the modes) of the parsed command line `o` (train_cmd's parameters)."""
    ranks = parse_count(o["num_ranks"], "--np", maximum=1024)
    batch = parse_count(o["batch_size"], "--batch-size", maximum=1 << 20)
    side = parse_count(o["image_size"], "--image-size", minimum=8, maximum=4096)
    factor = parse_number(o["dilation"], "--dilation", minimum=1.0, example="10")
    num_steps = parse_count(o["steps"], "--steps", maximum=1_000_000)
    num_warmup = parse_count(o["warmup"], "--warmup", minimum=0, maximum=1_000_000)
    threads = parse_count(o["comm_threads"], "--comm-threads", maximum=64)
    timeout_s = parse_number(o["timeout"], "--timeout", minimum=1.0, example="120")
    from fabriclab.bench.train.modes import MODES, modes_config

    chosen = list(MODES) if o["modes"].strip() == "all" else split_list(o["modes"], "modes")
    base = modes_config(model=o["model"], num_ranks=ranks, batch_size=batch, image_size=side, steps=num_steps,
                        warmup=num_warmup, comm_threads=threads, timeout_s=timeout_s, device=o["device"].strip(),
                        precision=o["precision"].strip(), channels_last=o["channels_last"], replay=o["replay"],
                        dilation=factor, backend=o["backend"])
    return base, chosen


def _modes_table(base) -> Table:
    side = base.image_size
    what = f"replay of {base.replay} x{base.dilation:g}" if base.replay else f"{base.model} {side}x{side}"
    table = Table(title=f"ours vs DDP, {what}, {base.num_ranks} ranks, global batch {base.batch_size}, "
                        f"{base.steps} steps (+{base.warmup}) per mode; ms per iteration, CPU ms per rank and step")
    for col in ("mode", "ours img/s", "ddp img/s", "ours/ddp", "iter ms", "ddp iter ms", "exposed ms",
                "CPU ms", "ddp CPU ms", "MB sent", "params"):
        table.add_column(col, justify="left" if col == "mode" else "right")
    return table


def _add_mode_row(out: Output, table: Table, row: dict) -> None:
    out.note(f"  {row['mode']}: {row['ours_images_per_sec']:.2f} vs ddp {row['ddp_images_per_sec']:.2f} "
             f"img/s ({row['ratio']:.3f})")
    table.add_row(row["mode"], f"{row['ours_images_per_sec']:.2f}", f"{row['ddp_images_per_sec']:.2f}",
                  f"{row['ratio']:.3f}", f"{row['iteration_ms']:.1f}", f"{row['ddp_iteration_ms']:.1f}",
                  f"{row['exposed_ms']:.1f}", f"{row['cpu_ms']:.1f}", f"{row['ddp_cpu_ms']:.1f}",
                  f"{row['MB_sent']:.1f}", "agree" if row["params_agree"] else "DIFFER")


def register(app: typer.Typer) -> None:
    """Add `overhead` and `train` to the `bench` group."""
    app.command("overhead")(overhead_cmd)
    app.command("train")(train_cmd)
