"""A collective algorithm as data: per-rank ordered steps of point-to-point operations on chunks.

A `Schedule` is what every algorithm in `fabriclab.collectives` returns. The same object is
verified symbolically (`verify.py`), executed for real (`fabriclab.runtime.executor`) and simulated
(`fabriclab.sim`), so its semantics are the contract between those layers:

* The buffer is a flat array of `count` elements. A *chunk* is a contiguous element range
  `(offset, length)` of it; ops name a chunk by its index in `Schedule.chunks`. Chunks of one schedule
  may overlap (a hierarchical schedule mixes the chunkings of its phases).
* Each rank runs its *steps* in order. At the start of a step the rank posts all of the step's
  operations at once: sends carry the chunk's value as it is at the start of the step; receives land in
  temporaries. The step ends when all its operations are complete; then receives are applied in op
  order: `recv_reduce` combines the received value into the chunk, `recv_copy` overwrites it.
* Messages between an ordered pair of ranks match in FIFO order (as in MPI): the k-th `send` from a to
  b pairs with the k-th receive at b from a, and both must name the same chunk.
* A send completes only when its receive is posted (rendezvous), so the verifier's deadlock check holds
  for any backend, buffered or not.

Try it: `fabriclab collectives show --algo ring --ranks 4`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Iterable

SEND = "send"
RECV_REDUCE = "recv_reduce"
RECV_COPY = "recv_copy"
OP_KINDS = (SEND, RECV_REDUCE, RECV_COPY)

ALLREDUCE = "allreduce"
REDUCE = "reduce"
BROADCAST = "broadcast"
REDUCE_SCATTER = "reduce_scatter"
ALLGATHER = "allgather"
COLLECTIVES = (ALLREDUCE, REDUCE, BROADCAST, REDUCE_SCATTER, ALLGATHER)
ALLTOALL = "alltoall"  # every pair exchanges a block: nccl-tests' alltoall_perf (no schedule here yet)
SENDRECV = "sendrecv"  # rank r sends to r+1 and receives from r-1: nccl-tests' sendrecv_perf (no schedule)

# busbw = algbw * factor, beside each collective, as nccl-tests' PERFORMANCE.md defines it (one file per
# collective there): the factor makes busbw comparable with the link speed whatever the rank count n.
# reduce_scatter, allgather and alltoall take algbw from the total size.
BUS_FACTORS = {
    ALLREDUCE: lambda n: 2 * (n - 1) / n,
    REDUCE_SCATTER: lambda n: (n - 1) / n,
    ALLGATHER: lambda n: (n - 1) / n,
    ALLTOALL: lambda n: (n - 1) / n,
    REDUCE: lambda n: 1.0,
    BROADCAST: lambda n: 1.0,
    SENDRECV: lambda n: 1.0,  # nccl-tests src/sendrecv.cu SendRecvGetBw: factor = 1
}


def bus_bandwidth_factor(collective: str, num_ranks: int) -> float:
    """busbw / algbw for `collective` on `num_ranks` ranks (nccl-tests' PERFORMANCE.md)."""
    if collective not in BUS_FACTORS:
        raise ValueError(f"unknown collective {collective!r}: use one of {', '.join(BUS_FACTORS)}")
    return BUS_FACTORS[collective](num_ranks)

SCHEMA_VERSION = 1


@dataclass(frozen=True, slots=True)
class Op:
    """One point-to-point operation of one rank."""

    kind: str
    """One of `send`, `recv_reduce`, `recv_copy`."""
    peer: int
    """The rank on the other end."""
    chunk: int
    """Index into `Schedule.chunks`."""

    @property
    def is_recv(self) -> bool:
        return self.kind != SEND


@dataclass(frozen=True, kw_only=True)
class Schedule:
    """Per-rank steps of operations that together perform one collective on a flat buffer."""

    collective: str
    """What the schedule computes: allreduce, reduce, broadcast, reduce_scatter or allgather."""
    algorithm: str
    """The algorithm spec that built it, e.g. `ring` or `hierarchical:lower=chain:upper=binomial`."""
    num_ranks: int
    """Number of ranks taking part; ranks are 0..num_ranks-1."""
    count: int
    """Number of elements in the flat buffer."""
    root: int = 0
    """Root rank for reduce and broadcast (0 and unused otherwise)."""
    chunks: tuple[tuple[int, int], ...] = ()
    """Element ranges `(offset, length)` that ops refer to by index."""
    steps: tuple[tuple[tuple[Op, ...], ...], ...] = ()
    """`steps[rank][i]` is the i-th step of `rank`: operations posted together."""

    def __post_init__(self) -> None:
        assert len(self.steps) == self.num_ranks, "one step list per rank"

    # -- views -------------------------------------------------------------------------------
    def ops(self, rank: int) -> Iterable[Op]:
        for step in self.steps[rank]:
            yield from step

    @property
    def num_messages(self) -> int:
        return sum(op.kind == SEND for r in range(self.num_ranks) for op in self.ops(r))

    @property
    def max_steps(self) -> int:
        return max((len(s) for s in self.steps), default=0)

    def chunk_length(self, index: int) -> int:
        return self.chunks[index][1]

    def elements_sent(self, rank: int) -> int:
        return sum(self.chunks[op.chunk][1] for op in self.ops(rank) if op.kind == SEND)

    def total_elements_sent(self) -> int:
        return sum(self.elements_sent(r) for r in range(self.num_ranks))

    # -- JSON --------------------------------------------------------------------------------
    def to_dict(self) -> dict:
        return {
            "schema": SCHEMA_VERSION,
            "collective": self.collective,
            "algorithm": self.algorithm,
            "num_ranks": self.num_ranks,
            "count": self.count,
            "root": self.root,
            "chunks": [list(c) for c in self.chunks],
            "steps": [
                [[[op.kind, op.peer, op.chunk] for op in step] for step in rank_steps]
                for rank_steps in self.steps
            ],
        }

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), separators=(",", ":"))

    @classmethod
    def from_dict(cls, data: dict) -> "Schedule":
        try:
            if data.get("schema") != SCHEMA_VERSION:
                raise ValueError(f"schema {data.get('schema')!r}, expected {SCHEMA_VERSION}")
            if data["collective"] not in COLLECTIVES:
                raise ValueError(f"collective {data['collective']!r} is not one of {COLLECTIVES}")
            num_ranks = int(data["num_ranks"])
            steps = tuple(
                tuple(tuple(Op(str(k), int(p), int(c)) for k, p, c in step) for step in rank_steps)
                for rank_steps in data["steps"]
            )
            if len(steps) != num_ranks:
                raise ValueError(f"{len(steps)} step lists for {num_ranks} ranks")
            for rank_steps in steps:
                for step in rank_steps:
                    for op in step:
                        if op.kind not in OP_KINDS:
                            raise ValueError(f"op kind {op.kind!r} is not one of {OP_KINDS}")
            return cls(
                collective=data["collective"],
                algorithm=str(data["algorithm"]),
                num_ranks=num_ranks,
                count=int(data["count"]),
                root=int(data.get("root", 0)),
                chunks=tuple((int(o), int(n)) for o, n in data["chunks"]),
                steps=steps,
            )
        except (KeyError, TypeError) as exc:
            raise ValueError(f"not a fabriclab schedule: missing or malformed field ({exc})") from None

    @classmethod
    def from_json(cls, text: str) -> "Schedule":
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise ValueError(f"schedule file is not valid JSON: {exc}") from None
        return cls.from_dict(data)


