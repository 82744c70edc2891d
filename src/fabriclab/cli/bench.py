"""`fabriclab bench`: benchmarks that print a figure and the ratio to the peer measured beside it.

`cli` times whole commands against their start-up budgets, `sim` the simulator, `whatif` the what-if
sweep of Zhang et al. (NetAI'20), `plan` the network planner, `train` our trainer against DDP, `fabrics`
the fabric benchmark of Samsi et al. (TX-GAIA) in the emulated cluster.

Try it: `fabriclab bench cli`.
"""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path
from typing import Optional

import typer
from rich.table import Table

from fabriclab.cli.common import (
    EXIT_FAILED,
    FormatOption,
    JsonOption,
    Output,
    StoreOption,
    check_output_dir,
    print_error,
    split_list,
    user_errors,
)
from fabriclab.cli.options import parse_count, parse_number

app = typer.Typer(help="Benchmarks: CLI start-up, simulator, what-if and plan speed, trainer modes vs DDP, "
                       "fabrics in the emulated cluster (collectives: `collectives bench`).",
                  no_args_is_help=True, rich_markup_mode=None)


@app.command("cli")
@user_errors
def cli_cmd(
    runs: str = typer.Option("5", metavar="N", help="Timed runs per command (the median is reported)."),
    fmt: FormatOption = None,
    json_path: JsonOption = None,
    store: StoreOption = None,
) -> None:
    """Time whole commands (fresh processes) against their budgets and `python -c pass`."""
    from fabriclab.bench.speed.cli import run

    out = Output(fmt, json_path, store)
    num_runs = parse_count(runs, "--runs", maximum=100)
    out.note(f"timing each command {num_runs} times (plus one warm-up) ...")
    rows = run(runs=num_runs)
    table = Table(title=f"command start-to-exit, median of {num_runs} runs (s)")
    for col in ("command", "median", "min", "max", "CPU", "budget", "within", "x peer"):
        table.add_column(col, justify="left" if col == "command" else "right")
    for r in rows:
        within = "-" if r["within_budget"] is None else ("yes" if r["within_budget"] else "NO")
        table.add_row(r["command"], f"{r['median_s']:.3f}", f"{r['min_s']:.3f}", f"{r['max_s']:.3f}",
                      f"{r['cpu_s']:.3f}", "-" if r["budget_s"] is None else f"{r['budget_s']:g}", within,
                      f"{r['vs_peer']:.1f}")
    out.table(table)
    loads = ", ".join(f"{r['loadavg_1min']:.1f}" for r in rows)
    out.note(f"load average (1 min) after each command: {loads} on {os.cpu_count()} cores; wall times grow "
             f"with the load, CPU times much less")
    out.record("bench.cli", {"runs": num_runs}, rows)
    if any(r["within_budget"] is False for r in rows):
        raise typer.Exit(EXIT_FAILED)


@app.command("sim")
@user_errors
def sim_cmd(
    cases: Optional[str] = typer.Option(None, help="Only these cases, e.g. ring-2048,ps-2048."),
    fmt: FormatOption = None,
    json_path: JsonOption = None,
    store: StoreOption = None,
) -> None:
    """Time the simulator on the issue's cases (1 GB allreduce, 2-level fat tree, bisection 1/4)."""
    from fabriclab.bench.speed.sim import CASES, run_case

    out = Output(fmt, json_path, store)
    chosen = CASES
    if cases:
        names = split_list(cases, "cases")
        known = {c.name for c in CASES}
        if set(names) - known:
            raise ValueError(f"unknown cases {sorted(set(names) - known)}: use {', '.join(sorted(known))}")
        chosen = tuple(c for c in CASES if c.name in names)
    table = Table(title="simulator speed: 1 GB allreduce on a 2-level fat tree, bisection 1/4, 4 GB/s, 0.2 us")
    for col in ("case", "simulated (s)", "wall (s)", "target", "peak RSS MB", "engine", "exact",
                "general wall (s)", "ratio", "SimGrid 3.32 (quoted)"):
        table.add_column(col, justify="right")
    rows = []
    for case in chosen:
        out.note(f"running {case.name} ...")
        row = run_case(case)
        rows.append(row)
        table.add_row(case.name, f"{row['simulated_s']:.6f}", f"{row['wall_s']:.2f}",
                      f"{'<' if row['meets_target'] else 'NOT <'} {row['target_s']:g} s",
                      f"{row['peak_MB']:.0f}", row["engine"], "yes" if row["exact"] else "no",
                      "-" if row["general_wall_s"] is None else f"{row['general_wall_s']:.2f}",
                      "-" if row["speedup_vs_general"] is None else f"{row['speedup_vs_general']:.1f}x",
                      row["simgrid_quoted"] or "-")
    out.table(table)
    out.record("bench.sim", {"cases": [c.name for c in chosen]}, rows)


