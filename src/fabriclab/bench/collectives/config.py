"""The collectives benchmark's configuration and its checks, without torch (`bench.collectives` runs it).

`BenchConfig` refuses, before any rank starts: unknown collectives, dtypes, reduce ops and algorithms (an
all-to-all has no schedule here: only `native`, the backend's own `all_to_all_single`);
sizes that are not a whole number of elements of the dtype (6 B of int32 would silently measure 4 B);
more local ranks than this machine can hold (`bench.limits`); buffers that would not fit its memory;
timeouts and iteration counts that are not finite positive numbers, and a cap on repetition
(`max_iters`, `max_time_s`, `bench.noise`) below what one round takes.

Try it: `fabriclab collectives bench --dtype int32 --sizes 6B` (one error line: 6 B is not whole int32s).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

from fabriclab.bench.limits import check_local_ranks, check_memory
from fabriclab.bench.noise import NoiseRule, RepeatCap
from fabriclab.bench.schedule_limits import schedule_work
from fabriclab.collectives.matching import DEFAULT_SEGMENT_BYTES
from fabriclab.collectives.schedule import ALLTOALL, COLLECTIVES, SENDRECV
from fabriclab.runtime.environment import resolve_backend
from fabriclab.units import format_size

NATIVE = "native"
# Bytes per element of every dtype the benchmark runs (the torch dtypes of `runtime.executor.DTYPES`).
DTYPE_SIZES = {"float32": 4, "float16": 2, "bfloat16": 2, "int32": 4, "int64": 8}
REDOPS = ("sum", "max", "min")
# Exchanges no schedule implements, timed as the backend's own call (nccl-tests' alltoall_perf and
# sendrecv_perf).
NATIVE_ONLY = (ALLTOALL, SENDRECV)
BENCH_OPS = COLLECTIVES + NATIVE_ONLY
NATIVE_CALLS = {ALLTOALL: "torch.distributed.all_to_all_single", SENDRECV: "torch.distributed.batch_isend_irecv"}
COLUMNS = ("algo", "size_bytes", "count", "dtype", "redop", "root", "time_us", "algbw_GBps", "busbw_GBps",
           "num_wrong")
# Buffers of the largest size one rank holds at once: its input, the expected result, the working
# buffer, the executor's receive temporaries and the comparison's mask (counted as a whole buffer).
BUFFERS_PER_RANK = 6
MAX_ITERS = 1_000_000


@dataclass(frozen=True, kw_only=True)
class BenchConfig:
    """One benchmark run: algorithms x sizes of one collective."""

    algos: tuple[str, ...] = ("ring", "butterfly", NATIVE)
    """Algorithm specs (`ring`, `chain:chunks=8`, ...) or `native` for the backend's own collective."""
    op: str = "allreduce"
    """allreduce, reduce, broadcast, reduce_scatter, allgather, or alltoall and sendrecv (`native` only)."""
    sizes_bytes: tuple[int, ...] = (1 << 10, 1 << 20)
    """Buffer sizes, each a whole number of elements of `dtype`."""
    dtype: str = "float32"
    """Element type: float32, float16, bfloat16, int32 or int64."""
    redop: str = "sum"
    """Reduction: sum, max or min (unused by broadcast and allgather)."""
    root: int = 0
    """Root rank of reduce and broadcast."""
    iters: int = 20
    """Timed iterations per algorithm and size in the first round, and at most this many in each later one."""
    warmup: int = 5
    """Untimed iterations before them."""
    max_iters: int | None = None
    """Cap on timed iterations per algorithm and size: rounds of `iters` repeat until the fastest algorithm
    is clear of the others (`bench.noise`), or this cap or `max_time_s` is reached. None (or `iters`): one
    round, no repetition, as callers that time on their own terms (`bench.validate`) need; the commands
    that name a winner ask for repetition (`cli/collectives/bench.py`)."""
    max_time_s: float = 3.0
    """Cap on the seconds of timing one size (the first round always runs in full)."""
    confidence: float = 0.95
    """Probability that each algorithm's interval holds its median time (`bench.noise`)."""
    resolution: float = 0.02
    """Relative half-width under which algorithms within noise of each other stop being repeated."""
    num_ranks: int = 4
    """Local ranks to spawn (a torchrun/Slurm/MPI launch brings its own)."""
    timeout_s: float = 60.0
    """Longest wait for a missing or stuck rank before the run fails naming it."""
    segment_bytes: int = DEFAULT_SEGMENT_BYTES
    """Message size the executor cuts chunks into on CPU (pipelining); see `runtime.executor`."""
    device: str = "cpu"
    """Where the buffers live: cpu, or cuda (each rank on the GPU of its local rank)."""
    backend: str | None = None
    """torch.distributed backend: gloo, nccl or mpi; None follows the device (nccl on cuda, gloo on cpu)."""

    def __post_init__(self) -> None:
        if self.op not in BENCH_OPS:
            raise ValueError(f"unknown collective {self.op!r}: use one of {', '.join(BENCH_OPS)}")
        if self.dtype not in DTYPE_SIZES:
            raise ValueError(f"unknown dtype {self.dtype!r}: use one of {', '.join(DTYPE_SIZES)}")
        if self.redop not in REDOPS:
            raise ValueError(f"unknown reduce op {self.redop!r}: use one of {', '.join(REDOPS)}")
        if self.num_ranks < 1:
            raise ValueError(f"number of ranks must be >= 1, got {self.num_ranks}")
        check_local_ranks(self.num_ranks)
        if not 0 <= self.root < self.num_ranks:
            raise ValueError(f"root {self.root} is out of range for {self.num_ranks} ranks: "
                             f"use 0..{self.num_ranks - 1}")
        if not (1 <= self.iters <= MAX_ITERS and 0 <= self.warmup <= MAX_ITERS
                and self.repeat_cap.max_iters <= MAX_ITERS):
            raise ValueError(f"need iters >= 1 and warmup >= 0 (each at most {MAX_ITERS:,}, max iters too), got "
                             f"{self.iters}, {self.warmup} and {self.max_iters}")
        _ = self.repeat_cap, self.noise_rule  # building them checks them (iters <= max iters, finite time)
        if not (math.isfinite(self.timeout_s) and self.timeout_s > 0):
            raise ValueError(f"timeout {self.timeout_s}: give a finite number of seconds > 0")
        resolve_backend(self.device, self.backend)
        self._check_sizes()
        if not self.algos:
            raise ValueError("no algorithm given: use e.g. ring,butterfly,native")
        schedules = [a for a in self.algos if a != NATIVE]
        if self.op in NATIVE_ONLY and schedules:
            raise ValueError(f"{self.op} runs only as the backend's own collective ({NATIVE_CALLS[self.op]}); "
                             f"fabriclab has no {self.op} schedule such as {schedules[0]!r}: use --algo native")
        if len(set(self.algos)) < len(self.algos):
            raise ValueError(f"an algorithm is listed twice in {','.join(self.algos)}: list each once")
        for algo in self.algos:
            if algo != NATIVE:
                schedule_work(self.op, algo, self.num_ranks)

    @property
    def repeat_cap(self) -> RepeatCap:
        """How long one size may be repeated (`bench.noise`)."""
        cap = self.iters if self.max_iters is None else self.max_iters
        return RepeatCap(round_iters=self.iters, max_iters=cap, max_time_s=self.max_time_s)

    @property
    def noise_rule(self) -> NoiseRule:
        """When one algorithm's time is clear of another's (`bench.noise`)."""
        return NoiseRule(confidence=self.confidence, resolution=self.resolution)

    def _check_sizes(self) -> None:
        itemsize = self.itemsize
        if not self.sizes_bytes or min(self.sizes_bytes) < 0:
            raise ValueError("sizes must be a non-empty list of byte counts >= 0, e.g. 1KB:16MB")
        partial = [s for s in self.sizes_bytes if s % itemsize]
        if partial:
            raise ValueError(f"size {format_size(partial[0])} is not a whole number of {self.dtype} elements "
                             f"({itemsize} B each): give sizes that are multiples of {itemsize} B, e.g. "
                             f"{format_size(max(itemsize, partial[0] // itemsize * itemsize))}")
        if self.segment_bytes < itemsize:
            raise ValueError(f"segment size {self.segment_bytes} B is below one {self.dtype} element "
                             f"({itemsize} B): give at least {itemsize} B, e.g. 4MB")
        largest = max(self.sizes_bytes)
        check_memory(BUFFERS_PER_RANK * largest * self.num_ranks,
                     f"{format_size(largest)} buffers on {self.num_ranks} local ranks "
                     f"({BUFFERS_PER_RANK} buffers per rank)", "give smaller --sizes or fewer --np")

    @property
    def itemsize(self) -> int:
        """Bytes per element of `dtype`."""
        return DTYPE_SIZES[self.dtype]


def config_dict(config: BenchConfig) -> dict:
    """The config as plain data, for a record."""
    return asdict(config)
