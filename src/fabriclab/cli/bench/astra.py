"""`fabriclab bench astra-sim`: one LLM training step in fabriclab and in ASTRA-sim (analytical network).

The job options are `whatif llm`'s. fabriclab simulates the step and exports every rank's graph; ASTRA-sim
runs them on the same cluster (its NVLink domain and scale-out network) with the compute replayed from the
same durations (`bench/astra/`). Prints both step times and their ratio, the ranks ASTRA-sim finished, each
collective of the step in both tools (time per call), and both tools' wall times; exits 1 when a rank never
finishes in ASTRA-sim.

Try it: `fabriclab bench astra-sim --astra-sim ../shared/tools/astra-sim/bin` (llama3-8b, 16 GPUs of
dgx-h100, TP 2, PP 2).
"""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer
from rich.table import Table

from fabriclab.cli.common import (EXIT_FAILED, FormatOption, JsonOption, Output, StoreOption, check_output_dir,
                                  print_error, user_errors)
from fabriclab.cli.llm_options import (CpOption, EpOption, EpOverlapOption, FsdpUnitOption, GbsOption, GpusOption,
                                       LlmJob, MbsOption, ModelOption, OrderOption, PpOption, PrecisionOption,
                                       RecomputeOption, SeqOption, ShardGroupOption, SpOption, TpOption,
                                       TpOverlapOption, VpOption, ZeroOption, llm_ignored, step_options)
from fabriclab.cli.ignored import warn_ignored
from fabriclab.cli.options import ClusterOption, load_cluster_option, parse_number


def register(app: typer.Typer) -> None:
    app.command("astra-sim")(astra_sim_cmd)


@user_errors
def astra_sim_cmd(
    model: ModelOption = "llama3-8b", cluster: ClusterOption = None, gpus: GpusOption = "16", tp: TpOption = "2",
    pp: PpOption = "2", vp: VpOption = "1", cp: CpOption = "1", ep: EpOption = "1", mbs: MbsOption = "1",
    gbs: GbsOption = None, seq: SeqOption = None, sequence_parallel: SpOption = True, zero: ZeroOption = "1",
    recompute: RecomputeOption = "none", precision: PrecisionOption = "bf16", order: OrderOption = "tp-cp-dp-pp",
    tp_overlap: TpOverlapOption = False, fsdp_unit: FsdpUnitOption = "1", shard_group: ShardGroupOption = "0",
    ep_overlap: EpOverlapOption = False,
    efficiency: Optional[str] = typer.Option(None, metavar="SHARE", help="Share of peak the math reaches "
                                             "(default: the cluster file's)."),
    astra_sim: Optional[str] = typer.Option(None, "--astra-sim", metavar="PATH", help="ASTRA-sim's "
                                            "AstraSim_Analytical_Congestion_Unaware (or its folder); default "
                                            "$FABRICLAB_ASTRA_SIM, else ../shared/tools/astra-sim/bin."),
    timeout: str = typer.Option("600s", metavar="TIME", help="Stop an ASTRA-sim run after this long."),
    out_dir: Optional[Path] = typer.Option(None, "--out", metavar="DIR", help="Keep the traces and ASTRA-sim's "
                                           "configurations in DIR (default: a temporary folder, removed)."),
    collectives: bool = typer.Option(True, "--collectives/--no-collectives", help="Also time each collective "
                                     "of the step alone in ASTRA-sim."),
    roofline: bool = typer.Option(False, "--roofline", help="ASTRA-sim costs the compute with its roofline (peak "
                                  "x the efficiency, HBM bandwidth) instead of replaying fabriclab's durations."),
    fmt: FormatOption = None, json_path: JsonOption = None, store: StoreOption = None,
) -> None:
    """One LLM step in fabriclab and in ASTRA-sim: step times, ratio, collectives, wall times."""
    from fabriclab.bench.astra.run import AstraSimError, find_binary
    from fabriclab.bench.astra.step import compare_step

    out = Output(fmt, json_path, store)
    check_output_dir(out_dir, "--out")
    job = LlmJob.from_options(model, gpus, tp, pp, vp, cp, ep, mbs, gbs, seq, sequence_parallel, zero, recompute,
                              precision, order)
    the_cluster = load_cluster_option(cluster or "dgx-h100")
    options, limit, share = step_options(tp_overlap, fsdp_unit, shard_group, ep_overlap), _timeout(timeout), \
        _share(efficiency)
    warn_ignored(llm_ignored(job.par, locals()))
    binary = find_binary(astra_sim)
    try:
        result = compare_step(job, the_cluster, binary, options=options,
                              efficiency=share, timeout_s=limit, folder=out_dir, collectives=collectives,
                              roofline=roofline)
    except AstraSimError as exc:
        print_error(exc)
        raise typer.Exit(EXIT_FAILED) from None
    _print(out, result, the_cluster.name)
    config = {**job.config(), "cluster": cluster or "dgx-h100", "tp_overlap": tp_overlap, "fsdp_unit": fsdp_unit,
              "shard_group": shard_group, "ep_overlap": ep_overlap, "efficiency": efficiency, "astra_sim": str(binary),
              "timeout_s": limit, "collectives": collectives, "roofline": roofline}
    out.record("bench.astra_sim", config, result, top={"ratio": result["ratio"]})
    if result["astra_sim"]["unfinished"]:
        raise typer.Exit(EXIT_FAILED)


