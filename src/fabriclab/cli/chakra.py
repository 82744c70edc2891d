"""`fabriclab chakra`: Chakra execution traces (ASTRA-sim's `.et` files) as fabriclab rank graphs.

`show` reads a trace (a prefix `PREFIX` of `PREFIX.<rank>.et` files, or the files) and prints its ranks,
ops per kind, bytes per communicator and each rank's critical path with the durations in the file; `run`
costs its communication on a cluster (`whatif/graph_run.py`) and prints the step time per communicator;
`example` writes a small 4-rank trace with every op kind and every collective ASTRA-sim runs. The format
and its mapping: `fabriclab.workload.chakra`.

Try it: `fabriclab chakra example --out /tmp/demo && fabriclab chakra run /tmp/demo --cluster dgx-h100`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.table import Table

from fabriclab.cli.common import (FormatOption, JsonOption, Output, StoreOption, check_trace_prefix,
                                  user_errors)
from fabriclab.cli.options import ClusterOption, load_cluster_option, parse_count

app = typer.Typer(help="Chakra execution traces (ASTRA-sim's .et files): show, run on a cluster, write an "
                       "example.", no_args_is_help=True, rich_markup_mode=None)

SourceArgument = Annotated[list[str], typer.Argument(
    metavar="PREFIX|FILE...", help="A trace: PREFIX of PREFIX.<rank>.et files (as ASTRA-sim takes it), or the "
                                   ".et files.")]
CommGroupsOption = Annotated[Optional[Path], typer.Option(
    "--comm-groups", metavar="FILE",
    help="ASTRA-sim's communicator-group file (JSON: pg_name -> ranks) for a trace fabriclab did not write; "
         "without it a group is all ranks.")]

NumGpusOption = Annotated[Optional[str], typer.Option(
    "--num-gpus", help="The job's GPUs: the group of a collective on all ranks in a trace fabriclab did not write, "
                       "of comm ops with no group size, and the ranks a send may name (default: the ranks).")]


def _load(source: list[str], comm_groups: Path | None, num_gpus: int | None = None):
    import json

    from fabriclab.textfile import read_text
    from fabriclab.workload.chakra import load_et

    groups = None
    if comm_groups is not None:
        try:
            groups = json.loads(read_text(comm_groups, "--comm-groups"))
        except OSError as exc:
            raise ValueError(f"--comm-groups {comm_groups}: cannot read it ({exc.strerror or exc})") from None
        except json.JSONDecodeError as exc:
            raise ValueError(f"--comm-groups {comm_groups}: cannot read it as JSON ({exc})") from None
    try:
        return load_et(source[0] if len(source) == 1 else source, comm_groups=groups, num_ranks=num_gpus)
    except ValueError as exc:
        if num_gpus is not None and "ranks, but the trace has rank" in str(exc):
            raise ValueError(f"--num-gpus {num_gpus}: {exc}") from None
        raise


def check_prefix(prefix: Path, option: str = "--out") -> None:
    """Before the work: the files `prefix` names can be written (`cli/common.check_trace_prefix`)."""
    check_trace_prefix(prefix, option)


def _num_gpus(text: str | None) -> int | None:
    from fabriclab.workload.etvalues import MAX_TRACE_RANKS

    gpus = parse_count(text, "--num-gpus") if text is not None else None
    if gpus is not None and gpus > MAX_TRACE_RANKS:
        raise ValueError(f"--num-gpus {gpus:,}: a trace here has at most {MAX_TRACE_RANKS:,} ranks (the library "
                         f"model's largest job); give fewer")
    return gpus


def _notes(out: Output, got) -> None:
    for kind, n in got.unknown_nodes.items():
        how = "with their host time" if kind.endswith("(is_cpu_op)") else "taking no time"
        out.note(f"warning: {n} {kind} read as compute ops {how}")
    for kind, n in got.approximated.items():
        out.note(f"warning: {n} {kind} read as the nearest collective")
    if not got.fabriclab_written:
        out.note("not written by fabriclab: streams, group sizes and communicators come from the standard fields")


@app.command("show")
@user_errors
def show(source: SourceArgument, comm_groups: CommGroupsOption = None, num_gpus: NumGpusOption = None,
         fmt: FormatOption = None, json_path: JsonOption = None, store: StoreOption = None) -> None:
    """Ranks, ops per kind, bytes per communicator and critical paths (the durations in the file)."""
    from fabriclab.whatif.graph_run import rank_time

    out = Output(fmt, json_path, store)
    gpus = _num_gpus(num_gpus)
    got = _load(source, comm_groups, gpus)
    ranks = [{"rank": g.rank, "ops": len(g.ops), "compute_ops": sum(op.kind == "compute" for op in g.ops),
              "comm_ops": sum(op.kind == "comm" for op in g.ops), **_times(rank_time(g))} for g in got.graphs]
    table = Table(title=f"{len(got.graphs)} ranks: {got.paths[0]}{' ...' if len(got.paths) > 1 else ''}")
    for col in ("rank", "ops", "compute ops", "comm ops", "critical path (ms)", "compute (ms)", "exposed comm (ms)"):
        table.add_column(col, justify="right")
    for r in ranks:
        table.add_row(*(str(r[k]) for k in ("rank", "ops", "compute_ops", "comm_ops")),
                      *(f"{r[k] * 1e3:.4f}" for k in ("step_s", "compute_s", "exposed_comm_s")))
    out.table(table)
    comms = _communicators(got.graphs)
    _print_communicators(out, comms)
    _notes(out, got)
    out.record("chakra.show", {"source": source, "comm_groups": str(comm_groups) if comm_groups else None,
                               "num_gpus": gpus},
               {"ranks": ranks, "communicators": comms, "unknown_nodes": got.unknown_nodes,
                "approximated": got.approximated})


def _times(t) -> dict:
    return {"step_s": t.step_s, "compute_s": t.compute_s, "exposed_comm_s": t.exposed_comm_s}


def _communicators(graphs) -> list[dict]:
    rows: dict[str, dict] = {}
    for g in graphs:
        for op in g.ops:
            if op.kind == "comm":
                row = rows.setdefault(op.communicator, {"communicator": op.communicator, "ops": 0, "bytes": 0,
                                                        "collectives": {}, "group_sizes": set()})
                row["ops"] += 1
                row["bytes"] += op.size_bytes
                row["collectives"][op.collective] = row["collectives"].get(op.collective, 0) + 1
                row["group_sizes"].add(op.group_size)
    return [{**r, "group_sizes": sorted(r["group_sizes"])} for r in rows.values()]


def _print_communicators(out: Output, rows: list[dict]) -> None:
    table = Table(title="communicators (all ranks)")
    for col in ("communicator", "ops", "MB", "group sizes", "collectives"):
        table.add_column(col, justify="left" if col in ("communicator", "collectives") else "right")
    for r in rows:
        table.add_row(r["communicator"] or "-", str(r["ops"]), f"{r['bytes'] / 1e6:.3f}",
                      ",".join(map(str, r["group_sizes"])),
                      ", ".join(f"{n} {k}" for k, n in sorted(r["collectives"].items())))
    out.table(table)


@app.command("run")
@user_errors
def run(source: SourceArgument, cluster: ClusterOption = None, comm_groups: CommGroupsOption = None,
        num_gpus: NumGpusOption = None,
        recost: Annotated[bool, typer.Option(help="Cost every comm op, also those with a duration in the file "
                                                  "(by default only those with 0).")] = False,
        out_prefix: Annotated[Optional[Path], typer.Option(
            "--out", metavar="PREFIX", help="Also write the costed trace as PREFIX.<rank>.et.")] = None,
        fmt: FormatOption = None, json_path: JsonOption = None, store: StoreOption = None) -> None:
    """The step time on a cluster: communication costed by the cluster's library model, per communicator."""
    from fabriclab.whatif.graph_run import run_graphs

    out = Output(fmt, json_path, store)
    if out_prefix is not None:
        check_prefix(out_prefix)
    model = load_cluster_option(cluster or "dgx-h100")
    gpus = _num_gpus(num_gpus)
    got = _load(source, comm_groups, gpus)
    result = run_graphs(got.graphs, model, num_gpus=gpus, recost=recost)
    _print_run(out, result, model.name)
    _notes(out, got)
    if out_prefix is not None:
        from fabriclab.workload.chakra import write_et

        out.note(f"costed trace: {len(write_et(result.graphs, out_prefix))} files {out_prefix}.<rank>.et")
    out.record("chakra.run", {"source": source, "cluster": cluster or "dgx-h100", "num_gpus": gpus,
                              "recost": recost}, _run_results(result))


