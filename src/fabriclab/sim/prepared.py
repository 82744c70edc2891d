"""A schedule turned into the general engine's task graph once, run on any topology and placement.

Building a schedule, matching its sends with its receives and writing the task graph cost more than the
run itself (NCCL's double binary tree on 2,048 ranks: 0.25 s to build, 0.1 s to match, 0.15 s for the graph
against 0.2 s for the run). None of them depends on the topology or the placement: the graph's transfers
name ranks, and a run maps them onto endpoints. So `prepared_collective` keeps the last few graphs
(a pure function's memo, bounded), and a plan that costs one algorithm on every fabric and bisection of a
GPU count builds it once per size instead of once per topology (`plan/affine.py`). The run is the same
task graph the engine always ran, so its times are the same, bit for bit.

Try it: `fabriclab bench plan`.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass, replace

import numpy as np

from fabriclab.collectives.schedule import RECV_REDUCE, SEND, Schedule
from fabriclab.sim.engine import TaskGraph, Timeline, run, successor_arrays

# Graphs kept: a plan point asks for two sizes of each algorithm it costs, and GPU counts come one after
# another. Only graphs the general engine runs whole are kept (`sim.collective.GENERAL_ENGINE_MAX_TRANSFERS`):
# one of 200,000 messages holds ~60 MB, so the memo stays under half a GB.
CACHED_GRAPHS = 8
CACHED_MAX_MESSAGES = 200_000
_CACHE: OrderedDict = OrderedDict()


@dataclass(frozen=True)
class Transfers:
    """The matched messages of a schedule, one row per message."""

    src: np.ndarray
    dst: np.ndarray
    src_step: np.ndarray
    dst_step: np.ndarray
    elements: np.ndarray
    reduce: np.ndarray


def match_transfers(schedule: Schedule) -> Transfers:
    """Pair the k-th send from a to b with the k-th receive at b from a (FIFO per ordered pair)."""
    from fabriclab.collectives.matching import match_messages

    ops = ((r, op.peer, op.kind == SEND, (k, op)) for r in range(schedule.num_ranks)
           for k, step in enumerate(schedule.steps[r]) for op in step)
    rows = [(a, b, ks, kd, schedule.chunks[send.chunk][1], recv.kind == RECV_REDUCE)
            for (a, b), out, into in match_messages(ops) for (ks, send), (kd, recv) in zip(out, into)]
    cols = list(zip(*rows)) if rows else [[]] * 6
    as_int = [np.asarray(c, dtype=np.int64) for c in cols[:5]]
    return Transfers(*as_int, np.asarray(cols[5], dtype=bool))


@dataclass(frozen=True)
class Graph:
    """A schedule's task graph (transfers between ranks, not yet endpoints) and where to read its answer."""

    graph: TaskGraph
    """Its transfers' `src` and `dst` are ranks; `run_prepared` maps them onto endpoints. Held as arrays (the
    engine reads them so), made once."""
    reduce_bytes: np.ndarray
    """Bytes each step task reduces (its compute time is that times the reduction cost)."""
    tx_task: np.ndarray
    """The task of each transfer (row of `transfers`)."""
    last_task: np.ndarray
    """Each rank's last step's task, -1 for a rank without steps."""
    successors: tuple
    """`engine.successor_arrays(graph)`, made once for every run."""


class PreparedSchedule:
    """A schedule's matched transfers, and its task graph per element size, made when first asked for."""

    def __init__(self, schedule: Schedule) -> None:
        self.num_ranks, self.num_messages = schedule.num_ranks, schedule.num_messages
        self.transfers = match_transfers(schedule)
        self._steps = [len(s) for s in schedule.steps]
        self._graphs: dict[int, Graph] = {}

    def graph(self, itemsize: int) -> Graph:
        """The task graph with `itemsize` bytes per element (`sim/collective.py` says what its tasks and
        edges mean)."""
        if itemsize not in self._graphs:
            self._graphs[itemsize] = _task_graph(self.transfers, self._steps, itemsize)
        return self._graphs[itemsize]


def _task_graph(tx: Transfers, num_steps: list[int], itemsize: int) -> Graph:
    graph = TaskGraph()
    step_task = [[graph.add_compute(0.0) for _ in range(n)] for n in num_steps]
    reduce_bytes = np.zeros(len(graph))
    tx_task = np.empty(tx.src.size, dtype=np.int64)
    for i in range(tx.src.size):
        a, b, ka, kb = int(tx.src[i]), int(tx.dst[i]), int(tx.src_step[i]), int(tx.dst_step[i])
        nbytes = int(tx.elements[i]) * itemsize
        t = graph.add_transfer(a, b, nbytes)
        tx_task[i] = t
        if ka > 0:
            graph.depend(t, step_task[a][ka - 1])
        if kb > 0:
            graph.depend(t, step_task[b][kb - 1])
        graph.depend(step_task[a][ka], t)
        graph.depend(step_task[b][kb], t)
        if tx.reduce[i]:
            reduce_bytes[step_task[b][kb]] += nbytes
    last = np.array([s[-1] if s else -1 for s in step_task], dtype=np.int64)
    successors = successor_arrays(graph)
    arrays = replace(graph, kind=np.asarray(graph.kind, dtype=np.int8), src=np.asarray(graph.src, dtype=np.int64),
                     dst=np.asarray(graph.dst, dtype=np.int64), num_deps=np.asarray(graph.num_deps, dtype=np.int64),
                     size_bytes=np.asarray(graph.size_bytes, dtype=np.float64),
                     duration_s=np.asarray(graph.duration_s, dtype=np.float64))
    return Graph(graph=arrays, reduce_bytes=reduce_bytes, tx_task=tx_task, last_task=last, successors=successors)


def prepared_collective(collective: str, algo: str, num_ranks: int, count: int) -> PreparedSchedule:
    """The registry's schedule prepared, kept for the next topology when it is small enough (module doc).
    It is shared: callers read it, never change it."""
    from fabriclab.collectives.registry import build_schedule

    key = (collective, algo, int(num_ranks), int(count))
    if key in _CACHE:
        _CACHE.move_to_end(key)
        return _CACHE[key]
    prep = PreparedSchedule(build_schedule(collective, algo, num_ranks, count))
    if prep.num_messages <= CACHED_MAX_MESSAGES:
        _CACHE[key] = prep
        while len(_CACHE) > CACHED_GRAPHS:
            _CACHE.popitem(last=False)
    return prep


def run_prepared(prep: Graph, topology, placement: np.ndarray,
                 gamma_s_per_byte: float = 0.0) -> tuple[Timeline, np.ndarray]:
    """The engine's timeline of `prep` with rank r on endpoint `placement[r]`, and each rank's finish time."""
    graph = prep.graph
    src, dst = graph.src, graph.dst
    is_tx = src >= 0
    on_src = np.where(is_tx, placement[np.where(is_tx, src, 0)], -1)
    on_dst = np.where(is_tx, placement[np.where(is_tx, dst, 0)], -1)
    # The same products the graph's builder would write task by task (reduced bytes x the reduction cost);
    # the steps are the graph's first tasks, the transfers follow with no duration.
    durations = graph.duration_s.copy()
    durations[:prep.reduce_bytes.size] = prep.reduce_bytes * gamma_s_per_byte
    timeline = run(replace(graph, src=on_src, dst=on_dst, duration_s=durations), topology, prep.successors)
    finish = np.where(prep.last_task >= 0, timeline.finish_s[prep.last_task], 0.0)
    return timeline, finish
