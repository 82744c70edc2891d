"""GPU memory of transformer training per GPU, as Megatron-LM's mixed precision lays it out.

Model state, bytes per parameter (Megatron-LM docs/source/api-guide/distrib_optimizer.md: 18 without the
distributed optimizer, 6 + 12/d with it, "bf16 param, fp32 grads"):
- weights in bf16 (2 B), main gradients (`MemoryOptions.grad_bytes`), Adam's fp32 master weights, m and v
  (12 B). The gradient buffer is the framework's choice: Megatron-LM keeps it in fp32 with bf16 (4 B:
  megatron/training/arguments.py sets accumulate_allreduce_grads_in_fp32 unless --grad-reduce-in-bf16);
  NeMo's recipe of NVIDIA's GPT-3 175B runs (NVIDIA/dgxc-benchmarking nemo_megatron/gpt3_175b_hydra.yaml:
  distributed_fused_adam, grad_sync_dtype bf16) and DeepSpeed's fp16 ZeRO (Rajbhandari et al. 2020, "ZeRO:
  Memory Optimizations Toward Training Trillion Parameter Models", 2 + 2 + K bytes) keep it in 16 bits (2 B).
- Per GPU: a pipeline stage's non-expert parameters / tp; its routed experts' / (etp x ep), the experts'
  grid folded over the stage (`workload/parallel.py`). The input embedding lives on the first stage, the
  output layer (with pp > 1 a copy of a tied embedding), the final norm and the multi-token prediction
  modules (DeepSeek-V3: one, a projection of 2h to h and a layer like the last) on the last.
- ZeRO shards over the data-parallel replicas of a parameter: dp x cp for non-expert parameters, expert-DP
  = tp x cp x dp / (etp x ep) for experts (Megatron's distributed optimizer). 1: optimizer state; 2:
  gradients too; 3: weights too (FSDP), plus the largest layer's (or embedding's) full weights gathered at a
  time.
- fp8 training (Transformer Engine) keeps bf16 weights and fp32 state (its fp8 weight casts are transient);
  of the activations, TE saves the inputs of its fp8 GEMMs in fp8 (one byte): the QKV projection's and the
  MLP's (the norms' outputs), the down projection's, the experts' tokens and their down projection's input.
  The attention's Q, K, V and output (flash attention keeps them), norms' inputs and the router stay bf16.

Activations per layer and micro-batch follow Korthikanti et al. 2022 ("Reducing Activation Recomputation in
Large Transformer Models", section 4 and Table 2), with s = seq / cp, b = mbs, h, a heads, t = tp:
- no recomputation: s b h (34 + 5 a s / h) / t with sequence parallelism (s b h (10 + 24/t + 5 a s/(h t))
  without); selective (the attention core recomputed; what FlashAttention stores too): 34 s b h / t;
  full: 2 s b h / t (the layer input only). With fused attention (`ParallelConfig.flash_attention`, the
  default, as Megatron-Core and NeMo run) the 5 a s / h term of the scores is never stored.
- The 34 is generalised to the model's shapes so that a GPT layer gives exactly 34: 10 s b h replicated
  over TP without sequence parallelism (two norm inputs 4, two dropout masks 2, the inputs of the QKV and
  first MLP matmuls 4) and, split over TP, Q 2 s b h, K and V 2 s b kv each (grouped-query attention), the
  output projection's input 2 s b h, and the MLP's 4 s b ffn (GELU: its input and output) or 6 s b ffn
  (SwiGLU: gate and up outputs and the down projection's input, as Megatron's fused swiglu saves them).
- An MoE layer has shared experts' MLP activations as above (ffn = shared x moe_ffn), the router's fp32
  logits (4 s b E), and for its routed tokens, top-k x s b x etp / t of them on each GPU on average
  (balanced routing: a rank routes its share of the sequence, an expert's ETP shards each see all of its
  tokens): a bf16 copy of each (2 h) and the expert MLP's 6 (or 4) x moe_ffn / etp. Not counted: all-to-all
  buffers, the router's probabilities, padding.
- Selective recomputation keeps less by Megatron-Core's `--recompute-modules` (`layer_activation_parts`):
  `core_attn` the scores when stored (its default; nothing under flash attention), `layernorm` the norms'
  outputs, `mla_up_proj` Q, K and V (the low-rank latents stay), `mlp` the dense MLP's, `moe_act` the
  experts' activation output, `shared_experts` theirs, `moe` everything of the MoE layer but its input.
- Activation offloading (`ParallelConfig.offload_layers`) moves the first N layers of each model chunk to host
  memory; one offloaded layer's activations stay in flight on the GPU.
- The first stage also keeps the embedding's dropout mask (s b h / t per micro-batch), the last the output
  layer's activations and fp32 logits, 4 s b h (1 + V/h) / t (Korthikanti section 4.3).
- Micro-batches in flight: 1F1B stage r holds min(pp - r, m) (stage 0: pp; Narayanan et al. 2021);
  interleaved (vp > 1) stage r holds Megatron's warm-up count (pp - r - 1) x 2 + (vp - 1) x pp + 1 model
  chunks, which for stage 0 is pp (1 + (pp - 1)/(pp vp)) stages' worth (Korthikanti section 4.2.3).
- Full recomputation re-runs one layer's forward in the backward pass, so that layer's activations (as
  without recomputation) are held once on top of the stored layer inputs.

What the model does not count is the reserve (`MemoryOptions.reserve_bytes`, `--memory-reserve`): the CUDA
context and libraries' workspaces, NCCL's buffers (about 1.6 GB for one communicator running all-reduce,
6 GB for three or more: NVIDIA/nccl#864; 1.1 -> 4.3 GB per H100 after one 8-GPU all-to-all: NVIDIA/nccl#1685)
and the caching allocator's fragmentation. `check_fits` refuses a job only when even the low end of the
model's range (activations - ACTIVATION_UNCERTAINTY) plus the reserve exceeds the GPU, and warns when
the high end does. The GPU's memory is what nvidia-smi reports (H100: 81,559 MiB = 85.5e9 B; the data
sheet's "80 GB" are GiB), `fabric/gpus.py`.

Checked (tests/workload/test_memory_published.py): ZeRO's Figure 1 to its rounding, Megatron-LM's own
estimator (megatron/training/theoretical_memory_usage.py) exactly for GPT-3 175B TP4 PP8 VP6, and published
runs not refused: NVIDIA's GPT-3 175B series on 80 GB H100s, Korthikanti et al.'s Table 3 (22B-1T) on 80 GB
A100s, torchtitan's Llama 3.1 runs on 96 GB H100s (whose FSDP-under-PP buffers this model does not count).

Try it: `python -c "from fabriclab.workload.memory import memory_per_gpu; from fabriclab.workload.transformer
import load_model; from fabriclab.workload.parallel import ParallelConfig as P;
[print(r) for r in memory_per_gpu(load_model('gpt3-175b'), P(num_gpus=128, tp=4, pp=8, vp=6, gbs=256,
seq=2048, recompute='selective')).rows()]"`.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from fabriclab.workload.parallel import ParallelConfig, layers_of_chunks
from fabriclab.workload.transformer import TransformerSpec

WEIGHT_BYTES = 2      # bf16 weights
GRADIENT_BYTES = 4    # fp32 main gradients (Megatron-LM's default with bf16)
OPTIMIZER_BYTES = 12  # Adam: fp32 master weights, first and second moments
GB = 1e9
# The default reserve: ~0.5 GB CUDA context and cuBLAS/cuDNN workspaces, ~2 GB of NCCL buffers for a job's
# TP, PP and DP communicators (NVIDIA/nccl#864: 1.6 GB for one, 6 GB for three or more with every channel
# connected; Megatron's groups mostly run rings), and ~1.5 GB of fragmentation left by the caching
# allocator (an estimate, not a measurement).
DEFAULT_RESERVE_BYTES = 4e9
# The activation formulas count every stored tensor of Megatron's layer (Korthikanti et al. Table 2); what a
# framework really keeps differs by a few such tensors: Llama has no dropout masks (2 of a GPT layer's 34
# s b h), fused RoPE, SwiGLU and Transformer Engine's fp8 casts keep or drop one or two, and the
# gradients of the layer under backward come on top. +-10 % of the activations covers these.
ACTIVATION_UNCERTAINTY = 0.10


@dataclass(frozen=True, kw_only=True)
class MemoryOptions:
    """The framework's buffers the memory model cannot infer from the parallel layout."""

    grad_bytes: int = GRADIENT_BYTES
    """Bytes of a main gradient: 4 (fp32, Megatron-LM's default with bf16) or 2 (bf16: Megatron-LM's
    --grad-reduce-in-bf16, NeMo's distributed fused Adam with grad_sync_dtype bf16, DeepSpeed fp16)."""
    reserve_bytes: float = DEFAULT_RESERVE_BYTES
    """Memory per GPU the model does not count: CUDA context, NCCL buffers, allocator fragmentation."""

    def __post_init__(self) -> None:
        if self.grad_bytes not in (2, 4):
            raise ValueError(f"gradient buffer of {self.grad_bytes} B: use --grad-dtype fp32 (4 B) or bf16 (2 B)")
        if not 0 <= self.reserve_bytes < 1e12:
            raise ValueError(f"--memory-reserve {self.reserve_bytes / GB:g} GB: give 0 or more GB, e.g. 4GB")


