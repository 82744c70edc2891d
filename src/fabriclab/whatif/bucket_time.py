"""Cost models for one bucket's all-reduce, chosen by a flag.

* `ring-addest`: the closed form of Zhang et al., "Is Network the Bottleneck of Distributed Training?"
  (NetAI'20; its `AllReduceProc`): 2S(N-1)/N / bw for the wire plus (N-1) * AddEst(S/N) for the
  additions; compression divides the wire term. (`paper004` is an old spelling.)
* `closed-form`: the alpha-beta-gamma cost of any algorithm of `fabriclab.collectives`.
* `simulated`: the flow-level simulator running that algorithm's schedule on a topology of
  `fabriclab.fabric`; results are cached per bucket size.
* `cluster`: a calibrated cluster model (`fabriclab calibrate nccl-tests ... --out cluster.json`,
  `fabric/cluster.py`): the allreduce time `nccl/predict.py` predicts on `num_workers` of its GPUs, with
  NCCL's algorithm and protocol for the bucket's size (bandwidth, algo, latency and gamma do not apply:
  the cluster file holds the GPUs, NICs and library); cached per bucket size.

Compression divides the bytes on the wire; with `compress_add` it divides the reduction cost too.

Try it: `fabriclab whatif --profile resnet50 --cost closed-form --algo butterfly --latency 5us`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from fabriclab.workload.addcost import AddCost

COST_MODELS = ("ring-addest", "closed-form", "simulated", "cluster")
ALIASES = {"paper004": "ring-addest"}


@dataclass(kw_only=True)
class CostModel:
    """Seconds to all-reduce `size_bytes` among `num_workers`."""

    kind: str = "ring-addest"
    """ring-addest, closed-form, simulated or cluster."""
    bandwidth_Bps: float = 100e9 / 8
    """Link bandwidth (bytes/s)."""
    num_workers: int = 16
    """Workers taking part."""
    compression: float = 1.0
    """Wire bytes are divided by this."""
    compress_add: bool = False
    """Also divide the reduction cost by the compression ratio."""
    add_cost: AddCost = field(default_factory=AddCost.zero)
    """AddEst table (ring-addest; and the gamma term of the others when gamma_s_per_byte is None)."""
    algo: str = "ring"
    """Algorithm spec (closed-form, simulated)."""
    alpha_s: float = 0.0
    """Per-message latency (closed-form)."""
    gamma_s_per_byte: float | None = None
    """Reduction cost per byte (closed-form, simulated); None: from the AddEst table at S/N."""
    topology: object = None
    """A `fabric.Topology` (simulated)."""
    cluster: object = None
    """A `fabric.cluster.ClusterModel` (cluster)."""
    _cache: dict = field(default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        self.kind = ALIASES.get(self.kind, self.kind)
        if self.kind not in COST_MODELS:
            raise ValueError(f"unknown cost model {self.kind!r}: use one of {', '.join(COST_MODELS)}")
        if not (0 < self.bandwidth_Bps < math.inf and 0 < self.compression < math.inf) or self.num_workers < 1:
            raise ValueError(f"bandwidth {self.bandwidth_Bps:g} B/s, compression {self.compression:g} and "
                             f"{self.num_workers} workers: give a finite bandwidth and compression > 0 and "
                             f"workers >= 1")
        if not (0 <= self.alpha_s < math.inf) or (self.gamma_s_per_byte is not None
                                                  and not 0 <= self.gamma_s_per_byte < math.inf):
            raise ValueError(f"latency {self.alpha_s:g} s and gamma {self.gamma_s_per_byte} s/B: give finite "
                             f"values >= 0")
        if self.kind == "simulated" and self.topology is None:
            raise ValueError("the simulated cost model needs a topology")
        if self.kind == "cluster":
            if self.cluster is None:
                raise ValueError("the cluster cost model needs a cluster file: give --cluster FILE")
            from fabriclab.nccl.layout import layout

            layout(self.cluster, self.num_workers)  # workers that do not fill whole servers fail here

    def _gamma(self, size_bytes: float) -> float:
        if self.gamma_s_per_byte is not None:
            return self.gamma_s_per_byte
        chunk = size_bytes / self.num_workers
        return float(self.add_cost.est(chunk)) / chunk if chunk > 0 else 0.0

    def __call__(self, size_bytes: float) -> float:
        n = self.num_workers
        if n < 2 or size_bytes <= 0:
            return 0.0
        add_div = self.compression if self.compress_add else 1.0
        if self.kind == "ring-addest":
            wire = 2 * size_bytes * (n - 1) / n / self.bandwidth_Bps / self.compression
            return wire + (n - 1) * float(self.add_cost.est(size_bytes / n)) / add_div
        wire_bytes = size_bytes / self.compression
        if self.kind == "cluster":
            return self._cluster_s(wire_bytes)
        gamma = self._gamma(size_bytes) * self.compression / add_div  # per wire byte
        if self.kind == "closed-form":
            from fabriclab.collectives.costs import cost as closed_form_cost  # not needed by ring-addest

            return closed_form_cost("allreduce", self.algo, n, wire_bytes, self.alpha_s,
                                    1.0 / self.bandwidth_Bps, gamma)
        key = max(round(wire_bytes / 4) * 4, 4)  # whole float32 elements
        if key not in self._cache:
            from fabriclab.sim.collective import simulate

            self._cache[key] = simulate("allreduce", self.algo, self.topology, n, key, itemsize=4,
                                        gamma_s_per_byte=gamma).time_s
        return self._cache[key]

    def _cluster_s(self, wire_bytes: float) -> float:
        """NCCL's allreduce of `wire_bytes` on the cluster, as `fabriclab simulate collective --cluster`
        predicts it (out of place, as nccl-tests' first time column)."""
        key = max(int(round(wire_bytes)), 1)
        if key not in self._cache:
            from fabriclab.nccl.predict import collective_times

            times, _ = collective_times(self.cluster, self.num_workers, [key], "allreduce")
            self._cache[key] = float(times[0])
        return self._cache[key]
