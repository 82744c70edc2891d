"""`fabriclab plan --model <LLM>`: the LLM plan's options, its request, its tables and its record.

`plan` (cli/plan.py) hands over when `--model` names an LLM (`plan.llm.names_llm`): the candidate clusters
(`--clusters`, presets or files), the variations (`--nic-rates`, `--fabrics rail,fat-tree`, `--bisection`),
the job (`--gbs`, `--seq`, `--precision`) and the search's limits (`--max-configs`, `--exhaustive`) become an
`LlmPlanRequest`; `--tp/--pp/--ep/--zero` fix (`--tp 4`) or bound (`--tp 2-8`, `--zero 1,3`) the search,
`--efficiency` sets a share of peak for every matrix, `--grad-dtype` and `--memory-reserve` are the memory
check's (`whatif llm`'s). `plan.llm.run_llm_plan` answers it. Printed: the best configuration of every
option and GPU count with its throughput and cost (`P`: the Pareto frontier), what it buys (GPUs in whole
servers or racks, the servers' and the network's dollars, the network's share, its switch tiers), its
configuration, memory and step, what the network costs in it (the exposed TP/CP/EP/PP/DP communication and
the bubble, their share of the step and that share of the cluster's dollars; columns that are zero in every
row are left out, --json has them all), the runner-up configuration, which options tie and whether because
the network is hidden, where a PCIe path caps the NICs (once per cause), the memory notes of what
fits nowhere, one recommendation per GPU count, where compute comes from, the prices' sources and what the
search did; a table wider than 80 columns is split into tables of its columns, each led by `#`; `--json`
carries every simulated configuration.

Try it: `fabriclab plan --model llama3-70b --gpus 1024,4096 --clusters dgx-h100 --nic-rates 400Gbps,800Gbps`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.table import Table

from fabriclab.cli.common import Output, split_list
from fabriclab.cli.ignored import warn_ignored
from fabriclab.cli.llm_options import (CalibratedOption, GradDtypeOption, MemoryReserveOption, calibrated_cluster,
                                       memory_options, parse_share)
from fabriclab.cli.goodput_options import RankOption, parse_rank
from fabriclab.cli.options import load_cluster_option, parse_bisection, parse_count
from fabriclab.cli.plan.goodput import goodput_tables

RoutingsOption = Annotated[Optional[str], typer.Option(
    "--routings", metavar="NAMES", help="With an LLM: how flows find a spine, to compare: ideal, ecmp, adaptive "
                                        "(default: each cluster's network.routing).")]
PlanSeedsOption = Annotated[Optional[str], typer.Option(
    "--seeds", metavar="N", help="With an LLM: draws of ECMP's hashes the best configuration runs over (median, "
                                 "90th percentile; default 1).")]
ClustersOption = Annotated[Optional[str], typer.Option(
    "--clusters", metavar="PRESETS|FILES", help="With an LLM: candidate clusters, presets or cluster files, comma "
    "separated (default: dgx-h100,hgx-h200, the H100-class presets).")]
NicRatesOption = Annotated[Optional[str], typer.Option(
    "--nic-rates", metavar="RATES", help="With an LLM: NIC rates per GPU to compare, e.g. 400Gbps,800Gbps "
    "(default: each cluster's own).")]
GbsOption = Annotated[Optional[str], typer.Option(
    "--gbs", metavar="N", help="With an LLM: global batch in sequences (default: ~16M tokens, 2,048 x 8,192 as "
    "Llama 3 405B, a power of two sequences).")]
SeqOption = Annotated[Optional[str], typer.Option("--seq", metavar="TOKENS", help="With an LLM: sequence length "
                                                  "(default: the model's).")]
PrecisionOption = Annotated[Optional[str], typer.Option("--precision", metavar="P", help="With an LLM: bf16 "
                                                        "(default) or fp8 matrix math.")]
MaxConfigsOption = Annotated[Optional[str], typer.Option(
    "--max-configs", metavar="N", help="With an LLM: most configurations simulated per option and GPU count "
    "(default 1000).")]
ExhaustiveOption = Annotated[bool, typer.Option(
    "--exhaustive", help="With an LLM: simulate every configuration that fits, not only those whose lower bound "
    "beats the best (the same best, slower; --json then holds them all).")]

def _bound_option(name: str, what: str):
    return Annotated[Optional[str], typer.Option(
        f"--{name}", metavar="N|A-B|A,B", help=f"With an LLM: {what} the search may take: one (--{name} 4) fixes "
                                                f"it, a range or list bounds it (default: all it allows).")]


TpBoundOption = _bound_option("tp", "tensor-parallel sizes")
PpBoundOption = _bound_option("pp", "pipeline stages")
EpBoundOption = _bound_option("ep", "expert-parallel sizes")
ZeroBoundOption = _bound_option("zero", "ZeRO stages (0-3)")
PlanGradDtypeOption = Annotated[Optional[str], GradDtypeOption.__metadata__[0]]
PlanCalibratedOption = CalibratedOption
EfficiencyOption = Annotated[Optional[str], typer.Option(
    "--efficiency", metavar="SHARE", help="With an LLM: share of peak every matrix reaches, e.g. 0.45 (default: "
    "each cluster's calibration, else its kernel model).")]

LLM_ONLY = ("clusters", "nic_rates", "gbs", "seq", "precision", "max_configs", "tp", "pp", "ep", "zero",
            "efficiency", "grad_dtype", "memory_reserve", "calibrated", "routings", "seeds", "rank")
# CNN-only options and their defaults: given otherwise with an LLM, they are an error, not silently ignored
CNN_ONLY = {"gpus_per_server": None, "levels": None, "algo": None, "hosts_per_leaf": None, "placement": "linear",
            "fusion": "time-or-size", "target": None, "iteration_time": None, "radix": None,
            "nics_per_server": None, "rails": False, "nic": None}


def check_cnn_options(o: dict) -> None:
    """A CNN plan with an LLM option is an error that says so."""
    from fabriclab.plan.llm import llm_config_problem

    given = [name for name in LLM_ONLY if o[name] is not None] + (["exhaustive"] if o["exhaustive"] else [])
    problem = llm_config_problem(o["model"]) if given else None
    if problem is not None:  # LLM options with a config.json that does not read: the file is what to fix
        raise ValueError(f"--model {problem}")
    if given:
        raise ValueError(f"--{given[0].replace('_', '-')} applies to an LLM plan (--model llama3-70b, a config.json): "
                         f"drop it for {o['model']}")


def _rates(text: str | None) -> tuple[float, ...]:
    from fabriclab.units import parse_bandwidth

    return () if text is None else tuple(dict.fromkeys(parse_bandwidth(t) for t in split_list(text, "--nic-rates")))


def llm_request(o: dict):
    """The `LlmPlanRequest` of the parsed command line `o`; CNN-only options are an error."""
    from fabriclab.cli.routing_options import parse_seeds
    from fabriclab.fabric.presets import PRESETS
    from fabriclab.plan.llm import DEFAULT_CLUSTERS, DEFAULT_MAX_CONFIGS, MAX_LLM_GPUS, LlmPlanRequest
    from fabriclab.units import parse_int_list

    for name, default in CNN_ONLY.items():
        if o[name] != default:
            raise ValueError(f"--{name.replace('_', '-')} applies to CNN plans: drop it for {o['model']} (an LLM "
                             f"plan takes --clusters, --nic-rates, --fabrics, --bisection, --gbs, --seq, --budget)")
    if o["cluster"] is not None and o["clusters"] is not None:
        raise ValueError("give the candidates with --clusters only (--cluster names one of them)")
    if "," in o["model"]:
        raise ValueError(f"--model {o['model']!r}: an LLM plan takes one model")
    names = split_list(o["clusters"] or o["cluster"] or ",".join(c for c in DEFAULT_CLUSTERS if c in PRESETS),
                       "--clusters")
    return LlmPlanRequest(
        model=o["model"].strip(),
        clusters=tuple((n, calibrated_cluster(load_cluster_option(n, "--clusters"), o["calibrated"]))
                       for n in dict.fromkeys(names)),
        gpus=tuple(parse_int_list(o["gpus"] or "1024", minimum=1, maximum=MAX_LLM_GPUS, what="GPU counts")),
        nic_rates_Bps=_rates(o["nic_rates"]),
        fabrics=() if o["fabrics"] is None else tuple(dict.fromkeys(split_list(o["fabrics"], "--fabrics"))),
        bisections=() if o["bisection"] is None else tuple(dict.fromkeys(
            parse_bisection(b) for b in split_list(o["bisection"], "bisections"))),
        routings=_routings(o["routings"]), seeds=1 if o["seeds"] is None else parse_seeds(o["seeds"]),
        gbs=None if o["gbs"] is None else parse_count(o["gbs"], "--gbs"),
        seq=None if o["seq"] is None else parse_count(o["seq"], "--seq"),
        precision=(o["precision"] or "bf16").strip().lower(),
        max_configs=DEFAULT_MAX_CONFIGS if o["max_configs"] is None else parse_count(o["max_configs"], "--max-configs"),
        exhaustive=o["exhaustive"], budget_usd=_budget(o["budget"]),
        prices_path=None if o["prices"] is None else str(o["prices"]), bounds=_bounds(o),
        efficiency=parse_share(o["efficiency"]), memory=memory_options(o["grad_dtype"] or "fp32", o["memory_reserve"]),
        rank=parse_rank(o["rank"]))


def _routings(text: str | None) -> tuple[str, ...]:
    """`--routings ideal,ecmp,adaptive` (dmodk: ideal)."""
    from fabriclab.fabric.cluster import ROUTINGS

    if text is None:
        return ()
    words = ["ideal" if w.lower() == "dmodk" else w.lower() for w in split_list(text, "--routings")]
    bad = [w for w in words if w not in ROUTINGS]
    if bad:
        raise ValueError(f"--routings {bad[0]!r}: use one or more of {', '.join(ROUTINGS)}")
    return tuple(dict.fromkeys(words))


def _bounds(o: dict):
    """`SearchBounds` of --tp, --pp, --ep, --zero: `4`, `2-8` or `2,8` (units.parse_int_list)."""
    from fabriclab.plan.llm.space import SearchBounds
    from fabriclab.units import parse_int_list

    limits = {"tp": (1, 64), "pp": (1, 1024), "ep": (1, 1024), "zero": (0, 3)}
    values = {name: None if o[name] is None else tuple(parse_int_list(o[name], minimum=lo, maximum=hi,
                                                                      what=f"--{name} values"))
              for name, (lo, hi) in limits.items()}
    return SearchBounds(**values)


def _budget(text: str | None) -> float | None:
    from fabriclab.cli.options import parse_number

    if text is None:
        return None
    value = parse_number(text.replace(",", "").lstrip("$"), "--budget", minimum=0.0, example="500000000")
    if value <= 0:
        raise ValueError(f"--budget {text}: give the most the cluster may cost, > 0 US dollars")
    return value


def _ignored(o: dict, request) -> list:
    """The LLM plan's options given but without effect on it (`cli/ignored.py`)."""
    routings = request.routings or tuple(c.network.routing for _, c in request.clusters)
    drawn = "ecmp" in routings or any(c.network.placement == "scattered" for _, c in request.clusters)
    return [(request.seeds > 1 and not drawn, "--seeds",
             f"with routing {', '.join(dict.fromkeys(routings))}: nothing is drawn, one answer per option; add "
             f"--routings ecmp or drop it"),
            (o["calibrated"] is not None and o["efficiency"] is not None, "--calibrated",
             "with --efficiency: that share of peak replaces every calibration; drop one of them")]


