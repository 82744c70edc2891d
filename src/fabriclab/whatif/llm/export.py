"""A simulated LLM step as workload graphs (`workload/graph.py`), one per rank: the step program
(`whatif/llm/program.py`) in the order the schedule runs it, every operation with its real peers and
groups, for the Chakra export (`workload/chakra.py`) that ASTRA-sim runs.

Each rank of a stage runs its passes in the schedule's order (`PipelineRun.ops`). A pass is:
* a `recv` of the activation (forward) or its gradient (backward) when the pass before it ran on another
  stage (with virtual stages also the wrap-around between the last stage and the first);
* per layer: its compute ops and its exposed collectives on the `compute` stream, in order; the
  collectives an overlap hides (the CP ring behind the attention core, TP behind the linear layers with
  TP overlap, EP with `ep_overlap`) on the `overlap` stream beside the compute they hide behind; a CP ring
  step is a send to the next rank of the CP group and a receive from the one before;
* ZeRO-3: the next unit's parameter gather on the `comm` stream as a layer starts, the layer waiting for
  its own; the unit's reduce-scatter after its backward;
* a `send` of the result to the stage that runs the next pass (on the `p2p` stream: it does not hold the
  sender back, nor wait for the gradient buckets).
ZeRO 0-2's bucket gathers run from the step's start, each before the first forward reaches its bucket's
layers; the bucket reductions after the last micro-batch's backward has passed the bucket's layers; HSDP's replica all-reduce after the last backward;
the optimizer step last. Durations are fabriclab's own (compute: the roofline; collectives: the library
model), so a rank's critical path is its stage's busy time, and a peer that costs the collectives itself
(ASTRA-sim) can be compared op for op.

Try it: `fabriclab whatif llm --model llama3-8b --gpus 16 --pp 2 --gbs 32 --chakra llama/step`.
"""

from __future__ import annotations

from dataclasses import replace

from fabriclab.whatif.llm.program import Call, Work
from fabriclab.whatif.llm.schedule import F
from fabriclab.workload.graph import Op, RankGraph

# What an export of every rank may hold: measured on this 2-core machine, Llama-3-70B TP8 PP4 on 256 GPUs is
# 1.0M ops written as 165 MB in 48 s (~50 us and ~165 B an op); 8M ops is some 6 minutes and 1.3 GB.
MAX_EXPORT_OPS = 8_000_000


class _Stage:
    """The ops of one stage's ranks, with peers named relatively (`("pp", stage)`, `("cp", +1)`)."""

    def __init__(self, answer, stage: int) -> None:
        self.answer, self.stage = answer, stage
        self.model = answer.result.model
        self.par = answer.par
        self.ops: list[Op] = []
        self.peers: dict[int, tuple[str, int]] = {}
        self.chain: int | None = None  # the last op of the compute stream
        self.pending: list[int] = []  # hidden comm ops the layer's end waits for
        self.last: dict[str, int] = {}  # stream -> its last op

    def add(self, *, stream: str = "compute", deps=(), peer: tuple[str, int] | None = None, **kw) -> int:
        i = len(self.ops)
        deps = tuple(dict.fromkeys(d for d in deps if d is not None))
        self.ops.append(Op(id=i, stream=stream, deps=deps, **kw))
        if peer is not None:
            self.peers[i] = peer
        self.last[stream] = i
        if stream == "compute":
            self.chain = i
        return i

    def comm(self, call: Call, tag: str, *, stream: str, deps=()) -> int:
        """One collective (or a CP ring step as a send and a receive; an activation offload's copy to or from
        host memory as a compute op of its stream); returns the last op's id."""
        shape = self.model.comm.shapes[call.communicator]
        t = self.model.call_s(call)
        if call.communicator == "host":
            return self.add(name=f"{call.name}.{tag}", kind="compute", duration_s=t, memory_bytes=call.size_bytes,
                            stream=stream, deps=deps)
        if call.collective == "sendrecv":
            first = self.add(name=f"{call.name}.send.{tag}", kind="comm", communicator=call.communicator,
                             collective="send", size_bytes=int(call.size_bytes), group_size=shape.num_gpus,
                             duration_s=t, stream=stream, deps=deps, peer=(call.communicator, +1))
            return self.add(name=f"{call.name}.recv.{tag}", kind="comm", communicator=call.communicator,
                            collective="recv", size_bytes=int(call.size_bytes), group_size=shape.num_gpus,
                            stream=stream, deps=(*deps, first) if stream == "compute" else deps,
                            peer=(call.communicator, -1))
        return self.add(name=f"{call.name}.{tag}", kind="comm", communicator=call.communicator,
                        collective=call.collective, size_bytes=int(call.size_bytes), group_size=shape.num_gpus,
                        duration_s=t, stream=stream, deps=deps)

    def hidden(self, op: Call) -> bool:
        return op.overlap in ("attention", "compute") or (op.overlap == "linear" and self.model.options.tp_overlap)


