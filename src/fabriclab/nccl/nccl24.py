"""All-reduce on servers of several GPUs that share a NIC, as NCCL 2.4 runs it: ring or tree by size.

Zhang et al.'s closed form (NetAI'20) gives every worker its own link (`2S(N-1)/N / bw`). Real GPU servers put G GPUs
behind one NIC and join them inside by NVLink or PCIe; NCCL (2.4, the version of Zhang et al. and of
Samsi et al.'s era) then runs one of two algorithms:

* **ring** through all N = M*G GPUs, entering and leaving each server once: every NIC carries
  `2(N-1)/N * S` per direction, every GPU's internal link the same, and the ring pays `2(N-1)` steps of
  NCCL's per-step latency (its own tuning constant `ringlatinter` = 6 us, NCCL 2.4 `init.cc`).
* **tree**: a chain inside each server and NCCL's double binary tree across servers, each tree carrying
  half of the data, reduce up and broadcast down pipelined. A NIC sends S/2 up and S/2 to each child
  per tree: with M = 2 servers each server is the other's only child, so a NIC carries **S**, not
  about 2S as the ring does; for M > 2 an inner node of one tree carries 2S. Latency: NCCL's
  `treelatinter` 15 us per tree level (log2 M) and `treelatintra` 4 us per GPU of the chain, both ways.
* **nccl-2.4** picks between them as NCCL 2.4's `ncclTreeThreshold` does: trees below a size computed
  from those latencies and its bandwidth guesses (ring 5 GB/s per channel; tree 2/3 of it on PCIe,
  3/4 on NVLink, doubled for 2 servers on NVLink), rings above; one server: rings only.

The reduction is fused into NCCL's copy kernels, so it costs `reduce_s_per_byte` per reduced byte
(0 by default: a V100 adds far faster than any NIC sends), not a kernel per step as Zhang et al.'s
`(N-1) AddEst(S/N)`.

Try it: `python -c "from fabriclab.nccl.nccl24 import ServerAllReduce as A; print(A(num_servers=2, gpus_per_server=8, nic_Bps=1.25e9, intra_Bps=130e9, nvlink=True)(100e6))"`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

ALGORITHMS = ("ring", "tree", "nccl-2.4")

# NCCL 2.4.8 src/init.cc, ncclTreeThreshold: its latency (us) and bandwidth (MB/s = B/us) guesses.
NCCL24_RING_STEP_S = 6e-6
NCCL24_TREE_INTER_S = 15e-6
NCCL24_TREE_INTRA_S = 4e-6
_NCCL24_RING_BW = 5000.0


@dataclass(frozen=True, kw_only=True)
class ServerAllReduce:
    """Seconds to all-reduce `size_bytes` over M servers of G GPUs (callable: `cost(size_bytes)`)."""

    num_servers: int
    """Servers M; each has one NIC shared by its GPUs."""
    gpus_per_server: int
    """GPUs G per server (ranks)."""
    nic_Bps: float
    """Payload rate of one server's NIC per direction (link rate x protocol efficiency)."""
    intra_Bps: float
    """Rate of one GPU's link inside the server (NVLink or PCIe), per direction."""
    nvlink: bool = False
    """Whether GPUs of a server talk over NVLink (changes NCCL 2.4's tree threshold)."""
    algorithm: str = "nccl-2.4"
    """ring, tree, or nccl-2.4 (NCCL 2.4's size threshold between them)."""
    num_channels: int = 2
    """NCCL channels (rings) that NCCL 2.4's tree threshold counts on NVLink systems."""
    ring_step_s: float = NCCL24_RING_STEP_S
    """Latency of one ring step."""
    tree_inter_s: float = NCCL24_TREE_INTER_S
    """Latency of one tree level between servers."""
    tree_intra_s: float = NCCL24_TREE_INTRA_S
    """Latency of one chain hop inside a server."""
    reduce_s_per_byte: float = 0.0
    """Cost of the fused reduction per reduced byte."""

    def __post_init__(self) -> None:
        if self.num_servers < 1 or self.gpus_per_server < 1:
            raise ValueError(f"{self.num_servers} servers of {self.gpus_per_server} GPUs: give both >= 1")
        if not (self.nic_Bps > 0 and self.intra_Bps > 0):
            raise ValueError("NIC and intra-server bandwidths must be > 0")
        if self.algorithm not in ALGORITHMS:
            raise ValueError(f"unknown algorithm {self.algorithm!r}: use one of {', '.join(ALGORITHMS)}")

    @property
    def num_ranks(self) -> int:
        return self.num_servers * self.gpus_per_server

    def tree_threshold_bytes(self) -> float:
        """NCCL 2.4's size below which it uses trees (0: never, inf: always)."""
        m, n = self.num_servers, self.num_ranks
        if m < 2:
            return 0.0
        ring_bw = _NCCL24_RING_BW * (self.num_channels if self.nvlink else 1)
        tree_bw = ring_bw * (3 / 4 if self.nvlink else 2 / 3)
        if self.nvlink and m == 2:
            tree_bw *= 2
        # NCCL decides with its own constants, whatever latencies this model charges.
        ring_lat = NCCL24_RING_STEP_S * 1e6 * (n - 1)
        tree_lat = NCCL24_TREE_INTER_S * 1e6 * int(math.log2(m)) + NCCL24_TREE_INTRA_S * 1e6 * (n // m - 1)
        if ring_lat <= tree_lat:
            return 0.0
        if tree_bw > ring_bw:
            return math.inf
        return ring_bw * tree_bw / (ring_bw - tree_bw) * (ring_lat - tree_lat)

    def algorithm_for(self, size_bytes: float) -> str:
        """ring or tree: what runs at this size."""
        if self.algorithm != "nccl-2.4":
            return self.algorithm if self.num_servers > 1 else "ring"
        return "tree" if size_bytes < self.tree_threshold_bytes() else "ring"

    def nic_bytes(self, size_bytes: float, algorithm: str) -> float:
        """Bytes one server's NIC sends (and receives) for one all-reduce."""
        m, n = self.num_servers, self.num_ranks
        if m < 2:
            return 0.0
        if algorithm == "ring":
            return 2 * (n - 1) / n * size_bytes
        return size_bytes if m == 2 else 2 * size_bytes

    def __call__(self, size_bytes: float) -> float:
        n, g, m = self.num_ranks, self.gpus_per_server, self.num_servers
        if n < 2 or size_bytes <= 0:
            return 0.0
        algo = self.algorithm_for(size_bytes)
        wire = self.nic_bytes(size_bytes, algo) / self.nic_Bps
        if algo == "ring":
            intra = 2 * (n - 1) / n * size_bytes / self.intra_Bps if g > 1 else 0.0
            latency = 2 * (n - 1) * self.ring_step_s
        else:
            intra = size_bytes / self.intra_Bps if g > 1 else 0.0
            latency = 2 * (self.tree_inter_s * math.ceil(math.log2(m)) + self.tree_intra_s * (g - 1))
        return max(wire, intra) + latency + (n - 1) / n * size_bytes * self.reduce_s_per_byte
