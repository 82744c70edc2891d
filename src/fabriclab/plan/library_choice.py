"""The plan's default all-reduce: what the library itself runs at each bucket size (NCCL's choice).

A real cluster does not run one algorithm at every size and scale: NCCL estimates every (algorithm,
protocol) with its tuning model and runs the cheapest (`nccl/choice.py`). At 16,384 GPUs a ring's
2 x 16,383 steps cost milliseconds of latency per call and NCCL runs its double binary tree; a plan
that costs every bucket with a ring reports a scaling no real cluster has (0.351 against 0.999 for
ResNet-50 on 400G NDR). So `--algo nccl` (the default) asks the cluster's library model which
algorithm NCCL runs at each bucket size, and costs that bucket with the flow simulator's run of that
algorithm on the option's topology (`plan/affine.py`: NCCL's ring is `ring`, its tree is
`double-binary-tree` between one GPU per NIC with a chain through the GPUs behind each NIC,
`node_tree_cost`, as NCCL builds its trees between nodes and chains inside them), each algorithm
simulated only when NCCL picks it for some bucket.

The library model of a grid option is `grid_cluster`: the option's servers (GPUs, NICs per server,
PCIe or NVLink inside) and fabric with the tuning constants of `presets.CURRENT_NCCL`, the NCCL
PyTorch ships today, restricted to ring and tree (the algorithms the simulator has: NVLS needs an
NVSwitch H100-class server, CollNet SHARP switches; neither is in a grid option). The protocol
NCCL picks (LL, LL128, Simple) is recorded, the simulator moves data as Simple does.

Try it: `fabriclab plan --gpus 4096,16384 --gpus-per-server 8 --fabrics 400g-ndr --bisection 1`.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field, replace
from typing import Callable

from fabriclab.fabric.cluster import ClusterModel, prior_cluster
from fabriclab.fabric.links import link_preset
from fabriclab.nccl.choice import nccl_choices

NCCL = "nccl"
"""The `--algo` name of the library's own choice."""
SIMULATED_ALGO = {"ring": "ring", "tree": "double-binary-tree"}
"""NCCL's algorithm -> the simulator's algorithm spec (`fabriclab collectives list`)."""


def node_tree_cost(leaders_cost, gpus_per_nic: int, intra_Bps: float):
    """NCCL's tree on servers whose NICs serve several GPUs: a chain through the GPUs behind each NIC
    (reduce up, broadcast down, pipelined) and the double binary tree between one GPU per NIC
    (`leaders_cost`, simulated on the option's topology). Pipelined, the chain adds its per-byte time
    only where it is slower than the tree's: intercept of the tree + max(both slopes) x size."""
    from fabriclab.plan.affine import AffineCost

    if gpus_per_nic <= 1:
        return leaders_cost
    chain = 1.0 / intra_Bps
    return AffineCost(intercept_s=leaders_cost.intercept_s,
                      slope_s_per_byte=max(leaders_cost.slope_s_per_byte, chain),
                      num_ranks=leaders_cost.num_ranks * gpus_per_nic, simulated=leaders_cost.simulated,
                      exact=leaders_cost.exact)


def grid_cluster(*, gpus_per_server: int, nics_per_server: int, fabric: str, pcie: str,
                 nvlink: str | None) -> ClusterModel:
    """The library model of a grid option's servers and fabric (module doc)."""
    from fabriclab.fabric.presets import CURRENT_NCCL

    intra = "pcie" if nvlink is None else "nvswitch"
    cluster = prior_cluster(gpus_per_server=gpus_per_server, intra=intra,
                            intra_link=link_preset(nvlink or pcie), nic=link_preset(fabric),
                            nics_per_server=nics_per_server, pcie=link_preset(pcie), fabric="fat-tree",
                            name="plan-option", nccl_version=CURRENT_NCCL)
    return replace(cluster, library=replace(cluster.library, algorithms=tuple(SIMULATED_ALGO)))


@dataclass(kw_only=True)
class ChoiceCost:
    """Seconds to all-reduce a bucket as the library runs it: NCCL's algorithm at that size, costed by
    `simulate(algorithm spec)` (an affine cost, made once per algorithm that is picked)."""

    cluster: ClusterModel
    """The library model that picks."""
    num_ranks: int
    """Ranks taking part."""
    simulate: Callable
    """Simulator algorithm spec -> its `AffineCost` on the option's topology."""
    picks: Counter = field(default_factory=Counter)
    """(algorithm, protocol) -> buckets costed with it."""
    parts: dict = field(default_factory=dict)
    """Simulator algorithm spec -> its `AffineCost`, those picked so far."""
    _memo: dict = field(default_factory=dict, repr=False)

    intercept_s = None
    slope_s_per_byte = None

    @property
    def exact(self) -> bool:
        """Whether the simulator vouched for every run used."""
        return all(p.exact for p in self.parts.values())

    def pick(self, size_bytes: float) -> tuple[str, str]:
        """NCCL's (algorithm, protocol) at `size_bytes`."""
        key = float(size_bytes)
        if key not in self._memo:
            self._memo[key] = nccl_choices(self.cluster, self.num_ranks, [key])[0]
        return self._memo[key]

    def __call__(self, size_bytes: float) -> float:
        if self.num_ranks < 2 or size_bytes <= 0:
            return 0.0
        algo, proto = self.pick(size_bytes)
        self.picks[(algo, proto)] += 1
        spec = SIMULATED_ALGO[algo]
        if spec not in self.parts:
            self.parts[spec] = self.simulate(spec)
        return self.parts[spec](size_bytes)

    def describe(self) -> str:
        """`tree/LL128 x 12, ring/Simple x 3`: what the library ran, by buckets."""
        if not self.picks:
            return "-"
        return ", ".join(f"{a}/{p} x {n}" for (a, p), n in self.picks.most_common())

    def reset(self) -> None:
        """Forget the counts (a new model replays on the same cost)."""
        self.picks = Counter()
