"""`fabriclab bench cli|sim|whatif|plan|plan-llm|cluster`: how fast fabriclab itself is, against a budget or a peer.

`cluster` a plan's points per second here against a loopback Dask cluster (`report/points/speed.py`);
`cli` times whole commands against their start-up budgets, `sim` the simulator on its speed cases, cluster
predictions at 100,000 GPUs (`--scale`: their growth with the GPUs) and at 1,000,000 over buildings, `whatif`
the what-if sweep of Zhang et al. (NetAI'20) against its real-time replay, `plan` the network planner (NCCL's
choice against ring), `plan-llm` its LLM search.

Try it: `fabriclab bench cli`.
"""

from __future__ import annotations

import os
import textwrap
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


def _chosen(cases: Optional[str]) -> tuple[tuple, tuple]:
    """(simulator speed cases, prediction cases) named by `--cases`, or all of them."""
    from fabriclab.bench.speed.predict import CASES as PREDICTIONS
    from fabriclab.bench.speed.sim import CASES

    if not cases:
        return CASES, PREDICTIONS
    names = split_list(cases, "cases")
    known = {c.name for c in (*CASES, *PREDICTIONS)}
    if set(names) - known:
        raise ValueError(f"unknown cases {sorted(set(names) - known)}: use {', '.join(sorted(known))}")
    return tuple(c for c in CASES if c.name in names), tuple(c for c in PREDICTIONS if c.name in names)


def _speed_rows(out: Output, chosen: tuple) -> list[dict]:
    from fabriclab.bench.speed.sim import run_case

    table = Table(title="simulator speed: 1 GB allreduce on a fat tree (2 levels unless the case says 3), 16 hosts "
                        "per leaf, bisection 1/4, 4 GB/s, 0.2 us")
    for col in ("case", "simulated (s)", "wall (s)", "target", "peak RSS MB", "engine", "exact",
                "general wall (s)", "ratio"):
        table.add_column(col, justify="right")
    rows = []
    for case in chosen:
        out.note(f"running {case.name} ...")
        row = run_case(case)
        rows.append(row)
        table.add_row(case.name, f"{row['simulated_s']:.6f}", f"{row['wall_s']:.3f}",
                      f"{'<' if row['meets_target'] else 'NOT <'} {row['target_s']:g} s",
                      f"{row['peak_MB']:.0f}", row["engine"], "yes" if row["exact"] else "no",
                      "-" if row["general_wall_s"] is None else f"{row['general_wall_s']:.2f}",
                      "-" if row["speedup_vs_general"] is None else f"{row['speedup_vs_general']:.1f}x")
    out.table(table)
    return rows


def _prediction_rows(out: Output, chosen: tuple) -> list[dict]:
    from fabriclab.bench.speed.predict import CLUSTER, TARGET_MB, TARGET_S, run_prediction

    table = Table(title=f"cluster predictions on {CLUSTER} (sweep 1KB:1GB with ranges; target < {TARGET_S:g} s "
                        f"and {TARGET_MB / 1024:g} GB), and the flow simulations of one prediction against the "
                        f"general engine at the largest GPU count it finishes within its budget")
    for col in ("case", "GPUs", "sweep wall (s)", "peak RSS MB", "within", "links wall (s)", "general at GPUs",
                "general wall (s)", "general MB", "ours wall (s)", "ours MB", "ratio", "agree"):
        table.add_column(col, justify="right")
    rows = []
    wide = [c for c in chosen if c.peer_gpus]
    for case in (c for c in chosen if not c.peer_gpus):
        out.note(f"running {case.name} (and the general engine up to {case.general_gpus[-1]} GPUs) ...")
        r = run_prediction(case)
        rows.append(r)
        g = r["general_gpus"] is not None
        table.add_row(case.name, f"{r['gpus']:,}", f"{r['sweep_wall_s']:.1f}", f"{r['peak_MB']:.0f}",
                      "yes" if r["meets_target"] else "NO", f"{r['links_wall_s']:.2f}",
                      f"{r['general_gpus']:,}" if g else "none", f"{r['general_wall_s']:.2f}" if g else "-",
                      f"{r['general_peak_MB']:.0f}" if g else "-", f"{r['ours_wall_s']:.2f}" if g else "-",
                      f"{r['ours_peak_MB']:.0f}" if g else "-", f"{r['speedup_vs_general']:.1f}x" if g else "-",
                      ("yes" if r["general_agrees"] else "NO") if g else "-")
    if len(rows):
        out.table(table)
    return rows + (_scale_out_rows(out, wide) if wide else [])


