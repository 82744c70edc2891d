"""Compute of a transformer step on one GPU: FLOPs per micro-batch and model chunk, and their time.

FLOPs are the model's own (2 x multiply-adds, Megatron's MFU convention: attention scores counted
without the causal mask's saving, `workload/transformer.py`), divided over the GPUs that share the work:
tensor parallelism splits every matrix (and the heads), context parallelism splits the sequence (each rank
computes scores of its seq/cp queries against all keys), expert parallelism spreads the routed tokens
(each GPU runs top-k x its tokens through experts on average, the router balances them), pipeline
parallelism gives each stage its layers (the embedding to the first, the output layer and loss to the
last). Backward is twice the forward; recomputation adds the forward of what it recomputes (full: the whole
layer, not the output layer; selective: the attention core).

Time is a roofline of the GPU: FLOPs / (peak of the precision x achieved efficiency). In fp8 the matrix
multiplications of the linear layers run at the fp8 peak, the attention core (scores, softmax x values)
stays in bf16 as Transformer Engine runs it. The efficiency is the share of peak the model's math reaches;
it comes from a measured step (`fabriclab calibrate step`), is stored in the cluster file, and every
output says where it came from. With the kernel model (`ShapeRates`) every op is timed kernel by kernel,
a calibrated scale acting on the kernels' work and not their launch floors, and each op also says what the
host pays to dispatch it (`pieces`, `fabric/host.py`).

Try it: `python -c "from fabriclab.workload.transformer import load_model; from fabriclab.workload.parallel
import ParallelConfig as P; from fabriclab.whatif.llm.compute import stage_flops;
print(stage_flops(load_model('gpt3-175b'), P(num_gpus=128, tp=4, pp=8, gbs=256, seq=2048))[0])"`.
"""

from __future__ import annotations

from dataclasses import dataclass

from fabriclab.fabric.kernels import Attention, Gemm, HostSync
from fabriclab.whatif.llm.shapes import layer_kernels
from fabriclab.workload.parallel import ParallelConfig, layers_of_chunks
from fabriclab.workload.transformer import TransformerSpec


@dataclass(frozen=True)
class ChunkFlops:
    """FLOPs of one model chunk (a stage's layers, or one virtual stage's) for one micro-batch on one GPU."""

    linear: float
    """Linear layers (attention projections, MLP, experts, router, output layer): forward."""
    attention: float
    """Attention core (scores and values): forward."""
    num_layers: int
    num_moe_layers: int
    logits: float = 0.0
    """Of `linear`: the output layer's (not recomputed: full recomputation re-runs transformer layers)."""

    @property
    def forward(self) -> float:
        return self.linear + self.attention


def _is_moe_layer(spec: TransformerSpec, index: int) -> bool:
    if not spec.is_moe or index < spec.first_dense_layers:
        return False
    return (index - spec.first_dense_layers) % max(1, spec.moe_layer_freq) == 0


@dataclass(frozen=True)
class LayerFlops:
    """Forward FLOPs of one rank for one micro-batch, per part of a layer (the step program's compute ops and
    `chunk_flops` both read these)."""

    attention_linear: float
    attention_core: float
    dense_mlp: float
    moe_mlp: float
    logits: float
    """The output layer's, and the multi-token prediction modules' after it."""


def layer_flops(spec: TransformerSpec, par: ParallelConfig) -> LayerFlops:
    """Per-layer forward FLOPs on one GPU for one micro-batch (module doc)."""
    tokens = par.mbs * par.seq / par.cp  # tokens a rank holds in a micro-batch
    tp = par.tp
    h = spec.hidden_size
    if spec.is_moe:
        routed = 2 * spec.expert_params() * spec.experts_per_token * tokens / tp
        moe_mlp = routed + 2 * (spec.shared_expert_params() + spec.router_params()) * tokens / tp
    else:
        moe_mlp = 0.0
    mtp = spec.forward_flops_per_token(par.seq).get("mtp", 0.0)  # on the last stage, with the logits
    return LayerFlops(attention_linear=2 * spec.attention_params() * tokens / tp,
                      # QK^T and AV against all keys, heads over TP
                      attention_core=spec.attention_core_flops_per_token(par.seq) * tokens / tp,
                      dense_mlp=2 * spec.mlp_params() * tokens / tp, moe_mlp=moe_mlp,
                      logits=(2 * spec.vocab_size * h + mtp) * tokens / tp)