def run_llm(o: dict) -> None:
    """`plan` for an LLM: request, search, tables, notes, record (module doc)."""
    from fabriclab.plan.llm import run_llm_plan

    from fabriclab.cli.points_options import point_runner

    output = Output(o["fmt"], o["json_path"], o["store"])
    request = llm_request(o)
    warn_ignored(_ignored(o, request))
    with point_runner(o["scheduler"], o["processes"], o["resume"], o["store"], "plan points") as runner:
        result = run_llm_plan(request, run_points=runner)
    print_llm_plan(output, request, result)
    config = {"model": request.model, "gpus": list(request.gpus), "clusters": [n for n, _ in request.clusters],
              "nic_rates_Gbps": [r * 8 / 1e9 for r in request.nic_rates_Bps], "fabrics": list(request.fabrics),
              "bisections": [str(b) for b in request.bisections], "routings": list(request.routings),
              "seeds": request.seeds, "gbs": result.stats["gbs"],
              "seq": result.stats["seq"], "precision": request.precision, "max_configs": request.max_configs,
              "exhaustive": request.exhaustive, "budget_usd": request.budget_usd, "prices": request.prices_path,
              **{f"bound_{k}": getattr(request.bounds, k) for k in ("tp", "pp", "ep", "zero")},
              "efficiency": request.efficiency, "grad_bytes": request.memory.grad_bytes,
              "memory_reserve_bytes": request.memory.reserve_bytes, "rank": request.rank}
    results = {"rows": result.rows, "configs": result.configs, "unfit": result.unfit,
               "recommendations": result.recommendations, "ties": result.ties, "pcie": result.pcie,
               "compute": result.compute, "stats": result.stats}
    if o["out"] is not None:
        from fabriclab.record import write_outputs

        write_outputs(o["out"], "plan", "plan.llm", config, results, result.configs)
        output.note(f"rows: {Path(o['out']) / 'plan.csv'} (every simulated configuration)")
    best = max(result.rows, key=lambda r: r["tokens_per_s"])
    output.record("plan.llm", config, results, top={"tokens_per_s": best["tokens_per_s"], "option": best["option"]})