@dataclass(frozen=True, kw_only=True)
class MemoryBreakdown:
    """Memory of one GPU of a pipeline stage, in bytes."""

    weights_bytes: float
    """bf16 weights held (ZeRO-3: the shard plus the largest layer gathered)."""
    gradients_bytes: float
    """fp32 main gradients held (ZeRO-2/3: the shard)."""
    optimizer_bytes: float
    """Adam's fp32 master weights, m and v held (ZeRO-1/2/3: the shard)."""
    activations_bytes: float
    """Activations of the micro-batches in flight."""
    total_bytes: float = field(init=False)
    """The sum of the four."""
    stage: int = 0
    """The pipeline stage (0-based) this GPU belongs to."""
    num_params: float = 0.0
    """Parameters of this GPU's model part before ZeRO sharding."""
    num_expert_params: float = 0.0
    """Of which routed-expert parameters."""
    in_flight_microbatches: float = 1.0
    """Micro-batches whose activations the stage holds at its peak (in whole stages' worth of layers)."""
    zero: int = 0
    """The ZeRO stage it was computed for."""
    recompute: str = "none"
    """The activation recomputation it was computed for."""
    grad_bytes: int = GRADIENT_BYTES
    """Bytes of a main gradient it was computed for."""
    fit: "MemoryFit | None" = None
    """How it compares with a GPU's memory (`check_fits`), when checked."""

    @property
    def spread_bytes(self) -> float:
        """The model's uncertainty, +- (ACTIVATION_UNCERTAINTY of the activations; the model state is exact)."""
        return ACTIVATION_UNCERTAINTY * self.activations_bytes

    def __post_init__(self) -> None:
        total = self.weights_bytes + self.gradients_bytes + self.optimizer_bytes + self.activations_bytes
        object.__setattr__(self, "total_bytes", total)

    def rows(self) -> list[dict]:
        """One row per part and the total: {"part", "bytes", "GB", "note"}."""
        parts = [("weights", self.weights_bytes, "bf16, 2 B/param" + (", ZeRO-3 shard + one layer"
                                                                       if self.zero == 3 else "")),
                 ("gradients", self.gradients_bytes, ("fp32, 4" if self.grad_bytes == 4 else "bf16, 2")
                  + " B/param" + (", sharded" if self.zero >= 2 else "")),
                 ("optimizer", self.optimizer_bytes, "Adam fp32 master, m, v: 12 B/param"
                  + (", sharded" if self.zero >= 1 else "")),
                 ("activations", self.activations_bytes, f"{self.in_flight_microbatches:g} micro-batches in "
                                                         f"flight, recompute {self.recompute}"),
                 ("total", self.total_bytes, f"pipeline stage {self.stage}, {self.num_params / 1e9:.3f}e9 params")]
        return [{"part": p, "bytes": b, "GB": b / GB, "note": n} for p, b, n in parts]


