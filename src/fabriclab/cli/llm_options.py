"""The LLM job's options, defined once: `whatif llm`, `calibrate step` and `plan --model <LLM>` share them.

Megatron-LM's names: `--tp --pp --vp --cp --ep --etp --mbs --gbs --seq --sequence-parallel --zero
--recompute --recompute-modules --precision`; DP is what the GPUs leave (GPUs = TP x PP x CP x DP). `LlmJob.from_options(...)` parses them
at the edge into a `ParallelConfig` (a ValueError says what to change; its counts are bounded there), loads
the model (a built-in name or a HuggingFace-style config.json) and checks that the model splits that way
(`workload/job.check_job`, the check the trainer and the plan's search make too).

Try it: `fabriclab whatif llm --model llama3-8b --gpus 64 --tp 2 --pp 2 --gbs 256 --cluster dgx-h100`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Optional

import typer

from fabriclab.cli.options import parse_count

ModelOption = Annotated[str, typer.Option(
    "--model", metavar="NAME|config.json",
    help="A built-in LLM (gpt3-175b, llama3-8b, llama3-70b, llama3-405b, mixtral-8x7b, deepseek-v3; "
         "`fabriclab models` lists them) or a HuggingFace-style config.json.")]
GpusOption = Annotated[str, typer.Option("--gpus", metavar="N", help="GPUs of the job (= TP x PP x CP x DP).")]
TpOption = Annotated[str, typer.Option("--tp", metavar="N", help="Tensor-parallel ranks (inside an NVLink domain: a server, or an NVL72 rack).")]
PpOption = Annotated[str, typer.Option("--pp", metavar="N", help="Pipeline stages.")]
VpOption = Annotated[str, typer.Option("--vp", metavar="N", help="Virtual stages per pipeline rank "
                                                                 "(interleaved 1F1B when > 1).")]
CpOption = Annotated[str, typer.Option("--cp", metavar="N", help="Context-parallel ranks (sequence split).")]
EpOption = Annotated[str, typer.Option("--ep", metavar="N", help="Expert-parallel ranks (MoE; ETP x EP divides TP x CP "
                                                                 "x DP: the experts fold over attention's GPUs).")]
EtpOption = Annotated[str, typer.Option("--etp", metavar="N", help="Expert tensor-parallel ranks (MoE: each expert's "
                                                                   "matrices split; default 1, Megatron-Bridge's).")]
MoeDispatcherOption = Annotated[str, typer.Option(
    "--moe-dispatcher", metavar="alltoall|allgather|deepep",
    help="How MoE tokens reach their experts: all-to-all over EP, all-gather and reduce-scatter over ETP x EP, or "
         "DeepEP (NVLink inside a domain, RDMA across, one copy per domain).")]
RecomputeModulesOption = Annotated[Optional[str], typer.Option(
    "--recompute-modules", metavar="LIST",
    help="With --recompute selective, Megatron-Core's modules run again: core_attn (default), layernorm, "
         "mla_up_proj, mlp, moe, moe_act, shared_experts.")]
OffloadOption = Annotated[Optional[str], typer.Option(
    "--offload-activations", metavar="LAYERS|SHARE",
    help="Activations of the first LAYERS of each model chunk, or that SHARE of them (0.25), to host memory "
         "(Grace's over NVLink-C2C on GB200/GB300, else over PCIe); time the compute does not hide counts.")]
MbsOption = Annotated[str, typer.Option("--mbs", metavar="N", help="Micro-batch size (sequences).")]
GbsOption = Annotated[Optional[str], typer.Option(
    "--gbs", metavar="N", help="Global batch size in sequences (default: MBS x DP x max(8, 2 x PP) micro-batches with "
                               "pipelining, MBS x DP x 4 without).")]
SeqOption = Annotated[Optional[str], typer.Option("--seq", metavar="TOKENS",
                                                  help="Sequence length (default: the model's).")]
SpOption = Annotated[bool, typer.Option("--sequence-parallel/--no-sequence-parallel",
                                        help="Megatron sequence parallelism with TP.")]
ZeroOption = Annotated[str, typer.Option("--zero", metavar="0|1|2|3",
                                         help="Sharded DP: 0 none, 1 optimizer (distributed optimizer), "
                                              "2 + gradients, 3 + parameters (FSDP).")]
RecomputeOption = Annotated[str, typer.Option("--recompute", metavar="MODE",
                                              help="Activation recomputation: none, selective, full.")]
PrecisionOption = Annotated[str, typer.Option("--precision", metavar="P", help="bf16 or fp8 matrix math.")]
OrderOption = Annotated[str, typer.Option("--order", metavar="DIMS",
                                          help="Placement, innermost first (default tp-cp-dp-pp).")]
TpOverlapOption = Annotated[bool, typer.Option("--tp-overlap/--no-tp-overlap",
                                               help="TP communication hidden behind the linear layers "
                                                    "(Transformer Engine userbuffers).")]
FsdpUnitOption = Annotated[str, typer.Option("--fsdp-unit", metavar="LAYERS",
                                             help="ZeRO-3: transformer layers per FSDP unit (gathered and "
                                                  "reduce-scattered together).")]
ShardGroupOption = Annotated[str, typer.Option("--shard-group", metavar="N",
                                               help="ZeRO-3: HSDP, parameters sharded inside groups of N ranks "
                                                    "and replicated across them (0: all of DP x CP).")]
AttentionOption = Annotated[str, typer.Option("--attention", metavar="flash|unfused",
                                              help="The attention core: one fused kernel (FlashAttention, "
                                                   "cuDNN) or Megatron's older unfused scores and softmax.")]
GpuSpreadOption = Annotated[str, typer.Option("--gpu-spread", metavar="SHARE",
                                              help="Spread of one GPU model's speed (standard deviation over "
                                                   "the mean): the step runs at its slowest GPU's pace "
                                                   "(default 0.01, Sinha et al., SC22).")]
EpOverlapOption = Annotated[bool, typer.Option("--ep-overlap/--no-ep-overlap",
                                               help="EP all-to-alls hidden behind the layer's compute "
                                                    "(DualPipe-style); default exposed.")]


GradDtypeOption = Annotated[str, typer.Option(
    "--grad-dtype", metavar="fp32|bf16", help="The gradient buffer and what the DP reductions move: fp32 "
                                              "(Megatron-LM's default with bf16) or bf16 (--grad-reduce-in-bf16; "
                                              "NeMo's distributed fused Adam).")]
HostOption = Annotated[str, typer.Option(
    "--host", metavar="eager|te|cuda-graphs",
    help="How the framework dispatches kernels: eager (PyTorch, HuggingFace, fabriclab's trainer), te "
         "(Megatron-Core with Transformer Engine) or cuda-graphs (its partial CUDA graphs); each layer runs at "
         "max(GPU, host) time.")]
MoeImbalanceOption = Annotated[str, typer.Option(
    "--moe-imbalance", metavar="RATIO",
    help="MoE: the busiest expert rank's routed tokens over the mean (1: balanced, as published benchmarks "
         "force it).")]
MemoryReserveOption = Annotated[Optional[str], typer.Option(
    "--memory-reserve", metavar="SIZE", help="GPU memory the model does not count (default 4e9 bytes): CUDA "
                                             "context, NCCL buffers (1.6-6 GB: NVIDIA/nccl#864), allocator "
                                             "fragmentation.")]


FabricOption = Annotated[Optional[str], typer.Option(
    "--fabric", metavar="rail|fat-tree", help="The network between the servers instead of the cluster's (as plan "
                                              "--fabrics compares them).")]
BisectionOption = Annotated[Optional[str], typer.Option(
    "--bisection", metavar="RATIO", help="The network's bisection instead of the cluster's, e.g. 1/2 (as plan "
                                         "--bisection).")]
NicRateOption = Annotated[Optional[str], typer.Option(
    "--nic-rate", metavar="RATE", help="NIC line rate per GPU instead of the cluster's, e.g. 800Gbps (as plan "
                                       "--nic-rates).")]


DomainGpusOption = Annotated[Optional[str], typer.Option(
    "--domain-gpus", metavar="N", help="GPUs the job uses of each NVLink domain that spans trays, whole trays (64 "
                                       "of an NVL72's 72); default: whole domains where they divide --gpus.")]


CalibratedOption = Annotated[Optional[str], typer.Option(
    "--calibrated", metavar="FILE", help="A cluster file `calibrate step` wrote on another machine kind: its "
                                         "scale on the kernel model carries to these GPUs (cross-machine "
                                         "prediction).")]


def calibrated_cluster(cluster, calibrated: str | None):
    """The cluster with the compute scale of the `--calibrated` file (`whatif.llm.run.carry_calibration`)."""
    if calibrated is None:
        return cluster
    from fabriclab.cli.options import load_cluster_option
    from fabriclab.whatif.llm.run import carry_calibration

    return carry_calibration(cluster, load_cluster_option(calibrated, "--calibrated"))


def vary_cluster_options(cluster, fabric: str | None, bisection: str | None, nic_rate: str | None,
                         domain_gpus: str | None = None):
    """The cluster with `--fabric`, `--bisection`, `--nic-rate` applied as `plan` applies its options
    (`plan.llm.vary_cluster`), and `--domain-gpus`, named after what changed; the cluster itself when none
    is given."""
    from dataclasses import replace

    from fabriclab.cli.options import parse_bisection, parse_count
    from fabriclab.fabric.domains import with_domain_gpus
    from fabriclab.plan.llm.cluster import vary_cluster
    from fabriclab.units import parse_bandwidth

    if domain_gpus is not None:
        used = parse_count(domain_gpus, "--domain-gpus")
        cluster = replace(with_domain_gpus(cluster, used), name=f"{cluster.name} {used}/domain")
    if fabric is None and bisection is None and nic_rate is None:
        return cluster
    word = None if fabric is None else fabric.strip().lower()
    if word is not None and word not in ("rail", "fat-tree"):
        raise ValueError(f"--fabric {fabric!r}: give rail or fat-tree (the network between the servers)")
    ratio = None if bisection is None else parse_bisection(bisection)
    rate = None if nic_rate is None else parse_bandwidth(nic_rate)
    varied = vary_cluster(cluster, nic_rate_Bps=rate, fabric=word, bisection=ratio)
    changes = [x for x in (word, None if rate is None else f"{rate * 8 / 1e9:g}G",
                           None if ratio is None else f"bisection {ratio}") if x]
    return replace(varied, name=f"{cluster.name} {' '.join(changes)}")


def parse_share(text: str | None, option: str = "--efficiency") -> float | None:
    """A share of peak such as 0.45 or 45% (None stays None)."""
    if text is None:
        return None
    try:
        value = float(text.strip().rstrip("%")) / (100 if text.strip().endswith("%") else 1)
    except ValueError:
        raise ValueError(f"{option} {text!r}: give a share of peak such as 0.45 or 45%") from None
    if not 0 < value <= 1:
        raise ValueError(f"{option} {text!r}: give a share of peak in (0, 1], such as 0.45")
    return value


def memory_options(grad_dtype: str = "fp32", reserve: str | None = None):
    """`MemoryOptions` from `--grad-dtype` and `--memory-reserve`, checked at the edge."""
    from fabriclab.units import parse_size
    from fabriclab.workload.memory import MemoryOptions

    sizes = {"fp32": 4, "bf16": 2}
    word = grad_dtype.strip().lower()
    if word not in sizes:
        raise ValueError(f"--grad-dtype {grad_dtype!r}: give fp32 or bf16")
    if reserve is None:
        return MemoryOptions(grad_bytes=sizes[word])  # its default reserve, workload/memory.py says why
    try:
        reserve_bytes = parse_size(reserve)
    except ValueError as err:
        raise ValueError(f"--memory-reserve {reserve!r}: give a size such as 4GB or 0 ({err})") from None
    return MemoryOptions(grad_bytes=sizes[word], reserve_bytes=reserve_bytes)


def step_options(tp_overlap: bool, fsdp_unit: str = "1", shard_group: str = "0", ep_overlap: bool = False,
                 gpu_spread: str | None = None, moe_dispatcher: str = "alltoall"):
    """The framework's switches (`StepOptions`) from the options above, checked at the edge."""
    from fabriclab.cli.options import parse_number
    from fabriclab.whatif.llm.step import StepOptions
    from fabriclab.whatif.llm.stragglers import GPU_SPREAD

    spread = GPU_SPREAD if gpu_spread is None else parse_number(gpu_spread, "--gpu-spread", example="0.01")
    if not 0 <= spread < 0.5:
        raise ValueError(f"--gpu-spread {gpu_spread}: give a share of the mean speed in [0, 0.5), e.g. 0.01")
    from fabriclab.whatif.llm.program import DISPATCHERS

    dispatcher = moe_dispatcher.strip().lower()
    if dispatcher not in DISPATCHERS:
        raise ValueError(f"--moe-dispatcher {moe_dispatcher!r}: give {', '.join(DISPATCHERS)} (Megatron-Core's "
                         f"alltoall, allgather, or flex with DeepEP)")
    return StepOptions(tp_overlap=tp_overlap, fsdp_unit=parse_count(fsdp_unit, "--fsdp-unit", minimum=1),
                       shard_group=parse_count(shard_group, "--shard-group", minimum=0), ep_overlap=ep_overlap,
                       gpu_spread=spread, moe_dispatcher=dispatcher)


