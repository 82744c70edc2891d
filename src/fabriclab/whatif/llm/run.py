"""`whatif llm`: a transformer's training step on a cluster, and the compute efficiency from a measured step.

`simulate_llm` checks the configuration fits in the GPUs' memory, builds the roofline of the cluster's GPU
with its achieved efficiency, and simulates the step (`whatif/llm/step.py`): step time, tokens/s, MFU
(model FLOPs per step / step time / GPUs / the precision's peak, Megatron's and NeMo's convention) and
where the time goes. `calibrate_efficiency` finds the efficiency that makes the simulated step last as
long as a measured one (bisection: the step time falls as the efficiency rises), which `fabriclab
calibrate step` stores in the cluster file.

Where the efficiency comes from is part of every answer: the cluster file's measurement, an explicit
`efficiency=`, or, when neither exists, an assumption printed as one (`ASSUMED_EFFICIENCY`).

Try it: `fabriclab whatif llm --model llama3-70b --cluster dgx-h100 --gpus 1024 --tp 8 --pp 4 --gbs 512`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from fabriclab.fabric.cluster import ClusterModel, cluster_gpu
from fabriclab.fabric.domains import domain_view, placement_note
from fabriclab.fabric.host import host_model
from fabriclab.fabric.kernel_defaults import default_kernels
from fabriclab.whatif.llm.compute import roofline, shape_rates
from fabriclab.whatif.llm.stragglers import GPU_SPREAD, slowest_factor
from fabriclab.whatif.llm.result import StepResult
from fabriclab.whatif.llm.step import StepModel, StepOptions
from fabriclab.workload.advice import memory_advice
from fabriclab.workload.memory import MemoryBreakdown, MemoryOptions, check_fits, memory_per_gpu
from fabriclab.workload.parallel import ParallelConfig
from fabriclab.workload.transformer import TransformerSpec

# The share of peak used when the cluster holds no measured efficiency: the order of what well-tuned
# Megatron-LM runs reach on H100 (NVIDIA reports 40-55 % MFU); printed as an assumption, never as a result.
ASSUMED_EFFICIENCY = 0.5


@dataclass(frozen=True)
class Efficiency:
    """How fast the GPU's math runs: `model` "kernels" times every kernel by its shape (`fabric/kernels.py`)
    and `value` is the share of the kernels' own speed the step keeps (1: as measured alone); "flat" runs all
    math at `value` x peak (`--efficiency`, and cluster files calibrated before the kernel model)."""

    value: float
    source: str
    measured: bool
    model: str = "flat"
    kernels: object = None
    """The KernelModel ("kernels")."""
    host_scale: float = 1.0
    """The host's dispatch speed over its model's (`fabric/host.py`; `calibrate step` where host-bound)."""

    @property
    def error(self) -> float:
        """The relative range of the compute time: the kernel model's spread; a flat share has none known."""
        return self.kernels.error if self.kernels is not None else float("nan")


@dataclass
class LlmAnswer:
    """A simulated step with its context."""

    spec: TransformerSpec
    par: ParallelConfig
    cluster: ClusterModel
    result: StepResult
    memory: MemoryBreakdown
    efficiency: Efficiency
    gpu_name: str
    peak_flops: float
    result_shapes: dict
    """Communicator -> the shape of its groups (`whatif/llm/comm.GroupShape`)."""
    placement: str = ""
    """How the job fills NVLink domains that span trays (`fabric/domains.placement_note`); empty otherwise."""

    @property
    def step_time_s(self) -> float:
        return self.result.step_time_s

    @property
    def tokens_per_s(self) -> float:
        return self.par.tokens_per_step / self.step_time_s

    @property
    def model_flops_per_step(self) -> float:
        return self.spec.model_flops_per_token(self.par.seq) * self.par.tokens_per_step

    @property
    def mfu(self) -> float:
        return self.model_flops_per_step / self.step_time_s / self.par.num_gpus / self.peak_flops

    @property
    def host(self) -> str:
        """How the framework dispatched the kernels (`fabric/host.py`)."""
        model = getattr(self.result, "model", None)
        return getattr(getattr(model, "options", None), "host", "te")

    def compute_line(self) -> str:
        """Where the compute's speed comes from, in words."""
        e = self.efficiency
        if e.model == "kernels":
            return f"{self.par.precision}, {e.source}; host: {self.host}"
        return f"{e.value:.1%} of {self.par.precision} peak, {e.source}"

    def summary(self) -> dict:
        return {"model": self.spec.name, "parallel": self.par.describe(), "num_gpus": self.par.num_gpus,
                "cluster": self.cluster.name, "gpu": self.gpu_name, "placement": self.placement,
                "step_time_s": self.step_time_s,
                "tokens_per_s": self.tokens_per_s, "mfu": self.mfu,
                "efficiency": self.efficiency.value, "efficiency_source": self.efficiency.source,
                "efficiency_measured": self.efficiency.measured, "compute_model": self.efficiency.model,
                "compute_range": self.efficiency.error, "host": self.host, "host_scale": self.efficiency.host_scale,
                "memory_per_gpu_bytes": self.memory.total_bytes,
                **{f"{k}_s": v for k, v in self.result.split_s.items()}}


