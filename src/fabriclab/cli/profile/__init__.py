"""`fabriclab profile`: measure a zoo model's per-layer times, gradient-ready times and iteration time
on this machine; `fabriclab profile add-cost`: the element-wise add cost table (the AddEst of Zhang et
al., "Is Network the Bottleneck of Distributed Training?", NetAI'20).

The profile is written as JSON (`--out`, `fabriclab.workload.profile.Profile`), optionally also in Zhang
et al.'s `.bk.log` format (`--bk-log`) and as a chrome://tracing file (`--trace`). Every value and output
path is checked before torch is imported; a file that cannot be written after the work is one error line
(the profile JSON is then kept in a temporary file that the line names). Progress goes to stderr.

Try it: `fabriclab profile --model resnet50 --batch-size 8 --device cpu --out resnet50.json`.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import Callable, Optional

import typer
from rich.table import Table

from fabriclab.bench.limits import check_memory
from fabriclab.bench.train.config import model_memory_bytes
from fabriclab.cli.common import (EXIT_FAILED, FormatOption, JsonOption, Output, StoreOption, check_output_path,
                                  print_error, user_errors)
from fabriclab.units import format_size, parse_size
from fabriclab.workload.profile import write_bk_log
from fabriclab.workload.zoo import get_spec, input_shape, list_models

app = typer.Typer(help="Profile a zoo model on this machine (per-layer and gradient-ready times).",
                  rich_markup_mode=None)
DEVICE_RE = re.compile(r"cpu|cuda(:[0-9]+)?")
MAX_REPEATS = 100_000
MAX_THREADS = 1024
# The add-cost sweep's sizes: 40 B doubling, the rows of Zhang et al.'s cuda_vec_add.log (`ADD_SIZES`).
SMALLEST_ADD_BYTES = 40


def _say(message: str) -> None:
    print(f"  {message} ...", file=sys.stderr, flush=True)


def _profile_tables(profile, top: int) -> list[Table]:
    extra = profile.extra
    summary = Table(title=profile.summary(), title_justify="left")
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
    tables = [summary]
    slow = sorted(profile.layers, key=lambda layer: layer.forward_s + layer.backward_s, reverse=True)[:top]
    if slow:
        layers = Table(title=f"{len(slow)} slowest layers (hooked iterations)", title_justify="left")
        for column in ("layer", "forward ms", "backward ms", "param bytes"):
            layers.add_column(column, justify="left" if column == "layer" else "right")
        for layer in slow:
            layers.add_row(layer.name, f"{layer.forward_s * 1e3:.3f}", f"{layer.backward_s * 1e3:.3f}",
                           f"{layer.param_bytes:,}")
        tables.append(layers)
    return tables


def _check_device(device: str) -> None:
    if DEVICE_RE.fullmatch(device) is None:
        raise ValueError(f"unknown device {device!r}; use cpu, cuda or cuda:N")


@app.callback(invoke_without_command=True)
@user_errors
def profile_cmd(
    ctx: typer.Context,
    model: Optional[str] = typer.Option(None, help=f"Zoo model: {', '.join(list_models())}."),
    batch_size: int = typer.Option(32, help="Samples per iteration."),
    device: str = typer.Option("cpu", help="cpu, cuda or cuda:N."),
    out: Optional[Path] = typer.Option(None, help="Write the profile as JSON here."),
    bk_log: Optional[Path] = typer.Option(None, "--bk-log",
                                          help="Also write the gradient waits in Zhang et al.'s .bk.log format "
                                               "(NetAI'20) here."),
    trace: Optional[Path] = typer.Option(None, help="Also write a chrome://tracing JSON here."),
    warmup: int = typer.Option(2, help="Untimed iterations first."),
    repeats: int = typer.Option(5, help="Timed iterations (and as many hooked ones for per-layer times)."),
    input_size: Optional[int] = typer.Option(None, help="Image side or sequence length (default: the model's)."),
    threads: Optional[int] = typer.Option(None, help="CPU threads for torch (default: torch's choice; 1 is "
                                          "steadier on a busy machine)."),
    top: int = typer.Option(10, help="How many of the slowest layers to list."),
    fmt: FormatOption = None,
    json_path: JsonOption = None,
    store: StoreOption = None,
) -> None:
    """Profile --model training at --batch-size on --device (synthetic data, SGD with momentum)."""
    if ctx.invoked_subcommand is not None:
        return
    output = Output(fmt, json_path, store)
    if model is None:
        raise ValueError(f"give --model NAME; known models: {', '.join(list_models())}")
    get_spec(model)
    input_shape(model, batch_size, input_size)
    _check_device(device)
    if not (0 <= warmup <= MAX_REPEATS and 1 <= repeats <= MAX_REPEATS):
        raise ValueError(f"need 0 <= --warmup and 1 <= --repeats, each at most {MAX_REPEATS:,}; got {warmup} "
                         f"and {repeats}")
    if threads is not None and not 1 <= threads <= MAX_THREADS:
        raise ValueError(f"--threads {threads}: give 1..{MAX_THREADS}")
    if top < 0:
        raise ValueError(f"--top {top}: give 0 or more layers")
    for path, option in ((out, "--out"), (bk_log, "--bk-log"), (trace, "--trace")):
        check_output_path(path, option)
    check_memory(model_memory_bytes(model, batch_size, input_size), f"training {model} at batch {batch_size}",
                 "give a smaller --batch-size or --input-size")
    from fabriclab.workload.profiler import profile_model, write_chrome_trace

    profile = profile_model(model, batch_size, device, warmup, repeats, input_size=input_size,
                            num_threads=threads, progress=_say)
    for table in _profile_tables(profile, top):
        output.table(table)
    failed = _write_files(profile, ((out, lambda p: p.write_text(profile.to_json() + "\n"), "profile"),
                                    (bk_log, lambda p: write_bk_log(profile, p), ".bk.log"),
                                    (trace, lambda p: write_chrome_trace(profile, p), "trace")))
    config = {"model": model, "batch_size": batch_size, "device": device, "warmup": warmup,
              "repeats": repeats, "input_size": input_size, "threads": threads}
    results = {"summary": profile.summary(), "iteration_s": profile.iteration_s, "spread_s": profile.spread_s,
               "backward_s": profile.backward_s, "param_bytes": profile.param_bytes,
               "num_grads": len(profile.grads), "device_name": profile.device,
               **{k: profile.extra[k] for k in ("forward_s", "update_s", "hooked_iteration_s", "input_shape")}}
    output.record("profile", config, results)
    if failed:
        raise typer.Exit(EXIT_FAILED)


def _write_files(profile, files: tuple[tuple[Path | None, Callable[[Path], object], str], ...]) -> bool:
    """Write each file asked for; a failed write is one error line (the profile JSON is kept in a
    temporary file). Returns True when a write failed."""
    failed = False
    for path, write, what in files:
        if path is None:
            continue
        try:
            write(path)
        except OSError as exc:
            failed = True
            kept = ""
            if what == "profile":
                import tempfile

                with tempfile.NamedTemporaryFile("w", prefix="fabriclab-profile-", suffix=".json",
                                                 delete=False) as f:
                    f.write(profile.to_json() + "\n")
                kept = f"; the profile is kept in {f.name}"
            print_error(f"cannot write the {what} to {path}: {exc.strerror or exc}{kept}")
            continue
        print(f"{what} written to {path}", file=sys.stderr)
    return failed


@app.command("add-cost")
@user_errors
def add_cost_cmd(
    device: str = typer.Option("cpu", help="cpu, cuda or cuda:N."),
    out: Optional[Path] = typer.Option(None, help="Write `bytes,seconds` lines here (the format of Zhang et "
                                       "al.'s cuda_vec_add.log)."),
    max_size: str = typer.Option("640MiB", help="Largest vector; sizes are 40 B doubling up to it."),
    fmt: FormatOption = None,
    json_path: JsonOption = None,
    store: StoreOption = None,
) -> None:
    """Time an element-wise fp32 add `a += b` by vector size: the AddEst table of Zhang et al. (NetAI'20)."""
    output = Output(fmt, json_path, store)
    _check_device(device)
    check_output_path(out, "--out")
    limit = parse_size(max_size)
    if limit < SMALLEST_ADD_BYTES:
        raise ValueError(f"--max-size {max_size} is below the smallest size, {SMALLEST_ADD_BYTES} B")
    check_memory(2 * limit, f"two vectors of --max-size {max_size}", "give a smaller --max-size")
    from fabriclab.workload.profiler import ADD_SIZES, measure_add_cost, write_add_cost

    sizes = [size for size in ADD_SIZES if size <= limit]
    rows = measure_add_cost(device, sizes, progress=_say)
    table = Table(title=f"element-wise fp32 add on {device}", title_justify="left")
    for column in ("bytes", "size", "time (us)", "GB/s (3 x bytes moved)"):
        table.add_column(column, justify="right")
    for size, seconds in rows:
        # a += b reads a and b and writes a: 3 x size bytes of memory traffic.
        table.add_row(str(size), format_size(size), f"{seconds * 1e6:.2f}", f"{3 * size / seconds / 1e9:.2f}")
    output.table(table)
    failed = False
    if out is not None:
        try:
            write_add_cost(rows, out)
            print(f"add costs written to {out}", file=sys.stderr)
        except OSError as exc:
            print_error(f"cannot write the add costs to {out}: {exc.strerror or exc}; they are in the record")
            failed = True
    output.record("profile.add-cost", {"device": device, "max_size": limit},
                  [{"size_bytes": size, "seconds": seconds} for size, seconds in rows])
    if failed:
        raise typer.Exit(EXIT_FAILED)


def register(main_app: typer.Typer) -> None:
    """Add `profile` (with its `add-cost` and `kernels` sub-commands) to `main_app`."""
    from fabriclab.cli.profile import kernels as profile_kernels

    profile_kernels.register(app)
    main_app.add_typer(app, name="profile")
