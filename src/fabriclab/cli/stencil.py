"""`fabriclab stencil`: the CFD-like halo-exchange mini-app (seed 000's CartDG): run, scale, simulate.

* `run`: the mini-app on `--np` local ranks (or inside `fabriclab emu run` / torchrun: one rank each);
  prints compute and communication time per step.
* `scale` (root): strong scaling on the emulated fabrics of seed 000 (25gbe, 100g-opa at a scale),
  one emulated host per rank, with the simulated communication of each point next to the measured.
* `simulate`: the same workload at scale (thousands of ranks, racks of 32 nodes as leaves of a fat
  tree) on both fabrics, and a plot like seed 000's Figure 3.

Try it: `fabriclab stencil run --np 4 --cells 128 --steps 20 --work 1`.
"""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path
from typing import Optional

import typer

from fabriclab.bench.stencil import run_stencil
from fabriclab.bench.stencil_scale import ScaleConfig, run_scale
from fabriclab.bench.stencil_sim import MINI_APP_COMPUTE_PER_CELL_S, AtScaleConfig, simulate_at_scale
from fabriclab.cli.common import (EXIT_FAILED, console, err_console, JsonOption, print_error, save_record,
                                  split_list, user_errors)
from fabriclab.emu.netns import EmuError
from fabriclab.record import write_outputs
from fabriclab.report.stencil import at_scale_table, plot_figure3, scale_table
from fabriclab.runtime.launch import LaunchError
from fabriclab.runtime.stencil import StencilConfig
from fabriclab.units import format_size, parse_int_list, parse_time

app = typer.Typer(help="CFD-like stencil mini-app (seed 000's CartDG): run, emulated scaling, simulation.",
                  no_args_is_help=True)


def register(main_app: typer.Typer) -> None:
    """Add the `stencil` group to the main app."""
    main_app.add_typer(app, name="stencil")


def _ms(seconds: float) -> str:
    return f"{seconds * 1e3:.3f} ms"


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
    json_path: JsonOption = None,
) -> None:
    """Run the mini-app and print compute and communication time per step."""
    config = StencilConfig(cells=cells, steps=steps, warmup=warmup, work=work, dtype=dtype)
    try:
        summary, reporter = run_stencil(config, num_ranks, timeout_s=timeout)
    except LaunchError as exc:
        print_error(exc)
        raise typer.Exit(EXIT_FAILED) from None
    if not reporter:
        return
    share = summary["comm_s"] / (summary["comm_s"] + summary["compute_s"])
    console.print(f"stencil {cells}^3 on {summary['num_ranks']} ranks, grid "
                  f"{'x'.join(map(str, summary['procs']))}, block {'x'.join(map(str, summary['block']))}, faces "
                  f"{'/'.join(format_size(b) for b in summary['face_bytes'])}, work {work}, {steps} steps",
                  markup=False)
    console.print(f"  per step (mean over ranks): compute {_ms(summary['compute_s'])} (CPU "
                  f"{_ms(summary['compute_cpu_s'])}), communication {_ms(summary['comm_s'])} "
                  f"({share:.0%} of the step; slowest rank {_ms(summary['comm_max_s'])}); slowest step "
                  f"{_ms(summary['step_max_s'])}; compute per cell {summary['compute_per_cell_s'] * 1e9:.2f} ns",
                  markup=False)
    save_record(json_path, "stencil.run", asdict(config) | {"num_ranks": num_ranks}, summary)


