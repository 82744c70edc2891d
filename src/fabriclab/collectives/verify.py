"""Symbolic verification of a `Schedule`: no data is moved, only sets of contributions.

The state of every rank is, per atomic segment of the buffer (the common refinement of all chunks),
the set of ranks whose input it holds the combination of (a bitmask), or `None` when the rank holds no
valid data there. The verifier replays the schedule under its rendezvous semantics (see `schedule.py`)
and reports, with the rank, step and op:

* deadlock (no rank can finish its current step), unmatched sends or receives left at the end;
* a matched send/receive pair that names different chunks, a peer out of range or the rank itself;
* a send of data the rank does not hold, a reduce into a chunk that holds nothing;
* a contribution counted twice (a reduce of two sets that intersect);
* an end state that is not the collective's (e.g. a rank of an allreduce missing a contribution).

Try it: `fabriclab collectives verify --algo all --ranks 1-64`.
"""

from __future__ import annotations

import bisect
import itertools
from collections import defaultdict
from dataclasses import dataclass, field

from fabriclab.collectives.schedule import (ALLGATHER, ALLREDUCE, BROADCAST, COLLECTIVES, REDUCE,
                                            REDUCE_SCATTER, SEND, RECV_REDUCE, Schedule, split_counts)

MAX_ERRORS = 10


@dataclass
class Verification:
    """Outcome of `verify`."""

    ok: bool
    errors: list[str] = field(default_factory=list)
    num_steps: int = 0
    num_messages: int = 0
    trace: list[str] = field(default_factory=list)


def _segments(schedule: Schedule) -> tuple[list[int], list[range]]:
    """Boundaries of the atomic segments and, per chunk, the segment indices it covers."""
    cuts = {0, schedule.count}
    for off, n in schedule.chunks:
        cuts.update((off, off + n))
    if schedule.collective in (REDUCE_SCATTER, ALLGATHER):
        # Block edges too, so that every segment has a single owner.
        cuts.update(itertools.accumulate(split_counts(schedule.count, schedule.num_ranks)))
    bounds = sorted(cuts)
    covers = []
    for off, n in schedule.chunks:
        lo = bisect.bisect_left(bounds, off)
        hi = bisect.bisect_left(bounds, off + n)
        covers.append(range(lo, hi))
    return bounds, covers


def _initial_state(s: Schedule, bounds: list[int]) -> list[list[int | None]]:
    num_seg = len(bounds) - 1
    starts = bounds[:-1]
    if s.collective in (ALLREDUCE, REDUCE, REDUCE_SCATTER):
        return [[1 << r] * num_seg for r in range(s.num_ranks)]
    if s.collective == BROADCAST:
        return [[(1 << s.root) if r == s.root else None] * num_seg for r in range(s.num_ranks)]
    owner = _block_owner(s, starts)
    return [[(1 << r) if owner[i] == r else None for i in range(num_seg)] for r in range(s.num_ranks)]


def _block_owner(s: Schedule, starts: list[int]) -> list[int]:
    """Owner rank of each segment under the reduce_scatter/allgather block layout."""
    block_ends, pos = [], 0
    for n in split_counts(s.count, s.num_ranks):
        pos += n
        block_ends.append(pos)
    return [bisect.bisect_right(block_ends, start) for start in starts]


def _expected(s: Schedule, bounds: list[int]) -> list[list[int | None]]:
    """Required end state; `None` entries are unconstrained."""
    full = (1 << s.num_ranks) - 1
    num_seg = len(bounds) - 1
    if s.collective == ALLREDUCE:
        return [[full] * num_seg for _ in range(s.num_ranks)]
    if s.collective == REDUCE:
        return [[full if r == s.root else None] * num_seg for r in range(s.num_ranks)]
    if s.collective == BROADCAST:
        return [[1 << s.root] * num_seg for _ in range(s.num_ranks)]
    owner = _block_owner(s, bounds[:-1])
    if s.collective == REDUCE_SCATTER:
        return [[full if owner[i] == r else None for i in range(num_seg)] for r in range(s.num_ranks)]
    return [[1 << owner[i] for i in range(num_seg)] for _ in range(s.num_ranks)]


def _names(mask: int | None) -> str:
    if mask is None:
        return "nothing"
    ranks = [i for i in range(mask.bit_length()) if mask >> i & 1]
    return "{" + ",".join(map(str, ranks)) + "}"


