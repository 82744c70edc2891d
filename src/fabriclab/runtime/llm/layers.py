"""The decoder's layers, split as Megatron-LM splits them over tensor-parallel ranks.

Every weight is drawn whole from a generator seeded by (seed, its name), then each rank keeps its slice:
a T-rank run starts from exactly the 1-rank run's model. Column-parallel weights (Q, K, V, MLP up and
gate, the output layer's vocabulary) keep rows, row-parallel ones (attention's output, MLP down) keep
columns; attention heads are split with them. With sequence parallelism the norms and residuals work on
this rank's slice of the sequence and the column-parallel input is gathered (`comm.gather_seq`).

An MoE layer works on a rank's tokens only (its slice of the sequence under TP, Megatron-Core's expert
tensor parallelism of 1): a replicated router picks the top-k experts per token, the tokens go to the
rank of their expert in the EP group (`comm.all_to_all`), come back and are summed with the router's
weights. Parameters that see only this rank's tokens (router, experts, and the norms under sequence
parallelism) are marked `tp_partial`: their gradients are summed over TP before the data-parallel
reduction; experts are marked `expert` (reduced over the expert-data-parallel group).

Try it: `fabriclab train --model moe-tiny --np 2 --ep 2 --steps 2`.
"""

from __future__ import annotations

import zlib

import torch
import torch.nn.functional as F
from torch import nn

from fabriclab.runtime.llm.comm import Comm, copy_to, gather_seq, reduce_from, reduce_scatter_seq, split_seq

INIT_STD = 0.02


def full_weight(seed: int, name: str, shape: tuple[int, ...], dtype, ones: bool = False) -> torch.Tensor:
    if ones:
        return torch.ones(shape, dtype=dtype)
    gen = torch.Generator().manual_seed(seed * 1_000_003 + zlib.crc32(name.encode()))
    return (torch.randn(shape, generator=gen, dtype=torch.float64) * INIT_STD).to(dtype)


class Builder:
    """Makes this rank's parameters: the slice of each whole weight it holds."""

    def __init__(self, seed: int, dtype, tp: Comm, device="cpu") -> None:
        self.seed, self.dtype, self.tp, self.device = seed, dtype, tp, device

    def param(self, name: str, shape, *, split: int | None = None, ones: bool = False, **marks) -> nn.Parameter:
        w = full_weight(self.seed, name, tuple(shape), self.dtype, ones)
        if split is not None and self.tp.size > 1:
            w = w.chunk(self.tp.size, dim=split)[self.tp.index].clone()
        p = nn.Parameter(w.to(self.device))
        p.tp_partial, p.expert = marks.get("tp_partial", False), marks.get("expert", False)
        return p


def rms_norm(x, weight):
    return F.rms_norm(x, (x.shape[-1],), weight, eps=1e-5)


