"""Where a simulated step's time goes, on every pipeline stage, and each stage's collectives.

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
collective, size) the calls per step, counted over its passes, buckets, sends and per-step calls.

Try it: `fabriclab whatif llm --model llama3-8b --cluster dgx-h100 --gpus 64 --tp 2 --pp 2 --gbs 128 --per-stage`.
"""

from __future__ import annotations

from fabriclab.whatif.llm.schedule import F
from fabriclab.whatif.llm.step import KINDS, PassCost, StepModel, StepResult, run_pipeline


def _passes(model: StepModel) -> dict[tuple[int, int, int], PassCost]:
    par = model.par
    return {(s, v, k): model.pass_cost(s, v, k) for s in range(par.pp) for v in range(par.vp) for k in (F, 1)}


def account(model: StepModel, *, p2p: bool = True) -> StepResult:
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


def stage_calls(program, stage: int):
    """(Call, calls per step) of every collective and message of one stage's program."""
    par = program.par
    for v in range(par.vp):
        chunk = program.chunk(stage, v)
        for kind in (F, 1):
            for lp in chunk.passes(kind):
                for op in (*lp.ops, *lp.gather, *lp.reduce):
                    if not hasattr(op, "linear_flops"):
                        yield op, par.num_microbatches
        for bucket in chunk.buckets:
            for call in (*bucket.reduce, *bucket.gather):
                yield call, 1
    for send in program.sends.get(stage, ()):
        yield send.call, send.count
    for call in program.step_calls.get(stage, ()):
        yield call, 1


def comm_log(model: StepModel, stage: int) -> list[dict]:
    """One stage's collectives: per (communicator, collective, size) its calls per step, time and algorithm."""
    log: dict[tuple, dict] = {}
    for call, count in stage_calls(model.program, stage):
        shape = model.comm.shapes[call.communicator]
        if call.size_bytes <= 0 or shape.num_gpus == 1:
            continue
        key = (call.communicator, call.collective, round(call.size_bytes))
        entry = log.get(key)
        if entry is None:
            entry = log[key] = {"communicator": call.communicator, "collective": call.collective,
                                "size_bytes": call.size_bytes, "calls_per_step": 0.0, "time_s": model.call_s(call)}
        entry["calls_per_step"] += count
    out = sorted(log.values(), key=lambda e: (e["communicator"], e["collective"], e["size_bytes"]))
    for entry in out:
        shape = model.comm.shapes[entry["communicator"]]
        entry.update(stage=stage, group=shape.describe(), group_size=shape.num_gpus,
                     algorithm=model.comm.algorithm(entry["communicator"], entry["collective"], entry["size_bytes"]))
    return out


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
