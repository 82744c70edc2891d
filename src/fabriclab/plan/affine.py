"""The all-reduce cost of a plan option: the flow simulator on the option's topology, at two sizes.

On one topology, algorithm and placement the simulated all-reduce time is affine in the message size
(latencies plus bytes over the max-min shared rates plus the reductions): the simulator runs twice,
at `SIZES_BYTES`, and `AffineCost(size) = intercept + slope * size` answers every bucket of every
model. A test keeps it equal to a direct simulation at other sizes.

**Simulation-equivalent topologies share one run.** The simulator sees a topology only through the
routes of the messages' (source, destination) endpoint pairs and the bandwidth and latency of each
link on them. `route_signature` writes those down with links renamed in order of first use; two
topologies with equal signatures are the same network for this collective (one is the other with
links renamed), so the simulation of one is the simulation of the other. A ring on consecutive ranks,
for instance, crosses each leaf's up-links with one flow whatever the bisection: the bisections of a
fabric and GPU count then share one pair of runs, while an algorithm or a placement that loads the
up-links (butterfly, random placement) gets its own.

Try it: `fabriclab plan --model resnet50 --gpus 256 --fabrics 100gbe --bisection 1,1/4 --algo ring,butterfly`.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field

import numpy as np

from fabriclab.collectives import vectorized
from fabriclab.sim.collective import ring_runs, simulate
from fabriclab.sim.prepared import prepared_collective

MIB = 1 << 20
# Two sizes that bracket the buckets of the built-in profiles' fusion policies (0.2 MiB .. 392 MiB);
# the affine fit is exact to ~1e-6 relative for ring and butterfly at these scales (tests/whatif).
SIZES_BYTES = (4 * MIB, 256 * MIB)
ITEMSIZE = 4  # float32 gradients


@dataclass(frozen=True, kw_only=True)
class AffineCost:
    """Seconds to all-reduce `size_bytes`: intercept + slope * size (0 for nothing or one rank)."""

    intercept_s: float
    """Time of an empty message: latencies along the critical path."""
    slope_s_per_byte: float
    """Seconds per byte of the all-reduced message (wire and reductions)."""
    num_ranks: int
    """Ranks taking part."""
    simulated: tuple = ()
    """(size_bytes, seconds) the fit comes from."""
    exact: bool = True
    """Whether the simulator vouched for every run (see `sim.levels`)."""

    def __call__(self, size_bytes: float) -> float:
        if self.num_ranks < 2 or size_bytes <= 0:
            return 0.0
        return max(0.0, self.intercept_s + self.slope_s_per_byte * size_bytes)


def message_pairs(algo: str, num_ranks: int, count: int) -> np.ndarray:
    """Distinct (source rank, destination rank) pairs of `algo`'s all-reduce messages, sorted."""
    runs = ring_runs("allreduce", algo, num_ranks, count, ITEMSIZE)  # a ring's rounds all alike: its first
    arrays = vectorized.rounds("allreduce", algo, num_ranks, count) if runs is None else \
        [(lv.src, lv.dst) for lv in runs]
    if arrays is None:
        tx = prepared_collective("allreduce", algo, num_ranks, count).transfers  # shared with its simulation
        codes = tx.src * num_ranks + tx.dst
    else:
        parts, prev = [], None
        for src, dst, *_ in arrays:
            if prev is None or not (np.array_equal(src, prev[0]) and np.array_equal(dst, prev[1])):
                parts.append(src * num_ranks + dst)
            prev = (src, dst)
        codes = np.concatenate(parts) if parts else np.zeros(0, dtype=np.int64)
    codes = np.unique(codes)
    return np.stack([codes // num_ranks, codes % num_ranks], axis=1)


def route_signature(topology, src_ep: np.ndarray, dst_ep: np.ndarray) -> bytes:
    """Digest of the routes of endpoint pairs: hop counts, links renamed by first use, their bandwidth
    and latency. Equal digests: the simulator cannot tell the two topologies apart on these pairs."""
    offsets, links = topology.routes(src_ep, dst_ep)
    links = np.asarray(links, dtype=np.int64)
    uniq, first, inverse = np.unique(links, return_index=True, return_inverse=True)
    rank = np.empty(uniq.size, dtype=np.int64)
    rank[np.argsort(first, kind="stable")] = np.arange(uniq.size)
    digest = hashlib.blake2b(digest_size=20)
    for part in (np.asarray(offsets, dtype=np.int64), rank[inverse], topology.bandwidth_Bps[links],
                 topology.latency_s[links]):
        digest.update(np.ascontiguousarray(part).tobytes())
    return digest.digest()


@dataclass(kw_only=True)
class CollectiveCosts:
    """Affine all-reduce costs per (topology, algorithm, ranks, placement), simulated once per
    simulation-equivalent topology (module doc)."""

    gamma_s_per_byte: float = 0.0
    """Reduction cost per reduced byte, passed to the simulator."""
    sizes_bytes: tuple = SIZES_BYTES
    """The two sizes simulated."""
    num_simulations: int = 0
    """Simulator runs so far."""
    num_lookups: int = 0
    """Costs asked for so far."""
    _pairs: dict = field(default_factory=dict, repr=False)
    _costs: dict = field(default_factory=dict, repr=False)
    _levels_inexact: set = field(default_factory=set, repr=False)
    """(algorithm, ranks) the level engine could not vouch for once: the simulator's own engine directly
    (a double binary tree at 16,384 ranks: one schedule build and one run saved per size)."""

    def cost(self, topology, algo: str, num_ranks: int, placement: np.ndarray) -> AffineCost:
        """The affine cost of `algo` on `num_ranks` ranks placed on `placement`'s endpoints."""
        self.num_lookups += 1
        if num_ranks < 2:
            return AffineCost(intercept_s=0.0, slope_s_per_byte=0.0, num_ranks=num_ranks)
        pkey = (algo, num_ranks)
        if pkey not in self._pairs:
            self._pairs[pkey] = message_pairs(algo, num_ranks, max(self.sizes_bytes) // ITEMSIZE)
        pairs = self._pairs[pkey]
        key = (algo, num_ranks, route_signature(topology, placement[pairs[:, 0]], placement[pairs[:, 1]]))
        if key not in self._costs:
            self._costs[key] = self._simulate(topology, algo, num_ranks, placement)
        return self._costs[key]

    def _simulate(self, topology, algo: str, num_ranks: int, placement: np.ndarray) -> AffineCost:
        points, exact = [], True
        for size in self.sizes_bytes:
            # The level engine first (fast on lock-step schedules); where it cannot vouch for its
            # answer, the simulator's own choice of engine (at once when it could not before).
            run = None
            if (algo, num_ranks) not in self._levels_inexact:
                run = simulate("allreduce", algo, topology, num_ranks, size, placement=placement,
                               itemsize=ITEMSIZE, gamma_s_per_byte=self.gamma_s_per_byte, engine="levels")
                self.num_simulations += 1
                if not run.exact:
                    self._levels_inexact.add((algo, num_ranks))
            if run is None or not run.exact:
                run = simulate("allreduce", algo, topology, num_ranks, size, placement=placement,
                               itemsize=ITEMSIZE, gamma_s_per_byte=self.gamma_s_per_byte)
                self.num_simulations += 1
            exact &= bool(run.exact)
            points.append((size, run.time_s))
        (s0, t0), (s1, t1) = points
        slope = (t1 - t0) / (s1 - s0)
        return AffineCost(intercept_s=t0 - slope * s0, slope_s_per_byte=slope, num_ranks=num_ranks,
                          simulated=tuple(points), exact=exact)
