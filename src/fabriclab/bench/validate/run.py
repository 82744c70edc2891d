"""Validation of the simulator: measured collectives on the emulated cluster vs. simulated, same topology.

`run_validation(config)` builds the emulated cluster of `config.spec()` (namespaces, tbf-shaped links at
bandwidth / D, routes of `Topology.route()`), starts `validate_rank` on every host (calibration, then the
collectives benchmark for every algorithm and size, few iterations for big sizes), tears the cluster
down, and simulates every (algorithm, size) twice on the same TopologySpec (`validate_model`): **plain**
(shaped bandwidth, measured per-hop latency) and **model** (plus the calibrated link goodput, the
executor's segments, calibrated per-message and reduction costs, the tbf bucket). Each row has the
measured time (median of its iterations) and both simulated times, in the emulation's time, and the
error of each simulation: (simulated - measured) / measured.

Try it: `sudo fabriclab validate emulated --topology star --algos ring,native --sizes 1MB,16MB`.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Callable

from fabriclab.bench.validate.model import (NATIVE, TCP_PAYLOAD_EFFICIENCY, EmuModel, emulated_topology,
                                            model_from_calibration, plan_iterations, simulate_model,
                                            simulate_plain, stream_efficiency)
from fabriclab.collectives import registry
from fabriclab.collectives.matching import DEFAULT_SEGMENT_BYTES
from fabriclab.collectives.schedule import ALLREDUCE
from fabriclab.emu.cluster import EmuConfig, emulated_cluster, shaping
from fabriclab.emu.launch import raise_on_failure, run_in_cluster
from fabriclab.fabric.scenario import TopologySpec
from fabriclab.units import parse_bandwidth, parse_ratio

TOPOLOGIES = ("star", "fat-tree")
# 1 Gbit/s real links at D = 2 run at 500 Mbit/s: 4 ranks and the kernel's forwarding then leave room on
# 2 cores (at 1 Gbit/s the ring reached only ~80 % of the link under load), and 256 MB still takes ~7 s.
DEFAULT_LINK = "1Gbps"
DEFAULT_DILATION = 2.0
# tbf bucket: the emulator's floor (128 KiB) at these rates; a bucket lets messages after idle through
# unshaped, so the smaller, the closer the emulation is to a fluid link.
DEFAULT_BURST_S = 1e-3
# Deep tbf queues (200 ms at the link rate): Samsi et al.'s fabrics are lossless (RoCE with PFC, Omni-Path
# credits), and with the emulator's 10 ms queues incast (direct, 3 senders into one host) dropped whole
# 64 KiB GSO packets: measured 7 retransmission timeouts (>= 200 ms each) in 11 iterations of a 4 MB
# direct all-reduce at 250 Mbit/s, which then took 2x the model; with 200 ms queues, none.
DEFAULT_QUEUE_S = 200e-3


def all_algos() -> tuple[str, ...]:
    """Every all-reduce algorithm of the registry, then `native`."""
    return tuple(registry.algorithm_names(ALLREDUCE)) + (NATIVE,)


@dataclass(frozen=True, kw_only=True)
class ValidateConfig:
    """One validation: a topology, algorithms and sizes, how to emulate and how to model."""

    topology: str = "star"
    """star (one switch) or fat-tree (2 levels)."""
    hosts: int = 4
    """Emulated hosts, one rank each."""
    hosts_per_leaf: int = 2
    """Fat tree: hosts under one leaf."""
    bisection: str = "1/2"
    """Fat tree: bisection ratio (1/2 with 2 hosts per leaf: one spine, leaf uplinks shared by 2)."""
    link: str = DEFAULT_LINK
    """Real link bandwidth (e.g. 1Gbps, 25Gbps); the emulated links run at link / dilation."""
    dilation: float = DEFAULT_DILATION
    """Time dilation D of the emulation."""
    burst_s: float = DEFAULT_BURST_S
    """tbf bucket as time at the link rate (the emulator's floor is 128 KiB)."""
    queue_s: float = DEFAULT_QUEUE_S
    """tbf queue limit as time at the link rate (deep: few drops, as on a lossless fabric)."""
    algos: tuple[str, ...] = field(default_factory=all_algos)
    """All-reduce algorithm specs, and `native` for Gloo's own."""
    sizes_bytes: tuple[int, ...] = (1 << 10, 1 << 20, 16 << 20)
    """Buffer sizes, bytes."""
    budget_s: float = 6.0
    """Aimed-at benchmark time per size (all algorithms, from the simulator's estimate)."""
    max_iters: int = 10
    """Most timed iterations per size (small sizes)."""
    segment_bytes: int = DEFAULT_SEGMENT_BYTES
    """Executor segment size (benchmark and model alike)."""
    efficiency: float = TCP_PAYLOAD_EFFICIENCY
    """Payload share of the shaped rate in the model column when the goodput is not calibrated."""
    calibrate: bool = True
    """Measure per-message and reduction costs on the ranks and use them in the model column."""
    model_burst: bool = True
    """Model the tbf bucket (full after the barrier) in the model column."""
    calibrate_bandwidth: bool = True
    """Use the measured streaming goodput as the model's efficiency instead of `efficiency`."""
    timeout_s: float = 120.0
    """Longest wait for a stuck rank inside the benchmark."""
    nice: int = 0
    """Scheduling priority of the ranks (nice(1); negative needs root): on a shared machine a negative
    value keeps other jobs from stretching the measured times."""

    def __post_init__(self) -> None:
        if self.topology not in TOPOLOGIES:
            raise ValueError(f"topology {self.topology!r}: use one of {', '.join(TOPOLOGIES)}")
        if not -20 <= self.nice <= 19:
            raise ValueError(f"nice {self.nice}: give a priority in -20..19 (nice(1))")
        if self.hosts < 2:
            raise ValueError(f"hosts {self.hosts}: a collective needs at least 2 hosts")
        if not self.algos:
            raise ValueError("no algorithm given: use e.g. --algos ring,native or --algos all")
        for algo in self.algos:
            if algo != NATIVE:
                registry.parse_spec(ALLREDUCE, algo, self.hosts)
        if not self.sizes_bytes or min(self.sizes_bytes) < 4:
            raise ValueError("sizes must be at least 4 bytes (one float32), e.g. 1KB:256MB")
        parse_bandwidth(self.link)
        EmuConfig(dilation=self.dilation, burst_s=self.burst_s, queue_s=self.queue_s)  # validates them

    def spec(self) -> TopologySpec:
        """The TopologySpec both the emulator and the simulator build."""
        common = dict(hosts=self.hosts, bandwidth_Bps=parse_bandwidth(self.link), latency_s=0.0)
        if self.topology == "star":
            return TopologySpec(kind="star", **common)
        return TopologySpec(kind="fat-tree", levels=2, hosts_per_leaf=self.hosts_per_leaf,
                            bisection=parse_ratio(self.bisection), **common)


def estimate_times(config: ValidateConfig) -> dict[int, float]:
    """Simulated time per size of all algorithms together (plain, at the payload rate): the budget plan."""
    topology = emulated_topology(config.spec(), config.dilation, efficiency=config.efficiency)
    return {size: sum(simulate_plain(topology, algo, config.hosts, size) for algo in config.algos)
            for size in sorted(set(config.sizes_bytes))}


def measure(config: ValidateConfig, *, on_line: Callable[[int, str], None] | None = None) -> dict:
    """Build the emulated cluster, run `validate_rank` on every host, tear down; rank 0's result plus the
    cluster's measured hop latency."""
    estimates = estimate_times(config)
    groups = plan_iterations(estimates, budget_s=config.budget_s, max_iters=config.max_iters)
    expected_s = sum(estimates[s] * (g.iters + g.warmup) for g in groups for s in g.sizes)
    plan = {"algos": list(config.algos), "groups": [asdict(g) for g in groups], "timeout_s": config.timeout_s,
            "segment_bytes": config.segment_bytes, "calibrate": config.calibrate}
    with tempfile.TemporaryDirectory(prefix="fabriclab-validate-") as tmp:
        plan_path, out_path = Path(tmp) / "plan.json", Path(tmp) / "result.json"
        plan_path.write_text(json.dumps(plan))
        argv = ["nice", "-n", str(config.nice), sys.executable, "-m", "fabriclab.bench.validate.rank",
                "--config", str(plan_path), "--out", str(out_path)]
        emu = EmuConfig(dilation=config.dilation, burst_s=config.burst_s, queue_s=config.queue_s)
        with emulated_cluster(config.spec(), config=emu) as state:
            # Generous: the estimate is a fluid lower bound; small sizes and start-up cost seconds.
            results = run_in_cluster(argv, timeout_s=3 * expected_s + 120 + 20 * len(config.sizes_bytes),
                                     state=state, on_line=on_line)
            hop_latency_s = state.hop_latency_s or 0.0
        raise_on_failure(results, "validation", out_path)
        result = json.loads(out_path.read_text())
    result.update(hop_latency_s=hop_latency_s, groups=plan["groups"], estimates_s=estimates)
    return result


def compare(config: ValidateConfig, measured: dict) -> dict:
    """Simulate every measured row (plain and model) and put the three times side by side."""
    hop = float(measured.get("hop_latency_s") or 0.0)
    rate = parse_bandwidth(config.link) / config.dilation
    emu = EmuConfig(dilation=config.dilation, burst_s=config.burst_s, queue_s=config.queue_s)
    burst = shaping(rate, emu)[0] if config.model_burst else 0
    calibration = measured.get("calibration", {})
    efficiency = config.efficiency
    if config.calibrate and config.calibrate_bandwidth:
        efficiency = stream_efficiency(calibration, rate, burst_bytes=burst) or config.efficiency
    model = (model_from_calibration(calibration, hop_latency_s=hop, burst_bytes=burst,
                                    efficiency=efficiency, segment_bytes=config.segment_bytes)
             if config.calibrate else EmuModel(efficiency=config.efficiency, segment_bytes=config.segment_bytes,
                                               burst_bytes=burst))
    plain_topo = emulated_topology(config.spec(), config.dilation, hop_latency_s=hop)
    model_topo = emulated_topology(config.spec(), config.dilation, hop_latency_s=hop,
                                   efficiency=model.efficiency, alpha_s=model.alpha_s)
    n = int(measured.get("world_size", config.hosts))
    rows = []
    for row in measured["rows"]:
        algo, size = row["algo"], int(row["size_bytes"])
        measured_s = row["time_us"] * 1e-6
        plain_s = simulate_plain(plain_topo, algo, n, size)
        model_s = simulate_model(model_topo, algo, n, size, model)
        rows.append({"topology": config.topology, "algo": algo, "size_bytes": size, "measured_s": measured_s,
                     "plain_s": plain_s, "model_s": model_s, "err_plain_pct": _error(plain_s, measured_s),
                     "err_model_pct": _error(model_s, measured_s), "iters": row["iters"],
                     "times_s": [t * 1e-6 for t in row.get("times_us", [row["time_us"]])],
                     "num_wrong": row["num_wrong"]})
    return {"model": asdict(model), "hop_latency_s": hop, "rows": rows}


def machine_load() -> dict:
    """Load average and CPU pressure (share of time some task waited for a core, last 10 s): other jobs
    on this machine stretch the measured times, so a validation records them before and after."""
    out = {"loadavg_1min": os.getloadavg()[0]}
    try:
        some = Path("/proc/pressure/cpu").read_text().splitlines()[0].split()
        out["cpu_pressure_avg10_pct"] = float(dict(f.split("=") for f in some[1:])["avg10"])
    except (OSError, IndexError, KeyError, ValueError):
        pass
    return out


def run_validation(config: ValidateConfig, *, on_line: Callable[[int, str], None] | None = None) -> dict:
    """Measure on the emulated cluster, simulate, compare: the record's results."""
    before = machine_load()
    measured = measure(config, on_line=on_line)
    after = machine_load()
    out = compare(config, measured)
    out.update(load_before=before, load_after=after, calibration=measured.get("calibration", {}),
               groups=measured["groups"],
               topology_name=emulated_topology(config.spec(), config.dilation).name,
               emulated_rate_Bps=parse_bandwidth(config.link) / config.dilation)
    return out


def _error(simulated_s: float, measured_s: float) -> float:
    return (simulated_s - measured_s) / measured_s * 100 if measured_s > 0 else float("nan")