def _scale_out_rows(out: Output, chosen: tuple) -> list[dict]:
    """Predictions over buildings (`fabric/buildings.py`) against one building's in the same run."""
    from fabriclab.bench.speed.predict import TARGET_MB, TARGET_S, run_prediction

    table = Table(title=f"over buildings, sweep 1KB:1GB with ranges (< {TARGET_S:g} s, {TARGET_MB / 1024:g} GB)")
    for col in ("case", "wall (s)", "MB", "within", "peer (s)", "peer MB", "x peer"):
        table.add_column(col, justify="left" if col == "case" else "right")
    rows = []
    for case in chosen:
        out.note(f"running {case.name} on {case.cluster} and its peer, {case.peer_gpus:,} GPUs in one building ...")
        r = run_prediction(case)
        rows.append(r)
        table.add_row(case.name, f"{r['sweep_wall_s']:.1f}", f"{r['peak_MB']:.0f}",
                      "yes" if r["meets_target"] else "NO", f"{r['peer_wall_s']:.1f}", f"{r['peer_peak_MB']:.0f}",
                      f"{r['vs_peer']:.2f}")
    out.table(table)
    out.note("clusters: " + "; ".join(f"{r['case']} on {r['cluster']}, peer {r['peer']}" for r in rows)
             + "; x peer: wall time over the peer's, this run")
    return rows


def _scale(out: Output) -> None:
    from fabriclab.bench.speed.predict import CLUSTER, SCALE_COLLECTIVES, scale_rows

    out.note(f"predicting {', '.join(SCALE_COLLECTIVES)} on {CLUSTER} at each GPU count (a fresh process each) ...")
    rows = scale_rows()
    table = Table(title=f"cluster prediction (sweep 1KB:1GB with ranges) on {CLUSTER}: wall time and peak RSS")
    table.add_column("GPUs", justify="right")
    for c in SCALE_COLLECTIVES:
        table.add_column(f"{c} (s)", justify="right")
        table.add_column(f"{c} MB", justify="right")
    for r in rows:
        table.add_row(f"{r['gpus']:,}", *[f"{r[f'{c}_{k}']:{f}}" for c in SCALE_COLLECTIVES
                                          for k, f in (("wall_s", ".1f"), ("peak_MB", ".0f"))])
    out.table(table)
    out.record("bench.sim.scale", {"cluster": CLUSTER, "collectives": list(SCALE_COLLECTIVES)}, rows)


def _timeout(text: str) -> float:
    from fabriclab.units import parse_time

    seconds = parse_time(text)
    if not 1 <= seconds <= 86400:
        raise ValueError(f"--peer-timeout {text}: give 1s to 24h, e.g. 300s")
    return seconds


def _peer_cases(cases: Optional[str]) -> tuple:
    from fabriclab.bench.speed.sim import CASES, PEER_CASES

    names = split_list(cases, "cases") if cases else list(PEER_CASES)
    known = {c.name for c in CASES}
    if set(names) - known:
        raise ValueError(f"unknown cases {sorted(set(names) - known)} for --peer simgrid: use "
                         f"{', '.join(c.name for c in CASES)}")
    return tuple(c for c in CASES if c.name in names)


def _ratio(sg: dict) -> str:
    return f"{'> ' if sg['timed_out'] else ''}{sg['ratio']:.{1 if sg['ratio'] < 10 else 0}f}x"