def _print_run(out: Output, result, cluster_name: str) -> None:
    table = Table(title=f"step on {cluster_name}: {result.step_s * 1e3:.4f} ms (rank {result.slowest_rank}, "
                        f"the slowest)")
    for col in ("communicator", "time (ms)"):
        table.add_column(col, justify="left" if col == "communicator" else "right")
    for name, seconds in sorted(result.comm_s.items()):
        table.add_row(name or "-", f"{seconds * 1e3:.4f}")
    out.table(table)
    out.note(f"compute {result.compute_s * 1e3:.4f} ms, exposed communication {result.exposed_comm_s * 1e3:.4f} ms "
             f"(rank {result.slowest_rank}); {result.num_costed} comm ops costed by the cluster model, "
             f"{len(result.costs)} distinct (collective, GPUs, bytes); ranks timed independently")
    for note in result.notes:
        out.note(f"approximation: {note}")


def _run_results(result) -> dict:
    return {"step_s": result.step_s, "slowest_rank": result.slowest_rank, "compute_s": result.compute_s,
            "exposed_comm_s": result.exposed_comm_s, "comm_s": result.comm_s, "num_costed": result.num_costed,
            "ranks": [{"rank": r.rank, **_times(r), "comm_s": r.comm_s} for r in result.ranks],
            "costs": [{"collective": c, "num_gpus": n, "size_bytes": s, "time_s": t}
                      for (c, n, s), t in sorted(result.costs.items())], "notes": list(result.notes)}


@app.command("example")
@user_errors
def example(out_prefix: Annotated[Path, typer.Option("--out", metavar="PREFIX", help="Write PREFIX.<rank>.et.")],
            ranks: Annotated[str, typer.Option(help="Ranks (even, 4 to 1024).")] = "4") -> None:
    """Write a small trace with every op kind and every collective ASTRA-sim runs (two pipeline stages, tp
    pairs, world)."""
    from fabriclab.whatif.graph_run import sample_graphs
    from fabriclab.workload.chakra import comm_groups_path, write_et

    check_prefix(out_prefix)
    paths = write_et(sample_graphs(parse_count(ranks, "--ranks", minimum=4)), out_prefix)
    typer.echo(f"wrote {len(paths)} files {out_prefix}.<rank>.et and {comm_groups_path(out_prefix)}")


def register(main_app: typer.Typer) -> None:
    """Add the `chakra` command group to `main_app`."""
    main_app.add_typer(app, name="chakra")
