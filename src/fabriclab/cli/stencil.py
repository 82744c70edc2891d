"""`fabriclab stencil`: the CFD-like halo-exchange mini-app (Samsi et al.'s CartDG): run, scale, simulate.

* `run`: the mini-app on `--np` local ranks (or inside `fabriclab emu run` / torchrun: one rank each);
  prints compute and communication time per step.
* `scale` (root): strong scaling on Samsi et al.'s two fabrics emulated at a scale (25gbe, 100g-opa),
  one emulated host per rank, with the simulated communication of each point next to the measured;
  each point is printed as soon as it is measured.
* `simulate`: the same workload at scale (thousands of ranks, racks of 32 nodes as leaves of a fat
  tree) on both fabrics, and a plot like Samsi et al.'s Figure 3 (TX-GAIA, "Benchmarking network
  fabrics for data distributed training of deep neural networks").

Every value, rank count and output folder is checked before torch is imported or a rank starts.

Try it: `fabriclab stencil run --np 4 --cells 128 --steps 20 --work 1`.
"""

from __future__ import annotations

import sys
from dataclasses import asdict
from pathlib import Path
from typing import Optional

import typer
from rich.table import Table

from fabriclab.bench.limits import RANK_MEMORY_BYTES, check_local_ranks, check_memory, check_number
from fabriclab.bench.stencil.sim import MINI_APP_COMPUTE_PER_CELL_S, AtScaleConfig, simulate_at_scale
from fabriclab.cli.common import (EXIT_FAILED, FormatOption, JsonOption, Output, StoreOption, check_output_dir,
                                  print_error, split_list, user_errors)
from fabriclab.cli.options import parse_bisection
from fabriclab.cli.stream import RowStream
from fabriclab.record import write_outputs
from fabriclab.report.stencil import SCALE_COLUMNS, SCALE_TITLE, at_scale_table, plot_figure3, scale_cells
from fabriclab.runtime.environment import LaunchError
from fabriclab.sim.stencil import decompose
from fabriclab.units import format_size, parse_int_list, parse_time

app = typer.Typer(help="CFD-like stencil mini-app (Samsi et al.'s CartDG): run, emulated scaling, simulation.",
                  no_args_is_help=True, rich_markup_mode=None)
DTYPE_BYTES = {"float32": 4, "float64": 8}
# A rank holds its block with ghost layers twice (the field and the update) plus its packed faces.
FIELD_COPIES = 3
MAX_STEPS = 1_000_000
MAX_WORK = 10_000
# Simulated ranks: 65,536 took 10.5 s and 0.7 GB here (about linear in ranks), so 2^18 stays near a
# minute and 3 GB per point.
MAX_SIMULATED_RANKS = 1 << 18


def register(main_app: typer.Typer) -> None:
    """Add the `stencil` group to the main app."""
    main_app.add_typer(app, name="stencil")


def _ms(seconds: float) -> str:
    return f"{seconds * 1e3:.3f} ms"


def _check_run(cells: int, steps: int, warmup: int, work: int, dtype: str, timeout: float,
               num_ranks: list[int]) -> None:
    """The mini-app's values, before torch is imported: sizes, counts, memory, decomposition."""
    if cells < 1 or not 1 <= steps <= MAX_STEPS or not 0 <= warmup <= MAX_STEPS or not 1 <= work <= MAX_WORK:
        raise ValueError(f"cells {cells}, steps {steps}, warmup {warmup}, work {work}: give cells >= 1, "
                         f"steps 1..{MAX_STEPS:,}, warmup 0..{MAX_STEPS:,} and work 1..{MAX_WORK:,}")
    if dtype not in DTYPE_BYTES:
        raise ValueError(f"dtype {dtype!r}: use one of {', '.join(DTYPE_BYTES)}")
    check_number(timeout, "--timeout", above=0)
    for n in num_ranks:
        check_local_ranks(n)
    largest = max(num_ranks)
    check_memory(FIELD_COPIES * (cells + 2) ** 3 * DTYPE_BYTES[dtype] + largest * RANK_MEMORY_BYTES,
                 f"a {cells}^3 {dtype} field on {largest} local ranks", "give fewer --cells or --np")
    for n in num_ranks:
        check_split(n, cells)
        decompose(n, cells)