def _peer_table(rows: list[dict], version: str | None) -> Table:
    sg_name = f"SimGrid {version}" if version else "SimGrid"
    table = Table(title=f"whole processes, median of {rows[0]['runs'] if rows else 0} alternating runs: 1 GB "
                        f"allreduce, fat tree of 16 hosts per leaf, bisection 1/4, 4 GB/s, 0.2 us")
    for col in ("case", "fabriclab (s)", f"{sg_name} (s)", "SimGrid/ours", "goal", "peak MiB ours/SimGrid",
                "simulated (s)", "rel. diff"):
        table.add_column(col, justify="left" if col == "case" else "right")
    for r in rows:
        sg = r["simgrid"]
        if sg is None:
            table.add_row(r["case"], f"{r['wall_s']:.2f}", "not installed", "-", "-", f"{r['peak_MiB']:.0f} / -",
                          f"{r['simulated_s']:.9f}", "-")
            continue
        stopped = sg["timed_out"]
        table.add_row(r["case"], f"{r['wall_s']:.2f}", f"{'> ' if stopped else ''}{sg['wall_s']:.2f}", _ratio(sg),
                      f">= {sg['goal_ratio']:g}x {'yes' if sg['meets_goal'] else 'NO'}",
                      f"{r['peak_MiB']:.0f} / {'>= ' if stopped else ''}{sg['peak_MiB']:.0f}"
                      f"{'' if sg['memory_ok'] else ' NO'}", f"{r['simulated_s']:.9f}",
                      "stopped" if stopped else f"{sg['rel_diff']:.1e}{'' if sg['agrees'] else ' NO'}")
    return table


def _peer(out: Output, cases: Optional[str], runs: int, timeout_s: float) -> None:
    from fabriclab.bench.speed import simgrid_peer

    chosen = _peer_cases(cases)
    version = simgrid_peer.simgrid_version()
    rows = []
    try:  # a peer that fails to build or run is reported in one line
        binary = simgrid_peer.peer_binary(version) if version else None
        if binary is None:
            out.note(f"SimGrid is not installed: {simgrid_peer.INSTALL_HINT}; timing fabriclab alone")
        for case in chosen:
            out.note(f"running {case.name} ({runs} runs each, alternating) ...")
            rows.append(simgrid_peer.beside(case, runs=runs, timeout_s=timeout_s, binary=binary))
    except RuntimeError as exc:
        raise ValueError(str(exc)) from None
    out.table(_peer_table(rows, version))
    for note in simgrid_peer.notes(rows, timeout_s):
        out.note(note)
    out.record("bench.sim.peer", {"cases": [c.name for c in chosen], "runs": runs, "peer_timeout_s": timeout_s,
                                  "simgrid": version}, rows)
    if any(r["simgrid"] and r["simgrid"].get("agrees") is False for r in rows):
        raise typer.Exit(EXIT_FAILED)