def efficiency_of(cluster: ClusterModel, precision: str, override: float | None = None, *,
                  scale: float | None = None, host_scale: float | None = None) -> Efficiency:
    """The compute a simulation uses: `override` (a flat share of peak), `scale` (and `host_scale`) on the
    kernel and host models, the cluster file's calibration (a scale, a host scale, or a flat efficiency of
    older files), else the kernel model as measured alone (its source and range said)."""
    if override is not None:
        return Efficiency(override, "given (--efficiency): this share of peak for every matrix", True)
    compute = getattr(cluster, "compute", None)
    kernels = (compute.kernels if compute is not None and compute.kernels is not None
               else default_kernels(cluster_gpu(cluster)))
    where = f"kernels by shape ({kernels.source}; range {kernels.error:.0%})"
    stored_host = (compute.host_scale.get(precision) if compute is not None else None)
    host = host_scale if host_scale is not None else stored_host or 1.0
    hosted = f", host x {host:.4g}" if host != 1.0 else ""
    if scale is not None or host_scale is not None:
        value = 1.0 if scale is None else scale
        return Efficiency(value, f"{where} x {value:.4g}{hosted}", True, "kernels", kernels, host)
    if compute is not None and (precision in compute.scale or stored_host):
        value = compute.scale.get(precision, 1.0)
        return Efficiency(value, f"{where} x {value:.4g}{hosted} ({compute.efficiency_source or 'the cluster file'})",
                          True, "kernels", kernels, host)
    if compute is not None and precision in compute.efficiency:
        return Efficiency(compute.efficiency[precision], compute.efficiency_source or "the cluster file", True)
    return Efficiency(1.0, f"{where}; the step's own overheads not measured (`fabriclab calibrate step`)",
                      False, "kernels", kernels)


def compute_rates(spec: TransformerSpec, par: ParallelConfig, cluster: ClusterModel,
                  efficiency: Efficiency | float, gpu_spread: float = GPU_SPREAD, host: str = "te"):
    """The rates the step's compute runs at (`whatif/llm/compute.py`): a float is a flat share of peak. The
    kernel model's rates are a typical GPU's: the step runs at its slowest GPU's (`stragglers.py`); its
    kernels are dispatched by the `host` (`fabric/host.py`; a flat share has no host)."""
    gpu = cluster_gpu(cluster)
    if isinstance(efficiency, Efficiency) and efficiency.model == "kernels":
        slowest = slowest_factor(par.num_gpus, gpu_spread)
        return shape_rates(spec, par, gpu, efficiency.kernels, efficiency.value / slowest, host_model(host),
                           efficiency.host_scale)
    value = efficiency.value if isinstance(efficiency, Efficiency) else efficiency
    return roofline(gpu.peak_flops, par.precision, value)