def with_compute(options, host: str = "te", moe_imbalance: str = "1", grad_dtype: str = "fp32"):
    """`options` (a `StepOptions`) with the host that dispatches the kernels (`--host`), the experts' load
    imbalance (`--moe-imbalance`) and the gradients' bytes on the wire (`--grad-dtype`), checked at the edge."""
    from dataclasses import replace

    from fabriclab.cli.options import parse_number
    from fabriclab.fabric.host import host_model

    kind = host_model(host).kind  # a ValueError names the kinds
    ratio = parse_number(moe_imbalance, "--moe-imbalance", example="1.2")
    if not 1 <= ratio <= 64:
        raise ValueError(f"--moe-imbalance {moe_imbalance}: give the busiest expert rank's tokens over the mean, "
                         f"from 1 (balanced) to 64, e.g. 1.2")
    return replace(options, host=kind, moe_imbalance=ratio, grad_bytes=memory_options(grad_dtype).grad_bytes)


def llm_ignored(par, o: dict) -> list:
    """The rules (`cli/ignored.py`) of the job's options in `o` (a command's parameters; those it lacks are not
    given) that the job `par` ignores; `o`'s values were checked already."""
    fsdp_unit = parse_count(o.get("fsdp_unit") or "1", "--fsdp-unit")
    return [
        (fsdp_unit != 1 and par.zero != 3, "--fsdp-unit",
         f"with --zero {par.zero}: it groups the layers ZeRO-3 (FSDP) gathers; add --zero 3 or drop it"),
        (bool(o.get("tp_overlap")) and par.tp == 1, "--tp-overlap",
         "with --tp 1: there is no TP communication to hide; give --tp 2 or more, or drop it"),
        (bool(o.get("ep_overlap")) and par.ep * par.etp == 1, "--ep-overlap",
         "with --ep 1: there are no EP all-to-alls to hide; give an MoE model with --ep 2 or more, or drop it"),
        (str(o.get("moe_dispatcher") or "alltoall").strip().lower() != "alltoall" and par.ep * par.etp == 1,
         "--moe-dispatcher", "with --ep 1 --etp 1: no tokens travel to experts elsewhere; give --ep 2 or more, or "
                             "drop it"),
        (o.get("calibrated") is not None and o.get("efficiency") is not None, "--calibrated",
         "with --efficiency: that share of peak replaces every calibration; drop one of them"),
    ]


