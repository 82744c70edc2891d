"""`fabriclab simulate jobs`: several jobs on one cluster's fabric, and how much each slows the others.

Each `--job COLLECTIVE:GPUS:SIZE` runs on its own servers (`--placement packed|interleaved|scattered`, a
`--busy` share of the cluster held by other jobs); all jobs' flows are routed together as `--routing`
says, and each job's time (its busiest link, every job's bytes counted) is set against the same job alone
on the same servers (`nccl/jobs.py`). `--seeds N` draws the hashes and a scattered placement N times and
reports the median and the 90th percentile.

Try it: `fabriclab simulate jobs --cluster dgx-h100 --fabric fat-tree --routing ecmp --placement interleaved
--job allreduce:64:256MiB --job allreduce:64:256MiB --seeds 8`.
"""

from __future__ import annotations

from typing import Annotated, Optional

import typer
from rich.table import Table

from fabriclab.cli.common import FormatOption, JsonOption, Output, StoreOption, user_errors
from fabriclab.cli.llm_options import BisectionOption, FabricOption
from fabriclab.cli.options import ClusterOption, load_cluster_option, parse_count, parse_number
from fabriclab.cli.routing_options import (
    ClusterRoutingOption,
    QpsOption,
    SeedsOption,
    TransportOption,
    parse_seeds,
    routed_cluster,
)

JobOption = Annotated[Optional[list[str]], typer.Option(
    "--job", metavar="COLLECTIVE:GPUS:SIZE",
    help="A job, repeated for each: allreduce, allgather, reduce_scatter or alltoall, its GPUs and buffer, e.g. "
         "allreduce:64:256MiB.")]
PlacementOption = Annotated[str, typer.Option(
    "--placement", metavar="NAME", help="Where the jobs' servers are: packed (in order), interleaved (every leaf "
                                        "dealt to the jobs in turn) or scattered (random free servers).")]
BusyOption = Annotated[str, typer.Option(
    "--busy", metavar="SHARE", help="Share of the cluster's servers other jobs hold, in [0, 1), e.g. 0.5: the "
                                    "cluster has the jobs' servers / (1 - SHARE).")]
ServersOption = Annotated[Optional[str], typer.Option(
    "--servers", metavar="N", help="Servers of the cluster (default: the jobs' servers / (1 - busy)).")]


def parse_job(text: str, cluster):
    """`allreduce:64:256MiB` as a `JobSpec`; a ValueError naming `--job` says what to change."""
    from fabriclab.nccl.jobs import COLLECTIVES, JobSpec, check_job
    from fabriclab.units import parse_size

    parts = [p.strip() for p in text.split(":")]
    if len(parts) != 3:
        raise ValueError(f"--job {text!r}: give COLLECTIVE:GPUS:SIZE, e.g. allreduce:64:256MiB")
    collective = parts[0].lower().replace("-", "_")
    if collective not in COLLECTIVES:
        raise ValueError(f"--job {text!r}: collective {parts[0]!r} unknown; use one of {', '.join(COLLECTIVES)}")
    try:
        job = JobSpec(collective=collective, num_gpus=parse_count(parts[1], "GPUs"), size_bytes=parse_size(parts[2]))
        check_job(cluster, job)
    except ValueError as exc:
        raise ValueError(f"--job {text!r}: {exc}") from None
    return job


def jobs_cluster(o: dict):
    """The cluster of the command line `o`, with --fabric, --bisection, --routing, --qps and --transport."""
    from fabriclab.cli.llm_options import vary_cluster_options

    cluster = vary_cluster_options(load_cluster_option(o["cluster"]), o["fabric"], o["bisection"], None)
    return routed_cluster(cluster, o["routing"], o["qps"], o["transport"])


def _busy(text: str) -> float:
    busy = parse_number(text, "--busy", example="0.5")
    if not busy < 1:
        raise ValueError(f"--busy {text}: give a share of the cluster's servers in [0, 1), e.g. 0.5")
    return busy


