"""`fabriclab whatif llm`: a transformer's training step (TP, PP, CP, EP, sharded DP) on a cluster.

Prints the step time, tokens/s, MFU, the memory per GPU, where the step goes (compute, exposed
communication per communicator, optimizer, bubble) and every communicator's collectives with their
groups, sizes, times and the algorithm the library picks; `--bandwidth` repeats it with other NIC rates;
`--trace FILE` writes the slowest stage's step as a Chrome/Perfetto trace (chrome://tracing,
ui.perfetto.dev); `--chakra PREFIX` writes the stages' graphs as Chakra execution traces for ASTRA-sim.

Try it: `fabriclab whatif llm --model gpt3-175b --cluster dgx-h100 --gpus 128 --tp 4 --pp 8 --vp 6 --gbs 256`.
"""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.table import Table

from fabriclab.cli.common import (FormatOption, JsonOption, Output, StoreOption, check_output_path,
                                  check_trace_prefix, user_errors)
from fabriclab.cli.llm_options import EtpOption, MoeDispatcherOption, OffloadOption, RecomputeModulesOption
from fabriclab.cli.llm_options import HostOption, MoeImbalanceOption, with_compute
from fabriclab.cli.llm_options import (AttentionOption, BisectionOption, CpOption, EpOption, EpOverlapOption,
                                       CalibratedOption, DomainGpusOption, FabricOption, GpuSpreadOption,
                                       calibrated_cluster,
                                       FsdpUnitOption, GbsOption, GpusOption, NicRateOption, vary_cluster_options,
                                       LlmJob, MbsOption, ModelOption, OrderOption, PpOption, PrecisionOption,
                                       RecomputeOption, SeqOption, ShardGroupOption, SpOption, TpOption,
                                       TpOverlapOption, VpOption, ZeroOption, GradDtypeOption,
                                       MemoryReserveOption, llm_ignored, memory_options, parse_share,
                                       step_options)
from fabriclab.cli.goodput_options import (AsyncCheckpointOption, CheckpointIntervalOption, FailureRatesOption,
                                           RestartTimeOption, StorageBandwidthOption)
from fabriclab.cli.options import ClusterOption, load_cluster_option
from fabriclab.cli.whatif.goodput import job_goodput, report_goodput
from fabriclab.cli.routing_options import (
    BusyOption,
    ClusterRoutingOption,
    JobPlacementOption,
    QpsOption,
    SeedsOption,
    TransportOption,
    parse_seeds,
    routed_cluster,
    routing_ignored,
)
from fabriclab.cli.ignored import warn_ignored

EfficiencyShareOption = Annotated[Optional[str], typer.Option(
    "--efficiency", metavar="SHARE", help="Run every matrix at this share of peak, e.g. 0.45 (default: each kernel "
                                          "by its shape, x the cluster file's `calibrate step` scale).")]
BandwidthsOption = Annotated[Optional[str], typer.Option(
    "--bandwidth", metavar="RATES", help="Also at these NIC rates, e.g. 200Gbps,400Gbps,800Gbps.")]
TraceOption = Annotated[Optional[Path], typer.Option(
    "--trace", help="Write the step as a Chrome/Perfetto trace (JSON): the slowest stage, or --trace-stage.")]
TraceStageOption = Annotated[str, typer.Option("--trace-stage", metavar="N|all|slowest",
                                               help="The stage(s) --trace draws.")]
ChakraOption = Annotated[Optional[Path], typer.Option(
    "--chakra", metavar="PREFIX", help="Write every rank's step as Chakra ET files PREFIX.<rank>.et (for ASTRA-sim).")]

LABELS = {"compute": "compute", "dispatch": "host dispatch", "tp": "TP exposed", "cp": "CP exposed", "ep": "EP exposed",
          "pp": "PP exposed", "dp": "DP exposed", "optimizer": "optimizer", "bubble": "pipeline bubble"}


def _note(out: Output, text: str) -> None:
    out.note(textwrap.fill(text, width=80, subsequent_indent="  ", break_on_hyphens=False))


