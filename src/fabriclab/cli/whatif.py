"""`fabriclab whatif`: the what-if analysis of Zhang et al., "Is Network the Bottleneck of Distributed
Training?" (NetAI'20) over bandwidth, workers and compression.

`fabriclab whatif --profile resnet50 --workers 16,32,64 --bandwidth 1,10,25,40,100Gbps --compression 1,2,5,10`
prints the scaling factor per point (and writes CSV / JSON / plots on request); `fabriclab whatif
reproduce` rebuilds the paper's table from the shipped V100 logs and answers its compression question.
Fusion `time-or-size` and cost `ring-addest` are the paper's.
With `--cost simulated` each point runs the flow-level simulator on the topology of the shared options
(one host per worker). With `--cluster FILE` (from `fabriclab calibrate nccl-tests ... --out FILE`) each
bucket's all-reduce costs what the calibrated cluster model predicts (cost `cluster`: NCCL's algorithm and
protocol per size on the cluster's GPUs, NICs and network), and workers must fill whole servers of it.

Try it: `fabriclab whatif --workers 16 --bandwidth 25Gbps`.
"""

from __future__ import annotations

import math
import time
from pathlib import Path
from typing import Optional

import typer
from rich.table import Table

from fabriclab.cli.common import (
    FormatOption,
    JsonOption,
    Output,
    StoreOption,
    check_output_dir,
    check_output_path,
    split_list,
    user_errors,
)
from fabriclab.cli.options import (
    BisectionOption,
    HostsPerLeafOption,
    LeavesPerPodOption,
    LevelsOption,
    RoutingOption,
    SpinesOption,
    TopologyOption,
    parse_number,
    topology_spec_from,
)

app = typer.Typer(help="What-if: scaling factor from a profile, a fusion policy and a collective cost.",
                  invoke_without_command=True, rich_markup_mode=None)

# The simulator's endpoint limit (fabric.scenario.MAX_ENDPOINTS); closed forms need no more either.
MAX_WORKERS = 1 << 20


def parse_bandwidth_list(text: str) -> list[float]:
    """`1,10,25Gbps` -> bytes/s; items without a unit take the unit of the last item."""
    from fabriclab.units import check_link_bandwidth, parse_bandwidth

    items = split_list(text, "bandwidth list")
    unit = items[-1].lstrip("0123456789.eE+-")
    values = [parse_bandwidth(item if item.lstrip("0123456789.eE+-") else item + unit) for item in items]
    for item, value in zip(items, values):
        if not math.isfinite(value):
            raise ValueError(f"--bandwidth {item!r}: give a finite bandwidth, e.g. 25Gbps")
        check_link_bandwidth(value, "--bandwidth", item)
    return values


def parse_compression(text: str) -> list[float]:
    """Compression ratios: finite numbers > 0 (1 = none)."""
    values = []
    for item in split_list(text, "compression ratios"):
        value = parse_number(item, "--compression", example="1,2,5,10")
        if value <= 0:
            raise ValueError(f"--compression {item}: give ratios > 0, e.g. 1,2,5,10 (1 = no compression)")
        values.append(value)
    return values


def add_cost_of(spec: str):
    from fabriclab.workload.addcost import AddCost, builtin_add_cost

    if spec == "builtin":
        return builtin_add_cost()
    if spec == "zero":
        return AddCost.zero()
    if not Path(spec).is_file():
        raise ValueError(f"--add-cost {spec!r}: use builtin, zero, or a file of `bytes,seconds` lines")
    return AddCost.from_log(spec)


