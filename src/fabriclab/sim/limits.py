"""What one simulation may ask of this machine, checked before any work: ranks, sizes, messages.

The cost of a simulation grows with its messages, and how they grow depends on the algorithm (a ring
sends 2P(P-1) messages, a butterfly about 2P log2 P, a parameter server with P/8 servers P^2/4 at
once). `check_simulation` counts the messages of the same collective at 32 and 64 ranks (cheap: the
array form or the schedule itself), fits the power law through the two and checks the estimate for the
asked rank count against what this machine holds (24 GiB):

* the schedule path (algorithms without an array form) keeps every message as Python objects:
  about 550 bytes and 20 us each (measured: ring allgather on 1024 ranks, 1.05 M messages, 584 MB,
  19 s), so at most MAX_SCHEDULE_MESSAGES;
* the level engine keeps one level at a time: about 440 bytes per transfer of the widest level
  (measured: parameter server on 4096 ranks, 2.1 M transfers per level, 921 MB), so at most
  MAX_LEVEL_TRANSFERS in one level, and MAX_LEVEL_MESSAGES in all (a ring on 16384 ranks, 537 M
  messages, takes 30 s).

The power law over-estimates algorithms that grow like P log P, which errs on the safe side.

Try it: `fabriclab simulate collective --algo direct --topology star --hosts 65536` (refused at once).
"""

from __future__ import annotations

import math
from functools import lru_cache

import numpy as np

from fabriclab.collectives import vectorized

MAX_SIZE_BYTES = 1 << 50
MAX_SCHEDULE_MESSAGES = 4_000_000
MAX_LEVEL_TRANSFERS = 16_000_000
MAX_LEVEL_MESSAGES = 1 << 30
MAX_RANKS_UNPROBED = 4096
_SMALL = (32, 64)


def check_inputs(size_bytes: int, itemsize: int, gamma_s_per_byte: float) -> None:
    """Size, element size and reduction cost: a ValueError says what to change."""
    if isinstance(itemsize, bool) or not isinstance(itemsize, (int, np.integer)) or not 1 <= itemsize <= 64:
        raise ValueError(f"itemsize {itemsize!r}: give the bytes of one element, 1..64 (4 = float32)")
    if not isinstance(size_bytes, (int, np.integer)) or size_bytes < itemsize:
        raise ValueError(f"size {size_bytes} B: give at least one element ({itemsize} B)")
    if size_bytes > MAX_SIZE_BYTES:
        raise ValueError(f"size {size_bytes} B: at most 1PB (2^50 B) is simulated")
    if size_bytes % itemsize:
        raise ValueError(f"size {size_bytes} B is not a whole number of {itemsize}-byte elements: give a "
                         f"multiple of {itemsize} B, e.g. {size_bytes - size_bytes % itemsize or itemsize} B")
    check_gamma(gamma_s_per_byte)


# A reduction slower than 1 ms per byte (1 kB/s) is no processor's: a GPU adds about 1e-12 s per byte, one CPU
# core about 1e-10 (the shipped V100 table: 3.6e-12 at 640 MiB). Larger values only overflow the simulation.
MAX_GAMMA_S_PER_BYTE = 1e-3


def check_gamma(gamma_s_per_byte: float, option: str = "gamma") -> float:
    """A reduction cost in [0, MAX_GAMMA_S_PER_BYTE] seconds per byte; a ValueError naming `option`."""
    if not (isinstance(gamma_s_per_byte, (int, float, np.floating)) and not isinstance(gamma_s_per_byte, bool)
            and math.isfinite(gamma_s_per_byte) and 0 <= gamma_s_per_byte <= MAX_GAMMA_S_PER_BYTE):
        raise ValueError(f"{option} {gamma_s_per_byte!r}: give a reduction cost in seconds per byte from 0 to "
                         f"{MAX_GAMMA_S_PER_BYTE:g}, e.g. 0 or 1e-10 (a GPU adds at about 1e-12)")
    return gamma_s_per_byte


@lru_cache(maxsize=256)
def _counts_at(collective: str, algo: str, num_ranks: int, count: int) -> tuple[int, int, bool]:
    """(messages, widest level, has an array form) of the collective at a small rank count (kept: a plan asks
    the same few again for every topology)."""
    arrays = vectorized.rounds(collective, algo, num_ranks, count)
    if arrays is not None:
        widths = [r[0].size for r in arrays]
        return sum(widths), max(widths, default=0), True
    from fabriclab.collectives.registry import build_schedule
    from fabriclab.collectives.schedule import SEND

    schedule = build_schedule(collective, algo, num_ranks, count)
    per_step: dict[int, int] = {}
    for steps in schedule.steps:
        for k, step in enumerate(steps):
            per_step[k] = per_step.get(k, 0) + sum(op.kind == SEND for op in step)
    return sum(per_step.values()), max(per_step.values(), default=0), False


def _extrapolate(small: tuple[int, int], values: tuple[int, int], num_ranks: int) -> float:
    (p0, p1), (v0, v1) = small, values
    if v0 <= 0 or v1 <= 0:
        return float(v1)
    exponent = max(math.log(v1 / v0) / math.log(p1 / p0), 1.0)
    return v1 * (num_ranks / p1) ** exponent


def check_simulation(collective: str, algo: str, num_ranks: int, count: int, engine: str = "auto") -> None:
    """Refuse (ValueError, limits stated) a simulation too large for this machine, before building it."""
    if num_ranks <= _SMALL[1]:
        return
    try:
        small = [_counts_at(collective, algo, p, max(1, count * p // num_ranks)) for p in _SMALL]
    except ValueError:  # parameters that need more ranks than the probe has (e.g. group=100)
        if num_ranks > MAX_RANKS_UNPROBED:
            raise ValueError(f"{collective} {algo} on {num_ranks} ranks: its size could not be estimated; "
                             f"at most {MAX_RANKS_UNPROBED} ranks are simulated then") from None
        return
    messages = _extrapolate(_SMALL, (small[0][0], small[1][0]), num_ranks)
    widest = _extrapolate(_SMALL, (small[0][1], small[1][1]), num_ranks)
    arrays = (engine != "general" and small[1][2]
              and vectorized.rounds(collective, algo, num_ranks, count) is not None)
    what = f"{collective} {algo} on {num_ranks} ranks sends about {messages:.3g} messages"
    if not arrays and messages > MAX_SCHEDULE_MESSAGES:
        raise ValueError(f"{what}: this algorithm is simulated message by message (about 550 bytes and "
                         f"20 us each), at most {MAX_SCHEDULE_MESSAGES:,} messages on this machine; give "
                         f"fewer ranks, or ring / parameter-server, which scale further")
    if arrays and widest > MAX_LEVEL_TRANSFERS:
        raise ValueError(f"{what}, about {widest:.3g} at once: at most {MAX_LEVEL_TRANSFERS:,} in one "
                         f"round fit this machine's 24 GiB (about 440 bytes each); give fewer ranks or "
                         f"fewer servers")
    if arrays and messages > MAX_LEVEL_MESSAGES:
        raise ValueError(f"{what}: at most {MAX_LEVEL_MESSAGES:,} (about a minute here; a ring on "
                         f"16384 ranks sends 537 M); give fewer ranks")
