"""The model chunks one rank holds: pipeline stage s keeps model chunks s, s + pp, ..., s + (vp-1) pp (the
interleaved schedule's virtual stages; one chunk when vp = 1), each a run of layers split as the simulator
splits them (`whatif.llm.compute.layers_of_chunks`); the first chunk also holds the embedding, the last
the output layer and the loss.

Try it: `fabriclab train --model gpt-tiny --np 4 --pp 2 --vp 2 --gbs 8 --steps 2`.
"""

from __future__ import annotations

from torch import nn

from fabriclab.runtime.llm.comm import Comm
from fabriclab.runtime.llm.layers import Attention, Builder, Embedding, Head, Mlp
from fabriclab.runtime.llm.moe import Moe
from fabriclab.whatif.llm.compute import layers_of_chunks
from fabriclab.workload.job import check_job


class Block(nn.Module):
    """One decoder layer: attention, then the MLP (an MoE layer where the model has one)."""

    def __init__(self, spec, index: int, b: Builder, sp: bool, ep: Comm) -> None:
        super().__init__()
        prefix = f"layers.{index}"
        self.attention = Attention(spec, prefix, b, sp)
        self.mlp = Moe(spec, prefix, b, sp, ep) if spec.is_moe_layer(index) else Mlp(spec, prefix, b, sp)

    def forward(self, x):
        x = x + self.attention(x)
        return x + self.mlp(x)


class Chunk(nn.Module):
    """Layers [first, first + n) of the model, with the embedding and/or the head at the ends."""

    def __init__(self, spec, seq: int, first: int, num_layers: int, *, b: Builder, sp: bool, ep: Comm,
                 is_first: bool, is_last: bool) -> None:
        super().__init__()
        self.embedding = Embedding(spec, seq, b, sp) if is_first else None
        self.blocks = nn.ModuleList(Block(spec, i, b, sp, ep) for i in range(first, first + num_layers))
        self.head = Head(spec, b, sp) if is_last else None

    def forward(self, x, targets=None):
        if self.embedding is not None:
            x = self.embedding(x)
        for block in self.blocks:
            x = block(x)
        if self.head is not None:
            return self.head(x, targets)
        return x


def stage_chunks(spec, *, seq: int, pp: int, vp: int, stage: int, seed: int, dtype, tp: Comm, ep: Comm,
                 sp: bool, device="cpu") -> list[Chunk]:
    """The vp chunks of pipeline stage `stage`, this rank's TP and EP slices of them."""
    sizes = layers_of_chunks(spec.num_layers, pp * vp)
    starts = [sum(sizes[:i]) for i in range(len(sizes))]
    b = Builder(seed, dtype, tp, device)
    chunks = []
    for v in range(vp):
        i = v * pp + stage
        chunks.append(Chunk(spec, seq, starts[i], sizes[i], b=b, sp=sp, ep=ep, is_first=i == 0,
                            is_last=i == len(sizes) - 1))
    return chunks


# Parameters one rank may hold: every weight is drawn whole before the rank keeps its slice, in this
# process's memory (a small model is the point of a run on CPUs; a GPU cluster runs a framework).
MAX_PARAMS_PER_RANK = 2e9


def check_model(spec, par) -> None:
    """What this trainer cannot split (a ValueError says what to change): the job's own check first
    (`workload/job.check_job`, shared with the simulator and the plan), then this trainer's limits."""
    per_rank = spec.num_params() / (par.tp * par.pp)
    if per_rank > MAX_PARAMS_PER_RANK:
        raise ValueError(f"{spec.name}: {per_rank / 1e9:.1f}e9 parameters per rank; the trainer holds at most "
                         f"{MAX_PARAMS_PER_RANK / 1e9:g}e9: use more --tp / --pp or a smaller model (gpt-tiny)")
    check_job(spec, par)  # heads over TP, experts over EP, sequence parallelism: as every command checks
    if spec.vocab_size % par.tp:
        raise ValueError(f"{spec.name}: vocabulary {spec.vocab_size} must be a multiple of --tp {par.tp}")
    if spec.is_moe and par.tp > 1 and par.seq % par.tp:
        raise ValueError(f"--seq {par.seq}: an MoE layer under TP splits the sequence; use a multiple of --tp")
    if par.cp > 1:
        raise ValueError("context parallelism (--cp) is simulated only; the trainer runs --cp 1")
    if par.etp > 1:
        raise ValueError(f"--etp {par.etp}: the trainer keeps each expert whole on its rank (expert TP 1)")
    if par.precision != "bf16":
        raise ValueError(f"--precision {par.precision}: the trainer computes in the --dtype it is given")
    if par.recompute != "none":
        raise ValueError(f"--recompute {par.recompute}: the trainer keeps activations (--recompute none)")
    if par.seq > spec.seq_length * 64:
        raise ValueError(f"--seq {par.seq} is far beyond the model's {spec.seq_length} tokens")
