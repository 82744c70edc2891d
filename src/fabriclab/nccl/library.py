"""The library part of a cluster with nothing left open: step latencies from the NCCL version it runs.

A cluster file written by `calibrate` holds every latency it fitted; a preset or a prior leaves
`library.latencies` empty (None), which means "NCCL's own constants of `library.nccl_version`": baseLat as
the base, hwLat of the servers' internal link (NVLink or PCI) per intra-server step and hwLat NET per
network step (`src/graph/tuning.cc` of that release, `nccl/versions.py`). Everything that costs a
collective asks here, so a preset of NCCL 2.23 and a file calibrated on NCCL 2.9 logs each get their own.

The same holds for LL's cost (`protocol_spec`). A calibrated file costs LL with what its logs fitted: the
share of the link (`link_factor`) and the extra cost per byte of a step's chunk (`per_byte_s`; the A100
logs of `examples/nccl-tests-a100` put 0.26 ns/B there, LL 6-10x slower than NCCL's own model says). A
preset or a prior, with nothing fitted, costs LL as NCCL's tuning model of its release does, so that its
cost agrees with the sizes where that model picks LL (issue 47: a 1 MiB all-reduce on 2 H100s cost 124 us
with LL, the 2 MiB one 22 us with Simple): an LL line carries 8 data bytes in 16 (NCCL
`union ncclLLFifoLine`), so LL moves half of what a link carries, and it moves at most the busBw NCCL
gives it (`choice.nccl_busbw_GBps`: 1/4 of the graph's bandwidth up to 2.20, 1/2 from 2.21, at most
llMaxBws, 141 GB/s on one Hopper server, 39 / 20.4 across 2 / 4+ servers, v2.21.5-1 src/graph/tuning.cc),
and the GPU writes a step across the network at its one-server LL rate (`ll_write_s_per_byte`).

Try it: `python -c "from fabriclab.fabric.presets import cluster_preset as c;
from fabriclab.nccl.library import step_latencies; print(step_latencies(c('dgx-h100'))['tree'])"`.
"""

from __future__ import annotations

from dataclasses import replace
from functools import lru_cache

from fabriclab.fabric.cluster import PROTOCOLS, ClusterModel, ProtocolSpec, StepLatency

# The cost model's algorithms: NCCL's ring and tree (the other algorithms are costed on their own terms).
_ALGORITHMS = ("ring", "tree")
# An LL line (NCCL `union ncclLLFifoLine`, src/include/device.h): 8 data bytes and 8 flag bytes in 16.
LL_WIRE_SHARE = 0.5
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


def nccl_own(cluster: ClusterModel) -> bool:
    """True where nothing was fitted (a preset or a prior: `library.latencies` None): the library's costs are
    NCCL's own constants of its release; False for a calibrated file, whose costs are what it fitted."""
    return cluster.library.latencies is None


def protocol_spec(cluster: ClusterModel, algorithm: str, protocol: str, num_gpus: int, num_servers: int,
                  collective: str) -> ProtocolSpec:
    """What a ring or tree with `protocol` costs per byte (module doc): the cluster's own spec, except LL where
    nothing was fitted, which moves `LL_WIRE_SHARE` of a link, at most NCCL's busBw for it, with no extra
    cost per byte beyond that ceiling."""
    spec = cluster.library.protocols[protocol]
    if protocol != "LL" or algorithm not in ("ring", "tree") or not nccl_own(cluster):
        return spec
    from fabriclab.nccl.choice import nccl_busbw_GBps

    bus = nccl_busbw_GBps(cluster, num_gpus, num_servers, collective, algorithm, "LL")
    return ProtocolSpec(link_factor=LL_WIRE_SHARE, busbw_cap_Bps=bus * 1e9, per_byte_s=0.0)


def ll_write_s_per_byte(cluster: ClusterModel) -> float:
    """Seconds one channel takes to write a byte with LL, which a network hop waits for before it sends the
    step (`nccl/pipeline.py`): the fitted `per_byte_s`, or where nothing was fitted the channel's share of
    the busBw NCCL gives a ring with LL on one server (llMaxBws of the GPU generation)."""
    lib = cluster.library
    if not nccl_own(cluster):
        return lib.protocols["LL"].per_byte_s
    from fabriclab.nccl.choice import nccl_busbw_GBps

    per_server = max(2, cluster.server.gpus_per_server)
    return lib.num_channels / (nccl_busbw_GBps(cluster, per_server, 1, "allreduce", "ring", "LL") * 1e9)