@app.command("whatif")
@user_errors
def whatif_cmd(fmt: FormatOption = None, json_path: JsonOption = None, store: StoreOption = None) -> None:
    """Time the full what-if sweep of Zhang et al. (270 points) against its real-time replay."""
    from fabriclab.bench.speed.whatif import run

    out = Output(fmt, json_path, store)
    r = run()
    table = Table(title="what-if sweep of Zhang et al. (NetAI'20): 3 models x 5 bandwidths x 3 worker counts x "
                        "6 compression ratios")
    for col in ("points", "fabriclab (s)", "real-time replay, 1 point (s)", "real-time replay, all points (s)",
                "ratio", "t_sync replay / ours (1 point)"):
        table.add_column(col, justify="right")
    table.add_row(str(r["points"]), f"{r['ours_s']:.3f}", f"{r['replay_one_point_s']:.2f}",
                  f"{r['replay_total_s']:.0f}", f"{r['ratio']:.0f}x",
                  f"{r['replay_t_sync_s'] * 1e3:.2f} / {r['ours_t_sync_s'] * 1e3:.2f} ms")
    out.table(table)
    out.note("The all-points replay time sums every point's slowed-down t_sync (the 1-point replay is measured "
             "above, and shows the replay reaches the same t_sync); process start-up, which the paper's "
             "scripts also pay per point, is not included.")
    out.record("bench.whatif", {}, r)


@app.command("plan")
@user_errors
def plan_cmd(fmt: FormatOption = None, json_path: JsonOption = None, store: StoreOption = None) -> None:
    """Time `fabriclab plan` over 5 fabrics x 5 bisections x 5 GPU counts x 3 models."""
    from fabriclab.bench.speed.plan import run

    out = Output(fmt, json_path, store)
    r = run()
    table = Table(title=f"plan speed: {r['grid']}")
    for col in ("points", "wall (s)", "points/s", "target (s)", "within", "topologies", "simulator runs"):
        table.add_column(col, justify="right")
    table.add_row(str(r["points"]), f"{r['wall_s']:.2f}", f"{r['points_per_s']:.0f}", f"{r['target_s']:g}",
                  "yes" if r["within_target"] else "NO", str(r["num_topologies"]), str(r["num_simulations"]))
    out.table(table)
    out.record("bench.plan", {}, r)
    if not r["within_target"]:
        raise typer.Exit(EXIT_FAILED)


@app.command("overhead")
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
    table = Table(title=f"trainer overhead, {model}, batch {batch_size}, {device}, {precision}")
    for col in ("ours (img/s)", "plain loop (img/s)", "ours / plain", "goal"):
        table.add_column(col, justify="right")
    table.add_row(f"{r['ours_images_per_sec']:.2f}", f"{r['plain_images_per_sec']:.2f}", f"{r['ratio']:.3f}",
                  f">= {r['goal_ratio']:g}")
    out.table(table)
    out.record("bench.overhead", config, r)


@app.command("train")
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


@app.command("fabrics")
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


def register(main_app: typer.Typer) -> None:
    main_app.add_typer(app, name="bench")