def print_answer(out: Output, answer) -> None:
    """The step's headline, memory, split and communicators."""
    s = answer.summary()
    _note(out, f"{answer.spec.name} on {s['num_gpus']:,} x {s['gpu']} ({answer.cluster.name}): {s['parallel']}")
    if answer.placement:
        _note(out, f"placement: {answer.placement}; TP, CP and EP groups may span a domain")
    _note(out, f"compute: {answer.compute_line()}")
    _note(out, memory_line(answer.memory))
    from fabriclab.plan.llm.cluster import pcie_cap

    cap = pcie_cap(answer.cluster)
    if cap:
        _note(out, cap)
    if answer.memory.fit is not None and answer.memory.fit.warning:
        _note(out, answer.memory.fit.warning)
    _note(out, f"step time {s['step_time_s']:.4g} s, {s['tokens_per_s']:,.0f} tokens/s, MFU {s['mfu']:.1%}")
    r = answer.result
    where = f"slowest pipeline stage {r.slowest_stage} of {answer.par.pp}" if answer.par.pp > 1 else "every GPU"
    split = Table(title=f"where the step goes ({where})", title_justify="left")
    for col in ("part", "seconds", "share"):
        split.add_column(col, justify="left" if col == "part" else "right")
    for key, value in answer.result.split_s.items():
        if value > 0 or key == "compute":
            split.add_row(LABELS[key], f"{value:.4g}", f"{value / s['step_time_s']:.1%}")
    out.table(split)
    comm = Table(title="communicators (one GPU of that stage, one step)", title_justify="left")
    for col in ("comm", "collective", "group", "MB/call", "calls", "ms/call", "algorithm"):
        comm.add_column(col, justify="left" if col in ("comm", "collective", "group", "algorithm") else "right")
    for e in answer.result.comm:
        shape = answer.result_shapes[e["communicator"]]
        comm.add_row(e["communicator"], e["collective"], f"{shape.num_servers}x{shape.per_server}",
                     f"{e['size_bytes'] / 1e6:.4g}", f"{e['calls_per_step']:g}", f"{e['time_s'] * 1e3:.4g}",
                     e["algorithm"])
    out.table(comm)
    unit = "NVLink domains x GPUs per domain" if answer.placement else "servers x GPUs per server"
    _note(out, f"group: {unit} of each group; dpcp / edp: the gradient groups of the "
               "dense and the expert parameters; shard / replica: HSDP's groups")


def memory_line(m) -> str:
    """The memory per GPU, its parts and range, and the reserve against the GPU when checked."""
    fit = m.fit
    of = (f"; with the {fit.reserve_bytes / 1e9:.1f} GB reserve {fit.needed_bytes / 1e9:.1f} of "
          f"{fit.capacity_bytes / 1e9:.1f} GB" if fit is not None else "")
    return (f"memory per GPU: {m.total_bytes / 1e9:.1f} +- {m.spread_bytes / 1e9:.1f} GB (weights "
            f"{m.weights_bytes / 1e9:.1f}, gradients {m.gradients_bytes / 1e9:.1f}, optimizer "
            f"{m.optimizer_bytes / 1e9:.1f}, activations {m.activations_bytes / 1e9:.1f}){of}")


def print_stages(out: Output, answer) -> list[dict]:
    """Every stage's split of the step (`--per-stage`); returns the record rows."""
    table = Table(title="every pipeline stage (seconds of the step)", title_justify="left")
    keys = ("compute", "tp", "cp", "ep", "pp", "dp", "bubble")
    for col in ("stage", "layers", "MoE", *keys):
        table.add_column(col, justify="right")
    rows = []
    for s, split in enumerate(answer.result.split_by_stage):
        layers = [i for v in range(answer.par.vp) for i in answer.result.program.chunk(s, v).layers if i >= 0]
        moe = sum(answer.spec.is_moe_layer(i) for i in layers)
        rows.append({"stage": s, "num_layers": len(layers), "num_moe_layers": moe, **split})
        table.add_row(str(s), str(len(layers)), str(moe), *(f"{split[k]:.4g}" for k in keys))
    out.table(table)
    _note(out, "each row adds up to the step time with the optimizer step; bubble: idle time the schedule "
               "leaves, waiting for other stages included")
    return rows


def _domain_worth(out: Output, job: LlmJob, cluster, answer, kwargs: dict) -> dict | None:
    """One line on what the NVLink domain across trays buys: the same job with domains of 8, as HGX."""
    from fabriclab.whatif.llm.run import domain_worth

    worth = domain_worth(job.spec, job.par, cluster, answer, **kwargs)
    if worth is None:
        return None
    if worth["step_time_s"] is None:
        _note(out, f"NVLink domain: this layout needs it; with domains of {worth['domain_gpus']} GPUs (as HGX) "
                   f"it cannot run: {worth['why']}")
        return worth
    exposed = {k: worth["split_s"][k] - answer.result.split_s[k] for k in ("tp", "cp", "ep", "pp", "dp")}
    most = max(exposed, key=lambda k: abs(exposed[k]))
    _note(out, f"NVLink domain: the same job with domains of {worth['domain_gpus']} GPUs (as HGX, same GPUs and "
               f"NICs) takes {worth['step_time_s']:.4g} s, {worth['gain']:+.1%}: the domain buys that, most in "
               f"{most.upper()} ({exposed[most]:+.3g} s exposed)")
    return worth


