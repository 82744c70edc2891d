"""Where a simulated step's time goes: compute, exposed communication per communicator, optimizer, bubble.

The step is the latest end over the pipeline stages (their last pass or their DP stream) plus the
optimizer step. It is split on that stage, and the parts add up to the step time:

* compute and the exposed TP / CP / EP (and ZeRO-3 DP) time: the sums over the stage's passes;
* DP: what the stage's gathers and reductions add beyond its passes (the stream's tail after the last
  backward, and a first forward held back by its gather);
* PP: the idle time the activations' sends add (the same schedule run with sends of zero time gives the
  idle time without them);
* bubble: the rest, the idle time the schedule's dependencies leave.

Try it: `fabriclab whatif llm --model llama3-8b --cluster dgx-h100 --gpus 64 --tp 2 --pp 2 --gbs 128`.
"""

from __future__ import annotations

from fabriclab.whatif.llm.schedule import F
from fabriclab.whatif.llm.step import PassCost, StepModel, StepResult, p2p_time, run_pipeline


def _passes(model: StepModel) -> dict[tuple[int, int, int], PassCost]:
    par = model.par
    return {(s, v, k): model.pass_cost(s, v, k) for s in range(par.pp) for v in range(par.vp) for k in (F, 1)}


def account(model: StepModel, *, p2p: bool = True) -> StepResult:
    par = model.par
    passes = _passes(model)
    p2p_s = p2p_time(model) if p2p else 0.0
    run, intervals = run_pipeline(model, p2p_s, passes)
    ends = [max([run.stage_end_s[s], *(e for _, _, e in intervals[s])]) for s in range(par.pp)]
    critical = max(range(par.pp), key=lambda s: (ends[s], -s))
    optimizer = model.optimizer_s()
    step = ends[critical] + optimizer
    # the costs again on the critical stage, logging each collective with its calls per step
    model.log.clear()
    model.logging = True
    for v in range(par.vp):
        for k in (F, 1):
            model.pass_cost(critical, v, k)
    if par.zero < 3 and par.dp * par.cp > 1:
        for v in range(par.vp):
            dense, expert = model.chunk_params(critical, v)
            if par.zero >= 1:
                model._gather(dense, expert, 1)
            model._reduce(dense, expert, 1)
    if p2p:
        p2p_time(model)
    model.logging = False
    split = _split(model, passes, run, critical, ends[critical], optimizer, p2p_s)
    comm = sorted(model.log.values(), key=lambda e: (e["communicator"], e["collective"], e["size_bytes"]))
    for entry in comm:
        shape = model.comm.shapes[entry["communicator"]]
        entry.update(group=shape.describe(), group_size=shape.num_gpus,
                     algorithm=model.comm.algorithm(entry["communicator"], entry["collective"], entry["size_bytes"]))
    return StepResult(step_time_s=step, split_s=split, comm=comm, pipeline=run, critical_stage=critical,
                      passes=passes, dp_intervals=intervals, optimizer_s=optimizer)


def _split(model: StepModel, passes, run, s: int, end_s: float, optimizer: float, p2p_s: float) -> dict[str, float]:
    par = model.par
    split = {k: 0.0 for k in ("compute", "tp", "cp", "ep", "pp", "dp", "optimizer", "bubble")}
    busy = 0.0
    for kind, c, _ in run.ops[s]:
        cost = passes[(s, c, kind)]
        split["compute"] += cost.compute_s
        for name, t in cost.exposed_s.items():
            split[name] += t
        busy += cost.total_s
    # time the passes took beyond their costs: a forward held back by its parameters' gather
    held = sum(e - b for b, e in zip(run.start_s[s], run.end_s[s])) - busy
    split["dp"] += max(0.0, held) + max(0.0, end_s - run.stage_end_s[s])
    idle = run.stage_end_s[s] - sum(e - b for b, e in zip(run.start_s[s], run.end_s[s]))
    if p2p_s > 0:
        quiet, _ = run_pipeline(model, 0.0, passes)
        idle_quiet = quiet.stage_end_s[s] - sum(e - b for b, e in zip(quiet.start_s[s], quiet.end_s[s]))
        split["pp"] = min(max(0.0, idle - idle_quiet), idle)
    split["bubble"] = max(0.0, idle - split["pp"])
    split["optimizer"] = optimizer
    # parts that overlap the idle time of another (a held-back forward) are counted once
    total = sum(split.values())
    split["bubble"] = max(0.0, split["bubble"] - (total - (end_s + optimizer)))
    return split
