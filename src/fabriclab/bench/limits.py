"""What this machine can take: local ranks, memory for buffers, and numbers that must be finite.

Every benchmark checks its inputs against these before it starts a rank, so a typo such as `--np 100000`
or `--sizes 64GB` is one error line that states the limit, not a machine swapping itself to death or a
run that never ends. The limits are computed from the machine the command runs on (cores, physical
memory, a cgroup's memory.max where one is set) and the constants below, which were measured here.

Standard library only: the CLI checks its input with it before it imports torch.

Try it: `fabriclab collectives bench --np 100000` (one error line naming the limit).
"""

from __future__ import annotations

import math
import os
from pathlib import Path

GiB = 1 << 30
MiB = 1 << 20
# A local Gloo rank with torch loaded: ~176 MB resident measured (4 ranks of `collectives bench`, 1 KB
# buffers, forkserver); 256 MiB leaves room for Gloo's threads and buffers of its own.
RANK_MEMORY_BYTES = 256 * MiB
# Ranks per core beyond which a local run measures the scheduler, not the algorithm (and the start-up
# of every rank, ~2 s of CPU each, grows past the launcher's start-up allowance).
RANKS_PER_CORE = 32
# The share of the memory that the work of one command may plan to use (the rest: OS, other jobs).
MEMORY_SHARE = 0.75


def physical_memory_bytes() -> int:
    """Bytes of memory this process may use: physical memory, or a smaller cgroup limit."""
    total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    try:
        text = Path("/sys/fs/cgroup/memory.max").read_text().strip()
        if text.isdigit():
            total = min(total, int(text))
    except OSError:
        pass
    return total


def num_cores() -> int:
    """Cores this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def memory_budget_bytes() -> int:
    """The memory one command may plan to use (`MEMORY_SHARE` of `physical_memory_bytes`)."""
    return int(physical_memory_bytes() * MEMORY_SHARE)


def max_local_ranks() -> int:
    """Most ranks one machine may spawn: by cores (`RANKS_PER_CORE` each) and by memory per rank."""
    return max(1, min(RANKS_PER_CORE * num_cores(), memory_budget_bytes() // RANK_MEMORY_BYTES))


def check_local_ranks(num_ranks: int, option: str = "--np") -> None:
    """ValueError unless 1 <= num_ranks <= `max_local_ranks()`; the message states the limit and why."""
    if num_ranks < 1:
        raise ValueError(f"{option} {num_ranks}: give at least 1 rank")
    limit = max_local_ranks()
    if num_ranks > limit:
        raise ValueError(f"{option} {num_ranks}: at most {limit} local ranks on this machine ({num_cores()} "
                         f"cores x {RANKS_PER_CORE}, {_gib(memory_budget_bytes())} usable memory at "
                         f"{RANK_MEMORY_BYTES // MiB} MiB per rank); run more ranks across hosts with "
                         f"torchrun, Slurm or mpirun")


def check_memory(needed_bytes: float, what: str, change: str) -> None:
    """ValueError when `what` needs more than `memory_budget_bytes()`; `change` says what to lower."""
    budget = memory_budget_bytes()
    if needed_bytes > budget:
        raise ValueError(f"{what} needs about {_gib(needed_bytes)} of memory, more than the "
                         f"{_gib(budget)} this machine can give ({MEMORY_SHARE:.0%} of "
                         f"{_gib(physical_memory_bytes())}): {change}")


def check_number(value: float, option: str, *, minimum: float | None = None, above: float | None = None,
                 maximum: float | None = None) -> float:
    """`value` if it is finite and within the bounds (`above` is exclusive); else a ValueError."""
    if not math.isfinite(value):
        raise ValueError(f"{option} {value}: give a finite number")
    if minimum is not None and value < minimum:
        raise ValueError(f"{option} {value:g}: give a number >= {minimum:g}")
    if above is not None and not value > above:
        raise ValueError(f"{option} {value:g}: give a number > {above:g}")
    if maximum is not None and value > maximum:
        raise ValueError(f"{option} {value:g}: give a number <= {maximum:g}")
    return value


def _gib(num_bytes: float) -> str:
    return f"{num_bytes / GiB:.1f} GiB"