def check_split(num_ranks: int, cells: int) -> None:
    """ValueError unless `num_ranks` splits a `cells`^3 cube into identical blocks (a fast exact test:
    every prime's power in the rank count must fit three times in its power in `cells`)."""
    if not _splits(num_ranks, cells):
        near = sorted((n for n in range(max(1, num_ranks - 4096), num_ranks + 4097) if _splits(n, cells)),
                      key=lambda n: (abs(n - num_ranks), n))[:3]
        raise ValueError(f"{num_ranks} ranks cannot split {cells}x{cells}x{cells} cells into identical blocks: "
                         f"use a rank count whose factors divide the cells per side, e.g. "
                         f"{', '.join(map(str, sorted(near))) or 'a power of two with power-of-two cells'}")


def _splits(num_ranks: int, cells: int) -> bool:
    n, p = num_ranks, 2
    while p * p <= n:
        power = 0
        while n % p == 0:
            n //= p
            power += 1
        if power and power > 3 * _power(cells, p):
            return False
        p += 1
    return n == 1 or _power(cells, n) >= 1


def _power(value: int, prime: int) -> int:
    count = 0
    while value % prime == 0:
        value //= prime
        count += 1
    return count


@app.command("run")
@user_errors
def run_cmd(
    num_ranks: int = typer.Option(4, "--np", help="Local ranks (a torchrun / emu run launch brings its own)."),
    cells: int = typer.Option(128, help="Cells per side of the periodic cube."),
    steps: int = typer.Option(20, help="Timed steps."),
    warmup: int = typer.Option(2, help="Untimed steps first."),
    work: int = typer.Option(1, help="Stencil sweeps per step (compute per cell)."),
    dtype: str = typer.Option("float32", help="float32 or float64."),
    timeout: float = typer.Option(120.0, help="Seconds to wait for a stuck rank."),
    device: str = typer.Option("cpu", help="cpu or cuda (each rank on the GPU of its local rank)."),
    backend: Optional[str] = typer.Option(None, help="gloo, nccl or mpi (default: nccl on cuda, gloo on cpu)."),
    fmt: FormatOption = None,
    json_path: JsonOption = None,
    store: StoreOption = None,
) -> None:
    """Run the mini-app and print compute and communication time per step."""
    out = Output(fmt, json_path, store)
    _check_run(cells, steps, warmup, work, dtype, timeout, [num_ranks])
    from fabriclab.bench.stencil.run import run_stencil
    from fabriclab.runtime.stencil import StencilConfig

    config = StencilConfig(cells=cells, steps=steps, warmup=warmup, work=work, dtype=dtype, device=device.strip(),
                           backend=backend)
    try:
        summary, reporter = run_stencil(config, num_ranks, timeout_s=timeout)
    except LaunchError as exc:
        print_error(exc)
        raise typer.Exit(EXIT_FAILED) from None
    if not reporter:
        return
    share = summary["comm_s"] / (summary["comm_s"] + summary["compute_s"])
    if out.fmt in ("table", "plain"):
        out.note(f"stencil {cells}^3 on {summary['num_ranks']} ranks, grid "
                 f"{'x'.join(map(str, summary['procs']))}, block {'x'.join(map(str, summary['block']))}, faces "
                 f"{'/'.join(format_size(b) for b in summary['face_bytes'])}, work {work}, {steps} steps")
        out.note(f"  per step (mean over ranks): compute {_ms(summary['compute_s'])} (CPU "
                 f"{_ms(summary['compute_cpu_s'])}), communication {_ms(summary['comm_s'])} "
                 f"({share:.0%} of the step; slowest rank {_ms(summary['comm_max_s'])}); slowest step "
                 f"{_ms(summary['step_max_s'])}; compute per cell {summary['compute_per_cell_s'] * 1e9:.2f} ns")
    else:
        out.table(_run_table(summary, cells, work, share))
    out.record("stencil.run", asdict(config) | {"num_ranks": num_ranks, "launch": summary.pop("launch", None)},
               summary)


