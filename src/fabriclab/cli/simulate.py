"""`fabriclab simulate`: one collective on a modelled topology, a cluster's nccl-tests table, preset sweeps.

`collective` builds the topology (the shared options of `cli/options.py`; default: a 2-level fat tree
of 8 hosts), places the ranks, simulates the algorithm's schedule (flow-level, max-min fair sharing)
and prints the time, algbw/busbw and the busiest links. With `--cluster FILE --gpus N --sizes RANGE` it
predicts a whole size sweep on a cluster model instead (`--format nccl-tests` prints it as nccl-tests
would). `sweep --preset fatness` runs the fat-tree study of Zhang, Li, Tanimura, Nakada, "How Much
Should We Invest for Network Facility" (see `fabriclab.bench.fatness`).

Try it: `fabriclab simulate collective --algo ring --topology fat-tree --hosts 2048 --bisection 1/4
--link 4GB/s --latency 0.2us --size 1GB`.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Annotated, Optional

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
    DimsOption,
    EcmpSeedOption,
    GpusPerServerOption,
    HostsOption,
    HostsPerLeafOption,
    LatencyOption,
    LeavesPerPodOption,
    LevelsOption,
    LinkOption,
    RoutingOption,
    SpinesOption,
    TopologyOption,
    parse_count,
    parse_number,
    topology_spec_from,
)

app = typer.Typer(help="Simulate collectives on modelled fabrics (flow-level, max-min sharing).",
                  no_args_is_help=True, rich_markup_mode=None)

NCCL_TESTS = "nccl-tests"
SimFormatOption = Annotated[Optional[str], typer.Option(
    "--format", metavar="FORMAT",
    help="Output format: table|plain|csv|json|markdown, or nccl-tests with --cluster (default: table on a "
         "terminal, plain otherwise; numbers are never cut).")]


def _cluster_prediction(cluster: Path, gpus: Optional[str], sizes: Optional[str], collective: str,
                        fmt: Optional[str], json_path: Optional[Path], store: Optional[Path]) -> None:
    """`--cluster FILE`: the cluster model's predicted size sweep (`cli/simulate_cluster.py`)."""
    from fabriclab.units import parse_size_range

    out = Output(None if fmt == NCCL_TESTS else fmt, json_path, store)
    if not cluster.is_file():
        raise ValueError(f"--cluster {cluster}: no such file; give a cluster file (`fabriclab calibrate` "
                         f"writes one)")
    num_gpus = parse_count(gpus if gpus is not None else "8", "--gpus", maximum=1 << 20)
    size_list = parse_size_range(sizes if sizes is not None else "8B:1GB")
    try:
        from fabriclab.cli.simulate_cluster import run_cluster_prediction
    except ModuleNotFoundError as exc:
        if exc.name != "fabriclab.cli.simulate_cluster":
            raise
        raise ValueError("--cluster needs the cluster model (fabriclab.cli.simulate_cluster), which this "
                         "installation does not have yet; simulate a topology without --cluster") from None
    record = run_cluster_prediction(cluster, num_gpus, size_list, collective, fmt or out.fmt, out)
    out.record("simulate.cluster", record["config"], record["results"])


