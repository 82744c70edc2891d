"""`fabriclab validate`: measured collectives on the emulated star / fat tree vs. the simulator (needs root).

For each topology it builds the emulated cluster, benchmarks every all-reduce algorithm (and `native`) at
every size (`fabriclab.bench.validate`), simulates the same on the same TopologySpec twice (`plain`: the
simulator as it is; `model`: plus TCP framing, the executor's segments, measured per-message and
reduction costs, see `fabriclab.bench.validate_model`) and prints measured, simulated and the error,
then a summary of the error at >= 1 MB (goal: within 10 %). `--out DIR` writes the record
(validate.json), validate.csv, validate.md and validate.png.

Try it: `sudo fabriclab validate --topology star,fat-tree --algos all --sizes 1KB:256MB:x4 --out results/validate`.
"""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path
from typing import Optional

import typer

from fabriclab.bench.validate import (DEFAULT_BURST_S, DEFAULT_DILATION, DEFAULT_LINK, DEFAULT_QUEUE_S,
                                      ValidateConfig, all_algos, run_validation)
from fabriclab.bench.validate_model import TCP_PAYLOAD_EFFICIENCY
from fabriclab.cli.common import (EXIT_FAILED, console, err_console, JsonOption, print_error, save_record,
                                  split_list, user_errors)
from fabriclab.emu.netns import EmuError
from fabriclab.record import make_record, write_csv, write_record
from fabriclab.report import validate as report
from fabriclab.units import format_size, parse_size_range, parse_time

DEFAULT_SIZES = "1KB:256MB:x4"


def register(app: typer.Typer) -> None:
    """Add `validate` to the main app."""
    app.command("validate")(validate)


@user_errors
def validate(
    topology: str = typer.Option("star,fat-tree", help="Comma list of star and fat-tree."),
    hosts: int = typer.Option(4, help="Emulated hosts (one rank each)."),
    hosts_per_leaf: int = typer.Option(2, help="Fat tree: hosts per leaf."),
    bisection: str = typer.Option("1/2", help="Fat tree: bisection ratio."),
    algos: str = typer.Option("all", help="Comma list of all-reduce algorithm specs and native, or all."),
    sizes: str = typer.Option(DEFAULT_SIZES, help="Sizes: 1KB:256MB (x2 steps), 1KB:256MB:x4, 1MB,16MB."),
    link: str = typer.Option(DEFAULT_LINK, help="Real link bandwidth; the emulated links run at link / D."),
    dilation: float = typer.Option(DEFAULT_DILATION, help="Time dilation D (links run at link / D)."),
    burst: str = typer.Option(f"{DEFAULT_BURST_S * 1e3:g}ms", help="tbf bucket as time at the rate "
                                                                    "(floor 128 KiB)."),
    queue: str = typer.Option(f"{DEFAULT_QUEUE_S * 1e3:g}ms", help="tbf queue limit as time at the rate."),
    budget: float = typer.Option(6.0, help="Benchmark seconds aimed at per size (all algorithms)."),
    max_iters: int = typer.Option(10, help="Most timed iterations per size."),
    efficiency: float = typer.Option(TCP_PAYLOAD_EFFICIENCY, help="Payload share of the shaped rate in the "
                                                                  "model (1: no TCP framing)."),
    calibrate: bool = typer.Option(True, help="Measure per-message and reduction costs for the model."),
    calibrate_bandwidth: bool = typer.Option(True, help="Model the links at the measured streaming goodput "
                                                        "(else at --efficiency x the shaped rate)."),
    nice: int = typer.Option(0, help="nice(1) priority of the ranks; negative keeps other jobs from "
                                     "stretching the times."),
    out: Optional[Path] = typer.Option(None, file_okay=False, help="Write validate.json/.csv/.md/.png here."),
    from_record: Optional[Path] = typer.Option(None, dir_okay=False, help="Measure nothing: report the "
                                                                          "validate.json record given."),
    json_path: JsonOption = None,
) -> None:
    """Measured vs. simulated collectives on the emulated star and fat tree, with the error."""
    if from_record is not None:
        record = json.loads(from_record.read_text())
        runs = record["results"]["runs"]
        for result in runs:
            console.print(report.table(result["rows"], title=f"validate: {result['topology_name']}"))
        _finish([r for result in runs for r in result["rows"]], out, record["config"], None)
        return
    chosen = all_algos() if algos.strip() == "all" else tuple(split_list(algos, "algorithm list"))
    configs = [ValidateConfig(topology=t, hosts=hosts, hosts_per_leaf=hosts_per_leaf, bisection=bisection,
                              algos=chosen, sizes_bytes=tuple(parse_size_range(sizes)), link=link,
                              dilation=dilation, burst_s=parse_time(burst), queue_s=parse_time(queue),
                              budget_s=budget, max_iters=max_iters, efficiency=efficiency,
                              calibrate=calibrate, calibrate_bandwidth=calibrate_bandwidth, nice=nice)
               for t in split_list(topology, "topology list")]
    results, rows = [], []
    for config in configs:
        err_console.print(f"validating on the emulated {config.topology} ({config.hosts} hosts, "
                          f"{config.link} / {config.dilation:g}): {len(config.algos)} algorithms x "
                          f"{len(config.sizes_bytes)} sizes ...", markup=False)
        try:
            result = run_validation(config)
        except EmuError as exc:
            print_error(exc)
            raise typer.Exit(EXIT_FAILED) from None
        results.append(result)
        rows += result["rows"]
        _print_one(config, result)
    config_dict = {"runs": [asdict(c) | {"spec": c.spec().as_dict()} for c in configs]}
    summary = _finish(rows, out, config_dict, results)
    save_record(json_path, "validate", config_dict, {"runs": results, "summary": summary})
    if any(r["num_wrong"] for r in rows):
        err_console.print("some benchmark results were wrong (#wrong > 0)", style="bold red")
        raise typer.Exit(EXIT_FAILED)