def build_model(spec: TransformerSpec, par: ParallelConfig, cluster: ClusterModel, efficiency: Efficiency | float,
                options: StepOptions = StepOptions(), *, comm=None) -> StepModel:
    """The step model; `comm`: a CommModel of the same cluster and parallel shape to share (its cache)."""
    gpu = cluster_gpu(cluster)
    rate = compute_rates(spec, par, cluster, efficiency, options.gpu_spread, options.host)
    return StepModel(spec, par, cluster, rate, options, memory_bandwidth_Bps=gpu.memory_bandwidth_Bps, comm=comm)


def simulate_llm(spec: TransformerSpec, par: ParallelConfig, cluster: ClusterModel, *,
                 options: StepOptions = StepOptions(), efficiency: float | None = None,
                 scale: float | None = None, host_scale: float | None = None, check_memory: bool = True,
                 memory_options: MemoryOptions = MemoryOptions()) -> LlmAnswer:
    """The step of `spec` trained as `par` on `cluster` (a ValueError when it does not fit in memory; its
    `memory.fit.warning` says when it may not)."""
    gpu = cluster_gpu(cluster)
    placement = placement_note(cluster, par.num_gpus)
    cluster = domain_view(cluster, par.num_gpus)  # an NVLink domain across trays: one node to the library
    _check_servers(par, cluster)
    memory = memory_per_gpu(spec, par, shard_group=options.shard_group, options=memory_options)
    if check_memory:
        advice = lambda: memory_advice(spec, par, shard_group=options.shard_group, options=memory_options)  # noqa: E731
        memory = replace(memory, fit=check_fits(memory, gpu.memory_bytes, reserve_bytes=memory_options.reserve_bytes,
                                                advice=advice))
    eff = efficiency_of(cluster, par.precision, efficiency, scale=scale, host_scale=host_scale)
    model = build_model(spec, par, cluster, eff, options)
    result = model.run()
    return LlmAnswer(spec=spec, par=par, cluster=cluster, result=result, memory=memory, efficiency=eff,
                     gpu_name=gpu.name, peak_flops=gpu.peak_flops[par.precision], result_shapes=model.comm.shapes,
                     placement=placement)


def _check_servers(par: ParallelConfig, cluster: ClusterModel) -> None:
    """The job on whole servers, TP inside one, and every communicator's groups costable (the same number of
    GPUs in each server a group spans); each message names the user's numbers and what to change."""
    g = cluster.server.gpus_per_server
    if par.num_gpus > g and par.num_gpus % g:
        raise ValueError(f"--gpus {par.num_gpus} does not fill whole servers of {g} GPUs: use a multiple of {g}"
                         + (f"; a rack of {g} GPUs in trays is server.gpus_per_server (the tray) with "
                            f"server.gpus_per_domain {g}, and --domain-gpus then runs part of each" if g > 8 else ""))
    if par.tp > g or g % par.tp:
        raise ValueError(f"--gpus {par.num_gpus} --tp {par.tp} on NVLink domains of {g} GPUs ({cluster.name}): tensor "
                         f"parallelism stays inside an NVLink domain (a server, or an NVL72 rack), so a TP group must "
                         f"not straddle two; use a --tp that divides {g} "
                         f"({', '.join(str(d) for d in range(1, g + 1) if g % d == 0)}), the rest goes to DP"
                         + ("; or --domain-gpus 64, 64 of each NVL72 rack's 72, for powers of two" if g == 72 else ""))
    uneven = par.uneven_group(g)
    if uneven is not None:
        name, group, servers, most = uneven
        shown = ", ".join(map(str, group[:4])) + (f", ..., {group[-1]}" if len(group) > 4 else "")
        article = "an" if name[0] in "aeiou" else "a"
        raise ValueError(f"--gpus {par.num_gpus} as {par.describe().split(' (')[0]} on servers of {g} GPUs "
                         f"({cluster.name}): {article} {name} group of {len(group)} GPUs (ranks {shown}) spans {servers} "
                         f"servers with up to {most} in one, unlike the other groups or not a multiple of {most}, so "
                         f"its collectives cannot be costed server by server; choose sizes whose groups fill whole "
                         f"servers or stay in one (e.g. powers of two on servers of {g}; on NVL72 racks "
                         f"--domain-gpus 64), or change --order")


