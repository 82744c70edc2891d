"""How the simulator models an emulated cluster, and the two simulated times a validation row compares.

A validation compares a measured collective with two simulations on the same topology (same
TopologySpec, so the same nodes, links and routes), both in the emulation's own (dilated) time:

* **plain**: the simulator as it is (`fabriclab.sim.collective.simulate`): every link at its shaped rate
  (bandwidth / D), every link with the measured base latency per hop, the schedule step by step.
* **model**: plain plus what the emulated cluster adds, each a documented option of `EmuModel`:
  - `efficiency`: tbf counts Ethernet frames without preamble and FCS; with a 1500 B MTU a TCP segment
    carries 1448 B of payload (20 B IP + 32 B TCP with timestamps) in a 1514 B frame, so the payload
    rate is rate * 1448/1514 (-4.4 %), applied to the bandwidth of every link. Calibrated instead
    (`stream_efficiency`), it is the goodput of all ranks streaming to their next neighbour at once,
    which also holds what the 2 shared cores take from the links (kernel TCP, forwarding, shaping).
  - the executor's segments and hazards (`validate_executor`): what the benchmarked code really does.
  - `alpha_s`: software time per message (Gloo, Python, and above all waiting for a core: 4 ranks
    share 2 here), measured as one round of a 4-byte neighbour exchange on all ranks at once minus the
    wire latency of its 2 links; added to the latency of every host's link into the fabric, which every
    message crosses once.
  - `gamma_s_per_byte` / `copy_s_per_byte`: reduction and copy cost per byte, measured on this machine
    by every rank at once (the cores are shared as in a collective).
  - `burst_bytes`: the tbf bucket (>= 128 KiB) is full after the benchmark's barrier, so the first
    message each rank sends passes that many bytes unshaped (at 250 Mbit/s 128 KiB is 4.2 ms, 8 % of
    a 1 MB ring); later refills between steps are not modelled.
  `native` (Gloo's own all-reduce, a ring for dense CPU tensors) is modelled as the `ring` schedule.

Not modelled (explained in the validation note): Gloo running a pair half duplex when the sends are
posted before the peers' receives (measured: a 2 MB exchange both ways takes 2x its one-way time, 1x
with the receives posted first), which hits the pairwise exchanges of butterfly, recursive doubling,
direct and the pipelined trees, depending on which partner arrives first; CPU contention beyond the calibrated costs (more ranks than
cores, the kernel's TCP and forwarding work, other jobs); TCP dynamics (losses, unfair sharing).

Try it: `python -c "from fabriclab.bench.validate.model import *; print(EmuModel())"`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np

from fabriclab.bench.validate.executor import ExecutorCosts, simulate_executor
from fabriclab.collectives.matching import DEFAULT_SEGMENT_BYTES
from fabriclab.collectives.registry import build_schedule
from fabriclab.collectives.schedule import ALLREDUCE
from fabriclab.fabric.scenario import TopologySpec, build_topology
from fabriclab.fabric.topology import Topology
from fabriclab.sim.collective import simulate

# TCP payload per frame as tbf counts it (no preamble, FCS or inter-frame gap): 1500 B MTU - 20 B IPv4
# - 20 B TCP - 12 B timestamp option = 1448 B in 1500 + 14 B Ethernet header = 1514 B.
TCP_PAYLOAD_EFFICIENCY = 1448 / 1514
NATIVE = "native"
# Gloo's allreduce for dense CPU tensors is its ring (gloo/allreduce.cc, the default algorithm).
NATIVE_AS = "ring"
ITEMSIZE = 4  # float32, as the validation benchmarks


@dataclass(frozen=True, kw_only=True)
class EmuModel:
    """What the `model` column adds to the plain simulation of an emulated cluster (module docstring)."""

    efficiency: float = TCP_PAYLOAD_EFFICIENCY
    """Payload share of each link's shaped rate; 1 turns the framing overhead off."""
    alpha_s: float = 0.0
    """Software time per message, added to its latency, seconds."""
    gamma_s_per_byte: float = 0.0
    """Reduction time per byte (sum of float32), seconds."""
    copy_s_per_byte: float = 0.0
    """Time per byte to copy a received chunk out of its temporary, seconds."""
    segment_bytes: int = DEFAULT_SEGMENT_BYTES
    """Message size the executor cuts chunks into (the benchmark's --segment)."""
    burst_bytes: int = 0
    """tbf bucket: bytes of each rank's first message that pass unshaped."""

    def __post_init__(self) -> None:
        if not 0 < self.efficiency <= 1:
            raise ValueError(f"efficiency {self.efficiency}: give the payload share in (0, 1], e.g. 0.956")
        for name in ("alpha_s", "gamma_s_per_byte", "copy_s_per_byte"):
            value = getattr(self, name)
            if not (math.isfinite(value) and value >= 0):
                raise ValueError(f"{name} {value}: give a time >= 0 (seconds)")
        if self.burst_bytes < 0:
            raise ValueError(f"burst {self.burst_bytes} B: give a bucket size >= 0")
        if self.segment_bytes < ITEMSIZE:
            raise ValueError(f"segment {self.segment_bytes} B: give at least {ITEMSIZE} B, e.g. 4MB")


