"""The CFD-like stencil mini-app for real: halo exchange over torch.distributed, a 7-point update per step.

A periodic N^3 (or x*y*z) domain is split into identical blocks over a px x py x pz process grid
(`fabriclab.sim.stencil.decompose`: the same decomposition the simulator uses). Each rank keeps its block
with one ghost layer. A step is:

1. **communication**: pack the 6 faces into contiguous buffers, send each to the neighbour across it
   and receive the neighbour's face into the ghost layer, all in one `batch_isend_irecv` (tag = the face
   it came from, so the two faces exchanged with one peer when a dimension has 2 processes stay apart
   under Gloo; NCCL matches by order, which the order of the list keeps, and needs the group call so
   that two ranks receiving from each other first do not wait on each other), wait for all, unpack. A
   dimension with one process wraps onto the rank itself: a local copy. On CUDA tensors NCCL moves
   the faces from GPU memory; Gloo (ranks sharing a GPU) gets them packed into host buffers. The
   same holds for the stencil's other collectives (`on_host_if_needed`): the timings are gathered on
   the CPU, the final field through a host copy where the backend cannot gather CUDA tensors (Gloo's
   all_gather takes none: "invalid tensor type ... expected device=cuda:0").
2. **compute**: an explicit diffusion update u' = u + a (sum of the 6 neighbours - 6 u) on every cell,
   repeated `work` times from the same input (the result does not depend on `work`, the cost is
   proportional to it: the knob for compute per cell). Each operation is a plain IEEE add or multiply,
   so every decomposition gives the same numbers bit for bit.

Per step each rank times both phases (wall clock; compute also as thread CPU time, which stays honest
when more ranks than cores share the machine). `stencil_rank` returns every rank's timings and, on
request, the whole field gathered on rank 0.

Try it: `fabriclab stencil run --np 4 --cells 128 --steps 20 --work 1`.
"""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass

import torch
import torch.distributed as dist

from fabriclab.runtime.devices import device_p2p
from fabriclab.runtime.environment import resolve_backend
from fabriclab.sim.stencil import DIMS, StencilGrid, decompose

DTYPES = {"float32": torch.float32, "float64": torch.float64}


@dataclass(frozen=True, kw_only=True)
class StencilConfig:
    """One run of the stencil mini-app."""

    cells: int = 128
    """Cells per side of the cubic periodic domain (N^3 cells in all)."""
    steps: int = 20
    """Timed steps."""
    warmup: int = 2
    """Untimed steps before them."""
    work: int = 1
    """Stencil sweeps per step (compute per cell scales with it; the result does not)."""
    dtype: str = "float32"
    """float32 or float64."""
    coefficient: float = 0.125
    """Diffusion number a of the update; stable for a <= 1/6."""
    gather: bool = False
    """Return the final field on rank 0 (tests; costs a gather of the whole domain)."""
    device: str = "cpu"
    """Where the field lives: cpu, or cuda (each rank on the GPU of its local rank)."""
    backend: str | None = None
    """torch.distributed backend: gloo, nccl or mpi; None follows the device (nccl on cuda)."""

    def __post_init__(self) -> None:
        if self.cells < 1 or self.steps < 1 or self.warmup < 0 or self.work < 1:
            raise ValueError(f"cells {self.cells}, steps {self.steps}, warmup {self.warmup}, work {self.work}: "
                             f"give cells, steps and work >= 1 and warmup >= 0")
        if self.dtype not in DTYPES:
            raise ValueError(f"dtype {self.dtype!r}: use one of {', '.join(DTYPES)}")
        if not 0 < self.coefficient <= 1 / 6:
            raise ValueError(f"coefficient {self.coefficient}: give 0 < a <= 1/6 (explicit stability)")
        resolve_backend(self.device, self.backend)


