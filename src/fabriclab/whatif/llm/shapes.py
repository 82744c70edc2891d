"""The kernels of one rank's layer, by shape: what the step program's compute ops run (`whatif/llm/program.py`),
for the kernel model to time (`fabric/kernels.py`).

`core` is the attention core alone (what selective recompute runs again). Per micro-batch a rank holds T = mbs x seq / cp tokens; with sequence parallelism the norms, residual adds
and dropouts run on T / tp of them, the matrices on all T (gathered over TP). Megatron-LM's layer, forward:

* attention block: norm; QKV projection (T, (heads + 2 kv heads) x head_dim / tp, h); flash attention of
  heads / tp heads, seq / cp queries against seq keys (causal); output projection (T, h, heads x head_dim /
  tp); bias-dropout-add.
* MLP: norm; up (gated: gate and up together, 2 ffn / tp wide); the activation (SwiGLU reads 2 ffn, writes
  ffn; GELU reads and writes ffn); down (T, h, ffn / tp); bias-dropout-add.
* attention with MLA (DeepSeek-V2/V3): the low-rank query and key-value projections with their norms, the
  rotary parts applied, flash attention of 192-wide queries and keys and 128-wide values (`_mla`).
* MoE: norm; router (T, experts, h) and its fused passes (31 kernels); shared experts as an MLP; the host
  waits for the tokens per expert (`HostSync`); each of the experts / ep local experts runs top-k x (T / tp)
  x etp x ep / experts tokens (balanced routing: a rank routes its share of the sequence, an expert's ETP
  shards see every token of their group; x `moe_imbalance` on the busiest rank) through its MLP (its ffn
  split over ETP) as one grouped GEMM each way (`Gemm.grouped`: their tiles share the SMs' waves); the
  tokens' permutation before and its inverse after (a read and a write of the routed copies each).
* multi-token prediction (`spec.mtp_layers`): after the output layer, per module two norms, a projection of
  2h to h, a layer like the last, the logits and the loss again.
* output layer: the final norm, the logits (T, vocab / tp, h), in bf16 whatever the step's precision
  (Transformer Engine leaves it out of FP8, and the router), and the loss's softmax over fp32 logits
  (three passes).
* FP8 (and MXFP8): each FP8 GEMM's input cast and transposed, and its output gradient in backward, a cast
  per expert of a grouped GEMM (`fp8_casts`).

Memory-bound bytes (bf16, 2 B an element): a norm reads and writes its input (4 B per element); a
bias-dropout-add reads the input and the residual, writes the sum and a 1-byte mask (7 B). Backward: each
GEMM becomes its data gradient (T, k, n) and its weight gradient (k, n, T); attention its backward
kernel; memory-bound passes twice the bytes.

Try it: `python -c "from fabriclab.whatif.llm.shapes import layer_kernels; from fabriclab.workload.transformer
import load_model; from fabriclab.workload.parallel import ParallelConfig as P;
print(layer_kernels(load_model('llama3-8b'), P(num_gpus=8, tp=2, gbs=8, seq=4096))['mlp'])"`.
"""

from __future__ import annotations

from dataclasses import replace

from fabriclab.fabric.kernels import Attention, Gemm, HostSync, MemoryPass
from fabriclab.workload.parallel import ParallelConfig
from fabriclab.workload.transformer import TransformerSpec

NORM_BYTES = 4  # per element: read and write in bf16
RESIDUAL_BYTES = 7  # per element: input and residual read, sum written (bf16), dropout mask written (1 B)
UNFUSED_SCORE_BYTES = 9  # per score: softmax read and write (4 B), dropout read, write and mask (5 B)
LOSS_BYTES = 12  # per logit: fp32 softmax, three passes (max, exp-sum, normalise) of 4 B
# The router after its GEMM, per (token, expert) of fp32 logits: score function, top-k, the chosen scores'
# normalisation, the balancing (auxiliary loss or the bias update) and the routing map, ~6 passes read and
# written (48 B); in 31 kernels with Megatron-Core's --moe-router-fusion (72 without; NVIDIA, "Optimizing
# DeepSeek-V3 Training Performance on NVIDIA GB200 NVL72", 2.1.4), the recipes' setting.
ROUTER_BYTES, ROUTER_KERNELS = 48, 31
PERMUTE_BYTES = 4  # per routed token copy and hidden element: a bf16 read and a bf16 write
ROPE_BYTES = 8  # MLA: per query and key element, the rotary part applied and the heads' parts concatenated


