"""`fabriclab bench`: benchmarks that print a figure and the ratio to the peer measured beside it.

Try it: `fabriclab bench sim`.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Optional

import typer
from rich.table import Table

from fabriclab.cli.common import JsonOption, console, save_record, split_list, user_errors

app = typer.Typer(help="Benchmarks: simulator and what-if speed, trainer modes vs DDP, fabrics in the emulated cluster "
                       "(collectives: `collectives bench`).",
                  no_args_is_help=True)


@app.command("sim")
@user_errors
def sim_cmd(
    cases: Optional[str] = typer.Option(None, help="Only these cases, e.g. ring-2048,ps-2048."),
    json_path: JsonOption = None,
) -> None:
    """Time the simulator on the issue's cases (1 GB allreduce, 2-level fat tree, bisection 1/4)."""
    from fabriclab.bench.sim_speed import CASES, run_case

    chosen = CASES
    if cases:
        names = split_list(cases, "cases")
        known = {c.name for c in CASES}
        if set(names) - known:
            raise ValueError(f"unknown cases {sorted(set(names) - known)}: use {', '.join(sorted(known))}")
        chosen = tuple(c for c in CASES if c.name in names)
    table = Table(expand=False, title="simulator speed: 1 GB allreduce on a 2-level fat tree, bisection 1/4, 4 GB/s, 0.2 us")
    for col in ("case", "simulated (s)", "wall (s)", "target", "peak RSS MB", "engine", "exact",
                "general wall (s)", "ratio", "SimGrid 3.32 (quoted)"):
        table.add_column(col, justify="right", overflow="fold")
    rows = []
    for case in chosen:
        console.print(f"running {case.name} ...", end="\r")
        row = run_case(case)
        rows.append(row)
        table.add_row(case.name, f"{row['simulated_s']:.6f}", f"{row['wall_s']:.2f}",
                      f"{'<' if row['meets_target'] else 'NOT <'} {row['target_s']:g} s",
                      f"{row['peak_MB']:.0f}", row["engine"], "yes" if row["exact"] else "no",
                      "-" if row["general_wall_s"] is None else f"{row['general_wall_s']:.2f}",
                      "-" if row["speedup_vs_general"] is None else f"{row['speedup_vs_general']:.1f}x",
                      row["simgrid_quoted"] or "-")
    console.print(table)
    save_record(json_path, "bench.sim", {"cases": [c.name for c in chosen]}, rows)


@app.command("whatif")
@user_errors
def whatif_cmd(json_path: JsonOption = None) -> None:
    """Time seed 004's full what-if sweep (270 points) against its real-time replay."""
    from fabriclab.bench.whatif_speed import run

    r = run()
    table = Table(title="seed 004 what-if sweep: 3 models x 5 bandwidths x 3 worker counts x 6 compression ratios")
    for col in ("points", "fabriclab (s)", "real-time replay, 1 point (s)", "real-time replay, all points (s)",
                "ratio", "t_sync replay / ours (1 point)"):
        table.add_column(col, justify="right")
    table.add_row(str(r["points"]), f"{r['ours_s']:.3f}", f"{r['replay_one_point_s']:.2f}",
                  f"{r['replay_total_s']:.0f}", f"{r['ratio']:.0f}x",
                  f"{r['replay_t_sync_s'] * 1e3:.2f} / {r['ours_t_sync_s'] * 1e3:.2f} ms")
    console.print(table)
    console.print("The all-points replay time sums every point's slowed-down t_sync (the 1-point replay is "
                  "measured above, and shows the replay reaches the same t_sync); process start-up, which "
                  "seed 004's scripts also pay per point, is not included.")
    save_record(json_path, "bench.whatif", {}, r)