def options_table(rows: list[dict], model: str) -> Table:
    """Throughput and cost of every option's best configuration; `#` numbers the rows for the next table."""
    from fabriclab.plan.llm.report import short_money

    table = Table(title=f"LLM plan, {model}: best configuration per option (P: Pareto frontier)")
    for h in ("#", "option", "GPUs", "tokens/s", "MFU", "cost", "$/(tok/s)", "P"):
        table.add_column(h, justify="left" if h == "option" else "right")
    for i, r in enumerate(rows, 1):
        table.add_row(str(i), r["option"], f"{r['gpus']:,}", f"{r['tokens_per_s']:,.0f}", f"{r['mfu']:.1%}",
                      short_money(r["cluster_usd"]), f"{r['usd_per_token_per_s']:,.1f}",
                      "P" if r["pareto"] else "")
    return table


def bought_table(rows: list[dict]) -> Table:
    """What each row buys: its GPUs in whole servers or NVLink racks, the servers' and the network's dollars,
    the network's share of the cost and the switch levels its radix needs."""
    from fabriclab.plan.llm.report import bought, short_money

    table = Table(title="what each option buys (net: the network's share; tiers of radix-port switches)")
    for h in ("#", "GPUs bought", "in", "servers", "network", "net", "tiers", "radix"):
        table.add_column(h, justify="left" if h == "in" else "right")
    for i, r in enumerate(rows, 1):
        table.add_row(str(i), f"{r['gpus_bought']:,}", bought(r), short_money(r["servers_usd"]),
                      short_money(r["network_usd"]), f"{r['network_share']:.1%}", str(r["network_levels"]),
                      str(r["switch_radix"]))
    return table


