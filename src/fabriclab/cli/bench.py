"""`fabriclab bench`: benchmarks that print a figure and the ratio to the peer measured beside it.

Try it: `fabriclab bench sim`.
"""

from __future__ import annotations

from typing import Optional

import typer
from rich.table import Table

from fabriclab.cli.common import JsonOption, console, save_record, split_list, user_errors

app = typer.Typer(help="Benchmarks: simulator and what-if speed (collectives: `collectives bench`).",
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


def register(main_app: typer.Typer) -> None:
    main_app.add_typer(app, name="bench")
