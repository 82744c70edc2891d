"""`fabriclab validate`: predictions against measurements.

* `validate emulated`: measured collectives on the emulated star / fat tree vs. the simulator (needs
  root). For each topology it builds the emulated cluster, benchmarks every all-reduce algorithm (and
  `native`) at every size (`fabriclab.bench.validate.run`), simulates the same on the same TopologySpec
  twice (`plain`: the simulator as it is; `model`: plus TCP framing, the executor's segments, measured
  per-message and reduction costs, see `fabriclab.bench.validate.model`) and prints measured, simulated
  and the error, then a summary of the error at >= 1 MB (goal: within 10 %). `--out DIR` writes the
  record (validate.json), validate.csv, validate.md and validate.png; `--from-record FILE` reports a
  recorded run without measuring. Its defaults (4 hosts, 2 per leaf, bisection 1/2) are the validated
  scenario: small enough for this 2-core machine to measure cleanly.
* `validate collectives`: collectives measured on a small emulated star fit the cluster model, which
  predicts a larger one; measured vs predicted with the error (needs root; `cli/validate/collectives`).
* `validate published`: the papers' published numbers against our predictions (`cli/validate/published`).
* `validate nccl-tests`: real clusters' published nccl-tests runs (examples/nccl-corpus): fit the smaller
  runs, predict the larger, errors per size band (`cli/validate/nccl`).

Try it: `sudo fabriclab validate emulated --topology star,fat-tree --algos all --sizes 1KB:256MB:x4
--out results/validate`.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Annotated, Optional

import typer

from fabriclab.cli.common import (
    EXIT_FAILED,
    FormatOption,
    JsonOption,
    Output,
    StoreOption,
    check_output_dir,
    check_output_path,
    print_error,
    split_list,
    user_errors,
)
from fabriclab.cli.options import (
    BisectionOption,
    HostsOption,
    HostsPerLeafOption,
    LinkOption,
    parse_bisection,
    parse_count,
    parse_nice,
    parse_number,
)
from fabriclab.cli.llm_options import (EpOption, GbsOption, MbsOption, PpOption, SeqOption, TpOption, VpOption,
                                       ZeroOption)
from fabriclab.report.validate import VALIDATE_KIND

DEFAULT_SIZES = "1KB:256MB:x4"

validate_app = typer.Typer(help="Predictions against measurements: the emulated cluster, real clusters' "
                                "nccl-tests runs, and the papers' published numbers.", no_args_is_help=True,
                           rich_markup_mode=None)


def register(app: typer.Typer) -> None:
    """Add the `validate` group (emulated, collectives, and published where its module is installed) to the
    main app."""
    from fabriclab.cli.validate import collectives as validate_collectives, nccl as validate_nccl

    validate_collectives.register(validate_app)
    validate_nccl.register(validate_app)
    if importlib.util.find_spec("fabriclab.cli.validate.published") is not None:
        from fabriclab.cli.validate import published as validate_published

        validate_published.register(validate_app)
    app.add_typer(validate_app, name="validate")


DilationOpt = Annotated[Optional[str], typer.Option(metavar="D", help="Time dilation D >= 1 (links run at link / "
                                                                       "D; default 2).")]
BudgetOpt = Annotated[str, typer.Option(metavar="SECONDS", help="Benchmark seconds aimed at per size (all "
                                                                "algorithms).")]
EfficiencyOpt = Annotated[Optional[str], typer.Option(help="Payload share of the shaped rate in the model (1: no "
                                                           "TCP framing; default: TCP over Ethernet).")]
CalibrateBwOpt = Annotated[bool, typer.Option(help="Model the links at the measured streaming goodput (else at "
                                                   "--efficiency x the shaped rate).")]
NiceOpt = Annotated[str, typer.Option(metavar="N", help="nice(1) priority of the ranks, -20..19; negative keeps "
                                                        "other jobs from stretching the times.")]
FromRecordOpt = Annotated[Optional[Path], typer.Option(help="Measure nothing: report the validate.json record "
                                                            "given.")]
WorkloadOpt = Annotated[str, typer.Option(help="collectives (all-reduce algorithms), or llm: a transformer's "
                                               "TP x PP x DP step (--model, --tp ...) against `whatif llm`.")]
LlmModelOpt = Annotated[str, typer.Option("--model", help="--workload llm: gpt-tiny, moe-tiny or a config.json.")]
GpusPerServerOpt = Annotated[str, typer.Option(metavar="N", help="--workload llm: ranks per emulated host.")]
StepsOpt = Annotated[str, typer.Option(metavar="N", help="--workload llm: timed steps (+ --warmup).")]


@validate_app.command("emulated")
@user_errors
def emulated(
    workload: WorkloadOpt = "collectives",
    topology: str = typer.Option("star,fat-tree", help="Comma list of star and fat-tree."),
    hosts: HostsOption = None,
    hosts_per_leaf: HostsPerLeafOption = None,
    bisection: BisectionOption = "1/2",
    algos: str = typer.Option("all", help="Comma list of all-reduce algorithm specs and native, or all."),
    sizes: str = typer.Option(DEFAULT_SIZES, help="Sizes: 1KB:256MB (x2 steps), 1KB:256MB:x4, 1MB,16MB."),
    link: LinkOption = None,
    dilation: DilationOpt = None,
    burst: Optional[str] = typer.Option(None, help="tbf bucket as time at the rate (floor 128 KiB)."),
    queue: Optional[str] = typer.Option(None, help="tbf queue limit as time at the rate."),
    budget: BudgetOpt = "6",
    max_iters: str = typer.Option("10", metavar="N", help="Most timed iterations per size."),
    efficiency: EfficiencyOpt = None,
    calibrate: bool = typer.Option(True, help="Measure per-message and reduction costs for the model."),
    calibrate_bandwidth: CalibrateBwOpt = True,
    nice: NiceOpt = "0",
    model: LlmModelOpt = "gpt-tiny",
    gpus_per_server: GpusPerServerOpt = "2",
    tp: TpOption = "2",
    pp: PpOption = "2",
    vp: VpOption = "1",
    ep: EpOption = "1",
    mbs: MbsOption = "1",
    gbs: GbsOption = "16",
    seq: SeqOption = None,
    zero: ZeroOption = "1",
    steps: StepsOpt = "6",
    warmup: StepsOpt = "2",
    trace: Optional[Path] = typer.Option(None, help="--workload llm: the measured and simulated step, one trace."),
    out: Optional[Path] = typer.Option(None, help="Write validate.json/.csv/.md/.png here."),
    from_record: FromRecordOpt = None,
    fmt: FormatOption = None,
    json_path: JsonOption = None,
    store: StoreOption = None,
) -> None:
    """Measured vs. simulated on the emulated cluster, with the error (root): all-reduce algorithms on the
    star and fat tree, or (--workload llm) a transformer's training step against `whatif llm`."""
    output = Output(fmt, json_path, store)
    check_output_dir(out)
    check_output_path(trace, "--trace")
    if workload.strip().lower() == "llm":
        from fabriclab.cli.validate import llm as validate_llm

        raise typer.Exit(validate_llm.run(locals(), output))
    if workload.strip().lower() != "collectives":
        raise ValueError(f"--workload {workload!r}: use collectives or llm")
    _collectives(locals(), output, out, from_record)


