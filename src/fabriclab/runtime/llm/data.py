"""Synthetic token batches with something to learn, the same for every parallel layout.

Step t's global batch is drawn whole from a generator seeded by (seed, t): each sequence starts at a
random token and continues by a fixed affine rule (next = 5 x + 3 mod V) three times in four, a random
token otherwise, so the loss falls from ln V towards the rule's entropy. Data-parallel rank d takes the
d-th contiguous slice of gbs / dp sequences, micro-batch m the m-th mbs of them; inputs are tokens
[0, seq), targets [1, seq].

Try it: `python -c "from fabriclab.runtime.llm.data import global_batch; print(global_batch(0, 0, 2, 8, 512))"`.
"""

from __future__ import annotations

import torch

FOLLOW = 0.75


def global_batch(seed: int, step: int, gbs: int, seq: int, vocab: int) -> torch.Tensor:
    """[gbs, seq + 1] tokens of step `step`."""
    gen = torch.Generator().manual_seed(seed * 7919 + step + 1)
    noise = torch.randint(vocab, (gbs, seq + 1), generator=gen)
    follow = torch.rand((gbs, seq + 1), generator=gen) < FOLLOW
    out = noise.clone()
    for t in range(1, seq + 1):
        out[:, t] = torch.where(follow[:, t], (out[:, t - 1] * 5 + 3) % vocab, noise[:, t])
    return out


class MicroBatches:
    """One data-parallel rank's micro-batches of one step."""

    def __init__(self, tokens: torch.Tensor, *, dp_index: int, dp: int, mbs: int, device) -> None:
        per_rank = tokens.shape[0] // dp
        self.tokens = tokens[dp_index * per_rank:(dp_index + 1) * per_rank].to(device)
        self.mbs = mbs

    def inputs(self, mb: int) -> torch.Tensor:
        return self.tokens[mb * self.mbs:(mb + 1) * self.mbs, :-1]

    def targets(self, mb: int) -> torch.Tensor:
        return self.tokens[mb * self.mbs:(mb + 1) * self.mbs, 1:]
