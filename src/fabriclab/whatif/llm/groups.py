"""Which ranks form each group of a job's communicators: attention's TP, CP, DP and PP, the experts' EP,
ETP and ETP x EP (`etpep`, the all-gather dispatcher's), the gradient groups `dpcp` (dense parameters) and
`edp` (expert parameters), HSDP's `shard` and `replica`, and DeepEP's two steps of an ETP x EP group:
`ep_inter` (its ranks at one position in their NVLink domains: the RDMA step between domains) and `ep_intra`
(its ranks in one domain: the NVLink step), which need the domain's size.

The step's costs (`whatif/llm/comm.py`: each communicator costed on the shape of one of its groups), the
link loads (`whatif/llm/links.py`) and the exports read them here. `RankGroups` keeps what it computed in
a dict keyed by the parallel shape (TP, CP, DP, PP, EP and their order; the batch, sequence or ZeRO stage
place no rank), so configurations of one shape share one computation: the plan hands one dict to the
`CommModel` of every shape it simulates (`plan/llm/evaluator.py`).

Try it: `python -c "from fabriclab.whatif.llm.groups import communicator_groups; from fabriclab.workload.parallel
import ParallelConfig as P; print(communicator_groups(P(num_gpus=16, tp=2, pp=2, gbs=16, seq=1024), 'dpcp'))"`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from fabriclab.workload.parallel import COMMUNICATORS, ParallelConfig

GROUPS = (*COMMUNICATORS, "dpcp", "shard", "replica", "ep_inter", "ep_intra")


@dataclass(frozen=True, kw_only=True)
class RankGroups:
    """The rank groups of one parallel configuration, each computed once and kept in `memo`."""

    par: ParallelConfig
    """The job's parallel configuration: its shape places the ranks."""
    memo: dict = field(default_factory=dict, compare=False, repr=False)
    """(what, parallel shape) -> coordinates or groups; one dict may serve configurations of many shapes."""

    def _key(self, *what) -> tuple:
        p = self.par
        return (*what, p.tp, p.cp, p.dp, p.pp, p.ep, p.etp, p.order)

    def coordinates(self) -> dict[str, np.ndarray]:
        """`ParallelConfig.coordinates`, kept."""
        key = self._key("coordinates")
        if key not in self.memo:
            self.memo[key] = self.par.coordinates()
        return self.memo[key]

    def groups(self, communicator: str, shard_group: int = 0, gpus_per_server: int = 0) -> np.ndarray:
        """`communicator_groups(par, communicator, shard_group, gpus_per_server)`, kept."""
        if communicator not in GROUPS:
            raise ValueError(f"communicator {communicator!r}: one of {', '.join(GROUPS)}")
        if communicator in ("ep_inter", "ep_intra"):
            if gpus_per_server < 1:
                raise ValueError(f"communicator {communicator!r}: give the NVLink domain's GPUs (gpus_per_server)")
            key = self._key(communicator, gpus_per_server)
            if key not in self.memo:
                self.memo[key] = domain_split(self.groups("etpep"), gpus_per_server, communicator == "ep_inter")
            return self.memo[key]
        key = self._key(communicator, shard_group if communicator in ("shard", "replica") else 0)
        if key not in self.memo:
            self.memo[key] = self._groups(communicator, shard_group)
        return self.memo[key]

    def _groups(self, communicator: str, shard_group: int) -> np.ndarray:
        par = self.par
        if communicator in COMMUNICATORS:
            return np.asarray(par.groups(communicator), dtype=np.int64).reshape(-1, par.group_size(communicator))
        c = self.coordinates()
        plane = c["dp"] * par.cp + c["cp"]
        if communicator == "dpcp":
            keys, within, size = [c["tp"], c["pp"]], plane, par.dp * par.cp
        else:
            n = shard_group if 0 < shard_group < par.dp * par.cp else par.dp * par.cp
            if communicator == "shard":
                keys, within, size = [c["tp"], c["pp"], plane // n], plane % n, n
            else:
                keys, within, size = [c["tp"], c["pp"], plane % n], plane // n, par.dp * par.cp // n
        ranks = np.arange(par.num_gpus)
        return ranks[np.lexsort((ranks, within, *reversed(keys)))].reshape(-1, size)


def communicator_groups(par: ParallelConfig, communicator: str, shard_group: int = 0,
                        gpus_per_server: int = 0) -> np.ndarray:
    """(groups, size) global ranks of every group of `communicator`, each row in ring order: `tp`, `cp`,
    `ep`, `dp`, `pp`, `etp`, `etpep`, the gradient groups `dpcp` (dense parameters: dp x cp) and `edp` (expert
    parameters: the ranks of a stage holding the same expert shard, `ParallelConfig.groups`), HSDP's `shard`
    (runs of `shard_group` consecutive ranks of the dp x cp plane, innermost) and `replica` (the ranks of the
    plane holding the same shard), without HSDP (`shard_group` 0) `shard` is `dpcp` and `replica` one rank;
    and DeepEP's `ep_inter` and `ep_intra` on NVLink domains of `gpus_per_server` (`domain_split`)."""
    return RankGroups(par=par).groups(communicator, shard_group, gpus_per_server)


def domain_split(groups: np.ndarray, gpus_per_server: int, inter: bool) -> np.ndarray:
    """DeepEP's two steps of every group (rows of ranks): `inter`, the ranks at the same position among the
    group's ranks of their domain, one per domain (the RDMA step, rail to rail); else the group's ranks in one
    domain (the NVLink step). A group inside one domain has inter groups of one rank."""
    g = groups.shape[1]
    servers = groups // gpus_per_server
    per = int(np.unique(servers[0], return_counts=True)[1].max())
    if g % per:  # unevenly placed: the whole group as one step of each kind
        return groups if not inter else groups.reshape(-1, 1)
    order = np.argsort(servers * (int(groups.max()) + 1) + groups, axis=1, kind="stable")
    ranked = np.take_along_axis(groups, order, axis=1).reshape(groups.shape[0], g // per, per)
    if inter:  # (groups, domains, position) -> one row per (group, position) over the domains
        return ranked.transpose(0, 2, 1).reshape(-1, g // per)
    return ranked.reshape(-1, per)
