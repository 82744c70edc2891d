"""Simulate what the pipelined schedule executor really does: segments, their hazards, one posting thread.

`fabriclab.sim.collective.simulate` runs a schedule step by step: a step's messages start when both ranks
have finished their previous step. The executor that the collectives benchmark times
(`runtime.executor`, pipelined mode on CPU) does not: it cuts every chunk into `segment_bytes` messages
and posts a message as soon as the receives it depends on have been applied, across step boundaries. For
a tree (binomial, chain, hierarchical) with several segments per chunk that halves the time of the
step-by-step model, so validating the simulator against measurements needs this model of the executor.

The task graph, per rank, follows the executor's own plan (`fabriclab.collectives.matching.compile_plan`)
exactly; the costs besides the wire are an `ExecutorCosts`:
* **post i** (compute, `post_s`): the posting thread hands segment i to Gloo; posts happen in program
  order, after receive `need - 1` was applied, and a direct receive after the sends that still read its
  range (write-after-read) completed.
* **transfer** (flow on the topology) of every matched send/receive pair (k-th send a->b with the k-th
  receive at b from a, Gloo's FIFO matching, paired by `match_messages` as the simulator pairs a
  schedule's ops): starts when both ends have posted (Gloo's unbound buffers
  rendezvous: the sender waits for the receiver's NOTIFY_RECV_READY, gloo/transport/tcp/pair.cc) and
  after the pair's previous message (one TCP connection per pair carries them one after another).
* **apply a** (compute): receives are applied in op order on the posting thread, each after its
  transfer, after the sends reading its range, and no earlier than the thread reaches it (the first post
  that needs it); reduce costs `gamma_s_per_byte`, a copy out of a temporary `copy_s_per_byte`.

Try it: `fabriclab validate emulated --topology star --hosts 4 --algos binomial --sizes 16MB` (column `model`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from fabriclab.collectives.matching import compile_plan, match_messages
from fabriclab.collectives.schedule import Schedule
from fabriclab.sim.engine import TaskGraph, run


@dataclass(frozen=True, kw_only=True)
class ExecutorCosts:
    """What the executor spends besides the wire (all zero: the network alone)."""

    post_s: float = 0.0
    """Posting thread's time to hand one segment to Gloo, seconds."""
    gamma_s_per_byte: float = 0.0
    """Reduction time per received byte (`recv_reduce`), seconds."""
    copy_s_per_byte: float = 0.0
    """Time per byte to copy a received segment out of its temporary (`recv_copy`), seconds."""
    burst_bytes: int = 0
    """The first message each rank sends carries that many bytes fewer through the flow model (a token
    bucket, full after the idle barrier, lets them through unshaped)."""


def executor_graph(schedule: Schedule, placement: np.ndarray, *, itemsize: int, segment_bytes: int,
                   costs: ExecutorCosts = ExecutorCosts()) -> tuple[TaskGraph, list[list[int]]]:
    """The task graph of the executor running `schedule`; also each rank's tasks that end its run."""
    if segment_bytes < itemsize:
        raise ValueError(f"segment size {segment_bytes} B is smaller than one element ({itemsize} B)")
    seg_elements = max(1, segment_bytes // itemsize)
    plans = [compile_plan(schedule, r, seg_elements) for r in range(schedule.num_ranks)]
    graph = TaskGraph()
    posts: list[list[int]] = []
    applies: list[list[int]] = []
    for plan in plans:
        posts.append([graph.add_compute(costs.post_s) for _ in plan.segments])
        apply_tasks = []
        for i in plan.applies:
            seg = plan.segments[i]
            per_byte = 0.0 if seg.tmp < 0 else (costs.gamma_s_per_byte if seg.reduce else costs.copy_s_per_byte)
            apply_tasks.append(graph.add_compute((seg.stop - seg.start) * itemsize * per_byte))
        applies.append(apply_tasks)
    # Segments pair up as the schedule's ops do: FIFO per ordered pair (Gloo matches one tag in order).
    segments = ((r, seg.peer, seg.is_send, i) for r, plan in enumerate(plans)
                for i, seg in enumerate(plan.segments))
    transfer: list[dict[int, int]] = [{} for _ in plans]  # rank -> segment -> transfer task
    first_send = [next((i for i, seg in enumerate(plan.segments) if seg.is_send), -1) for plan in plans]
    for (a, b), out, into in sorted(match_messages(segments)):
        previous = None
        for i, j in zip(out, into):
            seg = plans[a].segments[i]
            size = (seg.stop - seg.start) * itemsize
            if i == first_send[a]:
                size = max(size - costs.burst_bytes, 0)
            t = graph.add_transfer(int(placement[a]), int(placement[b]), size)
            graph.depend(t, posts[a][i])
            graph.depend(t, posts[b][j])
            if previous is not None:  # one TCP connection per pair: its messages go one after another
                graph.depend(t, previous)
            transfer[a][i] = transfer[b][j] = previous = t
    ends = []
    for r, plan in enumerate(plans):
        _wire_rank(graph, plan, posts[r], applies[r], transfer[r])
        last = [applies[r][-1]] if applies[r] else []
        ends.append(last + [transfer[r][i] for i, s in enumerate(plan.segments) if s.is_send]
                    + posts[r][-1:])
    return graph, ends


def _wire_rank(graph: TaskGraph, plan, posts: list[int], applies: list[int], transfer: dict[int, int]) -> None:
    """Dependencies of one rank's posting thread (see the module docstring)."""
    segs = plan.segments
    # trigger[a]: the segment whose post first needs apply a; the thread applies it right after posting
    # the segment before (or after the last post, when no post needs it).
    trigger = [len(segs)] * len(applies)
    applied = 0
    for i, seg in enumerate(segs):
        for a in range(applied, min(seg.need, len(applies))):
            trigger[a] = i
        applied = max(applied, seg.need)
    for i, seg in enumerate(segs):
        if i > 0:
            graph.depend(posts[i], posts[i - 1])
        if seg.need > 0:
            graph.depend(posts[i], applies[seg.need - 1])
        if not seg.is_send and seg.tmp < 0:
            for s in seg.war:
                graph.depend(posts[i], transfer[s])
    for a, i in enumerate(plan.applies):
        seg = segs[i]
        if a > 0:
            graph.depend(applies[a], applies[a - 1])
        graph.depend(applies[a], transfer[i])
        if seg.tmp >= 0:
            for s in seg.war:
                graph.depend(applies[a], transfer[s])
        if trigger[a] > 0:
            graph.depend(applies[a], posts[trigger[a] - 1])


def simulate_executor(schedule: Schedule, topology, placement: np.ndarray | None = None, *, itemsize: int,
                      segment_bytes: int, costs: ExecutorCosts = ExecutorCosts()) -> float:
    """Simulated time of one run of `schedule` by the pipelined executor: the last rank's end."""
    if placement is None:
        placement = np.arange(schedule.num_ranks)
    graph, ends = executor_graph(schedule, np.asarray(placement), itemsize=itemsize,
                                 segment_bytes=segment_bytes, costs=costs)
    if not len(graph):
        return 0.0
    timeline = run(graph, topology)
    return max((float(timeline.finish_s[t]) for rank_ends in ends for t in rank_ends), default=0.0)