def layer_kernels(spec: TransformerSpec, par: ParallelConfig, tp_overlap: bool = False,
                  moe_imbalance: float = 1.0) -> dict[str, tuple]:
    """Forward kernels of one rank for one micro-batch, per compute op of the program: `attention`, `mlp`,
    `experts`, `output`, `embedding` (module doc). `tp_overlap`: the GEMMs beside TP's collectives run in
    tp chunks (Transformer Engine's ring exchange). `moe_imbalance`: the busiest rank's routed tokens over
    the mean (1: balanced, as the published benchmarks force it); the step runs at that rank's pace."""
    if not 1 <= moe_imbalance <= 64:
        raise ValueError(f"--moe-imbalance {moe_imbalance}: give the busiest expert rank's tokens over the mean, "
                         f"from 1 (balanced) to 64")
    # the kernels read only these of the job (a plan builds thousands of jobs of few such shapes)
    key = (spec, par.tp, par.cp, par.mbs, par.seq, par.sequence_parallel, par.flash_attention, par.ep, par.etp,
           par.precision, tp_overlap, moe_imbalance)
    hit = _KERNELS.get(key)
    if hit is None:
        if len(_KERNELS) > 4096:
            _KERNELS.clear()
        hit = _KERNELS[key] = _layer_kernels(spec, par, tp_overlap, moe_imbalance)
    return dict(hit)


_KERNELS: dict = {}


def _layer_kernels(spec: TransformerSpec, par: ParallelConfig, tp_overlap: bool, moe_imbalance: float) -> dict:
    tp, h = par.tp, spec.hidden_size
    tokens = par.mbs * par.seq / par.cp
    sp = tokens / tp if par.sequence_parallel and tp > 1 else tokens
    d = spec.head_dim
    norm = MemoryPass(NORM_BYTES * sp * h)
    residual = MemoryPass(RESIDUAL_BYTES * sp * h)
    dqk, dv = spec.qk_head_dim, spec.value_head_dim
    core = ((Attention(par.mbs, spec.num_heads / tp, par.seq / par.cp, par.seq, dqk, value_dim=dv),)
            if par.flash_attention else _unfused(par.mbs * spec.num_heads / tp, par.seq / par.cp, par.seq, d))
    projections = (_mla(spec, tokens, tp) if spec.is_mla else
                   (Gemm(tokens, (spec.num_heads + 2 * spec.num_kv_heads) * d / tp, h),))
    attention = (norm, *projections, *core, Gemm(tokens, h, spec.num_heads * dv / tp), residual)
    out = {"attention": attention, "core": core,
           "mlp": (norm, *_mlp(spec, tokens, spec.intermediate_size / tp), residual),
           "embedding": (MemoryPass(2 * 2 * sp * h),),
           "output": (norm, Gemm(tokens, spec.vocab_size / tp, h, bf16=True),
                      MemoryPass(LOSS_BYTES * tokens * spec.vocab_size / tp, kernels=3))}
    if spec.is_moe:
        experts_here = spec.num_experts / par.ep
        # a rank routes its T / tp tokens; an expert's ETP shards each see every token sent to the expert
        per_expert = spec.experts_per_token * tokens / tp * par.etp * par.ep / spec.num_experts * moe_imbalance
        routed = _mlp(spec, per_expert, spec.moe_intermediate_size / par.etp, count=experts_here, grouped=True)
        shared = (_mlp(spec, tokens, spec.num_shared_experts * spec.moe_intermediate_size / tp)
                  if spec.num_shared_experts else ())
        # the rank's routed token copies, permuted to its experts before them and back after (module doc)
        copies = PERMUTE_BYTES * per_expert * experts_here * h
        permute, unpermute = MemoryPass(copies, routed=True), MemoryPass(copies, routed=True)
        out["experts"] = (norm, *_router(spec, tokens / tp), *shared, HostSync(), permute, *routed, unpermute,
                          residual)
    out["output"] += _mtp(spec, out, tokens, tp)
    if tp_overlap and tp > 1 and par.sequence_parallel:
        out["attention"] = tp_chunks(out["attention"], tp)
        out["mlp"] = tp_chunks(out["mlp"], tp)
    if par.precision == "fp8":
        out = {name: ops if name == "core" else fp8_casts(ops) for name, ops in out.items()}
    return out


