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

import sys
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
    TOPOLOGY,
    ClusterOption,
    TopologyOption,
    load_cluster_option,
    parse_count,
    parse_number,
)
from fabriclab.cli.routing_options import (
    BusyOption,
    QpsOption,
    SeedsOption,
    TransportOption,
    parse_seeds,
    routed_cluster,
    routing_ignored,
)
from fabriclab.cli.ignored import given, warn_ignored
from fabriclab.cli.points_options import ProcessesOption, ResumeOption, SchedulerOption, point_runner

app = typer.Typer(help="Simulate collectives on modelled fabrics (flow-level, max-min sharing).",
                  no_args_is_help=True, rich_markup_mode=None)

NCCL_TESTS = "nccl-tests"
SimFormatOption = Annotated[Optional[str], typer.Option(
    "--format", metavar="FORMAT",
    help="Output format: table|plain|csv|json|markdown, or nccl-tests with --cluster (default: table on a "
         "terminal, plain otherwise; numbers are never cut).")]


SizesOption = Annotated[Optional[str], typer.Option(
    metavar="RANGE", help="With --cluster: sizes, e.g. 8B:1GB (default) or 1MB,64MB.")]
ServersOption = Annotated[Optional[str], typer.Option(
    metavar="N", help="With --cluster: servers the GPUs spread over evenly (default: whole servers); fewer per "
                      "server than it holds run on their own NICs (mpirun -N).")]


def _cluster_prediction(o: dict, out: Output) -> None:
    """`--cluster FILE|PRESET`: the cluster's library model predicts a whole size sweep (`nccl/sweep.py`)."""
    from dataclasses import replace

    from fabriclab.nccl.layout import on_servers
    from fabriclab.nccl.predict import choice_notes
    from fabriclab.nccl.sweep import band_notes, switches
    from fabriclab.units import parse_size_range

    cluster = load_cluster_option(o["cluster"])
    num_gpus = parse_count(o["gpus"] if o["gpus"] is not None else "8", "--gpus", maximum=1 << 20)
    if o["servers"] is not None:  # a run on part of each server: servers of its GPUs, with their NICs
        servers = parse_count(o["servers"], "--servers", maximum=num_gpus)
        try:
            cluster = on_servers(cluster, num_gpus, servers)
        except ValueError as exc:
            raise ValueError(f"--gpus {num_gpus} --servers {servers}: {exc}") from None
    sizes = parse_size_range(o["sizes"] if o["sizes"] is not None else "8B:1GB")
    placement = None if o["placement"] == "linear" else o["placement"]
    cluster = routed_cluster(cluster, o["routing"], o["qps"], o["transport"], placement, o["busy"])
    if o["seed"] != "0":  # --seed: the first draw of the hashes and servers
        cluster = replace(cluster, network=replace(cluster.network, routing_seed=parse_count(o["seed"], "--seed",
                                                                                              minimum=0)))
    warn_ignored([*_cluster_ignored(o, cluster), *routing_ignored(cluster, o["qps"], o["seeds"])])
    sweep = seeded_sweep(cluster, num_gpus, sizes, o["collective"], parse_seeds(o["seeds"]))
    if o["fmt"] == NCCL_TESTS:
        stream = sys.stderr if out.machine_stdout else sys.stdout
        stream.write(sweep.nccl_tests_text())
        stream.flush()
    else:
        out.table(_sweep_table(sweep.rows, f"predicted {sweep.collective} on {sweep.where}"))
        out.note(f"algorithm/protocol (NCCL's choice): {switches(sweep.rows)}")
        for line in [*choice_notes(cluster, num_gpus, sizes, o["collective"]), *band_notes(sweep.rows, cluster)]:
            out.note(line)
    lay = sweep.layout
    config = {"cluster": o["cluster"], "cluster_name": cluster.name, "num_gpus": num_gpus,
              "num_servers": lay.num_servers, "collective": o["collective"], "sizes_bytes": list(sizes),
              "network": cluster.network.fabric, "routing": cluster.network.routing,
              "qps_per_connection": cluster.network.qps_per_connection, "transport": cluster.network.transport,
              "seeds": parse_seeds(o["seeds"])}
    out.record("simulate.cluster", config, sweep.rows)


