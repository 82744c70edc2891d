"""What a checkpoint weighs and costs, and how often to take one.

**Size** (`checkpoint_of`): the model's state to resume from, bytes per parameter as Megatron-LM keeps it
(`workload/memory.py`): bf16 weights (2 B) and Adam's fp32 master weights, first and second moments (12 B),
14 B per parameter, written once whatever the data-parallel replicas (Megatron-Core's fully parallel save
spreads a replicated tensor's writes over its replicas). The largest share one GPU writes is its stage's
weights over their replicas plus its optimizer shard (ZeRO-1 and up already shard it).

**Write and read** over the cluster's storage path (`fabric/storage.py`): the whole state at the lesser of
the servers' paths together and the file system's total, or the largest server's share over its own path,
whichever takes longer; a restart reads it back the same way.

**Synchronous or asynchronous**: a synchronous checkpoint pauses training for the whole write. An
asynchronous one (PyTorch DCP's `async_save`, Megatron's `--async-save`) pauses only to copy each GPU's
share to host memory over its PCIe link, then writes in the background; the next one cannot start before
that write ends, and until it ends a failure falls back to the checkpoint before (on average the write's
duration more work lost).

**Interval**: Young (1974, "A first order approximation to the optimum checkpoint interval") gives
sqrt(2 C M) for a checkpoint that pauses C seconds and a mean time to failure M; Daly (2006, "A higher
order estimate of the optimum checkpoint interval for restart dumps") the higher-order
sqrt(2 C M) (1 + sqrt(C / 2M) / 3 + C / 18M) - C (M itself when C >= 2M), which `daly_interval` returns.
The share of time that trains (`ettr`) is Daly's complete model for exponentially distributed failures, a
restart R that failures may also hit, and compute segments tau between checkpoints:
tau / (M e^(R/M) (e^((tau + C)/M) - 1)).

Try it: `python -c "from fabriclab.whatif.goodput.checkpoint import daly_interval, ettr; t = daly_interval(3,
11000); print(t, ettr(t, 3, 600, 11000))"`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from fabriclab.workload.memory import OPTIMIZER_BYTES, WEIGHT_BYTES

STATE_BYTES_PER_PARAM = WEIGHT_BYTES + OPTIMIZER_BYTES  # bf16 weights + fp32 master, m, v
# Detection and restart of a job after a failure (Kokolis et al.'s restart overhead u0): finding the failure,
# rescheduling, starting the processes, NCCL's initialisation, the data loader. Assumed: the middle of the 5-20
# minutes such estimates consider; Meta reports cutting its job start-up time for Llama 3 without a figure.
DEFAULT_RESTART_S = 600.0


@dataclass(frozen=True, kw_only=True)
class CheckpointPolicy:
    """How a job checkpoints and restarts."""

    interval_s: float | None = None
    """Training seconds between checkpoints; None: the interval that maximises goodput (Daly 2006)."""
    asynchronous: bool = False
    """Pause only to copy the state to host memory and write it in the background (module doc)."""
    restart_s: float = DEFAULT_RESTART_S
    """Detection and restart of a failed job, before it reads its checkpoint, seconds."""

    def __post_init__(self) -> None:
        if self.interval_s is not None and not (math.isfinite(self.interval_s) and self.interval_s > 0):
            raise ValueError(f"--checkpoint-interval {self.interval_s!r}: give the training time between "
                             f"checkpoints, > 0, e.g. 30min (or leave it out for the best one)")
        if not (math.isfinite(self.restart_s) and self.restart_s >= 0):
            raise ValueError(f"--restart-time {self.restart_s!r}: give the time from a failure to the job running "
                             f"again, >= 0, e.g. 10min")


@dataclass(frozen=True, kw_only=True)
class Checkpoint:
    """One checkpoint of a job: its size and what writing and reading it take."""

    total_bytes: float
    """The state written, all GPUs together."""
    shard_bytes: float
    """The largest share one GPU writes."""
    write_s: float
    """Writing it over the storage path."""
    read_s: float
    """Reading it back at a restart."""
    pause_s: float
    """Training paused per checkpoint: the write (synchronous) or the copy to host memory (asynchronous)."""
    lag_s: float
    """After the pause, until the checkpoint is safe: 0 (synchronous) or the write (asynchronous)."""
    bound: str
    """What limits the write: `storage total` or `per server`."""


def state_bytes(spec) -> float:
    """The bytes of one checkpoint of `spec` (module doc)."""
    return spec.num_params() * STATE_BYTES_PER_PARAM


def shard_bytes(memory, par) -> float:
    """The largest share of the state one GPU writes: its weights over their data-parallel replicas (ZeRO
    below 3), and its optimizer state (over the replicas without ZeRO)."""
    replicas = par.dp * par.cp
    weights = memory.weights_bytes / (replicas if par.zero < 3 else 1)
    optimizer = memory.optimizer_bytes / (replicas if par.zero == 0 else 1)
    return weights + optimizer


def checkpoint_of(spec, par, memory, cluster, policy: CheckpointPolicy = CheckpointPolicy()) -> Checkpoint:
    """The checkpoint of `spec` trained as `par` (`memory`: its memory per GPU) on `cluster` (module doc)."""
    total = state_bytes(spec)
    shard = min(shard_bytes(memory, par), total)
    s = cluster.server
    servers = max(1, par.num_gpus // s.gpus_per_server)
    storage = cluster.storage
    together = total / storage.rate_Bps(servers)
    alone = shard * min(s.gpus_per_server, par.num_gpus) / storage.per_server_Bps
    write = max(together, alone)
    bound = "per server" if alone > together else "storage total"
    copy = shard / s.pcie_bandwidth_Bps  # each GPU to host memory over its own PCIe link
    pause, lag = (copy, write) if policy.asynchronous else (write, 0.0)
    return Checkpoint(total_bytes=total, shard_bytes=shard, write_s=write, read_s=write, pause_s=pause, lag_s=lag,
                      bound=bound)


def young_interval(pause_s: float, mttf_s: float) -> float:
    """Young 1974: sqrt(2 C M)."""
    return math.sqrt(2 * pause_s * mttf_s)


def daly_interval(pause_s: float, mttf_s: float) -> float:
    """Daly 2006's higher-order optimum (module doc); M itself when C >= 2M."""
    c, m = pause_s, mttf_s
    if c >= 2 * m:
        return m
    x = c / (2 * m)
    return math.sqrt(2 * c * m) * (1 + math.sqrt(x) / 3 + x / 9) - c


def ettr(interval_s: float, pause_s: float, restart_s: float, mttf_s: float) -> float:
    """The share of wall time that trains (Daly 2006's complete model, module doc)."""
    tau, c, r, m = interval_s, pause_s, restart_s, mttf_s
    if not math.isfinite(m):
        return tau / (tau + c)
    return tau / (m * math.exp(r / m) * math.expm1((tau + c) / m))