def _modules(text: str | None) -> tuple[str, ...]:
    """`--recompute-modules core_attn,moe_act` as names (`ParallelConfig` checks them)."""
    return tuple(m.strip().lower() for m in (text or "").split(",") if m.strip())


def _offload(text: str | None, chunk_layers: int) -> int:
    """`--offload-activations`: a whole number of layers per model chunk, or a share of a chunk's layers
    (0.25 or 25%: rounded down)."""
    if text is None:
        return 0
    word = text.strip()
    if not any(c in word for c in ".%"):
        return parse_count(word, "--offload-activations", minimum=0)
    try:
        share = float(word.rstrip("%")) / (100 if word.endswith("%") else 1)
    except ValueError:
        share = -1.0
    if not 0 <= share < 1:
        raise ValueError(f"--offload-activations {text!r}: give whole layers per model chunk (e.g. 20) or a share of "
                         f"them below 1 (e.g. 0.25 or 25%)")
    return int(share * chunk_layers)


def _flash(attention: str) -> bool:
    key = attention.strip().lower() if isinstance(attention, str) else ""
    if key not in ("flash", "unfused"):
        raise ValueError(f"--attention {attention!r}: use flash (a fused kernel) or unfused (Megatron's scores and "
                         f"softmax in memory)")
    return key == "flash"