def configs_table(rows: list[dict]) -> Table:
    """The configuration, memory and step of each row of `options_table`, and how many were simulated."""
    table = Table(title="their parallel configuration, memory per GPU and step")
    for h in ("#", "configuration", "GB/GPU", "step (s)", "simulated/fit"):
        table.add_column(h, justify="left" if h == "configuration" else "right")
    for i, r in enumerate(rows, 1):
        table.add_row(str(i), r["parallel"], f"{r['memory_per_gpu_bytes'] / 1e9:.1f}", f"{r['step_time_s']:.4g}",
                      f"{r['num_simulated']:,}/{r['num_fit']:,}" + ("*" if r["search_cut"] else ""))
    return table


SPLIT_COLUMNS = (("compute", "compute"), ("tp", "TP"), ("cp", "CP"), ("ep", "EP"), ("pp", "PP"), ("dp", "DP"),
                 ("bubble", "bubble"), ("optimizer", "optim"))


def network_table(rows: list[dict]) -> Table:
    """Where each row's step goes: compute, the exposed communication per communicator, the bubble, their
    share of the step (`comm`) and what that share of the time costs of the cluster's dollars (`comm $`); a part
    that is zero in every row is left out (--json has them all)."""
    from fabriclab.plan.llm.report import communication_usd, exposed_share, short_money

    shown = [(k, h) for k, h in SPLIT_COLUMNS if k == "compute" or any(r["split_s"].get(k, 0) > 0 for r in rows)]
    table = Table(title="what communication costs: seconds exposed a step, their share, its dollars")
    for h in ("#", *(h for _, h in shown), "comm", "comm $"):
        table.add_column(h, justify="right")
    for i, r in enumerate(rows, 1):
        table.add_row(str(i), *(_seconds(r["split_s"].get(k, 0)) for k, _ in shown), f"{exposed_share(r):.1%}",
                      short_money(communication_usd(r)))
    return table


def _seconds(value: float) -> str:
    return f"{value:.3g}" if value >= 1e-9 else "0"  # rounding noise of the schedule's sums reads as 0


