"""Strong scaling of the stencil mini-app on Samsi et al.'s two fabrics, emulated, next to its simulation.

For every fabric preset (`25gbe`, `100g-opa` at a scale, i.e. a dilation) and every rank count, one
emulated star of that many hosts (TX-GAIA's Ethernet: one core switch) runs the mini-app, one rank per
host namespace (`python -m fabriclab.bench.stencil.run`); one rank needs no network and runs locally. Each
row has the measured compute and communication time per step and, for comparison, the flow-level
simulation of the same halo exchange on the same emulated star (shaped rate x TCP payload share,
measured hop latency, the measured compute per cell).

Mind what the emulation measures: rates are divided by D but the CPU is not, so compute is real-time
while the wire is D times slower; and a tbf bucket (>= 128 KiB) lets each step's faces through unshaped
when they are smaller and the link idled long enough to refill it, which a compute phase usually does.

Try it: `sudo fabriclab stencil scale --np 1,2,4,8 --fabrics 25gbe,100g-opa --cells 256`.
"""

from __future__ import annotations

import json
import sys
import tempfile
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Callable

from fabriclab.bench.stencil.run import run_stencil
from fabriclab.bench.validate.model import TCP_PAYLOAD_EFFICIENCY, emulated_topology
from fabriclab.emu.cluster import BURST_S, QUEUE_S, EmuConfig, emulated_cluster
from fabriclab.emu.launch import raise_on_failure, run_in_cluster
from fabriclab.emu.presets import DEFAULT_SCALE, FABRIC_PRESET_NAMES, apply_preset, fabric_preset
from fabriclab.fabric.scenario import TopologySpec
from fabriclab.runtime.stencil import StencilConfig
from fabriclab.sim.stencil import StencilWorkload, simulate_stencil


@dataclass(frozen=True, kw_only=True)
class ScaleConfig:
    """A strong-scaling sweep of the mini-app on emulated fabrics."""

    fabrics: tuple[str, ...] = FABRIC_PRESET_NAMES
    """Fabric presets (Samsi et al.'s fabrics): 25gbe, 100g-opa."""
    num_ranks: tuple[int, ...] = (1, 2, 4, 8)
    """Rank counts, one emulated host each."""
    scale: str = DEFAULT_SCALE
    """Link rate scale of the presets: the dilation is 1/scale."""
    stencil: StencilConfig = field(default_factory=StencilConfig)
    """The mini-app's problem: cells, steps, work."""
    burst_s: float = BURST_S
    """tbf bucket as time at the link rate (floor 128 KiB)."""
    queue_s: float = QUEUE_S
    """tbf queue limit as time at the link rate."""
    timeout_s: float = 300.0
    """Longest run of one rank count."""

    def __post_init__(self) -> None:
        if not self.num_ranks or min(self.num_ranks) < 1:
            raise ValueError(f"rank counts {self.num_ranks}: give counts >= 1, e.g. 1,2,4,8")
        for name in self.fabrics:
            fabric_preset(name)
        EmuConfig(burst_s=self.burst_s, queue_s=self.queue_s)


def _spec(fabric: str, num_ranks: int, scale: str) -> tuple[TopologySpec, float]:
    return apply_preset(TopologySpec(kind="star", hosts=num_ranks), fabric, scale)


def run_emulated(config: ScaleConfig, fabric: str, num_ranks: int,
                 on_line: Callable[[int, str], None] | None = None) -> tuple[dict, float, float]:
    """(summary, dilation, hop latency) of the mini-app on a star of `num_ranks` emulated hosts."""
    spec, dilation = _spec(fabric, num_ranks, config.scale)
    emu = EmuConfig(dilation=dilation, burst_s=config.burst_s, queue_s=config.queue_s)
    with tempfile.TemporaryDirectory(prefix="fabriclab-stencil-") as tmp:
        cfg, out = Path(tmp) / "stencil.json", Path(tmp) / "result.json"
        cfg.write_text(json.dumps(asdict(config.stencil)))
        argv = [sys.executable, "-m", "fabriclab.bench.stencil.run", "--config", str(cfg), "--out", str(out),
                "--timeout", str(config.timeout_s)]
        with emulated_cluster(spec, config=emu) as state:
            results = run_in_cluster(argv, timeout_s=config.timeout_s, state=state, on_line=on_line)
            hop = state.hop_latency_s or 0.0
        raise_on_failure(results, "stencil", out)
        return json.loads(out.read_text()), dilation, hop


def simulated_comm_s(summary: dict, spec: TopologySpec, dilation: float, hop_latency_s: float) -> float:
    """The simulator's halo-exchange time per step for a measured run, on the emulated topology."""
    if summary["num_ranks"] == 1:
        return 0.0
    topology = emulated_topology(spec, dilation, hop_latency_s=hop_latency_s, efficiency=TCP_PAYLOAD_EFFICIENCY)
    cells = (summary["config"]["cells"],) * 3
    itemsize = summary["face_bytes"][0] // (summary["cells_per_rank"] // summary["block"][0])
    workload = StencilWorkload(cells=cells, compute_per_cell_s=summary["compute_per_cell_s"],
                               bytes_per_face_cell=itemsize)
    return simulate_stencil(workload, summary["num_ranks"], topology).comm_s


def run_scale(config: ScaleConfig, *, on_row: Callable[[dict], None] | None = None) -> list[dict]:
    """Every fabric x rank count; one row each (the 1-rank run is measured once and shared)."""
    rows, single = [], None
    for fabric in config.fabrics:
        for n in config.num_ranks:
            spec, dilation = _spec(fabric, n, config.scale)
            if n == 1:
                single = single or run_stencil(config.stencil, 1, timeout_s=config.timeout_s)[0]
                summary, hop = single, 0.0
            else:
                summary, dilation, hop = run_emulated(config, fabric, n)
            row = {"fabric": fabric, "num_ranks": n, "procs": summary["procs"], "dilation": dilation,
                   "emulated_rate_Bps": emulated_topology(spec, dilation).bandwidth_Bps.max(),
                   "compute_s": summary["compute_s"], "compute_cpu_s": summary["compute_cpu_s"],
                   "comm_s": summary["comm_s"], "comm_max_s": summary["comm_max_s"],
                   "step_max_s": summary["step_max_s"], "face_bytes": summary["face_bytes"],
                   "compute_per_cell_s": summary["compute_per_cell_s"], "hop_latency_s": hop,
                   "sim_comm_s": simulated_comm_s(summary, spec, dilation, hop)}
            rows.append(row)
            if on_row is not None:
                on_row(row)
    return rows