def _pass(st: _Stage, kind: int, chunk: int, mb: int, waits: dict) -> dict[int, int]:
    """One pass's ops (`waits`: layer -> the ops its first op waits for); returns layer -> the compute-stream
    op that ends it."""
    program = st.model.program.chunk(st.stage, chunk)
    passes = program.passes(kind)
    tag = f"{'FB'[kind]}.chunk{chunk}.mb{mb}"
    ends: dict[int, int] = {}
    gathered = {0: tuple(st.comm(c, f"layer{passes[0].layer}.{tag}", stream="comm", deps=(st.chain,))
                         for c in passes[0].gather)} if passes and passes[0].gather else {}
    extra: tuple = ()
    for i, lp in enumerate(passes):
        extra += gathered.get(i, ()) + waits.get(lp.layer, ())
        nxt = passes[i + 1] if i + 1 < len(passes) else None
        if nxt is not None and nxt.gather:  # prefetch the next unit as this layer starts
            gathered[i + 1] = tuple(st.comm(c, f"layer{nxt.layer}.{tag}", stream="comm", deps=(st.chain,))
                                    for c in nxt.gather)
        before_work = st.chain
        for op in lp.ops:
            if isinstance(op, Work):
                before_work = st.chain
                st.add(name=f"{op.name}.layer{lp.layer}.{tag}", kind="compute", duration_s=sum(st.model.work_s(op)),
                       flops=op.flops, memory_bytes=op.memory_bytes, deps=(st.chain, *extra))
                extra = ()
            elif st.hidden(op):
                st.pending.append(st.comm(op, f"layer{lp.layer}.{tag}", stream="overlap", deps=(before_work,)))
            else:
                st.comm(op, f"layer{lp.layer}.{tag}", stream="compute", deps=(st.chain, *extra))
                extra = ()
        if st.pending:  # the layer ends when what hid behind its compute has ended
            st.add(name=f"wait.layer{lp.layer}.{tag}", kind="compute", deps=(st.chain, *st.pending))
            st.pending = []
        ends[lp.layer] = st.chain
        for c in lp.reduce:
            st.comm(c, f"layer{lp.layer}.{tag}", stream="comm", deps=(st.chain,))
    return ends


def _neighbour(par, stage: int, chunk: int, kind: int, sending: bool) -> int | None:
    """The stage a pass receives its input from (or sends its output to), None at the pipeline's ends."""
    step = (1 if sending else -1) * (1 if kind == F else -1)
    other = stage + step
    if 0 <= other < par.pp:
        return other
    first_chunk, last_chunk = (chunk == 0, chunk == par.vp - 1)
    if kind == F and ((not sending and stage == 0 and not first_chunk) or (sending and stage == par.pp - 1 and not last_chunk)):
        return other % par.pp
    if kind != F and ((not sending and stage == par.pp - 1 and not last_chunk) or (sending and stage == 0 and not first_chunk)):
        return other % par.pp
    return None


