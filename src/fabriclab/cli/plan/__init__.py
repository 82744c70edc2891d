"""`fabriclab plan`: how much network to buy for a model on N GPUs, in throughput and in money.

Every option (fabric x fat-tree levels x bisection x GPU count x algorithm) is simulated on its real
topology (`fabriclab.plan.search`), priced from a price table (`--prices FILE`; the shipped one is
illustrative), and shown with its scaling factor, images/s, network cost, the network's share of the
cluster and the cost per images/s; `P` marks the Pareto frontier of each GPU count, and one line per
GPU count recommends the cheapest option that reaches `--target` (or the best within `--budget`).
With `--cluster FILE` (from `fabriclab calibrate nccl-tests ... --out FILE`) the option is that calibrated
cluster instead of the --fabrics x --levels x --bisection grid (`plan/cluster.py`): its GPUs per
server, network and NCCL model; --fabrics then only names the price entry of its network.
With `--model` naming an LLM (a built-in or a config.json) the plan searches parallel configurations on
candidate clusters instead (`cli/plan/llm.py`, `plan/llm/__init__.py`): `--clusters`, `--nic-rates`,
`--fabrics rail,fat-tree`, `--bisection`, `--gbs`, `--seq`, `--precision`, `--max-configs`, `--exhaustive`.

Try it: `fabriclab plan --model resnet50 --gpus 64,256,512 --fabrics 25gbe,100g-opa,100gbe,200g-hdr,400g-ndr
--bisection 1,1/2,1/4 --target 0.9 --out results/plan`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer
from rich.table import Table

from fabriclab.cli.common import (FormatOption, JsonOption, Output, StoreOption, check_output_dir, split_list,
                                  user_errors)
from fabriclab.cli.options import PRESET_NAMES, load_cluster_option, parse_bisection
from fabriclab.cli.points_options import ProcessesOption, ResumeOption, SchedulerOption, point_runner
from fabriclab.cli.nic_options import NicOption, NicsPerServerOption, RadixOption, RailsOption, swap_nic
from fabriclab.cli.plan.llm import (ClustersOption, EfficiencyOption, EpBoundOption, ExhaustiveOption, GbsOption,
                                    MaxConfigsOption, MemoryReserveOption, NicRatesOption, PlanCalibratedOption, PlanGradDtypeOption,
                                    PlanSeedsOption, PpBoundOption, PrecisionOption, RoutingsOption, SeqOption,
                                    TpBoundOption, ZeroBoundOption,
                                    RankOption, check_cnn_options, run_llm)
from fabriclab.units import parse_int_list, parse_time

DEFAULT_FABRICS = "25gbe,100g-opa,100gbe,200g-hdr,400g-ndr"
DEFAULT_GPUS = "64,256,512"
DEFAULT_BISECTIONS = "1,1/2,1/4"


def _float(text: str | None, what: str, example: str) -> float | None:
    if text is None:
        return None
    try:
        value = float(text.replace(",", "").lstrip("$"))
    except ValueError:
        raise ValueError(f"{what} {text!r} is not a number: write e.g. {example}") from None
    if value != value:
        raise ValueError(f"{what} is NaN: write a number, e.g. {example}")
    return value


def _levels(text: str | None) -> tuple[int, ...]:
    if text is None:
        return ()
    try:
        return tuple(dict.fromkeys(int(item) for item in split_list(text, "levels")))
    except ValueError as exc:
        raise ValueError(f"--levels {text!r}: write 2, 3 or 2,3 ({exc})") from None


def plan_request(o: dict):
    """The `PlanRequest` of the parsed command line `o` (the plan command's parameters)."""
    from fabriclab.plan.request import MAX_PLAN_GPUS, PlanRequest

    cluster = None if o["cluster"] is None else load_cluster_option(o["cluster"])
    return PlanRequest(
        models=tuple(split_list(o["model"], "models")),
        gpus=tuple(parse_int_list(o["gpus"], minimum=1, maximum=MAX_PLAN_GPUS, what="GPU counts")),
        gpus_per_server=o["gpus_per_server"],
        fabrics=None if o["fabrics"] is None else tuple(split_list(o["fabrics"], "fabrics")),
        levels=_levels(o["levels"]), bisections=tuple(parse_bisection(b) for b in split_list(o["bisection"], "bisections")),
        algos=tuple(split_list(o["algo"] or "nccl", "algorithms")), hosts_per_leaf=o["hosts_per_leaf"],
        radix=o["radix"], nics_per_server=o["nics_per_server"], rails=o["rails"],
        placement=o["placement"], fusion=o["fusion"], target=_float(o["target"], "--target", "0.9"),
        budget_usd=_float(o["budget"], "--budget", "500000"),
        prices_path=None if o["prices"] is None else str(o["prices"]),
        iteration_s=parse_time(o["iteration_time"]) if o["iteration_time"] else None,
        cluster=cluster if o["nic"] is None else swap_nic(cluster, o["nic"], o["cluster"]),
        cluster_name=o["cluster"] or "")


def plan_table(rows: list[dict]) -> Table:
    """The options table: model and algorithm columns only when there is more than one."""
    many_models = len({r["model"] for r in rows}) > 1
    many_algos = len({r["algo"] for r in rows}) > 1
    has_share = any(r["network_share"] is not None for r in rows)
    table = Table(title="network plan: scaling, throughput and cost per option (P: Pareto frontier)")
    headers = (["model"] if many_models else []) + ["fabric", "tree", "GPUs"] + (["algo"] if many_algos else [])
    headers += ["scaling", "images/s", "network $"] + (["share"] if has_share else []) + ["$/(img/s)", "P"]
    for h in headers:
        table.add_column(h, justify="left" if h in ("model", "fabric", "tree", "algo") else "right")
    for r in rows:
        tree = "1 switch" if r["levels"] == 1 else f"{r['levels']}L {r['bisection']}"
        cells = ([r["model"]] if many_models else []) + [r["fabric"], tree, str(r["gpus"])]
        cells += [r["algo"]] if many_algos else []
        cells += [f"{r['scaling_factor']:.3f}", f"{r['images_per_s']:,.0f}", f"{r['network_usd']:,.0f}"]
        if has_share:
            cells.append("-" if r["network_share"] is None else f"{r['network_share']:.1%}")
        cells += [f"{r['usd_per_image_per_s']:,.1f}", "P" if r["pareto"] else ""]
        table.add_row(*cells)
    return table


@user_errors
def plan(
    model: str = typer.Option("resnet50", help="Model(s): built-in V100 profiles (resnet50, resnet101, vgg16) "
                              "or profile files from `fabriclab profile`, comma separated; or one LLM (llama3-70b, "
                              "... `fabriclab models`; a config.json): then parallel configurations are searched."),
    gpus: Optional[str] = typer.Option(None, help="GPU counts, e.g. 64,256,1024 (default 64,256,512; LLM 1024)."),
    gpus_per_server: Optional[int] = typer.Option(None, help="GPUs per server (default 2, TX-GAIA; not with "
                                                "--cluster)."),
    nics_per_server: NicsPerServerOption = None, rails: RailsOption = False, radix: RadixOption = None,
    nic: NicOption = None,
    fabrics: Optional[str] = typer.Option(None, help=f"Link presets to compare (default {DEFAULT_FABRICS}); "
                                          "with --cluster the price entries of its network (default: those "
                                          "at its NIC rate); with an LLM the networks rail and/or fat-tree."),
    cluster: Optional[str] = typer.Option(None, "--cluster", metavar="FILE|PRESET",
                                          help="A cluster file from `fabriclab calibrate nccl-tests ... --out "
                                               f"FILE`, or a preset ({', '.join(PRESET_NAMES)}): plan that cluster "
                                               "(its servers, network and NCCL model) instead of the --fabrics "
                                               "grid; --levels, --bisection, --algo, --hosts-per-leaf, "
                                               "--placement do not apply."),
    levels: Optional[str] = typer.Option(None, help="Fat-tree levels: 2, 3 or 2,3 (default: the fewest the switch "
                                         "radix allows)."),
    bisection: Optional[str] = typer.Option(None, "--bisection", "--bisections", help="Bisection ratios in 1 .. "
                                            "1/16, e.g. 1,1/2,1/4 (default 1,1/2,1/4; LLM: each cluster's)."),
    algo: Optional[str] = typer.Option(None, help="All-reduce algorithm(s) (`fabriclab collectives list`); default "
                                       "nccl: NCCL's own choice of ring or tree per bucket size and scale."),
    hosts_per_leaf: Optional[int] = typer.Option(None, help="NICs per leaf switch (and leaves per pod, 3 levels; "
                                                 "default: as many as the radix allows)."),
    placement: str = typer.Option("linear", help="Ranks on GPUs: linear, round-robin or random."),
    fusion: str = typer.Option("time-or-size", help="Gradient fusion: time-or-size (5 ms / 64 MiB, Zhang et al.), horovod, ddp, none."),
    target: Optional[str] = typer.Option(None, help="Scaling factor to reach (default 0.9 without --budget)."),
    budget: Optional[str] = typer.Option(None, help="Most the network (LLM: the cluster) may cost, in US dollars."),
    prices: Optional[Path] = typer.Option(None, "--prices", metavar="FILE", dir_okay=False,
                                          help="Price table (JSON; default: the shipped illustrative one)."),
    iteration_time: Optional[str] = typer.Option(None, help="Single-GPU iteration time for a .bk.log profile."),
    clusters: ClustersOption = None, nic_rates: NicRatesOption = None, routings: RoutingsOption = None,
    seeds: PlanSeedsOption = None, gbs: GbsOption = None, rank: RankOption = None,
    seq: SeqOption = None, precision: PrecisionOption = None, max_configs: MaxConfigsOption = None,
    exhaustive: ExhaustiveOption = False, tp: TpBoundOption = None, pp: PpBoundOption = None,
    ep: EpBoundOption = None, zero: ZeroBoundOption = None, efficiency: EfficiencyOption = None,
    grad_dtype: PlanGradDtypeOption = None, memory_reserve: MemoryReserveOption = None,
    calibrated: PlanCalibratedOption = None, scheduler: SchedulerOption = None, processes: ProcessesOption = None, resume: ResumeOption = False,
    out: Optional[Path] = typer.Option(None, "--out", metavar="DIR",
                                       help="Write the plot (scaling factor vs cost) and the rows here (LLM: the "
                                            "record and every simulated configuration)."),
    fmt: FormatOption = None,
    json_path: JsonOption = None,
    store: StoreOption = None,
) -> None:
    """How much network to buy: scaling, throughput and cost of every fabric and bisection option; for an
    LLM, the best parallel configuration of every cluster option, its throughput and cost."""
    from fabriclab.plan.llm import check_model_names, names_llm

    o = locals()
    check_output_dir(out)
    if names_llm(model):
        return run_llm(o)
    check_model_names(model)
    check_cnn_options(o)
    _plan_cnn({**o, "gpus": gpus or DEFAULT_GPUS, "bisection": bisection or DEFAULT_BISECTIONS})


def _plan_cnn(o: dict) -> None:
    """The CNN plan of the parsed command line `o` (defaults filled in)."""
    from fabriclab.plan import request as planning

    output, out = Output(o["fmt"], o["json_path"], o["store"]), o["out"]
    request = plan_request(o)
    spec = planning.plan_spec(request)
    if request.cluster is not None and (o["scheduler"] or o["processes"] or o["resume"]):
        raise ValueError("--cluster plans one calibrated cluster here in a moment (no simulations): drop "
                         "--scheduler, --processes and --resume")
    with point_runner(o["scheduler"], o["processes"], o["resume"], o["store"], "plan points") as runner:
        result = planning.run(spec, request, run_points=runner)
    _print_plan(output, spec, request, result)
    config = {"model": o["model"], "gpus": o["gpus"], "gpus_per_server": spec.node.gpus_per_server,
              "fabrics": o["fabrics"] if request.cluster is None or o["fabrics"] else ",".join(spec.fabrics),
              "cluster": o["cluster"], "levels": o["levels"], "bisection": o["bisection"],
              "algo": ",".join(spec.algos), "hosts_per_leaf": o["hosts_per_leaf"], "radix": o["radix"],
              "nics_per_server": spec.node.nics_per_server, "rails": o["rails"], "nic": o["nic"],
              "placement": o["placement"], "fusion": o["fusion"],
              "target": spec.target, "budget_usd": spec.budget_usd, "gamma_s_per_byte": spec.node.gamma_s_per_byte,
              "prices": spec.prices.source, "price_label": spec.prices.label}
    results = {"rows": result.rows, "recommendations": result.recommendations, "skipped": result.skipped,
               "stats": result.stats, "prices": planning.prices_used(spec)}
    if out is not None:
        from fabriclab.plan.search import DEFAULT_TARGET
        from fabriclab.record import write_outputs
        from fabriclab.report.plan import plot_plan

        target_line = DEFAULT_TARGET if spec.target is None and spec.budget_usd is None else spec.target
        for path in plot_plan(result.rows, out, target=target_line, price_label=spec.prices.label):
            output.note(f"plot: {path}")
        write_outputs(out, "plan", "plan", config, results, result.rows)
        output.note(f"rows: {out / 'plan.csv'}")
    output.record("plan", config, results)


def _print_plan(output: Output, spec, request, result) -> None:
    output.table(plan_table(result.rows))
    output.note(spec.prices.describe())
    if result.stats.get("price_note"):
        output.note(result.stats["price_note"])
    for label in dict.fromkeys(r["compute"] for r in result.rows if r.get("compute")):
        output.note(f"compute: {label}")
    for rec in result.recommendations:
        output.note(rec["text"])
    for why in result.skipped:
        output.note(f"skipped {why}")
    s, c = result.stats, request.cluster
    if c is not None:
        output.note("scaling range with the cluster's parameters that no log determined at either end: "
                    + "; ".join(f"{r['model']} {r['gpus']} GPUs {r['fabric']} {r['scaling_low']:.3f}-"
                                f"{r['scaling_high']:.3f}" for r in result.rows))
        output.note(f"cluster: {c.description}")
        output.note(f"cluster {c.name} ({request.cluster_name}): {spec.node.gpus_per_server} GPUs and "
                    f"{c.server.nics_per_server} NICs per server, {c.network.fabric} network; "
                    f"{s['num_options']} options, {s['num_predictions']} bucket sizes predicted, {s['wall_s']:.2f} s")
    else:
        output.note(f"{s['num_options']} options on {s['num_topologies']} topologies, "
                    f"{s['num_simulations']} simulator runs, {s['wall_s']:.2f} s")


def register(main_app: typer.Typer) -> None:
    """Add the top-level `plan` command."""
    main_app.command("plan")(plan)
