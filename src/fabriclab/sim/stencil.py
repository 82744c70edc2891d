"""A CFD-like stencil (Samsi et al.'s CartDG): domain decomposition, and its halo exchange simulated at scale.

The domain is a 3-D periodic Cartesian grid of `cells` (x, y, z) split over a `procs` (px, py, pz)
process grid into identical blocks (CartDG partitions its mesh equally, Samsi et al.). Ranks are numbered
row-major with z fastest, as MPI_Cart_create does, so z-neighbours are adjacent ranks and, with linear
placement, x-neighbours are the farthest apart (across racks at scale). Every step each rank sends its
6 faces to its 6 neighbours (halo depth 1), then computes; a dimension with one process wraps onto the
rank itself (a local copy, no message).

`simulate_stencil` runs `steps` such steps as a task graph on the flow-level engine: the transfers of
step s leave a rank after its compute of step s-1, its compute of step s waits for the 6 faces it
receives. With `overlap_fraction` f > 0 (CartDG overlaps computation and communication, Samsi et al.) the
share f of a step's compute that needs no halo (a DG method's volume terms) runs while the faces
travel; only the rest waits for them: a step takes max(f x compute, exchange) + (1 - f) x compute.
`rack_fat_tree` builds Samsi et al.'s machine shape: racks of 32 nodes under one leaf each.

Try it: `fabriclab stencil simulate --ranks 64,256,1024,4096 --rack-size 32`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from fractions import Fraction
from itertools import product

import numpy as np

from fabriclab.fabric.fattree import fat_tree, star
from fabriclab.fabric.links import Link, plain_link
from fabriclab.fabric.topology import Topology
from fabriclab.sim.engine import TaskGraph, run

DIMS = 3


def _divisors(n: int) -> list[int]:
    return [d for d in range(1, n + 1) if n % d == 0]


def process_grid(num_ranks: int, cells: tuple[int, int, int]) -> tuple[int, int, int]:
    """The (px, py, pz) with px*py*pz = num_ranks that splits `cells` into identical blocks with the least
    halo surface per rank (ties: the most balanced grid, then larger counts first, as MPI_Dims_create)."""
    if num_ranks < 1:
        raise ValueError(f"number of ranks {num_ranks}: give at least 1")
    best = None
    for px in _divisors(num_ranks):
        for py in _divisors(num_ranks // px):
            pz = num_ranks // px // py
            procs = (px, py, pz)
            if any(c % p for c, p in zip(cells, procs)):
                continue
            block = [c // p for c, p in zip(cells, procs)]
            surface = sum(math.prod(block) // b for b, p in zip(block, procs) if p > 1)
            key = (surface, max(procs) - min(procs), tuple(-p for p in procs))
            if best is None or key < best[0]:
                best = (key, procs)
    if best is None:
        fits = [n for n in range(max(1, num_ranks // 2), 2 * num_ranks + 1)
                if any(all(c % p == 0 for c, p in zip(cells, g)) for g in _grids(n))][:4]
        raise ValueError(f"{num_ranks} ranks cannot split {'x'.join(map(str, cells))} cells into identical "
                         f"blocks: use a rank count whose factors divide the cells per side, e.g. "
                         f"{', '.join(map(str, fits)) or 'a power of two with power-of-two cells'}")
    return best[1]


def _grids(n: int):
    for px in _divisors(n):
        for py in _divisors(n // px):
            yield px, py, n // px // py


@dataclass(frozen=True, kw_only=True)
class StencilGrid:
    """A periodic domain of `cells` split over `procs` into identical blocks."""

    cells: tuple[int, int, int]
    """Cells per dimension of the whole domain."""
    procs: tuple[int, int, int]
    """Processes per dimension; their product is the number of ranks."""

    def __post_init__(self) -> None:
        if len(self.cells) != DIMS or len(self.procs) != DIMS or min(self.cells) < 1 or min(self.procs) < 1:
            raise ValueError(f"cells {self.cells} and procs {self.procs}: give 3 positive counts each")
        if any(c % p for c, p in zip(self.cells, self.procs)):
            raise ValueError(f"procs {self.procs} do not divide cells {self.cells} evenly: every block must "
                             f"be identical (use `decompose` to choose the grid)")

    @property
    def num_ranks(self) -> int:
        return math.prod(self.procs)

    @property
    def block(self) -> tuple[int, int, int]:
        """Cells per dimension of one rank's block."""
        return tuple(c // p for c, p in zip(self.cells, self.procs))

    @property
    def cells_per_rank(self) -> int:
        return math.prod(self.block)

    def coords(self, rank: int) -> tuple[int, int, int]:
        """Grid coordinates of `rank` (z fastest)."""
        if not 0 <= rank < self.num_ranks:
            raise ValueError(f"rank {rank} is not in 0..{self.num_ranks - 1}")
        px, py, pz = self.procs
        return rank // (py * pz), rank // pz % py, rank % pz

    def rank_of(self, coords: tuple[int, int, int]) -> int:
        """The rank at `coords`, wrapped periodically."""
        x, y, z = (c % p for c, p in zip(coords, self.procs))
        return (x * self.procs[1] + y) * self.procs[2] + z

    def neighbour(self, rank: int, dim: int, side: int) -> int:
        """The rank across face (dim, side) of `rank`; side -1 or +1."""
        c = list(self.coords(rank))
        c[dim] += side
        return self.rank_of(tuple(c))

    def face_cells(self, dim: int) -> int:
        """Cells of one face normal to `dim` (what one halo message carries, in cells)."""
        return self.cells_per_rank // self.block[dim]

    def messages(self, rank: int) -> list[tuple[int, int, int]]:
        """(dim, side, peer) of the faces `rank` sends to another rank each step (self-faces excluded)."""
        return [(d, s, self.neighbour(rank, d, s)) for d, s in product(range(DIMS), (-1, 1))
                if self.procs[d] > 1]


def decompose(num_ranks: int, cells: int | tuple[int, int, int]) -> StencilGrid:
    """The grid of `num_ranks` over `cells` (N for N^3, or (x, y, z)) chosen by `process_grid`."""
    shape = (cells,) * DIMS if isinstance(cells, int) else tuple(cells)
    return StencilGrid(cells=shape, procs=process_grid(num_ranks, shape))


@dataclass(frozen=True, kw_only=True)
class StencilWorkload:
    """What one step costs: compute per cell, bytes per face cell."""

    cells: tuple[int, int, int]
    """Cells per dimension of the whole domain."""
    compute_per_cell_s: float
    """Compute time per cell per step on one core, seconds."""
    bytes_per_face_cell: int = 4
    """Halo bytes per face cell (e.g. 4: one float32; CartDG p=7: 5 variables x 8x8 points x 8 B = 2560)."""
    steps: int = 2
    """Steps simulated; the step time is the makespan divided by them."""
    overlap_fraction: float = 0.0
    """Share of a step's compute that runs while the halo is exchanged (0: all of it waits for the halo)."""

    def __post_init__(self) -> None:
        if not 0 <= self.overlap_fraction <= 1:
            raise ValueError(f"overlap fraction {self.overlap_fraction}: give a share in [0, 1], e.g. 0.8")
        if not (math.isfinite(self.compute_per_cell_s) and self.compute_per_cell_s >= 0):
            raise ValueError(f"compute per cell {self.compute_per_cell_s} s: give a time >= 0, e.g. 1e-6")
        if self.bytes_per_face_cell < 0 or self.steps < 1:
            raise ValueError(f"bytes per face cell {self.bytes_per_face_cell} and steps {self.steps}: "
                             f"give bytes >= 0 and at least 1 step")


@dataclass(frozen=True, kw_only=True)
class StencilSim:
    """Per-step times of a simulated stencil run."""

    num_ranks: int
    procs: tuple[int, int, int]
    step_s: float
    """Makespan / steps."""
    compute_s: float
    """Compute per step of one rank (all ranks are identical)."""
    comm_s: float
    """step_s - compute_s: the halo exchange, including waiting for neighbours."""
    face_bytes: tuple[int, int, int]
    """Bytes of one face message normal to x, y, z."""
    num_transfers: int
    """Messages simulated (all steps)."""


def stencil_graph(grid: StencilGrid, workload: StencilWorkload, placement: np.ndarray) -> TaskGraph:
    """Per step: each rank's faces to its neighbours (after its previous compute), then its compute."""
    graph = TaskGraph()
    n = grid.num_ranks
    compute_s = grid.cells_per_rank * workload.compute_per_cell_s
    face_bytes = [grid.face_cells(d) * workload.bytes_per_face_cell for d in range(DIMS)]
    messages = [grid.messages(r) for r in range(n)]
    previous: list[int | None] = [None] * n
    for _ in range(workload.steps):
        incoming: list[list[int]] = [[] for _ in range(n)]
        for r in range(n):
            for dim, _side, peer in messages[r]:
                t = graph.add_transfer(int(placement[r]), int(placement[peer]), face_bytes[dim])
                if previous[r] is not None:
                    graph.depend(t, previous[r])
                incoming[peer].append(t)
        overlap = workload.overlap_fraction
        for r in range(n):
            task = graph.add_compute(compute_s * (1 - overlap))
            for t in incoming[r]:
                graph.depend(task, t)
            if previous[r] is not None:
                graph.depend(task, previous[r])
            if overlap:
                inner = graph.add_compute(compute_s * overlap)
                if previous[r] is not None:
                    graph.depend(inner, previous[r])
                graph.depend(task, inner)
            previous[r] = task
    return graph


def simulate_stencil(workload: StencilWorkload, num_ranks: int, topology: Topology,
                     placement: np.ndarray | None = None) -> StencilSim:
    """Simulate `workload` on `num_ranks` ranks of `topology` (rank r on endpoint placement[r], default r)."""
    grid = decompose(num_ranks, workload.cells)
    if num_ranks > topology.num_endpoints:
        raise ValueError(f"{num_ranks} ranks do not fit the {topology.num_endpoints} endpoints of "
                         f"{topology.name}: use a bigger topology")
    placement = np.arange(num_ranks) if placement is None else np.asarray(placement, dtype=np.int64)
    graph = stencil_graph(grid, workload, placement)
    timeline = run(graph, topology)
    step = timeline.makespan_s / workload.steps
    compute = grid.cells_per_rank * workload.compute_per_cell_s
    return StencilSim(num_ranks=num_ranks, procs=grid.procs, step_s=step, compute_s=compute,
                      comm_s=max(step - compute, 0.0),
                      face_bytes=tuple(grid.face_cells(d) * workload.bytes_per_face_cell for d in range(DIMS)),
                      num_transfers=sum(len(grid.messages(r)) for r in range(num_ranks)) * workload.steps)


# Seed 000: "there are 32 nodes in a rack" (TX-GAIA); 40 cores per node (2 x 20-core Xeon Gold 6248).
RACK_NODES = 32
# Ranks of one node exchange through shared memory: a per-rank copy bandwidth of a few GB/s and a
# sub-microsecond latency (assumed, typical of MPI shared-memory transports on Xeon servers).
SHARED_MEMORY = plain_link("5GB/s", "0.5us")


def rack_fat_tree(num_ranks: int, link: Link | str, *, rack_size: int = RACK_NODES, gpus_per_server: int = 1,
                  bisection: Fraction = Fraction(1), intra_node: Link | str = SHARED_MEMORY) -> Topology:
    """Racks of `rack_size` nodes, each rack one leaf of a 2-level fat tree (a star when one rack holds
    every node), with enough whole racks for `num_ranks` ranks placed `gpus_per_server` per node."""
    if rack_size < 1 or gpus_per_server < 1:
        raise ValueError(f"rack size {rack_size} and GPUs per server {gpus_per_server}: give both >= 1")
    nodes = -(-num_ranks // gpus_per_server)
    racks = -(-nodes // rack_size)
    if racks == 1:
        return star(hosts=nodes, link=link, gpus_per_server=gpus_per_server, pcie=intra_node)
    return fat_tree(levels=2, hosts=racks * rack_size, hosts_per_leaf=rack_size, bisection=bisection,
                    link=link, gpus_per_server=gpus_per_server, pcie=intra_node)


def with_message_overhead(topology: Topology, alpha_s: float) -> Topology:
    """`topology` with `alpha_s` more latency on every link out of an endpoint: every message crosses
    exactly one, so each pays a per-message software overhead once (MPI / NIC, not in the link presets)."""
    if not (math.isfinite(alpha_s) and alpha_s >= 0):
        raise ValueError(f"per-message overhead {alpha_s} s: give a time >= 0, e.g. 1us")
    if alpha_s == 0:
        return topology
    out_of_endpoint = topology.link_src < topology.num_endpoints
    return replace(topology, latency_s=topology.latency_s + np.where(out_of_endpoint, alpha_s, 0.0))