def make_cost_factory(cost: str, add, latency_s: float, gamma: Optional[float], compress_add: bool, spec,
                      workers: tuple[int, ...], auto_leaf: bool = True, cluster=None):
    """`make(num_workers=, bandwidth_Bps=, compression=, algo=)` -> CostModel; with `cost == simulated`,
    the topology of `spec` with one host per worker (checked here for every worker count); with
    `auto_leaf` each worker count gets the default leaf size for its hosts; with `cost == cluster`, the
    cluster model `cluster` (every worker count checked against its servers here)."""
    from dataclasses import replace

    from fabriclab.whatif.bucket_time import CostModel

    topos: dict[tuple[int, float], object] = {}

    def spec_for(n: int, bandwidth_Bps: float):
        from fabriclab.fabric.scenario import auto_hosts_per_leaf

        leaf = auto_hosts_per_leaf(n, spec.bisection, spec.levels) if auto_leaf else spec.hosts_per_leaf
        return replace(spec.with_hosts(n), hosts_per_leaf=leaf, bandwidth_Bps=bandwidth_Bps, latency_s=latency_s)

    if cost == "simulated":
        from fabriclab.fabric.scenario import build_topology

        for n in workers:  # every worker count must make a valid network before the work starts
            one = spec_for(n, spec.bandwidth_Bps)
            if one.kind in ("fat-tree", "leaf-spine") and n <= one.hosts_per_leaf:
                raise ValueError(f"{n} workers fill only one leaf of {one.hosts_per_leaf}: give --hosts-per-leaf "
                                 f"<= {max(n // 2, 1)} or --topology star")
            build_topology(one)
    if cost == "cluster":
        from fabriclab.nccl.predict import layout

        for n in workers:
            layout(cluster, n)

    def make(*, num_workers: int, bandwidth_Bps: float, compression: float, algo: str) -> CostModel:
        topo = None
        if cost == "simulated":
            from fabriclab.fabric.scenario import build_topology

            key = (num_workers, bandwidth_Bps)
            if key not in topos:
                topos[key] = build_topology(spec_for(num_workers, bandwidth_Bps))
            topo = topos[key]
        return CostModel(kind=cost, bandwidth_Bps=bandwidth_Bps, num_workers=num_workers,
                         compression=compression, compress_add=compress_add, add_cost=add, algo=algo,
                         alpha_s=latency_s, gamma_s_per_byte=gamma, topology=topo, cluster=cluster)
    return make