def tp_chunks(kernels: tuple, tp: int) -> tuple:
    """TP overlap (Transformer Engine's userbuffers): the GEMM after an all-gather and the one before a
    reduce-scatter (the block's first and last) run as tp GEMMs of m / tp rows, each beside one step of the
    ring exchange (NeMo's `userbuffers_*` configurations: `ring_exchange` for QKV, fc1, and the backward's
    data gradients; their weight gradients overlap in bulk, unchunked)."""
    gemms = [i for i, k in enumerate(kernels) if isinstance(k, Gemm)]
    ends = {gemms[0], gemms[-1]} if gemms else set()
    return tuple(replace(k, chunks=tp) if i in ends else k for i, k in enumerate(kernels))


def _unfused(heads: float, seq_q: float, seq_k: float, d: float) -> tuple:
    """Attention without a fused kernel (Megatron-LM before FlashAttention): the scores as a batched GEMM
    over every key (the causal mask saves nothing), a fused scale-mask-softmax (2 B read, 2 B written per
    score), the dropout of the probabilities (2 B read, 2 B and a 1-byte mask written), the values' GEMM."""
    scores = heads * seq_q * seq_k
    return (Gemm(seq_q, seq_k, d, count=heads, bf16=True), MemoryPass(UNFUSED_SCORE_BYTES * scores, kernels=2),
            Gemm(seq_q, d, seq_k, count=heads, bf16=True))


def _mlp(spec: TransformerSpec, tokens: float, ffn: float, count: float = 1, grouped: bool = False) -> tuple:
    """An MLP's kernels; `grouped`: the routed experts' (`count` of them, as one grouped GEMM each way)."""
    h, act = spec.hidden_size, (6 if spec.gated_mlp else 4) * tokens * ffn * count
    up = Gemm(tokens, (2 if spec.gated_mlp else 1) * ffn, h, count, grouped=grouped, routed=grouped)
    return up, MemoryPass(act, routed=grouped), Gemm(tokens, h, ffn, count, grouped=grouped, routed=grouped)


def _router(spec: TransformerSpec, tokens: float) -> tuple:
    """The router on a rank's share of the tokens: its GEMM (bf16: Transformer Engine leaves it out of FP8)
    and the fused passes that choose the experts and balance them (ROUTER_BYTES, ROUTER_KERNELS)."""
    return (Gemm(tokens, spec.num_experts, spec.hidden_size, bf16=True),
            MemoryPass(ROUTER_BYTES * tokens * spec.num_experts, kernels=ROUTER_KERNELS))


def _mla(spec: TransformerSpec, tokens: float, tp: int) -> tuple:
    """Multi-head latent attention's projections before the core (DeepSeek-V2/V3, as Megatron-Core runs it):
    the queries' and the keys' and values' down projections whole on every TP rank with their norms, the up
    projections split over the heads, the rotary parts applied and concatenated to the heads."""
    h, heads = spec.hidden_size, spec.num_heads / tp
    q = ((Gemm(tokens, spec.q_lora_rank, h), MemoryPass(NORM_BYTES * tokens * spec.q_lora_rank),
          Gemm(tokens, heads * spec.qk_head_dim, spec.q_lora_rank)) if spec.q_lora_rank else
         (Gemm(tokens, heads * spec.qk_head_dim, h),))
    kv_lora = spec.kv_lora_rank
    kv = (Gemm(tokens, kv_lora + spec.qk_rope_head_dim, h), MemoryPass(NORM_BYTES * tokens * kv_lora),
          Gemm(tokens, heads * (spec.head_dim + spec.value_head_dim), kv_lora))
    return (*q, *kv, MemoryPass(ROPE_BYTES * tokens * heads * spec.qk_head_dim * 2, kernels=2))


def _mtp(spec: TransformerSpec, out: dict, tokens: float, tp: int) -> tuple:
    """The multi-token prediction modules on the last stage, after the output layer (DeepSeek-V3): per
    module the two norms, the projection of 2h to h, a layer like the last one, the logits and the loss."""
    if not spec.mtp_layers:
        return ()
    h = spec.hidden_size
    last = out["experts"] if spec.is_moe_layer(spec.num_layers - 1) else out["mlp"]
    norms = (MemoryPass(NORM_BYTES * tokens * h, kernels=2),)
    module = (*norms, Gemm(tokens, h / tp, 2 * h), *out["attention"], *last, *out["output"])
    return module * spec.mtp_layers