def _static_errors(s: Schedule) -> list[str]:
    errors = []
    if s.collective not in COLLECTIVES:
        errors.append(f"unknown collective {s.collective!r}")
    if s.num_ranks < 1 or s.count < 0:
        errors.append(f"num_ranks {s.num_ranks} must be >= 1 and count {s.count} >= 0")
    if not 0 <= s.root < max(s.num_ranks, 1):
        errors.append(f"root {s.root} is not a rank of {s.num_ranks}")
    for i, (off, n) in enumerate(s.chunks):
        if off < 0 or n < 0 or off + n > s.count:
            errors.append(f"chunk {i} [{off}:{off + n}] lies outside the buffer of {s.count} elements")
    for r in range(s.num_ranks):
        for k, step in enumerate(s.steps[r]):
            for op in step:
                if not 0 <= op.peer < s.num_ranks or op.peer == r:
                    errors.append(f"rank {r} step {k}: peer {op.peer} is not another rank")
                if not 0 <= op.chunk < len(s.chunks):
                    errors.append(f"rank {r} step {k}: chunk {op.chunk} does not exist")
    return errors


def verify(schedule: Schedule, trace: bool = False) -> Verification:
    """Replay `schedule` symbolically and check it performs its collective; see the module doc."""
    s = schedule
    result = Verification(ok=False, num_steps=s.max_steps, num_messages=s.num_messages)
    result.errors = _static_errors(s)
    if result.errors:
        return result
    bounds, covers = _segments(s)
    state = _initial_state(s, bounds)
    errors = result.errors

    # Per ordered pair: the values sent so far (snapshots) and how many receives were posted.
    sent: dict[tuple[int, int], list] = defaultdict(list)
    posted_recvs: dict[tuple[int, int], int] = defaultdict(int)
    step_index = [0] * s.num_ranks
    # Per rank, for its current step: [(op, sequence number on its pair)].
    current: list[list] = [[] for _ in range(s.num_ranks)]

    def post(r: int) -> None:
        k = step_index[r]
        current[r] = []
        if k >= len(s.steps[r]):
            return
        for op in s.steps[r][k]:
            if op.kind == SEND:
                pair = (r, op.peer)
                value = [state[r][g] for g in covers[op.chunk]]
                if any(v is None for v in value):
                    errors.append(f"rank {r} step {k}: sends chunk {op.chunk} to rank {op.peer} "
                                  f"but does not hold all of it yet")
                current[r].append((op, len(sent[pair])))
                sent[pair].append((op.chunk, value))
            else:
                pair = (op.peer, r)
                current[r].append((op, posted_recvs[pair]))
                posted_recvs[pair] += 1

    def ready(r: int) -> bool:
        for op, seq in current[r]:
            if op.kind == SEND:
                if posted_recvs[(r, op.peer)] <= seq:
                    return False
            elif len(sent[(op.peer, r)]) <= seq:
                return False
        return True

    def complete(r: int) -> None:
        k = step_index[r]
        for op, seq in current[r]:
            if op.kind == SEND:
                continue
            chunk, value = sent[(op.peer, r)][seq]
            where = f"rank {r} step {k}: {op.kind} chunk {op.chunk} from rank {op.peer}"
            if chunk != op.chunk:
                errors.append(f"{where}: the matching send names chunk {chunk}")
                continue
            for g, v in zip(covers[op.chunk], value):
                if op.kind == RECV_REDUCE:
                    mine = state[r][g]
                    if mine is None or v is None:
                        errors.append(f"{where}: reduces into or from data not held")
                    elif mine & v:
                        errors.append(f"{where}: counts contributions {_names(mine & v)} twice")
                    else:
                        state[r][g] = mine | v
                else:
                    state[r][g] = v
        if trace:
            held = " ".join(f"[{bounds[g]}:{bounds[g + 1]}]={_names(m)}" for g, m in enumerate(state[r]))
            result.trace.append(f"rank {r} after step {k}: {held}")
        step_index[r] += 1
        post(r)

    for r in range(s.num_ranks):
        post(r)
    active = [r for r in range(s.num_ranks) if step_index[r] < len(s.steps[r])]
    while active and len(errors) < MAX_ERRORS:
        progressed = False
        for r in active:
            if ready(r):
                complete(r)
                progressed = True
        active = [r for r in active if step_index[r] < len(s.steps[r])]
        if not progressed:
            blocked = ", ".join(f"rank {r} at step {step_index[r]}" for r in active[:8])
            errors.append(f"deadlock: no rank can finish its step ({blocked})")
            break
    if errors:
        result.errors = errors[:MAX_ERRORS]
        return result
    for pair, values in sent.items():
        if len(values) != posted_recvs[pair]:
            errors.append(f"rank {pair[0]} sends {len(values)} messages to rank {pair[1]}, "
                          f"which receives {posted_recvs[pair]}")
    expected = _expected(s, bounds)
    for r in range(s.num_ranks):
        for g, want in enumerate(expected[r]):
            if want is not None and state[r][g] != want and bounds[g + 1] > bounds[g]:
                errors.append(f"rank {r} ends with {_names(state[r][g])} in [{bounds[g]}:{bounds[g + 1]}], "
                              f"the {s.collective} needs {_names(want)}")
                break
    result.errors = errors[:MAX_ERRORS]
    result.ok = not errors
    return result
