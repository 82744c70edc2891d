"""The stencil workload simulated at scale: strong scaling on Samsi et al.'s two fabrics, racks of 32 nodes.

For every fabric (link presets of `fabriclab.emu.presets`: 25GbE RoCE and 100 Gb Omni-Path, at their real
rates and per-hop latencies) and every rank count, `simulate_stencil` runs the halo exchange and compute
of a few steps on `rack_fat_tree`: racks of `rack_size` nodes are the leaves of a 2-level fat tree,
ranks are placed linearly (`gpus_per_server` per node), so the first rack boundary is crossed at
rack_size x gpus_per_server ranks (Samsi et al.: 32 nodes x 40 cores = 1280, where CartDG's scaling
plateaued). Rows give compute and communication time per step, speed-up and parallel efficiency.

Try it: `fabriclab stencil simulate --ranks 64,256,1024,4096 --rack-size 32 --cells 128`.
"""

from __future__ import annotations

from fractions import Fraction

import time
from dataclasses import dataclass
from typing import Callable

from fabriclab.emu.presets import FABRIC_PRESET_NAMES, fabric_preset
from fabriclab.fabric.links import link_preset
from fabriclab.sim.stencil import (RACK_NODES, StencilWorkload, decompose, rack_fat_tree, simulate_stencil,
                                   with_message_overhead)

# Compute per cell per step of the mini-app (one 7-point sweep, float32, torch on one core): measured with
# `fabriclab stencil run --np 1 --cells 128` on the 2-core development machine: 3.9-4.2 ns per cell.
MINI_APP_COMPUTE_PER_CELL_S = 4e-9


@dataclass(frozen=True, kw_only=True)
class AtScaleConfig:
    """A simulated strong-scaling sweep of the stencil."""

    ranks: tuple[int, ...] = (64, 256, 1024, 4096)
    """Rank counts (each must split the cells into identical blocks)."""
    fabrics: tuple[str, ...] = FABRIC_PRESET_NAMES
    """Fabric presets of Samsi et al.: 25gbe, 100g-opa."""
    cells: int = 128
    """Cells per side of the periodic cube."""
    compute_per_cell_s: float = MINI_APP_COMPUTE_PER_CELL_S
    """Compute per cell per step on one core, seconds."""
    bytes_per_face_cell: int = 4
    """Halo bytes per face cell (4: the mini-app's float32; CartDG p=7 elements: 2560)."""
    rack_size: int = RACK_NODES
    """Nodes per rack, i.e. per leaf switch."""
    gpus_per_server: int = 1
    """Ranks per node (Samsi et al.'s CPU nodes: 40); they share the node's NIC."""
    bisection: Fraction = Fraction(1)
    """Bisection ratio of the fat tree above the racks."""
    steps: int = 2
    """Steps simulated per point."""
    alpha_s: float = 0.0
    """Software overhead per message (MPI, NIC), added to its latency; the link presets hold none."""
    overlap_fraction: float = 0.0
    """Share of a step's compute that runs while the halo travels (CartDG overlaps; 0: none)."""

    def __post_init__(self) -> None:
        if not self.ranks or min(self.ranks) < 1:
            raise ValueError(f"rank counts {self.ranks}: give counts >= 1, e.g. 64,256,1024,4096")
        for name in self.fabrics:
            fabric_preset(name)
        self.workload()  # checks the workload's fields
        if not self.alpha_s >= 0:
            raise ValueError(f"per-message overhead {self.alpha_s} s: give a time >= 0, e.g. 1us")
        for n in self.ranks:
            decompose(n, self.cells)  # fails early, naming counts that fit

    def workload(self) -> StencilWorkload:
        return StencilWorkload(cells=(self.cells,) * 3, compute_per_cell_s=self.compute_per_cell_s,
                               bytes_per_face_cell=self.bytes_per_face_cell, steps=self.steps,
                               overlap_fraction=self.overlap_fraction)


def simulate_at_scale(config: AtScaleConfig, *, on_row: Callable[[dict], None] | None = None) -> list[dict]:
    """One row per fabric x rank count, in that order."""
    rows = []
    workload = config.workload()
    serial_s = workload.compute_per_cell_s * config.cells ** 3
    for fabric in config.fabrics:
        link = link_preset(fabric_preset(fabric).link)
        for n in sorted(config.ranks):
            topology = with_message_overhead(
                rack_fat_tree(n, link, rack_size=config.rack_size, gpus_per_server=config.gpus_per_server,
                              bisection=config.bisection), config.alpha_s)
            start = time.perf_counter()
            sim = simulate_stencil(workload, n, topology)
            racks = -(-(-(-n // config.gpus_per_server)) // config.rack_size)
            row = {"fabric": fabric, "link": link.name, "num_ranks": n, "procs": list(sim.procs),
                   "racks": racks, "topology": topology.name, "compute_s": sim.compute_s,
                   "comm_s": sim.comm_s, "step_s": sim.step_s, "speedup": serial_s / sim.step_s,
                   "efficiency": serial_s / sim.step_s / n, "face_bytes": list(sim.face_bytes),
                   "num_transfers": sim.num_transfers, "sim_wall_s": time.perf_counter() - start}
            rows.append(row)
            if on_row is not None:
                on_row(row)
    return rows