def backward_kernels(kernels: tuple) -> tuple:
    """The backward of forward kernels (module doc); the same tuple for the same forward tuple (`layer_kernels`
    hands a plan's like configurations the same ones), so their times are looked up once."""
    hit = _BACKWARD.get(id(kernels))
    if hit is not None and hit[0] is kernels:
        return hit[1]
    if len(_BACKWARD) > 16384:
        _BACKWARD.clear()
    out = _backward(kernels)
    _BACKWARD[id(kernels)] = (kernels, out)  # the forward tuple held: its id is not reused while here
    return out


_BACKWARD: dict = {}


def _backward(kernels: tuple) -> tuple:
    out: list = []
    for k in reversed(kernels):
        if isinstance(k, Gemm):  # the data gradient keeps TP overlap's chunks, the weight gradient runs whole
            out += [replace(k, n=k.k, k=k.n), replace(k, m=k.k, n=k.n, k=k.m, chunks=1)]
        elif isinstance(k, Attention):
            out.append(replace(k, backward=True))
        elif isinstance(k, MemoryPass):
            back = 2 * k.bytes if k.backward_bytes is None else k.backward_bytes
            out.append(MemoryPass(back, 2 * k.kernels if k.backward_bytes is None else k.kernels, routed=k.routed))
        # a HostSync has no backward: the shapes are known by then
    return tuple(out)


def fp8_casts(kernels: tuple) -> tuple:
    """FP8 (Transformer Engine): before each FP8 GEMM its input is cast to FP8 and transposed for the weight
    gradient (`cast_transpose`: 2 B read, 1 B + 1 B written per element), and in backward the output's
    gradient the same way; the weights' casts are kept across a step's micro-batches (TE's
    `is_first_microbatch`) and left out."""
    out: list = []
    for k in kernels:
        if isinstance(k, Gemm) and not k.bf16:  # a grouped GEMM's experts each cast their own tokens
            out.append(MemoryPass(4 * k.m * k.k * k.count, k.count if k.grouped else 1,
                                  backward_bytes=4 * k.m * k.n * k.count, routed=k.routed))
        out.append(k)
    return tuple(out)


def recompute_kernels(spec: TransformerSpec, par: ParallelConfig, kernels: dict) -> dict[str, tuple]:
    """What selective recomputation of each of Megatron-Core's modules runs again before a layer's backward,
    by module name (`workload/parallel.RECOMPUTE_MODULES`), from the layer's forward `kernels`
    (`layer_kernels`): `core_attn` the attention core, `layernorm` the two norms, `mla_up_proj` MLA's up
    projections and rotary parts, `mlp` the dense MLP, `moe` the whole MoE layer, `moe_act` the routed
    experts' activation, `shared_experts` the shared experts."""
    tp, h = par.tp, spec.hidden_size
    tokens = par.mbs * par.seq / par.cp
    sp = tokens / tp if par.sequence_parallel and tp > 1 else tokens
    out = {"core_attn": kernels["core"], "layernorm": (MemoryPass(NORM_BYTES * sp * h, kernels=2),),
           "mlp": kernels["mlp"]}
    if spec.is_mla:
        ranks, mla = {spec.q_lora_rank, spec.kv_lora_rank} - {0}, _mla(spec, tokens, tp)
        out["mla_up_proj"] = (*(k for k in mla if isinstance(k, Gemm) and k.k in ranks), mla[-1])  # and RoPE
    if spec.is_moe:
        per_expert = spec.experts_per_token * tokens / tp * par.etp * par.ep / spec.num_experts
        act = _mlp(spec, per_expert, spec.moe_intermediate_size / par.etp, spec.num_experts / par.ep, grouped=True)[1]
        out |= {"moe": kernels["experts"], "moe_act": (act,),
                "shared_experts": (_mlp(spec, tokens, spec.num_shared_experts * spec.moe_intermediate_size / tp)
                                   if spec.num_shared_experts else ())}
    if par.precision == "fp8":
        out = {name: ops if name in ("core_attn", "mlp", "moe") else fp8_casts(ops) for name, ops in out.items()}
    return out
