"""A simulated LLM step as workload graphs (`workload/graph.py`): one rank per pipeline stage.

Each rank's graph is its passes in the schedule's order: for a forward the receive of the activation from
the stage before (a `pp` recv), the pass's compute, one op per communicator the pass talks on (TP, CP, EP,
ZeRO-3 DP) carrying the bytes of all of the pass's calls on it and their exposed time, then the send to the
stage after; a backward the same the other way round. The DP gathers (before a chunk's first forward) and
gradient reductions (after its last backward) go on the `comm` stream. Durations are the simulator's, so a
graph's critical path is its stage's busy time; `workload/chakra.py` writes the graphs as Chakra execution
traces that ASTRA-sim runs.

Try it: `fabriclab whatif llm --model llama3-8b --gpus 16 --pp 2 --gbs 32 --chakra llama/step`.
"""

from __future__ import annotations

from fabriclab.whatif.llm.compute import layers_of_chunks
from fabriclab.whatif.llm.schedule import F
from fabriclab.workload.graph import Op, RankGraph

ACT_BYTES = 2


def _pass_bytes(answer, stage: int, chunk: int) -> dict[str, tuple[str, float]]:
    """Communicator -> (collective, bytes of all of one pass's calls)."""
    spec, par = answer.spec, answer.par
    layers = layers_of_chunks(spec.num_layers, par.pp * par.vp)[chunk * par.pp + stage]
    tokens = par.mbs * par.seq / par.cp
    act = tokens * spec.hidden_size * ACT_BYTES
    out = {"tp": ("allgather" if par.sequence_parallel else "allreduce", 4 * layers * act),
           "cp": ("allgather", (par.cp - 1) * layers * 2 * tokens * spec.num_kv_heads * spec.head_dim
                  * ACT_BYTES / par.tp),
           "ep": ("alltoall", 2 * layers * tokens * max(1, spec.experts_per_token) * spec.hidden_size
                  * ACT_BYTES / par.tp),
           "dp": ("allgather", 0.0)}
    return out


def stage_graphs(answer) -> list[RankGraph]:
    """One graph per pipeline stage, for the ranks of the first pipeline."""
    par, result = answer.par, answer.result
    ranks = par.groups("pp")[0]
    act = par.mbs * par.seq / par.cp * answer.spec.hidden_size * ACT_BYTES / (par.tp if par.sequence_parallel else 1)
    graphs = []
    for s, rank in enumerate(ranks):
        ops: list[Op] = []

        def add(**kw) -> int:
            ops.append(Op(id=len(ops), **kw))
            return len(ops) - 1

        gathers = {}
        for name, t0, t1 in result.dp_intervals[s]:
            if ".allgather." in name:
                gathers[int(name.rsplit("chunk", 1)[1])] = add(name=name, kind="comm", communicator="dp",
                                                               collective="allgather", duration_s=t1 - t0,
                                                               group_size=par.dp * par.cp, stream="comm")
        last_backward: dict[int, int] = {}
        for kind, chunk, mb in result.pipeline.ops[s]:
            cost = result.passes[(s, chunk, kind)]
            tag = f"{'FB'[kind]}.chunk{chunk}.mb{mb}"
            neighbour = s - 1 if kind == F else s + 1
            deps: tuple[int, ...] = ()
            if 0 <= neighbour < par.pp:
                deps = (add(name=f"pp.recv.{tag}", kind="comm", communicator="pp", collective="recv",
                            size_bytes=int(act), group_size=par.pp, peer=int(ranks[neighbour])),)
            if kind == F and mb == 0 and chunk in gathers:
                deps += (gathers[chunk],)
            last = add(name=f"compute.{tag}", kind="compute", duration_s=cost.compute_s, deps=deps,
                       flops=_flops(answer, s, chunk, kind))
            for comm, (collective, size) in _pass_bytes(answer, s, chunk).items():
                t = cost.exposed_s.get(comm, 0.0)
                if t > 0:
                    last = add(name=f"{comm}.{collective}.{tag}", kind="comm", communicator=comm,
                               collective=collective, size_bytes=int(size), duration_s=t, deps=(last,),
                               group_size=par.group_size(comm) if comm != "dp" else par.dp * par.cp)
            target = s + 1 if kind == F else s - 1
            if 0 <= target < par.pp:
                add(name=f"pp.send.{tag}", kind="comm", communicator="pp", collective="send", size_bytes=int(act),
                    group_size=par.pp, peer=int(ranks[target]), deps=(last,))
            if kind != F:
                last_backward[chunk] = last
        for name, t0, t1 in result.dp_intervals[s]:
            if ".allgather." not in name:
                chunk = int(name.rsplit("chunk", 1)[1])
                add(name=name, kind="comm", communicator="dp", collective=name.split(".")[1],
                    duration_s=t1 - t0, group_size=par.dp * par.cp, stream="comm",
                    deps=(last_backward[chunk],) if chunk in last_backward else ())
        communicators = {c: next(g for g in par.groups(c) if rank in g) for c in ("tp", "cp", "ep", "dp", "pp")}
        graphs.append(RankGraph(rank=int(rank), num_ranks=par.num_gpus, ops=tuple(ops), communicators=communicators))
    return graphs


def _flops(answer, stage: int, chunk: int, kind: int) -> float:
    from fabriclab.whatif.llm.compute import chunk_flops

    c = chunk_flops(answer.spec, answer.par)[chunk * answer.par.pp + stage]
    return c.forward * (1 if kind == F else 2)
