"""The process groups of one rank, built from `ParallelConfig.groups` so that the trainer and the simulator
place ranks identically.

Communicators: `tp`, `pp`, `dp` (dense gradients), `ep` (experts' all-to-all) and `edp` (experts'
gradients: the ranks holding the same experts, tp x dp x cp / ep of them, on Megatron-Core's experts' grid).
Every rank creates every group in the same order (torch.distributed's rule) and keeps the ones it belongs to.

Try it: `fabriclab train --model moe-tiny --np 4 --ep 2 --steps 2`.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch.distributed as dist

from fabriclab.workload.parallel import ParallelConfig

COMMUNICATORS = ("tp", "pp", "dp", "ep", "edp")


def expert_dp_groups(par: ParallelConfig) -> list[list[int]]:
    """Ranks that hold the same experts: same pipeline stage and position inside their EP group, on the
    experts' grid folded over the stage as Megatron-Core places it (`ParallelConfig.groups("edp")`, expert TP
    1: an expert's gradient is partial on every rank that holds it, as each routes its own tokens)."""
    return par.groups("edp")


def all_groups(par: ParallelConfig) -> dict[str, list[list[int]]]:
    groups = {name: par.groups(name) for name in ("tp", "pp", "dp", "ep")}
    groups["edp"] = expert_dp_groups(par)
    return groups


@dataclass
class RankGroups:
    """This rank's place in every communicator."""

    rank: int
    members: dict[str, list[int]]
    """Communicator -> the ranks of this rank's group, in ring order."""
    handles: dict[str, object]
    """Communicator -> the torch.distributed group (None when the group is this rank alone)."""

    def size(self, name: str) -> int:
        return len(self.members[name])

    def index(self, name: str) -> int:
        return self.members[name].index(self.rank)

    def group(self, name: str):
        return self.handles[name]


def build_groups(par: ParallelConfig, rank: int, timeout=None) -> RankGroups:
    """Create every group on every rank (collectively) and keep this rank's."""
    members, handles = {}, {}
    for name, groups in all_groups(par).items():
        for ranks in groups:
            handle = dist.new_group(ranks, timeout=timeout) if len(ranks) > 1 else None
            if rank in ranks:
                members[name], handles[name] = ranks, handle
    return RankGroups(rank=rank, members=members, handles=handles)


def single_rank_groups() -> RankGroups:
    """The groups of a run without torch.distributed (one rank)."""
    return RankGroups(rank=0, members={n: [0] for n in COMMUNICATORS}, handles={n: None for n in COMMUNICATORS})