def _timeout(text: str) -> float:
    from fabriclab.units import parse_time

    seconds = parse_time(text)
    if not 1 <= seconds <= 86400:
        raise ValueError(f"--timeout {text}: give 1s to 24h, e.g. 600s")
    return seconds


def _share(text: str | None) -> float | None:
    value = None if text is None else parse_number(text, "--efficiency", example="0.45")
    if value is not None and not 0 < value <= 1:
        raise ValueError(f"--efficiency {text}: give a share of peak in (0, 1], e.g. 0.45")
    return value


def _print(out: Output, r: dict, cluster_name: str) -> None:
    ours, astra = r["fabriclab"], r["astra_sim"]
    table = Table(title=f"{r['summary']['model']} on {r['summary']['num_gpus']} GPUs of {cluster_name} "
                        f"({r['summary']['parallel']}): one step")
    for col in ("tool", "step (s)", "ratio", "ranks finished", "wall (s)"):
        table.add_column(col, justify="left" if col == "tool" else "right")
    table.add_row("fabriclab", f"{ours['step_s']:.6g}", "1", "-", f"{ours['wall_s']:.3f}")
    step = "-" if astra["step_s"] is None else f"{astra['step_s']:.6g}"
    ratio = "-" if r["ratio"] is None else f"{r['ratio']:.4f}"
    table.add_row("ASTRA-sim", step, ratio, f"{astra['finished']}/{astra['num_ranks']}", f"{astra['wall_s']:.3f}")
    for label, key in (("fabriclab graphs replayed", "replay_step_s"),
                       ("  1 collective at a time", "one_collective_at_a_time_step_s"),
                       ("  and ASTRA-sim's collectives", "their_collectives_step_s")):
        if ours.get(key):
            table.add_row(label, f"{ours[key]:.6g}", f"{ours[key] / ours['step_s']:.4f}", "-", "-")
    out.table(table)
    if r["ratio_one_at_a_time"] is not None:
        their = r.get("ratio_their_collectives")
        out.note(f"ASTRA-sim runs one collective or send per GPU at a time (HardwareResource.cc); the exported "
                 f"graphs replayed under that rule with fabriclab's costs: ASTRA-sim / that = "
                 f"{r['ratio_one_at_a_time']:.4f}" + ("" if their is None else
                 f"; with ASTRA-sim's own time of each collective alone: {their:.4f}"))
    if r["collectives"]:
        out.table(_collectives(r["collectives"]))
    alone = f", ASTRA-sim's collectives alone {astra['collectives_wall_s']:.3f} s" if r["collectives"] else ""
    compute = ("ASTRA-sim costs the compute with its roofline" if astra["compute"] == "roofline" else
               "ASTRA-sim replays the same compute durations")
    out.note(f"graphs: {ours['graphs']} (their critical paths alone: {ours['graph_critical_path_s']:.6g} s); "
             f"{compute}; wall: export {ours['export_wall_s']:.3f} s{alone}")
    if astra["unfinished"]:
        kept = f"traces kept in {astra['folder']}" if astra["folder"] else "--out DIR keeps the traces to look at"
        out.note(f"ASTRA-sim never finished ranks {astra['unfinished'][:12]}; {kept}")
    if astra.get("note"):
        out.note(astra["note"])


def _collectives(rows: list[dict]) -> Table:
    table = Table(title="each collective alone (time per call)")
    for col in ("comm", "collective", "GPUs", "MB/call", "calls", "fabriclab (ms)", "ASTRA-sim (ms)", "ratio",
                "fabriclab algorithm"):
        table.add_column(col, justify="left" if col in ("comm", "collective", "fabriclab algorithm") else "right")
    for row in rows:
        astra = "-" if row["astra_s"] is None else f"{row['astra_s'] * 1e3:.4g}"
        ratio = "-" if row["ratio"] is None else f"{row['ratio']:.3f}"
        table.add_row(row["communicator"], row["collective"], str(row["group_size"]), f"{row['size_bytes'] / 1e6:.4g}",
                      f"{row['calls_per_step']:g}", f"{row['ours_s'] * 1e3:.4g}", astra, ratio, row["algorithm"])
    return table
