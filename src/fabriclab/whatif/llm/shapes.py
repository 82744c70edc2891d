"""The kernels of one rank's layer, by shape: what the step program's compute ops run (`whatif/llm/program.py`),
for the kernel model to time (`fabric/kernels.py`).

`core` is the attention core alone (what selective recompute runs again). Per micro-batch a rank holds T = mbs x seq / cp tokens; with sequence parallelism the norms, residual adds
and dropouts run on T / tp of them, the matrices on all T (gathered over TP). Megatron-LM's layer, forward:

* attention block: norm; QKV projection (T, (heads + 2 kv heads) x head_dim / tp, h); flash attention of
  heads / tp heads, seq / cp queries against seq keys (causal); output projection (T, h, heads x head_dim /
  tp); bias-dropout-add.
* MLP: norm; up (gated: gate and up together, 2 ffn / tp wide); the activation (SwiGLU reads 2 ffn, writes
  ffn; GELU reads and writes ffn); down (T, h, ffn / tp); bias-dropout-add.
* MoE: norm; router (T, experts, h); shared experts as an MLP; each of the experts / ep local experts runs
  top-k x T x ep / experts tokens (balanced routing) through its MLP (its ffn split over TP); the tokens'
  permutation and its inverse (a read and a write of top-k x T x h each way).
* output layer: the final norm, the logits (T, vocab / tp, h), in bf16 whatever the step's precision
  (Transformer Engine leaves it out of FP8, and the router), and the loss's softmax over fp32 logits
  (three passes).
* FP8: each FP8 GEMM's input cast and transposed, and its output gradient in backward (`fp8_casts`).

Memory-bound bytes (bf16, 2 B an element): a norm reads and writes its input (4 B per element); a
bias-dropout-add reads the input and the residual, writes the sum and a 1-byte mask (7 B). Backward: each
GEMM becomes its data gradient (T, k, n) and its weight gradient (k, n, T); attention its backward
kernel; memory-bound passes twice the bytes.

Try it: `python -c "from fabriclab.whatif.llm.shapes import layer_kernels; from fabriclab.workload.transformer
import load_model; from fabriclab.workload.parallel import ParallelConfig as P;
print(layer_kernels(load_model('llama3-8b'), P(num_gpus=8, tp=2, gbs=8, seq=4096))['mlp'])"`.
"""

from __future__ import annotations

from fabriclab.fabric.kernels import Attention, Gemm, MemoryPass
from fabriclab.workload.parallel import ParallelConfig
from fabriclab.workload.transformer import TransformerSpec

NORM_BYTES = 4  # per element: read and write in bf16
RESIDUAL_BYTES = 7  # per element: input and residual read, sum written (bf16), dropout mask written (1 B)
UNFUSED_SCORE_BYTES = 9  # per score: softmax read and write (4 B), dropout read, write and mask (5 B)
LOSS_BYTES = 12  # per logit: fp32 softmax, three passes (max, exp-sum, normalise) of 4 B