def stage_layers(num_layers: int, pp: int, vp: int = 1) -> list[list[int]]:
    """The layer indices each pipeline stage holds: the step program's split into pp x vp model chunks
    (`workload/parallel.layers_of_chunks`), chunk c on stage c % pp (interleaved when vp > 1)."""
    stages: list[list[int]] = [[] for _ in range(pp)]
    first = 0
    for c, size in enumerate(layers_of_chunks(num_layers, pp * vp)):
        stages[c % pp].extend(range(first, first + size))
        first += size
    return stages


def in_flight_microbatches(par: ParallelConfig, stage: int) -> float:
    """Micro-batches (in whole stages' worth of layers) whose activations stage `stage` holds at its peak."""
    m = par.num_microbatches
    if par.vp == 1:
        return float(min(m, par.pp - stage))
    # Megatron's interleaved schedule: warm-up forwards of model chunks, then one more in the steady state
    chunks = min(m * par.vp, (par.pp - stage - 1) * 2 + (par.vp - 1) * par.pp + 1)
    return chunks / par.vp


def layer_activation_bytes(spec: TransformerSpec, par: ParallelConfig, moe_layer: bool = False) -> float:
    """Activation bytes one GPU keeps for one layer and one micro-batch (module docstring)."""
    return sum(layer_activation_parts(spec, par, moe_layer).values())