@user_errors
def sim_cmd(
    cases: Optional[str] = typer.Option(None, help="Only these cases, e.g. ring-2048,alltoall-100000."),
    scale: bool = typer.Option(False, "--scale", help="Print how a cluster prediction's time and memory grow "
                                                      "with the GPUs (1,024 to 100,000) instead."),
    peer: Optional[str] = typer.Option(None, metavar="simgrid", help="Run each case in SimGrid beside ours, "
                                       "whole processes, alternating (needs libsimgrid-dev and g++)."),
    runs: str = typer.Option("3", metavar="N", help="With --peer: runs of each tool per case (median)."),
    peer_timeout: str = typer.Option("120s", metavar="TIME", help="With --peer: stop a run after this long "
                                     "(its time is then a lower bound, and it is not repeated)."),
    fmt: FormatOption = None,
    json_path: JsonOption = None,
    store: StoreOption = None,
) -> None:
    """Time the simulator against its speed targets (1 GB allreduce, 2-level fat tree, bisection 1/4), cluster
    predictions at 100,000 GPUs against the general engine, and at 1,000,000 over buildings against 100,000."""
    out = Output(fmt, json_path, store)
    if peer is not None:
        if peer != "simgrid" or scale:
            raise ValueError(f"--peer {peer}: the one peer is simgrid, and it does not go with --scale")
        _peer(out, cases, parse_count(runs, "--runs", maximum=100), _timeout(peer_timeout))
        return
    if scale:
        if cases:
            raise ValueError("--scale prints the growth table alone: drop --cases")
        _scale(out)
        return
    speed, predictions = _chosen(cases)
    rows = _speed_rows(out, speed) if speed else []
    rows += _prediction_rows(out, predictions) if predictions else []
    out.record("bench.sim", {"cases": [c.name for c in (*speed, *predictions)]}, rows)


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
    """Time `fabriclab plan` over 5 fabrics x 5 bisections x 5 GPU counts x 3 models: ring on 2-level trees,
    then 16-4,096 GPUs on radix-true trees with NCCL's choice against ring."""
    from fabriclab.bench.speed.plan import run

    out = Output(fmt, json_path, store)
    out.note("timing three plans: the first grid (ring), then the wide grid (16-4,096 GPUs) with ring and with "
             "NCCL's choice ...")
    r = run()
    table = Table(title=f"plan speed: {r['grid']}")
    for col in ("plan", "points", "wall (s)", "CPU (s)", "budget", "within", "x ring", "runs"):
        table.add_column(col, justify="left" if col == "plan" else "right")
    for row in r["rows"]:
        ratio = "-" if row["vs_peer"] is None else f"{row['vs_peer']:.2f}"
        table.add_row(row["grid"], str(row["points"]), f"{row['wall_s']:.2f}", f"{row['cpu_s']:.2f}",
                      f"{row['budget_s']:g} s", "yes" if row["within_budget"] else "NO", ratio,
                      str(row["num_simulations"]))
    out.table(table)
    out.note("16-4096 GPUs on radix-true trees (the levels each fabric's radix forces); runs: simulator runs; "
             "x ring: wall time over the same grid's with --algo ring in this run (CPU time: "
             + ", ".join(f"{row['cpu_vs_peer']:.2f}" for row in r["rows"] if row.get("cpu_vs_peer")) + "); the "
             "exit status fails a plan whose CPU time alone is over its budget (wall time grows with the load)")
    out.record("bench.plan", {}, r)
    if any(row["cpu_s"] >= row["budget_s"] for row in r["rows"]):
        raise typer.Exit(EXIT_FAILED)


@user_errors
def plan_llm_cmd(fmt: FormatOption = None, json_path: JsonOption = None, store: StoreOption = None) -> None:
    """Time the LLM plan: Llama 3 405B on 16,384 GPUs, 8 cluster options, bounded and exhaustive, against a
    naive peer (one simulate_llm per configuration)."""
    from fabriclab.bench.speed.plan_llm import run

    out = Output(fmt, json_path, store)
    out.note("planning llama3-405b on 16,384 GPUs twice (bounded, exhaustive), then the peer (~30 s) ...")
    r = run()
    table = Table(title=f"LLM plan speed: {r['model']} on {r['gpus']:,} GPUs, {' + '.join(r['clusters'])} x "
                        f"400G/800G x rail/fat-tree")
    for col in ("run", "enumerated", "fit", "simulated", "bounded", "wall (s)", "fit/s"):
        table.add_column(col, justify="left" if col == "run" else "right")
    for x in r["runs"]:
        table.add_row(x["run"], f"{x['enumerated']:,}", f"{x['fit']:,}", f"{x['simulated']:,}", f"{x['bounded']:,}",
                      f"{x['wall_s']:.1f}", f"{x['fit_per_s']:,.0f}")
    out.table(table)
    p = r["peer"]
    out.note(f"peer: simulate_llm per configuration, {p['configs']} configurations of {p['option']}: "
             f"{p['naive_s_per_config']:.3f} s each against {p['ours_s_per_config']:.3f} s here ({p['ratio']:.1f}x); "
             f"step times agree: {'yes' if p['agree'] else 'NO'}")
    out.note(f"the same best configuration in both runs: {'yes' if r['same_best'] else 'NO'}; exhaustive "
             f"run under {r['target_s']:g} s for >= 1,000 configurations: {'yes' if r['within_target'] else 'NO'}")
    out.record("bench.plan_llm", {}, r)
    if not (r["within_target"] and r["same_best"] and p["agree"]):
        raise typer.Exit(EXIT_FAILED)