def _check_fit(cluster, jobs: list, busy: float, num_servers: int | None) -> None:
    """A ValueError naming --servers (or --job) when the jobs do not fit the cluster's free servers."""
    from fabriclab.nccl.placement import cluster_servers, job_servers

    try:
        cluster_servers(cluster, sum(job_servers(cluster, j.num_gpus) for j in jobs), busy, num_servers)
    except ValueError as exc:
        raise ValueError(f"{'--job' if num_servers is None else f'--servers {num_servers}'}: {exc}") from None


@user_errors
def jobs_cmd(
    cluster: ClusterOption = None,
    job: JobOption = None,
    placement: PlacementOption = "packed",
    busy: BusyOption = "0",
    routing: ClusterRoutingOption = None,
    qps: QpsOption = None,
    transport: TransportOption = None,
    seeds: SeedsOption = "1",
    servers: ServersOption = None,
    fabric: FabricOption = None,
    bisection: BisectionOption = None,
    fmt: FormatOption = None,
    json_path: JsonOption = None,
    store: StoreOption = None,
) -> None:
    """Jobs sharing a cluster's fabric: each job's time alone and together, and its slowdown."""
    from dataclasses import asdict

    from fabriclab.nccl.jobs import simulate_jobs
    from fabriclab.nccl.placement import PLACEMENTS

    out = Output(fmt, json_path, store)
    if cluster is None or not job:
        raise ValueError("give --cluster PRESET|FILE and at least one --job COLLECTIVE:GPUS:SIZE, e.g. --cluster "
                         "dgx-h100 --job allreduce:64:256MiB")
    model = jobs_cluster(locals())
    jobs = [parse_job(text, model) for text in job]
    placement = placement.strip().lower()
    if placement not in PLACEMENTS:
        raise ValueError(f"--placement {placement!r}: use one of {', '.join(PLACEMENTS)}")
    share = _busy(busy)
    num_servers = None if servers is None else parse_count(servers, "--servers")
    _check_fit(model, jobs, share, num_servers)
    num_seeds = parse_seeds(seeds)
    results = simulate_jobs(model, jobs, placement=placement, busy=share, num_seeds=num_seeds,
                            num_servers=num_servers)
    rows = [r.summary() for r in results]
    out.table(_table(rows, model, placement, share, num_seeds))
    config = {"cluster": cluster, "cluster_name": model.name, "jobs": [asdict(j) for j in jobs], "placement": placement,
              "busy": share, "routing": model.network.routing, "qps_per_connection": model.network.qps_per_connection,
              "transport": model.network.transport, "seeds": num_seeds, "num_servers": num_servers,
              "fabric": model.network.fabric,
              "bisection": model.network.bisection}
    out.record("simulate.jobs", config, rows)


def _table(rows: list[dict], cluster, placement: str, busy: float, seeds: int) -> Table:
    from fabriclab.units import format_size

    n = cluster.network
    where = cluster.name if n.fabric in cluster.name else f"{cluster.name} ({n.fabric})"
    table = Table(title=f"{where}, {n.routing} over {n.transport}, {placement}, busy {busy:g}, "
                        f"{seeds} seed{'s' if seeds > 1 else ''}")
    for col in ("job", "GPUs", "size", "servers", "leaves", "alone ms", "together ms", "slowdown", "p90"):
        table.add_column(col, justify="left" if col == "job" else "right")
    for r in rows:
        table.add_row(r["collective"], str(r["num_gpus"]), format_size(r["size_bytes"]), str(r["num_servers"]),
                      f"{r['leaves_median']:g}", f"{r['alone_s_median'] * 1e3:.3f}",
                      f"{r['together_s_median'] * 1e3:.3f}", f"{r['slowdown_median']:.2f}",
                      f"{r['slowdown_p90']:.2f}")
    return table


def register(app: typer.Typer) -> None:
    """Add `jobs` to the `simulate` group `app`."""
    app.command("jobs")(jobs_cmd)
