"""fabriclab's cluster for the machine SimAI simulates (`inputs.py`): the one place the mapping is written.

Starts from the `dgx-h100` preset (its library: NCCL's choice and costs; its GPU) and sets what SimAI's
topology says: 8 H100 per server on NVSwitch at 3388 Gb/s per GPU (SimAI's `-nvbw`), one 400 Gb/s NIC per
GPU, leaves of 16 NICs and a leaf's up-links 16 / oversubscription (one to each spine at 400 Gb/s), i.e.
`NetworkSpec(fabric, leaf_ports=16, bisection=1/oversubscription)`. A routing (`ideal`, `ecmp`, `adaptive`)
is set as SimAI runs it (per-message ECMP, DCQCN) unless a routing is given.

Try it: `python -c "from fabriclab.bench.simai.cluster import simai_cluster; print(simai_cluster(32, 'fat-tree', 4).network)"`.
"""

from __future__ import annotations

from dataclasses import replace
from fractions import Fraction

from fabriclab.bench.simai.inputs import GPUS_PER_SERVER, NICS_PER_LEAF, check_shape
from fabriclab.fabric import cluster as cluster_module
from fabriclab.fabric.cluster import ClusterModel
from fabriclab.fabric.presets import cluster_preset

# What SimAI 1.6's MockNccl sends without PXN whatever AS_PXN_ENABLE says: its all-to-all has no PXN path,
# and its all-gather tests the variable with `PXN_ENV == "1"` (a pointer compare, never true;
# MockNcclGroup::genAllGatherFlowModels, where the all-reduce and reduce-scatter use strcmp).
NO_PXN = ("allgather", "alltoall")
NIC_BPS = 400e9 / 8  # SimAI's -bw 400Gbps, bytes/s per direction
NVLINK_BPS = 3388e9 / 8  # its -nvbw 3388Gbps (the dgx-h100 preset's 423.5 GB/s: NVLink 4's 450 GB/s x 16/17)


def simai_cluster(num_gpus: int, fabric: str, oversubscription: int, *, routing: str | None = None,
                  collective: str | None = None) -> ClusterModel:
    """The `dgx-h100` preset on SimAI's topology of `num_gpus` GPUs (module docstring); `routing`: the
    network's routing (None: as SimAI runs it, per-message ECMP with DCQCN; `ideal`: the flow model alone)."""
    check_shape(num_gpus, fabric, oversubscription)
    base = cluster_preset("dgx-h100")
    server = replace(base.server, gpus_per_server=GPUS_PER_SERVER, nics_per_server=GPUS_PER_SERVER,
                     nic_bandwidth_Bps=NIC_BPS, intra_bandwidth_Bps=NVLINK_BPS)
    network = {"fabric": fabric, "leaf_ports": NICS_PER_LEAF, "bisection": float(Fraction(1, oversubscription)),
               # as SimAI's ns-3 runs its network: MockNccl gives every chunk its own source port (so the
               # switches hash each message anew) and SimAI.conf runs DCQCN with PFC (`nccl/congestion.py`)
               "routing": "ecmp", "hash_per_message": True, "transport": "roce"}
    if routing is not None:
        if routing not in cluster_module.ROUTINGS:
            raise ValueError(f"routing {routing!r}: use one of {', '.join(cluster_module.ROUTINGS)}")
        network["routing"] = routing
    # SimAI's MockNccl runs every DP-group collective as a ring (MockNcclGroup::get_algo_proto_info, v1.6:
    # NVLS only for an H100 TP group of 8 or more): the ring here, in the protocol NCCL picks for it
    env = {**base.library.nccl_env, "NCCL_ALGO": "Ring"}
    if collective in NO_PXN:
        env["NCCL_PXN_DISABLE"] = "1"
    library = replace(base.library, nccl_env=env)
    return replace(base, name=f"simai-{fabric}-{oversubscription}to1", server=server, library=library,
                   network=replace(base.network, **network),
                   description=f"dgx-h100 on SimAI's {num_gpus}-GPU {fabric} topology: leaves of {NICS_PER_LEAF} "
                               f"x 400 Gb/s NICs, {NICS_PER_LEAF // oversubscription} spines "
                               f"({oversubscription}:1)")