def _finish(rows: list[dict], out: Path | None, config_dict: dict, results: list[dict] | None) -> dict:
    """Print the summary; with `out`, write the record (when measured now), CSV, Markdown and plot."""
    summary = report.summarize(rows)
    console.print("[bold]summary[/bold] (all topologies, sizes >= 1 MB; goal |error| <= 10 %):")
    for line in report.summary_lines(summary):
        console.print(f"  {line}", markup=False)
    console.print("  worst |error| of the model per algorithm: "
                  + ", ".join(f"{a} {e:.1f}%" for a, e in report.per_algo(rows).items()), markup=False)
    if out is not None:
        if results is not None:
            write_record(out / "validate.json", make_record("validate", config_dict,
                                                            {"runs": results, "summary": summary}))
        write_csv(out / "validate.csv", rows)
        (out / "validate.md").write_text(report.markdown(rows, summary))
        report.plot(rows, out / "validate.png")
        err_console.print(f"wrote {out}: validate.csv, .md, .png" + (", .json" if results else ""), markup=False)
    return summary


def _print_one(config: ValidateConfig, result: dict) -> None:
    model, cal = result["model"], result["calibration"]
    source = "streaming goodput" if config.calibrate and config.calibrate_bandwidth else "TCP payload"
    console.print(report.table(result["rows"], title=f"validate: {result['topology_name']}, emulated at "
                               f"{result['emulated_rate_Bps'] * 8 / 1e6:g} Mbit/s (D={config.dilation:g}); "
                               f"times in the emulation's time"))
    console.print(f"  plain: shaped rate, {result['hop_latency_s'] * 1e6:.2f} us per hop (measured). model: x "
                  f"{model['efficiency']:.4f} ({source}; TCP framing alone {TCP_PAYLOAD_EFFICIENCY:.4f}), "
                  f"alpha {model['alpha_s'] * 1e6:.0f} us per message (neighbour step "
                  f"{cal.get('step_s', 0) * 1e6:.0f} us, 2-rank one-way {cal.get('one_way_s', 0) * 1e6:.0f} us), "
                  f"gamma {model['gamma_s_per_byte'] * 1e9:.3f} ns/B, copy {model['copy_s_per_byte'] * 1e9:.3f} "
                  f"ns/B, segments {format_size(model['segment_bytes'])}, bucket {model['burst_bytes']} B",
                  markup=False)
    load = (result["load_before"], result["load_after"])
    console.print(f"  machine load before/after: {load[0].get('loadavg_1min', 0):.2f}/"
                  f"{load[1].get('loadavg_1min', 0):.2f}, CPU pressure "
                  f"{load[0].get('cpu_pressure_avg10_pct', float('nan')):.0f}%/"
                  f"{load[1].get('cpu_pressure_avg10_pct', float('nan')):.0f}%", markup=False)
    for line in report.summary_lines(report.summarize(result["rows"])):
        console.print(f"  {line}", markup=False)