# The options of a topology's flow simulation that a --cluster prediction does not read, and why.
TOPOLOGY_ONLY = {
    "algo": "the cluster's library picks the algorithm and protocol per size (NCCL's choice)",
    **dict.fromkeys(("topology", "hosts", "levels", "hosts_per_leaf", "bisection", "leaves_per_pod", "spines", "dims",
                     "link", "latency", "gpus_per_server"), "the cluster file gives the servers and the network"),
    **dict.fromkeys(("ranks", "size", "itemsize"), "--gpus and --sizes say what runs"),
    **dict.fromkeys(("gamma", "engine", "top", "ops_csv", "simgrid"), "it is for a topology's flow simulation"),
}


def _cluster_ignored(o: dict, cluster) -> list:
    """The rules (`cli/ignored.py`) of the options `--cluster` leaves unread, and of `--seed` where nothing is
    drawn; an option counts as given when its value is not `collective_cmd`'s default."""
    import inspect

    defaults = {name: getattr(p.default, "default", p.default)
                for name, p in inspect.signature(collective_cmd).parameters.items()}
    n = cluster.network
    return [*((given(o[name], defaults[name]), f"--{name.replace('_', '-')}", f"with --cluster: {why}; drop it")
              for name, why in TOPOLOGY_ONLY.items()),
            (given(o["seed"], "0") and n.routing != "ecmp" and n.placement != "scattered", "--seed",
             f"with routing {n.routing} and placement {n.placement}: nothing is drawn; add --routing ecmp or "
             f"drop it")]


def seeded_sweep(cluster, num_gpus: int, sizes: list[int], collective: str, seeds: int):
    """The sweep; with ECMP over `seeds` draws: every row's time the median, `time_us_p90` beside it."""
    from dataclasses import replace

    from fabriclab.nccl.routing import draws, median_p90
    from fabriclab.nccl.sweep import predict_sweep

    sweeps = [predict_sweep(c, num_gpus, sizes, collective) for c in draws(cluster, seeds)]
    if len(sweeps) == 1 and cluster.network.routing != "ecmp" and cluster.network.placement != "scattered":
        return sweeps[0]
    times = [[r["time_us"] for r in s.rows] for s in sweeps]
    median, p90 = median_p90(times)
    rows = []
    for row, mid, high in zip(sweeps[0].rows, median, p90):
        scale = row["time_us"] / mid  # the first draw's rates, moved to the median time
        rows.append({**row, "time_us": float(mid), "time_us_p90": float(high),
                     **{k: row[k] * scale for k in ("algbw_GBps", "busbw_GBps", "inplace_algbw_GBps",
                                                     "inplace_busbw_GBps", "busbw_low_GBps", "busbw_high_GBps")},
                     "inplace_time_us": row["inplace_time_us"] / scale})
    return replace(sweeps[0], rows=rows)


def _sweep_table(rows: list[dict], title: str) -> Table:
    from fabriclab.units import format_size

    table = Table(title=title)
    p90 = "time_us_p90" in rows[0] if rows else False
    cols = ("size", "algorithm", "time (us)", *(("p90 (us)",) if p90 else ()), "algbw (GB/s)", "busbw (GB/s)",
            "busbw range", "in-place busbw")
    for col in cols:
        table.add_column(col, justify="left" if col == "algorithm" else "right")
    for r in rows:
        span = f"{r['busbw_low_GBps']:.2f}-{r['busbw_high_GBps']:.2f}" if r["prior_parameters"] else "fitted"
        high = (f"{r['time_us_p90']:.2f}",) if p90 else ()
        table.add_row(format_size(r["size_bytes"]), r["algorithm"], f"{r['time_us']:.2f}", *high,
                      f"{r['algbw_GBps']:.2f}", f"{r['busbw_GBps']:.2f}", span, f"{r['inplace_busbw_GBps']:.2f}")
    return table