def layer_kernels(spec: TransformerSpec, par: ParallelConfig, tp_overlap: bool = False) -> dict[str, tuple]:
    """Forward kernels of one rank for one micro-batch, per compute op of the program: `attention`, `mlp`,
    `experts`, `output`, `embedding` (module doc). `tp_overlap`: the GEMMs beside TP's collectives run in
    tp chunks (Transformer Engine's ring exchange)."""
    tp, h = par.tp, spec.hidden_size
    tokens = par.mbs * par.seq / par.cp
    sp = tokens / tp if par.sequence_parallel and tp > 1 else tokens
    d = spec.head_dim
    norm = MemoryPass(NORM_BYTES * sp * h)
    residual = MemoryPass(RESIDUAL_BYTES * sp * h)
    core = (Attention(par.mbs, spec.num_heads / tp, par.seq / par.cp, par.seq, d),) if par.flash_attention else \
        _unfused(par.mbs * spec.num_heads / tp, par.seq / par.cp, par.seq, d)
    attention = (norm, Gemm(tokens, (spec.num_heads + 2 * spec.num_kv_heads) * d / tp, h), *core,
                 Gemm(tokens, h, spec.num_heads * d / tp), residual)
    out = {"attention": attention, "core": core,
           "mlp": (norm, *_mlp(spec, tokens, spec.intermediate_size / tp), residual),
           "embedding": (MemoryPass(2 * 2 * sp * h),),
           "output": (norm, Gemm(tokens, spec.vocab_size / tp, h, bf16=True),
                      MemoryPass(LOSS_BYTES * tokens * spec.vocab_size / tp, kernels=3))}
    if spec.is_moe:
        experts_here = spec.num_experts / par.ep
        per_expert = spec.experts_per_token * tokens * par.ep / spec.num_experts
        routed = _mlp(spec, per_expert, spec.moe_intermediate_size / tp, count=experts_here)
        shared = (_mlp(spec, tokens, spec.num_shared_experts * spec.moe_intermediate_size / tp)
                  if spec.num_shared_experts else ())
        permute = MemoryPass(2 * 2 * 2 * spec.experts_per_token * tokens * h, kernels=2)
        router = Gemm(tokens / tp, spec.num_experts, h, bf16=True)  # on its share of the tokens, as counted
        out["experts"] = (norm, router, *shared, permute, *routed, residual)
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
    return tuple(Gemm(k.m, k.n, k.k, k.count, k.bf16, chunks=tp) if i in ends else k for i, k in enumerate(kernels))


def _unfused(heads: float, seq_q: float, seq_k: float, d: float) -> tuple:
    """Attention without a fused kernel (Megatron-LM before FlashAttention): the scores as a batched GEMM
    over every key (the causal mask saves nothing), a fused scale-mask-softmax (2 B read, 2 B written per
    score), the dropout of the probabilities (2 B read, 2 B and a 1-byte mask written), the values' GEMM."""
    scores = heads * seq_q * seq_k
    return (Gemm(seq_q, seq_k, d, count=heads, bf16=True), MemoryPass(UNFUSED_SCORE_BYTES * scores, kernels=2),
            Gemm(seq_q, d, seq_k, count=heads, bf16=True))


def _mlp(spec: TransformerSpec, tokens: float, ffn: float, count: float = 1) -> tuple:
    h = spec.hidden_size
    if spec.gated_mlp:
        return (Gemm(tokens, 2 * ffn, h, count), MemoryPass(6 * tokens * ffn * count, kernels=1),
                Gemm(tokens, h, ffn, count))
    return (Gemm(tokens, ffn, h, count), MemoryPass(4 * tokens * ffn * count), Gemm(tokens, h, ffn, count))


def backward_kernels(kernels: tuple) -> tuple:
    """The backward of forward kernels (module doc)."""
    out: list = []
    for k in reversed(kernels):
        if isinstance(k, Gemm):  # the data gradient keeps TP overlap's chunks, the weight gradient runs whole
            out += [Gemm(k.m, k.k, k.n, k.count, k.bf16, k.chunks), Gemm(k.k, k.n, k.m, k.count, k.bf16)]
        elif isinstance(k, Attention):
            out.append(Attention(k.batch, k.heads, k.seq_q, k.seq_k, k.head_dim, k.causal, backward=True))
        else:
            back = 2 * k.bytes if k.backward_bytes is None else k.backward_bytes
            out.append(MemoryPass(back, 2 * k.kernels if k.backward_bytes is None else k.kernels))
    return tuple(out)


def fp8_casts(kernels: tuple) -> tuple:
    """FP8 (Transformer Engine): before each FP8 GEMM its input is cast to FP8 and transposed for the weight
    gradient (`cast_transpose`: 2 B read, 1 B + 1 B written per element), and in backward the output's
    gradient the same way; the weights' casts are kept across a step's micro-batches (TE's
    `is_first_microbatch`) and left out."""
    out: list = []
    for k in kernels:
        if isinstance(k, Gemm) and not k.bf16:
            out.append(MemoryPass(4 * k.m * k.k * k.count, 1, backward_bytes=4 * k.m * k.n * k.count))
        out.append(k)
    return tuple(out)