def _sweep(out: Output, job: LlmJob, cluster, bandwidths: list[float], kwargs: dict) -> list[dict]:
    from dataclasses import replace

    from fabriclab.whatif.llm.run import simulate_llm

    table = Table(title="the same step at other NIC rates", title_justify="left")
    for col in ("Gbps per NIC", "step (s)", "tokens/s", "MFU", "exposed comm (s)"):
        table.add_column(col, justify="right")
    from fabriclab.plan.llm.cluster import pcie_cap

    rows, capped = [], []
    for bw in bandwidths:
        c = replace(cluster, server=replace(cluster.server, nic_bandwidth_Bps=bw))
        a = simulate_llm(job.spec, job.par, c, **kwargs)
        exposed = sum(a.result.split_s[k] for k in ("tp", "cp", "ep", "pp", "dp"))
        cap = pcie_cap(c)
        rows.append({**a.summary(), "nic_Gbps": bw * 8 / 1e9, "pcie_cap": cap})
        capped += [f"{bw * 8 / 1e9:g}"] if cap else []
        table.add_row(f"{bw * 8 / 1e9:g}" + ("*" if cap else ""), f"{a.step_time_s:.4g}", f"{a.tokens_per_s:,.0f}",
                      f"{a.mfu:.1%}", f"{exposed:.4g}")
    out.table(table)
    if capped:
        s = cluster.server
        _note(out, f"* {', '.join(capped)} Gb/s: the GPU-to-NIC PCIe path ({s.pcie_bandwidth_Bps / 1e9:.1f} GB/s a "
                   f"direction) caps each NIC at {s.pcie_bandwidth_Bps * 8 / 1e9:.0f} Gb/s")
    return rows