def collective_request(o: dict):
    """The `CollectiveRequest` of the parsed command line `o` (collective_cmd's parameters)."""
    from fabriclab.sim.limits import check_gamma
    from fabriclab.sim.one_collective import CollectiveRequest
    from fabriclab.units import parse_size

    if o["fmt"] == NCCL_TESTS:
        raise ValueError("--format nccl-tests prints a cluster's size sweep: add --cluster FILE (and --gpus, "
                         "--sizes), or use table, plain, csv, json or markdown")
    if o["gpus"] is not None or o["sizes"] is not None or o["servers"] is not None:
        raise ValueError("--gpus, --servers and --sizes go with --cluster FILE; for a topology give --ranks and "
                         "--size")
    if o["ops_csv"] is not None and o["engine"] == "levels":
        raise ValueError("--ops-csv needs per-message times from the general engine: drop --engine levels")
    if o["qps"] is not None or o["transport"] is not None or o["busy"] is not None or parse_seeds(o["seeds"]) > 1:
        raise ValueError("--qps, --transport, --busy and --seeds go with --cluster FILE|PRESET; a topology takes "
                         "--routing dmodk|ecmp and --seed")
    routing = "dmodk" if o["routing"] in (None, "ideal") else o["routing"]
    spec = TOPOLOGY.build(o, routing=routing)
    return CollectiveRequest(
        collective=o["collective"], algo=o["algo"], topology=spec, size_bytes=parse_size(o["size"]),
        itemsize=parse_count(o["itemsize"], "--itemsize", maximum=64),
        gamma_s_per_byte=check_gamma(parse_number(o["gamma"], "--gamma", example="0 or 1e-10"), "--gamma"),
        top=parse_count(o["top"], "--top", minimum=0, maximum=10_000),
        num_ranks=None if o["ranks"] is None else parse_count(o["ranks"], "--ranks"), placement=o["placement"],
        engine="general" if o["ops_csv"] is not None else o["engine"])


SimRoutingOption = Annotated[Optional[str], typer.Option(
    "--routing", metavar="NAME", help="A topology's fat tree: dmodk (default) or ecmp; with --cluster: ideal, ecmp "
                                      "or adaptive (default: the cluster's network.routing).")]


@app.command("collective")
@user_errors
def collective_cmd(
    algo: str = typer.Option("ring", help="Algorithm spec, e.g. ring, butterfly, cb, ps:servers=8."),
    collective: str = typer.Option("allreduce", help="allreduce, reduce, broadcast, reduce_scatter, allgather; with --cluster also alltoall, sendrecv."),
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
    routing: SimRoutingOption = None,
    seed: EcmpSeedOption = "0",
    qps: QpsOption = None, transport: TransportOption = None, seeds: SeedsOption = "1", busy: BusyOption = None,
    placement: str = typer.Option("linear", help="linear, round-robin, random; --cluster: packed, scattered."),
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
    cluster: ClusterOption = None,
    gpus: Optional[str] = typer.Option(None, metavar="N", help="With --cluster: GPUs taking part (default 8)."),
    servers: ServersOption = None,
    sizes: SizesOption = None,
    fmt: SimFormatOption = None,
    json_path: JsonOption = None,
    store: StoreOption = None,
) -> None:
    """Simulate one collective (time, algbw, busbw, busiest links); --cluster: its library's size sweep."""
    out = Output(None if fmt == NCCL_TESTS else fmt, json_path, store)
    if cluster is not None:  # the library of the cluster picks the algorithm per size; else --algo runs
        return _cluster_prediction(locals(), out)
    from fabriclab.sim.one_collective import run_collective

    check_output_path(ops_csv, "--ops-csv")
    check_output_path(simgrid, "--simgrid")
    answer = run_collective(collective_request(locals()))
    _print_collective(out, answer)
    _write_extras(out, answer, ops_csv, simgrid)
    _record_collective(out, answer, engine)


def _write_extras(out: Output, answer, ops_csv: Path | None, simgrid: Path | None) -> None:
    """`--ops-csv` (every message's start and finish) and `--simgrid` (the platform and its hostfile)."""
    if ops_csv is not None:
        from fabriclab.record import write_csv
        from fabriclab.sim.one_collective import message_rows

        rows = message_rows(answer.result)
        write_csv(ops_csv, rows)
        out.note(f"{len(rows)} messages written to {ops_csv}")
    if simgrid is not None:
        from fabriclab.fabric.simgrid import write_simgrid

        write_simgrid(answer.topology, simgrid, hostfile=simgrid.with_suffix(".hosts"))
        out.note(f"SimGrid platform written to {simgrid} (hostfile {simgrid.with_suffix('.hosts')})")