def layer_activation_parts(spec: TransformerSpec, par: ParallelConfig, moe_layer: bool = False) -> dict[str, float]:
    """`layer_activation_bytes` by what keeps them (module docstring): the norms' inputs and outputs, the
    dropout masks, the attention's Q, K, V and output, the scores when stored, the dense MLP's, and an MoE
    layer's router logits, shared experts, routed tokens and the experts' MLP; without what the recomputed
    modules run again, with the linear layers' inputs in one byte under fp8."""
    s, b, h, t = par.seq / par.cp, par.mbs, spec.hidden_size, par.tp
    sp = t if par.sequence_parallel else 1
    if par.recompute == "full":
        return {"layer_input": 2 * s * b * h / sp}
    fp8 = par.precision == "fp8"
    per_ffn = (6 if spec.gated_mlp else 4) - (1 if fp8 else 0)  # fp8: the down projection's input in 1 byte
    modules = set(par.recompute_modules or ("core_attn",)) if par.recompute == "selective" else set()
    heads, kv, qk, v = spec.num_heads, spec.num_kv_heads, spec.qk_head_dim, spec.value_head_dim
    sb = s * b
    parts = {"norm_inputs": 4 * sb * h / sp, "dropout_masks": 2 * sb * h / sp,
             # the inputs of the QKV projection and of the MLP (or the router): fp8 keeps them in one byte
             "norm_outputs": (2 if fp8 else 4) * sb * h / sp,
             "qkv": 2 * sb * (heads * qk + kv * (qk + v)) / t, "attention_output": 2 * sb * heads * v / t,
             "scores": 5 * heads * s * s * b / t if par.recompute == "none" and not par.flash_attention else 0.0}
    if "layernorm" in modules:  # output-discarding: the norms run again from their inputs
        parts["norm_outputs"] = 0.0
    if "mla_up_proj" in modules:  # the up projections run again from the low-rank latents, which stay
        parts["qkv"] = 2 * sb * (spec.q_lora_rank + spec.kv_lora_rank + spec.qk_rope_head_dim) / t
    if not moe_layer:
        parts["mlp"] = 0.0 if "mlp" in modules else per_ffn * sb * spec.intermediate_size / t
        return parts
    whole = "moe" in modules  # the whole MoE layer runs again from its input
    routed = spec.experts_per_token * sb * par.etp / t  # a rank's tokens' copies, gathered over ETP
    act = per_ffn - (1 if fp8 else 2) if "moe_act" in modules else per_ffn  # moe_act: the activation's output
    parts |= {"router": 0.0 if whole else 4 * sb * spec.num_experts / t,
              "shared_experts": 0.0 if whole or "shared_experts" in modules else
              per_ffn * sb * spec.num_shared_experts * spec.moe_intermediate_size / t,
              "routed_tokens": 0.0 if whole else routed * (1 if fp8 else 2) * h,
              "experts": 0.0 if whole else routed * act * spec.moe_intermediate_size / par.etp}
    return parts


def _stage_params(spec: TransformerSpec, par: ParallelConfig, stage: int, layers: list[int]):
    """(non-expert params per GPU, expert params per GPU, largest single unit per GPU) of a stage."""
    tp, fold = par.tp, par.ep * par.etp  # norms are replicated over TP, counted split like the rest (negligible)
    units = [(spec.layer_params(i)[0] / tp, spec.layer_params(i)[1] / fold) for i in layers]
    if stage == 0:
        units.append((spec.embedding_params() / tp, 0.0))
    if stage == par.pp - 1:
        # Megatron keeps a copy of a tied embedding on the last stage when the first is another GPU
        output = spec.output_params() or (spec.embedding_params() if par.pp > 1 else 0)
        units.append(((output + spec.hidden_size) / tp, 0.0))  # and the final norm
        for _ in range(spec.mtp_layers):  # the multi-token prediction modules sit on the last stage
            dense, expert = spec.layer_params(spec.num_layers - 1)
            units.append(((spec.mtp_params() / spec.mtp_layers - expert) / tp, expert / fold))
    dense = sum(u[0] for u in units)
    expert = sum(u[1] for u in units)
    return dense, expert, max(sum(u) for u in units)


