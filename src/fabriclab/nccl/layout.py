"""Where the ranks of a cluster run sit: servers used, ranks per server, and the step counts of NCCL's ring.

Ranks fill servers in order, a run over several servers uses whole servers (as nccl-tests under mpirun
places them). Every cluster prediction starts here.

A measured run may use part of each server (nccl-tests under `mpirun -N 2` on servers of 8 GPUs): NCCL
then sees servers of the GPUs it runs on, with the NICs nearest those GPUs (`on_servers`: a server of 8
GPUs and 8 NICs run 2 per server is a server of 2 GPUs and 2 NICs to it; NCCL picks each GPU's own NIC,
and PXN has no peer GPU to route through on a server where the run has no other rank).

Try it: `python -c "from fabriclab.fabric.presets import cluster_preset as c;
from fabriclab.nccl.layout import layout; print(layout(c('dgx-h100'), 64))"`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np

from fabriclab.fabric.cluster import ClusterModel


@dataclass(frozen=True)
class Layout:
    """Where the ranks of a run sit."""

    num_gpus: int
    """Ranks."""
    num_servers: int
    """Servers used."""
    per_server: int
    """Ranks per server."""


# The most GPUs of one building a prediction takes here (a cluster over buildings, `fabric/buildings.py`,
# simulates one building and counts the third tier, so it takes up to MAX_TOTAL_GPUS). The flow simulation
# (`nccl/links.py`, in classes) grows a little faster than the GPUs: measured on this 2-core machine (`fabriclab
# bench sim --scale`), an all-reduce size sweep of dgx-h100 (ranges included) takes 2.3 s at 16,384 GPUs, 10 s
# at 65,536 and 22 s and 440 MB at 100,000 (all-to-all: 2 s); 131,072 stays well within a minute and 4 GB.
MAX_CLUSTER_GPUS = 131072
MAX_TOTAL_GPUS = 1 << 20  # the job counts' bound (workload/parallel.py ParallelConfig)


def check_cluster_gpus(cluster: ClusterModel, num_gpus: int, option: str = "--gpus") -> Layout:
    """The layout of `num_gpus` GPUs, or a ValueError naming `option` when there are too many or they do not
    fill whole servers."""
    if isinstance(num_gpus, (int, np.integer)) and num_gpus > MAX_TOTAL_GPUS:
        raise ValueError(f"{option} {num_gpus}: a cluster prediction takes at most {MAX_TOTAL_GPUS:,} GPUs; give "
                         f"fewer")
    g = cluster.server.gpus_per_server
    spb = cluster.network.servers_per_building
    one = num_gpus if spb <= 0 else min(num_gpus, spb * g)
    if isinstance(num_gpus, (int, np.integer)) and one > MAX_CLUSTER_GPUS:
        raise ValueError(f"{option} {num_gpus}: a cluster prediction takes at most {MAX_CLUSTER_GPUS} GPUs in one "
                         f"building here (its flow simulation grows with the GPUs: about a minute and 4 GB there); "
                         f"give fewer, or spread the servers over buildings (network.servers_per_building in the "
                         f"cluster file, at most {MAX_CLUSTER_GPUS // g:,}; preset dgx-h100-campus)")
    return layout(cluster, num_gpus)


def layout(cluster: ClusterModel, num_gpus: int) -> Layout:
    """Ranks fill servers in order; a run over several servers uses whole servers."""
    g = cluster.server.gpus_per_server
    if not isinstance(num_gpus, (int, np.integer)) or num_gpus < 1:
        raise ValueError(f"--gpus {num_gpus!r}: give a whole number of GPUs >= 1")
    if num_gpus <= g:
        return Layout(int(num_gpus), 1, int(num_gpus))
    if num_gpus % g:
        raise ValueError(f"{num_gpus} GPUs do not fill whole servers of {g} GPUs: use a multiple of {g} "
                         f"(e.g. {num_gpus // g * g} or {(num_gpus // g + 1) * g})")
    return Layout(int(num_gpus), int(num_gpus // g), g)


def on_servers(cluster: ClusterModel, num_gpus: int, num_servers: int) -> ClusterModel:
    """The cluster as a run of `num_gpus` ranks spread evenly over `num_servers` servers sees it: where it uses
    fewer GPUs of each server than the server holds, servers of that many GPUs with the NICs nearest them
    (the server's NICs x used / GPUs, rounded up) and the channels NCCL builds over them (the library's
    channels in that share: two per NIC on a rail server stay two per NIC); else the cluster. A ValueError
    where the ranks do not split evenly or there are more per server than it holds."""
    g = cluster.server.gpus_per_server
    if num_servers <= 1 or num_gpus == num_servers * g or cluster.server.gpus_per_domain:
        return cluster  # (an NVLink domain's trays: `fabric/domains.py` lays the job out)
    per, rest = divmod(num_gpus, num_servers)
    if rest or per > g:
        raise ValueError(f"{num_gpus} ranks on {num_servers} servers of {g} GPUs: a run takes the same number of "
                         f"GPUs on every server, at most {g}")
    server = cluster.server
    nics = max(1, math.ceil(server.nics_per_server * per / g))
    lib = cluster.library
    channels = max(1, math.ceil(lib.num_channels * per / g))
    return replace(cluster, server=replace(server, gpus_per_server=per, nics_per_server=nics),
                   library=replace(lib, num_channels=channels))


def steps(collective: str, lay: Layout) -> tuple[int, int]:
    """(all steps, network steps) of a ring, as NCCL 2.9's model counts them."""
    n, s = lay.num_gpus, lay.num_servers
    if collective == "allreduce":
        return 2 * (n - 1), 2 * (s - 1)
    if collective in ("allgather", "reduce_scatter", "alltoall"):
        return n - 1, s - 1
    return n, s if s > 1 else 0
