"""`fabriclab profile`: measure a zoo model's per-layer times, gradient-ready times and iteration time
on this machine; `fabriclab profile add-cost`: the element-wise add cost table (seed 004's AddEst).

The profile is written as JSON (`--out`, `fabriclab.workload.profile.Profile`), optionally also as
seed 004's `.bk.log` (`--bk-log`) and as a chrome://tracing file (`--trace`). Progress goes to stderr.

Try it: `fabriclab profile --model resnet50 --batch-size 8 --device cpu --out resnet50.json`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer
from rich.table import Table

from fabriclab.cli.common import JsonOption, console, err_console, save_record, user_errors
from fabriclab.units import format_size, parse_size
from fabriclab.workload.profile import write_bk_log
from fabriclab.workload.zoo import get_spec, list_models

app = typer.Typer(help="Profile a zoo model on this machine (per-layer and gradient-ready times).")


def _say(message: str) -> None:
    err_console.print(f"  {message} ...", style="dim", markup=False, highlight=False)


def _print_profile(profile, top: int) -> None:
    extra = profile.extra
    summary = Table(title=profile.summary(), title_justify="left", show_header=False)
    summary.add_column("what")
    summary.add_column("value", justify="right")
    ms = lambda seconds: f"{seconds * 1e3:.2f} ms"  # noqa: E731
    phases = " / ".join(ms(extra[k]) for k in ("forward_s", "backward_s", "update_s"))
    rows = [("input per sample", "x".join(map(str, extra["input_shape"]))),
            ("iteration (forward + backward + update)", f"{ms(profile.iteration_s)} ± {ms(profile.spread_s)}"),
            ("throughput", f"{profile.batch_size / profile.iteration_s:.1f} samples/s"),
            ("forward / backward / update", phases),
            ("hooked iteration (per-layer timing on)", ms(extra["hooked_iteration_s"])),
            ("warm-up, repeats, CPU threads", f"{extra['warmup']}, {extra['repeats']}, {extra['num_threads']}")]
    for row in rows:
        summary.add_row(*row)
    console.print(summary)
    slow = sorted(profile.layers, key=lambda layer: layer.forward_s + layer.backward_s, reverse=True)[:top]
    if slow:
        layers = Table(title=f"{len(slow)} slowest layers (hooked iterations)", title_justify="left")
        for column in ("layer", "forward ms", "backward ms", "param bytes"):
            layers.add_column(column, justify="left" if column == "layer" else "right")
        for layer in slow:
            layers.add_row(layer.name, f"{layer.forward_s * 1e3:.3f}", f"{layer.backward_s * 1e3:.3f}",
                           f"{layer.param_bytes:,}")
        console.print(layers)


@app.callback(invoke_without_command=True)
@user_errors
def profile_cmd(
    ctx: typer.Context,
    model: Optional[str] = typer.Option(None, help=f"Zoo model: {', '.join(list_models())}."),
    batch_size: int = typer.Option(32, help="Samples per iteration."),
    device: str = typer.Option("cpu", help="cpu, cuda or cuda:N."),
    out: Optional[Path] = typer.Option(None, dir_okay=False, help="Write the profile as JSON here."),
    bk_log: Optional[Path] = typer.Option(None, "--bk-log", dir_okay=False,
                                          help="Also write seed 004's .bk.log (gradient waits) here."),
    trace: Optional[Path] = typer.Option(None, dir_okay=False, help="Also write a chrome://tracing JSON here."),
    warmup: int = typer.Option(2, help="Untimed iterations first."),
    repeats: int = typer.Option(5, help="Timed iterations (and as many hooked ones for per-layer times)."),
    input_size: Optional[int] = typer.Option(None, help="Image side or sequence length (default: the model's)."),
    threads: Optional[int] = typer.Option(None, help="CPU threads for torch (default: torch's choice; 1 is "
                                          "steadier on a busy machine)."),
    top: int = typer.Option(10, help="How many of the slowest layers to list."),
    json_path: JsonOption = None,
) -> None:
    """Profile --model training at --batch-size on --device (synthetic data, SGD with momentum)."""
    if ctx.invoked_subcommand is not None:
        return
    if model is None:
        raise ValueError(f"give --model NAME; known models: {', '.join(list_models())}")
    get_spec(model)
    from fabriclab.workload.profiler import profile_model, write_chrome_trace

    profile = profile_model(model, batch_size, device, warmup, repeats, input_size=input_size,
                            num_threads=threads, progress=_say)
    _print_profile(profile, top)
    for path, write, what in ((out, lambda p: p.write_text(profile.to_json() + "\n"), "profile"),
                              (bk_log, lambda p: write_bk_log(profile, p), ".bk.log"),
                              (trace, lambda p: write_chrome_trace(profile, p), "trace")):
        if path is not None:
            write(path)
            err_console.print(f"{what} written to {path}", markup=False, soft_wrap=True)
    config = {"model": model, "batch_size": batch_size, "device": device, "warmup": warmup,
              "repeats": repeats, "input_size": input_size, "threads": threads}
    results = {"summary": profile.summary(), "iteration_s": profile.iteration_s, "spread_s": profile.spread_s,
               "backward_s": profile.backward_s, "param_bytes": profile.param_bytes,
               "num_grads": len(profile.grads), "device_name": profile.device,
               **{k: profile.extra[k] for k in ("forward_s", "update_s", "hooked_iteration_s", "input_shape")}}
    save_record(json_path, "profile", config, results)


@app.command("add-cost")
@user_errors
def add_cost_cmd(
    device: str = typer.Option("cpu", help="cpu, cuda or cuda:N."),
    out: Optional[Path] = typer.Option(None, dir_okay=False, help="Write `bytes,seconds` lines here "
                                       "(the format of seed 004's cuda_vec_add.log)."),
    max_size: str = typer.Option("640MiB", help="Largest vector; sizes are 40 B doubling up to it."),
    json_path: JsonOption = None,
) -> None:
    """Time an element-wise fp32 add `a += b` by vector size: the AddEst table of seed 004."""
    from fabriclab.workload.profiler import ADD_SIZES, measure_add_cost, write_add_cost

    limit = parse_size(max_size)
    sizes = [size for size in ADD_SIZES if size <= limit]
    if not sizes:
        raise ValueError(f"--max-size {max_size} is below the smallest size, {ADD_SIZES[0]} B")

    rows = measure_add_cost(device, sizes, progress=_say)
    table = Table(title=f"element-wise fp32 add on {device}", title_justify="left")
    for column in ("bytes", "size", "time (us)", "GB/s (3 x bytes moved)"):
        table.add_column(column, justify="right")
    for size, seconds in rows:
        # a += b reads a and b and writes a: 3 x size bytes of memory traffic.
        table.add_row(str(size), format_size(size), f"{seconds * 1e6:.2f}", f"{3 * size / seconds / 1e9:.2f}")
    console.print(table)
    if out is not None:
        write_add_cost(rows, out)
        err_console.print(f"add costs written to {out}", markup=False, soft_wrap=True)
    save_record(json_path, "profile.add-cost", {"device": device, "max_size": limit},
                [{"size_bytes": size, "seconds": seconds} for size, seconds in rows])


def register(main_app: typer.Typer) -> None:
    """Add `profile` (with its `add-cost` sub-command) to `main_app`."""
    main_app.add_typer(app, name="profile")