def fabric_table(rows: list[dict]) -> Table:
    """The fabric's mechanisms per option: the step over the draws and what routing and congestion control
    add to the best configuration's flow-model step."""
    table = Table(title="the fabric as it runs: the best configuration's step (s) over the --seeds draws (the rows "
                        "above show the draw at the median), its flow-model step and what routing and congestion "
                        "control add")
    for col in ("#", "routing", "transport", "median", "p90", "flow model", "+routing", "+congestion"):
        table.add_column(col, justify="left" if col in ("routing", "transport") else "right")
    for i, r in enumerate(rows, 1):
        table.add_row(str(i), r["routing"], r["transport"], _seconds(r["step_time_s_median"]),
                      _seconds(r["step_time_s_p90"]), _seconds(r["flow_model_step_s"]), _seconds(r["routing_cost_s"]),
                      _seconds(r["congestion_cost_s"]))
    return table


def runner_up_table(rows: list[dict]) -> Table:
    """Each row's second-best configuration and how much longer its step is."""
    table = Table(title="the runner-up configuration of each row")
    for h in ("#", "configuration", "step (s)", "slower"):
        table.add_column(h, justify="left" if h == "configuration" else "right")
    for i, r in enumerate(rows, 1):
        if r["runner_up"] is None:
            table.add_row(str(i), "(only one fits)", "", "")
        else:
            table.add_row(str(i), r["runner_up"], f"{r['runner_up_step_s']:.4g}", f"{r['runner_up_slower']:+.1%}")
    return table


def print_llm_plan(output: Output, request, result) -> None:
    """The tables and the notes (module doc)."""
    from fabriclab.report.tables import fit_width

    rows = result.rows
    tables = [options_table(rows, result.stats["model"]), bought_table(rows), configs_table(rows),
              network_table(rows), runner_up_table(rows)]
    if any((r["routing"], r["transport"]) != ("ideal", "ideal") for r in rows):
        tables.append(fabric_table(rows))
    tables += goodput_tables(rows)  # with --rank goodput
    for table in (part for t in tables for part in fit_width(t, 80)):  # an 80-column terminal or log
        output.table(table)
    for line in [*result.ties, *result.pcie]:
        output.note(line)
    warned: dict = {}  # one line per distinct warning, with the rows it concerns
    for i, r in enumerate(rows, 1):
        if r.get("memory_warning"):
            warned.setdefault(r["memory_warning"], []).append(f"#{i}")
    for warning, where in warned.items():
        output.note(f"{', '.join(where)} {warning}")
    for line in _unfit_lines(result.unfit, result.stats["model"]):
        output.note(line)
    for text in result.recommendations:
        output.note(text)
    by_source: dict = {}
    for c in result.compute:
        by_source.setdefault(c["source"], []).append(c["cluster"])
    for source, clusters in by_source.items():
        output.note(f"compute on {', '.join(clusters)}: {source}")
    for line in _price_lines(result.rows):
        output.note(line)
    s = result.stats
    cut = any(r["search_cut"] for r in result.rows) * "; * the search stopped at --max-configs: not proven best"
    options = f"{s['num_options']} option" + ("s" if s["num_options"] > 1 else "")
    output.note(f"{s['num_enumerated']:,} configurations on {options}: {s['num_fit']:,} fit in "
                f"memory, {s['num_simulated']:,} simulated, {s['num_bounded']:,} skipped by a lower bound (the best "
                f"two are still the best two of all); global batch {s['gbs']:,} x {s['seq']:,} tokens; {s['wall_s']:.1f} s{cut}")


def _unfit_lines(unfit: list[dict], model: str) -> list[str]:
    """One line per (GPU count, cluster) where nothing fits: its variations share the memory need."""
    groups: dict = {}
    for u in unfit:
        groups.setdefault((u["gpus"], u["cluster"]), []).append(u)
    lines = []
    for (gpus, cluster), us in groups.items():
        u, many = us[0], f" ({len(us)} options)" if len(us) > 1 else ""
        head = f"{model} fits no configuration on {cluster} at {gpus:,} GPUs{many}"
        if u["smallest_parallel"]:
            lines.append(head + f": the smallest need found is {u['smallest_need_bytes'] / 1e9:.1f} GB per GPU of "
                                f"{u['gpu_memory_bytes'] / 1e9:.0f} GB ({u['smallest_parallel']})")
        else:
            lines.append(head + ": no configuration divides it with this global batch")
    return lines


def _price_lines(rows: list[dict]) -> list[str]:
    servers = {r["gpu"]: (r["server_price_per_gpu_usd"], r["server_price_source"]) for r in rows}
    lines = [f"{gpu} servers at ${usd:,.0f} per GPU: {source}" for gpu, (usd, source) in servers.items()]
    fabrics = {r["priced_fabric"]: r["network_prices_from"] for r in rows}
    return lines + [f"{name} network (NICs, switch ports, cables): {where}" for name, where in fabrics.items()]
