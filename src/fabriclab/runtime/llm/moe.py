"""A mixture-of-experts layer with top-k routing and expert parallelism (all-to-all dispatch and combine).

Per token the router's softmax picks the top-k experts; their weights are the softmax of the chosen
logits (Mixtral's). Each token copy goes to the EP rank holding its expert (experts are split in
contiguous runs over the EP group), runs through that expert's MLP and comes back; no capacity limit, so
no token is dropped and a run with EP gives the same loss as one without. First the counts per expert are
exchanged (a small all-to-all), then the tokens, both timed as `ep`. Under TP the layer works on this
rank's slice of the sequence (`comm.split_seq`), so every TP rank routes different tokens and no TP
traffic is needed inside it.

Try it: `fabriclab train --model moe-tiny --np 4 --ep 4 --steps 2`.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from fabriclab.runtime.llm.comm import Comm, all_gather_seq, all_to_all, split_seq
from fabriclab.runtime.llm.layers import Builder, rms_norm


class Moe(nn.Module):
    def __init__(self, spec, prefix: str, b: Builder, sp: bool, ep: Comm) -> None:
        super().__init__()
        if spec.num_experts % ep.size:
            raise ValueError(f"{spec.num_experts} experts do not split over --ep {ep.size}: use an EP that "
                             f"divides them")
        h, f = spec.hidden_size, spec.moe_intermediate_size
        self.tp, self.sp, self.ep, self.gated = b.tp, sp, ep, spec.gated_mlp
        self.num_experts, self.top_k = spec.num_experts, spec.experts_per_token
        self.local = spec.num_experts // ep.size
        partial = b.tp.size > 1
        self.norm = b.param(f"{prefix}.ln2", (h,), ones=True, tp_partial=sp and partial)
        self.router = b.param(f"{prefix}.router", (spec.num_experts, h), tp_partial=partial)
        first = ep.index * self.local
        names = ("up", "gate", "down") if self.gated else ("up", "down")
        self.weights = nn.ParameterDict()
        for name in names:
            shape = (h, f) if name == "down" else (f, h)
            stacked = torch.stack([b.param(f"{prefix}.experts.{e}.{name}", shape).data
                                   for e in range(first, first + self.local)])
            p = nn.Parameter(stacked)
            p.tp_partial, p.expert = partial, True
            self.weights[name] = p
        self.shared = None
        if spec.num_shared_experts:
            width = spec.num_shared_experts * f
            self.shared = nn.ParameterDict({
                name: b.param(f"{prefix}.shared.{name}", (h, width) if name == "down" else (width, h),
                              tp_partial=partial) for name in names})

    def _mlp(self, x, w, i=None):
        pick = (lambda t: t) if i is None else (lambda t: t[i])
        u = F.linear(x, pick(w["up"]))
        u = F.silu(F.linear(x, pick(w["gate"]))) * u if self.gated else F.gelu(u)
        return F.linear(u, pick(w["down"]))

    def forward(self, x):
        a = rms_norm(x, self.norm)
        if not self.sp:
            a = split_seq(a, self.tp)
        shape = a.shape
        tokens = a.reshape(-1, shape[-1])
        logits = F.linear(tokens, self.router)
        top, idx = logits.topk(self.top_k, dim=-1)
        gates = top.softmax(dim=-1)
        out = self._experts(tokens, idx.flatten(), gates.flatten())
        if self.shared is not None:
            out = out + self._mlp(tokens, self.shared)
        out = out.view(shape)
        return out if self.sp else all_gather_seq(out, self.tp)

    def _experts(self, tokens, experts, gates):
        k = self.top_k
        order = torch.argsort(experts, stable=True)
        rows = tokens[order // k]
        per_expert = torch.bincount(experts, minlength=self.num_experts)
        if self.ep.size > 1:
            counts = self.ep.all_to_all(per_expert, [self.local] * self.ep.size, [self.local] * self.ep.size)
            send = per_expert.view(self.ep.size, self.local).sum(dim=1).tolist()
            recv_by = counts.view(self.ep.size, self.local)  # [source rank, local expert]
            recv = recv_by.sum(dim=1).tolist()
            rows = all_to_all(rows, self.ep, send, recv)
            # received rows are by source, then expert: regroup them by expert
            src = torch.repeat_interleave(torch.arange(self.ep.size * self.local, device=rows.device), recv_by.flatten())
            local_expert = src % self.local
            regroup = torch.argsort(local_expert, stable=True)
            done = self._run_local(rows[regroup], torch.bincount(local_expert, minlength=self.local))
            done = all_to_all(done[torch.argsort(regroup)], self.ep, recv, send)
        else:
            done = self._run_local(rows, per_expert)
        weighted = done * gates[order][:, None]
        out = torch.zeros_like(tokens)
        return out.index_add(0, order // k, weighted)

    def _run_local(self, rows, counts):
        parts = []
        start = 0
        for i, n in enumerate(counts.tolist()):
            if n:
                parts.append(self._mlp(rows[start:start + n], self.weights, i))
            start += n
        return torch.cat(parts) if parts else rows[:0] * 0