def _run_table(summary: dict, cells: int, work: int, share: float) -> Table:
    table = Table(title=f"stencil {cells}^3, work {work}: times per step (means over ranks)")
    columns = ("ranks", "grid", "block", "compute(ms)", "compute CPU(ms)", "comm(ms)", "comm share",
               "comm max(ms)", "step max(ms)", "compute per cell(ns)")
    for column in columns:
        table.add_column(column, justify="right")
    ms = lambda key: f"{summary[key] * 1e3:.3f}"  # noqa: E731
    table.add_row(str(summary["num_ranks"]), "x".join(map(str, summary["procs"])),
                  "x".join(map(str, summary["block"])), ms("compute_s"), ms("compute_cpu_s"), ms("comm_s"),
                  f"{share:.0%}", ms("comm_max_s"), ms("step_max_s"), f"{summary['compute_per_cell_s'] * 1e9:.2f}")
    return table


@app.command("scale")
@user_errors
def scale_cmd(
    num_ranks: str = typer.Option("1,2,4,8", "--np", help="Rank counts, one emulated host each."),
    fabrics: str = typer.Option("25gbe,100g-opa", help="Fabric presets: Samsi et al.'s 25 GbE and 100 Gb "
                                                       "Omni-Path."),
    scale: str = typer.Option("1/100", help="Link rate scale (dilation 1/scale)."),
    cells: int = typer.Option(256, help="Cells per side (256: faces of 256 KB at 2 ranks, beyond the tbf "
                                        "bucket, so the fabrics differ)."),
    steps: int = typer.Option(10, help="Timed steps."),
    work: int = typer.Option(1, help="Stencil sweeps per step."),
    burst: str = typer.Option("2ms", help="tbf bucket as time at the rate (floor 128 KiB)."),
    queue: str = typer.Option("10ms", help="tbf queue limit as time at the rate."),
    out: Optional[Path] = typer.Option(None, help="Write stencil_scale.json/.csv/.png in this folder."),
    fmt: FormatOption = None,
    json_path: JsonOption = None,
    store: StoreOption = None,
) -> None:
    """Strong scaling on the emulated fabrics (root): compute / communication split per rank count."""
    output = Output(fmt, json_path, store)
    check_output_dir(out, "--out")
    counts = parse_int_list(num_ranks, minimum=1, what="--np", maximum=1 << 16)
    _check_run(cells, steps, 0, work, "float32", 300.0, counts)
    burst_s = check_number(parse_time(burst), "--burst", above=0)
    queue_s = check_number(parse_time(queue), "--queue", above=0)
    from fabriclab.bench.stencil.scale import ScaleConfig, run_scale
    from fabriclab.emu.netns import EmuError
    from fabriclab.runtime.stencil import StencilConfig

    config = ScaleConfig(fabrics=tuple(split_list(fabrics, "fabric list")), num_ranks=tuple(counts),
                         scale=scale, stencil=StencilConfig(cells=cells, steps=steps, work=work),
                         burst_s=burst_s, queue_s=queue_s)
    stream = RowStream(output, SCALE_TITLE, SCALE_COLUMNS, left=("fabric",))
    try:
        rows = run_scale(config, on_row=lambda row: stream.row(scale_cells(row)))
    except (EmuError, LaunchError) as exc:
        print_error(exc)
        raise typer.Exit(EXIT_FAILED) from None
    stream.finish()
    config_dict = asdict(config)
    output.record("stencil.scale", config_dict, rows)
    if out is not None:
        _write_folder(out, "stencil_scale", lambda: (
            write_outputs(out, "stencil_scale", "stencil.scale", config_dict, rows, rows),
            plot_figure3(rows, out / "stencil_scale.png", measured=True,
                         title=f"stencil {cells}^3, work {work}: emulated fabrics (scale {scale})")))


