"""`fabriclab whatif`: seed 004's what-if analysis over bandwidth, workers and compression.

`fabriclab whatif --profile resnet50 --workers 16,32,64 --bandwidth 1,10,25,40,100Gbps --compression 1,2,5,10`
prints the scaling factor per point (and writes CSV / JSON / plots on request); `fabriclab whatif
reproduce` rebuilds seed 004's table from the shipped V100 logs and answers its compression question.

Try it: `fabriclab whatif reproduce`.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Optional

import typer
from rich.table import Table

from fabriclab.cli.common import JsonOption, console, save_record, split_list, user_errors
from fabriclab.units import parse_bandwidth, parse_int_list, parse_time
from fabriclab.whatif.costs import CostModel
from fabriclab.whatif.fusion import FusionPolicy
from fabriclab.whatif.sweep import SweepAxes, run_sweep
from fabriclab.workload.addcost import AddCost, builtin_add_cost
from fabriclab.workload.profile import load_profile

app = typer.Typer(help="What-if: scaling factor from a profile, a fusion policy and a collective cost.",
                  invoke_without_command=True)


def parse_bandwidth_list(text: str) -> list[float]:
    """`1,10,25Gbps` -> bytes/s; items without a unit take the unit of the last item."""
    items = split_list(text, "bandwidth list")
    unit = items[-1].lstrip("0123456789.eE+-")
    return [parse_bandwidth(item if item.lstrip("0123456789.eE+-") else item + unit) for item in items]


def add_cost_of(spec: str) -> AddCost:
    if spec == "builtin":
        return builtin_add_cost()
    if spec == "zero":
        return AddCost.zero()
    return AddCost.from_log(spec)


def make_cost_factory(cost: str, add: AddCost, latency_s: float, gamma: Optional[float], compress_add: bool,
                      topology_kind: str, link: str, hosts_per_leaf: int, bisection: str):
    topos: dict[int, object] = {}

    def make(*, num_workers: int, bandwidth_Bps: float, compression: float, algo: str) -> CostModel:
        topo = None
        if cost == "simulated":
            from fabriclab.fabric.scenario import TopologySpec, build_topology

            key = (num_workers, bandwidth_Bps)
            if key not in topos:
                hosts = num_workers
                if topology_kind == "fat-tree" and num_workers % hosts_per_leaf:
                    raise ValueError(f"{num_workers} workers do not fill leaves of {hosts_per_leaf}: "
                                     f"use --hosts-per-leaf that divides every worker count")
                topos[key] = build_topology(TopologySpec(
                    kind=topology_kind, hosts=hosts, hosts_per_leaf=min(hosts_per_leaf, hosts),
                    bisection=bisection, link=link, bandwidth=f"{bandwidth_Bps}B/s", latency=f"{latency_s}s"))
            topo = topos[key]
        return CostModel(kind=cost, bandwidth_Bps=bandwidth_Bps, num_workers=num_workers,
                         compression=compression, compress_add=compress_add, add_cost=add, algo=algo,
                         alpha_s=latency_s, gamma_s_per_byte=gamma, topology=topo)
    return make


@app.callback()
@user_errors
def whatif(
    ctx: typer.Context,
    profile: str = typer.Option("resnet50", help="Built-in V100 profile(s) (resnet50, resnet101, vgg16) or "
                                "profile files (.json from `fabriclab profile`, .bk.log), comma separated."),
    iteration_time: Optional[str] = typer.Option(None, help="Single-device iteration time for a .bk.log."),
    workers: str = typer.Option("16,32,64", help="Worker counts."),
    bandwidth: str = typer.Option("1,10,25,40,100Gbps", help="Link bandwidths."),
    compression: str = typer.Option("1", help="Compression ratios, e.g. 1,2,5,10."),
    fusion: str = typer.Option("paper004", help="paper004 (5 ms / 64 MiB), horovod, ddp or none."),
    cost: str = typer.Option("paper004", help="paper004, closed-form or simulated."),
    algo: str = typer.Option("ring", help="Algorithm spec(s) for closed-form / simulated."),
    latency: str = typer.Option("0", help="Per-message (closed-form) or per-link (simulated) latency."),
    gamma: Optional[float] = typer.Option(None, help="Reduction s/byte (default: from the add-cost table)."),
    add_cost: str = typer.Option("builtin", help="builtin (V100), zero, or a bytes,seconds table file."),
    compress_add: bool = typer.Option(False, help="Compression also divides the reduction cost."),
    topology: str = typer.Option("star", help="simulated: star or fat-tree."),
    hosts_per_leaf: int = typer.Option(16, help="simulated fat tree: hosts per leaf."),
    bisection: str = typer.Option("1", help="simulated fat tree: bisection ratio."),
    csv_path: Optional[Path] = typer.Option(None, "--csv", help="Write all rows to this CSV."),
    plots: Optional[Path] = typer.Option(None, help="Write plots like seed 004's Figures 6-8 here."),
    json_path: JsonOption = None,
) -> None:
    """Scaling factor per (model, bandwidth, workers, compression) point."""
    if ctx.invoked_subcommand is not None:
        return
    it_s = parse_time(iteration_time) if iteration_time else None
    profiles = tuple(load_profile(p, iteration_s=it_s) for p in split_list(profile, "profiles"))
    axes = SweepAxes(profiles=profiles, workers=tuple(parse_int_list(workers, minimum=1, what="workers")),
                     bandwidths_Bps=tuple(parse_bandwidth_list(bandwidth)),
                     compression=tuple(float(c) for c in split_list(compression, "compression ratios")),
                     algos=tuple(split_list(algo, "algorithms")))
    if min(axes.compression) <= 0:
        raise ValueError("compression ratios must be > 0")
    policy = FusionPolicy(name=fusion)
    policy.buckets([1], [0.0])
    make = make_cost_factory(cost, add_cost_of(add_cost), parse_time(latency), gamma, compress_add,
                             topology, "4GB/s@0us", hosts_per_leaf, bisection)
    t0 = time.perf_counter()
    rows = list(run_sweep(axes, policy, make))
    wall = time.perf_counter() - t0
    table = Table(title=f"what-if: fusion {fusion}, cost {cost}" + (f" ({algo})" if cost != "paper004" else ""))
    for col in ("model", "workers", "Gbps", "compr.", "algo", "iteration (ms)", "overhead (ms)",
                "exposed", "buckets", "scaling factor"):
        table.add_column(col, justify="right")
    for r in rows:
        table.add_row(r["model"], str(r["workers"]), f"{r['bandwidth_Gbps']:g}", f"{r['compression']:g}",
                      r["algo"] if cost != "paper004" else "-", f"{r['iteration_s'] * 1e3:.2f}", f"{r['overhead_s'] * 1e3:.2f}",
                      f"{r['exposed_fraction']:.0%}", str(r["num_buckets"]), f"{r['scaling_factor']:.4f}")
    console.print(table)
    console.print(f"{len(rows)} points in {wall:.3f} s")
    if csv_path:
        from fabriclab.record import write_csv

        write_csv(csv_path, rows)
    if plots:
        from fabriclab.report.whatif import plot_whatif

        for path in plot_whatif(rows, plots):
            console.print(f"plot: {path}")
    save_record(json_path, "whatif", {"profile": profile, "workers": workers, "bandwidth": bandwidth,
                                      "compression": compression, "fusion": fusion, "cost": cost,
                                      "algo": algo, "latency": latency, "add_cost": add_cost}, rows)


def register(main_app: typer.Typer) -> None:
    from fabriclab.cli import whatif_reproduce

    whatif_reproduce.register(app)
    main_app.add_typer(app, name="whatif")