def calibrate_efficiency(spec: TransformerSpec, par: ParallelConfig, cluster: ClusterModel, step_time_s: float,
                         *, options: StepOptions = StepOptions(), tolerance: float = 1e-4,
                         flat: bool = False) -> tuple[float, LlmAnswer]:
    """The compute speed at which the simulated step lasts `step_time_s`, and that simulation: the scale on
    the cluster's kernel model (`flat`: a share of peak for every matrix, the model before kernels).

    The scale acts on what runs at the GPU's rates; the host's dispatch (`fabric/host.py`) and the kernels'
    launch floors keep their models, so a scale measured on one GPU kind carries to another. A step where
    the GPU mostly waits for the host (more than HOST_BOUND of it, the kernels as measured alone) tells the
    host's speed instead: then the host's scale is fitted and the kernels kept as measured alone
    (`answer.efficiency.host_scale`, and its source, say which)."""
    if not step_time_s > 0 or not math.isfinite(step_time_s):
        raise ValueError(f"--step-time {step_time_s}: give the measured step time in seconds, > 0")
    cluster = domain_view(cluster, par.num_gpus)
    base = efficiency_of(cluster, par.precision)
    kernels = base.kernels if base.model == "kernels" else default_kernels(cluster_gpu(cluster))
    host0 = base.host_scale if base.model == "kernels" else 1.0

    def rate(e: float, h: float = host0) -> Efficiency:
        return Efficiency(e, "", True, "flat") if flat else Efficiency(e, "", True, "kernels", kernels, h)

    def step(e: float, h: float = host0) -> float:
        return build_model(spec, par, cluster, rate(e, h), options).run().step_time_s

    top = 1.0 if flat else 2.0
    fastest = step(top)
    if not flat and _host_bound(spec, par, cluster, options, rate(1.0)) and \
            step(1.0, HOST_SCALE_RANGE[0]) >= step_time_s >= step(1.0, HOST_SCALE_RANGE[1]):
        return _calibrated_host(spec, par, cluster, step_time_s, options, step, tolerance)
    if step_time_s < fastest:
        raise ValueError(f"a step of {step_time_s:.4g} s is faster than this model allows "
                         f"({'100 % of the peak' if flat else 'kernels at twice their measured speed'}: "
                         f"{fastest:.4g} s): check --gpus, the parallel options, --precision and the cluster")
    if step(1e-3) < step_time_s:
        raise ValueError(f"a step of {step_time_s:.4g} s is slower than 0.1 % of the compute's speed: check the "
                         f"options")
    value = _bisect(lambda e: step(e) > step_time_s, 1e-3, top, tolerance)
    answer = simulate_llm(spec, par, cluster, options=options, efficiency=value if flat else None,
                          scale=None if flat else value, host_scale=None if flat else host0, check_memory=False)
    what = "share of peak" if flat else "x the kernel model (the host's dispatch as modelled)"
    answer.efficiency = replace(answer.efficiency, source=f"calibrated on this step ({step_time_s:g} s): "
                                                          f"{value:.4g} {what}")
    return value, answer


# The host's speed over its model's that `calibrate_efficiency` may find, and the share of a step the GPU
# spends waiting for the host above which the measurement tells the host's speed rather than the kernels'.
HOST_SCALE_RANGE = (0.05, 20.0)
HOST_BOUND = 0.5


def _host_bound(spec, par, cluster, options, efficiency) -> bool:
    """Whether the step, its kernels as measured alone, spends more than HOST_BOUND of its time with the GPU
    waiting for the host: then a measurement of it tells the host's speed."""
    result = build_model(spec, par, cluster, efficiency, options).run()
    return result.split_s.get("dispatch", 0.0) > HOST_BOUND * result.step_time_s


def _bisect(above, lo: float, hi: float, tolerance: float) -> float:
    """The x in [lo, hi] where `above(x)` (true below it, false above) turns, geometrically to `tolerance`."""
    while hi - lo > tolerance * hi:
        mid = math.sqrt(lo * hi)
        lo, hi = (mid, hi) if above(mid) else (lo, mid)
    return math.sqrt(lo * hi)


