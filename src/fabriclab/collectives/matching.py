"""What every interpreter of a `Schedule` shares below torch: how its ops become messages, and how sends
pair with receives.

* `compile_plan(schedule, rank, segment_elements)` is the schedule executor's plan for one rank
  (`fabriclab.runtime.executor` runs it over torch.distributed; `fabriclab.bench.validate.executor`
  simulates it): every chunk is cut into messages ("segments") of at most `segment_elements`, and each
  segment carries the hazards that order it (read-after-write for sends, write-after-read and write order
  for receives), so the executor may post a segment as soon as the data it depends on has arrived, across
  step boundaries, and still keep the schedule's semantics exactly (see `collectives/schedule.py`).
* `match_messages(...)` pairs the k-th send from rank a to rank b with the k-th receive at b from a
  (FIFO per ordered pair, the schedule's contract); the simulator matches a schedule's ops with it
  (`fabriclab.sim.collective.match_transfers`) and the executor model matches the plans' segments.

Standard library only; no torch.

Try it: `python -c "from fabriclab.collectives.matching import *; from fabriclab.collectives.registry import
build_schedule; print(compile_plan(build_schedule('allreduce', 'ring', 4, 16), 0, 2).segments[:3])"`.
"""

from __future__ import annotations

from bisect import bisect_right
from collections import defaultdict
from dataclasses import dataclass
from typing import Any, Iterable

from fabriclab.collectives.schedule import RECV_COPY, SEND, Schedule

# 4 MiB segments, measured with 4 ranks on 2 cores over Gloo/loopback (ring allreduce 64-256 MB, algorithms
# interleaved): each Gloo message costs ~30 us of CPU on the posting thread alone, so 1-2 MiB segments lose
# 5-15% to native all_reduce on a CPU-bound machine, while 4 MiB matched it; 8-16 MiB pipeline too little.
DEFAULT_SEGMENT_BYTES = 4 << 20


@dataclass(frozen=True, slots=True)
class Segment:
    """One message of one rank: a piece of an op's chunk, with what must happen before it."""

    is_send: bool
    """True for a send, False for a receive."""
    reduce: bool
    """For receives: combine into the chunk (`recv_reduce`) rather than overwrite it."""
    peer: int
    """The rank on the other end."""
    start: int
    """First element of the piece in the flat buffer."""
    stop: int
    """One past its last element."""
    tmp: int
    """Offset of the receive's temporary in the pool buffer; -1 receives straight into the tensor."""
    need: int
    """Number of receives (in apply order) that must be applied before this one is posted."""
    war: tuple[int, ...]
    """Sends (segment indices) that still read this range: they must complete before it is written."""


@dataclass(frozen=True, kw_only=True)
class RankPlan:
    """A rank's schedule compiled into segments; built once, run many times."""

    segments: tuple[Segment, ...]
    """Program order: per step, its receives then its sends."""
    applies: tuple[int, ...]
    """Receive segments in the order their values are applied (op order)."""
    step_starts: tuple[int, ...]
    """Index of the first segment of each step, plus the total, for step mode."""
    temp_elements: int
    """Elements of temporary space the plan uses (two step-sized regions)."""


class _Pieces:
    """Disjoint element ranges covering the buffer, each with (last apply index, sends reading it)."""

    def __init__(self, count: int) -> None:
        self.starts, self.vals = [0], [(-1, ())]
        self.count = count

    def _split(self, x: int) -> int:
        i = bisect_right(self.starts, x) - 1
        if self.starts[i] != x:
            i += 1
            self.starts.insert(i, x)
            self.vals.insert(i, self.vals[i - 1])
        return i

    def split_span(self, a: int, b: int) -> range:
        i = self._split(a)
        j = self._split(b) if b < self.count else len(self.starts)
        return range(i, j)