@dataclass(frozen=True)
class LlmJob:
    """A model and how it is split."""

    spec: object
    par: object

    @staticmethod
    def from_options(model: str, gpus: str, tp: str, pp: str, vp: str, cp: str, ep: str, mbs: str,
                     gbs: str | None, seq: str | None, sequence_parallel: bool, zero: str, recompute: str,
                     precision: str, order: str, attention: str = "flash", etp: str = "1",
                     recompute_modules: str | None = None, offload: str | None = None) -> "LlmJob":
        from fabriclab.workload.job import check_job
        from fabriclab.workload.parallel import ParallelConfig
        from fabriclab.workload.transformer import load_model

        spec = load_model(model)
        counts = {name: parse_count(value, f"--{name}") for name, value in
                  (("gpus", gpus), ("tp", tp), ("pp", pp), ("vp", vp), ("cp", cp), ("ep", ep), ("mbs", mbs),
                   ("etp", etp))}
        seq_len = parse_count(seq, "--seq") if seq is not None else spec.seq_length
        dp = max(1, counts["gpus"] // (counts["tp"] * counts["pp"] * counts["cp"]))
        default_gbs = counts["mbs"] * dp * (max(8, 2 * counts["pp"]) if counts["pp"] > 1 else 4)
        global_batch = parse_count(gbs, "--gbs") if gbs is not None else default_gbs
        zero_stage = parse_count(zero, "--zero", minimum=0, maximum=3)
        par = ParallelConfig(num_gpus=counts["gpus"], tp=counts["tp"], pp=counts["pp"], vp=counts["vp"],
                             cp=counts["cp"], ep=counts["ep"], mbs=counts["mbs"], gbs=global_batch, seq=seq_len,
                             sequence_parallel=sequence_parallel and counts["tp"] > 1, zero=zero_stage,
                             recompute=recompute.strip().lower(), precision=precision.strip().lower(),
                             order=order.strip().lower(), flash_attention=_flash(attention), etp=counts["etp"],
                             recompute_modules=_modules(recompute_modules),
                             offload_layers=_offload(offload, spec.num_layers // (counts["pp"] * counts["vp"])))
        check_job(spec, par)  # the one check of (model, split) every command shares (workload/job.py)
        return LlmJob(spec=spec, par=par)

    def check_memory(self, cluster, shard_group: int = 0, options=None):
        """A ValueError with the memory numbers and what to change when the job does not fit the cluster's GPUs,
        the check `whatif llm` makes (`calibrate step` too: an efficiency calibrated on a job that cannot run
        there is no measurement); else the `MemoryFit`, whose `warning` says when it may not fit."""
        from fabriclab.fabric.cluster import cluster_gpu
        from fabriclab.workload.advice import memory_advice
        from fabriclab.workload.memory import MemoryOptions, check_fits, memory_per_gpu

        options = options or MemoryOptions()
        return check_fits(memory_per_gpu(self.spec, self.par, shard_group=shard_group, options=options),
                          cluster_gpu(cluster).memory_bytes, reserve_bytes=options.reserve_bytes,
                          advice=lambda: memory_advice(self.spec, self.par, shard_group=shard_group, options=options))

    def config(self) -> dict:
        par = self.par
        return {"model": self.spec.name, "num_gpus": par.num_gpus, "tp": par.tp, "pp": par.pp, "vp": par.vp,
                "cp": par.cp, "ep": par.ep, "etp": par.etp, "dp": par.dp, "mbs": par.mbs, "gbs": par.gbs,
                "seq": par.seq,
                "sequence_parallel": par.sequence_parallel, "zero": par.zero, "recompute": par.recompute,
                "precision": par.precision, "order": par.order, "recompute_modules": list(par.recompute_modules),
                "offload_layers": par.offload_layers,
                "attention": "flash" if par.flash_attention else "unfused"}
