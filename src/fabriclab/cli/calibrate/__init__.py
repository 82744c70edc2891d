"""`fabriclab calibrate nccl-tests`: fit a cluster model to real nccl-tests output and write it as a file.

Reads every run of the logs (nccl-tests output of any collective, with or without mpirun prefixes, one
process per GPU or `-g N`; or `fabriclab collectives bench` tables), fits the cluster model
(`nccl/fit.py`) and prints the parameters (fitted, or kept at their prior when the logs do not
determine them) and the residual of every row: measured busbw against the fitted model's, with NCCL's
choice of algorithm and protocol there. `--check LOG` predicts logs the fit never sees and reports their
errors apart; with `--hold-out-sizes A:B` only their rows in that size range are held out and the rest
joins the fit. The logs do not say what NIC the servers have: `--nic` and `--nics-per-server` do; a log of
`examples/nccl-corpus/` is read with the `corpus.json` beside it (its rank list, and the servers it names
where no option gives them), as `fabriclab validate nccl-tests` reads it.

Try it: `fabriclab calibrate nccl-tests examples/nccl-tests-a100/nccl_{1,2,4,8,16}.log --out a100.json`.
"""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from fabriclab.cli.common import (
    FormatOption,
    JsonOption,
    Output,
    StoreOption,
    check_output_file,
    user_errors,
)
from fabriclab.fabric.cluster import save_cluster
from fabriclab.fabric.links import parse_link
from fabriclab.fabric.nccl_env import parse_assignments
from fabriclab.fabric.nccl_tuner import read_tuner_file
from fabriclab.nccl.fit import source_word
from fabriclab.units import format_size, parse_size_range
from fabriclab.report.calibrate import band_table_rows, measured_busbw, switch_notes

app = typer.Typer(help="Fit a cluster model to real measurements (nccl-tests output, a training step).",
                  no_args_is_help=True)


@app.callback()
def _group() -> None:
    """Fit a cluster model to real measurements (nccl-tests output, a training step)."""


def register(main_app: typer.Typer) -> None:
    """Add the `calibrate` group to the main app."""
    from fabriclab.cli.calibrate import kernels as calibrate_kernels, step as calibrate_step

    calibrate_step.register(app)
    calibrate_kernels.register(app)
    main_app.add_typer(app, name="calibrate")


