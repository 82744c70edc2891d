"""`fabriclab bench simai`: collectives in SimAI's packet-level simulator (ns-3) beside fabriclab's model.

For each cluster shape (GPUs, fat-tree = SimAI's DCN+ or rail = its Spectrum-X, leaf oversubscription) and
collective and size, writes SimAI's topology and a one-layer workload, runs the ns-3 binary `--repeats`
times and the analytical one once (`bench/simai/`), and prints the ns-3 median and range, SimAI-Analytical,
fabriclab's prediction on the same machine and ns-3 / fabriclab, then each tool's wall time and what the
packet simulator's flows did. One line per finished run goes to stderr. `--measured FILE` re-reads a record
this command wrote and puts fabriclab's current prediction beside its stored times, without SimAI.
Exits 1 when a case got no ns-3 time (its reason is in the record).

Try it: `fabriclab bench simai --gpus 32 --oversubscription 1 --collectives allreduce --sizes 16MiB --repeats 1`.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Optional

import typer
from rich.table import Table

from fabriclab.cli.common import EXIT_FAILED, FormatOption, JsonOption, Output, StoreOption, split_list, user_errors
from fabriclab.cli.options import parse_count


def register(app: typer.Typer) -> None:
    app.command("simai")(simai_cmd)


@user_errors
def simai_cmd(
    gpus: str = typer.Option("32", metavar="LIST", help="GPU counts, whole servers of 8 (e.g. 32,64)."),
    fabrics: str = typer.Option("fat-tree", metavar="LIST", help="fat-tree (SimAI's DCN+) and/or rail (its "
                                "Spectrum-X, run with PXN)."),
    oversubscription: str = typer.Option("1", metavar="LIST", help="Leaf down:up ratios: 1,2,4 = 1:1, 2:1, 4:1 "
                                         "(16 NICs a leaf, 16 / ratio spines)."),
    collectives: str = typer.Option("allreduce", metavar="LIST", help="allreduce, allgather, reducescatter, "
                                    "alltoall."),
    sizes: str = typer.Option("16MiB", metavar="LIST", help="Sizes (nccl-tests'), e.g. 32MiB,512MiB."),
    repeats: str = typer.Option("3", metavar="N", help="ns-3 runs per case (median and range reported)."),
    timeout: str = typer.Option("300s", metavar="TIME", help="Stop one SimAI run after this long."),
    routing: Optional[str] = typer.Option(None, metavar="NAME", help="fabriclab's routing (ideal, ecmp, "
                                          "adaptive; default: the dgx-h100 preset's)."),
    simai: Optional[str] = typer.Option(None, "--simai", metavar="PATH", help="SimAI's folder (bin/, inputs/); "
                                        "default $FABRICLAB_SIMAI, else ../shared/tools/simai."),
    measured: Optional[Path] = typer.Option(None, "--measured", metavar="FILE", help="Re-read a record this "
                                            "command wrote: its times beside fabriclab's current prediction."),
    fmt: FormatOption = None, json_path: JsonOption = None, store: StoreOption = None,
) -> None:
    """SimAI's ns-3 and analytical times of collectives beside fabriclab's prediction."""
    from fabriclab.bench.simai import compare
    from fabriclab.bench.simai.runner import find_simai

    out = Output(fmt, json_path, store)
    if measured is not None:
        record = compare.load_measured(measured)
        results = compare.remeasure(record, source=str(measured), routing=routing)
        config = {**record.get("config", {}), "measured": str(measured), "routing": routing}
    else:
        config = _config(gpus, fabrics, oversubscription, collectives, sizes, repeats, timeout, routing)
        cases = compare.make_cases(config["gpus"], config["fabrics"], config["oversubscription"],
                                   config["collectives"], config["sizes_bytes"])
        config["simai"] = str(find_simai(simai))  # after the cases: bad input is named first
        out.note(f"{len(cases)} cases x {config['repeats']} ns-3 runs (SimAI in {config['simai']}); one line per "
                 f"run on stderr ...")
        results = compare.campaign(cases, Path(config["simai"]), repeats=config["repeats"],
                                   timeout_s=config["timeout_s"], routing=routing, progress=_progress)
    results = {**results, "agreement": compare.agreement(results["cases"])}
    _print(out, results)
    out.record(compare.KIND, config, results)
    if any(c["ns3"]["median_s"] is None for c in results["cases"]):
        raise typer.Exit(EXIT_FAILED)


def _config(gpus: str, fabrics: str, oversubscription: str, collectives: str, sizes: str, repeats: str,
            timeout: str, routing: str | None) -> dict:
    from fabriclab.bench.simai.inputs import LAYOUTS, collective_name
    from fabriclab.bench.simai.runner import NS3_ENV, RAIL_ENV
    from fabriclab.units import parse_int_list, parse_size_range, parse_time

    fabric_list = split_list(fabrics, "--fabrics")
    for fabric in fabric_list:
        if fabric not in LAYOUTS:
            raise ValueError(f"--fabrics {fabrics}: {fabric!r} is not a fabric; use fat-tree (SimAI's DCN+) or "
                             f"rail (its Spectrum-X)")
    seconds = parse_time(timeout)
    if not 1 <= seconds <= 86400:
        raise ValueError(f"--timeout {timeout}: give 1s to 24h, e.g. 300s")
    config = {"gpus": parse_int_list(gpus, minimum=1, what="--gpus list", maximum=1 << 20),
              "fabrics": list(dict.fromkeys(fabric_list)),
              "oversubscription": parse_int_list(oversubscription, minimum=1, what="--oversubscription list",
                                                 maximum=1 << 20),
              "collectives": list(dict.fromkeys(collective_name(c) for c in split_list(collectives, "--collectives"))),
              "sizes_bytes": parse_size_range(sizes), "repeats": parse_count(repeats, "--repeats", maximum=20),
              "timeout_s": seconds, "routing": routing}
    if routing is not None:  # a routing this fabriclab does not know is an error before SimAI runs
        from fabriclab.bench.simai.cluster import simai_cluster

        simai_cluster(2 * 8, "fat-tree", 1, routing=routing)
    return {**config, "environment": {**NS3_ENV, "rail": RAIL_ENV}}


def _progress(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def _us(seconds: float | None, digits: int = 1) -> str:
    return "-" if seconds is None else f"{seconds * 1e6:.{digits}f}"


def _case_cells(case: dict) -> list[str]:
    from fabriclab.units import format_size

    return [str(case["num_gpus"]), case["fabric"], f"{case['oversubscription']}:1", case["collective"],
            format_size(case["size_bytes"])]


def _print(out: Output, results: dict) -> None:
    source = results.get("measured_from")
    times = Table(title="SimAI beside fabriclab, times in us")
    for col in ("GPUs", "fabric", "down:up", "collective", "size", "ns-3", "ns-3 range", "analytical",
                "fabriclab", "ns-3/fl"):
        times.add_column(col, justify="left" if col in ("fabric", "collective") else "right")
    for c in results["cases"]:
        ns3, ours = c["ns3"], c["fabriclab"]
        span = "-" if ns3["min_s"] is None else f"{_us(ns3['min_s'])}-{_us(ns3['max_s'])}"
        times.add_row(*_case_cells(c["case"]), _us(ns3["median_s"]), span, _us(c["analytical"].get("time_s")),
                      _us(ours["time_s"]), "-" if c["ratio"] is None else f"{c['ratio']:.3f}")
    out.table(times)
    out.table(_walls(results["cases"]))
    failed = [(c["case"]["label"], c["ns3"]["error"]) for c in results["cases"] if c["ns3"]["error"]]
    for label, error in failed:
        out.note(f"{label}: ns-3 {error}")
    _print_agreement(out, results["agreement"])
    routing = ", ".join(sorted({str(c["fabriclab"].get("routing")) for c in results["cases"]}))
    if source:
        out.note(f"ns-3 and analytical as stored in {source}; fabriclab's prediction made now")
    out.note(f"fabriclab: dgx-h100 on SimAI's leaves and spines, routing {routing}")
    out.note("in flight: cross-leaf flows per sending NIC; ports: source ports per")
    out.note("cross-leaf connection (medians of the runs); ns-3 s: wall per run")


def _walls(cases: list[dict]) -> Table:
    table = Table(title="wall time (s), ns-3 memory and flows")
    for col in ("GPUs", "fabric", "down:up", "collective", "size", "ns-3 s", "an. s", "fl. ms", "MiB", "flows",
                "in flight", "ports"):
        table.add_column(col, justify="left" if col in ("fabric", "collective") else "right")
    for c in cases:
        runs = c["ns3"]["runs"]
        flows = [r.get("flows") or {} for r in runs if r.get("time_s") is not None]
        table.add_row(*_case_cells(c["case"]), _median(runs, "wall_s", "{:.1f}"),
                      "-" if c["analytical"].get("wall_s") is None else f"{c['analytical']['wall_s']:.2f}",
                      f"{c['fabriclab']['wall_s'] * 1e3:.1f}", _median(runs, "peak_rss_MiB", "{:.0f}"),
                      _median(flows, "flows", "{:.0f}"), _median(flows, "in_flight_per_nic_mean", "{:.2f}"),
                      _median(flows, "ports_per_connection_mean", "{:.1f}"))
    return table


def _median(rows: list[dict], key: str, form: str) -> str:
    import statistics

    values = [r[key] for r in rows if r.get(key) is not None]
    return form.format(statistics.median(values)) if values else "-"


def _print_agreement(out: Output, summary: dict) -> None:
    from fabriclab.bench.simai.compare import SLOWDOWN_TOLERANCE

    if not summary["cases"]:
        return
    out.note(f"ns-3 / fabriclab over {summary['cases']} cases: median |error| {summary['median_error']:.1%}, "
             f"worst {summary['worst_error']:.1%}")
    out.note(f"  worst: {summary['worst_case']}")
    if summary["slowdowns"]:
        out.note(f"slowdown from 1:1 within {SLOWDOWN_TOLERANCE:.0%} of ns-3's in {summary['slowdowns_within']} "
                 f"of {len(summary['slowdowns'])} cases")
    for s in summary["slowdowns"]:
        if not s["within"]:
            out.note(f"  {s['label']}: ns-3 x{s['ns3']:.2f}, fabriclab x{s['fabriclab']:.2f}")
