"""The exported step replayed: one rank per pipeline stage, op by op, the stages coupled by their messages;
with NCCL's streams side by side, or under ASTRA-sim's rule of one collective per GPU at a time.

`whatif/llm/export.py` writes the step program as rank graphs (the ops, their dependencies, their two
streams, fabriclab's durations). This module runs the graphs of the first pipeline's ranks (every rank of
a stage runs the same program, so its collectives inside the stage start together and one rank stands for
the stage) as a discrete-event simulation:

* an op starts when its dependencies and the op before it on its stream have ended, and its resource is
  free; `one_collective_at_a_time=True` adds ASTRA-sim's resource (astra-sim 518bd51,
  `workload/HardwareResource.cc`): a GPU issues one collective or send at a time (receives are exempt),
  the waiting ops in the order of their ids, as ASTRA-sim's feeder hands them out;
* a receive ends when its message has arrived: the matching send (the k-th from that peer) ended; a
  receive from a rank of the same stage (a CP ring step) takes its own stage's send, by symmetry.

The result is the step as the exported graphs say it: it checks the export against the step model (the
two agree where the model's streams are the graphs' streams), and it prices ASTRA-sim's rule with
fabriclab's own collective costs, so `fabriclab bench astra-sim` can tell that rule apart from the two
tools' network models.

Try it: `python -c "from fabriclab.whatif.llm.run import simulate_llm; from fabriclab.whatif.llm.replay import
replay_step; from fabriclab.fabric.presets import cluster_preset as c; from fabriclab.workload.transformer import
load_model; from fabriclab.workload.parallel import ParallelConfig as P;
a = simulate_llm(load_model('llama3-8b'), P(num_gpus=16, tp=2, pp=2, gbs=32, seq=8192), c('dgx-h100'));
print(a.step_time_s, replay_step(a), replay_step(a, one_collective_at_a_time=True))"`.
"""

from __future__ import annotations

import heapq

from fabriclab.workload.graph import STREAMS


def replay_step(answer, *, one_collective_at_a_time: bool = False, durations: dict | None = None) -> float:
    """The step's time (module doc): the last op of any stage to end. `durations`: (communicator,
    collective, bytes) -> seconds that replace fabriclab's cost of those collectives (a send or receive is
    its communicator's `sendrecv`), e.g. another tool's times of the same collectives."""
    from dataclasses import replace

    from fabriclab.whatif.llm.export import rank_graphs

    ranks = answer.par.groups("pp")[0]
    graphs = rank_graphs(answer, ranks=ranks)
    if durations:
        def timed(op):
            collective = "sendrecv" if op.collective in ("send", "recv") else op.collective
            t = durations.get((op.communicator, collective, int(op.size_bytes))) if op.kind == "comm" else None
            return op if t is None or op.collective == "recv" else replace(op, duration_s=t)

        graphs = [replace(g, ops=tuple(timed(op) for op in g.ops)) for g in graphs]
    return _Replay(graphs, one_collective_at_a_time).run()


class _Replay:
    def __init__(self, graphs, rule: bool) -> None:
        self.graphs = {g.rank: g for g in graphs}
        self.rule = rule
        self.ops = {g.rank: {op.id: op for op in g.ops} for g in graphs}
        self.waits: dict[tuple[int, int], set] = {}  # (rank, op) -> ops it waits for
        self.users: dict[tuple[int, int], list] = {}
        self.end: dict[tuple[int, int], float] = {}
        self.sent: dict[tuple[int, int], list[float]] = {}  # (from, to) -> arrival times, in order
        self.received: dict[tuple[int, int], int] = {}
        self.blocked: dict[tuple[int, int], list] = {}  # (from, to) -> receives waiting, in order
        self.busy_until = {r: 0.0 for r in self.graphs}  # the one collective engine (rule on)
        self.queue: dict[int, list] = {r: [] for r in self.graphs}
        for g in graphs:
            last = {s: None for s in STREAMS}
            for op in g.ops:
                deps = set(op.deps)
                if last[op.stream] is not None:
                    deps.add(last[op.stream])
                last[op.stream] = op.id
                self.waits[(g.rank, op.id)] = deps
                for d in deps:
                    self.users.setdefault((g.rank, d), []).append(op.id)
        self.events: list = []

    def run(self) -> float:
        for rank, g in self.graphs.items():
            for op in g.ops:
                if not self.waits[(rank, op.id)]:
                    self._ready(rank, op.id, 0.0)
        while self.events:
            t, rank, op_id = heapq.heappop(self.events)
            self._done(rank, op_id, t)
        missing = sum(len(g.ops) for g in self.graphs.values()) - len(self.end)
        if missing:
            raise RuntimeError(f"the replay stalled with {missing} ops not run (an export bug: a receive "
                               f"without its send, or a cycle)")
        return max(self.end.values(), default=0.0)

    def _ready(self, rank: int, op_id: int, t: float) -> None:
        op = self.ops[rank][op_id]
        if op.kind == "comm" and op.collective == "recv":
            pair = (op.peer, rank) if op.peer in self.graphs else (rank, rank)
            self.blocked.setdefault(pair, []).append((rank, op_id, t))
            self._deliver(pair)
        elif self.rule and op.kind == "comm":
            heapq.heappush(self.queue[rank], (op_id, t))
            self._issue(rank, t)
        else:
            heapq.heappush(self.events, (t + op.duration_s, rank, op_id))

    def _issue(self, rank: int, now: float) -> None:
        """Rule on: start the waiting collective of the lowest id once the engine is free."""
        queue = self.queue[rank]
        if queue and self.busy_until[rank] <= now:
            op_id, ready = heapq.heappop(queue)
            start = max(now, ready)
            self.busy_until[rank] = start + self.ops[rank][op_id].duration_s
            heapq.heappush(self.events, (self.busy_until[rank], rank, op_id))

    def _deliver(self, pair: tuple[int, int]) -> None:
        arrived, waiting = self.sent.get(pair, []), self.blocked.get(pair, [])
        while waiting and self.received.get(pair, 0) < len(arrived):
            rank, op_id, t = waiting.pop(0)
            k = self.received.get(pair, 0)
            self.received[pair] = k + 1
            heapq.heappush(self.events, (max(t, arrived[k]), rank, op_id))

    def _done(self, rank: int, op_id: int, t: float) -> None:
        self.end[(rank, op_id)] = t
        op = self.ops[rank][op_id]
        if op.kind == "comm" and op.collective == "send":
            pair = (rank, op.peer) if op.peer in self.graphs else (rank, rank)
            self.sent.setdefault(pair, []).append(t)
            self._deliver(pair)
        if self.rule and op.kind == "comm" and op.collective != "recv":
            self._issue(rank, t)
        for user in self.users.get((rank, op_id), ()):
            waits = self.waits[(rank, user)]
            waits.discard(op_id)
            if not waits:
                self._ready(rank, user, t)