def _print_collective(out: Output, a) -> None:
    from fabriclab.units import format_size

    r, req = a.result, a.request
    table = Table(title=f"{req.collective} {req.algo} on {a.topology.name}, {a.num_ranks} ranks, "
                        f"{format_size(req.size_bytes)}")
    for col in ("time (s)", "algbw (GB/s)", "busbw (GB/s)", "engine", "exact", "wall (s)"):
        table.add_column(col, justify="right")
    table.add_row(f"{r.time_s:.6g}", "-" if a.algbw_Bps is None else f"{a.algbw_Bps / 1e9:.3f}",
                  "-" if a.busbw_Bps is None else f"{a.busbw_Bps / 1e9:.3f}", r.engine,
                  "yes" if r.exact else "no", f"{a.wall_s:.2f}")
    out.table(table)
    if req.top:
        links = Table(title="busiest links")
        for col in ("link", "bytes", "utilisation"):
            links.add_column(col, justify="right")
        for row in a.busiest_links():
            links.add_row(row["link"], f"{row['bytes']:.4g}", f"{row['utilisation']:.1%}")
        out.table(links)
    if not r.exact:
        out.note("note: the level engine could not prove this equals the general engine; "
                 "rerun with --engine general for the exact answer")


def _record_collective(out: Output, a, engine: str) -> None:
    r, req = a.result, a.request
    results = {"time_s": r.time_s, "algbw_Bps": a.algbw_Bps, "busbw_Bps": a.busbw_Bps, "engine": r.engine,
               "exact": r.exact, "wall_s": a.wall_s, "num_ranks": a.num_ranks,
               "rank_finish_s": r.rank_finish_s.tolist() if a.num_ranks <= 4096 else None,
               "busiest_links": a.busiest_links()}
    config = {"collective": req.collective, "algo": req.algo, "topology": req.topology.as_dict(),
              "placement": req.placement, "size_bytes": req.size_bytes, "itemsize": req.itemsize,
              "gamma_s_per_byte": req.gamma_s_per_byte, "engine": engine}
    out.record("simulate.collective", config, results)


@app.command("sweep")
@user_errors
def sweep_cmd(
    preset: str = typer.Option("fatness", help="The sweep to run: fatness (fat trees of Zhang, Li, Tanimura, "
                                               "Nakada)."),
    out: Path = typer.Option(Path("results/fatness"), help="Folder for the CSV, plots and summary."),
    hosts: Optional[str] = typer.Option(None, help="Only these host counts, e.g. 128,256."),
    methods: Optional[str] = typer.Option(None, help="Only these methods, e.g. ring,butterfly-near."),
    scheduler: SchedulerOption = None, processes: ProcessesOption = None, resume: ResumeOption = False,
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
    with point_runner(scheduler, processes, resume, store, "sweep points") as runner:
        skipped = _run_fatness(runner, points, csv_path)
    from fabriclab.report.fatness import plot_figures, summary

    rows = fatness.in_point_order(fatness.load_rows(csv_path), fatness.fatness_points())
    figures = plot_figures(rows, out)
    text = summary(rows)
    (out / "summary.md").write_text(text)
    output.note(text)
    output.note(f"{len(points)} points ({skipped} already done) in {time.perf_counter() - t0:.1f} s; "
                f"CSV {csv_path}; figures: {', '.join(str(f) for f in figures) or 'none (points missing)'}")
    output.record("simulate.sweep", {"preset": preset, "out": str(out), "hosts": hosts, "methods": methods},
                  rows)


def _run_fatness(runner, points: list, csv_path: Path) -> int:
    """Run the points not yet in the CSV, each row appended as it finishes; returns how many were done."""
    from fabriclab.bench import fatness

    todo = fatness.todo_points(points, csv_path)
    written: set[int] = set()
    with fatness.csv_appender(csv_path) as append:
        def write(i: int, row: dict) -> None:
            append(row)
            written.add(i)
        runner.on_answer = write
        rows = runner(fatness.simulate_point, fatness.FatnessWork(), todo)
        for i, row in enumerate(rows):  # points read back from the store (--resume) are not in the CSV yet
            if i not in written:
                append(row)
    return len(points) - len(todo)


def register(main_app: typer.Typer) -> None:
    from fabriclab.cli import simulate_jobs

    simulate_jobs.register(app)
    main_app.add_typer(app, name="simulate")
