"""`fabriclab bench cli|sim|whatif|plan`: how fast fabriclab itself is, against a budget or a peer.

`cli` times whole commands against their start-up budgets, `sim` the simulator on its speed cases, `whatif`
the what-if sweep of Zhang et al. (NetAI'20) against its real-time replay, `plan` the network planner.

Try it: `fabriclab bench cli`.
"""

from __future__ import annotations

import os
from typing import Optional

import typer
from rich.table import Table

from fabriclab.cli.common import EXIT_FAILED, FormatOption, JsonOption, Output, StoreOption, split_list, user_errors
from fabriclab.cli.options import parse_count


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


@user_errors
def sim_cmd(
    cases: Optional[str] = typer.Option(None, help="Only these cases, e.g. ring-2048,ps-2048."),
    fmt: FormatOption = None,
    json_path: JsonOption = None,
    store: StoreOption = None,
) -> None:
    """Time the simulator against its speed targets (1 GB allreduce, 2-level fat tree, bisection 1/4)."""
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


def register(app: typer.Typer) -> None:
    """Add `cli`, `sim`, `whatif` and `plan` to the `bench` group."""
    app.command("cli")(cli_cmd)
    app.command("sim")(sim_cmd)
    app.command("whatif")(whatif_cmd)
    app.command("plan")(plan_cmd)