@app.command("collective")
@user_errors
def collective_cmd(
    algo: str = typer.Option("ring", help="Algorithm spec, e.g. ring, butterfly, cb, ps:servers=8."),
    collective: str = typer.Option("allreduce", help="allreduce, reduce, broadcast, reduce_scatter, allgather."),
    topology: TopologyOption = "fat-tree",
    hosts: HostsOption = None,
    levels: LevelsOption = "2",
    hosts_per_leaf: HostsPerLeafOption = None,
    bisection: BisectionOption = "1",
    leaves_per_pod: LeavesPerPodOption = None,
    spines: SpinesOption = "4",
    dims: DimsOption = None,
    link: LinkOption = "4GB/s",
    latency: LatencyOption = None,
    gpus_per_server: GpusPerServerOption = "1",
    routing: RoutingOption = "dmodk",
    seed: EcmpSeedOption = "0",
    placement: str = typer.Option("linear", help="linear, round-robin or random."),
    ranks: Optional[str] = typer.Option(None, metavar="N", help="Number of ranks (default: every endpoint)."),
    size: str = typer.Option("1GB", help="Buffer size, e.g. 64MB, 1GB (binary units)."),
    itemsize: str = typer.Option("4", metavar="BYTES", help="Bytes per element (4 = float32)."),
    gamma: str = typer.Option("0", metavar="S_PER_BYTE", help="Reduction cost in seconds per byte (>= 0)."),
    engine: str = typer.Option("auto", help="auto, general (every transfer) or levels (fast path)."),
    top: str = typer.Option("5", metavar="N", help="How many of the busiest links to list."),
    ops_csv: Optional[Path] = typer.Option(None, "--ops-csv", help="Write every message's "
                                           "start and finish to this CSV (uses the general engine)."),
    simgrid: Optional[Path] = typer.Option(None, help="Also export the topology as a SimGrid "
                                           "platform XML here (plus a hostfile beside it)."),
    cluster: Optional[Path] = typer.Option(None, "--cluster", metavar="FILE",
                                           help="Predict on this cluster model (with --gpus, --sizes) instead "
                                                "of a topology."),
    gpus: Optional[str] = typer.Option(None, metavar="N", help="With --cluster: GPUs taking part (default 8)."),
    sizes: Optional[str] = typer.Option(None, metavar="RANGE", help="With --cluster: sizes, e.g. 8B:1GB "
                                                                    "(default) or 1MB,64MB."),
    fmt: SimFormatOption = None,
    json_path: JsonOption = None,
    store: StoreOption = None,
) -> None:
    """Simulate one collective and print time, algbw, busbw and the busiest links."""
    if cluster is not None:
        return _cluster_prediction(cluster, gpus, sizes, collective, fmt, json_path, store)
    if fmt == NCCL_TESTS:
        raise ValueError("--format nccl-tests prints a cluster's size sweep: add --cluster FILE (and --gpus, "
                         "--sizes), or use table, plain, csv, json or markdown")
    if gpus is not None or sizes is not None:
        raise ValueError("--gpus and --sizes go with --cluster FILE; for a topology give --ranks and --size")
    from fabriclab.units import format_size, parse_size

    out = Output(fmt, json_path, store)
    check_output_path(ops_csv, "--ops-csv")
    check_output_path(simgrid, "--simgrid")
    if ops_csv is not None and engine == "levels":
        raise ValueError("--ops-csv needs per-message times from the general engine: drop --engine levels")
    spec = topology_spec_from(topology=topology, hosts=hosts, levels=levels, hosts_per_leaf=hosts_per_leaf,
                              bisection=bisection, leaves_per_pod=leaves_per_pod, spines=spines, dims=dims,
                              link=link, latency=latency, gpus_per_server=gpus_per_server, routing=routing,
                              seed=seed)
    size_bytes = parse_size(size)
    item = parse_count(itemsize, "--itemsize", maximum=64)
    gamma_s = parse_number(gamma, "--gamma", example="0 or 1e-10")
    num_top = parse_count(top, "--top", minimum=0, maximum=10_000)
    num_ranks = None if ranks is None else parse_count(ranks, "--ranks")
    endpoints = spec.num_hosts * spec.gpus_per_server
    if num_ranks is not None and num_ranks > endpoints:
        raise ValueError(f"--ranks {num_ranks}: the topology has {endpoints} endpoints; give at most that, or "
                         f"more --hosts")
    num_ranks = endpoints if num_ranks is None else num_ranks
    from fabriclab.sim.limits import check_inputs, check_simulation

    check_inputs(size_bytes, item, gamma_s)
    check_simulation(collective, algo, num_ranks, size_bytes // item,
                     "general" if ops_csv is not None else engine)

    from fabriclab.collectives.costs import bus_bandwidth_factor
    from fabriclab.fabric.placement import place
    from fabriclab.fabric.scenario import build_topology
    from fabriclab.sim.collective import simulate

    topo = build_topology(spec)
    where = place(num_ranks, topo, placement, spec.seed)
    t0 = time.perf_counter()
    result = simulate(collective, algo, topo, num_ranks, size_bytes, placement=where, itemsize=item,
                      gamma_s_per_byte=gamma_s, engine="general" if ops_csv is not None else engine)
    wall_s = time.perf_counter() - t0
    algbw = size_bytes / result.time_s if result.time_s > 0 else None
    busbw = algbw * bus_bandwidth_factor(collective, num_ranks) if algbw is not None else None
    busy_s = topo.bandwidth_Bps * result.time_s
    util = result.link_bytes / busy_s if result.time_s > 0 else result.link_bytes * 0.0
    busiest = _busiest(result.link_bytes, num_top)
    table = Table(title=f"{collective} {algo} on {topo.name}, {num_ranks} ranks, {format_size(size_bytes)}")
    for col in ("time (s)", "algbw (GB/s)", "busbw (GB/s)", "engine", "exact", "wall (s)"):
        table.add_column(col, justify="right")
    table.add_row(f"{result.time_s:.6g}", "-" if algbw is None else f"{algbw / 1e9:.3f}",
                  "-" if busbw is None else f"{busbw / 1e9:.3f}", result.engine,
                  "yes" if result.exact else "no", f"{wall_s:.2f}")
    out.table(table)
    if num_top:
        links = Table(title="busiest links")
        for col in ("link", "bytes", "utilisation"):
            links.add_column(col, justify="right")
        for i in busiest:
            links.add_row(topo.link_name(int(i)), f"{result.link_bytes[i]:.4g}", f"{util[i]:.1%}")
        out.table(links)
    if ops_csv is not None:
        out.note(f"{_write_ops(ops_csv, result)} messages written to {ops_csv}")
    if simgrid is not None:
        from fabriclab.fabric.simgrid import write_simgrid

        hostfile = simgrid.with_suffix(".hosts")
        write_simgrid(topo, simgrid, hostfile=hostfile)
        out.note(f"SimGrid platform written to {simgrid} (hostfile {hostfile})")
    if not result.exact:
        out.note("note: the level engine could not prove this equals the general engine; "
                 "rerun with --engine general for the exact answer")
    results = {"time_s": result.time_s, "algbw_Bps": algbw, "busbw_Bps": busbw, "engine": result.engine,
               "exact": result.exact, "wall_s": wall_s, "num_ranks": num_ranks,
               "rank_finish_s": result.rank_finish_s.tolist() if num_ranks <= 4096 else None,
               "busiest_links": [{"link": topo.link_name(int(i)), "bytes": float(result.link_bytes[i]),
                                  "utilisation": float(util[i])} for i in busiest]}
    config = {"collective": collective, "algo": algo, "topology": spec.as_dict(), "placement": placement,
              "size_bytes": size_bytes, "itemsize": item, "gamma_s_per_byte": gamma_s, "engine": engine}
    out.record("simulate.collective", config, results)


