"""Placement: which endpoint (GPU slot on a host) each rank of a schedule runs on.

* `linear`: rank r on endpoint r, so consecutive ranks fill a host's GPUs, then the next host (what
  `mpirun --map-by slot` and torchrun's node-major ranks do).
* `round-robin`: rank r on host r mod num_hosts (slot r // num_hosts): neighbours in rank order sit on
  different hosts (`mpirun --map-by node`).
* `random`: a seeded random choice of distinct endpoints, as a scheduler that ignores topology would give.

Try it: `python -c "from fabriclab.fabric import place, star; print(place(4, star(hosts=2, gpus_per_server=2), 'round-robin'))"`.
"""

from __future__ import annotations

import numpy as np

from fabriclab.fabric.topology import Topology

PLACEMENTS = ("linear", "round-robin", "random")


def place(num_ranks: int, topology: Topology, policy: str = "linear", seed: int = 0) -> np.ndarray:
    """int64 array: endpoint of each rank 0..num_ranks-1 (distinct endpoints)."""
    if not isinstance(num_ranks, (int, np.integer)) or num_ranks < 1:
        raise ValueError(f"num_ranks={num_ranks!r}: a schedule needs at least one rank")
    num_endpoints = topology.num_endpoints
    if num_ranks > num_endpoints:
        hosts = -(-num_ranks // topology.gpus_per_server)
        raise ValueError(f"schedule of {num_ranks} ranks does not fit {num_endpoints} endpoints: "
                         f"use --hosts >= {hosts} or fewer ranks")
    ranks = np.arange(num_ranks, dtype=np.int64)
    if policy == "linear":
        return ranks
    if policy == "round-robin":
        return (ranks % topology.num_hosts) * topology.gpus_per_server + ranks // topology.num_hosts
    if policy == "random":
        return np.random.default_rng(seed).permutation(num_endpoints)[:num_ranks].astype(np.int64)
    raise ValueError(f"unknown placement {policy!r}: use one of {', '.join(PLACEMENTS)}")