@app.command("simulate")
@user_errors
def simulate_cmd(
    ranks: str = typer.Option("64,256,1024,4096", help="Rank counts."),
    fabrics: str = typer.Option("25gbe,100g-opa", help="Fabric presets: Samsi et al.'s 25 GbE and 100 Gb "
                                                       "Omni-Path (their real links)."),
    cells: int = typer.Option(128, help="Cells per side of the periodic cube."),
    compute_per_cell: str = typer.Option(f"{MINI_APP_COMPUTE_PER_CELL_S * 1e9:g}ns", "--compute-per-cell-s",
                                         help="Compute per cell per step on one core (e.g. 4ns, 1ms)."),
    bytes_per_face_cell: int = typer.Option(4, help="Halo bytes per face cell (CartDG p=7 element: 2560)."),
    rack_size: int = typer.Option(32, help="Nodes per rack (one leaf switch each)."),
    gpus_per_server: int = typer.Option(1, help="Ranks per node (Samsi et al.'s CPU nodes: 40)."),
    bisection: str = typer.Option("1", help="Bisection ratio above the racks."),
    steps: int = typer.Option(2, help="Steps simulated per point."),
    alpha: str = typer.Option("0us", help="Software overhead per message (MPI, NIC), e.g. 1us."),
    out: Optional[Path] = typer.Option(None, help="Write stencil_sim.json/.csv/.png in this folder."),
    fmt: FormatOption = None,
    json_path: JsonOption = None,
    store: StoreOption = None,
) -> None:
    """The stencil at scale on the flow-level simulator, and a plot like Samsi et al.'s Figure 3."""
    output = Output(fmt, json_path, store)
    check_output_dir(out, "--out")
    counts = parse_int_list(ranks, minimum=1, what="--ranks", maximum=MAX_SIMULATED_RANKS)
    if cells < 1 or bytes_per_face_cell < 1 or rack_size < 1 or gpus_per_server < 1 or not 1 <= steps <= 1000:
        raise ValueError(f"cells {cells}, bytes per face cell {bytes_per_face_cell}, rack size {rack_size}, ranks "
                         f"per node {gpus_per_server}, steps {steps}: give each >= 1 (steps at most 1000)")
    for n in counts:
        check_split(n, cells)
    config = AtScaleConfig(ranks=tuple(counts), fabrics=tuple(split_list(fabrics, "fabric list")), cells=cells,
                           compute_per_cell_s=check_number(parse_time(compute_per_cell), "--compute-per-cell-s",
                                                           minimum=0),
                           bytes_per_face_cell=bytes_per_face_cell, rack_size=rack_size,
                           gpus_per_server=gpus_per_server, bisection=parse_bisection(bisection), steps=steps,
                           alpha_s=check_number(parse_time(alpha), "--alpha", minimum=0))
    rows = simulate_at_scale(config)
    output.table(at_scale_table(rows))
    config_dict = asdict(config) | {"bisection": str(config.bisection)}
    output.record("stencil.simulate", config_dict, rows)
    if out is not None:
        _write_folder(out, "stencil_sim", lambda: (
            write_outputs(out, "stencil_sim", "stencil.simulate", config_dict, rows, rows),
            plot_figure3(rows, out / "stencil_sim.png", rack_ranks=rack_size * gpus_per_server,
                         title=f"stencil {cells}^3 simulated, racks of {rack_size} nodes x {gpus_per_server} ranks")))


def _write_folder(out: Path, stem: str, write) -> None:
    """Write the --out files after the work; a failure is one error line and exit 1 (the record, with
    every row, is already in the results store and in --json)."""
    try:
        write()
    except OSError as exc:
        print_error(f"cannot write {out}/{stem}.*: {exc.strerror or exc}; the rows are in the record")
        raise typer.Exit(EXIT_FAILED) from None
    print(f"wrote {out}/{stem}.json, .csv, .png", file=sys.stderr)