@app.callback()
@user_errors
def whatif(
    ctx: typer.Context,
    profile: str = typer.Option("resnet50", help="Built-in V100 profile(s) (resnet50, resnet101, vgg16) or "
                                "profile files (.json from `fabriclab profile`, .bk.log), comma separated."),
    iteration_time: Optional[str] = typer.Option(None, help="Single-device iteration time for a .bk.log."),
    workers: str = typer.Option("16,32,64", help="Worker counts, e.g. 16,32,64 or 2-8."),
    bandwidth: Optional[str] = typer.Option(None, help="Link bandwidths (default 1,10,25,40,100Gbps; "
                                            "not with --cluster, whose file sets the NICs)."),
    compression: str = typer.Option("1", help="Compression ratios > 0, e.g. 1,2,5,10."),
    fusion: str = typer.Option("time-or-size", help="Gradient fusion: time-or-size (5 ms / 64 MiB, Zhang et "
                                                    "al.), horovod, ddp or none."),
    cost: Optional[str] = typer.Option(None, help="All-reduce cost: ring-addest (Zhang et al.'s ring formula "
                                       "with measured additions; the default), closed-form, simulated, or "
                                       "cluster (the default with --cluster)."),
    cluster: Optional[Path] = typer.Option(None, "--cluster", metavar="FILE", dir_okay=False,
                                           help="Cluster file from `fabriclab calibrate nccl-tests ... --out "
                                                "FILE`: bucket costs from its NCCL model (cost cluster)."),
    algo: str = typer.Option("ring", help="Algorithm spec(s) for closed-form / simulated."),
    latency: str = typer.Option("0", help="Per-message (closed-form) or per-link (simulated) latency."),
    gamma: Optional[str] = typer.Option(None, metavar="S_PER_BYTE",
                                        help="Reduction s/byte >= 0 (default: from the add-cost table)."),
    add_cost: str = typer.Option("builtin", help="builtin (V100), zero, or a bytes,seconds table file."),
    compress_add: bool = typer.Option(False, help="Compression also divides the reduction cost."),
    topology: TopologyOption = "fat-tree",
    levels: LevelsOption = "2",
    hosts_per_leaf: HostsPerLeafOption = None,
    bisection: BisectionOption = "1",
    leaves_per_pod: LeavesPerPodOption = None,
    spines: SpinesOption = "4",
    routing: RoutingOption = "dmodk",
    csv_path: Optional[Path] = typer.Option(None, "--csv", help="Write all rows to this CSV."),
    plots: Optional[Path] = typer.Option(None, help="Write plots of scaling factor vs "
                                         "bandwidth, workers and compression (Zhang et al.'s Figures 6-8) here."),
    fmt: FormatOption = None,
    json_path: JsonOption = None,
    store: StoreOption = None,
) -> None:
    """Scaling factor per (model, bandwidth, workers, compression) point."""
    if ctx.invoked_subcommand is not None:
        return
    from fabriclab.units import check_link_latency, parse_int_list, parse_time
    from fabriclab.whatif.bucket_time import ALIASES, COST_MODELS
    from fabriclab.whatif.fusion import FusionPolicy
    from fabriclab.whatif.sweep import SweepAxes, run_sweep
    from fabriclab.workload.profile import load_profile

    out = Output(fmt, json_path, store)
    check_output_path(csv_path, "--csv")
    check_output_dir(plots, "--plots")
    cost = ALIASES.get(cost, cost) if cost is not None else ("cluster" if cluster else "ring-addest")
    if cost not in COST_MODELS:
        raise ValueError(f"--cost {cost!r}: use one of {', '.join(COST_MODELS)}")
    cluster_model = None
    if (cost == "cluster") != (cluster is not None):
        raise ValueError("--cost cluster needs --cluster FILE" if cluster is None else
                         f"--cluster {cluster} sets the cost to `cluster`: drop --cost {cost}")
    if cluster is not None:
        from fabriclab.fabric.cluster import load_cluster

        if bandwidth is not None:
            raise ValueError(f"--bandwidth does not apply with --cluster: {cluster} sets the NICs; drop "
                             f"--bandwidth")
        cluster_model = load_cluster(cluster)
        algo = "nccl"  # the library picks the algorithm and protocol per size
    worker_counts = tuple(parse_int_list(workers, minimum=1, what="workers"))
    if worker_counts[-1] > MAX_WORKERS:
        raise ValueError(f"--workers {worker_counts[-1]}: at most {MAX_WORKERS} workers")
    latency_s = check_link_latency(parse_time(latency), "--latency", latency)  # inf and NaN fail too
    gamma_s = None if gamma is None else parse_number(gamma, "--gamma", example="0 or 1e-10")
    spec = None
    if cost == "simulated":
        spec = topology_spec_from(topology=topology, hosts=str(worker_counts[0]), levels=levels,
                                  hosts_per_leaf=hosts_per_leaf, bisection=bisection,
                                  leaves_per_pod=leaves_per_pod, spines=spines, routing=routing)
    it_s = parse_time(iteration_time) if iteration_time else None
    axes = SweepAxes(profiles=tuple(load_profile(p, iteration_s=it_s) for p in split_list(profile, "profiles")),
                     workers=worker_counts,
                     bandwidths_Bps=((cluster_model.server.nic_bandwidth_Bps,) if cluster_model is not None
                                     else tuple(parse_bandwidth_list(bandwidth or "1,10,25,40,100Gbps"))),
                     compression=tuple(parse_compression(compression)), algos=tuple(split_list(algo, "algorithms")))
    policy = FusionPolicy(name=fusion)
    policy.buckets([1], [0.0])  # an unknown policy fails here, before the work
    add = add_cost_of(add_cost)  # read once: the cluster range re-runs the sweep with the same table

    def factory(model):
        return make_cost_factory(cost, add, latency_s, gamma_s, compress_add, spec, worker_counts,
                                 auto_leaf=hosts_per_leaf is None, cluster=model)

    t0 = time.perf_counter()
    rows = list(run_sweep(axes, policy, factory(cluster_model)))
    if cluster_model is not None:
        from fabriclab.nccl.band import moved_clusters

        _add_cluster_range(rows, axes, policy, [factory(c) for c in moved_clusters(cluster_model)])
    wall = time.perf_counter() - t0
    closed = cost == "ring-addest"
    table = Table(title=f"what-if: fusion {policy.name}, cost {cost}" + ("" if closed else f" ({algo})"))
    ranged = cluster_model is not None
    for col in ("model", "workers", "Gbps", "compr.", "algo", "iteration (ms)", "overhead (ms)",
                "exposed", "buckets", "scaling factor", *(("range",) if ranged else ())):
        table.add_column(col, justify="right")
    for r in rows:
        table.add_row(r["model"], str(r["workers"]), f"{r['bandwidth_Gbps']:g}", f"{r['compression']:g}",
                      "-" if closed else r["algo"], f"{r['iteration_s'] * 1e3:.2f}",
                      f"{r['overhead_s'] * 1e3:.2f}", f"{r['exposed_fraction']:.0%}", str(r["num_buckets"]),
                      f"{r['scaling_factor']:.4f}", *((_range_text(r),) if ranged else ()))
    out.table(table)
    if cluster_model is not None:
        out.note(f"cluster {cluster_model.name} ({cluster}): {cluster_model.server.gpus_per_server} GPUs and "
                 f"{cluster_model.server.nics_per_server} NICs per server; Gbps is one NIC's line rate")
        out.note("range: the scaling factor with the cluster's parameters that no log determined at either end "
                 "of their band (`simulate collective --cluster` names them per size); `fitted`: none matters")
    out.note(f"{len(rows)} points in {wall:.3f} s")
    if csv_path:
        from fabriclab.record import write_csv

        write_csv(csv_path, rows)
        out.note(f"CSV: {csv_path}")
    if plots:
        from fabriclab.report.whatif import plot_whatif

        for path in plot_whatif(rows, plots):
            out.note(f"plot: {path}")
    out.record("whatif", {"profile": profile, "workers": workers, "bandwidth": bandwidth,
                          "compression": compression, "fusion": policy.name, "cost": cost, "algo": algo,
                          "latency_s": latency_s, "gamma_s_per_byte": gamma_s, "add_cost": add_cost,
                          "topology": spec.as_dict() if spec is not None else None,
                          "cluster": str(cluster) if cluster is not None else None}, rows)


def _add_cluster_range(rows: list[dict], axes, policy, ends: list) -> None:
    """Give every row `scaling_low` / `scaling_high`: the sweep again with the cost factories `ends`, the
    cluster with its undetermined parameters at the pessimistic and at the optimistic end
    (`nccl/band.py`)."""
    from fabriclab.whatif.sweep import run_sweep

    low, high = ([r["scaling_factor"] for r in run_sweep(axes, policy, make)] for make in ends)
    for r, lo, hi in zip(rows, low, high):
        r["scaling_low"], r["scaling_high"] = min(lo, r["scaling_factor"]), max(hi, r["scaling_factor"])


def _range_text(r: dict) -> str:
    if abs(r["scaling_high"] - r["scaling_low"]) < 5e-5:
        return "fitted"
    return f"{r['scaling_low']:.4f}-{r['scaling_high']:.4f}"


def register(main_app: typer.Typer) -> None:
    from fabriclab.cli import whatif_reproduce

    whatif_reproduce.register(app)
    main_app.add_typer(app, name="whatif")
