"""`fabriclab bench fabrics`: the fabric benchmark of Samsi et al. (TX-GAIA) in the emulated cluster, with
the simulator's and the what-if's prediction beside every measurement (`bench.fabrics`; needs root).

Try it: `sudo fabriclab bench fabrics --fabrics 25gbe,100g-opa --workers 2,4 --algos ring --steps 2 --warmup 1`.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Optional

import typer

from fabriclab.cli.common import (EXIT_FAILED, FormatOption, JsonOption, Output, StoreOption, check_output_dir,
                                  print_error, split_list, user_errors)
from fabriclab.cli.options import parse_count, parse_number


@user_errors
def fabrics_cmd(
    fabrics: str = typer.Option("25gbe,100g-opa", help="Fabric presets (Samsi et al.'s two fabrics)."),
    workers: str = typer.Option("2,4,8", help="Worker counts, one emulated host each."),
    model: str = typer.Option("resnet50", help="Model (names the profile when --compute is replay)."),
    compute: str = typer.Option("replay", help="replay (the model's V100 profile) or replay:PROFILE."),
    algos: str = typer.Option("ring,butterfly,hierarchical", help="All-reduce algorithms (hierarchical: "
                                                                   "groups of 2, TX-GAIA's GPUs per node)."),
    scale: str = typer.Option("1/100", help="Link rate scale; dilation D = 1/scale."),
    steps: str = typer.Option("3", metavar="N", help="Timed steps per point."),
    warmup: str = typer.Option("1", metavar="N", help="Untimed steps before them."),
    timeout: str = typer.Option("900", metavar="SECONDS", help="Longest run of one point, seconds."),
    out: Optional[Path] = typer.Option(None, help="Write fabrics.json/.csv, fig4.png, fig5.png."),
    fmt: FormatOption = None,
    json_path: JsonOption = None,
    store: StoreOption = None,
) -> None:
    """The fabric benchmark of Samsi et al.: training in the emulated cluster per fabric, workers and
    algorithm, with the simulator's and the what-if's prediction beside every measurement (needs root)."""
    output = Output(fmt, json_path, store)
    check_output_dir(out)
    from fabriclab.bench.fabrics import run_fabrics
    from fabriclab.emu.netns import EmuError, check_system
    from fabriclab.emu.presets import parse_scale

    config = _fabrics_config(locals())
    check_system()
    points = len(config.fabrics) * len(config.workers) * len(config.algos)
    output.note(f"{points} points, one training run each (steps x dilation {1 / parse_scale(scale):g} of "
                f"replayed compute per step) ...")
    rows: list[dict] = []
    failure = None
    try:
        run_fabrics(config, on_row=lambda r: _add_fabrics_row(output, rows, r))
    except EmuError as exc:  # the points measured so far are still shown and saved
        failure = exc
    if not rows:
        print_error(failure)
        raise typer.Exit(EXIT_FAILED)
    _finish_fabrics(output, config, rows, out)
    if failure is not None:
        print_error(failure)
        raise typer.Exit(EXIT_FAILED)


def _fabrics_config(o: dict):
    """The `FabricsConfig` of the parsed command line `o` (fabrics_cmd's parameters)."""
    from fabriclab.bench.fabrics import FabricsConfig, algo_specs, compute_spec
    from fabriclab.units import parse_int_list

    spec = compute_spec(o["model"], o["compute"])
    algos = algo_specs(split_list(o["algos"], "algorithms"))
    return FabricsConfig(fabrics=tuple(split_list(o["fabrics"], "fabrics")),
                         workers=tuple(parse_int_list(o["workers"], minimum=1, what="worker count")),
                         algos=algos, compute=spec, scale=o["scale"],
                         steps=parse_count(o["steps"], "--steps", maximum=100_000),
                         warmup=parse_count(o["warmup"], "--warmup", minimum=0, maximum=100_000),
                         timeout_s=parse_number(o["timeout"], "--timeout", minimum=1.0, example="900"))


def _add_fabrics_row(output: Output, rows: list[dict], r: dict) -> None:
    rows.append(r)
    output.note(f"  {r['fabric']} {r['workers']} workers {r['algo']}: {r['images_per_sec']:.1f} img/s "
                f"(sim {r['sim_err_pct']:+.1f}%, what-if {r['whatif_err_pct']:+.1f}%)")


def _finish_fabrics(output: Output, config, rows: list[dict], out: Path | None) -> None:
    """The table, the fabric difference against Samsi et al.'s, the record and the `--out` folder."""
    from fabriclab.bench.fabrics import SAMSI_MEASURED_DIFFERENCE_PCT, fabric_difference
    from fabriclab.report.fabrics import FABRICS_KIND, fabrics_table, write_fabrics_outputs

    output.table(fabrics_table(rows))
    diff = fabric_difference(rows)
    if diff is not None:
        output.note(f"average images/sec difference, 100g-opa vs 25gbe over {diff['points']:.0f} points: "
                    f"measured {diff['measured_pct']:.2f}% fewer on 25gbe; simulator {diff['sim_pct']:.2f}%, "
                    f"what-if {diff['whatif_pct']:.2f}% (Samsi et al.: {SAMSI_MEASURED_DIFFERENCE_PCT}%)")
    results = {"rows": rows, "difference": diff}
    config_dict = dataclasses.asdict(config)
    output.record(FABRICS_KIND, config_dict, results)
    if out is not None:
        write_fabrics_outputs(out, config_dict, results, model=config.profile_name)
        output.note(f"wrote {out}/fabrics.json, fabrics.csv, fig4.png, fig5.png")


def register(app: typer.Typer) -> None:
    """Add `fabrics` to the `bench` group."""
    app.command("fabrics")(fabrics_cmd)
