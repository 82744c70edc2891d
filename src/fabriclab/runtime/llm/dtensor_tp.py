"""The same dense decoder as a plain `nn.Module` of `nn.Linear` layers, tensor-parallel by PyTorch's DTensor
(`parallelize_module` with ColwiseParallel / RowwiseParallel, `loss_parallel` for the vocabulary-split
loss): the peer our TP is measured against (`fabriclab bench train-llm`). Weights are drawn from the same
named generators (`layers.full_weight`), so both start from one model and their losses agree.

Try it: `fabriclab bench train-llm --model gpt-tiny --steps 5`.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from fabriclab.runtime.llm.layers import full_weight


def _linear(seed, name, out_f, in_f, dtype) -> nn.Linear:
    layer = nn.Linear(in_f, out_f, bias=False, dtype=dtype)
    layer.weight.data.copy_(full_weight(seed, name, (out_f, in_f), dtype))
    return layer


class PlainBlock(nn.Module):
    def __init__(self, spec, i: int, seed: int, dtype) -> None:
        super().__init__()
        h, hd, kv, f = spec.hidden_size, spec.head_dim, spec.num_kv_heads, spec.intermediate_size
        p = f"layers.{i}"
        self.hd, self.group = hd, spec.num_heads // kv
        self.ln1 = nn.Parameter(torch.ones(h, dtype=dtype))
        self.ln2 = nn.Parameter(torch.ones(h, dtype=dtype))
        q = spec.num_heads * hd  # h unless config.json's head_dim says otherwise (Qwen3: twice h)
        self.q, self.o = _linear(seed, f"{p}.q", q, h, dtype), _linear(seed, f"{p}.o", h, q, dtype)
        self.k, self.v = _linear(seed, f"{p}.k", kv * hd, h, dtype), _linear(seed, f"{p}.v", kv * hd, h, dtype)
        self.up, self.down = _linear(seed, f"{p}.up", f, h, dtype), _linear(seed, f"{p}.down", h, f, dtype)
        self.gate = _linear(seed, f"{p}.gate", f, h, dtype) if spec.gated_mlp else None

    def forward(self, x):
        b, s, _ = x.shape
        a = F.rms_norm(x, (x.shape[-1],), self.ln1, eps=1e-5)
        q = self.q(a).view(b, s, -1, self.hd).transpose(1, 2)  # this rank's heads under TP
        k = self.k(a).view(b, s, -1, self.hd).transpose(1, 2)
        v = self.v(a).view(b, s, -1, self.hd).transpose(1, 2)
        if self.group > 1:
            k, v = k.repeat_interleave(self.group, dim=1), v.repeat_interleave(self.group, dim=1)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True).transpose(1, 2).reshape(b, s, -1)
        x = x + self.o(y)
        a = F.rms_norm(x, (x.shape[-1],), self.ln2, eps=1e-5)
        u = self.up(a)
        u = F.silu(self.gate(a)) * u if self.gate is not None else F.gelu(u)
        return x + self.down(u)


class PlainGpt(nn.Module):
    def __init__(self, spec, seq: int, seed: int, dtype) -> None:
        super().__init__()
        if spec.is_moe:
            raise ValueError(f"{spec.name} is an MoE model: the DTensor peer covers dense models only")
        h = spec.hidden_size
        self.tokens = nn.Embedding(spec.vocab_size, h, dtype=dtype)
        self.tokens.weight.data.copy_(full_weight(seed, "embed.tokens", (spec.vocab_size, h), dtype))
        self.positions = nn.Parameter(full_weight(seed, "embed.positions", (seq, h), dtype))
        self.blocks = nn.ModuleList(PlainBlock(spec, i, seed, dtype) for i in range(spec.num_layers))
        self.ln = nn.Parameter(torch.ones(h, dtype=dtype))
        self.out = _linear(seed, "head.out", spec.vocab_size, h, dtype)

    def forward(self, ids):
        x = self.tokens(ids) + self.positions[: ids.shape[1]]
        for block in self.blocks:
            x = block(x)
        return self.out(F.rms_norm(x, (x.shape[-1],), self.ln, eps=1e-5))


def parallelize(model: PlainGpt, mesh) -> PlainGpt:
    """Megatron's split in DTensor's words: Q, K, V, up, gate column-wise, O and down row-wise, the output
    layer column-wise with its logits left split over the vocabulary (for `loss_parallel`)."""
    from torch.distributed.tensor import Shard
    from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module

    plan = {"out": ColwiseParallel(output_layouts=Shard(-1), use_local_output=False)}
    for i, block in enumerate(model.blocks):
        for name in ("q", "k", "v", "up") + (("gate",) if block.gate is not None else ()):
            plan[f"blocks.{i}.{name}"] = ColwiseParallel()
        plan[f"blocks.{i}.o"] = RowwiseParallel()
        plan[f"blocks.{i}.down"] = RowwiseParallel()
    return parallelize_module(model, mesh, plan)


def train_step(model, opt, data, num_microbatches: int, parallel: bool) -> float:
    """One step: forward and backward of every micro-batch (the loss's backward inside `loss_parallel`, as it
    requires), then the optimizer; returns the mean loss."""
    from contextlib import nullcontext

    from torch.distributed.tensor.parallel import loss_parallel

    opt.zero_grad(set_to_none=False)
    total = 0.0
    with loss_parallel() if parallel else nullcontext():
        for mb in range(num_microbatches):
            logits = model(data.inputs(mb))
            loss = F.cross_entropy(logits.flatten(0, 1), data.targets(mb).flatten()) / num_microbatches
            loss.backward()
            total += loss.full_tensor().item() if hasattr(loss, "full_tensor") else loss.item()
    opt.step()
    return total