def register(app: typer.Typer) -> None:
    @app.command("llm")
    @user_errors
    def llm_cmd(model: ModelOption = "llama3-8b", cluster: ClusterOption = None, gpus: GpusOption = "64",
                tp: TpOption = "2", pp: PpOption = "1", vp: VpOption = "1", cp: CpOption = "1", ep: EpOption = "1",
                mbs: MbsOption = "1", gbs: GbsOption = None, seq: SeqOption = None,
                sequence_parallel: SpOption = True, zero: ZeroOption = "1", recompute: RecomputeOption = "none",
                precision: PrecisionOption = "bf16", order: OrderOption = "tp-cp-dp-pp",
                tp_overlap: TpOverlapOption = False, fsdp_unit: FsdpUnitOption = "1",
                shard_group: ShardGroupOption = "0", ep_overlap: EpOverlapOption = False, host: HostOption = "te",
                attention: AttentionOption = "flash", gpu_spread: GpuSpreadOption = None, etp: EtpOption = "1",
                moe_imbalance: MoeImbalanceOption = "1", moe_dispatcher: MoeDispatcherOption = "alltoall",
                recompute_modules: RecomputeModulesOption = None, offload_activations: OffloadOption = None,
                grad_dtype: GradDtypeOption = "fp32", memory_reserve: MemoryReserveOption = None,
                fabric: FabricOption = None, bisection: BisectionOption = None, nic_rate: NicRateOption = None,
                domain_gpus: DomainGpusOption = None, calibrated: CalibratedOption = None,
                routing: ClusterRoutingOption = None, qps: QpsOption = None, transport: TransportOption = None,
                placement: JobPlacementOption = None, busy: BusyOption = None, seeds: SeedsOption = "1",
                per_stage: bool = typer.Option(False, "--per-stage", help="Also every pipeline stage's split."),
                efficiency: EfficiencyShareOption = None, bandwidth: BandwidthsOption = None, trace: TraceOption = None,
                trace_stage: TraceStageOption = "slowest", chakra: ChakraOption = None,
                checkpoint_interval: CheckpointIntervalOption = None, async_checkpoint: AsyncCheckpointOption = False,
                restart_time: RestartTimeOption = None, storage_bandwidth: StorageBandwidthOption = None,
                failure_rates: FailureRatesOption = "llama3",
                fmt: FormatOption = None, json_path: JsonOption = None, store: StoreOption = None) -> None:
        """A transformer's training step on a cluster: step time, tokens/s, MFU, where the time goes.

        Default cluster: dgx-h100 (--cluster); compute timed kernel by kernel by the GPU's kernel model
        (`calibrate kernels`), x the scale `calibrate step` stored in the cluster file, else as measured
        alone (--efficiency: one share of peak instead)."""
        out = _output(fmt, json_path, store, trace, chakra, seeds)
        job = LlmJob.from_options(model, gpus, tp, pp, vp, cp, ep, mbs, gbs, seq, sequence_parallel, zero,
                                  recompute, precision, order, attention, etp, recompute_modules, offload_activations)
        the_cluster = routed_cluster(calibrated_cluster(vary_cluster_options(load_cluster_option(
            cluster or "dgx-h100"), fabric, bisection, nic_rate, domain_gpus), calibrated), routing, qps, transport,
            placement, busy)
        options = with_compute(step_options(tp_overlap, fsdp_unit, shard_group, ep_overlap, gpu_spread, moe_dispatcher),
                               host, moe_imbalance, grad_dtype)
        kwargs = {"options": options, "efficiency": _share(efficiency),
                  "memory_options": memory_options(grad_dtype, memory_reserve)}
        stages = _trace_stages(trace_stage, job.par.pp)
        warn_ignored(_ignored(locals(), job, the_cluster))
        answer = _simulate(job, the_cluster, kwargs)
        good = job_goodput(the_cluster, answer, (checkpoint_interval, async_checkpoint, restart_time,
                                                 storage_bandwidth, failure_rates))  # refused before printing
        graphs = _export(answer) if chakra is not None else None  # refused before anything is printed
        print_answer(out, answer)
        drawn = _over_draws(out, job, the_cluster, answer, parse_seeds(seeds), kwargs)
        worth = _domain_worth(out, job, the_cluster, answer, kwargs)
        per = print_stages(out, answer) if per_stage else _stage_splits(answer)
        sweep = _sweep(out, job, the_cluster, _rates(bandwidth), kwargs) if bandwidth else []
        links = print_links(out, answer)
        events = _write_files(out, answer, trace, (chakra, graphs), stages)
        goodput = report_goodput(out, good)
        config = {"cluster": cluster or "dgx-h100", "tp_overlap": tp_overlap, "ep_overlap": ep_overlap,
                  **_options_config(options), "grad_dtype": grad_dtype, "fabric": fabric, "bisection": bisection,
                  "nic_rate": nic_rate, "domain_gpus": domain_gpus, "calibrated": calibrated,
                  "memory_reserve_bytes": kwargs["memory_options"].reserve_bytes, **_network_config(the_cluster, seeds)}
        _save(out, job, config, answer, {"stages": per, "bandwidth_sweep": sweep, "busiest_links": links,
                                         "trace": events, "domain_worth": worth, **drawn, **goodput})


def _output(fmt, json_path, store, trace: Path | None, chakra: Path | None, seeds: str) -> Output:
    """The command's output, once `--trace` and `--chakra` are known to be writable and `--seeds` to read."""
    check_output_path(trace, "--trace")
    check_trace_prefix(chakra, "--chakra")
    parse_seeds(seeds)
    return Output(fmt, json_path, store)


def _ignored(o: dict, job: LlmJob, cluster) -> list:
    """The options of this run (`o`) given but without effect on it (`cli/ignored.py`)."""
    return [*llm_ignored(job.par, o), *routing_ignored(cluster, o["qps"], o["seeds"]),
            (o["trace"] is None and o["trace_stage"].strip().lower() != "slowest", "--trace-stage",
             "without --trace: it picks the stage(s) the trace draws; add --trace FILE or drop it")]


def _stage_splits(answer) -> list[dict]:
    return [{"stage": s, **split} for s, split in enumerate(answer.result.split_by_stage)]


def _simulate(job: LlmJob, cluster, kwargs: dict):
    from fabriclab.whatif.llm.run import simulate_llm

    return simulate_llm(job.spec, job.par, cluster, **kwargs)


def _network_config(cluster, seeds: str) -> dict:
    """The fabric as it ran, for the record."""
    n = cluster.network
    return {"routing": n.routing, "qps_per_connection": n.qps_per_connection, "transport": n.transport,
            "placement": n.placement, "busy_share": n.busy_share, "seeds": parse_seeds(seeds)}


