"""A workload as a graph per rank: compute operations and communication on named communicators.

One rank's training step is a list of operations with dependencies. A compute operation has FLOPs and a
duration (rooflined or measured); a communication operation names its communicator (`tp`, `cp`, `ep`,
`dp`, `pp`, or any name an imported trace gives), its collective (`allreduce`, `allgather`,
`reduce_scatter`, `alltoall`, `broadcast`, `reduce`, or `send` / `recv` with a peer rank), the bytes of
its buffer (nccl-tests' size: the whole buffer of an all-reduce, the gathered output of an all-gather)
and the size of its group. Operations of one stream run one after another in list order; across streams
they overlap, bounded only by their dependencies. The LLM simulator (`whatif/llm*`) writes such graphs,
the Chakra reader and writer (`workload/chakra.py`) translate them to and from ASTRA-sim's format.

Try it: `python -c "from fabriclab.workload.graph import Op, RankGraph;
print(RankGraph(rank=0, num_ranks=1, ops=(Op(id=0, name='mm', kind='compute', flops=1e12, duration_s=0.01),)))"`.
"""

from __future__ import annotations

import heapq
import math
from dataclasses import dataclass

KINDS = ("compute", "comm")
COLLECTIVES = ("allreduce", "allgather", "reduce_scatter", "alltoall", "broadcast", "reduce", "send", "recv",
               "barrier")
# comm: the gradient and parameter collectives (DP buckets, FSDP); overlap: collectives hidden behind the
# compute (TP overlap's userbuffers, CP's ring, EP with overlap); p2p: pipeline messages (Megatron's p2p ops)
STREAMS = ("compute", "comm", "overlap", "p2p")


@dataclass(frozen=True, kw_only=True)
class Op:
    """One operation of a rank's step."""

    id: int
    """Unique within the rank's graph."""
    name: str
    """What it is, e.g. `layer3.mlp.fwd` or `dp.reduce_scatter.bucket2`."""
    kind: str
    """`compute` or `comm`."""
    duration_s: float = 0.0
    """Compute: its time. Comm: the time predicted for it (0 when not yet costed)."""
    flops: float = 0.0
    """Compute: floating-point operations (2 x multiply-adds)."""
    memory_bytes: float = 0.0
    """Compute: bytes the operation reads and writes in device memory (weights, activations), for a roofline
    (Chakra's `tensor_size`)."""
    communicator: str = ""
    """Comm: the communicator (`tp`, `cp`, `ep`, `dp`, `pp`, ...)."""
    collective: str = ""
    """Comm: one of COLLECTIVES."""
    size_bytes: int = 0
    """Comm: the buffer in bytes (nccl-tests' size convention)."""
    group_size: int = 0
    """Comm: ranks in the communicator's group."""
    peer: int = -1
    """Comm send/recv: the other rank (global rank), else -1."""
    stream: str = "compute"
    """Ops of one stream run in list order: `compute`, `comm` (gradient buckets, FSDP gathers), `overlap`
    (collectives hidden behind the compute: TP overlap, CP's ring, EP with overlap) or `p2p` (pipeline
    messages)."""
    deps: tuple[int, ...] = ()
    """Ids of the operations that must end before this one starts."""

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"op {self.name!r}: kind {self.kind!r} is not one of {', '.join(KINDS)}")
        if self.kind == "comm" and self.collective not in COLLECTIVES:
            raise ValueError(f"op {self.name!r}: collective {self.collective!r} is not one of "
                             f"{', '.join(COLLECTIVES)}")
        if self.stream not in STREAMS:
            raise ValueError(f"op {self.name!r}: stream {self.stream!r} is not one of {', '.join(STREAMS)}")
        for name in ("duration_s", "flops", "memory_bytes", "size_bytes"):
            value = getattr(self, name)
            if not value >= 0 or isinstance(value, float) and math.isinf(value):  # NaN fails >= 0 (it printed "nan ms")
                raise ValueError(f"op {self.id} ({self.name!r}): {name} {value!r}: give a finite number >= 0")


@dataclass(frozen=True, kw_only=True)
class RankGraph:
    """The operations of one rank's step, dependencies pointing to earlier ids."""

    rank: int
    num_ranks: int
    ops: tuple[Op, ...]
    communicators: dict[str, list[int]] | None = None
    """Optional: each communicator's group of this rank (global ranks)."""

    def __post_init__(self) -> None:
        ids = {op.id for op in self.ops}
        if len(ids) != len(self.ops):
            raise ValueError(f"rank {self.rank}: operation ids are not unique")
        for op in self.ops:
            missing = [d for d in op.deps if d not in ids]
            if missing:
                raise ValueError(f"rank {self.rank}: op {op.id} ({op.name}) depends on unknown ids {missing}")

    def critical_path_s(self) -> float:
        """Step time of this rank alone: each op starts when its dependencies and the previous op of its
        stream have ended (ops are taken in list order; an imported graph is sorted topologically first)."""
        end: dict[int, float] = {}
        stream_end = {s: 0.0 for s in STREAMS}
        for op in topological(self.ops):
            start = max([stream_end[op.stream], *(end[d] for d in op.deps)])
            end[op.id] = start + op.duration_s
            stream_end[op.stream] = end[op.id]
        return max(end.values(), default=0.0)


def topological(ops: tuple[Op, ...] | list[Op]) -> list[Op]:
    """The ops in an order where every dependency comes first, list order kept where it already is
    (Kahn's algorithm, ties by position); a ValueError names a cycle's op."""
    position = {op.id: i for i, op in enumerate(ops)}
    by_id = {op.id: op for op in ops}
    waiting = {op.id: len(set(op.deps)) for op in ops}
    users: dict[int, list[int]] = {}
    for op in ops:
        for d in set(op.deps):
            users.setdefault(d, []).append(op.id)
    ready = [position[i] for i, n in waiting.items() if n == 0]
    heapq.heapify(ready)
    out = []
    while ready:
        op = ops[heapq.heappop(ready)]
        out.append(op)
        for u in users.get(op.id, ()):
            waiting[u] -= 1
            if waiting[u] == 0:
                heapq.heappush(ready, position[u])
    if len(out) != len(ops):
        stuck = next(i for i, n in waiting.items() if n > 0)
        raise ValueError(f"the graph has a cycle through op {stuck} ({by_id[stuck].name})")
    return out
