"""`fabriclab validate collectives`: measure collectives on a small and a larger emulated star, fit the small
one, predict the larger one, and print measured vs predicted with the error (needs root).

Both clusters are emulated stars (network namespaces as hosts, one rank each, every host's link shaped
with tbf to `--link`); the ops run as the backend's own collectives (Gloo's all_gather, all_to_all_single,
...), timed nccl-tests style with a check on every iteration (`fabriclab.bench.validate.collectives`).
The fit is `fabriclab calibrate nccl-tests` on the small cluster's tables (one cluster for all ops, or one
per op with `--per-op` or where the joint fit refuses); the prediction never sees the larger cluster's
rows. Exits with 1 when a result is wrong or a rank fails, 2 on bad input.

Try it: `sudo fabriclab validate collectives --ops allgather,alltoall --hosts 4 --calibrate-hosts 2`.
"""

from __future__ import annotations

from typing import Optional

import typer

from fabriclab.cli.common import (EXIT_FAILED, FormatOption, JsonOption, Output, StoreOption, print_error, split_list,
                                  user_errors)
from fabriclab.cli.options import parse_count, parse_number
from fabriclab.report.validate_collectives import KIND

DEFAULT_OPS = "allgather,alltoall"
DEFAULT_SIZES = "64KB:64MB:x4"


def register(app: typer.Typer) -> None:
    """Add `collectives` to the `validate` group."""
    app.command("collectives")(collectives)


@user_errors
def collectives(
    ops: str = typer.Option(DEFAULT_OPS, help="Comma list of collectives, each the backend's own: allgather, "
                                              "alltoall, allreduce, reduce_scatter, broadcast, reduce."),
    hosts: str = typer.Option("4", metavar="N", help="Emulated hosts to predict (one rank each)."),
    calibrate_hosts: str = typer.Option("2", metavar="N", help="Emulated hosts to fit the model to (fewer "
                                                               "than --hosts)."),
    sizes: str = typer.Option(DEFAULT_SIZES, help="Sizes: 64KB:64MB:x4, 1KB:16MB (x2 steps), 1MB,16MB."),
    iters: str = typer.Option("5", metavar="N", help="Timed iterations per op and size (the median is used)."),
    warmup: str = typer.Option("1", metavar="N", help="Untimed iterations before them."),
    link: str = typer.Option("1Gbps", metavar="RATE", help="Rate of every host's link per direction."),
    dilation: str = typer.Option("1", metavar="D", help="Time dilation D >= 1 (links run at link / D)."),
    queue: Optional[str] = typer.Option(None, metavar="TIME", help="tbf queue limit as time at the rate "
                                                                   "(default 200ms: no drops under incast)."),
    joint: bool = typer.Option(True, "--joint/--per-op", help="Fit one cluster to every op's tables, or one "
                                                              "per op."),
    timeout: str = typer.Option("120", metavar="SECONDS", help="Longest wait for a stuck rank."),
    nice: str = typer.Option("0", metavar="N", help="nice(1) priority of the ranks, -20..19."),
    fmt: FormatOption = None,
    json_path: JsonOption = None,
    store: StoreOption = None,
) -> None:
    """Measured vs predicted collectives: fit on a small emulated star, predict a larger one (root)."""
    output = Output(fmt, json_path, store)
    config = check_config(locals())
    from fabriclab.bench.validate.collectives.config import config_dict

    results = _measure(output, config)
    report_results(output, config, results)
    output.record(KIND, config_dict(config), results)
    if any(r["num_wrong"] for r in results["rows"]):
        print_error("some benchmark results were wrong (#wrong > 0)")
        raise typer.Exit(EXIT_FAILED)


def check_config(o: dict):
    """The `CheckConfig` of the parsed command line `o` (the command's parameters)."""
    from fabriclab.bench.validate.collectives.config import CheckConfig
    from fabriclab.bench.validate.run import DEFAULT_QUEUE_S
    from fabriclab.units import parse_size_range, parse_time

    return CheckConfig(
        ops=tuple(split_list(o["ops"], "op list")), hosts=parse_count(o["hosts"], "--hosts", maximum=64),
        calibrate_hosts=parse_count(o["calibrate_hosts"], "--calibrate-hosts", maximum=64),
        sizes_bytes=tuple(parse_size_range(o["sizes"])), iters=parse_count(o["iters"], "--iters"),
        warmup=parse_count(o["warmup"], "--warmup", minimum=0), link=o["link"].strip(),
        dilation=parse_number(o["dilation"], "--dilation", minimum=1.0),
        queue_s=DEFAULT_QUEUE_S if o["queue"] is None else parse_time(o["queue"]), joint=o["joint"],
        timeout_s=parse_number(o["timeout"], "--timeout", minimum=1e-3, example="120"), nice=_nice(o["nice"]))


def _nice(text: str) -> int:
    value = text.strip()
    if not value.lstrip("-").isdigit():
        raise ValueError(f"--nice {text!r}: give a priority in -20..19 (nice(1))")
    return int(value)


def _measure(output: Output, config) -> dict:
    """Run the check, a line per measurement; a failed system command or rank is one error line, exit 1."""
    from fabriclab.bench.validate.collectives.measure import run_check
    from fabriclab.emu.netns import EmuError

    output.note(f"validate collectives: {', '.join(config.ops)}; fit on {config.calibrate_hosts} emulated hosts, "
                f"predict {config.hosts} (star, {config.link} / {config.dilation:g}, one rank per host) ...")

    def measured(num_hosts: int, m: dict) -> None:
        load = (m["load_before"].get("loadavg_1min", 0.0), m["load_after"].get("loadavg_1min", 0.0))
        output.note(f"  measured {num_hosts} hosts in {m['wall_s']:.1f} s (load {load[0]:.2f} -> {load[1]:.2f})")

    try:
        return run_check(config, on_measured=measured)
    except EmuError as exc:
        print_error(exc)
        raise typer.Exit(EXIT_FAILED) from None


def report_results(output: Output, config, results: dict) -> None:
    """The table of every row (fit rows, then the predicted ones) and the summary lines."""
    from fabriclab.report import validate_collectives as report

    output.table(report.table(results["rows"], title=(
        f"validate collectives: fitted on {config.calibrate_hosts} hosts, predicted {config.hosts}; times are "
        f"medians; GB/s = 1e9 B/s")))
    for line in report.summary_lines(results):
        output.note(line)
    output.note(f"wall time {results['wall_s']:.1f} s (both clusters built, measured, torn down; fit; predict)")