def chunk_flops(spec: TransformerSpec, par: ParallelConfig) -> list[ChunkFlops]:
    """FLOPs per model chunk (pp x vp of them, in model order) for one micro-batch on one GPU."""
    f = layer_flops(spec, par)
    attn_linear, attn_core, dense_mlp, moe_mlp, logits = (f.attention_linear, f.attention_core, f.dense_mlp,
                                                          f.moe_mlp, f.logits)
    chunks = layers_of_chunks(spec.num_layers, par.pp * par.vp)
    out, first = [], 0
    for i, n in enumerate(chunks):
        moe = sum(_is_moe_layer(spec, first + k) for k in range(n))
        linear = n * attn_linear + (n - moe) * dense_mlp + moe * moe_mlp
        last = i == len(chunks) - 1
        if last:
            linear += logits
        out.append(ChunkFlops(linear=linear, attention=n * attn_core, num_layers=n, num_moe_layers=moe,
                              logits=logits if last else 0.0))
        first += n
    return out


def stage_flops(spec: TransformerSpec, par: ParallelConfig) -> list[float]:
    """Forward FLOPs per pipeline stage (all its chunks) for one micro-batch on one GPU."""
    chunks = chunk_flops(spec, par)
    return [sum(chunks[v * par.pp + s].forward for v in range(par.vp)) for s in range(par.pp)]


@dataclass(frozen=True)
class Roofline:
    """The rates compute runs at: peak x efficiency, per kind of math."""

    linear_flops_per_s: float
    attention_flops_per_s: float

    def forward_s(self, c: ChunkFlops) -> float:
        return c.linear / self.linear_flops_per_s + c.attention / self.attention_flops_per_s

    def backward_s(self, c: ChunkFlops, recompute: str) -> float:
        again = {"none": 0.0, "selective": c.attention / self.attention_flops_per_s,
                 "full": self.forward_s(c) - c.logits / self.linear_flops_per_s}[recompute]
        return 2 * self.forward_s(c) + again

    def work_s(self, work) -> tuple[float, float]:
        """(linear, attention-core) seconds of one compute op of the step program."""
        return work.linear_flops / self.linear_flops_per_s, work.attention_flops / self.attention_flops_per_s


    def pieces(self, work) -> tuple[tuple[float, float], ...]:
        """(GPU s, host s) of a compute op, in pieces the host cannot run ahead across (`fabric/host.py`);
        a roofline has no host."""
        return ((sum(self.work_s(work)), 0.0),)