def _collectives(o: dict, output: Output, out: Path | None, from_record: Path | None) -> None:
    """The all-reduce algorithms on the emulated topologies (or a recorded run of them)."""
    from dataclasses import asdict

    if from_record is not None:
        _report_record(output, from_record, out)
        return
    configs = _validate_configs(o)
    results = _measure(output, configs)
    rows = [r for result in results for r in result["rows"]]
    config_dict = {"runs": [asdict(c) | {"spec": c.spec().as_dict()} for c in configs]}
    summary = _finish(output, rows, out, config_dict, results)
    output.record(VALIDATE_KIND, config_dict, {"runs": results, "summary": summary})
    if any(r["num_wrong"] for r in rows):
        print_error("some benchmark results were wrong (#wrong > 0)")
        raise typer.Exit(EXIT_FAILED)


def _validate_configs(o: dict) -> list:
    """One `ValidateConfig` per topology of the parsed command line `o` (emulated's parameters); options
    not given keep the config's defaults."""
    from fabriclab.bench.validate.run import ValidateConfig, all_algos
    from fabriclab.fabric.scenario import auto_hosts_per_leaf
    from fabriclab.units import parse_size_range, parse_time

    ratio = parse_bisection(o["bisection"])
    algos = all_algos() if o["algos"].strip() == "all" else tuple(split_list(o["algos"], "algorithm list"))
    num_hosts = 4 if o["hosts"] is None else parse_count(o["hosts"], "--hosts", maximum=64)
    given = dict(
        hosts=num_hosts, bisection=o["bisection"], algos=algos,
        hosts_per_leaf=(auto_hosts_per_leaf(num_hosts, ratio) if o["hosts_per_leaf"] is None
                        else parse_count(o["hosts_per_leaf"], "--hosts-per-leaf")),
        sizes_bytes=tuple(parse_size_range(o["sizes"])), link=o["link"] or None,
        dilation=None if o["dilation"] is None else parse_number(o["dilation"], "--dilation", minimum=1.0),
        burst_s=None if o["burst"] is None else parse_time(o["burst"]),
        queue_s=None if o["queue"] is None else parse_time(o["queue"]),
        budget_s=parse_number(o["budget"], "--budget", minimum=0.01, example="6"),
        max_iters=parse_count(o["max_iters"], "--max-iters", maximum=100_000),
        efficiency=None if o["efficiency"] is None else parse_number(o["efficiency"], "--efficiency",
                                                                     minimum=1e-6, example="0.94"),
        calibrate=o["calibrate"], calibrate_bandwidth=o["calibrate_bandwidth"], nice=parse_nice(o["nice"]))
    common = {k: v for k, v in given.items() if v is not None}
    return [ValidateConfig(topology=t, **common) for t in split_list(o["topology"], "topology list")]


