"""`fabriclab simulate`: one collective on a modelled topology, and the preset sweeps.

`collective` builds the topology, places the ranks, simulates the algorithm's schedule (flow-level,
max-min fair sharing) and prints the time, algbw/busbw and the busiest links. `sweep --preset fatness`
runs seed 002's study (see `fabriclab.bench.fatness`).

Try it: `fabriclab simulate collective --algo ring --topology fat-tree --hosts 512 --bisection 1/4 --link 4GB/s --latency 0.2us --size 1GB`.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Optional

import numpy as np
import typer
from rich.table import Table

from fabriclab.cli.common import JsonOption, console, save_record, split_list, user_errors
from fabriclab.collectives.costs import bus_bandwidth_factor
from fabriclab.fabric.links import DEFAULT_LINK
from fabriclab.fabric.placement import place
from fabriclab.fabric.scenario import TopologySpec, build_topology
from fabriclab.sim.collective import simulate
from fabriclab.units import format_size, parse_bandwidth, parse_size

app = typer.Typer(help="Simulate collectives on modelled fabrics (flow-level, max-min sharing).",
                  no_args_is_help=True)


def topology_spec(topology: str, hosts: int, levels: int, hosts_per_leaf: int, bisection: str,
                  leaves_per_pod: Optional[int], link: str, latency: Optional[str], gpus_per_host: int,
                  routing: str, dims: str, seed: int) -> TopologySpec:
    """The CLI's options as one `TopologySpec`; `--link` may be a preset or a bare bandwidth."""
    bandwidth = None
    try:
        parse_bandwidth(link)
        bandwidth, link = link, DEFAULT_LINK
    except ValueError:
        pass
    try:
        dims_t = tuple(int(x) for x in dims.lower().split("x"))
    except ValueError:
        raise ValueError(f"--dims {dims!r}: write dimensions like 4x4 or 8x8x8") from None
    return TopologySpec(kind=topology, hosts=hosts, levels=levels, hosts_per_leaf=hosts_per_leaf,
                        bisection=bisection, leaves_per_pod=leaves_per_pod, link=link,
                        bandwidth=bandwidth, latency=latency, gpus_per_host=gpus_per_host,
                        routing=routing, seed=seed, dims=dims_t)


@app.command("collective")
@user_errors
def collective_cmd(
    algo: str = typer.Option("ring", help="Algorithm spec, e.g. ring, butterfly, cb, ps:servers=8."),
    collective: str = typer.Option("allreduce", help="allreduce, reduce, broadcast, reduce_scatter, allgather."),
    topology: str = typer.Option("fat-tree", help="star, fat-tree, leaf-spine, ring, torus, flattened-butterfly."),
    hosts: int = typer.Option(16, help="Number of hosts."),
    levels: int = typer.Option(2, help="Fat-tree levels (2 or 3)."),
    hosts_per_leaf: int = typer.Option(16, help="Hosts per leaf switch."),
    bisection: str = typer.Option("1", help="Fat-tree bisection ratio: 1, 1/2, 1/4, ..."),
    leaves_per_pod: Optional[int] = typer.Option(None, help="3-level fat trees: leaves per pod."),
    link: str = typer.Option(DEFAULT_LINK, help="Link preset (25GbE, EDR, OPA100, ...) or bandwidth (4GB/s)."),
    latency: Optional[str] = typer.Option(None, help="Per-link latency, e.g. 0.2us (overrides the preset)."),
    gpus_per_host: int = typer.Option(1, help="Ranks per host (they share the host's NIC)."),
    routing: str = typer.Option("dmodk", help="dmodk or ecmp."),
    dims: str = typer.Option("4x4", help="Torus / flattened butterfly dimensions, e.g. 8x8."),
    placement: str = typer.Option("linear", help="linear, round-robin or random."),
    seed: int = typer.Option(0, help="Seed for random placement and ECMP."),
    ranks: Optional[int] = typer.Option(None, help="Number of ranks (default: every endpoint)."),
    size: str = typer.Option("1GB", help="Buffer size, e.g. 64MB, 1GB."),
    itemsize: int = typer.Option(4, help="Bytes per element (4 = float32)."),
    gamma: float = typer.Option(0.0, help="Reduction cost in seconds per byte."),
    engine: str = typer.Option("auto", help="auto, general (every transfer) or levels (fast path)."),
    top: int = typer.Option(5, help="How many of the busiest links to list."),
    ops_csv: Optional[Path] = typer.Option(None, "--ops-csv", help="Write every message's start and "
                                           "finish (general engine) to this CSV."),
    simgrid: Optional[Path] = typer.Option(None, help="Also export the topology as a SimGrid platform "
                                           "XML here (plus a hostfile beside it)."),
    json_path: JsonOption = None,
) -> None:
    """Simulate one collective and print time, algbw, busbw and the busiest links."""
    spec = topology_spec(topology, hosts, levels, hosts_per_leaf, bisection, leaves_per_pod, link,
                         latency, gpus_per_host, routing, dims, seed)
    topo = build_topology(spec)
    num_ranks = topo.num_endpoints if ranks is None else ranks
    if num_ranks < 1:
        raise ValueError(f"--ranks {num_ranks}: give at least 1 rank")
    size_bytes = parse_size(size)
    where = place(num_ranks, topo, placement, seed)
    t0 = time.perf_counter()
    result = simulate(collective, algo, topo, num_ranks, size_bytes, placement=where, itemsize=itemsize,
                      gamma_s_per_byte=gamma, engine=engine)
    wall_s = time.perf_counter() - t0
    algbw = size_bytes / result.time_s if result.time_s > 0 else float("inf")
    busbw = algbw * bus_bandwidth_factor(collective, num_ranks)
    util = result.link_bytes / (topo.bandwidth_Bps * result.time_s) if result.time_s > 0 else \
        np.zeros(topo.num_links)
    busiest = np.argsort(-result.link_bytes, kind="stable")[:max(top, 0)]
    table = Table(title=f"{collective} {algo} on {topo.name}, {num_ranks} ranks, {format_size(size_bytes)}")
    for col in ("time (s)", "algbw (GB/s)", "busbw (GB/s)", "engine", "exact", "wall (s)"):
        table.add_column(col, justify="right")
    table.add_row(f"{result.time_s:.6g}", f"{algbw / 1e9:.3f}", f"{busbw / 1e9:.3f}", result.engine,
                  "yes" if result.exact else "no", f"{wall_s:.2f}")
    console.print(table)
    links = Table(title="busiest links")
    for col in ("link", "bytes", "utilisation"):
        links.add_column(col, justify="right")
    for i in busiest:
        links.add_row(topo.link_name(int(i)), f"{result.link_bytes[i]:.4g}", f"{util[i]:.1%}")
    console.print(links)
    if ops_csv is not None:
        _write_ops(ops_csv, result)
    if simgrid is not None:
        from fabriclab.fabric.simgrid import write_simgrid

        hostfile = simgrid.with_suffix(".hosts")
        write_simgrid(topo, simgrid, hostfile=hostfile)
        console.print(f"SimGrid platform written to {simgrid} (hostfile {hostfile})")
    if not result.exact:
        console.print("note: the level engine could not prove this equals the general engine; "
                      "rerun with --engine general for the exact answer")
    results = {"time_s": result.time_s, "algbw_Bps": algbw, "busbw_Bps": busbw, "engine": result.engine,
               "exact": result.exact, "wall_s": wall_s, "num_ranks": num_ranks,
               "rank_finish_s": result.rank_finish_s.tolist() if num_ranks <= 4096 else None,
               "busiest_links": [{"link": topo.link_name(int(i)), "bytes": float(result.link_bytes[i]),
                                  "utilisation": float(util[i])} for i in busiest]}
    config = {"collective": collective, "algo": algo, "topology": spec.as_dict(), "placement": placement,
              "size_bytes": size_bytes, "itemsize": itemsize, "gamma_s_per_byte": gamma, "engine": engine}
    save_record(json_path, "simulate.collective", config, results)