def stage_program_ops(answer, stage: int) -> _Stage:
    """The ops of `stage`'s ranks (peers relative), built once per stage."""
    st, par = _Stage(answer, stage), answer.par
    program = st.model.program
    send = (program.sends.get(stage) or [None])[0]
    size = int(send.call.size_bytes) if send else 0
    p2p = st.model.call_s(send.call) if send else 0.0
    gathers: dict[int, dict[int, tuple]] = {}  # chunk -> layer -> the gather of the bucket holding it
    for v in range(par.vp):
        buckets = program.chunk(stage, v).buckets
        gathers[v] = {}
        for k in reversed(range(len(buckets))):  # in the forward's order
            ids = tuple(st.comm(c, f"chunk{v}.bucket{k}", stream="comm", deps=()) for c in buckets[k].gather)
            gathers[v].update({layer: ids for layer in buckets[k].layers})
    last = par.num_microbatches - 1
    for kind, chunk, mb in answer.result.pipeline.ops[stage]:
        tag = f"{'FB'[kind]}.chunk{chunk}.mb{mb}"
        waits: dict = gathers[chunk] if kind == F and mb == 0 else {}
        src = _neighbour(par, stage, chunk, kind, sending=False)
        if src is not None:
            st.add(name=f"pp.recv.{tag}", kind="comm", communicator="pp", collective="recv", size_bytes=size,
                   group_size=par.pp, deps=(st.chain,), peer=("pp", src))
        ends = _pass(st, kind, chunk, mb, waits)
        dst = _neighbour(par, stage, chunk, kind, sending=True)
        if dst is not None:
            st.add(name=f"pp.send.{tag}", kind="comm", communicator="pp", collective="send", size_bytes=size,
                   group_size=par.pp, duration_s=p2p, stream="p2p", deps=(st.chain,), peer=("pp", dst))
        if kind != F and mb == last:
            for k, bucket in enumerate(program.chunk(stage, chunk).buckets):
                for c in bucket.reduce:
                    st.comm(c, f"chunk{chunk}.bucket{k}", stream="comm", deps=(ends[bucket.layers[-1]],))
    for c in program.step_calls.get(stage, ()):
        st.comm(c, "step", stream="comm", deps=(st.chain,))
    st.add(name="optimizer.step", kind="compute", duration_s=answer.result.optimizer_s,
           memory_bytes=program.optimizer_params[stage] * 30, deps=tuple(st.last.values()))
    return st


def _group_rows(par, shard_group: int, gpus_per_server: int) -> dict[str, tuple]:
    """Communicator -> (every group, the row of each rank)."""
    import numpy as np

    from fabriclab.whatif.llm.groups import communicator_groups

    out = {}
    for name in ("tp", "cp", "ep", "pp", "dpcp", "edp", "shard", "replica", "etp", "etpep", "ep_inter", "ep_intra"):
        groups = communicator_groups(par, name, shard_group, gpus_per_server)
        row = np.empty(par.num_gpus, dtype=np.int64)
        row[groups.ravel()] = np.repeat(np.arange(groups.shape[0]), groups.shape[1])
        out[name] = (groups, row)
    return out


def rank_graphs(answer, ranks=None) -> list[RankGraph]:
    """One graph per rank (default: every rank of the job), in rank order (module doc)."""
    par = answer.par
    stages: dict[int, _Stage] = {}
    if ranks is None:
        stages = {s: stage_program_ops(answer, s) for s in range(par.pp)}
        total = par.num_gpus // par.pp * sum(len(st.ops) for st in stages.values())
        if total > MAX_EXPORT_OPS:
            raise ValueError(f"exporting every rank of {par.num_gpus:,} GPUs is {total:,} ops, more than the "
                             f"{MAX_EXPORT_OPS:,} written in minutes here: export fewer GPUs (--gpus) or "
                             f"micro-batches (--gbs)")
    ranks = range(par.num_gpus) if ranks is None else ranks
    shard = answer.result.model.options.shard_group
    stage_of = par.coordinates()["pp"]
    rows = _group_rows(par, shard, answer.cluster.server.gpus_per_server)
    out = []
    for rank in ranks:
        s = int(stage_of[rank])
        if s not in stages:
            stages[s] = stage_program_ops(answer, s)
        st = stages[s]
        groups = {name: [int(r) for r in g[row[rank]]] for name, (g, row) in rows.items()}
        ops = list(st.ops)
        for i, (name, where) in st.peers.items():
            group = groups[name]
            peer = group[where] if name == "pp" else group[(group.index(rank) + where) % len(group)]
            ops[i] = replace(ops[i], peer=int(peer))
        out.append(RankGraph(rank=int(rank), num_ranks=par.num_gpus, ops=tuple(ops), communicators=groups))
    return out


def stage_graphs(answer) -> list[RankGraph]:
    """One graph per pipeline stage: the ranks of the first pipeline."""
    return rank_graphs(answer, ranks=answer.par.groups("pp")[0])