def _measure(output: Output, configs: list) -> list[dict]:
    """Run every validation, printing each as it ends; a failed system command is one error line."""
    from fabriclab.bench.validate.run import run_validation
    from fabriclab.emu.netns import EmuError

    results = []
    for config in configs:
        output.note(f"validating on the emulated {config.topology} ({config.hosts} hosts, {config.link} / "
                    f"{config.dilation:g}): {len(config.algos)} algorithms x {len(config.sizes_bytes)} sizes ...")
        try:
            result = run_validation(config)
        except EmuError as exc:
            print_error(exc)
            raise typer.Exit(EXIT_FAILED) from None
        results.append(result)
        _print_one(output, config, result)
    return results


def _report_record(output: Output, path: Path, out: Path | None) -> None:
    """`--from-record`: the tables and summary of a recorded validation (and its `--out` files)."""
    from fabriclab.report import validate as report

    record = report.read_validate_record(path)
    runs = record["results"]["runs"]
    for result in runs:
        output.table(report.table(result["rows"], title=f"validate: {result.get('topology_name', '?')}"))
    _finish(output, [r for result in runs for r in result["rows"]], out, record.get("config", {}), None)


def _finish(output: Output, rows: list[dict], out: Path | None, config_dict: dict,
            results: list[dict] | None) -> dict:
    """Print the summary; with `out`, write the record (when measured now), CSV, Markdown and plot."""
    from fabriclab.report import validate as report

    summary = report.summarize(rows)
    output.note("summary (all topologies, sizes >= 1 MB; goal |error| <= 10 %):")
    for line in report.summary_lines(summary):
        output.note(f"  {line}")
    output.note("  worst |error| of the model per algorithm: "
                + ", ".join(f"{a} {e:.1f}%" for a, e in report.per_algo(rows).items()))
    if out is not None:
        report.write_outputs(out, rows, summary, config_dict, results)
        output.note(f"wrote {out}: validate.csv, .md, .png" + (", .json" if results else ""))
    return summary


def _print_one(output: Output, config, result: dict) -> None:
    from fabriclab.bench.validate.model import TCP_PAYLOAD_EFFICIENCY
    from fabriclab.report import validate as report
    from fabriclab.units import format_size

    model, cal = result["model"], result["calibration"]
    source = "streaming goodput" if config.calibrate and config.calibrate_bandwidth else "TCP payload"
    output.table(report.table(result["rows"], title=f"validate: {result['topology_name']}, emulated at "
                              f"{result['emulated_rate_Bps'] * 8 / 1e6:g} Mbit/s (D={config.dilation:g}); "
                              f"times in the emulation's time"))
    output.note(f"  plain: shaped rate, {result['hop_latency_s'] * 1e6:.2f} us per hop (measured). model: x "
                f"{model['efficiency']:.4f} ({source}; TCP framing alone {TCP_PAYLOAD_EFFICIENCY:.4f}), "
                f"alpha {model['alpha_s'] * 1e6:.0f} us per message (neighbour step "
                f"{cal.get('step_s', 0) * 1e6:.0f} us, 2-rank one-way {cal.get('one_way_s', 0) * 1e6:.0f} us), "
                f"gamma {model['gamma_s_per_byte'] * 1e9:.3f} ns/B, copy {model['copy_s_per_byte'] * 1e9:.3f} "
                f"ns/B, segments {format_size(model['segment_bytes'])}, bucket {model['burst_bytes']} B")
    load = (result["load_before"], result["load_after"])
    output.note(f"  machine load before/after: {load[0].get('loadavg_1min', 0):.2f}/"
                f"{load[1].get('loadavg_1min', 0):.2f}, CPU pressure "
                f"{load[0].get('cpu_pressure_avg10_pct', float('nan')):.0f}%/"
                f"{load[1].get('cpu_pressure_avg10_pct', float('nan')):.0f}%")
    for line in report.summary_lines(report.summarize(result["rows"])):
        output.note(f"  {line}")