@app.command("scale")
@user_errors
def scale_cmd(
    num_ranks: str = typer.Option("1,2,4,8", "--np", help="Rank counts, one emulated host each."),
    fabrics: str = typer.Option("25gbe,100g-opa", help="Fabric presets of seed 000."),
    scale: str = typer.Option("1/100", help="Link rate scale (dilation 1/scale)."),
    cells: int = typer.Option(256, help="Cells per side (256: faces of 256 KB at 2 ranks, beyond the tbf "
                                        "bucket, so the fabrics differ)."),
    steps: int = typer.Option(10, help="Timed steps."),
    work: int = typer.Option(1, help="Stencil sweeps per step."),
    burst: str = typer.Option("2ms", help="tbf bucket as time at the rate (floor 128 KiB)."),
    queue: str = typer.Option("10ms", help="tbf queue limit as time at the rate."),
    out: Optional[Path] = typer.Option(None, file_okay=False, help="Write stencil_scale.json/.csv/.png here."),
    json_path: JsonOption = None,
) -> None:
    """Strong scaling on the emulated fabrics (root): compute / communication split per rank count."""
    config = ScaleConfig(fabrics=tuple(split_list(fabrics, "fabric list")), num_ranks=tuple(parse_int_list(num_ranks, minimum=1, what="--np")),
                         scale=scale, stencil=StencilConfig(cells=cells, steps=steps, work=work),
                         burst_s=parse_time(burst), queue_s=parse_time(queue))
    try:
        rows = run_scale(config, on_row=lambda r: err_console.print(
            f"  {r['fabric']} np={r['num_ranks']}: compute {_ms(r['compute_s'])}, comm {_ms(r['comm_s'])}",
            markup=False))
    except (EmuError, LaunchError) as exc:
        print_error(exc)
        raise typer.Exit(EXIT_FAILED) from None
    console.print(scale_table(rows))
    config_dict = asdict(config)
    save_record(json_path, "stencil.scale", config_dict, rows)
    if out is not None:
        write_outputs(out, "stencil_scale", "stencil.scale", config_dict, rows, rows)
        plot_figure3(rows, out / "stencil_scale.png", measured=True,
                     title=f"stencil {cells}^3, work {work}: emulated fabrics (scale {scale})")
        err_console.print(f"wrote {out}/stencil_scale.json, .csv, .png", markup=False)


@app.command("simulate")
@user_errors
def simulate_cmd(
    ranks: str = typer.Option("64,256,1024,4096", help="Rank counts."),
    fabrics: str = typer.Option("25gbe,100g-opa", help="Fabric presets of seed 000 (their real links)."),
    cells: int = typer.Option(128, help="Cells per side of the periodic cube."),
    compute_per_cell: str = typer.Option(f"{MINI_APP_COMPUTE_PER_CELL_S * 1e9:g}ns", "--compute-per-cell-s",
                                         help="Compute per cell per step on one core (e.g. 4ns, 1ms)."),
    bytes_per_face_cell: int = typer.Option(4, help="Halo bytes per face cell (CartDG p=7 element: 2560)."),
    rack_size: int = typer.Option(32, help="Nodes per rack (one leaf switch each)."),
    ranks_per_node: int = typer.Option(1, help="Ranks per node (seed 000's CPU nodes: 40)."),
    bisection: str = typer.Option("1", help="Bisection ratio above the racks."),
    steps: int = typer.Option(2, help="Steps simulated per point."),
    alpha: str = typer.Option("0us", help="Software overhead per message (MPI, NIC), e.g. 1us."),
    out: Optional[Path] = typer.Option(None, file_okay=False, help="Write stencil_sim.json/.csv/.png here."),
    json_path: JsonOption = None,
) -> None:
    """The stencil at scale on the flow-level simulator, and a plot like seed 000's Figure 3."""
    config = AtScaleConfig(ranks=tuple(parse_int_list(ranks, minimum=1, what="--ranks")), fabrics=tuple(split_list(fabrics, "fabric list")),
                           cells=cells, compute_per_cell_s=parse_time(compute_per_cell),
                           bytes_per_face_cell=bytes_per_face_cell, rack_size=rack_size,
                           ranks_per_node=ranks_per_node, bisection=bisection, steps=steps,
                           alpha_s=parse_time(alpha))
    rows = simulate_at_scale(config)
    console.print(at_scale_table(rows))
    config_dict = asdict(config)
    save_record(json_path, "stencil.simulate", config_dict, rows)
    if out is not None:
        write_outputs(out, "stencil_sim", "stencil.simulate", config_dict, rows, rows)
        plot_figure3(rows, out / "stencil_sim.png", rack_ranks=rack_size * ranks_per_node,
                     title=f"stencil {cells}^3 simulated, racks of {rack_size} nodes x {ranks_per_node} ranks")
        err_console.print(f"wrote {out}/stencil_sim.json, .csv, .png", markup=False)