@user_errors
def llm_step_cmd(repeats: int = typer.Option(3, min=1, max=20, help="Runs of each, alternating."),
                 fmt: FormatOption = None, json_path: JsonOption = None, store: StoreOption = None) -> None:
    """Time and memory of one simulated Llama 3 405B step on 16,384 GPUs (whole processes), beside the same
    step replayed op by op from its exported rank graphs, and at 1,024 GPUs."""
    from fabriclab.bench.speed.llm_step import LLM_STEP_BUDGET_S, run

    out = Output(fmt, json_path, store)
    r = run(repeats=repeats, progress=out.note)
    table = Table(title=f"one simulated step: {r['model']}, TP8 PP16 seq 8192 (medians of {r['repeats']} processes)")
    for col in ("run", "GPUs", "wall (s)", "peak MB", "step (s)", "detail"):
        table.add_column(col, justify="left" if col in ("run", "detail") else "right")
    names = {"ours": "fabriclab", "peer": "trace replay", "small": "fabriclab", "ecmp": "fabriclab ECMP"}
    for x in r["rows"]:
        table.add_row(names[x["run"]], f"{x['gpus']:,}", f"{x['wall_s']:.2f}", f"{x['max_rss_bytes'] / 1e6:.0f}",
                      f"{x['step_time_s']:.4g}", x["detail"])
    out.table(table)
    ours, ecmp = r["rows"][0], r["rows"][-1]
    ok = ours["wall_s"] < LLM_STEP_BUDGET_S and ecmp["wall_s"] < LLM_STEP_BUDGET_S
    for text in (f"trace replay / fabriclab wall time: {r['peer_over_ours']:.2f}x; 16,384 / 1,024 GPUs: "
                 f"{r['growth_16k_over_1k']:.2f}x; ECMP x 8 draws / one step: {r['ecmp_over_ours']:.2f}x; budget "
                 f"{LLM_STEP_BUDGET_S:g} s for the 16,384-GPU step, one or over 8 draws: {'met' if ok else 'MISSED'}",
                 "trace replay: the exported rank graphs timed op by op (whatif/graph_run), ranks alone, so its "
                 "step leaves out the pipeline's waits"):
        out.note(textwrap.fill(text, width=80, subsequent_indent="  "))
    out.record("bench.llm_step", {"repeats": repeats}, r, top={"wall_s": ours["wall_s"]})
    if not ok:
        raise typer.Exit(EXIT_FAILED)


@user_errors
def cluster_cmd(fmt: FormatOption = None, json_path: JsonOption = None, store: StoreOption = None) -> None:
    """Points per second of a 500-point plan in this process, on 2 local processes and on a loopback Dask
    cluster of 2 workers, and the ratio (the overhead of the cluster per point)."""
    from fabriclab.report.points.speed import run

    out = Output(fmt, json_path, store)
    out.note("planning 500 points three times: this process, 2 local processes, 2 Dask workers (~1 min) ...")
    r = run()
    table = Table(title=f"plan points per second: {r['plan']}")
    for col in ("where", "points", "wall (s)", "points/s", "x this process"):
        table.add_column(col, justify="left" if col == "where" else "right")
    base = r["rows"][0]["points_per_s"]
    for row in r["rows"]:
        table.add_row(row["where"], str(row["points"]), f"{row['wall_s']:.2f}", f"{row['points_per_s']:.1f}",
                      f"{row['points_per_s'] / base:.2f}")
    out.table(table)
    out.note(f"dask / local pool: {r['dask_vs_pool']:.2f}x the points per second "
             f"({r['overhead_s_per_point'] * 1e3:+.1f} ms per point); the cluster took {r['cluster_start_s']:.1f} s "
             f"to start (not timed); same answer on all three: {'yes' if r['same_answer'] else 'NO'}")
    out.record("bench.cluster", {"workers": r["workers"], "plan": r["plan"]}, r)
    if not r["same_answer"]:
        raise typer.Exit(EXIT_FAILED)


def register(app: typer.Typer) -> None:
    """Add `cli`, `sim`, `whatif`, `plan`, `plan-llm`, `llm-step` and `cluster` to the `bench` group."""
    app.command("cli")(cli_cmd)
    app.command("sim")(sim_cmd)
    app.command("whatif")(whatif_cmd)
    app.command("plan")(plan_cmd)
    app.command("plan-llm")(plan_llm_cmd)
    app.command("llm-step")(llm_step_cmd)
    app.command("cluster")(cluster_cmd)
