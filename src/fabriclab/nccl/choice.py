"""Which algorithm and protocol NCCL picks at each size: its own tuning model, as NCCL 2.9 writes it.

NCCL does not measure; it estimates the time of every (algorithm, protocol) with fixed constants and
the bandwidth its topology search found, and runs the cheapest (`ncclTopoTuneModel` and
`ncclTopoGetAlgoTime` in NCCL 2.9's `src/graph/tuning.cc`). This module re-implements that estimate so
a prediction runs what NCCL would run, at any scale; what the choice then *costs* on the cluster is
`nccl/predict.py`'s fitted model. The constants below are NCCL 2.9's (microseconds, GB/s):

* latency = baseLat + per-step hwLat (NVLink, PCI or NET) x steps; LL's intra-server steps x 1.8 across
  servers; a ring's Simple latency x 1.9 across servers above nRanks/16 x 64 KiB ("plateau effect");
* busBw = channels x speed (the intra-server speed up to 2 servers, the network's beyond), at most
  235 GB/s on compute capability 8.0; ring LL x 1/4; ring LL128 x 0.92 (0.7 with one GPU per server),
  at most 16.7 GB/s per channel; tree x 0.9, at most 110 GB/s (80 beyond 2 servers; LL128 on sm80:
  130 / 105); tree LL x 1/3.8; tree LL128 x 0.915 (7/9 on one server), at most 16.7 x 7/9 per channel;
* algbw = busBw x nRanks / steps (ring) or x 0.5 (tree); tree bandwidth x a correction per size.

LL128 is on only with NVLink inside the servers (NCCL enables it by default only there).

Try it: `python -c "from fabriclab.fabric.cluster import a100_hdr_prior as c;
from fabriclab.nccl.choice import nccl_choices as n; print(n(c(), 128, [1 << 20, 1 << 30]))"`.
"""

from __future__ import annotations

import math

import numpy as np

from fabriclab.fabric.cluster import ClusterModel

_BASE = {"tree": (4.4, 4.4, 0.0), "ring": (3.6, 10.0, 8.4)}
_HW = {"nvlink": {"tree": (.52, 1.2, 28.0), "ring": (.47, 1.9, 3.4)},
       "pci": {"tree": (1.0, 1.9, 28.0), "ring": (1.0, 2.5, 5.7)},
       "net": {"tree": (5.0, 8.5, 50.0), "ring": (2.7, 4.0, 9.6)}}
_LL128_PER_CHANNEL = {"broadcast": 18.8, "reduce": 12.0, "allgather": 18.3, "reduce_scatter": 15.2,
                      "allreduce": 16.7, "alltoall": 18.3}
# NCCL 2.9 treeCorrectionFactor: powers of two from 64 B to 128 MB, per protocol (LL, LL128, Simple).
_TREE_CORRECTION = {
    "LL": (1.0, 1.0, 1.0, 1.0, .9, .8, .7, .7, .7, .7, .6, .5, .4, .4, .5, .6, .7, .8, .9, 1.0, 1.0, 1.0),
    "LL128": (1.0, 1.0, 1.0, 1.0, 1.0, .9, .8, .8, .8, .7, .6, .6, .6, .5, .6, .6, .7, .7, .8, .9, .9, 1.0),
    "Simple": (.9, .9, .9, .9, .9, .9, .9, .8, .7, .6, .6, .5, .5, .5, .5, .5, .5, .6, .6, .7, .8, .9)}
_PROTOS = ("LL", "LL128", "Simple")