def emulated_topology(spec: TopologySpec, dilation: float, *, hop_latency_s: float = 0.0,
                      efficiency: float = 1.0, alpha_s: float = 0.0) -> Topology:
    """The topology of `spec` as the emulator runs it: bandwidth / D * efficiency, `hop_latency_s` per
    link, plus `alpha_s` on every link out of a host (each message crosses one: once per message)."""
    if not dilation >= 1:
        raise ValueError(f"dilation {dilation}: give D >= 1")
    if not (hop_latency_s >= 0 and alpha_s >= 0):
        raise ValueError(f"hop latency {hop_latency_s} s and alpha {alpha_s} s: give times >= 0")
    topology = build_topology(spec)
    if topology.gpus_per_server != 1:
        raise ValueError("the emulator runs one rank per host: build the spec with gpus_per_server 1")
    out_of_host = topology.link_src < topology.num_endpoints
    latency = np.where(out_of_host, hop_latency_s + alpha_s, hop_latency_s)
    return replace(topology, bandwidth_Bps=topology.bandwidth_Bps / dilation * efficiency, latency_s=latency)


def stream_efficiency(calibration: dict, rate_Bps: float, *, burst_bytes: int = 0) -> float | None:
    """Goodput of the calibration stream as a share of the shaped rate (its per-message time and the
    bucket's free bytes taken out), at most 1; None when the calibration has no stream."""
    if "stream_s" not in calibration:
        return None
    busy_s = calibration["stream_s"] - calibration.get("step_s", 0.0)
    if busy_s <= 0:
        return None
    return min(max(calibration["stream_bytes"] - burst_bytes, 0) / busy_s / rate_Bps, 1.0)


def model_from_calibration(calibration: dict, *, hop_latency_s: float, path_links: int = 2,
                           efficiency: float = TCP_PAYLOAD_EFFICIENCY,
                           segment_bytes: int = DEFAULT_SEGMENT_BYTES, burst_bytes: int = 0) -> EmuModel:
    """An `EmuModel` from `validate_rank.calibrate`'s numbers; the wire latency is taken out of the step."""
    step = float(calibration.get("step_s", 0.0))
    return EmuModel(efficiency=efficiency, alpha_s=max(step - path_links * hop_latency_s, 0.0),
                    gamma_s_per_byte=float(calibration.get("gamma_s_per_byte", 0.0)),
                    copy_s_per_byte=float(calibration.get("copy_s_per_byte", 0.0)),
                    segment_bytes=segment_bytes, burst_bytes=burst_bytes)


def simulate_plain(topology: Topology, algo: str, num_ranks: int, size_bytes: int) -> float:
    """The simulator as it is, on `topology` (ranks on endpoints 0..n-1); `native` as a ring."""
    spec = NATIVE_AS if algo == NATIVE else algo
    return simulate(ALLREDUCE, spec, topology, num_ranks, size_bytes, itemsize=ITEMSIZE,
                    engine="general").time_s


def simulate_model(topology: Topology, algo: str, num_ranks: int, size_bytes: int, model: EmuModel) -> float:
    """The executor model on `topology` (built with the model's efficiency and alpha: `emulated_topology`)."""
    spec = NATIVE_AS if algo == NATIVE else algo
    schedule = build_schedule(ALLREDUCE, spec, num_ranks, size_bytes // ITEMSIZE)
    costs = ExecutorCosts(gamma_s_per_byte=model.gamma_s_per_byte, copy_s_per_byte=model.copy_s_per_byte,
                          burst_bytes=model.burst_bytes)
    return simulate_executor(schedule, topology, itemsize=ITEMSIZE, segment_bytes=model.segment_bytes,
                             costs=costs)


@dataclass(frozen=True, kw_only=True)
class SizeGroup:
    """Sizes benchmarked with the same number of iterations."""

    sizes: tuple[int, ...]
    """Buffer sizes, bytes."""
    iters: int
    """Timed iterations per algorithm and size."""
    warmup: int
    """Untimed iterations before them."""


def plan_iterations(estimates: dict[int, float], *, budget_s: float, max_iters: int) -> list[SizeGroup]:
    """Iterations per size so that every size takes about `budget_s` (all algorithms together, from the
    simulator's estimate), between 1 and `max_iters`; one warm-up when it fits in half the budget."""
    if budget_s <= 0 or max_iters < 1:
        raise ValueError(f"budget {budget_s} s and max iterations {max_iters}: give both > 0")
    groups: list[SizeGroup] = []
    for size in sorted(estimates):
        total = max(estimates[size], 1e-9)
        iters = int(min(max_iters, max(1, budget_s // total)))
        warmup = 1 if total <= budget_s / 2 else 0
        if groups and (groups[-1].iters, groups[-1].warmup) == (iters, warmup):
            groups[-1] = replace(groups[-1], sizes=groups[-1].sizes + (size,))
        else:
            groups.append(SizeGroup(sizes=(size,), iters=iters, warmup=warmup))
    return groups