def initial_block(grid: StencilGrid, rank: int, dtype: torch.dtype, device=None) -> torch.Tensor:
    """This rank's block with one ghost layer, filled from a function of the global cell index."""
    coords = grid.coords(rank)
    axes = [torch.arange(c * b, (c + 1) * b, dtype=torch.float64) for c, b in zip(coords, grid.block)]
    x, y, z = torch.meshgrid(*axes, indexing="ij")
    # Any deterministic pattern works; the primes keep neighbouring cells distinct.
    values = torch.remainder(7 * x + 13 * y + 29 * z + x * y * z, 17) / 17
    u = torch.zeros(tuple(b + 2 for b in grid.block), dtype=dtype, device=device)
    u[1:-1, 1:-1, 1:-1] = values.to(dtype)
    return u


def _face(u: torch.Tensor, dim: int, index: int) -> torch.Tensor:
    """The interior face of `u` at `index` along `dim` (1 or -2: first/last interior layer; 0 or -1: ghost)."""
    sl = [slice(1, -1)] * DIMS
    sl[dim] = index
    return u[tuple(sl)]


def on_host_if_needed(tensor: torch.Tensor, group=None) -> torch.Tensor:
    """`tensor` itself where the backend moves tensors of its device (CPU; CUDA over NCCL), else a copy in
    host memory for it (CUDA over Gloo or MPI): what every collective of the stencil sends."""
    if device_p2p(group, tensor.device):
        return tensor
    return torch.empty(tensor.shape, dtype=tensor.dtype).copy_(tensor)  # device to host, after its kernels


class HaloExchange:
    """Packs, sends, receives and unpacks the 6 faces of one rank; buffers are allocated once."""

    def __init__(self, grid: StencilGrid, rank: int, u: torch.Tensor, group=None) -> None:
        self.grid, self.rank, self.group = grid, rank, group
        # Face buffers where the backend can send from: the field's device, or host memory (Gloo, CUDA).
        where = u.device if device_p2p(group, u.device) else torch.device("cpu")
        self.faces = []  # (dim, side, peer, send buffer, recv buffer)
        for dim in range(DIMS):
            for side in (-1, 1):
                shape = _face(u, dim, 1).shape
                peer = grid.neighbour(rank, dim, side)
                self.faces.append((dim, side, peer, torch.empty(shape, dtype=u.dtype, device=where),
                                   torch.empty(shape, dtype=u.dtype, device=where)))

    @staticmethod
    def tag(dim: int, side: int) -> int:
        """Tag of the face a message carries, as its sender names it."""
        return 2 * dim + (side > 0)

    def exchange(self, u: torch.Tensor) -> None:
        """Fill the ghost layers of `u` with the neighbours' faces."""
        ops = []
        for dim, side, peer, send, recv in self.faces:
            send.copy_(_face(u, dim, 1 if side < 0 else -2))
        # Receives first (Gloo then runs both directions of a pair at once), per dimension the +1 ghost
        # before the -1 ghost: with 2 processes in a dimension both faces go to the same peer, and a
        # backend that matches by order (NCCL ignores tags) pairs our first receive, the +1 ghost, with
        # the peer's first send, its -1 face, which is what borders our +1 side.
        for dim, side, peer, send, recv in sorted(self.faces, key=lambda f: (f[0], -f[1])):
            if peer != self.rank:
                # The face we receive on `side` is the one our neighbour sent towards us: its -side face.
                ops.append(dist.P2POp(dist.irecv, recv, peer, self.group, self.tag(dim, -side)))
        for dim, side, peer, send, recv in self.faces:
            if peer != self.rank:
                ops.append(dist.P2POp(dist.isend, send, peer, self.group, self.tag(dim, side)))
        for work in dist.batch_isend_irecv(ops) if ops else ():
            work.wait()
        for dim, side, peer, send, recv in self.faces:
            ghost = _face(u, dim, 0 if side < 0 else -1)
            if peer == self.rank:  # periodic wrap onto ourselves: our opposite face
                ghost.copy_(_face(u, dim, -2 if side < 0 else 1))
            else:
                ghost.copy_(recv)