@dataclass(frozen=True)
class ShapeRates(Roofline):
    """Compute timed kernel by kernel (`fabric/kernels.py`): every op of the step program at the rate its
    shapes reach, times `scale`, the share of the kernels' own speed a framework's step keeps (1: as
    measured alone; `fabriclab calibrate step` fits it); the kernels' launch floors do not scale. The host
    dispatches the kernels (`host`, `fabric/host.py`) at `host_scale` x its model's speed. The inherited
    rates are this job's average (for estimates that see FLOPs only, such as a plan's bounds)."""

    kernels: object = None
    """A `fabric.kernels.KernelModel`."""
    gpu: object = None
    precision: str = "bf16"
    scale: float = 1.0
    host: object = None
    """A `fabric.host.HostModel`; None: the host keeps up with every kernel."""
    host_scale: float = 1.0
    """The host's speed over its model's (`fabriclab calibrate step` fits it where the step is host-bound)."""

    def work_s(self, work) -> tuple[float, float]:
        if not work.kernels:
            return super().work_s(work)
        (busy_linear, fixed_linear, busy_core, fixed_core), _ = self._sums(work.kernels)
        return busy_linear / self.scale + fixed_linear, busy_core / self.scale + fixed_core

    def pieces(self, work) -> tuple[tuple[float, float], ...]:
        if not work.kernels or self.host is None:
            return super().pieces(work)
        _, pieces = self._sums(work.kernels)
        out = [(busy / self.scale + fixed, host / self.host_scale) for busy, fixed, host in pieces]
        if self.host.graphed:  # a graph's launch per op
            gpu, host = out[-1]
            out[-1] = (gpu, host + self.host.launch_s / self.host_scale)
        return tuple(out)

    def _sums(self, kernels: tuple) -> tuple:
        """((linear busy, linear fixed, core busy, core fixed), ((busy, fixed, host) per piece split at a
        `HostSync`)) of a compute op's kernels, unscaled; remembered per tuple of kernels (the program
        shares them between like layers, and `layer_kernels` between a plan's configurations)."""
        key = (id(kernels), id(self.kernels), self.precision, self.gpu.num_sms, self.gpu.memory_bandwidth_Bps,
               self.gpu.peak_flops.get(self.precision), self.gpu.peak_flops.get("bf16"),
               self.host.kind if self.host is not None else "")
        hit = _SUMS.get(key)
        if hit is not None and hit[0] is kernels and hit[1] is self.kernels:
            return hit[2]
        if len(_SUMS) > SUMS_SIZE:
            _SUMS.clear()
        totals, pieces, piece = [0.0, 0.0, 0.0, 0.0], [], [0.0, 0.0, 0.0]
        for k in kernels:
            if isinstance(k, HostSync):  # the host waits for the GPU to get here
                pieces.append(tuple(piece))
                piece = [0.0, 0.0, 0.0]
            busy, fixed = self.kernels.parts_s(k, self.gpu, self.precision)
            at = 2 if isinstance(k, Attention) else 0
            totals[at] += busy
            totals[at + 1] += fixed
            piece[0] += busy
            piece[1] += fixed
            piece[2] += self.host.kernel_s(k) if self.host is not None else 0.0
        pieces.append(tuple(piece))
        value = (tuple(totals), tuple(pieces))
        _SUMS[key] = (kernels, self.kernels, value)  # the tuple held: its id is not reused while here
        return value


_SUMS: dict = {}
SUMS_SIZE = 100_000


def roofline(peak_flops: dict[str, float], precision: str, efficiency: float) -> Roofline:
    """Rates from the GPU's peaks: linear layers at the precision's peak, the attention core at bf16's."""
    if precision not in peak_flops:
        raise ValueError(f"this GPU has no {precision} tensor cores in its data sheet: use --precision bf16")
    if not 0 < efficiency <= 1:
        raise ValueError(f"compute efficiency {efficiency}: a share of peak in (0, 1]")
    return Roofline(linear_flops_per_s=peak_flops[precision] * efficiency,
                    attention_flops_per_s=peak_flops["bf16"] * efficiency)


def shape_rates(spec: TransformerSpec, par: ParallelConfig, gpu, kernels, scale: float, host=None,
                host_scale: float = 1.0) -> ShapeRates:
    """The kernel-by-kernel rates of a job, its kernels dispatched by `host` (a `fabric.host.HostModel`;
    None: never waited for). Its inherited FLOP rates are the fastest any of its GEMMs (and its attention)
    reaches, so a time from FLOPs alone (`Roofline.forward_s`) never exceeds the kernels'."""
    if not 0 < scale <= 2:
        raise ValueError(f"compute scale {scale}: the share of the kernels' own speed a step keeps, in (0, 2]")
    if not 0 < host_scale <= 100:
        raise ValueError(f"host scale {host_scale}: the host's speed over its model's, in (0, 100]")
    if par.precision not in gpu.peak_flops:
        raise ValueError(f"this GPU has no {par.precision} tensor cores in its data sheet: use --precision bf16")
    every = [k for name, ops in layer_kernels(spec, par).items() if name != "core" for k in ops]
    gemm = [k.flops / kernels.time_s(k, gpu, par.precision) for k in every if isinstance(k, Gemm) and k.flops > 0]
    core = [k.flops / kernels.time_s(k, gpu, par.precision) for k in every if isinstance(k, Attention) and k.flops > 0]
    # the kernels' FLOPs are the real ones (causal: half the scores); the program counts attention without
    # the mask's saving, so its rate per counted FLOP is twice the kernel's
    return ShapeRates(linear_flops_per_s=scale * max(gemm, default=gpu.peak(par.precision)),
                      attention_flops_per_s=scale * 2 * max(core, default=gpu.peak("bf16")),
                      kernels=kernels, gpu=gpu, precision=par.precision, scale=scale, host=host,
                      host_scale=host_scale)
