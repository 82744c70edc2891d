"""The library part of a cluster with nothing left open: step latencies from the NCCL version it runs.

A cluster file written by `calibrate` holds every latency it fitted; a preset or a prior leaves
`library.latencies` empty (None), which means "NCCL's own constants of `library.nccl_version`": baseLat as
the base, hwLat of the servers' internal link (NVLink or PCI) per intra-server step and hwLat NET per
network step (`src/graph/tuning.cc` of that release, `nccl/versions.py`). Everything that costs a
collective asks here, so a preset of NCCL 2.23 and a file calibrated on NCCL 2.9 logs each get their own.

Try it: `python -c "from fabriclab.fabric.presets import cluster_preset as c;
from fabriclab.nccl.library import step_latencies; print(step_latencies(c('dgx-h100'))['tree'])"`.
"""

from __future__ import annotations

from dataclasses import replace
from functools import lru_cache

from fabriclab.fabric.cluster import PROTOCOLS, ClusterModel, StepLatency

# The cost model's algorithms: NCCL's ring and tree (the other algorithms are costed on their own terms).
_ALGORITHMS = ("ring", "tree")
# Tree/Simple's baseLat is 0 in NCCL's table; latencies are fitted in log space and must be > 0.
_FLOOR_US = 0.5


@lru_cache(maxsize=64)
def _from_version(version: str, intra: str) -> dict[str, dict[str, StepLatency]]:
    from fabriclab.nccl.versions import table_of

    table = table_of(version)
    hw = "nvlink" if intra == "nvswitch" else "pci"
    us = 1e-6
    return {a: {p: StepLatency(base_s=max(table.base_lat_us[a][i], _FLOOR_US) * us,
                               intra_step_s=table.hw_lat_us[hw][a][i] * us,
                               net_step_s=table.hw_lat_us["net"][a][i] * us)
                for i, p in enumerate(PROTOCOLS)} for a in _ALGORITHMS}


def step_latencies(cluster: ClusterModel) -> dict[str, dict[str, StepLatency]]:
    """Algorithm -> protocol -> latency: the cluster's own, else its NCCL version's constants."""
    lib = cluster.library
    if lib.latencies is not None:
        return lib.latencies
    return _from_version(lib.nccl_version, cluster.server.intra)


def resolved(cluster: ClusterModel) -> ClusterModel:
    """The cluster with its latencies written out (what a fit starts from)."""
    if cluster.library.latencies is not None:
        return cluster
    return replace(cluster, library=replace(cluster.library, latencies=step_latencies(cluster)))