def _calibrated_host(spec, par, cluster, step_time_s: float, options, step, tolerance: float):
    """The host's scale that makes a host-bound step last `step_time_s`, the kernels as measured alone."""
    host = _bisect(lambda h: step(1.0, h) > step_time_s, *HOST_SCALE_RANGE, tolerance)
    answer = simulate_llm(spec, par, cluster, options=options, scale=1.0, host_scale=host, check_memory=False)
    answer.efficiency = replace(answer.efficiency, source=f"calibrated on this step ({step_time_s:g} s), "
                                                          f"host-bound: the host at {host:.4g} x its model, the "
                                                          f"kernels as measured alone")
    return 1.0, answer


def with_efficiency(cluster: ClusterModel, precision: str, value: float, source: str, *,
                    flat: bool = False, host_scale: float = 1.0) -> ClusterModel:
    """The cluster with a measured compute speed for `precision` (other precisions kept): a scale on the
    kernel model and one on the host's dispatch (`flat`: a share of peak)."""
    from fabriclab.fabric.cluster import ComputeSpec

    compute = getattr(cluster, "compute", None) or ComputeSpec(gpu=cluster_gpu(cluster))
    if flat:
        return replace(cluster, compute=replace(compute, efficiency={**compute.efficiency, precision: value},
                                                efficiency_source=source))
    efficiency = {k: v for k, v in compute.efficiency.items() if k != precision}  # the scale supersedes it
    hosts = {k: v for k, v in compute.host_scale.items() if k != precision}
    hosts |= {precision: host_scale} if host_scale != 1.0 else {}
    return replace(cluster, compute=replace(compute, scale={**compute.scale, precision: value},
                                            efficiency=efficiency, efficiency_source=source, host_scale=hosts))


def carry_calibration(cluster: ClusterModel, calibrated: ClusterModel) -> ClusterModel:
    """`cluster` with the compute scales `calibrate step` stored in `calibrated`, a cluster file of another
    machine kind: the share of its kernels' own speed a framework's step keeps is taken to carry to this
    cluster's GPUs, whose kernels keep their own model (`fabric/kernels.py`), and the host's dispatch speed
    (the framework's, `fabric/host.py`) with it; the kernels' launch floors are this GPU's. A ValueError
    when `calibrated` holds no such scale."""
    compute = calibrated.compute
    if compute is None or not compute.scale:
        raise ValueError(f"--calibrated {calibrated.name}: the file holds no compute scale; write one with "
                         f"`fabriclab calibrate step --cluster ... --out FILE` (a flat --efficiency does not carry "
                         f"across GPUs)")
    where = f"carried from {calibrated.name} ({compute.efficiency_source or 'its cluster file'})"
    for precision, value in compute.scale.items():
        cluster = with_efficiency(cluster, precision, value, where, host_scale=compute.host_scale.get(precision, 1.0))
    return cluster


def domain_worth(spec: TransformerSpec, par: ParallelConfig, cluster: ClusterModel, answer: LlmAnswer, *,
                 options: StepOptions = StepOptions(), efficiency: float | None = None,
                 memory_options: MemoryOptions = MemoryOptions(), hgx_gpus: int = 8) -> dict | None:
    """What a cluster's NVLink domain across trays buys this job: the same job on the same GPUs, NICs and
    network with the domain cut to `hgx_gpus` (an HGX server's 8), beside `answer`. None when the cluster's
    domain is its server; `step_time_s` None with `why` when the job cannot run on the smaller domains."""
    from fabriclab.fabric.domains import spans_servers

    if not spans_servers(cluster) or cluster.server.gpus_per_server > hgx_gpus:
        return None
    cut = replace(cluster, name=f"{cluster.name} cut to {hgx_gpus}",
                  server=replace(cluster.server, gpus_per_domain=hgx_gpus, domain_gpus_used=0))
    try:
        other = simulate_llm(spec, par, cut, options=options, efficiency=efficiency, memory_options=memory_options)
    except ValueError as exc:
        return {"domain_gpus": hgx_gpus, "step_time_s": None, "why": str(exc)}
    return {"domain_gpus": hgx_gpus, "step_time_s": other.step_time_s,
            "gain": other.step_time_s / answer.step_time_s - 1, "split_s": other.result.split_s}