def nccl_estimates(cluster: ClusterModel, num_gpus: int, num_servers: int, sizes_bytes,
                   collective: str = "allreduce") -> dict[tuple[str, str], np.ndarray]:
    """(algorithm, protocol) -> NCCL 2.9's estimated time in microseconds at every size (enabled ones)."""
    server, lib = cluster.server, cluster.library
    n, nodes = num_gpus, num_servers
    size = np.asarray(sizes_bytes, dtype=np.float64)
    ppn = n / nodes
    nvlink = server.intra == "nvswitch"
    intra_speed = server.intra_bandwidth_Bps if nvlink else server.pcie_bandwidth_Bps
    net_speed = min(intra_speed, server.nics_per_server * server.nic_bandwidth_Bps)
    speed = (intra_speed if nodes <= 2 else net_speed) / 1e9
    cap = lib.selection_busbw_cap_Bps
    sm80 = cap is not None
    channels = lib.num_channels
    if collective == "allreduce":
        nsteps, ninter = 2 * (n - 1), 2 * (nodes - 1)
    elif collective in ("reduce_scatter", "allgather", "alltoall"):
        nsteps, ninter = n - 1, nodes - 1
    else:
        nsteps, ninter = n, nodes
    intra_hw = "nvlink" if nvlink else "pci"
    out = {}
    for algo in ("tree", "ring"):
        if algo not in lib.algorithms or (algo == "tree" and (collective != "allreduce" or nodes == 1)):
            continue
        for p, proto in enumerate(_PROTOS):
            if proto not in lib.protocols or (proto == "LL128" and not nvlink):
                continue
            bus = min(speed, cap / 1e9) if sm80 else speed
            if algo == "ring" and proto == "LL":
                bus *= 1 / 4 if (nodes > 1 or collective in ("allreduce", "reduce")) else 1 / 3
            if algo == "ring" and proto == "LL128":
                bus = min(bus * (0.7 if ppn < 2 else 0.92), _LL128_PER_CHANNEL[collective] * channels)
            if algo == "tree":
                max_tree = (105.0 if sm80 and proto == "LL128" else 80.0) if nodes > 2 else \
                    (130.0 if sm80 and proto == "LL128" else 110.0)
                bus = min(bus * 0.9, max_tree)
                if proto == "LL":
                    bus /= 3.8
                if proto == "LL128":
                    bus = min(bus * (7 / 9 if nodes == 1 else 0.915), _LL128_PER_CHANNEL[collective] * channels * 7 / 9)
            algbw = bus * (n / nsteps if algo == "ring" else 0.5)
            intra_lat = _HW[intra_hw][algo][p] * (1.8 if nodes > 1 and proto == "LL" else 1.0)
            inter_lat = _HW["net"][algo][p]
            lat = _BASE[algo][p]
            if algo == "ring" and collective in ("reduce", "broadcast"):
                step = _HW["net" if nodes > 1 else intra_hw]["tree" if proto == "Simple" else "ring"][p]
                lat += nsteps * step
            elif algo == "ring":
                lat += (nsteps - ninter) * intra_lat + ninter * inter_lat
            else:
                lat += 2 * ((n // nodes - 1) * intra_lat + int(math.log2(nodes)) * inter_lat)
            lat = np.full(size.shape, lat)
            bw = np.full(size.shape, algbw)
            if algo == "tree":
                log_size = np.array([max(int(s) >> 6, 1).bit_length() - 1 for s in size])
                table = np.array(_TREE_CORRECTION[proto])
                bw = np.where(log_size < 22, bw * table[np.minimum(log_size, 21)], bw)
            if algo == "ring" and proto == "Simple" and nodes > 1 and collective == "allreduce":
                lat = np.where(size >= n / 16 * 65536, lat * 1.9, lat)
            out[(algo, proto)] = lat + size / (1000 * bw)
    return out


def nccl_choices(cluster: ClusterModel, num_gpus: int, sizes_bytes, collective: str = "allreduce",
                 num_servers: int | None = None) -> list[tuple[str, str]]:
    """The (algorithm, protocol) NCCL 2.9 runs at every size: the lowest estimate, tree before ring on ties."""
    g = cluster.server.gpus_per_server
    nodes = num_servers if num_servers is not None else max(1, -(-num_gpus // g))
    est = nccl_estimates(cluster, num_gpus, nodes, sizes_bytes, collective)
    keys = list(est)
    best = np.stack([est[k] for k in keys]).argmin(axis=0)
    return [keys[i] for i in best]