@app.command("train")
@user_errors
def train_cmd(
    modes: str = typer.Option("all", help="sync/overlap[/compression] list, or all (15 modes)."),
    model: str = typer.Option("resnet50", help="Zoo model."),
    num_ranks: int = typer.Option(4, "--np", help="Local ranks."),
    batch_size: int = typer.Option(32, help="Global batch per step."),
    image_size: Optional[int] = typer.Option(32, help="Image side (real compute)."),
    replay: Optional[str] = typer.Option(None, help="Replay a profile's layer times (resnet50, a file)."),
    dilation: float = typer.Option(1.0, help="Factor on every replayed time."),
    steps: int = typer.Option(30, help="Timed steps per mode."),
    warmup: int = typer.Option(5, help="Untimed steps before them."),
    comm_threads: int = typer.Option(2, help="Helper threads of our trainer."),
    timeout: float = typer.Option(120.0, help="Seconds to wait for a stuck rank."),
    json_path: JsonOption = None,
) -> None:
    """Our trainer in every sync x overlap mode against DDP, each mode measured beside DDP in one run."""
    from fabriclab.bench.train import TrainBenchConfig
    from fabriclab.bench.train_modes import MODES, run_modes
    from fabriclab.cli.common import EXIT_FAILED, err_console, print_error
    from fabriclab.runtime.launch import LaunchError
    from fabriclab.runtime.trainer import TrainerConfig

    chosen = list(MODES) if modes.strip() == "all" else split_list(modes, "modes")
    base = TrainBenchConfig(model=model, num_ranks=num_ranks, batch_size=batch_size,
                            image_size=None if replay else image_size, steps=steps, warmup=warmup,
                            trainer=TrainerConfig(comm_threads=comm_threads, timeout_s=timeout),
                            runtimes=("ours", "ddp"), replay=replay, dilation=dilation, baseline=False,
                            timeout_s=timeout)
    what = f"replay of {replay} x{dilation:g}" if replay else f"{model} {image_size}x{image_size}"
    table = Table(title=f"ours vs DDP, {what}, {num_ranks} ranks, global batch {batch_size}, {steps} steps "
                        f"(+{warmup}) per mode; ms per iteration, CPU ms per rank and step")
    for col in ("mode", "ours img/s", "ddp img/s", "ours/ddp", "iter ms", "ddp iter ms", "exposed ms",
                "CPU ms", "ddp CPU ms", "MB sent", "params"):
        table.add_column(col, justify="left" if col == "mode" else "right", no_wrap=True)

    def on_row(row: dict) -> None:
        err_console.print(f"  {row['mode']}: {row['ours_images_per_sec']:.2f} vs ddp "
                          f"{row['ddp_images_per_sec']:.2f} img/s ({row['ratio']:.3f})", markup=False)
        table.add_row(row["mode"], f"{row['ours_images_per_sec']:.2f}", f"{row['ddp_images_per_sec']:.2f}",
                      f"{row['ratio']:.3f}", f"{row['iteration_ms']:.1f}", f"{row['ddp_iteration_ms']:.1f}",
                      f"{row['exposed_ms']:.1f}", f"{row['cpu_ms']:.1f}", f"{row['ddp_cpu_ms']:.1f}",
                      f"{row['MB_sent']:.1f}", "agree" if row["params_agree"] else "DIFFER")

    err_console.print(f"{len(chosen)} modes, one launch each ...", markup=False)
    try:
        rows = run_modes(base, chosen, on_row)
    except LaunchError as exc:
        print_error(exc)
        raise typer.Exit(EXIT_FAILED)
    console.print(table)
    save_record(json_path, "bench.train", {"modes": chosen, **dataclasses.asdict(base)}, rows)
    if not all(r["params_agree"] for r in rows):
        raise typer.Exit(EXIT_FAILED)