def _stage_memory(spec: TransformerSpec, par: ParallelConfig, stage: int, layers: list[int],
                  shard_group: int = 0, grad_bytes: int = GRADIENT_BYTES) -> MemoryBreakdown:
    dense, expert, largest = _stage_params(spec, par, stage, layers)
    replicas = par.dp * par.cp    # copies of a non-expert parameter
    expert_replicas = par.edp      # copies of an expert parameter (its shard)
    if 0 < shard_group < replicas:  # HSDP: a parameter is sharded over its shard group only
        replicas = shard_group

    def held(nbytes: float, sharded: bool) -> float:
        return nbytes * (dense / replicas + expert / expert_replicas if sharded else dense + expert)

    weights = held(WEIGHT_BYTES, par.zero >= 3)
    if par.zero >= 3 and replicas > 1:
        weights += WEIGHT_BYTES * largest  # FSDP gathers one layer's full weights at a time
    in_flight = in_flight_microbatches(par, stage)
    per_layer = [layer_activation_bytes(spec, par, spec.is_moe_layer(i)) for i in layers]
    offloaded = [per_layer[k] for k in offloaded_layers(spec, par, layers)]
    s, b, h, sp = par.seq / par.cp, par.mbs, spec.hidden_size, par.tp if par.sequence_parallel else 1
    per_pass = sum(per_layer) - sum(offloaded)
    if stage == 0:
        per_pass += s * b * h / sp  # the embedding's dropout mask
    # offloaded layers leave one layer's activations in flight between the GPU and its host
    activations = in_flight * per_pass + max(offloaded, default=0.0)
    if par.recompute == "full":  # the layer whose forward the backward re-runs holds what it would store
        stored = replace(par, recompute="none")
        activations += max(layer_activation_bytes(spec, stored, spec.is_moe_layer(i)) for i in layers)
    if stage == par.pp - 1:
        logits = 4 * s * b * h * (1 + spec.vocab_size / h) / par.tp  # output layer and fp32 logits
        # each multi-token prediction module: its layer (like the last), its 2h input and the logits again
        mtp = layer_activation_bytes(spec, par, spec.is_moe_layer(spec.num_layers - 1)) + 4 * s * b * h / sp + logits
        activations += logits + spec.mtp_layers * mtp
    return MemoryBreakdown(weights_bytes=weights, gradients_bytes=held(grad_bytes, par.zero >= 2),
                           optimizer_bytes=held(OPTIMIZER_BYTES, par.zero >= 1), activations_bytes=activations,
                           stage=stage, num_params=dense + expert, num_expert_params=expert,
                           in_flight_microbatches=in_flight, zero=par.zero, recompute=par.recompute,
                           grad_bytes=grad_bytes)


def offloaded_layers(spec: TransformerSpec, par: ParallelConfig, layers: list[int]) -> list[int]:
    """Positions in `layers` (a stage's, `stage_layers`) whose activations go to host memory: the first
    `par.offload_layers` transformer layers of each model chunk (`ParallelConfig.offload_layers`)."""
    if not par.offload_layers:
        return []
    chunks = layers_of_chunks(spec.num_layers, par.pp * par.vp)
    starts = {sum(chunks[:c]) for c in range(len(chunks))}
    out, run = [], 0
    for k, i in enumerate(layers):
        run = 0 if i in starts else run + 1
        if run < par.offload_layers:
            out.append(k)
    return out


def memory_per_stage(spec: TransformerSpec, par: ParallelConfig, *, shard_group: int = 0,
                     options: MemoryOptions = MemoryOptions()) -> list[MemoryBreakdown]:
    """The memory of one GPU of each pipeline stage, first to last; `shard_group`: HSDP's ranks sharing a
    parameter (0: all of dp x cp)."""
    return [_stage_memory(spec, par, r, layers, shard_group, options.grad_bytes)
            for r, layers in enumerate(stage_layers(spec.num_layers, par.pp, par.vp))]


def memory_per_gpu(spec: TransformerSpec, par: ParallelConfig, *, shard_group: int = 0,
                   options: MemoryOptions = MemoryOptions()) -> MemoryBreakdown:
    """The memory of a GPU of the most loaded pipeline stage (for dense models stage 0: the embedding and
    the most micro-batches in flight; for MoE models with dense first layers it can be a later one)."""
    return max(memory_per_stage(spec, par, shard_group=shard_group, options=options),
               key=lambda m: (m.total_bytes, -m.stage))