def _over_draws(out: Output, job: LlmJob, cluster, answer, seeds: int, kwargs: dict) -> dict:
    """With ECMP or a scattered job and --seeds N > 1: the step over N draws of the hashes and servers, its
    median and 90th percentile."""
    from fabriclab.nccl.routing import draws, median_p90
    from fabriclab.whatif.llm.run import simulate_llm

    clusters = draws(cluster, seeds)
    if len(clusters) == 1:  # --seeds N with nothing drawn: warned about (`_ignored`)
        return {}
    steps = [answer.step_time_s] + [simulate_llm(job.spec, job.par, c, **kwargs).step_time_s for c in clusters[1:]]
    median, p90 = (float(v) for v in median_p90(steps))
    _note(out, f"over {seeds} draws of the hashes and servers: step median {median:.3f} s, p90 {p90:.3f} s "
               f"(min {min(steps):.3f}, max {max(steps):.3f})")
    return {"step_time_s_median": median, "step_time_s_p90": p90, "step_times_s": steps}


def _options_config(options) -> dict:
    """The step options a record keeps."""
    return {"fsdp_unit": options.fsdp_unit, "shard_group": options.shard_group, "gpu_spread": options.gpu_spread,
            "host": options.host, "moe_imbalance": options.moe_imbalance, "moe_dispatcher": options.moe_dispatcher}


def _save(out: Output, job, config: dict, answer, extra: dict) -> None:
    """The run's record: the job and its options, the answer and what was printed beside it."""
    from dataclasses import asdict

    out.record("whatif.llm", {**job.config(), **config},
               {**answer.summary(), "split_s": answer.result.split_s, "communicators": answer.result.comm,
                "slowest_stage": answer.result.slowest_stage, "memory": answer.memory.rows(),
                "memory_warning": answer.memory.fit.warning, "memory_fit": asdict(answer.memory.fit), **extra},
               top={"step_time_s": answer.step_time_s, "tokens_per_s": answer.tokens_per_s, "mfu": answer.mfu})


def _trace_stages(text: str, pp: int):
    """`--trace-stage`: None (the slowest), "all", or a stage number below --pp."""
    word = text.strip().lower()
    if word in ("slowest", "all"):
        return None if word == "slowest" else "all"
    if not word.isdigit() or int(word) >= pp:
        raise ValueError(f"--trace-stage {text!r}: give slowest, all or a stage number 0..{pp - 1}")
    return int(word)


def _share(text: str | None) -> float | None:
    return parse_share(text)


def _rates(text: str) -> list[float]:
    from fabriclab.cli.common import split_list
    from fabriclab.units import parse_bandwidth

    return [parse_bandwidth(t) for t in split_list(text, "--bandwidth")]


def print_links(out: Output, answer) -> list[dict]:
    """The busiest link of each kind (whatif/llm/links.py); returns them as record rows."""
    from dataclasses import asdict

    from fabriclab.whatif.llm.links import busiest_links

    loads = busiest_links(answer)
    if not loads:
        return []
    table = Table(title="busiest links (one step, every group at once)", title_justify="left")
    for col in ("kind", "link", "Gb/s", "GB/step", "busy s", "of step", "links", "by"):
        table.add_column(col, justify="left" if col in ("kind", "link", "by") else "right")
    for x in loads:
        by = ",".join(c for c, b in sorted(x.by.items(), key=lambda kv: -kv[1]) if b >= 0.1 * x.bytes_per_step)
        table.add_row(x.kind, x.link, f"{x.bandwidth_Bps * 8 / 1e9:.4g}", f"{x.bytes_per_step / 1e9:.4g}",
                      f"{x.busy_s:.4g}", f"{x.share_of_step:.1%}", f"{x.num_as_busy:,}", by)
    out.table(table)
    _note(out, "busy s: the link's bytes over its rate; of step: busy s / step time; links: how many links of "
               "its kind run as busy; by: communicators with 10% or more of its bytes")
    return [asdict(x) for x in loads]


def _export(answer) -> list:
    from fabriclab.whatif.llm.export import rank_graphs

    return rank_graphs(answer)


def _write_files(out: Output, answer, trace: Path | None, chakra: tuple, stages) -> list | None:
    """Write the trace and the Chakra files asked for (`chakra`: the prefix and the rank graphs); the
    trace's events (for the record) or None."""
    events = None
    if trace is not None:
        from fabriclab.whatif.llm.trace import write_trace

        events = write_trace(answer, trace, stages=stages)["traceEvents"]
        _note(out, f"trace: {trace} (open in ui.perfetto.dev or chrome://tracing)")
    prefix, graphs = chakra
    if prefix is not None:
        from fabriclab.workload.chakra import write_et

        paths = write_et(graphs, prefix)
        _note(out, f"Chakra ET: {len(paths)} files {paths[0].parent}/{paths[0].name.rsplit('.', 2)[0]}.<rank>.et")
    return events
