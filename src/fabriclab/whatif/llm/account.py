"""A step model's passes run in the pipeline schedule, and where the step's time goes on every stage.

`run_pipeline` runs the passes (costed by `whatif/llm/step.py`) in the schedule (`whatif/llm/schedule.py`)
with each stage's DP stream: ZeRO 0-2's bucket gathers before a chunk's first forward ends, its reductions
as the last micro-batch's backward frees their buckets, HSDP's replica all-reduce after the last backward.

The step is the latest end over the pipeline stages (their last pass or their DP stream) plus the
optimizer step. Every stage's split adds up to the step time:

* compute and the exposed TP / CP / EP (and ZeRO-3 DP) time: the sums over the stage's passes;
* DP: what the stage's DP stream adds beyond its passes (the stream's tail after the last backward, and
  a first forward held back by its gather);
* PP: the idle time the activations' sends add (the same schedule run with sends of zero time gives the
  idle time without them);
* bubble: the rest, the idle time the schedule's dependencies leave, up to the step's end.

The headline split is the slowest stage's: the one with the least bubble (the most compute, exposed
communication and DP stream), the stage the others wait for, where a change of the fabric or the
parallel layout shows first.

Every stage's collectives come from the step program (`whatif/llm/program.py`): per (communicator,
collective, size) the calls per step, counted over its passes, buckets, sends and per-step calls
(`whatif/llm/result.comm_log`, when a `StepResult` is first asked for them).

Try it: `fabriclab whatif llm --model llama3-8b --cluster dgx-h100 --gpus 64 --tp 2 --pp 2 --gbs 128 --per-stage`.
"""

from __future__ import annotations

from fabriclab.whatif.llm.result import KINDS, PassCost, StepResult
from fabriclab.whatif.llm.schedule import F, PipelineRun, simulate


def _passes(model) -> dict[tuple[int, int, int], PassCost]:
    par = model.par
    return {(s, v, k): model.pass_cost(s, v, k) for s in range(par.pp) for v in range(par.vp) for k in (F, 1)}


def account(model, *, p2p: bool = True) -> StepResult:
    """The step of a `StepModel` (`whatif/llm/step.py`): its passes run in the pipeline schedule with every
    stage's DP stream (`run_pipeline`), and split (module doc)."""
    par = model.par
    passes = _passes(model)
    p2p_s = model.p2p_s() if p2p else 0.0
    run, intervals = run_pipeline(model, p2p_s, passes)
    ends = [max([run.stage_end_s[s], *(e for _, _, e in intervals[s])]) for s in range(par.pp)]
    critical = max(range(par.pp), key=lambda s: (ends[s], -s))
    optimizer = model.optimizer_s()
    step = ends[critical] + optimizer
    quiet = run_pipeline(model, 0.0, passes)[0] if p2p_s > 0 else run
    splits = [_split(passes, run, quiet, s, ends[s], ends[critical], optimizer) for s in range(par.pp)]
    idle = [split["bubble"] for split in splits]  # the stage that waits least is the one the others wait for
    slowest = min(range(par.pp), key=lambda s: (idle[s], s != critical, s))
    return StepResult(step_time_s=step, split_s=splits[slowest], pipeline=run, critical_stage=critical,
                      passes=passes, dp_intervals=intervals, optimizer_s=optimizer, slowest_stage=slowest,
                      split_by_stage=splits, program=model.program, model=model)


def _split(passes, run, quiet, s: int, stage_end: float, end_s: float, optimizer: float) -> dict[str, float]:
    split = {k: 0.0 for k in KINDS}
    busy = 0.0
    for kind, c, _ in run.ops[s]:
        cost = passes[(s, c, kind)]
        split["compute"] += cost.compute_s
        for name, t in cost.exposed_s.items():
            split[name] += t
        busy += cost.total_s
    ran = sum(e - b for b, e in zip(run.start_s[s], run.end_s[s]))
    # time the passes took beyond their costs: a forward held back by its parameters' gather
    split["dp"] += max(0.0, ran - busy) + max(0.0, stage_end - run.stage_end_s[s])
    idle = run.stage_end_s[s] - ran
    idle_quiet = quiet.stage_end_s[s] - sum(e - b for b, e in zip(quiet.start_s[s], quiet.end_s[s]))
    split["pp"] = min(max(0.0, idle - idle_quiet), idle)
    split["bubble"] = max(0.0, idle - split["pp"]) + max(0.0, end_s - stage_end)
    split["optimizer"] = optimizer
    # parts that overlap the idle time of another (a held-back forward) are counted once
    total = sum(split.values())
    split["bubble"] = max(0.0, split["bubble"] - (total - (end_s + optimizer)))
    return split