@app.command("fabrics")
@user_errors
def fabrics_cmd(
    fabrics: str = typer.Option("25gbe,100g-opa", help="Fabric presets (seed 000)."),
    workers: str = typer.Option("2,4,8", help="Worker counts, one emulated host each."),
    model: str = typer.Option("resnet50", help="Model (names the profile when --compute is replay)."),
    compute: str = typer.Option("replay", help="replay (the model's V100 profile) or replay:PROFILE."),
    algos: str = typer.Option("ring,butterfly,hierarchical", help="All-reduce algorithms (hierarchical: "
                                                                   "groups of 2, TX-GAIA's GPUs per node)."),
    scale: str = typer.Option("1/100", help="Link rate scale; dilation D = 1/scale."),
    steps: int = typer.Option(3, help="Timed steps per point."),
    warmup: int = typer.Option(1, help="Untimed steps before them."),
    timeout: float = typer.Option(900.0, help="Longest run of one point, seconds."),
    out: Optional[Path] = typer.Option(None, file_okay=False, help="Write fabrics.json/.csv, fig4.png, fig5.png."),
    json_path: JsonOption = None,
) -> None:
    """Seed 000's fabric benchmark: training in the emulated cluster per fabric, workers and algorithm,
    with the simulator's and the what-if's prediction beside every measurement (needs root)."""
    from fabriclab.bench.fabrics import SEED_000_DIFFERENCE_PCT, FabricsConfig, fabric_difference, run_fabrics
    from fabriclab.cli.common import err_console
    from fabriclab.cli.common import EXIT_FAILED, print_error
    from fabriclab.emu.netns import EmuError, check_system
    from fabriclab.emu.presets import parse_scale
    from fabriclab.units import parse_int_list
    from fabriclab.record import write_outputs
    from fabriclab.report.fabrics import fabrics_table, plot_figures

    spec = compute.strip()
    if spec == "replay":
        spec = f"replay:{model.strip()}"
    elif spec.startswith("replay:") and model.strip() != "resnet50" and spec != f"replay:{model.strip()}":
        raise ValueError(f"--model {model} and --compute {compute} name different profiles: give one")
    names = [a if a != "hierarchical" else "hierarchical:group=2" for a in split_list(algos, "algorithms")]
    config = FabricsConfig(fabrics=tuple(split_list(fabrics, "fabrics")),
                           workers=tuple(parse_int_list(workers, minimum=1, what="worker count")),
                           algos=tuple(names), compute=spec, scale=scale, steps=steps, warmup=warmup,
                           timeout_s=timeout)
    check_system()
    points = len(config.fabrics) * len(config.workers) * len(config.algos)
    err_console.print(f"{points} points, one training run each (steps x dilation {1 / parse_scale(scale):g} of "
                      f"replayed compute per step) ...", markup=False)

    rows: list[dict] = []

    def on_row(r: dict) -> None:
        rows.append(r)
        err_console.print(f"  {r['fabric']} {r['workers']} workers {r['algo']}: {r['images_per_sec']:.1f} img/s "
                          f"(sim {r['sim_err_pct']:+.1f}%, what-if {r['whatif_err_pct']:+.1f}%)", markup=False)

    failure = None
    try:
        run_fabrics(config, on_row=on_row)
    except EmuError as exc:  # the points measured so far are still shown and saved
        failure = exc
    if not rows:
        print_error(failure)
        raise typer.Exit(EXIT_FAILED)
    console.print(fabrics_table(rows))
    diff = fabric_difference(rows)
    if diff is not None:
        console.print(f"average images/sec difference, 100g-opa vs 25gbe over {diff['points']:.0f} points: "
                      f"measured {diff['measured_pct']:.2f}% fewer on 25gbe; simulator {diff['sim_pct']:.2f}%, "
                      f"what-if {diff['whatif_pct']:.2f}% (seed 000: {SEED_000_DIFFERENCE_PCT}%)")
    results = {"rows": rows, "difference": diff}
    config_dict = dataclasses.asdict(config)
    save_record(json_path, "bench.fabrics", config_dict, results)
    if out is not None:
        write_outputs(out, "fabrics", "bench.fabrics", config_dict, results, rows)
        plot_figures(rows, out, model=config.profile_name)
        err_console.print(f"wrote {out}/fabrics.json, fabrics.csv, fig4.png, fig5.png", markup=False)
    if failure is not None:
        print_error(failure)
        raise typer.Exit(EXIT_FAILED)


def register(main_app: typer.Typer) -> None:
    main_app.add_typer(app, name="bench")