def sweep(u: torch.Tensor, out: torch.Tensor, scratch: torch.Tensor, a: float) -> None:
    """out (interior) = u + a * (sum of the 6 neighbours - 6 u), one IEEE operation at a time."""
    c = u[1:-1, 1:-1, 1:-1]
    torch.add(u[:-2, 1:-1, 1:-1], u[2:, 1:-1, 1:-1], out=scratch)
    scratch.add_(u[1:-1, :-2, 1:-1])
    scratch.add_(u[1:-1, 2:, 1:-1])
    scratch.add_(u[1:-1, 1:-1, :-2])
    scratch.add_(u[1:-1, 1:-1, 2:])
    interior = out[1:-1, 1:-1, 1:-1]
    torch.mul(c, 6.0, out=interior)
    scratch.sub_(interior)
    scratch.mul_(a)
    torch.add(c, scratch, out=interior)


def stencil_rank(ctx, config: StencilConfig) -> dict:
    """Run the mini-app on this rank (`ctx` from `runtime.launch`); every rank returns the same summary."""
    grid = decompose(ctx.world_size, config.cells)
    dtype = DTYPES[config.dtype]
    u = initial_block(grid, ctx.rank, dtype, ctx.device)
    new = torch.zeros_like(u)
    scratch = torch.empty(grid.block, dtype=dtype, device=ctx.device)
    halo = HaloExchange(grid, ctx.rank, u, ctx.group)
    comm, compute, compute_cpu = [], [], []
    for step in range(config.warmup + config.steps):
        if step == config.warmup:
            dist.barrier(ctx.group)
        t0 = time.perf_counter()
        halo.exchange(u)
        _sync(ctx.device)
        t1, c1 = time.perf_counter(), time.thread_time()
        for _ in range(config.work):
            sweep(u, new, scratch, config.coefficient)
        _sync(ctx.device)
        t2, c2 = time.perf_counter(), time.thread_time()
        u, new = new, u
        if step >= config.warmup:
            comm.append(t1 - t0)
            compute.append(t2 - t1)
            compute_cpu.append(c2 - c1)
    mine = torch.tensor([statistics.fmean(compute), statistics.fmean(comm), statistics.fmean(compute_cpu),
                         max(c + m for c, m in zip(compute, comm))], dtype=torch.float64)
    # On the CPU whatever the device: every group has a CPU backend (NCCL's has Gloo beside it).
    every = [torch.empty_like(mine) for _ in range(ctx.world_size)]
    dist.all_gather(every, mine, group=ctx.group)
    table = torch.stack(every)
    result = {"num_ranks": ctx.world_size, "procs": list(grid.procs), "block": list(grid.block),
              "cells_per_rank": grid.cells_per_rank, "compute_s": float(table[:, 0].mean()),
              "comm_s": float(table[:, 1].mean()), "compute_cpu_s": float(table[:, 2].mean()),
              "comm_max_s": float(table[:, 1].max()), "step_max_s": float(table[:, 3].max()),
              "face_bytes": [grid.face_cells(d) * u.element_size() for d in range(DIMS)]}
    if config.gather:
        result["field"] = gather_field(grid, u, ctx)
    return result


def gather_field(grid: StencilGrid, u: torch.Tensor, ctx):
    """The whole domain (without ghosts) on rank 0 as a numpy array (it pickles without shared memory, so
    it survives the rank's exit on its way to the launcher); None elsewhere."""
    block = on_host_if_needed(u[1:-1, 1:-1, 1:-1].contiguous(), ctx.group)
    parts = [torch.empty_like(block) for _ in range(ctx.world_size)]
    dist.all_gather(parts, block, group=ctx.group)
    if ctx.rank != 0:
        return None
    field = torch.empty(grid.cells, dtype=u.dtype)
    for r, part in enumerate(parts):
        lo = [c * b for c, b in zip(grid.coords(r), grid.block)]
        field[lo[0]:lo[0] + grid.block[0], lo[1]:lo[1] + grid.block[1], lo[2]:lo[2] + grid.block[2]] = part.cpu()
    return field.numpy()


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)