@dataclass(frozen=True, kw_only=True)
class MemoryFit:
    """A breakdown against one GPU's memory: the model's estimate with its range and the reserve."""

    needed_bytes: float
    """The model's estimate plus the reserve."""
    spread_bytes: float
    """The model's uncertainty, +- (`MemoryBreakdown.spread_bytes`)."""
    reserve_bytes: float
    """What the model does not count (CUDA context, NCCL buffers, fragmentation)."""
    capacity_bytes: float
    """The GPU's memory."""
    warning: str | None = None
    """One line when the high end of the range exceeds the GPU (the job may not fit), else None."""

    @property
    def headroom_bytes(self) -> float:
        """Capacity left at the estimate (negative: short)."""
        return self.capacity_bytes - self.needed_bytes


def _tries(b: MemoryBreakdown) -> str:
    tries = []
    if b.zero < 3:
        tries.append(f"--zero {b.zero + 1}")
    if b.recompute != "full":
        tries.append("--recompute " + ("selective" if b.recompute == "none" else "full"))
    tries.append("larger --tp/--pp" + ("/--ep" if b.num_expert_params else ""))
    return ", ".join(tries)


def check_fits(breakdown: MemoryBreakdown, gpu_memory_bytes: float, *,
               reserve_bytes: float = DEFAULT_RESERVE_BYTES, advice=None) -> MemoryFit:
    """How `breakdown` fits a GPU of `gpu_memory_bytes` with `reserve_bytes` kept free: a ValueError that says
    what to change when even the low end of the model's range does not fit; a fit with a one-line warning
    when the high end does not; a fit without one otherwise. `advice`: a function giving the options that
    free memory on this job (`workload/advice.memory_advice`), called only when one is needed; without it
    the kinds of option that may."""
    b = breakdown
    tries = advice or (lambda: _tries(b))
    need, spread = b.total_bytes + reserve_bytes, b.spread_bytes
    fit = MemoryFit(needed_bytes=need, spread_bytes=spread, reserve_bytes=reserve_bytes,
                    capacity_bytes=gpu_memory_bytes)
    parts = (f"weights {b.weights_bytes / GB:.1f}, gradients {b.gradients_bytes / GB:.1f}, optimizer "
             f"{b.optimizer_bytes / GB:.1f}, activations {b.activations_bytes / GB:.1f} +- {spread / GB:.1f}, "
             f"reserve {reserve_bytes / GB:.1f} GB")
    if need - spread > gpu_memory_bytes:
        raise ValueError(f"does not fit: needs {need / GB:.1f} +- {spread / GB:.1f} GB of {gpu_memory_bytes / GB:.1f} "
                         f"GB per GPU (pipeline stage {b.stage}): {parts}; try {tries()}")
    if need + spread > gpu_memory_bytes:
        short = need + spread - gpu_memory_bytes
        return replace(fit, warning=f"warning: memory is marginal: {need / GB:.1f} +- {spread / GB:.1f} GB of "
                                    f"{gpu_memory_bytes / GB:.1f} GB per GPU ({reserve_bytes / GB:.1f} GB reserve "
                                    f"included), up to {short / GB:.1f} GB short; to be sure free that much "
                                    f"({tries()}) or measure it")
    return fit


def trainer_state_bytes(spec: TransformerSpec, par: ParallelConfig, element_bytes: int) -> float:
    """Host (or device) bytes of one rank's parameter state in fabriclab's own trainer (`runtime/llm`), on its
    most loaded pipeline stage: one precision throughout (no mixed precision), so per parameter the weights
    and the flat gradient buffer whole (ZeRO-3 included: it keeps the flat buffer and gathers into it), the
    reduced gradient shard and Adam's m and v sharded over the data-parallel replicas with ZeRO >= 1, and
    ZeRO-3's gather scratch (`runtime/llm/dp.FlatGroup`). Activations are not counted: at the trainer's
    model sizes they are small beside these."""
    most = 0.0
    for stage, layers in enumerate(stage_layers(spec.num_layers, par.pp, par.vp)):
        dense, expert, _ = _stage_params(spec, par, stage, layers)
        replicas = par.dp * par.cp if par.zero >= 1 else 1
        expert_replicas = max(1, replicas // par.ep)
        copies = 2 + (1 if par.zero == 3 else 0)
        most = max(most, element_bytes * ((copies + 3 / replicas) * dense + (copies + 3 / expert_replicas) * expert))
    return most
