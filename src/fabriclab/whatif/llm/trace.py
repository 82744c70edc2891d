"""A simulated LLM step as a Chrome/Perfetto trace: one rank of the slowest pipeline stage, of any stage,
or of every stage (one process each).

Threads, the same a measured step of the LLM trainer writes so the two lie side by side: `compute` holds
one span per forward (F) or backward (B) pass of a model chunk and micro-batch, and inside it one span per
layer (from the step program's costs, `whatif/llm/step.py`: when the layer started in its pass and how
long its compute ran); `tp`, `cp`, `ep` and `dp` the exposed communication of each layer (laid after its
compute: the model knows how long it is exposed, not when inside the layer), `dp` also the stage's bucket
gathers and reductions as they run beside the passes, `optimizer` the optimizer step. Times in
microseconds. Standard library only.

Try it: `fabriclab whatif llm --model llama3-8b --gpus 16 --pp 2 --gbs 32 --trace step.json --trace-stage all`,
then open step.json in ui.perfetto.dev.
"""

from __future__ import annotations

import json
from pathlib import Path

THREADS = ("compute", "tp", "cp", "ep", "pp", "dp", "optimizer")
LAYER_NAMES = {-1: "embedding", -2: "output"}


def _us(seconds: float) -> float:
    return round(seconds * 1e6, 3)


def _stage_events(answer, s: int, pid: int) -> list[dict]:
    result, par = answer.result, answer.par
    tid = {name: i for i, name in enumerate(THREADS)}
    events: list[dict] = [{"name": "process_name", "ph": "M", "pid": pid, "tid": 0,
                           "args": {"name": f"simulated: {answer.spec.name}, {par.describe()}, stage {s}"}}]
    events += [{"name": "thread_name", "ph": "M", "pid": pid, "tid": i, "args": {"name": n}} for n, i in tid.items()]
    run = result.pipeline
    for (kind, chunk, mb), t0, t1 in zip(run.ops[s], run.start_s[s], run.end_s[s]):
        cost = result.passes[(s, chunk, kind)]
        name = f"{'FB'[kind]} chunk {chunk} mb {mb}"
        events.append({"name": name, "cat": "forward" if kind == 0 else "backward", "ph": "X", "pid": pid,
                       "tid": tid["compute"], "ts": _us(t0), "dur": _us(t1 - t0),
                       "args": {"chunk": chunk, "micro_batch": mb, "compute_s": cost.compute_s}})
        for layer, start, compute, exposed in cost.layers:
            label = LAYER_NAMES.get(layer, f"layer {layer}")
            events.append({"name": label, "cat": "layer", "ph": "X", "pid": pid, "tid": tid["compute"],
                           "ts": _us(t0 + start), "dur": _us(compute)})
            t = t0 + start + compute
            for comm, dur in exposed.items():
                if dur > 0:
                    events.append({"name": f"{comm} {label} {name}", "cat": comm, "ph": "X", "pid": pid,
                                   "tid": tid[comm], "ts": _us(t), "dur": _us(dur)})
                    t += dur
    for name, t0, t1 in result.dp_intervals[s]:
        events.append({"name": name, "cat": "dp", "ph": "X", "pid": pid, "tid": tid["dp"], "ts": _us(t0),
                       "dur": _us(t1 - t0)})
    end = result.step_time_s - result.optimizer_s
    events.append({"name": "optimizer step", "cat": "optimizer", "ph": "X", "pid": pid, "tid": tid["optimizer"],
                   "ts": _us(end), "dur": _us(result.optimizer_s)})
    return events


def step_trace(answer, stages=None) -> dict:
    """The trace as a JSON-ready dict: `stages` None (the slowest stage), "all", or a stage number."""
    result, par = answer.result, answer.par
    chosen = (list(range(par.pp)) if stages == "all" else
              [result.slowest_stage if stages is None else int(stages)])
    events = [e for pid, s in enumerate(chosen) for e in _stage_events(answer, s, pid)]
    return {"traceEvents": events, "displayTimeUnit": "ms",
            "otherData": {"kind": "simulated", "model": answer.spec.name, "parallel": par.describe(),
                          "stages": chosen, "stage": chosen[0], "step_time_s": result.step_time_s}}


def write_trace(answer, path: str | Path, *, stages=None) -> dict:
    """Write the trace to `path`; returns it."""
    trace = step_trace(answer, stages)
    Path(path).write_text(json.dumps(trace) + "\n")
    return trace