class Attention(nn.Module):
    def __init__(self, spec, prefix: str, b: Builder, sp: bool) -> None:
        super().__init__()
        h, hd, kv = spec.hidden_size, spec.head_dim, spec.num_kv_heads
        self.tp, self.sp, self.hd = b.tp, sp, hd
        self.heads, self.kv_heads = spec.num_heads // b.tp.size, kv // b.tp.size
        self.norm = b.param(f"{prefix}.ln1", (h,), ones=True, tp_partial=sp and b.tp.size > 1)
        q = spec.num_heads * hd  # h unless config.json's head_dim says otherwise (Qwen3: twice h)
        self.q = b.param(f"{prefix}.q", (q, h), split=0)
        self.k = b.param(f"{prefix}.k", (kv * hd, h), split=0)
        self.v = b.param(f"{prefix}.v", (kv * hd, h), split=0)
        self.o = b.param(f"{prefix}.o", (h, q), split=1)

    def forward(self, x):
        a = rms_norm(x, self.norm)
        a = gather_seq(a, self.tp) if self.sp else copy_to(a, self.tp)
        bsz, s, _ = a.shape
        q = F.linear(a, self.q).view(bsz, s, self.heads, self.hd).transpose(1, 2)
        k = F.linear(a, self.k).view(bsz, s, self.kv_heads, self.hd).transpose(1, 2)
        v = F.linear(a, self.v).view(bsz, s, self.kv_heads, self.hd).transpose(1, 2)
        if self.kv_heads != self.heads:
            k = k.repeat_interleave(self.heads // self.kv_heads, dim=1)
            v = v.repeat_interleave(self.heads // self.kv_heads, dim=1)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        y = F.linear(y.transpose(1, 2).reshape(bsz, s, -1), self.o)
        return reduce_scatter_seq(y, self.tp) if self.sp else reduce_from(y, self.tp)


class Mlp(nn.Module):
    def __init__(self, spec, prefix: str, b: Builder, sp: bool) -> None:
        super().__init__()
        h, f = spec.hidden_size, spec.intermediate_size
        self.tp, self.sp, self.gated = b.tp, sp, spec.gated_mlp
        self.norm = b.param(f"{prefix}.ln2", (h,), ones=True, tp_partial=sp and b.tp.size > 1)
        self.up = b.param(f"{prefix}.up", (f, h), split=0)
        self.gate = b.param(f"{prefix}.gate", (f, h), split=0) if self.gated else None
        self.down = b.param(f"{prefix}.down", (h, f), split=1)

    def forward(self, x):
        a = rms_norm(x, self.norm)
        a = gather_seq(a, self.tp) if self.sp else copy_to(a, self.tp)
        u = F.linear(a, self.up)
        u = F.silu(F.linear(a, self.gate)) * u if self.gated else F.gelu(u)
        y = F.linear(u, self.down)
        return reduce_scatter_seq(y, self.tp) if self.sp else reduce_from(y, self.tp)


class Embedding(nn.Module):
    """Token and learned position embeddings, replicated over TP (a sequence-parallel run keeps its slice)."""

    def __init__(self, spec, seq: int, b: Builder, sp: bool) -> None:
        super().__init__()
        self.tp, self.sp = b.tp, sp
        self.tokens = b.param("embed.tokens", (spec.vocab_size, spec.hidden_size))
        self.positions = b.param("embed.positions", (seq, spec.hidden_size))

    def forward(self, ids):
        x = F.embedding(ids, self.tokens) + self.positions[: ids.shape[1]]
        return split_seq(x, self.tp) if self.sp else x


class Head(nn.Module):
    """Final norm, the vocabulary-parallel output layer and the cross-entropy loss (mean over tokens)."""

    def __init__(self, spec, b: Builder, sp: bool) -> None:
        super().__init__()
        if spec.vocab_size % b.tp.size:
            raise ValueError(f"vocabulary {spec.vocab_size} is not a multiple of --tp {b.tp.size}")
        self.tp, self.sp = b.tp, sp
        self.norm = b.param("head.ln", (spec.hidden_size,), ones=True, tp_partial=sp and b.tp.size > 1)
        self.out = b.param("head.out", (spec.vocab_size, spec.hidden_size), split=0)

    def forward(self, x, targets):
        a = rms_norm(x, self.norm)
        a = gather_seq(a, self.tp) if self.sp else copy_to(a, self.tp)
        logits = F.linear(a, self.out).flatten(0, 1)
        if self.tp.size == 1:
            return F.cross_entropy(logits, targets.flatten())
        return _VocabParallelCE.apply(logits, targets.flatten(), self.tp)


class _VocabParallelCE(torch.autograd.Function):
    """Cross-entropy over logits split by vocabulary (Megatron's): a max and two sums over TP, no gather."""

    @staticmethod
    def forward(ctx, logits, targets, comm: Comm):
        import torch.distributed as dist

        width = logits.shape[1]
        top = comm.all_reduce(logits.detach().max(dim=1).values.clone(), op=dist.ReduceOp.MAX)
        shifted = logits - top[:, None]
        exp = shifted.exp()
        local = targets - comm.index * width
        mine = (local >= 0) & (local < width)
        picked = shifted.gather(1, local.clamp(0, width - 1)[:, None])[:, 0] * mine
        sums = comm.all_reduce(torch.stack([exp.sum(dim=1), picked]))
        ctx.save_for_backward(exp / sums[0][:, None], local, mine)
        return (sums[0].log() - sums[1]).mean()

    @staticmethod
    def backward(ctx, g):
        probs, local, mine = ctx.saved_tensors
        grad = probs.clone()
        rows = torch.nonzero(mine)[:, 0]
        grad[rows, local[rows]] -= 1.0
        return grad * (g / probs.shape[0]), None, None