def _write_ops(path: Path, result) -> None:
    """One row per message: ranks, bytes, start and finish (needs the general engine's detail)."""
    from fabriclab.record import write_csv

    if result.detail is None:
        raise ValueError("--ops-csv needs per-message times: add --engine general")
    d = result.detail
    write_csv(path, [{"src_rank": int(d.transfers.src[i]), "dst_rank": int(d.transfers.dst[i]),
                      "src_step": int(d.transfers.src_step[i]), "dst_step": int(d.transfers.dst_step[i]),
                      "elements": int(d.transfers.elements[i]), "reduce": bool(d.transfers.reduce[i]),
                      "start_s": float(d.transfer_start_s[i]), "finish_s": float(d.transfer_finish_s[i])}
                     for i in range(d.transfers.src.size)])
    console.print(f"{d.transfers.src.size} messages written to {path}")


def register(main_app: typer.Typer) -> None:
    main_app.add_typer(app, name="simulate")



@app.command("sweep")
@user_errors
def sweep_cmd(
    preset: str = typer.Option("fatness", help="The sweep to run: fatness (seed 002)."),
    out: Path = typer.Option(Path("results/fatness"), help="Folder for the CSV, plots and summary."),
    hosts: Optional[str] = typer.Option(None, help="Only these host counts, e.g. 128,256."),
    methods: Optional[str] = typer.Option(None, help="Only these methods, e.g. ring,butterfly-near."),
    json_path: JsonOption = None,
) -> None:
    """Run a preset sweep; finished points are kept, so a rerun resumes an interrupted one."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from fabriclab.bench import fatness
    from fabriclab.report.fatness import plot_figures, summary

    if preset != "fatness":
        raise ValueError(f"unknown preset {preset!r}: use fatness")
    points = fatness.fatness_points()
    if hosts:
        wanted = {int(h) for h in split_list(hosts, "host counts")}
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
    t0 = time.perf_counter()
    skipped = 0
    with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                  TimeElapsedColumn(), console=console) as bar:
        task = bar.add_task("fatness", total=len(points))

        def tick(point, was_done):
            nonlocal skipped
            skipped += was_done
            bar.update(task, advance=1, description=f"{point.layers}L {point.hosts} {point.bisection} "
                                                    f"{point.method}")
        for _ in fatness.run_points(points, csv_path, tick):
            pass
    rows = fatness.load_rows(csv_path)
    figures = plot_figures(rows, out)
    text = summary(rows)
    (out / "summary.md").write_text(text)
    console.print(text, markup=False)
    console.print(f"{len(points)} points ({skipped} already done) in {time.perf_counter() - t0:.1f} s; "
                  f"CSV {csv_path}; figures: {', '.join(str(f) for f in figures) or 'none (points missing)'}")
    save_record(json_path, "simulate.sweep", {"preset": preset, "out": str(out), "hosts": hosts,
                                              "methods": methods}, rows)
