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
import textwrap
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
    TOPOLOGY,
    ClusterOption,
    TopologyOption,
    load_cluster_option,
    parse_number,
)
from fabriclab.cli.nic_options import NicOption

from fabriclab.cli.points_options import ProcessesOption, ResumeOption, SchedulerOption, point_runner

app = typer.Typer(help="What-if: scaling factor from a profile, a fusion policy and a collective cost.",
                  invoke_without_command=True, rich_markup_mode=None)

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
    """Compression ratios: finite numbers > 0 (1 = none); every bad item gets the same message."""
    values = []
    for item in split_list(text, "compression ratios"):
        try:
            value = float(item)
        except ValueError:
            value = math.nan
        if not (math.isfinite(value) and value > 0):
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


def whatif_request(o: dict):
    """The `WhatifRequest` of the parsed command line `o` (the whatif callback's parameters)."""
    from fabriclab.sim.limits import check_gamma
    from fabriclab.units import check_link_latency, parse_int_list, parse_time
    from fabriclab.whatif.fusion import FusionPolicy
    from fabriclab.whatif.run import WhatifRequest
    from fabriclab.workload.profile import load_profile

    workers = tuple(parse_int_list(o["workers"], minimum=1, what="workers"))
    policy = FusionPolicy(name=o["fusion"])
    policy.buckets([1], [0.0])  # an unknown policy fails here, before the work
    it_s = parse_time(o["iteration_time"]) if o["iteration_time"] else None
    gamma = o["gamma"]
    simulated = o["cost"] == "simulated"
    return WhatifRequest(
        profiles=tuple(load_profile(p, iteration_s=it_s) for p in split_list(o["profile"], "profiles")),
        workers=workers, fusion=policy, cost=o["cost"], algos=tuple(split_list(o["algo"], "algorithms")),
        bandwidths_Bps=None if o["bandwidth"] is None else tuple(parse_bandwidth_list(o["bandwidth"])),
        compression=tuple(parse_compression(o["compression"])), add_cost=add_cost_of(o["add_cost"]),
        latency_s=check_link_latency(parse_time(o["latency"]), "--latency", o["latency"]),
        gamma_s_per_byte=None if gamma is None else check_gamma(parse_number(gamma, "--gamma"), "--gamma"),
        compress_add=o["compress_add"], auto_leaf=o["hosts_per_leaf"] is None,
        topology=TOPOLOGY.build(o, hosts=str(workers[0])) if simulated else None,
        cluster=_cluster(o))


def _cluster(o: dict):
    """The --cluster, with its NICs swapped for --nic when given."""
    from fabriclab.cli.nic_options import swap_nic

    cluster = None if o["cluster"] is None else load_cluster_option(o["cluster"])
    return cluster if o["nic"] is None else swap_nic(cluster, o["nic"], o["cluster"])


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
    cluster: ClusterOption = None, nic: NicOption = None,
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
    scheduler: SchedulerOption = None, processes: ProcessesOption = None, resume: ResumeOption = False,
    fmt: FormatOption = None,
    json_path: JsonOption = None,
    store: StoreOption = None,
) -> None:
    """Scaling factor per (model, bandwidth, workers, compression) point."""
    if ctx.invoked_subcommand is not None:
        return
    from fabriclab.whatif.run import run_whatif

    out = Output(fmt, json_path, store)
    check_output_path(csv_path, "--csv")
    check_output_dir(plots, "--plots")
    request = whatif_request(locals())
    t0 = time.perf_counter()
    with point_runner(scheduler, processes, resume, store, "what-if points") as runner:
        answer = run_whatif(request, run_points=runner)
    wall = time.perf_counter() - t0
    _print_whatif(out, answer, request, wall, csv_path, plots)
    algo = ",".join(answer.algos) if answer.cost == "cluster" else algo
    out.record("whatif", {"profile": profile, "workers": workers, "bandwidth": bandwidth,
                          "compression": compression, "fusion": request.fusion.name, "cost": answer.cost, "algo": algo,
                          "latency_s": request.latency_s, "gamma_s_per_byte": request.gamma_s_per_byte,
                          "add_cost": add_cost,
                          "topology": request.topology.as_dict() if request.topology is not None else None,
                          "cluster": str(cluster) if cluster is not None else None, "nic": nic,
                          "compute": list(answer.compute)}, answer.rows)


def _print_whatif(out, answer, request, wall: float, csv_path, plots) -> None:
    closed = answer.cost == "ring-addest"
    algo = ",".join(answer.algos)
    table = Table(title=f"what-if: fusion {request.fusion.name}, cost {answer.cost}" + ("" if closed else f" ({algo})"))
    for col in ("model", "workers", "Gbps", "compr.", "algo", "iteration (ms)", "overhead (ms)",
                "exposed", "buckets", "scaling factor", *(("range",) if answer.ranged else ())):
        table.add_column(col, justify="right")
    for r in answer.rows:
        table.add_row(r["model"], str(r["workers"]), f"{r['bandwidth_Gbps']:g}", f"{r['compression']:g}",
                      "-" if closed else r["algo"], f"{r['iteration_s'] * 1e3:.2f}",
                      f"{r['overhead_s'] * 1e3:.2f}", f"{r['exposed_fraction']:.0%}", str(r["num_buckets"]),
                      f"{r['scaling_factor']:.4f}", *((_range_text(r),) if answer.ranged else ()))
    out.table(table)
    c = request.cluster
    if c is not None:
        out.note(f"cluster {c.name}: {c.server.gpus_per_server} GPUs and {c.server.nics_per_server} NICs per "
                 f"server; Gbps is one NIC's line rate")
        out.note(f"cluster: {c.description}")
    for label in answer.compute:
        out.note(textwrap.fill(f"compute: {label}", width=80, subsequent_indent="  ", break_long_words=False,
                               break_on_hyphens=False))
    if c is not None:
        out.note("range: the scaling factor with the cluster's parameters that no log determined at either end "
                 "of their band (`simulate collective --cluster` names them per size); `fitted`: none matters")
    out.note(f"{len(answer.rows)} points in {wall:.3f} s")
    if csv_path:
        from fabriclab.record import write_csv

        write_csv(csv_path, answer.rows)
        out.note(f"CSV: {csv_path}")
    if plots:
        from fabriclab.report.whatif import plot_whatif

        for path in plot_whatif(answer.rows, plots):
            out.note(f"plot: {path}")


def _range_text(r: dict) -> str:
    if abs(r["scaling_high"] - r["scaling_low"]) < 5e-5:
        return "fitted"
    return f"{r['scaling_low']:.4f}-{r['scaling_high']:.4f}"


def register(main_app: typer.Typer) -> None:
    from fabriclab.cli.whatif import llm as whatif_llm, reproduce as whatif_reproduce

    whatif_reproduce.register(app)
    whatif_llm.register(app)
    main_app.add_typer(app, name="whatif")