@app.command("nccl-tests")
@user_errors
def nccl_tests_cmd(
    logs: Annotated[list[Path], typer.Argument(metavar="LOG...", help="nccl-tests output files to fit.")],
    out: Annotated[Path, typer.Option("--out", metavar="PATH", dir_okay=False,
                                      help="Cluster file to write (JSON).")],
    check: Annotated[list[Path] | None, typer.Option("--check", metavar="LOG", help=(
        "A log to predict and compare, not fitted (repeat for several)."))] = None,
    hold_out_sizes: Annotated[str | None, typer.Option("--hold-out-sizes", metavar="A:B", help=(
        "Hold out only the --check rows in this size range (e.g. 1MB:1GB); their other rows join the fit."))]
    = None,
    nic: Annotated[str | None, typer.Option(help="NIC of the servers: a link preset (HDR, EDR, 100GbE, ...) or a "
                                                 "rate such as 25GB/s; the logs do not say (default: a corpus log's "
                                                 "manifest's, else HDR).")] = None,
    nics_per_server: Annotated[int | None, typer.Option(help="NICs per server (default: one per GPU).")]
    = None,
    gpus_per_server: Annotated[int | None, typer.Option(help="GPUs per server (default: from the logs' "
                                                                "hosts, else the largest one-server run).")]
    = None,
    intra: Annotated[str | None, typer.Option(help="Inside a server: nvswitch or pcie (default: a corpus log's "
                                                   "manifest's, else nvswitch).")] = None,
    fabric: Annotated[str | None, typer.Option(help="Network of the cluster file: rail or fat-tree (default: a "
                                                    "corpus log's manifest's, else rail).")] = None,
    sharp: Annotated[bool, typer.Option("--sharp", help=(
        "The switches reduce in the network (NVIDIA SHARP): NCCL may run CollNet across servers."))] = False,
    nccl_version: Annotated[str | None, typer.Option("--nccl-version", metavar="X.Y.Z", help=(
        "NCCL version the logs were measured with, when they do not say (2.9 to the current 2.2x)."))] = None,
    nccl_env: Annotated[list[str] | None, typer.Option("--nccl-env", metavar="VAR=VALUE", help=(
        "An NCCL variable the logs were measured with that the model reads: NCCL_ALGO, NCCL_PROTO, "
        "NCCL_NVLS_ENABLE or NCCL_BUFFSIZE (repeat for several; e.g. NCCL_PROTO=Simple)."))] = None,
    nccl_tuner: Annotated[Path | None, typer.Option("--nccl-tuner", metavar="FILE", dir_okay=False, help=(
        "The tuner plugin's config the logs ran under (NCCL_TUNER_CONFIG_PATH: a tuner_config.textproto of "
        "communicator_configs, as Google's GPUDirect plugins ship): its rules replace NCCL's choice."))] = None,
    fmt: FormatOption = None,
    json_path: JsonOption = None,
    store: StoreOption = None,
) -> None:
    """Fit a cluster model to nccl-tests logs; print its parameters and the residual of every row."""
    from fabriclab.nccl.calibration import calibrate_cluster

    check_output_file(out, "--out")
    output = Output(fmt, json_path, store)
    request, corpus = _request(locals())
    cal = calibrate_cluster(request)
    save_cluster(cal.cluster, out)
    if corpus is not None:
        output.note(f"read with {corpus.folder / 'corpus.json'}: {corpus.manifest.get('title', corpus.name)}; the "
                    f"servers as it says where no option gives them")
    _print_calibration(output, cal, request)
    output.note(f"cluster written to {out}")
    nic = nic or (corpus.hardware["nic"] if corpus else "HDR")
    output.record("calibrate.nccl-tests", {"logs": [str(p) for p in logs], "check": [str(p) for p in check or []],
                                           "hold_out_sizes": hold_out_sizes, "nic": nic, "out": str(out),
                                           **({"corpus": str(corpus.folder)} if corpus else {}),
                                           **({"nccl_env": request.nccl_env} if request.nccl_env else {}),
                                           **({"nccl_tuner": str(nccl_tuner)} if nccl_tuner else {})},
                  {"parameters": cal.cluster.fit["parameters"], "residuals": [asdict(r) for r in cal.residuals],
                   "fitted_rows": cal.fitted_summary, "held_out_rows": cal.held_summary,
                   "held_out_coverage": cal.coverage, "nccl_version": cal.cluster.library.nccl_version})


def _request(o: dict):
    """The `CalibrationRequest` of the command line `o`, and the corpus cluster its logs belong to (or None): a
    log of `examples/nccl-corpus` is read with its manifest (`nccl_corpus.read_logs`: its rank list, and the
    servers the options leave out)."""
    from fabriclab.bench.validate.nccl_corpus import read_logs
    from fabriclab.nccl.calibration import CalibrationRequest

    runs, corpus = read_logs(o["logs"])
    held, checked = read_logs(o["check"] or [])
    corpus = corpus or checked
    manifest = corpus.servers() if corpus else {}
    given = {"nic": None if o["nic"] is None else parse_link(o["nic"]), "nics_per_server": o["nics_per_server"],
             "gpus_per_server": o["gpus_per_server"], "intra": o["intra"], "fabric": o["fabric"],
             "nccl_version": o["nccl_version"], "nccl_env": parse_assignments(o["nccl_env"]) if o["nccl_env"] else None,
             "tuner": None if o["nccl_tuner"] is None else read_tuner_file(o["nccl_tuner"])}
    defaults = {"nic": parse_link("HDR"), "intra": "nvswitch", "fabric": "rail", "nccl_env": {}, "tuner": ()}
    servers = {k: v if v is not None else manifest.get(k, defaults.get(k)) for k, v in given.items()}
    sizes = None if o["hold_out_sizes"] is None else parse_size_range(o["hold_out_sizes"])
    return CalibrationRequest(
        runs=runs, held=held, hold_out_range=None if sizes is None else (min(sizes), max(sizes)), sharp=o["sharp"],
        check_nic=given["nic"] is not None or corpus is None, name=o["out"].stem,
        log_names=tuple(p.name for p in o["logs"]), **servers,
        record={"logs": [str(p) for p in o["logs"]], "checked_logs": [str(p) for p in o["check"] or []],
                "hold_out_sizes": o["hold_out_sizes"]}), corpus


