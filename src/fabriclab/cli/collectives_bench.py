"""`fabriclab collectives bench`: time collective algorithms for real, next to the backend's own collective.

Spawns `--np` local ranks on a Gloo group (or joins a torchrun / Slurm / mpirun launch), runs every
algorithm of `--algo` at every size of `--sizes` and prints an nccl-tests style table: size, count, type,
redop, root, time, algbw, busbw (formulas in `fabriclab.bench.collectives`), the ratio of busbw to `native`
when it was measured, and #wrong, the elements that differ from the expected result. Exits with 1 when
any result is wrong or a rank fails, 2 on bad input.

Try it: `fabriclab collectives bench --algo ring,butterfly,native --np 4 --sizes 4B:256MB`.
"""

from __future__ import annotations

from typing import Annotated

import typer
from rich import box
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table
from rich.text import Text

from fabriclab.bench.collectives import NATIVE, BenchConfig, config_dict, run_bench
from fabriclab.cli.common import (EXIT_FAILED, console, err_console, JsonOption, print_error, save_record,
                                  split_list, user_errors)
from fabriclab.runtime.executor import DEFAULT_SEGMENT_BYTES
from fabriclab.runtime.launch import LaunchError, detect_launch
from fabriclab.units import format_size, parse_size, parse_size_range

# The main job's default: a short sweep that finishes well under a minute on 2 cores.
DEFAULT_CONFIG = BenchConfig(algos=("ring", "butterfly", NATIVE), op="allreduce",
                             sizes_bytes=tuple(parse_size_range("1KB:16MB")), iters=5, warmup=2,
                             num_ranks=4, timeout_s=60.0)


def register(app: typer.Typer) -> None:
    """Add `bench` to the `collectives` sub-app."""
    app.command("bench")(bench)


@user_errors
def bench(
    algo: Annotated[str, typer.Option(help="Comma list of algorithm specs; 'native' is the backend's "
                                           "own collective, e.g. ring,butterfly,native.")]
    = "ring,butterfly,native",
    num_ranks: Annotated[int, typer.Option("--np", help="Local ranks to spawn (a torchrun/Slurm/mpirun "
                                                          "launch brings its own).")] = 4,
    sizes: Annotated[str, typer.Option(help="Buffer sizes: 4B:256MB (x2 steps), 1KB:16MB:x4 or 1KB,1MB.")]
    = "1KB:16MB",
    op: Annotated[str, typer.Option(help="allreduce, reduce, broadcast, reduce_scatter or allgather.")]
    = "allreduce",
    root: Annotated[int, typer.Option(help="Root rank of reduce and broadcast.")] = 0,
    dtype: Annotated[str, typer.Option(help="float32, float16, bfloat16, int32 or int64.")] = "float32",
    redop: Annotated[str, typer.Option(help="sum, max or min.")] = "sum",
    iters: Annotated[int, typer.Option(help="Timed iterations per algorithm and size.")] = 20,
    warmup: Annotated[int, typer.Option(help="Untimed iterations before them.")] = 5,
    timeout: Annotated[float, typer.Option(help="Seconds to wait for a missing or stuck rank before "
                                                "failing with its name.")] = 60.0,
    segment: Annotated[str, typer.Option(help="Message size the executor cuts chunks into on CPU.")]
    = format_size(DEFAULT_SEGMENT_BYTES),
    json_path: JsonOption = None,
) -> None:
    """Time collective algorithms and the backend's own collective, nccl-tests style."""
    config = BenchConfig(algos=tuple(split_list(algo, "algorithm list")), op=op.strip(),
                         sizes_bytes=tuple(parse_size_range(sizes)), dtype=dtype.strip(),
                         redop=redop.strip(), root=root, iters=iters, warmup=warmup, num_ranks=num_ranks,
                         timeout_s=timeout, segment_bytes=parse_size(segment))
    raise typer.Exit(execute(config, json_path))


def run_default() -> int:
    """The main job on its built-in default (`DEFAULT_CONFIG`); returns the exit code."""
    return execute(DEFAULT_CONFIG, None)


def execute(config: BenchConfig, json_path=None) -> int:
    """Run, print the table (in the reporting process only) and write the record; returns the exit code."""
    launch = detect_launch()
    reporter = launch is None or launch.rank == 0
    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
    with Progress(*columns, console=err_console, transient=True,
                  disable=not (reporter and err_console.is_terminal)) as progress:
        task = progress.add_task(f"{config.op} on {launch.world_size if launch else config.num_ranks} ranks",
                                 total=len(config.algos) * len(config.sizes_bytes))

        def on_row(row: dict) -> None:
            progress.update(task, advance=1, description=f"{row['algo']} {format_size(row['size_bytes'])}")

        try:
            rows = run_bench(config, on_row=on_row)
        except LaunchError as exc:
            print_error(exc)
            return EXIT_FAILED
    if not reporter:
        return EXIT_FAILED if any(r["num_wrong"] for r in rows) else 0
    add_native_ratio(rows)
    print_table(rows, config)
    save_record(json_path, "collectives.bench", config_dict(config), rows)
    wrong = [r for r in rows if r["num_wrong"]]
    if wrong:
        err_console.print(f"{len(wrong)} of {len(rows)} results were wrong (#wrong > 0)", style="bold red",
                          markup=False)
        return EXIT_FAILED
    return 0


def add_native_ratio(rows: list[dict]) -> None:
    """Set `busbw_vs_native` on every row whose size was also measured with `native`."""
    native = {r["size_bytes"]: r["busbw_GBps"] for r in rows if r["algo"] == NATIVE}
    for row in rows:
        base = native.get(row["size_bytes"])
        row["busbw_vs_native"] = row["busbw_GBps"] / base if base else None


def print_table(rows: list[dict], config: BenchConfig) -> None:
    num_ranks = rows[0]["num_ranks"] if rows else config.num_ranks
    title = (f"collectives bench: {config.op}, {num_ranks} ranks, {config.iters} iters "
             f"(+{config.warmup} warm-up)")
    table = Table(title=title, title_justify="left", box=box.SIMPLE_HEAD, pad_edge=False)
    with_ratio = any(r.get("busbw_vs_native") is not None for r in rows)
    headers = ["algo", "size(B)", "count(elements)", "type", "redop", "root", "time(us)", "algbw(GB/s)",
               "busbw(GB/s)"] + (["vs native"] if with_ratio else []) + ["#wrong"]
    for header in headers:
        table.add_column(header, justify="left" if header in ("algo", "type", "redop") else "right",
                         no_wrap=True)
    for row in rows:
        ratio = row.get("busbw_vs_native")
        cells = [Text(row["algo"]), str(row["size_bytes"]), str(row["count"]), row["dtype"], row["redop"],
                 str(row["root"]), f"{row['time_us']:.1f}", f"{row['algbw_GBps']:.3f}",
                 f"{row['busbw_GBps']:.3f}"]
        if with_ratio:
            cells.append("-" if ratio is None else f"{ratio:.2f}")
        cells.append(Text(str(row["num_wrong"]), style="red" if row["num_wrong"] else "green"))
        table.add_row(*cells)
    # Piped output is not folded at 80 columns: a record of the run should read like nccl-tests' output.
    console.print(table, width=None if console.is_terminal else max(console.width, 140))