def split_counts(count: int, parts: int) -> list[int]:
    """Balanced split of `count` elements into `parts` blocks; the first `count % parts` get one more.

    This is the block layout of reduce_scatter and allgather (block r belongs to rank r)."""
    base, extra = divmod(count, parts)
    return [base + (1 if i < extra else 0) for i in range(parts)]


def split_range(offset: int, length: int, parts: int) -> list[tuple[int, int]]:
    """`(offset, length)` ranges of a balanced split of a range into `parts` contiguous pieces."""
    out, pos = [], offset
    for n in split_counts(length, parts):
        out.append((pos, n))
        pos += n
    return out


@dataclass
class Builder:
    """Mutable helper that algorithms use to emit a `Schedule`.

    `step(rank)` opens a new step for a rank and returns a writer for its ops, which name chunks by
    element range `(offset, length)`. `build()` drops operations on empty chunks and empty steps, so algorithms may be
    written for the general case and still work for counts smaller than the number of ranks."""

    num_ranks: int
    count: int
    _steps: list[list[list[tuple[str, int, tuple[int, int]]]]] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._steps = [[] for _ in range(self.num_ranks)]

    def step(self, rank: int) -> "StepWriter":
        ops: list = []
        self._steps[rank].append(ops)
        return StepWriter(ops)

    def extend(self, other: "Builder") -> None:
        """Append every rank's steps of `other` after this builder's (a later phase)."""
        for rank in range(self.num_ranks):
            self._steps[rank].extend(other._steps[rank])

    def merge_stepwise(self, others: list["Builder"]) -> None:
        """Append the steps of several builders, merged so that their i-th steps run together."""
        for rank in range(self.num_ranks):
            lists = [o._steps[rank] for o in others]
            for i in range(max((len(x) for x in lists), default=0)):
                merged = [op for x in lists if i < len(x) for op in x[i]]
                self._steps[rank].append(merged)

    def build(self, collective: str, algorithm: str, root: int = 0) -> Schedule:
        used = sorted({rng for rank_steps in self._steps for step in rank_steps for _, _, rng in step
                       if rng[1] > 0})
        index = {rng: i for i, rng in enumerate(used)}
        steps = []
        for rank_steps in self._steps:
            out = []
            for step in rank_steps:
                ops = tuple(Op(k, p, index[rng]) for k, p, rng in step if rng[1] > 0)
                if ops:
                    out.append(ops)
            steps.append(tuple(out))
        return Schedule(collective=collective, algorithm=algorithm, num_ranks=self.num_ranks,
                        count=self.count, root=root, chunks=tuple(used), steps=tuple(steps))


@dataclass
class StepWriter:
    """The ops of one open step; chunks are element ranges `(offset, length)`."""

    _ops: list

    def send(self, peer: int, rng: tuple[int, int]) -> "StepWriter":
        self._ops.append((SEND, peer, rng))
        return self

    def recv_reduce(self, peer: int, rng: tuple[int, int]) -> "StepWriter":
        self._ops.append((RECV_REDUCE, peer, rng))
        return self

    def recv_copy(self, peer: int, rng: tuple[int, int]) -> "StepWriter":
        self._ops.append((RECV_COPY, peer, rng))
        return self
