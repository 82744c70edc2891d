"""What `fabriclab validate collectives` measures and how, checked before anything is built (no torch, no root).

`CheckConfig` holds the ops (all-gather and all-to-all by default, the backend's own collectives), the
host count predicted and the smaller one calibrated on, the sizes, the iterations and how the emulated
star is shaped. Its checks refuse, with what to change: unknown ops, fewer than 2 hosts, calibrating on
as many hosts as are predicted (that would be a fit, not a prediction), more hosts than this machine
runs ranks, and links tc cannot shape.

Try it: `sudo fabriclab validate collectives --ops allgather,alltoall --hosts 4 --calibrate-hosts 2`.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

from fabriclab.bench.collectives.config import BENCH_OPS, DTYPE_SIZES
from fabriclab.bench.limits import check_local_ranks
from fabriclab.bench.validate.model import TCP_PAYLOAD_EFFICIENCY
from fabriclab.bench.validate.run import DEFAULT_BURST_S, DEFAULT_QUEUE_S
from fabriclab.collectives.schedule import ALLGATHER, ALLTOALL
from fabriclab.emu.cluster import EmuConfig, check_shaping
from fabriclab.fabric.scenario import TopologySpec, build_topology
from fabriclab.units import parse_bandwidth

DEFAULT_OPS = (ALLGATHER, ALLTOALL)
# 64 KB to 64 MB in x4 steps: from latency-bound to wire-bound at 1 Gbit/s (64 MB all-gather on 4 hosts:
# 48 MB per host link, ~0.4 s), and the whole check stays around two minutes on 2 cores.
DEFAULT_SIZES = tuple(64 << 10 << 2 * i for i in range(6))
# 1 Gbit/s per direction: 4 ranks on 2 cores still fill it (the all-reduce of the emulated calibration
# reached 0.96 of it, docs/measurements/emu-calibration), so the shaped links, not the CPUs, are the limit.
DEFAULT_LINK = "1Gbps"
MAX_ITERS = 10_000
# Size bands the error is summarised in (the calibration's bands of nccl/fit.py, and below 1 MB).
BANDS = (("< 1 MB", 0, (1 << 20) - 1), ("1-16 MB", 1 << 20, 16 << 20), ("> 16 MB", (16 << 20) + 1, None))


@dataclass(frozen=True, kw_only=True)
class CheckConfig:
    """One check: measure on `calibrate_hosts` and on `hosts` emulated hosts, fit on the first, predict the second."""

    ops: tuple[str, ...] = DEFAULT_OPS
    """Collectives, each the backend's own (`native`): allgather, alltoall, allreduce, ..."""
    hosts: int = 4
    """Emulated hosts predicted (one rank each)."""
    calibrate_hosts: int = 2
    """Emulated hosts whose measurements the cluster model is fitted to."""
    sizes_bytes: tuple[int, ...] = DEFAULT_SIZES
    """Buffer sizes in bytes (whole float32 elements; all-to-all rounds down to whole blocks per rank)."""
    iters: int = 5
    """Timed iterations per op and size; the row's time is their median."""
    warmup: int = 1
    """Untimed iterations before them."""
    link: str = DEFAULT_LINK
    """Real link rate per direction (e.g. 1Gbps); the emulated links run at link / dilation."""
    dilation: float = 1.0
    """Time dilation D of the emulation (times are reported in the emulation's time)."""
    burst_s: float = DEFAULT_BURST_S
    """tbf bucket as time at the link rate (the emulator's floor is 128 KiB)."""
    queue_s: float = DEFAULT_QUEUE_S
    """tbf queue limit as time at the link rate: deep, since an all-to-all sends n-1 flows into every host
    (incast), and drops would time the kernel's retransmission timeouts, not the links."""
    efficiency: float = TCP_PAYLOAD_EFFICIENCY
    """Payload share of the shaped rate in the prior cluster (TCP over Ethernet as tbf counts it)."""
    joint: bool = True
    """Fit one cluster to every op's tables; False (or when the fit refuses several ops): one per op."""
    timeout_s: float = 120.0
    """Longest wait for a stuck rank inside the benchmark."""
    nice: int = 0
    """nice(1) priority of the ranks; negative (root) keeps other jobs from stretching the times."""

    def __post_init__(self) -> None:
        if not self.ops:
            raise ValueError(f"no op given: use e.g. --ops {','.join(DEFAULT_OPS)}")
        unknown = [op for op in self.ops if op not in BENCH_OPS]
        if unknown:
            raise ValueError(f"unknown op {unknown[0]!r}: use some of {', '.join(BENCH_OPS)}")
        if len(set(self.ops)) < len(self.ops):
            raise ValueError(f"an op is listed twice in {','.join(self.ops)}: list each once")
        if self.calibrate_hosts < 2 or self.hosts < 2:
            raise ValueError(f"--calibrate-hosts {self.calibrate_hosts}, --hosts {self.hosts}: a collective "
                             f"between hosts needs at least 2 of them")
        if self.calibrate_hosts >= self.hosts:
            raise ValueError(f"--calibrate-hosts {self.calibrate_hosts} is not below --hosts {self.hosts}: "
                             f"calibrate on fewer hosts than are predicted, e.g. --calibrate-hosts 2 --hosts 4")
        check_local_ranks(self.hosts, "--hosts")
        itemsize = DTYPE_SIZES["float32"]
        if not self.sizes_bytes or min(self.sizes_bytes) < itemsize or any(s % itemsize for s in self.sizes_bytes):
            raise ValueError("sizes must be whole float32 elements (multiples of 4 B), e.g. 64KB:64MB:x4")
        if not (1 <= self.iters <= MAX_ITERS and 0 <= self.warmup <= MAX_ITERS):
            raise ValueError(f"need --iters >= 1 and --warmup >= 0 (each at most {MAX_ITERS:,}), got "
                             f"{self.iters} and {self.warmup}")
        if not (math.isfinite(self.timeout_s) and self.timeout_s > 0):
            raise ValueError(f"--timeout {self.timeout_s}: give a finite number of seconds > 0")
        if not -20 <= self.nice <= 19:
            raise ValueError(f"--nice {self.nice}: give a priority in -20..19 (nice(1))")
        if not 0 < self.efficiency <= 1:
            raise ValueError(f"efficiency {self.efficiency}: give the payload share in (0, 1]")
        check_shaping(build_topology(self.spec(self.hosts)), self.emu_config())

    @property
    def rate_Bps(self) -> float:
        """The emulated links' rate per direction, bytes per second."""
        return parse_bandwidth(self.link) / self.dilation

    def spec(self, num_hosts: int) -> TopologySpec:
        """The emulated star of `num_hosts` hosts (one switch: every host has its own full-duplex link)."""
        return TopologySpec(kind="star", hosts=num_hosts, bandwidth_Bps=parse_bandwidth(self.link), latency_s=0.0)

    def emu_config(self) -> EmuConfig:
        """How the emulator shapes the links."""
        return EmuConfig(dilation=self.dilation, burst_s=self.burst_s, queue_s=self.queue_s)


def config_dict(config: CheckConfig) -> dict:
    """The config as plain data, for the record."""
    return asdict(config) | {"rate_Bps": config.rate_Bps}