def run_pipeline(model, p2p_s: float, passes: dict) -> tuple[PipelineRun, list]:
    """The schedule with the DP stream of every stage (ZeRO 0-2, and HSDP's replica all-reduce): bucket
    gathers before a chunk's first forward ends, reductions as the last backward frees their buckets."""
    par, program = model.par, model.program
    stream_free = [0.0] * par.pp
    intervals: list[list[tuple[str, float, float]]] = [[] for _ in range(par.pp)]
    held: dict[tuple[int, int], list[tuple[float, float]]] = {}  # (stage, chunk) -> (gather end, pass left)
    for s in range(par.pp):  # bucket gathers in the order of first use, from the step's start
        for v in range(par.vp):
            chunk, cost = program.chunk(s, v), passes[(s, v, F)]
            offset = {layer: start for layer, start, _, _ in cost.layers}
            for k in reversed(range(len(chunk.buckets))):  # buckets are in backward order
                bucket = chunk.buckets[k]
                t = sum(model.call_s(c) for c in bucket.gather)
                if t <= 0:
                    continue
                t0, stream_free[s] = stream_free[s], stream_free[s] + t
                intervals[s].append((f"dp.allgather.chunk{v}.bucket{k}", t0, stream_free[s]))
                first = min(bucket.layers, key=lambda i: offset.get(i, 0.0))  # its first layer in the forward
                held.setdefault((s, v), []).append((stream_free[s], cost.total_s - offset.get(first, 0.0)))
    overlap_ag = model.options.overlap_param_gather

    def ready(s, c, kind, m, t0, t1):
        """The first forward of a chunk: each bucket's layers run after its gather (Megatron's
        overlap_param_gather), so the pass ends no earlier than any gather's end plus what follows it."""
        if kind == F and m == 0 and (s, c) in held:
            if not overlap_ag:
                return t1 + max(0.0, max(end for end, _ in held[(s, c)]) - t0)
            return max(t1, max(end + left for end, left in held[(s, c)]))
        return t1

    fwd = [[passes[(s, v, F)].total_s for v in range(par.vp)] for s in range(par.pp)]
    bwd = [[passes[(s, v, 1)].total_s for v in range(par.vp)] for s in range(par.pp)]
    run = simulate(par.pp, par.vp, par.num_microbatches, fwd, bwd, p2p_s, ready_s=ready)
    last = par.num_microbatches - 1
    for s in range(par.pp):
        for i, (kind, c, m) in enumerate(run.ops[s]):
            if kind == 1 and m == last:
                _reduce_buckets(model, s, c, run.start_s[s][i], run.end_s[s][i], stream_free, intervals)
        for call in program.step_calls.get(s, ()):
            t0 = max(stream_free[s], run.stage_end_s[s])
            stream_free[s] = t0 + model.call_s(call)
            intervals[s].append((call.name, t0, stream_free[s]))
    return run, intervals


def _reduce_buckets(model, s: int, c: int, begin: float, end: float, stream_free: list,
                    intervals: list) -> None:
    """Chunk c's buckets on stage s's DP stream: each as soon as the last backward has passed its layers
    (at the pass's end without `overlap_grad_reduce`)."""
    chunk = model.program.chunk(s, c)
    n, done = len(chunk.layers), 0
    for k, bucket in enumerate(chunk.buckets):
        done += len(bucket.layers)
        at = begin + (end - begin) * done / n if model.options.overlap_grad_reduce else end
        t = sum(model.call_s(call) for call in bucket.reduce)
        if t <= 0:
            continue
        t0 = max(stream_free[s], at)
        stream_free[s] = t0 + t
        op = bucket.reduce[0].collective
        intervals[s].append((f"dp.{op}.chunk{c}.bucket{k}", t0, stream_free[s]))