def compile_plan(schedule: Schedule, rank: int, segment_elements: int) -> RankPlan:
    """Cut `rank`'s steps into segments of at most `segment_elements` and work out their hazards."""
    if segment_elements < 1:
        raise ValueError(f"segments of {segment_elements} elements: give at least 1")
    pieces = _Pieces(max(schedule.count, 1))
    segs: list[Segment] = []
    applies: list[int] = []
    step_starts: list[int] = []
    applied_by_step: list[int] = []  # receives to apply before a step's temporaries may be reused
    region = 0
    steps = schedule.steps[rank]
    for step in steps:
        region = max(region, sum(schedule.chunks[op.chunk][1] for op in step if op.is_recv))
    for k, step in enumerate(steps):
        step_starts.append(len(segs))
        base = (k % 2) * region
        recvs, sends = [], []
        for i, op in enumerate(step):
            off, n = schedule.chunks[op.chunk]
            direct = op.kind == RECV_COPY and not any(
                j != i and _overlap(off, n, *schedule.chunks[other.chunk]) for j, other in enumerate(step))
            cut = [(off + a, off + min(n, a + segment_elements)) for a in range(0, n, segment_elements)]
            (sends if op.kind == SEND else recvs).append((op, cut, direct))
        reuse = applied_by_step[k - 2] if k >= 2 else 0
        first_send = len(segs) + sum(len(cut) for _, cut, _ in recvs)
        # Sends first: they read the start-of-step value, so only earlier steps' writes are waited for.
        send_segs = []
        for op, cut, _ in sends:
            for a, b in cut:
                idx = first_send + len(send_segs)
                span = pieces.split_span(a, b)
                need = 1 + max(pieces.vals[p][0] for p in span)
                for p in span:
                    last, reads = pieces.vals[p]
                    pieces.vals[p] = (last, reads + (idx,))
                send_segs.append(Segment(is_send=True, reduce=False, peer=op.peer, start=a, stop=b,
                                         tmp=-1, need=need, war=()))
        tmp = base
        for op, cut, direct in recvs:
            for a, b in cut:
                span = pieces.split_span(a, b)
                war = tuple(sorted({s for p in span for s in pieces.vals[p][1]}))
                if direct:
                    need = 1 + max(pieces.vals[p][0] for p in span)
                    seg = Segment(is_send=False, reduce=False, peer=op.peer, start=a, stop=b,
                                  tmp=-1, need=need, war=war)
                else:
                    seg = Segment(is_send=False, reduce=op.kind != RECV_COPY, peer=op.peer, start=a,
                                  stop=b, tmp=tmp, need=reuse, war=war)
                    tmp += b - a
                for p in span:
                    pieces.vals[p] = (len(applies), ())
                applies.append(len(segs))
                segs.append(seg)
        segs.extend(send_segs)
        applied_by_step.append(len(applies))
    step_starts.append(len(segs))
    return RankPlan(segments=tuple(segs), applies=tuple(applies), step_starts=tuple(step_starts),
                    temp_elements=2 * region if len(steps) > 1 else region)


def _overlap(a: int, n: int, b: int, m: int) -> bool:
    return a < b + m and b < a + n


def match_messages(messages: Iterable[tuple[int, int, bool, Any]]
                   ) -> list[tuple[tuple[int, int], list[Any], list[Any]]]:
    """Pair sends with receives, FIFO per ordered pair of ranks (the k-th send from a to b with the k-th
    receive at b from a), as MPI and Gloo match messages of one tag.

    `messages`: `(rank, peer, is_send, item)` in each rank's program order (ranks may interleave).
    Returns `((a, b), send items, receive items)` per ordered pair, equally long and in FIFO order, the
    pairs in order of their first send. Raises ValueError when a pair's counts differ."""
    sends: dict[tuple[int, int], list] = defaultdict(list)
    recvs: dict[tuple[int, int], list] = defaultdict(list)
    for rank, peer, is_send, item in messages:
        if is_send:
            sends[(rank, peer)].append(item)
        else:
            recvs[(peer, rank)].append(item)
    matched = []
    for pair in list(sends) + [p for p in recvs if p not in sends]:
        out, into = sends.get(pair, []), recvs.get(pair, [])
        if len(out) != len(into):
            raise ValueError(f"rank {pair[0]} sends {len(out)} messages to rank {pair[1]}, which receives "
                             f"{len(into)}: the schedule is inconsistent; check it with "
                             f"`fabriclab collectives verify`")
        matched.append((pair, out, into))
    return matched