def _busiest(link_bytes, top: int):
    """Indices of the `top` busiest links, busiest first (ties: lowest id), without sorting them all."""
    import numpy as np

    if top >= link_bytes.size:
        return np.argsort(-link_bytes, kind="stable")
    cut = np.argpartition(-link_bytes, top - 1)[:top] if top else np.zeros(0, dtype=np.int64)
    threshold = link_bytes[cut].min(initial=np.inf)
    candidates = np.flatnonzero(link_bytes >= threshold)
    return candidates[np.argsort(-link_bytes[candidates], kind="stable")][:top]


def _write_ops(path: Path, result) -> int:
    """One row per message: ranks, bytes, start and finish (the general engine's detail)."""
    from fabriclab.record import write_csv

    d = result.detail
    if d is None:
        raise ValueError("--ops-csv needs per-message times: add --engine general")
    write_csv(path, [{"src_rank": int(d.transfers.src[i]), "dst_rank": int(d.transfers.dst[i]),
                      "src_step": int(d.transfers.src_step[i]), "dst_step": int(d.transfers.dst_step[i]),
                      "elements": int(d.transfers.elements[i]), "reduce": bool(d.transfers.reduce[i]),
                      "start_s": float(d.transfer_start_s[i]), "finish_s": float(d.transfer_finish_s[i])}
                     for i in range(d.transfers.src.size)])
    return int(d.transfers.src.size)


@app.command("sweep")
@user_errors
def sweep_cmd(
    preset: str = typer.Option("fatness", help="The sweep to run: fatness (fat trees of Zhang, Li, Tanimura, "
                                               "Nakada)."),
    out: Path = typer.Option(Path("results/fatness"), help="Folder for the CSV, plots and summary."),
    hosts: Optional[str] = typer.Option(None, help="Only these host counts, e.g. 128,256."),
    methods: Optional[str] = typer.Option(None, help="Only these methods, e.g. ring,butterfly-near."),
    fmt: FormatOption = None,
    json_path: JsonOption = None,
    store: StoreOption = None,
) -> None:
    """Run a preset sweep; finished points are kept, so a rerun resumes an interrupted one."""
    from fabriclab.bench import fatness
    from fabriclab.units import parse_int_list

    output = Output(fmt, json_path, store)
    check_output_dir(out)
    if preset != "fatness":
        raise ValueError(f"unknown preset {preset!r}: use fatness")
    points = fatness.fatness_points()
    if hosts:
        wanted = set(parse_int_list(hosts, minimum=1, what="host counts"))
        unknown = wanted - {p.hosts for p in points}
        if unknown:
            raise ValueError(f"--hosts {sorted(unknown)} not in the preset: use some of 128, 256, 512, 1024, 2048")
        points = [p for p in points if p.hosts in wanted]
    if methods:
        chosen = set(split_list(methods, "methods"))
        if chosen - set(fatness.METHODS):
            raise ValueError(f"--methods {sorted(chosen - set(fatness.METHODS))} unknown: use "
                             f"{', '.join(fatness.METHODS)}")
        points = [p for p in points if p.method in chosen]
    csv_path = out / "fatness.csv"
    for line in fatness.repair_csv(csv_path):
        output.note(line)
    t0 = time.perf_counter()
    skipped = 0
    for i, (point, row) in enumerate(fatness.run_points_progress(points, csv_path), 1):
        skipped += row is None
        if row is not None:
            output.note(f"[{i}/{len(points)}] {point.layers}L {point.hosts} hosts, bisection {point.bisection}, "
                        f"{point.link_GBps:g} GB/s, {point.latency_us:g} us, {point.method}")
    from fabriclab.report.fatness import plot_figures, summary

    rows = fatness.load_rows(csv_path)
    figures = plot_figures(rows, out)
    text = summary(rows)
    (out / "summary.md").write_text(text)
    output.note(text)
    output.note(f"{len(points)} points ({skipped} already done) in {time.perf_counter() - t0:.1f} s; "
                f"CSV {csv_path}; figures: {', '.join(str(f) for f in figures) or 'none (points missing)'}")
    output.record("simulate.sweep", {"preset": preset, "out": str(out), "hosts": hosts, "methods": methods},
                  rows)


def register(main_app: typer.Typer) -> None:
    main_app.add_typer(app, name="simulate")