def _print_calibration(output, cal, request) -> None:
    residuals = cal.residuals
    output.note(f"library model: {cal.version_note}")
    output.table(_params_table(cal.params, cal.cluster.library.nccl_version))
    output.table(_residual_table([r for r in residuals if not r.held_out],
                                 "fit: busbw per row (GB/s, measured from the log's time), measured vs model; "
                                 "error = model / measured - 1"))
    if any(r.held_out for r in residuals):
        output.table(_residual_table([r for r in residuals if r.held_out],
                                     "held out (never fitted): busbw per row (GB/s), measured vs model"))
    for c in cal.coverage:
        where = "all held-out rows" if c["num_gpus"] is None else f"held-out rows, {c['num_gpus']} GPUs"
        output.note(f"{where}: measured busbw inside the printed range in {c['inside']} of {c['rows']} "
                    f"({c['share'] * 100:.0f} %)")
    output.table(_band_table(residuals))
    for note in switch_notes(residuals):
        output.note(f"note: {note}")
    for title, rows in (("fitted rows", cal.fitted_summary), ("held-out rows", cal.held_summary)):
        for s in rows:
            output.note(f"{title}: {s['num_gpus']} GPUs, {s['band']}: max |error| {s['max_abs_error_pct']:.1f} % "
                        f"over {s['rows']} rows (goal {s['goal_pct']:g} %: {'met' if s['within_goal'] else 'missed'})")
    for run in request.runs + request.held:
        if run.num_ranks == 1:
            output.note(f"{run.source}: 1 rank moves no data between GPUs (busbw 0): not fitted")
    fit_runs = request.runs + (request.held if request.hold_out_range is not None else ())
    if not any(r.num_servers > 1 for r in fit_runs):
        output.note("no run spans several servers: NIC efficiency and network latencies stay priors")


def _quantity(name: str, value: float) -> str:
    if name.endswith("_Bps"):
        return f"{value / 1e9:.4g} GB/s"
    if name.endswith("_s") and not name.endswith("per_byte_s"):
        return f"{value * 1e6:.4g} us"
    if name.endswith("per_byte_s"):
        return f"{value * 1e12:.4g} ps/B"
    return f"{value:.4g}"


def _params_table(params, version: str) -> Table:
    table = Table(title=f"parameters: fitted, or the prior (data sheets, NCCL {version}'s constants)")
    for col in ("parameter", "value", "prior", "from"):
        table.add_column(col, justify="left" if col in ("parameter", "from") else "right")
    for p in params:
        source = source_word(p.determined, p.at_bound, p.value, p.prior)
        table.add_row(p.name.replace("library.", "").replace("server.", ""), _quantity(p.name, p.value),
                      _quantity(p.name, p.prior), source)
    return table


def _band_table(residuals) -> Table:
    headers, rows = band_table_rows(residuals)
    table = Table(title="|error| per size band, median / max (%), fitted and held-out rows")
    for h in headers:
        table.add_column(h, justify="left" if h == "collective" else "right")
    for row in rows:
        table.add_row(*row)
    return table


def _residual_table(residuals, title: str) -> Table:
    table = Table(title=title)
    from fabriclab.nccl.calibration import inside

    ranged = any(r.busbw_low_GBps is not None for r in residuals)
    several = len({r.collective for r in residuals}) > 1
    cols = ["log", *(["collective"] if several else []), "GPUs", "size", "NCCL runs", "measured", "model",
            *(["range"] if ranged else []), "error %", "in-place"]
    for col in cols:
        table.add_column(col, justify="left" if col in ("log", "collective", "NCCL runs") else "right")
    for r in residuals:
        in_err = "-" if r.inplace_error_pct is None else f"{r.inplace_error_pct:+.1f}"
        span = ("-" if r.busbw_low_GBps is None else
                f"{r.busbw_low_GBps:.3g}-{r.busbw_high_GBps:.3g}{'' if inside(r) else ' out'}")
        table.add_row(Path(r.source.split(" (")[0].split(" [")[0]).name, *([r.collective] if several else []),
                      str(r.num_gpus), format_size(r.size_bytes), r.choice, f"{measured_busbw(r):.4g}",
                      f"{r.predicted_busbw_GBps:.4g}", *([span] if ranged else []), f"{r.error_pct:+.1f}", in_err)
    return table
